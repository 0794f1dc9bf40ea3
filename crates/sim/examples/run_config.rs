//! Runs an engine config read from standard input and prints a one-line timing
//! summary: a harness for profilers (perf, callgrind) that need a plain binary.
//! Produce a config with `ccarena` (e.g. `python -c "from ccarena.scenario import
//! load_scenario; print(load_scenario('bench').engine_json())"`).

use std::io::Read;
use std::time::Instant;

fn main() {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).expect("read stdin");
    let cfg: ccarena_sim::SimConfig = serde_json::from_str(&input).expect("engine config JSON");
    let sim_s = cfg.run.duration.as_secs_f64();
    let t = Instant::now();
    let r = ccarena_sim::run(cfg).expect("valid config");
    let wall = t.elapsed().as_secs_f64();
    println!(
        "simulated {sim_s} s in {wall:.3} s ({:.0}x), {} events ({:.1} M/s), {} data packets",
        sim_s / wall,
        r.events,
        r.events as f64 / wall / 1e6,
        r.data_packets_forwarded
    );
}
