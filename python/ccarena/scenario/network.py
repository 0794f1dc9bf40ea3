"""The path of a scenario, ``[network]``: random loss models, the queue
discipline, per-flow delay jitter, path dynamics (step, pulse and random-walk
changes of rate, delay and loss) and Mahimahi rate traces. Each ``resolve_*``
returns the engine's form of its part; errors name the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ..errors import ScenarioError
from . import schema
from .checks import boolean, check_keys, did_you_mean, excerpt, number, positive_duration, require, unit
from .units import parse_buffer, parse_duration, parse_rate, parse_size

__all__ = [
    "TRACE_DIR",
    "resolve_loss",
    "resolve_qdisc",
    "check_red_fits",
    "resolve_jitter",
    "resolve_dynamics",
    "resolve_trace",
    "read_trace",
    "trace_names",
    "trace_mean_rate_bps",
]

# ---------------------------------------------------------------- loss

# Loss-model fields a scenario writes under another name: times with units
# there, nanoseconds in the engine. The models and their fields are the
# engine's schema's ("loss" table).
_LOSS_NAME = {"at_ns": "at", "windows_ns": "windows"}


def _loss_fields(model: str) -> dict[str, dict]:
    """Scenario name -> schema field of a loss model's fields."""
    return {_LOSS_NAME.get(k, k): f for k, f in schema.fields("loss", model).items()}


def _probability(value: Any, f: dict, where: str) -> float:
    """A number checked against a loss field's range (a probability)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or abs(value) > 2**1000:
        raise ScenarioError(where, f"{f['rule']}, got {excerpt(value)}")
    schema.check_range(float(value), f, where, value)
    return float(value)


def resolve_loss(value: Any, where: str) -> dict:
    """A probability (Bernoulli loss) or a table naming its ``model``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {"model": "bernoulli", "p": _probability(value, schema.fields("loss", "bernoulli")["p"], where)}
    if not isinstance(value, dict):
        raise ScenarioError(where, f"must be a probability or a table with a 'model'; got {value!r}")
    model = value.get("model", "bernoulli")
    models = schema.variants("loss")
    if model not in models:
        raise ScenarioError(f"{where}.model", f"unknown loss model {excerpt(model)}; allowed: {', '.join(sorted(models))}{did_you_mean(model, models)}")
    fields = _loss_fields(model)
    check_keys(value, set(fields) | {"model"}, where)
    for key, f in fields.items():
        if f["required"]:
            require(value, key, where)
    if all(f["kind"] == "float" for f in fields.values()):
        return {"model": model, **{k: _probability(value[k], fields[k], f"{where}.{k}") for k in sorted(fields) if k in value}}
    if model == "scheduled":
        at = value["at"]
        if not isinstance(at, list):
            raise ScenarioError(f"{where}.at", "must be a list of times such as ['2.5s']")
        return {"model": model, "at_ns": [unit(parse_duration, t, f"{where}.at[{i}]") for i, t in enumerate(at)]}
    windows = value["windows"]
    if not isinstance(windows, list) or not all(isinstance(w, list) and len(w) == 2 for w in windows):
        raise ScenarioError(f"{where}.windows", "must be a list of [start, end] pairs such as [['3s', '3.3s']]")
    out = []
    for i, (a, b) in enumerate(windows):
        start = unit(parse_duration, a, f"{where}.windows[{i}][0]")
        end = unit(parse_duration, b, f"{where}.windows[{i}][1]")
        if end <= start:
            raise ScenarioError(f"{where}.windows[{i}]", "an outage must end after it starts")
        out.append([start, end])
    return {"model": model, "windows_ns": out}


# ---------------------------------------------------------------- queue discipline

def resolve_qdisc(value: Any, where: str, bdp_bytes: Callable[[float], int]) -> dict:
    """`qdisc = "codel"`, `qdisc = { kind = "red", min = "30p", ... }` or
    `qdisc = { kind = "step", threshold = "20p" }` in
    engine form; `bdp_bytes(multiple)` converts a `bdp` queue size to bytes."""
    named = isinstance(value, str)
    if named:
        value = {"kind": value}
    # The default (drop-tail) first, then the engine's others.
    first = schema.default("network", "qdisc")["kind"]
    kinds = [first] + [k for k in schema.variants("qdisc") if k != first]
    if not isinstance(value, dict):
        raise ScenarioError(where, f"must be a name or a table with a 'kind'; allowed kinds: {', '.join(kinds)}")
    kind = value.get("kind")
    if kind not in kinds:
        w = f"{where}.kind" if "kind" in value and not named else where
        raise ScenarioError(w, f"unknown queue discipline {excerpt(kind)}; allowed: {', '.join(kinds)}{did_you_mean(kind, kinds)}")
    fields = schema.fields("qdisc", kind)
    check_keys(value, set(fields) | {"kind"}, where)
    for key, f in fields.items():
        if f["required"]:  # the step queue's threshold
            require(value, key, where)
    out: dict[str, Any] = {"kind": kind}
    for key, v in value.items():
        if key == "kind":
            continue
        w, f = f"{where}.{key}", fields[key]
        t = f["kind"]
        if t == "bool":
            out[key] = boolean(v, w)
            continue
        if t == "queue_limit":  # bytes or packets; the engine checks min against max
            kind_, amount = unit(parse_buffer, v, w)
            if kind_ == "bdp":
                kind_, amount = "bytes", bdp_bytes(amount)
            if amount < 1:
                raise ScenarioError(w, f"must be at least one byte or packet, got {v!r}")
            out[key] = {kind_: int(amount)}
            continue
        if t == "duration_ns":
            out[key] = unit(parse_duration, v, w)
        elif t == "bytes":
            out[key] = unit(parse_size, v, w)
        elif t == "int":
            if isinstance(v, bool) or not isinstance(v, int):
                raise ScenarioError(w, f"must be an integer, got {excerpt(v)}")
            out[key] = v
        else:  # float
            if isinstance(v, bool) or not isinstance(v, (int, float)) or abs(v) > 2**1000:
                raise ScenarioError(w, f"{f.get('rule', 'must be a number')}, got {excerpt(v)}")
            out[key] = float(v)
        schema.check_range(out[key], f, w, v)
    return out


def check_red_fits(qdisc: dict, buffer: dict, where: str = "network") -> None:
    """Checks that RED's defaults derived from the buffer (tc's: max = limit/4,
    min = max/3, burst = (2 min + max) / (3 avpkt), then the averaging
    weight) fit. The engine derives them (``net/qdisc.rs::red_params``) and
    would blame the `burst` or `max` it derived; here the error names what the
    user wrote (`network.buffer`, or `network.qdisc.min`/`max`) and what to
    change. Cases the user set explicitly (burst, both thresholds) are left to
    the engine, whose message then names that field."""
    if qdisc.get("kind") != "red" or "w_q" in qdisc or "burst" in qdisc:
        return
    lo, hi = qdisc.get("min"), qdisc.get("max")
    if lo is not None and hi is not None:
        return
    if _red_weight(lo, hi, buffer, qdisc.get("avpkt", _RED_AVPKT)):
        return
    set_ = "min" if lo is not None else "max" if hi is not None else None
    if set_ is None:
        need = _red_smallest_buffer(buffer, qdisc.get("avpkt", _RED_AVPKT))
        hint = f"use a buffer of at least {need}, " if need else ""
        raise ScenarioError(
            f"{where}.buffer",
            f"too small for RED's default thresholds (max = buffer/4, min = max/3, and tc's burst from them); "
            f"{hint}or set {where}.qdisc.min and max (and burst) explicitly",
        )
    raise ScenarioError(
        f"{where}.qdisc.{set_}",
        f"too small for RED's derived thresholds and tc's default burst; raise it, or set "
        f"{where}.qdisc.{'max' if set_ == 'min' else 'min'} and burst explicitly",
    )


_RED_AVPKT = 1000  # tc's default avpkt (net/aqm/red.rs DEFAULT_AVPKT)


def _red_weight(lo: dict | None, hi: dict | None, buffer: dict, avpkt: int) -> bool:
    """Whether the engine's derivation (net/qdisc.rs::red_params, with tc's
    defaults) finds thresholds and an averaging weight."""
    def amount(q):
        return None if q is None else next(iter(q.values()))

    given = lo or hi
    packet_mode = ("packets" in given) if given else ("packets" in buffer)
    (kind, limit), = buffer.items()
    if kind == "packets":
        limit_amount = limit if packet_mode else limit * 1514
    else:
        limit_amount = limit // 1500 if packet_mode else limit
    mx = amount(hi)
    mn = amount(lo)
    if mx is None:
        mx = mn * 3 if mn else limit_amount // 4
    if mn is None:
        mn = mx // 3
    if mx <= mn:
        return False
    unit_ = avpkt if packet_mode else 1
    min_b, max_b = mn * unit_, mx * unit_
    burst = int((2.0 * min_b + max_b) / (3.0 * avpkt))
    a = burst + 1.0 - min_b / avpkt
    if a < 1.0:
        return False
    w = 0.5
    for _ in range(1, 32):
        if a <= (1.0 - (1.0 - w) ** burst) / w:
            return True
        w /= 2.0
    return False


def _red_smallest_buffer(buffer: dict, avpkt: int) -> str | None:
    """The smallest buffer of the same unit with which RED's defaults fit."""
    (kind, limit), = buffer.items()
    step = 1 if kind == "packets" else 100
    for n in range(limit + step, limit + 100_000 * step, step):
        if _red_weight(None, None, {kind: n}, avpkt):
            return f"{n}p" if kind == "packets" else f"{n}B"
    return None


# ---------------------------------------------------------------- jitter


def resolve_jitter(value: Any, where: str) -> dict:
    """`jitter = "5ms"` or `{ jitter = "5ms", distribution = "normal", reorder = false }`."""
    if not isinstance(value, dict):
        value = {"jitter": value}
    check_keys(value, {"jitter", "distribution", "reorder"}, where)
    j = unit(parse_duration, require(value, "jitter", where), f"{where}.jitter")
    if j <= 0:
        raise ScenarioError(f"{where}.jitter", "must be positive")
    shape = value.get("distribution", "uniform")
    if shape not in ("uniform", "normal"):
        raise ScenarioError(f"{where}.distribution", f"must be uniform or normal, got {shape!r}")
    return {"jitter": j, "distribution": shape, "reorder": boolean(value.get("reorder", True), f"{where}.reorder")}


# ---------------------------------------------------------------- dynamics


def _setting(t: Any, where: str) -> dict:
    check_keys(t, {"rate", "delay", "loss"}, where)
    out: dict[str, Any] = {}
    if "rate" in t:
        out["rate"] = unit(parse_rate, t["rate"], f"{where}.rate")
        if out["rate"] <= 0:
            raise ScenarioError(f"{where}.rate", "must be positive")
    if "delay" in t:
        out["delay"] = unit(parse_duration, t["delay"], f"{where}.delay")
    if "loss" in t:
        out["loss"] = resolve_loss(t["loss"], f"{where}.loss")
    if not out:
        raise ScenarioError(where, "sets nothing; give rate, delay or loss")
    return out


def _dynamics_keys() -> dict[str, set[str]]:
    """The fields of each kind of change as a scenario writes them: the
    engine's (schema table "dynamics"), except that a step writes its
    setting's fields (rate, delay, loss) beside `at` rather than in `set`."""
    keys = {kind: set(schema.fields("dynamics", kind)) for kind in schema.variants("dynamics")}
    keys["step"] = (keys["step"] - {"set"}) | set(schema.fields("path_setting"))
    # Steps first: the simplest change, and the one most scenarios use.
    return {"step": keys.pop("step"), **keys}


def resolve_dynamics(tables: Any) -> list[dict]:
    """``[[network.dynamics]]``: step, pulse and random_walk changes of the
    forward bottleneck's rate, extra delay and loss."""
    if not isinstance(tables, list):
        raise ScenarioError("network.dynamics", "must be a list of [[network.dynamics]] tables")
    out = []
    for i, t in enumerate(tables):
        where = f"network.dynamics[{i}]"
        if not isinstance(t, dict):
            raise ScenarioError(where, "must be a table")
        kind = t.get("kind")
        kinds = _dynamics_keys()
        if kind not in kinds:
            raise ScenarioError(f"{where}.kind", f"unknown change {excerpt(kind)}; allowed: {', '.join(kinds)}{did_you_mean(kind, kinds)}")
        check_keys(t, kinds[kind] | {"kind"}, where)
        fields = schema.fields("dynamics", kind)

        def in_range(k: str, v: float) -> float:
            schema.check_range(v, fields[k], f"{where}.{k}", t.get(k, v))
            return v

        def opt_time(k: str) -> int | None:
            return unit(parse_duration, t[k], f"{where}.{k}") if k in t else None

        if kind == "step":
            at = unit(parse_duration, require(t, "at", where), f"{where}.at")
            out.append({"kind": "step", "at": at, "set": _setting({k: t[k] for k in t if k in ("rate", "delay", "loss")}, where)})
        elif kind == "pulse":
            for k in ("period", "high", "low"):
                require(t, k, where)
            duty = in_range("duty", number(t.get("duty", fields["duty"]["default"]), f"{where}.duty"))
            out.append(
                {
                    "kind": "pulse", "start": opt_time("start") or 0, "period": positive_duration(t["period"], f"{where}.period"),
                    "duty": duty, "high": _setting(t["high"], f"{where}.high"), "low": _setting(t["low"], f"{where}.low"),
                    "until": opt_time("until"),
                }
            )
        else:
            prop = t.get("property")
            parse = {"rate": parse_rate, "delay": parse_duration}.get(prop)
            if prop not in fields["property"]["values"]:
                raise ScenarioError(f"{where}.property", f"must be one of {', '.join(fields['property']['values'])}, got {excerpt(prop)}")
            for k in ("interval", "initial", "min", "max", "step"):
                require(t, k, where)

            def value(k: str) -> float:
                if parse:
                    return float(unit(parse, t[k], f"{where}.{k}"))
                return number(t[k], f"{where}.{k}", 0.0, 1.0)

            lo, hi, init = value("min"), value("max"), value("initial")
            if not lo <= init <= hi:
                raise ScenarioError(where, "needs min <= initial <= max")
            if prop == "rate" and lo <= 0:
                raise ScenarioError(f"{where}.min", "a rate must stay positive")
            out.append(
                {
                    "kind": "random_walk", "property": prop, "interval": positive_duration(t["interval"], f"{where}.interval"),
                    "initial": init, "min": lo, "max": hi, "step": in_range("step", value("step")),
                    "correlation": in_range("correlation", number(t.get("correlation", fields["correlation"]["default"]), f"{where}.correlation")),
                    "bounds": _bounds(t.get("bounds", fields["bounds"]["default"]), fields["bounds"]["values"], f"{where}.bounds"),
                    "start": opt_time("start") or 0, "until": opt_time("until"),
                }
            )
    return out


def _bounds(value: Any, allowed: list[str], where: str) -> str:
    if value not in allowed:
        raise ScenarioError(where, f"must be {' or '.join(allowed)}, got {excerpt(value)}")
    return value


def changes_rate(dynamics: list[dict]) -> bool:
    """Whether resolved dynamics change the bottleneck's rate."""
    return any(
        d["kind"] == "random_walk" and d["property"] == "rate" or "rate" in d.get("set", {}) or "rate" in d.get("high", {})
        or "rate" in d.get("low", {})
        for d in dynamics
    )


# ---------------------------------------------------------------- traces

#: Shipped Mahimahi-format traces (one delivery opportunity per line, in ms).
TRACE_DIR = Path(__file__).parent / "traces"


def trace_names() -> list[str]:
    return sorted(p.stem for p in TRACE_DIR.glob("*.trace"))


# A trace is a list of millisecond timestamps; shipped ones are a few hundred kB.
TRACE_MAX_BYTES = 64 * 2**20


def read_trace(path: Path, where: str, quote: bool = True) -> list[int]:
    """The delivery opportunities of a Mahimahi trace file. With `quote` off (a
    file outside the scenario's directory) messages name the line but do not
    quote it: an error must not show the contents of a file the user did not
    mean to expose."""
    try:
        size = path.stat().st_size
        if size > TRACE_MAX_BYTES:
            raise ScenarioError(where, f"{path.name}: {size} bytes; a trace may have at most {TRACE_MAX_BYTES // 2**20} MiB")
        text = path.read_bytes().decode("ascii")
    except UnicodeDecodeError:
        raise ScenarioError(where, f"{path.name}: not a Mahimahi trace (one whole number of milliseconds per line; this file is not plain text)") from None
    except OSError as e:
        raise ScenarioError(where, f"{path.name}: cannot read: {e.strerror or e}") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        try:
            ms = int(line) if line.isdigit() and len(line) <= 15 else int("x")
        except ValueError:
            got = f", got {excerpt(line, 24)}" if quote else ""
            raise ScenarioError(where, f"{path.name} line {n}: expected a whole number of milliseconds{got}") from None
        if out and ms < out[-1]:
            raise ScenarioError(where, f"{path.name} line {n}: timestamps must be non-negative and must not decrease")
        out.append(ms)
    if not out or out[-1] == 0:
        raise ScenarioError(where, f"{path.name}: a trace needs at least one delivery opportunity after 0 ms")
    return out


def resolve_trace(value: Any, repeat: Any, base: Path | None) -> dict:
    """``network.trace``: a shipped trace's name or a Mahimahi trace file
    (a relative path starts from the scenario's directory)."""
    if not isinstance(value, str) or not value or "\0" in value:
        raise ScenarioError("network.trace", "must be a trace name or a file path")
    if not isinstance(repeat, bool):
        raise ScenarioError("network.trace_repeat", f"must be true or false, got {excerpt(repeat)}")
    given = Path(value)
    shipped = [TRACE_DIR / f"{value}.trace", TRACE_DIR / value] if "/" not in value and not value.startswith(".") else []
    own = given if given.is_absolute() or base is None else base / given
    path = next((p for p in shipped + [own] if _is_file(p)), None)
    if path is None:
        raise ScenarioError("network.trace", f"no trace {excerpt(value)}; shipped traces: {', '.join(trace_names())}, or give a Mahimahi trace file")
    inside = path in shipped or _inside(path, base if base is not None else Path.cwd())
    return {"opportunities_ms": read_trace(path, "network.trace", quote=inside), "bytes_per_opportunity": 1500, "repeat": repeat}


def _is_file(path: Path) -> bool:
    """Path.is_file, with names the system refuses (too long, ...) as absent."""
    try:
        return path.is_file()
    except OSError:
        return False


def _inside(path: Path, directory: Path) -> bool:
    try:
        return path.resolve().is_relative_to(directory.resolve())
    except (OSError, RuntimeError):
        return False


def trace_mean_rate_bps(trace: dict) -> float:
    ms = trace["opportunities_ms"]
    return len(ms) * trace["bytes_per_opportunity"] * 8 / (ms[-1] / 1e3)
