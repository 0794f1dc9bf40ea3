//! The sender's retransmission queue: one entry per segment from SND.UNA to
//! SND.NXT with Linux's `sacked` flags and delivery-rate bookkeeping, plus the
//! two orderings loss recovery needs without scanning the window:
//!
//! * the time-sorted list (Linux `tsorted_sent_queue`): segments in flight in
//!   order of their last transmission. SACKed segments and segments marked lost
//!   are unlinked, so RACK's walk touches only candidates for loss and stops at
//!   the first segment sent after the most recently delivered one;
//! * the retransmission heap: segments marked lost and not yet retransmitted,
//!   lowest sequence first (the order `tcp_xmit_retransmit_queue` uses),
//!   validated lazily when popped.

use crate::cc::LostSkb;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Segment has been SACKed (Linux TCPCB_SACKED_ACKED).
pub const SACKED_ACKED: u8 = 0x01;
/// A retransmission of the segment is in flight (TCPCB_SACKED_RETRANS).
pub const SACKED_RETRANS: u8 = 0x02;
/// Segment is considered lost (TCPCB_LOST).
pub const LOST: u8 = 0x04;
/// Segment was retransmitted at some point (TCPCB_EVER_RETRANS).
pub const EVER_RETRANS: u8 = 0x80;
/// TCPCB_RETRANS.
pub const RETRANS: u8 = SACKED_RETRANS | EVER_RETRANS;

const NIL: u32 = u32::MAX;

/// Per-segment state.
#[derive(Clone, Copy, Debug)]
pub struct SegState {
    /// Time of the latest (re)transmission, us (Linux skb_mstamp).
    pub xmit_us: u64,
    pub sacked: u8,
    /// Delivery-rate state at the latest transmission (Linux `tcp_skb_cb.tx`).
    pub tx_delivered: u32,
    /// 0 once the segment's rate sample has been consumed.
    pub tx_delivered_mstamp: u64,
    pub tx_first_tx_mstamp: u64,
    pub tx_app_limited: bool,
    pub tx_in_flight: u32,
    /// `tp.lost` and `tp.delivered_ce` at the latest transmission (the BBRv3
    /// stack's `tx.lost`, `tx.delivered_ce`).
    pub tx_lost: u32,
    pub tx_delivered_ce: u32,
    /// The segment begins an skb of the retransmission queue: the first of a
    /// super-packet as sent, or the first after a split (Linux `tcp_fragment`
    /// when a retransmission takes only part of an skb). A retransmission
    /// takes the segments of one skb together, as Linux retransmits skbs.
    pub skb_head: bool,
    prev: u32,
    next: u32,
    linked: bool,
}

impl SegState {
    pub fn new(xmit_us: u64) -> SegState {
        SegState {
            xmit_us,
            sacked: 0,
            tx_delivered: 0,
            tx_delivered_mstamp: 0,
            tx_first_tx_mstamp: 0,
            tx_app_limited: false,
            tx_in_flight: 0,
            tx_lost: 0,
            tx_delivered_ce: 0,
            skb_head: true,
            prev: NIL,
            next: NIL,
            linked: false,
        }
    }
}

#[derive(Default)]
pub struct Scoreboard {
    /// Segment `una + i` at index i.
    segs: VecDeque<SegState>,
    una: u32,
    ts_head: u32,
    ts_tail: u32,
    lost_heap: BinaryHeap<Reverse<u32>>,
    /// Segments newly marked lost and not yet reported to the congestion
    /// control's `skb_marked_lost`; `None` when the algorithm does not ask.
    pub lost_log: Option<Vec<LostSkb>>,
}

impl Scoreboard {
    pub fn new() -> Scoreboard {
        Scoreboard {
            segs: VecDeque::new(),
            una: 0,
            ts_head: NIL,
            ts_tail: NIL,
            lost_heap: BinaryHeap::new(),
            lost_log: None,
        }
    }

    pub fn una(&self) -> u32 {
        self.una
    }

    /// One past the last segment held.
    pub fn end(&self) -> u32 {
        self.una + self.segs.len() as u32
    }

    pub fn len(&self) -> usize {
        self.segs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    pub fn contains(&self, seq: u32) -> bool {
        seq >= self.una && seq < self.end()
    }

    pub fn get(&self, seq: u32) -> &SegState {
        &self.segs[(seq - self.una) as usize]
    }

    pub fn get_mut(&mut self, seq: u32) -> &mut SegState {
        &mut self.segs[(seq - self.una) as usize]
    }

    /// Appends a newly sent segment (at the tail of the time order).
    pub fn push_new(&mut self, mut seg: SegState) -> u32 {
        let seq = self.end();
        // Linked into the time order before it is stored, instead of looked
        // up in the ring after (ts_append).
        debug_assert!(!seg.linked);
        seg.prev = self.become_ts_tail(seq);
        seg.next = NIL;
        seg.linked = true;
        self.segs.push_back(seg);
        seq
    }

    /// Removes the head segment (cumulatively acknowledged) and returns it.
    pub fn pop_head(&mut self) -> Option<SegState> {
        if self.segs.is_empty() {
            return None;
        }
        let seq = self.una;
        self.ts_unlink(seq);
        let s = self.segs.pop_front();
        self.una += 1;
        s
    }

    /// Sets the starting sequence of an empty board.
    pub fn reset_una(&mut self, una: u32) {
        debug_assert!(self.segs.is_empty());
        self.una = una;
    }

    // ---- time-sorted list ----

    /// Links `seq` at the tail of the time order (it was just (re)transmitted).
    pub fn ts_append(&mut self, seq: u32) {
        if self.get(seq).linked {
            self.ts_unlink(seq);
        }
        let tail = self.become_ts_tail(seq);
        let s = self.get_mut(seq);
        s.prev = tail;
        s.next = NIL;
        s.linked = true;
    }

    /// Makes `seq` the time order's tail (the old tail, or the head of an
    /// empty order, points at it) and returns the old tail; `seq`'s own
    /// links are the caller's.
    fn become_ts_tail(&mut self, seq: u32) -> u32 {
        let tail = self.ts_tail;
        if tail == NIL {
            self.ts_head = seq;
        } else {
            self.get_mut(tail).next = seq;
        }
        self.ts_tail = seq;
        tail
    }

    /// Unlinks `seq` from the time order (SACKed, marked lost, or acknowledged).
    pub fn ts_unlink(&mut self, seq: u32) {
        let (prev, next, linked) = {
            let s = self.get(seq);
            (s.prev, s.next, s.linked)
        };
        if !linked {
            return;
        }
        if prev == NIL {
            self.ts_head = next;
        } else {
            self.get_mut(prev).next = next;
        }
        if next == NIL {
            self.ts_tail = prev;
        } else {
            self.get_mut(next).prev = prev;
        }
        let s = self.get_mut(seq);
        s.prev = NIL;
        s.next = NIL;
        s.linked = false;
    }

    /// The earliest-sent linked segment.
    pub fn ts_first(&self) -> Option<u32> {
        (self.ts_head != NIL).then_some(self.ts_head)
    }

    /// The next linked segment in time order after `seq`.
    pub fn ts_next(&self, seq: u32) -> Option<u32> {
        let n = self.get(seq).next;
        (n != NIL).then_some(n)
    }

    // ---- retransmission heap ----

    pub fn queue_retransmit(&mut self, seq: u32) {
        self.lost_heap.push(Reverse(seq));
    }

    /// The lowest segment that is marked lost and waits for retransmission.
    pub fn next_retransmit(&mut self) -> Option<u32> {
        while let Some(&Reverse(seq)) = self.lost_heap.peek() {
            if self.contains(seq) {
                let s = self.get(seq).sacked;
                if s & LOST != 0 && s & (SACKED_RETRANS | SACKED_ACKED) == 0 {
                    return Some(seq);
                }
            }
            self.lost_heap.pop();
        }
        None
    }

    /// How many segments from `seq` (the next to retransmit) one
    /// retransmission takes, at most `max`: those of the same skb that are
    /// marked lost and neither SACKed nor retransmitted (Linux retransmits an
    /// skb whole, or its first `max` segments).
    pub fn retransmit_run(&self, seq: u32, max: u32) -> u32 {
        let mut n = 1;
        while n < max && self.contains(seq + n) {
            let s = self.get(seq + n);
            if s.skb_head || s.sacked & LOST == 0 || s.sacked & (SACKED_RETRANS | SACKED_ACKED) != 0 {
                break;
            }
            n += 1;
        }
        n
    }

    /// The skb holding `seq` is split before it (Linux `tcp_fragment`):
    /// `seq` begins an skb of its own.
    pub fn split_before(&mut self, seq: u32) {
        if self.contains(seq) {
            self.get_mut(seq).skb_head = true;
        }
    }

    pub fn clear_retransmit_queue(&mut self) {
        self.lost_heap.clear();
    }

    pub fn iter_seqs(&self) -> std::ops::Range<u32> {
        self.una..self.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A retransmission's segments: the lost, unSACKed, unretransmitted
    /// ones that follow in the same skb, up to the limit.
    #[test]
    fn a_retransmission_run_stays_inside_one_skb() {
        let mut b = Scoreboard::new();
        for i in 0..12 {
            let mut s = SegState::new(0);
            // skbs 0..4, 4..8, 8..12
            s.skb_head = i % 4 == 0;
            s.sacked = LOST;
            b.push_new(s);
        }
        assert_eq!(b.retransmit_run(0, 10), 4, "stops at the next skb");
        assert_eq!(b.retransmit_run(0, 3), 3, "at most the limit");
        assert_eq!(b.retransmit_run(1, 10), 3);
        b.get_mut(6).sacked |= SACKED_ACKED;
        assert_eq!(b.retransmit_run(4, 10), 2, "stops at a SACKed segment");
        b.get_mut(10).sacked |= RETRANS;
        assert_eq!(b.retransmit_run(8, 10), 2, "stops at a retransmitted segment");
        b.get_mut(1).sacked = 0;
        assert_eq!(b.retransmit_run(0, 10), 1, "stops at a segment not marked lost");
        b.split_before(3);
        assert_eq!(b.retransmit_run(2, 10), 1, "a split makes an skb boundary");
        b.split_before(40);
        assert_eq!(b.retransmit_run(11, 10), 1, "the queue's end");
    }

    #[test]
    fn time_order_moves_retransmissions_to_the_tail() {
        let mut b = Scoreboard::new();
        for i in 0..4 {
            b.push_new(SegState::new(i));
        }
        b.ts_append(1); // retransmitted
        let mut order = vec![];
        let mut cur = b.ts_first();
        while let Some(s) = cur {
            order.push(s);
            cur = b.ts_next(s);
        }
        assert_eq!(order, vec![0, 2, 3, 1]);
        b.ts_unlink(2);
        b.pop_head();
        assert_eq!(b.ts_first(), Some(3));
        assert_eq!(b.ts_next(3), Some(1));
        assert_eq!(b.ts_next(1), None);
    }

    #[test]
    fn retransmit_heap_skips_stale_entries() {
        let mut b = Scoreboard::new();
        for i in 0..5 {
            b.push_new(SegState::new(i));
        }
        for s in [3, 1, 4] {
            b.get_mut(s).sacked |= LOST;
            b.queue_retransmit(s);
        }
        b.get_mut(1).sacked |= SACKED_ACKED;
        assert_eq!(b.next_retransmit(), Some(3));
        b.get_mut(3).sacked |= SACKED_RETRANS;
        assert_eq!(b.next_retransmit(), Some(4));
    }
}
