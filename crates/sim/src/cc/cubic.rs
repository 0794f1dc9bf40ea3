//! CUBIC as in current Linux (`net/ipv4/tcp_cubic.c`, "v2.3"; RFC 9438 for
//! the model): the window follows W(t) = C (t - K)^3 + W_max in fixed point with
//! a jiffies time base, one min-RTT of look-ahead, a Reno-friendly region, fast
//! convergence, and the original HyStart (ACK-train and delay-increase tests)
//! to leave slow start. Integer maths and constants follow the kernel so that
//! rounding (e.g. beta_scale = 15, the cube-root table) is the kernel's.

use super::params::{declare_params, CcaInfo, Params};
use super::{AckSample, CaEvent, CaState, CongestionControl, PacingStatus, TcpSock};
use crate::packet::seq_after;
use crate::units::usecs_to_jiffies;

/// Fixed-point scale of `beta` (Linux BICTCP_BETA_SCALE).
pub const BETA_SCALE: u32 = 1024;
/// Time unit of K and t is 2^-BICTCP_HZ seconds (Linux BICTCP_HZ = 10).
const BICTCP_HZ: u32 = 10;
/// Linux HYSTART_ACK_TRAIN / HYSTART_DELAY bits of `hystart_detect`.
pub const HYSTART_ACK_TRAIN: u32 = 1;
pub const HYSTART_DELAY: u32 = 2;
/// RTT samples per round before the delay test may fire (HYSTART_MIN_SAMPLES).
const HYSTART_MIN_SAMPLES: u32 = 8;
/// Clamp of the delay-increase threshold, us (HYSTART_DELAY_MIN / _MAX).
const HYSTART_DELAY_MIN_US: u32 = 4000;
const HYSTART_DELAY_MAX_US: u32 = 16000;
/// Linux GSO_MAX_SIZE default, used by `hystart_ack_delay`.
const GSO_MAX_SIZE: u64 = 65536;

declare_params! {
    /// Module parameters of `tcp_cubic` (its `module_param`s) with their Linux defaults.
    pub struct CubicConfig {
        fast_convergence: bool = true, "release bandwidth faster when W_max shrinks";
        /// 717 = 0.7 (BICTCP_BETA_SCALE = 1024).
        beta: u32 = 717, range(1, 1023), "multiplicative decrease x 1024";
        initial_ssthresh: u32 = 0, range(0, 1 << 30),
            "initial ssthresh in packets when HyStart is off (0: infinite)";
        /// 41 -> C = 0.4.
        bic_scale: u32 = 41, range(1, 1 << 16), "C = bic_scale * 10 / 1024 packets/s^3";
        tcp_friendliness: bool = true, "follow the emulated Reno window when it is larger";
        hystart: bool = true, "leave slow start on ACK-train or delay-increase signals";
        /// Bits HYSTART_ACK_TRAIN and HYSTART_DELAY.
        hystart_detect: u32 = HYSTART_ACK_TRAIN | HYSTART_DELAY, range(0, 3),
            "1: ACK train, 2: delay increase, 3: both";
        hystart_low_window: u32 = 16, range(0, 1 << 30), "HyStart inactive below this cwnd";
        hystart_ack_delta_us: u32 = 2000, range(0, 1_000_000), "ACKs closer than this form a train (us)";
    }
}

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "cubic",
        description: "CUBIC: cubic window growth around W_max, beta 0.7, fast convergence, Reno-friendly region, HyStart",
        source: "Linux net/ipv4/tcp_cubic.c (v2.3); RFC 9438; Ha, Rhee, Xu 2008",
        params: CubicConfig::catalogue(),
    }
}

pub fn build(p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Cubic::new(CubicConfig::from_params(p)))
}

/// Cube-root lookup of Linux `cubic_root`: v[x] = cbrt(x << 18) - 1 for x < 64.
const CBRT_TABLE: [u8; 64] = [
    0, 54, 54, 54, 118, 118, 118, 118, 123, 129, 134, 138, 143, 147, 151, 156, 157, 161, 164, 168,
    170, 173, 176, 179, 181, 185, 187, 190, 192, 194, 197, 199, 200, 202, 204, 206, 209, 211, 213,
    215, 217, 219, 221, 222, 224, 225, 227, 229, 231, 232, 234, 236, 237, 239, 240, 242, 244, 245,
    246, 248, 250, 251, 252, 254,
];

/// Integer cube root as Linux computes it: table lookup on the top bits plus one
/// Newton-Raphson step (error about 0.2 %).
pub fn cubic_root(a: u64) -> u32 {
    if a < 64 {
        return (CBRT_TABLE[a as usize] as u32 + 35) >> 6;
    }
    let bits = 64 - a.leading_zeros();
    let b = ((bits * 84) >> 8) - 1;
    let shift = (a >> (b * 3)) as usize;
    let mut x: u32 = ((CBRT_TABLE[shift] as u32 + 10) << b) >> 6;
    x = 2 * x + (a / (x as u64 * (x as u64 - 1))) as u32;
    (x as u64 * 341 >> 10) as u32
}

pub struct Cubic {
    cfg: CubicConfig,
    /// Derived constants (Linux `cubictcp_register`).
    beta_scale: u32,
    cube_rtt_scale: u32,
    cube_factor: u64,

    /// ACKs needed to grow cwnd by one.
    cnt: u32,
    last_max_cwnd: u32,
    last_cwnd: u32,
    last_time: u32,
    bic_origin_point: u32,
    /// K in units of 2^-10 s.
    bic_k: u32,
    /// Minimum RTT seen (us), 0 = none.
    delay_min: u32,
    /// Jiffies at the start of the current epoch, 0 = no epoch.
    epoch_start: u32,
    ack_cnt: u32,
    /// Emulated Reno cwnd.
    tcp_cwnd: u32,
    // HyStart
    sample_cnt: u32,
    found: bool,
    round_start: u32,
    end_seq: u32,
    last_ack: u32,
    curr_rtt: u32,
}

impl Cubic {
    pub fn new(cfg: CubicConfig) -> Cubic {
        let beta_scale = 8 * (BETA_SCALE + cfg.beta) / 3 / (BETA_SCALE - cfg.beta);
        let cube_rtt_scale = cfg.bic_scale * 10;
        let cube_factor = (1u64 << (10 + 3 * BICTCP_HZ)) / cube_rtt_scale as u64;
        Cubic {
            cfg,
            beta_scale,
            cube_rtt_scale,
            cube_factor,
            cnt: 0,
            last_max_cwnd: 0,
            last_cwnd: 0,
            last_time: 0,
            bic_origin_point: 0,
            bic_k: 0,
            delay_min: 0,
            epoch_start: 0,
            ack_cnt: 0,
            tcp_cwnd: 0,
            sample_cnt: 0,
            found: false,
            round_start: 0,
            end_seq: 0,
            last_ack: 0,
            curr_rtt: 0,
        }
    }

    /// Linux `bictcp_reset`: forget the window history and delay_min.
    fn reset(&mut self) {
        self.cnt = 0;
        self.last_max_cwnd = 0;
        self.last_cwnd = 0;
        self.last_time = 0;
        self.bic_origin_point = 0;
        self.bic_k = 0;
        self.delay_min = 0;
        self.epoch_start = 0;
        self.ack_cnt = 0;
        self.tcp_cwnd = 0;
        self.found = false;
    }

    fn hystart_reset(&mut self, tp: &TcpSock) {
        self.round_start = tp.mstamp_us as u32;
        self.last_ack = self.round_start;
        self.end_seq = tp.snd_nxt;
        self.curr_rtt = u32::MAX;
        self.sample_cnt = 0;
    }

    /// Linux `bictcp_update`: recompute `cnt` from the cubic curve.
    fn update(&mut self, tp: &TcpSock, cwnd: u32, acked: u32) {
        let now = tp.jiffies;
        let hz = tp.hz;
        self.ack_cnt = self.ack_cnt.wrapping_add(acked);

        if self.last_cwnd == cwnd && (now.wrapping_sub(self.last_time) as i32) <= (hz / 32) as i32 {
            return;
        }
        // The curve is evaluated at most once per jiffy; in between only the
        // Reno-friendly estimate moves.
        if !(self.epoch_start != 0 && now == self.last_time) {
            self.last_cwnd = cwnd;
            self.last_time = now;

            if self.epoch_start == 0 {
                self.epoch_start = now;
                self.ack_cnt = acked;
                self.tcp_cwnd = cwnd;
                if self.last_max_cwnd <= cwnd {
                    self.bic_k = 0;
                    self.bic_origin_point = cwnd;
                } else {
                    self.bic_k = cubic_root(self.cube_factor * (self.last_max_cwnd - cwnd) as u64);
                    self.bic_origin_point = self.last_max_cwnd;
                }
            }

            let mut t = now.wrapping_sub(self.epoch_start) as i32 as i64 as u64;
            t += usecs_to_jiffies(self.delay_min as u64, hz);
            t <<= BICTCP_HZ;
            t /= hz as u64;

            let k = self.bic_k as u64;
            let offs = if t < k { k - t } else { t - k };
            let delta = ((self.cube_rtt_scale as u64)
                .wrapping_mul(offs)
                .wrapping_mul(offs)
                .wrapping_mul(offs)
                >> (10 + 3 * BICTCP_HZ)) as u32;
            let bic_target = if t < k {
                self.bic_origin_point.wrapping_sub(delta)
            } else {
                self.bic_origin_point.wrapping_add(delta)
            };

            self.cnt = if bic_target > cwnd { cwnd / (bic_target - cwnd) } else { 100 * cwnd };

            // Before the first loss grow at least 5 % per RTT.
            if self.last_max_cwnd == 0 && self.cnt > 20 {
                self.cnt = 20;
            }
        }

        if self.cfg.tcp_friendliness {
            let delta = (cwnd * self.beta_scale) >> 3;
            if delta > 0 {
                while self.ack_cnt > delta {
                    self.ack_cnt -= delta;
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
        // Never faster than 1 packet per 2 ACKed: at most 1.5x per RTT.
        self.cnt = self.cnt.max(2);
    }

    /// Linux `hystart_ack_delay`: allowance for TSO/GRO batching of ACKs.
    fn hystart_ack_delay(tp: &TcpSock) -> u32 {
        if tp.pacing_rate == 0 {
            return 0;
        }
        (GSO_MAX_SIZE * 4 * 1_000_000 / tp.pacing_rate).min(1000) as u32
    }

    fn hystart_update(&mut self, tp: &mut TcpSock, delay: u32) {
        if seq_after(tp.snd_una, self.end_seq) {
            self.hystart_reset(tp);
        }
        if tp.cwnd < self.cfg.hystart_low_window {
            return;
        }
        if self.cfg.hystart_detect & HYSTART_ACK_TRAIN != 0 {
            let now = tp.mstamp_us as u32;
            if (now.wrapping_sub(self.last_ack) as i32) <= self.cfg.hystart_ack_delta_us as i32 {
                self.last_ack = now;
                let mut threshold = self.delay_min + Self::hystart_ack_delay(tp);
                // Without pacing the ACK train of a round may legitimately span
                // only half a min RTT.
                if tp.pacing_status == PacingStatus::None {
                    threshold >>= 1;
                }
                if (now.wrapping_sub(self.round_start) as i32) > threshold as i32 {
                    self.found = true;
                    tp.hystart.train_detect += 1;
                    tp.hystart.train_cwnd += tp.cwnd as u64;
                    tp.ssthresh = tp.cwnd;
                }
            }
        }
        if self.cfg.hystart_detect & HYSTART_DELAY != 0 {
            if self.curr_rtt > delay {
                self.curr_rtt = delay;
            }
            if self.sample_cnt < HYSTART_MIN_SAMPLES {
                self.sample_cnt += 1;
            } else {
                let thresh = (self.delay_min >> 3).clamp(HYSTART_DELAY_MIN_US, HYSTART_DELAY_MAX_US);
                if self.curr_rtt > self.delay_min + thresh {
                    self.found = true;
                    tp.hystart.delay_detect += 1;
                    tp.hystart.delay_cwnd += tp.cwnd as u64;
                    tp.ssthresh = tp.cwnd;
                }
            }
        }
    }

    /// W_max (packets) of the current epoch, for tests and traces.
    pub fn w_max(&self) -> u32 {
        self.last_max_cwnd
    }
    /// K in seconds, for tests and traces.
    pub fn k_secs(&self) -> f64 {
        self.bic_k as f64 / 1024.0
    }
    pub fn epoch_start_jiffies(&self) -> u32 {
        self.epoch_start
    }
    pub fn origin_point(&self) -> u32 {
        self.bic_origin_point
    }
    pub fn delay_min_us(&self) -> u32 {
        self.delay_min
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &str {
        "cubic"
    }

    fn init(&mut self, tp: &mut TcpSock) {
        self.reset();
        if self.cfg.hystart {
            self.hystart_reset(tp);
        }
        if !self.cfg.hystart && self.cfg.initial_ssthresh != 0 {
            tp.ssthresh = self.cfg.initial_ssthresh;
        }
    }

    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        self.epoch_start = 0;
        if tp.cwnd < self.last_max_cwnd && self.cfg.fast_convergence {
            self.last_max_cwnd = (tp.cwnd as u64 * (BETA_SCALE + self.cfg.beta) as u64
                / (2 * BETA_SCALE) as u64) as u32;
        } else {
            self.last_max_cwnd = tp.cwnd;
        }
        ((tp.cwnd as u64 * self.cfg.beta as u64 / BETA_SCALE as u64) as u32).max(2)
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
        let cwnd = tp.cwnd;
        self.update(tp, cwnd, acked);
        tp.cong_avoid_ai(self.cnt, acked);
    }

    fn has_cong_avoid(&self) -> bool {
        true
    }

    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        tp.reno_undo_cwnd()
    }

    fn set_state(&mut self, tp: &mut TcpSock, new_state: CaState) {
        if new_state == CaState::Loss {
            self.reset();
            self.hystart_reset(tp);
        }
    }

    fn cwnd_event(&mut self, tp: &mut TcpSock, ev: CaEvent) {
        if ev == CaEvent::TxStart {
            // Idle time must not count as time on the curve.
            let now = tp.jiffies;
            let delta = now.wrapping_sub(tp.lsndtime) as i32;
            if self.epoch_start != 0 && delta > 0 {
                self.epoch_start = self.epoch_start.wrapping_add(delta as u32);
                if seq_after(self.epoch_start, now) {
                    self.epoch_start = now;
                }
            }
        }
    }

    fn pkts_acked(&mut self, tp: &mut TcpSock, sample: &AckSample) {
        if sample.rtt_us < 0 {
            return;
        }
        // Discard delay samples right after a reduction (one second).
        if self.epoch_start != 0 && (tp.jiffies.wrapping_sub(self.epoch_start) as i32) < tp.hz as i32 {
            return;
        }
        let delay = (sample.rtt_us as u32).max(1);
        if self.delay_min == 0 || self.delay_min > delay {
            self.delay_min = delay;
        }
        if !self.found && tp.in_slow_start() && self.cfg.hystart {
            self.hystart_update(tp, delay);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::HystartStats;

    #[test]
    fn derived_constants_match_linux() {
        let c = Cubic::new(CubicConfig::default());
        assert_eq!(c.beta_scale, 15);
        assert_eq!(c.cube_rtt_scale, 410);
        assert_eq!(c.cube_factor, 2_681_735_677);
    }

    #[test]
    fn cube_root_within_a_quarter_percent() {
        for &a in &[64u64, 1000, 27_000, 1 << 30, 123_456_789, 2_681_735_677 * 100, 1 << 50] {
            let exact = (a as f64).cbrt();
            let got = cubic_root(a) as f64;
            assert!((got - exact).abs() / exact < 0.0025, "a={a} got={got} exact={exact}");
        }
        assert_eq!(cubic_root(0), 0);
        assert_eq!(cubic_root(1), 1);
        assert_eq!(cubic_root(8), 2);
    }

    fn ca_sock(cwnd: u32) -> TcpSock {
        crate::cc::test_sock(1000, cwnd, 2)
    }

    /// A socket in its first slow start, sampled at `mstamp_us`.
    fn slow_start_sock(cwnd: u32) -> TcpSock {
        TcpSock::new(1448, 250, cwnd)
    }

    fn ack(c: &mut Cubic, tp: &mut TcpSock, at_us: u64, rtt_us: i64) {
        tp.mstamp_us = at_us;
        c.pkts_acked(tp, &AckSample { pkts_acked: 2, rtt_us, in_flight: tp.cwnd });
    }

    #[test]
    fn hystart_delay_exit_ends_slow_start_and_is_counted() {
        let mut c = Cubic::new(CubicConfig { hystart_detect: HYSTART_DELAY, ..CubicConfig::default() });
        let mut tp = slow_start_sock(100);
        c.init(&mut tp);
        ack(&mut c, &mut tp, 0, 20_000);
        // A new round whose samples all exceed min RTT + max(min RTT / 8, 4 ms).
        (tp.snd_una, tp.snd_nxt) = (1, 50);
        for i in 0..8 {
            ack(&mut c, &mut tp, 21_000 + i * 100, 25_000);
            assert!(tp.in_slow_start(), "sample {i}: too few samples to decide");
        }
        ack(&mut c, &mut tp, 22_000, 25_000);
        assert_eq!(tp.ssthresh, 100);
        assert_eq!(tp.hystart, HystartStats { delay_detect: 1, delay_cwnd: 100, ..HystartStats::default() });
        // Found once: later samples count nothing more.
        ack(&mut c, &mut tp, 23_000, 30_000);
        assert_eq!(tp.hystart.delay_detect, 1);
    }

    #[test]
    fn hystart_ack_train_exit_is_counted_with_its_cwnd() {
        let mut c = Cubic::new(CubicConfig { hystart_detect: HYSTART_ACK_TRAIN, ..CubicConfig::default() });
        let mut tp = slow_start_sock(300);
        c.init(&mut tp);
        // ACKs 1 ms apart, from the round's start: without pacing the train
        // must span half the min RTT (10 ms) to end slow start.
        for ms in 0..=10 {
            ack(&mut c, &mut tp, ms * 1_000, 20_000);
            assert!(tp.in_slow_start(), "{ms} ms into the round");
        }
        ack(&mut c, &mut tp, 11_000, 20_000);
        assert_eq!(tp.ssthresh, 300);
        assert_eq!(tp.hystart, HystartStats { train_detect: 1, train_cwnd: 300, ..HystartStats::default() });
    }

    #[test]
    fn ssthresh_and_fast_convergence() {
        let mut c = Cubic::new(CubicConfig::default());
        let mut tp = ca_sock(1000);
        assert_eq!(c.ssthresh(&mut tp), 700);
        assert_eq!(c.w_max(), 1000);
        // A loss below the previous W_max releases bandwidth: W_max = cwnd * 1741/2048.
        tp.cwnd = 800;
        assert_eq!(c.ssthresh(&mut tp), 560);
        assert_eq!(c.w_max(), 680);
    }

    #[test]
    fn k_is_cube_root_of_wmax_drop_over_c() {
        let mut c = Cubic::new(CubicConfig::default());
        let mut tp = ca_sock(1000);
        c.ssthresh(&mut tp);
        tp.cwnd = 700;
        tp.jiffies = 5000;
        c.cong_avoid(&mut tp, 0, 1);
        // K = cbrt(300 / 0.4004) = 9.08 s.
        let k = c.k_secs();
        assert!((k - (300.0f64 / (410.0 / 1024.0)).cbrt()).abs() < 0.02, "K = {k}");
        assert_eq!(c.origin_point(), 1000);
    }

    #[test]
    fn reno_friendly_region_dominates_small_windows() {
        // cwnd 20 after a loss from 28, one ACK per ms (an RTT of 20 ms): in 0.4 s the
        // cubic curve reaches only 0.4 (0.4 - 2.71)^3 + 28 = 23 packets, while the
        // emulated Reno gains one packet per 15/8 cwnd ACKs, about 10 packets.
        let mut c = Cubic::new(CubicConfig::default());
        let mut tp = ca_sock(28);
        c.ssthresh(&mut tp);
        tp.cwnd = 20;
        tp.jiffies = 1000;
        for i in 0..400u32 {
            tp.jiffies = 1000 + i;
            c.cong_avoid(&mut tp, 0, 1);
        }
        assert!(tp.cwnd >= 26, "cwnd = {} did not follow the Reno estimate", tp.cwnd);
        assert!(c.tcp_cwnd >= 27);
    }

    #[test]
    fn cnt_never_below_two() {
        let mut c = Cubic::new(CubicConfig::default());
        let mut tp = ca_sock(100);
        c.last_max_cwnd = 10;
        tp.jiffies = 100_000;
        c.epoch_start = 1;
        c.cong_avoid(&mut tp, 0, 1);
        assert!(c.cnt >= 2);
    }
}
