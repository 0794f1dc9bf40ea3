"""The main job end to end: `ccarena reproduce` for the CUBIC paper's Fig. 8
and Fig. 9 runs the sweep, stores it, draws the figures and writes the
report. Short form by default (short runs, two repetitions); the quick mode
as a user runs it with CCARENA_SLOW=full."""

import json

import pytest

import ccarena
from conftest import FULL, cli


def _reproduce(name, out):
    args = ["reproduce", name, "--out", str(out)]
    if not FULL:
        args += ["--set", "run.duration=25s", "--set", "run.warmup=5s", "--repetitions", "2", "--per-run", "none"]
    return cli(*args, check=True)


@pytest.mark.slow
@pytest.mark.parametrize("name,y", [("cubic-fig8-intra-fairness", "throughput_ratio"), ("cubic-fig9-inter-rtt-fairness", "group_throughput_ratio")])
def test_reproduce(tmp_path, name, y):
    p = _reproduce(name, tmp_path / "res")
    assert "report:" in p.stdout and "figures:" in p.stdout
    res = ccarena.load(tmp_path / "res")
    eid = f"{name}@quick"
    runs = res.runs[res.runs.experiment_id == eid]
    from ccarena.scenario.presets import preset_doc

    reps = preset_doc(name)["sweep"]["quick"]["repetitions"] if FULL else 2
    assert len(runs) == 20 * reps
    ok = runs[runs.status == "ok"]
    assert set(ok.cca) >= {"cubic", "reno"}
    assert set(runs.status) <= {"ok", "skipped"}
    pts = res.points(eid, [y, "utilization"])
    assert len(pts) == len(ok.point.unique()) and (pts.n == reps).all()
    assert pts[y].between(0, 10).all() and pts.utilization.between(0.05, 1.01).all()
    page = tmp_path / "res" / "report" / f"{name}-quick" / "index.html"
    assert page.exists()
    pngs = list(page.parent.glob("*.png"))
    assert len(pngs) == 2
    # Running it again computes nothing.
    p = cli("sweep", name, "--quick", "--out", str(tmp_path / "res"), "--json",
            *([] if FULL else ["--set", "run.duration=25s", "--set", "run.warmup=5s", "--repetitions", "2"]), check=True)
    o = json.loads(p.stdout)
    assert o["computed"] == 0 and o["cached"] == len(ok)
