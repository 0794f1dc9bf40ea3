//! ccarena's engine: a packet-level discrete-event simulator of TCP senders and
//! receivers that behave like Linux, competing over a dumbbell network.
//!
//! Data flows one way: a [`config::SimConfig`] (engine units, fully resolved)
//! goes into [`sim::Simulation`], which returns a [`sim::RunResult`] of raw
//! records (per-flow counters and sampled time series). The engine reads no
//! files, prints nothing and knows nothing of Python; metrics, storage and
//! figures are built on top of its records.

pub mod cc;
pub mod config;
pub mod dist;
pub mod event;
pub mod host;
pub mod minmax;
pub mod net;
pub mod packet;
pub mod records;
pub mod rng;
pub mod sim;
pub mod tcp;
pub mod traffic;
pub mod units;

pub use cc::CcaFactory;
pub use config::{ConfigError, FlowConfig, NetworkConfig, RunConfig, SimConfig};
pub use sim::{FlowResult, LinkResult, RunResult, Simulation, UdpResult, WebResult};

/// Runs a scenario to completion.
pub fn run(cfg: SimConfig) -> Result<RunResult, ConfigError> {
    Ok(Simulation::new(cfg)?.run())
}
