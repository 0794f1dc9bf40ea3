"""Scenarios: the TOML (or dict) description of an experiment, validated and
resolved into the engine's input (engine units, one entry per flow).

Every problem raises ``ScenarioError`` whose text is one line naming the
field, the value and what is allowed, e.g.
``flows[0].cca: unknown congestion control 'cubc'; allowed: cubic, reno``.
The format is documented in docs/scenario.md.
"""

from __future__ import annotations

import copy
import json
import random
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import _engine
from . import traffic
from ..errors import ScenarioError
from .units import UnitError, parse_buffer, parse_duration, parse_rate, parse_size

__all__ = ["ScenarioError", "Scenario", "load_scenario", "cca_catalogue", "apply_overrides"]


_TOP_KEYS = {
    "name", "description", "source", "network", "tcp", "flows", "udp", "web", "background", "run", "sweep", "notes",
    "requires", "figures", "cca_files", "linux",
}
BACKENDS = ("sim", "linux")
_NETWORK_KEYS = {
    "bottleneck_rate", "buffer", "loss", "access_rate", "bdp_rtt", "qdisc", "reverse_bottleneck", "dynamics", "trace",
    "trace_repeat",
}
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
_FLOW_KEYS = {
    "cca", "rtt", "count", "start", "stagger", "stop", "size", "label", "cca_params", "tcp", "direction", "background",
    "jitter",
}
_RUN_KEYS = {"duration", "warmup", "seed", "sample_interval", "start_jitter"}
#: Default random delay of each flow's start (see docs/scenario.md).
DEFAULT_START_JITTER = "10ms"
_LOSS_MODELS = {
    "bernoulli": {"p"},
    "periodic": {"p"},
    "gilbert_elliott": {"p_gb", "p_bg", "loss_good", "loss_bad"},
    "scheduled": {"at"},
    "outages": {"windows"},
}


def cca_catalogue() -> list[dict[str, Any]]:
    """Every algorithm the engine implements, with description, source and parameters."""
    return json.loads(_engine.cca_catalogue_json())


def _cca_names() -> list[str]:
    from ..backends.cca import registered_ccas

    return [c["name"] for c in cca_catalogue()] + sorted(registered_ccas())


def _check_keys(table: Any, allowed: set[str] | dict, where: str) -> dict:
    if not isinstance(table, dict):
        raise ScenarioError(where, f"must be a table, got {table!r}")
    for key in table:
        if key not in allowed:
            raise ScenarioError(f"{where}.{key}" if where else key, f"unknown field; allowed: {', '.join(sorted(allowed))}")
    return table


def _unit(parse, value: Any, where: str) -> Any:
    try:
        return parse(value)
    except UnitError as e:
        raise ScenarioError(where, str(e)) from None


def _require(table: dict, key: str, where: str) -> Any:
    if key not in table:
        raise ScenarioError(f"{where}.{key}", "missing required field")
    return table[key]


def _int(value: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(where, f"must be an integer in {lo}..{hi}, got {value!r}")
    if not lo <= value <= hi:
        raise ScenarioError(where, f"must be in {lo}..{hi}, got {value}")
    return value


def _prob(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ScenarioError(where, f"must be a probability in [0, 1], got {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise ScenarioError(where, f"must be a probability in [0, 1], got {value}")
    return float(value)


def _resolve_loss(value: Any, where: str) -> dict:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {"model": "bernoulli", "p": _prob(value, where)}
    if not isinstance(value, dict):
        raise ScenarioError(where, f"must be a probability or a table with a 'model'; got {value!r}")
    model = value.get("model", "bernoulli")
    if model not in _LOSS_MODELS:
        raise ScenarioError(f"{where}.model", f"unknown loss model {model!r}; allowed: {', '.join(sorted(_LOSS_MODELS))}")
    _check_keys(value, _LOSS_MODELS[model] | {"model"}, where)
    for key in _LOSS_MODELS[model]:
        _require(value, key, where)
    if model in ("bernoulli", "periodic"):
        return {"model": model, "p": _prob(value["p"], f"{where}.p")}
    if model == "gilbert_elliott":
        return {"model": model, **{k: _prob(value[k], f"{where}.{k}") for k in sorted(_LOSS_MODELS[model])}}
    if model == "scheduled":
        at = value["at"]
        if not isinstance(at, list):
            raise ScenarioError(f"{where}.at", "must be a list of times such as ['2.5s']")
        return {"model": model, "at_ns": [_unit(parse_duration, t, f"{where}.at[{i}]") for i, t in enumerate(at)]}
    windows = value["windows"]
    if not isinstance(windows, list) or not all(isinstance(w, list) and len(w) == 2 for w in windows):
        raise ScenarioError(f"{where}.windows", "must be a list of [start, end] pairs such as [['3s', '3.3s']]")
    out = []
    for i, (a, b) in enumerate(windows):
        start = _unit(parse_duration, a, f"{where}.windows[{i}][0]")
        end = _unit(parse_duration, b, f"{where}.windows[{i}][1]")
        if end <= start:
            raise ScenarioError(f"{where}.windows[{i}]", "an outage must end after it starts")
        out.append([start, end])
    return {"model": model, "windows_ns": out}


#: Queue disciplines and their fields, with the kind of value each takes
#: (docs/scenario.md lists the defaults, Linux's).
_QDISCS = {
    "drop_tail": {},
    "red": {
        "min": "queue", "max": "queue", "max_p": "prob", "w_q": "prob", "burst": "count", "avpkt": "size",
        "ecn": "bool", "harddrop": "bool", "gentle": "bool",
    },
    "codel": {"target": "duration", "interval": "duration", "ecn": "bool", "ce_threshold": "duration"},
    "fq_codel": {
        "target": "duration", "interval": "duration", "ecn": "bool", "ce_threshold": "duration",
        "flows": "count", "quantum": "size", "drop_batch_size": "count",
    },
    "pie": {
        "target": "duration", "tupdate": "duration", "alpha": "hz", "beta": "hz",
        "ecn": "bool", "bytemode": "bool", "dq_rate_estimator": "bool",
    },
}


def _resolve_qdisc(value: Any, where: str, bdp_bytes) -> dict:
    """`qdisc = "codel"` or `qdisc = { kind = "red", min = "30p", ... }` in
    engine form; `bdp_bytes(multiple)` converts a `bdp` queue size to bytes."""
    named = isinstance(value, str)
    if named:
        value = {"kind": value}
    if not isinstance(value, dict):
        raise ScenarioError(where, f"must be a name or a table with a 'kind'; allowed kinds: {', '.join(_QDISCS)}")
    kind = value.get("kind")
    if kind not in _QDISCS:
        w = f"{where}.kind" if "kind" in value and not named else where
        raise ScenarioError(w, f"unknown queue discipline {kind!r}; allowed: {', '.join(_QDISCS)}")
    fields = _QDISCS[kind]
    _check_keys(value, set(fields) | {"kind"}, where)
    out: dict[str, Any] = {"kind": kind}
    for key, v in value.items():
        if key == "kind":
            continue
        w, t = f"{where}.{key}", fields[key]
        if t == "bool":
            if not isinstance(v, bool):
                raise ScenarioError(w, f"must be true or false, got {v!r}")
            out[key] = v
        elif t == "duration":
            out[key] = _unit(parse_duration, v, w)
            if out[key] <= 0:
                raise ScenarioError(w, "must be positive")
        elif t == "count":
            out[key] = _int(v, w, 1, 2**31 - 1)
        elif t == "size":
            out[key] = _unit(parse_size, v, w)
            if out[key] <= 0:
                raise ScenarioError(w, "must be positive")
        elif t == "prob":
            out[key] = _prob(v, w)
            if out[key] == 0:
                raise ScenarioError(w, "must be above 0")
        elif t == "hz":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 2:
                raise ScenarioError(w, f"must be a number in [0, 2] (per second of delay), got {v!r}")
            out[key] = float(v)
        else:  # a queue size: bytes or packets
            unit, amount = _unit(parse_buffer, v, w)
            if unit == "bdp":
                unit, amount = "bytes", bdp_bytes(amount)
            if amount < 1:
                raise ScenarioError(w, f"must be at least one byte or packet, got {v!r}")
            out[key] = {unit: int(amount)}
    return out


def _resolve_tcp(table: Any, where: str, base: dict) -> dict:
    _check_keys(table, _TCP_KEYS, where)
    out = dict(base)
    for key, value in table.items():
        kind = _TCP_KEYS[key]
        w = f"{where}.{key}"
        if kind == "bool":
            if not isinstance(value, bool):
                raise ScenarioError(w, f"must be true or false, got {value!r}")
            out[key] = value
        elif kind == "int":
            limits = {"mss": (64, 65000), "initial_cwnd": (1, 1000), "hz": (100, 1000)}[key]
            out[key] = _int(value, w, *limits)
            if key == "hz" and value not in (100, 250, 300, 1000):
                raise ScenarioError(w, f"must be one of 100, 250, 300, 1000, got {value}")
        elif kind == "duration":
            out["rto_min_us"] = _unit(parse_duration, value, w) // 1000
            if out["rto_min_us"] <= 0:
                raise ScenarioError(w, "must be positive")
        else:
            out[key] = _unit(parse_size, value, w)
            if out[key] < 1500:
                raise ScenarioError(w, f"must hold at least one segment, got {value!r}")
    return out


def _check_python_params(cca: str, params: dict, where: str) -> None:
    """Python algorithms check their own parameters when instantiated."""
    from ..backends.cca import registered_ccas

    cls = registered_ccas().get(cca)
    if cls is None:
        return
    try:
        cls(**params)
    except TypeError as e:
        raise ScenarioError(where, str(e)) from None


def _per_flow(value: Any, count: int, parse, where: str) -> list:
    """A value for each of `count` flows: one value for all, or a list of `count`."""
    if isinstance(value, list):
        if len(value) != count:
            raise ScenarioError(where, f"gives {len(value)} values for count = {count} flows")
        return [_unit(parse, v, f"{where}[{i}]") for i, v in enumerate(value)]
    return [_unit(parse, value, where)] * count


def _load_cca_files(doc: dict, base: Path | None) -> None:
    files = doc.get("cca_files", [])
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise ScenarioError("cca_files", "must be a list of Python file paths")
    from ..backends.cca import load_cca_file

    for f in files:
        p = Path(f)
        if not p.is_absolute() and base is not None:
            p = base / p
        load_cca_file(p)


def _backend_ccas(backend: str) -> list[str]:
    if backend == "linux":
        from ..backends.linux.host import linux_cca_names

        return linux_cca_names()
    return _cca_names()


def _resolve_jitter(value: Any, where: str) -> dict:
    """`jitter = "5ms"` or `{ jitter = "5ms", distribution = "normal", reorder = false }`."""
    if not isinstance(value, dict):
        value = {"jitter": value}
    _check_keys(value, {"jitter", "distribution", "reorder"}, where)
    j = _unit(parse_duration, _require(value, "jitter", where), f"{where}.jitter")
    if j <= 0:
        raise ScenarioError(f"{where}.jitter", "must be positive")
    shape = value.get("distribution", "uniform")
    if shape not in ("uniform", "normal"):
        raise ScenarioError(f"{where}.distribution", f"must be uniform or normal, got {shape!r}")
    reorder = value.get("reorder", True)
    if not isinstance(reorder, bool):
        raise ScenarioError(f"{where}.reorder", f"must be true or false, got {reorder!r}")
    return {"jitter": j, "distribution": shape, "reorder": reorder}


def _resolve_flow_group(
    group: Any, index: int, where: str, names: list[str], backend: str, base_tcp: dict, seed: int, offset: int, from_setup: bool
) -> list[dict]:
    """The engine flows of one [[flows]] table (or of a background set-up's)."""
    _check_keys(group, _FLOW_KEYS, where)
    cca = _require(group, "cca", where)
    if not isinstance(cca, str) or cca not in names:
        on = " on the linux backend (this kernel's and the project's BPF algorithms)" if backend == "linux" else ""
        raise ScenarioError(f"{where}.cca", f"unknown congestion control {cca!r}{on}; allowed: {', '.join(sorted(names))}")
    count = _int(group.get("count", 1), f"{where}.count", 1, 10_000)
    rtt_value = _require(group, "rtt", where)
    if isinstance(rtt_value, dict):
        # RTTs drawn per flow from the run's seed: repetitions draw afresh.
        dist = traffic.resolve_dist(rtt_value, parse_duration, f"{where}.rtt")
        rng = random.Random(f"{seed}:{where}.rtt")
        rtts = [max(1000, int(round(traffic.sample_dist(dist, rng)))) for _ in range(count)]
    else:
        rtts = _per_flow(rtt_value, count, parse_duration, f"{where}.rtt")
    for r in rtts:
        if r <= 0:
            raise ScenarioError(f"{where}.rtt", "must be positive")
    starts = _per_flow(group.get("start", 0), count, parse_duration, f"{where}.start")
    if "stagger" in group:
        step = _unit(parse_duration, group["stagger"], f"{where}.stagger")
        starts = [s + j * step for j, s in enumerate(starts)]
    starts = [s + offset for s in starts]
    stops = _per_flow(group["stop"], count, parse_duration, f"{where}.stop") if "stop" in group else [None] * count
    stops = [s + offset if s is not None else None for s in stops]
    size = None
    if "size" in group:
        size = _unit(parse_size, group["size"], f"{where}.size")
        if size <= 0:
            raise ScenarioError(f"{where}.size", "must be positive")
    params = group.get("cca_params", {})
    if not isinstance(params, dict):
        raise ScenarioError(f"{where}.cca_params", "must be a table such as { hystart = false }")
    _check_python_params(cca, params, f"{where}.cca_params")
    if backend == "linux" and params:
        raise ScenarioError(f"{where}.cca_params", "the linux backend runs the kernel's algorithms with their defaults; allowed: {} (none)")
    tcp = _resolve_tcp(group.get("tcp", {}), f"{where}.tcp", base_tcp)
    label = group.get("label", cca)
    if not isinstance(label, str):
        raise ScenarioError(f"{where}.label", "must be a string")
    (direction,) = traffic.direction_of(group.get("direction", "forward"), f"{where}.direction")
    background = group.get("background", from_setup)
    if not isinstance(background, bool):
        raise ScenarioError(f"{where}.background", f"must be true or false, got {background!r}")
    jitter = _resolve_jitter(group["jitter"], f"{where}.jitter") if "jitter" in group else None
    out = []
    for j in range(count):
        if stops[j] is not None and stops[j] <= starts[j]:
            raise ScenarioError(f"{where}.stop", "must be after the flow's start")
        out.append(
            {
                "cca": cca,
                "cca_params": params,
                "rtt": rtts[j],
                "start": starts[j],
                "stop": stops[j],
                "size": size,
                "tcp": tcp,
                "label": label,
                "direction": direction,
                "jitter": jitter,
                "background": background,
                "_group": index,
            }
        )
    return out


def resolve(doc: dict, backend: str = "sim", base: Path | None = None) -> dict:
    """Validates a scenario document and returns the engine configuration.

    `backend` decides which congestion-control names are allowed: the
    simulator's catalogue (with algorithms registered from Python), or
    (``"linux"``) the running kernel's algorithms plus the project's BPF ones.
    The ``[linux]`` table (options of the linux backend) is checked either way
    and resolved into ``engine["_linux"]``. `base` is the directory relative
    paths in the document (cca_files) start from.
    """
    if backend not in BACKENDS:
        raise ScenarioError("backend", f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
    _check_keys(doc, _TOP_KEYS, "")
    _load_cca_files(doc, base)
    net = _check_keys(_require(doc, "network", "scenario"), _NETWORK_KEYS, "network")
    run = _check_keys(_require(doc, "run", "scenario"), _RUN_KEYS, "run")
    flows = doc.get("flows")
    if flows is None:
        raise ScenarioError("flows", "missing required field; add at least one [[flows]] table")
    if not isinstance(flows, list) or not flows:
        raise ScenarioError("flows", "must be a non-empty list of [[flows]] tables")

    seed = _int(run.get("seed", 1), "run.seed", 0, 2**63 - 1)
    trace = None
    if "trace" in net:
        trace = traffic.resolve_trace(net["trace"], net.get("trace_repeat", True), base)
    elif "trace_repeat" in net:
        raise ScenarioError("network.trace_repeat", "only applies with network.trace")
    if "bottleneck_rate" in net or trace is None:
        rate = _unit(parse_rate, _require(net, "bottleneck_rate", "network"), "network.bottleneck_rate")
    else:
        # The trace sets the forward rate; the reverse link and defaults use its mean.
        rate = int(round(traffic.trace_mean_rate_bps(trace)))
    if rate <= 0:
        raise ScenarioError("network.bottleneck_rate", f"must be positive, got {net['bottleneck_rate']!r}")
    access = None
    if "access_rate" in net:
        access = _unit(parse_rate, net["access_rate"], "network.access_rate")
        if access <= 0:
            raise ScenarioError("network.access_rate", "must be positive")
    loss = _resolve_loss(net.get("loss", 0.0), "network.loss")

    base_tcp = _resolve_tcp(doc.get("tcp", {}), "tcp", {})
    names = _backend_ccas(backend)
    sim_names = set(_cca_names()) if backend != "sim" else set(names)
    background = doc.get("background", "none")
    if background not in traffic.BACKGROUNDS:
        raise ScenarioError("background", f"unknown background set-up {background!r}; allowed: {', '.join(traffic.BACKGROUNDS)}")
    setup = traffic.BACKGROUNDS[background]
    interest_start = parse_duration(setup.get("interest_start", 0))
    engine_flows: list[dict] = []
    groups = [(f"flows[{i}]", g, interest_start, False) for i, g in enumerate(flows)]
    groups += [(f"background[{background}].flows[{k}]", g, 0, True) for k, g in enumerate(setup.get("flows", []))]
    for i, (where, group, offset, from_setup) in enumerate(groups):
        engine_flows += _resolve_flow_group(group, i, where, names, backend, base_tcp, seed, offset, from_setup)
    # A buffer in BDPs is sized for the flows under study.
    rtts_ns = [f["rtt"] for f in engine_flows if not f["background"]] or [f["rtt"] for f in engine_flows]
    kind, amount = _unit(parse_buffer, _require(net, "buffer", "network"), "network.buffer")
    if kind == "bdp":
        bdp_rtt = _unit(parse_duration, net["bdp_rtt"], "network.bdp_rtt") if "bdp_rtt" in net else max(rtts_ns)
        amount = int(round(rate / 8 * bdp_rtt / 1e9 * amount))
        kind = "bytes"
    if amount < 1 or (kind == "bytes" and amount < 1500):
        raise ScenarioError("network.buffer", f"must hold at least one 1500-byte packet, got {net['buffer']!r}")
    buffer = {kind: amount}
    network = {"bottleneck_rate": rate, "buffer": buffer, "loss": loss, "access_rate": access}
    if net.get("reverse_bottleneck", False) is not False:
        if net["reverse_bottleneck"] is not True:
            raise ScenarioError("network.reverse_bottleneck", f"must be true or false, got {net['reverse_bottleneck']!r}")
        network["reverse_bottleneck"] = True
    if "dynamics" in net:
        network["dynamics"] = traffic.resolve_dynamics(net["dynamics"])
        if trace is not None and any(d["kind"] == "random_walk" and d["property"] == "rate" or "rate" in d.get("set", {}) or "rate" in d.get("high", {}) or "rate" in d.get("low", {}) for d in network["dynamics"]):
            raise ScenarioError("network.dynamics", "a trace-driven bottleneck takes its rate from the trace; change delay or loss only")
    if trace is not None:
        network["trace"] = trace
    if "qdisc" in net:
        rtt_for_bdp = _unit(parse_duration, net["bdp_rtt"], "network.bdp_rtt") if "bdp_rtt" in net else max(rtts_ns)
        network["qdisc"] = _resolve_qdisc(net["qdisc"], "network.qdisc", lambda m: int(round(rate / 8 * rtt_for_bdp / 1e9 * m)))

    duration = _unit(parse_duration, _require(run, "duration", "run"), "run.duration")
    if duration <= 0:
        raise ScenarioError("run.duration", "must be positive")
    warmup = _unit(parse_duration, run.get("warmup", 0), "run.warmup")
    if warmup >= duration:
        raise ScenarioError("run.warmup", f"must be shorter than run.duration ({run['duration']})")
    interval = _unit(parse_duration, run.get("sample_interval", "100ms"), "run.sample_interval")
    if interval <= 0:
        raise ScenarioError("run.sample_interval", "must be positive")
    start_jitter = _unit(parse_duration, run.get("start_jitter", DEFAULT_START_JITTER), "run.start_jitter")

    udp = traffic.resolve_udp(doc.get("udp", []), duration)
    web_tables = list(doc.get("web", [])) if isinstance(doc.get("web", []), list) else doc.get("web")
    web = traffic.resolve_web(web_tables, sorted(sim_names), lambda t, w: _resolve_tcp(t, w, base_tcp))
    web += traffic.resolve_web(setup.get("web", []), sorted(sim_names), lambda t, w: _resolve_tcp(t, w, base_tcp))
    if backend == "linux":
        needs_sim = [
            name
            for name, used in (
                ("udp", udp),
                ("web", web),
                ("network.dynamics", "dynamics" in network),
                ("network.trace", trace is not None),
                ("network.reverse_bottleneck", "reverse_bottleneck" in network),
                ("flows[].jitter", any(f["jitter"] for f in engine_flows)),
                ("flows[].direction = reverse", any(f["direction"] == "reverse" for f in engine_flows)),
            )
            if used
        ]
        if needs_sim:
            raise ScenarioError(
                "backend", f"the linux backend runs forward TCP flows over a fixed path; {', '.join(needs_sim)} need the simulator (--backend sim)"
            )
    engine = {
        "network": network,
        "flows": [{k: v for k, v in f.items() if not k.startswith("_")} for f in engine_flows],
        "udp": udp,
        "web": web,
        "run": {"duration": duration, "warmup": warmup, "seed": seed, "sample_interval": interval, "start_jitter": start_jitter},
    }
    from ..backends.cca import registered_ccas

    python_ccas = sorted({f["cca"] for f in engine_flows} & set(registered_ccas()))
    # The engine checks what it would run; algorithms only the kernel has are
    # checked as Reno (their names were checked above).
    checked = engine
    if any(f["cca"] not in sim_names for f in engine["flows"]):
        checked = dict(engine, flows=[f if f["cca"] in sim_names else dict(f, cca="reno", cca_params={}) for f in engine["flows"]])
    try:
        _engine.validate_json(json.dumps(checked), python_ccas)
    except ValueError as e:
        text = str(e)
        m = re.match(r"([\w\[\]\.]+): (.*)", text)
        raise ScenarioError(m.group(1), m.group(2)) if m else ScenarioError("scenario", text) from None
    engine["_groups"] = [f["_group"] for f in engine_flows]
    engine["_background"] = background
    engine["_python_ccas"] = python_ccas
    from .linux_options import resolve_linux_options

    engine["_linux"] = resolve_linux_options(doc.get("linux", {}), rate)
    return engine


@dataclass
class Scenario:
    """A validated scenario: the document as written and its resolved engine input."""

    doc: dict
    engine: dict = field(repr=False)
    path: str | None = None
    backend: str = "sim"

    @property
    def name(self) -> str:
        if "name" in self.doc:
            return str(self.doc["name"])
        return Path(self.path).stem if self.path else "scenario"

    @property
    def description(self) -> str:
        return str(self.doc.get("description", ""))

    @property
    def seed(self) -> int:
        return self.engine["run"]["seed"]

    @classmethod
    def from_dict(cls, doc: dict, path: str | None = None, backend: str = "sim") -> "Scenario":
        doc = copy.deepcopy(doc)
        base = Path(path).parent if path else None
        return cls(doc=doc, engine=resolve(doc, backend, base), path=path, backend=backend)

    @classmethod
    def from_toml(cls, text: str, path: str | None = None, backend: str = "sim") -> "Scenario":
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ScenarioError("", f"{path or 'scenario'}: not valid TOML: {e}") from None
        return cls.from_dict(doc, path, backend)

    def with_overrides(self, overrides: dict[str, Any]) -> "Scenario":
        return Scenario.from_dict(apply_overrides(self.doc, overrides), self.path, self.backend)

    def for_backend(self, backend: str) -> "Scenario":
        """The same document validated for another backend (its algorithms differ)."""
        return self if backend == self.backend else Scenario.from_dict(self.doc, self.path, backend)

    def engine_json(self) -> str:
        return json.dumps({k: v for k, v in self.engine.items() if not k.startswith("_")})

    def python_ccas(self) -> dict:
        """The Python classes of the algorithms this scenario uses that are written in Python."""
        from ..backends.cca import registered_ccas

        reg = registered_ccas()
        return {name: reg[name] for name in self.engine.get("_python_ccas", [])}

    def flow_groups(self) -> list[int]:
        """Index of the [[flows]] table each engine flow came from."""
        return list(self.engine["_groups"])

    def to_toml(self) -> str:
        return dump_toml(self.doc)


def load_scenario(source: str | Path | dict | Scenario, backend: str = "sim") -> Scenario:
    """A scenario from a file path, a preset name, TOML text, a dict, or a Scenario,
    validated for `backend` ("sim" or "linux")."""
    if isinstance(source, Scenario):
        return source.for_backend(backend)
    if isinstance(source, dict):
        return Scenario.from_dict(source, backend=backend)
    text = str(source)
    if "\n" in text:
        return Scenario.from_toml(text, backend=backend)
    p = Path(text)
    if p.is_file():
        return Scenario.from_toml(p.read_text(), str(p), backend)
    from .presets import preset_path

    preset = preset_path(text)
    if preset is not None:
        return Scenario.from_toml(preset.read_text(), str(preset), backend)
    if p.suffix == ".toml" or p.exists():
        raise ScenarioError("", f"{text}: no such file")
    raise ScenarioError("", f"{text}: no such file or preset; see `ccarena list experiments`")


_PATH_PART = re.compile(r"([A-Za-z_][\w-]*)(?:\[(\d+)\])?")


def apply_overrides(doc: dict, overrides: dict[str, Any]) -> dict:
    """Sets dotted fields, e.g. {'run.duration': '10s', 'flows[0].cca': 'reno'}."""
    doc = copy.deepcopy(doc)
    for dotted, value in overrides.items():
        parts = dotted.split(".")
        node: Any = doc
        for k, part in enumerate(parts):
            m = _PATH_PART.fullmatch(part)
            if not m:
                raise ScenarioError(dotted, "not a field path such as run.duration or flows[0].cca")
            key, index = m.group(1), m.group(2)
            last = k == len(parts) - 1
            if index is not None:
                seq = node.get(key) if isinstance(node, dict) else None
                if not isinstance(seq, list) or int(index) >= len(seq):
                    raise ScenarioError(dotted, f"{key}[{index}] does not exist")
                if last:
                    seq[int(index)] = value
                else:
                    node = seq[int(index)]
            else:
                if not isinstance(node, dict):
                    raise ScenarioError(dotted, f"{part} is not inside a table")
                if last:
                    node[key] = value
                else:
                    node = node.setdefault(key, {})
    return doc


def parse_override(text: str) -> tuple[str, Any]:
    """'run.duration=10s' -> ('run.duration', '10s'); values use TOML syntax when they can."""
    if "=" not in text:
        raise ScenarioError(text, "expected FIELD=VALUE, e.g. run.duration=10s")
    key, raw = text.split("=", 1)
    key, raw = key.strip(), raw.strip()
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key, value


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(k: str) -> str:
    """A key as TOML needs it: bare when it can be, else quoted (e.g. "flows[1].rtt")."""
    return k if _BARE_KEY.fullmatch(k) else json.dumps(k)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r} as TOML")


def dump_toml(doc: dict) -> str:
    """Writes a scenario document back as TOML (tables, arrays of tables, inline values)."""
    lines: list[str] = []
    scalars = {k: v for k, v in doc.items() if not isinstance(v, (dict, list)) or (isinstance(v, list) and not all(isinstance(x, dict) for x in v))}
    for k, v in scalars.items():
        lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
    for k, v in doc.items():
        if isinstance(v, dict):
            lines.append(f"\n[{_toml_key(k)}]")
            for kk, vv in v.items():
                lines.append(f"{_toml_key(kk)} = {_toml_value(vv)}")
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for item in v:
                lines.append(f"\n[[{_toml_key(k)}]]")
                for kk, vv in item.items():
                    lines.append(f"{_toml_key(kk)} = {_toml_value(vv)}")
    return "\n".join(lines).lstrip() + "\n"
