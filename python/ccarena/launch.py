"""The `ccarena` command's entry point, and the `run` command itself.

`ccarena run SCENARIO` with plain options (a scenario and any of --json,
--no-save, --out, --set, --backend, --inventory, --dry-run, --cca-file, each
in its usual form) is parsed here and run without loading the option parser
(typer, which brings pydantic): a short run is over in a fraction of the time
its start-up took otherwise. Anything else (other commands, --help, unknown
or repeated options, values that look like options) goes to the full command
line in ``cli``, which parses it and runs the same ``run_command``. The run
path imports what it needs as it needs it; docs/performance.md ("Start-up")
has the measurements.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Callable, List, Optional

from .errors import CcarenaError, UsageError

__all__ = ["main", "run_command", "guarded", "out", "err"]


class _Consoles:
    """stdout and stderr as rich consoles, made on first use (rich's console
    is not needed by `version` or completion). Piped output follows COLUMNS
    when it is set, else 140 columns (no terminal width to follow)."""

    def __getattr__(self, name: str):
        from rich.console import Console  # on first output

        piped = {} if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit() else {"width": 140}
        self.out = Console(**piped)
        self.err = Console(stderr=True, soft_wrap=True)
        return getattr(self, name)


_consoles = _Consoles()


class _Lazy:
    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        return getattr(getattr(_consoles, self._name), attr)


out = _Lazy("out")
err = _Lazy("err")


def esc(text: str) -> str:
    """`text` (a message, a scenario's name) as literal text inside rich markup."""
    from rich.markup import escape  # rich: on first output

    return escape(text)


def overrides(sets: Optional[List[str]]) -> dict:
    from .scenario.document import parse_override  # the scenario wing: only commands that read a scenario

    result = {}
    for s in sets or []:
        key, value = parse_override(s)
        result[key] = value
    return result


def check_out_dir(path: Path, option: str = "--out") -> Path:
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


class _NoProgress:
    """What `ccarena run` reports its progress to when no bar is shown: nothing
    (and rich's progress machinery is not imported)."""

    def __enter__(self) -> "_NoProgress":
        return self

    def __exit__(self, *exc) -> None:
        return None

    def add_task(self, description: str, **fields) -> int:
        return 0

    def update(self, task: int, **fields) -> None:
        return None


def _progress_bar(enabled: bool, unit: str = "s simulated"):
    if not enabled:
        return _NoProgress()
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn  # rich: on first output

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


def run_command(scenario: str, as_json: bool = False, sets: Optional[List[str]] = None, out_dir: Optional[Path] = None,
                no_save: bool = False, backend: str = "sim", inventory: Optional[Path] = None, dry_run: bool = False,
                cca_files: Optional[List[Path]] = None) -> None:
    """`ccarena run`: runs one scenario and prints per-flow results (the
    options are `run`'s, see ``cli.run``)."""
    # The engine and the scenario wing.
    from .backends.cca import load_cca_file

    for f in cca_files or []:
        load_cca_file(f)
    runner = backend_runner(backend, inventory, dry_run)
    sc = runner.load(scenario, overrides(sets))
    if dry_run:
        sys.stdout.write(runner.dry_run(sc))
        return
    warn_requirements(sc.doc)
    if sc.doc.get("sweep") and not as_json:
        err.print(f"note: {sc.name} has a [sweep] table; this runs its base scenario once (`ccarena sweep {scenario}` runs the whole sweep)", highlight=False, markup=False)
    target = None if no_save else _save_dir(sc, backend, out_dir)
    show = sys.stderr.isatty() and not as_json
    try:
        with _progress_bar(show, runner.progress_unit) as bar:
            task = bar.add_task(esc(sc.name) if show else sc.name, total=sc.engine["run"]["duration"] / 1e9)
            result = runner.run(sc, progress=lambda done, total: bar.update(task, completed=done))
    finally:
        if hasattr(runner, "close"):
            runner.close()
    for note in result.record.get(result.record.get("backend", "sim"), {}).get("notes", []):
        err.print(f"note: {note}", highlight=False, markup=False)
    saved = None
    if as_json:
        # Printed before saving, so that a failure to save loses nothing.
        print(result.to_json(), flush=True)
    if target is not None:
        saved = result.save(target)
    if as_json:
        if saved:
            err.print(f"saved to {esc(str(saved))}")
    else:
        _print_run(result)
        if saved:
            out.print(f"saved to [bold]{esc(str(saved))}[/bold]")
    if result.invariant_violations:
        err.print(f"[red]engine invariant violated:[/red] {esc(str(result.invariant_violations[0]))}")
        raise SystemExit(3)


def backend_runner(name: str, inventory: Optional[Path], dry_run: bool):
    """The backend named by --backend, configured with --inventory; checks the options belong together."""
    from .backends.registry import BACKENDS  # the engine and the scenario wing

    if name not in BACKENDS:
        raise UsageError(f"--backend: unknown backend {name!r}; allowed: {', '.join(BACKENDS)}")
    if name != "testbed":
        if inventory is not None:
            raise UsageError(f"--inventory: only the testbed backend reads an inventory (this is --backend {name}); add --backend testbed")
        if dry_run:
            raise UsageError(f"--dry-run: only the testbed backend has a dry run (this is --backend {name}); add --backend testbed --inventory FILE")
        return BACKENDS[name]
    if inventory is None:
        raise UsageError("--inventory: --backend testbed needs the inventory file naming the hosts (docs/testbed-backend.md; "
                         "an example: examples/testbed/geni-fig8.toml)")
    return BACKENDS[name].configure(inventory)


def _same_run(directory: Path, sc, backend: str) -> bool:
    """Whether `directory` holds a saved run of exactly this scenario as
    resolved, on the simulator (which repeats a run bit for bit). Kernel runs
    and runs of algorithms written in Python (whose files may have changed)
    are never the same run."""
    if backend != "sim" or sc.meta.python_ccas:
        return False
    try:
        saved = json.loads((directory / "resolved.json").read_text())
    except (OSError, ValueError):
        return False
    now = json.loads(json.dumps({"backend": sc.backend, "engine": sc.engine, "meta": sc.meta.to_dict()}))
    return saved == now


def _save_dir(sc, backend: str, out_dir: Optional[Path]) -> Path:
    """Where `ccarena run` saves: never over a different run. An explicit
    --out that holds something else is refused (before the run); the default
    results/runs/NAME-seedN takes the first free or identical NAME-seedN-2,
    -3, ..."""
    if out_dir is not None:
        check_out_dir(out_dir)
        if out_dir.exists() and any(out_dir.iterdir()) and not _same_run(out_dir, sc, backend):
            raise UsageError(f"--out: {out_dir} already holds something else (a different run?); choose another directory or remove it")
        return out_dir
    suffix = "" if backend == "sim" else f"-{backend}"
    base = Path("results") / "runs" / f"{sc.file_name}-seed{sc.seed}{suffix}"
    candidate, k = base, 1
    while candidate.exists() and any(candidate.iterdir()) and not _same_run(candidate, sc, backend):
        k += 1
        candidate = base.with_name(f"{base.name}-{k}")
    return check_out_dir(candidate)


def _print_run(result) -> None:
    # The rows and summary are computed from the record in plain Python: a
    # short run does not wait for pandas (results/summary.py).
    flows = result.flow_rows
    s = result.summary
    sc = result.scenario
    rate = result.record["link"]["rate_bps"] / 1e6
    kind = result.record.get("backend", "sim")
    linux = kind != "sim"  # a kernel's record: the linux or the testbed backend
    title = f"{sc.name}: {len(flows)} flows, {rate:g} Mbps, {result.record['duration_ns'] / 1e9:g} s (warm-up {result.record['warmup_ns'] / 1e9:g} s), seed {sc.seed}"
    if linux:
        section = result.record[kind]
        where = f"on {section['inventory']['name']}, " if kind == "testbed" else ""
        title += f" [{kind} backend, {where}kernel {section['kernel']}]"
        if section.get("rate_above_limit"):
            title += " (rate above what this machine carries: see the note)"
    # Imported when the command runs (see the note at the top).
    from .present.tables import Column, Listing, emit
    from .results.summary import np_sum

    cols = [
        ("flow", "right"), ("cca", "left"), ("rtt ms", "right"), ("start s", "right"), ("Mbps", "right"),
        ("share", "right"), ("cwnd", "right"), ("sRTT ms", "right"), ("retrans", "right"), ("RTOs", "right"), ("drops", "right"),
    ]
    listing = Listing([Column(c, j, no_wrap=True) for c, j in cols], [], title=title)
    total = np_sum([f["throughput_mbps"] for f in flows])
    background = sum(1 for f in flows if f["background"])
    for f in flows:
        cca = f["cca"] + (" (reverse)" if f["direction"] == "reverse" else "")
        thr, cwnd, srtt = f["throughput_mbps"], f["mean_cwnd"], f["mean_srtt_ms"]
        listing.rows.append([
            str(f["flow"]), cca, f"{f['rtt_ms']:.4g}", f"{f['start_s']:.4g}", f"{thr:.2f}",
            f"{thr / total:.1%}" if total > 0 else "-",
            f"{cwnd:.0f}" if cwnd == cwnd else "-",
            f"{srtt:.1f}" if srtt == srtt else "-",
            str(f["retransmissions"]), str(f["rtos"]), "-" if linux else str(f["drops"]),
        ])
        listing.row_styles.append("dim" if f["background"] else None)
    if background:
        listing.caption = f"dim: background flows ({background}), left out of Jain's index and the throughput ratio"
    emit(listing, "table", out)
    speed = result.record["duration_ns"] / 1e9 / result.wall_time_s if result.wall_time_s > 0 else float("inf")
    if linux:
        out.print(
            f"utilisation [bold]{s['utilization']:.1%}[/bold]   Jain's index [bold]{s['jain_index']:.4f}[/bold]   "
            f"throughput ratio (min/max) [bold]{s['throughput_ratio']:.3f}[/bold]   mean queue {s['mean_queue_packets']:.0f} packets   "
            f"bottleneck drops {s['drops']}   ({result.wall_time_s:.1f} s wall)"
        )
        if s["utilization"] > 1:
            out.print(OVER_CAPACITY_NOTE)
        return
    out.print(
        f"utilisation [bold]{s['utilization']:.1%}[/bold]   Jain's index [bold]{s['jain_index']:.4f}[/bold]   "
        f"throughput ratio (min/max) [bold]{s['throughput_ratio']:.3f}[/bold]   mean queue {s['mean_queue_packets']:.0f} packets   "
        f"({result.wall_time_s:.2f} s wall, {speed:.0f}x real time)"
    )
    if s["utilization"] > 1:
        out.print(OVER_CAPACITY_NOTE)
    traffic = _traffic_line(result)
    if traffic:
        out.print(traffic)


#: Said under a run's summary when its flows' goodput exceeds the link: a
#: loss recovery that straddles the warm-up's end delivers, inside the
#: window, data that crossed the bottleneck before it (out of order, held by
#: the receiver until the retransmission filled the hole), as iperf3's
#: intervals count it too.
OVER_CAPACITY_NOTE = ("note: utilisation above 100 %: the flows' goodput in the measurement window includes data that crossed "
                      "the bottleneck before it (a loss recovery across the warm-up's end); a longer warm-up or run measures the steady state")


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
        from .results.summary import udp_loss_rate  # the results wing: only once a run has been made

        n, loss = len(result.record["udp"]), udp_loss_rate(result.record)
        parts.append(f"UDP [bold]{s['udp_throughput_mbps']:.2f} Mbps[/bold] received ({n} source{'s' if n != 1 else ''}, loss {loss:.2%})")
    return "   ".join(parts)


def warn_requirements(doc: dict) -> None:
    from .experiments.catalogue import missing_features  # the engine's catalogue

    missing = missing_features(doc)
    if missing:
        name = doc.get("name", "scenario")
        err.print(f"[yellow]warning:[/yellow] {esc(str(name))} runs without {', '.join(missing)} (not in the engine yet; see its notes)", highlight=False, soft_wrap=True)


# ---------------------------------------------------------------- entry point

# `run`'s options: those taking a value (True: repeatable), and the flags.
_RUN_VALUES = {"--set": True, "--out": False, "--backend": False, "--inventory": False, "--cca-file": True}
_RUN_FLAGS = {"--json", "--no-save", "--dry-run"}


def plain_run_args(args: List[str]) -> Optional[dict]:
    """`run_command`'s arguments when `args` is a plain `run` invocation (see
    the module's docstring), the values the full parser would give them;
    None for anything it should parse itself."""
    if not args or args[0] != "run":
        return None
    scenario = None
    seen: dict = {}
    rest = args[1:]
    k = 0
    while k < len(rest):
        a = rest[k]
        k += 1
        if not a.startswith("-"):
            if scenario is not None or not a:
                return None
            scenario = a
            continue
        name, eq, value = a.partition("=")
        if name in _RUN_FLAGS and not eq:
            value = True
        elif name in _RUN_VALUES:
            if not eq:
                if k >= len(rest):
                    return None
                value = rest[k]
                k += 1
            if not value or value.startswith("-"):
                return None
        else:
            return None
        if name in seen and not _RUN_VALUES.get(name, False):
            return None
        seen.setdefault(name, []).append(value)
    if scenario is None:
        return None

    def paths(name: str) -> Optional[list]:
        return [Path(v) for v in seen[name]] if name in seen else None

    return {
        "scenario": scenario,
        "as_json": "--json" in seen,
        "sets": seen.get("--set"),
        "out_dir": Path(seen["--out"][0]) if "--out" in seen else None,
        "no_save": "--no-save" in seen,
        "backend": seen["--backend"][0] if "--backend" in seen else "sim",
        "inventory": Path(seen["--inventory"][0]) if "--inventory" in seen else None,
        "dry_run": "--dry-run" in seen,
        "cca_files": paths("--cca-file"),
    }


def guarded(call: Callable[[], None]) -> None:
    """Runs a command: bad input prints one line naming the field and exits
    with status 2; no traceback reaches the user unless CCARENA_DEBUG=1 is set."""
    try:
        call()
    except CcarenaError as e:
        # Escaped: messages quote scenario syntax such as [sweep], which is not markup.
        err.print(f"[red]error:[/red] {esc(str(e))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
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
        err.print(f"[red]error:[/red] {type(e).__name__}: {esc(str(e))} (set CCARENA_DEBUG=1 for details)", highlight=False, soft_wrap=True)
        sys.exit(1)


def main(argv: Optional[List[str]] = None) -> None:
    """The `ccarena` command."""
    args = plain_run_args(sys.argv[1:] if argv is None else list(argv))
    if args is None:
        from .cli import main as full  # typer: every other command line

        full(argv)
        return
    guarded(lambda: run_command(**args))


if __name__ == "__main__":
    main()
