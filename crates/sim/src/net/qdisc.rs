//! The bottleneck's queue discipline as a scenario gives it, and the factory
//! that builds it. Every field is optional and defaults to Linux's (tc's)
//! default; the discipline's size limit is always the scenario's
//! `network.buffer` (in bytes or packets).

use super::aqm::codel::{self, Codel, CodelParams};
use super::aqm::dualpi2::{self, DualPi2, DualPi2Params, L4sMask, StepThresh};
use super::aqm::fq_codel::{self, FqCodel};
use super::aqm::pie::{self, Pie, PieParams};
use super::aqm::red::{self, Red, RedParams};
use super::aqm::step::Step;
use super::queue::{DropTail, QueueDisc, QueueLimit};
use crate::config::{ConfigError, Schema};
use crate::rng::Rng;
use crate::units::{Dur, Rate};
use serde::{Deserialize, Serialize};

/// The bottleneck's queue discipline (`tc qdisc`); its size limit is `network.buffer`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Schema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[schema(name = "qdisc")]
pub enum QdiscConfig {
    /// First in, first out; tail drop at the limit (`pfifo`/`bfifo`).
    #[default]
    DropTail,
    /// Random Early Detection (`sch_red`).
    Red(RedConfig),
    /// Controlled Delay (`sch_codel`).
    Codel(CodelConfig),
    /// Flow-queue CoDel (`sch_fq_codel`).
    FqCodel(FqCodelConfig),
    /// Proportional Integral controller Enhanced (`sch_pie`).
    Pie(PieConfig),
    /// DCTCP's step marking: CE on ECN-capable packets while the queue holds more than `threshold`.
    Step(StepConfig),
    /// L4S's coupled dual-queue AQM (`sch_dualpi2`, RFC 9332).
    Dualpi2(DualPi2Config),
}

/// `tc qdisc ... red`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Schema)]
#[serde(default, deny_unknown_fields)]
pub struct RedConfig {
    /// Minimum threshold of the average queue, in bytes or packets (packets:
    /// packet mode). Default: max / 3.
    pub min: Option<QueueLimit>,
    /// Maximum threshold, in the unit of `min`, above min. Default: 3 min, or limit / 4.
    pub max: Option<QueueLimit>,
    /// Drop probability at the maximum threshold (tc `probability`).
    #[schema(gt = 0, max = 1, default = red::DEFAULT_MAX_P)]
    pub max_p: Option<f64>,
    /// Weight of the average (default: tc's 2^-Wlog from `burst`).
    #[schema(gt = 0, max = 1)]
    pub w_q: Option<f64>,
    /// Packets a burst may hold without early drops (tc default (2 min + max) / (3 avpkt)).
    #[schema(min = 1, unit = "packets")]
    pub burst: Option<u32>,
    /// Average packet size (the idle decay and tc's weight).
    #[schema(positive, kind = "bytes", default = red::DEFAULT_AVPKT)]
    pub avpkt: Option<u32>,
    /// Mark ECN-capable packets instead of dropping them.
    pub ecn: bool,
    /// Drop above the maximum threshold even with ECN.
    pub harddrop: bool,
    /// Gentle RED (not in Linux): p rises from max_p to 1 between max and 2 max.
    pub gentle: bool,
}

/// `tc qdisc ... codel`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Schema)]
#[serde(default, deny_unknown_fields)]
pub struct CodelConfig {
    /// Acceptable standing queue delay.
    #[schema(positive, default = codel::DEFAULT_TARGET)]
    pub target: Option<Dur>,
    /// Window over which the queue delay must stay above target before dropping.
    #[schema(positive, default = codel::DEFAULT_INTERVAL)]
    pub interval: Option<Dur>,
    /// Mark instead of drop (Linux default: off).
    #[schema(default = false)]
    pub ecn: Option<bool>,
    /// Mark every packet whose queue delay exceeds this (default: never).
    #[schema(positive)]
    pub ce_threshold: Option<Dur>,
}

/// `tc qdisc ... fq_codel`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Schema)]
#[serde(default, deny_unknown_fields)]
pub struct FqCodelConfig {
    /// Acceptable standing queue delay of each flow queue.
    #[schema(positive, default = codel::DEFAULT_TARGET)]
    pub target: Option<Dur>,
    /// Window over which the queue delay must stay above target before dropping.
    #[schema(positive, default = codel::DEFAULT_INTERVAL)]
    pub interval: Option<Dur>,
    /// Mark instead of drop (Linux default: on).
    #[schema(default = true)]
    pub ecn: Option<bool>,
    /// Mark every packet whose queue delay exceeds this (default: never).
    #[schema(positive)]
    pub ce_threshold: Option<Dur>,
    /// Hash buckets.
    #[schema(min = 1, max = fq_codel::MAX_FLOWS, default = fq_codel::DEFAULT_FLOWS)]
    pub flows: Option<u32>,
    /// DRR quantum.
    #[schema(min = fq_codel::MIN_QUANTUM, kind = "bytes", unit = "bytes", default = fq_codel::DEFAULT_QUANTUM)]
    pub quantum: Option<u32>,
    /// Packets dropped at most per overflow.
    #[schema(positive, default = fq_codel::DEFAULT_DROP_BATCH)]
    pub drop_batch_size: Option<u32>,
}

/// `tc qdisc ... pie`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Schema)]
#[serde(default, deny_unknown_fields)]
pub struct PieConfig {
    /// Target queue delay.
    #[schema(positive, default = pie::DEFAULT_TARGET)]
    pub target: Option<Dur>,
    /// Interval between updates of the drop probability.
    #[schema(positive, default = pie::DEFAULT_TUPDATE)]
    pub tupdate: Option<Dur>,
    /// Weight of the delay's distance from target (RFC 8033's 0.125; tc's `alpha 2` sixteenths; Linux allows 0 to 2).
    #[schema(min = 0, max = 2, unit = "Hz", default = pie::DEFAULT_ALPHA)]
    pub alpha: Option<f64>,
    /// Weight of the delay's change (RFC 8033's 1.25; tc's `beta 20` sixteenths; Linux allows 0 to 2).
    #[schema(min = 0, max = 2, unit = "Hz", default = pie::DEFAULT_BETA)]
    pub beta: Option<f64>,
    /// Mark ECN-capable packets instead of dropping them (below 10 % drop probability).
    pub ecn: bool,
    /// Scale the drop probability by packet size.
    pub bytemode: bool,
    /// Estimate the queue delay from the departure rate instead of timestamps.
    pub dq_rate_estimator: bool,
}

/// A step-marking queue (DCTCP's; on the linux backend `tc qdisc ... red`
/// with min = K, max = K + 1, probability 1 and ECN).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Schema)]
#[serde(deny_unknown_fields)]
pub struct StepConfig {
    /// The marking threshold K of the instantaneous queue, in packets or
    /// bytes (bytes with each packet's Ethernet header, as Linux counts).
    pub threshold: QueueLimit,
}

/// `tc qdisc ... dualpi2`; the limit (packets or bytes) is `network.buffer`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Schema)]
#[serde(default, deny_unknown_fields)]
pub struct DualPi2Config {
    /// Target queue delay of the PI2 controller.
    #[schema(positive, default = dualpi2::DEFAULT_TARGET)]
    pub target: Option<Dur>,
    /// Interval between updates of the base probability.
    #[schema(positive, default = dualpi2::DEFAULT_TUPDATE)]
    pub tupdate: Option<Dur>,
    /// Integral gain (Linux's 41/256 = 0.16 Hz; tc passes 1/256ths, up to 2^31 - 1).
    #[schema(min = 0.00390625, max = 8388607.99, unit = "Hz", default = dualpi2::DEFAULT_ALPHA)]
    pub alpha: Option<f64>,
    /// Proportional gain (Linux's 819/256 = 3.2 Hz).
    #[schema(min = 0.00390625, max = 8388607.99, unit = "Hz", default = dualpi2::DEFAULT_BETA)]
    pub beta: Option<f64>,
    /// The L queue's step threshold as a sojourn time (default 1 ms).
    #[schema(min = 0, default = dualpi2::DEFAULT_STEP_THRESH)]
    pub step_thresh: Option<Dur>,
    /// The step threshold in packets of the L queue instead (tc's `step_thresh Np`).
    #[schema(min = 0, unit = "packets")]
    pub step_packets: Option<u32>,
    /// Apply the step only when the L queue holds at least this many packets.
    #[schema(min = 0, unit = "packets", default = 0)]
    pub min_qlen_step: Option<u32>,
    /// Coupling factor k: p_CL = k p' (p_C = p'^2).
    #[schema(min = 1, max = 255, default = dualpi2::DEFAULT_COUPLING)]
    pub coupling_factor: Option<u32>,
    /// Weight of the classic queue in the scheduler, percent (tc's `c_protection`).
    #[schema(min = 0, max = 100, unit = "%", default = dualpi2::DEFAULT_C_PROTECTION)]
    pub c_protection: Option<u32>,
    /// Drop and mark at enqueue instead of dequeue.
    pub drop_early: bool,
    /// On overload (k p' > 1) let the queues overflow instead of dropping L4S packets.
    pub no_drop_overload: bool,
    /// Classify any ECT packet (ECT(0) too) into the L queue (tc's `any_ect`).
    pub any_ect: bool,
}

fn codel_params(target: Option<Dur>, interval: Option<Dur>, ecn: bool, ce_threshold: Option<Dur>) -> CodelParams {
    let d = CodelParams::default();
    CodelParams { target: target.unwrap_or(d.target), interval: interval.unwrap_or(d.interval), mtu: d.mtu, ecn, ce_threshold }
}

fn amount(l: QueueLimit) -> u64 {
    match l {
        QueueLimit::Bytes(b) => b,
        QueueLimit::Packets(p) => p as u64,
    }
}

/// Resolves RED's thresholds and weight as tc does. The thresholds' unit is
/// the unit of `min`/`max` (or of the limit when neither is given). The
/// fields' own ranges are checked (`QdiscConfig::validate`); this checks
/// what depends on several fields and the limit.
pub fn red_params(c: &RedConfig, limit: QueueLimit) -> Result<RedParams, ConfigError> {
    let packet_mode = match (c.min, c.max) {
        (Some(QueueLimit::Bytes(_)), Some(QueueLimit::Packets(_))) | (Some(QueueLimit::Packets(_)), Some(QueueLimit::Bytes(_))) => {
            return Err(ConfigError::new("max", "must be in the unit of min (both bytes or both packets)"));
        }
        (Some(m), _) | (None, Some(m)) => matches!(m, QueueLimit::Packets(_)),
        (None, None) => matches!(limit, QueueLimit::Packets(_)),
    };
    let limit_amount = match (limit, packet_mode) {
        (QueueLimit::Packets(p), true) => p as u64,
        (QueueLimit::Bytes(b), false) => b,
        (QueueLimit::Packets(p), false) => p as u64 * 1514,
        (QueueLimit::Bytes(b), true) => b / 1500,
    };
    let (min, max) = red::default_thresholds(c.min.map(amount), c.max.map(amount), limit_amount);
    if max <= min {
        return Err(ConfigError::new("max", format!("must be above min ({min}), got {max}")));
    }
    let max_p = c.max_p.unwrap_or(red::DEFAULT_MAX_P);
    let avpkt = c.avpkt.unwrap_or(red::DEFAULT_AVPKT);
    // tc works in bytes; in packet mode a packet counts as avpkt bytes.
    let unit = if packet_mode { avpkt as f64 } else { 1.0 };
    let (min_b, max_b) = (min as f64 * unit, max as f64 * unit);
    let w_q = match c.w_q {
        Some(w) => w,
        None => {
            let burst = c.burst.unwrap_or_else(|| red::default_burst(min_b, max_b, avpkt));
            red::ewma_weight(min_b, burst, avpkt).ok_or_else(|| {
                ConfigError::new(
                    "burst",
                    format!(
                        "{burst} packets is too small for min ({min}); tc needs burst > min / avpkt, e.g. {}",
                        1 + (min_b / avpkt as f64) as u64
                    ),
                )
            })?
        }
    };
    Ok(RedParams { packet_mode, min: min as f64, max: max as f64, max_p, w_q, avpkt, ecn: c.ecn, harddrop: c.harddrop, gentle: c.gentle })
}

impl QdiscConfig {
    pub fn kind(&self) -> &'static str {
        match self {
            QdiscConfig::DropTail => "drop_tail",
            QdiscConfig::Red(_) => "red",
            QdiscConfig::Codel(_) => "codel",
            QdiscConfig::FqCodel(_) => "fq_codel",
            QdiscConfig::Pie(_) => "pie",
            QdiscConfig::Step(_) => "step",
            QdiscConfig::Dualpi2(_) => "dualpi2",
        }
    }

    /// Checks the parameters; errors name the field within `field`.
    pub fn validate(&self, limit: QueueLimit, field: &str) -> Result<(), ConfigError> {
        self.check_fields().and_then(|()| self.check_limit(limit)).map_err(|e| e.within(field))
    }

    /// Checks what depends on several fields and the size limit (RED's
    /// thresholds); the fields' own ranges are declared on them.
    pub fn check_limit(&self, limit: QueueLimit) -> Result<(), ConfigError> {
        match self {
            QdiscConfig::Red(c) => red_params(c, limit).map(|_| ()),
            QdiscConfig::Step(c) if amount(c.threshold) == 0 => {
                Err(ConfigError::new("threshold", "must be at least one packet or byte"))
            }
            QdiscConfig::Dualpi2(c) if c.step_thresh.is_some() && c.step_packets.is_some() => {
                Err(ConfigError::new("step_packets", "give the step threshold as step_thresh (a time) or step_packets, not both"))
            }
            _ => Ok(()),
        }
    }
}

/// DualPI2's parameters with Linux's defaults for what `c` leaves out.
pub fn dualpi2_params(c: &DualPi2Config) -> DualPi2Params {
    let d = DualPi2Params::default();
    DualPi2Params {
        target: c.target.unwrap_or(d.target),
        tupdate: c.tupdate.unwrap_or(d.tupdate),
        alpha: c.alpha.unwrap_or(d.alpha),
        beta: c.beta.unwrap_or(d.beta),
        step: match (c.step_packets, c.step_thresh) {
            (Some(n), _) => StepThresh::Packets(n),
            (None, Some(t)) => StepThresh::Time(t),
            (None, None) => d.step,
        },
        min_qlen_step: c.min_qlen_step.unwrap_or(d.min_qlen_step),
        coupling_factor: c.coupling_factor.map_or(d.coupling_factor, |k| k as u8),
        c_protection: c.c_protection.map_or(d.c_protection, |w| w as u8),
        drop_early: c.drop_early,
        drop_overload: !c.no_drop_overload,
        ecn_mask: if c.any_ect { L4sMask::AnyEct } else { L4sMask::L4sEct },
    }
}

/// Builds the discipline of a bottleneck of rate `rate` whose size limit is
/// `limit`; `rng` is the stream of its random draws (RED, PIE, FQ-CoDel's hash
/// key). `cfg` has been checked (`validate`).
pub fn build_qdisc(cfg: &QdiscConfig, limit: QueueLimit, rate: Rate, mut rng: Rng) -> Box<dyn QueueDisc> {
    match cfg {
        QdiscConfig::DropTail => Box::new(DropTail::new(limit)),
        QdiscConfig::Red(c) => Box::new(Red::new(red_params(c, limit).expect("checked by validate"), limit, rate, rng)),
        QdiscConfig::Codel(c) => Box::new(Codel::new(codel_params(c.target, c.interval, c.ecn.unwrap_or(false), c.ce_threshold), limit)),
        QdiscConfig::FqCodel(c) => {
            let params = codel_params(c.target, c.interval, c.ecn.unwrap_or(true), c.ce_threshold);
            let flows = c.flows.unwrap_or(fq_codel::DEFAULT_FLOWS);
            let quantum = c.quantum.unwrap_or(fq_codel::DEFAULT_QUANTUM);
            let batch = c.drop_batch_size.unwrap_or(fq_codel::DEFAULT_DROP_BATCH);
            Box::new(FqCodel::new(params, limit, flows, quantum, batch, rng.next_u64()))
        }
        QdiscConfig::Pie(c) => {
            let d = PieParams::default();
            let p = PieParams {
                target: c.target.unwrap_or(d.target),
                tupdate: c.tupdate.unwrap_or(d.tupdate),
                alpha: c.alpha.unwrap_or(pie::DEFAULT_ALPHA),
                beta: c.beta.unwrap_or(pie::DEFAULT_BETA),
                ecn: c.ecn,
                bytemode: c.bytemode,
                dq_rate_estimator: c.dq_rate_estimator,
            };
            Box::new(Pie::new(p, limit, rng))
        }
        QdiscConfig::Step(c) => Box::new(Step::new(c.threshold, limit)),
        QdiscConfig::Dualpi2(c) => Box::new(DualPi2::new(dualpi2_params(c), limit, rng)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<QdiscConfig, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn configs_deserialise_with_linux_defaults() {
        assert_eq!(parse(r#"{"kind": "drop_tail"}"#).unwrap(), QdiscConfig::DropTail);
        assert_eq!(parse(r#"{"kind": "codel"}"#).unwrap(), QdiscConfig::Codel(CodelConfig::default()));
        let red = parse(r#"{"kind": "red", "min": {"packets": 30}, "max": {"packets": 90}, "max_p": 0.1, "ecn": true}"#).unwrap();
        let QdiscConfig::Red(c) = &red else { panic!() };
        let p = red_params(c, QueueLimit::Packets(1000)).unwrap();
        assert!(p.packet_mode && p.min == 30.0 && p.max == 90.0 && p.max_p == 0.1 && p.ecn);
        assert!(parse(r#"{"kind": "codel", "targt": 5}"#).unwrap_err().contains("unknown field"));
        assert!(parse(r#"{"kind": "blue"}"#).is_err());
        let step = parse(r#"{"kind": "step", "threshold": {"packets": 20}}"#).unwrap();
        assert_eq!(step, QdiscConfig::Step(StepConfig { threshold: QueueLimit::Packets(20) }));
        assert_eq!(build_qdisc(&step, QueueLimit::Packets(100), Rate::from_mbps(100), Rng::stream(1, "q")).stats().kind, "step");
        assert!(parse(r#"{"kind": "step"}"#).unwrap_err().contains("missing field `threshold`"));
        for kind in ["red", "codel", "fq_codel", "pie", "drop_tail", "dualpi2"] {
            let c = parse(&format!(r#"{{"kind": "{kind}"}}"#)).unwrap();
            assert_eq!(c.kind(), kind);
            let q = build_qdisc(&c, QueueLimit::Packets(1000), Rate::from_mbps(100), Rng::stream(1, "q"));
            assert_eq!(q.stats().kind, kind);
        }
    }

    #[test]
    fn red_defaults_follow_tc() {
        // limit 400 KB, nothing else: max = 100 KB, min = 33.3 KB, bytes.
        let p = red_params(&RedConfig::default(), QueueLimit::Bytes(400_000)).unwrap();
        assert!(!p.packet_mode);
        assert_eq!((p.min, p.max, p.max_p), (33_333.0, 100_000.0, 0.02));
        // A packet limit gives packet thresholds: 1000p -> 83p / 250p.
        let p = red_params(&RedConfig::default(), QueueLimit::Packets(1000)).unwrap();
        assert!(p.packet_mode);
        assert_eq!((p.min, p.max), (83.0, 250.0));
    }

    #[test]
    fn errors_name_the_field() {
        let bad = |c: QdiscConfig| c.validate(QueueLimit::Packets(1000), "network.qdisc").err().unwrap().to_string();
        let red = |f: fn(&mut RedConfig)| {
            let mut c = RedConfig::default();
            f(&mut c);
            QdiscConfig::Red(c)
        };
        assert!(bad(red(|c| c.max_p = Some(1.5))).starts_with("network.qdisc.max_p:"));
        assert!(bad(red(|c| {
            c.min = Some(QueueLimit::Packets(50));
            c.max = Some(QueueLimit::Packets(40));
        }))
        .starts_with("network.qdisc.max:"));
        assert!(bad(red(|c| {
            c.min = Some(QueueLimit::Packets(50));
            c.max = Some(QueueLimit::Bytes(400_000));
        }))
        .contains("unit of min"));
        assert!(bad(red(|c| {
            c.min = Some(QueueLimit::Bytes(30_000));
            c.max = Some(QueueLimit::Bytes(90_000));
            c.burst = Some(5);
        }))
        .starts_with("network.qdisc.burst:"));
        assert!(bad(red(|c| c.w_q = Some(0.0))).starts_with("network.qdisc.w_q:"));
        assert!(bad(QdiscConfig::Codel(CodelConfig { target: Some(Dur(0)), ..Default::default() })).starts_with("network.qdisc.target:"));
        assert!(bad(QdiscConfig::FqCodel(FqCodelConfig { flows: Some(0), ..Default::default() })).starts_with("network.qdisc.flows:"));
        assert!(bad(QdiscConfig::FqCodel(FqCodelConfig { quantum: Some(100), ..Default::default() })).starts_with("network.qdisc.quantum:"));
        assert!(bad(QdiscConfig::Pie(PieConfig { beta: Some(3.0), ..Default::default() })).starts_with("network.qdisc.beta:"));
        assert!(bad(QdiscConfig::Pie(PieConfig { tupdate: Some(Dur(0)), ..Default::default() })).starts_with("network.qdisc.tupdate:"));
        assert!(bad(QdiscConfig::Step(StepConfig { threshold: QueueLimit::Bytes(0) })).starts_with("network.qdisc.threshold:"));
        let dq = |f: fn(&mut DualPi2Config)| {
            let mut c = DualPi2Config::default();
            f(&mut c);
            QdiscConfig::Dualpi2(c)
        };
        assert!(bad(dq(|c| c.coupling_factor = Some(0))).starts_with("network.qdisc.coupling_factor:"));
        assert!(bad(dq(|c| c.c_protection = Some(101))).starts_with("network.qdisc.c_protection:"));
        assert!(bad(dq(|c| c.alpha = Some(0.0))).starts_with("network.qdisc.alpha:"));
        assert!(bad(dq(|c| c.tupdate = Some(Dur(0)))).starts_with("network.qdisc.tupdate:"));
        assert!(bad(dq(|c| {
            c.step_thresh = Some(Dur(1));
            c.step_packets = Some(5);
        }))
        .starts_with("network.qdisc.step_packets:"));
    }
}
