//! One address's waiters, in the order they queued.
//!
//! Waiters are appended with increasing sequence numbers (taken under the
//! bucket lock), and almost always leave from the front (notify, unpark).
//! A ring buffer of `(seq, waiter)` serves both in O(1): one store to append,
//! one load to pop, and entries laid out in one block rather than in tree
//! nodes. A waiter that leaves from the middle (timeout, cancellation) is
//! found by binary search on its sequence number and leaves a hole; holes at
//! either end are trimmed at once, and the buffer is compacted once holes
//! outnumber waiters, so each removal costs `O(log n)` amortised and holes
//! never hold more memory than the waiters themselves. The buffer gives
//! memory back as it empties.

use std::collections::VecDeque;

/// Below this many entries, holes are not worth a compaction.
const MIN_COMPACT: usize = 32;
/// Capacity kept however empty the queue becomes.
const MIN_CAPACITY: usize = 8;

pub(crate) struct SeqQueue<T> {
    /// Sorted by sequence number; `None` is a hole. The first and the last
    /// entry, if any, are never holes.
    entries: VecDeque<(u64, Option<T>)>,
    /// Entries that are not holes.
    live: usize,
}

impl<T> SeqQueue<T> {
    pub(crate) fn new() -> Self {
        SeqQueue { entries: VecDeque::new(), live: 0 }
    }

    /// How many waiters are queued.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Appends `value` as `seq`, which is larger than any queued so far.
    pub(crate) fn push(&mut self, seq: u64, value: T) {
        debug_assert!(self.entries.back().is_none_or(|&(last, _)| last < seq), "sequence numbers increase");
        self.entries.push_back((seq, Some(value)));
        self.live += 1;
    }

    /// The oldest waiter.
    pub(crate) fn first(&self) -> Option<(u64, &T)> {
        self.entries.front().map(|(seq, value)| (*seq, value.as_ref().expect("the first entry is no hole")))
    }

    /// Removes and returns the oldest waiter.
    pub(crate) fn pop_first(&mut self) -> Option<(u64, T)> {
        let (seq, value) = self.entries.pop_front()?;
        self.live -= 1;
        self.tidy();
        Some((seq, value.expect("the first entry is no hole")))
    }

    /// Removes the waiter `seq`, if it is queued.
    pub(crate) fn remove(&mut self, seq: u64) -> Option<T> {
        let at = self.entries.binary_search_by_key(&seq, |&(s, _)| s).ok()?;
        let value = self.entries[at].1.take()?;
        self.live -= 1;
        self.tidy();
        Some(value)
    }

    /// Whether the waiter `seq` is queued.
    pub(crate) fn contains(&self, seq: u64) -> bool {
        self.entries.binary_search_by_key(&seq, |&(s, _)| s).is_ok_and(|at| self.entries[at].1.is_some())
    }

    /// The waiters, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        self.entries.iter().filter_map(|(seq, value)| value.as_ref().map(|v| (*seq, v)))
    }

    /// Keeps only the waiters for which `keep` answers true.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(u64, &mut T) -> bool) {
        let mut live = 0;
        self.entries.retain_mut(|(seq, value)| {
            let kept = value.as_mut().is_some_and(|v| keep(*seq, v));
            live += usize::from(kept);
            kept
        });
        self.live = live;
        self.tidy();
    }

    /// Restores the invariants after a removal: no hole at either end, no
    /// more holes than waiters (beyond a few), no capacity far beyond use.
    fn tidy(&mut self) {
        while self.entries.front().is_some_and(|(_, v)| v.is_none()) {
            self.entries.pop_front();
        }
        while self.entries.back().is_some_and(|(_, v)| v.is_none()) {
            self.entries.pop_back();
        }
        let holes = self.entries.len() - self.live;
        if holes > MIN_COMPACT && holes > self.live {
            self.entries.retain(|(_, v)| v.is_some());
        }
        let capacity = self.entries.capacity();
        if capacity > MIN_CAPACITY && self.entries.len() < capacity / 4 {
            self.entries.shrink_to((capacity / 2).max(MIN_CAPACITY));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SeqQueue;
    use std::collections::BTreeMap;

    /// A small deterministic generator (xorshift), so failures reproduce.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self, below: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % below
        }
    }

    fn same(q: &SeqQueue<u64>, model: &BTreeMap<u64, u64>) {
        assert_eq!(q.len(), model.len());
        assert_eq!(q.is_empty(), model.is_empty());
        assert!(q.iter().map(|(s, v)| (s, *v)).eq(model.iter().map(|(s, v)| (*s, *v))));
        assert_eq!(q.first().map(|(s, v)| (s, *v)), model.first_key_value().map(|(s, v)| (*s, *v)));
        let holes = q.entries.len() - q.live;
        assert!(holes <= super::MIN_COMPACT.max(q.live), "{holes} holes for {} waiters", q.live);
        assert!(q.entries.front().is_none_or(|(_, v)| v.is_some()));
        assert!(q.entries.back().is_none_or(|(_, v)| v.is_some()));
    }

    /// Every operation, in random mixes, against `BTreeMap` as the model.
    #[test]
    fn behaves_as_an_ordered_map() {
        for seed in 1..40u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut q = SeqQueue::new();
            let mut model = BTreeMap::new();
            let mut next = 1u64;
            for _ in 0..4000 {
                match rng.next(10) {
                    0..=4 => {
                        q.push(next, next * 3);
                        model.insert(next, next * 3);
                        next += 1 + rng.next(3);
                    }
                    5 | 6 => assert_eq!(q.pop_first(), model.pop_first()),
                    7 | 8 => {
                        // Mostly seqs that are queued, some that never were or left.
                        let seq = 1 + rng.next(next);
                        assert_eq!(q.contains(seq), model.contains_key(&seq));
                        assert_eq!(q.remove(seq), model.remove(&seq));
                        assert!(!q.contains(seq));
                    }
                    _ => {
                        let m = 2 + rng.next(5);
                        q.retain(|s, _| s % m != 0);
                        model.retain(|s, _| s % m != 0);
                    }
                }
                same(&q, &model);
            }
        }
    }

    /// Waiters leaving from the middle leave no memory behind them.
    #[test]
    fn holes_and_capacity_stay_bounded() {
        let mut q = SeqQueue::new();
        for seq in 1..=100_000u64 {
            q.push(seq, ());
        }
        // Every waiter but the first and the last times out.
        for seq in 2..100_000u64 {
            assert_eq!(q.remove(seq), Some(()));
        }
        assert_eq!(q.len(), 2);
        assert!(q.entries.len() <= super::MIN_COMPACT + 2);
        assert!(q.entries.capacity() < 1024, "capacity {}", q.entries.capacity());
        assert_eq!(q.pop_first(), Some((1, ())));
        assert_eq!(q.pop_first(), Some((100_000, ())));
        assert_eq!(q.pop_first(), None);
    }
}
