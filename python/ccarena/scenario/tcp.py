"""The ``[tcp]`` tables of a scenario (top level, per flow, per web
generator): Linux's TCP knobs in engine form. docs/scenario.md lists them
with Linux's defaults, which the engine applies to what a table leaves out.
"""

from __future__ import annotations

from typing import Any

from ..errors import ScenarioError
from .checks import boolean, check_keys, int_in, unit
from .units import parse_duration, parse_size

__all__ = ["resolve_tcp"]

# The engine's TcpConfig fields as a scenario writes them, with the kind of
# value each takes (rto_min is a duration here, rto_min_us in the engine).
_TCP_KEYS = {
    "mss": "int",
    "initial_cwnd": "int",
    "sack": "bool",
    "hz": "int",
    "rto_min": "duration",
    "sndbuf": "size",
    "rcvbuf": "size",
    "delayed_ack": "bool",
    "tlp": "bool",
    "frto": "bool",
    "pacing": "bool",
    "ecn": "bool",
    "slow_start_after_idle": "bool",
}
_INT_LIMITS = {"mss": (64, 65000), "initial_cwnd": (1, 1000), "hz": (100, 1000)}


def resolve_tcp(table: Any, where: str, base: dict) -> dict:
    """`base` (the scenario's [tcp], already resolved) with `table`'s settings on top."""
    check_keys(table, _TCP_KEYS, where)
    out = dict(base)
    for key, value in table.items():
        kind = _TCP_KEYS[key]
        w = f"{where}.{key}"
        if kind == "bool":
            out[key] = boolean(value, w)
        elif kind == "int":
            out[key] = int_in(value, w, *_INT_LIMITS[key])
            if key == "hz" and value not in (100, 250, 300, 1000):
                raise ScenarioError(w, f"must be one of 100, 250, 300, 1000, got {value}")
        elif kind == "duration":
            out["rto_min_us"] = unit(parse_duration, value, w) // 1000
            if out["rto_min_us"] <= 0:
                raise ScenarioError(w, "must be positive")
        else:
            out[key] = unit(parse_size, value, w)
            if out[key] < 1500:
                raise ScenarioError(w, f"must hold at least one segment, got {value!r}")
    return out
