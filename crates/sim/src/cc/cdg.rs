//! CAIA Delay-Gradient (CDG) as Linux runs it (`net/ipv4/tcp_cdg.c`, K. K.
//! Jonassen, 2015; Hayes & Armitage, "Revisiting TCP congestion control using
//! delay gradients", IFIP Networking 2011). Once per RTT CDG takes the change of
//! the RTT's minimum and maximum since the previous RTT (gmin, gmax), sums them
//! over a moving window of `window` (8) RTTs, and with the gradient g (gmin if
//! positive, else gmax; in us, extrapolated while the window fills) backs off
//! with probability 1 - exp(-g x backoff_factor / 10^6): it enters CWR with
//! ssthresh = cwnd x backoff_beta (0.7071). Otherwise it grows as Reno. Two
//! coexistence heuristics: a backoff that does not make the delay fall (no
//! gradient <= -32 us) counts as ineffectual, and after `use_ineff` (5) of them
//! CDG stops backing off on delay until one works; the shadow window remembers
//! the window a loss-based flow would have, so a loss after delay backoffs
//! halves max(shadow, cwnd) rather than the reduced cwnd. Slow start ends by
//! CDG's own HyStart (ACK train on a us clock, delay increase over 8 samples,
//! at any cwnd). RTT samples pass Hayes' delayed-ACK filter. Loss: ssthresh =
//! max(2, shadow/2 capped at cwnd, cwnd/2); undo to the cwnd before the last
//! reduction. The optional loss-tolerance heuristic (`use_tolerance`, off by
//! default) ignores losses while the gradients say the queue is not full.
//!
//! As the kernel, in integers: `nexp_u32` with Linux's 17-entry table of
//! e^-x. The random draw of each backoff (Linux `prandom_u32`) comes from the
//! flow's seeded stream, so runs are reproducible. The module refuses a
//! `window` that is not a power of two; so does `check`.

use super::params::{declare_params, CcaInfo, Params};
use super::{AckSample, CaEvent, CongestionControl, TcpSock};
use crate::packet::{seq_after, seq_before};
use crate::rng::Rng;

/// `hystart_detect` bits (Linux HYSTART_ACK_TRAIN, HYSTART_DELAY).
pub const HYSTART_ACK_TRAIN: u32 = 1;
pub const HYSTART_DELAY: u32 = 2;

/// exp(-x) x 65536 - 1 for x = 0 and 0.000256 x 2^k, k = 0..15 (`nexp_u32`
/// in `tcp_cdg.c`).
const NEXP_TABLE: [u16; 17] = [
    65535, 65518, 65501, 65468, 65401, 65267, 65001, 64470, 63422, 61378, 57484, 50423, 38795, 22965, 8047, 987, 14,
];

declare_params! {
    /// Module parameters of `tcp_cdg` with their Linux defaults.
    pub struct CdgConfig {
        /// Must be a power of two (the module refuses to load otherwise).
        window: u32 = 8, range(1, 256), "gradient window size (power of two <= 256)";
        /// 0.7071 x 1024 = sqrt(1/2), truncated as the C initialiser.
        backoff_beta: u32 = 724, range(0, 1024), "backoff beta (0-1024)";
        /// The paper's scaling G is 1000 / (backoff_factor x window).
        backoff_factor: u32 = 42, "backoff probability scale factor";
        hystart_detect: u32 = 3, range(0, 3), "use Hybrid Slow start (0: disabled, 1: ACK train, 2: delay threshold, 3: both)";
        use_ineff: u32 = 5, "use ineffectual backoff detection (threshold)";
        use_shadow: bool = true, "use shadow window heuristic";
        use_tolerance: bool = false, "use loss tolerance heuristic";
    }
}

pub fn info() -> CcaInfo {
    CcaInfo {
        name: "cdg",
        description: "CDG: delay-gradient backoff with probability 1 - exp(-g/G) once per RTT (cwnd x 0.7071), Reno growth, shadow window and ineffectual-backoff heuristics for coexistence with loss-based flows",
        source: "Linux net/ipv4/tcp_cdg.c; Hayes & Armitage, IFIP Networking 2011",
        params: CdgConfig::catalogue(),
    }
}

pub fn build(p: &Params) -> Box<dyn CongestionControl> {
    Box::new(Cdg::new(CdgConfig::from_params(p)))
}

/// What `tcp_cdg_register` refuses besides the declared ranges.
pub fn check(p: &Params) -> Result<(), String> {
    let window: u32 = p.get("window");
    if !window.is_power_of_two() {
        return Err(format!("cca_params.window: must be a power of two <= 256, got {window}"));
    }
    Ok(())
}

/// Linux `nexp_u32`: e^(-ux / 10^6) x U32_MAX, in integers.
pub fn nexp_u32(ux: u32) -> u32 {
    let mut msb = ux >> 8;
    // Cut off at ux >= 2^24 (the true value is below 222 / U32_MAX).
    if msb > u16::MAX as u32 {
        return 0;
    }
    // The low eight bits linearly, then e^(a + b + ...) = e^a e^b ... for the
    // bits above.
    let mut res = u32::MAX - (ux & 0xff) * (u32::MAX / 1_000_000);
    let mut i = 1;
    while msb != 0 {
        let y = if msb & 1 != 0 { NEXP_TABLE[i] } else { NEXP_TABLE[0] } as u64 + 1;
        res = ((res as u64 * y) >> 16) as u32;
        i += 1;
        msb >>= 1;
    }
    res
}

/// Linux `enum cdg_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CdgState {
    Unknown,
    NonFull,
    Full,
    Backoff,
}

/// The kernel's `struct minmax` of `tcp_cdg.c` (not the windowed filter).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct MinMax {
    min: i32,
    max: i32,
}

impl MinMax {
    fn is_zero(&self) -> bool {
        self.min == 0 && self.max == 0
    }
}

/// Linux `DIV_ROUND_CLOSEST` for a signed dividend.
fn div_round_closest(x: i32, d: i32) -> i32 {
    if x > 0 {
        (x + d / 2) / d
    } else {
        (x - d / 2) / d
    }
}

/// Linux `struct cdg`; RTTs in us, sequence numbers in segments.
pub struct Cdg {
    cfg: CdgConfig,
    rng: Rng,
    rtt: MinMax,
    rtt_prev: MinMax,
    gradients: Vec<MinMax>,
    gsum: MinMax,
    gfilled: bool,
    tail: u8,
    state: CdgState,
    delack: u8,
    rtt_seq: u32,
    undo_cwnd: u32,
    shadow_wnd: u32,
    backoff_cnt: u16,
    sample_cnt: u16,
    delay_min: i32,
    last_ack: u32,
    round_start: u32,
}

impl Cdg {
    pub fn new(cfg: CdgConfig) -> Cdg {
        Cdg {
            cfg,
            rng: Rng::stream(0, "cdg"),
            rtt: MinMax::default(),
            rtt_prev: MinMax::default(),
            gradients: Vec::new(),
            gsum: MinMax::default(),
            gfilled: false,
            tail: 0,
            state: CdgState::Unknown,
            delack: 0,
            rtt_seq: 0,
            undo_cwnd: 0,
            shadow_wnd: 0,
            backoff_cnt: 0,
            sample_cnt: 0,
            delay_min: 0,
            last_ack: 0,
            round_start: 0,
        }
    }

    pub fn state(&self) -> CdgState {
        self.state
    }

    pub fn shadow_wnd(&self) -> u32 {
        self.shadow_wnd
    }

    /// Linux `tcp_cdg_hystart_update`.
    fn hystart_update(&mut self, tp: &mut TcpSock) {
        self.delay_min = if self.delay_min == 0 { self.rtt.min } else if self.rtt.min == 0 { self.delay_min } else { self.delay_min.min(self.rtt.min) };
        if self.delay_min == 0 {
            return;
        }
        if self.cfg.hystart_detect & HYSTART_ACK_TRAIN != 0 {
            let now_us = tp.mstamp_us as u32;
            if self.last_ack == 0 || !tp.is_cwnd_limited() {
                self.last_ack = now_us;
                self.round_start = now_us;
            } else if seq_before(now_us, self.last_ack.wrapping_add(3000)) {
                let base_owd = (self.delay_min as u32 / 2).max(125);
                self.last_ack = now_us;
                if seq_after(now_us, self.round_start.wrapping_add(base_owd)) {
                    tp.ssthresh = tp.cwnd;
                    return;
                }
            }
        }
        if self.cfg.hystart_detect & HYSTART_DELAY != 0 {
            if self.sample_cnt < 8 {
                self.sample_cnt += 1;
            } else {
                let thresh = (self.delay_min as u32 + self.delay_min as u32 / 8).max(125) as i32;
                if self.rtt.min > thresh {
                    tp.ssthresh = tp.cwnd;
                }
            }
        }
    }

    /// Linux `tcp_cdg_grad`: the gradient of this RTT over the window (x window).
    fn grad(&mut self) -> i32 {
        let window = self.cfg.window as i32;
        let mut gmin = self.rtt.min.wrapping_sub(self.rtt_prev.min);
        let mut gmax = self.rtt.max.wrapping_sub(self.rtt_prev.max);
        if !self.gradients.is_empty() {
            let t = self.tail as usize;
            self.gsum.min = self.gsum.min.wrapping_add(gmin.wrapping_sub(self.gradients[t].min));
            self.gsum.max = self.gsum.max.wrapping_add(gmax.wrapping_sub(self.gradients[t].max));
            self.gradients[t] = MinMax { min: gmin, max: gmax };
            self.tail = ((self.tail as u32 + 1) & (self.cfg.window - 1)) as u8;
            gmin = self.gsum.min;
            gmax = self.gsum.max;
        }
        // The sums stand for (rtt_latest - rtt_oldest), not divided by window.
        let mut grad = if gmin > 0 { gmin } else { gmax };
        if !self.gfilled {
            if self.tail == 0 {
                self.gfilled = true;
            } else {
                grad = grad.wrapping_mul(window) / self.tail as i32;
            }
        }
        // The last backoff made the delay fall.
        if gmin <= -32 || gmax <= -32 {
            self.backoff_cnt = 0;
        }
        if self.cfg.use_tolerance {
            let gmin = div_round_closest(gmin, 64);
            let gmax = div_round_closest(gmax, 64);
            if gmin > 0 && gmax <= 0 {
                self.state = CdgState::Full;
            } else if (gmin > 0 && gmax > 0) || gmax < 0 {
                self.state = CdgState::NonFull;
            }
        }
        grad
    }

    /// Linux `tcp_cdg_backoff`: true if CDG backed off (and asked for CWR).
    fn backoff(&mut self, tp: &mut TcpSock, grad: u32) -> bool {
        let draw = (self.rng.next_u64() >> 32) as u32;
        if draw <= nexp_u32(grad.wrapping_mul(self.cfg.backoff_factor)) {
            return false;
        }
        if self.cfg.use_ineff != 0 {
            self.backoff_cnt = self.backoff_cnt.wrapping_add(1);
            if self.backoff_cnt as u32 > self.cfg.use_ineff {
                return false;
            }
        }
        self.shadow_wnd = self.shadow_wnd.max(tp.cwnd);
        self.state = CdgState::Backoff;
        tp.enter_cwr();
        true
    }
}

impl CongestionControl for Cdg {
    fn name(&self) -> &str {
        "cdg"
    }

    fn init(&mut self, tp: &mut TcpSock) {
        if self.cfg.window > 1 {
            self.gradients = vec![MinMax::default(); self.cfg.window as usize];
        }
        self.rng = Rng::stream(tp.flow_seed, "cdg");
        self.rtt_seq = tp.snd_nxt;
        self.shadow_wnd = tp.cwnd;
    }

    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        self.undo_cwnd = tp.cwnd;
        if self.state == CdgState::Backoff {
            return ((tp.cwnd as u64 * self.cfg.backoff_beta.min(1024) as u64) >> 10).max(2) as u32;
        }
        if self.state == CdgState::NonFull && self.cfg.use_tolerance {
            return tp.cwnd;
        }
        self.shadow_wnd = (self.shadow_wnd >> 1).min(tp.cwnd);
        if self.cfg.use_shadow {
            return self.shadow_wnd.max(tp.cwnd >> 1).max(2);
        }
        (tp.cwnd >> 1).max(2)
    }

    /// Linux `tcp_cdg_cong_avoid` (not called in CWR or Recovery).
    fn cong_avoid(&mut self, tp: &mut TcpSock, ack: u32, acked: u32) {
        if tp.in_slow_start() && self.cfg.hystart_detect != 0 {
            self.hystart_update(tp);
        }
        if seq_after(ack, self.rtt_seq) && !self.rtt.is_zero() {
            let mut grad = 0;
            if !self.rtt_prev.is_zero() {
                grad = self.grad();
            }
            self.rtt_seq = tp.snd_nxt;
            self.rtt_prev = self.rtt;
            self.rtt = MinMax::default();
            self.last_ack = 0;
            self.sample_cnt = 0;
            if grad > 0 && self.backoff(tp, grad as u32) {
                return;
            }
        }
        if !tp.is_cwnd_limited() {
            self.shadow_wnd = self.shadow_wnd.min(tp.cwnd);
            return;
        }
        let prior = tp.cwnd;
        tp.reno_cong_avoid(acked);
        let incr = tp.cwnd.wrapping_sub(prior);
        self.shadow_wnd = self.shadow_wnd.max(self.shadow_wnd.wrapping_add(incr));
    }

    fn has_cong_avoid(&self) -> bool {
        true
    }

    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        tp.cwnd.max(self.undo_cwnd)
    }

    fn cwnd_event(&mut self, tp: &mut TcpSock, ev: CaEvent) {
        match ev {
            CaEvent::CwndRestart => {
                // Everything but the gradient buffer (zeroed) and the random
                // stream starts over.
                let mut gradients = std::mem::take(&mut self.gradients);
                gradients.iter_mut().for_each(|g| *g = MinMax::default());
                let cfg = self.cfg.clone();
                let rng = self.rng.clone();
                *self = Cdg::new(cfg);
                self.rng = rng;
                self.gradients = gradients;
                self.rtt_seq = tp.snd_nxt;
                self.shadow_wnd = tp.cwnd;
            }
            CaEvent::CompleteCwr => {
                self.state = CdgState::Unknown;
                self.rtt_seq = tp.snd_nxt;
                self.rtt_prev = self.rtt;
                self.rtt = MinMax::default();
            }
            _ => {}
        }
    }

    /// Linux `tcp_cdg_acked`, with Hayes' delayed-ACK filter.
    fn pkts_acked(&mut self, tp: &mut TcpSock, sample: &AckSample) {
        if sample.rtt_us <= 0 {
            return;
        }
        let rtt_us = sample.rtt_us.min(i32::MAX as i64) as i32;
        if tp.sacked_out == 0 {
            if sample.pkts_acked == 1 && self.delack > 0 {
                // A delayed ACK counts only if it lowers a known minimum.
                self.rtt.min = self.rtt.min.min(rtt_us);
                self.delack -= 1;
                return;
            } else if sample.pkts_acked > 1 && self.delack < 5 {
                self.delack += 1;
            }
        }
        self.rtt.min = if self.rtt.min == 0 { rtt_us } else { self.rtt.min.min(rtt_us) };
        self.rtt.max = self.rtt.max.max(rtt_us);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::vegas::tests::rtt_sample;

    fn cdg(cfg: CdgConfig, cwnd: u32, ssthresh: u32) -> (Cdg, TcpSock) {
        let mut tp = crate::cc::test_sock(1000, cwnd, ssthresh);
        tp.flow_seed = 3;
        let mut c = Cdg::new(cfg);
        c.init(&mut tp);
        (c, tp)
    }

    /// One RTT whose samples range over `min..=max` us, ended by an ACK beyond
    /// the round's SND.NXT. Returns whether CDG asked for CWR.
    fn round(c: &mut Cdg, tp: &mut TcpSock, min: i64, max: i64) -> bool {
        c.pkts_acked(tp, &AckSample { pkts_acked: 2, rtt_us: min, in_flight: 0 });
        c.pkts_acked(tp, &AckSample { pkts_acked: 2, rtt_us: max, in_flight: 0 });
        let ack = c.rtt_seq.wrapping_add(1);
        tp.snd_nxt = ack.wrapping_add(tp.cwnd);
        c.cong_avoid(tp, ack, 1);
        std::mem::take(&mut tp.cwr_requested)
    }

    #[test]
    fn nexp_matches_e_to_the_minus_x() {
        assert_eq!(nexp_u32(0), u32::MAX);
        for ux in [100u32, 1_000, 42_000, 100_000, 500_000, 1_000_000, 4_000_000, 10_000_000] {
            let exact = (-(ux as f64) / 1e6).exp() * u32::MAX as f64;
            let got = nexp_u32(ux) as f64;
            // The table is exact to 16 bits per factor: 1 % at e^-10, far better above.
            assert!((got - exact).abs() <= exact * 1e-2 + 300.0, "ux {ux}: {got} vs {exact}");
        }
        assert_eq!(nexp_u32(1 << 24), 0);
    }

    #[test]
    fn backoff_probability_follows_the_gradient() {
        // Gradient 2381 us x 42 = 100,000: backoff with probability 1 - e^-0.1.
        let cfg = CdgConfig { use_ineff: 0, ..CdgConfig::default() };
        let (mut c, _) = cdg(cfg, 100, 50);
        let mut tp = crate::cc::test_sock(1000, 100, 50);
        let n = 20_000;
        let backoffs = (0..n).filter(|_| c.backoff(&mut tp, 2381)).count();
        let p = backoffs as f64 / n as f64;
        assert!((p - (1.0 - (-0.1f64).exp())).abs() < 0.01, "{p}");
        assert!(tp.cwr_requested);
        assert_eq!(c.state(), CdgState::Backoff);
        // No gradient, no backoff.
        let (mut c, mut tp) = cdg(CdgConfig::default(), 100, 50);
        assert!(!(0..1000).any(|_| c.backoff(&mut tp, 0)));
    }

    #[test]
    fn a_backoff_is_cwr_to_0_7071_of_cwnd_and_loss_halves_the_shadow_window() {
        let (mut c, mut tp) = cdg(CdgConfig::default(), 100, 50);
        c.state = CdgState::Backoff;
        assert_eq!(c.ssthresh(&mut tp), 70);
        assert_eq!(c.undo_cwnd, 100);
        // After two backoffs a loss-based flow would still be at 100: the
        // shadow window keeps that, and a loss halves it, not the reduced cwnd.
        c.state = CdgState::Unknown;
        c.shadow_wnd = 100;
        tp.cwnd = 50;
        assert_eq!(c.ssthresh(&mut tp), 50);
        let cfg = CdgConfig { use_shadow: false, ..CdgConfig::default() };
        let (mut c, mut tp) = cdg(cfg, 50, 25);
        c.shadow_wnd = 100;
        assert_eq!(c.ssthresh(&mut tp), 25);
        tp.cwnd = 30;
        assert_eq!(c.undo_cwnd(&mut tp), 50);
    }

    #[test]
    fn rising_delay_backs_off_and_flat_delay_grows_like_reno() {
        // Flat RTTs: never a backoff, Reno's +1 per cwnd.
        let (mut c, mut tp) = cdg(CdgConfig::default(), 100, 50);
        for _ in 0..50 {
            assert!(!round(&mut c, &mut tp, 10_000, 12_000));
        }
        assert_eq!((tp.cwnd, tp.cwnd_cnt), (100, 50));
        // Each RTT's minimum 1 ms above the last: gradient 8 ms over the
        // window, probability 1 - e^-0.336 = 29 % per RTT.
        let (mut c, mut tp) = cdg(CdgConfig::default(), 100, 50);
        let mut backoffs = 0;
        for k in 0..60 {
            if round(&mut c, &mut tp, 10_000 + 1000 * k, 12_000 + 1000 * k) {
                backoffs += 1;
            }
        }
        // Only five ineffectual backoffs in a row (the delay never falls).
        assert_eq!(backoffs, 5);
        // A falling delay makes backoffs effectual again.
        round(&mut c, &mut tp, 5_000, 6_000);
        assert_eq!(c.backoff_cnt, 0);
    }

    #[test]
    fn the_gradient_is_extrapolated_until_the_window_fills() {
        let (mut c, _) = cdg(CdgConfig::default(), 100, 50);
        c.rtt_prev = MinMax { min: 10_000, max: 12_000 };
        c.rtt = MinMax { min: 10_100, max: 12_000 };
        // One gradient of 100 us in a window of 8: x 8 / 1.
        assert_eq!(c.grad(), 800);
        c.rtt_prev = c.rtt;
        c.rtt = MinMax { min: 10_200, max: 12_000 };
        assert_eq!(c.grad(), 800);
        for _ in 0..6 {
            c.rtt_prev = c.rtt;
            c.rtt.min += 100;
            c.grad();
        }
        assert!(c.gfilled);
        // Filled: the plain sum of the last 8 gradients.
        c.rtt_prev = c.rtt;
        c.rtt.min += 100;
        assert_eq!(c.grad(), 800);
        // gmin not positive: gmax decides.
        c.rtt_prev = c.rtt;
        c.rtt = MinMax { min: c.rtt.min, max: c.rtt.max + 50 };
        assert_eq!(c.grad(), 700);
    }

    #[test]
    fn delayed_ack_filter_keeps_only_lower_minima() {
        let (mut c, mut tp) = cdg(CdgConfig::default(), 100, 50);
        c.pkts_acked(&mut tp, &AckSample { pkts_acked: 2, rtt_us: 10_000, in_flight: 0 });
        assert_eq!(c.delack, 1);
        // A single-packet ACK after a stretch ACK: probably delayed, so only a
        // lower minimum counts and the maximum is untouched.
        c.pkts_acked(&mut tp, &rtt_sample(50_000));
        assert_eq!((c.rtt.min, c.rtt.max, c.delack), (10_000, 10_000, 0));
        c.pkts_acked(&mut tp, &rtt_sample(50_000));
        assert_eq!(c.rtt.max, 50_000);
    }

    #[test]
    fn window_must_be_a_power_of_two() {
        let mut given = std::collections::BTreeMap::new();
        given.insert("window".to_string(), crate::cc::ParamValue::Int(6));
        let p = Params::new("cdg", &given, CdgConfig::catalogue()).unwrap();
        assert_eq!(check(&p).unwrap_err(), "cca_params.window: must be a power of two <= 256, got 6");
        given.insert("window".to_string(), crate::cc::ParamValue::Int(16));
        let p = Params::new("cdg", &given, CdgConfig::catalogue()).unwrap();
        assert!(check(&p).is_ok());
    }
}
