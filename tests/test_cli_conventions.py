"""What a command-line user expects of `ccarena`: --version and -h, shell
completion, a quick `version`, `--set` meaning one thing everywhere (with
`flows[*]`), saved runs that never overwrite a different run, and output that
fits 80 columns and can be read by programs (--format)."""

import csv
import io
import json
import os
import subprocess
import sys

import pytest

from conftest import cli


def cli_at(columns, *args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "ccarena.cli", *args], capture_output=True, text=True, cwd=cwd,
        env={**os.environ, "COLUMNS": str(columns)},
    )


def test_version_option_and_short_help():
    v = cli("--version", check=True)
    assert v.stdout.startswith("ccarena ") and v.stdout == cli("version", check=True).stdout
    assert cli("-V", check=True).stdout == v.stdout
    h = cli("-h", check=True)
    assert "Usage:" in h.stdout and "reproduce" in h.stdout
    assert "Usage:" in cli("run", "-h", check=True).stdout


def test_shell_completion_is_offered():
    h = cli("--help", check=True)
    assert "--install-completion" in h.stdout and "--show-completion" in h.stdout


def test_version_imports_nothing_heavy():
    """`ccarena version` (and --help) must not load pandas, DuckDB, matplotlib,
    Dask or numpy: that is what made it take a second."""
    code = (
        "import sys\n"
        "from ccarena.cli import main\n"
        "for argv in (['version'], ['--help'], ['list', '--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'duckdb', 'matplotlib', 'dask', 'numpy', 'pyarrow'))\n"
        "print('HEAVY', heavy)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "HEAVY []" in p.stdout, p.stdout


def test_set_with_star_applies_to_every_flow_table(tmp_path):
    sc = tmp_path / "two.toml"
    sc.write_text(
        'name = "two"\n[network]\nbottleneck_rate = "20Mbps"\nbuffer = "50p"\n'
        '[[flows]]\ncca = "cubic"\nrtt = "10ms"\n[[flows]]\ncca = "reno"\nrtt = "80ms"\n'
        '[run]\nduration = "2s"\nwarmup = "1s"\n'
    )
    p = cli("run", str(sc), "--json", "--no-save", "--set", "flows[*].rtt=30ms", check=True)
    flows = json.loads(p.stdout)["flows"]
    assert [f["rtt_ms"] for f in flows] == [30, 30]
    bad = cli("run", str(sc), "--no-save", "--set", "udp[*].rate=1Mbps")
    assert bad.returncode == 2 and "udp[*]" in bad.stderr and "Traceback" not in bad.stderr


def test_validate_takes_suite_not_set():
    p = cli("validate", "--set", "ci")
    assert p.returncode == 2 and "--suite" in p.stderr and "Traceback" not in p.stderr
    assert "--suite" in cli("validate", "--help", check=True).stdout


def test_a_saved_run_is_never_overwritten_by_a_different_one(small_scenario, tmp_path):
    work = tmp_path / "w"
    work.mkdir()

    def run(*extra):
        p = subprocess.run([sys.executable, "-m", "ccarena.cli", "run", str(small_scenario), *extra],
                           capture_output=True, text=True, cwd=work, env={**os.environ, "COLUMNS": "200"})
        return p

    first = run()
    assert first.returncode == 0 and "results/runs/small-seed3" in first.stdout
    saved = (work / "results/runs/small-seed3/result.json").read_text()
    # The same run again: the same place (the simulator repeats it bit for bit).
    again = run()
    assert "saved to results/runs/small-seed3\n" in again.stdout.replace("[bold]", "")
    # A different run of the same name and seed: a new directory, the first kept.
    other = run("--set", "run.duration=4s")
    assert other.returncode == 0 and "results/runs/small-seed3-2" in other.stdout
    assert json.loads((work / "results/runs/small-seed3/result.json").read_text())["scenario"] == json.loads(saved)["scenario"]
    # An explicit --out holding a different run is refused before anything runs.
    refused = run("--set", "run.duration=3s", "--out", "results/runs/small-seed3")
    assert refused.returncode == 2 and "already holds" in refused.stderr and "Traceback" not in refused.stderr


@pytest.mark.parametrize("args", [["list", "experiments"], ["list", "ccas"], ["--help"], ["sweep", "--help"], ["run", "--help"]])
def test_80_columns(args):
    p = cli_at(80, *args)
    assert p.returncode == 0, p.stderr
    long = [line for line in p.stdout.splitlines() if len(line.rstrip()) > 80]
    assert not long, long
    if args == ["list", "experiments"]:
        names = [e["name"] for e in json.loads(cli("list", "experiments", "--json", check=True).stdout)]
        words = set(p.stdout.split())
        assert all(n in words for n in names), [n for n in names if n not in words]


def test_run_table_at_80_columns(small_scenario):
    p = cli_at(80, "run", str(small_scenario), "--no-save")
    assert p.returncode == 0, p.stderr
    assert not [line for line in p.stdout.splitlines() if len(line.rstrip()) > 80]
    assert "cubic" in p.stdout and "Jain" in p.stdout


def test_help_keeps_bracketed_text():
    assert "[sweep]" in cli("sweep", "--help", check=True).stdout


def test_listing_formats():
    rows = list(csv.DictReader(io.StringIO(cli("list", "experiments", "--format", "csv", check=True).stdout)))
    assert rows and "name" in rows[0] and any(r["name"] == "quickstart" for r in rows)
    tsv = cli("list", "ccas", "--format", "tsv", check=True).stdout.splitlines()
    assert tsv[0].split("\t")[0] == "name" and any(line.startswith("cubic\t") for line in tsv)
    assert isinstance(json.loads(cli("list", "ccas", "--format", "json", check=True).stdout), list)
    bad = cli("list", "ccas", "--format", "xml")
    assert bad.returncode == 2 and "table, csv, tsv, json" in bad.stderr


def test_results_formats_and_stacked_layout(tmp_path):
    sc = tmp_path / "sw.toml"
    sc.write_text(
        'name = "sw"\n[network]\nbottleneck_rate = "20Mbps"\nbuffer = "50p"\n'
        '[[flows]]\ncca = "cubic"\nrtt = "10ms"\ncount = 2\n'
        '[run]\nduration = "2s"\nwarmup = "1s"\nstart_jitter = "10ms"\n'
        '[sweep]\nrepetitions = 2\n"network.bottleneck_rate" = ["20Mbps", "40Mbps"]\n'
    )
    out = tmp_path / "res"
    cli("sweep", str(sc), "--out", str(out), "-j", "1", "--json", check=True)
    data = json.loads(cli("results", str(out), "--format", "json", check=True).stdout)
    assert data["experiments"][0]["points"]
    rows = list(csv.DictReader(io.StringIO(cli("results", str(out), "--format", "csv", check=True).stdout)))
    assert len(rows) == 2 and "network.bottleneck_rate" in rows[0] and any(k.endswith("_ci95") for k in rows[0])
    assert float(rows[0]["jain_index"]) > 0
    tsv = cli("results", str(out), "-f", "tsv", check=True).stdout
    assert "\t" in tsv.splitlines()[0]
    # At 80 columns no line is longer and no "±" interval is split over two lines.
    p = cli_at(80, "results", str(out))
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and not [ln for ln in lines if len(ln.rstrip()) > 80]
    assert not [ln for ln in lines if ln.rstrip().endswith("±")]
    assert any("±" in ln for ln in lines)


def test_titles_keep_bracketed_text():
    """A table title is text, not markup: the linux backend's
    "[linux backend, kernel ...]" stays whole."""
    from rich.console import Console

    from ccarena.present.tables import Column, Listing, emit

    c = Console(width=80, record=True)
    emit(Listing([Column("flow", "right", True)], [["0"]], title="run [linux backend, kernel 6.1]"), "table", c)
    assert "run [linux backend, kernel 6.1]" in c.export_text()
