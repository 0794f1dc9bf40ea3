//! Traffic that shares the bottleneck with the flows under study: unresponsive
//! UDP sources (constant bit rate, Poisson, on-off) and web-like short TCP
//! flows (Poisson arrivals at a target offered load, SURGE sizes, per-flow RTTs
//! from a distribution). Long-lived background TCP flows are ordinary flows
//! with `background` set. This module decides *when* packets or flows appear;
//! the simulation moves them.

pub mod udp;
pub mod web;

use crate::config::Schema;
use serde::{Deserialize, Serialize};

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
