"""Running a sweep into a results directory: expand the scenario's [sweep],
skip what is already stored, execute the rest on an executor and store each
run as it finishes (the only writer of the database is this process).

    >>> from ccarena.experiments.runner import run_sweep
    >>> outcome = run_sweep("cubic-fig8-intra-fairness", "results", quick=True)

Resumable: run ids are content addressed, so running the same sweep again
computes only the runs that are not stored yet (and those that failed), and
again those that another build of ccarena computed (unless told to keep them).
"""

from __future__ import annotations

import contextlib
import hashlib
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import ScenarioError
from ..results.claims import Claims
from ..results.store import Store, load
from ..scenario.catalogue import Catalogue
from ..scenario.document import apply_overrides, read_document
from ..scenario.model import Scenario
from ..version import build_id
from .executors import Event, Idle, LocalExecutor, RunDone, RunFailed, RunProgress, Task
from .sweep import RunSpec, Sweep, apply_quick, expand_sweep, parse_sweep, quick_settings

__all__ = ["run_sweep", "sweep", "SweepOutcome", "SweepPlan", "prepare", "stale_note"]


@dataclass
class SweepOutcome:
    experiment_id: str
    directory: Path
    total: int = 0
    cached: int = 0
    computed: int = 0
    failed: int = 0
    skipped: int = 0
    #: Stored runs of this sweep that another build computed (recomputed unless kept), and those builds.
    stale: int = 0
    stale_builds: list[str] = field(default_factory=list)
    kept_stale: bool = False
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
            "stale": self.stale,
            "stale_builds": self.stale_builds,
            "kept_stale": self.kept_stale,
            "skip_reasons": self.skip_reasons,
            "errors": self.errors,
            "wall_s": self.wall_s,
            "simulated_s": self.simulated_s,
            "executor": self.executor,
        }


@dataclass
class SweepPlan:
    """A sweep ready to run: the document (quick settings and overrides
    applied), its [sweep] table parsed once, and its runs."""

    doc: dict
    sweep: Sweep | None
    specs: list[RunSpec]
    #: The scenario's file (relative paths in it start from its directory).
    path: str | None = None
    #: Whether [sweep.quick] settings were applied.
    quick: bool = False

    @property
    def axes(self) -> list[dict]:
        return self.sweep.describe() if self.sweep is not None else []


def prepare(scenario: str | Path | dict | Scenario, overrides: dict[str, Any] | None = None, quick: bool = False,
            repetitions: int | None = None, catalogue: Catalogue | None = None, backend_key: str = "") -> SweepPlan:
    """The scenario's sweep with `quick` settings, `overrides` and `repetitions` applied, and its runs.

    `catalogue` validates the runs for a backend other than the simulator;
    `backend_key` (e.g. "testbed <inventory digest>") then keeps their run
    ids apart from the simulator's runs of the same scenario."""
    doc, path = _load_doc(scenario)
    quick = quick and bool(quick_settings(doc))
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
    sw = parse_sweep(doc)
    specs = expand_sweep(doc, sw, path=path, catalogue=catalogue)
    if backend_key:
        for s in specs:
            if s.engine is not None:
                s.run_id = hashlib.sha256(f"{s.run_id}\n{backend_key}".encode()).hexdigest()[:16]
                s.scenario_hash = hashlib.sha256(f"{s.scenario_hash}\n{backend_key}".encode()).hexdigest()[:16]
    return SweepPlan(doc=doc, sweep=sw, specs=specs, path=path, quick=quick)


def _load_doc(scenario: str | Path | dict | Scenario) -> tuple[dict, str | None]:
    """The document (not validated: a preset whose base names an algorithm the
    engine lacks is still a valid sweep) and its file; named after the file."""
    if isinstance(scenario, Scenario):
        return scenario.doc, scenario.path
    if isinstance(scenario, dict):
        return scenario, None
    doc, path = read_document(scenario)
    if path is not None:
        doc.setdefault("name", Path(path).stem)
    return doc, path


def run_sweep(
    scenario: str | Path | dict | Scenario | SweepPlan,
    out: str | Path = "results",
    *,
    overrides: dict[str, Any] | None = None,
    quick: bool = False,
    repetitions: int | None = None,
    executor=None,
    name: str | None = None,
    variant: str | None = None,
    retry_failed: bool = True,
    keep_stale: bool = False,
    command: str = "",
    on_event: Callable[[str, dict], None] | None = None,
) -> SweepOutcome:
    """Runs the scenario's sweep into the results directory `out` (`scenario`
    may also be a prepared ``SweepPlan``; then `overrides`, `quick` and
    `repetitions` have been applied already).

    `executor` is a ``LocalExecutor`` (default, all cores) or a
    ``DaskExecutor``. Stored runs that another build of ccarena computed
    (``version.build_id``) are computed again unless `keep_stale`; `command`
    is the command line stored as the experiment's provenance.
    `on_event(kind, info)` is called with "start" (totals, and `stale`: the
    stored runs of other builds, `stale_builds`: those builds),
    "progress" (simulated seconds), "run" (a finished or failed run).
    Raises ``ScenarioError`` for invalid input; KeyboardInterrupt leaves every
    run stored so far in the database.
    """
    plan = scenario if isinstance(scenario, SweepPlan) else prepare(scenario, overrides, quick, repetitions)
    doc, specs = plan.doc, plan.specs
    exp_name = name or str(doc.get("name", "scenario"))
    exp_variant = variant if variant is not None else ("quick" if quick else "")
    experiment_id = exp_name if not exp_variant else f"{exp_name}@{exp_variant}"
    executor = executor or LocalExecutor()
    outcome = SweepOutcome(experiment_id=experiment_id, directory=Path(out), total=len(specs), executor=executor.description)
    started = time.perf_counter()
    emit = on_event or (lambda kind, info: None)
    # The sweep waits (up to minutes) for a reader such as `ccarena results` to let go of the database.
    claims = Claims(out)
    with Store(out, lock_wait_s=600) as store, contextlib.ExitStack() as held:
        held.callback(claims.release_all)
        store.register_experiment(experiment_id, exp_name, exp_variant, doc, specs, plan.axes, command=command)
        done = store.completed()
        failed_before = store.failed()
        current = build_id()
        todo: dict[str, RunSpec] = {}
        stale: dict[str, str] = {}
        for s in specs:
            if s.skip_reason:
                outcome.skipped += 1
                outcome.skip_reasons[s.skip_reason] = outcome.skip_reasons.get(s.skip_reason, 0) + 1
            elif s.run_id in todo or s.run_id in stale:
                outcome.cached += 1  # the same run twice in this sweep
            elif s.run_id in done and (done[s.run_id] == current or keep_stale):
                if done[s.run_id] != current:
                    stale[s.run_id] = done[s.run_id]
                outcome.cached += 1  # stored already (by this build, or kept on request)
            elif s.run_id not in done and not retry_failed and s.run_id in failed_before:
                outcome.cached += 1  # failed before; not retried
            elif not claims.claim(s.run_id):
                # Another sweep into this directory is computing it (claimed while
                # this one holds the database, so it cannot be stored in between).
                reason = "being computed by another sweep"
                outcome.skipped += 1
                outcome.skip_reasons[reason] = outcome.skip_reasons.get(reason, 0) + 1
            elif s.run_id in done:
                stale[s.run_id] = done[s.run_id]  # stored by another build: recomputed
                todo[s.run_id] = s
            else:
                todo[s.run_id] = s
        outcome.stale = len(stale)
        outcome.stale_builds = sorted(set(stale.values()))
        outcome.kept_stale = keep_stale and bool(stale)
        total_sim = sum(s.simulated_s for s in todo.values())
        emit("start", {"experiment": experiment_id, "runs": len(todo), "cached": outcome.cached, "skipped": outcome.skipped,
                       "stale": outcome.stale, "stale_builds": outcome.stale_builds, "kept_stale": outcome.kept_stale, "build": current,
                       "simulated_s": total_sim, "skip_reasons": outcome.skip_reasons, "executor": executor.description})
        tasks = [_task(s, getattr(executor, "needs_scenario", False)) for s in todo.values()]
        store.release()
        if tasks:
            with _deferred_interrupt() as interrupted:
                _execute(executor, tasks, todo, store, outcome, emit, total_sim, interrupted, claims)
    outcome.wall_s = time.perf_counter() - started
    return outcome


def sweep(scenario: str | Path | dict | Scenario, out: str | Path = "results", *, quick: bool = False,
          overrides: dict[str, Any] | None = None, repetitions: int | None = None, jobs: int | None = None,
          keep_stale: bool = False, progress: bool = True, name: str | None = None):
    """Runs a scenario's sweep into `out` and returns the directory's
    ``Results`` (``ccarena.sweep("cubic-fig8-intra-fairness", quick=True)``).

    Resumable like ``ccarena sweep``: stored runs of this build are reused.
    `progress` writes one line to stderr that rewrites itself (a terminal and
    a Jupyter cell both show it), and notes such as recomputed runs of another
    build (`keep_stale` reuses them) or skipped grid points."""
    def on_event(kind: str, info: dict) -> None:
        if kind == "start":
            note = stale_note(info["stale"], info["stale_builds"], info["kept_stale"], "keep_stale=True")
            for line in ([note] if note else []) + [f"skipping {v} runs: {k}" for k, v in info["skip_reasons"].items()]:
                print(f"{info['experiment']}: {line}", file=sys.stderr)
            if progress:
                print(f"{info['experiment']}: {info['runs']} runs to compute, {info['cached']} stored", file=sys.stderr)
        elif kind == "progress" and progress and "done" in info:
            frac = info["simulated_s"] / info["total_s"] if info["total_s"] else 1.0
            end = "\n" if info["done"] == info["runs"] else ""
            print(f"\r{info['done']}/{info['runs']} runs, {100 * frac:.0f} % simulated", end=end, file=sys.stderr, flush=True)

    run_sweep(scenario, out, overrides=overrides, quick=quick, repetitions=repetitions,
              executor=LocalExecutor(jobs) if jobs else None, name=name, keep_stale=keep_stale, on_event=on_event)
    return load(out)


def stale_note(stale: int, builds: list[str], kept: bool, option: str = "--keep-stale") -> str:
    """The one line that says a sweep met stored runs of another build (empty when it met none)."""
    if not stale:
        return ""
    which = ", ".join(builds[:3]) + (", ..." if len(builds) > 3 else "")
    runs = "run" if stale == 1 else "runs"
    if kept:
        return f"{stale} stored {runs} came from another build ({which}); reusing them as asked ({build_id()} is this one)"
    return f"{stale} stored {runs} came from another build ({which}); recomputing (pass {option} to reuse them)"


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


def _task(spec: RunSpec, with_scenario: bool = False) -> Task:
    """What a worker needs to run `spec` on the simulator (and, for another
    backend's executor, the scenario itself)."""
    meta = spec.meta
    python = meta.python_ccas if meta is not None else ()
    scenario = Scenario(doc=spec.doc, engine=spec.engine, meta=spec.meta) if with_scenario else None
    return Task(run_id=spec.run_id, engine_json=spec.engine_json(), duration_s=spec.simulated_s, python_ccas=python,
                cca_files=meta.cca_files if python else (), scenario=scenario)


def _execute(executor, tasks: list[Task], todo: dict[str, RunSpec], store: Store, outcome: SweepOutcome, emit, total_sim: float,
             interrupted: dict, claims: Claims | None = None) -> None:
    partial: dict[str, float] = {}
    finished_sim = 0.0
    events: Iterator[Event] = executor.run(tasks)
    try:
        for ev in events:
            if interrupted["set"]:
                raise KeyboardInterrupt
            if isinstance(ev, Idle):
                # Readers (ccarena results, another sweep) get the database while no
                # outcome waits; outcomes that arrive together are stored under one
                # connection (opening DuckDB costs tens of milliseconds).
                store.release()
                continue
            rid = ev.run_id
            spec = todo[rid]
            if isinstance(ev, RunProgress):
                partial[rid] = ev.simulated_s
                emit("progress", {"simulated_s": finished_sim + sum(partial.values()), "total_s": total_sim})
                continue
            partial.pop(rid, None)
            finished_sim += spec.simulated_s
            if isinstance(ev, RunDone):
                try:
                    metrics = store.store_run(spec, ev.record_json, ev.wall_s, ev.build or None)
                    outcome.computed += 1
                    emit("run", {"run_id": rid, "ok": True, "params": spec.params, "repetition": spec.repetition, "metrics": metrics})
                except Exception as e:  # noqa: BLE001 - an analysis failure is recorded like a crash
                    store.store_failure(spec, f"analysis failed: {type(e).__name__}: {e}", ev.wall_s)
                    outcome.failed += 1
                    outcome.errors[rid] = str(e)
                    emit("run", {"run_id": rid, "ok": False, "params": spec.params, "error": str(e)})
            else:
                assert isinstance(ev, RunFailed)
                store.store_failure(spec, ev.error, ev.wall_s)
                outcome.failed += 1
                outcome.errors[rid] = ev.error
                emit("run", {"run_id": rid, "ok": False, "params": spec.params, "error": ev.error})
            if claims is not None:
                claims.release(rid)  # stored: a sweep starting now finds it done
            outcome.simulated_s = finished_sim
            emit("progress", {"simulated_s": finished_sim + sum(partial.values()), "total_s": total_sim,
                              "done": outcome.computed + outcome.failed, "runs": len(todo)})
    finally:
        events.close()  # stops the workers
