//! Transmission, after Linux's `net/ipv4/tcp_output.c`: new data
//! (`tcp_write_xmit`, limited by cwnd, the peer's window and the send buffer;
//! a loss probe may exceed cwnd by one), retransmissions
//! (`tcp_xmit_retransmit_queue` in sequence order as cwnd allows,
//! `tcp_retransmit_skb`), ECN marks on outgoing data (`tcp_ecn_send`),
//! internal pacing (`tcp_pacing_check`, `tcp_update_skb_after_send`: an
//! earliest departure time advanced by each segment's length at the pacing
//! rate), and cwnd validation for application-limited periods
//! (`tcp_cwnd_validate`, `tcp_cwnd_application_limited`). `tcp_xmit_recovery`
//! from `tcp_input.c` is the bridge from ACK processing.

use crate::packet::{seq_after, seq_before};
use super::super::scoreboard::{SegState, EVER_RETRANS, RETRANS, SACKED_RETRANS};
use super::super::ts_clock;
use super::timer::XmitTimer;
use super::{ConnState, Rexmit, TcpSender};
use crate::cc::{CaEvent, CaState, PacingStatus};
use crate::packet::{DataSegment, Gso, Packet, Payload};
use crate::host::{tso, tsq};
use crate::units::{Time, NS_PER_SEC};

/// How `write_xmit` pushes new data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PushMode {
    Normal,
    /// A tail loss probe: one segment, even beyond cwnd (Linux `push_one == 2`).
    Probe,
}

impl TcpSender {
    /// Linux `tcp_xmit_recovery`: after cwnd is updated, the (re)transmissions
    /// `tcp_fastretrans_alert` asked for: new data for F-RTO, then lost segments.
    pub(super) fn xmit_recovery(&mut self, rexmit: Rexmit, out: &mut Vec<Packet>) {
        if rexmit == Rexmit::None {
            return;
        }
        if rexmit == Rexmit::New {
            self.write_xmit(out, PushMode::Normal);
            if seq_after(self.sock.snd_nxt, self.rec.high_seq) {
                return;
            }
            self.frto = false;
        }
        self.xmit_retransmit_queue(out);
    }

    /// Linux `tcp_xmit_retransmit_queue`.
    pub(super) fn xmit_retransmit_queue(&mut self, out: &mut Vec<Packet>) {
        if self.sock.packets_out == 0 {
            return;
        }
        let mut rearm = false;
        // Linux takes `tcp_tso_segs` once per walk; here only once there is
        // something to retransmit (this runs on every ACK).
        let mut max_segs = None;
        loop {
            if self.pacing_check() {
                break;
            }
            let room = self.sock.cwnd as i64 - self.in_flight() as i64;
            if room <= 0 {
                break;
            }
            if self.sock.retrans_out >= self.sock.lost_out {
                break;
            }
            let Some(seq) = self.board.next_retransmit() else { break };
            // `__tcp_retransmit_skb`: at most the window's room and the
            // peer's window (at least one segment), in one skb.
            let rwnd_room = self.snd_wnd_end.wrapping_sub(seq).max(1);
            let max_segs = *max_segs.get_or_insert_with(|| if self.tso { self.tso_segs() } else { 1 });
            let n = self.board.retransmit_run(seq, (room as u32).min(max_segs).min(rwnd_room));
            if self.small_queue_check(n as u64 * self.cfg.mss as u64, 1) {
                break;
            }
            self.retransmit_skb(seq, n, out);
            if self.in_cwnd_reduction() {
                self.rec.prr_out += n;
            }
            if seq == self.sock.snd_una && !matches!(self.xmit_timer, Some((XmitTimer::ReoTimeout, _))) {
                rearm = true;
            }
        }
        if rearm {
            self.reset_xmit_timer(XmitTimer::Retrans, self.rto_jiffies);
        }
    }

    /// Linux `tcp_retransmit_skb` for the `n` segments from `seq` (of one
    /// skb): one skb, its rest (if any) split off to wait as an skb of its
    /// own. A super-packet leaves as one bundle and is paced as one skb.
    pub(super) fn retransmit_skb(&mut self, seq: u32, n: u32, out: &mut Vec<Packet>) {
        self.board.split_before(seq + n);
        if n <= 1 {
            self.retransmit_one(seq, out);
            return;
        }
        self.send_skb(n, out, |s, i, out| s.retransmit_one(seq + i, out));
    }

    /// Sends one skb of `n` segments, segment `i` emitted by `segment`: it
    /// counts as one skb, leaves as one packet (a bundle of its segments;
    /// the network splits it where it acts per segment), and is paced and
    /// charged to TCP Small Queues by its payload, as Linux sends an skb.
    /// With `segment_at_device` the device segments it in software: its
    /// segments leave as packets of their own and the device counts them.
    fn send_skb(&mut self, n: u32, out: &mut Vec<Packet>, mut segment: impl FnMut(&mut Self, u32, &mut Vec<Packet>)) {
        self.skb_bytes = Some(0);
        // The device's count: segments when it segments in software.
        self.counters.skbs_sent += if self.segment_at_device { n as u64 } else { 1 };
        for i in 0..n {
            segment(self, i, out);
            if self.segment_at_device {
                continue;
            }
            if let Some(Packet { payload: Payload::Data(d), .. }) = out.last_mut() {
                d.gso = Gso { segs: n.min(u16::MAX as u32) as u16, index: i.min(u16::MAX as u32) as u16, whole: false, ..Gso::default() };
            }
        }
        if n > 1 {
            // `__tcp_transmit_skb` pushes every skb of more than one
            // segment; segmentation leaves the flag on its last segment.
            if let Some(Packet { payload: Payload::Data(d), .. }) = out.last_mut() {
                d.psh = true;
            }
        }
        if n > 1 && n <= u16::MAX as u32 && !self.segment_at_device {
            let first = out.len() - n as usize;
            let skb = Packet::bundle_unchecked(&out[first..]);
            out.truncate(first);
            out.push(skb);
        }
        let bytes = self.skb_bytes.take().unwrap_or(0);
        if let Some(q) = &mut self.tsq {
            q.sent(bytes);
        }
        self.pacing_after_send(bytes);
    }

    /// Linux `tcp_retransmit_skb` for one segment.
    pub(super) fn retransmit_one(&mut self, seq: u32, out: &mut Vec<Packet>) {
        self.resend(seq, false, out);
    }

    /// A tail loss probe that retransmits `seq`: Linux sends it with
    /// `__tcp_retransmit_skb` alone, not `tcp_retransmit_skb`, so the segment
    /// is marked ever-retransmitted but does not count in `retrans_out` (nor
    /// start the undo state): an RTO that follows marks it lost like any
    /// other, and it is retransmitted again, not taken for a retransmission
    /// still in flight.
    pub(super) fn retransmit_probe(&mut self, seq: u32, out: &mut Vec<Packet>) {
        self.board.split_before(seq);
        self.board.split_before(seq + 1);
        self.resend(seq, true, out);
    }

    fn resend(&mut self, seq: u32, probe: bool, out: &mut Vec<Packet>) {
        let now = self.now_us();
        // Linux `tcp_event_data_sent` runs for retransmissions too, before they
        // count as in flight: the first one after an RTO (everything marked
        // lost) is a transmission start (Vegas-family algorithms re-initialise).
        if self.in_flight() == 0 {
            self.ca_event(CaEvent::TxStart);
        }
        {
            let seg = self.board.get_mut(seq);
            seg.xmit_us = now;
            if probe {
                seg.sacked |= EVER_RETRANS;
            } else if seg.sacked & SACKED_RETRANS == 0 {
                seg.sacked |= RETRANS;
                self.sock.retrans_out += 1;
            } else {
                seg.sacked |= RETRANS;
            }
        }
        self.board.ts_append(seq);
        let in_flight = self.in_flight();
        self.rate.skb_sent(&mut self.sock, self.board.get_mut(seq), in_flight);
        if !probe {
            if self.rec.retrans_stamp == 0 {
                self.rec.retrans_stamp = ts_clock(self.sock.now);
            }
            if self.rec.undo_retrans < 0 {
                self.rec.undo_retrans = 0;
            }
            self.rec.undo_retrans += 1;
        }
        self.total_retrans += 1;
        self.counters.retransmissions += 1;
        self.emit(seq, true, out);
    }

    /// Sends one data segment onto the wire.
    fn emit(&mut self, seq: u32, retransmission: bool, out: &mut Vec<Packet>) {
        if self.in_flight() == 0 && !retransmission {
            self.ca_event(CaEvent::TxStart);
        }
        self.sock.lsndtime = self.sock.jiffies;
        let payload = self.seg_payload(seq);
        // Linux `tcp_ecn_send` (RFC 3168 6.1.5): only new data is ECN-capable,
        // and the first new data segment after a reduction carries CWR;
        // retransmissions are sent Not-ECT, so a queue drops rather than marks
        // them, except for an algorithm that needs ECN, whose socket marks
        // every packet ECT (and ECT(1) if it asks for the L4S identifier).
        let new_data = self.ecn_ok && !retransmission;
        let cwr = new_data && std::mem::take(&mut self.queue_cwr);
        let ect = new_data || (self.ecn_ok && self.ca_needs_ecn);
        let seg = DataSegment {
            seq,
            payload,
            tsval: ts_clock(self.sock.now),
            retransmission,
            ce: false,
            ect,
            ect1: ect && self.ca_wants_ect_1,
            cwr,
            // `tcp_push` marks the application's last write; a finite
            // transfer is written at once, so its last segment carries PSH.
            psh: self.app_segments == Some(seq + 1),
            gso: Default::default(),
        };
        let pkt = Packet::data(self.flow, seg);
        self.counters.segments_sent += 1;
        if self.skb_bytes.is_none() {
            self.counters.skbs_sent += 1;
        }
        self.counters.bytes_sent += payload as u64;
        self.data_segs_out += 1;
        self.cc.on_transmit(&mut self.sock, seq, retransmission);
        // Linux advances the departure time by the skb's payload (`oskb->len`),
        // not its wire size; a super-packet's segments are paced as one skb.
        match &mut self.skb_bytes {
            Some(bytes) => *bytes += payload as u64,
            None => {
                if let Some(q) = &mut self.tsq {
                    q.sent(payload as u64);
                }
                self.pacing_after_send(payload as u64)
            }
        }
        self.last_write_ns = self.last_write_ns.max(self.sock.now.0);
        out.push(pkt);
    }

    /// Linux `tcp_update_skb_after_send` for internal pacing.
    fn pacing_after_send(&mut self, len: u64) {
        if self.sock.pacing_status == PacingStatus::None {
            return;
        }
        let rate = self.sock.pacing_rate;
        let now = self.sock.now.0;
        let prior = self.sock.wstamp_ns;
        self.sock.wstamp_ns = self.sock.wstamp_ns.max(now);
        if rate != 0 && rate != u64::MAX && self.data_segs_out >= 10 {
            let mut len_ns = len * NS_PER_SEC / rate;
            let credit = self.sock.wstamp_ns - prior;
            len_ns -= (len_ns / 2).min(credit);
            self.sock.wstamp_ns += len_ns;
        }
    }

    /// Linux `tcp_pacing_check`: true if pacing holds the next packet back.
    fn pacing_check(&mut self) -> bool {
        if self.sock.pacing_status == PacingStatus::None {
            return false;
        }
        if self.sock.wstamp_ns <= self.sock.now.0 {
            return false;
        }
        if self.pacing_timer.is_none() {
            self.pacing_timer = Some(Time(self.sock.wstamp_ns));
        }
        true
    }

    /// Linux `tcp_write_xmit` for new data. Returns the number of segments sent.
    /// With segmentation offload, data leaves in super-packets of up to
    /// `tcp_tso_segs` segments (each skb at most half of cwnd, Linux
    /// `tcp_cwnd_test`), sends too small for one may wait for the next ACK
    /// (`tcp_tso_should_defer`), and pacing spaces whole super-packets.
    pub(super) fn write_xmit(&mut self, out: &mut Vec<Packet>, mode: PushMode) -> u32 {
        if self.state != ConnState::Established {
            return 0;
        }
        let mut sent = 0u32;
        let mut is_cwnd_limited = false;
        self.sndbuf_limited = false;
        let max_segs = if self.tso && mode != PushMode::Probe { self.tso_segs() } else { 1 };
        loop {
            if !self.has_new_data() {
                let (has_new_data, in_flight) = (self.has_new_data(), self.in_flight());
                self.rate.check_app_limited(&mut self.sock, has_new_data, in_flight);
                break;
            }
            if self.pacing_check() {
                break;
            }
            let in_flight = self.in_flight();
            if in_flight >= self.sock.cwnd && mode != PushMode::Probe {
                break;
            }
            // Receive window.
            if !seq_before(self.sock.snd_nxt, self.snd_wnd_end) {
                break;
            }
            // Send buffer: unacknowledged payload must fit.
            let outstanding = (self.sock.snd_nxt - self.sock.snd_una + 1) as u64 * self.cfg.mss as u64;
            if outstanding > self.cfg.sndbuf {
                self.sndbuf_limited = true;
                break;
            }
            if max_segs <= 1 {
                if self.small_queue_check(self.cfg.mss as u64, 0) {
                    break;
                }
                self.last_skb_seq = self.sock.snd_nxt;
                self.transmit_new(out);
                sent += 1;
                if mode == PushMode::Probe {
                    break;
                }
                continue;
            }
            // One super-packet.
            let cwnd_quota = (self.sock.cwnd - in_flight).min((self.sock.cwnd >> 1).max(1));
            let rwnd_room = self.snd_wnd_end.wrapping_sub(self.sock.snd_nxt);
            let data_left = self.app_segments.map_or(u32::MAX, |n| n - self.sock.snd_nxt);
            let quota = cwnd_quota.min(max_segs);
            // Without the write queue every skb is cut to the quota and is
            // treated as the queue's last (no leftovers, no middle skbs).
            let (skb_segs, skb_is_tail) = match &mut self.write_queue {
                Some(wq) => wq.head_skb(quota, data_left),
                None => (quota.min(data_left), true),
            };
            // The last skb of a finite transfer carries FIN: never deferred.
            if data_left > max_segs && self.tso_should_defer(max_segs, rwnd_room, skb_segs, skb_is_tail) {
                is_cwnd_limited |= self.sock.cwnd - in_flight < rwnd_room;
                break;
            }
            let sndbuf_room = (self.cfg.sndbuf / self.cfg.mss as u64)
                .saturating_sub((self.sock.snd_nxt - self.sock.snd_una) as u64)
                .max(1)
                .min(u32::MAX as u64) as u32;
            let n = skb_segs.min(quota).min(rwnd_room).min(sndbuf_room).max(1);
            if self.small_queue_check(n as u64 * self.cfg.mss as u64, 0) {
                break;
            }
            if let Some(wq) = &mut self.write_queue {
                wq.sent(n);
            }
            self.last_skb_seq = self.sock.snd_nxt;
            self.send_skb(n, out, |s, i, out| {
                s.transmit_new(out);
                if i > 0 {
                    // Only the first segment begins the skb in the retransmission queue.
                    let seq = s.sock.snd_nxt - 1;
                    s.board.get_mut(seq).skb_head = false;
                }
            });
            sent += n;
        }
        is_cwnd_limited |= self.in_flight() >= self.sock.cwnd;
        if sent > 0 {
            // New data leaves only from here: the first call that sends any
            // marks when the flow's data began.
            if self.counters.first_data_ns == 0 {
                self.counters.first_data_ns = self.sock.now.0;
            }
            if self.in_cwnd_reduction() {
                self.rec.prr_out += sent;
            }
            if mode != PushMode::Probe {
                self.schedule_loss_probe(false);
            }
        }
        if sent > 0 || is_cwnd_limited {
            self.cwnd_validate(is_cwnd_limited);
        }
        sent
    }

    /// Linux `tcp_small_queue_check` (host/tsq.rs) for an skb of `skb_bytes`
    /// payload; `factor` 1 for retransmissions. True: the skb waits until the
    /// host frees one of this socket's skbs.
    fn small_queue_check(&mut self, skb_bytes: u64, factor: u32) -> bool {
        let Some(q) = &mut self.tsq else { return false };
        let tp = &self.sock;
        q.check(&tsq::CheckInput {
            skb_bytes,
            pacing_rate: tp.pacing_rate,
            pacing_shift: tp.pacing_shift,
            paced: tp.pacing_status != PacingStatus::None,
            factor,
            rtx_queue_single: tp.packets_out == 0 || !seq_before(tp.snd_una, self.last_skb_seq),
        })
    }

    /// Linux `tcp_tso_segs` for this flow now.
    fn tso_segs(&self) -> u32 {
        let tp = &self.sock;
        if let Some(segs) = self.cc.tso_segs(tp) {
            return segs.clamp(1, tso::GSO_MAX_SEGS);
        }
        let min_segs = self.cc.min_tso_segs(tp).unwrap_or(tso::MIN_TSO_SEGS);
        tso::tso_segs(tp.pacing_rate, tp.min_rtt_us(), self.cfg.mss, min_segs, tp.pacing_shift)
    }

    /// Linux `tcp_tso_should_defer` for a super-packet of `goal` segments,
    /// the head skb holding `skb_segs`.
    fn tso_should_defer(&self, goal: u32, rwnd_room: u32, skb_segs: u32, skb_is_tail: bool) -> bool {
        let now = self.sock.now.0;
        // Defer only if the last write was recent (1 ms); a paced flow's
        // departure time may lie ahead.
        let last_write = self.last_write_ns.max(self.sock.wstamp_ns);
        if now > last_write + 1_000_000 {
            return false;
        }
        let head_age_ns = (self.sock.packets_out > 0)
            .then(|| now.saturating_sub(self.board.get(self.sock.snd_una).xmit_us * 1000));
        tso::should_defer(&tso::DeferInput {
            cwnd_room: self.sock.cwnd - self.in_flight(),
            rwnd_room,
            cwnd: self.sock.cwnd,
            snd_wnd: self.snd_wnd,
            goal,
            skb_segs,
            skb_is_tail,
            in_recovery: self.sock.ca_state >= CaState::Recovery,
            head_age_ns,
            srtt_ns: self.sock.srtt_us8 as u64 * 125,
            rule: self.tso_defer,
        })
    }

    /// One new segment: queued on the scoreboard and sent (Linux
    /// `tcp_transmit_skb` + `tcp_event_new_data_sent`).
    fn transmit_new(&mut self, out: &mut Vec<Packet>) {
        let prior_packets = self.sock.packets_out;
        let seq = self.board.push_new(SegState::new(self.now_us()));
        debug_assert_eq!(seq, self.sock.snd_nxt);
        let in_flight = self.in_flight();
        self.rate.skb_sent(&mut self.sock, self.board.get_mut(seq), in_flight);
        self.emit(seq, false, out);
        self.sock.snd_nxt += 1;
        self.sock.packets_out += 1;
        if prior_packets == 0 || matches!(self.xmit_timer, Some((XmitTimer::LossProbe, _))) {
            self.rearm_rto();
        }
    }

    /// Linux `tcp_cwnd_validate`.
    fn cwnd_validate(&mut self, is_cwnd_limited: bool) {
        if !seq_before(self.sock.snd_una, self.sock.cwnd_usage_seq)
            || is_cwnd_limited
            || (!self.sock.is_cwnd_limited && self.sock.packets_out > self.sock.max_packets_out)
        {
            self.sock.is_cwnd_limited = is_cwnd_limited;
            self.sock.max_packets_out = self.sock.packets_out;
            self.sock.cwnd_usage_seq = self.sock.snd_nxt;
        }
        if self.sock.is_cwnd_limited() {
            self.snd_cwnd_used = 0;
            self.sock.cwnd_stamp = self.sock.jiffies;
        } else {
            if self.sock.packets_out > self.snd_cwnd_used {
                self.snd_cwnd_used = self.sock.packets_out;
            }
            if self.cfg.slow_start_after_idle
                && (self.sock.jiffies.wrapping_sub(self.sock.cwnd_stamp) as i64) >= self.rto_jiffies as i64
                && !self.cc.has_cong_control()
            {
                self.cwnd_application_limited();
            }
        }
    }

    /// Linux `tcp_cwnd_application_limited`.
    fn cwnd_application_limited(&mut self) {
        if self.sock.ca_state == CaState::Open && !self.sndbuf_limited {
            let win_used = self.snd_cwnd_used.max(self.cfg.initial_cwnd);
            if win_used < self.sock.cwnd {
                self.sock.ssthresh = self.current_ssthresh();
                self.sock.cwnd = (self.sock.cwnd + win_used) >> 1;
            }
            self.snd_cwnd_used = 0;
        }
        self.sock.cwnd_stamp = self.sock.jiffies;
    }
}

#[cfg(test)]
mod tso_scripts {
    //! Packet scripts for segmentation offload in `write_xmit`.

    use super::super::testing::*;
    use crate::host::tso::DeferRule;

    /// A 1 ms path with an initial window of 30: the goal is the whole 64 KB
    /// (45 segments), each skb at most half of cwnd. An ACK opening the window
    /// by 4 (less than a goal and than a third of cwnd) within 1 ms of the last
    /// write, its oldest segment's ACK already due, is deferred; the
    /// next one, opening it by 24, sends one skb of 21 (half of cwnd 42).
    #[test]
    fn super_packets_are_deferred_until_a_third_of_the_window_opens() {
        let mut h = reno().rtt(1).cfg(|c| c.initial_cwnd = 30).tso().start();
        expect_tx!(h, 0..30);
        assert_eq!(h.s.counters.skbs_sent, 2, "two skbs of 15 (half of cwnd)");
        h.at(2);
        ack!(h, 2);
        expect_tx!(h, none);
        check!(h, cwnd = 32);
        ack!(h, 12);
        check!(h, cwnd = 42);
        expect_tx!(h, 30..51);
        assert_eq!(h.s.counters.skbs_sent, 3);
    }

    /// Without segmentation offload at the device (`[hosts] tso = false`)
    /// TCP still builds the same super-packets, as Linux always does (GSO),
    /// and the device segments them: the same segments leave at the same
    /// instants, each a packet of its own, and the device counts segments.
    #[test]
    fn software_gso_sends_the_same_skbs_as_single_segments() {
        let mut h = reno().rtt(1).cfg(|c| c.initial_cwnd = 30).software_gso().start();
        expect_tx!(h, 0..30);
        assert_eq!(h.handed, vec![1; 30], "every segment handed on alone");
        assert_eq!(h.s.counters.skbs_sent, 30);
        h.at(2);
        ack!(h, 2);
        expect_tx!(h, none);
        ack!(h, 12);
        expect_tx!(h, 30..51);
        assert_eq!(h.handed.len(), 51);
    }

    /// Every skb of more than one segment leaves with PSH on its last
    /// segment (Linux `__tcp_transmit_skb`), with offloads or segmented in
    /// software; an skb of one segment only at the end of the application's
    /// write (`tcp_push`): here the 40-segment transfer's last.
    #[test]
    fn skbs_of_several_segments_and_the_writes_end_are_pushed() {
        for software in [false, true] {
            let setup = reno().rtt(1).segments(40).cfg(|c| c.initial_cwnd = 30);
            let mut h = if software { setup.software_gso() } else { setup.tso() }.start();
            expect_tx!(h, 0..30);
            assert_eq!(h.pushed, vec![14, 29], "two skbs of 15");
            h.at(2);
            ack!(h, 30);
            expect_tx!(h, 30..40);
            assert_eq!(h.pushed, vec![14, 29, 39], "software: {software}");
        }
        let mut h = reno().rtt(1).segments(3).cfg(|c| c.initial_cwnd = 30).start();
        expect_tx!(h, 0..3);
        assert_eq!(h.pushed, vec![2], "one segment per skb: the write's end alone");
    }

    /// A 40 ms path in congestion avoidance, the goal 2 segments. An early
    /// ACK at 99 ms releases one segment (the last write was long ago); the
    /// next, 1 ms later, opens the window by one segment again while the head
    /// (sent at 80 ms) is 20 ms old and its ACK, by srtt, some 15 ms away.
    /// Linux 6.18 sends it at once (the ACK is due in more than 1 ms); the
    /// kernels before deferred it (the head is older than srtt/2).
    #[test]
    fn an_opening_is_deferred_only_when_the_heads_ack_is_near() {
        for (rule, deferred) in [(DeferRule::AckDue, false), (DeferRule::HalfRtt, true)] {
            let mut h = reno().rtt(40).cfg(|c| c.initial_cwnd = 30).tso().start();
            h.s.tso_defer = rule;
            h.s.sock.ssthresh = 30;
            expect_tx!(h, 0..30);
            h.at(80);
            ack!(h, 30);
            check!(h, cwnd = 31);
            expect_tx!(h, 30..61);
            h.at(99);
            ack!(h, 31);
            expect_tx!(h, 61);
            h.at(100);
            ack!(h, 32);
            if deferred {
                expect_tx!(h, none);
            } else {
                expect_tx!(h, 62);
            }
        }
    }

    /// TCP Small Queues on a 100 ms path, initial window 10: the pacing rate
    /// (2 x 10 x 1448 B / 100 ms) is under 300 B per ms, so skbs hold the
    /// minimum 2 segments and the limit is two skbs' truesize (2 x (2,896 +
    /// 896) = 7,584 B). Three skbs leave (the check is made before each, on
    /// what is already below the socket); the fourth waits although cwnd
    /// has room. A segment leaving the NIC frees nothing until its skb's
    /// last does; then the socket, throttled, writes one more skb, until
    /// cwnd rather than the limit stops it.
    #[test]
    fn small_queues_hold_the_window_until_the_host_frees_an_skb() {
        let mut h = reno().tso().tsq().start();
        expect_tx!(h, 0..6);
        assert!(h.s.tsq.as_ref().is_some_and(|q| q.throttled));
        assert!(!h.nic_tx_done(0, false));
        expect_tx!(h, none);
        assert!(h.nic_tx_done(1, true));
        expect_tx!(h, 6..8);
        assert!(!h.nic_tx_done(2, false));
        assert!(h.nic_tx_done(3, true));
        expect_tx!(h, 8..10);
        // cwnd is full now: the socket stopped on cwnd, not on the limit, so
        // a freed skb does not wake it (only tcp_small_queue_check throttles).
        assert!(!h.nic_tx_done(4, false));
        assert!(!h.nic_tx_done(5, true));
        expect_tx!(h, none);
        assert_eq!(h.s.counters.skbs_sent, 5);
        // Each skb went to the network as one packet (a bundle of 2).
        assert_eq!(h.handed, vec![2; 5]);
    }

    /// Two skbs of 15 lost whole (a Linux router drops skbs whole; no TLP,
    /// no F-RTO): the RTO retransmits the head segment alone, splitting it
    /// off its skb (`tcp_retransmit_skb(head, 1)`), and the lost segments
    /// then leave in skbs as large as the slow-start window allows (Linux
    /// retransmits skbs, `tcp_xmit_retransmit_queue`), each one packet,
    /// never one skb across two of the original ones.
    #[test]
    fn lost_skbs_are_retransmitted_as_skbs_the_window_allows() {
        let mut h = reno().rtt(1).cfg(|c| { c.initial_cwnd = 30; c.tlp = false; c.frto = false; }).tso().start();
        expect_tx!(h, 0..30);
        assert_eq!(h.fire_timer(), (204, Some(super::XmitTimer::Retrans)));
        expect_tx!(h, 0 rtx);
        check!(h, cwnd = 1, lost_out = 30);
        assert!(h.s.board.get(1).skb_head, "the rest of the head skb is an skb of its own");
        h.at(205);
        ack!(h, 1);
        expect_tx!(h, 1..3 rtx);
        h.at(206);
        ack!(h, 3);
        expect_tx!(h, 3..7 rtx);
        h.at(207);
        ack!(h, 7);
        expect_tx!(h, 7..15 rtx);
        h.at(208);
        ack!(h, 15);
        check!(h, cwnd = 15);
        expect_tx!(h, 15..30 rtx);
        assert_eq!(h.handed, vec![15, 15, 1, 2, 4, 8, 15]);
        assert_eq!(h.s.counters.skbs_sent, 7);
    }

    /// Without offload the same ACKs release segments at once.
    #[test]
    fn without_offload_every_opening_is_sent() {
        let mut h = reno().rtt(1).cfg(|c| c.initial_cwnd = 30).start();
        expect_tx!(h, 0..30);
        h.at(2);
        ack!(h, 2);
        expect_tx!(h, 30..34);
        assert_eq!(h.s.counters.skbs_sent, 34);
        // Without offload every segment is a packet of its own.
        assert_eq!(h.handed, vec![1; 34]);
    }
}
