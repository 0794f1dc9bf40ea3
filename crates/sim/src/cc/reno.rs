//! Reno as Linux runs it (`tcp_cong.c`: `tcp_reno_cong_avoid`,
//! `tcp_reno_ssthresh`, `tcp_reno_undo_cwnd`): slow start to ssthresh, then
//! +1 packet per cwnd packets delivered, halve on loss. Whether the connection
//! recovers with SACK (RACK + PRR) or NewReno depends on the `sack` setting of
//! the TCP stack, not on this file.

use super::params::{CcaInfo, Params};
use super::{CongestionControl, TcpSock};

#[derive(Default)]
pub struct Reno {
    /// Classic NewReno: the same window rules, with SACK switched off.
    no_sack: bool,
}

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "reno",
        description: "Reno AIMD as Linux runs it: +1 packet per RTT, halve on loss, SACK loss recovery (RACK + PRR)",
        source: "Linux net/ipv4/tcp_cong.c; RFC 5681",
        params: vec![],
    }
}

pub fn build(_p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Reno::default())
}

pub fn info_newreno() -> CcaInfo {
    CcaInfo {
        name: "newreno",
        description: "Classic NewReno: Reno's window rules without SACK (duplicate ACKs, partial ACKs, one hole per RTT)",
        source: "RFC 6582; Linux tcp_newreno_mark_lost (net/ipv4/tcp_input.c)",
        params: vec![],
    }
}

pub fn build_newreno(_p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Reno { no_sack: true })
}

impl CongestionControl for Reno {
    fn name(&self) -> &str {
        if self.no_sack {
            "newreno"
        } else {
            "reno"
        }
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

    fn sack(&self) -> Option<bool> {
        self.no_sack.then_some(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sock(cwnd: u32, ssthresh: u32) -> TcpSock {
        crate::cc::test_sock(250, cwnd, ssthresh)
    }

    #[test]
    fn slow_start_adds_acked_and_carries_leftover() {
        let mut tp = sock(10, 12);
        Reno::default().cong_avoid(&mut tp, 0, 5);
        // 2 packets take cwnd to ssthresh, 3 are left for congestion avoidance.
        assert_eq!(tp.cwnd, 12);
        assert_eq!(tp.cwnd_cnt, 3);
    }

    #[test]
    fn one_packet_per_window_in_congestion_avoidance() {
        let mut tp = sock(20, 10);
        for _ in 0..19 {
            Reno::default().cong_avoid(&mut tp, 0, 1);
        }
        assert_eq!(tp.cwnd, 20);
        Reno::default().cong_avoid(&mut tp, 0, 1);
        assert_eq!(tp.cwnd, 21);
        assert_eq!(tp.cwnd_cnt, 0);
    }

    #[test]
    fn no_growth_when_not_cwnd_limited() {
        let mut tp = sock(20, 10);
        tp.is_cwnd_limited = false;
        Reno::default().cong_avoid(&mut tp, 0, 100);
        assert_eq!(tp.cwnd, 20);
    }

    #[test]
    fn halves_and_undoes() {
        let mut tp = sock(41, 10);
        assert_eq!(Reno::default().ssthresh(&mut tp), 20);
        tp.cwnd = 3;
        assert_eq!(Reno::default().ssthresh(&mut tp), 2);
        tp.prior_cwnd = 41;
        assert_eq!(Reno::default().undo_cwnd(&mut tp), 41);
    }
}
