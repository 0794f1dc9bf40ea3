"""SSH to the testbed's hosts with asyncssh: one connection per host (through
its jump host where the inventory names one), opened once and reused for
every command of every run of a sweep; commands to several hosts run in
parallel. asyncssh runs on a private event loop in a background thread, so
the run's own code stays plain blocking Python (and Ctrl-C reaches it).

Every command is a shell script fed to ``sh -s`` (under ``sudo -n`` where the
inventory says so), traced with ``-x`` so that a failure names the line that
failed.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Iterable

from ...errors import BackendUnavailable, CcarenaError
from ..linux.host import one_line
from .inventory import Host, Inventory

__all__ = ["Hosts", "Result", "TestbedUnavailable", "TestbedCommandError"]


class TestbedUnavailable(BackendUnavailable):
    """A host cannot be used: unreachable, an interface or a tool missing. The message names the host."""


class TestbedCommandError(CcarenaError, RuntimeError):
    """A command failed on a host; the message names the host, the line and its error."""


@dataclass
class Result:
    host: str
    status: int
    stdout: str
    stderr: str

    def failed_line(self) -> str:
        traced = [line[2:] for line in self.stderr.splitlines() if line.startswith("+ ")]
        return one_line(traced[-1], 160) if traced else "the script"

    def error(self) -> str:
        errors = [line for line in self.stderr.splitlines() if line.strip() and not line.startswith("+ ")]
        return one_line("\n".join(errors)) or f"status {self.status}"


class Hosts:
    """Connections to an inventory's hosts, made on first use and kept."""

    def __init__(self, inventory: Inventory):
        self.inventory = inventory
        self._conns: dict[str, Any] = {}
        self._jumps: dict[tuple, Any] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # ---- the event loop ----
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            t = threading.Thread(target=loop.run_forever, name="ccarena-testbed-ssh", daemon=True)
            t.start()
            self._loop, self._thread = loop, t
        return self._loop

    def call(self, coro: Awaitable, timeout: float | None = None) -> Any:
        """Runs a coroutine on the SSH loop and waits for its result."""
        fut = asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())
        try:
            return fut.result(timeout)
        except BaseException:
            if not fut.done():
                fut.cancel()
            raise

    # ---- connections ----
    async def _connect(self, h: Host):
        import asyncssh  # the SSH library: only when a testbed is used

        opts: dict[str, Any] = {"username": h.user, "port": h.port, "connect_timeout": h.connect_timeout_s, "keepalive_interval": 15}
        if h.key:
            opts["client_keys"] = [h.key]
        if h.known_hosts is not None:
            opts["known_hosts"] = h.known_hosts or None
        if h.jump:
            jkey = (h.jump, h.key, h.known_hosts)
            if jkey not in self._jumps:
                user, _, rest = h.jump.rpartition("@")
                host, port = rest, 22
                if rest.count(":") == 1:
                    host, p = rest.split(":")
                    port = int(p)
                jopts = {k: v for k, v in opts.items() if k not in ("username", "port")}
                self._jumps[jkey] = await asyncssh.connect(host.strip("[]"), port=port, username=user or h.user, **jopts)
            opts["tunnel"] = self._jumps[jkey]
        return await asyncssh.connect(h.host, **opts)

    async def _connection(self, name: str):
        conn = self._conns.get(name)
        if conn is None:
            h = self.inventory.host(name)
            try:
                conn = await asyncio.wait_for(self._connect(h), timeout=h.connect_timeout_s + 5)
            except (OSError, asyncio.TimeoutError, Exception) as e:  # noqa: BLE001 - asyncssh's errors, DNS, refused, timeouts
                why = str(e) or type(e).__name__
                raise TestbedUnavailable(f"host {h.where} is unreachable over SSH: {one_line(why)}") from None
            self._conns[name] = conn
        return conn

    def connect(self, names: Iterable[str]) -> None:
        """Connects to the hosts in parallel; raises TestbedUnavailable naming every host that cannot be reached."""
        names = list(names)

        async def all_of():
            return await asyncio.gather(*(self._connection(n) for n in names), return_exceptions=True)

        errors = [r for r in self.call(all_of()) if isinstance(r, BaseException)]
        if errors:
            unreachable = [e for e in errors if isinstance(e, TestbedUnavailable)]
            if not unreachable:
                raise errors[0]
            raise TestbedUnavailable("; ".join(str(e) for e in unreachable))

    # ---- commands ----
    async def _sh(self, name: str, script: str, timeout: float) -> Result:
        h = self.inventory.host(name)
        conn = await self._connection(name)
        cmd = "sh -exs" if not h.sudo else "sudo -n sh -exs"
        p = await asyncio.wait_for(conn.run(cmd, input=script, check=False), timeout=timeout)
        status = p.exit_status if p.exit_status is not None else 255
        log = os.environ.get("CCARENA_TESTBED_LOG")
        if log:  # every script and what it printed, for finding out what a host did
            with open(log, "a") as f:
                f.write(f"==== {name} ({cmd}) status {status}\n{script}\n---- stdout\n{p.stdout}\n---- stderr\n{p.stderr}\n")
        return Result(name, status, p.stdout or "", p.stderr or "")

    def sh(self, name: str, script: str, timeout: float = 120, check: bool = True) -> Result:
        return self.sh_many({name: script}, timeout, check)[name]

    def sh_many(self, scripts: dict[str, str], timeout: float = 120, check: bool = True) -> dict[str, Result]:
        """Runs a script on each host, in parallel. With `check`, a script that
        fails raises TestbedCommandError naming the host and the line."""

        async def all_of():
            return await asyncio.gather(*(self._sh(n, s, timeout) for n, s in scripts.items()), return_exceptions=True)

        out: dict[str, Result] = {}
        problems: list[BaseException] = []
        for name, r in zip(scripts, self.call(all_of())):
            if isinstance(r, BaseException):
                if isinstance(r, asyncio.TimeoutError):
                    r = TestbedCommandError(f"{self.inventory.host(name).where}: no answer within {timeout:g} s")
                problems.append(r)
                continue
            out[name] = r
            if check and r.status != 0:
                problems.append(TestbedCommandError(f"{self.inventory.host(name).where}: `{r.failed_line()}` failed: {r.error()}"))
        if problems:
            raise problems[0]
        return out

    def clock_offsets(self, names: Iterable[str], samples: int = 5) -> dict[str, tuple[int, int]]:
        """(offset, round trip) in ns of each host's clock against this one's:
        the host's `date` minus the midpoint of the exchange, from the exchange
        with the shortest round trip."""

        async def one(name: str):
            conn = await self._connection(name)
            best = None
            for _ in range(samples):
                a = time.time_ns()
                p = await conn.run("date +%s%N", check=False)
                b = time.time_ns()
                try:
                    remote = int((p.stdout or "").strip())
                except ValueError:
                    raise TestbedUnavailable(f"host {self.inventory.host(name).where}: `date +%s%N` printed {one_line(p.stdout or p.stderr or '')!r} (GNU date needed)") from None
                if best is None or b - a < best[1]:
                    best = (remote - (a + b) // 2, b - a)
            return name, best

        async def all_of():
            return await asyncio.gather(*(one(n) for n in names))

        return dict(self.call(all_of()))

    def close(self) -> None:
        if self._loop is None:
            return

        async def close_all():
            for c in list(self._conns.values()) + list(self._jumps.values()):
                c.close()
            for c in list(self._conns.values()) + list(self._jumps.values()):
                try:
                    await asyncio.wait_for(c.wait_closed(), 5)
                except Exception:  # noqa: BLE001 - closing anyway
                    pass

        try:
            self.call(close_all(), timeout=10)
        finally:
            self._conns.clear()
            self._jumps.clear()
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=5)
            self._loop.close()
            self._loop = None
            self._thread = None

    def __enter__(self) -> "Hosts":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

