"""Capacity-normalised metrics hold for every MSS and direction: a flow's
goodput is measured against what the link can carry in packets of that flow's
own size (MSS + 52 header bytes), never a fixed 1448/1500."""

import pytest

import ccarena
from ccarena.results.metrics import goodput_capacity_bps, utilization_bdp, wire_bytes


def _doc(flows, rate="20Mbps"):
    return {
        "network": {"bottleneck_rate": rate, "buffer": "1bdp", "reverse_bottleneck": True},
        "flows": flows,
        "run": {"duration": "6s", "warmup": "2s"},
    }


def test_goodput_capacity_uses_the_flows_mss():
    assert goodput_capacity_bps(1500e6 / 1500 * 8, 1448) == pytest.approx(8e6 * 1448 / 1500)
    for mss in (100, 536, 1448, 9000):
        assert goodput_capacity_bps(1e9, mss) == pytest.approx(1e9 * mss / (mss + 52))
        assert wire_bytes(mss) == mss + 52
    # 100 packets in flight of 588 bytes fill a BDP of 58,800 bytes.
    assert utilization_bdp([100], 58_800 * 8 / 0.1, 1e8, 536) == pytest.approx(1.0)


@pytest.mark.parametrize("mss", [536, 1448, 9000])
def test_utilization_matches_the_link_for_every_mss(mss):
    # One saturating flow: what it delivered, counted in its own packets, is
    # what the link sent (retransmissions aside).
    r = ccarena.run(_doc([{"cca": "cubic", "rtt": "20ms", "tcp": {"mss": mss}}]))
    s = r.summary
    assert 0.8 < s["utilization"] <= 1.01, s
    assert s["utilization"] == pytest.approx(s["link_utilization"], abs=0.03)


@pytest.mark.parametrize("mss", [536, 9000])
def test_a_reverse_flow_0_does_not_set_the_forward_mss(mss):
    # Flow 0 runs in reverse with another MSS; the forward flow's packets are 1500 bytes.
    r = ccarena.run(_doc([
        {"cca": "cubic", "rtt": "20ms", "direction": "reverse", "tcp": {"mss": mss}},
        {"cca": "cubic", "rtt": "20ms"},
    ]))
    s = r.summary
    assert list(r.flows.mss) == [mss, 1448]
    forward_mbps = r.flows.throughput_mbps[1]
    rate = r.record["link"]["rate_bps"]
    assert s["utilization"] == pytest.approx(forward_mbps * 1e6 / (rate * 1448 / 1500))
    # The link also carried the reverse flow's ACKs: a little more than the flow's packets.
    assert 0.6 < s["utilization"] <= s["link_utilization"] + 0.005


def test_flow_metrics_normalise_in_flight_by_the_flows_packets():
    # A flow that keeps about a BDP in flight scores about 1 whatever its MSS.
    for mss in (536, 9000):
        r = ccarena.run(_doc([{"cca": "bbr", "rtt": "40ms", "tcp": {"mss": mss}}], rate="50Mbps"))
        m = ccarena.results.metrics.flow_metrics(r)[0]
        assert 0.7 < m["mean_utilization_bdp_l4"] < 2.5, (mss, m["mean_utilization_bdp_l4"])
