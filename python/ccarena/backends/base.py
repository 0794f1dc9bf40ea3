"""The protocol every backend implements. A backend has a name, says what
it can run (``algorithms()``: the ``Catalogue`` that scenario validation
receives) and runs a validated scenario into a ``RunResult`` whose record has
the shape ``results.record`` describes, whichever backend made it.

    class Backend(Protocol):
        name: str
        progress_unit: str
        def algorithms(self) -> Catalogue
        def load(self, source, overrides=None) -> Scenario
        def run(self, scenario: Scenario, progress: ProgressCallback | None = None) -> RunResult

``registry`` holds the backends by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from ..scenario.catalogue import Catalogue
from ..scenario.model import Scenario

if TYPE_CHECKING:  # pragma: no cover - RunResult pulls in pandas
    from ..results.result import RunResult

__all__ = ["Backend", "ProgressCallback"]

#: Called with (seconds of the run done, total seconds) as a run advances.
ProgressCallback = Callable[[float, float], None]


class Backend(Protocol):
    """What runs scenarios: the simulator (``sim``) or this machine's kernel (``linux``)."""

    name: str
    #: What its progress counts ("s simulated", "s run").
    progress_unit: str

    def algorithms(self) -> Catalogue:
        """The algorithms (and scenario features) this backend runs, as scenario validation needs them."""
        ...

    def load(self, source: "str | Path | dict | Scenario", overrides: dict[str, Any] | None = None) -> Scenario:
        """A scenario (file, preset, TOML text, dict or Scenario) with `overrides`
        applied, validated for this backend to run at once: resolved once, and
        checked by the engine once."""
        ...

    def run(self, scenario: Scenario, progress: ProgressCallback | None = None) -> "RunResult":
        """Runs a scenario validated with this backend's catalogue."""
        ...
