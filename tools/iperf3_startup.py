"""Measures how long iperf3 takes from the client's launch to its first data
segment, on this machine's kernel, over the linux backend's dumbbell (one
flow, NFQUEUE delay on the ACK path): the numbers behind the engine's
`startup = "iperf3"` (docs/scenario.md, docs/fidelity.md).

    sudo .venv/bin/python tools/iperf3_startup.py --rtt 20ms 50ms 100ms --repeat 3

For each run it prints, in RTTs of the path: when the control connection's
SYN left after the launch, every control-connection segment the client sent
or received (time, direction, payload bytes), the data connection's SYN and
its first data segment, and how long the server took to answer the data
connection's cookie with TEST_START beyond the round trip. Needs root, network namespaces, iperf3 and tcpdump.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from ccarena.backends.linux.host import DELAY_BIN, popen
from ccarena.backends.linux.topology import PORT, Dumbbell, receiver_addr
from ccarena.scenario.units import parse_duration


def parse(lines: list[str]) -> list[tuple[float, int, int, str, int]]:
    """(time, source port, destination port, flags, payload length) of each tcpdump line."""
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) < 6 or parts[1] != "IP":
            continue
        src, dst = parts[2], parts[4].rstrip(":")
        flags = line.split("Flags [", 1)[1].split("]", 1)[0] if "Flags [" in line else ""
        length = int(line.rsplit("length ", 1)[1].split()[0]) if "length " in line else 0
        out.append((float(parts[0]), int(src.rsplit(".", 1)[1]), int(dst.rsplit(".", 1)[1]), flags, length))
    return out


def measure(rtt_ns: int) -> dict:
    flow = {"rtt": rtt_ns, "tcp": {}, "cca": "cubic"}
    net = Dumbbell(tag=f"st{os.getpid()}", flows=[flow], rate_bps=100_000_000, limit_bytes=1_000_000, burst_bytes=30_000)
    procs: list[subprocess.Popen] = []
    work = Path(tempfile.mkdtemp(prefix="iperf3-startup-"))
    try:
        net.build()
        delay = popen(["ip", "netns", "exec", net.right, str(DELAY_BIN), *net.delay_args()], stdout=subprocess.PIPE)
        procs.append(delay)
        assert delay.stdout.readline().decode().strip() == "ready"
        net.add_delay_rules()
        procs.append(popen(["ip", "netns", "exec", net.receiver(0), "iperf3", "-s", "-1", "-p", str(PORT)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        dump = open(work / "dump.txt", "w")
        procs.append(popen(["ip", "netns", "exec", net.sender(0), "tcpdump", "-i", "eth0", "-n", "-tt", "-l", "tcp", "port", str(PORT)],
                           stdout=dump, stderr=subprocess.DEVNULL))
        time.sleep(1.0)
        launched = time.time()
        subprocess.run(["ip", "netns", "exec", net.sender(0), "iperf3", "-c", receiver_addr(0), "-p", str(PORT), "-t", "1"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
        time.sleep(0.5)
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        net.teardown()
    pkts = parse((work / "dump.txt").read_text().splitlines())
    syns = [p for p in pkts if p[3] == "S"]
    ctrl, data = syns[0][1], syns[1][1]
    t0 = syns[0][0]
    rtt = rtt_ns / 1e9
    first_data = next(p for p in pkts if p[1] == data and p[4] >= 1000)
    # The server's own time on the data connection's cookie: from the cookie
    # leaving to TEST_START arriving, less that connection's handshake round
    # trip (the path's RTT as the same capture sees it).
    syn_ack = next(p for p in pkts if p[2] == data and p[3] == "S.")
    cookie = next(p for p in pkts if p[1] == data and p[4] > 0)
    test_start = next(p for p in pkts if p[2] == ctrl and p[4] > 0 and p[0] > cookie[0])
    messages = [
        (round((p[0] - t0) / rtt, 2), "out" if p[1] == ctrl else "in", p[3], p[4])
        for p in pkts
        if ctrl in (p[1], p[2]) and p[0] <= first_data[0]
    ]
    return {
        "launch_to_syn_ms": round((t0 - launched) * 1e3, 2),
        "control": messages,
        "data_syn_rtts": round((syns[1][0] - t0) / rtt, 3),
        "first_data_rtts": round((first_data[0] - t0) / rtt, 3),
        "first_data_ms": round((first_data[0] - t0) * 1e3, 2),
        "test_start_after_cookie_ms": round((test_start[0] - cookie[0] - (syn_ack[0] - syns[1][0])) * 1e3, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rtt", nargs="+", default=["20ms", "50ms", "100ms"])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for r in args.rtt:
        for _ in range(args.repeat):
            m = measure(parse_duration(r))
            print(f"rtt {r}: launch->SYN {m['launch_to_syn_ms']} ms; data SYN at {m['data_syn_rtts']} RTT; "
                  f"first data at {m['first_data_rtts']} RTT ({m['first_data_ms']} ms after the control SYN); "
                  f"the server answered the data cookie {m['test_start_after_cookie_ms']} ms beyond the round trip")
            print("   control segments (RTTs after the SYN, direction, flags, payload):",
                  " ".join(f"{t}:{d}:{f}:{n}" for t, d, f, n in m["control"]))


if __name__ == "__main__":
    main()
