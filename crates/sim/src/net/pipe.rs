//! A pipe is a one-way FIFO channel with an optional serialisation rate and a
//! fixed propagation delay: an access link, or the propagation leg of a path.
//! Its buffer is unbounded (it models a host's NIC queue or a wire, not a
//! bottleneck). Because departures are in arrival order and the delay is fixed,
//! arrival times at the far end are monotonic; the pipe keeps its packets in a
//! deque and needs only one scheduled event, for its head.

use crate::packet::Packet;
use crate::units::{Dur, Rate, Time};
use std::collections::VecDeque;

pub struct Pipe {
    rate: Option<Rate>,
    delay: Dur,
    busy_until: Time,
    in_flight: VecDeque<(Time, Packet)>,
}

impl Pipe {
    pub fn new(rate: Option<Rate>, delay: Dur) -> Pipe {
        Pipe { rate, delay, busy_until: Time::ZERO, in_flight: VecDeque::new() }
    }

    pub fn delay(&self) -> Dur {
        self.delay
    }

    pub fn set_delay(&mut self, delay: Dur) {
        self.delay = delay;
    }

    /// Accepts a packet at `now`. Returns the time its head event must be
    /// scheduled if the pipe was empty (otherwise an event is already pending).
    pub fn push(&mut self, now: Time, pkt: Packet) -> Option<Time> {
        let sent = match self.rate {
            Some(rate) => {
                let start = now.max(self.busy_until);
                self.busy_until = start + rate.tx_time(pkt.wire_bytes as u64);
                self.busy_until
            }
            None => now,
        };
        // A delay that shrank (path change) must not reorder: keep arrivals monotonic.
        let mut arrival = sent + self.delay;
        if let Some(&(last, _)) = self.in_flight.back() {
            arrival = arrival.max(last);
        }
        let was_empty = self.in_flight.is_empty();
        self.in_flight.push_back((arrival, pkt));
        if was_empty {
            Some(arrival)
        } else {
            None
        }
    }

    /// Removes the head packet (its arrival time has come) and returns it with
    /// the arrival time of the next one, if any.
    pub fn pop(&mut self) -> Option<(Packet, Option<Time>)> {
        let (_, pkt) = self.in_flight.pop_front()?;
        Some((pkt, self.in_flight.front().map(|&(t, _)| t)))
    }

    pub fn head_time(&self) -> Option<Time> {
        self.in_flight.front().map(|&(t, _)| t)
    }

    pub fn len(&self) -> usize {
        self.in_flight.len()
    }

    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty()
    }

    /// Packets inside the pipe (for end-of-run accounting).
    pub fn packets(&self) -> impl Iterator<Item = &Packet> {
        self.in_flight.iter().map(|(_, p)| p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{AckSegment, SackBlocks};

    fn ack(n: u32) -> Packet {
        Packet::ack(0, AckSegment { ack: n, wnd_end: 0, tsecr: 0, sack: SackBlocks::default(), ece: false, ace: 0, rx_seq: 0, rx_ns_low: 0 })
    }

    #[test]
    fn serialises_then_delays() {
        // 52-byte ACKs at 416 kbit/s take 1 ms each; 10 ms propagation.
        let mut p = Pipe::new(Some(Rate(416_000)), Dur::from_ms(10));
        assert_eq!(p.push(Time::ZERO, ack(1)), Some(Time::from_ms(11)));
        assert_eq!(p.push(Time::ZERO, ack(2)), None);
        let (a, next) = p.pop().unwrap();
        assert_eq!(a, ack(1));
        assert_eq!(next, Some(Time::from_ms(12)));
    }

    #[test]
    fn shrinking_delay_keeps_order() {
        let mut p = Pipe::new(None, Dur::from_ms(10));
        p.push(Time::ZERO, ack(1));
        p.set_delay(Dur::from_ms(1));
        p.push(Time::from_ms(1), ack(2));
        let (_, next) = p.pop().unwrap();
        assert_eq!(next, Some(Time::from_ms(10)));
    }
}
