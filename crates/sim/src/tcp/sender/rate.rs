//! Delivery-rate sampling, after Linux's `net/ipv4/tcp_rate.c`
//! (`tcp_rate_skb_sent`, `tcp_rate_skb_delivered`, `tcp_rate_gen`,
//! `tcp_rate_check_app_limited`). Each segment remembers, when it leaves, how
//! much had been delivered and when; the ACK that delivers the most recently
//! sent of its segments turns that into a sample of packets over the longer of
//! the send and the ACK phase, which BBR and `tcp_info`'s delivery rate read.
//! The counters live in `TcpSock` (`delivered`, `delivered_mstamp`,
//! `app_limited`, `rate_*`), as in `tcp_sock`; the sampler owns the one value
//! only it uses, the start of the current send phase.

use crate::packet::{sent_after, seq_after};
use super::super::scoreboard::{SegState, RETRANS, SACKED_ACKED};
use crate::cc::{RateSample, TcpSock};

/// BBRv3's `tx.in_flight` of a segment: the packets in flight just after it
/// left, itself included. The sender stamps `tx_in_flight` after counting a
/// retransmission in `retrans_out` but before counting new data in
/// `packets_out`, so only new data needs its own packet added.
#[inline]
pub(super) fn tx_in_flight_after_send(seg: &SegState) -> u32 {
    seg.tx_in_flight + u32::from(seg.sacked & RETRANS == 0)
}

/// The rate sampler's own state (Linux `tp->first_tx_mstamp`).
#[derive(Clone, Debug, Default)]
pub(super) struct RateSampler {
    /// Send time (us) of the first packet of the current send phase: the
    /// latest packet sent after an idle period, or the most recently sent
    /// packet that was delivered.
    first_tx_mstamp: u64,
}

impl RateSampler {
    /// Linux `tcp_rate_skb_sent`: stamps the segment about to leave with the
    /// delivery state; `in_flight` is what was in flight before it.
    #[inline]
    pub(super) fn skb_sent(&mut self, sock: &mut TcpSock, seg: &mut SegState, in_flight: u32) {
        if sock.packets_out == 0 {
            // Nothing in flight: a new send phase starts now.
            let t = sock.mstamp_us;
            self.first_tx_mstamp = t;
            sock.delivered_mstamp = t;
        }
        seg.tx_first_tx_mstamp = self.first_tx_mstamp;
        seg.tx_delivered_mstamp = sock.delivered_mstamp;
        seg.tx_delivered = sock.delivered;
        seg.tx_app_limited = sock.app_limited != 0;
        seg.tx_in_flight = in_flight;
        seg.tx_lost = sock.lost;
        seg.tx_delivered_ce = sock.delivered_ce;
    }

    /// Linux `tcp_rate_skb_delivered`: the most recently sent of the segments
    /// an ACK delivers (cumulatively or by SACK, `end_seq` breaking ties)
    /// defines the rate sample.
    #[inline]
    pub(super) fn skb_delivered(&mut self, seg: &mut SegState, end_seq: u32, rs: &mut RateSample) {
        if seg.tx_delivered_mstamp == 0 {
            return;
        }
        let tx = seg.xmit_us;
        if rs.prior_delivered == 0 || sent_after(tx, self.first_tx_mstamp, end_seq, rs.last_end_seq) {
            rs.prior_delivered = seg.tx_delivered;
            rs.prior_mstamp = seg.tx_delivered_mstamp;
            rs.is_app_limited = seg.tx_app_limited;
            rs.is_retrans = seg.sacked & RETRANS != 0;
            rs.last_end_seq = end_seq;
            self.first_tx_mstamp = tx;
            rs.first_tx_at_send = seg.tx_first_tx_mstamp;
            rs.snd_interval_us = tx as i64 - seg.tx_first_tx_mstamp as i64;
            rs.tx_in_flight = tx_in_flight_after_send(seg);
            rs.prior_lost = seg.tx_lost;
            rs.prior_delivered_ce = seg.tx_delivered_ce;
        }
        // A SACKed segment must not give a second sample when it is
        // cumulatively acknowledged later.
        if seg.sacked & SACKED_ACKED != 0 {
            seg.tx_delivered_mstamp = 0;
        }
    }

    /// Linux `tcp_rate_gen`: completes the sample at the end of an ACK that
    /// delivered `delivered` and newly marked `lost` packets. Returns the
    /// delivery rate (bit/s, `mss`-byte packets) of a valid sample.
    pub(super) fn gen(
        &self,
        sock: &mut TcpSock,
        delivered: u32,
        lost: u32,
        is_sack_reneg: bool,
        rs: &mut RateSample,
        mss: u32,
    ) -> Option<u64> {
        let now = sock.mstamp_us;
        if sock.app_limited != 0 && seq_after(sock.delivered, sock.app_limited) {
            sock.app_limited = 0;
        }
        if delivered > 0 {
            sock.delivered_mstamp = now;
        }
        rs.acked_sacked = delivered;
        rs.losses = lost;
        if rs.prior_mstamp == 0 || is_sack_reneg {
            rs.delivered = -1;
            rs.interval_us = -1;
            return None;
        }
        rs.delivered = (sock.delivered - rs.prior_delivered) as i64;
        rs.delivered_ce = sock.delivered_ce.wrapping_sub(rs.prior_delivered_ce) as i64;
        rs.lost = sock.lost.wrapping_sub(rs.prior_lost);
        // Sending and acknowledging a window are two pipeline phases; the
        // longer one bounds the rate (ACK compression shortens the second).
        let snd_us = rs.snd_interval_us;
        let ack_us = now as i64 - rs.prior_mstamp as i64;
        rs.interval_us = snd_us.max(ack_us);
        rs.snd_interval_us = snd_us;
        rs.rcv_interval_us = ack_us;
        let min_rtt = sock.min_rtt_us();
        if rs.interval_us < min_rtt as i64 {
            rs.interval_us = -1;
            return None;
        }
        let rate_bps =
            (rs.interval_us > 0).then(|| (rs.delivered as u64 * mss as u64 * 8 * 1_000_000) / rs.interval_us as u64);
        // Keep the last sample that is not app-limited, or the best one that is.
        if !rs.is_app_limited
            || rs.delivered as u64 * sock.rate_interval_us as u64 >= sock.rate_delivered as u64 * rs.interval_us as u64
        {
            sock.rate_delivered = rs.delivered as u32;
            sock.rate_interval_us = rs.interval_us as u32;
            sock.rate_app_limited = rs.is_app_limited;
        }
        rate_bps
    }

    /// Linux `tcp_rate_check_app_limited`: the application, not the network,
    /// limits sending when there is nothing to send, cwnd is not full and no
    /// lost packet waits for retransmission; samples up to the packets now in
    /// flight are then marked app-limited.
    pub(super) fn check_app_limited(&self, sock: &mut TcpSock, has_new_data: bool, in_flight: u32) {
        if !has_new_data && in_flight < sock.cwnd && sock.lost_out <= sock.retrans_out {
            let v = sock.delivered + in_flight;
            sock.app_limited = if v == 0 { 1 } else { v };
        }
    }
}
