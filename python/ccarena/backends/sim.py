"""The Python entry points: ``ccarena.run`` runs one scenario on the simulator
and returns a ``RunResult`` whose tables are pandas DataFrames.

    >>> import ccarena
    >>> r = ccarena.run("quickstart", overrides={"run.duration": "5s"})
    >>> r.flows[["cca", "throughput_mbps"]]
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from .. import _engine
from ..results.result import RunResult
from ..scenario.model import Scenario, load_scenario

__all__ = ["run"]

ProgressCallback = Callable[[float, float], None]


def run(
    scenario: str | Path | dict | Scenario,
    overrides: dict[str, Any] | None = None,
    progress: ProgressCallback | None = None,
    slices: int = 100,
) -> RunResult:
    """Runs `scenario` (a path, preset name, TOML text, dict or Scenario).

    `overrides` sets dotted fields first (``{"run.seed": 3}``). `progress`, if
    given, is called with (simulated seconds done, total) as the run advances.
    Raises ``ScenarioError`` for invalid input.
    """
    sc = load_scenario(scenario)
    if overrides:
        sc = sc.with_overrides(overrides)
    started = time.perf_counter()
    py_ccas = sc.python_ccas() or None
    if progress is None:
        record_json = _engine.run_json(sc.engine_json(), py_ccas)
    else:
        engine = _engine.Engine(sc.engine_json(), py_ccas)
        total = engine.duration_ns
        for k in range(1, slices + 1):
            now = engine.advance(total * k // slices)
            progress(now / 1e9, total / 1e9)
        record_json = engine.finish()
    wall = time.perf_counter() - started
    import json

    return RunResult(scenario=sc, record=json.loads(record_json), wall_time_s=wall)
