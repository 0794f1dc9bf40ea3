//! BBR's unit tests: a hand-fed `Path` plays the stack on a path of fixed RTT
//! (one ACK per packet, one rate sample per round), so each test can follow the
//! state machine, the bandwidth and min-RTT filters, the gain cycle, PROBE_RTT
//! and the long-term bandwidth estimate against the kernel's arithmetic.

use super::*;
use crate::units::{jiffies_at, Time};

const MSS: u32 = 1448;
const RTT_US: u64 = 10_000;

/// A BBR sender fed by hand-made ACKs, as the stack would feed it on a path
/// of fixed RTT: one ACK per packet, each rate sample spanning one RTT.
struct Path {
    bbr: Bbr,
    tp: TcpSock,
    /// `tp.delivered` when the current round's packets began to be sent.
    sent_from: u32,
    /// Packets delivered in the previous round (0 before the first).
    last_round: u32,
}

impl Path {
    fn new(seed: u64) -> Path {
        let mut tp = TcpSock::new(MSS, 1000, 10);
        tp.flow_seed = seed;
        tp.srtt_us8 = (RTT_US as u32) << 3;
        tp.rtt_min.reset(0, RTT_US as u32);
        let mut p = Path { bbr: Bbr::new(), tp, sent_from: 0, last_round: 0 };
        // Start at 1 s so that no jiffies stamp is 0 (BBR's "unset").
        p.advance(1_000_000);
        p.bbr.init(&mut p.tp);
        p
    }

    fn advance(&mut self, us: u64) {
        let tp = &mut self.tp;
        tp.mstamp_us += us;
        tp.now = Time(tp.mstamp_us * 1000);
        tp.jiffies = jiffies_at(tp.now, tp.hz);
    }

    /// One ACK newly delivering `acked` packets with the given sample.
    fn ack(&mut self, acked: u32, prior_delivered: u32, interval_us: i64, rtt_us: i64, losses: u32) {
        let prior_in_flight = self.tp.packets_in_flight();
        // Packets sent while the flow was app-limited (PROBE_RTT marks it)
        // yield app-limited samples; the mark clears as rate_gen clears it.
        let is_app_limited = self.tp.app_limited != 0;
        self.tp.delivered += acked;
        if self.tp.app_limited != 0 && seq_after(self.tp.delivered, self.tp.app_limited) {
            self.tp.app_limited = 0;
        }
        self.tp.lost += losses;
        self.tp.delivered_mstamp = self.tp.mstamp_us;
        let rs = RateSample {
            prior_mstamp: 1,
            prior_delivered,
            delivered: (self.tp.delivered - prior_delivered) as i64,
            interval_us,
            rtt_us,
            losses,
            acked_sacked: acked,
            prior_in_flight,
            is_app_limited,
            ..RateSample::default()
        };
        self.bbr.cong_control(&mut self.tp, &rs);
    }

    /// One ACK on a steady pipe of 100 packets per RTT: the sample spans
    /// exactly 100 packets.
    fn ack_at(&mut self, acked: u32, losses: u32) {
        let prior = self.tp.delivered + acked - 100;
        self.ack(acked, prior, RTT_US as i64, RTT_US as i64, losses);
    }

    /// Rounds of `n` packets until STARTUP ends (at most 20).
    fn until_full(&mut self, n: u32) -> u32 {
        let mut k = 0;
        while !self.bbr.full_bw_reached {
            self.round(n);
            k += 1;
            assert!(k < 20, "never filled the pipe");
        }
        k
    }

    /// One round trip delivering `n` packets, spread evenly over the RTT.
    /// The packets were sent during the previous round, so the sample of
    /// the i-th ACK starts where its packet was released.
    fn round(&mut self, n: u32) {
        let start = self.tp.delivered;
        for i in 0..n {
            self.advance(RTT_US / n as u64);
            let prior = self.sent_from + 1 + (i as u64 * self.last_round as u64 / n as u64) as u32;
            self.ack(1, prior.min(start), RTT_US as i64, RTT_US as i64, 0);
        }
        self.sent_from = start;
        self.last_round = n;
    }

    fn rounds(&mut self, k: u32, n: u32) {
        for _ in 0..k {
            self.round(n);
        }
    }

    /// Packets per round trip of the bandwidth estimate.
    fn bw_per_rtt(&self) -> f64 {
        self.bbr.bw() as f64 / BW_UNIT as f64 * RTT_US as f64
    }

    /// Takes BBR straight to PROBE_BW with a pipe of `n` packets per RTT.
    fn steady(seed: u64, n: u32) -> Path {
        let mut p = Path::new(seed);
        p.tp.packets_out = n;
        let mut k = 10;
        while k < n {
            p.round(k);
            k *= 2;
        }
        while p.bbr.mode != Mode::ProbeBw {
            p.round(n);
        }
        p
    }
}

#[test]
fn constants_match_linux() {
    assert_eq!(HIGH_GAIN, 739);
    assert_eq!(DRAIN_GAIN, 88);
    assert_eq!(CWND_GAIN, 512);
    assert_eq!(PACING_GAIN, [320, 192, 256, 256, 256, 256, 256, 256]);
    assert_eq!(BW_RTTS, 10);
    assert_eq!(TSO_MAX_BYTES, 65215);
}

#[test]
fn startup_gains_and_initial_pacing_rate() {
    let mut p = Path::new(1);
    assert_eq!(p.tp.ssthresh, INFINITE_SSTHRESH);
    assert_eq!(p.bbr.min_rtt_us, RTT_US as u32);
    // 2.885 x 10 packets / 10 ms x 0.99, in bytes per second.
    let expected = 739.0 / 256.0 * 10.0 * MSS as f64 / 0.01 * 0.99;
    assert!((p.tp.pacing_rate as f64 / expected - 1.0).abs() < 1e-4, "{}", p.tp.pacing_rate);
    p.round(10);
    assert_eq!(p.bbr.mode, Mode::Startup);
    assert_eq!((p.bbr.pacing_gain, p.bbr.cwnd_gain), (HIGH_GAIN, HIGH_GAIN));
    // Below the target cwnd grows by the packets delivered (slow start).
    assert_eq!(p.tp.cwnd, 20);
}

#[test]
fn startup_ends_after_three_rounds_without_25_percent_growth() {
    let mut p = Path::new(1);
    p.tp.packets_out = 400;
    for n in [10, 20, 40, 80] {
        p.round(n);
    }
    assert_eq!(p.bbr.mode, Mode::Startup);
    assert_eq!(p.bbr.full_bw_cnt, 0);
    // The check runs at each round start on the bandwidth of the round
    // that just ended. 99 after 80 is 24 % growth: not enough.
    p.rounds(2, 99);
    assert_eq!(p.bbr.full_bw_cnt, 1);
    p.round(125);
    assert_eq!(p.bbr.full_bw_cnt, 2);
    // 125 after 80 (the last 25 % step) is growth: the count restarts.
    p.round(125);
    assert_eq!(p.bbr.full_bw_cnt, 0, "a 25 % increase restarts the count");
    p.rounds(2, 125);
    assert_eq!(p.bbr.full_bw_cnt, 2);
    assert_eq!(p.bbr.mode, Mode::Startup);
    assert_eq!((p.bbr.pacing_gain, p.bbr.cwnd_gain), (HIGH_GAIN, HIGH_GAIN));
    p.round(125);
    assert!(p.bbr.full_bw_reached);
    // In-flight (400) is above one BDP: DRAIN at 1/2.885 with cwnd gain kept.
    assert_eq!(p.bbr.mode, Mode::Drain);
    assert_eq!((p.bbr.pacing_gain, p.bbr.cwnd_gain), (DRAIN_GAIN, HIGH_GAIN));
    // ssthresh marks the estimated BDP plus the quantization budget at the
    // STARTUP pacing rate: 125 + 3 x 34 (1 ms at 51.7 MB/s), made even.
    assert_eq!(p.tp.ssthresh, 228);
}

#[test]
fn app_limited_rounds_do_not_count_toward_a_full_pipe() {
    let mut p = Path::new(1);
    for n in [10, 20, 40] {
        p.round(n);
    }
    for _ in 0..5 {
        p.advance(1000);
        let prior = p.tp.delivered;
        let rs = RateSample {
            prior_mstamp: 1,
            prior_delivered: prior,
            delivered: 40,
            interval_us: RTT_US as i64,
            rtt_us: RTT_US as i64,
            acked_sacked: 1,
            is_app_limited: true,
            ..RateSample::default()
        };
        p.tp.delivered += 1;
        p.bbr.cong_control(&mut p.tp, &rs);
        assert!(p.bbr.round_start);
    }
    assert_eq!(p.bbr.full_bw_cnt, 0);
    assert_eq!(p.bbr.mode, Mode::Startup);
}

#[test]
fn drain_ends_when_in_flight_falls_to_one_bdp() {
    let mut p = Path::new(1);
    p.tp.packets_out = 1000;
    for n in [10, 20, 40, 80] {
        p.round(n);
    }
    p.until_full(160);
    assert_eq!(p.bbr.mode, Mode::Drain);
    let target = p.bbr.inflight(&p.tp, p.bbr.max_bw(), BBR_UNIT);
    p.tp.packets_out = target + 1;
    p.round(160);
    assert_eq!(p.bbr.mode, Mode::Drain);
    // A departure time in the future counts the packets that leave before it.
    p.tp.wstamp_ns = p.tp.now.0 + 2 * RTT_US * 1000 / 160 * 1000;
    p.advance(100);
    p.ack(1, p.tp.delivered, RTT_US as i64, RTT_US as i64, 0);
    assert_eq!(p.bbr.mode, Mode::ProbeBw);
    assert_ne!(p.bbr.cycle_idx, 1);
    assert_eq!(p.bbr.cwnd_gain, CWND_GAIN);
}

#[test]
fn probe_bw_starts_at_a_random_phase_other_than_the_draining_one() {
    let mut seen = [0u32; 8];
    for seed in 0..700 {
        let mut p = Path::new(seed);
        p.bbr.full_bw_reached = true;
        p.bbr.reset_mode(&p.tp);
        assert_eq!(p.bbr.mode, Mode::ProbeBw);
        seen[p.bbr.cycle_idx as usize] += 1;
    }
    assert_eq!(seen[1], 0, "never starts in the 0.75 phase");
    // Seven equally likely phases, 100 draws each expected.
    for (i, &c) in seen.iter().enumerate() {
        if i != 1 {
            assert!((60..140).contains(&c), "phase {i}: {c} of 700");
        }
    }
    // Different flows (seeds) start at different phases, a flow's choice
    // is reproducible.
    let a = Path::steady(5, 100).bbr.cycle_idx;
    assert_eq!(a, Path::steady(5, 100).bbr.cycle_idx);
}

/// A PROBE_BW flow at phase `idx` with the phase just begun.
fn at_phase(idx: u32) -> Path {
    let mut p = Path::steady(3, 100);
    p.bbr.cycle_idx = idx;
    p.bbr.cycle_mstamp = p.tp.delivered_mstamp;
    p.bbr.update_gains();
    p.bbr.set_pacing_rate(&mut p.tp, p.bbr.bw(), p.bbr.pacing_gain);
    p.tp.packets_out = 100;
    p
}

#[test]
fn cruising_phases_last_one_min_rtt() {
    let mut p = at_phase(3);
    p.tp.packets_out = 100;
    p.advance(RTT_US - 1);
    p.ack_at(1, 0);
    assert_eq!(p.bbr.cycle_idx, 3);
    p.advance(2);
    p.ack_at(1, 0);
    assert_eq!(p.bbr.cycle_idx, 4);
    assert_eq!(p.bbr.cycle_mstamp, p.tp.delivered_mstamp);
    // 7 wraps to the probing phase.
    let mut p = at_phase(7);
    p.advance(RTT_US + 1);
    p.ack_at(1, 0);
    assert_eq!(p.bbr.cycle_idx, 0);
    assert_eq!(p.bbr.pacing_gain, 320);
}

#[test]
fn probing_phase_lasts_until_in_flight_reaches_1_25_bdp_or_a_loss() {
    let mut p = at_phase(0);
    let target = p.bbr.inflight(&p.tp, p.bbr.max_bw(), 320);
    // BDP 100: 125 + 3 TSO segments, even, +2 in this phase.
    let tso = Bbr::tso_segs_goal(&p.tp);
    assert_eq!(target, ((125 + 3 * tso + 1) & !1) + 2);
    // The departing packet (one TSO goal) counts toward in-flight here.
    p.tp.packets_out = target - tso - 1;
    for _ in 0..5 {
        p.advance(RTT_US);
        p.ack_at(1, 0);
        assert_eq!(p.bbr.cycle_idx, 0, "phase ended below 1.25 BDP without loss");
    }
    p.tp.packets_out = target - tso;
    p.advance(10);
    p.ack_at(1, 0);
    assert_eq!(p.bbr.cycle_idx, 1);
    assert_eq!(p.bbr.pacing_gain, 192);

    // A loss ends it too, but not before one min RTT.
    let mut p = at_phase(0);
    p.tp.packets_out = 100;
    p.advance(RTT_US / 2);
    p.ack_at(1, 1);
    assert_eq!(p.bbr.cycle_idx, 0);
    p.advance(RTT_US);
    p.ack_at(1, 1);
    assert_eq!(p.bbr.cycle_idx, 1);
}

#[test]
fn draining_phase_ends_early_once_in_flight_is_one_bdp() {
    let mut p = at_phase(1);
    let bdp_target = p.bbr.inflight(&p.tp, p.bbr.max_bw(), BBR_UNIT);
    p.tp.packets_out = bdp_target + 1;
    p.advance(RTT_US / 4);
    p.ack_at(1, 0);
    assert_eq!(p.bbr.cycle_idx, 1);
    p.tp.packets_out = bdp_target;
    p.advance(10);
    p.ack_at(1, 0);
    assert_eq!(p.bbr.cycle_idx, 2, "drained before one min RTT");
}

#[test]
fn pacing_rate_is_bw_times_gain_less_one_percent() {
    let mut p = at_phase(2);
    // 100 packets per 10 ms.
    let bw_pps = p.bbr.bw() as f64 / BW_UNIT as f64 * 1e6;
    assert!((bw_pps / 10_000.0 - 1.0).abs() < 0.02, "bw {bw_pps}");
    for (idx, gain) in [(2u32, 1.0), (0, 1.25), (1, 0.75)] {
        p.bbr.cycle_idx = idx;
        p.bbr.cycle_mstamp = p.tp.delivered_mstamp;
        p.tp.packets_out = 100;
        p.advance(100);
        p.ack_at(1, 0);
        let bw_pps = p.bbr.bw() as f64 / BW_UNIT as f64 * 1e6;
        let expected = bw_pps * MSS as f64 * gain * 0.99;
        let got = p.tp.pacing_rate as f64;
        assert!((got / expected - 1.0).abs() < 1e-4, "gain {gain}: {got} vs {expected}");
    }
    // sk_max_pacing_rate caps it.
    p.tp.max_pacing_rate = 1_000_000;
    p.advance(100);
    p.ack_at(1, 0);
    assert_eq!(p.tp.pacing_rate, 1_000_000);
}

#[test]
fn startup_never_lowers_the_pacing_rate() {
    let mut p = Path::new(1);
    p.rounds(1, 10);
    p.rounds(1, 20);
    p.rounds(1, 40);
    let before = p.tp.pacing_rate;
    // A far lower (not app-limited) sample in the same window.
    p.advance(100);
    p.ack(1, p.tp.delivered - 1, 5 * RTT_US as i64, RTT_US as i64, 0);
    assert_eq!(p.tp.pacing_rate, before);
    assert_eq!(p.bbr.mode, Mode::Startup);
}

#[test]
fn cwnd_targets_per_state() {
    // PROBE_BW cruising: 2 BDP + 3 TSO goals, even; cwnd above it snaps down.
    let mut p = at_phase(2);
    p.bbr.extra_acked = [0, 0];
    p.tp.cwnd = 1000;
    p.tp.packets_out = 100;
    p.advance(100);
    p.ack_at(1, 0);
    let bdp = p.bbr.bdp(p.bbr.bw(), BBR_UNIT);
    assert!((100..=102).contains(&bdp), "bdp {bdp}");
    let tso = Bbr::tso_segs_goal(&p.tp);
    assert_eq!(tso, 9, "1 ms at about 14.3 MB/s");
    let aggr = p.bbr.ack_aggregation_cwnd();
    let target = ((p.bbr.bdp(p.bbr.bw(), CWND_GAIN) + aggr + 3 * tso + 1) & !1) as i64;
    assert_eq!(p.tp.cwnd as i64, target);
    // Below the target: cwnd grows by the packets ACKed, at most to the target.
    p.tp.cwnd = 150;
    p.advance(100);
    p.ack_at(3, 0);
    assert_eq!(p.tp.cwnd, 153);
    // PROBE_RTT: 4 packets.
    p.bbr.mode = Mode::ProbeRtt;
    p.bbr.set_cwnd(&mut p.tp, &RateSample::default(), 0, p.bbr.bw(), BBR_UNIT);
    assert_eq!(p.tp.cwnd, CWND_MIN_TARGET);
    // The global clamp applies in every state.
    let mut p = at_phase(2);
    p.tp.cwnd_clamp = 50;
    p.advance(100);
    p.ack_at(1, 0);
    assert_eq!(p.tp.cwnd, 50);
}

#[test]
fn gains_per_state() {
    let mut b = Bbr::new();
    for (mode, pacing, cwnd) in [
        (Mode::Startup, 739, 739),
        (Mode::Drain, 88, 739),
        (Mode::ProbeBw, 320, 512),
        (Mode::ProbeRtt, 256, 256),
    ] {
        b.mode = mode;
        b.update_gains();
        assert_eq!((b.pacing_gain, b.cwnd_gain), (pacing, cwnd), "{mode:?}");
    }
    b.mode = Mode::ProbeBw;
    for i in 0..8 {
        b.cycle_idx = i;
        b.update_gains();
        assert_eq!(b.pacing_gain, PACING_GAIN[i as usize]);
    }
    b.lt_use_bw = true;
    b.cycle_idx = 0;
    b.update_gains();
    assert_eq!(b.pacing_gain, BBR_UNIT, "a policed flow cruises at 1.0");
}

#[test]
fn bandwidth_filter_keeps_the_max_of_ten_rounds() {
    let mut p = Path::steady(1, 100);
    // One ACK per round (each sample starts at or after the round's end),
    // so rounds and samples line up: 150 packets per RTT once, then 100.
    let one_round = |p: &mut Path, pkts: i64| {
        p.advance(RTT_US);
        let prior = p.bbr.next_rtt_delivered;
        p.tp.delivered = prior + 1;
        p.tp.delivered_mstamp = p.tp.mstamp_us;
        let rs = RateSample {
            prior_mstamp: 1,
            prior_delivered: prior,
            delivered: pkts,
            interval_us: RTT_US as i64,
            rtt_us: RTT_US as i64,
            acked_sacked: 1,
            ..RateSample::default()
        };
        p.bbr.cong_control(&mut p.tp, &rs);
        assert!(p.bbr.round_start);
    };
    one_round(&mut p, 150);
    let peak = p.bbr.max_bw();
    assert!((p.bw_per_rtt() - 150.0).abs() < 0.01);
    for k in 1..=BW_RTTS {
        one_round(&mut p, 100);
        assert_eq!(p.bbr.max_bw(), peak, "lost after {k} rounds");
    }
    one_round(&mut p, 100);
    assert!((p.bw_per_rtt() - 100.0).abs() < 0.01, "kept beyond {} rounds", BW_RTTS + 1);
}

#[test]
fn app_limited_samples_only_raise_the_estimate() {
    let mut p = Path::steady(1, 100);
    let bw = p.bbr.max_bw();
    let low = RateSample {
        prior_mstamp: 1,
        prior_delivered: p.tp.delivered,
        delivered: 10,
        interval_us: RTT_US as i64,
        rtt_us: RTT_US as i64,
        acked_sacked: 1,
        is_app_limited: true,
        ..RateSample::default()
    };
    for _ in 0..(3 * BW_RTTS) {
        p.advance(RTT_US);
        p.tp.delivered += 1;
        let rs = RateSample { prior_delivered: p.tp.delivered - 1, ..low };
        p.bbr.cong_control(&mut p.tp, &rs);
    }
    assert_eq!(p.bbr.max_bw(), bw, "app-limited samples below the estimate are ignored");
    let high = RateSample { prior_delivered: p.tp.delivered, delivered: 200, ..low };
    p.tp.delivered += 1;
    p.bbr.cong_control(&mut p.tp, &high);
    assert!(p.bbr.max_bw() > bw);
}

#[test]
fn probe_rtt_after_ten_seconds_without_a_lower_rtt() {
    let mut p = Path::steady(1, 100);
    let stamp = p.bbr.min_rtt_stamp;
    // RTT samples equal to the min RTT do not refresh it (strictly lower only).
    let mut t = 0;
    while p.tp.jiffies.wrapping_sub(stamp) < 10 * p.tp.hz {
        p.round(100);
        t += 1;
        assert_eq!(p.bbr.mode, Mode::ProbeBw, "round {t}");
    }
    assert_eq!(p.bbr.min_rtt_stamp, stamp);
    assert_eq!(p.tp.jiffies.wrapping_sub(stamp), 10 * p.tp.hz);
    // One jiffy later the filter has expired.
    let cwnd = p.tp.cwnd;
    p.advance(1000);
    p.ack(1, p.tp.delivered - 100, RTT_US as i64, RTT_US as i64 + 500, 0);
    assert_eq!(p.bbr.mode, Mode::ProbeRtt);
    assert_eq!((p.bbr.pacing_gain, p.bbr.cwnd_gain), (BBR_UNIT, BBR_UNIT));
    assert_eq!(p.tp.cwnd, CWND_MIN_TARGET);
    assert_eq!(p.bbr.prior_cwnd, cwnd);
    // The expired filter took the current (higher) sample.
    assert_eq!(p.bbr.min_rtt_us, RTT_US as u32 + 500);
    assert_ne!(p.tp.app_limited, 0, "PROBE_RTT marks the flow app-limited");

    // The 200 ms start only once in-flight is down to 4 packets.
    p.advance(RTT_US);
    p.ack_at(1, 0);
    assert_eq!(p.bbr.probe_rtt_done_stamp, 0);
    p.tp.packets_out = 4;
    p.advance(RTT_US);
    let entered = p.tp.jiffies;
    p.ack_at(1, 0);
    assert_eq!(p.bbr.probe_rtt_done_stamp, entered + 200);
    assert_eq!(p.bbr.min_rtt_us, RTT_US as u32, "the lower RTT is taken at once");
    // Rounds pass, but 200 ms have not: stay.
    for _ in 0..19 {
        p.round(4);
        assert_eq!(p.bbr.mode, Mode::ProbeRtt);
        assert_eq!(p.tp.cwnd, CWND_MIN_TARGET);
    }
    // After 200 ms, leave on the next ACK of a completed round.
    p.advance(RTT_US + 1000);
    p.ack(1, p.tp.delivered - 1, RTT_US as i64, RTT_US as i64, 0);
    assert_eq!(p.bbr.mode, Mode::ProbeBw);
    // The saved cwnd comes back, capped by the current target.
    let target = p.bbr.quantization_budget(&p.tp, p.bbr.bdp(p.bbr.bw(), CWND_GAIN) + p.bbr.ack_aggregation_cwnd());
    assert_eq!(p.tp.cwnd, (cwnd + 1).min(target));
    assert!(p.tp.cwnd > 200);
    assert_eq!(p.bbr.min_rtt_stamp, p.tp.jiffies);
    assert!(seq_after(p.tp.jiffies, entered + 200));
}

#[test]
fn probe_rtt_waits_for_a_round_after_200_ms() {
    let mut p = Path::steady(1, 100);
    p.advance(10_001_000);
    p.tp.packets_out = 4;
    p.ack_at(1, 0);
    assert_eq!(p.bbr.mode, Mode::ProbeRtt);
    assert_ne!(p.bbr.probe_rtt_done_stamp, 0);
    // 300 ms pass with ACKs that do not complete a round.
    for _ in 0..30 {
        p.advance(10_000);
        p.ack(1, p.bbr.next_rtt_delivered - 1, RTT_US as i64, RTT_US as i64, 0);
    }
    assert_eq!(p.bbr.mode, Mode::ProbeRtt);
    p.advance(1000);
    p.ack(1, p.bbr.next_rtt_delivered, RTT_US as i64, RTT_US as i64, 0);
    assert_eq!(p.bbr.mode, Mode::ProbeBw);
}

#[test]
fn probe_rtt_returns_to_startup_when_the_pipe_was_not_full() {
    let mut p = Path::new(1);
    p.round(10);
    p.advance(10_001_000);
    p.tp.packets_out = 2;
    p.ack(1, p.tp.delivered, RTT_US as i64, RTT_US as i64, 0);
    assert_eq!(p.bbr.mode, Mode::ProbeRtt);
    p.advance(201_000);
    p.ack(1, p.tp.delivered, RTT_US as i64, RTT_US as i64, 0);
    assert_eq!(p.bbr.mode, Mode::Startup);
}

#[test]
fn first_round_of_recovery_conserves_packets() {
    let mut p = at_phase(2);
    p.tp.cwnd = 220;
    p.tp.packets_out = 200;
    // Entering recovery: ssthresh() saves cwnd and leaves ssthresh alone.
    let ssthresh = p.tp.ssthresh;
    assert_eq!(p.bbr.ssthresh(&mut p.tp), ssthresh);
    assert_eq!(p.bbr.prior_cwnd, 220);
    p.tp.ca_state = CaState::Recovery;
    p.tp.lost_out = 3;
    p.tp.sacked_out = 2;
    p.advance(100);
    p.ack_at(2, 3);
    // Conservation: cwnd = in-flight + acked.
    assert!(p.bbr.packet_conservation);
    assert_eq!(p.tp.cwnd, p.tp.packets_in_flight() + 2);
    assert_eq!(p.tp.cwnd, 197);
    assert_eq!(p.bbr.next_rtt_delivered, p.tp.delivered, "a new round starts");
    // Later ACKs of the same round: never more than in-flight + acked.
    p.tp.packets_out = 196;
    p.advance(100);
    p.ack(1, p.tp.delivered - 2, RTT_US as i64, RTT_US as i64, 0);
    assert_eq!(p.tp.cwnd, 197);
    assert!(p.tp.cwnd > p.tp.packets_in_flight());
    // The next round: slow start (cwnd + acked), toward the target.
    let before = p.tp.cwnd;
    p.advance(RTT_US);
    p.ack(2, p.bbr.next_rtt_delivered, RTT_US as i64, RTT_US as i64, 0);
    assert!(!p.bbr.packet_conservation);
    assert_eq!(p.tp.cwnd, before + 2);
    // Leaving recovery restores the saved cwnd.
    p.tp.ca_state = CaState::Open;
    p.advance(100);
    p.ack_at(1, 0);
    assert_eq!(p.tp.cwnd, 221);
}

#[test]
fn losses_come_off_cwnd_before_it_grows() {
    let mut p = at_phase(2);
    p.tp.cwnd = 100;
    p.tp.packets_out = 100;
    p.advance(100);
    p.ack_at(2, 5);
    assert_eq!(p.tp.cwnd, 97);
}

#[test]
fn undo_resets_full_bandwidth_detection_and_keeps_cwnd() {
    let mut p = Path::new(1);
    for n in [10, 20, 40] {
        p.round(n);
    }
    while p.bbr.full_bw_cnt < 2 {
        p.round(40);
    }
    p.bbr.lt_is_sampling = true;
    p.tp.cwnd = 77;
    assert_eq!(p.bbr.undo_cwnd(&mut p.tp), 77);
    assert_eq!((p.bbr.full_bw, p.bbr.full_bw_cnt), (0, 0));
    assert!(!p.bbr.lt_is_sampling);
    // The next round start re-arms full_bw, then three flat rounds are needed.
    assert_eq!(p.until_full(40), 4);
}

#[test]
fn rto_ends_a_round_and_counts_as_a_loss() {
    let mut p = at_phase(2);
    p.tp.cwnd = 200;
    p.bbr.ssthresh(&mut p.tp);
    p.bbr.set_state(&mut p.tp, CaState::Loss);
    assert_eq!(p.bbr.prev_ca_state, CaState::Loss);
    assert_eq!(p.bbr.full_bw, 0);
    assert!(p.bbr.round_start);
    assert!(p.bbr.lt_is_sampling, "the RTO starts long-term sampling");
    // The stack cuts cwnd to in-flight + 1; BBR grows it per ACK and
    // restores the saved cwnd when Loss ends.
    p.tp.ca_state = CaState::Loss;
    p.tp.cwnd = 1;
    p.tp.packets_out = 0;
    p.advance(RTT_US);
    p.ack(1, p.tp.delivered, RTT_US as i64, RTT_US as i64, 0);
    assert_eq!(p.tp.cwnd, CWND_MIN_TARGET);
    p.tp.ca_state = CaState::Open;
    p.advance(RTT_US);
    p.ack(1, p.tp.delivered, RTT_US as i64, RTT_US as i64, 0);
    assert_eq!(p.tp.cwnd, 201);
}

#[test]
fn restart_from_idle_paces_at_the_estimate() {
    let mut p = at_phase(0);
    let probing = p.tp.pacing_rate;
    p.tp.app_limited = 0;
    p.bbr.cwnd_event(&mut p.tp, CaEvent::TxStart);
    assert!(!p.bbr.idle_restart, "only an app-limited restart counts");
    p.tp.app_limited = p.tp.delivered + 1;
    p.bbr.cwnd_event(&mut p.tp, CaEvent::TxStart);
    assert!(p.bbr.idle_restart);
    assert_eq!(p.bbr.ack_epoch_acked, 0);
    let unit = Bbr::bw_to_pacing_rate(&p.tp, p.bbr.bw(), BBR_UNIT);
    assert_eq!(p.tp.pacing_rate, unit);
    assert!(unit < probing);
    // An idle restart does not trigger PROBE_RTT; the first delivery ends it.
    p.advance(11_000_000);
    p.tp.delivered_mstamp = p.tp.mstamp_us;
    let rs = RateSample { rtt_us: RTT_US as i64 + 100, delivered: 0, ..RateSample::default() };
    p.bbr.cong_control(&mut p.tp, &rs);
    assert_eq!(p.bbr.mode, Mode::ProbeBw);
    p.tp.packets_out = 1;
    p.ack(1, p.tp.delivered, RTT_US as i64, RTT_US as i64 + 100, 0);
    assert!(!p.bbr.idle_restart);
}

#[test]
fn restart_from_idle_ends_a_due_probe_rtt() {
    let mut p = at_phase(2);
    p.bbr.mode = Mode::ProbeRtt;
    p.bbr.prior_cwnd = 150;
    p.tp.cwnd = 4;
    p.bbr.probe_rtt_done_stamp = p.tp.jiffies;
    p.advance(2000);
    p.tp.app_limited = 1;
    p.bbr.cwnd_event(&mut p.tp, CaEvent::TxStart);
    assert_eq!(p.bbr.mode, Mode::ProbeBw);
    assert_eq!(p.tp.cwnd, 150);
}

/// Rounds of `n` packets in which `lost` packets are marked lost, the loss
/// reported on the round's last ACK.
fn lossy_round(p: &mut Path, n: u32, lost: u32) {
    let start = p.tp.delivered;
    for i in 0..n {
        p.advance(RTT_US / n as u64);
        let losses = if i == n - 1 { lost } else { 0 };
        let prior = p.sent_from + 1 + (i as u64 * p.last_round as u64 / n as u64) as u32;
        p.ack(1, prior.min(start), RTT_US as i64, RTT_US as i64, losses);
    }
    p.sent_from = start;
    p.last_round = n;
}

#[test]
fn policer_is_detected_from_two_lossy_intervals_at_the_same_rate() {
    let mut p = Path::steady(1, 100);
    // 40 packets per round get through, 20 % and more are lost.
    lossy_round(&mut p, 40, 10);
    assert!(p.bbr.lt_is_sampling);
    for _ in 0..4 {
        lossy_round(&mut p, 40, 10);
    }
    assert_ne!(p.bbr.lt_bw, 0, "first interval measured");
    assert!(!p.bbr.lt_use_bw);
    let first = p.bbr.lt_bw as f64;
    // A second interval within 1/8 (42 packets per round): policed, at the
    // mean of the two intervals.
    for _ in 0..4 {
        lossy_round(&mut p, 42, 11);
    }
    assert!(p.bbr.lt_use_bw, "second consistent interval: policed");
    // The second interval measures 168 packets in 39 ms (+7.7 %, ms
    // timestamps); their mean is 3.8 % above the first.
    let lt = p.bbr.bw() as f64;
    assert!(lt > first * 1.02 && lt < first * 1.06, "lt_bw {lt} vs first interval {first}");
    assert_eq!(p.bbr.pacing_gain, BBR_UNIT);
    let rate = Bbr::bw_to_pacing_rate(&p.tp, p.bbr.lt_bw, BBR_UNIT);
    assert_eq!(p.tp.pacing_rate, rate);
    // Used for 48 rounds in PROBE_BW, then dropped and the cycle restarts.
    for _ in 0..47 {
        p.round(40);
        assert!(p.bbr.lt_use_bw);
    }
    p.round(40);
    assert!(!p.bbr.lt_use_bw);
    assert_eq!(p.bbr.lt_bw, 0);
}

#[test]
fn light_losses_or_differing_rates_are_not_a_policer() {
    let mut p = Path::steady(1, 100);
    for _ in 0..30 {
        lossy_round(&mut p, 100, 5);
    }
    assert!(!p.bbr.lt_use_bw, "5 % loss is not policing");
    let mut p = Path::steady(1, 100);
    for n in [40, 40, 40, 40, 40, 60, 60, 60, 60, 80, 80, 80, 80] {
        lossy_round(&mut p, n, n / 4);
    }
    assert!(!p.bbr.lt_use_bw, "rates 40/60/80 differ by more than 1/8");
    // App-limited samples abandon sampling.
    p.advance(100);
    let rs = RateSample {
        prior_mstamp: 1,
        prior_delivered: p.tp.delivered,
        delivered: 1,
        interval_us: RTT_US as i64,
        is_app_limited: true,
        acked_sacked: 1,
        ..RateSample::default()
    };
    p.tp.delivered += 1;
    p.bbr.cong_control(&mut p.tp, &rs);
    assert!(!p.bbr.lt_is_sampling);
}

#[test]
fn ack_aggregation_raises_the_cwnd_target() {
    let mut p = at_phase(2);
    p.tp.packets_out = 100;
    p.bbr.extra_acked = [0, 0];
    p.tp.cwnd = 1000;
    p.advance(100);
    p.ack_at(1, 0);
    let base = p.tp.cwnd - p.bbr.ack_aggregation_cwnd();
    // After 2 ms of silence, one ACK for 40 packets: 20 more than 2 ms at
    // 10 packets/ms explain.
    p.advance(2000);
    p.ack_at(40, 0);
    let extra = p.bbr.extra_acked() as u32;
    assert!((19..=41).contains(&extra), "extra_acked {extra}");
    p.tp.cwnd = 1000;
    p.advance(100);
    p.ack_at(1, 0);
    assert!(p.tp.cwnd.abs_diff(base + extra) <= 1, "{} vs {base} + {extra}", p.tp.cwnd);
    // Capped at 100 ms worth of the bandwidth.
    p.bbr.extra_acked = [u16::MAX, 0];
    assert_eq!(p.bbr.ack_aggregation_cwnd(), (p.bbr.bw() as u64 * 100_000 / BW_UNIT) as u32);
}

#[test]
fn tso_goal_follows_the_pacing_rate() {
    let mut tp = TcpSock::new(MSS, 1000, 10);
    tp.pacing_rate = 100_000; // below 1.2 Mbit/s: one segment
    assert_eq!(Bbr::tso_segs_goal(&tp), 1);
    tp.pacing_rate = 1_000_000;
    assert_eq!(Bbr::tso_segs_goal(&tp), 2);
    tp.pacing_rate = 12_500_000; // 100 Mbit/s: 12207 bytes per ms
    assert_eq!(Bbr::tso_segs_goal(&tp), 8);
    tp.pacing_shift = 8;
    assert_eq!(Bbr::tso_segs_goal(&tp), 33);
    tp.pacing_shift = 10;
    tp.pacing_rate = 1_250_000_000; // 10 Gbit/s: one 64 KB skb
    assert_eq!(Bbr::tso_segs_goal(&tp), 65215 / MSS);
}

#[test]
fn bdp_rounds_up_and_defaults_to_the_initial_window() {
    let mut b = Bbr::new();
    assert_eq!(b.bdp(1 << 30, CWND_GAIN), TCP_INIT_CWND);
    b.min_rtt_us = 10_000;
    // 0.01 packets/us x 10 ms = 100 packets; a hair more rounds up.
    let bw = (BW_UNIT / 100) as u32 + 1;
    assert_eq!(b.bdp(bw, BBR_UNIT), 101);
    assert_eq!(b.bdp(bw, CWND_GAIN), 201);
}

#[test]
fn get_info_reports_the_model_as_ss_shows_it() {
    // Before the first ACK the gains are unset, as in Linux (bbr_init sets
    // the mode; each ACK sets the gains); in start-up both are the high
    // gain (ss: pacing_gain:2.88672); the min RTT is the handshake's.
    let mut p = Path::new(1);
    let info = p.bbr.get_info(&p.tp).unwrap();
    assert_eq!((info.pacing_gain, info.cwnd_gain, info.min_rtt_us), (0, 0, RTT_US as u32));
    p.round(10);
    let info = p.bbr.get_info(&p.tp).unwrap();
    assert_eq!((info.pacing_gain, info.cwnd_gain, info.min_rtt_us), (739, 739, RTT_US as u32));
    // In PROBE_BW at 100 packets per 10 ms: the bandwidth in bytes a second,
    // without the pacing margin, and the phase's gains.
    let mut p = at_phase(0);
    p.tp.packets_out = 100;
    p.advance(100);
    p.ack_at(1, 0);
    let info = p.bbr.get_info(&p.tp).unwrap();
    assert_eq!(info.bw_bytes_per_s, (p.bbr.bw() as u64 * MSS as u64 * 1_000_000) >> BW_SCALE);
    assert!((info.bw_bytes_per_s as f64 / (10_000.0 * MSS as f64) - 1.0).abs() < 0.02, "{info:?}");
    assert_eq!((info.pacing_gain, info.cwnd_gain), (p.bbr.pacing_gain, 2 * BBR_UNIT));
    assert!(crate::cc::reno::Reno::default().get_info(&p.tp).is_none());
}
