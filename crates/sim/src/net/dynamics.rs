//! Scheduled changes of the forward bottleneck: its rate, the extra one-way
//! delay after it, and its random loss. A step sets new values once; a pulse
//! wave alternates between a high and a low setting; a bounded correlated
//! random walk moves one property every interval by a normal step correlated
//! with the previous step, reflecting at the bounds. Each entry yields the
//! setting to apply now and when it next changes, so the event queue holds one
//! pending change per entry however long the run.

use crate::config::{ConfigError, Schema};
use crate::net::loss::LossSpec;
use crate::rng::Rng;
use crate::units::{Dur, Rate, Time};
use serde::{Deserialize, Serialize};

/// Values to set; unset fields stay as they are.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(rules = PathSetting::rules)]
pub struct PathSetting {
    /// Rate of the forward bottleneck.
    #[serde(default)]
    #[schema(positive)]
    pub rate: Option<Rate>,
    /// Extra one-way delay after the bottleneck (0 at the start of a run).
    #[serde(default)]
    pub delay: Option<Dur>,
    /// Random loss at the forward bottleneck.
    #[serde(default)]
    pub loss: Option<LossSpec>,
}

impl PathSetting {
    /// Checks across fields (the ranges are declared on the fields).
    fn rules(&self) -> Result<(), ConfigError> {
        if self.rate.is_none() && self.delay.is_none() && self.loss.is_none() {
            return Err(ConfigError::new("", "sets nothing; give rate, delay or loss"));
        }
        Ok(())
    }
}

/// What a random walk moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Schema)]
#[serde(rename_all = "snake_case")]
pub enum WalkProperty {
    /// Bits per second.
    Rate,
    /// Extra one-way delay, nanoseconds.
    Delay,
    /// Bernoulli loss probability.
    Loss,
}

/// A scheduled change of the forward bottleneck.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Schema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[schema(name = "dynamics", rules = DynamicsConfig::rules)]
pub enum DynamicsConfig {
    /// New values from an instant on.
    Step {
        /// When the values change.
        at: Time,
        /// The new values.
        set: PathSetting,
    },
    /// `high` for `duty` x `period`, then `low` for the rest, from `start` until `until`.
    Pulse {
        /// When the first period starts.
        #[serde(default)]
        start: Time,
        /// Length of one high + low cycle.
        #[schema(positive)]
        period: Dur,
        /// Share of each period spent high.
        #[serde(default = "half")]
        #[schema(gt = 0, lt = 1)]
        duty: f64,
        /// Values during the high part.
        high: PathSetting,
        /// Values during the low part.
        low: PathSetting,
        /// When the pulses stop (default: never).
        #[serde(default)]
        until: Option<Time>,
    },
    /// x(k+1) = x(k) + s(k+1), s(k+1) = c s(k) + sqrt(1 - c^2) N(0, step),
    /// kept in [min, max] by clamping (ccperf's definition) or by reflection;
    /// in the property's unit (bit/s, ns, probability).
    RandomWalk {
        /// What the walk moves.
        property: WalkProperty,
        /// Time between steps.
        #[schema(positive)]
        interval: Dur,
        /// Value at the start, in [min, max].
        initial: f64,
        /// Lower bound (at least 1 bit/s for a rate, 0 otherwise).
        min: f64,
        /// Upper bound (at most 1 for a loss probability).
        max: f64,
        /// Standard deviation of a step.
        #[schema(min = 0)]
        step: f64,
        /// Correlation of successive steps.
        #[serde(default)]
        #[schema(min = 0, lt = 1)]
        correlation: f64,
        /// How the walk stays within its bounds.
        #[serde(default)]
        bounds: WalkBounds,
        /// When the walk starts.
        #[serde(default)]
        start: Time,
        /// When it stops (default: never).
        #[serde(default)]
        until: Option<Time>,
    },
}

/// How a random walk stays within its bounds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, Schema)]
#[serde(rename_all = "snake_case")]
pub enum WalkBounds {
    /// x = min(max(x, min), max): the walk may rest at a bound (ccperf).
    #[default]
    Clamp,
    /// Overshoot is mirrored back and the walk turns around.
    Reflect,
}

fn half() -> f64 {
    0.5
}

impl DynamicsConfig {
    pub fn validate(&self, field: &str) -> Result<(), ConfigError> {
        self.check_fields().map_err(|e| e.within(field))
    }

    /// Checks across fields (the ranges are declared on the fields).
    fn rules(&self) -> Result<(), ConfigError> {
        match self {
            DynamicsConfig::Step { .. } | DynamicsConfig::Pulse { .. } => Ok(()),
            DynamicsConfig::RandomWalk { property, initial, min, max, .. } => {
                if !(min <= initial && initial <= max) {
                    return Err(ConfigError::new("", "needs min <= initial <= max"));
                }
                let floor = match property {
                    WalkProperty::Rate => 1.0,
                    WalkProperty::Delay | WalkProperty::Loss => 0.0,
                };
                if *min < floor {
                    return Err(ConfigError::new("min", format!("must be at least {floor}")));
                }
                if *property == WalkProperty::Loss && *max > 1.0 {
                    return Err(ConfigError::new("max", "a loss probability is at most 1"));
                }
                Ok(())
            }
        }
    }

    /// Whether the entry changes the bottleneck's rate (not allowed with a trace).
    pub fn changes_rate(&self) -> bool {
        match self {
            DynamicsConfig::Step { set, .. } => set.rate.is_some(),
            DynamicsConfig::Pulse { high, low, .. } => high.rate.is_some() || low.rate.is_some(),
            DynamicsConfig::RandomWalk { property, .. } => *property == WalkProperty::Rate,
        }
    }

    /// The highest rate the entry can set, bit/s.
    pub fn max_rate(&self) -> u64 {
        let r = |s: &PathSetting| s.rate.map_or(0, |r| r.0);
        match self {
            DynamicsConfig::Step { set, .. } => r(set),
            DynamicsConfig::Pulse { high, low, .. } => r(high).max(r(low)),
            DynamicsConfig::RandomWalk { property: WalkProperty::Rate, max, .. } => max.ceil() as u64,
            DynamicsConfig::RandomWalk { .. } => 0,
        }
    }

    pub fn first_change(&self) -> Time {
        match *self {
            DynamicsConfig::Step { at, .. } => at,
            DynamicsConfig::Pulse { start, .. } | DynamicsConfig::RandomWalk { start, .. } => start,
        }
    }
}

/// The running state of one entry.
pub struct PathDynamics {
    cfg: DynamicsConfig,
    rng: Rng,
    value: f64,
    last_step: f64,
    started: bool,
}

impl PathDynamics {
    pub fn new(cfg: DynamicsConfig, rng: Rng) -> PathDynamics {
        let value = match cfg {
            DynamicsConfig::RandomWalk { initial, .. } => initial,
            _ => 0.0,
        };
        PathDynamics { cfg, rng, value, last_step: 0.0, started: false }
    }

    /// The setting to apply at `now` (the entry's change time) and the next change time.
    pub fn fire(&mut self, now: Time) -> (PathSetting, Option<Time>) {
        let cut = |t: Time, until: Option<Time>| until.map_or(Some(t), |u| (t < u).then_some(t));
        match &self.cfg {
            DynamicsConfig::Step { set, .. } => (set.clone(), None),
            DynamicsConfig::Pulse { start, period, duty, high, low, until } => {
                // Where in the wave is `now`? Changes happen at phase 0 and at duty.
                let phase = (now.0 - start.0) % period.0;
                let high_len = (period.0 as f64 * duty).round() as u64;
                if phase < high_len {
                    (high.clone(), cut(now + Dur(high_len - phase), *until))
                } else {
                    (low.clone(), cut(now + Dur(period.0 - phase), *until))
                }
            }
            DynamicsConfig::RandomWalk { property, interval, min, max, step, correlation, bounds, until, .. } => {
                if self.started {
                    let s = correlation * self.last_step
                        + (1.0 - correlation * correlation).sqrt() * step * crate::dist::std_normal(&mut self.rng);
                    self.last_step = s;
                    let mut x = self.value + s;
                    // A reflected walk keeps moving away from the bound it hit.
                    for _ in 0..(if *bounds == WalkBounds::Reflect { 4 } else { 0 }) {
                        if x > *max {
                            x = 2.0 * max - x;
                            self.last_step = -self.last_step.abs();
                        } else if x < *min {
                            x = 2.0 * min - x;
                            self.last_step = self.last_step.abs();
                        }
                    }
                    self.value = x.clamp(*min, *max);
                }
                self.started = true;
                let v = self.value;
                let set = match property {
                    WalkProperty::Rate => PathSetting { rate: Some(Rate(v.round() as u64)), ..Default::default() },
                    WalkProperty::Delay => PathSetting { delay: Some(Dur(v.round() as u64)), ..Default::default() },
                    WalkProperty::Loss => PathSetting { loss: Some(LossSpec::Bernoulli { p: v }), ..Default::default() },
                };
                (set, cut(now + *interval, *until))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(mbps: u64) -> PathSetting {
        PathSetting { rate: Some(Rate::from_mbps(mbps)), ..Default::default() }
    }

    #[test]
    fn pulse_alternates_at_the_duty_cycle() {
        let cfg = DynamicsConfig::Pulse {
            start: Time::from_secs(1),
            period: Dur::from_secs(4),
            duty: 0.25,
            high: rate(100),
            low: rate(10),
            until: Some(Time::from_secs(9)),
        };
        let mut d = PathDynamics::new(cfg.clone(), Rng::stream(1, "d"));
        let mut t = cfg.first_change();
        let mut seen = vec![];
        loop {
            let (s, next) = d.fire(t);
            seen.push((t.0 / 1_000_000_000, s.rate.unwrap().0 / 1_000_000));
            match next {
                Some(n) => t = n,
                None => break,
            }
        }
        assert_eq!(seen, vec![(1, 100), (2, 10), (5, 100), (6, 10)]);
    }

    #[test]
    fn random_walk_stays_in_bounds_and_moves() {
        let cfg = DynamicsConfig::RandomWalk {
            property: WalkProperty::Rate,
            interval: Dur::from_ms(100),
            initial: 50e6,
            min: 10e6,
            max: 100e6,
            step: 10e6,
            correlation: 0.8,
            bounds: WalkBounds::Reflect,
            start: Time::ZERO,
            until: None,
        };
        assert!(cfg.validate("network.dynamics[0]").is_ok());
        let mut d = PathDynamics::new(cfg, Rng::stream(1, "walk"));
        let mut t = Time::ZERO;
        let mut values = vec![];
        for _ in 0..10_000 {
            let (s, next) = d.fire(t);
            values.push(s.rate.unwrap().0 as f64);
            t = next.unwrap();
        }
        assert!(values.iter().all(|&v| (10e6..=100e6).contains(&v)));
        let lo = values.iter().filter(|&&v| v < 30e6).count();
        let hi = values.iter().filter(|&&v| v > 80e6).count();
        assert!(lo > 500 && hi > 500, "the walk explores its range: {lo} low, {hi} high");
        // Correlated steps: successive steps have the same sign more often than not.
        let steps: Vec<f64> = values.windows(2).map(|w| w[1] - w[0]).collect();
        let same = steps.windows(2).filter(|w| w[0] * w[1] > 0.0).count() as f64 / (steps.len() - 1) as f64;
        assert!(same > 0.6, "{same}");
    }

    #[test]
    fn a_clamped_walk_rests_at_its_bounds() {
        let cfg = DynamicsConfig::RandomWalk {
            property: WalkProperty::Loss,
            interval: Dur::from_ms(100),
            initial: 0.0,
            min: 0.0,
            max: 0.01,
            step: 0.002,
            correlation: 0.0,
            bounds: WalkBounds::Clamp,
            start: Time::ZERO,
            until: None,
        };
        let mut d = PathDynamics::new(cfg, Rng::stream(2, "walk"));
        let mut t = Time::ZERO;
        let mut at_bound = 0;
        for _ in 0..2_000 {
            let (s, next) = d.fire(t);
            let Some(LossSpec::Bernoulli { p }) = s.loss else { panic!() };
            assert!((0.0..=0.01).contains(&p));
            at_bound += (p == 0.0 || p == 0.01) as u32;
            t = next.unwrap();
        }
        assert!(at_bound > 200, "{at_bound}");
    }

    #[test]
    fn bad_settings_name_the_field() {
        let e = DynamicsConfig::Step { at: Time::ZERO, set: PathSetting::default() }.validate("network.dynamics[2]").unwrap_err().to_string();
        assert!(e.starts_with("network.dynamics[2].set"), "{e}");
        let e = DynamicsConfig::Pulse { start: Time::ZERO, period: Dur(1), duty: 1.5, high: rate(1), low: rate(2), until: None }
            .validate("d")
            .unwrap_err()
            .to_string();
        assert!(e.contains("d.duty"), "{e}");
    }
}
