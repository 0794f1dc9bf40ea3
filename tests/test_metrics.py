import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ccarena.results import metrics as m


def test_fairness_indices_at_their_extremes():
    assert m.jain_index([5, 5, 5]) == pytest.approx(1.0)
    assert m.jain_index([1, 0, 0, 0]) == pytest.approx(0.25)
    assert m.entropy_fairness([3, 3]) == pytest.approx(1.0)
    assert m.entropy_fairness([1, 0]) == pytest.approx(0.0)
    assert m.entropy_fairness([7]) == 1.0
    assert m.product_fairness([2, 2, 2]) == pytest.approx(1.0)
    assert m.product_fairness([1, 3]) == pytest.approx(0.75)  # (0.5)(1.5)
    assert m.product_fairness([0, 3]) == 0.0
    assert m.throughput_ratio([100, 25]) == 0.25


def test_cov_and_time_scales():
    assert m.cov([1, 1, 1]) == 0.0
    assert m.cov([1, 3]) == pytest.approx(0.5)
    # An alternating series is unstable at 0.1 s, perfectly stable at 0.2 s and above.
    x = [0, 2] * 50
    assert m.cov(x) == pytest.approx(1.0)
    assert m.cov_at_timescale(x, 0.1, 0.2) == pytest.approx(0.0)
    assert math.isnan(m.cov_at_timescale(x, 0.1, 10.0))  # fewer than two blocks


def test_utilities_power_and_utilisation():
    assert m.utility_pf([math.e, math.e]) == pytest.approx(1.0)
    assert m.utility_mpdf([2, 0, 2]) == pytest.approx(-0.5)  # zero samples are left out
    assert m.network_power([10, 20], [100, 100]) == pytest.approx(150.0)  # Mbps / s
    assert m.utilization_bw([50, 50], 100e6) == pytest.approx(0.5)
    # 100 Mbit/s x 12 ms = 100 full-size packets.
    assert m.utilization_bdp([50, 150], 100e6, 12e6) == pytest.approx(1.0)
    assert list(m.est_qdelay_ms([30, 25], [20, 26])) == [10.0, 0.0]


def test_group_ratio_and_rtt_ratio():
    assert m.group_throughput_ratio([10, 30, 20], [0, 1, 1]) == pytest.approx(0.4)
    assert math.isnan(m.group_throughput_ratio([10, 30], [0, 0]))
    assert m.rtt_ratio([16, 162]) == pytest.approx(162 / 16)


def test_confidence_intervals():
    assert m.t_quantile_975(1) == 12.706 and m.t_quantile_975(30) == 2.042
    assert m.t_quantile_975(200) == pytest.approx(1.972, abs=2e-3)
    mu, ci, n = m.mean_ci([1.0, 2.0, 3.0, np.nan])
    assert (mu, n) == (2.0, 3) and ci == pytest.approx(4.303 * 1.0 / math.sqrt(3))
    mu, ci, n = m.mean_ci([4.0])
    assert mu == 4.0 and math.isnan(ci) and n == 1


def test_interval_quantiles_are_scipys_to_the_bit():
    """The 95 % intervals take their t quantiles from a table instead of
    scipy (whose import costs a sweep's summary a second): the same doubles,
    so the same intervals; other levels and larger samples still ask scipy."""
    from scipy.stats import t

    assert [float(t.ppf(0.5 + 0.95 / 2, d)) for d in range(1, 61)] == m._T975_EXACT
    rng = np.random.default_rng(3)
    for n in (2, 5, 61, 62, 100):
        x = rng.normal(size=n)
        half = float(t.ppf(0.975, n - 1) * x.std(ddof=1) / math.sqrt(n))
        assert m.mean_interval(x) == (float(x.mean()), float(x.mean()) - half, float(x.mean()) + half, n)
    x = rng.normal(size=5)
    half = float(t.ppf(0.95, 4) * x.std(ddof=1) / math.sqrt(5))
    assert m.mean_interval(x, level=0.9)[2] == float(x.mean()) + half


def test_run_metrics_from_a_record(small_scenario):
    import ccarena

    r = ccarena.run(str(small_scenario))
    fm = m.flow_metrics(r)
    rm = m.run_metrics(r, fm)
    assert len(fm) == 2
    for f, (_, row) in zip(fm, r.flows.iterrows()):
        assert f["mean_throughput_l7"] == pytest.approx(row.throughput_mbps, rel=0.02)
        assert f["total_retransmissions_l4"] == row.window_retransmissions
    assert rm["jain_index"] == r.summary["jain_index"]
    assert 0.5 < rm["mean_jains_fairness_throughput_l7"] <= 1.0
    assert rm["rtt_ratio"] == 1.0 and math.isnan(rm["group_throughput_ratio"])
    assert rm["mean_agg_throughput_l7"] == pytest.approx(sum(f["mean_throughput_l7"] for f in fm), rel=0.02)
    names = set(rm) | set(fm[0])
    conditional = {n for group in m.CONDITIONAL_METRICS.values() for n in group}  # web, UDP, background: tests/test_traffic_results.py
    for name in m.METRIC_INFO:
        assert name in names or name in conditional, name


def test_intervals_stay_in_the_metrics_range():
    """Bounded metrics: the interval is the t interval cut at the bounds (it
    contains the mean and never leaves the range); unbounded ones keep it."""
    from scipy.stats import t

    mu, lo, hi, n = m.mean_interval([1.0, 0.9], *m.metric_bounds("jain_index"))
    h = t.ppf(0.975, 1) * np.std([1.0, 0.9], ddof=1) / math.sqrt(2)
    assert (n, hi) == (2, 1.0) and lo == pytest.approx(0.95 - h) and lo <= mu <= hi
    assert m.metric_bounds("throughput_ratio") == (0.0, 1.0) and m.metric_bounds("utilization") == (0.0, math.inf)
    assert m.metric_bounds("mean_utility_pf_l7") == (-math.inf, math.inf)
    mu, lo, hi, _ = m.mean_interval([0.01, 0.5, 0.02], *m.metric_bounds("throughput_mbps"))
    assert lo == 0.0 and hi == pytest.approx(mu + t.ppf(0.975, 2) * np.std([0.01, 0.5, 0.02], ddof=1) / math.sqrt(3))
    assert math.isnan(m.mean_interval([0.5])[1])


def test_numbers_have_the_digits_their_interval_supports():
    from ccarena.present.format import pm

    assert pm(0.7741, 0.0612) == "0.774 ±0.061"
    assert pm(59.73, 1.42) == "59.7 ±1.4"
    assert pm(412.3, 23.1) == "412 ±23"
    assert pm(0.99512, 0.0635, low=0.9316, high=1.0) == "0.995 [0.932, 1.000]"
    assert pm(0.5, float("nan")) == "0.500"


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 30), st.integers(1, 8), st.integers(0, 2**32 - 1))
def test_sample_fairness_equals_the_formulas_row_by_row(rows, flows, seed):
    """The vectorised per-sample fairness (a run's 6,000 samples at once)
    gives what the formulas give sample by sample, zeros and idle flows included."""
    from ccarena.results.metrics import entropy_fairness, jain_index, product_fairness, sample_fairness

    rng = np.random.default_rng(seed)
    x = rng.exponential(100.0, (rows, flows)) * (rng.random((rows, flows)) > 0.2)
    active = rng.random((rows, flows)) > 0.3
    agg, jain, ent, prod = sample_fairness(x, active)
    want = [[], [], [], []]
    for row, act in zip(x, active):
        v = row[act]
        if v.size == 0:
            continue
        want[0].append(v.sum())
        if v.sum() > 0:
            want[1].append(jain_index(v))
            want[2].append(entropy_fairness(v))
            want[3].append(product_fairness(v))
    for got, exp in zip((agg, jain, ent, prod), want):
        np.testing.assert_allclose(got, exp, rtol=1e-9, atol=1e-300)
