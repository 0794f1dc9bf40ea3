//! Congestion control: the trait every algorithm implements, shaped like Linux's
//! `struct tcp_congestion_ops`, and the socket state algorithms may read and
//! write (`TcpSock`, the part of Linux's `struct tcp_sock` that congestion
//! control touches). The socket owns cwnd, ssthresh and the RTT state; an
//! algorithm owns only its own variables. Helpers that Linux exports to modules
//! (`tcp_slow_start`, `tcp_cong_avoid_ai`, `tcp_is_cwnd_limited`, the Reno
//! functions) are methods of `TcpSock`. One algorithm lives in one file.

pub mod bbr;
pub mod bbr3;
pub mod bic;
pub mod cdg;
pub mod cubic;
pub mod cubic2008;
pub mod dctcp;
pub mod fast;
pub mod highspeed;
pub mod htcp;
pub mod hybla;
pub mod illinois;
pub mod lp;
pub mod nv;
pub mod params;
pub mod prague;
pub mod rapid;
pub mod registry;
pub mod reno;
pub mod scalable;
#[cfg(test)]
mod stretch_acks;
pub mod vegas;
pub mod veno;
pub mod westwood;
pub mod yeah;

use crate::minmax::MinMax;
use crate::units::Time;

pub use params::{CcaInfo, CcaParam, ParamValue, Params};
pub use registry::{cca_catalogue, make_cca, CcaFactory};

/// Linux TCP_INFINITE_SSTHRESH.
pub const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// Linux's congestion-avoidance states (`enum tcp_ca_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CaState {
    Open = 0,
    Disorder = 1,
    Cwr = 2,
    Recovery = 3,
    Loss = 4,
}

/// Events reported through `cwnd_event` (Linux `enum tcp_ca_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaEvent {
    /// First transmission when no packet is in flight.
    TxStart,
    /// Congestion window restart after idle.
    CwndRestart,
    /// End of a CWR or Recovery episode.
    CompleteCwr,
    /// Retransmission timeout.
    Loss,
    /// ECN: an ACK without ECE after ones with it.
    EcnNoCe,
    /// ECN: an ACK with ECE.
    EcnIsCe,
}

/// `in_ack_event` flags (Linux `CA_ACK_*`).
pub const CA_ACK_SLOWPATH: u32 = 1 << 0;
pub const CA_ACK_WIN_UPDATE: u32 = 1 << 1;
pub const CA_ACK_ECE: u32 = 1 << 2;

/// What `pkts_acked` receives (Linux `struct ack_sample`).
#[derive(Clone, Copy, Debug, Default)]
pub struct AckSample {
    /// Packets cumulatively acknowledged by this ACK.
    pub pkts_acked: u32,
    /// RTT of the most recently sent (S)ACKed packet, in us; negative if none.
    pub rtt_us: i64,
    /// Packets in flight when the acknowledged packet was sent.
    pub in_flight: u32,
}

/// A delivery-rate sample (Linux `struct rate_sample`, `tcp_rate.c`).
#[derive(Clone, Copy, Debug)]
pub struct RateSample {
    /// `delivered_mstamp` when the sampled packet was sent (us; 0 = no sample).
    pub prior_mstamp: u64,
    /// `delivered` when the sampled packet was sent.
    pub prior_delivered: u32,
    /// Packets delivered over the interval; negative if the sample is invalid.
    pub delivered: i64,
    /// Interval of the sample in us; negative if invalid.
    pub interval_us: i64,
    pub snd_interval_us: i64,
    pub rcv_interval_us: i64,
    /// RTT of the last (S)ACKed packet, us; negative if none.
    pub rtt_us: i64,
    /// Packets newly marked lost on this ACK.
    pub losses: u32,
    /// Packets newly (S)ACKed on this ACK.
    pub acked_sacked: u32,
    /// Of those, the packets Accurate ECN reports CE-marked (the L4S tree's
    /// `rs->ece_delta`).
    pub ece_delta: u32,
    /// In-flight packets before this ACK.
    pub prior_in_flight: u32,
    pub is_app_limited: bool,
    pub is_retrans: bool,
    pub is_ack_delayed: bool,
    /// End sequence of the sampled packet (tie-breaker, Linux `last_end_seq`).
    pub last_end_seq: u32,
    /// Send time (us) of the sampled packet's first-sent-in-flight packet.
    pub(crate) first_tx_at_send: u64,
    // Fields of BBRv3's rate sample (google/bbr v3 `struct rate_sample`).
    /// Packets in flight just after the sampled packet left, itself included
    /// (v3 `tx_in_flight`).
    pub tx_in_flight: u32,
    /// Packets marked lost between the sampled packet's send and now (v3
    /// `lost`: `tp->lost` minus its value at send).
    pub lost: u32,
    /// Packets delivered with an ECE echo over the interval (v3 `delivered_ce`).
    pub delivered_ce: i64,
    /// This ACK carried ECE on an ECN connection (v3 `is_ece`).
    pub is_ece: bool,
    pub(crate) prior_lost: u32,
    pub(crate) prior_delivered_ce: u32,
}

impl Default for RateSample {
    fn default() -> Self {
        RateSample {
            prior_mstamp: 0,
            prior_delivered: 0,
            delivered: -1,
            interval_us: -1,
            snd_interval_us: -1,
            rcv_interval_us: -1,
            rtt_us: -1,
            losses: 0,
            acked_sacked: 0,
            ece_delta: 0,
            prior_in_flight: 0,
            is_app_limited: false,
            is_retrans: false,
            is_ack_delayed: false,
            last_end_seq: 0,
            first_tx_at_send: 0,
            tx_in_flight: 0,
            lost: 0,
            delivered_ce: 0,
            is_ece: false,
            prior_lost: 0,
            prior_delivered_ce: 0,
        }
    }
}

/// What an arriving ACK says, for algorithms that look at every ACK's details
/// (`ack_arrival`): the cumulative ACK, the receive timestamp of the newest
/// data segment at the receiver, and the echoed TCP timestamp (Linux
/// `rx_opt.rcv_tsecr`, the sender's ms clock `tcp::ts_clock`; 0 if none).
#[derive(Clone, Copy, Debug)]
pub struct AckArrival {
    pub ack: u32,
    pub rx_seq: u32,
    pub rx_ns: u64,
    pub now_ns: u64,
    pub tsecr: u32,
}

/// What `skb_marked_lost` learns about a segment the stack has just marked
/// lost: its send-time snapshot (Linux `tcp_skb_cb.tx`, as BBRv3's stack
/// patches carry it). One segment, so Linux's `tcp_skb_pcount` is 1.
#[derive(Clone, Copy, Debug, Default)]
pub struct LostSkb {
    /// Packets in flight just after the segment left, itself included.
    pub tx_in_flight: u32,
    /// `tp.lost` now minus `tp.lost` when the segment left (so at least 1).
    pub lost: u32,
    /// The segment left while the sender was application limited.
    pub tx_app_limited: bool,
    /// False if the segment's send snapshot was already consumed (SACKed and
    /// reneged); Linux tests `tx.delivered_mstamp` for this.
    pub has_tx_state: bool,
}

/// Whether the sender paces its packets (Linux `sk_pacing_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacingStatus {
    /// No pacing: ACK-clocked bursts (Linux without the fq qdisc).
    None,
    /// Pacing requested by the algorithm (BBR) or the scenario (fq).
    Needed,
}

/// The socket state visible to congestion control. Windows are in packets,
/// sequence numbers in segments, times in microseconds or jiffies as in Linux.
#[derive(Clone, Debug)]
pub struct TcpSock {
    /// Simulated time of the event being processed.
    pub now: Time,
    /// `tcp_mstamp`: now in microseconds.
    pub mstamp_us: u64,
    /// `tcp_jiffies32`.
    pub jiffies: u32,
    /// Kernel tick rate.
    pub hz: u32,
    /// Maximum segment size in bytes.
    pub mss: u32,

    pub cwnd: u32,
    pub ssthresh: u32,
    /// Linear-increase counter (`snd_cwnd_cnt`).
    pub cwnd_cnt: u32,
    pub cwnd_clamp: u32,
    /// cwnd before the last reduction (for undo).
    pub prior_cwnd: u32,
    /// Jiffies of the last cwnd change by the stack (`snd_cwnd_stamp`).
    pub cwnd_stamp: u32,

    pub snd_una: u32,
    pub snd_nxt: u32,
    pub packets_out: u32,
    pub sacked_out: u32,
    pub lost_out: u32,
    pub retrans_out: u32,
    /// Total packets delivered (ACKed or SACKed), Linux `tp->delivered`.
    pub delivered: u32,
    /// Time (us) `delivered` last changed.
    pub delivered_mstamp: u64,
    /// Of `delivered`, the packets delivered by ACKs that carried ECE, or
    /// that the receiver reported CE-marked with Accurate ECN (Linux
    /// `tp->delivered_ce`; `tcp::accecn`).
    pub delivered_ce: u32,
    /// Total packets marked lost, Linux `tp->lost`.
    pub lost: u32,
    /// Reordering degree in packets (Linux `tp->reordering`, default 3).
    pub reordering: u32,

    /// Smoothed RTT in us x 8 (0 before the first sample).
    pub srtt_us8: u32,
    /// Windowed min RTT (us) over `tcp_min_rtt_wlen` (300 s).
    pub rtt_min: MinMax,

    pub ca_state: CaState,
    pub is_cwnd_limited: bool,
    pub max_packets_out: u32,
    pub cwnd_usage_seq: u32,

    /// Pacing rate in bytes per second (Linux `sk_pacing_rate`).
    pub pacing_rate: u64,
    /// Upper bound for `pacing_rate` (`sk_max_pacing_rate`).
    pub max_pacing_rate: u64,
    pub pacing_status: PacingStatus,
    /// Linux `sk_pacing_shift` (10: about 1 ms of data per TSO burst).
    pub pacing_shift: u32,
    /// Earliest departure time of the next packet, ns (Linux `tcp_wstamp_ns`);
    /// the stack advances it when pacing, BBR reads it.
    pub wstamp_ns: u64,

    /// Non-zero when the sender is application limited (Linux `tp->app_limited`).
    pub app_limited: u32,
    /// Jiffies of the last data transmission (`lsndtime`).
    pub lsndtime: u32,

    /// Latest non-app-limited (or best app-limited) rate sample, for `tcp_info`.
    pub rate_delivered: u32,
    pub rate_interval_us: u32,
    pub rate_app_limited: bool,

    /// Seed of this flow's congestion-control randomness (BBR's gain-cycle
    /// phase, where Linux calls `get_random_u32_below`); the simulation derives
    /// it from the run seed and the flow id so runs are reproducible.
    pub flow_seed: u64,

    /// Set by `enter_cwr` (an algorithm calling Linux's `tcp_enter_cwr`, as CDG
    /// does on a delay-gradient backoff); the stack enters CWR when the hook
    /// returns and clears it.
    pub cwr_requested: bool,

    /// Slow-start exits by HyStart, as Linux counts them in its MIB.
    pub hystart: HystartStats,
}

/// Linux's `TCPHystartTrainDetect`/`TCPHystartTrainCwnd` and
/// `TCPHystartDelayDetect`/`TCPHystartDelayCwnd`: how often HyStart ended
/// slow start on each signal, and the sum of cwnd at those exits (one socket's
/// share of what Linux counts per network namespace).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HystartStats {
    pub train_detect: u64,
    pub train_cwnd: u64,
    pub delay_detect: u64,
    pub delay_cwnd: u64,
}

impl TcpSock {
    pub fn new(mss: u32, hz: u32, initial_cwnd: u32) -> TcpSock {
        TcpSock {
            now: Time::ZERO,
            mstamp_us: 0,
            jiffies: 0,
            hz,
            mss,
            cwnd: initial_cwnd,
            ssthresh: INFINITE_SSTHRESH,
            cwnd_cnt: 0,
            cwnd_clamp: u32::MAX,
            prior_cwnd: 0,
            cwnd_stamp: 0,
            snd_una: 0,
            snd_nxt: 0,
            packets_out: 0,
            sacked_out: 0,
            lost_out: 0,
            retrans_out: 0,
            delivered: 0,
            delivered_mstamp: 0,
            delivered_ce: 0,
            lost: 0,
            reordering: 3,
            srtt_us8: 0,
            rtt_min: MinMax::new_min(0, u32::MAX),
            ca_state: CaState::Open,
            is_cwnd_limited: false,
            max_packets_out: 0,
            cwnd_usage_seq: 0,
            pacing_rate: 0,
            max_pacing_rate: u64::MAX,
            pacing_status: PacingStatus::None,
            pacing_shift: 10,
            wstamp_ns: 0,
            app_limited: 0,
            lsndtime: 0,
            rate_delivered: 0,
            rate_interval_us: 0,
            rate_app_limited: false,
            flow_seed: 0,
            cwr_requested: false,
            hystart: HystartStats::default(),
        }
    }

    /// Linux `tcp_in_slow_start`.
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// Linux `tcp_packets_in_flight`.
    pub fn packets_in_flight(&self) -> u32 {
        self.packets_out - (self.sacked_out + self.lost_out) + self.retrans_out
    }

    /// Linux `tcp_is_cwnd_limited`.
    pub fn is_cwnd_limited(&self) -> bool {
        if self.is_cwnd_limited {
            return true;
        }
        if self.in_slow_start() {
            return self.cwnd < 2 * self.max_packets_out;
        }
        false
    }

    /// Linux `tcp_slow_start`: grows cwnd by `acked` up to ssthresh and returns
    /// the acked packets left over for congestion avoidance.
    pub fn slow_start(&mut self, acked: u32) -> u32 {
        let cwnd = self.cwnd.saturating_add(acked).min(self.ssthresh);
        let left = acked - (cwnd - self.cwnd);
        self.cwnd = cwnd.min(self.cwnd_clamp);
        left
    }

    /// Linux `tcp_cong_avoid_ai`: +1 packet per `w` packets acked, with carry.
    pub fn cong_avoid_ai(&mut self, w: u32, acked: u32) {
        let w = w.max(1);
        if self.cwnd_cnt >= w {
            self.cwnd_cnt = 0;
            self.cwnd += 1;
        }
        self.cwnd_cnt += acked;
        if self.cwnd_cnt >= w {
            let delta = self.cwnd_cnt / w;
            self.cwnd_cnt -= delta * w;
            self.cwnd += delta;
        }
        self.cwnd = self.cwnd.min(self.cwnd_clamp);
    }

    /// Linux `tcp_reno_cong_avoid`.
    pub fn reno_cong_avoid(&mut self, acked: u32) {
        if !self.is_cwnd_limited() {
            return;
        }
        let mut acked = acked;
        if self.in_slow_start() {
            acked = self.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        self.cong_avoid_ai(self.cwnd, acked);
    }

    /// Linux `tcp_reno_ssthresh`.
    pub fn reno_ssthresh(&self) -> u32 {
        (self.cwnd >> 1).max(2)
    }

    /// Linux `tcp_in_cwnd_reduction`: in CWR or Recovery, where PRR owns cwnd.
    pub fn in_cwnd_reduction(&self) -> bool {
        matches!(self.ca_state, CaState::Cwr | CaState::Recovery)
    }

    /// Linux `tcp_current_ssthresh`: outside a reduction, never below 3/4 of
    /// cwnd, so that a later loss does not undercut the window just reached.
    pub fn current_ssthresh(&self) -> u32 {
        if self.in_cwnd_reduction() {
            self.ssthresh
        } else {
            self.ssthresh.max((self.cwnd >> 1) + (self.cwnd >> 2))
        }
    }

    /// Linux `tcp_enter_cwr` as a module calls it from `cong_avoid`: a
    /// reduction without loss (ssthresh from the algorithm, PRR, no undo). The
    /// stack acts on it as soon as `cong_avoid` returns, so the hook should
    /// return right after asking, as Linux's callers do.
    pub fn enter_cwr(&mut self) {
        self.cwr_requested = true;
    }

    /// Linux `tcp_reno_undo_cwnd`.
    pub fn reno_undo_cwnd(&self) -> u32 {
        self.cwnd.max(self.prior_cwnd)
    }

    /// Smoothed RTT in microseconds (0 before the first sample).
    pub fn srtt_us(&self) -> u32 {
        self.srtt_us8 >> 3
    }

    /// Linux `tcp_min_rtt` (u32::MAX before the first sample).
    pub fn min_rtt_us(&self) -> u32 {
        self.rtt_min.get()
    }
}

/// What BBR reports through `get_info` (Linux's `struct tcp_bbr_info`, which
/// `ss -ti` prints as `bbr:(bw:..,mrtt:..,pacing_gain:..,cwnd_gain:..)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CcInfo {
    /// The bandwidth the model paces and sizes cwnd by, bytes per second.
    pub bw_bytes_per_s: u64,
    /// The model's min RTT estimate, us.
    pub min_rtt_us: u32,
    /// Pacing and cwnd gains in BBR_UNIT (256 = 1.0).
    pub pacing_gain: u32,
    pub cwnd_gain: u32,
}

impl CcInfo {
    /// `bbr_get_info`'s report from BBR's state: `bw` in packets per us <<
    /// 24 (BW_SCALE, as both BBRs keep it) becomes bytes a second, without
    /// the pacing margin.
    pub fn bbr(bw: u32, mss: u32, min_rtt_us: u32, pacing_gain: u32, cwnd_gain: u32) -> CcInfo {
        CcInfo { bw_bytes_per_s: (bw as u64 * mss as u64 * 1_000_000) >> 24, min_rtt_us, pacing_gain, cwnd_gain }
    }
}

/// Linux's `struct tcp_congestion_ops`. As Linux requires (see
/// `registry::validate_hooks`), an algorithm provides `ssthresh` and
/// `undo_cwnd` (required methods here) and at least one of `cong_avoid` and
/// `cong_control`, saying which with `has_cong_avoid` / `has_cong_control`: the
/// counterpart of the hooks a Linux module fills in. The other hooks default to
/// doing nothing.
pub trait CongestionControl: Send {
    /// The algorithm's name as `ccarena list ccas` shows it.
    fn name(&self) -> &str;

    /// Called once when the connection is established.
    fn init(&mut self, _tp: &mut TcpSock) {}

    /// The slow-start threshold after a loss; called on entering Recovery, CWR
    /// and Loss, before cwnd is reduced.
    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32;

    /// Grows cwnd on an ACK that delivered `acked` packets (`ack` is the new
    /// cumulative ACK). Not called during CWR/Recovery, where PRR sets cwnd, nor
    /// for an algorithm with `cong_control`, which need not implement it.
    fn cong_avoid(&mut self, _tp: &mut TcpSock, _ack: u32, _acked: u32) {}

    /// True if the algorithm implements `cong_avoid` (Linux: the hook is set).
    fn has_cong_avoid(&self) -> bool {
        false
    }

    /// True if the algorithm controls cwnd and pacing itself on every ACK
    /// (`cong_control`, like BBR); the stack then skips PRR and `cong_avoid`.
    fn has_cong_control(&self) -> bool {
        false
    }

    /// Called on every ACK with the rate sample, if `has_cong_control`.
    fn cong_control(&mut self, _tp: &mut TcpSock, _rs: &RateSample) {}

    /// The cwnd to restore when a reduction turns out to have been spurious
    /// (most algorithms answer `tp.reno_undo_cwnd()`, Linux `tcp_reno_undo_cwnd`).
    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32;

    /// Called before the congestion-avoidance state changes.
    fn set_state(&mut self, _tp: &mut TcpSock, _new_state: CaState) {}

    fn cwnd_event(&mut self, _tp: &mut TcpSock, _ev: CaEvent) {}

    fn in_ack_event(&mut self, _tp: &mut TcpSock, _flags: u32) {}

    /// Called for every ACK after the retransmission queue has been cleaned.
    fn pkts_acked(&mut self, _tp: &mut TcpSock, _sample: &AckSample) {}

    /// True if the algorithm needs the sender to pace (Linux sets
    /// `sk_pacing_status = SK_PACING_NEEDED` for BBR).
    fn wants_pacing(&self) -> bool {
        false
    }

    /// Called for every data segment just before it leaves, before the pacing clock
    /// advances: an algorithm that sets `tp.pacing_rate` here controls the gap after
    /// this segment (rate-probing algorithms such as RAPID). Not a Linux hook.
    fn on_transmit(&mut self, _tp: &mut TcpSock, _seq: u32, _retransmission: bool) {}

    /// Called at the start of every ACK's processing. Not a Linux hook (Linux
    /// modules read the ACK's timestamps from the socket).
    fn ack_arrival(&mut self, _tp: &mut TcpSock, _ack: &AckArrival) {}

    /// True if the receiver must acknowledge every segment (no delayed ACKs), as
    /// per-packet receive timestamps require.
    fn wants_ack_every_segment(&self) -> bool {
        false
    }

    /// Linux `get_info`: the model state the algorithm reports to `ss`
    /// (`None`: none, as for every algorithm but BBR here), so a run's time
    /// series can show the same figures on both backends.
    fn get_info(&self, _tp: &TcpSock) -> Option<CcInfo> {
        None
    }

    /// Linux `min_tso_segs`: the smallest super-packet the algorithm wants
    /// (`None`: the stack's `tcp_min_tso_segs`, 2).
    fn min_tso_segs(&self, _tp: &TcpSock) -> Option<u32> {
        None
    }

    /// True if the algorithm wants `skb_marked_lost` (the stack only records
    /// the lost segments' details for such algorithms).
    fn wants_skb_marked_lost(&self) -> bool {
        false
    }

    /// Called for each segment the stack marks lost (Linux `tcp_mark_skb_lost`
    /// calling `skb_marked_lost`, a hook of BBRv3's stack patches), before any
    /// other hook runs for the event that marked it.
    fn skb_marked_lost(&mut self, _tp: &mut TcpSock, _skb: &LostSkb) {}

    /// Linux `TCP_CONG_NEEDS_ECN` (DCTCP): the connection negotiates ECN
    /// whatever `tcp.ecn` says, and every data packet is ECN-capable,
    /// retransmissions included (Linux `INET_ECN_xmit` on the socket).
    fn needs_ecn(&self) -> bool {
        false
    }

    /// Whether the receiving socket, running the same algorithm, echoes the
    /// CE state of each data segment (DCTCP's `dctcp_ece_ack_update`: ECE
    /// exactly on ACKs of CE segments, and an immediate ACK when the state
    /// changes) instead of RFC 3168's ECE until CWR. Only with `needs_ecn`.
    fn ce_state_acks(&self) -> bool {
        false
    }

    /// Linux `TCP_CONG_NEEDS_ACCECN` (Prague): the connection negotiates
    /// Accurate ECN feedback (`tcp::accecn`); implies `needs_ecn`.
    fn needs_accecn(&self) -> bool {
        false
    }

    /// Linux `TCP_CONG_WANTS_ECT_1`: data packets carry ECT(1), the L4S
    /// identifier, instead of ECT(0).
    fn wants_ect_1(&self) -> bool {
        false
    }

    /// Linux `tso_segs`: the algorithm sizes super-packets itself (`None`:
    /// the stack's `tcp_tso_autosize` with `min_tso_segs`).
    fn tso_segs(&self, _tp: &TcpSock) -> Option<u32> {
        None
    }

    /// Whether the algorithm needs the stack's SACK on or off (`newreno` turns it
    /// off); `None` leaves the scenario's `tcp.sack` in force.
    fn sack(&self) -> Option<bool> {
        None
    }
}

/// A socket in congestion avoidance for the algorithms' unit tests: MSS 1448,
/// `hz` jiffies per second, `cwnd` packets, cwnd-limited, `ssthresh`.
#[cfg(test)]
pub(crate) fn test_sock(hz: u32, cwnd: u32, ssthresh: u32) -> TcpSock {
    let mut tp = TcpSock::new(1448, hz, cwnd);
    tp.ssthresh = ssthresh;
    tp.is_cwnd_limited = true;
    tp
}
