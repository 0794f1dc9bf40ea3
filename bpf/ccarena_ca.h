/* Shared helpers for ccarena's BPF congestion-control programs (struct_ops
 * tcp_congestion_ops). Each algorithm is one file beside this one; the build
 * (`make linux-tools`) generates vmlinux.h from the running kernel's BTF.
 *
 * The kernel exports a few of its own TCP helpers to BPF congestion control
 * as kfuncs (tcp_slow_start, tcp_cong_avoid_ai, tcp_reno_undo_cwnd): we call
 * them rather than re-implementing them, so slow start and additive increase
 * are the kernel's. Everything else here is written for ccarena. */
#ifndef CCARENA_CA_H
#define CCARENA_CA_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define TCP_CA_OPEN 0
#define TCP_CA_LOSS 4

extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;
extern void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern unsigned long CONFIG_HZ __kconfig;

static __always_inline struct tcp_sock *tcp_of(struct sock *sk) { return (struct tcp_sock *)sk; }

/* The algorithm's private state lives in the socket's icsk_ca_priv area. */
static __always_inline void *ca_priv(struct sock *sk) {
    return (void *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline int in_slow_start(const struct tcp_sock *tp) {
    return tp->snd_cwnd < tp->snd_ssthresh;
}

/* Linux's tcp_is_cwnd_limited: the flag the stack keeps per window, or, in
 * slow start, cwnd < 2 x the most packets out in the last window. */
static __always_inline int cwnd_limited(const struct tcp_sock *tp) {
    if (tp->is_cwnd_limited)
        return 1;
    if (in_slow_start(tp))
        return tp->snd_cwnd < 2 * tp->max_packets_out;
    return 0;
}

static __always_inline __u8 ca_state(struct sock *sk) {
    return ((struct inet_connection_sock *)sk)->icsk_ca_state;
}

static __always_inline __u32 jiffies32(void) { return (__u32)bpf_jiffies64(); }

static __always_inline __u32 max_u32(__u32 a, __u32 b) { return a > b ? a : b; }

#endif
