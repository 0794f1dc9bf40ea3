"""Accuracy of the linux backend's delay program (docs/linux-backend.md).

Builds the backend's dumbbell with one flow per requested RTT, starts the
delay program, and times TCP handshakes from each sender to its receiver
(connect() returns when the SYN-ACK, which the delay program held, arrives):
handshake time - requested RTT is the error the path and the program add.
Also measures the bare path (no delay rules). Needs root.

    python bench/linux_delay.py [--count 200] [RTT_MS ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from ccarena.backends.linux.cleanup import cleanup
from ccarena.backends.linux.host import DELAY_BIN, check_host, popen
from ccarena.backends.linux.topology import Dumbbell, receiver_addr

PROBE = r"""
import socket, sys, time, json
addr, n = sys.argv[1], int(sys.argv[2])
out = []
for _ in range(n):
    s = socket.socket(); t = time.perf_counter(); s.connect((addr, 9)); out.append((time.perf_counter() - t) * 1e3); s.close()
    time.sleep(0.01)
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rtts", nargs="*", type=float, default=[1, 10, 40, 100])
    ap.add_argument("--count", type=int, default=200)
    a = ap.parse_args()
    check_host()
    cleanup(exclude=os.getpid())
    flows = [{"rtt": int(r * 1e6), "tcp": {}, "cca": "cubic"} for r in a.rtts]
    net = Dumbbell(tag=str(os.getpid()), flows=flows, rate_bps=100_000_000, limit_bytes=1_000_000, burst_bytes=12_500)
    probe = Path(tempfile.mkdtemp()) / "probe.py"
    probe.write_text(PROBE)
    servers, delay = [], None
    try:
        net.build()
        # A listener on port 9 in every receiver (the kernel answers the handshake).
        for i in range(len(flows)):
            servers.append(popen(["ip", "netns", "exec", net.receiver(i), sys.executable, "-c",
                                  "import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', 9)); s.listen(4096)\nwhile True:\n c,_=s.accept(); c.close()"]))
        import time

        time.sleep(0.5)

        def measure(i: int) -> list[float]:
            p = subprocess.run(["ip", "netns", "exec", net.sender(i), sys.executable, str(probe), receiver_addr(i), str(a.count)], capture_output=True, text=True, check=True)
            return json.loads(p.stdout)

        bare = measure(0)
        delay = popen(["ip", "netns", "exec", net.right, str(DELAY_BIN), *net.delay_args()], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert delay.stdout.readline().strip() == b"ready"
        net.add_delay_rules()
        rows = []
        for i, r in enumerate(a.rtts):
            x = sorted(measure(i))
            err = [v - r for v in x]
            rows.append({"rtt_ms": r, "median_err_ms": statistics.median(err), "p99_err_ms": err[int(len(err) * 0.99) - 1],
                         "min_err_ms": err[0], "max_err_ms": err[-1]})
        delay.terminate()
        stats = json.loads(delay.communicate(timeout=5)[1].decode().strip().splitlines()[-1])
        bare.sort()
        print(json.dumps({"bare_path_median_ms": statistics.median(bare), "bare_path_p99_ms": bare[int(len(bare) * 0.99) - 1],
                          "delay": rows, "delay_program": stats}, indent=1))
    finally:
        for p in servers + ([delay] if delay else []):
            if p.poll() is None:
                p.kill()
        net.teardown()


if __name__ == "__main__":
    main()
