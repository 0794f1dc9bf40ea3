//! A bottleneck link: a queue discipline in front of a transmitter of a given
//! rate, with optional i.i.d. random loss applied to arriving packets (the way
//! `netem loss` drops at enqueue). The transmitter is event driven: one event per
//! packet when its transmission completes, which is what lets the rate change
//! mid-run and AQMs act at dequeue.
//!
//! A Linux router (`set_gso_burst`) is a token bucket in front of a veth, as
//! `tbf` is: a packet leaves (at once: a veth has no rate of its own) when the
//! bucket holds the tokens for it, and a super-packet it queued whole leaves
//! whole, when the tokens for all of it have come; until then it counts in
//! the queue's backlog. The bucket fills while the queue is empty, up to the
//! burst (`tbf_dequeue`: tokens = min(tokens + elapsed, buffer)), and starts
//! full, so the first burst's worth of bytes after an idle spell passes
//! without waiting. One event moves the whole skb. (With a drop-tail child;
//! behind an AQM the link serves packet by packet at the rate.)

use super::queue::{Enqueued, QdiscStats, QueueDisc};
use crate::packet::{Packet, Payload};
use super::loss::{LossProcess, LossSpec};
use super::stall::Stalls;
use super::trace::{TraceConfig, TraceService};
use crate::rng::Rng;
use crate::units::{Rate, Time};

/// Counters of one link, per flow where it matters.
#[derive(Clone, Debug, Default)]
pub struct LinkStats {
    pub arrivals: u64,
    pub departures: u64,
    /// What the transmitter handed on, each counted once: a super-packet
    /// queued whole, or one packet (a segment `tbf_segment` split off, or
    /// any packet of a switch). departures / skbs_out is the bursts' size at
    /// the bottleneck, as a Linux router's interface counts them (tx_packets).
    pub skbs_out: u64,
    pub bytes_out: u64,
    pub drops_queue: u64,
    /// The queue's overflow drops as a Linux qdisc counts them (`qdisc_drop`,
    /// tc's "dropped"): a super-packet dropped whole counts once, any other
    /// packet once. drops_queue counts their segments.
    pub drops_queue_skbs: u64,
    pub drops_random: u64,
    pub drops_aqm: u64,
    /// Per-flow drops of data packets (queue + AQM + random), indexed by flow.
    pub flow_drops: Vec<u64>,
    /// Per-flow random (non-congestion) drops of data packets.
    pub flow_random_drops: Vec<u64>,
    /// Drops of packets that carry no data (SYNs, ACKs).
    pub control_drops: u64,
}

impl LinkStats {
    fn count_drop(&mut self, pkt: &Packet, random: bool) {
        self.count_drops(pkt, random, 1);
    }

    /// `n` packets like `pkt` dropped (the segments of one skb).
    fn count_drops(&mut self, pkt: &Packet, random: bool, n: u64) {
        if !pkt.is_data() {
            self.control_drops += n;
            return;
        }
        let f = pkt.flow as usize;
        if self.flow_drops.len() <= f {
            self.flow_drops.resize(f + 1, 0);
            self.flow_random_drops.resize(f + 1, 0);
        }
        self.flow_drops[f] += n;
        if random {
            self.flow_random_drops[f] += n;
        }
    }
}

/// What a Linux router decided for a super-packet it takes whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Admit,
    /// The queue had no room for all of it (bfifo drops the skb).
    Full,
    /// Random loss (netem's or iptables' drop acts per skb).
    Random,
}

#[derive(Clone, Copy, Debug)]
struct SkbDecision {
    epoch: u16,
    first_seq: u32,
    verdict: Verdict,
}

pub struct Link {
    rate: Rate,
    /// A Linux router's token bucket: super-packets up to this size are
    /// queued whole (None: a switch, every segment on its own).
    gso_burst: Option<u64>,
    /// The Linux router's bucket: its size as transmission time at the rate
    /// (tbf's `buffer`), the tokens (ns of transmission) it held after the
    /// last departure, and when that was (`t_c`).
    bucketed: bool,
    bucket_ns: u64,
    tokens_ns: u64,
    tokens_at: Time,
    /// The decision for each flow's latest super-packet.
    skbs: Vec<Option<SkbDecision>>,
    qdisc: Box<dyn QueueDisc>,
    in_service: Option<Packet>,
    /// A Linux router's stalls (none for a switch or without the setting).
    stalls: Option<Stalls>,
    /// The other segments of a super-packet in service whole.
    in_service_rest: Vec<Packet>,
    loss: LossProcess,
    pub stats: LinkStats,
    scratch_drops: Vec<Packet>,
    /// Integral of the rate over time up to `rate_since` (bit-nanoseconds per
    /// second), for the capacity of a link whose rate changes.
    capacity_bit_ns: u128,
    rate_since: Time,
    /// Trace-driven service (Mahimahi) instead of a fixed rate.
    trace: Option<TraceService>,
}

impl Link {
    pub fn new(rate: Rate, qdisc: Box<dyn QueueDisc>, loss: &LossSpec, loss_rng: Rng) -> Link {
        Link {
            rate,
            gso_burst: None,
            bucketed: false,
            bucket_ns: 0,
            tokens_ns: 0,
            tokens_at: Time::ZERO,
            skbs: Vec::new(),
            qdisc,
            in_service: None,
            stalls: None,
            in_service_rest: Vec::new(),
            loss: LossProcess::new(loss, loss_rng),
            stats: LinkStats::default(),
            scratch_drops: Vec::new(),
            capacity_bit_ns: 0,
            rate_since: Time::ZERO,
            trace: None,
        }
    }

    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// A new rate from `now`; it applies from the next packet that starts
    /// transmission (the one on the wire finishes at the old rate).
    pub fn change_rate(&mut self, now: Time, rate: Rate) {
        self.capacity_bit_ns += self.rate.0 as u128 * (now.0 - self.rate_since.0) as u128;
        self.rate_since = now;
        self.rate = rate;
        // The linux backend changes tbf's rate with its burst: the bucket's
        // time follows the new rate (`tc qdisc change` recomputes buffer).
        if let Some(burst) = self.gso_burst {
            self.bucket_ns = rate.tx_time(burst).0;
            self.tokens_ns = self.tokens_ns.min(self.bucket_ns);
        }
    }

    /// Serve packets at a trace's delivery opportunities from now on.
    pub fn set_trace(&mut self, cfg: &TraceConfig) {
        self.trace = Some(TraceService::new(cfg));
    }

    pub fn is_trace_driven(&self) -> bool {
        self.trace.is_some()
    }

    /// Bytes the link could have sent in [0, now].
    pub fn capacity_bytes(&self, now: Time) -> u64 {
        if let Some(t) = &self.trace {
            return t.capacity_bytes(now);
        }
        let bit_ns = self.capacity_bit_ns + self.rate.0 as u128 * now.0.saturating_sub(self.rate_since.0) as u128;
        (bit_ns / 8_000_000_000) as u64
    }

    /// Replaces the loss process (a path change); `rng` continues the stream.
    pub fn set_loss(&mut self, spec: &LossSpec, rng: Rng) {
        self.loss = LossProcess::new(spec, rng);
    }

    /// Make this bottleneck a Linux router whose tbf bucket is `burst` bytes.
    pub fn set_gso_burst(&mut self, burst: u64) {
        self.gso_burst = Some(burst);
        // tbf_change: the bucket starts full.
        self.bucketed = self.qdisc.takes_super_packets_whole();
        self.bucket_ns = self.rate.tx_time(burst).0;
        self.tokens_ns = self.bucket_ns;
    }

    /// Let this Linux router's qdisc stall as `stalls` draws (net/stall.rs).
    pub fn set_stalls(&mut self, stalls: Stalls) {
        if self.bucketed {
            self.stalls = Some(stalls);
        }
    }

    /// Linux `tbf_enqueue` for a segment of a super-packet: one that fits the
    /// bucket is queued (or dropped) whole, the decision taken when its first
    /// segment arrives; a larger one is split (`tbf_segment`) and its segments
    /// are queued one by one (None, as are packets of a switch).
    fn skb_verdict(&mut self, now: Time, pkt: &Packet) -> Option<Verdict> {
        let burst = self.gso_burst?;
        let Payload::Data(d) = &pkt.payload else { return None };
        if d.gso.segs <= 1 {
            return None;
        }
        let bytes = pkt.wire_bytes as u64 * d.gso.segs as u64;
        if bytes > burst {
            return None;
        }
        let f = pkt.flow as usize;
        if self.skbs.len() <= f {
            self.skbs.resize(f + 1, None);
        }
        let first_seq = d.seq.wrapping_sub(d.gso.index as u32);
        let known = matches!(self.skbs[f], Some(k) if k.first_seq == first_seq && k.epoch == pkt.epoch);
        if !known {
            let fits = self.qdisc.fits_whole(bytes, d.gso.segs as u32)?;
            let verdict = if self.loss.lose(now.0) {
                Verdict::Random
            } else if fits {
                Verdict::Admit
            } else {
                self.stats.drops_queue_skbs += 1;
                Verdict::Full
            };
            self.skbs[f] = Some(SkbDecision { epoch: pkt.epoch, first_seq, verdict });
        }
        self.skbs[f].map(|k| k.verdict)
    }

    /// A whole skb (a bundle) arrives: a Linux router queues it as one entry,
    /// or drops it whole; otherwise (split by `tbf_segment`, a trace-driven
    /// link) its segments arrive one after the other.
    fn arrive_skb(&mut self, now: Time, mut skb: Packet) -> Result<Option<Time>, Packet> {
        let n = skb.segs();
        match self.skb_verdict(now, &skb) {
            Some(verdict @ (Verdict::Random | Verdict::Full)) => {
                let random = verdict == Verdict::Random;
                self.stats.arrivals += n as u64;
                if random {
                    self.stats.drops_random += n as u64;
                } else {
                    self.stats.drops_queue += n as u64;
                }
                self.stats.count_drops(&skb, random, n as u64);
                return Err(skb);
            }
            Some(Verdict::Admit) if self.trace.is_none() => {
                self.stats.arrivals += n as u64;
                if let Payload::Data(d) = &mut skb.payload {
                    d.gso.whole = true;
                }
                match self.qdisc.enqueue_admitted(now, skb) {
                    Enqueued::Accepted => {}
                    _ => unreachable!("a queue that admits super-packets whole takes them"),
                }
                return Ok(if self.in_service.is_none() { self.start_next(now) } else { None });
            }
            _ => {}
        }
        let mut started = None;
        for i in 0..n {
            if let Ok(Some(t)) = self.arrive(now, skb.segment(i)) {
                started = Some(t);
            }
        }
        Ok(started)
    }

    /// A packet arrives. Returns the completion time to schedule when the
    /// transmitter was idle and starts on it; `Err` carries a dropped packet.
    pub fn arrive(&mut self, now: Time, mut pkt: Packet) -> Result<Option<Time>, Packet> {
        if pkt.is_bundle() {
            return self.arrive_skb(now, pkt);
        }
        self.stats.arrivals += 1;
        match self.skb_verdict(now, &pkt) {
            Some(Verdict::Random) => {
                self.stats.drops_random += 1;
                self.stats.count_drop(&pkt, true);
                return Err(pkt);
            }
            Some(Verdict::Full) => {
                self.stats.drops_queue += 1;
                self.stats.count_drop(&pkt, false);
                return Err(pkt);
            }
            Some(Verdict::Admit) => {
                let mut last = true;
                if let Payload::Data(d) = &mut pkt.payload {
                    d.gso.whole = true;
                    last = d.gso.index + 1 == d.gso.segs;
                }
                match self.qdisc.enqueue_admitted(now, pkt) {
                    Enqueued::Accepted => {}
                    _ => unreachable!("a queue that admits super-packets whole takes their segments"),
                }
                // The skb's segments arrive together (the host's link hands
                // it over whole): service starts once all are queued.
                return Ok(if last && self.in_service.is_none() { self.start_next(now) } else { None });
            }
            None => {}
        }
        if self.loss.lose(now.0) {
            self.stats.drops_random += 1;
            self.stats.count_drop(&pkt, true);
            return Err(pkt);
        }
        if self.in_service.is_none() && self.qdisc.backlog_packets() == 0 {
            // Idle: the packet passes the (empty) queue straight to the wire. It
            // still goes through the discipline so AQMs see it.
            self.offer(now, pkt)?;
            return Ok(self.start_next(now));
        }
        self.offer(now, pkt)?;
        Ok(None)
    }

    /// Offers a packet to the discipline and counts what it drops.
    #[inline]
    fn offer(&mut self, now: Time, pkt: Packet) -> Result<(), Packet> {
        match self.qdisc.enqueue(now, pkt) {
            Enqueued::Accepted => Ok(()),
            Enqueued::Dropped(p) => {
                self.stats.drops_queue += 1;
                self.stats.drops_queue_skbs += 1;
                self.stats.count_drop(&p, false);
                Err(p)
            }
            Enqueued::EarlyDropped(p) => {
                self.stats.drops_aqm += 1;
                self.stats.count_drop(&p, false);
                Err(p)
            }
            Enqueued::Overflowed => {
                self.scratch_drops.clear();
                self.qdisc.take_drops(&mut self.scratch_drops);
                for p in &self.scratch_drops {
                    self.stats.drops_queue += 1;
                    self.stats.drops_queue_skbs += 1;
                    self.stats.count_drop(p, false);
                }
                Ok(())
            }
        }
    }

    fn start_next(&mut self, now: Time) -> Option<Time> {
        debug_assert!(self.in_service.is_none());
        self.scratch_drops.clear();
        let next = self.qdisc.dequeue(now, &mut self.scratch_drops);
        for p in &self.scratch_drops {
            self.stats.drops_aqm += 1;
            self.stats.count_drop(p, false);
        }
        let pkt = next?;
        let mut bytes = pkt.total_wire_bytes();
        if self.gso_burst.is_some() && self.trace.is_none() {
            // tbf releases an skb queued whole at once: take the rest of it.
            if matches!(pkt.payload, Payload::Data(d) if d.gso.whole) {
                let mut prev = pkt;
                while let Some(&next) = self.qdisc.head() {
                    if !crate::net::pipe::continues_skb(&prev, &next) {
                        break;
                    }
                    self.qdisc.dequeue(now, &mut self.scratch_drops);
                    bytes += next.wire_bytes as u64;
                    self.in_service_rest.push(next);
                    prev = next;
                }
            }
            self.qdisc.hold(bytes, pkt.segs() + self.in_service_rest.len() as u32);
        }
        let done = match &mut self.trace {
            Some(trace) => trace.finish_time(now, pkt.wire_bytes),
            None if self.bucketed => self.release_time(now, bytes),
            None => now + self.rate.tx_time(bytes),
        };
        self.in_service = Some(pkt);
        Some(done)
    }

    /// When tbf releases `bytes` offered at `now`: as its tokens allow, and
    /// no earlier than the end of a stall that covers the dequeue attempt or
    /// the watchdog's wake-up. A dequeue delayed by a stall finds the tokens
    /// the stall's time brought (up to the bucket), so it leaves at once.
    fn release_time(&mut self, now: Time, bytes: u64) -> Time {
        let Some(stalls) = &mut self.stalls else { return self.take_tokens(now, bytes) };
        let attempt = stalls.free_at(now);
        let missing = self.rate.tx_time(bytes).0.saturating_sub(self.tokens_now(attempt));
        let tokens_due = Time(attempt.0 + missing);
        let leave = self.stalls.as_mut().map_or(tokens_due, |s| s.free_at(tokens_due));
        self.take_tokens(if leave > tokens_due { leave } else { attempt }, bytes)
    }

    /// The bucket's tokens (ns of transmission) at `t`.
    fn tokens_now(&self, t: Time) -> u64 {
        self.tokens_ns.saturating_add(t.0.saturating_sub(self.tokens_at.0)).min(self.bucket_ns)
    }

    /// Linux `tbf_dequeue` for `bytes` at the head of the queue at `now`:
    /// when they leave. The bucket has gained the time since the last
    /// departure, up to its size; if that covers the bytes' transmission time
    /// they leave now, else when the missing tokens have come (tbf's watchdog),
    /// with the bucket then empty.
    fn take_tokens(&mut self, now: Time, bytes: u64) -> Time {
        let need = self.rate.tx_time(bytes).0;
        let tokens = self.tokens_now(now);
        let leave = if tokens >= need { now } else { Time(now.0 + (need - tokens)) };
        self.tokens_ns = tokens.saturating_sub(need);
        self.tokens_at = leave;
        leave
    }

    /// The burst a Linux router's bucket lets through above the rate (0 for
    /// a switch or an AQM): the most bytes beyond rate x time it can send.
    pub fn burst_bytes(&self) -> u64 {
        if self.bucketed {
            self.gso_burst.unwrap_or(0)
        } else {
            0
        }
    }

    /// The packet in service (or the super-packet, whole) has been
    /// transmitted: appends it to `out` and returns the completion time of the
    /// next one if one starts. Dropped packets of the discipline are discarded
    /// (and counted).
    pub fn complete(&mut self, now: Time, out: &mut Vec<Packet>) -> Option<Time> {
        let pkt = self.in_service.take().expect("completion without a packet in service");
        self.stats.skbs_out += 1;
        self.stats.departures += pkt.segs() as u64;
        self.stats.bytes_out += pkt.total_wire_bytes();
        out.push(pkt);
        for p in self.in_service_rest.drain(..) {
            self.stats.departures += 1;
            self.stats.bytes_out += p.wire_bytes as u64;
            out.push(p);
        }
        if self.gso_burst.is_some() {
            self.qdisc.hold(0, 0);
        }
        self.start_next(now)
    }

    pub fn backlog_packets(&self) -> u32 {
        self.qdisc.backlog_packets()
    }

    /// The discipline's own counters (CE marks, sojourn times, ...).
    pub fn qdisc_stats(&self) -> QdiscStats {
        self.qdisc.stats()
    }

    pub fn backlog_bytes(&self) -> u64 {
        self.qdisc.backlog_bytes()
    }

    /// Every packet still held by the link (waiting or in service).
    pub fn held_packets(&self) -> Vec<Packet> {
        let mut v = self.qdisc.waiting();
        if let Some(p) = self.in_service {
            v.push(p);
        }
        v.extend_from_slice(&self.in_service_rest);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::queue::{DropTail, QueueLimit};
    use crate::units::Dur;
    use crate::packet::DataSegment;

    fn seg(seq: u32) -> Packet {
        Packet::data(0, DataSegment { seq, payload: 1448, tsval: 0, retransmission: false, ce: false, ect: false, ect1: false, cwr: false, psh: false, gso: Default::default() })
    }

    /// Completes every departure from `first` on, as the event loop would:
    /// the departure times.
    fn drain(l: &mut Link, mut t: Option<Time>) -> Vec<u64> {
        let mut out = vec![];
        let mut times = vec![];
        while let Some(at) = t {
            times.push(at.0);
            t = l.complete(at, &mut out);
        }
        times
    }

    /// A 400 Mbit/s link with a drop-tail queue of `limit`, no random loss.
    fn drop_tail_400(limit: QueueLimit) -> Link {
        Link::new(Rate::from_mbps(400), Box::new(DropTail::new(limit)), &LossSpec::none(), Rng::stream(1, "loss"))
    }

    #[test]
    fn transmits_back_to_back_and_drops_tail() {
        let mut l = drop_tail_400(QueueLimit::Packets(1));
        assert_eq!(l.arrive(Time(0), seg(0)), Ok(Some(Time(30_000))));
        assert_eq!(l.arrive(Time(1), seg(1)), Ok(None));
        assert!(l.arrive(Time(2), seg(2)).is_err());
        let mut out = vec![];
        let next = l.complete(Time(30_000), &mut out);
        assert_eq!(out, vec![seg(0)]);
        assert_eq!(next, Some(Time(60_000)));
        out.clear();
        let next = l.complete(Time(60_000), &mut out);
        assert_eq!(out, vec![seg(1)]);
        assert_eq!(next, None);
        assert_eq!(l.stats.drops_queue, 1);
        assert_eq!(l.stats.flow_drops, vec![1]);
    }

    #[test]
    fn a_linux_router_releases_a_super_packet_whole_and_counts_it_until_then() {
        use crate::packet::Gso;
        let skb_seg = |i: u16| {
            let mut p = seg(100 + i as u32);
            if let Payload::Data(d) = &mut p.payload {
                d.gso = Gso { segs: 3, index: i, whole: false, ..Gso::default() };
            }
            p
        };
        let mut l = drop_tail_400(QueueLimit::Bytes(6_000));
        // A bucket of exactly one skb, full at the start as tbf's is: the first
        // skb leaves the moment its last segment is queued.
        l.set_gso_burst(4_500);
        for i in 0..2 {
            assert_eq!(l.arrive(Time(0), skb_seg(i)), Ok(None));
        }
        assert_eq!(l.arrive(Time(0), skb_seg(2)), Ok(Some(Time(0))));
        let mut out = vec![];
        assert_eq!(l.complete(Time(0), &mut out), None);
        assert_eq!(out.len(), 3);
        // The bucket is empty now: the next skb waits for its tokens (90 us).
        let next = |i: u16| {
            let mut p = skb_seg(i);
            if let Payload::Data(d) = &mut p.payload {
                d.seq += 3;
            }
            p
        };
        assert_eq!(l.arrive(Time(0), next(0)), Ok(None));
        assert_eq!(l.arrive(Time(0), next(1)), Ok(None));
        assert_eq!(l.arrive(Time(0), next(2)), Ok(Some(Time(90_000))));
        // tbf keeps it in the child qdisc until released: 4,500 of 6,000 bytes.
        assert_eq!(l.backlog_bytes(), 4_500);
        assert!(l.arrive(Time(1), seg(7)).is_ok());
        assert!(l.arrive(Time(2), seg(8)).is_err(), "the held skb counts against the limit");
        out.clear();
        assert_eq!(l.complete(Time(90_000), &mut out), Some(Time(120_000)));
        assert_eq!(out.len(), 3);
        assert!(out.iter().all(|p| matches!(p.payload, Payload::Data(d) if d.gso.whole)));
        assert_eq!(l.backlog_bytes(), 1_500);
        assert_eq!(l.stats.departures, 6);
    }

    /// tbf's bucket refills while the queue is empty, at the rate, up to its
    /// size: after 30 us idle one 1,500-byte packet (30 us at 400 Mbit/s)
    /// leaves at once and the next waits; after a long idle spell a whole
    /// bucket (3 packets) does.
    #[test]
    fn a_linux_routers_bucket_refills_while_idle_up_to_the_burst() {
        let mut l = drop_tail_400(QueueLimit::Packets(100));
        l.set_gso_burst(4_500);
        // Full at the start: three packets at once, the fourth 30 us later.
        let first = l.arrive(Time(0), seg(0)).unwrap();
        for i in 1..4 {
            assert_eq!(l.arrive(Time(0), seg(i)), Ok(None));
        }
        assert_eq!(drain(&mut l, first), vec![0, 0, 0, 30_000]);
        // Empty at 30 us; 30 us later it holds one packet's tokens.
        let first = l.arrive(Time(60_000), seg(4)).unwrap();
        assert_eq!(l.arrive(Time(60_000), seg(5)), Ok(None));
        assert_eq!(drain(&mut l, first), vec![60_000, 90_000]);
        // A second idle: never more than the bucket.
        let first = l.arrive(Time(1_000_000_000), seg(6)).unwrap();
        for i in 7..10 {
            assert_eq!(l.arrive(Time(1_000_000_000), seg(i)), Ok(None));
        }
        assert_eq!(drain(&mut l, first), vec![1_000_000_000; 3].into_iter().chain([1_000_030_000]).collect::<Vec<_>>());
        assert_eq!(l.stats.departures, 10);
    }

    /// A stall holds back tbf's releases until it ends, whether it covers
    /// the dequeue of a packet arriving at an idle router or the watchdog's
    /// wake-up for one waiting on tokens; the stall's time still brings
    /// tokens (up to the bucket), so what queued meanwhile leaves at once.
    #[test]
    fn a_stalled_linux_router_releases_at_the_stalls_end_with_the_tokens_it_brought() {
        use crate::dist::Dist;
        use crate::net::stall::{StallConfig, Stalls};
        let cfg = StallConfig { every: Dur(10_000_000), duration: Dist::Constant { value: 500_000.0 } };
        let stalls = || Stalls::new(&cfg, Rng::stream(1, "stall"));
        let (start, end) = stalls().window();
        assert!(start.0 > 200_000 && end == start + Dur(500_000));
        let mut l = drop_tail_400(QueueLimit::Packets(100));
        l.set_gso_burst(4_500);
        l.set_stalls(stalls());
        // Before the stall: the full bucket lets three packets go at once,
        // the fourth waits 30 us for its tokens.
        let first = l.arrive(Time(0), seg(0)).unwrap();
        for i in 1..4 {
            assert_eq!(l.arrive(Time(0), seg(i)), Ok(None));
        }
        assert_eq!(drain(&mut l, first), vec![0, 0, 0, 30_000]);
        // Five packets reach the idle router as the stall begins: none leaves
        // before its end, then a bucket's worth at once and the rest at the rate.
        let first = l.arrive(start, seg(4)).unwrap();
        assert_eq!(first, Some(end));
        for i in 5..9 {
            assert_eq!(l.arrive(start, seg(i)), Ok(None));
        }
        let e = end.0;
        assert_eq!(drain(&mut l, first), vec![e, e, e, e + 30_000, e + 60_000]);
        // A switch has no qdisc CPU to stall.
        let mut switch = drop_tail_400(QueueLimit::Packets(100));
        switch.set_stalls(stalls());
        assert!(switch.stalls.is_none());
        assert_eq!(switch.arrive(start, seg(0)), Ok(Some(start + Dur(30_000))));
    }

    /// A packet waiting on tokens whose watchdog would fire inside a stall
    /// leaves when the stall ends.
    #[test]
    fn a_watchdog_inside_a_stall_fires_at_its_end() {
        use crate::dist::Dist;
        use crate::net::stall::{StallConfig, Stalls};
        let cfg = StallConfig { every: Dur(10_000_000), duration: Dist::Constant { value: 500_000.0 } };
        let (start, end) = Stalls::new(&cfg, Rng::stream(1, "stall")).window();
        let mut l = drop_tail_400(QueueLimit::Packets(100));
        l.set_gso_burst(3_000);
        l.set_stalls(Stalls::new(&cfg, Rng::stream(1, "stall")));
        // Empty the two-packet bucket 10 us before the stall: the third
        // packet's tokens are due 20 us into it.
        let t = Time(start.0 - 10_000);
        let first = l.arrive(t, seg(0)).unwrap();
        assert_eq!(first, Some(t));
        l.arrive(t, seg(1)).unwrap();
        l.arrive(t, seg(2)).unwrap();
        let mut out = vec![];
        assert_eq!(l.complete(t, &mut out), Some(t));
        assert_eq!(l.complete(t, &mut out), Some(end));
        assert_eq!(l.complete(end, &mut out), None);
        assert_eq!(out.len(), 3);
    }

    /// A switch (no bucket) serialises every packet at the rate.
    #[test]
    fn a_switch_has_no_bucket() {
        let mut l = drop_tail_400(QueueLimit::Packets(100));
        assert_eq!(l.arrive(Time(0), seg(0)), Ok(Some(Time(30_000))));
        assert_eq!(l.burst_bytes(), 0);
    }

    #[test]
    fn counts_early_and_batch_drops_of_aqms() {
        use crate::net::qdisc::{build_qdisc, FqCodelConfig, QdiscConfig, RedConfig};
        let seg_of = |flow: u32, seq: u32| {
            let mut p = seg(seq);
            p.flow = flow;
            p
        };
        // RED whose average is the instantaneous queue (w_q = 1) and that drops
        // every arrival above 2 queued packets: early drops are AQM drops.
        let red = QdiscConfig::Red(RedConfig {
            min: Some(QueueLimit::Packets(1)),
            max: Some(QueueLimit::Packets(2)),
            w_q: Some(1.0),
            ..Default::default()
        });
        let q = build_qdisc(&red, QueueLimit::Packets(100), Rate::from_mbps(10), Rng::stream(1, "aqm"));
        let mut l = Link::new(Rate::from_mbps(10), q, &LossSpec::none(), Rng::stream(1, "loss"));
        for i in 0..10 {
            let _ = l.arrive(Time(i), seg_of(1, i as u32));
        }
        assert!(l.stats.drops_aqm >= 6, "{:?}", l.stats);
        assert_eq!(l.stats.drops_queue, 0);
        assert_eq!(l.stats.flow_drops, vec![0, l.stats.drops_aqm]);
        assert_eq!(l.held_packets().len() as u64 + l.stats.drops_aqm, 10);
        // FQ-CoDel over its limit drops a batch from the fattest flow: queue drops.
        let fq = QdiscConfig::FqCodel(FqCodelConfig::default());
        let q = build_qdisc(&fq, QueueLimit::Packets(10), Rate::from_mbps(10), Rng::stream(1, "aqm"));
        let mut l = Link::new(Rate::from_mbps(10), q, &LossSpec::none(), Rng::stream(1, "loss"));
        for i in 0..11 {
            let _ = l.arrive(Time(i), seg_of(0, i as u32));
        }
        // One in service, 10 queued; the 12th arrival overflows: half of flow 0's
        // 10 queued packets go.
        let _ = l.arrive(Time(20), seg_of(2, 0));
        assert_eq!(l.stats.drops_queue, 5);
        assert_eq!(l.stats.drops_queue_skbs, 5, "packets, each its own skb");
        assert_eq!(l.stats.flow_drops[0], 5);
        assert_eq!(l.backlog_packets(), 6);
    }

    /// Segments of one skb of `n` (flow 0, from `seq`), and the same as one bundle.
    fn skb(seq: u32, n: u16) -> (Vec<Packet>, Packet) {
        use crate::packet::Gso;
        let segs: Vec<Packet> = (0..n)
            .map(|i| {
                let mut p = seg(seq + i as u32);
                if let Payload::Data(d) = &mut p.payload {
                    d.gso = Gso { segs: n, index: i, ..Gso::default() };
                }
                p
            })
            .collect();
        let bundle = Packet::bundle_of(&segs).expect("one skb");
        (segs, bundle)
    }

    /// Everything `complete` hands on, as segments.
    fn segments(out: &[Packet]) -> Vec<Packet> {
        out.iter().flat_map(|p| (0..p.segs()).map(move |i| p.segment(i))).collect()
    }

    #[test]
    fn a_bundle_crosses_a_linux_router_as_its_segments_would() {
        // Three skbs of 3 into a 6,000-byte queue with a one-skb bucket: the
        // first leaves at once, the second waits for tokens, the third does
        // not fit and is dropped whole. Segment by segment and as bundles,
        // the times, the counters and what leaves are the same.
        for burst in [4_500, 3_000] {
            let mut by_segment = drop_tail_400(QueueLimit::Bytes(6_000));
            let mut by_skb = drop_tail_400(QueueLimit::Bytes(6_000));
            by_segment.set_gso_burst(burst);
            by_skb.set_gso_burst(burst);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for k in 0..3 {
                let (segs, bundle) = skb(100 + 3 * k, 3);
                let mut started = None;
                for p in segs {
                    if let Ok(Some(t)) = by_segment.arrive(Time(k as u64), p) {
                        started = Some(t);
                    }
                }
                let got = by_skb.arrive(Time(k as u64), bundle);
                assert_eq!(got.unwrap_or(None), started, "skb {k}, burst {burst}");
                assert_eq!((by_skb.backlog_bytes(), by_skb.backlog_packets()), (by_segment.backlog_bytes(), by_segment.backlog_packets()));
            }
            let mut t = Some(Time(0));
            while let Some(now) = t {
                let u = by_segment.complete(now, &mut a);
                t = by_skb.complete(now, &mut b);
                assert_eq!(t, u, "burst {burst}");
            }
            assert_eq!(segments(&b), a, "burst {burst}");
            let stats = |l: &Link| {
                (l.stats.arrivals, l.stats.departures, l.stats.skbs_out, l.stats.bytes_out, l.stats.drops_queue, l.stats.drops_queue_skbs, l.stats.flow_drops.clone())
            };
            assert_eq!(stats(&by_skb), stats(&by_segment));
            // A bucket smaller than the skb splits it (tbf_segment): segments
            // leave, and the interface counts each; a whole skb counts once.
            assert_eq!(b.iter().any(|p| p.is_bundle()), burst == 4_500);
            let per_skb = if burst == 4_500 { 3 } else { 1 };
            assert!(by_skb.stats.departures >= 3, "burst {burst}");
            assert_eq!(by_skb.stats.skbs_out * per_skb, by_skb.stats.departures, "burst {burst}");
            // Drops as tc counts them: the skb dropped whole once, split
            // segments one by one.
            assert!(by_skb.stats.drops_queue > 0, "burst {burst}");
            assert_eq!(by_skb.stats.drops_queue_skbs * per_skb, by_skb.stats.drops_queue, "burst {burst}");
        }
    }
}
