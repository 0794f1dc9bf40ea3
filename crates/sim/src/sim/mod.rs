//! The simulation: builds the dumbbell from a `SimConfig` (see `build`), runs
//! the event loop and returns a `RunResult` (see `results`). Each TCP flow has
//! a data route (sender -> access link -> bottleneck of its direction ->
//! propagation leg -> receiver) and an ACK route back; UDP datagrams follow a
//! data route to a sink. Packets carry their position along the route.
//!
//! Timers of the endpoints are kept in the endpoints and mirrored lazily into
//! the event queue: at most one pending event per timer, re-pushed only when a
//! deadline moves earlier or comes due. Web-like short flows are opened by
//! their generators while the run goes on and reuse the slots of finished
//! ones; a slot's epoch tells a new occupant's packets from stragglers of the
//! previous one.

mod build;
mod results;

pub use results::{FlowResult, LinkResult, RunResult, UdpResult, WebResult};

use crate::cc::CcaFactory;
use crate::config::{ConfigError, SimConfig};
use crate::event::{Event, EventQueue, TimerKind, TIMER_KINDS};
use crate::host::rx::RxBatcher;
use crate::net::delay_line::DelayLine;
use crate::net::dynamics::PathDynamics;
use crate::net::link::Link;
use crate::net::pipe::Pipe;
use crate::packet::{Packet, Payload};
use crate::records::{FlowSeries, QueueSeries, ShortFlowRecord, UdpSeries};
use crate::rng::Rng;
use crate::tcp::receiver::TcpReceiver;
use crate::tcp::sender::TcpSender;
use crate::traffic::iperf3::{Iperf3Exchange, Message, Step};
use crate::traffic::udp::UdpSchedule;
use crate::traffic::web::WebGenerator;
use crate::units::{Dur, Rate, Time};

/// One step of a route.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Hop {
    Pipe(u32),
    Link(u32),
    /// A delay line, holding the packet for `delay` (plus the line's jitter).
    Line { line: u32, delay: Dur },
    Receiver,
    Sender,
    UdpSink,
}

/// A route: at most four hops (access, bottleneck, propagation, endpoint),
/// stored inline so that forwarding a packet reads one small table.
pub(crate) type Route = [Hop; 4];

pub(crate) fn route(hops: &[Hop]) -> Route {
    let mut r = [Hop::Sender; 4];
    r[..hops.len()].copy_from_slice(hops);
    r
}

/// Packets of UDP source `i` carry endpoint id `UDP_BASE + i`.
pub(crate) const UDP_BASE: u32 = 1 << 31;

const ALL_TIMERS: [TimerKind; TIMER_KINDS] =
    [TimerKind::Xmit, TimerKind::Pacing, TimerKind::DelAck, TimerKind::CompressedAck, TimerKind::Syn];

/// A web flow occupying a slot.
#[derive(Clone, Copy, Debug)]
struct WebSlot {
    record: u32,
    size: u64,
}

struct Flow {
    sender: TcpSender,
    receiver: TcpReceiver,
    scheduled: [Option<Time>; TIMER_KINDS],
    series: FlowSeries,
    last_sample_delivered: u64,
    data_packets_received: u64,
    /// When the connection opens (the configured start plus jitter).
    start: Time,
    /// Two-way propagation delay of the path (drawn, for a distribution).
    rtt: Dur,
    window_start: Time,
    window_end: Time,
    start_snapshot_taken: bool,
    end_snapshot_taken: bool,
    epoch: u16,
    web: Option<WebSlot>,
    /// The receiver's batched processing (`hosts.rx_batching`).
    rx: Option<RxBatcher>,
    /// Segments of a super-packet a Linux router forwarded whole, until all
    /// have arrived: the receiver gets them as one skb.
    skb: Vec<Packet>,
    /// The tool's start-up exchange until the application writes
    /// (`startup = "iperf3"`).
    startup: Option<Box<Iperf3Exchange>>,
}

impl Flow {
    /// A connection opening at `start` over a path of two-way delay `rtt`,
    /// measured in `window`. A web flow (`web` set) has no measurement window
    /// of its own: its snapshots count as taken.
    fn new(sender: TcpSender, receiver: TcpReceiver, start: Time, rtt: Dur, window: (Time, Time), epoch: u16, web: Option<WebSlot>) -> Flow {
        Flow {
            sender,
            receiver,
            scheduled: [None; TIMER_KINDS],
            series: FlowSeries::default(),
            last_sample_delivered: 0,
            data_packets_received: 0,
            start,
            rtt,
            window_start: window.0,
            window_end: window.1,
            start_snapshot_taken: web.is_some(),
            end_snapshot_taken: web.is_some(),
            epoch,
            web,
            rx: None,
            skb: Vec::new(),
            startup: None,
        }
    }
}

struct UdpFlow {
    schedule: UdpSchedule,
    route: Route,
    seq: u32,
    sent_packets: u64,
    sent_bytes: u64,
    received_packets: u64,
    received_bytes: u64,
    window_start: Time,
    window_end: Time,
    bytes_at_window_start: Option<u64>,
    bytes_at_window_end: Option<u64>,
    series: UdpSeries,
    last_sample_bytes: u64,
}

/// A web generator and the routes its flows share.
struct WebSource {
    generator: WebGenerator,
    routes: WebRoutes,
    started: u64,
    offered_bytes: u64,
}

/// The data and ACK routes of a web generator's flows: shared legs, where
/// delay lines hold each flow's packets for that flow's own delays.
#[derive(Clone, Copy, Debug)]
struct WebRoutes {
    data: Route,
    ack: Route,
}

impl WebRoutes {
    /// The routes of a flow whose one-way delays are `data` and `ack`.
    fn with_delays(&self, data: Dur, ack: Dur) -> [Route; 2] {
        let set = |mut r: Route, d: Dur| {
            for hop in &mut r {
                if let Hop::Line { delay, .. } = hop {
                    *delay = d;
                }
            }
            r
        };
        [set(self.data, data), set(self.ack, ack)]
    }
}

/// A propagation leg after the forward bottleneck, whose delay follows the
/// bottleneck's extra delay (path dynamics).
#[derive(Clone, Copy, Debug)]
enum DelayedLeg {
    Pipe { pipe: u32, base: Dur },
    Line(u32),
}

pub struct Simulation {
    cfg: SimConfig,
    now: Time,
    events: EventQueue,
    pipes: Vec<Pipe>,
    lines: Vec<DelayLine>,
    links: Vec<Link>,
    flows: Vec<Flow>,
    /// Data and ACK routes of each flow slot.
    routes: Vec<[Route; 2]>,
    /// Flows from the configuration (the first entries of `flows`).
    configured: usize,
    free_slots: Vec<u32>,
    udp: Vec<UdpFlow>,
    web: Vec<WebSource>,
    short_flows: Vec<ShortFlowRecord>,
    dynamics: Vec<PathDynamics>,
    /// Loss processes installed by path changes so far (each gets its own stream).
    loss_changes: u64,
    delayed_legs: Vec<DelayedLeg>,
    /// One series per bottleneck (forward, then reverse).
    queue_series: Vec<QueueSeries>,
    out: Vec<Packet>,
    /// A receiver's batch being processed (reused buffer).
    batch: Vec<Packet>,
    /// What a link or a pipe hands on in one event (reused buffers).
    link_out: Vec<Packet>,
    pipe_out: Vec<Packet>,
    window_bytes_start: Vec<u64>,
    window_capacity_start: Vec<u64>,
    last_sample_capacity: Vec<u64>,
    data_packets_forwarded: u64,
    violations: Vec<String>,
    /// Builds the caller's algorithms (for web flows opened during the run).
    factory: Option<Box<dyn CcaFactory>>,
}

impl Simulation {
    pub fn new(cfg: SimConfig) -> Result<Simulation, ConfigError> {
        Self::with_factory(cfg, None)
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
                    if next == Some(now) {
                        if let Some(second) = self.pipes[p as usize].pop_continuation(now, &pkt) {
                            self.forward_skb(p, pkt, second);
                            return;
                        }
                    }
                    if let Some(t) = next {
                        self.events.schedule(t, Event::PipeHead(p));
                    }
                    self.forward(pkt);
                    if pkt.hop == 0 && !pkt.reverse && pkt.flow < UDP_BASE {
                        self.nic_tx_done(&pkt);
                    }
                }
            }
            Event::LineHead(l) => {
                self.lines[l as usize].woke(now);
                while let Some(pkt) = self.lines[l as usize].pop_due(now) {
                    self.forward(pkt);
                }
                if let Some(t) = self.lines[l as usize].rearm() {
                    self.events.schedule(t, Event::LineHead(l));
                }
            }
            Event::LinkDone(l) => {
                let mut done = std::mem::take(&mut self.link_out);
                let next = self.links[l as usize].complete(now, &mut done);
                if let Some(t) = next {
                    self.events.schedule(t, Event::LinkDone(l));
                }
                for pkt in done.drain(..) {
                    if pkt.is_data() {
                        self.data_packets_forwarded += pkt.segs() as u64;
                    }
                    self.forward(pkt);
                }
                self.link_out = done;
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
                if let Some(x) = &mut self.flows[id as usize].startup {
                    let first = x.launch(now);
                    self.send_control(id, first);
                } else {
                    self.open_data_connection(id);
                }
            }
            Event::StartupTimer(id) => {
                let resend = self.flows[id as usize].startup.as_mut().and_then(|x| x.on_timer(now));
                if let Some(m) = resend {
                    self.send_control(id, m);
                }
            }
            Event::FlowStop(id) => {
                let f = &mut self.flows[id as usize];
                f.sender.stop_app(now);
                Self::snapshot_end(f);
            }
            Event::WarmupEnd => {
                for (i, l) in self.links.iter().enumerate() {
                    self.window_bytes_start[i] = l.stats.bytes_out;
                    self.window_capacity_start[i] = l.capacity_bytes(now);
                }
                for f in &mut self.flows[..self.configured] {
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
            Event::PathChange(i) => self.change_path(i),
            Event::UdpSend(s) => self.send_datagram(s),
            Event::WebArrival(g) => self.open_web_flow(g),
            Event::RxBatch(flow) => self.receive_batch(flow),
            Event::UdpStart(s) => {
                let u = &mut self.udp[s as usize];
                u.bytes_at_window_start.get_or_insert(u.received_bytes);
            }
            Event::UdpStop(s) => {
                let u = &mut self.udp[s as usize];
                u.bytes_at_window_end.get_or_insert(u.received_bytes);
            }
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
        let hop = if pkt.flow >= UDP_BASE {
            self.udp[(pkt.flow - UDP_BASE) as usize].route[pkt.hop as usize]
        } else {
            self.routes[pkt.flow as usize][pkt.reverse as usize][pkt.hop as usize]
        };
        match hop {
            Hop::Pipe(p) => {
                if let Some(t) = self.pipes[p as usize].push(now, pkt) {
                    self.events.schedule(t, Event::PipeHead(p));
                }
            }
            Hop::Line { line, delay } => {
                // Delay lines hold segments (jitter acts per packet). A jittered
                // line scatters an skb's segments over its delay spread, so the
                // receiver gets them one by one, not as the skb a Linux
                // router queued whole (it would wait for all of them).
                let separate = self.lines[line as usize].separates_segments();
                for i in 0..pkt.segs() {
                    let mut seg = pkt.segment(i);
                    if separate {
                        if let Payload::Data(d) = &mut seg.payload {
                            d.gso.whole = false;
                        }
                    }
                    if let Some(t) = self.lines[line as usize].push(now, delay, seg) {
                        self.events.schedule(t, Event::LineHead(line));
                    }
                }
            }
            Hop::Link(l) => match self.links[l as usize].arrive(now, pkt) {
                Ok(Some(t)) => self.events.schedule(t, Event::LinkDone(l)),
                Ok(None) => {}
                Err(_dropped) => {}
            },
            Hop::Receiver => {
                let f = &mut self.flows[pkt.flow as usize];
                if pkt.epoch != f.epoch {
                    return;
                }
                if let Payload::Control { message } = pkt.payload {
                    self.control_arrived(pkt.flow, message);
                    return;
                }
                // A bundle reaches the receiver as its segments, in order.
                if let Some(rx) = &mut f.rx {
                    for i in 0..pkt.segs() {
                        if let Some(due) = rx.arrive(now, pkt.segment(i)) {
                            self.events.schedule(due, Event::RxBatch(pkt.flow));
                        }
                    }
                    return;
                }
                if let Payload::Data(d) = &pkt.payload {
                    if d.gso.whole {
                        // One skb: processed when its last segment is in,
                        // and acknowledged as one (as GRO hands it over).
                        let n = pkt.segs();
                        if f.skb.is_empty() && n == d.gso.segs as u32 {
                            // All of it in this packet: nothing to gather.
                            self.process_batch(pkt.flow, (0..n).map(|i| pkt.segment(i)), true);
                            return;
                        }
                        f.skb.extend((0..n).map(|i| pkt.segment(i)));
                        if f.skb.len() < d.gso.segs as usize {
                            return;
                        }
                        let mut skb = std::mem::take(&mut f.skb);
                        self.process_batch(pkt.flow, skb.drain(..), true);
                        self.flows[pkt.flow as usize].skb = skb;
                        return;
                    }
                }
                for i in 0..pkt.segs() {
                    self.deliver(pkt.segment(i));
                    self.flush_out(pkt.flow, true);
                    self.sync_timers(pkt.flow);
                }
            }
            Hop::Sender => {
                let f = &mut self.flows[pkt.flow as usize];
                if pkt.epoch != f.epoch {
                    return;
                }
                let synack = match pkt.payload {
                    Payload::Control { message } => {
                        self.control_arrived(pkt.flow, message);
                        return;
                    }
                    Payload::SynAck { .. } => true,
                    _ => false,
                };
                f.sender.on_packet(now, &pkt, &mut self.out);
                self.flush_out(pkt.flow, false);
                self.sync_timers(pkt.flow);
                if synack {
                    self.data_connection_established(pkt.flow);
                }
                let f = &self.flows[pkt.flow as usize];
                if f.web.is_some() && f.sender.counters.completion_ns != 0 {
                    self.retire_web_flow(pkt.flow);
                }
            }
            Hop::UdpSink => {
                let u = &mut self.udp[(pkt.flow - UDP_BASE) as usize];
                u.received_packets += 1;
                u.received_bytes += pkt.wire_bytes as u64;
            }
        }
    }

    /// Opens flow `id`'s data connection (its SYN).
    fn open_data_connection(&mut self, id: u32) {
        self.flows[id as usize].sender.connect(self.now, &mut self.out);
        self.flush_out(id, false);
        self.sync_timers(id);
    }

    /// Puts a message of flow `id`'s start-up exchange on its route (the
    /// data route from the client, the ACK route from the server) and arms
    /// the exchange's timer.
    fn send_control(&mut self, id: u32, message: Message) {
        let f = &self.flows[id as usize];
        let pkt = Packet {
            flow: id,
            wire_bytes: message.wire_bytes(),
            reverse: !message.from_client(),
            hop: 0,
            epoch: f.epoch,
            payload: Payload::Control { message: message.index() },
        };
        self.arm_startup_timer(id);
        self.enter(pkt);
    }

    /// Schedules flow `id`'s start-up exchange at its next deadline (a
    /// resend, or the server's answer after its wait).
    fn arm_startup_timer(&mut self, id: u32) {
        if let Some(t) = self.flows[id as usize].startup.as_ref().and_then(|x| x.deadline()) {
            self.events.schedule(t, Event::StartupTimer(id));
        }
    }

    /// A start-up message reached its end of flow `id`'s path.
    fn control_arrived(&mut self, id: u32, index: u8) {
        let now = self.now;
        let Some(message) = Message::from_index(index) else { return };
        let Some(x) = self.flows[id as usize].startup.as_mut() else { return };
        match x.arrived(now, message) {
            Some(Step::Send(answer)) => self.send_control(id, answer),
            Some(Step::OpenData) => self.open_data_connection(id),
            Some(Step::Wait) => self.arm_startup_timer(id),
            Some(Step::Release) => {
                let f = &mut self.flows[id as usize];
                f.startup = None;
                f.sender.release_app(now, &mut self.out);
                self.flush_out(id, false);
                self.sync_timers(id);
            }
            None => {}
        }
    }

    /// A SYN-ACK reached flow `id`'s sender: if its tool was waiting for the
    /// data connection, the connection's cookie follows.
    fn data_connection_established(&mut self, id: u32) {
        let now = self.now;
        let f = &mut self.flows[id as usize];
        let Some(x) = f.startup.as_mut() else { return };
        if x.awaiting_data() && f.sender.is_established() {
            let cookie = x.data_established(now, f.sender.srtt_us(), f.sender.rto_us());
            self.send_control(id, cookie);
        }
    }

    /// The segments of one super-packet that arrive together at the end of
    /// pipe `p` (`first`, `second` and the rest of it), forwarded in one event.
    fn forward_skb(&mut self, p: u32, first: Packet, second: Packet) {
        let now = self.now;
        let mut skb = std::mem::take(&mut self.pipe_out);
        skb.push(first);
        skb.push(second);
        while let Some(next) = self.pipes[p as usize].pop_continuation(now, skb.last().expect("non-empty")) {
            skb.push(next);
        }
        if let Some(t) = self.pipes[p as usize].head_time() {
            self.events.schedule(t, Event::PipeHead(p));
        }
        for pkt in skb.drain(..) {
            self.forward(pkt);
            if pkt.hop == 0 && !pkt.reverse && pkt.flow < UDP_BASE {
                self.nic_tx_done(&pkt);
            }
        }
        self.pipe_out = skb;
    }

    /// A data segment left its sender's NIC (the access link, the first hop of
    /// every data route): TCP Small Queues may let the sender write again.
    fn nic_tx_done(&mut self, pkt: &Packet) {
        let Payload::Data(d) = &pkt.payload else { return };
        let f = &mut self.flows[pkt.flow as usize];
        if pkt.epoch != f.epoch || f.sender.tsq.is_none() {
            return;
        }
        let last = d.gso.bundle || d.gso.segs <= 1 || d.gso.index + 1 == d.gso.segs;
        let payload = if d.gso.bundle { d.payload * (d.gso.segs as u32 - 1) + d.gso.tail } else { d.payload };
        if f.sender.nic_tx_done(self.now, payload, last, &mut self.out) {
            self.flush_out(pkt.flow, false);
            self.sync_timers(pkt.flow);
        }
    }

    /// Hands a packet to its flow's receiver.
    fn deliver(&mut self, pkt: Packet) {
        let now = self.now;
        let f = &mut self.flows[pkt.flow as usize];
        if pkt.epoch != f.epoch {
            return;
        }
        // A flow's window opens when its first data packet can arrive; take
        // the start snapshot lazily for flows that start after warmup (web
        // flows have no window: theirs is marked taken).
        if !f.start_snapshot_taken && now >= f.window_start {
            Self::snapshot_start(f);
        }
        if pkt.is_data() {
            f.data_packets_received += 1;
        }
        f.receiver.on_packet(now, &pkt, &mut self.out);
        if let Some(w) = f.web {
            let r = &mut self.short_flows[w.record as usize];
            if r.fct_ns.is_none() && f.receiver.bytes_delivered >= w.size {
                r.fct_ns = Some(now.0 - r.start_ns);
            }
        }
    }

    /// A receiver's batch is due: process its packets in arrival order and
    /// acknowledge them as one (host/rx.rs).
    fn receive_batch(&mut self, flow: u32) {
        let now = self.now;
        let mut batch = std::mem::take(&mut self.batch);
        {
            let f = &mut self.flows[flow as usize];
            let Some(rx) = &mut f.rx else { return };
            if rx.due() != Some(now) {
                self.batch = batch;
                return;
            }
            rx.take(&mut batch);
        }
        self.process_batch(flow, batch.drain(..), false);
        self.batch = batch;
    }

    /// Hands `batch` to the flow's receiver as one batch, or with `one_skb`
    /// as the segments of one skb, and sends what it answers.
    fn process_batch(&mut self, flow: u32, batch: impl Iterator<Item = Packet>, one_skb: bool) {
        let now = self.now;
        self.flows[flow as usize].receiver.begin_batch(one_skb);
        for pkt in batch {
            self.deliver(pkt);
        }
        self.flows[flow as usize].receiver.end_batch(now, &mut self.out);
        self.flush_out(flow, true);
        self.sync_timers(flow);
    }

    /// Injects the packets an endpoint produced into their routes.
    fn flush_out(&mut self, flow: u32, from_receiver: bool) {
        if self.out.is_empty() {
            return;
        }
        let epoch = self.flows[flow as usize].epoch;
        let mut out = std::mem::take(&mut self.out);
        for pkt in out.iter_mut() {
            pkt.flow = flow;
            pkt.reverse = from_receiver;
            pkt.hop = 0;
            pkt.epoch = epoch;
        }
        // A sender's super-packet arrives here as one packet (a bundle), to
        // be split only where a model acts per segment.
        for pkt in out.drain(..) {
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

    fn send_datagram(&mut self, s: u32) {
        let now = self.now;
        let u = &mut self.udp[s as usize];
        let bytes = u.schedule.config().packet_bytes;
        let pkt = Packet::datagram(UDP_BASE + s, bytes, u.seq);
        u.seq = u.seq.wrapping_add(1);
        u.sent_packets += 1;
        u.sent_bytes += bytes as u64;
        if let Some(next) = u.schedule.next_departure(now) {
            if next.0 <= self.cfg.run.duration.0 {
                self.events.schedule(next, Event::UdpSend(s));
            }
        }
        self.enter(pkt);
    }

    /// A web generator's arrival: open a connection in a free slot.
    fn open_web_flow(&mut self, g: u32) {
        let now = self.now;
        let src = &mut self.web[g as usize];
        let arrival = src.generator.draw();
        src.started += 1;
        src.offered_bytes += arrival.size;
        if let Some(next) = src.generator.after(now) {
            if next.0 <= self.cfg.run.duration.0 {
                self.events.schedule(next, Event::WebArrival(g));
            }
        }
        let record = self.short_flows.len() as u32;
        self.short_flows.push(ShortFlowRecord {
            generator: g,
            size_bytes: arrival.size,
            rtt_ns: arrival.rtt.0,
            start_ns: now.0,
            ..Default::default()
        });
        let slot = self.place_web_flow(g, arrival, record);
        self.flows[slot as usize].sender.connect(now, &mut self.out);
        self.flush_out(slot, false);
        self.sync_timers(slot);
    }

    /// A web flow's last byte was acknowledged: record it and free its slot.
    fn retire_web_flow(&mut self, slot: u32) {
        let f = &mut self.flows[slot as usize];
        let Some(w) = f.web.take() else { return };
        let c = &f.sender.counters;
        let r = &mut self.short_flows[w.record as usize];
        r.acked_ns = Some(c.completion_ns - r.start_ns);
        r.retransmissions = c.retransmissions;
        r.rtos = c.rtos;
        r.syn_retransmissions = c.syn_retransmissions;
        if f.receiver.bytes_delivered != w.size {
            self.violations.push(format!(
                "web flow {}: {} of {} bytes delivered when the sender saw all acknowledged",
                w.record, f.receiver.bytes_delivered, w.size
            ));
        }
        self.free_slots.push(slot);
    }

    fn change_path(&mut self, i: u32) {
        let now = self.now;
        let (setting, next) = self.dynamics[i as usize].fire(now);
        if let Some(t) = next {
            if t.0 <= self.cfg.run.duration.0 {
                self.events.schedule(t, Event::PathChange(i));
            }
        }
        if let Some(rate) = setting.rate {
            self.links[0].change_rate(now, rate);
        }
        if let Some(loss) = &setting.loss {
            self.loss_changes += 1;
            let rng = Rng::stream(self.cfg.run.seed, &format!("path-loss-{}", self.loss_changes));
            self.links[0].set_loss(loss, rng);
        }
        if let Some(extra) = setting.delay {
            for leg in &self.delayed_legs {
                match *leg {
                    DelayedLeg::Pipe { pipe, base } => self.pipes[pipe as usize].set_delay(base + extra),
                    DelayedLeg::Line(l) => self.lines[l as usize].set_extra_delay(extra),
                }
            }
        }
    }

    fn sample(&mut self) {
        let now = self.now;
        let interval = self.cfg.run.sample_interval;
        for f in self.flows[..self.configured].iter_mut() {
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
            // sk_pacing_rate as `ss` shows it: Linux computes it for every flow
            // (tcp_update_pacing_rate; it sizes TSO bursts and TSQ's budget)
            // whether or not anything enforces it.
            s.pacing_rate_bps.push(tp.pacing_rate.saturating_mul(8));
            if let Some(info) = f.sender.cc.get_info(tp) {
                s.cc_bw_bps.push(info.bw_bytes_per_s * 8);
                s.cc_min_rtt_us.push(if info.min_rtt_us == u32::MAX { 0 } else { info.min_rtt_us });
                s.cc_pacing_gain.push(info.pacing_gain);
                s.cc_cwnd_gain.push(info.cwnd_gain);
            }
            f.last_sample_delivered = delivered;
            if tp.cwnd == 0 {
                self.violations.push(format!("flow {}: cwnd 0 at {} ns", f.sender.flow, now.0));
            }
        }
        for u in &mut self.udp {
            u.series.t_ns.push(now.0);
            u.series.throughput_bps.push(Rate::from_bytes_over(u.received_bytes - u.last_sample_bytes, interval).0);
            u.series.received_bytes.push(u.received_bytes);
            u.last_sample_bytes = u.received_bytes;
        }
        for (i, (l, q)) in self.links.iter().zip(self.queue_series.iter_mut()).enumerate() {
            // A trace-driven link has no rate of its own: report what it offered
            // over the last interval.
            let capacity = l.capacity_bytes(now);
            let rate = if l.is_trace_driven() {
                Rate::from_bytes_over(capacity - self.last_sample_capacity[i], interval).0
            } else {
                l.rate().0
            };
            self.last_sample_capacity[i] = capacity;
            q.t_ns.push(now.0);
            q.backlog_packets.push(l.backlog_packets());
            q.backlog_bytes.push(l.backlog_bytes());
            q.drops.push(l.stats.drops_queue + l.stats.drops_random + l.stats.drops_aqm);
            q.bytes_out.push(l.stats.bytes_out);
            q.rate_bps.push(rate);
        }
    }
}
