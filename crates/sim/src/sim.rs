//! The simulation: builds the dumbbell from a `SimConfig`, runs the event loop
//! and returns a `RunResult`. Each flow has a forward route (sender -> access
//! link -> shared bottleneck -> forward propagation -> receiver) and a reverse
//! route (receiver -> access link + reverse propagation -> sender); packets
//! carry their position along the route. Timers of the endpoints are kept in
//! the endpoints and mirrored lazily into the event queue: at most one pending
//! event per timer, re-pushed only when a deadline moves earlier or comes due.

use crate::cc::make_cca;
use crate::config::SimConfig;
use crate::event::{Event, EventQueue, TimerKind, TIMER_KINDS};
use crate::net::link::{Link, LinkStats};
use crate::net::pipe::Pipe;
use crate::net::qdisc::build_qdisc;
use crate::net::queue::QdiscStats;
use crate::packet::{Packet, Payload};
use crate::records::{FlowCounters, FlowSeries, QueueSeries};
use crate::rng::Rng;
use crate::tcp::receiver::TcpReceiver;
use crate::tcp::sender::TcpSender;
use crate::units::{Dur, Rate, Time};
use serde::Serialize;

#[derive(Clone, Copy, Debug)]
enum Hop {
    Pipe(u32),
    Link(u32),
    Receiver,
    Sender,
}

const ALL_TIMERS: [TimerKind; TIMER_KINDS] =
    [TimerKind::Xmit, TimerKind::Pacing, TimerKind::DelAck, TimerKind::CompressedAck, TimerKind::Syn];

struct Flow {
    sender: TcpSender,
    receiver: TcpReceiver,
    fwd: Vec<Hop>,
    rev: Vec<Hop>,
    scheduled: [Option<Time>; TIMER_KINDS],
    series: FlowSeries,
    last_sample_delivered: u64,
    data_packets_received: u64,
    /// When the connection opens (the configured start plus jitter).
    start: Time,
    window_start: Time,
    window_end: Time,
    start_snapshot_taken: bool,
    end_snapshot_taken: bool,
}

/// Per-flow outcome of a run.
#[derive(Clone, Debug, Serialize)]
pub struct FlowResult {
    pub cca: String,
    pub label: String,
    pub rtt_ns: u64,
    pub start_ns: u64,
    pub stop_ns: Option<u64>,
    pub size_bytes: Option<u64>,
    /// The measurement window of this flow: [max(warmup, start), min(duration, stop)].
    pub window_start_ns: u64,
    pub window_end_ns: u64,
    pub counters: FlowCounters,
    pub final_cwnd: u32,
    pub final_ssthresh: u32,
    pub srtt_us: u32,
    pub min_rtt_us: u32,
}

/// Summary of the bottleneck link.
#[derive(Clone, Debug, Serialize)]
pub struct LinkResult {
    pub rate_bps: u64,
    pub arrivals: u64,
    pub departures: u64,
    pub bytes_out: u64,
    pub drops_queue: u64,
    pub drops_random: u64,
    pub drops_aqm: u64,
    /// Bytes transmitted during the measurement window.
    pub window_bytes_out: u64,
    /// Packets the queue discipline marked CE instead of dropping.
    pub ce_marks: u64,
    /// The queue discipline's own counters.
    pub qdisc: QdiscStats,
}

#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    pub flows: Vec<FlowResult>,
    pub flow_series: Vec<FlowSeries>,
    pub queue_series: QueueSeries,
    pub link: LinkResult,
    pub duration_ns: u64,
    pub warmup_ns: u64,
    pub sample_interval_ns: u64,
    pub seed: u64,
    /// Events processed by the event loop.
    pub events: u64,
    /// Data packets that crossed the bottleneck.
    pub data_packets_forwarded: u64,
    /// Failed invariant checks (empty when all hold).
    pub invariant_violations: Vec<String>,
}

/// Builds algorithms the engine does not know itself (e.g. ones written in
/// Python): given a name and parameters, returns `None` if the name is not
/// its own, or the algorithm (or an error naming the parameter).
pub trait CcaFactory: Send {
    fn names(&self) -> Vec<String>;
    fn build(
        &self,
        name: &str,
        params: &std::collections::BTreeMap<String, crate::cc::ParamValue>,
    ) -> Option<Result<Box<dyn crate::cc::CongestionControl>, String>>;
}

pub struct Simulation {
    cfg: SimConfig,
    now: Time,
    events: EventQueue,
    pipes: Vec<Pipe>,
    links: Vec<Link>,
    flows: Vec<Flow>,
    queue_series: QueueSeries,
    out: Vec<Packet>,
    window_bytes_start: u64,
    data_packets_forwarded: u64,
    violations: Vec<String>,
}

impl Simulation {
    pub fn new(cfg: SimConfig) -> Result<Simulation, String> {
        Self::with_factory(cfg, None)
    }

    /// A simulation whose flows may also use algorithms from `factory`.
    pub fn with_factory(cfg: SimConfig, factory: Option<&dyn CcaFactory>) -> Result<Simulation, String> {
        let external = factory.map(|f| f.names()).unwrap_or_default();
        cfg.validate_with(&external)?;
        let seed = cfg.run.seed;
        let net = &cfg.network;
        let access = net.access_rate.unwrap_or(Rate(net.bottleneck_rate.0.saturating_mul(10)));
        let mut pipes = Vec::new();
        let bottleneck = Link::new(
            net.bottleneck_rate,
            build_qdisc(&net.qdisc, net.buffer, net.bottleneck_rate, Rng::stream(seed, "bottleneck-aqm"))?,
            &net.loss,
            Rng::stream(seed, "bottleneck-loss"),
        );
        let links = vec![bottleneck];
        let mut flows = Vec::new();
        let mut events = EventQueue::new();
        let mut jitter_rng = Rng::stream(seed, "start-jitter");
        let starts: Vec<Time> = cfg
            .flows
            .iter()
            .map(|f| {
                let j = cfg.run.start_jitter.0;
                f.start + Dur(if j > 0 { jitter_rng.below(j) } else { 0 })
            })
            .collect();
        for (i, f) in cfg.flows.iter().enumerate() {
            let id = i as u32;
            let start = starts[i];
            let built = factory.and_then(|fac| fac.build(&f.cca, &f.cca_params));
            let cc = match built {
                Some(r) => r,
                None => make_cca(&f.cca, &f.cca_params),
            }
            .map_err(|e| format!("flows[{i}].{e}"))?;
            let fwd_delay = Dur(f.rtt.0 / 2);
            let rev_delay = Dur(f.rtt.0 - f.rtt.0 / 2);
            let access_fwd = pipes.len() as u32;
            pipes.push(Pipe::new(Some(access), Dur::ZERO));
            let prop_fwd = pipes.len() as u32;
            pipes.push(Pipe::new(None, fwd_delay));
            let rev = pipes.len() as u32;
            pipes.push(Pipe::new(Some(access), rev_delay));
            let window_start = start.max(Time(cfg.run.warmup.0));
            let end = Time(cfg.run.duration.0);
            let window_end = f.stop.map_or(end, |s| s.min(end));
            // The receiver follows the sender's SACK setting (negotiated in the SYN).
            let mut rcv_tcp = f.tcp.clone();
            if let Some(sack) = cc.sack() {
                rcv_tcp.sack = sack;
            }
            if cc.wants_ack_every_segment() {
                rcv_tcp.delayed_ack = false;
            }
            let mut sender = TcpSender::new(id, &f.tcp, cc, f.size);
            sender.sock.flow_seed = Rng::stream(seed, &format!("cca-{id}")).next_u64();
            flows.push(Flow {
                sender,
                receiver: TcpReceiver::new(id, &rcv_tcp, f.size),
                fwd: vec![Hop::Pipe(access_fwd), Hop::Link(0), Hop::Pipe(prop_fwd), Hop::Receiver],
                rev: vec![Hop::Pipe(rev), Hop::Sender],
                scheduled: [None; TIMER_KINDS],
                series: FlowSeries::default(),
                last_sample_delivered: 0,
                data_packets_received: 0,
                start,
                window_start,
                window_end,
                start_snapshot_taken: false,
                end_snapshot_taken: false,
            });
            events.schedule(start, Event::FlowStart(id));
            if let Some(stop) = f.stop {
                if stop.0 <= cfg.run.duration.0 {
                    events.schedule(stop, Event::FlowStop(id));
                }
            }
        }
        events.schedule(Time(cfg.run.warmup.0), Event::WarmupEnd);
        events.schedule(Time(cfg.run.sample_interval.0), Event::Sample);
        Ok(Simulation {
            cfg,
            now: Time::ZERO,
            events,
            pipes,
            links,
            flows,
            queue_series: QueueSeries::default(),
            out: Vec::with_capacity(64),
            window_bytes_start: 0,
            data_packets_forwarded: 0,
            violations: Vec::new(),
        })
    }

    /// Runs to the configured duration and returns the records.
    pub fn run(mut self) -> RunResult {
        let end = Time(self.cfg.run.duration.0);
        self.run_until(end);
        self.finish()
    }

    /// Processes every event up to and including `until`. Callers may step a
    /// run in slices (for progress reporting) and then call `finish`.
    pub fn run_until(&mut self, until: Time) {
        while let Some(t) = self.events.peek_time() {
            if t > until {
                break;
            }
            let (t, ev) = self.events.pop().expect("peeked");
            self.now = t;
            self.dispatch(ev);
        }
        self.now = self.now.max(until);
    }

    pub fn now(&self) -> Time {
        self.now
    }

    pub fn events_processed(&self) -> u64 {
        self.events.processed()
    }

    fn dispatch(&mut self, ev: Event) {
        let now = self.now;
        match ev {
            Event::PipeHead(p) => {
                if let Some((pkt, next)) = self.pipes[p as usize].pop() {
                    if let Some(t) = next {
                        self.events.schedule(t, Event::PipeHead(p));
                    }
                    self.forward(pkt);
                }
            }
            Event::LinkDone(l) => {
                let (pkt, next) = self.links[l as usize].complete(now);
                if let Some(t) = next {
                    self.events.schedule(t, Event::LinkDone(l));
                }
                if pkt.is_data() {
                    self.data_packets_forwarded += 1;
                }
                self.forward(pkt);
            }
            Event::Timer { flow, kind } => {
                let f = &mut self.flows[flow as usize];
                if f.scheduled[kind as usize] == Some(now) {
                    f.scheduled[kind as usize] = None;
                }
                match kind {
                    TimerKind::Xmit | TimerKind::Pacing | TimerKind::Syn => {
                        if f.sender.timer_deadline(kind).is_some_and(|d| d <= now) {
                            f.sender.on_timer(now, kind, &mut self.out);
                            self.flush_out(flow, false);
                        }
                    }
                    TimerKind::DelAck | TimerKind::CompressedAck => {
                        if f.receiver.timer_deadline(kind).is_some_and(|d| d <= now) {
                            f.receiver.on_timer(now, kind, &mut self.out);
                            self.flush_out(flow, true);
                        }
                    }
                }
                self.sync_timers(flow);
            }
            Event::FlowStart(id) => {
                self.flows[id as usize].sender.connect(now, &mut self.out);
                self.flush_out(id, false);
                self.sync_timers(id);
            }
            Event::FlowStop(id) => {
                let f = &mut self.flows[id as usize];
                f.sender.stop_app(now);
                Self::snapshot_end(f);
            }
            Event::WarmupEnd => {
                self.window_bytes_start = self.links[0].stats.bytes_out;
                for f in &mut self.flows {
                    if !f.start_snapshot_taken {
                        Self::snapshot_start(f);
                    }
                }
            }
            Event::Sample => {
                self.sample();
                let next = now + self.cfg.run.sample_interval;
                if next.0 <= self.cfg.run.duration.0 {
                    self.events.schedule(next, Event::Sample);
                }
            }
            Event::PathChange(_) | Event::Source(_) => {}
        }
    }

    fn snapshot_start(f: &mut Flow) {
        f.start_snapshot_taken = true;
        let c = &mut f.sender.counters;
        c.delivered_at_window_start = f.receiver.bytes_delivered;
        c.retrans_at_window_start = c.retransmissions;
        c.rtos_at_window_start = c.rtos;
    }

    fn snapshot_end(f: &mut Flow) {
        if f.end_snapshot_taken {
            return;
        }
        f.end_snapshot_taken = true;
        f.sender.counters.delivered_at_window_end = f.receiver.bytes_delivered;
    }

    /// Moves a packet to the next hop of its route.
    fn forward(&mut self, mut pkt: Packet) {
        pkt.hop += 1;
        self.enter(pkt);
    }

    fn enter(&mut self, pkt: Packet) {
        let now = self.now;
        let fid = pkt.flow as usize;
        let hop = {
            let f = &self.flows[fid];
            let route = if pkt.reverse { &f.rev } else { &f.fwd };
            route[pkt.hop as usize]
        };
        match hop {
            Hop::Pipe(p) => {
                if let Some(t) = self.pipes[p as usize].push(now, pkt) {
                    self.events.schedule(t, Event::PipeHead(p));
                }
            }
            Hop::Link(l) => match self.links[l as usize].arrive(now, pkt) {
                Ok(Some(t)) => self.events.schedule(t, Event::LinkDone(l)),
                Ok(None) => {}
                Err(_dropped) => {}
            },
            Hop::Receiver => {
                let f = &mut self.flows[fid];
                // A flow's window opens when its first data packet can arrive; take
                // the start snapshot lazily for flows that start after warmup.
                if !f.start_snapshot_taken && now >= f.window_start {
                    Self::snapshot_start(f);
                }
                if pkt.is_data() {
                    f.data_packets_received += 1;
                }
                f.receiver.on_packet(now, &pkt, &mut self.out);
                self.flush_out(pkt.flow, true);
                self.sync_timers(pkt.flow);
            }
            Hop::Sender => {
                self.flows[fid].sender.on_packet(now, &pkt, &mut self.out);
                self.flush_out(pkt.flow, false);
                self.sync_timers(pkt.flow);
            }
        }
    }

    /// Injects the packets an endpoint produced into their routes.
    fn flush_out(&mut self, flow: u32, from_receiver: bool) {
        if self.out.is_empty() {
            return;
        }
        let mut out = std::mem::take(&mut self.out);
        for mut pkt in out.drain(..) {
            pkt.flow = flow;
            pkt.reverse = from_receiver;
            pkt.hop = 0;
            self.enter(pkt);
        }
        self.out = out;
    }

    /// Mirrors the endpoints' timer deadlines into the event queue.
    fn sync_timers(&mut self, flow: u32) {
        let f = &mut self.flows[flow as usize];
        for kind in ALL_TIMERS {
            let deadline = match kind {
                TimerKind::Xmit | TimerKind::Pacing | TimerKind::Syn => f.sender.timer_deadline(kind),
                TimerKind::DelAck | TimerKind::CompressedAck => f.receiver.timer_deadline(kind),
            };
            if let Some(d) = deadline {
                let slot = &mut f.scheduled[kind as usize];
                if slot.is_none_or(|s| d < s) {
                    *slot = Some(d);
                    self.events.schedule(d, Event::Timer { flow, kind });
                }
            }
        }
    }

    fn sample(&mut self) {
        let now = self.now;
        let interval = self.cfg.run.sample_interval;
        for f in &mut self.flows {
            let s = &mut f.series;
            let tp = &f.sender.sock;
            let delivered = f.receiver.bytes_delivered;
            s.t_ns.push(now.0);
            s.cwnd.push(tp.cwnd);
            s.ssthresh.push(tp.ssthresh);
            s.in_flight.push(f.sender.in_flight_packets());
            s.srtt_us.push(tp.srtt_us());
            s.min_rtt_us.push(if tp.min_rtt_us() == u32::MAX { 0 } else { tp.min_rtt_us() });
            s.delivery_rate_bps.push(f.sender.last_delivery_rate_bps);
            s.throughput_bps.push(Rate::from_bytes_over(delivered - f.last_sample_delivered, interval).0);
            s.delivered_bytes.push(delivered);
            s.retransmissions.push(f.sender.counters.retransmissions);
            s.ca_state.push(tp.ca_state as u8);
            s.pacing_rate_bps.push(if tp.pacing_status == crate::cc::PacingStatus::Needed { tp.pacing_rate * 8 } else { 0 });
            f.last_sample_delivered = delivered;
            if tp.cwnd == 0 {
                self.violations.push(format!("flow {}: cwnd 0 at {} ns", f.sender.flow, now.0));
            }
        }
        let l = &self.links[0];
        let q = &mut self.queue_series;
        q.t_ns.push(now.0);
        q.backlog_packets.push(l.backlog_packets());
        q.backlog_bytes.push(l.backlog_bytes());
        q.drops.push(l.stats.drops_queue + l.stats.drops_random + l.stats.drops_aqm);
        q.bytes_out.push(l.stats.bytes_out);
        q.rate_bps.push(l.rate().0);
    }

    fn finish(mut self) -> RunResult {
        let duration = self.cfg.run.duration;
        for f in &mut self.flows {
            if !f.start_snapshot_taken {
                Self::snapshot_start(f);
            }
            Self::snapshot_end(f);
        }
        self.check_invariants();
        let stats: &LinkStats = &self.links[0].stats;
        let link = LinkResult {
            rate_bps: self.cfg.network.bottleneck_rate.0,
            arrivals: stats.arrivals,
            departures: stats.departures,
            bytes_out: stats.bytes_out,
            drops_queue: stats.drops_queue,
            drops_random: stats.drops_random,
            drops_aqm: stats.drops_aqm,
            window_bytes_out: stats.bytes_out - self.window_bytes_start,
            ce_marks: self.links[0].qdisc_stats().ce_marks,
            qdisc: self.links[0].qdisc_stats(),
        };
        let mut flows = Vec::new();
        let mut flow_series = Vec::new();
        for (i, f) in self.flows.into_iter().enumerate() {
            let fc = &self.cfg.flows[i];
            let mut counters = f.sender.counters.clone();
            counters.bytes_delivered = f.receiver.bytes_delivered;
            counters.duplicate_segments = f.receiver.duplicate_segments;
            counters.ce_marks = f.receiver.ce_marks;
            counters.drops = stats.flow_drops.get(i).copied().unwrap_or(0);
            counters.random_drops = stats.flow_random_drops.get(i).copied().unwrap_or(0);
            let tp = &f.sender.sock;
            flows.push(FlowResult {
                cca: fc.cca.clone(),
                label: fc.label.clone(),
                rtt_ns: fc.rtt.0,
                start_ns: f.start.0,
                stop_ns: fc.stop.map(|t| t.0),
                size_bytes: fc.size,
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
            queue_series: self.queue_series,
            link,
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
        let duration = self.cfg.run.duration;
        let link = &self.links[0];
        // The bottleneck never carries more than its capacity (one packet of slack
        // for the transmission in progress at the end).
        let capacity = link.rate().bytes_in(duration) + 1500;
        if link.stats.bytes_out > capacity {
            self.violations.push(format!(
                "bottleneck sent {} bytes, more than its capacity {} over the run",
                link.stats.bytes_out, capacity
            ));
        }
        // Every data packet sent is received, dropped, or still in the network.
        let mut in_network = vec![0u64; self.flows.len()];
        for p in &self.pipes {
            for pkt in p.packets() {
                if pkt.is_data() {
                    in_network[pkt.flow as usize] += 1;
                }
            }
        }
        for l in &self.links {
            for pkt in l.held_packets() {
                if pkt.is_data() {
                    in_network[pkt.flow as usize] += 1;
                }
            }
        }
        for (i, f) in self.flows.iter().enumerate() {
            let sent = f.sender.counters.segments_sent;
            let drops = link.stats.flow_drops.get(i).copied().unwrap_or(0);
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
        let _ = Payload::Datagram { seq: 0 };
    }
}
