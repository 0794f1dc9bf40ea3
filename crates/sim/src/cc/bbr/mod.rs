//! BBR v1 as Linux runs it (`net/ipv4/tcp_bbr.c`; Cardwell et al., ACM Queue
//! 2016): a model-based algorithm that paces at its estimate of the bottleneck
//! bandwidth (a windowed max of delivery-rate samples over 10 packet-timed
//! rounds) and caps in-flight data at a multiple of the bandwidth-delay product
//! (with the windowed min RTT over 10 s). It moves through STARTUP (gain
//! 2/ln 2 until the bandwidth stops growing 25 % per round for 3 rounds), DRAIN
//! (the inverse gain until in-flight falls to one BDP), PROBE_BW (the 8-phase
//! gain cycle 1.25, 0.75, 1 x 6, entered at a random phase) and PROBE_RTT
//! (4 packets for 200 ms and a round when the min RTT is 10 s old). Losses only
//! matter through packet conservation in the first round of recovery, the
//! long-term ("policer") bandwidth estimate and the gain-cycle exit rules. The
//! integer arithmetic (BBR_SCALE 8, BW_SCALE 24), the bit-field widths and the
//! order of the per-ACK steps are the kernel's, so rounding matches.

use super::params::{CcaInfo, Params};
use super::{CaEvent, CaState, CcInfo, CongestionControl, PacingStatus, RateSample, TcpSock, INFINITE_SSTHRESH};
use crate::minmax::MinMax;
use crate::packet::{seq_after, seq_before};
use crate::rng::Rng;
use crate::units::usecs_to_jiffies;

// All constants below are Linux tcp_bbr.c's unless noted otherwise.

/// Bandwidth is kept in packets per microsecond << BW_SCALE.
const BW_SCALE: u32 = 24;
const BW_UNIT: u64 = 1 << BW_SCALE;
/// Gains are fractions << BBR_SCALE.
const BBR_SCALE: u32 = 8;
pub const BBR_UNIT: u32 = 1 << BBR_SCALE;

/// Phases of the PROBE_BW gain cycle.
const CYCLE_LEN: u32 = 8;
/// Window of the max-bandwidth filter, in packet-timed rounds (`bbr_bw_rtts`).
pub const BW_RTTS: u32 = CYCLE_LEN + 2;
/// Window of the min-RTT filter, seconds.
const MIN_RTT_WIN_SEC: u32 = 10;
/// Minimum time at 4 packets in PROBE_RTT, ms.
const PROBE_RTT_MODE_MS: u64 = 200;
/// Below this pacing rate (bit/s) the TSO goal is one segment.
const MIN_TSO_RATE_BPS: u64 = 1_200_000;
/// Pace 1 % below the estimated bandwidth, to drain queues it did not see.
const PACING_MARGIN_PERCENT: u64 = 1;

/// STARTUP gain 2/ln(2) = 2.885: doubles the rate every round (739/256).
pub const HIGH_GAIN: u32 = BBR_UNIT * 2885 / 1000 + 1;
/// DRAIN gain 1/2.885 (88/256), to empty the STARTUP queue in about one round.
pub const DRAIN_GAIN: u32 = BBR_UNIT * 1000 / 2885;
/// Steady-state cwnd gain: 2 BDP tolerates delayed and stretched ACKs.
pub const CWND_GAIN: u32 = BBR_UNIT * 2;
/// PROBE_BW pacing gains: probe, drain, then cruise for six phases.
pub const PACING_GAIN: [u32; CYCLE_LEN as usize] = [
    BBR_UNIT * 5 / 4,
    BBR_UNIT * 3 / 4,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
];
/// The first PROBE_BW phase is drawn from the last `CYCLE_RAND` phases, then
/// advanced once: never the 0.75 phase.
const CYCLE_RAND: u64 = 7;
/// The smallest cwnd BBR aims for (two 2-packet delayed-ACK pairs).
pub const CWND_MIN_TARGET: u32 = 4;
/// The pipe is full when bandwidth grows less than 25 % ...
const FULL_BW_THRESH: u32 = BBR_UNIT * 5 / 4;
/// ... for three rounds in a row.
const FULL_BW_CNT: u32 = 3;

/// Long-term (policer) estimator: minimum rounds of a sampling interval.
const LT_INTVL_MIN_RTTS: u32 = 4;
/// An interval is lossy when lost/delivered >= 50/256 (about 20 %).
const LT_LOSS_THRESH: u32 = 50;
/// Two intervals agree when their bandwidths differ by at most 1/8 ...
const LT_BW_RATIO: u32 = BBR_UNIT / 8;
/// ... or by at most 4 kbit/s (in bytes per second).
const LT_BW_DIFF: u64 = 4000 / 8;
/// Rounds to keep using the policed rate before probing again.
const LT_BW_MAX_RTTS: u32 = 48;

/// Gain on the ACK-aggregation allowance added to the cwnd target.
const EXTRA_ACKED_GAIN: u32 = BBR_UNIT;
/// Rounds per bucket of the two-bucket extra-acked max filter.
const EXTRA_ACKED_WIN_RTTS: u32 = 5;
/// An aggregation epoch is restarted after this many packets.
const ACK_EPOCH_ACKED_RESET_THRESH: u32 = 1 << 20;
/// The aggregation allowance is at most 100 ms at the estimated bandwidth.
const EXTRA_ACKED_MAX_US: u64 = 100_000;

/// Linux TCP_INIT_CWND (`include/net/tcp.h`).
const TCP_INIT_CWND: u32 = 10;
/// `GSO_LEGACY_MAX_SIZE - 1 - MAX_TCP_HEADER`: the largest skb BBR budgets for.
/// MAX_TCP_HEADER = L1_CACHE_ALIGN(128 + MAX_HEADER) = 320 bytes on an x86-64
/// build with tunnels (MAX_HEADER = LL_MAX_HEADER 128 + 48), `include/net/tcp.h`.
const TSO_MAX_BYTES: u64 = 65536 - 1 - 320;
/// Largest TSO goal in segments (`0x7F` in `bbr_tso_segs_goal`).
const TSO_MAX_SEGS: u32 = 0x7f;

/// `enum bbr_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Startup = 0,
    Drain = 1,
    ProbeBw = 2,
    ProbeRtt = 3,
}

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "bbr",
        description: "BBR v1: pace at the windowed-max delivery rate, cwnd 2 BDP; STARTUP, DRAIN, PROBE_BW gain cycle, PROBE_RTT every 10 s; policer and ACK-aggregation estimators",
        source: "Linux net/ipv4/tcp_bbr.c; Cardwell et al., ACM Queue 14(5), 2016",
        params: vec![],
    }
}

pub fn build(_p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Bbr::new())
}

/// Linux `struct bbr`. Bit-field members keep their kernel widths where the
/// width bounds the value (`cycle_idx`, `ack_epoch_acked`, `extra_acked`, ...).
pub struct Bbr {
    /// Min RTT (us) in the 10 s window; u32::MAX before any sample.
    min_rtt_us: u32,
    /// Jiffies at which `min_rtt_us` was taken.
    min_rtt_stamp: u32,
    /// Jiffies at which PROBE_RTT may end (0: not yet at 4 packets).
    probe_rtt_done_stamp: u32,
    /// Max delivery rate over the last `BW_RTTS` rounds, packets/us << 24.
    bw: MinMax,
    /// Packet-timed rounds so far.
    rtt_cnt: u32,
    /// `tp.delivered` at which the current round ends.
    next_rtt_delivered: u32,
    /// Time (us) the current gain-cycle phase started.
    cycle_mstamp: u64,
    mode: Mode,
    /// CA state seen on the previous ACK.
    prev_ca_state: CaState,
    packet_conservation: bool,
    round_start: bool,
    idle_restart: bool,
    probe_rtt_round_done: bool,
    lt_is_sampling: bool,
    /// Rounds in the current long-term interval (7 bits in Linux).
    lt_rtt_cnt: u32,
    lt_use_bw: bool,
    /// Long-term (policed) bandwidth, packets/us << 24.
    lt_bw: u32,
    lt_last_delivered: u32,
    /// Start of the long-term interval, ms.
    lt_last_stamp: u32,
    lt_last_lost: u32,
    pacing_gain: u32,
    cwnd_gain: u32,
    full_bw_reached: bool,
    full_bw_cnt: u32,
    /// Phase of the gain cycle (3 bits).
    cycle_idx: u32,
    has_seen_rtt: bool,
    /// cwnd saved on entering recovery or PROBE_RTT.
    prior_cwnd: u32,
    /// Bandwidth at the last 25 % growth, for full-pipe detection.
    full_bw: u32,
    ack_epoch_mstamp: u64,
    extra_acked: [u16; 2],
    /// Packets (S)ACKed in the aggregation epoch (20 bits).
    ack_epoch_acked: u32,
    extra_acked_win_rtts: u32,
    extra_acked_win_idx: usize,
    /// Where Linux calls `get_random_u32_below`; seeded from `tp.flow_seed`.
    rng: Rng,
}

impl Default for Bbr {
    fn default() -> Self {
        Self::new()
    }
}

impl Bbr {
    pub fn new() -> Bbr {
        Bbr {
            min_rtt_us: u32::MAX,
            min_rtt_stamp: 0,
            probe_rtt_done_stamp: 0,
            bw: MinMax::new_max(0, 0),
            rtt_cnt: 0,
            next_rtt_delivered: 0,
            cycle_mstamp: 0,
            mode: Mode::Startup,
            prev_ca_state: CaState::Open,
            packet_conservation: false,
            round_start: false,
            idle_restart: false,
            probe_rtt_round_done: false,
            lt_is_sampling: false,
            lt_rtt_cnt: 0,
            lt_use_bw: false,
            lt_bw: 0,
            lt_last_delivered: 0,
            lt_last_stamp: 0,
            lt_last_lost: 0,
            pacing_gain: 0,
            cwnd_gain: 0,
            full_bw_reached: false,
            full_bw_cnt: 0,
            cycle_idx: 0,
            has_seen_rtt: false,
            prior_cwnd: 0,
            full_bw: 0,
            ack_epoch_mstamp: 0,
            extra_acked: [0; 2],
            ack_epoch_acked: 0,
            extra_acked_win_rtts: 0,
            extra_acked_win_idx: 0,
            rng: Rng::stream(0, "bbr"),
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }
    pub fn cycle_idx(&self) -> u32 {
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

    /// Windowed max bandwidth, packets/us << 24.
    pub fn max_bw(&self) -> u32 {
        self.bw.get()
    }

    /// The bandwidth BBR paces at: the policed rate if one was detected.
    pub fn bw(&self) -> u32 {
        if self.lt_use_bw {
            self.lt_bw
        } else {
            self.max_bw()
        }
    }

    fn extra_acked(&self) -> u16 {
        self.extra_acked[0].max(self.extra_acked[1])
    }

    /// Linux `bbr_rate_bytes_per_sec`; the operation order avoids u64 overflow
    /// up to about 2.9 Tbit/s.
    fn rate_bytes_per_sec(mss: u32, rate: u64, gain: u32) -> u64 {
        let mut rate = rate.wrapping_mul(mss as u64);
        rate = rate.wrapping_mul(gain as u64);
        rate >>= BBR_SCALE;
        rate = rate.wrapping_mul(1_000_000 / 100 * (100 - PACING_MARGIN_PERCENT));
        rate >> BW_SCALE
    }

    fn bw_to_pacing_rate(tp: &TcpSock, bw: u32, gain: u32) -> u64 {
        Self::rate_bytes_per_sec(tp.mss, bw as u64, gain).min(tp.max_pacing_rate)
    }

    /// high_gain x initial cwnd / (srtt, or 1 ms without a sample).
    fn init_pacing_rate_from_rtt(&mut self, tp: &mut TcpSock) {
        let rtt_us = if tp.srtt_us8 != 0 {
            self.has_seen_rtt = true;
            (tp.srtt_us8 >> 3).max(1)
        } else {
            1000
        };
        let bw = tp.cwnd as u64 * BW_UNIT / rtt_us as u64;
        tp.pacing_rate = Self::bw_to_pacing_rate(tp, bw as u32, HIGH_GAIN);
    }

    /// Until the pipe is full the pacing rate only grows, so that a low sample
    /// in STARTUP cannot slow the ramp.
    fn set_pacing_rate(&mut self, tp: &mut TcpSock, bw: u32, gain: u32) {
        let rate = Self::bw_to_pacing_rate(tp, bw, gain);
        if !self.has_seen_rtt && tp.srtt_us8 != 0 {
            self.init_pacing_rate_from_rtt(tp);
        }
        if self.full_bw_reached || rate > tp.pacing_rate {
            tp.pacing_rate = rate;
        }
    }

    /// Linux `bbr_min_tso_segs`.
    fn bbr_min_tso_segs(tp: &TcpSock) -> u32 {
        if tp.pacing_rate < MIN_TSO_RATE_BPS >> 3 {
            1
        } else {
            2
        }
    }

    /// Linux `bbr_tso_segs_goal`: about 1 ms of data at the pacing rate
    /// (`pacing_shift` 10), ignoring the device's GSO limit.
    pub fn tso_segs_goal(tp: &TcpSock) -> u32 {
        let bytes = (tp.pacing_rate >> tp.pacing_shift).min(TSO_MAX_BYTES) as u32;
        (bytes / tp.mss).max(Self::bbr_min_tso_segs(tp)).min(TSO_MAX_SEGS)
    }

    /// Remembers the last good cwnd before recovery or PROBE_RTT cut it.
    fn save_cwnd(&mut self, tp: &TcpSock) {
        if self.prev_ca_state < CaState::Recovery && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = tp.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(tp.cwnd);
        }
    }

    /// ceil(bw x min_rtt x gain) in packets; the initial window before any RTT.
    fn bdp(&self, bw: u32, gain: u32) -> u32 {
        if self.min_rtt_us == u32::MAX {
            return TCP_INIT_CWND;
        }
        let w = bw as u64 * self.min_rtt_us as u64;
        (w.wrapping_mul(gain as u64) >> BBR_SCALE).div_ceil(BW_UNIT) as u32
    }

    /// Room for three TSO skbs in the end hosts, rounded up to even for delayed
    /// ACKs, and 2 more in the probing phase so small BDPs still probe.
    fn quantization_budget(&self, tp: &TcpSock, cwnd: u32) -> u32 {
        let mut cwnd = cwnd + 3 * Self::tso_segs_goal(tp);
        cwnd = (cwnd + 1) & !1;
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            cwnd += 2;
        }
        cwnd
    }

    /// Linux `bbr_inflight`: the in-flight target for `bw` and `gain`.
    fn inflight(&self, tp: &TcpSock, bw: u32, gain: u32) -> u32 {
        self.quantization_budget(tp, self.bdp(bw, gain))
    }

    /// In-flight data expected in the network when the next paced packet
    /// leaves (its earliest departure time may lie in the future).
    fn packets_in_net_at_edt(&self, tp: &TcpSock, inflight_now: u32) -> u32 {
        let now_ns = tp.now.0;
        let edt_ns = tp.wstamp_ns.max(now_ns);
        let interval_us = (edt_ns - now_ns) / 1000;
        let interval_delivered = ((self.bw() as u64 * interval_us) >> BW_SCALE) as u32;
        let mut inflight_at_edt = inflight_now;
        if self.pacing_gain > BBR_UNIT {
            inflight_at_edt += Self::tso_segs_goal(tp);
        }
        inflight_at_edt.saturating_sub(interval_delivered)
    }

    /// Extra cwnd for the data that arrives in ACK bursts beyond the rate.
    fn ack_aggregation_cwnd(&self) -> u32 {
        if EXTRA_ACKED_GAIN == 0 || !self.full_bw_reached {
            return 0;
        }
        let max_aggr_cwnd = (self.bw() as u64 * EXTRA_ACKED_MAX_US / BW_UNIT) as u32;
        let aggr_cwnd = (EXTRA_ACKED_GAIN * self.extra_acked() as u32) >> BBR_SCALE;
        aggr_cwnd.min(max_aggr_cwnd)
    }

    /// Packet conservation in the first round of recovery, restore on exit.
    /// Returns the new cwnd and whether conservation decides it.
    fn set_cwnd_to_recover_or_restore(&mut self, tp: &TcpSock, rs: &RateSample, acked: u32) -> (u32, bool) {
        let prev_state = self.prev_ca_state;
        let state = tp.ca_state;
        let mut cwnd = tp.cwnd;
        // An ACK for P packets releases at most 2P: lost packets come off first.
        if rs.losses > 0 {
            cwnd = (cwnd as i32).wrapping_sub(rs.losses as i32).max(1) as u32;
        }
        if state == CaState::Recovery && prev_state != CaState::Recovery {
            self.packet_conservation = true;
            self.next_rtt_delivered = tp.delivered;
            // Cut cwnd the application, pacing or TSO left unused.
            cwnd = tp.packets_in_flight() + acked;
        } else if prev_state >= CaState::Recovery && state < CaState::Recovery {
            cwnd = cwnd.max(self.prior_cwnd);
            self.packet_conservation = false;
        }
        self.prev_ca_state = state;
        if self.packet_conservation {
            return (cwnd.max(tp.packets_in_flight() + acked), true);
        }
        (cwnd, false)
    }

    /// Slow-starts toward the target (below it) or snaps down to it (above it,
    /// once the pipe is full).
    fn set_cwnd(&mut self, tp: &mut TcpSock, rs: &RateSample, acked: u32, bw: u32, gain: u32) {
        let mut cwnd = tp.cwnd;
        if acked != 0 {
            let (c, conserving) = self.set_cwnd_to_recover_or_restore(tp, rs, acked);
            cwnd = c;
            if !conserving {
                let mut target = self.bdp(bw, gain);
                target += self.ack_aggregation_cwnd();
                target = self.quantization_budget(tp, target);
                if self.full_bw_reached {
                    cwnd = (cwnd + acked).min(target);
                } else if cwnd < target || tp.delivered < TCP_INIT_CWND {
                    cwnd += acked;
                }
                cwnd = cwnd.max(CWND_MIN_TARGET);
            }
        }
        tp.cwnd = cwnd.min(tp.cwnd_clamp);
        if self.mode == Mode::ProbeRtt {
            tp.cwnd = tp.cwnd.min(CWND_MIN_TARGET);
        }
    }

    /// A phase ends after one min RTT; the probing phase also needs in-flight
    /// at 1.25 BDP (or a loss), the draining phase ends early at 1 BDP.
    fn is_next_cycle_phase(&self, tp: &TcpSock, rs: &RateSample) -> bool {
        let elapsed = (tp.delivered_mstamp as i64 - self.cycle_mstamp as i64).max(0);
        let is_full_length = elapsed > self.min_rtt_us as i64;
        if self.pacing_gain == BBR_UNIT {
            return is_full_length;
        }
        let inflight = self.packets_in_net_at_edt(tp, rs.prior_in_flight);
        let bw = self.max_bw();
        if self.pacing_gain > BBR_UNIT {
            return is_full_length && (rs.losses > 0 || inflight >= self.inflight(tp, bw, self.pacing_gain));
        }
        is_full_length || inflight <= self.inflight(tp, bw, BBR_UNIT)
    }

    fn advance_cycle_phase(&mut self, tp: &TcpSock) {
        self.cycle_idx = (self.cycle_idx + 1) & (CYCLE_LEN - 1);
        self.cycle_mstamp = tp.delivered_mstamp;
    }

    fn update_cycle_phase(&mut self, tp: &TcpSock, rs: &RateSample) {
        if self.mode == Mode::ProbeBw && self.is_next_cycle_phase(tp, rs) {
            self.advance_cycle_phase(tp);
        }
    }

    fn reset_startup_mode(&mut self) {
        self.mode = Mode::Startup;
    }

    fn reset_probe_bw_mode(&mut self, tp: &TcpSock) {
        self.mode = Mode::ProbeBw;
        self.cycle_idx = CYCLE_LEN - 1 - self.rng.below(CYCLE_RAND) as u32;
        self.advance_cycle_phase(tp);
    }

    fn reset_mode(&mut self, tp: &TcpSock) {
        if !self.full_bw_reached {
            self.reset_startup_mode();
        } else {
            self.reset_probe_bw_mode(tp);
        }
    }

    fn reset_lt_bw_sampling_interval(&mut self, tp: &TcpSock) {
        self.lt_last_stamp = (tp.delivered_mstamp / 1000) as u32;
        self.lt_last_delivered = tp.delivered;
        self.lt_last_lost = tp.lost;
        self.lt_rtt_cnt = 0;
    }

    fn reset_lt_bw_sampling(&mut self, tp: &TcpSock) {
        self.lt_bw = 0;
        self.lt_use_bw = false;
        self.lt_is_sampling = false;
        self.reset_lt_bw_sampling_interval(tp);
    }

    /// Two lossy intervals in a row at about the same rate: a policer.
    fn lt_bw_interval_done(&mut self, tp: &TcpSock, bw: u32) {
        if self.lt_bw != 0 {
            // Linux's abs() of a u32 difference reinterprets it as signed.
            let diff = (bw.wrapping_sub(self.lt_bw) as i32).unsigned_abs();
            if diff.wrapping_mul(BBR_UNIT) <= LT_BW_RATIO.wrapping_mul(self.lt_bw)
                || Self::rate_bytes_per_sec(tp.mss, diff as u64, BBR_UNIT) <= LT_BW_DIFF
            {
                self.lt_bw = bw.wrapping_add(self.lt_bw) >> 1;
                self.lt_use_bw = true;
                self.pacing_gain = BBR_UNIT;
                self.lt_rtt_cnt = 0;
                return;
            }
        }
        self.lt_bw = bw;
        self.reset_lt_bw_sampling_interval(tp);
    }

    /// Linux `bbr_lt_bw_sampling`: intervals of 4..16 rounds that start and end
    /// with a loss, so that a token bucket's burst is not counted.
    fn lt_bw_sampling(&mut self, tp: &TcpSock, rs: &RateSample) {
        if self.lt_use_bw {
            if self.mode == Mode::ProbeBw && self.round_start {
                self.lt_rtt_cnt += 1;
                if self.lt_rtt_cnt >= LT_BW_MAX_RTTS {
                    self.reset_lt_bw_sampling(tp);
                    self.reset_probe_bw_mode(tp);
                }
            }
            return;
        }
        if !self.lt_is_sampling {
            if rs.losses == 0 {
                return;
            }
            self.reset_lt_bw_sampling_interval(tp);
            self.lt_is_sampling = true;
        }
        if rs.is_app_limited {
            self.reset_lt_bw_sampling(tp);
            return;
        }
        if self.round_start {
            self.lt_rtt_cnt += 1;
        }
        if self.lt_rtt_cnt < LT_INTVL_MIN_RTTS {
            return;
        }
        if self.lt_rtt_cnt > 4 * LT_INTVL_MIN_RTTS {
            self.reset_lt_bw_sampling(tp);
            return;
        }
        if rs.losses == 0 {
            return;
        }
        let lost = tp.lost.wrapping_sub(self.lt_last_lost);
        let delivered = tp.delivered.wrapping_sub(self.lt_last_delivered);
        if delivered == 0 || (lost << BBR_SCALE) < LT_LOSS_THRESH.wrapping_mul(delivered) {
            return;
        }
        let t = ((tp.delivered_mstamp / 1000) as u32).wrapping_sub(self.lt_last_stamp);
        if (t as i32) < 1 {
            return;
        }
        if t >= u32::MAX / 1000 {
            self.reset_lt_bw_sampling(tp);
            return;
        }
        let bw = delivered as u64 * BW_UNIT / (t as u64 * 1000);
        self.lt_bw_interval_done(tp, bw as u32);
    }

    /// Round counting and the max-bandwidth filter.
    fn update_bw(&mut self, tp: &TcpSock, rs: &RateSample) {
        self.round_start = false;
        if rs.delivered < 0 || rs.interval_us <= 0 {
            return;
        }
        if !seq_before(rs.prior_delivered, self.next_rtt_delivered) {
            self.next_rtt_delivered = tp.delivered;
            self.rtt_cnt = self.rtt_cnt.wrapping_add(1);
            self.round_start = true;
            self.packet_conservation = false;
        }
        self.lt_bw_sampling(tp, rs);
        let bw = rs.delivered as u64 * BW_UNIT / rs.interval_us as u64;
        // App-limited samples only count when they beat the estimate.
        if !rs.is_app_limited || bw >= self.max_bw() as u64 {
            self.bw.update(BW_RTTS, self.rtt_cnt, bw as u32);
        }
    }

    /// Linux `bbr_update_ack_aggregation`: the most data ACKed beyond what the
    /// estimated bandwidth explains since the epoch began, max over 5-10 rounds.
    fn update_ack_aggregation(&mut self, tp: &TcpSock, rs: &RateSample) {
        if EXTRA_ACKED_GAIN == 0 || rs.acked_sacked == 0 || rs.delivered < 0 || rs.interval_us <= 0 {
            return;
        }
        if self.round_start {
            self.extra_acked_win_rtts = (self.extra_acked_win_rtts + 1).min(0x1f);
            if self.extra_acked_win_rtts >= EXTRA_ACKED_WIN_RTTS {
                self.extra_acked_win_rtts = 0;
                self.extra_acked_win_idx ^= 1;
                self.extra_acked[self.extra_acked_win_idx] = 0;
            }
        }
        let epoch_us = (tp.delivered_mstamp as i64 - self.ack_epoch_mstamp as i64).max(0) as u32;
        let mut expected_acked = (self.bw() as u64 * epoch_us as u64 / BW_UNIT) as u32;
        // A slow ACK stream, or a very long epoch, starts a new epoch.
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

    /// Full pipe: three non-app-limited rounds without 25 % bandwidth growth.
    fn check_full_bw_reached(&mut self, rs: &RateSample) {
        if self.full_bw_reached || !self.round_start || rs.is_app_limited {
            return;
        }
        let bw_thresh = ((self.full_bw as u64 * FULL_BW_THRESH as u64) >> BBR_SCALE) as u32;
        if self.max_bw() >= bw_thresh {
            self.full_bw = self.max_bw();
            self.full_bw_cnt = 0;
            return;
        }
        self.full_bw_cnt += 1;
        self.full_bw_reached = self.full_bw_cnt >= FULL_BW_CNT;
    }

    fn check_drain(&mut self, tp: &mut TcpSock) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
            tp.ssthresh = self.inflight(tp, self.max_bw(), BBR_UNIT);
        }
        if self.mode == Mode::Drain
            && self.packets_in_net_at_edt(tp, tp.packets_in_flight()) <= self.inflight(tp, self.max_bw(), BBR_UNIT)
        {
            self.reset_probe_bw_mode(tp);
        }
    }

    fn check_probe_rtt_done(&mut self, tp: &mut TcpSock) {
        if !(self.probe_rtt_done_stamp != 0 && seq_after(tp.jiffies, self.probe_rtt_done_stamp)) {
            return;
        }
        self.min_rtt_stamp = tp.jiffies;
        tp.cwnd = tp.cwnd.max(self.prior_cwnd);
        self.reset_mode(tp);
    }

    /// The 10 s min-RTT filter and PROBE_RTT: when the min RTT is stale, hold
    /// 4 packets in flight for 200 ms and one round to see the empty queue.
    fn update_min_rtt(&mut self, tp: &mut TcpSock, rs: &RateSample) {
        let filter_expired = seq_after(tp.jiffies, self.min_rtt_stamp.wrapping_add(MIN_RTT_WIN_SEC * tp.hz));
        if rs.rtt_us >= 0 && (rs.rtt_us < self.min_rtt_us as i64 || (filter_expired && !rs.is_ack_delayed)) {
            self.min_rtt_us = rs.rtt_us as u32;
            self.min_rtt_stamp = tp.jiffies;
        }
        if PROBE_RTT_MODE_MS > 0 && filter_expired && !self.idle_restart && self.mode != Mode::ProbeRtt {
            self.mode = Mode::ProbeRtt;
            self.save_cwnd(tp);
            self.probe_rtt_done_stamp = 0;
        }
        if self.mode == Mode::ProbeRtt {
            // Samples at 4 packets say nothing about the bandwidth.
            let v = tp.delivered.wrapping_add(tp.packets_in_flight());
            tp.app_limited = if v == 0 { 1 } else { v };
            if self.probe_rtt_done_stamp == 0 && tp.packets_in_flight() <= CWND_MIN_TARGET {
                let dur = usecs_to_jiffies(PROBE_RTT_MODE_MS * 1000, tp.hz) as u32;
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
        // An idle restart ends with the first ACK that delivers data.
        if rs.delivered > 0 {
            self.idle_restart = false;
        }
    }

    fn update_gains(&mut self) {
        let (pacing, cwnd) = match self.mode {
            Mode::Startup => (HIGH_GAIN, HIGH_GAIN),
            Mode::Drain => (DRAIN_GAIN, HIGH_GAIN),
            Mode::ProbeBw => {
                (if self.lt_use_bw { BBR_UNIT } else { PACING_GAIN[self.cycle_idx as usize] }, CWND_GAIN)
            }
            Mode::ProbeRtt => (BBR_UNIT, BBR_UNIT),
        };
        self.pacing_gain = pacing;
        self.cwnd_gain = cwnd;
    }

    fn update_model(&mut self, tp: &mut TcpSock, rs: &RateSample) {
        self.update_bw(tp, rs);
        self.update_ack_aggregation(tp, rs);
        self.update_cycle_phase(tp, rs);
        self.check_full_bw_reached(rs);
        self.check_drain(tp);
        self.update_min_rtt(tp, rs);
        self.update_gains();
    }
}

impl CongestionControl for Bbr {
    fn name(&self) -> &str {
        "bbr"
    }

    /// Linux `bbr_get_info`.
    fn get_info(&self, tp: &TcpSock) -> Option<CcInfo> {
        Some(CcInfo::bbr(self.bw(), tp.mss, self.min_rtt_us, self.pacing_gain, self.cwnd_gain))
    }

    fn min_tso_segs(&self, tp: &TcpSock) -> Option<u32> {
        Some(Self::bbr_min_tso_segs(tp))
    }

    fn init(&mut self, tp: &mut TcpSock) {
        self.rng = Rng::stream(tp.flow_seed, "bbr");
        self.prior_cwnd = 0;
        tp.ssthresh = INFINITE_SSTHRESH;
        self.rtt_cnt = 0;
        self.next_rtt_delivered = tp.delivered;
        self.prev_ca_state = CaState::Open;
        self.packet_conservation = false;
        self.probe_rtt_done_stamp = 0;
        self.probe_rtt_round_done = false;
        self.min_rtt_us = tp.min_rtt_us();
        self.min_rtt_stamp = tp.jiffies;
        self.bw.reset(self.rtt_cnt, 0);
        self.has_seen_rtt = false;
        self.init_pacing_rate_from_rtt(tp);
        self.round_start = false;
        self.idle_restart = false;
        self.full_bw_reached = false;
        self.full_bw = 0;
        self.full_bw_cnt = 0;
        self.cycle_mstamp = 0;
        self.cycle_idx = 0;
        self.reset_lt_bw_sampling(tp);
        self.reset_startup_mode();
        self.ack_epoch_mstamp = tp.mstamp_us;
        self.ack_epoch_acked = 0;
        self.extra_acked_win_rtts = 0;
        self.extra_acked_win_idx = 0;
        self.extra_acked = [0; 2];
        tp.pacing_status = PacingStatus::Needed;
    }

    /// Only notes the cwnd to restore after recovery; ssthresh is unchanged.
    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        self.save_cwnd(tp);
        tp.ssthresh
    }

    fn has_cong_control(&self) -> bool {
        true
    }

    /// Linux `bbr_main`.
    fn cong_control(&mut self, tp: &mut TcpSock, rs: &RateSample) {
        self.update_model(tp, rs);
        let bw = self.bw();
        self.set_pacing_rate(tp, bw, self.pacing_gain);
        self.set_cwnd(tp, rs, rs.acked_sacked, bw, self.cwnd_gain);
    }

    /// A spurious slow-down: start full-pipe detection and policer sampling over.
    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        self.full_bw = 0;
        self.full_bw_cnt = 0;
        self.reset_lt_bw_sampling(tp);
        tp.cwnd
    }

    /// An RTO ends a round and counts as a loss for the policer estimator.
    fn set_state(&mut self, tp: &mut TcpSock, new_state: CaState) {
        if new_state == CaState::Loss {
            let rs = RateSample { losses: 1, is_app_limited: false, ..RateSample::default() };
            self.prev_ca_state = CaState::Loss;
            self.full_bw = 0;
            self.round_start = true;
            self.lt_bw_sampling(tp, &rs);
        }
    }

    /// Restarting from idle while app-limited: pace at the estimate, not above
    /// it, and let PROBE_RTT end if it is due.
    fn cwnd_event(&mut self, tp: &mut TcpSock, ev: CaEvent) {
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

    fn wants_pacing(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests;
