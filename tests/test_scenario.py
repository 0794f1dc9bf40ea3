import copy

import pytest

from ccarena.scenario import Scenario, ScenarioError, apply_overrides, parse_override

BASE = {
    "network": {"bottleneck_rate": "100Mbps", "buffer": "1bdp"},
    "flows": [{"cca": "reno", "rtt": "40ms"}],
    "run": {"duration": "10s"},
}


def doc(**changes):
    return apply_overrides(BASE, changes)


def test_resolves_engine_units_and_defaults():
    sc = Scenario.from_dict(BASE)
    e = sc.engine
    assert e["network"]["bottleneck_rate"] == 100_000_000
    # 1 BDP at the largest flow RTT: 100 Mbit/s x 40 ms = 500 KB.
    assert e["network"]["buffer"] == {"bytes": 500_000}
    assert e["network"]["loss"] == {"model": "bernoulli", "p": 0.0}
    assert e["run"] == {"duration": 10_000_000_000, "warmup": 0, "seed": 1, "sample_interval": 100_000_000, "start_jitter": 10_000_000}
    assert e["flows"][0]["rtt"] == 40_000_000


def test_groups_expand_with_lists_and_stagger():
    d = doc(**{"flows[0].count": 3, "flows[0].rtt": ["10ms", "20ms", "30ms"], "flows[0].stagger": "2s", "flows[0].start": "1s"})
    sc = Scenario.from_dict(d)
    assert [f["rtt"] for f in sc.engine["flows"]] == [10_000_000, 20_000_000, 30_000_000]
    assert [f["start"] for f in sc.engine["flows"]] == [1_000_000_000, 3_000_000_000, 5_000_000_000]
    assert sc.flow_groups() == [0, 0, 0]


def test_tcp_defaults_and_per_group_overrides():
    d = dict(BASE, tcp={"hz": 1000, "sack": False})
    d["flows"] = [{"cca": "reno", "rtt": "40ms"}, {"cca": "cubic", "rtt": "40ms", "tcp": {"sack": True}}]
    sc = Scenario.from_dict(d)
    assert sc.engine["flows"][0]["tcp"] == {"hz": 1000, "sack": False}
    assert sc.engine["flows"][1]["tcp"] == {"hz": 1000, "sack": True}


@pytest.mark.parametrize(
    "changes,field,fragment",
    [
        ({"flows[0].cca": "cubc"}, "flows[0].cca", "unknown congestion control 'cubc'; allowed: "),
        ({"network.bottleneck_rate": "-100Mbps"}, "network.bottleneck_rate", "negative"),
        ({"network.bottleneck_rate": "100 Mbits per sec"}, "network.bottleneck_rate", "such as '400Mbps'"),
        ({"run.duration": "10"}, "run.duration", "no unit"),
        ({"run.warmup": "20s"}, "run.warmup", "shorter than run.duration"),
        ({"network.loss": 1.5}, "network.loss", "probability"),
        ({"network.loss": {"model": "bursty"}}, "network.loss.model", "allowed: bernoulli"),
        ({"network.colour": "blue"}, "network.colour", "unknown field; allowed: access_rate"),
        ({"flows[0].count": 0}, "flows[0].count", "1..10000"),
        ({"flows[0].cca_params": {"beta": 1}}, "flows[0].cca_params.beta", "unknown parameter for reno"),
        ({"flows[0].tcp": {"hz": 123}}, "flows[0].tcp.hz", "100, 250, 300, 1000"),
        ({"flows[0].rtt": ["1ms", "2ms"]}, "flows[0].rtt", "2 values for count = 1"),
    ],
)
def test_errors_name_the_field_and_what_is_allowed(changes, field, fragment):
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(doc(**changes))
    assert e.value.field == field
    assert fragment in str(e.value)
    assert "\n" not in str(e.value)


def test_cca_parameters_are_checked_by_the_engine():
    with pytest.raises(ScenarioError, match=r"flows\[0\].cca_params.beta: must be in 1..1023"):
        Scenario.from_dict(doc(**{"flows[0].cca": "cubic", "flows[0].cca_params": {"beta": 5000}}))


@pytest.mark.parametrize("missing", ["network", "run", "flows"])
def test_missing_sections(missing):
    d = {k: v for k, v in BASE.items() if k != missing}
    with pytest.raises(ScenarioError, match="missing required field"):
        Scenario.from_dict(d)


def test_missing_required_field():
    d = doc()
    del d["network"]["bottleneck_rate"]
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(d)
    assert str(e.value) == "network.bottleneck_rate: missing required field"


def test_overrides_parse_toml_values():
    assert parse_override("run.seed=7") == ("run.seed", 7)
    assert parse_override("network.loss=0.01") == ("network.loss", 0.01)
    assert parse_override("run.duration=10s") == ("run.duration", "10s")
    assert parse_override('flows[0].tcp={ sack = false }') == ("flows[0].tcp", {"sack": False})


def test_toml_round_trip():
    sc = Scenario.from_dict(doc(**{"flows[0].cca_params": {}, "network.loss": {"model": "periodic", "p": 0.01}}))
    again = Scenario.from_toml(sc.to_toml())
    assert again.engine == sc.engine


def test_unknown_cca_lists_every_algorithm_sorted():
    from ccarena.scenario import cca_catalogue

    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(doc(**{"flows[0].cca": "cubc"}))
    names = sorted(c["name"] for c in cca_catalogue())
    assert str(e.value).endswith("allowed: " + ", ".join(names))


def test_qdisc_defaults_to_drop_tail_and_resolves_names_and_tables():
    assert "qdisc" not in Scenario.from_dict(BASE).engine["network"]
    assert Scenario.from_dict(doc(**{"network.qdisc": "codel"})).engine["network"]["qdisc"] == {"kind": "codel"}
    red = {"kind": "red", "min": "30p", "max": "90p", "max_p": 0.1, "ecn": True}
    q = Scenario.from_dict(doc(**{"network.qdisc": red})).engine["network"]["qdisc"]
    assert q == {"kind": "red", "min": {"packets": 30}, "max": {"packets": 90}, "max_p": 0.1, "ecn": True}
    fq = {"kind": "fq_codel", "target": "5ms", "interval": "100ms", "quantum": "1514B", "flows": 1024, "ecn": False}
    q = Scenario.from_dict(doc(**{"network.qdisc": fq})).engine["network"]["qdisc"]
    assert q == {"kind": "fq_codel", "target": 5_000_000, "interval": 100_000_000, "quantum": 1514, "flows": 1024, "ecn": False}
    pie = {"kind": "pie", "target": "20ms", "alpha": 0.125, "beta": 1.25, "dq_rate_estimator": True}
    q = Scenario.from_dict(doc(**{"network.qdisc": pie})).engine["network"]["qdisc"]
    assert q == {"kind": "pie", "target": 20_000_000, "alpha": 0.125, "beta": 1.25, "dq_rate_estimator": True}
    dq = {"kind": "dualpi2", "target": "15ms", "step_thresh": "1ms", "coupling_factor": 2, "c_protection": 10, "any_ect": True}
    q = Scenario.from_dict(doc(**{"network.qdisc": dq})).engine["network"]["qdisc"]
    assert q == {"kind": "dualpi2", "target": 15_000_000, "step_thresh": 1_000_000, "coupling_factor": 2, "c_protection": 10, "any_ect": True}
    # A threshold in bandwidth-delay products: 0.1 x 100 Mbit/s x 40 ms.
    q = Scenario.from_dict(doc(**{"network.qdisc": {"kind": "red", "min": "0.1bdp", "max": "0.3bdp"}})).engine["network"]["qdisc"]
    assert q["min"] == {"bytes": 50_000} and q["max"] == {"bytes": 150_000}
    sc = Scenario.from_dict(doc(**{"network.qdisc": red}))
    assert Scenario.from_toml(sc.to_toml()).engine == sc.engine


@pytest.mark.parametrize(
    "qdisc,field,fragment",
    [
        ("blue", "network.qdisc", "unknown queue discipline 'blue'; allowed: drop_tail, codel, dualpi2, fq_codel, pie, red"),
        ({"kind": "sfq"}, "network.qdisc.kind", "allowed: drop_tail, codel, dualpi2, fq_codel, pie, red"),
        ({"target": "5ms"}, "network.qdisc", "allowed: drop_tail"),
        (7, "network.qdisc", "a name or a table"),
        ({"kind": "codel", "targt": "5ms"}, "network.qdisc.targt", "unknown field; allowed: ce_threshold, ecn, interval, kind, target"),
        ({"kind": "codel", "target": "5"}, "network.qdisc.target", "no unit"),
        ({"kind": "codel", "ecn": "yes"}, "network.qdisc.ecn", "true or false"),
        ({"kind": "red", "max_p": 1.5}, "network.qdisc.max_p", "must be in (0, 1], got 1.5"),
        ({"kind": "red", "min": "30 parcels"}, "network.qdisc.min", "packets ('200p')"),
        ({"kind": "red", "min": "90p", "max": "30p"}, "network.qdisc.max", "must be above min"),
        ({"kind": "red", "min": "30p", "max": "90KB"}, "network.qdisc.max", "unit of min"),
        ({"kind": "fq_codel", "flows": 0}, "network.qdisc.flows", "1.."),
        ({"kind": "fq_codel", "quantum": "100B"}, "network.qdisc.quantum", "at least 256 bytes"),
        ({"kind": "pie", "beta": 3}, "network.qdisc.beta", "[0, 2]"),
        ({"kind": "pie", "tupdate": 0}, "network.qdisc.tupdate", "positive"),
        ({"kind": "step"}, "network.qdisc.threshold", "missing required field"),
        ({"kind": "step", "threshold": "20 parcels"}, "network.qdisc.threshold", "packets ('200p')"),
        ({"kind": "step", "threshold": "20p", "ecn": True}, "network.qdisc.ecn", "unknown field; allowed: kind, threshold"),
        ({"kind": "dualpi2", "coupling_factor": 0}, "network.qdisc.coupling_factor", "1..255"),
        ({"kind": "dualpi2", "c_protection": 101}, "network.qdisc.c_protection", "0..100"),
        ({"kind": "dualpi2", "step_thresh": "1ms", "step_packets": 5}, "network.qdisc.step_packets", "not both"),
    ],
)
def test_qdisc_errors_name_the_field_and_what_is_allowed(qdisc, field, fragment):
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(doc(**{"network.qdisc": qdisc}))
    assert e.value.field == field
    assert fragment in str(e.value)
    assert "\n" not in str(e.value)


def test_qdisc_runs_and_reports_marks():
    from ccarena.backends import sim as api

    d = doc(**{
        "network.bottleneck_rate": "20Mbps",
        "network.buffer": "1000p",
        "network.qdisc": {"kind": "codel", "ecn": True},
        "flows[0].cca": "cubic",
        "flows[0].count": 2,
        "tcp": {"ecn": True},
        "run.duration": "8s",
    })
    r = api.run(d)
    link = r.record["link"]
    assert link["qdisc"]["kind"] == "codel"
    assert link["ce_marks"] > 0 and link["drops_aqm"] == 0
    assert r.summary["ce_marks"] == link["ce_marks"]


def test_engine_errors_name_the_table_the_user_wrote():
    # The engine sees 5 + 1 flows; its complaint about its flows[5] is about the second [[flows]] table.
    from ccarena.scenario.model import check_with_engine

    d = dict(BASE, flows=[{"cca": "reno", "rtt": "40ms", "count": 5}, {"cca": "cubic", "rtt": "40ms", "tcp": {"mss": 9000, "sndbuf": "2000B"}}])
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(d)
    assert e.value.field == "flows[1].tcp.sndbuf"
    sc = Scenario.from_dict(dict(d, flows=[d["flows"][0], {"cca": "cubic", "rtt": "40ms"}]))
    engine = copy.deepcopy(sc.engine)
    engine["flows"][5]["tcp"]["mss"] = 1
    with pytest.raises(ScenarioError) as e:
        check_with_engine(engine, [], sc.doc)
    assert e.value.field == "flows[1].tcp.mss"
    assert "64..65000" in e.value.message
    # udp and web tables that expand are mapped back too.
    d = dict(BASE, udp=[{"rate": "1Mbps", "count": 3}, {"rate": "1Mbps"}], web=[{"load": "1Mbps", "direction": "both"}, {"load": "2Mbps"}])
    sc = Scenario.from_dict(d)
    engine = copy.deepcopy(sc.engine)
    engine["udp"][3]["rtt"] = 0
    engine["web"][2]["load"] = 0
    with pytest.raises(ScenarioError) as e:
        check_with_engine(engine, [], sc.doc)
    assert e.value.field == "udp[1].rtt"
    engine["udp"][3]["rtt"] = 1000
    with pytest.raises(ScenarioError) as e:
        check_with_engine(engine, [], sc.doc)
    assert e.value.field == "web[1].load"
    # The on-off periods sit beside `pattern` in a [[udp]] table, inside it in the engine.
    d = dict(BASE, udp=[{"rate": "1Mbps", "pattern": "on_off", "on": "500ns", "off": "10ms"}])
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(d)
    assert e.value.field == "udp[0].on" and "at least 1 us" in e.value.message


def test_leaf_tables_follow_the_engines_schema():
    # Limits are the engine's: initial_cwnd above 1000 is allowed, a buffer must hold one mss.
    sc = Scenario.from_dict(doc(**{"tcp": {"initial_cwnd": 5000, "sndbuf": "1448B"}}))
    assert sc.engine["flows"][0]["tcp"] == {"initial_cwnd": 5000, "sndbuf": 1448}
    for tcp, field, fragment in [
        ({"msss": 1}, "tcp.msss", "did you mean 'mss'?"),
        ({"sndbuf": "1000B"}, "tcp.sndbuf", "must be at least mss, got '1000B'"),
        ({"initial_cwnd": 0}, "tcp.initial_cwnd", "must be in 1..2147483647 packets, got 0"),
        ({"rto_min": "0s"}, "tcp.rto_min", "must be positive"),
    ]:
        with pytest.raises(ScenarioError) as e:
            Scenario.from_dict(doc(tcp=tcp))
        assert e.value.field == field and fragment in e.value.message, e.value
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(doc(**{"network.qdisc": "codle"}))
    assert "did you mean 'codel'?" in e.value.message
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(doc(**{"network.loss": {"model": "bernoulli", "p": 2}}))
    assert e.value.field == "network.loss.p" and e.value.message == "must be a probability in [0, 1], got 2"


@pytest.mark.parametrize(
    "params,fragment",
    [({"beta": "x"}, "must be an integer in 1..1023, got 'x'"), ({"beta": [1]}, "must be an integer in 1..1023, got [1]"),
     ({"hystart": "no"}, "must be true or false, got 'no'")],
)
def test_cca_params_of_the_wrong_type_name_the_parameter(params, fragment):
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(doc(**{"flows[0].cca": "cubic", "flows[0].cca_params": params}))
    assert e.value.field == f"flows[0].cca_params.{next(iter(params))}" and e.value.message == fragment
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(dict(BASE, web=[{"load": "1Mbps", "cca": "cubic", "cca_params": params}]))
    assert e.value.field == f"web[0].cca_params.{next(iter(params))}" and e.value.message == fragment


def test_dctcp_over_a_step_queue_marks_and_loses_nothing():
    """DCTCP negotiates ECN by itself (tcp.ecn stays off) and holds the step
    queue near its threshold: marks, no drops, no retransmissions."""
    from ccarena.backends import sim as api

    q = Scenario.from_dict(doc(**{"network.qdisc": {"kind": "step", "threshold": "30KB"}})).engine["network"]["qdisc"]
    assert q == {"kind": "step", "threshold": {"bytes": 30_000}}
    d = doc(**{
        "network.bottleneck_rate": "50Mbps",
        "network.buffer": "500p",
        "network.qdisc": {"kind": "step", "threshold": "20p"},
        "flows[0].cca": "dctcp",
        "flows[0].count": 2,
        "run.duration": "6s",
    })
    r = api.run(d)
    link = r.record["link"]
    assert link["qdisc"]["kind"] == "step"
    assert link["ce_marks"] > 0 and link["drops_queue"] == 0 and link["drops_aqm"] == 0
    assert (r.flows.retransmissions == 0).all()
    with pytest.raises(ScenarioError, match=r"flows\[0\].cca_params.shift_g: must be in 0..10"):
        Scenario.from_dict(doc(**{"flows[0].cca": "dctcp", "flows[0].cca_params": {"shift_g": 11}}))
