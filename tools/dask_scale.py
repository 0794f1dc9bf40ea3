"""How a sweep's throughput grows with the workers it runs on.

Runs the same sweep (the `bench` scenario, two CUBIC flows at 400 Mbit/s,
over --runs seeds of --duration simulated seconds each) through `ccarena
sweep` once per setting, into a fresh results directory each time, and reports
the whole command's wall time and the runs completed per minute:

* `--dask local --jobs N`: a Dask LocalCluster of N single-threaded worker
  processes (what a cluster of N cores does, start-up of the cluster included);
* `--jobs N` alone: the built-in process pool, for comparison.

    python tools/dask_scale.py                         # workers 1 2 3 4, both executors
    python tools/dask_scale.py --workers 1 2 --runs 8  # smaller
    python tools/dask_scale.py --plot dask.png --json dask.json

Run it on a quiet machine: wall times are the point. docs/performance.md has
the results; beyond one machine the same sweep runs on a scheduler given by
address (`--dask tcp://host:8786`, e.g. started by dask-jobqueue on SLURM).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_SWEEP = """name = "dask-scale"
[network]
bottleneck_rate = "400Mbps"
buffer = "2MB"
[[flows]]
cca = "cubic"
rtt = "40ms"
count = 2
[run]
duration = "{duration}s"
warmup = "{warmup}s"
[sweep]
seeds = {seeds}
"""


def _ccarena() -> str:
    exe = Path(sys.executable).with_name("ccarena")
    return str(exe) if exe.exists() else "ccarena"


def _one(executor: str, workers: int, runs: int, duration: float, keep: bool) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="dask-scale-"))
    try:
        toml = tmp / "sweep.toml"
        text = _SWEEP.format(duration=f"{duration:g}", warmup=f"{duration / 6:g}", seeds=list(range(1, runs + 1)))
        toml.write_text(text)
        cmd = [_ccarena(), "sweep", str(toml), "-o", str(tmp / "results"), "--json", "--jobs", str(workers)]
        if executor == "dask":
            cmd += ["--dask", "local"]
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if out.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
        counts = json.loads(out.stdout.strip().splitlines()[-1])
        done = int(counts.get("computed", counts.get("done", runs)))
        # The sweep's own wall time excludes the process's and the cluster's start-up.
        sweep_wall = float(counts.get("wall_s", wall))
        return {"executor": executor, "workers": workers, "runs": done, "wall_s": wall, "sweep_wall_s": sweep_wall,
                "runs_per_min": 60 * done / wall}
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3, 4])
    ap.add_argument("--runs", type=int, default=16, help="runs in the sweep (seeds)")
    ap.add_argument("--duration", type=float, default=300.0, help="simulated seconds per run")
    ap.add_argument("--executors", nargs="+", default=["dask", "pool"], choices=["dask", "pool"])
    ap.add_argument("--json", type=Path, help="store the rows here")
    ap.add_argument("--plot", type=Path, help="draw runs per minute against workers here (PNG)")
    ap.add_argument("--keep", action="store_true", help="keep the results directories")
    a = ap.parse_args()
    rows = []
    print(f"# {a.runs} runs of {a.duration:g} s simulated (bench scenario), {os.cpu_count()} cores")
    print("| executor | workers | runs | wall s (command) | wall s (sweep) | runs per minute | speed-up |")
    print("|---|---|---|---|---|---|---|")
    for ex in a.executors:
        base = None
        for n in a.workers:
            r = _one(ex, n, a.runs, a.duration, a.keep)
            base = base or r["runs_per_min"]
            r["speedup"] = r["runs_per_min"] / base
            rows.append(r)
            name = "dask LocalCluster" if ex == "dask" else "process pool"
            print(f"| {name} | {n} | {r['runs']} | {r['wall_s']:.1f} | {r['sweep_wall_s']:.1f} | {r['runs_per_min']:.1f} | {r['speedup']:.2f} |", flush=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=2))
    if a.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.4), dpi=150)
        for ex, marker in (("dask", "o"), ("pool", "s")):
            pts = [(r["workers"], r["runs_per_min"]) for r in rows if r["executor"] == ex]
            if pts:
                ax.plot(*zip(*pts), marker=marker, label="Dask LocalCluster" if ex == "dask" else "process pool (--jobs)")
        ws = sorted({r["workers"] for r in rows})
        first = [r["runs_per_min"] / r["workers"] for r in rows if r["workers"] == ws[0] and r["executor"] == a.executors[0]]
        if first:
            ax.plot(ws, [first[0] * w for w in ws], ls=":", color="grey", label="linear in workers")
        ax.axvline(os.cpu_count() or 1, color="grey", lw=0.8, ls="--")
        ax.text(os.cpu_count() or 1, ax.get_ylim()[0], " cores", color="grey", va="bottom", fontsize=8)
        ax.set_xlabel("workers")
        ax.set_ylabel("runs per minute")
        ax.set_xticks(ws)
        ax.set_title(f"{a.runs} runs of {a.duration:g} s at 400 Mbit/s", fontsize=9)
        ax.legend(fontsize=7, frameon=False)
        fig.tight_layout()
        fig.savefig(a.plot)
        print(f"plot: {a.plot}")


if __name__ == "__main__":
    main()
