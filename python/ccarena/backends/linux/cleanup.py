"""Finding and removing what the linux backend creates.

Everything a run creates is named after the process that owns it: network
namespaces ``ccarena-<pid>-<role>`` (interfaces, qdiscs and iptables rules
live inside them and vanish with them; iperf3 and the delay program run inside
them), and BPF algorithms registered as struct_ops maps named ``ccarena_*``
(shared by concurrent runs). A run removes its own on exit, error or Ctrl-C;
its helper processes die with it even on SIGKILL (PR_SET_PDEATHSIG), and a
watcher process (supervisor.py) removes the rest when the run's process dies.
Should that watcher itself have been killed, what a run left (its namespaces,
its temporary directory ``/tmp/ccarena-linux-<pid>-*``, the BPF algorithms) is
removed by the next run before it sets up, or by ``ccarena cleanup``: any
``ccarena-*`` namespace whose owner process is gone is deleted after killing
the processes inside it, so is such a temporary directory, and the BPF
algorithms are unregistered once no live run remains.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from .host import BPF_MAP_PREFIX

__all__ = [
    "PREFIX", "our_namespaces", "owner_pid", "owner_alive", "remove_namespace", "registered_bpf", "unregister_bpf", "cleanup",
    "our_workdirs",
]

PREFIX = "ccarena-"
_NS_RE = re.compile(r"^ccarena-(?:probe-)?(\d+)(?:-|$)")
# A run's temporary directory: ccarena-linux-<pid>-<random> (older versions: no pid).
_DIR_RE = re.compile(r"^ccarena-linux-(?:(\d+)-)?")


def our_workdirs() -> dict[Path, int | None]:
    """The runs' temporary directories and their owners' pids (None: unknown)."""
    out: dict[Path, int | None] = {}
    try:
        entries = list(Path(tempfile.gettempdir()).iterdir())
    except OSError:
        return out
    for d in entries:
        m = _DIR_RE.match(d.name)
        if m and d.is_dir() and not d.is_symlink():
            out[d] = int(m.group(1)) if m.group(1) else None
    return out


def our_namespaces() -> list[str]:
    p = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    names = [line.split()[0] for line in p.stdout.splitlines() if line.strip()]
    return [n for n in names if n.startswith(PREFIX)]


def owner_pid(ns: str) -> int | None:
    m = _NS_RE.match(ns)
    return int(m.group(1)) if m else None


def owner_alive(pid: int | None) -> bool:
    """Whether the process a namespace is named after still exists (any
    process: the backend may run inside a script or a test runner)."""
    if pid is None:
        return False
    return Path(f"/proc/{pid}").exists()


def _pids_in(ns: str) -> list[int]:
    p = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
    return [int(x) for x in p.stdout.split() if x.isdigit()]


def remove_namespace(ns: str) -> list[int]:
    """Kills every process inside `ns`, aborts its TCP sockets, then deletes it.
    Returns the pids killed.

    Aborting the sockets (`ss -K`) matters: a sender killed with data unsent
    leaves an orphan socket that would keep retransmitting into the deleted
    namespace for minutes, holding the namespace and the congestion-control
    module (a BPF algorithm stays "to be freed") until it gives up."""
    killed = []
    for _ in range(20):
        pids = _pids_in(ns)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    subprocess.run(["ss", "-N", ns, "-t", "-a", "-K"], capture_output=True)
    # A namespace whose default algorithm is a BPF one (a DCTCP receiver)
    # holds it until the namespace is freed, which the kernel may defer: hand
    # the reference back now.
    subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.tcp_congestion_control=reno"], capture_output=True)
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    return sorted(set(killed))


def registered_bpf() -> list[str]:
    """Ids ("id NAME") of our struct_ops maps that are still registered. Maps
    already unregistered but still referenced by a socket or a namespace's
    default (state TOBEFREE) are left out: there is nothing left to undo, and
    the kernel frees them when the last reference goes."""
    try:
        p = subprocess.run(["bpftool", "struct_ops", "show"], capture_output=True, text=True)
    except FileNotFoundError:
        return []
    found = []
    for line in p.stdout.splitlines():
        m = re.match(r"\s*(\d+):\s+(\S+)\s+tcp_congestion_ops", line)
        if m and m.group(2).startswith(BPF_MAP_PREFIX) and not _to_be_freed(m.group(1)):
            found.append(f"{m.group(1)} {m.group(2)}")
    return found


def _to_be_freed(map_id: str) -> bool:
    """Whether struct_ops map `map_id` is unregistered and waiting for its
    last reference (bpftool shows its state as BPF_STRUCT_OPS_STATE_TOBEFREE)."""
    p = subprocess.run(["bpftool", "struct_ops", "dump", "id", map_id], capture_output=True, text=True)
    return "STATE_TOBEFREE" in p.stdout


def unregister_bpf(entry: str) -> None:
    subprocess.run(["bpftool", "struct_ops", "unregister", "id", entry.split()[0]], capture_output=True)


def live_runs(exclude: int | None = None) -> set[int]:
    """Pids of other live processes that own ccarena namespaces."""
    pids = {owner_pid(ns) for ns in our_namespaces()} | set(our_workdirs().values())
    return {p for p in pids if p is not None and p != exclude and owner_alive(p)}


def cleanup(everything: bool = False, exclude: int | None = None) -> dict:
    """Removes leftovers of runs whose process is gone (all of ours with
    `everything`). Returns what was removed."""
    removed, killed = [], []
    for ns in our_namespaces():
        pid = owner_pid(ns)
        if pid == exclude and not everything:
            continue
        if everything or not owner_alive(pid):
            killed += remove_namespace(ns)
            removed.append(ns)
    dirs = []
    for d, pid in our_workdirs().items():
        if pid == exclude and not everything:
            continue
        # A directory without an owner's pid (older versions) goes once no run is live.
        if everything or (pid is not None and not owner_alive(pid)) or (pid is None and not live_runs(exclude)):
            shutil.rmtree(d, ignore_errors=True)
            dirs.append(str(d))
    bpf = []
    if everything or not live_runs(exclude):
        for name in registered_bpf():
            unregister_bpf(name)
            bpf.append(name)
    return {"namespaces": removed, "processes_killed": killed, "bpf_unregistered": bpf, "directories": dirs}
