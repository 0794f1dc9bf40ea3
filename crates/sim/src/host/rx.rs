//! Batched receive processing. A Linux receiver does not handle each packet
//! the instant it arrives: a NAPI poll runs some microseconds after the
//! interrupt, GRO merges what the poll found, and while the application
//! holds the socket (copying data out in `recvmsg`) arriving segments wait in
//! the socket backlog, which is processed in one go when the application
//! lets go, with one ACK at the end (`tcp_release_cb`, the ACK deferral of
//! Linux 6.7). The model: a packet reaching an idle receiver opens a batch
//! that closes after a hold drawn from a distribution measured on real hosts;
//! everything that arrives meanwhile joins the batch; the batch is processed
//! in arrival order and acknowledged once. Under load the holds grow and so
//! do the batches: stretch ACKs.

use crate::dist::{Dist, Sampler};
use crate::packet::Packet;
use crate::rng::Rng;
use crate::units::Time;

/// The packets a receiver holds and when it will process them.
pub struct RxBatcher {
    held: Vec<Packet>,
    due: Option<Time>,
    hold: Sampler,
    rng: Rng,
}

impl RxBatcher {
    pub fn new(hold: Dist, rng: Rng) -> RxBatcher {
        RxBatcher { held: Vec::new(), due: None, hold: Sampler::new(hold), rng }
    }

    /// A packet arrives at `now`. Returns the time the batch it joins will be
    /// processed if that is a new batch (the caller schedules it), else None.
    pub fn arrive(&mut self, now: Time, pkt: Packet) -> Option<Time> {
        self.held.push(pkt);
        if self.due.is_some() {
            return None;
        }
        let hold = self.hold.draw_ns(&mut self.rng);
        let due = Time(now.0 + hold);
        self.due = Some(due);
        Some(due)
    }

    /// The batch is due: moves its packets into `batch` (in arrival order).
    pub fn take(&mut self, batch: &mut Vec<Packet>) {
        self.due = None;
        batch.append(&mut self.held);
    }

    /// Drops held packets (the flow slot is reused).
    pub fn clear(&mut self) {
        self.held.clear();
        self.due = None;
    }

    /// The packets held now (for the end-of-run accounting).
    pub fn held(&self) -> &[Packet] {
        &self.held
    }

    pub fn due(&self) -> Option<Time> {
        self.due
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Packet;

    fn pkt(i: u32) -> Packet {
        Packet::datagram(7, 1500, i)
    }

    #[test]
    fn packets_within_a_hold_form_one_batch() {
        let mut rx = RxBatcher::new(Dist::Constant { value: 100.0 }, Rng::stream(1, "t"));
        assert_eq!(rx.arrive(Time(1_000), pkt(0)), Some(Time(1_100)));
        assert_eq!(rx.arrive(Time(1_050), pkt(1)), None);
        assert_eq!(rx.arrive(Time(1_100), pkt(2)), None);
        let mut batch = Vec::new();
        rx.take(&mut batch);
        assert_eq!(batch.len(), 3);
        // The next arrival opens a new batch.
        assert_eq!(rx.arrive(Time(1_200), pkt(3)), Some(Time(1_300)));
    }

    #[test]
    fn holds_are_drawn_per_batch() {
        let mut rx = RxBatcher::new(Dist::Uniform { min: 0.0, max: 1_000.0 }, Rng::stream(1, "t"));
        let mut holds = Vec::new();
        let mut batch = Vec::new();
        for i in 0..50 {
            let t = Time(i * 10_000);
            holds.push(rx.arrive(t, pkt(i as u32)).unwrap().0 - t.0);
            rx.take(&mut batch);
        }
        assert!(holds.iter().all(|&h| h <= 1_000));
        assert!(holds.iter().any(|&h| h != holds[0]));
    }
}
