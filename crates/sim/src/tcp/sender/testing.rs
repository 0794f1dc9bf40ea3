//! A packet-script harness for one `TcpSender`, in the spirit of packetdrill
//! and smoltcp's socket tests: no network, no receiver, no event queue. A
//! script completes the handshake, then feeds the sender ACKs (cumulative ACK,
//! SACK and D-SACK blocks, timestamp echo, ECE) at chosen times, lets its
//! timers fire, and checks segment by segment what it transmits and what state
//! it is in. Sequence numbers are segment numbers, as everywhere in the engine.
//!
//! ```text
//! let mut h = reno().start();          // SYN at 0 ms, SYN-ACK at 100 ms: RTT 100 ms
//! expect_tx!(h, 0..10);                // the initial window leaves at 100 ms
//! h.at(200);
//! ack!(h, 0, sack = [(1, 2)]);         // segment 0 missing, 1 SACKed
//! expect_tx!(h, 10);                   // one new segment; RACK waits min_rtt/4
//! check!(h, ca = Disorder, lost_out = 0);
//! h.fire_timer();                      // the REO timer: 0 is lost
//! expect_tx!(h, 0 rtx);
//! check!(h, ca = Recovery, ssthresh = 5);
//! ```
//!
//! Every transmission must be matched by an `expect_tx!` before the next event
//! (ACK or time step), so a script pins all the sender sends, as packetdrill
//! does. By default an ACK echoes the timestamp a Linux receiver would echo
//! (TS.Recent: the latest transmission of the segment at the old left edge, or
//! the previous echo for an ACK that does not advance); scripts override it to
//! model a late original (`tsecr = h.ts_first(seq)`) or no timestamps
//! (`tsecr = 0`).

use super::{TcpSender, XmitTimer};
use crate::cc::{make_cca, CaState, CongestionControl};
use crate::event::TimerKind;
use crate::packet::{AckExt, AckSegment, Packet, Payload, SackBlocks, SeqRange, Split32};
use crate::tcp::accecn;
use crate::tcp::{ts_clock, TcpConfig};
use crate::units::{Time, NS_PER_MS};

/// One data segment the sender put on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tx {
    pub seq: u32,
    pub rtx: bool,
    pub cwr: bool,
}

impl Tx {
    pub fn new(seq: u32) -> Tx {
        Tx { seq, rtx: false, cwr: false }
    }
    pub fn rtx(seq: u32) -> Tx {
        Tx { seq, rtx: true, cwr: false }
    }
    pub fn cwr(seq: u32) -> Tx {
        Tx { seq, rtx: false, cwr: true }
    }
}

/// How to build a sender: algorithm, configuration, transfer size, path RTT.
pub struct Setup {
    cca: Box<dyn CongestionControl>,
    cfg: TcpConfig,
    segments: Option<u32>,
    rtt_ms: u64,
    tso: bool,
    software_gso: bool,
    tsq: bool,
}

pub fn reno() -> Setup {
    setup("reno")
}

pub fn cubic() -> Setup {
    setup("cubic")
}

pub fn setup(cca: &str) -> Setup {
    let cca = make_cca(cca, &Default::default()).expect("a registered algorithm");
    Setup { cca, cfg: TcpConfig::default(), segments: None, rtt_ms: 100, tso: false, software_gso: false, tsq: false }
}

impl Setup {
    /// Changes the TCP configuration (sysctls) from Linux's defaults.
    pub fn cfg(mut self, f: impl FnOnce(&mut TcpConfig)) -> Setup {
        f(&mut self.cfg);
        self
    }

    /// A finite transfer of `n` full segments (default: unlimited data).
    pub fn segments(mut self, n: u32) -> Setup {
        self.segments = Some(n);
        self
    }

    /// With segmentation offload (`[hosts] tso`; default off here).
    pub fn tso(mut self) -> Setup {
        self.tso = true;
        self
    }

    /// With segmentation offload in software (`[hosts] tso = false`): the
    /// device segments each super-packet as it leaves.
    pub fn software_gso(mut self) -> Setup {
        self.tso = true;
        self.software_gso = true;
        self
    }

    /// With TCP Small Queues (`[hosts] tsq`; default off here): the script
    /// frees skbs with `Harness::nic_tx_done`.
    pub fn tsq(mut self) -> Setup {
        self.tsq = true;
        self
    }

    /// The handshake's RTT (default 100 ms): the first RTT sample.
    pub fn rtt(mut self, ms: u64) -> Setup {
        self.rtt_ms = ms;
        self
    }

    /// SYN at 0 ms, SYN-ACK after the RTT; the initial window is then waiting
    /// to be checked with `expect_tx!`.
    pub fn start(self) -> Harness {
        let bytes = self.segments.map(|n| n as u64 * self.cfg.mss as u64);
        let mut h = Harness {
            s: TcpSender::new(0, &self.cfg, self.cca, bytes),
            now: Time::ZERO,
            out: Vec::new(),
            sent: Vec::new(),
            ts_last: Vec::new(),
            ts_first: Vec::new(),
            una: 0,
            ts_recent: 0,
            ect_sent: Vec::new(),
            handed: Vec::new(),
            pushed: Vec::new(),
        };
        h.s.tso = self.tso;
        h.s.segment_at_device = self.software_gso;
        if self.tsq {
            h.s.tsq = Some(Default::default());
        }
        h.s.connect(Time::ZERO, &mut h.out);
        let syn_ts = match h.out.pop().map(|p| p.payload) {
            Some(Payload::Syn { tsval }) => tsval,
            other => panic!("connect sent {other:?}, not a SYN"),
        };
        assert!(h.out.is_empty());
        h.now = Time::from_ms(self.rtt_ms);
        let synack =
            Packet { flow: 0, wire_bytes: 60, reverse: true, hop: 0, epoch: 0, payload: Payload::SynAck { tsecr: syn_ts } };
        let now = h.now;
        h.s.on_packet(now, &synack, &mut h.out);
        // The handshake's own ACK goes first, before any data.
        assert_eq!(h.out.first().map(|p| (p.payload, p.reverse)), Some((Payload::HandshakeAck, false)));
        h.out.remove(0);
        h.ts_recent = syn_ts;
        h.collect();
        h
    }
}

/// A driven sender and what it has sent that the script has not checked yet.
pub struct Harness {
    pub s: TcpSender,
    now: Time,
    out: Vec<Packet>,
    sent: Vec<Tx>,
    /// Timestamp value of the latest and of the first transmission, per segment.
    ts_last: Vec<u32>,
    ts_first: Vec<u32>,
    /// The receiver model: the cumulative ACK and TS.Recent it last sent.
    una: u32,
    ts_recent: u32,
    /// Segments sent ECN-capable (ECT), in order.
    pub ect_sent: Vec<u32>,
    /// Segments in each packet the sender handed the network (a
    /// super-packet is one packet, a bundle), in order.
    pub handed: Vec<u32>,
    /// Segments sent with PSH, in order.
    pub pushed: Vec<u32>,
}

/// The ACK a script feeds: built by `ack!`.
pub struct AckSpec {
    una: u32,
    dsack: Option<(u32, u32)>,
    sack: Vec<(u32, u32)>,
    tsecr: Option<u32>,
    ece: bool,
    /// The AccECN option's ECT(1) and CE byte counts, for AccECN
    /// connections (whose ACE field reports no CE marks here).
    accecn_option: Option<(u32, u32)>,
}

impl AckSpec {
    pub fn new(una: u32) -> AckSpec {
        AckSpec { una, dsack: None, sack: Vec::new(), tsecr: None, ece: false, accecn_option: None }
    }
    /// The AccECN option with the receiver's ECT(1) and CE byte counts (all
    /// three counters; default: no option).
    pub fn accecn_option(&mut self, (e1b, ceb): (u32, u32)) {
        self.accecn_option = Some((e1b, ceb));
    }
    /// SACK blocks `[start, end)`, most recent first, as a receiver lists them.
    pub fn sack<const N: usize>(&mut self, blocks: [(u32, u32); N]) {
        self.sack.extend_from_slice(&blocks);
    }
    /// A D-SACK block, sent first (RFC 2883).
    pub fn dsack(&mut self, block: (u32, u32)) {
        self.dsack = Some(block);
    }
    /// The timestamp echo (0: no timestamp, which disables Eifel undo).
    pub fn tsecr(&mut self, v: u32) {
        self.tsecr = Some(v);
    }
    pub fn ece(&mut self) {
        self.ece = true;
    }
}

impl Harness {
    /// Current time in ms.
    pub fn now_ms(&self) -> u64 {
        self.now.0 / NS_PER_MS
    }

    /// Goes to absolute time `ms`, firing the timers that fall due on the way.
    pub fn at(&mut self, ms: u64) {
        let t = Time::from_ms(ms);
        assert!(t >= self.now, "time runs forward: at({ms}) after {} ms", self.now_ms());
        self.run_timers_until(t);
        self.now = t;
    }

    /// Moves time forward by `ms`, firing the timers that fall due.
    pub fn advance(&mut self, ms: u64) {
        let t = self.now_ms() + ms;
        self.at(t);
    }

    /// Jumps to the earliest pending timer and fires it; returns the time (ms)
    /// and which use of the retransmission timer it was.
    pub fn fire_timer(&mut self) -> (u64, Option<XmitTimer>) {
        self.assert_checked();
        let (kind, t) = self.next_timer().expect("a pending timer");
        let what = if kind == TimerKind::Xmit { self.s.xmit_timer.map(|(w, _)| w) } else { None };
        self.now = t;
        self.s.on_timer(t, kind, &mut self.out);
        self.collect();
        (self.now_ms(), what)
    }

    fn next_timer(&self) -> Option<(TimerKind, Time)> {
        [TimerKind::Xmit, TimerKind::Pacing, TimerKind::Syn]
            .into_iter()
            .filter_map(|k| self.s.timer_deadline(k).map(|t| (k, t)))
            .min_by_key(|&(k, t)| (t, k as u8))
    }

    fn run_timers_until(&mut self, t: Time) {
        while let Some((kind, when)) = self.next_timer() {
            if when > t {
                break;
            }
            self.assert_checked();
            self.now = when;
            self.s.on_timer(when, kind, &mut self.out);
            self.collect();
        }
    }

    /// Feeds one ACK at the current time.
    pub fn ack(&mut self, a: AckSpec) {
        self.assert_checked();
        let tsecr = match a.tsecr {
            Some(v) => v,
            None if a.una > self.una => self.ts(self.una),
            None => self.ts_recent,
        };
        if a.una > self.una {
            self.una = a.una;
        }
        self.ts_recent = tsecr;
        let mut sack = SackBlocks::default();
        for (s, e) in a.dsack.into_iter().chain(a.sack) {
            assert!(sack.push(SeqRange::new(s, e)), "at most 3 SACK blocks");
        }
        sack.dsack = a.dsack.is_some();
        let wnd_end = a.una + self.s.snd_wnd;
        let (ace, ext) = if self.s.accecn {
            let ext = match a.accecn_option {
                Some((e1b, ceb)) => AckExt::AccEcn { fields: 3, e1b: Split32::new(e1b), ceb: Split32::new(ceb) },
                None => AckExt::None,
            };
            (accecn::ace(0), ext)
        } else {
            (0, AckExt::None)
        };
        let seg = AckSegment { ack: a.una, wnd_end, tsecr, sack, ece: a.ece, ace, ext };
        let now = self.now;
        self.s.on_packet(now, &Packet::ack(0, seg), &mut self.out);
        self.collect();
    }

    /// The host's NIC finished sending segment `seq` (`last`: the end of its
    /// skb, which is then freed, as `tcp_wfree` runs). Returns whether the
    /// socket had been throttled by TCP Small Queues and wrote again.
    pub fn nic_tx_done(&mut self, seq: u32, last: bool) -> bool {
        self.assert_checked();
        let _ = seq; // scripts name the segment for the reader; the sender counts bytes
        let now = self.now;
        let woke = self.s.nic_tx_done(now, self.s.cfg.mss, last, &mut self.out);
        self.collect();
        woke
    }

    /// The application writes more data (with `segments`) and pushes it.
    pub fn write(&mut self, segments: u32) {
        self.assert_checked();
        let n = self.s.app_segments.expect("a finite transfer");
        self.s.app_segments = Some(n + segments);
        self.s.tick(self.now);
        self.s.write_xmit(&mut self.out, super::PushMode::Normal);
        self.collect();
    }

    fn collect(&mut self) {
        // Scripts name segments: a super-packet (one bundle) counts as its own.
        self.handed.extend(self.out.iter().map(|p| p.segs()));
        let segments: Vec<Packet> = self.out.drain(..).flat_map(|p| (0..p.segs()).map(move |i| p.segment(i))).collect();
        for p in segments {
            let Payload::Data(d) = p.payload else { panic!("the sender sent {p:?}") };
            let ts = ts_clock(self.now);
            let i = d.seq as usize;
            if self.ts_last.len() <= i {
                self.ts_last.resize(i + 1, 0);
                self.ts_first.resize(i + 1, 0);
            }
            if self.ts_first[i] == 0 {
                self.ts_first[i] = ts;
            }
            self.ts_last[i] = ts;
            self.sent.push(Tx { seq: d.seq, rtx: d.retransmission, cwr: d.cwr });
            if d.ect {
                self.ect_sent.push(d.seq);
            }
            if d.psh {
                self.pushed.push(d.seq);
            }
        }
    }

    fn assert_checked(&self) {
        assert!(
            self.sent.is_empty(),
            "at {} ms: transmissions not checked by the script: {:?}",
            self.now_ms(),
            self.sent
        );
    }

    /// Checks (and consumes) what was sent since the last check.
    pub fn expect_tx(&mut self, want: &[Tx]) {
        let got = std::mem::take(&mut self.sent);
        assert_eq!(got, want, "at {} ms: transmissions", self.now_ms());
    }

    /// Takes what was sent since the last check, for scripts that look at it
    /// some other way (or not at all).
    pub fn drain(&mut self) -> Vec<Tx> {
        std::mem::take(&mut self.sent)
    }

    /// Timestamp value of the latest transmission of `seq`.
    pub fn ts(&self, seq: u32) -> u32 {
        self.ts_last.get(seq as usize).copied().filter(|&t| t != 0).expect("a segment sent")
    }

    /// Timestamp value of the original transmission of `seq`.
    pub fn ts_first(&self, seq: u32) -> u32 {
        self.ts_first.get(seq as usize).copied().filter(|&t| t != 0).expect("a segment sent")
    }

    /// The state scripts check, with Linux's names.
    pub fn probe(&self) -> Probe {
        let s = &self.s;
        Probe {
            ca: s.sock.ca_state,
            cwnd: s.sock.cwnd,
            ssthresh: s.sock.ssthresh,
            in_flight: s.in_flight(),
            packets_out: s.sock.packets_out,
            sacked_out: s.sock.sacked_out,
            lost_out: s.sock.lost_out,
            retrans_out: s.sock.retrans_out,
            snd_una: s.sock.snd_una,
            snd_nxt: s.sock.snd_nxt,
            high_seq: s.rec.high_seq,
            reordering: s.sock.reordering,
            reord_seen: s.reord_seen,
            delivered: s.sock.delivered,
            delivered_ce: s.sock.delivered_ce,
            lost: s.sock.lost,
            prior_ssthresh: s.rec.prior_ssthresh,
            undo_marker: s.rec.undo_marker,
            undo_retrans: s.rec.undo_retrans,
            prr_delivered: s.rec.prr_delivered,
            prr_out: s.rec.prr_out,
            frto: s.frto,
            tlp_high_seq: s.tlp_high_seq,
            reo_wnd_steps: s.rack.reo_wnd_steps,
            reo_wnd_persist: s.rack.reo_wnd_persist,
            rto_ms: s.rto_us() / 1000,
            timer: s.xmit_timer.map(|(w, t)| (w, t.0 / NS_PER_MS)),
            srtt_us: s.srtt_us(),
            min_rtt_us: s.sock.min_rtt_us(),
            retransmissions: s.counters.retransmissions,
            recoveries: s.counters.recoveries,
            rtos: s.counters.rtos,
            tlps: s.counters.tlps,
            undos: s.counters.undos,
        }
    }
}

/// A snapshot of the sender's state (see `Harness::probe`).
#[derive(Clone, Debug)]
pub struct Probe {
    pub ca: CaState,
    pub cwnd: u32,
    pub ssthresh: u32,
    pub in_flight: u32,
    pub packets_out: u32,
    pub sacked_out: u32,
    pub lost_out: u32,
    pub retrans_out: u32,
    pub snd_una: u32,
    pub snd_nxt: u32,
    pub high_seq: u32,
    pub reordering: u32,
    pub reord_seen: u32,
    pub delivered: u32,
    pub delivered_ce: u32,
    pub lost: u32,
    pub prior_ssthresh: u32,
    pub undo_marker: Option<u32>,
    pub undo_retrans: i32,
    pub prr_delivered: u32,
    pub prr_out: u32,
    pub frto: bool,
    pub tlp_high_seq: Option<u32>,
    pub reo_wnd_steps: u32,
    pub reo_wnd_persist: u32,
    /// Current RTO (with backoff), ms.
    pub rto_ms: u64,
    /// The armed use of the retransmission timer and its deadline (absolute ms).
    pub timer: Option<(XmitTimer, u64)>,
    pub srtt_us: u32,
    pub min_rtt_us: u32,
    pub retransmissions: u64,
    pub recoveries: u64,
    pub rtos: u64,
    pub tlps: u64,
    pub undos: u64,
}

/// `ack!(h, una, sack = [(s, e), ...], dsack = (s, e), tsecr = v, ece)`.
macro_rules! ack {
    ($h:ident, $una:expr $(, $k:ident $(= $v:expr)?)* $(,)?) => {{
        #[allow(unused_mut)]
        let mut a = $crate::tcp::sender::testing::AckSpec::new($una);
        $( a.$k($($v)?); )*
        $h.ack(a);
    }};
}

/// `expect_tx!(h, 0..10, 3 rtx, 12 cwr)` or `expect_tx!(h, none)`.
macro_rules! expect_tx {
    ($h:ident, none) => {
        $h.expect_tx(&[])
    };
    ($h:ident, $($rest:tt)+) => {{
        let v: &mut Vec<$crate::tcp::sender::testing::Tx> = &mut Vec::new();
        tx_list!(v; $($rest)+);
        $h.expect_tx(v);
    }};
}

macro_rules! tx_list {
    ($v:ident;) => {};
    ($v:ident; $a:literal .. $b:literal rtx $(, $($rest:tt)*)?) => {
        for s in $a..$b { $v.push($crate::tcp::sender::testing::Tx::rtx(s)); }
        tx_list!($v; $($($rest)*)?);
    };
    ($v:ident; $a:literal .. $b:literal $(, $($rest:tt)*)?) => {
        for s in $a..$b { $v.push($crate::tcp::sender::testing::Tx::new(s)); }
        tx_list!($v; $($($rest)*)?);
    };
    ($v:ident; $a:literal rtx $(, $($rest:tt)*)?) => {
        $v.push($crate::tcp::sender::testing::Tx::rtx($a));
        tx_list!($v; $($($rest)*)?);
    };
    ($v:ident; $a:literal cwr $(, $($rest:tt)*)?) => {
        $v.push($crate::tcp::sender::testing::Tx::cwr($a));
        tx_list!($v; $($($rest)*)?);
    };
    ($v:ident; $a:literal $(, $($rest:tt)*)?) => {
        $v.push($crate::tcp::sender::testing::Tx::new($a));
        tx_list!($v; $($($rest)*)?);
    };
}

/// `check!(h, ca = Recovery, cwnd = 8, ...)`: compares `Harness::probe` fields.
macro_rules! check {
    ($h:ident, $($k:ident = $v:expr),+ $(,)?) => {{
        let p = $h.probe();
        $( assert_eq!(p.$k, $v, "at {} ms: {}", $h.now_ms(), stringify!($k)); )+
    }};
}

pub(crate) use {ack, check, expect_tx, tx_list};

// Script prefixes shared by the cases. Unless a case says otherwise: Reno,
// Linux's defaults (SACK, HZ 250, RTO min 200 ms, TLP, F-RTO), unlimited data,
// handshake RTT 100 ms, so srtt is 100 ms, the RTO 300 ms and min_rtt 100 ms,
// and the initial window (0..10) leaves at 100 ms.

/// Reno with the initial window sent and checked.
pub fn started() -> Harness {
    let mut h = reno().start();
    expect_tx!(h, 0..10);
    h
}

/// Segment 0 lost: SACKs for 1, 2 and 3 arrive one by one at 200..202 ms, as
/// a receiver sends them. The third leaves RACK no reordering window, so 0 is
/// marked lost and fast-retransmitted.
pub fn fast_retransmit_of_0() -> Harness {
    let mut h = started();
    h.at(200);
    ack!(h, 0, sack = [(1, 2)]);
    expect_tx!(h, 10);
    h.at(201);
    ack!(h, 0, sack = [(1, 3)]);
    expect_tx!(h, 11);
    h.at(202);
    ack!(h, 0, sack = [(1, 4)]);
    expect_tx!(h, 0 rtx);
    h
}

/// Segments 0 and 2 lost (1, 3 and 4 SACKed): RACK marks both at 202 ms,
/// PRR lets 0 be retransmitted; 2 waits.
pub fn first_hole_retransmitted() -> Harness {
    let mut h = started();
    h.at(200);
    ack!(h, 0, sack = [(1, 2)]);
    expect_tx!(h, 10);
    h.at(201);
    ack!(h, 0, sack = [(3, 4), (1, 2)]);
    expect_tx!(h, 11);
    h.at(202);
    ack!(h, 0, sack = [(3, 5), (1, 2)]);
    expect_tx!(h, 0 rtx);
    h
}

/// Segments 0 and 2 lost (1, 3.. SACKed): both retransmitted by 205 ms.
pub fn two_holes_retransmitted() -> Harness {
    let mut h = first_hole_retransmitted();
    h.at(204);
    ack!(h, 0, sack = [(3, 6), (1, 2)]);
    h.at(205);
    ack!(h, 0, sack = [(3, 7), (1, 2)]);
    expect_tx!(h, 2 rtx);
    h
}

pub fn no_tlp() -> Harness {
    let mut h = reno().cfg(|c| c.tlp = false).start();
    expect_tx!(h, 0..10);
    check!(h, timer = Some((XmitTimer::Retrans, 400)));
    h
}
