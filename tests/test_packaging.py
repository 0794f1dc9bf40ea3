"""What a release needs to be true: one version everywhere (Cargo.toml is
the source; pyproject takes it through maturin, Python through the installed
metadata, CITATION.cff repeats it), a LICENSE matching pyproject's license,
and Dask an optional extra whose absence `--dask` explains."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import ccarena

ROOT = Path(__file__).resolve().parent.parent


def test_one_version():
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert ccarena.__version__ == cargo
    cff = re.search(r'^version: "([^"]+)"', (ROOT / "CITATION.cff").read_text(), re.M)
    assert cff and cff.group(1) == cargo
    for crate in ("sim", "py"):
        assert "version.workspace = true" in (ROOT / "crates" / crate / "Cargo.toml").read_text()


def test_license_matches_pyproject():
    license = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]["text"]
    assert license == "MIT"
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "The ccarena authors" in text
    assert 'license = "MIT"' in (ROOT / "Cargo.toml").read_text()


def test_dask_is_an_optional_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("dask")]
    assert any(d.startswith("dask[distributed]") for d in project["optional-dependencies"]["dask"])
    assert '"dask[distributed]' in (ROOT / "Makefile").read_text()  # the test suite still has it


def test_dask_missing_is_one_line_exit_2(small_scenario):
    code = (
        "import sys\n"
        "sys.modules['distributed'] = None  # as if Dask were not installed\n"
        "from ccarena.cli import main\n"
        f"main(['sweep', {str(small_scenario)!r}, '--dask', 'local', '--out', 'unused'])\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    assert "ccarena[dask]" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
