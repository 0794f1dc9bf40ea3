//! Timers, after Linux's `net/ipv4/tcp_timer.c` and the timer code of
//! `tcp_input.c` / `tcp_output.c`: one retransmission timer shared, as
//! `icsk_pending` shares it, by the RTO (`tcp_rearm_rto`, `tcp_rto_delta_us`,
//! `tcp_retransmit_timer` with exponential backoff), RACK's reordering timeout
//! (armed in `rack.rs`) and the tail loss probe (`tcp_schedule_loss_probe`,
//! `tcp_send_loss_probe`); and what an RTO does to the connection
//! (`tcp_enter_loss`, `tcp_timeout_mark_lost`, arming F-RTO, whose ACK-side
//! half is `tcp_process_loss` in `recovery.rs`). Deadlines are quantised to
//! jiffies as Linux's timer wheel does (without its extra slack).

use super::super::rtt::{initial_rto_jiffies, seq_after, seq_before, RTO_MAX_US};
use super::super::scoreboard::SACKED_ACKED;
use super::output::PushMode;
use super::{mark_skb_lost, TcpSender, SYSCTL_REORDERING};
use crate::cc::{CaEvent, CaState};
use crate::packet::Packet;
use crate::units::{jiffies_at, jiffies_to_usecs, time_of_jiffy, usecs_to_jiffies, Time};

/// Linux TCP_TIMEOUT_MIN_US: added to the TLP timeout when more than one packet is out.
const TCP_TIMEOUT_MIN_US: u64 = 2000;

/// Which of the shared retransmission-timer uses is armed (Linux `icsk_pending`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum XmitTimer {
    Retrans,
    ReoTimeout,
    LossProbe,
}

impl TcpSender {
    /// Jiffies-quantised deadline `when` jiffies from now.
    pub(super) fn jiffies_deadline(&self, when: u64) -> Time {
        let now_j = jiffies_at(self.sock.now, self.cfg.hz) as u64;
        time_of_jiffy(now_j + when.max(1), self.cfg.hz)
    }

    /// Linux `inet_csk_reset_xmit_timer` for the shared retransmission timer,
    /// capped at TCP_RTO_MAX.
    pub(super) fn reset_xmit_timer(&mut self, what: XmitTimer, when_jiffies: u64) {
        let when = when_jiffies.min(usecs_to_jiffies(RTO_MAX_US, self.hz()));
        self.xmit_timer = Some((what, self.jiffies_deadline(when)));
    }

    /// Linux `tcp_rearm_rto`.
    pub(super) fn rearm_rto(&mut self) {
        if self.sock.packets_out == 0 {
            if matches!(self.xmit_timer, Some((XmitTimer::Retrans, _))) || self.xmit_timer.is_some() {
                self.xmit_timer = None;
            }
            return;
        }
        let mut rto = self.rto_jiffies;
        if matches!(self.xmit_timer, Some((XmitTimer::ReoTimeout | XmitTimer::LossProbe, _))) {
            let delta_us = self.rto_delta_us().max(1) as u64;
            rto = usecs_to_jiffies(delta_us, self.hz());
        }
        self.reset_xmit_timer(XmitTimer::Retrans, rto);
    }

    /// Linux `tcp_rto_delta_us`: time left until the RTO of the head segment.
    fn rto_delta_us(&self) -> i64 {
        let rto_us = jiffies_to_usecs(self.rto_jiffies, self.hz()) as i64;
        if self.board.is_empty() {
            return rto_us;
        }
        let head = self.board.get(self.sock.snd_una).xmit_us as i64;
        head + rto_us - self.now_us() as i64
    }

    /// Linux `tcp_schedule_loss_probe`.
    pub(super) fn schedule_loss_probe(&mut self, advancing_rto: bool) -> bool {
        if !self.cfg.tlp
            || self.sock.packets_out == 0
            || !self.is_sack()
            || !matches!(self.sock.ca_state, CaState::Open | CaState::Cwr)
        {
            return false;
        }
        let mut timeout = if self.rtt.has_sample() {
            let mut t_us = (self.rtt.srtt_us8 >> 2) as u64;
            if self.sock.packets_out == 1 {
                t_us += self.cfg.rto_min_us as u64;
            } else {
                t_us += TCP_TIMEOUT_MIN_US;
            }
            usecs_to_jiffies(t_us, self.hz())
        } else {
            initial_rto_jiffies(self.hz())
        };
        let rto_delta_us =
            if advancing_rto { jiffies_to_usecs(self.rto_jiffies, self.hz()) as i64 } else { self.rto_delta_us() };
        if rto_delta_us > 0 {
            timeout = timeout.min(usecs_to_jiffies(rto_delta_us as u64, self.hz()));
        }
        self.reset_xmit_timer(XmitTimer::LossProbe, timeout);
        true
    }

    /// Linux `tcp_set_xmit_timer`: a loss probe if one may be scheduled, else the RTO.
    pub(super) fn set_xmit_timer(&mut self) {
        if !self.schedule_loss_probe(true) {
            self.rearm_rto();
        }
    }

    /// Linux `tcp_send_loss_probe`.
    pub(super) fn send_loss_probe(&mut self, out: &mut Vec<Packet>) {
        self.counters.tlps += 1;
        if self.tlp_high_seq.is_none() {
            self.tlp_retrans = false;
            let mut probe_sent = false;
            if self.has_new_data() && seq_before(self.sock.snd_nxt, self.snd_wnd_end) {
                let before = self.sock.packets_out;
                self.write_xmit(out, PushMode::Probe);
                probe_sent = self.sock.packets_out > before;
            }
            if !probe_sent && !self.board.is_empty() {
                let last = self.sock.snd_nxt - 1;
                let s = self.board.get(last).sacked;
                if s & SACKED_ACKED == 0 {
                    self.retransmit_one(last, out);
                    self.tlp_retrans = true;
                    probe_sent = true;
                }
            }
            if probe_sent {
                self.tlp_high_seq = Some(self.sock.snd_nxt);
                // Rearm from now.
                self.xmit_timer = None;
            } else {
                self.counters.tlps -= 1;
            }
        } else {
            self.counters.tlps -= 1;
        }
        self.rearm_rto();
    }

    /// Linux `tcp_retransmit_timer` (RTO expiry).
    pub(super) fn retransmit_timer(&mut self, out: &mut Vec<Packet>) {
        if self.sock.packets_out == 0 {
            return;
        }
        self.counters.rtos += 1;
        self.enter_loss();
        self.retransmits += 1;
        let head = self.sock.snd_una;
        self.retransmit_one(head, out);
        // Exponential backoff.
        self.rto_jiffies = (self.rto_jiffies << 1).min(usecs_to_jiffies(RTO_MAX_US, self.hz()));
        self.reset_xmit_timer(XmitTimer::Retrans, self.rto_jiffies);
    }

    /// Linux `tcp_enter_loss`.
    fn enter_loss(&mut self) {
        let new_recovery = self.sock.ca_state < CaState::Recovery;
        self.timeout_mark_lost();
        if self.sock.ca_state <= CaState::Disorder
            || !seq_after(self.rec.high_seq, self.sock.snd_una)
            || (self.sock.ca_state == CaState::Loss && self.retransmits == 0)
        {
            self.rec.prior_ssthresh = self.current_ssthresh();
            self.sock.prior_cwnd = self.sock.cwnd;
            self.sock.ssthresh = self.cc.ssthresh(&mut self.sock);
            self.ca_event(CaEvent::Loss);
            self.rec.init_undo(self.sock.snd_una, self.sock.retrans_out);
        }
        self.sock.cwnd = self.in_flight() + 1;
        self.sock.cwnd_cnt = 0;
        self.sock.cwnd_stamp = self.sock.jiffies;
        if self.sock.ca_state <= CaState::Disorder && self.sock.sacked_out >= SYSCTL_REORDERING {
            self.sock.reordering = self.sock.reordering.min(SYSCTL_REORDERING);
        }
        self.set_ca_state(CaState::Loss);
        self.rec.high_seq = self.sock.snd_nxt;
        self.tlp_high_seq = None;
        if self.ecn_ok {
            self.queue_cwr = true;
        }
        self.frto = self.cfg.frto && (new_recovery || self.retransmits > 0);
    }

    /// Linux `tcp_timeout_mark_lost`.
    fn timeout_mark_lost(&mut self) {
        if self.is_reno() {
            self.reset_reno_sack();
        }
        let head = self.sock.snd_una;
        let now = self.now_us();
        for seq in self.board.iter_seqs() {
            // With RACK, segments sent less than RACK.rtt ago are not lost yet;
            // the head always is.
            if seq != head && self.rack.skb_timeout(self.board.get(seq).xmit_us, 0, now) > 0 {
                continue;
            }
            mark_skb_lost(&mut self.board, &mut self.sock, seq);
        }
    }
}
