"""Writes the synthetic rate traces shipped in python/ccarena/scenario/traces (Mahimahi
format: one delivery opportunity of 1500 bytes per line, in milliseconds since
the start; the trace loops with the last timestamp as its period).

The traces are deterministic (fixed seeds), so running this again reproduces
them byte for byte:

    python tools/make_traces.py
"""

from __future__ import annotations

import math
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "python" / "ccarena" / "scenario" / "traces"
PACKET_BITS = 1500 * 8


def poisson(rate_mbps: float, seconds: float, seed: int) -> list[int]:
    """Opportunities at the points of a Poisson process of the given mean rate."""
    rng = random.Random(seed)
    per_ms = rate_mbps * 1e6 / PACKET_BITS / 1000
    t, out = 0.0, []
    while True:
        t += rng.expovariate(per_ms)
        if t > seconds * 1000:
            break
        out.append(max(1, math.ceil(t)))
    out.append(int(seconds * 1000))  # fixes the period
    return out


def constant(rate_mbps: float, seconds: float) -> list[int]:
    """Evenly spaced opportunities (a fixed-rate link)."""
    n = round(rate_mbps * 1e6 * seconds / PACKET_BITS)
    return [max(1, math.ceil((k + 1) * seconds * 1000 / n)) for k in range(n)]


def steps(rates_mbps: list[float], seconds_each: float) -> list[int]:
    out = []
    for i, r in enumerate(rates_mbps):
        offset = int(i * seconds_each * 1000)
        out += [offset + t for t in constant(r, seconds_each)]
    return out


def walk(seconds: float, seed: int, lo: float, hi: float, start: float, sigma: float, rho: float) -> list[int]:
    """Poisson opportunities whose rate follows a bounded correlated random walk
    in 100 ms steps: a cellular-like link."""
    rng = random.Random(seed)
    rate, step, t, out = start, 0.0, 0.0, []
    for k in range(int(seconds * 10)):
        step = rho * step + math.sqrt(1 - rho * rho) * rng.gauss(0, sigma)
        rate = min(max(rate + step, lo), hi)
        end = (k + 1) * 100.0
        per_ms = rate * 1e6 / PACKET_BITS / 1000
        while True:
            gap = rng.expovariate(per_ms)
            if t + gap > end:
                t = end
                break
            t += gap
            out.append(max(1, math.ceil(t)))
    out.append(int(seconds * 1000))
    return out


TRACES = {
    # Stand-ins for the Pantheon/ccperf paths named after their mean rates.
    "0.57mbps-poisson": lambda: poisson(0.57, 60, 57),
    "2.64mbps-poisson": lambda: poisson(2.64, 60, 264),
    "3.04mbps-poisson": lambda: poisson(3.04, 60, 304),
    "12mbps": lambda: constant(12, 1),
    "step-12-36mbps": lambda: steps([12, 36], 10),
    "cellular-walk": lambda: walk(60, 7, 1.0, 24.0, 8.0, 1.5, 0.8),
}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, make in TRACES.items():
        lines = make()
        assert lines == sorted(lines) and lines[-1] > 0
        (OUT / f"{name}.trace").write_text("".join(f"{t}\n" for t in lines))
        rate = len(lines) * PACKET_BITS / (lines[-1] / 1000) / 1e6
        print(f"{name}: {len(lines)} opportunities over {lines[-1] / 1000:g} s, mean {rate:.3f} Mbit/s")


if __name__ == "__main__":
    main()
