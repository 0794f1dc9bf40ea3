//! The discrete-event queue. Events are ordered by (time, insertion sequence), so
//! two events at the same nanosecond always run in the order they were
//! scheduled and a run is reproducible bit for bit. The queue holds few entries:
//! a FIFO pipe keeps its packets in its own deque and has at most one event (its
//! head) here, and timers are re-armed lazily (see `sim`).

use crate::units::Time;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Which timer of a TCP endpoint an event is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerKind {
    /// The sender's retransmission timer, shared (as in Linux) by RTO, RACK
    /// reordering timeout and tail loss probe.
    Xmit = 0,
    /// The sender's pacing timer.
    Pacing = 1,
    /// The receiver's delayed-ACK timer.
    DelAck = 2,
    /// The receiver's SACK-compression timer.
    CompressedAck = 3,
    /// The sender's SYN retransmission timer.
    Syn = 4,
}

pub const TIMER_KINDS: usize = 5;

/// Something that happens at an instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The packet at the head of pipe `0` reaches the pipe's end.
    PipeHead(u32),
    /// Delay line `0` has a packet due (or had one when this was scheduled).
    LineHead(u32),
    /// Link `0` finishes transmitting its current packet.
    LinkDone(u32),
    /// A timer of flow `flow` may be due.
    Timer { flow: u32, kind: TimerKind },
    /// Flow `0` opens its connection.
    FlowStart(u32),
    /// Flow `0`'s application stops writing.
    FlowStop(u32),
    /// Take a time-series sample of every flow and the bottleneck.
    Sample,
    /// Snapshot counters at the start of the measurement window.
    WarmupEnd,
    /// A scheduled change of the path (trace, step, random walk); the index is
    /// into the run's list of scheduled changes.
    PathChange(u32),
    /// A traffic source acts: UDP source `i` sends a datagram, or (for indices
    /// past the UDP sources) a web generator opens a connection.
    Source(u32),
    /// The measurement window of UDP source `0` opens.
    UdpStart(u32),
    /// The measurement window of UDP source `0` closes.
    UdpStop(u32),
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    time: Time,
    seq: u64,
    event: Event,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.time == o.time && self.seq == o.seq
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    // Reversed so that BinaryHeap (a max-heap) pops the earliest entry.
    fn cmp(&self, o: &Self) -> Ordering {
        o.time.cmp(&self.time).then_with(|| o.seq.cmp(&self.seq))
    }
}

/// A min-queue of events by (time, sequence).
#[derive(Default)]
pub struct EventQueue {
    heap: BinaryHeap<Entry>,
    seq: u64,
    processed: u64,
}

impl EventQueue {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn schedule(&mut self, time: Time, event: Event) {
        self.seq += 1;
        self.heap.push(Entry { time, seq: self.seq, event });
    }

    /// The earliest event, removed from the queue.
    pub fn pop(&mut self) -> Option<(Time, Event)> {
        let e = self.heap.pop()?;
        self.processed += 1;
        Some((e.time, e.event))
    }

    pub fn peek_time(&self) -> Option<Time> {
        self.heap.peek().map(|e| e.time)
    }

    /// Events processed so far (for the benchmark's events-per-second figure).
    pub fn processed(&self) -> u64 {
        self.processed
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_run_in_insertion_order() {
        let mut q = EventQueue::new();
        q.schedule(Time(5), Event::PipeHead(2));
        q.schedule(Time(3), Event::PipeHead(1));
        q.schedule(Time(5), Event::PipeHead(3));
        q.schedule(Time(5), Event::PipeHead(4));
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            vec![
                (Time(3), Event::PipeHead(1)),
                (Time(5), Event::PipeHead(2)),
                (Time(5), Event::PipeHead(3)),
                (Time(5), Event::PipeHead(4)),
            ]
        );
    }
}
