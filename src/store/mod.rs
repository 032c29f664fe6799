//! The store (docs/ARCHITECTURE.md, layer 3): tables of fixed-size tuples in
//! registered memory, a hash index per table that a remote worker can probe
//! with one-sided READs, and a per-worker location cache.
//!
//! Every node holds one partition of every table, laid out identically on
//! every node, so any worker computes any remote address locally (RCC §3.2:
//! metadata placed with the record, offsets precomputed and cached).
//!
//! Tuple layout, in 8-byte words (RCC Fig. 3, plus two store words):
//!
//! ```text
//! [key][seq][protocol header: H words][record: R words][seq_end]
//! ```
//!
//! * `key`: the primary key, so a cached location can be verified.
//! * `seq`: count of committed writes to this tuple (version 0 = loaded).
//!   The checker needs it; OCC uses it as its version.
//! * protocol header: e.g. the lock word (NO_WAIT, OCC: word 0).
//! * `seq_end`: a copy of `seq`. Writers install `seq_end` first, then the
//!   record, then `seq` (separate verbs, FIFO), against the increasing
//!   address order of every READ, so a READ that sees `seq == seq_end` saw
//!   one version of the record whole (DrTM+H §5.2's consistency check; the
//!   argument is in `txn::kit`).
//!
//! Invariant: `seq` only changes while the tuple's lock is held, and is
//! written after the record it describes; `seq_end` before it.
//!
//! ## Run-time inserts and deletes
//!
//! Tables that take inserts or deletes during a run (TPC-C's orders,
//! new-orders, order lines and history) keep a *row state* in record word 0
//! ([`ROW_STATE_WORD`]): [`ROW_LIVE`] or [`ROW_ABSENT`]. A row is then a
//! sequence of versions like any other, and inserting or deleting it is a
//! write that every protocol already knows how to lock, validate, log and
//! install, with either primitive:
//!
//! * **insert** of key `k` ([`NodeStore::ensure_row`], then a write through
//!   the protocol): if `k` has no tuple yet, the store claims a fresh slot,
//!   writes the key word (every other word of a never-used slot is already
//!   0: `seq = seq_end = 0`, free lock, row state absent), and only then
//!   publishes `k → slot` in the cuckoo index with
//!   [`IndexLayout::insert_in_place`] (slot word, then key word, no cuckoo
//!   displacement). A concurrent one-sided probe therefore finds either no
//!   entry or an entry whose tuple is whole and says *absent* at version 0 —
//!   never a partial row. The transaction then writes the row through its
//!   protocol, reading version `v` (absent) and installing `v + 1` (live): the
//!   first insert of a key installs version 1, as the checker expects. An
//!   insert that finds the row live aborts (`row_stale`).
//! * **delete** is a write that installs the next version with the row
//!   state absent: a tombstone. The slot keeps its key and its index entry
//!   for the rest of the run and is never given to another key, so a reader
//!   holding a stale location (cache entry, probe result, RPC reply) reaches
//!   the same key's tombstone, never a freed or reused slot. Re-inserting a
//!   deleted key reuses its own slot as the next version.
//!
//! ## Backup copies (replication, `crate::replication`)
//!
//! With replication factor `r > 1` every table has `r` *copies* of its slot
//! range on every node: copy 0 holds the node's own partition, copy `j`
//! (1 ≤ j < r) the backup of partition `node − j (mod n)` (placement in
//! `replication::placement`). Copy `j`'s rows live in slots
//! `[j · capacity, (j + 1) · capacity)`, all in the one cuckoo index of
//! the table (keys are unique per table across partitions), so a promoted
//! backup serves a failed partition's keys with the very same one-sided
//! probes and RPC handlers as its own. [`NodeStore::rows`] and every scan
//! the checker and the workload invariants make count copy 0 only, so a
//! node's backup rows are invisible to them; with `r = 1` the layout is
//! exactly the unreplicated one. A backup copy is loaded by the workload's
//! own loader through [`NodeStore::backup_view`], a store handle whose
//! `node` is the backed-up partition and whose inserts go to its copy.
//!
//! Run-time inserts are made by the node that owns the row (every TPC-C
//! insert goes to the home warehouse, which is the coordinator's node);
//! inserters on one node serialize on a per-table lock held for the few
//! word stores of one claim. Slots of aborted inserts stay absent (their
//! versions stay 0) and are not reclaimed during a run. A workload inserts a
//! key only on the one node its key belongs to (as for loaded rows), so an
//! aborted attempt's placeholder can never duplicate a key another node
//! holds; keys computed from committed state (TPC-C's order ids) are reused
//! by the next attempt that computes them, so aborts leak no slots there.

pub mod cache;
pub mod index;
pub mod ordered;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::fabric::{NodeId, Region};
pub use cache::LocationCache;
pub use index::IndexLayout;
pub use ordered::OrderedIndex;

pub type TableId = u32;

/// Word offsets inside a tuple.
pub const KEY_WORD: u32 = 0;
pub const SEQ_WORD: u32 = 1;
pub const HEADER_WORD: u32 = 2;

/// Record word that holds the row state in tables with run-time inserts and
/// deletes (see the module doc).
pub const ROW_STATE_WORD: usize = 0;
/// The row exists (loaded or inserted by a committed transaction).
pub const ROW_LIVE: u64 = 1;
/// The row does not exist: a never-committed insert's placeholder, or a
/// tombstone left by a delete. A never-used slot reads as absent.
pub const ROW_ABSENT: u64 = 0;

/// Whether `record` (of a table with a row state) holds a live row.
#[inline]
pub fn row_live(record: &[u64]) -> bool {
    record[ROW_STATE_WORD] == ROW_LIVE
}

/// What a workload asks for: one table.
#[derive(Clone, Debug)]
pub struct TableSpec {
    pub name: &'static str,
    pub record_words: u32,
    /// Rows one node can hold.
    pub capacity_per_node: u64,
}

/// Where a table lives in every node's region.
#[derive(Clone, Debug)]
pub struct TableLayout {
    pub id: TableId,
    pub name: &'static str,
    pub header_words: u32,
    pub record_words: u32,
    pub tuple_words: u32,
    /// Rows of one copy (one partition) of the table on a node.
    pub capacity: u64,
    /// Copies of the slot range per node: the replication factor (1: the
    /// node's own partition only; see the module doc).
    pub copies: u32,
    /// First word of tuple 0.
    pub base: u64,
    pub index: IndexLayout,
}

impl TableLayout {
    #[inline]
    pub fn tuple_addr(&self, slot: u64) -> u64 {
        debug_assert!(
            slot < self.capacity * self.copies as u64,
            "slot {slot} beyond capacity"
        );
        self.base + slot * self.tuple_words as u64
    }

    /// First slot of copy `copy` (0: the node's own partition).
    #[inline]
    pub fn copy_base(&self, copy: u32) -> u64 {
        debug_assert!(copy < self.copies);
        copy as u64 * self.capacity
    }

    #[inline]
    pub fn seq_addr(&self, slot: u64) -> u64 {
        self.tuple_addr(slot) + SEQ_WORD as u64
    }

    /// Address of protocol header word `word`.
    #[inline]
    pub fn header_addr(&self, slot: u64, word: u32) -> u64 {
        debug_assert!(word < self.header_words);
        self.tuple_addr(slot) + (HEADER_WORD + word) as u64
    }

    /// Offset of the record inside a tuple.
    #[inline]
    pub fn record_offset(&self) -> u32 {
        HEADER_WORD + self.header_words
    }

    #[inline]
    pub fn record_addr(&self, slot: u64) -> u64 {
        self.tuple_addr(slot) + self.record_offset() as u64
    }

    #[inline]
    pub fn seq_end_offset(&self) -> u32 {
        self.record_offset() + self.record_words
    }
}

/// The layout of every node's region: tables and their indexes, then the
/// per-transaction metadata area.
#[derive(Debug)]
pub struct StoreLayout {
    pub tables: Vec<TableLayout>,
    pub region_words: u64,
    /// Per-transaction global metadata (see [`StoreLayout::with_txn_meta`]).
    pub txn_meta: TxnMetaLayout,
    /// The word a node's failure detector bumps as its heartbeat and peers
    /// READ (`recovery::detector`); `None` when the run detects no failures.
    pub heartbeat_addr: Option<u64>,
}

/// Where each coroutine's per-transaction global metadata lives: a fixed
/// block of words per `(worker, coroutine)` at the end of its own node's
/// region, which remote workers READ and CAS (WOUND_WAIT's status word,
/// RCBench Alg. 5; MAAT's timestamp interval, RCBench Alg. 9–10).
#[derive(Clone, Copy, Debug, Default)]
pub struct TxnMetaLayout {
    pub base: u64,
    /// Words per coroutine (0: the protocol keeps none).
    pub words: u32,
    pub coroutines_per_worker: u16,
    pub workers: u16,
}

impl TxnMetaLayout {
    /// First word of the block of coroutine `co` of worker `worker`, in its
    /// own node's region.
    #[inline]
    pub fn addr(&self, worker: u16, co: u16) -> u64 {
        debug_assert!(self.words > 0, "the protocol keeps no transaction metadata");
        debug_assert!(worker < self.workers && co < self.coroutines_per_worker);
        self.base
            + (worker as u64 * self.coroutines_per_worker as u64 + co as u64) * self.words as u64
    }
}

impl StoreLayout {
    /// Lays out `specs`; `header_words(record_words)` is the protocol's
    /// header size for a table with records of that size.
    pub fn new(specs: &[TableSpec], header_words: impl Fn(u32) -> u32) -> StoreLayout {
        Self::with_copies(specs, header_words, 1)
    }

    /// [`StoreLayout::new`] with `copies` copies of every table's slot range
    /// per node (the replication factor; see the module doc). One copy is
    /// exactly the unreplicated layout.
    pub fn with_copies(
        specs: &[TableSpec],
        header_words: impl Fn(u32) -> u32,
        copies: u32,
    ) -> StoreLayout {
        assert!(copies >= 1, "a table has at least its own copy");
        let mut next = 0u64;
        let mut tables = Vec::with_capacity(specs.len());
        for (id, spec) in specs.iter().enumerate() {
            let header_words = header_words(spec.record_words);
            let tuple_words = HEADER_WORD + header_words + spec.record_words + 1;
            let base = next;
            let slots = spec.capacity_per_node * copies as u64;
            next += slots * tuple_words as u64;
            let index = IndexLayout::for_capacity(next, slots, id as TableId);
            next += index.words();
            tables.push(TableLayout {
                id: id as TableId,
                name: spec.name,
                header_words,
                record_words: spec.record_words,
                tuple_words,
                capacity: spec.capacity_per_node,
                copies,
                base,
                index,
            });
        }
        StoreLayout {
            tables,
            region_words: next,
            txn_meta: TxnMetaLayout {
                base: next,
                ..TxnMetaLayout::default()
            },
            heartbeat_addr: None,
        }
    }

    /// Reserves `words` of per-transaction metadata for each of `coroutines`
    /// coroutines of each of `workers` workers per node (zeroed at start).
    pub fn with_txn_meta(mut self, workers: u16, coroutines: u16, words: u32) -> StoreLayout {
        let base = self.region_words;
        self.txn_meta = TxnMetaLayout {
            base,
            words,
            coroutines_per_worker: coroutines,
            workers,
        };
        self.region_words = base + workers as u64 * coroutines as u64 * words as u64;
        self
    }

    /// Reserves `words` more words at the end of every node's region
    /// (zeroed at start) and returns the first (the replication rings).
    pub fn reserve(&mut self, words: u64) -> u64 {
        let base = self.region_words;
        self.region_words += words;
        base
    }

    /// Copies of every table per node (the replication factor).
    pub fn copies(&self) -> u32 {
        self.tables.first().map_or(1, |t| t.copies)
    }

    /// Reserves the heartbeat word of the failure detector (one word at
    /// the end of the region, zero at start).
    pub fn with_heartbeat(mut self) -> StoreLayout {
        self.heartbeat_addr = Some(self.region_words);
        self.region_words += 1;
        self
    }

    #[inline]
    pub fn table(&self, id: TableId) -> &TableLayout {
        &self.tables[id as usize]
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    TableFull { table: &'static str, capacity: u64 },
    IndexFull { table: &'static str },
    DuplicateKey { table: &'static str, key: u64 },
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::TableFull { table, capacity } => {
                write!(f, "table {table} is full ({capacity} rows per node)")
            }
            StoreError::IndexFull { table } => write!(f, "the index of table {table} is full"),
            StoreError::DuplicateKey { table, key } => {
                write!(f, "key {key} already exists in table {table}")
            }
        }
    }
}

impl std::error::Error for StoreError {}

/// One node's partition: its region and the allocation state of its tables.
pub struct NodeStore {
    /// The partition this handle serves: the node itself, or for a
    /// [`NodeStore::backup_view`] the partition whose backup copy it is.
    pub node: NodeId,
    pub layout: Arc<StoreLayout>,
    pub region: Arc<Region>,
    /// Which copy of every table this handle inserts into (0: own rows).
    pub copy: u32,
    /// Rows in use per `(table, copy)`: index `table · copies + copy`.
    next_free: Arc<[AtomicU64]>,
    /// Per `(table, copy)`: serializes run-time inserts
    /// ([`NodeStore::ensure_row`]).
    insert_locks: Arc<[Mutex<()>]>,
}

impl NodeStore {
    pub fn new(node: NodeId, layout: Arc<StoreLayout>) -> NodeStore {
        Self::with_region(
            node,
            layout.clone(),
            Arc::new(Region::new(layout.region_words as usize)),
        )
    }

    /// An empty partition in a region allocated elsewhere (the `ucx`
    /// fabric's registered memory); `region` must hold the layout's words.
    pub fn with_region(node: NodeId, layout: Arc<StoreLayout>, region: Arc<Region>) -> NodeStore {
        assert!(
            region.len_words() >= layout.region_words,
            "region of {} words for a layout of {}",
            region.len_words(),
            layout.region_words
        );
        for table in &layout.tables {
            table.index.clear(&region);
        }
        let counters = layout.tables.len() * layout.copies() as usize;
        let next_free = (0..counters).map(|_| AtomicU64::new(0)).collect();
        let insert_locks = (0..counters).map(|_| Mutex::new(())).collect();
        NodeStore {
            node,
            layout,
            region,
            copy: 0,
            next_free,
            insert_locks,
        }
    }

    /// A handle on this node's copy `copy` (≥ 1) of every table, which
    /// backs up `partition`: the workload's loader and run-time inserts
    /// applied from the coordinator log write that copy through it. Shares
    /// the region, index and row counters with `self`.
    pub fn backup_view(&self, partition: NodeId, copy: u32) -> NodeStore {
        assert!(
            copy >= 1 && copy < self.layout.copies(),
            "copy {copy} is not a backup copy of a layout with {} copies",
            self.layout.copies()
        );
        NodeStore {
            node: partition,
            layout: self.layout.clone(),
            region: self.region.clone(),
            copy,
            next_free: self.next_free.clone(),
            insert_locks: self.insert_locks.clone(),
        }
    }

    /// Another handle on this node's own rows (copy 0), sharing everything
    /// with `self`.
    pub fn own_view(&self) -> NodeStore {
        NodeStore {
            node: self.node,
            layout: self.layout.clone(),
            region: self.region.clone(),
            copy: 0,
            next_free: self.next_free.clone(),
            insert_locks: self.insert_locks.clone(),
        }
    }

    #[inline]
    fn counter(&self, table: TableId, copy: u32) -> usize {
        table as usize * self.layout.copies() as usize + copy as usize
    }

    /// A node's partition rebuilt from a copy of its region's words and
    /// its rows per table (the `ucx` fabric gathers remote partitions this
    /// way for the checker). `None` if the sizes disagree with `layout`.
    pub fn from_image(
        node: NodeId,
        layout: Arc<StoreLayout>,
        words: &[u64],
        rows: &[u64],
    ) -> Option<NodeStore> {
        let copies = layout.copies() as usize;
        if words.len() as u64 != layout.region_words || rows.len() != layout.tables.len() * copies {
            return None;
        }
        let region = Region::new(words.len());
        region.write(0, words);
        let next_free = rows.iter().map(|&r| AtomicU64::new(r)).collect();
        let insert_locks = rows.iter().map(|_| Mutex::new(())).collect();
        Some(NodeStore {
            node,
            layout,
            region: Arc::new(region),
            copy: 0,
            next_free,
            insert_locks,
        })
    }

    /// Inserts a row at version 0 (loading). Not safe against concurrent
    /// remote index probes; run-time inserts come with the workloads issue.
    pub fn insert(&self, table: TableId, key: u64, record: &[u64]) -> Result<u64, StoreError> {
        let layout = self.layout.table(table);
        debug_assert_eq!(record.len(), layout.record_words as usize);
        if layout.index.lookup(&self.region, key).is_some() {
            return Err(StoreError::DuplicateKey {
                table: layout.name,
                key,
            });
        }
        let row = self.next_free[self.counter(table, self.copy)].fetch_add(1, Ordering::Relaxed);
        if row >= layout.capacity {
            return Err(StoreError::TableFull {
                table: layout.name,
                capacity: layout.capacity,
            });
        }
        let slot = layout.copy_base(self.copy) + row;
        let tuple = layout.tuple_addr(slot);
        self.region.store(tuple + KEY_WORD as u64, key);
        self.region.store(tuple + SEQ_WORD as u64, 0);
        self.region.write(layout.record_addr(slot), record);
        self.region.store(tuple + layout.seq_end_offset() as u64, 0);
        layout
            .index
            .insert(&self.region, key, slot)
            .map_err(|_| StoreError::IndexFull { table: layout.name })?;
        Ok(slot)
    }

    /// The slot of `key` in `table`, creating an absent placeholder if the
    /// key has none (run time; see the module doc). Safe against concurrent
    /// one-sided probes and concurrent `ensure_row` calls on this node.
    pub fn ensure_row(&self, table: TableId, key: u64) -> Result<u64, StoreError> {
        let layout = self.layout.table(table);
        if let Some(slot) = layout.index.lookup(&self.region, key) {
            return Ok(slot);
        }
        let counter = self.counter(table, self.copy);
        let _claim = self.insert_locks[counter]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Another inserter of the same key may have won the lock first.
        if let Some(slot) = layout.index.lookup(&self.region, key) {
            return Ok(slot);
        }
        let row = self.next_free[counter].fetch_add(1, Ordering::Relaxed);
        if row >= layout.capacity {
            self.next_free[counter].fetch_sub(1, Ordering::Relaxed);
            return Err(StoreError::TableFull {
                table: layout.name,
                capacity: layout.capacity,
            });
        }
        let slot = layout.copy_base(self.copy) + row;
        let tuple = layout.tuple_addr(slot);
        debug_assert!(
            (0..layout.tuple_words as u64).all(|w| self.region.load(tuple + w) == 0),
            "a run-time insert got a slot that was used before"
        );
        // Key word first; seq, lock, record (row state absent) and seq_end
        // of a never-used slot are already 0. The index entry comes last.
        self.region.store(tuple + KEY_WORD as u64, key);
        layout
            .index
            .insert_in_place(&self.region, key, slot)
            .map_err(|_| StoreError::IndexFull { table: layout.name })?;
        Ok(slot)
    }

    pub fn lookup(&self, table: TableId, key: u64) -> Option<u64> {
        self.layout.table(table).index.lookup(&self.region, key)
    }

    /// Rows in use in `table`'s copy 0: the node's own partition, whose
    /// rows are slots `0..rows` (backup copies are not counted; see the
    /// module doc).
    pub fn rows(&self, table: TableId) -> u64 {
        self.rows_in_copy(table, 0)
    }

    /// Rows in use in copy `copy` of `table`: slots
    /// `copy_base(copy)..copy_base(copy) + rows_in_copy`.
    pub fn rows_in_copy(&self, table: TableId, copy: u32) -> u64 {
        self.next_free[self.counter(table, copy)]
            .load(Ordering::Relaxed)
            .min(self.layout.table(table).capacity)
    }

    /// Every `(table, copy)` row counter, in counter order (what
    /// [`NodeStore::from_image`] takes back).
    pub fn row_counters(&self) -> Vec<u64> {
        self.next_free
            .iter()
            .map(|r| r.load(Ordering::Relaxed))
            .collect()
    }

    /// Copies the record of `slot` (quiescent use: checks after a run).
    pub fn record(&self, table: TableId, slot: u64, out: &mut Vec<u64>) {
        let layout = self.layout.table(table);
        out.resize(layout.record_words as usize, 0);
        self.region.read(layout.record_addr(slot), out);
    }

    pub fn seq(&self, table: TableId, slot: u64) -> u64 {
        self.region.load(self.layout.table(table).seq_addr(slot))
    }

    /// Rewrites the protocol header of every tuple in use, in every copy,
    /// with `recovered` (the protocol's `Protocol::recovered_header`: no
    /// lock, no reader, the latest version only), keeping each tuple's key,
    /// `seq` and record. Quiescent use only (a failover's recovery,
    /// `recovery::failover`). Returns the tuples reset.
    pub fn reset_headers(&self, recovered: fn(&TableLayout, &mut [u64])) -> u64 {
        let mut reset = 0;
        for table in &self.layout.tables {
            if table.header_words == 0 {
                continue;
            }
            let mut tuple = vec![0u64; table.tuple_words as usize];
            let header = HEADER_WORD as usize..(HEADER_WORD + table.header_words) as usize;
            for copy in 0..table.copies {
                let base = table.copy_base(copy);
                for slot in base..base + self.rows_in_copy(table.id, copy) {
                    self.region.read(table.tuple_addr(slot), &mut tuple);
                    recovered(table, &mut tuple);
                    self.region
                        .write(table.header_addr(slot, 0), &tuple[header.clone()]);
                    reset += 1;
                }
            }
        }
        reset
    }

    /// A store of `partition` alone, rebuilt from this node's copy `copy`
    /// of it (a promoted backup), as copy 0 of a fresh region in the same
    /// layout: what the checker and the workload invariants read for a
    /// partition whose primary failed. Quiescent use.
    pub fn extract_copy(&self, partition: NodeId, copy: u32) -> Result<NodeStore, StoreError> {
        let out = NodeStore::new(partition, self.layout.clone());
        for table in &self.layout.tables {
            let base = table.copy_base(copy);
            let mut words = vec![0u64; table.tuple_words as usize];
            for slot in base..base + self.rows_in_copy(table.id, copy) {
                self.region.read(table.tuple_addr(slot), &mut words);
                let key = words[KEY_WORD as usize];
                let row = out.next_free[out.counter(table.id, 0)].fetch_add(1, Ordering::Relaxed);
                out.region.write(table.tuple_addr(row), &words);
                table
                    .index
                    .insert(&out.region, key, row)
                    .map_err(|_| StoreError::IndexFull { table: table.name })?;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::index::{IndexLayout, BUCKET_WORDS};
    use super::*;

    fn one_table(capacity: u64, record_words: u32) -> Arc<StoreLayout> {
        Arc::new(StoreLayout::new(
            &[TableSpec {
                name: "orders",
                record_words,
                capacity_per_node: capacity,
            }],
            |_| 1,
        ))
    }

    /// What a remote reader does: one READ per candidate bucket, then the
    /// tuple the entry names.
    fn probe(store: &NodeStore, key: u64) -> Option<Vec<u64>> {
        let table = store.layout.table(0);
        let slot = table.index.candidates(key).iter().find_map(|&bucket| {
            let mut words = [0u64; BUCKET_WORDS as usize];
            store.region.read(bucket, &mut words);
            IndexLayout::find_in_bucket(key, &words)
        })?;
        let mut tuple = vec![0u64; table.tuple_words as usize];
        store.region.read(table.tuple_addr(slot), &mut tuple);
        Some(tuple)
    }

    #[test]
    fn run_time_inserts_are_seen_whole_or_not_at_all_by_concurrent_probes() {
        let keys = 20_000u64;
        let store = NodeStore::new(0, one_table(keys, 3));
        std::thread::scope(|scope| {
            let inserter = scope.spawn(|| {
                for key in 0..keys {
                    store.ensure_row(0, key * 3 + 1).expect("capacity fits");
                }
            });
            let mut seen = 0u64;
            while !inserter.is_finished() || seen == 0 {
                for key in (0..keys).step_by(97) {
                    if let Some(tuple) = probe(&store, key * 3 + 1) {
                        seen += 1;
                        assert_eq!(tuple[KEY_WORD as usize], key * 3 + 1, "entry before tuple");
                        assert_eq!(tuple[SEQ_WORD as usize], 0);
                        let record = &tuple[(HEADER_WORD + 1) as usize..][..3];
                        assert!(!row_live(record), "a placeholder reads as absent");
                    }
                }
            }
            inserter.join().unwrap();
        });
        for key in 0..keys {
            assert!(probe(&store, key * 3 + 1).is_some(), "key {key} was lost");
        }
    }

    #[test]
    fn ensure_row_returns_one_slot_per_key_and_reports_a_full_table() {
        let store = NodeStore::new(3, one_table(4, 1));
        let first = store.ensure_row(0, 7).unwrap();
        assert_eq!(
            store.ensure_row(0, 7).unwrap(),
            first,
            "the key keeps its slot"
        );
        // Concurrent inserters of one key agree on its slot.
        let slots: Vec<u64> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| store.ensure_row(0, 9).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(slots.iter().all(|&s| s == slots[0]));
        store.ensure_row(0, 10).unwrap();
        store.ensure_row(0, 11).unwrap();
        assert_eq!(
            store.ensure_row(0, 12),
            Err(StoreError::TableFull {
                table: "orders",
                capacity: 4
            })
        );
        assert_eq!(store.rows(0), 4);
    }
}
