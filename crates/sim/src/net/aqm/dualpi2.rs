//! DualPI2, the coupled dual-queue AQM of L4S (RFC 9332), as Linux's
//! `sch_dualpi2` (mainline since 6.17) runs it.
//!
//! Two FIFOs share one limit: the L queue takes packets whose ECN field
//! matches the L4S identifier (ECT(1) or CE, `ecn_mask` = ECT(1) by default),
//! the C queue everything else. A PI controller ("PI2") updates a base
//! probability p' every `tupdate` (16 ms) from the larger of the two queues'
//! head sojourn times: p' += alpha (qdelay - target) + beta (qdelay -
//! qdelay_old), with target 15 ms, alpha 0.16 Hz and beta 3.2 Hz (Linux's
//! defaults, 41 and 819 in 1/256 Hz). Classic packets are dropped (or, if
//! ECN-capable, marked) with p_C = p'^2 (two random rolls against p'); L4S
//! packets are marked with the coupled p_CL = k p' (k = `coupling_factor`, 2),
//! so p_C = (p_CL / k)^2. When k p' exceeds 1 (overload) L4S packets are
//! dropped with p'^2 too (`drop_overload`). Nothing is dropped or marked
//! while fewer than two MTUs are queued. Packets leaving the L queue are also
//! marked by a step AQM when their sojourn exceeds `step_thresh` (1 ms; or,
//! in packets, when the L queue is longer). Marks and drops happen at dequeue
//! by default (`drop_early` off).
//!
//! The scheduler is Linux's weighted round robin on a byte credit: the L queue
//! is served while the C queue is empty or the credit is not positive; each L
//! packet sent while C waits adds `wc` (10) x its length, each C packet sent
//! while L waits subtracts `wl` = 100 - wc x its length; the credit restarts at
//! `psched_mtu (wc - wl)` (L first) when both queues are empty. So C gets at
//! least wc % of the link when both are backlogged.
//!
//! Linux's arithmetic is kept (probability in 2^32ths, alpha/beta scaled to
//! 64-ns units, the u32 truncation of the update). As with PIE, the update
//! timer is not an event: updates due between two packet events run at the
//! next one, with the queue they would have seen. Differences: the limit is
//! `network.buffer` (packets as Linux's `limit`, or bytes) and Linux's second
//! limit on skb memory (`memory_limit`, 2 x MTU x limit of truesize) is not
//! modelled; super-packets are split into segments on enqueue (Linux's default
//! `split_gso`); tc classification filters and skb priorities (the `LLLL`
//! class) are not modelled.

use super::{qdisc_len, set_ce, ETH_HLEN, PSCHED_MTU};
use crate::net::queue::{Enqueued, QdiscStats, QueueClassStats, QueueDisc, QueueLimit};
use crate::packet::{Packet, Payload};
use crate::rng::Rng;
use crate::units::{Dur, Time};
use std::collections::VecDeque;

/// Probability 1 (`MAX_PROB`: U32_MAX).
pub const MAX_PROB: u32 = u32::MAX;
/// alpha and beta come in 1/256 Hz (`ALPHA_BETA_SHIFT`) and are kept in
/// 64-ns units (`ALPHA_BETA_GRANULARITY`).
const ALPHA_BETA_SHIFT: u32 = 8;
const ALPHA_BETA_GRANULARITY: u32 = 6;
/// Largest alpha/beta in 1/256 Hz (`ALPHA_BETA_MAX`: 2^31 - 1).
pub const ALPHA_BETA_MAX: u32 = (1 << 31) - 1;
/// Weights of the scheduler are in percent (`MAX_WC`).
pub const MAX_WC: u8 = 100;
/// Default target delay (`dualpi2_reset_default`: 15 ms).
pub const DEFAULT_TARGET: Dur = Dur(15_000_000);
/// Default update interval (16 ms).
pub const DEFAULT_TUPDATE: Dur = Dur(16_000_000);
/// Default alpha and beta in Hz (41/256 ~ 0.16 and 819/256 ~ 3.2).
pub const DEFAULT_ALPHA: f64 = 41.0 / 256.0;
pub const DEFAULT_BETA: f64 = 819.0 / 256.0;
/// Default step threshold of the L queue (1 ms).
pub const DEFAULT_STEP_THRESH: Dur = Dur(1_000_000);
/// Default coupling factor k (window fairness at equal RTTs).
pub const DEFAULT_COUPLING: u8 = 2;
/// Default weight of the C queue in the scheduler (10 %).
pub const DEFAULT_C_PROTECTION: u8 = 10;

/// Which packets the L queue takes (`ecn_mask`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L4sMask {
    /// ECT(1) and CE (Linux's default, `l4s_ect`).
    L4sEct,
    /// Any ECT codepoint and CE (`any_ect`, e.g. DCTCP in a data centre).
    AnyEct,
}

/// The L queue's step threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepThresh {
    /// Mark when a packet's sojourn exceeds this.
    Time(Dur),
    /// Mark when more than this many packets remain in the L queue.
    Packets(u32),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DualPi2Params {
    pub target: Dur,
    pub tupdate: Dur,
    /// In Hz; Linux takes 1/256ths (tc rounds to them).
    pub alpha: f64,
    pub beta: f64,
    pub step: StepThresh,
    /// Apply the step only if the L queue held at least this many packets when
    /// the packet arrived (`min_qlen_step`).
    pub min_qlen_step: u32,
    pub coupling_factor: u8,
    /// Weight of the C queue in percent (`c_protection`).
    pub c_protection: u8,
    pub drop_early: bool,
    pub drop_overload: bool,
    pub ecn_mask: L4sMask,
}

impl Default for DualPi2Params {
    fn default() -> Self {
        DualPi2Params {
            target: DEFAULT_TARGET,
            tupdate: DEFAULT_TUPDATE,
            alpha: DEFAULT_ALPHA,
            beta: DEFAULT_BETA,
            step: StepThresh::Time(DEFAULT_STEP_THRESH),
            min_qlen_step: 0,
            coupling_factor: DEFAULT_COUPLING,
            c_protection: DEFAULT_C_PROTECTION,
            drop_early: false,
            drop_overload: true,
            ecn_mask: L4sMask::L4sEct,
        }
    }
}

/// `dualpi2_scale_alpha_beta`: a gain in Hz (rounded to 1/256 Hz as tc
/// passes it) in probability units per ns of delay x 64.
pub fn scale_alpha_beta(hz: f64) -> u32 {
    let param = (hz * 256.0).round() as u64;
    (((param * MAX_PROB as u64) >> (ALPHA_BETA_SHIFT - ALPHA_BETA_GRANULARITY)) / 1_000_000_000) as u32
}

/// A packet waiting in one of the queues, with what Linux keeps in its cb.
#[derive(Clone, Copy)]
struct Queued {
    ts: Time,
    pkt: Packet,
    apply_step: bool,
}

/// One of the two FIFOs.
#[derive(Default)]
struct SubQueue {
    q: VecDeque<Queued>,
    bytes: u64,
}

impl SubQueue {
    fn push(&mut self, e: Queued) {
        self.bytes += e.pkt.wire_bytes as u64;
        self.q.push_back(e);
    }
    fn pop(&mut self) -> Option<Queued> {
        let e = self.q.pop_front()?;
        self.bytes -= e.pkt.wire_bytes as u64;
        Some(e)
    }
    fn len(&self) -> u32 {
        self.q.len() as u32
    }
    fn head_ts(&self) -> Option<Time> {
        self.q.front().map(|e| e.ts)
    }
}

/// The ECN codepoint of a packet as the classifier reads it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ecn {
    NotEct,
    Ect0,
    Ect1,
    Ce,
}

fn ecn_of(pkt: &Packet) -> Ecn {
    match pkt.payload {
        Payload::Data(d) if d.ce => Ecn::Ce,
        Payload::Data(d) if d.ect && d.ect1 => Ecn::Ect1,
        Payload::Data(d) if d.ect => Ecn::Ect0,
        _ => Ecn::NotEct,
    }
}

pub struct DualPi2 {
    p: DualPi2Params,
    alpha: u32,
    beta: u32,
    limit: QueueLimit,
    l: SubQueue,
    c: SubQueue,
    /// The base probability p' (`pi2_prob`).
    pub prob: u32,
    last_qdelay: u64,
    next_update: Time,
    credit: i32,
    credit_init: i32,
    rng: Rng,
    stats: QdiscStats,
    /// Per-queue counters: [L, C].
    class: [QueueClassStats; 2],
    /// Probability updates run.
    pub updates: u64,
    /// Marks by the step AQM (Linux `step_marks`).
    pub step_marks: u64,
}

const L: usize = 0;
const C: usize = 1;

impl DualPi2 {
    pub fn new(p: DualPi2Params, limit: QueueLimit, rng: Rng) -> DualPi2 {
        let wc = p.c_protection as i32;
        let credit_init = PSCHED_MTU as i32 * (wc - (MAX_WC as i32 - wc));
        DualPi2 {
            alpha: scale_alpha_beta(p.alpha),
            beta: scale_alpha_beta(p.beta),
            limit,
            l: SubQueue::default(),
            c: SubQueue::default(),
            prob: 0,
            last_qdelay: 0,
            // The timer is armed one tupdate after the qdisc is created.
            next_update: Time::ZERO + p.tupdate,
            credit: credit_init,
            credit_init,
            rng,
            stats: QdiscStats::new("dualpi2"),
            class: [QueueClassStats::new("l"), QueueClassStats::new("c")],
            updates: 0,
            step_marks: 0,
            p,
        }
    }

    /// p' in [0, 1].
    pub fn base_prob(&self) -> f64 {
        self.prob as f64 / MAX_PROB as f64
    }

    fn qlen(&self) -> u32 {
        self.l.len() + self.c.len()
    }

    /// The backlog as Linux counts it (`sch->qstats.backlog`, bytes with the
    /// Ethernet header) of both queues.
    fn linux_backlog(&self) -> u64 {
        self.l.bytes + self.c.bytes + ETH_HLEN as u64 * self.qlen() as u64
    }

    fn is_l4s(&self, e: Ecn) -> bool {
        matches!((e, self.p.ecn_mask), (Ecn::Ect1 | Ecn::Ce, _) | (Ecn::Ect0, L4sMask::AnyEct))
    }

    /// Runs the updates due at or before `now`.
    fn catch_up(&mut self, now: Time) {
        while self.next_update <= now {
            let at = self.next_update;
            self.prob = self.calculate_probability(at);
            self.next_update += self.p.tupdate;
            if self.qlen() == 0 && self.prob == 0 && self.last_qdelay == 0 && self.next_update <= now {
                // Idle and settled: the updates until `now` change nothing.
                let n = (now.0 - self.next_update.0) / self.p.tupdate.0;
                self.next_update += Dur(n * self.p.tupdate.0);
            }
        }
    }

    /// Linux `calculate_probability` at time `now`.
    pub fn calculate_probability(&mut self, now: Time) -> u32 {
        self.updates += 1;
        let qc = self.c.head_ts().map_or(0, |t| now.0 - t.0);
        let ql = self.l.head_ts().map_or(0, |t| now.0 - t.0);
        let qdelay = qc.max(ql);
        let mut delta = (qdelay as i64 - self.p.target.0 as i64).wrapping_mul(self.alpha as i64);
        delta = delta.wrapping_add((qdelay as i64 - self.last_qdelay as i64).wrapping_mul(self.beta as i64));
        self.last_qdelay = qdelay;
        let scale = 1u64 << ALPHA_BETA_GRANULARITY;
        let prob = self.prob;
        // As Linux, the scaled step is truncated to 32 bits before the bounds check.
        let new_prob = if delta > 0 {
            let n = ((delta as u64 / scale) as u32).wrapping_add(prob);
            if n < prob {
                MAX_PROB
            } else {
                n
            }
        } else {
            let n = prob.wrapping_sub((delta.unsigned_abs() / scale) as u32);
            if n > prob {
                0
            } else {
                n
            }
        };
        if !self.p.drop_overload {
            return new_prob.min(MAX_PROB / self.p.coupling_factor as u32);
        }
        new_prob
    }

    /// `dualpi2_roll`: true with probability prob / 2^32.
    fn roll(&mut self, prob: u32) -> bool {
        ((self.rng.next_u64() >> 32) as u32) <= prob
    }

    /// Linux `must_drop`: decides for `pkt` (marking it if so decided) and
    /// returns true if it must be dropped.
    fn must_drop(&mut self, pkt: &mut Packet, l4s: bool) -> bool {
        if self.linux_backlog() < 2 * PSCHED_MTU as u64 {
            return false;
        }
        let prob = self.prob;
        let local_l_prob = prob as u64 * self.p.coupling_factor as u64;
        let overload = local_l_prob > MAX_PROB as u64;
        let ecn = ecn_of(pkt);
        if !l4s {
            // dualpi2_classic_marking: p_C = p'^2.
            if self.roll(prob) && self.roll(prob) {
                if overload || ecn == Ecn::NotEct {
                    return true;
                }
                self.mark(pkt, C);
            }
            return false;
        }
        // dualpi2_scalable_marking.
        if overload {
            if self.p.drop_overload && self.roll(prob) && self.roll(prob) {
                return true;
            }
            self.mark(pkt, L);
            return false;
        }
        if self.roll(local_l_prob as u32) {
            if ecn == Ecn::NotEct {
                return true;
            }
            self.mark(pkt, L);
        }
        false
    }

    fn mark(&mut self, pkt: &mut Packet, class: usize) -> bool {
        if set_ce(pkt) {
            self.stats.ce_marks += 1;
            self.class[class].ce_marks += 1;
            true
        } else {
            false
        }
    }

    /// `dequeue_packet`: the next packet by the WRR scheduler and the change of
    /// credit its departure makes.
    fn dequeue_packet(&mut self) -> Option<(Queued, bool, i32)> {
        let c_len = self.c.len();
        if self.l.len() > 0 && (c_len == 0 || self.credit <= 0) {
            let e = self.l.pop().expect("non-empty");
            let change = if c_len > 0 { self.p.c_protection as i32 } else { 0 };
            Some((e, true, change * qdisc_len(&e.pkt) as i32))
        } else if c_len > 0 {
            let e = self.c.pop().expect("non-empty");
            let change = if self.l.len() > 0 { -((MAX_WC - self.p.c_protection) as i32) } else { 0 };
            Some((e, false, change * qdisc_len(&e.pkt) as i32))
        } else {
            self.credit = self.credit_init;
            None
        }
    }

    /// Counters per queue ([L, C]).
    pub fn class_stats(&self) -> &[QueueClassStats; 2] {
        &self.class
    }
}

impl QueueDisc for DualPi2 {
    fn enqueue(&mut self, now: Time, mut pkt: Packet) -> Enqueued {
        self.catch_up(now);
        let l4s = self.is_l4s(ecn_of(&pkt));
        let full = match self.limit {
            QueueLimit::Packets(n) => self.qlen() >= n,
            QueueLimit::Bytes(b) => self.l.bytes + self.c.bytes + pkt.wire_bytes as u64 > b,
        };
        let class = if l4s { L } else { C };
        if full {
            self.class[class].drops += 1;
            return Enqueued::Dropped(pkt);
        }
        if self.p.drop_early && self.must_drop(&mut pkt, l4s) {
            self.class[class].drops += 1;
            return Enqueued::EarlyDropped(pkt);
        }
        if l4s {
            let apply_step = self.l.len() >= self.p.min_qlen_step;
            self.l.push(Queued { ts: now, pkt, apply_step });
        } else {
            self.c.push(Queued { ts: now, pkt, apply_step: false });
        }
        Enqueued::Accepted
    }

    fn dequeue(&mut self, now: Time, dropped: &mut Vec<Packet>) -> Option<Packet> {
        self.catch_up(now);
        while let Some((mut e, from_l, credit_change)) = self.dequeue_packet() {
            let class = if from_l { L } else { C };
            let l4s = from_l;
            if !self.p.drop_early && self.must_drop(&mut e.pkt, l4s) {
                self.class[class].drops += 1;
                dropped.push(e.pkt);
                continue;
            }
            let sojourn = now.0.saturating_sub(e.ts.0);
            if from_l && e.apply_step {
                // do_step_aqm
                let over = match self.p.step {
                    StepThresh::Time(d) => sojourn > d.0,
                    StepThresh::Packets(n) => self.l.len() > n,
                };
                if over {
                    if ecn_of(&e.pkt) == Ecn::NotEct {
                        self.class[L].drops += 1;
                        dropped.push(e.pkt);
                        continue;
                    }
                    if self.mark(&mut e.pkt, L) {
                        self.step_marks += 1;
                    }
                }
            }
            self.credit += credit_change;
            self.stats.sojourn(sojourn);
            self.class[class].sojourn(sojourn);
            return Some(e.pkt);
        }
        None
    }

    fn backlog_packets(&self) -> u32 {
        self.qlen()
    }

    fn backlog_bytes(&self) -> u64 {
        self.l.bytes + self.c.bytes
    }

    fn waiting(&self) -> Vec<Packet> {
        self.l.q.iter().chain(self.c.q.iter()).map(|e| e.pkt).collect()
    }

    fn stats(&self) -> QdiscStats {
        let mut s = self.stats.clone();
        s.queues = self.class.to_vec();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::DataSegment;

    const MS: u64 = 1_000_000;

    /// A full-size segment: Not-ECT, ECT(0) or ECT(1).
    fn seg(seq: u32, ecn: Ecn) -> Packet {
        Packet::data(
            0,
            DataSegment {
                seq,
                payload: 1448,
                tsval: 0,
                retransmission: false,
                ce: ecn == Ecn::Ce,
                ect: ecn != Ecn::NotEct,
                ect1: matches!(ecn, Ecn::Ect1 | Ecn::Ce),
                cwr: false,
                psh: false,
                gso: Default::default(),
            },
        )
    }

    fn q() -> DualPi2 {
        DualPi2::new(DualPi2Params::default(), QueueLimit::Packets(10_000), Rng::stream(1, "dualpi2-test"))
    }

    fn is_ce(p: &Packet) -> bool {
        matches!(p.payload, Payload::Data(d) if d.ce)
    }

    #[test]
    fn alpha_and_beta_scale_as_linux() {
        // 41/256 Hz: 41 * (2^32 - 1) / 4 / 1e9 = 44 per ns (before / 64).
        assert_eq!(scale_alpha_beta(DEFAULT_ALPHA), 44);
        assert_eq!(scale_alpha_beta(DEFAULT_BETA), 879);
    }

    #[test]
    fn classifier_sends_ect1_and_ce_to_the_l_queue() {
        let mut q = q();
        for (i, e) in [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1, Ecn::Ce].into_iter().enumerate() {
            assert!(matches!(q.enqueue(Time(0), seg(i as u32, e)), Enqueued::Accepted));
        }
        assert_eq!((q.l.len(), q.c.len()), (2, 2));
        let p = DualPi2Params { ecn_mask: L4sMask::AnyEct, ..Default::default() };
        let mut q = DualPi2::new(p, QueueLimit::Packets(100), Rng::stream(1, "x"));
        for (i, e) in [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1].into_iter().enumerate() {
            let _ = q.enqueue(Time(0), seg(i as u32, e));
        }
        assert_eq!((q.l.len(), q.c.len()), (2, 1));
    }

    #[test]
    fn controller_integrates_the_delay_error() {
        // A classic queue held at 25 ms: each update adds alpha * 10 ms
        // (+ beta * the change, 0 once steady).
        let mut q = q();
        let _ = q.enqueue(Time(0), seg(0, Ecn::NotEct));
        q.last_qdelay = 25 * MS;
        let p = q.calculate_probability(Time(25 * MS));
        let want = DEFAULT_ALPHA * 0.010;
        assert!((p as f64 / MAX_PROB as f64 - want).abs() < 1e-5, "{p}");
        // A rise of 4 ms since the last update adds beta * 4 ms.
        q.prob = p;
        q.last_qdelay = 21 * MS;
        let p2 = q.calculate_probability(Time(25 * MS));
        let step = (p2 - p) as f64 / MAX_PROB as f64;
        assert!((step - (DEFAULT_ALPHA * 0.010 + DEFAULT_BETA * 0.004)).abs() < 1e-5, "{step}");
        // Below target and falling: the probability comes down, not below 0.
        q.prob = 1000;
        q.last_qdelay = 30 * MS;
        assert_eq!(q.calculate_probability(Time(5 * MS)), 0);
    }

    /// Holds the classic queue's head sojourn at `delay_ms` for `updates`
    /// updates (a scripted delay), then returns p'.
    fn settle(q: &mut DualPi2, delay_ms: u64, updates: u32) {
        for i in 0..updates {
            let t = Time(q.next_update.0);
            q.c.q.clear();
            q.c.bytes = 0;
            q.c.push(Queued { ts: Time(t.0.saturating_sub(delay_ms * MS)), pkt: seg(i, Ecn::NotEct), apply_step: false });
            q.catch_up(t);
        }
    }

    #[test]
    fn coupling_classic_probability_is_the_square_of_the_l4s_one_over_k() {
        // The controller rises on a scripted 40 ms and settles once the delay
        // is back at target; freeze it and measure both classes' marking
        // rates on ECN-capable packets over a standing 3-MTU queue.
        let mut q = q();
        settle(&mut q, 40, 20);
        let before = q.base_prob();
        settle(&mut q, 15, 20);
        let pp = q.base_prob();
        // At the target the integral term stops: p' only moved by the
        // proportional step of the delay's fall.
        assert!((before - pp - DEFAULT_BETA * 0.025).abs() < 1e-4, "{before} -> {pp}");
        assert!(pp > 0.05 && pp < 0.5, "p' = {pp}");
        q.next_update = Time(u64::MAX);
        let n = 200_000u32;
        let rate = |q: &mut DualPi2, e: Ecn| {
            let mut marks = 0u32;
            for i in 0..n {
                // Keep three packets queued so that the 2-MTU floor is passed.
                while q.qlen() < 4 {
                    let _ = q.enqueue(Time(0), seg(i, e));
                }
                let mut d = Vec::new();
                let p = q.dequeue(Time(0), &mut d).expect("a packet");
                assert!(d.is_empty());
                marks += is_ce(&p) as u32;
            }
            marks as f64 / n as f64
        };
        let p_l = rate(&mut q, Ecn::Ect1);
        // Drain the L queue before measuring the classic class.
        while q.l.pop().is_some() {}
        let p_c = rate(&mut q, Ecn::Ect0);
        assert!((p_l / (2.0 * pp) - 1.0).abs() < 0.02, "p_L {p_l} vs 2p' {}", 2.0 * pp);
        let want = (p_l / 2.0).powi(2);
        assert!((p_c / want - 1.0).abs() < 0.05, "p_C {p_c} vs (p_L/k)^2 {want}");
    }

    #[test]
    fn classic_not_ect_is_dropped_with_p_squared() {
        let mut q = q();
        q.prob = MAX_PROB / 2; // p' = 0.5: p_C = 0.25
        q.next_update = Time(u64::MAX);
        let mut drops = 0usize;
        let n = 100_000;
        for i in 0..n {
            // A standing queue long enough that runs of drops keep 2 MTUs.
            while q.qlen() < 20 {
                let _ = q.enqueue(Time(0), seg(i, Ecn::NotEct));
            }
            let mut d = Vec::new();
            let _ = q.dequeue(Time(0), &mut d);
            drops += d.len();
        }
        // Each dequeue returns one packet after `d` drops: drops / (drops + n) = p_C.
        let p = drops as f64 / (drops + n as usize) as f64;
        assert!((p - 0.25).abs() < 0.01, "{p}");
        assert_eq!(q.stats().ce_marks, 0);
    }

    #[test]
    fn nothing_is_marked_below_two_mtus() {
        let mut q = q();
        q.prob = MAX_PROB;
        q.next_update = Time(u64::MAX);
        for i in 0..1000 {
            let _ = q.enqueue(Time(0), seg(i, Ecn::Ect0));
            let _ = q.enqueue(Time(0), seg(i, Ecn::Ect0));
            let mut d = Vec::new();
            // The first leaves one packet (1514 < 3028): no mark; nor the second.
            let a = q.dequeue(Time(0), &mut d).unwrap();
            let b = q.dequeue(Time(0), &mut d).unwrap();
            assert!(!is_ce(&a) && !is_ce(&b) && d.is_empty());
        }
    }

    #[test]
    fn step_marks_l_packets_that_waited_over_1ms() {
        let mut q = q();
        q.next_update = Time(u64::MAX); // p' = 0: only the step acts
        let mut d = Vec::new();
        for i in 0..10 {
            let _ = q.enqueue(Time(0), seg(i, Ecn::Ect1));
        }
        // Sojourn exactly 1 ms: not above the threshold.
        assert!(!is_ce(&q.dequeue(Time(MS), &mut d).unwrap()));
        assert!(is_ce(&q.dequeue(Time(MS + 1), &mut d).unwrap()));
        assert_eq!(q.step_marks, 1);
        // Classic packets never see the step.
        let _ = q.enqueue(Time(0), seg(99, Ecn::Ect0));
        while q.l.pop().is_some() {}
        assert!(!is_ce(&q.dequeue(Time(50 * MS), &mut d).unwrap()));
        // In packets: marked while more than 2 remain behind.
        let p = DualPi2Params { step: StepThresh::Packets(2), ..Default::default() };
        let mut q = DualPi2::new(p, QueueLimit::Packets(100), Rng::stream(1, "x"));
        q.next_update = Time(u64::MAX);
        for i in 0..5 {
            let _ = q.enqueue(Time(0), seg(i, Ecn::Ect1));
        }
        let marks: Vec<bool> = (0..5).map(|_| is_ce(&q.dequeue(Time(0), &mut d).unwrap())).collect();
        assert_eq!(marks, vec![true, true, false, false, false]);
    }

    #[test]
    fn scheduler_gives_the_classic_queue_its_weight() {
        // Both queues backlogged: the C queue gets wc = 10 % of the bytes.
        let mut q = q();
        q.next_update = Time(u64::MAX);
        for i in 0..5000 {
            let _ = q.enqueue(Time(0), seg(i, Ecn::Ect1));
            let _ = q.enqueue(Time(0), seg(i, Ecn::NotEct));
        }
        let mut d = Vec::new();
        let mut from_c = 0;
        // L starts (initial credit negative).
        let first = q.dequeue(Time(0), &mut d).unwrap();
        assert_eq!(ecn_of(&first), Ecn::Ect1);
        for _ in 0..2000 {
            let p = q.dequeue(Time(0), &mut d).unwrap();
            from_c += (ecn_of(&p) == Ecn::NotEct) as u32;
        }
        assert!((190..=210).contains(&from_c), "{from_c}");
        // With the L queue empty, C is served alone and the credit stays.
        while q.l.pop().is_some() {}
        let credit = q.credit;
        let _ = q.dequeue(Time(0), &mut d);
        assert_eq!(q.credit, credit);
    }

    #[test]
    fn overflow_drops_on_the_shared_limit() {
        let mut q = DualPi2::new(DualPi2Params::default(), QueueLimit::Packets(3), Rng::stream(1, "x"));
        assert!(matches!(q.enqueue(Time(0), seg(0, Ecn::Ect1)), Enqueued::Accepted));
        assert!(matches!(q.enqueue(Time(0), seg(1, Ecn::NotEct)), Enqueued::Accepted));
        assert!(matches!(q.enqueue(Time(0), seg(2, Ecn::Ect1)), Enqueued::Accepted));
        assert!(matches!(q.enqueue(Time(0), seg(3, Ecn::NotEct)), Enqueued::Dropped(_)));
        assert!(matches!(q.enqueue(Time(0), seg(4, Ecn::Ect1)), Enqueued::Dropped(_)));
        assert_eq!(q.class_stats()[L].drops + q.class_stats()[C].drops, 2);
    }

    #[test]
    fn overload_drops_l4s_packets_with_p_squared() {
        // p' = 0.75: k p' > 1, so L4S packets are dropped with p'^2 and
        // marked otherwise.
        let mut q = q();
        q.prob = (MAX_PROB / 4) * 3;
        q.next_update = Time(u64::MAX);
        let (mut drops, mut marks, n) = (0usize, 0usize, 50_000);
        for i in 0..n {
            while q.qlen() < 20 {
                let _ = q.enqueue(Time(0), seg(i, Ecn::Ect1));
            }
            let mut d = Vec::new();
            let p = q.dequeue(Time(0), &mut d).unwrap();
            drops += d.len();
            marks += is_ce(&p) as usize;
        }
        let pd = drops as f64 / (drops + n as usize) as f64;
        assert!((pd - 0.5625).abs() < 0.01, "{pd}");
        // Every packet not dropped is marked (but for the rare one left after
        // a run of drops took the queue under two MTUs).
        assert!(marks + 5 >= n as usize, "{marks}");
    }

    #[test]
    fn timer_runs_every_tupdate_and_skips_idle_time() {
        let mut q = q();
        let mut d = Vec::new();
        let _ = q.enqueue(Time(0), seg(0, Ecn::NotEct));
        assert_eq!(q.updates, 0);
        let _ = q.enqueue(Time(160 * MS), seg(1, Ecn::NotEct));
        assert_eq!(q.updates, 10);
        while q.dequeue(Time(161 * MS), &mut d).is_some() {}
        let _ = q.enqueue(Time(1_000_000 * MS), seg(2, Ecn::NotEct));
        assert!(q.updates < 100, "{}", q.updates);
        assert_eq!(q.prob, 0);
    }
}
