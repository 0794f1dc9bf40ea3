"""The testbed backend: the same scenario on remote Linux hosts over SSH
(docs/testbed-backend.md). An inventory (``inventory.py``) names the hosts
and their roles; ``plan.py`` maps a scenario onto them as shell commands per
host (what ``--dry-run`` prints); ``run.py`` runs them over asyncssh
(``remote.py``) and builds the record the linux backend builds.

    >>> from ccarena.backends.testbed import TestbedBackend
    >>> tb = TestbedBackend("examples/testbed/geni-fig8.toml")
    >>> print(tb.dry_run("cubic-fig8-intra-fairness"))   # connects nowhere
    >>> r = tb.run(tb.load("my.toml"))                    # a RunResult, like ccarena.run
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import UsageError
from ...scenario.catalogue import Catalogue
from ...scenario.model import Scenario
from ..base import ProgressCallback
from .inventory import Inventory, InventoryError, load_inventory
from .plan import MODULES, Plan, make_plan
from .remote import TestbedCommandError, TestbedUnavailable

if TYPE_CHECKING:  # pragma: no cover - RunResult pulls in pandas
    from ...results.result import RunResult

__all__ = ["TestbedBackend", "TESTBED", "Inventory", "InventoryError", "load_inventory", "TestbedUnavailable", "TestbedCommandError",
           "KERNEL_CCAS"]

#: Algorithms a Linux host can run (built in, or as modules loaded with modprobe);
#: each sender host's own list is checked when the run starts.
KERNEL_CCAS = frozenset({"reno", "newreno", *MODULES})


class TestbedBackend:
    """Remote Linux hosts named by an inventory (root or sudo, iperf3, iproute2)."""

    name = "testbed"
    progress_unit = "s run"
    __test__ = False  # not a test class, whatever its name says

    def __init__(self, inventory: str | Path | dict | Inventory | None = None):
        self.inventory = load_inventory(inventory) if inventory is not None else None
        self._hosts = None
        self._tags = 0
        self._lock = threading.Lock()

    def configure(self, inventory: str | Path | dict | Inventory) -> "TestbedBackend":
        """This backend on the hosts of `inventory`."""
        return TestbedBackend(inventory)

    def algorithms(self) -> Catalogue:
        def ignore_files(files) -> Catalogue:
            return catalogue

        catalogue = Catalogue(
            backend="testbed",
            names=KERNEL_CCAS,
            scope=" on the testbed backend (the Linux kernel's algorithms; each sender host's list is checked when the run starts)",
            no_params="the testbed backend runs the kernel's algorithms with their defaults; allowed: {} (none)",
            features=frozenset(),
            refusal="the testbed backend runs forward TCP flows over a fixed path; {features} need the simulator (--backend sim)",
            load_files=ignore_files,
        )
        return catalogue

    def load(self, source: str | Path | dict | Scenario, overrides: dict[str, Any] | None = None) -> Scenario:
        return Scenario.load(source, self.algorithms(), overrides)

    def _need_inventory(self) -> Inventory:
        if self.inventory is None:
            raise UsageError("--inventory: the testbed backend needs an inventory file naming the hosts (see docs/testbed-backend.md)")
        return self.inventory

    def plan(self, scenario: str | Path | dict | Scenario, tag: str = "TAG") -> Plan:
        """The commands per host of one run, without connecting anywhere."""
        from ..linux.backend import check_scenario  # pandas (RunResult): only when a plan is made

        sc = scenario if isinstance(scenario, Scenario) else self.load(scenario)
        notes = check_scenario(sc, backend="testbed", max_rate_bps=None, hz=None)
        plan = make_plan(sc, self._need_inventory(), tag)
        plan.notes += notes
        plan.notes.append("receivers with delay = \"auto\" are shown with netem; a kernel without netem gets the delay program instead")
        return plan

    def dry_run(self, scenario: str | Path | dict | Scenario) -> str:
        return self.plan(scenario).format()

    def hosts(self):
        """The SSH connections (opened on first use, kept for every run until ``close``)."""
        from .remote import Hosts  # asyncssh: only when hosts are contacted

        with self._lock:
            if self._hosts is None:
                self._hosts = Hosts(self._need_inventory())
            return self._hosts

    def preflight(self, scenario: Scenario) -> None:
        """Connects to every host and probes it for `scenario`; raises
        TestbedUnavailable naming the host and what is missing. Nothing is changed."""
        from .run import probe_hosts  # pandas and asyncssh: only when hosts are contacted

        probe_hosts(self.hosts(), scenario)

    def run(self, scenario: Scenario, progress: ProgressCallback | None = None, cancel: threading.Event | None = None) -> "RunResult":
        from .run import run_testbed  # pandas and asyncssh: only when hosts are contacted

        return run_testbed(scenario, self.hosts(), progress=progress, cancel=cancel)

    def close(self) -> None:
        with self._lock:
            if self._hosts is not None:
                self._hosts.close()
                self._hosts = None


TESTBED = TestbedBackend()
