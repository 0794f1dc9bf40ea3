//! Scenario builders shared by the integration tests.
#![allow(dead_code)]

use ccarena_sim::config::{FlowConfig, NetworkConfig, RunConfig, SimConfig};
use ccarena_sim::net::loss::LossSpec;
use ccarena_sim::net::qdisc::QdiscConfig;
use ccarena_sim::net::queue::QueueLimit;
use ccarena_sim::tcp::TcpConfig;
use ccarena_sim::units::{Dur, Rate, Time};
use ccarena_sim::{RunResult, Simulation};
use std::collections::BTreeMap;

pub fn flow(cca: &str, rtt_ms: u64) -> FlowConfig {
    FlowConfig {
        cca: cca.to_string(),
        cca_params: BTreeMap::new(),
        rtt: Dur::from_ms(rtt_ms).into(),
        start: Time::ZERO,
        stop: None,
        size: None,
        tcp: TcpConfig::default(),
        label: String::new(),
        direction: Default::default(),
        jitter: None,
        data_delay: Dur::ZERO,
        startup: Default::default(),
        background: false,
    }
}

pub fn scenario(rate_mbps: u64, buffer: QueueLimit, loss: LossSpec, flows: Vec<FlowConfig>, secs: u64, warmup: u64, seed: u64) -> SimConfig {
    SimConfig {
        network: NetworkConfig {
            bottleneck_rate: Rate::from_mbps(rate_mbps),
            buffer,
            loss,
            access_rate: None,
            reverse_bottleneck: false,
            dynamics: Vec::new(),
            qdisc: QdiscConfig::DropTail,
            trace: None,
            // The analytical checks model packets, not a Linux router's skbs.
            router: ccarena_sim::config::RouterKind::Switch,
            router_burst: None,
            // The analytical checks keep exact delays.
            delay_noise: None,
            router_stalls: None,
            return_stalls: None,
        },
        flows,
        udp: Vec::new(),
        web: Vec::new(),
        run: RunConfig { duration: Dur::from_secs(secs), warmup: Dur::from_secs(warmup), seed, sample_interval: Dur::from_ms(100), start_jitter: Dur::ZERO },
        hosts: ccarena_sim::host::HostConfig::clockwork(),
    }
}

/// Bandwidth-delay product in bytes of wire packets.
pub fn bdp_bytes(rate_mbps: u64, rtt_ms: u64) -> u64 {
    rate_mbps * 1_000_000 / 8 * rtt_ms / 1000
}

pub fn run(cfg: SimConfig) -> RunResult {
    let r = Simulation::new(cfg).expect("valid scenario").run();
    assert!(r.invariant_violations.is_empty(), "invariants: {:?}", r.invariant_violations);
    r
}

/// Goodput of flow `i` over its measurement window, bit/s.
pub fn goodput_bps(r: &RunResult, i: usize) -> f64 {
    let f = &r.flows[i];
    let bytes = f.counters.delivered_at_window_end - f.counters.delivered_at_window_start;
    bytes as f64 * 8.0 / ((f.window_end_ns - f.window_start_ns) as f64 / 1e9)
}

pub fn iid(p: f64) -> LossSpec {
    LossSpec::Bernoulli { p }
}

pub fn periodic(p: f64) -> LossSpec {
    LossSpec::Periodic { p }
}
