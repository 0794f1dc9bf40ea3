"""The linux backend: runs a scenario on this machine's kernel TCP and returns
the same `RunResult` (the same record structure) as the simulator.

    >>> from ccarena.backends.linux import run_linux
    >>> r = run_linux("quickstart")       # needs root; see docs/linux-backend.md

A run: clean leftovers of dead runs, register the project's BPF algorithms
the kernel lacks, build the dumbbell (topology.py), start the delay program
and one iperf3 server per receiver, launch each iperf3 client at its flow's
start time (with `-C cca`), sample every flow with `ss -tin` and the
bottleneck with `tc -s` at the scenario's sample interval, then collect
iperf3's JSON and the namespaces' TCP counters, tear everything down and
build the record. Teardown runs on success, error, Ctrl-C and SIGTERM.

What the record holds on this backend (the rest stays zero; see
docs/linux-backend.md): per-flow throughput over the measurement window from
iperf3's receiver-side 100 ms intervals; cwnd, ssthresh, sRTT, min RTT,
in-flight, delivery and pacing rate, bytes acked and retransmissions over time
from `ss`; retransmissions, RTOs, tail loss probes, recoveries, undos and SYN
retransmissions from the sender namespace's TCP counters; the bottleneck's
backlog, drops and bytes sent from tbf. Not measured: per-flow drops at the
bottleneck (tbf counts them for all flows together), the CA state, duplicate
segments, ECN marks.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from functools import partial
from typing import Any, Callable

from ...errors import ScenarioError
from ...results.record import RECEIVER_TCPEXT, RunRecord, normalise
from ...results.result import RunResult
from ...scenario.model import Scenario
from .cleanup import cleanup, live_runs, registered_bpf, unregister_bpf
from .host import (
    DELAY_BIN, LinuxBackendUnavailable, bpf_ccas, bpf_globals_maps, bpf_hook_repairs, check_host, cpu_times, has_netem, has_red, kernel_ccas, kernel_hz, linux_catalogue, popen, sh,
)
from .mapping import iperf3_client_args, iperf3_server_args, launch_lead_ns, tbf_limit_bytes
from .sampling import sample_flows
from .supervisor import Supervisor, workdir_prefix
from .topology import MAX_FLOWS, PORT, Dumbbell, ack_leg_ns, receiver_addr

__all__ = ["run_linux"]

INFINITE_SSTHRESH = 2147483647
ProgressCallback = Callable[[float, float], None]


class _Terminated(KeyboardInterrupt):
    """SIGINT/SIGTERM/SIGHUP during a run: tear down, then leave as after Ctrl-C."""


def _raise_terminated(signum, frame):
    raise _Terminated()


# What this backend can carry (docs/linux-backend.md, "Limits"). Above
# MAX_RATE_BPS the veths, tbf and the delay program run out of CPU on a 2-core
# machine (10 Gbps ran at 24 % utilisation, 100 Gbps at 3 %, i.e. ~2.4-3 Gbps
# at best with nothing else running); half of that is the ceiling.
MAX_RATE_BPS = 1_000_000_000
# Below MIN_RATE_BPS a full frame takes > 12 ms and iperf3's control exchange
# over the same bottleneck times out (10 kbps failed after 20-30 s).
MIN_RATE_BPS = 1_000_000
# The kernel's initial RTO is 1 s: a longer RTT retransmits every SYN and
# iperf3's control channel gives up (10 s failed after 20-30 s).
MAX_RTT_NS = 1_000_000_000
# One sample is an `ss` per flow and a `tc`, a few ms each: below this the
# sampling cannot keep up (1 ms turned a 5 s run into 100 s).
MIN_SAMPLE_INTERVAL_NS = 10_000_000


def _mbps(bps: int) -> str:
    return f"{bps / 1e6:g} Mbps"


#: Network settings that model a Linux machine's timing in the simulator:
#: the kernel has its own, so the linux backend notes them and goes on.
_SIMULATED_HOST_TIMING = {
    "delay_noise": "it models the return path's timing noise; the kernel's hosts and paths have their own "
                   "(tools/kernel_host_timing.py measures it)",
    "router_stalls": "it models a Linux router's CPU stalls; the kernel's router stalls as its machine makes it "
                     "(tools/kernel_host_timing.py measures it)",
    "return_stalls": "it models the return path's CPU stalls; the kernel's hosts stall as their machine makes them "
                     "(tools/kernel_host_timing.py measures them)",
}


def check_scenario(sc: Scenario, backend: str = "linux", max_rate_bps: int | None = MAX_RATE_BPS, hz: int | None = None) -> list[str]:
    """Raises ScenarioError for what the kernel cannot do; returns notes on
    what it does differently. The testbed backend checks with its own name,
    no rate ceiling (real links carry what they carry) and its hosts' HZ."""
    e = sc.engine
    notes = []
    where = f"the {backend} backend"
    # RTTs given as a distribution are drawn as the engine draws them.
    flows = [dict(f, rtt=r) for f, r in zip(e["flows"], sc.flow_rtts())]
    rate = e["network"]["bottleneck_rate"]
    if rate < MIN_RATE_BPS:
        raise ScenarioError("network.bottleneck_rate", f"{where} runs at least {_mbps(MIN_RATE_BPS)} (iperf3's control exchange times out below), got {_mbps(rate)}")
    if max_rate_bps is not None and rate > max_rate_bps:
        if not sc.meta.linux.get("force_rate"):
            raise ScenarioError(
                "network.bottleneck_rate",
                f"this machine's veth + tbf path carries at most {_mbps(max_rate_bps)} reliably, got {_mbps(rate)} "
                "(set linux.force_rate = true to run it anyway; the record and the table flag it)",
            )
        notes.append(f"network.bottleneck_rate {_mbps(rate)} is above the {_mbps(max_rate_bps)} this machine carries reliably: the CPU, not tbf, may set the rate")
    interval = e["run"]["sample_interval"]
    if interval < MIN_SAMPLE_INTERVAL_NS:
        raise ScenarioError("run.sample_interval", f"{where} samples with ss and tc and needs at least {MIN_SAMPLE_INTERVAL_NS // 1_000_000} ms, got {interval / 1e6:g} ms")
    if len(flows) > MAX_FLOWS:
        raise ScenarioError("flows", f"{where} runs at most {MAX_FLOWS} flows, got {len(flows)}")
    loss = e["network"]["loss"]
    if loss["model"] not in ("bernoulli", "periodic"):
        raise ScenarioError("network.loss.model", f"{where} supports loss models bernoulli and periodic, got {loss['model']!r}")
    qdisc = e["network"].get("qdisc", {"kind": "drop_tail"})["kind"]
    allowed = ("drop_tail", "step") if backend == "linux" else ("drop_tail",)
    if qdisc not in allowed:
        raise ScenarioError("network.qdisc", f"{where}'s bottleneck is tbf's drop-tail queue (or on linux the step queue, RED under tbf); allowed: {', '.join(allowed)}, got {qdisc!r}")
    if qdisc == "step" and not has_red():
        raise ScenarioError("network.qdisc", f"{where} maps the step queue onto the red qdisc, which this kernel lacks (sch_red)")
    network_doc = sc.doc.get("network")
    if isinstance(network_doc, dict):
        notes += [f"network.{key} is not applied: {why}" for key, why in _SIMULATED_HOST_TIMING.items() if key in network_doc]
    hosts_doc = sc.doc.get("hosts")
    if isinstance(hosts_doc, dict) and hosts_doc.get("tso_defer", "ack_due") != "ack_due":
        notes.append(f"hosts.tso_defer = {hosts_doc['tso_defer']!r} is not applied: the kernel follows its own rule "
                     "(ack_due since Linux 6.18 and the stable trees of October 2025)")
    if e["network"].get("access_rate"):
        notes.append("network.access_rate is not applied: " + ("veth links have no rate of their own" if backend == "linux" else "the hosts' links keep their own rates"))
    if hz is None and backend == "linux":
        hz = kernel_hz()
    for i, f in enumerate(flows):
        tcp = f["tcp"]
        if "hz" in tcp and hz and tcp["hz"] != hz:
            notes.append(f"flows[{i}].tcp.hz = {tcp['hz']} is not applied: the kernel's CONFIG_HZ is {hz}")
        if f["rtt"] > MAX_RTT_NS:
            raise ScenarioError(f"flows[{i}].rtt", f"{where} runs RTTs up to {MAX_RTT_NS // 1_000_000} ms (the kernel's initial RTO), got {f['rtt'] / 1e6:g} ms")
        if f["stop"] is not None and f["size"] is not None:
            raise ScenarioError("flows", f"a flow with both size and stop is not supported on {where}")
        jitter = f.get("jitter") or {}
        if backend == "linux" and jitter and not jitter.get("reorder", True) and has_netem():
            raise ScenarioError(f"flows[{i}].jitter.reorder",
                                f"{where} varies the delay with netem here, which reorders packets; allowed: true, got false")
    return notes


def run_linux(
    scenario: str | Path | dict | Scenario,
    overrides: dict[str, Any] | None = None,
    progress: ProgressCallback | None = None,
    keep_dir: str | Path | None = None,
) -> RunResult:
    """Runs `scenario` on the kernel's TCP in network namespaces.

    Raises ScenarioError for input the backend cannot run and
    LinuxBackendUnavailable when this machine cannot run it (no root, no
    namespaces, missing tools). `keep_dir`, if given, receives the raw iperf3
    JSON and delay-program statistics.
    """
    sc = Scenario.load(scenario, linux_catalogue(), overrides)
    notes = check_scenario(sc)
    check_host(need_delay=True)
    need_bpf = sorted({f["cca"] for f in sc.engine["flows"]} & set(bpf_ccas()) - set(kernel_ccas()))
    if need_bpf and shutil.which("bpftool") is None:
        raise LinuxBackendUnavailable(f"{', '.join(need_bpf)} need bpftool (Debian: apt-get install bpftool)")

    # Ctrl-C, SIGTERM and SIGHUP end the run with a teardown, even where the
    # process inherited them ignored (e.g. started in the background by a script).
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    for s in old:
        signal.signal(s, _raise_terminated)
    # The watcher tears the run down should this process die without doing it
    # (SIGKILL); it is started before anything exists that it would have to remove.
    supervisor = Supervisor(str(os.getpid()))
    try:
        supervisor.start()
        run = _Run(sc, notes, progress)
    except BaseException:
        supervisor.done()
        for s, h in old.items():
            signal.signal(s, h)
        raise
    started = time.perf_counter()
    try:
        cleanup(exclude=os.getpid())  # leftovers of runs that were killed
        run.register_bpf(need_bpf)
        run.setup()
        run.prepare_clients()
        run.execute()
        run.collect()
    finally:
        prev_int = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not stop the teardown
        try:
            run.teardown()
            if keep_dir is not None:
                shutil.copytree(run.workdir, keep_dir, dirs_exist_ok=True)
            shutil.rmtree(run.workdir, ignore_errors=True)
        finally:
            supervisor.done()
            signal.signal(signal.SIGINT, prev_int)
            for s, h in old.items():
                signal.signal(s, h)
    record = run.record()
    return RunResult(scenario=sc, record=record, wall_time_s=time.perf_counter() - started)


class _Run:
    def __init__(self, sc: Scenario, notes: list[str], progress: ProgressCallback | None):
        self.sc = sc
        e = sc.engine
        self.e = e
        self.notes = notes
        self.progress = progress
        self.flows = [dict(f, rtt=r) for f, r in zip(e["flows"], sc.flow_rtts())]
        self.n = len(self.flows)
        # Each flow's start with its draw of run.start_jitter, the simulator's
        # own instants for the same seed: the clients are launched at these.
        self.starts = sc.flow_starts()
        self.duration = e["run"]["duration"]
        self.warmup = e["run"]["warmup"]
        self.interval = e["run"]["sample_interval"]
        opts = sc.meta.linux
        rate = e["network"]["bottleneck_rate"]
        limit = tbf_limit_bytes(e["network"]["buffer"])
        self.delay_mode = "netem" if has_netem() else "nfqueue"
        self.net = Dumbbell(
            tag=str(os.getpid()),
            flows=self.flows,
            rate_bps=rate,
            limit_bytes=limit,
            burst_bytes=opts["tbf_burst"],
            offloads=opts["offloads"],
            rps=opts["rps"],
            loss=e["network"]["loss"],
            delay_mode=self.delay_mode,
            qdisc=e["network"].get("qdisc", {"kind": "drop_tail"}),
            seed=int(e["run"]["seed"]),
        )
        self.workdir = Path(tempfile.mkdtemp(prefix=os.path.basename(workdir_prefix(str(os.getpid())))))
        self.procs: list[subprocess.Popen] = []
        self.delay_proc: subprocess.Popen | None = None
        self.servers: list[subprocess.Popen] = []
        self.clients: list[subprocess.Popen | None] = [None] * self.n
        # The clients started up to their iperf3 and waiting to be released.
        self.waiting: list[subprocess.Popen | None] = [None] * self.n
        self.launched_at = [None] * self.n
        self.bpf_registered: list[str] = []
        # The globals maps of the BPF algorithms this run registered, and how
        # many windows their guard repaired (bpf/ccarena_ca.h).
        self.bpf_globals: set[int] = set()
        self.bpf_hook_repairs = 0
        self.samples: list[list[dict | None]] = [[] for _ in range(self.n)]
        self.sample_times: list[float] = []
        self.sample_ticks: list[int] = []  # sample j was taken for tick sample_ticks[j] (at tick x interval)
        self.tbf: list[dict] = []
        self.netstat_start: list[dict] = [{} for _ in range(self.n)]
        self.netstat_end: list[dict] = [{} for _ in range(self.n)]
        # The machine's CPU time at the warm-up's end and at the run's (host.cpu_times).
        self.cpu_at_warmup: dict[str, float] | None = None
        self.cpu_at_end: dict[str, float] | None = None
        # What the hosts did: the receiver's TCP segments out (its ACKs) and the
        # packets the sender handed its interface (super-packets with offloads).
        self.receiver_out_segs: list[int] = [0] * self.n
        self.receiver_paws: list[int] = [0] * self.n
        # Each receiver's nonzero TcpExt counters at the end (its namespace
        # holds one data connection): how its ACKs arose (DelayedACKs,
        # TCPAckCompressed, TCPOFOQueue, ...), for comparing ACK patterns.
        self.receiver_counters: list[dict[str, int]] = [{} for _ in range(self.n)]
        self.sender_tx_packets: list[int] = [0] * self.n
        # Skbs the left router's bottleneck interface was handed (tbf's
        # departures, a super-packet it queued whole counting once).
        self.bottleneck_skbs = 0
        self.delay_stats: dict | None = None
        self.server_json: list[dict] = []
        self.client_json: list[dict] = []
        self.loss_drops = 0

    # ---- set-up ----
    def register_bpf(self, names: list[str]) -> None:
        objs = bpf_ccas()
        for name in names:
            before, maps_before = set(registered_bpf()), bpf_globals_maps()
            sh("bpftool", "struct_ops", "register", str(objs[name]))
            self.bpf_registered += sorted(set(registered_bpf()) - before)
            self.bpf_globals |= bpf_globals_maps() - maps_before
        missing = [n for n in names if n not in kernel_ccas()]
        if missing:
            raise RuntimeError(f"BPF algorithms {missing} did not appear in the kernel's list after registration")

    def _spawn(self, args: list[str], out: Path | None = None, err: Path | None = None) -> subprocess.Popen:
        p = popen(
            args,
            stdout=open(out, "w") if out else subprocess.DEVNULL,
            stderr=open(err, "w") if err else subprocess.DEVNULL,
        )
        self.procs.append(p)
        return p

    def setup(self) -> None:
        self.net.build()
        if self.delay_mode == "nfqueue":
            self.delay_proc = popen(
                ["ip", "netns", "exec", self.net.right, str(DELAY_BIN), *self.net.delay_args()],
                stdout=subprocess.PIPE,
                stderr=open(self.workdir / "delay.err", "w"),
            )
            self.procs.append(self.delay_proc)
            line = self.delay_proc.stdout.readline().decode(errors="replace").strip()
            if line != "ready":
                try:
                    self.delay_proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.delay_proc.kill()
                raise RuntimeError(f"the delay program did not start: {(self.workdir / 'delay.err').read_text().strip()}")
        self.net.add_delay_rules()
        for i in range(self.n):
            self.servers.append(
                self._spawn(
                    ["ip", "netns", "exec", self.net.receiver(i), *iperf3_server_args(PORT)],
                    out=self.workdir / f"server{i}.json",
                    err=self.workdir / f"server{i}.err",
                )
            )
        deadline = time.monotonic() + 10
        for i in range(self.n):
            while True:
                p = subprocess.run(["ss", "-N", self.net.receiver(i), "-tlnH", "sport", "=", f":{PORT}"], capture_output=True, text=True)
                if p.stdout.strip():
                    break
                if time.monotonic() > deadline or self.servers[i].poll() is not None:
                    raise RuntimeError(f"iperf3 server {i} did not start: {(self.workdir / f'server{i}.err').read_text().strip()}")
                time.sleep(0.01)

    def prepare_clients(self) -> None:
        """Starts every flow's client up to its iperf3: a shell in the
        sender's namespace that waits for a line on its input and then
        becomes iperf3 (`release`). Forking `ip netns exec` at each launch
        instant instead would start flows due together one after another,
        a millisecond or more apart and always in flow order."""
        for i in range(self.n):
            args = ["ip", "netns", "exec", self.net.sender(i), "sh", "-c", 'read -r _ && exec "$@"', "sh",
                    *iperf3_client_args(self.flows[i], receiver_addr(i), PORT, self.duration)]
            p = popen(args, stdin=subprocess.PIPE, stdout=open(self.workdir / f"client{i}.json", "w"),
                      stderr=open(self.workdir / f"client{i}.err", "w"))
            self.procs.append(p)
            self.waiting[i] = p

    def release(self, i: int) -> None:
        """Flow i's client runs iperf3 now."""
        p = self.waiting[i]
        self.waiting[i] = None
        if p is None or p.poll() is not None:
            raise RuntimeError(f"iperf3 client of flow {i} did not wait for its launch: {self._iperf_error(i)}")
        assert p.stdin is not None
        p.stdin.write(b"go\n")
        p.stdin.close()
        self.clients[i] = p

    # ---- the run ----
    def execute(self) -> None:
        interval = self.interval / 1e9
        ticks = int(self.duration // self.interval)
        # Each client is launched its start-up ahead of the flow's start
        # (mapping.launch_lead_ns); the run's clock begins late enough that
        # no launch falls before the launching itself.
        launch_at = [(start - launch_lead_ns(f)) / 1e9 for f, start in zip(self.flows, self.starts)]
        early = max([0.0, *(-t for t in launch_at)])
        order = sorted(range(self.n), key=lambda i: launch_at[i])
        window_start = [max(self.warmup, f["start"]) / 1e9 for f in self.flows]
        snap_done = [False] * self.n
        self.t0 = t0 = time.monotonic() + early
        k = 1
        nxt = 0
        while k <= ticks:
            t_launch = launch_at[order[nxt]] if nxt < len(order) else math.inf
            t_tick = k * interval
            wait = min(t_launch, t_tick) - (time.monotonic() - t0)
            if wait > 0:
                time.sleep(wait)
            now = time.monotonic() - t0
            if t_launch <= now + 1e-4:
                i = order[nxt]
                self.release(i)
                self.launched_at[i] = now
                nxt += 1
                continue
            # One sample of every flow and of the bottleneck. The loop is bound
            # to the clock: when sampling falls more than a tick behind (many
            # flows, a loaded machine), the ticks already past are skipped, so
            # the run never lasts much longer than its duration.
            behind = int(now // interval)
            if behind > k:
                k = min(behind, ticks)
            self.sample_times.append(time.monotonic() - t0)
            self.sample_ticks.append(k)
            sampled = sample_flows([self.net.sender(i) if self.clients[i] is not None else None for i in range(self.n)], PORT)
            for i in range(self.n):
                self.samples[i].append(sampled[i])
                if not snap_done[i] and k * interval >= window_start[i] - 1e-9 and window_start[i] > 0:
                    self.netstat_start[i] = self.net.netstat(self.net.sender(i))
                    snap_done[i] = True
            self.tbf.append(self.net.tbf_stats())
            if self.cpu_at_warmup is None and k * interval >= self.warmup / 1e9 - 1e-9:
                self.cpu_at_warmup = cpu_times()
            if self.progress:
                self.progress(min(k * interval, self.duration / 1e9), self.duration / 1e9)
            k += 1
            for i, c in enumerate(self.clients):
                if c is not None and c.poll() not in (None, 0):
                    raise RuntimeError(f"iperf3 client of flow {i} failed: {self._iperf_error(i)}")

    def _iperf_error(self, i: int) -> str:
        for name in (f"client{i}.json", f"client{i}.err"):
            text = (self.workdir / name).read_text() if (self.workdir / name).exists() else ""
            try:
                doc = json.loads(text)
                if doc.get("error"):
                    return doc["error"]
            except ValueError:
                if text.strip():
                    return text.strip().splitlines()[-1]
        return "no output"

    def collect(self) -> None:
        # Clients end by themselves (-t / -n) shortly after the duration (their
        # handshake came after the launch); sized flows still running are stopped.
        deadline = time.monotonic() + 15
        for i, c in enumerate(self.clients):
            if c is None:
                continue
            try:
                c.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                c.send_signal(signal.SIGINT)
                try:
                    c.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    c.kill()
        for s in self.servers:
            try:
                s.wait(timeout=5)
            except subprocess.TimeoutExpired:
                s.kill()
        self.cpu_at_end = cpu_times()
        for i in range(self.n):
            self.netstat_end[i] = self.net.netstat(self.net.sender(i))
            receiver_stat = self.net.netstat(self.net.receiver(i))
            self.receiver_out_segs[i] = receiver_stat.get("TcpOutSegs", 0)
            self.receiver_paws[i] = receiver_stat.get("TcpExtPAWSEstab", 0)
            self.receiver_counters[i] = {k[len("TcpExt"):]: v for k, v in receiver_stat.items() if k.startswith("TcpExt") and v}
            self.sender_tx_packets[i] = self.net.tx_packets(self.net.sender(i))
        self.bottleneck_skbs = self.net.tx_packets(self.net.left, "btl")
        self.final_tbf = self.net.tbf_stats()
        self.final_red = self.net.red_stats()
        self.loss_drops = self.net.loss_drops()
        self.bpf_hook_repairs = sum(bpf_hook_repairs(m) for m in sorted(self.bpf_globals))
        if self.bpf_hook_repairs:
            self.notes.append(
                f"the kernel skipped the BPF algorithm's hooks: its guard put back {self.bpf_hook_repairs} "
                "window(s) the stack had set from a skipped hook (docs/linux-backend.md, \"Known fault\")"
            )
        for i in range(self.n):
            self.client_json.append(_read_json(self.workdir / f"client{i}.json"))
            self.server_json.append(_read_json(self.workdir / f"server{i}.json"))
            err = self.client_json[i].get("error")
            if err:
                raise RuntimeError(f"iperf3 flow {i}: {err}")

    # ---- teardown ----
    def teardown(self) -> None:
        if self.delay_proc is not None and self.delay_proc.poll() is None:
            self.delay_proc.send_signal(signal.SIGTERM)
            try:
                self.delay_proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.delay_proc.kill()
            try:
                lines = (self.workdir / "delay.err").read_text().strip().splitlines()
                self.delay_stats = json.loads(lines[-1]) if lines else None
            except (OSError, ValueError):
                self.delay_stats = None
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.net.teardown()
        if self.bpf_registered and not live_runs(exclude=os.getpid()):
            for name in self.bpf_registered:
                unregister_bpf(name)

    # ---- the record ----
    def record(self) -> dict:
        return build_record(self)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _server_curve(doc: dict) -> tuple[list[float], list[int]]:
    """Cumulative bytes received against seconds since the server's test start."""
    ts, cum = [0.0], [0]
    for iv in doc.get("intervals", []):
        s = iv.get("sum", {})
        ts.append(float(s.get("end", 0.0)))
        cum.append(cum[-1] + int(s.get("bytes", 0)))
    return ts, cum


def _interp(x: float, xs: list[float], ys: list[float]) -> float:
    if not xs or x <= xs[0]:
        return ys[0] if ys else 0.0
    if x >= xs[-1]:
        return ys[-1]
    lo, hi = 0, len(xs) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if xs[mid] <= x:
            lo = mid
        else:
            hi = mid
    span = xs[hi] - xs[lo]
    return ys[lo] + (ys[hi] - ys[lo]) * ((x - xs[lo]) / span if span > 0 else 0.0)


def _data_start(run: _Run, i: int, ts: list[float], cum: list[int], times: list[float] | None = None) -> float:
    """When flow i's data phase began, in seconds since the run's start.

    iperf3 times its intervals from its own test start, which follows the
    client's launch by the control handshake. The ss samples (taken at known
    times) show the bytes acked at the sender; the receiver had those bytes
    one ACK-path delay earlier. Matching the two curves gives the offset
    (median over the samples of the steady part)."""
    rtt = ack_leg_ns(run.flows[i]) / 1e9
    offsets = []
    for t, s in zip(run.sample_times if times is None else times, run.samples[i]):
        if not s or not s.get("bytes_acked"):
            continue
        acked = s["bytes_acked"]
        if acked <= cum[0] or acked >= cum[-1]:
            continue
        tau = _interp(acked, [float(c) for c in cum], ts)
        offsets.append(t - rtt - tau)
    if offsets:
        offsets.sort()
        return offsets[len(offsets) // 2]
    launched = run.launched_at[i]
    return (launched if launched is not None else run.flows[i]["start"] / 1e9) + 3 * run.flows[i]["rtt"] / 1e9


def build_record(run: _Run, backend: str = "linux", section: Callable[[list[float]], dict] | None = None) -> RunRecord:
    """The run's record in the simulator's shape (``results.record``): what
    this backend measures, the rest filled by ``normalise``.

    `run` is anything with a ``_Run``'s measurements (the testbed backend
    hands its own, with per-flow ``flow_sample_times`` from its hosts'
    clocks); `section(data_starts)` is the backend's own part of the record,
    stored under the backend's name (default: the linux backend's)."""
    e = run.e
    interval = run.interval
    t_ns = [k * interval for k in run.sample_ticks]
    per_flow_times = getattr(run, "flow_sample_times", None)
    flows, series, data_starts = [], [], []
    for i, f in enumerate(run.flows):
        times = per_flow_times[i] if per_flow_times is not None else run.sample_times
        ts, cum = _server_curve(run.server_json[i])
        start_s = _data_start(run, i, ts, cum, times)
        data_starts.append(round(start_s, 4))
        end_ns = run.duration if f["stop"] is None else min(run.duration, f["stop"])
        w0, w1 = max(run.warmup, f["start"]), end_ns

        def delivered_at(t_abs_ns: int) -> int:
            return int(round(_interp(t_abs_ns / 1e9 - start_s, ts, [float(c) for c in cum])))

        end_ns_stat = run.netstat_end[i]
        start_stat = run.netstat_start[i]
        samples = run.samples[i]
        last = next((s for s in reversed(samples) if s), {}) or {}
        server_end = run.server_json[i].get("end", {}).get("sum_received", {})
        completion = 0
        if f["size"] is not None and cum[-1] >= f["size"]:
            completion = int((start_s + _interp(f["size"], [float(c) for c in cum], ts)) * 1e9)
        receiver = (getattr(run, "receiver_counters", None) or [{}] * len(run.flows))[i]
        counters = {
            "segments_sent": last.get("data_segs_out", 0),
            # Both include the few packets of iperf3's control connection.
            # (0 where the backend does not read them: the testbed's hosts.)
            "skbs_sent": getattr(run, "sender_tx_packets", [0] * len(run.flows))[i],
            "acks_sent": getattr(run, "receiver_out_segs", [0] * len(run.flows))[i],
            "bytes_sent": last.get("bytes_sent", 0),
            "retransmissions": end_ns_stat.get("TcpRetransSegs", last.get("total_retrans", 0)),
            "rtos": end_ns_stat.get("TcpExtTCPTimeouts", 0),
            "tlps": end_ns_stat.get("TcpExtTCPLossProbes", 0),
            "recoveries": end_ns_stat.get("TcpExtTCPSackRecovery", 0) + end_ns_stat.get("TcpExtTCPRenoRecovery", 0),
            "undos": sum(end_ns_stat.get(k, 0) for k in ("TcpExtTCPFullUndo", "TcpExtTCPPartialUndo", "TcpExtTCPDSACKUndo", "TcpExtTCPLossUndo")),
            "syn_retransmissions": end_ns_stat.get("TcpExtTCPSynRetrans", 0),
            "bytes_acked": last.get("bytes_acked", 0),
            "bytes_delivered": int(server_end.get("bytes", cum[-1])),
            "duplicate_segments": 0,
            "paws_rejected": getattr(run, "receiver_paws", [0] * len(run.flows))[i],
            # The receiver namespace's ACK decisions (its TcpExt counters).
            **{key: receiver.get(name, 0) for key, name in RECEIVER_TCPEXT},
            # The sender's namespace holds one data connection (iperf3's control
            # connection never reaches HyStart's 16-packet floor).
            "hystart_train": end_ns_stat.get("TcpExtTCPHystartTrainDetect", 0),
            "hystart_train_cwnd": end_ns_stat.get("TcpExtTCPHystartTrainCwnd", 0),
            "hystart_delay": end_ns_stat.get("TcpExtTCPHystartDelayDetect", 0),
            "hystart_delay_cwnd": end_ns_stat.get("TcpExtTCPHystartDelayCwnd", 0),
            "drops": 0,
            "random_drops": 0,
            "ce_marks": 0,
            "start_ns": run.starts[i],
            "completion_ns": completion,
            "delivered_at_window_start": delivered_at(w0) if w1 > w0 else 0,
            "delivered_at_window_end": delivered_at(w1) if w1 > w0 else 0,
            "retrans_at_window_start": start_stat.get("TcpRetransSegs", 0),
            "rtos_at_window_start": start_stat.get("TcpExtTCPTimeouts", 0),
        }
        flows.append(
            {
                "cca": f["cca"],
                "label": f["label"],
                "background": bool(f.get("background", False)),
                "rtt_ns": f["rtt"],
                "start_ns": run.starts[i],
                "stop_ns": f["stop"],
                "size_bytes": f["size"],
                "window_start_ns": w0,
                "window_end_ns": w1,
                "counters": counters,
                "final_cwnd": last.get("cwnd", 0),
                "final_ssthresh": last.get("ssthresh", INFINITE_SSTHRESH),
                "srtt_us": last.get("srtt_us", 0),
                "min_rtt_us": last.get("min_rtt_us", 0),
            }
        )
        s = {k: [] for k in ("t_ns", "cwnd", "ssthresh", "in_flight", "srtt_us", "min_rtt_us", "delivery_rate_bps",
                             "throughput_bps", "delivered_bytes", "retransmissions", "ca_state", "pacing_rate_bps")}
        prev_b, prev_t = 0, 0.0
        for k, smp in enumerate(samples):
            smp = smp or {}
            b = smp.get("bytes_acked", prev_b)
            t = times[k]
            s["t_ns"].append(t_ns[k])
            s["cwnd"].append(smp.get("cwnd", 0))
            s["ssthresh"].append(smp.get("ssthresh", INFINITE_SSTHRESH))
            s["in_flight"].append(max(0, smp.get("unacked", 0) - smp.get("sacked", 0) - smp.get("lost", 0) + smp.get("retrans_out", 0)))
            s["srtt_us"].append(smp.get("srtt_us", 0))
            s["min_rtt_us"].append(smp.get("min_rtt_us", 0))
            s["delivery_rate_bps"].append(smp.get("delivery_rate_bps", 0))
            s["throughput_bps"].append(int((b - prev_b) * 8 / (t - prev_t)) if t > prev_t else 0)
            s["delivered_bytes"].append(b)
            s["retransmissions"].append(smp.get("total_retrans", 0))
            s["ca_state"].append(-1)  # not in ss's output: unknown
            s["pacing_rate_bps"].append(smp.get("pacing_rate_bps", 0))
            prev_b, prev_t = b, t
        # What BBR reported of its model, where the flow's algorithm reports it
        # (None in a sample without it), as the simulator records it.
        for key in ("cc_bw_bps", "cc_min_rtt_us", "cc_pacing_gain", "cc_cwnd_gain"):
            if any(key in (smp or {}) for smp in samples):
                s[key] = [(smp or {}).get(key) for smp in samples]
        series.append(s)

    def ip_bytes(st: dict) -> int:
        return st["bytes"] - 14 * st["packets"]

    q = {k: [] for k in ("t_ns", "backlog_packets", "backlog_bytes", "drops", "bytes_out", "rate_bps")}
    for k, st in enumerate(run.tbf):
        q["t_ns"].append(t_ns[k])
        q["backlog_packets"].append(st["qlen"])
        q["backlog_bytes"].append(max(0, st["backlog"] - 14 * st["qlen"]))
        q["drops"].append(st["drops"])
        q["bytes_out"].append(ip_bytes(st))
        q["rate_bps"].append(e["network"]["bottleneck_rate"])
    fin = run.final_tbf
    red = getattr(run, "final_red", {"marked": 0, "early": 0})
    at_warmup = [b for t, b in zip(q["t_ns"], q["bytes_out"]) if t <= run.warmup]
    out_at_warmup = at_warmup[-1] if at_warmup else 0
    out_at_end = q["bytes_out"][-1] if q["bytes_out"] else 0
    link = {
        "rate_bps": e["network"]["bottleneck_rate"],
        "arrivals": fin["packets"] + fin["drops"] + run.loss_drops,
        "departures": fin["packets"],
        "skbs_out": getattr(run, "bottleneck_skbs", 0),
        "bytes_out": ip_bytes(fin),
        # tbf counts what it drops in skbs (a super-packet once), not in
        # segments: both fields carry that count.
        "drops_queue": fin["drops"] - red["early"],
        "drops_queue_skbs": fin["drops"] - red["early"],
        "drops_random": run.loss_drops,
        "drops_aqm": red["early"],
        "ce_marks": red["marked"],
        "window_bytes_out": out_at_end - out_at_warmup,
    }
    return normalise({
        "backend": backend,
        "flows": flows,
        "flow_series": series,
        "queue_series": q,
        "link": link,
        "duration_ns": run.duration,
        "warmup_ns": run.warmup,
        "sample_interval_ns": interval,
        "seed": e["run"]["seed"],
        "events": 0,
        "data_packets_forwarded": fin["packets"],
        "invariant_violations": [],
        backend: (section or partial(_linux_section, run))(data_starts),
    })


def _linux_section(run: _Run, data_starts: list[float]) -> dict:
    """The linux backend's part of the record."""
    interval = run.interval
    e = run.e
    return {
        "kernel": os.uname().release,
        "delay": run.delay_mode,
        "delay_stats": run.delay_stats,
        # CPU time the whole machine spent, by kind, from the warm-up's end
        # to the run's (seconds over all CPUs; "steal": taken by the hypervisor).
        "cpu_s": ({k: round(run.cpu_at_end[k] - run.cpu_at_warmup[k], 3) for k in run.cpu_at_end}
                  if run.cpu_at_warmup and run.cpu_at_end else None),
        "tbf": {"rate_bps": run.net.tbf_rate_bps, "burst_bytes": run.net.burst_bytes, "limit_bytes": run.net.limit_bytes},
        "offloads": run.net.offloads,
        "rps": run.net.rps,
        "bpf_registered": run.bpf_registered,
        "bpf_hook_repairs": run.bpf_hook_repairs,
        # Per flow, its receiver's nonzero TcpExt counters over the whole run.
        "receiver_counters": getattr(run, "receiver_counters", None),
        # The rate was above MAX_RATE_BPS (linux.force_rate): the CPU may have set it.
        "rate_above_limit": e["network"]["bottleneck_rate"] > MAX_RATE_BPS,
        # When each flow's test began (s since the run's start): iperf3's
        # server starts its clock one RTT before the first data segment leaves
        # the client; a flow with startup = "iperf3" is launched at `start`
        # and its test begins four RTTs later (the control exchange and the
        # data connection's handshake), any other flow's client is launched
        # early so that its test begins at `start` (mapping.launch_lead_ns).
        "data_start_s": data_starts,
        # How the clients were launched: each at its flow's start with its
        # draw of run.start_jitter, released together from waiting shells
        # (records before 2026-11-29 have no such field: forked one after
        # another in flow order, without the jitter).
        "client_launch": "released at the jittered starts",
        "late_samples": sum(1 for k, t in zip(run.sample_ticks, run.sample_times) if t - k * interval / 1e9 > 0.02),
        # Ticks not sampled because sampling fell behind the clock.
        "skipped_samples": int(run.duration // interval) - len(run.sample_ticks),
        "notes": run.notes,
    }
