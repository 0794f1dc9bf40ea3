import json

import pandas as pd
import pytest

import ccarena


def test_run_returns_dataframes(small_scenario):
    r = ccarena.run(str(small_scenario))
    assert isinstance(r.flows, pd.DataFrame) and len(r.flows) == 2
    assert {"cca", "rtt_ms", "throughput_mbps", "retransmissions", "rtos"} <= set(r.flows.columns)
    ts = r.timeseries
    assert isinstance(ts, pd.DataFrame)
    assert {"t_s", "flow", "cwnd", "ssthresh", "in_flight", "srtt_ms", "delivery_rate_mbps", "throughput_mbps"} <= set(ts.columns)
    assert len(ts) == 2 * 50  # 5 s at 100 ms
    assert (ts.cwnd >= 1).all()
    assert {"t_s", "backlog_packets", "backlog_bytes", "drops"} <= set(r.queue.columns)
    assert not r.invariant_violations
    s = r.summary
    assert 0.5 < s["utilization"] <= 1.0
    assert 0.5 <= s["jain_index"] <= 1.0


def test_same_seed_identical_other_seed_different(small_scenario):
    a = ccarena.run(str(small_scenario)).record
    b = ccarena.run(str(small_scenario)).record
    c = ccarena.run(str(small_scenario), overrides={"run.seed": 4}).record
    assert json.dumps(a) == json.dumps(b)
    assert json.dumps(a["flows"]) != json.dumps(c["flows"])


def test_progress_callback_reaches_the_end(small_scenario):
    seen = []
    r = ccarena.run(str(small_scenario), progress=lambda done, total: seen.append((done, total)), slices=10)
    assert seen[-1] == (5.0, 5.0) and len(seen) == 10
    # Stepping does not change results.
    assert json.dumps(r.record) == json.dumps(ccarena.run(str(small_scenario)).record)


def test_save_and_load(small_scenario, tmp_path):
    r = ccarena.run(str(small_scenario))
    d = r.save(tmp_path / "out")
    assert {"result.json", "scenario.toml", "record.json", "timeseries.parquet", "queue.parquet"} <= {p.name for p in d.iterdir()}
    back = ccarena.load_result(d)
    pd.testing.assert_frame_equal(back.flows, r.flows)
    assert pd.read_parquet(d / "timeseries.parquet").shape == r.timeseries.shape


def test_presets_and_catalogue():
    names = [c["name"] for c in ccarena.cca_catalogue()]
    assert {"reno", "cubic"} <= set(names)
    r = ccarena.run("quickstart", overrides={"run.duration": "3s", "run.warmup": "1s"})
    assert r.scenario.name == "quickstart"


def test_bad_input_raises_scenario_error():
    with pytest.raises(ccarena.ScenarioError):
        ccarena.run("quickstart", overrides={"flows[0].cca": "vegass"})
