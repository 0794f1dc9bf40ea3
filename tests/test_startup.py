"""Start-up of `ccarena run`: a plain run line is parsed without typer and
printed without numpy and pandas (launch.py, results/summary.py), and what it
prints is exactly what the DataFrame path computes (docs/performance.md,
"Start-up")."""

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import ccarena
from ccarena import cli, launch
from ccarena.results import metrics
from ccarena.results.summary import DEFAULT_MSS, flow_rows, np_mean, np_sum, run_summary

HEAVY = ("pandas", "numpy", "pyarrow", "duckdb", "matplotlib", "asyncssh", "dask", "scipy", "typer", "pydantic")


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_plain_run_imports_nothing_heavy(small_scenario, extra):
    """`ccarena run FILE --no-save` (table or JSON) loads neither the option
    parser nor numpy/pandas nor the other backends."""
    code = (
        "import sys\n"
        "from ccarena.launch import main\n"
        f"main(['run', {str(small_scenario)!r}, '--no-save', *{extra!r}])\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}"
        " or m.startswith(('ccarena.backends.linux', 'ccarena.backends.testbed')))\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "HEAVY []" in p.stderr, p.stderr


def test_plain_run_prints_what_the_full_command_line_prints(small_scenario, tmp_path):
    def both(*args):
        outs = []
        for module in ("ccarena.launch", "ccarena.cli"):
            p = subprocess.run([sys.executable, "-m", module, "run", str(small_scenario), *args], capture_output=True, text=True,
                               cwd=tmp_path, env={"COLUMNS": "200", **{k: v for k, v in __import__("os").environ.items() if k != "COLUMNS"}})
            assert p.returncode == 0, p.stderr
            outs.append(p.stdout)
        return outs

    fast, full = both("--no-save", "--json", "--set", "run.seed=4")
    a, b = json.loads(fast), json.loads(full)
    a.pop("wall_time_s"), b.pop("wall_time_s")
    assert a == b and a["seed"] == 4
    fast, full = both("--no-save")

    def strip(text):
        return [line for line in text.splitlines() if "s wall" not in line]

    assert strip(fast) == strip(full) and "Jain's index" in fast


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "x.toml"],
        ["run", "--no-save", "x.toml", "--json"],
        ["run", "x.toml", "--set", "run.seed=3", "--set=run.duration=2s", "--out", "d/e/", "--cca-file", "a.py", "--cca-file=b.py"],
        ["run", "x.toml", "--backend=testbed", "--inventory", "inv.toml", "--dry-run"],
    ],
)
def test_plain_run_args_are_what_typer_passes(argv, monkeypatch):
    seen = {}
    monkeypatch.setattr(cli, "run_command", lambda *args: seen.setdefault("args", args))
    cli.main(argv)
    names = ["scenario", "as_json", "sets", "out_dir", "no_save", "backend", "inventory", "dry_run", "cca_files"]
    typer_args = dict(zip(names, seen["args"]))
    plain = launch.plain_run_args(argv)
    for key in ("sets", "cca_files"):  # absent: typer gives None or an empty list; both mean none
        typer_args[key] = list(typer_args[key] or []) or None
    assert plain == typer_args


@pytest.mark.parametrize(
    "argv",
    [
        ["version"], ["run"], ["run", "--help"], ["run", "-h"], ["run", "a", "b"], ["run", "a", "--json", "--json"],
        ["run", "a", "--out"], ["run", "a", "--out", "--json"], ["run", "a", "--set="], ["run", "a", "--bogus"], ["run", "a", "--"],
        ["run", "a", "--json=1"], ["run", "a", "--backend", "sim", "--backend", "linux"], ["--version", "run", "a"],
    ],
)
def test_anything_else_goes_to_the_full_command_line(argv):
    assert launch.plain_run_args(argv) is None


def test_version_is_what_importlib_metadata_reads():
    from importlib.metadata import version

    from ccarena.version import _read_version

    assert ccarena.__version__ == _read_version() == version("ccarena")


# ---------------------------------------------------------------- the same numbers as the DataFrame path


def test_np_sum_and_mean_are_numpys_to_the_bit():
    rng = np.random.default_rng(7)
    for n in (0, 1, 5, 7, 8, 9, 16, 100, 127, 128, 129, 255, 1000, 8191, 8192, 8193, 20000):
        a = rng.random(n) * 10.0 ** rng.integers(-3, 7, n)
        assert np_sum(a.tolist()) == float(np.sum(a))
        if n:
            assert np_mean(a.tolist()) == float(pd.Series(a).mean())
    b = [1.5, None, 2.25, float("nan"), 7.0]
    assert np_mean(b) == float(pd.Series(b, dtype=float).mean())
    assert math.isnan(np_mean([None, float("nan")]))


def _pandas_flows(r):
    """RunResult.flows as it was computed from the time-series DataFrame (the oracle)."""
    rows = []
    ts = r.timeseries
    groups = r.scenario.flow_groups()
    engine_flows = r.scenario.engine["flows"]
    for i, f in enumerate(r.record["flows"]):
        c = f["counters"]
        window_s = max(f["window_end_ns"] - f["window_start_ns"], 0) / 1e9
        delivered = c["delivered_at_window_end"] - c["delivered_at_window_start"]
        thr = delivered * 8 / window_s / 1e6 if window_s > 0 else 0.0
        in_window = ts[(ts.flow == i) & (ts.t_s > f["window_start_ns"] / 1e9) & (ts.t_s <= f["window_end_ns"] / 1e9)]
        fct = (c["completion_ns"] - c["start_ns"]) / 1e9 if c["completion_ns"] else np.nan
        rows.append(
            {
                "flow": i,
                "group": groups[i],
                "label": f["label"],
                "cca": f["cca"],
                "direction": f["direction"],
                "background": bool(f["background"]),
                "rtt_ms": f["rtt_ns"] / 1e6,
                "mss": int(engine_flows[i].get("tcp", {}).get("mss", DEFAULT_MSS)) if i < len(engine_flows) else DEFAULT_MSS,
                "start_s": f["start_ns"] / 1e9,
                "data_start_s": c["first_data_ns"] / 1e9 if c.get("first_data_ns") else np.nan,
                "throughput_mbps": thr,
                "mean_cwnd": float(in_window.cwnd.mean()) if len(in_window) else np.nan,
                "mean_srtt_ms": float(in_window.srtt_ms.mean()) if len(in_window) else np.nan,
                "retransmissions": c["retransmissions"],
                "rtos": c["rtos"],
                "drops": c["drops"],
                "recoveries": c["recoveries"],
                "undos": c["undos"],
                "tlps": c["tlps"],
                "segments_sent": c["segments_sent"],
                "skbs_sent": c.get("skbs_sent", 0),
                "acks_sent": c.get("acks_sent", 0),
                "paws_rejected": c.get("paws_rejected", 0),
                "ofo_skbs": c.get("ofo_skbs", 0),
                "acks_compressed": c.get("acks_compressed", 0),
                "delayed_acks": c.get("delayed_acks", 0),
                "hystart_train_cwnd": c["hystart_train_cwnd"] / c["hystart_train"] if c.get("hystart_train") else np.nan,
                "hystart_delay_cwnd": c["hystart_delay_cwnd"] / c["hystart_delay"] if c.get("hystart_delay") else np.nan,
                "bytes_sent": c["bytes_sent"],
                "bytes_delivered": c["bytes_delivered"],
                "window_retransmissions": c["retransmissions"] - c["retrans_at_window_start"],
                "window_rtos": c["rtos"] - c["rtos_at_window_start"],
                "size_bytes": f["size_bytes"],
                "fct_s": fct,
                "window_start_s": f["window_start_ns"] / 1e9,
                "window_end_s": f["window_end_ns"] / 1e9,
            }
        )
    return pd.DataFrame(rows).set_index("flow")


def _reference_summary(r) -> dict:
    """RunResult.summary as it was computed from the DataFrames and the formulas of ``metrics``."""
    flows = _pandas_flows(r)
    link = r.record["link"]
    window_s = (r.record["duration_ns"] - r.record["warmup_ns"]) / 1e9
    capacity_bytes = link["window_capacity_bytes"] or link["rate_bps"] * window_s / 8
    rate = capacity_bytes * 8 / window_s if window_s > 0 else link["rate_bps"]
    studied = flows[~flows.background] if len(flows) else flows
    thr = studied.throughput_mbps.to_numpy()
    forward = flows[flows.direction == "forward"]
    share = float(sum(t * 1e6 / metrics.goodput_capacity_bps(rate, m) for t, m in zip(forward.throughput_mbps, forward.mss))) if rate > 0 else float("nan")
    extra = {}
    if len(r.udp):
        extra["udp_throughput_mbps"] = float(r.udp.throughput_mbps.sum())
    if r.record["web"]:
        web = metrics.web_metrics(r.short_flows, metrics.link_rates_bps(r.record), r.record["warmup_ns"] / 1e9, r.record["duration_ns"] / 1e9)
        extra.update(web_flows=int(web["web_flows"]), web_completed=web["web_completed"], median_fct_s=web["median_fct_s"])
    return {
        "utilization": share,
        "link_utilization": float(link["window_bytes_out"] / capacity_bytes) if capacity_bytes > 0 else float("nan"),
        "jain_index": metrics.jain_index(thr),
        "throughput_ratio": metrics.throughput_ratio(thr),
        "aggregate_throughput_mbps": float(thr.sum()),
        **extra,
        "drops": int(link["drops_queue"] + link["drops_random"] + link["drops_aqm"]),
        "ce_marks": int(link["ce_marks"]),
        "mean_queue_packets": float(r.queue.backlog_packets[r.queue.t_s > r.record["warmup_ns"] / 1e9].mean()) if len(r.queue) else float("nan"),
    }


def _same(a, b) -> bool:
    """Equal values of equal types (as JSON sees them), NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def _check(r) -> None:
    rows = flow_rows(r.scenario, r.record)
    frame = [dict(row) for _, row in _pandas_flows(r).reset_index().iterrows()]
    assert _pandas_flows(r).equals(r.flows)
    assert [list(x) for x in rows] == [list(x) for x in frame]
    for mine, theirs in zip(rows, frame):
        bad = {k: (mine[k], theirs[k]) for k in mine if not _same(mine[k], theirs[k])}
        assert not bad, bad
    ref, got = _reference_summary(r), run_summary(r.record, rows)
    assert list(ref) == list(got)
    bad = {k: (got[k], ref[k]) for k in ref if not _same(float(got[k]), float(ref[k]))}
    assert not bad, bad


SCENARIOS = {
    "web, a reverse finite flow": {
        "name": "web", "network": {"bottleneck_rate": "20Mbps", "buffer": "100KB"},
        "flows": [{"cca": "cubic", "rtt": "30ms"}, {"cca": "reno", "rtt": "40ms", "direction": "reverse", "size": "200KB"}],
        "web": [{"load": "5Mbps", "direction": "both"}], "run": {"duration": "4s", "warmup": "1s", "seed": 3},
    },
    "udp": {
        "name": "udp", "network": {"bottleneck_rate": "20Mbps", "buffer": "60p"}, "flows": [{"cca": "bbr", "rtt": "15ms", "count": 2}],
        "udp": [{"rate": "4Mbps", "pattern": "poisson", "rtt": "15ms", "count": 2}], "run": {"duration": "3s", "warmup": "0.5s", "seed": 42},
    },
    "paper background": {
        "name": "bg", "background": "paper", "network": {"bottleneck_rate": "30Mbps", "buffer": "200KB"},
        "flows": [{"cca": "cubic", "rtt": "50ms", "count": 2}], "run": {"duration": "6.5s", "warmup": "5.5s", "seed": 2},
    },
    "testbed background": {
        "name": "bgt", "background": "testbed", "network": {"bottleneck_rate": "30Mbps", "buffer": "200KB"},
        "flows": [{"cca": "cubic", "rtt": "50ms"}], "run": {"duration": "6s", "warmup": "5s", "seed": 2},
    },
    "long samples": {
        "name": "long", "network": {"bottleneck_rate": "10Mbps", "buffer": "50KB", "loss": 0.002},
        "flows": [{"cca": "reno", "rtt": "10ms"}, {"cca": "cubic", "rtt": "80ms", "start": "0.5s"}],
        "run": {"duration": "12s", "warmup": "0.3s", "seed": 5, "sample_interval": "1ms"},
    },
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_summary_is_the_dataframe_paths(name):
    _check(ccarena.run(SCENARIOS[name]))


def test_summary_of_a_kernel_like_record():
    """A record as the linux backend makes it: no counters it cannot measure,
    missing sRTT samples, no UDP, web or reverse sections."""
    r = ccarena.run(SCENARIOS["long samples"])
    rec = json.loads(json.dumps(r.record))
    rec["backend"] = "linux"
    for key in ("udp", "udp_series", "web", "short_flows", "reverse_link", "reverse_queue_series"):
        rec.pop(key)
    for f in rec["flows"]:
        f.pop("direction"), f.pop("background")
        f["counters"].pop("skbs_sent"), f["counters"].pop("acks_sent")
    rec["flows"][0]["size_bytes"] = 1000000
    srtt = rec["flow_series"][1]["srtt_us"]
    srtt[len(srtt) // 2] = None
    rec["flow_series"] = rec["flow_series"][:1] + [dict(rec["flow_series"][1], srtt_us=srtt)]
    k = type(r)(scenario=r.scenario, record=rec, build="x")
    _check(k)


# ---- the tables saved without pandas ----

_CA_STATES = ["open", "disorder", "cwr", "recovery", "loss"]


def _timeseries_oracle(record: dict) -> pd.DataFrame:
    """The time series as the numpy/pandas formulas build it (the oracle of
    ``result._timeseries_table``, which builds it from the lists)."""
    frames = []
    for i, s in enumerate(record["flow_series"]):
        n = len(s["t_ns"])
        ss = np.asarray(s["ssthresh"], dtype=np.int64)
        frames.append(pd.DataFrame({
            "t_s": np.asarray(s["t_ns"], dtype=float) / 1e9,
            "flow": np.full(n, i, dtype=np.int32),
            "cwnd": np.asarray(s["cwnd"], dtype=np.int64),
            "ssthresh": pd.arrays.IntegerArray(ss, ss >= 2147483647),
            "in_flight": np.asarray(s["in_flight"], dtype=np.int64),
            "srtt_ms": np.asarray(s["srtt_us"], dtype=float) / 1e3,
            "min_rtt_ms": np.asarray(s["min_rtt_us"], dtype=float) / 1e3,
            "throughput_mbps": np.asarray(s["throughput_bps"], dtype=float) / 1e6,
            "delivery_rate_mbps": np.asarray(s["delivery_rate_bps"], dtype=float) / 1e6,
            "delivered_bytes": np.asarray(s["delivered_bytes"], dtype=np.int64),
            "retransmissions": np.asarray(s["retransmissions"], dtype=np.int64),
            "ca_state": pd.Categorical.from_codes(np.asarray(s["ca_state"], dtype=np.int8), _CA_STATES),
            "pacing_rate_mbps": np.asarray(s["pacing_rate_bps"], dtype=float) / 1e6,
            **{col: np.asarray(s[key], dtype=float) / div if key in s else np.full(n, np.nan)
               for col, key, div in (("cc_bw_mbps", "cc_bw_bps", 1e6), ("cc_min_rtt_ms", "cc_min_rtt_us", 1e3),
                                     ("pacing_gain", "cc_pacing_gain", 256.0), ("cwnd_gain", "cc_cwnd_gain", 256.0))},
        }))
    return pd.concat(frames, ignore_index=True)


def _queue_oracle(q: dict) -> pd.DataFrame:
    return pd.DataFrame({
        "t_s": np.asarray(q["t_ns"], dtype=float) / 1e9,
        "backlog_packets": np.asarray(q["backlog_packets"], dtype=np.int64),
        "backlog_bytes": np.asarray(q["backlog_bytes"], dtype=np.int64),
        "drops": np.asarray(q["drops"], dtype=np.int64),
        "bytes_out": np.asarray(q["bytes_out"], dtype=np.int64),
        "rate_mbps": np.asarray(q["rate_bps"], dtype=float) / 1e6,
    })


@pytest.mark.parametrize("name", ["long samples", "paper background", "udp"])  # udp: BBR reports its model
def test_tables_from_lists_are_the_numpy_formulas(name, tmp_path):
    """The time series and queue tables, built from the record's lists for
    pandas-free saving, equal the numpy formulas to the bit, with the same
    dtypes; the saved Parquet files hold the same values."""
    r = ccarena.run(SCENARIOS[name])
    ts, q = r.timeseries, r.queue
    pd.testing.assert_frame_equal(ts, _timeseries_oracle(r.record), check_exact=True)
    pd.testing.assert_frame_equal(q, _queue_oracle(r.record["queue_series"]), check_exact=True)
    assert ts.ssthresh.isna().any() and str(ts.ssthresh.dtype) == "Int64"
    d = r.save(tmp_path / "run")
    saved = pd.read_parquet(d / "timeseries.parquet")
    # Parquet keeps the nulls; pandas reads a nullable integer column as floats.
    pd.testing.assert_frame_equal(saved.assign(ssthresh=saved.ssthresh.astype("Int64")), ts, check_exact=True)
    pd.testing.assert_frame_equal(pd.read_parquet(d / "queue.parquet"), q, check_exact=True)
    if r.record["reverse_queue_series"]:
        pd.testing.assert_frame_equal(pd.read_parquet(d / "reverse_queue.parquet"), r.reverse_queue, check_exact=True)


def test_tables_of_a_kernel_like_record():
    """Kernel samples may lack an RTT (None) or a congestion state (-1): NaN
    in the tables, as the numpy formulas make them."""
    r = ccarena.run(SCENARIOS["long samples"])
    rec = json.loads(json.dumps(r.record))
    s = rec["flow_series"][0]
    s["srtt_us"][3] = None
    s["ca_state"][:5] = [-1] * 5
    k = ccarena.RunResult(scenario=r.scenario, record=rec)
    pd.testing.assert_frame_equal(k.timeseries, _timeseries_oracle(rec), check_exact=True)
    assert k.timeseries.ca_state.isna().sum() == 5 and k.timeseries.srtt_ms.isna().sum() == 1


def test_saving_a_run_imports_no_pandas(small_scenario, tmp_path):
    """`ccarena run FILE` (saving the run) writes its Parquet files without
    loading pandas (pyarrow itself loads numpy)."""
    code = (
        "import sys\n"
        "from ccarena.launch import main\n"
        f"main(['run', {str(small_scenario)!r}, '--out', {str(tmp_path / 'out')!r}])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] == 'pandas')\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "HEAVY []" in p.stderr, p.stderr
    assert list((tmp_path / "out").rglob("timeseries.parquet"))
