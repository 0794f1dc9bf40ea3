"""Fuzzing the scenario and command-line layers (hypothesis): random and
mutated scenarios are either accepted or refused with one ScenarioError line
naming a field that exists in the input; nothing raises anything else, and
nothing takes long. CI runs a short tier (CCARENA_SLOW=short: a few hundred
cases); CCARENA_FUZZ_CASES=N (or CCARENA_SLOW=full: 2,000) runs more."""

import json
import math
import os
import re
import time

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

import ccarena  # noqa: E402
from ccarena.errors import CcarenaError  # noqa: E402
from ccarena.scenario.document import parse_override  # noqa: E402

_DEFAULT = 2000 if os.environ.get("CCARENA_SLOW") == "full" else 150
CASES = int(os.environ.get("CCARENA_FUZZ_CASES", _DEFAULT))
FUZZ = settings(max_examples=CASES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

BASE = {
    "name": "fuzz",
    "network": {"bottleneck_rate": "10Mbps", "buffer": "50p", "loss": 0.0},
    "flows": [{"cca": "cubic", "rtt": "20ms", "count": 2}],
    "run": {"duration": "1s", "warmup": "0s"},
}

# Values a careless or hostile user might write anywhere.
scalars = st.one_of(
    st.none().map(lambda _: 0),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["1e400p", "1e400Mbps", "-1s", "0", "1us", "10kbps", "1Tbps", "surge", "none", "[/x]", "../../x",
                     "\x00", "1.5bdp", "100p", "82ms", "NaN", "inf", "1e-300s", "9" * 40 + "ms", "red", "codel", "paper"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                      max_leaves=8)

FIELDS = [
    "name", "background", "network.bottleneck_rate", "network.buffer", "network.loss", "network.qdisc", "network.access_rate",
    "network.trace", "network.dynamics", "network.bdp_rtt", "network.reverse_bottleneck", "flows[0].cca", "flows[0].rtt",
    "flows[0].count", "flows[0].start", "flows[0].tcp", "flows[0].tcp.mss", "flows[0].cca_params", "flows[0].direction",
    "flows[0].jitter", "flows[0].size", "run.duration", "run.warmup", "run.seed", "run.sample_interval", "run.start_jitter",
    "udp", "web", "tcp", "linux", "cca_files",
]

DIST = st.fixed_dictionaries({
    "distribution": st.sampled_from(["constant", "uniform", "exponential", "normal", "lognormal", "pareto", "lognormal_pareto",
                                     "empirical"]),
}, optional={**{k: st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**70), 2**70),
                              st.sampled_from(["1ns", "10ms", "1e300s", "0s"]))
                for k in ("mu", "sigma", "k", "alpha", "tail", "max", "min", "mean", "sd", "median", "value")},
             # An empirical distribution's points (lists; or anything else).
             **{k: st.one_of(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["1ns", "10ms", "0s"])),
                                      max_size=5), st.sampled_from(["1ms", 0.5]))
                for k in ("values", "probabilities")}})


def _set(doc, dotted, value):
    from ccarena.scenario.document import apply_overrides

    return apply_overrides(doc, {dotted: value})


def _leaves(doc, prefix=""):
    """Every dotted path in `doc` (tables and list items as a[i])."""
    out = {""}
    if isinstance(doc, dict):
        for k, v in doc.items():
            p = f"{prefix}.{k}" if prefix else str(k)
            out.add(p)
            out |= _leaves(v, p)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            p = f"{prefix}[{i}]"
            out.add(p)
            out |= _leaves(v, p)
    return out


def _check(doc, overrides=None):
    """Loads `doc`: fine, or one ScenarioError line naming a field of the input."""
    t = time.perf_counter()
    try:
        ccarena.load_scenario(_set(doc, *next(iter(overrides.items()))) if overrides else doc)
    except CcarenaError as e:
        msg = str(e)
        assert msg.isprintable(), msg
        assert "\n" not in msg, msg
        field = getattr(e, "field", "")
        if field:
            # The field, or its table, is in the document (possibly after the override).
            root = re.sub(r"\[\d+\]", "", field.split(".")[0])
            known = {re.sub(r"\[\d+\]", "", p.split(".")[0]) for p in _leaves(doc)} | {"scenario", "backend"}
            if overrides:
                known |= {re.sub(r"\[\d+\]", "", k.split(".")[0]) for k in overrides}
            assert root in known, (field, msg)
    assert time.perf_counter() - t < 10


@FUZZ
@given(field=st.sampled_from(FIELDS), value=values)
def test_any_value_in_any_field(field, value):
    try:
        doc = _set(BASE, field, value)
    except CcarenaError:
        return
    _check(doc)


@FUZZ
@given(dist=DIST, where=st.sampled_from(["flows[0].rtt", "web", "flows[0].start"]))
def test_distributions(dist, where):
    if where == "web":
        doc = {**BASE, "web": [{"rate": "5/s", "sizes": dist}]}
    else:
        doc = _set(BASE, where, dist)
    _check(doc)


@FUZZ
@given(text=st.text(max_size=200))
def test_any_toml_text(text):
    try:
        ccarena.load_scenario(text + "\n")
    except CcarenaError as e:
        assert "\n" not in str(e)


@FUZZ
@given(text=st.text(max_size=60))
def test_any_override(text):
    try:
        key, value = parse_override(text)
        _check(BASE, {key: value})
    except CcarenaError as e:
        assert "\n" not in str(e)


@settings(max_examples=max(CASES // 25, 8), deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(field=st.sampled_from(FIELDS), value=values)
def test_the_cli_prints_one_line(field, value):
    from conftest import cli

    p = cli("run", json.dumps(BASE) and _toml(BASE), "--no-save", "--json", "--set", f"{field}={_toml_value(value)}")
    assert p.returncode in (0, 2, 3), (p.returncode, p.stderr)
    if p.returncode == 2:
        assert p.stderr.count("\n") == 1 and p.stderr.startswith("error: "), p.stderr


def _toml(doc):
    from ccarena.scenario.document import dump_toml

    return dump_toml(doc)


def _toml_value(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if v != v else ("inf" if v > 0 else "-inf")
    try:
        from ccarena.scenario.document import dump_toml

        return dump_toml({"v": v}).split("=", 1)[1].strip()
    except (TypeError, ValueError, IndexError):
        return str(v)
