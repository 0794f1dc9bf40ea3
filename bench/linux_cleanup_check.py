"""Leftover check for the linux backend (docs/linux-backend.md, Clean-up).

Runs the CLI N times (default 20) on a short 2-flow scenario, cycling through:
a normal run, SIGINT during the flows, SIGKILL during the flows, SIGINT during
set-up, SIGKILL during set-up; every fourth run uses the BPF algorithm `bic`.
After each run it records what is left: ccarena namespaces, iperf3 / delay
processes outside the host's namespace, BPF registrations. Then it runs
`ccarena cleanup` and one more normal run, and checks that nothing is left
and that the host's iptables rules and qdiscs are as before. Needs root.

    python bench/linux_cleanup_check.py [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
duration = "4s"
"""


def state() -> dict:
    mine = os.readlink("/proc/self/ns/net")
    ns = [line.split()[0] for line in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines() if line.startswith("ccarena-")]
    procs = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                comm = (d / "comm").read_text().strip()
                if comm in ("iperf3", "ccarena-delay") and os.readlink(d / "ns/net") != mine:
                    procs.append(comm)
            except OSError:
                pass
    maps = [line.split(":")[0].strip() for line in subprocess.run(["bpftool", "struct_ops", "show"], capture_output=True, text=True).stdout.splitlines() if "ccarena_" in line]
    algos = [a for a in Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split() if a in ("bic", "highspeed")]
    # Maps that existed before the check (a kernel may still hold an unregistered one) are not counted.
    return {"namespaces": len(ns), "processes": procs, "bpf_algorithms": algos, "bpf_maps": len(set(maps) - PRE_MAPS)}


PRE_MAPS: set = set()


def host_config() -> str:
    a = subprocess.run(["iptables-legacy-save"], capture_output=True, text=True).stdout
    b = subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True).stdout
    return "\n".join(line for line in (a + b).splitlines() if not line.startswith("#"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    rng = random.Random(1)
    d = Path(tempfile.mkdtemp())
    before = host_config()
    PRE_MAPS.update(line.split(":")[0].strip() for line in subprocess.run(["bpftool", "struct_ops", "show"], capture_output=True, text=True).stdout.splitlines())
    modes = ["normal", "sigint-run", "sigkill-run", "sigint-setup", "sigkill-setup"]
    rows = []
    for k in range(a.runs):
        mode = modes[k % len(modes)]
        cca = "bic" if k % 4 == 3 else "reno"
        f = d / f"s{k}.toml"
        f.write_text(SCENARIO.format(cca=cca))
        t0 = time.time()
        p = subprocess.Popen([sys.executable, "-m", "ccarena.cli", "run", str(f), "--backend", "linux", "--no-save"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if mode != "normal":
            time.sleep(rng.uniform(0.2, 0.8) if mode.endswith("setup") else rng.uniform(2.0, 3.5))
            p.send_signal(signal.SIGINT if mode.startswith("sigint") else signal.SIGKILL)
        _, err = p.communicate(timeout=60)
        time.sleep(0.3)
        s = state()
        rows.append({"run": k + 1, "mode": mode, "cca": cca, "exit": p.returncode, "wall_s": round(time.time() - t0, 1), **s,
                     "error": err.strip().splitlines()[-1] if p.returncode not in (0, 130, -9) and err.strip() else ""})
        print(json.dumps(rows[-1]), flush=True)
    c = subprocess.run([sys.executable, "-m", "ccarena.cli", "cleanup"], capture_output=True, text=True)
    print("cleanup:", c.stdout.strip())
    f = d / "final.toml"
    f.write_text(SCENARIO.format(cca="reno"))
    final = subprocess.run([sys.executable, "-m", "ccarena.cli", "run", str(f), "--backend", "linux", "--no-save"], capture_output=True, text=True)
    end = state()
    same = host_config() == before
    print(json.dumps({"final_run_exit": final.returncode, "left": end, "host_iptables_and_qdiscs_unchanged": same}))
    ok = final.returncode == 0 and end == {"namespaces": 0, "processes": [], "bpf_algorithms": [], "bpf_maps": 0} and same
    print("OK: nothing left behind" if ok else "LEFTOVERS FOUND")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
