//! TCP Vegas as Linux runs it (`net/ipv4/tcp_vegas.c`; Brakmo & Peterson, IEEE
//! JSAC 13(8), 1995). Once per RTT Vegas compares the window with what the
//! path would carry without queueing: diff = cwnd (minRTT - baseRTT) / baseRTT
//! packets sit in the bottleneck queue, where baseRTT is the smallest RTT ever
//! seen and minRTT the smallest of the last RTT (the minimum filters out
//! delayed ACKs). In congestion avoidance cwnd grows by one packet per RTT when
//! diff < alpha, shrinks by one when diff > beta, and holds in between; slow
//! start ends as soon as diff > gamma, with cwnd set to the rate actually
//! achieved. With fewer than three RTT samples in the last RTT, outside the
//! Open state, and on loss (ssthresh = cwnd/2) it is Reno. The RTT bookkeeping
//! (`VegasState`) is what Linux exports from this module for YeAH and Veno.

use super::params::{declare_params, CcaInfo, Params};
use super::{AckSample, CaEvent, CaState, CongestionControl, TcpSock};
use crate::packet::seq_after;

/// Linux's "no sample yet" value for `minRTT` / `baseRTT` (0x7fffffff us).
pub const RTT_UNSET: u32 = 0x7fff_ffff;

declare_params! {
    /// Module parameters of `tcp_vegas` with their Linux defaults, in packets.
    pub struct VegasConfig {
        alpha: u32 = 2, range(0, 1 << 20), "grow cwnd while fewer than alpha packets are queued";
        beta: u32 = 4, range(0, 1 << 20), "shrink cwnd while more than beta packets are queued";
        gamma: u32 = 1, range(0, 1 << 20), "leave slow start when more than gamma packets are queued";
    }
}

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "vegas",
        description: "Vegas: delay-based, keeps alpha..beta packets queued (+/-1 packet per RTT), leaves slow start when more than gamma are queued, Reno on loss",
        source: "Linux net/ipv4/tcp_vegas.c; Brakmo & Peterson, IEEE JSAC 1995",
        params: VegasConfig::catalogue(),
    }
}

pub fn build(p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Vegas::new(VegasConfig::from_params(p)))
}

/// Linux `struct vegas` with the helpers `tcp_vegas.h` exports
/// (`tcp_vegas_init`, `tcp_vegas_pkts_acked`, `tcp_vegas_state`,
/// `tcp_vegas_cwnd_event`). RTTs are in microseconds plus one, so that no
/// sample is ever zero.
#[derive(Clone, Debug)]
pub struct VegasState {
    /// Whether the Vegas adjustment runs (only in the Open state).
    pub doing_vegas_now: bool,
    /// RTT samples taken in the current RTT (Linux `u16 cntRTT`).
    pub cnt_rtt: u16,
    /// Smallest RTT of the current RTT.
    pub min_rtt: u32,
    /// Smallest RTT ever seen: the propagation delay.
    pub base_rtt: u32,
    /// SND.NXT at the start of the previous RTT (YeAH keeps it).
    pub beg_snd_una: u32,
    /// SND.NXT at the start of the current RTT: an ACK beyond it ends the RTT.
    pub beg_snd_nxt: u32,
    /// cwnd at the start of the current RTT (YeAH keeps it).
    pub beg_snd_cwnd: u32,
}

impl Default for VegasState {
    fn default() -> Self {
        VegasState {
            doing_vegas_now: false,
            cnt_rtt: 0,
            min_rtt: RTT_UNSET,
            base_rtt: RTT_UNSET,
            beg_snd_una: 0,
            beg_snd_nxt: 0,
            beg_snd_cwnd: 0,
        }
    }
}

impl VegasState {
    /// Linux `vegas_enable`: start measuring a fresh RTT from SND.NXT, so the
    /// first decision uses only ACKs of data sent after this point.
    pub fn enable(&mut self, tp: &TcpSock) {
        self.doing_vegas_now = true;
        self.beg_snd_nxt = tp.snd_nxt;
        self.cnt_rtt = 0;
        self.min_rtt = RTT_UNSET;
    }

    /// Linux `vegas_disable`.
    pub fn disable(&mut self) {
        self.doing_vegas_now = false;
    }

    /// Linux `tcp_vegas_init`: also forgets baseRTT (the path may have changed).
    pub fn init(&mut self, tp: &TcpSock) {
        self.base_rtt = RTT_UNSET;
        self.enable(tp);
    }

    /// Linux `tcp_vegas_pkts_acked`: min-filters the RTT sample into minRTT
    /// (this RTT) and baseRTT (forever).
    pub fn pkts_acked(&mut self, sample: &AckSample) {
        if sample.rtt_us < 0 {
            return;
        }
        let vrtt = (sample.rtt_us as u32).wrapping_add(1);
        if vrtt < self.base_rtt {
            self.base_rtt = vrtt;
        }
        self.min_rtt = self.min_rtt.min(vrtt);
        self.cnt_rtt = self.cnt_rtt.wrapping_add(1);
    }

    /// Linux `tcp_vegas_state`: measurements across a loss episode are stale.
    pub fn set_state(&mut self, tp: &TcpSock, new_state: CaState) {
        if new_state == CaState::Open {
            self.enable(tp);
        } else {
            self.disable();
        }
    }

    /// Linux `tcp_vegas_cwnd_event`: after idle, wait for a full flight of
    /// fresh samples before deciding anything.
    pub fn cwnd_event(&mut self, tp: &TcpSock, ev: CaEvent) {
        if ev == CaEvent::CwndRestart || ev == CaEvent::TxStart {
            self.init(tp);
        }
    }

    /// Clears the per-RTT minimum for the next RTT.
    pub fn start_next_rtt(&mut self) {
        self.cnt_rtt = 0;
        self.min_rtt = RTT_UNSET;
    }
}

pub struct Vegas {
    cfg: VegasConfig,
    v: VegasState,
}

impl Vegas {
    pub fn new(cfg: VegasConfig) -> Vegas {
        Vegas { cfg, v: VegasState::default() }
    }

    pub fn state(&self) -> &VegasState {
        &self.v
    }

    /// The once-per-RTT decision (the `else` branch of Linux's
    /// `tcp_vegas_cong_avoid` when enough samples were taken).
    fn adjust(&mut self, tp: &mut TcpSock, acked: u32) {
        let rtt = self.v.min_rtt;
        let base = self.v.base_rtt;
        // The window the achieved rate would need without queueing.
        let target_cwnd = (tp.cwnd as u64 * base as u64 / rtt as u64) as u32;
        // Packets this flow keeps in the queue (u32 arithmetic, as Linux).
        let diff = tp.cwnd.wrapping_mul(rtt.wrapping_sub(base)) / base;

        if diff > self.cfg.gamma && tp.in_slow_start() {
            // Too fast for slow start: match the achieved rate (+1 for the
            // truncation) and continue in congestion avoidance.
            tp.cwnd = tp.cwnd.min(target_cwnd.wrapping_add(1));
            tp.ssthresh = tp.ssthresh.min(tp.cwnd);
        } else if tp.in_slow_start() {
            tp.slow_start(acked);
        } else if diff > self.cfg.beta {
            tp.cwnd -= 1;
            tp.ssthresh = tp.ssthresh.min(tp.cwnd);
        } else if diff < self.cfg.alpha {
            tp.cwnd += 1;
        }

        if tp.cwnd < 2 {
            tp.cwnd = 2;
        } else if tp.cwnd > tp.cwnd_clamp {
            tp.cwnd = tp.cwnd_clamp;
        }
        tp.ssthresh = tp.current_ssthresh();
    }
}

impl CongestionControl for Vegas {
    fn name(&self) -> &str {
        "vegas"
    }

    fn init(&mut self, tp: &mut TcpSock) {
        self.v.init(tp);
    }

    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        tp.reno_ssthresh()
    }

    fn cong_avoid(&mut self, tp: &mut TcpSock, ack: u32, acked: u32) {
        if !self.v.doing_vegas_now {
            tp.reno_cong_avoid(acked);
            return;
        }
        if seq_after(ack, self.v.beg_snd_nxt) {
            // One RTT has passed: decide, then measure the next one.
            self.v.beg_snd_nxt = tp.snd_nxt;
            // With two samples or fewer they are likely all delayed ACKs.
            if self.v.cnt_rtt <= 2 {
                tp.reno_cong_avoid(acked);
            } else {
                self.adjust(tp, acked);
            }
            self.v.start_next_rtt();
        } else if tp.in_slow_start() {
            tp.slow_start(acked);
        }
    }

    fn has_cong_avoid(&self) -> bool {
        true
    }

    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        tp.reno_undo_cwnd()
    }

    fn set_state(&mut self, tp: &mut TcpSock, new_state: CaState) {
        self.v.set_state(tp, new_state);
    }

    fn cwnd_event(&mut self, tp: &mut TcpSock, ev: CaEvent) {
        self.v.cwnd_event(tp, ev);
    }

    fn pkts_acked(&mut self, _tp: &mut TcpSock, sample: &AckSample) {
        self.v.pkts_acked(sample);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cc::INFINITE_SSTHRESH;

    pub(crate) fn rtt_sample(rtt_us: i64) -> AckSample {
        AckSample { pkts_acked: 1, rtt_us, in_flight: 0 }
    }

    /// A connection in congestion avoidance whose baseRTT is 10,001 us (one
    /// sample of 10 ms), with `snd_nxt` = 1000 and the RTT boundary at 0.
    fn established(cwnd: u32, ssthresh: u32) -> (Vegas, TcpSock) {
        let mut tp = crate::cc::test_sock(1000, cwnd, ssthresh);
        let mut v = Vegas::new(VegasConfig::default());
        v.init(&mut tp);
        v.pkts_acked(&mut tp, &rtt_sample(10_000));
        v.v.start_next_rtt();
        tp.snd_nxt = 1000;
        (v, tp)
    }

    /// Ends one RTT whose samples were all `rtt_us`, returning cwnd.
    fn one_rtt(v: &mut Vegas, tp: &mut TcpSock, samples: u32, rtt_us: i64) -> u32 {
        for _ in 0..samples {
            v.pkts_acked(tp, &rtt_sample(rtt_us));
        }
        let ack = v.state().beg_snd_nxt + 1;
        v.cong_avoid(tp, ack, 1);
        tp.cwnd
    }

    #[test]
    fn alpha_and_beta_bound_the_queue_it_keeps() {
        // diff = 100 (rtt - 10001) / 10001, truncated.
        for &(extra_us, expect) in &[
            (0i64, 101u32), // diff 0 < alpha: +1
            (150, 101),     // diff 1 < alpha: +1
            (201, 100),     // diff 2 = alpha: hold
            (301, 100),     // diff 3: hold
            (401, 100),     // diff 4 = beta: hold
            (501, 99),      // diff 5 > beta: -1
            (5_000, 99),    // diff 49: still only -1 per RTT
        ] {
            let (mut v, mut tp) = established(100, 100);
            let cwnd = one_rtt(&mut v, &mut tp, 3, 10_000 + extra_us);
            assert_eq!(cwnd, expect, "extra delay {extra_us} us");
            // A decrease pulls ssthresh down with cwnd.
            assert_eq!(tp.ssthresh, if expect == 99 { 99 } else { 100 });
        }
        // After each decision ssthresh is at least 3/4 of cwnd (tcp_current_ssthresh).
        let (mut v, mut tp) = established(100, 50);
        assert_eq!(one_rtt(&mut v, &mut tp, 3, 10_301), 100);
        assert_eq!(tp.ssthresh, 75);
    }

    #[test]
    fn adjusts_once_per_rtt_only() {
        let (mut v, mut tp) = established(100, 50);
        assert_eq!(one_rtt(&mut v, &mut tp, 3, 10_000), 101);
        // The boundary moved to snd_nxt and the per-RTT minimum was cleared.
        assert_eq!(v.state().beg_snd_nxt, 1000);
        assert_eq!(v.state().min_rtt, RTT_UNSET);
        assert_eq!(v.state().cnt_rtt, 0);
        // ACKs up to the boundary change nothing in congestion avoidance.
        for ack in 1..=1000 {
            v.pkts_acked(&mut tp, &rtt_sample(10_000));
            v.cong_avoid(&mut tp, ack, 1);
        }
        assert_eq!(tp.cwnd, 101);
        tp.snd_nxt = 2000;
        v.cong_avoid(&mut tp, 1001, 1);
        assert_eq!(tp.cwnd, 102);
        assert_eq!(v.state().beg_snd_nxt, 2000);
    }

    #[test]
    fn leaves_slow_start_when_more_than_gamma_packets_are_queued() {
        // diff = 50 * 500 / 10001 = 2 > gamma: cwnd = 50 * 10001 / 10501 + 1 = 48.
        let (mut v, mut tp) = established(50, INFINITE_SSTHRESH);
        assert_eq!(one_rtt(&mut v, &mut tp, 3, 10_500), 48);
        assert_eq!(tp.ssthresh, 48);
        assert!(!tp.in_slow_start());
        // diff = 50 * 250 / 10001 = 1 = gamma: slow start goes on (+acked).
        let (mut v, mut tp) = established(50, INFINITE_SSTHRESH);
        assert_eq!(one_rtt(&mut v, &mut tp, 3, 10_250), 51);
        assert_eq!(tp.ssthresh, INFINITE_SSTHRESH);
        // Between RTT boundaries slow start continues as Reno's.
        v.cong_avoid(&mut tp, 5, 2);
        assert_eq!(tp.cwnd, 53);
    }

    #[test]
    fn too_few_samples_fall_back_to_reno() {
        // Two samples showing a long queue: Vegas would shrink cwnd, Reno counts.
        let (mut v, mut tp) = established(100, 50);
        assert_eq!(one_rtt(&mut v, &mut tp, 2, 20_000), 100);
        assert_eq!(tp.cwnd_cnt, 1, "Reno's per-ACK credit");
        // A third sample is enough.
        let (mut v, mut tp) = established(100, 50);
        assert_eq!(one_rtt(&mut v, &mut tp, 3, 20_000), 99);
    }

    #[test]
    fn disabled_outside_open_and_reset_on_restart() {
        let (mut v, mut tp) = established(100, 50);
        v.set_state(&mut tp, CaState::Recovery);
        assert!(!v.state().doing_vegas_now);
        tp.cwnd_cnt = 99;
        assert_eq!(one_rtt(&mut v, &mut tp, 3, 20_000), 101, "Reno's +1 despite the queue");
        v.set_state(&mut tp, CaState::Open);
        assert!(v.state().doing_vegas_now);
        assert_eq!(v.state().base_rtt, 10_001, "baseRTT survives a loss episode");

        tp.snd_nxt = 5000;
        v.cwnd_event(&mut tp, CaEvent::TxStart);
        assert_eq!(v.state().base_rtt, RTT_UNSET, "idle restart forgets baseRTT");
        assert_eq!(v.state().beg_snd_nxt, 5000);
        v.cwnd_event(&mut tp, CaEvent::CompleteCwr);
        assert_eq!(v.state().beg_snd_nxt, 5000);
    }

    #[test]
    fn loss_is_reno() {
        let (mut v, mut tp) = established(101, 50);
        assert_eq!(v.ssthresh(&mut tp), 50);
        tp.prior_cwnd = 120;
        assert_eq!(v.undo_cwnd(&mut tp), 120);
    }

    #[test]
    fn cwnd_never_below_two() {
        let (mut v, mut tp) = established(2, 1);
        assert_eq!(one_rtt(&mut v, &mut tp, 3, 1_000_000), 2);
    }
}
