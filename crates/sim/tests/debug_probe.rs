mod common;
use ccarena_sim::net::queue::QueueLimit;
use common::*;
#[test]
fn probe() {
    let mut f = flow("reno", 50);
    f.tcp.sack = false;
    let mut cfg = scenario(50, QueueLimit::Bytes(10_000_000), iid(0.0002), vec![f], 120, 5, 3);
    cfg.run.sample_interval = ccarena_sim::units::Dur::from_ms(10);
    let r = run(cfg);
    let s = &r.flow_series[0];
    let mut last_rto_seen = 0;
    for i in 0..s.t_ns.len() { if s.t_ns[i] < 12_000_000_000 && (s.ca_state[i] != 0 || i % 50 == 0) {
        eprintln!("t={:.2} cwnd={} ssth={} inf={} srtt={} st={} thr={:.1} rtx={} q={}", s.t_ns[i] as f64/1e9, s.cwnd[i], s.ssthresh[i], s.in_flight[i], s.srtt_us[i], s.ca_state[i], s.throughput_bps[i] as f64/1e6, s.retransmissions[i], r.queue_series.backlog_packets[i]); } 
      if s.ca_state[i] == 4 && last_rto_seen == 0 { last_rto_seen = 1; eprintln!("LOSS STATE at {}", s.t_ns[i]); }
    }
}
