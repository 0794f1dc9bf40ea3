//! Settings of a TCP endpoint pair: the sysctls and socket options that change
//! how Linux TCP behaves, with Linux's defaults (except the buffers, which
//! default to the large tuned values of high-speed testbeds).

use crate::config::ConfigError;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TcpConfig {
    /// Maximum segment size in bytes (1448: 1500-byte packets with timestamps).
    pub mss: u32,
    /// Initial congestion window in packets (Linux TCP_INIT_CWND = 10).
    pub initial_cwnd: u32,
    /// Selective acknowledgements (net.ipv4.tcp_sack). Off: NewReno recovery.
    pub sack: bool,
    /// Kernel tick rate for jiffies-based timers and CCA clocks (CONFIG_HZ).
    pub hz: u32,
    /// Minimum RTO in microseconds (TCP_RTO_MIN = 200 ms).
    pub rto_min_us: u32,
    /// Send buffer in bytes of payload the sender may hold unacknowledged.
    pub sndbuf: u64,
    /// Receive buffer in bytes: bounds the advertised window.
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
        if !(64..=65_000).contains(&self.mss) {
            return Err(ConfigError::new("mss", format!("must be in 64..65000 bytes, got {}", self.mss)));
        }
        if self.initial_cwnd == 0 {
            return Err(ConfigError::new("initial_cwnd", "must be at least 1"));
        }
        if ![100, 250, 300, 1000].contains(&self.hz) {
            return Err(ConfigError::new("hz", format!("must be one of 100, 250, 300, 1000, got {}", self.hz)));
        }
        if self.sndbuf < self.mss as u64 || self.rcvbuf < self.mss as u64 {
            return Err(ConfigError::new("sndbuf/rcvbuf", "must hold at least one segment"));
        }
        if self.rto_min_us == 0 {
            return Err(ConfigError::new("rto_min", "must be positive"));
        }
        Ok(())
    }
}
