"""tools/kernel_emulator_stalls.py: the delay emulator's late wake-ups as a
summary and as a `network.return_stalls` setting the simulator takes, and
the validate table's kernel-only row of the emulator's lateness."""

import importlib.util
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import ccarena
from ccarena import Scenario
from ccarena.backends.linux.host import cpu_times
from ccarena.experiments.crosscheck import emulator_lateness_us, softirq_cpu_pct, stolen_cpu_pct, summarise, within_spread
from ccarena.experiments.machine_stalls import kernel_run_stalls, stalls_setting, window_lateness
from ccarena.scenario import schema
from ccarena.scenario.document import parse_override

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("kernel_emulator_stalls", ROOT / "tools" / "kernel_emulator_stalls.py")
kes = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(kes)


def stats(wakeups):
    return {"packets": 1000, "late_mean_us": 50.0, "late_wakeups": wakeups}


def test_late_wakeups_are_taken_inside_the_window_and_counted_per_second():
    # 20 s of wake-ups after a 5 s warm-up: one of 3 ms every second, one of
    # 600 us every 0.5 s, one of 250 us every 0.1 s; and some before the window.
    w = [[int(t * 1e6), 9000] for t in (1.0, 2.0)]
    w += [[int((5 + k) * 1e6), 3000] for k in range(20)]
    w += [[int((5.25 + 0.5 * k) * 1e6), 600] for k in range(40)]
    w += [[int((5.05 + 0.1 * k) * 1e6), 250] for k in range(200)]
    late = window_lateness(stats(sorted(w)), 5.0, 25.0)
    assert len(late) == 260 and late.max() == 3000
    s = kes.stall_summary(late, 20.0)
    assert s["late_0.5ms_per_s"] == pytest.approx(3.0) and s["late_1ms_per_s"] == pytest.approx(1.0)
    assert s["late_2ms_per_s"] == pytest.approx(1.0) and s["wakeup_p50_us"] == 250
    assert window_lateness({"late_mean_us": 40.0}, 5.0, 25.0) is None  # a program that did not log them


def test_the_fitted_setting_is_a_return_stalls_table_the_simulator_runs():
    rng = np.random.default_rng(1)
    late = 200 + rng.pareto(1.5, 2000) * 300
    setting = stalls_setting(late, 20.0)
    assert setting["every"] == "10000us"  # 2,000 in 20 s
    values = [float(v[:-2]) for v in setting["duration"]["values"]]
    assert values == sorted(set(values)) and values[0] == pytest.approx(late.min(), abs=0.5)
    assert setting["duration"]["probabilities"][0] == 0 and setting["duration"]["probabilities"][-1] == 1.0
    assert values[3] == pytest.approx(np.median(late), abs=0.5)  # percentile 50 kept as measured
    # As --set gives it, the simulator takes it and runs with it.
    key, value = parse_override(kes.to_set_option(setting))
    assert key == "network.return_stalls" and value == setting
    sc = Scenario.from_dict({"network": {"bottleneck_rate": "50Mbps", "buffer": "250kB", "return_stalls": value},
                             "flows": [{"cca": "reno", "rtt": "20ms"}], "run": {"duration": "2s"}})
    assert sc.engine["network"]["return_stalls"]["every"] == 10_000_000
    assert ccarena.run(sc).flows.throughput_mbps.sum() > 40
    with pytest.raises(ValueError, match="fewer than two"):
        stalls_setting(np.array([300.0]), 20.0)


def test_the_emulators_lateness_is_shown_for_the_kernel_and_compared_nowhere():
    assert emulator_lateness_us({"backend": "linux", "linux": {"delay_stats": stats([])}}) == 50.0
    assert np.isnan(emulator_lateness_us({"backend": "linux", "linux": {"delay_stats": None}}))
    assert np.isnan(emulator_lateness_us({"backend": "sim"}))
    # A testbed keeps one program's statistics per host: no single number.
    assert np.isnan(emulator_lateness_us({"backend": "testbed", "testbed": {"delay_stats": {"r1": stats([])}}}))
    rows = [{"case": "c", "backend": "linux", "seed": k, "utilization": u, "emulator_late_us": late}
            for k, (u, late) in enumerate([(0.93, 90.0), (0.99, 40.0), (0.95, 70.0)], 1)]
    rows += [{"case": "c", "backend": "sim", "seed": k, "utilization": 0.98, "emulator_late_us": float("nan")} for k in (1, 2, 3)]
    table = summarise(pd.DataFrame(rows), ["c"]).set_index("metric")
    assert table.loc["emulator_late_us", "kernel"] == pytest.approx(200 / 3) and np.isnan(table.loc["emulator_late_us", "p"])
    assert within_spread(table.reset_index()) == (1, 1)  # utilisation only


def test_the_machines_cpu_time_is_read_by_kind_and_the_stolen_and_softirq_shares_shown_for_the_kernel():
    t = cpu_times("cpu  300 0 100 450 0 0 100 50 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    assert list(t) == ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
    assert sum(t.values()) == pytest.approx(1000 / os.sysconf("SC_CLK_TCK"))
    assert set(cpu_times()) == set(t)  # this machine's own
    cpu = {k: v for k, v in t.items()}
    assert stolen_cpu_pct({"backend": "linux", "linux": {"cpu_s": cpu}}) == pytest.approx(5.0)
    assert np.isnan(stolen_cpu_pct({"backend": "linux", "linux": {"cpu_s": None}}))
    assert np.isnan(stolen_cpu_pct({"backend": "sim"}))
    assert softirq_cpu_pct({"backend": "linux", "linux": {"cpu_s": cpu}}) == pytest.approx(10.0)
    assert np.isnan(softirq_cpu_pct({"backend": "sim"}))


def test_a_kernel_runs_stalls_come_from_its_measurement_window():
    # 25 s after a 5 s warm-up: a 1 ms stall every 0.5 s, and one 50 ms
    # stall during the warm-up that must not count.
    w = [[2_000_000, 50_000]] + [[int((5 + 0.5 * k) * 1e6), 1000] for k in range(50)]
    rec = {"backend": "linux", "warmup_ns": 5_000_000_000, "duration_ns": 30_000_000_000,
           "linux": {"delay_stats": {"late_wakeups": w}}}
    stalls = kernel_run_stalls(rec)
    assert stalls == {"every": "500000us", "duration": "1000us"}  # all alike: a constant
    doc = {"network": {"bottleneck_rate": "50Mbps", "buffer": "250kB", "router_stalls": stalls},
           "flows": [{"cca": "reno", "rtt": "20ms"}], "run": {"duration": "1s"}}
    assert Scenario.from_dict(doc).engine["network"]["router_stalls"]["duration"] == {"distribution": "constant", "value": 1_000_000}
    assert kernel_run_stalls({"backend": "sim", "warmup_ns": 0, "duration_ns": 1}) is None
    assert kernel_run_stalls({**rec, "linux": {"delay_stats": {"late_mean_us": 30.0}}}) is None  # not logged


def test_the_machines_stalls_over_a_millisecond_are_counted_after_the_warm_up():
    from ccarena.experiments.crosscheck import machine_stalls_per_s

    # 25 s after a 5 s warm-up: 50 stalls of 1.5 ms, 100 of 0.9 ms (under
    # the floor), and one of 50 ms in the warm-up: 2 a second.
    w = [[2_000_000, 50_000]] + [[int((5 + 0.5 * k) * 1e6), 1500] for k in range(50)]
    w += [[int((5.1 + 0.25 * k) * 1e6), 900] for k in range(100)]
    rec = {"backend": "linux", "warmup_ns": 5_000_000_000, "duration_ns": 30_000_000_000,
           "linux": {"delay_stats": {"late_wakeups": sorted(w)}}}
    assert machine_stalls_per_s(rec) == pytest.approx(2.0)
    assert np.isnan(machine_stalls_per_s({"backend": "sim", "warmup_ns": 0, "duration_ns": 1}))
    assert np.isnan(machine_stalls_per_s({**rec, "linux": {"delay_stats": {"late_mean_us": 30.0}}}))  # not logged


def test_the_stalls_line_gives_the_kernel_runs_range_beside_the_simulators_default():
    from ccarena.experiments.crosscheck import stalls_summary
    from ccarena.experiments.machine_stalls import stalls_over_per_s

    # The default: 15 stalls a second, 2.5 % in the tail above 2 ms, and of
    # the lognormal body below 2 ms (median 250 us, sigma 1) the share above
    # 1 ms: (Phi(ln 8) - Phi(ln 4)) / Phi(ln 8).
    phi = lambda z: 0.5 * math.erfc(-z / math.sqrt(2))  # noqa: E731
    body = (phi(math.log(8)) - phi(math.log(4))) / phi(math.log(8))
    expected = 1e9 / 67e6 * (0.025 + 0.975 * body)
    assert stalls_over_per_s(schema.default("network", "router_stalls"), 1e6) == pytest.approx(expected)
    assert expected == pytest.approx(1.32, abs=0.01)
    assert stalls_over_per_s({"every": 10e6, "duration": {"distribution": "constant", "value": 2e6}}, 1e6) == pytest.approx(100)
    assert stalls_over_per_s({"every": 10e6, "duration": {"distribution": "constant", "value": 5e5}}, 1e6) == 0
    assert stalls_over_per_s(None, 1e6) is None
    rows = [{"case": c, "backend": "linux", "seed": k, "utilization": 0.95, "machine_stalls_1ms": v}
            for c, vs in (("a", (1.4, 2.0)), ("b", (9.0, 15.0))) for k, v in enumerate(vs, 1)]
    rows += [{"case": c, "backend": "sim", "seed": 1, "utilization": 0.96, "machine_stalls_1ms": float("nan")} for c in "ab"]
    line = stalls_summary(summarise(pd.DataFrame(rows), ["a", "b"]))
    assert line.startswith("machine's stalls over 1 ms: 1.4-15.0 a second over the kernel runs (the simulator's default router stalls: 1.3 a second")
    old = [{k: v for k, v in r.items() if k != "machine_stalls_1ms"} for r in rows]  # runs stored before the row existed
    assert stalls_summary(summarise(pd.DataFrame(old), ["a", "b"])).startswith("machine's stalls over 1 ms: not logged")


def test_the_like_with_like_column_is_counted_as_the_simulators_is():
    from ccarena.experiments.crosscheck import like_with_like_summary

    # Kernel utilisation 0.93-0.97; the default simulator above it, the run
    # from the kernel's starts and stalls inside it; one kernel run only for
    # a second case: not compared.
    rows = [{"case": "c", "backend": "linux", "seed": k, "utilization": u} for k, u in enumerate([0.93, 0.95, 0.97], 1)]
    rows += [{"case": "c", "backend": "sim", "seed": k, "utilization": 0.995} for k in (1, 2, 3)]
    rows += [{"case": "c", "backend": "sim_kernel_starts", "seed": k, "utilization": u} for k, u in enumerate([0.94, 0.96, 0.95], 1)]
    rows += [{"case": "d", "backend": "linux", "seed": 1, "utilization": 0.9},
             {"case": "d", "backend": "sim_kernel_starts", "seed": 1, "utilization": 0.8}]
    table = summarise(pd.DataFrame(rows), ["c", "d"])
    assert within_spread(table) == (0, 1)
    assert like_with_like_summary(table) == "simulator from the kernel's starts and stalls within the kernel's spread: 1 of 1 cells"
    assert like_with_like_summary(table[table.case == "d"]).endswith("no cell compared")
    # With a throughput ratio: the run from the kernel's starts against the
    # second bar as well (0.3 against the kernel's 0.4: 1.33x, though outside
    # the kernel's spread of three equal runs; 0.2 would be 2x).
    ratios = [{"case": "c", "backend": b, "seed": k, "ratio": v} for b, v in (("linux", 0.4), ("sim", 0.9), ("sim_kernel_starts", 0.3)) for k in (1, 2, 3)]
    table = summarise(pd.DataFrame([{**r, **q} for r, q in zip(rows[:9], ratios)]), ["c"])
    assert like_with_like_summary(table).endswith("within the kernel's spread: 1 of 2 cells, throughput ratio within 1.5x in 1 of 1 cases")
    far = summarise(pd.DataFrame([{**r, **q, "ratio": 0.2 if q["backend"] == "sim_kernel_starts" else q["ratio"]} for r, q in zip(rows[:9], ratios)]), ["c"])
    assert like_with_like_summary(far).endswith("throughput ratio within 1.5x in 0 of 1 cases")


def test_kernel_runs_that_did_not_hold_the_set_up_are_left_out_and_said_so():
    from ccarena.experiments.crosscheck import held_setup, held_summary, ratio_factors, shortest_rtt_us

    doc = {"flows": [{"cca": "reno", "rtt": "40ms"}, {"cca": "reno", "rtt": "10ms"}]}
    assert shortest_rtt_us(doc) == 10_000
    assert held_setup(999.0, 10_000) and not held_setup(1000.0, 10_000)
    assert held_setup(float("nan"), 10_000)  # no delay program: nothing says otherwise
    # Case c: three kernel runs, the third 30 ms late; case d: one of two held.
    rows = [{"case": "c", "backend": "linux", "seed": k, "utilization": u, "ratio": 0.5, "emulator_late_us": late, "held": late < 1000}
            for k, (u, late) in enumerate([(0.95, 60.0), (0.97, 80.0), (0.80, 30_000.0)], 1)]
    rows += [{"case": "c", "backend": "sim", "seed": k, "utilization": 0.96, "ratio": 0.5} for k in (1, 2, 3)]
    rows += [{"case": "d", "backend": "linux", "seed": k, "utilization": 0.9, "ratio": 0.4, "emulator_late_us": late, "held": late < 1000}
             for k, late in ((1, 50.0), (2, 5000.0))]
    rows += [{"case": "d", "backend": "sim", "seed": k, "utilization": 0.5, "ratio": 0.9} for k in (1, 2)]
    table = summarise(pd.DataFrame(rows), ["c", "d"])
    c = table[table.case == "c"].set_index("metric")
    assert c.loc["utilization", "kernel"] == pytest.approx(0.96) and c.loc["utilization", "repetitions"] == 2
    assert c.loc["utilization", "kernel_runs"] == 3
    assert c.loc["emulator_late_us", "kernel"] == pytest.approx(30_140 / 3)  # the testbed's row keeps every run
    # d has one held run: compared nowhere, though its simulator is far off.
    assert within_spread(table) == (2, 2)
    assert [case for case, _ in ratio_factors(table)] == ["c"]
    assert held_summary(table).endswith("left out: 2 of 5 (c 1 of 3, d 1 of 2); a case left with one run or none is compared nowhere")
    assert held_summary(table[table.case == "c"].assign(kernel_runs=2)) == "kernel runs that did not hold the set-up: none"


def test_a_kernel_run_whose_window_left_the_possible_does_not_hold():
    # The BPF algorithms' fault on this machine's kernel: an ssthresh the
    # program never returned (the low bits of a kernel address) becomes the
    # window at the end of a recovery.
    from types import SimpleNamespace

    from ccarena.experiments.crosscheck import KERNEL_WINDOW_LIMIT, window_possible

    def run(cwnds):
        return SimpleNamespace(timeseries=pd.DataFrame({"flow": [0] * len(cwnds), "cwnd": cwnds}))

    assert window_possible(run([600.0, 28_000.0, KERNEL_WINDOW_LIMIT]))
    assert not window_possible(run([600.0, 82_903_040.0, 700.0]))
    assert not window_possible(run([KERNEL_WINDOW_LIMIT + 1.0]))
    assert window_possible(run([float("nan"), 500.0]))  # UDP rows carry no window
    assert window_possible(SimpleNamespace(timeseries=pd.DataFrame()))
