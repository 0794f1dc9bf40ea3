//! Web-like short flows: a generator opens TCP connections with Poisson
//! arrivals whose rate makes the offered load (payload bits per second) equal
//! the target: rate = load / (8 x mean size). Each connection transfers a size
//! drawn from SURGE's lognormal body + Pareto tail (Barford and Crovella 1998)
//! over a path whose RTT is drawn from a distribution (the CUBIC evaluation
//! used exponential RTTs, mean one-way delay 66 ms). Arrivals, sizes and RTTs
//! come from three separate random streams, so changing one leaves the others'
//! draws alone.

use super::Direction;
use crate::cc::ParamValue;
use crate::config::{ConfigError, Schema};
use crate::dist::Dist;
use crate::rng::Rng;
use crate::tcp::TcpConfig;
use crate::units::{Dur, Rate, Time};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Default cap on web transfer sizes: the SURGE tail (alpha 1.1) has infinite
/// variance; capped at 10 MB its mean is about 50 KB and a 600 s run at tens of
/// Mbit/s offers its target load within a few percent.
pub const DEFAULT_MAX_SIZE: f64 = 10e6;
pub use super::MIN_RTT;

/// A generator of web-like short TCP flows.
#[derive(Clone, Debug, Serialize, Deserialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(name = "web", rules = WebConfig::rules)]
pub struct WebConfig {
    /// Offered load: payload bits per second of the transfers started.
    #[schema(positive)]
    pub load: Rate,
    /// Transfer sizes in bytes (default: SURGE capped at 10 MB); the mean must be finite.
    #[serde(default = "default_sizes")]
    pub sizes: Dist,
    /// Two-way propagation delay of each connection's path, in nanoseconds
    /// (default: exponential, mean 132 ms).
    #[serde(default = "default_rtt")]
    pub rtt: Dist,
    /// Congestion control of every connection.
    #[serde(default = "default_cca")]
    pub cca: String,
    /// The algorithm's parameters.
    #[serde(default)]
    pub cca_params: BTreeMap<String, ParamValue>,
    /// TCP settings of every connection.
    #[serde(default)]
    pub tcp: TcpConfig,
    /// Which way the transfers' data crosses the dumbbell.
    #[serde(default)]
    pub direction: Direction,
    /// When the first arrival may happen.
    #[serde(default)]
    pub start: Time,
    /// When arrivals stop (default: never); after start.
    #[serde(default)]
    pub stop: Option<Time>,
    /// A label for reports.
    #[serde(default)]
    pub label: String,
}

fn default_sizes() -> Dist {
    Dist::surge_capped(DEFAULT_MAX_SIZE)
}

/// Exponential RTT with mean 132 ms (mean one-way delay 66 ms).
fn default_rtt() -> Dist {
    Dist::Exponential { mean: 132e6 }
}

fn default_cca() -> String {
    "reno".into()
}

impl WebConfig {
    /// Checks the generator (its algorithm's name and parameters too); errors
    /// name the field within `field`.
    pub fn validate(&self, field: &str) -> Result<(), ConfigError> {
        self.check_fields()
            .and_then(|()| crate::cc::make_cca(&self.cca, &self.cca_params).map(|_| ()).map_err(|e| ConfigError::parse(&e)))
            .map_err(|e| e.within(field))
    }

    /// Checks across fields (the ranges are declared on the fields).
    fn rules(&self) -> Result<(), ConfigError> {
        let mean = self.sizes.mean();
        if !(mean.is_finite() && mean >= 1.0) {
            return Err(ConfigError::new(
                "sizes",
                format!("the mean size must be finite and at least 1 byte to set the arrival rate (got {mean}); cap a heavy tail with max"),
            ));
        }
        if let Some(stop) = self.stop {
            if stop <= self.start {
                return Err(ConfigError::new("stop", "must be after start"));
            }
        }
        Ok(())
    }

    /// Mean time between arrivals, ns.
    pub fn mean_gap_ns(&self) -> f64 {
        self.sizes.mean() * 8.0 * 1e9 / self.load.0 as f64
    }
}

/// One connection to open.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WebArrival {
    pub size: u64,
    pub rtt: Dur,
}

pub struct WebGenerator {
    cfg: WebConfig,
    mean_gap_ns: f64,
    arrivals: Rng,
    sizes: Rng,
    rtts: Rng,
}

impl WebGenerator {
    pub fn new(cfg: WebConfig, seed: u64, index: usize) -> WebGenerator {
        WebGenerator {
            mean_gap_ns: cfg.mean_gap_ns(),
            cfg,
            arrivals: Rng::stream(seed, &format!("web-{index}-arrivals")),
            sizes: Rng::stream(seed, &format!("web-{index}-sizes")),
            rtts: Rng::stream(seed, &format!("web-{index}-rtts")),
        }
    }

    pub fn config(&self) -> &WebConfig {
        &self.cfg
    }

    /// The first arrival: one exponential gap after the generator starts.
    pub fn first_arrival(&mut self) -> Option<Time> {
        let start = self.cfg.start;
        self.after(start)
    }

    /// The arrival after one at `now`.
    pub fn after(&mut self, now: Time) -> Option<Time> {
        let gap = -self.mean_gap_ns * (1.0 - self.arrivals.uniform()).ln();
        let t = now + Dur(gap.round() as u64);
        match self.cfg.stop {
            Some(stop) if t >= stop => None,
            _ => Some(t),
        }
    }

    /// Draws the size and RTT of a new connection.
    pub fn draw(&mut self) -> WebArrival {
        let size = self.cfg.sizes.sample(&mut self.sizes).round().max(1.0) as u64;
        let rtt = super::draw_rtt(&self.cfg.rtt, &mut self.rtts);
        WebArrival { size, rtt }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::{ks_critical_01, ks_statistic};

    fn web(load_mbps: u64) -> WebConfig {
        serde_json::from_value(serde_json::json!({ "load": load_mbps * 1_000_000 })).unwrap()
    }

    #[test]
    fn sizes_gaps_and_rtts_follow_their_distributions() {
        let cfg = web(38);
        let mut g = WebGenerator::new(cfg.clone(), 11, 0);
        let (mut t, mut gaps, mut sizes, mut rtts) = (Time::ZERO, vec![], vec![], vec![]);
        for _ in 0..20_000 {
            let next = g.after(t).unwrap();
            gaps.push((next.0 - t.0) as f64);
            t = next;
            let a = g.draw();
            sizes.push(a.size as f64);
            rtts.push(a.rtt.0 as f64);
        }
        let mean_gap = cfg.mean_gap_ns();
        let n = gaps.len();
        assert!(ks_statistic(&mut gaps, |x| 1.0 - (-x / mean_gap).exp()) < ks_critical_01(n));
        // Sizes are rounded to whole bytes: compare against the CDF at the rounding edge.
        assert!(ks_statistic(&mut sizes, |x| cfg.sizes.cdf(x + 0.5)) < ks_critical_01(n));
        assert!(ks_statistic(&mut rtts, |x| cfg.rtt.cdf(x + 0.5)) < ks_critical_01(n));
    }

    #[test]
    fn offered_load_is_within_5_percent_of_the_target_over_a_long_run() {
        for (seed, load) in [(1, 38), (2, 38), (3, 100), (4, 10)] {
            let cfg = web(load);
            let mut g = WebGenerator::new(cfg, seed, 0);
            let horizon = Time::from_secs(3_600);
            let (mut t, mut bytes) = (g.first_arrival().unwrap(), 0u64);
            while t < horizon {
                bytes += g.draw().size;
                t = g.after(t).unwrap();
            }
            let offered = bytes as f64 * 8.0 / 3_600.0;
            let target = load as f64 * 1e6;
            eprintln!("seed {seed}, {load} Mbit/s: offered {:.4} of the target over an hour", offered / target);
            assert!((offered / target - 1.0).abs() < 0.05, "seed {seed}: offered {offered:.0} b/s, target {target}");
        }
    }

    #[test]
    fn the_default_model_is_capped_surge_with_132_ms_mean_rtt() {
        let cfg = web(38);
        assert!((cfg.rtt.mean() - 132e6).abs() < 1.0);
        let mean = cfg.sizes.mean();
        assert!(mean > 40_000.0 && mean < 70_000.0, "{mean}");
        assert!(cfg.validate("web[0]").is_ok());
        let mut bad = web(38);
        bad.sizes = Dist::surge();
        bad.sizes = match bad.sizes {
            Dist::LognormalPareto { mu, sigma, k, tail, max, .. } => Dist::LognormalPareto { mu, sigma, k, alpha: 0.9, tail, max },
            d => d,
        };
        assert!(bad.validate("web[0]").unwrap_err().to_string().contains("web[0].sizes"));
    }
}
