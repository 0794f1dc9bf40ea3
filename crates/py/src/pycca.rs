//! Congestion control written in Python. `PyCca` implements the engine's
//! `CongestionControl` trait by calling the hooks of a Python object (a subclass
//! of `ccarena.CongestionControl`), handing it a `Sock` that mirrors the engine's
//! `TcpSock`: the state is copied in before each hook and copied back after, so
//! the Python code reads and writes cwnd, ssthresh, ... exactly as a kernel
//! module does. Hooks the class does not define are never called. A Python
//! exception stops further calls and is reported after the run.

use ccarena_sim::cc::{AckSample, CaEvent, CaState, CongestionControl, ParamValue, RateSample, TcpSock};
use ccarena_sim::CcaFactory;
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use pyo3::types::{PyDict, PyTuple};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// The socket as a Python hook sees it.
#[pyclass(module = "ccarena._engine", name = "Sock")]
pub struct Sock {
    pub inner: TcpSock,
}

macro_rules! rw_fields {
    ($($field:ident : $ty:ty),* $(,)?) => {
        #[pymethods]
        impl Sock {
            $(
                #[getter]
                fn $field(&self) -> $ty {
                    self.inner.$field
                }
            )*
        }
    };
}

rw_fields!(
    cwnd: u32,
    ssthresh: u32,
    cwnd_cnt: u32,
    cwnd_clamp: u32,
    prior_cwnd: u32,
    snd_una: u32,
    snd_nxt: u32,
    packets_out: u32,
    sacked_out: u32,
    lost_out: u32,
    retrans_out: u32,
    delivered: u32,
    lost: u32,
    mss: u32,
    hz: u32,
    jiffies: u32,
    mstamp_us: u64,
    pacing_rate: u64,
    app_limited: u32,
    max_packets_out: u32,
);

fn state_name(s: CaState) -> &'static str {
    match s {
        CaState::Open => "open",
        CaState::Disorder => "disorder",
        CaState::Cwr => "cwr",
        CaState::Recovery => "recovery",
        CaState::Loss => "loss",
    }
}

fn event_name(e: CaEvent) -> &'static str {
    match e {
        CaEvent::TxStart => "tx_start",
        CaEvent::CwndRestart => "cwnd_restart",
        CaEvent::CompleteCwr => "complete_cwr",
        CaEvent::Loss => "loss",
        CaEvent::EcnNoCe => "ecn_no_ce",
        CaEvent::EcnIsCe => "ecn_is_ce",
    }
}

#[pymethods]
impl Sock {
    #[setter]
    fn set_cwnd(&mut self, v: u32) {
        self.inner.cwnd = v;
    }
    #[setter]
    fn set_ssthresh(&mut self, v: u32) {
        self.inner.ssthresh = v;
    }
    #[setter]
    fn set_cwnd_cnt(&mut self, v: u32) {
        self.inner.cwnd_cnt = v;
    }
    #[setter]
    fn set_cwnd_clamp(&mut self, v: u32) {
        self.inner.cwnd_clamp = v;
    }
    #[setter]
    fn set_pacing_rate(&mut self, v: u64) {
        self.inner.pacing_rate = v;
    }
    #[setter]
    fn set_app_limited(&mut self, v: u32) {
        self.inner.app_limited = v;
    }
    /// Smoothed RTT in microseconds (0 before the first sample).
    #[getter]
    fn srtt_us(&self) -> u32 {
        self.inner.srtt_us()
    }
    /// Windowed minimum RTT in microseconds (None before the first sample).
    #[getter]
    fn min_rtt_us(&self) -> Option<u32> {
        let m = self.inner.min_rtt_us();
        (m != u32::MAX).then_some(m)
    }
    #[getter]
    fn ca_state(&self) -> &'static str {
        state_name(self.inner.ca_state)
    }
    #[getter]
    fn is_cwnd_limited_flag(&self) -> bool {
        self.inner.is_cwnd_limited
    }
    /// Linux `tcp_in_slow_start`.
    fn in_slow_start(&self) -> bool {
        self.inner.in_slow_start()
    }
    /// Linux `tcp_is_cwnd_limited`.
    fn is_cwnd_limited(&self) -> bool {
        self.inner.is_cwnd_limited()
    }
    /// Linux `tcp_packets_in_flight`.
    fn packets_in_flight(&self) -> u32 {
        self.inner.packets_in_flight()
    }
    /// Linux `tcp_slow_start`: returns the acked packets left over.
    fn slow_start(&mut self, acked: u32) -> u32 {
        self.inner.slow_start(acked)
    }
    /// Linux `tcp_cong_avoid_ai`: +1 per `w` packets acknowledged.
    fn cong_avoid_ai(&mut self, w: u32, acked: u32) {
        self.inner.cong_avoid_ai(w, acked)
    }
    fn reno_cong_avoid(&mut self, acked: u32) {
        self.inner.reno_cong_avoid(acked)
    }
    fn reno_ssthresh(&self) -> u32 {
        self.inner.reno_ssthresh()
    }
    fn reno_undo_cwnd(&self) -> u32 {
        self.inner.reno_undo_cwnd()
    }
}

/// `pkts_acked`'s argument.
#[pyclass(module = "ccarena._engine", name = "AckSample", get_all)]
pub struct PyAckSample {
    pkts_acked: u32,
    rtt_us: i64,
    in_flight: u32,
}

/// `cong_control`'s argument (Linux `struct rate_sample`).
#[pyclass(module = "ccarena._engine", name = "RateSample", get_all)]
pub struct PyRateSample {
    prior_delivered: u32,
    delivered: i64,
    interval_us: i64,
    rtt_us: i64,
    losses: u32,
    acked_sacked: u32,
    prior_in_flight: u32,
    is_app_limited: bool,
    is_retrans: bool,
    is_ack_delayed: bool,
}

const HOOKS: [&str; 8] =
    ["init", "cong_avoid", "cong_control", "set_state", "cwnd_event", "in_ack_event", "pkts_acked", "undo_cwnd"];

pub struct PyCca {
    name: String,
    obj: Py<PyAny>,
    sock: Py<Sock>,
    has: [bool; HOOKS.len()],
    wants_pacing: bool,
    errors: Arc<Mutex<Vec<String>>>,
    failed: bool,
}

impl PyCca {
    fn has(&self, hook: &str) -> bool {
        HOOKS.iter().position(|h| *h == hook).is_some_and(|i| self.has[i])
    }

    /// Calls `hook(sock, *args)` with the socket state mirrored in and out.
    fn call<F>(&mut self, tp: &mut TcpSock, hook: &str, args: F) -> Option<Py<PyAny>>
    where
        F: for<'py> FnOnce(Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>>,
    {
        if self.failed {
            return None;
        }
        Python::attach(|py| {
            let sock = self.sock.bind(py);
            sock.borrow_mut().inner = tp.clone();
            let result = args(py).and_then(|extra| {
                let mut all = vec![sock.clone().into_any()];
                all.extend(extra);
                self.obj.bind(py).call_method1(hook, PyTuple::new(py, all)?)
            });
            match result {
                Ok(r) => {
                    *tp = sock.borrow().inner.clone();
                    Some(r.unbind())
                }
                Err(e) => {
                    // Ctrl-C inside a hook is the user stopping the run, not a fault of the algorithm.
                    let msg = if e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
                        INTERRUPTED.to_string()
                    } else {
                        let tb = e.traceback(py).and_then(|t| t.format().ok()).unwrap_or_default();
                        format!("{}.{hook}: {e}\n{tb}", self.name)
                    };
                    self.errors.lock().expect("errors").push(msg);
                    self.failed = true;
                    None
                }
            }
        })
    }

    fn call_u32(&mut self, tp: &mut TcpSock, hook: &str, fallback: u32) -> u32 {
        let Some(r) = self.call(tp, hook, |_| Ok(vec![])) else { return fallback };
        Python::attach(|py| match r.bind(py).extract::<u32>() {
            Ok(v) => v,
            Err(_) => {
                self.errors.lock().expect("errors").push(format!("{}.{hook}: must return a non-negative int", self.name));
                self.failed = true;
                fallback
            }
        })
    }
}

fn any<'py, T: IntoPyObject<'py>>(py: Python<'py>, v: T) -> PyResult<Bound<'py, PyAny>> {
    v.into_bound_py_any(py)
}

impl CongestionControl for PyCca {
    fn name(&self) -> &str {
        &self.name
    }

    fn init(&mut self, tp: &mut TcpSock) {
        if self.has("init") {
            self.call(tp, "init", |_| Ok(vec![]));
        }
    }

    fn ssthresh(&mut self, tp: &mut TcpSock) -> u32 {
        let fallback = tp.reno_ssthresh();
        self.call_u32(tp, "ssthresh", fallback)
    }

    fn cong_avoid(&mut self, tp: &mut TcpSock, ack: u32, acked: u32) {
        if self.has("cong_avoid") {
            self.call(tp, "cong_avoid", |py| Ok(vec![any(py, ack)?, any(py, acked)?]));
        }
    }

    fn has_cong_control(&self) -> bool {
        self.has("cong_control")
    }

    fn cong_control(&mut self, tp: &mut TcpSock, rs: &RateSample) {
        let sample = PyRateSample {
            prior_delivered: rs.prior_delivered,
            delivered: rs.delivered,
            interval_us: rs.interval_us,
            rtt_us: rs.rtt_us,
            losses: rs.losses,
            acked_sacked: rs.acked_sacked,
            prior_in_flight: rs.prior_in_flight,
            is_app_limited: rs.is_app_limited,
            is_retrans: rs.is_retrans,
            is_ack_delayed: rs.is_ack_delayed,
        };
        self.call(tp, "cong_control", move |py| Ok(vec![Bound::new(py, sample)?.into_any()]));
    }

    fn undo_cwnd(&mut self, tp: &mut TcpSock) -> u32 {
        let fallback = tp.reno_undo_cwnd();
        self.call_u32(tp, "undo_cwnd", fallback)
    }

    fn set_state(&mut self, tp: &mut TcpSock, new_state: CaState) {
        if self.has("set_state") {
            self.call(tp, "set_state", move |py| Ok(vec![any(py, state_name(new_state))?]));
        }
    }

    fn cwnd_event(&mut self, tp: &mut TcpSock, ev: CaEvent) {
        if self.has("cwnd_event") {
            self.call(tp, "cwnd_event", move |py| Ok(vec![any(py, event_name(ev))?]));
        }
    }

    fn in_ack_event(&mut self, tp: &mut TcpSock, flags: u32) {
        if self.has("in_ack_event") {
            self.call(tp, "in_ack_event", move |py| Ok(vec![any(py, flags)?]));
        }
    }

    fn pkts_acked(&mut self, tp: &mut TcpSock, s: &AckSample) {
        if self.has("pkts_acked") {
            let sample = PyAckSample { pkts_acked: s.pkts_acked, rtt_us: s.rtt_us, in_flight: s.in_flight };
            self.call(tp, "pkts_acked", move |py| Ok(vec![Bound::new(py, sample)?.into_any()]));
        }
    }

    fn wants_pacing(&self) -> bool {
        self.wants_pacing
    }
}

/// Builds `PyCca`s for the names a run's caller registered.
/// What a hook's error list holds when the hook was interrupted (Ctrl-C).
pub const INTERRUPTED: &str = "KeyboardInterrupt";

pub struct PyFactory {
    pub classes: HashMap<String, Py<PyAny>>,
    pub errors: Arc<Mutex<Vec<String>>>,
}

fn param_to_py<'py>(py: Python<'py>, v: &ParamValue) -> PyResult<Bound<'py, PyAny>> {
    match v {
        ParamValue::Bool(b) => any(py, *b),
        ParamValue::Int(i) => any(py, *i),
        ParamValue::Float(x) => any(py, *x),
    }
}

impl CcaFactory for PyFactory {
    fn names(&self) -> Vec<String> {
        self.classes.keys().cloned().collect()
    }

    fn build(&self, name: &str, params: &BTreeMap<String, ParamValue>) -> Option<Result<Box<dyn CongestionControl>, String>> {
        let cls = self.classes.get(name)?;
        Some(Python::attach(|py| {
            let kwargs = PyDict::new(py);
            for (k, v) in params {
                kwargs.set_item(k, param_to_py(py, v).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
            }
            let obj = cls
                .bind(py)
                .call((), Some(&kwargs))
                .map_err(|e| format!("cca_params: {name}({}) failed: {e}", params.keys().cloned().collect::<Vec<_>>().join(", ")))?;
            let mut has = [false; HOOKS.len()];
            for (i, hook) in HOOKS.iter().enumerate() {
                has[i] = obj.hasattr(*hook).unwrap_or(false);
            }
            if !has[1] && !has[2] {
                return Err(format!("cca: {name} defines neither cong_avoid nor cong_control"));
            }
            let wants_pacing = obj.getattr("wants_pacing").and_then(|v| v.extract::<bool>()).unwrap_or(false);
            let sock = Py::new(py, Sock { inner: TcpSock::new(1448, 250, 10) }).map_err(|e| e.to_string())?;
            Ok(Box::new(PyCca {
                name: name.to_string(),
                obj: obj.unbind(),
                sock,
                has,
                wants_pacing,
                errors: self.errors.clone(),
                failed: false,
            }) as Box<dyn CongestionControl>)
        }))
    }
}
