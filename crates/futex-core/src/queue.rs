//! One address's waiters, in the order they queued.
//!
//! Waiters are appended with increasing sequence numbers (taken under the
//! bucket lock), and almost always leave from the front (notify, unpark).
//! A deque of `(seq, waiter)` serves both in O(1): one store to append, one
//! load to pop. It is kept in fixed chunks rather than one growing block: a
//! block that doubles leaves its old copies behind in the allocator (with 10k
//! waiters that cost more memory than the waiters), chunks are never copied
//! and are freed as the front passes them. A waiter that leaves from the
//! middle (timeout, cancellation) is found by binary search on its sequence
//! number and leaves a hole; holes at either end are trimmed at once, and the
//! queue is compacted once holes outnumber waiters, so each removal costs
//! `O(log n)` amortised and holes never hold more memory than the waiters.

use std::collections::VecDeque;

/// Entries per chunk (48 bytes each for the table's waiters): a few kB, so
/// that a long queue lives in blocks that are never copied to grow it.
const CHUNK: usize = 64;
/// Below this many entries, holes are not worth a compaction.
const MIN_COMPACT: usize = 32;

type Entry<T> = (u64, Option<T>);

/// Entries live in chunks of [`CHUNK`] entries; every chunk but the last is
/// full, and the last grows as a `Vec` does (a queue of one waiter takes a
/// few dozen bytes). Entry `i` of the queue is at `head + i` counting from
/// the start of the first chunk; the entries before `head` have left.
pub(crate) struct SeqQueue<T> {
    /// Sorted by sequence number; `None` is a hole. The first and the last
    /// entry, if any, are never holes. Empty exactly when `entries` is 0.
    chunks: VecDeque<Vec<Entry<T>>>,
    head: usize,
    /// Entries from `head` on, holes included.
    entries: usize,
    /// Entries that are not holes.
    live: usize,
}

impl<T> SeqQueue<T> {
    pub(crate) fn new() -> Self {
        SeqQueue { chunks: VecDeque::new(), head: 0, entries: 0, live: 0 }
    }

    /// How many waiters are queued.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.live == 0
    }

    fn at(&self, i: usize) -> &Entry<T> {
        let i = self.head + i;
        &self.chunks[i / CHUNK][i % CHUNK]
    }

    fn at_mut(&mut self, i: usize) -> &mut Entry<T> {
        let i = self.head + i;
        &mut self.chunks[i / CHUNK][i % CHUNK]
    }

    fn last(&self) -> Option<&Entry<T>> {
        self.chunks.back().and_then(|c| c.last())
    }

    /// Forgets every chunk: the queue holds no entry any more.
    fn reset(&mut self) {
        self.chunks.clear();
        self.head = 0;
    }

    /// Appends `value` as `seq`, which is larger than any queued so far.
    pub(crate) fn push(&mut self, seq: u64, value: T) {
        debug_assert!(self.last().is_none_or(|&(last, _)| last < seq), "sequence numbers increase");
        match self.chunks.back_mut() {
            Some(chunk) if chunk.len() < CHUNK => chunk.push((seq, Some(value))),
            _ => {
                let mut chunk = Vec::with_capacity(if self.chunks.is_empty() { 4 } else { CHUNK });
                chunk.push((seq, Some(value)));
                self.chunks.push_back(chunk);
            }
        }
        self.entries += 1;
        self.live += 1;
    }

    /// The oldest waiter.
    pub(crate) fn first(&self) -> Option<(u64, &T)> {
        (self.entries > 0).then(|| {
            let (seq, value) = self.at(0);
            (*seq, value.as_ref().expect("the first entry is no hole"))
        })
    }

    /// Drops the first entry, whose value has been taken.
    fn advance(&mut self) {
        self.head += 1;
        self.entries -= 1;
        if self.entries == 0 {
            self.reset();
        } else if self.head == CHUNK {
            self.chunks.pop_front();
            self.head = 0;
        }
    }

    /// Removes and returns the oldest waiter.
    pub(crate) fn pop_first(&mut self) -> Option<(u64, T)> {
        if self.entries == 0 {
            return None;
        }
        let (seq, value) = self.at_mut(0);
        let (seq, value) = (*seq, value.take().expect("the first entry is no hole"));
        self.live -= 1;
        self.advance();
        self.tidy();
        Some((seq, value))
    }

    /// Where the entry `seq` is, if it is in the queue (maybe as a hole).
    fn find(&self, seq: u64) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.entries);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.at(mid).0.cmp(&seq) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// Removes the waiter `seq`, if it is queued.
    pub(crate) fn remove(&mut self, seq: u64) -> Option<T> {
        let at = self.find(seq)?;
        let value = self.at_mut(at).1.take()?;
        self.live -= 1;
        self.tidy();
        Some(value)
    }

    /// Whether the waiter `seq` is queued.
    pub(crate) fn contains(&self, seq: u64) -> bool {
        self.find(seq).is_some_and(|at| self.at(at).1.is_some())
    }

    /// The waiters, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        self.chunks.iter().flatten().skip(self.head).filter_map(|(seq, value)| value.as_ref().map(|v| (*seq, v)))
    }

    /// Keeps only the waiters for which `keep` answers true.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(u64, &mut T) -> bool) {
        let mut old = std::mem::replace(self, SeqQueue::new());
        for (seq, value) in old.chunks.iter_mut().flatten().skip(old.head) {
            if let Some(mut v) = value.take() {
                if keep(*seq, &mut v) {
                    self.push(*seq, v);
                }
            }
        }
    }

    /// Restores the invariants after a removal: no hole at either end, and
    /// no more holes than waiters (beyond a few).
    fn tidy(&mut self) {
        while self.entries > 0 && self.at(0).1.is_none() {
            self.advance();
        }
        while self.last().is_some_and(|(_, v)| v.is_none()) {
            let chunk = self.chunks.back_mut().expect("a last entry");
            chunk.pop();
            let emptied = chunk.is_empty();
            self.entries -= 1;
            if self.entries == 0 {
                self.reset();
            } else if emptied {
                self.chunks.pop_back();
            }
        }
        if self.entries - self.live > MIN_COMPACT.max(self.live) {
            self.retain(|_, _| true);
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
        assert_eq!(q.entries == 0, q.chunks.is_empty());
        let holes = q.entries - q.live;
        assert!(holes <= super::MIN_COMPACT.max(q.live), "{holes} holes for {} waiters", q.live);
        assert!(q.entries == 0 || q.at(0).1.is_some());
        assert!(q.last().is_none_or(|(_, v)| v.is_some()));
        // Every chunk but the last is full; the first from `head` on.
        let stored: usize = q.chunks.iter().map(Vec::len).sum();
        assert_eq!(stored, q.head + q.entries);
        assert!(q.chunks.iter().rev().skip(1).all(|c| c.len() == super::CHUNK));
        assert!(q.head < super::CHUNK.max(1));
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
        assert!(q.entries <= super::MIN_COMPACT + 2);
        assert!(q.chunks.len() <= 2, "{} chunks", q.chunks.len());
        assert_eq!(q.pop_first(), Some((1, ())));
        assert_eq!(q.pop_first(), Some((100_000, ())));
        assert_eq!(q.pop_first(), None);
    }
}
