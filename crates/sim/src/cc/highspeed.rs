//! HighSpeed TCP as Linux runs it (`net/ipv4/tcp_highspeed.c`; S. Floyd, RFC 3649):
//! above 38 packets the additive increase a(w) grows and the decrease b(w)
//! shrinks with the window, from Linux's 72-row copy of RFC 3649's Appendix B
//! table, so that the response function becomes w = 0.12 / p^0.835 instead of
//! Reno's 1.2 / sqrt(p). Two Linux traits matter for results: the table index
//! moves only in congestion avoidance (the first loss out of slow start still
//! halves), and the increase is a(w)/cwnd per ACK, not per packet acknowledged,
//! so with delayed ACKs the window grows half as fast as the RFC intends.

use super::params::{CcaInfo, Params};
use super::{CongestionControl, TcpSock};

/// One row of the AIMD table: the largest cwnd of the bin, and b(w) x 256.
/// In bin `i`, a(w) = i + 1.
#[derive(Clone, Copy, Debug)]
pub struct AimdRow {
    pub cwnd: u32,
    pub md: u32,
}

const fn row(cwnd: u32, md: u32) -> AimdRow {
    AimdRow { cwnd, md }
}

/// Linux `hstcp_aimd_vals` (RFC 3649 Appendix B with b(w) scaled by 256).
pub const AIMD_TABLE: [AimdRow; 72] = [
    row(38, 128),
    row(118, 112),
    row(221, 104),
    row(347, 98),
    row(495, 93),
    row(663, 89),
    row(851, 86),
    row(1058, 83),
    row(1284, 81),
    row(1529, 78),
    row(1793, 76),
    row(2076, 74),
    row(2378, 72),
    row(2699, 71),
    row(3039, 69),
    row(3399, 68),
    row(3778, 66),
    row(4177, 65),
    row(4596, 64),
    row(5036, 62),
    row(5497, 61),
    row(5979, 60),
    row(6483, 59),
    row(7009, 58),
    row(7558, 57),
    row(8130, 56),
    row(8726, 55),
    row(9346, 54),
    row(9991, 53),
    row(10661, 52),
    row(11358, 52),
    row(12082, 51),
    row(12834, 50),
    row(13614, 49),
    row(14424, 48),
    row(15265, 48),
    row(16137, 47),
    row(17042, 46),
    row(17981, 45),
    row(18955, 45),
    row(19965, 44),
    row(21013, 43),
    row(22101, 43),
    row(23230, 42),
    row(24402, 41),
    row(25618, 41),
    row(26881, 40),
    row(28193, 39),
    row(29557, 39),
    row(30975, 38),
    row(32450, 38),
    row(33986, 37),
    row(35586, 36),
    row(37253, 36),
    row(38992, 35),
    row(40808, 35),
    row(42707, 34),
    row(44694, 33),
    row(46776, 33),
    row(48961, 32),
    row(51258, 32),
    row(53677, 31),
    row(56230, 30),
    row(58932, 30),
    row(61799, 29),
    row(64851, 28),
    row(68113, 28),
    row(71617, 27),
    row(75401, 26),
    row(79517, 26),
    row(84035, 25),
    row(89053, 24),
];

/// Largest cwnd for which `cwnd * md` cannot overflow 32 bits (Linux caps the
/// clamp at 0xffffffff / 128 in `hstcp_init`).
const CWND_CLAMP_MAX: u32 = u32::MAX / 128;

#[derive(Default)]
pub struct HighSpeed {
    /// Index into `AIMD_TABLE` of the bin cwnd was in at the last CA ACK.
    ai: usize,
}

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "highspeed",
        description: "HighSpeed TCP: window-dependent a(w)/b(w) from RFC 3649's table above 38 packets, Reno below",
        source: "Linux net/ipv4/tcp_highspeed.c; RFC 3649",
        params: vec![],
    }
}

pub fn build(_p: &Params) -> Box<dyn CongestionControl> {
    Box::new(HighSpeed::default())
}

/// The table index Linux settles on for `cwnd` starting from `ai`:
/// AIMD_TABLE[ai - 1].cwnd < cwnd <= AIMD_TABLE[ai].cwnd, or the last row.
pub fn aimd_index(mut ai: usize, cwnd: u32) -> usize {
    if cwnd > AIMD_TABLE[ai].cwnd {
        while cwnd > AIMD_TABLE[ai].cwnd && ai < AIMD_TABLE.len() - 1 {
            ai += 1;
        }
    } else {
        while ai > 0 && cwnd <= AIMD_TABLE[ai - 1].cwnd {
            ai -= 1;
        }
    }
    ai
}

impl HighSpeed {
    /// a(w): packets added per RTT (per cwnd ACKs) in the current bin.
    pub fn a(&self) -> u32 {
        self.ai as u32 + 1
    }
    /// b(w) x 256 in the current bin.
    pub fn md(&self) -> u32 {
        AIMD_TABLE[self.ai].md
    }
}

impl CongestionControl for HighSpeed {
    fn name(&self) -> &str {
        "highspeed"
    }

    fn init(&mut self, tp: &mut TcpSock) {
        self.ai = 0;
        tp.cwnd_clamp = tp.cwnd_clamp.min(CWND_CLAMP_MAX);
    }

    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        (tp.cwnd - ((tp.cwnd * self.md()) >> 8)).max(2)
    }

    fn cong_avoid(&mut self, tp: &mut TcpSock, _ack: u32, acked: u32) {
        if !tp.is_cwnd_limited() {
            return;
        }
        if tp.in_slow_start() {
            // Linux drops the leftover of the crossing ACK here.
            tp.slow_start(acked);
            return;
        }
        self.ai = aimd_index(self.ai, tp.cwnd);
        if tp.cwnd < tp.cwnd_clamp {
            // a(w) per ACK whatever the ACK covers.
            tp.cwnd_cnt += self.a();
            if tp.cwnd_cnt >= tp.cwnd {
                tp.cwnd_cnt -= tp.cwnd;
                tp.cwnd += 1;
            }
        }
    }

    fn has_cong_avoid(&self) -> bool {
        true
    }

    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        tp.reno_undo_cwnd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca_sock(cwnd: u32) -> TcpSock {
        crate::cc::test_sock(250, cwnd, 2)
    }

    fn at(cwnd: u32) -> (u32, u32) {
        let ai = aimd_index(0, cwnd);
        (ai as u32 + 1, AIMD_TABLE[ai].md)
    }

    #[test]
    fn a_and_b_at_table_points() {
        assert_eq!(at(10), (1, 128));
        assert_eq!(at(38), (1, 128));
        assert_eq!(at(39), (2, 112));
        assert_eq!(at(1058), (8, 83));
        assert_eq!(at(1059), (9, 81));
        assert_eq!(at(10661), (30, 52));
        assert_eq!(at(10662), (31, 52));
        assert_eq!(at(89053), (72, 24));
        // Beyond the table the last row holds.
        assert_eq!(at(200_000), (72, 24));
    }

    #[test]
    fn index_moves_both_ways_from_any_start() {
        for start in [0usize, 7, 40, 71] {
            assert_eq!(aimd_index(start, 1000), 7, "from {start}");
            assert_eq!(aimd_index(start, 38), 0, "from {start}");
            assert_eq!(aimd_index(start, 50_000), 60, "from {start}");
        }
    }

    /// The table is RFC 3649's formulas sampled at each bin's upper edge:
    /// b(w) = -0.4 (ln w - ln 38) / (ln 83000 - ln 38) + 0.5 and
    /// a(w) = w^2 p(w) 2 b(w) / (2 - b(w)) with p(w) = 0.078 / w^1.2. Checking
    /// every row against them catches a mistyped entry.
    #[test]
    fn table_rows_follow_the_rfc_formulas() {
        let b_of = |w: f64| -0.4 * (w.ln() - 38f64.ln()) / (83000f64.ln() - 38f64.ln()) + 0.5;
        let a_of = |w: f64| {
            let b = b_of(w);
            w * w * (0.078 / w.powf(1.2)) * 2.0 * b / (2.0 - b)
        };
        let mut prev = 0;
        for (i, r) in AIMD_TABLE.iter().enumerate() {
            assert!(r.cwnd > prev, "row {i} not increasing");
            prev = r.cwnd;
            let w = r.cwnd as f64;
            let b = r.md as f64 / 256.0;
            // md is b(w) x 256 rounded to an integer: within one unit.
            assert!((b - b_of(w)).abs() <= 1.0 / 256.0, "row {i}: b {b} vs {}", b_of(w));
            if i > 0 {
                // a(w) at the bin's upper edge rounds to the bin's a = i + 1.
                assert!((a_of(w) - (i + 1) as f64).abs() < 0.5, "row {i}: a {} vs {}", a_of(w), i + 1);
            }
        }
    }

    #[test]
    fn a_of_w_per_ack_in_congestion_avoidance() {
        // cwnd 1000 is in bin 7: a = 8, so 125 ACKs add one packet.
        let mut hs = HighSpeed::default();
        let mut tp = ca_sock(1000);
        for _ in 0..124 {
            hs.cong_avoid(&mut tp, 0, 2);
        }
        assert_eq!(tp.cwnd, 1000);
        hs.cong_avoid(&mut tp, 0, 2);
        assert_eq!(tp.cwnd, 1001);
        assert_eq!(tp.cwnd_cnt, 0);
        assert_eq!(hs.a(), 8);
    }

    #[test]
    fn index_moves_only_in_congestion_avoidance() {
        let mut hs = HighSpeed::default();
        let mut tp = ca_sock(10);
        tp.ssthresh = 100_000;
        for _ in 0..5000 {
            hs.cong_avoid(&mut tp, 0, 1);
        }
        assert_eq!(tp.cwnd, 5010);
        assert_eq!(hs.ai, 0);
        // The first loss out of slow start therefore still halves.
        assert_eq!(hs.ssthresh(&mut tp), 2505);
        tp.ssthresh = 2505;
        tp.cwnd = 2505;
        hs.cong_avoid(&mut tp, 0, 1);
        assert_eq!(hs.a(), 14);
        assert_eq!(hs.md(), 71);
        // 2505 - 2505 * 71 / 256 = 2505 - 694.
        assert_eq!(hs.ssthresh(&mut tp), 1811);
        // A smaller window in congestion avoidance moves the index back down.
        tp.cwnd = 100;
        tp.ssthresh = 50;
        hs.cong_avoid(&mut tp, 0, 1);
        assert_eq!(hs.a(), 2);
    }

    #[test]
    fn clamp_is_capped_for_the_decrease_arithmetic() {
        let mut hs = HighSpeed::default();
        let mut tp = ca_sock(10);
        hs.init(&mut tp);
        assert_eq!(tp.cwnd_clamp, u32::MAX / 128);
        // At the clamp congestion avoidance adds nothing.
        tp.cwnd = tp.cwnd_clamp;
        hs.cong_avoid(&mut tp, 0, 1);
        assert_eq!(tp.cwnd, u32::MAX / 128);
        assert_eq!(tp.cwnd_cnt, 0);
    }
}
