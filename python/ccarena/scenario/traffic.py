"""Traffic and path models in scenario files: distributions, UDP sources, web
traffic generators, path dynamics, rate traces and the named background
set-ups of the CUBIC evaluation. Each ``resolve_*`` function checks a part of
the TOML document and returns the engine's form of it; errors are
``ScenarioError``s naming the field. docs/scenario.md documents the syntax.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any, Callable

from .units import UnitError, parse_duration, parse_rate, parse_size

__all__ = [
    "BACKGROUNDS",
    "TRACE_DIR",
    "resolve_dist",
    "sample_dist",
    "resolve_udp",
    "resolve_web",
    "resolve_dynamics",
    "resolve_trace",
    "trace_names",
]

#: Shipped Mahimahi-format traces (one delivery opportunity per line, in ms).
TRACE_DIR = Path(__file__).parent / "traces"

#: SURGE file sizes (Barford and Crovella 1998): lognormal body (mu 9.357,
#: sigma 1.318, ln bytes) below 133 KB, Pareto tail (alpha 1.1) above, 7 % of
#: files in the tail.
SURGE = {"distribution": "lognormal_pareto", "mu": 9.357, "sigma": 1.318, "k": "133KB", "alpha": 1.1, "tail": 0.07}
#: Default cap of web transfer sizes (the engine's default too).
DEFAULT_MAX_SIZE = "10MB"

_DIST_FIELDS = {
    "constant": {"value"},
    "uniform": {"min", "max"},
    "exponential": {"mean"},
    "normal": {"mean", "sd", "min", "max"},
    "lognormal": {"median", "mu", "sigma"},
    "pareto": {"k", "alpha", "max"},
    "lognormal_pareto": {"mu", "sigma", "k", "alpha", "tail", "max"},
}
_UNITLESS = {"alpha", "sigma", "mu", "tail"}


def _err(field: str, message: str):
    from .model import ScenarioError

    return ScenarioError(field, message)


def _unit(parse: Callable, value: Any, where: str) -> Any:
    try:
        return parse(value)
    except UnitError as e:
        raise _err(where, str(e)) from None


def _number(value: Any, where: str, lo: float = -math.inf, hi: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise _err(where, f"must be a number in [{lo:g}, {hi:g}], got {value!r}")
    return float(value)


def _check_keys(table: Any, allowed: set[str], where: str) -> dict:
    if not isinstance(table, dict):
        raise _err(where, f"must be a table, got {table!r}")
    for key in table:
        if key not in allowed:
            raise _err(f"{where}.{key}", f"unknown field; allowed: {', '.join(sorted(allowed))}")
    return table


def resolve_dist(value: Any, parse: Callable[[Any], int], where: str) -> dict:
    """A distribution in engine form (values in the unit `parse` returns: ns
    or bytes). A plain value is a constant; a table names its ``distribution``:
    constant {value}, uniform {min, max}, exponential {mean}, normal {mean, sd,
    min, max}, lognormal {median or mu, sigma}, pareto {k, alpha, max},
    lognormal_pareto {mu, sigma, k, alpha, tail, max}; "surge" is SURGE's file sizes."""
    if value == "surge":
        value = dict(SURGE)
    if not isinstance(value, dict):
        return {"distribution": "constant", "value": float(_unit(parse, value, where))}
    kind = value.get("distribution")
    if kind not in _DIST_FIELDS:
        raise _err(f"{where}.distribution", f"unknown distribution {kind!r}; allowed: {', '.join(_DIST_FIELDS)}")
    _check_keys(value, _DIST_FIELDS[kind] | {"distribution"}, where)
    out: dict[str, Any] = {"distribution": kind}
    for key, v in value.items():
        if key == "distribution":
            continue
        w = f"{where}.{key}"
        if key in _UNITLESS:
            out[key] = _number(v, w, 0.0 if key != "mu" else -math.inf)
        elif key == "max" and v == "none":
            continue
        else:
            out[key] = float(_unit(parse, v, w))
    required = {
        "constant": ["value"], "uniform": ["min", "max"], "exponential": ["mean"], "normal": ["mean", "sd"],
        "lognormal": ["sigma"], "pareto": ["k", "alpha"], "lognormal_pareto": ["mu", "sigma", "k", "alpha"],
    }[kind]
    for key in required:
        if key not in out:
            raise _err(f"{where}.{key}", "missing required field")
    if kind == "lognormal":
        if ("median" in out) == ("mu" in out):
            raise _err(where, "give either median (with a unit) or mu (ln of ns or bytes)")
        if "median" in out:
            if out["median"] <= 0:
                raise _err(f"{where}.median", "must be positive")
            out["mu"] = math.log(out.pop("median"))
    if kind == "uniform" and out["min"] > out["max"]:
        raise _err(where, "needs min <= max")
    if kind == "exponential" and out["mean"] <= 0:
        raise _err(f"{where}.mean", "must be positive")
    if kind == "normal" and out["sd"] <= 0:
        raise _err(f"{where}.sd", "must be positive")
    if "tail" in out and not 0 <= out["tail"] < 1:
        raise _err(f"{where}.tail", "must be in [0, 1)")
    if "max" in out and "k" in out and out["max"] <= out["k"]:
        raise _err(f"{where}.max", "must be larger than k")
    return out


def sample_dist(d: dict, rng: random.Random) -> float:
    """One draw from an engine-form distribution (for values fixed per flow
    when a scenario is resolved, such as long-lived flows' RTTs)."""
    kind = d["distribution"]
    if kind == "constant":
        return d["value"]
    if kind == "uniform":
        return rng.uniform(d["min"], d["max"])
    if kind == "exponential":
        return rng.expovariate(1.0 / d["mean"])
    if kind == "normal":
        lo, hi = d.get("min", -math.inf), d.get("max", math.inf)
        for _ in range(10_000):
            x = rng.gauss(d["mean"], d["sd"])
            if lo <= x <= hi:
                return x
        return min(max(d["mean"], lo), hi)
    if kind == "lognormal":
        return rng.lognormvariate(d["mu"], d["sigma"])

    def pareto(k: float, alpha: float, cap: float | None) -> float:
        mass = 1.0 - (k / cap) ** alpha if cap else 1.0
        return min(k / (1.0 - rng.random() * mass) ** (1.0 / alpha), cap or math.inf)

    if kind == "pareto":
        return pareto(d["k"], d["alpha"], d.get("max"))
    # lognormal_pareto
    body_at_k = 0.5 * math.erfc(-(math.log(d["k"]) - d["mu"]) / d["sigma"] / math.sqrt(2))
    tail = d.get("tail", 1.0 - body_at_k)
    if rng.random() < tail:
        return pareto(d["k"], d["alpha"], d.get("max"))
    while True:
        x = rng.lognormvariate(d["mu"], d["sigma"])
        if x < d["k"]:
            return x


def direction_of(value: Any, where: str, both: bool = False) -> list[str]:
    """The directions a `direction` value means (`both` allows "both": one entry each way)."""
    allowed = ["forward", "reverse"] + (["both"] if both else [])
    if value not in allowed:
        raise _err(where, f"must be one of {', '.join(allowed)}, got {value!r}")
    return ["forward", "reverse"] if value == "both" else [value]


def _positive_duration(value: Any, where: str) -> int:
    ns = _unit(parse_duration, value, where)
    if ns <= 0:
        raise _err(where, "must be positive")
    return ns


def _required_rate(t: dict, key: str, where: str, hint: str = "") -> int:
    if key not in t:
        raise _err(f"{where}.{key}", f"missing required field{hint}")
    rate = _unit(parse_rate, t[key], f"{where}.{key}")
    if rate <= 0:
        raise _err(f"{where}.{key}", "must be positive")
    return rate


def _start_stop_label(t: dict, where: str, default_label: str) -> tuple[int, int | None, str]:
    """When a source runs (stop None: to the end) and its name in reports."""
    start = _unit(parse_duration, t.get("start", 0), f"{where}.start")
    stop = _unit(parse_duration, t["stop"], f"{where}.stop") if "stop" in t else None
    if stop is not None and stop <= start:
        raise _err(f"{where}.stop", "must be after start")
    label = t.get("label", default_label)
    if not isinstance(label, str):
        raise _err(f"{where}.label", "must be a string")
    return start, stop, label


_UDP_KEYS = {"rate", "pattern", "on", "off", "packet_size", "rtt", "start", "stop", "direction", "label", "count"}


def resolve_udp(tables: Any, duration_ns: int) -> list[dict]:
    """``[[udp]]`` tables: unresponsive sources (cbr, poisson, on_off)."""
    if not isinstance(tables, list):
        raise _err("udp", "must be a list of [[udp]] tables")
    out = []
    for i, t in enumerate(tables):
        where = f"udp[{i}]"
        _check_keys(t, _UDP_KEYS, where)
        rate = _required_rate(t, "rate", where)
        pattern = t.get("pattern", "cbr")
        if pattern not in ("cbr", "poisson", "on_off"):
            raise _err(f"{where}.pattern", f"unknown pattern {pattern!r}; allowed: cbr, poisson, on_off")
        engine_pattern: dict[str, Any] = {"kind": pattern}
        if pattern == "on_off":
            for key in ("on", "off"):
                if key not in t:
                    raise _err(f"{where}.{key}", "missing required field (a duration or a distribution of durations)")
                engine_pattern[key] = resolve_dist(t[key], parse_duration, f"{where}.{key}")
        else:
            for key in ("on", "off"):
                if key in t:
                    raise _err(f"{where}.{key}", "only on_off sources have on and off periods")
        size = _unit(parse_size, t.get("packet_size", "1500B"), f"{where}.packet_size")
        if not 28 <= size <= 65535:
            raise _err(f"{where}.packet_size", f"must be in 28B..65535B (IPv4 + UDP headers to the IP maximum), got {t['packet_size']!r}")
        rtt = _positive_duration(t.get("rtt", "10ms"), f"{where}.rtt")
        start, stop, label = _start_stop_label(t, where, f"udp-{pattern}")
        count = t.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 1000:
            raise _err(f"{where}.count", f"must be an integer in 1..1000, got {count!r}")
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


def resolve_web(tables: Any, names: list[str], resolve_tcp: Callable[[Any, str], dict]) -> list[dict]:
    """``[[web]]`` tables: web-like short-flow generators (one per direction)."""
    if not isinstance(tables, list):
        raise _err("web", "must be a list of [[web]] tables")
    out = []
    for i, t in enumerate(tables):
        where = f"web[{i}]"
        _check_keys(t, _WEB_KEYS, where)
        load = _required_rate(t, "load", where, " (offered load, e.g. '38Mbps')")
        cca = t.get("cca", "reno")
        if cca not in names:
            raise _err(f"{where}.cca", f"unknown congestion control {cca!r}; allowed: {', '.join(sorted(names))}")
        params = t.get("cca_params", {})
        if not isinstance(params, dict):
            raise _err(f"{where}.cca_params", "must be a table such as { hystart = false }")
        rtt = resolve_dist(t.get("rtt", {"distribution": "exponential", "mean": "132ms"}), parse_duration, f"{where}.rtt")
        sizes = resolve_dist(t.get("sizes", "surge"), parse_size, f"{where}.sizes")
        cap = t.get("max_size", DEFAULT_MAX_SIZE)
        if cap == "none":
            sizes.pop("max", None)
        else:
            cap_bytes = _unit(parse_size, cap, f"{where}.max_size")
            if sizes["distribution"] in ("pareto", "lognormal_pareto"):
                if cap_bytes <= sizes["k"]:
                    raise _err(f"{where}.max_size", f"must be larger than the tail's k ({sizes['k']:.0f} bytes)")
                sizes.setdefault("max", float(cap_bytes))
        start, stop, label = _start_stop_label(t, where, "web")
        tcp = resolve_tcp(t.get("tcp", {}), f"{where}.tcp")
        for direction in direction_of(t.get("direction", "forward"), f"{where}.direction", both=True):
            out.append(
                {
                    "load": load, "sizes": sizes, "rtt": rtt, "cca": cca, "cca_params": params, "tcp": tcp,
                    "direction": direction, "start": start, "stop": stop, "label": label,
                }
            )
    return out


def _setting(t: Any, where: str) -> dict:
    _check_keys(t, {"rate", "delay", "loss"}, where)
    out: dict[str, Any] = {}
    if "rate" in t:
        out["rate"] = _unit(parse_rate, t["rate"], f"{where}.rate")
        if out["rate"] <= 0:
            raise _err(f"{where}.rate", "must be positive")
    if "delay" in t:
        out["delay"] = _unit(parse_duration, t["delay"], f"{where}.delay")
    if "loss" in t:
        from .model import _resolve_loss

        out["loss"] = _resolve_loss(t["loss"], f"{where}.loss")
    if not out:
        raise _err(where, "sets nothing; give rate, delay or loss")
    return out


_DYNAMICS = {
    "step": {"at", "rate", "delay", "loss"},
    "pulse": {"start", "period", "duty", "high", "low", "until"},
    "random_walk": {"property", "interval", "initial", "min", "max", "step", "correlation", "bounds", "start", "until"},
}


def resolve_dynamics(tables: Any) -> list[dict]:
    """``[[network.dynamics]]``: step, pulse and random_walk changes of the
    forward bottleneck's rate, extra delay and loss."""
    if not isinstance(tables, list):
        raise _err("network.dynamics", "must be a list of [[network.dynamics]] tables")
    out = []
    for i, t in enumerate(tables):
        where = f"network.dynamics[{i}]"
        if not isinstance(t, dict):
            raise _err(where, "must be a table")
        kind = t.get("kind")
        if kind not in _DYNAMICS:
            raise _err(f"{where}.kind", f"unknown change {kind!r}; allowed: {', '.join(_DYNAMICS)}")
        _check_keys(t, _DYNAMICS[kind] | {"kind"}, where)
        opt_time = lambda k: _unit(parse_duration, t[k], f"{where}.{k}") if k in t else None  # noqa: E731
        if kind == "step":
            if "at" not in t:
                raise _err(f"{where}.at", "missing required field")
            at = _unit(parse_duration, t["at"], f"{where}.at")
            out.append({"kind": "step", "at": at, "set": _setting({k: t[k] for k in t if k in ("rate", "delay", "loss")}, where)})
        elif kind == "pulse":
            for k in ("period", "high", "low"):
                if k not in t:
                    raise _err(f"{where}.{k}", "missing required field")
            duty = _number(t.get("duty", 0.5), f"{where}.duty", 0.0, 1.0)
            if not 0 < duty < 1:
                raise _err(f"{where}.duty", "must be between 0 and 1 (exclusive)")
            out.append(
                {
                    "kind": "pulse", "start": opt_time("start") or 0, "period": _positive_duration(t["period"], f"{where}.period"),
                    "duty": duty, "high": _setting(t["high"], f"{where}.high"), "low": _setting(t["low"], f"{where}.low"),
                    "until": opt_time("until"),
                }
            )
        else:
            prop = t.get("property")
            parse = {"rate": parse_rate, "delay": parse_duration}.get(prop)
            if prop not in ("rate", "delay", "loss"):
                raise _err(f"{where}.property", f"must be one of rate, delay, loss, got {prop!r}")
            for k in ("interval", "initial", "min", "max", "step"):
                if k not in t:
                    raise _err(f"{where}.{k}", "missing required field")
            value = (lambda k: float(_unit(parse, t[k], f"{where}.{k}"))) if parse else (lambda k: _number(t[k], f"{where}.{k}", 0.0, 1.0))
            lo, hi, init = value("min"), value("max"), value("initial")
            if not lo <= init <= hi:
                raise _err(where, "needs min <= initial <= max")
            if prop == "rate" and lo <= 0:
                raise _err(f"{where}.min", "a rate must stay positive")
            out.append(
                {
                    "kind": "random_walk", "property": prop, "interval": _positive_duration(t["interval"], f"{where}.interval"),
                    "initial": init, "min": lo, "max": hi, "step": value("step"),
                    "correlation": _number(t.get("correlation", 0.0), f"{where}.correlation", 0.0, 0.999),
                    "bounds": _bounds(t.get("bounds", "clamp"), f"{where}.bounds"),
                    "start": opt_time("start") or 0, "until": opt_time("until"),
                }
            )
    return out


def _bounds(value: Any, where: str) -> str:
    if value not in ("clamp", "reflect"):
        raise _err(where, f"must be clamp or reflect, got {value!r}")
    return value


def trace_names() -> list[str]:
    return sorted(p.stem for p in TRACE_DIR.glob("*.trace"))


def read_trace(path: Path, where: str) -> list[int]:
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        try:
            ms = int(line)
        except ValueError:
            raise _err(where, f"{path.name} line {n}: expected a whole number of milliseconds, got {line!r}") from None
        if ms < 0 or (out and ms < out[-1]):
            raise _err(where, f"{path.name} line {n}: timestamps must be non-negative and must not decrease")
        out.append(ms)
    if not out or out[-1] == 0:
        raise _err(where, f"{path.name}: a trace needs at least one delivery opportunity after 0 ms")
    return out


def resolve_trace(value: Any, repeat: Any, base: Path | None) -> dict:
    """``network.trace``: a shipped trace's name or a Mahimahi trace file."""
    if not isinstance(value, str):
        raise _err("network.trace", "must be a trace name or a file path")
    if not isinstance(repeat, bool):
        raise _err("network.trace_repeat", f"must be true or false, got {repeat!r}")
    candidates = [TRACE_DIR / f"{value}.trace", TRACE_DIR / value, Path(value)]
    if base is not None and not Path(value).is_absolute():
        candidates.append(base / value)
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        raise _err("network.trace", f"no trace {value!r}; shipped traces: {', '.join(trace_names())}, or give a Mahimahi trace file")
    return {"opportunities_ms": read_trace(path, "network.trace"), "bytes_per_opportunity": 1500, "repeat": repeat}


def trace_mean_rate_bps(trace: dict) -> float:
    ms = trace["opportunities_ms"]
    return len(ms) * trace["bytes_per_opportunity"] * 8 / (ms[-1] / 1e3)


#: Named background set-ups (``background = "..."`` in a scenario). Flow
#: tables use the [[flows]] syntax and are added after the scenario's own
#: flows, marked as background; `interest_start` delays the scenario's own
#: flows so that the background is established first.
BACKGROUNDS: dict[str, dict] = {
    "none": {"description": "No background traffic."},
    "testbed": {
        "description": (
            "Two groups of 12 long-lived Reno flows (one per direction) whose data path has netem-style "
            "delay 200 ms +- 200 ms (uniform jitter, reordering as netem does) and 200 ms back; "
            "the flows under study start 5 s later."
        ),
        "flows": [
            {"cca": "reno", "count": 12, "rtt": "400ms", "jitter": "200ms", "direction": "forward", "label": "background-forward"},
            {"cca": "reno", "count": 12, "rtt": "400ms", "jitter": "200ms", "direction": "reverse", "label": "background-reverse"},
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
