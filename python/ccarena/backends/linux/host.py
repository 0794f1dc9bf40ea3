"""What the linux backend needs from this machine, and small helpers to run
commands. `check_host()` raises `LinuxBackendUnavailable` with one line saying
what is missing (the CLI prints it and exits with status 2).

Algorithms on the linux backend: the kernel's own
(/proc/sys/net/ipv4/tcp_available_congestion_control), the project's BPF
programs in ``linux/bin/*.bpf.o`` (registered for a run when the kernel lacks
the name), and ``newreno`` (the kernel's reno with SACK off, as in the simulator).
`linux_availability()` says for each name how (or whether) this machine runs
it, for `ccarena list ccas`; it probes the running kernel, never assumes.
"""

from __future__ import annotations

import ctypes
import gzip
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

from ...errors import BackendUnavailable, CcarenaError
from ...scenario.catalogue import Catalogue

__all__ = [
    "LinuxBackendUnavailable",
    "LinuxSetupError",
    "check_host",
    "linux_cca_names",
    "linux_catalogue",
    "linux_availability",
    "kernel_modules",
    "kernel_ccas",
    "bpf_ccas",
    "BIN_DIR",
    "sh",
    "popen",
    "kernel_hz",
    "check_root",
]

BIN_DIR = Path(__file__).parent / "bin"
DELAY_BIN = BIN_DIR / "ccarena-delay"
_AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
# Map name -> tcp_congestion_ops name of the BPF programs we build (bpf/NAME.bpf.c).
BPF_MAP_PREFIX = "ccarena_"


class LinuxBackendUnavailable(BackendUnavailable):
    """The linux backend cannot run here (no root, no namespaces, missing tools)."""


class LinuxSetupError(CcarenaError, RuntimeError):
    """A command of the set-up failed; the message names the command and its error (one line)."""


def one_line(text: str, limit: int = 300) -> str:
    """The last non-empty line of a command's output, shortened: what failed, not the whole script."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    line = lines[-1] if lines else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def kernel_ccas() -> list[str]:
    try:
        return _AVAILABLE.read_text().split()
    except OSError:
        return []


def kernel_modules(release: str | None = None, root: Path = Path("/lib/modules")) -> set[str]:
    """Algorithms this kernel ships as modules that are not necessarily loaded
    (``tcp_NAME.ko`` under net/ipv4 of the running release, compressed or not)."""
    if release is None:
        release = os.uname().release if hasattr(os, "uname") else ""
    found = set()
    try:
        for p in (root / release / "kernel" / "net" / "ipv4").glob("tcp_*.ko*"):
            found.add(p.name[len("tcp_"):].split(".ko", 1)[0])
    except OSError:
        return set()
    return found


def linux_availability(names, available: list[str] | None = None, bpf: dict[str, Path] | None = None,
                       modules: set[str] | None = None) -> dict[str, str]:
    """How the linux backend would run each of `names` on this machine, probed
    from the running kernel (its registered algorithms and its module
    directory) and the project's BPF objects: ``kernel`` (registered: built in
    or loaded), ``BPF struct_ops (project)``, ``kernel module tcp_NAME, not
    loaded (modprobe it)`` or ``not available``. The keyword arguments replace
    the probes (tests)."""
    kernel = set(kernel_ccas() if available is None else available)
    objs = bpf_ccas() if bpf is None else bpf
    mods = kernel_modules() if modules is None else modules
    out = {}
    for name in names:
        alias = "reno" if name == "newreno" else name
        if alias in kernel:
            out[name] = "kernel (reno, SACK off)" if name == "newreno" else "kernel"
        elif name in objs:
            out[name] = "BPF struct_ops (project)" if shutil.which("bpftool") else "BPF struct_ops (project), needs bpftool"
        elif alias in mods:
            out[name] = f"kernel module tcp_{alias}, not loaded (modprobe it)"
        else:
            out[name] = "not available"
    return out


def bpf_ccas() -> dict[str, Path]:
    """Algorithms the project provides as BPF programs (name -> object file)."""
    return {p.name[: -len(".bpf.o")]: p for p in sorted(BIN_DIR.glob("*.bpf.o"))}


def bpf_globals_maps() -> set[int]:
    """Ids of the kernel's BPF maps that hold a program object's zero-initialised
    globals (libbpf names them "OBJECT.bss"), where the project's BPF algorithms
    count their repairs (bpf/ccarena_ca.h, REPAIR_SKIPPED_HOOKS)."""
    try:
        p = subprocess.run(["bpftool", "map", "show", "-j"], capture_output=True, text=True)
        maps = json.loads(p.stdout or "[]")
    except (FileNotFoundError, json.JSONDecodeError):
        return set()
    return {int(m["id"]) for m in maps if str(m.get("name", "")).endswith(".bss")}


def bpf_hook_repairs(map_id: int) -> int:
    """The `hook_repairs` count in globals map `map_id` (0 if unreadable)."""
    try:
        p = subprocess.run(["bpftool", "map", "dump", "id", str(map_id), "-j"], capture_output=True, text=True)
        entries = json.loads(p.stdout or "[]")
        sections = entries[0]["formatted"]["value"][".bss"]
    except (FileNotFoundError, json.JSONDecodeError, LookupError, TypeError):
        return 0
    return sum(int(section.get("hook_repairs", 0)) for section in sections)


def linux_cca_names() -> list[str]:
    names = set(kernel_ccas()) | set(bpf_ccas())
    if "reno" in names:
        names.add("newreno")
    return sorted(names)


def linux_catalogue() -> Catalogue:
    """What scenarios on the linux backend may use: the kernel's algorithms
    (and the project's BPF ones) with their defaults, forward TCP flows over
    a fixed path, whose data leg may carry an extra delay and jitter (netem's,
    or the delay program's). Python algorithms do not run here (their files
    are not loaded)."""

    def ignore_files(files) -> Catalogue:
        return catalogue

    catalogue = Catalogue(
        backend="linux",
        names=frozenset(linux_cca_names()),
        scope=" on the linux backend (this kernel's and the project's BPF algorithms)",
        no_params="the linux backend runs the kernel's algorithms with their defaults; allowed: {} (none)",
        features=frozenset({"flows[].jitter", "flows[].data_delay"}),
        refusal="the linux backend runs forward TCP flows over a fixed path (with flows[].data_delay and flows[].jitter); "
        "{features} need the simulator (--backend sim)",
        load_files=ignore_files,
    )
    return catalogue


def kernel_hz() -> int | None:
    """CONFIG_HZ of the running kernel, if /proc/config.gz tells it."""
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            for line in f:
                if line.startswith("CONFIG_HZ="):
                    return int(line.split("=", 1)[1])
    except (OSError, ValueError):
        return None
    return None


#: /proc/stat's kinds of CPU time, in its order (proc(5)).
CPU_TIME_KINDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_times(stat: str | None = None) -> dict[str, float]:
    """The machine's CPU time so far by kind, summed over its CPUs, in
    seconds (/proc/stat's first line). "steal" is the time a virtual
    machine's CPUs were runnable but the hypervisor ran something else:
    what makes a shared machine's routers, hosts and delay emulator all late
    at once."""
    line = (stat if stat is not None else Path("/proc/stat").read_text()).split("\n", 1)[0].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return {kind: int(v) / ticks for kind, v in zip(CPU_TIME_KINDS, line[1:])}


def sh(*args: str, check: bool = True, input: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    """Runs a command; on failure raises RuntimeError with its stderr."""
    # Dies with ccarena too: a set-up command must not outlive a killed run.
    p = subprocess.run(list(args), capture_output=True, text=True, input=input, timeout=timeout, preexec_fn=_die_with_parent)
    if check and p.returncode != 0:
        cmd = one_line(" ".join(args), 120)
        raise LinuxSetupError(f"`{cmd}` failed ({p.returncode}): {one_line(p.stderr or p.stdout)}")
    return p


_libc = None


def _die_with_parent() -> None:
    """In the child before exec: die when the parent (the ccarena process) dies,
    even by SIGKILL, so no iperf3 or delay program outlives it."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def popen(args: list[str], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL) -> subprocess.Popen:
    """Starts a helper process in its own session (Ctrl-C reaches only ccarena,
    which then tears down in order) that dies with the ccarena process."""
    return subprocess.Popen(args, stdout=stdout, stderr=stderr, stdin=stdin, start_new_session=True, preexec_fn=_die_with_parent)


def check_root() -> None:
    if os.name != "posix" or not Path("/proc/sys/net").exists():
        raise LinuxBackendUnavailable("the linux backend needs Linux")
    if os.geteuid() != 0:
        raise LinuxBackendUnavailable("the linux backend needs root (network namespaces, tc, iptables); run as root or use --backend sim")


def check_host(need_delay: bool = True, need_bpf: bool = False) -> None:
    """Raises LinuxBackendUnavailable naming what is missing."""
    check_root()
    missing = [t for t in ("ip", "tc", "ss", "iperf3", "iptables-legacy") if shutil.which(t) is None]
    if need_bpf and shutil.which("bpftool") is None:
        missing.append("bpftool")
    if missing:
        raise LinuxBackendUnavailable(
            f"the linux backend needs {', '.join(missing)}; install them (Debian: apt-get install iperf3 iproute2 iptables bpftool)"
        )
    if need_delay and not DELAY_BIN.exists():
        # `pip install .` builds the engine only; the helpers are built by make,
        # into this installation's directory when it is given.
        raise LinuxBackendUnavailable(
            f"the delay program is not built ({DELAY_BIN.name}); with gcc and libnetfilter-queue-dev installed, run "
            f"`make linux-tools LINUX_BIN={BIN_DIR}` in the source tree (`make setup` does it for the tree's .venv)"
        )
    probe = f"ccarena-probe-{os.getpid()}"
    p = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if p.returncode != 0:
        raise LinuxBackendUnavailable(f"cannot create a network namespace here: {p.stderr.strip()}")
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)


def _has_qdisc(*args: str) -> bool:
    """Whether ``tc qdisc add dev lo root ARGS`` works (in a scratch namespace)."""
    probe = f"ccarena-probe-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode != 0:
        return False
    try:
        p = subprocess.run(["tc", "-n", probe, "qdisc", "add", "dev", "lo", "root", *args], capture_output=True)
        return p.returncode == 0
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)


def has_netem() -> bool:
    """Whether the kernel has the netem qdisc (probed in a scratch namespace)."""
    return _has_qdisc("netem", "delay", "1ms")


def has_red() -> bool:
    """Whether the kernel has the red qdisc (sch_red), which the step queue maps onto."""
    return _has_qdisc("red", "limit", "100000", "min", "15140", "max", "15141", "avpkt", "1514", "burst", "10",
                      "probability", "1.0", "ecn")
