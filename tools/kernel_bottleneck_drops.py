"""Which flow a Linux router's tbf turns away at each overflow, from tracepoints alone.

Runs one case of a `ccarena validate` suite on the linux backend while a
BPF program (``tools/bpf/bottleneck_drops.bpf.c``, built by
``tools/bpf_tracer.py`` with clang, bpftool and libbpf-dev) records every
skb the bottleneck's tbf takes and every skb it drops, with its flow, its
bytes and segments and the queue's backlog. No capture: at 1 Gbit/s a
capture of the router loads this 2-core machine enough to change the
runs (``tools/kernel_host_timing.py`` captures, and is the tool for lower
rates and for timing).

Reports, after the warm-up:

* per flow: the skbs and segments the queue took and dropped, and the
  segments per skb of each;
* the overflows ("episodes": drops less than ``--episode-gap`` apart,
  one shortest base RTT by default): how many, the share that took skbs of
  each flow and of every flow, and for each flow its share of the dropped
  skbs against its share of the skbs that reached the queue over the
  episodes (taken plus dropped, from one gap before each episode's first
  drop to its last): a flow turned away more often than it arrives is
  losing on its phase, not on its traffic;
* the first episodes one by one (time, the skbs each flow lost), which
  show a lock: the same flow losing episode after episode.

Usage (root)::

    python tools/kernel_bottleneck_drops.py --suite paper-rates --case cubic-1000M-20v20ms-10ms --seed 2

Prints JSON; ``--out DIR`` keeps the run's result and the raw records. The
numbers and command lines are recorded in docs/fidelity.md.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bpf_tracer  # noqa: E402  (tools/bpf_tracer.py)

ENQUEUE, DROP = 0, 1
# Linux's enum skb_drop_reason: SKB_DROP_REASON_QDISC_DROP, _QDISC_OVERLIMIT
# and _QDISC_CONGESTED (include/net/dropreason-core.h as of 6.18; the
# program records only these, and the analysis keeps only these).
QDISC_REASONS = (64, 65, 66)
# An skb this long or shorter carries no payload (a SYN or a pure ACK: link,
# IPv4 and TCP headers with options).
HEADERS_ONLY = 128
# The linux backend's iperf3 servers listen on ports from 5201.
SERVER_PORTS = range(5201, 5301)

# Mirrors `struct record` in bpf/bottleneck_drops.bpf.c (56 bytes).
_FIELDS = [
    ("t_ns", "<u8"), ("kind", "<u4"), ("reason", "<u4"), ("saddr", "<u4"), ("daddr", "<u4"),
    ("sport", "<u2"), ("dport", "<u2"), ("len", "<u4"), ("segs", "<u4"), ("backlog", "<u4"), ("qlen", "<u4"),
    ("ifindex", "<u4"), ("netns", "<u4"), ("pad", "<u4"),
]
RECORD = np.dtype(_FIELDS)


def address(field: int) -> str:
    """A record's IPv4 address (stored in network byte order) as text."""
    return str(ipaddress.IPv4Address(int(field).to_bytes(4, "little")))


def data_records(recs: np.ndarray) -> tuple[np.ndarray, dict[tuple[int, int], str]]:
    """The records of each receiver's data connection, in time order, and
    each connection's (daddr, sport) -> receiver address: per receiver the
    connection with the most bytes (the others are iperf3's control
    connections), skbs with a payload only, drops only for the qdisc's
    reasons."""
    recs = recs[np.isin(recs["dport"], SERVER_PORTS) & (recs["len"] > HEADERS_ONLY)]
    recs = recs[(recs["kind"] == ENQUEUE) | np.isin(recs["reason"], QDISC_REASONS)]
    conns: dict[tuple[int, int], str] = {}
    for daddr in np.unique(recs["daddr"]):
        mine = recs[recs["daddr"] == daddr]
        sports, inverse = np.unique(mine["sport"], return_inverse=True)
        volume = np.bincount(inverse, weights=mine["len"].astype(float))
        conns[(int(daddr), int(sports[int(np.argmax(volume))]))] = address(daddr)
    keep = np.zeros(len(recs), dtype=bool)
    for daddr, sport in conns:
        keep |= (recs["daddr"] == daddr) & (recs["sport"] == sport)
    recs = recs[keep]
    return recs[np.argsort(recs["t_ns"], kind="stable")], conns


def report(recs: np.ndarray, flow_of: dict[str, int], warmup_ns: int, episode_gap_ns: int, listed: int = 12) -> dict:
    """The report for raw records; `flow_of` maps a receiver's address to
    its flow's index."""
    recs, conns = data_records(recs)
    if len(recs) == 0:
        return {}
    t0 = int(recs["t_ns"][0])
    recs = recs[recs["t_ns"] >= t0 + warmup_ns]
    flow = np.array([flow_of.get(conns.get((int(d), int(s)), ""), -1) for d, s in zip(recs["daddr"], recs["sport"])])
    flows = sorted(set(flow_of.values()))
    drops = recs["kind"] == DROP
    per_flow = {}
    for f in flows:
        took = (flow == f) & ~drops
        lost = (flow == f) & drops
        per_flow[str(f)] = {
            "skbs_taken": int(took.sum()), "segments_taken": int(recs["segs"][took].sum()),
            "skbs_dropped": int(lost.sum()), "segments_dropped": int(recs["segs"][lost].sum()),
            "segments_per_skb_taken": round(float(recs["segs"][took].mean()), 1) if took.any() else None,
            "segments_per_skb_dropped": round(float(recs["segs"][lost].mean()), 1) if lost.any() else None,
        }
    drop_idx = np.flatnonzero(drops)
    episodes: list[list[int]] = []
    for k in drop_idx:
        if episodes and int(recs["t_ns"][k]) - int(recs["t_ns"][episodes[-1][-1]]) <= episode_gap_ns:
            episodes[-1].append(int(k))
        else:
            episodes.append([int(k)])
    hit_counts = {str(f): 0 for f in flows}
    hit_all = 0
    dropped_by = np.zeros(len(flows))
    arrived_by = np.zeros(len(flows))
    listing = []
    for ep in episodes:
        first, last = int(recs["t_ns"][ep[0]]), int(recs["t_ns"][ep[-1]])
        lost = {f: int((flow[ep] == f).sum()) for f in flows}
        for f in flows:
            hit_counts[str(f)] += lost[f] > 0
        hit_all += all(lost[f] > 0 for f in flows)
        window = (recs["t_ns"] >= first - episode_gap_ns) & (recs["t_ns"] <= last)
        for j, f in enumerate(flows):
            dropped_by[j] += lost[f]
            arrived_by[j] += int((window & (flow == f)).sum())
        if len(listing) < listed:
            listing.append({"t_s": round((first - t0) / 1e9, 3), "skbs_dropped": {str(f): lost[f] for f in flows}})
    n = len(episodes)
    return {
        "flows": per_flow,
        "episodes": n,
        "episodes_that_took_each_flow": {f: round(c / n, 3) for f, c in hit_counts.items()} if n else {},
        "episodes_that_took_every_flow": round(hit_all / n, 3) if n else None,
        "share_of_dropped_skbs": {str(f): round(float(dropped_by[j] / dropped_by.sum()), 3)
                                  for j, f in enumerate(flows)} if n else {},
        "share_of_arriving_skbs_over_the_episodes": {str(f): round(float(arrived_by[j] / arrived_by.sum()), 3)
                                                     for j, f in enumerate(flows)} if n else {},
        "first_episodes": listing,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="paper-rates")
    ap.add_argument("--case", default="cubic-1000M-20v20ms-10ms")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration", type=float, default=None, help="seconds (default: the suite's)")
    ap.add_argument("--warmup", type=float, default=0.0, help="seconds left out at the start")
    ap.add_argument("--episode-gap", type=float, default=None, metavar="MS",
                    help="drops this close belong to one overflow (default: the shortest base RTT)")
    ap.add_argument("--out", type=Path, default=None, metavar="DIR", help="keep the run's result and the records")
    ap.add_argument("--from", dest="kept", type=Path, default=None, metavar="DIR",
                    help="analyse the records an earlier --out kept in DIR instead of running")
    args = ap.parse_args()
    from ccarena.backends.linux import run_linux
    from ccarena.backends.linux.topology import receiver_addr
    from ccarena.experiments.crosscheck import VALIDATION_SETS, validation_cases
    from ccarena.scenario.units import parse_duration

    if args.suite not in VALIDATION_SETS:
        raise SystemExit(f"--suite: {args.suite!r} is not a validate suite; the suites: {', '.join(VALIDATION_SETS)}")
    if args.kept is not None and not (args.kept / "bottleneck_drops.records").is_file():
        raise SystemExit(f"--from: {args.kept} holds no bottleneck_drops.records (kept by --out)")
    cases, _ = validation_cases(args.suite, args.duration or 30)
    docs = {cid: doc for cid, doc in cases}
    if args.case not in docs:
        raise SystemExit(f"--case: {args.case!r} is not in suite {args.suite!r}; its cases: {', '.join(docs)}")
    doc = json.loads(json.dumps(docs[args.case]))
    doc["run"]["seed"] = args.seed
    rtts = [parse_duration(f["rtt"]) for f in doc["flows"]]
    gap_ns = int(args.episode_gap * 1e6) if args.episode_gap is not None else int(min(rtts))
    n_flows = sum(int(f.get("count", 1)) for f in doc["flows"])
    if args.kept is not None:
        recs = np.fromfile(args.kept / "bottleneck_drops.records", dtype=RECORD)
        dropped, ratio = None, json.loads((args.kept / "result.json").read_text()).get("throughput_ratio")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            out, dropped, result = bpf_tracer.traced("bottleneck_drops", Path(tmp), lambda: run_linux(doc))
            recs = np.fromfile(out, dtype=RECORD)
            if args.out is not None:
                result.save(args.out)
                shutil.copy(out, args.out / "bottleneck_drops.records")
        ratio = result.summary["throughput_ratio"]
    summary = {
        "case": args.case, "seed": args.seed, "throughput_ratio": round(float(ratio), 3) if ratio is not None else None,
        **report(recs, {receiver_addr(i): i for i in range(n_flows)}, int(args.warmup * 1e9), gap_ns),
        "records": int(len(recs)), "records_dropped": dropped,
    }
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
