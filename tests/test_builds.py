"""What computed a run: every stored run carries the build identity (the
engine's source hash and the Python wings' hash); a sweep recomputes stored
runs of another build unless told to keep them, and says so; `ccarena
results` and RunResult show the build; a schema-3 database is upgraded with
"unknown" builds."""

import json

import duckdb
import pytest

import ccarena
from ccarena import _engine
from ccarena.experiments.executors import LocalExecutor
from ccarena.experiments.runner import run_sweep, stale_note
from ccarena.version import build_id, engine_build, python_build
from conftest import cli
from test_store import write

# The autouse fixture of test_store (a planned algorithm) is not needed here: only real ones are swept.


def _set_build(out, build):
    con = duckdb.connect(str(out / "ccarena.duckdb"))
    try:
        con.execute("UPDATE runs SET build = ?", [build])
    finally:
        con.close()


def test_build_identity_names_engine_and_python():
    assert len(_engine.ENGINE_BUILD) == 32 and int(_engine.ENGINE_BUILD, 16) >= 0
    assert engine_build() == _engine.ENGINE_BUILD[:12]
    assert len(python_build()) == 8
    assert build_id() == f"{engine_build()}-{python_build()}"


def test_runs_of_another_build_are_recomputed_unless_kept(tmp_path):
    f = write(tmp_path, duration="2s", reps=1, ccas=("cubic", "reno"))
    out = tmp_path / "res"
    first = run_sweep(str(f), out, executor=LocalExecutor(2))
    assert first.computed == 4 and first.stale == 0
    res = ccarena.load(out)
    assert set(res.runs.build) == {build_id()}
    assert res.result(res.runs.run_id.iloc[0]).build == build_id()

    _set_build(out, "0123456789ab-deadbeef")
    events = []
    kept = run_sweep(str(f), out, executor=LocalExecutor(2), keep_stale=True, on_event=lambda k, i: events.append((k, i)))
    assert (kept.computed, kept.cached, kept.stale, kept.kept_stale) == (0, 4, 4, True)
    assert set(ccarena.load(out).runs.build) == {"0123456789ab-deadbeef"}
    start = next(i for k, i in events if k == "start")
    assert start["stale"] == 4 and start["stale_builds"] == ["0123456789ab-deadbeef"]

    again = run_sweep(str(f), out, executor=LocalExecutor(2))
    assert (again.computed, again.cached, again.stale, again.stale_builds) == (4, 0, 4, ["0123456789ab-deadbeef"])
    assert set(ccarena.load(out).runs.build) == {build_id()}
    assert "recomputing (pass --keep-stale to reuse them)" in stale_note(4, ["x"], False)


def test_cli_says_it_recomputes_and_results_shows_the_build(tmp_path):
    f = write(tmp_path, duration="2s", reps=1, ccas=("cubic",))
    out = tmp_path / "res"
    cli("sweep", str(f), "--out", str(out), "-j", "1", check=True)
    _set_build(out, "unknown")
    p = cli("sweep", str(f), "--out", str(out), "-j", "1", "--keep-stale", check=True)
    assert "2 stored runs came from another build (unknown); reusing them" in p.stderr.replace("\n", " ")
    r = cli("results", str(out), check=True)
    assert "built by unknown (2 runs)" in r.stdout
    p = cli("sweep", str(f), "--out", str(out), "-j", "1", check=True)
    assert "2 stored runs came from another build (unknown); recomputing (pass --keep-stale to reuse them)" in p.stderr.replace("\n", " ")
    r = cli("results", str(out), check=True)
    assert f"built by {build_id()} (2 runs, this build)" in r.stdout
    assert "by ccarena sweep" in r.stdout
    doc = json.loads(cli("results", str(out), "--json", check=True).stdout)
    assert doc["experiments"][0]["builds"] == {build_id(): 2}


def test_schema_3_database_gets_unknown_builds(tmp_path):
    f = write(tmp_path, duration="2s", reps=1, ccas=("cubic",))
    out = tmp_path / "res"
    run_sweep(str(f), out, executor=LocalExecutor(1))
    con = duckdb.connect(str(out / "ccarena.duckdb"))
    con.execute("ALTER TABLE runs DROP COLUMN build")
    for c in ("build", "host", "command"):
        con.execute(f"ALTER TABLE experiments DROP COLUMN {c}")
    con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    con.close()
    res = ccarena.load(out)
    assert set(res.runs.build) == {"unknown"}
    assert res.result(res.runs.run_id.iloc[0]).build == "unknown"
    again = run_sweep(str(f), out, executor=LocalExecutor(1))
    assert again.stale == 2 and again.computed == 2


def test_run_result_carries_the_build():
    r = ccarena.run("quickstart", overrides={"run.duration": "1s", "run.warmup": "0s"})
    assert r.build == build_id() and r.to_dict()["build"] == build_id()
