"""How the engine's cost grows with flows, web-flow arrivals and simulated time.

Three families of runs, each case in a fresh process so that peak memory is
its own (the engine only: the process's peak resident set minus what it held
before the run):

* flows: N long-lived CUBIC flows (20 ms) sharing a 10 Gbit/s bottleneck with a
  12 MB (10 ms) buffer, N = 1 .. 1,000, 10 s simulated;
* web: one CUBIC flow and SURGE web traffic (mean transfer ~55 KB) over a
  10 Gbit/s bottleneck at loads giving about 100 .. 10,000 new flows per second, 10 s simulated;
* duration: the `bench` scenario (two CUBIC flows at 400 Mbit/s) for
  60 s .. 3,600 s simulated.

    python tools/scale.py                      # all cases, a table on stdout
    python tools/scale.py --json out.json      # also store the numbers
    python tools/scale.py --plot scale.png     # and draw the log-log plot
    python tools/scale.py --quick              # the smaller cases only

Wall time is the engine call only (median of --repeat runs, each in its own
process). Run it on a quiet machine; docs/performance.md has the results.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

_CHILD = r"""
import json, resource, sys, time
from ccarena import load_scenario
from ccarena.backends.sim import simulate
case = json.loads(sys.argv[1])
sc = load_scenario(case["scenario"]).with_overrides(case.get("overrides", {}))
cfg = sc.engine_json()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
out = simulate(cfg)
wall = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
rec = json.loads(out)

print(json.dumps({
    "wall_s": wall, "engine_peak_mb": max(0, peak - before) / 1024, "events": rec["events"],
    "packets": rec["data_packets_forwarded"], "simulated_s": rec["duration_ns"] / 1e9,
    "web_flows": len(rec.get("short_flows", [])),
}))
"""

FLOWS = [1, 10, 100, 1000]
WEB_LOADS = ["44Mbps", "440Mbps", "4400Mbps"]  # ~100, ~1,000, ~10,000 flows/s at ~55 KB each
DURATIONS = [60, 600, 3600]


def _toml_flows(n: int) -> str:
    return (
        f'name = "scale-flows-{n}"\n[network]\nbottleneck_rate = "10Gbps"\nbuffer = "12MB"\n'
        f'[[flows]]\ncca = "cubic"\nrtt = "20ms"\ncount = {n}\n[run]\nduration = "10s"\nwarmup = "2s"\n'
    )


def _toml_web(load: str) -> str:
    return (
        f'name = "scale-web-{load}"\n[network]\nbottleneck_rate = "10Gbps"\nbuffer = "12MB"\n'
        f'[[flows]]\ncca = "cubic"\nrtt = "20ms"\n[[web]]\nload = "{load}"\n[run]\nduration = "10s"\nwarmup = "2s"\n'
    )


def cases(quick: bool) -> list[dict]:
    import os
    import tempfile

    tmp = tempfile.mkdtemp(prefix="ccarena-scale-")
    out = []
    for n in FLOWS[:3] if quick else FLOWS:
        p = os.path.join(tmp, f"flows-{n}.toml")
        with open(p, "w") as f:
            f.write(_toml_flows(n))
        out.append({"family": "flows", "x": n, "scenario": p})
    for load in WEB_LOADS[:2] if quick else WEB_LOADS:
        p = os.path.join(tmp, f"web-{load}.toml")
        with open(p, "w") as f:
            f.write(_toml_web(load))
        out.append({"family": "web", "x": load, "scenario": p})
    for d in DURATIONS[:2] if quick else DURATIONS:
        out.append({"family": "duration", "x": d, "scenario": "bench", "overrides": {"run.duration": f"{d}s"}})
    return out


def measure(case: dict, repeat: int) -> dict:
    runs = []
    for _ in range(repeat):
        p = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(case)], capture_output=True, text=True, check=False)
        if p.returncode != 0:
            raise SystemExit(f"{case['family']} {case['x']}: {p.stderr.strip().splitlines()[-1]}")
        runs.append(json.loads(p.stdout))
    r = dict(runs[0])
    r["wall_s"] = statistics.median(x["wall_s"] for x in runs)
    r["engine_peak_mb"] = max(x["engine_peak_mb"] for x in runs)
    if case["family"] == "web":
        r["x"] = r["web_flows"] / r["simulated_s"]
    else:
        r["x"] = case["x"]
    r["family"] = case["family"]
    r["label"] = str(case["x"])
    return r


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    titles = {"flows": "long-lived flows at 10 Gbit/s", "web": "web flows per second", "duration": "simulated seconds (bench)"}
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4), constrained_layout=True)
    for ax, fam in zip(axes, ("flows", "web", "duration")):
        rs = [r for r in rows if r["family"] == fam]
        if not rs:
            ax.set_visible(False)
            continue
        xs = [r["x"] for r in rs]
        ax.loglog(xs, [r["wall_s"] for r in rs], "o-", label="wall time (s)")
        ax.loglog(xs, [max(r["engine_peak_mb"], 0.1) for r in rs], "s--", label="engine peak memory (MB)")
        ax.set_xlabel(titles[fam])
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.savefig(path, dpi=150)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--plot", metavar="FILE")
    args = ap.parse_args()
    rows = []
    print("| family | case | simulated s | wall s | sim-s / wall-s | data packets | packets / wall-s | engine peak MB |")
    print("|---|---|---|---|---|---|---|---|")
    for case in cases(args.quick):
        r = measure(case, args.repeat)
        rows.append(r)
        xs = f"{r['x']:,.0f}" if isinstance(r["x"], float) else f"{r['x']:,}"
        print(
            f"| {r['family']} | {xs} | {r['simulated_s']:g} | {r['wall_s']:.2f} | {r['simulated_s'] / r['wall_s']:.1f} | "
            f"{r['packets']:,} | {r['packets'] / r['wall_s'] / 1e6:.2f} M | {r['engine_peak_mb']:.1f} |",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
