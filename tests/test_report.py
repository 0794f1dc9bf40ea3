"""Figures and the HTML report: files are written, the pages render in a
headless Chromium and every image on them loads."""

import os
import re
import shutil
import subprocess
import tempfile

import pytest

import ccarena
from ccarena.experiments.executors import LocalExecutor
from ccarena.present.report import write_report
from ccarena.experiments.runner import run_sweep

SWEEP = """
name = "mini"
description = "a two-point sweep for report tests"
source = "tests"
notes = "made for the report test"
[network]
bottleneck_rate = "20Mbps"
buffer = "40p"
[[flows]]
cca = "cubic"
rtt = "20ms"
[[flows]]
cca = "reno"
rtt = "20ms"
[run]
duration = "4s"
warmup = "1s"
seed = 1
start_jitter = "50ms"
[sweep]
repetitions = 2
rtt = ["10ms", "40ms"]
[[figures]]
x = "rtt"
y = "group_throughput_ratio"
[[figures]]
kind = "stability"
"""

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    f = d / "mini.toml"
    f.write_text(SWEEP)
    run_sweep(str(f), d / "res", executor=LocalExecutor(2))
    return d / "res"


def test_report_files(results):
    index = write_report(results)
    page = index.parent / "mini" / "index.html"
    assert index.exists() and page.exists()
    text = page.read_text()
    assert "made for the report test" in text and "[sweep]" in text  # notes and scenario
    pngs = sorted(p.name for p in page.parent.glob("*.png"))
    assert len(pngs) == 2  # the two [[figures]]
    assert all((page.parent / p).with_suffix(".pdf").exists() for p in pngs)
    runs = list((page.parent / "runs").glob("*.png"))
    assert len(runs) == 2 * 2  # first repetition of each point: time series + distributions
    assert (page.parent / "points.csv").exists()
    for img in re.findall(r'<img src="([^"]+)"', text):
        assert (page.parent / img).exists(), img


def _chromium(*args, timeout=120):
    with tempfile.TemporaryDirectory() as profile:
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run", "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"), reason="chromium not installed (CI installs it)")
def test_report_renders_in_headless_chromium(results, tmp_path):
    index = write_report(results)
    page = index.parent / "mini" / "index.html"
    # The page's own script records how many images loaded once the load event fired (and as
    # lazy images arrive: a window tall enough for the whole page fetches them all).
    assert 'loading="lazy"' in page.read_text()
    p = _chromium("--virtual-time-budget=10000", "--window-size=1200,20000", "--dump-dom", page.as_uri())
    m = re.search(r'data-images-loaded="(\d+)/(\d+)"', p.stdout)
    assert m, p.stderr[-2000:]
    loaded, total = int(m.group(1)), int(m.group(2))
    assert total == 2 + 4 and loaded == total, p.stdout[:500]
    assert '<p class="err">figure file missing' not in p.stdout
    p = _chromium("--virtual-time-budget=10000", "--dump-dom", index.as_uri())
    assert 'href="mini/index.html"' in p.stdout
    # The check sees a missing figure (so the count above means something).
    victim = next((page.parent / "runs").glob("*-distributions.png"))
    saved = victim.read_bytes()
    victim.unlink()
    try:
        p = _chromium("--virtual-time-budget=10000", "--window-size=1200,20000", "--dump-dom", page.as_uri())
        assert f'data-images-loaded="{total - 1}/{total}"' in p.stdout
        assert '<p class="err">figure file missing' in p.stdout
    finally:
        victim.write_bytes(saved)
    # A screenshot of the page is not blank: it has many colours (figures, text).
    shot = tmp_path / "shot.png"
    _chromium("--virtual-time-budget=10000", "--window-size=1200,2400", f"--screenshot={shot}", page.as_uri())
    from PIL import Image

    img = Image.open(shot).convert("RGB")
    colours = img.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 200


def test_figures_from_the_results(results, tmp_path):
    from ccarena.present import figures

    res = ccarena.load(results)
    pts = res.points("mini")
    out = figures.sweep_figure(pts, {"x": "rtt", "y": "jain_index"}, tmp_path / "jain")
    assert [p.suffix for p in out] == [".png", ".pdf"] and all(p.stat().st_size > 1000 for p in out)
    out = figures.stability_figure(pts, {}, tmp_path / "stab")
    assert out[0].stat().st_size > 1000
    rid = res.runs.run_id[res.runs.status == "ok"].iloc[0]
    fl = res.flows[res.flows.run_id == rid].set_index("flow")
    out = figures.run_timeseries_figure(res.timeseries(rid), res.queue(rid), fl, tmp_path / "ts", buffer_packets=40)
    assert out[0].stat().st_size > 1000
    specs = figures.default_figure_specs([{"name": "rtt", "labels": ["10ms", "40ms"]}, {"name": "cca", "labels": ["a", "b"]}], 2)
    assert specs[0]["x"] == "rtt" and specs[0]["series"] == "cca"


def test_report_cli(results):
    from conftest import cli

    p = cli("report", str(results), "--per-run", "none", check=True)
    assert "report:" in p.stdout
    p = cli("report", str(results), "--per-run", "sometimes")
    assert p.returncode == 2 and "--per-run" in p.stderr


def test_the_run_figure_draws_what_bbr_believes_beside_what_it_got(tmp_path):
    """BBR's bandwidth and min-RTT estimates (the time series' cc_ columns)
    are drawn dotted per flow; an algorithm that reports nothing has none."""
    from ccarena.present.figures import model_estimates, run_timeseries_figure

    base = {"network": {"bottleneck_rate": "20Mbps", "buffer": "50KB"}, "run": {"duration": "3s", "warmup": "1s", "seed": 1}}
    bbr = ccarena.run({**base, "name": "b", "flows": [{"cca": "bbr", "rtt": "20ms"}, {"cca": "cubic", "rtt": "20ms"}]})
    t, bw, min_rtt = model_estimates(bbr.timeseries[bbr.timeseries.flow == 0])
    assert len(t) > 10 and 0 < bw.max() < 40 and abs(min_rtt.min() - 20.0) < 1.0
    assert model_estimates(bbr.timeseries[bbr.timeseries.flow == 1]) is None  # CUBIC reports no model
    run_timeseries_figure(bbr.timeseries, bbr.queue, bbr.flows, tmp_path / "ts")
    assert "the algorithm's bandwidth / min RTT estimate" in (tmp_path / "ts.svg").read_text()
