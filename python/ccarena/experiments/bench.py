"""The benchmark behind `ccarena bench`: runs the fixed `bench` presets (and any
other scenario) a few times and reports wall time, simulated seconds per wall
second, events per second and packets per second. Only the engine's run is
timed (not scenario parsing or result conversion).

Wall time on a shared machine varies by tens of per cent; the instructions the
engine executes do not. With ``instructions=True`` the engine's run is
repeated once under valgrind's callgrind, counting only inside the
simulation's run loop (``--toggle-collect``), so the count excludes Python and
start-up and is comparable across versions and machines of one kind."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from ..backends.sim import SIM, simulate
from ..scenario.model import Scenario
from ..errors import UsageError
from ..version import __version__

__all__ = ["bench", "count_instructions", "BENCH_SCENARIOS"]

#: The fixed benchmark scenarios `ccarena bench` times by default: bare, with
#: the paper's background, with the testbed's (reordering) background.
BENCH_SCENARIOS = ("bench", "bench-background", "bench-testbed")

# Counts only inside the engine's run loop: Python, parsing and record
# conversion are left out.
_COUNTED = "*Simulation*run*"

_CHILD = "import sys; from ccarena.backends.sim import simulate; simulate(sys.stdin.read())"


def count_instructions(cfg: str) -> int:
    """Instructions the engine executes running the engine JSON `cfg` once,
    counted by valgrind's callgrind (about 50 times slower than a run)."""
    if shutil.which("valgrind") is None:
        raise UsageError("--instructions needs valgrind (e.g. `apt install valgrind`)")
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [
                "valgrind", "--tool=callgrind", f"--toggle-collect={_COUNTED}",
                f"--callgrind-out-file={os.path.join(tmp, 'callgrind.out')}", sys.executable, "-c", _CHILD,
            ],
            input=cfg, capture_output=True, text=True, check=False,
        )
    m = re.search(r"Collected\s*:\s*(\d+)", proc.stderr)
    if proc.returncode != 0 or m is None:
        tail = proc.stderr.strip().splitlines()[-3:]
        raise RuntimeError("callgrind failed: " + " / ".join(tail))
    return int(m.group(1))


def bench(scenario: str = "bench", repeat: int = 3, instructions: bool = False) -> dict[str, Any]:
    sc = Scenario.load(scenario, SIM.algorithms())
    cfg = sc.engine_json()
    walls, record = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = simulate(cfg)
        walls.append(time.perf_counter() - t0)
        record = json.loads(out)
    assert record is not None
    wall = statistics.median(walls)
    sim_s = record["duration_ns"] / 1e9
    out: dict[str, Any] = {
        "scenario": sc.name,
        "simulated_s": sim_s,
        "repeats": repeat,
        "wall_s": wall,
        "wall_s_min": min(walls),
        "sim_s_per_wall_s": sim_s / wall,
        "events": record["events"],
        "events_per_s": record["events"] / wall,
        "packets": record["data_packets_forwarded"],
        "packets_per_s": record["data_packets_forwarded"] / wall,
        "version": __version__,
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, {platform.python_implementation()} {platform.python_version()}",
    }
    if instructions:
        n = count_instructions(cfg)
        out["instructions"] = n
        out["instructions_per_packet"] = n / max(1, record["data_packets_forwarded"])
        out["instructions_per_event"] = n / max(1, record["events"])
    return out
