"""Scenarios: the TOML (or dict) description of an experiment, validated and
resolved into the engine's input (engine units, one entry per flow) and the
metadata Python keeps beside it.

``Scenario.engine`` is exactly what the engine reads; ``Scenario.meta`` is
what only Python needs (the flow table each flow came from, the background
set-up, the algorithms written in Python and their files, the linux
backend's options). The two never mix: the engine dict goes to the engine as
it is.

Every problem raises ``ScenarioError`` whose text is one line naming the
field, the value and what is allowed, e.g.
``flows[0].cca: unknown congestion control 'cubc'; allowed: cubic, reno``.
The format is documented in docs/scenario.md.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Callable

from .. import _engine
from ..errors import ScenarioError
from .catalogue import FEATURES, Catalogue, cca_catalogue, engine_cca_names
from . import schema
from .checks import check_keys, check_name, engine_error, excerpt, file_name, int_in, require, unit
from .document import apply_overrides, check_depth, dump_toml, parse_override, parse_toml, read_document
from .flows import flow_tables, resolve_flows
from .linux_options import resolve_linux_options
from .network import changes_rate, check_red_fits, resolve_dynamics, resolve_loss, resolve_qdisc, resolve_trace, trace_mean_rate_bps
from .tcp import resolve_tcp
from .traffic import BACKGROUNDS, resolve_dist, resolve_udp, resolve_web
from .units import ENGINE_MAX, parse_buffer, parse_duration, parse_rate, parse_size

__all__ = [
    "Scenario",
    "Meta",
    "ScenarioError",
    "resolve",
    "cca_file_paths",
    "cca_catalogue",
    "apply_overrides",
    "parse_override",
    "dump_toml",
    "DEFAULT_START_JITTER",
]

_TOP_KEYS = {
    "name", "description", "source", "network", "tcp", "flows", "udp", "web", "background", "run", "sweep", "notes", "hosts",
    "requires", "figures", "cca_files", "linux", "startup",
}
_NETWORK_KEYS = {
    "bottleneck_rate", "buffer", "loss", "access_rate", "bdp_rtt", "qdisc", "reverse_bottleneck", "dynamics", "trace",
    "router", "router_burst", "delay_noise", "router_stalls", "return_stalls",
    "trace_repeat",
}
_RUN_KEYS = {"duration", "warmup", "seed", "sample_interval", "start_jitter"}
#: Default random delay of each flow's start (see docs/scenario.md).
DEFAULT_START_JITTER = "10ms"


def resolve_stalls(value: Any, where: str, default: dict | None) -> dict | None:
    """``network.router_stalls`` or ``network.return_stalls`` in engine form:
    "none", or a table of ``every`` (mean time between stalls) and
    ``duration`` (a distribution of durations, as for ``delay_noise``).
    Where the engine has a `default` stall process (the router's measured
    one, in engine form), a table that gives one of the two keeps the
    default's other, so
    ``--set network.router_stalls.every=17ms`` makes the measured stalls
    four times as frequent."""
    if value == "none":
        return None
    if not isinstance(value, dict):
        raise ScenarioError(where, f'expected "none" or a table with every and duration, got {excerpt(value)}')
    fields = schema.fields("router_stalls")
    check_keys(value, fields, where)
    default = default or {}
    if "every" in value or "every" not in default:
        every = unit(parse_duration, require(value, "every", where), f"{where}.every")
        schema.check_range(every, fields["every"], f"{where}.every", value["every"])
    else:
        every = default["every"]
    if "duration" in value or "duration" not in default:
        duration = resolve_dist(require(value, "duration", where), parse_duration, f"{where}.duration")
    else:
        duration = default["duration"]
    return {"every": every, "duration": duration}


@dataclass(frozen=True)
class Meta:
    """What Python keeps beside the engine's input: never sent to the engine,
    stored with every run so that it can be analysed again without resolving
    its scenario."""

    #: The flow table (group) each engine flow came from: [[flows]] tables in
    #: order, then the background set-up's.
    flow_groups: tuple[int, ...] = ()
    #: The background set-up's name.
    background: str = "none"
    #: Algorithms the flows use that are written in Python.
    python_ccas: tuple[str, ...] = ()
    #: The scenario's cca_files as absolute paths (workers load them to run those algorithms).
    cca_files: tuple[str, ...] = ()
    #: The linux backend's options (the [linux] table with defaults filled in).
    linux: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow_groups": list(self.flow_groups),
            "background": self.background,
            "python_ccas": list(self.python_ccas),
            "cca_files": list(self.cca_files),
            "linux": dict(self.linux),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Meta":
        return cls(
            flow_groups=tuple(d.get("flow_groups", ())),
            background=d.get("background", "none"),
            python_ccas=tuple(d.get("python_ccas", ())),
            cca_files=tuple(d.get("cca_files", ())),
            linux=dict(d.get("linux", {})),
        )


def cca_file_paths(doc: dict, base: Path | None) -> list[Path]:
    """The document's cca_files, relative ones taken from `base`."""
    files = doc.get("cca_files", [])
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise ScenarioError("cca_files", "must be a list of Python file paths")
    out = []
    for f in files:
        p = Path(f)
        if not p.is_absolute() and base is not None:
            p = base / p
        out.append(p)
    return out


_HOSTS_KEYS = {"tso", "gso", "rx_batching", "rx_hold", "app_reads", "read_wait", "read_size", "read_again_wait", "iperf3_test_start_wait", "line_rate", "tsq", "write_queue", "tso_defer"}
_TSO_DEFER_RULES = ("ack_due", "half_rtt")


def resolve_hosts(table: Any) -> dict:
    """The ``[hosts]`` table (docs/scenario.md): offloads and receive batching,
    each field defaulting to the engine's (a stock Linux host)."""
    if not isinstance(table, dict):
        raise ScenarioError("hosts", "must be a table such as { tso = false }")
    check_keys(table, _HOSTS_KEYS, "hosts")
    out: dict = {}
    for key in ("tso", "gso", "rx_batching", "app_reads", "tsq", "write_queue"):
        if key in table:
            if not isinstance(table[key], bool):
                raise ScenarioError(f"hosts.{key}", f"must be true or false, got {excerpt(table[key])}")
            out[key] = table[key]
    if "tso_defer" in table:
        if table["tso_defer"] not in _TSO_DEFER_RULES:
            raise ScenarioError("hosts.tso_defer", f"unknown rule {excerpt(table['tso_defer'])}; allowed: {', '.join(_TSO_DEFER_RULES)}")
        out["tso_defer"] = table["tso_defer"]
    for key in ("rx_hold", "read_wait", "read_again_wait", "iperf3_test_start_wait"):
        if key in table:
            out[key] = resolve_dist(table[key], parse_duration, f"hosts.{key}")
    if "read_size" in table:
        out["read_size"] = unit(parse_size, table["read_size"], "hosts.read_size")
        if out["read_size"] <= 0:
            raise ScenarioError("hosts.read_size", "must be positive, e.g. \"128KB\"")
    if "line_rate" in table:
        out["line_rate"] = unit(parse_rate, table["line_rate"], "hosts.line_rate")
        if out["line_rate"] <= 0:
            raise ScenarioError("hosts.line_rate", "must be positive")
    return out


def _features_used(engine: dict) -> list[str]:
    """The optional parts of the scenario language (catalogue.FEATURES) an engine input uses."""
    network, flows = engine["network"], engine["flows"]
    used = {
        "udp": bool(engine["udp"]),
        "web": bool(engine["web"]),
        "network.dynamics": "dynamics" in network,
        "network.trace": "trace" in network,
        "network.reverse_bottleneck": "reverse_bottleneck" in network,
        "flows[].jitter": any(f["jitter"] for f in flows),
        "flows[].data_delay": any(f.get("data_delay") for f in flows),
        "flows[].direction = reverse": any(f["direction"] == "reverse" for f in flows),
    }
    return [name for name in FEATURES if used[name]]


#: The most samples (per flow, UDP source and queue, per sample interval) a run
#: may record unless CCARENA_MAX_SAMPLES raises it: about 1 KiB each in memory
#: while a run's record and tables are built, so about 2 GiB.
MAX_SAMPLES = 2_000_000


def max_samples() -> int:
    """The sample limit: MAX_SAMPLES or the environment's CCARENA_MAX_SAMPLES."""
    raw = os.environ.get("CCARENA_MAX_SAMPLES", "")
    return int(raw) if raw.isdigit() else MAX_SAMPLES


def check_cost(engine: dict) -> None:
    """Refuses a run that would record more samples than the limit, before it runs."""
    duration_ns, interval_ns = engine["run"]["duration"], engine["run"]["sample_interval"]
    series = len(engine["flows"]) + len(engine["udp"])
    samples = (duration_ns // max(interval_ns, 1) + 1) * (series + 1)
    limit = max_samples()
    if samples > limit:
        raise ScenarioError(
            "run.sample_interval",
            f"{samples:,} samples ({series} series over {duration_ns / 1e9:g} s) exceed the limit of {limit:,} "
            f"(about {limit // 1_000_000} GB of memory); use a longer sample interval or set CCARENA_MAX_SAMPLES",
        )


def flow_rtts(flows: list[dict], seed: int, doc: dict) -> list[int]:
    """The RTT (ns) each engine flow gets: fixed ones as given, those given
    as a distribution as the engine draws them from `seed` (its flow-rtt
    stream, one draw per such flow in flow order)."""
    if not any(isinstance(f["rtt"], dict) for f in flows):
        return [f["rtt"] for f in flows]
    # The draws depend on the seed and the flows alone; the rest is a placeholder.
    config = {"network": {"bottleneck_rate": 1, "buffer": {"packets": 1}}, "flows": flows, "run": {"duration": 1, "seed": seed}}
    origins = {"flows": [where for where, table, _, _ in flow_tables(doc) for _ in range(table.get("count", 1))]}
    try:
        rtts = _engine.flow_rtts_json(json.dumps(config))
    except ValueError as e:
        raise engine_error(e, origins) from None
    for where, r in zip(origins["flows"], rtts):
        if r > ENGINE_MAX:
            raise ScenarioError(f"{where}.rtt", "the distribution's parameters give RTTs too large to use")
    return rtts


def engine_origins(doc: dict) -> dict[str, list[str]]:
    """The scenario table (dotted, as written) each entry of the engine's
    ``flows``, ``udp`` and ``web`` lists came from, for a resolved document:
    a table with ``count = n`` gives n flows or sources, a web table with
    ``direction = "both"`` two generators, and the background set-up's
    tables follow the scenario's own."""
    flows = [where for where, table, _, _ in flow_tables(doc) for _ in range(table.get("count", 1))]
    udp = [f"udp[{i}]" for i, t in enumerate(doc.get("udp", [])) for _ in range(t.get("count", 1))]
    background = doc.get("background", "none")
    web_tables = [(f"web[{i}]", t) for i, t in enumerate(doc.get("web", []))]
    web_tables += [(f"background[{background}].web[{k}]", t) for k, t in enumerate(BACKGROUNDS[background].get("web", []))]
    web = [where for where, t in web_tables for _ in range(2 if t.get("direction") == "both" else 1)]
    return {"flows": flows, "udp": udp, "web": web}


def check_with_engine(engine: dict, external: list[str], doc: dict | None = None) -> None:
    """Has the engine check its input (what it would run); `external` are the
    algorithms it is not to build itself (checked by the backend that runs
    them); `doc`, the scenario it came from, names fields as written there."""
    try:
        _engine.validate_json(json.dumps(engine), external)
    except ValueError as e:
        raise engine_error(e, engine_origins(doc) if doc is not None else None) from None


def resolve(doc: dict, catalogue: Catalogue | None = None, base: Path | None = None, check: bool = True) -> tuple[dict, Meta]:
    """Validates a scenario document and returns the engine's input and the metadata beside it.

    `catalogue` says which algorithms and features the backend that will run
    the scenario has (default: the engine's built-in algorithms). `base` is
    the directory relative paths in the document (cca_files, traces) start
    from. With `check` off the engine does not check its input here: the
    caller runs it at once, and the engine checks what it runs.
    """
    catalogue = catalogue or Catalogue()
    check_keys(doc, _TOP_KEYS, "")
    if "name" in doc:
        check_name(doc["name"])
    files = cca_file_paths(doc, base)
    catalogue = catalogue.with_files(files)
    net = check_keys(require(doc, "network", "scenario"), _NETWORK_KEYS, "network")
    run = check_keys(require(doc, "run", "scenario"), _RUN_KEYS, "run")
    flows = doc.get("flows")
    if flows is None:
        raise ScenarioError("flows", "missing required field; add at least one [[flows]] table")
    if not isinstance(flows, list) or not flows:
        raise ScenarioError("flows", "must be a non-empty list of [[flows]] tables")

    seed = int_in(run.get("seed", schema.default("run", "seed")), "run.seed", 0, 2**63 - 1)
    trace = None
    if "trace" in net:
        trace = resolve_trace(net["trace"], net.get("trace_repeat", True), base)
    elif "trace_repeat" in net:
        raise ScenarioError("network.trace_repeat", "only applies with network.trace")
    if "bottleneck_rate" in net or trace is None:
        rate = unit(parse_rate, require(net, "bottleneck_rate", "network"), "network.bottleneck_rate")
    else:
        # The trace sets the forward rate; the reverse link and defaults use its mean.
        rate = int(round(trace_mean_rate_bps(trace)))
    if rate <= 0:
        raise ScenarioError("network.bottleneck_rate", f"must be positive, got {net['bottleneck_rate']!r}")
    access = None
    if "access_rate" in net and "line_rate" in doc.get("hosts", {}):
        raise ScenarioError("network.access_rate", "is the older name of hosts.line_rate; give one of them")
    if "access_rate" in net:
        access = unit(parse_rate, net["access_rate"], "network.access_rate")
        if access <= 0:
            raise ScenarioError("network.access_rate", "must be positive")
    loss = resolve_loss(net.get("loss", 0.0), "network.loss")

    base_tcp = resolve_tcp(doc.get("tcp", {}), "tcp", {})
    background = doc.get("background", "none")
    if not isinstance(background, str) or background not in BACKGROUNDS:
        raise ScenarioError("background", f"unknown background set-up {excerpt(background)}; allowed: {', '.join(BACKGROUNDS)}")
    setup = BACKGROUNDS[background]
    engine_flows, groups = resolve_flows(doc, catalogue, base_tcp)
    # A size in BDPs is sized for the flows under study.
    rtts_ns = flow_rtts(engine_flows, seed, doc)
    studied = [r + f.get("data_delay", 0) for r, f in zip(rtts_ns, engine_flows) if not f["background"]] or rtts_ns
    bdp_bytes = _bdp_bytes(net, rate, max(studied))
    kind, amount = unit(parse_buffer, require(net, "buffer", "network"), "network.buffer")
    if kind == "bdp":
        kind, amount = "bytes", bdp_bytes(amount)
    if amount < 1 or (kind == "bytes" and amount < 1500):
        raise ScenarioError("network.buffer", f"must hold at least one 1500-byte packet, got {net['buffer']!r}")
    network = {"bottleneck_rate": rate, "buffer": {kind: amount}, "loss": loss, "access_rate": access}
    if net.get("reverse_bottleneck", False) is not False:
        if net["reverse_bottleneck"] is not True:
            raise ScenarioError("network.reverse_bottleneck", f"must be true or false, got {net['reverse_bottleneck']!r}")
        network["reverse_bottleneck"] = True
    if "dynamics" in net:
        network["dynamics"] = resolve_dynamics(net["dynamics"])
        if trace is not None and changes_rate(network["dynamics"]):
            raise ScenarioError("network.dynamics", "a trace-driven bottleneck takes its rate from the trace; change delay or loss only")
    if trace is not None:
        network["trace"] = trace
    if "router" in net:
        if net["router"] not in ("linux", "switch"):
            raise ScenarioError("network.router", f"unknown router kind {excerpt(net['router'])}; allowed: linux, switch")
        network["router"] = net["router"]
    if "router_burst" in net:
        network["router_burst"] = unit(parse_size, net["router_burst"], "network.router_burst")
    if "delay_noise" in net:
        # "none", or a lateness of exactly zero, keeps every delay exact.
        noise = None if net["delay_noise"] == "none" else resolve_dist(net["delay_noise"], parse_duration, "network.delay_noise")
        network["delay_noise"] = None if noise == {"distribution": "constant", "value": 0.0} else noise
    for stalls in ("router_stalls", "return_stalls"):
        if stalls in net:
            network[stalls] = resolve_stalls(net[stalls], f"network.{stalls}", schema.default("network", stalls))
    if "qdisc" in net:
        network["qdisc"] = resolve_qdisc(net["qdisc"], "network.qdisc", bdp_bytes)
        check_red_fits(network["qdisc"], network["buffer"])

    run_fields = schema.fields("run")
    duration = unit(parse_duration, require(run, "duration", "run"), "run.duration")
    schema.check_range(duration, run_fields["duration"], "run.duration", run["duration"])
    warmup = unit(parse_duration, run["warmup"], "run.warmup") if "warmup" in run else run_fields["warmup"]["default"]
    if warmup >= duration:
        raise ScenarioError("run.warmup", f"must be shorter than run.duration ({run['duration']})")
    interval = run_fields["sample_interval"]["default"]
    if "sample_interval" in run:
        interval = unit(parse_duration, run["sample_interval"], "run.sample_interval")
        schema.check_range(interval, run_fields["sample_interval"], "run.sample_interval", run["sample_interval"])
    start_jitter = unit(parse_duration, run.get("start_jitter", DEFAULT_START_JITTER), "run.start_jitter")

    udp = resolve_udp(doc.get("udp", []), duration)
    web_tables = list(doc.get("web", [])) if isinstance(doc.get("web", []), list) else doc.get("web")
    names = sorted(catalogue.names)
    web = resolve_web(web_tables, names, base_tcp) + resolve_web(setup.get("web", []), names, base_tcp)
    engine = {
        "network": network,
        "flows": engine_flows,
        "udp": udp,
        "web": web,
        "run": {"duration": duration, "warmup": warmup, "seed": seed, "sample_interval": interval, "start_jitter": start_jitter},
        "hosts": resolve_hosts(doc.get("hosts", {})),
    }
    if catalogue.features is not None:
        lacking = [f for f in _features_used(engine) if f not in catalogue.features]
        if lacking:
            raise ScenarioError("backend", catalogue.refusal.format(features=", ".join(lacking)))
    # Web generators may use the algorithms written in Python too.
    used = {f["cca"] for f in engine_flows} | {w["cca"] for w in web}
    python_ccas = sorted(used & catalogue.python)
    if check:
        # Algorithms the engine does not have are the backend's to check (their names were checked above).
        check_with_engine(engine, sorted(used - engine_cca_names()), doc)
        check_cost(engine)
    meta = Meta(
        flow_groups=tuple(groups),
        background=background,
        python_ccas=tuple(python_ccas),
        cca_files=tuple(str(p.resolve()) for p in files),
        linux=resolve_linux_options(doc.get("linux", {}), rate, engine["hosts"].get("tso", schema.default("hosts", "tso"))),
    )
    return engine, meta


def _bdp_bytes(net: dict, rate: int, max_rtt_ns: int) -> Callable[[float], int]:
    """Bytes in `multiple` bandwidth-delay products of the bottleneck, at
    network.bdp_rtt or the longest RTT of the flows under study (read when
    first needed, so that an unused bdp_rtt is not checked)."""

    @cache
    def rtt() -> int:
        return unit(parse_duration, net["bdp_rtt"], "network.bdp_rtt") if "bdp_rtt" in net else max_rtt_ns

    return lambda multiple: int(round(rate / 8 * rtt() / 1e9 * multiple))


@dataclass
class Scenario:
    """A validated scenario: the document as written, the engine's input
    resolved from it, and the metadata beside that."""

    doc: dict
    engine: dict = field(repr=False)
    meta: Meta = field(repr=False)
    path: str | None = None
    #: The backend it was validated for.
    backend: str = "sim"
    #: The catalogue it was validated with (overrides are checked with it again).
    catalogue: Catalogue | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        if "name" in self.doc:
            return str(self.doc["name"])
        return Path(self.path).stem if self.path else "scenario"

    @property
    def file_name(self) -> str:
        """The name as one safe path component (results directories use it)."""
        return file_name(self.name)

    @property
    def description(self) -> str:
        return str(self.doc.get("description", ""))

    @property
    def seed(self) -> int:
        return self.engine["run"]["seed"]

    @classmethod
    def from_dict(cls, doc: dict, path: str | None = None, catalogue: Catalogue | None = None, check: bool = True) -> "Scenario":
        """Validates `doc` for the backend of `catalogue` (default: the engine's
        built-in algorithms); `path` is the file it came from, if any."""
        check_depth(doc)
        doc = copy.deepcopy(doc)
        base = Path(path).parent if path else None
        engine, meta = resolve(doc, catalogue, base, check)
        backend = catalogue.backend if catalogue is not None else "sim"
        return cls(doc=doc, engine=engine, meta=meta, path=path, backend=backend, catalogue=catalogue)

    @classmethod
    def from_toml(cls, text: str, path: str | None = None, catalogue: Catalogue | None = None) -> "Scenario":
        return cls.from_dict(parse_toml(text, path), path, catalogue)

    @classmethod
    def load(cls, source: "str | Path | dict | Scenario", catalogue: Catalogue | None = None,
             overrides: dict[str, Any] | None = None, check: bool = True) -> "Scenario":
        """A scenario from a file path, a preset name, TOML text, a dict or a
        Scenario, with `overrides` applied, resolved once."""
        if isinstance(source, Scenario):
            if not overrides and (catalogue is None or catalogue == source.catalogue):
                return source
            doc, path = source.doc, source.path
            catalogue = catalogue if catalogue is not None else source.catalogue
        elif isinstance(source, dict):
            doc, path = source, None
            check_depth(doc)
        else:
            doc, path = read_document(source)
        if overrides:
            doc = apply_overrides(doc, overrides)
        return cls.from_dict(doc, path, catalogue, check)

    def with_overrides(self, overrides: dict[str, Any]) -> "Scenario":
        """The scenario with dotted fields set (itself when there are none)."""
        if not overrides:
            return self
        return Scenario.from_dict(apply_overrides(self.doc, overrides), self.path, self.catalogue)

    def check_cost(self) -> None:
        """Refuses the run if it would record more samples than the limit (model.check_cost);
        the engine's own complaint about its input, if it has one, comes first."""
        try:
            check_cost(self.engine)
        except ScenarioError:
            used = {f["cca"] for f in self.engine["flows"]} | {w["cca"] for w in self.engine["web"]}
            check_with_engine(self.engine, sorted(used - engine_cca_names()), self.doc)
            raise

    def flow_rtts(self) -> list[int]:
        """The RTT (ns) each flow gets, drawn ones included (the run's record has the same)."""
        return flow_rtts(self.engine["flows"], self.seed, self.doc)

    def flow_starts(self) -> list[int]:
        """When each flow starts (ns): its `start` plus its draw of
        `run.start_jitter`, as the engine draws them (the run's start-jitter
        stream, one draw per flow in flow order). The linux backend launches
        its flows at these instants."""
        return list(_engine.flow_starts_json(self.engine_json()))

    def engine_error(self, error: ValueError) -> ScenarioError:
        """The engine's complaint about this scenario's input, naming the field as the scenario wrote it."""
        return engine_error(error, engine_origins(self.doc))

    def engine_json(self) -> str:
        return json.dumps(self.engine)

    def flow_groups(self) -> list[int]:
        """Index of the flow table each engine flow came from."""
        return list(self.meta.flow_groups)

    def to_toml(self) -> str:
        return dump_toml(self.doc)
