//! The data receiver of one connection, acknowledging the way Linux does
//! (`tcp_data_queue`, `tcp_event_data_recv`, `__tcp_ack_snd_check`):
//!
//! * an ACK for every second full segment, or when the delayed-ACK timer
//!   (ATO, 40 ms minimum, adapted to the inter-arrival time) expires;
//! * quick-ACK mode (every segment) for the first 16 ACKs of a connection and
//!   after duplicates;
//! * immediate ACKs with SACK blocks while out-of-order data is held (the
//!   first three per hole), then SACK compression (up to 44 ACKs, at most
//!   min(1 ms, RTT/20));
//! * SACK blocks in Linux's order (the block that changed most recently
//!   first), D-SACK for duplicates, an immediate ACK when a hole is filled;
//! * TS.Recent from the segment at the left edge (RFC 7323), echoed in ACKs;
//! * ECN echo until the sender's CWR; or, when the receiving socket runs
//!   DCTCP (`ce_state_acks`), ECE on exactly the ACKs of CE segments, with an
//!   immediate ACK of the data before each change of the CE state
//!   (`dctcp_ece_ack_update` in Linux's `tcp_dctcp.h`).
//! * or, with Accurate ECN (`accecn.rs`)
//!   the count of CE marks in every ACK;
//! * with the application's reads modelled (`set_app_reads`), in-order data
//!   acknowledged on arrival only while the window the ACK would advertise
//!   is not smaller than the last one (`__tcp_ack_snd_check`'s
//!   `__tcp_select_window() >= rcv_wnd`), otherwise when the application
//!   reads it (`tcp_cleanup_rbuf`) or at the delayed-ACK timer; out-of-order
//!   data, a filled hole and quick-ACK mode are answered at once. A read
//!   takes at most the application's block (iperf3's 128 KB), and with more
//!   readable (a filled hole releases up to a window) the next read follows
//!   after a measured wait, each deciding on its own ACK. Once the
//!   window has grown to its clamp (and `rcv_ssthresh` with it, as `ss`
//!   shows on the linux backend's receivers) the window is the free space:
//!   the buffer less what is queued, unread and out of order, rounded up to
//!   the window scale's unit. With the linux backend's buffers (scale 12, a
//!   4 KB unit) one or two unread segments often leave it unchanged, so an
//!   arrival finding little unread is acknowledged at once, as the kernel's
//!   receivers without offloads mostly do; a GRO skb of many segments always
//!   shrinks it and waits for the read.

use super::accecn;
use super::config::TcpConfig;
use super::seqset::SeqSet;
use super::ts_clock;
use crate::dist::Sampler;
use crate::event::TimerKind;
use crate::rng::Rng;
use crate::packet::{AckExt, AckSegment, DataSegment, Packet, Payload, SackBlocks, SeqRange, Split32, MAX_SACK_BLOCKS, SYN_BYTES};
use crate::units::{jiffies_at, time_of_jiffy, usecs_to_jiffies, Time, NS_PER_MS, NS_PER_SEC};

/// Linux TCP_PAWS_WINDOW: timestamp ticks a segment may lag TS.Recent.
const PAWS_WINDOW: i32 = 1;
/// Linux `tcp_select_initial_window`'s receive window scale for a buffer of
/// at most `rcvbuf` bytes, as the linux backend sets it (`tcp_rmem[2]` = 2 x
/// the size): ilog2 of the largest space less 15, at most 14.
pub fn rcv_wscale(rcvbuf: u64) -> u32 {
    (2 * rcvbuf.max(1)).ilog2().saturating_sub(15).min(14)
}

/// The scale `free_window` measures windows on: an empty buffer's window of
/// about 1 GB, larger than anything queued, so that only differences count.
const EMPTY_WINDOW: i64 = 1 << 30;

/// `x` rounded up to a multiple of `unit` (Linux `ALIGN`).
#[inline]
fn align_up(x: i64, unit: i64) -> i64 {
    x.div_euclid(unit) * unit + if x.rem_euclid(unit) != 0 { unit } else { 0 }
}

/// Linux TCP_MAX_QUICKACKS.
const MAX_QUICKACKS: u32 = 16;
/// Linux TCP_NUM_SACKS: SACK blocks remembered by the receiver.
const NUM_SACKS: usize = 4;
/// Linux TCP_SACK_BLOCKS_EXPECTED: the SACK blocks an ACK is counted on
/// to deliver (tcp_input.c).
const SACK_BLOCKS_EXPECTED: usize = 2;
/// Linux TCP_FASTRETRANS_THRESH: immediate duplicate ACKs per hole.
const FASTRETRANS_THRESH: u32 = 3;
/// net.ipv4.tcp_comp_sack_nr.
const COMP_SACK_NR: u32 = 44;
/// net.ipv4.tcp_comp_sack_delay_ns (1 ms).
const COMP_SACK_DELAY_NS: u64 = 1_000_000;

/// How the receiving application reads (`TcpReceiver::set_app_reads`).
pub struct AppReads {
    /// From data becoming readable to the read that takes it (its wake-up
    /// and the scheduler's delay).
    pub wait: Sampler,
    pub rng: Rng,
    /// The most one read takes, in bytes (iperf3's block, `-l`).
    pub block: u64,
    /// From a read that took a full block to the next read, drawn from a
    /// stream of its own so that the waits of `wait` stay the same draws
    /// whether or not a read fills its block.
    pub again: Sampler,
    pub again_rng: Rng,
}

pub struct TcpReceiver {
    pub flow: u32,
    mss: u32,
    hz: u32,
    delayed_ack: bool,
    /// SACK negotiated: without it no SACK/D-SACK blocks, and every out-of-order
    /// segment is acknowledged at once (the duplicate ACKs NewReno counts).
    sack: bool,
    established: bool,
    synack_sent_at: Time,

    pub rcv_nxt: u32,
    /// rcv_nxt when the last ACK was sent (Linux `rcv_wup`).
    rcv_wup: u32,
    ooo: SeqSet,
    sacks: [SeqRange; NUM_SACKS],
    num_sacks: usize,
    dsack: Option<SeqRange>,
    ts_recent: u32,

    // Delayed-ACK engine (Linux icsk_ack).
    quick: u32,
    /// ATO in jiffies (0: no data received yet).
    ato: u64,
    lrcvtime: u32,
    ack_scheduled: bool,
    ack_now: bool,
    delack_timer: Option<Time>,
    /// Receiver-side RTO in jiffies (bounds the ATO).
    rto_jiffies: u64,
    /// Receiver-side smoothed RTT in us, from the handshake.
    srtt_us: u64,

    // SACK compression.
    compressed_ack: u32,
    compressed_ack_rcv_nxt: u32,
    dup_ack_counter: u32,
    comp_timer: Option<Time>,

    rcvbuf_segments: u32,
    wnd_end: u32,
    demand_cwr: bool,
    /// ECN negotiated (TCP_ECN_OK) and an ECT segment seen (TCP_ECN_SEEN).
    ecn: bool,
    ecn_seen: bool,
    /// DCTCP's receiver rules (`set_ce_state_acks`): the CE state of the last
    /// ECN-capable segment and rcv_nxt after it (Linux `ca->ce_state`,
    /// `ca->prior_rcv_nxt` of the receiving socket's DCTCP).
    ce_state_acks: bool,
    ce_state: bool,
    prior_rcv_nxt: u32,
    /// Accurate ECN feedback negotiated (`set_accecn`): ACKs carry the count
    /// of CE-marked segments received (`received_ce`, Linux's r.cep) in the
    /// ACE field instead of RFC 3168's ECE-until-CWR.
    accecn: bool,
    received_ce: u32,
    /// CE marks not yet reported by an ACK (Linux `received_ce_pending`, 4 bits).
    received_ce_pending: u8,
    /// The ECN field of the last data segment (Linux `prev_ecnfield`).
    prev_ecnfield: u8,
    /// Payload bytes received per ECN codepoint, which the AccECN option
    /// reports (Linux `received_ecn_bytes`), and the option fields the next
    /// ACK must carry to report what arrived since the last option
    /// (`accecn_minlen`).
    received_ecn_bytes: accecn::EcnBytes,
    accecn_minlen: u8,

    /// Total segments of a finite transfer (for the tail segment's size).
    app_segments: Option<u32>,
    tail_payload: u32,

    /// Newest data segment received and when (for the receive timestamp in ACKs).
    last_rx_seq: u32,
    last_rx_ns: u64,

    /// Processing a batch of held packets (host/rx.rs): regular ACKs wait
    /// for its end, as Linux defers them while it processes the socket
    /// backlog (`tcp_backlog_ack_defer`).
    batching: bool,
    ack_deferred: bool,
    /// The batch is one skb (a super-packet a Linux router forwarded whole).
    one_skb: bool,
    /// This skb's out-of-order data has scheduled its ACK. In a batch an skb
    /// is `one_skb`'s whole batch or a run of consecutive segments.
    skb_ofo_scheduled: bool,
    /// The current skb's ACK decision, taken once when it ends as Linux takes
    /// one per skb (`__tcp_ack_snd_check`), and whether it saw out-of-order
    /// data.
    skb_check_pending: bool,
    skb_check_ofo: bool,

    /// The application's reads (`set_app_reads`; None: the data is read the
    /// instant it arrives).
    reads: Option<AppReads>,
    /// When the application reads next (Linux `tcp_recvmsg` returning).
    read_due: Option<Time>,
    /// Linux copied_seq: the application has read everything below it
    /// (with `set_app_reads`).
    copied: u32,
    /// Bytes of segment `copied` a read has already taken (a read of a
    /// block ends inside a segment).
    copied_bytes_into: u32,
    /// The window scale's unit in bytes (1 << rcv_wscale).
    window_unit: u32,
    /// Where the free space with nothing queued falls within a window-scale
    /// unit, in bytes (1..=window_unit): how many queued segments round up
    /// to the same advertised window. It follows the buffer's autotuned size,
    /// which no scenario fixes, so each connection draws it (`set_window_phase`).
    window_phase: u32,
    /// The window the last ACK advertised, in bytes (Linux `rcv_wnd`), on the
    /// scale of `free_window`.
    rcv_wnd: i64,
    /// A segment shorter than a full one, or a full one with PSH, arrived in
    /// order since the last ACK (Linux ICSK_ACK_PUSHED from
    /// `tcp_measure_rcv_mss`): a read that empties the buffer acknowledges it
    /// at once.
    pushed: bool,

    pub bytes_delivered: u64,
    pub duplicate_segments: u64,
    /// Data segments discarded by PAWS (Linux's PAWSEstab counter).
    pub paws_rejected: u64,
    pub ce_marks: u64,
    pub acks_sent: u64,
    /// How the ACK decisions went, counted as Linux counts them: skbs that
    /// arrived out of order (`TCPOFOQueue`), ACKs SACK compression held back
    /// and never sent (`TCPAckCompressed`), ACKs the delayed-ACK timer sent
    /// (`DelayedACKs`).
    pub ofo_skbs: u64,
    pub acks_compressed: u64,
    pub delayed_acks: u64,
}

impl TcpReceiver {
    pub fn new(flow: u32, cfg: &TcpConfig, total_bytes: Option<u64>) -> TcpReceiver {
        let (app_segments, tail_payload) = match total_bytes {
            Some(b) => {
                let b = b.max(1);
                let segs = b.div_ceil(cfg.mss as u64) as u32;
                (Some(segs), (b - (segs as u64 - 1) * cfg.mss as u64) as u32)
            }
            None => (None, cfg.mss),
        };
        let rcvbuf_segments = (cfg.rcvbuf / cfg.mss as u64).clamp(1, u32::MAX as u64 / 4) as u32;
        let window_unit = 1 << rcv_wscale(cfg.rcvbuf);
        TcpReceiver {
            flow,
            mss: cfg.mss,
            hz: cfg.hz,
            delayed_ack: cfg.delayed_ack,
            sack: cfg.sack,
            established: false,
            synack_sent_at: Time::ZERO,
            rcv_nxt: 0,
            rcv_wup: 0,
            ooo: SeqSet::new(),
            sacks: [SeqRange::default(); NUM_SACKS],
            num_sacks: 0,
            dsack: None,
            ts_recent: 0,
            quick: 0,
            ato: 0,
            lrcvtime: 0,
            ack_scheduled: false,
            ack_now: false,
            delack_timer: None,
            rto_jiffies: usecs_to_jiffies(1_000_000, cfg.hz),
            srtt_us: 0,
            compressed_ack: 0,
            compressed_ack_rcv_nxt: 0,
            dup_ack_counter: 0,
            comp_timer: None,
            rcvbuf_segments,
            wnd_end: rcvbuf_segments,
            demand_cwr: false,
            ecn: cfg.ecn,
            ecn_seen: false,
            ce_state_acks: false,
            ce_state: false,
            prior_rcv_nxt: 0,
            accecn: false,
            received_ce: 0,
            received_ce_pending: 0,
            prev_ecnfield: 0,
            received_ecn_bytes: [0; 3],
            accecn_minlen: 0,
            app_segments,
            tail_payload,
            last_rx_seq: 0,
            last_rx_ns: 0,
            batching: false,
            ack_deferred: false,
            one_skb: false,
            skb_ofo_scheduled: false,
            skb_check_pending: false,
            skb_check_ofo: false,
            reads: None,
            read_due: None,
            copied: 0,
            copied_bytes_into: 0,
            window_unit,
            window_phase: window_unit,
            rcv_wnd: EMPTY_WINDOW,
            pushed: false,
            bytes_delivered: 0,
            duplicate_segments: 0,
            paws_rejected: 0,
            ce_marks: 0,
            acks_sent: 0,
            ofo_skbs: 0,
            acks_compressed: 0,
            delayed_acks: 0,
        }
    }

    /// The receiving socket runs an algorithm with `ce_state_acks` (DCTCP):
    /// ECN is on (its `TCP_CONG_NEEDS_ECN` accepts it) and ECE follows each
    /// segment's CE state instead of RFC 3168's echo until CWR.
    pub fn set_ce_state_acks(&mut self) {
        self.ecn = true;
        self.ce_state_acks = true;
    }

    /// Negotiates Accurate ECN feedback (the algorithm needs it).
    pub fn set_accecn(&mut self) {
        self.ecn = true;
        self.accecn = true;
    }

    /// Draws where the empty buffer's window falls within a window-scale
    /// unit (uniformly: it follows the autotuned buffer size).
    pub fn set_window_phase(&mut self, mut rng: Rng) {
        self.window_phase = 1 + rng.below(self.window_unit as u64) as u32;
    }

    /// The receiving application reads after a wait drawn from `wait` from
    /// the moment in-order data becomes readable (its wake-up and the
    /// scheduler's delay; measured on the kernel, docs/fidelity.md), and
    /// the in-order ACKs wait for its reads when the window would shrink
    /// (module doc).
    pub fn set_app_reads(&mut self, reads: AppReads) {
        self.reads = Some(reads);
    }

    fn payload(&self, seq: u32) -> u64 {
        match self.app_segments {
            Some(n) if seq + 1 == n => self.tail_payload as u64,
            _ => self.mss as u64,
        }
    }

    fn jiffies(&self, now: Time) -> u32 {
        jiffies_at(now, self.hz)
    }

    fn jiffies_deadline(&self, now: Time, when: u64) -> Time {
        let now_j = jiffies_at(now, self.hz) as u64;
        time_of_jiffy(now_j + when.max(1), self.hz)
    }

    pub fn timer_deadline(&self, kind: TimerKind) -> Option<Time> {
        match kind {
            // The application's next read shares the delayed-ACK timer's
            // event (one fewer timer kind for every flow to mirror).
            TimerKind::DelAck => match (self.delack_timer, self.read_due) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            TimerKind::CompressedAck => self.comp_timer,
            _ => None,
        }
    }

    pub fn on_packet(&mut self, now: Time, pkt: &Packet, out: &mut Vec<Packet>) {
        match pkt.payload {
            Payload::Syn { tsval } => {
                self.ts_recent = tsval;
                self.synack_sent_at = now;
                out.push(Packet {
                    flow: self.flow,
                    wire_bytes: SYN_BYTES,
                    reverse: true,
                    hop: 0,
                    epoch: 0,
                    payload: Payload::SynAck { tsecr: tsval },
                });
            }
            Payload::HandshakeAck => self.complete_handshake(now),
            Payload::Data(ref d) => self.on_data(now, d, out),
            _ => {}
        }
    }

    /// The passive side's RTT, its only one, from the SYN-ACK to the ACK
    /// that completes the handshake (Linux `tcp_synack_rtt_meas`); or to
    /// the first data segment where that ACK was lost. A tool's data may
    /// follow much later (iperf3's control exchange), so the data is not
    /// the measure when the ACK arrived.
    fn complete_handshake(&mut self, now: Time) {
        if self.established {
            return;
        }
        self.established = true;
        let rtt_us = now.since(self.synack_sent_at).as_us().max(1);
        self.srtt_us = rtt_us;
        self.rto_jiffies = usecs_to_jiffies(rtt_us + (2 * rtt_us).max(200_000), self.hz);
    }

    fn on_data(&mut self, now: Time, d: &DataSegment, out: &mut Vec<Packet>) {
        self.complete_handshake(now);
        if self.batching && d.seq != self.last_rx_seq.wrapping_add(1) {
            // A batch's run of consecutive segments is one skb, as the socket
            // backlog coalesces them (`tcp_add_backlog`) and GRO merges them;
            // a segment that does not follow the one before begins the next.
            self.finish_skb(now, out);
            self.skb_ofo_scheduled = false;
        }
        if self.paws_rejects(d.tsval) {
            // Linux `tcp_validate_incoming`: the segment is discarded and
            // answered at once by `tcp_send_dupack` (D-SACKed and in quick-ACK
            // mode when it starts below rcv_nxt).
            self.paws_rejected += 1;
            if d.seq < self.rcv_nxt {
                self.duplicate_segments += 1;
                self.enter_quickack_mode(MAX_QUICKACKS);
                if self.sack {
                    self.dsack = Some(SeqRange::new(d.seq, d.seq + 1));
                }
            }
            self.send_ack(now, out);
            return;
        }
        if self.accecn {
            // tcp_ecn_received_counters: count CE marks; an ACK goes out at
            // once before the 3-bit field could wrap unseen.
            if d.ce {
                self.ce_marks += 1;
                self.received_ce = self.received_ce.wrapping_add(1);
                self.received_ce_pending = (self.received_ce_pending + 1).min(0xf);
                if self.received_ce_pending >= accecn::ACE_MAX_DELTA {
                    self.ack_now = true;
                }
            }
            if d.ce || d.ect {
                self.ecn_seen = true;
            } else if self.ecn_seen {
                self.enter_quickack_mode(2);
            }
            // Change-triggered ACKs: a segment whose ECN field differs from
            // the last one's is acknowledged at once (Linux
            // `tcp_ecn_received_counters`, ICSK_ACK_NOW on an `ecn_edge`), so
            // the sender learns where marking starts and stops without
            // waiting for the delayed ACK or the application's read.
            let field = accecn::ecn_field(d);
            if field != self.prev_ecnfield {
                self.prev_ecnfield = field;
                self.ack_now = true;
            }
            if field != 0 && d.payload > 0 {
                let i = field as usize - 1;
                self.received_ecn_bytes[i] = self.received_ecn_bytes[i].wrapping_add(d.payload);
                self.accecn_minlen = self.accecn_minlen.max(accecn::fields_needed(field));
            }
        } else {
            // tcp_ecn_accept_cwr, then tcp_ecn_check_ce.
            if d.cwr {
                self.demand_cwr = false;
                self.ack_now = true;
            }
            if self.ce_state_acks {
                // The CE check comes where Linux makes it, with the data (below).
                self.ce_marks += d.ce as u64;
            } else if d.ce {
                self.ce_marks += 1;
                if !self.demand_cwr {
                    self.enter_quickack_mode(2);
                    self.demand_cwr = true;
                }
                self.ecn_seen = true;
            } else if d.ect {
                self.ecn_seen = true;
            } else if self.ecn && self.ecn_seen {
                // Not-ECT after ECT segments: probably a retransmission; ACK quickly.
                self.enter_quickack_mode(2);
            }
        }
        self.last_rx_seq = d.seq;
        self.last_rx_ns = now.0;
        // RFC 7323 / Linux `tcp_replace_ts_recent`: only a segment at the left
        // edge updates TS.Recent, and never backwards. One that ends before
        // rcv_wup never gets there: `tcp_sequence` discards it first (with
        // the duplicate ACK below).
        let at_left_edge = d.seq <= self.rcv_wup && d.seq + 1 >= self.rcv_wup;
        if at_left_edge && (self.ts_recent.wrapping_sub(d.tsval) as i32) <= 0 {
            self.ts_recent = d.tsval;
        }

        let seq = d.seq;
        let mut ofo_possible = false;
        if seq < self.rcv_nxt {
            // A retransmission of data already received: D-SACK it, ACK at once.
            self.duplicate_segments += 1;
            self.dsack = Some(SeqRange::new(seq, seq + 1));
            self.enter_quickack_mode(MAX_QUICKACKS);
            self.ack_scheduled = true;
        } else if seq == self.rcv_nxt {
            // Linux `tcp_measure_rcv_mss`: a short segment (the end of a
            // transfer here) and, since 6.6, a full-sized one with PSH (the
            // end of a write) are pushed: the read that empties the buffer
            // acknowledges them.
            self.pushed |= d.psh || d.payload < self.mss;
            self.data_readable(now);
            self.rcv_nxt += 1;
            self.bytes_delivered += self.payload(seq);
            self.event_data_recv(now);
            if self.ce_state_acks {
                // Linux: at the end of `tcp_event_data_recv`, rcv_nxt past this segment.
                self.ecn_check_ce_state(now, d, out);
            }
            if !self.ooo.is_empty() {
                if let Some(r) = self.ooo.pop_front_at(self.rcv_nxt) {
                    for s in r.start..r.end {
                        self.bytes_delivered += self.payload(s);
                    }
                    self.rcv_nxt = r.end;
                }
                // RFC 5681 4.2: ACK immediately when a hole is filled.
                if self.ooo.is_empty() {
                    self.ack_now = true;
                }
            }
            if self.num_sacks > 0 {
                self.sack_remove();
            }
            ofo_possible = true;
        } else {
            // Out of order.
            if self.ce_state_acks {
                // Linux: first thing in `tcp_data_queue_ofo`.
                self.ecn_check_ce_state(now, d, out);
            }
            // Linux schedules the ACK once per skb, before its SACK block
            // (which may send the held ACKs and so unschedule it).
            if !(self.batching && self.skb_ofo_scheduled) {
                self.ofo_skbs += 1;
                self.ack_scheduled = true;
                self.skb_ofo_scheduled = self.batching;
            }
            if self.ooo.contains(seq) {
                self.duplicate_segments += 1;
                self.dsack = Some(SeqRange::new(seq, seq + 1));
            } else {
                self.ooo.insert(SeqRange::new(seq, seq + 1));
                self.sack_new_ofo(now, seq, seq + 1, out);
            }
            ofo_possible = true;
        }
        let free = self.rcvbuf_segments.saturating_sub(self.ooo.count() as u32);
        self.wnd_end = self.wnd_end.max(self.rcv_nxt + free);
        self.ack_snd_check(now, ofo_possible, out);
    }

    /// A batch of held packets begins (host/rx.rs), or with `one_skb` the
    /// segments of one skb (GRO's or a Linux router's super-packet).
    pub fn begin_batch(&mut self, one_skb: bool) {
        self.batching = true;
        self.one_skb = one_skb;
        self.skb_ofo_scheduled = false;
    }

    /// The batch ends: its last skb's ACK decision, taken at the batch's
    /// end (an immediate ACK leaves now), then the immediate ACK earlier skbs
    /// deferred, once for all of them (Linux `tcp_release_cb`).
    pub fn end_batch(&mut self, now: Time, out: &mut Vec<Packet>) {
        self.batching = false;
        self.one_skb = false;
        self.finish_skb(now, out);
        if std::mem::take(&mut self.ack_deferred) {
            let ofo = !self.ooo.is_empty();
            self.ack_snd_check(now, ofo, out);
        }
    }

    /// An skb of a batch ends: its one `__tcp_ack_snd_check`.
    fn finish_skb(&mut self, now: Time, out: &mut Vec<Packet>) {
        if std::mem::take(&mut self.skb_check_pending) {
            let ofo = std::mem::take(&mut self.skb_check_ofo) || !self.ooo.is_empty();
            if self.ack_scheduled {
                self.decide_ack(now, ofo, out);
            }
        }
    }

    /// Linux `__tcp_ecn_check_ce` with an algorithm that needs ECN, whose
    /// `cwnd_event` receives CA_EVENT_ECN_IS_CE / ECN_NO_CE: DCTCP's rules.
    /// (Its quick-ACK rule for a first CE never fires here: the event has set
    /// DEMAND_CWR before the test.)
    fn ecn_check_ce_state(&mut self, now: Time, d: &DataSegment, out: &mut Vec<Packet>) {
        if !self.ecn {
            return;
        }
        if d.ce || d.ect {
            self.ece_ack_update(now, d.ce, out);
            self.ecn_seen = true;
        } else if self.ecn_seen {
            self.enter_quickack_mode(2);
        }
    }

    /// Linux `dctcp_ece_ack_update`: ECE echoes the new CE state. When the
    /// state changes while a delayed ACK is pending, the data received before
    /// the change is acknowledged at once with the old state, so that the
    /// sender counts marked and unmarked bytes exactly; the segment that
    /// changed it is acknowledged at once too.
    fn ece_ack_update(&mut self, now: Time, ce: bool, out: &mut Vec<Packet>) {
        if self.ce_state != ce {
            if self.delack_timer.is_some() {
                self.demand_cwr = self.ce_state;
                self.send_ack_of(now, self.prior_rcv_nxt, out);
            }
            self.ack_now = true;
        }
        self.prior_rcv_nxt = self.rcv_nxt;
        self.ce_state = ce;
        self.demand_cwr = ce;
    }

    /// RFC 7323 PAWS (Linux `tcp_paws_discard`): a segment whose timestamp is
    /// more than `TCP_PAWS_WINDOW` (one tick) older than TS.Recent. Under heavy
    /// reordering this drops in-order data: a spurious retransmission below
    /// rcv_wup raises TS.Recent past the timestamps of originals still in
    /// flight, and those are discarded when they arrive.
    fn paws_rejects(&self, tsval: u32) -> bool {
        self.ts_recent != 0 && (self.ts_recent.wrapping_sub(tsval) as i32) > PAWS_WINDOW
    }

    fn enter_quickack_mode(&mut self, max_quickacks: u32) {
        self.incr_quickack(max_quickacks);
        self.ato = usecs_to_jiffies(40_000, self.hz);
    }

    /// Linux `tcp_incr_quickack`.
    fn incr_quickack(&mut self, max_quickacks: u32) {
        let rcv_wnd_bytes = 65_535u64;
        let mut q = (rcv_wnd_bytes / (2 * self.mss as u64)) as u32;
        if q == 0 {
            q = 2;
        }
        q = q.min(max_quickacks);
        if q > self.quick {
            self.quick = q;
        }
    }

    /// Linux `tcp_event_data_recv`: schedule an ACK and adapt the ATO.
    fn event_data_recv(&mut self, now: Time) {
        self.ack_scheduled = true;
        let now_j = self.jiffies(now);
        let ato_min = usecs_to_jiffies(40_000, self.hz);
        if self.ato == 0 {
            self.incr_quickack(MAX_QUICKACKS);
            self.ato = ato_min;
        } else {
            let m = now_j.wrapping_sub(self.lrcvtime) as u64;
            if m <= ato_min / 2 {
                self.ato = (self.ato >> 1) + ato_min / 2;
            } else if m < self.ato {
                self.ato = ((self.ato >> 1) + m).min(self.rto_jiffies);
            } else if m > self.rto_jiffies {
                self.incr_quickack(MAX_QUICKACKS);
            }
        }
        self.lrcvtime = now_j;
    }

    /// Linux `__tcp_ack_snd_check`.
    fn ack_snd_check(&mut self, now: Time, ofo_possible: bool, out: &mut Vec<Packet>) {
        if !self.ack_scheduled {
            return;
        }
        if self.batching {
            // Inside an skb: one decision when it ends (finish_skb).
            self.skb_check_pending = true;
            self.skb_check_ofo |= ofo_possible;
            return;
        }
        self.decide_ack(now, ofo_possible, out);
    }

    /// The decision itself, with an ACK scheduled: now, delayed, or held
    /// back by SACK compression; an immediate one inside a batch waits for
    /// its end (`tcp_backlog_ack_defer`).
    fn decide_ack(&mut self, now: Time, ofo_possible: bool, out: &mut Vec<Packet>) {
        // Linux: more than one full segment unacknowledged, and either
        // nothing unread (`rcv_nxt - copied_seq < sk_rcvlowat`, 1 byte) or a
        // window not smaller than the last one advertised.
        let more_than_one_full_segment = self.more_than_one_segment_unacked()
            && (self.unread() == 0 || self.free_window(self.queued()) >= self.rcv_wnd);
        if !self.delayed_ack || more_than_one_full_segment || self.quick > 0 || self.ack_now {
            if self.batching {
                // Linux defers it to `tcp_release_cb`, the end of the batch.
                self.ack_deferred = true;
                return;
            }
            self.send_ack(now, out);
            return;
        }
        if !ofo_possible || self.ooo.is_empty() {
            self.send_delayed_ack(now, out);
            return;
        }
        if !self.sack || self.compressed_ack >= COMP_SACK_NR {
            self.send_ack(now, out);
            return;
        }
        if self.compressed_ack_rcv_nxt != self.rcv_nxt {
            self.compressed_ack_rcv_nxt = self.rcv_nxt;
            self.dup_ack_counter = 0;
        }
        if self.dup_ack_counter < FASTRETRANS_THRESH {
            self.dup_ack_counter += 1;
            self.send_ack(now, out);
            return;
        }
        self.compressed_ack += 1;
        if self.comp_timer.is_some() {
            return;
        }
        let rtt_ns = self.srtt_us * 1000;
        let delay = COMP_SACK_DELAY_NS.min(rtt_ns / 20);
        self.comp_timer = Some(Time(now.0 + delay));
    }

    /// Linux `tcp_send_delayed_ack`.
    fn send_delayed_ack(&mut self, now: Time, out: &mut Vec<Packet>) {
        let delack_min = usecs_to_jiffies(40_000, self.hz);
        let mut ato = self.ato;
        if ato > delack_min {
            let mut max_ato = self.hz as u64 / 2;
            if self.srtt_us > 0 {
                let rtt = usecs_to_jiffies(self.srtt_us, self.hz).max(delack_min);
                max_ato = max_ato.min(rtt);
            }
            ato = ato.min(max_ato);
        }
        // tcp_delack_max: 200 ms (TCP_DELACK_MAX).
        ato = ato.min(usecs_to_jiffies(200_000, self.hz));
        let mut deadline = self.jiffies_deadline(now, ato);
        if let Some(existing) = self.delack_timer {
            // An earlier timer about to expire: ACK now.
            let quarter = Time(now.0 + ato * NS_PER_SEC / self.hz as u64 / 4);
            if existing <= quarter {
                self.send_ack(now, out);
                return;
            }
            if deadline >= existing {
                deadline = existing;
            }
        }
        self.delack_timer = Some(deadline);
    }

    /// Segments charged to the receive buffer: unread in-order data and the
    /// out-of-order queue (Linux `sk_rmem_alloc`).
    #[inline]
    fn queued(&self) -> u32 {
        self.unread() + self.ooo.count() as u32
    }

    /// In-order segments the application has not read (none when it reads
    /// the instant data arrives).
    #[inline]
    fn unread(&self) -> u32 {
        if self.reads.is_some() {
            self.rcv_nxt.wrapping_sub(self.copied)
        } else {
            0
        }
    }

    /// The window Linux's `__tcp_select_window` offers with `queued`
    /// segments in the buffer: the free space, each queued segment taking
    /// its payload off (`tcp_win_from_space` at the skbs' own
    /// payload-to-truesize ratio), rounded up to the window scale's unit
    /// (`ALIGN(free_space, 1 << rcv_wscale)`). On a scale where the empty
    /// buffer's window is `EMPTY_WINDOW` less a unit plus `window_phase`:
    /// only differences matter.
    #[inline]
    fn free_window(&self, queued: u32) -> i64 {
        let unit = self.window_unit as i64;
        align_up(EMPTY_WINDOW - unit + self.window_phase as i64 - queued as i64 * self.mss as i64, unit)
    }

    /// Linux's `rcv_nxt - rcv_wup > rcv_mss`: more than one full segment
    /// received since the last ACK.
    #[inline]
    fn more_than_one_segment_unacked(&self) -> bool {
        self.rcv_nxt.wrapping_sub(self.rcv_wup) >= 2
    }

    /// In-order data has become readable: the application, if it is not
    /// already due to read, wakes up and reads after its wait.
    #[inline]
    fn data_readable(&mut self, now: Time) {
        let Some(reads) = &mut self.reads else { return };
        if self.read_due.is_none() {
            self.read_due = Some(Time(now.0 + reads.wait.draw_ns(&mut reads.rng)));
        }
    }

    /// The application reads what is readable, at most its block (iperf3's
    /// `-l`); with more left it reads again after `AppReads::again`. Linux
    /// `tcp_cleanup_rbuf` then acknowledges if more than one full segment
    /// is unacknowledged, or if a pushed segment (a short one, or a full one
    /// with PSH) was among what it read and the buffer is empty
    /// (`sk_rmem_alloc`: nothing unread, no out-of-order data); otherwise a
    /// single full segment is left to the delayed-ACK timer.
    fn app_read(&mut self, now: Time, out: &mut Vec<Packet>) {
        self.read_due = None;
        let Some(reads) = &mut self.reads else { return };
        let mss = self.mss as u64;
        let readable = self.rcv_nxt.wrapping_sub(self.copied) as u64 * mss - self.copied_bytes_into as u64;
        if readable <= reads.block {
            self.copied = self.rcv_nxt;
            self.copied_bytes_into = 0;
        } else {
            // A full block read: the segment it ends in stays charged to
            // the buffer until read whole (Linux frees an skb's memory when
            // it is consumed), and iperf3's loop reads again at once.
            let upto = self.copied_bytes_into as u64 + reads.block;
            self.copied = self.copied.wrapping_add((upto / mss) as u32);
            self.copied_bytes_into = (upto % mss) as u32;
            self.read_due = Some(Time(now.0 + reads.again.draw_ns(&mut reads.again_rng)));
        }
        if self.ack_scheduled && (self.more_than_one_segment_unacked() || (self.pushed && self.queued() == 0)) {
            self.send_ack(now, out);
        }
    }

    pub fn on_timer(&mut self, now: Time, kind: TimerKind, out: &mut Vec<Packet>) {
        match kind {
            TimerKind::DelAck => {
                if self.read_due.is_some_and(|t| t <= now) {
                    self.app_read(now, out);
                }
                let Some(t) = self.delack_timer else { return };
                if t > now {
                    return;
                }
                self.delack_timer = None;
                if self.ack_scheduled {
                    // Delayed ACK missed: inflate the ATO (Linux, not in pingpong mode).
                    self.ato = (self.ato << 1).min(self.rto_jiffies);
                    self.delayed_acks += 1;
                    self.send_ack(now, out);
                }
            }
            TimerKind::CompressedAck => {
                let Some(t) = self.comp_timer else { return };
                if t > now {
                    return;
                }
                self.comp_timer = None;
                if self.compressed_ack > 0 {
                    // The ACK sent is one of those held: Linux counts the rest.
                    self.compressed_ack -= 1;
                    self.send_ack(now, out);
                }
            }
            _ => {}
        }
    }

    /// Linux `tcp_sack_new_ofo_skb`. Before a block would stand third or
    /// lower (a new one beside two others, or the third extended), the held
    /// ACKs go out: an ACK carries only the first blocks for sure, three with
    /// timestamps, and Linux counts on two since 5.8
    /// (`TCP_SACK_BLOCKS_EXPECTED`).
    fn sack_new_ofo(&mut self, now: Time, start: u32, end: u32, out: &mut Vec<Packet>) {
        for i in 0..self.num_sacks {
            let sp = self.sacks[i];
            if start <= sp.end && sp.start <= end {
                if i >= SACK_BLOCKS_EXPECTED {
                    self.sack_compress_send_ack(now, out);
                }
                let sp = &mut self.sacks[i];
                sp.start = sp.start.min(start);
                sp.end = sp.end.max(end);
                // Rotate the extended block to the front.
                self.sacks[..=i].rotate_right(1);
                if self.num_sacks > 1 {
                    self.sack_maybe_coalesce();
                }
                return;
            }
        }
        if self.num_sacks >= SACK_BLOCKS_EXPECTED {
            self.sack_compress_send_ack(now, out);
        }
        if self.num_sacks >= NUM_SACKS {
            self.num_sacks -= 1;
        }
        self.sacks[..=self.num_sacks].rotate_right(1);
        self.sacks[0] = SeqRange::new(start, end);
        self.num_sacks += 1;
    }

    /// Linux `tcp_sack_compress_send_ack`: the held ACKs, if any, as one.
    fn sack_compress_send_ack(&mut self, now: Time, out: &mut Vec<Packet>) {
        if self.compressed_ack > 0 {
            self.compressed_ack -= 1;
            self.send_ack(now, out);
        }
    }

    /// Linux `tcp_sack_maybe_coalesce`: merge blocks that now touch the first.
    fn sack_maybe_coalesce(&mut self) {
        let mut i = 1;
        while i < self.num_sacks {
            let (a, b) = (self.sacks[0], self.sacks[i]);
            if b.start <= a.end && a.start <= b.end {
                self.sacks[0] = SeqRange::new(a.start.min(b.start), a.end.max(b.end));
                for j in i..self.num_sacks - 1 {
                    self.sacks[j] = self.sacks[j + 1];
                }
                self.num_sacks -= 1;
            } else {
                i += 1;
            }
        }
    }

    /// Linux `tcp_sack_remove`: drop blocks the cumulative ACK now covers.
    fn sack_remove(&mut self) {
        if self.ooo.is_empty() {
            self.num_sacks = 0;
            return;
        }
        let mut i = 0;
        while i < self.num_sacks {
            if self.rcv_nxt >= self.sacks[i].start {
                for j in i..self.num_sacks - 1 {
                    self.sacks[j] = self.sacks[j + 1];
                }
                self.num_sacks -= 1;
            } else {
                i += 1;
            }
        }
    }

    fn send_ack(&mut self, now: Time, out: &mut Vec<Packet>) {
        self.send_ack_of(now, self.rcv_nxt, out);
    }

    /// The receive stamp rate-probing senders read (`AckExt::RxStamp`).
    fn rx_stamp(&self) -> AckExt {
        AckExt::RxStamp { seq: Split32::new(self.last_rx_seq), ns_low: Split32::new(AckSegment::stamp(self.last_rx_ns)) }
    }

    /// The AccECN option as Linux's `tcp_established_options` adds it to
    /// every ACK (`tcp_ecn_option` 2): as many counters as fit beside the
    /// SACK blocks, at least those that moved since the last option, for
    /// which the third SACK block gives way; none when even that fails.
    fn accecn_option(&mut self, sack: &mut SackBlocks) -> AckExt {
        let Some((fields, drop_block)) = accecn::fit_option(self.accecn_minlen, sack.n) else {
            return AckExt::None;
        };
        if drop_block {
            sack.n -= 1;
        }
        self.accecn_minlen = 0;
        let [e1b, _, ceb] = self.received_ecn_bytes;
        AckExt::AccEcn { fields, e1b: Split32::new(e1b), ceb: Split32::new(ceb) }
    }

    /// Linux `__tcp_send_ack(sk, rcv_nxt)`: an ACK of `ack_seq`. One below the
    /// current rcv_nxt (DCTCP's ACK of the data before a CE change) leaves the
    /// delayed-ACK state alone (`tcp_event_ack_sent`).
    fn send_ack_of(&mut self, now: Time, ack_seq: u32, out: &mut Vec<Packet>) {
        let mut sack = SackBlocks::default();
        let dsack = self.dsack.take();
        if self.sack {
            if let Some(d) = dsack {
                sack.push(d);
                sack.dsack = true;
            }
            for i in 0..self.num_sacks {
                if sack.n as usize >= MAX_SACK_BLOCKS {
                    break;
                }
                sack.push(self.sacks[i]);
            }
        }
        let ext = if self.accecn { self.accecn_option(&mut sack) } else { self.rx_stamp() };
        let ack = AckSegment {
            ack: ack_seq,
            wnd_end: self.wnd_end,
            tsecr: self.ts_recent,
            sack,
            ece: self.demand_cwr && !self.accecn,
            ace: if self.accecn { accecn::ace(self.received_ce) } else { 0 },
            ext,
        };
        out.push(Packet::ack(self.flow, ack));
        self.acks_sent += 1;
        // Linux `tcp_select_window`: the new window, but never one whose
        // right edge falls short of the last one's (out-of-order data
        // arriving can shrink the free space faster than rcv_nxt advances).
        let unit = self.window_unit as i64;
        let still_open = self.rcv_wnd - self.rcv_nxt.wrapping_sub(self.rcv_wup) as i64 * self.mss as i64;
        self.rcv_wnd = self.free_window(self.queued()).max(align_up(still_open, unit));
        self.rcv_wup = self.rcv_nxt;
        // Linux `tcp_event_ack_sent`: the held ACKs this one makes unneeded.
        self.acks_compressed += self.compressed_ack as u64;
        self.compressed_ack = 0;
        self.comp_timer = None;
        if ack_seq != self.rcv_nxt {
            return;
        }
        if self.quick > 0 && self.ack_scheduled {
            self.quick -= 1;
            if self.quick == 0 {
                self.ato = usecs_to_jiffies(40_000, self.hz);
            }
        }
        self.received_ce_pending = 0;
        self.ack_scheduled = false;
        self.pushed = false;
        self.ack_now = false;
        self.delack_timer = None;
        let _ = now;
        let _ = ts_clock;
        let _ = NS_PER_MS;
    }

    /// Highest contiguous segment received (for invariants).
    pub fn out_of_order_segments(&self) -> u64 {
        self.ooo.count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::Dist;

    fn seg(seq: u32) -> DataSegment {
        DataSegment { seq, payload: 1448, tsval: seq + 1, retransmission: false, ce: false, ect: false, ect1: false, cwr: false, psh: false, gso: Default::default() }
    }

    fn established() -> TcpReceiver {
        let mut r = TcpReceiver::new(0, &TcpConfig::default(), None);
        let mut out = vec![];
        r.on_packet(Time::ZERO, &Packet { flow: 0, wire_bytes: 60, reverse: false, hop: 0, epoch: 0, payload: Payload::Syn { tsval: 1 } }, &mut out);
        r
    }

    #[test]
    fn the_receivers_rtt_runs_to_the_handshakes_ack_not_to_late_data() {
        // iperf3's data follows a control exchange: 10 ms to the handshake's
        // ACK, data at 30 ms. Linux's passive side measures the 10 ms.
        let fwd = |payload| Packet { flow: 0, wire_bytes: 52, reverse: false, hop: 0, epoch: 0, payload };
        let mut out = vec![];
        let mut r = established();
        r.on_packet(Time::from_ms(10), &fwd(Payload::HandshakeAck), &mut out);
        r.on_packet(Time::from_ms(30), &fwd(Payload::Data(seg(0))), &mut out);
        assert_eq!(r.srtt_us, 10_000);
        // With that ACK lost, the first data segment completes the handshake.
        let mut lost = established();
        lost.on_packet(Time::from_ms(30), &fwd(Payload::Data(seg(0))), &mut out);
        assert_eq!(lost.srtt_us, 30_000);
    }

    fn acks(out: &[Packet]) -> Vec<AckSegment> {
        out.iter()
            .filter_map(|p| if let Payload::Ack(a) = p.payload { Some(a) } else { None })
            .collect()
    }

    /// Past the quick-ACK phase of connection start, delayed ACKs due 10
    /// jiffies after the last segment.
    fn past_quick_acks(r: &mut TcpReceiver) {
        r.quick = 0;
        r.ato = 10;
        r.lrcvtime = jiffies_at(Time::from_ms(99), 250);
    }

    /// An established AccECN receiver past its quick ACKs, and its segments:
    /// ECT(1) (`ect1`), or CE-marked.
    fn accecn_receiver() -> TcpReceiver {
        let mut r = established();
        r.set_accecn();
        past_quick_acks(&mut r);
        r
    }
    fn ect1(seq: u32) -> DataSegment {
        DataSegment { ect: true, ect1: true, ..seg(seq) }
    }
    fn ce(seq: u32) -> DataSegment {
        DataSegment { ce: true, ..ect1(seq) }
    }

    #[test]
    fn accecn_acks_carry_the_count_of_ce_marks() {
        let mut r = accecn_receiver();
        let mut out = vec![];
        // ACKs report the running count from 5 and never set ECE; a segment
        // whose ECN field differs from the last one's is acknowledged at once
        // (change-triggered ACKs), the others as usual (every second one).
        for (i, d) in [ect1(0), ect1(1), ce(2), ce(3), ect1(4), ect1(5)].iter().enumerate() {
            r.on_data(Time::from_ms(100 + i as u64), d, &mut out);
        }
        let a = acks(&out);
        let got: Vec<_> = a.iter().map(|a| (a.ack, a.ace, a.ece)).collect();
        assert_eq!(got, vec![(1, accecn::ace(0), false), (3, accecn::ace(1), false), (5, accecn::ace(2), false)]);
        // A run of marks: every ACK reports the count so far.
        out.clear();
        for i in 6..12 {
            r.on_data(Time::from_ms(110 + i as u64), &ce(i), &mut out);
        }
        let a = acks(&out);
        assert_eq!(a.iter().map(|a| a.ack).collect::<Vec<_>>(), vec![7, 9, 11]);
        assert_eq!(a.last().map(|a| a.ace), Some(accecn::ace(7)));
        assert_eq!(r.ce_marks, 8);
    }

    #[test]
    fn accecn_acks_carry_the_option_with_the_bytes_received_per_codepoint() {
        let mut r = accecn_receiver();
        let mut out = vec![];
        for (i, d) in [ect1(0), ect1(1), ce(2), ect1(3)].iter().enumerate() {
            r.on_data(Time::from_ms(100 + i as u64), d, &mut out);
        }
        let p = seg(0).payload;
        let option = |a: &AckSegment| match a.ext {
            AckExt::AccEcn { fields, e1b, ceb } => (fields, e1b.get(), ceb.get()),
            other => panic!("{other:?}"),
        };
        // All three counters fit beside the timestamps (each ACK here is a
        // change-triggered one).
        let got: Vec<_> = acks(&out).iter().map(option).collect();
        assert_eq!(got, vec![(3, p, 0), (3, 2 * p, p), (3, 3 * p, p)]);
        // Three SACK blocks: an ACK that must report new bytes gives up the
        // third block for two counters (ECT(1) and CE bytes).
        out.clear();
        for (i, seq) in [5u32, 7, 9].iter().enumerate() {
            r.on_data(Time::from_ms(110 + i as u64), &ect1(*seq), &mut out);
        }
        let last = *acks(&out).last().unwrap();
        assert_eq!(last.sack.n, 2);
        assert_eq!(option(&last), (2, 6 * p, p));
        assert_eq!(Packet::ack(0, last).wire_bytes, crate::packet::ACK_BYTES + 20 + 8);
    }

    #[test]
    fn without_sack_every_out_of_order_segment_gets_a_plain_duplicate_ack() {
        let cfg = TcpConfig { sack: false, ..TcpConfig::default() };
        let mut r = TcpReceiver::new(0, &cfg, None);
        let mut out = vec![];
        r.on_packet(Time::ZERO, &Packet { flow: 0, wire_bytes: 60, reverse: false, hop: 0, epoch: 0, payload: Payload::Syn { tsval: 1 } }, &mut out);
        past_quick_acks(&mut r);
        out.clear();
        for (i, seq) in [1u32, 2, 3, 4, 5, 6].iter().enumerate() {
            r.on_data(Time::from_ms(100 + i as u64), &seg(*seq), &mut out);
        }
        let a = acks(&out);
        assert_eq!(a.len(), 6);
        assert!(a.iter().all(|a| a.ack == 0 && a.sack.n == 0));
    }

    /// Reads `wait_ns` after data becomes readable, at most `block` bytes
    /// each, again 10 us after a full block.
    fn reads_after(wait_ns: u64, block: u64) -> AppReads {
        AppReads {
            wait: Sampler::new(Dist::Constant { value: wait_ns as f64 }),
            rng: Rng::stream(1, "t"),
            block,
            again: Sampler::new(Dist::Constant { value: 10_000.0 }),
            again_rng: Rng::stream(1, "again"),
        }
    }

    /// A receiver past quick-ACK mode whose application reads 100 us after
    /// data becomes readable; the empty buffer's window at the bottom of its
    /// window-scale unit, so that any queued segment shrinks it.
    fn reading_after_100us() -> TcpReceiver {
        let mut r = established();
        r.set_app_reads(reads_after(100_000, u64::MAX));
        r.window_phase = 1;
        past_quick_acks(&mut r);
        r
    }

    #[test]
    fn window_scale_follows_the_largest_buffer() {
        assert_eq!(rcv_wscale(64 << 20), 12, "the linux backend's default: tcp_rmem[2] 128 MB");
        assert_eq!(rcv_wscale(3 << 20), 7, "stock Linux: tcp_rmem[2] 6 MB");
        assert_eq!(rcv_wscale(1 << 40), 14);
        assert_eq!(rcv_wscale(1000), 0);
    }

    /// Linux compares the window an arrival's ACK would advertise, rounded
    /// up to the window scale's unit, with the last one: with room for one
    /// segment before the empty buffer's window drops a unit, a segment
    /// arriving after everything before it was read is acknowledged at once
    /// though unread; one arriving while more is queued than at the last
    /// ACK waits for the read.
    #[test]
    fn an_arrival_that_leaves_the_rounded_window_unchanged_is_acknowledged_at_once() {
        let mut r = reading_after_100us();
        r.window_phase = 1500;
        let mut out = vec![];
        let t0 = Time::from_ms(100);
        r.on_data(t0, &seg(0), &mut out);
        r.on_data(Time(t0.0 + 30_000), &seg(1), &mut out);
        assert!(acks(&out).is_empty(), "two segments unread: the window would drop a unit");
        r.on_timer(Time(t0.0 + 100_000), TimerKind::DelAck, &mut out);
        assert_eq!(acks(&out).iter().map(|a| a.ack).collect::<Vec<_>>(), vec![2], "the read acknowledges both");
        out.clear();
        r.on_data(Time(t0.0 + 200_000), &seg(2), &mut out);
        r.on_timer(Time(t0.0 + 300_000), TimerKind::DelAck, &mut out);
        assert!(acks(&out).is_empty(), "one full segment read: left to the timer");
        r.on_data(Time(t0.0 + 310_000), &seg(3), &mut out);
        assert_eq!(acks(&out).iter().map(|a| a.ack).collect::<Vec<_>>(), vec![4], "segment 3 acknowledged on arrival, unread");
        out.clear();
        r.on_data(Time(t0.0 + 320_000), &seg(4), &mut out);
        r.on_data(Time(t0.0 + 330_000), &seg(5), &mut out);
        assert!(acks(&out).is_empty(), "three segments queued, one at the last ACK: the window would drop a unit");
        r.on_timer(Time(t0.0 + 410_000), TimerKind::DelAck, &mut out);
        assert_eq!(acks(&out).iter().map(|a| a.ack).collect::<Vec<_>>(), vec![6]);

        // A whole 4 KB unit of room: two unread segments leave the window as it was.
        let mut r = reading_after_100us();
        r.window_phase = 4096;
        out.clear();
        r.on_data(t0, &seg(0), &mut out);
        r.on_data(Time(t0.0 + 30_000), &seg(1), &mut out);
        assert_eq!(acks(&out).iter().map(|a| a.ack).collect::<Vec<_>>(), vec![2]);
        assert_eq!(r.rcv_wnd, EMPTY_WINDOW);
        // An out-of-order segment is SACKed at once; the free space its
        // queue leaves is a unit smaller, but `tcp_select_window` keeps the
        // right edge the last ACK advertised.
        out.clear();
        r.on_data(Time(t0.0 + 40_000), &seg(3), &mut out);
        assert_eq!(acks(&out).len(), 1);
        assert!(r.free_window(r.queued()) < EMPTY_WINDOW);
        assert_eq!(r.rcv_wnd, EMPTY_WINDOW, "the window is not shrunk below the last right edge");
    }

    /// In-order data waits for the application's read: no ACK on the second
    /// segment, one ACK for all of them when the read (100 us after the first
    /// became readable) returns; the next segment starts the next wait.
    #[test]
    fn in_order_data_is_acknowledged_at_the_applications_read() {
        let mut r = reading_after_100us();
        let mut out = vec![];
        let t0 = Time::from_ms(100);
        for i in 0..3u32 {
            r.on_data(Time(t0.0 + i as u64 * 30_000), &seg(i), &mut out);
        }
        assert!(acks(&out).is_empty(), "two full segments unread: the ACK waits");
        assert_eq!(r.read_due, Some(Time(t0.0 + 100_000)));
        assert!(r.delack_timer.is_some_and(|t| t > Time(t0.0 + 100_000)), "the delayed-ACK timer is armed meanwhile");
        // The read shares the delayed-ACK timer's event, due first.
        assert_eq!(r.timer_deadline(TimerKind::DelAck), Some(Time(t0.0 + 100_000)));
        r.on_timer(Time(t0.0 + 100_000), TimerKind::DelAck, &mut out);
        assert_eq!(acks(&out).iter().map(|a| a.ack).collect::<Vec<_>>(), vec![3]);
        assert_eq!(r.read_due, None);
        out.clear();
        // One segment read: left to the delayed-ACK timer (tcp_cleanup_rbuf
        // acknowledges more than one full segment only).
        r.on_data(Time(t0.0 + 200_000), &seg(3), &mut out);
        assert_eq!(r.read_due, Some(Time(t0.0 + 300_000)));
        r.on_timer(Time(t0.0 + 300_000), TimerKind::DelAck, &mut out);
        assert!(acks(&out).is_empty());
        assert!(r.delack_timer.is_some());
    }

    /// iperf3 asks for one block per read: with more readable, a read takes
    /// a block (ending inside a segment, which stays unread until read
    /// whole) and the next follows after `again`, until the rest fits.
    #[test]
    fn a_read_takes_at_most_a_block_and_the_next_follows() {
        let mut r = reading_after_100us();
        r.set_app_reads(reads_after(100_000, 3_620)); // two and a half segments
        let mut out = vec![];
        let t0 = Time::from_ms(100);
        for i in 0..6u32 {
            r.on_data(Time(t0.0 + i as u64 * 10_000), &seg(i), &mut out);
        }
        assert!(acks(&out).is_empty());
        r.on_timer(Time(t0.0 + 100_000), TimerKind::DelAck, &mut out);
        assert_eq!(acks(&out).iter().map(|a| a.ack).collect::<Vec<_>>(), vec![6], "the first read acknowledges what arrived");
        assert_eq!((r.copied, r.copied_bytes_into), (2, 724));
        assert_eq!(r.unread(), 4, "the segment the read ended in is still charged");
        assert_eq!(r.read_due, Some(Time(t0.0 + 110_000)));
        out.clear();
        r.on_timer(Time(t0.0 + 110_000), TimerKind::DelAck, &mut out);
        assert_eq!((r.copied, r.copied_bytes_into), (5, 0), "724 + 3,620 bytes: three segments exactly");
        assert_eq!(r.read_due, Some(Time(t0.0 + 120_000)));
        r.on_timer(Time(t0.0 + 120_000), TimerKind::DelAck, &mut out);
        assert_eq!((r.copied, r.read_due), (6, None), "the rest fits one read");
        assert!(acks(&out).is_empty(), "nothing new to acknowledge");
    }

    /// Since Linux 6.6 a full segment with PSH (the last of a super-packet,
    /// the end of a write) is acknowledged by the read that empties the
    /// buffer; the same segment without PSH waits for the delayed-ACK timer.
    #[test]
    fn the_read_of_a_full_segment_with_psh_acknowledges_it() {
        for psh in [false, true] {
            let mut r = reading_after_100us();
            let mut out = vec![];
            let t0 = Time::from_ms(100);
            for i in 0..2u32 {
                r.on_data(Time(t0.0 + i as u64 * 30_000), &seg(i), &mut out);
            }
            r.on_timer(Time(t0.0 + 100_000), TimerKind::DelAck, &mut out);
            out.clear();
            r.on_data(Time(t0.0 + 200_000), &DataSegment { psh, ..seg(2) }, &mut out);
            assert!(acks(&out).is_empty(), "one segment unread: the ACK waits for the read");
            r.on_timer(Time(t0.0 + 300_000), TimerKind::DelAck, &mut out);
            let want: Vec<u32> = if psh { vec![3] } else { vec![] };
            assert_eq!(acks(&out).iter().map(|a| a.ack).collect::<Vec<_>>(), want, "psh: {psh}");
        }
    }

    /// The short last segment of a transfer is acknowledged by the read that
    /// takes it (Linux's ICSK_ACK_PUSHED), not by the delayed-ACK timer.
    #[test]
    fn the_read_of_a_transfers_short_last_segment_acknowledges_it() {
        let mut r = TcpReceiver::new(0, &TcpConfig::default(), Some(3 * 1448 + 100));
        let mut out = vec![];
        r.on_packet(Time::ZERO, &Packet { flow: 0, wire_bytes: 60, reverse: false, hop: 0, epoch: 0, payload: Payload::Syn { tsval: 1 } }, &mut out);
        r.set_app_reads(reads_after(100_000, u64::MAX));
        r.window_phase = 1;
        past_quick_acks(&mut r);
        let t0 = Time::from_ms(100);
        for i in 0..2u32 {
            r.on_data(Time(t0.0 + i as u64 * 10_000), &seg(i), &mut out);
        }
        r.on_timer(Time(t0.0 + 100_000), TimerKind::DelAck, &mut out);
        out.clear();
        // A full segment, then the 100-byte tail: one read takes both and acknowledges them.
        r.on_data(Time(t0.0 + 200_000), &seg(2), &mut out);
        r.on_data(Time(t0.0 + 210_000), &DataSegment { payload: 100, ..seg(3) }, &mut out);
        assert!(acks(&out).is_empty());
        r.on_timer(Time(t0.0 + 300_000), TimerKind::DelAck, &mut out);
        assert_eq!(acks(&out).iter().map(|a| a.ack).collect::<Vec<_>>(), vec![4]);
    }

    /// Loss signals do not wait for the read: an out-of-order segment is
    /// answered at once with its SACK block, and so is the one filling the hole.
    #[test]
    fn out_of_order_data_and_a_filled_hole_are_acknowledged_at_once_with_reads() {
        let mut r = reading_after_100us();
        let mut out = vec![];
        let t0 = Time::from_ms(100);
        r.on_data(t0, &seg(0), &mut out);
        r.on_data(Time(t0.0 + 10_000), &seg(2), &mut out);
        let a = acks(&out);
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].ack, a[0].sack.n), (1, 1));
        out.clear();
        r.on_data(Time(t0.0 + 20_000), &seg(1), &mut out);
        assert_eq!(acks(&out).iter().map(|a| a.ack).collect::<Vec<_>>(), vec![3]);
    }

    /// The segments of one skb (a super-packet forwarded whole) take one ACK
    /// decision, in order or out of order (with its SACK block).
    #[test]
    fn one_skb_is_acknowledged_once() {
        let mut r = established();
        let mut out = vec![];
        r.begin_batch(true);
        for i in 0..10 {
            r.on_data(Time::from_ms(50), &seg(i), &mut out);
        }
        assert!(out.is_empty());
        r.end_batch(Time::from_ms(50), &mut out);
        let a = acks(&out);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].ack, 10);
        // An out-of-order skb (a hole at 10): one ACK with its SACK block.
        out.clear();
        r.begin_batch(true);
        for i in 12..20 {
            r.on_data(Time::from_ms(51), &seg(i), &mut out);
        }
        r.end_batch(Time::from_ms(51), &mut out);
        let a = acks(&out);
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].ack, a[0].sack.as_slice()[0]), (10, SeqRange::new(12, 20)));
    }

    /// A batch of held packets counts each run of consecutive out-of-order
    /// segments as one skb, as the socket backlog coalesces them.
    #[test]
    fn a_batch_queues_each_run_of_consecutive_segments_as_one_skb() {
        let mut r = established();
        let mut out = vec![];
        r.on_data(Time::from_ms(50), &seg(0), &mut out);
        // A hole at 1: runs 2-4 and 6-7, each one out-of-order skb.
        r.begin_batch(false);
        for i in [2, 3, 4, 6, 7] {
            r.on_data(Time::from_ms(51), &seg(i), &mut out);
        }
        r.end_batch(Time::from_ms(51), &mut out);
        assert_eq!(r.ofo_skbs, 2);
        // Outside a batch each segment is an skb of its own.
        r.on_data(Time::from_ms(52), &seg(9), &mut out);
        r.on_data(Time::from_ms(52), &seg(10), &mut out);
        assert_eq!(r.ofo_skbs, 4);
    }

    /// Each skb of a batch takes one ACK decision: a run of three segments
    /// behind a hole is answered by one duplicate ACK, not three (past the
    /// quick-ACK phase, whose ACKs all wait for the batch's end).
    #[test]
    fn a_batch_takes_one_ack_decision_per_run() {
        let mut r = established();
        let mut out = vec![];
        r.on_data(Time::from_ms(50), &seg(0), &mut out);
        r.quick = 0;
        out.clear();
        r.begin_batch(false);
        for i in [2, 3, 4] {
            r.on_data(Time::from_ms(51), &seg(i), &mut out);
        }
        r.end_batch(Time::from_ms(51), &mut out);
        let a = acks(&out);
        assert_eq!(a.len(), 1, "{a:?}");
        assert_eq!((a[0].ack, a[0].sack.as_slice()[0]), (1, SeqRange::new(2, 5)));
        // Two runs: two decisions, two duplicate ACKs.
        out.clear();
        r.begin_batch(false);
        for i in [6, 7, 9] {
            r.on_data(Time::from_ms(52), &seg(i), &mut out);
        }
        r.end_batch(Time::from_ms(52), &mut out);
        assert_eq!(acks(&out).len(), 2, "{:?}", acks(&out));
        // In the quick-ACK phase the batch's ACKs are one, at its end.
        let mut r = established();
        r.on_data(Time::from_ms(50), &seg(0), &mut out);
        out.clear();
        r.begin_batch(false);
        for i in [2, 3, 4, 6, 7, 9] {
            r.on_data(Time::from_ms(51), &seg(i), &mut out);
        }
        r.end_batch(Time::from_ms(51), &mut out);
        assert_eq!(acks(&out).len(), 1);
    }

    /// An ECN-capable segment, CE-marked or not, with CWR or not.
    fn ect(seq: u32, ce: bool, cwr: bool) -> DataSegment {
        DataSegment { ect: true, ce, cwr, ..seg(seq) }
    }

    /// A receiver past its quick-ACK phase, ECN on, that ACKs every second
    /// segment and delays odd ones.
    fn steady(ce_state_acks: bool) -> TcpReceiver {
        let cfg = TcpConfig { ecn: true, ..TcpConfig::default() };
        let mut r = TcpReceiver::new(0, &cfg, None);
        if ce_state_acks {
            r.set_ce_state_acks();
        }
        let mut out = vec![];
        r.on_packet(Time::ZERO, &Packet { flow: 0, wire_bytes: 60, reverse: false, hop: 0, epoch: 0, payload: Payload::Syn { tsval: 1 } }, &mut out);
        r.quick = 0;
        r.ato = usecs_to_jiffies(40_000, 250);
        r.lrcvtime = jiffies_at(Time::from_ms(99), 250);
        r
    }

    fn ack_ece(out: &[Packet]) -> Vec<(u32, bool)> {
        acks(out).iter().map(|a| (a.ack, a.ece)).collect()
    }

    /// RFC 3168 (Linux `tcp_ecn_check_ce` without DCTCP): one CE sets ECE on
    /// every ACK until a segment with CWR arrives, and a first CE is ACKed quickly.
    #[test]
    fn classic_ecn_echoes_until_cwr() {
        let mut r = steady(false);
        let mut out = vec![];
        r.on_data(Time::from_ms(100), &ect(0, false, false), &mut out);
        assert!(out.is_empty(), "delayed");
        r.on_data(Time::from_ms(101), &ect(1, true, false), &mut out);
        // Quick-ACK mode: the CE segment is ACKed at once, with ECE.
        assert_eq!(ack_ece(&out), [(2, true)]);
        out.clear();
        for i in 2..6 {
            r.on_data(Time::from_ms(100 + i as u64), &ect(i, false, false), &mut out);
        }
        assert!(ack_ece(&out).iter().all(|&(_, ece)| ece), "{:?}", ack_ece(&out));
        out.clear();
        // CWR: ECE stops, and the CWR segment is ACKed at once.
        r.on_data(Time::from_ms(110), &ect(6, false, true), &mut out);
        assert_eq!(ack_ece(&out), [(7, false)]);
    }

    /// DCTCP's receiver (`dctcp_ece_ack_update`): ECE on exactly the ACKs of
    /// CE segments; a change of the CE state while an ACK is delayed first
    /// ACKs the data before the change with the old state, then the segment
    /// that changed it at once. Without a pending delayed ACK only the second.
    #[test]
    fn dctcp_receiver_echoes_each_segments_ce_state() {
        let mut r = steady(true);
        let mut out = vec![];
        r.on_data(Time::from_ms(100), &ect(0, false, false), &mut out);
        assert!(out.is_empty() && r.timer_deadline(TimerKind::DelAck).is_some(), "delayed");
        r.on_data(Time::from_ms(101), &ect(1, true, false), &mut out);
        assert_eq!(ack_ece(&out), [(1, false), (2, true)]);
        out.clear();
        // CE continues: ordinary delayed ACKs, every second segment, with ECE.
        r.on_data(Time::from_ms(102), &ect(2, true, false), &mut out);
        assert!(out.is_empty());
        r.on_data(Time::from_ms(103), &ect(3, true, false), &mut out);
        assert_eq!(ack_ece(&out), [(4, true)]);
        out.clear();
        // The state changes back with no ACK pending: one immediate ACK, no ECE
        // (no latching until CWR).
        r.on_data(Time::from_ms(104), &ect(4, false, false), &mut out);
        assert_eq!(ack_ece(&out), [(5, false)]);
        out.clear();
        r.on_data(Time::from_ms(105), &ect(5, false, false), &mut out);
        assert!(out.is_empty());
        let t = r.timer_deadline(TimerKind::DelAck).unwrap();
        r.on_timer(t, TimerKind::DelAck, &mut out);
        assert_eq!(ack_ece(&out), [(6, false)]);
        out.clear();
        // CWR from the sender does not clear the state of a CE segment.
        r.on_data(Time::from_ms(300), &ect(6, true, true), &mut out);
        assert_eq!(ack_ece(&out), [(7, true)]);
        assert_eq!(r.ce_marks, 4);
    }

    /// The ACK of the data before a CE change leaves the delayed-ACK state
    /// alone when the change comes out of order: here the hole's first
    /// duplicate ACKs carry the old state, the CE segment's ACK the new one.
    #[test]
    fn dctcp_receiver_out_of_order_change() {
        let mut r = steady(true);
        let mut out = vec![];
        r.on_data(Time::from_ms(100), &ect(0, false, false), &mut out);
        assert!(out.is_empty());
        r.on_data(Time::from_ms(101), &ect(2, true, false), &mut out);
        let a = acks(&out);
        assert_eq!(ack_ece(&out), [(1, false), (1, true)]);
        assert_eq!(a[1].sack.as_slice(), &[SeqRange::new(2, 3)]);
    }

    #[test]
    fn quickacks_then_every_second_segment() {
        let mut r = established();
        let mut out = vec![];
        let t = Time::from_ms(50);
        for i in 0..40 {
            r.on_data(Time(t.0 + i as u64 * 10_000), &seg(i), &mut out);
        }
        let a = acks(&out);
        // 16 quick ACKs for the first 16 segments, then one per two segments: 12 more.
        assert_eq!(a.len(), 16 + 12);
        assert_eq!(a.last().unwrap().ack, 40);
    }

    #[test]
    fn odd_segment_waits_for_the_delayed_ack_timer() {
        let mut r = established();
        let mut out = vec![];
        r.quick = 0;
        r.ato = usecs_to_jiffies(40_000, 250);
        r.lrcvtime = jiffies_at(Time::from_ms(99), 250);
        r.on_data(Time::from_ms(100), &seg(0), &mut out);
        assert!(acks(&out).is_empty());
        let t = r.timer_deadline(TimerKind::DelAck).unwrap();
        assert!(t > Time::from_ms(100) && t <= Time::from_ms(144), "{t:?}");
        r.on_timer(t, TimerKind::DelAck, &mut out);
        assert_eq!(acks(&out).len(), 1);
        assert_eq!(r.delayed_acks, 1);
    }

    #[test]
    fn holes_produce_sack_blocks_newest_first_and_dsack_for_duplicates() {
        let mut r = established();
        let mut out = vec![];
        past_quick_acks(&mut r);
        r.on_data(Time::from_ms(100), &seg(0), &mut out);
        r.on_data(Time::from_ms(101), &seg(1), &mut out);
        out.clear();
        // Segment 2 lost; 3, 4 arrive; then 6 (5 lost).
        r.on_data(Time::from_ms(102), &seg(3), &mut out);
        r.on_data(Time::from_ms(103), &seg(4), &mut out);
        r.on_data(Time::from_ms(104), &seg(6), &mut out);
        let a = acks(&out);
        assert_eq!(a.len(), 3, "first three dupacks of a hole are immediate");
        assert_eq!(a[0].ack, 2);
        assert_eq!(a[0].sack.as_slice(), &[SeqRange::new(3, 4)]);
        assert_eq!(a[1].sack.as_slice(), &[SeqRange::new(3, 5)]);
        assert_eq!(a[2].sack.as_slice(), &[SeqRange::new(6, 7), SeqRange::new(3, 5)]);
        out.clear();
        // A duplicate of an out-of-order segment is D-SACKed on the next ACK, which
        // here is the one for the segment that fills the first hole (sent at once).
        r.on_data(Time::from_ms(105), &seg(3), &mut out);
        assert!(acks(&out).is_empty(), "SACK compression holds the 4th dupack");
        r.on_data(Time::from_ms(106), &seg(2), &mut out);
        let a = acks(&out);
        assert_eq!(a.len(), 1);
        assert!(a[0].sack.dsack);
        assert_eq!(a[0].ack, 5);
        assert_eq!(a[0].sack.as_slice(), &[SeqRange::new(3, 4), SeqRange::new(6, 7)]);
        assert_eq!(r.duplicate_segments, 1);
        // The held 4th dupack was never sent: counted as compressed.
        assert_eq!((r.ofo_skbs, r.acks_compressed), (4, 1));
    }

    /// A receiver past its quick ACKs that took segment 0 at 100 ms, then
    /// `ofo` 10 us apart from 101 ms; and the ACKs those answered.
    fn after_holes(ofo: &[u32]) -> (TcpReceiver, Vec<Packet>) {
        let mut r = established();
        let mut out = vec![];
        past_quick_acks(&mut r);
        r.on_data(Time::from_ms(100), &seg(0), &mut out);
        out.clear();
        for (i, &s) in ofo.iter().enumerate() {
            r.on_data(Time(Time::from_ms(101).0 + i as u64 * 10_000), &seg(s), &mut out);
        }
        (r, out)
    }

    /// Linux sends the ACKs it held back (SACK compression) before a hole's
    /// block would stand third or lower in the list: a new block beside two
    /// others, or data extending the third (`tcp_sack_new_ofo_skb`, since
    /// 5.8: only the first two blocks are sure to reach the sender).
    #[test]
    fn held_acks_go_out_before_a_third_sack_block() {
        // Segments 1 and 2 lost: 3-6 give three immediate dupacks, then one held.
        let (mut r, mut out) = after_holes(&[3, 4, 5, 6]);
        assert_eq!(acks(&out).len(), 3);
        out.clear();
        // A second block (8; 7 lost): held too.
        r.on_data(Time(101_100_000), &seg(8), &mut out);
        assert!(acks(&out).is_empty());
        // A third block (10; 9 lost): the held ACK goes out first, without it.
        r.on_data(Time(101_110_000), &seg(10), &mut out);
        let a = acks(&out);
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].ack, a[0].sack.as_slice()), (1, &[SeqRange::new(8, 9), SeqRange::new(3, 7)][..]));
        out.clear();
        // The segment that forced it was scheduled before the ACK and is not
        // acknowledged again; the next ones are held.
        r.on_data(Time(101_120_000), &seg(11), &mut out);
        assert!(acks(&out).is_empty());
        // Data extending the third block (2, beside 3-6) sends the held ACK first.
        r.on_data(Time(101_130_000), &seg(2), &mut out);
        let a = acks(&out);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].sack.as_slice(), &[SeqRange::new(10, 12), SeqRange::new(8, 9), SeqRange::new(3, 7)]);
        // Data extending the first block is held again.
        out.clear();
        r.on_data(Time(101_140_000), &seg(13), &mut out);
        assert!(acks(&out).is_empty());
        // As Linux counts them: nine out-of-order skbs, and one ACK held
        // back and never sent (two went out as one at segment 10; segment
        // 11's went out as itself; segment 13's is still held).
        assert_eq!((r.ofo_skbs, r.acks_compressed), (9, 1));
    }

    /// In one skb (GRO's, or a super-packet) the held ACK goes out once, and
    /// the skb, scheduled before it, takes no ACK decision of its own.
    #[test]
    fn one_skb_that_opens_a_third_block_sends_the_held_ack_once() {
        let (mut r, mut out) = after_holes(&[2, 3, 4, 5, 7]);
        out.clear();
        r.begin_batch(true);
        for s in 9..14 {
            r.on_data(Time(101_100_000), &seg(s), &mut out);
        }
        r.end_batch(Time(101_100_000), &mut out);
        let a = acks(&out);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].sack.as_slice(), &[SeqRange::new(7, 8), SeqRange::new(2, 6)]);
        assert!(r.timer_deadline(TimerKind::CompressedAck).is_none());
        // Five segments and one skb out of order; two held ACKs sent as one.
        assert_eq!((r.ofo_skbs, r.acks_compressed), (6, 1));
    }

    fn stamped(seq: u32, tsval: u32) -> DataSegment {
        DataSegment { tsval, ..seg(seq) }
    }

    /// Heavy reordering with timestamps (RFC 7323 PAWS, Linux
    /// `tcp_paws_discard`): a spurious retransmission below rcv_wup raises
    /// TS.Recent past an original still in flight, which is then discarded on
    /// arrival with an immediate duplicate ACK; its own retransmission gets in.
    #[test]
    fn paws_discards_an_original_overtaken_by_a_newer_retransmission() {
        let mut r = established();
        let mut out = vec![];
        r.on_data(Time::from_ms(10), &stamped(0, 5), &mut out);
        r.on_data(Time::from_ms(11), &stamped(2, 7), &mut out);
        assert_eq!(r.rcv_nxt, 1);
        // Segment 0 again, retransmitted at tick 100: TS.Recent = 100.
        r.on_data(Time::from_ms(120), &stamped(0, 100), &mut out);
        assert_eq!(r.ts_recent, 100);
        out.clear();
        // Segment 1's original (tick 6) arrives last: discarded, ACKed at once
        // without a D-SACK (it is not below rcv_nxt).
        r.on_data(Time::from_ms(130), &stamped(1, 6), &mut out);
        assert_eq!(r.rcv_nxt, 1, "the segment was discarded");
        assert_eq!(r.paws_rejected, 1);
        let a = acks(&out);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].ack, 1);
        assert!(!a[0].sack.dsack);
        assert_eq!(a[0].tsecr, 100);
        // One tick older than TS.Recent is still accepted (TCP_PAWS_WINDOW).
        r.on_data(Time::from_ms(140), &stamped(1, 99), &mut out);
        assert_eq!(r.rcv_nxt, 3);
        assert_eq!(r.paws_rejected, 1);
        // TS.Recent never moves backwards.
        assert_eq!(r.ts_recent, 100);
        // A newer duplicate that ends before rcv_wup (3) does not move it
        // either: Linux's `tcp_sequence` discards it before TS.Recent is set.
        out.clear();
        r.on_data(Time::from_ms(150), &stamped(0, 140), &mut out);
        assert_eq!(r.ts_recent, 100);
        assert!(acks(&out)[0].sack.dsack);
        // The segment just below rcv_wup does.
        r.on_data(Time::from_ms(160), &stamped(2, 150), &mut out);
        assert_eq!(r.ts_recent, 150);
    }

    #[test]
    fn paws_discarded_duplicate_is_dsacked_and_starts_quick_acks() {
        let mut r = established();
        let mut out = vec![];
        for i in 0..4 {
            r.on_data(Time::from_ms(10 + i as u64), &stamped(i, 50 + i), &mut out);
        }
        r.quick = 0;
        out.clear();
        r.on_data(Time::from_ms(30), &stamped(1, 20), &mut out);
        assert_eq!((r.paws_rejected, r.duplicate_segments), (1, 1));
        let a = acks(&out);
        assert_eq!(a.len(), 1);
        assert!(a[0].sack.dsack);
        assert_eq!(a[0].sack.as_slice(), &[SeqRange::new(1, 2)]);
        assert!(r.quick > 0, "tcp_send_dupack enters quick-ACK mode");
    }
}
