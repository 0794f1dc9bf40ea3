"""Traffic in scenario files besides the long-lived flows: distributions,
UDP sources, web traffic generators and the named background set-ups of the
CUBIC evaluation. Each ``resolve_*`` function checks a part of the TOML
document and returns the engine's form of it; errors are ``ScenarioError``s
naming the field. docs/scenario.md documents the syntax.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ..errors import ScenarioError
from . import schema
from .catalogue import check_param_values
from .checks import check_keys, did_you_mean, excerpt, number, positive_duration, unit
from .tcp import resolve_tcp
from .units import parse_duration, parse_rate, parse_size

__all__ = [
    "BACKGROUNDS",
    "surge",
    "resolve_dist",
    "direction_of",
    "resolve_udp",
    "resolve_web",
]

#: Fields of a distribution a scenario may write besides the engine's:
#: A lognormal body's median (with a unit) instead of mu.
_SCENARIO_ONLY = {"lognormal": {"median"}, "lognormal_pareto": {"median"}}
#: Fields without a unit (shapes); the others take the unit of the value drawn.
_UNITLESS = {"alpha", "sigma", "mu", "tail", "probabilities"}


def surge() -> dict:
    """SURGE file sizes (Barford and Crovella 1998) in engine form: lognormal
    body (mu 9.357, sigma 1.318, ln bytes) below 133 KB, Pareto tail (alpha
    1.1) above, 7 % of files in the tail: the engine's default web sizes
    without their cap (``max_size`` sets it)."""
    d = schema.default("web", "sizes")
    return {"distribution": d["distribution"], **{k: v for k, v in d.items() if k not in ("distribution", "max")}}


def default_max_size() -> int:
    """The default cap of web transfer sizes (bytes): the engine's default sizes' cap."""
    return int(schema.default("web", "sizes")["max"])


def resolve_dist(value: Any, parse: Callable[[Any], int], where: str) -> dict:
    """A distribution in engine form (values in the unit `parse` returns: ns
    or bytes). A plain value is a constant; a table names its ``distribution``:
    constant {value}, uniform {min, max}, exponential {mean}, normal {mean, sd,
    min, max}, lognormal {median or mu, sigma}, pareto {k, alpha, max},
    lognormal_pareto {median or mu, sigma, k, alpha, tail, max}, empirical
    {values, probabilities} (lists: measured percentiles); "surge" is SURGE's
    file sizes."""
    if value == "surge":
        return surge()
    if not isinstance(value, dict):
        return {"distribution": "constant", "value": float(unit(parse, value, where))}
    kinds = schema.variants("dist")
    kind = value.get("distribution")
    if kind not in kinds:
        raise ScenarioError(f"{where}.distribution", f"unknown distribution {excerpt(kind)}; allowed: {', '.join(kinds)}{did_you_mean(kind, kinds)}")
    fields = schema.fields("dist", kind)
    check_keys(value, set(fields) | _SCENARIO_ONLY.get(kind, set()) | {"distribution"}, where)
    out: dict[str, Any] = {"distribution": kind}
    for key, v in value.items():
        if key == "distribution":
            continue
        w = f"{where}.{key}"
        if fields.get(key, {}).get("list"):
            if not isinstance(v, list):
                raise ScenarioError(w, f"must be a list, got {excerpt(v)}")
            out[key] = [number(x, f"{w}[{i}]") if key in _UNITLESS else float(unit(parse, x, f"{w}[{i}]")) for i, x in enumerate(v)]
        elif key in _UNITLESS:
            out[key] = number(v, w)
        elif key == "max" and v == "none":
            continue
        else:
            out[key] = float(unit(parse, v, w))
    if kind in _SCENARIO_ONLY and "median" in out:
        if "mu" in out:
            raise ScenarioError(where, "give either median (with a unit) or mu (ln of ns or bytes)")
        if out["median"] <= 0:
            raise ScenarioError(f"{where}.median", "must be positive")
        out["mu"] = math.log(out.pop("median"))
    for key, f in fields.items():
        if key not in out:
            if f["required"]:
                hint = " (or median, with a unit)" if key == "mu" and kind in _SCENARIO_ONLY else ""
                raise ScenarioError(f"{where}.{key}", f"missing required field{hint}")
            continue
        schema.check_range(out[key], f, f"{where}.{key}", value.get(key))
    if kind == "uniform" and out["min"] > out["max"]:
        raise ScenarioError(where, "needs min <= max")
    if "max" in out and "k" in out and out["max"] <= out["k"]:
        raise ScenarioError(f"{where}.max", "must be larger than k")
    _check_shape(out, where)
    return out


# Shape parameters past these bounds give draws no float can hold (or a
# division by zero); real traffic models stay far inside them.
_SHAPE_LIMITS = {"alpha": (1e-3, 100.0), "sigma": (1e-6, 50.0), "mu": (-700.0, 700.0)}


def _check_shape(d: dict, where: str) -> None:
    for key, (lo, hi) in _SHAPE_LIMITS.items():
        if key in d and not lo <= d[key] <= hi:
            raise ScenarioError(f"{where}.{key}", f"must be in [{lo:g}, {hi:g}], got {d[key]:g}")


def direction_of(value: Any, where: str, both: bool = False) -> list[str]:
    """The directions a `direction` value means (`both` allows "both": one entry each way)."""
    allowed = ["forward", "reverse"] + (["both"] if both else [])
    if value not in allowed:
        raise ScenarioError(where, f"must be one of {', '.join(allowed)}, got {value!r}")
    return ["forward", "reverse"] if value == "both" else [value]


def _required_rate(t: dict, key: str, where: str, hint: str = "") -> int:
    if key not in t:
        raise ScenarioError(f"{where}.{key}", f"missing required field{hint}")
    rate = unit(parse_rate, t[key], f"{where}.{key}")
    if rate <= 0:
        raise ScenarioError(f"{where}.{key}", "must be positive")
    return rate


def _start_stop_label(t: dict, where: str, default_label: str) -> tuple[int, int | None, str]:
    """When a source runs (stop None: to the end) and its name in reports."""
    start = unit(parse_duration, t.get("start", 0), f"{where}.start")
    stop = unit(parse_duration, t["stop"], f"{where}.stop") if "stop" in t else None
    if stop is not None and stop <= start:
        raise ScenarioError(f"{where}.stop", "must be after start")
    label = t.get("label", default_label)
    if not isinstance(label, str):
        raise ScenarioError(f"{where}.label", "must be a string")
    return start, stop, label


_UDP_KEYS = {"rate", "pattern", "on", "off", "packet_size", "rtt", "start", "stop", "direction", "label", "count"}


def resolve_udp(tables: Any, duration_ns: int) -> list[dict]:
    """``[[udp]]`` tables: unresponsive sources (cbr, poisson, on_off)."""
    if not isinstance(tables, list):
        raise ScenarioError("udp", "must be a list of [[udp]] tables")
    out = []
    for i, t in enumerate(tables):
        where = f"udp[{i}]"
        check_keys(t, _UDP_KEYS, where)
        rate = _required_rate(t, "rate", where)
        pattern = t.get("pattern", "cbr")
        if pattern not in ("cbr", "poisson", "on_off"):
            raise ScenarioError(f"{where}.pattern", f"unknown pattern {pattern!r}; allowed: cbr, poisson, on_off")
        engine_pattern: dict[str, Any] = {"kind": pattern}
        if pattern == "on_off":
            for key in ("on", "off"):
                if key not in t:
                    raise ScenarioError(f"{where}.{key}", "missing required field (a duration or a distribution of durations)")
                engine_pattern[key] = resolve_dist(t[key], parse_duration, f"{where}.{key}")
        else:
            for key in ("on", "off"):
                if key in t:
                    raise ScenarioError(f"{where}.{key}", "only on_off sources have on and off periods")
        packet = schema.fields("udp")["packet_bytes"]
        size = unit(parse_size, t.get("packet_size", packet["default"]), f"{where}.packet_size")
        schema.check_range(size, packet, f"{where}.packet_size", t.get("packet_size"))
        rtt = positive_duration(t.get("rtt", "10ms"), f"{where}.rtt")
        start, stop, label = _start_stop_label(t, where, f"udp-{pattern}")
        count = t.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 1000:
            raise ScenarioError(f"{where}.count", f"must be an integer in 1..1000, got {count!r}")
        (direction,) = direction_of(t.get("direction", "forward"), f"{where}.direction")
        for _ in range(count):
            out.append(
                {
                    "rate": rate, "packet_bytes": size, "pattern": engine_pattern, "rtt": rtt, "start": start,
                    "stop": stop, "direction": direction, "label": label,
                }
            )
    return out


_WEB_KEYS = {"load", "direction", "cca", "cca_params", "rtt", "sizes", "max_size", "start", "stop", "label", "tcp"}


def resolve_web(tables: Any, names: list[str], base_tcp: dict) -> list[dict]:
    """``[[web]]`` tables: web-like short-flow generators (one per direction)
    whose algorithm is one of `names`; `base_tcp` is the scenario's [tcp]."""
    if not isinstance(tables, list):
        raise ScenarioError("web", "must be a list of [[web]] tables")
    out = []
    for i, t in enumerate(tables):
        where = f"web[{i}]"
        check_keys(t, _WEB_KEYS, where)
        load = _required_rate(t, "load", where, " (offered load, e.g. '38Mbps')")
        cca = t.get("cca", schema.default("web", "cca"))
        if cca not in names:
            raise ScenarioError(f"{where}.cca", f"unknown congestion control {cca!r}; allowed: {', '.join(sorted(names))}")
        params = t.get("cca_params", {})
        if not isinstance(params, dict):
            raise ScenarioError(f"{where}.cca_params", "must be a table such as { hystart = false }")
        check_param_values(cca, params, f"{where}.cca_params")
        rtt = resolve_dist(t["rtt"], parse_duration, f"{where}.rtt") if "rtt" in t else dict(schema.default("web", "rtt"))
        sizes = resolve_dist(t.get("sizes", "surge"), parse_size, f"{where}.sizes")
        cap = t.get("max_size", default_max_size())
        if cap == "none":
            sizes.pop("max", None)
        else:
            cap_bytes = unit(parse_size, cap, f"{where}.max_size")
            if sizes["distribution"] in ("pareto", "lognormal_pareto"):
                if cap_bytes <= sizes["k"]:
                    raise ScenarioError(f"{where}.max_size", f"must be larger than the tail's k ({sizes['k']:.0f} bytes)")
                sizes.setdefault("max", float(cap_bytes))
        start, stop, label = _start_stop_label(t, where, "web")
        tcp = resolve_tcp(t.get("tcp", {}), f"{where}.tcp", base_tcp)
        for direction in direction_of(t.get("direction", "forward"), f"{where}.direction", both=True):
            out.append(
                {
                    "load": load, "sizes": sizes, "rtt": rtt, "cca": cca, "cca_params": params, "tcp": tcp,
                    "direction": direction, "start": start, "stop": stop, "label": label,
                }
            )
    return out


#: Named background set-ups (``background = "..."`` in a scenario). Flow
#: tables use the [[flows]] syntax and are added after the scenario's own
#: flows, marked as background; `interest_start` delays the scenario's own
#: flows so that the background is established first.
BACKGROUNDS: dict[str, dict] = {
    "none": {"description": "No background traffic."},
    "testbed": {
        "description": (
            "Two groups of 12 long-lived Reno flows, both forward through the bottleneck (clients 3 and 4 to "
            "servers 3 and 4), whose data path has netem delay 200 ms +- 200 ms after the bottleneck (uniform "
            "jitter, reordering as netem does) and whose ACKs return without it over the testbed's 2 ms; "
            "the flows under study start 5 s later."
        ),
        "flows": [
            {
                "cca": "reno", "count": 12, "rtt": "2ms", "data_delay": "200ms", "jitter": "200ms",
                "label": "background-3",
            },
            {
                "cca": "reno", "count": 12, "rtt": "2ms", "data_delay": "200ms", "jitter": "200ms",
                "label": "background-4",
            },
        ],
        "interest_start": "5s",
    },
    "paper": {
        "description": (
            "12 forward and 2 reverse long-lived Reno flows with exponential RTTs (mean one-way delay 66 ms), "
            "and SURGE web traffic of 38 Mbps in each direction; the flows under study start 5 s later."
        ),
        "flows": [
            {"cca": "reno", "count": 12, "rtt": {"distribution": "exponential", "mean": "132ms"}, "label": "background-forward"},
            {
                "cca": "reno", "count": 2, "rtt": {"distribution": "exponential", "mean": "132ms"},
                "direction": "reverse", "label": "background-reverse",
            },
        ],
        "web": [{"load": "38Mbps", "direction": "both", "label": "web"}],
        "interest_start": "5s",
    },
}
