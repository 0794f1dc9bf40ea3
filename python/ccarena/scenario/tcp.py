"""The ``[tcp]`` tables of a scenario (top level, per flow, per web
generator): Linux's TCP knobs in engine form. Which knobs there are, their
kinds, ranges and defaults (Linux's, which the engine applies to what a
table leaves out) come from the engine's schema (``schema.fields("tcp")``);
docs/scenario.md lists them.
"""

from __future__ import annotations

from typing import Any

from ..errors import ScenarioError
from . import schema
from .checks import boolean, check_keys, excerpt, unit
from .units import parse_duration, parse_size

__all__ = ["resolve_tcp"]

# Engine fields a scenario writes under another name: rto_min is a duration
# with a unit there, rto_min_us microseconds in the engine.
_SCENARIO_NAME = {"rto_min_us": "rto_min"}


def _keys() -> dict[str, str]:
    """Scenario name -> engine name of every tcp field."""
    return {_SCENARIO_NAME.get(name, name): name for name in schema.fields("tcp")}


def resolve_tcp(table: Any, where: str, base: dict) -> dict:
    """`base` (the scenario's [tcp], already resolved) with `table`'s settings on top."""
    keys = _keys()
    check_keys(table, keys, where)
    fields = schema.fields("tcp")
    out = dict(base)
    for key, value in table.items():
        name = keys[key]
        f, w = fields[name], f"{where}.{key}"
        kind = f["kind"]
        if kind == "bool":
            out[name] = boolean(value, w)
            continue
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise ScenarioError(w, f"must be an integer, got {excerpt(value)}")
            out[name] = value
        elif kind == "duration_us":
            out[name] = unit(parse_duration, value, w) // 1000
        elif kind == "bytes":
            out[name] = unit(parse_size, value, w)
        else:  # a kind this layer does not know yet: the engine checks it
            out[name] = value
            continue
        schema.check_range(out[name], f, w, value)
    # A bound set by another field (a buffer must hold one segment of mss):
    # the segment size is the table's, else the inherited one, else the default.
    for name, f in fields.items():
        other = f.get("min_field")
        if other and name in out and out[name] < out.get(other, fields[other]["default"]):
            key = _SCENARIO_NAME.get(name, name)
            shown = table.get(key, out[name])
            raise ScenarioError(f"{where}.{key}", f"{f['rule']}, got {shown!r}" if isinstance(shown, str) else f"{f['rule']}, got {shown}")
    return out
