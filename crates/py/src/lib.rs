//! PyO3 bindings: the thinnest layer that lets Python hand a resolved scenario
//! (JSON in engine units, produced and validated by `ccarena.scenario`) to the
//! engine and get its records back as JSON. The GIL is released while the engine
//! runs, so several runs can proceed on threads (e.g. Dask workers). A scenario
//! the engine refuses raises `ConfigError` (a `ValueError`) carrying the field.

mod pycca;

use ccarena_sim::config::Schema;
use ccarena_sim::dist::Dist;
use ccarena_sim::rng::Rng;
use ccarena_sim::units::Time;
use ccarena_sim::{CcaFactory, SimConfig, Simulation};
use pycca::PyFactory;
use std::collections::HashMap;
use std::sync::Arc;
use pyo3::create_exception;
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use serde_path_to_error::Segment;
use std::sync::Mutex;

create_exception!(
    ccarena._engine,
    ConfigError,
    PyValueError,
    "A scenario the engine refuses. `field` is the dotted path of the offending field \
     (`flows[3].tcp.mss`), `message` what is wrong and what is allowed; str() is \"field: message\"."
);

/// The Python `ConfigError` of an engine error, with `field` and `message` set.
fn config_error(py: Python<'_>, e: ccarena_sim::ConfigError) -> PyErr {
    let err = ConfigError::new_err(e.to_string());
    let value = err.value(py);
    if let Err(set) = value.setattr("field", e.field).and_then(|_| value.setattr("message", e.message)) {
        return set;
    }
    err
}

/// Reads the engine config; a JSON value of the wrong shape is a `ConfigError`
/// naming the field where the reader stopped (`run.duration`, `flows[2].rtt`).
fn parse_config(py: Python<'_>, config_json: &str) -> PyResult<SimConfig> {
    parse(py, config_json)
}

/// Reads an engine table from JSON; errors as `parse_config`'s.
fn parse<T: serde::de::DeserializeOwned>(py: Python<'_>, json: &str) -> PyResult<T> {
    let de = &mut serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let mut field = String::new();
        for segment in e.path() {
            match segment {
                Segment::Seq { index } => field.push_str(&format!("[{index}]")),
                Segment::Map { key } if field.is_empty() => field.push_str(key),
                Segment::Map { key } => field.push_str(&format!(".{key}")),
                Segment::Enum { variant } => field.push_str(&format!(".{variant}")),
                Segment::Unknown => break,
            }
        }
        let inner = e.inner();
        let mut message = inner.to_string();
        // The position in a machine-written document says less than the field.
        let at = format!(" at line {} column {}", inner.line(), inner.column());
        if let Some(m) = message.strip_suffix(&at) {
            message = m.to_string();
        }
        // A missing field is named itself, as the scenario language names it.
        if let Some(name) = message.strip_prefix("missing field `").and_then(|m| m.strip_suffix('`')) {
            let missing = ccarena_sim::ConfigError::new(name, "missing required field");
            return config_error(py, missing.within(&field));
        }
        let field = if field.is_empty() { "engine config".to_string() } else { field };
        config_error(py, ccarena_sim::ConfigError::new(field, message))
    })
}

/// Errors Python algorithms hit during a run, shared with their factory.
type PyErrors = Arc<Mutex<Vec<String>>>;

/// The factory of the run's Python algorithms (owned by the simulation, which
/// builds web flows as they arrive) and the list their errors go to.
fn factory(py_ccas: Option<HashMap<String, Py<PyAny>>>) -> (Option<Box<dyn CcaFactory>>, Option<PyErrors>) {
    match py_ccas.filter(|m| !m.is_empty()) {
        Some(classes) => {
            let errors: PyErrors = Arc::new(Mutex::new(Vec::new()));
            (Some(Box::new(PyFactory { classes, errors: errors.clone() })), Some(errors))
        }
        None => (None, None),
    }
}

/// Raises the first error a Python algorithm hit during the run, if any.
fn check_python_errors(errors: &Option<PyErrors>) -> PyResult<()> {
    check_interrupted(errors)?;
    if let Some(errors) = errors {
        if let Some(e) = errors.lock().expect("errors").first() {
            return Err(PyRuntimeError::new_err(format!("Python congestion control failed: {e}")));
        }
    }
    Ok(())
}

/// Raises KeyboardInterrupt when a Python algorithm's hook was interrupted.
fn check_interrupted(errors: &Option<PyErrors>) -> PyResult<()> {
    if let Some(errors) = errors {
        if errors.lock().expect("errors").iter().any(|e| e == pycca::INTERRUPTED) {
            return Err(PyKeyboardInterrupt::new_err(()));
        }
    }
    Ok(())
}

/// Runs a scenario to completion and returns the run record as JSON.
/// `py_ccas` maps algorithm names to Python classes (subclasses of
/// `ccarena.CongestionControl`) that flows may use besides the built-in ones.
#[pyfunction]
#[pyo3(signature = (config_json, py_ccas=None))]
fn run_json(py: Python<'_>, config_json: &str, py_ccas: Option<HashMap<String, Py<PyAny>>>) -> PyResult<String> {
    let cfg = parse_config(py, config_json)?;
    let (fac, errors) = factory(py_ccas);
    let result = py.detach(|| Simulation::with_factory(cfg, fac).map(|sim| sim.run()));
    let r = result.map_err(|e| config_error(py, e))?;
    check_python_errors(&errors)?;
    serde_json::to_string(&r).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// The algorithm catalogue (names, descriptions, sources, parameters) as JSON.
#[pyfunction]
fn cca_catalogue_json() -> PyResult<String> {
    serde_json::to_string(&ccarena_sim::cc::cca_catalogue()).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// The engine's scenario schema as JSON: every table of the engine config with
/// each field's kind, range, default, unit and doc (see
/// `ccarena_sim::config::schema::schema`).
#[pyfunction]
fn schema_json() -> PyResult<String> {
    serde_json::to_string(&ccarena_sim::config::schema::schema()).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// The two-way propagation delay (ns) each flow of the config gets: fixed
/// ones as given, distributions drawn as the engine draws them when it builds
/// the run (the `flow-rtt` stream of `run.seed`, in flow order). Raises
/// ConfigError for a config the engine would refuse in its fields.
#[pyfunction]
fn flow_rtts_json(py: Python<'_>, config_json: &str) -> PyResult<Vec<u64>> {
    let cfg = parse_config(py, config_json)?;
    cfg.check_fields().map_err(|e| config_error(py, e))?;
    Ok(cfg.flow_rtts().iter().map(|d| d.0).collect())
}

/// When each flow of the config starts (ns): its `start` plus its draw of
/// `run.start_jitter`, as the engine draws it when it builds the run.
#[pyfunction]
fn flow_starts_json(py: Python<'_>, config_json: &str) -> PyResult<Vec<u64>> {
    let cfg = parse_config(py, config_json)?;
    cfg.check_fields().map_err(|e| config_error(py, e))?;
    Ok(cfg.flow_starts().iter().map(|t| t.0).collect())
}

/// `n` draws from a distribution (engine JSON, e.g. `{"distribution":
/// "exponential", "mean": 132e6}`) from the named random stream of `seed`,
/// as the engine's own draws are made (unrounded). Errors name `dist.<field>`.
#[pyfunction]
fn sample_dist_json(py: Python<'_>, dist_json: &str, seed: u64, stream: &str, n: usize) -> PyResult<Vec<f64>> {
    let dist: Dist = parse(py, dist_json)?;
    dist.check_fields().map_err(|e| config_error(py, e.within("dist")))?;
    let mut rng = Rng::stream(seed, stream);
    Ok((0..n).map(|_| dist.sample(&mut rng)).collect())
}

/// Checks a resolved scenario without running it; raises ConfigError naming the field.
/// Names in `external` are algorithms supplied from Python (checked when built).
#[pyfunction]
#[pyo3(signature = (config_json, external=Vec::new()))]
fn validate_json(py: Python<'_>, config_json: &str, external: Vec<String>) -> PyResult<()> {
    parse_config(py, config_json)?.validate_with(&external).map_err(|e| config_error(py, e))
}

/// A run that can be advanced in slices, for progress reporting.
#[pyclass(module = "ccarena._engine")]
struct Engine {
    sim: Mutex<Option<Simulation>>,
    duration_ns: u64,
    errors: Option<PyErrors>,
}

#[pymethods]
impl Engine {
    #[new]
    #[pyo3(signature = (config_json, py_ccas=None))]
    fn new(py: Python<'_>, config_json: &str, py_ccas: Option<HashMap<String, Py<PyAny>>>) -> PyResult<Self> {
        let cfg = parse_config(py, config_json)?;
        let duration_ns = cfg.run.duration.0;
        let (fac, errors) = factory(py_ccas);
        let sim = py.detach(|| Simulation::with_factory(cfg, fac)).map_err(|e| config_error(py, e))?;
        Ok(Engine { sim: Mutex::new(Some(sim)), duration_ns, errors })
    }

    /// Processes events up to `until_ns` (capped at the run's duration); returns
    /// the simulated time reached.
    fn advance(&self, py: Python<'_>, until_ns: u64) -> PyResult<u64> {
        let until = until_ns.min(self.duration_ns);
        let now = py.detach(|| {
            let mut guard = self.sim.lock().expect("engine lock");
            let sim = guard.as_mut().ok_or_else(|| PyRuntimeError::new_err("run already finished"))?;
            sim.run_until(Time(until));
            Ok::<u64, PyErr>(sim.now().0)
        })?;
        check_interrupted(&self.errors)?;
        Ok(now)
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
        check_python_errors(&self.errors)?;
        serde_json::to_string(&r).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }
}

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_json, m)?)?;
    m.add_function(wrap_pyfunction!(cca_catalogue_json, m)?)?;
    m.add_function(wrap_pyfunction!(validate_json, m)?)?;
    m.add_function(wrap_pyfunction!(schema_json, m)?)?;
    m.add_function(wrap_pyfunction!(flow_rtts_json, m)?)?;
    m.add_function(wrap_pyfunction!(flow_starts_json, m)?)?;
    m.add_function(wrap_pyfunction!(sample_dist_json, m)?)?;
    m.add_class::<Engine>()?;
    m.add("ConfigError", m.py().get_type::<ConfigError>())?;
    m.add_class::<pycca::Sock>()?;
    m.add("ENGINE_VERSION", env!("CARGO_PKG_VERSION"))?;
    m.add("ENGINE_BUILD", env!("CCARENA_ENGINE_SOURCE_HASH"))?;
    Ok(())
}
