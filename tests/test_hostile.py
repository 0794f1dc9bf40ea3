"""Hostile and careless input: every case is refused with one line naming a
field (exit 2 on the command line), before anything runs or is written, and
never escapes the results directory or quotes files it should not."""

import json
import os
import time
from pathlib import Path

import pytest

import ccarena
from ccarena.errors import CcarenaError, ScenarioError
from ccarena.scenario.checks import file_name
from conftest import cli

BASE = {"network": {"bottleneck_rate": "10Mbps", "buffer": "100p"}, "flows": [{"cca": "cubic", "rtt": "20ms"}], "run": {"duration": "1s"}}


def _doc(**top):
    d = json.loads(json.dumps(BASE))
    for k, v in top.items():
        d[k] = v
    return d


def _refused(doc, field=None):
    with pytest.raises(CcarenaError) as e:
        ccarena.load_scenario(doc)
    if field is not None:
        assert getattr(e.value, "field", None) == field, str(e.value)
    assert "\n" not in str(e.value)
    return str(e.value)


# ---- 1. names never escape results/; --out is checked before the run

@pytest.mark.parametrize("name", ["../../../../x", "/etc/x", "..", ".", "a/b", "x" * 300, "\x00", "", "[/x]"])
def test_file_names_are_one_safe_component(name):
    f = file_name(name)
    assert "/" not in f and f not in (".", "..") and "\x00" not in f and 0 < len(f) <= 100


def test_a_name_with_a_path_saves_inside_results(tmp_path):
    p = cli("run", "quickstart", "--set", 'name="../../../../escaped"', "--set", "run.duration=1s", "--set", "run.warmup=0s", "--json",
            cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert not (tmp_path.parent / "escaped-seed1").exists()
    assert [d.name for d in (tmp_path / "results" / "runs").iterdir()] == ["escaped-seed1"]


@pytest.mark.parametrize("name,fragment", [("a\x00b", "control characters"), ("x" * 300, "at most 200"), (["x"], "non-empty string")])
def test_bad_names_are_refused(name, fragment):
    assert fragment in _refused(_doc(name=name), "name")


def test_out_is_checked_before_the_run(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    for out in (str(blocker), "/proc/x", str(blocker / "sub")):
        t = time.perf_counter()
        p = cli("run", "quickstart", "--out", out)
        assert p.returncode == 2, p.stderr
        assert p.stderr.startswith("error: --out:") and p.stderr.count("\n") == 1, p.stderr
        assert time.perf_counter() - t < 20  # no 30 s run first


# ---- 2. errors do not expose files

def test_a_trace_outside_the_scenario_is_not_quoted(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("root:SECRET-HASH:19000:0:99999:7:::\n")
    scen = tmp_path / "scen"
    scen.mkdir()
    msg = _refused({**_doc(), "network": {"trace": str(secret), "buffer": "100p"}}, "network.trace")
    assert "SECRET" not in msg and "line 1" in msg
    (scen / "s.toml").write_text(f'[network]\ntrace = "../secret"\nbuffer = "100p"\n[[flows]]\ncca = "cubic"\nrtt = "20ms"\n[run]\nduration = "1s"\n')
    with pytest.raises(ScenarioError) as e:
        ccarena.load_scenario(str(scen / "s.toml"))
    assert "SECRET" not in str(e.value)


def test_a_bad_trace_inside_the_scenario_dir_is_quoted_short(tmp_path):
    (tmp_path / "t.trace").write_text("x" * 500 + "\n")
    (tmp_path / "s.toml").write_text('[network]\ntrace = "t.trace"\nbuffer = "100p"\n[[flows]]\ncca = "cubic"\nrtt = "20ms"\n[run]\nduration = "1s"\n')
    with pytest.raises(ScenarioError) as e:
        ccarena.load_scenario(str(tmp_path / "s.toml"))
    assert "xxx..." in str(e.value) and len(str(e.value)) < 200


def test_binary_files_are_refused_with_a_message(tmp_path):
    bad = tmp_path / "bin.toml"
    bad.write_bytes(b"\xff\xfe\x00\x01" * 100)
    p = cli("run", str(bad), "--no-save")
    assert p.returncode == 2 and "not UTF-8" in p.stderr and p.stderr.count("\n") == 1
    (tmp_path / "t.trace").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(ScenarioError) as e:
        ccarena.load_scenario({**_doc(), "network": {"trace": str(tmp_path / "t.trace"), "buffer": "100p"}})
    assert e.value.field == "network.trace" and "not plain text" in str(e.value)


# ---- 4. markup in messages is shown as written

@pytest.mark.parametrize("value", ["[/x]", "[bold]x", "[[flows]]", "[red]"])
def test_markup_in_messages_is_escaped(value):
    p = cli("run", "quickstart", "--no-save", "--set", f"flows[0].cca={json.dumps(value)}")
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and value in p.stderr, p.stderr


# ---- 5. nothing hangs or blows up

def test_deep_nesting_and_long_dotted_keys_are_refused_quickly():
    for text in ("a" + ".a" * 50_000 + " = 1\n", "x = " + "[" * 5000 + "]" * 5000 + "\n", "x = " + "{a=" * 100 + "1" + "}" * 100 + "\n"):
        t = time.perf_counter()
        with pytest.raises(ScenarioError) as e:
            ccarena.load_scenario(text)
        assert "nest" in str(e.value)
        assert time.perf_counter() - t < 2
    deep: dict = {}
    node = deep
    for _ in range(5000):
        node["a"] = {}
        node = node["a"]
    with pytest.raises(ScenarioError):
        ccarena.load_scenario({**_doc(), "network": deep})


def test_oversized_documents_are_refused():
    with pytest.raises(ScenarioError) as e:
        ccarena.load_scenario("x = 1\n" + "#" * (2 << 20))
    assert "at most" in str(e.value)


def test_a_tiny_k_does_not_loop_for_ever():
    t = time.perf_counter()
    sc = ccarena.load_scenario({**_doc(), "flows": [{"cca": "cubic", "count": 3,
                                "rtt": {"distribution": "lognormal_pareto", "mu": 10, "sigma": 0.1, "k": "1ns", "alpha": 1.1}}]})
    assert time.perf_counter() - t < 5 and len(sc.engine["flows"]) == 3


def test_sample_cost_is_bounded_before_the_run(monkeypatch):
    msg = _refused({**_doc(), "run": {"duration": "2s", "sample_interval": "1us"}}, "run.sample_interval")
    assert "CCARENA_MAX_SAMPLES" in msg
    monkeypatch.setenv("CCARENA_MAX_SAMPLES", "10000000")
    ccarena.load_scenario({**_doc(), "run": {"duration": "2s", "sample_interval": "1us"}})


# ---- 6. no uncaught exceptions

@pytest.mark.parametrize(
    "doc,field",
    [
        ({"network": {"bottleneck_rate": "10Mbps", "buffer": "1e400p"}}, "network.buffer"),
        ({"network": {"bottleneck_rate": "1e400Mbps", "buffer": "10p"}}, "network.bottleneck_rate"),
        ({"network": {"bottleneck_rate": "10Mbps", "buffer": "1e300bdp"}}, "network.buffer"),
        ({"run": {"duration": "1e300s"}}, "run.duration"),
        ({"background": ["paper"]}, "background"),
        ({"background": {"x": 1}}, "background"),
        ({"flows": [{"cca": "cubic", "rtt": {"distribution": "pareto", "k": "10ms", "alpha": 0}}]}, "flows[0].rtt.alpha"),
        ({"flows": [{"cca": "cubic", "rtt": {"distribution": "lognormal", "mu": 600, "sigma": 1}}]}, "flows[0].rtt"),
        ({"flows": [{"cca": "cubic", "rtt": {"distribution": "lognormal", "mu": 10**400, "sigma": 1}}]}, "flows[0].rtt.mu"),
        ({"flows": [{"cca": "cubic", "rtt": {"distribution": "lognormal", "mu": float("inf"), "sigma": 1}}]}, "flows[0].rtt.mu"),
        ({"flows": [{"cca": "cubic", "rtt": {"distribution": "pareto", "k": "10ms", "alpha": 1e-300}}]}, "flows[0].rtt.alpha"),
    ],
)
def test_overflows_and_wrong_types_name_the_field(doc, field):
    _refused({**_doc(), **doc}, field)


def test_a_cca_file_that_exits_is_a_scenario_error(tmp_path):
    f = tmp_path / "bye.py"
    f.write_text("import sys\nsys.exit(0)\n")
    p = cli("run", "quickstart", "--no-save", "--cca-file", str(f))
    assert p.returncode == 2 and "cca_files" in p.stderr and "SystemExit" in p.stderr, p.stderr


def test_ctrl_c_in_a_python_cca_is_an_interruption(tmp_path):
    f = tmp_path / "slow.py"
    f.write_text(
        "import os, signal, ccarena\n"
        "class Slow(ccarena.CongestionControl):\n"
        "    name = 'slowpoke'\n"
        "    calls = 0\n"
        "    def cong_avoid(self, sk, ack, acked):\n"
        "        Slow.calls += 1\n"
        "        if Slow.calls == 50:\n"
        "            os.kill(os.getpid(), signal.SIGINT)\n"
        "        sk.cwnd += 1\n"
    )
    p = cli("run", "quickstart", "--no-save", "--cca-file", str(f), "--set", 'flows[0].cca="slowpoke"', "--set", "run.duration=3s",
            "--set", "run.warmup=0s")
    assert p.returncode == 130, (p.returncode, p.stderr)
    assert "interrupted" in p.stderr and "failed" not in p.stderr


def test_a_run_at_once_checks_its_cost_too():
    t = time.perf_counter()
    with pytest.raises(ScenarioError) as e:
        ccarena.run({**_doc(), "run": {"duration": "2s", "sample_interval": "1us"}})
    assert e.value.field == "run.sample_interval" and time.perf_counter() - t < 5


# ---- 9. data safety

def test_orphaned_temporary_files_are_removed(tmp_path):
    from ccarena.results.store import Store

    Store(tmp_path).close()
    sub = tmp_path / "records"
    sub.mkdir(exist_ok=True)
    dead = sub / ".x.json.gz.tmp-999999999"
    dead.write_text("partial")
    mine = sub / f".y.json.gz.tmp-{os.getpid()}"
    mine.write_text("in progress")
    Store(tmp_path).close()
    assert not dead.exists() and mine.exists()


@pytest.mark.parametrize("buffer, hint", [("10000B", "12000B"), ("4p", "12p")])
def test_red_defaults_that_do_not_fit_the_buffer_name_the_buffer(buffer, hint):
    # RED derives its thresholds and tc's burst from the buffer; a buffer too
    # small for them is the user's choice to change, not a burst never written.
    doc = _doc()
    doc["network"] = {**doc["network"], "buffer": buffer, "qdisc": "red"}
    with pytest.raises(ScenarioError) as e:
        ccarena.load_scenario(doc)
    assert e.value.field == "network.buffer" and "burst" not in e.value.field
    assert f"at least {hint}" in str(e.value) and "network.qdisc.min" in str(e.value)
    doc["network"]["buffer"] = hint  # the suggestion works
    ccarena.load_scenario(doc)
    doc["network"] = {**doc["network"], "buffer": "100p", "qdisc": {"kind": "red", "max": "2p"}}
    with pytest.raises(ScenarioError) as e:
        ccarena.load_scenario(doc)
    assert e.value.field == "network.qdisc.max"
