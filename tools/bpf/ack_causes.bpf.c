/* Why each ACK of a data receiver leaves, from tracepoints alone (no
 * capture): tools/kernel_ack_causes.py loads this with loader.c.
 *
 * Every event carries the receiving socket's window state at that moment
 * (rcv_nxt, rcv_wup, copied_seq, the last advertised window, the buffer and
 * the memory charged to it, the payload-to-truesize scaling ratio, the
 * window scale), so the window test of `__tcp_ack_snd_check` can be
 * recomputed afterwards and checked against what the kernel did.
 *
 *   arrival     tcp:tcp_probe at the top of tcp_rcv_established, for an skb
 *               that carries data (its seq, end_seq and truesize);
 *   readable    sock:sk_data_ready, after in-order data is queued;
 *   read        tcp:tcp_rcv_space_adjust, inside tcp_recvmsg before
 *               tcp_cleanup_rbuf decides on an ACK;
 *   read done   sock:sock_recv_length (the bytes returned, or -errno);
 *   ack         net:net_dev_queue of an skb the socket sent, with what
 *               last happened to the socket on this CPU: an arrival or a
 *               read (anything else: a timer or another socket).
 *
 * Only sockets on iperf3's ports (5201-5300, the linux backend's servers)
 * are recorded. tp_btf programs, since this kernel kind has no kprobes.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL"; /* tracing programs require a GPL-compatible licence */

enum kind { ARRIVAL = 0, READABLE = 1, READ = 2, ACK = 3, READ_DONE = 4 };
enum { OTHER_SOCKET = 14 };

/* 80 bytes; kernel_ack_causes.py's RECORD mirrors it. */
struct record {
	u64 t_ns;
	u32 kind;
	u32 before;	/* ACK: the socket's last event on this CPU */
	u16 local_port, remote_port;
	u32 rcv_nxt, rcv_wup, copied_seq, rcv_wnd, rcv_ssthresh, window_clamp;
	s32 rcvbuf, rmem_alloc, backlog_len;
	u32 a, b, c;	/* arrival: seq, end_seq, truesize; read done: bytes; ack: skb len */
	u16 rcv_mss;
	u8 scaling_ratio, rcv_wscale, ack_pending, quick, ofo_queued, cpu;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 20);
} records SEC(".maps");

/* Records the ring had no room for (the loader reports them). */
__u64 dropped = 0;

/* Per CPU: (socket id << 4) | kind of the last arrival or read seen. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} last_event SEC(".maps");

static __always_inline u32 socket_id(const struct sock *sk)
{
	return ((u32)BPF_CORE_READ(sk, __sk_common.skc_num) << 16) |
	       bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
}

static __always_inline bool is_server(const struct sock *sk)
{
	u16 port;

	if (!sk)
		return false;
	port = BPF_CORE_READ(sk, __sk_common.skc_num);
	return port >= 5201 && port < 5301;
}

static __always_inline void remember(const struct sock *sk, u32 kind)
{
	u32 zero = 0;
	u64 *last = bpf_map_lookup_elem(&last_event, &zero);

	if (last)
		*last = ((u64)socket_id(sk) << 4) | kind;
}

static __always_inline u32 recalled(const struct sock *sk)
{
	u32 zero = 0;
	u64 *last = bpf_map_lookup_elem(&last_event, &zero);

	if (!last || (*last >> 4) != (u64)socket_id(sk))
		return OTHER_SOCKET;
	return *last & 0xf;
}

static __always_inline void record(const struct sock *sk, u32 kind, u32 before, u32 a, u32 b, u32 c)
{
	const struct tcp_sock *tp = (const struct tcp_sock *)sk;
	const struct inet_connection_sock *icsk = (const struct inet_connection_sock *)sk;
	struct record *r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);

	if (!r) {
		__sync_fetch_and_add(&dropped, 1);
		return;
	}
	r->t_ns = bpf_ktime_get_ns();
	r->kind = kind;
	r->before = before;
	r->local_port = BPF_CORE_READ(sk, __sk_common.skc_num);
	r->remote_port = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	r->rcv_nxt = BPF_CORE_READ(tp, rcv_nxt);
	r->rcv_wup = BPF_CORE_READ(tp, rcv_wup);
	r->copied_seq = BPF_CORE_READ(tp, copied_seq);
	r->rcv_wnd = BPF_CORE_READ(tp, rcv_wnd);
	r->rcv_ssthresh = BPF_CORE_READ(tp, rcv_ssthresh);
	r->window_clamp = BPF_CORE_READ(tp, window_clamp);
	r->rcvbuf = BPF_CORE_READ(sk, sk_rcvbuf);
	r->rmem_alloc = BPF_CORE_READ(sk, sk_backlog.rmem_alloc.counter);
	r->backlog_len = BPF_CORE_READ(sk, sk_backlog.len);
	r->a = a;
	r->b = b;
	r->c = c;
	r->rcv_mss = BPF_CORE_READ(icsk, icsk_ack.rcv_mss);
	r->scaling_ratio = BPF_CORE_READ(tp, scaling_ratio);
	r->rcv_wscale = BPF_CORE_READ_BITFIELD_PROBED(tp, rx_opt.rcv_wscale);
	r->ack_pending = BPF_CORE_READ(icsk, icsk_ack.pending);
	r->quick = BPF_CORE_READ(icsk, icsk_ack.quick);
	r->ofo_queued = BPF_CORE_READ(tp, out_of_order_queue.rb_node) != NULL;
	r->cpu = bpf_get_smp_processor_id();
	bpf_ringbuf_submit(r, 0);
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(on_arrival, struct sock *sk, struct sk_buff *skb)
{
	const struct tcp_skb_cb *cb = (const struct tcp_skb_cb *)&skb->cb[0];
	u32 seq, end_seq;

	if (!is_server(sk))
		return 0;
	seq = BPF_CORE_READ(cb, seq);
	end_seq = BPF_CORE_READ(cb, end_seq);
	if (seq == end_seq)	/* no data: an ACK of the control connection */
		return 0;
	remember(sk, ARRIVAL);
	record(sk, ARRIVAL, 0, seq, end_seq, BPF_CORE_READ(skb, truesize));
	return 0;
}

SEC("tp_btf/sk_data_ready")
int BPF_PROG(on_readable, const struct sock *sk)
{
	if (is_server(sk))
		record(sk, READABLE, recalled(sk), 0, 0, 0);
	return 0;
}

SEC("tp_btf/tcp_rcv_space_adjust")
int BPF_PROG(on_read, struct sock *sk)
{
	if (!is_server(sk))
		return 0;
	remember(sk, READ);
	record(sk, READ, 0, 0, 0, 0);
	return 0;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(on_read_done, struct sock *sk, int ret, int flags)
{
	if (!is_server(sk))
		return 0;
	remember(sk, READ_DONE);
	record(sk, READ_DONE, 0, (u32)ret, 0, 0);
	return 0;
}

SEC("tp_btf/net_dev_queue")
int BPF_PROG(on_xmit, struct sk_buff *skb)
{
	struct sock *sk = BPF_CORE_READ(skb, sk);

	if (!is_server(sk) || BPF_CORE_READ(sk, __sk_common.skc_state) != 1 /* TCP_ESTABLISHED */)
		return 0;
	record(sk, ACK, recalled(sk), 0, 0, BPF_CORE_READ(skb, len));
	return 0;
}
