"""Human units for scenarios: durations ("82ms"), rates ("400Mbps"), sizes
("2MB", "64MiB") and buffer sizes, which may also be given in packets ("200p")
or bandwidth-delay products ("1.5bdp"). Each parser returns engine units
(nanoseconds, bits per second, bytes) or raises ``UnitError`` with a message
that says what is allowed; callers prefix it with the field name.
``numeric``/``unit_of`` read a value written with a unit as a plain number
for tables and plots (durations in ms, rates in Mbps).
"""

from __future__ import annotations

import math
from typing import Any
import re

from ..errors import UnitError

__all__ = [
    "UnitError",
    "ENGINE_MAX",
    "parse_duration",
    "parse_rate",
    "parse_size",
    "parse_buffer",
    "format_duration",
    "format_rate",
    "format_size",
    "numeric",
    "unit_of",
]


_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

_TIME_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "min": 60_000_000_000}
_RATE_UNITS = {
    "bps": 1,
    "kbps": 1_000,
    "mbps": 1_000_000,
    "gbps": 1_000_000_000,
    "tbps": 1_000_000_000_000,
    "bit": 1,
    "kbit": 1_000,
    "mbit": 1_000_000,
    "gbit": 1_000_000_000,
}
_SIZE_UNITS = {
    "b": 1,
    "kb": 1_000,
    "mb": 1_000_000,
    "gb": 1_000_000_000,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
}


# The largest value in engine units (ns, bit/s, bytes) a scenario may give: the
# engine keeps them in 64-bit integers and adds them up (a start plus a
# duration, a rate times a time), so values stay far below 2^63.
ENGINE_MAX = 2**62


def _q(value: object) -> str:
    """`value` quoted for a message: repr, non-ASCII escaped, at most 40 characters."""
    text = repr(value).encode("ascii", "backslashreplace").decode("ascii")
    return text if len(text) <= 40 else text[:37] + "..."


def _engine_int(x: float, value: object) -> int:
    """`x` (already in engine units) as an integer the engine can hold."""
    if not math.isfinite(x) or abs(x) > ENGINE_MAX:
        raise UnitError(f"{_q(value)} is too large")
    return int(round(x))


def _split(value: object, what: str, example: str) -> tuple[float, str]:
    if isinstance(value, bool):
        raise UnitError(f"expected a {what} such as '{example}', got {_q(value)}")
    if isinstance(value, (int, float)):
        if value == 0:
            return 0.0, ""
        raise UnitError(f"{_q(value)} has no unit; write a {what} such as '{example}'")
    if not isinstance(value, str):
        raise UnitError(f"expected a {what} such as '{example}', got {_q(value)}")
    text = value.strip()
    if text.startswith("-"):
        raise UnitError(f"must not be negative, got {_q(value)}")
    m = re.fullmatch(_NUMBER + r"\s*([A-Za-zµ]*)", text)
    if not m:
        raise UnitError(f"expected a {what} such as '{example}', got {_q(value)}")
    number = float(m.group(1))
    if not math.isfinite(number):
        raise UnitError(f"{_q(value)} is too large")
    if m.group(2) == "" and number != 0:
        raise UnitError(f"{_q(value)} has no unit; write a {what} such as '{example}'")
    return number, m.group(2)


def parse_duration(value: object) -> int:
    """Nanoseconds from e.g. '82ms', '1.5s', '200us', '2min' (0 may be bare)."""
    number, unit = _split(value, "duration", "82ms")
    if unit == "" and number == 0:
        return 0
    factor = _TIME_UNITS.get(unit)
    if factor is None:
        raise UnitError(f"unknown time unit {_q(unit)} in {_q(value)}; allowed: ns, us, ms, s, min")
    return _engine_int(number * factor, value)


def parse_rate(value: object) -> int:
    """Bits per second from e.g. '400Mbps', '1Gbps', '100mbit'."""
    number, unit = _split(value, "rate", "400Mbps")
    if unit == "" and number == 0:
        return 0
    if unit in ("MBps", "GBps", "KBps", "Bps"):
        raise UnitError(f"{_q(value)}: rates are in bits per second; write e.g. '400Mbps'")
    factor = _RATE_UNITS.get(unit.lower())
    if factor is None:
        raise UnitError(f"unknown rate unit {_q(unit)} in {_q(value)}; allowed: bps, Kbps, Mbps, Gbps, Tbps (or kbit, mbit, gbit)")
    return _engine_int(number * factor, value)


def parse_size(value: object) -> int:
    """Bytes from e.g. '2MB' (10^6), '64MiB' (2^20), '1500B'."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise UnitError(f"must not be negative, got {value}")
        return _engine_int(value, value)
    number, unit = _split(value, "size", "2MB")
    if unit == "" and number == 0:
        return 0
    factor = _SIZE_UNITS.get(unit.lower())
    if factor is None:
        raise UnitError(f"unknown size unit {_q(unit)} in {_q(value)}; allowed: B, KB, MB, GB (powers of 1000), KiB, MiB, GiB")
    return _engine_int(number * factor, value)


def parse_buffer(value: object) -> tuple[str, float]:
    """A queue size: ('bytes', n), ('packets', n) or ('bdp', multiple)."""
    if isinstance(value, str):
        text = value.strip()
        m = re.fullmatch(_NUMBER + r"\s*(p|pkt|pkts|packets|kp)", text)
        if m:
            n = float(m.group(1)) * (1000 if m.group(2) == "kp" else 1)
            _engine_int(n, value)
            if n != int(n):
                raise UnitError(f"a packet count must be whole, got {_q(value)}")
            return "packets", int(n)
        m = re.fullmatch(_NUMBER + r"\s*(bdp|BDP)", text)
        if m:
            multiple = float(m.group(1))
            if multiple > 1e6:
                raise UnitError(f"{_q(value)} is too large (at most 1e6 BDPs)")
            return "bdp", multiple
    try:
        return "bytes", parse_size(value)
    except UnitError as e:
        raise UnitError(f"{e}; a buffer may also be given in packets ('200p') or bandwidth-delay products ('1.5bdp')") from None


def format_duration(ns: int | float) -> str:
    ns = float(ns)
    for unit, factor in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= factor:
            return f"{ns / factor:g}{unit}"
    return f"{ns:g}ns"


def format_rate(bps: int | float) -> str:
    bps = float(bps)
    for unit, factor in (("Gbps", 1e9), ("Mbps", 1e6), ("Kbps", 1e3)):
        if abs(bps) >= factor:
            return f"{bps / factor:g}{unit}"
    return f"{bps:g}bps"


def format_size(b: int | float) -> str:
    b = float(b)
    for unit, factor in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(b) >= factor:
            return f"{b / factor:g}{unit}"
    return f"{b:g}B"


def numeric(value: Any) -> float | None:
    """A swept value as a number for plotting: durations in ms, rates in Mbps,
    buffers in packets or bytes as written, plain numbers as they are."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        return None
    for parse, scale in ((parse_duration, 1e-6), (parse_rate, 1e-6)):
        try:
            return parse(value) * scale
        except UnitError:
            pass
    try:
        kind, amount = parse_buffer(value)
        return float(amount)
    except UnitError:
        return None


def unit_of(value: Any) -> str:
    """The unit `numeric` converted `value` to ('ms', 'Mbps', 'packets', ...)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return ""
    if isinstance(value, str):
        try:
            parse_duration(value)
            return "ms"
        except UnitError:
            pass
        try:
            parse_rate(value)
            return "Mbps"
        except UnitError:
            pass
        try:
            kind, _ = parse_buffer(value)
            return {"packets": "packets", "bytes": "bytes", "bdp": "BDP"}[kind]
        except UnitError:
            pass
    return ""
