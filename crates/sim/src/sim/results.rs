//! What a run returns, and the end of a run: closing the measurement windows,
//! summarising links, flows, UDP sources and web generators, and checking the
//! conservation laws every run must satisfy.

use super::Simulation;
use crate::net::link::Link;
use crate::net::queue::QdiscStats;
use crate::records::{FlowCounters, FlowSeries, QueueSeries, ShortFlowRecord, UdpSeries};
use crate::traffic::Direction;
use crate::units::Time;
use serde::Serialize;

/// Per-flow outcome of a run.
#[derive(Clone, Debug, Serialize)]
pub struct FlowResult {
    pub cca: String,
    pub label: String,
    pub rtt_ns: u64,
    pub start_ns: u64,
    pub stop_ns: Option<u64>,
    pub size_bytes: Option<u64>,
    pub direction: Direction,
    pub background: bool,
    /// The measurement window of this flow: [max(warmup, start), min(duration, stop)].
    pub window_start_ns: u64,
    pub window_end_ns: u64,
    pub counters: FlowCounters,
    pub final_cwnd: u32,
    pub final_ssthresh: u32,
    pub srtt_us: u32,
    pub min_rtt_us: u32,
}

/// Summary of a bottleneck link.
#[derive(Clone, Debug, Serialize)]
pub struct LinkResult {
    /// The configured rate (the rate at the start of the run).
    pub rate_bps: u64,
    pub arrivals: u64,
    pub departures: u64,
    /// Skbs the transmitter handed on (a super-packet queued whole counts
    /// once): departures / skbs_out is the bursts' size at the bottleneck.
    pub skbs_out: u64,
    pub bytes_out: u64,
    /// Segments the queue turned away.
    pub drops_queue: u64,
    /// The same drops as a Linux qdisc counts them: a super-packet dropped
    /// whole once (the linux backend's tbf reports only this count).
    pub drops_queue_skbs: u64,
    pub drops_random: u64,
    pub drops_aqm: u64,
    /// Bytes transmitted during the measurement window.
    pub window_bytes_out: u64,
    /// Bytes the link could have sent during the measurement window (its rate
    /// integrated over the window, so rate changes count).
    pub window_capacity_bytes: u64,
    /// Packets the queue discipline marked CE instead of dropping.
    pub ce_marks: u64,
    /// The queue discipline's own counters.
    pub qdisc: QdiscStats,
}

/// Outcome of a UDP source.
#[derive(Clone, Debug, Serialize)]
pub struct UdpResult {
    pub label: String,
    pub direction: Direction,
    pub rate_bps: u64,
    pub packet_bytes: u32,
    pub start_ns: u64,
    pub stop_ns: Option<u64>,
    pub sent_packets: u64,
    pub sent_bytes: u64,
    pub received_packets: u64,
    /// Wire bytes received by the sink.
    pub received_bytes: u64,
    pub window_start_ns: u64,
    pub window_end_ns: u64,
    /// Wire bytes received during the window.
    pub window_received_bytes: u64,
}

/// Outcome of a web generator.
#[derive(Clone, Debug, Serialize)]
pub struct WebResult {
    pub label: String,
    pub direction: Direction,
    pub cca: String,
    pub target_load_bps: u64,
    /// Flows opened and the bytes they were to transfer.
    pub flows_started: u64,
    pub offered_bytes: u64,
    pub flows_completed: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    pub flows: Vec<FlowResult>,
    pub flow_series: Vec<FlowSeries>,
    /// The forward bottleneck.
    pub queue_series: QueueSeries,
    pub link: LinkResult,
    /// The reverse bottleneck, when the run has one.
    pub reverse_link: Option<LinkResult>,
    pub reverse_queue_series: Option<QueueSeries>,
    pub udp: Vec<UdpResult>,
    pub udp_series: Vec<UdpSeries>,
    pub web: Vec<WebResult>,
    /// Every web flow opened, in order of opening.
    pub short_flows: Vec<ShortFlowRecord>,
    pub duration_ns: u64,
    pub warmup_ns: u64,
    pub sample_interval_ns: u64,
    pub seed: u64,
    /// Events processed by the event loop.
    pub events: u64,
    /// Data packets that crossed a bottleneck.
    pub data_packets_forwarded: u64,
    /// Failed invariant checks (empty when all hold).
    pub invariant_violations: Vec<String>,
}

impl Simulation {
    fn link_result(&self, i: usize) -> LinkResult {
        let l = &self.links[i];
        let s = &l.stats;
        let end = Time(self.cfg.run.duration.0);
        LinkResult {
            rate_bps: self.cfg.network.bottleneck_rate.0,
            arrivals: s.arrivals,
            departures: s.departures,
            skbs_out: s.skbs_out,
            bytes_out: s.bytes_out,
            drops_queue: s.drops_queue,
            drops_queue_skbs: s.drops_queue_skbs,
            drops_random: s.drops_random,
            drops_aqm: s.drops_aqm,
            window_bytes_out: s.bytes_out - self.window_bytes_start[i],
            window_capacity_bytes: l.capacity_bytes(end) - self.window_capacity_start[i],
            ce_marks: l.qdisc_stats().ce_marks,
            qdisc: l.qdisc_stats(),
        }
    }

    /// Data packets of `flow` dropped at any bottleneck (and of those, random drops).
    fn flow_drops(links: &[Link], flow: usize) -> (u64, u64) {
        links.iter().fold((0, 0), |(d, r), l| {
            (d + l.stats.flow_drops.get(flow).copied().unwrap_or(0), r + l.stats.flow_random_drops.get(flow).copied().unwrap_or(0))
        })
    }

    pub fn finish(mut self) -> RunResult {
        let duration = self.cfg.run.duration;
        for f in &mut self.flows[..self.configured] {
            if !f.start_snapshot_taken {
                Self::snapshot_start(f);
            }
            Self::snapshot_end(f);
        }
        for u in &mut self.udp {
            u.bytes_at_window_start.get_or_insert(u.received_bytes);
            u.bytes_at_window_end.get_or_insert(u.received_bytes);
        }
        self.check_invariants();
        let link = self.link_result(0);
        let reverse_link = (self.links.len() > 1).then(|| self.link_result(1));
        // Web flows still open at the end keep their counters so far.
        for f in &self.flows[self.configured..] {
            if let Some(w) = f.web {
                let r = &mut self.short_flows[w.record as usize];
                r.retransmissions = f.sender.counters.retransmissions;
                r.rtos = f.sender.counters.rtos;
                r.syn_retransmissions = f.sender.counters.syn_retransmissions;
            }
        }
        let web = self
            .web
            .iter()
            .enumerate()
            .map(|(g, w)| {
                let c = w.generator.config();
                WebResult {
                    label: c.label.clone(),
                    direction: c.direction,
                    cca: c.cca.clone(),
                    target_load_bps: c.load.0,
                    flows_started: w.started,
                    offered_bytes: w.offered_bytes,
                    flows_completed: self.short_flows.iter().filter(|r| r.generator == g as u32 && r.fct_ns.is_some()).count() as u64,
                }
            })
            .collect();
        let mut udp = Vec::new();
        let mut udp_series = Vec::new();
        for u in self.udp {
            let c = u.schedule.config();
            udp.push(UdpResult {
                label: c.label.clone(),
                direction: c.direction,
                rate_bps: c.rate.0,
                packet_bytes: c.packet_bytes,
                start_ns: c.start.0,
                stop_ns: c.stop.map(|t| t.0),
                sent_packets: u.sent_packets,
                sent_bytes: u.sent_bytes,
                received_packets: u.received_packets,
                received_bytes: u.received_bytes,
                window_start_ns: u.window_start.0,
                window_end_ns: u.window_end.0,
                window_received_bytes: u.bytes_at_window_end.unwrap_or(0) - u.bytes_at_window_start.unwrap_or(0),
            });
            udp_series.push(u.series);
        }
        let mut flows = Vec::new();
        let mut flow_series = Vec::new();
        let mut queue_series = std::mem::take(&mut self.queue_series).into_iter();
        for (i, f) in self.flows.into_iter().take(self.configured).enumerate() {
            let fc = &self.cfg.flows[i];
            let mut counters = f.sender.counters.clone();
            counters.bytes_delivered = f.receiver.bytes_delivered;
            counters.duplicate_segments = f.receiver.duplicate_segments;
            counters.paws_rejected = f.receiver.paws_rejected;
            counters.ofo_skbs = f.receiver.ofo_skbs;
            counters.acks_compressed = f.receiver.acks_compressed;
            counters.delayed_acks = f.receiver.delayed_acks;
            let hs = f.sender.sock.hystart;
            counters.hystart_train = hs.train_detect;
            counters.hystart_train_cwnd = hs.train_cwnd;
            counters.hystart_delay = hs.delay_detect;
            counters.hystart_delay_cwnd = hs.delay_cwnd;
            counters.acks_sent = f.receiver.acks_sent;
            counters.ce_marks = f.receiver.ce_marks;
            (counters.drops, counters.random_drops) = Self::flow_drops(&self.links, i);
            let tp = &f.sender.sock;
            flows.push(FlowResult {
                cca: fc.cca.clone(),
                label: fc.label.clone(),
                rtt_ns: f.rtt.0,
                start_ns: f.start.0,
                stop_ns: fc.stop.map(|t| t.0),
                size_bytes: fc.size,
                direction: fc.direction,
                background: fc.background,
                window_start_ns: f.window_start.0,
                window_end_ns: f.window_end.0,
                counters,
                final_cwnd: tp.cwnd,
                final_ssthresh: tp.ssthresh,
                srtt_us: tp.srtt_us(),
                min_rtt_us: if tp.min_rtt_us() == u32::MAX { 0 } else { tp.min_rtt_us() },
            });
            flow_series.push(f.series);
        }
        RunResult {
            flows,
            flow_series,
            queue_series: queue_series.next().unwrap_or_default(),
            link,
            reverse_link,
            reverse_queue_series: queue_series.next(),
            udp,
            udp_series,
            web,
            short_flows: self.short_flows,
            duration_ns: duration.0,
            warmup_ns: self.cfg.run.warmup.0,
            sample_interval_ns: self.cfg.run.sample_interval.0,
            seed: self.cfg.run.seed,
            events: self.events.processed(),
            data_packets_forwarded: self.data_packets_forwarded,
            invariant_violations: self.violations,
        }
    }

    /// The conservation laws every run must satisfy.
    fn check_invariants(&mut self) {
        let end = Time(self.cfg.run.duration.0);
        for (i, link) in self.links.iter().enumerate() {
            // A bottleneck never carries more than its capacity (one packet of
            // slack for the transmission in progress at the end, and a Linux
            // router's bucket, which starts full).
            let capacity = link.capacity_bytes(end) + 1500 + link.burst_bytes();
            if link.stats.bytes_out > capacity {
                self.violations.push(format!(
                    "bottleneck {i} sent {} bytes, more than its capacity {capacity} over the run",
                    link.stats.bytes_out
                ));
            }
        }
        // Every data packet a configured flow sent is received, dropped, or
        // still in the network.
        let configured = self.configured;
        let mut in_network = vec![0u64; configured];
        let mut count = |pkt: &crate::packet::Packet| {
            if pkt.is_data() && (pkt.flow as usize) < configured {
                in_network[pkt.flow as usize] += pkt.segs() as u64;
            }
        };
        self.pipes.iter().flat_map(|p| p.packets()).for_each(&mut count);
        self.lines.iter().flat_map(|l| l.packets()).for_each(&mut count);
        self.links.iter().flat_map(|l| l.held_packets()).for_each(|p| count(&p));
        self.flows.iter().filter_map(|f| f.rx.as_ref()).flat_map(|rx| rx.held()).for_each(&mut count);
        self.flows.iter().flat_map(|f| f.skb.iter()).for_each(&mut count);
        for (i, f) in self.flows[..configured].iter().enumerate() {
            let sent = f.sender.counters.segments_sent;
            let (drops, _) = Self::flow_drops(&self.links, i);
            let accounted = f.data_packets_received + drops + in_network[i];
            if sent != accounted {
                self.violations.push(format!(
                    "flow {i}: {sent} data packets sent but {} received + {drops} dropped + {} in flight",
                    f.data_packets_received, in_network[i]
                ));
            }
            // Bytes delivered in order equal the payload of segments [0, rcv_nxt):
            // no byte is delivered twice or skipped.
            let rcv_nxt = f.receiver.rcv_nxt as u64;
            let mss = self.cfg.flows[i].tcp.mss as u64;
            let expected = match self.cfg.flows[i].size {
                Some(size) => (rcv_nxt * mss).min(size),
                None => rcv_nxt * mss,
            };
            if f.receiver.bytes_delivered != expected {
                self.violations.push(format!(
                    "flow {i}: {} bytes delivered but segments [0, {rcv_nxt}) hold {expected}",
                    f.receiver.bytes_delivered
                ));
            }
            if f.sender.counters.bytes_acked > f.receiver.bytes_delivered {
                self.violations.push(format!(
                    "flow {i}: sender saw {} bytes acknowledged but only {} were delivered",
                    f.sender.counters.bytes_acked, f.receiver.bytes_delivered
                ));
            }
            if let Err(e) = f.sender.check_counters() {
                self.violations.push(e);
            }
        }
        // A UDP sink never receives more than its source sent.
        for (i, u) in self.udp.iter().enumerate() {
            if u.received_packets > u.sent_packets {
                self.violations.push(format!("udp {i}: {} datagrams received of {} sent", u.received_packets, u.sent_packets));
            }
        }
    }
}
