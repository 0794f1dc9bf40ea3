"""Where the simulator stands against every kernel set the project keeps
(validation/kernel/): each set re-checked with `ccarena validate
--kernel-runs`, one row per set, and the totals. What docs/fidelity.md's
"Where the agreement stands" tables report, from one command:

    python tools/standing.py                      # every kept set, 20 seeds a case
    python tools/standing.py --sim-reps 5 --set hosts.app_reads=false
    python tools/standing.py --only 'paper-quick-*' --markdown

A case that several sets ran with the same definition (duration and
overrides included) is also compared once over all their kernel runs
together (`--markdown` prints it as a second table): the kernel's mean
moves between hours on this machine by more than the simulator's
distance from any one set, so the pooled mean is the better estimate of
it.

With `--markdown` a third table sums each compared row (share, ratio,
drops per congestion event, ACKs per segment, ...) over every set: which
rows hold the totals down.

The sets with overrides on both backends (e.g. offloads off) say so in the
`overrides` column; `--set` applies to the simulator alone, as with
`--kernel-runs`. Each re-check is stored under `--out` as validate stores it.
"""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import json
import math
import tempfile
from pathlib import Path

from ccarena.experiments.crosscheck import METRICS, RATIO_FACTOR_LIMIT, compared_cells, ratio_factor, ratio_factors, run_validation, within_spread
from ccarena.scenario.document import parse_override

KEPT = Path(__file__).resolve().parents[1] / "validation" / "kernel"


def standing_row(name: str, table) -> dict:
    """One set's figures: cells within the kernel's spread, cells that
    differ by the rank test, ratios within the limit, and the worst ratio."""
    ok, cells = within_spread(table)
    factors = ratio_factors(table)
    # The same bar for the simulator's runs from each kernel run's own starts
    # and stalls: how much of a gap the start-up lottery makes.
    from_kernel_starts = ratio_factors(table, "sim_kernel_starts")
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
        "ratios_kernel_starts": len(from_kernel_starts),
        "ratios_kernel_starts_within": sum(f <= RATIO_FACTOR_LIMIT for _, f in from_kernel_starts),
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


#: How the linux backend launched the clients of records without
#: `linux.client_launch` (before 2026-11-29).
FORKED_IN_ORDER = "forked in flow order"


def client_launch(kept_set: Path) -> str:
    """How the set's kernel runs launched their clients (its first record's
    `linux.client_launch`)."""
    for path in sorted(kept_set.glob("runs/*/linux-seed*/record.json.gz")):
        with gzip.open(path, "rt") as f:
            return (json.load(f).get("linux") or {}).get("client_launch") or FORKED_IN_ORDER
    return FORKED_IN_ORDER


def case_key(stored: dict, case: str, launch: str = FORKED_IN_ORDER) -> str:
    """What makes two sets' runs of a case the same experiment: the case's
    definition in the set's `cases.json` (its duration included), the
    overrides on both backends, and how the kernel's clients were launched
    (the second of two flows due together forked 0.5-3.4 ms after the
    first before 2026-11-29, docs/fidelity.md)."""
    return json.dumps([stored["cases"][case], stored.get("overrides") or {}, launch], sort_keys=True)


def has_value(row, column: str) -> bool:
    """A table row has a number in `column` (NaN where the set has none,
    e.g. sets stored before the column existed)."""
    return not math.isnan(float(row.get(column, float("nan"))))


def held_mean(rows: list, column: str) -> float:
    """`column`'s mean over table rows, each weighted by its held kernel
    runs; NaN without any."""
    held = sum(int(r["repetitions"]) for r in rows)
    return sum(float(r[column]) * int(r["repetitions"]) for r in rows) / held if held else float("nan")


def pooled_rows(tables: list[tuple[Path, object]]) -> list[dict]:
    """Per case that more than one set ran the same way: the kernel's mean
    ratio over every held run of those sets (each set's mean weighted by its
    held runs), against the simulator's (the same seeds on the same
    definition give the same mean in every set), and the simulator's runs
    from those kernel runs' own starts and stalls, pooled the same way,
    against the kernel's mean over the same runs."""
    groups: dict[str, list] = {}
    launches: dict[str, str] = {}
    for kept_set, table in tables:
        stored = json.loads((kept_set / "cases.json").read_text())
        launch = client_launch(kept_set)
        for _, r in table[(table.metric == "ratio") & (table.repetitions > 0)].iterrows():
            key = case_key(stored, str(r["case"]), launch)
            launches[key] = launch
            groups.setdefault(key, []).append((kept_set.name, r))
    rows = []
    for key, members in groups.items():
        if len(members) < 2:
            continue
        held = sum(int(r["repetitions"]) for _, r in members)
        kernel = held_mean([r for _, r in members], "kernel")
        set_means = [float(r["kernel"]) for _, r in members]
        sim = float(members[0][1]["sim"])
        factor = ratio_factor(sim, kernel)
        # The runs from the kernel's starts and stalls are one per kernel run:
        # pooled like the kernel's, over the sets that have them.
        paired = [r for _, r in members if has_value(r, "sim_kernel_starts")]
        from_starts = held_mean(paired, "sim_kernel_starts")
        rows.append({"case": str(members[0][1]["case"]), "launch": launches[key], "sets": [name for name, _ in members], "held_runs": held,
                     "kernel": round(kernel, 3), "kernel_set_min": round(min(set_means), 3),
                     "kernel_set_max": round(max(set_means), 3), "sim": round(sim, 3), "factor": round(factor, 2),
                     "sim_kernel_starts": round(from_starts, 3),
                     "factor_kernel_starts": round(ratio_factor(from_starts, held_mean(paired, "kernel")), 2)})
    return sorted(rows, key=lambda r: r["case"])


def pooled_markdown(rows: list[dict]) -> str:
    lines = ["| case | kernel's clients | sets | held kernel runs | kernel ratio, all runs (set means min-max) | simulator | factor "
             "| simulator from the kernel's starts and stalls | factor |",
             "|---|---|---|---|---|---|---|---|---|"]

    def bold(f: float) -> str:
        return "n/a" if f != f else f"**{f}**" if f > RATIO_FACTOR_LIMIT else f"{f}"

    for r in rows:
        from_starts = r.get("sim_kernel_starts", float("nan"))
        lines.append(f"| {r['case']} | {r.get('launch', FORKED_IN_ORDER)} | {len(r['sets'])} | {r['held_runs']} | {r['kernel']:.3f} "
                     f"({r['kernel_set_min']:.3f}-{r['kernel_set_max']:.3f}) | {r['sim']:.3f} | {bold(r['factor'])} "
                     f"| {shown(from_starts, '{:.3f}')} | {bold(r.get('factor_kernel_starts', float('nan')))} |")
    within = sum(r["factor"] <= RATIO_FACTOR_LIMIT for r in rows)
    paired = [r["factor_kernel_starts"] for r in rows if has_value(r, "factor_kernel_starts")]
    lines.append(f"| **ratios within {RATIO_FACTOR_LIMIT:g}x** | | | | | | **{within} of {len(rows)}** | "
                 f"| **{sum(f <= RATIO_FACTOR_LIMIT for f in paired)} of {len(paired)}** |")
    return "\n".join(lines) + "\n"


def metric_rows(tables: list) -> list[dict]:
    """Per compared metric over every set: cells within the kernel's spread
    and cells compared (within_spread's test on compared_cells), and cells that differ by the
    rank test: which rows hold the totals down."""
    out: dict[str, dict] = {}
    for _, table in tables:
        for metric, rows in compared_cells(table).groupby("metric", sort=False):
            r = out.setdefault(str(metric), {"metric": str(metric), "cells": 0, "within": 0, "differ": 0})
            r["cells"] += len(rows)
            r["within"] += int((~rows.flagged).sum())
            r["differ"] += int(rows.differs.sum())
    return list(out.values())


def metrics_markdown(rows: list[dict]) -> str:
    lines = ["| metric | cells within spread | differ |", "|---|---|---|"]
    for r in rows:
        lines.append(f"| {METRICS.get(r['metric'], r['metric'])} | {r['within']} of {r['cells']} | {r['differ']} |")
    return "\n".join(lines) + "\n"


def as_markdown(rows: list[dict], overrides: dict[str, dict]) -> str:
    lines = ["| kernel set | overrides | held runs | machine's stalls > 1 ms a second | CPU in packet processing | cells within spread | differ | ratios within 1.5x (largest factor) | from the kernel's starts and stalls |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        o = ", ".join(f"`{k}={v}`" for k, v in overrides.get(r["set"], {}).items()) or "-"
        stalls = shown(r.get("machine_stalls_1ms", float("nan")), "{:.1f}")
        softirq = shown(r.get("softirq_pct", float("nan")), "{:.0f} %")
        lines.append(f"| {r['set']} | {o} | {r['held_runs']} of {r['kernel_runs']} | {stalls} | {softirq} | "
                     f"{r['within']} of {r['cells']} | {r['differ']} | "
                     f"{r['ratios_within']} of {r['ratios']} ({r['worst_ratio_factor']}, {r['worst_ratio_case']}) | "
                     f"{r.get('ratios_kernel_starts_within', 0)} of {r.get('ratios_kernel_starts', 0)} |")
    within, cells = sum(r["within"] for r in rows), sum(r["cells"] for r in rows)
    rw, rn = sum(r["ratios_within"] for r in rows), sum(r["ratios"] for r in rows)
    kw, kn = sum(r.get("ratios_kernel_starts_within", 0) for r in rows), sum(r.get("ratios_kernel_starts", 0) for r in rows)
    share = f"{within / cells:.0%}" if cells else "n/a"
    lines.append(f"| **all** | | | | | **{within} of {cells}** ({share}) | {sum(r['differ'] for r in rows)} | {rw} of {rn} | {kw} of {kn} |")
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
    rows, stored_overrides, tables = [], {}, []
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        for d in sets:
            table, _ = run_validation(kernel_runs=d, sim_repetitions=args.sim_reps, overrides=overrides, out_root=out)
            stored_overrides[d.name] = json.loads((d / "cases.json").read_text()).get("overrides") or {}
            rows.append(standing_row(d.name, table))
            tables.append((d, table))
            if not args.markdown:
                print(json.dumps(rows[-1]), flush=True)
    pooled = pooled_rows(tables)
    if args.markdown:
        print(as_markdown(rows, stored_overrides), end="")
        if pooled:
            print("\nCases run the same way in more than one set, all their kernel runs together:\n")
            print(pooled_markdown(pooled), end="")
        print("\nEach compared row over every set:\n")
        print(metrics_markdown(metric_rows(tables)), end="")
    else:
        for r in pooled:
            print(json.dumps({"pooled": r}), flush=True)
        for r in metric_rows(tables):
            print(json.dumps({"metric": r}), flush=True)


if __name__ == "__main__":
    main()
