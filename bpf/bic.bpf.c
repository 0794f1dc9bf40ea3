/* BIC-TCP (Xu, Harfoush, Rhee, INFOCOM 2004) as Linux's `bic` behaves
 * (behaviour as restated in shared/reference/ccas.md section 2.3; written for
 * ccarena, not derived from the kernel's source). Registered as "bic" when the
 * running kernel has no bic of its own.
 *
 * Window growth after a loss is a binary search towards the last maximum
 * (Wmax): +dist packets per RTT with dist = (Wmax - cwnd) / B, at most +16
 * (linear increase) and at least +0.2 (smoothing near Wmax); past Wmax a slow
 * then accelerating "max probing". Below 14 packets it behaves as Reno. */
#include "ccarena_ca.h"

char _license[] SEC("license") = "GPL"; /* kfuncs and struct_ops require a GPL-compatible licence */

/* Constants of tcp_bic.c (Linux defaults). */
#define BETA_SCALE 1024
#define BIC_B 4              /* binary-search divisor */
#define BETA 819             /* multiplicative decrease 819/1024 = 0.8 */
#define MAX_INCREMENT 16     /* packets per RTT, linear-increase cap */
#define LOW_WINDOW 14        /* Reno below this window */
#define SMOOTH_PART 20       /* +B/20 packets per RTT near Wmax */
#define FAST_CONVERGENCE 1
#define ACK_RATIO_SHIFT 4    /* delayed-ACK ratio kept in 1/16 units */

struct bic {
    __u32 cnt;           /* increase cwnd by 1 after cnt ACKed packets */
    __u32 last_max_cwnd; /* Wmax */
    __u32 last_cwnd;
    __u32 last_time;     /* jiffies of the last update */
    __u32 epoch_start;
    __u32 delayed_ack;   /* packets per ACK, x16 */
};

static __always_inline void bic_reset(struct bic *ca) {
    ca->cnt = 0;
    ca->last_max_cwnd = 0;
    ca->last_cwnd = 0;
    ca->last_time = 0;
    ca->epoch_start = 0;
    ca->delayed_ack = 2 << ACK_RATIO_SHIFT;
}

SEC("struct_ops/bic_init")
void BPF_PROG(bic_init, struct sock *sk) {
    bic_reset(ca_priv(sk));
}

/* Recomputes cnt for the current window. */
static __always_inline void bic_update(struct bic *ca, __u32 cwnd) {
    __u32 now = jiffies32();
    if (ca->last_cwnd == cwnd && (__s32)(now - ca->last_time) <= (__s32)(CONFIG_HZ / 32))
        return;
    ca->last_cwnd = cwnd;
    ca->last_time = now;
    if (ca->epoch_start == 0)
        ca->epoch_start = now;

    __u32 cnt;
    __u32 wmax = ca->last_max_cwnd;
    if (cwnd <= LOW_WINDOW) {
        ca->cnt = cwnd;
        return;
    }
    if (cwnd < wmax) {
        __u32 dist = (wmax - cwnd) / BIC_B;
        if (dist > MAX_INCREMENT)
            cnt = cwnd / MAX_INCREMENT;
        else if (dist <= 1)
            cnt = cwnd * SMOOTH_PART / BIC_B;
        else
            cnt = cwnd / dist;
    } else {
        if (cwnd < wmax + BIC_B)
            cnt = cwnd * SMOOTH_PART / BIC_B;
        else if (cwnd < wmax + MAX_INCREMENT * (BIC_B - 1))
            cnt = cwnd * (BIC_B - 1) / (cwnd - wmax);
        else
            cnt = cwnd / MAX_INCREMENT;
    }
    if (wmax == 0 && cnt > 20)
        cnt = 20; /* no loss yet: grow at least 1 packet per 20 ACKed */
    cnt = (cnt << ACK_RATIO_SHIFT) / (ca->delayed_ack ? ca->delayed_ack : 1);
    ca->cnt = cnt ? cnt : 1;
}

/* ssthresh for a window of `cwnd` (the stack asks with cwnd = snd_cwnd). */
static __always_inline __u32 bic_ssthresh_for(struct sock *sk, __u32 cwnd) {
    struct bic *ca = ca_priv(sk);
    ca->epoch_start = 0;
    if (cwnd < ca->last_max_cwnd && FAST_CONVERGENCE)
        ca->last_max_cwnd = cwnd * (BETA_SCALE + BETA) / (2 * BETA_SCALE);
    else
        ca->last_max_cwnd = cwnd;
    if (cwnd <= LOW_WINDOW)
        return max_u32(cwnd >> 1, 2);
    return max_u32(cwnd * BETA / BETA_SCALE, 2);
}

SEC("struct_ops/bic_cong_avoid")
void BPF_PROG(bic_cong_avoid, struct sock *sk, __u32 ack, __u32 acked) {
    struct tcp_sock *tp = tcp_of(sk);
    struct bic *ca = ca_priv(sk);
    if (!cwnd_limited(tp))
        return;
    if (in_slow_start(tp)) {
        acked = tcp_slow_start(tp, acked);
        if (!acked)
            return;
    }
    bic_update(ca, tp->snd_cwnd);
    tcp_cong_avoid_ai(tp, ca->cnt, acked);
}

#ifdef CCARENA_INJECT_SKIPPED_HOOKS
/* A test build (tests/test_linux.py) that answers every third ssthresh as a
 * skipped hook does, without running the algorithm's ssthresh: in turn with
 * the socket's address bits, those bits grown by a few segments (as the
 * stack may grow them before the guard runs), and a stray value of some
 * hundred thousand segments. The guard must repair each such answer. */
__u64 ssthresh_calls = 0;
#define CCA_NAME "bic_skipped"
#else
#define CCA_NAME "bic"
#endif

SEC("struct_ops/bic_ssthresh")
__u32 BPF_PROG(bic_ssthresh, struct sock *sk) {
#ifdef CCARENA_INJECT_SKIPPED_HOOKS
    __u64 call = __sync_fetch_and_add(&ssthresh_calls, 1);
    if (call % 3 == 2) {
        __u64 kind = (call / 3) % 3;
        return kind == 0 ? address_bits(sk) : kind == 1 ? address_bits(sk) + 37 : 200000 + (__u32)call;
    }
#endif
    return bic_ssthresh_for(sk, tcp_of(sk)->snd_cwnd);
}

SEC("struct_ops/bic_set_state")
void BPF_PROG(bic_set_state, struct sock *sk, __u8 new_state) {
    if (new_state == TCP_CA_LOSS)
        bic_reset(ca_priv(sk));
}

SEC("struct_ops/bic_pkts_acked")
void BPF_PROG(bic_pkts_acked, struct sock *sk, const struct ack_sample *sample) {
    REPAIR_SKIPPED_HOOKS(sk, bic_ssthresh_for);
    struct bic *ca = ca_priv(sk);
    if (ca_state(sk) == TCP_CA_OPEN)
        ca->delayed_ack += sample->pkts_acked - (ca->delayed_ack >> ACK_RATIO_SHIFT);
}

SEC("struct_ops/bic_undo_cwnd")
__u32 BPF_PROG(bic_undo_cwnd, struct sock *sk) {
    return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops ccarena_bic = {
    .init = (void *)bic_init,
    .ssthresh = (void *)bic_ssthresh,
    .cong_avoid = (void *)bic_cong_avoid,
    .set_state = (void *)bic_set_state,
    .pkts_acked = (void *)bic_pkts_acked,
    .undo_cwnd = (void *)bic_undo_cwnd,
    .name = CCA_NAME,
};
