//! H-TCP as Linux runs it (`net/ipv4/tcp_htcp.c`; Shorten and Leith, "H-TCP:
//! TCP for high-speed and long-distance networks", PFLDnet 2004). The increase
//! depends on the time Δ since the last congestion event: Reno-like for the
//! first second, then alpha = 2 (1 - beta) (1 + 10 Δ + (Δ/2)^2) packets per RTT,
//! scaled by minRTT / 100 ms (clamped to [0.5, 10] in reverse) so that flows with
//! different RTTs grow alike in time. The decrease is adaptive,
//! beta = minRTT / maxRTT in [0.5, 0.797] (a drained queue gives 0.5), falling
//! back to 0.5 when the measured throughput changed by more than 20 % between
//! congestion events. Everything runs in jiffies and 7-bit fixed point, as in
//! the kernel, and a spurious reduction restores the congestion-event timers.

use super::params::{declare_params, CcaInfo, Params};
use super::{AckSample, CaState, CongestionControl, TcpSock};
use crate::units::usecs_to_jiffies;

/// 1.0 in H-TCP's 7-bit fixed point (Linux ALPHA_BASE).
pub const ALPHA_BASE: u32 = 1 << 7;
/// Bounds of beta in 7-bit fixed point (Linux BETA_MIN = 0.5, BETA_MAX = 102/128 = 0.797).
pub const BETA_MIN: u8 = 1 << 6;
pub const BETA_MAX: u8 = 102;
/// maxRTT only follows samples at most this far above it (20 ms), so that a
/// single delayed ACK does not inflate it.
const MAX_RTT_STEP_MS: u64 = 20;
/// Adaptive beta only when minRTT exceeds 10 ms.
const ADAPTIVE_BETA_MIN_RTT_MS: u64 = 10;
/// maxRTT fades towards minRTT by 5 % at each congestion event.
const MAX_RTT_FADE_PERCENT: u32 = 95;

declare_params! {
    /// Module parameters of `tcp_htcp` with their Linux defaults.
    pub struct HtcpConfig {
        use_rtt_scaling: bool = true, "scale the increase by minRTT / 100 ms (clamped)";
        use_bandwidth_switch: bool = true, "beta = 0.5 after a >20 % change in throughput";
    }
}

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "htcp",
        description: "H-TCP: increase grows with time since the last loss (after 1 s), RTT-scaled; adaptive beta = minRTT/maxRTT in [0.5, 0.8]",
        source: "Linux net/ipv4/tcp_htcp.c; Shorten, Leith, PFLDnet 2004",
        params: HtcpConfig::catalogue(),
    }
}

pub fn build(p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Htcp::new(HtcpConfig::from_params(p)))
}

/// Linux `msecs_to_jiffies` (rounds up).
fn msecs_to_jiffies(ms: u64, hz: u32) -> u32 {
    usecs_to_jiffies(ms * 1000, hz) as u32
}

/// Linux `between(seq1, seq2, seq3)`: seq2 <= seq1 <= seq3 in wrapping arithmetic.
fn between(x: u32, lo: u32, hi: u32) -> bool {
    hi.wrapping_sub(lo) >= x.wrapping_sub(lo)
}

#[derive(Default)]
pub struct Htcp {
    cfg: HtcpConfig,
    /// Increase per RTT x 128.
    alpha: u32,
    /// Decrease factor x 128.
    beta: u8,
    /// Adaptive beta only from the second congestion event on.
    modeswitch: bool,
    /// Packets covered by the current ACK (16 bits in Linux).
    pkts_acked: u16,
    packetcount: u32,
    /// RTT bounds in jiffies (0 = none yet).
    min_rtt: u32,
    max_rtt: u32,
    /// Jiffies at the last congestion event.
    last_cong: u32,
    /// Timers saved at a reduction, restored if it is undone (0 = nothing saved).
    undo_last_cong: u32,
    undo_max_rtt: u32,
    undo_old_max_b: u32,
    /// Throughput estimates in packets per second.
    min_b: u32,
    max_b: u32,
    old_max_b: u32,
    bi: u32,
    /// Jiffies at the start of the current throughput sample.
    lasttime: u32,
}

impl Htcp {
    pub fn new(cfg: HtcpConfig) -> Htcp {
        Htcp { cfg, alpha: ALPHA_BASE, beta: BETA_MIN, pkts_acked: 1, ..Default::default() }
    }

    /// Jiffies since the last congestion event.
    fn cong_time(&self, now: u32) -> u32 {
        now.wrapping_sub(self.last_cong)
    }

    /// Linux `htcp_reset`: a reduction starts; keep what undo needs.
    fn reset(&mut self, now: u32) {
        self.undo_last_cong = self.last_cong;
        self.undo_max_rtt = self.max_rtt;
        self.undo_old_max_b = self.old_max_b;
        self.last_cong = now;
    }

    /// Linux `measure_rtt` with an RTT in jiffies.
    fn measure_rtt(&mut self, tp: &TcpSock, rtt: u32) {
        if self.min_rtt > rtt || self.min_rtt == 0 {
            self.min_rtt = rtt;
        }
        if tp.ca_state == CaState::Open {
            if self.max_rtt < self.min_rtt {
                self.max_rtt = self.min_rtt;
            }
            if self.max_rtt < rtt && rtt <= self.max_rtt + msecs_to_jiffies(MAX_RTT_STEP_MS, tp.hz) {
                self.max_rtt = rtt;
            }
        }
    }

    /// Linux `htcp_beta_update`.
    fn beta_update(&mut self, hz: u32) {
        if self.cfg.use_bandwidth_switch {
            let max_b = self.max_b;
            let old_max_b = self.old_max_b;
            self.old_max_b = max_b;
            if !between(max_b.wrapping_mul(5), old_max_b.wrapping_mul(4), old_max_b.wrapping_mul(6)) {
                self.beta = BETA_MIN;
                self.modeswitch = false;
                return;
            }
        }
        if self.modeswitch && self.min_rtt > msecs_to_jiffies(ADAPTIVE_BETA_MIN_RTT_MS, hz) && self.max_rtt != 0 {
            // Stored in 8 bits before clamping, like the kernel's u8.
            self.beta = ((self.min_rtt << 7) / self.max_rtt) as u8;
            self.beta = self.beta.clamp(BETA_MIN, BETA_MAX);
        } else {
            self.beta = BETA_MIN;
            self.modeswitch = true;
        }
    }

    /// Linux `htcp_alpha_update`.
    fn alpha_update(&mut self, now: u32, hz: u32) {
        let mut factor: u32 = 1;
        let mut diff = self.cong_time(now);
        if diff > hz {
            // 1 + 10 Δ + (Δ/2)^2 with Δ in seconds after the first one.
            diff -= hz;
            let half = diff / 2;
            factor = 1 + (10u32.wrapping_mul(diff).wrapping_add(half.wrapping_mul(half) / hz)) / hz;
        }
        if self.cfg.use_rtt_scaling && self.min_rtt != 0 {
            // 8 x (100 ms / minRTT), clamped to [0.5, 10] x 8.
            let scale = ((hz << 3) / (10 * self.min_rtt)).clamp(1 << 2, 10 << 3);
            factor = ((factor << 3) / scale).max(1);
        }
        self.alpha = 2u32.wrapping_mul(factor).wrapping_mul((1 << 7) - self.beta as u32);
        if self.alpha == 0 {
            self.alpha = ALPHA_BASE;
        }
    }

    /// Linux `htcp_param_update`, at each congestion event.
    fn param_update(&mut self, now: u32, hz: u32) {
        self.beta_update(hz);
        self.alpha_update(now, hz);
        if self.min_rtt > 0 && self.max_rtt > self.min_rtt {
            self.max_rtt = self.min_rtt + (self.max_rtt - self.min_rtt) * MAX_RTT_FADE_PERCENT / 100;
        }
    }

    /// Increase per RTT in packets.
    pub fn alpha(&self) -> f64 {
        self.alpha as f64 / 128.0
    }
    /// Decrease factor.
    pub fn beta(&self) -> f64 {
        self.beta as f64 / 128.0
    }
    pub fn min_rtt_jiffies(&self) -> u32 {
        self.min_rtt
    }
    pub fn max_rtt_jiffies(&self) -> u32 {
        self.max_rtt
    }
}

impl CongestionControl for Htcp {
    fn name(&self) -> &str {
        "htcp"
    }

    fn init(&mut self, tp: &mut TcpSock) {
        *self = Htcp::new(self.cfg.clone());
        self.last_cong = tp.jiffies;
    }

    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        self.param_update(tp.jiffies, tp.hz);
        ((tp.cwnd.wrapping_mul(self.beta as u32)) >> 7).max(2)
    }

    fn cong_avoid(&mut self, tp: &mut TcpSock, _ack: u32, acked: u32) {
        if !tp.is_cwnd_limited() {
            return;
        }
        if tp.in_slow_start() {
            // Linux drops the leftover of the crossing ACK here.
            tp.slow_start(acked);
            return;
        }
        // cwnd += alpha / cwnd per packet, counted in the packets of each ACK.
        if (tp.cwnd_cnt.wrapping_mul(self.alpha)) >> 7 >= tp.cwnd {
            if tp.cwnd < tp.cwnd_clamp {
                tp.cwnd += 1;
            }
            tp.cwnd_cnt = 0;
            self.alpha_update(tp.jiffies, tp.hz);
        } else {
            tp.cwnd_cnt += self.pkts_acked as u32;
        }
        self.pkts_acked = 1;
    }

    fn has_cong_avoid(&self) -> bool {
        true
    }

    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        if self.undo_last_cong != 0 {
            self.last_cong = self.undo_last_cong;
            self.max_rtt = self.undo_max_rtt;
            self.old_max_b = self.undo_old_max_b;
            self.undo_last_cong = 0;
        }
        tp.reno_undo_cwnd()
    }

    fn set_state(&mut self, tp: &mut TcpSock, new_state: CaState) {
        match new_state {
            CaState::Open => {
                // The reduction stood: Δ counts from the end of the episode.
                if self.undo_last_cong != 0 {
                    self.last_cong = tp.jiffies;
                    self.undo_last_cong = 0;
                }
            }
            CaState::Cwr | CaState::Recovery | CaState::Loss => self.reset(tp.jiffies),
            CaState::Disorder => {}
        }
    }

    /// Linux `measure_achieved_throughput`.
    fn pkts_acked(&mut self, tp: &mut TcpSock, sample: &AckSample) {
        let now = tp.jiffies;
        if tp.ca_state == CaState::Open {
            self.pkts_acked = sample.pkts_acked as u16;
        }
        if sample.rtt_us > 0 {
            self.measure_rtt(tp, usecs_to_jiffies(sample.rtt_us as u64, tp.hz) as u32);
        }
        if !self.cfg.use_bandwidth_switch {
            return;
        }
        if !matches!(tp.ca_state, CaState::Open | CaState::Disorder) {
            self.packetcount = 0;
            self.lasttime = now;
            return;
        }
        self.packetcount = self.packetcount.wrapping_add(sample.pkts_acked);
        let alpha_pkts = if self.alpha >> 7 != 0 { self.alpha >> 7 } else { 1 };
        let elapsed = now.wrapping_sub(self.lasttime);
        if self.packetcount >= tp.cwnd.wrapping_sub(alpha_pkts) && elapsed >= self.min_rtt && self.min_rtt > 0 {
            let cur_bi = self.packetcount.wrapping_mul(tp.hz) / elapsed;
            if self.cong_time(now) / self.min_rtt <= 3 {
                // Just after a reduction: restart the estimates.
                self.min_b = cur_bi;
                self.max_b = cur_bi;
                self.bi = cur_bi;
            } else {
                self.bi = (3u32.wrapping_mul(self.bi).wrapping_add(cur_bi)) / 4;
                if self.bi > self.max_b {
                    self.max_b = self.bi;
                }
                if self.min_b > self.max_b {
                    self.min_b = self.max_b;
                }
            }
            self.packetcount = 0;
            self.lasttime = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HZ: u32 = 250;

    fn ca_sock(cwnd: u32) -> TcpSock {
        let mut tp = crate::cc::test_sock(HZ, cwnd, 2);
        tp.jiffies = 10_000;
        tp
    }

    fn no_scaling() -> Htcp {
        Htcp::new(HtcpConfig { use_rtt_scaling: false, use_bandwidth_switch: true })
    }

    /// alpha (packets per RTT) `secs` seconds after the last congestion event.
    fn alpha_after(h: &mut Htcp, secs: f64) -> f64 {
        h.last_cong = 10_000;
        h.alpha_update(10_000 + (secs * HZ as f64).round() as u32, HZ);
        h.alpha()
    }

    #[test]
    fn alpha_is_reno_like_in_the_first_second() {
        let mut h = no_scaling();
        // factor 1 and beta 0.5: alpha = 2 x 1 x 0.5 = 1 packet per RTT.
        assert_eq!(alpha_after(&mut h, 0.0), 1.0);
        assert_eq!(alpha_after(&mut h, 0.5), 1.0);
        assert_eq!(alpha_after(&mut h, 1.0), 1.0);
    }

    #[test]
    fn alpha_grows_as_one_plus_ten_delta_plus_delta_half_squared() {
        let mut h = no_scaling();
        for delta in [1.0f64, 2.0, 5.0, 10.0, 20.0] {
            let factor = 1.0 + 10.0 * delta + (delta / 2.0).powi(2);
            let got = alpha_after(&mut h, 1.0 + delta);
            // Integer arithmetic floors the factor; beta 0.5 makes alpha = factor.
            assert_eq!(got, factor.floor(), "Δ = {delta}");
        }
        // With beta 0.75 the same factor gives alpha = 2 x factor x 0.25.
        h.beta = 96;
        assert_eq!(alpha_after(&mut h, 3.0), 22.0 * 0.5);
    }

    #[test]
    fn alpha_scales_with_min_rtt_over_100ms() {
        // Δ = 4 s: factor = 1 + 40 + 4 = 45.
        let mut h = Htcp::new(HtcpConfig::default());
        h.min_rtt = 25; // 100 ms: scale 8/8
        assert_eq!(alpha_after(&mut h, 5.0), 45.0);
        h.min_rtt = 5; // 20 ms: scale 40/8, factor 45 x 8 / 40 = 9
        assert_eq!(alpha_after(&mut h, 5.0), 9.0);
        h.min_rtt = 50; // 200 ms: scale 4/8, factor doubles
        assert_eq!(alpha_after(&mut h, 5.0), 90.0);
        h.min_rtt = 250; // 1 s: the ratio is clamped at 2
        assert_eq!(alpha_after(&mut h, 5.0), 90.0);
        h.min_rtt = 1; // 4 ms: clamped at 1/10
        assert_eq!(alpha_after(&mut h, 5.0), 4.0);
        // Never below one packet per RTT x 2 (1 - beta).
        assert_eq!(alpha_after(&mut h, 0.0), 1.0);
    }

    #[test]
    fn beta_is_min_over_max_rtt_clamped() {
        let mut h = Htcp::new(HtcpConfig { use_rtt_scaling: true, use_bandwidth_switch: false });
        h.min_rtt = 25;
        h.max_rtt = 40;
        // The first congestion event only arms the adaptive mode.
        h.beta_update(HZ);
        assert_eq!(h.beta, BETA_MIN);
        h.beta_update(HZ);
        assert_eq!(h.beta, 80); // 25 x 128 / 40
        h.max_rtt = 26;
        h.beta_update(HZ);
        assert_eq!(h.beta, BETA_MAX);
        h.max_rtt = 100;
        h.beta_update(HZ);
        assert_eq!(h.beta, BETA_MIN);
        // minRTT <= 10 ms (3 jiffies at 250 Hz): always 0.5.
        h.min_rtt = 3;
        h.max_rtt = 4;
        h.beta_update(HZ);
        assert_eq!(h.beta, BETA_MIN);
        h.min_rtt = 4;
        h.beta_update(HZ);
        assert_eq!(h.beta, BETA_MAX);
    }

    #[test]
    fn bandwidth_switch_resets_beta_on_a_twenty_percent_change() {
        let mut h = Htcp::new(HtcpConfig::default());
        h.min_rtt = 25;
        h.max_rtt = 40;
        h.max_b = 1000;
        h.beta_update(HZ); // old 0 -> 1000: a change, beta 0.5, mode off
        assert_eq!(h.beta, BETA_MIN);
        h.beta_update(HZ); // 1000 -> 1000: arms the adaptive mode
        assert_eq!(h.beta, BETA_MIN);
        h.max_b = 1190; // +19 %
        h.beta_update(HZ);
        assert_eq!(h.beta, 80);
        h.max_b = 1450; // +22 %
        h.beta_update(HZ);
        assert_eq!(h.beta, BETA_MIN);
        assert!(!h.modeswitch);
        h.max_b = 1200; // -17 %: within, but the mode must be re-armed first
        h.beta_update(HZ);
        assert_eq!(h.beta, BETA_MIN);
        h.beta_update(HZ);
        assert_eq!(h.beta, 80);
    }

    #[test]
    fn ssthresh_applies_beta_and_fades_max_rtt() {
        let mut h = Htcp::new(HtcpConfig { use_rtt_scaling: true, use_bandwidth_switch: false });
        let mut tp = ca_sock(1000);
        h.min_rtt = 25;
        h.max_rtt = 45;
        assert_eq!(h.ssthresh(&mut tp), 500);
        assert_eq!(h.max_rtt, 25 + 20 * 95 / 100);
        // Second event: beta = 25/44 x 128 = 72.
        assert_eq!(h.ssthresh(&mut tp), 1000 * 72 / 128);
        assert_eq!(h.max_rtt, 25 + 19 * 95 / 100);
    }

    #[test]
    fn max_rtt_follows_samples_in_open_within_20ms_steps() {
        let mut h = Htcp::new(HtcpConfig::default());
        let mut tp = ca_sock(100);
        let sample = |us| AckSample { pkts_acked: 2, rtt_us: us, in_flight: 0 };
        h.pkts_acked(&mut tp, &sample(100_000));
        assert_eq!((h.min_rtt, h.max_rtt), (25, 25));
        // 30 ms more in one step is ignored, 20 ms is taken.
        h.pkts_acked(&mut tp, &sample(130_000));
        assert_eq!(h.max_rtt, 25);
        h.pkts_acked(&mut tp, &sample(120_000));
        assert_eq!(h.max_rtt, 30);
        h.pkts_acked(&mut tp, &sample(130_000));
        assert_eq!(h.max_rtt, 33);
        // Not outside Open; minRTT follows everywhere.
        tp.ca_state = CaState::Recovery;
        h.pkts_acked(&mut tp, &sample(140_000));
        assert_eq!(h.max_rtt, 33);
        h.pkts_acked(&mut tp, &sample(80_000));
        assert_eq!(h.min_rtt, 20);
    }

    #[test]
    fn throughput_estimate_per_rtt() {
        let mut h = Htcp::new(HtcpConfig::default());
        let mut tp = ca_sock(100);
        h.init(&mut tp);
        h.lasttime = tp.jiffies;
        // 100 packets over 25 jiffies (100 ms) = 1000 packets/s.
        for i in 0..50 {
            tp.jiffies = 10_000 + i / 2;
            h.pkts_acked(&mut tp, &AckSample { pkts_acked: 2, rtt_us: 100_000, in_flight: 0 });
        }
        tp.jiffies = 10_025;
        h.pkts_acked(&mut tp, &AckSample { pkts_acked: 0, rtt_us: 100_000, in_flight: 0 });
        assert_eq!((h.bi, h.max_b, h.min_b), (1000, 1000, 1000));
    }

    #[test]
    fn cong_avoid_adds_one_per_cwnd_over_alpha_packets() {
        let mut h = no_scaling();
        let mut tp = ca_sock(100);
        h.init(&mut tp);
        h.alpha = 10 * ALPHA_BASE;
        // cwnd_cnt x alpha >= cwnd after 10 packets; the increment is applied on
        // the ACK after that (Linux's check-then-count order).
        for _ in 0..5 {
            h.pkts_acked(&mut tp, &AckSample { pkts_acked: 2, rtt_us: -1, in_flight: 0 });
            h.cong_avoid(&mut tp, 0, 2);
        }
        assert_eq!((tp.cwnd, tp.cwnd_cnt), (100, 10));
        h.pkts_acked(&mut tp, &AckSample { pkts_acked: 2, rtt_us: -1, in_flight: 0 });
        h.cong_avoid(&mut tp, 0, 2);
        assert_eq!((tp.cwnd, tp.cwnd_cnt), (101, 0));
        // The increment re-evaluates alpha (still in the first second: 1 packet/RTT).
        assert_eq!(h.alpha(), 1.0);
    }

    #[test]
    fn undo_restores_the_congestion_timers() {
        let mut h = Htcp::new(HtcpConfig::default());
        let mut tp = ca_sock(1000);
        h.init(&mut tp);
        h.max_rtt = 40;
        h.old_max_b = 777;
        tp.jiffies = 12_000;
        h.set_state(&mut tp, CaState::Recovery);
        h.ssthresh(&mut tp);
        assert_eq!(h.last_cong, 12_000);
        tp.prior_cwnd = 1000;
        tp.cwnd = 600;
        assert_eq!(h.undo_cwnd(&mut tp), 1000);
        assert_eq!((h.last_cong, h.max_rtt, h.old_max_b), (10_000, 40, 777));
        // A reduction that stands restarts Δ when the connection reopens.
        tp.jiffies = 13_000;
        h.set_state(&mut tp, CaState::Recovery);
        tp.jiffies = 13_100;
        h.set_state(&mut tp, CaState::Open);
        assert_eq!(h.last_cong, 13_100);
    }
}
