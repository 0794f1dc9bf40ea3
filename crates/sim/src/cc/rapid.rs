//! RAPID (Konda and Kaur, "RAPID: Shrinking the Congestion-Control Timescale",
//! IEEE INFOCOM 2009; Yin, Kaur and Smith, "TCP Rapid: From Theory to
//! Practice"): a rate-based protocol that probes continuously. Every packet
//! belongs to a p-stream of N packets sent at geometrically increasing rates
//! whose mean is the current average rate; the receive gaps of each p-stream
//! show the lowest probing rate at which queueing delay starts to grow for good
//! (an "excursion"), which is the available-bandwidth estimate, and the next
//! p-stream's average rate follows it. cwnd is only a safety cap.
//!
//! What comes from the sources and what is reconstructed:
//! * from the sources: p-streams of N packets (80 in the prototype tests),
//!   geometric probing rates, continuous probing (p-streams back to back), the
//!   estimate from send vs receive gaps with a valid-excursion length (4 or 8
//!   packets), a gap threshold (1, 3 or 10 us) and smoothing of the gaps (mean of
//!   8 gaps, or EWMA 0.875), per-packet receive timestamps, loss repair by the
//!   standard TCP machinery, and that the Linux prototype sends no p-streams in
//!   the Recovery and Loss states (`probe_in_recovery = false`), which is what
//!   let one of two flows starve (736 vs 2.84 Mbps on the UNC testbed);
//! * reconstructed (the exact formulas were not in the sources we could read):
//!   the rate range of a p-stream (`rate_spread` = highest / lowest probing
//!   rate, with the harmonic mean of the rates equal to the average rate), the
//!   update `r_avg += gain x (ABest - r_avg)`, ABest = the rate at the start of
//!   the excursion that lasts to the end of the p-stream (or the highest
//!   probing rate if none), capped by the rate at the stream's first lost
//!   packet, a multiplicative rate cut `loss_beta` on entering Recovery or
//!   Loss, the threshold read as the delay growth over the smoothing window,
//!   and the cwnd cap of 2 x highest rate x RTT.
//!
//! Why a loss cut, and why 0.8: following the available bandwidth alone is
//! neutral between flows (each takes what the others leave, any split is an
//! equilibrium). A multiplicative cut when losses show up is what makes shares
//! converge: after a common loss, each flow's next estimate is the capacity the
//! others' reduced rates leave, so the difference between two flows shrinks by
//! the cut factor. With no cut (1.0), measured splits stay wherever they started;
//! with a TCP-like 0.5, a flow joining at 10 ms RTT while another holds the link
//! is pushed to rates at which an 80-packet p-stream lasts seconds and starves
//! in both switch settings; with 0.8 two flows share in every set-up we tried
//! and only the prototype setting starves a late joiner (docs/fidelity.md).
//!
//! The receiver acknowledges every segment and echoes the newest segment's
//! receive time (ns), standing in for the prototype's high-precision receive
//! timestamps.

use super::params::{declare_params, CcaInfo, Params};
use super::{AckArrival, CaState, CongestionControl, RateSample, TcpSock};
use std::collections::VecDeque;

/// Wire bytes of a full-size packet, the unit the probing rates are paced in.
const PACKET_BYTES: u64 = 1500;

declare_params! {
    /// RAPID's settings; the module doc says which come from the sources and which are reconstructed.
    pub struct RapidConfig {
        pstream_len: u32 = 80, range(8, 4096), "packets per p-stream (N)";
        rate_spread: f64 = 4.0, range(1.05, 64.0), "highest / lowest probing rate within a p-stream";
        valid_excursion: u32 = 8, range(2, 1024), "consecutive increasing gaps that make an excursion";
        gap_threshold_ns: i64 = 3000, range(0, 1_000_000),
            "queueing-delay growth over the smoothing window that counts as increasing (ns)";
        avg_window: u32 = 8, range(1, 256), "gaps averaged (sliding mean) before comparing; 1 disables";
        ewma: f64 = 0.0, range(0.0, 0.999),
            "EWMA weight of the old value for gap smoothing (0: off; the prototype also tried 0.875)";
        gain: f64 = 1.0, range(0.01, 1.0), "fraction of the way from the current rate to the estimate per p-stream";
        loss_beta: f64 = 0.8, range(0.0, 1.0),
            "rate multiplier on entering Recovery or Loss (reconstructed; see the module doc)";
        probe_in_recovery: bool = true,
            "send p-streams in Recovery/Loss (false: the Linux prototype, which can starve a flow)";
        /// Mbit/s.
        max_rate_mbps: u64 = 100_000, range(1, 10_000_000), "upper bound of the average rate";
    }
}

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "rapid",
        description: "RAPID: rate-based, probes with p-streams of geometrically increasing rates and follows the available-bandwidth estimate",
        source: "Konda & Kaur, IEEE INFOCOM 2009; Yin, Kaur & Smith, 'TCP Rapid: From Theory to Practice' (UNC Linux prototype)",
        params: RapidConfig::catalogue(),
    }
}

pub fn build(p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Rapid::new(RapidConfig::from_params(p)))
}

/// The estimator's settings (a subset of the configuration).
#[derive(Clone, Copy, Debug)]
pub struct EstimatorConfig {
    pub valid_excursion: u32,
    pub gap_threshold_ns: i64,
    pub avg_window: u32,
    pub ewma: f64,
}

/// The available bandwidth a p-stream shows, bit/s. `send_ns[i]`/`recv_ns[i]`
/// are packet i's send and receive times; the probing rate of gap i is the rate
/// the packets actually left at, `bytes / (send_ns[i+1] - send_ns[i])` (pacing
/// may shorten a gap after idle time, so intended rates are not used). The
/// queueing delay grows at gap i when the (smoothed) receive gap exceeds the
/// send gap by more than the threshold; the estimate is the rate where the run
/// of growing gaps that reaches the end of the stream begins, if that run is at
/// least `valid_excursion` long, else the highest rate probed.
pub fn estimate_available_bandwidth(send_ns: &[u64], recv_ns: &[u64], cfg: &EstimatorConfig) -> u64 {
    let n = send_ns.len().min(recv_ns.len());
    if n < 2 {
        return 0;
    }
    let gaps = n - 1;
    let rates: Vec<u64> = (0..gaps)
        .map(|i| PACKET_BYTES * 8 * 1_000_000_000 / (send_ns[i + 1].saturating_sub(send_ns[i])).max(1))
        .collect();
    let mut send_gap = Vec::with_capacity(gaps);
    let mut recv_gap = Vec::with_capacity(gaps);
    for i in 0..gaps {
        send_gap.push(send_ns[i + 1] as f64 - send_ns[i] as f64);
        recv_gap.push(recv_ns[i + 1] as f64 - recv_ns[i] as f64);
    }
    let smooth = |v: &[f64]| -> Vec<f64> {
        let w = cfg.avg_window.max(1) as usize;
        let mut out = Vec::with_capacity(v.len());
        let mut sum = 0.0;
        let mut ew: Option<f64> = None;
        for i in 0..v.len() {
            sum += v[i];
            if i >= w {
                sum -= v[i - w];
            }
            let mean = sum / (i + 1).min(w) as f64;
            let x = if cfg.ewma > 0.0 {
                let e = match ew {
                    None => mean,
                    Some(prev) => cfg.ewma * prev + (1.0 - cfg.ewma) * mean,
                };
                ew = Some(e);
                e
            } else {
                mean
            };
            out.push(x);
        }
        out
    };
    let sg = smooth(&send_gap);
    let rg = smooth(&recv_gap);
    // The threshold bounds the delay growth accumulated over the smoothing window
    // (so a per-gap threshold of h / window); a gap counts as growing once
    // gap x (r - A) / C exceeds it, which biases the estimate to A / (1 - h C / (w P)).
    let per_gap_threshold = cfg.gap_threshold_ns as f64 / cfg.avg_window.max(1) as f64;
    // Length of the run of growing-delay gaps that ends with the last gap.
    let mut run = 0usize;
    for i in (0..gaps).rev() {
        if rg[i] - sg[i] > per_gap_threshold {
            run += 1;
        } else {
            break;
        }
    }
    let highest = rates.iter().copied().max().unwrap_or(0);
    if run >= cfg.valid_excursion as usize && run > 0 {
        // The excursion starts where smoothing first lets the growth show; the
        // sliding mean lags by up to (window - 1) gaps, so step back by that much.
        let start = gaps - run;
        let lag = if cfg.avg_window > 1 { (cfg.avg_window as usize - 1) / 2 } else { 0 };
        rates[start.saturating_sub(lag).min(rates.len() - 1)]
    } else {
        highest
    }
}

/// The probing rates (bit/s) of the gaps of one p-stream of `n` packets: a
/// geometric sequence from lowest to highest = lowest x spread whose harmonic
/// mean is `avg`, so the stream's mean sending rate is `avg`.
pub fn pstream_rates(avg: u64, n: u32, spread: f64) -> Vec<u64> {
    let gaps = (n.max(2) - 1) as usize;
    let step = if gaps > 1 { spread.powf(1.0 / (gaps - 1) as f64) } else { 1.0 };
    // sum of 1/r_i = (1/r1) sum step^-j must equal gaps / avg.
    let inv_sum: f64 = (0..gaps).map(|j| step.powi(-(j as i32))).sum();
    let r1 = avg as f64 * inv_sum / gaps as f64;
    (0..gaps).map(|j| (r1 * step.powi(j as i32)).round().max(1.0) as u64).collect()
}

struct PStream {
    first_seq: u32,
    rates: Vec<u64>,
    send_ns: Vec<u64>,
    /// Receive time of each packet (0: not received, or excluded).
    recv_ns: Vec<u64>,
    /// Packets retransmitted: their receive times belong to the repair.
    excluded: Vec<bool>,
    valid: bool,
}

impl PStream {
    fn end_seq(&self) -> u32 {
        self.first_seq + self.send_ns.len() as u32
    }
}

pub struct Rapid {
    cfg: RapidConfig,
    /// Current average sending rate, bit/s.
    rate: u64,
    /// The rate before the last loss cut (for undo).
    prior_rate: u64,
    /// The p-stream being sent.
    current: Option<PStream>,
    /// Sent p-streams waiting for their receive timestamps.
    pending: VecDeque<PStream>,
    /// Estimates made (for tests and traces).
    pub estimates: u64,
    pub last_estimate_bps: u64,
}

impl Rapid {
    pub fn new(cfg: RapidConfig) -> Rapid {
        Rapid { cfg, rate: 0, prior_rate: 0, current: None, pending: VecDeque::new(), estimates: 0, last_estimate_bps: 0 }
    }

    pub fn rate_bps(&self) -> u64 {
        self.rate
    }

    fn max_rate_bps(&self) -> u64 {
        self.cfg.max_rate_mbps * 1_000_000
    }

    fn probing_allowed(&self, tp: &TcpSock) -> bool {
        self.cfg.probe_in_recovery || matches!(tp.ca_state, CaState::Open | CaState::Disorder)
    }

    fn estimator(&self) -> EstimatorConfig {
        EstimatorConfig {
            valid_excursion: self.cfg.valid_excursion,
            gap_threshold_ns: self.cfg.gap_threshold_ns,
            avg_window: self.cfg.avg_window,
            ewma: self.cfg.ewma,
        }
    }

    /// Paces at `rate_bps` on the wire. The stack's pacing clock counts payload
    /// (as Linux's does), so convert the wire rate to a payload rate.
    fn set_pacing(tp: &mut TcpSock, rate_bps: u64) {
        tp.pacing_rate = (rate_bps / 8 * tp.mss as u64 / PACKET_BYTES).max(1);
    }

    fn highest_rate(&self) -> u64 {
        self.current.as_ref().and_then(|c| c.rates.last().copied()).unwrap_or(self.rate)
    }

    /// cwnd is a safety cap: twice what the highest probing rate keeps in flight.
    fn update_cwnd(&self, tp: &mut TcpSock) {
        let rtt_us = match (tp.srtt_us(), tp.min_rtt_us()) {
            (0, u32::MAX) => 100_000,
            (s, u32::MAX) => s,
            (s, m) => s.max(m),
        } as u64;
        let bdp_pkts = self.highest_rate().saturating_mul(rtt_us) / 1_000_000 / (PACKET_BYTES * 8);
        tp.cwnd = (2 * bdp_pkts + self.cfg.pstream_len as u64).clamp(4, tp.cwnd_clamp.min(1 << 24) as u64) as u32;
    }

    fn finish(&mut self, s: PStream) {
        if !s.valid {
            return;
        }
        // The stream must have left as planned: Linux does not pace the first ten
        // segments, and a cwnd-limited burst has no gaps at all.
        let planned = s.send_ns.windows(2).zip(&s.rates).all(|(w, &r)| {
            let intended = PACKET_BYTES * 8 * 1_000_000_000 / r.max(1);
            (w[1] - w[0]) * 2 >= intended
        });
        if !planned {
            return;
        }
        // The pruned stream: the packets that arrived (the UNC prototype computes
        // its estimate over these), enough of them to see an excursion.
        let (mut send, mut recv) = (Vec::new(), Vec::new());
        for i in 0..s.send_ns.len() {
            if s.recv_ns[i] != 0 && !s.excluded[i] {
                send.push(s.send_ns[i]);
                recv.push(s.recv_ns[i]);
            }
        }
        if send.len() < (s.send_ns.len() / 2).max(self.cfg.valid_excursion as usize + 2) {
            return;
        }
        let highest = s.rates.last().copied().unwrap_or(self.rate);
        let mut ab = estimate_available_bandwidth(&send, &recv, &self.estimator()).min(highest);
        // A packet lost at the bottleneck is the strongest sign of an excursion: the
        // estimate cannot exceed the rate the stream was probing when it happened.
        // (A retransmitted packet was presumed lost, whatever its repair shows.)
        if let Some(first_lost) = (0..s.send_ns.len()).find(|&i| s.recv_ns[i] == 0 || s.excluded[i]) {
            ab = ab.min(s.rates[first_lost.saturating_sub(1).min(s.rates.len() - 1)]);
        }
        self.estimates += 1;
        self.last_estimate_bps = ab;
        let next = self.rate as f64 + self.cfg.gain * (ab as f64 - self.rate as f64);
        self.rate = (next.max(1.0) as u64).clamp(100_000, self.max_rate_bps());
    }
}

impl CongestionControl for Rapid {
    fn name(&self) -> &str {
        "rapid"
    }

    fn init(&mut self, tp: &mut TcpSock) {
        // Start at the rate of an initial window per RTT.
        let srtt = tp.srtt_us().max(1) as u64;
        self.rate = (tp.cwnd as u64 * PACKET_BYTES * 8 * 1_000_000 / srtt).clamp(100_000, self.max_rate_bps());
        Self::set_pacing(tp, self.rate);
        tp.ssthresh = super::INFINITE_SSTHRESH;
        self.update_cwnd(tp);
    }

    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        // Rate-based: the window is not the control; keep it as it is.
        tp.cwnd
    }

    fn has_cong_control(&self) -> bool {
        true
    }

    fn cong_control(&mut self, tp: &mut TcpSock, _rs: &RateSample) {
        self.update_cwnd(tp);
    }

    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        self.rate = self.rate.max(self.prior_rate);
        tp.cwnd
    }

    fn set_state(&mut self, _tp: &mut TcpSock, new_state: CaState) {
        if matches!(new_state, CaState::Recovery | CaState::Loss) {
            self.prior_rate = self.rate;
            self.rate = ((self.rate as f64 * self.cfg.loss_beta) as u64).max(100_000);
            // The stream in progress mixes rates across the reduction: discard it.
            if let Some(c) = self.current.as_mut() {
                c.valid = false;
            }
        }
    }

    fn on_transmit(&mut self, tp: &mut TcpSock, seq: u32, retransmission: bool) {
        if retransmission {
            // A repaired segment's timing says nothing about its stream's probing.
            for s in self.pending.iter_mut().chain(self.current.as_mut()) {
                if seq >= s.first_seq && seq < s.end_seq() {
                    s.excluded[(seq - s.first_seq) as usize] = true;
                }
            }
        }
        if retransmission || !self.probing_allowed(tp) {
            // Repairs and non-probing phases go at the average rate and break the
            // timing of the stream in progress.
            if let Some(c) = self.current.as_mut() {
                c.valid = false;
            }
            Self::set_pacing(tp, self.rate);
            return;
        }
        let n = self.cfg.pstream_len;
        if self.current.as_ref().is_none_or(|c| c.send_ns.len() >= c.rates.len() + 1 || c.end_seq() != seq) {
            if let Some(done) = self.current.take() {
                self.pending.push_back(done);
            }
            self.current = Some(PStream {
                first_seq: seq,
                rates: pstream_rates(self.rate, n, self.cfg.rate_spread),
                send_ns: Vec::with_capacity(n as usize),
                recv_ns: vec![0; n as usize],
                excluded: vec![false; n as usize],
                valid: true,
            });
        }
        let c = self.current.as_mut().expect("stream");
        let i = c.send_ns.len();
        c.send_ns.push(tp.now.0);
        // The gap after packet i probes at rate i; after the last packet, go back to
        // the average rate until the next stream starts.
        let r = c.rates.get(i).copied().unwrap_or(self.rate);
        Self::set_pacing(tp, r);
    }

    fn ack_arrival(&mut self, tp: &mut TcpSock, a: &AckArrival) {
        // Record the receive time of the newest segment if it belongs to a stream.
        let place = |s: &mut PStream| {
            if a.rx_seq >= s.first_seq && a.rx_seq < s.end_seq() {
                let i = (a.rx_seq - s.first_seq) as usize;
                if s.recv_ns[i] == 0 {
                    s.recv_ns[i] = a.rx_ns.max(1);
                }
            }
        };
        for s in self.pending.iter_mut() {
            place(s);
        }
        if let Some(c) = self.current.as_mut() {
            place(c);
        }
        // A stream is complete once the cumulative ACK passes its end; with an ACK
        // per segment every packet's receive time has been seen by then unless it
        // was lost (the estimate then uses the packets that arrived).
        while self.pending.front().is_some_and(|s| a.ack >= s.end_seq()) {
            let s = self.pending.pop_front().expect("front");
            self.finish(s);
        }
        let _ = tp;
    }

    fn wants_pacing(&self) -> bool {
        true
    }

    fn wants_ack_every_segment(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends a p-stream through a FIFO link of capacity `c_bps` that also carries
    /// constant-rate cross traffic `x_bps` (a fluid), and returns receive times.
    fn through_link(send_ns: &[u64], c_bps: f64, x_bps: f64) -> Vec<u64> {
        let p_bits = (PACKET_BYTES * 8) as f64;
        let mut backlog_bits = 0.0f64;
        let mut t_prev = send_ns[0] as f64 / 1e9;
        let mut out = Vec::new();
        for &s in send_ns {
            let t = s as f64 / 1e9;
            // Backlog drains at C and fills with cross traffic at X between arrivals.
            backlog_bits = (backlog_bits + (x_bps - c_bps) * (t - t_prev)).max(0.0);
            backlog_bits += p_bits;
            out.push(((t + backlog_bits / c_bps) * 1e9) as u64);
            t_prev = t;
        }
        out
    }

    fn send_times(rates: &[u64]) -> Vec<u64> {
        let mut t = 1_000_000_000u64;
        let mut v = vec![t];
        for &r in rates {
            t += (PACKET_BYTES * 8 * 1_000_000_000) / r;
            v.push(t);
        }
        v
    }

    #[test]
    fn rates_are_geometric_with_the_requested_mean_and_spread() {
        let r = pstream_rates(400_000_000, 80, 4.0);
        assert_eq!(r.len(), 79);
        let spread = *r.last().unwrap() as f64 / r[0] as f64;
        assert!((spread - 4.0).abs() < 0.01, "{spread}");
        // Harmonic mean = average rate: the stream's duration is what avg predicts.
        let duration: f64 = r.iter().map(|&x| 12_000.0 / x as f64).sum();
        let mean = 79.0 * 12_000.0 / duration;
        assert!((mean / 400e6 - 1.0).abs() < 1e-3, "{mean}");
    }

    #[test]
    fn estimate_finds_the_available_bandwidth_of_a_synthetic_path() {
        // 1 Gbps link, 500 Mbps constant cross traffic: 500 Mbps available.
        let (c, x) = (1e9, 500e6);
        let rates = pstream_rates(500_000_000, 80, 4.0);
        let send = send_times(&rates);
        let recv = through_link(&send, c, x);
        // Without a threshold the excursion starts at the first rate above the
        // available bandwidth: exact to one rate step (4^(1/78) = 1.8 %).
        let exact = EstimatorConfig { valid_excursion: 8, gap_threshold_ns: 0, avg_window: 1, ewma: 0.0 };
        let ab = estimate_available_bandwidth(&send, &recv, &exact) as f64;
        assert!((ab / 500e6 - 1.0).abs() < 0.03, "estimate {} Mbps", ab / 1e6);
        // A threshold h makes a gap count only once the queueing it adds,
        // gap x (r - A) / C, exceeds h, i.e. from r* = A / (1 - h C / P).
        for h in [1000i64, 3000] {
            let cfg = EstimatorConfig { gap_threshold_ns: h, ..exact };
            let expected = (c - x) / (1.0 - h as f64 * 1e-9 * c / (PACKET_BYTES * 8) as f64);
            let got = estimate_available_bandwidth(&send, &recv, &cfg) as f64;
            assert!((got / expected - 1.0).abs() < 0.03, "h={h}: {} Mbps, predicted {} Mbps", got / 1e6, expected / 1e6);
        }
        // Smoothing over 8 gaps keeps the estimate within a few rate steps.
        let cfg8 = EstimatorConfig { avg_window: 8, ..exact };
        let ab8 = estimate_available_bandwidth(&send, &recv, &cfg8) as f64;
        assert!((ab8 / 500e6 - 1.0).abs() < 0.08, "estimate {} Mbps", ab8 / 1e6);
    }

    #[test]
    fn no_excursion_means_at_least_the_highest_rate() {
        let cfg = EstimatorConfig { valid_excursion: 8, gap_threshold_ns: 1000, avg_window: 1, ewma: 0.0 };
        let rates = pstream_rates(100_000_000, 80, 4.0);
        let send = send_times(&rates);
        let recv = through_link(&send, 1e9, 0.0);
        let highest = *rates.last().unwrap() as f64;
        let got = estimate_available_bandwidth(&send, &recv, &cfg) as f64;
        // Send times are whole nanoseconds, so achieved rates differ by a hair.
        assert!((got / highest - 1.0).abs() < 1e-3, "{got} vs {highest}");
    }

    #[test]
    fn a_short_burst_of_delay_is_not_an_excursion() {
        let cfg = EstimatorConfig { valid_excursion: 8, gap_threshold_ns: 1000, avg_window: 1, ewma: 0.0 };
        let rates = pstream_rates(100_000_000, 40, 2.0);
        let send = send_times(&rates);
        let mut recv: Vec<u64> = send.iter().map(|s| s + 10_000).collect();
        // Three growing gaps at the end: shorter than a valid excursion.
        let n = recv.len();
        for (k, i) in (n - 3..n).enumerate() {
            recv[i] += 5_000 * (k as u64 + 1);
        }
        let highest = *rates.last().unwrap() as f64;
        let got = estimate_available_bandwidth(&send, &recv, &cfg) as f64;
        // Send times are whole nanoseconds, so achieved rates differ by a hair.
        assert!((got / highest - 1.0).abs() < 1e-3, "{got} vs {highest}");
    }
}
