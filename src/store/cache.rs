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
//! once that table would reach the direct-mapped size does it become the
//! direct-mapped array itself. So a cache whose positions are up to a
//! quarter used costs at most half the array: a 0.05-virtual-second run of
//! 64 nodes × 8 workers uses tens of thousands of a worker's 2¹⁸
//! positions, 2 MB where the array takes 4. Hits, misses and evictions are
//! exactly those of the direct-mapped cache (at most one entry per
//! position, the latest put wins) — the simulator's hashes depend on them
//! — but a 512-worker cluster no longer zeroes 2¹⁸ entries per worker up
//! front (2 GiB at 16 bytes each) when each worker touches a few thousand
//! keys.

use std::sync::Arc;

use super::{NodeStore, TableId, KEY_WORD};

/// 16 bytes: a long run of a large cluster fills every worker's cache
/// (512 workers × 2¹⁸ entries: 2 GiB at this size, 3 GiB at 24 bytes).
#[derive(Clone, Copy)]
struct Entry {
    key: u64,
    /// `tag << 48 | node << 32 | slot`, where tag = table + 1 (0 = empty).
    location: u64,
}

const EMPTY: Entry = Entry {
    key: 0,
    location: 0,
};

/// The slot's bits of `Entry::location`.
const SLOT_MASK: u64 = 0xffff_ffff;

impl Entry {
    /// `location`'s bits above the slot for `(table, node)`, if the table
    /// fits its 16 bits.
    #[inline]
    fn table_and_node(table: TableId, node: u16) -> Option<u64> {
        let tag = table as u64 + 1;
        (tag < 1 << 16).then_some(tag << 48 | (node as u64) << 32)
    }

    /// The entry for `(table, node, key) → slot`, if its table and slot fit
    /// the packed word. Every layout does (a node holds fewer than 2³²
    /// slots in the memory a config may ask for, and a workload a few
    /// tables); one that did not would go uncached, never mis-cached.
    #[inline]
    fn new(table: TableId, node: u16, key: u64, slot: u64) -> Option<Entry> {
        let high = Self::table_and_node(table, node)?;
        (slot <= SLOT_MASK).then_some(Entry {
            key,
            location: high | slot,
        })
    }

    #[inline]
    fn table(&self) -> TableId {
        ((self.location >> 48) - 1) as TableId
    }

    #[inline]
    fn node(&self) -> u16 {
        (self.location >> 32) as u16
    }

    #[inline]
    fn slot(&self) -> u64 {
        self.location & SLOT_MASK
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.location == 0
    }
}

/// The smallest sparse table, entries.
const FIRST_SPARSE: usize = 64;

#[derive(Clone)]
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

    /// Whether `entry` is `(table, node, key)`'s.
    #[inline]
    fn matches(entry: &Entry, table: TableId, node: u16, key: u64) -> bool {
        entry.key == key && Entry::table_and_node(table, node) == Some(entry.location & !SLOT_MASK)
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
            Self::matches(entry, table, node, key).then_some(entry.slot())
        } else {
            // The entry that holds `position` is the only one that can
            // match: probing to the first empty entry finds it if present.
            let mask = self.entries.len() - 1;
            let mut index = position & mask;
            loop {
                let entry = &self.entries[index];
                if entry.is_empty() {
                    break None;
                }
                if Self::matches(entry, table, node, key) {
                    break Some(entry.slot());
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
        let Some(entry) = Entry::new(table, node, key, slot) else {
            return;
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
            if held.is_empty() {
                self.used += 1;
                break;
            }
            if self.position(held.table(), held.node(), held.key) == position {
                break;
            }
            index = (index + 1) & mask;
        }
        self.entries[index] = entry;
    }

    /// Puts the slot of every row loaded in `stores` (each node's own
    /// partition, every table), slot by slot across the nodes, so that a
    /// cache too small for them all keeps a mix of every node's rows: the
    /// cache a long run would have warmed, without its hit and miss
    /// counts. Reads the stores' regions; call it before the run.
    pub fn warm(&mut self, stores: &[Arc<NodeStore>]) {
        if self.entries.is_empty() {
            return;
        }
        let Some(first) = stores.first() else {
            return;
        };
        for table in &first.layout.tables {
            let rows: Vec<u64> = stores.iter().map(|s| s.rows(table.id)).collect();
            let most = rows.iter().copied().max().unwrap_or(0);
            for slot in 0..most {
                for (store, &loaded) in stores.iter().zip(&rows) {
                    if slot < loaded {
                        let key = store.region.load(table.tuple_addr(slot) + KEY_WORD as u64);
                        self.put(table.id, store.node, key, slot);
                    }
                }
            }
        }
    }

    /// Doubles the sparse table, or turns it into the direct-mapped array
    /// once the doubled table would be as large.
    fn grow(&mut self) {
        let old = std::mem::take(&mut self.entries);
        let len = 2 * old.len();
        self.dense = len > self.mask;
        self.entries = vec![EMPTY; if self.dense { self.mask + 1 } else { len }].into_boxed_slice();
        self.used = 0;
        for entry in old.iter().filter(|e| !e.is_empty()) {
            let position = self.position(entry.table(), entry.node(), entry.key);
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
    use crate::base::rng::Rng;

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

    /// A cache stays sparse, at no more than half the direct-mapped array's
    /// memory, until a quarter of its positions are used; past that it is
    /// the array.
    #[test]
    fn stays_sparse_until_a_quarter_is_used() {
        let size = 1u32 << 12;
        let mut cache = LocationCache::new(size);
        let mut key = 0;
        while cache.used < size as usize / 4 {
            cache.put(0, 1, key, key);
            key += 1;
            assert!(!cache.dense, "{} of {size} positions used", cache.used);
            assert!(cache.entries.len() <= size as usize / 2);
        }
        while !cache.dense {
            cache.put(0, 1, key, key);
            key += 1;
        }
        assert_eq!(cache.entries.len(), size as usize);
        assert!(key > size as u64 / 4);
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
                // Most on four nodes; some on the highest node ids, which
                // use every bit the packed entry gives a node.
                let node = if rng.unit() < 0.9 {
                    (rng.unit() * 4.0) as u16
                } else {
                    u16::MAX - (rng.unit() * 4.0) as u16
                };
                let key = (rng.unit() * keys as f64) as u64;
                let position = reference.position(table, node, key);
                if rng.unit() < 0.5 {
                    let expected = match reference.entries[position] {
                        Some((t, n, k, slot)) if (t, n, k) == (table, node, key) => Some(slot),
                        _ => None,
                    };
                    assert_eq!(cache.get(table, node, key), expected);
                } else {
                    // Up to the largest slot a packed entry holds.
                    let slot = (key * 7 + table as u64) << (node as u32 % 21);
                    let slot = slot.min((1 << 32) - 1);
                    reference.entries[position] = Some((table, node, key, slot));
                    cache.put(table, node, key, slot);
                }
            }
            if keys < 5_000 && size > 4_096 {
                assert!(!cache.dense, "a few thousand keys stay sparse");
                assert!(cache.entries.len() < len / 8);
            }
        }
        // A slot or table beyond the packed word goes uncached, and looks
        // like no other entry.
        let mut cache = LocationCache::new(64);
        cache.put(0, 1, 5, 9);
        cache.put(0, 1, 6, 1 << 32);
        cache.put(u16::MAX as TableId, 1, 7, 3);
        assert_eq!(cache.get(0, 1, 5), Some(9));
        assert_eq!(cache.get(0, 1, 6), None);
        assert_eq!(cache.get(u16::MAX as TableId, 1, 7), None);
        assert_eq!(
            cache.get((1 << 16) as TableId, 1, 5),
            None,
            "table 65536 is not table 0"
        );
        let mut off = LocationCache::new(0);
        off.put(0, 0, 1, 1);
        assert_eq!(off.get(0, 0, 1), None);
        assert_eq!((off.hits, off.misses), (0, 1));
    }
}
