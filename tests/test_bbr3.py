"""BBR v3 (``bbr3``) through the user's entry points: a scenario file with
``cca = "bbr3"`` on the CLI, the Python API with v3's parameters, parameter
errors that name the field, and the catalogue, where bbr3 is simulator-only
(the kernels here have only v1's ``bbr``)."""

import json

import pytest

import ccarena
from conftest import cli

SCENARIO = """
name = "bbr3-small"
[network]
bottleneck_rate = "50Mbps"
buffer = "0.25bdp"
[[flows]]
cca = "bbr3"
rtt = "20ms"
count = 2
[run]
duration = "6s"
warmup = "2s"
seed = 3
"""


def test_a_bbr3_scenario_runs_on_the_cli(tmp_path):
    f = tmp_path / "bbr3.toml"
    f.write_text(SCENARIO)
    doc = json.loads(cli("run", str(f), "--json", "--no-save", check=True).stdout)
    assert [fl["cca"] for fl in doc["flows"]] == ["bbr3", "bbr3"]
    assert doc["utilization"] > 0.85, doc
    assert all(fl["throughput_mbps"] > 10 for fl in doc["flows"]), doc


def _doc(params=None, buffer="1bdp"):
    flow = {"cca": "bbr3", "rtt": "20ms"}
    if params is not None:
        flow["cca_params"] = params
    return {"network": {"bottleneck_rate": "50Mbps", "buffer": buffer}, "flows": [flow], "run": {"duration": "6s", "warmup": "2s"}}


def test_bbr3_through_the_api_with_its_parameters():
    r = ccarena.run(_doc({"beta": 76, "loss_thresh": 5, "probe_rtt_win_ms": 5000}))
    assert r.summary["utilization"] > 0.9, r.summary
    assert list(r.flows.cca) == ["bbr3"]


@pytest.mark.parametrize(
    "params,fragment",
    [
        ({"probe_rtt_win_ms": 20000}, "cca_params.probe_rtt_win_ms"),
        ({"beta": 300}, "cca_params.beta"),
        ({"nope": 1}, "cca_params"),
    ],
)
def test_bbr3_parameter_errors_name_the_field(params, fragment):
    with pytest.raises(ccarena.ScenarioError) as e:
        ccarena.run(_doc(params))
    assert fragment in str(e.value)


def test_bbr3_is_listed_as_simulator_only():
    cat = {c["name"]: c for c in json.loads(cli("list", "ccas", "--json", check=True).stdout)}
    c = cat["bbr3"]
    assert c["backends"] == {"sim": "engine", "linux": "not available"}
    assert "tcp_bbr.c" in c["source"] and "v3" in c["source"]
    names = {p["name"] for p in c["params"]}
    assert {"beta", "loss_thresh", "ecn_low", "probe_rtt_win_ms", "bw_probe_max_rounds"} <= names
    # v1 stays what it was: no parameters.
    assert cat["bbr"]["params"] == []
