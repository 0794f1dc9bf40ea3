/* DCTCP for the linux backend (Alizadeh et al., SIGCOMM 2010; RFC 8257), for
 * kernels built without tcp_dctcp. It follows the rules the simulator's
 * cc/dctcp.rs follows (Linux's tcp_dctcp.c: alpha from delivered and
 * delivered_ce once per window with g = 1/16, ssthresh = cwnd - cwnd alpha /
 * 2048, a halving on loss, undo to the cwnd before the cut); written for
 * ccarena. Registered as "dctcp" with TCP_CONG_NEEDS_ECN, so that its
 * connections negotiate ECN whatever net.ipv4.tcp_ecn says and send ECT.
 *
 * The same program is the receiver's half: on the socket that receives, the
 * kernel reports each data segment's ECN codepoint to cwnd_event
 * (CA_EVENT_ECN_IS_CE / ECN_NO_CE), and ECE is set to exactly that state,
 * with an immediate ACK of the data before a change (bpf_tcp_send_ack). The
 * linux backend makes dctcp the receiving namespace's default, so that the
 * listener and the connections it accepts run it (a namespace may only do
 * that with a non-restricted algorithm: hence TCP_CONG_NON_RESTRICTED).
 *
 * Differences from the kernel module: no fallback to Reno when the peer
 * refuses ECN (the backend always negotiates it), no PLB, and no get_info
 * (BPF congestion control may not provide it), so ss shows no dctcp line. */
#include "ccarena_ca.h"

char _license[] SEC("license") = "GPL"; /* kfuncs and struct_ops require a GPL-compatible licence */

/* Values of the kernel's #defines (include/net/tcp.h), absent from BTF. */
#define TCP_ECN_DEMAND_CWR 4
#define TCP_CONG_NON_RESTRICTED 0x1
#define TCP_CONG_NEEDS_ECN 0x2

#define MAX_ALPHA 1024U /* alpha = 1 */
#define SHIFT_G 4       /* g = 1/16 */

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;

struct dctcp_state {
    __u32 old_delivered;    /* tp->delivered at the start of the window */
    __u32 old_delivered_ce; /* tp->delivered_ce at the start of the window */
    __u32 next_seq;         /* the window ends when snd_una reaches it */
    __u32 alpha;            /* x 1024 */
    __u32 loss_cwnd;        /* cwnd before the last cut, for undo */
    __u32 prior_rcv_nxt;    /* receiver: rcv_nxt after the last segment */
    __u32 ce_state;         /* receiver: the last segment was CE */
};

static __always_inline void new_window(const struct tcp_sock *tp, struct dctcp_state *ca) {
    ca->next_seq = tp->snd_nxt;
    ca->old_delivered = tp->delivered;
    ca->old_delivered_ce = tp->delivered_ce;
}

SEC("struct_ops/dctcp_init")
void BPF_PROG(dctcp_init, struct sock *sk) {
    struct tcp_sock *tp = tcp_of(sk);
    struct dctcp_state *ca = ca_priv(sk);
    ca->alpha = MAX_ALPHA; /* full congestion until a window is measured */
    ca->loss_cwnd = 0;
    ca->ce_state = 0;
    ca->prior_rcv_nxt = tp->rcv_nxt;
    new_window(tp, ca);
}

/* ssthresh for a window of `cwnd` (the stack asks with cwnd = snd_cwnd). */
static __always_inline __u32 dctcp_ssthresh_for(struct sock *sk, __u32 cwnd) {
    struct dctcp_state *ca = ca_priv(sk);
    ca->loss_cwnd = cwnd;
    return max_u32(cwnd - (__u32)(((__u64)cwnd * ca->alpha) >> 11), 2);
}

/* Once per window: alpha -= alpha / 16 (all of it below 16, so it can reach
 * 0), then += (marked / delivered) / 16, both x 1024. */
SEC("struct_ops/dctcp_in_ack_event")
void BPF_PROG(dctcp_in_ack_event, struct sock *sk, __u32 flags) {
    REPAIR_SKIPPED_HOOKS(sk, dctcp_ssthresh_for);
    struct tcp_sock *tp = tcp_of(sk);
    struct dctcp_state *ca = ca_priv(sk);
    if ((__s32)(tp->snd_una - ca->next_seq) < 0)
        return;
    __u32 delivered = tp->delivered - ca->old_delivered;
    __u32 marked = tp->delivered_ce - ca->old_delivered_ce;
    __u32 alpha = ca->alpha;
    __u32 decay = alpha >> SHIFT_G;
    alpha -= decay ? decay : alpha;
    if (marked) {
        __u32 add = (marked << (10 - SHIFT_G)) / (delivered ? delivered : 1);
        alpha = alpha + add < MAX_ALPHA ? alpha + add : MAX_ALPHA;
    }
    ca->alpha = alpha;
    new_window(tp, ca);
}

SEC("struct_ops/dctcp_ssthresh")
__u32 BPF_PROG(dctcp_ssthresh, struct sock *sk) {
    return dctcp_ssthresh_for(sk, tcp_of(sk)->snd_cwnd);
}

static __always_inline void halve_on_loss(struct sock *sk) {
    struct tcp_sock *tp = tcp_of(sk);
    struct dctcp_state *ca = ca_priv(sk);
    ca->loss_cwnd = tp->snd_cwnd;
    tp->snd_ssthresh = max_u32(tp->snd_cwnd >> 1, 2);
}

SEC("struct_ops/dctcp_set_state")
void BPF_PROG(dctcp_set_state, struct sock *sk, __u8 new_state) {
    if (new_state == TCP_CA_Recovery && ca_state(sk) != TCP_CA_Recovery)
        halve_on_loss(sk);
}

/* ECE follows the CE state of the newest segment. */
static __always_inline void set_ece(struct tcp_sock *tp, __u32 ce) {
    if (ce)
        tp->ecn_flags |= TCP_ECN_DEMAND_CWR;
    else
        tp->ecn_flags &= ~TCP_ECN_DEMAND_CWR;
}

SEC("struct_ops/dctcp_cwnd_event")
void BPF_PROG(dctcp_cwnd_event, struct sock *sk, enum tcp_ca_event ev) {
    struct tcp_sock *tp = tcp_of(sk);
    struct dctcp_state *ca = ca_priv(sk);
    if (ev == CA_EVENT_LOSS) {
        halve_on_loss(sk);
        return;
    }
    if (ev != CA_EVENT_ECN_IS_CE && ev != CA_EVENT_ECN_NO_CE)
        return;
    __u32 ce = ev == CA_EVENT_ECN_IS_CE;
    struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
    if (ce != ca->ce_state) {
        /* A delayed ACK is pending: it goes now, for the data before the
         * change and with the old state; the new segment is ACKed at once. */
        if (icsk->icsk_ack.pending & ICSK_ACK_TIMER) {
            set_ece(tp, ca->ce_state);
            bpf_tcp_send_ack(sk, ca->prior_rcv_nxt);
        }
        icsk->icsk_ack.pending |= ICSK_ACK_NOW;
    }
    ca->prior_rcv_nxt = tp->rcv_nxt;
    ca->ce_state = ce;
    set_ece(tp, ce);
}

SEC("struct_ops/dctcp_cong_avoid")
void BPF_PROG(dctcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked) {
    tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops/dctcp_undo_cwnd")
__u32 BPF_PROG(dctcp_undo_cwnd, struct sock *sk) {
    struct dctcp_state *ca = ca_priv(sk);
    return max_u32(tcp_of(sk)->snd_cwnd, ca->loss_cwnd);
}

SEC(".struct_ops")
struct tcp_congestion_ops ccarena_dctcp = {
    .init = (void *)dctcp_init,
    .in_ack_event = (void *)dctcp_in_ack_event,
    .cwnd_event = (void *)dctcp_cwnd_event,
    .ssthresh = (void *)dctcp_ssthresh,
    .cong_avoid = (void *)dctcp_cong_avoid,
    .undo_cwnd = (void *)dctcp_undo_cwnd,
    .set_state = (void *)dctcp_set_state,
    /* Non-restricted: a network namespace other than the host's may make it
     * its default (the receiver's, for its listener). */
    .flags = TCP_CONG_NEEDS_ECN | TCP_CONG_NON_RESTRICTED,
    .name = "dctcp",
};
