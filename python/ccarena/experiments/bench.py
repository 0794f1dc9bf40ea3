"""The benchmark behind `ccarena bench`: runs the fixed `bench` preset (and any
other scenario) a few times and reports wall time, simulated seconds per wall
second, events per second and packets per second. Only the engine's run is
timed (not scenario parsing or result conversion)."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from typing import Any

from ..backends.sim import SIM, simulate
from ..scenario.model import Scenario
from ..version import __version__

__all__ = ["bench"]


def bench(scenario: str = "bench", repeat: int = 3) -> dict[str, Any]:
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
    return {
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
