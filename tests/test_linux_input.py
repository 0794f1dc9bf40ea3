"""Input the linux backend cannot run is refused before anything is set up,
naming the field (docs/linux-backend.md, "Limits"): rates the machine cannot
carry (unless forced, then flagged), too small a rate, too long an RTT, a tbf
burst out of range, a sample interval the sampling cannot keep; a failing
set-up command is one line naming it."""

import json
import subprocess
import time

import pytest

from ccarena import load_scenario
from ccarena.results.result import read_record
from ccarena.backends.linux.backend import MAX_RATE_BPS, check_scenario
from ccarena.scenario import Scenario, ScenarioError
from conftest import cli
from test_linux import REASON

needs_linux = pytest.mark.skipif(REASON is not None, reason=f"linux backend unavailable: {REASON}")

BASE = {
    "network": {"bottleneck_rate": "50Mbps", "buffer": "100p"},
    "flows": [{"cca": "reno", "rtt": "20ms"}],
    "run": {"duration": "2s"},
}


def _with(network=None, flow=None, run=None, linux=None) -> dict:
    doc = {
        "network": {**BASE["network"], **(network or {})},
        "flows": [{**BASE["flows"][0], **(flow or {})}],
        "run": {**BASE["run"], **(run or {})},
    }
    if linux:
        doc["linux"] = linux
    return doc


@pytest.mark.parametrize(
    "doc,field,fragment",
    [
        (_with(network={"bottleneck_rate": "10Gbps"}), "network.bottleneck_rate", "at most 1000 Mbps"),
        (_with(network={"bottleneck_rate": "100Gbps"}), "network.bottleneck_rate", "linux.force_rate"),
        (_with(network={"bottleneck_rate": "1Tbps"}), "network.bottleneck_rate", "at most 1000 Mbps"),
        (_with(network={"bottleneck_rate": "10kbps"}), "network.bottleneck_rate", "at least 1 Mbps"),
        (_with(flow={"rtt": "10s"}), "flows[0].rtt", "up to 1000 ms"),
        (_with(run={"sample_interval": "1ms"}), "run.sample_interval", "at least 10 ms"),
    ],
)
def test_linux_refuses_what_it_cannot_run(doc, field, fragment):
    sc = load_scenario(doc, backend="linux")
    with pytest.raises(ScenarioError) as e:
        check_scenario(sc)
    assert e.value.field == field and fragment in str(e.value), str(e.value)


def test_forced_rate_is_a_note():
    sc = load_scenario(_with(network={"bottleneck_rate": "10Gbps"}, linux={"force_rate": True}), backend="linux")
    notes = check_scenario(sc)
    assert any("10000 Mbps is above" in n for n in notes)


@pytest.mark.parametrize("burst", ["1GB", "100KB"])
def test_tbf_burst_upper_bound(burst):
    # tbf sends a whole bucket at line rate: 1 GB let 1.8 Gbps through 50 Mbps.
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(_with(linux={"tbf_burst": burst}))
    assert e.value.field == "linux.tbf_burst" and "at most 62500 bytes" in str(e.value)
    # 10 ms at the rate is the limit; at low rates 4 frames.
    assert Scenario.from_dict(_with(linux={"tbf_burst": "62500B"})).meta.linux["tbf_burst"] == 62500
    assert Scenario.from_dict(_with(network={"bottleneck_rate": "1Mbps"}, linux={"tbf_burst": "6056B"})).meta.linux["tbf_burst"] == 6056


@pytest.mark.skipif(REASON is not None and "root" in (REASON or ""), reason="needs root")
@pytest.mark.parametrize(
    "args,field",
    [
        (["--set", "network.bottleneck_rate=1Tbps"], "network.bottleneck_rate"),
        (["--set", "network.bottleneck_rate=10kbps"], "network.bottleneck_rate"),
        (["--set", "flows[0].rtt=10s"], "flows[0].rtt"),
        (["--set", "linux.tbf_burst=1GB"], "linux.tbf_burst"),
    ],
)
def test_cli_refuses_in_one_line_before_set_up(tmp_path, args, field):
    f = tmp_path / "s.toml"
    f.write_text('[network]\nbottleneck_rate = "50Mbps"\nbuffer = "100p"\n[[flows]]\ncca = "reno"\nrtt = "20ms"\n[run]\nduration = "2s"\n')
    t = time.monotonic()
    p = cli("run", str(f), "--backend", "linux", "--no-save", *args)
    assert p.returncode == 2 and field in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert len([line for line in p.stderr.splitlines() if line.strip()]) == 1, p.stderr
    assert time.monotonic() - t < 15


@needs_linux
def test_set_up_failure_names_the_command():
    from ccarena.backends.linux.host import LinuxSetupError
    from ccarena.backends.linux.topology import _in_ns

    ns = "ccarena-probe-input-test"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        with pytest.raises(LinuxSetupError) as e:
            _in_ns(ns, ["ip link set lo up", "ip addr add 999.1.1.1/24 dev lo", "ip link set lo down"])
    finally:
        subprocess.run(["ip", "netns", "del", ns])
    msg = str(e.value)
    assert "`ip addr add 999.1.1.1/24 dev lo` failed" in msg and "\n" not in msg and "ip link set lo up" not in msg, msg


@needs_linux
def test_sampling_keeps_to_the_clock(tmp_path):
    """At the shortest interval with several flows, sampling skips ticks rather
    than stretching the run (1 ms once turned 5 s into 100 s)."""
    f = tmp_path / "s.toml"
    f.write_text(
        '[network]\nbottleneck_rate = "50Mbps"\nbuffer = "100p"\n[[flows]]\ncca = "reno"\nrtt = "20ms"\ncount = 4\n'
        '[run]\nduration = "3s"\nwarmup = "1s"\nsample_interval = "10ms"\n'
    )
    t = time.monotonic()
    doc = json.loads(cli("run", str(f), "--backend", "linux", "--no-save", "--json", check=True).stdout)
    assert time.monotonic() - t < 3 + 12
    assert doc["utilization"] > 0.5


@needs_linux
def test_forced_rate_is_flagged(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text(
        f'[network]\nbottleneck_rate = "{MAX_RATE_BPS * 3 // 2_000_000}Mbps"\nbuffer = "200p"\n[[flows]]\ncca = "cubic"\nrtt = "2ms"\n'
        '[run]\nduration = "2s"\n[linux]\nforce_rate = true\n'
    )
    p = cli("run", str(f), "--backend", "linux", "--out", str(tmp_path / "res"), check=True)
    assert "rate above what this machine carries" in " ".join(p.stdout.split()) and "note:" in p.stderr
    rec = read_record(tmp_path / "res")
    assert rec["linux"]["rate_above_limit"] is True
