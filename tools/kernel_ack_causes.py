"""Measure why the kernel's data receivers send each ACK, from tracepoints alone.

Runs flows on the linux backend (as ``tools/kernel_host_timing.py`` does)
while a BPF program (``tools/bpf/ack_causes.bpf.c``, built by
``tools/bpf_tracer.py`` with clang, bpftool and libbpf-dev) records, for
every receiving iperf3 socket, each data skb's arrival, each read of the
application, and each ACK the socket sends, with the socket's window
state at each. No capture: the machine is loaded only by the records (a
few hundred thousand a minute).

Reports per data connection, after the warm-up:

* ACKs per data segment, by what sent them: the application's read
  (``tcp_cleanup_rbuf``), the arrival of in-order data, of data that fills
  a hole, of out-of-order data (``__tcp_ack_snd_check``), or anything else
  (the delayed-ACK and SACK-compression timers);
* the reads that returned data, per segment, and the share of them that
  sent an ACK; how soon the application reads after data becomes readable;
* the window test of ``__tcp_ack_snd_check`` recomputed for every in-order
  arrival (``advertised_window``: the free space at the socket's
  payload-to-truesize scaling ratio, capped by ``rcv_ssthresh``, rounded up
  to the window scale's unit) against what the kernel did;
* the skbs' truesize less their payload, the scaling ratio,
  and the connection's window phase (where the empty buffer's window falls
  in the scale's unit, which decides how much unread data leaves the
  rounded window unchanged).

Usage (root; clang, bpftool, gcc and libbpf-dev; a kernel with BTF)::

    python tools/kernel_ack_causes.py --cca bic --rate 400Mbps --rtt 20ms --flows 2 --buffer 500000B --seconds 30

Prints JSON. The numbers and command lines are recorded in docs/fidelity.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bpf_tracer  # noqa: E402  (tools/bpf_tracer.py)

ARRIVAL, READABLE, READ, ACK, READ_DONE = 0, 1, 2, 3, 4
OTHER_SOCKET = 14

# Mirrors `struct record` in bpf/ack_causes.bpf.c (80 bytes, 8-aligned).
_FIELDS = [
    ("t_ns", "<u8"), ("kind", "<u4"), ("before", "<u4"), ("local_port", "<u2"), ("remote_port", "<u2"),
    ("rcv_nxt", "<u4"), ("rcv_wup", "<u4"), ("copied_seq", "<u4"), ("rcv_wnd", "<u4"), ("rcv_ssthresh", "<u4"),
    ("window_clamp", "<u4"), ("rcvbuf", "<i4"), ("rmem_alloc", "<i4"), ("backlog_len", "<i4"),
    ("a", "<u4"), ("b", "<u4"), ("c", "<u4"), ("rcv_mss", "<u2"), ("scaling_ratio", "u1"), ("rcv_wscale", "u1"),
    ("ack_pending", "u1"), ("quick", "u1"), ("ofo_queued", "u1"), ("cpu", "u1"),
]
_PACKED = np.dtype(_FIELDS)
RECORD = np.dtype({"names": [n for n, _ in _FIELDS], "formats": [t for _, t in _FIELDS],
                   "offsets": [_PACKED.fields[n][1] for n, _ in _FIELDS], "itemsize": 80})

# Linux TCP_RMEM_TO_WIN_SCALE: the scaling ratio is a fraction of 256.
RMEM_TO_WIN_SCALE = 8


def seq_diff(a: int, b: int) -> int:
    """a - b in sequence space (32-bit wrap)."""
    return ((a - b + (1 << 31)) % (1 << 32)) - (1 << 31)


def advertised_window(rcvbuf: int, rmem_alloc: int, backlog_len: int, scaling_ratio: int, rcv_ssthresh: int,
                      window_clamp: int, rcv_wscale: int) -> int:
    """The window Linux 6.x's `__tcp_select_window` offers with window
    scaling (no memory pressure, no shrinking): the free space
    (`tcp_space`, the buffer less the memory charged, at the scaling
    ratio), rounded down to the scale's unit when below half the full
    space, capped by `rcv_ssthresh`, then rounded up to the unit."""
    unit = 1 << rcv_wscale
    free = ((rcvbuf - rmem_alloc - backlog_len) * scaling_ratio) >> RMEM_TO_WIN_SCALE
    full = min(window_clamp, (rcvbuf * scaling_ratio) >> RMEM_TO_WIN_SCALE)
    if free < full >> 1:
        free = free // unit * unit
    free = min(free, rcv_ssthresh)
    return -(-free // unit) * unit


def load_records(path: Path) -> np.ndarray:
    return np.fromfile(path, dtype=RECORD)


def _pct(values, qs=(10, 25, 50, 75, 90, 99)) -> dict[str, float]:
    if len(values) == 0:
        return {}
    p = np.percentile(np.asarray(values, dtype=float), qs)
    return {f"p{q}": round(float(v), 1) for q, v in zip(qs, p)}


def connection_causes(recs: np.ndarray, warmup_ns: int) -> dict:
    """The report for one connection's records (any order), from
    `warmup_ns` after its first record on."""
    recs = recs[np.argsort(recs["t_ns"], kind="stable")]
    recs = recs[recs["t_ns"] >= recs["t_ns"][0] + warmup_ns]
    if len(recs) == 0:
        return {}
    mss = int(np.median(recs["rcv_mss"][recs["kind"] == ARRIVAL])) if (recs["kind"] == ARRIVAL).any() else 1448
    kinds = recs["kind"]
    causes = {"read": 0, "in_order_arrival": 0, "hole_filled": 0, "out_of_order_arrival": 0, "other": 0}
    arrivals = {"in_order_arrival": 0, "hole_filled": 0, "out_of_order_arrival": 0}
    segments = 0.0
    last_arrival = None
    reads_with_data = reads_acking = 0
    read_acked = False
    readable_since = None
    read_waits = []
    window_test = {"agree": 0, "acked_not_predicted": 0, "predicted_not_acked": 0}
    overheads: list[int] = []
    n = len(recs)
    for k in range(n):
        r = recs[k]
        kind = int(kinds[k])
        if kind == ARRIVAL:
            seq, end = int(r["a"]), int(r["b"])
            size = seq_diff(end, seq)
            segments += size / mss
            overheads.append(int(r["c"]) - size)
            if seq != int(r["rcv_nxt"]):
                last_arrival = "out_of_order_arrival"
            elif r["ofo_queued"]:
                last_arrival = "hole_filled"
            else:
                last_arrival = "in_order_arrival"
                _check_window_test(recs, k, end, window_test)
            arrivals[last_arrival] += 1
        elif kind == READABLE:
            if readable_since is None:
                readable_since = int(r["t_ns"])
        elif kind == READ:
            read_acked = False
            if readable_since is not None:
                read_waits.append((int(r["t_ns"]) - readable_since) / 1e3)
                readable_since = None
        elif kind == READ_DONE:
            if np.int32(r["a"]) > 0:
                reads_with_data += 1
                reads_acking += read_acked
        elif kind == ACK:
            before = int(r["before"])
            if before == READ:
                causes["read"] += 1
                read_acked = True
            elif before == ARRIVAL and last_arrival is not None:
                causes[last_arrival] += 1
            else:
                causes["other"] += 1
    if segments == 0:
        return {}
    last = recs[-1]
    ratio, wscale = int(last["scaling_ratio"]), int(last["rcv_wscale"])
    empty_window = (int(last["rcvbuf"]) * ratio) >> RMEM_TO_WIN_SCALE
    return {
        "data_segments": round(segments),
        "acks_per_segment": round(sum(causes.values()) / segments, 4),
        "acks_per_segment_by_cause": {c: round(v / segments, 4) for c, v in causes.items()},
        "arrivals": arrivals,
        "arrivals_acknowledged_at_once": {c: round(causes[c] / arrivals[c], 3) if arrivals[c] else None for c in arrivals},
        "reads_with_data_per_segment": round(reads_with_data / segments, 4),
        "share_of_reads_with_data_that_ack": round(reads_acking / reads_with_data, 3) if reads_with_data else None,
        "readable_to_read_us": _pct(read_waits),
        "window_test": window_test,
        "truesize_less_payload": _pct(overheads, (1, 50, 99)),
        "scaling_ratio": ratio,
        "rcv_wscale": wscale,
        "rcvbuf": int(last["rcvbuf"]),
        "rcv_ssthresh": int(last["rcv_ssthresh"]),
        "window_phase": min(empty_window, int(last["rcv_ssthresh"])) % (1 << wscale),
    }


def _check_window_test(recs: np.ndarray, k: int, end_seq: int, tally: dict) -> None:
    """Recompute `__tcp_ack_snd_check`'s test for the in-order arrival at
    `k`: the state before it (last ACK's rcv_wup and window, copied_seq)
    with the memory charged once it is queued (from its `sk_data_ready`
    record, which comes after the decision in the fast path and before it
    in the slow one), and compare with whether it was acknowledged at once."""
    readable = acked = None
    for j in range(k + 1, min(k + 4, len(recs))):
        kind = int(recs["kind"][j])
        if kind == READABLE and readable is None:
            readable = recs[j]
        elif kind == ACK and int(recs["before"][j]) == ARRIVAL:
            acked = True
        elif kind in (ARRIVAL, READ):
            break
    if readable is None:
        return
    r = recs[k]
    more_than_one_segment = seq_diff(end_seq, int(r["rcv_wup"])) > int(r["rcv_mss"])
    unread = seq_diff(end_seq, int(r["copied_seq"]))
    window = advertised_window(int(readable["rcvbuf"]), int(readable["rmem_alloc"]), int(readable["backlog_len"]),
                               int(readable["scaling_ratio"]), int(readable["rcv_ssthresh"]),
                               int(readable["window_clamp"]), int(readable["rcv_wscale"]))
    predicted = more_than_one_segment and (unread < 1 or window >= int(r["rcv_wnd"]))
    acked = bool(acked)
    if predicted == acked:
        tally["agree"] += 1
    elif acked:
        tally["acked_not_predicted"] += 1
    else:
        tally["predicted_not_acked"] += 1


def report(recs: np.ndarray, warmup_ns: int, min_arrivals: int = 1000) -> dict:
    """Every data connection's report, keyed "local_port:remote_port"."""
    out = {}
    keys = np.unique(np.stack([recs["local_port"], recs["remote_port"]], axis=1), axis=0) if len(recs) else []
    for lp, rp in keys:
        mine = recs[(recs["local_port"] == lp) & (recs["remote_port"] == rp)]
        if (mine["kind"] == ARRIVAL).sum() < min_arrivals:
            continue  # iperf3's control connection
        out[f"{lp}:{rp}"] = connection_causes(mine, warmup_ns)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", default="400Mbps")
    ap.add_argument("--rtt", default="20ms")
    ap.add_argument("--buffer", default=None, help="default: 10 ms at the rate")
    ap.add_argument("--cca", default="cubic")
    ap.add_argument("--flows", type=int, default=2)
    ap.add_argument("--offloads", choices=["on", "off"], default="on")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds left out at the start of each connection")
    ap.add_argument("--keep", type=Path, default=None, metavar="FILE", help="copy the raw records into FILE")
    args = ap.parse_args()
    from ccarena.backends.linux import run_linux
    from ccarena.scenario.units import parse_rate  # type: ignore[attr-defined]

    rate = parse_rate(args.rate)
    scenario = {
        "name": "ack-causes",
        "network": {"bottleneck_rate": args.rate, "buffer": args.buffer or f"{int(rate / 8 * 0.010)}B"},
        "flows": [{"cca": args.cca, "rtt": args.rtt, "count": args.flows}],
        "run": {"duration": f"{args.seconds}s", "warmup": "1s"},
        "linux": {"offloads": args.offloads == "on"},
    }
    with tempfile.TemporaryDirectory() as tmp:
        out, dropped, _ = bpf_tracer.traced("ack_causes", Path(tmp), lambda: run_linux(scenario))
        recs = load_records(out)
        if args.keep is not None:
            shutil.copy(out, args.keep)
        summary = {"connections": report(recs, int(args.warmup * 1e9)), "records": int(len(recs)),
                   "records_dropped": dropped,
                   "setup": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}}
        print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
