import json
import shutil
from pathlib import Path

import pytest

import ccarena

EXAMPLES = Path(__file__).parent.parent / "examples"


@pytest.fixture(autouse=True)
def registered():
    ccarena.load_cca_file(EXAMPLES / "python_reno.py")
    yield
    ccarena.backends.cca.unregister_cca("py-reno")


def scenario(cca):
    return {
        "network": {"bottleneck_rate": "20Mbps", "buffer": "60p", "loss": 0.002},
        "flows": [{"cca": cca, "rtt": "30ms"}, {"cca": cca, "rtt": "60ms", "start": "1s"}],
        "run": {"duration": "20s", "warmup": "2s", "seed": 5},
    }


def test_python_reno_is_identical_to_builtin_reno():
    builtin = ccarena.run(scenario("reno")).record
    python = ccarena.run(scenario("py-reno")).record
    for f in python["flows"]:
        assert f["cca"] == "py-reno"
        f["cca"] = "reno"
        f["label"] = "reno"
    assert json.dumps(python) == json.dumps(builtin)
    assert builtin["flows"][0]["counters"]["recoveries"] > 5  # the comparison exercises loss recovery


def test_scenario_files_can_bring_their_own_algorithms():
    r = ccarena.run(str(EXAMPLES / "python_reno.toml"), overrides={"run.duration": "3s", "run.warmup": "1s"})
    assert list(r.flows.cca) == ["py-reno", "cubic"]


def test_errors_in_python_hooks_are_reported():
    class Broken(ccarena.CongestionControl):
        name = "broken"

        def cong_avoid(self, tp, ack, acked):
            raise ValueError("boom")

    ccarena.register_cca(Broken)
    try:
        with pytest.raises(RuntimeError, match="broken.cong_avoid: ValueError: boom"):
            ccarena.run(scenario("broken"))
    finally:
        ccarena.backends.cca.unregister_cca("broken")


def test_parameters_and_bad_classes():
    class WithParam(ccarena.CongestionControl):
        name = "with-param"
        params = {"gain": 2}

        def cong_avoid(self, tp, ack, acked):
            tp.cwnd = min(tp.cwnd + self.gain * acked, 1000)

    ccarena.register_cca(WithParam)
    try:
        d = scenario("with-param")
        d["flows"][0]["cca_params"] = {"gain": 1}
        ccarena.run(d, overrides={"run.duration": "2s", "run.warmup": "0s"})
        d["flows"][0]["cca_params"] = {"gian": 1}
        with pytest.raises(ccarena.ScenarioError, match="unknown parameter 'gian'"):
            ccarena.run(d, overrides={"run.duration": "2s", "run.warmup": "0s"})
    finally:
        ccarena.backends.cca.unregister_cca("with-param")
    with pytest.raises(ccarena.ScenarioError, match="built-in"):

        class Clash(ccarena.CongestionControl):
            name = "cubic"

            def cong_avoid(self, tp, ack, acked):
                pass

        ccarena.register_cca(Clash)


SWEEP = """
name = "py-sweep"
cca_files = ["python_reno.py"]

[network]
bottleneck_rate = "20Mbps"
buffer = "60p"
loss = 0.002

[[flows]]
cca = "reno"
rtt = "30ms"

[[flows]]
cca = "reno"
rtt = "60ms"
start = "1s"

[run]
duration = "6s"
warmup = "2s"
seed = 5

[sweep]
cca = ["reno", "py-reno"]
"""


def _as_builtin(record: dict) -> dict:
    for f in record["flows"]:
        f["cca"] = f["label"] = "reno"
    return record


@pytest.mark.parametrize("where", ["local", "dask"])
def test_sweeps_run_python_algorithms(tmp_path, where):
    """A sweep's workers load the scenario's cca_files themselves (they have not
    seen the parent's registrations): the Python Reno's runs succeed and their
    records are the built-in Reno's."""
    from ccarena.experiments.executors import DaskExecutor, LocalExecutor
    from ccarena.experiments.runner import run_sweep

    if where == "dask":
        pytest.importorskip("distributed")
    shutil.copy(EXAMPLES / "python_reno.py", tmp_path / "python_reno.py")
    f = tmp_path / "py-sweep.toml"
    f.write_text(SWEEP)
    executor = LocalExecutor(2) if where == "local" else DaskExecutor("local", jobs=1)
    outcome = run_sweep(str(f), tmp_path / "res", executor=executor)
    assert (outcome.computed, outcome.failed) == (2, 0), outcome.errors
    res = ccarena.load(tmp_path / "res")
    runs = res.runs.set_index("cca")
    assert set(runs.status) == {"ok"}
    builtin, python = res.record(runs.run_id["reno"]), res.record(runs.run_id["py-reno"])
    assert [f["cca"] for f in python["flows"]] == ["py-reno", "py-reno"]
    assert json.dumps(_as_builtin(python)) == json.dumps(builtin)
    flows = res.flows.set_index("run_id")
    assert list(flows.loc[runs.run_id["py-reno"]].group) == [0, 1]


def test_web_traffic_alone_can_use_a_python_algorithm():
    # py-reno is named only by the [[web]] table: the scenario must still hand its class to the engine.
    def doc(cca):
        return {
            "network": {"bottleneck_rate": "20Mbps", "buffer": "60p"},
            "flows": [{"cca": "cubic", "rtt": "20ms"}],
            "web": [{"load": "10Mbps", "cca": cca}],
            "run": {"duration": "4s", "seed": 3},
        }

    from ccarena.backends.sim import SIM

    sc = SIM.load(doc("py-reno"))
    assert sc.meta.python_ccas == ("py-reno",)
    python = ccarena.run(doc("py-reno")).record
    builtin = ccarena.run(doc("reno")).record
    assert python["web"][0]["cca"] == "py-reno" and python["web"][0]["flows_started"] > 10
    python["web"][0]["cca"] = "reno"
    assert json.dumps(python) == json.dumps(builtin)
