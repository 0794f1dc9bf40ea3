"""Measure how this machine's kernel hosts time and batch TCP packets.

Runs a scenario on the linux backend while tcpdump captures the first flow's
sender (s0) and receiver (r0) interfaces with nanosecond timestamps, then
reports what the host model of the simulator is built from:

* receiver: data packets per received skb (GRO coalescing as the stack saw
  it), ACKs per data segment, the turnaround from a data packet's arrival
  to the ACK it triggered (the receive path's latency, for ACKs sent within
  1 ms, i.e. not by the delayed-ACK timer), and how many data packets each
  ACK answered;
* sender: segments per transmitted skb (TSO/GSO super-packets), ACK
  inter-arrival times, the turnaround from an ACK's arrival to the first
  data packet it released, and the share of skbs no ACK released;
* bottleneck (a capture of the left router's egress, after tbf): how late
  tbf releases each skb against the line its tokens allow (its watchdog
  timer's lateness; meaningful while the queue stays backlogged, as it
  does at 400 Mbit/s with a 10 ms buffer, not where it empties and the
  bucket refills), each flow's skb sizes there, and how clumped the flows'
  skbs are (mean run of one flow's consecutive skbs, against the run the
  same counts interleaved at random would give);
* the router's stalls (the same captures): when tbf released nothing
  although a packet was waiting for it and its tokens (how often, how
  long), and how many skbs of how many flows each overflow of its queue
  took (the skbs dropped whole, their sizes, and the share of each
  overflow's the flow that lost more took); what `network.router_stalls`
  is fitted to;
* with `--reads`, the receiving application's reads (perf's tracepoints
  `sock:sock_recv_length` and `tcp:tcp_rcv_space_adjust` of the first
  flow's iperf3 server, aligned with the receiver's capture): reads per data
  segment, the bytes each read returned (and how many came in reads of
  iperf3's whole block, and how soon such a read is followed by the next:
  what `hosts.read_size` and `hosts.read_again_wait` are fitted to),
  segments per read, how long data waits between reaching the
  receiver and the read that takes it, and how soon after each ACK a read
  returns, against arbitrary instants (with the window test of `__tcp_ack_snd_check`, a Linux
  receiver whose window has grown acknowledges in-order data when the
  application reads it, in `tcp_cleanup_rbuf`);
* the ACK clock's noise (the left router's captures of its bottleneck
  interface and of its interfaces towards the senders): per flow, how much
  later than its fastest an skb's ACK comes back (`return`) and the
  sender's next skb reaches the router (`loop`), the data that the
  simulator's `network.delay_noise` is fitted to.

* with `--trace-departures` (and `--captures none` for no tcpdump at
  all), tbf's stalls from its departures alone, recorded from one
  tracepoint in a tracefs instance: far lighter than the captures;
  valid while the queue stays backlogged, and only when the traced
  departures add up to the rate (`complete`).

* with `--tbf-burst SIZE`, another bucket for the bottleneck's tbf than
  the linux backend's default (1 ms at the rate): skbs larger than it are
  split into segments (`tbf_segment`) and cross the rest of the path one
  by one, which loads this machine's receive path (docs/fidelity.md, "The
  machine's stalls are mostly its own packet load").

* with `--socket-stats`, the first flow's receiving socket as `ss -tmi`
  reports it every 20 ms after the warm-up: its receive slow-start
  threshold (`rcv_ssthresh`, the cap on the window it advertises), the
  receive buffer (`rb`) and the memory its queued data takes (`r`), and
  `rcv_space`; whether unread data shrinks the advertised window, and so
  whether an ACK waits for the application's read, depends on the room
  between them (`__tcp_select_window`).

The holds and the noise are also given as `*_as_distribution`: `empirical`
distributions of the measured percentiles that a scenario takes as they
are (`hosts.rx_hold`, `network.delay_noise`; docs/scenario.md).

Usage (root; tcpdump installed; perf too for ``--reads``)::

    python tools/kernel_host_timing.py --rate 400Mbps --rtt 10ms --offloads on --seconds 10

Every capture loads the machine, and a loaded receiver reads later:
``--captures receiver`` captures the first flow's receiver alone (its
batches, holds and ACKs, what `hosts.read_wait` is fitted to) and skips
the router's figures.

Prints a JSON summary (percentiles in microseconds). The numbers and the
command lines that produced them are recorded in docs/fidelity.md.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import itertools
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path

MSS = 1448


def read_pcap(path: Path) -> list[tuple[int, bytes]]:
    """(timestamp ns, frame) of every record of a classic pcap file."""
    data = path.read_bytes()
    if len(data) < 24:
        return []
    magic = struct.unpack("<I", data[:4])[0]
    nano = magic == 0xA1B23C4D
    out = []
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack("<IIII", data[off : off + 16])
        off += 16
        frame = data[off : off + incl]
        off += incl
        out.append((sec * 1_000_000_000 + (frac if nano else frac * 1000), frame))
    return out


def tcp_fields(frame: bytes):
    """(src ip, payload bytes, seq, ack) of an Ethernet/IPv4/TCP frame, or None."""
    if len(frame) < 14 + 20 or frame[12:14] != b"\x08\x00":
        return None
    ip = frame[14:]
    ihl = (ip[0] & 0x0F) * 4
    if ip[9] != 6:
        return None
    total = struct.unpack(">H", ip[2:4])[0]
    tcp = ip[ihl:]
    if len(tcp) < 20:
        return None
    doff = (tcp[12] >> 4) * 4
    seq, ack = struct.unpack(">II", tcp[4:12])
    dport = struct.unpack(">H", tcp[2:4])[0]
    sport = struct.unpack(">H", tcp[0:2])[0]
    return ip[12:16], total - ihl - doff, seq, ack, sport, dport


def to_receiver(frame: bytes, fields: tuple | None) -> bool:
    """A data packet towards a receiver (198.19.0.0/16), not one of iperf3's
    short control messages."""
    return fields is not None and fields[1] >= 1000 and frame[14 + 16] == 198 and frame[14 + 17] == 19


def percentiles(xs: list[float], quantiles: tuple[float, ...] = (10, 25, 50, 75, 90, 99)) -> dict:
    """Count, the given percentiles (named p10, p99.9, ...) and mean of xs."""
    if not xs:
        return {"n": 0}
    s = sorted(xs)
    picked = {f"p{q:g}": round(s[min(len(s) - 1, int(q / 100 * len(s)))], 2) for q in quantiles}
    return {"n": len(s), **picked, "mean": round(sum(s) / len(s), 2)}


#: Cumulative probabilities at which `as_distribution` writes a measurement.
EMPIRICAL_POINTS = (0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.97, 0.99, 0.999, 0.9995, 0.9999, 1)


def as_distribution(us: list[float]) -> dict | None:
    """Samples in microseconds as a scenario's `empirical` distribution (the
    smallest, the percentiles of EMPIRICAL_POINTS, the largest), ready to
    paste into `hosts.rx_hold` or `network.delay_noise` (docs/scenario.md)."""
    if len(us) < 2:
        return None
    s = sorted(us)
    values = [s[min(len(s) - 1, round(p * (len(s) - 1)))] for p in EMPIRICAL_POINTS]
    return {"distribution": "empirical", "values": [f"{max(v, 0.0):.1f}us" for v in values], "probabilities": list(EMPIRICAL_POINTS)}


def analyse(sender: Path | None, receiver: Path, data_port: int) -> dict:
    out: dict = {}
    # Receiver: data in (dport = server port), ACKs out.
    rx = [(t, f) for t, fr in read_pcap(receiver) if (f := tcp_fields(fr))]
    data_in = [(t, f) for t, f in rx if f[5] == data_port and f[1] > 0]
    acks_out = [(t, f) for t, f in rx if f[4] == data_port and f[1] == 0]
    segs = [segments(f[1]) for _, f in data_in]
    out["receiver_segments_per_skb"] = percentiles(segs)
    total_segs = sum(segs)
    out["acks_per_data_segment"] = round(len(acks_out) / total_segs, 4) if total_segs else None
    # For each ACK: time since the last data packet (the processing latency)
    # and since the first data packet after the previous ACK (how long the
    # receiver held a batch before acknowledging it).
    turn, hold, per_ack = [], [], []
    first_data = last_data = None
    packets = 0
    events = sorted([(t, 0) for t, _ in data_in] + [(t, 1) for t, _ in acks_out])
    for t, kind in events:
        if kind == 0:
            first_data = first_data if first_data is not None else t
            last_data = t
            packets += 1
        elif last_data is not None:
            if t - last_data < 1_000_000:
                turn.append((t - last_data) / 1000)
                hold.append((t - first_data) / 1000)
                per_ack.append(packets)
            first_data = last_data = None
            packets = 0
    out["receiver_batch_hold_us"] = percentiles(hold)
    out["receiver_batch_hold_as_distribution"] = as_distribution(hold)
    out["receiver_data_to_ack_us"] = percentiles(turn)
    # Data packets (skbs as the receiver's interface saw them) each ACK
    # answered: above 1 where the receiver acknowledged several at once.
    out["receiver_packets_per_ack"] = percentiles(per_ack)
    out["receiver_acks_answering_several_packets"] = round(sum(1 for n in per_ack if n > 1) / len(per_ack), 4) if per_ack else None
    if sender is None:
        return out
    # Sender: data out, ACKs in.
    sx = [(t, f) for t, fr in read_pcap(sender) if (f := tcp_fields(fr))]
    data_out = [(t, f) for t, f in sx if f[5] == data_port and f[1] > 0]
    acks_in = [(t, f) for t, f in sx if f[4] == data_port and f[1] == 0]
    out["sender_segments_per_skb"] = percentiles([segments(f[1]) for _, f in data_out])
    gaps = [(b[0] - a[0]) / 1000 for a, b in zip(acks_in, acks_in[1:])]
    out["ack_interarrival_us"] = percentiles(gaps)
    # For each data skb sent: time since the latest ACK arrival (< 1 ms).
    turn = []
    last_ack = None
    for t, kind in sorted([(t, 0) for t, _ in acks_in] + [(t, 1) for t, _ in data_out]):
        if kind == 0:
            last_ack = t
        elif last_ack is not None and t - last_ack < 1_000_000:
            turn.append((t - last_ack) / 1000)
    out["sender_ack_to_data_us"] = percentiles(turn)
    # Skbs that no ACK of the last 50 us released (sent by the application's
    # write, a TSQ completion or a timer rather than by the ACK clock).
    out["sender_skbs_not_ack_clocked"] = round(sum(1 for x in turn if x > 50) / len(turn), 4) if turn else None
    # ACKs acknowledging how many segments each (stretch ACKs at the sender).
    acked = []
    prev = None
    for _, f in acks_in:
        if prev is not None and f[3] != prev:
            acked.append(((f[3] - prev) & 0xFFFFFFFF) / MSS)
        prev = f[3]
    out["segments_per_ack"] = percentiles(acked)
    return out


#: Headers per segment as tbf counts an skb (qdisc_pkt_len: Ethernet + IPv4
#: + TCP with timestamps for every segment of a GSO skb).
FRAME_OVERHEAD = 14 + 20 + 32


def analyse_bottleneck(path: Path, tbf_rate_bps: int, window: int = 50) -> dict:
    """tbf's releases as its egress saw them (data towards the receivers)."""
    rows = []
    for t, fr in read_pcap(path):
        f = tcp_fields(fr)
        if to_receiver(fr, f):
            rows.append((t, (fr[14 + 18], f[4]), segments(f[1]), tbf_bytes(f[1])))
    rows = rows[len(rows) // 10 :]  # past slow start
    out: dict = {"skbs": len(rows)}
    if len(rows) < 2 * window + 1:
        return out
    # Against the line the tokens allow: skb i leaves once the tokens for it
    # and every skb before it have come, t_i - (bytes up to i) / rate, less
    # that line's minimum over the nearby skbs (the queue stays backlogged).
    byte_ns = 8e9 / tbf_rate_bps
    cum = 0.0
    x = []
    for t, _, _, length in rows:
        cum += length
        x.append(t - cum * byte_ns)
    late = [(x[i] - min(x[max(0, i - window) : i + window + 1])) / 1000 for i in range(len(x))]
    out["release_lateness_us"] = percentiles(late)
    flows = sorted({k for _, k, _, _ in rows})
    out["segments_per_skb"] = {f"flow{j}": percentiles([s for _, k, s, _ in rows if k == key]) for j, key in enumerate(flows)}
    runs: dict = {key: [] for key in flows}
    for key, group in itertools.groupby(k for _, k, _, _ in rows):
        runs[key].append(sum(1 for _ in group))
    counts = collections.Counter(k for _, k, _, _ in rows)
    out["same_flow_run"] = {
        f"flow{j}": {"mean": round(sum(runs[key]) / len(runs[key]), 2), "random": round(1 / (1 - counts[key] / len(rows)), 2)}
        for j, key in enumerate(flows)
    }
    return out


def receiver_holds(receiver: Path) -> tuple[int, list[tuple[int, int, int]]]:
    """The first flow's receiver from its own capture: its sender's port and,
    for each data packet, (end sequence unwrapped, arrival, departure of the
    first ACK covering its last byte, cumulatively or by SACK)."""
    data, acks = [], []
    for t, fr in read_pcap(receiver):
        f = tcp_fields(fr)
        if not f:
            continue
        if to_receiver(fr, f):
            data.append((t, f[4], f[2] + f[1]))
        elif f[1] == 0 and f[4] == 5201:
            ip = fr[14:]
            acks.append((t, max([f[3], *sack_right_edges(ip)], key=lambda x: seq_offset(x, f[3]))))
    if not data:
        return 0, []
    port = collections.Counter(p for _, p, _ in data).most_common(1)[0][0]
    data = [(t, e) for t, p, e in data if p == port]
    ends = unwrap([e for _, e in data])
    ack_times = [t for t, _ in acks]
    covered = list(itertools.accumulate(unwrap([a for _, a in acks]), max)) if acks else []
    rows = []
    for (t, _), end in zip(data, ends):
        i = bisect.bisect_left(covered, end)
        while i < len(covered) and ack_times[i] < t:
            i += 1
        if i < len(covered):
            rows.append((end, t, ack_times[i]))
    return port, rows


def return_path_noise(btl: Path, arrivals: list[Path], receiver: Path | None = None) -> dict:
    """How much later than its fastest each flow's ACK clock turns, per flow.

    From the left router's captures: of its bottleneck interface, which sees
    each data skb leave tbf and, a round trip later, the ACKs come in, and of
    its interfaces towards the senders, which see their next skbs arrive.
    For every skb, `return`: the time from its departure to the first ACK
    covering its last byte (cumulatively or in a SACK block, so that skbs
    behind a loss do not wait for its retransmission); `loop`: to the
    sender's next skb after that ACK reaching the router. Each less that
    flow's 0.1st percentile (the fixed part: propagation, the delay
    program's hold, serialisation). What is left is the timing noise of the
    right router, the receiver's stack and application reads, the delay
    program, the sender's turnaround and the CPUs' scheduling: what the
    simulator's `network.delay_noise` stands for (docs/fidelity.md).

    With the first flow's receiver capture, also `return_less_receiver`: the
    same less the time the receiver held the skb's last segment before an
    ACK covering it left (arrival to ACK at the receiver: its read), i.e. the
    return path's noise without the receiver's part, for a simulator whose
    receivers hold data themselves (`hosts.rx_batching`), and
    `loop_less_receiver`, the whole loop less the same hold: what
    `network.delay_noise` stands for beside such receivers."""
    held: dict[int, int] = {}
    port = None
    if receiver is not None:
        port, rows = receiver_holds(receiver)
        held = {end & 0xFFFFFFFF: ack - arrival for end, arrival, ack in rows}
    data: dict = collections.defaultdict(list)
    acks: dict = collections.defaultdict(list)
    for t, fr in read_pcap(btl):
        f = tcp_fields(fr)
        if not f:
            continue
        ip = fr[14:]
        if to_receiver(fr, f):
            data[(ip[18], f[4])].append((t, f[2] + f[1]))
        elif f[1] == 0 and ip[12] == 198 and ip[13] == 19:
            acks[(ip[14], f[5])].append((t, max([f[3], *sack_right_edges(ip)], key=lambda x: seq_offset(x, f[3]))))
    arriving: dict = collections.defaultdict(list)
    for path in arrivals:
        for t, fr in read_pcap(path):
            f = tcp_fields(fr)
            if to_receiver(fr, f):
                arriving[(fr[14 + 18], f[4])].append(t)
    out: dict = {}
    for j, key in enumerate(sorted(k for k in data if len(data[k]) > 100 and acks.get(k))):
        ack_times = [t for t, _ in acks[key]]
        covered = list(itertools.accumulate(unwrap([a for _, a in acks[key]]), max))
        skbs = list(zip((t for t, _ in data[key]), unwrap([e for _, e in data[key]])))
        skbs = skbs[len(skbs) // 10 :]  # past slow start
        nexts = sorted(arriving.get(key, []))
        back, loop, less, loop_less = [], [], [], []
        own = key[0] == 0 and key[1] == port
        for t, end in skbs:
            i = bisect.bisect_left(covered, end)
            if i < len(covered) and ack_times[i] > t:
                back.append(ack_times[i] - t)
                h = held.get(end & 0xFFFFFFFF) if own else None
                if h is not None:
                    less.append(ack_times[i] - t - h)
                n = bisect.bisect_right(nexts, ack_times[i])
                if n < len(nexts):
                    loop.append(nexts[n] - t)
                    if h is not None:
                        loop_less.append(nexts[n] - t - h)
        out[f"flow{j}"] = {"skbs": len(back), "return": noise_percentiles(back), "loop": noise_percentiles(loop),
                           "loop_as_distribution": as_distribution(above_floor(loop))}
        if less:
            out[f"flow{j}"]["return_less_receiver"] = noise_percentiles(less)
            out[f"flow{j}"]["return_less_receiver_as_distribution"] = as_distribution(above_floor(less))
        if loop_less:
            out[f"flow{j}"]["loop_less_receiver"] = noise_percentiles(loop_less)
            out[f"flow{j}"]["loop_less_receiver_as_distribution"] = as_distribution(above_floor(loop_less))
    return out


def tcp_options(ip: bytes):
    """(kind, data) of each option of an IPv4/TCP packet (the capture's 96
    bytes hold every option)."""
    ihl = (ip[0] & 0x0F) * 4
    tcp = ip[ihl:]
    opts = tcp[20 : (tcp[12] >> 4) * 4]
    i = 0
    while i < len(opts):
        kind = opts[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(opts) or opts[i + 1] < 2:
            break
        yield kind, opts[i + 2 : i + opts[i + 1]]
        i += opts[i + 1]


def tcp_tsval(ip: bytes) -> int | None:
    """The TCP timestamp option's TSval of an IPv4/TCP packet, if it has one."""
    return next((struct.unpack(">I", data[:4])[0] for kind, data in tcp_options(ip) if kind == 8 and len(data) >= 4), None)


def segments(payload: int) -> int:
    """The MSS-sized segments a (GSO) packet of `payload` bytes stands for."""
    return max(1, round(payload / MSS))


def tbf_bytes(payload: int) -> int:
    """A (GSO) packet's bytes as tbf counts them: every segment's frame headers."""
    return payload + segments(payload) * FRAME_OVERHEAD


def data_packets(path: Path) -> list[tuple[int, tuple, int, int, int]]:
    """(time, flow, seq, bytes as tbf counts them, segments) of the data
    packets towards the receivers in a capture; the flow is (receiver
    address, sender port) and a packet is told from its retransmissions by
    its TSval."""
    rows = []
    for t, fr in read_pcap(path):
        f = tcp_fields(fr)
        if to_receiver(fr, f):
            ip = fr[14:]
            rows.append((t, (bytes(ip[16:20]), f[4]), (f[2], tcp_tsval(ip)), tbf_bytes(f[1]), segments(f[1])))
    return rows


def router_stalls(btl: Path, arrivals: list[Path], tbf_rate_bps: int, min_stall_us: float = 100.0,
                  overflow_gap_s: float = 0.03) -> dict:
    """When the left router's tbf released nothing though a packet was
    waiting, and what the queue's overflows took.

    From its captures of the bottleneck interface (tbf's departures) and of
    the interfaces towards the senders (the skbs reaching the queue): an
    arriving skb that never departs was dropped; one that departs was
    queued until then. A stall is a departure that came later than the
    packet's own transmission time at the rate after the previous one,
    although it was already queued when the previous one left (so tbf's
    tokens were spent and nothing else held it): the excess, if above
    `min_stall_us`. An overflow is a run of drops less than
    `overflow_gap_s` apart: how many skbs it took, and whether it took some
    of more than one flow. The first tenth of the capture (slow start) is
    left out, and for overflows the last tenth too (the senders' last
    writes). What `network.router_stalls` is fitted to."""
    departures = data_packets(btl)
    arriving = sorted(row for path in arrivals for row in data_packets(path))
    if not departures or not arriving:
        return {}
    departed: dict = {}
    for t, flow, key, _, _ in departures:
        departed.setdefault((flow, key), t)
    start = min(departures[0][0], arriving[0][0])
    span = max(departures[-1][0], arriving[-1][0]) - start
    skip, end = start + span // 10, start + span - span // 10
    # The queue's backlog (bytes) over time, from each admitted skb's arrival
    # and departure.
    changes, drops, dropped_segments = [], [], []
    for t, flow, key, size, segs in arriving:
        left = departed.get((flow, key))
        if left is None:
            if skip <= t < end:
                drops.append((t, flow))
                dropped_segments.append(segs)
            continue
        changes += [(t, size), (max(t, left), -size)]
    changes.sort()
    times = [t for t, _ in changes]
    backlog = list(itertools.accumulate(d for _, d in changes))
    byte_ns = 8e9 / tbf_rate_bps
    stalls, observed_ns, prev = [], 0, None
    for t, _, _, size, _ in departures:
        if prev is not None and t >= skip:
            i = bisect.bisect_right(times, prev) - 1
            if i >= 0 and backlog[i] >= size:
                gap = t - prev
                observed_ns += gap
                excess_us = (gap - size * byte_ns) / 1000
                if excess_us > min_stall_us:
                    stalls.append((t, excess_us))
        prev = t
    out: dict = {"observed_s": round(observed_ns / 1e9, 3)}
    if observed_ns:
        seconds = observed_ns / 1e9
        durations = [d for _, d in stalls]
        out["per_second"] = round(len(stalls) / seconds, 2)
        out["duration_us"] = percentiles(durations, (25, 50, 75, 90, 99, 100))
        out["per_second_above_us"] = {f"{x}": round(sum(d > x for d in durations) / seconds, 2) for x in (300, 500, 1000, 2000, 3000)}
        gaps = [(b[0] - a[0]) / 1e6 for a, b in zip(stalls, stalls[1:])]
        out["between_ms"] = percentiles(gaps, (10, 50, 90))
    overflows: list[list] = []
    for t, flow in drops:
        if overflows and t - overflows[-1][-1][0] < overflow_gap_s * 1e9:
            overflows[-1].append((t, flow))
        else:
            overflows.append([(t, flow)])
    if overflows:
        out["overflows"] = {
            "count": len(overflows),
            "skbs_each": round(sum(len(o) for o in overflows) / len(overflows), 2),
            "share_hitting_several_flows": round(sum(len({f for _, f in o}) > 1 for o in overflows) / len(overflows), 3),
            # The skbs dropped whole, in segments (an skb tbf split and
            # dropped in part is not counted: some of it departed).
            "dropped_skb_segments": percentiles(dropped_segments, (25, 50, 75, 90)),
            "dropped_single_segments": round(sum(n == 1 for n in dropped_segments) / len(dropped_segments), 3),
        }
        # Per overflow of a two-flow run, the share of its dropped skbs that
        # the flow with more of them lost.
        if len({f for _, f in drops}) == 2:
            shares = [max(collections.Counter(f for _, f in o).values()) / len(o) for o in overflows]
            out["overflows"]["larger_loser_share_of_skbs"] = percentiles(shares, (25, 50, 75))
    return out


#: The tracepoint of a packet a qdisc hands to its device's driver: tbf's
#: departures, recorded in a tracing instance of its own without a
#: capture's load on the machine.
DEPARTURE_EVENT = "net/net_dev_start_xmit"
TRACEFS = Path("/sys/kernel/tracing")
#: The left router's bottleneck interface, and the shortest data packet on
#: it (the right router's interface of the same name carries only ACKs).
BOTTLENECK_DEV, DATA_MIN_LEN = "btl", 1000


class DepartureTrace:
    """tbf's departures on "btl" (the left router's bottleneck interface;
    the right router's, of the same name, carries only ACKs, which the
    length filter leaves out) in a tracefs instance: a ring buffer per CPU
    large enough for the run, the monotonic clock, and the kernel's own
    count of events it could not store (`events_lost` in the summary), so
    an incomplete trace is known. perf on the same tracepoint returned
    traces with a fifth of the departures here without reporting any
    loss. The instance is removed whatever happens."""

    def __init__(self, buffer_kb: int = 65536):
        if not (TRACEFS / "instances").is_dir():
            # A fresh machine may not have tracefs mounted yet.
            subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], check=True, capture_output=True)
        self.dir = TRACEFS / "instances" / f"ccarena-departures-{os.getpid()}"
        self.dir.mkdir()
        try:
            (self.dir / "buffer_size_kb").write_text(str(buffer_kb))
            (self.dir / "trace_clock").write_text("mono")
            event = self.dir / "events" / DEPARTURE_EVENT
            (event / "filter").write_text(f'name == "{BOTTLENECK_DEV}" && len >= {DATA_MIN_LEN}')
            (event / "enable").write_text("1")
        except BaseException:
            self.dir.rmdir()
            raise

    def stop(self) -> tuple[str, int]:
        """The trace's text and how many events the buffers dropped; removes the instance."""
        try:
            (self.dir / "tracing_on").write_text("0")
            text = (self.dir / "trace").read_text()
            lost = 0
            for stats in (self.dir / "per_cpu").glob("cpu*/stats"):
                for line in stats.read_text().splitlines():
                    key, _, value = line.partition(":")
                    if key.strip() in ("overrun", "dropped events"):
                        lost += int(value.split()[0])
            (self.dir / "events" / DEPARTURE_EVENT / "enable").write_text("0")
            return text, lost
        finally:
            self.dir.rmdir()


def traced_departures(trace: str) -> list[tuple[int, int]]:
    """(time ns, bytes as tbf counts them) of the data skbs released to
    BOTTLENECK_DEV, from the text of a tracefs trace of DEPARTURE_EVENT."""
    rows = []
    for line in trace.splitlines():
        m = re.search(r"\s(\d+\.\d+):\s+net_dev_start_xmit:\s+dev=(\S+) .*?len=(\d+)", line)
        if not m or m.group(2) != BOTTLENECK_DEV or int(m.group(3)) < DATA_MIN_LEN:
            continue
        rows.append((int(round(float(m.group(1)) * 1e9)), tbf_bytes(int(m.group(3)) - FRAME_OVERHEAD)))
    return rows


def departure_stalls(departures: list[tuple[int, int]], tbf_rate_bps: int, skip_s: float = 5.0, tail_s: float = 1.0,
                     min_stall_us: float = 100.0) -> dict:
    """tbf's stalls from its departures alone (router_stalls without the
    captures of its arrivals): a departure later than its own transmission
    time at the rate after the previous one, by the excess, if above
    `min_stall_us`. Only meaningful while the queue stays backlogged (a
    buffer deep enough that it never empties, e.g. 1 BDP with CUBIC): an
    empty queue's gaps would count too. The traced departures must add up
    to the rate (`traced_share_of_rate` near 1); a trace that lost events
    shows gaps that are not stalls, and is reported as incomplete."""
    if len(departures) < 2:
        return {}
    start, end = departures[0][0] + skip_s * 1e9, departures[-1][0] - tail_s * 1e9
    window = [d for d in departures if start <= d[0] <= end]
    if len(window) < 2:
        return {}
    seconds = (window[-1][0] - window[0][0]) / 1e9
    share = sum(size for _, size in window[1:]) * 8 / seconds / tbf_rate_bps
    byte_ns = 8e9 / tbf_rate_bps
    excess = [(b - a - size * byte_ns) / 1000 for (a, _), (b, size) in zip(window, window[1:])]
    stalls = [e for e in excess if e > min_stall_us]
    out = {"observed_s": round(seconds, 3), "traced_share_of_rate": round(share, 4), "complete": share >= 0.95,
           "per_second": round(len(stalls) / seconds, 2), "duration_us": percentiles(stalls, (25, 50, 75, 90, 99, 100)),
           "per_second_above_us": {f"{x}": round(sum(e > x for e in stalls) / seconds, 2) for x in (300, 500, 1000, 2000, 3000)}}
    return out


def perf_reads(script: str, offset_ns: int) -> tuple[dict[int, set[int]], dict[str, list[tuple[int, int, int]]]]:
    """From `perf script --ns -F tid,time,event,trace`: each server thread's
    peer ports (from `tcp_rcv_space_adjust`, which names the socket's ports;
    iperf3's control and data connections share a thread) and every TCP
    socket's reads as (realtime ns, bytes, thread)."""
    ports_of_tid: dict[int, set[int]] = collections.defaultdict(set)
    reads: dict[str, list[tuple[int, int, int]]] = collections.defaultdict(list)
    for line in script.splitlines():
        m = re.match(r"\s*(\d+)\s+(\d+\.\d+):\s+(\S+):(.*)", line)
        if not m:
            continue
        tid, t, event, rest = int(m.group(1)), int(round(float(m.group(2)) * 1e9)) + offset_ns, m.group(3), m.group(4)
        if event == "tcp:tcp_rcv_space_adjust":
            ports = re.search(r"sport=(\d+) dport=(\d+)", rest)
            if ports:
                ports_of_tid[tid].add(int(ports.group(2)))
        elif event == "sock:sock_recv_length" and "IPPROTO_TCP" in rest:
            sk = re.search(r"sk address = (\S+),", rest)
            length = re.search(r"length = (-?\d+)", rest)
            if sk and length:
                reads[sk.group(1)].append((t, int(length.group(1)), tid))
    return ports_of_tid, reads


def application_reads(receiver: Path, script: str, offset_ns: int, data_port: int) -> dict:
    """How the first flow's receiving application read its data (module doc)."""
    rx = [(t, f) for t, fr in read_pcap(receiver) if (f := tcp_fields(fr))]
    data_in = [(t, f) for t, f in rx if f[5] == data_port and f[1] > 0]
    acks_out = [t for t, f in rx if f[4] == data_port and f[1] == 0]
    if not data_in:
        return {}
    client_port = collections.Counter(f[4] for _, f in data_in).most_common(1)[0][0]
    ports_of_tid, reads = perf_reads(script, offset_ns)
    tids = {tid for tid, ports in ports_of_tid.items() if client_port in ports}
    bytes_of = {sk: sum(n for _, n, tid in rs if n > 0 and tid in tids) for sk, rs in reads.items()}
    if not bytes_of or max(bytes_of.values()) == 0:
        return {"error": "no reads of the first flow's socket in perf's record"}
    sk = max(bytes_of, key=bytes_of.__getitem__)
    # Steady state only: from 2 s after the first data to 0.5 s before the last.
    t0, t1 = data_in[0][0] + 2_000_000_000, data_in[-1][0] - 500_000_000
    # Each read's return and its bytes.
    lengths = sorted((t, n) for t, n, _ in reads[sk] if n > 0 and t0 <= t <= t1)
    done = [t for t, _ in lengths]
    arrivals, segs = [], []
    for t, f in data_in:
        if t0 <= t <= t1:
            arrivals.append(t)
            segs.append(segments(f[1]))
    acks = [t for t in acks_out if t0 <= t <= t1]
    total_segments = sum(segs)
    cumulative = list(itertools.accumulate(segs))
    wait, per_read = [], []
    for before, t in zip(done, done[1:]):
        i, j = bisect.bisect_right(arrivals, before), bisect.bisect_right(arrivals, t)
        if j > i:
            wait.append((t - arrivals[i]) / 1000)
            per_read.append(cumulative[j - 1] - (cumulative[i - 1] if i else 0))
    # An ACK sent by a read leaves before the read returns (the tracepoint
    # fires on return): the time from each ACK to the next return is short
    # if reads send the ACKs, against the same for instants 0.5 ms earlier
    # (perf's and tcpdump's clocks agree to some microseconds).
    def to_next_read(instants: list[int]) -> list[float]:
        out = []
        for t in instants:
            k = bisect.bisect_left(done, t)
            if k < len(done):
                out.append((done[k] - t) / 1000)
        return out

    # iperf3 asks for its block (128 KB by default) per read: a read that
    # returns that much left data behind, and the next follows at once.
    block = max((n for _, n in lengths), default=0)
    full = [k for k, (_, n) in enumerate(lengths) if n == block]
    after_full = [(lengths[k + 1][0] - lengths[k][0]) / 1000 for k in full if k + 1 < len(lengths)]
    read_bytes = sum(n for _, n in lengths)
    return {
        "read_bytes": percentiles([n for _, n in lengths], (10, 25, 50, 75, 90, 99)),
        "largest_read_bytes": block,
        "reads_of_the_largest_size": round(len(full) / len(lengths), 4) if lengths else None,
        "bytes_in_reads_of_the_largest_size": round(block * len(full) / read_bytes, 4) if read_bytes else None,
        "largest_read_to_next_read_us": percentiles(after_full, (10, 25, 50, 75, 90, 99)),
        # What `hosts.read_again_wait` is fitted to.
        "largest_read_to_next_read_as_distribution": as_distribution(after_full),
        "reads_per_data_segment": round(len(done) / total_segments, 4) if total_segments else None,
        "acks_per_data_segment": round(len(acks) / total_segments, 4) if total_segments else None,
        "segments_per_read": percentiles(per_read, (10, 25, 50, 75, 90, 99)),
        "arrival_to_read_us": percentiles(wait, (10, 25, 50, 75, 90, 95, 99)),
        # A receiver that acknowledges at its reads holds each batch this long (`hosts.rx_hold`).
        "arrival_to_read_as_distribution": as_distribution(wait),
        "ack_to_next_read_us": percentiles(to_next_read(acks), (10, 25, 50, 75, 90)),
        "instant_to_next_read_us": percentiles(to_next_read([t - 500_000 for t in acks]), (10, 25, 50, 75, 90)),
    }


def delay_floor(delays: list[int]) -> int:
    """The 0.1st percentile of delays (ns): their fixed part."""
    return sorted(delays)[len(delays) // 1000]


def above_floor(delays: list[int]) -> list[float]:
    """Delays (ns) in microseconds above their floor."""
    if not delays:
        return []
    floor = delay_floor(delays)
    return [(d - floor) / 1000 for d in delays]


def noise_percentiles(delays: list[int]) -> dict:
    """Percentiles in microseconds of delays (ns) above their floor."""
    if not delays:
        return {}
    return {"floor_us": round(delay_floor(delays) / 1000, 1),
            **percentiles(above_floor(delays), (10, 25, 50, 75, 90, 95, 97, 99, 99.5, 99.9))}


def sack_right_edges(ip: bytes) -> list[int]:
    """The right edges of an IPv4/TCP packet's SACK blocks."""
    return [struct.unpack(">I", block[j + 4 : j + 8])[0]
            for kind, block in tcp_options(ip) if kind == 5 for j in range(0, len(block) - 7, 8)]


def seq_offset(seq: int, ref: int) -> int:
    """How far `seq` lies after `ref` in 32-bit sequence space (negative
    before it: a D-SACK block below the cumulative ACK)."""
    return ((seq - ref + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def unwrap(seqs: list[int]) -> list[int]:
    """32-bit sequence numbers made monotonic across wraps."""
    out, base, prev = [], 0, None
    for s in seqs:
        if prev is not None and s - prev < -(1 << 31):
            base += 1 << 32
        elif prev is not None and s - prev > (1 << 31):
            base -= 1 << 32
        prev = s
        out.append(s + base)
    return out


def run_namespace(ns_suffix: str) -> str | None:
    """The running backend's namespace whose name ends in `ns_suffix`, if any."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    return next((n for n in names if n.startswith("ccarena-") and n.endswith(ns_suffix)), None)


def capture(ns_suffix: str, iface: str, path: Path, stop: threading.Event, procs: list) -> None:
    """Waits for the run's namespace ending in `ns_suffix` and captures on it."""
    while not stop.is_set():
        ns = run_namespace(ns_suffix)
        if ns and "inet " in subprocess.run(
            ["ip", "netns", "exec", ns, "ip", "addr", "show", iface, "up"], capture_output=True, text=True
        ).stdout:
            p = subprocess.Popen(
                ["ip", "netns", "exec", ns, "tcpdump", "-i", iface, "-s", "96", "-w", str(path),
                 "--time-stamp-precision", "nano", "-B", "65536", "-U", "tcp"],
                stdout=subprocess.DEVNULL, stderr=open(str(path) + ".err", "w"),
            )
            procs.append(p)
            return
        time.sleep(0.02)


SS_FIELDS = {
    "rcv_ssthresh": re.compile(r"rcv_ssthresh:(\d+)"),
    "rcv_space": re.compile(r"rcv_space:(\d+)"),
    "rmem_alloc": re.compile(r"skmem:\(r(\d+),"),
    "rcvbuf": re.compile(r"skmem:\(r\d+,rb(\d+)"),
    "recv_q": re.compile(r"^(\d+)\s+\d+\s", re.M),
}


def parse_ss(text: str) -> list[dict]:
    """The `SS_FIELDS` of each socket `ss -tmiHn` printed (a line, then its
    details on the next)."""
    entries = re.split(r"\n(?=\S)", text.strip())
    return [{k: int(m.group(1)) for k, r in SS_FIELDS.items() if (m := r.search(e))} for e in entries if e]


def socket_samples(ns_suffix: str, port: int, warmup_s: float, stop: threading.Event, out: list[dict]) -> None:
    """Polls `ss -tmi` in the namespace ending in `ns_suffix` for the data
    connection on local port `port` (of its sockets, the one with the
    largest `rcv_space`), every 20 ms from a warm-up after it appears."""
    first_seen = None
    while not stop.is_set():
        time.sleep(0.02)
        ns = run_namespace(ns_suffix)
        if not ns:
            continue
        text = subprocess.run(["ip", "netns", "exec", ns, "ss", "-tmiHn", "state", "established", f"( sport = :{port} )"],
                              capture_output=True, text=True).stdout
        sockets = [x for x in parse_ss(text) if "rcv_ssthresh" in x]
        best = max(sockets, key=lambda x: x.get("rcv_space", 0), default=None)
        if best:
            first_seen = first_seen or time.monotonic()
            if time.monotonic() - first_seen >= warmup_s:
                out.append(best)


def socket_summary(samples: list[dict]) -> dict:
    """Percentiles of each field, and of the window's cap as a share of the
    receive buffer (Linux caps the window at the buffer times the payload's
    learned share of an skb's truesize, `tcp_win_from_space`; a cap well
    below that share leaves room, so unread data would not shrink the
    advertised window)."""
    summary: dict = {"samples": len(samples)}
    for key in SS_FIELDS:
        xs = [float(x[key]) for x in samples if key in x]
        if xs:
            summary[key] = percentiles(xs)
    shares = [100 * x["rcv_ssthresh"] / x["rcvbuf"] for x in samples if x.get("rcvbuf")]
    if shares:
        summary["cap_percent_of_buffer"] = percentiles(shares)
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", default="400Mbps")
    ap.add_argument("--rtt", default="10ms")
    ap.add_argument("--buffer", default=None, help="default: 10 ms at the rate")
    ap.add_argument("--cca", default="cubic")
    ap.add_argument("--flows", type=int, default=1)
    ap.add_argument("--offloads", choices=["on", "off"], default="on")
    ap.add_argument("--tbf-burst", default="auto",
                    help="the bottleneck tbf's bucket (linux.tbf_burst): skbs larger than it are split into segments")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--reads", action="store_true", help="also record the receiving application's reads with perf")
    ap.add_argument("--socket-stats", action="store_true",
                    help="also sample the first flow's receiving socket with ss every 20 ms after the warm-up")
    ap.add_argument("--captures", choices=["all", "receiver", "none"], default="all",
                    help="receiver: capture the first flow's receiver alone (its batches and ACKs, under the least load); "
                         "none: no tcpdump at all (with --trace-departures)")
    ap.add_argument("--trace-departures", action="store_true",
                    help="also record tbf's departures (one tracepoint in a tracefs instance, a few thousand events a "
                         "second with offloads on) and report its stalls from them; needs a queue that stays backlogged")
    ap.add_argument("--keep", type=Path, default=None, metavar="DIR",
                    help="copy the captures (and the departure trace) into DIR for further analysis")
    args = ap.parse_args()
    from ccarena.backends.linux import run_linux
    from ccarena.backends.linux.mapping import tbf_rate_bps
    from ccarena.scenario.units import parse_rate  # type: ignore[attr-defined]

    rate = parse_rate(args.rate)
    buffer = args.buffer or f"{int(rate / 8 * 0.010)}B"
    scenario = {
        "name": "host-timing",
        "network": {"bottleneck_rate": args.rate, "buffer": buffer},
        "flows": [{"cca": args.cca, "rtt": args.rtt, "count": args.flows}],
        "run": {"duration": f"{args.seconds}s", "warmup": "1s"},
        "linux": {"offloads": args.offloads == "on", "tbf_burst": args.tbf_burst},
    }
    with tempfile.TemporaryDirectory() as tmp:
        stop = threading.Event()
        procs: list = []
        everything = args.captures == "all"
        files = {"r0": Path(tmp) / "r0.pcap"} if args.captures != "none" else {}
        if everything:
            files.update({"s0": Path(tmp) / "s0.pcap", "L": Path(tmp) / "btl.pcap"})
        # The left router's interfaces towards the senders (named after them).
        towards = {f"L{i}": Path(tmp) / f"L-s{i}.pcap" for i in range(args.flows)} if everything else {}
        where = {**{k: ("-" + k, "eth0") for k in ("s0", "r0")}, "L": ("-L", "btl"), **{k: ("-L", f"s{k[1:]}") for k in towards}}
        files.update(towards)
        threads = [threading.Thread(target=capture, args=(*where[k], p, stop, procs)) for k, p in files.items()]
        sockets: list[dict] = []
        if args.socket_stats:
            threads.append(threading.Thread(target=socket_samples, args=("-r0", 5201, 1.0, stop, sockets)))
        for th in threads:
            th.start()
        perf = None
        offset_ns = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        departures = DepartureTrace() if args.trace_departures else None
        if args.reads:
            perf = subprocess.Popen(
                ["perf", "record", "-a", "-k", "CLOCK_MONOTONIC", "-o", str(Path(tmp) / "perf.data"),
                 "-e", "sock:sock_recv_length", "-e", "tcp:tcp_rcv_space_adjust"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
        try:
            run_linux(scenario)
        finally:
            if perf is not None:
                perf.send_signal(2)
                perf.wait()
            stop.set()
            for th in threads:
                th.join()
            for p in procs:
                p.terminate()
                p.wait()
            traced = departures.stop() if departures is not None else None
        missing = [k for k, p in files.items() if not p.exists()]
        if missing:
            errors = {k: (files[k].with_suffix(".pcap.err").read_text()[-300:] if files[k].with_suffix(".pcap.err").exists() else "") for k in missing}
            raise SystemExit(f"no capture on {', '.join(missing)}: {errors}")
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            for path in files.values():
                shutil.copy(path, args.keep / path.name)
            if traced is not None:
                (args.keep / "departures.txt").write_text(traced[0])
        summary = analyse(files.get("s0"), files["r0"], 5201) if "r0" in files else {}
        if everything:
            summary["bottleneck"] = analyse_bottleneck(files["L"], tbf_rate_bps(rate))
            summary["return_path_noise_us"] = return_path_noise(files["L"], [files[k] for k in towards], files["r0"])
            summary["router_stalls"] = router_stalls(files["L"], [files[k] for k in towards], tbf_rate_bps(rate))
        if args.reads:
            script = subprocess.run(["perf", "script", "--ns", "-F", "tid,time,event,trace", "-i", str(Path(tmp) / "perf.data")],
                                    capture_output=True, text=True).stdout
            summary["application_reads"] = application_reads(files["r0"], script, offset_ns, 5201)
        if traced is not None:
            summary["router_stalls_from_departures"] = {**departure_stalls(traced_departures(traced[0]), tbf_rate_bps(rate)),
                                                        "events_lost": traced[1]}
        if args.socket_stats:
            summary["receiver_socket"] = socket_summary(sockets)
        summary["setup"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
        print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
