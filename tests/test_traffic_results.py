"""Background flows, web traffic and UDP sources through metrics, the results
store (including databases of the previous schema), figures and the report."""

import json
import shutil

import duckdb
import numpy as np
import pandas as pd
import pytest

import ccarena
from ccarena.results import metrics as m
from ccarena.experiments.executors import LocalExecutor
from ccarena.experiments.runner import run_sweep
from ccarena.results.store import SCHEMA_VERSION, Store, StoreError

# Table 0 is background, so the tables under study are 1 (CUBIC) and 2 (Reno);
# the background flows' long RTT gives them far less throughput, so Jain's
# index over every flow would be clearly lower than over the flows under study.
BACKGROUND = """
name = "bg"
[network]
bottleneck_rate = "20Mbps"
buffer = "50p"
[[flows]]
cca = "reno"
rtt = "200ms"
count = 2
background = true
[[flows]]
cca = "cubic"
rtt = "20ms"
[[flows]]
cca = "reno"
rtt = "20ms"
[run]
duration = "6s"
warmup = "1s"
seed = 4
"""

WEB = """
name = "webtest"
description = "web traffic, a UDP source and a background flow"
[network]
bottleneck_rate = "20Mbps"
buffer = "60p"
[[flows]]
cca = "cubic"
rtt = "20ms"
count = 2
[[flows]]
cca = "reno"
rtt = "60ms"
background = true
[[web]]
load = "4Mbps"
direction = "both"
rtt = "30ms"
[[udp]]
rate = "2Mbps"
[run]
duration = "6s"
warmup = "1s"
seed = 2
[sweep]
bottleneck_rate = ["20Mbps", "30Mbps"]
"""


@pytest.fixture(scope="module")
def web_results(tmp_path_factory):
    d = tmp_path_factory.mktemp("web")
    f = d / "web.toml"
    f.write_text(WEB)
    run_sweep(str(f), d / "res", executor=LocalExecutor(2))
    return d / "res"


def _run(tmp_path, text, name="s.toml"):
    p = tmp_path / name
    p.write_text(text)
    return ccarena.run(str(p))


def test_run_metrics_leave_background_flows_out(tmp_path):
    r = _run(tmp_path, BACKGROUND)
    fl = r.flows
    assert list(fl.background) == [True, True, False, False]
    fm = m.flow_metrics(r)
    rm = m.run_metrics(r, fm)
    assert len(fm) == 4  # background flows keep their flow metrics
    studied = fl[~fl.background]
    assert rm["jain_index"] == pytest.approx(m.jain_index(studied.throughput_mbps))
    assert m.jain_index(fl.throughput_mbps) < rm["jain_index"] - 0.05
    # The group ratio compares the first two tables under study (CUBIC over Reno), not the background table.
    assert rm["group_throughput_ratio"] == pytest.approx(studied.throughput_mbps.iloc[0] / studied.throughput_mbps.iloc[1])
    assert rm["rtt_ratio"] == 1.0
    assert rm["background_throughput_mbps"] == pytest.approx(fl.throughput_mbps[fl.background].sum())
    assert rm["total_retransmissions_l4"] == sum(fm[i]["total_retransmissions_l4"] for i in (2, 3))
    assert rm["mean_srtt_l4"] == pytest.approx(np.mean([fm[i]["mean_srtt_l4"] for i in (2, 3)]))
    # The time-averaged indices, by hand over the flows under study.
    ts = r.timeseries
    wide = ts[ts.t_s > 1.0].pivot(index="t_s", columns="flow", values="throughput_mbps")[[2, 3]]
    jains = [m.jain_index(row) for row in wide.to_numpy() if row.sum() > 0]
    assert rm["mean_jains_fairness_throughput_l7"] == pytest.approx(np.mean(jains))
    assert rm["mean_agg_throughput_l7"] == pytest.approx(wide.sum(axis=1).mean())


def test_web_and_udp_metrics(tmp_path):
    r = _run(tmp_path, WEB)
    rm = m.run_metrics(r)
    for names in m.CONDITIONAL_METRICS.values():
        for name in names:
            assert name in rm and name in m.METRIC_INFO, name
    sf = r.short_flows
    assert set(sf.direction) == {"forward", "reverse"}
    window = sf[(sf.start_s >= 1.0) & (sf.start_s < 6.0)]
    assert rm["web_flows"] == len(window) > 20
    assert rm["web_completed"] == pytest.approx(window.fct_s.notna().mean())
    assert rm["median_fct_s"] == pytest.approx(window.fct_s.median())
    assert rm["p95_fct_s"] >= rm["median_fct_s"] > 0.045  # at least 1.5 RTT
    assert rm["median_fct_slowdown"] >= 1.0 and rm["p95_fct_slowdown"] >= rm["median_fct_slowdown"]
    # The summary the CLI prints agrees with the stored metrics.
    assert r.summary["web_flows"] == rm["web_flows"] and r.summary["median_fct_s"] == rm["median_fct_s"]
    assert rm["udp_throughput_mbps"] == pytest.approx(r.udp.throughput_mbps.sum())
    assert 0 <= rm["udp_loss_rate"] < 0.5
    # The ideal: a one-segment flow over a 30 ms path needs 45 ms and a little.
    assert m.ideal_fct_s(1448, 30.0, 20e6) == pytest.approx(0.045 + 1448 * 8 / (20e6 * 1448 / 1500))


def test_run_without_such_traffic_has_no_conditional_metrics(small_scenario):
    rm = m.run_metrics(ccarena.run(str(small_scenario)))
    for names in m.CONDITIONAL_METRICS.values():
        assert not set(names) & set(rm)


def test_store_round_trip(web_results):
    res = ccarena.load(web_results)
    ok = res.runs[res.runs.status == "ok"]
    assert len(ok) == 2
    sf = res.short_flows(experiment="webtest")
    assert {"point", "repetition", "completed"} <= set(sf.columns)
    for rid in ok.run_id:
        r = res.result(rid)
        stored = sf[sf.run_id == rid].drop(columns=["run_id", "point", "repetition"]).reset_index(drop=True)
        want = r.short_flows.sort_values("start_s", kind="stable").reset_index(drop=True)
        assert len(stored) == len(want) > 0
        pd.testing.assert_frame_equal(stored[want.columns], want, check_dtype=False)
        udp = res.udp(run_id=rid).drop(columns=["run_id"]).set_index("source")
        pd.testing.assert_frame_equal(udp[r.udp.columns], r.udp, check_dtype=False, check_index_type=False)
        fl = res.flows[res.flows.run_id == rid]
        assert list(fl.background) == [False, False, True] and set(fl.direction) == {"forward"}
        assert len(res.reverse_queue(rid)) and len(res.udp_timeseries(rid))
        assert res.runs.set_index("run_id").loc[rid, "web_flows"] == m.run_metrics(r)["web_flows"]
    # One run, through the Store itself; an unknown experiment names the ones present.
    with Store(web_results, read_only=True) as st:
        one = st.short_flows(run_id=ok.run_id.iloc[0])
        assert set(one.run_id) == {ok.run_id.iloc[0]}
        with pytest.raises(StoreError, match="present: webtest"):
            st.short_flows(experiment="nope")


def _downgrade_to_schema_1(d):
    """Turns a results directory into what the previous version wrote."""
    con = duckdb.connect(str(d / "ccarena.duckdb"))
    v1_columns = [c for (c,) in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'flows' ORDER BY ordinal_position").fetchall()
        if c not in ("direction", "background")]
    cols = ", ".join(f'"{c}"' for c in v1_columns)
    con.execute(f"CREATE TABLE flows_v1 AS SELECT {cols} FROM flows")
    con.execute("DROP TABLE flows")
    con.execute(
        'CREATE TABLE flows (run_id VARCHAR, flow INTEGER, "group" INTEGER, label VARCHAR, cca VARCHAR, '
        "rtt_ms DOUBLE, start_s DOUBLE, throughput_mbps DOUBLE, mean_cwnd DOUBLE, mean_srtt_ms DOUBLE, "
        "retransmissions BIGINT, rtos BIGINT, drops BIGINT, recoveries BIGINT, undos BIGINT, tlps BIGINT, "
        "segments_sent BIGINT, bytes_sent BIGINT, bytes_delivered BIGINT, window_retransmissions BIGINT, window_rtos BIGINT, "
        "size_bytes BIGINT, fct_s DOUBLE, window_start_s DOUBLE, window_end_s DOUBLE, PRIMARY KEY (run_id, flow))"
    )
    con.execute("INSERT INTO flows SELECT * FROM flows_v1")
    con.execute("DROP TABLE flows_v1")
    con.execute("DROP TABLE short_flows")
    con.execute("DROP TABLE udp")
    # Metrics as the old version computed them: the background flow counted in Jain's index.
    con.execute("UPDATE metrics SET value = -1 WHERE name = 'jain_index' AND flow IS NULL")
    con.execute("DELETE FROM metrics WHERE name = 'median_fct_slowdown'")
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.close()
    shutil.rmtree(d / "reverse_queue")
    shutil.rmtree(d / "udp_series")


def test_schema_1_database_is_upgraded(web_results, tmp_path):
    d = tmp_path / "old"
    shutil.copytree(web_results, d)
    before = ccarena.load(d)
    before_sf = before.short_flows(experiment="webtest")
    _downgrade_to_schema_1(d)

    # Opening it for reading upgrades it in place; nothing stored is lost.
    res = ccarena.load(d)
    con = duckdb.connect(str(d / "ccarena.duckdb"), read_only=True)
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    con.close()
    pd.testing.assert_frame_equal(res.short_flows(experiment="webtest"), before_sf)
    key = ["run_id", "flow"]
    cols = ["run_id", "flow", "label", "throughput_mbps", "direction", "background"]
    pd.testing.assert_frame_equal(res.flows[cols].sort_values(key).reset_index(drop=True),
                                  before.flows[cols].sort_values(key).reset_index(drop=True))
    ok = res.runs[res.runs.status == "ok"].set_index("run_id")
    ref = before.runs[before.runs.status == "ok"].set_index("run_id")
    for col in ("jain_index", "median_fct_slowdown", "utilization"):
        pd.testing.assert_series_equal(ok[col].sort_index(), ref[col].sort_index())
    rid = ok.index[0]
    assert len(res.reverse_queue(rid)) and len(res.udp_timeseries(rid))
    # Upgrading twice changes nothing; a sweep can add to it.
    assert len(ccarena.load(d).short_flows(experiment="webtest")) == len(before_sf)


def test_schema_1_database_readable_where_it_cannot_be_upgraded(web_results, tmp_path, monkeypatch):
    d = tmp_path / "old"
    shutil.copytree(web_results, d)
    _downgrade_to_schema_1(d)

    def refuse(self):
        raise StoreError("read-only file system")

    monkeypatch.setattr(Store, "_migrate", refuse)
    res = ccarena.load(d)
    assert set(res.flows.direction) == {"forward"} and not res.flows.background.any()
    sf = res.short_flows(experiment="webtest")
    assert len(sf) == 0 and "fct_s" in sf.columns
    assert len(res.udp(run_id=res.runs.run_id.iloc[0])) == 0


def test_newer_schema_is_refused(web_results, tmp_path):
    d = tmp_path / "new"
    shutil.copytree(web_results, d)
    con = duckdb.connect(str(d / "ccarena.duckdb"))
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    con.close()
    with pytest.raises(StoreError, match="newer ccarena"):
        ccarena.load(d)
    with pytest.raises(StoreError, match="newer ccarena"):
        Store(d)


def test_fct_and_timeseries_figures(tmp_path):
    from ccarena.present import figures

    r = _run(tmp_path, WEB)
    rates = {k: v / 1e6 for k, v in m.link_rates_bps(r.record).items()}
    out = figures.run_fct_figure(r.short_flows, tmp_path / "fct", rates, title="web", start_s=1.0, end_s=6.0)
    assert [p.suffix for p in out] == [".png", ".svg"]
    assert out[0].stat().st_size > 20_000
    out = figures.run_timeseries_figure(r.timeseries, r.queue, r.flows, tmp_path / "ts", warmup_s=1.0, buffer_packets=60,
                                        udp_ts=r.udp_timeseries, udp=r.udp, reverse_queue=r.reverse_queue)
    assert out[0].stat().st_size > 20_000
    # A run with no completed web flow still gets a figure (empty panels, the counts in the legend).
    none_done = r.short_flows.assign(fct_s=np.nan)
    assert figures.run_fct_figure(none_done, tmp_path / "none", rates)[0].exists()


def test_report_shows_web_flows(web_results, tmp_path):
    from ccarena.present.report import write_report

    index = write_report(web_results, tmp_path / "report")
    page = index.parent / "webtest" / "index.html"
    text = page.read_text()
    fct = sorted((page.parent / "runs").glob("*-fct.png"))
    assert len(fct) == 2 and all(p.stat().st_size > 20_000 for p in fct)
    for p in fct:
        assert f'src="runs/{p.name}"' in text
    assert "median FCT ms" in text and "p95 FCT ms" in text  # the short-flow table
    assert len(list(page.parent.glob("median_fct_s-vs-*.png"))) == 1  # the sweep-level FCT figure
    assert "median FCT s" in text  # the metrics table has the web metrics
    assert "Grey rows: background flows (1)" in text


def test_cli_prints_web_and_udp(tmp_path):
    from conftest import cli

    f = tmp_path / "web.toml"
    f.write_text(WEB)
    p = cli("run", str(f), "--out", str(tmp_path / "run"), check=True)
    assert "web flows" in p.stdout and "median FCT" in p.stdout and "UDP" in p.stdout and "background flows (1)" in p.stdout
    for name in ("short_flows", "udp", "udp_timeseries", "reverse_queue"):
        assert (tmp_path / "run" / f"{name}.parquet").exists(), name
    from ccarena.results.result import load_result

    saved = load_result(tmp_path / "run")
    assert len(saved.short_flows) == len(pd.read_parquet(tmp_path / "run" / "short_flows.parquet"))
    doc = json.loads(cli("run", str(f), "--no-save", "--json", check=True).stdout)
    assert doc["web_flows"] > 0 and doc["median_fct_s"] is not None and doc["udp_throughput_mbps"] > 0
