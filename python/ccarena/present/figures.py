"""Figures (matplotlib), each saved as PNG (for the report) and PDF (for papers).

Experiment level, from a results directory's metrics:

* ``sweep_figure``: a metric against a swept parameter (or a run metric such as
  ``rtt_ratio``), one line per value of another parameter (e.g. one per CCA),
  mean with 95 % confidence intervals across repetitions as error bars,
  optionally one panel per value of a third parameter. The CUBIC paper's
  throughput ratio and link utilisation against RTT are this figure.
* ``stability_figure``: CoV of throughput against the averaging time scale.

Run level, from a run's time series:

* ``run_timeseries_figure``: throughput, cwnd, sRTT per flow (and, dotted,
  BBR's bandwidth and min RTT estimates) and the
  bottleneck queue over time (background flows muted, UDP sources and the
  reverse bottleneck's queue when the run has them);
* ``run_distribution_figure``: eCDFs of throughput and sRTT samples per flow
  and each flow's mean operating point (throughput against sRTT);
* ``run_fct_figure``: for runs with web traffic, each short flow's completion
  time against its size (with the binned median and the ideal) and the eCDF
  of completion times, per direction.

Which experiment figures a scenario gets is set by its ``[[figures]]`` tables
(docs/scenario.md); without them, ``default_figure_specs`` picks sensible ones.
"""

from __future__ import annotations

import io

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ScenarioError
from ..results.metrics import COV_TIMESCALES_S, goodput_capacity_bps
from ..scenario.checks import check_keys
from ..scenario.units import numeric, unit_of

__all__ = [
    "sweep_figure",
    "stability_figure",
    "run_timeseries_figure",
    "run_distribution_figure",
    "run_fct_figure",
    "fct_figure_spec",
    "default_figure_specs",
    "validate_figure_specs",
    "metric_label",
    "read_reference",
    "throughput_delay_figure",
    "FIGURE_KINDS",
]

FIGURE_KINDS = {"sweep", "stability"}
_SPEC_KEYS = {"kind", "x", "y", "series", "panels", "xscale", "yscale", "ylim", "title", "xlabel", "ylabel", "name", "caption", "dots", "reference"}

_METRIC_LABELS = {
    "throughput_ratio": "Throughput ratio (min / max)",
    "group_throughput_ratio": "Throughput ratio (flows[0] / flows[1])",
    "utilization": "Link utilisation",
    "link_utilization": "Link utilisation (wire bytes)",
    "jain_index": "Jain's fairness index",
    "rtt_ratio": "RTT ratio",
    "aggregate_throughput_mbps": "Aggregate throughput (Mbps)",
    "mean_queue_packets": "Mean queue (packets)",
    "mean_queue_delay_ms": "Mean queueing delay (ms)",
    "drop_rate": "Drop rate",
    "mean_srtt_l4": "Mean sRTT (ms)",
    "mean_est_qdelay_l4": "Est. queueing delay (ms)",
    "total_retransmissions_l4": "Retransmissions (segments)",
    "total_rtos_l4": "RTOs",
    "cov_throughput_l7": "CoV of throughput",
    "mean_jains_fairness_throughput_l7": "Jain's index (time mean)",
    "mean_entropy_fairness_throughput_l7": "Entropy fairness",
    "mean_product_fairness_throughput_l7": "Product fairness",
    "mean_utilization_bw_l7": "Bandwidth utilisation",
    "mean_network_power_l7": "Network power (Mbps/s)",
    "mean_cwnd_l4": "Mean cwnd (packets)",
    "web_flows": "Web flows started",
    "web_completed": "Web flows completed (share)",
    "mean_fct_s": "Mean FCT of web flows (s)",
    "median_fct_s": "Median FCT of web flows (s)",
    "p95_fct_s": "95th-percentile FCT (s)",
    "median_fct_slowdown": "Median FCT slowdown (FCT / ideal)",
    "p95_fct_slowdown": "95th-percentile FCT slowdown",
    "udp_throughput_mbps": "UDP throughput (Mbps)",
    "udp_loss_rate": "UDP loss rate",
    "background_throughput_mbps": "Background throughput (Mbps)",
    "mean_reverse_queue_delay_ms": "Mean reverse queueing delay (ms)",
}
_PARAM_LABELS = {
    "rtt": "RTT",
    "cca": "CCA",
    "bottleneck_rate": "Bottleneck rate",
    "buffer": "Buffer",
    "loss": "Loss probability",
    "count": "Flows",
    "k": "Flows (K)",
    "duration": "Duration",
}
_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "*"]


SHORT_LABELS = {
    "throughput_ratio": "thr. ratio",
    "group_throughput_ratio": "group ratio",
    "jain_index": "Jain",
    "utilization": "utilisation",
    "mean_queue_delay_ms": "queue ms",
    "total_retransmissions_l4": "retrans",
    "total_rtos_l4": "RTOs",
    "mean_srtt_l4": "sRTT ms",
    "mean_est_qdelay_l4": "est. qdelay ms",
    "median_fct_s": "median FCT s",
    "p95_fct_s": "p95 FCT s",
    "web_completed": "web done",
    "median_fct_slowdown": "FCT slowdown",
    "udp_throughput_mbps": "UDP Mbps",
}


def short_label(name: str) -> str:
    """A column heading for tables."""
    return SHORT_LABELS.get(name, metric_label(name))


def metric_label(name: str) -> str:
    if name in _METRIC_LABELS:
        return _METRIC_LABELS[name]
    return name.replace("_", " ")


def _plt():
    # matplotlib loads when the first figure is drawn: the CLI imports this
    # module for figure specs and labels too, which need none of it.
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # after choosing the file-only backend

    plt.rcParams.update(
        {
            "font.size": 9,
            "axes.titlesize": 9.5,
            "axes.labelsize": 9,
            "legend.fontsize": 8,
            "xtick.labelsize": 8,
            "ytick.labelsize": 8,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "grid.linewidth": 0.6,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "savefig.dpi": 150,
            "figure.dpi": 100,
            "pdf.fonttype": 42,
            "svg.fonttype": "none",
        }
    )
    return plt


def _save(fig, base: Path, vector: str = "pdf", tight: bool = True) -> list[Path]:
    """Writes base.png and base.<vector> (pdf for paper figures, svg for the many run figures: no font embedding)."""
    base.parent.mkdir(parents=True, exist_ok=True)
    out = []
    for ext in ("png", vector):
        p = base.with_name(f"{base.name}.{ext}")
        tmp = p.with_name(f".{p.name}.tmp.{ext}")
        fig.savefig(tmp, format=ext, bbox_inches="tight" if tight else None, pad_inches=0.03)
        tmp.replace(p)
        out.append(p)
    import matplotlib.pyplot as plt  # loaded already (by _plt): the figure exists

    plt.close(fig)
    return out


def _colors(n: int) -> list:
    plt = _plt()
    cmap = plt.get_cmap("tab10")
    return [cmap(i % 10) for i in range(n)]


# ---------------------------------------------------------------- specs


def validate_figure_specs(specs: Any) -> list[dict]:
    """Checks a scenario's [[figures]] list; raises ScenarioError naming the field."""
    if specs is None:
        return []
    if not isinstance(specs, list):
        raise ScenarioError("figures", "must be a list of [[figures]] tables")
    for i, s in enumerate(specs):
        where = f"figures[{i}]"
        if not isinstance(s, dict):
            raise ScenarioError(where, "must be a table")
        check_keys(s, _SPEC_KEYS, where)
        kind = s.get("kind", "sweep")
        if kind not in FIGURE_KINDS:
            raise ScenarioError(f"{where}.kind", f"unknown figure kind {kind!r}; allowed: {', '.join(sorted(FIGURE_KINDS))}")
        if kind == "sweep" and "x" not in s:
            raise ScenarioError(f"{where}.x", "missing required field (a swept parameter or a run metric such as rtt_ratio)")
        for k in ("xscale", "yscale"):
            if k in s and s[k] not in ("linear", "log"):
                raise ScenarioError(f"{where}.{k}", f"must be 'linear' or 'log', got {s[k]!r}")
        if "reference" in s and not isinstance(s["reference"], str):
            raise ScenarioError(f"{where}.reference", "must be the path of a CSV file (docs/scenario.md)")
        if "ylim" in s and not (isinstance(s["ylim"], list) and len(s["ylim"]) == 2):
            raise ScenarioError(f"{where}.ylim", "must be [low, high]")
    return specs


def default_figure_specs(axes: list[dict], n_flows: int) -> list[dict]:
    """Figures for a sweep that names none: key metrics against its first numeric axis."""
    if not axes:
        return []
    multi = [a for a in axes if len(a["labels"]) > 1]
    if not multi:
        return []
    numeric_axes = [a for a in multi if all(numeric(v) is not None for v in a["labels"])]
    x = numeric_axes[0] if numeric_axes else multi[0]
    rest = [a for a in multi if a is not x]
    spec: dict[str, Any] = {"kind": "sweep", "x": x["name"]}
    if rest:
        spec["series"] = rest[0]["name"]
    if len(rest) > 1:
        spec["panels"] = rest[1]["name"]
    if x in numeric_axes:
        vals = [numeric(v) for v in x["labels"]]
        if min(vals) > 0 and max(vals) / min(vals) >= 20:
            spec["xscale"] = "log"
    if n_flows > 1:
        ys = ["jain_index", "utilization", "mean_queue_delay_ms"]
    else:
        ys = ["utilization", "mean_est_qdelay_l4", "total_retransmissions_l4"]
    return [dict(spec, y=y, name=f"{y}-vs-{x['name']}") for y in ys]


def fct_figure_spec(axes: list[dict], specs: list[dict]) -> dict | None:
    """The sweep figure of median FCT for a sweep with web traffic: against the
    x (and with the series and panels) of its first sweep figure, or of the
    default ones; None when the sweep has a single point."""
    base = next((s for s in specs if s.get("kind", "sweep") == "sweep" and "x" in s), None)
    if base is None:
        defaults = default_figure_specs(axes, 2)
        base = defaults[0] if defaults else None
    if base is None:
        return None
    spec = {k: base[k] for k in ("x", "series", "panels", "xscale", "xlabel") if k in base}
    spec.update(kind="sweep", y="median_fct_s", yscale="linear", name=f"median_fct_s-vs-{base['x']}",
                caption="Median flow completion time of the web flows started after warm-up")
    return spec


def _tick(t: float) -> str:
    """A tick label: integers as integers (1000, not 1e+03), others with 3 significant digits."""
    return str(int(round(t))) if abs(t - round(t)) < 1e-9 and abs(t) < 1e7 else f"{t:.3g}"


def _legend(fig, axs, title: str | None) -> None:
    """One legend: beside a single panel, above the panels when there are several."""
    seen: dict[str, Any] = {}
    for ax in axs[0]:  # every label once, whichever panel drew it
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    # The series first, then the notes (flagged points, reference data).
    labels = sorted(seen, key=lambda lab: lab.startswith(("run too short", "reference:")))
    handles = [seen[lab] for lab in labels]
    if not handles:
        return
    if len(axs[0]) == 1:
        # Beside the axes, not over them: "best" still covers a point when the
        # curves fill the panel (Fig. 8's ratios span 0-1 at every RTT).
        axs[0][0].legend(handles, labels, title=title, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                         borderaxespad=0.0)
    else:
        fig.legend(handles, labels, title=title, frameon=False, loc="lower center", bbox_to_anchor=(0.5, 1.0),
                   ncol=min(len(labels), 6), title_fontsize=8)


def _plain_log_ticks(axis) -> None:
    """Log-axis ticks written as plain numbers (0.05, 0.1, 0.2 ...): 1-2-5 steps over
    wide ranges, finer steps over narrow ones so that there are always a few."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter  # matplotlib: see _plt

    lo, hi = axis.get_view_interval()
    lo, hi = max(min(lo, hi), 1e-12), max(lo, hi)
    ticks: list[float] = []
    for mant in ((1, 2, 5), (1, 1.5, 2, 3, 5, 7), (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8)):
        ticks = [m * 10.0**e for e in range(int(np.floor(np.log10(lo))) - 1, int(np.ceil(np.log10(hi))) + 1) for m in mant]
        ticks = [t for t in ticks if lo <= t <= hi]
        if len(ticks) >= 3:
            break
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


# ---------------------------------------------------------------- experiment figures


def _x_values(points: pd.DataFrame, x: str) -> tuple[np.ndarray, list[str] | None, str]:
    """Numeric x per point, tick labels for categorical x, and the axis label."""
    if x in points.columns and not x.endswith("_ci95") and points[x].dtype != object and f"{x}_ci95" in points.columns:
        return points[x].to_numpy(dtype=float), None, metric_label(x)
    if x not in points.columns:
        raise KeyError(x)
    vals = list(points[x])
    nums = [numeric(v) for v in vals]
    label = _PARAM_LABELS.get(x, x)
    if all(n is not None for n in nums):
        unit = unit_of(vals[0])
        return np.asarray(nums, dtype=float), None, f"{label} ({unit})" if unit else label
    cats = list(dict.fromkeys(str(v) for v in vals))
    return np.asarray([cats.index(str(v)) for v in vals], dtype=float), cats, label


def sweep_figure(points: pd.DataFrame, spec: dict, base: Path, title: str | None = None, runs: pd.DataFrame | None = None) -> list[Path]:
    """A metric against a parameter: lines per `series`, panels per `panels`,
    95 % CI error bars (cut at the metric's bounds); with `runs` (the
    experiment's ok runs: point and the metric) each repetition is a faint
    dot beside its mean, unless the spec says ``dots = false``."""
    plt = _plt()
    y = spec.get("y", "jain_index")
    series, panels = spec.get("series"), spec.get("panels")
    panel_vals = list(dict.fromkeys(points[panels])) if panels and panels in points else [None]
    ncols = len(panel_vals)
    fig, axs = plt.subplots(1, ncols, figsize=(4.2 * ncols if ncols > 1 else 4.8, 3.3), sharey=True, squeeze=False)
    series_vals = list(dict.fromkeys(points[series])) if series and series in points else [None]
    colors = _colors(len(series_vals))
    xs_all, cats, xlabel = _x_values(points, spec["x"])
    logx = spec.get("xscale") == "log"
    ref_paths = spec.get("reference") or []
    references = [read_reference(r, spec["x"], y) for r in ([ref_paths] if isinstance(ref_paths, (str, Path)) else ref_paths)]
    flagged = False
    for ax, pv in zip(axs[0], panel_vals):
        sub_mask = np.ones(len(points), bool) if pv is None else (points[panels] == pv).to_numpy()
        for k, sv in enumerate(series_vals):
            m = sub_mask & (np.ones(len(points), bool) if sv is None else (points[series] == sv).to_numpy())
            if not m.any():
                continue
            xs = xs_all[m]
            nan = pd.Series(np.nan, index=points.index)
            if spec.get("yscale") == "log" and f"{y}_gmean" in points:
                # Ratios on a log axis: geometric mean, and the 95 % CI computed on the logs (asymmetric bars).
                ys = points[f"{y}_gmean"].to_numpy(dtype=float)[m]
                lci = points.get(f"{y}_log_ci95", nan).to_numpy(dtype=float)[m]
                err = np.vstack([ys - ys / np.exp(lci), ys * np.exp(lci) - ys])
            else:
                ys = points[y].to_numpy(dtype=float)[m]
                ci = points.get(f"{y}_ci95", nan).to_numpy(dtype=float)[m]
                err = np.vstack([ci, ci])
                if f"{y}_low" in points and f"{y}_high" in points:  # the interval cut at the metric's bounds
                    err = np.vstack([ys - points[f"{y}_low"].to_numpy(dtype=float)[m], points[f"{y}_high"].to_numpy(dtype=float)[m] - ys])
            pts_ids = points["point"].to_numpy()[m] if "point" in points else None
            order = np.argsort(xs)
            xs, ys, err = xs[order], ys[order], err[:, order]
            pts_ids = pts_ids[order] if pts_ids is not None else None
            # Small horizontal offsets keep overlapping error bars apart.
            k0 = k - (len(series_vals) - 1) / 2
            if cats is not None:
                xd = xs + k0 * min(0.6 / max(len(series_vals), 1), 0.15)
            elif logx:
                xd = xs * (1 + 0.035 * k0)
            else:
                xd = xs + 0.01 * k0 * (np.ptp(xs_all) if np.ptp(xs_all) > 0 else 1)
            if runs is not None and pts_ids is not None and y in runs and spec.get("dots", True):
                for xv, pid in zip(xd, pts_ids):
                    vals = runs.loc[runs.point == pid, y].to_numpy(dtype=float)
                    vals = vals[~np.isnan(vals)]
                    if len(vals) > 1:
                        ax.plot(np.full(len(vals), xv), vals, ls="none", marker=".", ms=3.5, alpha=0.35, color=colors[k], zorder=1)
            ax.errorbar(
                xd, ys, yerr=np.where(np.isnan(err), 0, err), marker=_MARKERS[k % len(_MARKERS)], ms=4.5,
                lw=0 if cats is not None else 1.4,  # categories are not a continuum: no connecting lines
                capsize=2.5, elinewidth=0.9, color=colors[k], label=str(sv) if sv is not None else None,
            )
            if "short_run" in points:
                short = points["short_run"].fillna(False).to_numpy(dtype=bool)[m][order]
                if short.any():
                    ax.plot(xd[short], ys[short], ls="none", marker="o", ms=11, mfc="none", mec="0.45", mew=1.2, zorder=3,
                            label="run too short (docs/metrics.md)" if not flagged else None)
                    flagged = True
        for j, (ref, citation) in enumerate(references):
            if pv is not None and panels in ref:
                ref = ref[ref[panels].astype(str) == str(pv)]
            rx, rcats, _ = _x_values(ref, spec["x"]) if len(ref) else (np.array([]), None, "")
            if cats is not None and rcats is not None:  # the reference's categories placed on the figure's
                rx = np.asarray([cats.index(c) if c in cats else np.nan for c in (rcats[int(i)] for i in rx)], dtype=float)
            ax.plot(rx, ref[y].to_numpy(dtype=float), ls="none", marker="DsP^"[j % 4], ms=5.5, mfc="none", mec="black", mew=1.1,
                    zorder=4, label=citation)
        if logx:
            ax.set_xscale("log")
        if cats is not None:
            ax.set_xticks(range(len(cats)))
            ax.set_xticklabels(cats, rotation=30 if max(len(c) for c in cats) > 8 else 0, ha="right" if max(len(c) for c in cats) > 8 else "center")
        else:
            ticks = np.unique(xs_all[sub_mask]) if pv is not None else np.unique(xs_all)
            if len(ticks) <= 8:
                ax.set_xticks(ticks)
                ax.set_xticklabels([_tick(t) for t in ticks])
                ax.minorticks_off()
        if y == "group_throughput_ratio":
            ax.axhline(1.0, color="0.55", lw=0.8, ls="--", zorder=0)  # equal shares
        if spec.get("yscale") == "log":
            ax.set_yscale("log")
        if "ylim" in spec:
            ax.set_ylim(*spec["ylim"])
        ax.set_xlabel(spec.get("xlabel", xlabel))
        if pv is not None:
            ax.set_title(f"{_PARAM_LABELS.get(panels, panels)} = {pv}")
    axs[0][0].set_ylabel(spec.get("ylabel", metric_label(y)))
    if spec.get("yscale") == "log":
        for ax in axs[0]:
            ax.autoscale_view()
            _plain_log_ticks(ax.yaxis)
    if series_vals != [None] or references or flagged:
        _legend(fig, axs, _PARAM_LABELS.get(series, series) if series_vals != [None] else None)
    if title or spec.get("title"):
        fig.suptitle(spec.get("title", title), fontsize=10)
    fig.tight_layout()
    return _save(fig, base)


def read_reference(path: str | Path, x: str, y: str) -> tuple[pd.DataFrame, str]:
    """Reference data a user supplies to draw beside the simulated points: a
    CSV with a column named like the figure's x axis and one like its metric
    (more rows, other columns such as a panel's parameter, are fine), and its
    citation in a ``citation`` column or a ``# citation: ...`` first line.
    Returns the rows and the citation (the legend entry)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ValueError(f"reference {path}: cannot read it ({e.strerror or e})") from None
    citation = ""
    lines = text.splitlines()
    while lines and lines[0].startswith("#"):
        head = lines.pop(0).lstrip("#").strip()
        if head.lower().startswith("citation:"):
            citation = head.split(":", 1)[1].strip()
    ref = pd.read_csv(io.StringIO("\n".join(lines)))
    missing = [c for c in (x, y) if c not in ref.columns]
    if missing:
        raise ValueError(f"reference {path}: no column {', '.join(repr(c) for c in missing)} (has {', '.join(ref.columns)})")
    if "citation" in ref.columns and ref.citation.notna().any():
        citation = str(ref.citation.dropna().iloc[0])
    return ref, (f"reference: {citation}" if citation else f"reference: {p.name}")


def throughput_delay_figure(groups: dict[str, pd.DataFrame], base: Path, x: str = "mean_srtt_l4",
                            y: str = "aggregate_throughput_mbps") -> list[Path]:
    """Throughput against delay across experiments (Pantheon's summary): each
    run a faint dot, each experiment's mean over its runs a large marker;
    the delay axis runs right to left, so better is up and to the right."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.6, 4.0))
    colors = _colors(len(groups))
    for k, (name, runs) in enumerate(groups.items()):
        if x not in runs or y not in runs:
            continue
        xs, ys = runs[x].to_numpy(dtype=float), runs[y].to_numpy(dtype=float)
        ok = ~(np.isnan(xs) | np.isnan(ys))
        if not ok.any():
            continue
        ax.plot(xs[ok], ys[ok], ls="none", marker=".", ms=4, alpha=0.35, color=colors[k], zorder=1)
        ax.plot([xs[ok].mean()], [ys[ok].mean()], ls="none", marker=_MARKERS[k % len(_MARKERS)], ms=9, color=colors[k],
                label=name, zorder=2)
    ax.invert_xaxis()
    ax.set_xlabel(metric_label(x) + " (better \u2192)")
    ax.set_ylabel(metric_label(y))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(frameon=False, loc="best", fontsize=8)
    fig.tight_layout()
    return _save(fig, base)


def stability_figure(points: pd.DataFrame, spec: dict, base: Path, interval_s: float = 0.1, title: str | None = None) -> list[Path]:
    """CoV of throughput against the averaging time scale, lines per `series`, panels per `panels`."""
    plt = _plt()
    scales = [interval_s, *COV_TIMESCALES_S]
    names = ["cov_throughput_l7", *[f"cov_throughput_{t:g}s_l7" for t in COV_TIMESCALES_S]]
    series, panels = spec.get("series"), spec.get("panels")
    panel_vals = list(dict.fromkeys(points[panels])) if panels and panels in points else [None]
    series_vals = list(dict.fromkeys(points[series])) if series and series in points else [None]
    colors = _colors(len(series_vals))
    fig, axs = plt.subplots(1, len(panel_vals), figsize=(4.2 * len(panel_vals) if len(panel_vals) > 1 else 4.8, 3.3), sharey=True, squeeze=False)
    for ax, pv in zip(axs[0], panel_vals):
        for k, sv in enumerate(series_vals):
            m = np.ones(len(points), bool)
            if pv is not None:
                m &= (points[panels] == pv).to_numpy()
            if sv is not None:
                m &= (points[series] == sv).to_numpy()
            if not m.any():
                continue
            row = points[m].iloc[0]
            ys = np.array([row.get(n, np.nan) for n in names], dtype=float)
            ci = np.array([row.get(f"{n}_ci95", np.nan) for n in names], dtype=float)
            ok = ~np.isnan(ys)
            ax.errorbar(np.array(scales)[ok], ys[ok], yerr=np.where(np.isnan(ci), 0, ci)[ok], marker=_MARKERS[k % len(_MARKERS)],
                        ms=4.5, lw=1.4, capsize=2.5, elinewidth=0.9, color=colors[k], label=str(sv) if sv is not None else None)
        ax.set_xscale("log")
        ax.set_xticks(scales)
        ax.set_xticklabels([f"{s:g}" for s in scales])
        ax.minorticks_off()
        ax.set_xlabel("Averaging time scale (s)")
        if pv is not None:
            ax.set_title(f"{_PARAM_LABELS.get(panels, panels)} = {pv}")
    axs[0][0].set_ylabel(spec.get("ylabel", "CoV of per-flow throughput"))
    axs[0][0].set_ylim(bottom=0)  # after every panel is drawn: the axes share y
    if series_vals != [None]:
        _legend(fig, axs, _PARAM_LABELS.get(series, series))
    if title or spec.get("title"):
        fig.suptitle(spec.get("title", title), fontsize=10)
    fig.tight_layout()
    return _save(fig, base)


# ---------------------------------------------------------------- run figures


def _flow_names(flows: pd.DataFrame) -> list[str]:
    out = []
    for i, f in flows.iterrows():
        rev = ", reverse" if f.get("direction", "forward") == "reverse" else ""
        out.append(f"{i}: {f['label']}, {f['rtt_ms']:g} ms{rev}")
    return out


def _smooth(t: np.ndarray, y: np.ndarray, interval: float, window_s: float) -> tuple[np.ndarray, np.ndarray]:
    m = max(int(round(window_s / interval)), 1)
    if m <= 1 or len(y) < m:
        return t, y
    n = len(y) // m
    return t[m - 1 : n * m : m], y[: n * m].reshape(n, m).mean(axis=1)


def _background_mask(flows: pd.DataFrame) -> np.ndarray:
    if "background" not in flows:
        return np.zeros(len(flows), bool)
    return flows["background"].fillna(False).to_numpy(dtype=bool)


_BACKGROUND_GREY = "0.62"
_UDP_STYLES = ["--", "-.", ":"]


def model_estimates(s: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """A flow's samples of its algorithm's own estimates (BBR's bandwidth in
    Mbit/s and min RTT in ms, `cc_bw_mbps` and `cc_min_rtt_ms`), where it
    reported them: times, bandwidths, min RTTs; None for an algorithm that
    reports nothing (or series stored before the columns existed)."""
    if "cc_bw_mbps" not in s.columns:
        return None
    bw = s.cc_bw_mbps.to_numpy(dtype=float)
    min_rtt = s.cc_min_rtt_ms.to_numpy(dtype=float)
    known = ~np.isnan(bw) & (min_rtt > 0)
    if not known.any():
        return None
    return s.t_s.to_numpy()[known], bw[known], min_rtt[known]


def run_timeseries_figure(ts: pd.DataFrame, queue: pd.DataFrame, flows: pd.DataFrame, base: Path, title: str = "",
                          warmup_s: float = 0.0, buffer_packets: float | None = None, udp_ts: pd.DataFrame | None = None,
                          udp: pd.DataFrame | None = None, reverse_queue: pd.DataFrame | None = None,
                          buffer_bytes: float | None = None) -> list[Path]:
    """Throughput, cwnd, sRTT per flow and the bottleneck queue over time (shared time axis).

    The flows under study are drawn in colour. Background flows appear in the
    throughput panel only, as thin grey lines (their windows and RTTs differ
    so much that in the cwnd and sRTT panels they would hide the flows under
    study). UDP sources (`udp_ts`, labelled from `udp`) are dashed lines in
    the throughput panel, summed when there are more than two; the reverse
    bottleneck's queue (`reverse_queue`) is a second line in the queue panel.
    With `buffer_bytes` (a buffer given in bytes) the queue is drawn in bytes:
    small packets (ACKs of reverse traffic, short web segments) make a
    packet count overshoot such a buffer.
    """
    plt = _plt()
    fig, axs = plt.subplots(4, 1, figsize=(7.0, 7.4), sharex=True)
    bg = _background_mask(flows)
    studied, background = flows[~bg], flows[bg]
    names = _flow_names(studied)
    colors = _colors(len(studied))
    interval = float(np.median(np.diff(ts.t_s.unique()))) if ts.t_s.nunique() > 1 else 0.1
    duration = float(max(ts.t_s.max() if len(ts) else 0.0, queue.t_s.max() if len(queue) else 0.0)) or 1.0
    smooth_s = 1.0 if duration >= 30 else interval
    lw = 0.9 if len(studied) <= 4 else 0.7
    for k, fid in enumerate(background.index):
        s = ts[ts.flow == fid]
        tt, thr = _smooth(s.t_s.to_numpy(), s.throughput_mbps.to_numpy(dtype=float), interval, smooth_s)
        axs[0].plot(tt, thr, lw=0.5, color=_BACKGROUND_GREY, alpha=0.7, zorder=1,
                    label=f"background ({len(background)} flow{'s' if len(background) > 1 else ''}, throughput only)" if k == 0 else None)
    modelled = False
    for i, (fid, f) in enumerate(studied.iterrows()):
        s = ts[ts.flow == fid]
        t = s.t_s.to_numpy()
        tt, thr = _smooth(t, s.throughput_mbps.to_numpy(dtype=float), interval, smooth_s)
        axs[0].plot(tt, thr, lw=lw, color=colors[i], label=names[i], zorder=3)
        axs[1].plot(t, s.cwnd.to_numpy(), lw=lw, color=colors[i])
        srtt = s.srtt_ms.to_numpy(dtype=float)
        axs[2].plot(t[srtt > 0], srtt[srtt > 0], lw=lw, color=colors[i])
        model = model_estimates(s)
        if model is not None:
            # What the algorithm believes (BBR's bandwidth and min RTT
            # estimates), dotted beside what the flow got.
            mt, bw, min_rtt = model
            axs[0].plot(mt, bw, lw=0.7, ls=":", color=colors[i], zorder=2,
                        label=None if modelled else "dotted: the algorithm's bandwidth / min RTT estimate")
            axs[2].plot(mt, min_rtt, lw=0.7, ls=":", color=colors[i])
            modelled = True
    if udp_ts is not None and len(udp_ts):
        sources = sorted(udp_ts.source.unique())
        labels = {int(i): str(r["label"]) for i, r in udp.iterrows()} if udp is not None and len(udp) else {}
        if len(sources) > 2:
            tot = udp_ts.groupby("t_s").throughput_mbps.sum()
            groups = [(f"UDP ({len(sources)} sources, sum)", tot.index.to_numpy(dtype=float), tot.to_numpy(dtype=float))]
        else:
            groups = []
            for src in sources:
                u = udp_ts[udp_ts.source == src]
                groups.append((f"UDP {src}: {labels.get(int(src), 'udp')}", u.t_s.to_numpy(dtype=float), u.throughput_mbps.to_numpy(dtype=float)))
        for k, (label, t, y) in enumerate(groups):
            tt, yy = _smooth(t, y, interval, smooth_s)
            axs[0].plot(tt, yy, lw=1.0, color="0.15", ls=_UDP_STYLES[k % len(_UDP_STYLES)], label=label, zorder=2)
    reverse = reverse_queue is not None and len(reverse_queue) > 0
    if buffer_bytes:
        scale, unit = (1e6, "MB") if buffer_bytes >= 1e6 else (1e3, "KB")
        column, limit, qlabel = "backlog_bytes", buffer_bytes / scale, f"Queue ({unit})"
    else:
        scale, column, limit, qlabel = 1.0, "backlog_packets", buffer_packets, "Queue (packets)"
    axs[3].plot(queue.t_s, queue[column] / scale, lw=0.8, color="0.25", label="forward" if reverse else None)
    if reverse:
        axs[3].plot(reverse_queue.t_s, reverse_queue[column].to_numpy(dtype=float) / scale, lw=0.8, color="#c0504d", alpha=0.9, label="reverse")
    if limit:
        axs[3].axhline(limit, color="0.5", lw=0.8, ls="--")
        axs[3].annotate("buffer", (duration, limit), xytext=(-2, 2), textcoords="offset points", ha="right", va="bottom", fontsize=7, color="0.4")
    axs[0].set_ylabel("Throughput (Mbps)" + (f"\n{smooth_s:g} s mean" if smooth_s > interval else ""))
    axs[1].set_ylabel("cwnd (packets)")
    axs[2].set_ylabel("sRTT (ms)")
    axs[3].set_ylabel(qlabel)
    axs[3].set_xlabel("Time (s)")
    for ax in axs:
        if ax is not axs[2]:  # sRTT: its range, not from 0, so the queueing delay shows
            ax.set_ylim(bottom=0)
        if warmup_s > 0:
            ax.axvspan(0, warmup_s, color="0.9", lw=0, zorder=0)
    if limit:
        axs[3].set_ylim(top=max(axs[3].get_ylim()[1], limit * 1.12))  # room for the label above the line
    if reverse:
        # Headroom for the legend (top left: the buffer label is at the right).
        axs[3].set_ylim(top=axs[3].get_ylim()[1] * 1.25)
        axs[3].legend(frameon=False, fontsize=7, loc="upper left", ncol=2, borderaxespad=0.2)
    axs[3].set_xlim(0, duration)
    handles, labels = axs[0].get_legend_handles_labels()
    # The flows under study first, then the background and UDP lines.
    order = [k for k, lab in enumerate(labels) if not lab.startswith(("background", "UDP"))] + \
            [k for k, lab in enumerate(labels) if lab.startswith(("background", "UDP"))]
    ncol = (min(len(labels), 4) if max(map(len, labels), default=0) <= 24 else min(len(labels), 3)) or 1
    if handles:
        axs[0].legend([handles[k] for k in order], [labels[k] for k in order], frameon=False, ncol=ncol, loc="lower left",
                      bbox_to_anchor=(0, 1.0), fontsize=7, borderaxespad=0.2)
    if title:
        fig.suptitle(title + ("  (grey: warm-up, excluded from metrics)" if warmup_s > 0 else ""), fontsize=9)
    fig.tight_layout()
    return _save(fig, base, "svg", tight=False)


def _ecdf(ax, values: np.ndarray, color, label=None) -> None:
    v = np.sort(values[~np.isnan(values)])
    if not len(v):
        return
    ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post", color=color, lw=1.1, label=label)


def run_distribution_figure(ts: pd.DataFrame, flows: pd.DataFrame, base: Path, title: str = "", capacity_mbps: float | None = None) -> list[Path]:
    """eCDFs of per-sample throughput and sRTT per flow, and each flow's mean operating point."""
    plt = _plt()
    fig, axs = plt.subplots(1, 3, figsize=(10.0, 3.2))
    names = _flow_names(flows)
    colors = _colors(len(flows))
    for i, (fid, f) in enumerate(flows.iterrows()):
        s = ts[(ts.flow == fid) & (ts.t_s > f.window_start_s) & (ts.t_s <= f.window_end_s)]
        thr = s.throughput_mbps.to_numpy(dtype=float)
        srtt = s.srtt_ms.to_numpy(dtype=float)
        _ecdf(axs[0], thr, colors[i], names[i])
        _ecdf(axs[1], srtt, colors[i])
        if len(s):
            mx, my = float(np.mean(srtt)), float(np.mean(thr))
            xe = [[max(mx - np.percentile(srtt, 10), 0)], [max(np.percentile(srtt, 90) - mx, 0)]]
            ye = [[max(my - np.percentile(thr, 10), 0)], [max(np.percentile(thr, 90) - my, 0)]]
            many = len(flows) > 4  # many flows: faint bars so the points stay readable
            axs[2].errorbar([mx], [my], xerr=xe, yerr=ye, marker=_MARKERS[i % len(_MARKERS)], ms=6, color=colors[i],
                            capsize=0 if many else 2.5, elinewidth=0.6 if many else 0.9, alpha=1.0, ecolor=(*colors[i][:3], 0.35 if many else 1.0))
    axs[0].set_xlabel("Throughput per sample (Mbps)")
    axs[0].set_ylabel("eCDF")
    axs[1].set_xlabel("sRTT (ms)")
    axs[1].set_ylabel("eCDF")
    axs[2].set_xlabel("Mean sRTT (ms)")
    axs[2].set_ylabel("Mean throughput (Mbps)")
    axs[2].set_title("Operating point (bars: 10th-90th percentile)", fontsize=8.5)
    if capacity_mbps and len(flows):
        share = capacity_mbps / len(flows)
        axs[2].axhline(share, color="0.5", lw=0.8, ls=":")
        axs[2].annotate("equal share", (1, share), xycoords=("axes fraction", "data"), xytext=(-2, 2), textcoords="offset points", ha="right", va="bottom", fontsize=7, color="0.4")
    axs[2].set_ylim(bottom=0)
    for ax in axs[:2]:
        ax.set_ylim(0, 1.02)
    if len(flows) <= 3:
        axs[0].legend(frameon=False, fontsize=7, loc="lower right")
    if title:
        fig.suptitle(title, fontsize=9.5)
    fig.tight_layout()
    if len(flows) > 3:
        handles, labels = axs[0].get_legend_handles_labels()
        rows = -(-len(labels) // 5)
        fig.subplots_adjust(bottom=0.17 + 0.06 * rows)
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), frameon=False, fontsize=7)
    return _save(fig, base, "svg", tight=False)


_DIRECTION_COLORS = {"forward": "#1f77b4", "reverse": "#d62728"}


def _size_label(v: float, _pos=None) -> str:
    for unit, scale in (("MB", 1e6), ("KB", 1e3)):
        if v >= scale:
            return f"{v / scale:g} {unit}"
    return f"{v:g} B"


def _binned_median(x: np.ndarray, y: np.ndarray, per_decade: int = 4, min_count: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Median of y in logarithmic bins of x (bins with fewer than `min_count` points left out),
    at each bin's geometric centre."""
    if not len(x):
        return np.array([]), np.array([])
    lx = np.log10(x)
    edges = np.arange(np.floor(lx.min() * per_decade) / per_decade, lx.max() + 1.0 / per_decade, 1.0 / per_decade)
    idx = np.digitize(lx, edges)
    xs, ys = [], []
    for k in np.unique(idx):
        m = idx == k
        if m.sum() >= min_count:
            xs.append(10 ** float(np.median(lx[m])))
            ys.append(float(np.median(y[m])))
    return np.asarray(xs), np.asarray(ys)


def run_fct_figure(short_flows: pd.DataFrame, base: Path, rates_mbps: dict[str, float], title: str = "",
                   start_s: float = 0.0, end_s: float = float("inf")) -> list[Path]:
    """Web flows' completion times: FCT against transfer size (log-log, a dot per
    completed flow, the median per size bin and the ideal 1.5 x mean RTT +
    size / goodput capacity) and the eCDF of FCT, one colour per direction.

    Only flows that started in [start_s, end_s) (the measurement window) are
    drawn, as in the web metrics; the legend counts the flows that did not
    complete before the run ended. `rates_mbps` maps a direction to its
    bottleneck's mean rate (``metrics.link_rates_bps`` / 1e6).
    """
    # matplotlib: see _plt.
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    plt = _plt()
    sf = short_flows[(short_flows.start_s >= start_s) & (short_flows.start_s < end_s)]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(9.0, 3.6), gridspec_kw={"width_ratios": [1.35, 1.0]})
    directions = [d for d in ("forward", "reverse") if (sf.direction == d).any()]
    directions += sorted(set(sf.direction) - set(directions))
    handles: list = []
    labels: list[str] = []
    for k, d in enumerate(directions):
        g = sf[sf.direction == d]
        done = g[g.fct_s.notna() & (g.fct_s > 0)]
        color = _DIRECTION_COLORS.get(d, _colors(k + 3)[k + 2])
        x, y = done.size_bytes.to_numpy(dtype=float), done.fct_s.to_numpy(dtype=float)
        ax.scatter(x, y, s=3, alpha=0.18 if len(done) > 2000 else 0.35, lw=0, color=color, rasterized=True, zorder=2)
        bx, by = _binned_median(x, y)
        ax.plot(bx, by, color=color, lw=1.8, marker="o", ms=3.2, mec="white", mew=0.5, zorder=4)
        _ecdf(ax2, y, color)
        if len(y):
            ax2.plot([np.median(y)], [0.5], marker="o", ms=4, color=color, mec="white", mew=0.5, zorder=4)
        unfinished = len(g) - int(g.fct_s.notna().sum())
        handles.append(Line2D([], [], color=color, lw=1.8, marker="o", ms=4, mec="white", mew=0.5))
        labels.append(f"{d}: {len(g):,} flows" + (f", {unfinished:,} unfinished" if unfinished else "") + f"; median {np.median(y) * 1e3:.0f} ms"
                      if len(y) else f"{d}: {len(g):,} flows, none completed")
    if len(sf):
        sizes = sf.size_bytes.to_numpy(dtype=float)
        xs = np.logspace(np.log10(max(sizes.min(), 1.0)), np.log10(sizes.max()), 200)
        per_dir = {d: rates_mbps.get(d, rates_mbps.get("forward", 0.0)) for d in directions}
        distinct = len({round(r, 3) for r in per_dir.values()}) > 1
        curves = [(d, sf[sf.direction == d]) for d in directions] if distinct else [(None, sf)]
        for d, g in curves:
            rate = per_dir.get(d, rates_mbps.get("forward", 0.0)) if d else next(iter(per_dir.values()))
            if rate <= 0:
                continue
            rtt = float(g.rtt_ms.mean()) / 1e3
            ideal = 1.5 * rtt + xs * 8 / goodput_capacity_bps(rate * 1e6)
            ax.plot(xs, ideal, color="black" if d is None else _DIRECTION_COLORS.get(d, "black"), lw=1.1, ls="--", zorder=5)
            what = f" ({d})" if d else ""
            handles.append(Line2D([], [], color="0.1", lw=1.1, ls="--"))
            labels.append(f"ideal{what}: 1.5 x mean RTT ({rtt * 1e3:.0f} ms) + size / {rate:g} Mbps")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10))
    ax.xaxis.set_major_formatter(FuncFormatter(_size_label))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("Transfer size")
    ax.set_ylabel("Flow completion time (s)")
    ax.set_title("FCT per flow; line: median per size bin", fontsize=8.5)
    ax2.set_xscale("log")
    ax2.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax2.xaxis.set_minor_formatter(NullFormatter())
    ax2.set_xlabel("Flow completion time (s)")
    ax2.set_ylabel("eCDF (completed flows)")
    ax2.set_ylim(0, 1.02)
    ax2.set_title("Distribution of FCT; dot: median", fontsize=8.5)
    if not sf.fct_s.notna().any():
        for a in (ax, ax2):
            a.text(0.5, 0.5, "no web flow completed", transform=a.transAxes, ha="center", va="center", color="0.4")
    if title:
        fig.suptitle(title, fontsize=9.5)
    fig.tight_layout()
    if handles:
        rows = -(-len(labels) // 2)
        fig.subplots_adjust(bottom=0.13 + 0.055 * rows)
        fig.legend(handles, labels, loc="lower center", ncol=2, frameon=False, fontsize=7.5)
    return _save(fig, base, "svg", tight=False)
