"""Every shipped preset gives the records stored in tests/data/preset_digests.json
(tools/preset_digests.py): refactorings must leave results bit-identical, and a
change that moves results on purpose rewrites that file in a commit of its own."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STORED = ROOT / "tests" / "data" / "preset_digests.json"


def test_preset_records_match_stored_digests():
    want = json.loads(STORED.read_text())
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "preset_digests.py"), "--check", str(STORED),
         "--duration", str(want["duration_s"])],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
