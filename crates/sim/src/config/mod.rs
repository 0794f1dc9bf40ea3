//! The engine's input: a fully resolved scenario in engine units (nanoseconds,
//! bits per second, bytes), one entry per flow. Parsing human units, defaults
//! and friendly error messages belong to the layer above; this module only
//! re-checks what the engine relies on, so that a bad value can never panic.

mod error;
pub mod schema;

pub use error::ConfigError;
pub use schema::Schema;

use crate::cc::ParamValue;
use crate::dist::Dist;
use crate::host::HostConfig;
use crate::rng::Rng;
use crate::net::delay_line::JitterConfig;
use crate::net::dynamics::DynamicsConfig;
use crate::net::loss::LossSpec;
use crate::net::qdisc::QdiscConfig;
use crate::net::queue::QueueLimit;
use crate::net::stall::{default_router_stalls, StallConfig};
use crate::net::trace::TraceConfig;
use crate::tcp::TcpConfig;
use crate::traffic::udp::UdpConfig;
use crate::traffic::web::WebConfig;
use crate::traffic::Direction;
use crate::units::{Dur, Rate, Time};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The dumbbell's shared bottleneck and the hosts' access links.
#[derive(Clone, Debug, Serialize, Deserialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(name = "network", rules = NetworkConfig::rules)]
pub struct NetworkConfig {
    /// Rate of the shared bottleneck link.
    #[schema(positive)]
    pub bottleneck_rate: Rate,
    /// Size limit of the bottleneck queue, at least one packet.
    pub buffer: QueueLimit,
    /// Random loss of packets arriving at the bottleneck (forward direction).
    #[serde(default = "LossSpec::none")]
    pub loss: LossSpec,
    /// Rate of every host's access link (default: 10 x the bottleneck).
    #[serde(default)]
    #[schema(positive)]
    pub access_rate: Option<Rate>,
    /// Queue discipline of the bottleneck (default: drop-tail); its size limit
    /// is `buffer`.
    #[serde(default)]
    pub qdisc: QdiscConfig,
    /// Give the reverse direction its own bottleneck (same rate, buffer and
    /// discipline) even without reverse traffic, so ACKs queue behind each
    /// other. It is always built when some traffic runs in reverse.
    #[serde(default)]
    pub reverse_bottleneck: bool,
    /// Scheduled changes of the forward bottleneck (rate, delay, loss).
    #[serde(default)]
    pub dynamics: Vec<DynamicsConfig>,
    /// Serve the forward bottleneck from a delivery-opportunity trace
    /// (Mahimahi format) instead of at `bottleneck_rate`.
    #[serde(default)]
    pub trace: Option<TraceConfig>,
    /// What the bottleneck is: a Linux router (tbf: a sender's super-packet
    /// that fits the token bucket is queued, dropped and delivered whole) or
    /// a switch that queues packets.
    #[serde(default)]
    pub router: RouterKind,
    /// A Linux router's token bucket (tbf `burst`): super-packets larger than
    /// this are split into segments (default: 2 full frames or 1 ms at the
    /// rate, whichever is larger, as the linux backend sets it).
    #[serde(default)]
    #[schema(min = 1514, kind = "bytes", unit = "bytes")]
    pub router_burst: Option<u64>,
    /// How late each packet on a flow's return (ACK) leg arrives beyond the
    /// leg's fixed delay, in nanoseconds: drawn per packet, never reordering
    /// (a packet leaves no earlier than the one ahead of it, so a late draw
    /// holds back those behind it). It stands for the return path's own
    /// timing noise between the bottleneck and the sender: the receiving
    /// host's stack, the delay emulator's timers and the CPUs' scheduling.
    /// That noise decides which flow a full drop-tail queue turns away, and
    /// without it flows of equal RTT lock into unequal shares
    /// (docs/fidelity.md). Default: the body of the linux backend's noise as
    /// measured end to end, per flow (`default_delay_noise`); its long
    /// delays, which hit every flow together, are `return_stalls`; None:
    /// exact delays.
    #[serde(default = "default_delay_noise")]
    pub delay_noise: Option<Dist>,
    /// When a Linux router's qdisc stops releasing packets, and for how
    /// long: its CPU busy with other work (net/stall.rs). The queue keeps
    /// filling meanwhile, and an overflow during a stall turns away several
    /// skbs of both flows of a pair, where without stalls one skb of one
    /// flow goes and flows of equal RTT lock into unequal shares
    /// (docs/fidelity.md). Default: the linux backend's, as measured on this
    /// project's machine kind; None: a router that never stalls. Ignored by
    /// a switch.
    #[serde(default = "default_router_stalls")]
    pub router_stalls: Option<StallConfig>,
    /// When the return path passes no ACK of any flow, and for how long: the
    /// CPUs that run the receivers, the right router and the delay emulator
    /// busy elsewhere (net/stall.rs). Every flow's ACKs wait for the same
    /// stall's end and reach their senders together, on top of each flow's
    /// own `delay_noise`. Default: the linux backend's, measured
    /// (`net::stall::measured_return_stalls`: the tail of its return path's
    /// noise, which hits both flows of a pair together); None: each flow's
    /// ACKs see `delay_noise` alone. Applies to the long-lived flows' return
    /// legs, where `delay_noise` applies.
    #[serde(default = "default_return_stalls")]
    pub return_stalls: Option<StallConfig>,
}

/// The body of the linux backend's return-path noise, per flow: its whole
/// return path measured end to end on its two-flow runs at 400 Mbit/s and 1
/// Gbit/s (2026-11-26, `tools/kernel_host_timing.py`,
/// `return_path_noise_us`: p10 20-47 us, p50 48-104 us, p90 118-189 us),
/// drawn as a lognormal of median 60 us and sigma 0.55. Its tail (p99
/// 0.65-1.2 ms, p99.9 1.9-4.9 ms) hits every flow together and is drawn as
/// the return path's stalls (`default_return_stalls`). The same body fits
/// the loop measured less the receivers' wait for their reads (p10 33 us,
/// p25 45, p50 62, p75 92: the lognormal's 30, 41, 60, 87), so it holds
/// whether `hosts.app_reads` draws that wait at the receivers or not.
pub const RETURN_NOISE_MEDIAN_NS: f64 = 60_000.0;
pub const RETURN_NOISE_SIGMA: f64 = 0.55;

pub fn default_delay_noise() -> Option<Dist> {
    Some(Dist::Lognormal { mu: RETURN_NOISE_MEDIAN_NS.ln(), sigma: RETURN_NOISE_SIGMA })
}

/// The return path's measured stalls (net/stall.rs), shared by every flow.
pub fn default_return_stalls() -> Option<StallConfig> {
    Some(crate::net::stall::measured_return_stalls())
}

/// A full-size packet as tbf counts it: 1500-byte IP packet + 14-byte
/// Ethernet header (the linux backend's `FRAME_BYTES`).
const FRAME_BYTES: u64 = 1514;

/// The kind of device at the bottleneck.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, Schema)]
#[serde(rename_all = "snake_case")]
pub enum RouterKind {
    /// A Linux router shaping with tbf: it queues what the sending host's
    /// stack built (GSO super-packets whole, when they fit its bucket).
    #[default]
    Linux,
    /// A hardware switch: every segment is a packet of its own.
    Switch,
}

impl NetworkConfig {
    /// The tbf bucket of a Linux router at this bottleneck (None: a switch).
    pub fn gso_burst(&self) -> Option<u64> {
        match self.router {
            RouterKind::Switch => None,
            RouterKind::Linux => Some(self.router_burst.unwrap_or((2 * FRAME_BYTES).max(self.bottleneck_rate.0 / 8 / 1000))),
        }
    }
}

impl NetworkConfig {
    /// Checks across fields (the ranges are declared on the fields).
    fn rules(&self) -> Result<(), ConfigError> {
        match self.buffer {
            QueueLimit::Bytes(0) | QueueLimit::Packets(0) => {
                return Err(ConfigError::new("buffer", "must hold at least one packet"));
            }
            _ => {}
        }
        self.qdisc.check_limit(self.buffer).map_err(|e| e.within("qdisc"))?;
        if self.trace.is_some() {
            if let Some(i) = self.dynamics.iter().position(DynamicsConfig::changes_rate) {
                return Err(ConfigError::new(
                    format!("dynamics[{i}]"),
                    "a trace-driven bottleneck takes its rate from the trace; change delay or loss only",
                ));
            }
        }
        Ok(())
    }
}

/// A long-lived (or sized) TCP flow between a sender and a receiver host.
#[derive(Clone, Debug, Serialize, Deserialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(name = "flow", rules = FlowConfig::rules)]
pub struct FlowConfig {
    /// Congestion control algorithm (a name from the algorithm catalogue).
    pub cca: String,
    /// The algorithm's parameters (the catalogue lists them with their ranges).
    #[serde(default)]
    pub cca_params: BTreeMap<String, ParamValue>,
    /// Two-way propagation delay of the flow's path: nanoseconds, or a
    /// distribution of nanoseconds drawn once per flow when the run is built.
    #[schema(positive)]
    pub rtt: FlowRtt,
    /// When the connection opens (SYN).
    #[serde(default)]
    pub start: Time,
    /// When the application stops writing (default: never); after start.
    #[serde(default)]
    pub stop: Option<Time>,
    /// Bytes to transfer (default: unlimited, a bulk flow).
    #[serde(default)]
    #[schema(positive, kind = "bytes")]
    pub size: Option<u64>,
    /// TCP settings of both endpoints.
    #[serde(default)]
    pub tcp: TcpConfig,
    /// A label for reports (e.g. the flow group's name).
    #[serde(default)]
    pub label: String,
    /// Which way the data crosses the dumbbell.
    #[serde(default)]
    pub direction: Direction,
    /// Delay variation on the data direction's propagation leg (netem-like):
    /// around half of `rtt` plus `data_delay`.
    #[serde(default)]
    pub jitter: Option<JitterConfig>,
    /// Extra one-way delay on the data direction only (netem on the egress
    /// towards the receiver, as in the CUBIC evaluation's testbed), added to
    /// the data leg's half of `rtt`; ACKs return without it.
    #[serde(default, skip_serializing_if = "Dur::is_zero")]
    #[schema(max = 10_000_000_000u64, kind = "duration_ns")]
    pub data_delay: Dur,
    /// How the connection starts: the data connection's SYN at `start`, or
    /// as an iperf3 client starts a test launched at `start`.
    #[serde(default, skip_serializing_if = "Startup::is_immediate")]
    pub startup: Startup,
    /// Background traffic: counted in link utilisation, left out of fairness.
    #[serde(default)]
    pub background: bool,
}

impl FlowConfig {
    /// Checks across fields (the ranges are declared on the fields).
    fn rules(&self) -> Result<(), ConfigError> {
        if let Some(stop) = self.stop {
            if stop <= self.start {
                return Err(ConfigError::new("stop", "must be after start"));
            }
        }
        Ok(())
    }
}

/// How a flow's connection starts (`FlowConfig::startup`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, Schema)]
#[serde(rename_all = "snake_case")]
pub enum Startup {
    /// The data connection's SYN leaves at the flow's start.
    #[default]
    Immediate,
    /// As an iperf3 client (3.x) starts a test launched at the flow's start:
    /// its control connection's handshake, cookie and PARAM_EXCHANGE,
    /// parameters and CREATE_STREAMS, then the data connection's handshake,
    /// its cookie and TEST_START/TEST_RUNNING, then data: five round trips
    /// on an idle path (measured: 5.1-5.4 RTTs, docs/fidelity.md). The
    /// messages are packets on the flow's path, so they queue and may be
    /// dropped like any other (traffic/iperf3.rs).
    Iperf3,
}

impl Startup {
    pub fn is_immediate(&self) -> bool {
        *self == Startup::Immediate
    }
}

/// A flow's two-way propagation delay: fixed (a number of nanoseconds in
/// JSON), or drawn from a distribution (a `Dist` table) when the run is built;
/// see `SimConfig::flow_rtts`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FlowRtt {
    Fixed(Dur),
    Drawn(Dist),
}

impl From<Dur> for FlowRtt {
    fn from(d: Dur) -> FlowRtt {
        FlowRtt::Fixed(d)
    }
}

impl<'de> Deserialize<'de> for FlowRtt {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<FlowRtt, D::Error> {
        use serde::de::Error;
        let v = serde_json::Value::deserialize(d)?;
        if v.is_object() {
            Dist::deserialize(v).map(FlowRtt::Drawn).map_err(D::Error::custom)
        } else {
            u64::deserialize(v)
                .map(|ns| FlowRtt::Fixed(Dur(ns)))
                .map_err(|e| D::Error::custom(format!("{e}; expected nanoseconds or a distribution")))
        }
    }
}

impl schema::FieldType for FlowRtt {
    fn describe() -> schema::TypeInfo {
        schema::TypeInfo { table: Some(<Dist as Schema>::NAME), ..schema::TypeInfo::of("duration_ns") }
    }

    fn collect(tables: &mut schema::Tables) {
        <Dist as schema::FieldType>::collect(tables)
    }

    fn check_nested(&self) -> Result<(), ConfigError> {
        match self {
            FlowRtt::Fixed(_) => Ok(()),
            FlowRtt::Drawn(d) => d.check_fields(),
        }
    }
}

impl schema::Measure for FlowRtt {
    fn measure(&self) -> Option<schema::Num> {
        match self {
            FlowRtt::Fixed(d) => d.measure(),
            FlowRtt::Drawn(_) => None,
        }
    }
}

/// How long the run lasts, what it measures, and its seed.
#[derive(Clone, Debug, Serialize, Deserialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(name = "run", rules = RunConfig::rules)]
pub struct RunConfig {
    /// Simulated time of the run.
    #[schema(positive)]
    pub duration: Dur,
    /// Start of the measurement window (shorter than duration).
    #[serde(default)]
    pub warmup: Dur,
    /// Seed of every random stream of the run (the scenario language's default, 1).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Interval of the sampled time series.
    #[serde(default = "default_sample_interval")]
    #[schema(positive)]
    pub sample_interval: Dur,
    /// Each flow's start is delayed by a uniform random amount in [0, start_jitter)
    /// drawn from the run's "start-jitter" stream, so that repetitions with
    /// different seeds differ as testbed runs do (their flows never start in the
    /// same microsecond).
    #[serde(default)]
    pub start_jitter: Dur,
}

fn default_seed() -> u64 {
    1
}

fn default_sample_interval() -> Dur {
    Dur::from_ms(100)
}

impl RunConfig {
    /// Checks across fields (the ranges are declared on the fields).
    fn rules(&self) -> Result<(), ConfigError> {
        if self.warmup >= self.duration {
            return Err(ConfigError::new("warmup", "must be shorter than run.duration"));
        }
        Ok(())
    }
}

/// The engine's input: a fully resolved scenario.
#[derive(Clone, Debug, Serialize, Deserialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(name = "config")]
pub struct SimConfig {
    /// The bottleneck, access links, path changes.
    pub network: NetworkConfig,
    /// TCP flows, one entry per flow.
    #[serde(default)]
    pub flows: Vec<FlowConfig>,
    /// Unresponsive UDP sources.
    #[serde(default)]
    pub udp: Vec<UdpConfig>,
    /// Web-like short-flow generators.
    #[serde(default)]
    pub web: Vec<WebConfig>,
    /// Duration, measurement window, seed.
    pub run: RunConfig,
    /// How the end hosts send and receive (offloads, batching).
    #[serde(default)]
    pub hosts: HostConfig,
}

/// Sequence numbers are 32-bit segment counts; a flow must not wrap them (the
/// top of the range is kept free for sentinels).
const MAX_SEGMENTS: u128 = (u32::MAX - (1 << 24)) as u128;

impl SimConfig {
    /// Whether the run needs a reverse bottleneck.
    pub fn has_reverse_traffic(&self) -> bool {
        self.network.reverse_bottleneck
            || self.flows.iter().any(|f| f.direction == Direction::Reverse)
            || self.udp.iter().any(|u| u.direction == Direction::Reverse)
            || self.web.iter().any(|w| w.direction == Direction::Reverse)
    }

    /// The two-way propagation delay of each flow: a fixed one as given, a
    /// drawn one from the run's `flow-rtt` stream, one draw per such flow in
    /// flow order (so flows with fixed RTTs do not move the others' draws),
    /// rounded to the nanosecond and raised to 1 µs as web flows' are.
    pub fn flow_rtts(&self) -> Vec<Dur> {
        let mut rng = Rng::stream(self.run.seed, "flow-rtt");
        let draw = |r: &FlowRtt, rng: &mut Rng| match r {
            FlowRtt::Fixed(d) => *d,
            FlowRtt::Drawn(dist) => crate::traffic::draw_rtt(dist, rng),
        };
        self.flows.iter().map(|f| draw(&f.rtt, &mut rng)).collect()
    }

    /// When each flow starts: its `start`, plus with `run.start_jitter` a
    /// uniform draw from [0, start_jitter) of the run's `start-jitter`
    /// stream, one per flow in flow order. The linux backend launches its
    /// flows at the same instants, so both backends start a seed's flows
    /// alike.
    pub fn flow_starts(&self) -> Vec<Time> {
        let mut rng = Rng::stream(self.run.seed, "start-jitter");
        let jitter = self.run.start_jitter.0;
        self.flows.iter().map(|f| f.start + Dur(if jitter > 0 { rng.below(jitter) } else { 0 })).collect()
    }

    /// Checks everything the engine assumes. Errors name the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_with(&[])
    }

    /// Like `validate`, also accepting the algorithm names in `external` (algorithms
    /// supplied by the caller through a `CcaFactory`, whose parameters it checks).
    pub fn validate_with(&self, external: &[String]) -> Result<(), ConfigError> {
        // Every declared range and each table's checks across its fields.
        self.check_fields()?;
        if self.flows.is_empty() && self.udp.is_empty() && self.web.is_empty() {
            return Err(ConfigError::new("flows", "at least one flow (or a udp source or web generator) is required"));
        }
        for (i, w) in self.web.iter().enumerate() {
            if !external.iter().any(|n| n == &w.cca) {
                crate::cc::make_cca(&w.cca, &w.cca_params).map_err(|e| ConfigError::parse(&e).within(&format!("web[{i}]")))?;
            }
        }
        let (n, r) = (&self.network, &self.run);
        // New data cannot run ahead of delivery by more than a window, and delivery
        // is bounded by the bottleneck.
        let trace_rate = n.trace.as_ref().map_or(0, |t| {
            // The busiest millisecond bounds what a trace can carry.
            let ms = &t.opportunities_ms;
            let peak = ms.chunk_by(|a, b| a == b).map(|c| c.len()).max().unwrap_or(0) as u64;
            peak * t.bytes_per_opportunity as u64 * 8 * 1000
        });
        let max_rate = n.dynamics.iter().map(|d| d.max_rate()).fold(n.bottleneck_rate.0.max(trace_rate), u64::max) as u128;
        for (i, f) in self.flows.iter().enumerate() {
            let within = |e: ConfigError| e.within(&format!("flows[{i}]"));
            if !external.iter().any(|n| n == &f.cca) {
                crate::cc::make_cca(&f.cca, &f.cca_params).map_err(|e| within(ConfigError::parse(&e)))?;
            }
            let window = (f.tcp.sndbuf.min(f.tcp.rcvbuf) / f.tcp.mss as u64) as u128;
            let segs = max_rate * r.duration.0 as u128 / 8 / 1_000_000_000 / f.tcp.mss as u128 + window;
            if segs > MAX_SEGMENTS {
                return Err(within(ConfigError::new(
                    "",
                    format!(
                        "the run could send {segs} segments, more than the engine's 32-bit sequence space allows ({MAX_SEGMENTS}); shorten run.duration"
                    ),
                )));
            }
        }
        Ok(())
    }
}
