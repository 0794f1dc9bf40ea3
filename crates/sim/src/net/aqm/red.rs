//! RED, Random Early Detection (Floyd & Jacobson 1993), as Linux's `sch_red`
//! (`include/net/red.h`) runs it, with `tc red`'s defaults.
//!
//! At each arrival the average queue is updated, `avg += w_q (q - avg)`, from
//! the backlog the packet finds (bytes as `qdisc_len` counts them, or packets in
//! packet mode). After an idle period the average instead decays as if `m`
//! packets of `avpkt` bytes had been sent at the link rate while the queue was
//! empty: `avg *= (1 - w_q)^m`. Below `min` nothing happens; between `min` and
//! `max` the packet is dropped (or CE-marked, with ECN and an ECN-capable packet)
//! with a probability that rises from 0 to `max_p` (`p_b`) and is spread by the
//! count of packets since the last action, so that the gaps between actions
//! are uniform in 1..1/p_b rather than geometric; above `max` every packet is
//! dropped (ECT packets are marked instead when ECN is on, unless `harddrop`).
//! `gentle` (off by default, absent from Linux) lets the probability rise from
//! `max_p` at `max` to 1 at 2 `max` instead of jumping to 1. A hard `limit`
//! (the scenario's buffer) drops at the tail like the child bfifo Linux puts
//! under RED.
//!
//! Linux draws one random number after each action and acts when
//! `p_b * count >= R` (`red_action`, `red_mark_probability`), which is Floyd and
//! Jacobson's `p_a = p_b / (1 - count p_b)` with a single draw per gap; this
//! does the same in floating point. Differences: the average is a float (Linux:
//! fixed point with `w_q = 2^-Wlog`, so any `w_q` is accepted here; the default
//! is tc's `2^-Wlog`); the idle decay is computed exactly where Linux uses a
//! table of shifts that tc precomputes (a coarse approximation of the same
//! formula); the link rate is used for it (tc's `bandwidth`, which defaults to
//! 10 Mbit when not given); adaptive RED is not modelled.

use super::set_ce;
use crate::net::queue::{Enqueued, Fifo, QdiscStats, QueueDisc, QueueLimit, RedBin};
use crate::packet::Packet;
use crate::rng::Rng;
use crate::units::{Dur, Rate, Time};

/// tc red's default `probability`.
pub const DEFAULT_MAX_P: f64 = 0.02;
/// Average packet size when the scenario gives none (the tc-red(8) examples'
/// `avpkt 1000`; tc requires it).
pub const DEFAULT_AVPKT: u32 = 1000;
/// Bins of the recorded curve per `max` of average queue (the curve spans 0..2 max).
const CURVE_BINS_PER_MAX: usize = 20;

/// RED's parameters, resolved (thresholds in bytes or packets).
#[derive(Clone, Debug, PartialEq)]
pub struct RedParams {
    /// Thresholds in packets (true) or `qdisc_len` bytes (false).
    pub packet_mode: bool,
    pub min: f64,
    pub max: f64,
    pub max_p: f64,
    pub w_q: f64,
    pub avpkt: u32,
    pub ecn: bool,
    pub harddrop: bool,
    pub gentle: bool,
}

/// tc's default minimum and maximum thresholds from the limit, after Floyd's
/// recommendations (`q_red.c`): max = 3 min, or limit / 4 when neither is given.
pub fn default_thresholds(min: Option<u64>, max: Option<u64>, limit: u64) -> (u64, u64) {
    let max = max.unwrap_or(match min {
        Some(m) if m > 0 => m * 3,
        _ => limit / 4,
    });
    let min = min.unwrap_or(max / 3);
    (min, max)
}

/// tc's default burst (packets): (2 min + max) / (3 avpkt) (`q_red.c`).
pub fn default_burst(min_bytes: f64, max_bytes: f64, avpkt: u32) -> u32 {
    ((2.0 * min_bytes + max_bytes) / (3.0 * avpkt as f64)) as u32
}

/// tc's choice of the averaging weight (`tc_red_eval_ewma`): the largest
/// w_q = 2^-Wlog such that a burst of `burst` packets arriving at an empty queue
/// does not push the average past `min`: burst + 1 - min/avpkt <= (1 - (1 - W)^burst) / W.
/// None when the burst is too small for the threshold or no Wlog < 32 fits.
pub fn ewma_weight(min_bytes: f64, burst: u32, avpkt: u32) -> Option<f64> {
    let a = burst as f64 + 1.0 - min_bytes / avpkt as f64;
    if a < 1.0 {
        return None;
    }
    let mut w = 0.5f64;
    for _ in 1..32 {
        if a <= (1.0 - (1.0 - w).powi(burst as i32)) / w {
            return Some(w);
        }
        w /= 2.0;
    }
    None
}

/// What `red_action` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedAction {
    DontMark,
    ProbMark,
    HardMark,
}

pub struct Red {
    p: RedParams,
    limit: QueueLimit,
    /// Transmission time of `avpkt` at the link rate (the idle clock).
    idle_tx: Dur,
    fifo: Fifo,
    avg: f64,
    /// Packets since the last action (-1: below min since, Linux `qcount`).
    qcount: i64,
    /// The uniform draw the next action waits for (Linux `qR`, scaled to [0, 1)).
    r: f64,
    idle_since: Option<Time>,
    rng: Rng,
    stats: QdiscStats,
    pub prob_drops: u64,
    pub prob_marks: u64,
    pub forced_drops: u64,
    pub forced_marks: u64,
}

impl Red {
    pub fn new(p: RedParams, limit: QueueLimit, rate: Rate, rng: Rng) -> Red {
        let bins = 2 * CURVE_BINS_PER_MAX;
        let width = p.max / CURVE_BINS_PER_MAX as f64;
        let mut stats = QdiscStats::new("red");
        stats.red_curve = (0..bins)
            .map(|i| RedBin { avg_lo: i as f64 * width, avg_hi: (i + 1) as f64 * width, ..RedBin::default() })
            .collect();
        Red {
            idle_tx: rate.tx_time(p.avpkt as u64),
            p,
            limit,
            fifo: Fifo::default(),
            avg: 0.0,
            qcount: -1,
            r: 0.0,
            // Linux starts RED idle (red_change on an empty child).
            idle_since: Some(Time::ZERO),
            rng,
            stats,
            prob_drops: 0,
            prob_marks: 0,
            forced_drops: 0,
            forced_marks: 0,
        }
    }

    pub fn params(&self) -> &RedParams {
        &self.p
    }

    /// The average queue (bytes or packets).
    pub fn avg(&self) -> f64 {
        self.avg
    }

    /// The initial drop probability p_b at average queue `avg`: 0 below min,
    /// rising linearly to max_p at max; above max 1 (gentle: rising linearly
    /// from max_p to 1 at 2 max).
    pub fn p_b(&self, avg: f64) -> f64 {
        let p = &self.p;
        if avg < p.min {
            0.0
        } else if avg < p.max {
            p.max_p * (avg - p.min) / (p.max - p.min)
        } else if p.gentle && avg < 2.0 * p.max {
            p.max_p + (1.0 - p.max_p) * (avg - p.max) / p.max
        } else {
            1.0
        }
    }

    /// Updates the average with the current backlog (`red_calc_qavg`).
    pub fn update_avg(&mut self, now: Time) {
        match self.idle_since.take() {
            Some(start) => {
                // m packets could have been sent while idle.
                let m = now.since(start).0 as f64 / self.idle_tx.0.max(1) as f64;
                self.avg *= (1.0 - self.p.w_q).powf(m);
            }
            None => {
                let q = if self.p.packet_mode { self.fifo.len() as f64 } else { self.fifo.linux_backlog() as f64 };
                self.avg += self.p.w_q * (q - self.avg);
            }
        }
    }

    /// `red_action`: decides what happens to an arriving packet at `avg`.
    pub fn action(&mut self) -> RedAction {
        let avg = self.avg;
        let p = &self.p;
        let hard = if p.gentle { 2.0 * p.max } else { p.max };
        if avg < p.min {
            self.qcount = -1;
            RedAction::DontMark
        } else if avg >= hard {
            self.qcount = -1;
            RedAction::HardMark
        } else {
            self.qcount += 1;
            if self.qcount > 0 {
                if self.p_b(avg) * self.qcount as f64 >= self.r {
                    self.qcount = 0;
                    self.r = self.rng.uniform();
                    return RedAction::ProbMark;
                }
            } else {
                self.r = self.rng.uniform();
            }
            RedAction::DontMark
        }
    }

    fn record(&mut self, avg: f64, action: RedAction) {
        let width = self.p.max / CURVE_BINS_PER_MAX as f64;
        let i = ((avg / width) as usize).min(self.stats.red_curve.len() - 1);
        let pb = self.p_b(avg);
        let bin = &mut self.stats.red_curve[i];
        bin.arrivals += 1;
        bin.sum_pb += pb;
        match action {
            RedAction::DontMark => {}
            RedAction::ProbMark => bin.prob_actions += 1,
            RedAction::HardMark => bin.forced_actions += 1,
        }
    }
}

impl QueueDisc for Red {
    fn enqueue(&mut self, now: Time, mut pkt: Packet) -> Enqueued {
        self.update_avg(now);
        let action = self.action();
        self.record(self.avg, action);
        match action {
            RedAction::DontMark => {}
            RedAction::ProbMark => {
                if self.p.ecn && set_ce(&mut pkt) {
                    self.prob_marks += 1;
                    self.stats.ce_marks += 1;
                } else {
                    self.prob_drops += 1;
                    return Enqueued::EarlyDropped(pkt);
                }
            }
            RedAction::HardMark => {
                if !self.p.harddrop && self.p.ecn && set_ce(&mut pkt) {
                    self.forced_marks += 1;
                    self.stats.ce_marks += 1;
                } else {
                    self.forced_drops += 1;
                    return Enqueued::EarlyDropped(pkt);
                }
            }
        }
        if !self.fifo.fits(self.limit, &pkt) {
            return Enqueued::Dropped(pkt);
        }
        self.fifo.push(now, pkt);
        Enqueued::Accepted
    }

    fn dequeue(&mut self, now: Time, _dropped: &mut Vec<Packet>) -> Option<Packet> {
        match self.fifo.pop() {
            Some((_, p)) => Some(p),
            None => {
                if self.idle_since.is_none() {
                    self.idle_since = Some(now);
                }
                None
            }
        }
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

    fn params(min: f64, max: f64, max_p: f64, w_q: f64) -> RedParams {
        RedParams { packet_mode: true, min, max, max_p, w_q, avpkt: 1500, ecn: false, harddrop: false, gentle: false }
    }

    fn red(p: RedParams) -> Red {
        Red::new(p, QueueLimit::Packets(10_000), Rate::from_mbps(10), Rng::stream(1, "red-test"))
    }

    #[test]
    fn tc_defaults() {
        // limit 400 KB: max = limit / 4, min = max / 3.
        assert_eq!(default_thresholds(None, None, 400_000), (33_333, 100_000));
        assert_eq!(default_thresholds(Some(30_000), None, 400_000), (30_000, 90_000));
        assert_eq!(default_thresholds(None, Some(90_000), 400_000), (30_000, 90_000));
        // tc-red(8)'s example: min 30000 max 90000 avpkt 1000 -> burst 50 and
        // Wlog 5: a = 50 + 1 - 30 = 21 <= (1 - (31/32)^50) * 32 = 25.5, while
        // (1 - (15/16)^50) * 16 = 15.4 < 21.
        let burst = default_burst(30_000.0, 90_000.0, 1000);
        assert_eq!(burst, 50);
        let w = ewma_weight(30_000.0, burst, 1000).unwrap();
        assert_eq!(w, 1.0 / 32.0);
        assert!(ewma_weight(30_000.0, 10, 1000).is_none(), "a burst below min/avpkt is rejected");
    }

    #[test]
    fn average_follows_the_ewma_of_the_backlog() {
        let mut r = red(params(1000.0, 2000.0, 0.1, 0.01));
        // Keep 100 packets queued (never dequeue) and watch the average converge:
        // after n arrivals at backlog q, avg = q (1 - (1 - w)^n) (the first
        // arrival ends the initial idle period instead).
        let mut d = Vec::new();
        let _ = r.dequeue(Time(0), &mut d);
        for i in 0..100 {
            let _ = r.enqueue(Time(0), seg(0, i, false));
        }
        // The first arrival decayed avg (0); the next 99 saw backlogs 1..99.
        let mut want = 0.0;
        for q in 1..100 {
            want += 0.01 * (q as f64 - want);
        }
        assert!((r.avg() - want).abs() < 1e-9, "{} vs {want}", r.avg());
        for i in 0..500 {
            let _ = r.enqueue(Time(0), seg(0, 100 + i, false));
        }
        // Drifting towards the (growing) backlog.
        assert!(r.avg() > 300.0 && r.avg() < 600.0, "{}", r.avg());
    }

    #[test]
    fn idle_time_decays_the_average() {
        // avpkt 1500 B at 10 Mbps: one packet time is 1.2 ms.
        let mut r = red(params(5.0, 15.0, 0.1, 0.002));
        r.avg = 10.0;
        r.idle_since = None;
        let mut d = Vec::new();
        let _ = r.dequeue(Time(1_000_000), &mut d); // empty: idle from 1 ms
        let _ = r.enqueue(Time(1_000_000 + 120_000_000), seg(0, 0, false)); // 100 packet times later
        let want = 10.0 * (1.0f64 - 0.002).powi(100);
        assert!((r.avg() - want).abs() < 1e-9, "{} vs {want}", r.avg());
        // The next arrival, not idle, uses the EWMA again.
        let _ = r.enqueue(Time(122_000_000), seg(0, 1, false));
        assert!((r.avg() - (want + 0.002 * (1.0 - want))).abs() < 1e-9);
    }

    #[test]
    fn initial_probability_is_linear_between_the_thresholds() {
        let r = red(params(20.0, 80.0, 0.1, 0.002));
        assert_eq!(r.p_b(19.9), 0.0);
        assert_eq!(r.p_b(20.0), 0.0);
        assert!((r.p_b(50.0) - 0.05).abs() < 1e-12);
        assert!((r.p_b(79.999) - 0.1).abs() < 1e-4);
        assert_eq!(r.p_b(80.0), 1.0);
        let mut g = params(20.0, 80.0, 0.1, 0.002);
        g.gentle = true;
        let r = red(g);
        assert!((r.p_b(80.0) - 0.1).abs() < 1e-12);
        assert!((r.p_b(120.0) - 0.55).abs() < 1e-12);
        assert_eq!(r.p_b(160.0), 1.0);
    }

    /// The gaps (in packets) between actions at a fixed average.
    fn gaps_at(avg: f64, n: usize) -> Vec<u64> {
        let mut r = red(params(20.0, 80.0, 0.1, 0.002));
        r.avg = avg;
        let mut gaps = Vec::new();
        let mut since = 0;
        // Drive `action` directly so the average stays put.
        r.idle_since = None;
        while gaps.len() < n {
            since += 1;
            if r.action() == RedAction::ProbMark {
                gaps.push(since);
                since = 0;
            }
        }
        gaps
    }

    #[test]
    fn count_spacing_makes_gaps_uniform_up_to_one_over_pb() {
        // p_b = 0.05 at avg 50: gaps after the first are uniform on 1..=20,
        // mean 10.5 (a geometric spacing would have mean 20 and a long tail).
        let gaps = gaps_at(50.0, 20_000);
        let rest = &gaps[1..];
        assert!(rest.iter().all(|&g| (1..=20).contains(&g)), "max gap {}", rest.iter().max().unwrap());
        let mean = rest.iter().sum::<u64>() as f64 / rest.len() as f64;
        assert!((mean - 10.5).abs() < 0.15, "mean gap {mean}");
        // Each gap length equally likely: 1/20 each, within 5 sd.
        for g in 1..=20u64 {
            let f = rest.iter().filter(|&&x| x == g).count() as f64 / rest.len() as f64;
            assert!((f - 0.05).abs() < 5.0 * (0.05f64 * 0.95 / rest.len() as f64).sqrt(), "P(gap = {g}) = {f}");
        }
        // At p_b = 0.01 the mean gap is (1/p_b + 1) / 2 = 50.5.
        let gaps = gaps_at(26.0, 4000);
        let mean = gaps[1..].iter().sum::<u64>() as f64 / (gaps.len() - 1) as f64;
        assert!((mean - 50.5).abs() < 2.5, "mean gap {mean}");
    }

    #[test]
    fn ecn_marks_ect_packets_and_drops_the_others() {
        let mut p = params(2.0, 6.0, 0.5, 1.0);
        p.ecn = true;
        let mut r = red(p);
        let (mut marked, mut early, mut d) = (0, 0, Vec::new());
        let _ = r.dequeue(Time(0), &mut d);
        // w_q = 1: the average is the instantaneous backlog.
        for i in 0..8 {
            match r.enqueue(Time(0), seg(0, i, true)) {
                Enqueued::Accepted => {}
                Enqueued::EarlyDropped(_) => early += 1,
                _ => panic!(),
            }
        }
        for p in r.waiting() {
            marked += is_ce(&p) as u32;
        }
        assert_eq!(early, 0);
        assert!(marked >= 2, "above max (6 queued) every ECT packet is marked");
        assert_eq!(r.stats().ce_marks, marked as u64);
        // Not ECN-capable: dropped.
        assert!(matches!(r.enqueue(Time(0), seg(1, 0, false)), Enqueued::EarlyDropped(_)));
        // harddrop: above max even ECT packets are dropped.
        let mut p = params(2.0, 6.0, 0.5, 1.0);
        p.ecn = true;
        p.harddrop = true;
        let mut r = red(p);
        let _ = r.dequeue(Time(0), &mut d);
        for i in 0..10 {
            let _ = r.enqueue(Time(0), seg(0, i, true));
        }
        assert!(matches!(r.enqueue(Time(0), seg(0, 99, true)), Enqueued::EarlyDropped(_)));
    }

    #[test]
    fn hard_limit_drops_at_the_tail() {
        let mut r = Red::new(params(100.0, 300.0, 0.1, 0.002), QueueLimit::Packets(3), Rate::from_mbps(10), Rng::stream(1, "t"));
        for i in 0..3 {
            assert!(matches!(r.enqueue(Time(0), seg(0, i, false)), Enqueued::Accepted));
        }
        assert!(matches!(r.enqueue(Time(0), seg(0, 3, false)), Enqueued::Dropped(_)));
    }

    #[test]
    fn byte_mode_averages_qdisc_lengths() {
        let mut p = params(1e9, 2e9, 0.1, 1.0);
        p.packet_mode = false;
        let mut r = red(p);
        let mut d = Vec::new();
        let _ = r.dequeue(Time(0), &mut d);
        for i in 0..4 {
            let _ = r.enqueue(Time(0), seg(0, i, false));
        }
        // The 4th arrival saw 3 packets of 1514 bytes (1500 + Ethernet header).
        assert_eq!(r.avg(), 3.0 * 1514.0);
    }
}
