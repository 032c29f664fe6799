//! The log records and the per-coordinator ring buffers they are written
//! into on the backups (RCC §4.1 and Fig. 6's LOG stage, DrTM+H §5.4: the
//! coordinator WRITEs its log into a ring on each backup with one-sided
//! verbs; FaRM's layout).
//!
//! ## Rings
//!
//! Every node's region ends with one ring per coordinator *worker* of the
//! cluster, `(node, worker)`: a head word, a watermark word, then
//! `ring_words` words. Per
//! worker, not per coroutine: the coroutines of a worker run on one thread,
//! so reserving ring space is a local counter bump, and one ring per worker
//! keeps the region small (`nodes × workers` rings). The coordinator owns the
//! tail (in its own memory, [`super::log::LogWriter`]); the backup owns the
//! head (the word before the ring, which it stores after each record it
//! applies and the coordinator READs lazily, only when its own view says the
//! ring is full).
//!
//! ## Apply only what is decided
//!
//! A coordinator's records to its several backups leave one WRITE after
//! another; a coordinator killed between two of them (a real `kill -9`,
//! unlike a crash between the simulator's turns) leaves its record on some
//! backups only. Such a transaction never committed (no backup
//! acknowledged all), so no backup may have applied it: each record
//! carries the coordinator worker's *round* (a counter of its log rounds),
//! and the coordinator writes, with each post, the *watermark* — every
//! round below it has been acknowledged by all its backups — into the
//! word after the head. The backup applies a record only once its round
//! is below the watermark; the rest wait (the next post, or a `LOG_DRAIN`,
//! carries a newer watermark: the lazy notification). Quiescent drains (a
//! run's end, a recovery once every coordinator is quiet) apply every
//! whole record; a dead coordinator's records above its watermark are in
//! doubt, and the recovery decides them (`recovery`).
//!
//! ## Records
//!
//! ```text
//! [len][txn_id][writes | targets << 32][round] ( [table:16|partition:16|record_words:32][key][seq][record…] )* [len ^ txn_id]
//! ```
//!
//! `targets`: how many nodes other than the coordinator's got a record of
//! this transaction (its recovery counts them).
//!
//! `len` counts every word, both ends included. A record may wrap around
//! the end of the ring (it is then written by two WRITEs, in order). The
//! backup applies the record at its head only when the head word is
//! non-zero *and* the trailer, `len` words on, equals `len ^ txn_id`: WRITEs
//! from one worker to one node land in issue order and each WRITE lowest
//! address first, so a whole trailer means a whole record, and a partial
//! record is never applied. After applying it zeroes the record's words and
//! only then publishes the new head, so a trailer position never holds a
//! stale word of an older record.
//!
//! ## Apply
//!
//! A write installs `(record, seq)` into the backup copy only if `seq` is
//! newer than the copy's, under a busy marker in the `seq` word taken by
//! CAS (two workers of the backup may apply records of the same tuple from
//! different coordinators): `seq_end`, then the record, then `seq`, the
//! store's write-back order. Records therefore apply idempotently and in any
//! order, which is what lets RPC records apply in any order once decided, a
//! full ring be drained by RPC, and recovery replay a record that was
//! already applied.

use crate::fabric::NodeId;
use crate::store::{NodeStore, StoreLayout, TableId};

use crate::base::placement::Placement;

/// Words of a record's fixed part (len, txn id, write and target counts,
/// round, trailer).
pub const RECORD_FIXED_WORDS: usize = 5;
/// Words of a record before its first write.
const RECORD_HEAD_WORDS: usize = 4;
/// Words per write besides the record (descriptor, key, seq).
pub const WRITE_FIXED_WORDS: usize = 3;
/// `seq` while a tuple's backup copy is being installed.
const BUSY: u64 = u64::MAX;

/// Where the rings live in every node's region.
#[derive(Clone, Copy, Debug)]
pub struct RingLayout {
    pub base: u64,
    pub ring_words: u64,
    pub workers: u16,
    pub nodes: u32,
}

impl RingLayout {
    /// Reserves the rings of `nodes × workers` coordinators at the end of
    /// `layout`'s region.
    pub fn reserve(layout: &mut StoreLayout, nodes: u32, workers: u16, ring_words: u64) -> Self {
        let rings = nodes as u64 * workers as u64;
        let base = layout.reserve(rings * (ring_words + 2));
        RingLayout {
            base,
            ring_words,
            workers,
            nodes,
        }
    }

    /// The head word of coordinator `(node, worker)`'s ring, in a backup's
    /// region; the ring's words follow it.
    #[inline]
    pub fn head_addr(&self, node: NodeId, worker: u16) -> u64 {
        debug_assert!((node as u32) < self.nodes && worker < self.workers);
        self.base + (node as u64 * self.workers as u64 + worker as u64) * (self.ring_words + 2)
    }

    /// The watermark word of coordinator `(node, worker)`'s ring: records
    /// of rounds below it are decided (see the module doc).
    #[inline]
    pub fn watermark_addr(&self, node: NodeId, worker: u16) -> u64 {
        self.head_addr(node, worker) + 1
    }

    #[inline]
    pub fn ring_addr(&self, node: NodeId, worker: u16) -> u64 {
        self.head_addr(node, worker) + 2
    }
}

/// Appends the header of a record of log round `round`, one of
/// `targets` records of its transaction to nodes other than the
/// coordinator's, to `out` (its length is patched by [`finish_record`]).
pub fn start_record(out: &mut Vec<u64>, txn_id: u64, round: u64, targets: u32) {
    out.clear();
    out.extend_from_slice(&[0, txn_id, (targets as u64) << 32, round]);
}

/// Sets the `targets` of a record built with [`start_record`] (the
/// checksum does not cover it).
pub fn set_record_targets(words: &mut [u64], targets: u32) {
    words[2] = (words[2] & 0xffff_ffff) | (targets as u64) << 32;
}

/// `(round, targets)` of a whole record's words.
pub fn record_meta(words: &[u64]) -> (u64, u32) {
    (words[3], (words[2] >> 32) as u32)
}

/// Appends one write to a record started with [`start_record`].
pub fn push_write(
    out: &mut Vec<u64>,
    table: TableId,
    partition: NodeId,
    key: u64,
    seq: u64,
    record: &[u64],
) {
    debug_assert!(table < 1 << 16);
    out.push(((table as u64) << 48) | ((partition as u64) << 32) | record.len() as u64);
    out.push(key);
    out.push(seq);
    out.extend_from_slice(record);
    out[2] += 1;
}

/// Closes a record: its length at both ends.
pub fn finish_record(out: &mut Vec<u64>) {
    let len = out.len() as u64 + 1;
    out[0] = len;
    out.push(len ^ out[1]);
}

/// One write of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoggedWrite<'a> {
    pub table: TableId,
    pub partition: NodeId,
    pub key: u64,
    pub seq: u64,
    pub record: &'a [u64],
}

/// The writes of a whole record (`words` from its `len` to its trailer);
/// `None` if the words are not a well-formed record.
pub fn parse_record(words: &[u64]) -> Option<(u64, Vec<LoggedWrite<'_>>)> {
    if words.len() < RECORD_FIXED_WORDS || words[0] != words.len() as u64 {
        return None;
    }
    let txn_id = words[1];
    if words[words.len() - 1] != words[0] ^ txn_id {
        return None;
    }
    let count = words[2] as u32 as usize;
    let mut writes = Vec::with_capacity(count);
    let mut at = RECORD_HEAD_WORDS;
    for _ in 0..count {
        let descriptor = *words.get(at)?;
        let record_words = (descriptor & 0xffff_ffff) as usize;
        let end = at + WRITE_FIXED_WORDS + record_words;
        if end > words.len() - 1 {
            return None;
        }
        writes.push(LoggedWrite {
            table: (descriptor >> 48) as TableId,
            partition: ((descriptor >> 32) & 0xffff) as NodeId,
            key: words[at + 1],
            seq: words[at + 2],
            record: &words[at + WRITE_FIXED_WORDS..end],
        });
        at = end;
    }
    (at == words.len() - 1).then_some((txn_id, writes))
}

/// Installs `write` into `store`'s copy of its partition if it is newer
/// than what the copy holds (see the module doc). `store` is the node's own
/// store (copy 0); a row the copy lacks (a run-time insert) is created in
/// the partition's copy. Returns whether it installed; `Err` if the copy
/// could not take the row (table full) or the node holds no copy.
pub fn apply_write(
    store: &NodeStore,
    placement: &Placement,
    write: &LoggedWrite<'_>,
) -> Result<bool, String> {
    let layout = store.layout.table(write.table);
    if write.record.len() != layout.record_words as usize {
        return Err(format!(
            "log record for table {} has {} record words, the table {}",
            layout.name,
            write.record.len(),
            layout.record_words
        ));
    }
    let slot = match store.lookup(write.table, write.key) {
        Some(slot) => slot,
        None => {
            let copy = placement
                .copy_on(store.node, write.partition)
                .filter(|&c| c > 0)
                .ok_or_else(|| {
                    format!(
                        "node {} holds no backup of partition {}",
                        store.node, write.partition
                    )
                })?;
            store
                .backup_view(write.partition, copy)
                .ensure_row(write.table, write.key)
                .map_err(|e| e.to_string())?
        }
    };
    Ok(install_if_newer(
        store,
        write.table,
        slot,
        write.seq,
        write.record,
    ))
}

/// Installs `(record, seq)` into `slot` of `table` if `seq` is newer.
pub fn install_if_newer(
    store: &NodeStore,
    table: TableId,
    slot: u64,
    seq: u64,
    record: &[u64],
) -> bool {
    let layout = store.layout.table(table);
    let seq_addr = layout.seq_addr(slot);
    loop {
        let current = store.region.load(seq_addr);
        if current == BUSY {
            std::hint::spin_loop();
            continue;
        }
        if current >= seq {
            return false;
        }
        if store.region.cas(seq_addr, current, BUSY) != current {
            continue;
        }
        store.region.store(
            layout.tuple_addr(slot) + layout.seq_end_offset() as u64,
            seq,
        );
        store.region.write(layout.record_addr(slot), record);
        store.region.store(seq_addr, seq);
        return true;
    }
}

/// What [`drain_ring`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drained {
    pub records: u64,
    pub writes_installed: u64,
    /// The ring's head after draining (words consumed since the start).
    pub head: u64,
}

/// Which records [`drain_ring`] applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decided {
    /// Those below the ring's watermark word (background apply).
    BelowWatermark,
    /// Every whole record (quiescent: every coordinator of the ring is
    /// alive and done, or the recovery decided them all).
    All,
}

/// Applies the decided whole records at the head of coordinator `(node,
/// worker)`'s ring in `store`'s region (the backup's own), zeroes them
/// and publishes the new head. Stops at the first record not yet whole or
/// not yet decided. `scratch` is reused between calls.
#[allow(clippy::too_many_arguments)]
pub fn drain_ring(
    store: &NodeStore,
    rings: &RingLayout,
    placement: &Placement,
    node: NodeId,
    worker: u16,
    decided: Decided,
    scratch: &mut Vec<u64>,
    redo: &dyn Fn(NodeId, &LoggedWrite<'_>) -> bool,
) -> Drained {
    let region = &store.region;
    let head_addr = rings.head_addr(node, worker);
    let ring = rings.ring_addr(node, worker);
    let size = rings.ring_words;
    let mut head = region.load(head_addr);
    let mut drained = Drained::default();
    loop {
        let at = head % size;
        let len = region.load(ring + at);
        if len == 0 {
            break;
        }
        if len < RECORD_FIXED_WORDS as u64 || len > size {
            debug_assert!(false, "corrupt log record length {len}");
            break;
        }
        let txn_id = region.load(ring + (at + 1) % size);
        if region.load(ring + (at + len - 1) % size) != len ^ txn_id {
            break; // still arriving
        }
        if decided == Decided::BelowWatermark
            && region.load(ring + (at + 3) % size)
                >= region.load(rings.watermark_addr(node, worker))
        {
            break; // not yet acknowledged by every backup
        }
        scratch.clear();
        for offset in 0..len {
            scratch.push(region.load(ring + (at + offset) % size));
        }
        match parse_record(scratch) {
            Some((_, writes)) => {
                for write in &writes {
                    if redo(node, write) {
                        continue;
                    }
                    match apply_write(store, placement, write) {
                        Ok(true) => drained.writes_installed += 1,
                        Ok(false) => {}
                        Err(problem) => debug_assert!(false, "{problem}"),
                    }
                }
            }
            None => debug_assert!(false, "a whole log record did not parse"),
        }
        for offset in 0..len {
            region.store(ring + (at + offset) % size, 0);
        }
        head += len;
        region.store(head_addr, head);
        drained.records += 1;
    }
    drained.head = head;
    drained
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::store::TableSpec;

    fn replicated_store(node: NodeId) -> (Arc<NodeStore>, RingLayout) {
        let mut layout = StoreLayout::with_copies(
            &[TableSpec {
                name: "t",
                record_words: 2,
                capacity_per_node: 8,
            }],
            |_| 1,
            2,
        );
        let rings = RingLayout::reserve(&mut layout, 2, 1, 16);
        let store = Arc::new(NodeStore::new(node, Arc::new(layout)));
        (store, rings)
    }

    fn record(txn_id: u64, key: u64, seq: u64, value: u64) -> Vec<u64> {
        let mut out = Vec::new();
        start_record(&mut out, txn_id, 0, 1);
        push_write(&mut out, 0, 0, key, seq, &[value, value + 1]);
        finish_record(&mut out);
        out
    }

    /// Drains worker 0's ring of node 0 into `store`, redoing nothing
    /// elsewhere.
    fn drain(
        store: &NodeStore,
        rings: &RingLayout,
        placement: &Placement,
        decided: Decided,
    ) -> Drained {
        drain_ring(
            store,
            rings,
            placement,
            0,
            0,
            decided,
            &mut Vec::new(),
            &|_, _| false,
        )
    }

    /// Writes `words` into the 16-word ring at `ring` from `head` on, as
    /// a coordinator's log writes wrap.
    fn write_wrapped(store: &NodeStore, ring: u64, head: u64, words: &[u64]) {
        for (offset, word) in words.iter().enumerate() {
            store
                .region
                .store(ring + (head + offset as u64) % 16, *word);
        }
    }

    #[test]
    fn records_round_trip_and_torn_ones_are_refused() {
        let words = record(77, 5, 3, 10);
        let (txn, writes) = parse_record(&words).unwrap();
        assert_eq!(txn, 77);
        assert_eq!(writes.len(), 1);
        assert_eq!((writes[0].key, writes[0].seq), (5, 3));
        assert_eq!(writes[0].record, &[10, 11]);
        let mut torn = words.clone();
        *torn.last_mut().unwrap() = 0;
        assert!(
            parse_record(&torn).is_none(),
            "a missing trailer is refused"
        );
        assert!(parse_record(&words[..words.len() - 1]).is_none());
    }

    #[test]
    fn background_apply_waits_for_the_watermark() {
        let placement = Placement::new(2, 2);
        let (store, rings) = replicated_store(1);
        store.backup_view(0, 1).insert(0, 5, &[0, 0]).unwrap();
        let ring = rings.ring_addr(0, 0);
        let mut words = Vec::new();
        start_record(&mut words, 1, 7, 2);
        push_write(&mut words, 0, 0, 5, 1, &[3, 4]);
        finish_record(&mut words);
        assert_eq!(record_meta(&words), (7, 2));
        store.region.write(ring, &words);
        let drain = |decided| drain(&store, &rings, &placement, decided);
        // Round 7 is whole but not below the watermark (0, then 7).
        assert_eq!(drain(Decided::BelowWatermark).records, 0);
        store.region.store(rings.watermark_addr(0, 0), 7);
        assert_eq!(drain(Decided::BelowWatermark).records, 0);
        store.region.store(rings.watermark_addr(0, 0), 8);
        assert_eq!(drain(Decided::BelowWatermark).records, 1);
        // A quiescent drain does not wait for it.
        let mut next = Vec::new();
        start_record(&mut next, 2, 9, 1);
        push_write(&mut next, 0, 0, 5, 2, &[5, 6]);
        finish_record(&mut next);
        let head = store.region.load(rings.head_addr(0, 0));
        write_wrapped(&store, ring, head, &next);
        assert_eq!(drain(Decided::BelowWatermark).records, 0);
        assert_eq!(drain(Decided::All).records, 1);
        let slot = store.lookup(0, 5).unwrap();
        assert_eq!(store.seq(0, slot), 2);
    }

    #[test]
    fn the_ring_applies_whole_records_only_newest_wins_and_wraps() {
        let placement = Placement::new(2, 2);
        let (store, rings) = replicated_store(1);
        let backup = store.backup_view(0, 1);
        backup.insert(0, 5, &[0, 0]).unwrap();
        let ring = rings.ring_addr(0, 0);
        // A record whose trailer has not landed is not applied.
        let first = record(1, 5, 2, 20);
        store.region.write(ring, &first[..first.len() - 1]);
        let drained = drain(&store, &rings, &placement, Decided::All);
        assert_eq!(drained.records, 0);
        store
            .region
            .store(ring + first.len() as u64 - 1, *first.last().unwrap());
        let drained = drain(&store, &rings, &placement, Decided::All);
        assert_eq!((drained.records, drained.writes_installed), (1, 1));
        let slot = store.lookup(0, 5).unwrap();
        assert_eq!(store.seq(0, slot), 2);
        // An older version arriving later is ignored (idempotent apply).
        let older = record(2, 5, 1, 99);
        let head = drained.head;
        write_wrapped(&store, ring, head, &older);
        let drained = drain(&store, &rings, &placement, Decided::All);
        assert_eq!((drained.records, drained.writes_installed), (1, 0));
        let mut value = Vec::new();
        store.record(0, slot, &mut value);
        assert_eq!(value, vec![20, 21]);
        // The second record wrapped around the ring's end (head 16 + ... ).
        assert!(drained.head > 16, "the test wraps: head {}", drained.head);
        // A run-time insert lands in the backup copy, not in copy 0.
        let insert = record(3, 9, 1, 7);
        let head = drained.head;
        write_wrapped(&store, ring, head, &insert);
        drain(&store, &rings, &placement, Decided::All);
        assert_eq!(store.rows(0), 0, "copy 0 has no rows");
        assert_eq!(store.rows_in_copy(0, 1), 2);
    }
}
