//! CUBIC v2.0 as Linux 2.6.18 shipped it (`net/ipv4/tcp_cubic.c`), the paper-era
//! CUBIC (Ha, Rhee, Xu 2008): beta 819/1024, a cap on the increase per RTT
//! (max_increment = 16, S_max), initial ssthresh 100, no HyStart, cnt = 50 until
//! the first loss, the increment divided by an EWMA of packets per ACK and
//! counted per ACK, undo to max(cwnd, W_max), and that release's scaling slip: K
//! is computed with C = 410/1024 but the curve is evaluated with cube_rtt_scale =
//! (bic_scale << 3) / 10 = 32, so the window moves 12.8 times less around W_max
//! than C = 0.4 intends. 2.6.18 also kept delay_min in whole jiffies where the
//! S_max cap expects eighths, which makes the cap max_increment x RTT / 0.8 s
//! packets per RTT (2 at 100 ms) instead of max_increment per 100 ms.
//! `scaling_fix = true` applies the fix, "tcp: cubic scaling error" (2.6.19 and
//! 2.6.18 -stable: cube_rtt_scale = bic_scale x 10, delay_min in jiffies x 8),
//! giving the curve and cap of 2.6.19. (v2.1, as in 2.6.24, also caps only the
//! convex side and drops initial_ssthresh to 0; not modelled.)
//!
//! Where the engine is not 2.6.18: the stack around the algorithm is the modern
//! one, so `tcp_is_cwnd_limited` is today's and there is no `min_cwnd` hook (PRR
//! replaces rate halving). Inside `cong_avoid` 2.6.18's counting is kept: slow
//! start while cwnd <= ssthresh adds one packet per ACK (tcp_abc = 0, the default
//! then) and congestion avoidance counts ACKs, not packets, which is what the
//! delayed-ACK compensation of cnt assumes. 2.6.18 took delay samples from the
//! timestamp echo, in jiffies, on non-dubious ACKs; here they are `pkts_acked`
//! RTT samples in the Open state floored to jiffies (the minimum of the kernel's
//! jiffy differences), and the 1 s blackout after an epoch start applies only
//! once there is an epoch (2.6.18 compared against epoch 0 too, which depends on
//! the machine's uptime). The cube root is 2.6.18's Newton iteration with the
//! square in 64 bits: the kernel squares in 32 bits, which overflows (and divides
//! by zero) once W_max - cwnd exceeds about 50,000 packets.

use super::params::{declare_params, CcaInfo, Params};
use super::{AckSample, CaState, CongestionControl, TcpSock};

/// Fixed-point scale of `beta` (Linux BICTCP_BETA_SCALE).
pub const BETA_SCALE: u32 = 1024;
/// Time unit of K and t is 2^-BICTCP_HZ seconds (Linux BICTCP_HZ = 10).
const BICTCP_HZ: u32 = 10;
/// The delayed-ACK ratio is kept in 1/16 packets per ACK (ACK_RATIO_SHIFT).
const ACK_RATIO_SHIFT: u32 = 4;
/// Initial ratio: two packets per ACK.
const INITIAL_DELAYED_ACK: u32 = 2 << ACK_RATIO_SHIFT;
/// cnt before the first loss ("could be aggressive in slow start").
const NO_LOSS_CNT: u32 = 50;

declare_params! {
    /// Module parameters of 2.6.18's `tcp_cubic` with their defaults then.
    pub struct Cubic2008Config {
        fast_convergence: bool = true, "release bandwidth faster when W_max shrinks";
        /// 819 = 0.8 (BICTCP_BETA_SCALE = 1024).
        beta: u32 = 819, range(1, 1023), "multiplicative decrease x 1024";
        /// Packets per 100 ms as designed (see the module doc for 2.6.18's units).
        max_increment: u32 = 16, range(1, 1 << 20), "cap on the increase per RTT (S_max)";
        /// 0 leaves the stack's.
        initial_ssthresh: u32 = 100, range(0, 1 << 30), "initial ssthresh in packets (0: infinite)";
        /// 41 -> C = 0.4.
        bic_scale: u32 = 41, range(1, 1 << 16), "C = bic_scale * 10 / 1024 packets/s^3 (for K)";
        tcp_friendliness: bool = true, "follow the emulated Reno window when it is larger";
        /// The 2.6.19 "tcp: cubic scaling error" patch.
        scaling_fix: bool = false, "apply the 2.6.19 fix of the cube scaling and delay units";
    }
}

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "cubic-2008",
        description: "CUBIC v2.0 as Linux 2.6.18 ran it: beta 0.8, S_max 16, initial ssthresh 100, no HyStart, the old cube scaling (scaling_fix: the 2.6.19 patch)",
        source: "Linux 2.6.18 net/ipv4/tcp_cubic.c (v2.0); 2.6.19 'tcp: cubic scaling error'; Ha, Rhee, Xu 2008",
        params: Cubic2008Config::catalogue(),
    }
}

pub fn build(p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Cubic2008::new(Cubic2008Config::from_params(p)))
}

/// The cube root of 2.6.18 (`cubic_root`): Newton-Raphson from 2^(bits/3)
/// until two iterates differ by at most one.
pub fn cubic_root_newton(a: u64) -> u32 {
    let bits = 64 - a.leading_zeros();
    let mut x: u32 = 1 << (bits / 3);
    // Converges in a handful of steps; the bound only guards against a cycle.
    for _ in 0..64 {
        let prev = x;
        let sq = (x as u64 * x as u64).max(1);
        x = ((2 * x as u64 + a / sq) / 3) as u32;
        if (prev as i64 - x as i64).abs() <= 1 {
            break;
        }
    }
    x
}

pub struct Cubic2008 {
    cfg: Cubic2008Config,
    /// Derived constants (2.6.18 `cubictcp_register`).
    beta_scale: u32,
    cube_rtt_scale: u32,
    cube_factor: u64,

    /// ACKs per cwnd increment (after the delayed-ACK scaling).
    cnt: u32,
    last_max_cwnd: u32,
    /// cwnd at the last loss; 0 until the first one.
    loss_cwnd: u32,
    last_cwnd: u32,
    last_time: u32,
    bic_origin_point: u32,
    /// K in units of 2^-10 s.
    bic_k: u32,
    /// Minimum delay in jiffies (x 8 with `scaling_fix`); 0 = none.
    delay_min: u32,
    /// Jiffies at the start of the current epoch, 0 = none.
    epoch_start: u32,
    ack_cnt: u32,
    /// Emulated Reno cwnd.
    tcp_cwnd: u32,
    /// Packets per ACK x 16 (EWMA with weight 1/16).
    delayed_ack: u32,
}

impl Cubic2008 {
    pub fn new(cfg: Cubic2008Config) -> Cubic2008 {
        let beta_scale = 8 * (BETA_SCALE + cfg.beta) / 3 / (BETA_SCALE - cfg.beta);
        let cube_rtt_scale = if cfg.scaling_fix { cfg.bic_scale * 10 } else { (cfg.bic_scale << 3) / 10 };
        let cube_factor = (1u64 << (10 + 3 * BICTCP_HZ)) / (cfg.bic_scale as u64 * 10);
        Cubic2008 {
            cfg,
            beta_scale,
            cube_rtt_scale,
            cube_factor,
            cnt: 0,
            last_max_cwnd: 0,
            loss_cwnd: 0,
            last_cwnd: 0,
            last_time: 0,
            bic_origin_point: 0,
            bic_k: 0,
            delay_min: 0,
            epoch_start: 0,
            ack_cnt: 0,
            tcp_cwnd: 0,
            delayed_ack: INITIAL_DELAYED_ACK,
        }
    }

    /// 2.6.18 `bictcp_reset`.
    fn reset(&mut self) {
        self.cnt = 0;
        self.last_max_cwnd = 0;
        self.loss_cwnd = 0;
        self.last_cwnd = 0;
        self.last_time = 0;
        self.bic_origin_point = 0;
        self.bic_k = 0;
        self.delay_min = 0;
        self.epoch_start = 0;
        self.delayed_ack = INITIAL_DELAYED_ACK;
        self.ack_cnt = 0;
        self.tcp_cwnd = 0;
    }

    /// delay_min in whole jiffies, as the curve's look-ahead uses it.
    fn delay_min_jiffies(&self) -> u32 {
        if self.cfg.scaling_fix {
            self.delay_min >> 3
        } else {
            self.delay_min
        }
    }

    /// 2.6.18 `bictcp_update`: recompute `cnt` for this ACK.
    fn update(&mut self, cwnd: u32, now: u32, hz: u32) {
        self.ack_cnt = self.ack_cnt.wrapping_add(1);
        if self.last_cwnd == cwnd && (now.wrapping_sub(self.last_time) as i32) <= (hz / 32) as i32 {
            return;
        }
        self.last_cwnd = cwnd;
        self.last_time = now;

        if self.epoch_start == 0 {
            self.epoch_start = now;
            self.ack_cnt = 1;
            self.tcp_cwnd = cwnd;
            if self.last_max_cwnd <= cwnd {
                self.bic_k = 0;
                self.bic_origin_point = cwnd;
            } else {
                self.bic_k = cubic_root_newton(self.cube_factor.wrapping_mul((self.last_max_cwnd - cwnd) as u64));
                self.bic_origin_point = self.last_max_cwnd;
            }
        }

        // One delay_min ahead, in 2^-10 s; 32-bit arithmetic like the kernel's.
        let t = (now.wrapping_add(self.delay_min_jiffies()).wrapping_sub(self.epoch_start) << BICTCP_HZ) / hz;
        let offs = self.bic_k.abs_diff(t) as u64;
        let delta = ((self.cube_rtt_scale as u64).wrapping_mul(offs).wrapping_mul(offs).wrapping_mul(offs)
            >> (10 + 3 * BICTCP_HZ)) as u32;
        let bic_target = if t < self.bic_k {
            self.bic_origin_point.wrapping_sub(delta)
        } else {
            self.bic_origin_point.wrapping_add(delta)
        };
        self.cnt = if bic_target > cwnd { cwnd / (bic_target - cwnd) } else { 100 * cwnd };

        if self.delay_min > 0 {
            // "max increment = Smax * rtt / 0.1", in the kernel's units (see the module doc).
            let min_cnt = cwnd.wrapping_mul(hz).wrapping_mul(8) / (10 * self.cfg.max_increment * self.delay_min);
            if self.cnt < min_cnt {
                self.cnt = min_cnt;
            }
        }

        if self.loss_cwnd == 0 {
            self.cnt = NO_LOSS_CNT;
        }

        if self.cfg.tcp_friendliness {
            let per_packet = (cwnd * self.beta_scale) >> 3;
            if per_packet > 0 {
                while self.ack_cnt > per_packet {
                    self.ack_cnt -= per_packet;
                    self.tcp_cwnd += 1;
                }
            }
            if self.tcp_cwnd > cwnd {
                let max_cnt = cwnd / (self.tcp_cwnd - cwnd);
                if self.cnt > max_cnt {
                    self.cnt = max_cnt;
                }
            }
        }

        self.cnt = ((self.cnt << ACK_RATIO_SHIFT) / self.delayed_ack.max(1)).max(1);
    }

    pub fn cnt(&self) -> u32 {
        self.cnt
    }
    pub fn w_max(&self) -> u32 {
        self.last_max_cwnd
    }
    /// K in seconds.
    pub fn k_secs(&self) -> f64 {
        self.bic_k as f64 / 1024.0
    }
}

impl CongestionControl for Cubic2008 {
    fn name(&self) -> &str {
        "cubic-2008"
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
        self.loss_cwnd = cwnd;
        ((cwnd as u64 * self.cfg.beta as u64 / BETA_SCALE as u64) as u32).max(2)
    }

    fn cong_avoid(&mut self, tp: &mut TcpSock, _ack: u32, acked: u32) {
        if acked == 0 || !tp.is_cwnd_limited() {
            return;
        }
        if tp.cwnd <= tp.ssthresh {
            // 2.6.18 tcp_slow_start with tcp_abc = 0: one packet per ACK.
            if tp.cwnd < tp.cwnd_clamp {
                tp.cwnd += 1;
            }
            return;
        }
        self.update(tp.cwnd, tp.jiffies, tp.hz);
        // One ACK counted per call; the increment comes on the ACK after cnt.
        if tp.cwnd_cnt >= self.cnt {
            if tp.cwnd < tp.cwnd_clamp {
                tp.cwnd += 1;
            }
            tp.cwnd_cnt = 0;
        } else {
            tp.cwnd_cnt += 1;
        }
    }

    fn has_cong_avoid(&self) -> bool {
        true
    }

    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        tp.cwnd.max(self.last_max_cwnd)
    }

    fn set_state(&mut self, _tp: &mut TcpSock, new_state: CaState) {
        if new_state == CaState::Loss {
            self.reset();
        }
    }

    fn pkts_acked(&mut self, tp: &mut TcpSock, sample: &AckSample) {
        if sample.pkts_acked == 0 || tp.ca_state != CaState::Open {
            return;
        }
        // ratio = 15/16 ratio + 1/16 sample, in 32-bit wrapping arithmetic.
        self.delayed_ack =
            self.delayed_ack.wrapping_add(sample.pkts_acked.wrapping_sub(self.delayed_ack >> ACK_RATIO_SHIFT));

        if sample.rtt_us < 0 {
            return;
        }
        // No delay samples for a second after an epoch starts (right after recovery).
        if self.epoch_start != 0 && (tp.jiffies.wrapping_sub(self.epoch_start) as i32) < tp.hz as i32 {
            return;
        }
        let jiffies = (sample.rtt_us as u64 * tp.hz as u64 / 1_000_000) as u32;
        let mut delay = if self.cfg.scaling_fix { jiffies << 3 } else { jiffies };
        if delay == 0 {
            delay = 1;
        }
        if self.delay_min == 0 || self.delay_min > delay {
            self.delay_min = delay;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::cubic::{Cubic, CubicConfig};
    use super::*;

    const HZ: u32 = 250;

    fn ca_sock(cwnd: u32) -> TcpSock {
        let mut tp = crate::cc::test_sock(HZ, cwnd, 2);
        tp.jiffies = 10_000;
        tp
    }

    #[test]
    fn derived_constants_of_2_6_18() {
        let c = Cubic2008::new(Cubic2008Config::default());
        assert_eq!(c.beta_scale, 23);
        assert_eq!(c.cube_rtt_scale, 32);
        assert_eq!(c.cube_factor, 2_681_735_677);
        let fixed = Cubic2008::new(Cubic2008Config { scaling_fix: true, ..Default::default() });
        assert_eq!(fixed.cube_rtt_scale, 410);
    }

    #[test]
    fn newton_cube_root_within_one() {
        for a in [1u64, 8, 27, 1000, 123_456_789, 2_681_735_677 * 300, 1 << 46] {
            let exact = (a as f64).cbrt();
            let got = cubic_root_newton(a) as f64;
            assert!((got - exact).abs() <= 1.0, "a={a}: {got} vs {exact}");
        }
        assert_eq!(cubic_root_newton(0), 0);
        // K for W_max - cwnd = 200 with C = 0.4: cbrt(200 / 0.4004) = 7.94 s.
        let k = cubic_root_newton(2_681_735_677 * 200) as f64 / 1024.0;
        assert!((k - 7.94).abs() < 0.01, "K = {k}");
    }

    #[test]
    fn beta_0_8_and_fast_convergence() {
        let mut c = Cubic2008::new(Cubic2008Config::default());
        let mut tp = ca_sock(1000);
        assert_eq!(c.ssthresh(&mut tp), 799);
        assert_eq!(c.w_max(), 1000);
        tp.cwnd = 800;
        assert_eq!(c.ssthresh(&mut tp), 639);
        assert_eq!(c.w_max(), 800 * 1843 / 2048);
        // Undo goes back to W_max, not to the cwnd before the reduction.
        tp.cwnd = 639;
        tp.prior_cwnd = 800;
        assert_eq!(c.undo_cwnd(&mut tp), 719);
    }

    #[test]
    fn initial_ssthresh_100_and_slow_start_per_ack() {
        let mut c = Cubic2008::new(Cubic2008Config::default());
        let mut tp = TcpSock::new(1448, HZ, 10);
        tp.is_cwnd_limited = true;
        c.init(&mut tp);
        assert_eq!(tp.ssthresh, 100);
        // Delayed ACKs covering two packets still add one packet each.
        for _ in 0..91 {
            c.cong_avoid(&mut tp, 0, 2);
        }
        assert_eq!(tp.cwnd, 101);
    }

    #[test]
    fn fifty_packets_per_increment_before_the_first_loss() {
        // cnt = 50 packets, / (32/16) = 25 ACKs, applied on the 26th ACK.
        let mut c = Cubic2008::new(Cubic2008Config::default());
        let mut tp = ca_sock(1000);
        for _ in 0..25 {
            c.cong_avoid(&mut tp, 0, 2);
        }
        assert_eq!(tp.cwnd, 1000);
        c.cong_avoid(&mut tp, 0, 2);
        assert_eq!(tp.cwnd, 1001);
        assert_eq!(c.cnt(), 25);
    }

    /// Grows cwnd from `cwnd` after a loss at `w_max`, with `delay_min` set, one
    /// ACK (two packets) per `ack_gap_us` for `secs`; returns the packets gained.
    fn growth_2008(cfg: Cubic2008Config, w_max: u32, cwnd: u32, delay_min: u32, ack_gap_us: u64, secs: f64) -> u32 {
        let mut c = Cubic2008::new(cfg);
        let mut tp = ca_sock(w_max);
        c.ssthresh(&mut tp);
        tp.cwnd = cwnd;
        c.delay_min = delay_min;
        let acks = (secs * 1e6 / ack_gap_us as f64) as u64;
        for i in 0..acks {
            tp.jiffies = 10_000 + (i * ack_gap_us * HZ as u64 / 1_000_000) as u32;
            c.cong_avoid(&mut tp, 0, 2);
        }
        tp.cwnd - cwnd
    }

    #[test]
    fn smax_cap_in_2_6_18_units_and_after_the_fix() {
        // RTT 100 ms (25 jiffies), cwnd 1000 far below W_max 2000, 500 ACKs per
        // RTT for 10 RTTs. The curve asks for far more than S_max, so the cap
        // rules. The cap is a floor on cnt proportional to cwnd, and the ACK
        // after cnt carries the increment, so the gain is a little under nominal.
        let within = |gained: u32, nominal: f64| (0.85 * nominal..=nominal).contains(&(gained as f64));
        // 2.6.18: delay_min 25 jiffies -> 16 x 0.1 / 0.8 = 2 packets per RTT.
        let gained = growth_2008(Cubic2008Config::default(), 2000, 1000, 25, 200, 1.0);
        assert!(within(gained, 20.0), "2.6.18 gained {gained} in 10 RTTs");
        // With the fix delay_min is 25 x 8: 16 packets per 100 ms.
        let fixed = Cubic2008Config { scaling_fix: true, ..Default::default() };
        let gained = growth_2008(fixed, 2000, 1000, 25 << 3, 200, 1.0);
        assert!(within(gained, 160.0), "fixed gained {gained} in 10 RTTs");
    }

    #[test]
    fn convex_growth_is_12_8_times_slower_than_cubic() {
        // Both start an epoch at W_max = 1000 (K = 0) and climb the convex side for
        // 8 s with one ACK of two packets per ms, Reno emulation and the S_max cap
        // out of the way. CUBIC reaches 0.4 x 8^3 = 205 packets above W_max;
        // 2.6.18 evaluates the curve with 32/1024 instead of 410/1024.
        let cfg = Cubic2008Config { tcp_friendliness: false, ..Default::default() };
        let old = growth_2008(cfg.clone(), 1000, 1000, 0, 1000, 8.0);
        let fixed = growth_2008(Cubic2008Config { scaling_fix: true, ..cfg }, 1000, 1000, 0, 1000, 8.0);

        let mut cubic = Cubic::new(CubicConfig { tcp_friendliness: false, hystart: false, ..Default::default() });
        let mut tp = ca_sock(1000);
        cubic.ssthresh(&mut tp);
        tp.cwnd = 1000;
        for i in 0..8000u64 {
            tp.jiffies = 10_000 + (i * HZ as u64 / 1000) as u32;
            cubic.cong_avoid(&mut tp, 0, 2);
        }
        let modern = tp.cwnd - 1000;
        eprintln!("convex growth over 8 s: cubic {modern}, cubic-2008 {old}, with the fix {fixed}");
        // cwnd trails the curve by about one window of ACKs (0.6 s here), so it
        // ends between the curve at 7.4 s (162) and at 8 s (205).
        assert!((150..=205).contains(&modern), "cubic {modern}");
        let ratio = modern as f64 / old as f64;
        assert!((10.0..=16.0).contains(&ratio), "ratio {ratio:.1} (old {old})");
        // The fix restores CUBIC's curve (same C; ACK counting differs slightly).
        assert!((fixed as f64 / modern as f64 - 1.0).abs() < 0.1, "fixed {fixed} vs {modern}");
    }

    #[test]
    fn delay_samples_only_in_open_and_outside_the_blackout() {
        let mut c = Cubic2008::new(Cubic2008Config::default());
        let mut tp = ca_sock(100);
        let s = |us| AckSample { pkts_acked: 2, rtt_us: us, in_flight: 0 };
        c.pkts_acked(&mut tp, &s(82_000));
        // 82 ms at 250 Hz = 20.5 jiffies, floored.
        assert_eq!(c.delay_min, 20);
        c.epoch_start = tp.jiffies - 10;
        c.pkts_acked(&mut tp, &s(50_000));
        assert_eq!(c.delay_min, 20);
        c.epoch_start = tp.jiffies - HZ;
        tp.ca_state = CaState::Disorder;
        c.pkts_acked(&mut tp, &s(50_000));
        assert_eq!(c.delay_min, 20);
        tp.ca_state = CaState::Open;
        c.pkts_acked(&mut tp, &s(50_000));
        assert_eq!(c.delay_min, 12);
        let mut fixed = Cubic2008::new(Cubic2008Config { scaling_fix: true, ..Default::default() });
        fixed.pkts_acked(&mut tp, &s(82_000));
        assert_eq!(fixed.delay_min, 20 << 3);
    }

    #[test]
    fn loss_state_resets_everything() {
        let mut c = Cubic2008::new(Cubic2008Config::default());
        let mut tp = ca_sock(1000);
        c.ssthresh(&mut tp);
        c.delay_min = 20;
        c.set_state(&mut tp, CaState::Loss);
        assert_eq!((c.w_max(), c.loss_cwnd, c.delay_min, c.delayed_ack), (0, 0, 0, 32));
    }
}
