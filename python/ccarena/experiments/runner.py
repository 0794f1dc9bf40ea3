"""Running a sweep into a results directory: expand the scenario's [sweep],
skip what is already stored, execute the rest on an executor and store each
run as it finishes (the only writer of the database is this process).

    >>> from ccarena.runner import run_sweep
    >>> outcome = run_sweep("cubic-fig8-intra-fairness", "results", quick=True)

Resumable: run ids are content addressed, so running the same sweep again
computes only the runs that are not stored yet (and those that failed).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..scenario.model import Scenario, ScenarioError, apply_overrides, load_scenario
from ..results.store import Store
from .sweep import RunSpec, apply_quick, expand

__all__ = ["run_sweep", "SweepOutcome", "prepare", "missing_features"]


@dataclass
class SweepOutcome:
    experiment_id: str
    directory: Path
    total: int = 0
    cached: int = 0
    computed: int = 0
    failed: int = 0
    skipped: int = 0
    skip_reasons: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    simulated_s: float = 0.0
    executor: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "experiment": self.experiment_id,
            "directory": str(self.directory),
            "total": self.total,
            "cached": self.cached,
            "computed": self.computed,
            "failed": self.failed,
            "skipped": self.skipped,
            "skip_reasons": self.skip_reasons,
            "errors": self.errors,
            "wall_s": self.wall_s,
            "simulated_s": self.simulated_s,
            "executor": self.executor,
        }


def missing_features(doc: dict) -> list[str]:
    """Entries of the scenario's `requires` list this engine does not provide yet.

    `cca:NAME` entries are checked against the engine's catalogue; every other
    entry (traffic models, path dynamics) names a feature the scenario format
    does not have yet, so it is missing until the preset is updated to use it
    (and the entry removed)."""
    from ..scenario.model import cca_catalogue

    req = doc.get("requires", [])
    if not isinstance(req, list):
        raise ScenarioError("requires", "must be a list of features such as [\"traffic:udp\", \"path:rate-step\"]")
    names = {c["name"] for c in cca_catalogue()}
    out = []
    for r in req:
        if not isinstance(r, str):
            raise ScenarioError("requires", f"entries must be strings, got {r!r}")
        if r.startswith("cca:"):
            if r[4:] not in names:
                out.append(r)
        else:
            out.append(r)
    return out


def prepare(scenario: str | Path | dict | Scenario, overrides: dict[str, Any] | None = None, quick: bool = False,
            repetitions: int | None = None) -> tuple[dict, list[RunSpec]]:
    """The scenario document (quick settings and overrides applied) and its runs."""
    doc = _load_doc(scenario)
    if quick:
        doc = apply_quick(doc)
    if overrides:
        doc = apply_overrides(doc, overrides)
    if repetitions is not None:
        if repetitions < 1:
            raise ScenarioError("--repetitions", f"must be at least 1, got {repetitions}")
        doc = dict(doc)
        sweep = dict(doc.get("sweep") or {})
        sweep.pop("seeds", None)
        sweep["repetitions"] = repetitions
        doc["sweep"] = sweep
    return doc, expand(doc)


def _load_doc(scenario) -> dict:
    if isinstance(scenario, Scenario):
        return scenario.doc
    if isinstance(scenario, dict):
        return scenario
    # load_scenario validates the base scenario; a preset whose base names an
    # algorithm the engine lacks is still a valid sweep, so read the TOML directly.
    import tomllib

    from ..scenario.presets import preset_path

    text = str(scenario)
    p = Path(text)
    if "\n" in text:
        return tomllib.loads(text)
    if not p.is_file():
        pp = preset_path(text)
        if pp is None:
            load_scenario(text)  # raises the usual "no such file or preset" error
        p = pp
    try:
        doc = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError("", f"{p}: not valid TOML: {e}") from None
    doc.setdefault("name", p.stem)
    return doc


def run_sweep(
    scenario: str | Path | dict | Scenario,
    out: str | Path = "results",
    *,
    overrides: dict[str, Any] | None = None,
    quick: bool = False,
    repetitions: int | None = None,
    executor=None,
    name: str | None = None,
    variant: str | None = None,
    retry_failed: bool = True,
    on_event: Callable[[str, dict], None] | None = None,
) -> SweepOutcome:
    """Runs the scenario's sweep into the results directory `out`.

    `executor` is a ``LocalExecutor`` (default, all cores) or a
    ``DaskExecutor``. `on_event(kind, info)` is called with "start" (totals),
    "progress" (simulated seconds), "run" (a finished or failed run).
    Raises ``ScenarioError`` for invalid input; KeyboardInterrupt leaves every
    run stored so far in the database.
    """
    from .executors import LocalExecutor

    doc, specs = prepare(scenario, overrides, quick, repetitions)
    exp_name = name or str(doc.get("name", "scenario"))
    exp_variant = variant if variant is not None else ("quick" if quick else "")
    experiment_id = exp_name if not exp_variant else f"{exp_name}@{exp_variant}"
    executor = executor or LocalExecutor()
    outcome = SweepOutcome(experiment_id=experiment_id, directory=Path(out), total=len(specs), executor=executor.description)
    started = time.perf_counter()
    emit = on_event or (lambda kind, info: None)
    # The sweep waits (up to minutes) for a reader such as `ccarena results` to let go of the database.
    with Store(out, lock_wait_s=600) as store:
        store.register_experiment(experiment_id, exp_name, exp_variant, doc, specs)
        done = store.completed()
        failed_before = store.failed()
        todo: dict[str, RunSpec] = {}
        for s in specs:
            if s.skip_reason:
                outcome.skipped += 1
                outcome.skip_reasons[s.skip_reason] = outcome.skip_reasons.get(s.skip_reason, 0) + 1
            elif s.run_id in done or s.run_id in todo or (not retry_failed and s.run_id in failed_before):
                outcome.cached += 1  # stored already, or the same run twice in this sweep
            else:
                todo[s.run_id] = s
        total_sim = sum(s.simulated_s for s in todo.values())
        emit("start", {"experiment": experiment_id, "runs": len(todo), "cached": outcome.cached, "skipped": outcome.skipped,
                       "simulated_s": total_sim, "skip_reasons": outcome.skip_reasons, "executor": executor.description})
        tasks = [{"run_id": s.run_id, "engine_json": s.engine_json(), "duration_s": s.simulated_s} for s in todo.values()]
        store.release()
        if tasks:
            with _deferred_interrupt() as interrupted:
                _execute(executor, tasks, todo, store, outcome, emit, total_sim, interrupted)
    outcome.wall_s = time.perf_counter() - started
    return outcome


@contextlib.contextmanager
def _deferred_interrupt():
    """Ctrl-C sets a flag checked between events (so no database write is cut
    short); a second Ctrl-C interrupts at once."""
    flag = {"set": False}
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum, frame):
        if flag["set"]:
            raise KeyboardInterrupt
        flag["set"] = True

    old = signal.signal(signal.SIGINT, handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, old)


def _execute(executor, tasks, todo, store, outcome, emit, total_sim, interrupted) -> None:
    partial: dict[str, float] = {}
    finished_sim = 0.0
    events = executor.run(tasks)
    try:
        for ev in events:
            if interrupted["set"]:
                raise KeyboardInterrupt
            kind, rid = ev[0], ev[1]
            if kind == "tick":
                continue
            spec = todo[rid]
            if kind == "progress":
                partial[rid] = ev[2]
                emit("progress", {"simulated_s": finished_sim + sum(partial.values()), "total_s": total_sim})
                continue
            partial.pop(rid, None)
            finished_sim += spec.simulated_s
            if kind == "done":
                try:
                    metrics = store.store_run(spec, ev[2], ev[3])
                    outcome.computed += 1
                    emit("run", {"run_id": rid, "ok": True, "params": spec.params, "repetition": spec.repetition, "metrics": metrics})
                except Exception as e:  # noqa: BLE001 - an analysis failure is recorded like a crash
                    store.store_failure(spec, f"analysis failed: {type(e).__name__}: {e}", ev[3])
                    outcome.failed += 1
                    outcome.errors[rid] = str(e)
                    emit("run", {"run_id": rid, "ok": False, "params": spec.params, "error": str(e)})
            else:
                store.store_failure(spec, ev[2], ev[3])
                outcome.failed += 1
                outcome.errors[rid] = ev[2]
                emit("run", {"run_id": rid, "ok": False, "params": spec.params, "error": ev[2]})
            store.release()  # readers may look in between runs
            outcome.simulated_s = finished_sim
            emit("progress", {"simulated_s": finished_sim + sum(partial.values()), "total_s": total_sim,
                              "done": outcome.computed + outcome.failed, "runs": len(todo)})
    finally:
        events.close()  # stops the workers
