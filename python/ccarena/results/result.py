"""The record of one run as Python sees it: per-flow results, time series and
the bottleneck's queue as pandas DataFrames, plus the summary metrics the CLI
prints (utilisation, Jain's index, throughput ratio). A result can be saved to
a directory (result.json + Parquet time series + the scenario) and loaded back.

numpy and pandas are imported by the tables that need them, not with this
module: `ccarena run` prints its table, its JSON and its summary from the
record in plain Python (``summary``) and so starts without them.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..scenario.catalogue import Catalogue, engine_cca_names
from ..scenario.document import parse_toml
from ..scenario.model import Meta, Scenario
from ..scenario.traffic import BACKGROUNDS
from ..version import UNKNOWN_BUILD, __version__, build_id
from .record import RunRecord, normalise
from .summary import DEFAULT_MSS, flow_rows, plain, run_summary

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # for the tables only (see the module's docstring)
    import pyarrow as pa

__all__ = ["RunResult", "load_result", "read_record"]

_CA_STATES = ["open", "disorder", "cwr", "recovery", "loss"]
# Linux's "no threshold yet" (TCP_INFINITE_SSTHRESH, 0x7fffffff): NA in the frames, not a number.
INFINITE_SSTHRESH = 2147483647
# Column -> dtype of the time series, so a run without flows still has typed columns
# (ca_state: a categorical of _CA_STATES).
_TIMESERIES_DTYPES = {
    "t_s": "float64", "flow": "int32", "cwnd": "int64", "ssthresh": "Int64", "in_flight": "int64",
    "srtt_ms": "float64", "min_rtt_ms": "float64", "throughput_mbps": "float64", "delivery_rate_mbps": "float64",
    "delivered_bytes": "int64", "retransmissions": "int64", "ca_state": "category",
    "pacing_rate_mbps": "float64",
    # The algorithm's own estimates as ss shows them (BBR's; NaN for others).
    "cc_bw_mbps": "float64", "cc_min_rtt_ms": "float64", "pacing_gain": "float64", "cwnd_gain": "float64",
}


@dataclass
class RunResult:
    """One run: its scenario and its record (normalised on arrival, see ``record``)."""

    scenario: Scenario
    record: RunRecord = field(repr=False)
    wall_time_s: float = 0.0
    #: What computed the run (``version.build_id``): this process's build for a
    #: run just made, the stored one for a run read back ("unknown" if not recorded).
    build: str = ""

    def __post_init__(self) -> None:
        normalise(self.record)
        if not self.build:
            self.build = build_id()

    # ---- tables ----

    @cached_property
    def flows(self) -> pd.DataFrame:
        """One row per flow: identity, measurement window, throughput and counters."""
        import pandas as pd  # for the tables only (see the module's docstring)

        # The same rows as the summary's (``summary.flow_rows``, equal to the
        # bit to the pandas formulas: tests/test_startup.py).
        return pd.DataFrame(self.flow_rows).set_index("flow")

    @cached_property
    def timeseries(self) -> pd.DataFrame:
        """Long format: one row per (sample time, flow)."""
        df = _timeseries_table(self.record["flow_series"]).to_pandas()
        # Arrow hands a nullable integer column to pandas as floats: NA stays NA.
        df["ssthresh"] = df["ssthresh"].astype("Int64")
        return df

    @cached_property
    def queue(self) -> pd.DataFrame:
        """The bottleneck queue: backlog, cumulative drops and bytes sent over time."""
        return _queue_table(self.record["queue_series"]).to_pandas()

    @cached_property
    def reverse_queue(self) -> pd.DataFrame:
        """The reverse bottleneck's queue (empty when the run has none)."""
        import pandas as pd  # for the tables only (see the module's docstring)

        q = self.record["reverse_queue_series"]
        return _queue_table(q).to_pandas() if q else pd.DataFrame(columns=self.queue.columns)

    @cached_property
    def udp(self) -> pd.DataFrame:
        """One row per UDP source: rates, datagrams sent and received, loss."""
        # numpy and pandas: for the tables only (see the module's docstring)
        import numpy as np
        import pandas as pd  # for the tables only (see the module's docstring)

        rows = []
        for i, u in enumerate(self.record["udp"]):
            window_s = max(u["window_end_ns"] - u["window_start_ns"], 0) / 1e9
            rows.append(
                {
                    "source": i,
                    "label": u["label"],
                    "direction": u["direction"],
                    "rate_mbps": u["rate_bps"] / 1e6,
                    "throughput_mbps": u["window_received_bytes"] * 8 / window_s / 1e6 if window_s > 0 else 0.0,
                    "sent_packets": u["sent_packets"],
                    "received_packets": u["received_packets"],
                    "loss_rate": 1 - u["received_packets"] / u["sent_packets"] if u["sent_packets"] else np.nan,
                }
            )
        return pd.DataFrame(rows, columns=_UDP_COLUMNS).set_index("source")

    @cached_property
    def udp_timeseries(self) -> pd.DataFrame:
        """Long format: one row per (sample time, UDP source), wire bytes received."""
        # numpy and pandas: for the tables only (see the module's docstring)
        import numpy as np
        import pandas as pd  # for the tables only (see the module's docstring)

        frames = []
        for i, s in enumerate(self.record["udp_series"]):
            frames.append(
                pd.DataFrame(
                    {
                        "t_s": np.asarray(s["t_ns"], dtype=float) / 1e9,
                        "source": np.full(len(s["t_ns"]), i, dtype=np.int32),
                        "throughput_mbps": np.asarray(s["throughput_bps"], dtype=float) / 1e6,
                    }
                )
            )
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["t_s", "source", "throughput_mbps"])

    @cached_property
    def short_flows(self) -> pd.DataFrame:
        """One row per web flow: size, RTT, start and flow completion time (NaN if unfinished)."""
        # numpy and pandas: for the tables only (see the module's docstring)
        import numpy as np
        import pandas as pd  # for the tables only (see the module's docstring)

        recs = self.record["short_flows"]
        gens = self.record["web"]
        if not recs:
            return pd.DataFrame(columns=_SHORT_FLOW_COLUMNS)
        g = np.asarray([r["generator"] for r in recs], dtype=np.int64)
        fct = np.asarray([np.nan if r["fct_ns"] is None else r["fct_ns"] for r in recs], dtype=float) / 1e9
        acked = np.asarray([np.nan if r["acked_ns"] is None else r["acked_ns"] for r in recs], dtype=float) / 1e9
        return pd.DataFrame(
            {
                "generator": g,
                "label": [gens[k]["label"] if k < len(gens) else "" for k in g],
                "direction": [gens[k]["direction"] if k < len(gens) else "forward" for k in g],
                "size_bytes": np.asarray([r["size_bytes"] for r in recs], dtype=np.int64),
                "rtt_ms": np.asarray([r["rtt_ns"] for r in recs], dtype=float) / 1e6,
                "start_s": np.asarray([r["start_ns"] for r in recs], dtype=float) / 1e9,
                "fct_s": fct,
                "acked_s": acked,
                "retransmissions": np.asarray([r["retransmissions"] for r in recs], dtype=np.int64),
                "rtos": np.asarray([r["rtos"] for r in recs], dtype=np.int64),
                "completed": ~np.isnan(fct),
            },
            columns=_SHORT_FLOW_COLUMNS,
        )

    # ---- summary ----

    @cached_property
    def summary(self) -> dict[str, Any]:
        """Run-level metrics over the measurement window (docs/metrics.md).

        Fairness (Jain's index, throughput ratio, aggregate throughput) is over
        the flows under study, background flows excluded; `utilization` counts
        every forward long-lived flow (background included) against the link's
        goodput capacity, `link_utilization` every byte the link sent (UDP and
        web traffic included) against its capacity.

        Computed from the record in plain Python (``summary.run_summary``):
        the same numbers as the formulas of ``metrics`` on ``flows``."""
        return run_summary(self.record, self.flow_rows)

    @cached_property
    def flow_rows(self) -> list[dict[str, Any]]:
        """The rows of ``flows`` as dicts (``flow`` first; NaN where the
        DataFrame has NaN), computed without pandas (``summary.flow_rows``)."""
        return flow_rows(self.scenario, self.record)

    @property
    def invariant_violations(self) -> list[str]:
        return list(self.record["invariant_violations"])

    # ---- serialisation ----

    def to_dict(self) -> dict[str, Any]:
        """The JSON document `ccarena run --json` prints."""
        flows = [{k: plain(v) for k, v in row.items()} for row in self.flow_rows]
        return {
            "scenario": self.scenario.name,
            "backend": self.record.get("backend", "sim"),
            "seed": self.scenario.seed,
            "duration_s": self.record["duration_ns"] / 1e9,
            "warmup_s": self.record["warmup_ns"] / 1e9,
            "bottleneck_rate_mbps": self.record["link"]["rate_bps"] / 1e6,
            "flows": flows,
            **{k: plain(v) for k, v in self.summary.items()},
            "events": self.record["events"],
            "wall_time_s": self.wall_time_s,
            "version": __version__,
            "build": self.build,
            "invariant_violations": self.invariant_violations,
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def save(self, directory: str | Path) -> Path:
        """Writes result.json, scenario.toml (the document), resolved.json (the
        engine's input and the metadata beside it), record.json.gz (the engine's
        record, gzip-compressed: an hour with web traffic is hundreds of MB of
        JSON) and Parquet tables (time series, queues, short flows, UDP)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        (d / "result.json").write_text(self.to_json(indent=2) + "\n")
        (d / "scenario.toml").write_text(self.scenario.to_toml())
        sc = self.scenario
        (d / "resolved.json").write_text(json.dumps({"backend": sc.backend, "engine": sc.engine, "meta": sc.meta.to_dict()}))
        (d / "record.json.gz").write_bytes(gzip.compress(json.dumps(self.record).encode(), compresslevel=5))
        # The two tables every run has go straight from the record to Parquet
        # through pyarrow: saving a run does not import pandas (~0.3 s).
        import pyarrow.parquet as pq

        pq.write_table(_timeseries_table(self.record["flow_series"]), d / "timeseries.parquet")
        pq.write_table(_queue_table(self.record["queue_series"]), d / "queue.parquet")
        if self.record["reverse_queue_series"] and self.record["reverse_queue_series"]["t_ns"]:
            pq.write_table(_queue_table(self.record["reverse_queue_series"]), d / "reverse_queue.parquet")
        if self.record["short_flows"]:
            self.short_flows.to_parquet(d / "short_flows.parquet", index=False)
        if self.record["udp"]:
            self.udp.to_parquet(d / "udp.parquet")
            self.udp_timeseries.to_parquet(d / "udp_timeseries.parquet", index=False)
        return d


_UDP_COLUMNS = ["source", "label", "direction", "rate_mbps", "throughput_mbps", "sent_packets", "received_packets", "loss_rate"]
_SHORT_FLOW_COLUMNS = [
    "generator", "label", "direction", "size_bytes", "rtt_ms", "start_s", "fct_s", "acked_s", "retransmissions", "rtos", "completed",
]


def _scaled(values: list, divisor: float) -> list[float]:
    """values / divisor as numpy computes it (int / float divides the int's
    nearest double); a missing sample (None, as kernel records have) is NaN."""
    return [math.nan if v is None else v / divisor for v in values]


def _timeseries_table(series: list[dict]) -> "pa.Table":
    """The flows' time series (``RunResult.timeseries``) as an Arrow table,
    built from the record's lists without numpy or pandas: ``save`` writes it
    to Parquet as it is. ssthresh is a nullable integer (Linux's "infinite"
    is null); ca_state a dictionary of _CA_STATES."""
    import pyarrow as pa  # loaded only when a run is saved or its tables are asked for

    cols: dict[str, list] = {c: [] for c in _TIMESERIES_DTYPES}
    for i, s in enumerate(series):
        cols["t_s"] += _scaled(s["t_ns"], 1e9)
        cols["flow"] += [i] * len(s["t_ns"])
        for name in ("cwnd", "in_flight", "delivered_bytes", "retransmissions"):
            cols[name] += s[name]
        # A kernel sample may not know the state (-1): null, as pandas' from_codes makes it.
        cols["ca_state"] += [None if v < 0 else v for v in s["ca_state"]]
        cols["ssthresh"] += [None if v >= INFINITE_SSTHRESH else v for v in s["ssthresh"]]
        cols["srtt_ms"] += _scaled(s["srtt_us"], 1e3)
        cols["min_rtt_ms"] += _scaled(s["min_rtt_us"], 1e3)
        cols["throughput_mbps"] += _scaled(s["throughput_bps"], 1e6)
        cols["delivery_rate_mbps"] += _scaled(s["delivery_rate_bps"], 1e6)
        cols["pacing_rate_mbps"] += _scaled(s["pacing_rate_bps"], 1e6)
        n = len(s["t_ns"])
        for name, key, divisor in (("cc_bw_mbps", "cc_bw_bps", 1e6), ("cc_min_rtt_ms", "cc_min_rtt_us", 1e3),
                                   ("pacing_gain", "cc_pacing_gain", 256.0), ("cwnd_gain", "cc_cwnd_gain", 256.0)):
            cols[name] += _scaled(s[key], divisor) if len(s.get(key, ())) == n else [math.nan] * n
    arrays = []
    for name, dtype in _TIMESERIES_DTYPES.items():
        if dtype == "category":
            arrays.append(pa.DictionaryArray.from_arrays(_arrow(cols[name], "int8"), _arrow_strings(_CA_STATES)))
        else:
            arrays.append(_arrow(cols[name], dtype.lower()))
    return pa.Table.from_arrays(arrays, names=list(_TIMESERIES_DTYPES))


# array-module typecodes of the Arrow types the tables use.
_TYPECODES = {"float64": "d", "int64": "q", "int32": "i", "int8": "b"}


def _arrow(values: list, dtype: str) -> "pa.Array":
    """An Arrow array of `dtype` from a list (None: null), built from its
    buffers: `pyarrow.array` would import pandas to look for pandas objects."""
    # Loaded only when a run is saved or its tables are asked for.
    import array
    import pyarrow as pa

    nulls = [i for i, v in enumerate(values) if v is None]
    data = array.array(_TYPECODES[dtype], [0 if v is None else v for v in values] if nulls else values)
    validity = None
    if nulls:
        bits = bytearray(b"\xff" * ((len(values) + 7) // 8))
        for i in nulls:
            bits[i // 8] &= ~(1 << (i % 8)) & 0xFF
        validity = pa.py_buffer(bytes(bits))
    return pa.Array.from_buffers(getattr(pa, dtype)(), len(values), [validity, pa.py_buffer(data)], null_count=len(nulls))


def _arrow_strings(values: list[str]) -> "pa.Array":
    """An Arrow string array from its buffers (see `_arrow`)."""
    # Loaded only when a run is saved or its tables are asked for.
    import array
    import pyarrow as pa

    encoded = [v.encode() for v in values]
    offsets = array.array("i", [0])
    for e in encoded:
        offsets.append(offsets[-1] + len(e))
    return pa.Array.from_buffers(pa.string(), len(values), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def _queue_table(q: dict) -> "pa.Table":
    """A queue's series (``RunResult.queue``) as an Arrow table, from the record's lists."""
    import pyarrow as pa  # loaded only when a run is saved or its tables are asked for

    columns = {
        "t_s": _arrow(_scaled(q["t_ns"], 1e9), "float64"),
        "backlog_packets": _arrow(q["backlog_packets"], "int64"),
        "backlog_bytes": _arrow(q["backlog_bytes"], "int64"),
        "drops": _arrow(q["drops"], "int64"),
        "bytes_out": _arrow(q["bytes_out"], "int64"),
        "rate_mbps": _arrow(_scaled(q["rate_bps"], 1e6), "float64"),
    }
    return pa.Table.from_arrays(list(columns.values()), names=list(columns))


def read_record(directory: str | Path) -> dict:
    """The engine's record saved in a run directory: record.json.gz, or
    record.json in directories saved before records were compressed."""
    d = Path(directory)
    packed = d / "record.json.gz"
    if packed.exists():
        return json.loads(gzip.decompress(packed.read_bytes()))
    return json.loads((d / "record.json").read_text())


def load_result(directory: str | Path) -> RunResult:
    """Reads back a result saved with `RunResult.save` (its scenario as it was
    resolved then: nothing is validated again)."""
    d = Path(directory)
    record = read_record(d)
    path = str(d / "scenario.toml")
    doc = parse_toml((d / "scenario.toml").read_text(), path)
    resolved = d / "resolved.json"
    if resolved.exists():
        r = json.loads(resolved.read_text())
        scenario = Scenario(doc=doc, engine=r["engine"], meta=Meta.from_dict(r["meta"]), path=path, backend=r["backend"])
    else:  # saved before resolved.json existed: resolve the document, whatever its algorithms
        scenario = Scenario.from_dict(doc, path, _any_algorithm(doc, record.get("backend", "sim")), check=False)
    result = json.loads((d / "result.json").read_text())
    return RunResult(scenario=scenario, record=record, wall_time_s=result.get("wall_time_s", 0.0),
                     build=result.get("build", UNKNOWN_BUILD))


def _any_algorithm(doc: dict, backend: str) -> Catalogue:
    """A catalogue that accepts every algorithm `doc` names (it ran with them)."""
    tables = [t for key in ("flows", "web") for t in doc.get(key, []) if isinstance(t, dict)]
    tables += BACKGROUNDS.get(doc.get("background", "none"), {}).get("flows", [])
    names = engine_cca_names() | {t["cca"] for t in tables if isinstance(t.get("cca"), str)}

    def ignore_files(files) -> Catalogue:
        return catalogue

    catalogue = Catalogue(backend=backend, names=frozenset(names), load_files=ignore_files)
    return catalogue
