//! PyO3 bindings: the thinnest layer that lets Python hand a resolved scenario
//! (JSON in engine units, produced and validated by `ccarena.scenario`) to the
//! engine and get its records back as JSON. The GIL is released while the engine
//! runs, so several runs can proceed on threads (e.g. Dask workers).

use ccarena_sim::units::Time;
use ccarena_sim::{SimConfig, Simulation};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::sync::Mutex;

fn parse_config(config_json: &str) -> PyResult<SimConfig> {
    serde_json::from_str(config_json).map_err(|e| PyValueError::new_err(format!("engine config: {e}")))
}

/// Runs a scenario to completion and returns the run record as JSON.
#[pyfunction]
fn run_json(py: Python<'_>, config_json: &str) -> PyResult<String> {
    let cfg = parse_config(config_json)?;
    let result = py.detach(move || ccarena_sim::run(cfg));
    let r = result.map_err(PyValueError::new_err)?;
    serde_json::to_string(&r).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// The algorithm catalogue (names, descriptions, sources, parameters) as JSON.
#[pyfunction]
fn cca_catalogue_json() -> PyResult<String> {
    serde_json::to_string(&ccarena_sim::cc::cca_catalogue()).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// Checks a resolved scenario without running it; raises ValueError naming the field.
#[pyfunction]
fn validate_json(config_json: &str) -> PyResult<()> {
    parse_config(config_json)?.validate().map_err(PyValueError::new_err)
}

/// A run that can be advanced in slices, for progress reporting.
#[pyclass(module = "ccarena._engine")]
struct Engine {
    sim: Mutex<Option<Simulation>>,
    duration_ns: u64,
}

#[pymethods]
impl Engine {
    #[new]
    fn new(config_json: &str) -> PyResult<Self> {
        let cfg = parse_config(config_json)?;
        let duration_ns = cfg.run.duration.0;
        let sim = Simulation::new(cfg).map_err(PyValueError::new_err)?;
        Ok(Engine { sim: Mutex::new(Some(sim)), duration_ns })
    }

    /// Processes events up to `until_ns` (capped at the run's duration); returns
    /// the simulated time reached.
    fn advance(&self, py: Python<'_>, until_ns: u64) -> PyResult<u64> {
        let until = until_ns.min(self.duration_ns);
        py.detach(|| {
            let mut guard = self.sim.lock().expect("engine lock");
            let sim = guard.as_mut().ok_or_else(|| PyRuntimeError::new_err("run already finished"))?;
            sim.run_until(Time(until));
            Ok(sim.now().0)
        })
    }

    #[getter]
    fn now_ns(&self) -> u64 {
        self.sim.lock().expect("engine lock").as_ref().map_or(self.duration_ns, |s| s.now().0)
    }

    #[getter]
    fn duration_ns(&self) -> u64 {
        self.duration_ns
    }

    #[getter]
    fn events(&self) -> u64 {
        self.sim.lock().expect("engine lock").as_ref().map_or(0, |s| s.events_processed())
    }

    /// Runs to the end (if not there yet) and returns the run record as JSON.
    fn finish(&self, py: Python<'_>) -> PyResult<String> {
        let sim = self.sim.lock().expect("engine lock").take();
        let mut sim = sim.ok_or_else(|| PyRuntimeError::new_err("run already finished"))?;
        let end = self.duration_ns;
        let r = py.detach(move || {
            sim.run_until(Time(end));
            sim.run()
        });
        serde_json::to_string(&r).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }
}

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_json, m)?)?;
    m.add_function(wrap_pyfunction!(cca_catalogue_json, m)?)?;
    m.add_function(wrap_pyfunction!(validate_json, m)?)?;
    m.add_class::<Engine>()?;
    m.add("ENGINE_VERSION", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
