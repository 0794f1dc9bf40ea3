"""Shared fixtures. Tests marked `slow` run in a short form unless
CCARENA_SLOW=full (the Makefile passes CCARENA_SLOW through)."""

import os
import subprocess
import sys

import pytest

FULL = os.environ.get("CCARENA_SLOW", "short") == "full"


def cli(*args, check=False, input=None, cwd=None):
    """Runs the ccarena CLI in a subprocess (in `cwd` if given); returns CompletedProcess."""
    proc = subprocess.run(
        [sys.executable, "-m", "ccarena.cli", *args],
        capture_output=True,
        text=True,
        input=input,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"ccarena {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def small_scenario(tmp_path):
    path = tmp_path / "small.toml"
    path.write_text(
        """
name = "small"
[network]
bottleneck_rate = "50Mbps"
buffer = "100p"
loss = 0.001
[[flows]]
cca = "cubic"
rtt = "20ms"
count = 2
[run]
duration = "5s"
warmup = "1s"
seed = 3
"""
    )
    return path
