//! The coordinator log, the `log` stage of every protocol (RCC §4.1: "the
//! coordinator sends log records to the backups … and waits for their
//! acknowledgements before committing"; RCC Fig. 6's LOG; DrTM+H §5.4:
//! one-sided logging into the backups' ring buffers). Written once,
//! generic over protocols: the write set and its new values are in
//! `TxnCx` (`accesses` with `write`, their record copies, `seq + 1` as the
//! version each installs — what the history records too).
//!
//! After the protocol's own `log` step (its commit point: DRTM's lease
//! confirmation, WOUND_WAIT's status CAS) and before `commit` installs
//! anything, the coordinator sends one record per backup node — the
//! writes of every written partition that node backs up — and waits for all
//! of them:
//!
//! * **one-sided** (`log = onesided` in the hybrid code): WRITEs into the
//!   coordinator worker's ring on the backup (`ring`), the completion of the
//!   last WRITE per backup being the acknowledgement (passive ACK on an RC
//!   queue pair, as DrTM+H and FaRM do); the backup applies it in the
//!   background (`Service::background` → [`Replication::poll`]). Ring space
//!   is reclaimed lazily: the coordinator learns the backup's head only
//!   when its own view says the ring is full — a READ of the head word, and
//!   if that frees too little, a `LOG_DRAIN` RPC that makes the backup apply
//!   what has arrived and answer its head. A record larger than the whole
//!   ring goes by RPC.
//! * **RPC** (`log = rpc`): a `LOG_APPEND` message per backup, which the
//!   backup's event loop stores and answers at once.
//!
//! Either way a backup applies a record only once the coordinator's
//! watermark says every backup acknowledged it (`ring`'s "Apply only what
//! is decided"): the watermark rides on the coordinator's next post to
//! that backup (a one-word WRITE in the same doorbell batch, or the
//! `LOG_APPEND`'s first word) and on `LOG_DRAIN` — off the critical path.
//!
//! A read-only transaction logs nothing; with replication factor 1 the
//! stage costs nothing. CALVIN's participants log through a writer made by
//! [`LogWriter::for_served`], which carries only the writes of the
//! partitions the participant's node serves (`engine::calvin`).
//!
//! The post of the records is the attempt's commit point (the history
//! records a commit there when failures are handled): once posted, the
//! records reach every live backup, so a backup that fails before
//! acknowledging does not fail the attempt — its copies are gone, and the
//! failover (`failover`) drops it from the configuration. In a run with
//! failure handling, the targets follow the configuration
//! ([`log_targets`]): failed backups and the node now serving a
//! partition are skipped, and a coordinator that is the only live backup of
//! a partition it writes also sends the record to the partition's serving
//! node, which holds those writes aside as redo ([`RedoWrite`]) — otherwise
//! its own crash would take the only copy of a committed write with it.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use crate::base::{Primitive, Stage};
use crate::fabric::NodeId;
use crate::runtime::Served;
use crate::store::NodeStore;
use crate::txn::{Access, TxnCx, TxnResult};

use super::ring::{self, Decided, LoggedWrite, RingLayout};
use crate::base::placement::Placement;
use crate::runtime::ClusterState;

/// RPC kinds of the replication layer (outside every protocol's range).
pub mod kind {
    /// `[watermark, record…]` → `[writes installed]`.
    pub const LOG_APPEND: u16 = 0xF001;
    /// `[coordinator node, coordinator worker, watermark]` → `[head]`.
    pub const LOG_DRAIN: u16 = 0xF002;

    const _: () = crate::base::rpc_kind::LOG.check(&[LOG_APPEND, LOG_DRAIN]);

    pub fn owned(kind: u16) -> bool {
        crate::base::rpc_kind::LOG.contains(kind)
    }
}

/// How long a coordinator waits before asking a full ring again, ns.
const FULL_RING_RETRY_NS: u64 = 2_000;

/// The replication of one run: placement and the rings' layout, shared by
/// every worker of every node.
#[derive(Debug)]
pub struct Replication {
    pub placement: Placement,
    pub rings: RingLayout,
    /// Held for reading by background apply, for writing by a failover's
    /// recovery (`failover`), which must be the rings' only consumer while
    /// it runs.
    pub apply_gate: std::sync::RwLock<()>,
    /// Per partition: the node serving it (its primary until a failover
    /// promotes a backup; `failover`).
    pub serving: Box<[std::sync::atomic::AtomicU32]>,
    /// Per node: redo writes it holds for partitions it serves
    /// ([`RedoWrite`]).
    pub redo: Box<[std::sync::Mutex<Vec<RedoWrite>>]>,
    /// Per node: the records that came by `LOG_APPEND`, until decided.
    pub rpc_log: Box<[std::sync::Mutex<RpcLog>]>,
}

/// A backup node's records that came by RPC and are not applied yet, and
/// each coordinator worker's latest watermark.
#[derive(Debug, Default)]
pub struct RpcLog {
    pub pending: Vec<PendingRecord>,
    pub watermarks: Watermarks,
    /// Buffers of applied records, for the next ones (no allocation once
    /// warm).
    spare: Vec<Vec<u64>>,
}

/// Each coordinator worker's latest watermark, as a backup heard it.
type Watermarks = std::collections::HashMap<(NodeId, u16), u64>;

/// A record that came by RPC, from coordinator `(node, worker)`.
#[derive(Clone, Debug)]
pub struct PendingRecord {
    pub node: NodeId,
    pub worker: u16,
    pub round: u64,
    pub words: Vec<u64>,
}

/// A committed write that a coordinator also sent to the node serving its
/// partition, because no live node other than the coordinator holds a
/// backup of that partition ([`log_targets`]): should
/// the coordinator die before installing it there, the recovery installs
/// it from here. Held aside, never installed early (the coordinator's own
/// commit stage does that, under its protocol's rules), and dropped once
/// the serving copy holds its version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedoWrite {
    pub coordinator: NodeId,
    pub table: crate::store::TableId,
    pub partition: NodeId,
    pub key: u64,
    pub seq: u64,
    pub record: Vec<u64>,
}

/// Per-node counters of what the backup side did.
#[derive(Debug, Default)]
pub struct BackupCounters {
    pub records_applied: std::sync::atomic::AtomicU64,
    pub writes_installed: std::sync::atomic::AtomicU64,
}

impl Replication {
    /// The replication of `placement` with rings `rings`, every partition
    /// served by its primary.
    pub fn new(placement: Placement, rings: RingLayout) -> Replication {
        Replication {
            placement,
            rings,
            apply_gate: std::sync::RwLock::new(()),
            serving: (0..placement.nodes)
                .map(std::sync::atomic::AtomicU32::new)
                .collect(),
            redo: (0..placement.nodes)
                .map(|_| std::sync::Mutex::new(Vec::new()))
                .collect(),
            rpc_log: (0..placement.nodes)
                .map(|_| std::sync::Mutex::new(RpcLog::default()))
                .collect(),
        }
    }

    /// Applies the records that came by RPC to `store`'s node: those of
    /// coordinator workers `worker` (all: `None`) that `decided` admits
    /// (below their coordinator's watermark, or all). Returns the writes
    /// installed.
    pub fn apply_rpc_log(&self, store: &NodeStore, worker: Option<u16>, decided: Decided) -> u64 {
        let mut log = self.rpc_log[store.node as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if log.pending.is_empty() {
            return 0;
        }
        let log = &mut *log;
        self.take_rpc_records(store, log, &|record, watermarks| {
            worker.is_none_or(|w| w == record.worker)
                && (decided == Decided::All
                    || record.round
                        < watermarks
                            .get(&(record.node, record.worker))
                            .copied()
                            .unwrap_or(0))
        })
    }

    /// Applies and drops the pending records of `log` that `take` admits
    /// (in any order: applying is idempotent and newest-wins), keeping
    /// their buffers. Returns the writes installed.
    fn take_rpc_records(
        &self,
        store: &NodeStore,
        log: &mut RpcLog,
        take: &dyn Fn(&PendingRecord, &Watermarks) -> bool,
    ) -> u64 {
        let mut installed = 0;
        let mut index = 0;
        while index < log.pending.len() {
            if !take(&log.pending[index], &log.watermarks) {
                index += 1;
                continue;
            }
            let record = log.pending.swap_remove(index);
            installed += self.apply_record(store, &record.words);
            log.spare.push(record.words);
        }
        installed
    }

    /// Applies (and drops) the records that came by RPC to `store`'s node
    /// for which `take` holds (a recovery's own choice). Returns the
    /// writes installed.
    pub fn apply_rpc_log_where(
        &self,
        store: &NodeStore,
        take: &dyn Fn(&PendingRecord) -> bool,
    ) -> u64 {
        let mut log = self.rpc_log[store.node as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        self.take_rpc_records(store, &mut log, &|record, _| take(record))
    }

    /// Applies one whole record on `store`'s node (redo writes held aside).
    fn apply_record(&self, store: &NodeStore, words: &[u64]) -> u64 {
        let mut installed = 0u64;
        let Some((txn_id, writes)) = ring::parse_record(words) else {
            debug_assert!(false, "malformed log record");
            return 0;
        };
        let coordinator = crate::txn::ids::node_of_txn(txn_id);
        for write in &writes {
            if self.take_redo(store, coordinator, write) {
                continue;
            }
            match ring::apply_write(store, &self.placement, write) {
                Ok(true) => installed += 1,
                Ok(false) => {}
                Err(problem) => debug_assert!(false, "{problem}"),
            }
        }
        installed
    }

    /// The node serving `partition` now.
    #[inline]
    pub fn serving(&self, partition: NodeId) -> NodeId {
        self.serving[partition as usize].load(std::sync::atomic::Ordering::Acquire) as NodeId
    }

    /// Holds `write` from `coordinator` aside on `store`'s node if that
    /// node serves its partition (a redo write); returns whether it did.
    /// Writes whose version the serving copy already holds are dropped.
    fn take_redo(&self, store: &NodeStore, coordinator: NodeId, write: &LoggedWrite<'_>) -> bool {
        if self.serving(write.partition) != store.node {
            return false;
        }
        let installed = |redo: &RedoWrite| {
            store
                .lookup(redo.table, redo.key)
                .is_some_and(|slot| store.seq(redo.table, slot) >= redo.seq)
        };
        let mut held = self.redo[store.node as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        held.retain(|redo| !installed(redo));
        held.push(RedoWrite {
            coordinator,
            table: write.table,
            partition: write.partition,
            key: write.key,
            seq: write.seq,
            record: write.record.to_vec(),
        });
        true
    }

    /// Applies what has arrived in coordinator `node`'s worker `worker`'s
    /// ring on `store`'s node (its only consumer), holding redo writes
    /// aside.
    pub fn drain_ring(
        &self,
        store: &NodeStore,
        node: NodeId,
        worker: u16,
        decided: Decided,
        scratch: &mut Vec<u64>,
    ) -> ring::Drained {
        ring::drain_ring(
            store,
            &self.rings,
            &self.placement,
            node,
            worker,
            decided,
            scratch,
            &|coordinator, write| self.take_redo(store, coordinator, write),
        )
    }

    /// Serves a replication RPC on `store`'s node; `None` if `kind` is
    /// not one.
    pub fn serve(&self, store: &NodeStore, kind: u16, payload: &mut Vec<u64>) -> Option<Served> {
        match kind {
            kind::LOG_APPEND => {
                let watermark = payload.first().copied().unwrap_or(0);
                let record = payload.get(1..).unwrap_or(&[]);
                let installed = match ring::parse_record(record) {
                    Some((txn_id, _)) => {
                        let (round, _) = ring::record_meta(record);
                        let node = crate::txn::ids::node_of_txn(txn_id);
                        let worker =
                            ((txn_id >> (crate::txn::ids::COUNTER_BITS + 8)) & 0xff) as u16;
                        {
                            let mut log = self.rpc_log[store.node as usize]
                                .lock()
                                .unwrap_or_else(|p| p.into_inner());
                            let mark = log.watermarks.entry((node, worker)).or_insert(0);
                            *mark = (*mark).max(watermark);
                            let mut words = log.spare.pop().unwrap_or_default();
                            words.clear();
                            words.extend_from_slice(record);
                            log.pending.push(PendingRecord {
                                node,
                                worker,
                                round,
                                words,
                            });
                        }
                        self.apply_rpc_log(store, Some(worker), Decided::BelowWatermark)
                    }
                    None => {
                        debug_assert!(false, "malformed LOG_APPEND");
                        0
                    }
                };
                payload.clear();
                payload.push(installed);
            }
            kind::LOG_DRAIN => {
                let (node, worker) = (payload[0] as NodeId, payload[1] as u16);
                let watermark = payload.get(2).copied().unwrap_or(0);
                let mark_addr = self.rings.watermark_addr(node, worker);
                if store.region.load(mark_addr) < watermark {
                    store.region.store(mark_addr, watermark);
                }
                let mut scratch = Vec::new();
                let drained =
                    self.drain_ring(store, node, worker, Decided::BelowWatermark, &mut scratch);
                payload.clear();
                payload.push(drained.head);
            }
            _ => return None,
        }
        Some(Served::Reply)
    }

    /// Background apply on worker `worker` of `store`'s node: drains the
    /// rings of every coordinator worker with the same index (one consumer
    /// per ring). Returns whether anything was applied.
    pub fn poll(&self, store: &NodeStore, worker: u16, scratch: &mut Vec<u64>) -> bool {
        let Ok(_gate) = self.apply_gate.try_read() else {
            return false; // a recovery is draining the rings
        };
        let mut applied = false;
        for node in 0..self.rings.nodes as NodeId {
            if node == store.node {
                continue;
            }
            let drained = self.drain_ring(store, node, worker, Decided::BelowWatermark, scratch);
            applied |= drained.records > 0;
        }
        applied |= self.apply_rpc_log(store, Some(worker), Decided::BelowWatermark) > 0;
        applied
    }

    /// Applies everything still in every ring of `store` (quiescent use:
    /// after a run, before comparing backups with primaries).
    pub fn drain_all(&self, store: &NodeStore) -> u64 {
        let mut scratch = Vec::new();
        let mut records = 0;
        for node in 0..self.rings.nodes as NodeId {
            for worker in 0..self.rings.workers {
                records += self
                    .drain_ring(store, node, worker, Decided::All, &mut scratch)
                    .records;
            }
        }
        self.apply_rpc_log(store, None, Decided::All);
        records
    }
}

/// One coordinator worker's side of the log: its ring tails on every
/// backup, what it last learned of their heads, and counters.
pub struct LogWriter {
    pub replication: Arc<Replication>,
    node: NodeId,
    worker: u16,
    /// `Some(n)`: log only the writes of the partitions node `n` serves
    /// ([`LogWriter::for_served`]); `None`: every write.
    only: Option<NodeId>,
    /// Words written into this worker's ring on each node (monotonic).
    tails: RefCell<Vec<u64>>,
    /// The head of that ring as last READ (monotonic).
    heads: RefCell<Vec<u64>>,
    /// The backups of the attempt being logged and their records (taken
    /// for the stage's duration, so their capacity is reused).
    targets: RefCell<Vec<NodeId>>,
    records: RefCell<Vec<Vec<u64>>>,
    /// Records sent, by WRITE and by RPC; times a full ring was refreshed.
    pub records_onesided: Cell<u64>,
    pub records_rpc: Cell<u64>,
    pub ring_full_waits: Cell<u64>,
    /// The next log round's number, and the rounds posted and not yet
    /// acknowledged by every backup (see `ring`'s watermark).
    next_round: Cell<u64>,
    outstanding: RefCell<Vec<u64>>,
}

impl LogWriter {
    pub fn new(replication: Arc<Replication>, node: NodeId, worker: u16) -> LogWriter {
        let nodes = replication.placement.nodes as usize;
        LogWriter {
            replication,
            node,
            worker,
            only: None,
            tails: RefCell::new(vec![0; nodes]),
            heads: RefCell::new(vec![0; nodes]),
            targets: RefCell::new(Vec::with_capacity(8)),
            records: RefCell::new(Vec::new()),
            records_onesided: Cell::new(0),
            records_rpc: Cell::new(0),
            ring_full_waits: Cell::new(0),
            next_round: Cell::new(0),
            outstanding: RefCell::new(Vec::new()),
        }
    }

    /// Every round below this one was acknowledged by all its backups.
    fn watermark(&self) -> u64 {
        let outstanding = self.outstanding.borrow();
        outstanding
            .iter()
            .copied()
            .min()
            .unwrap_or(self.next_round.get())
    }

    /// A writer that logs only the writes of the partitions `node` serves
    /// (its own, and after a failover those promoted to it): CALVIN's
    /// participants (`engine::calvin`), each of which installs — and so
    /// logs — only its own partitions' writes, although every active
    /// participant's program computes the whole write set.
    pub fn for_served(replication: Arc<Replication>, node: NodeId, worker: u16) -> LogWriter {
        LogWriter {
            only: Some(node),
            ..LogWriter::new(replication, node, worker)
        }
    }

    /// Whether `access` is a write this writer logs.
    #[inline]
    fn logs(&self, access: &Access) -> bool {
        access.write
            && self
                .only
                .is_none_or(|node| self.replication.serving(access.partition) == node)
    }

    fn free_words(&self, backup: NodeId) -> u64 {
        let size = self.replication.rings.ring_words;
        size - (self.tails.borrow()[backup as usize] - self.heads.borrow()[backup as usize])
    }
}

/// The nodes a record of `coordinator`'s writes to `partition` goes to
/// once a failover has begun (`state`): the partition's backups by
/// placement, less failed nodes and the node now serving it — and when
/// none of those is a node other than the coordinator (a coordinator that
/// is its partition's only backup would lose the only copy of its record
/// with itself), the serving node too, which holds it as a redo write
/// (`RedoWrite`).
pub fn log_targets<'a>(
    placement: &'a Placement,
    state: &'a dyn ClusterState,
    partition: NodeId,
    coordinator: NodeId,
) -> impl Iterator<Item = NodeId> + 'a {
    let serving = state.serving(partition);
    let backups = placement
        .backups(partition)
        .filter(move |&b| b != serving && !state.is_failed(b));
    let durable_elsewhere = backups.clone().any(|b| b != coordinator);
    let redo = (!durable_elsewhere && serving != coordinator && !state.is_failed(serving))
        .then_some(serving);
    backups.chain(redo)
}

/// Whether `access` is a write that the record for `backup` carries:
/// `backup` holds a backup copy of its partition, and (after a failover)
/// is alive and not the node that now serves the partition.
#[inline]
fn logged_to(
    writer: &LogWriter,
    access: &Access,
    placement: &Placement,
    failover: Option<&dyn ClusterState>,
    coordinator: NodeId,
    backup: NodeId,
) -> bool {
    writer.logs(access)
        && match failover {
            Some(state) => {
                log_targets(placement, state, access.partition, coordinator).any(|b| b == backup)
            }
            None => matches!(placement.copy_on(backup, access.partition), Some(c) if c > 0),
        }
}

/// Builds the record for `backup` into `out` (empty: nothing to log
/// there).
fn build_record(
    cx: &TxnCx<'_>,
    writer: &LogWriter,
    placement: &Placement,
    backup: NodeId,
    (round, targets): (u64, u32),
    out: &mut Vec<u64>,
) {
    let failover = cx.worker.cluster_state();
    ring::start_record(out, cx.txn_id, round, targets);
    let mut writes = 0usize;
    for (index, access) in cx.accesses.iter().enumerate() {
        if logged_to(writer, access, placement, failover, cx.worker.node, backup) {
            writes += 1;
            ring::push_write(
                out,
                access.table,
                access.partition,
                access.key,
                access.seq + 1,
                cx.record(index),
            );
        }
    }
    if writes == 0 {
        out.clear();
    } else {
        ring::finish_record(out);
    }
}

/// The `log` stage: replicates the attempt's writes to every live backup
/// of every written partition and returns once all acknowledged.
/// `at_commit_point` runs once the records are sure to go out (after any
/// wait for ring space, right before they are posted, without yielding in
/// between) — or at once when there is nothing to log: from then on the
/// attempt is committed. `Err` only before that point (a ring that could
/// not be made room in); a backup that fails once the records are posted
/// does not matter (its copies are gone; `failover`).
pub async fn log(
    cx: &mut TxnCx<'_>,
    writer: Option<&LogWriter>,
    at_commit_point: impl FnOnce(&TxnCx<'_>),
) -> TxnResult<()> {
    let Some(writer) = writer else {
        at_commit_point(cx);
        return Ok(());
    };
    if !cx.accesses.iter().any(|a| writer.logs(a)) {
        at_commit_point(cx);
        return Ok(());
    }
    let onesided = cx.primitive(Stage::Log) == Primitive::OneSided;
    let mut targets = std::mem::take(&mut *writer.targets.borrow_mut());
    let mut records = std::mem::take(&mut *writer.records.borrow_mut());
    let result = log_to(
        cx,
        writer,
        &mut targets,
        &mut records,
        onesided,
        at_commit_point,
    )
    .await;
    *writer.targets.borrow_mut() = targets;
    *writer.records.borrow_mut() = records;
    result
}

/// The live backups of the written partitions, and in `records[i]` the
/// record for `targets[i]`, of log round `round`. Which backups are live
/// changes whenever a failure is declared — by another thread, at any
/// time — and with it what each record holds (a failed backup can make
/// the node serving a partition a redo target, [`log_targets`]):
/// so the records are built first and the ring space is made for what
/// was built, never for an estimate.
fn build_records(
    cx: &TxnCx<'_>,
    writer: &LogWriter,
    round: u64,
    targets: &mut Vec<NodeId>,
    records: &mut Vec<Vec<u64>>,
) {
    let placement = writer.replication.placement;
    targets.clear();
    let failover = cx.worker.cluster_state();
    for access in cx.accesses.iter().filter(|a| writer.logs(a)) {
        let mut add = |backup: NodeId| {
            if !targets.contains(&backup) {
                targets.push(backup);
            }
        };
        match failover {
            Some(state) => {
                log_targets(&placement, state, access.partition, cx.worker.node).for_each(&mut add)
            }
            None => placement.backups(access.partition).for_each(&mut add),
        }
    }
    if records.len() < targets.len() {
        records.resize_with(targets.len(), || Vec::with_capacity(64));
    }
    for (&backup, record) in targets.iter().zip(records.iter_mut()) {
        build_record(cx, writer, &placement, backup, (round, 0), record);
    }
    // The copies of this round that other nodes receive, as the records
    // actually built say (a failure declared meanwhile may have emptied
    // one).
    let remote_targets = targets
        .iter()
        .zip(records.iter())
        .filter(|&(&b, record)| b != writer.node && !record.is_empty())
        .count() as u32;
    for record in records.iter_mut().take(targets.len()) {
        if !record.is_empty() {
            ring::set_record_targets(record, remote_targets);
        }
    }
}

async fn log_to(
    cx: &mut TxnCx<'_>,
    writer: &LogWriter,
    targets: &mut Vec<NodeId>,
    records: &mut Vec<Vec<u64>>,
    onesided: bool,
    at_commit_point: impl FnOnce(&TxnCx<'_>),
) -> TxnResult<()> {
    let rings = writer.replication.rings;
    // One-sided: make room in every ring first (the only waits), then
    // build, reserve and write without yielding, so coroutines of this
    // worker never interleave inside one ring. The records are built
    // again after every wait: the round number and the live backups may
    // have changed meanwhile.
    let round = loop {
        let round = writer.next_round.get();
        build_records(cx, writer, round, targets, records);
        if !onesided {
            break round;
        }
        let short = targets
            .iter()
            .zip(records.iter())
            .find(|&(&backup, record)| {
                let words = record.len() as u64;
                words > 0 && words <= rings.ring_words && writer.free_words(backup) < words
            });
        let Some((&backup, record)) = short else {
            break round;
        };
        let words = record.len() as u64;
        writer.ring_full_waits.set(writer.ring_full_waits.get() + 1);
        refresh_head(cx, writer, backup, words).await?;
    };
    at_commit_point(cx);
    writer.next_round.set(round + 1);
    writer.outstanding.borrow_mut().push(round);
    let watermark = writer.watermark();
    {
        let mut batch = cx.round();
        for (&backup, record) in targets.iter().zip(records.iter()) {
            let words = record.len() as u64;
            if words == 0 {
                continue;
            }
            if onesided && words <= rings.ring_words {
                let mut tails = writer.tails.borrow_mut();
                let tail = tails[backup as usize];
                // The room was made for this very record: the ring's
                // framing depends on it.
                debug_assert!(
                    tail + words - writer.heads.borrow()[backup as usize] <= rings.ring_words
                );
                tails[backup as usize] = tail + words;
                let ring = rings.ring_addr(writer.node, writer.worker);
                let at = tail % rings.ring_words;
                let first = (rings.ring_words - at).min(words) as usize;
                // The lazy notification: what earlier rounds are decided.
                batch.write(
                    backup,
                    rings.watermark_addr(writer.node, writer.worker),
                    &[watermark],
                );
                batch.write(backup, ring + at, &record[..first]);
                if first < record.len() {
                    batch.write(backup, ring, &record[first..]);
                }
                writer
                    .records_onesided
                    .set(writer.records_onesided.get() + 1);
            } else {
                let mut payload = batch.payload();
                payload.push(watermark);
                payload.extend_from_slice(record);
                batch.call(backup, kind::LOG_APPEND, payload, false);
                writer.records_rpc.set(writer.records_rpc.get() + 1);
            }
        }
    }
    // Past the commit point: a backup that failed meanwhile is dropped
    // from the configuration (`failover`), so its failure is not the
    // attempt's.
    if cx.submit().await.is_err() {
        cx.worker.take_attempt_failed(cx.co);
    }
    writer.outstanding.borrow_mut().retain(|&r| r != round);
    Ok(())
}

/// Learns how much of `backup`'s ring is free: a READ of its head word;
/// if that is still too little for `words`, a `LOG_DRAIN` RPC that makes
/// the backup apply what has arrived; if even that is too little (the
/// records are still in flight), a short sleep.
async fn refresh_head(
    cx: &mut TxnCx<'_>,
    writer: &LogWriter,
    backup: NodeId,
    words: u64,
) -> TxnResult<()> {
    let rings = writer.replication.rings;
    let head_addr = rings.head_addr(writer.node, writer.worker);
    let read = {
        let mut batch = cx.round();
        batch.read(backup, head_addr, 1)
    };
    cx.submit().await?;
    let head = cx.batch().result_word(read);
    note_head(writer, backup, head);
    if writer.free_words(backup) >= words {
        return Ok(());
    }
    let call = {
        let mut batch = cx.round();
        let mut payload = batch.payload();
        payload.extend_from_slice(&[writer.node as u64, writer.worker as u64, writer.watermark()]);
        batch.call(backup, kind::LOG_DRAIN, payload, false)
    };
    cx.submit().await?;
    let head = cx.batch().reply(call)[0];
    note_head(writer, backup, head);
    if writer.free_words(backup) < words {
        cx.worker.sleep(cx.co, FULL_RING_RETRY_NS).await;
    }
    Ok(())
}

fn note_head(writer: &LogWriter, backup: NodeId, head: u64) {
    let mut heads = writer.heads.borrow_mut();
    debug_assert!(head <= writer.tails.borrow()[backup as usize]);
    heads[backup as usize] = heads[backup as usize].max(head);
}
