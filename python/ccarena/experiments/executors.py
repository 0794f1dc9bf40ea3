"""Executors: where the runs of a sweep execute.

Both executors take tasks (a run id and the engine configuration as JSON) and
yield events; workers only simulate and return the raw record as JSON text.
Everything else (metrics, the database) happens in the calling process.

* ``LocalExecutor``: a pool of worker processes (default: one per core). The
  parent hands each idle worker one task over its own pipe, so it always
  knows which run a worker is on: a worker that dies (a crash, the OOM killer)
  costs only its current run, which is reported as failed, and a fresh worker
  takes its place. Workers ignore Ctrl-C (the parent stops them) and die with
  the parent even if it is killed with SIGKILL.
* ``DaskExecutor``: the same tasks on a dask.distributed cluster
  (``--dask tcp://scheduler:8786``, or ``--dask local`` for a LocalCluster).

Events are tuples: ("progress", run_id, simulated_s), ("done", run_id,
record_json, wall_s), ("failed", run_id, error, wall_s) and ("tick", None)
(nothing happened for a while; lets the caller react to Ctrl-C).
"""

from __future__ import annotations

import os
import signal
import time
import traceback
from typing import Any, Callable, Iterator

from ..errors import ExecutorError

__all__ = ["execute_task", "LocalExecutor", "DaskExecutor", "Task", "ExecutorError"]


Task = dict  # {"run_id": str, "engine_json": str, "duration_s": float}

_SLICES = 20


def execute_task(task: Task, report: Callable[[float], None] | None = None) -> dict:
    """Runs one task in this process; returns {"run_id", "ok", "record_json" | "error", "wall_s"}."""
    from .. import _engine

    t0 = time.perf_counter()
    try:
        if report is None:
            rec = _engine.run_json(task["engine_json"])
        else:
            eng = _engine.Engine(task["engine_json"])
            total = eng.duration_ns
            for k in range(1, _SLICES + 1):
                now = eng.advance(total * k // _SLICES)
                report(now / 1e9)
            rec = eng.finish()
        return {"run_id": task["run_id"], "ok": True, "record_json": rec, "wall_s": time.perf_counter() - t0}
    except Exception as e:  # noqa: BLE001 - any failure of one run is reported, never raised
        tb = traceback.format_exc(limit=3).strip().splitlines()
        return {"run_id": task["run_id"], "ok": False, "error": f"{type(e).__name__}: {e}" + (f" [{tb[-2].strip()}]" if len(tb) > 2 else ""), "wall_s": time.perf_counter() - t0}


def _die_with_parent() -> None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:  # not Linux: workers notice the closed pipe instead
        pass


def _worker_main(conn, task_fn_path: str | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    fn = execute_task
    if task_fn_path:
        import importlib

        mod, _, name = task_fn_path.partition(":")
        fn = getattr(importlib.import_module(mod), name)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        run_id = task["run_id"]
        last = [0.0]

        def report(sim_s: float) -> None:
            now = time.monotonic()
            if now - last[0] > 0.25:
                last[0] = now
                conn.send(("progress", run_id, sim_s))

        out = fn(task, report)
        try:
            if out["ok"]:
                conn.send(("done", run_id, out["record_json"], out["wall_s"]))
            else:
                conn.send(("failed", run_id, out["error"], out["wall_s"]))
        except (BrokenPipeError, OSError):
            return


class LocalExecutor:
    """A process pool over `jobs` cores (default: all)."""

    def __init__(self, jobs: int | None = None, task_fn: str | None = None):
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.task_fn = task_fn  # "module:function" replacing execute_task (tests)
        self.description = f"local, {self.jobs} process{'es' if self.jobs > 1 else ''}"

    def run(self, tasks: list[Task]) -> Iterator[tuple]:
        import multiprocessing as mp
        from multiprocessing.connection import wait

        ctx = mp.get_context("spawn")
        pending = list(reversed(tasks))
        workers: dict[int, Any] = {}  # slot -> (process, conn, current task or None, started)
        n = min(self.jobs, len(tasks))

        def spawn(slot: int) -> None:
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker_main, args=(child, self.task_fn), daemon=True, name=f"ccarena-worker-{slot}")
            p.start()
            child.close()
            workers[slot] = [p, parent, None, 0.0]

        def assign(slot: int) -> None:
            w = workers[slot]
            w[2] = None
            if not pending:
                return
            task = pending.pop()
            for _ in range(3):
                try:
                    w[1].send(task)
                    w[2], w[3] = task, time.perf_counter()
                    return
                except (BrokenPipeError, OSError):  # the worker died while idle: replace it
                    w[1].close()
                    spawn(slot)
                    w = workers[slot]
            raise RuntimeError("cannot start worker processes")

        try:
            for slot in range(n):
                spawn(slot)
                assign(slot)
            while any(w[2] is not None for w in workers.values()):
                conns = {w[1]: s for s, w in workers.items() if w[2] is not None}
                sentinels = {w[0].sentinel: s for s, w in workers.items() if w[2] is not None}
                ready = wait(list(conns) + list(sentinels), timeout=0.5)
                if not ready:
                    yield ("tick", None)
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
                    if msg[0] != "progress":
                        assign(slot)
                for slot in dead:
                    w = workers[slot]
                    if w[0].is_alive() or w[2] is None:
                        continue
                    # Read what it sent before dying; its current run (if any) is lost.
                    while True:
                        try:
                            if not w[1].poll():
                                break
                            msg = w[1].recv()
                        except (EOFError, OSError):
                            break
                        yield msg
                        if msg[0] != "progress":
                            w[2] = None
                    task = w[2]
                    code = w[0].exitcode
                    why = f"killed by signal {-code}" if code is not None and code < 0 else f"exit status {code}"
                    w[1].close()
                    spawn(slot)
                    if task is not None:
                        yield ("failed", task["run_id"], f"worker process died ({why})", time.perf_counter() - w[3])
                    assign(slot)
        finally:
            for w in workers.values():
                try:
                    if w[0].is_alive():
                        if w[2] is None:
                            w[1].send(None)
                        else:
                            w[0].kill()
                except (OSError, BrokenPipeError):
                    pass
            deadline = time.monotonic() + 5
            for w in workers.values():
                w[0].join(timeout=max(0.0, deadline - time.monotonic()))
                if w[0].is_alive():
                    w[0].kill()
                    w[0].join(timeout=1)
                w[1].close()


def _dask_task(task: Task) -> dict:
    return execute_task(task)


class DaskExecutor:
    """Runs tasks on a dask.distributed cluster given by its scheduler address ("local": a LocalCluster)."""

    def __init__(self, address: str, jobs: int | None = None, task_fn: str | None = None):
        self.address = address
        self.jobs = jobs
        self.task_fn = task_fn
        self.description = f"dask {address}"

    def run(self, tasks: list[Task]) -> Iterator[tuple]:
        try:
            from distributed import Client, LocalCluster, as_completed
        except ImportError:  # pragma: no cover
            raise ExecutorError("--dask needs dask.distributed: pip install 'dask[distributed]'") from None
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
        fn: Callable = _dask_task
        if self.task_fn:
            import importlib

            mod, _, name = self.task_fn.partition(":")
            fn = getattr(importlib.import_module(mod), name)
        futures: list = []
        try:
            futures = [client.submit(fn, t, key=f"ccarena-{t['run_id']}", pure=False, retries=0) for t in tasks]
            by_key = {f.key: t for f, t in zip(futures, tasks)}
            started = time.perf_counter()
            for fut in as_completed(futures):
                task = by_key[fut.key]
                try:
                    out = fut.result()
                except Exception as e:  # noqa: BLE001 - e.g. KilledWorker
                    yield ("failed", task["run_id"], f"{type(e).__name__}: {e}", time.perf_counter() - started)
                    continue
                finally:
                    fut.release()
                if out["ok"]:
                    yield ("done", out["run_id"], out["record_json"], out["wall_s"])
                else:
                    yield ("failed", out["run_id"], out["error"], out["wall_s"])
        finally:
            try:
                client.cancel(futures)
            except Exception:
                pass
            client.close()
            if cluster is not None:
                cluster.close()
