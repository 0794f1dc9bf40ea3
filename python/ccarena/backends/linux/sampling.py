"""Sampling a running flow's TCP state with `ss -tin` (the kernel's tcp_info):
cwnd, ssthresh, sRTT, min RTT, bytes acked, retransmissions, in-flight,
delivery and pacing rates, and what BBR reports of its model (bandwidth and
min RTT estimates, gains). One `ss` per sender namespace per sample."""

from __future__ import annotations

import re
import subprocess

__all__ = ["parse_ss", "sample_flow", "sample_flows", "busiest_by_port"]

_INT_FIELDS = {
    "cwnd": "cwnd",
    "ssthresh": "ssthresh",
    "bytes_sent": "bytes_sent",
    "bytes_retrans": "bytes_retrans",
    "bytes_acked": "bytes_acked",
    "segs_out": "segs_out",
    "data_segs_out": "data_segs_out",
    "unacked": "unacked",
    "lost": "lost",
    "sacked": "sacked",
    "delivered": "delivered",
    "mss": "mss",
}
_INT_RE = re.compile(r"\b(" + "|".join(_INT_FIELDS) + r"):(\d+)\b")
_RTT_RE = re.compile(r"\brtt:([\d.]+)/([\d.]+)")
_MINRTT_RE = re.compile(r"\bminrtt:([\d.]+)")
_RETRANS_RE = re.compile(r"\bretrans:(\d+)/(\d+)")
_RATE_RE = re.compile(r"\b(delivery_rate|pacing_rate) ([\d.]+)([KMG]?)bps")
_SCALE = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}
# BBR's get_info as ss prints it: bw in bit/s (newer ss: a plain number,
# older: with a unit), mrtt in ms, the gains as decimals of BBR_UNIT 256.
_BBR_RE = re.compile(r"\bbbr:\(bw:([\d.]+)([KMG]?)bps,mrtt:([\d.]+)(?:,pacing_gain:([\d.]+))?(?:,cwnd_gain:([\d.]+))?")


def parse_ss(line: str) -> dict:
    """The fields of one `ss -tinO` line (missing ones are absent)."""
    d: dict = {}
    for k, v in _INT_RE.findall(line):
        d[_INT_FIELDS[k]] = int(v)
    m = _RTT_RE.search(line)
    if m:
        d["srtt_us"] = int(float(m.group(1)) * 1000)
    m = _MINRTT_RE.search(line)
    if m:
        d["min_rtt_us"] = int(float(m.group(1)) * 1000)
    m = _RETRANS_RE.search(line)
    if m:
        d["retrans_out"], d["total_retrans"] = int(m.group(1)), int(m.group(2))
    for name, val, unit in _RATE_RE.findall(line):
        d[name + "_bps"] = int(float(val) * _SCALE[unit])
    m = _BBR_RE.search(line)
    if m:
        d["cc_bw_bps"] = int(float(m.group(1)) * _SCALE[m.group(2)])
        d["cc_min_rtt_us"] = int(round(float(m.group(3)) * 1000))
        if m.group(4) is not None:
            d["cc_pacing_gain"] = int(round(float(m.group(4)) * 256))
        if m.group(5) is not None:
            d["cc_cwnd_gain"] = int(round(float(m.group(5)) * 256))
    return d


_PEERS_RE = re.compile(r"^\s*\d+\s+\d+\s+(\S+):(\d+)\s+(\S+):(\d+)\s")


def busiest_by_port(text: str) -> dict[int, dict]:
    """Per peer port, the tcp_info of the connection that has sent the most,
    from ``ss -tinHO state established`` output: of iperf3's two connections
    to a server port (control and data), the data connection."""
    best: dict[int, dict] = {}
    for line in text.splitlines():
        m = _PEERS_RE.match(line)
        if not m:
            continue
        d = parse_ss(line)
        if "bytes_acked" not in d and "cwnd" not in d:
            continue
        port = int(m.group(4))
        if port not in best or d.get("bytes_sent", 0) > best[port].get("bytes_sent", 0):
            best[port] = d
    return best


def _ss_args(ns: str, port: int) -> list[str]:
    return ["ss", "-N", ns, "-tinHO", "state", "established", "dport", "=", f":{port}"]


def sample_flow(ns: str, port: int) -> dict | None:
    """tcp_info of the data connection to `port` in namespace `ns`: of the
    iperf3 connections (control and data) the one that has sent the most."""
    p = subprocess.run(_ss_args(ns, port), capture_output=True, text=True, timeout=5)
    return busiest_by_port(p.stdout).get(port)


def sample_flows(namespaces: list[str | None], port: int) -> list[dict | None]:
    """`sample_flow` for each namespace (None: not sampled), all `ss`
    processes at once: one after the other, 26 flows took longer than a
    100 ms sample interval (each `ss` is a process start and a netlink dump
    of a few ms), so the samples fell behind their instants."""
    procs = [subprocess.Popen(_ss_args(ns, port), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             if ns is not None else None for ns in namespaces]
    out: list[dict | None] = []
    for p in procs:
        if p is None:
            out.append(None)
            continue
        try:
            text, _ = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            text = ""
        out.append(busiest_by_port(text).get(port))
    return out
