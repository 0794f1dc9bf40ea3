"""A watcher that outlives the ccarena process and tears its run down if it dies.

A SIGKILLed process runs no code, so a run cannot clean up after itself. Its
helpers (iperf3, the delay program) die with it (PR_SET_PDEATHSIG), but its
namespaces, BPF registrations and temporary directory are not tied to any
process. Before it creates anything, a run therefore starts this watcher:

* in its own session (no Ctrl-C, SIGHUP or process-group kill reaches it) and
  without PR_SET_PDEATHSIG, so it survives the run's process;
* with the read end of a pipe as its standard input; the write end is held by
  the run's process alone (not inherited by any other child).

The watcher blocks reading the pipe. A run that ends normally (success, error,
Ctrl-C) tears down by itself, then writes ``done`` and waits for the watcher to
exit. If the pipe closes without ``done`` (the process died: SIGKILL, a crash,
the OOM killer), the kernel closes the write end and the watcher reads end of
file, then removes everything named after the run's tag (``teardown_run``):
the processes in its namespaces, the namespaces, its temporary directory, and
the project's BPF algorithms when no live run remains. The teardown is
idempotent and touches only this run's names, so it is safe while other runs
are in flight; it scans twice so that a command the dying process had just
started (``ip netns add``) cannot slip a namespace past it.

    python -m ccarena.backends.linux.supervisor TAG
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .cleanup import live_runs, our_namespaces, registered_bpf, remove_namespace, unregister_bpf

__all__ = ["Supervisor", "teardown_run", "workdir_prefix"]

DONE = b"done\n"


def workdir_prefix(tag: str) -> str:
    """The prefix of a run's temporary directory (``/tmp/ccarena-linux-TAG-xxxx``)."""
    return os.path.join(tempfile.gettempdir(), f"ccarena-linux-{tag}-")


def teardown_run(tag: str) -> dict:
    """Removes what the run `tag` created. Idempotent."""
    removed: list[str] = []
    prefix = f"ccarena-{tag}-"
    quiet = 0
    deadline = time.monotonic() + 10
    while quiet < 2 and time.monotonic() < deadline:
        found = [ns for ns in our_namespaces() if ns.startswith(prefix)]
        for ns in found:
            remove_namespace(ns)
            removed.append(ns)
        quiet = 0 if found else quiet + 1
        time.sleep(0.1)
    for d in glob.glob(glob.escape(workdir_prefix(tag)) + "*"):
        shutil.rmtree(d, ignore_errors=True)
    bpf = []
    if not live_runs():
        for name in registered_bpf():
            unregister_bpf(name)
            bpf.append(name)
    return {"namespaces": removed, "bpf_unregistered": bpf}


class Supervisor:
    """The run's side of the watcher: `start()` before creating anything,
    `done()` after the run's own teardown."""

    def __init__(self, tag: str):
        self.tag = tag
        self.proc: subprocess.Popen | None = None
        self._w: int | None = None

    def start(self) -> None:
        r, w = os.pipe()  # both non-inheritable: only the watcher gets r (as stdin)
        pkg_root = str(Path(__file__).resolve().parents[3])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [pkg_root, os.environ.get("PYTHONPATH")]))}
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ccarena.backends.linux.supervisor", self.tag],
                stdin=r,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
            )
        finally:
            os.close(r)
        self._w = w

    def done(self) -> None:
        """The run tore down by itself: tell the watcher to leave without doing anything."""
        if self._w is None:
            return
        try:
            os.write(self._w, DONE)
        except OSError:
            pass
        os.close(self._w)
        self._w = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _watch(tag: str) -> None:
    for s in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(s, signal.SIG_IGN)
    data = b""
    while True:
        try:
            chunk = os.read(0, 64)
        except InterruptedError:
            continue
        if not chunk:
            break
        data += chunk
        if DONE in data:
            return
    teardown_run(tag)


if __name__ == "__main__":
    _watch(sys.argv[1])
