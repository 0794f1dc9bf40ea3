"""Results directories shared or damaged: two sweeps into one directory
compute each run once (claims, results/claims.py)."""

import json
import os
import subprocess
import sys

from ccarena.results.claims import Claims

SWEEP = """
name = "shared"
[network]
bottleneck_rate = "20Mbps"
buffer = "40p"
[[flows]]
cca = "cubic"
rtt = "20ms"
[run]
duration = "4s"
warmup = "1s"
[sweep]
repetitions = 2
cca = ["cubic", "reno"]
rtt = ["10ms", "20ms", "30ms"]
"""

SCRIPT = """
import json, sys
from ccarena.experiments.executors import LocalExecutor
from ccarena.experiments.runner import run_sweep
o = run_sweep(sys.argv[1], sys.argv[2], executor=LocalExecutor(1))
print(json.dumps({"computed": o.computed, "cached": o.cached, "skipped": o.skipped, "reasons": o.skip_reasons}))
"""


def test_two_sweeps_into_one_directory_compute_each_run_once(tmp_path):
    f = tmp_path / "shared.toml"
    f.write_text(SWEEP)
    out = tmp_path / "res"
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(f), str(out)], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    results = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    print(results)
    assert sum(r["computed"] for r in results) == 12, results  # each of the 12 runs once
    claimed = sum(r["reasons"].get("being computed by another sweep", 0) for r in results)
    assert claimed + sum(r["cached"] for r in results) == 12, results
    assert not list((out / "claims").iterdir())  # every claim released
    # A third sweep finds everything stored.
    third = subprocess.run([sys.executable, "-c", SCRIPT, str(f), str(out)], capture_output=True, text=True, check=True)
    assert json.loads(third.stdout)["cached"] == 12


def test_stale_claims_are_taken_over(tmp_path):
    (tmp_path / "claims").mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "claims" / "r1").write_text(f"{dead.pid}\n")
    (tmp_path / "claims" / "r2").write_text(f"{os.getppid()}\n")  # a live process
    c = Claims(tmp_path)
    assert c.claim("r1") and not c.claim("r2") and c.claim("r3")
    assert (tmp_path / "claims" / "r1").read_text().strip() == str(os.getpid())
    c.release_all()
    assert sorted(p.name for p in (tmp_path / "claims").iterdir()) == ["r2"]
