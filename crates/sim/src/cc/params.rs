//! What an algorithm's tunable parameters are: their values as scenarios give
//! them (`ParamValue`), their catalogue entries with default, range and
//! description (`CcaParam`, collected in an algorithm's `CcaInfo`), and the
//! checked table an algorithm is built from (`Params`). Wrong names, types and
//! out-of-range values are errors that name the parameter.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A parameter value as scenarios give it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ParamValue {
    Bool(bool),
    Int(i64),
    Float(f64),
}

impl std::fmt::Display for ParamValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamValue::Bool(b) => write!(f, "{b}"),
            ParamValue::Int(i) => write!(f, "{i}"),
            ParamValue::Float(x) => write!(f, "{x}"),
        }
    }
}

/// A tunable of an algorithm.
#[derive(Clone, Debug, Serialize)]
pub struct CcaParam {
    pub name: &'static str,
    pub default: ParamValue,
    /// Inclusive range for numbers; ignored for booleans.
    pub min: f64,
    pub max: f64,
    pub doc: &'static str,
}

/// What `ccarena list ccas` shows about an algorithm.
#[derive(Clone, Debug, Serialize)]
pub struct CcaInfo {
    pub name: &'static str,
    pub description: &'static str,
    pub source: &'static str,
    pub params: Vec<CcaParam>,
}

pub fn pbool(name: &'static str, default: bool, doc: &'static str) -> CcaParam {
    CcaParam { name, default: ParamValue::Bool(default), min: 0.0, max: 1.0, doc }
}

pub fn pint(name: &'static str, default: i64, min: i64, max: i64, doc: &'static str) -> CcaParam {
    CcaParam { name, default: ParamValue::Int(default), min: min as f64, max: max as f64, doc }
}

pub fn pfloat(name: &'static str, default: f64, min: f64, max: f64, doc: &'static str) -> CcaParam {
    CcaParam { name, default: ParamValue::Float(default), min, max, doc }
}

/// Reads validated parameters of one algorithm.
pub struct Params<'a> {
    cca: &'a str,
    given: &'a BTreeMap<String, ParamValue>,
    spec: Vec<CcaParam>,
}

impl<'a> Params<'a> {
    pub fn new(cca: &'a str, given: &'a BTreeMap<String, ParamValue>, spec: Vec<CcaParam>) -> Result<Self, String> {
        for (k, v) in given {
            let Some(p) = spec.iter().find(|p| p.name == k) else {
                let allowed: Vec<_> = spec.iter().map(|p| p.name).collect();
                return Err(format!(
                    "cca_params.{k}: unknown parameter for {cca}; allowed: {}",
                    if allowed.is_empty() { "none".to_string() } else { allowed.join(", ") }
                ));
            };
            let ok = match (&p.default, v) {
                (ParamValue::Bool(_), ParamValue::Bool(_)) => true,
                (ParamValue::Bool(_), _) => {
                    return Err(format!("cca_params.{k}: must be true or false, got {v}"));
                }
                (ParamValue::Int(_), ParamValue::Int(i)) => (*i as f64) >= p.min && (*i as f64) <= p.max,
                (ParamValue::Int(_), _) => {
                    return Err(format!("cca_params.{k}: must be an integer in {}..{}, got {v}", p.min, p.max));
                }
                (ParamValue::Float(_), ParamValue::Float(x)) => *x >= p.min && *x <= p.max,
                (ParamValue::Float(_), ParamValue::Int(i)) => (*i as f64) >= p.min && (*i as f64) <= p.max,
                (ParamValue::Float(_), _) => false,
            };
            if !ok {
                return Err(format!("cca_params.{k}: must be in {}..{}, got {v}", p.min, p.max));
            }
        }
        Ok(Params { cca, given, spec })
    }

    fn value(&self, name: &str) -> &ParamValue {
        self.given
            .get(name)
            .or_else(|| self.spec.iter().find(|p| p.name == name).map(|p| &p.default))
            .unwrap_or_else(|| panic!("{}: parameter {name} missing from its own spec", self.cca))
    }

    pub fn bool(&self, name: &str) -> bool {
        matches!(self.value(name), ParamValue::Bool(true))
    }

    pub fn int(&self, name: &str) -> i64 {
        match self.value(name) {
            ParamValue::Int(i) => *i,
            ParamValue::Float(x) => *x as i64,
            ParamValue::Bool(b) => *b as i64,
        }
    }

    pub fn u32(&self, name: &str) -> u32 {
        self.int(name) as u32
    }

    pub fn float(&self, name: &str) -> f64 {
        match self.value(name) {
            ParamValue::Int(i) => *i as f64,
            ParamValue::Float(x) => *x,
            ParamValue::Bool(b) => *b as u8 as f64,
        }
    }
}
