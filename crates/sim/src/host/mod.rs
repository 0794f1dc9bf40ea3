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
    /// TCP builds super-packets even where the device has no segmentation
    /// offload (`tso = false`), and the device segments them in software
    /// as they leave: Linux's GSO, always on for TCP since 4.13. Off (with
    /// `tso = false`): every skb is one segment, as the engine's clockwork
    /// hosts send.
    #[serde(default = "yes")]
    pub gso: bool,
    /// Batched receive processing at the receivers: a data packet reaching an
    /// idle receiver is processed after a hold drawn from `rx_hold`, together
    /// with every packet that arrived meanwhile; each run of consecutive
    /// segments in the batch is one skb with one ACK decision, and the
    /// immediate ACKs wait for the batch's end (as the socket backlog makes
    /// Linux do). Off: each packet is processed the instant it arrives.
    #[serde(default)]
    pub rx_batching: bool,
    /// How long a receiver holds the first packet of a batch, in nanoseconds
    /// (measure it on the hosts you model: docs/fidelity.md).
    #[serde(default = "default_rx_hold")]
    pub rx_hold: Dist,
    /// The receiving applications' reads: in-order data the application has
    /// not read yet (after a wait drawn from `read_wait`) shrinks the window
    /// a Linux receiver would advertise, and an arrival whose ACK would
    /// advertise less than the last one leaves that ACK to the read
    /// (`tcp_cleanup_rbuf`), while out-of-order data and filled holes are
    /// acknowledged at once (`tcp/receiver.rs`; docs/fidelity.md: it agrees
    /// with more of the kernel runs). Off: data is read the instant it
    /// arrives.
    #[serde(default = "yes")]
    pub app_reads: bool,
    /// How long the receiving application takes to read data from the
    /// moment it becomes readable, in nanoseconds (default: iperf3's, as
    /// measured on the linux backend).
    #[serde(default = "default_read_wait")]
    pub read_wait: Dist,
    /// The most one read of the receiving application takes, in bytes
    /// (default: iperf3's block for TCP, 128 KB, its `-l`). With more
    /// readable it reads again after `read_again_wait`.
    #[serde(default = "default_read_size")]
    #[schema(positive, kind = "bytes", unit = "bytes")]
    pub read_size: u64,
    /// How soon the receiving application reads again after a read that
    /// took a full `read_size` (iperf3's loop: the next read's copy and its
    /// system calls), in nanoseconds (default: measured on the linux
    /// backend).
    #[serde(default = "default_read_again_wait")]
    pub read_again_wait: Dist,
    /// How long an iperf3 server takes to answer the data connection's
    /// cookie with TEST_START (`startup = "iperf3"`), in nanoseconds beyond
    /// the round trip (default: measured on this project's machine, idle).
    #[serde(default = "default_iperf3_test_start_wait")]
    pub iperf3_test_start_wait: Dist,
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

/// iperf3's wait from data becoming readable to its read, two flows at 400
/// Mbit/s, 20 ms, offloads on, on the linux backend (2026-11-27, `python
/// tools/kernel_host_timing.py --rate 400Mbps --rtt 20ms --flows 2
/// --seconds 30 --captures receiver`, `receiver_batch_hold_as_distribution`:
/// with offloads on a Linux receiver's ACK leaves at the read, 98 % within
/// 30 us of one, so the wait from an skb's arrival to its ACK is the read's;
/// one capture, the least load on the machine; the same with perf recording
/// the reads has a median of 47 us and waits of 26-28 ms that the lighter
/// measurement never shows).
fn default_read_wait() -> Dist {
    Dist::empirical_us(&READ_WAIT_US, &READ_WAIT_PROBABILITIES)
}

const READ_WAIT_US: [f64; 13] = [2.2, 15.8, 22.1, 28.4, 41.6, 69.3, 137.6, 272.9, 932.5, 2501.9, 2903.0, 6691.6, 7874.4];
const READ_WAIT_PROBABILITIES: [f64; 13] = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.97, 0.99, 0.999, 0.9995, 0.9999, 1.0];

/// iperf3's default block for TCP (`DEFAULT_TCP_BLKSIZE`, 128 KB): what its
/// server asks for per read.
fn default_read_size() -> u64 {
    128 * 1024
}

/// From a read of a full 128 KB block to iperf3's next read of the same
/// socket, two BIC flows at 400 Mbit/s, 20 ms, 10 ms of buffer, offloads on,
/// on the linux backend (2026-11-29, `python tools/kernel_host_timing.py
/// --cca bic --rate 400Mbps --rtt 20ms --flows 2 --buffer 500000B --seconds
/// 30 --reads --captures receiver`, `largest_read_to_next_read_as_distribution`:
/// 1,619 full reads, 27 % of the bytes; a second run gave p50 16.9 us, p90
/// 97.5 us).
fn default_read_again_wait() -> Dist {
    Dist::empirical_us(&READ_AGAIN_US, &READ_AGAIN_PROBABILITIES)
}

const READ_AGAIN_US: [f64; 13] = [3.3, 7.7, 10.9, 16.5, 33.2, 96.5, 162.2, 206.6, 314.4, 423.1, 481.4, 684.9, 684.9];
const READ_AGAIN_PROBABILITIES: [f64; 13] = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.97, 0.99, 0.999, 0.9995, 0.9999, 1.0];

/// iperf3's server from the data connection's cookie to TEST_START, beyond
/// the round trip: 32 start-ups on an idle path at RTTs of 10, 20, 40 and 80
/// ms (2026-11-29, `sudo .venv/bin/python tools/iperf3_startup.py --rtt 10ms
/// 20ms 40ms 80ms --repeat 8`; iperf 3.12, the linux backend's dumbbell),
/// alike at every RTT: the server's own work before the test starts. The
/// other steps of the exchange took under 0.7 ms.
fn default_iperf3_test_start_wait() -> Dist {
    Dist::empirical_us(&TEST_START_WAIT_US, &TEST_START_WAIT_PROBABILITIES)
}

const TEST_START_WAIT_US: [f64; 7] = [515.0, 555.0, 615.0, 1271.0, 2859.0, 3347.0, 5297.0];
const TEST_START_WAIT_PROBABILITIES: [f64; 7] = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0];

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            tso: true,
            gso: true,
            rx_batching: false,
            rx_hold: default_rx_hold(),
            app_reads: true,
            read_wait: default_read_wait(),
            read_size: default_read_size(),
            read_again_wait: default_read_again_wait(),
            iperf3_test_start_wait: default_iperf3_test_start_wait(),
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
        HostConfig { tso: false, gso: false, tsq: false, write_queue: false, app_reads: false, ..HostConfig::default() }
    }
}
