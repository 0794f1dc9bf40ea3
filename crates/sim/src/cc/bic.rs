//! BIC as Linux runs it (`net/ipv4/tcp_bic.c`; Xu, Harfoush, Rhee, "Binary
//! Increase Congestion Control for Fast, Long Distance Networks", INFOCOM 2004):
//! below the window of the last loss (W_max) cwnd binary-searches towards it,
//! closing a quarter of the distance per RTT but at most 16 and at least 0.2
//! packets; above W_max it probes slowly, then accelerates to 16 packets per
//! RTT. Small windows (<= 14) behave like Reno. A loss keeps 819/1024 of cwnd,
//! and fast convergence lowers W_max when the window shrank since the last
//! loss. The per-RTT increments are divided by an EWMA of packets per ACK and
//! then applied per packet acknowledged, exactly as Linux does (so with delayed
//! ACKs the window grows twice as fast as the paper's increments; see
//! `delayed_ack_ratio_speeds_growth`).

use super::params::{declare_params, CcaInfo, Params};
use super::{AckSample, CaState, CongestionControl, TcpSock};

/// Fixed-point scale of `beta` (Linux BICTCP_BETA_SCALE).
pub const BETA_SCALE: u32 = 1024;
/// Binary search divides the distance to W_max by this (Linux BICTCP_B).
pub const BICTCP_B: u32 = 4;
/// The delayed-ACK ratio is kept in 1/16 packets per ACK (Linux ACK_RATIO_SHIFT).
const ACK_RATIO_SHIFT: u32 = 4;
/// Initial ratio: two packets per ACK.
const INITIAL_DELAYED_ACK: u32 = 2 << ACK_RATIO_SHIFT;
/// Before the first loss, at least 5 % growth per RTT (cnt <= 20).
const NO_LOSS_MAX_CNT: u32 = 20;

declare_params! {
    /// Module parameters of `tcp_bic` with their Linux defaults.
    pub struct BicConfig {
        fast_convergence: bool = true, "lower W_max when a loss comes below the previous one";
        /// 819 = 0.8 (BICTCP_BETA_SCALE = 1024).
        beta: u32 = 819, range(1, 1023), "multiplicative decrease x 1024";
        /// Also caps the increase during max probing.
        max_increment: u32 = 16, range(1, 1 << 20), "largest increase per RTT (S_max), packets";
        low_window: u32 = 14, range(0, 1 << 30), "Reno behaviour up to this cwnd";
        /// The increment near W_max is BICTCP_B / smooth_part.
        smooth_part: u32 = 20, range(1, 1 << 20), "RTTs spent within BICTCP_B packets of W_max";
        /// 0 leaves the stack's.
        initial_ssthresh: u32 = 0, range(0, 1 << 30), "initial ssthresh in packets (0: infinite)";
    }
}

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "bic",
        description:
            "BIC: binary search towards the last loss window, max probing above it, beta 0.8, fast convergence",
        source: "Linux net/ipv4/tcp_bic.c; Xu, Harfoush, Rhee, INFOCOM 2004",
        params: BicConfig::catalogue(),
    }
}

pub fn build(p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Bic::new(BicConfig::from_params(p)))
}

pub struct Bic {
    cfg: BicConfig,
    /// Packets acknowledged per cwnd increment.
    cnt: u32,
    last_max_cwnd: u32,
    last_cwnd: u32,
    /// Jiffies at which `cnt` was last recomputed.
    last_time: u32,
    /// Jiffies at the start of the current epoch, 0 = none.
    epoch_start: u32,
    /// Packets per ACK x 16 (EWMA with weight 1/16).
    delayed_ack: u32,
}

impl Bic {
    pub fn new(cfg: BicConfig) -> Bic {
        Bic {
            cfg,
            cnt: 0,
            last_max_cwnd: 0,
            last_cwnd: 0,
            last_time: 0,
            epoch_start: 0,
            delayed_ack: INITIAL_DELAYED_ACK,
        }
    }

    /// Linux `bictcp_reset`.
    fn reset(&mut self) {
        *self = Bic::new(self.cfg.clone());
    }

    /// Linux `bictcp_update`: recompute `cnt` for the current window.
    fn update(&mut self, cwnd: u32, now: u32, hz: u32) {
        // Recompute at most every HZ/32 while cwnd is unchanged.
        if self.last_cwnd == cwnd && (now.wrapping_sub(self.last_time) as i32) <= (hz / 32) as i32 {
            return;
        }
        self.last_cwnd = cwnd;
        self.last_time = now;
        if self.epoch_start == 0 {
            self.epoch_start = now;
        }

        let c = &self.cfg;
        if cwnd <= c.low_window {
            // Reno, without the delayed-ACK scaling below.
            self.cnt = cwnd;
            return;
        }

        let w_max = self.last_max_cwnd;
        self.cnt = if cwnd < w_max {
            // Binary search: close 1/B of the distance per RTT.
            let dist = (w_max - cwnd) / BICTCP_B;
            if dist > c.max_increment {
                cwnd / c.max_increment
            } else if dist <= 1 {
                cwnd * c.smooth_part / BICTCP_B
            } else {
                cwnd / dist
            }
        } else if cwnd < w_max + BICTCP_B {
            // Max probing: slow right above W_max ...
            cwnd * c.smooth_part / BICTCP_B
        } else if cwnd < w_max + c.max_increment * (BICTCP_B - 1) {
            // ... then (cwnd - W_max) / (B - 1) per RTT ...
            cwnd * (BICTCP_B - 1) / (cwnd - w_max)
        } else {
            // ... capped at max_increment.
            cwnd / c.max_increment
        };

        if w_max == 0 && self.cnt > NO_LOSS_MAX_CNT {
            self.cnt = NO_LOSS_MAX_CNT;
        }

        self.cnt = ((self.cnt << ACK_RATIO_SHIFT) / self.delayed_ack.max(1)).max(1);
    }

    pub fn cnt(&self) -> u32 {
        self.cnt
    }
    pub fn w_max(&self) -> u32 {
        self.last_max_cwnd
    }
    /// Packets per ACK x 16.
    pub fn delayed_ack(&self) -> u32 {
        self.delayed_ack
    }
}

impl CongestionControl for Bic {
    fn name(&self) -> &str {
        "bic"
    }

    fn init(&mut self, tp: &mut TcpSock) {
        self.reset();
        if self.cfg.initial_ssthresh != 0 {
            tp.ssthresh = self.cfg.initial_ssthresh;
        }
    }

    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        self.epoch_start = 0;
        let cwnd = tp.cwnd;
        self.last_max_cwnd = if cwnd < self.last_max_cwnd && self.cfg.fast_convergence {
            (cwnd as u64 * (BETA_SCALE + self.cfg.beta) as u64 / (2 * BETA_SCALE) as u64) as u32
        } else {
            cwnd
        };
        if cwnd <= self.cfg.low_window {
            (cwnd >> 1).max(2)
        } else {
            ((cwnd as u64 * self.cfg.beta as u64 / BETA_SCALE as u64) as u32).max(2)
        }
    }

    fn cong_avoid(&mut self, tp: &mut TcpSock, _ack: u32, acked: u32) {
        if !tp.is_cwnd_limited() {
            return;
        }
        let mut acked = acked;
        if tp.in_slow_start() {
            acked = tp.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        self.update(tp.cwnd, tp.jiffies, tp.hz);
        tp.cong_avoid_ai(self.cnt, acked);
    }

    fn has_cong_avoid(&self) -> bool {
        true
    }

    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        tp.reno_undo_cwnd()
    }

    fn set_state(&mut self, _tp: &mut TcpSock, new_state: CaState) {
        if new_state == CaState::Loss {
            self.reset();
        }
    }

    fn pkts_acked(&mut self, tp: &mut TcpSock, sample: &AckSample) {
        // ratio = 15/16 ratio + 1/16 sample, only while nothing is amiss; in
        // 32-bit wrapping arithmetic like the kernel's.
        if tp.ca_state == CaState::Open {
            self.delayed_ack =
                self.delayed_ack.wrapping_add(sample.pkts_acked.wrapping_sub(self.delayed_ack >> ACK_RATIO_SHIFT));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca_sock(cwnd: u32) -> TcpSock {
        let mut tp = crate::cc::test_sock(250, cwnd, 2);
        tp.jiffies = 1000;
        tp
    }

    /// cnt (in packets acknowledged per +1, after the delayed-ACK scaling with
    /// the initial ratio of 2) for `cwnd` with the given W_max.
    fn cnt_at(cwnd: u32, w_max: u32) -> u32 {
        let mut b = Bic::new(BicConfig::default());
        b.last_max_cwnd = w_max;
        b.update(cwnd, 1000, 250);
        b.cnt
    }

    #[test]
    fn binary_search_below_w_max() {
        // Far below: linear at max_increment = 16 per RTT: cnt = 900/16 = 56, /2.
        assert_eq!(cnt_at(900, 1000), 28);
        // Within 4 x 16 of W_max: a quarter of the distance, (1000-960)/4 = 10 per RTT.
        assert_eq!(cnt_at(960, 1000), 48);
        // Within B: the smooth part, 4/20 = 0.2 packets per RTT.
        assert_eq!(cnt_at(997, 1000), 997 * 5 / 2);
        // The increment per RTT (cwnd / cnt before scaling) shrinks towards W_max.
        let per_rtt = |w: u32| w as f64 / (2 * cnt_at(w, 1000)) as f64;
        assert!(per_rtt(900) > per_rtt(960) && per_rtt(960) > per_rtt(990) && per_rtt(990) > per_rtt(998));
    }

    #[test]
    fn max_probing_above_w_max() {
        // Just above W_max: 0.2 packets per RTT.
        assert_eq!(cnt_at(1002, 1000), 1002 * 5 / 2);
        // Then (cwnd - W_max)/3 per RTT: 20 above gives cnt = 3 x 1020/20 = 153.
        assert_eq!(cnt_at(1020, 1000), 76);
        // From W_max + 48 on, linear at 16 per RTT.
        assert_eq!(cnt_at(1048, 1000), 1048 / 16 / 2);
        assert_eq!(cnt_at(1100, 1000), 34);
        // Acceleration: the further above, the faster.
        assert!(cnt_at(1002, 1000) > cnt_at(1010, 1000) && cnt_at(1010, 1000) > cnt_at(1030, 1000));
    }

    #[test]
    fn reno_region_at_low_windows() {
        // cnt = cwnd, with no delayed-ACK scaling, whatever W_max is.
        assert_eq!(cnt_at(14, 1000), 14);
        assert_eq!(cnt_at(10, 0), 10);
        let mut b = Bic::new(BicConfig::default());
        let mut tp = ca_sock(14);
        b.last_max_cwnd = 20;
        assert_eq!(b.ssthresh(&mut tp), 7);
        tp.cwnd = 15;
        assert_eq!(b.ssthresh(&mut tp), 15 * 819 / 1024);
    }

    #[test]
    fn at_least_five_percent_per_rtt_before_the_first_loss() {
        // Without W_max, cwnd 1000 would get cnt = 1000/16 = 62; it is clamped to 20.
        assert_eq!(cnt_at(1000, 0), 10);
        assert_eq!(cnt_at(200, 0), 200 / 16 / 2);
    }

    #[test]
    fn decrease_and_fast_convergence() {
        let mut b = Bic::new(BicConfig::default());
        let mut tp = ca_sock(1000);
        assert_eq!(b.ssthresh(&mut tp), 799);
        assert_eq!(b.w_max(), 1000);
        // A loss below the previous W_max: W_max = cwnd (1 + beta) / 2.
        tp.cwnd = 800;
        assert_eq!(b.ssthresh(&mut tp), 639);
        assert_eq!(b.w_max(), 800 * 1843 / 2048);
        // Without fast convergence W_max is the loss window.
        let mut b = Bic::new(BicConfig { fast_convergence: false, ..BicConfig::default() });
        tp.cwnd = 1000;
        b.ssthresh(&mut tp);
        tp.cwnd = 800;
        b.ssthresh(&mut tp);
        assert_eq!(b.w_max(), 800);
    }

    #[test]
    fn delayed_ack_ratio_follows_acks_only_in_open() {
        let mut b = Bic::new(BicConfig::default());
        let mut tp = ca_sock(100);
        let one = AckSample { pkts_acked: 1, rtt_us: 1000, in_flight: 0 };
        for _ in 0..200 {
            b.pkts_acked(&mut tp, &one);
        }
        // The EWMA settles where delayed_ack >> 4 == 1, i.e. within [16, 32).
        assert!((16..32).contains(&b.delayed_ack()), "{}", b.delayed_ack());
        let settled = b.delayed_ack();
        tp.ca_state = CaState::Recovery;
        let four = AckSample { pkts_acked: 4, rtt_us: 1000, in_flight: 0 };
        b.pkts_acked(&mut tp, &four);
        assert_eq!(b.delayed_ack(), settled);
        tp.ca_state = CaState::Open;
        b.pkts_acked(&mut tp, &four);
        assert_eq!(b.delayed_ack(), settled + 4 - (settled >> 4));
    }

    #[test]
    fn delayed_ack_ratio_speeds_growth() {
        // cwnd 900, W_max 1000: 16 packets per RTT intended, cnt = 56 / (32/16) = 28,
        // and Linux applies it per packet acknowledged: +1 every 28 packets, i.e.
        // 32 per window of 900 packets.
        let mut b = Bic::new(BicConfig::default());
        b.last_max_cwnd = 1000;
        let mut tp = ca_sock(900);
        for _ in 0..14 {
            b.cong_avoid(&mut tp, 0, 2);
        }
        assert_eq!(tp.cwnd, 901);
        assert_eq!(b.cnt(), 28);
    }

    #[test]
    fn loss_state_resets_everything() {
        let mut b = Bic::new(BicConfig::default());
        let mut tp = ca_sock(1000);
        b.ssthresh(&mut tp);
        b.delayed_ack = 20;
        b.set_state(&mut tp, CaState::Recovery);
        assert_eq!(b.w_max(), 1000);
        b.set_state(&mut tp, CaState::Loss);
        assert_eq!(b.w_max(), 0);
        assert_eq!(b.delayed_ack(), 32);
    }

    #[test]
    fn recomputes_at_most_every_hz_over_32_with_an_unchanged_window() {
        let mut b = Bic::new(BicConfig::default());
        b.last_max_cwnd = 1000;
        b.update(900, 1000, 250);
        assert_eq!(b.cnt, 28);
        // W_max changes but cwnd does not: cnt is kept for 250/32 = 7 jiffies.
        b.last_max_cwnd = 940;
        b.update(900, 1007, 250);
        assert_eq!(b.cnt, 28);
        b.update(900, 1008, 250);
        assert_eq!(b.cnt, 45);
    }
}
