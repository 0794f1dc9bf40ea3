//! TCP-Illinois as Linux runs it (`net/ipv4/tcp_illinois.c`; Liu, Basar &
//! Srikant, "TCP-Illinois: A loss- and delay-based congestion control
//! algorithm for high-speed networks", Performance Evaluation 65, 2008). Loss
//! decides the direction and queueing delay the step: cwnd grows by alpha/cwnd
//! per ACK and is cut to (1 - beta) cwnd on loss, where once per RTT both are
//! set from the average queueing delay da of that RTT relative to the largest
//! seen, dm = maxRTT - baseRTT. alpha is 10 while da <= dm/100 and falls along
//! k1 / (k2 + da) to 0.3 at da = dm; beta is 1/8 while da <= dm/10 and rises
//! linearly to 1/2 at 8 dm / 10. After delay has been high, alpha returns to
//! its maximum only after theta (5) low-delay RTTs. Below win_thresh (15
//! packets) it is Reno (alpha 1, beta 1/2); an RTO resets alpha and beta to
//! Reno's. Fixed point as the kernel: alpha x 128, beta x 64.

use super::params::{declare_params, CcaInfo, Params};
use super::{AckSample, CaState, CongestionControl, TcpSock};
use crate::packet::seq_after;

/// alpha is kept x 2^7 (Linux ALPHA_SHIFT).
const ALPHA_SHIFT: u32 = 7;
const ALPHA_SCALE: u32 = 1 << ALPHA_SHIFT;
/// 3/10 in x128 fixed point, truncated as Linux computes it: 38 = 0.297.
pub const ALPHA_MIN: u32 = (3 * ALPHA_SCALE) / 10;
pub const ALPHA_MAX: u32 = 10 * ALPHA_SCALE;
pub const ALPHA_BASE: u32 = ALPHA_SCALE;
/// RTT samples are clamped so that dm x ALPHA_MAX fits in 32 bits (3.36 s).
const RTT_MAX: u32 = u32::MAX / ALPHA_MAX;
/// beta is kept x 2^6 (Linux BETA_SHIFT).
const BETA_SHIFT: u32 = 6;
const BETA_SCALE: u32 = 1 << BETA_SHIFT;
pub const BETA_MIN: u32 = BETA_SCALE / 8;
pub const BETA_MAX: u32 = BETA_SCALE / 2;
pub const BETA_BASE: u32 = BETA_MAX;
declare_params! {
    /// Module parameters of `tcp_illinois` with their Linux defaults.
    pub struct IllinoisConfig {
        win_thresh: u32 = 15, range(0, 1 << 30), "below this cwnd alpha = 1 and beta = 1/2 (Reno)";
        /// Counted in a u8, as Linux's `rtt_low`.
        theta: u32 = 5, range(0, 255), "low-delay RTTs before alpha may return to its maximum";
    }
}

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "illinois",
        description: "TCP-Illinois: AIMD with alpha in [0.3, 10] falling and beta in [1/8, 1/2] rising with the average queueing delay per RTT; Reno below 15 packets",
        source: "Linux net/ipv4/tcp_illinois.c; Liu, Basar, Srikant, Performance Evaluation 2008",
        params: IllinoisConfig::catalogue(),
    }
}

pub fn build(p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Illinois::new(IllinoisConfig::from_params(p)))
}

pub struct Illinois {
    cfg: IllinoisConfig,
    /// Sum and count of the RTT samples (us) of the current RTT.
    sum_rtt: u64,
    cnt_rtt: u16,
    /// Smallest and largest RTT ever seen (us).
    base_rtt: u32,
    max_rtt: u32,
    /// SND.NXT when the current RTT started.
    end_seq: u32,
    /// Additive increase x 128 and multiplicative decrease x 64.
    alpha: u32,
    beta: u32,
    /// Packets cumulatively ACKed by the current ACK (Linux `u16 acked`).
    acked: u16,
    /// Average delay went above dm/100 since alpha was last at its maximum.
    rtt_above: bool,
    /// Consecutive RTTs with low delay since then.
    rtt_low: u8,
}

impl Illinois {
    pub fn new(cfg: IllinoisConfig) -> Illinois {
        Illinois {
            cfg,
            sum_rtt: 0,
            cnt_rtt: 0,
            base_rtt: 0x7fff_ffff,
            max_rtt: 0,
            end_seq: 0,
            alpha: ALPHA_MAX,
            beta: BETA_BASE,
            acked: 0,
            rtt_above: false,
            rtt_low: 0,
        }
    }

    /// alpha x 128, for traces and tests.
    pub fn alpha(&self) -> u32 {
        self.alpha
    }

    /// beta x 64, for traces and tests.
    pub fn beta(&self) -> u32 {
        self.beta
    }

    fn rtt_reset(&mut self, tp: &TcpSock) {
        self.end_seq = tp.snd_nxt;
        self.cnt_rtt = 0;
        self.sum_rtt = 0;
    }

    /// Largest queueing delay seen (us).
    fn max_delay(&self) -> u32 {
        self.max_rtt.wrapping_sub(self.base_rtt)
    }

    /// Average queueing delay of the current RTT (us).
    fn avg_delay(&self) -> u32 {
        ((self.sum_rtt / self.cnt_rtt as u64) as u32).wrapping_sub(self.base_rtt)
    }

    /// Linux `alpha()`: the increase for average delay `da` when the largest is `dm`.
    fn compute_alpha(&mut self, da: u32, dm: u32) -> u32 {
        let d1 = dm / 100;
        if da <= d1 {
            if !self.rtt_above {
                return ALPHA_MAX;
            }
            // One good RTT must not bring back the full increase at once.
            self.rtt_low = self.rtt_low.wrapping_add(1);
            if (self.rtt_low as u32) < self.cfg.theta {
                return self.alpha;
            }
            self.rtt_low = 0;
            self.rtt_above = false;
            return ALPHA_MAX;
        }
        self.rtt_above = true;
        // alpha = k1 / (k2 + da) through (d1, ALPHA_MAX) and (dm, ALPHA_MIN).
        let dm = dm - d1;
        let da = da - d1;
        dm.wrapping_mul(ALPHA_MAX) / (dm + da.wrapping_mul(ALPHA_MAX - ALPHA_MIN) / ALPHA_MIN)
    }

    /// Linux `beta()`: linear from BETA_MIN at dm/10 to BETA_MAX at 8 dm/10.
    fn compute_beta(da: u32, dm: u32) -> u32 {
        let d2 = dm / 10;
        if da <= d2 {
            return BETA_MIN;
        }
        let d3 = (8 * dm) / 10;
        if da >= d3 || d3 <= d2 {
            return BETA_MAX;
        }
        (BETA_MIN * d3 - BETA_MAX * d2 + (BETA_MAX - BETA_MIN) * da) / (d3 - d2)
    }

    /// Linux `update_params`, once per RTT.
    fn update_params(&mut self, tp: &TcpSock) {
        if tp.cwnd < self.cfg.win_thresh {
            self.alpha = ALPHA_BASE;
            self.beta = BETA_BASE;
        } else if self.cnt_rtt > 0 {
            let dm = self.max_delay();
            let da = self.avg_delay();
            self.alpha = self.compute_alpha(da, dm);
            self.beta = Self::compute_beta(da, dm);
        }
        self.rtt_reset(tp);
    }
}

impl CongestionControl for Illinois {
    fn name(&self) -> &str {
        "illinois"
    }

    fn init(&mut self, tp: &mut TcpSock) {
        self.alpha = ALPHA_MAX;
        self.beta = BETA_BASE;
        self.base_rtt = 0x7fff_ffff;
        self.max_rtt = 0;
        self.acked = 0;
        self.rtt_low = 0;
        self.rtt_above = false;
        self.rtt_reset(tp);
    }

    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        let decrease = tp.cwnd.wrapping_mul(self.beta) >> BETA_SHIFT;
        (tp.cwnd - decrease).max(2)
    }

    fn cong_avoid(&mut self, tp: &mut TcpSock, ack: u32, acked: u32) {
        if seq_after(ack, self.end_seq) {
            self.update_params(tp);
        }
        if !tp.is_cwnd_limited() {
            return;
        }
        if tp.in_slow_start() {
            tp.slow_start(acked);
        } else {
            // cwnd += alpha / cwnd per packet, counted in the packets this ACK
            // cumulatively acknowledged (a later ACK without a sample counts 1).
            tp.cwnd_cnt += self.acked as u32;
            self.acked = 1;
            let delta = tp.cwnd_cnt.wrapping_mul(self.alpha) >> ALPHA_SHIFT;
            if delta >= tp.cwnd {
                tp.cwnd = (tp.cwnd + delta / tp.cwnd).min(tp.cwnd_clamp);
                tp.cwnd_cnt = 0;
            }
        }
    }

    fn has_cong_avoid(&self) -> bool {
        true
    }

    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        tp.reno_undo_cwnd()
    }

    fn set_state(&mut self, tp: &mut TcpSock, new_state: CaState) {
        if new_state == CaState::Loss {
            self.alpha = ALPHA_BASE;
            self.beta = BETA_BASE;
            self.rtt_low = 0;
            self.rtt_above = false;
            self.rtt_reset(tp);
        }
    }

    fn pkts_acked(&mut self, _tp: &mut TcpSock, sample: &AckSample) {
        self.acked = sample.pkts_acked as u16;
        if sample.rtt_us < 0 {
            return;
        }
        let rtt = (sample.rtt_us as u32).min(RTT_MAX);
        self.base_rtt = self.base_rtt.min(rtt);
        self.max_rtt = self.max_rtt.max(rtt);
        self.cnt_rtt = self.cnt_rtt.wrapping_add(1);
        self.sum_rtt += rtt as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::vegas::tests::rtt_sample;

    fn sock(cwnd: u32) -> TcpSock {
        crate::cc::test_sock(1000, cwnd, 2)
    }

    /// An Illinois that has seen RTTs from 100 ms (base) to 200 ms (dm = 100 ms).
    fn with_history(tp: &mut TcpSock) -> Illinois {
        let mut c = Illinois::new(IllinoisConfig::default());
        c.init(tp);
        c.pkts_acked(tp, &rtt_sample(100_000));
        c.pkts_acked(tp, &rtt_sample(200_000));
        c
    }

    /// Ends an RTT whose samples all had queueing delay `da_us`.
    fn rtt_with_delay(c: &mut Illinois, tp: &mut TcpSock, da_us: i64) {
        c.rtt_reset(tp);
        for _ in 0..4 {
            c.pkts_acked(tp, &rtt_sample(100_000 + da_us));
        }
        tp.snd_nxt += 100;
        let ack = c.end_seq + 1;
        c.cong_avoid(tp, ack, 1);
    }

    #[test]
    fn alpha_falls_and_beta_rises_with_delay() {
        let mut tp = sock(100);
        let mut c = with_history(&mut tp);
        // (da in ms, alpha x 128, beta x 64), dm = 100 ms.
        let expected = [
            (0, ALPHA_MAX, BETA_MIN),
            (1, ALPHA_MAX, BETA_MIN), // da <= dm/100, never above: full increase
            (5, 551, BETA_MIN),       // 99000 * 1280 / (99000 + 4000 * 1242 / 38)
            (10, 322, BETA_MIN),      // da = dm/10: beta still 1/8
            (45, 82, 20),             // beta = (8*80000 - 32*10000 + 24*45000) / 70000
            (80, 47, BETA_MAX),       // da = 8 dm / 10: beta 1/2
            (100, ALPHA_MIN, BETA_MAX), // da = dm: alpha 0.3
        ];
        for &(da_ms, alpha, beta) in &expected {
            let mut c2 = with_history(&mut tp);
            rtt_with_delay(&mut c2, &mut tp, da_ms * 1000);
            assert_eq!((c2.alpha(), c2.beta()), (alpha, beta), "da = {da_ms} ms");
        }
        // alpha is monotone between the bounds and stays in [0.3, 10].
        let mut last = u32::MAX;
        for da_ms in 2..=100 {
            rtt_with_delay(&mut c, &mut tp, da_ms * 1000);
            assert!(c.alpha() <= last && c.alpha() >= ALPHA_MIN && c.alpha() <= ALPHA_MAX);
            last = c.alpha();
        }
    }

    #[test]
    fn alpha_recovers_only_after_theta_low_delay_rtts() {
        let mut tp = sock(100);
        let mut c = with_history(&mut tp);
        rtt_with_delay(&mut c, &mut tp, 50_000);
        let congested = c.alpha();
        assert!(congested < ALPHA_SCALE);
        for _ in 1..IllinoisConfig::default().theta {
            rtt_with_delay(&mut c, &mut tp, 0);
            assert_eq!(c.alpha(), congested);
        }
        rtt_with_delay(&mut c, &mut tp, 0);
        assert_eq!(c.alpha(), ALPHA_MAX);
    }

    #[test]
    fn reno_below_win_thresh_and_after_rto() {
        let mut tp = sock(14);
        let mut c = with_history(&mut tp);
        rtt_with_delay(&mut c, &mut tp, 0);
        assert_eq!((c.alpha(), c.beta()), (ALPHA_BASE, BETA_BASE));
        tp.cwnd = 100;
        rtt_with_delay(&mut c, &mut tp, 0);
        assert_eq!(c.alpha(), ALPHA_MAX);
        c.set_state(&mut tp, CaState::Loss);
        assert_eq!((c.alpha(), c.beta()), (ALPHA_BASE, BETA_BASE));
    }

    #[test]
    fn growth_is_alpha_per_rtt_and_decrease_is_beta() {
        let mut tp = sock(100);
        let mut c = with_history(&mut tp);
        rtt_with_delay(&mut c, &mut tp, 0);
        assert_eq!(c.alpha(), ALPHA_MAX);
        tp.cwnd_cnt = 0;
        // 100 ACKs of one packet: alpha = 10 packets per RTT.
        let start = tp.cwnd;
        let end_seq = c.end_seq;
        for _ in 0..100 {
            c.pkts_acked(&mut tp, &AckSample { pkts_acked: 1, rtt_us: 100_000, in_flight: 0 });
            c.cong_avoid(&mut tp, end_seq, 1);
        }
        assert!((tp.cwnd - start).abs_diff(10) <= 1, "cwnd {start} -> {}", tp.cwnd);
        // beta 1/8 at low delay, 1/2 at high delay.
        tp.cwnd = 800;
        assert_eq!(c.ssthresh(&mut tp), 700);
        c.beta = BETA_MAX;
        assert_eq!(c.ssthresh(&mut tp), 400);
        tp.cwnd = 2;
        assert_eq!(c.ssthresh(&mut tp), 2);
    }
}
