//! TCP-NV ("New Vegas") as Linux runs it (`net/ipv4/tcp_nv.c`, L. Brakmo,
//! 2016), a Vegas successor for data centres. Once per RTT NV compares cwnd with
//! the window the measured rate needs at the smallest RTT: rate = the bytes in
//! flight over the (averaged) RTT, taking the largest rate of the RTT;
//! cwnd_by_slope = rate x min_rtt / mss; max_win = cwnd_by_slope + nv_pad (10
//! packets of queue allowed). Above max_win, and only after enough samples
//! (60 ACKs, or 30 in slow start) and 2 RTTs, it is congestion: growth stops,
//! ssthresh = max_win and cwnd loses 30 % of the excess (at least 2 packets);
//! below max_win - 2, after 20 samples, growth (Reno's, or slower after an RTO)
//! is allowed again. The RTT is averaged 1/2 old + 1/2 new per sample; the
//! minimum is taken over a window restarted every 5 s (x 3/4..5/4, random), and
//! a flow that makes only one sample per RTT raises its own minimum cwnd in
//! steps of 2 up to 80 (TSO / coalescing), halved at each min-RTT reset. Loss:
//! ssthresh = cwnd x 0.8. Reno undo.
//!
//! Differences from the kernel: the rate uses `AckSample::in_flight`, the packets
//! in flight when the acknowledged packet left plus that packet, times the MSS;
//! Linux uses the bytes delivered between that packet's departure and its ACK
//! (`mss x (delivered - prior_delivered)`), the same amount in steady state. The
//! BPF `BASE_RTT` hint (a data centre's known RTT bounds) is never set. The
//! random byte of the reset period comes from the flow's seeded stream.

use super::params::{declare_params, CcaInfo, Params};
use super::{AckSample, CaState, CongestionControl, TcpSock};
use crate::packet::seq_before;
use crate::rng::Rng;

// Constants of `tcp_nv.c` that are not module parameters.
/// Do not grow cwnd within this many packets of max_win (`nv_pad_buffer`).
pub const NV_PAD_BUFFER: u32 = 2;
/// Excess cut per congestion decision x 128 (`nv_cong_dec_mult`, 30 %).
pub const NV_CONG_DEC_MULT: u32 = 30 * 128 / 100;
/// ssthresh = this x max_win / 8 on congestion (`nv_ssthresh_factor`).
pub const NV_SSTHRESH_FACTOR: u32 = 8;
/// New RTT weight x 256 in the average (`nv_rtt_factor`: 1/2 old + 1/2 new).
pub const NV_RTT_FACTOR: u64 = 128;
/// ssthresh = cwnd x this / 1024 on loss (`nv_loss_dec_factor`, 80 %).
pub const NV_LOSS_DEC_FACTOR: u32 = 819;
/// Non-congested decisions before the growth rate doubles when it is below
/// one packet per RTT (`nv_cwnd_growth_rate_neg`).
pub const NV_CWND_GROWTH_RATE_NEG: u32 = 8;
/// The same above one packet per RTT; 0 = fixed, as Reno (`nv_cwnd_growth_rate_pos`).
pub const NV_CWND_GROWTH_RATE_POS: u32 = 0;
/// Samples before a decrease (`nv_dec_eval_min_calls`).
pub const NV_DEC_EVAL_MIN_CALLS: u8 = 60;
/// Samples before an increase (`nv_inc_eval_min_calls`).
pub const NV_INC_EVAL_MIN_CALLS: u8 = 20;
/// Samples before leaving slow start on congestion (`nv_ssthresh_eval_min_calls`).
pub const NV_SSTHRESH_EVAL_MIN_CALLS: u8 = 30;
/// RTTs of growth after a non-congested decision (`nv_stop_rtt_cnt`).
pub const NV_STOP_RTT_CNT: u8 = 10;
/// RTTs before a congestion decision (`nv_rtt_min_cnt`).
pub const NV_RTT_MIN_CNT: u8 = 2;
/// `NV_INIT_RTT`, `NV_MIN_CWND`, `NV_MIN_CWND_GROW`, `NV_TSO_CWND_BOUND`.
pub const NV_INIT_RTT: u32 = u32::MAX;
pub const NV_MIN_CWND: u8 = 4;
pub const NV_MIN_CWND_GROW: u8 = 2;
pub const NV_TSO_CWND_BOUND: u8 = 80;

declare_params! {
    /// Module parameters of `tcp_nv` with their Linux defaults.
    pub struct NvConfig {
        nv_pad: u32 = 10, range(0, 1 << 20), "max queued packets allowed in network";
        /// The actual period is drawn from [3/4, 5/4) of it at each reset.
        nv_reset_period: u32 = 5, range(1, 1000), "nv_min_rtt reset period (secs)";
        nv_min_cwnd: u32 = 2, range(1, 1 << 20), "NV will not decrease cwnd below this value without losses";
    }
}

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "nv",
        description: "TCP-NV: Vegas successor for data centres; once per RTT cwnd above rate x minRTT + 10 packets loses 30 % of the excess, growth (Reno's) only below; loss: cwnd x 0.8",
        source: "Linux net/ipv4/tcp_nv.c (Brakmo, 2016)",
        params: NvConfig::catalogue(),
    }
}

pub fn build(p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Nv::new(NvConfig::from_params(p)))
}

/// Linux `struct tcpnv`; RTTs in us, sequence numbers in segments.
pub struct Nv {
    cfg: NvConfig,
    rng: Rng,
    min_rtt_reset_jiffies: u32,
    /// Current growth factor; < 0: less than one packet per RTT.
    cwnd_growth_factor: i8,
    allow_cwnd_growth: bool,
    reset: bool,
    catchup: bool,
    eval_call_cnt: u8,
    /// NV's own floor for decisions (grows with coalescing; not `nv_min_cwnd`).
    min_cwnd: u8,
    rtt_cnt: u8,
    last_rtt: u32,
    min_rtt: u32,
    min_rtt_new: u32,
    /// Largest rate of the current RTT, in 100 bit/s.
    rtt_max_rate: u32,
    rtt_start_seq: u32,
    last_snd_una: u32,
    no_cong_cnt: u32,
}

impl Nv {
    pub fn new(cfg: NvConfig) -> Nv {
        Nv {
            cfg,
            rng: Rng::stream(0, "nv"),
            min_rtt_reset_jiffies: 0,
            cwnd_growth_factor: 0,
            allow_cwnd_growth: true,
            reset: false,
            catchup: false,
            eval_call_cnt: 0,
            min_cwnd: NV_MIN_CWND,
            rtt_cnt: 0,
            last_rtt: 0,
            min_rtt: NV_INIT_RTT,
            min_rtt_new: NV_INIT_RTT,
            rtt_max_rate: 0,
            rtt_start_seq: 0,
            last_snd_una: 0,
            no_cong_cnt: 0,
        }
    }

    /// Active minimum RTT (us), for traces and tests.
    pub fn min_rtt_us(&self) -> u32 {
        self.min_rtt
    }

    pub fn allow_cwnd_growth(&self) -> bool {
        self.allow_cwnd_growth
    }

    /// Linux `tcpnv_reset`.
    fn nv_reset(&mut self, tp: &TcpSock) {
        self.reset = false;
        self.no_cong_cnt = 0;
        self.rtt_cnt = 0;
        self.last_rtt = 0;
        self.rtt_max_rate = 0;
        self.rtt_start_seq = tp.snd_una;
        self.eval_call_cnt = 0;
        self.last_snd_una = tp.snd_una;
    }

    /// The once-per-RTT decision of `tcpnv_acked`; `segs_acked` is what this
    /// ACK advanced snd_una by.
    fn decide(&mut self, tp: &mut TcpSock, segs_acked: u32) {
        self.rtt_start_seq = tp.snd_nxt;
        self.rtt_cnt = self.rtt_cnt.saturating_add(1);
        // One sample in a whole RTT: the window is too small for the ACKs to
        // say anything (coalescing), so NV raises its own floor.
        if self.eval_call_cnt == 1
            && segs_acked >= (self.min_cwnd as u32).saturating_sub(1)
            && self.min_cwnd < NV_TSO_CWND_BOUND + 1
        {
            self.min_cwnd = (self.min_cwnd + NV_MIN_CWND_GROW).min(NV_TSO_CWND_BOUND + 1);
            self.rtt_start_seq = tp.snd_nxt.wrapping_add(self.min_cwnd as u32);
            self.eval_call_cnt = 0;
            self.allow_cwnd_growth = true;
            return;
        }
        // cwnd_by_slope = rate / (80000 x mss / min_rtt), rate in 100 bit/s.
        let cwnd_by_slope = (self.rtt_max_rate as u64 * self.min_rtt as u64 / (80_000 * tp.mss as u64)) as u32;
        let max_win = cwnd_by_slope.wrapping_add(self.cfg.nv_pad);

        if tp.cwnd > max_win {
            if self.rtt_cnt < NV_RTT_MIN_CNT {
                return;
            } else if tp.ssthresh == super::INFINITE_SSTHRESH {
                if self.eval_call_cnt < NV_SSTHRESH_EVAL_MIN_CALLS {
                    return;
                }
            } else if self.eval_call_cnt < NV_DEC_EVAL_MIN_CALLS {
                if self.allow_cwnd_growth && self.rtt_cnt > NV_STOP_RTT_CNT {
                    self.allow_cwnd_growth = false;
                }
                return;
            }
            // Enough data: congested.
            self.allow_cwnd_growth = false;
            tp.ssthresh = NV_SSTHRESH_FACTOR.wrapping_mul(max_win) >> 3;
            if tp.cwnd - max_win > 2 {
                let dec = ((tp.cwnd - max_win).wrapping_mul(NV_CONG_DEC_MULT) >> 7).max(2);
                tp.cwnd -= dec;
            } else if NV_CONG_DEC_MULT > 0 {
                tp.cwnd = max_win;
            }
            if self.cwnd_growth_factor > 0 {
                self.cwnd_growth_factor = 0;
            }
            self.no_cong_cnt = 0;
        } else if tp.cwnd <= max_win.wrapping_sub(NV_PAD_BUFFER) {
            if self.eval_call_cnt < NV_INC_EVAL_MIN_CALLS {
                return;
            }
            self.allow_cwnd_growth = true;
            self.no_cong_cnt += 1;
            // The growth rate doubles after this many non-congested decisions
            // (0: never), below or above one packet per RTT.
            let rate = if self.cwnd_growth_factor < 0 { NV_CWND_GROWTH_RATE_NEG } else { NV_CWND_GROWTH_RATE_POS };
            if rate > 0 && self.no_cong_cnt > rate {
                self.cwnd_growth_factor += 1;
                self.no_cong_cnt = 0;
            }
        } else {
            // Between max_win - 2 and max_win: hold.
            return;
        }
        self.eval_call_cnt = 0;
        self.rtt_cnt = 0;
        self.rtt_max_rate = 0;
        if tp.cwnd < self.cfg.nv_min_cwnd {
            tp.cwnd = self.cfg.nv_min_cwnd;
        }
    }
}

impl CongestionControl for Nv {
    fn name(&self) -> &str {
        "nv"
    }

    /// Linux `tcpnv_init` (no BPF base-RTT hint).
    fn init(&mut self, tp: &mut TcpSock) {
        self.nv_reset(tp);
        self.rng = Rng::stream(tp.flow_seed, "nv");
        self.allow_cwnd_growth = true;
        self.min_rtt_reset_jiffies = tp.jiffies.wrapping_add(2 * tp.hz);
        self.min_rtt = NV_INIT_RTT;
        self.min_rtt_new = NV_INIT_RTT;
        self.min_cwnd = NV_MIN_CWND;
        self.catchup = false;
        self.cwnd_growth_factor = 0;
    }

    /// Linux `tcpnv_recalc_ssthresh`.
    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        (tp.cwnd.wrapping_mul(NV_LOSS_DEC_FACTOR) >> 10).max(2)
    }

    /// Linux `tcpnv_cong_avoid`.
    fn cong_avoid(&mut self, tp: &mut TcpSock, _ack: u32, acked: u32) {
        if !tp.is_cwnd_limited() || !self.allow_cwnd_growth {
            return;
        }
        let mut acked = acked;
        if tp.in_slow_start() {
            acked = tp.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        let cnt = if self.cwnd_growth_factor < 0 {
            tp.cwnd << (-self.cwnd_growth_factor) as u32
        } else {
            (tp.cwnd >> self.cwnd_growth_factor as u32).max(4)
        };
        tp.cong_avoid_ai(cnt, acked);
    }

    fn has_cong_avoid(&self) -> bool {
        true
    }

    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        tp.reno_undo_cwnd()
    }

    /// Linux `tcpnv_state`.
    fn set_state(&mut self, tp: &mut TcpSock, new_state: CaState) {
        if new_state == CaState::Open && self.reset {
            self.nv_reset(tp);
        } else if matches!(new_state, CaState::Loss | CaState::Cwr | CaState::Recovery) {
            self.reset = true;
            self.allow_cwnd_growth = false;
            if new_state == CaState::Loss {
                // Back to Reno's rate, then slower with each RTO.
                if self.cwnd_growth_factor > 0 {
                    self.cwnd_growth_factor = 0;
                }
                if NV_CWND_GROWTH_RATE_NEG > 0 && self.cwnd_growth_factor > -8 {
                    self.cwnd_growth_factor -= 1;
                }
            }
        }
    }

    /// Linux `tcpnv_acked`.
    fn pkts_acked(&mut self, tp: &mut TcpSock, sample: &AckSample) {
        if sample.rtt_us < 0 {
            return;
        }
        if !matches!(tp.ca_state, CaState::Open | CaState::Disorder) {
            return;
        }
        if self.catchup && tp.cwnd >= self.cfg.nv_min_cwnd {
            self.catchup = false;
            self.allow_cwnd_growth = false;
        }
        let segs_acked = tp.snd_una.wrapping_sub(self.last_snd_una);
        self.last_snd_una = tp.snd_una;

        let rtt_us = sample.rtt_us.min(u32::MAX as i64) as u32;
        let avg_rtt = if self.last_rtt > 0 {
            ((rtt_us as u64 * NV_RTT_FACTOR + self.last_rtt as u64 * (256 - NV_RTT_FACTOR)) >> 8) as u32
        } else {
            self.min_rtt = rtt_us << 1;
            rtt_us
        };
        self.last_rtt = avg_rtt;

        // Rate in 100 bit/s from the bytes in flight (see the module doc).
        let in_flight_bytes = (sample.in_flight as u64 + 1) * tp.mss as u64;
        let rate = (in_flight_bytes * 8_000_000 / (avg_rtt.wrapping_mul(100) as u64).max(1)) as u32;
        if self.rtt_max_rate < rate {
            self.rtt_max_rate = rate;
        }
        self.eval_call_cnt = self.eval_call_cnt.saturating_add(1);
        if avg_rtt < self.min_rtt {
            self.min_rtt = avg_rtt;
        }
        if avg_rtt < self.min_rtt_new {
            self.min_rtt_new = avg_rtt;
        }

        // A warm restart of the minimum every 3/4..5/4 reset periods.
        if (tp.jiffies.wrapping_sub(self.min_rtt_reset_jiffies) as i32) >= 0 {
            self.min_rtt = self.min_rtt_new;
            self.min_rtt_new = NV_INIT_RTT;
            let rand = self.rng.below(256) as u32;
            self.min_rtt_reset_jiffies =
                tp.jiffies.wrapping_add((self.cfg.nv_reset_period * (384 + rand) * tp.hz) >> 9);
            self.min_cwnd = (self.min_cwnd / 2).max(NV_MIN_CWND);
        }

        if seq_before(self.rtt_start_seq, tp.snd_una) {
            self.decide(tp, segs_acked);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An NV in congestion avoidance with `min_rtt` 10 ms and cwnd `cwnd`.
    fn nv(cwnd: u32) -> (Nv, TcpSock) {
        let mut tp = crate::cc::test_sock(1000, cwnd, 50);
        let mut n = Nv::new(NvConfig::default());
        n.init(&mut tp);
        (n, tp)
    }

    /// `calls` ACKs of one packet each, RTT `rtt_us`, `in_flight` packets in
    /// flight before each acknowledged packet, then the ACK that ends the RTT.
    fn one_rtt(n: &mut Nv, tp: &mut TcpSock, calls: u32, rtt_us: i64, in_flight: u32) {
        n.rtt_start_seq = tp.snd_una + calls;
        for _ in 0..=calls {
            tp.snd_una += 1;
            tp.snd_nxt = tp.snd_una + tp.cwnd;
            n.pkts_acked(tp, &AckSample { pkts_acked: 1, rtt_us, in_flight });
        }
    }

    #[test]
    fn congestion_cuts_30_percent_of_the_excess_over_rate_times_min_rtt_plus_pad() {
        let (mut n, mut tp) = nv(200);
        // min_rtt 10 ms, RTTs of 20 ms with 99 + 1 packets in flight:
        // rate x min_rtt = 50 packets, max_win = 60.
        n.min_rtt = 10_000;
        n.last_rtt = 20_000;
        n.rtt_cnt = 1;
        one_rtt(&mut n, &mut tp, 70, 20_000, 99);
        assert_eq!(n.min_rtt_us(), 10_000);
        // dec = (200 - 60) x 38 / 128 = 41; ssthresh = max_win.
        assert_eq!(tp.cwnd, 159);
        assert_eq!(tp.ssthresh, 60);
        assert!(!n.allow_cwnd_growth());
    }

    #[test]
    fn no_decision_before_enough_samples_and_rtts() {
        let (mut n, mut tp) = nv(200);
        n.min_rtt = 10_000;
        n.last_rtt = 20_000;
        // First RTT: rtt_cnt = 1 < 2, no decision.
        one_rtt(&mut n, &mut tp, 70, 20_000, 99);
        assert_eq!(tp.cwnd, 200);
        // With 59 samples (< 60) outside slow start, growth stops only after 10 RTTs.
        n.eval_call_cnt = 0;
        one_rtt(&mut n, &mut tp, 40, 20_000, 99);
        assert_eq!(tp.cwnd, 200);
        assert!(n.allow_cwnd_growth());
    }

    #[test]
    fn growth_resumes_below_max_win_minus_the_pad_buffer() {
        let (mut n, mut tp) = nv(40);
        tp.ssthresh = 20;
        n.allow_cwnd_growth = false;
        n.min_rtt = 10_000;
        n.last_rtt = 10_000;
        // 99 + 1 in flight at 10 ms: max_win = 110 > 40 + 2.
        one_rtt(&mut n, &mut tp, 25, 10_000, 99);
        assert!(n.allow_cwnd_growth());
        assert_eq!(tp.cwnd, 40);
        // Then it grows like Reno: one packet per cwnd acknowledged.
        for _ in 0..40 {
            n.cong_avoid(&mut tp, 0, 1);
        }
        assert_eq!(tp.cwnd, 41);
    }

    #[test]
    fn loss_cuts_to_80_percent_and_slows_growth_after_an_rto() {
        let (mut n, mut tp) = nv(100);
        assert_eq!(n.ssthresh(&mut tp), 79);
        n.set_state(&mut tp, CaState::Recovery);
        assert!(!n.allow_cwnd_growth());
        assert_eq!(n.cwnd_growth_factor, 0);
        n.set_state(&mut tp, CaState::Loss);
        assert_eq!(n.cwnd_growth_factor, -1);
        // Growth factor -1: +1 packet per 2 cwnd acknowledged.
        n.allow_cwnd_growth = true;
        for _ in 0..199 {
            n.cong_avoid(&mut tp, 0, 1);
        }
        assert_eq!(tp.cwnd, 100);
        n.cong_avoid(&mut tp, 0, 1);
        assert_eq!(tp.cwnd, 101);
        n.set_state(&mut tp, CaState::Open);
        assert!(!n.reset);
    }

    #[test]
    fn min_rtt_restarts_every_3_4_to_5_4_periods_from_the_flows_stream() {
        let (mut n, mut tp) = nv(100);
        tp.flow_seed = 7;
        n.init(&mut tp);
        assert_eq!(n.min_rtt_reset_jiffies, 2000);
        n.pkts_acked(&mut tp, &AckSample { pkts_acked: 1, rtt_us: 30_000, in_flight: 10 });
        tp.jiffies = 2000;
        n.pkts_acked(&mut tp, &AckSample { pkts_acked: 1, rtt_us: 20_000, in_flight: 10 });
        // The new minimum is what was seen since the last reset (averaged RTTs).
        assert_eq!(n.min_rtt_us(), 25_000);
        let next = n.min_rtt_reset_jiffies - 2000;
        assert!((3750..6250).contains(&next), "{next}");
        // Same seed, same period.
        let (mut m, mut tq) = nv(100);
        tq.flow_seed = 7;
        m.init(&mut tq);
        m.pkts_acked(&mut tq, &AckSample { pkts_acked: 1, rtt_us: 30_000, in_flight: 10 });
        tq.jiffies = 2000;
        m.pkts_acked(&mut tq, &AckSample { pkts_acked: 1, rtt_us: 20_000, in_flight: 10 });
        assert_eq!(m.min_rtt_reset_jiffies, n.min_rtt_reset_jiffies);
    }
}
