"""The results store: one embedded DuckDB database per results directory, plus
Parquet time series and the raw run records beside it.

    DIR/ccarena.duckdb               experiments, experiment_runs, params, runs, flows, metrics,
                                     short_flows, udp
    DIR/timeseries/<run>.parquet     per-flow samples (RunResult.timeseries)
    DIR/queue/<run>.parquet          bottleneck samples (RunResult.queue)
    DIR/reverse_queue/<run>.parquet  reverse bottleneck samples, runs that have one
    DIR/udp_series/<run>.parquet     UDP sinks' samples, runs with UDP sources
    DIR/records/<run>.json.gz        the engine's raw record (metrics can be recomputed from it)
    DIR/records/<run>.run.json       the run's row (scenario, engine input, metadata, seed, build)
    DIR/experiments/<id>.json        the experiment's rows (description, axes, its runs and params)

Each run's row keeps its scenario document, the engine's input and the
metadata beside it (``runs.scenario_meta``: flow groups, background set-up,
Python algorithms), so its metrics are recomputed from the record alone,
never by resolving its scenario again. The JSON files beside the records
hold every row the database has that a record cannot give back, so a damaged
database is rebuilt from the files alone (``rebuild``, ``ccarena results
--rebuild DIR``).

Only the process that runs a sweep writes (workers return records). Files are
written under a temporary name and renamed; then the run's rows go into the
database in one transaction. A sweep killed at any instant therefore leaves a
valid database in which every run is either complete or absent. The schema is
documented in docs/results.md; a database written with an older schema is
upgraded in place the first time it is opened (``_migrate``).
"""

from __future__ import annotations

import gzip
import html
import json
import math
import os
import re
import socket
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from ..version import UNKNOWN_BUILD, __version__, build_id
from ..errors import StoreError, UnknownExperiment, UnknownName
from .metrics import FLOW_COLUMN_TWINS, SHORT_RUN_EPOCHS, flow_metrics, mean_ci, mean_interval, metric_bounds, run_metrics
from .result import RunResult
from ..scenario.document import dump_toml
from ..scenario.flows import flow_groups_of
from ..scenario.model import Meta, Scenario
from ..scenario.units import numeric, unit_of

__all__ = ["Store", "Results", "load", "rebuild", "StoreError", "analyse", "DB_NAME", "SCHEMA_VERSION"]

DB_NAME = "ccarena.duckdb"
# 2: flows.direction and flows.background; the short_flows and udp tables.
# 3: runs.scenario_meta (the metadata beside the engine's input: flow groups, ...).
# 4: runs.build (what computed the run; older runs: "unknown"); experiments.build, host, command.
SCHEMA_VERSION = 4

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS experiments (
    experiment_id VARCHAR PRIMARY KEY,
    name VARCHAR, variant VARCHAR, description VARCHAR, source VARCHAR, notes VARCHAR,
    requires VARCHAR, scenario_toml VARCHAR, axes VARCHAR, figures VARCHAR,
    n_runs INTEGER, ccarena_version VARCHAR, updated_at TIMESTAMP,
    build VARCHAR DEFAULT 'unknown', host VARCHAR DEFAULT '', command VARCHAR DEFAULT ''
);
CREATE TABLE IF NOT EXISTS experiment_runs (
    experiment_id VARCHAR, run_id VARCHAR, point INTEGER, repetition INTEGER, seed UBIGINT,
    params VARCHAR, skip_reason VARCHAR,
    PRIMARY KEY (experiment_id, run_id)
);
CREATE TABLE IF NOT EXISTS params (
    experiment_id VARCHAR, run_id VARCHAR, name VARCHAR, value VARCHAR, value_num DOUBLE
);
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, scenario_hash VARCHAR, seed UBIGINT, ccarena_version VARCHAR,
    status VARCHAR, error VARCHAR, wall_time_s DOUBLE, simulated_s DOUBLE, events UBIGINT,
    scenario VARCHAR, engine_config VARCHAR, finished_at TIMESTAMP, scenario_meta VARCHAR,
    build VARCHAR DEFAULT 'unknown'
);
CREATE TABLE IF NOT EXISTS flows (
    run_id VARCHAR, flow INTEGER, "group" INTEGER, label VARCHAR, cca VARCHAR,
    rtt_ms DOUBLE, start_s DOUBLE, throughput_mbps DOUBLE, mean_cwnd DOUBLE, mean_srtt_ms DOUBLE,
    retransmissions BIGINT, rtos BIGINT, drops BIGINT, recoveries BIGINT, undos BIGINT, tlps BIGINT,
    segments_sent BIGINT, bytes_sent BIGINT, bytes_delivered BIGINT,
    window_retransmissions BIGINT, window_rtos BIGINT, size_bytes BIGINT, fct_s DOUBLE,
    window_start_s DOUBLE, window_end_s DOUBLE,
    direction VARCHAR DEFAULT 'forward', background BOOLEAN DEFAULT false,
    PRIMARY KEY (run_id, flow)
);
CREATE TABLE IF NOT EXISTS metrics (run_id VARCHAR, flow INTEGER, name VARCHAR, value DOUBLE);
CREATE TABLE IF NOT EXISTS short_flows (
    run_id VARCHAR, generator INTEGER, label VARCHAR, direction VARCHAR, size_bytes BIGINT, rtt_ms DOUBLE,
    start_s DOUBLE, fct_s DOUBLE, acked_s DOUBLE, retransmissions BIGINT, rtos BIGINT
);
CREATE TABLE IF NOT EXISTS udp (
    run_id VARCHAR, source INTEGER, label VARCHAR, direction VARCHAR, rate_mbps DOUBLE, throughput_mbps DOUBLE,
    sent_packets BIGINT, received_packets BIGINT, loss_rate DOUBLE,
    PRIMARY KEY (run_id, source)
);
"""

# Columns older schemas lacked, with the values their runs had (created with ALTER TABLE;
# runs.scenario_meta is then filled by _fill_meta).
_ADDED_COLUMNS = {
    "flows": [("direction", "VARCHAR DEFAULT 'forward'"), ("background", "BOOLEAN DEFAULT false")],
    "runs": [("scenario_meta", "VARCHAR"), ("build", "VARCHAR DEFAULT 'unknown'")],
    "experiments": [("build", "VARCHAR DEFAULT 'unknown'"), ("host", "VARCHAR DEFAULT ''"), ("command", "VARCHAR DEFAULT ''")],
}
_RUN_COLUMNS = (
    "run_id, scenario_hash, seed, ccarena_version, status, error, wall_time_s, simulated_s, events, scenario, engine_config, "
    "finished_at, scenario_meta, build"
)
# Tables that hold rows of one run each (deleted and rewritten together).
_RUN_TABLES = ("runs", "flows", "metrics", "short_flows", "udp")

_FLOW_COLUMNS = [
    "run_id", "flow", "group", "label", "cca", "rtt_ms", "start_s", "throughput_mbps", "mean_cwnd", "mean_srtt_ms",
    "retransmissions", "rtos", "drops", "recoveries", "undos", "tlps", "segments_sent", "bytes_sent", "bytes_delivered",
    "window_retransmissions", "window_rtos", "size_bytes", "fct_s", "window_start_s", "window_end_s", "direction", "background",
]
_SHORT_FLOW_COLUMNS = [
    "run_id", "generator", "label", "direction", "size_bytes", "rtt_ms", "start_s", "fct_s", "acked_s", "retransmissions", "rtos",
]
_UDP_COLUMNS = [
    "run_id", "source", "label", "direction", "rate_mbps", "throughput_mbps", "sent_packets", "received_packets", "loss_rate",
]


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _atomic_parquet(df: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    df.to_parquet(tmp, index=False)
    os.replace(tmp, path)


_TMP = re.compile(r"^\..+\.tmp-(\d+)$")


def _remove_orphans(directory: Path) -> None:
    """Removes the temporary files (`_atomic_write`) of writers that died
    before renaming them: their process no longer exists."""
    for p in directory.rglob(".*.tmp-*"):
        m = _TMP.match(p.name)
        if not m or int(m.group(1)) == os.getpid():
            continue
        try:
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            p.unlink(missing_ok=True)
        except (PermissionError, OverflowError):
            pass


def _with_run_id(df: pd.DataFrame, rid: str) -> pd.DataFrame:
    """`df` with a first column run_id: every Parquet file names its run, so
    files read together (DuckDB's read_parquet('timeseries/*.parquet')) can be told apart."""
    return df.assign(run_id=rid)[["run_id", *df.columns]]


def _json(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def _param_text(v: Any) -> str:
    """A parameter's value as SQL text: strings as written ("40ms", not "\"40ms\""), others as JSON."""
    return v if isinstance(v, str) else _json(v)


def _num(v: Any) -> float | None:
    x = numeric(v)
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def analyse(scenario: Scenario, record: dict, wall_time_s: float = 0.0):
    """Record -> (RunResult, flows DataFrame, flow metrics, run metrics). Pure: no I/O."""
    result = RunResult(scenario=scenario, record=record, wall_time_s=wall_time_s)
    fm = flow_metrics(result)
    rm = run_metrics(result, fm)
    return result, result.flows, fm, rm


class Store:
    """Read/write access to one results directory. Use as a context manager."""

    def __init__(self, directory: str | Path, read_only: bool = False, lock_wait_s: float = 10.0):
        self.dir = Path(directory)
        self.read_only = read_only
        self.lock_wait_s = lock_wait_s
        self._con = None
        self.db = self.dir / DB_NAME
        if read_only and not self.db.exists():
            raise StoreError(f"{self.dir}: no results database here (expected {DB_NAME}); run `ccarena sweep` first")
        if not read_only:
            self.dir.mkdir(parents=True, exist_ok=True)
        self.schema_version = SCHEMA_VERSION
        if not read_only:
            try:
                self._migrate()
            except BaseException:
                self.release()  # or the failed writer's lock would keep readers out
                raise
            _remove_orphans(self.dir)
            return
        version = self._read_version()
        if version < SCHEMA_VERSION:
            # Readers see the current schema: upgrade once, in place, when the
            # directory is writable and no sweep holds it; else read it as it is.
            self.release()
            try:
                Store(self.dir, lock_wait_s=min(lock_wait_s, 2.0)).close()
            except Exception:  # noqa: BLE001 - reading must work even where the upgrade cannot
                pass
            version = self._read_version()
        self.schema_version = version

    def _read_version(self) -> int:
        try:
            v = self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except StoreError:
            raise
        except Exception as e:
            if "catalog" in str(e).lower() and "meta" in str(e):  # a DuckDB database, not ours
                raise StoreError(f"{self.db}: not a ccarena results database") from None
            raise damaged(self.db, e) from None
        if v is None or int(v[0]) > SCHEMA_VERSION:
            raise StoreError(f"{self.db}: written by a newer ccarena (schema {v and v[0]}); upgrade to read it")
        return int(v[0])

    def _migrate(self) -> None:
        """Creates the tables, or brings a database of an older schema to this one:
        missing tables are created, missing columns added with the values the
        old runs had (schema 3: each run's metadata, from its document), and
        the runs whose traffic schema 1 could not hold (background or reverse
        flows, web traffic, UDP) analysed again from their stored records.
        Nothing is deleted."""
        con = self.con
        try:
            row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except Exception as e:
            if not _missing_table(e):
                raise damaged(self.db, e) from None
            row = None  # a new database
        if row is not None and int(row[0]) > SCHEMA_VERSION:
            raise StoreError(f"{self.db}: written by a newer ccarena (schema {row[0]}); upgrade to write to it")
        old = int(row[0]) if row is not None else SCHEMA_VERSION
        if old == SCHEMA_VERSION and row is not None:
            return

        def tx():
            con.execute(_SCHEMA)
            for table, added in _ADDED_COLUMNS.items():
                have = {r[0] for r in con.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table]).fetchall()}
                for name, decl in added:
                    if name not in have:
                        con.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")

        self._transaction(tx)
        if old < 3:
            self._fill_meta()
        if old < 2:
            self._reanalyse(_needs_traffic_tables)
        self.con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])

    @property
    def con(self):
        """The open connection; opened on first use, waiting while another
        process holds the database (DuckDB lets one process at a time in)."""
        if self._con is None:
            import duckdb  # loaded on first use: importing the store to read its paths needs none of it

            deadline = time.monotonic() + self.lock_wait_s
            while True:
                try:
                    self._con = duckdb.connect(str(self.db), read_only=self.read_only)
                    break
                except duckdb.Error as e:
                    if not isinstance(e, duckdb.IOException):
                        raise damaged(self.db, e) from None
                    if "lock" not in str(e).lower():
                        raise damaged(self.db, e) from None
                    if time.monotonic() > deadline:
                        raise StoreError(f"{self.dir}: the results database is in use by another process (a running sweep?); try again") from None
                    time.sleep(0.05)
        return self._con

    def release(self) -> None:
        """Closes the connection so that other processes (e.g. `ccarena results`) can read
        while a sweep waits for its next run; the next use reopens it."""
        if self._con is not None:
            try:
                self._con.close()
            finally:
                self._con = None

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.release()
        except Exception:
            pass

    # ---- paths ----

    def timeseries_path(self, run_id: str) -> Path:
        return self.dir / "timeseries" / f"{run_id}.parquet"

    def queue_path(self, run_id: str) -> Path:
        return self.dir / "queue" / f"{run_id}.parquet"

    def record_path(self, run_id: str) -> Path:
        return self.dir / "records" / f"{run_id}.json.gz"

    def run_path(self, run_id: str) -> Path:
        """The run's row beside its record (what `rebuild` needs besides the record)."""
        return self.dir / "records" / f"{run_id}.run.json"

    def experiment_path(self, experiment_id: str) -> Path:
        return self.dir / "experiments" / f"{re.sub(r'[^A-Za-z0-9@._+-]', '_', experiment_id)}.json"

    def reverse_queue_path(self, run_id: str) -> Path:
        return self.dir / "reverse_queue" / f"{run_id}.parquet"

    def udp_series_path(self, run_id: str) -> Path:
        return self.dir / "udp_series" / f"{run_id}.parquet"

    # ---- writes ----

    def _transaction(self, fn) -> None:
        self.con.execute("BEGIN TRANSACTION")
        try:
            fn()
        except BaseException:
            try:
                self.con.execute("ROLLBACK")
            except Exception:  # noqa: BLE001 - the first error is the one to report (a damaged file, ...)
                pass
            raise
        self.con.execute("COMMIT")

    def _insert_df(self, table: str, df: pd.DataFrame, replace: bool = False) -> None:
        # By name: a migrated table has its added columns last, a new one wherever the schema puts them.
        cols = ", ".join(f'"{c}"' for c in df.columns)
        self.con.register("_ccarena_rows", df)
        try:
            self.con.execute(f"INSERT {'OR REPLACE ' if replace else ''}INTO {table} ({cols}) SELECT {cols} FROM _ccarena_rows")
        finally:
            self.con.unregister("_ccarena_rows")

    def completed(self) -> dict[str, str]:
        """Runs stored with status 'ok': run id -> the build that computed it."""
        return {r[0]: r[1] or UNKNOWN_BUILD for r in self.con.execute("SELECT run_id, build FROM runs WHERE status = 'ok'").fetchall()}

    def failed(self) -> set[str]:
        return {r[0] for r in self.con.execute("SELECT run_id FROM runs WHERE status = 'error'").fetchall()}

    def register_experiment(self, experiment_id: str, name: str, variant: str, doc: dict, specs: list, axes: list[dict],
                            command: str = "") -> None:
        """Creates or replaces an experiment and the list of runs it is made of
        (one transaction); `axes` describes its sweep's axes for reports
        (name, fields, labels of each). Its provenance (this build, the host,
        `command`: the command line that ran it) is stored beside it. Its rows
        are also written to ``experiments/<id>.json`` (for ``rebuild``)."""
        experiment = {
            "experiment_id": experiment_id, "name": name, "variant": variant, "description": str(doc.get("description", "")),
            "source": str(doc.get("source", "")), "notes": str(doc.get("notes", "")), "requires": _json(doc.get("requires", [])),
            "scenario_toml": dump_toml(doc), "axes": _json(axes), "figures": _json(doc.get("figures", [])), "n_runs": len(specs),
            "ccarena_version": __version__, "updated_at": _now().isoformat(), "build": build_id(), "host": socket.gethostname(),
            "command": command,
        }
        runs = [{"run_id": s.run_id, "point": s.point, "repetition": s.repetition, "seed": s.seed, "params": s.params,
                 "skip_reason": s.skip_reason} for s in specs]
        _atomic_write(self.experiment_path(experiment_id), _json({"experiment": experiment, "runs": runs}).encode())
        self._insert_experiment(experiment, runs)

    def _insert_experiment(self, experiment: dict, runs: list[dict]) -> None:
        experiment_id = experiment["experiment_id"]

        def tx():
            self.con.execute("DELETE FROM experiments WHERE experiment_id = ?", [experiment_id])
            self.con.execute("DELETE FROM experiment_runs WHERE experiment_id = ?", [experiment_id])
            self.con.execute("DELETE FROM params WHERE experiment_id = ?", [experiment_id])
            cols = list(experiment)
            self.con.execute(f"INSERT INTO experiments ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
                             [datetime.fromisoformat(experiment[c]) if c == "updated_at" else experiment[c] for c in cols])
            er = pd.DataFrame(
                {
                    "experiment_id": experiment_id,
                    "run_id": [r["run_id"] for r in runs],
                    "point": [r["point"] for r in runs],
                    "repetition": [r["repetition"] for r in runs],
                    "seed": [r["seed"] for r in runs],
                    "params": [_json(r["params"]) for r in runs],
                    "skip_reason": [r["skip_reason"] for r in runs],
                }
            )
            if len(er):
                self._insert_df("experiment_runs", er, replace=True)
            rows = [(experiment_id, r["run_id"], k, _param_text(v), _num(v)) for r in runs for k, v in r["params"].items()]
            if rows:
                self._insert_df("params", pd.DataFrame(rows, columns=["experiment_id", "run_id", "name", "value", "value_num"]))

        self._transaction(tx)

    def store_run(self, spec, record_json: str, wall_time_s: float, build: str | None = None) -> dict[str, float]:
        """Analyses a finished run and stores it: files first, then its rows in one transaction.
        `build` is the build identity of the process that computed it (this one's by default).

        Returns the run-level metrics."""
        record = json.loads(record_json)
        scenario = Scenario(doc=spec.doc, engine=spec.engine, meta=spec.meta)
        result, flows, fm, rm = analyse(scenario, record, wall_time_s)
        rid = spec.run_id
        _atomic_write(self.record_path(rid), gzip.compress(record_json.encode(), compresslevel=5))
        finished = _now()
        row = _run_row(spec.scenario_hash, spec.seed, scenario, wall_time_s, build or build_id(), __version__, finished)
        _atomic_write(self.run_path(rid), _json(row).encode())
        _atomic_parquet(_with_run_id(result.timeseries, rid), self.timeseries_path(rid))
        _atomic_parquet(_with_run_id(result.queue, rid), self.queue_path(rid))
        self._write_traffic_files(rid, result)
        self._insert_rows(rid, spec.scenario_hash, spec.seed, scenario, record, wall_time_s, result, fm, rm, build, finished)
        return rm

    def _write_traffic_files(self, rid: str, result) -> None:
        if len(result.reverse_queue):
            _atomic_parquet(_with_run_id(result.reverse_queue, rid), self.reverse_queue_path(rid))
        if len(result.udp):
            _atomic_parquet(_with_run_id(result.udp_timeseries, rid), self.udp_series_path(rid))

    def _insert_rows(self, rid, scenario_hash, seed, scenario: Scenario, record, wall_time_s, result, fm, rm, build=None,
                     finished_at: datetime | None = None, version: str | None = None) -> None:
        fdf = result.flows.reset_index()
        fdf.insert(0, "run_id", rid)
        fdf = fdf[_FLOW_COLUMNS]
        sdf = result.short_flows.copy()
        sdf.insert(0, "run_id", rid)
        sdf = sdf[_SHORT_FLOW_COLUMNS]
        udf = result.udp.reset_index()
        udf.insert(0, "run_id", rid)
        udf = udf[_UDP_COLUMNS]
        mrows = [(rid, None, k, _finite(v)) for k, v in rm.items()]
        mrows += [(rid, i, k, _finite(v)) for i, m in enumerate(fm) for k, v in m.items()]
        mdf = pd.DataFrame(mrows, columns=["run_id", "flow", "name", "value"]).astype({"flow": "Int64"})

        def tx():
            for table in _RUN_TABLES:
                self.con.execute(f"DELETE FROM {table} WHERE run_id = ?", [rid])
            self.con.execute(
                f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES (?, ?, ?, ?, 'ok', NULL, ?, ?, ?, ?, ?, ?, ?, ?)",
                [rid, scenario_hash, seed, version or __version__, wall_time_s, record["duration_ns"] / 1e9, record.get("events", 0),
                 _json(scenario.doc), _json(scenario.engine), finished_at or _now(), _json(scenario.meta.to_dict()), build or build_id()],
            )
            self._insert_df("flows", fdf)
            self._insert_df("metrics", mdf)
            self._refresh_wide_view(rm)
            if len(sdf):
                self._insert_df("short_flows", sdf)
            if len(udf):
                self._insert_df("udp", udf)

        self._transaction(tx)

    def _refresh_wide_view(self, names: Iterable[str]) -> None:
        """(Re)creates the view ``run_metrics_wide`` (one row per run, one
        column per run-level metric) when `names` has metrics it lacks. DuckDB
        views cannot pivot on names found in the data, so the view lists them."""
        known = getattr(self, "_wide_names", None)
        if known is None:
            known = set()
            if self.has_table("run_metrics_wide"):
                known = {r[0] for r in self.con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = 'run_metrics_wide'").fetchall()}
        if set(names) <= known:
            self._wide_names = known
            return
        all_names = [r[0] for r in self.con.execute("SELECT DISTINCT name FROM metrics WHERE flow IS NULL ORDER BY name").fetchall()]
        cols = ", ".join(f"max(value) FILTER (WHERE name = '{n}') AS \"{n}\"" for n in all_names if "'" not in n and '"' not in n)
        self.con.execute(f"CREATE OR REPLACE VIEW run_metrics_wide AS SELECT run_id{', ' + cols if cols else ''} "
                         "FROM metrics WHERE flow IS NULL GROUP BY run_id")
        self._wide_names = {"run_id", *all_names}

    def store_failure(self, spec, error: str, wall_time_s: float) -> None:
        """Records a run that crashed, with its error (it will be retried by the next sweep)."""
        meta = spec.meta.to_dict() if spec.meta is not None else None

        def tx():
            for table in _RUN_TABLES:
                self.con.execute(f"DELETE FROM {table} WHERE run_id = ?", [spec.run_id])
            self.con.execute(
                f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES (?, ?, ?, ?, 'error', ?, ?, ?, 0, ?, ?, ?, ?, ?)",
                [spec.run_id, spec.scenario_hash, spec.seed, __version__, error[:4000], wall_time_s, spec.simulated_s,
                 _json(spec.doc), _json(spec.engine or {}), _now(), None if meta is None else _json(meta), build_id()],
            )

        self._transaction(tx)

    def recompute_metrics(self, progress=None) -> int:
        """Recomputes flows, metrics, short flows and UDP rows of every stored run from its raw record; returns the count."""
        return self._reanalyse(None, progress, strict=True)

    def _reanalyse(self, select=None, progress=None, strict: bool = False) -> int:
        """Analyses stored runs again from their records (those whose engine
        configuration `select` accepts; all without it), with the scenario as
        stored (document, engine input, metadata): nothing is resolved again.
        With `strict` off a run that cannot be analysed (record gone, no
        metadata) keeps the rows it has."""
        rows = self.con.execute(
            "SELECT run_id, scenario_hash, seed, scenario, engine_config, scenario_meta, wall_time_s, build FROM runs WHERE status = 'ok'"
        ).fetchall()
        rows = [r for r in rows if select is None or select(json.loads(r[4]))]
        done = 0
        # A run analysed again keeps its build: its record is still the one that build computed.
        for k, (rid, sh, seed, doc, engine, meta, wall, build) in enumerate(rows):
            try:
                if meta is None:
                    raise StoreError(f"run {rid}: stored without its scenario's metadata (its flow groups could not be recovered)")
                record = self.record(rid)
                scenario = Scenario(doc=json.loads(doc), engine=json.loads(engine), meta=Meta.from_dict(json.loads(meta)))
                result, _, fm, rm = analyse(scenario, record, wall)
                self._write_traffic_files(rid, result)
                self._insert_rows(rid, sh, seed, scenario, record, wall, result, fm, rm, build or UNKNOWN_BUILD)
                done += 1
            except Exception:
                if strict:
                    raise
            if progress:
                progress(k + 1, len(rows))
        return done

    def _fill_meta(self) -> None:
        """Schema 3: each stored run's metadata, recovered from its document
        (the flow groups are the flow tables' counts). Runs whose document
        does not tell them keep none, and cannot be analysed again."""
        rows = self.con.execute("SELECT run_id, scenario, engine_config FROM runs WHERE scenario_meta IS NULL").fetchall()
        filled = []
        for rid, doc_json, engine_json in rows:
            try:
                doc, engine = json.loads(doc_json), json.loads(engine_json)
                groups = flow_groups_of(doc)
            except (KeyError, TypeError, ValueError, AttributeError):  # a document of another shape: leave it
                continue
            if len(groups) != len(engine.get("flows", [])):
                continue
            meta = Meta(flow_groups=tuple(groups), background=doc.get("background", "none"))
            filled.append((_json(meta.to_dict()), rid))

        def tx():
            for meta_json, rid in filled:
                self.con.execute("UPDATE runs SET scenario_meta = ? WHERE run_id = ?", [meta_json, rid])

        if filled:
            self._transaction(tx)

    # ---- reads ----

    def record(self, run_id: str) -> dict:
        return json.loads(gzip.decompress(self.record_path(run_id).read_bytes()))

    def df(self, sql: str, params: Iterable | None = None) -> pd.DataFrame:
        try:
            return self.con.execute(sql, list(params or [])).df()
        except StoreError:
            raise
        except Exception as e:
            if _duckdb_error(e) and not _missing_table(e):
                raise damaged(self.db, e) from None
            raise

    def has_table(self, name: str) -> bool:
        return bool(self.con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]).fetchone()[0])

    def short_flows(self, experiment: str | None = None, run_id: str | Iterable[str] | None = None) -> pd.DataFrame:
        """The web flows of the stored runs, one row each (the columns of
        ``RunResult.short_flows`` plus run_id, and point and repetition when
        `experiment` is given), optionally only those of one experiment
        and/or of one run or a list of runs; ordered by run and start."""
        return self._run_rows("short_flows", _SHORT_FLOW_COLUMNS, "start_s", experiment, run_id)

    def udp(self, experiment: str | None = None, run_id: str | Iterable[str] | None = None) -> pd.DataFrame:
        """The UDP sources of the stored runs (the columns of ``RunResult.udp``
        plus run_id), filtered like ``short_flows``."""
        return self._run_rows("udp", _UDP_COLUMNS, "source", experiment, run_id)

    def _run_rows(self, table: str, columns: list[str], order: str, experiment, run_id) -> pd.DataFrame:
        where, params = [], []
        if run_id is not None:
            ids = [run_id] if isinstance(run_id, str) else list(run_id)
            where.append(f"t.run_id IN ({', '.join('?' for _ in ids) or 'NULL'})")
            params += ids
        select, join = "t.*", ""
        if experiment is not None:
            known = self.con.execute("SELECT count(*) FROM experiments WHERE experiment_id = ?", [experiment]).fetchone()[0]
            if not known:
                present = [r[0] for r in self.con.execute("SELECT experiment_id FROM experiments ORDER BY 1").fetchall()]
                raise UnknownExperiment("experiment", experiment, present, where=str(self.dir))
            select, join = "t.*, er.point, er.repetition", " JOIN experiment_runs er ON er.run_id = t.run_id AND er.experiment_id = ?"
            params.insert(0, experiment)
        if not self.has_table(table):  # a schema-1 database that could not be upgraded
            cols = columns + (["point", "repetition"] if experiment is not None else [])
            return pd.DataFrame(columns=cols)
        sql = f"SELECT {select} FROM {table} t{join}" + (f" WHERE {' AND '.join(where)}" if where else "") + f" ORDER BY t.run_id, t.{order}"
        df = self.df(sql, params)
        if table == "short_flows":
            df["completed"] = df.fct_s.notna()
        return df


def damaged(db: Path, error: BaseException) -> StoreError:
    """The error of a database DuckDB cannot read: its own words (a checksum
    or I/O error), the file, and how to get the results back."""
    text = " ".join(str(error).split())
    return StoreError(f"{db}: cannot read the results database ({text}); rebuild it from the stored records with "
                      f"`ccarena results --rebuild {db.parent}` (the damaged file is kept beside it)")


def _duckdb_error(e: BaseException) -> bool:
    return type(e).__module__.split(".")[0] in ("duckdb", "_duckdb")


def _missing_table(e: BaseException) -> bool:
    return "does not exist" in str(e) and "Catalog" in str(e)


def _run_row(scenario_hash: str, seed: int, scenario: Scenario, wall_time_s: float, build: str, version: str,
             finished_at: datetime) -> dict:
    """A stored run's row as ``records/<run>.run.json`` keeps it."""
    return {"scenario_hash": scenario_hash, "seed": seed, "scenario": scenario.doc, "engine_config": scenario.engine,
            "scenario_meta": scenario.meta.to_dict(), "wall_time_s": wall_time_s, "build": build,
            "ccarena_version": version, "finished_at": finished_at.isoformat()}


def rebuild(directory: str | Path, progress=None) -> dict[str, int]:
    """Re-creates the database of a results directory from its files: the
    damaged ``ccarena.duckdb`` is moved aside (``ccarena.duckdb.damaged-<time>``),
    each experiment comes back from ``experiments/<id>.json`` and each run
    from its record and ``records/<run>.run.json`` (metrics and Parquet files
    computed from the record again, as the sweep computed them). Runs stored
    before these files existed are taken from the old database when it can
    still be read, else left pending (the next sweep runs them again).
    Returns counts: experiments, runs, runs_lost."""
    d = Path(directory)
    db = d / DB_NAME
    if not d.is_dir():
        raise StoreError(f"{d}: no such results directory")
    old_runs: dict[str, dict] = {}
    old_experiments: dict[str, tuple[dict, list[dict]]] = {}
    aside = None
    if db.exists():
        old_runs, old_experiments = _salvage(db)
        aside = db.with_name(f"{DB_NAME}.damaged-{datetime.now().strftime('%Y%m%d-%H%M%S')}")
        os.replace(db, aside)
        wal = db.with_name(DB_NAME + ".wal")
        if wal.exists():
            os.replace(wal, aside.with_name(aside.name + ".wal"))
    counts = {"experiments": 0, "runs": 0, "runs_lost": 0}
    with Store(d) as st:
        experiments = dict(old_experiments)
        for p in sorted((d / "experiments").glob("*.json")):
            doc = json.loads(p.read_text())
            experiments[doc["experiment"]["experiment_id"]] = (doc["experiment"], doc["runs"])
        for exp, runs in experiments.values():
            st._insert_experiment(exp, runs)
            counts["experiments"] += 1
        rids = sorted(p.name[: -len(".json.gz")] for p in (d / "records").glob("*.json.gz"))
        for k, rid in enumerate(rids):
            path = st.run_path(rid)
            row = json.loads(path.read_text()) if path.exists() else old_runs.get(rid)
            if row is None:
                counts["runs_lost"] += 1
                continue
            record = st.record(rid)
            scenario = Scenario(doc=row["scenario"], engine=row["engine_config"], meta=Meta.from_dict(row["scenario_meta"]))
            result, _, fm, rm = analyse(scenario, record, row["wall_time_s"])
            _atomic_parquet(_with_run_id(result.timeseries, rid), st.timeseries_path(rid))
            _atomic_parquet(_with_run_id(result.queue, rid), st.queue_path(rid))
            st._write_traffic_files(rid, result)
            finished = datetime.fromisoformat(row["finished_at"]) if row.get("finished_at") else None
            st._insert_rows(rid, row["scenario_hash"], row["seed"], scenario, record, row["wall_time_s"], result, fm, rm,
                            row.get("build") or UNKNOWN_BUILD, finished, row.get("ccarena_version"))
            counts["runs"] += 1
            if progress:
                progress(k + 1, len(rids))
    counts["moved_aside"] = str(aside) if aside else ""
    return counts


def _salvage(db: Path) -> tuple[dict[str, dict], dict[str, tuple[dict, list[dict]]]]:
    """What can still be read from a damaged database: rows of runs and
    experiments written before their files existed (each table on its own;
    whatever fails to read is left out)."""
    import duckdb  # loaded on first use, as in Store.con

    runs: dict[str, dict] = {}
    experiments: dict[str, tuple[dict, list[dict]]] = {}
    try:
        con = duckdb.connect(str(db), read_only=True)
    except Exception:  # noqa: BLE001 - nothing to salvage
        return runs, experiments
    try:
        try:
            for rid, sh, seed, doc, engine, meta, wall, build, version, finished in con.execute(
                "SELECT run_id, scenario_hash, seed, scenario, engine_config, scenario_meta, wall_time_s, build, ccarena_version, "
                "finished_at FROM runs WHERE status = 'ok' AND scenario_meta IS NOT NULL"
            ).fetchall():
                runs[rid] = {"scenario_hash": sh, "seed": seed, "scenario": json.loads(doc), "engine_config": json.loads(engine),
                             "scenario_meta": json.loads(meta), "wall_time_s": wall, "build": build, "ccarena_version": version,
                             "finished_at": finished.isoformat() if finished else None}
        except Exception:  # noqa: BLE001
            runs = {}
        try:
            cols = [c[0] for c in con.execute("SELECT * FROM experiments LIMIT 0").description]
            exps = [dict(zip(cols, r)) for r in con.execute("SELECT * FROM experiments").fetchall()]
            er = con.execute("SELECT experiment_id, run_id, point, repetition, seed, params, skip_reason FROM experiment_runs").fetchall()
            for e in exps:
                e["updated_at"] = e["updated_at"].isoformat() if e.get("updated_at") else _now().isoformat()
                mine = [{"run_id": r[1], "point": r[2], "repetition": r[3], "seed": r[4], "params": json.loads(r[5]),
                         "skip_reason": r[6]} for r in er if r[0] == e["experiment_id"]]
                experiments[e["experiment_id"]] = (e, mine)
        except Exception:  # noqa: BLE001
            experiments = {}
    finally:
        con.close()
    return runs, experiments


def _read_parquet(path: Path) -> pd.DataFrame:
    """A stored Parquet file; a missing one raises FileNotFoundError, one that
    cannot be read (truncated, damaged) a StoreError naming it."""
    try:
        return pd.read_parquet(path)
    except FileNotFoundError:
        raise
    except Exception as e:  # pyarrow's errors on a damaged file are of several kinds
        text = " ".join(str(e).split())
        raise StoreError(f"{path}: cannot read this Parquet file ({text}); "
                         f"`ccarena results --rebuild {path.parent.parent}` writes it again from the run's record") from None


def _needs_traffic_tables(engine: dict) -> bool:
    """Whether a run has rows the schema-1 tables could not hold (or whose
    metrics then counted background flows)."""
    flows = engine.get("flows", [])
    return bool(engine.get("web") or engine.get("udp") or engine.get("network", {}).get("reverse_bottleneck")
                or any(f.get("background") or f.get("direction") == "reverse" for f in flows))


def _finite(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _typed_empty(dtypes: dict[str, str]) -> pd.DataFrame:
    """An empty frame with these columns and dtypes (so code that filters or sums it works)."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in dtypes.items()})


def _typed_params(values: pd.DataFrame) -> pd.DataFrame:
    """Numeric twins of the swept parameters: for each parameter whose values
    all convert to one unit (``40ms`` and ``80ms`` -> ms), a float column named
    ``<parameter>_<unit>`` (``flows[1].rtt_ms``); plain numbers need none."""
    out = {}
    for col in values.columns:
        vals = [v for v in values[col] if v is not None and not (isinstance(v, float) and math.isnan(v))]
        units = {unit_of(v) for v in vals}
        if not vals or len(units) != 1 or "" in units or f"{col}_{next(iter(units))}" in values.columns:
            continue
        unit = next(iter(units))
        out[f"{col}_{unit}"] = [numeric(v) if isinstance(v, str) else math.nan for v in values[col]]
    return pd.DataFrame(out, index=values.index)


@dataclass
class Results:
    """A results directory as DataFrames (``ccarena.load(DIR)``).

    * ``experiments``: one row per experiment (name, variant, description, source, notes, scenario ...)
    * ``runs``: one row per (experiment, run): point, repetition, seed, status, the swept
      parameters as columns and every run-level metric as a column
    * ``flows``: one row per (run, flow): identity, throughput, counters and every flow metric
    * ``metrics``: long format (run_id, flow or NA for run-level, name, value)

    ``points(experiment)`` gives mean, 95 % CI and n across repetitions per grid
    point; ``timeseries(run_id)`` / ``queue(run_id)`` (and ``reverse_queue``,
    ``udp_timeseries``) read the Parquet files; ``short_flows(...)`` and
    ``udp(...)`` query the per-web-flow and per-UDP-source tables (large, so
    read on demand); ``result(run_id)`` rebuilds a ``RunResult`` from the raw record.
    """

    directory: Path
    experiments: pd.DataFrame = field(repr=False)
    runs: pd.DataFrame = field(repr=False)
    flows: pd.DataFrame = field(repr=False)
    metrics: pd.DataFrame = field(repr=False)

    def timeseries(self, run_id: str) -> pd.DataFrame:
        self._run_row(run_id)
        return _read_parquet(self.directory / "timeseries" / f"{run_id}.parquet")

    def queue(self, run_id: str) -> pd.DataFrame:
        self._run_row(run_id)
        return _read_parquet(self.directory / "queue" / f"{run_id}.parquet")

    def reverse_queue(self, run_id: str) -> pd.DataFrame:
        """The reverse bottleneck's samples (empty when the run had none)."""
        p = self.directory / "reverse_queue" / f"{run_id}.parquet"
        return _read_parquet(p) if p.exists() else _typed_empty(
            {"t_s": "float64", "backlog_packets": "int64", "backlog_bytes": "int64", "drops": "int64", "bytes_out": "int64", "rate_mbps": "float64"})

    def udp_timeseries(self, run_id: str) -> pd.DataFrame:
        """The UDP sinks' samples (empty when the run had no UDP sources)."""
        p = self.directory / "udp_series" / f"{run_id}.parquet"
        return _read_parquet(p) if p.exists() else _typed_empty({"t_s": "float64", "source": "int64", "throughput_mbps": "float64"})

    def short_flows(self, experiment: str | None = None, run_id: str | Iterable[str] | None = None) -> pd.DataFrame:
        """Web flows of one experiment and/or run(s) (``Store.short_flows``)."""
        experiment = None if experiment is None else self.experiment_id(experiment)
        with Store(self.directory, read_only=True) as st:
            return st.short_flows(experiment=experiment, run_id=run_id)

    def udp(self, experiment: str | None = None, run_id: str | Iterable[str] | None = None) -> pd.DataFrame:
        """UDP sources of one experiment and/or run(s) (``Store.udp``)."""
        experiment = None if experiment is None else self.experiment_id(experiment)
        with Store(self.directory, read_only=True) as st:
            return st.udp(experiment=experiment, run_id=run_id)

    def record(self, run_id: str) -> dict:
        return json.loads(gzip.decompress((self.directory / "records" / f"{run_id}.json.gz").read_bytes()))

    def _run_row(self, run_id: str):
        rows = self.runs[self.runs.run_id == run_id]
        if not len(rows):
            raise UnknownName("run", run_id, self.runs.run_id)
        return rows.iloc[0]

    def result(self, run_id: str) -> RunResult:
        """The run as a ``RunResult``, its scenario as stored (not resolved again)."""
        row = self._run_row(run_id)
        doc, engine = json.loads(row.scenario), json.loads(row.engine_config)
        with Store(self.directory, read_only=True) as st:
            has_meta = st.schema_version >= 3
            stored = st.con.execute("SELECT scenario_meta FROM runs WHERE run_id = ?", [run_id]).fetchone() if has_meta else None
        # A database that could not be upgraded: its metadata from the document, as the upgrade would.
        meta = Meta.from_dict(json.loads(stored[0])) if stored and stored[0] else Meta(tuple(flow_groups_of(doc)), doc.get("background", "none"))
        sc = Scenario(doc=doc, engine=engine, meta=meta)
        return RunResult(scenario=sc, record=self.record(run_id), wall_time_s=float(row.wall_time_s),
                         build=str(row.build) if isinstance(row.build, str) else UNKNOWN_BUILD)

    def experiment_id(self, name: str, mode: str | None = None) -> str:
        """The id of the experiment `name` names: an id as stored
        (``cubic-fig8-intra-fairness@quick``) or an experiment's name, with
        `mode` "quick" or "full" choosing between its quick and full results
        (needed only when both are stored). Raises ``UnknownName`` (listing
        what is stored, with near misses) for anything else."""
        if mode not in (None, "quick", "full"):
            raise UnknownName("mode", str(mode), ["quick", "full"])
        ids = list(self.experiments.experiment_id)
        if name in ids and mode is None:
            return name
        base = name.split("@", 1)[0] if name in ids else name
        rows = self.experiments[self.experiments.name == base]
        if mode is not None:
            rows = rows[rows.variant == ("quick" if mode == "quick" else "")]
        if len(rows) == 1:
            return str(rows.experiment_id.iloc[0])
        if len(rows) > 1:
            raise UnknownExperiment("single experiment named", name, rows.experiment_id,
                              "several are stored under that name: pass its id, or mode='quick' / mode='full'")
        if mode is not None and len(self.experiments[self.experiments.name == base]):
            have = self.experiments[self.experiments.name == base].experiment_id
            raise UnknownExperiment(f"{mode}-mode experiment", base, have, f"run it with{'' if mode == 'quick' else 'out'} --quick first")
        raise UnknownExperiment("experiment", name, ids + list(self.experiments.name), where=str(self.directory))

    def _summary(self) -> list[tuple[str, str, int, int, str]]:
        """(experiment, description, ok runs, runs, builds) per experiment."""
        rows = []
        for _, e in self.experiments.iterrows():
            runs = self.runs[self.runs.experiment_id == e.experiment_id]
            ok = runs[runs.status == "ok"]
            builds = ", ".join(sorted(set(ok.build.fillna(UNKNOWN_BUILD)))) if "build" in ok else ""
            rows.append((str(e.experiment_id), str(e.description or ""), len(ok), len(runs), builds))
        return rows

    def __repr__(self) -> str:
        lines = [f"Results({str(self.directory)!r}): {len(self.experiments)} experiments, {len(self.runs)} runs"]
        lines += [f"  {eid}: {ok}/{n} runs ok, build {b or '-'}" for eid, _, ok, n, b in self._summary()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{html.escape(eid)}</td><td>{html.escape(d)}</td><td>{ok}/{n}</td><td><code>{html.escape(b)}</code></td></tr>"
                       for eid, d, ok, n, b in self._summary())
        return (f"<p><b>Results</b> <code>{html.escape(str(self.directory))}</code>: {len(self.experiments)} experiments, "
                f"{len(self.runs)} runs. <code>.points(name)</code>, <code>.runs</code>, <code>.flows</code></p>"
                f"<table><tr><th>experiment</th><th>description</th><th>runs ok</th><th>build</th></tr>{rows}</table>")

    def param_names(self, experiment_id: str, mode: str | None = None) -> list[str]:
        """The names of the experiment's swept parameters (its sweep's axes)."""
        row = self.experiments[self.experiments.experiment_id == self.experiment_id(experiment_id, mode)]
        return [a["name"] for a in json.loads(row.iloc[0]["axes"])]

    def points(self, experiment_id: str, metrics: list[str] | None = None, mode: str | None = None) -> pd.DataFrame:
        """Mean, 95 % CI half-width and n of each run-level metric per grid
        point, and the interval cut to the metric's range (``<m>_low``,
        ``<m>_high``; docs/metrics.md), each swept parameter as written and
        its numeric twin with the unit in its name (``rtt_ms``), and
        ``short_run`` where a repetition was too short for the flows to reach
        their operating point (docs/metrics.md, "Runs too short").
        `experiment_id` may also be the experiment's name, with `mode`
        ("quick" or "full") when both are stored; an unknown experiment or
        metric raises ``UnknownName``."""
        experiment_id = self.experiment_id(experiment_id, mode)
        runs = self.runs[(self.runs.experiment_id == experiment_id) & (self.runs.status == "ok")]
        names = self.param_names(experiment_id)
        if metrics is None:
            metrics = [c for c in self.metric_names if c in runs.columns]
        else:
            for m in metrics:
                if m not in self.metric_names and m not in self.runs.columns:
                    raise UnknownName("run-level metric", m, self.metric_names)
        rows = []
        for point, g in runs.groupby("point", sort=True):
            row: dict[str, Any] = {"point": point}
            values = json.loads(g["params"].iloc[0])
            for p in names:
                row[p] = values.get(p)
            for m in metrics:
                vals = g[m].to_numpy(dtype=float) if m in g else np.array([])
                mu, ci, n = mean_ci(vals)
                _, low, high, _ = mean_interval(vals, *metric_bounds(m))
                row[m] = mu
                row[f"{m}_ci95"] = ci
                row[f"{m}_low"], row[f"{m}_high"] = low, high
                # On the log scale (for ratios drawn on log axes): geometric mean and the CI of the logs.
                pos = vals[~np.isnan(vals)]
                if len(pos) and (pos > 0).all():
                    lmu, lci, _ = mean_ci(np.log(pos))
                    row[f"{m}_gmean"], row[f"{m}_log_ci95"] = float(np.exp(lmu)), lci
            row["n"] = len(g)
            if "min_congestion_epochs" in g:
                # Too short for the physics: a loss-based flow of some repetition saw too few loss cycles (docs/metrics.md).
                row["short_run"] = bool((g.min_congestion_epochs < SHORT_RUN_EPOCHS).any())
            rows.append(row)
        df = pd.DataFrame(rows)
        if not len(df):
            return pd.DataFrame(columns=["point", *names, "n"])
        return pd.concat([df, _typed_params(df[names])], axis=1)

    @cached_property
    def metric_names(self) -> list[str]:
        if not len(self.metrics):
            return []
        return list(dict.fromkeys(self.metrics[self.metrics.flow.isna()].name))


def load(directory: str | Path) -> Results:
    """Reads a results directory (written by `ccarena sweep`) into DataFrames."""
    d = Path(directory)
    with Store(d, read_only=True) as st:
        experiments = st.df("SELECT * FROM experiments ORDER BY name, variant")
        # A database that could not be upgraded (read-only, or held by a sweep) has no builds: "unknown".
        build = "r.build" if st.schema_version >= 4 else f"'{UNKNOWN_BUILD}'"
        er = st.df(
            "SELECT er.experiment_id, er.run_id, er.point, er.repetition, er.seed, er.params, er.skip_reason, "
            "r.scenario_hash, r.ccarena_version, r.status, r.error, r.wall_time_s, r.simulated_s, r.events, r.scenario, r.engine_config, "
            f"r.finished_at, {build} AS build "
            "FROM experiment_runs er LEFT JOIN runs r USING (run_id) ORDER BY er.experiment_id, er.point, er.repetition"
        )
        flows = st.df("SELECT * FROM flows ORDER BY run_id, flow")
        metrics = st.df("SELECT * FROM metrics")
    for col, default in (("build", UNKNOWN_BUILD), ("host", ""), ("command", "")):  # schema < 4, not upgraded
        if col not in experiments:
            experiments[col] = default
    # A schema-1 database that could not be upgraded (read-only, or held by a sweep): its runs had no such flows.
    if "direction" not in flows:
        flows["direction"] = "forward"
    if "background" not in flows:
        flows["background"] = False
    status = er.status.astype(object).where(er.status.notna(), None)
    er["status"] = [s if s is not None else ("skipped" if sk is not None and not pd.isna(sk) else "pending") for s, sk in zip(status, er.skip_reason)]
    params = pd.DataFrame([json.loads(p) for p in er.params], index=er.index)
    params = params.drop(columns=[c for c in params.columns if c in er.columns])
    params = pd.concat([params, _typed_params(params)], axis=1)
    runs = pd.concat([er, params], axis=1)  # `params` (JSON) keeps each experiment's values with their types
    if len(metrics):
        run_level = metrics[metrics.flow.isna()].pivot_table(index="run_id", columns="name", values="value", aggfunc="first")
        runs = runs.merge(run_level, how="left", left_on="run_id", right_index=True)
        flow_level = metrics[metrics.flow.notna()].pivot_table(index=["run_id", "flow"], columns="name", values="value", aggfunc="first")
        flow_level = flow_level.drop(columns=[c for c in flow_level.columns if c in flows.columns])
        flows = flows.merge(flow_level, how="left", left_on=["run_id", "flow"], right_index=True)
        # One name per metric: the flow table's copies of four flow metrics go (the metric's name stays).
        flows = flows.drop(columns=[old for old, new in FLOW_COLUMN_TWINS.items() if old in flows and new in flows])
    return Results(directory=d, experiments=experiments, runs=runs, flows=flows, metrics=metrics)
