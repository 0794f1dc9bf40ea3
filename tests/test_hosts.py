"""The [hosts] table: segmentation offload, batched receivers, the hosts' line
rate; checked like every table, recorded per flow, mapped onto the kernel."""

import json
import math

import pytest

import ccarena
from ccarena import _engine
from ccarena.scenario import Scenario, ScenarioError, schema


def doc(hosts=None, rate="100Mbps", **network):
    d = {
        "network": {"bottleneck_rate": rate, "buffer": "250kB", **network},
        "flows": [{"cca": "cubic", "rtt": "20ms"}],
        "run": {"duration": "4s", "warmup": "1s", "start_jitter": "0s"},
    }
    if hosts is not None:
        d["hosts"] = hosts
    return d


def test_defaults_are_a_stock_linux_host():
    sc = Scenario.from_dict(doc())
    assert sc.engine["hosts"] == {}
    assert sc.meta.linux["offloads"] is True
    assert Scenario.from_dict(doc({"tso": False})).meta.linux["offloads"] is False
    # An explicit [linux] offloads still wins.
    explicit = dict(doc({"tso": False}), linux={"offloads": True})
    assert Scenario.from_dict(explicit).meta.linux["offloads"] is True


def test_super_packets_and_stretch_acks_are_recorded():
    offload = ccarena.run(doc()).flows.iloc[0]
    clockwork = ccarena.run(doc({"tso": False, "gso": False, "app_reads": False})).flows.iloc[0]
    assert clockwork.skbs_sent == clockwork.segments_sent
    assert Scenario.from_dict(doc({"tso": False, "gso": False})).engine["hosts"] == {"tso": False, "gso": False}
    with pytest.raises(ScenarioError, match="hosts.gso"):
        Scenario.from_dict(doc({"gso": "no"}))
    # tcp_tso_autosize: about 10 segments at 100 Mbit/s.
    assert 4 < offload.segments_sent / offload.skbs_sent <= 12
    # Data read as it arrives: an ACK every second segment.
    assert 0.4 < clockwork.acks_sent / clockwork.segments_sent < 0.6
    batched = ccarena.run(doc({"rx_batching": True, "rx_hold": "1ms"})).flows.iloc[0]
    assert batched.acks_sent / batched.segments_sent < 0.25


def test_every_flows_pacing_rate_is_recorded_as_ss_shows_it():
    # tcp_update_pacing_rate runs for every flow, paced or not (it sizes
    # TSO bursts): 120 % of cwnd x MSS / sRTT in congestion avoidance,
    # 200 % in slow start. ss shows it; so do the time series.
    ts = ccarena.run(doc()).timeseries
    s = ts[(ts.t_s > 1) & (ts.srtt_ms > 0)]
    ratio = s.pacing_rate_mbps / (s.cwnd * 1448 * 8 / (s.srtt_ms * 1e3))
    assert ratio.between(1.15, 2.05).all() and abs(ratio.median() - 1.2) < 0.05, ratio.describe()


def test_queue_drops_are_recorded_in_segments_and_in_skbs_as_tc_counts_them():
    # Two flows into a small buffer: the Linux router (the default) drops
    # super-packets that fit its bucket whole, so it turns away fewer skbs
    # than segments; a switch drops packets, each counted once.
    two = dict(doc(buffer="60kB"), flows=[{"cca": "cubic", "rtt": "20ms", "count": 2}])
    linux = ccarena.run(two).record["link"]
    assert 0 < linux["drops_queue_skbs"] < linux["drops_queue"], linux
    switch = ccarena.run(dict(two, network=dict(two["network"], router="switch"))).record["link"]
    assert 0 < switch["drops_queue_skbs"] == switch["drops_queue"], switch
    # Stored records from before the count: a kernel's tbf always counted
    # skbs; a simulator's cannot say.
    from ccarena.results.record import normalise
    old = ccarena.run(two).record
    del old["link"]["drops_queue_skbs"]
    assert normalise(json.loads(json.dumps(old)))["link"]["drops_queue_skbs"] is None
    kernel = dict(json.loads(json.dumps(old)), backend="linux")
    assert normalise(kernel)["link"]["drops_queue_skbs"] == old["link"]["drops_queue"]


def test_receivers_acknowledge_at_the_applications_reads():
    # Without offloads a receiver that reads data as it arrives acknowledges
    # every second segment; with the application's reads modelled (the
    # default), one read (and ACK) takes every segment that became readable
    # during its wait: stretch ACKs, as on the kernel.
    off = {"tso": False}
    at_arrival = {**off, "app_reads": False}
    every_second = ccarena.run(doc(at_arrival)).flows.iloc[0]
    assert Scenario.from_dict(doc(at_arrival)).engine["hosts"] == {"tso": False, "app_reads": False}
    reads = ccarena.run(doc({**off, "read_wait": "300us"})).flows.iloc[0]
    per_seg = lambda f: f.acks_sent / f.segments_sent  # noqa: E731
    assert 0.45 < per_seg(every_second) < 0.55
    # The measured wait (the default) at 100 Mbit/s: about as many ACKs per
    # segment as the kernel sends without offloads at 400 Mbit/s (0.34-0.39).
    assert 0.3 < per_seg(ccarena.run(doc(off)).flows.iloc[0]) < 0.45
    # A stock buffer (3 MB: window scale 7, a 128-byte unit): any unread
    # segment shrinks the window, so the ACK waits for the read, and at 100
    # Mbit/s (a segment each 120 us) a 300 us wait gathers about 3.5.
    stock = doc({**off, "read_wait": "300us"})
    stock["flows"][0]["tcp"] = {"rcvbuf": "3MiB"}
    gathered = per_seg(ccarena.run(stock).flows.iloc[0])
    assert 0.2 < gathered < 0.35, gathered
    # The default 64 MiB buffer (scale 12, a 4 KB unit): up to two unread
    # segments may leave the rounded window where the last ACK put it, and
    # then an arrival is acknowledged at once; how often depends on where
    # the window falls within its unit, drawn per connection. (At most
    # every second segment's ACK, give or take the immediate ACKs that
    # answer out-of-order data after losses, as for `every_second`.)
    assert gathered < per_seg(reads) <= 0.55
    assert reads.throughput_mbps > 0.9 * every_second.throughput_mbps
    with pytest.raises(ScenarioError, match="hosts.app_reads"):
        Scenario.from_dict(doc({"app_reads": "yes"}))
    with pytest.raises(ScenarioError, match="hosts.read_wait"):
        Scenario.from_dict(doc({"app_reads": True, "read_wait": "3 parsecs"}))


def test_a_read_takes_at_most_read_size():
    # 5 ms reads at 400 Mbit/s gather up to 250 KB: with iperf3's 128 KB
    # block such a read is two, the second about 16 us after the first.
    slow = {"read_wait": "5ms"}
    blocks = ccarena.run(doc(slow, rate="400Mbps")).flows.iloc[0]
    whole = ccarena.run(doc({**slow, "read_size": "1GB"}, rate="400Mbps")).flows.iloc[0]
    assert Scenario.from_dict(doc({"read_size": "64KB"})).engine["hosts"] == {"read_size": 64_000}
    # Each read's tcp_cleanup_rbuf decides on an ACK of its own.
    assert blocks.acks_sent / blocks.segments_sent > 1.5 * whole.acks_sent / whole.segments_sent
    with pytest.raises(ScenarioError, match="hosts.read_size"):
        Scenario.from_dict(doc({"read_size": "0B"}))
    with pytest.raises(ScenarioError, match="hosts.read_again_wait"):
        Scenario.from_dict(doc({"read_again_wait": "soon"}))


def test_the_older_kernels_deferral_rule_builds_larger_skbs():
    # At 40 ms the pre-6.18 rule defers most openings smaller than the
    # autosize goal; the 6.18 rule sends them at once.
    d = doc(rate="400Mbps")
    d["network"]["buffer"] = "500kB"
    d["flows"] = [{"cca": "cubic", "rtt": "40ms"}]
    d["run"]["duration"] = "6s"
    assert Scenario.from_dict(d).engine["hosts"] == {}
    per_skb = lambda f: f.segments_sent.sum() / f.skbs_sent.sum()  # noqa: E731
    now = per_skb(ccarena.run(d).flows)
    d["hosts"] = {"tso_defer": "half_rtt"}
    assert Scenario.from_dict(d).engine["hosts"] == {"tso_defer": "half_rtt"}
    before = per_skb(ccarena.run(d).flows)
    assert before > now * 1.05, (before, now)


def test_line_rate_caps_what_a_host_sends():
    r = ccarena.run(doc({"line_rate": "50Mbps"}))
    assert r.flows.iloc[0].throughput_mbps < 50
    assert ccarena.run(doc()).flows.iloc[0].throughput_mbps > 80


@pytest.mark.parametrize(
    "hosts, field, fragment",
    [
        ({"tsoo": True}, "hosts.tsoo", "tso"),
        ({"tso": "yes"}, "hosts.tso", "true or false"),
        ({"rx_hold": "soon"}, "hosts.rx_hold", "duration"),
        ({"iperf3_test_start_wait": {"distribution": "uniform", "min": "1ms"}}, "hosts.iperf3_test_start_wait.max", "missing"),
        ({"line_rate": "fast"}, "hosts.line_rate", ""),
        ({"tso_defer": "linux-5.15"}, "hosts.tso_defer", "allowed: ack_due, half_rtt"),
        ([], "hosts", "table"),
    ],
)
def test_errors_name_the_field(hosts, field, fragment):
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(doc(hosts))
    assert e.value.field == field and fragment in str(e.value)


def test_access_rate_and_line_rate_are_one_setting():
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(doc({"line_rate": "1Gbps"}, access_rate="1Gbps"))
    assert e.value.field == "network.access_rate" and "line_rate" in str(e.value)


def test_a_linux_router_forwards_super_packets_whole():
    # Two flows at 400 Mbit/s: skbs of ~18 segments fit the 50 kB bucket.
    # Data read as it arrives, so that the ACKs show how the skbs arrived.
    d = doc({"app_reads": False}, rate="400Mbps")
    d["network"]["buffer"] = "500kB"
    d["flows"] = [{"cca": "cubic", "rtt": "20ms", "count": 2}]
    linux = ccarena.run(d).flows
    d["network"]["router"] = "switch"
    switch = ccarena.run(d).flows
    per_seg = lambda f: f.acks_sent.sum() / f.segments_sent.sum()  # noqa: E731
    assert per_seg(linux) < 0.15 < 0.4 < per_seg(switch)


@pytest.mark.parametrize(
    "network, field", [({"router": "cisco"}, "network.router"), ({"router_burst": "tiny"}, "network.router_burst"),
                       ({"router_burst": "1kB"}, "network.router_burst")],
)
def test_router_errors_name_the_field(network, field):
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(doc(**network))
    assert e.value.field == field


def test_path_delay_noise_defaults_to_the_measured_return_path_and_can_be_turned_off():
    default = Scenario.from_dict(doc()).engine["network"]
    assert "delay_noise" not in default  # the engine's default: the body of the linux backend's measured return-path noise
    off = Scenario.from_dict(doc(delay_noise="none")).engine["network"]
    assert off["delay_noise"] is None
    fixed = Scenario.from_dict(doc(delay_noise="40us")).engine["network"]
    assert fixed["delay_noise"] == {"distribution": "constant", "value": 40_000.0}
    ln = Scenario.from_dict(doc(delay_noise={"distribution": "lognormal", "median": "25us", "sigma": 0.5})).engine["network"]
    assert ln["delay_noise"]["distribution"] == "lognormal"
    # The default is a lognormal of median 60 us (its tail is the return
    # stalls'); a lognormal body with a Pareto tail per flow, the default
    # until 2026-11-28, takes its body's median with a unit too.
    assert schema.default("network", "delay_noise") == pytest.approx({"distribution": "lognormal", "mu": math.log(60_000), "sigma": 0.55})
    tailed = {"distribution": "lognormal_pareto", "median": "60us", "sigma": 0.55, "k": "200us", "alpha": 0.5, "tail": 0.03, "max": "3ms"}
    lp = Scenario.from_dict(doc(delay_noise=tailed)).engine["network"]["delay_noise"]
    assert lp["mu"] == pytest.approx(math.log(60_000)) and lp["k"] == 200_000 and lp["max"] == 3e6
    # Exact delays give the clockwork results; the default noise moves them.
    base = {"run.duration": "4s", "run.warmup": "1s"}
    r_default = ccarena.run("bench", overrides=base).flows.throughput_mbps.tolist()
    r_off = ccarena.run("bench", overrides={**base, "network.delay_noise": "none"}).flows.throughput_mbps.tolist()
    assert r_default != r_off
    assert ccarena.run("bench", overrides=base).flows.throughput_mbps.tolist() == r_default


def test_a_measured_distribution_goes_in_as_its_percentiles():
    # The kernel receiver's wait for iperf3's read (docs/fidelity.md) as an
    # rx_hold: values with units at cumulative probabilities, linear between.
    measured = {"distribution": "empirical", "values": ["0.5us", "3.3us", "24us", "92us", "827us", "2ms"],
                "probabilities": [0, 0.1, 0.5, 0.9, 0.99, 1]}
    d = doc()
    d["hosts"] = {"rx_batching": True, "rx_hold": measured}
    hold = Scenario.from_dict(d).engine["hosts"]["rx_hold"]
    assert hold == {"distribution": "empirical", "values": [500.0, 3_300.0, 24_000.0, 92_000.0, 827_000.0, 2e6],
                    "probabilities": [0.0, 0.1, 0.5, 0.9, 0.99, 1.0]}
    draws = sorted(_engine.sample_dist_json(json.dumps(hold), 1, "t", 20_000))
    assert draws[0] >= 500.0 and draws[-1] <= 2e6
    assert 20_000 < draws[10_000] < 28_000  # the median
    assert 80_000 < draws[18_000] < 105_000  # p90
    # Bad points are named, field and element.
    for value, field, words in [
        ({**measured, "values": ["1us", "2us"]}, "hosts.rx_hold", "as many values as probabilities"),
        ({**measured, "probabilities": [0, 0.1, 0.5, 0.9, 0.99, 0.999]}, "hosts.rx_hold.probabilities", "end at 1"),
        ({**measured, "probabilities": [0, 0.5, 0.5, 0.9, 0.99, 1]}, "hosts.rx_hold.probabilities", "rise strictly"),
        ({**measured, "values": ["0.5us", "3.3us", "24us", "9us", "827us", "2ms"]}, "hosts.rx_hold.values", "must not decrease"),
        ({**measured, "values": ["0.5us", "3.3us", "24us", "92xs", "827us", "2ms"]}, "hosts.rx_hold.values[3]", "unknown time unit"),
        ({**measured, "values": "24us"}, "hosts.rx_hold.values", "must be a list"),
    ]:
        d["hosts"]["rx_hold"] = value
        with pytest.raises(ScenarioError) as e:
            Scenario.from_dict(d)
        assert e.value.field == field and words in str(e.value), str(e.value)


def test_router_stalls_default_to_the_measured_ones_and_can_be_turned_off():
    assert "router_stalls" not in Scenario.from_dict(doc()).engine["network"]  # the engine's default
    assert Scenario.from_dict(doc(router_stalls="none")).engine["network"]["router_stalls"] is None
    measured = {"every": "67ms", "duration": {"distribution": "lognormal_pareto", "median": "250us", "sigma": 1.0, "k": "2ms",
                                             "alpha": 2.0, "tail": 0.025, "max": "4ms"}}
    stalls = Scenario.from_dict(doc(router_stalls=measured)).engine["network"]["router_stalls"]
    assert stalls["every"] == 67_000_000 and stalls["duration"]["mu"] == pytest.approx(math.log(250_000))
    default = schema.default("network", "router_stalls")
    assert stalls["every"] == default["every"] and stalls["duration"] == pytest.approx(default["duration"])
    # Two flows of equal RTT through a 10 ms queue at 400 Mbit/s: without
    # stalls every overflow turns away one skb of one flow, with them some
    # overflows take skbs of both (docs/fidelity.md, "The router's stalls").
    d = doc(rate="400Mbps")
    d["network"]["buffer"] = "500kB"
    d["flows"] = [{"cca": "reno", "rtt": "20ms", "count": 2}]
    d["run"] = {"duration": "20s", "warmup": "5s", "seed": 2}
    on = ccarena.run(d)
    d["network"]["router_stalls"] = "none"
    off = ccarena.run(d)
    assert on.flows.throughput_mbps.tolist() != off.flows.throughput_mbps.tolist()
    # They move which flow loses, not how much the pair carries.
    assert 0.9 * off.flows.throughput_mbps.sum() < on.flows.throughput_mbps.sum() < 1.1 * off.flows.throughput_mbps.sum()
    assert ccarena.run({**d, "network": {**d["network"], "router_stalls": measured}}).flows.throughput_mbps.tolist() == \
        on.flows.throughput_mbps.tolist()


def test_return_stalls_default_to_the_measured_ones_and_can_be_turned_off():
    # The measured set (net/stall.rs), beside delay_noise's body.
    measured = {"every": "25ms", "duration": {"distribution": "pareto", "k": "400us", "alpha": 0.7, "max": "3.5ms"}}
    in_engine = {"every": 25_000_000, "duration": {"distribution": "pareto", "k": 400_000, "alpha": 0.7, "max": 3_500_000}}
    assert schema.default("network", "return_stalls") == in_engine
    assert Scenario.from_dict(doc(return_stalls=measured)).engine["network"]["return_stalls"] == in_engine
    assert Scenario.from_dict(doc(return_stalls="none")).engine["network"]["return_stalls"] is None
    base = {"run.duration": "4s", "run.warmup": "1s"}
    on = ccarena.run("bench", overrides=base).flows.throughput_mbps.tolist()
    assert ccarena.run("bench", overrides={**base, "network.return_stalls": measured}).flows.throughput_mbps.tolist() == on
    off = ccarena.run("bench", overrides={**base, "network.return_stalls": "none"}).flows.throughput_mbps.tolist()
    assert off != on
    assert ccarena.run("bench", overrides={**base, "network.return_stalls": "none"}).flows.throughput_mbps.tolist() == off


def test_a_router_stalls_table_keeps_the_measured_default_of_what_it_leaves_out():
    default = schema.default("network", "router_stalls")
    often = Scenario.from_dict(doc(router_stalls={"every": "17ms"})).engine["network"]["router_stalls"]
    assert often == {"every": 17_000_000, "duration": default["duration"]}
    longer = Scenario.from_dict(doc(router_stalls={"duration": "1ms"})).engine["network"]["router_stalls"]
    assert longer == {"every": default["every"], "duration": {"distribution": "constant", "value": 1_000_000}}
    # So does the return path's.
    ret = schema.default("network", "return_stalls")
    assert Scenario.from_dict(doc(return_stalls={"every": "17ms"})).engine["network"]["return_stalls"] == {"every": 17_000_000, "duration": ret["duration"]}


@pytest.mark.parametrize("setting", ["router_stalls", "return_stalls"])
@pytest.mark.parametrize(
    "value, field",
    [("often", ""), ({"every": "0s", "duration": "1ms"}, ".every"),
     ({"every": "1s", "duration": "1ms", "cpu": 1}, ".cpu"), ({"every": "1s", "duration": {"distribution": "gamma"}}, ".duration")],
)
def test_stalls_errors_name_the_field(setting, value, field):
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(doc(**{setting: value}))
    assert e.value.field.startswith(f"network.{setting}{field}")


@pytest.mark.parametrize("value", ["soon", {"distribution": "gamma"}, {"distribution": "lognormal", "median": "-3us", "sigma": 1}])
def test_path_delay_noise_errors_name_the_field(value):
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(doc(delay_noise=value))
    assert e.value.field.startswith("network.delay_noise")
