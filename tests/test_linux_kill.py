"""SIGKILL of the CLI at random moments of linux-backend runs leaves nothing
behind, without `ccarena cleanup`: the run's watcher (backends/linux/supervisor.py)
tears down what the killed process had created. The root namespace's links,
routes, sysctls, firewall and qdiscs are compared before and after.

Default tier: 3 kills of short runs; CCARENA_SLOW=full: 10 kills."""

import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FULL
from test_linux import REASON, _stray_helpers
from ccarena.backends.linux.cleanup import registered_bpf

needs_linux = pytest.mark.skipif(REASON is not None, reason=f"linux backend unavailable: {REASON}")

SCENARIO = """
[network]
bottleneck_rate = "50Mbps"
buffer = "1bdp"
[[flows]]
cca = "{cca}"
rtt = "20ms"
[[flows]]
cca = "cubic"
rtt = "40ms"
[run]
duration = "{duration}"
"""

SYSCTLS = [
    "net/ipv4/ip_forward", "net/ipv4/tcp_congestion_control", "net/ipv4/tcp_allowed_congestion_control",
    "net/ipv4/tcp_available_congestion_control", "net/ipv4/tcp_sack", "net/ipv4/tcp_wmem", "net/ipv4/tcp_rmem",
    "net/ipv4/tcp_ecn", "net/ipv4/tcp_frto", "net/ipv4/tcp_early_retrans", "net/ipv4/tcp_slow_start_after_idle",
    "net/ipv4/tcp_no_metrics_save", "net/core/rmem_max", "net/core/wmem_max",
]


def _run(*args) -> str:
    try:
        return subprocess.run(list(args), capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _no_counters(text: str) -> str:
    # iptables-save's packet counters and comments change by themselves.
    return "\n".join(re.sub(r"\[\d+:\d+\]", "", line) for line in text.splitlines() if not line.startswith("#"))


def _root_state() -> dict:
    links = _run("ip", "-o", "link", "show")
    state = {
        "links": "\n".join(sorted(re.sub(r"^\d+: ", "", line).split(" link/")[0] for line in links.splitlines())),
        "routes": _run("ip", "route", "show", "table", "all") + _run("ip", "-6", "route", "show", "table", "all"),
        "sysctls": {k: Path("/proc/sys", k).read_text().strip() for k in SYSCTLS if Path("/proc/sys", k).exists()},
        "iptables": _no_counters(_run("iptables-legacy-save") + _run("iptables-save")),
        "qdiscs": _run("tc", "qdisc", "show"),
    }
    return state


def _leftovers(pids: set[int]) -> dict:
    """What the killed runs (processes `pids`) may have left."""
    own = re.compile(r"^ccarena-(?:linux-)?(\d+)-")

    def mine(name: str) -> bool:
        m = own.match(name)
        return bool(m) and int(m.group(1)) in pids

    ns = [line.split()[0] for line in _run("ip", "netns", "list").splitlines() if line.strip()]
    procs = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "ccarena.backends.linux.supervisor" in cmd or any(f"ccarena-{p}-" in cmd for p in pids) or int(d.name) in pids:
            procs.append(f"{d.name} {cmd.strip()}")
    return {
        "namespaces": [n for n in ns if mine(n)],
        "directories": [d.name for d in Path("/tmp").glob("ccarena-linux-*") if mine(d.name)],
        "processes": procs + _stray_helpers(),
        # Registered ones only: a map unregistered but still referenced (the
        # kernel frees it later) is not something a run left to undo.
        "struct_ops": registered_bpf(),
        "ccas": [a for a in Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split() if a in ("bic", "highspeed")],
    }


def _wait_clean(pids: set[int], timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        left = _leftovers(pids)
        if not any(left.values()) or time.monotonic() > deadline:
            return left
        time.sleep(0.3)


@needs_linux
@pytest.mark.slow
def test_sigkill_at_random_moments_leaves_nothing(tmp_path):
    kills = 10 if FULL else 3
    duration = "3s" if FULL else "2s"
    rng = random.Random(12)
    from ccarena.backends.linux.host import bpf_ccas, kernel_ccas

    bic = "bic" in bpf_ccas() and "bic" not in kernel_ccas()
    # No other run may be in flight when this starts: its BPF algorithm would stay.
    assert not _leftovers(set()).get("struct_ops") or not bic, "a BPF algorithm is registered before the test"
    before = _root_state()
    pids: set[int] = set()
    report = []
    for k in range(kills):
        cca = "bic" if bic and k % 2 == 1 else "reno"
        f = tmp_path / f"k{k}.toml"
        f.write_text(SCENARIO.format(cca=cca, duration=duration))
        at = rng.uniform(0.2, 5.0)  # Python's start-up, set-up, the flows, collection
        proc = subprocess.Popen([sys.executable, "-m", "ccarena.cli", "run", str(f), "--backend", "linux", "--no-save"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pids.add(proc.pid)
        time.sleep(at)
        existed = _leftovers({proc.pid})
        proc.kill()
        proc.wait()
        t_kill = time.monotonic()
        left = _wait_clean({proc.pid})
        report.append(f"kill {k} at {at:.2f} s ({cca}): {len(existed['namespaces'])} namespaces, "
                      f"{len(existed['struct_ops'])} struct_ops, {len(existed['directories'])} directories existed; "
                      f"clean after {time.monotonic() - t_kill:.1f} s")
        assert not any(left.values()), f"kill {k} at {at:.2f} s ({cca}) left {left}"
    print("\n".join(report))
    assert not any(_wait_clean(pids).values())
    after = _root_state()
    for key in before:
        assert before[key] == after[key], f"the root namespace's {key} changed"
