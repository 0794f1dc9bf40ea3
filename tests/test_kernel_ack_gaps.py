"""tools/kernel_ack_gaps.py's analysis of perf's tracepoint records, on a
synthetic `perf script` text."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("kernel_ack_gaps", ROOT / "tools" / "kernel_ack_gaps.py")
kag = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(kag)


def probe(t, port):
    return (f"{t:.9f}:          tcp:tcp_probe: family=AF_INET src=198.18.0.1:{port} dest=198.19.0.1:5201 mark=0 data_len=0 "
            "snd_nxt=0x1 snd_una=0x1 snd_cwnd=10 ssthresh=20 snd_wnd=65160 srtt=20520 rcv_wnd=65536 sock_cookie=1")


def test_common_gaps_overflow_episodes_and_their_flows():
    """Two senders' ACKs every 0.5 ms, interleaved (common gaps of 0.25 ms),
    except one 4 ms silence of both at 12 s, and a 3 ms silence of one flow
    only at 14 s, which the other's ACKs fill. Two overflow episodes: one
    whose drops are followed by retransmissions of both flows, one of one."""
    lines = []
    for i in range(40_000):  # 10 s .. 30 s
        t = 10.0 + i * 0.0005
        if 12.0 < t < 12.004:
            continue
        lines.append(probe(t, 40000))
        if not 14.0 < t < 14.003:
            lines.append(probe(t + 0.00025, 40001))
    lines += [f"{t:.9f}:           skb:kfree_skb: skbaddr=0x1 rx_sk=0x0 protocol=2048 location=x reason: QDISC_DROP" for t in (20.0, 20.004, 25.0)]
    lines += [f"{t:.9f}: tcp:tcp_retransmit_skb: skbaddr=0x1 skaddr=0x1 family=AF_INET sport={p} dport=5201" for t, p in
              ((20.03, 40000), (20.031, 40001), (25.03, 40000))]
    out = kag.analyse("\n".join(sorted(lines, key=lambda x: float(x.split(":")[0]))), warmup_s=1.0)
    over = out["common_gaps"]["over_2ms"]
    assert over["longest_ms"] == pytest.approx(4.0, abs=0.3)  # only the silence of both
    assert out["common_gaps"]["over_1ms"]["per_second"] == pytest.approx(1 / 19, rel=0.05)
    assert out["per_flow_ack_gap_us"]["40000"]["p50"] == 500
    assert out["overflow_episodes"] == {"count": 2, "taking_both_flows": 1, "drops_per_episode": 1.5}
