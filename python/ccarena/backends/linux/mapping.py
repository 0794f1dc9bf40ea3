"""How a scenario maps onto kernel settings and tools, shared by the backends
that run the kernel's TCP: the linux backend (namespaces on this machine) and
the testbed backend (remote hosts over SSH). Pure functions: they build
command lines and sysctl values and parse what the tools print; where the
commands run is the backend's business.

* the bottleneck: ``tbf`` with the rate scaled to Ethernet frames and the
  buffer as a byte limit (``tbf_rate_bps``, ``tbf_limit_bytes``, ``tbf_args``);
* per-flow TCP settings: per-host sysctls (``sender_sysctls``,
  ``receiver_sysctls``) and route attributes;
* random loss: an iptables ``statistic`` match (``loss_match``);
* DCTCP's step queue: RED under tbf with min = K, max = K + 1 byte, probability 1
  and ECN (``step_red_args``);
* flows: iperf3 servers and clients (``iperf3_server_args``, ``iperf3_client_args``)
  and when to launch each client (``launch_lead_ns``);
* reading back: ``parse_tbf``, ``parse_netstat``.
"""

from __future__ import annotations

import json
import math

from ...scenario.linux_options import FRAME_BYTES

__all__ = [
    "PORT", "tbf_rate_bps", "tbf_limit_bytes", "tbf_args", "sender_sysctls", "receiver_sysctls", "sender_route_attrs",
    "receiver_route_attrs", "loss_match", "iperf3_cca", "iperf3_server_args", "iperf3_client_args", "parse_tbf", "parse_netstat",
    "EMPTY_TBF", "ECN_CCAS", "step_red_args", "parse_red", "launch_lead_ns",
]

#: iperf3's default port: the linux backend's servers listen on it (one per
#: namespace); the testbed backend gives flow i the port PORT + i.
PORT = 5201

EMPTY_TBF = {"bytes": 0, "packets": 0, "drops": 0, "backlog": 0, "qlen": 0}

#: Algorithms with Linux's TCP_CONG_NEEDS_ECN (the engine's `needs_ecn`): they
#: negotiate ECN themselves, and their receiving socket must run them too, for
#: DCTCP's CE-state ACKs; the receiver's namespace makes them its default, so
#: that iperf3's listener (and the connection it accepts) runs them.
ECN_CCAS = frozenset({"dctcp"})


def tbf_rate_bps(rate_bps: int) -> int:
    """tbf counts Ethernet frames (IP packet + 14 bytes): the rate scaled so
    that the IP-layer rate is the scenario's rate."""
    return rate_bps * FRAME_BYTES // 1500


def tbf_limit_bytes(buffer: dict) -> int:
    """tbf's limit for the engine's buffer: packets as full frames; a byte
    buffer as the same number of full-size packets the simulator holds."""
    if "packets" in buffer:
        return buffer["packets"] * FRAME_BYTES
    return buffer["bytes"] * FRAME_BYTES // 1500


def tbf_args(rate_bps: int, burst_bytes: int, limit_bytes: int) -> str:
    """The tbf qdisc's arguments (after ``tc qdisc add dev DEV root``)."""
    return f"tbf rate {tbf_rate_bps(rate_bps)}bit burst {burst_bytes} limit {limit_bytes}"


def _buffers(tcp: dict) -> dict[str, str]:
    snd = 2 * tcp.get("sndbuf", 64 << 20)
    rcv = 2 * tcp.get("rcvbuf", 64 << 20)
    return {"net.ipv4.tcp_wmem": f"4096 16384 {snd}", "net.ipv4.tcp_rmem": f"4096 131072 {rcv}"}


def sender_sysctls(flow: dict) -> dict[str, str]:
    """The sysctls of the host (or namespace) that sends `flow` (an engine flow)."""
    tcp = flow.get("tcp", {})
    sack = tcp.get("sack", True) and flow["cca"] != "newreno"
    return {
        **_buffers(tcp),
        "net.ipv4.tcp_sack": str(int(sack)),
        "net.ipv4.tcp_frto": "2" if tcp.get("frto", True) else "0",
        "net.ipv4.tcp_early_retrans": "3" if tcp.get("tlp", True) else "0",
        "net.ipv4.tcp_ecn": str(int(tcp.get("ecn", False))),
        "net.ipv4.tcp_slow_start_after_idle": str(int(tcp.get("slow_start_after_idle", True))),
        "net.ipv4.tcp_no_metrics_save": "1",
        # iperf3 sets -C only after connecting, so the data socket first runs
        # the host's default algorithm, whose init has run by then: a default
        # of bbr (as on some machines) leaves every socket paced (BBR sets
        # sk_pacing_status and nothing clears it) whatever -C says. Reno turns
        # on nothing, and is the same value for every flow a host sends.
        "net.ipv4.tcp_congestion_control": "reno",
    }


def receiver_sysctls(flow: dict) -> dict[str, str]:
    """The sysctls of the host (or namespace) that receives `flow`."""
    tcp = flow.get("tcp", {})
    out = {**_buffers(tcp), "net.ipv4.tcp_ecn": str(int(tcp.get("ecn", False)))}
    if flow["cca"] in ECN_CCAS:
        out["net.ipv4.tcp_congestion_control"] = iperf3_cca(flow["cca"])
    return out


def step_red_args(qdisc: dict, limit_bytes: int, rate_bps: int) -> str:
    """The step queue as ``tc qdisc ... red`` arguments (the child of tbf):
    RED marks ECT packets with probability (avg - min) / (max - min) x 1
    between min and max and all of them above, so min = K and max = K + 1
    byte make a step at K. tc's burst is the smallest it accepts for that
    min (ceil(K / avpkt)), which gives the fastest average tc allows (weight
    1/2 or 1/4): the instantaneous queue the simulator uses, nearly. A K in
    packets counts full frames. Unlike the simulator's step queue, RED drops
    packets that are not ECN-capable above K."""
    t = qdisc["threshold"]
    k = t["packets"] * FRAME_BYTES if "packets" in t else t["bytes"]
    burst = max(1, -(-k // FRAME_BYTES))
    return (f"red limit {limit_bytes} min {k} max {k + 1} avpkt {FRAME_BYTES} burst {burst} "
            f"probability 1.0 bandwidth {tbf_rate_bps(rate_bps)}bit ecn")


def sender_route_attrs(tcp: dict) -> str:
    """Route attributes of the sender's route (initial cwnd, minimum RTO, advertised MSS)."""
    attrs = ""
    if "initial_cwnd" in tcp:
        attrs += f" initcwnd {tcp['initial_cwnd']}"
    if "rto_min_us" in tcp:
        attrs += f" rto_min {max(1, tcp['rto_min_us'] // 1000)}ms"
    if "mss" in tcp and tcp["mss"] != 1448:
        attrs += f" advmss {tcp['mss'] + 12}"
    return attrs


def receiver_route_attrs(tcp: dict) -> str:
    """Route attributes of the receiver's route (quick ACKs, advertised MSS)."""
    attrs = ""
    if not tcp.get("delayed_ack", True):
        attrs += " quickack 1"
    if "mss" in tcp and tcp["mss"] != 1448:
        attrs += f" advmss {tcp['mss'] + 12}"
    return attrs


def loss_match(loss: dict) -> str | None:
    """The iptables match that drops the scenario's random loss (None: no loss)."""
    if loss["model"] == "bernoulli" and loss["p"] > 0:
        return f"-p tcp -m statistic --mode random --probability {loss['p']:.9f} -j DROP"
    if loss["model"] == "periodic" and loss["p"] > 0:
        return f"-p tcp -m statistic --mode nth --every {max(1, round(1 / loss['p']))} --packet 0 -j DROP"
    return None


def iperf3_cca(cca: str) -> str:
    """The kernel's name of an algorithm: newreno is reno with SACK off (a sysctl)."""
    return "reno" if cca == "newreno" else cca


def iperf3_server_args(port: int) -> list[str]:
    """One test, 100 ms intervals, JSON: what the record reads (receiver-side bytes)."""
    return ["iperf3", "-s", "-1", "-p", str(port), "-i", "0.1", "--json"]


def iperf3_client_args(flow: dict, address: str, port: int, duration_ns: int) -> list[str]:
    """The iperf3 client of `flow`: its algorithm, and its length (``-t`` whole
    seconds up to its stop or the run's end, or ``-n`` its size)."""
    end = duration_ns if flow["stop"] is None else min(duration_ns, flow["stop"])
    args = ["iperf3", "-c", address, "-p", str(port), "-C", iperf3_cca(flow["cca"]), "-i", "0.1", "--json"]
    if flow["size"] is not None:
        args += ["-n", str(flow["size"])]
    else:
        args += ["-t", str(max(1, math.ceil((end - flow["start"]) / 1e9)))]
    if flow["tcp"].get("pacing"):
        args += ["--fq-rate", "100G"]  # SO_MAX_PACING_RATE: turns on the kernel's internal TCP pacing
    return args


#: iperf3 3.x's start-up, measured on this project's kernel (docs/fidelity.md,
#: "iperf3's start-up"): the first data segment leaves five round trips after
#: the launch (the control connection's handshake, cookie and parameters, the
#: data connection's handshake, TEST_START), plus the client's launch (5-11 ms
#: from exec to the control SYN) and its processing of each message (a few ms
#: per exchange): 2-22 ms in all, ~15 ms typical.
IPERF3_STARTUP_RTTS = 5
IPERF3_STARTUP_EXTRA_NS = 15_000_000


def launch_lead_ns(flow: dict) -> int:
    """How long before the flow's `start` its iperf3 client is launched.

    A flow with ``startup = "iperf3"`` is an iperf3 test launched at `start`
    (the simulator runs iperf3's start-up after it too): no lead. Any other
    flow opens its data connection at `start` in the simulator, and sends its
    first data segment one round trip later; its client is launched so that
    the kernel's first data segment leaves then too: iperf3's start-up less
    that round trip (four RTTs at the flow's propagation RTT, plus the
    client's own time). Flows meant to start together so begin their data
    within a few milliseconds of each other instead of 5 RTTs apart; the
    record's measured starts (``data_start_s``) say how close each came."""
    if flow.get("startup", "immediate") == "iperf3":
        return 0
    rtt = int(flow["rtt"]) + int(flow.get("data_delay", 0) or 0)
    return (IPERF3_STARTUP_RTTS - 1) * rtt + IPERF3_STARTUP_EXTRA_NS


def parse_tbf(text: str) -> dict:
    """The tbf counters in ``tc -s -j qdisc show`` output: bytes and packets
    sent, drops, backlog (bytes, packets); zeros when there is no tbf."""
    try:
        qdiscs = json.loads(text or "[]")
    except ValueError:
        return dict(EMPTY_TBF)
    for q in qdiscs:
        if q.get("kind") == "tbf":
            return {k: q.get(k, 0) for k in EMPTY_TBF}
    return dict(EMPTY_TBF)


def parse_red(text: str) -> dict:
    """The red qdisc's marks and early drops in ``tc -s -j qdisc show``
    output (zeros when there is none)."""
    try:
        qdiscs = json.loads(text or "[]")
    except ValueError:
        qdiscs = []
    for q in qdiscs:
        if q.get("kind") == "red":
            return {"marked": q.get("marked", 0), "early": q.get("early", 0)}
    return {"marked": 0, "early": 0}


def parse_netstat(text: str) -> dict[str, int]:
    """/proc/net/snmp and /proc/net/netstat as one dict (``TcpRetransSegs``, ``TcpExtTCPTimeouts``, ...)."""
    out: dict[str, int] = {}
    lines = text.splitlines()
    for a, b in zip(lines[::2], lines[1::2]):
        ka, kb = a.split(), b.split()
        if not ka or not kb or ka[0] != kb[0]:
            continue
        prefix = ka[0].rstrip(":")
        for k, v in zip(ka[1:], kb[1:]):
            try:
                out[prefix + k] = int(v)
            except ValueError:
                pass
    return out
