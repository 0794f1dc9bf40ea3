//! YeAH-TCP as Linux runs it (`net/ipv4/tcp_yeah.c`; Baiocchi, Castellani &
//! Vacirca, PFLDnet 2007). Two modes: "fast" grows like Scalable TCP (+1
//! packet per min(cwnd, 100) ACKed) and "slow" like Reno. Once per RTT it
//! estimates its own queue Q = cwnd (RTT - baseRTT) / RTT from Vegas-style
//! measurements (per-RTT minimum, baseRTT the minimum ever): it stays fast
//! while Q <= alpha (80 packets) and the queueing delay is at most baseRTT/phy
//! (1/8), otherwise turns slow and, if Q > alpha, drains the queue at once
//! ("precautionary decongestion": cwnd -= min(Q/gamma, cwnd/2^epsilon)).
//! `reno_count` emulates the window of a competing Reno flow so decongestion
//! never undercuts it. On loss the window loses only the queue it built
//! (between cwnd/2^delta and cwnd/2), unless it has been slow for rho RTTs in a
//! row, a sign of competing Reno traffic, in which case it halves like Reno.

use super::params::{CcaInfo, Params};
use super::vegas::VegasState;
use super::{AckSample, CaEvent, CaState, CongestionControl, TcpSock};
use crate::packet::seq_after;

// Constants of `tcp_yeah.c` (#defines, not module parameters).
/// Packets queued at the bottleneck above which YeAH leaves fast mode.
pub const ALPHA: u32 = 80;
/// Fraction of the queue removed by decongestion (Q / gamma).
pub const GAMMA: u32 = 1;
/// A loss removes at least cwnd >> delta.
pub const DELTA: u32 = 3;
/// Decongestion removes at most cwnd >> epsilon.
pub const EPSILON: u32 = 1;
/// Fast mode needs queueing delay <= baseRTT / phy.
pub const PHY: u32 = 8;
/// Consecutive slow RTTs after which a loss halves cwnd as Reno.
pub const RHO: u32 = 16;
/// Consecutive fast RTTs after which the Reno emulation restarts.
pub const ZETA: u32 = 50;
/// Scalable TCP's growth divisor (Linux TCP_SCALABLE_AI_CNT).
pub const SCALABLE_AI_CNT: u32 = 100;

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "yeah",
        description: "YeAH-TCP: Scalable growth while its queue is small (Q <= 80 packets, delay <= baseRTT/8), Reno otherwise; drains its queue early; on loss removes only its queue unless competing with Reno",
        source: "Linux net/ipv4/tcp_yeah.c; Baiocchi, Castellani, Vacirca, PFLDnet 2007",
        params: vec![],
    }
}

pub fn build(_p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Yeah::default())
}

pub struct Yeah {
    v: VegasState,
    /// Queue estimate (packets) of the last RTT with enough samples.
    last_q: u32,
    /// Consecutive slow (Reno) RTTs; 0 means fast mode.
    doing_reno_now: u32,
    /// Window of the emulated competing Reno flow.
    reno_count: u32,
    /// Consecutive fast RTTs.
    fast_count: u32,
}

impl Default for Yeah {
    fn default() -> Self {
        Yeah { v: VegasState::default(), last_q: 0, doing_reno_now: 0, reno_count: 2, fast_count: 0 }
    }
}

impl Yeah {
    pub fn is_fast(&self) -> bool {
        self.doing_reno_now == 0
    }

    pub fn last_queue(&self) -> u32 {
        self.last_q
    }

    /// The once-per-RTT mode decision.
    fn end_of_rtt(&mut self, tp: &mut TcpSock) {
        let rtt = self.v.min_rtt;
        let base = self.v.base_rtt;
        let queueing_delay = rtt.wrapping_sub(base);
        let queue = (tp.cwnd as u64 * queueing_delay as u64 / rtt as u64) as u32;

        if queue > ALPHA || queueing_delay > base / PHY {
            if queue > ALPHA && tp.cwnd > self.reno_count {
                let reduction = (queue / GAMMA).min(tp.cwnd >> EPSILON);
                tp.cwnd = (tp.cwnd - reduction).max(self.reno_count);
                tp.ssthresh = tp.cwnd;
            }
            if self.reno_count <= 2 {
                self.reno_count = (tp.cwnd >> 1).max(2);
            } else {
                self.reno_count += 1;
            }
            self.doing_reno_now = (self.doing_reno_now + 1).min(0xff_ffff);
        } else {
            self.fast_count += 1;
            if self.fast_count > ZETA {
                self.reno_count = 2;
                self.fast_count = 0;
            }
            self.doing_reno_now = 0;
        }
        self.last_q = queue;
    }
}

impl CongestionControl for Yeah {
    fn name(&self) -> &str {
        "yeah"
    }

    fn init(&mut self, tp: &mut TcpSock) {
        self.v.init(tp);
        self.doing_reno_now = 0;
        self.last_q = 0;
        self.reno_count = 2;
        // Keeps the kernel's x128 arithmetic on cwnd within 32 bits.
        tp.cwnd_clamp = tp.cwnd_clamp.min(u32::MAX / 128);
    }

    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        let half = (tp.cwnd >> 1).max(2);
        let reduction = if self.doing_reno_now < RHO {
            self.last_q.min(half).max(tp.cwnd >> DELTA)
        } else {
            half
        };
        self.fast_count = 0;
        self.reno_count = (self.reno_count >> 1).max(2);
        (tp.cwnd as i64 - reduction as i64).max(2) as u32
    }

    fn cong_avoid(&mut self, tp: &mut TcpSock, ack: u32, acked: u32) {
        if !tp.is_cwnd_limited() {
            return;
        }
        let mut acked = acked;
        if tp.in_slow_start() {
            acked = tp.slow_start(acked);
        }
        if acked > 0 {
            if self.is_fast() {
                tp.cong_avoid_ai(tp.cwnd.min(SCALABLE_AI_CNT), acked);
            } else {
                tp.cong_avoid_ai(tp.cwnd, acked);
            }
        }
        if seq_after(ack, self.v.beg_snd_nxt) {
            // As Vegas: two samples or fewer are likely all delayed ACKs.
            if self.v.cnt_rtt > 2 {
                self.end_of_rtt(tp);
            }
            self.v.beg_snd_una = self.v.beg_snd_nxt;
            self.v.beg_snd_nxt = tp.snd_nxt;
            self.v.beg_snd_cwnd = tp.cwnd;
            self.v.start_next_rtt();
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
mod tests {
    use super::*;
    use crate::cc::vegas::tests::rtt_sample;

    /// YeAH in congestion avoidance with baseRTT 100,001 us.
    fn established(cwnd: u32) -> (Yeah, TcpSock) {
        let mut tp = crate::cc::test_sock(1000, cwnd, 2);
        let mut y = Yeah::default();
        y.init(&mut tp);
        y.pkts_acked(&mut tp, &rtt_sample(100_000));
        y.v.start_next_rtt();
        (y, tp)
    }

    /// One RTT: a window of data is sent, then `cwnd` ACKs of one packet each
    /// with RTT `rtt_us` arrive; the last one crosses the RTT boundary.
    fn one_rtt(y: &mut Yeah, tp: &mut TcpSock, rtt_us: i64) {
        let boundary = y.v.beg_snd_nxt;
        tp.snd_nxt = boundary + tp.cwnd;
        let n = tp.cwnd;
        for i in 1..=n {
            y.pkts_acked(tp, &rtt_sample(rtt_us));
            y.cong_avoid(tp, if i < n { boundary } else { boundary + 1 }, 1);
        }
    }

    #[test]
    fn fast_mode_grows_like_scalable_slow_mode_like_reno() {
        // No queue: fast mode, +1 per 100 packets ACKed once cwnd >= 100.
        let (mut y, mut tp) = established(1000);
        one_rtt(&mut y, &mut tp, 100_000);
        assert!(y.is_fast());
        assert_eq!(tp.cwnd, 1010);
        // Queueing delay above baseRTT/8 with a queue below alpha: slow mode
        // without decongestion (a window of 400 keeps Q below alpha).
        let (mut y, mut tp) = established(400);
        one_rtt(&mut y, &mut tp, 113_000);
        // Q = 404 * 13000 / 113001 = 46 <= 80, but 13 ms > 100 ms / 8.
        assert!(!y.is_fast());
        assert_eq!(y.last_queue(), 46);
        let before = tp.cwnd;
        one_rtt(&mut y, &mut tp, 113_000);
        assert_eq!(tp.cwnd, before + 1, "Reno: one packet per RTT");
        // The queue drains: back to fast mode.
        one_rtt(&mut y, &mut tp, 110_000);
        assert!(y.is_fast());
    }

    #[test]
    fn precautionary_decongestion_drains_the_queue() {
        let (mut y, mut tp) = established(1000);
        // RTT 120 ms over a 100 ms base: Q = 1010 * 20000 / 120001 = 168 > 80.
        one_rtt(&mut y, &mut tp, 120_000);
        assert_eq!(y.last_queue(), 168);
        assert_eq!(tp.cwnd, 1010 - 168);
        assert_eq!(tp.ssthresh, tp.cwnd);
        assert!(!y.is_fast());
        // The Reno emulation starts at half the window.
        assert_eq!(y.reno_count, (1010 - 168) / 2);
    }

    #[test]
    fn decongestion_never_below_the_emulated_reno_window() {
        let (mut y, mut tp) = established(1000);
        y.reno_count = 900;
        one_rtt(&mut y, &mut tp, 120_000);
        assert_eq!(tp.cwnd, 900);
        assert_eq!(y.reno_count, 901);
    }

    #[test]
    fn loss_removes_the_queue_or_halves_when_competing() {
        let (mut y, mut tp) = established(1000);
        // Fast mode, small queue: at least cwnd/8.
        y.last_q = 10;
        assert_eq!(y.ssthresh(&mut tp), 1000 - 125);
        // Larger queue: the queue, at most half.
        y.last_q = 300;
        assert_eq!(y.ssthresh(&mut tp), 700);
        y.last_q = 900;
        assert_eq!(y.ssthresh(&mut tp), 500);
        // Slow for rho RTTs: Reno's halving.
        y.last_q = 10;
        y.doing_reno_now = RHO;
        assert_eq!(y.ssthresh(&mut tp), 500);
        tp.cwnd = 2;
        assert_eq!(y.ssthresh(&mut tp), 2);
    }

    #[test]
    fn too_few_samples_skip_the_decision() {
        let (mut y, mut tp) = established(1000);
        tp.snd_nxt = 1000;
        y.pkts_acked(&mut tp, &rtt_sample(150_000));
        y.cong_avoid(&mut tp, 1, 1);
        assert!(y.is_fast());
        assert_eq!(tp.cwnd, 1000);
        assert_eq!(y.v.beg_snd_nxt, 1000, "the RTT boundary still moves");
    }
}
