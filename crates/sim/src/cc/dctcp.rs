//! DCTCP as Linux runs it (`net/ipv4/tcp_dctcp.c`; Alizadeh et al., "Data
//! Center TCP (DCTCP)", SIGCOMM 2010; RFC 8257): Reno's growth, and a
//! reduction that scales with the extent of congestion. Once per window of
//! data the sender measures F, the fraction of delivered packets whose ACKs
//! carried ECE, and keeps alpha, an EWMA of F with gain g = 1/16, scaled to
//! 0..1024. An ECE reduces cwnd (through CWR, once per window) by alpha / 2:
//! ssthresh = cwnd - cwnd * alpha / 2048. A loss halves cwnd as Reno does.
//!
//! The algorithm only works with a queue that marks ECN-capable packets when
//! the instantaneous queue exceeds a threshold K (`network.qdisc = "step"`,
//! see `net::aqm::step`), and with a receiver that echoes the CE state of each
//! segment exactly rather than latching ECE until CWR: the receiving socket
//! runs DCTCP too, whose `cwnd_event` sees `CA_EVENT_ECN_IS_CE` and
//! `CA_EVENT_ECN_NO_CE` for arriving data. That half is the receiver's
//! CE-state mode (`TcpReceiver`, `dctcp_ece_ack_update`), chosen by
//! `ce_state_acks`. Linux's flag `TCP_CONG_NEEDS_ECN` makes the connection
//! negotiate ECN whatever `net.ipv4.tcp_ecn` says and sends every packet
//! ECT(0), retransmissions included (`needs_ecn`).
//!
//! Not modelled: Linux's fallback to Reno (`dctcp-reno`) when the peer refuses
//! ECN (a simulated peer never refuses), and PLB (protective load balancing
//! re-paths a flow by changing its IPv6 flow label; it is off by default).

use super::params::{declare_params, CcaInfo, Params};
use super::{CaEvent, CaState, CongestionControl, TcpSock};
use crate::packet::seq_before;

/// Linux DCTCP_MAX_ALPHA: alpha = 1 in the fixed point of `dctcp_alpha`.
pub const DCTCP_MAX_ALPHA: u32 = 1024;

declare_params! {
    /// Module parameters of `tcp_dctcp` with their Linux defaults.
    pub struct DctcpConfig {
        /// Linux `dctcp_shift_g` (4: g = 1/16). At most 10, where Linux's
        /// `delivered_ce << (10 - shift_g)` stops being defined.
        shift_g: u32 = 4, range(0, 10), "alpha's EWMA gain g = 1 / 2^shift_g";
        /// Linux `dctcp_alpha_on_init` (DCTCP_MAX_ALPHA): a new connection
        /// assumes full congestion until it has measured a window.
        alpha_on_init: u32 = DCTCP_MAX_ALPHA, range(0, DCTCP_MAX_ALPHA), "initial alpha, x 1024";
        /// `dctcp_clamp_alpha_on_loss` of Linux 3.18 to 4.x (off by default;
        /// later kernels dropped it for `dctcp_react_to_loss`).
        clamp_alpha_on_loss: bool = false, "set alpha to 1 on a retransmission timeout";
    }
}

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "dctcp",
        description: "DCTCP: Reno growth; once per window alpha += (F - alpha) / 16 with F the ECE-marked fraction, cwnd x (1 - alpha/2) on ECE, halve on loss; forces ECN, and its receiver echoes each segment's CE state",
        source: "Linux net/ipv4/tcp_dctcp.c, tcp_dctcp.h; Alizadeh et al., SIGCOMM 2010; RFC 8257",
        params: DctcpConfig::catalogue(),
    }
}

pub fn build(p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Dctcp::new(DctcpConfig::from_params(p)))
}

/// Linux `struct dctcp` (the sender's half; `prior_rcv_nxt` and `ce_state`
/// live in the receiver, see the module documentation).
pub struct Dctcp {
    cfg: DctcpConfig,
    /// `tp->delivered` and `tp->delivered_ce` at the start of the observation window.
    old_delivered: u32,
    old_delivered_ce: u32,
    /// alpha x 1024.
    pub alpha: u32,
    /// The window ends when snd_una reaches this (snd_nxt at its start).
    next_seq: u32,
    /// cwnd before the last reduction, for undo.
    loss_cwnd: u32,
}

impl Dctcp {
    pub fn new(cfg: DctcpConfig) -> Dctcp {
        let alpha = cfg.alpha_on_init.min(DCTCP_MAX_ALPHA);
        Dctcp { cfg, old_delivered: 0, old_delivered_ce: 0, alpha, next_seq: 0, loss_cwnd: 0 }
    }

    /// Linux `dctcp_reset`: a new observation window starts now.
    fn reset(&mut self, tp: &TcpSock) {
        self.next_seq = tp.snd_nxt;
        self.old_delivered = tp.delivered;
        self.old_delivered_ce = tp.delivered_ce;
    }

    /// Linux `dctcp_update_alpha`: once snd_una has passed the end of the
    /// window, alpha = (1 - g) alpha + g F with F = delivered_ce / delivered
    /// over the window, in Linux's integer arithmetic. `min_not_zero` lets a
    /// small alpha (below 2^shift_g) decay to 0 instead of sticking.
    fn update_alpha(&mut self, tp: &TcpSock) {
        if seq_before(tp.snd_una, self.next_seq) {
            return;
        }
        let delivered = tp.delivered.wrapping_sub(self.old_delivered);
        let mut delivered_ce = tp.delivered_ce.wrapping_sub(self.old_delivered_ce);
        let mut alpha = self.alpha;
        let decay = alpha >> self.cfg.shift_g;
        alpha -= if decay == 0 { alpha } else { decay.min(alpha) };
        if delivered_ce > 0 {
            delivered_ce <<= 10 - self.cfg.shift_g;
            delivered_ce /= delivered.max(1);
            alpha = (alpha + delivered_ce).min(DCTCP_MAX_ALPHA);
        }
        self.alpha = alpha;
        self.reset(tp);
    }

    /// Linux `dctcp_react_to_loss`: a loss halves the window, whatever alpha is.
    fn react_to_loss(&mut self, tp: &mut TcpSock) {
        self.loss_cwnd = tp.cwnd;
        tp.ssthresh = (tp.cwnd >> 1).max(2);
    }
}

impl CongestionControl for Dctcp {
    fn name(&self) -> &str {
        "dctcp"
    }

    fn init(&mut self, tp: &mut TcpSock) {
        self.alpha = self.cfg.alpha_on_init.min(DCTCP_MAX_ALPHA);
        self.loss_cwnd = 0;
        self.reset(tp);
    }

    /// Linux `dctcp_ssthresh`: called for ECE's CWR (and first for a loss,
    /// whose `set_state`/`cwnd_event` then override it).
    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        self.loss_cwnd = tp.cwnd;
        let cut = ((tp.cwnd as u64 * self.alpha as u64) >> 11) as u32;
        (tp.cwnd - cut).max(2)
    }

    fn cong_avoid(&mut self, tp: &mut TcpSock, _ack: u32, acked: u32) {
        tp.reno_cong_avoid(acked);
    }

    fn has_cong_avoid(&self) -> bool {
        true
    }

    /// Linux `dctcp_cwnd_undo`.
    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        tp.cwnd.max(self.loss_cwnd)
    }

    /// Linux `dctcp_state`: entering Recovery is a loss (the RTO's Loss state
    /// is handled by `CaEvent::Loss`, so that one RTT sees one adjustment).
    fn set_state(&mut self, tp: &mut TcpSock, new_state: CaState) {
        if new_state == CaState::Recovery && tp.ca_state != CaState::Recovery {
            self.react_to_loss(tp);
        }
        if self.cfg.clamp_alpha_on_loss && new_state == CaState::Loss {
            self.alpha = DCTCP_MAX_ALPHA;
        }
    }

    /// Linux `dctcp_cwnd_event` on the sender: the RTO. (`EcnIsCe`/`EcnNoCe`
    /// happen at the receiver, see the module documentation.)
    fn cwnd_event(&mut self, tp: &mut TcpSock, ev: CaEvent) {
        if ev == CaEvent::Loss {
            self.react_to_loss(tp);
        }
    }

    /// Linux: `in_ack_event = dctcp_update_alpha`, called before the ACK's
    /// cumulatively acknowledged packets are counted as delivered.
    fn in_ack_event(&mut self, tp: &mut TcpSock, _flags: u32) {
        self.update_alpha(tp);
    }

    fn needs_ecn(&self) -> bool {
        true
    }

    fn ce_state_acks(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dctcp() -> Dctcp {
        Dctcp::new(DctcpConfig::default())
    }

    /// Runs `windows` observation windows of `per_window` delivered packets,
    /// `marked` of them on ECE ACKs, and returns alpha after each.
    fn run_windows(ca: &mut Dctcp, tp: &mut TcpSock, windows: usize, per_window: u32, marked: u32) -> Vec<u32> {
        let mut out = vec![];
        for _ in 0..windows {
            // The ACK that reaches the window's end: its packets delivered,
            // the next window's already sent.
            tp.delivered += per_window;
            tp.delivered_ce += marked;
            tp.snd_una = tp.snd_nxt;
            tp.snd_nxt += per_window;
            ca.in_ack_event(tp, 0);
            out.push(ca.alpha);
        }
        out
    }

    fn sock() -> TcpSock {
        let mut tp = crate::cc::test_sock(250, 100, 50);
        tp.snd_una = 1;
        tp.snd_nxt = 1;
        tp
    }

    #[test]
    fn unmarked_windows_decay_alpha_by_one_sixteenth() {
        let (mut ca, mut tp) = (dctcp(), sock());
        ca.init(&mut tp);
        assert_eq!(ca.alpha, 1024);
        let a = run_windows(&mut ca, &mut tp, 3, 20, 0);
        // 1024 - 64 = 960, 960 - 60 = 900, 900 - 56 = 844.
        assert_eq!(a, [960, 900, 844]);
        // Below 16 the shift gives 0 and min_not_zero takes all of alpha.
        ca.alpha = 15;
        assert_eq!(run_windows(&mut ca, &mut tp, 1, 20, 0), [0]);
    }

    #[test]
    fn fully_marked_windows_converge_to_1024() {
        let (mut ca, mut tp) = (dctcp(), sock());
        ca.cfg.alpha_on_init = 0;
        ca.init(&mut tp);
        let a = run_windows(&mut ca, &mut tp, 200, 10, 10);
        // First window: 0 + (10 << 6) / 10 = 64 (g F = 1/16 of 1024).
        assert_eq!(a[0], 64);
        assert_eq!(a[1], 64 - 4 + 64);
        assert!(a.windows(2).all(|w| w[1] >= w[0]));
        // The fixed point of alpha - alpha/16 + 64 (integer) is 1009..1024.
        assert!(*a.last().unwrap() >= 1009, "{a:?}");
    }

    #[test]
    fn alpha_tracks_the_marked_fraction() {
        let (mut ca, mut tp) = (dctcp(), sock());
        ca.init(&mut tp);
        // A quarter of the packets marked: alpha settles where alpha / 16 (in
        // integers) equals g F = 16, 256..271 (256 = 1024 / 4).
        let a = run_windows(&mut ca, &mut tp, 300, 40, 10);
        let last = *a.last().unwrap();
        assert!((256..=271).contains(&last), "{last}");
    }

    #[test]
    fn alpha_changes_once_per_window() {
        let (mut ca, mut tp) = (dctcp(), sock());
        ca.init(&mut tp);
        tp.snd_nxt = 21;
        ca.in_ack_event(&mut tp, 0);
        // The window that began at init ends at snd_nxt = 1: an update (no
        // data: alpha only decays), and the next window ends at 21.
        assert_eq!(ca.alpha, 960);
        tp.snd_una = 20;
        tp.delivered += 19;
        tp.delivered_ce += 19;
        ca.in_ack_event(&mut tp, 0);
        assert_eq!(ca.alpha, 960, "snd_una below next_seq: no update");
        tp.snd_una = 21;
        ca.in_ack_event(&mut tp, 0);
        assert_eq!(ca.alpha, 960 - 60 + 64);
    }

    #[test]
    fn ssthresh_takes_alpha_over_two() {
        let (mut ca, mut tp) = (dctcp(), sock());
        tp.cwnd = 100;
        ca.alpha = 1024;
        assert_eq!(ca.ssthresh(&mut tp), 50);
        ca.alpha = 256;
        // 100 - 100 * 256 / 2048 = 100 - 12.
        assert_eq!(ca.ssthresh(&mut tp), 88);
        ca.alpha = 0;
        assert_eq!(ca.ssthresh(&mut tp), 100);
        tp.cwnd = 3;
        ca.alpha = 1024;
        assert_eq!(ca.ssthresh(&mut tp), 2);
    }

    #[test]
    fn loss_halves_and_undo_restores() {
        let (mut ca, mut tp) = (dctcp(), sock());
        tp.cwnd = 100;
        ca.alpha = 64;
        // tcp_enter_recovery: ssthresh hook, then set_state(Recovery).
        tp.ssthresh = ca.ssthresh(&mut tp);
        assert_eq!(tp.ssthresh, 97);
        ca.set_state(&mut tp, CaState::Recovery);
        assert_eq!(tp.ssthresh, 50);
        tp.ca_state = CaState::Recovery;
        tp.cwnd = 50;
        assert_eq!(ca.undo_cwnd(&mut tp), 100);
        // An RTO: ssthresh hook, then CA_EVENT_LOSS halves as well.
        tp.ca_state = CaState::Open;
        tp.cwnd = 80;
        tp.ssthresh = ca.ssthresh(&mut tp);
        ca.cwnd_event(&mut tp, CaEvent::Loss);
        assert_eq!(tp.ssthresh, 40);
        assert_eq!(ca.alpha, 64, "alpha is kept unless clamp_alpha_on_loss");
        let mut clamp = Dctcp::new(DctcpConfig { clamp_alpha_on_loss: true, ..DctcpConfig::default() });
        clamp.alpha = 64;
        clamp.set_state(&mut tp, CaState::Loss);
        assert_eq!(clamp.alpha, DCTCP_MAX_ALPHA);
    }

    #[test]
    fn grows_like_reno() {
        let (mut ca, mut tp) = (dctcp(), sock());
        tp.cwnd = 10;
        tp.ssthresh = 5;
        for _ in 0..10 {
            ca.cong_avoid(&mut tp, 0, 1);
        }
        assert_eq!(tp.cwnd, 11);
    }
}
