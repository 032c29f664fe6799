//! The ordered index: an in-memory ordered map `u64 → u64` that one node's
//! own workers use for local range access, as DrTM+H does for TPC-C (DrTM+H
//! §5: "Delivery, Order-Status and Stock-Level … run locally with an ordered
//! index"; DrTM §6 keeps a B+-tree for the same purpose). It is not in
//! registered memory: no remote worker reads it, by one-sided verbs or RPC
//! (a multi-process run sends each rank's to rank 0 after the run, for the
//! checks: `Workload::export_node_local`).
//!
//! It is a secondary structure over rows of the store, so it answers *which
//! keys to look at*; the rows themselves are always read and written through
//! the protocol, which the checker sees. How it stays consistent with the
//! protocols:
//!
//! * changes are made at the transaction's commit point — after every stage
//!   that can abort (lock, validate, renew, log), before the write-back —
//!   through `Txn::index_insert` / `Txn::index_remove`, which the
//!   transaction driver hands to `Workload::at_commit_point`. An aborted
//!   attempt changes nothing; two conflicting transactions change it in their
//!   serialization order (the second cannot pass its commit point before the
//!   first has released the row they conflict on, which the first does only
//!   in its write-back, after its index changes).
//! * an entry can therefore name a row whose write-back has not landed yet
//!   (still locked, or still absent), or one a concurrent transaction has
//!   just deleted: a reader that follows an entry reads the row through its
//!   protocol and aborts with `row_stale` (then retries) if it is absent —
//!   the same outcome as any conflict.
//! * range reads are not validated (no phantom protection, as in DrTM+H and
//!   Deneva): what a transaction did with the keys it found is serializable
//!   and checked; that the set of keys was complete is not.
//!
//! Concurrency: a reader-writer lock around a `BTreeMap`; every operation
//! holds it for one map operation (or one short range walk), never across an
//! await. Workers of one node share it; with one worker per node nothing
//! contends.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::sync::RwLock;

#[derive(Debug, Default)]
pub struct OrderedIndex {
    map: RwLock<BTreeMap<u64, u64>>,
}

impl OrderedIndex {
    pub fn new() -> OrderedIndex {
        OrderedIndex::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<u64, u64>> {
        self.map.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<u64, u64>> {
        self.map.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets `key → value`; returns the previous value.
    pub fn insert(&self, key: u64, value: u64) -> Option<u64> {
        self.write().insert(key, value)
    }

    /// Removes `key`; returns its value.
    pub fn remove(&self, key: u64) -> Option<u64> {
        self.write().remove(&key)
    }

    pub fn get(&self, key: u64) -> Option<u64> {
        self.read().get(&key).copied()
    }

    /// The smallest entry with a key in `range`.
    pub fn first_in(&self, range: RangeInclusive<u64>) -> Option<(u64, u64)> {
        self.read().range(range).next().map(|(&k, &v)| (k, v))
    }

    /// The largest entry with a key in `range`.
    pub fn last_in(&self, range: RangeInclusive<u64>) -> Option<(u64, u64)> {
        self.read().range(range).next_back().map(|(&k, &v)| (k, v))
    }

    /// Appends the entries with a key in `range`, in key order, to `out`.
    pub fn collect_range(&self, range: RangeInclusive<u64>, out: &mut Vec<(u64, u64)>) {
        out.extend(self.read().range(range).map(|(&k, &v)| (k, v)));
    }

    /// Entries with a key in `range`.
    pub fn count_range(&self, range: RangeInclusive<u64>) -> usize {
        self.read().range(range).count()
    }

    /// Removes every entry.
    pub fn clear(&self) {
        self.write().clear();
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_answer_first_last_and_members_in_key_order() {
        let index = OrderedIndex::new();
        for key in [40u64, 10, 30, 20, 50] {
            assert_eq!(index.insert(key, key * 2), None);
        }
        assert_eq!(index.first_in(15..=45), Some((20, 40)));
        assert_eq!(index.last_in(15..=45), Some((40, 80)));
        assert_eq!(index.first_in(51..=60), None);
        let mut out = Vec::new();
        index.collect_range(10..=30, &mut out);
        assert_eq!(out, vec![(10, 20), (20, 40), (30, 60)]);
        assert_eq!(index.remove(20), Some(40));
        assert_eq!(index.first_in(15..=45), Some((30, 60)));
        assert_eq!(index.count_range(0..=u64::MAX), 4);
    }
}
