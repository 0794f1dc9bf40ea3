//! TCP Veno as Linux runs it (`net/ipv4/tcp_veno.c`; Fu & Liew, IEEE JSAC
//! 21(2), 2003): Reno whose two rules consult a Vegas-style backlog estimate
//! N = cwnd (RTT - baseRTT) / RTT. While N < beta (3 packets) the path is
//! deemed uncongested: cwnd grows like Reno, and a loss is taken as random
//! (wireless) and cuts cwnd to 4/5. Once N >= beta cwnd grows by one packet
//! every other RTT, and a loss halves it. As in Linux, RTT is the smallest
//! sample since the previous ACK (the minimum is cleared on every ACK, not once
//! per RTT), the sample count that enables Veno is never cleared, and N is kept
//! with one fractional bit.

use super::params::{CcaInfo, Params};
use super::vegas::{VegasState, RTT_UNSET};
use super::{AckSample, CaEvent, CaState, CongestionControl, TcpSock};

/// Fractional bits of the backlog estimate (Linux V_PARAM_SHIFT).
const V_PARAM_SHIFT: u32 = 1;
/// Backlog (packets) from which the path counts as congested (Linux `beta` = 3).
pub const BETA_PACKETS: u32 = 3;
const BETA: u32 = BETA_PACKETS << V_PARAM_SHIFT;

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "veno",
        description: "Veno: Reno refined by a Vegas backlog estimate N; N < 3: Reno growth, loss deemed random (cwnd x 4/5); N >= 3: +1 packet every other RTT, loss halves cwnd",
        source: "Linux net/ipv4/tcp_veno.c; Fu & Liew, IEEE JSAC 2003",
        params: vec![],
    }
}

pub fn build(_p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Veno::default())
}

#[derive(Default)]
pub struct Veno {
    /// baseRTT, minRTT and the sample count, sampled as Vegas does; Veno's
    /// `doing_veno_now` is `doing_vegas_now`.
    v: VegasState,
    /// In the congested state, whether the next window's worth of ACKs adds a
    /// packet (Linux `inc`).
    inc: bool,
    /// Backlog estimate N << V_PARAM_SHIFT from the last Veno computation.
    diff: u32,
}

impl Veno {
    /// Linux `veno_enable`: unlike Vegas it keeps the sample count.
    fn enable(&mut self) {
        self.v.doing_vegas_now = true;
        self.v.min_rtt = RTT_UNSET;
    }

    /// Linux `tcp_veno_init`.
    fn reset(&mut self) {
        self.v.base_rtt = RTT_UNSET;
        self.inc = true;
        self.enable();
    }

    /// Backlog estimate N in packets (with its fractional bit), for traces and tests.
    pub fn backlog(&self) -> f64 {
        self.diff as f64 / (1 << V_PARAM_SHIFT) as f64
    }

    /// Growth in the congested state: one packet per two windows of ACKs.
    fn congested_increase(&mut self, tp: &mut TcpSock, acked: u32) {
        if tp.cwnd_cnt >= tp.cwnd {
            if self.inc && tp.cwnd < tp.cwnd_clamp {
                tp.cwnd += 1;
                self.inc = false;
            } else {
                self.inc = true;
            }
            tp.cwnd_cnt = 0;
        } else {
            tp.cwnd_cnt += acked;
        }
    }
}

impl CongestionControl for Veno {
    fn name(&self) -> &str {
        "veno"
    }

    fn init(&mut self, _tp: &mut TcpSock) {
        self.reset();
    }

    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        if self.diff < BETA {
            // Little backlog: the loss was probably not congestion.
            (tp.cwnd * 4 / 5).max(2)
        } else {
            (tp.cwnd >> 1).max(2)
        }
    }

    fn cong_avoid(&mut self, tp: &mut TcpSock, _ack: u32, acked: u32) {
        if !self.v.doing_vegas_now {
            tp.reno_cong_avoid(acked);
            return;
        }
        if !tp.is_cwnd_limited() {
            return;
        }
        if self.v.cnt_rtt <= 2 {
            tp.reno_cong_avoid(acked);
        } else {
            let rtt = self.v.min_rtt as u64;
            let target_cwnd = ((tp.cwnd as u64 * self.v.base_rtt as u64) << V_PARAM_SHIFT) / rtt;
            self.diff = (tp.cwnd << V_PARAM_SHIFT).wrapping_sub(target_cwnd as u32);

            let mut acked = acked;
            if tp.in_slow_start() {
                acked = tp.slow_start(acked);
            }
            if acked > 0 {
                if self.diff < BETA {
                    tp.cong_avoid_ai(tp.cwnd, acked);
                } else {
                    self.congested_increase(tp, acked);
                }
            }
            if tp.cwnd < 2 {
                tp.cwnd = 2;
            } else if tp.cwnd > tp.cwnd_clamp {
                tp.cwnd = tp.cwnd_clamp;
            }
        }
        self.v.min_rtt = RTT_UNSET;
    }

    fn has_cong_avoid(&self) -> bool {
        true
    }

    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        tp.reno_undo_cwnd()
    }

    fn set_state(&mut self, _tp: &mut TcpSock, new_state: CaState) {
        if new_state == CaState::Open {
            self.enable();
        } else {
            self.v.disable();
        }
    }

    fn cwnd_event(&mut self, _tp: &mut TcpSock, ev: CaEvent) {
        if ev == CaEvent::CwndRestart || ev == CaEvent::TxStart {
            self.reset();
        }
    }

    fn pkts_acked(&mut self, _tp: &mut TcpSock, sample: &AckSample) {
        self.v.pkts_acked(sample);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::vegas::tests::rtt_sample;

    /// Veno in congestion avoidance with baseRTT 10,001 us and enough samples.
    fn established(cwnd: u32) -> (Veno, TcpSock) {
        let mut tp = crate::cc::test_sock(1000, cwnd, 2);
        let mut v = Veno::default();
        v.init(&mut tp);
        for _ in 0..3 {
            v.pkts_acked(&mut tp, &rtt_sample(10_000));
        }
        (v, tp)
    }

    /// One ACK of one packet whose RTT was `rtt_us`.
    fn ack(v: &mut Veno, tp: &mut TcpSock, rtt_us: i64) {
        v.pkts_acked(tp, &rtt_sample(rtt_us));
        v.cong_avoid(tp, 0, 1);
    }

    // With cwnd 100 and baseRTT 10,001 us, an RTT of 10,500 us means
    // N = 100 - 100 * 10001 / 10500 = 4.75 packets (diff = 10 in half packets).
    const CONGESTED_RTT: i64 = 10_499;
    const CLEAR_RTT: i64 = 10_000;

    #[test]
    fn backlog_estimate_selects_the_state() {
        let (mut v, mut tp) = established(100);
        ack(&mut v, &mut tp, CLEAR_RTT);
        assert_eq!(v.backlog(), 0.0);
        ack(&mut v, &mut tp, CONGESTED_RTT);
        assert_eq!(v.backlog(), 5.0);
        // N = 100 - 100 * 10001 / 10300 = 2.9: diff = 200 - 194 = 6 = beta.
        ack(&mut v, &mut tp, 10_299);
        assert_eq!(v.backlog(), 3.0);
        // N = 100 - 100 * 10001 / 10250 = 2.4: diff = 200 - 195 = 5 < beta.
        ack(&mut v, &mut tp, 10_249);
        assert_eq!(v.backlog(), 2.5);
    }

    #[test]
    fn random_loss_cuts_a_fifth_congestive_loss_half() {
        let (mut v, mut tp) = established(100);
        // Before any estimate the loss counts as random (Linux starts diff at 0).
        assert_eq!(v.ssthresh(&mut tp), 80);
        ack(&mut v, &mut tp, CLEAR_RTT);
        assert_eq!(v.ssthresh(&mut tp), 80);
        ack(&mut v, &mut tp, CONGESTED_RTT);
        assert_eq!(v.ssthresh(&mut tp), 50);
        tp.cwnd = 3;
        assert_eq!(v.ssthresh(&mut tp), 2);
    }

    #[test]
    fn congested_growth_is_half_of_renos() {
        // Uncongested: +1 per cwnd ACKs, as Reno.
        let (mut v, mut tp) = established(100);
        for _ in 0..201 {
            ack(&mut v, &mut tp, CLEAR_RTT);
        }
        assert_eq!(tp.cwnd, 102);
        // Congested: +1 only every other window of ACKs.
        let (mut v, mut tp) = established(100);
        let mut grew_at = vec![];
        for i in 1..=1000 {
            let before = tp.cwnd;
            ack(&mut v, &mut tp, CONGESTED_RTT);
            if tp.cwnd != before {
                grew_at.push(i);
            }
        }
        assert_eq!(&grew_at[..3], &[101, 305, 511], "one packet per two windows (+1 ACK each)");
        // From 100 to 120 packets takes about twice as many ACKs as Reno needs.
        let acks_to_reach = |rtt_us: i64| {
            let (mut v, mut tp) = established(100);
            let mut n = 0u32;
            while tp.cwnd < 120 {
                ack(&mut v, &mut tp, rtt_us);
                n += 1;
            }
            n
        };
        let (reno_like, congested) = (acks_to_reach(CLEAR_RTT), acks_to_reach(CONGESTED_RTT));
        assert_eq!(reno_like, (100..120).sum::<u32>());
        let ratio = congested as f64 / reno_like as f64;
        assert!((1.9..2.1).contains(&ratio), "{congested} vs {reno_like} ACKs");
    }

    #[test]
    fn reno_until_three_samples_and_outside_open() {
        let mut tp = TcpSock::new(1448, 1000, 10);
        tp.ssthresh = 100;
        tp.is_cwnd_limited = true;
        let mut v = Veno::default();
        v.init(&mut tp);
        // Two samples: Reno slow start, no estimate.
        ack(&mut v, &mut tp, 50_000);
        ack(&mut v, &mut tp, 50_000);
        assert_eq!(tp.cwnd, 12);
        assert_eq!(v.diff, 0);
        // The third sample enables Veno for good: the count is never cleared.
        ack(&mut v, &mut tp, 60_000);
        assert!(v.diff > 0);
        v.set_state(&mut tp, CaState::Recovery);
        assert!(!v.v.doing_vegas_now);
        v.set_state(&mut tp, CaState::Open);
        assert_eq!(v.v.cnt_rtt, 3);
        v.cwnd_event(&mut tp, CaEvent::TxStart);
        assert_eq!(v.v.base_rtt, RTT_UNSET);
    }

    #[test]
    fn minimum_rtt_is_per_ack() {
        let (mut v, mut tp) = established(100);
        ack(&mut v, &mut tp, CLEAR_RTT);
        // The clear sample of the previous ACK no longer counts.
        ack(&mut v, &mut tp, CONGESTED_RTT);
        assert_eq!(v.backlog(), 5.0);
        assert_eq!(v.v.min_rtt, RTT_UNSET);
    }
}
