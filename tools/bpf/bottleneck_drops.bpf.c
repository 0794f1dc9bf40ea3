/* Which flow's skbs a Linux router's tbf queue takes and turns away, from
 * tracepoints alone (no capture): tools/kernel_bottleneck_drops.py loads
 * this with loader.c.
 *
 *   enqueue   qdisc:qdisc_enqueue, which dev_qdisc_enqueue fires after a
 *             root qdisc took an skb, for a root tbf;
 *   drop      skb:kfree_skb with a qdisc's drop reason, for an skb whose
 *             device's root qdisc is a tbf (the reason is tested first:
 *             kfree_skb fires for every skb the machine frees).
 *
 * Each record carries the skb's IPv4 addresses and TCP ports, its bytes
 * and segments (a GRO or GSO skb's gso_segs), and the tbf's backlog after
 * the enqueue or at the drop. tp_btf programs, since this kernel kind has
 * no kprobes.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL"; /* tracing programs require a GPL-compatible licence */

enum record_kind { KIND_ENQUEUE = 0, KIND_DROP = 1 };

/* 56 bytes; kernel_bottleneck_drops.py's RECORD mirrors it. */
struct record {
	u64 t_ns;
	u32 kind;
	u32 reason;
	u32 saddr, daddr;	/* network byte order */
	u16 sport, dport;
	u32 len;
	u32 segs;
	u32 backlog;		/* the tbf's bytes */
	u32 qlen;		/* and skbs */
	u32 ifindex;
	u32 netns;
	u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 32 << 20);
} records SEC(".maps");

/* Records the ring had no room for (the loader reports them). */
__u64 dropped = 0;

static __always_inline bool is_tbf(struct Qdisc *q)
{
	char id[4] = {};

	if (!q)
		return false;
	bpf_probe_read_kernel(id, sizeof(id), BPF_CORE_READ(q, ops, id));
	return id[0] == 't' && id[1] == 'b' && id[2] == 'f' && id[3] == 0;
}

static __always_inline void emit(struct sk_buff *skb, struct Qdisc *q, u32 kind, u32 reason)
{
	unsigned char *head = BPF_CORE_READ(skb, head);
	u16 nh = BPF_CORE_READ(skb, network_header);
	struct net_device *dev = BPF_CORE_READ(skb, dev);
	struct skb_shared_info *shinfo;
	struct iphdr iph;
	u16 ports[2];
	struct record *r;
	u16 segs;

	if (bpf_probe_read_kernel(&iph, sizeof(iph), head + nh) || iph.version != 4 || iph.protocol != IPPROTO_TCP)
		return;
	if (bpf_probe_read_kernel(ports, sizeof(ports), head + nh + iph.ihl * 4))
		return;
	r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);
	if (!r) {
		__sync_fetch_and_add(&dropped, 1);
		return;
	}
	shinfo = (struct skb_shared_info *)(head + BPF_CORE_READ(skb, end));
	segs = BPF_CORE_READ(shinfo, gso_segs);
	r->t_ns = bpf_ktime_get_ns();
	r->kind = kind;
	r->reason = reason;
	r->saddr = iph.saddr;
	r->daddr = iph.daddr;
	r->sport = bpf_ntohs(ports[0]);
	r->dport = bpf_ntohs(ports[1]);
	r->len = BPF_CORE_READ(skb, len);
	r->segs = segs ? segs : 1;
	r->backlog = BPF_CORE_READ(q, qstats.backlog);
	r->qlen = BPF_CORE_READ(q, q.qlen);
	r->ifindex = BPF_CORE_READ(dev, ifindex);
	r->netns = BPF_CORE_READ(dev, nd_net.net, ns.inum);
	r->pad = 0;
	bpf_ringbuf_submit(r, 0);
}

SEC("tp_btf/qdisc_enqueue")
int BPF_PROG(on_enqueue, struct Qdisc *q, const struct netdev_queue *txq, struct sk_buff *skb)
{
	if (is_tbf(q))
		emit(skb, q, KIND_ENQUEUE, 0);
	return 0;
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(on_free, struct sk_buff *skb, void *location, enum skb_drop_reason reason, struct sock *rx_sk)
{
	struct Qdisc *q;

	if (reason < SKB_DROP_REASON_QDISC_DROP || reason > SKB_DROP_REASON_QDISC_CONGESTED)
		return 0;
	q = BPF_CORE_READ(skb, dev, qdisc);
	if (is_tbf(q))
		emit(skb, q, KIND_DROP, (u32)reason);
	return 0;
}
