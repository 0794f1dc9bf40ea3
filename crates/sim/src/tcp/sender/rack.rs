//! Loss detection, after Linux's `net/ipv4/tcp_recovery.c`: RACK (RFC 8985,
//! `tcp_rack_advance`, `tcp_rack_reo_wnd`, `tcp_rack_detect_loss`,
//! `tcp_rack_mark_lost`, `tcp_rack_reo_timeout`, `tcp_rack_update_reo_wnd`)
//! and, for connections without SACK, `tcp_newreno_mark_lost`.
//!
//! RACK judges loss by time, not by counting duplicate ACKs: a segment is
//! lost once a segment sent after it has been delivered and RACK.rtt plus a
//! reordering window has passed since it was sent. The window is 0 in
//! recovery or once `tp->reordering` segments are SACKed (the old dupthresh
//! rule) unless reordering has been seen, otherwise min_rtt / 4, widened
//! step by step when D-SACKs show that recoveries were spurious. `Rack` owns
//! that state and walks the time-ordered list of segments in flight; the
//! sender's side (arming the REO timer, starting recovery from it) is here too.

use super::super::rtt::seq_before;
use super::super::scoreboard::{Scoreboard, LOST, RETRANS};
use super::{mark_skb_lost, sent_after, TcpSender, XmitTimer};
use crate::cc::{CaState, RateSample, TcpSock};
use crate::packet::Packet;
use crate::units::usecs_to_jiffies;

/// Linux TCP_TIMEOUT_MIN: 2 jiffies added to the RACK reordering timer.
const TCP_TIMEOUT_MIN_JIFFIES: u64 = 2;
/// Linux TCP_RACK_RECOVERY_THRESH: recoveries a widened reordering window persists.
pub(super) const RACK_RECOVERY_THRESH: u32 = 16;

/// RACK state (Linux `tp->rack`).
#[derive(Clone, Debug)]
pub(super) struct Rack {
    /// Send time (us) of the most recently sent segment that was (S)ACKed.
    pub(super) mstamp: u64,
    /// Its end sequence, breaking ties between segments sent at the same time.
    pub(super) end_seq: u32,
    /// RTT (us) of the most recently (S)ACKed segment.
    pub(super) rtt_us: u32,
    /// Set when `mstamp` may have moved: the next ACK runs the detection.
    pub(super) advanced: bool,
    /// The reordering window in units of min_rtt / 4.
    pub(super) reo_wnd_steps: u32,
    /// Recoveries left before a widened window falls back to one step.
    pub(super) reo_wnd_persist: u32,
    /// A D-SACK arrived since the window was last widened.
    pub(super) dsack_seen: bool,
    /// `tp->delivered` when the window was last widened.
    pub(super) last_delivered: u32,
}

impl Default for Rack {
    fn default() -> Self {
        Rack {
            mstamp: 0,
            end_seq: 0,
            rtt_us: 0,
            advanced: false,
            reo_wnd_steps: 1,
            reo_wnd_persist: 0,
            dsack_seen: false,
            last_delivered: 0,
        }
    }
}

impl Rack {
    /// Linux `tcp_rack_advance`: a segment sent at `xmit_us` was just (S)ACKed.
    #[inline]
    pub(super) fn advance(&mut self, sacked: u8, end_seq: u32, xmit_us: u64, now_us: u64, min_rtt_us: u32) {
        let rtt_us = now_us.saturating_sub(xmit_us) as u32;
        if rtt_us < min_rtt_us && sacked & RETRANS != 0 {
            // Ambiguous: probably the original of a spurious retransmission.
            return;
        }
        self.advanced = true;
        self.rtt_us = rtt_us;
        if sent_after(xmit_us, self.mstamp, end_seq, self.end_seq) {
            self.mstamp = xmit_us;
            self.end_seq = end_seq;
        }
    }

    /// Linux `tcp_rack_reo_wnd`: the reordering window (us).
    #[inline]
    pub(super) fn reo_wnd(&self, sock: &TcpSock, reord_seen: u32, srtt_us: u32) -> u32 {
        if reord_seen == 0 {
            if sock.ca_state >= CaState::Recovery {
                return 0;
            }
            if sock.sacked_out >= sock.reordering {
                return 0;
            }
        }
        let min_rtt = sock.min_rtt_us();
        let min_rtt = if min_rtt == u32::MAX { 0 } else { min_rtt };
        ((min_rtt >> 2) * self.reo_wnd_steps).min(srtt_us)
    }

    /// Linux `tcp_rack_skb_timeout`: how long (us) a segment sent at
    /// `xmit_us` may still go unacknowledged; 0 or less means lost.
    #[inline]
    pub(super) fn skb_timeout(&self, xmit_us: u64, reo_wnd: u32, now_us: u64) -> i64 {
        self.rtt_us as i64 + reo_wnd as i64 - (now_us as i64 - xmit_us as i64)
    }

    /// Linux `tcp_rack_detect_loss`: marks lost every segment sent before the
    /// most recently delivered one whose time is up; returns the longest wait
    /// (us) among those not yet overdue, or 0.
    pub(super) fn detect_loss(&self, board: &mut Scoreboard, sock: &mut TcpSock, reo_wnd: u32, now_us: u64) -> u32 {
        let mut reo_timeout = 0u32;
        let mut cur = board.ts_first();
        while let Some(seq) = cur {
            let next = board.ts_next(seq);
            let xmit_us = board.get(seq).xmit_us;
            // Lost-but-not-retransmitted segments are never linked here.
            if !sent_after(self.mstamp, xmit_us, self.end_seq, seq + 1) {
                break;
            }
            let remaining = self.skb_timeout(xmit_us, reo_wnd, now_us);
            if remaining <= 0 {
                mark_skb_lost(board, sock, seq);
            } else {
                reo_timeout = reo_timeout.max(remaining as u32);
            }
            cur = next;
        }
        reo_timeout
    }

    /// Linux `tcp_rack_update_reo_wnd`: widens the window by one step per
    /// round with D-SACKs (`delivered`: the socket's count now), and lets it
    /// shrink back once `reo_wnd_persist` recoveries have passed.
    #[inline]
    pub(super) fn update_reo_wnd(&mut self, rs: &RateSample, delivered: u32) {
        if rs.prior_delivered == 0 {
            return;
        }
        // A D-SACK for data sent before the last widening is old news.
        if seq_before(rs.prior_delivered, self.last_delivered) {
            self.dsack_seen = false;
        }
        if self.dsack_seen {
            self.reo_wnd_steps = (self.reo_wnd_steps + 1).min(0xff);
            self.dsack_seen = false;
            self.last_delivered = delivered;
            self.reo_wnd_persist = RACK_RECOVERY_THRESH;
        } else if self.reo_wnd_persist == 0 {
            self.reo_wnd_steps = 1;
        }
    }
}

impl TcpSender {
    /// `tcp_rack_detect_loss` with this connection's reordering window.
    pub(super) fn rack_detect_loss(&mut self) -> u32 {
        let reo_wnd = self.rack.reo_wnd(&self.sock, self.reord_seen, self.rtt.srtt_us());
        let now = self.now_us();
        self.rack.detect_loss(&mut self.board, &mut self.sock, reo_wnd, now)
    }

    /// Linux `tcp_rack_mark_lost`: runs the detection if an ACK moved RACK and
    /// arms the REO timer for the segments that are not yet overdue.
    pub(super) fn rack_mark_lost(&mut self) -> bool {
        if !self.rack.advanced {
            return false;
        }
        self.rack.advanced = false;
        let timeout = self.rack_detect_loss();
        if timeout > 0 {
            let when = usecs_to_jiffies(timeout as u64, self.hz()) + TCP_TIMEOUT_MIN_JIFFIES;
            self.reset_xmit_timer(XmitTimer::ReoTimeout, when);
        }
        timeout > 0
    }

    /// Linux `tcp_rack_reo_timeout`: the reordering window has passed; mark
    /// what is overdue, start recovery if needed and retransmit.
    pub(super) fn rack_reo_timeout(&mut self, out: &mut Vec<Packet>) {
        let lost_before = self.sock.lost;
        let prior_inflight = self.in_flight();
        self.rack_detect_loss_and_rearm();
        if prior_inflight != self.in_flight() {
            if self.sock.ca_state != CaState::Recovery {
                self.enter_recovery(false);
                if !self.cc.has_cong_control() {
                    let newly_lost = self.sock.lost - lost_before;
                    self.rec.cwnd_reduction(&mut self.sock, 1, newly_lost, 0);
                }
            }
            self.xmit_retransmit_queue(out);
        }
        if !matches!(self.xmit_timer, Some((XmitTimer::Retrans, _))) {
            self.rearm_rto();
        }
    }

    fn rack_detect_loss_and_rearm(&mut self) {
        let timeout = self.rack_detect_loss();
        if timeout > 0 {
            let when = usecs_to_jiffies(timeout as u64, self.hz()) + TCP_TIMEOUT_MIN_JIFFIES;
            self.reset_xmit_timer(XmitTimer::ReoTimeout, when);
        }
    }

    /// Linux `tcp_newreno_mark_lost`: without SACK, the head is lost after
    /// `tp->reordering` duplicate ACKs, and again on each partial ACK in Recovery.
    pub(super) fn newreno_mark_lost(&mut self, snd_una_advanced: bool) {
        let state = self.sock.ca_state;
        if (state < CaState::Recovery && self.sock.sacked_out >= self.sock.reordering)
            || (state == CaState::Recovery && snd_una_advanced)
        {
            if self.board.is_empty() {
                return;
            }
            let head = self.sock.snd_una;
            if self.board.get(head).sacked & LOST != 0 {
                return;
            }
            mark_skb_lost(&mut self.board, &mut self.sock, head);
        }
    }
}
