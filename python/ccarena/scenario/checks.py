"""The small checks every part of a scenario uses, so that a message reads the
same wherever the mistake is: unknown keys, missing fields, values with units,
integers, probabilities, true/false. Each takes the dotted path of the value
(``where``) and raises ``ScenarioError`` naming it.

``engine_error`` is the one place that turns an error the engine raised while
checking its input back into a ``ScenarioError``.
"""

from __future__ import annotations

import difflib
import math
import re
from typing import Any, Callable

from ..errors import ScenarioError, UnitError
from .units import parse_duration

__all__ = [
    "check_keys",
    "did_you_mean",
    "unit",
    "require",
    "int_in",
    "prob",
    "number",
    "boolean",
    "positive_duration",
    "engine_error",
    "file_name",
    "check_name",
    "excerpt",
]

# A file-system name is at most 255 bytes; names made from scenario text stay
# well below so that suffixes ("-seed1-linux", ".tmp-PID") still fit.
_NAME_LIMIT = 100


def file_name(text: str, default: str = "scenario") -> str:
    """`text` as one safe path component: letters, digits, '_', '.', '-' only,
    no leading or trailing dot or dash (so never "." or ".."), at most 100
    characters; `default` when nothing is left."""
    s = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-.")
    return s[:_NAME_LIMIT].rstrip("-.") or default


def check_name(value: Any, where: str = "name") -> str:
    """A scenario or experiment name: a printable string of at most 200 characters.
    (It is shown as written; directories use its `file_name`.)"""
    if not isinstance(value, str) or not value.strip():
        raise ScenarioError(where, f"must be a non-empty string, got {excerpt(value)}")
    if len(value) > 200:
        raise ScenarioError(where, f"must be at most 200 characters, got {len(value)}")
    if any(not c.isprintable() for c in value):
        raise ScenarioError(where, f"must not contain control characters, got {excerpt(value)}")
    return value


def excerpt(value: Any, limit: int = 40) -> str:
    """A short, escaped quotation of `value` for an error message (repr, control
    characters escaped, cut at `limit` characters with an ellipsis)."""
    text = repr(value) if not isinstance(value, str) else repr(value)
    text = text.encode("ascii", "backslashreplace").decode("ascii")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_keys(table: Any, allowed: set[str] | dict, where: str) -> dict:
    """`table` as a dict whose keys are all in `allowed`."""
    if not isinstance(table, dict):
        raise ScenarioError(where, f"must be a table, got {table!r}")
    for key in table:
        if key not in allowed:
            raise ScenarioError(f"{where}.{key}" if where else key, f"unknown field; allowed: {', '.join(sorted(allowed))}{did_you_mean(key, allowed)}")
    return table


def did_you_mean(name: Any, allowed: Any) -> str:
    """"; did you mean 'x'?" for a near miss among `allowed`, else ""."""
    if not isinstance(name, str):
        return ""
    close = difflib.get_close_matches(name, sorted(str(a) for a in allowed), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def unit(parse: Callable[[Any], Any], value: Any, where: str) -> Any:
    """`parse(value)` (a parser of ``units``), its ``UnitError`` named for `where`."""
    try:
        return parse(value)
    except UnitError as e:
        raise ScenarioError(where, str(e)) from None


def require(table: dict, key: str, where: str) -> Any:
    if key not in table:
        raise ScenarioError(f"{where}.{key}", "missing required field")
    return table[key]


def int_in(value: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(where, f"must be an integer in {lo}..{hi}, got {value!r}")
    if not lo <= value <= hi:
        raise ScenarioError(where, f"must be in {lo}..{hi}, got {value}")
    return value


def prob(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ScenarioError(where, f"must be a probability in [0, 1], got {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise ScenarioError(where, f"must be a probability in [0, 1], got {value}")
    return float(value)


def number(value: Any, where: str, lo: float = -math.inf, hi: float = math.inf) -> float:
    """A finite number in [lo, hi] (an integer too large for a float is refused, not an OverflowError)."""
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or (isinstance(value, int) and abs(value) > 2**1000) or not math.isfinite(value) or not lo <= value <= hi):
        raise ScenarioError(where, f"must be a number in [{lo:g}, {hi:g}], got {excerpt(value)}")
    return float(value)


def boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ScenarioError(where, f"must be true or false, got {value!r}")
    return value


def positive_duration(value: Any, where: str) -> int:
    ns = unit(parse_duration, value, where)
    if ns <= 0:
        raise ScenarioError(where, "must be positive")
    return ns


_EXPANDED = re.compile(r"(flows|udp|web)\[(\d+)\]")


def engine_error(error: ValueError, origins: dict[str, list[str]] | None = None) -> ScenarioError:
    """The engine's complaint about its input as a ``ScenarioError``.

    The engine raises ``ConfigError`` with the dotted field it refused
    (``flows[5].tcp.mss``) and the message. `origins` maps each engine list
    (``flows``, ``udp``, ``web``) to the scenario table every entry came from
    (a table with ``count = 3`` gives three engine flows), so the field is
    named as the user wrote it (``flows[1].tcp.mss``). Any other ValueError
    (the engine could not read its input at all) is reported as it is.
    """
    field, message = getattr(error, "field", None), getattr(error, "message", None)
    if not isinstance(field, str) or not isinstance(message, str):
        return ScenarioError("scenario", str(error))
    m = _EXPANDED.match(field)
    if m and origins is not None:
        table = origins.get(m.group(1), [])
        index = int(m.group(2))
        if index < len(table):
            field = table[index] + field[m.end():]
    if m and m.group(1) == "udp":
        # A [[udp]] table writes the on-off periods beside `pattern`
        # (`on = ...`), the engine inside it (`pattern.on`).
        field = re.sub(r"\.pattern\.(on|off)$", r".\1", field)
    return ScenarioError(field, message)
