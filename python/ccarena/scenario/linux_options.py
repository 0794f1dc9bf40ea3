"""The ``[linux]`` table of a scenario: options of the linux backend only
(the simulator ignores them, but they are checked for every scenario so that
a typo is found before a kernel run). Documented in docs/linux-backend.md.

    [linux]
    offloads = true         # TSO/GSO/GRO on every veth (default: [hosts].tso, so the kernel's
                            # hosts send as the simulator's do)
    tbf_burst = "auto"      # tbf bucket size; "auto" = max(2 packets, 1 ms at the rate)
    rps = true              # spread receive processing over all cores (RPS) on every link
    force_rate = false      # run a bottleneck_rate above what the machine carries (flagged)
"""

from __future__ import annotations

from typing import Any

from ..errors import ScenarioError, UnitError
from .checks import boolean, check_keys
from .units import parse_size

__all__ = ["resolve_linux_options", "FRAME_BYTES", "auto_burst", "max_burst", "MAX_BURST_MS"]

# A full-size packet as tbf counts it: 1500-byte IP packet + 14-byte Ethernet header.
FRAME_BYTES = 1514

_KEYS = {"offloads", "tbf_burst", "rps", "force_rate"}
# The largest bucket: this many ms at the rate (or 4 frames at low rates). tbf
# sends a full bucket at line rate, so a bucket of B bytes lets a burst of B
# through regardless of the rate: 1 GB let 1.8 Gbps through a 50 Mbps link.
MAX_BURST_MS = 10


def auto_burst(rate_bps: int) -> int:
    """tbf burst: two full frames, or 1 ms worth of the rate if larger."""
    return max(2 * FRAME_BYTES, rate_bps // 8 // 1000)


def max_burst(rate_bps: int) -> int:
    """The largest tbf burst accepted: `MAX_BURST_MS` at the rate, at least 4 frames."""
    return max(4 * FRAME_BYTES, rate_bps // 8 * MAX_BURST_MS // 1000)


def resolve_linux_options(table: Any, rate_bps: int, offloads: bool = True) -> dict:
    """The options with their defaults filled in (`rate_bps`: the bottleneck's;
    `offloads`: the default, the scenario's ``[hosts] tso``)."""
    check_keys(table, _KEYS, "linux")
    out = {"offloads": offloads, "rps": True, "tbf_burst": auto_burst(rate_bps), "force_rate": False}
    for key in ("offloads", "rps", "force_rate"):
        if key in table:
            out[key] = boolean(table[key], f"linux.{key}")
    burst = table.get("tbf_burst", "auto")
    if burst != "auto":
        try:
            out["tbf_burst"] = parse_size(burst)
        except UnitError as e:
            raise ScenarioError("linux.tbf_burst", f"{e}; or \"auto\"") from None
        if out["tbf_burst"] < FRAME_BYTES:
            raise ScenarioError("linux.tbf_burst", f"must hold one full frame ({FRAME_BYTES} bytes), got {burst!r}")
        if out["tbf_burst"] > max_burst(rate_bps):
            raise ScenarioError(
                "linux.tbf_burst",
                f"at most {max_burst(rate_bps)} bytes at this bottleneck_rate ({MAX_BURST_MS} ms at the rate, or 4 frames): "
                f"tbf lets a whole bucket through at line rate; got {burst!r}",
            )
    return out
