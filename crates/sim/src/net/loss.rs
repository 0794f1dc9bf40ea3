//! Random (non-congestion) loss applied to packets arriving at a link, the way
//! `netem loss` drops at enqueue: i.i.d. (Bernoulli), deterministic periodic
//! (every n-th packet: the assumption behind the Mathis and RFC 9438 response
//! functions), or bursty Gilbert-Elliott (a two-state Markov chain).

use crate::config::{ConfigError, Schema};
use crate::rng::{Bernoulli, Rng};
use serde::{Deserialize, Serialize};

/// How a link loses packets, as a scenario describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Schema)]
#[serde(tag = "model", rename_all = "snake_case", deny_unknown_fields)]
#[schema(name = "loss", rules = LossSpec::rules)]
pub enum LossSpec {
    /// Each packet is lost independently with probability `p`.
    Bernoulli {
        /// Probability that a packet is lost.
        #[schema(min = 0, max = 1)]
        p: f64,
    },
    /// Exactly one of every `1/p` packets is lost (rounded), evenly spaced.
    Periodic {
        /// Fraction of packets lost.
        #[schema(min = 0, max = 1)]
        p: f64,
    },
    /// Gilbert-Elliott: in the good state packets are lost with `loss_good`, in
    /// the bad state with `loss_bad`; after each packet the chain moves good->bad
    /// with `p_gb` and bad->good with `p_bg`.
    GilbertElliott {
        /// Probability of moving from the good state to the bad one after a packet.
        #[schema(min = 0, max = 1)]
        p_gb: f64,
        /// Probability of moving from the bad state to the good one after a packet.
        #[schema(min = 0, max = 1)]
        p_bg: f64,
        /// Loss probability in the good state.
        #[schema(min = 0, max = 1)]
        loss_good: f64,
        /// Loss probability in the bad state.
        #[schema(min = 0, max = 1)]
        loss_bad: f64,
    },
    /// The first packet arriving at or after each listed instant is lost.
    Scheduled {
        /// Instants from the start of the run.
        #[schema(kind = "duration_ns")]
        at_ns: Vec<u64>,
    },
    /// Every packet arriving within one of the [start, end) windows is lost.
    Outages {
        /// [start, end) pairs from the start of the run; each ends after it starts.
        #[schema(kind = "duration_ns")]
        windows_ns: Vec<(u64, u64)>,
    },
}

impl LossSpec {
    pub fn none() -> LossSpec {
        LossSpec::Bernoulli { p: 0.0 }
    }

    /// Long-run fraction of packets lost.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossSpec::Bernoulli { p } | LossSpec::Periodic { p } => p,
            LossSpec::GilbertElliott { p_gb, p_bg, loss_good, loss_bad } => {
                if p_gb + p_bg == 0.0 {
                    return loss_good;
                }
                let pi_bad = p_gb / (p_gb + p_bg);
                (1.0 - pi_bad) * loss_good + pi_bad * loss_bad
            }
            LossSpec::Scheduled { .. } | LossSpec::Outages { .. } => 0.0,
        }
    }

    pub fn validate(&self, field: &str) -> Result<(), ConfigError> {
        self.check_fields().map_err(|e| e.within(field))
    }

    /// Checks across fields (the probabilities' range is declared on them).
    fn rules(&self) -> Result<(), ConfigError> {
        if let LossSpec::Outages { windows_ns } = self {
            if windows_ns.iter().any(|&(a, b)| b <= a) {
                return Err(ConfigError::new("windows", "each outage must end after it starts"));
            }
        }
        Ok(())
    }
}

/// The running state of a loss process.
pub struct LossProcess {
    kind: Kind,
    rng: Rng,
}

enum Kind {
    Never,
    Bernoulli(Bernoulli),
    Periodic { every: u64, count: u64 },
    GilbertElliott { to_bad: Bernoulli, to_good: Bernoulli, good: Bernoulli, bad: Bernoulli, in_bad: bool },
    /// Pending instants, latest first.
    Scheduled(Vec<u64>),
    /// Windows sorted by start; index of the first not yet over.
    Outages(Vec<(u64, u64)>, usize),
}

impl LossProcess {
    pub fn new(spec: &LossSpec, rng: Rng) -> LossProcess {
        let kind = match *spec {
            LossSpec::Bernoulli { p } if p <= 0.0 => Kind::Never,
            LossSpec::Bernoulli { p } => Kind::Bernoulli(Bernoulli::new(p)),
            LossSpec::Periodic { p } if p <= 0.0 => Kind::Never,
            LossSpec::Periodic { p } => Kind::Periodic { every: (1.0 / p).round().max(1.0) as u64, count: 0 },
            LossSpec::GilbertElliott { p_gb, p_bg, loss_good, loss_bad } => Kind::GilbertElliott {
                to_bad: Bernoulli::new(p_gb),
                to_good: Bernoulli::new(p_bg),
                good: Bernoulli::new(loss_good),
                bad: Bernoulli::new(loss_bad),
                in_bad: false,
            },
            LossSpec::Scheduled { ref at_ns } => {
                let mut v = at_ns.clone();
                v.sort_unstable_by(|a, b| b.cmp(a));
                Kind::Scheduled(v)
            }
            LossSpec::Outages { ref windows_ns } => {
                let mut v = windows_ns.clone();
                v.sort_unstable();
                Kind::Outages(v, 0)
            }
        };
        LossProcess { kind, rng }
    }

    /// Whether the next packet, arriving at `now_ns`, is lost.
    pub fn lose(&mut self, now_ns: u64) -> bool {
        match &mut self.kind {
            Kind::Never => false,
            Kind::Bernoulli(b) => b.sample(&mut self.rng),
            Kind::Periodic { every, count } => {
                *count += 1;
                if *count >= *every {
                    *count = 0;
                    true
                } else {
                    false
                }
            }
            Kind::GilbertElliott { to_bad, to_good, good, bad, in_bad } => {
                let lost = if *in_bad { bad.sample(&mut self.rng) } else { good.sample(&mut self.rng) };
                let flip = if *in_bad { to_good.sample(&mut self.rng) } else { to_bad.sample(&mut self.rng) };
                if flip {
                    *in_bad = !*in_bad;
                }
                lost
            }
            Kind::Scheduled(pending) => match pending.last() {
                Some(&t) if t <= now_ns => {
                    pending.pop();
                    true
                }
                _ => false,
            },
            Kind::Outages(windows, next) => {
                while *next < windows.len() && windows[*next].1 <= now_ns {
                    *next += 1;
                }
                *next < windows.len() && windows[*next].0 <= now_ns
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(spec: LossSpec, n: u64) -> f64 {
        let mut l = LossProcess::new(&spec, Rng::stream(9, "loss"));
        (0..n).filter(|&i| l.lose(i)).count() as f64 / n as f64
    }

    #[test]
    fn periodic_is_exact() {
        assert_eq!(rate(LossSpec::Periodic { p: 0.01 }, 100_000), 0.01);
    }

    #[test]
    fn gilbert_elliott_mean_matches_stationary_distribution() {
        let spec = LossSpec::GilbertElliott { p_gb: 0.01, p_bg: 0.2, loss_good: 0.0, loss_bad: 0.5 };
        let expect = spec.mean_loss();
        let got = rate(spec, 2_000_000);
        assert!((got - expect).abs() / expect < 0.05, "got {got}, expected {expect}");
    }

    #[test]
    fn scheduled_losses_hit_the_first_packet_after_each_instant() {
        let mut l = LossProcess::new(&LossSpec::Scheduled { at_ns: vec![50, 10] }, Rng::stream(1, "x"));
        let lost: Vec<u64> = [5u64, 12, 13, 49, 60, 61].iter().copied().filter(|&t| l.lose(t)).collect();
        assert_eq!(lost, vec![12, 60]);
    }

    #[test]
    fn outages_drop_everything_inside_their_windows() {
        let mut l = LossProcess::new(&LossSpec::Outages { windows_ns: vec![(10, 20), (30, 31)] }, Rng::stream(1, "x"));
        let lost: Vec<u64> = (0..40).filter(|&t| l.lose(t)).collect();
        assert_eq!(lost, (10..20).chain([30]).collect::<Vec<_>>());
    }

    #[test]
    fn zero_probability_never_loses() {
        assert_eq!(rate(LossSpec::Bernoulli { p: 0.0 }, 10_000), 0.0);
    }
}
