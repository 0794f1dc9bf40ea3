//! What a run records: per-flow counters, columnar time series sampled at a
//! fixed interval, and the bottleneck's queue series. These are plain data for
//! the layers above (metrics, store, figures); nothing here is computed from
//! them.

use serde::Serialize;

/// Counters of one flow over the whole run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FlowCounters {
    /// Data segments transmitted (first transmissions and retransmissions).
    pub segments_sent: u64,
    /// Data packets handed to the sending host's device: super-packets with
    /// segmentation offload, else segments (segments_sent / skbs_sent is the
    /// mean burst the sender puts on the wire back to back).
    pub skbs_sent: u64,
    /// ACKs the receiver sent (ACKs per data segment shows delayed and
    /// stretch ACKs).
    pub acks_sent: u64,
    /// Payload bytes transmitted, retransmissions included.
    pub bytes_sent: u64,
    /// Segments retransmitted (fast retransmits, RTO retransmits, TLP retransmits).
    pub retransmissions: u64,
    /// Retransmission timeouts.
    pub rtos: u64,
    /// Tail loss probes sent.
    pub tlps: u64,
    /// Entries into fast recovery.
    pub recoveries: u64,
    /// Cwnd reductions undone as spurious (DSACK, timestamps, F-RTO).
    pub undos: u64,
    /// SYN retransmissions during the handshake.
    pub syn_retransmissions: u64,
    /// Payload bytes cumulatively acknowledged at the sender.
    pub bytes_acked: u64,
    /// Payload bytes delivered in order to the receiving application.
    pub bytes_delivered: u64,
    /// Data segments that arrived at the receiver more than once.
    pub duplicate_segments: u64,
    /// Data segments the receiver discarded by PAWS (timestamp older than
    /// TS.Recent; Linux's PAWSEstab counter).
    pub paws_rejected: u64,
    /// The receiver's ACK decisions as Linux counts them: out-of-order skbs
    /// (`TCPOFOQueue`), ACKs SACK compression held back and never sent
    /// (`TCPAckCompressed`), ACKs the delayed-ACK timer sent (`DelayedACKs`).
    pub ofo_skbs: u64,
    pub acks_compressed: u64,
    pub delayed_acks: u64,
    /// Slow-start exits by HyStart's ACK-train signal, and the sum of cwnd
    /// at them (Linux `TCPHystartTrainDetect`, `TCPHystartTrainCwnd`).
    pub hystart_train: u64,
    pub hystart_train_cwnd: u64,
    /// The same for the delay-increase signal (`TCPHystartDelayDetect`, `...Cwnd`).
    pub hystart_delay: u64,
    pub hystart_delay_cwnd: u64,
    /// Data packets of this flow dropped at a bottleneck (queue, AQM or random loss).
    pub drops: u64,
    /// Of `drops`, those from random (non-congestion) loss.
    pub random_drops: u64,
    /// ECN CE marks received.
    pub ce_marks: u64,
    /// Connection open time (SYN sent), ns; u64::MAX if never started.
    pub start_ns: u64,
    /// When the first data segment left, ns (0: none): after the handshake,
    /// and after a tool's start-up exchange (`startup = "iperf3"`).
    pub first_data_ns: u64,
    /// Time the last byte of a finite transfer was acknowledged, ns (0: not finished).
    pub completion_ns: u64,
    /// Bytes delivered at the start of the measurement window.
    pub delivered_at_window_start: u64,
    /// Bytes delivered at the end of the measurement window.
    pub delivered_at_window_end: u64,
    /// Retransmissions at the start of the measurement window.
    pub retrans_at_window_start: u64,
    pub rtos_at_window_start: u64,
}

/// Time series of one flow, one row per sample instant.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FlowSeries {
    pub t_ns: Vec<u64>,
    pub cwnd: Vec<u32>,
    pub ssthresh: Vec<u32>,
    pub in_flight: Vec<u32>,
    pub srtt_us: Vec<u32>,
    pub min_rtt_us: Vec<u32>,
    /// Latest delivery-rate sample, bit/s.
    pub delivery_rate_bps: Vec<u64>,
    /// Goodput over the last interval (in-order bytes at the receiver), bit/s.
    pub throughput_bps: Vec<u64>,
    /// Cumulative payload bytes delivered to the receiving application.
    pub delivered_bytes: Vec<u64>,
    /// Cumulative retransmissions.
    pub retransmissions: Vec<u64>,
    /// Linux congestion-avoidance state (0 Open .. 4 Loss).
    pub ca_state: Vec<u8>,
    /// Pacing rate, bit/s (0: not pacing).
    pub pacing_rate_bps: Vec<u64>,
    /// What the algorithm reports to `ss` (`CongestionControl::get_info`),
    /// empty for algorithms that report nothing: its bandwidth estimate,
    /// bit/s; its min RTT estimate, us (0: none yet); its gains, x/256.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cc_bw_bps: Vec<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cc_min_rtt_us: Vec<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cc_pacing_gain: Vec<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cc_cwnd_gain: Vec<u32>,
}

/// Time series of a bottleneck link.
#[derive(Clone, Debug, Default, Serialize)]
pub struct QueueSeries {
    pub t_ns: Vec<u64>,
    pub backlog_packets: Vec<u32>,
    pub backlog_bytes: Vec<u64>,
    /// Cumulative drops (all causes).
    pub drops: Vec<u64>,
    /// Cumulative bytes transmitted.
    pub bytes_out: Vec<u64>,
    /// Link rate at the sample, bit/s.
    pub rate_bps: Vec<u64>,
}

/// One web-like short flow: what it transferred and how long it took.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ShortFlowRecord {
    /// Index of the web generator that opened it.
    pub generator: u32,
    pub size_bytes: u64,
    /// Two-way propagation delay of its path.
    pub rtt_ns: u64,
    /// When it sent its SYN.
    pub start_ns: u64,
    /// Flow completion time: from the SYN until the receiver holds every byte
    /// (None if the run ended first).
    pub fct_ns: Option<u64>,
    /// From the SYN until the sender saw the last byte acknowledged.
    pub acked_ns: Option<u64>,
    pub retransmissions: u64,
    pub rtos: u64,
    pub syn_retransmissions: u64,
}

/// Time series of a UDP source's sink.
#[derive(Clone, Debug, Default, Serialize)]
pub struct UdpSeries {
    pub t_ns: Vec<u64>,
    /// Wire bytes received over the last interval, bit/s.
    pub throughput_bps: Vec<u64>,
    /// Cumulative wire bytes received.
    pub received_bytes: Vec<u64>,
}
