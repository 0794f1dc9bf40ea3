//! The catalogue of algorithms: names, one-line descriptions, sources, and
//! their tunable parameters with defaults, plus the constructor that turns a
//! name and parameter table into an algorithm. Unknown names or parameters are
//! errors that list what is allowed.

use super::cubic::{Cubic, CubicConfig};
use super::reno::Reno;
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

fn pbool(name: &'static str, default: bool, doc: &'static str) -> CcaParam {
    CcaParam { name, default: ParamValue::Bool(default), min: 0.0, max: 1.0, doc }
}

fn pint(name: &'static str, default: i64, min: i64, max: i64, doc: &'static str) -> CcaParam {
    CcaParam { name, default: ParamValue::Int(default), min: min as f64, max: max as f64, doc }
}

/// Every algorithm the engine implements.
pub fn cca_catalogue() -> Vec<CcaInfo> {
    vec![
        CcaInfo {
            name: "reno",
            description: "Reno/NewReno AIMD: +1 packet per RTT, halve on loss (Linux default recovery: SACK, RACK, PRR)",
            source: "Linux net/ipv4/tcp_cong.c; RFC 5681, RFC 6582",
            params: vec![],
        },
        CcaInfo {
            name: "cubic",
            description: "CUBIC: cubic window growth around W_max, beta 0.7, fast convergence, Reno-friendly region, HyStart",
            source: "Linux net/ipv4/tcp_cubic.c (v2.3); RFC 9438; Ha, Rhee, Xu 2008",
            params: vec![
                pbool("fast_convergence", true, "release bandwidth faster when W_max shrinks"),
                pint("beta", 717, 1, 1023, "multiplicative decrease x 1024"),
                pint("initial_ssthresh", 0, 0, 1 << 30, "initial ssthresh in packets when HyStart is off (0: infinite)"),
                pint("bic_scale", 41, 1, 1 << 16, "C = bic_scale * 10 / 1024 packets/s^3"),
                pbool("tcp_friendliness", true, "follow the emulated Reno window when it is larger"),
                pbool("hystart", true, "leave slow start on ACK-train or delay-increase signals"),
                pint("hystart_detect", 3, 0, 3, "1: ACK train, 2: delay increase, 3: both"),
                pint("hystart_low_window", 16, 0, 1 << 30, "HyStart inactive below this cwnd"),
                pint("hystart_ack_delta_us", 2000, 0, 1_000_000, "ACKs closer than this form a train (us)"),
            ],
        },
    ]
}

/// Reads validated parameters of one algorithm.
pub struct Params<'a> {
    cca: &'a str,
    given: &'a BTreeMap<String, ParamValue>,
    spec: Vec<CcaParam>,
}

impl<'a> Params<'a> {
    fn new(cca: &'a str, given: &'a BTreeMap<String, ParamValue>, spec: Vec<CcaParam>) -> Result<Self, String> {
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

fn spec_of(name: &str) -> Option<Vec<CcaParam>> {
    cca_catalogue().into_iter().find(|c| c.name == name).map(|c| c.params)
}

/// Builds the algorithm called `name` with `params`.
pub fn make_cca(name: &str, params: &BTreeMap<String, ParamValue>) -> Result<Box<dyn CongestionControl>, String> {
    let Some(spec) = spec_of(name) else {
        let names: Vec<_> = cca_catalogue().iter().map(|c| c.name).collect();
        return Err(format!("cca: unknown congestion control '{name}'; allowed: {}", names.join(", ")));
    };
    let p = Params::new(name, params, spec)?;
    Ok(match name {
        "reno" => Box::new(Reno),
        "cubic" => Box::new(Cubic::new(CubicConfig {
            fast_convergence: p.bool("fast_convergence"),
            beta: p.u32("beta"),
            initial_ssthresh: p.u32("initial_ssthresh"),
            bic_scale: p.u32("bic_scale"),
            tcp_friendliness: p.bool("tcp_friendliness"),
            hystart: p.bool("hystart"),
            hystart_detect: p.u32("hystart_detect"),
            hystart_low_window: p.u32("hystart_low_window"),
            hystart_ack_delta_us: p.u32("hystart_ack_delta_us"),
        })),
        _ => unreachable!("catalogue and constructor disagree on {name}"),
    })
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
