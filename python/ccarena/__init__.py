"""ccarena: a fast, Linux-faithful arena for TCP congestion-control experiments.

The engine (Rust) simulates packets; this package validates scenarios, runs
them, and turns records into tables. Start with ``ccarena.run``:

    >>> import ccarena
    >>> result = ccarena.run("quickstart")
    >>> result.flows            # per-flow DataFrame
    >>> result.timeseries       # cwnd, sRTT, throughput ... over time
    >>> result.summary          # utilisation, Jain's index, throughput ratio

Sweeps (``ccarena sweep FILE``) store their runs in a results directory;
``ccarena.load(DIR)`` returns its experiments, runs, flows and metrics as
DataFrames.
"""

from importlib.metadata import PackageNotFoundError, version as _pkg_version

try:
    __version__ = _pkg_version("ccarena")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+local"

from .api import run  # noqa: E402
from .result import RunResult, load_result  # noqa: E402
from .scenario import Scenario, ScenarioError, cca_catalogue, load_scenario  # noqa: E402
from .store import Results, load  # noqa: E402

__all__ = ["run", "RunResult", "load_result", "load", "Results", "Scenario", "ScenarioError", "load_scenario", "cca_catalogue", "__version__"]
