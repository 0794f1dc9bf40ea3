"""A run's per-flow rows and summary metrics computed from its record in plain
Python, without numpy or pandas: what `ccarena run` prints, what `--json`
and the saved result.json hold, and ``RunResult.summary``.

A short run should not wait a third of a second for pandas to print a
table of a few numbers, so these are computed here from the record. They
are the same numbers, to the last bit, as the DataFrame path
(``RunResult.flows`` and the formulas of ``metrics``; a test compares them
on several scenarios): sums of floats follow numpy's pairwise summation
(``np_sum``), which is what ``np.sum`` and pandas' ``Series.sum`` and
``Series.mean`` compute, and each column takes the type pandas would give it
(an integer column with a missing value becomes floats).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

__all__ = ["np_sum", "np_mean", "flow_rows", "run_summary", "udp_loss_rate", "plain", "DEFAULT_MSS", "HEADER_BYTES"]

# Bytes of IP + TCP headers (with the timestamp option) on every data packet:
# a full segment is MSS + 52 bytes on the wire (crates/sim/src/packet.rs
# HEADER_BYTES; the kernel's packets carry the same 20 + 20 + 12). ``metrics``
# imports both from here.
HEADER_BYTES = 52
DEFAULT_MSS = 1448

NAN = float("nan")

# numpy's pairwise summation: blocks of at most this many elements are summed
# with eight running partial sums (numpy's PW_BLOCKSIZE and unrolling).
_PW_BLOCK = 128


def _pairwise(a: Sequence[float], lo: int, n: int) -> float:
    """numpy's ``pairwise_sum`` of a[lo:lo+n] (the inner loop of ``np.add.reduce``)."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    if n <= _PW_BLOCK:
        r0, r1, r2, r3, r4, r5, r6, r7 = a[lo:lo + 8]
        end = lo + n - n % 8
        i = lo + 8
        while i < end:
            r0 += a[i]
            r1 += a[i + 1]
            r2 += a[i + 2]
            r3 += a[i + 3]
            r4 += a[i + 4]
            r5 += a[i + 5]
            r6 += a[i + 6]
            r7 += a[i + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        for k in range(i, lo + n):
            res += a[k]
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise(a, lo, n2) + _pairwise(a, lo + n2, n - n2)


def np_sum(values: Sequence[float]) -> float:
    """The sum of floats exactly as ``np.sum`` of a float64 array computes it
    (pairwise, from the identity 0.0)."""
    a = [float(v) for v in values]
    return 0.0 + _pairwise(a, 0, len(a))


def np_mean(values: Sequence[Any]) -> float:
    """The mean exactly as pandas' ``Series.mean`` of a float64 (or integer)
    column computes it: missing values (None, NaN) are left out of the count
    and summed as 0; nan when nothing is left."""
    a = [0.0 if v is None or v != v else float(v) for v in values]
    count = sum(1 for v in values if not (v is None or v != v))
    if count == 0:
        return NAN
    return (0.0 + _pairwise(a, 0, len(a))) / count


def _goodput_capacity_bps(rate_bps: float, mss: int) -> float:
    return rate_bps * mss / (int(mss) + HEADER_BYTES)


def _column(values: list) -> list:
    """`values` as the column pandas makes of them reads back row by row
    (``iterrows``): booleans, integers and strings stay; numbers with floats
    or missing values among them become floats (missing: nan); a column of
    nothing but None stays None."""
    numbers = floats = missing = False
    for v in values:
        if v is None:
            missing = True
        elif isinstance(v, float):
            floats = numbers = True
        elif isinstance(v, int) and not isinstance(v, bool):
            numbers = True
        else:
            return values
    if numbers and (floats or missing):
        return [NAN if v is None else float(v) for v in values]
    return values


def flow_rows(scenario: Any, record: dict) -> list[dict[str, Any]]:
    """One dict per flow, with the keys (``flow`` first) and the values of a
    row of ``RunResult.flows`` (nan where the DataFrame has NaN)."""
    series = record["flow_series"]
    groups = scenario.flow_groups()
    engine_flows = scenario.engine["flows"]
    rows = []
    for i, f in enumerate(record["flows"]):
        c = f["counters"]
        window_s = max(f["window_end_ns"] - f["window_start_ns"], 0) / 1e9
        delivered = c["delivered_at_window_end"] - c["delivered_at_window_start"]
        thr = delivered * 8 / window_s / 1e6 if window_s > 0 else 0.0
        mean_cwnd = mean_srtt = NAN
        if i < len(series):
            s = series[i]
            lo, hi = f["window_start_ns"] / 1e9, f["window_end_ns"] / 1e9
            inside = [k for k, t in enumerate(s["t_ns"]) if lo < float(t) / 1e9 <= hi]
            if inside:
                mean_cwnd = np_mean([s["cwnd"][k] for k in inside])
                srtt = s["srtt_us"]
                mean_srtt = np_mean([NAN if srtt[k] is None else float(srtt[k]) / 1e3 for k in inside])
        rows.append(
            {
                "flow": i,
                "group": groups[i],
                "label": f["label"],
                "cca": f["cca"],
                "direction": f["direction"],
                "background": bool(f["background"]),
                "rtt_ms": f["rtt_ns"] / 1e6,
                "mss": int(engine_flows[i].get("tcp", {}).get("mss", DEFAULT_MSS)) if i < len(engine_flows) else DEFAULT_MSS,
                "start_s": f["start_ns"] / 1e9,
                "data_start_s": c["first_data_ns"] / 1e9 if c.get("first_data_ns") else NAN,
                "throughput_mbps": thr,
                "mean_cwnd": mean_cwnd,
                "mean_srtt_ms": mean_srtt,
                "retransmissions": c["retransmissions"],
                "rtos": c["rtos"],
                "drops": c["drops"],
                "recoveries": c["recoveries"],
                "undos": c["undos"],
                "tlps": c["tlps"],
                "segments_sent": c["segments_sent"],
                "skbs_sent": c.get("skbs_sent", 0),
                "acks_sent": c.get("acks_sent", 0),
                "paws_rejected": c.get("paws_rejected", 0),
                "ofo_skbs": c.get("ofo_skbs", 0),
                "acks_compressed": c.get("acks_compressed", 0),
                "delayed_acks": c.get("delayed_acks", 0),
                "hystart_train_cwnd": c["hystart_train_cwnd"] / c["hystart_train"] if c.get("hystart_train") else NAN,
                "hystart_delay_cwnd": c["hystart_delay_cwnd"] / c["hystart_delay"] if c.get("hystart_delay") else NAN,
                "bytes_sent": c["bytes_sent"],
                "bytes_delivered": c["bytes_delivered"],
                "window_retransmissions": c["retransmissions"] - c["retrans_at_window_start"],
                "window_rtos": c["rtos"] - c["rtos_at_window_start"],
                "size_bytes": f["size_bytes"],
                "fct_s": (c["completion_ns"] - c["start_ns"]) / 1e9 if c["completion_ns"] else NAN,
                "window_start_s": f["window_start_ns"] / 1e9,
                "window_end_s": f["window_end_ns"] / 1e9,
            }
        )
    if rows:
        columns = {k: _column([r[k] for r in rows]) for k in rows[0]}
        rows = [{k: col[j] for k, col in columns.items()} for j in range(len(rows))]
    return rows


def _jain_index(x: list[float]) -> float:
    if not x:
        return NAN
    denom = len(x) * np_sum([v * v for v in x])
    return np_sum(x) ** 2 / denom if denom > 0 else NAN


def _throughput_ratio(x: list[float]) -> float:
    if not x or max(x) <= 0:
        return NAN
    return min(x) / max(x)


def _link_rates_bps(record: dict) -> dict[str, float]:
    window_s = (record["duration_ns"] - record["warmup_ns"]) / 1e9

    def mean_rate(link: dict) -> float:
        cap = link["window_capacity_bytes"]
        return float(cap * 8 / window_s) if cap and window_s > 0 else float(link["rate_bps"])

    fwd = mean_rate(record["link"])
    rev = record["reverse_link"]
    return {"forward": fwd, "reverse": mean_rate(rev) if rev else fwd}


def _median(x: list[float]) -> float:
    """``np.median`` of floats without NaN."""
    s = sorted(x)
    n = len(s)
    if n % 2:
        return s[n // 2]
    return (0.0 + s[n // 2 - 1] + s[n // 2]) / 2


def _web(record: dict) -> dict[str, Any]:
    """web_flows, web_completed and median_fct_s of ``metrics.web_metrics``
    over the web flows that started in the measurement window."""
    start, end = record["warmup_ns"] / 1e9, record["duration_ns"] / 1e9
    fcts = [NAN if r["fct_ns"] is None else float(r["fct_ns"]) / 1e9
            for r in record["short_flows"] if start <= float(r["start_ns"]) / 1e9 < end]
    done = [f for f in fcts if f == f]
    return {
        "web_flows": len(fcts),
        "web_completed": len(done) / len(fcts) if fcts else NAN,
        "median_fct_s": _median(done) if done else NAN,
    }


def _udp_throughputs(record: dict) -> list[float]:
    out = []
    for u in record["udp"]:
        window_s = max(u["window_end_ns"] - u["window_start_ns"], 0) / 1e9
        out.append(u["window_received_bytes"] * 8 / window_s / 1e6 if window_s > 0 else 0.0)
    return out


def udp_loss_rate(record: dict) -> float:
    """The UDP sources' loss together (``metrics.udp_metrics``'s udp_loss_rate)."""
    sent = float(sum(u["sent_packets"] for u in record["udp"]))
    return float(1 - sum(u["received_packets"] for u in record["udp"]) / sent) if sent > 0 else NAN


def run_summary(record: dict, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``RunResult.summary`` of a (normalised) record and its `flow_rows`."""
    link = record["link"]
    window_s = (record["duration_ns"] - record["warmup_ns"]) / 1e9
    capacity_bytes = link["window_capacity_bytes"] or link["rate_bps"] * window_s / 8
    rate = capacity_bytes * 8 / window_s if window_s > 0 else link["rate_bps"]
    thr = [float(r["throughput_mbps"]) for r in rows if not r["background"]]
    if rate > 0:
        # Summed one after the other, like the built-in sum of numpy floats.
        forward_share: Any = 0
        for r in rows:
            if r["direction"] == "forward":
                forward_share = forward_share + r["throughput_mbps"] * 1e6 / _goodput_capacity_bps(rate, r["mss"])
        forward_share = float(forward_share)
    else:
        forward_share = NAN
    extra: dict[str, Any] = {}
    if record["udp"]:
        extra["udp_throughput_mbps"] = np_sum(_udp_throughputs(record))
    if record["web"]:
        extra.update(_web(record))
    q = record["queue_series"]
    warmup_s = record["warmup_ns"] / 1e9
    backlog = [b for t, b in zip(q["t_ns"], q["backlog_packets"]) if float(t) / 1e9 > warmup_s]
    return {
        "utilization": forward_share,
        "link_utilization": float(link["window_bytes_out"] / capacity_bytes) if capacity_bytes > 0 else NAN,
        "jain_index": _jain_index(thr),
        "throughput_ratio": _throughput_ratio(thr),
        "aggregate_throughput_mbps": np_sum(thr),
        **extra,
        "drops": int(link["drops_queue"] + link["drops_random"] + link["drops_aqm"]),
        "ce_marks": int(link["ce_marks"]),
        "mean_queue_packets": float(np_mean(backlog)) if len(q["t_ns"]) else NAN,
    }


def plain(v: Any) -> Any:
    """A value for JSON: NaN as None."""
    if isinstance(v, float) and math.isnan(v):
        return None
    return v
