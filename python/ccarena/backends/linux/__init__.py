"""The linux backend: the same scenario on this machine's kernel TCP, in
network namespaces (docs/linux-backend.md). ``LINUX`` is the backend
(``Backend`` protocol); `run_linux(scenario)` returns a `RunResult` like
`ccarena.run`; `cleanup()` removes leftovers of killed runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...scenario.catalogue import Catalogue
from ...scenario.model import Scenario
from ..base import ProgressCallback
from .cleanup import cleanup
from .host import LinuxBackendUnavailable, check_host, linux_catalogue, linux_cca_names

if TYPE_CHECKING:  # pragma: no cover - RunResult pulls in pandas
    from ...results.result import RunResult

__all__ = ["LinuxBackend", "LINUX", "run_linux", "cleanup", "LinuxBackendUnavailable", "check_host", "linux_cca_names"]


class LinuxBackend:
    """This machine's kernel TCP (needs root, network namespaces, iperf3, tc)."""

    name = "linux"
    progress_unit = "s run"

    def algorithms(self) -> Catalogue:
        return linux_catalogue()

    def load(self, source: str | Path | dict | Scenario, overrides: dict[str, Any] | None = None) -> Scenario:
        # The engine never sees this scenario: it checks it now.
        return Scenario.load(source, self.algorithms(), overrides)

    def run(self, scenario: Scenario, progress: ProgressCallback | None = None) -> "RunResult":
        return run_linux(scenario, progress=progress)


LINUX = LinuxBackend()


def run_linux(*args, **kwargs) -> "RunResult":
    """``backend.run_linux``."""
    from .backend import run_linux as _run  # on first use: it needs pandas (RunResult)

    return _run(*args, **kwargs)
