//! The exported scenario schema against the engine's own reading of a
//! scenario: every field of every table is accepted with its default (serde
//! reads it, the declared checks pass) and, where a range is declared, a value
//! just outside it is rejected with an error naming that field. The values
//! tried are built from the export alone, as another reader of the schema
//! would build them.

use ccarena_sim::config::schema::{self, Json, Schema};
use ccarena_sim::config::{ConfigError, Startup};
use ccarena_sim::dist::Dist;
use ccarena_sim::net::delay_line::{JitterConfig, JitterShape};
use ccarena_sim::net::dynamics::{DynamicsConfig, PathSetting, WalkBounds, WalkProperty};
use ccarena_sim::net::loss::LossSpec;
use ccarena_sim::net::qdisc::QdiscConfig;
use ccarena_sim::net::trace::TraceConfig;
use ccarena_sim::tcp::TcpConfig;
use ccarena_sim::traffic::udp::{UdpConfig, UdpPattern};
use ccarena_sim::traffic::web::WebConfig;
use ccarena_sim::traffic::Direction;
use ccarena_sim::{FlowConfig, NetworkConfig, RunConfig, SimConfig};
use serde::de::DeserializeOwned;
use serde_json::json;
use std::collections::BTreeMap;

/// Reads a table of type `T` and runs its declared checks: Err(text) when
/// serde refuses it, Ok(result of the checks) otherwise.
type Reader = fn(Json) -> Result<Result<(), ConfigError>, String>;

fn read<T: Schema + DeserializeOwned>(v: Json) -> Result<Result<(), ConfigError>, String> {
    let t: T = serde_json::from_value(v).map_err(|e| e.to_string())?;
    Ok(t.check_fields())
}

fn readers() -> BTreeMap<&'static str, Reader> {
    let mut m: BTreeMap<&'static str, Reader> = BTreeMap::new();
    macro_rules! add {
        ($($t:ty),*) => {$( m.insert(<$t as Schema>::NAME, read::<$t>); )*};
    }
    add!(SimConfig, NetworkConfig, FlowConfig, RunConfig, TcpConfig, QdiscConfig, LossSpec, Dist, DynamicsConfig, PathSetting);
    add!(UdpConfig, UdpPattern, WebConfig, JitterConfig, TraceConfig, Direction, JitterShape, WalkProperty, WalkBounds);
    add!(ccarena_sim::host::HostConfig, ccarena_sim::host::tso::DeferRule, ccarena_sim::config::RouterKind);
    add!(Startup, ccarena_sim::net::stall::StallConfig);
    m
}

fn integral(field: &Json) -> bool {
    matches!(field["kind"].as_str().unwrap(), "int" | "bytes" | "duration_ns" | "duration_us" | "rate_bps")
}

/// A value the field's declared range allows, for a field whose default is unset.
fn scalar_example(field: &Json) -> Json {
    if let Some(first) = field.get("one_of").and_then(|v| v.get(0)) {
        return first.clone();
    }
    let (min, max) = (field.get("min").and_then(Json::as_f64), field.get("max").and_then(Json::as_f64));
    let x = match (min, max) {
        (Some(lo), Some(hi)) if integral(field) => lo.max(1.0).min(hi),
        (Some(lo), Some(hi)) => (lo + hi) / 2.0,
        (Some(lo), None) => lo.max(1.0),
        _ => 1.0,
    };
    if integral(field) {
        json!(x as u64)
    } else {
        json!(x)
    }
}

/// A value of the field's kind: its default when it has one, else one the
/// schema allows (for an optional field only if `fill`).
fn example(tables: &Json, field: &Json, fill: bool) -> Json {
    if !field["default"].is_null() || (!fill && field["required"] == json!(false)) {
        return field["default"].clone();
    }
    let one = match field["kind"].as_str().unwrap() {
        "bool" => json!(false),
        "string" => json!("reno"),
        "enum" => json!(field["values"][0]),
        "queue_limit" => json!({"packets": 100}),
        "cca_params" => json!({}),
        "table" => table_example(tables, field["table"].as_str().unwrap(), None, true),
        _ if field.get("pair").is_some() => json!([1, 2]),
        _ => scalar_example(field),
    };
    if field.get("list").is_some() {
        json!([one])
    } else {
        one
    }
}

/// A table with every field at its example value (of `variant`, or the first
/// one); optional fields without a default are set only if `fill`.
fn table_example(tables: &Json, name: &str, variant: Option<&str>, fill: bool) -> Json {
    let table = &tables[name];
    let mut obj = serde_json::Map::new();
    let fields = match table.get("tag") {
        Some(tag) => {
            let variants = table["variants"].as_object().unwrap();
            let v = variant.unwrap_or_else(|| variants.keys().next().unwrap());
            obj.insert(tag.as_str().unwrap().to_string(), json!(v));
            &variants[v]["fields"]
        }
        None => &table["fields"],
    };
    for (fname, field) in fields.as_object().unwrap() {
        obj.insert(fname.clone(), example(tables, field, fill));
    }
    Json::Object(obj)
}

/// Values just outside the declared range that the field's type can still hold.
fn outside(field: &Json) -> Vec<Json> {
    let mut out = Vec::new();
    let xmin = field.get("exclusive_min").is_some();
    let xmax = field.get("exclusive_max").is_some();
    if integral(field) {
        let int = |k: &str| field.get(k).and_then(Json::as_i64);
        if let Some(lo) = int("min") {
            let v = if xmin { lo } else { lo - 1 };
            if v >= 0 {
                out.push(json!(v));
            }
        }
        if let Some(hi) = int("max") {
            out.push(json!(if xmax { hi } else { hi + 1 }));
        }
        if let Some(list) = field.get("one_of").and_then(Json::as_array) {
            out.push(json!(list[0].as_i64().unwrap() + 1));
        }
    } else {
        let float = |k: &str| field.get(k).and_then(Json::as_f64);
        if let Some(lo) = float("min") {
            out.push(json!(if xmin { lo } else { lo.next_down() }));
        }
        if let Some(hi) = float("max") {
            out.push(json!(if xmax { hi } else { hi.next_up() }));
        }
    }
    out
}

#[test]
fn every_field_takes_its_default_and_refuses_values_just_outside_its_range() {
    let schema = schema::schema();
    let tables = &schema["tables"];
    let readers = readers();
    let names: Vec<&str> = tables.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(names, readers.keys().copied().collect::<Vec<_>>(), "every exported table is tried here");
    let (mut accepted, mut refused) = (0, 0);
    for (name, table) in tables.as_object().unwrap() {
        let read = readers[name.as_str()];
        let variants: Vec<Option<&str>> = match table.get("variants") {
            Some(v) => v.as_object().unwrap().keys().map(|k| Some(k.as_str())).collect(),
            None if table.get("fields").is_some() => vec![None],
            None => continue,
        };
        for variant in variants {
            // Optional fields set where the checks across fields allow it.
            let filled = table_example(tables, name, variant, true);
            let base = if matches!(read(filled.clone()), Ok(Ok(()))) { filled } else { table_example(tables, name, variant, false) };
            let at = format!("{name}{}", variant.map_or(String::new(), |v| format!(" ({v})")));
            let fields = match variant {
                Some(v) => &table["variants"][v]["fields"],
                None => &table["fields"],
            };
            for (fname, field) in fields.as_object().unwrap() {
                assert!(!field["doc"].as_str().unwrap().is_empty(), "{at}.{fname} has a doc");
                let mut with_default = base.clone();
                with_default[fname] = field["default"].clone();
                if field["required"] == json!(false) {
                    match read(with_default) {
                        Ok(Ok(())) => accepted += 1,
                        other => panic!("{at}.{fname}: its default {} is refused: {other:?}", field["default"]),
                    }
                }
                let mut bads = outside(field);
                if let Some(other) = field.get("min_field").and_then(Json::as_str) {
                    bads.push(json!(base[other].as_u64().unwrap() - 1));
                }
                for bad in bads {
                    let mut v = base.clone();
                    v[fname] = bad.clone();
                    match read(v) {
                        Ok(Err(e)) => {
                            assert_eq!(e.field, *fname, "{at}: {bad} refused for the wrong field: {e}");
                            assert!(e.message.starts_with(field["rule"].as_str().unwrap()), "{at}: {e}");
                            refused += 1;
                        }
                        other => panic!("{at}.{fname} = {bad} is not refused by the declared range: {other:?}"),
                    }
                }
            }
        }
    }
    eprintln!("{accepted} defaults accepted, {refused} values outside a range refused");
    assert!(accepted > 80 && refused > 40, "{accepted} / {refused}");
}

#[test]
fn the_export_carries_kinds_ranges_defaults_and_units() {
    let schema = schema::schema();
    assert_eq!(schema["version"], 1);
    assert_eq!(schema["root"], "config");
    let t = &schema["tables"];
    let mss = &t["tcp"]["fields"]["mss"];
    assert_eq!((&mss["kind"], &mss["min"], &mss["max"], &mss["default"], &mss["unit"]), (&json!("int"), &json!(64), &json!(65000), &json!(1448), &json!("bytes")));
    assert_eq!(t["tcp"]["fields"]["hz"]["one_of"], json!([100, 250, 300, 1000]));
    assert_eq!(t["tcp"]["fields"]["rto_min_us"]["kind"], "duration_us");
    assert_eq!(t["run"]["fields"]["duration"]["required"], true);
    assert_eq!(t["run"]["fields"]["sample_interval"]["default"], 100_000_000);
    assert_eq!(t["qdisc"]["tag"], "kind");
    let max_p = &t["qdisc"]["variants"]["red"]["fields"]["max_p"];
    assert_eq!((&max_p["min"], &max_p["exclusive_min"], &max_p["max"], &max_p["default"]), (&json!(0.0), &json!(true), &json!(1.0), &json!(0.02)));
    assert_eq!(max_p["rule"], "must be in (0, 1]");
    assert_eq!(t["qdisc"]["variants"]["fq_codel"]["fields"]["quantum"]["min"], 256);
    assert_eq!(t["loss"]["variants"]["gilbert_elliott"]["fields"]["p_gb"]["rule"], "must be a probability in [0, 1]");
    assert_eq!(t["web"]["fields"]["rtt"]["default"], json!({"distribution": "exponential", "mean": 132e6}));
    assert_eq!(t["flow"]["fields"]["direction"]["values"], json!(["forward", "reverse"]));
    assert_eq!(t["network"]["fields"]["dynamics"]["list"], true);
    assert_eq!(t["loss"]["variants"]["outages"]["fields"]["windows_ns"]["pair"], true);
    assert_eq!((&t["tcp"]["fields"]["sndbuf"]["min_field"], &t["tcp"]["fields"]["sndbuf"]["rule"]), (&json!("mss"), &json!("must be at least mss")));
    assert_eq!(t["tcp"]["fields"]["initial_cwnd"]["max"], i32::MAX);
    assert_eq!(t["run"]["fields"]["seed"]["default"], 1);
}

#[test]
fn errors_of_nested_tables_name_the_whole_path() {
    let cfg: SimConfig = serde_json::from_value(json!({
        "network": {"bottleneck_rate": 1_000_000, "buffer": {"packets": 10},
                    "dynamics": [{"kind": "step", "at": 0, "set": {"rate": 1}}, {"kind": "pulse", "period": 1, "duty": 1.0, "high": {"rate": 1}, "low": {"rate": 2}}]},
        "flows": [{"cca": "reno", "rtt": 1_000_000}],
        "run": {"duration": 1_000_000_000},
    }))
    .unwrap();
    let e = cfg.validate().unwrap_err();
    assert_eq!(e.to_string(), "network.dynamics[1].duty: must be in (0, 1), got 1");
}
