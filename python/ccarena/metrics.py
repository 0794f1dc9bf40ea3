"""Metrics computed from run records. Formulas are in docs/metrics.md; each
function here is the single place that formula lives.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["jain_index", "throughput_ratio", "goodput_capacity_bps"]


def jain_index(x: Sequence[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 = equal shares, 1/n = one flow takes all."""
    a = np.asarray(x, dtype=float)
    if a.size == 0:
        return float("nan")
    denom = a.size * float(np.sum(a * a))
    return float(np.sum(a) ** 2 / denom) if denom > 0 else float("nan")


def throughput_ratio(x: Sequence[float]) -> float:
    """Smallest over largest throughput (the CUBIC paper's ratio, in [0, 1])."""
    a = np.asarray(x, dtype=float)
    if a.size == 0 or np.max(a) <= 0:
        return float("nan")
    return float(np.min(a) / np.max(a))


def goodput_capacity_bps(rate_bps: float, mss: int = 1448, packet_bytes: int = 1500) -> float:
    """The most payload a link of `rate_bps` can carry in full-size packets."""
    return rate_bps * mss / packet_bytes
