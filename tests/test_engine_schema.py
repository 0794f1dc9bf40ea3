"""The engine's side of the scenario seam, called directly: typed errors
(`_engine.ConfigError`) and the exported scenario schema (`_engine.schema_json`)."""

import copy
import json
import pickle

import pytest

from ccarena import _engine

#: A small valid engine config (engine units: ns, bit/s, bytes).
CONFIG = {
    "network": {"bottleneck_rate": 100_000_000, "buffer": {"packets": 100}},
    "flows": [{"cca": "cubic", "rtt": 40_000_000}],
    "run": {"duration": 1_000_000_000},
}


def config(**changes):
    """CONFIG with dotted paths set, e.g. config(**{"flows.0.tcp": {"mss": 1}})."""
    c = copy.deepcopy(CONFIG)
    for path, value in changes.items():
        *parents, last = path.split(".")
        node = c
        for p in parents:
            node = node[int(p)] if p.isdigit() else node.setdefault(p, {})
        node[int(last) if last.isdigit() else last] = value
    return json.dumps(c)


def test_a_valid_config_passes():
    _engine.validate_json(json.dumps(CONFIG))


@pytest.mark.parametrize(
    "changes,field,fragment",
    [
        ({"flows.0.tcp": {"mss": 10}}, "flows[0].tcp.mss", "64..65000"),
        ({"flows.0.cca": "cubc"}, "flows[0].cca", "unknown congestion control 'cubc'"),
        ({"flows.0.cca_params": {"beta": 5000}}, "flows[0].cca_params.beta", "1..1023"),
        ({"network.qdisc": {"kind": "red", "max_p": 1.5}}, "network.qdisc.max_p", "(0, 1]"),
        ({"run.warmup": 2_000_000_000}, "run.warmup", "shorter than run.duration"),
        ({"web": [{"load": 0}]}, "web[0].load", "positive"),
    ],
)
def test_validation_errors_are_config_errors_naming_the_field(changes, field, fragment):
    with pytest.raises(_engine.ConfigError) as e:
        _engine.validate_json(config(**changes))
    assert e.value.field == field
    assert fragment in e.value.message
    assert str(e.value) == f"{e.value.field}: {e.value.message}"


def test_config_error_is_a_value_error_and_survives_pickling():
    assert issubclass(_engine.ConfigError, ValueError)
    with pytest.raises(ValueError):
        _engine.validate_json(config(**{"run.duration": 0}))
    try:
        _engine.validate_json(config(**{"run.duration": 0}))
    except _engine.ConfigError as e:
        again = pickle.loads(pickle.dumps(e))
        assert (again.field, again.message, str(again)) == ("run.duration", "must be positive", "run.duration: must be positive")


@pytest.mark.parametrize(
    "changes,field,fragment",
    [
        ({"run.duration": "10s"}, "run.duration", "invalid type: string"),
        ({"flows.0.rtt": -1}, "flows[0].rtt", "invalid value"),
        ({"flows.0.tcp": {"msss": 1}}, "flows[0].tcp.msss", "unknown field `msss`"),
        ({"network.buffer": {"packets": "many"}}, "network.buffer.packets", "invalid type"),
    ],
)
def test_json_of_the_wrong_shape_names_the_field(changes, field, fragment):
    with pytest.raises(_engine.ConfigError) as e:
        _engine.validate_json(config(**changes))
    assert e.value.field == field, str(e.value)
    assert fragment in e.value.message
    assert " at line " not in e.value.message


def test_a_missing_section_or_broken_json_is_a_config_error():
    with pytest.raises(_engine.ConfigError) as e:
        _engine.validate_json(json.dumps({"network": CONFIG["network"], "flows": CONFIG["flows"]}))
    assert str(e.value) == "run: missing required field"
    del_rate = json.loads(config())
    del del_rate["network"]["bottleneck_rate"]
    with pytest.raises(_engine.ConfigError) as e:
        _engine.validate_json(json.dumps(del_rate))
    assert str(e.value) == "network.bottleneck_rate: missing required field"
    with pytest.raises(_engine.ConfigError) as e:
        _engine.validate_json("{")
    assert e.value.field == "engine config"


def test_run_and_engine_raise_config_errors_too():
    bad = config(**{"flows.0.tcp": {"hz": 123}})
    for call in (_engine.run_json, _engine.Engine):
        with pytest.raises(_engine.ConfigError) as e:
            call(bad)
        assert e.value.field == "flows[0].tcp.hz"


def schema():
    return json.loads(_engine.schema_json())


def test_schema_has_every_leaf_table():
    s = schema()
    assert s["version"] == 1 and s["root"] == "config"
    tables = s["tables"]
    for name in ["config", "network", "flow", "run", "tcp", "qdisc", "loss", "dist", "dynamics", "path_setting", "udp", "udp_pattern", "web", "jitter", "trace"]:
        assert name in tables, name
    for name, table in tables.items():
        assert table["doc"], name
        assert ("fields" in table) + ("variants" in table) + ("values" in table) == 1, name
        fields = [table["fields"]] if "fields" in table else [v["fields"] for v in table.get("variants", {}).values()]
        for fs in fields:
            for fname, f in fs.items():
                assert f["kind"] in {"int", "float", "bool", "string", "duration_ns", "duration_us", "bytes", "rate_bps", "enum", "queue_limit", "cca_params", "table"}, (name, fname)
                assert isinstance(f["required"], bool) and "default" in f and f["doc"], (name, fname)
                assert ("rule" in f) == any(k in f for k in ("min", "max", "one_of", "min_field")), (name, fname)


def test_schema_entries_match_the_engine():
    t = schema()["tables"]
    mss = t["tcp"]["fields"]["mss"]
    assert (mss["kind"], mss["min"], mss["max"], mss["default"], mss["unit"]) == ("int", 64, 65000, 1448, "bytes")
    assert t["tcp"]["fields"]["hz"]["one_of"] == [100, 250, 300, 1000]
    assert t["run"]["fields"]["duration"] == {
        "kind": "duration_ns", "required": True, "default": None, "min": 0, "exclusive_min": True, "rule": "must be positive",
        "doc": "Simulated time of the run.",
    }
    assert t["qdisc"]["tag"] == "kind" and list(t["qdisc"]["variants"]) == sorted(["drop_tail", "red", "codel", "fq_codel", "pie", "step", "dualpi2"])
    assert t["qdisc"]["variants"]["pie"]["fields"]["alpha"]["default"] == 0.125
    assert set(t["loss"]["variants"]) == {"bernoulli", "periodic", "gilbert_elliott", "scheduled", "outages"}
    assert set(t["dist"]["variants"]["lognormal_pareto"]["fields"]) == {"mu", "sigma", "k", "alpha", "tail", "max"}
    assert t["web"]["fields"]["cca"]["default"] == "reno"
    assert t["web"]["fields"]["sizes"]["default"]["max"] == 10e6
    assert t["udp"]["fields"]["packet_bytes"]["default"] == 1500
    assert t["flow"]["fields"]["tcp"] == {"kind": "table", "table": "tcp", "required": False, "default": t["flow"]["fields"]["tcp"]["default"], "doc": "TCP settings of both endpoints."}
    assert t["dynamics"]["variants"]["random_walk"]["fields"]["property"]["values"] == ["rate", "delay", "loss"]


def test_a_value_just_outside_a_declared_range_is_refused_with_the_schemas_rule():
    rule = schema()["tables"]["tcp"]["fields"]["mss"]["rule"]
    with pytest.raises(_engine.ConfigError) as e:
        _engine.validate_json(config(**{"flows.0.tcp": {"mss": 63}}))
    assert e.value.field == "flows[0].tcp.mss" and e.value.message == f"{rule}, got 63"


def test_web_flows_use_python_algorithms_like_long_flows():
    from pathlib import Path

    import ccarena
    from ccarena.backends import cca

    ccarena.load_cca_file(Path(__file__).parent.parent / "examples" / "python_reno.py")
    try:
        cls = cca.registered_ccas()["py-reno"]

        def web_config(cca):
            c = copy.deepcopy(CONFIG)
            c["flows"] = [{"cca": "cubic", "rtt": 20_000_000}]
            c["web"] = [{"load": 20_000_000, "cca": cca}]
            c["run"] = {"duration": 4_000_000_000, "seed": 3}
            return json.dumps(c)

        with pytest.raises(_engine.ConfigError) as e:
            _engine.validate_json(web_config("py-reno"))
        assert e.value.field == "web[0].cca"
        _engine.validate_json(web_config("py-reno"), ["py-reno"])
        python = json.loads(_engine.run_json(web_config("py-reno"), {"py-reno": cls}))
        builtin = json.loads(_engine.run_json(web_config("reno")))
        assert python["web"][0]["flows_started"] > 10 and python["web"][0]["cca"] == "py-reno"
        python["web"][0]["cca"] = "reno"
        assert json.dumps(python) == json.dumps(builtin)
        # A class that refuses its parameters is refused before the run.
        with pytest.raises(_engine.ConfigError) as e:
            _engine.Engine(web_config("py-reno").replace('"cca": "py-reno"', '"cca": "py-reno", "cca_params": {"nope": 1}'), {"py-reno": cls})
        assert e.value.field == "web[0].cca_params"
    finally:
        cca.unregister_cca("py-reno")


def test_the_engine_draws_flow_rtts_from_a_distribution():
    exp = {"distribution": "exponential", "mean": 132e6}
    c = copy.deepcopy(CONFIG)
    c["flows"] = [{"cca": "reno", "rtt": 20_000_000}, {"cca": "reno", "rtt": exp}, {"cca": "reno", "rtt": exp}]
    c["run"]["seed"] = 5
    rtts = _engine.flow_rtts_json(json.dumps(c))
    assert rtts[0] == 20_000_000 and len(set(rtts)) == 3 and all(r >= 1000 for r in rtts)
    # The drawn values are those of the engine's "flow-rtt" stream, in flow order, rounded.
    raw = _engine.sample_dist_json(json.dumps(exp), 5, "flow-rtt", 2)
    assert rtts[1:] == [max(1000, round(x)) for x in raw]
    record = json.loads(_engine.run_json(json.dumps(c)))
    assert [f["rtt_ns"] for f in record["flows"]] == rtts
    # A config with fixed RTTs only is unchanged: nothing is drawn.
    assert _engine.flow_rtts_json(json.dumps(CONFIG)) == [40_000_000]
    with pytest.raises(_engine.ConfigError) as e:
        _engine.flow_rtts_json(config(**{"flows.0.rtt": {"distribution": "exponential", "mean": 0}}))
    assert e.value.field == "flows[0].rtt.mean"
    with pytest.raises(_engine.ConfigError) as e:
        _engine.sample_dist_json(json.dumps({"distribution": "uniform", "min": 2, "max": 1}), 1, "x", 3)
    assert str(e.value) == "dist: needs 0 <= min <= max"


def test_the_limits_docs_scenario_states_are_the_schemas():
    # docs/scenario.md states some limits in the engine's words; they must be the schema's rules.
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "scenario.md").read_text()
    tables = json.loads(_engine.schema_json())["tables"]
    tcp, udp = tables["tcp"]["fields"], tables["udp"]["fields"]
    for f in (tcp["mss"], tcp["initial_cwnd"], tcp["sndbuf"], tcp["rcvbuf"], tcp["hz"], udp["packet_bytes"]):
        assert f["rule"].removeprefix("must be ") in text, f["rule"]
    assert f"| `mss` | {tcp['mss']['default']} |" in text and f"| `initial_cwnd` | {tcp['initial_cwnd']['default']} |" in text
    assert f"| `seed` | {tables['run']['fields']['seed']['default']} |" in text
