//! Queue disciplines of a bottleneck link. A discipline decides at enqueue
//! whether a packet is kept, and at dequeue which packet goes next (and may drop
//! or mark there, as AQMs do). The link owns the transmitter; the discipline only
//! holds waiting packets, so its backlog excludes the packet being transmitted,
//! as Linux qdisc backlogs do.

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
    Dropped(Packet),
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
}

/// First-in first-out with tail drop when the limit would be exceeded.
pub struct DropTail {
    limit: QueueLimit,
    queue: VecDeque<(Time, Packet)>,
    bytes: u64,
}

impl DropTail {
    pub fn new(limit: QueueLimit) -> DropTail {
        DropTail { limit, queue: VecDeque::new(), bytes: 0 }
    }
}

impl QueueDisc for DropTail {
    fn enqueue(&mut self, now: Time, pkt: Packet) -> Enqueued {
        let fits = match self.limit {
            QueueLimit::Bytes(b) => self.bytes + pkt.wire_bytes as u64 <= b,
            QueueLimit::Packets(n) => (self.queue.len() as u32) < n,
        };
        if fits {
            self.bytes += pkt.wire_bytes as u64;
            self.queue.push_back((now, pkt));
            Enqueued::Accepted
        } else {
            Enqueued::Dropped(pkt)
        }
    }

    fn dequeue(&mut self, _now: Time, _dropped: &mut Vec<Packet>) -> Option<Packet> {
        let (_, pkt) = self.queue.pop_front()?;
        self.bytes -= pkt.wire_bytes as u64;
        Some(pkt)
    }

    fn backlog_packets(&self) -> u32 {
        self.queue.len() as u32
    }

    fn backlog_bytes(&self) -> u64 {
        self.bytes
    }

    fn waiting(&self) -> Vec<Packet> {
        self.queue.iter().map(|(_, p)| *p).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{DataSegment, Packet};

    fn seg(seq: u32) -> Packet {
        Packet::data(0, DataSegment { seq, payload: 1448, tsval: 0, retransmission: false, ce: false, ect: false, cwr: false })
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
