//! Settings of a TCP endpoint pair: the sysctls and socket options that change
//! how Linux TCP behaves, with Linux's defaults (except the buffers, which
//! default to the large tuned values of high-speed testbeds).

use crate::config::{ConfigError, Schema};
use serde::{Deserialize, Serialize};

/// The TCP settings of a flow (sysctls and socket options), Linux's defaults.
#[derive(Clone, Debug, Serialize, Deserialize, Schema)]
#[serde(default, deny_unknown_fields)]
#[schema(name = "tcp")]
pub struct TcpConfig {
    /// Maximum segment size in bytes (1448: 1500-byte packets with timestamps).
    #[schema(min = 64, max = 65_000, unit = "bytes")]
    pub mss: u32,
    /// Initial congestion window in packets (Linux TCP_INIT_CWND = 10; `ip route
    /// ... initcwnd` sets any other, and Linux keeps snd_cwnd a positive int).
    #[schema(min = 1, max = i32::MAX, unit = "packets")]
    pub initial_cwnd: u32,
    /// Selective acknowledgements (net.ipv4.tcp_sack). Off: NewReno recovery.
    pub sack: bool,
    /// Kernel tick rate for jiffies-based timers and CCA clocks (CONFIG_HZ).
    #[schema(one_of(100, 250, 300, 1000), unit = "Hz")]
    pub hz: u32,
    /// Minimum RTO in microseconds (TCP_RTO_MIN = 200 ms).
    #[schema(positive, kind = "duration_us")]
    pub rto_min_us: u32,
    /// Send buffer in bytes of payload the sender may hold unacknowledged; at least one segment.
    #[schema(min_field = mss, kind = "bytes", unit = "bytes")]
    pub sndbuf: u64,
    /// Receive buffer in bytes: bounds the advertised window; at least one segment.
    #[schema(min_field = mss, kind = "bytes", unit = "bytes")]
    pub rcvbuf: u64,
    /// Delayed ACKs at the receiver (off: ACK every segment).
    pub delayed_ack: bool,
    /// Tail loss probes (net.ipv4.tcp_early_retrans = 3).
    pub tlp: bool,
    /// Forward RTO-Recovery, RFC 5682 (net.ipv4.tcp_frto).
    pub frto: bool,
    /// Pace every flow at Linux's pacing rate (as with the fq qdisc).
    pub pacing: bool,
    /// Negotiate ECN (net.ipv4.tcp_ecn = 1 on both ends).
    pub ecn: bool,
    /// Restart from the initial window after idle (net.ipv4.tcp_slow_start_after_idle).
    pub slow_start_after_idle: bool,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mss: 1448,
            initial_cwnd: 10,
            sack: true,
            hz: 250,
            rto_min_us: 200_000,
            sndbuf: 64 << 20,
            rcvbuf: 64 << 20,
            delayed_ack: true,
            tlp: true,
            frto: true,
            pacing: false,
            ecn: false,
            slow_start_after_idle: true,
        }
    }
}

impl TcpConfig {
    /// Checks the settings; errors name the field within the `tcp` table.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_fields()
    }
}
