//! TCP endpoints that behave like Linux: the sender (ACK processing, SACK
//! scoreboard, RACK-TLP loss detection, PRR, RTO with F-RTO, undo, pacing) and
//! the receiver (delayed and quick ACKs, SACK and D-SACK generation, SACK
//! compression), plus their shared pieces (RTT estimator, sequence sets,
//! Accurate ECN feedback).

pub mod accecn;
pub mod config;
pub mod receiver;
pub mod rtt;
pub mod scoreboard;
pub mod sender;
pub mod seqset;

pub use config::TcpConfig;

/// Timestamp clock of a host: Linux's TCP timestamps tick in milliseconds. One
/// is added so that a timestamp is never 0 (Linux treats a zero echo as absent).
pub fn ts_clock(now: crate::units::Time) -> u32 {
    (now.0 / crate::units::NS_PER_MS) as u32 + 1
}
