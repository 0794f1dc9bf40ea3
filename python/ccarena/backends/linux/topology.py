"""The dumbbell in network namespaces.

::

    s0 ──┐                                   ┌── r0      s_i: sender i     (iperf3 client)
    s1 ──┤ L ══ tbf (rate, burst, limit) ══> R ├── r1      r_i: receiver i   (iperf3 server)
    ...──┘      "btl"                         └── ...     L, R: routers

One namespace per sender and per receiver and one per router, joined by veth
pairs (created directly inside their namespaces, never in the host's). The
bottleneck is a tbf qdisc on L's interface towards R. Each flow's two-way
propagation delay is added on its ACK path, in R: by netem on the receiver's
interface where the kernel has netem, otherwise by the project's NFQUEUE delay
program (linux/delay.c) with one queue per flow. Random loss (bernoulli or
periodic) is an iptables `statistic` rule on L's forwarding path into the
bottleneck. Addresses come from 198.18.0.0/15 (RFC 2544's benchmarking
range) and exist only inside these namespaces:

    s_i 198.18.i.1/24 ─ L 198.18.i.254     L 198.18.255.1/24 ─ R 198.18.255.2
    r_i 198.19.i.1/24 ─ R 198.19.i.254

Per-flow TCP settings are per-namespace sysctls and route attributes of s_i and
r_i (see docs/linux-backend.md for the mapping).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass, field

from .cleanup import remove_namespace
from .host import LinuxSetupError, one_line, sh
from .mapping import (
    PORT, loss_match, parse_netstat, parse_red, parse_tbf, receiver_route_attrs, receiver_sysctls, sender_route_attrs, sender_sysctls,
    step_red_args, tbf_args, tbf_rate_bps,
)

__all__ = ["Dumbbell", "MAX_FLOWS", "PORT", "receiver_addr", "parse_netstat"]

MAX_FLOWS = 64
#: The delay program's queue for flow i's data leg (flow i's ACKs use queue i).
DATA_QUEUE_BASE = 1000


def has_data_leg(flow: dict) -> bool:
    """Whether the flow's data direction is delayed too (data_delay or jitter)."""
    return bool(flow.get("jitter")) or bool(flow.get("data_delay"))


def ack_leg_ns(flow: dict) -> int:
    """The delay on the flow's ACK path: its whole RTT, or half of it when the
    data leg carries the other half (the simulator splits the RTT evenly)."""
    return flow["rtt"] // 2 if has_data_leg(flow) else flow["rtt"]


def data_leg(flow: dict) -> tuple[int, int, str, bool]:
    """The data leg's delay as netem's `delay D J`: (D ns, J ns, distribution,
    reorder), D being half the RTT plus `data_delay`."""
    jitter = flow.get("jitter") or {}
    d = flow["rtt"] - flow["rtt"] // 2 + int(flow.get("data_delay") or 0)
    return d, int(jitter.get("jitter", 0)), jitter.get("distribution", "uniform"), bool(jitter.get("reorder", True))


def leg_seed(run_seed: int, flow_index: int) -> int:
    """The delay program's random stream for one flow's data leg: distinct
    per flow and per run seed, so repetitions differ and a seed repeats."""
    return (run_seed * 1_000_003 + flow_index * 7919 + 1) % (1 << 63)


def receiver_addr(i: int) -> str:
    return f"198.19.{i}.1"


def _in_ns(ns: str, script: list[str]) -> None:
    """Runs shell lines inside namespace `ns` in one process. On failure the
    error names the line that failed (traced by `sh -x`), not the whole script."""
    if not script:
        return
    p = sh("ip", "netns", "exec", ns, "sh", "-exc", "\n".join(script), check=False)
    if p.returncode != 0:
        traced = [line[2:] for line in p.stderr.splitlines() if line.startswith("+ ")]
        errors = [line for line in p.stderr.splitlines() if line.strip() and not line.startswith("+ ")]
        failed = one_line(traced[-1], 160) if traced else "the set-up script"
        raise LinuxSetupError(f"setting up namespace {ns}: `{failed}` failed: {one_line(chr(10).join(errors)) or f'status {p.returncode}'}")


@dataclass
class Dumbbell:
    tag: str
    flows: list[dict]          # engine flows (rtt, tcp, cca ...)
    rate_bps: int
    limit_bytes: int           # tbf limit
    burst_bytes: int
    offloads: bool = False
    rps: bool = True
    loss: dict = field(default_factory=lambda: {"model": "bernoulli", "p": 0.0})
    delay_mode: str = "nfqueue"  # or "netem"
    seed: int = 1                # the run's seed: the data legs' jitter streams
    qdisc: dict = field(default_factory=lambda: {"kind": "drop_tail"})
    created: list[str] = field(default_factory=list)

    # ---- names ----
    def ns(self, role: str) -> str:
        return f"ccarena-{self.tag}-{role}"

    @property
    def left(self) -> str:
        return self.ns("L")

    @property
    def right(self) -> str:
        return self.ns("R")

    def sender(self, i: int) -> str:
        return self.ns(f"s{i}")

    def receiver(self, i: int) -> str:
        return self.ns(f"r{i}")

    @property
    def tbf_rate_bps(self) -> int:
        """tbf counts Ethernet frames (IP packet + 14 bytes): scaled so that
        the IP-layer rate is the scenario's rate."""
        return tbf_rate_bps(self.rate_bps)

    # ---- build ----
    def build(self) -> None:
        n = len(self.flows)
        names = [self.left, self.right] + [self.sender(i) for i in range(n)] + [self.receiver(i) for i in range(n)]
        for ns in names:
            sh("ip", "netns", "add", ns)
            self.created.append(ns)
        links = [f"link add btl netns {self.left} type veth peer name btl netns {self.right}"]
        for i in range(n):
            links.append(f"link add s{i} netns {self.left} type veth peer name eth0 netns {self.sender(i)}")
            links.append(f"link add r{i} netns {self.right} type veth peer name eth0 netns {self.receiver(i)}")
        sh("ip", "-batch", "-", input="\n".join(links) + "\n")

        cpus = os.cpu_count() or 1
        rps_mask = format((1 << cpus) - 1, "x")

        def common(devs: list[str]) -> list[str]:
            lines = ["ip link set lo up"]
            for d in devs:
                lines.append(f"ip link set {d} up")
                if not self.offloads:
                    lines.append(f"ethtool -K {d} tso off gso off gro off >/dev/null 2>&1 || true")
                if self.rps:
                    lines.append(f"for q in /sys/class/net/{d}/queues/rx-*; do echo {rps_mask} > $q/rps_cpus; done")
            return lines

        # Routers.
        left = common(["btl"] + [f"s{i}" for i in range(n)]) + [
            "sysctl -qw net.ipv4.ip_forward=1",
            "ip addr add 198.18.255.1/24 dev btl",
            "ip route add 198.19.0.0/16 via 198.18.255.2",
        ]
        right = common(["btl"] + [f"r{i}" for i in range(n)]) + [
            "sysctl -qw net.ipv4.ip_forward=1",
            "ip addr add 198.18.255.2/24 dev btl",
            "ip route add 198.18.0.0/16 via 198.18.255.1",
        ]
        for i in range(n):
            left.append(f"ip addr add 198.18.{i}.254/24 dev s{i}")
            right.append(f"ip addr add 198.19.{i}.254/24 dev r{i}")
        left.append(f"tc qdisc add dev btl root handle 1: {tbf_args(self.rate_bps, self.burst_bytes, self.limit_bytes)}")
        if self.qdisc["kind"] == "step":
            # tbf's child replaces its bfifo; tbf still counts every drop.
            left.append(f"tc qdisc add dev btl parent 1:1 handle 10: {step_red_args(self.qdisc, self.limit_bytes, self.rate_bps)}")
        left += self._loss_rules()
        _in_ns(self.left, left)
        _in_ns(self.right, right)

        # Hosts.
        for i, f in enumerate(self.flows):
            tcp = f.get("tcp", {})
            _in_ns(self.sender(i), common(["eth0"]) + [f"ip addr add 198.18.{i}.1/24 dev eth0"] + self._sender_tcp(i, f, tcp))
            _in_ns(self.receiver(i), common(["eth0"]) + [f"ip addr add 198.19.{i}.1/24 dev eth0"] + self._receiver_tcp(i, f, tcp))

    def _loss_rules(self) -> list[str]:
        match = loss_match(self.loss)
        return [f"iptables-legacy -A FORWARD -o btl {match}"] if match else []

    @staticmethod
    def _sysctls(values: dict[str, str]) -> list[str]:
        return [f"sysctl -qw {k}='{v}'" if " " in v else f"sysctl -qw {k}={v}" for k, v in values.items()]

    def _sender_tcp(self, i: int, f: dict, tcp: dict) -> list[str]:
        return self._sysctls(sender_sysctls(f)) + [f"ip route add default via 198.18.{i}.254 dev eth0{sender_route_attrs(tcp)}"]

    def _receiver_tcp(self, i: int, f: dict, tcp: dict) -> list[str]:
        return self._sysctls(receiver_sysctls(f)) + [f"ip route add default via 198.19.{i}.254 dev eth0{receiver_route_attrs(tcp)}"]

    # ---- delay ----
    def delay_args(self) -> list[str]:
        """Arguments of the delay program: queue i holds flow i's ACKs for its
        RTT (half of it with a data leg); queue DATA_QUEUE_BASE + i delays
        its data leg."""
        args = [f"{i}:{ack_leg_ns(f) // 1000}" for i, f in enumerate(self.flows)]
        for i, f in enumerate(self.flows):
            if has_data_leg(f):
                d, j, dist, reorder = data_leg(f)
                args.append(f"{DATA_QUEUE_BASE + i}:{d // 1000}:{j // 1000}:{dist[0]}:{int(reorder)}:{leg_seed(self.seed, i)}")
        return args

    def netem_commands(self) -> list[list[str]]:
        """The `tc` commands of the delay where the kernel has netem: each
        flow's ACK leg on its receiver's interface, its data leg (if any) on
        R's interface towards the receiver."""
        cmds = []
        for i, f in enumerate(self.flows):
            cmds.append(["tc", "-n", self.receiver(i), "qdisc", "add", "dev", "eth0", "root", "netem",
                         "delay", f"{ack_leg_ns(f) // 1000}us", "limit", "1000000"])
            if has_data_leg(f):
                d, j, dist, _ = data_leg(f)
                delay = ["delay", f"{d // 1000}us"] + ([f"{j // 1000}us"] if j else [])
                if j and dist == "normal":
                    delay += ["distribution", "normal"]
                cmds.append(["tc", "-n", self.right, "qdisc", "add", "dev", f"r{i}", "root", "netem", *delay, "limit", "1000000"])
        return cmds

    def nfqueue_rules(self) -> list[str]:
        """R's iptables rules that hand each flow's ACKs (from r_i) and, with
        a data leg, its data (towards r_i) to the delay program."""
        rules = [f"iptables-legacy -A FORWARD -i r{i} -j NFQUEUE --queue-num {i}" for i in range(len(self.flows))]
        rules += [f"iptables-legacy -A FORWARD -o r{i} -j NFQUEUE --queue-num {DATA_QUEUE_BASE + i}"
                  for i, f in enumerate(self.flows) if has_data_leg(f)]
        return rules

    def add_delay_rules(self) -> None:
        if self.delay_mode == "netem":
            for cmd in self.netem_commands():
                sh(*cmd)
            return
        _in_ns(self.right, self.nfqueue_rules())

    # ---- measurement helpers ----
    def tbf_stats(self) -> dict:
        """tbf counters: bytes and packets sent, drops, backlog (bytes, packets)."""
        p = subprocess.run(["tc", "-n", self.left, "-s", "-j", "qdisc", "show", "dev", "btl"], capture_output=True, text=True, timeout=10)
        return parse_tbf(p.stdout)

    def red_stats(self) -> dict:
        """The step queue's RED counters: CE marks and early drops."""
        p = subprocess.run(["tc", "-n", self.left, "-s", "-j", "qdisc", "show", "dev", "btl"], capture_output=True, text=True, timeout=10)
        return parse_red(p.stdout)

    def loss_drops(self) -> int:
        if not self._loss_rules():
            return 0
        p = subprocess.run(["ip", "netns", "exec", self.left, "iptables-legacy", "-L", "FORWARD", "-v", "-x", "-n"], capture_output=True, text=True)
        for line in p.stdout.splitlines():
            if "statistic" in line and "DROP" in line:
                return int(line.split()[0])
        return 0

    def tx_packets(self, ns: str, dev: str = "eth0") -> int:
        """Packets the namespace's interface was handed (a GSO skb counts once)."""
        p = subprocess.run(
            ["ip", "netns", "exec", ns, "cat", f"/sys/class/net/{dev}/statistics/tx_packets"], capture_output=True, text=True, timeout=10
        )
        try:
            return int(p.stdout.strip())
        except ValueError:
            return 0

    def netstat(self, ns: str) -> dict[str, int]:
        """The namespace's TCP counters (/proc/net/snmp and netstat), e.g. TcpExtTCPTimeouts."""
        p = subprocess.run(["ip", "netns", "exec", ns, "cat", "/proc/net/snmp", "/proc/net/netstat"], capture_output=True, text=True, timeout=10)
        return parse_netstat(p.stdout)

    # ---- teardown ----
    def teardown(self) -> None:
        for ns in reversed(self.created):
            remove_namespace(ns)
        self.created.clear()


def quote(args: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in args)
