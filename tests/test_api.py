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
    # Goodput over the window can exceed capacity by what was in flight or held
    # for reassembly at the window's start (docs/metrics.md), a few kB here.
    assert 0.5 < s["utilization"] <= 1.001
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
    assert {"result.json", "scenario.toml", "record.json.gz", "timeseries.parquet", "queue.parquet"} <= {p.name for p in d.iterdir()}
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


def test_a_run_resolves_its_scenario_once_and_the_engine_checks_it_once(small_scenario, monkeypatch):
    """`ccarena.run` (and `ccarena run`) read the scenario, apply overrides and
    resolve it once; the engine's own check when the run starts is the only one."""
    from ccarena import _engine
    from ccarena.scenario import model

    calls = {"resolve": 0, "validate": 0}
    resolve, validate = model.resolve, _engine.validate_json

    def counting_resolve(*a, **k):
        calls["resolve"] += 1
        return resolve(*a, **k)

    def counting_validate(*a, **k):
        calls["validate"] += 1
        return validate(*a, **k)

    monkeypatch.setattr(model, "resolve", counting_resolve)
    monkeypatch.setattr(_engine, "validate_json", counting_validate)
    ccarena.run(str(small_scenario), overrides={"run.duration": "2s"})
    assert calls == {"resolve": 1, "validate": 0}
    # A scenario loaded to be checked (not run) is checked by the engine, once.
    sc = ccarena.load_scenario(str(small_scenario))
    assert calls == {"resolve": 2, "validate": 1}
    assert sc.with_overrides({}) is sc
    # An error only the engine finds is still a ScenarioError naming the field.
    with pytest.raises(ccarena.ScenarioError) as e:
        ccarena.run(str(small_scenario), overrides={"run.duration": "1000000s", "network.bottleneck_rate": "100Gbps"})
    assert e.value.field == "flows[0]" and "sequence space" in e.value.message


def test_the_engine_input_is_what_the_engine_reads(small_scenario):
    sc = ccarena.load_scenario(str(small_scenario))
    assert not [k for k in sc.engine if k.startswith("_")]
    assert json.loads(sc.engine_json()) == sc.engine
    assert sc.flow_groups() == [0, 0] and sc.meta.background == "none"
