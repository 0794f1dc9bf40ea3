"""tools/kernel_bottleneck_drops.py's analysis of the BPF tracer's records, on
synthetic records: which flow each overflow of the bottleneck took."""

import importlib.util
import ipaddress
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("kernel_bottleneck_drops", ROOT / "tools" / "kernel_bottleneck_drops.py")
kbd = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(kbd)

RECEIVERS = ["198.19.0.1", "198.19.1.1"]
FLOW_OF = {a: i for i, a in enumerate(RECEIVERS)}
MS = 1_000_000


def addr(text: str) -> int:
    """The record's field for an address: its network-order bytes read little-endian."""
    return int.from_bytes(ipaddress.IPv4Address(text).packed, "little")


def rec(t_ms: float, flow: int, kind: int = kbd.ENQUEUE, sport: int = 40000, segs: int = 30,
        reason: int = 0, dport: int = 5201) -> tuple:
    drop_reason = reason or (kbd.QDISC_REASONS[0] if kind == kbd.DROP else 0)
    return (int(t_ms * MS), kind, drop_reason, addr("198.18.0.1"), addr(RECEIVERS[flow]), sport + flow, dport,
            segs * 1448, segs, 0, 0, 3, 1, 0)


def records(rows: list[tuple]) -> np.ndarray:
    return np.array(rows, dtype=kbd.RECORD)


def test_the_record_layout_matches_the_bpf_programs_struct():
    assert kbd.RECORD.itemsize == 56
    assert kbd.RECORD.fields["sport"][1] == 24 and kbd.RECORD.fields["len"][1] == 28
    assert kbd.RECORD.fields["netns"][1] == 48


def test_addresses_read_back_in_network_order():
    assert kbd.address(addr("198.19.1.1")) == "198.19.1.1"


def test_drops_close_together_form_one_episode_and_name_the_flows_they_took():
    rows = [rec(t, t % 2) for t in range(0, 100)]
    # Episode 1 (50-51 ms): flow 1 only; episode 2 (80-82 ms): both flows.
    rows += [rec(50, 1, kbd.DROP), rec(51, 1, kbd.DROP), rec(80, 0, kbd.DROP), rec(82, 1, kbd.DROP)]
    out = kbd.report(records(rows), FLOW_OF, 0, episode_gap_ns=20 * MS)
    assert out["episodes"] == 2
    assert out["episodes_that_took_each_flow"] == {"0": 0.5, "1": 1.0}
    assert out["episodes_that_took_every_flow"] == 0.5
    assert out["share_of_dropped_skbs"] == {"0": 0.25, "1": 0.75}
    assert [e["skbs_dropped"] for e in out["first_episodes"]] == [{"0": 0, "1": 2}, {"0": 1, "1": 1}]
    assert out["first_episodes"][0]["t_s"] == 0.05
    assert out["flows"]["1"]["skbs_dropped"] == 3 and out["flows"]["1"]["skbs_taken"] == 50


def test_a_flow_losing_beyond_its_arrivals_shows_in_the_shares():
    # Flow 0 brings a quarter of the skbs but takes every drop.
    rows = [rec(t, 0 if t % 4 == 0 else 1) for t in range(0, 200)]
    rows += [rec(t, 0, kbd.DROP) for t in (60, 120, 180)]
    out = kbd.report(records(rows), FLOW_OF, 0, episode_gap_ns=10 * MS)
    assert out["episodes"] == 3
    assert out["share_of_dropped_skbs"] == {"0": 1.0, "1": 0.0}
    arrivals = out["share_of_arriving_skbs_over_the_episodes"]
    assert 0.25 <= arrivals["0"] <= 0.4 and arrivals["0"] + arrivals["1"] == 1.0


def test_control_connections_other_ports_and_other_reasons_are_left_out():
    rows = [rec(t, 0, segs=40) for t in range(10)] + [rec(t, 1, segs=40) for t in range(10)]
    rows += [rec(3, 0, sport=50000, segs=1)]  # iperf3's control connection: fewer bytes
    rows += [rec(4, 0, kbd.DROP, sport=50000, segs=1)]
    rows += [rec(5, 1, dport=22)]  # not an iperf3 server's port
    rows += [rec(6, 1, kbd.DROP, reason=2)]  # freed for another reason
    out = kbd.report(records(rows), FLOW_OF, 0, episode_gap_ns=MS)
    assert out["episodes"] == 0
    assert out["flows"]["0"]["skbs_taken"] == 10 and out["flows"]["1"]["skbs_taken"] == 10
    assert out["flows"]["0"]["segments_per_skb_taken"] == 40.0


def test_the_warm_up_is_left_out():
    rows = [rec(t, 0) for t in range(100)] + [rec(10, 0, kbd.DROP), rec(90, 0, kbd.DROP)]
    out = kbd.report(records(rows), FLOW_OF, 50 * MS, episode_gap_ns=MS)
    assert out["episodes"] == 1 and out["first_episodes"][0]["t_s"] == 0.09


def test_skbs_without_payload_are_left_out():
    # The data connection's SYN passes the queue before its first data.
    syn = list(rec(0, 0, segs=1))
    syn[7] = 74
    rows = [tuple(syn)] + [rec(t, 0) for t in range(40, 60)] + [rec(50, 0, kbd.DROP)]
    out = kbd.report(records(rows), FLOW_OF, 0, episode_gap_ns=MS)
    assert out["flows"]["0"]["skbs_taken"] == 20 and out["first_episodes"][0]["t_s"] == 0.01
