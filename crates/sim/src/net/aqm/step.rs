//! A step-marking queue, the bottleneck DCTCP is designed for (Alizadeh et
//! al., SIGCOMM 2010, section 3.1; RFC 8257 section 3.1): a first-in first-out
//! queue that sets CE on every ECN-capable packet arriving while the queue
//! holds more than K, and drops only when the buffer (`network.buffer`) is
//! full. Packets that are not ECN-capable are never marked nor dropped early:
//! they see a plain drop-tail queue. The queue is the instantaneous one (no
//! averaging), as the switches DCTCP was built for measure it.
//!
//! K is in packets or in bytes; bytes count each packet as Linux's qdiscs do
//! (`qdisc_len`: with its Ethernet header), so that the linux backend's
//! mapping (RED with min = K, max = K + 1 byte, probability 1, ECN; see
//! docs/scenario.md) compares the same numbers.

use super::set_ce;
use crate::net::queue::{Enqueued, Fifo, QdiscStats, QueueDisc, QueueLimit};
use crate::packet::Packet;
use crate::units::Time;

pub struct Step {
    threshold: QueueLimit,
    limit: QueueLimit,
    fifo: Fifo,
    stats: QdiscStats,
}

impl Step {
    pub fn new(threshold: QueueLimit, limit: QueueLimit) -> Step {
        Step { threshold, limit, fifo: Fifo::default(), stats: QdiscStats::new("step") }
    }

    /// Whether the queue an arriving packet finds is above K.
    fn above_threshold(&self) -> bool {
        match self.threshold {
            QueueLimit::Packets(k) => self.fifo.len() > k,
            QueueLimit::Bytes(k) => self.fifo.linux_backlog() > k,
        }
    }
}

impl QueueDisc for Step {
    fn enqueue(&mut self, now: Time, mut pkt: Packet) -> Enqueued {
        if !self.fifo.fits(self.limit, &pkt) {
            return Enqueued::Dropped(pkt);
        }
        if self.above_threshold() && set_ce(&mut pkt) {
            self.stats.ce_marks += 1;
        }
        self.fifo.push(now, pkt);
        Enqueued::Accepted
    }

    fn dequeue(&mut self, now: Time, _dropped: &mut Vec<Packet>) -> Option<Packet> {
        let (t, pkt) = self.fifo.pop()?;
        self.stats.sojourn(now.since(t).0);
        Some(pkt)
    }

    fn backlog_packets(&self) -> u32 {
        self.fifo.len()
    }

    fn backlog_bytes(&self) -> u64 {
        self.fifo.bytes()
    }

    fn waiting(&self) -> Vec<Packet> {
        self.fifo.packets()
    }

    fn stats(&self) -> QdiscStats {
        self.stats.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::aqm::testutil::{is_ce, seg};

    fn fill(q: &mut Step, n: u32, ect: bool) -> Vec<bool> {
        (0..n)
            .map(|i| match q.enqueue(Time(0), seg(0, i, ect)) {
                Enqueued::Accepted => true,
                Enqueued::Dropped(_) => false,
                _ => panic!("a step queue drops only at the tail"),
            })
            .collect()
    }

    fn marks(q: &mut Step) -> Vec<bool> {
        let mut d = vec![];
        std::iter::from_fn(|| q.dequeue(Time(1000), &mut d)).map(|p| is_ce(&p)).collect()
    }

    #[test]
    fn marks_ect_packets_above_k_only() {
        let mut q = Step::new(QueueLimit::Packets(5), QueueLimit::Packets(100));
        assert!(fill(&mut q, 10, true).iter().all(|&a| a));
        // The first six find 0..5 packets queued; the rest find more than 5.
        let m = marks(&mut q);
        assert_eq!(m, [false, false, false, false, false, false, true, true, true, true]);
        assert_eq!(q.stats().ce_marks, 4);
        assert_eq!(q.stats().kind, "step");
        // Below K again once drained.
        fill(&mut q, 3, true);
        assert!(marks(&mut q).iter().all(|&m| !m));
    }

    #[test]
    fn byte_threshold_counts_frames_as_linux_does() {
        // 1514-byte frames: 3 fit in 4542 bytes; a fourth makes 6056 > 5000.
        let mut q = Step::new(QueueLimit::Bytes(5000), QueueLimit::Bytes(1_000_000));
        fill(&mut q, 6, true);
        assert_eq!(marks(&mut q), [false, false, false, false, true, true]);
    }

    #[test]
    fn non_ect_packets_are_dropped_only_on_overflow() {
        let mut q = Step::new(QueueLimit::Packets(2), QueueLimit::Packets(8));
        let accepted = fill(&mut q, 12, false);
        assert_eq!(accepted.iter().filter(|&&a| a).count(), 8);
        assert!(accepted[..8].iter().all(|&a| a) && accepted[8..].iter().all(|&a| !a));
        assert!(marks(&mut q).iter().all(|&m| !m));
        assert_eq!(q.stats().ce_marks, 0);
        // ECT packets too are dropped, not marked, when the buffer is full.
        let accepted = fill(&mut q, 10, true);
        assert_eq!(accepted.iter().filter(|&&a| a).count(), 8);
        assert_eq!(q.stats().ce_marks, 5);
    }
}
