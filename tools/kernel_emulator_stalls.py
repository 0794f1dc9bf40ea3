"""How late the linux backend's delay emulator was in stored kernel runs, and
what that did to the runs.

The delay program (linux/delay.c) holds every flow's ACKs for their
propagation delay; when it runs late, every flow's ACKs due meanwhile leave
together at its next wake-up: a stall of the return path common to all
flows. Each kernel run's record keeps the program's lateness statistics and
its late wake-ups (``linux.delay_stats``: ``late_mean_us``, ``late_p99_us``,
..., and ``late_wakeups``, one ``[t_us, late_us]`` pair per wake-up at least
200 us late, in runs stored since the program logs them).

For the kernel runs of one or more stored validation sets (``ccarena
validate ... --out DIR``) this prints, per run, the emulator's lateness next
to the run's utilisation, throughput ratio and share of loss episodes that
took both flows, and per case how utilisation goes with the emulator's mean
lateness (Pearson's r over the runs), and, in runs that recorded the
machine's CPU time (``linux.cpu_s``), with the share the hypervisor took
(``steal``). ``--fit CASE`` pools that case's late
wake-ups after the warm-up into a ``network.return_stalls`` setting for the
simulator (the wake-ups' rate as ``every``, their lateness as an empirical
distribution), ready for ``--set``. ``--plot PNG`` draws utilisation
against mean lateness, one panel per case.

What the late wake-ups measure: how much later than it asked for the
program woke. It wakes at least every 100 us from the first packet on, so
a stall is seen whether or not an ACK fell due in it. Runs stored before
that probe (2026-11-27, 12:10) logged only the first due packet's lateness
at each wake-up: with offloads on (about 1,600 ACKs a second at 400
Mbit/s) that missed most stalls under half a millisecond and shortened the
rest; with offloads off (10,000 a second and more) much less.

Usage::

    python tools/kernel_emulator_stalls.py results/validate/paper-quick-* [--fit CASE] [--plot out.png]

Prints JSON; the numbers and commands are recorded in docs/fidelity.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from ccarena.experiments.crosscheck import metrics_of  # noqa: E402  (after the path is set)
from ccarena.experiments.machine_stalls import backend_section, stalls_setting, window_lateness  # noqa: E402
from ccarena.results.result import load_result  # noqa: E402

def stall_summary(late_us: np.ndarray, seconds: float) -> dict:
    """How often the emulator was at least 0.5, 1 and 2 ms late, a second,
    and the late wake-ups' percentiles."""
    out = {f"late_{name}_per_s": float(np.sum(late_us >= us) / seconds) for name, us in (("0.5ms", 500), ("1ms", 1000), ("2ms", 2000))}
    if len(late_us):
        out.update({f"wakeup_p{q}_us": float(np.percentile(late_us, q)) for q in (50, 90, 99)})
    return out


def kernel_runs(directories: list[Path]) -> pd.DataFrame:
    """One row per kernel run of the stored sets: its metrics as validate
    computes them and its emulator's lateness."""
    rows = []
    for d in directories:
        for run in sorted((d / "runs").glob("*/linux-seed*")):
            if not (run / "result.json").exists():
                continue
            result = load_result(run)
            m = metrics_of(result)
            rec = result.record
            stats = backend_section(rec).get("delay_stats") or {}
            start, end = rec["warmup_ns"] / 1e9, rec["duration_ns"] / 1e9
            row = {"set": d.name, "case": run.parent.name, "seed": int(run.name.rsplit("seed", 1)[1]),
                   **{k: m[k] for k in ("utilization", "ratio", "both_lost", "retrans", "steal_pct")},
                   **{k: stats.get(k) for k in ("late_mean_us", "late_p50_us", "late_p99_us", "late_max_us")}}
            late = window_lateness(stats, start, end)
            if late is not None:
                row.update(stall_summary(late, end - start))
            rows.append(row)
    return pd.DataFrame(rows)


def correlations(runs: pd.DataFrame) -> dict:
    """Per case: Pearson's r of utilisation (and of the both-flow loss
    share) with the emulator's mean lateness, over the runs that have both."""
    out = {}
    for case, g in runs.dropna(subset=["late_mean_us"]).groupby("case"):
        if len(g) < 3:
            continue
        both = g.dropna(subset=["both_lost"])
        out[case] = {"runs": len(g), "r_utilization": float(np.corrcoef(g.utilization, g.late_mean_us)[0, 1]),
                     "r_both_lost": float(np.corrcoef(both.both_lost, both.late_mean_us)[0, 1]) if len(both) >= 3 else None}
        stolen = g.dropna(subset=["steal_pct"])
        if len(stolen) >= 3:
            out[case]["r_utilization_steal"] = float(np.corrcoef(stolen.utilization, stolen.steal_pct)[0, 1])
            out[case]["r_late_steal"] = float(np.corrcoef(stolen.late_mean_us, stolen.steal_pct)[0, 1])
    return out


def fit_case(directories: list[Path], case: str) -> dict:
    """The `network.return_stalls` setting from every late wake-up after the
    warm-up in `case`'s kernel runs, pooled."""
    late, seconds = [], 0.0
    for d in directories:
        for run in sorted((d / "runs" / case).glob("linux-seed*")):
            rec = json.loads(gzip.open(run / "record.json.gz").read())
            start, end = rec["warmup_ns"] / 1e9, rec["duration_ns"] / 1e9
            w = window_lateness(backend_section(rec).get("delay_stats"), start, end)
            if w is not None:
                late.append(w)
                seconds += end - start
    if not late:
        raise SystemExit(f"{case}: no kernel run with the delay program's late wake-ups")
    return stalls_setting(np.concatenate(late), seconds)


def to_set_option(setting: dict) -> str:
    """The setting as one `--set network.return_stalls=...` argument."""
    d = setting["duration"]
    if isinstance(d, str):
        duration = f'"{d}"'
    else:
        values = ", ".join(f'"{v}"' for v in d["values"])
        duration = f'{{distribution="empirical", values=[{values}], probabilities={list(d["probabilities"])}}}'
    return f'network.return_stalls={{every="{setting["every"]}", duration={duration}}}'



def plot(runs: pd.DataFrame, path: Path) -> None:
    """Utilisation against the emulator's mean lateness, one panel per case."""
    import matplotlib  # why: only --plot needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # why: after the back end is chosen

    data = runs.dropna(subset=["late_mean_us"])
    cases = sorted(data.case.unique())
    fig, axes = plt.subplots(1, len(cases), figsize=(3.2 * len(cases), 3.0), sharey=True, squeeze=False)
    colour = {name: f"C{i}" for i, name in enumerate(sorted(data.set.unique()))}  # one colour per set in every panel
    for ax, case in zip(axes[0], cases):
        for name, g in data[data.case == case].groupby("set"):
            ax.scatter(g.late_mean_us, 100 * g.utilization, s=18, color=colour[name], label=name)
        ax.set_title(case, fontsize=8)
        ax.set_xlabel("delay emulator's mean lateness (us)", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("kernel run's utilisation (%)", fontsize=8)
    handles = [plt.Line2D([], [], marker="o", linestyle="", color=c, label=name) for name, c in colour.items()]
    axes[0][-1].legend(handles=handles, fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=150)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("directories", nargs="+", type=Path, help="stored validation sets (ccarena validate --out)")
    ap.add_argument("--fit", metavar="CASE", help="print the network.return_stalls setting for this case's runs")
    ap.add_argument("--plot", type=Path, metavar="PNG")
    args = ap.parse_args()
    if args.fit:
        print(to_set_option(fit_case(args.directories, args.fit)))
        return
    runs = kernel_runs(args.directories)
    if args.plot:
        plot(runs, args.plot)
    print(json.dumps({"runs": runs.replace({np.nan: None}).to_dict(orient="records"), "correlations": correlations(runs)}, indent=1))


if __name__ == "__main__":
    main()
