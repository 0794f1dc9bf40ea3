//! TCP Low Priority (TCP-LP) as Linux runs it (`net/ipv4/tcp_lp.c`, Wong &
//! Hung's 2.6 module; Kuzmanovic & Knightly, "TCP-LP: a distributed algorithm
//! for low priority data transfer", IEEE INFOCOM 2003). A scavenger: it uses
//! only the capacity standard TCP leaves unused, by reacting to one-way delay
//! before the queue is full. From the TCP timestamps of each ACK it estimates
//! the receiver's timestamp clock rate (remote HZ, EWMA 63/64) and the one-way
//! delay, keeps its minimum, (reserved) maximum and a 7/8 EWMA (sowd); when
//! sowd exceeds min + 15 % of (max - min), an early congestion indication,
//! cwnd halves, or drops to one packet if the last indication was less than
//! the inference time (3 RTTs, from the echoed timestamp) ago, and min/max
//! restart from sowd. Within the inference time after an indication cwnd does
//! not grow; otherwise it is Reno, also on loss.
//!
//! The kernel's integer types are kept, with their effects: the remote-HZ
//! ratio and the OWD are computed in u32 (`LP_RESOL / remote_hz` is 0 when the
//! estimate exceeds 1000, which turns the OWD into -tsecr modulo 2^32). A
//! rising forward delay makes TSval advance faster than TSecr, so the estimate
//! does exceed 1000 then, and the garbage OWD that follows is itself taken as
//! an indication.
//! Timestamps: the receiver's clock is the sender's (`tcp::ts_clock`, 1 ms; no
//! per-connection random offset, which Linux adds and which changes the OWD's
//! constant part), and the ACK's TSval is taken as the arrival time of the newest
//! data segment (what an immediate ACK would carry; an ACK sent by the
//! delayed-ACK timer carries a later TSval in Linux). As in the kernel, the
//! first valid OWD sample (min = max = sowd) already counts as an indication,
//! so a connection halves cwnd once right at its start.

use super::params::{CcaInfo, Params};
use super::{AckArrival, AckSample, CongestionControl, TcpSock};
use crate::tcp::ts_clock;
use crate::units::Time;

/// Resolution of the OWD (`LP_RESOL` = `TCP_TS_HZ`, 1 ms).
pub const LP_RESOL: u32 = 1000;
/// Linux's TCP timestamp clock rate (`TCP_TS_HZ`).
pub const TCP_TS_HZ: u32 = 1000;
/// `enum tcp_lp_state` flags.
pub const LP_VALID_RHZ: u32 = 1 << 0;
pub const LP_VALID_OWD: u32 = 1 << 1;
pub const LP_WITHIN_THR: u32 = 1 << 3;
pub const LP_WITHIN_INF: u32 = 1 << 4;
/// The early congestion threshold: 15 % of the OWD range above its minimum.
pub const LP_THRESHOLD_PERCENT: u32 = 15;

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "lp",
        description: "TCP-LP: low-priority scavenger; one-way delay from timestamps above min + 15 % of its range halves cwnd (to 1 packet within 3 RTTs of the last time), no growth within those 3 RTTs, Reno otherwise",
        source: "Linux net/ipv4/tcp_lp.c; Kuzmanovic & Knightly, IEEE INFOCOM 2003",
        params: vec![],
    }
}

pub fn build(_p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Lp::default())
}

/// Linux `struct lp`, plus the timestamps of the ACK being processed (Linux
/// reads them from `tp->rx_opt`).
#[derive(Default)]
pub struct Lp {
    flag: u32,
    /// Smoothed OWD x 8.
    sowd: u32,
    owd_min: u32,
    owd_max: u32,
    owd_max_rsv: u32,
    remote_hz: u32,
    remote_ref_time: u32,
    local_ref_time: u32,
    last_drop: u32,
    inference: u32,
    rcv_tsval: u32,
    rcv_tsecr: u32,
}

impl Lp {
    pub fn flag(&self) -> u32 {
        self.flag
    }

    pub fn remote_hz(&self) -> u32 {
        self.remote_hz
    }

    /// Smoothed one-way delay (ms, relative).
    pub fn sowd(&self) -> u32 {
        self.sowd >> 3
    }

    /// Linux `tcp_lp_remote_hz_estimator`.
    fn remote_hz_estimator(&mut self) -> u32 {
        let mut rhz: i64 = (self.remote_hz << 6) as i64;
        if self.remote_ref_time != 0
            && self.local_ref_time != 0
            && self.rcv_tsval != self.remote_ref_time
            && self.rcv_tsecr != self.local_ref_time
        {
            // u32 arithmetic as in C: never negative.
            let m = (TCP_TS_HZ.wrapping_mul(self.rcv_tsval.wrapping_sub(self.remote_ref_time))
                / self.rcv_tsecr.wrapping_sub(self.local_ref_time)) as i64;
            if rhz > 0 {
                rhz += m - (rhz >> 6);
            } else {
                rhz = m << 6;
            }
        }
        if (rhz >> 6) > 0 {
            self.flag |= LP_VALID_RHZ;
        } else {
            self.flag &= !LP_VALID_RHZ;
        }
        self.remote_ref_time = self.rcv_tsval;
        self.local_ref_time = self.rcv_tsecr;
        (rhz >> 6) as u32
    }

    /// Linux `tcp_lp_owd_calculator`: the OWD in relative form.
    fn owd_calculator(&mut self) -> u32 {
        self.remote_hz = self.remote_hz_estimator();
        let mut owd = 0u32;
        if self.flag & LP_VALID_RHZ != 0 {
            owd = self
                .rcv_tsval
                .wrapping_mul(LP_RESOL / self.remote_hz)
                .wrapping_sub(self.rcv_tsecr.wrapping_mul(LP_RESOL / TCP_TS_HZ));
        }
        if owd > 0 {
            self.flag |= LP_VALID_OWD;
        } else {
            self.flag &= !LP_VALID_OWD;
        }
        owd
    }

    /// Linux `tcp_lp_rtt_sample`: min, (reserved) max and smoothed OWD.
    fn rtt_sample(&mut self) {
        let mut mowd = self.owd_calculator() as i64;
        if self.flag & LP_VALID_RHZ == 0 || self.flag & LP_VALID_OWD == 0 {
            return;
        }
        if mowd < self.owd_min as i64 {
            self.owd_min = mowd as u32;
        }
        // The largest OWD is always forgotten: owd_max is the one below it.
        if mowd > self.owd_max as i64 {
            if mowd > self.owd_max_rsv as i64 {
                self.owd_max = if self.owd_max_rsv == 0 { mowd as u32 } else { self.owd_max_rsv };
                self.owd_max_rsv = mowd as u32;
            } else {
                self.owd_max = mowd as u32;
            }
        }
        if self.sowd != 0 {
            mowd -= (self.sowd >> 3) as i64;
            self.sowd = (self.sowd as i64 + mowd) as u32;
        } else {
            self.sowd = (mowd << 3) as u32;
        }
    }
}

impl CongestionControl for Lp {
    fn name(&self) -> &str {
        "lp"
    }

    fn init(&mut self, _tp: &mut TcpSock) {
        *self = Lp { owd_min: 0xffff_ffff, ..Lp::default() };
    }

    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        tp.reno_ssthresh()
    }

    fn cong_avoid(&mut self, tp: &mut TcpSock, _ack: u32, acked: u32) {
        if self.flag & LP_WITHIN_INF == 0 {
            tp.reno_cong_avoid(acked);
        }
    }

    fn has_cong_avoid(&self) -> bool {
        true
    }

    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        tp.reno_undo_cwnd()
    }

    fn ack_arrival(&mut self, _tp: &mut TcpSock, a: &AckArrival) {
        self.rcv_tsval = if a.rx_ns == 0 { 0 } else { ts_clock(Time(a.rx_ns)) };
        self.rcv_tsecr = a.tsecr;
    }

    /// Linux `tcp_lp_pkts_acked`: the early congestion indication.
    fn pkts_acked(&mut self, tp: &mut TcpSock, sample: &AckSample) {
        let now = ts_clock(tp.now);
        if sample.rtt_us > 0 {
            self.rtt_sample();
        }
        let delta = now.wrapping_sub(self.rcv_tsecr);
        if (delta as i32) > 0 {
            self.inference = delta.wrapping_mul(3);
        }
        if self.last_drop != 0 && now.wrapping_sub(self.last_drop) < self.inference {
            self.flag |= LP_WITHIN_INF;
        } else {
            self.flag &= !LP_WITHIN_INF;
        }
        let range = self.owd_max.wrapping_sub(self.owd_min);
        let threshold = self.owd_min.wrapping_add(LP_THRESHOLD_PERCENT.wrapping_mul(range) / 100);
        if self.sowd >> 3 < threshold {
            self.flag |= LP_WITHIN_THR;
        } else {
            self.flag &= !LP_WITHIN_THR;
        }
        if self.flag & LP_WITHIN_THR != 0 {
            return;
        }
        // Restart the range from the current delay.
        self.owd_min = self.sowd >> 3;
        self.owd_max = self.sowd >> 2;
        self.owd_max_rsv = self.sowd >> 2;
        tp.cwnd = if self.flag & LP_WITHIN_INF != 0 { 1 } else { (tp.cwnd >> 1).max(1) };
        self.last_drop = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::vegas::tests::rtt_sample;

    fn lp() -> (Lp, TcpSock) {
        let mut tp = crate::cc::test_sock(1000, 100, 50);
        let mut l = Lp::default();
        l.init(&mut tp);
        (l, tp)
    }

    /// An ACK at `now_ms` (sender clock) for data sent at `sent_ms` that
    /// arrived at `rx_ms`: its timestamps, then `pkts_acked`.
    fn ack(l: &mut Lp, tp: &mut TcpSock, now_ms: u64, sent_ms: u64, rx_ms: u64) {
        tp.now = Time::from_ms(now_ms);
        let a = AckArrival { ack: 0, rx_seq: 1, rx_ns: rx_ms * 1_000_000, now_ns: tp.now.0, tsecr: ts_clock(Time::from_ms(sent_ms)) };
        l.ack_arrival(tp, &a);
        l.pkts_acked(tp, &rtt_sample(((now_ms - sent_ms) * 1000) as i64));
    }

    #[test]
    fn estimates_the_receivers_clock_and_the_one_way_delay() {
        let (mut l, mut tp) = lp();
        // Data every 10 ms, 30 ms forward and 20 ms back.
        for k in 1..=20 {
            ack(&mut l, &mut tp, 50 + 10 * k, 10 * k, 30 + 10 * k);
        }
        assert_eq!(l.remote_hz(), 1000);
        assert_eq!(l.sowd(), 30);
        // The first valid sample finds min = max = sowd, not below the
        // threshold: an indication, as in the kernel. A constant delay after
        // that is none.
        assert_eq!(tp.cwnd, 50);
    }

    #[test]
    fn rising_delay_halves_cwnd() {
        let (mut l, mut tp) = lp();
        for k in 1..=20 {
            ack(&mut l, &mut tp, 50 + 10 * k, 10 * k, 30 + 10 * k);
        }
        assert_eq!(tp.cwnd, 50);
        // The forward delay grows 1 ms per ACK: an indication within 10 ACKs.
        let (mut t, mut owd) = (250, 30);
        while tp.cwnd == 50 && owd < 40 {
            t += 10;
            owd += 1;
            ack(&mut l, &mut tp, t + owd + 20, t, t + owd);
        }
        assert_eq!(tp.cwnd, 25);
        assert_eq!(l.last_drop, ts_clock(tp.now));
    }

    #[test]
    fn an_indication_within_the_inference_time_drops_cwnd_to_one_and_stops_growth() {
        // sowd 50 ms against a range of 30..60 ms: above 30 + 15 % x 30.
        let indicating = |last_drop: u32| {
            let (mut l, mut tp) = lp();
            tp.now = Time::from_ms(1000);
            l.owd_min = 30;
            l.owd_max = 60;
            l.sowd = 50 << 3;
            l.last_drop = last_drop;
            // The echoed timestamp says the RTT is 100 ms: inference 300 ms.
            l.rcv_tsecr = ts_clock(Time::from_ms(900));
            l.pkts_acked(&mut tp, &rtt_sample(-1));
            (l, tp)
        };
        let (l, tp) = indicating(ts_clock(Time::from_ms(800)));
        assert_eq!(tp.cwnd, 1);
        assert_ne!(l.flag() & LP_WITHIN_INF, 0);
        // The range restarts at [sowd, 2 sowd].
        assert_eq!((l.owd_min, l.owd_max, l.owd_max_rsv), (50, 100, 100));
        let (mut l, mut tp) = indicating(ts_clock(Time::from_ms(600)));
        assert_eq!(tp.cwnd, 50, "400 ms after the last: halved");
        assert_eq!(l.flag() & LP_WITHIN_INF, 0);
        // Within the inference time after it, no growth.
        tp.now = Time::from_ms(1100);
        l.pkts_acked(&mut tp, &rtt_sample(-1));
        assert_ne!(l.flag() & LP_WITHIN_INF, 0);
        l.cong_avoid(&mut tp, 0, 1000);
        assert_eq!(tp.cwnd, 50);
    }

    #[test]
    fn a_rising_delay_drives_the_remote_hz_estimate_above_1000() {
        // TSval advancing 11 ms per 10 ms of TSecr: m = 1100 on every ACK.
        let (mut l, mut tp) = lp();
        ack(&mut l, &mut tp, 60, 10, 40);
        ack(&mut l, &mut tp, 70, 20, 50);
        assert_eq!(l.remote_hz(), 1000);
        ack(&mut l, &mut tp, 81, 30, 61);
        assert_eq!(l.remote_hz(), 1001);
    }

    #[test]
    fn outside_the_inference_time_it_is_reno() {
        let (mut l, mut tp) = lp();
        l.last_drop = 1;
        l.inference = 300;
        ack(&mut l, &mut tp, 1000, 950, 980);
        assert_eq!(l.flag() & LP_WITHIN_INF, 0);
        tp.cwnd_cnt = 99;
        l.cong_avoid(&mut tp, 0, 1);
        assert_eq!(tp.cwnd, 101);
        assert_eq!(l.ssthresh(&mut tp), 50);
    }

    #[test]
    fn a_remote_hz_estimate_above_1000_makes_the_owd_minus_tsecr() {
        // Linux's u32 arithmetic: LP_RESOL / 1001 = 0.
        let (mut l, _) = lp();
        l.remote_hz = 1001;
        l.flag |= LP_VALID_RHZ;
        l.rcv_tsval = 5000;
        l.rcv_tsecr = 4000;
        assert_eq!(l.owd_calculator(), 0u32.wrapping_sub(4000));
    }
}
