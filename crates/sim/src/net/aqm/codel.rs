//! CoDel, Controlled Delay (Nichols & Jacobson 2012, RFC 8289), as Linux's
//! `sch_codel` runs it (`include/net/codel.h`, `codel_impl.h`).
//!
//! Packets are timestamped at enqueue; at dequeue the sojourn time of the head
//! packet is compared with `target` (5 ms). Once it has stayed above target for
//! `interval` (100 ms), and more than one MTU is queued, CoDel enters the
//! dropping state: it drops (or, with ECN, marks) the head packet and schedules
//! the next drop `interval / sqrt(count)` later, dropping faster while the
//! sojourn stays above target and leaving the state as soon as it goes below.
//! On re-entry soon after leaving (within 16 intervals) it resumes with the
//! count it had reached since the last entry (`count - lastcount`), as Linux
//! does, rather than restarting at 1.
//!
//! Linux's arithmetic is kept: 1/sqrt(count) is a Q0.16 value refined by one
//! Newton step per drop (`codel_Newton_step`), and the control law scales the
//! interval by it (`reciprocal_scale`). Differences from Linux: the clock is the
//! simulator's nanoseconds (Linux: 1024 ns units in a wrapping u32); the limit may
//! also be in bytes (Linux: packets); the newest kernels' cap of 256 drops per
//! dequeue is not applied. `ce_threshold` marks ECT packets whose sojourn exceeds
//! it (Linux's option for DCTCP-style marking).
//!
//! The state machine (`CodelVars::dequeue`) is shared with FQ-CoDel, which runs
//! one per flow bucket.

use super::{set_ce, PSCHED_MTU};
use crate::net::queue::{Enqueued, Fifo, QdiscStats, QueueDisc, QueueLimit};
use crate::packet::Packet;
use crate::units::{Dur, Time};

/// Default target sojourn time (`codel_params_init`: MS2TIME(5)).
pub const DEFAULT_TARGET: Dur = Dur(5_000_000);
/// Default interval (`codel_params_init`: MS2TIME(100)).
pub const DEFAULT_INTERVAL: Dur = Dur(100_000_000);
/// Bits of `rec_inv_sqrt` (a u16 in `struct codel_vars`); the shift that makes
/// it a Q0.32 value is 32 - 16 (REC_INV_SQRT_SHIFT).
const REC_INV_SQRT_SHIFT: u32 = 16;

/// Parameters shared by every CoDel instance of a qdisc (`struct codel_params`).
#[derive(Clone, Copy, Debug)]
pub struct CodelParams {
    pub target: Dur,
    pub interval: Dur,
    /// Below this backlog (bytes as `qdisc_len` counts) CoDel never drops.
    pub mtu: u32,
    pub ecn: bool,
    /// Mark ECT packets whose sojourn exceeds this (disabled: None).
    pub ce_threshold: Option<Dur>,
}

impl Default for CodelParams {
    fn default() -> Self {
        CodelParams { target: DEFAULT_TARGET, interval: DEFAULT_INTERVAL, mtu: PSCHED_MTU, ecn: false, ce_threshold: None }
    }
}

/// The state of one CoDel instance (`struct codel_vars`).
#[derive(Clone, Copy, Debug, Default)]
pub struct CodelVars {
    /// Drops (and marks) since entering the dropping state.
    pub count: u32,
    /// `count` at the last entry into the dropping state.
    pub lastcount: u32,
    pub dropping: bool,
    /// 1/sqrt(count) in Q0.16.
    pub rec_inv_sqrt: u16,
    /// When the sojourn time will have been above target for an interval (ns);
    /// 0: it is below target.
    pub first_above_time: u64,
    /// When to drop next (ns), or when the last drop was.
    pub drop_next: u64,
    /// Sojourn time of the last packet dequeued (ns).
    pub ldelay: u64,
}

/// What a dequeue callback returns: the packet, its enqueue time, and the
/// qdisc's backlog (in `qdisc_len` bytes) once it has left.
pub type Dequeued = (Packet, Time, u64);

/// Signed difference a - b of two instants (Linux compares codel times as s32
/// differences; ours do not wrap).
#[inline]
fn diff(a: u64, b: u64) -> i64 {
    a as i64 - b as i64
}

impl CodelVars {
    /// One Newton-Raphson step towards 1/sqrt(count):
    /// x' = x/2 * (3 - count * x^2), in Linux's fixed point (wrapping as C does).
    pub fn newton_step(&mut self) {
        let invsqrt = (self.rec_inv_sqrt as u32) << REC_INV_SQRT_SHIFT;
        let invsqrt2 = ((invsqrt as u64 * invsqrt as u64) >> 32) as u32;
        let mut val = (3u64 << 32).wrapping_sub((self.count as u64).wrapping_mul(invsqrt2 as u64));
        val >>= 2; // avoids overflow in the multiply below
        val = val.wrapping_mul(invsqrt as u64) >> (32 - 2 + 1);
        self.rec_inv_sqrt = (val >> REC_INV_SQRT_SHIFT) as u16;
    }

    /// The control law: t + interval / sqrt(count), with 1/sqrt(count) from
    /// `rec_inv_sqrt` (`codel_control_law`).
    pub fn control_law(&self, t: u64, interval: Dur) -> u64 {
        let scale = (self.rec_inv_sqrt as u64) << REC_INV_SQRT_SHIFT;
        t + ((interval.0 as u128 * scale as u128) >> 32) as u64
    }

    /// `codel_should_drop`: updates the above-target timer with the packet just
    /// dequeued; true once the sojourn has stayed above target for an interval.
    fn should_drop(&mut self, item: Option<&Dequeued>, p: &CodelParams, now: u64) -> bool {
        let Some((_, enq, backlog)) = item else {
            self.first_above_time = 0;
            return false;
        };
        self.ldelay = now.saturating_sub(enq.0);
        if self.ldelay < p.target.0 || *backlog <= p.mtu as u64 {
            // Went below: stay below for at least an interval.
            self.first_above_time = 0;
            return false;
        }
        if self.first_above_time == 0 {
            // Just went above: drop if it stays above for an interval.
            self.first_above_time = now + p.interval.0;
            false
        } else {
            diff(now, self.first_above_time) > 0
        }
    }

    /// `codel_dequeue`: takes packets from `deq` until one may leave; the ones
    /// dropped on the way are appended to `dropped`. Marks with ECN instead of
    /// dropping when enabled and the packet is ECN-capable.
    pub fn dequeue(
        &mut self,
        p: &CodelParams,
        now: Time,
        stats: &mut QdiscStats,
        dropped: &mut Vec<Packet>,
        mut deq: impl FnMut() -> Option<Dequeued>,
    ) -> Option<Packet> {
        let now_ns = now.0;
        let mut item = deq();
        if item.is_none() {
            self.dropping = false;
            return None;
        }
        let mut drop = self.should_drop(item.as_ref(), p, now_ns);
        if self.dropping {
            if !drop {
                // Sojourn below target: leave the dropping state.
                self.dropping = false;
            } else if diff(now_ns, self.drop_next) >= 0 {
                // Time for the next drop. A large backlog may call for several
                // drops now, hence the loop.
                while self.dropping && diff(now_ns, self.drop_next) >= 0 {
                    self.count = self.count.wrapping_add(1);
                    self.newton_step();
                    let it = item.as_mut().expect("dropping state with a packet");
                    if p.ecn && set_ce(&mut it.0) {
                        stats.ce_marks += 1;
                        self.drop_next = self.control_law(self.drop_next, p.interval);
                        return self.finish(item, p, stats);
                    }
                    dropped.push(it.0);
                    item = deq();
                    if !self.should_drop(item.as_ref(), p, now_ns) {
                        self.dropping = false;
                    } else {
                        self.drop_next = self.control_law(self.drop_next, p.interval);
                    }
                }
            }
        } else if drop {
            let it = item.as_mut().expect("a packet");
            if p.ecn && set_ce(&mut it.0) {
                stats.ce_marks += 1;
            } else {
                dropped.push(it.0);
                item = deq();
                drop = self.should_drop(item.as_ref(), p, now_ns);
                let _ = drop; // Linux recomputes it and does not use it further.
            }
            self.dropping = true;
            // If the queue went above target again soon after the last dropping
            // cycle ended, resume at the drop rate that controlled it then.
            let delta = self.count.wrapping_sub(self.lastcount);
            if delta > 1 && diff(now_ns, self.drop_next) < 16 * p.interval.0 as i64 {
                self.count = delta;
                // Imprecise after the jump; the next Newton steps converge quadratically.
                self.newton_step();
            } else {
                self.count = 1;
                self.rec_inv_sqrt = (!0u32 >> REC_INV_SQRT_SHIFT) as u16;
            }
            self.lastcount = self.count;
            self.drop_next = self.control_law(now_ns, p.interval);
        }
        self.finish(item, p, stats)
    }

    /// The end of `codel_dequeue`: CE-marks above `ce_threshold`.
    fn finish(&self, item: Option<Dequeued>, p: &CodelParams, stats: &mut QdiscStats) -> Option<Packet> {
        let (mut pkt, _, _) = item?;
        stats.sojourn(self.ldelay);
        if let Some(th) = p.ce_threshold {
            if self.ldelay > th.0 && set_ce(&mut pkt) {
                stats.ce_marks += 1;
            }
        }
        Some(pkt)
    }
}

/// The `codel` qdisc: one FIFO under CoDel, tail drop at the limit.
pub struct Codel {
    params: CodelParams,
    vars: CodelVars,
    limit: QueueLimit,
    fifo: Fifo,
    stats: QdiscStats,
}

impl Codel {
    pub fn new(params: CodelParams, limit: QueueLimit) -> Codel {
        Codel {
            params,
            vars: CodelVars::default(),
            limit,
            fifo: Fifo::default(),
            stats: QdiscStats::new("codel"),
        }
    }

    pub fn vars(&self) -> &CodelVars {
        &self.vars
    }
}

impl QueueDisc for Codel {
    fn enqueue(&mut self, now: Time, pkt: Packet) -> Enqueued {
        if !self.fifo.fits(self.limit, &pkt) {
            return Enqueued::Dropped(pkt);
        }
        self.fifo.push(now, pkt);
        Enqueued::Accepted
    }

    fn dequeue(&mut self, now: Time, dropped: &mut Vec<Packet>) -> Option<Packet> {
        let Codel { params, vars, fifo, stats, .. } = self;
        vars.dequeue(params, now, stats, dropped, || {
            let (t, p) = fifo.pop()?;
            Some((p, t, fifo.linux_backlog()))
        })
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

    const MS: u64 = 1_000_000;

    #[test]
    fn newton_step_follows_the_recurrence_and_converges_to_the_inverse_square_root() {
        // Counting up as the dropping state does (one step per drop) from
        // x_1 = 1, the fixed-point value follows x_n = x_{n-1}/2 (3 - n x_{n-1}^2)
        // (x_2 = 0.5, x_3 = 0.5625: coarse at first) and reaches 1/sqrt(n).
        let mut v = CodelVars { count: 1, rec_inv_sqrt: u16::MAX, ..Default::default() };
        let mut x = 1.0f64;
        for n in 2..=1000u32 {
            v.count = n;
            v.newton_step();
            x = x / 2.0 * (3.0 - n as f64 * x * x);
            let got = v.rec_inv_sqrt as f64 / 65536.0;
            assert!((got - x).abs() < 1e-3, "count {n}: {got} vs recurrence {x}");
            if n >= 8 {
                let exact = 1.0 / (n as f64).sqrt();
                assert!((got - exact).abs() < 0.02 * exact, "count {n}: {got} vs {exact}");
            }
        }
        assert!((v.rec_inv_sqrt as f64 / 65536.0 - 1.0 / 1000f64.sqrt()).abs() < 1e-3);
    }

    /// A queue fed faster than it drains: one packet in every `gap` ns, dequeued
    /// every `service` ns. Returns the times of the drops.
    fn overload(q: &mut Codel, secs: u64) -> Vec<u64> {
        let mut drops = Vec::new();
        let mut t = 0;
        let mut seq = 0;
        // Arrivals at 2 packets per 1.2 ms (1500 B at 10 Mbps drains in 1.2 ms).
        let mut d = Vec::new();
        while t < secs * 1_000 * MS {
            for _ in 0..2 {
                let _ = q.enqueue(Time(t), seg(0, seq, false));
                seq += 1;
            }
            d.clear();
            let _ = q.dequeue(Time(t), &mut d);
            drops.extend(d.iter().map(|_| t));
            t += 1_200_000;
        }
        drops
    }

    #[test]
    fn first_drop_comes_an_interval_after_the_sojourn_exceeds_target() {
        let mut q = Codel::new(CodelParams::default(), QueueLimit::Packets(1_000_000));
        let drops = overload(&mut q, 2);
        // The queue grows by one packet per 1.2 ms, so a packet dequeued at time t
        // waited about t/2: the sojourn exceeds 5 ms at t ~ 10 ms, and the first
        // drop comes one interval (100 ms) later.
        let first = drops[0] as f64 / MS as f64;
        assert!((108.0..=114.0).contains(&first), "first drop at {first} ms");
    }

    #[test]
    fn drops_are_spaced_by_interval_over_sqrt_count() {
        let mut q = Codel::new(CodelParams::default(), QueueLimit::Packets(1_000_000));
        let drops = overload(&mut q, 3);
        assert!(drops.len() > 30);
        // In the dropping state the gap after the n-th drop is interval * x_n,
        // x_n ~ 1/sqrt(n) by one Newton step per drop from x_1 = 1 (Linux's
        // recurrence: x_2 = 0.5, x_3 = 0.5625, x_4 = 0.488, ...), to the service
        // granularity of 1.2 ms.
        let mut x = 1.0f64;
        for (i, w) in drops.windows(2).enumerate().take(30) {
            let n = (i + 1) as f64;
            if i > 0 {
                x = x / 2.0 * (3.0 - n * x * x);
            }
            let gap = (w[1] - w[0]) as f64 / MS as f64;
            let want = 100.0 * x;
            assert!((gap - want).abs() <= 1.3 + 0.01 * want, "gap {i}: {gap:.2} ms vs {want:.2} ms");
            if n >= 8.0 {
                // By then the approximation is within 2 % of interval/sqrt(count).
                let exact = 100.0 / n.sqrt();
                assert!((gap - exact).abs() <= 1.3 + 0.02 * exact, "gap {i}: {gap:.2} ms vs 100/sqrt({n}) = {exact:.2} ms");
            }
        }
        assert_eq!(q.vars().lastcount, 1);
    }

    /// Dequeues at `t_ms` a packet that waited `wait_ms`, with `backlog` bytes left.
    fn deq_const(v: &mut CodelVars, stats: &mut QdiscStats, dropped: &mut Vec<Packet>, t_ms: u64, wait_ms: u64, backlog: u64) -> Option<Packet> {
        let p = CodelParams::default();
        v.dequeue(&p, Time(t_ms * MS), stats, dropped, || Some((seg(0, 0, false), Time((t_ms - wait_ms) * MS), backlog)))
    }

    #[test]
    fn re_entry_soon_after_leaving_resumes_the_drop_rate() {
        let mut v = CodelVars::default();
        let mut st = QdiscStats::default();
        let mut dr = Vec::new();
        // Every packet waited 50 ms, above a 100-packet backlog.
        deq_const(&mut v, &mut st, &mut dr, 1000, 50, 150_000); // first above target: arms the timer
        assert!(!v.dropping);
        deq_const(&mut v, &mut st, &mut dr, 1101, 50, 150_000); // an interval later: drop, count 1
        assert!(v.dropping);
        assert_eq!((v.count, dr.len()), (1, 1));
        for i in 0..40 {
            deq_const(&mut v, &mut st, &mut dr, 1102 + i * 10, 50, 150_000);
        }
        let reached = v.count;
        assert!(reached > 5, "count {reached}");
        assert_eq!(dr.len() as u32, reached);
        // The sojourn goes below target: leave the dropping state.
        deq_const(&mut v, &mut st, &mut dr, 1600, 1, 150_000);
        assert!(!v.dropping);
        // Above target again for an interval soon after: the count resumes at
        // count - lastcount (lastcount was 1) instead of restarting at 1.
        deq_const(&mut v, &mut st, &mut dr, 1700, 50, 150_000);
        deq_const(&mut v, &mut st, &mut dr, 1801, 50, 150_000);
        assert!(v.dropping);
        assert_eq!(v.count, reached - 1);
        assert_eq!(v.lastcount, reached - 1);
        // A few more drops (count - lastcount > 1), then below target; back above
        // more than 16 intervals after the last scheduled drop: restart at 1.
        for i in 0..20 {
            deq_const(&mut v, &mut st, &mut dr, 1802 + i * 10, 50, 150_000);
        }
        assert!(v.count > v.lastcount + 1);
        deq_const(&mut v, &mut st, &mut dr, 2010, 1, 150_000);
        assert!(!v.dropping);
        assert!(v.drop_next < 2100 * MS);
        deq_const(&mut v, &mut st, &mut dr, 3700, 50, 150_000);
        deq_const(&mut v, &mut st, &mut dr, 3801, 50, 150_000);
        assert!(v.dropping);
        assert_eq!(v.count, 1);
    }

    #[test]
    fn no_drop_with_at_most_one_mtu_queued() {
        let mut v = CodelVars::default();
        let mut st = QdiscStats::default();
        let mut dr = Vec::new();
        for t in 0..100u64 {
            assert!(deq_const(&mut v, &mut st, &mut dr, 1000 + t * 10, 50, 1514).is_some());
        }
        assert!(dr.is_empty());
        assert!(!v.dropping);
        // One byte more and it drops.
        for t in 100..120u64 {
            deq_const(&mut v, &mut st, &mut dr, 1000 + t * 10, 50, 1515);
        }
        assert!(!dr.is_empty());
    }

    #[test]
    fn ecn_marks_instead_of_dropping_ect_packets() {
        let params = CodelParams { ecn: true, ..CodelParams::default() };
        let mut q = Codel::new(params, QueueLimit::Packets(1_000_000));
        let mut t = 0;
        let mut d = Vec::new();
        let mut marks = 0;
        for i in 0..400u32 {
            let _ = q.enqueue(Time(t), seg(0, 2 * i, true));
            let _ = q.enqueue(Time(t), seg(0, 2 * i + 1, true));
            if let Some(p) = q.dequeue(Time(t), &mut d) {
                marks += is_ce(&p) as u32;
            }
            t += 1_200_000;
        }
        assert!(d.is_empty(), "ECT packets are marked, not dropped");
        assert!(marks > 3);
        assert_eq!(q.stats().ce_marks, marks as u64);
        // Not-ECT packets in the same state are dropped.
        let _ = q.enqueue(Time(t), seg(1, 0, false));
        let _ = q.enqueue(Time(t), seg(1, 1, false));
        for _ in 0..2000 {
            t += 1_200_000;
            let _ = q.enqueue(Time(t), seg(1, 0, false));
            let _ = q.enqueue(Time(t), seg(1, 0, false));
            let _ = q.dequeue(Time(t), &mut d);
        }
        assert!(!d.is_empty());
    }

    #[test]
    fn ce_threshold_marks_above_it() {
        let params = CodelParams { ce_threshold: Some(Dur(1_000_000)), ..CodelParams::default() };
        let mut q = Codel::new(params, QueueLimit::Packets(100));
        let mut d = Vec::new();
        let _ = q.enqueue(Time(0), seg(0, 0, true));
        let _ = q.enqueue(Time(0), seg(0, 1, true));
        assert!(!is_ce(&q.dequeue(Time(500_000), &mut d).unwrap()));
        assert!(is_ce(&q.dequeue(Time(1_500_000), &mut d).unwrap()));
    }

    #[test]
    fn limit_drops_at_the_tail() {
        let mut q = Codel::new(CodelParams::default(), QueueLimit::Packets(2));
        assert!(matches!(q.enqueue(Time(0), seg(0, 0, false)), Enqueued::Accepted));
        assert!(matches!(q.enqueue(Time(0), seg(0, 1, false)), Enqueued::Accepted));
        assert!(matches!(q.enqueue(Time(0), seg(0, 2, false)), Enqueued::Dropped(_)));
        assert_eq!(q.backlog_bytes(), 3000);
    }
}
