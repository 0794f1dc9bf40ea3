//! The catalogue of algorithms (Linux's `tcp_cong_list`): every algorithm's
//! catalogue entry and constructor, and `make_cca`, which finds an algorithm by
//! name (Linux `tcp_ca_find`) and builds it with a parameter table. Unknown
//! names are errors that list what is allowed; what a parameter is lives in
//! `params.rs`.

use super::params::{CcaInfo, ParamValue, Params};
use super::CongestionControl;
use std::collections::BTreeMap;

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
