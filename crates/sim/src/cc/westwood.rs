//! TCP Westwood+ as Linux runs it (`net/ipv4/tcp_westwood.c`; Mascolo et al.,
//! MobiCom 2001; Grieco & Mascolo, CCR 2004). Growth is Reno's; what changes
//! is the window after a loss. Westwood+ counts the bytes acknowledged over
//! windows of at least one RTT (and at least 50 ms), turns each window into a
//! bandwidth sample and smooths the samples twice with a 7/8 EWMA. At the end
//! of a recovery episode it sets cwnd = ssthresh = BWE x RTTmin / mss, the
//! window that just fills the pipe without queue, instead of Reno's cwnd/2;
//! after an RTO ssthresh gets that value. Duplicate ACKs count one segment
//! each and are taken back from the next cumulative ACK. As in Linux, times
//! are in jiffies, the estimate in bytes per jiffy, RTTmin is the smallest of
//! the per-ACK RTT samples (reset after an RTO), and Reno's halving still
//! applies at the start of recovery.

use super::params::{CcaInfo, Params};
use super::{AckSample, CaEvent, CongestionControl, TcpSock, CA_ACK_SLOWPATH};
use crate::units::usecs_to_jiffies;

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "westwood",
        description: "Westwood+: Reno growth; after recovery cwnd = ssthresh = bandwidth estimate x min RTT (ACKed bytes per RTT, two-stage 7/8 EWMA)",
        source: "Linux net/ipv4/tcp_westwood.c; Mascolo et al., MobiCom 2001; Grieco & Mascolo, CCR 2004",
        params: vec![],
    }
}

pub fn build(_p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Westwood::default())
}

/// Linux `westwood_do_filter`: a 7/8 EWMA.
fn ewma(a: u32, b: u32) -> u32 {
    (7u32.wrapping_mul(a).wrapping_add(b)) >> 3
}

#[derive(Default)]
pub struct Westwood {
    /// First-stage and final bandwidth estimates, bytes per jiffy.
    bw_ns_est: u32,
    bw_est: u32,
    /// Jiffies when the current measurement window started.
    rtt_win_sx: u32,
    /// Bytes acknowledged in the current window.
    bk: u32,
    /// SND.UNA (segments) at the previous ACK.
    snd_una: u32,
    cumul_ack: u32,
    /// Bytes credited for duplicate ACKs, to be taken back.
    accounted: u32,
    /// Latest RTT sample and the smallest, jiffies.
    rtt: u32,
    rtt_min: u32,
    first_ack: bool,
    reset_rtt_min: bool,
}

impl Westwood {
    /// Linux TCP_WESTWOOD_RTT_MIN: the shortest measurement window, HZ/20 (50 ms).
    fn min_window(hz: u32) -> u32 {
        hz / 20
    }

    /// Linux `westwood_filter`: the first sample fills both stages.
    fn filter(&mut self, delta: u32) {
        let sample = self.bk / delta;
        if self.bw_ns_est == 0 && self.bw_est == 0 {
            self.bw_ns_est = sample;
            self.bw_est = sample;
        } else {
            self.bw_ns_est = ewma(self.bw_ns_est, sample);
            self.bw_est = ewma(self.bw_est, self.bw_ns_est);
        }
    }

    /// Linux `westwood_update_window`: closes the window once it spans an RTT.
    fn update_window(&mut self, tp: &TcpSock) {
        if self.first_ack {
            // The first sample must not count bytes acknowledged before init.
            self.snd_una = tp.snd_una;
            self.first_ack = false;
        }
        let delta = tp.jiffies.wrapping_sub(self.rtt_win_sx);
        if self.rtt != 0 && delta > self.rtt.max(Self::min_window(tp.hz)) {
            self.filter(delta);
            self.bk = 0;
            self.rtt_win_sx = tp.jiffies;
        }
    }

    fn update_rtt_min(&mut self) {
        if self.reset_rtt_min {
            self.rtt_min = self.rtt;
            self.reset_rtt_min = false;
        } else {
            self.rtt_min = self.rtt_min.min(self.rtt);
        }
    }

    /// Linux `westwood_acked_count`: bytes this ACK stands for. A duplicate ACK
    /// stands for one segment that left the network; the cumulative ACK that
    /// later covers it must not count that segment again.
    fn acked_count(&mut self, tp: &TcpSock) -> u32 {
        let mss = tp.mss;
        self.cumul_ack = tp.snd_una.wrapping_sub(self.snd_una).wrapping_mul(mss);
        if self.cumul_ack == 0 {
            self.accounted = self.accounted.wrapping_add(mss);
            self.cumul_ack = mss;
        }
        if self.cumul_ack > mss {
            if self.accounted >= self.cumul_ack {
                self.accounted -= self.cumul_ack;
                self.cumul_ack = mss;
            } else {
                self.cumul_ack -= self.accounted;
                self.accounted = 0;
            }
        }
        self.snd_una = tp.snd_una;
        self.cumul_ack
    }

    /// Linux `tcp_westwood_bw_rttmin`: BWE x RTTmin in packets, at least 2.
    fn bw_rttmin(&self, tp: &TcpSock) -> u32 {
        (self.bw_est.wrapping_mul(self.rtt_min) / tp.mss).max(2)
    }
}

impl CongestionControl for Westwood {
    fn name(&self) -> &str {
        "westwood"
    }

    fn init(&mut self, tp: &mut TcpSock) {
        self.bk = 0;
        self.bw_ns_est = 0;
        self.bw_est = 0;
        self.accounted = 0;
        self.cumul_ack = 0;
        self.reset_rtt_min = true;
        // Linux TCP_WESTWOOD_INIT_RTT: 20 s, replaced by the first sample.
        self.rtt = 20 * tp.hz;
        self.rtt_min = self.rtt;
        self.rtt_win_sx = tp.jiffies;
        self.snd_una = tp.snd_una;
        self.first_ack = true;
    }

    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        tp.reno_ssthresh()
    }

    fn cong_avoid(&mut self, tp: &mut TcpSock, _ack: u32, acked: u32) {
        tp.reno_cong_avoid(acked);
    }

    fn has_cong_avoid(&self) -> bool {
        true
    }

    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        tp.reno_undo_cwnd()
    }

    fn in_ack_event(&mut self, tp: &mut TcpSock, flags: u32) {
        self.update_window(tp);
        if flags & CA_ACK_SLOWPATH != 0 {
            let acked = self.acked_count(tp);
            self.bk = self.bk.wrapping_add(acked);
        } else {
            let advanced = tp.snd_una.wrapping_sub(self.snd_una).wrapping_mul(tp.mss);
            self.bk = self.bk.wrapping_add(advanced);
            self.snd_una = tp.snd_una;
        }
        self.update_rtt_min();
    }

    fn cwnd_event(&mut self, tp: &mut TcpSock, ev: CaEvent) {
        match ev {
            CaEvent::CompleteCwr => {
                tp.ssthresh = self.bw_rttmin(tp);
                tp.cwnd = tp.ssthresh;
            }
            CaEvent::Loss => {
                tp.ssthresh = self.bw_rttmin(tp);
                // The path may have changed: take the next sample as RTTmin.
                self.reset_rtt_min = true;
            }
            _ => {}
        }
    }

    fn pkts_acked(&mut self, tp: &mut TcpSock, sample: &AckSample) {
        if sample.rtt_us > 0 {
            self.rtt = usecs_to_jiffies(sample.rtt_us as u64, tp.hz) as u32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::vegas::tests::rtt_sample;
    use crate::cc::CA_ACK_WIN_UPDATE;

    const HZ: u32 = 1000;
    const MSS: u32 = 1000;

    fn connected() -> (Westwood, TcpSock) {
        let mut tp = TcpSock::new(MSS, HZ, 10);
        tp.jiffies = 1000;
        tp.is_cwnd_limited = true;
        let mut w = Westwood::default();
        w.init(&mut tp);
        (w, tp)
    }

    /// One fast-path ACK per jiffy advancing SND.UNA by `segs`, with RTT `rtt_ms`.
    fn acks(w: &mut Westwood, tp: &mut TcpSock, jiffies: u32, segs: u32, rtt_ms: i64) {
        for _ in 0..jiffies {
            tp.jiffies += 1;
            tp.snd_una += segs;
            w.in_ack_event(tp, CA_ACK_WIN_UPDATE);
            w.pkts_acked(tp, &rtt_sample(rtt_ms * 1000));
        }
    }

    #[test]
    fn first_sample_fills_the_filter_then_two_stage_ewma() {
        let (mut w, mut tp) = connected();
        // 2 segments (2,000 bytes) per jiffy, RTT 100 ms. The window closes on the
        // first ACK more than 100 jiffies after it opened, holding the bytes of
        // the ACKs before it; the first ACK after init only sets the reference.
        acks(&mut w, &mut tp, 101, 2, 100);
        assert_eq!((w.bw_ns_est, w.bw_est), (99 * 2000 / 101, 99 * 2000 / 101));
        assert_eq!(w.bw_est, 1960);
        // The rate halves: sample (2000 + 100 x 1000) / 101 = 1009, then 1000.
        acks(&mut w, &mut tp, 101, 1, 100);
        assert_eq!((w.bw_ns_est, w.bw_est), ((7 * 1960 + 1009) / 8, (7 * 1960 + 1841) / 8));
        acks(&mut w, &mut tp, 101, 1, 100);
        assert_eq!((w.bw_ns_est, w.bw_est), ((7 * 1841 + 1000) / 8, (7 * 1945 + 1735) / 8));
        // Converges to the new rate, 1,000 bytes per jiffy (less the truncation).
        for _ in 0..200 {
            acks(&mut w, &mut tp, 101, 1, 100);
        }
        assert!((980..=1000).contains(&w.bw_est), "bw_est {}", w.bw_est);
    }

    #[test]
    fn window_is_at_least_50_ms() {
        // RTT 10 ms: the first window closes after 51 jiffies, not 11.
        let (mut w, mut tp) = connected();
        acks(&mut w, &mut tp, 50, 1, 10);
        assert_eq!(w.bw_est, 0);
        acks(&mut w, &mut tp, 1, 1, 10);
        assert_eq!(w.bw_est, 49 * MSS / 51);
        assert_eq!(w.rtt_win_sx, tp.jiffies);
        assert_eq!(w.rtt_min, 10);
    }

    #[test]
    fn duplicate_acks_count_once() {
        let (mut w, mut tp) = connected();
        w.in_ack_event(&mut tp, CA_ACK_WIN_UPDATE);
        assert_eq!(w.bk, 0);
        // Three duplicate ACKs count three segments...
        for _ in 0..3 {
            w.in_ack_event(&mut tp, CA_ACK_SLOWPATH);
        }
        assert_eq!(w.bk, 3 * MSS);
        // ...which the cumulative ACK covering five segments then counts only twice.
        tp.snd_una += 5;
        w.in_ack_event(&mut tp, CA_ACK_SLOWPATH);
        assert_eq!(w.bk, 5 * MSS);
        assert_eq!(w.accounted, 0);
        // A cumulative ACK smaller than what was credited counts one segment.
        for _ in 0..4 {
            w.in_ack_event(&mut tp, CA_ACK_SLOWPATH);
        }
        tp.snd_una += 2;
        w.in_ack_event(&mut tp, CA_ACK_SLOWPATH);
        assert_eq!(w.bk, 10 * MSS);
        assert_eq!(w.accounted, 2 * MSS);
    }

    #[test]
    fn recovery_ends_at_bandwidth_times_min_rtt() {
        let (mut w, mut tp) = connected();
        // 10 segments per ms (10 MB/s) with RTT 40 ms: BDP = 400 segments.
        for _ in 0..40 {
            acks(&mut w, &mut tp, 41, 10, 40);
        }
        assert_eq!(w.rtt_min, 40);
        assert!((w.bw_est as i64 - 10_000).abs() <= 300, "bw_est {}", w.bw_est);
        tp.cwnd = 1000;
        assert_eq!(w.ssthresh(&mut tp), 500, "Reno's halving on entering recovery");
        tp.ssthresh = 500;
        w.cwnd_event(&mut tp, CaEvent::CompleteCwr);
        assert_eq!(tp.cwnd, w.bw_est * 40 / MSS);
        assert_eq!(tp.ssthresh, tp.cwnd);
        assert!((390..=400).contains(&tp.cwnd), "cwnd {}", tp.cwnd);
        // An RTO sets ssthresh only, and makes the latest RTT sample the new RTTmin
        // at the next ACK, even if larger.
        tp.cwnd = 1;
        w.pkts_acked(&mut tp, &rtt_sample(80_000));
        w.cwnd_event(&mut tp, CaEvent::Loss);
        assert_eq!(tp.cwnd, 1);
        assert!((390..=400).contains(&tp.ssthresh));
        w.in_ack_event(&mut tp, CA_ACK_WIN_UPDATE);
        assert_eq!(w.rtt_min, 80);
    }

    #[test]
    fn never_below_two_packets() {
        let (mut w, mut tp) = connected();
        w.cwnd_event(&mut tp, CaEvent::CompleteCwr);
        assert_eq!((tp.cwnd, tp.ssthresh), (2, 2));
    }
}
