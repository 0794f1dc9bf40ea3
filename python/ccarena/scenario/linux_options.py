"""The ``[linux]`` table of a scenario: options of the linux backend only
(the simulator ignores them, but they are checked for every scenario so that
a typo is found before a kernel run). Documented in docs/linux-backend.md.

    [linux]
    offloads = false        # TSO/GSO/GRO on every veth (true: the kernel's default)
    tbf_burst = "auto"      # tbf bucket size; "auto" = max(2 packets, 1 ms at the rate)
    rps = true              # spread receive processing over all cores (RPS) on every link
"""

from __future__ import annotations

from typing import Any

from ..errors import ScenarioError, UnitError
from .checks import boolean, check_keys
from .units import parse_size

__all__ = ["resolve_linux_options", "FRAME_BYTES", "auto_burst"]

# A full-size packet as tbf counts it: 1500-byte IP packet + 14-byte Ethernet header.
FRAME_BYTES = 1514

_KEYS = {"offloads", "tbf_burst", "rps"}


def auto_burst(rate_bps: int) -> int:
    """tbf burst: two full frames, or 1 ms worth of the rate if larger."""
    return max(2 * FRAME_BYTES, rate_bps // 8 // 1000)


def resolve_linux_options(table: Any, rate_bps: int) -> dict:
    """The options with their defaults filled in (`rate_bps`: the bottleneck's)."""
    check_keys(table, _KEYS, "linux")
    out = {"offloads": False, "rps": True, "tbf_burst": auto_burst(rate_bps)}
    for key in ("offloads", "rps"):
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
    return out
