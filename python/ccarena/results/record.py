"""The record of one run: what a backend returns, the input of every table
and metric. Its shape is the engine's ``RunResult`` (crates/sim/src/sim/
results.rs), written down once here as ``TypedDict``s.

The simulator fills every field. Other backends (the linux backend) and
records stored by older versions lack some: ``normalise`` fills those with
what "not measured" means (no reverse bottleneck, no UDP or web traffic,
forward flows under study, the configured rate as the capacity), so that
consumers index the record instead of guessing with ``.get``. Fields a
backend adds of its own (``backend``, ``linux``) are optional.
"""

from __future__ import annotations

from typing import Optional, TypedDict

__all__ = [
    "RunRecord",
    "FlowRecord",
    "FlowCounters",
    "FlowSeries",
    "QueueSeries",
    "LinkRecord",
    "QdiscStats",
    "UdpRecord",
    "UdpSeries",
    "WebRecord",
    "ShortFlowRecord",
    "normalise",
]


class FlowCounters(TypedDict):
    segments_sent: int
    skbs_sent: int  # 0 in records made before it was counted
    acks_sent: int
    bytes_sent: int
    retransmissions: int
    rtos: int
    tlps: int
    recoveries: int
    undos: int
    syn_retransmissions: int
    bytes_acked: int
    bytes_delivered: int
    duplicate_segments: int
    paws_rejected: int  # 0 in records made before it was counted
    # The receiver's ACK decisions as Linux counts them (TcpExt TCPOFOQueue,
    # TCPAckCompressed, DelayedACKs); 0 in records made before 2026-11-29.
    ofo_skbs: int
    acks_compressed: int
    delayed_acks: int
    hystart_train: int  # slow-start exits by HyStart's ACK train (Linux TCPHystartTrainDetect)
    hystart_train_cwnd: int  # sum of cwnd at them (TCPHystartTrainCwnd)
    hystart_delay: int  # ... by its delay signal (TCPHystartDelayDetect)
    hystart_delay_cwnd: int  # (TCPHystartDelayCwnd); all 0 in records made before 2026-11-26
    drops: int
    random_drops: int
    ce_marks: int
    start_ns: int
    first_data_ns: int  # 0: no data sent, or a backend that does not see it
    completion_ns: int  # 0: not finished
    delivered_at_window_start: int
    delivered_at_window_end: int
    retrans_at_window_start: int
    rtos_at_window_start: int


class FlowRecord(TypedDict):
    cca: str
    label: str
    rtt_ns: int
    start_ns: int
    stop_ns: Optional[int]
    size_bytes: Optional[int]
    direction: str  # "forward" | "reverse"
    background: bool
    window_start_ns: int  # the flow's measurement window
    window_end_ns: int
    counters: FlowCounters
    final_cwnd: int
    final_ssthresh: int
    srtt_us: int
    min_rtt_us: int


class _FlowSeriesOptional(TypedDict, total=False):
    # What the flow's algorithm reports to ss (BBR's bandwidth and min RTT
    # estimates, and its gains x/256): absent where it reports nothing.
    cc_bw_bps: list[int]
    cc_min_rtt_us: list[int]
    cc_pacing_gain: list[int]
    cc_cwnd_gain: list[int]


class FlowSeries(_FlowSeriesOptional):
    """One flow's samples (one entry per sample interval)."""

    t_ns: list[int]
    cwnd: list[int]
    ssthresh: list[int]
    in_flight: list[int]
    srtt_us: list[int]
    min_rtt_us: list[int]
    delivery_rate_bps: list[int]
    throughput_bps: list[int]
    delivered_bytes: list[int]
    retransmissions: list[int]
    ca_state: list[int]  # index into open, disorder, cwr, recovery, loss (-1: unknown)
    pacing_rate_bps: list[int]


class QueueSeries(TypedDict):
    t_ns: list[int]
    backlog_packets: list[int]
    backlog_bytes: list[int]
    drops: list[int]  # cumulative
    bytes_out: list[int]  # cumulative
    rate_bps: list[int]


class _QdiscOptional(TypedDict, total=False):
    red_curve: list[dict]  # RED only
    queues: list[dict]  # DualPI2: per-queue counters ("l", "c")


class QdiscStats(_QdiscOptional):
    kind: str
    ce_marks: int
    sojourn_packets: int
    sojourn_sum_ns: int
    sojourn_max_ns: int


class LinkRecord(TypedDict):
    rate_bps: int  # the configured rate (at the start of the run)
    arrivals: int
    departures: int
    skbs_out: int  # skbs handed on (a super-packet queued whole counts once; 0: not recorded)
    bytes_out: int
    drops_queue: int  # packets (segments) the queue turned away; a kernel's tbf counts skbs here too
    drops_queue_skbs: int | None  # the same drops as a Linux qdisc counts them (a super-packet once); None: not recorded
    drops_random: int
    drops_aqm: int
    window_bytes_out: int  # during the measurement window
    window_capacity_bytes: int  # the rate integrated over the measurement window
    ce_marks: int
    qdisc: QdiscStats


class UdpRecord(TypedDict):
    label: str
    direction: str
    rate_bps: int
    packet_bytes: int
    start_ns: int
    stop_ns: Optional[int]
    sent_packets: int
    sent_bytes: int
    received_packets: int
    received_bytes: int
    window_start_ns: int
    window_end_ns: int
    window_received_bytes: int


class UdpSeries(TypedDict):
    t_ns: list[int]
    throughput_bps: list[int]
    received_bytes: list[int]


class WebRecord(TypedDict):
    label: str
    direction: str
    cca: str
    target_load_bps: int
    flows_started: int
    offered_bytes: int
    flows_completed: int


class ShortFlowRecord(TypedDict):
    generator: int
    size_bytes: int
    rtt_ns: int
    start_ns: int
    fct_ns: Optional[int]  # None: not completed
    acked_ns: Optional[int]
    retransmissions: int
    rtos: int
    syn_retransmissions: int


class _RunRecordOptional(TypedDict, total=False):
    backend: str  # absent for the simulator
    linux: dict  # the linux backend's own section (docs/linux-backend.md)


class RunRecord(_RunRecordOptional):
    flows: list[FlowRecord]
    flow_series: list[FlowSeries]
    queue_series: QueueSeries  # the forward bottleneck
    link: LinkRecord
    reverse_link: Optional[LinkRecord]
    reverse_queue_series: Optional[QueueSeries]
    udp: list[UdpRecord]
    udp_series: list[UdpSeries]
    web: list[WebRecord]
    short_flows: list[ShortFlowRecord]  # every web flow opened, in order
    duration_ns: int
    warmup_ns: int
    sample_interval_ns: int
    seed: int
    events: int
    data_packets_forwarded: int
    invariant_violations: list[str]


#: The flow counters a Linux receiver's own TcpExt counters give.
RECEIVER_TCPEXT = (("ofo_skbs", "TCPOFOQueue"), ("acks_compressed", "TCPAckCompressed"), ("delayed_acks", "DelayedACKs"))


def normalise(record: dict) -> RunRecord:
    """Fills, in place, what the backend that made `record` does not measure;
    returns it. A simulator record is left as it is."""
    # Kernel runs stored with their receivers' TcpExt counters but before the
    # flows' counters carried them.
    receivers = (record.get("linux") or {}).get("receiver_counters") or []
    for f, tcpext in zip(record["flows"], receivers):
        for key, name in RECEIVER_TCPEXT:
            f.get("counters", {}).setdefault(key, tcpext.get(name, 0))
    for f in record["flows"]:
        f.setdefault("direction", "forward")
        f.setdefault("background", False)
        if "counters" in f:
            f["counters"].setdefault("skbs_sent", 0)
            f["counters"].setdefault("acks_sent", 0)
            f["counters"].setdefault("paws_rejected", 0)
            for key, _ in RECEIVER_TCPEXT:
                f["counters"].setdefault(key, 0)
            f["counters"].setdefault("first_data_ns", 0)
            for key in ("hystart_train", "hystart_train_cwnd", "hystart_delay", "hystart_delay_cwnd"):
                f["counters"].setdefault(key, 0)
    for key in ("reverse_link", "reverse_queue_series"):
        record.setdefault(key, None)
    for key in ("udp", "udp_series", "web", "short_flows", "invariant_violations"):
        record.setdefault(key, [])
    window_ns = record["duration_ns"] - record["warmup_ns"]
    for link in (record["link"], record["reverse_link"]):
        if link is None:
            continue
        # Without a record of rate changes, the configured rate held throughout.
        link.setdefault("window_capacity_bytes", int(round(link["rate_bps"] * window_ns / 8e9)))
        link.setdefault("ce_marks", 0)
        link.setdefault("skbs_out", 0)  # records from before the count
        # tbf counts skbs: a kernel backend's drops always were; a simulator
        # record from before the count cannot say.
        link.setdefault("drops_queue_skbs", link["drops_queue"] if record.get("backend", "sim") != "sim" else None)
        link.setdefault("qdisc", {"kind": "drop_tail", "ce_marks": 0, "sojourn_packets": 0, "sojourn_sum_ns": 0, "sojourn_max_ns": 0})
    return record  # type: ignore[return-value]
