//! The scenario schema the engine reads, declared once per field and exported.
//! Each table of the engine's input (`TcpConfig`, `QdiscConfig`, `Dist`, ...)
//! derives `Schema`: the field's type gives its kind, its `///` comment the
//! doc, serde's attributes whether it is required and its default, and a
//! `#[schema(...)]` attribute its allowed range and unit. The same declaration
//! gives the range check (`Schema::check_fields`, run first by
//! `SimConfig::validate_with`) and the export (`schema()`, which Python reads
//! instead of keeping tables of its own), so the two cannot drift apart.
//! Checks across fields (warmup < duration, RED's min < max, ...) stay
//! written out in the tables' `validate` functions.

use super::{ConfigError, SimConfig};
use crate::cc::ParamValue;
use crate::net::queue::QueueLimit;
use crate::units::{Dur, Rate, Time};
use serde::Serialize;
use serde_json::{json, Map};
use std::collections::BTreeMap;

pub use ccarena_schema_derive::Schema;
pub use serde_json::Value as Json;

/// Version of the export's layout (not of the engine): bumped when a reader
/// of `schema()` would have to change.
pub const SCHEMA_VERSION: u32 = 1;

/// A table of the engine's input whose fields are declared with
/// `#[derive(Schema)]`.
pub trait Schema {
    /// The table's name in the export (`tcp`, `qdisc`).
    const NAME: &'static str;
    /// The table's fields (or variants, or values) as exported.
    fn table() -> Table;
    /// Checks every declared range, in nested tables too; errors name the
    /// field relative to this table.
    fn check_fields(&self) -> Result<(), ConfigError>;
    /// Adds the tables the fields refer to.
    fn collect_fields(tables: &mut Tables);
}

/// What a Rust type is in the schema. Tables implement it through the derive.
pub trait FieldType {
    fn describe() -> TypeInfo;
    /// Adds the table the type is (or refers to) and the tables it refers to.
    fn collect(_tables: &mut Tables) {}
    /// Checks the declared ranges inside a value of a table type.
    fn check_nested(&self) -> Result<(), ConfigError> {
        Ok(())
    }
}

/// The kind of value a field holds: `int`, `float`, `bool`, `string`,
/// `duration_ns`, `duration_us`, `bytes`, `rate_bps`, `enum` (one of
/// `values`), `queue_limit` (`{"bytes": n}` or `{"packets": n}`),
/// `cca_params` (name -> bool or number, checked by the algorithm's catalogue
/// entry) or `table` (the table `table`); `list` for a list of such values,
/// `pair` for a list of [start, end] pairs.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeInfo {
    pub kind: &'static str,
    pub table: Option<&'static str>,
    pub values: &'static [&'static str],
    pub list: bool,
    pub pair: bool,
}

impl TypeInfo {
    pub const fn of(kind: &'static str) -> TypeInfo {
        TypeInfo { kind, table: None, values: &[], list: false, pair: false }
    }

    pub const fn table(name: &'static str) -> TypeInfo {
        TypeInfo { table: Some(name), ..TypeInfo::of("table") }
    }

    pub const fn values(name: &'static str, values: &'static [&'static str]) -> TypeInfo {
        TypeInfo { table: Some(name), values, ..TypeInfo::of("enum") }
    }

    /// The same shape holding another kind (an integer that counts bytes).
    pub fn with_kind(self, kind: &'static str) -> TypeInfo {
        TypeInfo { kind, ..self }
    }

    /// Kinds whose values are whole numbers.
    fn integral(&self) -> bool {
        matches!(self.kind, "int" | "bytes" | "duration_ns" | "duration_us" | "rate_bps")
    }
}

/// Allowed values of a number: bounds (inclusive unless marked exclusive)
/// and/or a list.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Range {
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub exclusive_min: bool,
    pub exclusive_max: bool,
    pub one_of: &'static [f64],
}

/// A number read from a field, to check against its range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Num {
    Int(u64),
    Float(f64),
}

impl Num {
    fn value(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(x) => x,
        }
    }
}

impl std::fmt::Display for Num {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Num::Int(i) => write!(f, "{i}"),
            Num::Float(x) => write!(f, "{x}"),
        }
    }
}

impl Range {
    pub fn is_empty(&self) -> bool {
        self.min.is_none() && self.max.is_none() && self.one_of.is_empty()
    }

    fn positive_only(&self) -> bool {
        self.min == Some(0.0) && self.exclusive_min && self.max.is_none() && self.one_of.is_empty()
    }

    /// What the range allows, as the start of an error message: "must be in
    /// 64..65000 bytes", "must be positive", "must be in (0, 1]".
    pub fn rule(&self, float: bool, unit: Option<&str>) -> String {
        let unit_words = unit.map_or(String::new(), |u| format!(" {u}"));
        if !self.one_of.is_empty() {
            let list: Vec<String> = self.one_of.iter().map(|x| x.to_string()).collect();
            return format!("must be one of {}", list.join(", "));
        }
        if self.positive_only() {
            return "must be positive".into();
        }
        match (self.min, self.max) {
            (Some(lo), Some(hi)) if !float && !self.exclusive_min && !self.exclusive_max => {
                format!("must be in {lo}..{hi}{unit_words}")
            }
            (Some(0.0), Some(1.0)) if !self.exclusive_min && !self.exclusive_max => "must be a probability in [0, 1]".into(),
            (Some(lo), Some(hi)) => {
                let open = if self.exclusive_min { "(" } else { "[" };
                let close = if self.exclusive_max { ")" } else { "]" };
                let unit = unit.map_or(String::new(), |u| format!(" ({u})"));
                format!("must be in {open}{lo}, {hi}{close}{unit}")
            }
            (Some(lo), None) if self.exclusive_min => format!("must be above {lo}{unit_words}"),
            (Some(lo), None) => format!("must be at least {lo}{unit_words}"),
            (None, Some(hi)) if self.exclusive_max => format!("must be below {hi}{unit_words}"),
            (None, Some(hi)) => format!("must be at most {hi}{unit_words}"),
            (None, None) => "may be anything".into(),
        }
    }

    /// The error message for `v`, or None when `v` is allowed. A float must
    /// also be finite. The value is left out where it says nothing ("must be
    /// positive" of an unsigned integer: it was 0).
    pub fn violation(&self, v: Num, unit: Option<&str>) -> Option<String> {
        let x = v.value();
        let float = matches!(v, Num::Float(_));
        let above = self.min.is_none_or(|m| if self.exclusive_min { x > m } else { x >= m });
        let below = self.max.is_none_or(|m| if self.exclusive_max { x < m } else { x <= m });
        let listed = self.one_of.is_empty() || self.one_of.contains(&x);
        if above && below && listed && x.is_finite() {
            return None;
        }
        let rule = self.rule(float, unit);
        Some(if self.positive_only() && !float { rule } else { format!("{rule}, got {v}") })
    }
}

/// Numbers a range can be declared on.
pub trait Measure {
    /// The number, or None for an unset optional field.
    fn measure(&self) -> Option<Num>;
}

macro_rules! measure_int {
    ($($t:ty),*) => {$(
        impl Measure for $t {
            fn measure(&self) -> Option<Num> {
                Some(Num::Int(*self as u64))
            }
        }
    )*};
}
measure_int!(u8, u16, u32, u64);

impl Measure for f64 {
    fn measure(&self) -> Option<Num> {
        Some(Num::Float(*self))
    }
}

impl Measure for Dur {
    fn measure(&self) -> Option<Num> {
        Some(Num::Int(self.0))
    }
}

impl Measure for Time {
    fn measure(&self) -> Option<Num> {
        Some(Num::Int(self.0))
    }
}

impl Measure for Rate {
    fn measure(&self) -> Option<Num> {
        Some(Num::Int(self.0))
    }
}

impl<T: Measure> Measure for Option<T> {
    fn measure(&self) -> Option<Num> {
        self.as_ref().and_then(Measure::measure)
    }
}

/// The check the derive writes for a field that must be at least another
/// field of its table (`sndbuf` at least `mss`).
pub fn check_min_field<T: Measure, U: Measure>(value: &T, other: &U, other_name: &str, unit: Option<&str>, name: &str) -> Result<(), ConfigError> {
    if let (Some(v), Some(m)) = (value.measure(), other.measure()) {
        if v.value() < m.value() {
            let unit = unit.map_or(String::new(), |u| format!(" {u}"));
            return Err(ConfigError::new(name, format!("must be at least {other_name} ({m}{unit}), got {v}")));
        }
    }
    Ok(())
}

/// The check the derive writes for a field with a declared range.
pub fn check_range<T: Measure>(value: &T, range: &Range, unit: Option<&str>, name: &str) -> Result<(), ConfigError> {
    match value.measure().and_then(|v| range.violation(v, unit)) {
        Some(message) => Err(ConfigError::new(name, message)),
        None => Ok(()),
    }
}

macro_rules! leaf_type {
    ($kind:literal: $($t:ty),*) => {$(
        impl FieldType for $t {
            fn describe() -> TypeInfo {
                TypeInfo::of($kind)
            }
        }
    )*};
}
leaf_type!("int": u8, u16, u32, u64);
leaf_type!("float": f64);
leaf_type!("bool": bool);
leaf_type!("string": String);
leaf_type!("duration_ns": Dur, Time);
leaf_type!("rate_bps": Rate);
leaf_type!("queue_limit": QueueLimit);
leaf_type!("cca_params": BTreeMap<String, ParamValue>);

impl<T: FieldType> FieldType for Option<T> {
    fn describe() -> TypeInfo {
        T::describe()
    }

    fn collect(tables: &mut Tables) {
        T::collect(tables)
    }

    fn check_nested(&self) -> Result<(), ConfigError> {
        self.as_ref().map_or(Ok(()), T::check_nested)
    }
}

impl<T: FieldType> FieldType for Vec<T> {
    fn describe() -> TypeInfo {
        TypeInfo { list: true, ..T::describe() }
    }

    fn collect(tables: &mut Tables) {
        T::collect(tables)
    }

    fn check_nested(&self) -> Result<(), ConfigError> {
        for (i, v) in self.iter().enumerate() {
            v.check_nested().map_err(|e| e.within(&format!("[{i}]")))?;
        }
        Ok(())
    }
}

impl<T: FieldType> FieldType for (T, T) {
    fn describe() -> TypeInfo {
        TypeInfo { pair: true, ..T::describe() }
    }
}

/// One field as exported.
#[derive(Clone, Debug)]
pub struct FieldSchema {
    pub name: &'static str,
    pub ty: TypeInfo,
    /// Whether the field must be given (serde has no default for it).
    pub required: bool,
    /// What the engine uses when the field is left out (null: unset, the
    /// engine then derives the value, as the doc says).
    pub default: Json,
    pub range: Range,
    /// Another field of the table this one must be at least (`mss` for `sndbuf`).
    pub min_field: Option<&'static str>,
    pub unit: Option<&'static str>,
    pub doc: &'static str,
}

/// A variant of a tagged table (`{"kind": "red", ...}`).
#[derive(Clone, Debug)]
pub struct Variant {
    pub name: &'static str,
    pub doc: String,
    pub fields: Vec<FieldSchema>,
}

/// A table as exported: the fields of a struct, the variants of a tagged
/// enum, or the values of an enum of names.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub doc: String,
    pub tag: Option<&'static str>,
    pub fields: Vec<FieldSchema>,
    pub variants: Vec<Variant>,
    pub values: Vec<(&'static str, &'static str)>,
}

impl Table {
    pub fn fields(doc: &str, fields: Vec<FieldSchema>) -> Table {
        Table { doc: doc.into(), fields, ..Table::default() }
    }

    pub fn variants(doc: &str, tag: &'static str, variants: Vec<Variant>) -> Table {
        Table { doc: doc.into(), tag: Some(tag), variants, ..Table::default() }
    }

    pub fn values(doc: &str, values: Vec<(&'static str, &'static str)>) -> Table {
        Table { doc: doc.into(), values, ..Table::default() }
    }
}

/// The tables met while walking the schema from its root.
#[derive(Default)]
pub struct Tables {
    tables: BTreeMap<&'static str, Table>,
}

impl Tables {
    /// Adds a table unless it is there; returns whether it was added.
    pub fn add(&mut self, name: &'static str, table: fn() -> Table) -> bool {
        if self.tables.contains_key(name) {
            return false;
        }
        self.tables.insert(name, table());
        true
    }

    pub fn get(&self, name: &str) -> Option<&Table> {
        self.tables.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&&'static str, &Table)> {
        self.tables.iter()
    }
}

pub fn to_json<T: Serialize>(v: &T) -> Json {
    serde_json::to_value(v).expect("config values serialise")
}

/// A bound as JSON: an integer for whole-number kinds.
fn number(x: f64, integral: bool) -> Json {
    if integral && x.fract() == 0.0 && x.abs() < 2f64.powi(63) {
        json!(x as i64)
    } else {
        json!(x)
    }
}

impl FieldSchema {
    fn to_json(&self) -> Json {
        let mut m = Map::new();
        m.insert("kind".into(), json!(self.ty.kind));
        if let Some(t) = self.ty.table {
            m.insert("table".into(), json!(t));
        }
        if !self.ty.values.is_empty() {
            m.insert("values".into(), json!(self.ty.values));
        }
        if self.ty.list {
            m.insert("list".into(), json!(true));
        }
        if self.ty.pair {
            m.insert("pair".into(), json!(true));
        }
        m.insert("required".into(), json!(self.required));
        m.insert("default".into(), self.default.clone());
        let r = &self.range;
        let integral = self.ty.integral();
        if let Some(lo) = r.min {
            m.insert("min".into(), number(lo, integral));
            if r.exclusive_min {
                m.insert("exclusive_min".into(), json!(true));
            }
        }
        if let Some(hi) = r.max {
            m.insert("max".into(), number(hi, integral));
            if r.exclusive_max {
                m.insert("exclusive_max".into(), json!(true));
            }
        }
        if !r.one_of.is_empty() {
            m.insert("one_of".into(), Json::Array(r.one_of.iter().map(|&x| number(x, integral)).collect()));
        }
        if !r.is_empty() {
            m.insert("rule".into(), json!(r.rule(!integral, self.unit)));
        }
        if let Some(other) = self.min_field {
            m.insert("min_field".into(), json!(other));
            m.insert("rule".into(), json!(format!("must be at least {other}")));
        }
        if let Some(u) = self.unit {
            m.insert("unit".into(), json!(u));
        }
        m.insert("doc".into(), json!(self.doc));
        Json::Object(m)
    }
}

fn fields_json(fields: &[FieldSchema]) -> Json {
    Json::Object(fields.iter().map(|f| (f.name.to_string(), f.to_json())).collect())
}

impl Table {
    fn to_json(&self) -> Json {
        let mut m = Map::new();
        m.insert("doc".into(), json!(self.doc));
        if let Some(tag) = self.tag {
            m.insert("tag".into(), json!(tag));
            let variants = self.variants.iter().map(|v| (v.name.to_string(), json!({"doc": v.doc, "fields": fields_json(&v.fields)})));
            m.insert("variants".into(), Json::Object(variants.collect()));
        } else if !self.values.is_empty() {
            m.insert("values".into(), Json::Object(self.values.iter().map(|(n, d)| (n.to_string(), json!(d))).collect()));
        } else {
            m.insert("fields".into(), fields_json(&self.fields));
        }
        Json::Object(m)
    }
}

/// Every table reachable from the engine's input, `SimConfig`.
pub fn tables() -> Tables {
    let mut t = Tables::default();
    <SimConfig as FieldType>::collect(&mut t);
    t
}

/// The schema as JSON: `{"version", "root", "tables": {name: table}}`, where a
/// table is `{"doc", "fields": {name: field}}`, `{"doc", "tag", "variants":
/// {name: {"doc", "fields"}}}` or `{"doc", "values": {name: doc}}`, and a field
/// is `{"kind", "required", "default", "doc"}` with, where they apply,
/// `table`, `values`, `list`, `pair`, `min`, `max`, `exclusive_min`,
/// `exclusive_max`, `one_of`, `min_field` (another field of the table this one
/// must be at least), `rule` (the start of the error message for a value out
/// of range) and `unit`.
pub fn schema() -> Json {
    let tables = tables();
    json!({
        "version": SCHEMA_VERSION,
        "root": <SimConfig as Schema>::NAME,
        "tables": Json::Object(tables.iter().map(|(n, t)| (n.to_string(), t.to_json())).collect()),
    })
}
