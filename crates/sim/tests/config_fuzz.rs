//! Fuzzing of the engine's configuration: random documents shaped like a
//! `SimConfig` (a small valid scenario with random queue disciplines, loss
//! models, distributions, dynamics and traffic grafted in, then random values
//! of random types put in random fields, keys dropped and keys added) go
//! through the engine's front door: `serde_json` reads them, `validate_with`
//! checks them and, when they are valid, a run cut short (duration, rate and
//! traffic capped so that a case takes milliseconds) simulates them. Nothing
//! may panic, and every `ConfigError` must name a field of the document (or a
//! field of a table the document holds, for a value the engine derived).
//!
//! 500 cases by default; `PROPTEST_CASES=2000 cargo test --release
//! -p ccarena-sim --test config_fuzz` runs more (docs/architecture.md, "Fuzzing").

mod common;

use ccarena_sim::net::queue::QueueLimit;
use ccarena_sim::units::{Dur, Rate};
use ccarena_sim::{ConfigError, SimConfig};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{json, Value};

/// A valid two-flow scenario in the engine's JSON form.
fn base() -> Value {
    let cfg = common::scenario(10, QueueLimit::Packets(50), common::iid(0.0), vec![common::flow("cubic", 20), common::flow("reno", 40)], 1, 0, 1);
    serde_json::to_value(cfg).expect("serialises")
}

/// Pieces of valid (or nearly valid) configuration and where they go.
fn grafts() -> Vec<(&'static str, Value)> {
    let constant = |v: f64| json!({"distribution": "constant", "value": v});
    vec![
        ("network.qdisc", json!({"kind": "red"})),
        ("network.qdisc", json!({"kind": "red", "min": {"packets": 5}, "max": {"packets": 15}, "burst": 7})),
        ("network.qdisc", json!({"kind": "red", "min": {"bytes": 3000}, "ecn": true, "gentle": true})),
        ("network.qdisc", json!({"kind": "codel", "target": 5_000_000, "interval": 100_000_000})),
        ("network.qdisc", json!({"kind": "fq_codel", "flows": 16, "quantum": 1514})),
        ("network.qdisc", json!({"kind": "pie", "alpha": 0.125, "beta": 1.25})),
        ("network.buffer", json!({"bytes": 10_000})),
        ("network.buffer", json!({"packets": 1})),
        ("network.loss", json!({"model": "periodic", "p": 0.01})),
        ("network.loss", json!({"model": "gilbert_elliott", "p_gb": 0.01, "p_bg": 0.3, "loss_good": 0.0, "loss_bad": 0.5})),
        ("network.loss", json!({"model": "scheduled", "at_ns": [100_000_000, 200_000_000]})),
        ("network.loss", json!({"model": "outages", "windows_ns": [[100_000_000, 150_000_000]]})),
        ("network.access_rate", json!(100_000_000)),
        ("network.reverse_bottleneck", json!(true)),
        ("network.dynamics", json!([{"kind": "step", "at": 100_000_000, "set": {"rate": 5_000_000}}])),
        ("network.dynamics", json!([{"kind": "pulse", "period": 50_000_000, "high": {"delay": 10_000_000}, "low": {"delay": 1_000_000}}])),
        ("flows.0.rtt", json!({"distribution": "uniform", "min": 10_000_000.0, "max": 30_000_000.0})),
        ("flows.0.rtt", json!({"distribution": "normal", "mean": 20_000_000.0, "sd": 5_000_000.0, "min": 1_000_000.0})),
        ("flows.1.rtt", json!({"distribution": "exponential", "mean": 20_000_000.0})),
        ("flows.1.size", json!(100_000)),
        ("flows.1.cca", json!("bbr")),
        ("flows.0.jitter", json!({"jitter": 1_000_000, "distribution": "normal", "reorder": false})),
        ("flows.0.direction", json!("reverse")),
        (
            "web",
            json!([{"load": 2_000_000, "sizes": constant(20_000.0), "rtt": constant(20_000_000.0), "cca": "cubic", "start": 0}]),
        ),
        ("udp", json!([{"rate": 1_000_000, "packet_bytes": 1000, "rtt": 20_000_000}])),
        (
            "udp",
            json!([{"rate": 1_000_000, "packet_bytes": 500, "rtt": 20_000_000,
                    "pattern": {"kind": "on_off", "on": constant(1e7), "off": constant(1e7)}}]),
        ),
    ]
}

/// Any JSON value, leaning to the awkward: huge, negative and fractional
/// numbers, the names the engine knows, nested tables.
fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop_oneof![Just(0u64), Just(1), Just(u32::MAX as u64), Just(u64::MAX), Just(1 << 53)].prop_map(Value::from),
        any::<f64>().prop_map(|x| json!(x)), // NaN and infinities become null, as JSON has none
        prop_oneof![Just(-1.0f64), Just(0.5), Just(1e-300), Just(1e300), Just(-0.0), Just(f64::MAX)].prop_map(|x| json!(x)),
        prop_oneof![
            Just("cubic"), Just("reno"), Just("bbr"), Just("red"), Just("packets"), Just("bytes"),
            Just("constant"), Just("uniform"), Just(""), Just("\u{0}é∞")
        ]
        .prop_map(Value::from),
        "[a-z_]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A number of any size and sign (most fields are numbers: a value of the
/// right type reaches the checks behind the reader).
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        2 => any::<u64>().prop_map(Value::from),
        4 => (0u64..1_000_000_000).prop_map(Value::from),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<f64>().prop_map(|x| json!(x)),
        1 => (0.0f64..1.0).prop_map(|x| json!(x)),
        2 => prop_oneof![Just(0u64), Just(1), Just(u32::MAX as u64), Just(u64::MAX), Just(1 << 63)].prop_map(Value::from),
    ]
}

/// One change to the document.
#[derive(Clone, Debug)]
enum Edit {
    /// The value at the n-th path (of all paths, modulo their count) becomes this.
    Set(usize, Value),
    /// The n-th path's key (or array entry) goes.
    Drop(usize),
    /// A key the engine does not know, in the n-th table.
    Extra(usize, String, Value),
    /// The number at the n-th path scaled (0, negative, huge).
    Scale(usize, f64),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        1 => (any::<usize>(), any_value()).prop_map(|(i, v)| Edit::Set(i, v)),
        3 => (any::<usize>(), number()).prop_map(|(i, v)| Edit::Set(i, v)),
        1 => any::<usize>().prop_map(Edit::Drop),
        1 => (any::<usize>(), "[a-z_]{1,10}", any_value()).prop_map(|(i, k, v)| Edit::Extra(i, k, v)),
        3 => (any::<usize>(), prop_oneof![Just(0.0), Just(-1.0), Just(1e-9), Just(1e9), Just(1e20), Just(0.5)])
            .prop_map(|(i, s)| Edit::Scale(i, s)),
    ]
}

/// Paths of every value in the document, as JSON pointers.
fn paths(v: &Value, here: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                let p = format!("{here}/{k}");
                out.push(p.clone());
                paths(c, p, out);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                let p = format!("{here}/{i}");
                out.push(p.clone());
                paths(c, p, out);
            }
        }
        _ => {}
    }
}

fn graft(doc: &mut Value, at: &str, v: Value) {
    let pointer = format!("/{}", at.replace('.', "/"));
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    if let Some(Value::Object(m)) = doc.pointer_mut(parent) {
        m.insert(key.to_string(), v);
    } else if let Some(slot) = doc.pointer_mut(&pointer) {
        *slot = v;
    }
}

fn apply(doc: &mut Value, e: &Edit) {
    let mut all = Vec::new();
    paths(doc, String::new(), &mut all);
    if all.is_empty() {
        return;
    }
    let pick = |i: usize| all[i % all.len()].clone();
    match e {
        Edit::Set(i, v) => *doc.pointer_mut(&pick(*i)).unwrap() = v.clone(),
        Edit::Drop(i) => {
            let p = pick(*i);
            let (parent, key) = p.rsplit_once('/').unwrap();
            match doc.pointer_mut(parent) {
                Some(Value::Object(m)) => {
                    m.remove(key);
                }
                Some(Value::Array(a)) => {
                    a.remove(key.parse::<usize>().unwrap());
                }
                _ => {}
            }
        }
        Edit::Extra(i, k, v) => {
            let p = pick(*i);
            let (parent, _) = p.rsplit_once('/').unwrap();
            if let Some(Value::Object(m)) = doc.pointer_mut(parent) {
                m.insert(k.clone(), v.clone());
            }
        }
        Edit::Scale(i, s) => {
            let slot = doc.pointer_mut(&pick(*i)).unwrap();
            if let Some(x) = slot.as_f64() {
                let y = x * s;
                *slot = if slot.is_u64() && (0.0..1.8e19).contains(&y) { json!(y as u64) } else { json!(y) };
            }
        }
    }
}

/// Whether the engine's field path (`flows[1].tcp.mss`) names a value in the
/// document or, for a value the engine derived or defaulted, a key of a table
/// the document holds.
fn names_document_field(doc: &Value, field: &str) -> bool {
    let pointer: String = field.split('.').flat_map(|part| {
        let mut out = Vec::new();
        let mut rest = part;
        if let Some(i) = rest.find('[') {
            out.push(rest[..i].to_string());
            rest = &rest[i..];
            for idx in rest.split('[').filter(|s| !s.is_empty()) {
                out.push(idx.trim_end_matches(']').to_string());
            }
        } else {
            out.push(rest.to_string());
        }
        out
    }).map(|s| format!("/{s}")).collect();
    if doc.pointer(&pointer).is_some() {
        return true;
    }
    let parent = pointer.rsplit_once('/').map_or("", |(p, _)| p);
    // serde also reads a table written as a list of its values in field
    // order (`"tcp": [1448]`): the field then has a name but no key.
    matches!(doc.pointer(parent), Some(Value::Object(_) | Value::Array(_)))
}

/// A run of the configuration cut short: at most 0.3 s simulated, 50 Mbps,
/// four flows, one web generator and two UDP sources, samples at least 10 ms
/// apart. None when the cut configuration is not valid (e.g. its warmup is
/// now past its end) or its dynamics or trace run faster than the cap.
fn cheap(mut cfg: SimConfig) -> Option<SimConfig> {
    let cap = Rate::from_mbps(50);
    cfg.run.duration = Dur(cfg.run.duration.0.min(Dur::from_ms(300).0));
    cfg.run.sample_interval = Dur(cfg.run.sample_interval.0.max(Dur::from_ms(10).0));
    cfg.network.bottleneck_rate = Rate(cfg.network.bottleneck_rate.0.min(cap.0));
    cfg.flows.truncate(4);
    cfg.web.truncate(1);
    cfg.udp.truncate(2);
    for w in &mut cfg.web {
        w.load = Rate(w.load.0.min(Rate::from_mbps(5).0));
    }
    for u in &mut cfg.udp {
        u.rate = Rate(u.rate.0.min(cap.0));
    }
    if cfg.network.dynamics.iter().any(|d| d.max_rate() > cap.0) || cfg.network.trace.is_some() {
        return None;
    }
    cfg.validate_with(&[]).ok().map(|_| cfg)
}

fn check(doc: &Value, text: &str) -> Result<(), TestCaseError> {
    let cfg: SimConfig = match serde_json::from_str(text) {
        Ok(c) => c,
        Err(_) => return Ok(()), // the bindings report these as the "engine config" (or the path where reading stopped)
    };
    match cfg.validate_with(&[]) {
        Err(ConfigError { field, message }) => {
            prop_assert!(!message.is_empty() && !message.contains('\n'), "{field}: {message:?}");
            prop_assert!(names_document_field(doc, &field), "error names {field:?}, not in the document: {message}\n{text}");
        }
        Ok(()) => {
            if let Some(cut) = cheap(cfg) {
                // A case is milliseconds; seconds would be a hang of the engine.
                // The run goes on a thread of its own so that a hang fails the
                // case (naming the document) instead of stalling the suite.
                let (tx, rx) = std::sync::mpsc::channel();
                std::thread::spawn(move || {
                    let _ = tx.send(ccarena_sim::run(cut).map(|_| ()).map_err(|e| e.to_string()));
                });
                match rx.recv_timeout(std::time::Duration::from_secs(10)) {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => prop_assert!(false, "validated, then refused by the run: {e}\n{text}"),
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        prop_assert!(false, "a capped run took over 10 s\n{text}")
                    }
                    // The run panicked: its thread's message is already on stderr.
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => prop_assert!(false, "the run panicked\n{text}"),
                }
            }
        }
    }
    Ok(())
}

/// 500 cases, or `PROPTEST_CASES`.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(500)
}

proptest! {
    #![proptest_config(Config { cases: cases(), failure_persistence: None, ..Config::default() })]

    #[test]
    fn random_configs_never_panic_and_errors_name_their_field(
        picks in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        edits in prop::collection::vec(edit(), 0..5),
        cut in prop::option::weighted(0.05, any::<prop::sample::Index>()),
    ) {
        let mut doc = base();
        let pieces = grafts();
        for p in &picks {
            let (at, v) = &pieces[p.index(pieces.len())];
            graft(&mut doc, at, v.clone());
        }
        for e in &edits {
            apply(&mut doc, e);
        }
        let mut text = doc.to_string();
        if let Some(c) = cut {
            text.truncate(c.index(text.len() + 1));
            while !text.is_char_boundary(text.len()) {
                text.pop();
            }
        }
        check(&doc, &text)?;
    }
}
