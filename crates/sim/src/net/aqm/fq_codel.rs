//! FQ-CoDel (RFC 8290) as Linux's `sch_fq_codel` runs it.
//!
//! Packets are hashed by flow into `flows` buckets (1024); each bucket is a FIFO
//! with its own CoDel state (parameters shared, `codel::CodelVars`). Buckets
//! are served by deficit round robin with a `quantum` of 1514 bytes (one
//! `psched_mtu`) from two lists: a bucket that becomes active joins the tail of
//! `new_flows` with a full quantum, and `new_flows` is always served before
//! `old_flows`, which gives sparse flows priority. A bucket whose deficit is
//! used up goes to the tail of `old_flows` with another quantum; a bucket found
//! empty leaves the lists, except that an empty new bucket first moves to
//! `old_flows` when old ones are waiting (so that new flows cannot starve old
//! ones). When the queue exceeds its limit, the bucket with the largest backlog
//! loses packets from its head, up to half its backlog or `drop_batch_size`
//! (64) packets, and its CoDel count grows by as many ("signal strength").
//! ECN marking is on by default, as in Linux.
//!
//! The flow hash: Linux hashes the 5-tuple with a per-boot random key
//! (`skb_get_hash`) and scales it into the bucket range (`reciprocal_scale`);
//! here the flow index is mixed with a key drawn from the run's AQM stream, so
//! flows collide in a bucket as rarely (1/1024 for two flows) and as
//! reproducibly per seed. Not modelled: `memory_limit` (32 MB of skb truesize,
//! which 10240 full-size packets stay below) and external classifiers.

use super::codel::{CodelParams, CodelVars};
use super::{qdisc_len, PSCHED_MTU};
use crate::net::queue::{Enqueued, QdiscStats, QueueDisc, QueueLimit};
use crate::packet::Packet;
use crate::units::Time;
use std::collections::VecDeque;

/// Default number of buckets (`fq_codel_init`: flows_cnt = 1024).
pub const DEFAULT_FLOWS: u32 = 1024;
/// Largest number of buckets Linux accepts (`fq_codel_change`).
pub const MAX_FLOWS: u32 = 65536;
/// Default DRR quantum: psched_mtu() of a 1500-byte Ethernet device.
pub const DEFAULT_QUANTUM: u32 = PSCHED_MTU;
/// Smallest quantum Linux accepts (`max(256U, quantum)`).
pub const MIN_QUANTUM: u32 = 256;
/// Default packets dropped at most per overflow (`drop_batch_size = 64`).
pub const DEFAULT_DROP_BATCH: u32 = 64;

#[derive(Clone, Debug)]
struct Bucket {
    queue: VecDeque<(Time, Packet)>,
    /// Backlog in `qdisc_len` bytes (`q->backlogs[idx]`).
    backlog: u64,
    deficit: i64,
    cvars: CodelVars,
    /// On new_flows or old_flows (Linux: `!list_empty(&flow->flowchain)`).
    listed: bool,
}

pub struct FqCodel {
    params: CodelParams,
    quantum: u32,
    drop_batch: u32,
    limit: QueueLimit,
    key: u64,
    buckets: Vec<Bucket>,
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    qlen: u32,
    /// Wire bytes queued.
    bytes: u64,
    /// `qdisc_len` bytes queued (`sch->qstats.backlog`).
    backlog: u64,
    pending_drops: Vec<Packet>,
    stats: QdiscStats,
    /// Buckets that ever became active (`new_flow_count`).
    pub new_flow_count: u64,
}

/// SplitMix64's finaliser: a well-mixed 64-bit hash of `x`.
fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl FqCodel {
    /// `key` perturbs the flow hash (Linux's random hash seed).
    pub fn new(params: CodelParams, limit: QueueLimit, flows: u32, quantum: u32, drop_batch: u32, key: u64) -> FqCodel {
        let flows = flows.clamp(1, MAX_FLOWS);
        let bucket = Bucket { queue: VecDeque::new(), backlog: 0, deficit: 0, cvars: CodelVars::default(), listed: false };
        FqCodel {
            params,
            quantum: quantum.max(MIN_QUANTUM),
            drop_batch: drop_batch.max(1),
            limit,
            key,
            buckets: vec![bucket; flows as usize],
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            qlen: 0,
            bytes: 0,
            backlog: 0,
            pending_drops: Vec::new(),
            stats: QdiscStats::new("fq_codel"),
            new_flow_count: 0,
        }
    }

    /// The bucket of a flow: a keyed hash scaled into [0, flows) as
    /// `reciprocal_scale` does.
    pub fn bucket_of(&self, flow: u32) -> usize {
        let h = (mix64(flow as u64 ^ self.key) >> 32) as u32;
        ((h as u64 * self.buckets.len() as u64) >> 32) as usize
    }

    fn over_limit(&self) -> bool {
        match self.limit {
            QueueLimit::Packets(n) => self.qlen > n,
            QueueLimit::Bytes(b) => self.bytes > b,
        }
    }

    /// `fq_codel_drop`: drops from the head of the fattest bucket until half its
    /// backlog or `drop_batch` packets are gone.
    fn drop_from_fattest(&mut self) {
        let mut max = 0;
        let mut idx = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            if b.backlog > max {
                max = b.backlog;
                idx = i;
            }
        }
        let threshold = max >> 1;
        let b = &mut self.buckets[idx];
        let mut len = 0u64;
        let mut n = 0u32;
        while let Some((_, p)) = b.queue.pop_front() {
            len += qdisc_len(&p) as u64;
            self.bytes -= p.wire_bytes as u64;
            self.pending_drops.push(p);
            n += 1;
            if n >= self.drop_batch || len >= threshold {
                break;
            }
        }
        // Tell CoDel to increase its signal strength too.
        b.cvars.count = b.cvars.count.wrapping_add(n);
        b.backlog -= len;
        self.backlog -= len;
        self.qlen -= n;
    }

    pub fn params(&self) -> &CodelParams {
        &self.params
    }
}

impl QueueDisc for FqCodel {
    fn enqueue(&mut self, now: Time, pkt: Packet) -> Enqueued {
        let idx = self.bucket_of(pkt.flow);
        let len = qdisc_len(&pkt) as u64;
        let b = &mut self.buckets[idx];
        b.queue.push_back((now, pkt));
        b.backlog += len;
        if !b.listed {
            b.listed = true;
            b.deficit = self.quantum as i64;
            self.new_flows.push_back(idx as u32);
            self.new_flow_count += 1;
        }
        self.qlen += 1;
        self.bytes += pkt.wire_bytes as u64;
        self.backlog += len;
        if !self.over_limit() {
            return Enqueued::Accepted;
        }
        // Linux drops one batch per enqueue: enough for a packet limit, since a
        // batch holds at least one packet; a byte limit may need more.
        self.drop_from_fattest();
        while self.over_limit() && self.qlen > 0 {
            self.drop_from_fattest();
        }
        Enqueued::Overflowed
    }

    fn dequeue(&mut self, now: Time, dropped: &mut Vec<Packet>) -> Option<Packet> {
        loop {
            let (from_new, idx) = match self.new_flows.front() {
                Some(&i) => (true, i),
                None => (false, *self.old_flows.front()?),
            };
            let b = &mut self.buckets[idx as usize];
            if b.deficit <= 0 {
                b.deficit += self.quantum as i64;
                if from_new {
                    self.new_flows.pop_front();
                } else {
                    self.old_flows.pop_front();
                }
                self.old_flows.push_back(idx);
                continue;
            }
            let FqCodel { params, buckets, qlen, bytes, backlog, stats, .. } = self;
            let Bucket { queue, backlog: bucket_backlog, cvars, .. } = &mut buckets[idx as usize];
            let out = cvars.dequeue(params, now, stats, dropped, || {
                let (t, p) = queue.pop_front()?;
                let len = qdisc_len(&p) as u64;
                *bucket_backlog -= len;
                *qlen -= 1;
                *bytes -= p.wire_bytes as u64;
                *backlog -= len;
                Some((p, t, *backlog))
            });
            match out {
                Some(p) => {
                    self.buckets[idx as usize].deficit -= qdisc_len(&p) as i64;
                    return Some(p);
                }
                None => {
                    // Empty: force a pass through old_flows to prevent starvation,
                    // or leave the lists.
                    if from_new {
                        self.new_flows.pop_front();
                        if !self.old_flows.is_empty() {
                            self.old_flows.push_back(idx);
                            continue;
                        }
                    } else {
                        self.old_flows.pop_front();
                    }
                    self.buckets[idx as usize].listed = false;
                }
            }
        }
    }

    fn backlog_packets(&self) -> u32 {
        self.qlen
    }

    fn backlog_bytes(&self) -> u64 {
        self.bytes
    }

    fn waiting(&self) -> Vec<Packet> {
        let mut v: Vec<Packet> = self.buckets.iter().flat_map(|b| b.queue.iter().map(|(_, p)| *p)).collect();
        v.extend(self.pending_drops.iter().copied());
        v
    }

    fn take_drops(&mut self, out: &mut Vec<Packet>) {
        out.append(&mut self.pending_drops);
    }

    fn stats(&self) -> QdiscStats {
        self.stats.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::aqm::testutil::seg;
    use crate::packet::{Packet, Payload};

    fn fq(limit: u32) -> FqCodel {
        FqCodel::new(CodelParams::default(), QueueLimit::Packets(limit), DEFAULT_FLOWS, DEFAULT_QUANTUM, DEFAULT_DROP_BATCH, 7)
    }

    fn small(flow: u32, bytes: u32) -> Packet {
        let mut p = seg(flow, 0, false);
        p.wire_bytes = bytes;
        p
    }

    #[test]
    fn flows_land_in_distinct_buckets() {
        let q = fq(100);
        let mut seen = std::collections::HashSet::new();
        for f in 0..8 {
            assert!(seen.insert(q.bucket_of(f)), "flow {f} collides");
        }
        // Over many flows the hash spreads evenly: ~1024 * (1 - e^-1) buckets used by 1024 flows.
        let used: std::collections::HashSet<usize> = (0..1024).map(|f| q.bucket_of(f)).collect();
        assert!((600..=700).contains(&used.len()), "{} buckets used", used.len());
    }

    #[test]
    fn drr_shares_bytes_equally_between_backlogged_flows() {
        // Flow 0 sends 1500-byte packets, flow 1 500-byte packets, both always
        // backlogged: each gets the same bytes per round.
        let mut q = fq(100_000);
        for i in 0..3000 {
            let _ = q.enqueue(Time(0), small(0, 1500));
            let _ = q.enqueue(Time(0), small(1, 500));
            if i % 3 == 0 {
                let _ = q.enqueue(Time(0), small(1, 500));
                let _ = q.enqueue(Time(0), small(1, 500));
            }
        }
        let mut bytes = [0u64; 2];
        let mut d = Vec::new();
        // Dequeue at time 0 (no sojourn, no CoDel drops): the first 1 MB.
        while bytes[0] + bytes[1] < 1_000_000 {
            let p = q.dequeue(Time(0), &mut d).unwrap();
            bytes[p.flow as usize] += p.wire_bytes as u64;
        }
        assert!(d.is_empty());
        let share = bytes[0] as f64 / (bytes[0] + bytes[1]) as f64;
        assert!((share - 0.5).abs() < 0.01, "share {share}");
    }

    #[test]
    fn a_new_sparse_flow_is_served_before_backlogged_ones() {
        let mut q = fq(100_000);
        let mut d = Vec::new();
        for _ in 0..50 {
            let _ = q.enqueue(Time(0), small(0, 1500));
            let _ = q.enqueue(Time(0), small(1, 1500));
        }
        // Both buckets become old after their first quantum.
        for _ in 0..10 {
            q.dequeue(Time(0), &mut d).unwrap();
        }
        assert!(q.new_flows.is_empty());
        // A packet of a new flow arrives: it goes out next, ahead of 90 packets.
        let _ = q.enqueue(Time(0), small(2, 100));
        assert_eq!(q.dequeue(Time(0), &mut d).unwrap().flow, 2);
        // Its bucket, now empty, moves to old_flows at the next dequeue (old ones
        // are waiting) and leaves the lists when its turn comes round again.
        let b2 = q.bucket_of(2) as u32;
        assert_ne!(q.dequeue(Time(0), &mut d).unwrap().flow, 2);
        assert!(q.old_flows.contains(&b2) && !q.new_flows.contains(&b2));
        for _ in 0..10 {
            assert_ne!(q.dequeue(Time(0), &mut d).unwrap().flow, 2);
        }
        assert!(!q.buckets[b2 as usize].listed);
        assert!(!q.old_flows.contains(&b2));
        assert_eq!(q.new_flow_count, 3);
    }

    #[test]
    fn overflow_drops_half_the_fattest_bucket_from_its_head() {
        let mut q = fq(100);
        // Flow 0 holds 90 packets, flow 1 holds 10.
        for i in 0..90 {
            assert!(matches!(q.enqueue(Time(0), Packet::data(0, crate::packet::DataSegment { seq: i, payload: 1448, tsval: 0, retransmission: false, ce: false, ect: false, ect1: false, cwr: false, psh: false, gso: Default::default() })), Enqueued::Accepted));
        }
        for _ in 0..10 {
            let _ = q.enqueue(Time(0), small(1, 1500));
        }
        // The 101st packet (flow 1) overflows: flow 0 loses 45 packets (half its
        // backlog), oldest first, and its CoDel count grows by 45.
        assert!(matches!(q.enqueue(Time(0), small(1, 1500)), Enqueued::Overflowed));
        let mut d = Vec::new();
        q.take_drops(&mut d);
        assert_eq!(d.len(), 45);
        assert!(d.iter().all(|p| p.flow == 0));
        let seqs: Vec<u32> = d.iter().map(|p| match p.payload { Payload::Data(s) => s.seq, _ => u32::MAX }).collect();
        assert_eq!(seqs, (0..45).collect::<Vec<_>>());
        assert_eq!(q.backlog_packets(), 56);
        assert_eq!(q.buckets[q.bucket_of(0)].cvars.count, 45);
        assert!(q.waiting().len() == 56);
    }

    #[test]
    fn overflow_batch_is_capped() {
        let mut q = FqCodel::new(CodelParams::default(), QueueLimit::Packets(1000), DEFAULT_FLOWS, DEFAULT_QUANTUM, 64, 7);
        for _ in 0..1001 {
            let _ = q.enqueue(Time(0), small(0, 1500));
        }
        let mut d = Vec::new();
        q.take_drops(&mut d);
        assert_eq!(d.len(), 64);
    }

    #[test]
    fn each_bucket_runs_its_own_codel() {
        // Flow 0 keeps a standing queue; flow 1 sends one packet per round and
        // never queues: CoDel drops only flow 0.
        let mut q = fq(100_000);
        let mut d = Vec::new();
        let mut t = 0u64;
        for i in 0..3000u32 {
            let _ = q.enqueue(Time(t), small(0, 1500));
            let _ = q.enqueue(Time(t), small(0, 1500));
            if i % 4 == 0 {
                let _ = q.enqueue(Time(t), small(1, 200));
            }
            let _ = q.dequeue(Time(t), &mut d);
            t += 1_200_000;
        }
        assert!(!d.is_empty());
        assert!(d.iter().all(|p| p.flow == 0));
    }
}
