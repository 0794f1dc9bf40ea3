//! The data sender of one connection, following Linux's structure so that each
//! mechanism can be checked against its kernel counterpart by name. The files
//! follow Linux's:
//!
//! * here, the ACK path of `tcp_input.c`: `on_ack` is `tcp_ack`, with SACK
//!   tagging (`tcp_sacktag_write_queue`, D-SACK detection), cleaning the
//!   retransmission queue with RTT sampling (`tcp_clean_rtx_queue`,
//!   `tcp_ack_update_rtt`) and `tcp_cong_control` (PRR or the CCA); also the
//!   handshake and the packet and timer entry points;
//! * `recovery.rs`, the recovery half of `tcp_input.c`: the state machine
//!   `tcp_fastretrans_alert`, PRR, undo of spurious reductions by D-SACK,
//!   timestamps (Eifel) and F-RTO, NewReno's dupack accounting;
//! * `rack.rs`, `tcp_recovery.c`: RACK loss detection (RFC 8985) with SACK,
//!   NewReno head marking without it;
//! * `timer.rs`, `tcp_timer.c`: RTO, tail loss probe and RACK's reordering
//!   timeout sharing one timer as in Linux (`icsk_pending`), `tcp_enter_loss`;
//! * `output.rs`, `tcp_output.c`: `tcp_write_xmit`, `tcp_xmit_retransmit_queue`,
//!   internal pacing, cwnd validation;
//! * `rate.rs`, `tcp_rate.c`: delivery-rate sampling.
//!
//! `Rack`, `Recovery` and `RateSampler` own their state and are handed the
//! socket and the scoreboard they need; the sender's methods in the other files
//! call one another across files as Linux's functions do. Per-ACK work is
//! proportional to the segments the ACK newly acknowledges or SACKs, never to
//! the window.

use super::accecn::{AccEcnSender, AckFeedback, OptionCounters};
use super::config::TcpConfig;
use super::rtt::{initial_rto_jiffies, RttEstimator};
use crate::packet::{seq_after, seq_before};
use super::scoreboard::{Scoreboard, EVER_RETRANS, LOST, RETRANS, SACKED_ACKED, SACKED_RETRANS};
use super::seqset::SeqSet;
use super::ts_clock;
use crate::cc::{
    AckArrival, AckSample, CaEvent, CaState, CongestionControl, PacingStatus, RateSample, TcpSock, CA_ACK_ECE,
    CA_ACK_SLOWPATH, CA_ACK_WIN_UPDATE,
};
use crate::event::TimerKind;
use crate::host::tso::WriteQueue;
use crate::host::tsq::SmallQueues;
use crate::packet::{AckExt, AckSegment, Packet, Payload, SeqRange, ACK_BYTES, SYN_BYTES};
use crate::records::FlowCounters;
use crate::units::{jiffies_at, jiffies_to_usecs, Dur, Time};

mod output;
mod rack;
mod rate;
mod recovery;
mod timer;

use output::PushMode;
use rack::Rack;
use rate::RateSampler;
use recovery::{mark_skb_lost, Recovery};
use timer::XmitTimer;

// tcp_ack() flags (Linux FLAG_*).
const FLAG_DATA: u32 = 0x01;
const FLAG_WIN_UPDATE: u32 = 0x02;
const FLAG_DATA_ACKED: u32 = 0x04;
const FLAG_RETRANS_DATA_ACKED: u32 = 0x08;
const FLAG_SYN_ACKED: u32 = 0x10;
const FLAG_DATA_SACKED: u32 = 0x20;
const FLAG_ECE: u32 = 0x40;
const FLAG_LOST_RETRANS: u32 = 0x80;
const FLAG_ORIG_SACK_ACKED: u32 = 0x200;
const FLAG_SND_UNA_ADVANCED: u32 = 0x400;
const FLAG_DSACKING_ACK: u32 = 0x800;
const FLAG_SET_XMIT_TIMER: u32 = 0x1000;
const FLAG_ACK_MAYBE_DELAYED: u32 = 0x10000;
const FLAG_DSACK_TLP: u32 = 0x20000;
const FLAG_ACKED: u32 = FLAG_DATA_ACKED | FLAG_SYN_ACKED;
const FLAG_NOT_DUP: u32 = FLAG_DATA | FLAG_WIN_UPDATE | FLAG_ACKED;
const FLAG_CA_ALERT: u32 = FLAG_DATA_SACKED | FLAG_ECE | FLAG_DSACKING_ACK;
const FLAG_FORWARD_PROGRESS: u32 = FLAG_ACKED | FLAG_DATA_SACKED;

/// Linux sysctl_tcp_max_reordering.
const MAX_REORDERING: u32 = 300;
/// Linux sysctl_tcp_reordering.
const SYSCTL_REORDERING: u32 = 3;
/// tcp_min_rtt_wlen: 300 s window of the min-RTT filter (in jiffies at use).
const MIN_RTT_WLEN_SECS: u32 = 300;
/// Linux sysctl_tcp_pacing_ss_ratio / ca_ratio (percent).
const PACING_SS_RATIO: u64 = 200;
const PACING_CA_RATIO: u64 = 120;
/// SYN retransmissions before the sender gives up (Linux
/// net.ipv4.tcp_syn_retries, default TCP_SYN_RETRIES = 6).
const SYN_RETRIES_MAX: u32 = 6;

/// What `tcp_fastretrans_alert` asks `tcp_xmit_recovery` to send (Linux REXMIT_*).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rexmit {
    None,
    Lost,
    New,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnState {
    Closed,
    SynSent,
    Established,
    /// A finite transfer is fully acknowledged.
    Done,
}

/// Per-ACK SACK processing results (Linux `tcp_sacktag_state`).
#[derive(Default)]
struct SackState {
    first_sackt: u64,
    last_sackt: u64,
    reord: u32,
    sack_delivered: u32,
    flag: u32,
}

pub struct TcpSender {
    pub flow: u32,
    cfg: TcpConfig,
    pub sock: TcpSock,
    pub cc: Box<dyn CongestionControl>,
    pub state: ConnState,

    board: Scoreboard,
    /// SACKed ranges at or above SND.UNA.
    sacked: SeqSet,
    rtt: RttEstimator,
    /// Current RTO in jiffies (Linux `icsk_rto`, backed off on timeouts).
    rto_jiffies: u64,
    /// Consecutive RTOs for the current head (Linux `icsk_retransmits`).
    retransmits: u32,
    xmit_timer: Option<(XmitTimer, Time)>,
    pacing_timer: Option<Time>,
    syn_timer: Option<Time>,
    syn_sent_at: Time,
    syn_attempts: u32,

    /// Loss recovery: episode bounds, undo, PRR (tcp_input.c).
    rec: Recovery,
    /// F-RTO is probing whether the last RTO was spurious (Linux `tp->frto`).
    frto: bool,
    /// SND.NXT when a loss probe was sent; the probe episode lasts until an
    /// ACK reaches it (Linux `tlp_high_seq`, 0 meaning none).
    tlp_high_seq: Option<u32>,
    /// The probe was a retransmission, not new data.
    tlp_retrans: bool,
    /// RACK loss detection (tcp_recovery.c).
    rack: Rack,
    /// Reorderings seen (Linux `reord_seen`).
    reord_seen: u32,
    /// Segments retransmitted and segments reported by D-SACKs, in total: more
    /// D-SACKs than retransmissions are not the sender's doing.
    total_retrans: u64,
    dsack_dups: u64,
    /// SACK reneging seen in this episode (Linux `is_sack_reneg`).
    is_sack_reneg: bool,

    /// Latest timestamp echo from the peer.
    rcv_tsecr: u32,
    /// Right edge of the peer's receive window (segment number).
    snd_wnd_end: u32,
    snd_wnd: u32,
    max_window: u32,

    /// Delivery-rate sampling (tcp_rate.c).
    rate: RateSampler,

    // Application.
    /// Segments the application has written in total (None: unlimited).
    app_segments: Option<u32>,
    /// Payload of the last segment of a finite transfer.
    tail_payload: u32,
    app_stopped: bool,
    /// The application has not begun writing yet (`hold_app`).
    app_held: bool,
    snd_cwnd_used: u32,
    sndbuf_limited: bool,

    // Pacing: segments sent (the first 10 leave unpaced); the earliest
    // departure time is `sock.wstamp_ns`.
    data_segs_out: u64,

    // Segmentation offload (host/tso.rs): on for this flow; the latest
    // transmission (Linux `tcp_wstamp_ns` without pacing); while a
    // super-packet is being emitted, its payload so far (paced as one).
    pub(crate) tso: bool,
    /// The device has no segmentation offload: each super-packet is
    /// segmented in software as it leaves (Linux GSO, always on for TCP since
    /// 4.13), so the network and the receiver see its segments.
    pub(crate) segment_at_device: bool,
    last_write_ns: u64,
    skb_bytes: Option<u64>,
    // The write queue's skbs of new data as tcp_sendmsg builds them
    // (host/tso.rs), when on.
    pub(crate) write_queue: Option<WriteQueue>,
    /// Which kernel's TSO deferral rule applies (`[hosts] tso_defer`).
    pub(crate) tso_defer: crate::host::tso::DeferRule,
    // TCP Small Queues (host/tsq.rs), when on; the first sequence number of
    // the newest skb of new data (is the retransmit queue a single skb?).
    pub(crate) tsq: Option<SmallQueues>,
    last_skb_seq: u32,

    // ECN.
    ecn_ok: bool,
    queue_cwr: bool,
    /// What the algorithm needs of ECN (Linux `TCP_CONG_NEEDS_ECN`,
    /// `TCP_CONG_NEEDS_ACCECN`, `TCP_CONG_WANTS_ECT_1`).
    ca_needs_ecn: bool,
    ca_needs_accecn: bool,
    ca_wants_ect_1: bool,
    /// Accurate ECN feedback negotiated, and the sender's side of it.
    accecn: bool,
    accecn_rx: AccEcnSender,
    /// The ACK being processed carried ECE (what Linux passes as `ece_ack`
    /// to `tcp_count_delivered`).
    ece_ack: bool,

    pub counters: FlowCounters,
    /// The last valid delivery-rate sample, bit/s.
    pub last_delivery_rate_bps: u64,
}

impl TcpSender {
    pub fn new(flow: u32, cfg: &TcpConfig, cc: Box<dyn CongestionControl>, total_bytes: Option<u64>) -> TcpSender {
        let mut cfg = cfg.clone();
        if let Some(sack) = cc.sack() {
            cfg.sack = sack;
        }
        let cfg = &cfg;
        let mss = cfg.mss;
        let (app_segments, tail_payload) = match total_bytes {
            Some(b) => {
                let b = b.max(1);
                let segs = b.div_ceil(mss as u64) as u32;
                let tail = (b - (segs as u64 - 1) * mss as u64) as u32;
                (Some(segs), tail)
            }
            None => (None, mss),
        };
        let ca_needs_accecn = cc.needs_accecn();
        let ca_needs_ecn = cc.needs_ecn() || ca_needs_accecn;
        let ca_wants_ect_1 = cc.wants_ect_1();
        let mut sock = TcpSock::new(mss, cfg.hz, cfg.initial_cwnd);
        if cfg.pacing || cc.wants_pacing() {
            sock.pacing_status = PacingStatus::Needed;
        }
        TcpSender {
            flow,
            cfg: cfg.clone(),
            sock,
            cc,
            state: ConnState::Closed,
            board: Scoreboard::new(),
            sacked: SeqSet::new(),
            rtt: RttEstimator::default(),
            rto_jiffies: initial_rto_jiffies(cfg.hz),
            retransmits: 0,
            xmit_timer: None,
            pacing_timer: None,
            syn_timer: None,
            syn_sent_at: Time::ZERO,
            syn_attempts: 0,
            rec: Recovery::default(),
            frto: false,
            tlp_high_seq: None,
            tlp_retrans: false,
            rack: Rack::default(),
            reord_seen: 0,
            total_retrans: 0,
            dsack_dups: 0,
            is_sack_reneg: false,
            rcv_tsecr: 0,
            snd_wnd_end: 0,
            snd_wnd: 0,
            max_window: 0,
            rate: RateSampler::default(),
            app_segments,
            tail_payload,
            app_stopped: false,
            app_held: false,
            snd_cwnd_used: 0,
            sndbuf_limited: false,
            data_segs_out: 0,
            tso: false,
            segment_at_device: false,
            last_write_ns: 0,
            skb_bytes: None,
            write_queue: None,
            tso_defer: Default::default(),
            tsq: None,
            last_skb_seq: 0,
            ecn_ok: false,
            queue_cwr: false,
            ca_needs_ecn,
            ece_ack: false,
            ca_needs_accecn,
            ca_wants_ect_1,
            accecn: false,
            accecn_rx: AccEcnSender::default(),
            counters: FlowCounters { start_ns: u64::MAX, ..Default::default() },
            last_delivery_rate_bps: 0,
        }
    }

    // ------------------------------------------------------------------
    // Clock and small helpers
    // ------------------------------------------------------------------

    fn tick(&mut self, now: Time) {
        self.sock.now = now;
        self.sock.mstamp_us = now.as_us();
        self.sock.jiffies = jiffies_at(now, self.cfg.hz);
    }

    #[inline]
    fn hz(&self) -> u32 {
        self.cfg.hz
    }

    #[inline]
    fn now_us(&self) -> u64 {
        self.sock.mstamp_us
    }

    #[inline]
    fn is_sack(&self) -> bool {
        self.cfg.sack
    }

    #[inline]
    fn is_reno(&self) -> bool {
        !self.cfg.sack
    }

    #[inline]
    fn in_cwnd_reduction(&self) -> bool {
        matches!(self.sock.ca_state, CaState::Cwr | CaState::Recovery)
    }

    #[inline]
    fn left_out(&self) -> u32 {
        self.sock.sacked_out + self.sock.lost_out
    }

    #[inline]
    fn in_flight(&self) -> u32 {
        self.sock.packets_in_flight()
    }

    #[inline]
    fn seg_payload(&self, seq: u32) -> u32 {
        match self.app_segments {
            Some(n) if seq + 1 == n => self.tail_payload,
            _ => self.cfg.mss,
        }
    }

    /// Linux `tcp_highest_sack_seq`.
    fn highest_sack_seq(&self) -> u32 {
        if self.sock.sacked_out == 0 {
            return self.sock.snd_una;
        }
        self.sacked.max_end().unwrap_or(self.sock.snd_nxt)
    }

    /// Linux `tcp_current_ssthresh`.
    #[inline]
    fn current_ssthresh(&self) -> u32 {
        if self.in_cwnd_reduction() {
            self.sock.ssthresh
        } else {
            self.sock.ssthresh.max((self.sock.cwnd >> 1) + (self.sock.cwnd >> 2))
        }
    }

    /// Linux `tcp_any_retrans_done`.
    fn any_retrans_done(&self) -> bool {
        if self.sock.retrans_out > 0 {
            return true;
        }
        !self.board.is_empty() && self.board.get(self.sock.snd_una).sacked & EVER_RETRANS != 0
    }

    fn set_ca_state(&mut self, new: CaState) {
        self.cc.set_state(&mut self.sock, new);
        self.sock.ca_state = new;
    }

    fn ca_event(&mut self, ev: CaEvent) {
        self.cc.cwnd_event(&mut self.sock, ev);
    }

    /// Whether the application has a segment ready beyond SND.NXT.
    #[inline]
    fn has_new_data(&self) -> bool {
        if self.app_stopped || self.app_held {
            return false;
        }
        match self.app_segments {
            Some(n) => self.sock.snd_nxt < n,
            None => true,
        }
    }

    pub fn timer_deadline(&self, kind: TimerKind) -> Option<Time> {
        match kind {
            TimerKind::Xmit => self.xmit_timer.map(|(_, t)| t),
            TimerKind::Pacing => self.pacing_timer,
            TimerKind::Syn => self.syn_timer,
            _ => None,
        }
    }

    pub fn rto_us(&self) -> u64 {
        jiffies_to_usecs(self.rto_jiffies, self.hz())
    }

    pub fn srtt_us(&self) -> u32 {
        self.rtt.srtt_us()
    }

    /// The handshake has completed.
    pub fn is_established(&self) -> bool {
        self.state == ConnState::Established
    }

    // ------------------------------------------------------------------
    // Connection set-up
    // ------------------------------------------------------------------

    /// Opens the connection: sends a SYN.
    pub fn connect(&mut self, now: Time, out: &mut Vec<Packet>) {
        self.tick(now);
        self.state = ConnState::SynSent;
        self.counters.start_ns = now.0;
        self.send_syn(out);
    }

    fn send_syn(&mut self, out: &mut Vec<Packet>) {
        self.syn_sent_at = self.sock.now;
        out.push(Packet {
            flow: self.flow,
            wire_bytes: SYN_BYTES,
            reverse: false,
            hop: 0,
            epoch: 0,
            payload: Payload::Syn { tsval: ts_clock(self.sock.now) },
        });
        // SYN retransmission: 1 s, doubling (TCP_TIMEOUT_INIT with backoff).
        let rto = initial_rto_jiffies(self.hz()) << self.syn_attempts;
        self.syn_timer = Some(self.jiffies_deadline(rto));
    }

    fn on_synack(&mut self, tsecr: u32, out: &mut Vec<Packet>) {
        if self.state != ConnState::SynSent {
            return;
        }
        self.state = ConnState::Established;
        self.syn_timer = None;
        // RTT sample from the handshake (Karn: only if the SYN was not retransmitted,
        // otherwise from the timestamp echo).
        let rtt_us = if self.syn_attempts == 0 {
            self.sock.now.since(self.syn_sent_at).as_us()
        } else {
            (ts_clock(self.sock.now).wrapping_sub(tsecr).max(1) as u64) * 1000
        };
        self.sock.snd_una = 0;
        self.sock.snd_nxt = 0;
        self.rtt.sample(rtt_us.max(1) as u32, 0, 0, self.cfg.rto_min_us);
        self.sock.srtt_us8 = self.rtt.srtt_us8;
        self.update_rtt_min(rtt_us as u32, 0);
        self.rto_jiffies = self.rtt.rto_jiffies(self.hz());
        // RFC 5681: after a lost SYN the initial window is one segment.
        if self.syn_attempts > 0 {
            self.sock.cwnd = 1;
        }
        // An algorithm that needs ECN negotiates it whatever net.ipv4.tcp_ecn says.
        self.ecn_ok = self.cfg.ecn || self.ca_needs_ecn;
        self.accecn = self.ca_needs_accecn;
        self.snd_wnd_end = (self.cfg.rcvbuf / self.cfg.mss as u64).min(u32::MAX as u64 / 2) as u32;
        self.snd_wnd = self.snd_wnd_end;
        self.max_window = self.snd_wnd;
        self.sock.lsndtime = self.sock.jiffies;
        if self.cc.wants_skb_marked_lost() {
            self.board.lost_log = Some(Vec::new());
        }
        // The handshake's ACK leaves at once, ahead of any data: Linux saves
        // it only for a writer already waiting on the connect, which a bulk
        // tool's blocking connect-then-write never is.
        out.push(Packet {
            flow: self.flow,
            wire_bytes: ACK_BYTES,
            reverse: false,
            hop: 0,
            epoch: 0,
            payload: Payload::HandshakeAck,
        });
        self.cc.init(&mut self.sock);
        // As in Linux, an algorithm with `cong_control` (BBR) sets its own
        // initial pacing rate in `init`.
        if !self.cc.has_cong_control() {
            self.update_pacing_rate();
        }
        self.write_xmit(out, PushMode::Normal);
    }

    /// The application stops writing (flow stop time).
    pub fn stop_app(&mut self, now: Time) {
        self.tick(now);
        self.app_stopped = true;
    }

    /// The application will not write until `release_app` (a tool that
    /// exchanges control messages after the handshake, as iperf3 does).
    pub fn hold_app(&mut self) {
        self.app_held = true;
    }

    /// The application begins writing: sends what the window allows if the
    /// connection is established (else the SYN-ACK will).
    pub fn release_app(&mut self, now: Time, out: &mut Vec<Packet>) {
        self.tick(now);
        self.app_held = false;
        if self.state == ConnState::Established {
            self.write_xmit(out, PushMode::Normal);
        }
    }

    // ------------------------------------------------------------------
    // Packet and timer entry points
    // ------------------------------------------------------------------

    pub fn on_packet(&mut self, now: Time, pkt: &Packet, out: &mut Vec<Packet>) {
        self.tick(now);
        match pkt.payload {
            Payload::SynAck { tsecr } => self.on_synack(tsecr, out),
            Payload::Ack(ref a) if self.state == ConnState::Established => {
                self.on_ack(a, out);
                self.write_xmit(out, PushMode::Normal);
                self.check_done();
            }
            _ => {}
        }
    }

    /// The host's NIC finished sending a data segment of `payload` bytes of
    /// this flow; `last` if it ends its skb, which is then freed. Linux's
    /// `tcp_wfree`: a socket throttled by TCP Small Queues writes again
    /// (`tcp_tsq_write`: lost segments first, then new data). Returns true
    /// if it did.
    pub fn nic_tx_done(&mut self, now: Time, payload: u32, last: bool, out: &mut Vec<Packet>) -> bool {
        let Some(q) = &mut self.tsq else { return false };
        if !q.tx_done(payload as u64, last) || self.state != ConnState::Established {
            return false;
        }
        self.tick(now);
        if self.sock.lost_out > self.sock.retrans_out && self.sock.cwnd > self.in_flight() {
            self.xmit_retransmit_queue(out);
        }
        self.write_xmit(out, PushMode::Normal);
        true
    }

    pub fn on_timer(&mut self, now: Time, kind: TimerKind, out: &mut Vec<Packet>) {
        self.tick(now);
        match kind {
            TimerKind::Syn if self.state == ConnState::SynSent && self.syn_timer.is_some_and(|t| t <= now) => {
                self.syn_timer = None;
                if self.syn_attempts < SYN_RETRIES_MAX {
                    self.syn_attempts += 1;
                    self.counters.syn_retransmissions += 1;
                    self.send_syn(out);
                }
            }
            TimerKind::Pacing if self.pacing_timer.is_some_and(|t| t <= now) => {
                self.pacing_timer = None;
                if self.state == ConnState::Established {
                    // The pacing tasklet: retransmissions first, then new data.
                    if self.sock.lost_out > self.sock.retrans_out {
                        self.xmit_retransmit_queue(out);
                    }
                    self.write_xmit(out, PushMode::Normal);
                }
            }
            TimerKind::Xmit => {
                let Some((what, t)) = self.xmit_timer else { return };
                if t > now || self.state != ConnState::Established {
                    return;
                }
                self.xmit_timer = None;
                match what {
                    XmitTimer::ReoTimeout => self.rack_reo_timeout(out),
                    XmitTimer::LossProbe => self.send_loss_probe(out),
                    XmitTimer::Retrans => self.retransmit_timer(out),
                }
                self.write_xmit(out, PushMode::Normal);
            }
            _ => {}
        }
    }

    fn check_done(&mut self) {
        if let Some(n) = self.app_segments {
            if self.sock.snd_una >= n && self.state == ConnState::Established {
                self.state = ConnState::Done;
                self.counters.completion_ns = self.sock.now.0;
                self.xmit_timer = None;
                self.pacing_timer = None;
            }
        }
    }

    // ------------------------------------------------------------------
    // ACK processing (tcp_ack)
    // ------------------------------------------------------------------

    fn on_ack(&mut self, a: &AckSegment, out: &mut Vec<Packet>) {
        let ack = a.ack;
        let prior_snd_una = self.sock.snd_una;
        let prior_packets = self.sock.packets_out;
        let prior_delivered = self.sock.delivered;
        let prior_lost = self.sock.lost;
        let is_sack_reneg = self.is_sack_reneg;
        let mut sack_state = SackState { reord: self.sock.snd_nxt, ..Default::default() };
        let mut rs = RateSample::default();
        let mut flag = 0u32;
        let mut rexmit = Rexmit::None;
        self.ece_ack = false;

        self.rcv_tsecr = a.tsecr;
        let arrival =
            AckArrival { ack, rx_seq: a.rx_seq(), rx_ns: a.rx_time(self.sock.now.0), now_ns: self.sock.now.0, tsecr: a.tsecr };
        self.cc.ack_arrival(&mut self.sock, &arrival);

        if seq_before(ack, prior_snd_una) {
            // Old ACK: may still carry SACK/DSACK information.
            if a.sack.n > 0 && self.is_sack() {
                flag |= self.sacktag(a, prior_snd_una, &mut sack_state, &mut rs);
                self.fastretrans_alert(prior_snd_una, 0, &mut flag, &mut rexmit);
                self.xmit_recovery(rexmit, out);
            }
            return;
        }
        if seq_after(ack, self.sock.snd_nxt) {
            return;
        }
        if seq_after(ack, prior_snd_una) {
            flag |= FLAG_SND_UNA_ADVANCED;
            self.retransmits = 0;
        }
        let prior_fack = if self.is_sack() { self.highest_sack_seq() } else { self.sock.snd_una };
        rs.prior_in_flight = self.in_flight();

        let new_wnd = a.wnd_end.wrapping_sub(ack);
        let win_changed = new_wnd != self.snd_wnd;
        if flag & FLAG_SND_UNA_ADVANCED != 0 && a.sack.n == 0 && !a.ece && !win_changed {
            // Fast path: pure forward advance, window unchanged.
            self.snd_una_update(ack);
            flag |= FLAG_WIN_UPDATE;
            self.cc.in_ack_event(&mut self.sock, CA_ACK_WIN_UPDATE);
        } else {
            let mut ev = CA_ACK_SLOWPATH;
            // tcp_ack_update_window: an update if the ACK advances or the window grows.
            if seq_after(ack, prior_snd_una) || new_wnd > self.snd_wnd {
                flag |= FLAG_WIN_UPDATE;
            }
            self.snd_wnd = new_wnd;
            self.max_window = self.max_window.max(new_wnd);
            self.snd_una_update(ack);
            if a.sack.n > 0 && self.is_sack() {
                flag |= self.sacktag(a, prior_snd_una, &mut sack_state, &mut rs);
            }
            if a.ece && self.ecn_ok {
                flag |= FLAG_ECE;
                ev |= CA_ACK_ECE;
                self.ece_ack = true;
            }
            if sack_state.sack_delivered > 0 {
                self.count_delivered(sack_state.sack_delivered);
            }
            if flag & FLAG_WIN_UPDATE != 0 {
                ev |= CA_ACK_WIN_UPDATE;
            }
            self.cc.in_ack_event(&mut self.sock, ev);
        }
        self.snd_wnd_end = self.snd_wnd_end.max(a.wnd_end);

        if prior_packets == 0 {
            // Nothing outstanding: only D-SACK undo matters.
            if flag & FLAG_DSACKING_ACK != 0 {
                self.fastretrans_alert(prior_snd_una, 0, &mut flag, &mut rexmit);
            }
            if self.tlp_high_seq.is_some() {
                self.process_tlp_ack(ack, flag);
            }
            return;
        }

        flag |= self.clean_rtx_queue(prior_fack, prior_snd_una, &mut sack_state, &mut rs, flag);
        if self.accecn {
            // tcp_accecn_process: the newly CE-marked packets among those delivered.
            let delivered = self.sock.delivered - prior_delivered;
            let feedback = AckFeedback {
                ace: a.ace,
                option: match a.ext {
                    AckExt::AccEcn { fields, e1b, ceb } => Some(OptionCounters { fields, e1b: e1b.get(), ceb: ceb.get() }),
                    _ => None,
                },
                delivered_pkts: delivered,
                // Every segment but a finite transfer's last carries one MSS.
                delivered_bytes: delivered.saturating_mul(self.sock.mss),
                progress: flag & FLAG_FORWARD_PROGRESS != 0,
            };
            let sack_or_open = self.is_sack() || matches!(self.sock.ca_state, CaState::Open | CaState::Cwr);
            let delta = self.accecn_rx.process(&feedback, self.sock.delivered_ce, self.sock.mss, sack_or_open);
            if delta > 0 {
                self.sock.delivered_ce = self.sock.delivered_ce.wrapping_add(delta);
                flag |= FLAG_ECE;
                rs.ece_delta = delta;
            }
        }

        self.rack.update_reo_wnd(&rs, self.sock.delivered);
        if self.tlp_high_seq.is_some() {
            self.process_tlp_ack(ack, flag);
        }
        if self.ack_is_dubious(flag) {
            let num_dupack = if flag & (FLAG_SND_UNA_ADVANCED | FLAG_NOT_DUP) == 0 { 1 } else { 0 };
            self.fastretrans_alert(prior_snd_una, num_dupack, &mut flag, &mut rexmit);
        }
        // After the state machine (Linux 5.8+), so that a TLP is scheduled
        // in the state the ACK left, and not at all when RACK just armed its
        // reordering timer.
        if flag & FLAG_SET_XMIT_TIMER != 0 {
            self.set_xmit_timer();
        }

        let delivered = self.sock.delivered - prior_delivered;
        let lost = self.sock.lost - prior_lost;
        rs.is_ack_delayed = flag & FLAG_ACK_MAYBE_DELAYED != 0;
        rs.is_ece = flag & FLAG_ECE != 0;
        if let Some(bps) = self.rate.gen(&mut self.sock, delivered, lost, is_sack_reneg, &mut rs, self.cfg.mss) {
            self.last_delivery_rate_bps = bps;
        }
        self.cong_control(ack, delivered, flag, &rs);
        self.xmit_recovery(rexmit, out);
    }

    fn snd_una_update(&mut self, ack: u32) {
        if seq_after(ack, self.sock.snd_una) {
            let acked_segs = ack - self.sock.snd_una;
            let mut bytes = acked_segs as u64 * self.cfg.mss as u64;
            if let Some(n) = self.app_segments {
                if ack >= n {
                    bytes -= (self.cfg.mss - self.tail_payload) as u64;
                }
            }
            self.counters.bytes_acked += bytes;
            self.sock.snd_una = ack;
        }
    }

    /// Linux `tcp_count_delivered`.
    fn count_delivered(&mut self, n: u32) {
        self.sock.delivered += n;
        if self.ece_ack {
            self.sock.delivered_ce += n;
        }
    }

    /// Reports the segments just marked lost to an algorithm that asked
    /// (`skb_marked_lost`), in the order they were marked.
    fn notify_skbs_marked_lost(&mut self) {
        let Some(log) = self.board.lost_log.as_mut() else { return };
        if log.is_empty() {
            return;
        }
        let lost = std::mem::take(log);
        for skb in &lost {
            self.cc.skb_marked_lost(&mut self.sock, skb);
        }
        // Hand the buffer back so that later marks reuse its allocation.
        let mut lost = lost;
        lost.clear();
        self.board.lost_log = Some(lost);
    }

    fn ack_is_dubious(&self, flag: u32) -> bool {
        flag & FLAG_NOT_DUP == 0 || flag & FLAG_CA_ALERT != 0 || self.sock.ca_state != CaState::Open
    }

    fn may_raise_cwnd(&self, flag: u32) -> bool {
        if self.sock.reordering > SYSCTL_REORDERING {
            return flag & FLAG_FORWARD_PROGRESS != 0;
        }
        flag & FLAG_DATA_ACKED != 0
    }

    // ---- SACK tagging (tcp_sacktag_write_queue) ----

    fn sacktag(&mut self, a: &AckSegment, prior_snd_una: u32, st: &mut SackState, rs: &mut RateSample) -> u32 {
        let blocks = a.sack.as_slice();
        let mut flag = 0u32;
        // D-SACK detection (tcp_check_dsack): a first block below the cumulative
        // ACK, or inside the second block, reports a duplicate.
        let mut dup_first = false;
        if let Some(b0) = blocks.first() {
            if seq_before(b0.start, a.ack) {
                dup_first = true;
            } else if blocks.len() > 1 {
                let b1 = blocks[1];
                if !seq_after(b0.end, b1.end) && !seq_before(b0.start, b1.start) {
                    dup_first = true;
                }
            }
        }
        if dup_first {
            let b0 = blocks[0];
            flag |= FLAG_DSACKING_ACK;
            self.dsack_seen(b0, st);
            // A D-SACK for already-acknowledged data: the retransmission was unnecessary.
            if let Some(marker) = self.rec.undo_marker {
                if self.rec.undo_retrans > 0 && !seq_after(b0.end, prior_snd_una) && seq_after(b0.end, marker) {
                    self.rec.undo_retrans -= 1;
                }
            }
            // D-SACK above SND.UNA: tag each segment as a duplicate.
            let start = b0.start.max(self.sock.snd_una);
            let end = b0.end.min(self.sock.snd_nxt);
            for seq in start..end {
                self.sacktag_one(seq, true, st, rs);
            }
        }
        for (i, b) in blocks.iter().enumerate() {
            if i == 0 && dup_first {
                continue;
            }
            // tcp_is_sackblock_valid, simplified: within (SND.UNA, SND.NXT].
            if !seq_after(b.end, self.sock.snd_una) || seq_after(b.end, self.sock.snd_nxt) || !seq_before(b.start, b.end) {
                continue;
            }
            let r = SeqRange::new(b.start.max(self.sock.snd_una), b.end);
            let mut gaps: [SeqRange; 8] = [SeqRange::default(); 8];
            let mut ngaps = 0;
            let mut overflow: Vec<SeqRange> = Vec::new();
            self.sacked.for_each_gap(r, |g| {
                if ngaps < gaps.len() {
                    gaps[ngaps] = g;
                    ngaps += 1;
                } else {
                    overflow.push(g);
                }
            });
            for g in gaps[..ngaps].iter().chain(overflow.iter()) {
                for seq in g.start..g.end {
                    self.sacktag_one(seq, false, st, rs);
                }
            }
            self.sacked.insert(r);
        }
        if st.reord != self.sock.snd_nxt && seq_before(st.reord, self.sock.snd_nxt) {
            // Reordering detected among SACKed segments.
            let fack = self.highest_sack_seq();
            if seq_before(st.reord, fack) {
                self.check_sack_reordering(st.reord, false);
            }
        }
        flag | st.flag
    }

    fn dsack_seen(&mut self, b: SeqRange, st: &mut SackState) {
        if !seq_before(b.start, b.end) {
            return;
        }
        let len = b.len();
        if len > self.max_window.max(1) {
            return;
        }
        if len == 1 {
            if let Some(t) = self.tlp_high_seq {
                if t == b.end {
                    st.flag |= FLAG_DSACK_TLP;
                }
            }
        }
        self.dsack_dups += len as u64;
        if self.dsack_dups > self.total_retrans {
            return;
        }
        // RACK widens its reordering window on D-SACKs, except for TLP probes.
        if st.flag & FLAG_DSACK_TLP == 0 {
            self.rack.dsack_seen = true;
        }
    }

    /// Linux `tcp_sacktag_one` for one segment.
    fn sacktag_one(&mut self, seq: u32, dup_sack: bool, st: &mut SackState, rs: &mut RateSample) {
        if !self.board.contains(seq) {
            return;
        }
        let mut sacked = self.board.get(seq).sacked;
        let xmit = self.board.get(seq).xmit_us;
        if dup_sack && sacked & RETRANS != 0 {
            if let Some(marker) = self.rec.undo_marker {
                if self.rec.undo_retrans > 0 && seq_after(seq + 1, marker) {
                    self.rec.undo_retrans -= 1;
                }
            }
            if sacked & SACKED_ACKED != 0 && seq_before(seq, st.reord) {
                st.reord = seq;
            }
        }
        if !seq_after(seq + 1, self.sock.snd_una) {
            return;
        }
        if sacked & SACKED_ACKED == 0 {
            self.rack.advance(sacked, seq + 1, xmit, self.now_us(), self.sock.min_rtt_us());
            if sacked & SACKED_RETRANS != 0 {
                if sacked & LOST != 0 {
                    sacked &= !(LOST | SACKED_RETRANS);
                    self.sock.lost_out -= 1;
                    self.sock.retrans_out -= 1;
                }
            } else {
                if sacked & RETRANS == 0 {
                    // A never-retransmitted segment SACKed below the highest SACK: reordering.
                    if seq_before(seq, self.highest_sack_seq()) && seq_before(seq, st.reord) {
                        st.reord = seq;
                    }
                    if !seq_after(seq + 1, self.rec.high_seq) {
                        st.flag |= FLAG_ORIG_SACK_ACKED;
                    }
                    if st.first_sackt == 0 {
                        st.first_sackt = xmit;
                    }
                    st.last_sackt = xmit;
                }
                if sacked & LOST != 0 {
                    sacked &= !LOST;
                    self.sock.lost_out -= 1;
                }
            }
            sacked |= SACKED_ACKED;
            st.flag |= FLAG_DATA_SACKED;
            self.sock.sacked_out += 1;
            st.sack_delivered += 1;
            self.board.get_mut(seq).sacked = sacked;
            self.rate.skb_delivered(self.board.get_mut(seq), seq + 1, rs);
            self.board.ts_unlink(seq);
            if dup_sack {
                self.sacked.insert(SeqRange::new(seq, seq + 1));
            }
        }
        if dup_sack && sacked & SACKED_RETRANS != 0 {
            sacked &= !SACKED_RETRANS;
            self.sock.retrans_out -= 1;
        }
        self.board.get_mut(seq).sacked = sacked;
    }

    fn check_sack_reordering(&mut self, low_seq: u32, _ts: bool) {
        let fack = self.highest_sack_seq();
        if !seq_before(low_seq, fack) {
            return;
        }
        let metric = fack - low_seq;
        if metric > self.sock.reordering {
            self.sock.reordering = metric.min(MAX_REORDERING);
        }
        self.reord_seen += 1;
    }

    // ---- Cleaning the retransmission queue (tcp_clean_rtx_queue) ----

    fn clean_rtx_queue(
        &mut self,
        prior_fack: u32,
        prior_snd_una: u32,
        st: &mut SackState,
        rs: &mut RateSample,
        ack_flag: u32,
    ) -> u32 {
        let prior_sacked = self.sock.sacked_out;
        let mut reord = self.sock.snd_nxt;
        let mut first_ackt = 0u64;
        let mut last_ackt = 0u64;
        let mut last_in_flight = 0u32;
        let mut pkts_acked = 0u32;
        let mut flag = 0u32;
        let snd_una = self.sock.snd_una;

        while !self.board.is_empty() && seq_before(self.board.una(), snd_una) {
            let seq = self.board.una();
            let seg = *self.board.get(seq);
            let sacked = seg.sacked;
            if sacked & RETRANS != 0 {
                if sacked & SACKED_RETRANS != 0 {
                    self.sock.retrans_out -= 1;
                }
                flag |= FLAG_RETRANS_DATA_ACKED;
            } else if sacked & SACKED_ACKED == 0 {
                last_ackt = seg.xmit_us;
                if first_ackt == 0 {
                    first_ackt = last_ackt;
                }
                last_in_flight = seg.tx_in_flight;
                if seq_before(seq, reord) {
                    reord = seq;
                }
                if !seq_after(seq + 1, self.rec.high_seq) {
                    flag |= FLAG_ORIG_SACK_ACKED;
                }
            }
            if sacked & SACKED_ACKED != 0 {
                self.sock.sacked_out -= 1;
            } else if self.is_sack() {
                self.count_delivered(1);
                if !self.skb_spurious_retrans(sacked, seg.xmit_us) {
                    self.rack.advance(sacked, seq + 1, seg.xmit_us, self.now_us(), self.sock.min_rtt_us());
                }
            }
            if sacked & LOST != 0 {
                self.sock.lost_out -= 1;
            }
            self.sock.packets_out -= 1;
            pkts_acked += 1;
            self.rate.skb_delivered(self.board.get_mut(seq), seq + 1, rs);
            flag |= FLAG_DATA_ACKED;
            self.board.pop_head();
        }
        self.sacked.remove_below(snd_una);

        let mut seq_rtt_us: i64 = -1;
        let mut sack_rtt_us: i64 = -1;
        let mut ca_rtt_us: i64 = -1;
        let now = self.now_us();
        if first_ackt != 0 && flag & FLAG_RETRANS_DATA_ACKED == 0 {
            seq_rtt_us = now.saturating_sub(first_ackt) as i64;
            ca_rtt_us = now.saturating_sub(last_ackt) as i64;
            if pkts_acked == 1
                && last_in_flight < self.cfg.mss
                && last_in_flight > 0
                && prior_sacked == 0
                && rs.prior_delivered + 1 == self.sock.delivered
                && (ack_flag | flag) & (FLAG_CA_ALERT | FLAG_SYN_ACKED) == 0
            {
                flag |= FLAG_ACK_MAYBE_DELAYED;
            }
        }
        if st.first_sackt != 0 {
            sack_rtt_us = now.saturating_sub(st.first_sackt) as i64;
            ca_rtt_us = now.saturating_sub(st.last_sackt) as i64;
        }
        let rtt_update = self.ack_update_rtt(flag | ack_flag, seq_rtt_us, sack_rtt_us, ca_rtt_us, rs);

        if flag & FLAG_ACKED != 0 {
            flag |= FLAG_SET_XMIT_TIMER;
            if self.is_reno() {
                self.remove_reno_sacks(pkts_acked);
                if flag & FLAG_RETRANS_DATA_ACKED != 0 {
                    flag &= !FLAG_ORIG_SACK_ACKED;
                }
            } else if seq_before(reord, prior_fack) {
                self.check_sack_reordering(reord, false);
            }
        } else if !self.board.is_empty() && rtt_update && sack_rtt_us >= 0 {
            let head_age = now.saturating_sub(self.board.get(self.sock.snd_una).xmit_us) as i64;
            if sack_rtt_us > head_age {
                flag |= FLAG_SET_XMIT_TIMER;
            }
        }
        let _ = prior_snd_una;

        let sample = AckSample { pkts_acked, rtt_us: rs.rtt_us, in_flight: last_in_flight };
        self.cc.pkts_acked(&mut self.sock, &sample);
        flag
    }

    /// Linux `tcp_skb_spurious_retrans`: the echo predates this retransmission.
    fn skb_spurious_retrans(&self, sacked: u8, xmit_us: u64) -> bool {
        sacked & RETRANS != 0 && tsopt_ecr_before(self.rcv_tsecr, ts_of_us(xmit_us))
    }

    /// Linux `tcp_ack_update_rtt`.
    fn ack_update_rtt(&mut self, flag: u32, seq_rtt_us: i64, sack_rtt_us: i64, ca_rtt_us: i64, rs: &mut RateSample) -> bool {
        let mut seq_rtt = seq_rtt_us;
        let mut ca_rtt = ca_rtt_us;
        if seq_rtt < 0 {
            seq_rtt = sack_rtt_us;
        }
        if seq_rtt < 0 && self.rcv_tsecr != 0 && flag & FLAG_ACKED != 0 {
            let delta = ts_clock(self.sock.now).wrapping_sub(self.rcv_tsecr);
            if (delta as i32) >= 0 {
                seq_rtt = delta.max(1) as i64 * 1000;
                ca_rtt = seq_rtt;
            }
        }
        rs.rtt_us = ca_rtt;
        if seq_rtt < 0 {
            return false;
        }
        self.update_rtt_min(ca_rtt.max(0) as u32, flag);
        self.rtt.sample(seq_rtt as u32, self.sock.snd_una, self.sock.snd_nxt, self.cfg.rto_min_us);
        self.sock.srtt_us8 = self.rtt.srtt_us8;
        self.rto_jiffies = self.rtt.rto_jiffies(self.hz());
        true
    }

    fn update_rtt_min(&mut self, rtt_us: u32, flag: u32) {
        if flag & FLAG_ACK_MAYBE_DELAYED != 0 && rtt_us > self.sock.min_rtt_us() {
            return;
        }
        let wlen = MIN_RTT_WLEN_SECS * self.hz();
        let v = if rtt_us == 0 { jiffies_to_usecs(1, self.hz()) as u32 } else { rtt_us };
        self.sock.rtt_min.update(wlen, self.sock.jiffies, v);
    }

    // ---- Congestion control hook (tcp_cong_control) ----

    fn cong_control(&mut self, ack: u32, acked_sacked: u32, flag: u32, rs: &RateSample) {
        if self.cc.has_cong_control() {
            self.cc.cong_control(&mut self.sock, rs);
            self.sock.cwnd = self.sock.cwnd.max(1);
            return;
        }
        if self.in_cwnd_reduction() {
            self.rec.cwnd_reduction(&mut self.sock, acked_sacked, rs.losses, flag);
        } else if self.may_raise_cwnd(flag) {
            self.cc.cong_avoid(&mut self.sock, ack, acked_sacked);
            if self.sock.cwr_requested {
                self.sock.cwr_requested = false;
                self.enter_cwr();
            }
            self.sock.cwnd = self.sock.cwnd.max(1);
            self.sock.cwnd_stamp = self.sock.jiffies;
        }
        self.update_pacing_rate();
    }

    /// Linux `tcp_update_pacing_rate`.
    fn update_pacing_rate(&mut self) {
        let mut rate = self.cfg.mss as u64 * ((1_000_000 / 100) << 3);
        if self.sock.cwnd < self.sock.ssthresh / 2 {
            rate *= PACING_SS_RATIO;
        } else {
            rate *= PACING_CA_RATIO;
        }
        rate *= self.sock.cwnd.max(self.sock.packets_out) as u64;
        if self.sock.srtt_us8 != 0 {
            rate /= self.sock.srtt_us8 as u64;
        }
        self.sock.pacing_rate = rate.min(self.sock.max_pacing_rate);
    }

    // ------------------------------------------------------------------
    // Introspection for records and invariants
    // ------------------------------------------------------------------

    pub fn in_flight_packets(&self) -> u32 {
        self.in_flight()
    }

    /// Checks the scoreboard counters against the per-segment flags (O(window);
    /// for tests and end-of-run checks).
    pub fn check_counters(&self) -> Result<(), String> {
        let (mut sacked, mut lost, mut retrans) = (0u32, 0u32, 0u32);
        for seq in self.board.iter_seqs() {
            let s = self.board.get(seq).sacked;
            if s & SACKED_ACKED != 0 {
                sacked += 1;
            }
            if s & LOST != 0 {
                lost += 1;
            }
            if s & SACKED_RETRANS != 0 {
                retrans += 1;
            }
        }
        let packets = self.board.len() as u32;
        if packets != self.sock.packets_out {
            return Err(format!("flow {}: packets_out {} but {} segments held", self.flow, self.sock.packets_out, packets));
        }
        if self.is_sack() && sacked != self.sock.sacked_out {
            return Err(format!("flow {}: sacked_out {} but {} flagged", self.flow, self.sock.sacked_out, sacked));
        }
        if lost != self.sock.lost_out {
            return Err(format!("flow {}: lost_out {} but {} flagged", self.flow, self.sock.lost_out, lost));
        }
        if retrans != self.sock.retrans_out {
            return Err(format!("flow {}: retrans_out {} but {} flagged", self.flow, self.sock.retrans_out, retrans));
        }
        if self.sock.cwnd == 0 {
            return Err(format!("flow {}: cwnd is 0", self.flow));
        }
        Ok(())
    }

    pub fn syn_pending(&self) -> bool {
        self.state == ConnState::SynSent
    }

    pub fn dur_since_start(&self) -> Dur {
        Dur(self.sock.now.0.saturating_sub(self.counters.start_ns))
    }
}

#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;

/// Linux `tcp_tsopt_ecr_before`: the peer echoed a timestamp older than `when`
/// (an echo of 0 means none).
fn tsopt_ecr_before(rcv_tsecr: u32, when: u32) -> bool {
    rcv_tsecr != 0 && seq_before(rcv_tsecr, when)
}

/// Timestamp clock value of a microsecond instant.
fn ts_of_us(us: u64) -> u32 {
    (us / 1000) as u32 + 1
}
