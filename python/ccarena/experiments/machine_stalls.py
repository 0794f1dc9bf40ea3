"""The kernel testbed's stalls, as its delay emulator logged them, in the
simulator's terms.

The linux backend's delay program (linux/delay.c) wakes at least every
100 us and logs each wake-up at least 200 us later than it asked for
(`linux.delay_stats.late_wakeups`, `[t_us, late_us]` pairs): moments when
the shared machine ran nothing of the program, and, as the kernel runs
show, nothing much else either (docs/fidelity.md, "The delay emulator's
lateness"). Here they become a stall process the simulator takes
(`network.router_stalls` or `network.return_stalls`): as often as the
late wake-ups came after the warm-up, lasting as late as they were (an
empirical distribution of their percentiles)."""

from __future__ import annotations

import math

import numpy as np

#: The percentiles an empirical `duration` keeps.
FIT_PERCENTILES = (0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1)


def window_lateness(delay_stats: dict | None, start_s: float, end_s: float) -> np.ndarray | None:
    """The late wake-ups' lateness (us) between `start_s` and `end_s` after
    the first packet; None when the run's program did not log them."""
    wakeups = (delay_stats or {}).get("late_wakeups")
    if wakeups is None:
        return None
    w = np.asarray(wakeups, dtype=float).reshape(-1, 2)
    keep = (w[:, 0] >= start_s * 1e6) & (w[:, 0] < end_s * 1e6)
    return w[keep, 1]


def stalls_setting(late_us: np.ndarray, seconds: float) -> dict:
    """A stall table (`every`, `duration`) for these late wake-ups: stalls
    as often as the wake-ups, lasting as they were late."""
    if len(late_us) < 2:
        raise ValueError("fewer than two late wake-ups: nothing to fit")
    values: list[float] = []
    probabilities: list[float] = []
    for p, v in zip(FIT_PERCENTILES, np.quantile(late_us, FIT_PERCENTILES)):
        v = float(round(v))
        if values and v <= values[-1]:
            continue  # an empirical distribution's values rise strictly
        values.append(v)
        probabilities.append(p)
    probabilities[-1] = 1.0
    every = f"{seconds / len(late_us) * 1e6:.0f}us"
    if len(values) < 2:
        return {"every": every, "duration": f"{values[0]:.0f}us"}  # all alike: a constant
    return {"every": every,
            "duration": {"distribution": "empirical", "values": [f"{v:.0f}us" for v in values], "probabilities": probabilities}}


def backend_section(record: dict) -> dict:
    """The record's part its kernel backend wrote ("linux", "testbed"); {} for the simulator's."""
    section = record.get(record.get("backend", "")) if isinstance(record, dict) else None
    return section if isinstance(section, dict) else {}


def run_window_lateness(record: dict) -> tuple[np.ndarray | None, float]:
    """One kernel run's late wake-ups (us) from its warm-up's end to its
    end, and that window's length (s); None for a run without the log
    (runs of other backends, runs stored before the program logged them)."""
    stats = backend_section(record).get("delay_stats")
    start, end = record.get("warmup_ns", 0) / 1e9, record.get("duration_ns", 0) / 1e9
    return window_lateness(stats if isinstance(stats, dict) else None, start, end), end - start


def kernel_run_stalls(record: dict) -> dict | None:
    """The stall table of one kernel run's measurement window, from its
    delay program's late wake-ups; None when the run has none logged."""
    late, seconds = run_window_lateness(record)
    if late is None or len(late) < 2 or seconds <= 0:
        return None
    return stalls_setting(late, seconds)


def stalls_over(record: dict, floor_us: float) -> float:
    """How often a second one kernel run's machine stalled for more than
    `floor_us` in its measurement window; NaN when the run has none logged."""
    late, seconds = run_window_lateness(record)
    return float(np.sum(late > floor_us) / seconds) if late is not None and seconds > 0 else float("nan")


def stalls_over_per_s(setting: dict | None, floor_ns: float) -> float | None:
    """How many stalls longer than `floor_ns` a second a stall setting in
    engine form (`every`, `duration`) draws, for the duration kinds whose
    tail has a closed form (a constant, the default's lognormal body joined
    to a Pareto tail with its `tail` share given); None for others."""
    if not setting:
        return None
    d, rate = setting["duration"], 1e9 / setting["every"]
    if d.get("distribution") == "constant":
        return rate * (d["value"] > floor_ns)
    if d.get("distribution") == "lognormal_pareto" and d.get("tail") is not None and d["k"] > floor_ns:
        def phi(x: float) -> float:
            return 0.5 * math.erfc(-(math.log(x) - d["mu"]) / d["sigma"] / math.sqrt(2))
        # The body is the lognormal below k, renormalised; the tail lies above k.
        return rate * (d["tail"] + (1 - d["tail"]) * (phi(d["k"]) - phi(floor_ns)) / phi(d["k"]))
    return None
