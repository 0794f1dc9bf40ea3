"""The simulator backend: the Rust engine, with algorithms written in Python
handed to it as classes. ``simulate`` is the one loop that runs the engine
(used by ``ccarena.run`` and by the sweep workers alike); ``run`` is
``ccarena.run``.

    >>> import ccarena
    >>> r = ccarena.run("quickstart", overrides={"run.duration": "5s"})
    >>> r.flows[["cca", "throughput_mbps"]]
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .. import _engine
from ..scenario.catalogue import Catalogue, engine_cca_names
from ..scenario.model import Scenario
from .base import ProgressCallback
from .cca import check_params, load_cca_files, python_classes, registered_ccas

if TYPE_CHECKING:  # pragma: no cover - RunResult pulls in pandas
    from ..results.result import RunResult

__all__ = ["SimBackend", "SIM", "simulate", "run"]


def simulate(engine_json: str, py_ccas: dict[str, type] | None = None, progress: ProgressCallback | None = None,
             slices: int = 100) -> str:
    """Runs the engine on its input (JSON) and returns the run's record (JSON
    text). `py_ccas` are the classes of the algorithms written in Python the
    flows use; with `progress` the run advances in `slices` steps, reporting
    (simulated seconds, total) after each. Raises ValueError for an input the
    engine refuses."""
    if progress is None:
        return _engine.run_json(engine_json, py_ccas or None)
    engine = _engine.Engine(engine_json, py_ccas or None)
    total = engine.duration_ns
    for k in range(1, slices + 1):
        now = engine.advance(total * k // slices)
        progress(now / 1e9, total / 1e9)
    return engine.finish()


class SimBackend:
    """The simulator: the engine's algorithms and those registered from Python."""

    name = "sim"
    progress_unit = "s simulated"

    def algorithms(self) -> Catalogue:
        python = frozenset(registered_ccas())
        return Catalogue(backend=self.name, names=engine_cca_names() | python, python=python, check_params=check_params,
                         load_files=self._with_files)

    def _with_files(self, files: Sequence[Path]) -> Catalogue:
        load_cca_files(files)
        return self.algorithms()

    def load(self, source: str | Path | dict | Scenario, overrides: dict[str, Any] | None = None) -> Scenario:
        # The engine checks its input when the run starts: that is the one check.
        return Scenario.load(source, self.algorithms(), overrides, check=False)

    def run(self, scenario: Scenario, progress: ProgressCallback | None = None, slices: int = 100) -> "RunResult":
        # pandas and the result tables: sweep workers import this module for `simulate` only.
        from ..results.result import RunResult

        scenario.check_cost()
        classes = python_classes(scenario.meta.python_ccas)
        started = time.perf_counter()
        try:
            record_json = simulate(scenario.engine_json(), classes, progress, slices)
        except ValueError as e:  # the engine checks what it runs (scenarios loaded to run at once are checked only here)
            raise scenario.engine_error(e) from None
        wall = time.perf_counter() - started
        return RunResult(scenario=scenario, record=json.loads(record_json), wall_time_s=wall)


SIM = SimBackend()


def run(
    scenario: str | Path | dict | Scenario,
    overrides: dict[str, Any] | None = None,
    progress: Callable[[float, float], None] | None = None,
    slices: int = 100,
) -> "RunResult":
    """Runs `scenario` (a path, preset name, TOML text, dict or Scenario) on the simulator.

    `overrides` sets dotted fields first (``{"run.seed": 3}``). `progress`, if
    given, is called with (simulated seconds done, total) as the run advances.
    Raises ``ScenarioError`` for invalid input.
    """
    return SIM.run(SIM.load(scenario, overrides), progress, slices)
