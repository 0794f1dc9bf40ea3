"""Reno written in Python, the way a researcher would prototype an algorithm:
the same hooks as a Linux congestion-control module, no Rust involved.

Run it:   ccarena run examples/python_reno.toml
          (or from Python: ccarena.load_cca_file("examples/python_reno.py"))
It gives results identical to the built-in `reno` (tests/test_python_cca.py).
"""

import ccarena


class PyReno(ccarena.CongestionControl):
    name = "py-reno"
    description = "Reno written in Python (example)"

    def cong_avoid(self, tp, ack, acked):
        # Grow only while the window, not the application, limits the sender.
        if not tp.is_cwnd_limited():
            return
        if tp.cwnd < tp.ssthresh:
            # Slow start: one packet per packet acknowledged, up to ssthresh;
            # what is left over counts towards congestion avoidance.
            grown = min(tp.cwnd + acked, tp.ssthresh)
            acked -= grown - tp.cwnd
            tp.cwnd = grown
            if acked == 0:
                return
        # Congestion avoidance: one packet per window of packets acknowledged,
        # counting in tp.cwnd_cnt (credit earned at a larger window applies first).
        if tp.cwnd_cnt >= tp.cwnd:
            tp.cwnd_cnt = 0
            tp.cwnd += 1
        tp.cwnd_cnt += acked
        if tp.cwnd_cnt >= tp.cwnd:
            delta = tp.cwnd_cnt // tp.cwnd
            tp.cwnd_cnt -= delta * tp.cwnd
            tp.cwnd += delta

    def ssthresh(self, tp):
        return max(tp.cwnd // 2, 2)

    def undo_cwnd(self, tp):
        return max(tp.cwnd, tp.prior_cwnd)
