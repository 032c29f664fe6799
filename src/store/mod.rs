//! The store (ARCHITECTURE.md layer 2): tables of fixed-size tuples in
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
//!   argument is in `protocols::common`).
//!
//! Invariant: `seq` only changes while the tuple's lock is held, and is
//! written after the record it describes; `seq_end` before it.

pub mod cache;
pub mod index;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::fabric::{NodeId, Region};
pub use cache::LocationCache;
pub use index::IndexLayout;

pub type TableId = u32;

/// Word offsets inside a tuple.
pub const KEY_WORD: u32 = 0;
pub const SEQ_WORD: u32 = 1;
pub const HEADER_WORD: u32 = 2;

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
    pub capacity: u64,
    /// First word of tuple 0.
    pub base: u64,
    pub index: IndexLayout,
}

impl TableLayout {
    #[inline]
    pub fn tuple_addr(&self, slot: u64) -> u64 {
        debug_assert!(slot < self.capacity, "slot {slot} beyond capacity");
        self.base + slot * self.tuple_words as u64
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
        let mut next = 0u64;
        let mut tables = Vec::with_capacity(specs.len());
        for (id, spec) in specs.iter().enumerate() {
            let header_words = header_words(spec.record_words);
            let tuple_words = HEADER_WORD + header_words + spec.record_words + 1;
            let base = next;
            next += spec.capacity_per_node * tuple_words as u64;
            let index = IndexLayout::for_capacity(next, spec.capacity_per_node, id as TableId);
            next += index.words();
            tables.push(TableLayout {
                id: id as TableId,
                name: spec.name,
                header_words,
                record_words: spec.record_words,
                tuple_words,
                capacity: spec.capacity_per_node,
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
    pub node: NodeId,
    pub layout: Arc<StoreLayout>,
    pub region: Arc<Region>,
    next_free: Vec<AtomicU64>,
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
        let next_free = layout.tables.iter().map(|_| AtomicU64::new(0)).collect();
        NodeStore {
            node,
            layout,
            region,
            next_free,
        }
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
        if words.len() as u64 != layout.region_words || rows.len() != layout.tables.len() {
            return None;
        }
        let region = Region::new(words.len());
        region.write(0, words);
        let next_free = rows.iter().map(|&r| AtomicU64::new(r)).collect();
        Some(NodeStore {
            node,
            layout,
            region: Arc::new(region),
            next_free,
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
        let slot = self.next_free[table as usize].fetch_add(1, Ordering::Relaxed);
        if slot >= layout.capacity {
            return Err(StoreError::TableFull {
                table: layout.name,
                capacity: layout.capacity,
            });
        }
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

    pub fn lookup(&self, table: TableId, key: u64) -> Option<u64> {
        self.layout.table(table).index.lookup(&self.region, key)
    }

    /// Rows in use in `table`.
    pub fn rows(&self, table: TableId) -> u64 {
        self.next_free[table as usize]
            .load(Ordering::Relaxed)
            .min(self.layout.table(table).capacity)
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
}
