//! A set of segment numbers stored as disjoint, non-adjacent half-open ranges in
//! a B-tree. The receiver keeps its out-of-order data in one; the sender keeps
//! the SACKed ranges in one so that each ACK's SACK blocks cost
//! O(log n + newly SACKed segments) to process, however large the blocks are.

use crate::packet::SeqRange;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default)]
pub struct SeqSet {
    ranges: BTreeMap<u32, u32>,
    count: u64,
}

impl SeqSet {
    pub fn new() -> SeqSet {
        SeqSet::default()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Number of segments in the set.
    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn clear(&mut self) {
        self.ranges.clear();
        self.count = 0;
    }

    pub fn contains(&self, seq: u32) -> bool {
        match self.ranges.range(..=seq).next_back() {
            Some((_, &end)) => seq < end,
            None => false,
        }
    }

    /// The range containing `seq`, if any.
    pub fn range_containing(&self, seq: u32) -> Option<SeqRange> {
        match self.ranges.range(..=seq).next_back() {
            Some((&s, &e)) if seq < e => Some(SeqRange::new(s, e)),
            _ => None,
        }
    }

    /// One past the highest segment in the set.
    pub fn max_end(&self) -> Option<u32> {
        self.ranges.iter().next_back().map(|(_, &e)| e)
    }

    pub fn first(&self) -> Option<SeqRange> {
        self.ranges.iter().next().map(|(&s, &e)| SeqRange::new(s, e))
    }

    /// Calls `f` on each sub-range of `r` that is not yet in the set, in order.
    pub fn for_each_gap(&self, r: SeqRange, mut f: impl FnMut(SeqRange)) {
        if r.is_empty() {
            return;
        }
        let mut cursor = r.start;
        // A range starting before r.start may cover its beginning.
        if let Some((_, &e)) = self.ranges.range(..=r.start).next_back() {
            if e > cursor {
                cursor = e;
            }
        }
        if cursor >= r.end {
            return;
        }
        for (&s, &e) in self.ranges.range(cursor..r.end) {
            if s > cursor {
                f(SeqRange::new(cursor, s));
            }
            cursor = cursor.max(e);
            if cursor >= r.end {
                return;
            }
        }
        if cursor < r.end {
            f(SeqRange::new(cursor, r.end));
        }
    }

    /// Adds `r`, merging with neighbours. Returns the number of segments newly added.
    pub fn insert(&mut self, r: SeqRange) -> u64 {
        if r.is_empty() {
            return 0;
        }
        // The common cases in one B-tree search: no range starts inside
        // (r.start, r.end], so `r` either extends the range before it (data
        // arriving in order behind a hole, a SACK block growing) or stands
        // alone. Anything else merges in the general way below.
        match self.ranges.range_mut(..=r.end).next_back() {
            None => {
                self.ranges.insert(r.start, r.end);
                self.count += r.len() as u64;
                return r.len() as u64;
            }
            Some((&s, e)) if s <= r.start => {
                if *e >= r.start {
                    let added = r.end.saturating_sub(*e) as u64;
                    if added > 0 {
                        *e = r.end;
                        self.count += added;
                    }
                    return added;
                }
                self.ranges.insert(r.start, r.end);
                self.count += r.len() as u64;
                return r.len() as u64;
            }
            Some(_) => {}
        }
        let mut added = 0u64;
        self.for_each_gap(r, |g| added += g.len() as u64);
        if added == 0 {
            return 0;
        }
        let mut start = r.start;
        let mut end = r.end;
        // Merge with a range that starts at or before `start` and reaches it.
        if let Some((&s, &e)) = self.ranges.range(..=start).next_back() {
            if e >= start {
                start = s;
                end = end.max(e);
            }
        }
        // Absorb every range that starts within [start, end].
        let absorbed: Vec<(u32, u32)> = self
            .ranges
            .range(start..=end)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in absorbed {
            self.ranges.remove(&s);
            end = end.max(e);
        }
        self.ranges.insert(start, end);
        self.count += added;
        added
    }

    /// Removes every segment below `seq`.
    pub fn remove_below(&mut self, seq: u32) {
        while let Some((&s, &e)) = self.ranges.iter().next() {
            if s >= seq {
                break;
            }
            self.ranges.remove(&s);
            if e > seq {
                self.ranges.insert(seq, e);
                self.count -= (seq - s) as u64;
                break;
            }
            self.count -= (e - s) as u64;
        }
    }

    /// If the first range starts at `seq`, removes and returns it.
    pub fn pop_front_at(&mut self, seq: u32) -> Option<SeqRange> {
        let (&s, &e) = self.ranges.iter().next()?;
        if s != seq {
            return None;
        }
        self.ranges.remove(&s);
        self.count -= (e - s) as u64;
        Some(SeqRange::new(s, e))
    }

    pub fn iter(&self) -> impl Iterator<Item = SeqRange> + '_ {
        self.ranges.iter().map(|(&s, &e)| SeqRange::new(s, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn insert_merge_and_gaps() {
        let mut s = SeqSet::new();
        assert_eq!(s.insert(SeqRange::new(5, 8)), 3);
        assert_eq!(s.insert(SeqRange::new(10, 12)), 2);
        let mut gaps = vec![];
        s.for_each_gap(SeqRange::new(4, 13), |g| gaps.push((g.start, g.end)));
        assert_eq!(gaps, vec![(4, 5), (8, 10), (12, 13)]);
        assert_eq!(s.insert(SeqRange::new(8, 10)), 2);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![SeqRange::new(5, 12)]);
        assert_eq!(s.insert(SeqRange::new(6, 7)), 0);
        s.remove_below(7);
        assert_eq!(s.first(), Some(SeqRange::new(7, 12)));
        assert_eq!(s.count(), 5);
        assert_eq!(s.pop_front_at(7), Some(SeqRange::new(7, 12)));
        assert!(s.is_empty());
    }

    #[test]
    fn in_order_inserts_extend_the_last_range_and_a_gap_starts_a_new_one() {
        let mut s = SeqSet::new();
        for seq in 5..9 {
            assert_eq!(s.insert(SeqRange::new(seq, seq + 1)), 1);
        }
        assert_eq!(s.insert(SeqRange::new(12, 14)), 2);
        assert_eq!(s.insert(SeqRange::new(13, 15)), 1);
        assert_eq!(s.insert(SeqRange::new(2, 3)), 1);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![SeqRange::new(2, 3), SeqRange::new(5, 9), SeqRange::new(12, 15)]);
        assert_eq!(s.count(), 8);
        // Touching the next range on the right merges through the general path.
        assert_eq!(s.insert(SeqRange::new(9, 12)), 3);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![SeqRange::new(2, 3), SeqRange::new(5, 15)]);
    }

    proptest! {
        #[test]
        fn matches_a_bitmap(ops in proptest::collection::vec((0u32..200, 1u32..20, 0u8..3), 1..60)) {
            let mut set = SeqSet::new();
            let mut bits = vec![false; 256];
            for (start, len, op) in ops {
                let end = (start + len).min(250);
                match op {
                    0 | 1 => {
                        let mut expect_new = 0;
                        for b in bits.iter_mut().take(end as usize).skip(start as usize) {
                            if !*b { expect_new += 1; *b = true; }
                        }
                        prop_assert_eq!(set.insert(SeqRange::new(start, end)), expect_new);
                    }
                    _ => {
                        set.remove_below(start);
                        for b in bits.iter_mut().take(start as usize) { *b = false; }
                    }
                }
                let count = bits.iter().filter(|b| **b).count() as u64;
                prop_assert_eq!(set.count(), count);
                for (i, b) in bits.iter().enumerate() {
                    prop_assert_eq!(set.contains(i as u32), *b);
                }
                // Ranges are disjoint and non-adjacent.
                let v: Vec<_> = set.iter().collect();
                for w in v.windows(2) {
                    prop_assert!(w[0].end < w[1].start);
                }
            }
        }
    }
}
