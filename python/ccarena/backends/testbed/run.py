"""One run on the testbed: probe the hosts (refusing, before anything is
changed, a host that lacks an interface, a tool or an algorithm), set every
host up in parallel, start the servers, delays and samplers, launch each
iperf3 client at its flow's start, then stop, collect, restore and build the
record with the linux backend's ``build_record``. The teardown (stop every
process started, run each host's restore script, remove its scratch
directory) runs on success, error and Ctrl-C; should this process vanish
instead, each host's watchdog runs it by itself.

Timing: samples are taken on the hosts by their own clocks and time-stamped
there; each host's clock offset against this machine is measured before the
run (the shortest of five `date` round trips), and every time stamp is moved
onto this machine's clock with it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

from ...results.result import RunResult
from ...scenario.model import Scenario
from ..linux.backend import build_record, check_scenario
from ..linux.mapping import EMPTY_TBF, parse_netstat, parse_tbf
from ..linux.sampling import busiest_by_port
from .inventory import Host, Inventory
from .plan import MODULES, Plan, make_plan
from .remote import Hosts, TestbedUnavailable

__all__ = ["run_testbed", "probe_hosts", "Probe", "Cancelled"]

ProgressCallback = Callable[[float, float], None]


class Cancelled(KeyboardInterrupt):
    """The run was stopped (Ctrl-C, SIGTERM, or its sweep was interrupted); it tore down first."""


def _raise_cancelled(signum, frame):
    raise Cancelled()


@dataclass
class Probe:
    """What a host has, read without changing anything."""

    kernel: str = ""
    root: bool = False
    interfaces: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    qdisc: str = ""
    netem: bool = False
    ccas: list[str] = field(default_factory=list)
    modprobe_ok: dict[str, bool] = field(default_factory=dict)
    leftovers: list[tuple[str, bool]] = field(default_factory=list)  # (directory, its watchdog alive)
    gnu_date: bool = True
    hz: int | None = None


def _tools(h: Host, roles: set[str], delay: str) -> list[str]:
    tools = ["sh", "ip", "tc", "sysctl", "ethtool", "setsid", "tac", "awk", "date"]
    if "sender" in roles:
        tools += ["iperf3", "ss"]
    if "receiver" in roles:
        tools += ["iperf3", "ss"]
        if delay == "program":
            tools += ["gcc", "pkg-config"]
    if "bottleneck" in roles or (delay == "program" and "receiver" in roles):
        tools += ["iptables"]
    return list(dict.fromkeys(tools))


def _probe_script(h: Host, ccas: list[str]) -> str:
    lines = [
        "echo \"kernel $(uname -r)\"",
        "echo \"uid $(id -u)\"",
        "echo \"ifaces $(ls /sys/class/net | tr '\\n' ' ')\"",
        "for t in sh ip tc sysctl ethtool setsid tac awk date iperf3 ss gcc pkg-config; do command -v $t >/dev/null 2>&1 || echo \"missing $t\"; done",
        "command -v iptables-legacy >/dev/null 2>&1 || command -v iptables >/dev/null 2>&1 || echo 'missing iptables'",
        "pkg-config --exists libnetfilter_queue 2>/dev/null || echo 'missing libnetfilter-queue-dev'",
        f"[ -e /sys/class/net/{h.interface} ] && echo \"qdisc $(tc qdisc show dev {h.interface} root | head -n 1)\"",
        "if unshare -n sh -c 'tc qdisc add dev lo root netem delay 1ms' >/dev/null 2>&1; then echo 'netem yes'; else echo 'netem no'; fi",
        "echo \"ccas $(cat /proc/sys/net/ipv4/tcp_available_congestion_control)\"",
        "[ \"$(date +%N)\" = '%N' ] && echo 'nognudate'",
        "hz=$( (zcat /proc/config.gz 2>/dev/null || cat /boot/config-$(uname -r) 2>/dev/null) | sed -n 's/^CONFIG_HZ=//p'); [ -n \"$hz\" ] && echo \"hz $hz\"",
    ]
    for cca in ccas:
        if cca in MODULES:
            lines.append(f"modprobe -n {MODULES[cca]} >/dev/null 2>&1 && echo 'modprobe {cca} yes' || echo 'modprobe {cca} no'")
    pattern = f"{h.workdir.rstrip('/')}/ccarena-testbed-*-{h.name}"
    lines.append(f"for d in {pattern}; do [ -d \"$d\" ] || continue; "
                 "if [ -e \"$d/watchdog.pid\" ] && kill -0 \"-$(cat \"$d/watchdog.pid\")\" 2>/dev/null; then echo \"leftover $d live\"; "
                 "else echo \"leftover $d dead\"; fi; done")
    lines.append("true")
    return "\n".join(lines) + "\n"


def _parse_probe(text: str) -> Probe:
    p = Probe()
    for line in text.splitlines():
        key, _, rest = line.partition(" ")
        if key == "kernel":
            p.kernel = rest.strip()
        elif key == "uid":
            p.root = rest.strip() == "0"
        elif key == "ifaces":
            p.interfaces = rest.split()
        elif key == "missing":
            p.missing.append(rest.strip())
        elif key == "qdisc":
            p.qdisc = rest.strip()
        elif key == "netem":
            p.netem = rest.strip() == "yes"
        elif key == "ccas":
            p.ccas = rest.split()
        elif key == "modprobe":
            name, _, ok = rest.partition(" ")
            p.modprobe_ok[name] = ok.strip() == "yes"
        elif key == "leftover":
            d, _, state = rest.rpartition(" ")
            p.leftovers.append((d, state == "live"))
        elif key == "nognudate":
            p.gnu_date = False
        elif key == "hz":
            try:
                p.hz = int(rest)
            except ValueError:
                pass
    return p


def _default_qdisc(line: str) -> bool:
    """Whether a root qdisc (as `tc qdisc show` prints it) is the kernel's own
    default (handle 0:), which deleting ours brings back."""
    return not line or " 0: " in f"{line} " or line.startswith("qdisc noqueue")


def probe_hosts(hosts: Hosts, sc: Scenario, tag: str = "probe") -> tuple[dict[str, Probe], Plan]:
    """Probes every host the run uses; raises TestbedUnavailable naming the
    host and what is missing. Leftovers of dead runs are torn down first."""
    inv = hosts.inventory
    draft = make_plan(sc, inv, tag)
    ccas = sorted({f.cca if f.cca != "newreno" else "reno" for f in draft.flows})
    hosts.connect(h.name for h in inv.hosts)
    results = hosts.sh_many({h.name: _probe_script(h, ccas) for h in inv.hosts}, timeout=60)
    probes = {n: _parse_probe(r.stdout) for n, r in results.items()}
    problems: list[str] = []
    delay_modes: dict[str, str] = {}
    available: dict[str, list[str]] = {}
    for name, hp in draft.hosts.items():
        h, pr = hp.host, probes[name]
        roles = set(hp.roles)
        if not pr.root and not h.sudo:
            problems.append(f"{h.where}: commands run as {h.user}, not root (set sudo = true in the inventory for a user with sudo)")
        if h.interface not in pr.interfaces:
            problems.append(f"{h.where}: interface {h.interface} is missing (present: {', '.join(pr.interfaces) or 'none'})")
        if "receiver" in roles:
            mode = h.delay if h.delay != "auto" else ("netem" if pr.netem else "program")
            if mode == "netem" and not pr.netem:
                problems.append(f"{h.where}: the kernel has no netem qdisc (delay = \"netem\" in the inventory); use delay = \"auto\" or \"program\"")
            delay_modes[name] = mode
        else:
            mode = ""
        need = set(_tools(h, roles, mode)) if roles else {"sh", "tc", "ethtool", "setsid", "tac", "awk", "sysctl"}
        if mode == "program":
            need.add("libnetfilter-queue-dev")
        lacking = sorted(t for t in pr.missing if t in need)
        if lacking:
            problems.append(f"{h.where}: missing {', '.join(lacking)} (Debian: apt-get install "
                            + " ".join(sorted({_package(t) for t in lacking})) + ")")
        if not pr.gnu_date:
            problems.append(f"{h.where}: `date` does not print nanoseconds (%N); the samplers need GNU coreutils")
        if ("bottleneck" in roles or mode == "netem") and h.interface in pr.interfaces and not _default_qdisc(pr.qdisc):
            problems.append(f"{h.where}: interface {h.interface} already has a configured root qdisc ({pr.qdisc}); "
                            "the backend replaces only the kernel's default and restores it by deleting its own: remove it first")
        if "sender" in roles:
            available[name] = pr.ccas
            for f in draft.flows:
                if f.sender != name:
                    continue
                cca = "reno" if f.cca == "newreno" else f.cca
                if cca in pr.ccas:
                    continue
                if cca in MODULES and h.modprobe and pr.modprobe_ok.get(cca):
                    continue
                how = ("allow loading its module with modprobe = true in the inventory" if not h.modprobe and cca in MODULES
                       else f"its module {MODULES.get(cca, 'tcp_' + cca)} is not installed" if cca in MODULES else "the kernel has no such algorithm")
                problems.append(f"{h.where}: congestion control {f.cca!r} (flows[{f.index}]) is not available "
                                f"(tcp_available_congestion_control: {' '.join(pr.ccas)}); {how}")
        for d, live in pr.leftovers:
            if live:
                problems.append(f"{h.where}: another ccarena run is using this host ({d}); wait for it or remove it with its watchdog")
    if problems:
        raise TestbedUnavailable("; ".join(dict.fromkeys(problems)))
    stale = {n: [d for d, live in probes[n].leftovers if not live] for n in probes}
    if any(stale.values()):
        hosts.sh_many({n: "".join(f"D={d}\n[ -e \"$D/lib.sh\" ] && {{ . \"$D/lib.sh\"; stop_all; restore_all; }} || rm -rf \"$D\"\n" for d in ds)
                       for n, ds in stale.items() if ds}, check=False)
    return probes, make_plan(sc, inv, tag, delay_modes, available)


def _package(tool: str) -> str:
    return {"ip": "iproute2", "tc": "iproute2", "ss": "iproute2", "setsid": "util-linux", "tac": "coreutils", "date": "coreutils",
            "sh": "dash", "sysctl": "procps", "awk": "gawk", "pkg-config": "pkg-config"}.get(tool, tool)


_READBACK_OFFLOADS = re.compile(r"^(tcp-segmentation-offload|generic-segmentation-offload|generic-receive-offload):\s*(\S+)", re.M)


def _readback_script(hp) -> str:
    keys = sorted(set(hp.sysctls) | {"net.ipv4.tcp_congestion_control"})
    return "\n".join([
        f"echo \"kernel $(uname -r)\"",
        f"ethtool -k {hp.host.interface} 2>/dev/null | grep -E '^(tcp-segmentation|generic-segmentation|generic-receive)-offload:' || true",
        f"echo \"qdiscs $(tc -j qdisc show dev {hp.host.interface})\"",
        *[f"echo \"sysctl {k} $(sysctl -n {k} 2>/dev/null | tr '\\t' ' ')\"" for k in keys],
        "true",
    ]) + "\n"


def _parse_readback(text: str) -> dict:
    out: dict = {"kernel": "", "offloads": {}, "qdiscs": [], "sysctls": {}}
    for name, state in _READBACK_OFFLOADS.findall(text):
        out["offloads"][{"tcp-segmentation-offload": "tso", "generic-segmentation-offload": "gso", "generic-receive-offload": "gro"}[name]] = state
    for line in text.splitlines():
        if line.startswith("kernel "):
            out["kernel"] = line[7:].strip()
        elif line.startswith("qdiscs "):
            try:
                out["qdiscs"] = json.loads(line[7:])
            except ValueError:
                out["qdiscs"] = [line[7:]]
        elif line.startswith("sysctl "):
            _, k, *v = line.split(" ")
            out["sysctls"][k] = " ".join(v).strip()
    return out


def _split_files(text: str) -> dict[str, str]:
    files: dict[str, list[str]] = {}
    cur = None
    for line in text.splitlines():
        if line.startswith("@@@ccarena-file "):
            cur = line.split(" ", 1)[1]
            files[cur] = []
        elif cur is not None:
            files[cur].append(line)
    return {k: "\n".join(v) + ("\n" if v else "") for k, v in files.items()}


def _samples(text: str) -> tuple[dict[int, tuple[int, str]], str]:
    """Sampler output: {tick: (host time ns, the command's output)} and the netstat snapshot."""
    ticks: dict[int, tuple[int, list[str]]] = {}
    netstat: list[str] = []
    cur = None
    in_netstat = False
    for line in text.splitlines():
        if line.startswith("@ "):
            parts = line.split()
            try:
                cur = int(parts[1])
                ticks[cur] = (int(parts[2]), [])
            except (IndexError, ValueError):
                cur = None
            in_netstat = False
        elif line == "@netstat":
            in_netstat = True
        elif line == "@end":
            in_netstat = False
        elif in_netstat:
            netstat.append(line)
        elif cur is not None:
            ticks[cur][1].append(line)
    return {k: (t, "\n".join(v)) for k, (t, v) in ticks.items()}, "\n".join(netstat)


def _delta(end: dict[str, int], start: dict[str, int]) -> dict[str, int]:
    return {k: v - start.get(k, 0) for k, v in end.items()}


class _Measured:
    """The run's measurements in the shape ``build_record`` reads (a linux run's attributes)."""


def run_testbed(sc: Scenario, hosts: Hosts, progress: ProgressCallback | None = None, cancel: threading.Event | None = None,
                tag: str | None = None) -> RunResult:
    """Runs a scenario (validated with the testbed catalogue) on the hosts of `hosts`' inventory."""
    notes = check_scenario(sc, backend="testbed", max_rate_bps=None, hz=None)
    tag = tag or f"{os.getpid()}-{uuid.uuid4().hex[:6]}"
    probes, plan = probe_hosts(hosts, sc, tag)
    hzs = {p.hz for p in probes.values() if p.hz}
    for i, f in enumerate(sc.engine["flows"]):
        if "hz" in f["tcp"] and hzs and f["tcp"]["hz"] not in hzs:
            notes.append(f"flows[{i}].tcp.hz = {f['tcp']['hz']} is not applied: the hosts' CONFIG_HZ is {', '.join(map(str, sorted(hzs)))}")
    main = threading.current_thread() is threading.main_thread()
    old = {}
    if main:
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        for s in old:
            signal.signal(s, _raise_cancelled)
    run = _TestbedRun(sc, plan, hosts, probes, notes, progress, cancel)
    started = time.perf_counter()
    try:
        run.setup()
        run.execute()
        run.collect()
    finally:
        prev = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None  # a second Ctrl-C must not stop the teardown
        try:
            run.teardown()
        finally:
            if main:
                signal.signal(signal.SIGINT, prev)
                for s, h in old.items():
                    signal.signal(s, h)
    record = run.record()
    return RunResult(scenario=sc, record=record, wall_time_s=time.perf_counter() - started)


class _TestbedRun:
    def __init__(self, sc: Scenario, plan: Plan, hosts: Hosts, probes: dict[str, Probe], notes: list[str],
                 progress: ProgressCallback | None, cancel: threading.Event | None):
        self.sc, self.plan, self.hosts, self.probes, self.notes = sc, plan, hosts, probes, notes
        self.progress, self.cancel = progress, cancel
        self.e = sc.engine
        self.set_up: list[str] = []
        self.offsets: dict[str, tuple[int, int]] = {}
        self.readback: dict[str, dict] = {}
        self.files: dict[str, dict[str, str]] = {}
        self.launched_at: dict[int, float] = {}
        self.t0_ns = 0
        self.restored: dict[str, dict] = {}

    def _check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled()

    def _sleep_until(self, t_ns: int) -> None:
        while True:
            self._check_cancel()
            left = (t_ns - time.time_ns()) / 1e9
            if left <= 0:
                return
            time.sleep(min(left, 0.1))

    def setup(self) -> None:
        hp_all = self.plan.hosts
        used = {n: hp for n, hp in hp_all.items() if hp.setup}
        self.set_up = list(used)  # the teardown tries every host used: a set-up cut short leaves a partial restore script
        self.hosts.sh_many({n: f"D={hp.dir}\n" + "\n".join(hp.setup) + "\n" for n, hp in used.items()}, timeout=300)
        self.readback = {n: _parse_readback(r.stdout) for n, r in
                         self.hosts.sh_many({n: _readback_script(hp) for n, hp in hp_all.items()}, check=False).items()}
        self.offsets = self.hosts.clock_offsets(hp_all)

    def execute(self) -> None:
        plan = self.plan
        self._check_cancel()
        # The samplers wait for t0; clients launched before a flow's start
        # (mapping.launch_lead_ns) move it later by as much.
        early = max([0.0, *(-t for hp in plan.hosts.values() for t, _, _ in hp.launches)])
        self.t0_ns = time.time_ns() + 1_000_000_000 + int(early * 1e9)
        starts = {}
        for n, hp in plan.hosts.items():
            if hp.start:
                t0_host = self.t0_ns + self.offsets[n][0]
                starts[n] = hp.preamble() + "\n".join(line.replace("T0_NS", str(t0_host)) for line in hp.start) + "\n"
        self.hosts.sh_many(starts, timeout=60)
        launches = sorted((t, i, n, line) for n, hp in plan.hosts.items() for t, i, line in hp.launches)
        duration_s = plan.duration_ns / 1e9
        k = 0
        while k < len(launches):
            t = launches[k][0]
            batch = [x for x in launches[k:] if x[0] == t]
            k += len(batch)
            self._wait_with_progress(self.t0_ns + int(t * 1e9), duration_s)
            scripts: dict[str, str] = {}
            for _, i, n, line in batch:
                scripts[n] = scripts.get(n, self.plan.hosts[n].preamble()) + line + "\n"
                self.launched_at[i] = (time.time_ns() - self.t0_ns) / 1e9
            self.hosts.sh_many(scripts, timeout=60)
        self._wait_with_progress(self.t0_ns + plan.duration_ns, duration_s)

    def _wait_with_progress(self, until_ns: int, duration_s: float) -> None:
        while True:
            self._check_cancel()
            now = time.time_ns()
            if self.progress:
                self.progress(min(max(0.0, (now - self.t0_ns) / 1e9), duration_s), duration_s)
            if now >= until_ns:
                return
            time.sleep(min((until_ns - now) / 1e9, 0.25))

    def collect(self) -> None:
        plan = self.plan
        # Clients end by themselves (-t / -n) shortly after the duration; sized flows still running are stopped.
        wait = ("n=0; while [ $n -lt 150 ]; do alive=0; for f in \"$D\"/client*.pid; do [ -e \"$f\" ] && kill -0 \"$(cat \"$f\")\" 2>/dev/null && alive=1; done; "
                "[ $alive = 0 ] && break; sleep 0.1; n=$((n + 1)); done; true\n")
        senders = {n: hp.preamble() + wait for n, hp in plan.hosts.items() if hp.launches}
        self.hosts.sh_many(senders, timeout=60, check=False)
        self.hosts.sh_many({n: hp.preamble() + "\n".join(hp.stop) + "\n" for n, hp in plan.hosts.items() if hp.setup}, timeout=60)
        scripts = {}
        for n, hp in plan.hosts.items():
            if hp.collect:
                scripts[n] = hp.preamble() + "".join(f"echo '@@@ccarena-file {c}'; cat \"$D/{c}\" 2>/dev/null || true\n" for c in hp.collect)
        self.files = {n: _split_files(r.stdout) for n, r in self.hosts.sh_many(scripts, timeout=120).items()} if scripts else {}

    def teardown(self) -> None:
        if not self.set_up:
            return
        script = {}
        for n in self.set_up:
            hp = self.plan.hosts[n]
            script[n] = (f"D={hp.dir}\n[ -e \"$D/lib.sh\" ] || {{ rm -rf \"$D\"; exit 0; }}\n. \"$D/lib.sh\"\n"
                         + "\n".join(["stop_all"] + hp.teardown) + "\n"
                         + f"[ ! -e \"$D\" ] && echo \"after qdisc $(tc qdisc show dev {hp.host.interface} root | head -n 1)\"\n")
        results = self.hosts.sh_many(script, timeout=120, check=False)
        failed = [f"{self.plan.hosts[n].host.where}: `{r.failed_line()}` failed: {r.error()}" for n, r in results.items() if r.status != 0]
        self.set_up = []
        if failed:
            raise TestbedUnavailable("the teardown did not complete on " + "; ".join(failed) + " (its watchdog will retry; see docs/testbed-backend.md)")

    # ---- the record ----
    def _aligned(self, host: str, t_host_ns: int) -> float:
        return (t_host_ns - self.offsets[host][0] - self.t0_ns) / 1e9

    def record(self) -> dict:
        plan, e = self.plan, self.e
        interval = plan.interval_ns
        n = len(plan.flows)
        btl = plan.inventory.bottleneck.name
        tc_ticks, _ = _samples(self.files.get(btl, {}).get("tc.out", ""))
        per_host: dict[str, tuple[dict, str]] = {}
        for name, hp in plan.hosts.items():
            if hp.launches:
                per_host[name] = _samples(self.files.get(name, {}).get("ss.out", ""))
        all_ticks = sorted(set(tc_ticks) | {k for ticks, _ in per_host.values() for k in ticks})
        m = _Measured()
        m.e, m.interval, m.duration, m.warmup = e, interval, plan.duration_ns, e["run"]["warmup"]
        m.flows = [dict(f, rtt=fp.rtt_ns) for f, fp in zip(e["flows"], plan.flows)]
        m.starts = [fp.start_ns for fp in plan.flows]
        m.sample_ticks = all_ticks
        m.sample_times = [self._aligned(btl, tc_ticks[k][0]) if k in tc_ticks else k * interval / 1e9 for k in all_ticks]
        m.samples = [[] for _ in range(n)]
        m.flow_sample_times = [[] for _ in range(n)]
        parsed: dict[str, dict[int, dict[int, dict]]] = {h: {k: busiest_by_port(out) for k, (_, out) in ticks.items()} for h, (ticks, _) in per_host.items()}
        for fp in plan.flows:
            ticks, _ = per_host.get(fp.sender, ({}, ""))
            for k in all_ticks:
                smp = parsed.get(fp.sender, {}).get(k, {}).get(fp.port)
                m.samples[fp.index].append(smp)
                m.flow_sample_times[fp.index].append(self._aligned(fp.sender, ticks[k][0]) if k in ticks else k * interval / 1e9)
        m.tbf, last = [], dict(EMPTY_TBF)
        for k in all_ticks:
            if k in tc_ticks:
                last = parse_tbf(tc_ticks[k][1])
            m.tbf.append(last)
        m.final_tbf = parse_tbf(self.files.get(btl, {}).get("tc.final", "")) if self.files.get(btl, {}).get("tc.final") else last
        m.loss_drops = 0
        for line in self.files.get(btl, {}).get("loss.count", "").splitlines():
            if "statistic" in line and "DROP" in line:
                m.loss_drops += int(line.split()[0])
        m.server_json, m.client_json = [], []
        for fp in plan.flows:
            m.server_json.append(_json(self.files.get(fp.receiver, {}).get(f"server{fp.index}.out", "")))
            m.client_json.append(_json(self.files.get(fp.sender, {}).get(f"client{fp.index}.out", "")))
            err = m.client_json[-1].get("error")
            if err:
                raise TestbedUnavailable(f"iperf3 flow {fp.index} on {fp.sender}: {err}")
        m.launched_at = [self.launched_at.get(i) for i in range(n)]
        m.netstat_start, m.netstat_end = [{} for _ in range(n)], [{} for _ in range(n)]
        for name, (ticks, warm_text) in per_host.items():
            files = self.files.get(name, {})
            base = parse_netstat(files.get("netstat.start", ""))
            end = _delta(parse_netstat(files.get("netstat.end", "")), base)
            warm = _delta(parse_netstat(warm_text), base) if warm_text else {}
            mine = [fp for fp in plan.flows if fp.sender == name]
            for fp in mine:
                i = fp.index
                if len(mine) == 1:
                    # The host sends one flow: its counters are the flow's (less the SSH control traffic's few segments).
                    m.netstat_end[i], m.netstat_start[i] = end, warm
                else:
                    # Shared counters: the flow's own socket's retransmissions, from ss.
                    samples = m.samples[i]
                    last = next((s for s in reversed(samples) if s), {}) or {}
                    at_warm = next((s for k, s in zip(all_ticks, samples) if s and k * interval >= m.warmup), {}) or {}
                    m.netstat_end[i] = {"TcpRetransSegs": last.get("total_retrans", 0)}
                    m.netstat_start[i] = {"TcpRetransSegs": at_warm.get("total_retrans", 0)} if m.warmup > 0 else {}
        if any(len([f for f in plan.flows if f.sender == h]) > 1 for h in per_host):
            self.notes.append("hosts sending several flows: RTOs, loss probes, recoveries and undos are counted per host, not per flow (left zero)")
        delay_stats = {}
        for name, hp in plan.hosts.items():
            if hp.delay == "program":
                lines = [ln for ln in self.files.get(name, {}).get("delay.err", "").splitlines() if ln.startswith("{")]
                delay_stats[name] = _json(lines[-1]) if lines else None
        hosts_section = {}
        for name, hp in plan.hosts.items():
            rb = self.readback.get(name, {})
            hosts_section[name] = {
                "roles": hp.roles, "interface": hp.host.interface, "kernel": rb.get("kernel") or self.probes[name].kernel,
                "offloads": rb.get("offloads", {}), "qdiscs": rb.get("qdiscs", []), "sysctls": rb.get("sysctls", {}),
                "clock_offset_ns": self.offsets.get(name, (0, 0))[0], "clock_rtt_ns": self.offsets.get(name, (0, 0))[1],
                "delay": hp.delay or None, "modules": hp.modules, "flows": hp.flows,
            }
        m.notes = self.notes
        opts = self.sc.meta.linux

        def section(data_starts: list[float]) -> dict:
            kernels = sorted({h["kernel"] for h in hosts_section.values() if h["kernel"]})
            return {
                "inventory": plan.inventory.to_dict(),
                "tag": plan.tag,
                "kernel": ", ".join(kernels),
                "hosts": hosts_section,
                "flows": [{"sender": f.sender, "receiver": f.receiver, "address": f.address, "port": f.port} for f in plan.flows],
                "delay": sorted({hp.delay for hp in plan.hosts.values() if hp.delay}),
                "delay_stats": delay_stats,
                "tbf": {"rate_bps": e["network"]["bottleneck_rate"] * 1514 // 1500, "burst_bytes": opts["tbf_burst"]},
                "offloads": opts["offloads"],
                "data_start_s": data_starts,
                "late_samples": sum(1 for k, t in zip(m.sample_ticks, m.sample_times) if t - k * interval / 1e9 > 0.02),
                "skipped_samples": plan.ticks - len(m.sample_ticks),
                "notes": self.notes,
            }

        return build_record(m, backend="testbed", section=section)


def _json(text: str) -> dict:
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        return {}
