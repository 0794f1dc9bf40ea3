"""tools/kernel_host_timing.py's analysis of captures, on synthetic pcaps:
the ACK clock's noise that `network.delay_noise` is fitted to."""

import importlib.util
import struct
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("kernel_host_timing", ROOT / "tools" / "kernel_host_timing.py")
kht = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(kht)

SENDER, RECEIVER = bytes([198, 18, 0, 2]), bytes([198, 19, 0, 2])
PORT, SERVER = 40000, 5201


def frame(src, dst, sport, dport, seq, ack, payload, sacks=()):
    """An Ethernet/IPv4/TCP frame's first 96 bytes and its length on the wire."""
    opts = b""
    if sacks:
        opts = b"\x01\x01" + bytes([5, 2 + 8 * len(sacks)]) + b"".join(struct.pack(">II", a, b) for a, b in sacks)
    opts += b"\x00" * (-len(opts) % 4)
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, ack, (5 + len(opts) // 4) << 4, 0x10, 65535, 0, 0) + opts
    total = 20 + len(tcp) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, total, 0, 0, 64, 6, 0, src, dst)
    return (b"\x00" * 12 + b"\x08\x00" + ip + tcp)[:96], 14 + total


def write_pcap(path, records):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 96, 1))
        for t, (data, length) in sorted(records, key=lambda r: r[0]):
            f.write(struct.pack("<IIII", t // 1_000_000_000, t % 1_000_000_000, len(data), length))
            f.write(data)


def test_sack_blocks_right_edges():
    data, _ = frame(RECEIVER, SENDER, SERVER, PORT, 1, 1000, 0, sacks=[(3000, 4000), (5000, 6000)])
    assert kht.sack_right_edges(data[14:]) == [4000, 6000]
    plain, _ = frame(RECEIVER, SENDER, SERVER, PORT, 1, 1000, 0)
    assert kht.sack_right_edges(plain[14:]) == []
    # A D-SACK block lies below the cumulative ACK, also across the wrap.
    assert kht.seq_offset(900, 1000) == -100 and kht.seq_offset(5, 0xFFFFFFF0) == 21
    assert max([1000, 900], key=lambda x: kht.seq_offset(x, 1000)) == 1000


def test_return_path_noise_measures_the_ack_clock_above_its_fastest(tmp_path):
    """2,000 skbs of 10 segments, 1 ms apart; each one's ACK comes back 20 ms
    plus a known lateness later and the sender's next skb 10 us after it.
    Skb 1,500 is lost: the skbs behind it are covered by SACK at once, not
    by the cumulative ACK that comes 30 ms later (the retransmission's)."""
    mss, segs = 1448, 10
    btl, towards = [], []
    lateness = [(i * 37) % 200 * 1000 for i in range(2000)]  # 0-199 us
    lost = 1500
    for i in range(2000):
        t = 1_000_000_000 + i * 1_000_000
        start, end = 1 + i * segs * mss, 1 + (i + 1) * segs * mss
        if i != lost:
            btl.append((t, frame(SENDER, RECEIVER, PORT, SERVER, start, 1, segs * mss)))
        back = t + 20_000_000 + lateness[i]
        if lost <= i < lost + 30:
            hole = (1 + lost * segs * mss, 1 + (lost + 1) * segs * mss)
            ack = frame(RECEIVER, SENDER, SERVER, PORT, 1, hole[0], 0, sacks=[(hole[1], end)] if i > lost else [])
        else:
            ack = frame(RECEIVER, SENDER, SERVER, PORT, 1, end, 0)
        if i != lost:
            btl.append((back, ack))
        towards.append((back + 10_000, frame(SENDER, RECEIVER, PORT, SERVER, end, 1, segs * mss)))
    write_pcap(tmp_path / "btl.pcap", btl)
    write_pcap(tmp_path / "s0.pcap", towards)
    out = kht.return_path_noise(tmp_path / "btl.pcap", [tmp_path / "s0.pcap"])
    flow = out["flow0"]
    assert flow["skbs"] == 1800  # the last 90 % of the 1,999 departed skbs
    back, loop = flow["return"], flow["loop"]
    assert back["floor_us"] == pytest.approx(20_000, abs=1)
    assert loop["floor_us"] == pytest.approx(20_010, abs=1)
    # The lateness is uniform over 0-199 us: no skb waits for the lost one's retransmission.
    assert back["p50"] == pytest.approx(100, abs=5) and back["p99.9"] < 200
    assert loop["p50"] == pytest.approx(back["p50"], abs=1)


def test_the_receivers_hold_is_taken_out_of_the_return_path_and_written_as_a_distribution(tmp_path):
    """1,000 skbs 1 ms apart; each reaches the receiver 1 ms after the
    bottleneck, which acknowledges it after a known hold (0-99 us), and the
    ACK reaches the router 20 ms plus the hold plus a path lateness (0, 100,
    200 or 300 us) after the skb left. Without the receiver's part the
    noise is the path's alone."""
    mss, segs = 1448, 10
    btl, rcv, towards = [], [], []
    for i in range(1000):
        t = 1_000_000_000 + i * 1_000_000
        start, end = 1 + i * segs * mss, 1 + (i + 1) * segs * mss
        hold, path = (i * 7) % 100 * 1000, (i % 4) * 100_000
        btl.append((t, frame(SENDER, RECEIVER, PORT, SERVER, start, 1, segs * mss)))
        rcv.append((t + 1_000_000, frame(SENDER, RECEIVER, PORT, SERVER, start, 1, segs * mss)))
        rcv.append((t + 1_000_000 + hold, frame(RECEIVER, SENDER, SERVER, PORT, 1, end, 0)))
        btl.append((t + 20_000_000 + hold + path, frame(RECEIVER, SENDER, SERVER, PORT, 1, end, 0)))
        towards.append((t + 20_010_000 + hold + path, frame(SENDER, RECEIVER, PORT, SERVER, end, 1, segs * mss)))
    for name, records in (("btl", btl), ("r0", rcv), ("s0", towards)):
        write_pcap(tmp_path / f"{name}.pcap", records)
    flow = kht.return_path_noise(tmp_path / "btl.pcap", [tmp_path / "s0.pcap"], tmp_path / "r0.pcap")["flow0"]
    less = flow["return_less_receiver"]
    assert less["floor_us"] == pytest.approx(20_000, abs=1)
    assert less["p10"] == pytest.approx(0, abs=1) and less["p50"] == pytest.approx(200, abs=1) and less["p99.9"] <= 300.5
    assert flow["return"]["p50"] > less["p50"]  # the hold's part is in the whole return
    # The whole loop (to the sender's next skb, 10 us after the ACK) less the hold: the same plus 10 us.
    loop_less = flow["loop_less_receiver"]
    assert loop_less["floor_us"] == pytest.approx(20_010, abs=1)
    assert loop_less["p50"] == pytest.approx(200, abs=1) and loop_less["p99.9"] <= 300.5
    assert flow["loop_less_receiver_as_distribution"]["values"][-1] == "300.0us"
    dist = flow["return_less_receiver_as_distribution"]
    assert dist["distribution"] == "empirical" and dist["probabilities"][0] == 0 and dist["probabilities"][-1] == 1
    assert dist["values"][0] == "0.0us" and dist["values"][-1] == "300.0us"
    # A scenario takes it as it is.
    from ccarena.scenario import Scenario  # the package is needed only here

    s = Scenario.from_dict({"name": "t", "network": {"bottleneck_rate": "100Mbps", "buffer": "100kB", "delay_noise": dist},
                            "flows": [{"cca": "cubic", "rtt": "20ms"}], "run": {"duration": "1s"}})
    assert s.engine["network"]["delay_noise"]["values"][-1] == 300_000.0


def test_router_stalls_finds_tbf_holding_a_waiting_packet_and_counts_what_overflows_take(tmp_path):
    """1,000 skbs of 10 segments, two flows taking turns, tbf releasing them
    back to back at 400 Mbit/s from a queue they reached 2 ms earlier.
    Skb 600 leaves 1 ms late (a stall); skb 800 reaches the router only as
    the one before it leaves, and its late departure is not a stall. Three
    skbs never leave: two of both flows 1 ms apart (one overflow), then one
    alone."""
    mss, segs, rate = 1448, 10, 400_000_000
    size = segs * (mss + kht.FRAME_OVERHEAD)
    service = size * 8 * 1_000_000_000 // rate
    senders = [bytes([198, 18, 0, 2]), bytes([198, 18, 1, 2])]
    receivers = [bytes([198, 19, 0, 2]), bytes([198, 19, 1, 2])]
    btl, towards = [], [[], []]
    seq = [1, 1]

    def skb(flow):
        data = frame(senders[flow], receivers[flow], PORT + flow, SERVER, seq[flow], 1, segs * mss)
        seq[flow] += segs * mss
        return data

    t = 1_000_000_000
    for i in range(1000):
        flow = i % 2
        t += service + (1_000_000 if i == 600 else 0) + (3_000_000 if i == 800 else 0)
        data = skb(flow)
        btl.append((t, data))
        towards[flow].append((t - (10_000 if i == 800 else 2_000_000), data))
        if i in (700, 850):
            towards[0].append((t + 1, skb(0)))
        if i == 702:
            towards[1].append((t + 1, skb(1)))
    write_pcap(tmp_path / "btl.pcap", btl)
    for flow in (0, 1):
        write_pcap(tmp_path / f"s{flow}.pcap", towards[flow])
    out = kht.router_stalls(tmp_path / "btl.pcap", [tmp_path / "s0.pcap", tmp_path / "s1.pcap"], rate)
    assert out["duration_us"]["n"] == 1
    assert out["duration_us"]["p50"] == pytest.approx(1000, abs=1)
    assert out["per_second"] == pytest.approx(1 / out["observed_s"], rel=0.01)
    assert out["per_second_above_us"]["500"] == out["per_second"] and out["per_second_above_us"]["1000"] == 0
    overflows = out["overflows"]
    assert {k: overflows[k] for k in ("count", "skbs_each", "share_hitting_several_flows")} == {"count": 2, "skbs_each": 1.5, "share_hitting_several_flows": 0.5}
    # The three skbs dropped whole, 10 segments each; the first overflow
    # split evenly between the flows, the second all one flow's.
    assert overflows["dropped_skb_segments"]["n"] == 3 and overflows["dropped_skb_segments"]["p50"] == 10
    assert overflows["dropped_single_segments"] == 0.0
    shares = overflows["larger_loser_share_of_skbs"]
    assert shares["n"] == 2 and shares["mean"] == pytest.approx(0.75)
    # Without the stall, nothing is found.
    write_pcap(tmp_path / "btl.pcap", [(t - (1_000_000 if i >= 600 else 0), d) for i, (t, d) in enumerate(btl)])
    assert kht.router_stalls(tmp_path / "btl.pcap", [tmp_path / "s0.pcap", tmp_path / "s1.pcap"], rate)["duration_us"] == {"n": 0}


def test_socket_stats_read_ss_and_say_when_the_window_cap_leaves_room():
    # Two sockets as `ss -tmiHn` prints them (line, then details); the one
    # with the larger rcv_space is the data connection.
    text = ("0      0      198.19.0.2:5201 198.18.0.2:40000\n"
            "\t skmem:(r0,rb131072,t0,tb87040,f0,w0,o0,bl0,d0) cubic rcv_space:14480 rcv_ssthresh:64088\n"
            "4344   0      198.19.0.2:5201 198.18.0.2:40002\n"
            "\t skmem:(r9216,rb6291456,t0,tb87040,f0,w0,o0,bl0,d0) cubic rcv_rtt:20 rcv_space:2000000 rcv_ssthresh:1000000\n")
    samples = kht.parse_ss(text)
    assert samples[1] == {"rcv_ssthresh": 1_000_000, "rcv_space": 2_000_000, "rmem_alloc": 9216, "rcvbuf": 6_291_456, "recv_q": 4344}
    # The cap as a share of the buffer: 1.0 MB and 3.2 MB of 6.29 MB.
    summary = kht.socket_summary([samples[1], {**samples[1], "rcv_ssthresh": 3_200_000}])
    assert summary["samples"] == 2
    share = summary["cap_percent_of_buffer"]
    assert (share["p10"], share["p99"]) == (15.89, 50.86), share
    assert summary["rcv_ssthresh"]["p10"] < summary["rcv_ssthresh"]["p99"]


def test_departure_stalls_count_late_releases_and_refuse_an_incomplete_trace():
    rate = 400_000_000
    size_bytes = 17_442  # twelve segments on the wire: len as the tracepoint gives it
    tbf_bytes = 12 * (1448 + kht.FRAME_OVERHEAD)
    gap = round(tbf_bytes * 8e9 / rate)
    times, t = [], 0
    for i in range(40_000):
        t += gap + (300_000 if i % 1000 == 999 else 0)  # one 300 us stall every 1000 skbs
        times.append(t)
    line = "  iperf3-1234  [001] ..s2. {t}: net_dev_start_xmit: dev={dev} queue_mapping=0 skbaddr=0x1 len={length} data_len=0"
    script = "\n".join(line.format(t=f"{ns / 1e9:.9f}", dev="btl", length=size_bytes) for ns in times)
    script += "\n" + line.format(t="1.0", dev="eth0", length=17442)
    script += "\n" + line.format(t="1.0", dev="btl", length=66)
    departures = kht.traced_departures(script)
    assert len(departures) == len(times) and departures[0] == (times[0], tbf_bytes)
    out = kht.departure_stalls(departures, rate)
    assert out["complete"] and out["traced_share_of_rate"] == pytest.approx(1.0, abs=0.03)
    assert out["duration_us"]["p50"] == pytest.approx(300, abs=1)
    assert out["per_second"] == pytest.approx(1e9 / (1000 * gap + 300_000), rel=0.05)
    # Every other departure lost: half the rate, and reported as incomplete.
    half = kht.departure_stalls(departures[::2], rate)
    assert not half["complete"] and half["traced_share_of_rate"] == pytest.approx(0.5, abs=0.03)


def test_application_reads_counts_reads_and_the_wait_from_arrival(tmp_path):
    """Segments arrive 30 us apart for 3 s; the application reads every second
    one 10 us after it arrives, and each read sends the ACK: half a read and
    half an ACK per segment, two segments per read, 40 us from the first
    arrival a read takes to the read."""
    records, script = [], ["  77 0.000001000: tcp:tcp_rcv_space_adjust: family=AF_INET sport=5201 dport=40000 saddr=x"]
    t0 = 1_000_000_000
    for i in range(100_000):
        t = t0 + i * 30_000
        records.append((t, frame(SENDER, RECEIVER, PORT, SERVER, 1 + i * 1448, 1, 1448)))
        if i % 2:
            read = t + 10_000
            records.append((read - 1_000, frame(RECEIVER, SENDER, SERVER, PORT, 1, 1 + (i + 1) * 1448, 0)))
            script.append(f"  77 {read // 1_000_000_000}.{read % 1_000_000_000:09d}: sock:sock_recv_length: "
                          "sk address = 0xffff1, family = AF_INET, protocol = IPPROTO_TCP, length = 2896, flags = 0x0")
    write_pcap(tmp_path / "r0.pcap", records)
    reads = kht.application_reads(tmp_path / "r0.pcap", "\n".join(script), 0, SERVER)
    assert reads["reads_per_data_segment"] == pytest.approx(0.5, abs=0.001)
    assert reads["acks_per_data_segment"] == pytest.approx(0.5, abs=0.001)
    assert reads["segments_per_read"]["p50"] == 2
    assert reads["arrival_to_read_us"]["p50"] == pytest.approx(40.0, abs=0.5)
    assert reads["ack_to_next_read_us"]["p50"] == pytest.approx(1.0, abs=0.2)
