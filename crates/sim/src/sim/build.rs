//! Building the dumbbell: the bottleneck links (a reverse one when traffic runs
//! in reverse), the access links and propagation legs of every route, the TCP
//! endpoints of configured flows, UDP sources, web generators and the first
//! events. Routes are short lists of hops; a propagation leg is a FIFO pipe,
//! or a delay line when its delay varies per packet (jitter) or many flows
//! share it (web traffic).

use super::{route, DelayedLeg, Flow, Hop, Route, Simulation, UdpFlow, WebRoutes, WebSlot, WebSource};
use crate::cc::{make_cca, CcaFactory, CongestionControl};
use crate::config::{ConfigError, SimConfig, Startup};
use crate::dist::{Dist, Sampler};
use crate::event::{Event, EventQueue};
use crate::host::rx::RxBatcher;
use crate::host::tso::WriteQueue;
use crate::host::HostConfig;
use crate::net::delay_line::{DelayLine, JitterConfig};
use crate::net::dynamics::PathDynamics;
use crate::net::stall::Stalls;
use crate::net::link::Link;
use crate::net::loss::LossSpec;
use crate::net::pipe::Pipe;
use crate::net::qdisc::build_qdisc;
use crate::records::QueueSeries;
use crate::rng::Rng;
use crate::tcp::receiver::{AppReads, TcpReceiver};
use crate::tcp::sender::TcpSender;
use crate::tcp::TcpConfig;
use crate::traffic::iperf3::Iperf3Exchange;
use crate::traffic::udp::UdpSchedule;
use crate::traffic::web::{WebArrival, WebGenerator};
use crate::traffic::Direction;
use crate::units::{Dur, Rate, Time};

/// The legs of the network as they are created.
struct Topology {
    access: Rate,
    /// The bottlenecks are Linux routers: hosts hand them super-packets whole.
    whole_skbs: bool,
    reverse_bottleneck: bool,
    pipes: Vec<Pipe>,
    lines: Vec<DelayLine>,
    delayed_legs: Vec<DelayedLeg>,
}

impl Topology {
    fn pipe(&mut self, rate: Option<Rate>, delay: Dur) -> u32 {
        self.pipes.push(Pipe::new(rate, delay));
        (self.pipes.len() - 1) as u32
    }

    fn line(&mut self, jitter: Option<(JitterConfig, Rng)>, after_link: u32) -> u32 {
        self.lines.push(DelayLine::new(jitter));
        let id = (self.lines.len() - 1) as u32;
        if after_link == 0 {
            self.delayed_legs.push(DelayedLeg::Line(id));
        }
        id
    }

    /// The propagation leg after bottleneck `link`.
    fn leg(&mut self, link: u32, delay: Dur, jitter: Option<(JitterConfig, Rng)>) -> Hop {
        match jitter {
            Some(jitter) => Hop::Line { line: self.line(Some(jitter), link), delay },
            None => {
                let pipe = self.pipe(None, delay);
                if link == 0 {
                    self.delayed_legs.push(DelayedLeg::Pipe { pipe, base: delay });
                }
                Hop::Pipe(pipe)
            }
        }
    }

    /// A sender host's link to the bottleneck.
    fn access_pipe(&mut self) -> u32 {
        let id = self.pipe(Some(self.access), Dur::ZERO);
        if self.whole_skbs {
            self.pipes[id as usize].set_whole_skbs();
        }
        id
    }

    /// Sender host -> bottleneck of `dir` -> propagation -> `end`.
    fn data_route(&mut self, dir: Direction, delay: Dur, jitter: Option<(JitterConfig, Rng)>, end: Hop) -> Vec<Hop> {
        let access = self.access_pipe();
        let link = dir.data_link();
        vec![Hop::Pipe(access), Hop::Link(link), self.leg(link, delay, jitter), end]
    }

    /// Receiver host -> (reverse bottleneck) -> propagation -> sender; the
    /// propagation is late by `noise` per packet when given.
    fn ack_route(&mut self, dir: Direction, delay: Dur, noise: Option<(Dist, Rng)>, stalls: Option<Stalls>) -> Vec<Hop> {
        let hops = if self.reverse_bottleneck {
            // ACKs go straight to the bottleneck: serialising 52-80 bytes at the
            // access rate takes a tenth of a microsecond and would cost an event
            // per ACK.
            let link = dir.ack_link();
            vec![Hop::Link(link), self.leg(link, delay, None), Hop::Sender]
        } else {
            // Nothing queues on the way back: the access link and the propagation
            // delay in one pipe.
            vec![Hop::Pipe(self.pipe(Some(self.access), delay)), Hop::Sender]
        };
        // The propagation is the hop before the sender, a pipe either way.
        if let Hop::Pipe(pipe) = hops[hops.len() - 2] {
            if let Some((dist, rng)) = noise {
                self.pipes[pipe as usize].set_noise(dist, rng);
            }
            if let Some(stalls) = stalls {
                self.pipes[pipe as usize].set_stalls(stalls);
            }
        }
        hops
    }

    /// The routes of a web generator's flows in direction `dir`: a shared
    /// access link, and delay lines after the bottlenecks (one line serves
    /// every flow, each packet held for its own flow's delay). ACKs skip the
    /// access link as in `ack_route`; without a reverse bottleneck the line
    /// is all of their way back.
    fn web_routes(&mut self, dir: Direction) -> WebRoutes {
        let access = self.access_pipe();
        let link = dir.data_link();
        let line = self.line(None, link);
        let data = route(&[Hop::Pipe(access), Hop::Link(link), Hop::Line { line, delay: Dur::ZERO }, Hop::Receiver]);
        let ack = if self.reverse_bottleneck {
            let link = dir.ack_link();
            let line = self.line(None, link);
            route(&[Hop::Link(link), Hop::Line { line, delay: Dur::ZERO }, Hop::Sender])
        } else {
            let line = self.line(None, u32::MAX);
            route(&[Hop::Line { line, delay: Dur::ZERO }, Hop::Sender])
        };
        WebRoutes { data, ack }
    }
}

/// The two TCP endpoints of a flow.
fn endpoints(
    id: u32,
    tcp: &TcpConfig,
    cc: Box<dyn CongestionControl>,
    size: Option<u64>,
    flow_seed: u64,
    hosts: &HostConfig,
) -> (TcpSender, TcpReceiver) {
    // The receiver follows the sender's SACK setting (negotiated in the SYN).
    let mut rcv_tcp = tcp.clone();
    if let Some(sack) = cc.sack() {
        rcv_tcp.sack = sack;
    }
    // Per-packet receive timestamps (RAPID) need per-packet ACKs and sends:
    // such algorithms run without offloads, as their Linux versions do.
    let per_packet = cc.wants_ack_every_segment();
    if per_packet {
        rcv_tcp.delayed_ack = false;
    }
    // An algorithm that needs ECN asks for it in its SYN, and a Linux peer
    // accepts (net.ipv4.tcp_ecn = 2, the default, or a listener running the
    // same algorithm); one that needs Accurate ECN gets AccECN feedback from
    // it. The receiving socket runs the same algorithm (DCTCP's ACK rules).
    if cc.needs_ecn() || cc.needs_accecn() {
        rcv_tcp.ecn = true;
    }
    let ce_state_acks = cc.needs_ecn() && cc.ce_state_acks();
    let accecn = cc.needs_accecn();
    let mut sender = TcpSender::new(id, tcp, cc, size);
    sender.sock.flow_seed = flow_seed;
    // Linux's TCP always builds super-packets (GSO); a device without
    // segmentation offload segments them in software as they leave.
    sender.tso = (hosts.tso || hosts.gso) && !per_packet;
    sender.segment_at_device = sender.tso && !hosts.tso;
    sender.tsq = hosts.tsq.then(Default::default);
    sender.write_queue = hosts.write_queue.then(|| WriteQueue::new(tcp.mss));
    sender.tso_defer = hosts.tso_defer;
    let mut receiver = TcpReceiver::new(id, &rcv_tcp, size);
    if ce_state_acks {
        receiver.set_ce_state_acks();
    }
    if accecn {
        receiver.set_accecn();
    }
    receiver.set_window_phase(Rng::stream(flow_seed, "rcv-window"));
    if hosts.app_reads {
        receiver.set_app_reads(AppReads {
            wait: Sampler::new(hosts.read_wait.clone()),
            rng: Rng::stream(flow_seed, "app-reads"),
            block: hosts.read_size,
            again: Sampler::new(hosts.read_again_wait.clone()),
            again_rng: Rng::stream(flow_seed, "app-reads-again"),
        });
    }
    (sender, receiver)
}

/// A receiver's batching (None: packets are processed as they arrive).
fn rx_batcher(hosts: &HostConfig, seed: u64, stream: &str) -> Option<RxBatcher> {
    hosts.rx_batching.then(|| RxBatcher::new(hosts.rx_hold.clone(), Rng::stream(seed, stream)))
}

/// Builds the algorithm `name` from the caller's factory if it is one of its
/// own, else from the engine's catalogue.
fn build_cca(
    factory: Option<&dyn CcaFactory>,
    name: &str,
    params: &std::collections::BTreeMap<String, crate::cc::ParamValue>,
) -> Result<Box<dyn CongestionControl>, String> {
    factory.and_then(|f| f.build(name, params)).unwrap_or_else(|| make_cca(name, params))
}

/// A half of a two-way delay: the data direction gets the floor.
fn halves(rtt: Dur) -> (Dur, Dur) {
    (Dur(rtt.0 / 2), Dur(rtt.0 - rtt.0 / 2))
}

impl Simulation {
    /// A simulation whose flows (long and web) may also use algorithms from
    /// `factory`; the simulation keeps it to build web flows as they arrive.
    pub fn with_factory(cfg: SimConfig, factory: Option<Box<dyn CcaFactory>>) -> Result<Simulation, ConfigError> {
        let external = factory.as_ref().map(|f| f.names()).unwrap_or_default();
        cfg.validate_with(&external)?;
        let fac = factory.as_deref();
        let seed = cfg.run.seed;
        let net = &cfg.network;
        let end = Time(cfg.run.duration.0);
        let warmup = Time(cfg.run.warmup.0);
        let mut topo = Topology {
            access: cfg.hosts.line_rate.or(net.access_rate).unwrap_or(Rate(net.bottleneck_rate.0.saturating_mul(10))),
            whole_skbs: net.gso_burst().is_some(),
            reverse_bottleneck: cfg.has_reverse_traffic(),
            pipes: Vec::new(),
            lines: Vec::new(),
            delayed_legs: Vec::new(),
        };
        let mut links = vec![Link::new(
            net.bottleneck_rate,
            build_qdisc(&net.qdisc, net.buffer, net.bottleneck_rate, Rng::stream(seed, "bottleneck-aqm")),
            &net.loss,
            Rng::stream(seed, "bottleneck-loss"),
        )];
        if let Some(trace) = &net.trace {
            links[0].set_trace(trace);
        }
        if let Some(burst) = net.gso_burst() {
            links[0].set_gso_burst(burst);
            if let Some(stalls) = &net.router_stalls {
                links[0].set_stalls(Stalls::new(stalls, Rng::stream(seed, "router-stalls")));
            }
        }
        if topo.reverse_bottleneck {
            links.push(Link::new(
                net.bottleneck_rate,
                build_qdisc(&net.qdisc, net.buffer, net.bottleneck_rate, Rng::stream(seed, "reverse-bottleneck-aqm")),
                &LossSpec::none(),
                Rng::stream(seed, "reverse-bottleneck-loss"),
            ));
            if let Some(burst) = net.gso_burst() {
                links[1].set_gso_burst(burst);
                if let Some(stalls) = &net.router_stalls {
                    links[1].set_stalls(Stalls::new(stalls, Rng::stream(seed, "reverse-router-stalls")));
                }
            }
        }
        let mut events = EventQueue::new();
        let starts = cfg.flow_starts();
        let rtts = cfg.flow_rtts();
        let mut flows = Vec::new();
        let mut routes: Vec<[Route; 2]> = Vec::new();
        let return_noise = cfg.network.delay_noise.clone();
        for (i, f) in cfg.flows.iter().enumerate() {
            let id = i as u32;
            let start = starts[i];
            let cc = build_cca(fac, &f.cca, &f.cca_params).map_err(|e| ConfigError::parse(&e).within(&format!("flows[{i}]")))?;
            let (half, ack_delay) = halves(rtts[i]);
            let data_delay = half + f.data_delay;
            let jitter = f.jitter.clone().map(|j| (j, Rng::stream(seed, &format!("jitter-{i}"))));
            let fwd = topo.data_route(f.direction, data_delay, jitter, Hop::Receiver);
            let noise = return_noise.clone().map(|d| (d, Rng::stream(seed, &format!("delay-noise-{i}"))));
            // One stream for every flow: each leg draws the same stalls.
            let stalls = cfg.network.return_stalls.as_ref().map(|c| Stalls::new(c, Rng::stream(seed, "return-stalls")));
            let rev = topo.ack_route(f.direction, ack_delay, noise, stalls);
            let flow_seed = Rng::stream(seed, &format!("cca-{id}")).next_u64();
            let (sender, receiver) = endpoints(id, &f.tcp, cc, f.size, flow_seed, &cfg.hosts);
            routes.push([route(&fwd), route(&rev)]);
            let window = (start.max(warmup), f.stop.map_or(end, |s| s.min(end)));
            let path_rtt = rtts[i] + f.data_delay;
            let mut flow = Flow::new(sender, receiver, start, path_rtt, window, 0, None);
            if f.startup == Startup::Iperf3 {
                // The tool's exchange runs over the flow's routes from `start`
                // and opens the data connection (traffic/iperf3.rs).
                flow.sender.hold_app();
                let exchange = Iperf3Exchange::new(f.tcp.hz)
                    .with_test_start_wait(cfg.hosts.iperf3_test_start_wait.clone(), Rng::stream(flow_seed, "iperf3-test-start"));
                flow.startup = Some(Box::new(exchange));
            }
            flow.rx = rx_batcher(&cfg.hosts, seed, &format!("rx-hold-{i}"));
            flows.push(flow);
            events.schedule(start, Event::FlowStart(id));
            if let Some(stop) = f.stop {
                if stop <= end {
                    events.schedule(stop, Event::FlowStop(id));
                }
            }
        }
        let mut udp = Vec::new();
        for (i, u) in cfg.udp.iter().enumerate() {
            let id = i as u32;
            let route_hops = topo.data_route(u.direction, halves(u.rtt).0, None, Hop::UdpSink);
            let window_start = u.start.max(warmup);
            let window_end = u.stop.map_or(end, |s| s.min(end));
            if u.start <= end {
                events.schedule(u.start, Event::UdpSend(id));
            }
            if window_start <= end {
                events.schedule(window_start, Event::UdpStart(id));
            }
            if window_end < end {
                events.schedule(window_end, Event::UdpStop(id));
            }
            udp.push(UdpFlow {
                schedule: UdpSchedule::new(u.clone(), Rng::stream(seed, &format!("udp-{i}"))),
                route: route(&route_hops),
                seq: 0,
                sent_packets: 0,
                sent_bytes: 0,
                received_packets: 0,
                received_bytes: 0,
                window_start,
                window_end,
                bytes_at_window_start: None,
                bytes_at_window_end: None,
                series: Default::default(),
                last_sample_bytes: 0,
            });
        }
        let mut web = Vec::new();
        for (i, w) in cfg.web.iter().enumerate() {
            if external.contains(&w.cca) {
                // The caller's algorithm checks its parameters when built: build
                // one now, so a bad one is refused before the run starts.
                build_cca(fac, &w.cca, &w.cca_params).map_err(|e| ConfigError::parse(&e).within(&format!("web[{i}]")))?;
            }
            let routes = topo.web_routes(w.direction);
            let mut generator = WebGenerator::new(w.clone(), seed, i);
            if let Some(t) = generator.first_arrival() {
                if t <= end {
                    events.schedule(t, Event::WebArrival(i as u32));
                }
            }
            web.push(WebSource { generator, routes, started: 0, offered_bytes: 0 });
        }
        let dynamics = net
            .dynamics
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let first = d.first_change();
                if first <= end {
                    events.schedule(first, Event::PathChange(i as u32));
                }
                PathDynamics::new(d.clone(), Rng::stream(seed, &format!("dynamics-{i}")))
            })
            .collect();
        events.schedule(warmup, Event::WarmupEnd);
        events.schedule(Time(cfg.run.sample_interval.0), Event::Sample);
        let n_links = links.len();
        Ok(Simulation {
            configured: flows.len(),
            now: Time::ZERO,
            events,
            pipes: topo.pipes,
            lines: topo.lines,
            links,
            flows,
            routes,
            free_slots: Vec::new(),
            udp,
            web,
            short_flows: Vec::new(),
            dynamics,
            loss_changes: 0,
            delayed_legs: topo.delayed_legs,
            queue_series: vec![QueueSeries::default(); n_links],
            out: Vec::with_capacity(64),
            batch: Vec::new(),
            link_out: Vec::new(),
            pipe_out: Vec::new(),
            window_bytes_start: vec![0; n_links],
            window_capacity_start: vec![0; n_links],
            last_sample_capacity: vec![0; n_links],
            data_packets_forwarded: 0,
            violations: Vec::new(),
            factory,
            cfg,
        })
    }

    /// Puts a new web flow in a free slot (or a new one); returns the slot.
    pub(super) fn place_web_flow(&mut self, g: u32, arrival: WebArrival, record: u32) -> u32 {
        let now = self.now;
        let end = Time(self.cfg.run.duration.0);
        let src = &self.web[g as usize];
        let w = src.generator.config();
        let cc = build_cca(self.factory.as_deref(), &w.cca, &w.cca_params).expect("web generator's algorithm was built at the start");
        let slot = self.free_slots.pop().unwrap_or(self.flows.len() as u32);
        let flow_seed = Rng::stream(self.cfg.run.seed, &format!("web-cca-{record}")).next_u64();
        let (sender, receiver) = endpoints(slot, &w.tcp, cc, Some(arrival.size), flow_seed, &self.cfg.hosts);
        let (data_delay, ack_delay) = halves(arrival.rtt);
        let routes = src.routes.with_delays(data_delay, ack_delay);
        let epoch = self.flows.get(slot as usize).map_or(0, |f| f.epoch.wrapping_add(1));
        let web = Some(WebSlot { record, size: arrival.size });
        let mut flow = Flow::new(sender, receiver, now, arrival.rtt, (now, end), epoch, web);
        flow.rx = rx_batcher(&self.cfg.hosts, self.cfg.run.seed, &format!("web-rx-hold-{record}"));
        if (slot as usize) < self.flows.len() {
            self.flows[slot as usize] = flow;
            self.routes[slot as usize] = routes;
        } else {
            self.flows.push(flow);
            self.routes.push(routes);
        }
        slot
    }
}
