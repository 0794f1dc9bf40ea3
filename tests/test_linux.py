"""The linux backend. Tests that run the kernel need root, network namespaces
and the backend's tools (iperf3, iptables-legacy, the delay program built by
`make setup`); without them they are skipped with the reason. The rest
(validation, parsing, the no-root message) always run."""

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ccarena.backends.linux import run_linux
from ccarena.backends.linux.host import LinuxBackendUnavailable, bpf_ccas, check_host, kernel_ccas, linux_cca_names
from ccarena.backends.linux.sampling import parse_ss
from ccarena.backends.linux.topology import parse_netstat
from ccarena import load_scenario
from ccarena.results.result import read_record
from ccarena.scenario import Scenario, ScenarioError
from conftest import cli


def _linux_reason():
    try:
        check_host(need_delay=True)
    except LinuxBackendUnavailable as e:
        return str(e)
    return None


REASON = _linux_reason()
needs_linux = pytest.mark.skipif(REASON is not None, reason=f"linux backend unavailable: {REASON}")

CI_SCENARIO = """
name = "ci-linux"
[network]
bottleneck_rate = "50Mbps"
buffer = "1bdp"
[[flows]]
cca = "reno"
rtt = "40ms"
[[flows]]
cca = "cubic"
rtt = "40ms"
[run]
duration = "10s"
warmup = "2s"
"""

BASE = {
    "network": {"bottleneck_rate": "50Mbps", "buffer": "100p"},
    "flows": [{"cca": "reno", "rtt": "20ms"}],
    "run": {"duration": "5s"},
}


# ---- always ----
def test_launch_lead_is_iperf3s_start_up_unless_the_flow_starts_as_iperf3():
    from ccarena.backends.linux.mapping import launch_lead_ns

    assert launch_lead_ns({"rtt": 20_000_000, "startup": "iperf3"}) == 0
    # Four round trips at the propagation RTT (data_delay included), plus 15 ms:
    # the first data segment leaves one RTT after `start`, as the simulator's
    # does after the handshake it begins at `start`.
    assert launch_lead_ns({"rtt": 20_000_000}) == 95_000_000
    assert launch_lead_ns({"rtt": 2_000_000, "data_delay": 200_000_000, "startup": "immediate"}) == 823_000_000



def test_a_data_leg_splits_the_rtt_and_draws_its_delay_as_netem():
    """A flow with data_delay or jitter gets half its RTT on each leg (as the
    simulator splits it) and its data leg delayed by half the RTT plus
    data_delay, varied by the jitter, in R: its own queue of the delay
    program (seeded per flow and run) or netem on R's port towards it."""
    from ccarena.backends.linux.topology import DATA_QUEUE_BASE, Dumbbell

    plain = {"rtt": 20_000_000, "jitter": None}
    leg = {"rtt": 2_000_000, "data_delay": 200_000_000, "jitter": {"jitter": 200_000_000, "distribution": "uniform", "reorder": True}}
    normal = {"rtt": 10_000_000, "jitter": {"jitter": 3_000_000, "distribution": "normal", "reorder": False}}
    d = Dumbbell("t", [plain, leg, normal], 400_000_000, 2_000_000, 50_000, seed=2)
    args = d.delay_args()
    assert args[:3] == ["0:20000", "1:1000", "2:5000"]
    q1, q2 = args[3].split(":"), args[4].split(":")
    assert q1[:5] == [str(DATA_QUEUE_BASE + 1), "201000", "200000", "u", "1"]
    assert q2[:5] == [str(DATA_QUEUE_BASE + 2), "5000", "3000", "n", "0"]
    assert q1[5] != q2[5] and q1[5] != Dumbbell("t", [plain, leg], 1, 1, 1, seed=3).delay_args()[2].split(":")[5]
    assert d.nfqueue_rules() == [
        "iptables-legacy -A FORWARD -i r0 -j NFQUEUE --queue-num 0",
        "iptables-legacy -A FORWARD -i r1 -j NFQUEUE --queue-num 1",
        "iptables-legacy -A FORWARD -i r2 -j NFQUEUE --queue-num 2",
        f"iptables-legacy -A FORWARD -o r1 -j NFQUEUE --queue-num {DATA_QUEUE_BASE + 1}",
        f"iptables-legacy -A FORWARD -o r2 -j NFQUEUE --queue-num {DATA_QUEUE_BASE + 2}",
    ]
    netem = [" ".join(c) for c in d.netem_commands()]
    assert netem[0].endswith("dev eth0 root netem delay 20000us limit 1000000")
    assert "-n ccarena-t-R qdisc add dev r1 root netem delay 201000us 200000us limit 1000000" in netem[2]
    assert netem[4].endswith("dev r2 root netem delay 5000us 3000us distribution normal limit 1000000")


def test_the_linux_backend_takes_data_delay_and_jitter_but_not_reverse_flows():
    from ccarena.backends.linux.backend import check_scenario

    flows = [{"cca": "reno", "rtt": "2ms", "data_delay": "50ms", "jitter": "10ms"}]
    check_scenario(load_scenario({**BASE, "flows": flows}, backend="linux"))
    with pytest.raises(ScenarioError) as e:
        load_scenario({**BASE, "flows": [{"cca": "reno", "rtt": "20ms", "direction": "reverse"}]}, backend="linux")
    assert "flows[].direction = reverse" in str(e.value) and "flows[].jitter" not in str(e.value).split(";")[1]
    # The testbed background set-up (24 flows behind 200 ms +- 200 ms) runs there.
    sc = load_scenario("cubic-fig9-inter-rtt-fairness", backend="linux").with_overrides({"background": "testbed"})
    assert check_scenario(sc) == [] and len(sc.engine["flows"]) == 26
    # The simulator's model of an emulator's lateness is not something the kernel's path takes.
    notes = check_scenario(sc.with_overrides({"network.delay_noise": "none"}))
    assert len(notes) == 1 and notes[0].startswith("network.delay_noise is not applied")
    # Nor does its TCP take another kernel's deferral rule.
    notes = check_scenario(sc.with_overrides({"hosts.tso_defer": "half_rtt"}))
    assert len(notes) == 1 and notes[0].startswith("hosts.tso_defer = 'half_rtt' is not applied")


def test_validation_behind_a_background_compares_the_flows_under_study():
    from ccarena.experiments.crosscheck import metrics_of, validation_cases

    cases, reps = validation_cases("testbed-background", duration_s=20)
    assert reps == 3 and [cid for cid, _ in cases] == ["reno-400M-162v16ms-2MB", "cubic-400M-162v16ms-2MB"]
    doc = cases[0][1]
    assert doc["background"] == "testbed" and doc["network"]["buffer"] == "2MB"
    import ccarena

    r = ccarena.run({**doc, "run": {"duration": "8s", "warmup": "6s"}})
    m = metrics_of(r)
    ours = r.flows[~r.flows.background]
    assert len(ours) == 2 and len(r.flows) == 26
    assert m["share0"] == pytest.approx(ours.throughput_mbps.iloc[0] / ours.throughput_mbps.sum())
    assert m["retrans"] == ours.window_retransmissions.sum()


def test_flows_are_sampled_at_once_and_missing_ones_give_none():
    from ccarena.backends.linux.sampling import sample_flows

    assert sample_flows([None, None], 5201) == [None, None]
    # A namespace that does not exist: ss fails, the sample is missing, nothing raises.
    assert sample_flows(["ccarena-no-such-namespace", None], 5201) == [None, None]


def test_linux_algorithms_are_validated_for_the_linux_backend():
    with pytest.raises(ScenarioError) as e:
        load_scenario({**BASE, "flows": [{"cca": "vegass", "rtt": "20ms"}]}, backend="linux")
    assert e.value.field == "flows[0].cca" and "linux backend" in str(e.value) and "allowed:" in str(e.value)
    with pytest.raises(ScenarioError) as e:
        load_scenario({**BASE, "flows": [{"cca": "cubic", "rtt": "20ms", "cca_params": {"hystart": False}}]}, backend="linux")
    assert e.value.field == "flows[0].cca_params"
    for name in kernel_ccas():
        load_scenario({**BASE, "flows": [{"cca": name, "rtt": "20ms"}]}, backend="linux")
    assert "newreno" in linux_cca_names() or "reno" not in kernel_ccas()


def test_linux_backend_refuses_an_aqm():
    from ccarena.backends.linux.backend import check_scenario

    sc = load_scenario({**BASE, "network": {**BASE["network"], "qdisc": "fq_codel"}}, backend="linux")
    with pytest.raises(ScenarioError) as e:
        check_scenario(sc)
    assert e.value.field == "network.qdisc" and "allowed: drop_tail" in str(e.value)
    check_scenario(load_scenario({**BASE, "network": {**BASE["network"], "qdisc": "drop_tail"}}, backend="linux"))


@pytest.mark.parametrize(
    "linux,field,fragment",
    [
        ({"offload": True}, "linux.offload", "allowed: force_rate, offloads, rps, tbf_burst"),
        ({"offloads": "yes"}, "linux.offloads", "true or false"),
        ({"tbf_burst": "100B"}, "linux.tbf_burst", "one full frame"),
    ],
)
def test_linux_options_name_the_field(linux, field, fragment):
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict({**BASE, "linux": linux})
    assert e.value.field == field and fragment in str(e.value)


def test_linux_options_defaults():
    sc = Scenario.from_dict({**BASE, "linux": {"offloads": True}})
    assert sc.meta.linux == {"offloads": True, "rps": True, "tbf_burst": 6250, "force_rate": False}  # 1 ms at 50 Mbps
    assert "_linux" not in json.loads(sc.engine_json())


def test_parse_ss_line():
    line = (
        "ESTAB 0 0 198.18.0.1:40000 198.19.0.1:5201 cubic wscale:7,7 rto:244 rtt:43.5/2.1 ato:40 mss:1448 pmtu:1500 "
        "rcvmss:536 advmss:1448 cwnd:120 ssthresh:95 bytes_sent:1000 bytes_retrans:100 bytes_acked:800 segs_out:10 "
        "segs_in:5 data_segs_out:9 send 30Mbps lastsnd:1 pacing_rate 36.2Mbps delivery_rate 24.1Mbps delivered:7 "
        "busy:100ms unacked:30 retrans:2/17 lost:3 sacked:5 rcv_space:14480 minrtt:40.1"
    )
    d = parse_ss(line)
    assert d["cwnd"] == 120 and d["ssthresh"] == 95 and d["srtt_us"] == 43500 and d["min_rtt_us"] == 40100
    assert d["bytes_acked"] == 800 and d["retrans_out"] == 2 and d["total_retrans"] == 17
    assert d["unacked"] == 30 and d["lost"] == 3 and d["sacked"] == 5
    assert d["pacing_rate_bps"] == 36_200_000 and d["delivery_rate_bps"] == 24_100_000
    assert "cc_bw_bps" not in d  # CUBIC reports no model


def test_parse_ss_reads_what_bbr_reports_of_its_model():
    # As this machine's ss prints it (bw in bit/s without a unit), and as older ss versions do.
    line = ("ESTAB 0 159280 198.18.0.1:51490 198.19.0.1:5201 bbr wscale:12,12 rto:212 rtt:10.307/0.553 mss:1448 cwnd:26 "
            "bbr:(bw:12313664bps,mrtt:10.21,pacing_gain:2.88672,cwnd_gain:2.88672) send 29221306bps pacing_rate 35190632bps")
    d = parse_ss(line)
    assert (d["cc_bw_bps"], d["cc_min_rtt_us"], d["cc_pacing_gain"], d["cc_cwnd_gain"]) == (12_313_664, 10_210, 739, 739)
    d = parse_ss("bbr wscale:7,7 cwnd:10 bbr:(bw:1.2Mbps,mrtt:40.1) pacing_rate 2.5Mbps")
    assert (d["cc_bw_bps"], d["cc_min_rtt_us"]) == (1_200_000, 40_100) and "cc_pacing_gain" not in d


def test_parse_netstat():
    text = "Tcp: RtoAlgorithm RetransSegs\nTcp: 1 42\nTcpExt: TCPTimeouts TCPLossProbes\nTcpExt: 3 4\n"
    assert parse_netstat(text) == {"TcpRtoAlgorithm": 1, "TcpRetransSegs": 42, "TcpExtTCPTimeouts": 3, "TcpExtTCPLossProbes": 4}


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to drop to an unprivileged user")
def test_without_root_one_line_and_exit_2():
    import tempfile

    d = Path(tempfile.mkdtemp())
    os.chmod(d, 0o755)
    f = d / "s.toml"
    f.write_text(CI_SCENARIO)
    os.chmod(f, 0o644)
    p = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m", "ccarena.cli", "run", str(f), "--backend", "linux", "--no-save"],
        capture_output=True, text=True, cwd=d, env={**os.environ, "HOME": str(d)},
    )
    shutil.rmtree(d, ignore_errors=True)
    if "Permission denied" in p.stderr or "ModuleNotFoundError" in p.stderr:
        pytest.skip("the package is not readable by an unprivileged user here")
    assert p.returncode == 2, p.stderr
    assert "needs root" in p.stderr and "Traceback" not in p.stderr
    assert len([line for line in p.stderr.splitlines() if line.strip()]) == 1


# ---- on the kernel ----

def _ours(pid: int) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(f"ccarena-{pid}-")]


def _cmdline(d: Path) -> str:
    try:
        return (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _is_iperf3_client(cmdline: str) -> bool:
    words = cmdline.split()
    return bool(words) and words[0].endswith("iperf3") and "-c" in words


def _ancestor(pid: int, ancestor: int) -> bool:
    """Whether `ancestor` is `pid`'s parent, grandparent, ..."""
    while pid > 1:
        try:
            pid = int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid == ancestor:
            return True
    return False


def _dead_owners() -> list[str]:
    """ccarena namespaces whose owner process is gone."""
    from ccarena.backends.linux.cleanup import our_namespaces, owner_alive, owner_pid

    return [ns for ns in our_namespaces() if not owner_alive(owner_pid(ns))]


def _stray_helpers() -> list[str]:
    """iperf3 or delay processes outside the host's namespace and outside the
    namespaces of live runs (another run may be going on concurrently)."""
    from ccarena.backends.linux.cleanup import our_namespaces, owner_alive, owner_pid

    mine = os.readlink("/proc/self/ns/net")
    live = set()
    for ns in our_namespaces():
        if owner_alive(owner_pid(ns)):
            try:
                live.add(f"net:[{os.stat(f'/run/netns/{ns}').st_ino}]")
            except OSError:
                pass
    stray = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            comm = (d / "comm").read_text().strip()
            net = os.readlink(d / "ns/net")
            if comm in ("iperf3", "ccarena-delay") and net != mine and net not in live:
                stray.append(f"{d.name} {comm}")
        except OSError:
            pass
    return stray


@needs_linux
def test_ci_short_run_reno_and_cubic(tmp_path):
    """CI's linux-backend check: 2 flows (reno, cubic), 50 Mbps, 10 s."""
    f = tmp_path / "ci.toml"
    f.write_text(CI_SCENARIO)
    p = cli("run", str(f), "--backend", "linux", "--json", "--out", str(tmp_path / "res"), check=True)
    doc = json.loads(p.stdout)
    assert doc["backend"] == "linux"
    assert [fl["cca"] for fl in doc["flows"]] == ["reno", "cubic"]
    assert 0.9 < doc["utilization"] <= 1.02, doc["utilization"]
    for fl in doc["flows"]:
        assert fl["throughput_mbps"] > 5
        assert 40 <= fl["mean_srtt_ms"] < 200
        # At least the throughput bound's worth over the run (5 Mbit/s x 10 s
        # = 4,316 segments): how two flows share 50 Mbit/s in 10 s is a
        # lottery of their start (kernel runs give 8,500-33,000 per flow).
        assert fl["segments_sent"] > 4_000
    rec = read_record(tmp_path / "res")
    # The delay program holds each flow's ACKs for its RTT: min RTT within 1 ms of 40 ms.
    for s in rec["flow_series"]:
        assert 39.5 < s["min_rtt_us"][-1] / 1000 < 41.0, s["min_rtt_us"][-1]
        assert len(s["t_ns"]) == 100
    assert rec["link"]["drops_queue"] > 0
    # tbf counts skbs: the one count there is fills both fields.
    assert rec["link"]["drops_queue_skbs"] == rec["link"]["drops_queue"]
    # How slow start ended, from the sender namespaces' HyStart counters:
    # Reno has no HyStart; CUBIC's exits, if any, carry their cwnd.
    reno, cubic = (fl["counters"] for fl in rec["flows"])
    assert reno["hystart_train"] == reno["hystart_delay"] == reno["hystart_train_cwnd"] == 0
    for kind in ("train", "delay"):
        assert (cubic[f"hystart_{kind}"] > 0) == (cubic[f"hystart_{kind}_cwnd"] >= 16 * cubic[f"hystart_{kind}"] > 0)
    # Each receiver's own counters: it received in order (header-predicted
    # segments or coalesced ones) and found losses' holes (out-of-order queue).
    receivers = rec["linux"]["receiver_counters"]
    assert len(receivers) == 2
    for c in receivers:
        assert c.get("TCPHPHits", 0) + c.get("TCPRcvCoalesce", 0) > 0, c
        assert all(v > 0 and not k.startswith("TcpExt") for k, v in c.items()), c
    assert sum(c.get("TCPOFOQueue", 0) for c in receivers) > 0, receivers
    # ... and the flows' counters carry them as the simulator counts its own.
    for fl, c in zip(rec["flows"], receivers):
        assert (fl["counters"]["ofo_skbs"], fl["counters"]["acks_compressed"]) == (c.get("TCPOFOQueue", 0), c.get("TCPAckCompressed", 0))
    assert not _dead_owners() and not _stray_helpers()
    # The saved result loads back and has the simulator's tables.
    import ccarena

    back = ccarena.load_result(tmp_path / "res")
    assert {"cwnd", "srtt_ms", "throughput_mbps"} <= set(back.timeseries.columns)


@needs_linux
@pytest.mark.skipif(not {"bic", "highspeed"} <= set(bpf_ccas()), reason="BPF algorithms not built (make setup needs clang, bpftool, libbpf-dev)")
def test_bpf_algorithms_run_and_are_unregistered(tmp_path):
    f = tmp_path / "bpf.toml"
    f.write_text(CI_SCENARIO.replace('"reno"', '"bic"').replace('"cubic"', '"highspeed"').replace('"10s"', '"5s"').replace('"2s"', '"1s"'))
    from ccarena.backends.linux.cleanup import live_runs

    # The last run out unregisters shared BPF algorithms: wait until runs of
    # earlier tests (or their watchers) are gone, so this run is the last.
    _wait_for(lambda: not live_runs(), 15)
    before = set(kernel_ccas())
    doc = json.loads(cli("run", str(f), "--backend", "linux", "--json", "--no-save", check=True).stdout)
    assert [fl["cca"] for fl in doc["flows"]] == ["bic", "highspeed"]
    assert doc["utilization"] > 0.8 and all(fl["throughput_mbps"] > 2 for fl in doc["flows"])
    _wait_for(lambda: set(kernel_ccas()) == before, 5)
    assert set(kernel_ccas()) == before  # registered for the run only


@needs_linux
@pytest.mark.skipif(shutil.which("clang") is None or not (Path(__file__).parents[1] / "target/bpf/vmlinux.h").exists(),
                    reason="no clang or no target/bpf/vmlinux.h (make setup builds the BPF algorithms)")
def test_bpf_guard_repairs_windows_from_skipped_hooks(tmp_path):
    """The kernel sometimes skips a BPF algorithm's hook and hands the stack
    the socket's address bits as ssthresh (docs/linux-backend.md, "Known
    fault"). A test build of BIC that answers every third ssthresh that way:
    the guard in bpf/ccarena_ca.h repairs each, the run reports how many, and
    no window leaves what the path allows (without the guard the first repair
    would be a window of hundreds of millions of segments)."""
    from ccarena.backends.linux.cleanup import live_runs
    from ccarena.backends.linux.host import BIN_DIR
    import pandas as pd

    root = Path(__file__).parents[1]
    arch = {"x86_64": "x86", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
    obj = BIN_DIR / "bic_skipped.bpf.o"
    subprocess.run(["clang", "-O2", "-g", "-target", "bpf", f"-D__TARGET_ARCH_{arch}", "-DCCARENA_INJECT_SKIPPED_HOOKS",
                    f"-I{root / 'target/bpf'}", "-c", str(root / "bpf/bic.bpf.c"), "-o", str(obj)], check=True)
    try:
        f = tmp_path / "skipped.toml"
        f.write_text(CI_SCENARIO.replace('"reno"', '"bic_skipped"').replace('"cubic"', '"bic_skipped"').replace('"10s"', '"6s"').replace('"2s"', '"1s"'))
        _wait_for(lambda: not live_runs(), 15)
        cli("run", str(f), "--backend", "linux", "--out", str(tmp_path / "res"), check=True)
    finally:
        obj.unlink()
    rec = read_record(tmp_path / "res")
    assert rec["linux"]["bpf_hook_repairs"] > 0
    assert any("guard put back" in n for n in rec["linux"]["notes"])
    series = pd.read_parquet(tmp_path / "res" / "timeseries.parquet")
    assert 0 < series.cwnd.max() < 5_000


def test_step_queue_maps_onto_red_and_dctcp_receivers_run_dctcp():
    from ccarena.backends.linux.mapping import receiver_sysctls, step_red_args

    # K = 20 packets = 20 full frames; max one byte above; the smallest burst tc takes.
    args = step_red_args({"kind": "step", "threshold": {"packets": 20}}, 151_400, 50_000_000)
    assert args.startswith("red limit 151400 min 30280 max 30281 avpkt 1514 burst 20 probability 1.0 ") and args.endswith(" ecn")
    assert "min 30000 max 30001" in step_red_args({"kind": "step", "threshold": {"bytes": 30_000}}, 151_400, 50_000_000)
    assert receiver_sysctls({"cca": "dctcp", "tcp": {}})["net.ipv4.tcp_congestion_control"] == "dctcp"
    assert "net.ipv4.tcp_congestion_control" not in receiver_sysctls({"cca": "cubic", "tcp": {}})


@needs_linux
@pytest.mark.skipif("dctcp" not in bpf_ccas() and "dctcp" not in kernel_ccas(), reason="no dctcp: neither the kernel's nor the BPF one (make setup)")
def test_dctcp_runs_on_linux(tmp_path):
    """DCTCP (the kernel's, or the project's BPF struct_ops) for a few seconds:
    over the step queue where the kernel has RED (CE marks, no loss), else over
    drop-tail, where without marks it runs as Reno."""
    from ccarena.backends.linux.cleanup import live_runs
    from ccarena.backends.linux.host import has_red

    step = has_red()
    f = tmp_path / "dctcp.toml"
    text = CI_SCENARIO.replace('"reno"', '"dctcp"').replace('"cubic"', '"dctcp"').replace('"10s"', '"5s"').replace('"2s"', '"1s"')
    if step:
        text = text.replace('buffer = "1bdp"', 'buffer = "1bdp"\nqdisc = { kind = "step", threshold = "20p" }')
    f.write_text(text)
    _wait_for(lambda: not live_runs(), 15)
    doc = json.loads(cli("run", str(f), "--backend", "linux", "--json", "--no-save", check=True).stdout)
    assert [fl["cca"] for fl in doc["flows"]] == ["dctcp", "dctcp"]
    assert doc["utilization"] > 0.8 and all(fl["throughput_mbps"] > 2 for fl in doc["flows"])
    if step:
        assert doc["ce_marks"] > 0 and all(fl["retransmissions"] == 0 for fl in doc["flows"])


def _wait_for(condition, seconds: float) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline and not condition():
        time.sleep(0.1)


def _start_run(tmp_path, duration="30s"):
    f = tmp_path / "long.toml"
    f.write_text(CI_SCENARIO.replace('"10s"', f'"{duration}"'))
    proc = subprocess.Popen([sys.executable, "-m", "ccarena.cli", "run", str(f), "--backend", "linux", "--no-save"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while time.time() < deadline and len(_ours(proc.pid)) < 6:
        time.sleep(0.2)
    time.sleep(2)  # flows running
    assert len(_ours(proc.pid)) == 6, "the run did not set up"
    return proc


@needs_linux
def test_sigint_tears_everything_down(tmp_path):
    proc = _start_run(tmp_path)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert not _ours(proc.pid) and not _stray_helpers()


@needs_linux
def test_sigkill_then_cleanup_leaves_nothing(tmp_path):
    proc = _start_run(tmp_path)
    # The run's watcher would tear it down (tests/test_linux_kill.py); killed
    # with it, what the run left stays until `ccarena cleanup` or the next run.
    watchers = [int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit() and _cmdline(d).endswith(f"ccarena.backends.linux.supervisor {proc.pid}")]
    assert len(watchers) == 1
    os.kill(watchers[0], signal.SIGKILL)
    proc.kill()
    proc.wait(timeout=10)
    time.sleep(0.5)
    assert not _stray_helpers(), "helpers must die with the ccarena process"
    assert list(Path("/tmp").glob(f"ccarena-linux-{proc.pid}-*"))
    p = cli("cleanup", check=True)
    assert "removed" in p.stdout and "namespaces" in p.stdout and "1 temporary directories" in p.stdout
    assert not _ours(proc.pid) and not _stray_helpers() and not list(Path("/tmp").glob(f"ccarena-linux-{proc.pid}-*"))
    assert "nothing to clean up" in cli("cleanup", check=True).stdout


@needs_linux
# iperf3 tests launched together: about 4 x 50 ms apart, and in about one
# run in ten a few RTTs more (0.43 s measured: the 60 ms flow's client
# answering late on the shared 2-core machine). CUBIC's HyStart leaves slow
# start before the first flow overflows the queue: with Reno one run set the
# flows 1.29 s apart, most likely a packet of the second flow's handshake
# lost in that overshoot and resent by its 1 s retransmission timer.
@pytest.mark.parametrize("startup, apart", [("immediate", (0.0, 0.04)), ("iperf3", (0.15, 0.5))])
def test_flows_start_together_or_as_iperf3_tests(tmp_path, startup, apart):
    """Flows of 10 and 60 ms started at 0 begin their tests (`data_start_s`:
    iperf3's server starts its clock one RTT before the first data segment
    reaches it) within a few ms of each other and of 0 (each iperf3 client
    launched its start-up early), or, as iperf3 tests launched together,
    4 x 50 ms apart."""
    f = tmp_path / "s.toml"
    f.write_text(f'name = "starts"\nstartup = "{startup}"\n[network]\nbottleneck_rate = "50Mbps"\nbuffer = "100p"\n'
                 '[[flows]]\ncca = "cubic"\nrtt = "10ms"\n[[flows]]\ncca = "cubic"\nrtt = "60ms"\n[run]\nduration = "3s"\n')
    cli("run", str(f), "--backend", "linux", "--out", str(tmp_path / "res"), check=True)
    starts = read_record(tmp_path / "res")["linux"]["data_start_s"]
    assert apart[0] <= abs(starts[1] - starts[0]) <= apart[1], starts
    if startup == "immediate":
        assert all(abs(s) < 0.03 for s in starts), starts


@needs_linux
def test_clients_are_launched_at_the_simulators_jittered_starts(tmp_path):
    """With run.start_jitter the linux backend launches each client at the
    instant the simulator starts that flow for the same seed (seed 3 of
    300 ms: 252.8 ms and 9.5 ms), released from a waiting shell rather than
    forked one after another in flow order: the second flow's test begins
    243 ms before the first's, within the few ms iperf3's exchange varies
    (at 1 Gbit/s with 100 packets of buffer, so that the first flow's
    messages do not wait long behind the second's data)."""
    doc = {"name": "launch", "startup": "iperf3", "network": {"bottleneck_rate": "1Gbps", "buffer": "100p"},
           "flows": [{"cca": "cubic", "rtt": "10ms", "count": 2}], "run": {"duration": "3s", "seed": 3, "start_jitter": "300ms"}}
    planned = Scenario.from_dict(doc).flow_starts()
    assert [round(s / 1e6, 1) for s in planned] == [252.8, 9.5]
    r = run_linux(doc)
    assert [f["start_ns"] for f in r.record["flows"]] == planned
    starts = r.record["linux"]["data_start_s"]
    assert starts[0] - starts[1] == pytest.approx((planned[0] - planned[1]) / 1e9, abs=0.015), starts


@needs_linux
def test_data_leg_delay_and_jitter_on_the_kernel(tmp_path):
    """A 20 ms flow with 30 ms more on its data leg, +- 10 ms, behind a
    30-packet queue (18 ms at 20 Mbit/s): the kernel's smallest RTT is the
    legs' sum at the jitter's low end (10 + 30 ms), its mean the nominal
    50 ms plus some queueing."""
    f = tmp_path / "j.toml"
    f.write_text('name = "jitter"\n[network]\nbottleneck_rate = "20Mbps"\nbuffer = "30p"\n'
                 '[[flows]]\ncca = "reno"\nrtt = "20ms"\ndata_delay = "30ms"\njitter = "10ms"\n[run]\nduration = "6s"\n')
    p = cli("run", str(f), "--backend", "linux", "--json", "--out", str(tmp_path / "res"), check=True)
    doc = json.loads(p.stdout)
    assert doc["flows"][0]["throughput_mbps"] > 1
    rec = read_record(tmp_path / "res")
    (s,) = rec["flow_series"]
    min_rtt_ms = s["min_rtt_us"][-1] / 1000
    assert 39.0 < min_rtt_ms < 44.0, min_rtt_ms
    assert 45 < doc["flows"][0]["mean_srtt_ms"] < 90, doc["flows"][0]["mean_srtt_ms"]
    assert not _dead_owners() and not _stray_helpers()


@needs_linux
def test_validate_ci_set(tmp_path):
    p = cli("validate", "--suite", "ci", "--duration", "5", "--out", str(tmp_path), check=True)
    assert "reno-50M-40v40ms" in p.stdout and "cubic-50M-40v40ms" in p.stdout
    (d,) = list(tmp_path.iterdir())
    table = json.loads((d / "table.json").read_text())
    assert {r["metric"] for r in table} == {"share0", "ratio", "utilization", "retrans", "rtx_per_event", "drops_per_event", "both_lost", "seg_per_skb",
                                            "seg_per_skb_bottleneck", "acks_per_seg", "ofo_per_seg", "compressed_per_seg", "emulator_late_us",
                                            "machine_stalls_1ms", "steal_pct", "softirq_pct"}
    util = [r for r in table if r["metric"] == "utilization"]
    assert all(r["kernel"] > 0.85 and r["sim"] > 0.85 for r in util)
    # One kernel run a case, and the simulator's default twenty seeds.
    assert all(r["kernel_runs"] == 1 and r["sim_repetitions"] == 20 for r in util)
    # Both backends' hosts hand their devices super-packets (tcp_tso_autosize
    # allows about 5 segments at 50 Mbit/s) and acknowledge about every second segment.
    for r in table:
        if r["metric"] == "seg_per_skb":
            assert 1.3 < r["kernel"] < 8 and 1.3 < r["sim"] < 8, r
        # tbf's 4-frame bucket at 50 Mbit/s splits the larger of them.
        if r["metric"] == "seg_per_skb_bottleneck":
            assert 1 <= r["kernel"] < 8 and 1 <= r["sim"] < 8, r
        if r["metric"] == "acks_per_seg":
            assert 0.2 < r["kernel"] < 0.7 and 0.2 < r["sim"] < 0.7, r
        # What the receivers' ACK decisions met, on both backends: ACKs held
        # back only while out-of-order data waits (none in a lossless run).
        if r["metric"] in ("ofo_per_seg", "compressed_per_seg"):
            assert 0 <= r["kernel"] < 0.5 and 0 <= r["sim"] < 0.5, r
        # Each loss episode costs at least the segment it lost (NaN: none in a short run).
        if r["metric"] == "rtx_per_event" and r["kernel"] == r["kernel"]:
            assert r["kernel"] >= 1 and (r["sim"] != r["sim"] or r["sim"] >= 1), r
        # Every congestion event of a lone bottleneck follows a drop there
        # (an RTO may follow none): at least one skb per event on the whole.
        if r["metric"] == "drops_per_event" and r["kernel"] == r["kernel"]:
            assert r["kernel"] > 0.5 and (r["sim"] != r["sim"] or r["sim"] > 0.5), r
        # A share of loss episodes (NaN, null in JSON: no loss after the warm-up).
        if r["metric"] == "both_lost":
            assert all(v is None or v != v or 0 <= v <= 1 for v in (r["kernel"], r["sim"])), r
        # The testbed's own lateness: measured on the kernel only.
        if r["metric"] == "emulator_late_us":
            assert 0 < r["kernel"] < 5000 and r["sim"] is None, r
        if r["metric"] in ("steal_pct", "softirq_pct"):
            assert 0 <= r["kernel"] < 100 and r["sim"] is None, r
        if r["metric"] == "machine_stalls_1ms":
            assert 0 <= r["kernel"] < 1000 and r["sim"] is None, r
    assert "within the kernel's spread:" in p.stdout
    assert (d / "table.md").exists() and (d / "runs" / "reno-50M-40v40ms" / "linux-seed1" / "record.json.gz").exists()


@needs_linux
def test_validate_applies_overrides_to_both_backends(tmp_path):
    # Offloads off on both sides: one segment per skb on the kernel (ethtool
    # off) and in the simulator (hosts.tso), and the table says so.
    p = cli("validate", "--suite", "ci", "--duration", "4", "--set", "hosts.tso=false", "--out", str(tmp_path), check=True)
    (d,) = list(tmp_path.iterdir())
    table = json.loads((d / "table.json").read_text())
    for r in table:
        if r["metric"] == "seg_per_skb":
            assert r["sim"] == 1.0 and r["kernel"] < 1.2, r
    assert "`hosts.tso=False`" in (d / "table.md").read_text()


@needs_linux
def test_validate_reuses_stored_kernel_runs(tmp_path):
    # The kernel runs once; a second comparison reads them back and runs only
    # the simulator, with its own override (offloads off on the simulator).
    cli("validate", "--suite", "ci", "--case", "reno-*", "--duration", "3", "--reps", "2", "--out", str(tmp_path / "a"), check=True)
    (first,) = list((tmp_path / "a").iterdir())
    p = cli("validate", "--kernel-runs", str(first), "--set", "hosts.tso=false", "--sim-reps", "3", "--out", str(tmp_path / "b"), check=True)
    (second,) = list((tmp_path / "b").iterdir())
    # More simulator seeds than kernel runs: each is stored and counted.
    assert (second / "runs" / "reno-50M-40v40ms" / "sim-seed3").exists()
    assert "2 kernel repetitions, 3 simulator seeds" in (second / "table.md").read_text() and "rank test" not in p.stdout
    assert second.name.startswith("ci-") and not (second / "runs" / "reno-50M-40v40ms" / "linux-seed1").exists()
    before = {(r["case"], r["metric"]): r for r in json.loads((first / "table.json").read_text())}
    after = json.loads((second / "table.json").read_text())
    assert {r["case"] for r in after} == {"reno-50M-40v40ms"}
    for r in after:
        assert r["kernel"] == before[(r["case"], r["metric"])]["kernel"], r
        if r["metric"] == "seg_per_skb":
            assert r["sim"] == 1.0 and before[(r["case"], r["metric"])]["sim"] > 1.3, r
    assert "Kernel runs reused from" in (second / "table.md").read_text()
    assert all(r["sim_repetitions"] == 3 and r["repetitions"] == 2 for r in after)
    assert "within the kernel's spread:" in p.stdout


def test_validate_kernel_runs_must_be_a_stored_validation(tmp_path):
    p = cli("validate", "--kernel-runs", str(tmp_path))
    assert p.returncode == 2 and "--kernel-runs:" in p.stderr and "cases.json" in p.stderr and "Traceback" not in p.stderr
    p = cli("validate", "--kernel-runs", str(tmp_path), "--reps", "3")
    assert p.returncode == 2 and "--kernel-runs:" in p.stderr


def test_validate_case_patterns_name_the_cases():
    p = cli("validate", "--suite", "ci", "--case", "bbr-*")
    assert p.returncode == 2 and "--case: 'bbr-*' matches no case of suite ci; its cases: reno-50M-40v40ms, cubic-50M-40v40ms" in p.stderr


@needs_linux
def test_validate_runs_only_the_cases_asked_for(tmp_path):
    p = cli("validate", "--suite", "ci", "--case", "cubic-*", "--duration", "3", "--out", str(tmp_path), check=True)
    (d,) = list(tmp_path.iterdir())
    assert {r["case"] for r in json.loads((d / "table.json").read_text())} == {"cubic-50M-40v40ms"}
    assert "reno-50M-40v40ms" not in p.stdout and "Only the cases cubic-50M-40v40ms." in (d / "table.md").read_text()


def test_validate_rejects_unknown_set():
    p = cli("validate", "--suite", "nonesuch")
    assert p.returncode == 2 and "allowed: default" in p.stderr and "Traceback" not in p.stderr


def test_differences_below_the_shown_resolution_are_not_flagged():
    import pandas as pd

    from ccarena.experiments.crosscheck import summarise

    base = {"share0": 0.5, "ratio": 0.9, "utilization": 0.99, "retrans": 100.0, "rtx_per_event": 20.0, "acks_per_seg": 0.3}
    runs = pd.DataFrame([
        {"case": "c", "backend": "linux", "seed": 1, **base, "seg_per_skb": 0.9988},
        {"case": "c", "backend": "linux", "seed": 2, **base, "seg_per_skb": 0.9990},
        {"case": "c", "backend": "sim", "seed": 1, **base, "seg_per_skb": 1.0, "acks_per_seg": 0.31, "retrans": 100.4},
    ])
    flagged = dict(zip(*[summarise(runs, ["c"])[c] for c in ("metric", "flagged")]))
    # 0.001 segments per skb and 0.4 retransmissions are below what the table
    # shows; 0.01 ACKs per segment is not, with the kernel's spread 0.
    assert not flagged["seg_per_skb"] and not flagged["retrans"] and flagged["acks_per_seg"]


def test_loss_episodes_that_take_both_flows_are_counted_from_the_retransmissions():
    import pandas as pd

    from ccarena.experiments.crosscheck import both_flow_loss_share

    # Samples every 0.1 s; cumulative retransmissions per flow. After the
    # 1 s warm-up: an episode of flow 0 alone (1.2 s), one of both spread
    # over two samples (2.0-2.1 s), one of flow 1 alone (3.0 s). The
    # start-up's losses (0.3 s) are not counted.
    t = [round(0.1 * i, 1) for i in range(40)]
    f0 = [0] * 3 + [50] * 9 + [60] * 8 + [70] * 20
    f1 = [0] * 3 + [40] * 18 + [45] * 9 + [52] * 10
    series = pd.DataFrame([{"t_s": ti, "flow": 0, "retransmissions": a} for ti, a in zip(t, f0)]
                          + [{"t_s": ti, "flow": 1, "retransmissions": b} for ti, b in zip(t, f1)])
    assert both_flow_loss_share(series, [0, 1], warmup_s=1.0) == pytest.approx(1 / 3)
    assert both_flow_loss_share(series, [0, 1], warmup_s=3.5) != both_flow_loss_share(series, [0, 1], warmup_s=3.5)  # no episode: NaN
    assert both_flow_loss_share(series, [0], warmup_s=1.0) != both_flow_loss_share(series, [0], warmup_s=1.0)  # not a pair: NaN


def test_ratio_factors_and_summary():
    import pandas as pd

    from ccarena.experiments.crosscheck import ratio_factors, ratio_summary

    table = pd.DataFrame([
        {"case": "a", "metric": "ratio", "sim": 0.3, "kernel": 0.6, "repetitions": 3},
        {"case": "b", "metric": "ratio", "sim": 0.8, "kernel": 0.7, "repetitions": 3},
        {"case": "b", "metric": "share0", "sim": 0.1, "kernel": 0.9, "repetitions": 3},
        {"case": "c", "metric": "ratio", "sim": float("nan"), "kernel": 0.5, "repetitions": 3},
        {"case": "d", "metric": "ratio", "sim": 0.1, "kernel": 0.5, "repetitions": 1},  # one kernel run: no spread
    ])
    assert ratio_factors(table) == [("a", 2.0), ("b", 0.8 / 0.7)]
    assert ratio_summary(table) == "throughput ratio within 1.5x of the kernel's mean: 1 of 2 cases (largest factor 2.00, a)"


def test_the_rank_test_needs_two_runs_a_side_and_separates_distinct_samples():
    from ccarena.experiments.crosscheck import rank_test_p

    assert math.isnan(rank_test_p([0.5], [0.4, 0.6]))  # one simulator run
    assert rank_test_p([0.5, 0.5], [0.5, 0.5, 0.5]) == 1.0
    # Five kernel runs all above forty simulator seeds: a difference.
    sim = [0.2 + 0.005 * i for i in range(40)]
    assert rank_test_p(sim, [0.45, 0.5, 0.55, 0.6, 0.65]) < 0.001
    # Interleaved samples: no difference.
    assert rank_test_p([0.3, 0.5, 0.7, 0.4, 0.6], [0.35, 0.55, 0.45, 0.65]) > 0.5
    # Three runs a side can never reach p < 0.1 (the smallest exact p is 0.1).
    assert rank_test_p([0.1, 0.2, 0.3], [0.7, 0.8, 0.9]) >= 0.1


def test_the_table_tests_each_metric_and_counts_more_simulator_seeds():
    import pandas as pd

    from ccarena.experiments.crosscheck import rank_summary, summarise, to_markdown

    base = {"share0": 0.5, "utilization": 0.99, "retrans": 100.0, "rtx_per_event": 20.0, "acks_per_seg": 0.3, "seg_per_skb": 16.0}
    rows = [{"case": "c", "backend": "linux", "seed": k, **base, "ratio": r} for k, r in enumerate([0.45, 0.5, 0.55, 0.6, 0.65], 1)]
    rows += [{"case": "c", "backend": "sim", "seed": k, **base, "ratio": 0.2 + 0.005 * k} for k in range(1, 41)]
    table = summarise(pd.DataFrame(rows), ["c"])
    by = table.set_index("metric")
    assert by.loc["ratio", "sim_repetitions"] == 40 and by.loc["ratio", "repetitions"] == 5
    assert by.loc["ratio", "differs"] and by.loc["ratio", "p"] < 0.001
    assert by.loc["ratio", "sim_min"] == pytest.approx(0.205) and by.loc["ratio", "sim_max"] == pytest.approx(0.4)
    # Identical runs on both sides: tested, p = 1, no difference.
    assert by.loc["share0", "p"] == 1.0 and not by.loc["share0", "differs"]
    assert rank_summary(table).startswith("distributions that differ (Mann-Whitney p < 0.05): 1 of 7 cells; throughput ratio in 1 of 1 cases")
    meta = {"set": "paper-quick", "description": "d", "repetitions": 5, "sim_repetitions": 40}
    md = to_markdown(table, meta)
    assert "(5 kernel repetitions, 40 simulator seeds)" in md and "| **<0.001** |" in md
    # One kernel run: nothing to test.
    one = summarise(pd.DataFrame(rows[:1] + rows[5:]), ["c"])
    assert one["p"].isna().all() and rank_summary(one) == "rank test: no cell with two or more runs on each backend"


def test_paired_starts_keep_the_kernels_offsets():
    from ccarena.experiments.crosscheck import paired_starts

    # Launched early, both flows began before the run's zero, 12 ms apart.
    assert paired_starts([-0.003, -0.015]) == pytest.approx([0.012, 0.0])
    assert paired_starts([0.044, 0.294]) == [0.044, 0.294]
    assert paired_starts([]) == []


def test_validate_help_names_every_suite():
    from ccarena.experiments.crosscheck import VALIDATION_SETS

    # The help wraps lines, at hyphens too: join them back.
    text = " ".join(cli("validate", "--help", check=True).stdout.split()).replace("- ", "-")
    for name in VALIDATION_SETS:
        assert name in text, name


def test_senders_start_their_sockets_as_reno_whatever_the_hosts_default():
    """iperf3 sets -C after connecting: the socket's first algorithm is the
    namespace default, and a default of bbr would leave it paced. Every
    sender host starts sockets as reno (one value, so flows of different
    algorithms can share a testbed host)."""
    from ccarena.backends.linux.mapping import sender_sysctls

    flow = {"cca": "cubic", "tcp": {}}
    assert sender_sysctls(flow)["net.ipv4.tcp_congestion_control"] == "reno"
    assert sender_sysctls({**flow, "cca": "bbr"})["net.ipv4.tcp_congestion_control"] == "reno"


@needs_linux
def test_a_stall_of_the_delay_program_is_logged_and_the_machines_cpu_time_recorded(tmp_path):
    """The delay program stopped for 60 ms in the middle of a run: its
    statistics list a wake-up about that late (it wakes every 100 us while
    it runs, so the stall is seen whether or not an ACK fell due in it), and
    the record keeps the machine's CPU time over the window by kind."""
    f = tmp_path / "s.toml"
    f.write_text('name = "stall"\n[network]\nbottleneck_rate = "20Mbps"\nbuffer = "100p"\n'
                 '[[flows]]\ncca = "reno"\nrtt = "20ms"\n[run]\nduration = "4s"\nwarmup = "1s"\n')
    proc = subprocess.Popen([sys.executable, "-m", "ccarena.cli", "run", str(f), "--backend", "linux", "--out", str(tmp_path / "res")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        pid = None
        while pid is None and time.monotonic() < deadline:
            time.sleep(0.1)
            pid = next((int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit() and "ccarena-delay" in _cmdline(d)
                        and _ancestor(int(d.name), proc.pid)), None)
        assert pid is not None, "no delay program"
        # The program times its wake-ups from the first packet on: stop it
        # only once the flow's iperf3 client runs and its data has begun
        # (a fixed wait from the program's start missed it on a loaded machine).
        client = None
        while client is None and time.monotonic() < deadline:
            time.sleep(0.05)
            client = next((d for d in Path("/proc").iterdir() if d.name.isdigit() and _is_iperf3_client(_cmdline(d))
                           and _ancestor(int(d.name), proc.pid)), None)
        assert client is not None, "no iperf3 client"
        time.sleep(1.0)
        os.kill(pid, signal.SIGSTOP)
        time.sleep(0.06)
        os.kill(pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    rec = read_record(tmp_path / "res")["linux"]
    late = [us for _, us in rec["delay_stats"]["late_wakeups"]]
    assert any(50_000 <= us <= 200_000 for us in late), sorted(late)[-5:]
    assert set(rec["cpu_s"]) == {"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"}
    assert 2.0 < sum(rec["cpu_s"].values()) < 4 * 2 * os.cpu_count(), rec["cpu_s"]  # about 3 s of every CPU
