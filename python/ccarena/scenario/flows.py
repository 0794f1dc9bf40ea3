"""The long-lived TCP flows of a scenario: its ``[[flows]]`` tables and those
of its background set-up, each expanded into ``count`` engine flows.

Which algorithms a flow may name comes from the backend's ``Catalogue``.
The index of the table each engine flow came from (its group) is kept
beside the engine's input (``Meta.flow_groups``): metrics such as the
inter-group throughput ratio need it.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import ScenarioError
from .catalogue import Catalogue, check_param_values
from .checks import boolean, check_keys, int_in, require, unit
from .network import resolve_jitter
from .tcp import resolve_tcp
from .traffic import BACKGROUNDS, direction_of, resolve_dist
from .units import parse_duration, parse_size

__all__ = ["flow_tables", "resolve_flows", "flow_groups_of", "STARTUPS"]

_FLOW_KEYS = {
    "cca", "rtt", "count", "start", "stagger", "stop", "size", "label", "cca_params", "tcp", "direction", "background",
    "jitter", "data_delay", "startup",
}

#: How a flow may start (the engine's `startup` values; docs/scenario.md).
STARTUPS = ("immediate", "iperf3")
#: The longest one-way data delay the engine takes (its schema's range: 10 s).
MAX_DATA_DELAY = 10_000_000_000


def check_startup(value: Any, where: str) -> str:
    """A `startup` value: "immediate" or "iperf3"."""
    if value not in STARTUPS:
        raise ScenarioError(where, f"unknown start-up {value!r}; allowed: {', '.join(STARTUPS)}")
    return value


def flow_tables(doc: dict) -> list[tuple[str, Any, int, bool]]:
    """(where, table, start offset in ns, from the background set-up) of every
    flow table: the scenario's own, delayed by the set-up's `interest_start`,
    then the background set-up's. The document's `flows` and `background`
    must have been checked."""
    setup = BACKGROUNDS[doc.get("background", "none")]
    interest_start = parse_duration(setup.get("interest_start", 0))
    background = doc.get("background", "none")
    tables = [(f"flows[{i}]", g, interest_start, False) for i, g in enumerate(doc["flows"])]
    tables += [(f"background[{background}].flows[{k}]", g, 0, True) for k, g in enumerate(setup.get("flows", []))]
    return tables


def flow_groups_of(doc: dict) -> list[int]:
    """The group (flow table index) of each engine flow of a valid scenario
    document, from the tables' counts alone (no resolution)."""
    return [i for i, (_, table, _, _) in enumerate(flow_tables(doc)) for _ in range(table.get("count", 1))]


def _per_flow(value: Any, count: int, parse: Callable[[Any], int], where: str) -> list:
    """A value for each of `count` flows: one value for all, or a list of `count`."""
    if isinstance(value, list):
        if len(value) != count:
            raise ScenarioError(where, f"gives {len(value)} values for count = {count} flows")
        return [unit(parse, v, f"{where}[{i}]") for i, v in enumerate(value)]
    return [unit(parse, value, where)] * count


def _check_cca(group: dict, where: str, catalogue: Catalogue) -> tuple[str, dict]:
    """The flow table's algorithm and its parameters, checked against the catalogue."""
    cca = require(group, "cca", where)
    names = catalogue.names
    if not isinstance(cca, str) or cca not in names:
        raise ScenarioError(f"{where}.cca", f"unknown congestion control {cca!r}{catalogue.scope}; allowed: {', '.join(sorted(names))}")
    return cca, group.get("cca_params", {})


def _check_params(cca: str, params: Any, where: str, catalogue: Catalogue) -> dict:
    if not isinstance(params, dict):
        raise ScenarioError(where, "must be a table such as { hystart = false }")
    check_param_values(cca, params, where)
    if cca in catalogue.python and catalogue.check_params is not None:
        # Python algorithms check their own parameters (the engine checks the built-in ones).
        try:
            catalogue.check_params(cca, params)
        except (TypeError, ValueError) as e:
            raise ScenarioError(where, str(e)) from None
    if catalogue.no_params is not None and params:
        raise ScenarioError(where, catalogue.no_params)
    return params


def _resolve_group(group: Any, where: str, catalogue: Catalogue, base_tcp: dict, offset: int,
                   from_setup: bool, startup: str = "immediate") -> list[dict]:
    """The engine flows of one flow table."""
    check_keys(group, _FLOW_KEYS, where)
    cca, params = _check_cca(group, where, catalogue)
    count = int_in(group.get("count", 1), f"{where}.count", 1, 10_000)
    rtt_value = require(group, "rtt", where)
    if isinstance(rtt_value, dict):
        # The engine draws each flow's RTT from the run's seed (its flow-rtt
        # stream, in flow order): repetitions draw afresh.
        rtts: list = [resolve_dist(rtt_value, parse_duration, f"{where}.rtt")] * count
    else:
        rtts = _per_flow(rtt_value, count, parse_duration, f"{where}.rtt")
        for r in rtts:
            if r <= 0:
                raise ScenarioError(f"{where}.rtt", "must be positive")
    starts = _per_flow(group.get("start", 0), count, parse_duration, f"{where}.start")
    if "stagger" in group:
        step = unit(parse_duration, group["stagger"], f"{where}.stagger")
        starts = [s + j * step for j, s in enumerate(starts)]
    starts = [s + offset for s in starts]
    stops = _per_flow(group["stop"], count, parse_duration, f"{where}.stop") if "stop" in group else [None] * count
    stops = [s + offset if s is not None else None for s in stops]
    size = None
    if "size" in group:
        size = unit(parse_size, group["size"], f"{where}.size")
        if size <= 0:
            raise ScenarioError(f"{where}.size", "must be positive")
    params = _check_params(cca, params, f"{where}.cca_params", catalogue)
    tcp = resolve_tcp(group.get("tcp", {}), f"{where}.tcp", base_tcp)
    label = group.get("label", cca)
    if not isinstance(label, str):
        raise ScenarioError(f"{where}.label", "must be a string")
    (direction,) = direction_of(group.get("direction", "forward"), f"{where}.direction")
    background = boolean(group.get("background", from_setup), f"{where}.background")
    jitter = resolve_jitter(group["jitter"], f"{where}.jitter") if "jitter" in group else None
    data_delay = 0
    if "data_delay" in group:
        data_delay = unit(parse_duration, group["data_delay"], f"{where}.data_delay")
        if not 0 <= data_delay <= MAX_DATA_DELAY:
            raise ScenarioError(f"{where}.data_delay", f"must be in 0s..10s (one-way, data direction only), got {group['data_delay']!r}")
    startup = check_startup(group.get("startup", startup), f"{where}.startup")
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
            }
        )
        # Only when set, so that engine inputs without them stay as they were.
        if data_delay:
            out[-1]["data_delay"] = data_delay
        if startup != "immediate":
            out[-1]["startup"] = startup
    return out


def resolve_flows(doc: dict, catalogue: Catalogue, base_tcp: dict) -> tuple[list[dict], list[int]]:
    """The engine flows of every flow table, and the group of each. A flow
    whose table gives its RTT as a distribution carries the distribution
    (engine form); the engine draws it."""
    flows: list[dict] = []
    groups: list[int] = []
    startup = check_startup(doc.get("startup", "immediate"), "startup")
    for i, (where, table, offset, from_setup) in enumerate(flow_tables(doc)):
        new = _resolve_group(table, where, catalogue, base_tcp, offset, from_setup, startup)
        flows += new
        groups += [i] * len(new)
    return flows, groups
