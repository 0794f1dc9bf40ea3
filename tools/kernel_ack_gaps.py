"""Measure, without packet captures, how the kernel's ACK clock stalls.

Runs one case of a validation suite on the linux backend while perf records
three tracepoints only (a few thousand events a second, where tcpdump's
captures load the two cores enough to change how the flows interact,
docs/fidelity.md): ``tcp:tcp_probe`` for every ACK the senders receive,
``skb:kfree_skb`` for the qdisc's drops and ``tcp:tcp_retransmit_skb``.
Reports after the warm-up:

* the pair's *common* ACK gaps: intervals in which neither sender received
  any ACK (the union of both flows' ACK arrivals), per threshold, how often
  and how long; a gap of several milliseconds in both flows at once is a
  stall of the loop that both share (the delay program is one process for
  every flow's ACK leg, the routers and receivers share two cores);
* each flow's ACK inter-arrival percentiles;
* the overflow episodes (qdisc drops closer than 50 ms) and how many flows
  retransmitted after each.

The common gaps are an upper bound on the loop's shared stalls, not a
measurement of them: the ACK clock's own structure (skb trains a round
trip apart while the queue is empty, a flow with a small share) leaves
gaps too, and they vary from run to run with the flows' state (8 to 63
gaps over 2 ms a second in runs of one case). Do not fit
`network.return_stalls` to them as they are.

Usage (root; perf installed)::

    python tools/kernel_ack_gaps.py --case reno-400M-20v20ms-10ms --seed 6

Prints JSON; the numbers and commands are recorded in docs/fidelity.md.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
import time
from pathlib import Path

#: The qdisc's drop reasons (enum skb_drop_reason: QDISC_DROP, QDISC_OVERLIMIT).
QDISC_DROP_REASONS = (64, 65)


def parse(script: str) -> tuple[dict[int, list[float]], list[float], list[tuple[float, int]]]:
    """ACK arrival times per sender port, drop times, (time, port) of retransmissions."""
    acks: dict[int, list[float]] = {}
    drops: list[float] = []
    rtx: list[tuple[float, int]] = []
    for line in script.splitlines():
        m = re.match(r"\s*(\d+\.\d+):\s+(\S+):(.*)", line)
        if not m:
            continue
        t, event, rest = float(m.group(1)), m.group(2), m.group(3)
        if event == "tcp:tcp_probe":
            port = re.search(r"src=[0-9.]+:(\d+)", rest)
            if port:
                acks.setdefault(int(port.group(1)), []).append(t)
        elif event == "skb:kfree_skb":
            drops.append(t)
        elif event == "tcp:tcp_retransmit_skb":
            port = re.search(r"sport=(\d+)", rest)
            if port:
                rtx.append((t, int(port.group(1))))
    return acks, sorted(drops), sorted(rtx)


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q / 100 * len(s)))]


def common_gaps(acks: dict[int, list[float]], after: float) -> tuple[list[float], float]:
    """Gaps (s) between consecutive ACKs of either of the two busiest
    senders after `after`, and the time they span."""
    ports = sorted(acks, key=lambda p: -len(acks[p]))[:2]
    times = sorted(t for p in ports for t in acks[p] if t > after)
    return [b - a for a, b in zip(times, times[1:])], (times[-1] - times[0]) if len(times) > 1 else 0.0


def analyse(script: str, warmup_s: float) -> dict:
    acks, drops, rtx = parse(script)
    if not acks:
        return {"error": "no ACKs recorded"}
    start = min(min(v) for v in acks.values())
    after = start + warmup_s
    gaps, span = common_gaps(acks, after)
    out: dict = {"common_gaps": {}}
    for ms in (1, 2, 3, 5):
        long = [g for g in gaps if g > ms / 1e3]
        out["common_gaps"][f"over_{ms}ms"] = {
            "per_second": round(len(long) / span, 2) if span else None,
            "time_share": round(sum(long) / span, 4) if span else None,
            **({f"p{q}_ms": round(percentile(long, q) * 1e3, 2) for q in (50, 90)} if long else {}),
            "longest_ms": round(max(long) * 1e3, 2) if long else None,
        }
    out["per_flow_ack_gap_us"] = {}
    for port, ts in sorted(acks.items(), key=lambda kv: -len(kv[1]))[:2]:
        ts = sorted(t for t in ts if t > after)
        g = [b - a for a, b in zip(ts, ts[1:])]
        if g:
            out["per_flow_ack_gap_us"][str(port)] = {f"p{q}": round(percentile(g, q) * 1e6) for q in (50, 90, 99)}
    episodes: list[list[float]] = []
    for t in (d for d in drops if d > after):
        if episodes and t - episodes[-1][-1] < 0.05:
            episodes[-1].append(t)
        else:
            episodes.append([t])
    flows = [len({p for t, p in rtx if e[0] <= t <= e[-1] + 0.1}) for e in episodes]
    out["overflow_episodes"] = {"count": len(episodes), "taking_both_flows": sum(1 for n in flows if n >= 2),
                                "drops_per_episode": round(sum(len(e) for e in episodes) / len(episodes), 2) if episodes else None}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="paper-quick")
    ap.add_argument("--case", default="reno-400M-20v20ms-10ms")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    from ccarena.backends.linux import run_linux
    from ccarena.experiments.crosscheck import metrics_of, validation_cases

    cases, _ = validation_cases(args.suite)
    docs = dict(cases)
    if args.case not in docs:
        raise SystemExit(f"--case: no case {args.case!r} in {args.suite}; allowed: {', '.join(docs)}")
    doc = json.loads(json.dumps(docs[args.case]))
    doc["run"]["seed"] = args.seed
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "perf.data"
        filters = " || ".join(f"reason == {r}" for r in QDISC_DROP_REASONS)
        perf = subprocess.Popen(
            ["perf", "record", "-a", "-o", str(data), "-e", "skb:kfree_skb", "--filter", filters,
             "-e", "tcp:tcp_retransmit_skb", "-e", "tcp:tcp_probe", "--filter", "dport == 5201 && data_len == 0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        time.sleep(0.5)  # perf's buffers armed before the run's first packet
        try:
            result = run_linux(doc)
        finally:
            perf.send_signal(2)
            perf.wait()
        script = subprocess.run(["perf", "script", "--ns", "-F", "time,event,trace", "-i", str(data)],
                                capture_output=True, text=True).stdout
    warmup = float(doc["run"]["warmup"].rstrip("s"))
    summary = {"case": args.case, "seed": args.seed, "metrics": {k: round(v, 4) for k, v in metrics_of(result).items()},
               **analyse(script, warmup)}
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
