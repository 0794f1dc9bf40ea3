//! PIE, Proportional Integral controller Enhanced (RFC 8033), as Linux's
//! `sch_pie` (`include/net/pie.h`) runs it.
//!
//! Every `tupdate` (15 ms) the drop probability moves by
//! `alpha (qdelay - target) + beta (qdelay - qdelay_old)`, with target 15 ms,
//! alpha 0.125 and beta 1.25 per second of delay, both scaled down while the
//! probability is small (by 2 below 10 %, 8 below 1 %, ... 2048 below 0.0001 %,
//! RFC 8033 section 4.2). Steps of more than 2 % are capped once the
//! probability is 10 % or more; above 250 ms of delay it rises by 2 % more; when
//! the queue has been empty for two updates it decays by 1/64. Arriving packets
//! are dropped early with that probability, except during the burst allowance
//! (150 ms, restored whenever the queue has calmed down), when the delay is
//! under half the target and the probability under 20 %, or when fewer than two
//! MTUs are queued; Linux's derandomisation accumulates the probability and
//! never drops below 0.85 accumulated, always at 8.5 (so at a steady
//! probability p one packet in about (0.85/p - 1) + 1/p is dropped). With ECN,
//! ECN-capable packets are marked instead while the probability is at most
//! 10 %; as in Linux a mark does not reset the accumulator (only a drop does).
//! The probability is not clamped at 1 (Linux keeps 8 spare bits).
//!
//! The queue delay comes, as by Linux's default, from timestamps (the sojourn
//! of the last packet dequeued, 0 when the queue emptied); with
//! `dq_rate_estimator` it is estimated instead from the backlog and the measured
//! departure rate (Little's law, RFC 8033 section 5.1; measured over 16 KB
//! cycles). Linux's integer arithmetic is kept (probability in 2^56ths, time in
//! 64-ns psched ticks). The update timer is not an event: updates that fell
//! between two packet events are run at the next one, with the state they
//! would have seen (nothing else changes the queue in between). Differences:
//! `tupdate` is exact where Linux rounds it to jiffies (16 ms at HZ=250); the
//! limit may also be in bytes. As in Linux the first update comes half a second
//! after the qdisc starts.

use super::{qdisc_len, set_ce, PSCHED_MTU};
use crate::net::queue::{Enqueued, Fifo, QdiscStats, QueueDisc, QueueLimit};
use crate::packet::Packet;
use crate::rng::Rng;
use crate::units::{Dur, Time};

/// Probability 1 (`MAX_PROB`: U64_MAX >> 8).
pub const MAX_PROB: u64 = u64::MAX >> 8;
/// psched ticks: nanoseconds >> 6 (PSCHED_SHIFT).
const PSCHED_SHIFT: u32 = 6;
/// psched ticks per second (NSEC_PER_SEC >> PSCHED_SHIFT).
const PSCHED_TICKS_PER_SEC: u64 = 1_000_000_000 >> PSCHED_SHIFT;
/// Bytes of departures per rate measurement (`QUEUE_THRESHOLD`).
const QUEUE_THRESHOLD: u64 = 16384;
/// Fixed-point shift of the departure rate (`PIE_SCALE`).
const PIE_SCALE: u32 = 8;
/// Default target delay (`pie_params_init`: 15 ms).
pub const DEFAULT_TARGET: Dur = Dur(15_000_000);
/// Default update interval (`pie_params_init`: 15 ms).
pub const DEFAULT_TUPDATE: Dur = Dur(15_000_000);
/// Default alpha and beta in Hz (Linux: 2 and 20 sixteenths).
pub const DEFAULT_ALPHA: f64 = 0.125;
pub const DEFAULT_BETA: f64 = 1.25;
/// Burst allowance (`pie_vars_init`: 150 ms).
const BURST_ALLOWANCE: Dur = Dur(150_000_000);
/// Delay above which the probability rises by 2 % more per update.
const HIGH_DELAY: Dur = Dur(250_000_000);
/// The first update comes this long after the qdisc starts (`pie_init`: HZ / 2).
const FIRST_UPDATE: Dur = Dur(500_000_000);

#[inline]
fn ticks(ns: u64) -> u64 {
    ns >> PSCHED_SHIFT
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PieParams {
    pub target: Dur,
    pub tupdate: Dur,
    /// Hz (RFC 8033 units; Linux takes sixteenths).
    pub alpha: f64,
    pub beta: f64,
    pub ecn: bool,
    pub bytemode: bool,
    pub dq_rate_estimator: bool,
}

impl Default for PieParams {
    fn default() -> Self {
        PieParams {
            target: DEFAULT_TARGET,
            tupdate: DEFAULT_TUPDATE,
            alpha: DEFAULT_ALPHA,
            beta: DEFAULT_BETA,
            ecn: false,
            bytemode: false,
            dq_rate_estimator: false,
        }
    }
}

/// `struct pie_vars` (times in psched ticks).
#[derive(Clone, Copy, Debug, Default)]
pub struct PieVars {
    pub qdelay: u64,
    pub qdelay_old: u64,
    pub burst_time: u64,
    /// Last dequeue (timestamps) or start of the rate measurement (estimator).
    pub dq_tstamp: Option<u64>,
    pub prob: u64,
    pub accu_prob: u64,
    /// Bytes dequeued in the current measurement cycle (None: not measuring).
    pub dq_count: Option<u64>,
    /// Departure rate in bytes per tick << PIE_SCALE.
    pub avg_dq_rate: u64,
    pub backlog_old: u64,
}

impl PieVars {
    /// `pie_vars_init` (qdelay, qdelay_old and prob are kept).
    fn init(&mut self) {
        self.burst_time = ticks(BURST_ALLOWANCE.0);
        self.dq_tstamp = None;
        self.accu_prob = 0;
        self.dq_count = None;
        self.avg_dq_rate = 0;
    }
}

pub struct Pie {
    p: PieParams,
    target: u64,
    /// alpha and beta in probability units per tick of delay.
    alpha: u64,
    beta: u64,
    limit: QueueLimit,
    fifo: Fifo,
    pub vars: PieVars,
    next_update: Time,
    rng: Rng,
    stats: QdiscStats,
    /// Probability updates run.
    pub updates: u64,
}

impl Pie {
    pub fn new(p: PieParams, limit: QueueLimit, rng: Rng) -> Pie {
        let per_tick = (MAX_PROB / PSCHED_TICKS_PER_SEC) as f64;
        let mut vars = PieVars::default();
        vars.init();
        Pie {
            target: ticks(p.target.0),
            alpha: (p.alpha * per_tick) as u64,
            beta: (p.beta * per_tick) as u64,
            p,
            limit,
            fifo: Fifo::default(),
            vars,
            next_update: Time::ZERO + FIRST_UPDATE,
            rng,
            stats: QdiscStats::new("pie"),
            updates: 0,
        }
    }

    /// The drop probability in [0, 1].
    pub fn prob(&self) -> f64 {
        self.vars.prob as f64 / MAX_PROB as f64
    }

    /// Runs the updates due at or before `now`.
    fn catch_up(&mut self, now: Time) {
        while self.next_update <= now {
            self.calculate_probability();
            self.next_update += self.p.tupdate;
            let v = &self.vars;
            if self.fifo.is_empty() && v.prob == 0 && v.qdelay == 0 && v.qdelay_old == 0 && v.dq_tstamp.is_none() && v.dq_count.is_none() {
                // Idle and settled: further updates change nothing until a packet
                // comes; skip to the last update due.
                if self.next_update <= now {
                    let n = (now.0 - self.next_update.0) / self.p.tupdate.0;
                    self.next_update += Dur(n * self.p.tupdate.0);
                }
            }
        }
    }

    /// `pie_calculate_probability`, run every tupdate.
    pub fn calculate_probability(&mut self) {
        self.updates += 1;
        let backlog = self.fifo.linux_backlog();
        let v = &mut self.vars;
        let (qdelay, qdelay_old);
        if self.p.dq_rate_estimator {
            qdelay_old = v.qdelay;
            v.qdelay_old = v.qdelay;
            qdelay = (backlog << PIE_SCALE).checked_div(v.avg_dq_rate).unwrap_or(0);
        } else {
            qdelay = v.qdelay;
            qdelay_old = v.qdelay_old;
        }
        // A zero delay with a backlog means a very small queue: do not decay.
        let mut update_prob = !(qdelay == 0 && backlog != 0);

        let mut alpha = self.alpha;
        let mut beta = self.beta;
        // Scale alpha and beta down while the probability is small (RFC 8033 4.2).
        if v.prob < MAX_PROB / 10 {
            alpha >>= 1;
            beta >>= 1;
            let mut power = 100u64;
            while v.prob < MAX_PROB / power && power <= 1_000_000 {
                alpha >>= 2;
                beta >>= 2;
                power *= 10;
            }
        }
        let mut delta: i64 = 0;
        delta = delta.wrapping_add(alpha.wrapping_mul(qdelay.wrapping_sub(self.target)) as i64);
        delta = delta.wrapping_add(beta.wrapping_mul(qdelay.wrapping_sub(qdelay_old)) as i64);
        let oldprob = v.prob;
        // Steps of at most 2 % once the probability is 10 % or more.
        if delta > (MAX_PROB / 50) as i64 && v.prob >= MAX_PROB / 10 {
            delta = (MAX_PROB / 100 * 2) as i64;
        }
        // Rise quickly at high delays.
        if qdelay > ticks(HIGH_DELAY.0) {
            delta += (MAX_PROB / 50) as i64;
        }
        v.prob = v.prob.wrapping_add(delta as u64);
        if delta > 0 {
            if v.prob < oldprob {
                v.prob = MAX_PROB;
                update_prob = false;
            }
        } else if v.prob > oldprob {
            v.prob = 0;
        }
        // As in Linux, prob may exceed MAX_PROB (the 8 spare bits): it then acts
        // as 1 for drops and takes longer to come down.
        // Decay quickly when the queue has been empty for two updates.
        if qdelay == 0 && qdelay_old == 0 && update_prob {
            v.prob -= v.prob / 64;
        }
        v.qdelay = qdelay;
        v.backlog_old = backlog;
        // Restart the measurement cycle once calm.
        if v.qdelay < self.target / 2
            && v.qdelay_old < self.target / 2
            && v.prob == 0
            && (!self.p.dq_rate_estimator || v.avg_dq_rate > 0)
        {
            v.init();
        }
        if !self.p.dq_rate_estimator {
            v.qdelay_old = qdelay;
        }
    }

    /// `pie_drop_early`.
    fn drop_early(&mut self, packet_size: u32) -> bool {
        let v = &mut self.vars;
        if v.burst_time > 0 {
            return false;
        }
        if v.qdelay < self.target / 2 && v.prob < MAX_PROB / 5 {
            return false;
        }
        if self.fifo.linux_backlog() < 2 * PSCHED_MTU as u64 {
            return false;
        }
        let local_prob = if self.p.bytemode && packet_size <= PSCHED_MTU {
            packet_size as u64 * (v.prob / PSCHED_MTU as u64)
        } else {
            v.prob
        };
        if local_prob == 0 {
            v.accu_prob = 0;
        } else {
            // (Linux's u64 sum; an ECN mark does not reset it, so it can wrap.)
            v.accu_prob = v.accu_prob.wrapping_add(local_prob);
        }
        if v.accu_prob < (MAX_PROB / 100) * 85 {
            return false;
        }
        if v.accu_prob >= (MAX_PROB / 2) * 17 {
            return true;
        }
        if (self.rng.next_u64() >> 8) < local_prob {
            v.accu_prob = 0;
            return true;
        }
        false
    }

    /// `pie_process_dequeue`, after `pkt` left (the backlog is what remains).
    fn process_dequeue(&mut self, now: Time, enq: Time, len: u32) {
        let now_t = ticks(now.0);
        let backlog = self.fifo.linux_backlog();
        let v = &mut self.vars;
        let dtime;
        if !self.p.dq_rate_estimator {
            v.qdelay = now_t.saturating_sub(ticks(enq.0));
            dtime = v.dq_tstamp.map_or(0, |t| now_t.saturating_sub(t));
            v.dq_tstamp = Some(now_t);
            if backlog == 0 {
                v.qdelay = 0;
            }
            if dtime == 0 {
                return;
            }
        } else {
            if backlog >= QUEUE_THRESHOLD && v.dq_count.is_none() {
                v.dq_tstamp = Some(now_t);
                v.dq_count = Some(0);
            }
            let Some(count) = v.dq_count else { return };
            let count = count + len as u64;
            v.dq_count = Some(count);
            if count < QUEUE_THRESHOLD {
                return;
            }
            dtime = now_t.saturating_sub(v.dq_tstamp.unwrap_or(now_t));
            if dtime == 0 {
                return;
            }
            let rate = (count << PIE_SCALE) / dtime;
            v.avg_dq_rate = if v.avg_dq_rate == 0 { rate } else { v.avg_dq_rate - (v.avg_dq_rate >> 3) + (rate >> 3) };
            if backlog < QUEUE_THRESHOLD {
                v.dq_count = None;
            } else {
                v.dq_count = Some(0);
                v.dq_tstamp = Some(now_t);
            }
        }
        v.burst_time = v.burst_time.saturating_sub(dtime);
    }
}

impl QueueDisc for Pie {
    fn enqueue(&mut self, now: Time, mut pkt: Packet) -> Enqueued {
        self.catch_up(now);
        if !self.fifo.fits(self.limit, &pkt) {
            self.vars.accu_prob = 0;
            return Enqueued::Dropped(pkt);
        }
        if self.drop_early(qdisc_len(&pkt)) {
            if self.p.ecn && self.vars.prob <= MAX_PROB / 10 && set_ce(&mut pkt) {
                self.stats.ce_marks += 1;
            } else {
                self.vars.accu_prob = 0;
                return Enqueued::EarlyDropped(pkt);
            }
        }
        self.fifo.push(now, pkt);
        Enqueued::Accepted
    }

    fn dequeue(&mut self, now: Time, _dropped: &mut Vec<Packet>) -> Option<Packet> {
        self.catch_up(now);
        let (enq, pkt) = self.fifo.pop()?;
        self.stats.sojourn(now.since(enq).0);
        self.process_dequeue(now, enq, qdisc_len(&pkt));
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
    use crate::net::aqm::testutil::seg;

    const MS: u64 = 1_000_000;

    fn pie() -> Pie {
        Pie::new(PieParams::default(), QueueLimit::Packets(100_000), Rng::stream(1, "pie-test"))
    }

    /// Sets the queue to `n` full-size packets (1514 bytes each as Linux
    /// counts), bypassing the controller.
    fn fill(q: &mut Pie, n: u32) {
        while q.fifo.pop().is_some() {}
        for i in 0..n {
            q.fifo.push(Time::ZERO, seg(0, i, false));
        }
    }

    fn p_of(x: f64) -> u64 {
        (x * MAX_PROB as f64) as u64
    }

    /// One update with a given current and previous delay (ms) and probability.
    fn step(prob: f64, qdelay_ms: f64, old_ms: f64) -> f64 {
        let mut q = pie();
        fill(&mut q, 66); // ~100 KB
        q.vars.prob = p_of(prob);
        q.vars.qdelay = ticks((qdelay_ms * MS as f64) as u64);
        q.vars.qdelay_old = ticks((old_ms * MS as f64) as u64);
        q.calculate_probability();
        q.prob() - prob
    }

    #[test]
    fn update_is_alpha_times_error_plus_beta_times_trend() {
        // At p >= 10 %: no scaling. 10 ms above target, steady:
        // alpha * 0.010 s = 0.00125.
        let d = step(0.2, 25.0, 25.0);
        assert!((d - 0.00125).abs() < 1e-5, "{d}");
        // Rising by 4 ms since the last update: + beta * 0.004 = 0.005.
        let d = step(0.2, 25.0, 21.0);
        assert!((d - 0.00625).abs() < 1e-5, "{d}");
        // Below target and falling: negative.
        let d = step(0.2, 5.0, 10.0);
        assert!((d - (-0.00125 - 0.00625)).abs() < 1e-5, "{d}");
    }

    #[test]
    fn alpha_and_beta_scale_down_with_small_probabilities() {
        // RFC 8033 4.2: divide by 2 below 10 %, 8 below 1 %, 32 below 0.1 %,
        // 128 below 0.01 %, 512 below 0.001 %, 2048 below 0.0001 %.
        let full = 0.125 * 0.010; // alpha * 10 ms
        for (p, div) in [(0.05, 2.0), (0.005, 8.0), (0.0005, 32.0), (0.00005, 128.0), (0.000005, 512.0), (0.0000005, 2048.0), (0.0, 2048.0)] {
            let d = step(p, 25.0, 25.0);
            assert!((d - full / div).abs() < 1e-4 * full / div + 1e-12, "p {p}: {d} vs {}", full / div);
        }
    }

    #[test]
    fn steps_are_capped_at_two_percent_and_high_delay_adds_two() {
        // At p >= 10 % a large step is capped to 2 %.
        let d = step(0.3, 200.0, 20.0);
        assert!((d - 0.02).abs() < 1e-6, "{d}");
        // Above 250 ms, 2 % more (after the cap).
        let d = step(0.3, 300.0, 300.0);
        assert!((d - 0.04).abs() < 1e-6, "{d}");
        // The probability may pass 1, as in Linux (it then drops every packet).
        let d = step(0.99, 400.0, 100.0);
        assert!((d - 0.04).abs() < 1e-6, "{d}");
    }

    #[test]
    fn empty_queue_decays_the_probability_by_one_64th() {
        let mut q = pie();
        q.vars.prob = p_of(0.5);
        q.calculate_probability(); // qdelay = qdelay_old = 0, backlog 0
        // alpha term: -alpha * target at p = 0.5 = -0.001875, then * 63/64.
        let want = (0.5 - 0.125 * 0.015) * 63.0 / 64.0;
        assert!((q.prob() - want).abs() < 1e-6, "{} vs {want}", q.prob());
    }

    #[test]
    fn burst_allowance_defers_early_drops() {
        // A queue held at 30 ms of delay with high probability: no early drop
        // during the first 150 ms of dequeues, then drops.
        let mut q = pie();
        q.vars.prob = p_of(0.5);
        let mut d = Vec::new();
        let mut t = 0u64;
        let mut first_drop = None;
        for i in 0..400u32 {
            // keep ~25 packets queued, one out per ms, each waited 25 ms
            while q.backlog_packets() < 25 {
                let r = q.enqueue(Time(t), seg(0, i, false));
                if matches!(r, Enqueued::EarlyDropped(_)) && first_drop.is_none() {
                    first_drop = Some(t);
                }
                if !matches!(r, Enqueued::Accepted) {
                    break;
                }
            }
            let _ = q.dequeue(Time(t), &mut d);
            t += MS;
        }
        // The allowance is used up by the 150th ms of dequeues; then the
        // accumulated probability (0.5 per packet) reaches 0.85 within 2 packets.
        let first = first_drop.expect("drops after the allowance") as f64 / MS as f64;
        assert!((150.0..=165.0).contains(&first), "first early drop at {first} ms");
    }

    /// The mean gap between early drops at a constant probability p: no drop
    /// before k0 p >= 0.85, then a drop with probability p per packet, and
    /// certainly once 8.5 has accumulated.
    fn mean_gap(p: f64) -> f64 {
        let k0 = (0.85 / p).ceil() as u32;
        let kmax = (8.5 / p).ceil() as u32;
        let mut mean = 0.0;
        let mut survive = 1.0;
        for k in k0..kmax {
            mean += k as f64 * survive * p;
            survive *= 1.0 - p;
        }
        mean + kmax as f64 * survive
    }

    /// `drop_early` as enqueue uses it: a drop resets the accumulator.
    fn early(q: &mut Pie) -> bool {
        let d = q.drop_early(1514);
        if d {
            q.vars.accu_prob = 0;
        }
        d
    }

    #[test]
    fn no_early_drop_below_two_mtus_or_half_target_with_low_probability() {
        let mut q = pie();
        q.vars.burst_time = 0;
        q.vars.prob = p_of(0.15);
        q.vars.qdelay = ticks(5 * MS); // < target / 2 and prob < 20 %
        fill(&mut q, 66); // ~100 KB
        for _ in 0..1000 {
            assert!(!q.drop_early(1514));
        }
        q.vars.qdelay = ticks(20 * MS);
        fill(&mut q, 1); // < 2 * 1514
        for _ in 0..1000 {
            assert!(!q.drop_early(1514));
        }
        fill(&mut q, 66); // ~100 KB
        let drops = (0..100_000).filter(|_| early(&mut q)).count() as f64 / 100_000.0;
        // Derandomised: one drop per mean_gap packets (11.7 at 15 %).
        let want = 1.0 / mean_gap(0.15);
        assert!((drops / want - 1.0).abs() < 0.03, "{drops} vs {want}");
    }

    #[test]
    fn derandomisation_bounds_the_gaps() {
        // Never before 0.85 accumulated, always at 8.5: at p = 0.1, gaps between
        // drops are 9..=85 packets.
        let mut q = pie();
        q.vars.burst_time = 0;
        q.vars.prob = p_of(0.1);
        q.vars.qdelay = ticks(20 * MS);
        fill(&mut q, 66); // ~100 KB
        let mut gap = 0;
        let mut gaps = Vec::new();
        for _ in 0..200_000 {
            gap += 1;
            if early(&mut q) {
                gaps.push(gap);
                gap = 0;
            }
        }
        assert!(gaps.iter().all(|&g| (9..=86).contains(&g)), "{:?}", (gaps.iter().min(), gaps.iter().max()));
        let mean = gaps.iter().sum::<u32>() as f64 / gaps.len() as f64;
        assert!((mean / mean_gap(0.1) - 1.0).abs() < 0.03, "{mean} vs {}", mean_gap(0.1));
    }

    #[test]
    fn ecn_marks_up_to_ten_percent() {
        let p = PieParams { ecn: true, ..PieParams::default() };
        let mut q = Pie::new(p, QueueLimit::Packets(100_000), Rng::stream(2, "x"));
        q.vars.burst_time = 0;
        q.vars.qdelay = ticks(20 * MS);
        q.next_update = Time(u64::MAX);
        for i in 0..10 {
            let _ = q.enqueue(Time(0), seg(0, i, true));
        }
        q.vars.prob = p_of(0.08);
        let mut early = 0;
        for i in 0..5000 {
            if matches!(q.enqueue(Time(0), seg(0, i, true)), Enqueued::EarlyDropped(_)) {
                early += 1;
            }
        }
        assert_eq!(early, 0);
        let marks = q.stats().ce_marks as f64;
        assert!(marks >= 0.8 * 5000.0 / mean_gap(0.08), "{marks}");
        // Above 10 %: dropped even if ECN-capable.
        q.vars.prob = p_of(0.2);
        q.vars.accu_prob = 0;
        let early = (0..5000).filter(|&i| matches!(q.enqueue(Time(0), seg(0, i, true)), Enqueued::EarlyDropped(_))).count() as f64;
        assert!((early / (5000.0 / mean_gap(0.2)) - 1.0).abs() < 0.15, "{early}");
    }

    #[test]
    fn timer_updates_catch_up_at_the_next_event() {
        let mut q = pie();
        let mut d = Vec::new();
        let _ = q.enqueue(Time(0), seg(0, 0, false));
        assert_eq!(q.updates, 0);
        // The first update at 500 ms, then every 15 ms: by 800 ms, 21 updates.
        let _ = q.enqueue(Time(800 * MS), seg(0, 1, false));
        assert_eq!(q.updates, 21);
        let _ = q.dequeue(Time(801 * MS), &mut d);
        assert_eq!(q.updates, 21);
        // A long idle period is skipped cheaply once the state is settled.
        let _ = q.dequeue(Time(802 * MS), &mut d);
        let _ = q.enqueue(Time(1_000_000 * MS), seg(0, 2, false));
        assert!(q.updates < 100, "{}", q.updates);
    }
}
