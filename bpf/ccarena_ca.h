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

/* A guard against a fault of the kernel this project is developed on (6.18
 * in a virtual machine): now and then a struct_ops hook returns without its
 * program having run, when the stack's softirq runs on top of one of the
 * machine's own service threads. A skipped void hook loses one call; a
 * skipped ssthresh or undo_cwnd hands the stack the low 32 bits of the
 * socket's address (or, seen later, another stray value) instead of a
 * window, which becomes cwnd and lets the flow
 * send all the receive window allows (docs/linux-backend.md, "Known fault").
 * That value cannot be a window the algorithm chose, so one hook the stack
 * calls on every ACK before it grows or cuts the window (pkts_acked, or
 * DCTCP's in_ack_event) calls REPAIR_SKIPPED_HOOKS first: it puts back what
 * the skipped hook would have answered. ssthresh is computed from prior_cwnd,
 * the window the stack saved just before asking for it; an end of recovery
 * that set cwnd to the bad ssthresh gets the repaired one; a skipped undo
 * gets prior_cwnd, the window before the reduction it undoes. Repairs are
 * counted in the object's .bss (`hook_repairs`); the linux backend reads the
 * count before it unregisters the algorithm and reports it with the run. */
__u64 hook_repairs = 0;

/* The low 32 bits of the socket's address, the fault's usual value (the
 * test build answers with it; the verifier forbids turning a pointer into a
 * number by arithmetic, a copy of its bytes is a number). */
#ifdef CCARENA_INJECT_SKIPPED_HOOKS
static __always_inline __u32 address_bits(struct sock *sk) {
    __u64 bits = 0;
    bpf_probe_read_kernel(&bits, sizeof(bits), &sk);
    return (__u32)bits;
}
#endif

/* Whether a window came from the fault. First seen as the address bits
 * themselves, then (2026-11-29, a quiet hour) as those bits grown by a few
 * slow-start ACKs before the guard ran, and as values of 0.13-11 million
 * segments that are no address at all. What they share: no algorithm here
 * could have grown a window that far. A window grows only while it limits
 * the flight (`cwnd_limited`: in slow start, cwnd < 2 x max_packets_out),
 * by at most what one ACK covers, and neither the flight nor an ACK exceeds
 * the largest window the receiver offered (`max_window`): so a cwnd or
 * ssthresh above three times that (in segments) is the fault's (never the
 * initial ssthresh, TCP_INFINITE_SSTHRESH). */
static __always_inline __u32 window_bound(const struct tcp_sock *tp) {
    return 3 * (tp->max_window / max_u32(tp->mss_cache, 1)) + 128;
}

static __always_inline int beyond_bound(__u32 window, __u32 bound) {
    return window > bound && window != 0x7FFFFFFF;
}

#define REPAIR_SKIPPED_HOOKS(sk, ssthresh_for)                              \
    do {                                                                    \
        struct tcp_sock *tp_ = tcp_of(sk);                                  \
        __u32 bound_ = window_bound(tp_);                                   \
        int bad_ssthresh_ = beyond_bound(tp_->snd_ssthresh, bound_);       \
        int bad_cwnd_ = beyond_bound(tp_->snd_cwnd, bound_);               \
        if (bad_ssthresh_ || bad_cwnd_) {                                   \
            /* The window before the reduction, unless it is bad too. */    \
            __u32 before_ = beyond_bound(tp_->prior_cwnd, bound_)           \
                                ? tp_->max_packets_out : tp_->prior_cwnd;   \
            if (bad_ssthresh_) {                                            \
                tp_->snd_ssthresh = ssthresh_for(sk, before_);              \
                if (bad_cwnd_)                                              \
                    tp_->snd_cwnd = tp_->snd_ssthresh;                      \
            } else {                                                        \
                tp_->snd_cwnd = max_u32(before_, 2);                        \
            }                                                               \
            __sync_fetch_and_add(&hook_repairs, 1);                         \
        }                                                                   \
    } while (0)

#endif
