//! End-to-end checks of FAST TCP: one flow fills a link and keeps about alpha
//! packets of its own in the bottleneck queue; two flows share the link equally
//! and keep about 2 alpha queued, whatever the buffer beyond that.

mod common;
use ccarena_sim::cc::ParamValue;
use ccarena_sim::config::FlowConfig;
use ccarena_sim::net::queue::QueueLimit;
use ccarena_sim::units::Dur;
use ccarena_sim::RunResult;
use common::*;

fn capacity_bps(rate_mbps: u64) -> f64 {
    rate_mbps as f64 * 1e6 * 1448.0 / 1500.0
}

fn fast_flow(rtt_ms: u64, alpha: Option<i64>) -> FlowConfig {
    let mut f = flow("fast", rtt_ms);
    if let Some(a) = alpha {
        f.cca_params.insert("alpha".into(), ParamValue::Int(a));
    }
    f
}

/// Median and 5th/95th percentiles of the bottleneck backlog, sampled every
/// millisecond after `warmup`.
fn backlog(r: &RunResult, warmup_s: u64) -> (u32, u32, u32) {
    let q = &r.queue_series;
    let from = q.t_ns.iter().position(|&t| t >= warmup_s * 1_000_000_000).unwrap();
    let mut b: Vec<u32> = q.backlog_packets[from..].to_vec();
    b.sort_unstable();
    (b[b.len() / 20], b[b.len() / 2], b[b.len() * 19 / 20])
}

struct Outcome {
    goodputs: Vec<f64>,
    queue: (u32, u32, u32),
    drops: u64,
}

fn run_fast(flows: Vec<FlowConfig>, rate_mbps: u64, buffer: u64, secs: u64, warmup: u64) -> Outcome {
    let n = flows.len();
    let mut cfg = scenario(rate_mbps, QueueLimit::Bytes(buffer), iid(0.0), flows, secs, warmup, 1);
    cfg.run.sample_interval = Dur::from_ms(1);
    let r = run(cfg);
    let goodputs: Vec<f64> = (0..n).map(|i| goodput_bps(&r, i)).collect();
    let o = Outcome { goodputs, queue: backlog(&r, warmup), drops: r.link.drops_queue };
    let u = o.goodputs.iter().sum::<f64>() / capacity_bps(rate_mbps);
    eprintln!("{n} fast, {rate_mbps} Mbps, buffer {buffer} B: backlog p5/p50/p95 {:?}, utilisation {u:.4}, shares {:?}, drops {}",
        o.queue, o.goodputs.iter().map(|g| g / capacity_bps(rate_mbps)).collect::<Vec<_>>(), o.drops);
    o
}

/// 100 Mbps with a 10 MB buffer (60 BDPs at 20 ms): the link is full, the
/// queue stays within one packet of alpha (200 by default, 50 when set), no
/// loss, at 20 and 100 ms. (Measured: p5/p50/p95 199/199/200 for alpha 200,
/// 50/51/52 and 49/50/51 for alpha 50 at 20 and 100 ms.)
#[test]
fn one_flow_fills_the_link_and_keeps_alpha_packets_queued() {
    for (alpha, rtt) in [(None, 20u64), (Some(50), 20), (Some(50), 100)] {
        let o = run_fast(vec![fast_flow(rtt, alpha)], 100, 10_000_000, 40, 20);
        let a = alpha.unwrap_or(200) as u32;
        let u = o.goodputs[0] / capacity_bps(100);
        assert!(u >= 0.99, "alpha {a}, {rtt} ms: utilisation {u:.4}");
        assert_eq!(o.drops, 0);
        let (p5, p50, p95) = o.queue;
        assert!(p5 + 2 >= a && p95 <= a + 3 && p50.abs_diff(a) <= 2, "alpha {a}, {rtt} ms: backlog {:?}", o.queue);
    }
}

/// Two flows keep 2 alpha queued and split the link evenly, also with
/// different RTTs (FAST's equilibrium does not depend on the RTT). (Measured:
/// shares 0.5001/0.4999 with a backlog of 100 for alpha 50 each; 0.5014/0.4986
/// with 400 for alpha 200 at 20 and 40 ms.)
#[test]
fn two_flows_share_the_link_and_keep_two_alpha_queued() {
    for (rtts, alpha) in [((20, 20), Some(50)), ((20, 40), None)] {
        let o = run_fast(vec![fast_flow(rtts.0, alpha), fast_flow(rtts.1, alpha)], 100, 10_000_000, 60, 30);
        let a = 2 * alpha.unwrap_or(200) as u32;
        let u = o.goodputs.iter().sum::<f64>() / capacity_bps(100);
        assert!(u >= 0.99, "{rtts:?}: utilisation {u:.4}");
        let share = o.goodputs[0] / (o.goodputs[0] + o.goodputs[1]);
        assert!((0.48..=0.52).contains(&share), "{rtts:?}: share of flow 0 {share:.4}");
        assert_eq!(o.drops, 0);
        let (p5, p50, p95) = o.queue;
        assert!(p5 + 3 >= a && p95 <= a + 4 && p50.abs_diff(a) <= 2, "{rtts:?}: backlog {:?}", o.queue);
    }
}
