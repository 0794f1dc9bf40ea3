//! Traffic that shares the bottleneck with the flows under study: unresponsive
//! UDP sources (constant bit rate, Poisson, on-off) and web-like short TCP
//! flows (Poisson arrivals at a target offered load, SURGE sizes, per-flow RTTs
//! from a distribution). Long-lived background TCP flows are ordinary flows
//! with `background` set. This module decides *when* packets or flows appear;
//! the simulation moves them.

pub mod iperf3;
pub mod udp;
pub mod web;

use crate::config::Schema;
use crate::dist::Dist;
use crate::rng::Rng;
use crate::units::Dur;
use serde::{Deserialize, Serialize};

/// Shortest RTT a drawn value is raised to (an exponential can draw ~0).
pub const MIN_RTT: Dur = Dur(1_000);

/// One RTT from `dist` (in ns), rounded to the nanosecond and raised to `MIN_RTT`.
pub fn draw_rtt(dist: &Dist, rng: &mut Rng) -> Dur {
    Dur((dist.sample(rng).round() as u64).max(MIN_RTT.0))
}

/// Which way a flow's data crosses the dumbbell. Reverse traffic uses the
/// reverse bottleneck for its data and sends its ACKs through the forward one,
/// so it shares the ACK path of forward flows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, Schema)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Data crosses the forward bottleneck, ACKs come back (through the reverse one, if built).
    #[default]
    Forward,
    /// Data crosses the reverse bottleneck, ACKs the forward one.
    Reverse,
}

impl Direction {
    /// Index of the bottleneck link the data crosses (0 forward, 1 reverse).
    pub fn data_link(self) -> u32 {
        match self {
            Direction::Forward => 0,
            Direction::Reverse => 1,
        }
    }

    pub fn ack_link(self) -> u32 {
        1 - self.data_link()
    }
}
