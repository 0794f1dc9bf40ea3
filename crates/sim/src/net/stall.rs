//! A Linux router's stalls: moments when the CPU that runs its qdisc is busy
//! elsewhere (other softirqs, the hosts' processes on a shared machine, a
//! virtual machine's time slice) and tbf releases nothing. tbf's tokens keep
//! accruing meanwhile, up to the bucket, so a stall shorter than the bucket
//! costs no capacity; but packets keep arriving, the queue grows, and when it
//! overflows during a stall it turns away the next few skbs of whichever
//! flows send them. Those multi-skb overflows hit both flows of a pair
//! together, which is what keeps flows of equal RTT from locking into
//! unequal shares on real routers (docs/fidelity.md, "The router's
//! stalls"). Stalls start as a Poisson process in time (the CPU's other work
//! does not wait for packets) and last a drawn duration.

use crate::config::Schema;
use crate::dist::{Dist, Sampler};
use crate::rng::Rng;
use crate::units::{Dur, Time};
use serde::{Deserialize, Serialize};

/// When a Linux router's qdisc stops releasing packets, and for how long.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(name = "router_stalls")]
pub struct StallConfig {
    /// Mean time between the starts of two stalls (exponentially distributed).
    #[schema(positive)]
    pub every: Dur,
    /// How long each stall lasts, in nanoseconds.
    pub duration: Dist,
}

/// The stalls of one router, drawn as time passes.
pub struct Stalls {
    every_ns: f64,
    duration: Sampler,
    rng: Rng,
    /// The current or next stall: [start, end).
    start: Time,
    end: Time,
}

impl Stalls {
    pub fn new(cfg: &StallConfig, rng: Rng) -> Stalls {
        let duration = Sampler::new(cfg.duration.clone());
        let mut stalls = Stalls { every_ns: cfg.every.0 as f64, duration, rng, start: Time::ZERO, end: Time::ZERO };
        stalls.draw_next();
        stalls
    }

    /// Draws the stall after the current one (the first from time zero).
    fn draw_next(&mut self) {
        self.start = self.end + Dur(Dist::Exponential { mean: self.every_ns }.sample(&mut self.rng).round() as u64);
        self.end = self.start + Dur(self.duration.draw_ns(&mut self.rng));
    }

    /// The current or next stall, as [start, end).
    pub fn window(&self) -> (Time, Time) {
        (self.start, self.end)
    }

    /// The earliest instant at or after `t` when the router is not stalled.
    /// Calls must come with non-decreasing `t` (the event loop's clock, or a
    /// release time computed from it).
    pub fn free_at(&mut self, t: Time) -> Time {
        while self.end <= t {
            self.draw_next();
        }
        if t >= self.start {
            self.end
        } else {
            t
        }
    }
}

/// The linux backend's router stalls on this project's machine kind (2
/// shared cores), measured 2026-11-27 in five runs (two flows; CUBIC at 100
/// Mbit/s, 400 Mbit/s twice and 1 Gbit/s, Reno at 400 Mbit/s; 20 ms, 10 ms
/// of buffer) from captures of the left router's interfaces: the gaps
/// between tbf's departures while at least two skbs were queued, less the
/// departing packet's transmission time at the rate. Stalls longer than
/// 100 us: 12-22 a second; their durations p25 134-156 us, p50 221-266,
/// p75 449-545, p90 0.93-1.09 ms, p99 2.4-3.3 ms, longest 3.2-3.9 ms; more
/// than 1 ms: 1.0-2.4 a second, more than 2 ms: 0.22-0.59 a second.
/// Drawn as stalls every 67 ms on average (15 a second) lasting a
/// lognormal of median 250 us and sigma 1.0 (p90 0.9 ms, p99 2.6 ms), with
/// 2.5 % of them in a Pareto tail of shape 2 from 2 ms up to 4 ms.
pub const ROUTER_STALL_EVERY_NS: u64 = 67_000_000;
pub const ROUTER_STALL_MEDIAN_NS: f64 = 250_000.0;
pub const ROUTER_STALL_SIGMA: f64 = 1.0;
pub const ROUTER_STALL_TAIL_FROM_NS: f64 = 2_000_000.0;
pub const ROUTER_STALL_TAIL_SHARE: f64 = 0.025;
pub const ROUTER_STALL_TAIL_ALPHA: f64 = 2.0;
pub const ROUTER_STALL_MAX_NS: f64 = 4_000_000.0;

pub fn default_router_stalls() -> Option<StallConfig> {
    Some(StallConfig {
        every: Dur(ROUTER_STALL_EVERY_NS),
        duration: Dist::LognormalPareto {
            mu: ROUTER_STALL_MEDIAN_NS.ln(),
            sigma: ROUTER_STALL_SIGMA,
            k: ROUTER_STALL_TAIL_FROM_NS,
            alpha: ROUTER_STALL_TAIL_ALPHA,
            tail: Some(ROUTER_STALL_TAIL_SHARE),
            max: Some(ROUTER_STALL_MAX_NS),
        },
    })
}

/// The stalls of the linux backend's return path (receivers, right router,
/// delay program), as one process for every flow: the default of
/// `network.return_stalls`, beside `delay_noise`'s default, the lognormal
/// body alone (median 60 us, sigma 0.55). Measured 2026-11-27 from
/// the left router's captures of two-flow runs (CUBIC and Reno at 400
/// Mbit/s, 20/20 ms): when one flow's ACK comes back more than 2 ms later
/// than its fastest, the other flow's ACKs within 0.5 ms of it are as late
/// in 18-49 % of cases, against 1.3-1.5 % at any time (12-35 times as
/// often; more than 1 ms: 31-43 % against 4-5 %): the return path's long
/// delays hit both flows together. Each flow's noise measured end to end
/// (`delay_noise`'s constants) is p95 172-308 us, p97 256-664 us, p99
/// 0.65-1.2 ms, p99.9 1.9-4.9 ms; its lognormal body stays per flow and its
/// tail is drawn here: stalls every 25 ms on average lasting a Pareto of
/// shape 0.7 from 400 us up to 3.5 ms. With the body, at any ACK rate,
/// that gives each flow's ACKs p95 206 us, p97 396 us, p99 1.25 ms, p99.9
/// 2.7 ms (a per-flow tail fitted to the same measurements, the default
/// until 2026-11-28, gave 181 us, 398 us, 1.22 ms, 2.54 ms at one ACK per
/// millisecond).
pub const RETURN_STALL_EVERY_NS: u64 = 25_000_000;
pub const RETURN_STALL_FROM_NS: f64 = 400_000.0;
pub const RETURN_STALL_ALPHA: f64 = 0.7;
pub const RETURN_STALL_MAX_NS: f64 = 3_500_000.0;

pub fn measured_return_stalls() -> StallConfig {
    StallConfig {
        every: Dur(RETURN_STALL_EVERY_NS),
        duration: Dist::Pareto { k: RETURN_STALL_FROM_NS, alpha: RETURN_STALL_ALPHA, max: Some(RETURN_STALL_MAX_NS) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(every_ms: u64, lasting_us: f64) -> Stalls {
        Stalls::new(&StallConfig { every: Dur(every_ms * 1_000_000), duration: Dist::Constant { value: lasting_us * 1000.0 } }, Rng::stream(1, "stall"))
    }

    #[test]
    fn an_instant_inside_a_stall_waits_for_its_end_and_others_pass() {
        let mut s = fixed(10, 500.0);
        let (start, end) = (s.start, s.end);
        assert_eq!(end - start, Dur(500_000));
        assert_eq!(s.free_at(Time(start.0 - 1)), Time(start.0 - 1));
        assert_eq!(s.free_at(start), end);
        assert_eq!(s.free_at(Time(end.0 - 1)), end);
        assert_eq!(s.free_at(end), end, "the stall is over at its end");
    }

    #[test]
    fn stalls_come_at_the_configured_rate_and_cover_their_share_of_time() {
        let mut s = fixed(10, 500.0);
        let mut stalled = 0u64;
        let step = 10_000; // 10 us
        let horizon = 100_000_000_000u64; // 100 s
        let mut t = 0;
        while t < horizon {
            if s.free_at(Time(t)) > Time(t) {
                stalled += step;
            }
            t += step;
        }
        // 500 us every 10.5 ms on average: 4.76 % of the time.
        let share = stalled as f64 / horizon as f64;
        assert!((share - 0.0476).abs() < 0.004, "stalled {share}");
    }

    #[test]
    fn the_default_has_the_measured_shape() {
        let cfg = default_router_stalls().unwrap();
        let d = Sampler::new(cfg.duration.clone());
        let mut rng = Rng::stream(7, "shape");
        let mut xs: Vec<f64> = (0..200_000).map(|_| d.sample(&mut rng)).collect();
        xs.sort_by(f64::total_cmp);
        let q = |p: f64| xs[(p * xs.len() as f64) as usize] / 1000.0;
        // Medians and tails as measured for stalls above 100 us (the body's
        // shorter ones pass unseen under the bucket's tokens).
        assert!((200.0..300.0).contains(&q(0.5)), "p50 {}", q(0.5));
        assert!((800.0..1200.0).contains(&q(0.9)), "p90 {}", q(0.9));
        assert!((2000.0..3400.0).contains(&q(0.99)), "p99 {}", q(0.99));
        assert!(xs[xs.len() - 1] <= 4_000_000.0);
        assert_eq!(cfg.every, Dur(67_000_000));
    }

    #[test]
    fn draws_repeat_with_the_seed() {
        let cfg = default_router_stalls().unwrap();
        let run = |seed| {
            let mut s = Stalls::new(&cfg, Rng::stream(seed, "stall"));
            (0..1000).map(|i| s.free_at(Time(i * 1_000_000)).0).collect::<Vec<_>>()
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }
}
