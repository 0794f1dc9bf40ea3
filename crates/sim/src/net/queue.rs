//! Queue disciplines of a bottleneck link. A discipline decides at enqueue
//! whether a packet is kept, and at dequeue which packet goes next (and may drop
//! or mark there, as AQMs do). The link owns the transmitter; the discipline only
//! holds waiting packets, so its backlog excludes the packet being transmitted,
//! as a switch's or a NIC qdisc's does. Behind a Linux router's token bucket
//! (tbf) the packet or skb waiting for its tokens still counts, and the link
//! tells the discipline so (`QueueDisc::hold`).

use crate::packet::Packet;
use crate::units::Time;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The size limit of a queue, in bytes (like `tc bfifo`/`tbf limit`) or packets
/// (like `tc pfifo limit` or ns-3 `MaxSize 200p`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueLimit {
    Bytes(u64),
    Packets(u32),
}

/// What happened to a packet offered to a queue.
pub enum Enqueued {
    Accepted,
    /// Dropped because the queue is full (tail drop, `limit`).
    Dropped(Packet),
    /// Dropped by the discipline's congestion decision (RED's and PIE's early
    /// drops); counted as an AQM drop.
    EarlyDropped(Packet),
    /// The queue overflowed and the discipline dropped packets already queued
    /// to make room (FQ-CoDel drops a batch from its fattest flow); the arriving
    /// packet may be among them. The link collects them with `take_drops`.
    Overflowed,
}

pub trait QueueDisc: Send {
    fn enqueue(&mut self, now: Time, pkt: Packet) -> Enqueued;
    /// The next packet to transmit. Packets the discipline drops on the way out
    /// are appended to `dropped`.
    fn dequeue(&mut self, now: Time, dropped: &mut Vec<Packet>) -> Option<Packet>;
    fn backlog_packets(&self) -> u32;
    fn backlog_bytes(&self) -> u64;
    /// Packets still waiting (for end-of-run accounting).
    fn waiting(&self) -> Vec<Packet>;
    /// Whether a super-packet of `bytes` in `segs` segments would fit now, for
    /// a queue that takes it whole (a Linux bfifo checks the skb's length);
    /// None: the discipline decides per packet.
    fn fits_whole(&self, _bytes: u64, _segs: u32) -> Option<bool> {
        None
    }
    /// Whether a Linux router's tbf with this discipline as its child is
    /// modelled whole: super-packets queued whole and the token bucket
    /// releasing them (drop-tail FIFOs); AQMs are served packet by packet at
    /// the rate, as on a switch or a rate-limited NIC.
    fn takes_super_packets_whole(&self) -> bool {
        false
    }
    /// Queues a segment of a super-packet already admitted whole.
    fn enqueue_admitted(&mut self, now: Time, pkt: Packet) -> Enqueued {
        self.enqueue(now, pkt)
    }
    /// The packet `dequeue` would return next, for disciplines that take
    /// super-packets whole (the link takes the rest of one with its head).
    fn head(&self) -> Option<&Packet> {
        None
    }
    /// The link's token bucket holds `bytes` in `packets` it has dequeued but
    /// not yet released (Linux tbf keeps its head skb in the child qdisc until
    /// the tokens suffice): a discipline that takes super-packets whole counts
    /// them in its backlog and limit until `hold(0, 0)`.
    fn hold(&mut self, _bytes: u64, _packets: u32) {}
    /// Moves the packets dropped by the last `enqueue` that returned
    /// `Enqueued::Overflowed` into `out`.
    fn take_drops(&mut self, _out: &mut Vec<Packet>) {}
    /// Counters of the discipline (CE marks, sojourn times, RED's curve).
    fn stats(&self) -> QdiscStats {
        QdiscStats::default()
    }
}

/// What a discipline reports at the end of a run. Drops are counted by the link
/// (per flow); these are the discipline's own counters.
#[derive(Clone, Debug, Default, Serialize)]
pub struct QdiscStats {
    /// The discipline: `drop_tail`, `red`, `codel`, `fq_codel`, `pie`, `step` or `dualpi2`.
    pub kind: String,
    /// Packets marked Congestion Experienced instead of being dropped.
    pub ce_marks: u64,
    /// Packets dequeued by disciplines that timestamp packets (CoDel, FQ-CoDel,
    /// PIE), with the sum and maximum of their sojourn times in the queue.
    pub sojourn_packets: u64,
    pub sojourn_sum_ns: u64,
    pub sojourn_max_ns: u64,
    /// RED only: arrivals binned by the average queue they saw.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub red_curve: Vec<RedBin>,
    /// Disciplines with several queues (DualPI2: `l` and `c`): each queue's
    /// counters.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<QueueClassStats>,
}

/// The counters of one queue of a multi-queue discipline.
#[derive(Clone, Debug, Default, Serialize)]
pub struct QueueClassStats {
    /// The queue (DualPI2: `l` for L4S, `c` for classic).
    pub name: String,
    /// Packets dequeued, with the sum and maximum of their sojourn times.
    pub sojourn_packets: u64,
    pub sojourn_sum_ns: u64,
    pub sojourn_max_ns: u64,
    pub ce_marks: u64,
    /// Packets dropped by the discipline (overflow and AQM).
    pub drops: u64,
}

impl QueueClassStats {
    pub fn new(name: &str) -> QueueClassStats {
        QueueClassStats { name: name.to_string(), ..QueueClassStats::default() }
    }

    #[inline]
    pub fn sojourn(&mut self, d: u64) {
        self.sojourn_packets += 1;
        self.sojourn_sum_ns += d;
        self.sojourn_max_ns = self.sojourn_max_ns.max(d);
    }
}

impl QdiscStats {
    pub fn new(kind: &str) -> QdiscStats {
        QdiscStats { kind: kind.to_string(), ..QdiscStats::default() }
    }

    /// Records the sojourn time of a packet leaving the queue.
    #[inline]
    pub fn sojourn(&mut self, d: u64) {
        self.sojourn_packets += 1;
        self.sojourn_sum_ns += d;
        self.sojourn_max_ns = self.sojourn_max_ns.max(d);
    }

    /// Mean sojourn time in seconds (NaN without samples).
    pub fn mean_sojourn_s(&self) -> f64 {
        self.sojourn_sum_ns as f64 / self.sojourn_packets as f64 / 1e9
    }
}

/// Arrivals at a RED queue whose average queue fell in [avg_lo, avg_hi) (in the
/// unit of the thresholds: bytes or packets), what RED did to them, and the
/// initial probability p_b it computed for them.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RedBin {
    pub avg_lo: f64,
    pub avg_hi: f64,
    pub arrivals: u64,
    /// Early drops or marks decided with probability (between the thresholds).
    pub prob_actions: u64,
    /// Drops or marks because the average was above the maximum threshold.
    pub forced_actions: u64,
    /// The sum of p_b over the arrivals.
    pub sum_pb: f64,
}

/// The queue of a single-queue discipline: packets in arrival order with their
/// enqueue times (for sojourn-based AQMs) and the wire bytes they hold. A
/// drop-tail queue may hold a whole skb as one entry (`Packet::is_bundle`);
/// lengths count segments either way.
#[derive(Default)]
pub struct Fifo {
    queue: VecDeque<(Time, Packet)>,
    bytes: u64,
    segs: u32,
}

impl Fifo {
    /// Whether one more packet of `pkt`'s size stays within `limit` (tail drop's test).
    #[inline]
    pub fn fits(&self, limit: QueueLimit, pkt: &Packet) -> bool {
        match limit {
            QueueLimit::Bytes(b) => self.bytes + pkt.wire_bytes as u64 <= b,
            QueueLimit::Packets(n) => (self.segs as u64) < n as u64,
        }
    }

    #[inline]
    pub fn push(&mut self, now: Time, pkt: Packet) {
        self.bytes += pkt.total_wire_bytes();
        self.segs += pkt.segs();
        self.queue.push_back((now, pkt));
    }

    /// The oldest packet and when it was enqueued.
    #[inline]
    pub fn pop(&mut self) -> Option<(Time, Packet)> {
        let (t, pkt) = self.queue.pop_front()?;
        self.bytes -= pkt.total_wire_bytes();
        self.segs -= pkt.segs();
        Some((t, pkt))
    }

    /// Packets held (segments, a whole skb counting for each of its own).
    #[inline]
    pub fn len(&self) -> u32 {
        self.segs
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Wire (IP) bytes held.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes as Linux's qdiscs count them (`qdisc_pkt_len`: each packet with
    /// its Ethernet header).
    #[inline]
    pub fn linux_backlog(&self) -> u64 {
        self.bytes + crate::net::aqm::ETH_HLEN as u64 * self.segs as u64
    }

    pub fn packets(&self) -> Vec<Packet> {
        self.queue.iter().map(|(_, p)| *p).collect()
    }

    /// The oldest packet.
    #[inline]
    pub fn front(&self) -> Option<&Packet> {
        self.queue.front().map(|(_, p)| p)
    }
}

/// First-in first-out with tail drop when the limit would be exceeded.
pub struct DropTail {
    limit: QueueLimit,
    fifo: Fifo,
    /// Held by a Linux router's token bucket (`QueueDisc::hold`): bytes, packets.
    held: (u64, u32),
}

impl DropTail {
    pub fn new(limit: QueueLimit) -> DropTail {
        DropTail { limit, fifo: Fifo::default(), held: (0, 0) }
    }

    /// Whether `bytes` in `packets` more stay within the limit.
    #[inline]
    fn room_for(&self, bytes: u64, packets: u32) -> bool {
        match self.limit {
            QueueLimit::Bytes(b) => self.fifo.bytes() + self.held.0 + bytes <= b,
            QueueLimit::Packets(n) => self.fifo.len() as u64 + self.held.1 as u64 + packets as u64 <= n as u64,
        }
    }
}

impl QueueDisc for DropTail {
    fn enqueue(&mut self, now: Time, pkt: Packet) -> Enqueued {
        let fits = if self.held == (0, 0) { self.fifo.fits(self.limit, &pkt) } else { self.room_for(pkt.wire_bytes as u64, 1) };
        if fits {
            self.fifo.push(now, pkt);
            Enqueued::Accepted
        } else {
            Enqueued::Dropped(pkt)
        }
    }

    fn dequeue(&mut self, _now: Time, _dropped: &mut Vec<Packet>) -> Option<Packet> {
        self.fifo.pop().map(|(_, pkt)| pkt)
    }

    fn backlog_packets(&self) -> u32 {
        self.fifo.len() + self.held.1
    }

    fn backlog_bytes(&self) -> u64 {
        self.fifo.bytes() + self.held.0
    }

    fn waiting(&self) -> Vec<Packet> {
        self.fifo.packets()
    }

    fn takes_super_packets_whole(&self) -> bool {
        true
    }

    fn fits_whole(&self, bytes: u64, segs: u32) -> Option<bool> {
        // pfifo counts skbs; segments are counted here, so a packet limit of
        // segments keeps meaning segments.
        Some(self.room_for(bytes, segs))
    }

    fn head(&self) -> Option<&Packet> {
        self.fifo.front()
    }

    fn hold(&mut self, bytes: u64, packets: u32) {
        self.held = (bytes, packets);
    }

    fn enqueue_admitted(&mut self, now: Time, pkt: Packet) -> Enqueued {
        self.fifo.push(now, pkt);
        Enqueued::Accepted
    }

    fn stats(&self) -> QdiscStats {
        QdiscStats::new("drop_tail")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{DataSegment, Packet};

    fn seg(seq: u32) -> Packet {
        Packet::data(0, DataSegment { seq, payload: 1448, tsval: 0, retransmission: false, ce: false, ect: false, ect1: false, cwr: false, psh: false, gso: Default::default() })
    }

    #[test]
    fn packet_limit() {
        let mut q = DropTail::new(QueueLimit::Packets(2));
        assert!(matches!(q.enqueue(Time(0), seg(0)), Enqueued::Accepted));
        assert!(matches!(q.enqueue(Time(0), seg(1)), Enqueued::Accepted));
        assert!(matches!(q.enqueue(Time(0), seg(2)), Enqueued::Dropped(_)));
        assert_eq!(q.backlog_packets(), 2);
        let mut d = vec![];
        assert_eq!(q.dequeue(Time(1), &mut d), Some(seg(0)));
        assert_eq!(q.backlog_bytes(), 1500);
    }

    #[test]
    fn byte_limit_counts_wire_bytes() {
        let mut q = DropTail::new(QueueLimit::Bytes(3000));
        assert!(matches!(q.enqueue(Time(0), seg(0)), Enqueued::Accepted));
        assert!(matches!(q.enqueue(Time(0), seg(1)), Enqueued::Accepted));
        assert!(matches!(q.enqueue(Time(0), seg(2)), Enqueued::Dropped(_)));
    }
}
