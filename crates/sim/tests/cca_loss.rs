//! End-to-end checks of the loss-based algorithms BIC, HighSpeed, H-TCP,
//! Scalable and CUBIC v2.0 (2.6.18): each fills a link with a one-BDP buffer,
//! H-TCP backs off by minRTT/maxRTT, and HighSpeed and Scalable follow their
//! published response functions. Each test names its model, its assumptions and
//! the tolerance the issue sets. Run lengths are chosen per algorithm so the
//! measurement window holds whole sawtooth cycles; the file takes about 5 s of
//! CPU in release mode, and the long sweep is `#[ignore]`d.

mod common;
use ccarena_sim::net::loss::LossSpec;
use ccarena_sim::net::queue::QueueLimit;
use ccarena_sim::{FlowConfig, RunResult, SimConfig};
use common::*;

const MSS_BITS: f64 = 1448.0 * 8.0;

/// Loss episodes (recoveries or timeouts) whose first retransmission falls
/// inside the measurement window, counted from the 100 ms samples: a run of
/// consecutive samples with new retransmissions is one episode.
fn loss_episodes_in_window(r: &RunResult, i: usize) -> usize {
    let s = &r.flow_series[i];
    let start = r.warmup_ns;
    let mut episodes = 0;
    let mut in_episode = false;
    for k in 1..s.t_ns.len() {
        let new_losses = s.retransmissions[k] > s.retransmissions[k - 1];
        if new_losses && !in_episode && s.t_ns[k] > start {
            episodes += 1;
        }
        in_episode = new_losses;
    }
    episodes
}

/// One flow alone on a link with a buffer of one bandwidth-delay product. Every
/// algorithm here keeps at least half of its window at a loss (H-TCP's adaptive
/// beta = minRTT / maxRTT is exactly 0.5 with a BDP of queue), so the link never
/// drains: goodput >= 95 % of the goodput capacity (rate x 1448/1500).
///
/// Run lengths: the measurement window must hold at least two loss episodes, so
/// that a whole sawtooth cycle (and its trough) is measured. Measured cycle
/// lengths at 400 Mbps / 82 ms (100 Mbps / 20 ms): Scalable 2.5 s (0.6 s), BIC
/// 16 s with two losses per cycle (1.5 s), H-TCP 9.8 s (3.1 s), HighSpeed 19 s
/// (2.2 s), and CUBIC v2.0 94 s (6 s): its S_max cap, in 2.6.18's units, lets
/// it regain the 20 % it gave up at only ~11 packets per second. CUBIC v2.0
/// also starts with ssthresh 100 and then grows 2 % per RTT (cnt = 50) until its
/// first loss (19 s at 400 Mbps), hence its longer warm-up.
#[test]
fn one_flow_with_a_bdp_buffer_fills_the_link() {
    let runs: [(&str, u64, u64); 5] =
        [("scalable", 20, 10), ("bic", 40, 10), ("htcp", 40, 10), ("highspeed", 50, 10), ("cubic-2008", 120, 15)];
    for (cca, secs, warmup) in runs {
        for &(rate, rtt) in &[(100u64, 20u64), (400, 82)] {
            let cfg = scenario(
                rate,
                QueueLimit::Bytes(bdp_bytes(rate, rtt)),
                iid(0.0),
                vec![flow(cca, rtt)],
                secs,
                warmup,
                1,
            );
            let r = run(cfg);
            let capacity = rate as f64 * 1e6 * 1448.0 / 1500.0;
            let u = goodput_bps(&r, 0) / capacity;
            let episodes = loss_episodes_in_window(&r, 0);
            eprintln!("{cca} {rate} Mbps {rtt} ms, {secs} s: utilisation {u:.4}, {episodes} loss episodes measured");
            assert!(episodes >= 2, "{cca} at {rate} Mbps/{rtt} ms: only {episodes} loss episodes in the window");
            assert!(u >= 0.95, "{cca} at {rate} Mbps/{rtt} ms: utilisation {u:.4}");
        }
    }
}

const ALGORITHMS: [&str; 5] = ["bic", "highspeed", "htcp", "scalable", "cubic-2008"];

/// Link rate (Mbps), buffer, loss, RTT (ms), and a change to the flow's settings.
type HarshCase = (u64, QueueLimit, LossSpec, u64, fn(&mut FlowConfig));

/// The algorithms through the stack's rough paths, each against a Reno flow:
/// tiny buffers, heavy and bursty loss, SACK off (NewReno), no delayed ACKs, an
/// RTT below one jiffy, other tick rates, a deep buffer, and an outage
/// (timeouts and Loss-state resets). `run` checks the engine's conservation
/// laws; each flow must also deliver data and keep cwnd >= 1 at every sample.
/// Run without `--release` it also checks the integer arithmetic for overflow.
#[test]
fn loss_based_algorithms_survive_harsh_scenarios() {
    let bursty = LossSpec::GilbertElliott { p_gb: 0.01, p_bg: 0.2, loss_good: 0.0, loss_bad: 0.5 };
    for cca in ALGORITHMS {
        let outage = LossSpec::Outages { windows_ns: vec![(3_000_000_000, 3_600_000_000)] };
        let cases: [HarshCase; 8] = [
            (10, QueueLimit::Packets(5), iid(0.05), 30, |_| {}),
            (50, QueueLimit::Packets(20), bursty.clone(), 60, |f| f.tcp.delayed_ack = false),
            (20, QueueLimit::Packets(50), LossSpec::Periodic { p: 0.02 }, 40, |f| f.tcp.sack = false),
            (100, QueueLimit::Packets(100), iid(0.001), 1, |f| f.tcp.hz = 100),
            (100, QueueLimit::Packets(30), iid(0.0), 200, |f| f.tcp.hz = 1000),
            (30, QueueLimit::Packets(40), iid(0.002), 80, |f| f.tcp.hz = 300),
            // A deep buffer (queueing delay of seconds), then an outage (timeouts).
            (50, QueueLimit::Bytes(10_000_000), iid(0.0), 50, |_| {}),
            (40, QueueLimit::Packets(60), outage, 70, |_| {}),
        ];
        for (i, (rate, buffer, loss, rtt, tweak)) in cases.into_iter().enumerate() {
            let mut f = flow(cca, rtt);
            tweak(&mut f);
            let mut reno = flow("reno", rtt * 2 + 5);
            reno.tcp = f.tcp.clone();
            let r = run(scenario(rate, buffer, loss, vec![f, reno], 8, 2, 7));
            for (k, s) in r.flow_series.iter().enumerate() {
                assert!(s.cwnd.iter().all(|&c| c >= 1), "{cca} case {i} flow {k}: cwnd 0");
                assert!(goodput_bps(&r, k) > 0.0, "{cca} case {i} flow {k}: no progress");
            }
        }
    }
}

/// H-TCP's adaptive decrease through the whole stack: beta = minRTT / maxRTT,
/// where maxRTT is measured in the Open state from ACK RTT samples. With a
/// buffer of one BDP the RTT doubles before a loss, so beta = 0.5; with a
/// quarter of a BDP it grows by a quarter, so beta = 0.8, clamped to 102/128.
/// The first two congestion events use 0.5 (the adaptive mode needs one event
/// to arm), so the steady state is read after the warm-up.
#[test]
fn htcp_backs_off_by_min_rtt_over_max_rtt() {
    let (rate, rtt) = (100u64, 82u64);
    for &(buffer_bdp, beta) in &[(1.0f64, 0.5f64), (0.25, 102.0 / 128.0)] {
        let buffer = (bdp_bytes(rate, rtt) as f64 * buffer_bdp) as u64;
        let r = run(scenario(rate, QueueLimit::Bytes(buffer), iid(0.0), vec![flow("htcp", rtt)], 60, 20, 1));
        let s = &r.flow_series[0];
        let from = s.t_ns.iter().position(|&t| t >= r.warmup_ns).unwrap();
        let peak = *s.cwnd[from..].iter().max().unwrap() as f64;
        let ssthresh = *s.ssthresh.last().unwrap() as f64;
        let measured = ssthresh / peak;
        eprintln!("htcp, buffer {buffer_bdp} BDP: ssthresh {ssthresh} after peaks of {peak}: beta {measured:.3} (expected {beta:.3})");
        assert!(loss_episodes_in_window(&r, 0) >= 2);
        assert!((measured - beta).abs() <= 0.03, "buffer {buffer_bdp} BDP: beta {measured:.3}, expected {beta:.3}");
    }
}

/// A link that never limits the flow: 10 Gbps with a buffer far larger than
/// any window reached, so only the random loss process drops packets.
fn unconstrained(
    cca: &str,
    rtt_ms: u64,
    loss: LossSpec,
    delayed_ack: bool,
    secs: u64,
    warmup: u64,
    seed: u64,
) -> SimConfig {
    let mut f = flow(cca, rtt_ms);
    f.tcp.delayed_ack = delayed_ack;
    scenario(10_000, QueueLimit::Bytes(2_000_000_000), loss, vec![f], secs, warmup, seed)
}

/// Mean window (packets per RTT) of flow 0 from its goodput.
fn mean_window(r: &RunResult, rtt_ms: u64) -> f64 {
    goodput_bps(r, 0) * (rtt_ms as f64 / 1000.0) / MSS_BITS
}

/// Run length for about `losses` loss events at the model's window, after a
/// warm-up of `warm_losses` events (slow start overshoots to ~1/(2p) packets and
/// the window needs that many decreases to come down).
fn run_secs(model_w: f64, p: f64, rtt_ms: u64, losses: f64, warm_losses: f64) -> (u64, u64) {
    let pkts_per_sec = model_w / (rtt_ms as f64 / 1000.0);
    let secs_per_loss = 1.0 / p / pkts_per_sec;
    let warmup = (warm_losses * secs_per_loss).ceil() as u64;
    (warmup + (losses * secs_per_loss).ceil() as u64, warmup)
}

/// RFC 3649 section 5: the HighSpeed response function w = 0.12 / p^0.835
/// packets, in the high-speed region (w far above Low_Window = 38).
///
/// The model's assumptions, which the test adopts: the RFC derives a(w) and b(w)
/// from the deterministic-loss sawtooth of an AIMD that adds a(w)/w per ACK of
/// one packet (its standard-TCP reference, w = 1.2/sqrt(p), is the same
/// sawtooth), so losses are periodic and the receiver ACKs every packet.
///
/// What differs and is reported rather than asserted (docs/fidelity.md, from
/// `response_functions_long_sweep`):
/// * Linux adds a(w)/w per ACK, not per packet acknowledged, so with delayed
///   ACKs it reaches only 0.58-0.65 of the model.
/// * Linux takes a(w) and b(w) from RFC 3649's table at the upper edge of the
///   bin cwnd is in, up to a whole step above the RFC's a(w) in the lower part
///   of each bin. With a ~ 4 (w ~ 263) that puts Linux 14 % above the model
///   (the margin left here is small for that reason), with a ~ 12 (w ~ 1800) 4 %.
/// * i.i.d. loss adds 2-3 %: 1.16 at p = 1e-4 (just outside), 1.09 at 3e-5,
///   1.07 at 1e-5. The window relaxes over many loss events, so a mean within a
///   few percent needs hundreds of them (the standard deviation over seeds is
///   13 % with 40), too long for CI.
#[test]
fn highspeed_matches_the_rfc3649_response_function() {
    let rtt_ms = 20;
    for &p in &[1e-4f64, 3e-5, 1e-5] {
        let model_w = 0.12 / p.powf(0.835);
        assert!(model_w > 5.0 * 38.0, "not in the high-speed region");
        // Periodic loss settles in a few cycles once slow start's overshoot
        // (to ~1/(2p) packets, halved at ai = 0) has been worked off.
        let (secs, warmup) = run_secs(model_w, p, rtt_ms, 15.0, 15.0);
        let r = run(unconstrained("highspeed", rtt_ms, LossSpec::Periodic { p }, false, secs, warmup, 1));
        let w = mean_window(&r, rtt_ms);
        let ratio = w / model_w;
        eprintln!("highspeed p={p:e} periodic: w {w:.0} vs RFC 3649 {model_w:.0}, ratio {ratio:.3}");
        assert!((ratio - 1.0).abs() <= 0.15, "p={p:e}: ratio {ratio:.3} outside 15 %");
    }
}

/// Kelly (2003), "Scalable TCP: improving performance in highspeed wide area
/// networks", CCR 33(2): with a = 0.01 added per packet acknowledged and b = 1/8
/// of the window removed per loss, the increase and decrease balance when
/// w = a / (b p) = 0.08 / p.
///
/// The model's assumption, which the test adopts: losses strike packets at
/// random (the balance is an expectation per packet), so i.i.d. loss. Scalable's
/// window is a multiplicative random walk that relaxes over ~8 losses, so the
/// run holds 800 of them (standard deviation over seeds: 4 % with 600; long
/// runs give 0.95, 0.93 and 0.90 at p = 2e-4, 1e-4 and 3e-5). The
/// window, 400 packets, stays above 100, below which Scalable is Reno. Linux's
/// Scalable counts packets, so delayed ACKs do not matter. Reported, not
/// asserted: under periodic loss the window follows a deterministic sawtooth
/// with mean a / (p ln(8/7)) = 0.0749 / p, and Linux adds nothing during the
/// recovery RTT: ratio 0.87.
#[test]
fn scalable_matches_kellys_response_function() {
    let (rtt_ms, p) = (20, 2e-4);
    let model_w = 0.08 / p;
    assert!(model_w > 3.0 * 100.0, "not in the scalable region");
    let (secs, warmup) = run_secs(model_w, p, rtt_ms, 800.0, 25.0);
    let r = run(unconstrained("scalable", rtt_ms, iid(p), true, secs, warmup, 1));
    let w = mean_window(&r, rtt_ms);
    let ratio = w / model_w;

    let (secs, warmup) = run_secs(model_w, p, rtt_ms, 30.0, 25.0);
    let periodic = run(unconstrained("scalable", rtt_ms, LossSpec::Periodic { p }, true, secs, warmup, 1));
    let periodic_ratio = mean_window(&periodic, rtt_ms) / model_w;
    eprintln!(
        "scalable p={p:e}: w {w:.0} vs Kelly {model_w:.0}, ratio {ratio:.3} (periodic loss: {periodic_ratio:.3})"
    );
    assert!((ratio - 1.0).abs() <= 0.15, "ratio {ratio:.3} outside 15 %");
}

/// The long version of the two response-function checks: i.i.d. loss with
/// hundreds of loss events per point and two seeds, smaller p, and delayed ACKs
/// on and off; prints the table in docs/fidelity.md and holds HighSpeed (periodic
/// loss, where w >= 700) and Scalable (i.i.d. loss) to 15 %. Takes about a
/// minute of CPU (over 200 million packets), so CI skips it:
/// `cargo test --release -p ccarena-sim --test cca_loss -- --ignored --nocapture`.
#[test]
#[ignore]
fn response_functions_long_sweep() {
    let rtt_ms = 20;
    // Mean ratio of the measured to the model window over `seeds` runs.
    let mean_ratio = |cca: &str, p: f64, model_w: f64, loss: LossSpec, delayed_ack: bool, losses: f64, seeds: u64| {
        let (secs, warmup) = run_secs(model_w, p, rtt_ms, losses, 25.0);
        let total: f64 = (1..=seeds)
            .map(|seed| {
                mean_window(&run(unconstrained(cca, rtt_ms, loss.clone(), delayed_ack, secs, warmup, seed)), rtt_ms)
            })
            .sum();
        total / seeds as f64 / model_w
    };
    let mut misses = Vec::new();
    // (p, i.i.d. loss events per run; 0 = too long even here)
    for &(p, iid_losses) in &[(1e-4f64, 600.0), (3e-5, 300.0), (1e-5, 150.0), (1e-6, 0.0)] {
        let model_w = 0.12 / p.powf(0.835);
        let periodic = mean_ratio("highspeed", p, model_w, LossSpec::Periodic { p }, false, 15.0, 1);
        let delack = mean_ratio("highspeed", p, model_w, LossSpec::Periodic { p }, true, 15.0, 1);
        let iid_ratio =
            if iid_losses > 0.0 { mean_ratio("highspeed", p, model_w, iid(p), false, iid_losses, 2) } else { f64::NAN };
        eprintln!("highspeed p={p:e} w={model_w:.0}: periodic {periodic:.3}, periodic with delayed ACKs {delack:.3}, i.i.d. {iid_ratio:.3}");
        if model_w >= 700.0 && (periodic - 1.0).abs() > 0.15 {
            misses.push(format!("highspeed periodic p={p:e}: {periodic:.3}"));
        }
    }
    for &(p, iid_losses) in &[(2e-4f64, 1000.0), (1e-4, 1000.0), (3e-5, 300.0), (1e-5, 0.0)] {
        let model_w = 0.08 / p;
        let iid_ratio =
            if iid_losses > 0.0 { mean_ratio("scalable", p, model_w, iid(p), true, iid_losses, 2) } else { f64::NAN };
        let periodic = mean_ratio("scalable", p, model_w, LossSpec::Periodic { p }, true, 30.0, 1);
        eprintln!("scalable p={p:e} w={model_w:.0}: i.i.d. {iid_ratio:.3}, periodic {periodic:.3}");
        if iid_losses > 0.0 && (iid_ratio - 1.0).abs() > 0.15 {
            misses.push(format!("scalable i.i.d. p={p:e}: {iid_ratio:.3}"));
        }
    }
    assert!(misses.is_empty(), "outside 15 %: {misses:?}");
}
