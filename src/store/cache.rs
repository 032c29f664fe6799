//! The per-worker location cache (DrTM+H §5.1, from DrTM): `(table, key) →
//! slot`, so a hit turns a one-sided access into a single READ of the tuple
//! instead of an index probe plus a READ. RPC replies fill it too, as DrTM+H
//! recommends ("always refill the cache even if two-sided primitive is
//! chosen"), so later one-sided stages of the same transaction know where the
//! tuple is (RCC §5.2, first challenge).
//!
//! Direct-mapped with a fixed number of positions: a conflicting key just
//! replaces the older entry. An entry never goes stale: a slot keeps its key
//! for the whole run (deletes leave tombstones in place, see `store`), so no
//! invalidation is needed; the tuple's key word would catch a stale entry
//! all the same.
//!
//! Grown lazily: a worker that has touched few keys holds them in a small
//! open-addressed table keyed by position, doubled as it fills, and only
//! once that table would reach half the direct-mapped size does it become
//! the direct-mapped array itself. Hits, misses and evictions are exactly
//! those of the direct-mapped cache (at most one entry per position, the
//! latest put wins) — the simulator's hashes depend on them — but a 512-worker
//! cluster no longer zeroes 2¹⁸ entries per worker up front (2 GiB at 24
//! bytes each) when each worker touches a few thousand keys.

use super::TableId;

#[derive(Clone, Copy)]
struct Entry {
    key: u64,
    /// table + 1; 0 = empty.
    tag: u32,
    node: u16,
    slot: u64,
}

const EMPTY: Entry = Entry {
    key: 0,
    tag: 0,
    node: 0,
    slot: 0,
};

/// The smallest sparse table, entries.
const FIRST_SPARSE: usize = 64;

pub struct LocationCache {
    /// Dense: indexed by position. Sparse: open-addressed (linear probing
    /// from `position & (len - 1)`), at most half full.
    entries: Box<[Entry]>,
    /// Positions of the direct-mapped cache, minus one (0 when disabled).
    mask: usize,
    dense: bool,
    /// Occupied entries of the sparse table.
    used: usize,
    pub hits: u64,
    pub misses: u64,
}

impl LocationCache {
    /// A cache of at least `entries` entries (rounded up to a power of two);
    /// 0 disables caching.
    pub fn new(entries: u32) -> LocationCache {
        let len = if entries == 0 {
            0
        } else {
            (entries as usize).next_power_of_two()
        };
        let dense = len <= 2 * FIRST_SPARSE;
        LocationCache {
            entries: vec![EMPTY; if dense { len } else { FIRST_SPARSE }].into_boxed_slice(),
            mask: len.wrapping_sub(1),
            dense,
            used: 0,
            hits: 0,
            misses: 0,
        }
    }

    #[inline]
    fn position(&self, table: TableId, node: u16, key: u64) -> usize {
        let h = (key ^ ((table as u64) << 48) ^ ((node as u64) << 32))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> 20) as usize & self.mask
    }

    #[inline]
    fn matches(entry: &Entry, table: TableId, node: u16, key: u64) -> bool {
        entry.tag == table + 1 && entry.key == key && entry.node == node
    }

    #[inline]
    pub fn get(&mut self, table: TableId, node: u16, key: u64) -> Option<u64> {
        if self.entries.is_empty() {
            self.misses += 1;
            return None;
        }
        let position = self.position(table, node, key);
        let found = if self.dense {
            let entry = &self.entries[position];
            Self::matches(entry, table, node, key).then_some(entry.slot)
        } else {
            // The entry that holds `position` is the only one that can
            // match: probing to the first empty entry finds it if present.
            let mask = self.entries.len() - 1;
            let mut index = position & mask;
            loop {
                let entry = &self.entries[index];
                if entry.tag == 0 {
                    break None;
                }
                if Self::matches(entry, table, node, key) {
                    break Some(entry.slot);
                }
                index = (index + 1) & mask;
            }
        };
        match found {
            Some(slot) => {
                self.hits += 1;
                Some(slot)
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    #[inline]
    pub fn put(&mut self, table: TableId, node: u16, key: u64, slot: u64) {
        if self.entries.is_empty() {
            return;
        }
        let entry = Entry {
            key,
            tag: table + 1,
            node,
            slot,
        };
        let position = self.position(table, node, key);
        if self.dense {
            self.entries[position] = entry;
            return;
        }
        self.put_sparse(position, entry);
        if 2 * self.used > self.entries.len() {
            self.grow();
        }
    }

    /// Stores `entry` as the one holding `position`, replacing the entry
    /// that held it (the direct-mapped eviction).
    fn put_sparse(&mut self, position: usize, entry: Entry) {
        let mask = self.entries.len() - 1;
        let mut index = position & mask;
        loop {
            let held = &self.entries[index];
            if held.tag == 0 {
                self.used += 1;
                break;
            }
            if self.position(held.tag - 1, held.node, held.key) == position {
                break;
            }
            index = (index + 1) & mask;
        }
        self.entries[index] = entry;
    }

    /// Doubles the sparse table, or turns it into the direct-mapped array
    /// once that is no more than twice its size.
    fn grow(&mut self) {
        let old = std::mem::take(&mut self.entries);
        let len = 2 * old.len();
        self.dense = 2 * len > self.mask;
        self.entries = vec![EMPTY; if self.dense { self.mask + 1 } else { len }].into_boxed_slice();
        self.used = 0;
        for entry in old.iter().filter(|e| e.tag != 0) {
            let position = self.position(entry.tag - 1, entry.node, entry.key);
            if self.dense {
                self.entries[position] = *entry;
            } else {
                self.put_sparse(position, *entry);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// The reference: a direct-mapped array of `entries` positions.
    struct Direct {
        entries: Vec<Option<(TableId, u16, u64, u64)>>,
        mask: usize,
    }

    impl Direct {
        fn position(&self, table: TableId, node: u16, key: u64) -> usize {
            let h = (key ^ ((table as u64) << 48) ^ ((node as u64) << 32))
                .wrapping_mul(0x9e37_79b9_7f4a_7c15);
            (h >> 20) as usize & self.mask
        }
    }

    /// Hits, misses and evictions equal a direct-mapped cache's through
    /// every stage of growth, for a cache that stays sparse and for one
    /// that becomes dense.
    #[test]
    fn behaves_as_a_direct_mapped_cache() {
        for (size, keys) in [(1u32 << 18, 300u64), (4_096, 20_000), (100, 500), (1, 10)] {
            let len = (size as usize).next_power_of_two();
            let mut reference = Direct {
                entries: vec![None; len],
                mask: len - 1,
            };
            let mut cache = LocationCache::new(size);
            let mut rng = Rng::derive(size as u64, &[3]);
            for _ in 0..60_000 {
                let table = (rng.unit() * 3.0) as TableId;
                let node = (rng.unit() * 4.0) as u16;
                let key = (rng.unit() * keys as f64) as u64;
                let position = reference.position(table, node, key);
                if rng.unit() < 0.5 {
                    let expected = match reference.entries[position] {
                        Some((t, n, k, slot)) if (t, n, k) == (table, node, key) => Some(slot),
                        _ => None,
                    };
                    assert_eq!(cache.get(table, node, key), expected);
                } else {
                    let slot = key * 7 + table as u64;
                    reference.entries[position] = Some((table, node, key, slot));
                    cache.put(table, node, key, slot);
                }
            }
            if keys < 5_000 && size > 4_096 {
                assert!(!cache.dense, "a few thousand keys stay sparse");
                assert!(cache.entries.len() < len / 8);
            }
        }
        let mut off = LocationCache::new(0);
        off.put(0, 0, 1, 1);
        assert_eq!(off.get(0, 0, 1), None);
        assert_eq!((off.hits, off.misses), (0, 1));
    }
}
