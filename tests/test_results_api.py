"""The results API's frames and SQL (typed parameter columns, one name per
metric, NA for an infinite ssthresh, typed empty frames, parameter values
without JSON quotes, the wide view of run metrics), points flagged as too
short for the physics, reference data in figures and the comparison page."""

import duckdb
import pandas as pd
import pytest

import ccarena
from ccarena.experiments.executors import LocalExecutor
from ccarena.experiments.runner import run_sweep
from ccarena.results.metrics import FLOW_COLUMN_TWINS

SWEEP = """
name = "typed"
description = "parameters with units"
[network]
bottleneck_rate = "20Mbps"
buffer = "40p"
[[flows]]
cca = "cubic"
rtt = "20ms"
[[flows]]
cca = "reno"
rtt = "20ms"
[run]
duration = "3s"
warmup = "1s"
seed = 3
[sweep]
"flows[1].rtt" = ["80ms", "10ms"]
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("typed")
    f = d / "typed.toml"
    f.write_text(SWEEP)
    run_sweep(str(f), d / "res", executor=LocalExecutor(2))
    return d / "res"


def test_swept_values_with_units_get_a_numeric_twin(results):
    res = ccarena.load(results)
    runs = res.runs.sort_values("point")
    assert list(runs["flows[1].rtt"]) == ["80ms", "10ms"]  # as written
    assert runs["flows[1].rtt_ms"].dtype == float and list(runs["flows[1].rtt_ms"]) == [80.0, 10.0]
    pts = res.points("typed").sort_values("flows[1].rtt_ms")
    assert list(pts["flows[1].rtt_ms"]) == [10.0, 80.0] and list(pts["flows[1].rtt"]) == ["10ms", "80ms"]


def test_one_name_per_metric(results):
    res = ccarena.load(results)
    for old, new in FLOW_COLUMN_TWINS.items():
        assert new in res.flows and old not in res.flows, old
    # The flow table still has them, with the same numbers.
    con = duckdb.connect(str(results / "ccarena.duckdb"), read_only=True)
    try:
        sql = con.execute("SELECT run_id, flow, mean_cwnd, window_retransmissions FROM flows").df()
    finally:
        con.close()
    both = res.flows.merge(sql, on=["run_id", "flow"])
    assert (both.mean_cwnd == both.mean_cwnd_l4).all()
    assert (both.window_retransmissions == both.total_retransmissions_l4).all()


def test_infinite_ssthresh_is_na_and_empty_frames_are_typed(results):
    res = ccarena.load(results)
    rid = res.runs.run_id.iloc[0]
    ts = res.timeseries(rid)
    assert str(ts.ssthresh.dtype) == "Int64"
    assert ts.ssthresh.isna().any() and (ts.ssthresh.dropna() < 2147483647).all()
    rq = res.reverse_queue(rid)
    assert len(rq) == 0 and rq.dtypes["t_s"] == float and rq.dtypes["backlog_packets"] == "int64"
    assert rq.backlog_bytes.sum() == 0
    u = res.udp_timeseries(rid)
    assert len(u) == 0 and u.dtypes["throughput_mbps"] == float


def test_sql_parameters_and_wide_view(results):
    res = ccarena.load(results)
    con = duckdb.connect(str(results / "ccarena.duckdb"), read_only=True)
    try:
        params = con.execute("SELECT value, value_num FROM params WHERE name = 'flows[1].rtt' ORDER BY value_num").fetchall()
        wide = con.execute("SELECT w.run_id, w.jain_index, w.utilization FROM run_metrics_wide w "
                           "JOIN params p USING (run_id) WHERE p.name = 'flows[1].rtt' AND p.value = '10ms'").df()
    finally:
        con.close()
    assert params == [("10ms", 10.0), ("80ms", 80.0)]
    assert len(wide) == 1
    row = res.runs.set_index("run_id").loc[wide.run_id.iloc[0]]
    assert wide.jain_index.iloc[0] == pytest.approx(row.jain_index)
    assert wide.utilization.iloc[0] == pytest.approx(row.utilization)
    assert isinstance(res.runs, pd.DataFrame)


def test_runs_too_short_are_flagged(results):
    """3 s runs hold a few loss cycles at most: every point is flagged, and the
    count matches the flows' slow-start threshold changes."""
    from ccarena.results.metrics import SHORT_RUN_EPOCHS, congestion_epochs

    res = ccarena.load(results)
    pts = res.points("typed")
    assert pts.short_run.all()
    runs = res.runs
    assert (runs.min_congestion_epochs < SHORT_RUN_EPOCHS).all()
    rid = runs.run_id.iloc[0]
    fl = res.flows[res.flows.run_id == rid].set_index("flow")
    ts = res.timeseries(rid)
    counts = []
    for i, f in fl.iterrows():
        n = congestion_epochs(ts[ts.flow == i], f.window_start_s, f.window_end_s)
        assert n == f.congestion_epochs_l4
        counts.append(n)
    # Not trivially zero: the CUBIC flow changes ssthresh inside the window (the
    # 80 ms Reno flow may leave slow start before it and see no loss in it).
    assert max(counts) >= 1
    assert runs.set_index("run_id").min_congestion_epochs[rid] == fl.congestion_epochs_l4.min()
    # On hand-made samples: leaving slow start (NA -> 20) is an epoch, 20 -> 30 another.
    samples = pd.DataFrame({"t_s": [0.1, 0.2, 0.3, 0.4], "ssthresh": pd.array([None, None, 20, 30], dtype="Int64")})
    assert congestion_epochs(samples, 0.15, 0.4) == 2 and congestion_epochs(samples, 0.35, 0.4) == 1
    assert congestion_epochs(samples, 1.0, 2.0) != congestion_epochs(samples, 1.0, 2.0)  # nan: no samples


def test_results_command_marks_short_points(results):
    from conftest import cli

    p = cli("results", str(results), check=True)
    assert "†" in p.stdout and "too short" in p.stdout
    p = cli("results", str(results), "--format", "csv", check=True)
    assert "short_run" in p.stdout.splitlines()[0]


def test_reference_overlay_and_comparison_page(results, tmp_path):
    from ccarena.present.figures import read_reference, sweep_figure
    from ccarena.present.report import write_report

    ref = tmp_path / "ref.csv"
    ref.write_text("# citation: Someone et al. (2020), Fig. 3\nflows[1].rtt,jain_index\n10ms,0.97\n80ms,0.9\n")
    rows, citation = read_reference(ref, "flows[1].rtt", "jain_index")
    assert len(rows) == 2 and citation == "reference: Someone et al. (2020), Fig. 3"
    with pytest.raises(ValueError, match="no column 'utilization'"):
        read_reference(ref, "flows[1].rtt", "utilization")
    res = ccarena.load(results)
    out = sweep_figure(res.points("typed"), {"x": "flows[1].rtt", "y": "jain_index", "reference": str(ref)}, tmp_path / "fig")
    assert out[0].stat().st_size > 1000
    index = write_report(results, tmp_path / "report", per_run="none", compare=["typed"], references=[ref])
    page = (tmp_path / "report" / "typed" / "index.html").read_text()
    assert "too short for the physics" in page and "&dagger;" in page
    text = index.read_text()
    assert "compare/index.html" in text and 'class=thumb' in text and "build <code>" in text
    cmp = tmp_path / "report" / "compare"
    assert (cmp / "throughput-delay.png").exists() and len(list(cmp.glob("*.png"))) > 2  # and the metrics against flows[1].rtt
