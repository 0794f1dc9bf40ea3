mod common;
use ccarena_sim::cc::ParamValue;
use ccarena_sim::net::queue::QueueLimit;
use ccarena_sim::units::Time;
use common::*;

fn rapid(rtt: u64, proto: bool, spread: f64, gain: f64) -> ccarena_sim::config::FlowConfig {
    let mut f = flow("rapid", rtt);
    f.cca_params.insert("probe_in_recovery".into(), ParamValue::Bool(!proto));
    f.cca_params.insert("rate_spread".into(), ParamValue::Float(spread));
    f.cca_params.insert("gain".into(), ParamValue::Float(gain));
    f
}

#[test]
fn probe() {
    for &(spread, gain) in &[(8.0, 1.0), (8.0, 0.5), (16.0, 0.5)] {
        let mut line = format!("spread {spread} gain {gain}:");
        let r = run(scenario(1000, QueueLimit::Bytes(bdp_bytes(1000, 10)), iid(0.0), vec![rapid(10, false, spread, gain)], 20, 5, 1));
        let c = &r.flows[0].counters;
        line += &format!(" single {:.0} Mbps loss {:.2}% |", goodput_bps(&r, 0) / 1e6, 100.0 * c.retransmissions as f64 / c.segments_sent as f64);
        for &proto in &[false, true] {
            for &(rtt, late) in &[(1u64, true), (10, true), (30, true), (10, false)] {
                let f0 = rapid(rtt, proto, spread, gain);
                let mut f1 = rapid(rtt, proto, spread, gain);
                if late { f1.start = Time::from_secs(10); }
                let r = run(scenario(1000, QueueLimit::Bytes(bdp_bytes(1000, rtt).max(300_000)), iid(0.0), vec![f0, f1], 40, 20, 1));
                let loss = (r.flows[0].counters.retransmissions + r.flows[1].counters.retransmissions) as f64 / (r.flows[0].counters.segments_sent + r.flows[1].counters.segments_sent) as f64;
                line += &format!(" {}{}{}: {:.0}/{:.0} ({:.1}%)", if proto {"P"} else {"F"}, rtt, if late {"L"} else {""}, goodput_bps(&r, 0) / 1e6, goodput_bps(&r, 1) / 1e6, loss * 100.0);
            }
        }
        eprintln!("{line}");
    }
}
