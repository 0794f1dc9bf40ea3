"""Draw a per-flow time series of saved runs, one panel per run, for
side-by-side reading of what a simulator setting and the kernel did (the
figures of docs/fidelity.md).

    python tools/plot_runs.py --series cwnd --out docs/img/x.png \
        "sim:results/validate/<set>/runs/<case>/sim-seed2" \
        "kernel:results/validate/<set>/runs/<case>/linux-seed2"

Each argument is LABEL:RUN_DIRECTORY (any directory `ccarena run`,
`validate` or a sweep saved); the series is one of the flow series a record
holds (cwnd, throughput_bps, srtt_us, in_flight, ...).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ccarena.results.result import read_record  # noqa: E402

UNITS = {"cwnd": "cwnd (segments)", "throughput_bps": "throughput (Mbit/s)", "srtt_us": "smoothed RTT (ms)", "in_flight": "in flight (segments)"}
SCALE = {"throughput_bps": 1e-6, "srtt_us": 1e-3}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="LABEL:RUN_DIRECTORY")
    ap.add_argument("--series", default="cwnd")
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default=None)
    args = ap.parse_args()
    panels = []
    for spec in args.runs:
        label, sep, directory = spec.partition(":")
        if not sep or not Path(directory).is_dir():
            print(f"plot_runs: {spec!r} is not LABEL:RUN_DIRECTORY", file=sys.stderr)
            return 2
        panels.append((label, read_record(directory)))
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.2 * len(panels)), sharex=True, squeeze=False)
    scale = SCALE.get(args.series, 1.0)
    for ax, (label, record) in zip(axes[:, 0], panels):
        for i, (flow, series) in enumerate(zip(record["flows"], record["flow_series"])):
            if args.series not in series:
                print(f"plot_runs: no series {args.series!r}; the record has {', '.join(sorted(series))}", file=sys.stderr)
                return 2
            t = [x / 1e9 for x in series["t_ns"]]
            name = f"flow {i}: {flow.get('label') or flow['cca']}, {flow['rtt_ns'] / 1e6:g} ms"
            ax.plot(t, [v * scale for v in series[args.series]], lw=0.8, label=name)
        ax.set_title(label, fontsize=10, loc="left")
        ax.set_ylabel(UNITS.get(args.series, args.series), fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper right")
    axes[-1, 0].set_xlabel("time (s)")
    if args.title:
        fig.suptitle(args.title, fontsize=11)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
