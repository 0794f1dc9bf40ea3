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
use super::{CaEvent, CaState, CongestionControl, PacingStatus, RateSample, TcpSock, INFINITE_SSTHRESH};
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
    fn min_tso_segs(tp: &TcpSock) -> u32 {
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
        (bytes / tp.mss).max(Self::min_tso_segs(tp)).min(TSO_MAX_SEGS)
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
mod tests {
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
}
