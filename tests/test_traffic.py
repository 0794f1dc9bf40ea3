"""Traffic and path models in scenarios: UDP sources, web traffic, background
set-ups, RTT distributions, jitter, path dynamics and rate traces."""

import copy
import json
import math

import pytest

import ccarena
from ccarena.scenario import Scenario, ScenarioError
from ccarena.scenario.network import trace_names
from ccarena import _engine
from ccarena.scenario.traffic import BACKGROUNDS, resolve_dist
from ccarena.scenario.units import parse_duration

BASE = {
    "network": {"bottleneck_rate": "100Mbps", "buffer": "1bdp"},
    "flows": [{"cca": "cubic", "rtt": "40ms"}],
    "run": {"duration": "10s"},
}


def with_(**parts):
    d = copy.deepcopy(BASE)
    for k, v in parts.items():
        if k.startswith("network_"):
            d["network"][k[len("network_"):]] = v
        else:
            d[k] = v
    return d


def test_udp_and_web_tables_resolve_into_engine_units():
    sc = Scenario.from_dict(
        with_(
            udp=[{"rate": "8Mbps", "pattern": "on_off", "on": {"distribution": "exponential", "mean": "1s"}, "off": "2s", "count": 2}],
            web=[{"load": "20Mbps", "direction": "both"}],
        )
    )
    e = sc.engine
    assert len(e["udp"]) == 2
    u = e["udp"][0]
    assert u["rate"] == 8_000_000 and u["packet_bytes"] == 1500
    assert u["pattern"] == {"kind": "on_off", "on": {"distribution": "exponential", "mean": 1e9}, "off": {"distribution": "constant", "value": 2e9}}
    # "both" is one generator per direction; SURGE sizes capped at 10 MB, exponential RTTs of mean 132 ms.
    assert [w["direction"] for w in e["web"]] == ["forward", "reverse"]
    w = e["web"][0]
    assert w["load"] == 20_000_000 and w["cca"] == "reno"
    assert w["sizes"]["distribution"] == "lognormal_pareto" and w["sizes"]["max"] == 10e6 and w["sizes"]["tail"] == 0.07
    assert w["rtt"] == {"distribution": "exponential", "mean": 132e6}


@pytest.mark.parametrize(
    "parts, field, fragment",
    [
        ({"udp": [{"rate": "8Mbps", "pattern": "burst"}]}, "udp[0].pattern", "cbr, poisson, on_off"),
        ({"udp": [{"rate": "8Mbps", "pattern": "on_off", "on": "1s"}]}, "udp[0].off", "missing"),
        ({"udp": [{"pattern": "cbr"}]}, "udp[0].rate", "missing"),
        ({"udp": [{"rate": "8Mbps", "packet_size": "10B"}]}, "udp[0].packet_size", "28..65535 bytes"),
        ({"web": [{"direction": "forward"}]}, "web[0].load", "missing"),
        ({"web": [{"load": "1Mbps", "cca": "cubc"}]}, "web[0].cca", "allowed"),
        ({"web": [{"load": "1Mbps", "direction": "up"}]}, "web[0].direction", "forward, reverse, both"),
        ({"web": [{"load": "1Mbps", "rtt": {"distribution": "gamma"}}]}, "web[0].rtt.distribution", "exponential"),
        ({"web": [{"load": "1Mbps", "sizes": {"distribution": "pareto", "k": "1KB", "alpha": 0.9}, "max_size": "none"}]}, "web[0].sizes", "max"),
        ({"background": "busy"}, "background", "testbed, paper"),
        ({"network_dynamics": [{"kind": "ramp"}]}, "network.dynamics[0].kind", "step, pulse, random_walk"),
        ({"network_dynamics": [{"kind": "step", "at": "1s"}]}, "network.dynamics[0]", "sets nothing"),
        ({"network_dynamics": [{"kind": "pulse", "period": "1s", "high": {"rate": "1Mbps"}, "low": {"rate": "2Mbps"}, "duty": 1.5}]}, "network.dynamics[0].duty", "1"),
        ({"network_dynamics": [{"kind": "random_walk", "property": "jitter"}]}, "network.dynamics[0].property", "rate, delay, loss"),
        ({"network_trace": "nowhere"}, "network.trace", "0.57mbps-poisson"),
        ({"network_trace": "x" * 300}, "network.trace", "0.57mbps-poisson"),  # a name the file system refuses
        ({"network_trace_repeat": False}, "network.trace_repeat", "only applies"),
    ],
)
def test_errors_name_the_field_and_the_allowed_values(parts, field, fragment):
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(with_(**parts))
    assert e.value.field == field, str(e.value)
    assert fragment in e.value.message


def test_flow_direction_jitter_and_background_flags():
    d = copy.deepcopy(BASE)
    d["flows"].append({"cca": "reno", "rtt": "20ms", "direction": "reverse", "background": True, "jitter": {"jitter": "5ms", "reorder": False}})
    e = Scenario.from_dict(d).engine
    f = e["flows"][1]
    assert f["direction"] == "reverse" and f["background"] is True
    assert f["jitter"] == {"jitter": 5_000_000, "distribution": "uniform", "reorder": False}
    # The BDP buffer is sized for the flows under study (40 ms), not the background.
    assert e["network"]["buffer"] == {"bytes": 500_000}
    with pytest.raises(ScenarioError) as err:
        d["flows"][1]["jitter"] = {"jitter": "5ms", "distribution": "pareto"}
        Scenario.from_dict(d)
    assert err.value.field == "flows[1].jitter.distribution"


def test_rtts_drawn_from_a_distribution_depend_on_the_seed_only():
    d = copy.deepcopy(BASE)
    d["flows"] = [{"cca": "reno", "count": 400, "rtt": {"distribution": "exponential", "mean": "132ms"}}]
    a = Scenario.from_dict(d).flow_rtts()
    assert a == Scenario.from_dict(d).flow_rtts()
    d["run"]["seed"] = 2
    b = Scenario.from_dict(d).flow_rtts()
    assert a != b
    mean_ms = sum(a) / len(a) / 1e6
    assert 132 * 0.85 < mean_ms < 132 * 1.15
    # Kolmogorov-Smirnov against the exponential (critical value at 1 %: 1.63 / sqrt(n)).
    xs = sorted(x / 1e6 for x in a)
    ks = max(max(abs((i + 1) / len(xs) - (1 - math.exp(-x / 132))), abs(i / len(xs) - (1 - math.exp(-x / 132)))) for i, x in enumerate(xs))
    assert ks < 1.63 / math.sqrt(len(xs))


def test_draws_follow_the_distribution_means():
    # Drawn by the engine (the one sampler), from distributions resolved here.
    for spec, mean in [
        ({"distribution": "uniform", "min": "10ms", "max": "30ms"}, 20e6),
        ({"distribution": "normal", "mean": "50ms", "sd": "5ms"}, 50e6),
        ({"distribution": "lognormal", "median": "40ms", "sigma": 0.5}, 40e6 * math.exp(0.125)),
        ({"distribution": "pareto", "k": "10ms", "alpha": 3}, 15e6),
    ]:
        d = resolve_dist(spec, parse_duration, "x")
        m = sum(_engine.sample_dist_json(json.dumps(d), 1, "test", 20_000)) / 20_000
        assert abs(m / mean - 1) < 0.03, (spec, m)


def test_background_setups_add_flagged_flows_and_delay_the_studied_flows():
    paper = Scenario.from_dict(with_(background="paper")).engine
    flows = paper["flows"]
    assert len(flows) == 1 + 12 + 2
    assert not flows[0]["background"] and all(f["background"] for f in flows[1:])
    assert [f["direction"] for f in flows[1:]].count("reverse") == 2
    assert flows[0]["start"] == 5_000_000_000 and flows[1]["start"] == 0
    assert [w["direction"] for w in paper["web"]] == ["forward", "reverse"] and paper["web"][0]["load"] == 38_000_000
    testbed = Scenario.from_dict(with_(background="testbed")).engine
    bg = testbed["flows"][1:]
    assert len(bg) == 24 and all(f["cca"] == "reno" and f["jitter"]["jitter"] == 200_000_000 for f in bg)
    # As in the GENI set-up: both groups forward, netem's 200 ms on the data path only.
    assert {f["direction"] for f in bg} == {"forward"}
    assert all(f["data_delay"] == 200_000_000 and f["rtt"] == 2_000_000 for f in bg)
    assert set(BACKGROUNDS) == {"none", "testbed", "paper"}


def test_a_run_with_background_reports_fairness_over_the_studied_flows_only():
    d = with_(background="paper")
    d["flows"][0]["count"] = 2
    d["run"] = {"duration": "12s", "warmup": "6s"}
    r = ccarena.run(d)
    fl = r.flows
    assert len(fl) == 16 and fl.background.sum() == 14
    studied = fl[~fl.background].throughput_mbps.to_numpy()
    s = r.summary
    jain_two = studied.sum() ** 2 / (2 * (studied**2).sum())
    assert s["jain_index"] == pytest.approx(jain_two)
    assert s["aggregate_throughput_mbps"] == pytest.approx(studied.sum())
    assert s["web_flows"] > 50 and 0.8 < s["web_completed"] <= 1
    assert 0.9 < s["link_utilization"] <= 1.0
    sf = r.short_flows
    assert set(sf.direction) == {"forward", "reverse"}
    assert (sf.fct_s.dropna() >= sf.rtt_ms[sf.completed] * 1.5e-3 - 1e-9).all()


def test_udp_source_results_and_time_series():
    r = ccarena.run(with_(udp=[{"rate": "20Mbps", "rtt": "40ms"}], run={"duration": "6s", "warmup": "1s"}))
    u = r.udp
    assert len(u) == 1 and u.throughput_mbps.iloc[0] == pytest.approx(20 * 1500 / 1500, rel=0.05)
    assert len(r.udp_timeseries) == 60
    assert r.summary["udp_throughput_mbps"] == pytest.approx(u.throughput_mbps.sum())


def test_dynamics_and_traces_run_and_show_in_the_queue_series():
    d = with_(network_dynamics=[{"kind": "step", "at": "4s", "rate": "20Mbps"}], run={"duration": "8s"})
    q = ccarena.run(d).queue
    assert set(q[q.t_s < 4].rate_mbps) == {100.0} and set(q[q.t_s >= 4].rate_mbps) == {20.0}
    assert "0.57mbps-poisson" in trace_names() and "cellular-walk" in trace_names()
    t = copy.deepcopy(BASE)
    t["network"] = {"trace": "step-12-36mbps", "buffer": "200p"}
    t["run"] = {"duration": "25s", "warmup": "5s"}
    r = ccarena.run(t)
    # The trace's mean (24 Mbit/s) stands in for the rate; the link is kept busy.
    assert r.scenario.engine["network"]["bottleneck_rate"] == 24_000_000
    assert r.summary["link_utilization"] > 0.97
    with pytest.raises(ScenarioError) as e:
        t["network"]["dynamics"] = [{"kind": "step", "at": "1s", "rate": "5Mbps"}]
        Scenario.from_dict(t)
    assert e.value.field == "network.dynamics" and "trace" in e.value.message


def test_the_linux_backend_refuses_what_only_the_simulator_models():
    with pytest.raises(ScenarioError) as e:
        ccarena.load_scenario(with_(udp=[{"rate": "1Mbps"}]), backend="linux")
    assert e.value.field == "backend" and "udp" in e.value.message and "--backend sim" in e.value.message


def test_sweep_shorthands_leave_background_tables_alone_and_sweeps_round_trip_as_toml():
    from ccarena.scenario import dump_toml
    from ccarena.experiments.sweep import expand

    d = copy.deepcopy(BASE)
    d["flows"].append({"cca": "reno", "rtt": "30ms", "background": True})
    d["web"] = [{"load": "5Mbps"}]
    d["sweep"] = {"cca": ["cubic", "bbr"], "rtt": ["20ms", "60ms"], "zip": [{"name": "load", "web[0].load": ["1Mbps", "2Mbps"]}]}
    specs = expand(d)
    assert len(specs) == 8
    for s in specs:
        assert s.doc["flows"][1] == {"cca": "reno", "rtt": "30ms", "background": True}
    # A sweep whose fields need quoting survives a TOML round trip.
    text = dump_toml(d)
    assert '"web[0].load"' in text
    assert Scenario.from_toml(text).doc == d
