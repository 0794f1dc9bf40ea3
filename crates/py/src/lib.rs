//! PyO3 bindings: the thinnest layer that lets Python hand a resolved scenario
//! (JSON in engine units) to the engine and get its records back.
use pyo3::prelude::*;
