"""Metrics computed from run records. Formulas are in docs/metrics.md; each
function here is the single place that formula lives.

Three layers:

* formulas on plain arrays (``jain_index``, ``cov``, ``entropy_fairness``, ...);
* ``flow_metrics`` / ``run_metrics``: the named metric set of one run,
  computed from its ``RunResult`` (that is, from the raw record), so every
  metric can be recomputed later from stored records without rerunning;
* ``mean_ci``: mean and 95 % confidence interval across repetitions.

Fairness-type run metrics (group ratio, RTT ratio, the time-averaged indices,
sums and means over flows) count the flows under study only: background
flows (``background = true`` or a ``background`` set-up) are the environment,
not the subject, so they get flow metrics but are left out of the run's.
Runs with web traffic or UDP sources get metrics of those too (short-flow
completion times, UDP delivery); they exist only in such runs
(``CONDITIONAL_METRICS``).

Names follow ccperf's ``<stat>_<metric>_<layer>`` scheme: ``l4`` is the TCP
sender (cwnd, in-flight, sRTT, delivery rate, retransmissions), ``l7`` the
receiving application (bytes delivered in order).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd

# Header bytes per data packet and the default MSS live in ``summary`` (the
# CLI's summary, computed without numpy).
from .summary import DEFAULT_MSS, HEADER_BYTES

if TYPE_CHECKING:  # pragma: no cover
    from .result import RunResult

__all__ = [
    "jain_index",
    "throughput_ratio",
    "goodput_capacity_bps",
    "wire_bytes",
    "HEADER_BYTES",
    "DEFAULT_MSS",
    "mean",
    "cov",
    "cov_at_timescale",
    "entropy_fairness",
    "product_fairness",
    "utility_pf",
    "utility_mpdf",
    "network_power",
    "est_qdelay_ms",
    "utilization_bw",
    "utilization_bdp",
    "group_throughput_ratio",
    "rtt_ratio",
    "ideal_fct_s",
    "fct_slowdown",
    "link_rates_bps",
    "web_metrics",
    "udp_metrics",
    "t_quantile_975",
    "mean_ci",
    "mean_interval",
    "metric_bounds",
    "flow_metrics",
    "run_metrics",
    "COV_TIMESCALES_S",
    "METRIC_INFO",
    "CONDITIONAL_METRICS",
    "FLOW_COLUMN_TWINS",
    "SHORT_RUN_EPOCHS",
    "congestion_epochs",
]

# Time scales (seconds) at which the stability metric cov_throughput_<T>s_l7 is computed.
COV_TIMESCALES_S = (0.5, 1.0, 2.0, 5.0, 10.0)


def wire_bytes(mss: int) -> int:
    """Bytes on the wire of a full-size segment of `mss` payload bytes."""
    return int(mss) + HEADER_BYTES


# ---------------------------------------------------------------- formulas


def jain_index(x: Sequence[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 = equal shares, 1/n = one flow takes all."""
    a = np.asarray(x, dtype=float)
    if a.size == 0:
        return float("nan")
    denom = a.size * float(np.sum(a * a))
    return float(np.sum(a) ** 2 / denom) if denom > 0 else float("nan")


def throughput_ratio(x: Sequence[float]) -> float:
    """Smallest over largest throughput (the CUBIC paper's ratio, in [0, 1])."""
    a = np.asarray(x, dtype=float)
    if a.size == 0 or np.max(a) <= 0:
        return float("nan")
    return float(np.min(a) / np.max(a))


def goodput_capacity_bps(rate_bps: float, mss: int = DEFAULT_MSS) -> float:
    """The most payload a link of `rate_bps` can carry in full-size packets of `mss` bytes."""
    return rate_bps * mss / wire_bytes(mss)


def mean(x: Sequence[float]) -> float:
    """Arithmetic mean (nan for no samples)."""
    a = np.asarray(x, dtype=float)
    return float(a.mean()) if a.size else float("nan")


def cov(x: Sequence[float]) -> float:
    """Coefficient of variation: population standard deviation over mean (nan if the mean is 0)."""
    a = np.asarray(x, dtype=float)
    if a.size == 0:
        return float("nan")
    m = float(a.mean())
    return float(a.std() / m) if m > 0 else float("nan")


def cov_at_timescale(x: Sequence[float], interval_s: float, timescale_s: float) -> float:
    """CoV of `x` (samples every `interval_s`) averaged over consecutive blocks of `timescale_s`.

    The stability measure of the CUBIC evaluation: the throughput averaged
    over windows of one time scale, and how much those averages vary. Blocks
    that would be incomplete at the end are dropped; fewer than two blocks
    give nan.
    """
    a = np.asarray(x, dtype=float)
    m = max(int(round(timescale_s / interval_s)), 1)
    blocks = a.size // m
    if blocks < 2:
        return float("nan")
    return cov(a[: blocks * m].reshape(blocks, m).mean(axis=1))


def entropy_fairness(x: Sequence[float]) -> float:
    """Normalised entropy of the shares p_k = x_k / sum x: -sum p log p / log K (1 = equal, 0 = one flow takes all)."""
    a = np.asarray(x, dtype=float)
    total = float(a.sum())
    if a.size == 0 or total <= 0:
        return float("nan")
    if a.size == 1:
        return 1.0
    p = a[a > 0] / total
    return float(-(p * np.log(p)).sum() / math.log(a.size))


def product_fairness(x: Sequence[float]) -> float:
    """Normalised product prod_k (x_k / mean x): 1 for equal shares, 0 if any flow gets nothing."""
    a = np.asarray(x, dtype=float)
    m = float(a.mean()) if a.size else 0.0
    if m <= 0:
        return float("nan")
    return float(np.exp(np.sum(np.log(np.maximum(a / m, 1e-300)))) if np.all(a > 0) else 0.0)


def sample_fairness(x: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per sample (row of `x`, samples x flows), over the flows `active`
    marks: the aggregate (rows with an active flow), and Jain's index, the
    entropy and the product fairness (rows whose aggregate is positive),
    as `jain_index`, `entropy_fairness` and `product_fairness` give them
    for each row, computed for all rows at once (a 600 s run has 6,000)."""
    x = np.where(active, x, 0.0)
    n = active.sum(axis=1)
    total = x.sum(axis=1)
    rows = n > 0
    pos = rows & (total > 0)
    xp, n_p, tp = x[pos], n[pos].astype(float), total[pos]
    act = active[pos]
    jain = tp**2 / (n_p * (xp * xp).sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        share = xp / tp[:, None]
        plogp = np.where(act & (xp > 0), share * np.log(np.where(share > 0, share, 1.0)), 0.0)
        ent = np.where(n_p > 1, -plogp.sum(axis=1) / np.log(np.maximum(n_p, 2.0)), 1.0)
        m = tp / n_p
        ratio = np.where(act, np.maximum(xp / m[:, None], 1e-300), 1.0)
        all_positive = ~(act & ~(xp > 0)).any(axis=1)
        prod = np.where(all_positive, np.exp(np.log(ratio).sum(axis=1)), 0.0)
    return total[rows], jain, ent, prod


def utility_pf(x_mbps: Sequence[float]) -> float:
    """Proportional-fair utility: mean of ln(x) over samples with x > 0 (x in Mbps)."""
    a = np.asarray(x_mbps, dtype=float)
    a = a[a > 0]
    return float(np.log(a).mean()) if a.size else float("nan")


def utility_mpdf(x_mbps: Sequence[float]) -> float:
    """Minimum-potential-delay utility: mean of -1/x over samples with x > 0 (x in Mbps)."""
    a = np.asarray(x_mbps, dtype=float)
    a = a[a > 0]
    return float((-1.0 / a).mean()) if a.size else float("nan")


def network_power(x_mbps: Sequence[float], srtt_ms: Sequence[float]) -> float:
    """Kleinrock's power: mean over samples of throughput / sRTT, in Mbit/s per second."""
    x = np.asarray(x_mbps, dtype=float)
    d = np.asarray(srtt_ms, dtype=float) / 1e3
    ok = d > 0
    return float((x[ok] / d[ok]).mean()) if ok.any() else float("nan")


def est_qdelay_ms(srtt_ms: Sequence[float], min_rtt_ms: Sequence[float]) -> np.ndarray:
    """Estimated queueing delay per sample: sRTT minus the sender's minimum RTT (ms)."""
    return np.maximum(np.asarray(srtt_ms, dtype=float) - np.asarray(min_rtt_ms, dtype=float), 0.0)


def utilization_bw(x_mbps: Sequence[float], rate_bps: float) -> float:
    """Mean over samples of throughput / bottleneck rate (0..~0.965: payload only)."""
    a = np.asarray(x_mbps, dtype=float)
    return float(a.mean() * 1e6 / rate_bps) if a.size and rate_bps > 0 else float("nan")


def utilization_bdp(in_flight: Sequence[float], rate_bps: float, rtt_ns: float, mss: int = DEFAULT_MSS) -> float:
    """Mean over samples of in-flight packets / BDP, BDP = rate x propagation RTT in
    full-size packets of the flow's own MSS (in-flight counts those packets)."""
    a = np.asarray(in_flight, dtype=float)
    bdp = rate_bps * rtt_ns / 1e9 / 8 / wire_bytes(mss)
    return float(a.mean() / bdp) if a.size and bdp > 0 else float("nan")


def group_throughput_ratio(throughputs: Sequence[float], groups: Sequence[int]) -> float:
    """Mean throughput of the flows of the first [[flows]] table over that of the second.

    The CUBIC paper's inter-RTT ratio (the first table holds the fixed
    long-RTT flow) and the TCP-friendliness ratio (the first the protocol,
    the second Reno). Tables are taken in order among those present, so
    that a background table left out before the call does not shift them.
    nan with fewer than two tables.
    """
    x = np.asarray(throughputs, dtype=float)
    g = np.asarray(groups)
    present = np.unique(g)
    if present.size < 2:
        return float("nan")
    den = float(x[g == present[1]].mean())
    return float(x[g == present[0]].mean() / den) if den > 0 else float("nan")


def rtt_ratio(rtts: Sequence[float]) -> float:
    """Largest over smallest propagation RTT of the flows (1 when all are equal)."""
    a = np.asarray(rtts, dtype=float)
    return float(a.max() / a.min()) if a.size and a.min() > 0 else float("nan")


def ideal_fct_s(size_bytes: Any, rtt_ms: Any, rate_bps: Any) -> np.ndarray:
    """The shortest possible completion time of a short flow: 1.5 RTT (handshake,
    then the data's one-way trip) plus its bytes at the link's goodput capacity."""
    size = np.asarray(size_bytes, dtype=float)
    cap = goodput_capacity_bps(np.asarray(rate_bps, dtype=float))
    return 1.5 * np.asarray(rtt_ms, dtype=float) / 1e3 + size * 8 / cap


def fct_slowdown(fct_s: Any, size_bytes: Any, rtt_ms: Any, rate_bps: Any) -> np.ndarray:
    """FCT over the ideal FCT (1 = as fast as the path allows; nan for unfinished flows)."""
    return np.asarray(fct_s, dtype=float) / ideal_fct_s(size_bytes, rtt_ms, rate_bps)


def link_rates_bps(record: dict) -> dict[str, float]:
    """Mean rate of each direction's bottleneck over the measurement window of
    a (normalised) record, rate changes and traces included; the reverse
    direction falls back to the forward rate when it has no bottleneck of its own."""
    window_s = (record["duration_ns"] - record["warmup_ns"]) / 1e9

    def mean_rate(link: dict) -> float:
        cap = link["window_capacity_bytes"]
        return float(cap * 8 / window_s) if cap and window_s > 0 else float(link["rate_bps"])

    fwd = mean_rate(record["link"])
    rev = record["reverse_link"]
    return {"forward": fwd, "reverse": mean_rate(rev) if rev else fwd}


def web_metrics(short_flows: Any, rates_bps: dict[str, float], start_s: float, end_s: float) -> dict[str, float]:
    """Completion-time metrics of the web flows that started in [start_s, end_s).

    `short_flows` has the columns of ``RunResult.short_flows`` (direction,
    size_bytes, rtt_ms, start_s, fct_s). Flows the run ended before count as
    not completed and are left out of the FCT statistics (so those are
    optimistic when many flows are unfinished: look at ``web_completed``).
    """
    sf = short_flows[(short_flows.start_s >= start_s) & (short_flows.start_s < end_s)]
    fct = sf.fct_s.to_numpy(dtype=float)
    done = ~np.isnan(fct)
    rate = sf.direction.map(lambda d: rates_bps.get(d, rates_bps["forward"])).to_numpy(dtype=float) if len(sf) else np.array([])
    slow = fct_slowdown(fct, sf.size_bytes.to_numpy(dtype=float), sf.rtt_ms.to_numpy(dtype=float), rate)[done]
    f = fct[done]
    nan = float("nan")
    return {
        "web_flows": float(len(sf)),
        "web_completed": float(done.mean()) if len(sf) else nan,
        "mean_fct_s": float(f.mean()) if f.size else nan,
        "median_fct_s": float(np.median(f)) if f.size else nan,
        "p95_fct_s": float(np.percentile(f, 95)) if f.size else nan,
        "median_fct_slowdown": float(np.median(slow)) if slow.size else nan,
        "p95_fct_slowdown": float(np.percentile(slow, 95)) if slow.size else nan,
    }


def udp_metrics(udp: Any) -> dict[str, float]:
    """Delivered throughput (over the measurement window) and loss of the UDP
    sources together; `udp` has the columns of ``RunResult.udp``."""
    sent = float(udp.sent_packets.sum())
    return {
        "udp_throughput_mbps": float(udp.throughput_mbps.sum()),
        "udp_loss_rate": float(1 - udp.received_packets.sum() / sent) if sent > 0 else float("nan"),
    }


# Two-sided 95 % quantiles of Student's t for 1..30 degrees of freedom.
_T975 = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
]


def t_quantile_975(dof: int) -> float:
    """0.975 quantile of Student's t with `dof` degrees of freedom (table to 30, then a series in 1/dof)."""
    if dof < 1:
        return float("nan")
    if dof <= len(_T975):
        return _T975[dof - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * dof) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * dof**2)


def mean_ci(x: Sequence[float]) -> tuple[float, float, int]:
    """(mean, half-width of the 95 % confidence interval, n) over repetitions.

    The interval is mean +- t(0.975, n-1) s / sqrt(n) with s the sample
    standard deviation; nan half-width for fewer than two values. NaNs are
    ignored.
    """
    a = np.asarray(x, dtype=float)
    a = a[~np.isnan(a)]
    n = int(a.size)
    if n == 0:
        return float("nan"), float("nan"), 0
    m = float(a.mean())
    if n < 2:
        return m, float("nan"), n
    return m, float(t_quantile_975(n - 1) * a.std(ddof=1) / math.sqrt(n)), n


# The range each run-level metric's values (and so its mean) can take; an
# interval never leaves it. [0, 1]: shares, indices, ratios of a part to its
# whole. [0, inf): everything counted, timed or measured, and the ratios that
# are not of a part to a whole (utilization can exceed 1, docs/metrics.md).
# Metrics not named here (the utilities, which can be negative) are unbounded.
_UNIT_INTERVAL = {
    "jain_index", "throughput_ratio", "link_utilization", "drop_rate", "web_completed", "udp_loss_rate",
    "mean_jains_fairness_throughput_l7", "mean_entropy_fairness_throughput_l7", "mean_product_fairness_throughput_l7",
}
_UNBOUNDED = {"mean_utility_pf_l7", "mean_utility_mpdf_l7"}


def metric_bounds(name: str) -> tuple[float, float]:
    """(lower, upper) of a metric's values: (0, 1), (0, inf) or (-inf, inf)."""
    if name in _UNIT_INTERVAL:
        return 0.0, 1.0
    if name in _UNBOUNDED or name not in METRIC_INFO and not name.startswith(("cov_", "mean_", "total_")):
        return -math.inf, math.inf
    return 0.0, math.inf


def mean_interval(x: Sequence[float], lower: float = -math.inf, upper: float = math.inf,
                  level: float = 0.95) -> tuple[float, float, float, int]:
    """(mean, low, high, n): the mean over repetitions and its `level`
    confidence interval, mean +- t(1/2 + level/2, n-1) s / sqrt(n)
    (``scipy.stats.t``), cut to [lower, upper], the range the metric's values
    (and so its true mean) lie in. Cutting keeps the interval's coverage (the
    true mean is never in the part cut away) and the mean inside it; see
    docs/metrics.md for why not a logit interval or a bootstrap. NaN bounds for
    fewer than two values; NaNs are ignored."""
    a = np.asarray(x, dtype=float)
    a = a[~np.isnan(a)]
    n = int(a.size)
    if n == 0:
        return float("nan"), float("nan"), float("nan"), 0
    m = float(a.mean())
    if n < 2:
        return m, float("nan"), float("nan"), n
    if level == 0.95 and n - 1 <= len(_T975_EXACT):
        q = _T975_EXACT[n - 2]
    else:
        from scipy.stats import t  # scipy loads in a quarter second or more: only for other levels

        q = float(t.ppf(0.5 + level / 2, n - 1))
    half = float(q * a.std(ddof=1) / math.sqrt(n))
    return m, max(m - half, lower), min(m + half, upper), n


# scipy.stats.t.ppf(0.975, dof) for dof 1..60, to the last bit (tests check it):
# the intervals of every sweep summary without importing scipy.
_T975_EXACT = [
    12.706204736174694, 4.302652729749462, 3.1824463052837078, 2.7764451051977934,
    2.5705818356363146, 2.4469118511449786, 2.364624251592784, 2.306004135204166,
    2.262157162798205, 2.228138851986274, 2.200985160091639, 2.1788128296672284,
    2.1603686564627913, 2.144786687917804, 2.131449545559776, 2.1199052992212546,
    2.1098155778333156, 2.1009220402410382, 2.0930240544083087, 2.085963447265864,
    2.0796138447276795, 2.0738730679040254, 2.0686576104190486, 2.0638985616280245,
    2.0595385527532972, 2.0555294386428735, 2.0518305164802846, 2.0484071417952454,
    2.045229642132703, 2.0422724563012378, 2.039513446396408, 2.0369333434601016,
    2.0345152974493383, 2.0322445093177186, 2.030107928250343, 2.0280940009804502,
    2.0261924630291093, 2.0243941639119694, 2.022690920036761, 2.021075390306273,
    2.019540970441376, 2.0180817028184443, 2.016692199227824, 2.0153675744437636,
    2.014103388880846, 2.012895598919429, 2.0117405137297655, 2.010634757624232,
    2.0095752371292392, 2.008559112100761, 2.007583770315836, 2.006646805061688,
    2.0057459953178687, 2.0048792881880564, 2.0040447832891455, 2.003240718847872,
    2.002465459291007, 2.0017174841452356, 2.000995378088267, 2.0002978220142604,
]


# ---------------------------------------------------------------- metric sets

# name -> (unit, description); the catalogue docs/metrics.md describes in full.
METRIC_INFO: dict[str, tuple[str, str]] = {
    "throughput_mbps": ("Mbps", "payload delivered in order over the flow's window"),
    "utilization": ("", "sum of flow throughputs / goodput capacity"),
    "link_utilization": ("", "bytes the bottleneck sent / its capacity"),
    "jain_index": ("", "Jain's index of flow throughputs"),
    "throughput_ratio": ("", "smallest / largest flow throughput"),
    "group_throughput_ratio": ("", "throughput of flows table 0 / table 1"),
    "rtt_ratio": ("", "largest / smallest flow RTT"),
    "aggregate_throughput_mbps": ("Mbps", "sum of flow throughputs"),
    "mean_queue_packets": ("packets", "mean bottleneck backlog"),
    "mean_queue_delay_ms": ("ms", "mean bottleneck backlog / link rate"),
    "drop_rate": ("", "packets dropped at the bottleneck / packets that arrived there"),
    "mean_throughput_l7": ("Mbps", "mean of the throughput samples"),
    "cov_throughput_l7": ("", "CoV of the throughput samples"),
    "mean_cwnd_l4": ("packets", "mean congestion window"),
    "cov_cwnd_l4": ("", "CoV of the congestion window"),
    "mean_in_flight_l4": ("packets", "mean packets in flight"),
    "cov_in_flight_l4": ("", "CoV of packets in flight"),
    "mean_srtt_l4": ("ms", "mean smoothed RTT"),
    "cov_srtt_l4": ("", "CoV of the smoothed RTT"),
    "mean_est_qdelay_l4": ("ms", "mean sRTT - min RTT"),
    "cov_est_qdelay_l4": ("", "CoV of sRTT - min RTT"),
    "mean_delivery_rate_l4": ("Mbps", "mean delivery-rate estimate"),
    "cov_delivery_rate_l4": ("", "CoV of the delivery-rate estimate"),
    "total_retransmissions_l4": ("segments", "retransmitted segments in the window"),
    "total_rtos_l4": ("", "retransmission timeouts in the window"),
    "mean_utility_pf_l7": ("", "mean ln(throughput/Mbps)"),
    "mean_utility_mpdf_l7": ("", "mean -1/(throughput/Mbps)"),
    "mean_network_power_l7": ("Mbps/s", "mean throughput / sRTT"),
    "mean_utilization_bw_l7": ("", "mean throughput / link rate"),
    "mean_utilization_bdp_l4": ("", "mean in-flight / BDP"),
    "flow_completion_time_l7": ("s", "SYN to last byte acknowledged"),
    "congestion_epochs_l4": ("", "loss events (slow-start threshold changes) in the window"),
    "min_congestion_epochs": ("", "fewest congestion epochs of a loss-based flow under study"),
    "mean_agg_throughput_l7": ("Mbps", "mean over samples of the summed throughput"),
    "mean_jains_fairness_throughput_l7": ("", "mean over samples of Jain's index"),
    "mean_entropy_fairness_throughput_l7": ("", "mean over samples of the normalised entropy of shares"),
    "mean_product_fairness_throughput_l7": ("", "mean over samples of the normalised product of shares"),
    # Only in runs with background flows, web traffic, UDP sources or a reverse bottleneck (CONDITIONAL_METRICS).
    "background_throughput_mbps": ("Mbps", "sum of the background flows' throughputs"),
    "mean_reverse_queue_delay_ms": ("ms", "mean reverse-bottleneck backlog / its rate"),
    "web_flows": ("", "web flows started in the measurement window"),
    "web_completed": ("", "share of those that completed before the run ended"),
    "mean_fct_s": ("s", "mean flow completion time of the completed web flows"),
    "median_fct_s": ("s", "median flow completion time of the completed web flows"),
    "p95_fct_s": ("s", "95th percentile of the web flows' completion times"),
    "median_fct_slowdown": ("", "median of FCT / (1.5 RTT + size / goodput capacity)"),
    "p95_fct_slowdown": ("", "95th percentile of FCT / ideal FCT"),
    "udp_throughput_mbps": ("Mbps", "wire bytes the UDP sinks received in the window, summed over sources"),
    "udp_loss_rate": ("", "UDP datagrams not received / datagrams sent, all sources, whole run"),
}
for _t in COV_TIMESCALES_S:
    METRIC_INFO[f"cov_throughput_{_t:g}s_l7"] = ("", f"CoV of throughput averaged over {_t:g} s")

#: Columns of a run's flow table (``RunResult.flows``, the SQL ``flows`` table)
#: that are the same numbers as a flow metric: ``ccarena.load(...).flows``
#: shows each under the metric's name only (docs/metrics.md, "One name per metric").
FLOW_COLUMN_TWINS: dict[str, str] = {
    "mean_cwnd": "mean_cwnd_l4",
    "mean_srtt_ms": "mean_srtt_l4",
    "window_retransmissions": "total_retransmissions_l4",
    "window_rtos": "total_rtos_l4",
}

#: Run metrics that only runs with that kind of traffic have.
CONDITIONAL_METRICS: dict[str, tuple[str, ...]] = {
    "background": ("background_throughput_mbps",),
    "reverse": ("mean_reverse_queue_delay_ms",),
    "web": ("web_flows", "web_completed", "mean_fct_s", "median_fct_s", "p95_fct_s", "median_fct_slowdown", "p95_fct_slowdown"),
    "udp": ("udp_throughput_mbps", "udp_loss_rate"),
}


#: A run is too short for a point (``short_run``) when a flow under study with a
#: loss-based algorithm sees fewer congestion epochs than this after warm-up (docs/metrics.md).
SHORT_RUN_EPOCHS = 4
# Algorithms whose operating point is not a loss cycle (model- or delay-based): no epoch count.
_NOT_LOSS_BASED = ("bbr", "vegas")


def congestion_epochs(samples: Any, start_s: float, end_s: float) -> float:
    """Loss events of one flow in (start_s, end_s]: the changes of its slow-start
    threshold between consecutive samples (each loss recovery or timeout sets a
    new one; two inside one sample interval count once, so this errs low).
    nan when no sample falls in the window."""
    t = samples.t_s.to_numpy(dtype=float)
    inside = (t > start_s) & (t <= end_s)
    if not inside.any():
        return float("nan")
    # "No threshold yet" (NA, or Linux's infinity in older frames) is a value like any other: leaving it is an epoch.
    s = pd.to_numeric(samples.ssthresh, errors="coerce").astype("Float64").fillna(-1).to_numpy(dtype=float)
    first = int(np.argmax(inside))
    seq = s[max(first - 1, 0): first + int(inside.sum())]
    return float(np.count_nonzero(np.diff(seq)))


def _loss_based(cca: str) -> bool:
    return not str(cca).lower().startswith(_NOT_LOSS_BASED)


def _window(ts, f) -> Any:
    return ts[(ts.t_s > f.window_start_s) & (ts.t_s <= f.window_end_s)]


def flow_metrics(result: "RunResult") -> list[dict[str, float]]:
    """The ccperf-style flow metrics of each flow of one run (list index = flow)."""
    ts = result.timeseries
    rate = result.record["link"]["rate_bps"]
    interval = result.record.get("sample_interval_ns") or result.scenario.engine["run"]["sample_interval"]
    interval_s = interval / 1e9
    out = []
    for i, f in result.flows.iterrows():
        w = _window(ts[ts.flow == i], f)
        thr = w.throughput_mbps.to_numpy()
        qd = est_qdelay_ms(w.srtt_ms.to_numpy(), w.min_rtt_ms.to_numpy())
        m = {
            "throughput_mbps": float(f.throughput_mbps),
            "mean_throughput_l7": mean(thr),
            "cov_throughput_l7": cov(thr),
            "mean_cwnd_l4": mean(w.cwnd),
            "cov_cwnd_l4": cov(w.cwnd),
            "mean_in_flight_l4": mean(w.in_flight),
            "cov_in_flight_l4": cov(w.in_flight),
            "mean_srtt_l4": mean(w.srtt_ms),
            "cov_srtt_l4": cov(w.srtt_ms),
            "mean_est_qdelay_l4": mean(qd),
            "cov_est_qdelay_l4": cov(qd),
            "mean_delivery_rate_l4": mean(w.delivery_rate_mbps),
            "cov_delivery_rate_l4": cov(w.delivery_rate_mbps),
            "total_retransmissions_l4": float(f.window_retransmissions),
            "total_rtos_l4": float(f.window_rtos),
            "mean_utility_pf_l7": utility_pf(thr),
            "mean_utility_mpdf_l7": utility_mpdf(thr),
            "mean_network_power_l7": network_power(thr, w.srtt_ms.to_numpy()),
            "mean_utilization_bw_l7": utilization_bw(thr, rate),
            "mean_utilization_bdp_l4": utilization_bdp(w.in_flight.to_numpy(), rate, f.rtt_ms * 1e6, int(f.mss)),
            "flow_completion_time_l7": float(f.fct_s),
            "congestion_epochs_l4": congestion_epochs(ts[ts.flow == i], f.window_start_s, f.window_end_s),
        }
        for t in COV_TIMESCALES_S:
            m[f"cov_throughput_{t:g}s_l7"] = cov_at_timescale(thr, interval_s, t)
        out.append(m)
    return out


def run_metrics(result: "RunResult", flows: list[dict[str, float]] | None = None) -> dict[str, float]:
    """Run-level (network and link) metrics of one run.

    Includes the summary (utilisation, Jain's index, throughput ratio ...),
    the inter-group ratio, the time-averaged fairness family over the samples
    after warm-up (counting at each sample the flows whose window covers it),
    flow metrics summed or averaged over flows, and the queue's delay and
    drop rate. Flow-level aggregates count the flows under study only
    (background flows excluded); web and UDP metrics are added when the run
    has such traffic.
    """
    if flows is None:
        flows = flow_metrics(result)
    fl_all = result.flows
    studied = ~fl_all.background.to_numpy(dtype=bool) if len(fl_all) else np.zeros(0, bool)
    fl = fl_all[studied]
    s = dict(result.summary)
    out: dict[str, float] = {k: float(v) for k, v in s.items()}
    out["group_throughput_ratio"] = group_throughput_ratio(fl.throughput_mbps.to_numpy(), fl.group.to_numpy())
    out["rtt_ratio"] = rtt_ratio(fl.rtt_ms.to_numpy())

    ts = result.timeseries
    warm = result.record["warmup_ns"] / 1e9
    if len(ts):
        wide = ts[ts.t_s > warm].pivot(index="t_s", columns="flow", values="throughput_mbps")
        wide = wide[[c for c in wide.columns if c in fl.index]]
        starts = fl.window_start_s.reindex(wide.columns).to_numpy()
        ends = fl.window_end_s.reindex(wide.columns).to_numpy()
        t = wide.index.to_numpy()[:, None]
        active = (t > starts[None, :]) & (t <= ends[None, :])
        agg, jain, ent, prod = sample_fairness(wide.to_numpy(dtype=float), active)
        out["mean_agg_throughput_l7"] = mean(agg)
        out["mean_jains_fairness_throughput_l7"] = mean(jain)
        out["mean_entropy_fairness_throughput_l7"] = mean(ent)
        out["mean_product_fairness_throughput_l7"] = mean(prod)
    chosen = [f for f, keep in zip(flows, studied) if keep]
    for name in ("total_retransmissions_l4", "total_rtos_l4", "mean_utility_pf_l7", "mean_utility_mpdf_l7", "mean_network_power_l7", "mean_utilization_bw_l7"):
        vals = [f[name] for f in chosen if not math.isnan(f[name])]
        out[name] = float(sum(vals)) if vals else float("nan")
    for name in ("mean_srtt_l4", "mean_est_qdelay_l4", "mean_cwnd_l4", "cov_throughput_l7", *[f"cov_throughput_{t:g}s_l7" for t in COV_TIMESCALES_S]):
        out[name] = mean([f[name] for f in chosen if not math.isnan(f[name])])
    # The flows whose operating point is a loss cycle: long-lived, loss-based, under study.
    cycling = [f["congestion_epochs_l4"] for f, (_, row) in zip(flows, fl_all.iterrows())
               if not row.background and _loss_based(row.cca) and not (row.size_bytes == row.size_bytes and row.size_bytes)
               and not math.isnan(f["congestion_epochs_l4"])]
    out["min_congestion_epochs"] = float(min(cycling)) if cycling else float("nan")
    if not studied.all():
        out["background_throughput_mbps"] = float(fl_all.throughput_mbps[~studied].sum())

    rates = link_rates_bps(result.record)
    out["mean_queue_delay_ms"] = _queue_delay_ms(result.queue, warm, rates["forward"])
    if len(result.reverse_queue):
        out["mean_reverse_queue_delay_ms"] = _queue_delay_ms(result.reverse_queue, warm, rates["reverse"])
    link = result.record["link"]
    drops = link["drops_queue"] + link["drops_random"] + link["drops_aqm"]
    arrived = link["arrivals"] or sum(int(c["counters"]["segments_sent"]) for c in result.record["flows"])
    out["drop_rate"] = float(drops / arrived) if arrived else float("nan")

    if result.record["web"]:
        out.update(web_metrics(result.short_flows, rates, warm, result.record["duration_ns"] / 1e9))
    if len(result.udp):
        out.update(udp_metrics(result.udp))
    return out


def _queue_delay_ms(q: Any, warm_s: float, rate_bps: float) -> float:
    """Mean backlog after warm-up in bytes x 8 / the link's rate at each sample
    (the mean rate where the samples carry none)."""
    after = q[q.t_s > warm_s]
    if not len(after):
        return float("nan")
    rate = after.rate_mbps.to_numpy(dtype=float) * 1e6 if "rate_mbps" in after else np.full(len(after), rate_bps)
    rate = np.where(rate > 0, rate, rate_bps)
    return float(np.mean(after.backlog_bytes.to_numpy(dtype=float) * 8 / rate) * 1e3)
