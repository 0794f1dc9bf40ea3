"""The backends by name (``--backend sim|linux|testbed``), and ``load_scenario``: a
scenario validated for the backend that will run it.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ScenarioError
from ..scenario.model import Scenario
from .base import Backend
from .linux import LINUX
from .sim import SIM
from .testbed import TESTBED

__all__ = ["BACKENDS", "get_backend", "load_scenario"]

#: ``testbed`` needs its inventory: ``BACKENDS["testbed"].configure(inventory)``.
BACKENDS: dict[str, Backend] = {"sim": SIM, "linux": LINUX, "testbed": TESTBED}


def get_backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise ScenarioError("backend", f"unknown backend {name!r}; allowed: {', '.join(BACKENDS)}")
    return BACKENDS[name]


def load_scenario(source: str | Path | dict | Scenario, backend: str = "sim") -> Scenario:
    """A scenario from a file path, a preset name, TOML text, a dict, or a Scenario,
    validated for `backend` ("sim", "linux" or "testbed")."""
    return Scenario.load(source, get_backend(backend).algorithms())
