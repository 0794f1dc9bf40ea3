"""The engine's scenario schema, read once per process from
``_engine.schema_json()``: which fields each leaf table (tcp, run, queue
disciplines, loss models, distributions, udp, web, path dynamics) has, their
kinds, defaults and ranges, and the start of the message for a value outside
a range (``rule``). Python checks a scenario's leaf values against it, so a
limit is written once, in the engine, and a mistake is reported naming the
field as the scenario wrote it before the engine sees its input.
"""

from __future__ import annotations

import json
import math
from functools import cache
from typing import Any

from .. import _engine
from ..errors import ScenarioError

__all__ = ["tables", "fields", "variants", "default", "check_range"]


@cache
def tables() -> dict[str, dict]:
    """The schema's tables by name (exported by the engine, read once)."""
    schema = json.loads(_engine.schema_json())
    return schema["tables"]


def fields(table: str, variant: str | None = None) -> dict[str, dict]:
    """The fields of `table` (of its `variant`, for a tagged table)."""
    t = tables()[table]
    return t["variants"][variant]["fields"] if variant is not None else t["fields"]


def variants(table: str) -> list[str]:
    """The variants of a tagged table (queue disciplines, loss models, ...), in the schema's order."""
    return list(tables()[table]["variants"])


def default(table: str, name: str, variant: str | None = None) -> Any:
    """The engine's default of a field."""
    return fields(table, variant)[name]["default"]


def check_range(value: float, field: dict, where: str, shown: Any = None) -> None:
    """Raises ``ScenarioError`` (the field's ``rule``, then the value as
    written, `shown`) when `value` (in engine units) is outside the field's
    range or not one of its allowed values."""
    ok = True
    if "one_of" in field:
        ok = value in field["one_of"]
    lo, hi = field.get("min"), field.get("max")
    if lo is not None:
        ok = ok and (value > lo if field.get("exclusive_min") else value >= lo)
    if hi is not None:
        ok = ok and (value < hi if field.get("exclusive_max") else value <= hi)
    if not ok or (isinstance(value, float) and not math.isfinite(value)):
        got = value if shown is None else shown
        raise ScenarioError(where, f"{field.get('rule', 'out of range')}, got {got!r}" if isinstance(got, str) else f"{field.get('rule', 'out of range')}, got {got}")
