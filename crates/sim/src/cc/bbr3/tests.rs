//! BBRv3's unit tests: a hand-fed `Path` plays the stack on a path of fixed
//! RTT (one ACK per packet, each sample spanning one round), and scripted
//! loss and ECN signals check the state machine and the model's bounds
//! against the v3 code's rules and arithmetic.

use super::*;
use crate::units::{jiffies_at, Time};
use std::collections::BTreeMap;

const MSS: u32 = 1448;
const RTT_US: u64 = 10_000;

fn config(params: &[(&str, super::super::ParamValue)]) -> Bbr3Config {
    let mut m = BTreeMap::new();
    for (k, v) in params {
        m.insert(k.to_string(), v.clone());
    }
    Bbr3Config::from_params(&Params::new("bbr3", &m, Bbr3Config::catalogue()).unwrap())
}

/// A BBRv3 sender fed by hand-made ACKs on a path of fixed RTT.
struct Path {
    bbr: Bbr3,
    tp: TcpSock,
    /// `tp.delivered` when the current round's packets began to be sent.
    sent_from: u32,
    /// Packets delivered in the previous round.
    last_round: u32,
    /// (phase, pacing gain, cwnd gain) in PROBE_BW after each ACK that changed them.
    trace: Vec<(Phase, u32, u32)>,
}

impl Path {
    fn with(seed: u64, cfg: Bbr3Config) -> Path {
        let mut tp = TcpSock::new(MSS, 1000, 10);
        tp.flow_seed = seed;
        tp.srtt_us8 = (RTT_US as u32) << 3;
        tp.rtt_min.reset(0, RTT_US as u32);
        let mut p = Path { bbr: Bbr3::new(cfg), tp, sent_from: 0, last_round: 0, trace: Vec::new() };
        // Start at 1 s so that no jiffies stamp is 0 (BBR's "unset").
        p.advance(1_000_000);
        p.bbr.init(&mut p.tp);
        p
    }

    fn new(seed: u64) -> Path {
        Path::with(seed, Bbr3Config::default())
    }

    fn advance(&mut self, us: u64) {
        let tp = &mut self.tp;
        tp.mstamp_us += us;
        tp.now = Time(tp.mstamp_us * 1000);
        tp.jiffies = jiffies_at(tp.now, tp.hz);
    }

    /// One ACK newly delivering `acked` packets; `edit` adjusts the sample
    /// (loss, ECN) before BBR sees it.
    fn ack_with(&mut self, acked: u32, prior_delivered: u32, edit: impl FnOnce(&mut RateSample, &mut TcpSock)) {
        let prior_in_flight = self.tp.packets_in_flight();
        let is_app_limited = self.tp.app_limited != 0;
        self.tp.delivered += acked;
        if self.tp.app_limited != 0 && seq_after(self.tp.delivered, self.tp.app_limited) {
            self.tp.app_limited = 0;
        }
        self.tp.delivered_mstamp = self.tp.mstamp_us;
        let mut rs = RateSample {
            prior_mstamp: 1,
            prior_delivered,
            delivered: (self.tp.delivered - prior_delivered) as i64,
            interval_us: RTT_US as i64,
            rtt_us: RTT_US as i64,
            acked_sacked: acked,
            prior_in_flight,
            tx_in_flight: self.tp.packets_out,
            is_app_limited,
            ..RateSample::default()
        };
        edit(&mut rs, &mut self.tp);
        self.tp.lost += rs.losses;
        self.bbr.cong_control(&mut self.tp, &rs);
        let now = (self.bbr.cycle_idx, self.bbr.pacing_gain, self.bbr.cwnd_gain);
        if self.bbr.mode == Mode::ProbeBw && self.trace.last() != Some(&now) {
            self.trace.push(now);
        }
    }

    /// One round trip delivering `n` packets spread over the RTT; `edit` is
    /// applied to the i-th ACK's sample.
    fn round_with(&mut self, n: u32, mut edit: impl FnMut(u32, &mut RateSample, &mut TcpSock)) {
        let start = self.tp.delivered;
        for i in 0..n {
            self.advance(RTT_US / n as u64);
            let prior = self.sent_from + 1 + (i as u64 * self.last_round as u64 / n as u64) as u32;
            self.ack_with(1, prior.min(start), |rs, tp| edit(i, rs, tp));
        }
        self.sent_from = start;
        self.last_round = n;
    }

    fn round(&mut self, n: u32) {
        self.round_with(n, |_, _, _| {});
    }

    /// Takes BBR to PROBE_BW with a pipe of `n` packets per RTT, cwnd-limited.
    fn steady(seed: u64, n: u32) -> Path {
        let mut p = Path::new(seed);
        p.to_probe_bw(n);
        p
    }

    fn to_probe_bw(&mut self, n: u32) {
        self.tp.packets_out = n;
        self.tp.is_cwnd_limited = true;
        let mut k = 10;
        while k < n {
            self.round(k);
            k *= 2;
        }
        let mut rounds = 0;
        while self.bbr.mode != Mode::ProbeBw {
            self.round(n);
            rounds += 1;
            assert!(rounds < 20, "never reached PROBE_BW");
        }
    }

    /// Rounds of `n` packets until the phase is `phase` (at most `max`).
    fn until_phase(&mut self, n: u32, phase: Phase, max: u32) -> u32 {
        let mut k = 0;
        while self.bbr.cycle_idx != phase {
            self.round(n);
            k += 1;
            assert!(k <= max, "no {phase:?} within {max} rounds (at {:?})", self.bbr.cycle_idx);
        }
        k
    }

    /// BDP in packets of the current model (bw x min_rtt, rounded up).
    fn bdp(&self) -> u32 {
        self.bbr.bdp(self.bbr.bw(), BBR_UNIT)
    }
}

/// An `ecn_low` path; the test path's 10 ms min RTT needs the 5 ms ECN limit raised.
fn ecn_path() -> Bbr3Config {
    use super::super::ParamValue::{Bool, Int};
    config(&[("ecn_low", Bool(true)), ("ecn_max_rtt_us", Int(20_000))])
}

#[test]
fn ecn_is_only_used_below_five_ms() {
    let mut p = Path::with(1, config(&[("ecn_low", super::super::ParamValue::Bool(true))]));
    p.tp.packets_out = 10;
    p.round(10);
    p.round(10);
    assert!(!p.bbr.ecn_eligible, "10 ms min RTT");
    let mut p = Path::with(1, ecn_path());
    p.tp.packets_out = 10;
    p.round(10);
    p.round(10);
    assert!(p.bbr.ecn_eligible);
}

#[test]
fn constants_match_v3() {
    assert_eq!(STARTUP_PACING_GAIN, 710);
    assert_eq!(STARTUP_CWND_GAIN, 512);
    assert_eq!(DRAIN_GAIN, 88);
    assert_eq!(CWND_GAIN, 512);
    assert_eq!(PACING_GAIN, [320, 232, 256, 256]);
    let c = Bbr3Config::default();
    // BBR_UNIT * 30 / 100, * 2 / 100, * 15 / 100, / 2, / 3, / 16, / 2 as v3 computes them.
    assert_eq!((c.beta, c.loss_thresh, c.inflight_headroom), (256 * 30 / 100, 256 * 2 / 100, 256 * 15 / 100));
    assert_eq!((c.ecn_thresh, c.ecn_factor, c.ecn_alpha_gain, c.ecn_reprobe_gain), (128, 256 / 3, 16, 128));
    assert_eq!((c.full_loss_cnt, c.full_ecn_cnt, c.probe_rtt_win_ms, c.probe_rtt_mode_ms), (6, 2, 5000, 200));
    assert_eq!(c.probe_rtt_cwnd_gain, 128);
    assert_eq!((c.bw_probe_base_us, c.bw_probe_rand_us, c.bw_probe_max_rounds, c.bw_probe_rand_rounds), (2_000_000, 1_000_000, 63, 2));
    assert!(!c.ecn_low, "v3 uses ECN only on ecn_low routes");
}

#[test]
fn startup_paces_at_2_77_with_cwnd_gain_2_and_ends_on_a_plateau() {
    let mut p = Path::new(1);
    p.tp.packets_out = 100;
    p.round(10);
    assert_eq!(p.bbr.mode(), Mode::Startup);
    assert_eq!((p.bbr.pacing_gain(), p.bbr.cwnd_gain()), (710, 512));
    // Doubling rounds keep STARTUP going; three flat rounds end it.
    p.round(20);
    p.round(40);
    p.round(80);
    assert_eq!(p.bbr.mode(), Mode::Startup);
    p.round(100);
    p.round(100);
    p.round(100);
    p.round(100);
    assert!(p.bbr.full_bw_reached());
    assert_ne!(p.bbr.mode(), Mode::Startup);
    // A plateau says nothing about a buffer: no upper bound yet.
    assert_eq!(p.bbr.inflight_hi(), u32::MAX);
}

/// Losses in STARTUP: six loss events in a recovery round with more than
/// 2 % of the flight lost end STARTUP at once, with inflight_hi at the
/// larger of the BDP and the volume the last round delivered.
#[test]
fn startup_ends_on_six_loss_events_above_two_percent() {
    let mut p = Path::new(1);
    p.tp.packets_out = 100;
    p.round(10);
    p.round(20);
    p.round(40);
    p.tp.ca_state = CaState::Recovery;
    // The check runs at the end of each loss round (the first ACK of the
    // next), on that ACK's sample: 5 lost of 80 in flight is 6 %.
    let lossy = |n: u32, events: u32| {
        move |i: u32, rs: &mut RateSample, _: &mut TcpSock| {
            if i % 10 == 1 && i / 10 < events {
                rs.losses = 1;
            }
            rs.lost = 5;
            rs.tx_in_flight = 80.min(n);
        }
    };
    // Five loss events in a round are not enough ...
    p.round_with(80, lossy(80, 5));
    p.round_with(160, lossy(160, 0));
    assert!(!p.bbr.full_bw_reached(), "five loss events");
    // ... six are.
    p.round_with(160, lossy(160, 6));
    assert!(!p.bbr.full_bw_reached(), "decided at the round's end");
    p.round_with(320, lossy(320, 0));
    assert!(p.bbr.full_bw_reached());
    assert_ne!(p.bbr.mode(), Mode::Startup);
    // The BDP then (about 160 packets per round) or the last round's volume.
    let hi = p.bbr.inflight_hi();
    assert!((150..170).contains(&hi), "inflight_hi {hi}");
}

/// The same six loss events at 1 % loss do not end STARTUP.
#[test]
fn startup_ignores_loss_below_the_threshold() {
    let mut p = Path::new(1);
    p.tp.packets_out = 100;
    p.round(10);
    p.round(20);
    p.round(40);
    p.tp.ca_state = CaState::Recovery;
    for n in [80, 160, 320] {
        p.round_with(n, |i, rs, _| {
            if i % 10 == 1 && i < 60 {
                rs.losses = 1;
            }
            rs.lost = 1;
            rs.tx_in_flight = n;
        });
    }
    assert!(!p.bbr.full_bw_reached());
}

/// PROBE_BW cycles DOWN -> CRUISE -> REFILL -> UP -> DOWN with gains 0.91,
/// 1, 1, 1.25 (cwnd gain 2, 2.25 in UP).
#[test]
fn probe_bw_cycles_down_cruise_refill_up() {
    let mut p = Path::steady(3, 100);
    p.trace.clear();
    for _ in 0..200 {
        p.round(100);
        if p.trace.len() >= 6 {
            break;
        }
    }
    // DRAIN ended in DOWN, which ended at once (in-flight at the BDP): cruising.
    assert_eq!(
        p.trace[..6],
        vec![
            (Phase::Cruise, 256, 512),
            (Phase::Refill, 256, 512),
            (Phase::Up, 320, 576),
            (Phase::Down, 232, 512),
            (Phase::Cruise, 256, 512),
            (Phase::Refill, 256, 512),
        ]
    );
}

/// With a BDP of 100 packets the Reno-coexistence bound (min(63, target
/// inflight) rounds, less a random head start of 0-1 rounds) starts the probe
/// long before the 2-3 s wall clock.
#[test]
fn probe_starts_after_at_most_63_rounds() {
    let mut p = Path::steady(5, 100);
    let rounds = p.until_phase(100, Phase::Refill, 70);
    assert!((61..=64).contains(&rounds), "probe after {rounds} rounds");
    assert!((2_000_000..3_000_000).contains(&p.bbr.probe_wait_us()));
}

/// With a BDP of 20 packets a Reno flow would probe every 20 rounds; so does v3.
#[test]
fn the_round_bound_follows_a_small_bdp() {
    let mut p = Path::steady(5, 20);
    p.until_phase(20, Phase::Cruise, 5);
    let rounds = p.until_phase(20, Phase::Refill, 40);
    let target = p.bbr.target_inflight(&p.tp);
    assert!(target < 63, "target {target}");
    assert!(rounds <= target + 1, "probe after {rounds} rounds, target inflight {target}");
}

/// Without the round bound (a huge BDP) the wall clock decides: 2 s plus a
/// random 0-1 s drawn from the flow's seeded generator.
#[test]
fn the_wall_clock_bound_is_two_to_three_seconds_and_seeded() {
    let cfg = || config(&[("bw_probe_max_rounds", super::super::ParamValue::Int(255))]);
    let wait = |seed| {
        let mut p = Path::with(seed, cfg());
        p.to_probe_bw(100);
        p.bbr.probe_wait_us()
    };
    let (a, b, a2) = (wait(1), wait(2), wait(1));
    assert_eq!(a, a2, "same seed, same wait");
    assert_ne!(a, b, "the wait is randomised per flow");
    for w in [a, b] {
        assert!((2_000_000..3_000_000).contains(&w), "wait {w}");
    }
    // Rounds of 30 ms (the flow sends for 10 ms of each): 255 rounds are
    // 7.6 s, so the wall clock comes first.
    let mut p = Path::with(7, cfg());
    p.to_probe_bw(100);
    let start = p.bbr.cycle_mstamp;
    let wait = p.bbr.probe_wait_us() as u64;
    let mut rounds = 0;
    while p.bbr.cycle_idx != Phase::Refill {
        p.round(100);
        p.advance(2 * RTT_US);
        rounds += 1;
        assert!(rounds < 200);
    }
    let elapsed = p.tp.mstamp_us - 2 * RTT_US - start;
    assert!(elapsed > wait && elapsed <= wait + 3 * RTT_US, "probe after {elapsed} us, wait {wait}");
}

/// In UP, with inflight_hi limiting cwnd, inflight_hi grows by 1, 2, 4, ...
/// packets per round: one per cwnd / 2^n packets delivered in round n.
#[test]
fn inflight_hi_probing_doubles_each_round() {
    let mut p = Path::steady(3, 100);
    p.bbr.inflight_hi = 100;
    p.tp.cwnd = 100;
    p.until_phase(100, Phase::Up, 80);
    let mut growth = Vec::new();
    for _ in 0..4 {
        let before = p.bbr.inflight_hi();
        p.tp.cwnd = p.bbr.inflight_hi();
        p.round(100);
        if p.bbr.phase() != Phase::Up {
            break;
        }
        growth.push(p.bbr.inflight_hi() - before);
    }
    assert!(growth.len() >= 3, "growth {growth:?}");
    for w in growth.windows(2) {
        assert!(w[1] >= 2 * w[0] - 1 && w[1] <= 2 * w[0] + 1, "growth per round {growth:?}");
    }
    assert!(growth[0] >= 1 && growth[0] <= 2, "growth {growth:?}");
}

/// Loss above 2 % of the flight while probing: inflight_hi becomes the
/// in-flight level of the lossy sample (or 70 % of the target if larger),
/// and the probe ends (DOWN).
#[test]
fn loss_above_two_percent_in_a_probe_sets_inflight_hi() {
    let mut p = Path::steady(3, 100);
    p.until_phase(100, Phase::Up, 80);
    p.round(100);
    assert_eq!(p.bbr.phase(), Phase::Up);
    // 3 lost of 120 in flight is 2.5 %, above 120 x 5/256 = 2 packets.
    p.ack_with(1, p.tp.delivered - 99, |rs, _| {
        rs.lost = 3;
        rs.tx_in_flight = 120;
        rs.losses = 1;
    });
    assert_eq!(p.bbr.inflight_hi(), 120.max(p.bbr.target_inflight(&p.tp) * 180 / 256));
    assert_eq!(p.bbr.phase(), Phase::Down);
    assert!(p.bbr.prev_probe_too_high);
}

/// Loss at or below 2 % does not cap anything.
#[test]
fn loss_at_two_percent_is_tolerated() {
    let mut p = Path::steady(3, 100);
    p.until_phase(100, Phase::Up, 80);
    p.round(100);
    // 3 of 200 (1.5 %) is within 200 x 5/256 = 3 packets.
    p.ack_with(1, p.tp.delivered - 99, |rs, _| {
        rs.lost = 3;
        rs.tx_in_flight = 200;
    });
    assert_eq!(p.bbr.inflight_hi(), u32::MAX);
    assert_eq!(p.bbr.phase(), Phase::Up);
}

/// A segment marked lost while probing: v3 finds where in its flight the loss
/// rate crossed 2 % and caps inflight_hi there, before any ACK.
#[test]
fn a_lost_segment_during_a_probe_caps_inflight_hi_at_the_crossing() {
    let mut p = Path::steady(3, 100);
    p.until_phase(100, Phase::Up, 80);
    p.round(100);
    assert!(p.bbr.bw_probe_samples);
    // 150 in flight after it left, 4 lost since (itself included): the budget
    // of the 149 before it is ceil(149 x 5 / 256) = 3 losses, 3 had been lost,
    // so the threshold was crossed at the segment itself: inflight_hi 149.
    let skb = LostSkb { tx_in_flight: 150, lost: 4, tx_app_limited: false, has_tx_state: true };
    p.tp.lost += 1;
    p.bbr.skb_marked_lost(&mut p.tp, &skb);
    assert_eq!(p.bbr.inflight_hi(), 149.max(p.bbr.target_inflight(&p.tp) * 180 / 256));
    assert_eq!(p.bbr.phase(), Phase::Down);
    // Outside a probe a lost segment only marks the round and the cycle.
    p.until_phase(100, Phase::Cruise, 5);
    p.bbr.skb_marked_lost(&mut p.tp, &skb);
    assert_eq!(p.bbr.phase(), Phase::Cruise);
    assert!(p.bbr.loss_in_round && p.bbr.loss_in_cycle);
}

#[test]
fn inflight_hi_from_a_lost_skb_solves_for_the_threshold() {
    let p = Path::new(1);
    let rs = |tx_in_flight, lost| RateSample { tx_in_flight, lost, ..RateSample::default() };
    // 1000 before it, budget ceil(1000 x 5 / 256) = 20; 10 lost before: 10
    // more packets at 251/256 loss-free share each -> prefix 10 x 256 / 251 = 10.
    assert_eq!(p.bbr.inflight_hi_from_lost_skb(&rs(1001, 11)), 1000 + 10);
    // Already over budget before this segment: prefix 0.
    assert_eq!(p.bbr.inflight_hi_from_lost_skb(&rs(101, 10)), 100);
    // Inconsistent snapshots are ignored (~0U).
    assert_eq!(p.bbr.inflight_hi_from_lost_skb(&rs(0, 1)), u32::MAX);
}

/// Loss while cruising: at the end of the loss round, inflight_lo is cut
/// to 70 % of cwnd (beta 0.3) and cwnd follows it.
#[test]
fn loss_while_cruising_cuts_inflight_lo_by_beta() {
    let mut p = Path::steady(3, 100);
    p.until_phase(100, Phase::Cruise, 5);
    p.round(100);
    let cwnd = p.tp.cwnd;
    assert_eq!((p.bbr.bw_lo(), p.bbr.inflight_lo()), (u32::MAX, u32::MAX));
    p.round_with(100, |i, rs, _| {
        if i == 10 {
            rs.losses = 1;
            rs.lost = 1;
        }
    });
    p.round(100);
    let cut = |x: u32| ((x as u64 * (256 - 76)) >> 8) as u32;
    assert_eq!(p.bbr.inflight_lo(), cut(cwnd).max(100), "inflight_lo");
    assert!(p.tp.cwnd <= p.bbr.inflight_lo(), "cwnd {} bounded by inflight_lo", p.tp.cwnd);
    // The bandwidth was delivered in full that round: bw_lo stays at the max.
    assert_eq!(p.bbr.bw_lo(), p.bbr.max_bw());
}

/// The lower bounds after loss rounds: (1 - beta) of the previous bound, or
/// the latest round's delivery if that is higher; ECN rounds cut inflight_lo
/// by ecn_factor x alpha.
#[test]
fn lower_bounds_are_cut_by_beta_down_to_the_latest_delivery() {
    let mut p = Path::steady(3, 100);
    p.until_phase(100, Phase::Cruise, 5);
    let (max_bw, cwnd) = (p.bbr.max_bw(), p.tp.cwnd);
    let cut = |x: u32| ((x as u64 * (256 - 76)) >> 8) as u32;
    p.bbr.bw_latest = max_bw / 4;
    p.bbr.inflight_latest = 10;
    p.bbr.loss_in_round = true;
    p.bbr.adapt_lower_bounds(&p.tp);
    assert_eq!((p.bbr.bw_lo(), p.bbr.inflight_lo()), (cut(max_bw), cut(cwnd)));
    p.bbr.adapt_lower_bounds(&p.tp);
    assert_eq!((p.bbr.bw_lo(), p.bbr.inflight_lo()), (cut(cut(max_bw)), cut(cut(cwnd))));
    assert_eq!(p.bbr.bw(), cut(cut(max_bw)), "pacing follows bw_lo");
    // The latest round's delivery is a floor.
    p.bbr.bw_latest = max_bw / 2;
    p.bbr.inflight_latest = 100;
    p.bbr.adapt_lower_bounds(&p.tp);
    assert_eq!((p.bbr.bw_lo(), p.bbr.inflight_lo()), (max_bw / 2, 100));
    // ECN: a cut of 85/256 x alpha (alpha 1 here), no floor, bw_lo untouched.
    p.bbr.loss_in_round = false;
    p.bbr.ecn_in_round = true;
    p.bbr.adapt_lower_bounds(&p.tp);
    assert_eq!((p.bbr.bw_lo(), p.bbr.inflight_lo()), (max_bw / 2, (100 * (256 - 85)) >> 8));
    // Not while probing.
    p.bbr.cycle_idx = Phase::Up;
    p.bbr.loss_in_round = true;
    p.bbr.adapt_lower_bounds(&p.tp);
    assert_eq!(p.bbr.inflight_lo(), (100 * (256 - 85)) >> 8);
}

/// An undo (spurious recovery) restores the bounds saved at ssthresh time.
#[test]
fn undo_restores_the_bounds_cut_in_recovery() {
    let mut p = Path::steady(3, 100);
    p.until_phase(100, Phase::Cruise, 5);
    p.round(100);
    p.bbr.ssthresh(&mut p.tp);
    p.round_with(100, |i, rs, _| rs.losses = u32::from(i == 0));
    p.round(100);
    assert_ne!(p.bbr.inflight_lo(), u32::MAX);
    let cwnd = p.bbr.undo_cwnd(&mut p.tp);
    assert_eq!((p.bbr.bw_lo(), p.bbr.inflight_lo()), (u32::MAX, u32::MAX));
    assert_eq!(cwnd, p.bbr.prior_cwnd);
}

/// 5 s without a lower RTT sample: PROBE_RTT with cwnd at half the BDP for
/// 200 ms and a round, then back to PROBE_BW (cruising).
#[test]
fn probe_rtt_after_five_seconds_at_half_the_bdp() {
    let mut p = Path::steady(3, 100);
    let start = p.tp.mstamp_us;
    let mut rounds = 0;
    while p.bbr.mode() != Mode::ProbeRtt {
        p.round(100);
        rounds += 1;
        assert!(rounds < 600);
    }
    let entered = p.tp.mstamp_us - start;
    // The 5 s count from the last min-RTT sample (STARTUP's, about 60 ms
    // before `steady` returns).
    assert!((4_800_000..=5_100_000).contains(&entered), "PROBE_RTT after {entered} us");
    let half_bdp = p.bbr.bdp(p.bbr.bw(), BBR_UNIT / 2);
    assert_eq!(half_bdp, p.bdp().div_ceil(2));
    assert_eq!(p.tp.cwnd, half_bdp.max(CWND_MIN_TARGET));
    // In flight falls to half the BDP: 200 ms and a round later it is over.
    p.tp.packets_out = half_bdp;
    let t0 = p.tp.mstamp_us;
    while p.bbr.mode() == Mode::ProbeRtt {
        p.round(half_bdp);
        assert!(p.tp.mstamp_us - t0 < 400_000);
    }
    let held = p.tp.mstamp_us - t0;
    assert!((200_000..=230_000).contains(&held), "PROBE_RTT held {held} us");
    assert_eq!((p.bbr.mode(), p.bbr.phase()), (Mode::ProbeBw, Phase::Cruise));
}

/// The ECN alpha EWMA (gain 1/16), on an `ecn_low` path: all-CE rounds keep
/// it at 1, CE-free rounds decay it by 1/16 per round; without `ecn_low`
/// (v3's default) ECN is ignored.
#[test]
fn ecn_alpha_is_an_ewma_with_gain_one_sixteenth() {
    let on = || ecn_path();
    let mut p = Path::with(1, on());
    p.tp.packets_out = 10;
    p.round_with(10, |_, _, tp| tp.delivered_ce += 1);
    p.round_with(10, |_, _, tp| tp.delivered_ce += 1);
    assert!(p.bbr.ecn_eligible);
    assert_eq!(p.bbr.ecn_alpha(), 256);
    // Rounds span ACKs, not the script's rounds: let one pass, then each
    // CE-free round scales alpha by 15/16 (truncating).
    p.round(10);
    for _ in 0..4 {
        let before = p.bbr.ecn_alpha();
        p.round(10);
        assert_eq!(p.bbr.ecn_alpha(), (240 * before) >> 8);
    }
    // Default: ecn_low off, alpha never moves.
    let mut q = Path::new(1);
    q.tp.packets_out = 10;
    q.round_with(10, |_, _, tp| tp.delivered_ce += 1);
    q.round(10);
    q.round(10);
    assert!(!q.bbr.ecn_eligible);
    assert_eq!(q.bbr.ecn_alpha(), 256);
}

/// Two STARTUP rounds with more than half the packets CE-marked end STARTUP
/// (ECN path only).
#[test]
fn startup_ends_after_two_rounds_of_high_ce() {
    let mut p = Path::with(1, ecn_path());
    p.tp.packets_out = 100;
    p.round(10);
    p.round(20);
    assert!(!p.bbr.full_bw_reached());
    p.round_with(40, |_, rs, tp| {
        tp.delivered_ce += 1;
        rs.is_ece = true;
    });
    p.round_with(80, |_, rs, tp| {
        tp.delivered_ce += 1;
        rs.is_ece = true;
    });
    p.round(160);
    assert!(p.bbr.full_bw_reached());
}

/// ECN while cruising cuts inflight_lo by ecn_factor x alpha (1/3 at alpha 1).
#[test]
fn ecn_while_cruising_cuts_inflight_lo() {
    let mut p = Path::with(3, ecn_path());
    p.to_probe_bw(100);
    p.until_phase(100, Phase::Cruise, 5);
    let cwnd = p.tp.cwnd;
    let alpha = p.bbr.ecn_alpha();
    p.round_with(100, |i, rs, _| rs.is_ece = i == 10);
    p.round(100);
    let expect = (cwnd as u64 * (256 - ((alpha as u64 * 85) >> 8)) >> 8) as u32;
    // alpha moved once more at the round start before the cut.
    assert!(p.bbr.inflight_lo() <= expect + 2 && p.bbr.inflight_lo() + 10 >= expect, "inflight_lo {} vs {expect}", p.bbr.inflight_lo());
    assert_eq!(p.bbr.bw_lo(), u32::MAX, "ECN cuts only the volume");
}

#[test]
fn probe_rtt_win_must_fit_the_min_rtt_window() {
    let mut m = BTreeMap::new();
    m.insert("probe_rtt_win_ms".to_string(), super::super::ParamValue::Int(10_000));
    assert!(super::super::make_cca("bbr3", &m).is_ok());
    m.insert("probe_rtt_win_ms".to_string(), super::super::ParamValue::Int(10_001));
    let e = super::super::make_cca("bbr3", &m).err().unwrap();
    assert!(e.contains("cca_params.probe_rtt_win_ms"), "{e}");
}
