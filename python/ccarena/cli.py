"""The `ccarena` command line. Bad input prints one line naming the field and
what is allowed and exits with status 2; no traceback reaches the user unless
CCARENA_DEBUG=1 is set.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich import box
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from . import __version__
from .linux.host import LinuxBackendUnavailable
from .scenario import BACKENDS, ScenarioError, cca_catalogue, load_scenario, parse_override

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="ccarena: run TCP congestion-control experiments on a Linux-faithful simulator.",
    pretty_exceptions_enable=False,
)
list_app = typer.Typer(no_args_is_help=True, help="List algorithms or shipped experiments.")
app.add_typer(list_app, name="list")

# Tables stay readable when the output is piped (no terminal width to follow).
out = Console() if sys.stdout.isatty() else Console(width=140)
err = Console(stderr=True)


class UsageError(Exception):
    """Bad input detected by the CLI itself (exit status 2)."""


def _overrides(sets: Optional[List[str]]) -> dict:
    result = {}
    for s in sets or []:
        key, value = parse_override(s)
        result[key] = value
    return result


def _progress_bar(enabled: bool, unit: str = "s simulated"):
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:.1f}/{task.total:.0f} " + unit),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=not enabled,
        transient=True,
    )


@app.command()
def run(
    scenario: str = typer.Argument(..., help="Scenario file (.toml) or preset name (see `ccarena list experiments`)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
    sets: Optional[List[str]] = typer.Option(None, "--set", help="Override a field, e.g. --set run.duration=10s (repeatable)."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Directory for the saved result (default results/runs/NAME-seedN)."),
    no_save: bool = typer.Option(False, "--no-save", help="Do not save the result."),
    backend: str = typer.Option("sim", "--backend", help="Where to run: sim (the simulator) or linux (this machine's kernel TCP; needs root)."),
    cca_files: Optional[List[Path]] = typer.Option(None, "--cca-file", help="Python file defining congestion control classes (repeatable)."),
) -> None:
    """Run one scenario and print per-flow results."""
    from .api import run as run_scenario
    from .cca import load_cca_file

    for f in cca_files or []:
        load_cca_file(f)
    if backend not in BACKENDS:
        raise UsageError(f"--backend: unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
    sc = load_scenario(scenario, backend=backend)
    sc = sc.with_overrides(_overrides(sets))
    show = sys.stderr.isatty() and not as_json
    with _progress_bar(show, "s run" if backend == "linux" else "s simulated") as bar:
        task = bar.add_task(sc.name, total=sc.engine["run"]["duration"] / 1e9)
        progress = lambda done, total: bar.update(task, completed=done)  # noqa: E731
        if backend == "linux":
            from .linux import run_linux

            result = run_linux(sc, progress=progress)
        else:
            result = run_scenario(sc, progress=progress)
    for note in result.record.get("linux", {}).get("notes", []):
        err.print(f"note: {note}", highlight=False)
    saved = None
    if not no_save:
        suffix = "" if backend == "sim" else f"-{backend}"
        saved = result.save(out_dir or Path("results") / "runs" / f"{sc.name}-seed{sc.seed}{suffix}")
    if as_json:
        print(result.to_json())
        if saved:
            err.print(f"saved to {saved}")
    else:
        _print_run(result)
        if saved:
            out.print(f"saved to [bold]{saved}[/bold]")
    if result.invariant_violations:
        err.print(f"[red]engine invariant violated:[/red] {result.invariant_violations[0]}")
        raise typer.Exit(3)


def _print_run(result) -> None:
    flows = result.flows
    s = result.summary
    sc = result.scenario
    rate = result.record["link"]["rate_bps"] / 1e6
    linux = result.record.get("backend") == "linux"
    title = f"{sc.name}: {len(flows)} flows, {rate:g} Mbps, {result.record['duration_ns'] / 1e9:g} s (warm-up {result.record['warmup_ns'] / 1e9:g} s), seed {sc.seed}"
    if linux:
        title += f" [linux backend, kernel {result.record['linux']['kernel']}]"
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAVY)
    for col, just in [
        ("flow", "right"), ("cca", "left"), ("rtt ms", "right"), ("start s", "right"), ("Mbps", "right"),
        ("share", "right"), ("cwnd", "right"), ("sRTT ms", "right"), ("retrans", "right"), ("RTOs", "right"), ("drops", "right"),
    ]:
        t.add_column(col, justify=just)
    total = flows.throughput_mbps.sum()
    for i, f in flows.iterrows():
        t.add_row(
            str(i), f.cca, f"{f.rtt_ms:g}", f"{f.start_s:g}", f"{f.throughput_mbps:.2f}",
            f"{f.throughput_mbps / total:.1%}" if total > 0 else "-",
            f"{f.mean_cwnd:.0f}" if f.mean_cwnd == f.mean_cwnd else "-",
            f"{f.mean_srtt_ms:.1f}" if f.mean_srtt_ms == f.mean_srtt_ms else "-",
            str(f.retransmissions), str(f.rtos), "-" if linux else str(f.drops),
        )
    out.print(t)
    speed = result.record["duration_ns"] / 1e9 / result.wall_time_s if result.wall_time_s > 0 else float("inf")
    if linux:
        out.print(
            f"utilisation [bold]{s['utilization']:.1%}[/bold]   Jain's index [bold]{s['jain_index']:.4f}[/bold]   "
            f"throughput ratio (min/max) [bold]{s['throughput_ratio']:.3f}[/bold]   mean queue {s['mean_queue_packets']:.0f} packets   "
            f"bottleneck drops {s['drops']}   ({result.wall_time_s:.1f} s wall)"
        )
        return
    out.print(
        f"utilisation [bold]{s['utilization']:.1%}[/bold]   Jain's index [bold]{s['jain_index']:.4f}[/bold]   "
        f"throughput ratio (min/max) [bold]{s['throughput_ratio']:.3f}[/bold]   mean queue {s['mean_queue_packets']:.0f} packets   "
        f"({result.wall_time_s:.2f} s wall, {speed:.0f}x real time)"
    )


@app.command()
def bench(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    repeat: int = typer.Option(3, "--repeat", min=1, help="Runs to take the median of."),
    scenario: str = typer.Option("bench", "--scenario", help="Scenario or preset to time (default: the fixed bench scenario)."),
) -> None:
    """Time the engine on the fixed benchmark scenario (400 Mbps, 2 CUBIC flows, 60 s)."""
    from .bench import bench as run_bench

    r = run_bench(scenario, repeat=repeat)
    if as_json:
        print(json.dumps(r))
        return
    t = Table(title=f"ccarena bench: {r['scenario']} ({r['simulated_s']:g} s simulated, median of {r['repeats']})", title_justify="left")
    t.add_column("metric")
    t.add_column("value", justify="right")
    t.add_row("wall time", f"{r['wall_s']:.3f} s")
    t.add_row("simulated s / wall s", f"{r['sim_s_per_wall_s']:.0f}")
    t.add_row("events / s", f"{r['events_per_s'] / 1e6:.2f} M")
    t.add_row("packets / s", f"{r['packets_per_s'] / 1e6:.2f} M")
    t.add_row("events", f"{r['events']:,}")
    t.add_row("data packets", f"{r['packets']:,}")
    out.print(t)
    out.print(f"[dim]{r['machine']}, ccarena {r['version']}[/dim]")


@list_app.command("ccas")
def list_ccas(as_json: bool = typer.Option(False, "--json")) -> None:
    """Congestion-control algorithms with a one-line description and their source."""
    cat = cca_catalogue()
    if as_json:
        print(json.dumps(cat))
        return
    t = Table(title="Congestion-control algorithms", title_justify="left", show_lines=True)
    t.add_column("name", style="bold")
    t.add_column("description")
    t.add_column("source")
    t.add_column("parameters (default)")
    for c in cat:
        params = ", ".join(f"{p['name']}={str(p['default']).lower()}" for p in c["params"]) or "-"
        t.add_row(c["name"], c["description"], c["source"], params)
    out.print(t)


@list_app.command("experiments")
def list_experiments(as_json: bool = typer.Option(False, "--json")) -> None:
    """Shipped scenarios (presets) with what they show and where they come from."""
    from .presets import preset_catalogue

    cat = preset_catalogue()
    if as_json:
        print(json.dumps(cat))
        return
    t = Table(title="Experiments", title_justify="left", show_lines=True)
    t.add_column("name", style="bold")
    t.add_column("what it shows")
    t.add_column("source")
    for p in cat:
        t.add_row(p["name"], p["description"], p["source"])
    out.print(t)


@app.command()
def cleanup(
    everything: bool = typer.Option(False, "--all", help="Also remove what live runs own (stops them)."),
) -> None:
    """Remove what killed linux-backend runs left behind (namespaces, processes, BPF algorithms)."""
    from .linux.cleanup import cleanup as do_cleanup
    from .linux.host import check_root

    check_root()
    r = do_cleanup(everything=everything)
    if not any(r.values()):
        out.print("nothing to clean up")
        return
    out.print(
        f"removed {len(r['namespaces'])} namespaces, killed {len(r['processes_killed'])} processes, "
        f"unregistered {len(r['bpf_unregistered'])} BPF algorithms"
        + (f": {', '.join(r['bpf_unregistered'])}" if r["bpf_unregistered"] else "")
    )


@app.command()
def validate(
    set_name: str = typer.Option("default", "--set", help="Validation set: " + ", ".join("default quick ci".split()) + "."),
    repetitions: Optional[int] = typer.Option(None, "--reps", min=1, help="Repetitions per backend (default: the set's)."),
    duration: Optional[float] = typer.Option(None, "--duration", min=1, help="Seconds per run (default: the set's)."),
    out_root: Path = typer.Option(Path("results") / "validate", "--out", help="Where to store the table and the runs."),
    as_json: bool = typer.Option(False, "--json", help="Print the table as JSON."),
) -> None:
    """Run a validation set on the simulator and on this machine's kernel, and compare."""
    from .validate import METRICS, VALIDATION_SETS, run_validation

    if set_name not in VALIDATION_SETS:
        raise UsageError(f"--set: unknown validation set {set_name!r}; allowed: {', '.join(VALIDATION_SETS)}")
    table, where = run_validation(set_name, out_root, duration, repetitions, log=lambda s: err.print(s, highlight=False, soft_wrap=True))
    if as_json:
        print(table.to_json(orient="records"))
        err.print(f"stored in {where}")
        return
    t = Table(title=f"validate {set_name}: simulator vs kernel ({VALIDATION_SETS[set_name].description})", title_justify="left", box=box.SIMPLE_HEAVY)
    for col in ("case", "metric", "sim", "kernel", "kernel min-max", "sim - kernel", "> spread", "sim, kernel's starts"):
        t.add_column(col, justify="left" if col in ("case", "metric") else "right")
    from .validate import _fmt, fmt_diff

    for _, r in table.iterrows():
        m = r.metric
        t.add_row(
            r.case, METRICS[m], _fmt(m, r.sim), _fmt(m, r.kernel), f"{_fmt(m, r.kernel_min)}-{_fmt(m, r.kernel_max)}",
            fmt_diff(m, r["diff"]),
            "[bold red]yes[/bold red]" if r.flagged else "",
            f"{_fmt(m, r.sim_kernel_starts)} ({_fmt(m, r.sim_kernel_starts_min)}-{_fmt(m, r.sim_kernel_starts_max)})",
        )
    out.print(t)
    out.print(f"stored in [bold]{where}[/bold] (table.md, table.json, table.parquet, runs/)")


@app.command()
def version() -> None:
    """Print the ccarena version."""
    print(f"ccarena {__version__}")


def main(argv: Optional[List[str]] = None) -> None:
    try:
        # Without standalone mode, typer returns (not raises) the status of a
        # typer.Exit and turns Ctrl-C into status 130: pass them on.
        status = app(args=argv, standalone_mode=False)
        if isinstance(status, int) and status:
            if status == 130:
                err.print("interrupted")
            sys.exit(status)
    except ScenarioError as e:
        err.print(f"[red]error:[/red] {e}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except (UsageError, LinuxBackendUnavailable) as e:
        err.print(f"[red]error:[/red] {e}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        err.print("interrupted")
        sys.exit(130)
    except Exception as e:  # command-line usage errors and anything unexpected
        # Usage errors of the option parser (click, vendored by typer) know how
        # to show themselves and carry their exit status (2).
        if hasattr(e, "show") and isinstance(getattr(e, "exit_code", None), int):
            e.show(file=sys.stderr)
            sys.exit(e.exit_code)
        if os.environ.get("CCARENA_DEBUG"):
            raise
        err.print(f"[red]error:[/red] {type(e).__name__}: {e} (set CCARENA_DEBUG=1 for details)", highlight=False, soft_wrap=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
