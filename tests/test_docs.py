"""The commands the documentation shows still work. In README.md and
docs/*.md a fenced `sh` block right after `<!-- runnable -->` is run, line by
line, in a temporary directory with this environment's `ccarena` first on
PATH, and every line must exit 0; `<!-- runnable: slow -->` blocks run only
with CCARENA_SLOW=full. A `toml` block right after `<!-- file: NAME -->` is
written to NAME in that directory first (`<!-- file: NAME append -->` adds to
it), so the commands can use the scenario the text shows. Blocks of one
document share the directory, in order."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FULL

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_MARK = re.compile(r"<!--\s*(runnable(?::\s*slow)?|file:\s*(\S+)(\s+append)?)\s*-->\s*\n```(\w*)\n(.*?)\n```", re.S)


def _steps(doc: Path) -> list[tuple[str, str, str, bool]]:
    """(kind, name, text, flag) for each marked block: ("run", "", commands,
    slow) or ("file", NAME, content, append)."""
    steps = []
    for m in _MARK.finditer(doc.read_text()):
        mark, name, append, lang, body = m.groups()
        if mark.startswith("runnable"):
            assert lang == "sh", f"{doc.name}: a runnable block must be ```sh"
            steps.append(("run", "", body, "slow" in mark))
        else:
            steps.append(("file", name, body, bool(append)))
    return steps


def _documents_with_commands() -> list[Path]:
    return [d for d in DOCS if any(kind == "run" for kind, *_ in _steps(d))]


def test_the_readme_marks_commands_to_run():
    assert ROOT / "README.md" in _documents_with_commands()


@pytest.mark.parametrize("doc", _documents_with_commands(), ids=lambda p: p.name)
def test_documented_commands_run(doc, tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "100"}
    ran = 0
    for kind, name, body, flag in _steps(doc):
        if kind == "file":
            path = tmp_path / name
            with path.open("a" if flag else "w") as f:
                f.write(("\n" if flag else "") + body + "\n")
            continue
        if flag and not FULL:
            continue
        for line in body.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            p = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
            assert p.returncode == 0, f"{doc.name}: `{line.strip()}` exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
            ran += 1
    assert ran or not FULL
