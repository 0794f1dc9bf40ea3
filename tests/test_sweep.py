import copy

import pytest

from ccarena.scenario import ScenarioError
from ccarena.experiments.sweep import apply_quick, expand, parse_sweep, run_id_for

BASE = {
    "name": "t",
    "network": {"bottleneck_rate": "20Mbps", "buffer": "50p"},
    "flows": [{"cca": "cubic", "rtt": "20ms"}, {"cca": "cubic", "rtt": "40ms"}],
    "run": {"duration": "3s", "seed": 7},
}


def doc(sweep):
    d = copy.deepcopy(BASE)
    d["sweep"] = sweep
    return d


def test_grid_times_repetitions_with_shorthands():
    specs = expand(doc({"repetitions": 3, "cca": ["cubic", "reno"], "bottleneck_rate": ["10Mbps", "20Mbps", "40Mbps"]}))
    assert len(specs) == 2 * 3 * 3
    assert [s.seed for s in specs[:3]] == [7, 8, 9]
    s = specs[3]  # point 1: cubic, 20 Mbps
    assert s.params == {"cca": "cubic", "bottleneck_rate": "20Mbps"}
    assert [f["cca"] for f in s.engine["flows"]] == ["cubic", "cubic"]  # the shorthand sets every [[flows]] table
    assert s.engine["network"]["bottleneck_rate"] == 20_000_000
    # Repetitions share the scenario hash, differ in run id.
    assert len({x.scenario_hash for x in specs[:3]}) == 1 and len({x.run_id for x in specs}) == len(specs)


def test_dotted_paths_and_zipped_axes():
    specs = expand(doc({
        "flows[1].rtt": ["10ms", "80ms"],
        "zip": [{"name": "pair", "labels": ["same", "mixed"], "flows[0].cca": ["reno", "reno"], "flows[1].cca": ["reno", "cubic"]}],
    }))
    assert len(specs) == 4
    mixed = [s for s in specs if s.params["pair"] == "mixed"]
    assert {s.params["flows[1].rtt"] for s in mixed} == {"10ms", "80ms"}
    assert all([f["cca"] for f in s.engine["flows"]] == ["reno", "cubic"] for s in mixed)
    assert mixed[0].params["flows[1].cca"] == "cubic"  # a zip's fields are recorded too


def test_run_ids_are_content_addressed():
    a = expand(doc({"rtt": ["20ms"]}))[0]
    b = expand(doc({"rtt": ["0.02s"]}))[0]  # same engine configuration, written differently
    assert a.run_id == b.run_id
    assert run_id_for(a.engine, "9.9")[0] != a.run_id  # the version is part of the id


def test_seeds_list_and_quick():
    sw = parse_sweep(doc({"seeds": [3, 5], "cca": ["reno"]}))
    assert sw.seeds == [3, 5]
    q = apply_quick(doc({"repetitions": 5, "cca": ["reno"], "quick": {"repetitions": 2, "run.duration": "1s"}}))
    assert parse_sweep(q).repetitions == 2 and q["run"]["duration"] == "1s" and "quick" not in q["sweep"]


def test_algorithms_the_engine_lacks_are_skipped_with_a_reason(monkeypatch):
    import ccarena.experiments.sweep

    monkeypatch.setattr(ccarena.experiments.sweep, "PLANNED_CCAS", frozenset({"future-cca"}))
    specs = expand(doc({"cca": ["cubic", "future-cca"]}))
    assert specs[0].skip_reason is None
    assert specs[1].skip_reason == "future-cca not in this engine yet"


@pytest.mark.parametrize(
    "sweep,field,fragment",
    [
        ({"colour": ["red"]}, "sweep.colour", "not a field; use a shorthand"),
        ({"rtt": []}, "sweep.rtt", "non-empty list"),
        ({"rtt": "20ms"}, "sweep.rtt", "non-empty list"),
        ({"rtt": ["20ms", "40"]}, "sweep.rtt[1]", "has no unit"),
        ({"repetitions": 0}, "sweep.repetitions", "1..10000"),
        ({"seeds": [1, 1]}, "sweep.seeds", "distinct"),
        ({"zip": [{"flows[0].cca": ["reno"], "flows[1].cca": ["reno", "cubic"]}]}, "sweep.zip[0]", "one length"),
        ({"cca": ["reno"], "flows[0].cca": ["cubic"]}, "sweep.flows[0].cca", "also sets"),
        ({"flows[5].rtt": ["1ms"]}, "sweep.flows[5].rtt", "does not exist"),
        ({"bottleneck_rate": ["fast"]}, "sweep.bottleneck_rate[0]", "such as '400Mbps'"),
        ({"cca": ["cubic", "cubc"]}, "sweep.cca[1]", "unknown congestion control 'cubc'; allowed: bbr, bbr3, bic, cdg, cubic"),
    ],
)
def test_errors_name_the_sweep_field(sweep, field, fragment):
    with pytest.raises(ScenarioError) as e:
        expand(doc(sweep))
    assert e.value.field == field, str(e.value)
    assert fragment in str(e.value)
    assert "\n" not in str(e.value)


def test_no_sweep_is_one_run():
    specs = expand(copy.deepcopy(BASE))
    assert len(specs) == 1 and specs[0].seed == 7 and specs[0].params == {}


def test_start_jitter_differs_by_seed_and_is_reproducible():
    import json

    from ccarena import _engine

    d = copy.deepcopy(BASE)
    d["run"]["start_jitter"] = "100ms"
    specs = expand(doc({"repetitions": 2}) | {"run": d["run"]})
    assert specs[0].engine["run"]["start_jitter"] == 100_000_000

    def starts(spec):
        record = json.loads(_engine.run_json(json.dumps({k: v for k, v in spec.engine.items() if not k.startswith("_")})))
        return [f["start_ns"] for f in record["flows"]]

    s0, s1 = starts(specs[0]), starts(specs[1])
    assert s0 != s1 and all(0 <= s < 100_000_000 for s in s0 + s1)
    assert s0 == starts(expand(doc({"repetitions": 2}) | {"run": d["run"]})[0])
    # The instants the other backends launch their flows at are the engine's own.
    assert _engine.flow_starts_json(json.dumps({k: v for k, v in specs[1].engine.items() if not k.startswith("_")})) == s1


def test_identical_repetitions_are_detected():
    from ccarena.experiments.sweep import repetitions_identical

    no_jitter = doc({"repetitions": 2})
    no_jitter["run"]["start_jitter"] = "0s"
    assert repetitions_identical(expand(no_jitter))
    with_jitter = doc({"repetitions": 2})
    with_jitter["run"]["start_jitter"] = "10ms"
    assert not repetitions_identical(expand(with_jitter))
    lossy = copy.deepcopy(no_jitter)
    lossy["network"]["loss"] = 0.001
    assert not repetitions_identical(expand(lossy))
    assert not repetitions_identical(expand(doc({"repetitions": 1})))


def test_a_sweep_parses_its_sweep_table_once(monkeypatch):
    from ccarena.experiments import runner, sweep

    calls = []
    parse = sweep.parse_sweep

    def counting(d):
        calls.append(1)
        return parse(d)

    monkeypatch.setattr(runner, "parse_sweep", counting)
    monkeypatch.setattr(sweep, "parse_sweep", counting)
    plan = runner.prepare(doc({"repetitions": 2, "cca": ["cubic", "reno"], "quick": {"repetitions": 1}}), quick=True)
    assert len(calls) == 1 and plan.quick and len(plan.specs) == 2
    assert plan.axes == [{"name": "cca", "fields": ["flows[0].cca", "flows[1].cca"], "labels": ["cubic", "reno"]}]
