//! The `sim` fabric's event queue: a calendar queue (a timing wheel of
//! fixed-width time buckets, Brown 1988) with a binary heap for the far
//! future.
//!
//! It pops events in exactly the order of a binary heap keyed by
//! `(key, insertion number)`: the key is a total order (insertion
//! numbers are unique), and both structures return its minimum, so
//! swapping one for the other leaves every simulation, and every
//! `history_hash`, unchanged. The simulator's key is an event's place in
//! its processing order (`sim`'s module docs, "Processing order"): with
//! `n` nodes a window of the network's lookahead spans `n` times its
//! length in keys, so a bucket is `n` times as wide in keys as in time. It is hand-written because the simulator
//! spends much of its time here and its events are nearly all a few µs
//! ahead of the clock: at 64 nodes a heap of tens of thousands of entries
//! costs a cache miss per level on every push and pop, where a bucket of
//! the wheel is a short vector that is sorted once, when the clock
//! reaches it.
//!
//! Invariants:
//! * every wheel entry's bucket number (`key >> shift`) lies in
//!   `[base, base + buckets)`, so the entries of one slot of the wheel all
//!   belong to one bucket; later buckets' entries wait in `far`;
//! * `base` never exceeds the bucket of the smallest queued key, and keys
//!   pushed are never smaller than the last one popped (the simulator
//!   schedules nothing in the past), so `base` only grows;
//! * the bucket numbered `sorted` is ordered largest key first, so its
//!   minimum is its last element; other buckets are unordered until the
//!   clock reaches them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One queued event: its key, insertion number and payload (the
/// simulator's encoding of the event).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Entry {
    key: u64,
    seq: u64,
    payload: u64,
}

/// Width of a bucket in virtual time, 2^TIME_SHIFT ns. Events are a few
/// per ns at 64 nodes and a few per µs at 2: 16 ns keeps a bucket to tens
/// of entries at scale, and the occupancy bitmap skips the empty ones
/// cheaply when sparse.
pub(crate) const TIME_SHIFT: u32 = 4;
/// Buckets in the wheel (a power of two): 16,384 × 16 ns = 262 µs ahead,
/// beyond every round trip of the built-in profiles; timers further out
/// (back-off, heartbeats, epochs) wait in the heap.
const BUCKETS: usize = 1 << 14;

/// A priority queue of `(key, seq) → payload`, smallest first.
pub(crate) struct EventQueue {
    /// A bucket holds the keys `k` with the same `k >> shift`.
    shift: u32,
    buckets: Vec<Vec<Entry>>,
    /// One bit per wheel slot: whether its bucket holds an entry.
    occupied: Vec<u64>,
    base: u64,
    sorted: u64,
    far: BinaryHeap<Reverse<Entry>>,
    len: usize,
}

impl EventQueue {
    /// A queue whose buckets span `2^shift` keys each.
    pub(crate) fn new(shift: u32) -> EventQueue {
        EventQueue {
            shift,
            buckets: (0..BUCKETS).map(|_| Vec::new()).collect(),
            occupied: vec![0; BUCKETS / 64],
            base: 0,
            sorted: u64::MAX,
            far: BinaryHeap::new(),
            len: 0,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Queues `payload` at `(key, seq)`; the key must not be smaller
    /// than the last one popped.
    #[inline]
    pub(crate) fn push(&mut self, key: u64, seq: u64, payload: u64) {
        self.len += 1;
        self.insert(Entry { key, seq, payload });
    }

    #[inline]
    fn insert(&mut self, entry: Entry) {
        let bucket = entry.key >> self.shift;
        debug_assert!(bucket >= self.base, "an event before the wheel's base");
        if bucket - self.base >= BUCKETS as u64 {
            self.far.push(Reverse(entry));
            return;
        }
        let index = bucket as usize & (BUCKETS - 1);
        let list = &mut self.buckets[index];
        if bucket == self.sorted {
            // Largest first: most pushes are at the clock's own time with
            // the newest insertion number, so they land near the end.
            let at = list.partition_point(|e| *e > entry);
            list.insert(at, entry);
        } else {
            list.push(entry);
        }
        self.occupied[index / 64] |= 1 << (index % 64);
    }

    /// The bucket number of the first non-empty wheel bucket.
    #[inline]
    fn first_bucket(&self) -> Option<u64> {
        let start = self.base as usize & (BUCKETS - 1);
        let words = self.occupied.len();
        let mut word = start / 64;
        // The first word counts only from `start`'s bit on; the scan wraps
        // once around the wheel and then looks at that word's low bits.
        let mut bits = self.occupied[word] & (!0u64 << (start % 64));
        for _ in 0..=words {
            if bits != 0 {
                let index = word * 64 + bits.trailing_zeros() as usize;
                let offset = (index + BUCKETS - start) & (BUCKETS - 1);
                return Some(self.base + offset as u64);
            }
            word = (word + 1) % words;
            bits = self.occupied[word];
        }
        None
    }

    /// The smallest wheel entry, sorting its bucket first if needed.
    #[inline]
    fn wheel_min(&mut self) -> Option<(u64, Entry)> {
        let bucket = self.first_bucket()?;
        let list = &mut self.buckets[bucket as usize & (BUCKETS - 1)];
        if self.sorted != bucket {
            list.sort_unstable_by(|a, b| b.cmp(a));
            self.sorted = bucket;
        }
        list.last().map(|e| (bucket, *e))
    }

    /// The smallest key, without removing its entry.
    #[inline]
    pub(crate) fn peek_key(&mut self) -> Option<u64> {
        let wheel = self.wheel_min().map(|(_, e)| e.key);
        let far = self.far.peek().map(|Reverse(e)| e.key);
        match (wheel, far) {
            (Some(w), Some(f)) => Some(w.min(f)),
            (w, f) => w.or(f),
        }
    }

    /// Removes the entry with the smallest key: `(key, seq, payload)`.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<(u64, u64, u64)> {
        let wheel = self.wheel_min();
        let far = self.far.peek().map(|Reverse(e)| *e);
        let entry = match (wheel, far) {
            (Some((bucket, w)), f) if f.is_none_or(|f| w < f) => {
                let index = bucket as usize & (BUCKETS - 1);
                let list = &mut self.buckets[index];
                list.pop();
                if list.is_empty() {
                    self.occupied[index / 64] &= !(1 << (index % 64));
                }
                self.base = bucket;
                w
            }
            (_, Some(f)) => {
                self.far.pop();
                self.base = f.key >> self.shift;
                f
            }
            (None, None) => return None,
            (Some(_), None) => unreachable!("matched by the first arm"),
        };
        // Far entries the wheel now reaches move into it, so that their
        // bucket stays exact when they come due.
        while let Some(Reverse(next)) = self.far.peek() {
            if (next.key >> self.shift) - self.base >= BUCKETS as u64 {
                break;
            }
            let next = *next;
            self.far.pop();
            self.insert(next);
        }
        self.len -= 1;
        Some((entry.key, entry.seq, entry.payload))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::rng::Rng;

    /// Pops in the order of a binary heap on `(key, insertion number)`,
    /// with pushes interleaved at and after the clock as the simulator
    /// makes them: same time, near future, and far beyond the wheel; with
    /// buckets as wide as at 1 node and as at 64.
    #[test]
    fn pops_in_the_order_of_a_binary_heap() {
        for shift in [TIME_SHIFT, TIME_SHIFT + 6] {
            pops_like_a_heap(shift);
        }
    }

    fn pops_like_a_heap(shift: u32) {
        let mut rng = Rng::derive(7, &[shift as u64]);
        let mut queue = EventQueue::new(shift);
        let mut heap = BinaryHeap::new();
        let mut seq = 0u64;
        let mut now = 0u64;
        let mut popped = 0;
        for round in 0..200_000u64 {
            let pushes = (rng.unit() * 3.0) as u64;
            for _ in 0..pushes {
                let r = rng.unit();
                let delta = if r < 0.3 {
                    0
                } else if r < 0.9 {
                    (rng.unit() * 5_000.0) as u64
                } else if r < 0.99 {
                    (rng.unit() * 300_000.0) as u64
                } else {
                    (rng.unit() * 50_000_000.0) as u64
                };
                let slot = round % 1000;
                queue.push(now + delta, seq, slot);
                heap.push(Reverse((now + delta, seq, slot)));
                seq += 1;
            }
            if rng.unit() < 0.5 {
                assert_eq!(queue.peek_key(), heap.peek().map(|Reverse(e)| e.0));
                let expected = heap.pop().map(|Reverse(entry)| entry);
                let got = queue.pop();
                assert_eq!(got, expected, "pop {popped}");
                if let Some((at, _, _)) = got {
                    assert!(at >= now);
                    now = at;
                    popped += 1;
                }
            }
            assert_eq!(queue.len(), heap.len());
        }
        while let Some(Reverse(entry)) = heap.pop() {
            assert_eq!(queue.pop(), Some(entry));
        }
        assert!(queue.is_empty() && queue.pop().is_none());
        assert!(popped > 50_000);
    }

    /// Equal times come out in insertion order, also when pushed into the
    /// bucket being drained.
    #[test]
    fn equal_times_pop_in_insertion_order() {
        let mut queue = EventQueue::new(TIME_SHIFT);
        for seq in 0..10 {
            queue.push(100, seq, seq);
        }
        assert_eq!(queue.pop(), Some((100, 0, 0)));
        queue.push(100, 10, 10);
        queue.push(101, 11, 11);
        queue.push(100, 12, 12);
        let order: Vec<u64> = std::iter::from_fn(|| queue.pop().map(|(_, _, s)| s)).collect();
        assert_eq!(order, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 11]);
    }
}
