"""tools/kernel_ack_causes.py's analysis of the BPF tracer's records, on
synthetic records: what sent each ACK, and the recomputed window test."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("kernel_ack_causes", ROOT / "tools" / "kernel_ack_causes.py")
kac = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(kac)

MSS = 1448
RCVBUF = 4_000_000
RATIO = 198  # of 256, as a veth GRO skb of two segments sets it
WSCALE = 12
UNIT = 1 << WSCALE
EMPTY = kac.advertised_window(RCVBUF, 0, 0, RATIO, 10**9, 10**9, WSCALE)


def test_the_record_layout_matches_the_bpf_programs_struct():
    assert kac.RECORD.itemsize == 80
    # C packs the 19 four-byte fields after t_ns without padding.
    assert kac.RECORD.fields["a"][1] == 56 and kac.RECORD.fields["rcv_mss"][1] == 68 and kac.RECORD.fields["cpu"][1] == 75


def test_advertised_window_rounds_the_free_space_up_to_the_scales_unit():
    # Empty: the buffer at the scaling ratio, rounded up.
    assert EMPTY == -(-(RCVBUF * RATIO >> 8) // UNIT) * UNIT
    # One segment's skb (truesize 2280) takes 1,763 bytes of window: it stays
    # within the unit only where the empty window's phase leaves that room.
    phase = (RCVBUF * RATIO >> 8) % UNIT
    one = kac.advertised_window(RCVBUF, 2280, 0, RATIO, 10**9, 10**9, WSCALE)
    assert (one == EMPTY) == ((2280 * RATIO >> 8) < phase)
    # rcv_ssthresh caps it; below half the full space it is rounded down.
    assert kac.advertised_window(RCVBUF, 0, 0, RATIO, 1_000_001, 10**9, WSCALE) == -(-1_000_001 // UNIT) * UNIT
    low = kac.advertised_window(RCVBUF, 3_000_000, 0, RATIO, 10**9, 10**9, WSCALE)
    assert low == ((1_000_000 * RATIO >> 8) // UNIT) * UNIT


class Trace:
    """Builds one connection's records in time order."""

    def __init__(self):
        self.rows = []
        self.t = 0
        self.rcv_nxt = self.rcv_wup = self.copied = 1000
        self.rcv_wnd = EMPTY
        self.rmem = 0
        self.ofo = 0

    def _rec(self, kind, before=0, a=0, b=0, c=0):
        self.t += 1000
        self.rows.append((self.t, kind, before, 5201, 40000, self.rcv_nxt, self.rcv_wup, self.copied, self.rcv_wnd,
                          10**9, 10**9, RCVBUF, self.rmem, 0, a, b, c, MSS, RATIO, WSCALE, 0, 0, self.ofo, 0))

    def ack(self, before):
        self.rcv_wup = self.rcv_nxt
        self.rcv_wnd = kac.advertised_window(RCVBUF, self.rmem, 0, RATIO, 10**9, 10**9, WSCALE)
        self._rec(kac.ACK, before=before)

    def arrive(self, segs, ack=False, at=None):
        seq = self.rcv_nxt if at is None else at
        end = seq + segs * MSS
        self._rec(kac.ARRIVAL, a=seq, b=end, c=832 + segs * MSS)
        if at is None:
            self.rcv_nxt = end
            self.rmem += 832 + segs * MSS
            self._rec(kac.READABLE)
        if ack:
            self.ack(kac.ARRIVAL)

    def read(self, ack):
        self._rec(kac.READ)
        got = self.rcv_nxt - self.copied
        self.copied = self.rcv_nxt
        self.rmem = 0
        if ack:
            self.ack(kac.READ)
        self._rec(kac.READ_DONE, a=got if got else (1 << 32) - 11)

    def records(self):
        return np.array(self.rows, dtype=kac.RECORD)


def test_acks_are_attributed_to_reads_and_arrivals_and_the_window_test_agrees():
    tr = Trace()
    for _ in range(100):
        # Three segments: the window shrinks by more than a unit, so the
        # arrival waits and the read acknowledges.
        tr.arrive(3)
        tr.read(ack=True)
    tr.read(ack=False)  # nothing readable: EAGAIN
    tr.arrive(2, at=tr.rcv_nxt + 10 * MSS, ack=True)  # out of order: at once
    r = kac.connection_causes(tr.records(), warmup_ns=0)
    assert r["data_segments"] == 302
    causes = r["acks_per_segment_by_cause"]
    assert causes["read"] == pytest.approx(100 / 302, abs=1e-4)
    assert causes["out_of_order_arrival"] == pytest.approx(1 / 302, abs=1e-4)
    assert causes["in_order_arrival"] == 0 and causes["other"] == 0
    assert r["reads_with_data_per_segment"] == pytest.approx(100 / 302, abs=1e-4)
    assert r["share_of_reads_with_data_that_ack"] == 1.0
    assert r["window_test"] == {"agree": 100, "acked_not_predicted": 0, "predicted_not_acked": 0}
    assert r["truesize_less_payload"]["p50"] == 832
    assert r["readable_to_read_us"]["p50"] == 1.0


def test_a_disagreeing_arrival_is_counted_as_such():
    """An ACK at an arrival the recomputed test says should have waited."""
    tr = Trace()
    tr.arrive(3, ack=True)
    tr.read(ack=False)
    r = kac.connection_causes(tr.records(), warmup_ns=0)
    assert r["window_test"] == {"agree": 0, "acked_not_predicted": 1, "predicted_not_acked": 0}
    assert r["arrivals_acknowledged_at_once"]["in_order_arrival"] == 1.0


def test_the_control_connection_is_left_out():
    tr = Trace()
    for _ in range(5):
        tr.arrive(1)
        tr.read(ack=False)
    assert kac.report(tr.records(), warmup_ns=0, min_arrivals=10) == {}
    assert list(kac.report(tr.records(), warmup_ns=0, min_arrivals=5)) == ["5201:40000"]
