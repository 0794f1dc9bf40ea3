"""No silent empties: an unknown experiment, metric or run id raises an error
that lists what is stored, with near misses; an experiment stored in quick
mode is reachable by its name, and quick and full results by an explicit mode."""

import pytest

import ccarena
from ccarena.errors import StoreError, UnknownName
from ccarena.experiments.executors import LocalExecutor
from ccarena.experiments.runner import run_sweep
from conftest import cli
from test_store import write


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("names")
    f = write(tmp, duration="2s", reps=1, ccas=("cubic",))
    out = tmp / "res"
    run_sweep(str(f), out, executor=LocalExecutor(1), variant="quick")  # as `make demo` stores it
    return f, out


def test_quick_experiment_is_reached_by_its_name(stored):
    f, out = stored
    res = ccarena.load(out)
    assert res.experiment_id("tiny") == "tiny@quick"
    pts = res.points("tiny")
    assert len(pts) == 2 and pts.jain_index.notna().all()
    assert {"jain_index_low", "jain_index_high"} <= set(pts.columns)
    assert res.param_names("tiny") == ["cca", "rtt"]
    assert len(res.points("tiny", mode="quick")) == 2
    with pytest.raises(UnknownName, match="no full-mode experiment 'tiny'.*present: tiny@quick"):
        res.points("tiny", mode="full")


def test_typos_raise_with_suggestions(stored):
    _, out = stored
    res = ccarena.load(out)
    with pytest.raises(UnknownName, match=r"no experiment 'tinx' in .*; did you mean 'tiny.*present: tiny@quick") as e:
        res.points("tinx")
    assert isinstance(e.value, StoreError) and isinstance(e.value, LookupError)
    with pytest.raises(UnknownName, match="no run-level metric 'jain_idx'; did you mean 'jain_index'"):
        res.points("tiny", ["jain_idx"])
    with pytest.raises(UnknownName, match="no run 'nope'"):
        res.timeseries("nope")
    with pytest.raises(UnknownName, match="did you mean 'tiny'"):
        res.short_flows(experiment="tinny")
    p = cli("results", str(out), "-e", "tinyy")
    assert p.returncode == 2 and "did you mean 'tiny" in p.stderr


def test_quick_and_full_need_a_mode(stored, tmp_path):
    f, out = stored
    full = tmp_path / "both"
    run_sweep(str(f), full, executor=LocalExecutor(1), variant="quick")
    run_sweep(str(f), full, executor=LocalExecutor(1))
    res = ccarena.load(full)
    assert res.experiment_id("tiny") == "tiny"  # an id as stored is that experiment
    assert res.experiment_id("tiny", mode="full") == "tiny"
    assert res.experiment_id("tiny", mode="quick") == "tiny@quick"
    assert res.experiment_id("tiny@quick") == "tiny@quick"
    assert len(res.points("tiny", mode="full")) == 2
