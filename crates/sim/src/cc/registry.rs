//! The catalogue of algorithms (Linux's `tcp_cong_list`): every algorithm's
//! catalogue entry and constructor, and `make_cca`, which finds an algorithm by
//! name (Linux `tcp_ca_find`), builds it with a parameter table and checks
//! Linux's hook rule (`validate_hooks`). Unknown names are errors that list
//! what is allowed; what a parameter is lives in `params.rs`. Algorithms from
//! outside the engine (Python) come through a `CcaFactory`.

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
    Entry { info: super::bbr3::info, build: super::bbr3::build },
    Entry { info: super::fast::info, build: super::fast::build },
    Entry { info: super::nv::info, build: super::nv::build },
    Entry { info: super::cdg::info, build: super::cdg::build },
    Entry { info: super::lp::info, build: super::lp::build },
    Entry { info: super::dctcp::info, build: super::dctcp::build },
    Entry { info: super::prague::info, build: super::prague::build },
];

/// Rules on an algorithm's parameters beyond their declared ranges (a Linux
/// module that refuses to load with such values), by algorithm name.
const CHECKS: &[(&str, ParamCheck)] = &[("cdg", super::cdg::check), ("bbr3", super::bbr3::check)];

type ParamCheck = fn(&Params) -> Result<(), String>;

/// Every algorithm the engine implements.
pub fn cca_catalogue() -> Vec<CcaInfo> {
    ENTRIES.iter().map(|e| (e.info)()).collect()
}

/// Builds algorithms the engine does not know itself (e.g. ones written in
/// Python): given a name and parameters, returns `None` if the name is not
/// its own, or the algorithm (or an error naming the parameter). A simulation
/// asks its factory first and `make_cca` second.
pub trait CcaFactory: Send {
    fn names(&self) -> Vec<String>;
    fn build(
        &self,
        name: &str,
        params: &BTreeMap<String, ParamValue>,
    ) -> Option<Result<Box<dyn CongestionControl>, String>>;
}

/// Builds the algorithm called `name` with `params`.
pub fn make_cca(name: &str, params: &BTreeMap<String, ParamValue>) -> Result<Box<dyn CongestionControl>, String> {
    let Some(entry) = ENTRIES.iter().find(|e| (e.info)().name == name) else {
        let mut names: Vec<_> = cca_catalogue().iter().map(|c| c.name).collect();
        names.sort_unstable();
        return Err(format!("cca: unknown congestion control '{name}'; allowed: {}", names.join(", ")));
    };
    let p = Params::new(name, params, (entry.info)().params)?;
    if let Some((_, check)) = CHECKS.iter().find(|(n, _)| *n == name) {
        check(&p)?;
    }
    let ca = (entry.build)(&p);
    validate_hooks(ca.as_ref())?;
    Ok(ca)
}

/// Linux `tcp_validate_congestion_control`: an algorithm must provide
/// `ssthresh`, `undo_cwnd`, and `cong_avoid` or `cong_control`. The first two
/// are required methods of the trait, so only the last choice is left to check.
pub fn validate_hooks(ca: &dyn CongestionControl) -> Result<(), String> {
    if !ca.has_cong_avoid() && !ca.has_cong_control() {
        return Err(format!("cca: {} provides neither cong_avoid nor cong_control", ca.name()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::TcpSock;

    /// What registering `entry` checks: the catalogue entry's parameters build
    /// an algorithm of the same name that follows Linux's hook rule.
    fn check_entry(entry: &Entry) -> Result<(), String> {
        let info = (entry.info)();
        let none = BTreeMap::new();
        let ca = (entry.build)(&Params::new(info.name, &none, info.params)?);
        if ca.name() != info.name {
            return Err(format!("cca: {} builds an algorithm called {}", info.name, ca.name()));
        }
        validate_hooks(ca.as_ref())
    }

    #[test]
    fn every_registered_algorithm_follows_the_hook_rule() {
        for e in ENTRIES {
            check_entry(e).unwrap();
        }
    }

    /// Provides `ssthresh` and `undo_cwnd` but sets cwnd in neither hook.
    struct NoCwndHook;

    impl CongestionControl for NoCwndHook {
        fn name(&self) -> &str {
            "none"
        }
        fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
            tp.reno_ssthresh()
        }
        fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
            tp.reno_undo_cwnd()
        }
    }

    fn info_none() -> CcaInfo {
        CcaInfo { name: "none", description: "", source: "", params: vec![] }
    }

    fn build_none(_p: &Params) -> Box<dyn CongestionControl> {
        Box::new(NoCwndHook)
    }

    #[test]
    fn an_algorithm_without_cong_avoid_or_cong_control_is_refused() {
        let e = check_entry(&Entry { info: info_none, build: build_none }).err().unwrap();
        assert_eq!(e, "cca: none provides neither cong_avoid nor cong_control");
    }

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
