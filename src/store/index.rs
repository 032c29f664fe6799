//! The RDMA-friendly hash index: 3-way cuckoo hashing (RCBench §4.1).
//!
//! Chosen over DrTM's cluster hashing because a lookup has a fixed, small
//! footprint: a key lives in one of three buckets, so a remote worker finds it
//! with one doorbell batch of three READs (one round trip, 3 × 64 B), and a
//! miss is known after that same round. Each bucket is one 64-byte cache line
//! of four entries `(key, slot)`; an empty entry has key `EMPTY`.
//!
//! Insert writes an entry's slot before its key, so a reader that sees the
//! key also sees the slot. The tuple stores its key as well, so a stale or
//! torn probe is caught when the tuple is read. Cuckoo displacement moves
//! entries between buckets, so a key is briefly in none of its buckets: it
//! runs only at load time ([`IndexLayout::insert`]), when no probe is in
//! flight. Run-time inserts ([`IndexLayout::insert_in_place`]) only fill an
//! empty entry of one of the key's three buckets — slot word, then key word —
//! so a concurrent probe sees either no entry or the whole one; entries are
//! never removed or moved during a run (deletes are tombstones in the tuple,
//! see `store`).

use crate::fabric::Region;

use super::TableId;

pub const EMPTY: u64 = u64::MAX;
pub const ENTRIES_PER_BUCKET: u64 = 4;
pub const BUCKET_WORDS: u64 = 2 * ENTRIES_PER_BUCKET;
pub const WAYS: usize = 3;
const MAX_KICKS: u32 = 512;

#[derive(Clone, Copy, Debug)]
pub struct IndexLayout {
    pub base: u64,
    /// Power of two.
    pub buckets: u64,
    seeds: [u64; WAYS],
}

#[derive(Debug)]
pub struct IndexFull;

#[inline]
fn mix64(mut x: u64) -> u64 {
    // splitmix64 finalizer
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl IndexLayout {
    /// An index for `capacity` keys at word `base`: load factor ≤ 50 %.
    pub fn for_capacity(base: u64, capacity: u64, table: TableId) -> IndexLayout {
        let buckets = (capacity.div_ceil(ENTRIES_PER_BUCKET / 2))
            .max(1)
            .next_power_of_two();
        let salt = mix64(table as u64 + 1);
        IndexLayout {
            base,
            buckets,
            seeds: [
                salt ^ 0x9e37_79b9_7f4a_7c15,
                salt ^ 0xc2b2_ae3d_27d4_eb4f,
                salt ^ 0x1656_67b1_9e37_79f9,
            ],
        }
    }

    pub fn words(&self) -> u64 {
        self.buckets * BUCKET_WORDS
    }

    /// Word address of each candidate bucket of `key`.
    #[inline]
    pub fn candidates(&self, key: u64) -> [u64; WAYS] {
        let mut out = [0; WAYS];
        for (way, seed) in self.seeds.iter().enumerate() {
            let bucket = mix64(key ^ seed) & (self.buckets - 1);
            out[way] = self.base + bucket * BUCKET_WORDS;
        }
        out
    }

    /// Finds `key` in the words of one fetched bucket.
    #[inline]
    pub fn find_in_bucket(key: u64, bucket: &[u64]) -> Option<u64> {
        debug_assert_eq!(bucket.len() as u64, BUCKET_WORDS);
        bucket
            .chunks_exact(2)
            .find(|entry| entry[0] == key)
            .map(|entry| entry[1])
    }

    pub fn clear(&self, region: &Region) {
        for bucket in 0..self.buckets {
            for entry in 0..ENTRIES_PER_BUCKET {
                region.store(self.base + bucket * BUCKET_WORDS + 2 * entry, EMPTY);
            }
        }
    }

    /// Local probe by the owning node.
    pub fn lookup(&self, region: &Region, key: u64) -> Option<u64> {
        debug_assert_ne!(key, EMPTY);
        for bucket in self.candidates(key) {
            for entry in 0..ENTRIES_PER_BUCKET {
                let at = bucket + 2 * entry;
                if region.load(at) == key {
                    return Some(region.load(at + 1));
                }
            }
        }
        None
    }

    /// Run-time insert of `key → slot`: fills an empty entry of one of the
    /// key's buckets — slot word, then key word — never moving another
    /// entry. The caller holds the store's insert lock of this table (so no
    /// other inserter writes this index meanwhile) and has checked that
    /// `key` is absent.
    pub fn insert_in_place(&self, region: &Region, key: u64, slot: u64) -> Result<(), IndexFull> {
        debug_assert_ne!(key, EMPTY, "key u64::MAX is reserved by the index");
        let candidates = self.candidates(key);
        if Self::fill_empty(region, &candidates, key, slot) {
            return Ok(());
        }
        Err(IndexFull)
    }

    /// Puts `key → slot` in the first empty entry of `candidates`' buckets
    /// — slot word, then key word, so a reader that sees the key sees its
    /// slot. Returns whether there was one.
    fn fill_empty(region: &Region, candidates: &[u64], key: u64, slot: u64) -> bool {
        for &bucket in candidates {
            for entry in 0..ENTRIES_PER_BUCKET {
                let at = bucket + 2 * entry;
                if region.load(at) == EMPTY {
                    region.store(at + 1, slot);
                    region.store(at, key);
                    return true;
                }
            }
        }
        false
    }

    /// Inserts `key → slot`, displacing entries cuckoo-style if needed.
    pub fn insert(&self, region: &Region, key: u64, slot: u64) -> Result<(), IndexFull> {
        assert_ne!(key, EMPTY, "key u64::MAX is reserved by the index");
        let (mut key, mut slot) = (key, slot);
        for kick in 0..MAX_KICKS {
            let candidates = self.candidates(key);
            if Self::fill_empty(region, &candidates, key, slot) {
                return Ok(());
            }
            // Evict a pseudo-randomly chosen entry of one candidate bucket.
            let pick = mix64(key ^ kick as u64);
            let bucket = candidates[(pick % WAYS as u64) as usize];
            let at = bucket + 2 * ((pick >> 8) % ENTRIES_PER_BUCKET);
            let (evicted_key, evicted_slot) = (region.load(at), region.load(at + 1));
            region.store(at + 1, slot);
            region.store(at, key);
            key = evicted_key;
            slot = evicted_slot;
        }
        Err(IndexFull)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_inserted_key_is_found_in_one_of_its_buckets() {
        let capacity = 50_000;
        let layout = IndexLayout::for_capacity(0, capacity, 3);
        let region = Region::new(layout.words() as usize);
        layout.clear(&region);
        for key in 0..capacity {
            layout
                .insert(&region, key * 7 + 1, key)
                .expect("50 % load fits");
        }
        for key in 0..capacity {
            assert_eq!(layout.lookup(&region, key * 7 + 1), Some(key));
            // The remote path: fetch the three buckets, search them.
            let found = layout.candidates(key * 7 + 1).iter().find_map(|&b| {
                let mut words = [0u64; BUCKET_WORDS as usize];
                region.read(b, &mut words);
                IndexLayout::find_in_bucket(key * 7 + 1, &words)
            });
            assert_eq!(found, Some(key));
        }
        assert_eq!(layout.lookup(&region, 2), None);
    }
}
