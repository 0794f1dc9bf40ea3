//! Scalable TCP as Linux runs it (`net/ipv4/tcp_scalable.c`; T. Kelly, "Scalable
//! TCP: improving performance in highspeed wide area networks", CCR 33(2), 2003):
//! multiplicative increase and decrease. Above 100 packets cwnd grows by 0.01
//! packet per packet acknowledged (1 % per RTT, via `tcp_cong_avoid_ai` with
//! w = min(cwnd, 100)); below 100 it grows like Reno. A loss takes 1/8 off, so
//! recovering from a loss takes ln(8/7)/ln(1.01) = 13.4 RTTs at any window.

use super::params::{CcaInfo, Params};
use super::{CongestionControl, TcpSock};

/// Linux TCP_SCALABLE_AI_CNT: +1 packet per this many acknowledged (a = 0.01).
pub const AI_CNT: u32 = 100;
/// Linux TCP_SCALABLE_MD_SCALE: a loss removes cwnd >> 3 (b = 0.125).
pub const MD_SCALE: u32 = 3;

#[derive(Default)]
pub struct Scalable;

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "scalable",
        description:
            "Scalable TCP: +0.01 packet per packet acknowledged above 100 packets (Reno below), cwnd x 7/8 on loss",
        source: "Linux net/ipv4/tcp_scalable.c; Kelly, CCR 33(2) 2003",
        params: vec![],
    }
}

pub fn build(_p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Scalable)
}

impl CongestionControl for Scalable {
    fn name(&self) -> &str {
        "scalable"
    }

    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        (tp.cwnd - (tp.cwnd >> MD_SCALE)).max(2)
    }

    fn cong_avoid(&mut self, tp: &mut TcpSock, _ack: u32, acked: u32) {
        if !tp.is_cwnd_limited() {
            return;
        }
        let mut acked = acked;
        if tp.in_slow_start() {
            acked = tp.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        tp.cong_avoid_ai(tp.cwnd.min(AI_CNT), acked);
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

    #[test]
    fn one_hundredth_of_a_packet_per_packet_above_100() {
        let mut tp = ca_sock(1000);
        // 1,000 packets acknowledged (two per ACK) add exactly 10 packets, not the
        // single packet Reno would add at this window.
        for _ in 0..500 {
            Scalable.cong_avoid(&mut tp, 0, 2);
        }
        assert_eq!(tp.cwnd, 1010);
        // The increment per packet does not shrink as the window grows.
        let mut tp = ca_sock(20_000);
        for _ in 0..100 {
            Scalable.cong_avoid(&mut tp, 0, 1);
        }
        assert_eq!(tp.cwnd, 20_001);
    }

    #[test]
    fn reno_like_below_100() {
        let mut tp = ca_sock(50);
        for _ in 0..49 {
            Scalable.cong_avoid(&mut tp, 0, 1);
        }
        assert_eq!(tp.cwnd, 50);
        Scalable.cong_avoid(&mut tp, 0, 1);
        assert_eq!(tp.cwnd, 51);
    }

    #[test]
    fn slow_start_leftover_goes_to_congestion_avoidance() {
        let mut tp = ca_sock(198);
        tp.ssthresh = 200;
        Scalable.cong_avoid(&mut tp, 0, 102);
        // 2 packets reach ssthresh, the other 100 earn one packet at w = 100.
        assert_eq!(tp.cwnd, 201);
        assert_eq!(tp.cwnd_cnt, 0);
    }

    #[test]
    fn loss_takes_one_eighth() {
        let mut tp = ca_sock(1000);
        assert_eq!(Scalable.ssthresh(&mut tp), 875);
        tp.cwnd = 1007;
        assert_eq!(Scalable.ssthresh(&mut tp), 882);
        tp.cwnd = 7;
        assert_eq!(Scalable.ssthresh(&mut tp), 7);
        tp.cwnd = 1;
        assert_eq!(Scalable.ssthresh(&mut tp), 2);
    }

    #[test]
    fn no_growth_when_not_cwnd_limited() {
        let mut tp = ca_sock(1000);
        tp.is_cwnd_limited = false;
        Scalable.cong_avoid(&mut tp, 0, 1000);
        assert_eq!(tp.cwnd, 1000);
    }
}
