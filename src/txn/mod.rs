//! The transaction layer (docs/ARCHITECTURE.md, layer 5): the context a protocol's
//! stages work on ([`TxnCx`]), the API a transaction program sees ([`Txn`]),
//! abort reasons, and the protocol kit ([`kit`]): the shared stage steps
//! every protocol builds its stages from.
//!
//! A program reads and updates records through [`Txn`]; each first access of
//! a record runs the protocol's execution-phase stage (`Protocol::access`) and
//! leaves a copy of the record in the context's data arena, where the program
//! computes on it. Writes change only that copy; the protocol's commit stages
//! install it. Read-your-writes holds: a second access to a record returns
//! the same copy.
//!
//! Invariants: accesses are unique per `(table, node, key)`; an access's
//! `data` range holds `record_words` words; a write-set access was fetched
//! with write intent (or upgraded by the protocol).

pub mod ids;
pub mod kit;
mod protocol;

use std::cell::RefMut;

use crate::base::{Stage, StagePlan};
use crate::fabric::{Batch, NodeId};
use crate::runtime::Worker;
use crate::store::{
    row_live, LocationCache, NodeStore, StoreLayout, TableId, TableLayout, ROW_ABSENT, ROW_LIVE,
    ROW_STATE_WORD,
};
pub use protocol::{FromConfig, Protocol};

/// Why an attempt aborted. The protocol layer picks the reason; users see
/// counts per reason in the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AbortReason {
    /// A lock was held by another transaction (NO_WAIT, OCC lock stage).
    LockConflict,
    /// An optimistic read found the tuple locked.
    ReadLocked,
    /// An optimistic read saw a tuple mid-update (torn READ).
    ReadInconsistent,
    /// Validation found a version changed since it was read.
    ValidationFailed,
    /// The key does not exist.
    NotFound,
    /// The program asked to abort.
    User,
    /// WAIT_DIE: a younger requester died on an older holder (also: a
    /// newcomer under the starvation fix; an E/S lock conflict a waiting
    /// protocol cannot wait on).
    Died,
    /// WOUND_WAIT: an older transaction wounded this one.
    Wounded,
    /// A timestamp protocol found the transaction's timestamp out of order
    /// for a tuple (a read below `wts`, a write below `rts` or `wts`).
    TimestampOrder,
    /// MVCC, CICADA: no version slot still holds a version old enough to
    /// read (it was overwritten).
    VersionUnavailable,
    /// TIMESTAMP with cascading aborts: a writer whose uncommitted write
    /// this transaction read aborted (or could not be waited for).
    CascadingAbort,
    /// MAAT: a tuple's reader or writer list was full.
    ListFull,
    /// MAAT: the timestamp interval became empty.
    IntervalEmpty,
    /// CICADA: the version to read or replace is still pending.
    VersionPending,
    /// A row was absent where the program needed it (an ordered-index entry
    /// ran ahead of its row's write-back, or a concurrent delete won), or an
    /// insert found its key live: a conflict, retried (see `store`).
    RowStale,
    /// A run-time insert found its table (or its index) full: the
    /// transaction gives up; raise the workload's capacity knob.
    TableFull,
    /// SUNDIAL: a read lease could not be extended to the commit timestamp
    /// (the tuple changed or another transaction holds its lock).
    RenewFailed,
    /// DRTM: a write met an unexpired read lease.
    LeaseConflict,
    /// DRTM: a read lease is not valid (minus the clock-skew bound) at the
    /// commit point.
    LeaseExpired,
    /// CALVIN: the program accessed (or wrote) a record its declared
    /// read/write set lacks, so its nodes hold no lock on it.
    Undeclared,
    /// A node the attempt needed was declared dead by the failure detector
    /// (`recovery`): a round to it failed. The request is dropped, not retried.
    PeerFailed,
}

impl AbortReason {
    pub const ALL: [AbortReason; 21] = [
        AbortReason::LockConflict,
        AbortReason::ReadLocked,
        AbortReason::ReadInconsistent,
        AbortReason::ValidationFailed,
        AbortReason::NotFound,
        AbortReason::User,
        AbortReason::Died,
        AbortReason::Wounded,
        AbortReason::TimestampOrder,
        AbortReason::VersionUnavailable,
        AbortReason::CascadingAbort,
        AbortReason::ListFull,
        AbortReason::IntervalEmpty,
        AbortReason::VersionPending,
        AbortReason::RowStale,
        AbortReason::TableFull,
        AbortReason::RenewFailed,
        AbortReason::LeaseConflict,
        AbortReason::LeaseExpired,
        AbortReason::Undeclared,
        AbortReason::PeerFailed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AbortReason::LockConflict => "lock_conflict",
            AbortReason::ReadLocked => "read_locked",
            AbortReason::ReadInconsistent => "read_inconsistent",
            AbortReason::ValidationFailed => "validation_failed",
            AbortReason::NotFound => "not_found",
            AbortReason::User => "user",
            AbortReason::Died => "died",
            AbortReason::Wounded => "wounded",
            AbortReason::TimestampOrder => "timestamp_order",
            AbortReason::VersionUnavailable => "version_unavailable",
            AbortReason::CascadingAbort => "cascading_abort",
            AbortReason::ListFull => "list_full",
            AbortReason::IntervalEmpty => "interval_empty",
            AbortReason::VersionPending => "version_pending",
            AbortReason::RowStale => "row_stale",
            AbortReason::TableFull => "table_full",
            AbortReason::RenewFailed => "renew_failed",
            AbortReason::LeaseConflict => "lease_conflict",
            AbortReason::LeaseExpired => "lease_expired",
            AbortReason::Undeclared => "undeclared_access",
            AbortReason::PeerFailed => "peer_failed",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

pub type TxnResult<T> = Result<T, AbortReason>;

/// Slot not known yet (location cache miss, no lookup done).
pub const NO_SLOT: u64 = u64::MAX;

/// One record in the read or write set.
#[derive(Clone, Copy, Debug)]
pub struct Access {
    pub table: TableId,
    /// The node the access goes to: the one serving `partition`
    /// (`Worker::serving`), which differs from it only after a failover
    /// promoted the partition's backup (`recovery::failover`).
    pub node: NodeId,
    /// The partition the program named (the node whose rows it is).
    pub partition: NodeId,
    pub key: u64,
    /// Tuple slot on `node`, or `NO_SLOT`.
    pub slot: u64,
    /// Version (`seq`) observed when fetched.
    pub seq: u64,
    /// Offset of the record copy in `TxnCx::data`.
    pub data: u32,
    /// In the write set.
    pub write: bool,
    /// This transaction holds the tuple's lock.
    pub locked: bool,
    /// Protocol-private word (MAAT: list positions; CICADA: version
    /// slots); 0 when fetched.
    pub meta: u64,
}

/// Per-coroutine transaction context, reused by every transaction the
/// coroutine runs (no allocation once its vectors have grown).
pub struct TxnCx<'w> {
    pub worker: &'w Worker,
    pub co: u16,
    pub layout: &'w StoreLayout,
    cache: &'w std::cell::RefCell<LocationCache>,
    pub plan: StagePlan,
    /// Value a lock word holds while this coroutine owns it (never 0).
    pub owner: u64,
    pub txn_id: u64,
    /// 0 on a request's first attempt, then the number of retries.
    pub attempt: u32,
    /// The protocol's timestamp of this transaction (`Protocol::begin`);
    /// kept across attempts unless the protocol changes it.
    pub timestamp: u64,
    pub accesses: Vec<Access>,
    pub data: Vec<u64>,
    /// Scratch list of nodes, for grouping per participant.
    pub nodes: Vec<NodeId>,
    /// Scratch list of `(access index, where its result is)` — a verb id or
    /// a position in a reply — for stages that queue per node and read
    /// their results back per access.
    pub queued: Vec<(usize, u32)>,
    /// Time spent per stage in this attempt, ns (index: `Stage::index`).
    pub stage_ns: [u64; 9],
    /// What this attempt's program recorded with [`Txn::note`]; reset by
    /// every attempt, recorded in the history when the attempt commits.
    pub note: i64,
    /// Protocol-private words of the attempt (cleared at each begin), e.g.
    /// MAAT's set of transactions to order against.
    pub scratch: Vec<u64>,
    /// This worker's own node's store, for run-time inserts (`Txn::insert`);
    /// `None` where the driver did not provide it.
    pub local_store: Option<&'w NodeStore>,
    /// Ordered-index changes the attempt makes at its commit point
    /// (`store::ordered`), in program order.
    pub index_ops: Vec<IndexOp>,
    /// The node the program runs for: where it inserts and what
    /// `Txn::node` answers. The worker's own node, except under CALVIN,
    /// whose executors on every active participant run the program of a
    /// transaction its origin node submitted.
    pub home: NodeId,
    /// The time the program sees (`Txn::now_ns`) when fixed by the
    /// protocol rather than read from the clock: CALVIN fixes it per
    /// transaction from its input, as Calvin §3.1 does for every
    /// nondeterministic value, so that every participant and every replay
    /// computes the same records.
    pub program_clock_ns: Option<u64>,
}

/// A change to one of a workload's ordered indexes (`store::OrderedIndex`)
/// on the coordinator's node, applied at the commit point by
/// `Workload::at_commit_point`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexOp {
    /// Which of the workload's ordered indexes.
    pub index: u32,
    pub key: u64,
    pub value: u64,
    /// Insert (`true`) or remove (`false`) `key`.
    pub insert: bool,
}

impl<'w> TxnCx<'w> {
    pub fn new(
        worker: &'w Worker,
        co: u16,
        layout: &'w StoreLayout,
        cache: &'w std::cell::RefCell<LocationCache>,
        plan: StagePlan,
    ) -> TxnCx<'w> {
        TxnCx {
            worker,
            co,
            layout,
            cache,
            plan,
            owner: ids::lock_owner(ids::coroutine_id(worker.node, worker.worker, co)),
            txn_id: 0,
            attempt: 0,
            timestamp: 0,
            accesses: Vec::with_capacity(64),
            data: Vec::with_capacity(64 * 16),
            nodes: Vec::with_capacity(16),
            queued: Vec::with_capacity(64),
            stage_ns: [0; 9],
            note: 0,
            scratch: Vec::with_capacity(64),
            local_store: None,
            index_ops: Vec::with_capacity(16),
            home: worker.node,
            program_clock_ns: None,
        }
    }

    /// Gives the context its own node's store (run-time inserts need it).
    pub fn with_local_store(mut self, store: &'w NodeStore) -> TxnCx<'w> {
        debug_assert_eq!(store.node, self.worker.node);
        self.local_store = Some(store);
        self
    }

    /// Starts attempt number `attempt` (0 = first) of a request.
    pub fn begin(&mut self, txn_id: u64, attempt: u32) {
        debug_assert!(
            self.accesses.iter().all(|a| !a.locked),
            "an attempt began while the previous one still held a lock"
        );
        debug_assert!(txn_id > self.txn_id, "transaction ids only grow");
        self.begin_part(txn_id, attempt);
    }

    /// Starts an attempt under an id that need not grow: a CALVIN part,
    /// named by its transaction's place in the global order, which
    /// executors take in no fixed order (`engine::calvin::failover`).
    pub fn begin_part(&mut self, txn_id: u64, attempt: u32) {
        debug_assert!(
            self.accesses.iter().all(|a| !a.locked),
            "an attempt began while the previous one still held a lock"
        );
        self.txn_id = txn_id;
        self.attempt = attempt;
        self.accesses.clear();
        self.data.clear();
        self.scratch.clear();
        self.index_ops.clear();
        self.stage_ns = [0; 9];
        self.note = 0;
    }

    #[inline]
    pub fn primitive(&self, stage: Stage) -> crate::base::Primitive {
        self.plan.get(stage)
    }

    #[inline]
    pub fn table(&self, table: TableId) -> &'w TableLayout {
        self.layout.table(table)
    }

    /// This coroutine's per-transaction metadata block, in its own node's
    /// region (`Protocol::txn_meta_words`).
    #[inline]
    pub fn txn_meta_addr(&self) -> u64 {
        self.layout.txn_meta.addr(self.worker.worker, self.co)
    }

    /// The metadata block of the coroutine whose lock words hold `owner`,
    /// and its node: how a remote worker reaches another transaction's
    /// global metadata (WOUND_WAIT's wound, MAAT's interval).
    #[inline]
    pub fn txn_meta_of(&self, owner: u64) -> (crate::fabric::NodeId, u64) {
        let (node, worker, co) = ids::split_owner(owner);
        (node, self.layout.txn_meta.addr(worker, co))
    }

    /// Starts a new round of verbs and RPCs, forgetting the last round's
    /// results.
    pub fn round(&self) -> RefMut<'w, Batch> {
        let mut batch = self.worker.slot(self.co).batch.borrow_mut();
        batch.clear();
        batch
    }

    /// The current round (to read results after [`TxnCx::submit`]).
    pub fn batch(&self) -> RefMut<'w, Batch> {
        self.worker.slot(self.co).batch.borrow_mut()
    }

    /// Posts the round and waits for it; `Err(PeerFailed)` when a peer it
    /// needed has failed (its results are then meaningless: the caller
    /// aborts the attempt, which `?` does).
    pub async fn submit(&self) -> TxnResult<()> {
        self.worker
            .submit(self.co)
            .await
            .map_err(|_| AbortReason::PeerFailed)
    }

    pub fn submit_passive(&self) {
        self.worker.submit_passive(self.co)
    }

    pub fn now_ns(&self) -> u64 {
        self.worker.now_ns()
    }

    pub fn record(&self, index: usize) -> &[u64] {
        let access = &self.accesses[index];
        let words = self.table(access.table).record_words as usize;
        &self.data[access.data as usize..access.data as usize + words]
    }

    pub fn record_mut(&mut self, index: usize) -> &mut [u64] {
        let access = self.accesses[index];
        let words = self.table(access.table).record_words as usize;
        &mut self.data[access.data as usize..access.data as usize + words]
    }

    /// Fills `slot` from the location cache; true on a hit.
    pub fn locate_cached(&mut self, index: usize) -> bool {
        let access = &mut self.accesses[index];
        if access.slot != NO_SLOT {
            return true;
        }
        match self
            .cache
            .borrow_mut()
            .get(access.table, access.node, access.key)
        {
            Some(slot) => {
                access.slot = slot;
                true
            }
            None => false,
        }
    }

    /// Puts `(table, node, key) → slot` in the location cache.
    pub fn cache_slot(&mut self, table: TableId, node: NodeId, key: u64, slot: u64) {
        self.cache.borrow_mut().put(table, node, key, slot);
    }

    pub fn remember_slot(&mut self, index: usize, slot: u64) {
        let access = &mut self.accesses[index];
        access.slot = slot;
        self.cache
            .borrow_mut()
            .put(access.table, access.node, access.key, slot);
    }

    fn find(&self, table: TableId, partition: NodeId, key: u64) -> Option<usize> {
        self.accesses
            .iter()
            .position(|a| a.key == key && a.table == table && a.partition == partition)
    }

    fn push_access(&mut self, table: TableId, partition: NodeId, key: u64, write: bool) -> usize {
        let words = self.table(table).record_words as usize;
        let data = self.data.len() as u32;
        self.data.resize(self.data.len() + words, 0);
        self.accesses.push(Access {
            table,
            node: self.worker.serving(partition),
            partition,
            key,
            slot: NO_SLOT,
            seq: 0,
            data,
            write,
            locked: false,
            meta: 0,
        });
        self.accesses.len() - 1
    }

    /// Adds a record fetched before the program runs, at version `seq`:
    /// deterministic protocols (CALVIN) gather a transaction's whole
    /// read/write set first, so the program's accesses find their records
    /// here and never reach the protocol's `access` stage. Returns the
    /// access index.
    pub fn preload(
        &mut self,
        table: TableId,
        node: NodeId,
        key: u64,
        write: bool,
        seq: u64,
        record: &[u64],
    ) -> usize {
        debug_assert!(self.find(table, node, key).is_none(), "preloaded twice");
        let index = self.push_access(table, node, key, write);
        self.accesses[index].seq = seq;
        self.record_mut(index).copy_from_slice(record);
        index
    }

    /// Distinct nodes of the accesses matching `filter`, into `self.nodes`.
    pub fn collect_nodes(&mut self, filter: impl Fn(&Access) -> bool) {
        self.nodes.clear();
        for access in &self.accesses {
            if filter(access) && !self.nodes.contains(&access.node) {
                self.nodes.push(access.node);
            }
        }
    }

    pub fn add_stage_time(&mut self, stage: Stage, ns: u64) {
        self.stage_ns[stage.index()] += ns;
    }
}

/// Handle of a record accessed by a program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rec(usize);

/// What a transaction program sees.
pub struct Txn<'c, 'w, P: Protocol> {
    cx: &'c mut TxnCx<'w>,
    protocol: &'c P,
}

impl<'c, 'w, P: Protocol> Txn<'c, 'w, P> {
    pub fn new(cx: &'c mut TxnCx<'w>, protocol: &'c P) -> Self {
        Txn { cx, protocol }
    }

    /// Reads `key` of `table` on `node`.
    pub async fn read(&mut self, table: TableId, node: NodeId, key: u64) -> TxnResult<Rec> {
        self.access(table, node, key, false).await
    }

    /// Reads `key` with intent to write it (read-modify-write).
    pub async fn update(&mut self, table: TableId, node: NodeId, key: u64) -> TxnResult<Rec> {
        self.access(table, node, key, true).await
    }

    /// Writes `key` with `record`, whatever it held. The protocol still
    /// fetches the tuple (it needs the version the write replaces), so a
    /// blind write costs what an update does.
    pub async fn write(
        &mut self,
        table: TableId,
        node: NodeId,
        key: u64,
        record: &[u64],
    ) -> TxnResult<Rec> {
        let rec = self.access(table, node, key, true).await?;
        self.get_mut(rec).copy_from_slice(record);
        Ok(rec)
    }

    async fn access(
        &mut self,
        table: TableId,
        node: NodeId,
        key: u64,
        write: bool,
    ) -> TxnResult<Rec> {
        self.access_as(table, node, key, write, false).await
    }

    /// [`Txn::access`]; `insert`: a first access goes to the protocol's
    /// `insert_access` (the row may not exist yet).
    async fn access_as(
        &mut self,
        table: TableId,
        node: NodeId,
        key: u64,
        write: bool,
        insert: bool,
    ) -> TxnResult<Rec> {
        self.cx.worker.charge(crate::fabric::CpuOp::Access, 1);
        if let Some(index) = self.cx.find(table, node, key) {
            if write && !self.cx.accesses[index].write {
                self.protocol.upgrade(self.cx, index).await?;
                self.cx.accesses[index].write = true;
            }
            return Ok(Rec(index));
        }
        let index = self.cx.push_access(table, node, key, write);
        let start = self.cx.now_ns();
        let result = if insert {
            self.protocol.insert_access(self.cx, index).await
        } else {
            self.protocol.access(self.cx, index).await
        };
        let elapsed = self.cx.now_ns() - start;
        self.cx.add_stage_time(P::ACCESS_STAGE, elapsed);
        result.map(|_| Rec(index))
    }

    pub fn get(&self, rec: Rec) -> &[u64] {
        self.cx.record(rec.0)
    }

    /// The record copy to modify; the record must have been accessed with
    /// [`Txn::update`].
    pub fn get_mut(&mut self, rec: Rec) -> &mut [u64] {
        debug_assert!(
            self.cx.accesses[rec.0].write,
            "get_mut on a record read without update intent"
        );
        self.cx.record_mut(rec.0)
    }

    /// The worker's clock, ns (virtual time on `sim`): for timestamps a
    /// program stores, such as TPC-C's entry and delivery dates.
    ///
    /// Under CALVIN it is fixed per transaction (`TxnCx::program_clock_ns`).
    pub fn now_ns(&self) -> u64 {
        self.cx.program_clock_ns.unwrap_or_else(|| self.cx.now_ns())
    }

    /// The coordinator's node: the one this program runs for
    /// (`TxnCx::home`), where its inserts go.
    pub fn node(&self) -> NodeId {
        self.cx.home
    }

    /// Inserts `key` into `table` on the coordinator's node with `record`,
    /// whose row-state word is set live (the table keeps a row state; see
    /// `store`). The row is written through the protocol like any write:
    /// it reads the absent version `v` and installs `v + 1`
    /// (`Protocol::insert_access`). Aborts with `row_stale` if the key is
    /// live, `table_full` if no slot is left.
    pub async fn insert(&mut self, table: TableId, key: u64, record: &[u64]) -> TxnResult<Rec> {
        let node = self.node();
        let rec = self.access_as(table, node, key, true, true).await?;
        if row_live(self.get(rec)) {
            return Err(AbortReason::RowStale);
        }
        let copy = self.get_mut(rec);
        copy.copy_from_slice(record);
        copy[ROW_STATE_WORD] = ROW_LIVE;
        Ok(rec)
    }

    /// Deletes `key` of `table` on `node`: installs a tombstone (row state
    /// absent, other words 0) as the next version. Aborts with `row_stale`
    /// if the row is already absent.
    pub async fn delete(&mut self, table: TableId, node: NodeId, key: u64) -> TxnResult<()> {
        let rec = self.update_row(table, node, key).await?;
        let copy = self.get_mut(rec);
        copy.fill(0);
        copy[ROW_STATE_WORD] = ROW_ABSENT;
        Ok(())
    }

    /// Reads a row of a table with a row state; aborts with `row_stale` if
    /// it is absent (not yet inserted, or deleted).
    pub async fn read_row(&mut self, table: TableId, node: NodeId, key: u64) -> TxnResult<Rec> {
        let rec = self.read(table, node, key).await?;
        self.live_or_stale(rec)
    }

    /// [`Txn::update`] of a row of a table with a row state; aborts with
    /// `row_stale` if it is absent.
    pub async fn update_row(&mut self, table: TableId, node: NodeId, key: u64) -> TxnResult<Rec> {
        let rec = self.update(table, node, key).await?;
        self.live_or_stale(rec)
    }

    /// `rec` if its row is live; `row_stale` if it is absent.
    fn live_or_stale(&self, rec: Rec) -> TxnResult<Rec> {
        if row_live(self.get(rec)) {
            Ok(rec)
        } else {
            Err(AbortReason::RowStale)
        }
    }

    /// Inserts `key → value` into the workload's ordered index `index` at
    /// the commit point (see `store::ordered`).
    pub fn index_insert(&mut self, index: u32, key: u64, value: u64) {
        self.cx.index_ops.push(IndexOp {
            index,
            key,
            value,
            insert: true,
        });
    }

    /// Removes `key` from the workload's ordered index `index` at the
    /// commit point.
    pub fn index_remove(&mut self, index: u32, key: u64) {
        self.cx.index_ops.push(IndexOp {
            index,
            key,
            value: 0,
            insert: false,
        });
    }

    /// Spends `ns` of CPU time on the program's own computation.
    pub fn compute(&self, ns: u64) {
        self.cx.worker.spend_cpu(ns)
    }

    /// Adds `amount` to this attempt's note: a number the workload's
    /// invariants need per committed transaction (SmallBank: money deposited
    /// minus withdrawn). Only a committing attempt's note reaches the
    /// history; an aborted attempt's is discarded with it.
    pub fn note(&mut self, amount: i64) {
        self.cx.note = self.cx.note.wrapping_add(amount);
    }

    /// The error a program returns to abort by its own choice.
    pub fn user_abort(&self) -> AbortReason {
        AbortReason::User
    }
}
