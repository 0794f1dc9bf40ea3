"""Sweeps: a scenario's ``[sweep]`` table expanded into a list of runs.

A sweep is a grid over scenario fields times a number of repetitions (seeds).
Each grid axis names one field by a dotted path, exactly like ``--set``
overrides (``"flows[0].cca"``, ``"network.buffer"``), or by a shorthand
(``cca``, ``rtt``, ``bottleneck_rate``, ...). ``[[sweep.zip]]`` tables are
axes whose fields vary together. docs/scenario.md describes the syntax.

Expansion is pure: ``expand(doc)`` returns ``RunSpec``s, each with its
content-addressed run id (hash of the resolved engine configuration, which
includes the seed, of the flow groups, of the Python algorithms' files when
the run uses any, and of the ccarena version), so the same run is recognised
across sweeps, machines and interrupted attempts.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..backends.sim import SIM
from ..errors import ScenarioError
from ..scenario.catalogue import Catalogue
from ..scenario.document import apply_overrides, expand_star
from ..scenario.model import Meta, Scenario, cca_file_paths
from ..scenario.units import UnitError, parse_duration
from ..version import __version__

__all__ = ["Axis", "RunSpec", "Sweep", "expand", "expand_sweep", "parse_sweep", "quick_settings", "apply_quick", "run_id_for", "SHORTHANDS", "CCA_FIELD_SUFFIX"]

# Shorthand axis names and the fields they set. "flows[*]" means every [[flows]] table.
SHORTHANDS: dict[str, str] = {
    "cca": "flows[*].cca",
    "rtt": "flows[*].rtt",
    "count": "flows[*].count",
    "start": "flows[*].start",
    "stagger": "flows[*].stagger",
    "cca_params": "flows[*].cca_params",
    "bottleneck_rate": "network.bottleneck_rate",
    "buffer": "network.buffer",
    "loss": "network.loss",
    "access_rate": "network.access_rate",
    "duration": "run.duration",
    "warmup": "run.warmup",
}
_RESERVED = {"repetitions", "seeds", "zip", "quick"}
#: Suffix of the fields that name an algorithm.
CCA_FIELD_SUFFIX = ".cca"


@dataclass
class Axis:
    """One dimension of the grid: a name, the fields it sets, and its values.

    ``values[k]`` is the tuple of values the fields take at step k (one per
    field); ``labels[k]`` is how step k is shown (the value itself for a single
    field).
    """

    name: str
    fields: list[str]
    values: list[tuple]
    labels: list[Any]
    zipped: bool = False

    def __len__(self) -> int:
        return len(self.values)


@dataclass
class Sweep:
    axes: list[Axis]
    seeds: list[int]
    quick: dict[str, Any] = field(default_factory=dict)

    @property
    def repetitions(self) -> int:
        return len(self.seeds)

    @property
    def points(self) -> int:
        n = 1
        for a in self.axes:
            n *= len(a)
        return n

    def describe(self) -> list[dict]:
        """Name, fields and labels of each axis (for reports)."""
        return [{"name": a.name, "fields": a.fields, "labels": a.labels} for a in self.axes]


@dataclass
class RunSpec:
    """One run of a sweep: grid point, repetition, its scenario and identity."""

    point: int
    repetition: int
    seed: int
    params: dict[str, Any]  # axis name -> label, plus every swept field -> value
    doc: dict
    run_id: str = ""
    scenario_hash: str = ""
    engine: dict | None = None
    meta: Meta | None = None
    skip_reason: str | None = None  # set when the run cannot be run by this engine (e.g. CCA not built yet)

    @property
    def simulated_s(self) -> float:
        if self.engine is not None:
            return self.engine["run"]["duration"] / 1e9
        try:
            return parse_duration(self.doc["run"]["duration"]) / 1e9
        except (KeyError, UnitError):
            return 0.0

    def engine_json(self) -> str:
        assert self.engine is not None
        return json.dumps(self.engine)


def _canonical(engine: dict, meta: Meta | None) -> str:
    # The engine's input, plus which flow table each flow came from: metrics
    # such as group_throughput_ratio depend on it, so two scenarios that differ
    # only in how flows are grouped are different runs. Python algorithms are
    # named, not defined, in the engine's input: their files' contents count too.
    key = dict(engine)
    if meta is not None:
        key["flow_groups"] = list(meta.flow_groups)
        if meta.python_ccas:
            key["cca_files"] = [hashlib.sha256(Path(f).read_bytes()).hexdigest() for f in meta.cca_files]
    return json.dumps(key, sort_keys=True, separators=(",", ":"))


def run_id_for(engine: dict, version: str = __version__, meta: Meta | None = None) -> tuple[str, str]:
    """(run id, scenario hash) of a resolved engine configuration and its metadata.

    The run id hashes the configuration (seed included) and the ccarena
    version; the scenario hash leaves the seed out, so the repetitions of one
    grid point share it.
    """
    run = hashlib.sha256(f"ccarena {version}\n{_canonical(engine, meta)}".encode()).hexdigest()[:16]
    unseeded = copy.deepcopy(engine)
    unseeded["run"]["seed"] = 0
    scen = hashlib.sha256(_canonical(unseeded, meta).encode()).hexdigest()[:16]
    return run, scen


def _expand_path(path: str, doc: dict, where: str) -> list[str]:
    """Dotted path with shorthands and `flows[*]` expanded to concrete paths."""
    path = SHORTHANDS.get(path, path)
    if "[*]" in path:
        # As with --set: the flows under study, not the background tables.
        return expand_star(path, doc, where)
    if "." not in path and "[" not in path:
        allowed = ", ".join(sorted(SHORTHANDS))
        raise ScenarioError(where, f"not a field; use a shorthand ({allowed}) or a dotted path such as flows[0].cca")
    return [path]


def _values(value: Any, where: str) -> list:
    if not isinstance(value, list) or not value:
        raise ScenarioError(where, f"must be a non-empty list of values, got {value!r}")
    return value


def _label(values: tuple) -> Any:
    if len(set(json.dumps(v, sort_keys=True) for v in values)) == 1:
        return values[0]
    return "/".join(str(v) for v in values)


def parse_sweep(doc: dict) -> Sweep | None:
    """The scenario's [sweep] table as axes and seeds (None if it has none)."""
    table = doc.get("sweep")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ScenarioError("sweep", "must be a table such as [sweep] with cca = [\"cubic\", \"reno\"]")
    base_seed = doc.get("run", {}).get("seed", 1) if isinstance(doc.get("run"), dict) else 1
    if isinstance(base_seed, bool) or not isinstance(base_seed, int):
        base_seed = 1
    if "seeds" in table and "repetitions" in table:
        raise ScenarioError("sweep.seeds", "give either repetitions or seeds, not both")
    if "seeds" in table:
        seeds = _values(table["seeds"], "sweep.seeds")
        if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
            raise ScenarioError("sweep.seeds", f"must be a list of non-negative integers, got {seeds!r}")
        if len(set(seeds)) != len(seeds):
            raise ScenarioError("sweep.seeds", "seeds must be distinct")
    else:
        reps = table.get("repetitions", 1)
        if isinstance(reps, bool) or not isinstance(reps, int) or not 1 <= reps <= 10_000:
            raise ScenarioError("sweep.repetitions", f"must be an integer in 1..10000, got {reps!r}")
        seeds = [base_seed + k for k in range(reps)]

    axes: list[Axis] = []
    names: set[str] = set()
    for key, value in table.items():
        if key in _RESERVED:
            continue
        where = f"sweep.{key}" if key.isidentifier() else f'sweep."{key}"'
        vals = _values(value, where)
        fields = _expand_path(key, doc, where)
        axes.append(Axis(key, fields, [tuple([v] * len(fields)) for v in vals], list(vals)))
        names.add(key)

    zips = table.get("zip", [])
    if isinstance(zips, dict):
        zips = [zips]
    if not isinstance(zips, list):
        raise ScenarioError("sweep.zip", "must be [[sweep.zip]] tables of fields that vary together")
    for z, ztable in enumerate(zips):
        where = f"sweep.zip[{z}]"
        if not isinstance(ztable, dict):
            raise ScenarioError(where, "must be a table of field = [values] entries")
        labels = ztable.get("labels")
        fields: list[str] = []
        columns: list[list] = []
        for key, value in ztable.items():
            if key in ("name", "labels"):
                continue
            kwhere = f'{where}."{key}"'
            vals = _values(value, kwhere)
            for path in _expand_path(key, doc, kwhere):
                fields.append(path)
                columns.append(vals)
        if not fields:
            raise ScenarioError(where, "lists no fields; add entries such as \"flows[0].cca\" = [\"cubic\", \"reno\"]")
        n = len(columns[0])
        for path, col in zip(fields, columns):
            if len(col) != n:
                raise ScenarioError(where, f"fields that vary together need lists of one length; {fields[0]} has {n} values, {path} has {len(col)}")
        if labels is not None and (not isinstance(labels, list) or len(labels) != n):
            raise ScenarioError(f"{where}.labels", f"must be a list of {n} labels, one per step")
        name = ztable.get("name", "+".join(dict.fromkeys(k for k in ztable if k not in ("name", "labels"))))
        if not isinstance(name, str) or not name:
            raise ScenarioError(f"{where}.name", "must be a non-empty string")
        if name in names:
            raise ScenarioError(f"{where}.name", f"axis {name!r} is defined twice")
        names.add(name)
        values = [tuple(col[k] for col in columns) for k in range(n)]
        if labels is None:
            # Default labels: the first field's values when they tell the steps apart, else all values joined.
            first = [json.dumps(v[0], sort_keys=True) for v in values]
            labels = [v[0] for v in values] if len(set(first)) == n and not any(isinstance(v[0], (list, dict)) for v in values) else [_label(v) for v in values]
        axes.append(Axis(name, fields, values, list(labels), zipped=True))

    seen: dict[str, str] = {}
    for a in axes:
        for f in a.fields:
            if f in seen:
                raise ScenarioError(f"sweep.{a.name}", f"sets {f}, which axis {seen[f]!r} also sets")
            seen[f] = a.name

    return Sweep(axes=axes, seeds=seeds, quick=_quick(table))


def _quick(table: dict) -> dict:
    quick = table.get("quick", {})
    if not isinstance(quick, dict):
        raise ScenarioError("sweep.quick", "must be a table such as { repetitions = 2, \"run.duration\" = \"60s\" }")
    return quick


def quick_settings(doc: dict) -> dict:
    """The document's [sweep.quick] table (empty without one)."""
    table = doc.get("sweep")
    return _quick(table) if isinstance(table, dict) else {}


def apply_quick(doc: dict) -> dict:
    """The document with its [sweep.quick] settings applied (shorter runs, fewer repetitions)."""
    quick = quick_settings(doc)
    if not quick:
        return copy.deepcopy(doc)
    out = copy.deepcopy(doc)
    overrides = {}
    for key, value in quick.items():
        if key in ("repetitions", "seeds"):
            out["sweep"].pop("repetitions", None)
            out["sweep"].pop("seeds", None)
            out["sweep"][key] = value
        else:
            overrides[SHORTHANDS.get(key, key)] = value
    out["sweep"].pop("quick", None)
    return apply_overrides(out, overrides) if overrides else out


# Algorithms planned for the engine but not in it yet. A sweep naming one skips
# those runs with a reason (and computes them once the algorithm lands); any
# other unknown name is a mistake and an error. Every algorithm planned so far
# has landed.
PLANNED_CCAS: frozenset[str] = frozenset()


def _missing_ccas(doc: dict, available: set[str]) -> list[str]:
    flows = doc.get("flows")
    if not isinstance(flows, list):
        return []
    return sorted({f.get("cca") for f in flows if isinstance(f, dict) and isinstance(f.get("cca"), str) and f.get("cca") not in available})


def _base_doc(doc: dict) -> dict:
    out = copy.deepcopy(doc)
    out.pop("sweep", None)
    return out


def expand(doc: dict, repetitions: int | None = None, path: str | None = None, catalogue: Catalogue | None = None) -> list[RunSpec]:
    """Every run of the scenario's sweep (one run if it has no [sweep]); see ``expand_sweep``."""
    return expand_sweep(doc, parse_sweep(doc), repetitions, path, catalogue)


def expand_sweep(doc: dict, sw: Sweep | None, repetitions: int | None = None, path: str | None = None,
                 catalogue: Catalogue | None = None) -> list[RunSpec]:
    """Every run of `doc`'s sweep `sw` (parsed from it; None: one run).

    Runs are validated with `catalogue` (default: the simulator's, with the
    scenario's cca_files, which `path`, the scenario's file, locates). Runs
    whose algorithms this engine does not have yet are returned with
    ``skip_reason`` set instead of failing the whole sweep. Any other invalid
    value raises ``ScenarioError`` naming the sweep axis and step.
    """
    base = _base_doc(doc)
    run_table = base.get("run") if isinstance(base.get("run"), dict) else {}
    if sw is None:
        sw = Sweep(axes=[], seeds=[run_table.get("seed", 1)] if not isinstance(run_table.get("seed", 1), bool) else [1])
    seeds = sw.seeds
    if repetitions is not None:
        if repetitions < 1:
            raise ScenarioError("--repetitions", "must be at least 1")
        first = seeds[0]
        seeds = [first + k for k in range(repetitions)]
    catalogue = (catalogue or SIM.algorithms()).with_files(cca_file_paths(base, Path(path).parent if path else None))
    available = set(catalogue.names)
    specs: list[RunSpec] = []
    grid = list(itertools.product(*[range(len(a)) for a in sw.axes]))
    for point, steps in enumerate(grid):
        overrides: dict[str, Any] = {}
        params: dict[str, Any] = {}
        for a, k in zip(sw.axes, steps):
            params[a.name] = a.labels[k]
            for f, v in zip(a.fields, a.values[k]):
                overrides[f] = v
                if a.zipped and f != a.name:
                    params[f] = v
        try:
            point_doc = apply_overrides(base, overrides)
        except ScenarioError as e:
            axis = next((a.name for a in sw.axes if e.field in a.fields), None)
            raise ScenarioError(f"sweep.{axis}" if axis else "sweep", e.message) from None
        missing = _missing_ccas(point_doc, available)
        for name in missing:
            if name not in PLANNED_CCAS:
                where = next((f"sweep.{a.name}[{k}]" for a, k in zip(sw.axes, steps)
                              if any(f.endswith(CCA_FIELD_SUFFIX) and v == name for f, v in zip(a.fields, a.values[k]))), None)
                if where is None:
                    where = next(f"flows[{i}].cca" for i, f in enumerate(point_doc["flows"]) if f.get("cca") == name)
                planned = sorted(PLANNED_CCAS - available)
                note = f" (planned, skipped until they land: {', '.join(planned)})" if planned else ""
                raise ScenarioError(where, f"unknown congestion control {name!r}; allowed: {', '.join(sorted(available))}{note}")
        for rep, seed in enumerate(seeds):
            d = apply_overrides(point_doc, {"run.seed": seed})
            spec = RunSpec(point=point, repetition=rep, seed=seed, params=dict(params), doc=d)
            if missing:
                spec.skip_reason = f"{', '.join(missing)} not in this engine yet"
                h = hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]
                spec.run_id, spec.scenario_hash = f"skip-{h}", ""
            else:
                try:
                    sc = Scenario.from_dict(d, path, catalogue)
                except ScenarioError as e:
                    for a, k in zip(sw.axes, steps):
                        if any(e.field == f or e.field.startswith(f + ".") or e.field.startswith(f + "[") for f in a.fields):
                            raise ScenarioError(f"sweep.{a.name}[{k}]", f"{e.field}: {e.message}" if e.field not in a.fields else e.message) from None
                    raise
                spec.engine, spec.meta = sc.engine, sc.meta
                spec.run_id, spec.scenario_hash = run_id_for(sc.engine, meta=sc.meta)
            specs.append(spec)
    return specs


def repetitions_identical(specs: list[RunSpec]) -> bool:
    """True when the repetitions of a sweep will be identical runs: the engine
    is deterministic and its seed only drives its random streams (random loss,
    start jitter), so without them every seed gives the same result."""
    first = [s for s in specs if s.point == 0 and s.engine is not None]
    if len(first) < 2:
        return False
    a, b = copy.deepcopy(first[0].engine), copy.deepcopy(first[1].engine)
    for e in (a, b):
        e["run"]["seed"] = 0
    if a != b:
        return False  # the configurations themselves differ
    loss = a["network"].get("loss", {})
    random_loss = (loss.get("model") == "bernoulli" and loss.get("p", 0) > 0) or loss.get("model") == "gilbert_elliott"
    return not random_loss and a["run"].get("start_jitter", 0) == 0 and not any(isinstance(f["rtt"], dict) for f in a["flows"])
