//! The catalogue of algorithms: names, one-line descriptions, sources, and
//! their tunable parameters with defaults, plus the constructor that turns a
//! name and parameter table into an algorithm. Unknown names or parameters are
//! errors that list what is allowed.

use super::CongestionControl;
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

/// One algorithm: its catalogue entry and its constructor. Each algorithm's
/// file provides both (`info()` and `build()`); adding an algorithm is one line
/// in `ENTRIES`.
struct Entry {
    info: fn() -> CcaInfo,
    build: fn(&Params) -> Box<dyn CongestionControl>,
}

const ENTRIES: &[Entry] = &[
    Entry { info: super::reno::info, build: super::reno::build },
    Entry { info: super::reno::info_newreno, build: super::reno::build_newreno },
    Entry { info: super::cubic::info, build: super::cubic::build },
    Entry { info: super::vegas::info, build: super::vegas::build },
    Entry { info: super::westwood::info, build: super::westwood::build },
    Entry { info: super::illinois::info, build: super::illinois::build },
    Entry { info: super::hybla::info, build: super::hybla::build },
    Entry { info: super::yeah::info, build: super::yeah::build },
    Entry { info: super::veno::info, build: super::veno::build },
    Entry { info: super::rapid::info, build: super::rapid::build },
    Entry { info: super::cubic2008::info, build: super::cubic2008::build },
    Entry { info: super::bic::info, build: super::bic::build },
    Entry { info: super::highspeed::info, build: super::highspeed::build },
    Entry { info: super::htcp::info, build: super::htcp::build },
    Entry { info: super::scalable::info, build: super::scalable::build },
    Entry { info: super::bbr::info, build: super::bbr::build },
];

/// Every algorithm the engine implements.
pub fn cca_catalogue() -> Vec<CcaInfo> {
    ENTRIES.iter().map(|e| (e.info)()).collect()
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

/// Builds the algorithm called `name` with `params`.
pub fn make_cca(name: &str, params: &BTreeMap<String, ParamValue>) -> Result<Box<dyn CongestionControl>, String> {
    let Some(entry) = ENTRIES.iter().find(|e| (e.info)().name == name) else {
        let mut names: Vec<_> = cca_catalogue().iter().map(|c| c.name).collect();
        names.sort_unstable();
        return Err(format!("cca: unknown congestion control '{name}'; allowed: {}", names.join(", ")));
    };
    let p = Params::new(name, params, (entry.info)().params)?;
    Ok((entry.build)(&p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_names_list_the_allowed_ones() {
        let e = make_cca("cubc", &BTreeMap::new()).err().unwrap();
        assert!(e.contains("cubic") && e.contains("reno"), "{e}");
    }

    #[test]
    fn parameters_are_checked() {
        let mut p = BTreeMap::new();
        p.insert("beta".to_string(), ParamValue::Int(2000));
        assert!(make_cca("cubic", &p).err().unwrap().contains("cca_params.beta"));
        let mut p = BTreeMap::new();
        p.insert("hystart".to_string(), ParamValue::Int(1));
        assert!(make_cca("cubic", &p).is_err());
        let mut p = BTreeMap::new();
        p.insert("nope".to_string(), ParamValue::Bool(true));
        assert!(make_cca("reno", &p).err().unwrap().contains("allowed: none"));
        let mut p = BTreeMap::new();
        p.insert("hystart".to_string(), ParamValue::Bool(false));
        assert!(make_cca("cubic", &p).is_ok());
    }
}
