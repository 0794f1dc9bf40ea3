"""The backends by name (``--backend sim|linux|testbed``), and ``load_scenario``: a
scenario validated for the backend that will run it.

Each backend is imported when it is first looked up: a run on the simulator
does not load the linux backend's host probes or the testbed's SSH client.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Iterator

from ..errors import ScenarioError
from ..scenario.model import Scenario
from .base import Backend

__all__ = ["BACKENDS", "get_backend", "load_scenario"]

# Name -> (module, attribute) of each backend, in the order messages list them.
_WHERE = {"sim": (".sim", "SIM"), "linux": (".linux", "LINUX"), "testbed": (".testbed", "TESTBED")}


class _Backends(Mapping):
    """The backends by name; each module is imported on first lookup."""

    def __getitem__(self, name: str) -> Backend:
        module, attr = _WHERE[name]
        return getattr(importlib.import_module(module, __package__), attr)

    def __iter__(self) -> Iterator[str]:
        return iter(_WHERE)

    def __len__(self) -> int:
        return len(_WHERE)

    def __contains__(self, name: object) -> bool:
        return name in _WHERE

    def __repr__(self) -> str:
        return f"BACKENDS({', '.join(_WHERE)})"


#: ``testbed`` needs its inventory: ``BACKENDS["testbed"].configure(inventory)``.
BACKENDS: Mapping[str, Backend] = _Backends()


def get_backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise ScenarioError("backend", f"unknown backend {name!r}; allowed: {', '.join(BACKENDS)}")
    return BACKENDS[name]


def load_scenario(source: str | Path | dict | Scenario, backend: str = "sim") -> Scenario:
    """A scenario from a file path, a preset name, TOML text, a dict, or a Scenario,
    validated for `backend` ("sim", "linux" or "testbed")."""
    return Scenario.load(source, get_backend(backend).algorithms())
