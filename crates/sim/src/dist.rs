//! Probability distributions for traffic models: flow sizes (SURGE's lognormal
//! body with a Pareto tail, Barford and Crovella 1998), inter-arrival times and
//! per-flow RTTs. Each distribution samples from a named random stream and knows
//! its CDF, so tests can check samples with a Kolmogorov-Smirnov statistic. Values
//! are plain numbers in the unit of whatever they describe (ns, bytes).

use crate::config::{ConfigError, Schema};
use crate::rng::Rng;
use serde::{Deserialize, Serialize};

/// SURGE file-size body: lognormal with mu 9.357, sigma 1.318 (ln bytes).
pub const SURGE_MU: f64 = 9.357;
pub const SURGE_SIGMA: f64 = 1.318;
/// SURGE file-size tail: Pareto with k = 133 KB and alpha 1.1, used above k.
pub const SURGE_TAIL_K: f64 = 133_000.0;
pub const SURGE_TAIL_ALPHA: f64 = 1.1;
/// Share of files in the Pareto tail: SURGE puts about 93 % of files in the
/// body and 7 % in the tail. (A join continuous in the CDF would put only 3.2 %
/// above 133 KB; `tail: None` gives that variant.)
pub const SURGE_TAIL_SHARE: f64 = 0.07;

/// A distribution of values in the unit of what it describes (ns for times,
/// bytes for sizes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Schema)]
#[serde(tag = "distribution", rename_all = "snake_case", deny_unknown_fields)]
#[schema(name = "dist", rules = Dist::rules)]
pub enum Dist {
    /// Always the same value.
    Constant {
        /// The value.
        #[schema(min = 0)]
        value: f64,
    },
    /// Uniform between min and max.
    Uniform {
        /// Smallest value.
        #[schema(min = 0)]
        min: f64,
        /// Largest value, at least min.
        max: f64,
    },
    /// Exponential with the given mean.
    Exponential {
        /// Mean value.
        #[schema(positive)]
        mean: f64,
    },
    /// Normal, truncated to [min, max] by resampling.
    Normal {
        /// Mean before truncation.
        mean: f64,
        /// Standard deviation before truncation.
        #[schema(positive)]
        sd: f64,
        /// Smallest value kept (default: none).
        #[serde(default)]
        min: Option<f64>,
        /// Largest value kept (default: none).
        #[serde(default)]
        max: Option<f64>,
    },
    /// Lognormal: the logarithm of the value is normal.
    Lognormal {
        /// Mean of the logarithm (ln of the unit).
        mu: f64,
        /// Standard deviation of the logarithm.
        #[schema(positive)]
        sigma: f64,
    },
    /// Pareto with scale `k` and shape `alpha`, truncated at `max` when given.
    Pareto {
        /// Scale: the smallest value.
        #[schema(positive)]
        k: f64,
        /// Shape (the mean is infinite for alpha <= 1).
        #[schema(positive)]
        alpha: f64,
        /// Cap on the values, above k (default: none).
        #[serde(default)]
        max: Option<f64>,
    },
    /// A lognormal body joined to a Pareto tail at `k`: values below k follow the
    /// lognormal (renormalised), a fraction `tail` of all values follows the
    /// Pareto above k (truncated at `max` when given). With `tail` unset, the
    /// lognormal's own mass above k goes to the Pareto (the join is continuous in
    /// the CDF), as SURGE does.
    LognormalPareto {
        /// Mean of the body's logarithm.
        mu: f64,
        /// Standard deviation of the body's logarithm.
        #[schema(positive)]
        sigma: f64,
        /// Where the tail starts.
        #[schema(positive)]
        k: f64,
        /// Shape of the Pareto tail.
        #[schema(positive)]
        alpha: f64,
        /// Share of values in the tail (default: the lognormal's own mass above k).
        #[serde(default)]
        #[schema(min = 0, lt = 1)]
        tail: Option<f64>,
        /// Cap on the tail's values, above k (default: none).
        #[serde(default)]
        max: Option<f64>,
    },
    /// A measured distribution given by points of its CDF: the value at each
    /// cumulative probability, linear in between (ns-3's
    /// `EmpiricalRandomVariable` with interpolation). Measured percentiles
    /// go in as they are, with the smallest and largest values seen at 0
    /// and 1.
    Empirical {
        /// The values at those probabilities, non-decreasing.
        values: Vec<f64>,
        /// Cumulative probabilities, rising strictly from 0 to 1.
        probabilities: Vec<f64>,
    },
}

impl Dist {
    /// SURGE file sizes in bytes, untruncated.
    pub fn surge() -> Dist {
        Dist::LognormalPareto {
            mu: SURGE_MU,
            sigma: SURGE_SIGMA,
            k: SURGE_TAIL_K,
            alpha: SURGE_TAIL_ALPHA,
            tail: Some(SURGE_TAIL_SHARE),
            max: None,
        }
    }

    /// SURGE file sizes truncated at `max` bytes. A Pareto tail with alpha 1.1
    /// has infinite variance: untruncated, the offered load of a 600 s run
    /// wanders tens of percent from its target; a cap bounds the variance.
    pub fn surge_capped(max: f64) -> Dist {
        Dist::LognormalPareto {
            mu: SURGE_MU,
            sigma: SURGE_SIGMA,
            k: SURGE_TAIL_K,
            alpha: SURGE_TAIL_ALPHA,
            tail: Some(SURGE_TAIL_SHARE),
            max: Some(max),
        }
    }

    pub fn validate(&self, field: &str) -> Result<(), ConfigError> {
        self.check_fields().map_err(|e| e.within(field))
    }

    /// Checks across fields (the ranges are declared on the fields).
    fn rules(&self) -> Result<(), ConfigError> {
        match *self {
            Dist::Uniform { min, max } if max.is_nan() || min > max => Err(ConfigError::new("", "needs 0 <= min <= max")),
            Dist::Pareto { k, max, .. } | Dist::LognormalPareto { k, max, .. } => check_max(k, max),
            Dist::Empirical { ref values, ref probabilities } => check_empirical(values, probabilities),
            _ => Ok(()),
        }
    }

    /// Probability that a value is at most `x`.
    pub fn cdf(&self, x: f64) -> f64 {
        match *self {
            Dist::Constant { value } => (x >= value) as u8 as f64,
            Dist::Uniform { min, max } => {
                if max == min {
                    (x >= min) as u8 as f64
                } else {
                    ((x - min) / (max - min)).clamp(0.0, 1.0)
                }
            }
            Dist::Exponential { mean } => if x <= 0.0 { 0.0 } else { 1.0 - (-x / mean).exp() },
            Dist::Normal { mean, sd, min, max } => {
                let lo = min.map_or(0.0, |m| norm_cdf((m - mean) / sd));
                let hi = max.map_or(1.0, |m| norm_cdf((m - mean) / sd));
                ((norm_cdf((x - mean) / sd) - lo) / (hi - lo)).clamp(0.0, 1.0)
            }
            Dist::Lognormal { mu, sigma } => if x <= 0.0 { 0.0 } else { norm_cdf((x.ln() - mu) / sigma) },
            Dist::Pareto { k, alpha, max } => pareto_cdf(x, k, alpha, max),
            Dist::LognormalPareto { mu, sigma, k, alpha, tail, max } => {
                let body_at_k = norm_cdf((k.ln() - mu) / sigma);
                let tail_mass = tail.unwrap_or(1.0 - body_at_k);
                if x <= 0.0 {
                    0.0
                } else if x < k {
                    (1.0 - tail_mass) * norm_cdf((x.ln() - mu) / sigma) / body_at_k
                } else {
                    (1.0 - tail_mass) + tail_mass * pareto_cdf(x, k, alpha, max)
                }
            }
            Dist::Empirical { ref values, ref probabilities } => empirical_cdf(x, values, probabilities),
        }
    }

    /// Mean (infinite for a Pareto with alpha <= 1).
    pub fn mean(&self) -> f64 {
        match *self {
            Dist::Constant { value } => value,
            Dist::Uniform { min, max } => (min + max) / 2.0,
            Dist::Exponential { mean } => mean,
            Dist::Normal { mean, sd, min, max } => {
                if min.is_none() && max.is_none() {
                    return mean;
                }
                // Mean of the truncated normal.
                let a = min.map_or(f64::NEG_INFINITY, |m| (m - mean) / sd);
                let b = max.map_or(f64::INFINITY, |m| (m - mean) / sd);
                let z = norm_cdf(b) - norm_cdf(a);
                mean + sd * (norm_pdf(a) - norm_pdf(b)) / z
            }
            Dist::Lognormal { mu, sigma } => (mu + sigma * sigma / 2.0).exp(),
            Dist::Pareto { k, alpha, max } => pareto_mean(k, alpha, max),
            Dist::LognormalPareto { mu, sigma, k, alpha, tail, max } => {
                let body_at_k = norm_cdf((k.ln() - mu) / sigma);
                let tail_mass = tail.unwrap_or(1.0 - body_at_k);
                // E[X | X < k] for the lognormal: exp(mu + s^2/2) Phi((ln k - mu - s^2)/s) / Phi((ln k - mu)/s)
                let body_mean = (mu + sigma * sigma / 2.0).exp() * norm_cdf((k.ln() - mu - sigma * sigma) / sigma) / body_at_k;
                let tail_mean = pareto_mean(k, alpha, max);
                (1.0 - tail_mass) * body_mean + tail_mass * tail_mean
            }
            // Each segment is uniform between its two values.
            Dist::Empirical { ref values, ref probabilities } => values
                .windows(2)
                .zip(probabilities.windows(2))
                .map(|(v, p)| (p[1] - p[0]) * (v[0] + v[1]) / 2.0)
                .sum(),
        }
    }

    pub fn sample(&self, rng: &mut Rng) -> f64 {
        match *self {
            Dist::Constant { value } => value,
            Dist::Uniform { min, max } => min + (max - min) * rng.uniform(),
            Dist::Exponential { mean } => -mean * open_unit(rng).ln(),
            Dist::Normal { mean, sd, min, max } => {
                for _ in 0..10_000 {
                    let x = mean + sd * std_normal(rng);
                    if min.is_none_or(|m| x >= m) && max.is_none_or(|m| x <= m) {
                        return x;
                    }
                }
                mean.clamp(min.unwrap_or(f64::MIN), max.unwrap_or(f64::MAX))
            }
            Dist::Lognormal { mu, sigma } => (mu + sigma * std_normal(rng)).exp(),
            Dist::Pareto { k, alpha, max } => pareto_sample(rng, k, alpha, max),
            Dist::LognormalPareto { .. } => Sampler::new(self.clone()).sample(rng),
            Dist::Empirical { ref values, ref probabilities } => empirical_at(rng.uniform(), values, probabilities),
        }
    }
}

/// A distribution prepared for many draws: what a draw from a lognormal body
/// with a Pareto tail would otherwise recompute each time (the body's mass
/// below the tail, the tail's mass below its cap) is computed once. Draws
/// are the very numbers `Dist::sample` gives; per-packet noise draws from one.
#[derive(Clone, Debug)]
pub struct Sampler {
    dist: Dist,
    /// Lognormal-Pareto only: Phi((ln k - mu) / sigma) and the truncated
    /// Pareto's mass.
    body_at_k: f64,
    tail_mass_below_max: f64,
}

impl Sampler {
    pub fn new(dist: Dist) -> Sampler {
        let (body_at_k, tail_mass_below_max) = match dist {
            Dist::LognormalPareto { mu, sigma, k, alpha, max, .. } => (norm_cdf((k.ln() - mu) / sigma), pareto_mass(k, alpha, max)),
            _ => (0.0, 0.0),
        };
        Sampler { dist, body_at_k, tail_mass_below_max }
    }

    pub fn sample(&self, rng: &mut Rng) -> f64 {
        match self.dist {
            Dist::LognormalPareto { mu, sigma, k, alpha, tail, max } => {
                let tail_mass = tail.unwrap_or(1.0 - self.body_at_k);
                if rng.uniform() < tail_mass {
                    pareto_at(rng.uniform() * self.tail_mass_below_max, k, alpha, max)
                } else {
                    // Lognormal conditioned below k: invert the CDF on [0, Phi(ln k)).
                    let u = rng.uniform() * self.body_at_k;
                    (mu + sigma * norm_inv(u.max(1e-300))).exp().min(k)
                }
            }
            ref d => d.sample(rng),
        }
    }

    /// A draw as a duration: whole nanoseconds, never negative.
    pub fn draw_ns(&self, rng: &mut Rng) -> u64 {
        self.sample(rng).max(0.0).round() as u64
    }
}

fn check_empirical(values: &[f64], probabilities: &[f64]) -> Result<(), ConfigError> {
    if values.len() != probabilities.len() || values.len() < 2 {
        return Err(ConfigError::new(
            "",
            format!("needs as many values as probabilities, at least 2 (got {} and {})", values.len(), probabilities.len()),
        ));
    }
    if probabilities[0] != 0.0 || probabilities[probabilities.len() - 1] != 1.0 {
        return Err(ConfigError::new("probabilities", "must start at 0 and end at 1 (the smallest and largest values)"));
    }
    if let Some(w) = probabilities.windows(2).find(|w| !(w[1] > w[0])) {
        return Err(ConfigError::new("probabilities", format!("must rise strictly, got {} then {}", w[0], w[1])));
    }
    if let Some(v) = values.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
        return Err(ConfigError::new("values", format!("must be finite and at least 0, got {v}")));
    }
    if let Some(w) = values.windows(2).find(|w| w[1] < w[0]) {
        return Err(ConfigError::new("values", format!("must not decrease, got {} then {}", w[0], w[1])));
    }
    Ok(())
}

impl Dist {
    /// An `Empirical` distribution in nanoseconds from measured percentiles
    /// in microseconds (`values_us[i]` at cumulative probability
    /// `probabilities[i]`), as the engine's measured defaults are written.
    pub fn empirical_us(values_us: &[f64], probabilities: &[f64]) -> Dist {
        Dist::Empirical { values: values_us.iter().map(|us| us * 1_000.0).collect(), probabilities: probabilities.to_vec() }
    }
}

/// The empirical distribution's value at cumulative probability `u` in [0, 1).
fn empirical_at(u: f64, values: &[f64], probabilities: &[f64]) -> f64 {
    // The segment [p_i, p_i+1) holding u.
    let i = probabilities.partition_point(|&p| p <= u).clamp(1, probabilities.len() - 1) - 1;
    let (p0, p1) = (probabilities[i], probabilities[i + 1]);
    values[i] + (values[i + 1] - values[i]) * ((u - p0) / (p1 - p0)).clamp(0.0, 1.0)
}

fn empirical_cdf(x: f64, values: &[f64], probabilities: &[f64]) -> f64 {
    if x < values[0] {
        return 0.0;
    }
    // The last segment starting at or below x.
    let i = values.partition_point(|&v| v <= x);
    if i >= values.len() {
        return 1.0;
    }
    let (v0, v1) = (values[i - 1], values[i]);
    probabilities[i - 1] + (probabilities[i] - probabilities[i - 1]) * (x - v0) / (v1 - v0)
}

fn check_max(k: f64, max: Option<f64>) -> Result<(), ConfigError> {
    match max {
        Some(m) if !(m > k && m.is_finite()) => Err(ConfigError::new("max", format!("must be larger than k ({k}), got {m}"))),
        _ => Ok(()),
    }
}

/// Mass of the untruncated Pareto below `max` (1 without a cap).
fn pareto_mass(k: f64, alpha: f64, max: Option<f64>) -> f64 {
    max.map_or(1.0, |m| 1.0 - (k / m).powf(alpha))
}

fn pareto_cdf(x: f64, k: f64, alpha: f64, max: Option<f64>) -> f64 {
    if x < k {
        0.0
    } else {
        ((1.0 - (k / x).powf(alpha)) / pareto_mass(k, alpha, max)).min(1.0)
    }
}

fn pareto_mean(k: f64, alpha: f64, max: Option<f64>) -> f64 {
    match max {
        None if alpha > 1.0 => k * alpha / (alpha - 1.0),
        None => f64::INFINITY,
        Some(m) if (alpha - 1.0).abs() < 1e-12 => k * (m / k).ln() / pareto_mass(k, alpha, max),
        Some(m) => {
            alpha * k.powf(alpha) / (alpha - 1.0) * (k.powf(1.0 - alpha) - m.powf(1.0 - alpha)) / pareto_mass(k, alpha, max)
        }
    }
}

/// Inverse-CDF sample of the (truncated) Pareto.
fn pareto_sample(rng: &mut Rng, k: f64, alpha: f64, max: Option<f64>) -> f64 {
    let u = rng.uniform() * pareto_mass(k, alpha, max);
    pareto_at(u, k, alpha, max)
}

/// The truncated Pareto's value at `u` (a uniform draw scaled by its mass).
fn pareto_at(u: f64, k: f64, alpha: f64, max: Option<f64>) -> f64 {
    let x = k / (1.0 - u).powf(1.0 / alpha);
    max.map_or(x, |m| x.min(m))
}

/// Uniform in (0, 1], never 0 (for logarithms and powers).
fn open_unit(rng: &mut Rng) -> f64 {
    1.0 - rng.uniform()
}

/// A standard normal variate (Box-Muller, one of the pair).
pub fn std_normal(rng: &mut Rng) -> f64 {
    let u1 = open_unit(rng);
    let u2 = rng.uniform();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

fn norm_pdf(z: f64) -> f64 {
    if !z.is_finite() {
        return 0.0;
    }
    (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// Standard normal CDF via erfc (W. J. Cody's rational approximation is overkill;
/// this uses the complementary error function series from Numerical Recipes'
/// `erfcc`, accurate to 1.2e-7, enough for tests and sampling).
pub fn norm_cdf(z: f64) -> f64 {
    if z == f64::INFINITY {
        return 1.0;
    }
    if z == f64::NEG_INFINITY {
        return 0.0;
    }
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t * (-z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07 + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
        .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Inverse standard normal CDF (Acklam's algorithm, relative error 1.15e-9).
pub fn norm_inv(p: f64) -> f64 {
    const A: [f64; 6] = [-3.969683028665376e1, 2.209460984245205e2, -2.759285104469687e2, 1.383577518672690e2, -3.066479806614716e1, 2.506628277459239];
    const B: [f64; 5] = [-5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1, -1.328068155288572e1];
    const C: [f64; 6] = [-7.784894002430293e-3, -3.223964580411365e-1, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
    const D: [f64; 4] = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let plow = 0.02425;
    if p < plow {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5]) / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - plow {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        let q = (-2.0 * (1.0 - p).ln()).sqrt();
        -(((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5]) / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    }
}

/// Kolmogorov-Smirnov statistic of `samples` against `cdf`.
pub fn ks_statistic(samples: &mut [f64], cdf: impl Fn(f64) -> f64) -> f64 {
    samples.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let n = samples.len() as f64;
    let mut d: f64 = 0.0;
    for (i, &x) in samples.iter().enumerate() {
        let f = cdf(x);
        d = d.max(f - i as f64 / n).max((i + 1) as f64 / n - f);
    }
    d
}

/// The KS critical value at significance 0.01 for `n` samples (asymptotic).
pub fn ks_critical_01(n: usize) -> f64 {
    1.628 / (n as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(d: Dist, name: &str) {
        let mut rng = Rng::stream(42, name);
        let mut v: Vec<f64> = (0..20_000).map(|_| d.sample(&mut rng)).collect();
        let ks = ks_statistic(&mut v, |x| d.cdf(x));
        assert!(ks < ks_critical_01(v.len()), "{name}: KS {ks}");
    }

    #[test]
    fn samples_follow_their_distributions() {
        check(Dist::Exponential { mean: 0.066 }, "exp");
        check(Dist::Uniform { min: 10.0, max: 20.0 }, "uni");
        check(Dist::Normal { mean: 100.0, sd: 30.0, min: Some(0.0), max: None }, "norm");
        check(Dist::Lognormal { mu: SURGE_MU, sigma: SURGE_SIGMA }, "lognormal");
        check(Dist::Pareto { k: SURGE_TAIL_K, alpha: SURGE_TAIL_ALPHA, max: None }, "pareto");
        check(Dist::Pareto { k: SURGE_TAIL_K, alpha: SURGE_TAIL_ALPHA, max: Some(1e7) }, "pareto-capped");
        check(Dist::surge(), "surge");
        check(Dist::surge_capped(1e7), "surge-capped");
        check(
            Dist::LognormalPareto { mu: SURGE_MU, sigma: SURGE_SIGMA, k: SURGE_TAIL_K, alpha: SURGE_TAIL_ALPHA, tail: None, max: None },
            "surge-continuous",
        );
    }

    #[test]
    fn the_ks_test_rejects_a_wrong_distribution() {
        let mut rng = Rng::stream(1, "x");
        let mut v: Vec<f64> = (0..20_000).map(|_| Dist::Exponential { mean: 1.2 }.sample(&mut rng)).collect();
        let ks = ks_statistic(&mut v, |x| Dist::Exponential { mean: 1.0 }.cdf(x));
        assert!(ks > ks_critical_01(v.len()));
    }

    #[test]
    fn surge_has_the_stated_tail_share() {
        let d = Dist::surge();
        // 7 % of files above 133 KB; the body's median stays near e^mu = 11.6 KB.
        assert!((1.0 - d.cdf(SURGE_TAIL_K) - SURGE_TAIL_SHARE).abs() < 1e-9);
        assert!((d.cdf(11_580.0) - 0.93 * 0.5 / 0.968).abs() < 0.01, "{}", d.cdf(11_580.0));
        // Mean: the tail (alpha 1.1) dominates, 7 % x 1.46 MB.
        assert!(d.mean() > 100_000.0 && d.mean() < 130_000.0, "{}", d.mean());
        // The continuous join puts 3.2 % in the tail.
        let c = Dist::LognormalPareto { mu: SURGE_MU, sigma: SURGE_SIGMA, k: SURGE_TAIL_K, alpha: SURGE_TAIL_ALPHA, tail: None, max: None };
        assert!((1.0 - c.cdf(SURGE_TAIL_K) - 0.032).abs() < 0.001);
        assert!((c.cdf(SURGE_TAIL_K) - c.cdf(SURGE_TAIL_K - 1e-6)).abs() < 1e-6);
    }

    #[test]
    fn truncated_means_match_the_sample_mean() {
        // A capped tail has finite variance, so the sample mean converges.
        for d in [Dist::Pareto { k: 1.0, alpha: 1.1, max: Some(1000.0) }, Dist::surge_capped(1e7), Dist::Exponential { mean: 3.0 }] {
            let mut rng = Rng::stream(7, "mean");
            let n = 400_000;
            let m: f64 = (0..n).map(|_| d.sample(&mut rng)).sum::<f64>() / n as f64;
            assert!((m / d.mean() - 1.0).abs() < 0.03, "{d:?}: sample mean {m}, expected {}", d.mean());
        }
        let capped = Dist::Pareto { k: 1.0, alpha: 1.1, max: Some(50.0) };
        let mut rng = Rng::stream(8, "cap");
        assert!((0..10_000).all(|_| capped.sample(&mut rng) <= 50.0));
        assert_eq!(capped.cdf(50.0), 1.0);
    }

    /// The kernel receiver's wait for iperf3's read, two flows at 400 Mbit/s
    /// (docs/fidelity.md), as percentiles 0, 10, 25, 50, 75, 90, 99, 100 (ns).
    fn measured_read_wait() -> Dist {
        Dist::Empirical {
            values: vec![500.0, 3_300.0, 10_000.0, 23_900.0, 39_100.0, 91_800.0, 827_000.0, 2_000_000.0],
            probabilities: vec![0.0, 0.10, 0.25, 0.50, 0.75, 0.90, 0.99, 1.0],
        }
    }

    #[test]
    fn an_empirical_distribution_keeps_its_percentiles() {
        let d = measured_read_wait();
        check(d.clone(), "empirical");
        let Dist::Empirical { ref values, ref probabilities } = d else { unreachable!() };
        for (v, p) in values.iter().zip(probabilities) {
            assert!((d.cdf(*v) - p).abs() < 1e-12, "cdf({v}) = {}, expected {p}", d.cdf(*v));
            if *p < 1.0 {
                assert!((empirical_at(*p, values, probabilities) - v).abs() < 1e-9);
            }
        }
        // Halfway between two points, in value and in probability.
        assert!((d.cdf((23_900.0 + 39_100.0) / 2.0) - 0.625).abs() < 1e-12);
        assert_eq!(d.cdf(100.0), 0.0);
        assert_eq!(d.cdf(3e6), 1.0);
        let mut rng = Rng::stream(9, "empirical-mean");
        let n = 400_000;
        let m: f64 = (0..n).map(|_| d.sample(&mut rng)).sum::<f64>() / n as f64;
        assert!((m / d.mean() - 1.0).abs() < 0.02, "sample mean {m}, expected {}", d.mean());
        // Repeated values are a step: a point mass the draws can land on.
        let step = Dist::Empirical { values: vec![1.0, 1.0, 2.0], probabilities: vec![0.0, 0.5, 1.0] };
        let mut rng = Rng::stream(3, "step");
        let ones = (0..10_000).filter(|_| step.sample(&mut rng) == 1.0).count();
        assert!((4_700..5_300).contains(&ones), "{ones}");
        assert_eq!(step.cdf(1.0), 0.5);
    }

    #[test]
    fn an_empirical_distribution_rejects_malformed_points() {
        let bad = |values: Vec<f64>, probabilities: Vec<f64>| {
            Dist::Empirical { values, probabilities }.validate("rx_hold").expect_err("must be rejected").to_string()
        };
        assert!(bad(vec![1.0, 2.0], vec![0.0, 0.5, 1.0]).contains("as many values as probabilities"));
        assert!(bad(vec![1.0], vec![0.0]).contains("at least 2"));
        assert!(bad(vec![1.0, 2.0], vec![0.1, 1.0]).contains("start at 0 and end at 1"));
        assert!(bad(vec![1.0, 2.0, 3.0, 4.0], vec![0.0, 0.5, 0.5, 1.0]).contains("rise strictly"));
        assert!(bad(vec![2.0, 1.0], vec![0.0, 1.0]).contains("must not decrease"));
        assert!(bad(vec![-1.0, 1.0], vec![0.0, 1.0]).contains("at least 0"));
        assert!(measured_read_wait().validate("rx_hold").is_ok());
    }

    #[test]
    fn normal_inverse_and_cdf_agree() {
        for &p in &[0.001, 0.02, 0.3, 0.5, 0.9, 0.999] {
            assert!((norm_cdf(norm_inv(p)) - p).abs() < 1e-6);
        }
    }
}
