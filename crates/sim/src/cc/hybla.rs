//! TCP Hybla as Linux runs it (`net/ipv4/tcp_hybla.c`; Caini & Firrincieli,
//! "TCP Hybla: a TCP enhancement for heterogeneous networks", Int. J. Satellite
//! Communications and Networking 22(5), 2004). Hybla removes Reno's bias
//! against long RTTs by growing cwnd as a Reno flow with the reference RTT0
//! (25 ms) would: with rho = RTT/RTT0 (at least 1), slow start adds 2^rho - 1
//! packets per ACK and congestion avoidance rho^2/cwnd, so both phases progress
//! per unit of time and not per RTT. rho comes from the smallest smoothed RTT
//! seen, kept with 3 fractional bits; increments are counted in 1/128 packet
//! and the fractions carried over. The initial window is rho packets. As in
//! Linux, growth is per ACK, whatever the number of packets it acknowledges;
//! loss is Reno's (ssthresh = cwnd/2) and outside the Open state it grows as
//! Reno.

use super::params::{declare_params, CcaInfo, Params};
use super::{CaState, CongestionControl, TcpSock};

/// Linux sets `snd_cwnd_clamp` to 65535 packets.
const CWND_CLAMP: u32 = 65535;
/// 2^(k/8) x 128 for k = 0..7: the fractional part of 2^rho (Linux `hybla_fraction`).
const FRACTIONS: [u32; 8] = [128, 139, 152, 165, 181, 197, 215, 234];

declare_params! {
    /// Module parameter of `tcp_hybla` with its Linux default.
    pub struct HyblaConfig {
        rtt0: u32 = 25, range(1, 10_000), "reference RTT in ms";
    }
}

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "hybla",
        description: "Hybla: Reno scaled to a 25 ms reference RTT; rho = RTT/RTT0 (>= 1), slow start +(2^rho - 1) and congestion avoidance +rho^2/cwnd per ACK",
        source: "Linux net/ipv4/tcp_hybla.c; Caini & Firrincieli, IJSCN 2004",
        params: HyblaConfig::catalogue(),
    }
}

pub fn build(p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Hybla::new(HyblaConfig::from_params(p)))
}

pub struct Hybla {
    cfg: HyblaConfig,
    /// Hybla's rules apply only in the Open state.
    hybla_en: bool,
    /// Fractions of a packet not yet added to cwnd, x 128.
    snd_cwnd_cents: u32,
    /// rho (integer part), rho^2 (integer part), rho x 8, rho^2 x 128.
    rho: u32,
    rho2: u32,
    rho_3ls: u32,
    rho2_7ls: u32,
    /// Smallest smoothed RTT seen, us x 8 (Linux's `srtt_us` scale).
    minrtt_us8: u32,
}

impl Hybla {
    pub fn new(cfg: HyblaConfig) -> Hybla {
        Hybla {
            cfg,
            hybla_en: true,
            snd_cwnd_cents: 0,
            rho: 0,
            rho2: 0,
            rho_3ls: 0,
            rho2_7ls: 0,
            minrtt_us8: 0,
        }
    }

    /// rho with its three fractional bits.
    pub fn rho(&self) -> f64 {
        self.rho_3ls as f64 / 8.0
    }

    /// Linux `hybla_recalc_param`. srtt is kept x 8, so srtt_us8 / RTT0 is rho x 8.
    fn recalc_param(&mut self, tp: &TcpSock) {
        self.rho_3ls = (tp.srtt_us8 / (self.cfg.rtt0 * 1000)).max(8);
        self.rho = self.rho_3ls >> 3;
        self.rho2_7ls = (self.rho_3ls * self.rho_3ls) << 1;
        self.rho2 = self.rho2_7ls >> 7;
    }
}

impl CongestionControl for Hybla {
    fn name(&self) -> &str {
        "hybla"
    }

    fn init(&mut self, tp: &mut TcpSock) {
        self.rho = 0;
        self.rho2 = 0;
        self.rho_3ls = 0;
        self.rho2_7ls = 0;
        self.snd_cwnd_cents = 0;
        self.hybla_en = true;
        tp.cwnd_clamp = CWND_CLAMP;
        self.recalc_param(tp);
        self.minrtt_us8 = tp.srtt_us8;
        tp.cwnd = self.rho;
    }

    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        tp.reno_ssthresh()
    }

    fn cong_avoid(&mut self, tp: &mut TcpSock, _ack: u32, acked: u32) {
        if tp.srtt_us8 < self.minrtt_us8 {
            self.recalc_param(tp);
            self.minrtt_us8 = tp.srtt_us8;
        }
        if !tp.is_cwnd_limited() {
            return;
        }
        if !self.hybla_en {
            tp.reno_cong_avoid(acked);
            return;
        }
        if self.rho == 0 {
            self.recalc_param(tp);
        }
        let rho_fractions = self.rho_3ls - (self.rho << 3);

        let slow_start = tp.in_slow_start();
        let increment = if slow_start {
            // 2^rho - 1 packets, as 2^int(rho) x 2^frac(rho) in 1/128 units.
            ((1u32 << self.rho.min(16)) * FRACTIONS[rho_fractions as usize]) - 128
        } else {
            let inc = self.rho2_7ls / tp.cwnd;
            if inc < 128 {
                tp.cwnd_cnt += 1;
            }
            inc
        };

        let odd = increment % 128;
        tp.cwnd += increment >> 7;
        self.snd_cwnd_cents += odd;
        while self.snd_cwnd_cents >= 128 {
            tp.cwnd += 1;
            self.snd_cwnd_cents -= 128;
            tp.cwnd_cnt = 0;
        }
        // An increment too small to register (rho^2 < cwnd / 128) still
        // yields one packet per window of ACKs.
        if increment == 0 && odd == 0 && tp.cwnd_cnt >= tp.cwnd {
            tp.cwnd += 1;
            tp.cwnd_cnt = 0;
        }
        if slow_start {
            tp.cwnd = tp.cwnd.min(tp.ssthresh);
        }
        tp.cwnd = tp.cwnd.min(tp.cwnd_clamp);
    }

    fn has_cong_avoid(&self) -> bool {
        true
    }

    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        tp.reno_undo_cwnd()
    }

    fn set_state(&mut self, _tp: &mut TcpSock, new_state: CaState) {
        self.hybla_en = new_state == CaState::Open;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::INFINITE_SSTHRESH;

    /// A Hybla connection initialised after a handshake RTT of `rtt_ms`.
    fn connected(rtt_ms: u32) -> (Hybla, TcpSock) {
        let mut tp = TcpSock::new(1448, 1000, 10);
        tp.srtt_us8 = rtt_ms * 1000 * 8;
        tp.is_cwnd_limited = true;
        let mut h = Hybla::new(HyblaConfig::default());
        h.init(&mut tp);
        (h, tp)
    }

    #[test]
    fn rho_is_rtt_over_rtt0_at_least_one() {
        for &(rtt_ms, rho, rho2) in &[(10, 1.0, 1), (25, 1.0, 1), (40, 1.5, 2), (250, 10.0, 100), (600, 24.0, 576)] {
            let (h, tp) = connected(rtt_ms);
            assert_eq!((h.rho(), h.rho2), (rho, rho2), "rtt {rtt_ms} ms");
            assert_eq!(tp.cwnd, rho as u32, "initial window is rho packets");
            assert_eq!(tp.cwnd_clamp, 65535);
        }
    }

    #[test]
    fn at_the_reference_rtt_growth_is_renos_per_ack() {
        // Slow start: +1 per ACK.
        let (mut h, mut tp) = connected(25);
        for _ in 0..9 {
            h.cong_avoid(&mut tp, 0, 1);
        }
        assert_eq!(tp.cwnd, 10);
        // Congestion avoidance: +1 per cwnd ACKs, like Reno with one packet per ACK.
        let (mut h, mut tp) = connected(25);
        tp.cwnd = 200;
        tp.ssthresh = 40;
        let mut reno = tp.clone();
        for _ in 0..1000 {
            h.cong_avoid(&mut tp, 0, 1);
            reno.reno_cong_avoid(1);
        }
        assert_eq!(tp.cwnd, reno.cwnd);
        assert_eq!(tp.cwnd, 204);
        // Below 128 packets rho^2/cwnd is truncated to whole 1/128ths: at cwnd 50
        // Linux adds 2/128 per ACK, one packet per 64 ACKs instead of Reno's 50.
        let (mut h, mut tp) = connected(25);
        tp.cwnd = 50;
        tp.ssthresh = 40;
        for _ in 0..640 {
            h.cong_avoid(&mut tp, 0, 1);
        }
        assert_eq!(tp.cwnd, 60);
    }

    #[test]
    fn at_250_ms_growth_is_rho_times_faster() {
        // Slow start: 2^10 - 1 = 1023 packets per ACK, clamped at ssthresh.
        let (mut h, mut tp) = connected(250);
        assert_eq!(tp.cwnd, 10);
        h.cong_avoid(&mut tp, 0, 1);
        assert_eq!(tp.cwnd, 1033);
        tp.ssthresh = 1500;
        h.cong_avoid(&mut tp, 0, 1);
        assert_eq!(tp.cwnd, 1500);
        // Congestion avoidance: rho^2 = 100 packets per window of ACKs.
        tp.ssthresh = 1000;
        tp.cwnd = 1000;
        for _ in 0..1000 {
            h.cong_avoid(&mut tp, 0, 1);
        }
        // (12800 / cwnd truncated: 12/128 per ACK, then 11/128 above 1066.)
        assert_eq!(tp.cwnd, 1091);
        // Fractional rho: 1.5 -> 2^1.5 - 1 = 1.83 packets per ACK (181/128 x 2 - 1).
        let (mut h, mut tp) = connected(40);
        tp.ssthresh = INFINITE_SSTHRESH;
        for _ in 0..128 {
            h.cong_avoid(&mut tp, 0, 1);
        }
        assert_eq!(tp.cwnd, 1 + (234 * 128) / 128);
    }

    #[test]
    fn reno_outside_open_and_rho_follows_the_smallest_srtt() {
        let (mut h, mut tp) = connected(250);
        tp.cwnd = 100;
        tp.ssthresh = 50;
        h.set_state(&mut tp, CaState::Recovery);
        tp.cwnd_cnt = 99;
        h.cong_avoid(&mut tp, 0, 1);
        assert_eq!(tp.cwnd, 101, "Reno's one packet per window");
        h.set_state(&mut tp, CaState::Open);
        // A larger srtt leaves rho alone, a smaller one lowers it.
        tp.srtt_us8 = 400_000 * 8;
        h.cong_avoid(&mut tp, 0, 1);
        assert_eq!(h.rho(), 10.0);
        tp.srtt_us8 = 100_000 * 8;
        h.cong_avoid(&mut tp, 0, 1);
        assert_eq!(h.rho(), 4.0);
        assert_eq!(h.ssthresh(&mut tp), tp.cwnd / 2);
    }
}
