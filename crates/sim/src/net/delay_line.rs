//! A delay line delays each packet by its own amount: the propagation leg of a
//! path whose delay varies per packet (`netem delay D J`) or that many flows with
//! different delays share (the web-traffic generators' one leg per direction).
//! Packets leave in order of their exit time, so jitter reorders packets as
//! netem's time-sorted queue does; with `reorder` off a packet never leaves
//! before the one ahead of it (netem with a FIFO child queue), which turns jitter
//! into bunching instead of reordering.
//!
//! The line keeps a heap ordered by (exit time, arrival order) and tells the
//! caller when it needs a wake-up: only when a new packet becomes the earliest
//! and no earlier wake-up is already pending.

use crate::config::Schema;
use crate::packet::Packet;
use crate::rng::Rng;
use crate::units::{Dur, Time};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How netem draws the jitter around the mean delay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, Schema)]
#[serde(rename_all = "snake_case")]
pub enum JitterShape {
    /// Uniform in [delay - jitter, delay + jitter] (netem without a table).
    #[default]
    Uniform,
    /// Normal with standard deviation `jitter` (netem `distribution normal`).
    Normal,
}

/// Per-packet delay variation, in the terms of `tc qdisc ... netem delay D J`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(name = "jitter")]
pub struct JitterConfig {
    /// Size of the variation around the leg's delay (netem's J).
    #[schema(positive)]
    pub jitter: Dur,
    /// How the variation is drawn.
    #[serde(default)]
    pub distribution: JitterShape,
    /// Let a packet with a shorter delay overtake the ones ahead (netem's default).
    #[serde(default = "yes")]
    pub reorder: bool,
}

fn yes() -> bool {
    true
}

struct Held {
    exit: Time,
    order: u64,
    pkt: Packet,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.exit, self.order) == (o.exit, o.order)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.exit, self.order).cmp(&(o.exit, o.order))
    }
}

pub struct DelayLine {
    held: BinaryHeap<Reverse<Held>>,
    order: u64,
    jitter: Option<(JitterConfig, Rng)>,
    last_exit: Time,
    /// Extra delay added to every packet (a path change of the leg's delay).
    extra: Dur,
    /// Wake-ups already scheduled with the event queue (rarely more than two,
    /// so a plain list beats a tree).
    wakeups: Vec<Time>,
}

impl DelayLine {
    /// A line whose packets vary around their delay by `jitter`, drawn from
    /// its stream; without jitter every packet takes exactly its delay.
    pub fn new(jitter: Option<(JitterConfig, Rng)>) -> DelayLine {
        DelayLine {
            held: BinaryHeap::new(),
            order: 0,
            jitter,
            last_exit: Time::ZERO,
            extra: Dur::ZERO,
            wakeups: Vec::new(),
        }
    }

    /// True when the line varies each packet's delay: the segments of an
    /// skb then leave it as packets of their own (netem and the linux
    /// backend's delay program see a forwarded GSO packet segment by segment).
    pub fn separates_segments(&self) -> bool {
        self.jitter.is_some()
    }

    pub fn set_extra_delay(&mut self, extra: Dur) {
        self.extra = extra;
    }

    /// The delay a packet entering now gets: `base` plus the extra delay and
    /// the jitter, never below zero.
    fn draw(&mut self, base: Dur) -> Dur {
        let Some((j, rng)) = self.jitter.as_mut() else {
            return base + self.extra;
        };
        let mean = (base.0 + self.extra.0) as f64;
        let spread = j.jitter.0 as f64;
        let offset = match j.distribution {
            JitterShape::Uniform => spread * (2.0 * rng.uniform() - 1.0),
            JitterShape::Normal => spread * crate::dist::std_normal(rng),
        };
        Dur((mean + offset).max(0.0).round() as u64)
    }

    /// Accepts a packet that should spend `base` (plus jitter) in the line.
    /// Returns a time at which the caller must schedule a wake-up, if one is needed.
    pub fn push(&mut self, now: Time, base: Dur, pkt: Packet) -> Option<Time> {
        let mut exit = now + self.draw(base);
        // Without jitter each flow's packets keep their order by themselves (one
        // delay per flow); only jitter without reordering needs the FIFO rule.
        let fifo = self.jitter.as_ref().is_some_and(|(j, _)| !j.reorder);
        if fifo {
            exit = exit.max(self.last_exit);
        }
        self.last_exit = self.last_exit.max(exit);
        self.order += 1;
        self.held.push(Reverse(Held { exit, order: self.order, pkt }));
        self.wakeup_for_head()
    }

    fn wakeup_for_head(&mut self) -> Option<Time> {
        let head = self.held.peek()?.0.exit;
        match self.wakeups.iter().min() {
            Some(&w) if w <= head => None,
            _ => {
                self.wakeups.push(head);
                Some(head)
            }
        }
    }

    /// A wake-up scheduled for `now` fired.
    pub fn woke(&mut self, now: Time) {
        if let Some(i) = self.wakeups.iter().position(|&w| w == now) {
            self.wakeups.swap_remove(i);
        }
    }

    /// The next packet due at `now`, if any.
    pub fn pop_due(&mut self, now: Time) -> Option<Packet> {
        if self.held.peek()?.0.exit <= now {
            self.held.pop().map(|h| h.0.pkt)
        } else {
            None
        }
    }

    /// After draining the due packets: the wake-up to schedule for the new head.
    pub fn rearm(&mut self) -> Option<Time> {
        self.wakeup_for_head()
    }

    pub fn packets(&self) -> impl Iterator<Item = &Packet> {
        self.held.iter().map(|h| &h.0.pkt)
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::DataSegment;

    fn seg(seq: u32) -> Packet {
        Packet::data(0, DataSegment { seq, payload: 1448, tsval: 0, retransmission: false, ce: false, ect: false, ect1: false, cwr: false, psh: false, gso: Default::default() })
    }

    fn seq(p: &Packet) -> u32 {
        match p.payload {
            crate::packet::Payload::Data(d) => d.seq,
            _ => unreachable!(),
        }
    }

    /// Pushes `n` packets 1 ms apart and drains the line like the event loop does.
    fn run(line: &mut DelayLine, n: u32, base: Dur) -> Vec<(Time, u32)> {
        let mut wakeups = BinaryHeap::new();
        let mut out = Vec::new();
        for i in 0..n {
            let now = Time(i as u64 * 1_000_000);
            while let Some(&Reverse(w)) = wakeups.peek() {
                if w > now {
                    break;
                }
                wakeups.pop();
                drain(line, w, &mut wakeups, &mut out);
            }
            if let Some(w) = line.push(now, base, seg(i)) {
                wakeups.push(Reverse(w));
            }
        }
        while let Some(Reverse(w)) = wakeups.pop() {
            drain(line, w, &mut wakeups, &mut out);
        }
        out
    }

    fn drain(line: &mut DelayLine, w: Time, wakeups: &mut BinaryHeap<Reverse<Time>>, out: &mut Vec<(Time, u32)>) {
        line.woke(w);
        while let Some(p) = line.pop_due(w) {
            out.push((w, seq(&p)));
        }
        if let Some(t) = line.rearm() {
            wakeups.push(Reverse(t));
        }
    }

    fn jittered(reorder: bool, distribution: JitterShape) -> DelayLine {
        DelayLine::new(Some((JitterConfig { jitter: Dur::from_ms(10), distribution, reorder }, Rng::stream(3, "jitter"))))
    }

    #[test]
    fn without_jitter_every_packet_takes_its_delay() {
        let mut line = DelayLine::new(None);
        let out = run(&mut line, 100, Dur::from_ms(20));
        assert_eq!(out.len(), 100);
        for (t, s) in out {
            assert_eq!(t, Time(s as u64 * 1_000_000 + 20_000_000));
        }
    }

    #[test]
    fn jitter_reorders_like_netem_and_delays_average_to_the_mean() {
        let mut line = jittered(true, JitterShape::Uniform);
        let out = run(&mut line, 5_000, Dur::from_ms(20));
        assert_eq!(out.len(), 5_000);
        let delays: Vec<f64> = out.iter().map(|&(t, s)| (t.0 - s as u64 * 1_000_000) as f64 / 1e6).collect();
        assert!(delays.iter().all(|&d| (10.0..=30.0).contains(&d)));
        let mean = delays.iter().sum::<f64>() / delays.len() as f64;
        assert!((mean - 20.0).abs() < 0.3, "mean delay {mean}");
        let mut sorted = delays.clone();
        let ks = crate::dist::ks_statistic(&mut sorted, |x| ((x - 10.0) / 20.0).clamp(0.0, 1.0));
        assert!(ks < crate::dist::ks_critical_01(delays.len()), "KS {ks}");
        let reordered = out.windows(2).filter(|w| w[1].1 < w[0].1).count();
        assert!(reordered > 1_000, "{reordered} reorderings");
    }

    #[test]
    fn without_reordering_packets_leave_in_order() {
        let mut line = jittered(false, JitterShape::Normal);
        let out = run(&mut line, 5_000, Dur::from_ms(20));
        assert_eq!(out.len(), 5_000);
        assert!(out.windows(2).all(|w| w[1].1 == w[0].1 + 1 && w[1].0 >= w[0].0));
        // Every packet is held at least its own delay draw, so the mean grows
        // above the nominal delay (packets wait for slower ones ahead).
        let mean = out.iter().map(|&(t, s)| (t.0 - s as u64 * 1_000_000) as f64 / 1e6).sum::<f64>() / 5_000.0;
        assert!(mean > 20.0, "{mean}");
    }
}
