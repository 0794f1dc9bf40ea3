//! The discrete-event queue. Events are ordered by (time, insertion sequence), so
//! two events at the same nanosecond always run in the order they were
//! scheduled and a run is reproducible bit for bit. The queue holds few entries:
//! a FIFO pipe keeps its packets in its own deque and has at most one event (its
//! head) here, and timers are re-armed lazily (see `sim`).

use crate::units::Time;

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
    /// The retransmission timer of flow `0`'s start-up exchange may be due.
    StartupTimer(u32),
    /// Take a time-series sample of every flow and the bottleneck.
    Sample,
    /// Snapshot counters at the start of the measurement window.
    WarmupEnd,
    /// A scheduled change of the path (trace, step, random walk); the index is
    /// into the run's list of scheduled changes.
    PathChange(u32),
    /// UDP source `0` sends a datagram.
    UdpSend(u32),
    /// Web generator `0` opens a connection.
    WebArrival(u32),
    /// The measurement window of UDP source `0` opens.
    UdpStart(u32),
    /// The measurement window of UDP source `0` closes.
    UdpStop(u32),
    /// The receiver of flow `0` processes the batch it holds.
    RxBatch(u32),
}

/// A 4-ary min-heap of events keyed by time << 64 | sequence, so ordering is
/// one integer comparison; a 4-ary heap is half as deep as a binary one and
/// its four children sit side by side in memory.
#[derive(Default)]
struct Heap {
    entries: Vec<(u128, Event)>,
}

const ARITY: usize = 4;

impl Heap {
    fn push(&mut self, key: u128, event: Event) {
        // Sift up: move parents down into the hole until the key fits.
        let mut i = self.entries.len();
        self.entries.push((key, event));
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if self.entries[parent].0 <= key {
                break;
            }
            self.entries[i] = self.entries[parent];
            i = parent;
        }
        self.entries[i] = (key, event);
    }

    #[inline]
    fn min_key(&self) -> Option<u128> {
        self.entries.first().map(|e| e.0)
    }

    fn pop(&mut self) -> Option<(u128, Event)> {
        let top = *self.entries.first()?;
        let last = self.entries.pop().expect("non-empty");
        let n = self.entries.len();
        if n == 0 {
            return Some(top);
        }
        let e = &mut self.entries[..];
        // Sift the last entry down from the root, moving the smallest child up
        // into the hole at each level.
        let mut i = 0;
        loop {
            let first = i * ARITY + 1;
            if first >= n {
                break;
            }
            let mut child = first;
            let mut key = e[first].0;
            if first + ARITY <= n {
                // A full node: four children, no bounds to check per child.
                let kids = &e[first..first + ARITY];
                for (j, kid) in kids.iter().enumerate().skip(1) {
                    if kid.0 < key {
                        key = kid.0;
                        child = first + j;
                    }
                }
            } else {
                for (j, kid) in e[first..n].iter().enumerate().skip(1) {
                    if kid.0 < key {
                        key = kid.0;
                        child = first + j;
                    }
                }
            }
            if key >= last.0 {
                break;
            }
            e[i] = e[child];
            i = child;
        }
        e[i] = last;
        Some(top)
    }
}

/// A min-queue of events by (time, insertion sequence). Endpoint timers live
/// in a heap of their own: every open connection keeps one or more timers
/// pending (hundreds with web traffic) but they rarely fire, while packet
/// events (pipe heads, link completions) are popped by the million; keeping
/// the two apart keeps the busy heap a few levels deep. The shared sequence
/// number makes the merged order exactly that of a single queue.
#[derive(Default)]
pub struct EventQueue {
    packets: Heap,
    timers: Heap,
    seq: u64,
    processed: u64,
}

impl EventQueue {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn schedule(&mut self, time: Time, event: Event) {
        self.seq += 1;
        let key = ((time.0 as u128) << 64) | self.seq as u128;
        match event {
            Event::Timer { .. } => self.timers.push(key, event),
            _ => self.packets.push(key, event),
        }
    }

    /// The earliest event, removed from the queue.
    pub fn pop(&mut self) -> Option<(Time, Event)> {
        let from_timers = match (self.packets.min_key(), self.timers.min_key()) {
            (Some(p), Some(t)) => t < p,
            (None, Some(_)) => true,
            (_, None) => false,
        };
        let (key, event) = if from_timers { self.timers.pop() } else { self.packets.pop() }?;
        self.processed += 1;
        Some((Time((key >> 64) as u64), event))
    }

    pub fn peek_time(&self) -> Option<Time> {
        let key = match (self.packets.min_key(), self.timers.min_key()) {
            (Some(p), Some(t)) => p.min(t),
            (p, t) => p.or(t)?,
        };
        Some(Time((key >> 64) as u64))
    }

    /// Events processed so far (for the benchmark's events-per-second figure).
    pub fn processed(&self) -> u64 {
        self.processed
    }

    pub fn len(&self) -> usize {
        self.packets.entries.len() + self.timers.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

    #[test]
    fn pops_in_time_then_insertion_order_like_a_sorted_list() {
        // Interleaved pushes and pops of packet and timer events, checked
        // against a reference: the pending list sorted by (time, sequence).
        let mut rng = crate::rng::Rng::stream(3, "events");
        let mut q = EventQueue::new();
        let mut reference: Vec<(u64, u64, Event)> = Vec::new();
        let (mut seq, mut now) = (0u64, 0u64);
        for step in 0..200_000 {
            if rng.below(3) > 0 || reference.is_empty() {
                let t = now + rng.below(1_000);
                let ev = if rng.below(4) == 0 {
                    Event::Timer { flow: step, kind: TimerKind::Xmit }
                } else {
                    Event::PipeHead(step)
                };
                seq += 1;
                q.schedule(Time(t), ev);
                reference.push((t, seq, ev));
            } else {
                let i = (0..reference.len()).min_by_key(|&i| (reference[i].0, reference[i].1)).unwrap();
                let (t, _, ev) = reference.swap_remove(i);
                assert_eq!(q.peek_time(), Some(Time(t)));
                assert_eq!(q.pop(), Some((Time(t), ev)));
                now = t;
            }
            assert_eq!(q.len(), reference.len());
        }
    }
}
