//! The end hosts around each TCP endpoint, as Linux hosts behave rather than
//! as clockwork: the sender's segmentation offload (TSO/GSO: super-packets
//! sized by `tcp_tso_autosize`, sends deferred to build them, pacing per
//! super-packet; see `tso`), and the receiver's batched processing (packets
//! held while the host is busy are processed together and acknowledged
//! together, as NAPI polls, GRO and the socket backlog do; see `rx`), and
//! TCP Small Queues (a sender keeps only about two skbs in its NIC; see
//! `tsq`). The
//! `[hosts]` table switches each mechanism; with all of them off the hosts
//! are the engine's former clockwork ones, bit for bit.

pub mod rx;
pub mod tso;
pub mod tsq;

use crate::config::Schema;
use crate::dist::Dist;
use crate::units::Rate;
use serde::{Deserialize, Serialize};

/// How the end hosts send and receive.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(name = "hosts")]
pub struct HostConfig {
    /// Segmentation offload (TSO/GSO) at the senders: data leaves in
    /// super-packets of `tcp_tso_autosize` segments (about 1 ms at the pacing
    /// rate, at most 64 KB), Linux's TSO deferral waits for the next ACK to
    /// build them, and internal pacing spaces super-packets. Linux's default
    /// (GSO is on even where the NIC lacks TSO).
    #[serde(default = "yes")]
    pub tso: bool,
    /// Batched receive processing at the receivers: a data packet reaching an
    /// idle receiver is processed after a hold drawn from `rx_hold`, together
    /// with every packet that arrived meanwhile, and the batch is acknowledged
    /// as one (as GRO and the socket backlog make Linux do). Off: each packet
    /// is processed the instant it arrives.
    #[serde(default)]
    pub rx_batching: bool,
    /// How long a receiver holds the first packet of a batch, in nanoseconds
    /// (measure it on the hosts you model: docs/fidelity.md).
    #[serde(default = "default_rx_hold")]
    pub rx_hold: Dist,
    /// Rate at which a host's NIC puts packets on the wire (its access link;
    /// default: `network.access_rate`, else 10 x the bottleneck). A testbed's
    /// VMs whose flows never exceed some rate are described by it.
    #[serde(default)]
    #[schema(positive)]
    pub line_rate: Option<Rate>,
    /// TCP Small Queues at the senders: a socket keeps at most about two
    /// skbs (or ~1 ms at its pacing rate) in its host's NIC queue and waits
    /// for the NIC to finish one before sending more (Linux
    /// `tcp_small_queue_check`; always on in Linux). Off: the NIC queue is
    /// unbounded and a window larger than the NIC can carry queues in it.
    #[serde(default = "yes")]
    pub tsq: bool,
    /// The senders' write queue as Linux builds it: skbs of the GSO size
    /// from `tcp_sendmsg`, split to the window's quota with the rest left at
    /// the head, a short head grown from the next skb (`tcp_grow_skb`), and
    /// an skb in the middle of the queue sent whole when it fits
    /// (`tcp_tso_should_defer`), as for an application that keeps the socket's
    /// buffer full (iperf3, a bulk transfer). On since 2026-11-26: with the
    /// return path's measured noise it agrees with the kernel on more of the
    /// stored validation cells (docs/fidelity.md). Off: every skb is cut to
    /// the autosize goal and smaller openings wait for the next ACK.
    #[serde(default = "yes")]
    pub write_queue: bool,
    /// Which kernel's TSO deferral rule the senders follow: `ack_due` (wait
    /// for the next ACK only while it is due within min(srtt/2, 1 ms): Linux
    /// 6.18 and the stable trees since October 2025) or `half_rtt` (wait
    /// whenever the oldest unacknowledged skb left more than srtt/2 ago: the
    /// kernels before, as on most published testbeds).
    #[serde(default)]
    pub tso_defer: tso::DeferRule,
}

fn yes() -> bool {
    true
}

/// A placeholder of 20 us until calibrated; only used with `rx_batching`.
fn default_rx_hold() -> Dist {
    Dist::Constant { value: 20_000.0 }
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            tso: true,
            rx_batching: false,
            rx_hold: default_rx_hold(),
            line_rate: None,
            tsq: true,
            write_queue: true,
            tso_defer: tso::DeferRule::AckDue,
        }
    }
}

impl HostConfig {
    /// The former clockwork hosts: no offload, no batching, no small queues.
    pub fn clockwork() -> Self {
        HostConfig { tso: false, tsq: false, write_queue: false, ..HostConfig::default() }
    }
}
