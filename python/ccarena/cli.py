"""The `ccarena` command line. Bad input prints one line naming the field and
what is allowed and exits with status 2; no traceback reaches the user unless
CCARENA_DEBUG=1 is set.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from .backends.cca import load_cca_file
from .backends.linux.cleanup import cleanup as linux_cleanup
from .backends.linux.host import check_root
from .backends.registry import BACKENDS
from .errors import CcarenaError, UsageError
from .experiments.bench import bench as run_bench
from .experiments.catalogue import missing_features, preset_catalogue
from .experiments.executors import DaskExecutor, LocalExecutor
from .present.format import pm, slug
from .scenario.catalogue import cca_catalogue
from .scenario.document import parse_override
from .scenario.traffic import BACKGROUNDS
from .version import __version__

# Commands import what needs pandas, DuckDB or matplotlib (results, runner,
# figures, report, cross-check) when they run, so that `ccarena --help`,
# `list` and `version` stay quick.

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
err = Console(stderr=True, soft_wrap=True)


def _overrides(sets: Optional[List[str]]) -> dict:
    result = {}
    for s in sets or []:
        key, value = parse_override(s)
        result[key] = value
    return result


def _check_out_dir(path: Path, option: str = "--out") -> Path:
    """`path` as a directory results can be written into, checked before any run
    starts: it exists (or is created) as a directory and a file can be written
    in it. Raises a `UsageError` naming the option otherwise."""
    if "\0" in str(path):
        raise UsageError(f"{option}: the path contains a NUL byte")
    if path.exists() and not path.is_dir():
        raise UsageError(f"{option}: {escape_path(path)} exists and is not a directory")
    probe = path / f".ccarena-probe-{os.getpid()}"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"{option}: cannot write in {escape_path(path)}: {e.strerror or e}") from None
    return path


def escape_path(path: Path) -> str:
    """A path for a message: repr-escaped when it holds anything unprintable."""
    text = str(path)
    return text if text.isprintable() else repr(text)


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
    cca_files: Optional[List[Path]] = typer.Option(None, "--cca-file", help="Python file defining congestion control classes (repeatable). It is code and runs with your rights: use only files you trust."),
) -> None:
    """Run one scenario and print per-flow results."""
    for f in cca_files or []:
        load_cca_file(f)
    if backend not in BACKENDS:
        raise UsageError(f"--backend: unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
    runner = BACKENDS[backend]
    sc = runner.load(scenario, _overrides(sets))
    suffix = "" if backend == "sim" else f"-{backend}"
    target = None if no_save else _check_out_dir(out_dir or Path("results") / "runs" / f"{sc.file_name}-seed{sc.seed}{suffix}")
    _warn_requirements(sc.doc)
    if sc.doc.get("sweep") and not as_json:
        err.print(f"note: {escape(sc.name)} has a \\[sweep] table; this runs its base scenario once (`ccarena sweep {escape(scenario)}` runs the whole sweep)", highlight=False)
    show = sys.stderr.isatty() and not as_json
    with _progress_bar(show, runner.progress_unit) as bar:
        task = bar.add_task(escape(sc.name), total=sc.engine["run"]["duration"] / 1e9)
        result = runner.run(sc, progress=lambda done, total: bar.update(task, completed=done))
    for note in result.record.get("linux", {}).get("notes", []):
        err.print(f"note: {escape(note)}", highlight=False)
    saved = None
    if as_json:
        # Printed before saving, so that a failure to save loses nothing.
        print(result.to_json(), flush=True)
    if target is not None:
        saved = result.save(target)
    if as_json:
        if saved:
            err.print(f"saved to {escape(str(saved))}")
    else:
        _print_run(result)
        if saved:
            out.print(f"saved to [bold]{escape(str(saved))}[/bold]")
    if result.invariant_violations:
        err.print(f"[red]engine invariant violated:[/red] {escape(result.invariant_violations[0])}")
        raise typer.Exit(3)


def _print_run(result) -> None:
    flows = result.flows
    s = result.summary
    sc = result.scenario
    rate = result.record["link"]["rate_bps"] / 1e6
    linux = result.record.get("backend") == "linux"
    title = f"{escape(sc.name)}: {len(flows)} flows, {rate:g} Mbps, {result.record['duration_ns'] / 1e9:g} s (warm-up {result.record['warmup_ns'] / 1e9:g} s), seed {sc.seed}"
    if linux:
        title += f" \\[linux backend, kernel {escape(result.record['linux']['kernel'])}]"
        if result.record["linux"].get("rate_above_limit"):
            title += " [red](rate above what this machine carries: see the note)[/red]"
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAVY)
    for col, just in [
        ("flow", "right"), ("cca", "left"), ("rtt ms", "right"), ("start s", "right"), ("Mbps", "right"),
        ("share", "right"), ("cwnd", "right"), ("sRTT ms", "right"), ("retrans", "right"), ("RTOs", "right"), ("drops", "right"),
    ]:
        t.add_column(col, justify=just)
    total = flows.throughput_mbps.sum()
    background = int(flows.background.sum()) if "background" in flows else 0
    for i, f in flows.iterrows():
        cca = f.cca + (" (reverse)" if f.get("direction", "forward") == "reverse" else "")
        t.add_row(
            str(i), escape(cca), f"{f.rtt_ms:.4g}", f"{f.start_s:.4g}", f"{f.throughput_mbps:.2f}",
            f"{f.throughput_mbps / total:.1%}" if total > 0 else "-",
            f"{f.mean_cwnd:.0f}" if f.mean_cwnd == f.mean_cwnd else "-",
            f"{f.mean_srtt_ms:.1f}" if f.mean_srtt_ms == f.mean_srtt_ms else "-",
            str(f.retransmissions), str(f.rtos), "-" if linux else str(f.drops),
            style="dim" if f.get("background", False) else None,
        )
    if background:
        t.caption = f"dim: background flows ({background}), left out of Jain's index and the throughput ratio"
        t.caption_justify = "left"
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
    traffic = _traffic_line(result)
    if traffic:
        out.print(traffic)


def _traffic_line(result) -> str:
    """Web and UDP traffic in one line (empty when the run has neither)."""
    s = result.summary
    parts = []
    if "web_flows" in s:
        if s["web_flows"]:
            fct = s["median_fct_s"]
            parts.append(
                f"web flows [bold]{s['web_flows']:,}[/bold] after warm-up, {s['web_completed']:.1%} completed, "
                f"median FCT [bold]{fct * 1e3:.0f} ms[/bold]" if fct == fct else f"web flows {s['web_flows']:,} after warm-up, none completed"
            )
        else:
            parts.append("web flows: none started after warm-up")
    if "udp_throughput_mbps" in s:
        from .results.metrics import udp_metrics  # numpy (loaded by now: a run was made)

        n, loss = len(result.udp), udp_metrics(result.udp)["udp_loss_rate"]
        parts.append(f"UDP [bold]{s['udp_throughput_mbps']:.2f} Mbps[/bold] received ({n} source{'s' if n != 1 else ''}, loss {loss:.2%})")
    return "   ".join(parts)


@app.command()
def bench(
    as_json: bool = typer.Option(False, "--json", help="Print JSON: one object per scenario, one per line."),
    repeat: int = typer.Option(3, "--repeat", min=1, help="Runs to take the median of."),
    scenarios: Optional[List[str]] = typer.Option(
        None, "--scenario", help="Scenario or preset to time (repeatable; default: the fixed bench and bench-background scenarios)."
    ),
) -> None:
    """Time the engine on the fixed benchmark scenarios: 400 Mbps with 2 CUBIC flows, and the same with
    24 background flows and web traffic both ways (60 s simulated each)."""
    results = [run_bench(s, repeat=repeat) for s in (scenarios or ["bench", "bench-background"])]
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
    ]
    for name, fmt in rows:
        t.add_row(name, *[fmt(r) for r in results])
    out.print(t)
    out.print(f"[dim]{results[0]['machine']}, ccarena {results[0]['version']}[/dim]")


def _sweep_progress(enabled: bool):
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
    if dask:
        return DaskExecutor(dask, jobs=jobs)
    return LocalExecutor(jobs)


def _warn_requirements(doc: dict) -> None:
    missing = missing_features(doc)
    if missing:
        name = doc.get("name", "scenario")
        err.print(f"[yellow]warning:[/yellow] {escape(str(name))} runs without {', '.join(missing)} (not in the engine yet; see its notes)", highlight=False, soft_wrap=True)


def _run_sweep_cli(scenario: str, results_dir: Path, jobs, dask, sets, quick: bool, repetitions, name, retry_failed: bool, quiet: bool):
    """Shared by `sweep` and `reproduce`: runs the sweep with a progress bar; returns the outcome."""
    # DuckDB and pandas (the store), matplotlib (figure specs).
    from .experiments.runner import prepare, run_sweep
    from .experiments.sweep import repetitions_identical
    from .present.figures import validate_figure_specs

    # Without [sweep.quick] settings, quick mode is the full sweep (plan.quick is then off).
    plan = prepare(scenario, _overrides(sets), quick, repetitions)
    doc = plan.doc
    validate_figure_specs(doc.get("figures"))
    _warn_requirements(doc)
    if repetitions_identical(plan.specs):
        err.print("[yellow]warning:[/yellow] the repetitions will be identical runs (nothing in the scenario is random); "
                  "set run.start_jitter (e.g. \"100ms\") or random loss to vary them", highlight=False)
    executor = _make_executor(jobs, dask)
    show = sys.stderr.isatty() and not quiet
    log_lines = not sys.stderr.isatty() and not quiet  # e.g. under nohup or CI: a line per 10 % of the runs
    state = {"task": None, "runs": 0, "done": 0, "t0": time.monotonic(), "logged": 0}
    with _sweep_progress(show) as bar:

        def on_event(kind: str, info: dict) -> None:
            if kind == "start":
                if info["skipped"]:
                    reasons = "; ".join(f"{k} ({v} runs)" for k, v in info["skip_reasons"].items())
                    err.print(f"[yellow]warning:[/yellow] skipping {info['skipped']} runs: {escape(reasons)}", highlight=False, soft_wrap=True)
                if not quiet:
                    err.print(f"{escape(info['experiment'])}: {info['runs']} runs to compute, {info['cached']} already stored "
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
                err.print(f"[red]run failed[/red] {info['run_id']} {escape(str(info['params']))}: {escape(str(info['error']))}", highlight=False, soft_wrap=True)

        try:
            outcome = run_sweep(plan, results_dir, executor=executor, name=name, variant="quick" if plan.quick else "",
                                retry_failed=retry_failed, on_event=on_event)
        except KeyboardInterrupt:
            err.print(f"interrupted: finished runs are stored in {escape(str(results_dir))}; run the same command again to resume", highlight=False)
            raise
    return doc, outcome


def _points_table(res, experiment_id: str, title: str) -> Table:
    # matplotlib and pandas.
    from .present.figures import short_label
    from .present.report import experiment_shape, key_metrics

    runs = res.runs[res.runs.experiment_id == experiment_id]
    ok = runs[runs.status == "ok"]
    shape = experiment_shape(res, ok.run_id)
    names = res.param_names(experiment_id)
    km = key_metrics(shape["n_flows"], shape["n_groups"], shape["web"], shape["udp"])
    t = Table(title=escape(title), title_justify="left", box=box.SIMPLE_HEAVY,
              caption="mean ± half-width of the 95 % confidence interval over repetitions", caption_justify="left")
    pts = res.points(experiment_id, km) if len(ok) else None
    for n in names:
        width = max([len(n)] + ([len(str(v)) for v in pts[n]] if pts is not None and n in pts else []))
        t.add_column(escape(n), no_wrap=True, min_width=min(width, 24))
    t.add_column("n", justify="right", no_wrap=True)
    for m in km:
        t.add_column(short_label(m), justify="right")
    if pts is not None:
        for _, p in pts.iterrows():
            cells = [escape(str(p[n])) for n in names] + [str(int(p.n))]
            for m in km:
                cells.append(pm(p[m], p[f"{m}_ci95"], 1 if m.startswith("total_") else None))
            t.add_row(*cells)
    return t




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
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object with the counts instead of tables."),
) -> None:
    """Run a scenario's sweep (grid x repetitions) into a results directory; resumable."""
    from .results.store import load  # DuckDB, pandas

    _check_out_dir(results_dir)
    doc, outcome = _run_sweep_cli(scenario, results_dir, jobs, dask, sets, quick, repetitions, name, not keep_failed, as_json)
    if as_json:
        print(json.dumps(outcome.to_dict()))
    else:
        res = load(results_dir)
        out.print(_points_table(res, outcome.experiment_id, f"{outcome.experiment_id}: {_status_line(res, outcome.experiment_id)}"))
        out.print(f"{outcome.computed} runs computed, {outcome.cached} already stored, {outcome.failed} failed, "
                          f"{outcome.skipped} skipped in {outcome.wall_s:.1f} s; results in [bold]{results_dir}[/bold]  (next: ccarena report {results_dir})")
    if outcome.failed:
        raise typer.Exit(1)


@app.command()
def results(
    directory: Path = typer.Argument(Path("results"), help="Results directory."),
    experiment: Optional[str] = typer.Option(None, "--experiment", "-e", help="Only this experiment."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (experiments, run counts, per-point metrics)."),
    recompute: bool = typer.Option(False, "--recompute", help="Recompute every metric from the stored raw records first."),
) -> None:
    """Summarise a results directory: experiments, runs, metrics per grid point."""
    from .results.store import Store, load  # DuckDB, pandas

    if not directory.exists():
        raise UsageError(f"{directory}: no such results directory")
    if recompute:
        with Store(directory) as st:
            n = st.recompute_metrics()
        err.print(f"recomputed the metrics of {n} runs from their records")
    res = load(directory)
    exps = res.experiments
    if experiment:
        exps = exps[(exps.experiment_id == experiment) | (exps.name == experiment)]
        if not len(exps):
            raise UsageError(f"--experiment: no experiment {experiment!r} in {directory}; present: {', '.join(res.experiments.experiment_id) or 'none'}")
    if as_json:
        doc = []
        for _, e in exps.iterrows():
            runs = res.runs[res.runs.experiment_id == e.experiment_id]
            pts = res.points(e.experiment_id) if (runs.status == "ok").any() else None
            doc.append({
                "experiment": e.experiment_id, "name": e["name"], "variant": e.variant, "description": e.description,
                "runs": {k: int(v) for k, v in runs.status.value_counts().items()},
                "points": json.loads(pts.to_json(orient="records")) if pts is not None else [],
            })
        print(json.dumps({"directory": str(directory), "experiments": doc}))
        return
    if not len(exps):
        out.print(f"{escape(str(directory))}: no experiments yet")
        return
    for _, e in exps.iterrows():
        out.print(_points_table(res, e.experiment_id, f"{e.experiment_id}: {_status_line(res, e.experiment_id)}"))
        failed = res.runs[(res.runs.experiment_id == e.experiment_id) & (res.runs.status == "error")]
        for _, r in failed.head(5).iterrows():
            out.print(f"  [red]failed[/red] {r.run_id}: {escape(str(r.error))}", highlight=False)


@app.command()
def report(
    directory: Path = typer.Argument(Path("results"), help="Results directory."),
    out_dir: Optional[Path] = typer.Option(None, "--out", "-o", help="Where to write the report (default DIR/report)."),
    per_run: str = typer.Option("first", "--per-run", help="Run figures for: first (first repetition of each point), all, none."),
    experiment: Optional[List[str]] = typer.Option(None, "--experiment", "-e", help="Only these experiments (repeatable)."),
) -> None:
    """Write a static HTML report (figures, metrics tables, scenarios) of a results directory."""
    from .present.report import write_report  # matplotlib, DuckDB, pandas

    if per_run not in ("first", "all", "none"):
        raise UsageError(f"--per-run: unknown value {per_run!r}; allowed: first, all, none")
    if not directory.exists():
        raise UsageError(f"{directory}: no such results directory")
    index = write_report(directory, out_dir, per_run=per_run, experiments=experiment,
                         progress=(lambda m: err.print(f"[dim]{escape(m)}[/dim]", highlight=False)) if sys.stderr.isatty() else None)
    out.print(f"report: [bold]{escape(str(index))}[/bold]")


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
    background: Optional[str] = typer.Option(
        None, "--background", "-b", help="Background traffic set-up: none, testbed or paper (docs/scenario.md); same as --set background=NAME."
    ),
) -> None:
    """Run an experiment's sweep, store the results, draw its figures and write the report."""
    # matplotlib, DuckDB, pandas.
    from .present.report import write_report
    from .results.store import load

    if per_run not in ("first", "all", "none"):
        raise UsageError(f"--per-run: unknown value {per_run!r}; allowed: first, all, none")
    if background is not None:
        if background not in BACKGROUNDS:
            raise UsageError(f"--background: unknown set-up {background!r}; allowed: {', '.join(BACKGROUNDS)}")
        sets = [*(sets or []), f"background={background}"]
    _check_out_dir(results_dir)
    doc, outcome = _run_sweep_cli(preset, results_dir, jobs, dask, sets, not full, repetitions, None, True, False)
    res = load(results_dir)
    mode = "quick mode (add --full for the paper's set-up)" if outcome.experiment_id.endswith("@quick") else "full set-up"
    out.print(_points_table(res, outcome.experiment_id, f"{outcome.experiment_id}: {_status_line(res, outcome.experiment_id)}, {mode}"))
    out.print(f"{outcome.computed} runs computed, {outcome.cached} already stored, {outcome.failed} failed, {outcome.skipped} skipped "
              f"in {outcome.wall_s:.1f} s")
    if not no_report:
        index = write_report(results_dir, per_run=per_run, progress=(lambda m: err.print(f"[dim]{escape(m)}[/dim]", highlight=False)) if sys.stderr.isatty() else None)
        page = index.parent / slug(outcome.experiment_id) / "index.html"
        figs = sorted(p.name for p in page.parent.glob("*.png"))
        out.print(f"figures: {', '.join(figs) or 'none'} in {page.parent}")
        out.print(f"report: [bold]{page}[/bold]  (index: {index})")
    if outcome.failed:
        raise typer.Exit(1)


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
    cat = preset_catalogue()
    if as_json:
        print(json.dumps(cat))
        return
    t = Table(title="Experiments", title_justify="left", show_lines=True)
    t.add_column("name", style="bold")
    t.add_column("what it shows")
    t.add_column("source")
    t.add_column("runs")
    t.add_column("not in the engine yet")
    for p in cat:
        t.add_row(*(escape(str(v)) for v in (p["name"], p["description"], p["source"], p["runs"], ", ".join(p["missing"]) or "-")))
    out.print(t)


@app.command()
def cleanup(
    everything: bool = typer.Option(False, "--all", help="Also remove what live runs own (stops them)."),
) -> None:
    """Remove what killed linux-backend runs left behind (namespaces, processes, BPF algorithms, temporary directories)."""
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
    set_name: str = typer.Option("default", "--set", help="Validation set: " + ", ".join("default quick ci".split()) + "."),
    repetitions: Optional[int] = typer.Option(None, "--reps", min=1, help="Repetitions per backend (default: the set's)."),
    duration: Optional[float] = typer.Option(None, "--duration", min=1, help="Seconds per run (default: the set's)."),
    out_root: Path = typer.Option(Path("results") / "validate", "--out", help="Where to store the table and the runs."),
    as_json: bool = typer.Option(False, "--json", help="Print the table as JSON."),
) -> None:
    """Run a validation set on the simulator and on this machine's kernel, and compare."""
    from .experiments.crosscheck import METRICS, VALIDATION_SETS, fmt_diff, format_metric, run_validation  # pandas

    if set_name not in VALIDATION_SETS:
        raise UsageError(f"--set: unknown validation set {set_name!r}; allowed: {', '.join(VALIDATION_SETS)}")
    table, where = run_validation(set_name, out_root, duration, repetitions, log=lambda s: err.print(escape(s), highlight=False, soft_wrap=True))
    if as_json:
        print(table.to_json(orient="records"))
        err.print(f"stored in {escape(str(where))}")
        return
    t = Table(title=f"validate {set_name}: simulator vs kernel ({VALIDATION_SETS[set_name].description})", title_justify="left", box=box.SIMPLE_HEAVY)
    for col in ("case", "metric", "sim", "kernel", "kernel min-max", "sim - kernel", "> spread", "sim, kernel's starts"):
        t.add_column(col, justify="left" if col in ("case", "metric") else "right")
    for _, r in table.iterrows():
        m = r.metric
        t.add_row(
            r.case, METRICS[m], format_metric(m, r.sim), format_metric(m, r.kernel), f"{format_metric(m, r.kernel_min)}-{format_metric(m, r.kernel_max)}",
            fmt_diff(m, r["diff"]),
            "[bold red]yes[/bold red]" if r.flagged else "",
            f"{format_metric(m, r.sim_kernel_starts)} ({format_metric(m, r.sim_kernel_starts_min)}-{format_metric(m, r.sim_kernel_starts_max)})",
        )
    out.print(t)
    out.print(f"stored in [bold]{where}[/bold] (table.md, table.json, table.parquet, runs/)")


@app.command()
def version() -> None:
    """Print the ccarena version."""
    print(f"ccarena {__version__}")


def main(argv: Optional[List[str]] = None) -> None:
    try:
        rc = app(args=argv, standalone_mode=False)
        # Recent typer versions turn Ctrl-C into a return value of 130 instead of raising.
        if isinstance(rc, int) and not isinstance(rc, bool) and rc != 0:
            if rc == 130:
                err.print("interrupted")
            sys.exit(rc)
    except CcarenaError as e:
        # Escaped: messages quote scenario syntax such as [sweep], which is not markup.
        err.print(f"[red]error:[/red] {escape(str(e))}", highlight=False, soft_wrap=True)
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
        err.print(f"[red]error:[/red] {type(e).__name__}: {escape(str(e))} (set CCARENA_DEBUG=1 for details)", highlight=False, soft_wrap=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
