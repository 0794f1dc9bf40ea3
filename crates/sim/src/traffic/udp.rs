//! Unresponsive UDP sources. A source emits datagrams of a fixed wire size at a
//! rate: evenly spaced (constant bit rate, like `iperf -u`), with exponential
//! gaps (Poisson), or in on-off bursts whose on and off durations are drawn
//! from distributions (exponential gives a Markov-modulated source; Pareto gives
//! the heavy-tailed bursts that make aggregate traffic self-similar). Departure
//! times are computed from the phase start and a packet count in integer
//! nanoseconds, so a long CBR run does not drift.

use super::Direction;
use crate::config::{ConfigError, Schema};
use crate::dist::Dist;
use crate::rng::Rng;
use crate::units::{Dur, Rate, Time};
use serde::{Deserialize, Serialize};

/// When a UDP source sends.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Schema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[schema(name = "udp_pattern", rules = UdpPattern::rules)]
pub enum UdpPattern {
    /// Evenly spaced datagrams at the rate (constant bit rate).
    #[default]
    Cbr,
    /// Exponential gaps whose mean is the rate's spacing.
    Poisson,
    /// Sends at `rate` during on periods and nothing during off periods.
    OnOff {
        /// Length of an on period, ns (the mean must be at least 1 us).
        on: Dist,
        /// Length of an off period, ns.
        off: Dist,
    },
}

impl UdpPattern {
    /// Checks across fields (the ranges are declared on the fields).
    fn rules(&self) -> Result<(), ConfigError> {
        match self {
            // Time counts in whole nanoseconds: on periods that round to
            // nothing would send nothing while the schedule spun through them.
            UdpPattern::OnOff { on, .. } if !(on.mean() >= 1000.0) => {
                Err(ConfigError::new("on", "mean on time must be at least 1 us (1000 ns)"))
            }
            _ => Ok(()),
        }
    }
}

/// An unresponsive UDP source and its path.
#[derive(Clone, Debug, Serialize, Deserialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(name = "udp", rules = UdpConfig::rules)]
pub struct UdpConfig {
    /// Sending rate (during on periods for on-off sources).
    #[schema(positive)]
    pub rate: Rate,
    /// Bytes on the wire per datagram (IPv4 + UDP headers to the IP maximum).
    #[serde(default = "default_packet_bytes")]
    #[schema(min = 28, max = 65_535, kind = "bytes", unit = "bytes")]
    pub packet_bytes: u32,
    /// When the source sends.
    #[serde(default)]
    pub pattern: UdpPattern,
    /// Two-way propagation delay of the path (datagrams take half of it).
    #[schema(positive)]
    pub rtt: Dur,
    /// When the source starts sending.
    #[serde(default)]
    pub start: Time,
    /// When it stops (default: never); after start.
    #[serde(default)]
    pub stop: Option<Time>,
    /// Which bottleneck the datagrams cross.
    #[serde(default)]
    pub direction: Direction,
    /// A label for reports.
    #[serde(default)]
    pub label: String,
}

fn default_packet_bytes() -> u32 {
    1500
}

impl UdpConfig {
    pub fn validate(&self, field: &str) -> Result<(), ConfigError> {
        self.check_fields().map_err(|e| e.within(field))
    }

    /// Checks across fields (the ranges are declared on the fields).
    fn rules(&self) -> Result<(), ConfigError> {
        if let Some(stop) = self.stop {
            if stop <= self.start {
                return Err(ConfigError::new("stop", "must be after start"));
            }
        }
        Ok(())
    }

    /// Long-run average sending rate, bit/s.
    pub fn mean_rate_bps(&self) -> f64 {
        match &self.pattern {
            UdpPattern::Cbr | UdpPattern::Poisson => self.rate.0 as f64,
            UdpPattern::OnOff { on, off } => self.rate.0 as f64 * on.mean() / (on.mean() + off.mean()),
        }
    }
}

/// The sending schedule of one source.
pub struct UdpSchedule {
    cfg: UdpConfig,
    rng: Rng,
    /// Start of the current sending phase and packets sent in it.
    phase_start: Time,
    sent_in_phase: u64,
    /// End of the current on period (on-off sources).
    on_until: Option<Time>,
}

impl UdpSchedule {
    pub fn new(cfg: UdpConfig, rng: Rng) -> UdpSchedule {
        let start = cfg.start;
        let mut s = UdpSchedule { cfg, rng, phase_start: start, sent_in_phase: 0, on_until: None };
        if let UdpPattern::OnOff { on, .. } = &s.cfg.pattern {
            let on = on.clone();
            s.on_until = Some(start + Dur(on.sample(&mut s.rng).max(0.0) as u64));
        }
        s
    }

    pub fn config(&self) -> &UdpConfig {
        &self.cfg
    }

    /// The gap between two datagrams at the source's rate.
    fn spacing_ns(&self, k: u64) -> u64 {
        (k as u128 * self.cfg.packet_bytes as u128 * 8 * 1_000_000_000 / self.cfg.rate.0 as u128) as u64
    }

    /// Called when a datagram leaves at `now`; returns when the next one leaves
    /// (None once the source has stopped).
    pub fn next_departure(&mut self, now: Time) -> Option<Time> {
        self.sent_in_phase += 1;
        let next = match &self.cfg.pattern {
            UdpPattern::Cbr => self.phase_start + Dur(self.spacing_ns(self.sent_in_phase)),
            UdpPattern::Poisson => {
                let mean = self.spacing_ns(1) as f64;
                now + Dur((-mean * (1.0 - self.rng.uniform()).ln()).round() as u64)
            }
            UdpPattern::OnOff { on, off } => {
                let (on, off) = (on.clone(), off.clone());
                let mut next = self.phase_start + Dur(self.spacing_ns(self.sent_in_phase));
                let mut on_until = self.on_until.expect("on-off source has an on period");
                while next >= on_until {
                    // The on period ended: stay silent, then start a new burst.
                    let burst_start = on_until + Dur(off.sample(&mut self.rng).max(0.0) as u64);
                    if burst_start == Time::NEVER {
                        // An off period past the end of time: the source is silent for good.
                        return None;
                    }
                    on_until = burst_start + Dur(on.sample(&mut self.rng).max(0.0) as u64);
                    self.phase_start = burst_start;
                    self.sent_in_phase = 0;
                    next = burst_start;
                }
                self.on_until = Some(on_until);
                next
            }
        };
        match self.cfg.stop {
            Some(stop) if next >= stop => None,
            _ => Some(next),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pattern: UdpPattern) -> UdpConfig {
        UdpConfig {
            rate: Rate::from_mbps(12),
            packet_bytes: 1500,
            pattern,
            rtt: Dur::from_ms(10),
            start: Time::ZERO,
            stop: None,
            direction: Direction::Forward,
            label: String::new(),
        }
    }

    fn departures(c: UdpConfig, horizon: Time) -> Vec<Time> {
        let mut s = UdpSchedule::new(c.clone(), Rng::stream(5, "udp"));
        let mut t = c.start;
        let mut v = vec![t];
        while let Some(n) = s.next_departure(t) {
            if n > horizon {
                break;
            }
            assert!(n >= t);
            v.push(n);
            t = n;
        }
        v
    }

    #[test]
    fn cbr_is_evenly_spaced_at_the_rate() {
        // 12 Mbit/s of 1500-byte datagrams: one every 1 ms exactly.
        let d = departures(cfg(UdpPattern::Cbr), Time::from_secs(10));
        assert_eq!(d.len(), 10_001);
        assert!(d.windows(2).all(|w| w[1].0 - w[0].0 == 1_000_000));
    }

    #[test]
    fn poisson_gaps_are_exponential_with_the_rate_as_mean() {
        let d = departures(cfg(UdpPattern::Poisson), Time::from_secs(100));
        let mut gaps: Vec<f64> = d.windows(2).map(|w| (w[1].0 - w[0].0) as f64).collect();
        let rate = d.len() as f64 / 100.0;
        assert!((rate / 1000.0 - 1.0).abs() < 0.02, "{rate} datagrams/s");
        let ks = crate::dist::ks_statistic(&mut gaps, |x| 1.0 - (-x / 1e6).exp());
        assert!(ks < crate::dist::ks_critical_01(gaps.len()), "KS {ks}");
    }

    #[test]
    fn an_off_period_past_the_end_of_time_stops_the_source() {
        let constant = |v: f64| Dist::Constant { value: v };
        let mut s = UdpSchedule::new(cfg(UdpPattern::OnOff { on: constant(1e6), off: constant(1e27) }), Rng::stream(5, "udp"));
        let mut t = Time::ZERO;
        let mut sent = 0;
        while let Some(n) = s.next_departure(t) {
            t = n;
            sent += 1;
            assert!(sent < 10, "the datagram at 0 fills the 1 ms burst; silence follows for good");
        }
        assert_eq!(sent, 0);
    }

    #[test]
    fn on_off_sends_at_the_rate_for_the_on_share_of_the_time() {
        let exp = |mean_ms: f64| Dist::Exponential { mean: mean_ms * 1e6 };
        let c = cfg(UdpPattern::OnOff { on: exp(200.0), off: exp(600.0) });
        assert_eq!(c.mean_rate_bps(), 3e6);
        let d = departures(c, Time::from_secs(400));
        let mean_bps = d.len() as f64 * 1500.0 * 8.0 / 400.0;
        assert!((mean_bps / 3e6 - 1.0).abs() < 0.05, "{mean_bps}");
        // Within a burst the spacing is the CBR spacing; there are long silences.
        let gaps: Vec<u64> = d.windows(2).map(|w| w[1].0 - w[0].0).collect();
        assert!(gaps.iter().filter(|&&g| g == 1_000_000).count() as f64 > 0.95 * gaps.len() as f64);
        assert!(gaps.iter().any(|&g| g > 100_000_000));
    }

    #[test]
    fn stops_at_stop() {
        let mut c = cfg(UdpPattern::Cbr);
        c.start = Time::from_secs(1);
        c.stop = Some(Time::from_secs(2));
        let d = departures(c, Time::from_secs(10));
        assert_eq!(d.len(), 1000);
        assert!(*d.last().unwrap() < Time::from_secs(2));
    }
}
