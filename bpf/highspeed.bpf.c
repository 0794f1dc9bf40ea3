/* HighSpeed TCP (RFC 3649) as Linux's `highspeed` behaves (behaviour as
 * restated in shared/reference/ccas.md section 2.4; written for ccarena, not
 * derived from the kernel's source). Registered as "highspeed" when the
 * running kernel has none of its own.
 *
 * Above 38 packets the additive increase a(w) grows and the decrease b(w)
 * shrinks with the window, read from the RFC's Appendix-B table as Linux
 * tabulates it: row i applies up to cwnd_max[i] packets, gives a(w) = i + 1
 * packets per RTT (added per ACK, as Linux does) and b(w) = md[i] / 256.
 * Limit: Linux also clamps snd_cwnd_clamp to 2^32/128, which BPF congestion
 * control may not write; it only matters above 33 million packets. */
#include "ccarena_ca.h"

char _license[] SEC("license") = "GPL"; /* kfuncs and struct_ops require a GPL-compatible licence */

#define ROWS 72

/* RFC 3649 Appendix B, as tabulated in Linux's tcp_highspeed.c (hstcp_aimd_vals). */
static const __u32 cwnd_max[ROWS] = {
    38, 118, 221, 347, 495, 663, 851, 1058, 1284, 1529, 1793, 2076, 2378, 2699, 3039, 3399,
    3778, 4177, 4596, 5036, 5497, 5979, 6483, 7009, 7558, 8130, 8726, 9346, 9991, 10661,
    11358, 12082, 12834, 13614, 14424, 15265, 16137, 17042, 17981, 18955, 19965, 21013,
    22101, 23230, 24402, 25618, 26881, 28193, 29557, 30975, 32450, 33986, 35586, 37253,
    38992, 40808, 42707, 44694, 46776, 48961, 51258, 53677, 56230, 58932, 61799, 64851,
    68113, 71617, 75401, 79517, 84035, 89053,
};
static const __u8 md[ROWS] = {
    128, 112, 104, 98, 93, 89, 86, 83, 81, 78, 76, 74, 72, 71, 69, 68, 66, 65, 64, 62, 61,
    60, 59, 58, 57, 56, 55, 54, 53, 52, 52, 51, 50, 49, 48, 48, 47, 46, 45, 45, 44, 43, 43,
    42, 41, 41, 40, 39, 39, 38, 38, 37, 36, 36, 35, 35, 34, 33, 33, 32, 32, 31, 30, 30, 29,
    28, 28, 27, 26, 26, 25, 24,
};

struct hstcp {
    __u32 ai; /* current table row */
};

SEC("struct_ops/hs_init")
void BPF_PROG(hs_init, struct sock *sk) {
    struct hstcp *ca = ca_priv(sk);
    ca->ai = 0;
}

/* ssthresh for a window of `cwnd` (the stack asks with cwnd = snd_cwnd). */
static __always_inline __u32 hs_ssthresh_for(struct sock *sk, __u32 cwnd) {
    struct hstcp *ca = ca_priv(sk);
    __u32 ai = ca->ai < ROWS ? ca->ai : ROWS - 1;
    return max_u32(cwnd - ((cwnd * md[ai]) >> 8), 2);
}

SEC("struct_ops/hs_cong_avoid")
void BPF_PROG(hs_cong_avoid, struct sock *sk, __u32 ack, __u32 acked) {
    struct tcp_sock *tp = tcp_of(sk);
    struct hstcp *ca = ca_priv(sk);
    if (!cwnd_limited(tp))
        return;
    if (in_slow_start(tp)) {
        tcp_slow_start(tp, acked); /* the row is not updated in slow start */
        return;
    }
    __u32 cwnd = tp->snd_cwnd;
    /* The row with cwnd_max[ai - 1] < cwnd <= cwnd_max[ai] (the last row
     * above the table). Linux moves there one row at a time; the result is
     * the same, and a fixed scan is what the BPF verifier can bound. */
    __u32 ai = 0;
    for (int i = 0; i < ROWS - 1; i++)
        if (cwnd > cwnd_max[i])
            ai = i + 1;
    ca->ai = ai;
    /* a(w) = ai + 1 packets per window, credited per ACK. */
    tp->snd_cwnd_cnt += ai + 1;
    if (tp->snd_cwnd_cnt >= cwnd) {
        tp->snd_cwnd_cnt -= cwnd;
        tp->snd_cwnd = cwnd + 1;
    }
}

SEC("struct_ops/hs_ssthresh")
__u32 BPF_PROG(hs_ssthresh, struct sock *sk) {
    return hs_ssthresh_for(sk, tcp_of(sk)->snd_cwnd);
}

/* Only the guard of ccarena_ca.h: the stack calls this hook on every ACK. */
SEC("struct_ops/hs_pkts_acked")
void BPF_PROG(hs_pkts_acked, struct sock *sk, const struct ack_sample *sample) {
    REPAIR_SKIPPED_HOOKS(sk, hs_ssthresh_for);
}

SEC("struct_ops/hs_undo_cwnd")
__u32 BPF_PROG(hs_undo_cwnd, struct sock *sk) {
    return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops ccarena_hstcp = {
    .init = (void *)hs_init,
    .ssthresh = (void *)hs_ssthresh,
    .cong_avoid = (void *)hs_cong_avoid,
    .undo_cwnd = (void *)hs_undo_cwnd,
    .pkts_acked = (void *)hs_pkts_acked,
    .name = "highspeed",
};
