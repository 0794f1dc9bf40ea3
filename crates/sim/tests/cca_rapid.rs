//! RAPID end to end on a 1 Gbps path (the UNC prototype's testbed speed): one
//! flow fills the link; two flows that start together share it with the fixed
//! behaviour (p-streams also in Recovery/Loss); with the Linux prototype's
//! behaviour (no p-streams in Recovery/Loss) a late joiner can starve, as one of
//! two flows did on the UNC testbed (736 vs 2.84 Mbps). What our reconstruction
//! does *not* achieve (late joiners also starve with the fixed behaviour in some
//! seeds at 30 ms; pairs at 200 us are unfair) is recorded in docs/fidelity.md.

mod common;
use ccarena_sim::cc::ParamValue;
use ccarena_sim::net::queue::QueueLimit;
use ccarena_sim::units::{Dur, Time};
use common::*;

fn rapid(rtt: Dur, prototype: bool) -> ccarena_sim::config::FlowConfig {
    let mut f = flow("rapid", 1);
    f.rtt = rtt.into();
    f.cca_params.insert("probe_in_recovery".into(), ParamValue::Bool(!prototype));
    f
}

/// min/max throughput ratio of two RAPID flows; the second starts `late` s later.
fn pair(rtt: Dur, prototype: bool, late: u64, seed: u64) -> f64 {
    let f0 = rapid(rtt, prototype);
    let mut f1 = rapid(rtt, prototype);
    f1.start = Time::from_secs(late);
    let buffer = (125_000_000 * rtt.0 / 1_000_000_000).max(500_000);
    let mut cfg = scenario(1000, QueueLimit::Bytes(buffer), iid(0.0), vec![f0, f1], 30 + late, 10 + late, seed);
    cfg.run.start_jitter = Dur::from_ms(10);
    let r = run(cfg);
    let (a, b) = (goodput_bps(&r, 0), goodput_bps(&r, 1));
    a.min(b) / a.max(b)
}

#[test]
fn one_flow_fills_a_gigabit_link() {
    for rtt_ms in [1u64, 10, 30] {
        let r = run(scenario(1000, QueueLimit::Bytes(bdp_bytes(1000, rtt_ms).max(500_000)), iid(0.0), vec![rapid(Dur::from_ms(rtt_ms), false)], 20, 5, 1));
        let u = goodput_bps(&r, 0) / (1e9 * 1448.0 / 1500.0);
        let c = &r.flows[0].counters;
        eprintln!("rtt {rtt_ms} ms: utilisation {u:.3}, retransmitted {:.2} %", 100.0 * c.retransmissions as f64 / c.segments_sent as f64);
        assert!(u >= 0.95, "rtt {rtt_ms} ms: {u:.3}");
    }
}

#[test]
fn two_flows_starting_together_share_with_the_fixed_behaviour() {
    for rtt in [Dur::from_ms(10), Dur::from_ms(30)] {
        for seed in 1..=3 {
            let ratio = pair(rtt, false, 0, seed);
            eprintln!("fixed, rtt {} ms, seed {seed}: ratio {ratio:.2}", rtt.0 / 1_000_000);
            assert!(ratio >= 0.8, "rtt {rtt:?} seed {seed}: ratio {ratio:.2}");
        }
    }
}

#[test]
fn the_prototype_behaviour_can_starve_a_late_joiner() {
    let ratios: Vec<f64> = (1..=6).map(|seed| pair(Dur::from_ms(30), true, 10, seed)).collect();
    eprintln!("prototype, 30 ms, second flow 10 s late: {ratios:.2?}");
    assert!(ratios.iter().any(|&r| r < 0.1), "no starvation in {ratios:?}");
}
