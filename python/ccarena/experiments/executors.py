"""Executors: where the runs of a sweep execute.

Both executors take ``Task``s (a run id, the engine's input as JSON, and the
files of the Python algorithms it uses) and yield events; workers only
simulate and return the raw record as JSON text. Everything else (metrics,
the database) happens in the calling process.

* ``LocalExecutor``: a pool of worker processes (default: one per core). The
  parent hands each idle worker one task over its own pipe, so it always
  knows which run a worker is on: a worker that dies (a crash, the OOM killer)
  costs only its current run, which is reported as failed, and a fresh worker
  takes its place. Workers ignore Ctrl-C (the parent stops them) and die with
  the parent even if it is killed with SIGKILL.
* ``DaskExecutor``: the same tasks on a dask.distributed cluster
  (``--dask tcp://scheduler:8786``, or ``--dask local`` for a LocalCluster).
* ``BackendExecutor``: each task on another backend (the testbed's hosts),
  one at a time, in a thread of this process so that progress and Ctrl-C
  reach the sweep while a run is on; an interrupted run tears down before
  the sweep stops.

Events: ``RunProgress`` (simulated seconds so far), ``RunDone`` (the record),
``RunFailed`` (the error) and ``Idle`` (nothing to hand over now: the
caller may let readers at its store, and reacts to Ctrl-C).
"""

from __future__ import annotations

import ctypes
import importlib
import json
import multiprocessing as mp
import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any, Callable, Iterator, Union

from ..backends.cca import load_cca_files, python_classes
from ..backends.sim import simulate
from ..errors import ExecutorError
from ..version import build_id

__all__ = [
    "Task",
    "RunProgress",
    "RunDone",
    "RunFailed",
    "Idle",
    "Event",
    "execute_task",
    "LocalExecutor",
    "DaskExecutor",
    "BackendExecutor",
    "ExecutorError",
]


@dataclass(frozen=True)
class Task:
    """One run for a worker: what the simulator backend needs to run it there."""

    run_id: str
    engine_json: str
    duration_s: float
    #: Algorithms written in Python that the flows use, and the files that define
    #: them (loaded by the worker, which has not seen the parent's registrations).
    python_ccas: tuple[str, ...] = ()
    cca_files: tuple[str, ...] = ()
    #: The scenario itself, for executors that hand it to a backend (``BackendExecutor``); None otherwise.
    scenario: Any = None


@dataclass(frozen=True)
class RunProgress:
    run_id: str
    simulated_s: float


@dataclass(frozen=True)
class RunDone:
    run_id: str
    record_json: str
    wall_s: float
    #: The build identity of the worker that computed it (a Dask worker may run another build).
    build: str = ""


@dataclass(frozen=True)
class RunFailed:
    run_id: str
    error: str
    wall_s: float


@dataclass(frozen=True)
class Idle:
    """No outcome is waiting: yielded before an executor blocks, and every
    half second while it does."""


Event = Union[RunProgress, RunDone, RunFailed, Idle]
Outcome = Union[RunDone, RunFailed]

_SLICES = 20


def execute_task(task: Task, report: Callable[[float, float], None] | None = None) -> Outcome:
    """Runs one task in this process. `report(simulated_s, total_s)` is called as it advances."""
    t0 = time.perf_counter()
    try:
        load_cca_files(task.cca_files)
        classes = python_classes(task.python_ccas)
        rec = simulate(task.engine_json, classes, report, _SLICES)
        return RunDone(task.run_id, rec, time.perf_counter() - t0, build_id())
    except Exception as e:  # noqa: BLE001 - any failure of one run is reported, never raised
        tb = traceback.format_exc(limit=3).strip().splitlines()
        error = f"{type(e).__name__}: {e}" + (f" [{tb[-2].strip()}]" if len(tb) > 2 else "")
        return RunFailed(task.run_id, error, time.perf_counter() - t0)


def _task_function(path: str | None) -> Callable[..., Outcome]:
    """`execute_task`, or the "module:function" that replaces it (tests)."""
    if not path:
        return execute_task
    mod, _, name = path.partition(":")
    return getattr(importlib.import_module(mod), name)


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:  # not Linux: workers notice the closed pipe instead
        pass


def _worker_main(conn, task_fn_path: str | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    fn = _task_function(task_fn_path)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        last = [0.0]

        def report(sim_s: float, total_s: float = 0.0) -> None:
            now = time.monotonic()
            if now - last[0] > 0.25:
                last[0] = now
                conn.send(RunProgress(task.run_id, sim_s))

        out = fn(task, report)
        try:
            conn.send(out)
        except (BrokenPipeError, OSError):
            return


@dataclass
class _Worker:
    process: Any
    conn: Any
    task: Task | None = None  # the run it is on
    started: float = 0.0


class LocalExecutor:
    """A process pool over `jobs` cores (default: all)."""

    def __init__(self, jobs: int | None = None, task_fn: str | None = None):
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.task_fn = task_fn  # "module:function" replacing execute_task (tests)
        self.description = f"local, {self.jobs} process{'es' if self.jobs > 1 else ''}"

    def run(self, tasks: list[Task]) -> Iterator[Event]:
        ctx = mp.get_context("spawn")
        pending = list(reversed(tasks))
        workers: dict[int, _Worker] = {}
        n = min(self.jobs, len(tasks))

        def spawn(slot: int) -> None:
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker_main, args=(child, self.task_fn), daemon=True, name=f"ccarena-worker-{slot}")
            p.start()
            child.close()
            workers[slot] = _Worker(p, parent)

        def assign(slot: int) -> None:
            w = workers[slot]
            w.task = None
            if not pending:
                return
            task = pending.pop()
            for _ in range(3):
                try:
                    w.conn.send(task)
                    w.task, w.started = task, time.perf_counter()
                    return
                except (BrokenPipeError, OSError):  # the worker died while idle: replace it
                    w.conn.close()
                    spawn(slot)
                    w = workers[slot]
            raise RuntimeError("cannot start worker processes")

        try:
            for slot in range(n):
                spawn(slot)
                assign(slot)
            while any(w.task is not None for w in workers.values()):
                conns = {w.conn: s for s, w in workers.items() if w.task is not None}
                sentinels = {w.process.sentinel: s for s, w in workers.items() if w.task is not None}
                handles = list(conns) + list(sentinels)
                ready = wait(handles, timeout=0)
                if not ready:
                    yield Idle()
                    ready = wait(handles, timeout=0.5)
                if not ready:
                    continue
                dead: set[int] = set()
                for r in ready:
                    if r in sentinels:
                        dead.add(sentinels[r])
                        continue
                    slot = conns[r]
                    try:
                        msg = r.recv()
                    except (EOFError, OSError):
                        dead.add(slot)  # the worker is gone: handled below
                        continue
                    yield msg
                    if not isinstance(msg, RunProgress):
                        assign(slot)
                for slot in dead:
                    w = workers[slot]
                    if w.process.is_alive() or w.task is None:
                        continue
                    # Read what it sent before dying; its current run (if any) is lost.
                    while True:
                        try:
                            if not w.conn.poll():
                                break
                            msg = w.conn.recv()
                        except (EOFError, OSError):
                            break
                        yield msg
                        if not isinstance(msg, RunProgress):
                            w.task = None
                    task = w.task
                    code = w.process.exitcode
                    why = f"killed by signal {-code}" if code is not None and code < 0 else f"exit status {code}"
                    w.conn.close()
                    spawn(slot)
                    if task is not None:
                        yield RunFailed(task.run_id, f"worker process died ({why})", time.perf_counter() - w.started)
                    assign(slot)
        finally:
            for w in workers.values():
                try:
                    if w.process.is_alive():
                        if w.task is None:
                            w.conn.send(None)
                        else:
                            w.process.kill()
                except (OSError, BrokenPipeError):
                    pass
            deadline = time.monotonic() + 5
            for w in workers.values():
                w.process.join(timeout=max(0.0, deadline - time.monotonic()))
                if w.process.is_alive():
                    w.process.kill()
                    w.process.join(timeout=1)
                w.conn.close()


def _dask_task(task: Task) -> Outcome:
    return execute_task(task)


class DaskExecutor:
    """Runs tasks on a dask.distributed cluster given by its scheduler address ("local": a LocalCluster)."""

    def __init__(self, address: str, jobs: int | None = None, task_fn: str | None = None):
        self.address = address
        self.jobs = jobs
        self.task_fn = task_fn
        self.description = f"dask {address}"

    def run(self, tasks: list[Task]) -> Iterator[Event]:
        try:
            # dask.distributed: imported only by sweeps that use it (it is large).
            from distributed import Client, LocalCluster, as_completed
        except ImportError:  # pragma: no cover
            raise ExecutorError("--dask needs Dask: pip install 'ccarena[dask]' (or 'dask[distributed]')") from None
        cluster = None
        try:
            if self.address == "local":
                cluster = LocalCluster(n_workers=self.jobs or os.cpu_count() or 1, threads_per_worker=1, processes=True, dashboard_address=None)
                client = Client(cluster)
            else:
                client = Client(self.address, timeout="20s")
        except (OSError, TimeoutError, ValueError) as e:
            if cluster is not None:
                cluster.close()
            raise ExecutorError(f"--dask: cannot reach a scheduler at {self.address!r} ({type(e).__name__}: {e}); "
                                "give its address, e.g. tcp://host:8786, or 'local'") from None
        fn: Callable = _task_function(self.task_fn) if self.task_fn else _dask_task
        futures: list = []
        try:
            futures = [client.submit(fn, t, key=f"ccarena-{t.run_id}", pure=False, retries=0) for t in tasks]
            by_key = {f.key: t for f, t in zip(futures, tasks)}
            started = time.perf_counter()
            completed = as_completed(futures)
            while not completed.is_empty():
                if not completed.has_ready():
                    yield Idle()
                fut = next(completed)
                task = by_key[fut.key]
                try:
                    out = fut.result()
                except Exception as e:  # noqa: BLE001 - e.g. KilledWorker
                    yield RunFailed(task.run_id, f"{type(e).__name__}: {e}", time.perf_counter() - started)
                    continue
                finally:
                    fut.release()
                yield out
        finally:
            try:
                client.cancel(futures)
            except Exception:
                pass
            client.close()
            if cluster is not None:
                cluster.close()


class BackendExecutor:
    """Runs tasks one at a time on `backend` (anything with ``run(scenario,
    progress, cancel)``, such as the testbed backend); tasks carry their scenario."""

    needs_scenario = True

    def __init__(self, backend):
        self.backend = backend
        self.description = f"the {backend.name} backend, one run at a time"

    def run(self, tasks: list[Task]) -> Iterator[Event]:
        for task in tasks:
            yield from self._one(task)

    def _one(self, task: Task) -> Iterator[Event]:
        state: dict[str, Any] = {"done_s": 0.0, "out": None}
        cancel = threading.Event()

        def work() -> None:
            t0 = time.perf_counter()
            try:
                result = self.backend.run(task.scenario, progress=lambda done, total: state.__setitem__("done_s", done), cancel=cancel)
                state["out"] = RunDone(task.run_id, json.dumps(result.record), time.perf_counter() - t0, build_id())
            except BaseException as e:  # noqa: BLE001 - one run's failure is reported, the sweep goes on
                state["out"] = RunFailed(task.run_id, f"{type(e).__name__}: {e}", time.perf_counter() - t0)

        worker = threading.Thread(target=work, name=f"ccarena-{self.backend.name}-run", daemon=True)
        worker.start()
        yield Idle()
        try:
            while worker.is_alive():
                worker.join(0.5)
                yield RunProgress(task.run_id, state["done_s"])
        finally:
            if worker.is_alive():  # the sweep stops (Ctrl-C): the run tears down first
                cancel.set()
                worker.join()
        yield state["out"]
