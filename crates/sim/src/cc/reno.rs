//! Reno as Linux runs it (`tcp_cong.c`: `tcp_reno_cong_avoid`,
//! `tcp_reno_ssthresh`, `tcp_reno_undo_cwnd`): slow start to ssthresh, then
//! +1 packet per cwnd packets delivered, halve on loss. Whether the connection
//! recovers with SACK (RACK + PRR) or NewReno depends on the `sack` setting of
//! the TCP stack, not on this file.

use super::{CongestionControl, TcpSock};

#[derive(Default)]
pub struct Reno;

impl CongestionControl for Reno {
    fn name(&self) -> &str {
        "reno"
    }

    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        tp.reno_ssthresh()
    }

    fn cong_avoid(&mut self, tp: &mut TcpSock, _ack: u32, acked: u32) {
        tp.reno_cong_avoid(acked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sock(cwnd: u32, ssthresh: u32) -> TcpSock {
        let mut tp = TcpSock::new(1448, 250, cwnd);
        tp.ssthresh = ssthresh;
        tp.is_cwnd_limited = true;
        tp
    }

    #[test]
    fn slow_start_adds_acked_and_carries_leftover() {
        let mut tp = sock(10, 12);
        Reno.cong_avoid(&mut tp, 0, 5);
        // 2 packets take cwnd to ssthresh, 3 are left for congestion avoidance.
        assert_eq!(tp.cwnd, 12);
        assert_eq!(tp.cwnd_cnt, 3);
    }

    #[test]
    fn one_packet_per_window_in_congestion_avoidance() {
        let mut tp = sock(20, 10);
        for _ in 0..19 {
            Reno.cong_avoid(&mut tp, 0, 1);
        }
        assert_eq!(tp.cwnd, 20);
        Reno.cong_avoid(&mut tp, 0, 1);
        assert_eq!(tp.cwnd, 21);
        assert_eq!(tp.cwnd_cnt, 0);
    }

    #[test]
    fn no_growth_when_not_cwnd_limited() {
        let mut tp = sock(20, 10);
        tp.is_cwnd_limited = false;
        Reno.cong_avoid(&mut tp, 0, 100);
        assert_eq!(tp.cwnd, 20);
    }

    #[test]
    fn halves_and_undoes() {
        let mut tp = sock(41, 10);
        assert_eq!(Reno.ssthresh(&mut tp), 20);
        tp.cwnd = 3;
        assert_eq!(Reno.ssthresh(&mut tp), 2);
        tp.prior_cwnd = 41;
        assert_eq!(Reno.undo_cwnd(&mut tp), 41);
    }
}
