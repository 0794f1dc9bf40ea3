//! TCP Prague, the L4S team's scalable congestion control (L4STeam/linux,
//! `net/ipv4/tcp_prague.c`, version 0.7 as proposed for mainline;
//! draft-briscoe-iccrg-prague-congestion-control; RFC 9331's Prague
//! requirements). It negotiates ECN with Accurate ECN feedback, sends ECT(1)
//! (the L4S identifier) on every data packet, and paces.
//!
//! Like DCTCP it keeps alpha, an EWMA (gain g = 1/16) of the fraction of
//! packets CE-marked, updated once per round trip from AccECN's counts
//! (`delivered_ce`); on entering CWR (a newly marked ACK, at most once per
//! round trip since CWR lasts one) the window shrinks by alpha/2. The window is
//! fractional (`frac_cwnd`, 2^20 units, the socket's cwnd follows it one
//! packet per ACK): each ACK of unmarked packets adds acked/cwnd (a Reno
//! increase, but only for the packets not marked), so under a permanent
//! marking probability p the window settles where (1 - p)/p increases balance
//! the decreases. Before the first mark alpha is 0 and that mark halves the
//! window (Linux's default `prague_alpha_mode` 0). On loss it halves, as Reno
//! does, and does not grow until the episode ends.
//!
//! RTT independence (Linux's default): four rounds after slow start, a flow
//! whose smoothed RTT is below the target (25 ms) grows as if its RTT were the
//! target: the per-ACK increase is scaled by (srtt/target)^2, alpha is
//! updated and the window reduced at most once per target RTT. Pacing is at
//! cwnd x MTU / srtt (twice that while cwnd < ssthresh/2), and super-packets
//! hold at most 2^-12 s (about 250 us) of data at that rate.
//!
//! Linux's fixed-point arithmetic is kept (alpha in 2^24ths, the window in
//! 2^20ths, srtt in 1/8 us). Not modelled: the rate-based mode Linux switches
//! to when the window falls to 4 MTUs or less (`prague_cwnd_mode` 2: Prague
//! then paces below 2 packets per RTT and shrinks its MSS), hence also the MSS
//! reduction, and the classic-ECN AQM detection of older versions.

use super::params::{declare_params, CcaInfo, Params};
use super::{CaEvent, CaState, CongestionControl, RateSample, TcpSock};
use crate::packet::HEADER_BYTES;

/// alpha's resolution (`PRAGUE_ALPHA_BITS`) and 1.0 (`PRAGUE_MAX_ALPHA`).
pub const ALPHA_BITS: u32 = 24;
pub const MAX_ALPHA: u64 = 1 << ALPHA_BITS;
/// The fractional window's resolution (`CWND_UNIT`) and one packet (`ONE_CWND`).
pub const CWND_UNIT: u32 = 20;
pub const ONE_CWND: u64 = 1 << CWND_UNIT;
/// The EWMA gain g = 1/2^4 (`PRAGUE_SHIFT_G`).
pub const SHIFT_G: u32 = 4;
/// The smallest window the fractional one maps to (`MIN_CWND_RTT`).
const MIN_CWND_RTT: u32 = 2;
/// Above this RTT the increase is not scaled (`MAX_SCALED_RTT`, 100 ms).
const MAX_SCALED_RTT_US: u64 = 100_000;
/// The MTU the increase is normalised to (`MTU_SYS`).
const MTU_SYS: u64 = 1500;
/// The lowest pacing rate, bytes/s (`MINIMUM_RATE`: 100 kbit/s).
const MINIMUM_RATE: u64 = 12_500;
/// Its fixed-point shift for srtt x rate products (`RTT2SEC_SHIFT`) and the
/// long-term srtt average's weight (`HSRTT_SHIFT`).
const RTT2SEC_SHIFT: u32 = 23;
const HSRTT_SHIFT: u32 = 7;

declare_params! {
    /// Prague's module parameters with the L4S tree's defaults.
    pub struct PragueConfig {
        /// `prague_rtt_target` (RTT_TARGET, 25 ms).
        rtt_target_us: u32 = 25_000, range(1, 100_000), "RTT below which a flow grows as if it had this RTT (us)";
        /// `prague_rtt_transition` (DEFAULT_RTT_TRANSITION, 4).
        rtt_transition: u32 = 4, range(0, 1_000_000), "rounds after slow start before RTT independence applies";
        /// Not a Linux parameter: off gives DCTCP-like RTT-dependent growth.
        rtt_scaling: bool = true, "RTT independence: scale the increase by (srtt/target)^2 below the target";
        /// `prague_alpha_mode` 1: alpha starts at 1 (0 halves the window at the first mark).
        alpha_init_one: bool = false, "start with alpha = 1 instead of halving the window at the first mark";
        /// `prague_burst_shift` (12: 2^-12 s).
        burst_shift: u32 = 12, range(0, 30), "super-packets hold at most 2^-burst_shift s of data at the pacing rate";
        /// `prague_max_tso_segs` (0: no limit).
        max_tso_segs: u32 = 0, range(0, 65_535), "upper bound on segments per super-packet (0: none)";
    }
}

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "prague",
        description: "TCP Prague (L4S): ECT(1) and Accurate ECN; DCTCP-like alpha (g = 1/16) of CE-marked packets, cwnd -= cwnd alpha/2 at most once per RTT, +acked/cwnd for unmarked packets, RTT-independent growth below 25 ms, paced; halves on loss",
        source: "L4STeam/linux net/ipv4/tcp_prague.c (v0.7); draft-briscoe-iccrg-prague-congestion-control",
        params: PragueConfig::catalogue(),
    }
}

pub fn build(p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Prague::new(PragueConfig::from_params(p)))
}

/// Linux `struct prague`.
pub struct Prague {
    cfg: PragueConfig,
    cwr_stamp: u64,
    /// When alpha was last updated (us).
    alpha_stamp: u64,
    /// alpha / g, in 2^-24 (`upscaled_alpha`).
    pub upscaled_alpha: u64,
    /// The window increase per unmarked packet acknowledged, 2^-20 packets
    /// x cwnd (`ai_ack_increase`).
    pub ai_ack_increase: u64,
    /// The window in 2^-20 packets.
    pub frac_cwnd: u64,
    /// The pacing rate without the slow-start doubling, bytes/s.
    rate_bytes: u64,
    loss_rate_bytes: u64,
    loss_cwnd: u32,
    /// Segments per super-packet.
    pub max_tso_burst: u32,
    old_delivered: u32,
    old_delivered_ce: u32,
    next_seq: u32,
    /// Rounds since slow start ended.
    pub round: u32,
    /// srtt x 8 averaged with weight 2^-7, << 7 (`hsrtt_us`).
    hsrtt_us: u64,
    pub saw_ce: bool,
    in_loss: bool,
}

impl Prague {
    pub fn new(cfg: PragueConfig) -> Prague {
        Prague {
            cfg,
            cwr_stamp: 0,
            alpha_stamp: 0,
            upscaled_alpha: 0,
            ai_ack_increase: ONE_CWND,
            frac_cwnd: 0,
            rate_bytes: MINIMUM_RATE,
            loss_rate_bytes: 0,
            loss_cwnd: 0,
            max_tso_burst: 1,
            old_delivered: 0,
            old_delivered_ce: 0,
            next_seq: 0,
            round: 0,
            hsrtt_us: 0,
            saw_ce: false,
            in_loss: false,
        }
    }

    /// alpha in [0, 1].
    pub fn alpha(&self) -> f64 {
        (self.upscaled_alpha >> SHIFT_G) as f64 / MAX_ALPHA as f64
    }

    /// Linux `tcp_mss_to_mtu`: IP + TCP headers with timestamps.
    fn mtu(tp: &TcpSock) -> u64 {
        (tp.mss + HEADER_BYTES) as u64
    }

    /// The target RTT in srtt units (1/8 us), `prague_target_rtt`.
    fn target_rtt(&self) -> u64 {
        (self.cfg.rtt_target_us as u64) << 3
    }

    fn is_rtt_indep(&self, tp: &TcpSock) -> bool {
        self.cfg.rtt_scaling && !tp.in_slow_start() && self.round >= self.cfg.rtt_transition
    }

    fn e2e_rtt_elapsed(&self, tp: &TcpSock) -> bool {
        !crate::packet::seq_before(tp.snd_una, self.next_seq)
    }

    fn target_rtt_elapsed(&self, tp: &TcpSock) -> bool {
        (self.target_rtt() >> 3) <= tp.mstamp_us.saturating_sub(self.alpha_stamp)
    }

    fn should_update_ewma(&self, tp: &TcpSock) -> bool {
        self.e2e_rtt_elapsed(tp) && (!self.is_rtt_indep(tp) || self.target_rtt_elapsed(tp))
    }

    /// `prague_frac_cwnd_to_snd_cwnd`: rounded up, at least 2.
    fn frac_cwnd_to_snd_cwnd(&self, tp: &TcpSock) -> u32 {
        let w = ((self.frac_cwnd + (ONE_CWND - 1)) >> CWND_UNIT).min(u32::MAX as u64) as u32;
        w.max(MIN_CWND_RTT).min(tp.cwnd_clamp)
    }

    /// `prague_frac_cwnd_to_pacing_rate`.
    fn frac_cwnd_to_pacing_rate(&self, tp: &TcpSock) -> u64 {
        let mut rate = (1_000_000u64 << 3) * Self::mtu(tp);
        if tp.srtt_us8 != 0 {
            rate /= tp.srtt_us8 as u64;
        }
        (((rate as u128 * self.frac_cwnd as u128) >> CWND_UNIT) as u64).max(MINIMUM_RATE)
    }

    /// `prague_pacing_rate_to_frac_cwnd`.
    fn pacing_rate_to_frac_cwnd(&self, tp: &TcpSock) -> u64 {
        let rtt = match self.hsrtt_us >> HSRTT_SHIFT {
            0 => tp.srtt_us8 as u64,
            r => r,
        };
        let x = (self.rate_bytes as u128 * rtt as u128) >> (RTT2SEC_SHIFT - CWND_UNIT);
        (x as u64).div_ceil(Self::mtu(tp))
    }

    /// `prague_ai_ack_increase`: 1/cwnd per packet, scaled by (srtt/target)^2
    /// once RTT-independent below the target.
    fn update_ai_ack_increase(&mut self, tp: &TcpSock) {
        let rtt = tp.srtt_us8 as u64;
        self.ai_ack_increase = if !self.cfg.rtt_scaling
            || self.round < self.cfg.rtt_transition
            || rtt == 0
            || rtt > MAX_SCALED_RTT_US << 3
        {
            ONE_CWND
        } else {
            let target = self.target_rtt();
            if rtt >= target {
                ONE_CWND
            } else {
                // DIV64_U64_ROUND_CLOSEST((rtt << 20) * rtt, target^2)
                let div = target * target;
                (((rtt << CWND_UNIT) * rtt) + div / 2) / div
            }
        };
    }

    fn cwnd_changed(&mut self, tp: &mut TcpSock) {
        tp.cwnd_stamp = tp.jiffies;
        self.update_ai_ack_increase(tp);
    }

    fn new_round(&mut self, tp: &TcpSock) {
        self.next_seq = tp.snd_nxt;
        self.old_delivered_ce = tp.delivered_ce;
        self.old_delivered = tp.delivered;
        if !tp.in_slow_start() {
            self.round = self.round.wrapping_add(1);
            if self.round == 0 {
                self.round = self.cfg.rtt_transition;
            }
        }
        self.update_ai_ack_increase(tp);
    }

    /// `prague_update_alpha`, once per round trip (or target RTT).
    pub fn update_alpha(&mut self, tp: &TcpSock) {
        // No update before there is proof of an AQM on the path.
        if self.saw_ce {
            let mut ecn_segs = tp.delivered_ce.wrapping_sub(self.old_delivered_ce) as u64;
            if ecn_segs > 0 {
                let acked = tp.delivered.wrapping_sub(self.old_delivered).max(1) as u64;
                ecn_segs = (ecn_segs << ALPHA_BITS) / acked;
            }
            // upscaled alpha = alpha / g keeps the EWMA's remainder.
            let alpha = self.upscaled_alpha - (self.upscaled_alpha >> SHIFT_G) + ecn_segs;
            self.alpha_stamp = tp.mstamp_us;
            self.upscaled_alpha = alpha.min(MAX_ALPHA << SHIFT_G);
        }
        self.hsrtt_us = self.hsrtt_us + tp.srtt_us8 as u64 - (self.hsrtt_us >> HSRTT_SHIFT);
        self.new_round(tp);
    }

    /// `prague_update_cwnd`.
    fn update_cwnd(&mut self, tp: &mut TcpSock, rs: &RateSample) {
        let mut acked = rs.acked_sacked as i64;
        if rs.ece_delta > 0 {
            if !self.saw_ce && !self.cfg.alpha_init_one {
                self.frac_cwnd = (self.frac_cwnd + 1) >> 1;
            }
            self.saw_ce = true;
            acked -= rs.ece_delta as i64;
        }
        if acked > 0 && !self.in_loss && tp.is_cwnd_limited() {
            let mut acked = acked as u64;
            if tp.in_slow_start() {
                acked = tp.slow_start(acked.min(u32::MAX as u64) as u32) as u64;
                self.frac_cwnd = (tp.cwnd as u64) << CWND_UNIT;
                if acked == 0 {
                    self.cwnd_changed(tp);
                    return;
                }
            }
            let mut increase = acked * self.ai_ack_increase;
            if self.frac_cwnd > 0 {
                let f = self.frac_cwnd as u128;
                increase = ((((increase as u128) << CWND_UNIT) + f / 2) / f) as u64;
            }
            increase = increase * MTU_SYS / Self::mtu(tp);
            self.frac_cwnd += acked.max(increase);
            let rate = self.frac_cwnd_to_pacing_rate(tp);
            self.rate_bytes = (self.rate_bytes + acked).max(rate);
        }
        // Step the socket's cwnd one packet towards the fractional window.
        let new_cwnd = self.frac_cwnd_to_snd_cwnd(tp);
        if tp.cwnd > new_cwnd {
            tp.cwnd -= 1;
            tp.ssthresh = tp.cwnd;
            self.cwnd_changed(tp);
        } else if tp.cwnd < new_cwnd {
            tp.cwnd += 1;
            self.cwnd_changed(tp);
        }
    }

    /// `prague_update_pacing_rate` (the window-based mode).
    fn update_pacing_rate(&mut self, tp: &mut TcpSock) {
        let mtu = Self::mtu(tp);
        let max_inflight = ((self.frac_cwnd >> CWND_UNIT) as u32).max(tp.packets_in_flight()) as u64;
        let mut rate = (1_000_000u64 << 3) * mtu;
        if tp.srtt_us8 != 0 {
            rate /= tp.srtt_us8 as u64;
        }
        rate = (rate * max_inflight).max(MINIMUM_RATE);
        self.rate_bytes = rate;
        if tp.cwnd < tp.ssthresh / 2 {
            rate <<= 1;
        }
        rate = rate.min(tp.max_pacing_rate);
        let burst = rate / mtu;
        self.max_tso_burst = ((burst >> self.cfg.burst_shift) as u32).max(1);
        tp.pacing_rate = rate;
    }

    /// `prague_enter_loss`: halve, no growth until the episode ends.
    fn enter_loss(&mut self, tp: &TcpSock) {
        self.loss_cwnd = tp.cwnd;
        self.loss_rate_bytes = self.rate_bytes;
        self.frac_cwnd -= self.frac_cwnd >> 1;
        self.rate_bytes = self.frac_cwnd_to_pacing_rate(tp);
        self.in_loss = true;
    }

    /// `prague_enter_cwr`: cwnd -= cwnd alpha / 2 (rounded to nearest), at
    /// most once per target RTT once RTT-independent.
    pub fn enter_cwr(&mut self, tp: &TcpSock) {
        if self.is_rtt_indep(tp) && (self.target_rtt() >> 3) > tp.mstamp_us.saturating_sub(self.cwr_stamp) {
            return;
        }
        self.cwr_stamp = tp.mstamp_us;
        let alpha = (self.upscaled_alpha >> SHIFT_G) as u128;
        let reduction = ((alpha * self.frac_cwnd as u128 + MAX_ALPHA as u128) >> (ALPHA_BITS + 1)) as u64;
        self.frac_cwnd -= reduction;
        self.rate_bytes = self.frac_cwnd_to_pacing_rate(tp);
    }
}

impl CongestionControl for Prague {
    fn name(&self) -> &str {
        "prague"
    }

    fn init(&mut self, tp: &mut TcpSock) {
        self.alpha_stamp = tp.mstamp_us;
        self.upscaled_alpha = if self.cfg.alpha_init_one { MAX_ALPHA << SHIFT_G } else { 0 };
        self.frac_cwnd = (tp.cwnd as u64) << CWND_UNIT;
        self.max_tso_burst = 1;
        self.rate_bytes = if tp.srtt_us8 != 0 {
            let r = ((1_000_000u64 << 3) * Self::mtu(tp)) / tp.srtt_us8 as u64;
            (r * tp.cwnd.max(tp.packets_in_flight()) as u64).max(MINIMUM_RATE)
        } else {
            MINIMUM_RATE
        };
        self.update_pacing_rate(tp);
        self.loss_rate_bytes = 0;
        self.round = 0;
        self.saw_ce = tp.delivered_ce != 0;
        self.hsrtt_us = if tp.srtt_us8 != 0 { (tp.srtt_us8 as u64) << HSRTT_SHIFT } else { 1 << (HSRTT_SHIFT + 3) };
        self.new_round(tp);
    }

    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        tp.ssthresh
    }

    fn has_cong_control(&self) -> bool {
        true
    }

    fn cong_control(&mut self, tp: &mut TcpSock, rs: &RateSample) {
        self.update_cwnd(tp, rs);
        if self.should_update_ewma(tp) {
            self.update_alpha(tp);
        }
        self.update_pacing_rate(tp);
    }

    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        // Progress since the reduction counts.
        self.in_loss = false;
        self.rate_bytes = self.rate_bytes.max(self.loss_rate_bytes);
        self.frac_cwnd = self.pacing_rate_to_frac_cwnd(tp);
        self.loss_cwnd.max(tp.cwnd)
    }

    fn set_state(&mut self, tp: &mut TcpSock, new_state: CaState) {
        if new_state == tp.ca_state {
            return;
        }
        match new_state {
            CaState::Recovery => self.enter_loss(tp),
            CaState::Cwr => self.enter_cwr(tp),
            CaState::Open => self.in_loss = false,
            _ => {}
        }
    }

    fn cwnd_event(&mut self, tp: &mut TcpSock, ev: CaEvent) {
        if ev == CaEvent::Loss {
            self.enter_loss(tp);
        }
    }

    fn wants_pacing(&self) -> bool {
        true
    }

    fn needs_ecn(&self) -> bool {
        true
    }

    fn needs_accecn(&self) -> bool {
        true
    }

    fn wants_ect_1(&self) -> bool {
        true
    }

    fn tso_segs(&self, _tp: &TcpSock) -> Option<u32> {
        let segs = self.max_tso_burst;
        Some(if self.cfg.max_tso_segs > 0 { segs.min(self.cfg.max_tso_segs) } else { segs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::test_sock;

    /// A Prague flow in congestion avoidance at `cwnd` packets, srtt 10 ms,
    /// after its first mark (alpha 0).
    fn flow(cwnd: u32) -> (Prague, TcpSock) {
        let mut tp = test_sock(250, cwnd, cwnd);
        tp.srtt_us8 = 10_000 << 3;
        let mut p = Prague::new(PragueConfig::default());
        p.init(&mut tp);
        p.saw_ce = true;
        (p, tp)
    }

    /// One round trip that delivers `n` packets of which `ce` were marked.
    fn round(p: &mut Prague, tp: &mut TcpSock, n: u32, ce: u32) {
        tp.delivered += n;
        tp.delivered_ce += ce;
        tp.snd_una = tp.snd_una.wrapping_add(n);
        tp.snd_nxt = tp.snd_una.wrapping_add(n);
        tp.mstamp_us += 10_000;
        p.update_alpha(tp);
    }

    #[test]
    fn alpha_follows_the_marked_fraction_with_gain_one_sixteenth() {
        let (mut p, mut tp) = flow(100);
        // First round: 25 % marked: alpha = g x 0.25.
        round(&mut p, &mut tp, 100, 25);
        assert!((p.alpha() - 0.25 / 16.0).abs() < 1e-6, "{}", p.alpha());
        // A known pattern: rounds of 50 %, 0 %, 100 %.
        let mut want = 0.25 / 16.0;
        for f in [0.5, 0.0, 1.0, 1.0, 0.1] {
            round(&mut p, &mut tp, 100, (f * 100.0) as u32);
            want = want * 15.0 / 16.0 + f / 16.0;
        }
        assert!((p.alpha() - want).abs() < 1e-5, "{} vs {want}", p.alpha());
        // A steady fraction is approached geometrically.
        for _ in 0..300 {
            round(&mut p, &mut tp, 100, 40);
        }
        assert!((p.alpha() - 0.4).abs() < 1e-4, "{}", p.alpha());
    }

    #[test]
    fn alpha_waits_for_a_round_trip_and_for_proof_of_an_aqm() {
        let (mut p, mut tp) = flow(100);
        p.saw_ce = false;
        round(&mut p, &mut tp, 100, 50);
        assert_eq!(p.upscaled_alpha, 0);
        // Mid-round ACKs do not update it.
        p.saw_ce = true;
        tp.delivered_ce += 10;
        tp.snd_una = tp.snd_una.wrapping_add(5);
        assert!(!p.should_update_ewma(&tp));
    }

    #[test]
    fn cwr_reduces_by_alpha_over_two_once_per_target_rtt() {
        let (mut p, mut tp) = flow(100);
        p.upscaled_alpha = (MAX_ALPHA / 2) << SHIFT_G; // alpha = 0.5
        let before = p.frac_cwnd;
        p.enter_cwr(&tp);
        assert_eq!(p.frac_cwnd, before - before / 4, "cwnd x (1 - alpha/2)");
        // RTT-independent (past the transition rounds): a second reduction
        // within the 25 ms target RTT is skipped, one after it applies.
        p.round = 10;
        let before = p.frac_cwnd;
        tp.mstamp_us += 20_000;
        p.enter_cwr(&tp);
        assert_eq!(p.frac_cwnd, before);
        tp.mstamp_us += 6_000;
        p.enter_cwr(&tp);
        assert_eq!(p.frac_cwnd, before - before / 4);
    }

    #[test]
    fn unmarked_acks_grow_by_one_packet_per_window_and_marked_ones_not_at_all() {
        let (mut p, mut tp) = flow(100);
        let start = p.frac_cwnd;
        // 100 unmarked packets acknowledged (one window): about +1 packet.
        for _ in 0..50 {
            let rs = RateSample { acked_sacked: 2, ..Default::default() };
            p.update_cwnd(&mut tp, &rs);
        }
        let grown = (p.frac_cwnd - start) as f64 / ONE_CWND as f64;
        assert!((grown - 0.99).abs() < 0.02, "{grown}");
        // All marked: no growth.
        let f = p.frac_cwnd;
        p.update_cwnd(&mut tp, &RateSample { acked_sacked: 2, ece_delta: 2, ..Default::default() });
        assert_eq!(p.frac_cwnd, f);
    }

    #[test]
    fn the_first_mark_halves_the_window_and_rtt_independence_slows_growth() {
        let mut tp = test_sock(250, 100, 100);
        tp.srtt_us8 = 5_000 << 3;
        let mut p = Prague::new(PragueConfig::default());
        p.init(&mut tp);
        let f = p.frac_cwnd;
        p.update_cwnd(&mut tp, &RateSample { acked_sacked: 1, ece_delta: 1, ..Default::default() });
        assert_eq!(p.frac_cwnd, f.div_ceil(2));
        assert!(p.saw_ce);
        // srtt 5 ms against the 25 ms target: (5/25)^2 = 1/25 of Reno's increase
        // once past the transition rounds.
        p.round = 4;
        p.update_ai_ack_increase(&tp);
        assert_eq!(p.ai_ack_increase, (ONE_CWND as f64 / 25.0).round() as u64);
    }

    #[test]
    fn loss_halves_and_pacing_follows_the_window() {
        let (mut p, mut tp) = flow(100);
        p.cong_control(&mut tp, &RateSample::default());
        // 100 packets of 1500 bytes per 10 ms = 15 MB/s (ssthresh 100: no doubling).
        assert_eq!(tp.pacing_rate, 15_000_000);
        // 15 MB/s over 2^-12 s = 2.4 packets per super-packet.
        assert_eq!(p.tso_segs(&tp), Some(2));
        let f = p.frac_cwnd;
        p.set_state(&mut tp, CaState::Recovery);
        assert_eq!(p.frac_cwnd, f - f / 2);
        // No growth during the loss episode.
        let f = p.frac_cwnd;
        p.update_cwnd(&mut tp, &RateSample { acked_sacked: 10, ..Default::default() });
        assert_eq!(p.frac_cwnd, f);
    }
}
