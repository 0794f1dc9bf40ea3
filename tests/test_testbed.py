"""The testbed backend. Always: the inventory's checks, the dry run (the GENI
Fig. 8 inventory, nothing connected to), the refusals. End to end, against
hosts emulated on this machine (namespaces each running OpenSSH's sshd, wired
as a dumbbell: tests/testbed_hosts.py): a two-flow run and a small sweep land
in the store, and afterwards no qdisc, iptables rule, sysctl, offload,
process or scratch directory is left on the hosts. Those skip themselves
without root, sshd or the tools."""

from pathlib import Path

import pytest

from ccarena.backends.testbed import TestbedBackend, load_inventory
from ccarena.backends.testbed.inventory import InventoryError
from ccarena.scenario import ScenarioError
from conftest import cli
from testbed_hosts import HOSTS, EmulatedTestbed, unavailable

ROOT = Path(__file__).resolve().parents[1]
GENI = ROOT / "examples" / "testbed" / "geni-fig8.toml"

TWO_FLOWS = """
name = "tb-two"
[network]
bottleneck_rate = "50Mbps"
buffer = "1bdp"
[[flows]]
cca = "reno"
rtt = "20ms"
[[flows]]
cca = "cubic"
rtt = "40ms"
[run]
duration = "5s"
warmup = "1s"
"""

SWEEP = TWO_FLOWS.replace('name = "tb-two"', 'name = "tb-sweep"') + """
[sweep]
cca = ["reno", "cubic"]
"""

MINIMAL = {
    "hosts": [
        {"name": "a", "role": "sender", "interface": "eth1"},
        {"name": "b", "role": "receiver", "interface": "eth1", "address": "10.0.0.2"},
        {"name": "r", "role": "router", "interface": "eth2", "bottleneck": True},
    ]
}


# ---- always ----

def test_the_geni_inventory_is_valid():
    inv = load_inventory(GENI)
    assert [h.name for h in inv.by_role("sender")] == ["client1", "client2"]
    assert len(inv.by_role("receiver")) == 4 and len(inv.by_role("router")) == 2
    assert inv.bottleneck.name == "router1" and all(h.sudo for h in inv.hosts)


@pytest.mark.parametrize("change, field, words", [
    (lambda d: d["hosts"][0].update(role="client"), "hosts[0].role", "allowed: sender, background, receiver, router"),
    (lambda d: d["hosts"][1].pop("address"), "hosts[1].address", "experiment address"),
    (lambda d: d["hosts"][2].update(bottleneck=False), "hosts[2].bottleneck", "no bottleneck router"),
    (lambda d: d["hosts"][0].update(bottleneck=True), "hosts[0].bottleneck", "only a router"),
    (lambda d: d["hosts"][0].update(port=70000), "hosts[0].port", "1..65535"),
    (lambda d: d["hosts"][0].update(interfce="eth1"), "hosts[0].interfce", "unknown field"),
    (lambda d: d["hosts"][0].update(interface="eth1; reboot"), "hosts[0].interface", "an interface name"),
    (lambda d: d["hosts"][1].update(name="a"), "hosts[1].name", "already the name"),
    (lambda d: d["hosts"][0].update(delay="dummynet"), "hosts[0].delay", "allowed: auto, netem, program"),
    (lambda d: d["hosts"][0].update(jump="a@b:c:d"), "hosts[0].jump", "[user@]host[:port]"),
    (lambda d: d.update(hosts=[h for h in d["hosts"] if h["role"] != "receiver"]), "hosts", "no host with role 'receiver'"),
])
def test_inventory_errors_name_the_field(change, field, words):
    import copy

    doc = copy.deepcopy(MINIMAL)
    change(doc)
    with pytest.raises(InventoryError) as e:
        load_inventory(doc)
    assert e.value.field == field and words in str(e.value)


def test_an_invalid_inventory_exits_2_naming_the_field(tmp_path):
    inv = tmp_path / "inv.toml"
    inv.write_text('[[hosts]]\nname = "a"\nrole = "switch"\ninterface = "eth0"\n')
    p = cli("run", "quickstart", "--backend", "testbed", "--inventory", str(inv), "--dry-run")
    assert p.returncode == 2 and "hosts[0].role" in p.stderr and "allowed: sender" in p.stderr
    p = cli("run", "quickstart", "--backend", "testbed", "--dry-run")
    assert p.returncode == 2 and "--inventory" in p.stderr
    p = cli("run", "quickstart", "--inventory", str(inv))
    assert p.returncode == 2 and "only the testbed backend" in p.stderr


def test_dry_run_of_fig8_prints_every_host_and_connects_nowhere():
    p = cli("run", "cubic-fig8-intra-fairness", "--backend", "testbed", "--inventory", str(GENI), "--dry-run", "--set", "flows[0].cca=bic", check=True)
    out = p.stdout
    for h in ("client1", "client2", "router1", "router2", "server1", "server2", "client3", "server4"):
        assert f"== {h} (" in out
    assert "set_root_qdisc eth5 tbf rate 403733333bit" in out  # 400 Mbps as Ethernet frames, on router1's interface
    assert "netem delay 82000us" in out  # the RTT on each receiver's ACK path
    assert "iperf3 -c 10.10.11.2 -p 5201 -C bic" in out and "iperf3 -c 10.10.12.2 -p 5202 -C bic" in out
    assert "modprobe tcp_bic" in out and "set_sysctl net.ipv4.tcp_sack 1" in out
    assert "restore_all" in out and "start watchdog" in out
    assert out.count("not used by this run") == 4  # client3, client4, server3, server4


def test_sweep_dry_run_lists_every_run():
    p = cli("reproduce", "cubic-fig8-intra-fairness", "--backend", "testbed", "--inventory", str(GENI), "--dry-run", check=True)
    assert "# 80 runs on geni-fig8" in p.stdout and "# run 80/80 (cca=reno, rtt=324ms" in p.stdout
    assert "[server1] set_root_qdisc eth1 netem delay 42000us" in p.stdout


def test_testbed_refusals_name_the_field():
    tb = TestbedBackend(MINIMAL)
    with pytest.raises(ScenarioError) as e:
        tb.plan(tb.load(TWO_FLOWS + '[network.qdisc]\nkind = "codel"\n'))
    assert e.value.field == "network.qdisc"
    with pytest.raises(ScenarioError) as e:
        tb.plan(tb.load(TWO_FLOWS.replace('cca = "reno"', 'cca = "reno"\ntcp = { initial_cwnd = 4 }')))
    assert e.value.field == "flows[0].tcp.initial_cwnd"
    # Two flows on one sender host that need different sysctls cannot share it.
    with pytest.raises(ScenarioError) as e:
        tb.plan(tb.load(TWO_FLOWS.replace('cca = "cubic"', 'cca = "cubic"\ntcp = { sack = false }')))
    assert "same host a" in str(e.value)
    with pytest.raises(ScenarioError) as e:
        tb.load(TWO_FLOWS.replace('"cubic"', '"cubicc"'))
    assert e.value.field == "flows[1].cca"


def test_an_unreachable_host_is_refused_naming_it(tmp_path):
    inv = tmp_path / "inv.toml"
    # A port nothing listens on, on this machine's loopback: refused at once.
    inv.write_text('[defaults]\nport = 9\nconnect_timeout = "2s"\nknown_hosts = false\n'
                   '[[hosts]]\nname = "a"\nhost = "127.0.0.1"\nrole = "sender"\ninterface = "eth1"\n'
                   '[[hosts]]\nname = "b"\nhost = "127.0.0.1"\nrole = "receiver"\ninterface = "eth1"\naddress = "10.0.0.2"\n'
                   '[[hosts]]\nname = "r"\nhost = "127.0.0.1"\nrole = "router"\ninterface = "eth2"\nbottleneck = true\n')
    sc = tmp_path / "two.toml"
    sc.write_text(TWO_FLOWS)
    p = cli("run", str(sc), "--backend", "testbed", "--inventory", str(inv), "--no-save")
    assert p.returncode == 2, p.stderr
    assert "unreachable" in p.stderr and "a (root@127.0.0.1:9)" in p.stderr


# ---- end to end, on emulated hosts ----

REASON = unavailable()
needs_hosts = pytest.mark.skipif(REASON is not None, reason=f"emulated testbed unavailable: {REASON}")


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    tb = EmulatedTestbed(tmp_path_factory.mktemp("testbed")).start()
    (tb.dir / "two.toml").write_text(TWO_FLOWS)
    (tb.dir / "sweep.toml").write_text(SWEEP)
    tb.before = tb.state()
    yield tb
    tb.stop()


def _left_behind(tb) -> dict:
    after = tb.settled_state()
    return {h: (tb.before[h], after[h]) for h in list(HOSTS) + ["scratch"] if tb.before[h] != after[h]}


@needs_hosts
def test_a_two_flow_run_on_the_hosts_leaves_nothing_behind(testbed):
    from ccarena.results.result import read_record

    p = testbed.ccarena("run", "two.toml", "--backend", "testbed", "--inventory", "inventory.toml", "--out", "run1")
    assert p.returncode == 0, p.stderr
    assert "[testbed backend, on emulated-dumbbell" in p.stdout
    rec = read_record(testbed.dir / "run1")
    assert not _left_behind(testbed)
    assert rec["backend"] == "testbed"
    tb = rec["testbed"]
    assert tb["inventory"]["name"] == "emulated-dumbbell" and tb["kernel"]
    assert tb["hosts"]["L"]["qdiscs"][0]["kind"] == "tbf"  # read back while the run was set up
    assert tb["hosts"]["s0"]["sysctls"]["net.ipv4.tcp_no_metrics_save"] == "1"
    # Offloads follow the scenario's [hosts] tso (on by default, as stock Linux).
    assert tb["hosts"]["s0"]["offloads"] == {"tso": "on", "gso": "on", "gro": "on"}
    assert set(tb["hosts"]) == set(HOSTS) and all("clock_offset_ns" in h for h in tb["hosts"].values())
    assert [f["sender"] for f in tb["flows"]] == ["s0", "s1"] and [f["receiver"] for f in tb["flows"]] == ["r0", "r1"]
    flows = rec["flows"]
    assert [f["cca"] for f in flows] == ["reno", "cubic"]
    # Both flows moved data through the 50 Mbps bottleneck, and the samples came from ss on the senders.
    mbps = [(f["counters"]["delivered_at_window_end"] - f["counters"]["delivered_at_window_start"]) * 8 / 4e6 for f in flows]
    assert all(m > 1 for m in mbps) and 25 < sum(mbps) < 55, mbps
    assert max(rec["flow_series"][0]["cwnd"]) > 0 and max(rec["queue_series"]["bytes_out"]) > 0
    # The minimum RTT the sender saw is the flow's RTT, added on the receiver by the
    # delay program, plus at most a full queue (1 BDP: 40 ms): the second flow may
    # never see the queue the first one keeps filled (50.5 ms in one CI run).
    assert 19_000 <= flows[0]["min_rtt_us"] <= 30_000 and 39_000 <= flows[1]["min_rtt_us"] <= 80_000


@needs_hosts
def test_a_small_sweep_lands_in_the_store_and_resumes(testbed):
    import json

    args = ("sweep", "sweep.toml", "--backend", "testbed", "--inventory", "inventory.toml", "--out", "results", "--json")
    p = testbed.ccarena(*args)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["computed"] == 2
    assert not _left_behind(testbed)
    p = testbed.ccarena(*args)
    assert p.returncode == 0 and json.loads(p.stdout)["computed"] == 0 and json.loads(p.stdout)["cached"] == 2
    from ccarena.results.store import load

    res = load(testbed.dir / "results")
    runs = res.runs[res.runs.status == "ok"]
    assert len(runs) == 2
    # The same sweep on the simulator is a different experiment run: its run ids differ.
    p = cli("sweep", str(testbed.dir / "sweep.toml"), "--out", str(testbed.dir / "results"), "--json", "-j", "1")
    assert p.returncode == 0 and json.loads(p.stdout)["computed"] == 2, p.stderr


@needs_hosts
def test_a_missing_interface_is_refused_before_anything_changes(testbed):
    (testbed.dir / "bad.toml").write_text(testbed.inventory_text(r1={"interface": '"eth9"'}))
    p = testbed.ccarena("run", "two.toml", "--backend", "testbed", "--inventory", "bad.toml", "--no-save")
    assert p.returncode == 2 and "r1 (root@" in p.stderr and "interface eth9 is missing" in p.stderr, p.stderr
    assert not _left_behind(testbed)


@needs_hosts
@pytest.mark.slow
def test_validate_compares_the_simulator_with_the_hosts(testbed):
    import json

    p = testbed.ccarena("validate", "--suite", "ci", "--duration", "5", "--backend", "testbed", "--inventory", "inventory.toml",
                        "--out", "validate", "--json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert {r["case"] for r in rows} == {"reno-50M-40v40ms", "cubic-50M-40v40ms"}
    assert all(r["kernel"] == r["kernel"] for r in rows if r["metric"] == "utilization")  # measured, not NaN
    assert list((testbed.dir / "validate").glob("ci-*/runs/reno-50M-40v40ms/testbed-seed1"))
    assert not _left_behind(testbed)
