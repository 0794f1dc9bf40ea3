"""The Python sweep API: ccarena.sweep returns the Results, reports progress on
stderr in one self-rewriting line, and the Results show themselves (repr and
HTML for Jupyter); every Parquet file carries its run's id."""

import pandas as pd

import ccarena
from test_store import write


def test_sweep_returns_results_with_repr(tmp_path, capsys):
    f = write(tmp_path, duration="2s", reps=1, ccas=("cubic",))
    res = ccarena.sweep(str(f), tmp_path / "res", jobs=1)
    assert isinstance(res, ccarena.Results) and len(res.points("tiny")) == 2
    err = capsys.readouterr().err
    assert "tiny: 2 runs to compute, 0 stored" in err and "\r2/2 runs, 100 % simulated" in err
    text = repr(res)
    assert text.startswith("Results(") and "tiny: 2/2 runs ok, build " in text
    assert "<table>" in res._repr_html_() and "tiny" in res._repr_html_()
    rid = res.runs.run_id.iloc[0]
    ts = pd.read_parquet(tmp_path / "res" / "timeseries" / f"{rid}.parquet")
    assert ts.columns[0] == "run_id" and set(ts.run_id) == {rid}
    assert set(pd.read_parquet(tmp_path / "res" / "queue" / f"{rid}.parquet").run_id) == {rid}
    again = ccarena.sweep(str(f), tmp_path / "res", progress=False)
    assert len(again.runs) == 2
