//! FAST TCP (Jin, Wei & Low, "FAST TCP: Motivation, Architecture, Algorithms,
//! Performance", IEEE INFOCOM 2004; Wei, Jin, Low & Hegde, IEEE/ACM ToN 14(6),
//! 2006). A delay-based window control for large bandwidth-delay products: once
//! per RTT the window moves towards the one that keeps `alpha` of this flow's
//! packets queued on the path,
//!
//!   w <- min(2w, (1 - gamma) w + gamma (baseRTT / avgRTT x w + alpha)),
//!
//! where baseRTT is the smallest RTT seen (the propagation delay) and avgRTT the
//! average RTT, an exponential moving average over every RTT sample with weight
//! min(3/w, 1/4) (the papers' estimation component). At the fixed point
//! w (avgRTT - baseRTT) / avgRTT = alpha: each flow keeps alpha packets in the
//! bottleneck queue whatever the link's speed, so N flows share the link equally
//! and queue N alpha packets. Far from it the step is proportional to the
//! distance (unlike Vegas' +/-1 per RTT); min(2w, ...) bounds growth by slow
//! start's doubling. There is no separate slow start: with no queue the update
//! gives w + gamma alpha, so a connection doubles its window while it is below
//! gamma alpha and then adds gamma alpha packets per RTT until the queue forms.
//!
//! Update period: once per RTT, ended as in Vegas by the first ACK beyond the
//! SND.NXT of the previous update. The papers define the update as periodic with
//! one RTT as its natural period (the average RTT of one round reflects the
//! window of the round before); updating more often would act on RTTs that do
//! not yet show the last change. Loss is handled as in Reno (ssthresh = cwnd/2,
//! PRR during recovery), as the papers' prototype halves its window on loss;
//! outside the Open state the window follows Reno. What this file does not
//! model: the prototype's burstiness control (spreading a window increase over
//! the RTT), its alpha tuning by queueing delay (`alpha(w, qdelay)`; the ToN
//! paper keeps alpha constant, as here), and its own loss recovery. Defaults
//! alpha = 200 packets and gamma = 1/2 are the values of the papers'
//! experiments; alpha must suit the path (the CUBIC evaluation notes that FAST
//! needs it tuned: a buffer smaller than N alpha packets leaves FAST losing).
//! Fixed point: gamma x 1024, avgRTT in us x 1024, the update in 128-bit
//! integers, rounded to the nearest packet.

use super::params::{declare_params, CcaInfo, Params};
use super::{AckSample, CaEvent, CaState, CongestionControl, TcpSock};
use crate::packet::seq_after;

/// gamma is given x 2^10.
pub const GAMMA_SHIFT: u32 = 10;
const GAMMA_SCALE: u128 = 1 << GAMMA_SHIFT;
/// avgRTT is kept in us x 2^10 so that small EWMA steps are not lost.
const AVG_SHIFT: u32 = 10;
/// "No sample yet" for baseRTT (as Vegas, 0x7fffffff us).
pub const RTT_UNSET: u32 = 0x7fff_ffff;
/// The EWMA weight min(3/w, 1/4) (ToN 2006, estimation component): 3/w for
/// windows of at least 12 packets, 1/4 below.
const ETA_NUM: u64 = 3;
const ETA_MIN_WINDOW: u64 = 12;

declare_params! {
    /// FAST's parameters with the values of the papers' experiments.
    pub struct FastConfig {
        /// Jin, Wei & Low 2004 and Wei et al. 2006: alpha = 200 packets.
        alpha: u32 = 200, range(1, 1 << 20), "packets each flow keeps queued at equilibrium";
        /// Jin, Wei & Low 2004 and Wei et al. 2006: gamma = 1/2.
        gamma: u32 = 512, range(1, 1024), "window update gain x 1024 (512 = 1/2)";
    }
}

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "fast",
        description: "FAST TCP: delay-based, once per RTT w <- min(2w, (1-gamma) w + gamma (baseRTT/avgRTT w + alpha)), keeps alpha packets per flow queued; Reno on loss",
        source: "Jin, Wei, Low, IEEE INFOCOM 2004; Wei, Jin, Low, Hegde, IEEE/ACM ToN 2006 (no Linux mainline module)",
        params: FastConfig::catalogue(),
    }
}

pub fn build(p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Fast::new(FastConfig::from_params(p)))
}

pub struct Fast {
    cfg: FastConfig,
    /// Smallest RTT seen (us): the propagation delay.
    base_rtt: u32,
    /// Average RTT, us x 2^AVG_SHIFT (0 before the first sample).
    avg_rtt: u64,
    /// RTT samples since the last update.
    cnt_rtt: u32,
    /// SND.NXT at the last update: an ACK beyond it ends the RTT.
    beg_snd_nxt: u32,
    /// Whether the FAST update runs (only in the Open state).
    doing_fast_now: bool,
}

impl Fast {
    pub fn new(cfg: FastConfig) -> Fast {
        Fast { cfg, base_rtt: RTT_UNSET, avg_rtt: 0, cnt_rtt: 0, beg_snd_nxt: 0, doing_fast_now: false }
    }

    /// Average RTT in us (0 before the first sample).
    pub fn avg_rtt_us(&self) -> u32 {
        (self.avg_rtt >> AVG_SHIFT) as u32
    }

    pub fn base_rtt_us(&self) -> u32 {
        self.base_rtt
    }

    /// Starts a fresh RTT of measurement at SND.NXT.
    fn enable(&mut self, tp: &TcpSock) {
        self.doing_fast_now = true;
        self.beg_snd_nxt = tp.snd_nxt;
        self.cnt_rtt = 0;
    }

    /// The window the update equation gives for `cwnd` (before the cwnd-limited
    /// check and the [2, clamp] bounds).
    pub fn target_cwnd(&self, cwnd: u32) -> u32 {
        let w = cwnd as u128;
        let avg = self.avg_rtt.max(1) as u128;
        let base = (self.base_rtt as u128) << AVG_SHIFT;
        let g = self.cfg.gamma as u128;
        // (1 - g) w + g (base/avg w + alpha), all x 1024 x avg.
        let num = (GAMMA_SCALE - g) * w * avg + g * (base * w + self.cfg.alpha as u128 * avg);
        let den = GAMMA_SCALE * avg;
        let target = (num + den / 2) / den;
        target.min(2 * w).min(u32::MAX as u128) as u32
    }

    /// The once-per-RTT window update.
    fn update(&mut self, tp: &mut TcpSock) {
        let target = self.target_cwnd(tp.cwnd);
        // A window the flow does not fill says nothing about the path: only
        // shrink it then, as Linux modules grow cwnd only when cwnd-limited.
        if target > tp.cwnd && !tp.is_cwnd_limited() {
            return;
        }
        tp.cwnd = target.clamp(2, tp.cwnd_clamp.max(2));
    }
}

impl CongestionControl for Fast {
    fn name(&self) -> &str {
        "fast"
    }

    fn init(&mut self, tp: &mut TcpSock) {
        self.base_rtt = RTT_UNSET;
        self.avg_rtt = 0;
        self.enable(tp);
    }

    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        tp.reno_ssthresh()
    }

    fn cong_avoid(&mut self, tp: &mut TcpSock, ack: u32, acked: u32) {
        if !self.doing_fast_now {
            tp.reno_cong_avoid(acked);
            return;
        }
        if seq_after(ack, self.beg_snd_nxt) {
            self.beg_snd_nxt = tp.snd_nxt;
            if self.cnt_rtt > 0 {
                self.update(tp);
            }
            self.cnt_rtt = 0;
        }
    }

    fn has_cong_avoid(&self) -> bool {
        true
    }

    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        tp.reno_undo_cwnd()
    }

    fn set_state(&mut self, tp: &mut TcpSock, new_state: CaState) {
        if new_state == CaState::Open {
            self.enable(tp);
        } else {
            self.doing_fast_now = false;
        }
    }

    fn cwnd_event(&mut self, tp: &mut TcpSock, ev: CaEvent) {
        // After idle the average is stale; the path (baseRTT) is not.
        if ev == CaEvent::CwndRestart || ev == CaEvent::TxStart {
            self.avg_rtt = 0;
            if self.doing_fast_now {
                self.enable(tp);
            }
        }
    }

    fn pkts_acked(&mut self, tp: &mut TcpSock, sample: &AckSample) {
        if sample.rtt_us < 0 {
            return;
        }
        let rtt = (sample.rtt_us.clamp(1, RTT_UNSET as i64 - 1)) as u32;
        self.base_rtt = self.base_rtt.min(rtt);
        let x = (rtt as u64) << AVG_SHIFT;
        if self.avg_rtt == 0 {
            self.avg_rtt = x;
        } else {
            // avg += eta (x - avg) with eta = min(3/w, 1/4).
            let w = (tp.cwnd as u64).max(ETA_MIN_WINDOW);
            let d = x as i64 - self.avg_rtt as i64;
            self.avg_rtt = (self.avg_rtt as i64 + d * ETA_NUM as i64 / w as i64).max(1) as u64;
        }
        self.cnt_rtt = self.cnt_rtt.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::vegas::tests::rtt_sample;

    fn fast(alpha: u32, gamma: u32) -> Fast {
        Fast::new(FastConfig { alpha, gamma })
    }

    /// A FAST in the Open state whose baseRTT and average RTT are as given.
    fn measured(base_us: u32, avg_us: u32) -> (Fast, TcpSock) {
        let mut tp = crate::cc::test_sock(1000, 100, crate::cc::INFINITE_SSTHRESH);
        let mut f = fast(200, 512);
        f.init(&mut tp);
        f.base_rtt = base_us;
        f.avg_rtt = (avg_us as u64) << AVG_SHIFT;
        (f, tp)
    }

    #[test]
    fn the_fixed_point_keeps_alpha_packets_queued() {
        // w (avg - base) / avg = 200 with w = 1000: avg = 1.25 base.
        let (f, _) = measured(10_000, 12_500);
        assert_eq!(f.target_cwnd(1000), 1000);
        // Ten packets more (fewer) queued move the window back (on) by gamma x 10.
        let (f, _) = measured(10_000, 12_658);
        assert_eq!(f.target_cwnd(1000), 995);
        let (f, _) = measured(10_000, 12_346);
        assert_eq!(f.target_cwnd(1000), 1005);
    }

    #[test]
    fn growth_is_bounded_by_doubling() {
        // No queueing: w + gamma alpha = 110, capped at 2w = 20.
        let (f, _) = measured(10_000, 10_000);
        assert_eq!(f.target_cwnd(10), 20);
        assert_eq!(f.target_cwnd(150), 250);
        // gamma = 1: straight to baseRTT/avgRTT w + alpha.
        let mut g = fast(50, 1024);
        g.base_rtt = 10_000;
        g.avg_rtt = 20_000 << AVG_SHIFT;
        assert_eq!(g.target_cwnd(400), 250);
    }

    /// A fluid model of `n` FAST flows on one link: BDP `bdp` packets, baseRTT
    /// 10 ms, each flow's RTT the base plus the queue the total window makes.
    fn fluid(n: usize, bdp: u32, alpha: u32, rounds: usize, start: &[u32]) -> Vec<u32> {
        let mut flows: Vec<Fast> = (0..n).map(|_| fast(alpha, 512)).collect();
        let mut w: Vec<u32> = start.to_vec();
        for _ in 0..rounds {
            let total: u32 = w.iter().sum();
            let queue = total.saturating_sub(bdp);
            let rtt = 10_000u64 * (bdp + queue) as u64 / bdp as u64;
            for (f, wi) in flows.iter_mut().zip(w.iter_mut()) {
                f.base_rtt = 10_000;
                f.avg_rtt = rtt << AVG_SHIFT;
                *wi = f.target_cwnd(*wi);
            }
        }
        w
    }

    #[test]
    fn flows_converge_to_alpha_queued_each_and_equal_windows() {
        // One flow: w = BDP + alpha.
        let w = fluid(1, 800, 200, 60, &[10]);
        assert!((999..=1001).contains(&w[0]), "{w:?}");
        // Two flows from very unequal windows: equal shares (to within the
        // rounding to whole packets, 2 %), 2 alpha queued.
        let w = fluid(2, 800, 100, 200, &[10, 700]);
        let total: u32 = w.iter().sum();
        assert!((998..=1002).contains(&total), "{w:?}");
        assert!(w[0].abs_diff(w[1]) <= 10, "{w:?}");
    }

    #[test]
    fn updates_once_per_rtt() {
        let (mut f, mut tp) = measured(10_000, 10_000);
        tp.cwnd = 10;
        tp.snd_nxt = 100;
        f.enable(&tp);
        f.pkts_acked(&mut tp, &rtt_sample(10_000));
        // ACKs up to the boundary change nothing.
        for ack in 1..=100 {
            f.cong_avoid(&mut tp, ack, 1);
        }
        assert_eq!(tp.cwnd, 10);
        tp.snd_nxt = 300;
        f.cong_avoid(&mut tp, 101, 1);
        assert_eq!(tp.cwnd, 20);
        // A round without RTT samples does not update.
        tp.snd_nxt = 400;
        f.cong_avoid(&mut tp, 301, 1);
        assert_eq!(tp.cwnd, 20);
    }

    #[test]
    fn grows_only_when_cwnd_limited_and_never_below_two() {
        let (mut f, mut tp) = measured(10_000, 10_000);
        tp.is_cwnd_limited = false;
        tp.ssthresh = 50;
        f.cnt_rtt = 1;
        f.cong_avoid(&mut tp, 1, 1);
        assert_eq!(tp.cwnd, 100, "no growth while not cwnd-limited");
        // Shrinking is allowed: at 10x baseRTT, 1000 / 2 + (100 + 200) / 2.
        tp.cwnd = 1000;
        f.avg_rtt = 100_000 << AVG_SHIFT;
        f.cnt_rtt = 1;
        tp.snd_nxt = 10;
        f.cong_avoid(&mut tp, 5, 1);
        assert_eq!(tp.cwnd, 650);

        let mut tp = crate::cc::test_sock(1000, 100, crate::cc::INFINITE_SSTHRESH);
        let mut f = fast(1, 1024);
        f.init(&mut tp);
        f.base_rtt = 10_000;
        f.avg_rtt = 10_000_000 << AVG_SHIFT;
        f.cnt_rtt = 1;
        f.cong_avoid(&mut tp, 1, 1);
        assert_eq!(tp.cwnd, 2);
    }

    #[test]
    fn average_rtt_weights_samples_by_min_3_over_w_and_a_quarter() {
        let mut tp = crate::cc::test_sock(1000, 8, crate::cc::INFINITE_SSTHRESH);
        let mut f = fast(200, 512);
        f.init(&mut tp);
        f.pkts_acked(&mut tp, &rtt_sample(10_000));
        assert_eq!((f.avg_rtt_us(), f.base_rtt_us()), (10_000, 10_000));
        // Small window: eta = 1/4.
        f.pkts_acked(&mut tp, &rtt_sample(14_000));
        assert_eq!(f.avg_rtt_us(), 11_000);
        // cwnd 300: eta = 3/300.
        tp.cwnd = 300;
        f.pkts_acked(&mut tp, &rtt_sample(111_000));
        assert_eq!(f.avg_rtt_us(), 12_000);
        assert_eq!(f.base_rtt_us(), 10_000);
        // Samples without an RTT are ignored.
        f.pkts_acked(&mut tp, &rtt_sample(-1));
        assert_eq!(f.avg_rtt_us(), 12_000);
    }

    #[test]
    fn loss_is_reno_and_recovery_suspends_the_update() {
        let (mut f, mut tp) = measured(10_000, 10_000);
        assert_eq!(f.ssthresh(&mut tp), 50);
        tp.prior_cwnd = 120;
        assert_eq!(f.undo_cwnd(&mut tp), 120);
        f.set_state(&mut tp, CaState::Loss);
        tp.cwnd = 1;
        tp.ssthresh = 50;
        f.cong_avoid(&mut tp, 1, 1);
        assert_eq!(tp.cwnd, 2, "Reno slow start in Loss");
        tp.snd_nxt = 77;
        f.set_state(&mut tp, CaState::Open);
        assert!(f.doing_fast_now);
        assert_eq!(f.beg_snd_nxt, 77);
        assert_eq!(f.base_rtt_us(), 10_000, "baseRTT survives a loss episode");
    }
}
