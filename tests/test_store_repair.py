"""Data safety of a results directory: a damaged database is reported with
DuckDB's own words and rebuilt from the stored files with the same numbers;
an unreadable Parquet file costs its run's figures, not the report; saved
runs keep their record compressed and old directories keep loading."""

import gzip
import json
import shutil

import ccarena
from ccarena.results.result import read_record
from conftest import cli

SWEEP = """
name = "safe"
description = "a sweep to damage"
[network]
bottleneck_rate = "20Mbps"
buffer = "40p"
[[flows]]
cca = "cubic"
rtt = "20ms"
count = 2
[run]
duration = "2s"
warmup = "0.5s"
seed = 4
[sweep]
repetitions = 2
cca = ["cubic", "reno"]
"""


def sweep(tmp_path):
    f = tmp_path / "safe.toml"
    f.write_text(SWEEP)
    out = tmp_path / "res"
    cli("sweep", str(f), "--out", str(out), "--json", check=True)
    return out


def results_json(out):
    doc = json.loads(cli("results", str(out), "--format", "json", check=True).stdout)
    for e in doc["experiments"]:
        e.pop("updated_at")  # kept, but printed at the precision of the database's timestamp
    return doc


def test_a_damaged_database_is_named_and_rebuilt_with_the_same_numbers(tmp_path):
    out = sweep(tmp_path)
    before = results_json(out)
    before_flows = ccarena.load(out).flows.sort_values(["run_id", "flow"]).reset_index(drop=True)
    db = out / "ccarena.duckdb"
    data = bytearray(db.read_bytes())
    # 4 KiB of every block after the file's headers overwritten (DuckDB's
    # blocks are 256 KiB and a small database's are mostly empty past their
    # start, so bytes at one place may hit nothing that is read).
    for at in range(12288 + 2**18 + 1024, len(data) - 4096, 2**18):
        data[at:at + 4096] = bytes(range(256)) * 16
    db.write_bytes(bytes(data))

    p = cli("results", str(out), "--format", "json")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    msg = " ".join(p.stderr.split())
    assert str(db) in msg.replace(" ", "") or "ccarena.duckdb" in msg
    assert "--rebuild" in msg and "transaction" not in msg.lower(), msg
    assert "checksum" in msg.lower() or "corrupt" in msg.lower() or "IO Error" in msg, msg

    p = cli("results", str(out), "--rebuild", "--format", "json", check=True)
    assert "rebuilt the database: 1 experiments, 4 runs" in " ".join(p.stderr.split())
    assert any(x.name.startswith("ccarena.duckdb.damaged-") for x in out.iterdir())
    after = results_json(out)
    assert after == before
    after_flows = ccarena.load(out).flows.sort_values(["run_id", "flow"]).reset_index(drop=True)
    assert after_flows.equals(before_flows)
    # The rebuilt database is whole: the sweep finds every run stored.
    p = cli("sweep", str(tmp_path / "safe.toml"), "--out", str(out), "--json", check=True)
    assert json.loads(p.stdout)["computed"] == 0


def test_a_deleted_database_is_rebuilt_too(tmp_path):
    out = sweep(tmp_path)
    before = results_json(out)
    (out / "ccarena.duckdb").unlink()
    cli("results", str(out), "--rebuild", check=True)
    assert results_json(out) == before


def test_an_unreadable_parquet_file_skips_that_runs_figures(tmp_path):
    out = sweep(tmp_path)
    victim = sorted((out / "timeseries").glob("*.parquet"))[0]
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    p = cli("report", str(out), "--per-run", "all")
    assert p.returncode == 0, p.stderr
    err = " ".join(p.stderr.split())
    assert "warning" in err and victim.name in err and "figures skipped" in err, err
    pages = "".join(x.read_text() for x in (out / "report").rglob("*.html"))
    assert "figures skipped" in pages
    # Rebuilding writes the file again from the record.
    cli("results", str(out), "--rebuild", check=True)
    assert ccarena.load(out).timeseries(victim.stem).shape[0] > 0


def test_saved_runs_keep_their_record_compressed_and_old_ones_load(small_scenario, tmp_path):
    r = ccarena.run(str(small_scenario))
    d = r.save(tmp_path / "run")
    assert (d / "record.json.gz").exists() and not (d / "record.json").exists()
    assert json.loads(gzip.decompress((d / "record.json.gz").read_bytes())) == r.record
    old = tmp_path / "old"
    shutil.copytree(d, old)
    (old / "record.json").write_text(json.dumps(r.record))
    (old / "record.json.gz").unlink()
    assert read_record(old) == r.record
    back = ccarena.load_result(old)
    assert back.flows.equals(ccarena.load_result(d).flows)


def test_runs_stored_before_their_rows_were_kept_come_from_the_old_database(tmp_path):
    out = sweep(tmp_path)
    before = results_json(out)
    for p in [*(out / "records").glob("*.run.json"), *(out / "experiments").glob("*.json")]:
        p.unlink()
    p = cli("results", str(out), "--rebuild", check=True)
    assert "1 experiments, 4 runs" in p.stderr and "could not be recovered" not in p.stderr
    assert results_json(out) == before
