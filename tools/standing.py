"""Where the simulator stands against every kernel set the project keeps
(validation/kernel/): each set re-checked with `ccarena validate
--kernel-runs`, one row per set, and the totals. What docs/fidelity.md's
"Where the agreement stands" tables report, from one command:

    python tools/standing.py                      # every kept set, 20 seeds a case
    python tools/standing.py --sim-reps 5 --set hosts.app_reads=false
    python tools/standing.py --only 'paper-quick-*' --markdown

The sets with overrides on both backends (e.g. offloads off) say so in the
`overrides` column; `--set` applies to the simulator alone, as with
`--kernel-runs`. Each re-check is stored under `--out` as validate stores it.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import tempfile
from pathlib import Path

from ccarena.experiments.crosscheck import RATIO_FACTOR_LIMIT, ratio_factors, run_validation, within_spread
from ccarena.scenario.document import parse_override

KEPT = Path(__file__).resolve().parents[1] / "validation" / "kernel"


def standing_row(name: str, table) -> dict:
    """One set's figures: cells within the kernel's spread, cells that
    differ by the rank test, ratios within the limit, and the worst ratio."""
    ok, cells = within_spread(table)
    factors = ratio_factors(table)
    runs = table[table.metric == "utilization"]
    worst = max(factors, key=lambda cf: cf[1]) if factors else ("", float("nan"))
    return {
        "set": name,
        "cells": cells,
        "within": ok,
        "differ": int(table.differs.sum()),
        "ratios": len(factors),
        "ratios_within": sum(f <= RATIO_FACTOR_LIMIT for _, f in factors),
        "worst_ratio_case": worst[0],
        "worst_ratio_factor": round(worst[1], 2),
        "kernel_runs": int(runs.kernel_runs.sum()),
        "held_runs": int(runs.repetitions.sum()),
        # The testbed's condition: its ratios follow how often the machine stalled.
        "machine_stalls_1ms": kernel_mean(table, "machine_stalls_1ms"),
        # ... and they follow its own packet load.
        "softirq_pct": kernel_mean(table, "softirq_pct"),
    }


def kernel_mean(table, metric: str) -> float:
    """The mean over a set's cases of a testbed row (NaN where it has none)."""
    rows = table[table.metric == metric]
    return round(float(rows.kernel.mean()), 2) if len(rows) else float("nan")


def shown(v: float, fmt: str) -> str:
    """A testbed figure as the table shows it ("n/a" where the set has none)."""
    return "n/a" if v != v else fmt.format(v)


def as_markdown(rows: list[dict], overrides: dict[str, dict]) -> str:
    lines = ["| kernel set | overrides | held runs | machine's stalls > 1 ms a second | CPU in packet processing | cells within spread | differ | ratios within 1.5x (largest factor) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        o = ", ".join(f"`{k}={v}`" for k, v in overrides.get(r["set"], {}).items()) or "-"
        stalls = shown(r.get("machine_stalls_1ms", float("nan")), "{:.1f}")
        softirq = shown(r.get("softirq_pct", float("nan")), "{:.0f} %")
        lines.append(f"| {r['set']} | {o} | {r['held_runs']} of {r['kernel_runs']} | {stalls} | {softirq} | "
                     f"{r['within']} of {r['cells']} | {r['differ']} | "
                     f"{r['ratios_within']} of {r['ratios']} ({r['worst_ratio_factor']}, {r['worst_ratio_case']}) |")
    within, cells = sum(r["within"] for r in rows), sum(r["cells"] for r in rows)
    rw, rn = sum(r["ratios_within"] for r in rows), sum(r["ratios"] for r in rows)
    share = f"{within / cells:.0%}" if cells else "n/a"
    lines.append(f"| **all** | | | | | **{within} of {cells}** ({share}) | {sum(r['differ'] for r in rows)} | {rw} of {rn} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kept", type=Path, default=KEPT, help="the directory of kept kernel sets")
    ap.add_argument("--only", action="append", default=[], help="only the sets whose names match (shell-style; repeatable)")
    ap.add_argument("--sim-reps", type=int, default=20)
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="FIELD=VALUE", help="a simulator override (repeatable)")
    ap.add_argument("--out", type=Path, default=None, help="where to store the re-checks (default: a temporary directory)")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table instead of JSON lines")
    args = ap.parse_args()
    overrides = dict(parse_override(s) for s in args.sets)
    sets = sorted(d for d in args.kept.iterdir() if (d / "cases.json").exists())
    if args.only:
        sets = [d for d in sets if any(fnmatch.fnmatchcase(d.name, p) for p in args.only)]
    if not sets:
        raise SystemExit(f"no kept kernel set in {args.kept} matches")
    rows, stored_overrides = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        for d in sets:
            table, _ = run_validation(kernel_runs=d, sim_repetitions=args.sim_reps, overrides=overrides, out_root=out)
            stored_overrides[d.name] = json.loads((d / "cases.json").read_text()).get("overrides") or {}
            rows.append(standing_row(d.name, table))
            if not args.markdown:
                print(json.dumps(rows[-1]), flush=True)
    if args.markdown:
        print(as_markdown(rows, stored_overrides), end="")


if __name__ == "__main__":
    main()
