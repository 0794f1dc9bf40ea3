import json
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
