"""Sweeps into a results directory: storage, resumption after a kill -9 or
Ctrl-C, failed and crashed runs, and the Dask executor giving the same
results as the local one."""

import json
import os
import signal
import subprocess
import sys
import time

import duckdb
import pandas as pd
import pytest

import ccarena
from ccarena.experiments.executors import LocalExecutor
from ccarena.experiments.runner import run_sweep
from conftest import cli

SWEEP = """
name = "tiny"
description = "a tiny sweep for tests"
source = "tests"
[network]
bottleneck_rate = "{rate}"
buffer = "40p"
[[flows]]
cca = "cubic"
rtt = "20ms"
count = 2
[run]
duration = "{duration}"
warmup = "1s"
seed = 10
start_jitter = "50ms"
[sweep]
repetitions = {reps}
cca = {ccas}
rtt = ["10ms", "30ms"]
"""


def write(tmp_path, duration="3s", reps=2, rate="20Mbps", ccas=("cubic", "reno", "future-cca")):
    """The sweep file. Sweeps run by the CLI in a subprocess do not see the test's
    planned algorithm, so they list only real ones."""
    p = tmp_path / "tiny.toml"
    p.write_text(SWEEP.format(duration=duration, reps=reps, rate=rate, ccas=list(ccas)).replace("'", '"'))
    return p


def db_runs(d):
    con = duckdb.connect(str(d / "ccarena.duckdb"), read_only=True)
    try:
        return con.execute("SELECT run_id, status FROM runs").fetchall(), con.execute("SELECT count(*) FROM metrics").fetchone()[0]
    finally:
        con.close()


@pytest.fixture(autouse=True)
def planned_algorithm(monkeypatch):
    """A planned algorithm the engine lacks, so that skipped runs are exercised."""
    import ccarena.experiments.sweep

    monkeypatch.setattr(ccarena.experiments.sweep, "PLANNED_CCAS", frozenset({"future-cca"}))


def test_sweep_stores_runs_and_resumes(tmp_path):
    f = write(tmp_path)
    out = tmp_path / "res"
    o = run_sweep(str(f), out, executor=LocalExecutor(2))
    assert (o.total, o.computed, o.skipped, o.failed) == (12, 8, 4, 0)
    assert o.skip_reasons == {"future-cca not in this engine yet": 4}
    again = run_sweep(str(f), out, executor=LocalExecutor(2))
    assert (again.computed, again.cached) == (0, 8)

    res = ccarena.load(out)
    assert list(res.experiments.experiment_id) == ["tiny"]
    runs = res.runs
    assert len(runs) == 12 and set(runs.status) == {"ok", "skipped"}
    ok = runs[runs.status == "ok"]
    assert {"cca", "rtt", "jain_index", "utilization", "throughput_ratio", "scenario_hash", "seed", "ccarena_version"} <= set(runs.columns)
    assert ok.run_id.is_unique
    assert len(res.flows) == 16 and {"mean_throughput_l7", "cov_cwnd_l4", "mean_est_qdelay_l4"} <= set(res.flows.columns)
    pts = res.points("tiny", ["jain_index"])
    assert len(pts) == 4 and (pts.n == 2).all() and pts.jain_index_ci95.notna().all()
    # Repetitions differ (start jitter) and the time series are there.
    assert ok.groupby("point").jain_index.nunique().max() == 2
    ts = res.timeseries(ok.run_id.iloc[0])
    assert len(ts) == 2 * 30
    # A run rebuilt from its stored record has the stored metrics.
    r = res.result(ok.run_id.iloc[0])
    assert r.summary["jain_index"] == pytest.approx(ok.jain_index.iloc[0])


def test_failed_and_crashed_runs_are_recorded_and_retried(tmp_path):
    f = write(tmp_path, reps=4)  # seeds 10..13: 11 fails, 12 kills its worker
    out = tmp_path / "res"
    o = run_sweep(str(f), out, executor=LocalExecutor(2, task_fn="crashy:task"))
    assert o.failed == 8 and o.computed == 8
    errors = set(o.errors.values())
    assert "RuntimeError: injected failure" in errors
    assert any(e.startswith("worker process died (killed by signal 9)") for e in errors)
    res = ccarena.load(out)
    assert (res.runs.status == "error").sum() == 8 and res.runs[res.runs.status == "error"].error.notna().all()
    # The next sweep (with a healthy executor) computes only the failed runs.
    again = run_sweep(str(f), out, executor=LocalExecutor(2))
    assert (again.computed, again.cached, again.failed) == (8, 8, 0)
    rows, _ = db_runs(out)
    assert len(rows) == 16 and {s for _, s in rows} == {"ok"}


def _start_sweep(f, out, *extra):
    return subprocess.Popen(
        [sys.executable, "-m", "ccarena.cli", "sweep", str(f), "--out", str(out), "--jobs", "2", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        # A shell without job control starts background commands with SIGINT
        # ignored, and children inherit that: give the sweep the usual Ctrl-C.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _wait_for_runs(out, n, proc, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        d = out / "timeseries"
        if d.exists() and len([p for p in d.iterdir() if p.suffix == ".parquet"]) >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("sweep made no progress")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_interrupted_sweep_leaves_a_valid_database_and_resumes(tmp_path, sig):
    f = write(tmp_path, duration="60s", reps=10, rate="200Mbps", ccas=("cubic", "reno"))  # 40 runs, long enough to interrupt
    out = tmp_path / "res"
    proc = _start_sweep(f, out)
    _wait_for_runs(out, 3, proc)
    if sig == signal.SIGKILL:
        # While it runs, the results can be read (the sweep lets go of the database between runs).
        assert (ccarena.load(out).runs.status == "ok").sum() >= 1
        assert proc.poll() is None
        os.killpg(proc.pid, signal.SIGKILL)  # the parent and its workers
    else:
        os.kill(proc.pid, signal.SIGINT)  # Ctrl-C
    _, stderr = proc.communicate(timeout=60)
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "run the same command again to resume" in stderr and "Traceback" not in stderr
    rows, _ = db_runs(out)  # opens: the database is valid
    stored = len(rows)
    assert 0 < stored < 40
    p = cli("sweep", str(f), "--out", str(out), "--json", check=True)
    o = json.loads(p.stdout)
    assert o["computed"] == 40 - stored and o["cached"] == stored and o["failed"] == 0
    rows, _ = db_runs(out)
    ids = [r for r, _ in rows]
    assert len(ids) == 40 == len(set(ids)) and {s for _, s in rows} == {"ok"}
    res = ccarena.load(out)
    assert len(res.flows) == 80 and res.flows.groupby(["run_id", "flow"]).size().max() == 1


def test_dask_local_cluster_gives_the_same_results(tmp_path):
    distributed = pytest.importorskip("distributed")
    f = write(tmp_path, reps=1, ccas=("cubic", "reno"))
    cli("sweep", str(f), "--out", str(tmp_path / "local"), "--jobs", "2", check=True)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        p = cli("sweep", str(f), "--out", str(tmp_path / "dask"), "--dask", cluster.scheduler_address, "--json", check=True)
    o = json.loads(p.stdout)
    assert o["computed"] == 4 and o["executor"].startswith("dask")
    a, b = ccarena.load(tmp_path / "local"), ccarena.load(tmp_path / "dask")
    key = ["run_id", "flow", "name"]
    ma = a.metrics.sort_values(key, na_position="first").reset_index(drop=True)
    mb = b.metrics.sort_values(key, na_position="first").reset_index(drop=True)
    pd.testing.assert_frame_equal(ma, mb)
    cols = ["run_id", "flow", "throughput_mbps", "retransmissions", "drops"]
    pd.testing.assert_frame_equal(a.flows[cols].sort_values(["run_id", "flow"]).reset_index(drop=True),
                                  b.flows[cols].sort_values(["run_id", "flow"]).reset_index(drop=True))
    for rid in a.runs.run_id[a.runs.status == "ok"]:
        assert a.record(rid) == b.record(rid)


def test_results_command_and_recompute(tmp_path):
    f = write(tmp_path, reps=1)
    out = tmp_path / "res"
    run_sweep(str(f), out, executor=LocalExecutor(2))  # in-process: sees the planned algorithm
    p = cli("results", str(out), check=True)
    assert "tiny" in p.stdout and "4 ok" in p.stdout and "2 skipped" in p.stdout
    before = ccarena.load(out).metrics.sort_values(["run_id", "flow", "name"]).reset_index(drop=True)
    p = cli("results", str(out), "--json", "--recompute", check=True)
    doc = json.loads(p.stdout)
    assert doc["experiments"][0]["runs"] == {"ok": 4, "skipped": 2}
    assert len(doc["experiments"][0]["points"]) == 4
    after = ccarena.load(out).metrics.sort_values(["run_id", "flow", "name"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(before, after)


def test_sweep_bad_input_is_one_line_exit_2(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text(SWEEP.format(duration="3s", reps=1, rate="20Mbps", ccas='["cubic"]').replace('rtt = ["10ms", "30ms"]', 'rtt = ["10ms", "30"]'))
    p = cli("sweep", str(f), "--out", str(tmp_path / "r"))
    assert p.returncode == 2 and "sweep.rtt[1]: '30' has no unit" in p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    p = cli("sweep", str(write(tmp_path, ccas=("cubic",))), "--jobs", "0", "--out", str(tmp_path / "r"))
    assert p.returncode == 2 and "--jobs" in p.stderr
    p = cli("results", str(tmp_path / "nothing-here"))
    assert p.returncode == 2 and "no such results directory" in p.stderr
    (tmp_path / "empty").mkdir()
    p = cli("results", str(tmp_path / "empty"))
    assert p.returncode == 2 and "no results database" in p.stderr


def test_schema_2_database_gets_each_runs_metadata(tmp_path):
    """A results directory written before the metadata had its own column
    (schema 2) is upgraded in place: each run's flow groups are recovered
    from its document, and its metrics recompute as they were, from the
    stored records alone."""
    f = write(tmp_path, reps=1, ccas=("cubic", "reno"))
    out = tmp_path / "res"
    run_sweep(str(f), out, executor=LocalExecutor(2))
    before = ccarena.load(out).metrics.sort_values(["run_id", "flow", "name"]).reset_index(drop=True)
    groups = json.loads(ccarena.load(out).runs.scenario.iloc[0])
    con = duckdb.connect(str(out / "ccarena.duckdb"))
    con.execute("ALTER TABLE runs DROP COLUMN scenario_meta")
    con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    con.close()

    from ccarena.results.store import SCHEMA_VERSION, Store

    with Store(out) as st:
        assert st.recompute_metrics() == 4
        stored = st.con.execute("SELECT DISTINCT scenario_meta FROM runs").fetchall()
        version = st.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    assert version == str(SCHEMA_VERSION) and len(stored) == 1
    assert json.loads(stored[0][0])["flow_groups"] == [0] * groups["flows"][0]["count"]
    after = ccarena.load(out).metrics.sort_values(["run_id", "flow", "name"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(before, after)
    res = ccarena.load(out)
    assert res.result(res.runs.run_id.iloc[0]).scenario.flow_groups() == [0, 0]
