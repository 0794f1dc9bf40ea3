"""ccarena: a fast, Linux-faithful arena for TCP congestion-control experiments.

The engine (Rust) simulates packets; this package validates scenarios, runs
them, and turns records into tables. Start with ``ccarena.run``:

    >>> import ccarena
    >>> result = ccarena.run("quickstart")
    >>> result.flows            # per-flow DataFrame
    >>> result.timeseries       # cwnd, sRTT, throughput ... over time
    >>> result.summary          # utilisation, Jain's index, throughput ratio

Sweeps (``ccarena sweep FILE``, or ``ccarena.sweep(FILE)`` from Python)
store their runs in a results directory; ``ccarena.load(DIR)`` returns its
experiments, runs, flows and metrics as DataFrames.
"""

import importlib

from .version import __version__

# The public names are imported on first use, so that light users (the sweep
# workers, which only need the engine) do not pay for pandas and DuckDB.
_LAZY = {
    "run": ".backends.sim",
    "RunResult": ".results.result",
    "load_result": ".results.result",
    "load": ".results.store",
    "sweep": ".experiments.runner",
    "Results": ".results.store",
    "Scenario": ".scenario.model",
    "ScenarioError": ".errors",
    "CcarenaError": ".errors",
    "UnknownName": ".errors",
    "load_scenario": ".backends.registry",
    "cca_catalogue": ".scenario.catalogue",
    "CongestionControl": ".backends.cca",
    "register_cca": ".backends.cca",
    "registered_ccas": ".backends.cca",
    "load_cca_file": ".backends.cca",
}

__all__ = [*_LAZY, "__version__"]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ccarena' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
