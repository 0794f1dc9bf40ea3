//! BBR v3 as Google's Linux tree runs it (github google/bbr, branch v3,
//! `net/ipv4/tcp_bbr.c` with `BBR_VERSION` 3; IETF draft-ietf-ccwg-bbr). Like
//! v1 (`cc::bbr`) it paces at a bandwidth estimate and bounds in-flight data
//! by a multiple of the bandwidth-delay product, but its model adds bounds
//! learned from loss and ECN: a long-term upper bound (`bw_hi`, the max
//! delivery rate over the last two PROBE_BW cycles, and `inflight_hi`, the
//! in-flight volume at which loss went above 2 %) and a short-term lower bound
//! (`bw_lo`, `inflight_lo`, cut by 30 % per round with loss while not probing).
//! STARTUP paces at 2.77 (4 ln 2) with cwnd gain 2 and also ends on six loss
//! events in a recovery round at more than 2 % loss (or two rounds with more
//! than 50 % CE); PROBE_BW is a four-phase cycle (DOWN 0.91, CRUISE 1,
//! REFILL 1, UP 1.25) that probes every 2-3 s of wall clock, or sooner after
//! as many rounds as a Reno flow with the same BDP would wait (at most 63),
//! with the probe volume doubling each round; PROBE_RTT comes every 5 s with
//! cwnd at half the BDP. The integer arithmetic (BBR_SCALE 8, BW_SCALE 24), the
//! bit-field widths and the order of the per-ACK steps are the v3 code's.
//!
//! The stack provides what v3's kernel patches add for it: the rate sample's
//! `tx_in_flight`, `lost`, `delivered_ce` and `is_ece`, `tp.delivered_ce`, and
//! the `skb_marked_lost` hook. ECN is used, as in v3, only where the route is
//! configured as a low-threshold ECN path (`ecn_low`, off by default) and the
//! connection negotiated ECN. Where this file departs from v3 (no PLB, no
//! TLP-recovery event, the stack's TSO autosizing) `docs/fidelity.md` says so.

use super::params::{declare_params, CcaInfo, Params};
use super::{CaEvent, CaState, CcInfo, CongestionControl, LostSkb, PacingStatus, RateSample, TcpSock, INFINITE_SSTHRESH};
use crate::host::tso;
use crate::packet::{seq_after, seq_before};
use crate::rng::Rng;
use crate::units::usecs_to_jiffies;

// Constants are v3 tcp_bbr.c's unless noted; those v3 reads through
// `bbr_param()` are parameters below.

/// Bandwidth is kept in packets per microsecond << BW_SCALE.
const BW_SCALE: u32 = 24;
const BW_UNIT: u64 = 1 << BW_SCALE;
/// Gains and fractions are << BBR_SCALE.
const BBR_SCALE: u32 = 8;
pub const BBR_UNIT: u32 = 1 << BBR_SCALE;
/// `~0U`: an unset bound.
const UNSET: u32 = u32::MAX;

/// Window of the min-RTT filter, seconds (`bbr_min_rtt_win_sec`).
const MIN_RTT_WIN_SEC: u32 = 10;
/// Pace 1 % below the estimated bandwidth (`bbr_pacing_margin_percent`).
const PACING_MARGIN_PERCENT: u64 = 1;

/// STARTUP pacing gain 4 ln 2 = 2.77 (710/256): the smallest gain that doubles
/// the rate every round while sending what a slow-starting Reno would.
pub const STARTUP_PACING_GAIN: u32 = BBR_UNIT * 277 / 100 + 1;
/// STARTUP (and DRAIN) cwnd gain.
pub const STARTUP_CWND_GAIN: u32 = BBR_UNIT * 2;
/// DRAIN pacing gain 1/2.885 (88/256), as v1.
pub const DRAIN_GAIN: u32 = BBR_UNIT * 1000 / 2885;
/// Steady-state cwnd gain.
pub const CWND_GAIN: u32 = BBR_UNIT * 2;
/// PROBE_BW pacing gains by phase (index = `Phase`): UP, DOWN, CRUISE, REFILL.
pub const PACING_GAIN: [u32; 4] = [BBR_UNIT * 5 / 4, BBR_UNIT * 91 / 100, BBR_UNIT, BBR_UNIT];
/// The smallest cwnd BBR aims for (two 2-packet delayed-ACK pairs).
pub const CWND_MIN_TARGET: u32 = 4;
/// STARTUP or PROBE_UP still finds bandwidth while it grows 25 % ...
const FULL_BW_THRESH: u32 = BBR_UNIT * 5 / 4;
/// ... within three rounds.
const FULL_BW_CNT: u32 = 3;

/// Gain on the ACK-aggregation allowance (`bbr_extra_acked_gain`).
const EXTRA_ACKED_GAIN: u32 = BBR_UNIT;
/// Rounds per bucket of the extra-acked max filter after STARTUP (1 in it).
const EXTRA_ACKED_WIN_RTTS: u32 = 5;
/// An aggregation epoch is restarted after this many packets.
const ACK_EPOCH_ACKED_RESET_THRESH: u32 = 1 << 20;
/// The aggregation allowance is at most 100 ms at the estimated bandwidth.
const EXTRA_ACKED_MAX_US: u64 = 100_000;

/// Increment of the cwnd gain in PROBE_UP, in quarters (`bbr_bw_probe_cwnd_gain`).
const BW_PROBE_CWND_GAIN: u32 = 1;
/// Initial ECN alpha: 1.0, to respond at once on a congested start.
const ECN_ALPHA_INIT: u32 = BBR_UNIT;
/// Use the fast path for app-limited ACKs (`bbr_fast_path`). It skips model
/// updates that cannot change anything, and so the per-ACK bookkeeping that
/// goes with them (as in v3, loss on such an ACK is noted in the next one).
const FAST_PATH: bool = true;
/// `bbr_tso_rtt_shift`: the RTT part of the TSO budget halves per 512 us.
const TSO_RTT_SHIFT: u32 = 9;

/// Linux TCP_INIT_CWND, the cap on `init_cwnd` (7 bits in v3).
const INIT_CWND_MAX: u32 = 0x7f;

declare_params! {
    /// The v3 tunables (`bbr_param(sk, name)` in v3; compile-time constants
    /// there, so every default is v3's). Fractions are x/256 as in the kernel.
    pub struct Bbr3Config {
        /// `bbr_beta` = BBR_UNIT * 30 / 100.
        beta: u32 = 76, range(0, 255), "cut of bw_lo and inflight_lo per round with loss, x/256 (76 = 30 %; 0 = no loss response)";
        /// `bbr_loss_thresh` = BBR_UNIT * 2 / 100.
        loss_thresh: u32 = 5, range(1, 255), "loss rate of a probe that caps inflight_hi, x/256 (5 = 2 %)";
        /// `bbr_full_loss_cnt`.
        full_loss_cnt: u32 = 6, range(0, 15), "loss events in a recovery round (above loss_thresh) that end STARTUP (0: never)";
        /// `bbr_inflight_headroom` = BBR_UNIT * 15 / 100.
        inflight_headroom: u32 = 38, range(0, 255), "share of inflight_hi left unused while cruising, x/256 (38 = 15 %)";
        /// The route feature `ecn_low` (`TCP_ECN_LOW` in v3's `bbr_can_use_ecn`): off by default.
        ecn_low: bool = false, "the path is a low-threshold ECN path: use ECN marks (with tcp.ecn)";
        /// `bbr_ecn_max_rtt_us`.
        ecn_max_rtt_us: u32 = 5000, "largest min RTT (us) at which ECN is used (0: any)";
        /// `bbr_ecn_thresh` = BBR_UNIT / 2.
        ecn_thresh: u32 = 128, range(0, 256), "CE ratio that ends a probe or STARTUP, x/256 (128 = 50 %; 0 = off)";
        /// `bbr_ecn_factor` = BBR_UNIT / 3.
        ecn_factor: u32 = 85, range(0, 256), "inflight_lo cut per ECN round = ecn_factor x alpha, x/256 (85 = 1/3; 0 = off)";
        /// `bbr_ecn_alpha_gain` = BBR_UNIT / 16.
        ecn_alpha_gain: u32 = 16, range(0, 256), "EWMA gain of the CE ratio, x/256 (16 = 1/16)";
        /// `bbr_full_ecn_cnt`.
        full_ecn_cnt: u32 = 2, range(0, 3), "rounds with CE ratio above ecn_thresh that end STARTUP (0: never)";
        /// `bbr_ecn_reprobe_gain` = BBR_UNIT / 2.
        ecn_reprobe_gain: u32 = 128, range(0, 256), "first probe step after ECN clears, share of inflight_hi, x/256 (0: off)";
        /// `bbr_probe_rtt_win_ms`.
        probe_rtt_win_ms: u32 = 5000, range(1, 10000), "PROBE_RTT when the min RTT is this old (ms)";
        /// `bbr_probe_rtt_mode_ms`.
        probe_rtt_mode_ms: u32 = 200, range(0, 10000), "time at the PROBE_RTT cwnd (ms; 0: no PROBE_RTT)";
        /// `bbr_probe_rtt_cwnd_gain` = BBR_UNIT / 2.
        probe_rtt_cwnd_gain: u32 = 128, range(0, 1023), "PROBE_RTT cwnd as a share of the BDP, x/256 (128 = 0.5)";
        /// `bbr_bw_probe_base_us`.
        bw_probe_base_us: u32 = 2_000_000, "wall-clock wait between bandwidth probes, fixed part (us)";
        /// `bbr_bw_probe_rand_us`.
        bw_probe_rand_us: u32 = 1_000_000, "wall-clock wait between bandwidth probes, random part (us)";
        /// `bbr_bw_probe_max_rounds`.
        bw_probe_max_rounds: u32 = 63, range(0, 255), "most rounds between bandwidth probes (Reno coexistence bound)";
        /// `bbr_bw_probe_rand_rounds`.
        bw_probe_rand_rounds: u32 = 2, range(0, 255), "random head start, in rounds, toward the round bound";
    }
}

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "bbr3",
        description: "BBR v3: v1's bandwidth/min-RTT model bounded by loss and ECN (bw_hi/bw_lo, inflight_hi/inflight_lo); STARTUP 2.77 with loss/ECN exits, PROBE_BW DOWN/CRUISE/REFILL/UP every 2-3 s or 63 rounds, PROBE_RTT every 5 s at BDP/2",
        source: "google/bbr v3 net/ipv4/tcp_bbr.c (BBR_VERSION 3); IETF draft-ietf-ccwg-bbr",
        params: Bbr3Config::catalogue(),
    }
}

pub fn build(p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Bbr3::new(Bbr3Config::from_params(p)))
}

/// v3 requires `bbr_probe_rtt_win_ms <= bbr_min_rtt_win_sec * MSEC_PER_SEC`.
pub fn check(p: &Params) -> Result<(), String> {
    let win: u32 = p.get("probe_rtt_win_ms");
    if win > MIN_RTT_WIN_SEC * 1000 {
        return Err(format!("cca_params.probe_rtt_win_ms: must be at most {} (the min-RTT window), got {win}", MIN_RTT_WIN_SEC * 1000));
    }
    Ok(())
}

/// `enum bbr_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Startup = 0,
    Drain = 1,
    ProbeBw = 2,
    ProbeRtt = 3,
}

/// `enum bbr_pacing_gain_phase`: the PROBE_BW phase (`cycle_idx`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Up = 0,
    Down = 1,
    Cruise = 2,
    Refill = 3,
}

/// `enum bbr_ack_phase`: what the ACKs now arriving say about a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AckPhase {
    Init,
    Refilling,
    ProbeStarting,
    ProbeFeedback,
    ProbeStopping,
}

/// Linux v3 `struct bbr`; bit-field members keep the widths that bound them.
pub struct Bbr3 {
    cfg: Bbr3Config,
    /// Min RTT (us) over `MIN_RTT_WIN_SEC`; u32::MAX before any sample.
    min_rtt_us: u32,
    min_rtt_stamp: u32,
    /// Jiffies at which PROBE_RTT may end (0: not yet at the PROBE_RTT cwnd).
    probe_rtt_done_stamp: u32,
    /// Min RTT over `probe_rtt_win_ms`, and when it was taken.
    probe_rtt_min_us: u32,
    probe_rtt_min_stamp: u32,
    /// `tp.delivered` at which the current round ends.
    next_rtt_delivered: u32,
    /// Time (us) the current PROBE_BW phase (or wall-clock wait) started.
    cycle_mstamp: u64,
    mode: Mode,
    prev_ca_state: CaState,
    round_start: bool,
    /// Rounds of PROBE_UP so far: the probe grows 2^n packets in round n (5 bits).
    bw_probe_up_rounds: u32,
    try_fast_path: bool,
    idle_restart: bool,
    probe_rtt_round_done: bool,
    /// cwnd at init (7 bits): the target before any RTT sample.
    init_cwnd: u32,
    pacing_gain: u32,
    cwnd_gain: u32,
    full_bw_reached: bool,
    /// Rounds without 25 % growth (2 bits).
    full_bw_cnt: u32,
    cycle_idx: Phase,
    has_seen_rtt: bool,
    prior_cwnd: u32,
    full_bw: u32,
    ack_epoch_mstamp: u64,
    extra_acked: [u16; 2],
    /// 20 bits.
    ack_epoch_acked: u32,
    /// 5 bits.
    extra_acked_win_rtts: u32,
    extra_acked_win_idx: usize,
    full_bw_now: bool,
    /// Consecutive STARTUP rounds with a high CE ratio (2 bits).
    startup_ecn_rounds: u32,
    loss_in_cycle: bool,
    ecn_in_cycle: bool,
    /// `tp.delivered` at which the current loss round ends.
    loss_round_delivered: u32,
    undo_bw_lo: u32,
    undo_inflight_lo: u32,
    undo_inflight_hi: u32,
    /// Max delivery rate and volume in the last round.
    bw_latest: u32,
    bw_lo: u32,
    /// Max delivery rate of the previous and the current PROBE_BW cycle.
    bw_hi: [u32; 2],
    inflight_latest: u32,
    inflight_lo: u32,
    inflight_hi: u32,
    /// Packets to deliver per `inflight_hi` increment in PROBE_UP.
    bw_probe_up_cnt: u32,
    bw_probe_up_acks: u32,
    /// Wall-clock wait (us) from PROBE_DOWN to the next probe.
    probe_wait_us: u32,
    ecn_eligible: bool,
    /// EWMA of the CE ratio, 0..=256 (9 bits).
    ecn_alpha: u32,
    /// Rate samples now reflect a bandwidth probe.
    bw_probe_samples: bool,
    prev_probe_too_high: bool,
    stopped_risky_probe: bool,
    /// 8 bits.
    rounds_since_probe: u32,
    loss_round_start: bool,
    loss_in_round: bool,
    ecn_in_round: bool,
    ack_phase: AckPhase,
    /// Loss events in the current STARTUP round (4 bits).
    loss_events_in_round: u32,
    initialized: bool,
    alpha_last_delivered: u32,
    alpha_last_delivered_ce: u32,
    /// Where v3 calls `get_random_u32_below`; seeded from `tp.flow_seed`.
    rng: Rng,
}

impl Bbr3 {
    pub fn new(cfg: Bbr3Config) -> Bbr3 {
        Bbr3 {
            cfg,
            min_rtt_us: UNSET,
            min_rtt_stamp: 0,
            probe_rtt_done_stamp: 0,
            probe_rtt_min_us: UNSET,
            probe_rtt_min_stamp: 0,
            next_rtt_delivered: 0,
            cycle_mstamp: 0,
            mode: Mode::Startup,
            prev_ca_state: CaState::Open,
            round_start: false,
            bw_probe_up_rounds: 0,
            try_fast_path: false,
            idle_restart: false,
            probe_rtt_round_done: false,
            init_cwnd: 0,
            pacing_gain: 0,
            cwnd_gain: 0,
            full_bw_reached: false,
            full_bw_cnt: 0,
            cycle_idx: Phase::Up,
            has_seen_rtt: false,
            prior_cwnd: 0,
            full_bw: 0,
            ack_epoch_mstamp: 0,
            extra_acked: [0; 2],
            ack_epoch_acked: 0,
            extra_acked_win_rtts: 0,
            extra_acked_win_idx: 0,
            full_bw_now: false,
            startup_ecn_rounds: 0,
            loss_in_cycle: false,
            ecn_in_cycle: false,
            loss_round_delivered: 0,
            undo_bw_lo: 0,
            undo_inflight_lo: 0,
            undo_inflight_hi: 0,
            bw_latest: 0,
            bw_lo: UNSET,
            bw_hi: [0; 2],
            inflight_latest: 0,
            inflight_lo: UNSET,
            inflight_hi: UNSET,
            bw_probe_up_cnt: UNSET,
            bw_probe_up_acks: 0,
            probe_wait_us: 0,
            ecn_eligible: false,
            ecn_alpha: ECN_ALPHA_INIT,
            bw_probe_samples: false,
            prev_probe_too_high: false,
            stopped_risky_probe: false,
            rounds_since_probe: 0,
            loss_round_start: false,
            loss_in_round: false,
            ecn_in_round: false,
            ack_phase: AckPhase::Init,
            loss_events_in_round: 0,
            initialized: false,
            alpha_last_delivered: 0,
            alpha_last_delivered_ce: 0,
            rng: Rng::stream(0, "bbr3"),
        }
    }

    // ---- read-only views (tests, traces) ----

    pub fn mode(&self) -> Mode {
        self.mode
    }
    pub fn phase(&self) -> Phase {
        self.cycle_idx
    }
    pub fn pacing_gain(&self) -> u32 {
        self.pacing_gain
    }
    pub fn cwnd_gain(&self) -> u32 {
        self.cwnd_gain
    }
    pub fn full_bw_reached(&self) -> bool {
        self.full_bw_reached
    }
    pub fn min_rtt_us(&self) -> u32 {
        self.min_rtt_us
    }
    pub fn inflight_hi(&self) -> u32 {
        self.inflight_hi
    }
    pub fn inflight_lo(&self) -> u32 {
        self.inflight_lo
    }
    pub fn bw_lo(&self) -> u32 {
        self.bw_lo
    }
    pub fn ecn_alpha(&self) -> u32 {
        self.ecn_alpha
    }
    pub fn probe_wait_us(&self) -> u32 {
        self.probe_wait_us
    }

    /// Max bandwidth of the last two cycles, packets/us << 24.
    pub fn max_bw(&self) -> u32 {
        self.bw_hi[0].max(self.bw_hi[1])
    }

    /// The bandwidth v3 paces at: the max, bounded by the short-term `bw_lo`.
    pub fn bw(&self) -> u32 {
        self.max_bw().min(self.bw_lo)
    }

    fn extra_acked(&self) -> u16 {
        self.extra_acked[0].max(self.extra_acked[1])
    }

    fn can_use_ecn(&self) -> bool {
        // ECN_OK is implicit: without negotiated ECN no ACK carries ECE.
        self.cfg.ecn_low
    }

    // ---- pacing and TSO ----

    /// v3 `bbr_rate_bytes_per_sec`: as v1, but never below 1 byte/s.
    fn rate_bytes_per_sec(mss: u32, rate: u64, gain: u32, margin: u64) -> u64 {
        let mut rate = rate.wrapping_mul(mss as u64);
        rate = rate.wrapping_mul(gain as u64);
        rate >>= BBR_SCALE;
        rate = rate.wrapping_mul(1_000_000 / 100 * (100 - margin));
        (rate >> BW_SCALE).max(1)
    }

    fn bw_to_pacing_rate(tp: &TcpSock, bw: u32, gain: u32) -> u64 {
        Self::rate_bytes_per_sec(tp.mss, bw as u64, gain, PACING_MARGIN_PERCENT).min(tp.max_pacing_rate)
    }

    fn init_pacing_rate_from_rtt(&mut self, tp: &mut TcpSock) {
        let rtt_us = if tp.srtt_us8 != 0 {
            self.has_seen_rtt = true;
            (tp.srtt_us8 >> 3).max(1)
        } else {
            1000
        };
        let bw = tp.cwnd as u64 * BW_UNIT / rtt_us as u64;
        tp.pacing_rate = Self::bw_to_pacing_rate(tp, bw as u32, STARTUP_PACING_GAIN);
    }

    fn set_pacing_rate(&mut self, tp: &mut TcpSock, bw: u32, gain: u32) {
        let rate = Self::bw_to_pacing_rate(tp, bw, gain);
        if !self.has_seen_rtt && tp.srtt_us8 != 0 {
            self.init_pacing_rate_from_rtt(tp);
        }
        if self.full_bw_reached || rate > tp.pacing_rate {
            tp.pacing_rate = rate;
        }
    }

    /// v3 `bbr_tso_segs_goal`: about 1 ms at the pacing rate plus 64 KB halved
    /// per 512 us of BBR's min RTT, within a legacy 64 KB GSO packet and at
    /// least `tcp_min_tso_segs` -- the stack's autosizing formula.
    pub fn tso_segs_goal(&self, tp: &TcpSock) -> u32 {
        debug_assert_eq!(TSO_RTT_SHIFT, tso::TSO_RTT_LOG);
        tso::tso_segs(tp.pacing_rate, self.min_rtt_us, tp.mss, tso::MIN_TSO_SEGS, tp.pacing_shift)
    }

    fn save_cwnd(&mut self, tp: &TcpSock) {
        if self.prev_ca_state < CaState::Recovery && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = tp.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(tp.cwnd);
        }
    }

    /// ceil(bw x min_rtt x gain) in packets; the initial cwnd before any RTT.
    fn bdp(&self, bw: u32, gain: u32) -> u32 {
        if self.min_rtt_us == UNSET {
            return self.init_cwnd;
        }
        let w = bw as u64 * self.min_rtt_us as u64;
        (w.wrapping_mul(gain as u64) >> BBR_SCALE).div_ceil(BW_UNIT) as u32
    }

    /// v3 `bbr_quantization_budget`: at least three full TSO skbs (one in the
    /// sender's qdisc, one in its TSO engine, one in the receiver's GRO or
    /// delayed ACK) and the 4-packet floor; 2 more in PROBE_UP.
    fn quantization_budget(&self, tp: &TcpSock, cwnd: u32) -> u32 {
        let mut cwnd = cwnd.max(3 * self.tso_segs_goal(tp)).max(CWND_MIN_TARGET);
        if self.mode == Mode::ProbeBw && self.cycle_idx == Phase::Up {
            cwnd += 2;
        }
        cwnd
    }

    fn inflight(&self, tp: &TcpSock, bw: u32, gain: u32) -> u32 {
        self.quantization_budget(tp, self.bdp(bw, gain))
    }

    /// In-flight data expected in the network when the next paced packet leaves.
    fn packets_in_net_at_edt(&self, tp: &TcpSock, inflight_now: u32) -> u32 {
        let now_ns = tp.now.0;
        let edt_ns = tp.wstamp_ns.max(now_ns);
        let interval_us = (edt_ns - now_ns) / 1000;
        let interval_delivered = ((self.bw() as u64 * interval_us) >> BW_SCALE) as u32;
        let mut inflight_at_edt = inflight_now;
        if self.pacing_gain > BBR_UNIT {
            inflight_at_edt += self.tso_segs_goal(tp);
        }
        inflight_at_edt.saturating_sub(interval_delivered)
    }

    fn ack_aggregation_cwnd(&self) -> u32 {
        if EXTRA_ACKED_GAIN == 0 {
            return 0;
        }
        let max_aggr_cwnd = (self.bw() as u64 * EXTRA_ACKED_MAX_US / BW_UNIT) as u32;
        let aggr_cwnd = (EXTRA_ACKED_GAIN * self.extra_acked() as u32) >> BBR_SCALE;
        aggr_cwnd.min(max_aggr_cwnd)
    }

    fn probe_rtt_cwnd(&self) -> u32 {
        CWND_MIN_TARGET.max(self.bdp(self.bw(), self.cfg.probe_rtt_cwnd_gain))
    }

    /// v3 `bbr_set_cwnd`: slow-start toward the target, or snap down to it once
    /// the pipe is full. No packet conservation in recovery (v1's): the
    /// loss-driven bounds do that job.
    fn set_cwnd(&mut self, tp: &mut TcpSock, acked: u32, bw: u32, gain: u32) {
        let mut cwnd = tp.cwnd;
        if acked > 0 {
            let mut target = self.bdp(bw, gain) + self.ack_aggregation_cwnd();
            target = self.quantization_budget(tp, target);
            self.try_fast_path = false;
            if self.full_bw_reached {
                cwnd += acked;
                if cwnd >= target {
                    cwnd = target;
                    self.try_fast_path = true;
                }
            } else if cwnd < target || cwnd < 2 * self.init_cwnd {
                cwnd += acked;
            } else {
                self.try_fast_path = true;
            }
            cwnd = cwnd.max(CWND_MIN_TARGET);
        }
        tp.cwnd = cwnd.min(tp.cwnd_clamp);
        if self.mode == Mode::ProbeRtt {
            tp.cwnd = tp.cwnd.min(self.probe_rtt_cwnd());
        }
    }

    // ---- rounds, samples, filters ----

    /// Starts a new packet-timed round when the sampled packet was sent after
    /// the previous round ended.
    fn update_round_start(&mut self, tp: &TcpSock, rs: &RateSample) {
        self.round_start = false;
        if rs.interval_us > 0 && !seq_before(rs.prior_delivered, self.next_rtt_delivered) {
            self.next_rtt_delivered = tp.delivered;
            self.round_start = true;
        }
    }

    /// The sample's delivery rate, rounded up so low rates can still grow.
    fn calculate_bw_sample(rs: &RateSample) -> u32 {
        if rs.interval_us > 0 && rs.delivered >= 0 {
            (rs.delivered as u64 * BW_UNIT).div_ceil(rs.interval_us as u64) as u32
        } else {
            0
        }
    }

    fn update_ack_aggregation(&mut self, tp: &TcpSock, rs: &RateSample) {
        if EXTRA_ACKED_GAIN == 0 || rs.acked_sacked == 0 || rs.delivered < 0 || rs.interval_us <= 0 {
            return;
        }
        if self.round_start {
            self.extra_acked_win_rtts = (self.extra_acked_win_rtts + 1).min(0x1f);
            // In STARTUP the filter forgets after 1-2 rounds, later 5-10.
            let thresh = if self.full_bw_reached { EXTRA_ACKED_WIN_RTTS } else { 1 };
            if self.extra_acked_win_rtts >= thresh {
                self.extra_acked_win_rtts = 0;
                self.extra_acked_win_idx ^= 1;
                self.extra_acked[self.extra_acked_win_idx] = 0;
            }
        }
        let epoch_us = (tp.delivered_mstamp as i64 - self.ack_epoch_mstamp as i64).max(0) as u32;
        let mut expected_acked = (self.bw() as u64 * epoch_us as u64 / BW_UNIT) as u32;
        if self.ack_epoch_acked <= expected_acked
            || self.ack_epoch_acked + rs.acked_sacked >= ACK_EPOCH_ACKED_RESET_THRESH
        {
            self.ack_epoch_acked = 0;
            self.ack_epoch_mstamp = tp.delivered_mstamp;
            expected_acked = 0;
        }
        self.ack_epoch_acked = (self.ack_epoch_acked + rs.acked_sacked).min(0xFFFFF);
        let extra_acked = self.ack_epoch_acked.wrapping_sub(expected_acked).min(tp.cwnd);
        if extra_acked > self.extra_acked[self.extra_acked_win_idx] as u32 {
            self.extra_acked[self.extra_acked_win_idx] = extra_acked as u16;
        }
    }

    fn check_probe_rtt_done(&mut self, tp: &mut TcpSock) {
        if !(self.probe_rtt_done_stamp != 0 && seq_after(tp.jiffies, self.probe_rtt_done_stamp)) {
            return;
        }
        // Schedule the next PROBE_RTT a full window from now.
        self.probe_rtt_min_stamp = tp.jiffies;
        tp.cwnd = tp.cwnd.max(self.prior_cwnd);
        self.exit_probe_rtt(tp);
    }

    /// The two min-RTT filters: `probe_rtt_min_us` over `probe_rtt_win_ms`
    /// (which schedules PROBE_RTT) feeds `min_rtt_us` over 10 s (the model's).
    /// PROBE_RTT holds cwnd at half the BDP for 200 ms and a round.
    fn update_min_rtt(&mut self, tp: &mut TcpSock, rs: &RateSample) {
        let win = usecs_to_jiffies(self.cfg.probe_rtt_win_ms as u64 * 1000, tp.hz) as u32;
        let probe_rtt_expired = seq_after(tp.jiffies, self.probe_rtt_min_stamp.wrapping_add(win));
        if rs.rtt_us >= 0
            && (rs.rtt_us < self.probe_rtt_min_us as i64 || (probe_rtt_expired && !rs.is_ack_delayed))
        {
            self.probe_rtt_min_us = rs.rtt_us as u32;
            self.probe_rtt_min_stamp = tp.jiffies;
        }
        let min_rtt_expired = seq_after(tp.jiffies, self.min_rtt_stamp.wrapping_add(MIN_RTT_WIN_SEC * tp.hz));
        if self.probe_rtt_min_us <= self.min_rtt_us || min_rtt_expired {
            self.min_rtt_us = self.probe_rtt_min_us;
            self.min_rtt_stamp = self.probe_rtt_min_stamp;
        }
        if self.cfg.probe_rtt_mode_ms > 0 && probe_rtt_expired && !self.idle_restart && self.mode != Mode::ProbeRtt {
            self.mode = Mode::ProbeRtt;
            self.save_cwnd(tp);
            self.probe_rtt_done_stamp = 0;
            self.ack_phase = AckPhase::ProbeStopping;
            self.next_rtt_delivered = tp.delivered;
        }
        if self.mode == Mode::ProbeRtt {
            // Samples at the PROBE_RTT cwnd say nothing about the bandwidth.
            let v = tp.delivered.wrapping_add(tp.packets_in_flight());
            tp.app_limited = if v == 0 { 1 } else { v };
            if self.probe_rtt_done_stamp == 0 && tp.packets_in_flight() <= self.probe_rtt_cwnd() {
                let dur = usecs_to_jiffies(self.cfg.probe_rtt_mode_ms as u64 * 1000, tp.hz) as u32;
                self.probe_rtt_done_stamp = tp.jiffies.wrapping_add(dur);
                self.probe_rtt_round_done = false;
                self.next_rtt_delivered = tp.delivered;
            } else if self.probe_rtt_done_stamp != 0 {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done {
                    self.check_probe_rtt_done(tp);
                }
            }
        }
        if rs.delivered > 0 {
            self.idle_restart = false;
        }
    }

    fn update_gains(&mut self) {
        let (pacing, cwnd) = match self.mode {
            Mode::Startup => (STARTUP_PACING_GAIN, STARTUP_CWND_GAIN),
            Mode::Drain => (DRAIN_GAIN, STARTUP_CWND_GAIN),
            Mode::ProbeBw => {
                let mut cwnd = CWND_GAIN;
                if BW_PROBE_CWND_GAIN > 0 && self.cycle_idx == Phase::Up {
                    cwnd += BBR_UNIT * BW_PROBE_CWND_GAIN / 4;
                }
                (PACING_GAIN[self.cycle_idx as usize], cwnd)
            }
            Mode::ProbeRtt => (BBR_UNIT, BBR_UNIT),
        };
        self.pacing_gain = pacing;
        self.cwnd_gain = cwnd;
    }

    fn take_max_bw_sample(&mut self, bw: u32) {
        self.bw_hi[1] = self.bw_hi[1].max(bw);
    }

    /// Once per cycle: the current window becomes the previous one (kept if
    /// the current one saw no sample).
    fn advance_max_bw_filter(&mut self) {
        if self.bw_hi[1] == 0 {
            return;
        }
        self.bw_hi[0] = self.bw_hi[1];
        self.bw_hi[1] = 0;
    }

    fn reset_full_bw(&mut self) {
        self.full_bw = 0;
        self.full_bw_cnt = 0;
        self.full_bw_now = false;
    }

    /// The BDP, unless congestion already cut cwnd below it.
    fn target_inflight(&self, tp: &TcpSock) -> u32 {
        self.inflight(tp, self.bw(), BBR_UNIT).min(tp.cwnd)
    }

    fn is_probing_bandwidth(&self) -> bool {
        self.mode == Mode::Startup
            || (self.mode == Mode::ProbeBw && matches!(self.cycle_idx, Phase::Refill | Phase::Up))
    }

    fn has_elapsed_in_phase(&self, tp: &TcpSock, interval_us: u32) -> bool {
        tp.mstamp_us as i64 - (self.cycle_mstamp + interval_us as u64) as i64 > 0
    }

    /// Loss or ECN ended STARTUP: the pipe is full, and at least the BDP (or
    /// what was last delivered in a round) is known to fit.
    fn handle_queue_too_high_in_startup(&mut self, tp: &TcpSock) {
        self.full_bw_reached = true;
        let bdp = self.inflight(tp, self.max_bw(), BBR_UNIT);
        self.inflight_hi = bdp.max(self.inflight_latest);
    }

    fn check_ecn_too_high_in_startup(&mut self, tp: &TcpSock, ce_ratio: u32) {
        if self.full_bw_reached || !self.ecn_eligible || self.cfg.full_ecn_cnt == 0 || self.cfg.ecn_thresh == 0 {
            return;
        }
        if ce_ratio >= self.cfg.ecn_thresh {
            self.startup_ecn_rounds = (self.startup_ecn_rounds + 1) & 3;
        } else {
            self.startup_ecn_rounds = 0;
        }
        if self.startup_ecn_rounds >= self.cfg.full_ecn_cnt {
            self.handle_queue_too_high_in_startup(tp);
        }
    }

    /// Once per round: the DCTCP-style EWMA of the share of packets delivered
    /// with CE. Returns the round's CE ratio (x/256), or None without ECN.
    fn update_ecn_alpha(&mut self, tp: &TcpSock) -> Option<u32> {
        let ecn_rtt_ok = self.cfg.ecn_max_rtt_us == 0 || self.min_rtt_us <= self.cfg.ecn_max_rtt_us;
        if !self.ecn_eligible && self.can_use_ecn() && self.cfg.ecn_factor > 0 && ecn_rtt_ok {
            self.ecn_eligible = true;
        }
        // PLB (the other user of alpha) is off by default (tcp_plb_enabled 0).
        if !self.ecn_eligible {
            return None;
        }
        let delivered = tp.delivered.wrapping_sub(self.alpha_last_delivered) as i32;
        let delivered_ce = tp.delivered_ce.wrapping_sub(self.alpha_last_delivered_ce) as i32;
        if delivered <= 0 || delivered_ce < 0 {
            return None;
        }
        let ce_ratio = ((delivered_ce as u64) << BBR_SCALE) / delivered as u64;
        let gain = self.cfg.ecn_alpha_gain as u64;
        let mut alpha = ((BBR_UNIT as u64 - gain) * self.ecn_alpha as u64) >> BBR_SCALE;
        alpha += (gain * ce_ratio) >> BBR_SCALE;
        self.ecn_alpha = alpha.min(BBR_UNIT as u64) as u32;
        self.alpha_last_delivered = tp.delivered;
        self.alpha_last_delivered_ce = tp.delivered_ce;
        self.check_ecn_too_high_in_startup(tp, ce_ratio as u32);
        Some(ce_ratio as u32)
    }

    /// Each round of PROBE_UP doubles the probe: `inflight_hi` grows by 1 per
    /// `cwnd / 2^n` packets delivered in round n.
    fn raise_inflight_hi_slope(&mut self, tp: &TcpSock) {
        let growth_this_round = 1u32 << self.bw_probe_up_rounds;
        self.bw_probe_up_rounds = (self.bw_probe_up_rounds + 1).min(30);
        self.bw_probe_up_cnt = (tp.cwnd / growth_this_round).max(1);
    }

    fn probe_inflight_hi_upward(&mut self, tp: &TcpSock, rs: &RateSample) {
        if !tp.is_cwnd_limited || tp.cwnd < self.inflight_hi {
            return; // inflight_hi does not limit us: no reason to raise it
        }
        self.bw_probe_up_acks += rs.acked_sacked;
        if self.bw_probe_up_acks >= self.bw_probe_up_cnt {
            let delta = self.bw_probe_up_acks / self.bw_probe_up_cnt;
            self.bw_probe_up_acks -= delta * self.bw_probe_up_cnt;
            self.inflight_hi = self.inflight_hi.wrapping_add(delta);
            self.try_fast_path = false;
        }
        if self.round_start {
            self.raise_inflight_hi_slope(tp);
        }
    }

    /// Loss above `loss_thresh` of what was in flight, or CE above
    /// `ecn_thresh` of what was delivered: the probe went too far.
    fn is_inflight_too_high(&self, rs: &RateSample) -> bool {
        if rs.lost > 0 && rs.tx_in_flight > 0 {
            let loss_thresh = ((rs.tx_in_flight as u64 * self.cfg.loss_thresh as u64) >> BBR_SCALE) as u32;
            if rs.lost > loss_thresh {
                return true;
            }
        }
        if rs.delivered_ce > 0 && rs.delivered > 0 && self.ecn_eligible && self.cfg.ecn_thresh > 0 {
            let ecn_thresh = ((rs.delivered as u64 * self.cfg.ecn_thresh as u64) >> BBR_SCALE) as i64;
            if rs.delivered_ce > ecn_thresh {
                return true;
            }
        }
        false
    }

    /// The in-flight level inside a lost segment's flight at which the loss
    /// rate crossed `loss_thresh`: solves (lost_prev + x) / (inflight_prev +
    /// x) = loss_thresh for x, rounded up, in fixed point.
    fn inflight_hi_from_lost_skb(&self, rs: &RateSample) -> u32 {
        let pcount = 1i64;
        let inflight_prev = rs.tx_in_flight as i64 - pcount;
        let lost_prev = rs.lost as i64 - pcount;
        if inflight_prev < 0 || lost_prev < 0 {
            return UNSET;
        }
        let loss_thresh = self.cfg.loss_thresh as u64;
        let loss_budget = (inflight_prev as u64 * loss_thresh + BBR_UNIT as u64 - 1) >> BBR_SCALE;
        let lost_prefix = if lost_prev as u64 >= loss_budget {
            0
        } else {
            ((loss_budget - lost_prev as u64) << BBR_SCALE) / (BBR_UNIT as u64 - loss_thresh)
        };
        (inflight_prev as u64 + lost_prefix) as u32
    }

    /// What in-flight level leaves `inflight_headroom` of `inflight_hi` free.
    fn inflight_with_headroom(&self) -> u32 {
        if self.inflight_hi == UNSET {
            return UNSET;
        }
        let headroom = (((self.inflight_hi as u64 * self.cfg.inflight_headroom as u64) >> BBR_SCALE) as u32).max(1);
        (self.inflight_hi.wrapping_sub(headroom) as i32).max(CWND_MIN_TARGET as i32) as u32
    }

    /// Caps cwnd by the model's bounds for this phase: `inflight_hi` while
    /// probing or draining, `inflight_hi` less the headroom while cruising or
    /// in PROBE_RTT, and `inflight_lo` always.
    fn bound_cwnd_for_inflight_model(&mut self, tp: &mut TcpSock) {
        if !self.initialized {
            return;
        }
        let mut cap = UNSET;
        if self.mode == Mode::ProbeBw && self.cycle_idx != Phase::Cruise {
            cap = self.inflight_hi;
        } else if self.mode == Mode::ProbeRtt || (self.mode == Mode::ProbeBw && self.cycle_idx == Phase::Cruise) {
            cap = self.inflight_with_headroom();
        }
        cap = cap.min(self.inflight_lo).max(CWND_MIN_TARGET);
        tp.cwnd = tp.cwnd.min(cap);
    }

    fn ecn_cut(&self) -> u32 {
        BBR_UNIT - ((self.ecn_alpha * self.cfg.ecn_factor) >> BBR_SCALE)
    }

    fn init_lower_bounds(&mut self, tp: &TcpSock, init_bw: bool) {
        if init_bw && self.bw_lo == UNSET {
            self.bw_lo = self.max_bw();
        }
        if self.inflight_lo == UNSET {
            self.inflight_lo = tp.cwnd;
        }
    }

    /// Once per round with loss or ECN outside a probe: cut the short-term
    /// bounds multiplicatively (by `beta` for loss, `ecn_factor x alpha` for
    /// ECN), but not below what the last round delivered.
    fn adapt_lower_bounds(&mut self, tp: &TcpSock) {
        if self.is_probing_bandwidth() {
            return;
        }
        let mut ecn_inflight_lo = UNSET;
        if self.ecn_in_round && self.cfg.ecn_factor > 0 {
            self.init_lower_bounds(tp, false);
            ecn_inflight_lo = ((self.inflight_lo as u64 * self.ecn_cut() as u64) >> BBR_SCALE) as u32;
        }
        if self.loss_in_round {
            self.init_lower_bounds(tp, true);
            let loss_cut = (BBR_UNIT - self.cfg.beta) as u64;
            self.bw_lo = self.bw_latest.max(((self.bw_lo as u64 * loss_cut) >> BBR_SCALE) as u32);
            self.inflight_lo = self.inflight_latest.max(((self.inflight_lo as u64 * loss_cut) >> BBR_SCALE) as u32);
        }
        self.inflight_lo = self.inflight_lo.min(ecn_inflight_lo);
        self.bw_lo = self.bw_lo.max(1);
    }

    fn reset_lower_bounds(&mut self) {
        self.bw_lo = UNSET;
        self.inflight_lo = UNSET;
    }

    fn reset_congestion_signals(&mut self) {
        self.loss_in_round = false;
        self.ecn_in_round = false;
        self.loss_in_cycle = false;
        self.ecn_in_cycle = false;
        self.bw_latest = 0;
        self.inflight_latest = 0;
    }

    fn exit_loss_recovery(&mut self, tp: &mut TcpSock) {
        tp.cwnd = tp.cwnd.max(self.prior_cwnd);
        self.try_fast_path = false;
    }

    /// The latest round's max delivery rate and volume, and loss-round timing.
    fn update_latest_delivery_signals(&mut self, tp: &TcpSock, rs: &RateSample, sample_bw: u32) {
        self.loss_round_start = false;
        if rs.interval_us <= 0 || rs.acked_sacked == 0 {
            return;
        }
        self.bw_latest = self.bw_latest.max(sample_bw);
        self.inflight_latest = self.inflight_latest.max(rs.delivered as u32);
        if !seq_before(rs.prior_delivered, self.loss_round_delivered) {
            self.loss_round_delivered = tp.delivered;
            self.loss_round_start = true;
        }
    }

    /// At a loss-round boundary the latest-round filters restart with this
    /// sample (v3 keeps them on an ACK of a TLP retransmission, which the
    /// stack does not flag here).
    fn advance_latest_delivery_signals(&mut self, rs: &RateSample, sample_bw: u32) {
        if self.loss_round_start {
            self.bw_latest = sample_bw;
            self.inflight_latest = rs.delivered as u32;
        }
    }

    fn update_congestion_signals(&mut self, tp: &TcpSock, rs: &RateSample, sample_bw: u32) {
        if rs.interval_us <= 0 || rs.acked_sacked == 0 {
            return;
        }
        if !rs.is_app_limited || sample_bw >= self.max_bw() {
            self.take_max_bw_sample(sample_bw);
        }
        self.loss_in_round |= rs.losses > 0;
        if !self.loss_round_start {
            return;
        }
        self.adapt_lower_bounds(tp);
        self.loss_in_round = false;
        self.ecn_in_round = false;
    }

    /// Reno coexistence: probe after as many rounds as a Reno flow with our
    /// BDP would take between losses (at most `bw_probe_max_rounds`).
    fn is_reno_coexistence_probe_time(&self, tp: &TcpSock) -> bool {
        let rounds = self.cfg.bw_probe_max_rounds.min(self.target_inflight(tp));
        self.rounds_since_probe >= rounds
    }

    fn random_below(&mut self, n: u32) -> u32 {
        if n == 0 {
            0
        } else {
            self.rng.below(n as u64) as u32
        }
    }

    /// Randomised wait until the next probe: a head start of 0..rand_rounds
    /// rounds and a wall-clock wait of base + 0..rand_us.
    fn pick_probe_wait(&mut self) {
        self.rounds_since_probe = self.random_below(self.cfg.bw_probe_rand_rounds);
        self.probe_wait_us = self.cfg.bw_probe_base_us.wrapping_add(self.random_below(self.cfg.bw_probe_rand_us));
    }

    fn set_cycle_idx(&mut self, phase: Phase) {
        self.cycle_idx = phase;
        self.try_fast_path = false;
    }

    /// REFILL: send at the estimate for a round to fill the pipe before
    /// probing above it, forgetting the short-term bounds.
    fn start_bw_probe_refill(&mut self, tp: &TcpSock, bw_probe_up_rounds: u32) {
        self.reset_lower_bounds();
        self.bw_probe_up_rounds = bw_probe_up_rounds & 0x1f;
        self.bw_probe_up_acks = 0;
        self.stopped_risky_probe = false;
        self.ack_phase = AckPhase::Refilling;
        self.next_rtt_delivered = tp.delivered;
        self.set_cycle_idx(Phase::Refill);
    }

    fn start_bw_probe_up(&mut self, tp: &TcpSock, sample_bw: u32) {
        self.ack_phase = AckPhase::ProbeStarting;
        self.next_rtt_delivered = tp.delivered;
        self.cycle_mstamp = tp.mstamp_us;
        self.reset_full_bw();
        self.full_bw = sample_bw;
        self.set_cycle_idx(Phase::Up);
        self.raise_inflight_hi_slope(tp);
    }

    /// DOWN starts a cycle: the wall clock and the round count toward the
    /// next probe start now.
    fn start_bw_probe_down(&mut self, tp: &TcpSock) {
        self.reset_congestion_signals();
        self.bw_probe_up_cnt = UNSET;
        self.pick_probe_wait();
        self.cycle_mstamp = tp.mstamp_us;
        self.ack_phase = AckPhase::ProbeStopping;
        self.next_rtt_delivered = tp.delivered;
        self.set_cycle_idx(Phase::Down);
    }

    fn start_bw_probe_cruise(&mut self) {
        if self.inflight_lo != UNSET {
            self.inflight_lo = self.inflight_lo.min(self.inflight_hi);
        }
        self.set_cycle_idx(Phase::Cruise);
    }

    /// A probe saw too much loss or CE: cap `inflight_hi` at the in-flight
    /// level where that happened (or 70 % of the target), once per probe,
    /// and stop probing.
    fn handle_inflight_too_high(&mut self, tp: &TcpSock, rs: &RateSample) {
        self.prev_probe_too_high = true;
        self.bw_probe_samples = false;
        if !rs.is_app_limited {
            let cut = (self.target_inflight(tp) as u64 * (BBR_UNIT - self.cfg.beta) as u64) >> BBR_SCALE;
            self.inflight_hi = rs.tx_in_flight.max(cut as u32);
        }
        if self.mode == Mode::ProbeBw && self.cycle_idx == Phase::Up {
            self.start_bw_probe_down(tp);
        }
    }

    /// Adapts the upper bounds to what probing showed. Returns true if it
    /// decided a state transition.
    fn adapt_upper_bounds(&mut self, tp: &TcpSock, rs: &RateSample) -> bool {
        if self.ack_phase == AckPhase::ProbeStarting && self.round_start {
            self.ack_phase = AckPhase::ProbeFeedback;
        }
        if self.ack_phase == AckPhase::ProbeStopping && self.round_start {
            // The probe's samples are over: a good time to forget the
            // previous cycle's bandwidth.
            self.bw_probe_samples = false;
            self.ack_phase = AckPhase::Init;
            if self.mode == Mode::ProbeBw && !rs.is_app_limited {
                self.advance_max_bw_filter();
            }
            // The last probe reached inflight_hi without harm: probe again,
            // holding inflight_hi for a round before going beyond.
            if self.mode == Mode::ProbeBw && self.stopped_risky_probe && !self.prev_probe_too_high {
                self.start_bw_probe_refill(tp, 0);
                return true;
            }
        }
        if self.is_inflight_too_high(rs) {
            if self.bw_probe_samples {
                self.handle_inflight_too_high(tp, rs);
            }
        } else {
            if self.inflight_hi == UNSET {
                return false;
            }
            // A higher level turned out safe: raise the bound (random loss
            // must not ratchet it down for good).
            if rs.tx_in_flight > self.inflight_hi {
                self.inflight_hi = rs.tx_in_flight;
            }
            if self.mode == Mode::ProbeBw && self.cycle_idx == Phase::Up {
                self.probe_inflight_hi_upward(tp, rs);
            }
        }
        false
    }

    fn check_time_to_probe_bw(&mut self, tp: &TcpSock) -> bool {
        // ECN marks without loss that have now stopped: cross traffic may
        // have left, so re-probe at once with half of inflight_hi.
        if self.cfg.ecn_reprobe_gain > 0
            && self.ecn_eligible
            && self.ecn_in_cycle
            && !self.loss_in_cycle
            && tp.ca_state == CaState::Open
        {
            let v = (self.inflight_hi as u64 * self.cfg.ecn_reprobe_gain as u64) >> BBR_SCALE;
            let n = if v == 0 { 0 } else { 63 - v.leading_zeros() };
            self.start_bw_probe_refill(tp, n);
            return true;
        }
        if self.has_elapsed_in_phase(tp, self.probe_wait_us) || self.is_reno_coexistence_probe_time(tp) {
            self.start_bw_probe_refill(tp, 0);
            return true;
        }
        false
    }

    fn check_time_to_cruise(&self, tp: &TcpSock, inflight: u32, bw: u32) -> bool {
        if inflight > self.inflight_with_headroom() {
            return false;
        }
        inflight <= self.inflight(tp, bw, BBR_UNIT)
    }

    /// The PROBE_BW state machine: CRUISE until it is time to probe, REFILL
    /// for a round, UP until the probe reaches inflight_hi (after a probe
    /// that went too high), the bandwidth plateaus, or loss/CE is too high,
    /// then DOWN until the queue is drained.
    fn update_cycle_phase(&mut self, tp: &TcpSock, rs: &RateSample, sample_bw: u32) {
        if !self.full_bw_reached {
            return;
        }
        if self.adapt_upper_bounds(tp, rs) {
            return;
        }
        if self.mode != Mode::ProbeBw {
            return;
        }
        let inflight = self.packets_in_net_at_edt(tp, rs.prior_in_flight);
        let bw = self.max_bw();
        match self.cycle_idx {
            Phase::Cruise => {
                self.check_time_to_probe_bw(tp);
            }
            Phase::Refill => {
                if self.round_start {
                    // The samples now reflect the refill.
                    self.bw_probe_samples = true;
                    self.start_bw_probe_up(tp, sample_bw);
                }
            }
            Phase::Up => {
                let mut is_bw_probe_done = false;
                if self.prev_probe_too_high && inflight >= self.inflight_hi {
                    self.stopped_risky_probe = true;
                    is_bw_probe_done = true;
                } else if tp.is_cwnd_limited && tp.cwnd >= self.inflight_hi {
                    // inflight_hi, not the path, limits growth.
                    self.reset_full_bw();
                    self.full_bw = sample_bw;
                } else if self.full_bw_now {
                    is_bw_probe_done = true;
                }
                if is_bw_probe_done {
                    self.prev_probe_too_high = false;
                    self.start_bw_probe_down(tp);
                }
            }
            Phase::Down => {
                if self.check_time_to_probe_bw(tp) {
                    return;
                }
                if self.check_time_to_cruise(tp, inflight, bw) {
                    self.start_bw_probe_cruise();
                }
            }
        }
    }

    fn exit_probe_rtt(&mut self, tp: &TcpSock) {
        self.reset_lower_bounds();
        if self.full_bw_reached {
            self.mode = Mode::ProbeBw;
            // Schedule the next probe a randomised wait away; in-flight is below the
            // BDP now, so cruise.
            self.start_bw_probe_down(tp);
            self.start_bw_probe_cruise();
        } else {
            self.mode = Mode::Startup;
        }
    }

    /// STARTUP ends when a recovery round saw `full_loss_cnt` loss events
    /// and more than `loss_thresh` loss, checked at the round's end.
    fn check_loss_too_high_in_startup(&mut self, tp: &TcpSock, rs: &RateSample) {
        if self.full_bw_reached {
            return;
        }
        if rs.losses > 0 && self.loss_events_in_round < 0xf {
            self.loss_events_in_round += 1;
        }
        if self.cfg.full_loss_cnt > 0
            && self.loss_round_start
            && tp.ca_state == CaState::Recovery
            && self.loss_events_in_round >= self.cfg.full_loss_cnt
            && self.is_inflight_too_high(rs)
        {
            self.handle_queue_too_high_in_startup(tp);
            return;
        }
        if self.loss_round_start {
            self.loss_events_in_round = 0;
        }
    }

    /// Full pipe: three non-app-limited rounds in which no sample grew 25 %
    /// over the reference (v3 compares each sample, v1 the max filter).
    fn check_full_bw_reached(&mut self, rs: &RateSample, sample_bw: u32) {
        if self.full_bw_now || rs.is_app_limited {
            return;
        }
        let bw_thresh = ((self.full_bw as u64 * FULL_BW_THRESH as u64) >> BBR_SCALE) as u32;
        if sample_bw >= bw_thresh {
            self.reset_full_bw();
            self.full_bw = sample_bw;
            return;
        }
        if !self.round_start {
            return;
        }
        self.full_bw_cnt = (self.full_bw_cnt + 1) & 3;
        self.full_bw_now = self.full_bw_cnt >= FULL_BW_CNT;
        self.full_bw_reached |= self.full_bw_now;
    }

    fn check_drain(&mut self, tp: &mut TcpSock) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
            // Only for monitoring: BBR does not use ssthresh.
            tp.ssthresh = self.inflight(tp, self.max_bw(), BBR_UNIT);
            self.reset_congestion_signals();
        }
        if self.mode == Mode::Drain
            && self.packets_in_net_at_edt(tp, tp.packets_in_flight()) <= self.inflight(tp, self.max_bw(), BBR_UNIT)
        {
            self.mode = Mode::ProbeBw;
            self.start_bw_probe_down(tp);
        }
    }

    fn update_model(&mut self, tp: &mut TcpSock, rs: &RateSample, sample_bw: u32) {
        self.update_congestion_signals(tp, rs, sample_bw);
        self.update_ack_aggregation(tp, rs);
        self.check_loss_too_high_in_startup(tp, rs);
        self.check_full_bw_reached(rs, sample_bw);
        self.check_drain(tp);
        self.update_cycle_phase(tp, rs, sample_bw);
        self.update_min_rtt(tp, rs);
    }

    /// v3 `bbr_run_fast_path`: an app-limited ACK below the estimate, without
    /// loss or CE, only advances the state machine; if nothing changed, not
    /// even cwnd and pacing are recomputed. Returns (done, update_model).
    fn run_fast_path(&mut self, tp: &mut TcpSock, rs: &RateSample, sample_bw: u32) -> (bool, bool) {
        if FAST_PATH
            && self.try_fast_path
            && rs.is_app_limited
            && sample_bw < self.max_bw()
            && !self.loss_in_round
            && !self.ecn_in_round
        {
            let prev_mode = self.mode;
            let prev_min_rtt_us = self.min_rtt_us;
            self.check_drain(tp);
            self.update_cycle_phase(tp, rs, sample_bw);
            self.update_min_rtt(tp, rs);
            if self.mode == prev_mode && self.min_rtt_us == prev_min_rtt_us && self.try_fast_path {
                return (true, false);
            }
            return (false, false);
        }
        (false, true)
    }

    /// v3 `bbr_note_loss`: this round, and this cycle, saw loss.
    fn note_loss(&mut self, tp: &TcpSock) {
        if !self.loss_in_round {
            // The loss round runs a full round from the first loss.
            self.loss_round_delivered = tp.delivered;
        }
        self.loss_in_round = true;
        self.loss_in_cycle = true;
    }
}

impl CongestionControl for Bbr3 {
    fn name(&self) -> &str {
        "bbr3"
    }

    /// Linux `bbr_get_info`.
    fn get_info(&self, tp: &TcpSock) -> Option<CcInfo> {
        Some(CcInfo::bbr(self.bw(), tp.mss, self.min_rtt_us, self.pacing_gain, self.cwnd_gain))
    }

    fn init(&mut self, tp: &mut TcpSock) {
        self.rng = Rng::stream(tp.flow_seed, "bbr3");
        self.initialized = true;
        self.init_cwnd = tp.cwnd.min(INIT_CWND_MAX);
        self.prior_cwnd = tp.prior_cwnd;
        tp.ssthresh = INFINITE_SSTHRESH;
        self.next_rtt_delivered = tp.delivered;
        self.prev_ca_state = CaState::Open;
        self.probe_rtt_done_stamp = 0;
        self.probe_rtt_round_done = false;
        self.probe_rtt_min_us = tp.min_rtt_us();
        self.probe_rtt_min_stamp = tp.jiffies;
        self.min_rtt_us = tp.min_rtt_us();
        self.min_rtt_stamp = tp.jiffies;
        self.has_seen_rtt = false;
        self.init_pacing_rate_from_rtt(tp);
        self.round_start = false;
        self.idle_restart = false;
        self.full_bw_reached = false;
        self.full_bw = 0;
        self.full_bw_cnt = 0;
        self.cycle_mstamp = 0;
        self.cycle_idx = Phase::Up;
        self.mode = Mode::Startup;
        self.ack_epoch_mstamp = tp.mstamp_us;
        self.ack_epoch_acked = 0;
        self.extra_acked_win_rtts = 0;
        self.extra_acked_win_idx = 0;
        self.extra_acked = [0; 2];
        self.try_fast_path = false;
        tp.pacing_status = PacingStatus::Needed;
        // Sample the CE ratio from the end of the first flight on.
        self.loss_round_delivered = tp.delivered.wrapping_add(1);
        self.loss_round_start = false;
        self.undo_bw_lo = 0;
        self.undo_inflight_lo = 0;
        self.undo_inflight_hi = 0;
        self.loss_events_in_round = 0;
        self.startup_ecn_rounds = 0;
        self.reset_congestion_signals();
        self.bw_lo = UNSET;
        self.bw_hi = [0; 2];
        self.inflight_lo = UNSET;
        self.inflight_hi = UNSET;
        self.reset_full_bw();
        self.bw_probe_up_cnt = UNSET;
        self.bw_probe_up_acks = 0;
        self.bw_probe_up_rounds = 0;
        self.probe_wait_us = 0;
        self.stopped_risky_probe = false;
        self.ack_phase = AckPhase::Init;
        self.rounds_since_probe = 0;
        self.bw_probe_samples = false;
        self.prev_probe_too_high = false;
        self.ecn_eligible = false;
        self.ecn_alpha = ECN_ALPHA_INIT;
        self.alpha_last_delivered = 0;
        self.alpha_last_delivered_ce = 0;
    }

    /// Notes the cwnd and the loss-adapted bounds to restore on undo;
    /// ssthresh is unchanged.
    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        self.save_cwnd(tp);
        self.undo_bw_lo = self.bw_lo;
        self.undo_inflight_lo = self.inflight_lo;
        self.undo_inflight_hi = self.inflight_hi;
        tp.ssthresh
    }

    fn has_cong_control(&self) -> bool {
        true
    }

    /// v3 `bbr_main`.
    fn cong_control(&mut self, tp: &mut TcpSock, rs: &RateSample) {
        self.update_round_start(tp, rs);
        if self.round_start {
            self.rounds_since_probe = (self.rounds_since_probe + 1).min(0xff);
            self.update_ecn_alpha(tp);
        }
        self.ecn_in_round |= self.ecn_eligible && rs.is_ece;
        let sample_bw = Self::calculate_bw_sample(rs);
        self.update_latest_delivery_signals(tp, rs, sample_bw);

        let (done, update_model) = self.run_fast_path(tp, rs, sample_bw);
        if !done {
            if update_model {
                self.update_model(tp, rs, sample_bw);
            }
            self.update_gains();
            let bw = self.bw();
            self.set_pacing_rate(tp, bw, self.pacing_gain);
            self.set_cwnd(tp, rs.acked_sacked, bw, self.cwnd_gain);
            self.bound_cwnd_for_inflight_model(tp);
        }
        self.advance_latest_delivery_signals(rs, sample_bw);
        self.prev_ca_state = tp.ca_state;
        self.loss_in_cycle |= rs.lost > 0;
        self.ecn_in_cycle |= rs.delivered_ce > 0;
    }

    /// A spurious loss episode: restore the bounds it cut and the cwnd.
    fn undo_cwnd(&mut self, _tp: &mut TcpSock) -> u32 {
        self.reset_full_bw();
        self.loss_in_round = false;
        self.bw_lo = self.bw_lo.max(self.undo_bw_lo);
        self.inflight_lo = self.inflight_lo.max(self.undo_inflight_lo);
        self.inflight_hi = self.inflight_hi.max(self.undo_inflight_hi);
        self.try_fast_path = false;
        self.prior_cwnd
    }

    /// An RTO: relearn the full bandwidth, and give `inflight_lo` the cwnd from
    /// before the timeout so the loss response has something to cut. Leaving
    /// Loss restores the cwnd.
    fn set_state(&mut self, tp: &mut TcpSock, new_state: CaState) {
        if new_state == CaState::Loss {
            self.prev_ca_state = CaState::Loss;
            self.reset_full_bw();
            if !self.is_probing_bandwidth() && self.inflight_lo == UNSET {
                self.inflight_lo = tp.cwnd.max(self.prior_cwnd);
            }
        } else if self.prev_ca_state == CaState::Loss {
            self.exit_loss_recovery(tp);
        }
    }

    fn cwnd_event(&mut self, tp: &mut TcpSock, ev: CaEvent) {
        // The ECN events drive v3's receiver-side CE-state ACKs (DCTCP's),
        // which the receiver model owns; only the idle restart is ours.
        if ev == CaEvent::TxStart && tp.app_limited != 0 {
            self.idle_restart = true;
            self.ack_epoch_mstamp = tp.mstamp_us;
            self.ack_epoch_acked = 0;
            match self.mode {
                Mode::ProbeBw => self.set_pacing_rate(tp, self.bw(), BBR_UNIT),
                Mode::ProbeRtt => self.check_probe_rtt_done(tp),
                _ => {}
            }
        }
    }

    fn wants_skb_marked_lost(&self) -> bool {
        true
    }

    /// v3 `bbr_skb_marked_lost`: a loss marks the round; while probing, the
    /// lost segment's own flight tells whether (and where) the loss rate went
    /// above `loss_thresh`, so the probe stops at once.
    fn skb_marked_lost(&mut self, tp: &mut TcpSock, skb: &LostSkb) {
        self.note_loss(tp);
        if !self.bw_probe_samples || !skb.has_tx_state {
            return;
        }
        let mut rs = RateSample {
            tx_in_flight: skb.tx_in_flight,
            lost: skb.lost,
            is_app_limited: skb.tx_app_limited,
            delivered: 0,
            delivered_ce: 0,
            ..RateSample::default()
        };
        if self.is_inflight_too_high(&rs) {
            rs.tx_in_flight = self.inflight_hi_from_lost_skb(&rs);
            self.handle_inflight_too_high(tp, &rs);
        }
    }

    fn wants_pacing(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests;
