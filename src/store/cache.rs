//! The per-worker location cache (DrTM+H §5.1, from DrTM): `(table, key) →
//! slot`, so a hit turns a one-sided access into a single READ of the tuple
//! instead of an index probe plus a READ. RPC replies fill it too, as DrTM+H
//! recommends ("always refill the cache even if two-sided primitive is
//! chosen"), so later one-sided stages of the same transaction know where the
//! tuple is (RCC §5.2, first challenge).
//!
//! Direct-mapped with a fixed number of entries: no allocation after start,
//! and a conflicting key just replaces the older entry. An entry never goes
//! stale: a slot keeps its key for the whole run (deletes leave tombstones in
//! place, see `store`), so no invalidation is needed; the tuple's key word
//! would catch a stale entry all the same.

use super::TableId;

#[derive(Clone, Copy)]
struct Entry {
    key: u64,
    /// table + 1; 0 = empty.
    tag: u32,
    node: u16,
    slot: u64,
}

pub struct LocationCache {
    entries: Box<[Entry]>,
    mask: usize,
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
        LocationCache {
            entries: vec![
                Entry {
                    key: 0,
                    tag: 0,
                    node: 0,
                    slot: 0
                };
                len
            ]
            .into_boxed_slice(),
            mask: len.wrapping_sub(1),
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
    pub fn get(&mut self, table: TableId, node: u16, key: u64) -> Option<u64> {
        if self.entries.is_empty() {
            self.misses += 1;
            return None;
        }
        let entry = self.entries[self.position(table, node, key)];
        if entry.tag == table + 1 && entry.key == key && entry.node == node {
            self.hits += 1;
            Some(entry.slot)
        } else {
            self.misses += 1;
            None
        }
    }

    #[inline]
    pub fn put(&mut self, table: TableId, node: u16, key: u64, slot: u64) {
        if self.entries.is_empty() {
            return;
        }
        let position = self.position(table, node, key);
        self.entries[position] = Entry {
            key,
            tag: table + 1,
            node,
            slot,
        };
    }
}
