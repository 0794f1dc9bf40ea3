//! A pipe is a one-way FIFO channel with an optional serialisation rate and a
//! fixed propagation delay: an access link, or the propagation leg of a path.
//! Its buffer is unbounded (it models a host's NIC queue or a wire, not a
//! bottleneck). Because departures are in arrival order and the delay is fixed,
//! arrival times at the far end are monotonic; the pipe keeps its packets in a
//! deque and needs only one scheduled event, for its head.
//!
//! A host's link to a Linux router hands over super-packets whole
//! (`set_whole_skbs`): the segments of one skb are serialised back to back and
//! all reach the far end when the last has, as one skb crosses a veth or is
//! reassembled by the router's GRO; the simulation then moves them in one event.
//!
//! A propagation leg may be late by a random amount per packet (`set_noise`:
//! a delay emulator's release error); arrivals stay in order, so the noise
//! bunches packets but never reorders them. It may also pass nothing while
//! the hosts' CPUs are busy elsewhere (`set_stalls`): a packet due inside such
//! a stall arrives at its end. The return legs of all flows draw the same
//! stalls, so the ACKs of every flow bunch together, as on a shared machine.

use crate::dist::{Dist, Sampler};
use crate::net::stall::Stalls;
use crate::packet::{Packet, Payload};
use crate::rng::Rng;
use crate::units::{Dur, Rate, Time};
use std::collections::VecDeque;

pub struct Pipe {
    rate: Option<Rate>,
    delay: Dur,
    busy_until: Time,
    in_flight: VecDeque<(Time, Packet)>,
    /// Super-packets arrive whole; `staged` holds the first segments of one
    /// until its last is serialised.
    whole_skbs: bool,
    staged: Vec<Packet>,
    /// Lateness added to each packet's delay (nanoseconds), from its own stream.
    noise: Option<(Sampler, Rng)>,
    /// When the leg passes nothing (the stalls of the hosts' CPUs).
    stalls: Option<Stalls>,
}

/// Whether `next` is the segment after `prev` in one super-packet.
pub fn continues_skb(prev: &Packet, next: &Packet) -> bool {
    match (&prev.payload, &next.payload) {
        (Payload::Data(a), Payload::Data(b)) => {
            !a.gso.bundle
                && !b.gso.bundle
                && prev.flow == next.flow
                && prev.epoch == next.epoch
                && a.gso.segs > 1
                && b.gso.segs == a.gso.segs
                && b.gso.index == a.gso.index + 1
                && b.seq == a.seq.wrapping_add(1)
        }
        _ => false,
    }
}

impl Pipe {
    pub fn new(rate: Option<Rate>, delay: Dur) -> Pipe {
        Pipe { rate, delay, busy_until: Time::ZERO, in_flight: VecDeque::new(), whole_skbs: false, staged: Vec::new(), noise: None, stalls: None }
    }

    /// Deliver each super-packet whole, when its last segment is through.
    pub fn set_whole_skbs(&mut self) {
        self.whole_skbs = true;
    }

    /// Delay each packet by a further draw from `noise` (ns, negative draws
    /// count as zero), keeping arrivals in order.
    pub fn set_noise(&mut self, noise: Dist, rng: Rng) {
        self.noise = Some((Sampler::new(noise), rng));
    }

    /// Hold each packet due during one of `stalls` until the stall ends.
    pub fn set_stalls(&mut self, stalls: Stalls) {
        self.stalls = Some(stalls);
    }

    pub fn delay(&self) -> Dur {
        self.delay
    }

    pub fn set_delay(&mut self, delay: Dur) {
        self.delay = delay;
    }

    /// Accepts a packet at `now`. Returns the time its head event must be
    /// scheduled if the pipe was empty (otherwise an event is already pending).
    /// A whole skb (a bundle) stays one entry where its segments would all
    /// arrive together (a pipe that delivers skbs whole, or a propagation leg
    /// without a rate); otherwise its segments go in one by one.
    pub fn push(&mut self, now: Time, pkt: Packet) -> Option<Time> {
        if pkt.is_bundle() && !self.whole_skbs && self.rate.is_some() {
            let mut head = None;
            for i in 0..pkt.segs() {
                head = head.or(self.push(now, pkt.segment(i)));
            }
            return head;
        }
        let sent = match self.rate {
            Some(rate) => {
                // Each segment is serialised on its own, back to back: the
                // last one's time plus the others' (each rounded as alone).
                let n = pkt.segs();
                let mut busy = now.max(self.busy_until) + rate.tx_time(pkt.segment_wire_bytes(n - 1) as u64);
                if n > 1 {
                    busy = busy + Dur(rate.tx_time(pkt.wire_bytes as u64).0 * (n as u64 - 1));
                }
                self.busy_until = busy;
                busy
            }
            None => now,
        };
        if self.whole_skbs && !pkt.is_bundle() {
            if let Payload::Data(d) = &pkt.payload {
                if d.gso.segs > 1 && d.gso.index + 1 < d.gso.segs {
                    self.staged.push(pkt);
                    return None;
                }
            }
        }
        // A delay that shrank (path change) must not reorder: keep arrivals monotonic.
        let mut arrival = sent + self.delay;
        if let Some((noise, rng)) = &mut self.noise {
            arrival = arrival + Dur(noise.draw_ns(rng));
        }
        if let Some(&(last, _)) = self.in_flight.back() {
            arrival = arrival.max(last);
        }
        if let Some(stalls) = &mut self.stalls {
            // In order already, so the stalls are asked at non-decreasing times.
            arrival = stalls.free_at(arrival);
        }
        let was_empty = self.in_flight.is_empty();
        for p in self.staged.drain(..) {
            self.in_flight.push_back((arrival, p));
        }
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

    /// The head packet, if it arrives at `now` and is the segment after
    /// `prev` in one super-packet (the rest of an skb that arrived whole).
    pub fn pop_continuation(&mut self, now: Time, prev: &Packet) -> Option<Packet> {
        match self.in_flight.front() {
            Some((t, p)) if *t == now && continues_skb(prev, p) => self.in_flight.pop_front().map(|(_, p)| p),
            _ => None,
        }
    }

    pub fn head_time(&self) -> Option<Time> {
        self.in_flight.front().map(|&(t, _)| t)
    }

    pub fn len(&self) -> usize {
        self.in_flight.len() + self.staged.len()
    }

    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty() && self.staged.is_empty()
    }

    /// Packets inside the pipe (for end-of-run accounting; a bundle counts
    /// for its segments).
    pub fn packets(&self) -> impl Iterator<Item = &Packet> {
        self.in_flight.iter().map(|(_, p)| p).chain(self.staged.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::Dist;
    use crate::packet::{AckExt, AckSegment, SackBlocks};

    fn ack(n: u32) -> Packet {
        Packet::ack(0, AckSegment { ack: n, wnd_end: 0, tsecr: 0, sack: SackBlocks::default(), ece: false, ace: 0, ext: AckExt::None })
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
    fn whole_super_packets_arrive_with_their_last_segment() {
        use crate::packet::{DataSegment, Gso};
        let seg = |i: u16| {
            let gso = Gso { segs: 3, index: i, whole: false, ..Gso::default() };
            Packet::data(0, DataSegment { seq: 10 + i as u32, payload: 1448, tsval: 0, retransmission: false, ce: false, ect: false, ect1: false, cwr: false, psh: false, gso })
        };
        // 1500 bytes at 1.2 Gbit/s: 10 us each; 100 us of delay.
        let mut p = Pipe::new(Some(Rate(1_200_000_000)), Dur::from_us(100));
        p.set_whole_skbs();
        assert_eq!(p.push(Time::ZERO, seg(0)), None);
        assert_eq!(p.push(Time::ZERO, seg(1)), None);
        assert_eq!(p.len(), 2);
        let t = Time(130_000);
        assert_eq!(p.push(Time::ZERO, seg(2)), Some(t));
        let (first, next) = p.pop().unwrap();
        assert_eq!((first, next), (seg(0), Some(t)));
        let second = p.pop_continuation(t, &first).unwrap();
        assert_eq!(second, seg(1));
        assert_eq!(p.pop_continuation(t, &second), Some(seg(2)));
        assert!(p.is_empty());
        // Without the setting each segment arrives when it is serialised.
        let mut q = Pipe::new(Some(Rate(1_200_000_000)), Dur::from_us(100));
        assert_eq!(q.push(Time::ZERO, seg(0)), Some(Time(110_000)));
    }

    #[test]
    fn a_bundle_is_one_entry_where_its_segments_arrive_together() {
        use crate::packet::{DataSegment, Gso};
        let segs: Vec<Packet> = (0..3u16)
            .map(|i| {
                let gso = Gso { segs: 3, index: i, ..Gso::default() };
                Packet::data(0, DataSegment { seq: 10 + i as u32, payload: 1448, tsval: 0, retransmission: false, ce: false, ect: false, ect1: false, cwr: false, psh: false, gso })
            })
            .collect();
        let skb = Packet::bundle_of(&segs).unwrap();
        // A host's link to a Linux router: one entry, when its last segment is through.
        let mut whole = Pipe::new(Some(Rate(1_200_000_000)), Dur::from_us(100));
        whole.set_whole_skbs();
        assert_eq!(whole.push(Time::ZERO, skb), Some(Time(130_000)));
        assert_eq!(whole.pop(), Some((skb, None)));
        // A propagation leg: one entry.
        let mut leg = Pipe::new(None, Dur::from_us(100));
        assert_eq!(leg.push(Time::ZERO, skb), Some(Time(100_000)));
        assert_eq!(leg.len(), 1);
        // A link to a switch: each segment when it is serialised.
        let mut switch = Pipe::new(Some(Rate(1_200_000_000)), Dur::from_us(100));
        assert_eq!(switch.push(Time::ZERO, skb), Some(Time(110_000)));
        let arrivals: Vec<(Packet, Option<Time>)> = std::iter::from_fn(|| switch.pop()).collect();
        assert_eq!(arrivals, vec![(segs[0], Some(Time(120_000))), (segs[1], Some(Time(130_000))), (segs[2], None)]);
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

    /// Drains the pipe: each packet's arrival time.
    fn arrivals(p: &mut Pipe, first: Time) -> Vec<Time> {
        let mut out = vec![first];
        while let Some((_, next)) = p.pop() {
            out.extend(next);
        }
        out
    }

    #[test]
    fn noise_makes_packets_late_but_never_reorders_them() {
        // A packet every 10 us through a 1 ms leg that is late by 0-100 us:
        // later packets often draw less lateness than the one ahead.
        let mut p = Pipe::new(None, Dur::from_ms(1));
        p.set_noise(crate::dist::Dist::Uniform { min: 0.0, max: 100_000.0 }, Rng::stream(1, "noise"));
        let first = p.push(Time::ZERO, ack(0)).unwrap();
        for i in 1..1000u64 {
            assert_eq!(p.push(Time(i * 10_000), ack(i as u32)), None);
        }
        let got = arrivals(&mut p, first);
        assert_eq!(got.len(), 1000);
        let mut bunched = 0;
        for (i, w) in got.windows(2).enumerate() {
            assert!(w[1] >= w[0], "packet {} overtook the one ahead", i + 1);
            bunched += (w[1] == w[0]) as u32;
        }
        let late: Vec<u64> = got.iter().enumerate().map(|(i, t)| t.0 - (i as u64 * 10_000 + 1_000_000)).collect();
        assert!(late.iter().all(|&l| l <= 100_000));
        let mean = late.iter().sum::<u64>() as f64 / late.len() as f64;
        // Without reordering the lateness is the running maximum's: above the draws' mean of 50 us.
        assert!(mean > 50_000.0, "mean lateness {mean}");
        assert!(bunched > 100, "only {bunched} packets left together with the one ahead");
    }

    #[test]
    fn noise_draws_repeat_with_the_seed() {
        let run = |seed| {
            let mut p = Pipe::new(None, Dur::from_ms(1));
            p.set_noise(crate::dist::Dist::Exponential { mean: 30_000.0 }, Rng::stream(seed, "noise"));
            let first = p.push(Time::ZERO, ack(0)).unwrap();
            for i in 1..100u64 {
                p.push(Time(i * 1_000_000), ack(i as u32));
            }
            arrivals(&mut p, first)
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
        // 1 ms apart, the packets never catch up with each other: each is late by its own draw.
        let got = run(3);
        assert!(got.iter().enumerate().all(|(i, t)| t.0 >= (i as u64 + 1) * 1_000_000));
    }

    /// How late a return leg delivers ACKs sent at the spacing of the runs
    /// the noise was measured on (a flow's ACK every 0.5-1.5 ms): p50, p95,
    /// p99 and p99.9 in microseconds.
    fn lateness_at_ack_spacing(mut p: Pipe) -> [f64; 4] {
        let mut spacing = Rng::stream(1, "spacing");
        let mut sent = vec![Time::ZERO];
        let first = p.push(Time::ZERO, ack(0)).unwrap();
        for i in 1..200_000u32 {
            let t = *sent.last().unwrap() + Dur(500_000 + spacing.below(1_000_000));
            sent.push(t);
            assert_eq!(p.push(t, ack(i)), None);
        }
        let got = arrivals(&mut p, first);
        let mut late: Vec<u64> = got.iter().zip(&sent).map(|(a, s)| a.0 - s.0 - p.delay().0).collect();
        late.sort_unstable();
        let pct = |q: f64| late[((late.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
        [pct(0.5), pct(0.95), pct(0.99), pct(0.999)]
    }

    /// The linux backend's return path measured end to end (config/mod.rs):
    /// median 48-104 us, p95 172-308 us, p99 0.65-1.2 ms, p99.9 1.9-4.9 ms.
    fn assert_measured_shape([p50, p95, p99, p999]: [f64; 4]) {
        assert!((45.0..=110.0).contains(&p50), "p50 {p50} us");
        assert!((150.0..=320.0).contains(&p95), "p95 {p95} us");
        assert!((600.0..=1_400.0).contains(&p99), "p99 {p99} us");
        assert!((1_800.0..=5_000.0).contains(&p999), "p99.9 {p999} us");
    }

    /// The default return path, the noise's body per flow with the measured
    /// shared stalls as its tail (net/stall.rs), has the measured shape
    /// through the leg's FIFO.
    #[test]
    fn the_default_noise_and_return_stalls_through_the_fifo_have_the_measured_shape() {
        let mut p = Pipe::new(None, Dur::from_ms(20));
        p.set_noise(crate::config::default_delay_noise().unwrap(), Rng::stream(1, "noise"));
        p.set_stalls(Stalls::new(&crate::config::default_return_stalls().unwrap(), Rng::stream(1, "return-stalls")));
        assert_measured_shape(lateness_at_ack_spacing(p));
    }

    /// The body alone has the measured median and no tail to speak of.
    #[test]
    fn the_default_noise_alone_is_the_measured_body() {
        let mut p = Pipe::new(None, Dur::from_ms(20));
        p.set_noise(crate::config::default_delay_noise().unwrap(), Rng::stream(1, "noise"));
        let [p50, _, p99, _] = lateness_at_ack_spacing(p);
        assert!((45.0..=110.0).contains(&p50), "p50 {p50} us");
        assert!(p99 < 300.0, "p99 {p99} us: the tail belongs to the return stalls");
    }

    /// Two flows' return legs given the same stall stream hold their packets
    /// through the same stalls: what is due inside one leaves at its end on
    /// both legs, together; what is due outside passes untouched.
    #[test]
    fn legs_with_one_stall_stream_stall_together() {
        let cfg = crate::net::stall::StallConfig { every: Dur::from_ms(5), duration: Dist::Constant { value: 1_000_000.0 } };
        let leg = || {
            let mut p = Pipe::new(None, Dur::ZERO);
            p.set_stalls(Stalls::new(&cfg, Rng::stream(7, "return-stalls")));
            p
        };
        let (mut legs, mut free) = ([leg(), leg()], leg());
        let (start, end) = Stalls::new(&cfg, Rng::stream(7, "return-stalls")).window();
        // Flow 0's ACK is due as the stall starts, flow 1's half-way through it.
        let due = [start, Time(start.0 + 500_000)];
        let got: Vec<Time> = legs.iter_mut().zip(due).map(|(p, d)| p.push(d, ack(0)).unwrap()).collect();
        assert_eq!(got, vec![end, end]);
        let before = Time(start.0 - 1);
        assert_eq!(free.push(before, ack(0)), Some(before), "due before the stall: on time");
        assert_eq!(free.push(Time(end.0 - 1), ack(1)), None, "inside it: held behind the first");
        assert_eq!(free.pop().map(|(_, next)| next), Some(Some(end)));
    }
}
