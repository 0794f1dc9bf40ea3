//! Trace-driven link service in the Mahimahi format: a trace lists, one per
//! line, the millisecond at which the link may deliver one MTU-sized packet (a
//! delivery opportunity of 1500 bytes); a timestamp repeated n times is n
//! opportunities in that millisecond, and the trace loops with a period equal
//! to its last timestamp. As in Mahimahi's link queue, an opportunity that
//! finds the queue empty is lost, a packet smaller than the opportunity leaves
//! the rest of it to the next packet in the same instant, and a larger packet
//! spans several opportunities. Reading trace files is the caller's business:
//! the engine takes the list of milliseconds.

use crate::config::{ConfigError, Schema};
use crate::units::Time;
use serde::{Deserialize, Serialize};

/// A delivery-opportunity trace that serves the forward bottleneck.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(name = "trace", rules = TraceConfig::rules)]
pub struct TraceConfig {
    /// Delivery opportunities, milliseconds from the start, non-decreasing;
    /// the last one (positive) is the trace's period.
    #[schema(unit = "ms")]
    pub opportunities_ms: Vec<u64>,
    /// Bytes one opportunity may carry.
    #[serde(default = "default_bytes")]
    #[schema(positive, kind = "bytes")]
    pub bytes_per_opportunity: u32,
    /// Loop the trace (Mahimahi does); otherwise the link stops at its end.
    #[serde(default = "yes")]
    pub repeat: bool,
}

fn default_bytes() -> u32 {
    1500
}

fn yes() -> bool {
    true
}

const MS: u64 = 1_000_000;
/// A time beyond any run: the completion time of a packet a finished,
/// non-repeating trace will never carry.
const NEVER: Time = Time(u64::MAX / 4);

impl TraceConfig {
    pub fn validate(&self, field: &str) -> Result<(), ConfigError> {
        self.check_fields().map_err(|e| e.within(field))
    }

    /// Checks across fields (the ranges are declared on the fields).
    fn rules(&self) -> Result<(), ConfigError> {
        if self.opportunities_ms.is_empty() {
            return Err(ConfigError::new("", "the trace has no delivery opportunities"));
        }
        if let Some(i) = self.opportunities_ms.windows(2).position(|w| w[1] < w[0]) {
            return Err(ConfigError::new("", format!("timestamps must not decrease (line {} goes back in time)", i + 2)));
        }
        if *self.opportunities_ms.last().expect("non-empty") == 0 {
            return Err(ConfigError::new("", "the last timestamp must be positive (it is the trace's period)"));
        }
        Ok(())
    }

    /// Average rate of the trace, bit/s.
    pub fn mean_rate_bps(&self) -> f64 {
        let period = *self.opportunities_ms.last().unwrap_or(&1) as f64 / 1e3;
        self.opportunities_ms.len() as f64 * self.bytes_per_opportunity as f64 * 8.0 / period
    }
}

pub struct TraceService {
    opp_ns: Vec<u64>,
    period_ns: u64,
    bytes_per: u32,
    repeat: bool,
    /// Next unused opportunity: index in the trace and loop count.
    idx: usize,
    cycle: u64,
    /// Unused bytes of the opportunity at `leftover_at`.
    leftover: u32,
    leftover_at: Time,
}

impl TraceService {
    pub fn new(cfg: &TraceConfig) -> TraceService {
        TraceService {
            opp_ns: cfg.opportunities_ms.iter().map(|m| m * MS).collect(),
            period_ns: cfg.opportunities_ms.last().copied().unwrap_or(1) * MS,
            bytes_per: cfg.bytes_per_opportunity,
            repeat: cfg.repeat,
            idx: 0,
            cycle: 0,
            leftover: 0,
            leftover_at: Time::ZERO,
        }
    }

    fn current(&self) -> Option<Time> {
        if self.idx >= self.opp_ns.len() {
            return None;
        }
        Some(Time(self.cycle * self.period_ns + self.opp_ns[self.idx]))
    }

    fn advance(&mut self) {
        self.idx += 1;
        if self.idx == self.opp_ns.len() && self.repeat {
            self.idx = 0;
            self.cycle += 1;
        }
    }

    /// When a packet of `bytes` that starts service at `now` has been carried.
    pub fn finish_time(&mut self, now: Time, bytes: u32) -> Time {
        let mut need = bytes;
        if self.leftover > 0 && self.leftover_at == now {
            let take = need.min(self.leftover);
            need -= take;
            self.leftover -= take;
            if need == 0 {
                return now;
            }
        }
        self.leftover = 0;
        // Opportunities before `now` found the link idle and are gone.
        if self.repeat && self.current().is_some_and(|t| t < now) {
            let skipped_cycles = (now.0 / self.period_ns).saturating_sub(self.cycle + 1);
            self.cycle += skipped_cycles;
        }
        while self.current().is_some_and(|t| t < now) {
            self.advance();
        }
        let mut done = now;
        while need > 0 {
            let Some(t) = self.current() else { return NEVER };
            let take = need.min(self.bytes_per);
            need -= take;
            done = t;
            self.leftover = self.bytes_per - take;
            self.leftover_at = t;
            self.advance();
        }
        done
    }

    /// Bytes the trace offers in [0, now].
    pub fn capacity_bytes(&self, now: Time) -> u64 {
        let n = self.opp_ns.len() as u64;
        let (cycles, rem) = if self.repeat { (now.0 / self.period_ns, now.0 % self.period_ns) } else { (0, now.0) };
        let within = self.opp_ns.partition_point(|&t| t <= rem) as u64;
        // A non-repeating trace offers nothing after its end.
        (cycles * n + within) * self.bytes_per as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(ms: &[u64]) -> TraceConfig {
        TraceConfig { opportunities_ms: ms.to_vec(), bytes_per_opportunity: 1500, repeat: true }
    }

    #[test]
    fn full_packets_leave_one_per_opportunity_and_the_trace_loops() {
        let mut s = TraceService::new(&trace(&[1, 1, 3, 4]));
        let mut t = Time::ZERO;
        let mut out = vec![];
        for _ in 0..8 {
            t = s.finish_time(t, 1500);
            out.push(t.0 / MS);
        }
        assert_eq!(out, vec![1, 1, 3, 4, 5, 5, 7, 8]);
    }

    #[test]
    fn an_idle_link_loses_its_opportunities_and_small_packets_share_one() {
        let mut s = TraceService::new(&trace(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]));
        assert_eq!(s.finish_time(Time(0), 1500), Time(MS));
        // Idle until 5.5 ms: opportunities 2..5 are gone.
        assert_eq!(s.finish_time(Time(5 * MS + MS / 2), 52), Time(6 * MS));
        assert_eq!(s.finish_time(Time(6 * MS), 1448), Time(6 * MS));
        assert_eq!(s.finish_time(Time(6 * MS), 100), Time(7 * MS));
        // A 3000-byte packet spans two opportunities.
        assert_eq!(s.finish_time(Time(7 * MS), 3000), Time(9 * MS));
        // Idle for 3.5 loops.
        assert_eq!(s.finish_time(Time(45 * MS + MS / 2), 1500), Time(46 * MS));
    }

    #[test]
    fn capacity_counts_opportunities_through_the_loops() {
        let s = TraceService::new(&trace(&[1, 1, 3, 4]));
        assert_eq!(s.capacity_bytes(Time(0)), 0);
        assert_eq!(s.capacity_bytes(Time(MS)), 3000);
        assert_eq!(s.capacity_bytes(Time(4 * MS)), 6000);
        assert_eq!(s.capacity_bytes(Time(9 * MS)), 6000 * 2 + 3000);
        assert!((trace(&[1, 1, 3, 4]).mean_rate_bps() - 12e6).abs() < 1.0);
    }

    #[test]
    fn a_trace_that_does_not_repeat_stops() {
        let mut s = TraceService::new(&TraceConfig { opportunities_ms: vec![1, 2], bytes_per_opportunity: 1500, repeat: false });
        assert_eq!(s.finish_time(Time(0), 1500), Time(MS));
        assert_eq!(s.finish_time(Time(MS), 1500), Time(2 * MS));
        assert_eq!(s.finish_time(Time(2 * MS), 1500), NEVER);
        assert_eq!(s.capacity_bytes(Time(100 * MS)), 3000);
    }

    #[test]
    fn bad_traces_are_rejected_with_the_field() {
        assert!(trace(&[]).validate("network.trace").unwrap_err().to_string().starts_with("network.trace"));
        assert!(trace(&[3, 2]).validate("t").unwrap_err().to_string().contains("line 2"));
        assert!(trace(&[0, 0]).validate("t").is_err());
    }
}
