"""The `ccarena` command line. Bad input prints one line naming the field and
what is allowed and exits with status 2; no traceback reaches the user unless
CCARENA_DEBUG=1 is set.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer

from .errors import UsageError
# The console helpers and the run command live with the entry point, which
# runs plain `ccarena run` lines without this module (and typer).
from .launch import (  # noqa: F401 - names the other commands use
    backend_runner,
    check_out_dir,
    err,
    esc,
    guarded,
    out,
    overrides,
    run_command,
    warn_requirements,
)
from .version import __version__

# Only what every command needs is imported here: `ccarena version`, `--help`
# and shell completion must not wait for pandas, DuckDB, matplotlib, Dask or
# even the engine. Commands import what they use when they run (each import
# says what it puts off).

# Help texts are plain text: they quote scenario syntax such as [sweep], which
# rich markup would swallow.
_SETTINGS = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(
    no_args_is_help=True,
    help="ccarena: run TCP congestion-control experiments on a Linux-faithful simulator.",
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings=_SETTINGS,
)
list_app = typer.Typer(no_args_is_help=True, help="List algorithms or shipped experiments.", rich_markup_mode=None, context_settings=_SETTINGS)
app.add_typer(list_app, name="list")


def _version_option(value: bool) -> None:
    if value:
        print(f"ccarena {__version__}")
        raise typer.Exit()


@app.callback()
def _main_options(
    version: bool = typer.Option(False, "--version", "-V", is_eager=True, callback=_version_option, help="Print the version and exit."),
) -> None:
    """ccarena: run TCP congestion-control experiments on a Linux-faithful simulator."""


BACKEND_HELP = ("Where to run: sim (the simulator), linux (this machine's kernel TCP; needs root) or testbed "
                "(remote Linux hosts over SSH, named by --inventory).")
INVENTORY_HELP = "The testbed's inventory (TOML: hosts, roles, SSH, interfaces; docs/testbed-backend.md); with --backend testbed."
DRY_RUN_HELP = "Print every command each testbed host would run, without connecting anywhere (--backend testbed)."


@app.command()
def run(
    scenario: str = typer.Argument(..., help="Scenario file (.toml) or preset name (see `ccarena list experiments`)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
    sets: Optional[List[str]] = typer.Option(None, "--set", help="Override a field, e.g. --set run.duration=10s (repeatable)."),
    out_dir: Optional[Path] = typer.Option(
        None, "--out", help="Directory for the saved result (default results/runs/NAME-seedN, or NAME-seedN-2, ... when that holds a different run)."
    ),
    no_save: bool = typer.Option(False, "--no-save", help="Do not save the result."),
    backend: str = typer.Option("sim", "--backend", help=BACKEND_HELP),
    inventory: Optional[Path] = typer.Option(None, "--inventory", help=INVENTORY_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help=DRY_RUN_HELP),
    cca_files: Optional[List[Path]] = typer.Option(None, "--cca-file", help="Python file defining congestion control classes (repeatable). It is code and runs with your rights: use only files you trust."),
) -> None:
    """Run one scenario and print per-flow results."""
    # launch.main runs plain `run` lines itself (launch.plain_run_args); this is the same command.
    run_command(scenario, as_json, sets, out_dir, no_save, backend, inventory, dry_run, cca_files)




@app.command()
def bench(
    as_json: bool = typer.Option(False, "--json", help="Print JSON: one object per scenario, one per line."),
    repeat: int = typer.Option(3, "--repeat", min=1, help="Runs to take the median of."),
    scenarios: Optional[List[str]] = typer.Option(
        None, "--scenario", help="Scenario or preset to time (repeatable; default: the fixed bench, bench-background and bench-testbed scenarios)."
    ),
    instructions: bool = typer.Option(
        False, "--instructions", help="Also count the engine's instructions per run with valgrind (repeatable across machines and load; about 50x slower)."
    ),
) -> None:
    """Time the engine on the fixed benchmark scenarios: 400 Mbps with 2 CUBIC flows, the same with
    24 background flows and web traffic both ways, and the same with the testbed background
    (24 flows behind 200 ms of reordering jitter); 60 s simulated each."""
    from rich.table import Table  # rich: on first output

    from .experiments.bench import BENCH_SCENARIOS  # the engine
    from .experiments.bench import bench as run_bench  # the engine

    results = [run_bench(s, repeat=repeat, instructions=instructions) for s in (scenarios or BENCH_SCENARIOS)]
    if as_json:
        for r in results:
            print(json.dumps(r))
        return
    t = Table(title=f"ccarena bench (median of {repeat})", title_justify="left")
    t.add_column("metric")
    for r in results:
        t.add_column(f"{r['scenario']}\n{r['simulated_s']:g} s simulated", justify="right")
    rows = [
        ("wall time", lambda r: f"{r['wall_s']:.3f} s"),
        ("simulated s / wall s", lambda r: f"{r['sim_s_per_wall_s']:.0f}"),
        ("events / s", lambda r: f"{r['events_per_s'] / 1e6:.2f} M"),
        ("packets / s", lambda r: f"{r['packets_per_s'] / 1e6:.2f} M"),
        ("events", lambda r: f"{r['events']:,}"),
        ("data packets", lambda r: f"{r['packets']:,}"),
        ("slowdown against the first column", lambda r: f"{r['sim_s_per_wall_s'] and results[0]['sim_s_per_wall_s'] / r['sim_s_per_wall_s']:.2f}x"),
    ]
    if instructions:
        rows += [
            ("instructions", lambda r: f"{r['instructions'] / 1e9:.2f} G"),
            ("instructions / data packet", lambda r: f"{r['instructions_per_packet']:,.0f}"),
            ("instructions / event", lambda r: f"{r['instructions_per_event']:,.0f}"),
        ]
    for name, fmt in rows:
        t.add_row(name, *[fmt(r) for r in results])
    out.print(t)
    out.print(f"[dim]{results[0]['machine']}, ccarena {results[0]['version']}[/dim]")


def _sweep_progress(enabled: bool):
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn  # rich: on first output

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[runs]}"),
        TextColumn("{task.completed:.0f}/{task.total:.0f} s simulated"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=err,
        disable=not enabled,
        transient=False,
    )


def _make_executor(jobs: Optional[int], dask: Optional[str]):
    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs: must be at least 1, got {jobs}")
    from .experiments.executors import DaskExecutor, LocalExecutor  # the engine (Dask itself only when used)

    if dask:
        try:
            # Dask is an optional extra; checked before anything runs.
            import distributed  # noqa: F401
        except ImportError:
            raise UsageError("--dask: Dask is not installed; install the extra with pip install 'ccarena[dask]' "
                             "(or pip install 'dask[distributed]')") from None
        return DaskExecutor(dask, jobs=jobs)
    return LocalExecutor(jobs)


def _run_sweep_cli(scenario: str, results_dir: Path, jobs, dask, sets, quick: bool, repetitions, name, retry_failed: bool, quiet: bool,
                   keep_stale: bool = False, runner=None):
    """Shared by `sweep` and `reproduce`: runs the sweep with a progress bar
    (on `runner`, a backend other than the simulator, when given); returns the outcome."""
    # DuckDB and pandas (the store), matplotlib (figure specs).
    from .experiments.runner import prepare, run_sweep, stale_note
    from .experiments.sweep import repetitions_identical
    from .present.figures import validate_figure_specs

    # Without [sweep.quick] settings, quick mode is the full sweep (plan.quick is then off).
    if runner is None:
        plan = prepare(scenario, overrides(sets), quick, repetitions)
    else:
        key = f"{runner.name} {runner.inventory.digest}" if getattr(runner, "inventory", None) is not None else runner.name
        plan = prepare(scenario, overrides(sets), quick, repetitions, catalogue=runner.algorithms(), backend_key=key)
    doc = plan.doc
    validate_figure_specs(doc.get("figures"))
    warn_requirements(doc)
    if runner is not None and (jobs is not None or dask):
        raise UsageError(f"--jobs/--dask: the {runner.name} backend runs one run at a time on its hosts")
    if repetitions_identical(plan.specs) and runner is None:
        err.print("[yellow]warning:[/yellow] the repetitions will be identical runs (nothing in the scenario is random); "
                  "set run.start_jitter (e.g. \"100ms\") or random loss to vary them", highlight=False)
    if runner is not None:
        from .experiments.executors import BackendExecutor  # the engine (as the other executors)

        first = next((s for s in plan.specs if s.engine is not None), None)
        if first is not None and hasattr(runner, "preflight"):
            # Every host reachable, with its interface, tools and algorithms, before the sweep starts.
            from .scenario.model import Scenario  # the scenario wing (loaded by the sweep already)

            runner.preflight(Scenario(doc=first.doc, engine=first.engine, meta=first.meta, backend=runner.name))
        executor = BackendExecutor(runner)
    else:
        executor = _make_executor(jobs, dask)
    show = sys.stderr.isatty() and not quiet
    log_lines = not sys.stderr.isatty() and not quiet  # e.g. under nohup or CI: a line per 10 % of the runs
    state = {"task": None, "runs": 0, "done": 0, "t0": time.monotonic(), "logged": 0}
    with _sweep_progress(show) as bar:

        def on_event(kind: str, info: dict) -> None:
            if kind == "start":
                if info["stale"]:
                    err.print(f"[yellow]note:[/yellow] {stale_note(info['stale'], info['stale_builds'], info['kept_stale'])}", highlight=False, soft_wrap=True)
                if info["skipped"]:
                    reasons = "; ".join(f"{k} ({v} runs)" for k, v in info["skip_reasons"].items())
                    err.print(f"[yellow]warning:[/yellow] skipping {info['skipped']} runs: {esc(reasons)}", highlight=False, soft_wrap=True)
                if not quiet:
                    err.print(f"{esc(info['experiment'])}: {info['runs']} runs to compute, {info['cached']} already stored "
                              f"({info['simulated_s']:.0f} s simulated on {info['executor']})", highlight=False)
                state["runs"] = info["runs"]
                state["task"] = bar.add_task(info["experiment"], total=max(info["simulated_s"], 1e-9), runs=f"0/{info['runs']} runs")
            elif kind == "progress" and state["task"] is not None:
                fields = {}
                if "done" in info:
                    state["done"] = info["done"]
                    fields["runs"] = f"{info['done']}/{state['runs']} runs"
                    step = max(state["runs"] // 10, 1)
                    if log_lines and (info["done"] - state["logged"] >= step or info["done"] == state["runs"]):
                        state["logged"] = info["done"]
                        el = time.monotonic() - state["t0"]
                        frac = info["simulated_s"] / info["total_s"] if info["total_s"] else 1.0
                        eta = el * (1 - frac) / frac if frac > 0 else float("nan")
                        err.print(f"{info['done']}/{state['runs']} runs, {info['simulated_s']:.0f}/{info['total_s']:.0f} s simulated, "
                                  f"{el:.0f} s elapsed, ETA {eta:.0f} s", highlight=False)
                bar.update(state["task"], completed=info["simulated_s"], **fields)
            elif kind == "run" and not info["ok"]:
                err.print(f"[red]run failed[/red] {info['run_id']} {esc(str(info['params']))}: {esc(str(info['error']))}", highlight=False, soft_wrap=True)

        try:
            outcome = run_sweep(plan, results_dir, executor=executor, name=name, variant="quick" if plan.quick else "",
                                retry_failed=retry_failed, keep_stale=keep_stale, command=_command_line(), on_event=on_event)
        except KeyboardInterrupt:
            err.print(f"interrupted: finished runs are stored in {results_dir}; run the same command again to resume", highlight=False, markup=False)
            raise
    return doc, outcome


def _sweep_backend(backend: str, inventory: Optional[Path], dry_run: bool):
    """None for the simulator (its executors), else the backend that runs each run of a sweep."""
    runner = backend_runner(backend, inventory, dry_run)
    if backend == "sim":
        return None
    if backend == "linux":
        raise UsageError("--backend: sweeps run on sim or testbed; this machine's kernel is compared with the simulator by `ccarena validate`")
    return runner


def _sweep_dry_run(runner, scenario: str, sets, quick: bool, repetitions) -> None:
    """Prints the commands of a sweep's runs: the first in full, then per further run the lines that differ."""
    # The scenario wing and the sweep's expansion (DuckDB and pandas with them).
    from .experiments.runner import prepare
    from .scenario.model import Scenario

    plan = prepare(scenario, overrides(sets), quick, repetitions, catalogue=runner.algorithms())
    specs = [s for s in plan.specs if s.engine is not None]
    skipped = len(plan.specs) - len(specs)
    out_lines = [f"# {len(specs)} runs" + (f" ({skipped} skipped)" if skipped else "") + f" on {runner.inventory.name}; nothing is connected to"]
    first = None
    for k, spec in enumerate(specs):
        p = runner.plan(Scenario(doc=spec.doc, engine=spec.engine, meta=spec.meta, backend=runner.name), tag=f"run{k + 1}")
        params = ", ".join(f"{a}={v}" for a, v in spec.params.items()) + f", seed {spec.seed}"
        if first is None:
            first = p
            out_lines.append(f"# run 1/{len(specs)} ({params})")
            out_lines.append(p.format())
            continue
        changed = []
        for name, hp in p.hosts.items():
            old_lines = set(_plan_lines(first.hosts[name], "run1"))
            changed += [f"  [{name}] {line.splitlines()[0]}" for line in _plan_lines(hp, f"run{k + 1}") if line not in old_lines]
        out_lines.append(f"# run {k + 1}/{len(specs)} ({params}): " + ("as run 1, except" if changed else "the same commands as run 1"))
        out_lines += changed
    sys.stdout.write("\n".join(out_lines) + "\n")


def _plan_lines(hp, tag: str) -> list[str]:
    lines = hp.setup + hp.start + [f"[t={t:g}s] {line}" for t, _, line in hp.launches] + hp.stop + hp.teardown
    return [line.replace(tag, "TAG") for line in lines]


def _command_line() -> str:
    """The command line that ran a sweep, as stored with its experiment."""
    return " ".join(["ccarena", *sys.argv[1:]])


def _points_table(res, experiment_id: str, title: str):
    """The key metrics per grid point as a `Listing`: the cells as the report
    shows them (mean ±CI), the data as raw numbers (mean and `_ci95` columns)."""
    # matplotlib and pandas.
    from .present.figures import short_label
    from .present.format import pm
    from .present.report import experiment_shape, key_metrics
    from .present.tables import Column, Listing
    from .results.metrics import SHORT_RUN_EPOCHS

    runs = res.runs[res.runs.experiment_id == experiment_id]
    ok = runs[runs.status == "ok"]
    shape = experiment_shape(res, ok.run_id)
    names = res.param_names(experiment_id)
    km = key_metrics(shape["n_flows"], shape["n_groups"], shape["web"], shape["udp"])
    pts = res.points(experiment_id, km) if len(ok) else None
    columns = [Column(n, no_wrap=True) for n in names] + [Column("n", "right", no_wrap=True)]
    columns += [Column(short_label(m), "right", no_wrap=True) for m in km]
    listing = Listing(columns, [], title=title, caption="mean ± half-width of the 95 % confidence interval over repetitions", data=[])
    if pts is not None:
        for _, p in pts.iterrows():
            short = bool(p.get("short_run", False) == True)  # noqa: E712 (NaN where the metric is missing)
            cells = [str(p[n]) for n in names] + [str(int(p.n)) + (" †" if short else "")]
            row = {"experiment": experiment_id, **{n: p[n] for n in names}, "n": int(p.n), "short_run": short}
            for m in km:
                cells.append(pm(p[m], p[f"{m}_ci95"], low=p.get(f"{m}_low"), high=p.get(f"{m}_high")))
                row[m], row[f"{m}_ci95"] = _plain(p[m]), _plain(p[f"{m}_ci95"])
            listing.rows.append(cells)
            listing.data.append(row)
        if "short_run" in pts and pts.short_run.fillna(False).astype(bool).any():
            listing.caption += (f"\n† run too short for the physics: a loss-based flow saw fewer than {SHORT_RUN_EPOCHS} congestion "
                                "epochs after warm-up, so the point is not its steady state (docs/metrics.md; longer runs: --full)")
    return listing


def _plain(v):
    """A number for CSV or JSON: a Python float, None for NaN."""
    try:
        v = float(v)
    except (TypeError, ValueError):
        return v
    return None if v != v else v


def _emit(listing, fmt: str = "table") -> None:
    from .present.tables import emit  # rich: on first output

    emit(listing, fmt, out)


def _format_option(as_json: bool, fmt: str) -> str:
    # Imported when the command runs (see the note at the top).
    from .present.tables import check_format

    return "json" if as_json else check_format(fmt)


FORMAT_HELP = "Output format: table, csv, tsv or json."


def _builds_line(res, experiment_id: str) -> str:
    """Which builds computed the experiment's stored runs, this one's marked."""
    from .version import build_id  # reads the package's sources to hash them: only when asked

    runs = res.runs[(res.runs.experiment_id == experiment_id) & (res.runs.status == "ok")]
    counts = runs.build.fillna("unknown").value_counts()
    if not len(counts):
        return ""
    current = build_id()
    parts = [f"{b} ({n} runs{', this build' if b == current else ''})" for b, n in counts.items()]
    e = res.experiments[res.experiments.experiment_id == experiment_id].iloc[0]
    where = f"; by {e.command or 'the Python API'} on {e.host or '?'}, {str(e.updated_at)[:16]}" if "host" in e else ""
    return "built by " + ", ".join(parts) + where


def _status_line(res, experiment_id: str) -> str:
    runs = res.runs[res.runs.experiment_id == experiment_id]
    c = runs.status.value_counts().to_dict()
    return f"{len(runs)} runs: " + ", ".join(f"{c.get(k, 0)} {k}" for k in ("ok", "error", "skipped", "pending") if c.get(k, 0))


@app.command()
def sweep(
    scenario: str = typer.Argument(..., help="Scenario file with a [sweep] table, or a preset name."),
    results_dir: Path = typer.Option(Path("results"), "--out", "-o", help="Results directory (database + Parquet)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Worker processes (default: all cores)."),
    dask: Optional[str] = typer.Option(None, "--dask", help="Run on a dask.distributed cluster: scheduler address (tcp://host:8786) or 'local'."),
    sets: Optional[List[str]] = typer.Option(None, "--set", help="Override a field before expanding the sweep (repeatable)."),
    quick: bool = typer.Option(False, "--quick", help="Apply the scenario's [sweep.quick] settings (shorter runs, fewer repetitions)."),
    repetitions: Optional[int] = typer.Option(None, "--repetitions", "-r", help="Override the number of repetitions."),
    name: Optional[str] = typer.Option(None, "--name", help="Experiment name in the results (default: the scenario's name)."),
    keep_failed: bool = typer.Option(False, "--keep-failed", help="Do not retry runs that failed before."),
    keep_stale: bool = typer.Option(False, "--keep-stale", help="Reuse stored runs that another build of ccarena computed (default: compute them again)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object with the counts instead of tables."),
    backend: str = typer.Option("sim", "--backend", help=BACKEND_HELP + " linux: use `ccarena validate`."),
    inventory: Optional[Path] = typer.Option(None, "--inventory", help=INVENTORY_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help=DRY_RUN_HELP + " The first run in full, then what each further run changes."),
) -> None:
    """Run a scenario's sweep (grid x repetitions) into a results directory; resumable."""
    from .results.store import load  # DuckDB, pandas

    runner = _sweep_backend(backend, inventory, dry_run)
    if dry_run:
        _sweep_dry_run(runner, scenario, sets, quick, repetitions)
        return
    check_out_dir(results_dir)
    try:
        doc, outcome = _run_sweep_cli(scenario, results_dir, jobs, dask, sets, quick, repetitions, name, not keep_failed, as_json, keep_stale, runner)
    finally:
        if runner is not None:
            runner.close()
    if as_json:
        print(json.dumps(outcome.to_dict()))
    else:
        res = load(results_dir)
        _emit(_points_table(res, outcome.experiment_id, f"{outcome.experiment_id}: {_status_line(res, outcome.experiment_id)}"))
        out.print(f"{outcome.computed} runs computed, {outcome.cached} already stored, {outcome.failed} failed, "
                          f"{outcome.skipped} skipped in {outcome.wall_s:.1f} s; results in [bold]{results_dir}[/bold]  (next: ccarena report {results_dir})")
    if outcome.failed:
        raise typer.Exit(1)


@app.command()
def results(
    directory: Path = typer.Argument(Path("results"), help="Results directory."),
    experiment: Optional[str] = typer.Option(None, "--experiment", "-e", help="Only this experiment."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (experiments, run counts, per-point metrics); same as --format json."),
    fmt: str = typer.Option("table", "--format", "-f", help=FORMAT_HELP + " csv and tsv: one row per grid point, each metric's mean and its _ci95."),
    recompute: bool = typer.Option(False, "--recompute", help="Recompute every metric from the stored raw records first."),
    rebuild_db: bool = typer.Option(False, "--rebuild", help="Re-create a damaged database from the stored records (the old file is moved aside)."),
) -> None:
    """Summarise a results directory: experiments, runs, metrics per grid point."""
    from .results.store import Store, load, rebuild  # DuckDB, pandas

    fmt = _format_option(as_json, fmt)
    if not directory.exists():
        raise UsageError(f"{directory}: no such results directory")
    if rebuild_db:
        n = rebuild(directory)
        moved = f"; the old database is now {n['moved_aside']}" if n["moved_aside"] else ""
        lost = f"; {n['runs_lost']} runs stored before their rows were kept beside the records could not be recovered (run the sweep again)" if n["runs_lost"] else ""
        err.print(f"rebuilt the database: {n['experiments']} experiments, {n['runs']} runs from their records{esc(moved)}{lost}", highlight=False)
    if recompute:
        with Store(directory) as st:
            n = st.recompute_metrics()
        err.print(f"recomputed the metrics of {n} runs from their records")
    res = load(directory)
    exps = res.experiments
    if experiment:
        exps = exps[(exps.experiment_id == experiment) | (exps.name == experiment)]
        if not len(exps):
            res.experiment_id(experiment)  # raises UnknownName: what is stored, and the near misses
    if fmt == "json":
        doc = []
        for _, e in exps.iterrows():
            runs = res.runs[res.runs.experiment_id == e.experiment_id]
            pts = res.points(e.experiment_id) if (runs.status == "ok").any() else None
            doc.append({
                "experiment": e.experiment_id, "name": e["name"], "variant": e.variant, "description": e.description,
                "runs": {k: int(v) for k, v in runs.status.value_counts().items()},
                "builds": {str(k): int(v) for k, v in runs[runs.status == "ok"].build.fillna("unknown").value_counts().items()},
                "host": e.host, "command": e.command, "updated_at": str(e.updated_at),
                "points": json.loads(pts.to_json(orient="records")) if pts is not None else [],
            })
        print(json.dumps({"directory": str(directory), "experiments": doc}))
        return
    if fmt in ("csv", "tsv"):
        # Imported when the command runs (see the note at the top).
        from .present.tables import to_delimited

        rows = []
        for _, e in exps.iterrows():
            if (res.runs[res.runs.experiment_id == e.experiment_id].status == "ok").any():
                rows += _points_table(res, e.experiment_id, "").records()
        sys.stdout.write(to_delimited(rows, "," if fmt == "csv" else "\t"))
        return
    if not len(exps):
        out.print(f"{esc(str(directory))}: no experiments yet")
        return
    for _, e in exps.iterrows():
        _emit(_points_table(res, e.experiment_id, f"{e.experiment_id}: {_status_line(res, e.experiment_id)}"))
        builds = _builds_line(res, e.experiment_id)
        if builds:
            out.print(f"  [dim]{esc(builds)}[/dim]", highlight=False)
        failed = res.runs[(res.runs.experiment_id == e.experiment_id) & (res.runs.status == "error")]
        for _, r in failed.head(5).iterrows():
            out.print(f"  [red]failed[/red] {r.run_id}: {esc(str(r.error))}", highlight=False)


@app.command()
def report(
    directory: Path = typer.Argument(Path("results"), help="Results directory."),
    out_dir: Optional[Path] = typer.Option(None, "--out", "-o", help="Where to write the report (default DIR/report)."),
    per_run: str = typer.Option("first", "--per-run", help="Run figures for: first (first repetition of each point), all, none."),
    experiment: Optional[List[str]] = typer.Option(None, "--experiment", "-e", help="Only these experiments (repeatable)."),
    compare: Optional[List[str]] = typer.Option(None, "--compare", "-c", help="Draw these experiments together on a comparison page (repeatable)."),
    reference: Optional[List[Path]] = typer.Option(None, "--reference", help="CSV of reference data drawn beside the simulated points (repeatable; docs/scenario.md)."),
) -> None:
    """Write a static HTML report (figures, metrics tables, scenarios) of a results directory."""
    from .present.report import write_report  # matplotlib, DuckDB, pandas

    if per_run not in ("first", "all", "none"):
        raise UsageError(f"--per-run: unknown value {per_run!r}; allowed: first, all, none")
    if not directory.exists():
        raise UsageError(f"{directory}: no such results directory")
    for r in reference or []:
        if not r.is_file():
            raise UsageError(f"--reference: {r}: no such file")
    index = write_report(directory, out_dir, per_run=per_run, experiments=experiment, compare=compare, references=reference,
                         progress=(lambda m: err.print(f"[dim]{esc(m)}[/dim]", highlight=False)) if sys.stderr.isatty() else None)
    out.print(f"report: [bold]{index}[/bold]")


@app.command()
def reproduce(
    preset: str = typer.Argument(..., help="Experiment to reproduce, e.g. cubic-fig8-intra-fairness (see `ccarena list experiments`)."),
    full: bool = typer.Option(False, "--full", help="The paper's full set-up (e.g. 600 s x 5 repetitions) instead of the quick mode."),
    results_dir: Path = typer.Option(Path("results"), "--out", "-o", help="Results directory."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Worker processes (default: all cores)."),
    dask: Optional[str] = typer.Option(None, "--dask", help="Run on a dask.distributed cluster (scheduler address or 'local')."),
    sets: Optional[List[str]] = typer.Option(None, "--set", help="Override a field (repeatable)."),
    repetitions: Optional[int] = typer.Option(None, "--repetitions", "-r", help="Override the number of repetitions."),
    per_run: str = typer.Option("first", "--per-run", help="Run figures for: first, all, none."),
    no_report: bool = typer.Option(False, "--no-report", help="Only run and store; no figures or report."),
    keep_stale: bool = typer.Option(False, "--keep-stale", help="Reuse stored runs that another build of ccarena computed (default: compute them again)."),
    background: Optional[str] = typer.Option(
        None, "--background", "-b", help="Background traffic set-up: none, testbed or paper (docs/scenario.md); same as --set background=NAME."
    ),
    backend: str = typer.Option("sim", "--backend", help=BACKEND_HELP + " linux: use `ccarena validate`."),
    inventory: Optional[Path] = typer.Option(None, "--inventory", help=INVENTORY_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help=DRY_RUN_HELP + " The first run in full, then what each further run changes."),
) -> None:
    """Run an experiment's sweep, store the results, draw its figures and write the report."""
    # matplotlib, DuckDB, pandas.
    from .present.format import slug
    from .present.report import write_report
    from .results.store import load

    if per_run not in ("first", "all", "none"):
        raise UsageError(f"--per-run: unknown value {per_run!r}; allowed: first, all, none")
    # Imported when the command runs (see the note at the top).
    from .scenario.traffic import BACKGROUNDS

    if background is not None:
        if background not in BACKGROUNDS:
            raise UsageError(f"--background: unknown set-up {background!r}; allowed: {', '.join(BACKGROUNDS)}")
        sets = [*(sets or []), f"background={background}"]
    runner = _sweep_backend(backend, inventory, dry_run)
    if dry_run:
        _sweep_dry_run(runner, preset, sets, not full, repetitions)
        return
    check_out_dir(results_dir)
    try:
        doc, outcome = _run_sweep_cli(preset, results_dir, jobs, dask, sets, not full, repetitions, None, True, False, keep_stale, runner)
    finally:
        if runner is not None:
            runner.close()
    res = load(results_dir)
    mode = "quick mode (add --full for the paper's set-up)" if outcome.experiment_id.endswith("@quick") else "full set-up"
    _emit(_points_table(res, outcome.experiment_id, f"{outcome.experiment_id}: {_status_line(res, outcome.experiment_id)}, {mode}"))
    out.print(f"{outcome.computed} runs computed, {outcome.cached} already stored, {outcome.failed} failed, {outcome.skipped} skipped "
              f"in {outcome.wall_s:.1f} s")
    if not no_report:
        index = write_report(results_dir, per_run=per_run, progress=(lambda m: err.print(f"[dim]{esc(m)}[/dim]", highlight=False)) if sys.stderr.isatty() else None)
        page = index.parent / slug(outcome.experiment_id) / "index.html"
        figs = sorted(p.name for p in page.parent.glob("*.png"))
        out.print(f"figures: {', '.join(figs) or 'none'} in {page.parent}")
        out.print(f"report: [bold]{page}[/bold]  (index: {index})")
    if outcome.failed:
        raise typer.Exit(1)


@list_app.command("ccas")
def list_ccas(
    as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
    fmt: str = typer.Option("table", "--format", "-f", help=FORMAT_HELP),
) -> None:
    """Congestion-control algorithms with a one-line description, their source, and the backends that run them here."""
    # Imported when the command runs (see the note at the top).
    from .backends.linux.host import linux_availability
    from .present.tables import Column, Listing
    from .scenario.catalogue import cca_catalogue  # the engine

    fmt = _format_option(as_json, fmt)
    cat = cca_catalogue()
    # Every engine algorithm runs in the simulator; the linux backend's answer is probed on this machine.
    linux = linux_availability([c["name"] for c in cat])
    for c in cat:
        c["backends"] = {"sim": "engine", "linux": linux[c["name"]]}
    if fmt == "json":
        print(json.dumps(cat))
        return
    listing = Listing(
        [Column("name", no_wrap=True, style="bold"), Column("description"), Column("source"), Column("parameters (default)"),
         Column("backends (here)")],
        [], title="Congestion-control algorithms", show_lines=True, box=None,
    )
    for c in cat:
        params = ", ".join(f"{p['name']}={str(p['default']).lower()}" for p in c["params"]) or "-"
        listing.rows.append([c["name"], c["description"], c["source"], params, f"sim; linux: {c['backends']['linux']}"])
    _emit_listing(listing, fmt)


@list_app.command("experiments")
def list_experiments(
    as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
    fmt: str = typer.Option("table", "--format", "-f", help=FORMAT_HELP),
) -> None:
    """Shipped scenarios (presets) with what they show and where they come from."""
    # The engine's catalogue.
    from .experiments.catalogue import preset_catalogue
    from .present.tables import Column, Listing

    fmt = _format_option(as_json, fmt)
    cat = preset_catalogue()
    if fmt == "json":
        print(json.dumps(cat))
        return
    listing = Listing(
        [Column("name", no_wrap=True, style="bold"), Column("what it shows"), Column("source"), Column("runs", no_wrap=True), Column("not in the engine yet")],
        [], title="Experiments", show_lines=True, box=None,
    )
    for p in cat:
        listing.rows.append([str(v) for v in (p["name"], p["description"], p["source"], p["runs"], ", ".join(p["missing"]) or "-")])
    _emit_listing(listing, fmt)


def _emit_listing(listing, fmt: str) -> None:
    """A listing of names and prose: drawn as a table with lines between rows."""
    from rich import box  # rich: on first output

    listing.box = box.HEAVY_HEAD
    _emit(listing, fmt)


@app.command()
def cleanup(
    everything: bool = typer.Option(False, "--all", help="Also remove what live runs own (stops them)."),
) -> None:
    """Remove what killed linux-backend runs left behind (namespaces, processes, BPF algorithms, temporary directories)."""
    # The linux backend: only for this command.
    from .backends.linux.cleanup import cleanup as linux_cleanup
    from .backends.linux.host import check_root

    check_root()
    r = linux_cleanup(everything=everything)
    if not any(r.values()):
        out.print("nothing to clean up")
        return
    out.print(
        f"removed {len(r['namespaces'])} namespaces, killed {len(r['processes_killed'])} processes, "
        f"unregistered {len(r['bpf_unregistered'])} BPF algorithms"
        + (f": {', '.join(r['bpf_unregistered'])}" if r["bpf_unregistered"] else "")
        + f", removed {len(r['directories'])} temporary directories"
    )


@app.command()
def validate(
    suite: str = typer.Option("default", "--suite", "-s", help="Validation suite: default, quick, ci, dctcp, paper, paper-rates, paper-quick or testbed-background (docs/fidelity.md)."),
    sets: Optional[List[str]] = typer.Option(
        None, "--set", help="Override a field in every case on both backends, e.g. --set hosts.tso=false or --set startup=iperf3 (repeatable)."
    ),
    repetitions: Optional[int] = typer.Option(None, "--reps", min=1, help="Repetitions per backend (default: the set's)."),
    duration: Optional[float] = typer.Option(None, "--duration", min=1, help="Seconds per run (default: the set's)."),
    out_root: Path = typer.Option(Path("results") / "validate", "--out", help="Where to store the table and the runs."),
    as_json: bool = typer.Option(False, "--json", help="Print the table as JSON."),
    backend: str = typer.Option("linux", "--backend", help="The kernel to compare with: linux (this machine's, in namespaces) or testbed (the hosts of --inventory)."),
    inventory: Optional[Path] = typer.Option(None, "--inventory", help=INVENTORY_HELP),
    case: Optional[List[str]] = typer.Option(
        None, "--case", help="Only the suite's cases matching this pattern, e.g. --case 'cubic-1000M-*' (shell-style; repeatable)."
    ),
    kernel_runs: Optional[Path] = typer.Option(
        None, "--kernel-runs",
        help="Reuse the kernel runs an earlier validate stored in this directory (its suite, cases, durations and repetitions) and run "
             "only the simulator again; --set then applies to the simulator alone.",
    ),
    sim_repetitions: Optional[int] = typer.Option(
        None, "--sim-reps", min=1,
        help="Simulator seeds per case (default: 20, or the kernel's repetitions if more). The simulator takes seconds per run, so e.g. "
             "--sim-reps 60 against 5 kernel runs narrows its mean and lets the rank test (column p) tell a real difference from run-to-run noise.",
    ),
) -> None:
    """Run a validation suite on the simulator and on a kernel (this machine's or a testbed's), and compare."""
    # The suite's modules load pandas and the backends: only this command needs them.
    import fnmatch
    from .present.tables import Column, Listing
    from .experiments.crosscheck import (
        METRICS, VALIDATION_SETS, fmt_diff, format_metric, format_p, rank_summary, ratio_summary, repetitions_text, run_validation,
        held_summary, like_with_like_summary, stalls_summary, stored_set_name, validation_cases, within_spread,
    )

    for s in sets or []:
        if "=" not in s and s in VALIDATION_SETS:
            raise UsageError(f"validate: the suite is chosen with --suite (--set overrides scenario fields); use --suite {s}")
    scenario_overrides = overrides(sets)
    if kernel_runs is not None:
        if not (kernel_runs / "cases.json").is_file():
            raise UsageError(f"--kernel-runs: {kernel_runs} is not a directory validate stored (it has no cases.json)")
        if duration is not None or repetitions is not None:
            raise UsageError("--kernel-runs: the stored runs fix the duration and repetitions; drop --duration and --reps")
        suite = stored_set_name(kernel_runs)
    if suite not in VALIDATION_SETS:
        raise UsageError(f"--suite: unknown validation suite {suite!r}; allowed: {', '.join(VALIDATION_SETS)}")
    if case:
        ids = [cid for cid, _ in validation_cases(suite)[0]]
        for pattern in case:
            if not fnmatch.filter(ids, pattern):
                raise UsageError(f"--case: {pattern!r} matches no case of suite {suite}; its cases: {', '.join(ids)}")
    if backend not in ("linux", "testbed"):
        raise UsageError(f"--backend: validate compares the simulator with a kernel; allowed: linux, testbed, got {backend!r}")
    kernel = backend_runner(backend, inventory, False) if kernel_runs is None else None
    try:
        table, where = run_validation(suite, out_root, duration, repetitions, log=lambda s: err.print(s, highlight=False, soft_wrap=True),
                                      backend=kernel, overrides=scenario_overrides, only=case, kernel_runs=kernel_runs,
                                      sim_repetitions=sim_repetitions)
    finally:
        if hasattr(kernel, "close"):
            kernel.close()
    if as_json:
        print(table.to_json(orient="records"))
        err.print(f"stored in {esc(str(where))}")
        return
    cols = ("case", "metric", "sim", "kernel", "kernel min-max", "sim - kernel", "> spread", "p", "sim, kernel's starts, stalls")
    runs_text = repetitions_text({"repetitions": int(table.repetitions.max()), "sim_repetitions": int(table.sim_repetitions.max())})
    listing = Listing([Column(c, "left" if c in ("case", "metric") else "right", no_wrap=c not in ("case", "metric")) for c in cols], [],
                      title=f"validate {suite}: simulator vs kernel ({VALIDATION_SETS[suite].description}); this run: {runs_text}")
    for _, r in table.iterrows():
        m = r.metric
        listing.rows.append([
            r.case, METRICS[m], format_metric(m, r.sim), format_metric(m, r.kernel), f"{format_metric(m, r.kernel_min)}-{format_metric(m, r.kernel_max)}",
            fmt_diff(m, r["diff"]),
            "yes" if r.flagged else "",
            format_p(r.p) + (" differs" if r.differs else ""),
            f"{format_metric(m, r.sim_kernel_starts)} ({format_metric(m, r.sim_kernel_starts_min)}-{format_metric(m, r.sim_kernel_starts_max)})",
        ])
    _emit(listing)
    ok, cells = within_spread(table)
    out.print(f"simulator within the kernel's spread: {ok} of {cells} cells")
    out.print(ratio_summary(table))
    out.print(rank_summary(table))
    out.print(like_with_like_summary(table))
    out.print(held_summary(table))
    out.print(stalls_summary(table))
    out.print(f"stored in [bold]{where}[/bold] (table.md, table.json, table.parquet, runs/)")


@app.command()
def version() -> None:
    """Print the ccarena version."""
    print(f"ccarena {__version__}")


def main(argv: Optional[List[str]] = None) -> None:
    """The full command line (the `ccarena` command is ``launch.main``, which
    hands everything but plain `run` lines to this)."""

    def call() -> None:
        try:
            rc = app(args=argv, standalone_mode=False)
        except typer.Exit as e:
            sys.exit(e.exit_code)
        except typer.Abort:
            raise KeyboardInterrupt from None
        # Recent typer versions turn Ctrl-C into a return value of 130 instead of raising.
        if isinstance(rc, int) and not isinstance(rc, bool) and rc != 0:
            if rc == 130:
                err.print("interrupted")
            sys.exit(rc)

    guarded(call)


if __name__ == "__main__":
    main()
