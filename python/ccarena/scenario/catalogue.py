"""What a backend can run, in the form scenario validation needs: the
algorithm names flows may use, whether they take parameters, and which parts
of the scenario language the backend models.

A backend builds its ``Catalogue`` (``Backend.algorithms()``) and hands it to
``Scenario.from_dict``; the scenario wing only reads it, so it never asks
which backend it validates for. Without one, a scenario is checked against
the engine's built-in algorithms (``Catalogue()``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Callable, Sequence

from .. import _engine
from ..errors import ScenarioError

__all__ = ["Catalogue", "FEATURES", "cca_catalogue", "engine_cca_names"]


def cca_catalogue() -> list[dict[str, Any]]:
    """Every algorithm the engine implements, with description, source and parameters."""
    return json.loads(_engine.cca_catalogue_json())


@cache
def engine_cca_names() -> frozenset[str]:
    """The names of the engine's built-in algorithms."""
    return frozenset(c["name"] for c in cca_catalogue())


@cache
def _engine_params() -> dict[str, dict[str, dict]]:
    return {c["name"]: {p["name"]: p for p in c["params"]} for c in cca_catalogue()}


def check_param_values(cca: str, params: dict, where: str) -> None:
    """Refuses a `cca_params` value of a type no parameter takes (a string, a
    list, a table), naming the parameter and, for the engine's algorithms,
    what it takes; names and ranges are the engine's (or the Python
    algorithm's) to check."""
    for name, value in params.items():
        if isinstance(value, (bool, int, float)):
            continue
        spec = _engine_params().get(cca, {}).get(name)
        if spec is None:
            wanted = "must be a number or true/false"
        elif isinstance(spec["default"], bool):
            wanted = "must be true or false"
        elif isinstance(spec["default"], int):
            wanted = f"must be an integer in {spec['min']:.0f}..{spec['max']:.0f}"
        else:
            wanted = f"must be a number in [{spec['min']:g}, {spec['max']:g}]"
        text = repr(value).encode("ascii", "backslashreplace").decode("ascii")
        raise ScenarioError(f"{where}.{name}", f"{wanted}, got {text if len(text) <= 40 else text[:37] + '...'}")


#: Parts of the scenario language a backend may lack, by the name errors use.
FEATURES = (
    "udp",
    "web",
    "network.dynamics",
    "network.trace",
    "network.reverse_bottleneck",
    "flows[].jitter",
    "flows[].data_delay",
    "flows[].direction = reverse",
)


@dataclass(frozen=True)
class Catalogue:
    """The algorithms (and scenario features) of one backend."""

    #: The backend's name, kept by the Scenario it validates.
    backend: str = "sim"
    #: Algorithms [[flows]] and [[web]] tables may name.
    names: frozenset[str] = field(default_factory=engine_cca_names)
    #: Of those, the algorithms written in Python (the engine is handed their classes).
    python: frozenset[str] = frozenset()
    #: How errors describe `names` (after "unknown congestion control 'x'").
    scope: str = ""
    #: Why flows may not set cca_params, or None where they may.
    no_params: str | None = None
    #: Checks a Python algorithm's parameters; raises TypeError or ValueError saying what is wrong.
    check_params: Callable[[str, dict], None] | None = field(default=None, compare=False)
    #: The FEATURES this backend models (None: all), and the error for the others,
    #: a format string whose {features} lists what a scenario uses but the backend lacks.
    features: frozenset[str] | None = None
    refusal: str = ""
    #: This catalogue plus the algorithms of a scenario's cca_files (None: the
    #: backend cannot run Python algorithms).
    load_files: Callable[[Sequence[Path]], "Catalogue"] | None = field(default=None, compare=False)

    def with_files(self, files: Sequence[Path]) -> "Catalogue":
        """This catalogue plus the algorithms defined in `files` (a scenario's cca_files)."""
        if not files:
            return self
        if self.load_files is None:
            raise ScenarioError("cca_files", "Python algorithms need the simulator backend's catalogue; "
                                "load the scenario with ccarena.load_scenario or ccarena.run")
        return self.load_files(files)
