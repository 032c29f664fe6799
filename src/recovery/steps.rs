//! Recovery of a failed node's partitions from their backups (issue 8
//! item 3; DrTM+H §5.4 leaves it unimplemented, FaRM's recovery is the
//! model): promote, for each partition the failed node was primary of, its
//! first live backup (`Placement::primary_given`), and resolve the failed
//! coordinator's transactions from the log records it left in the
//! survivors' rings.
//!
//! The steps are each party's of the failover sequencer
//! (`recovery::sequencer`, on every fabric), run on a quiet cluster (no
//! transaction before its commit point) by a node over its own memory:
//!
//! * [`recover_local`]: the failed coordinators' records every backup
//!   acknowledged are rolled forward onto this node's copies, every live
//!   coordinator's ring is drained, and the rest are reported as
//!   [`Doubts`], which the decider settles ([`decide_doubts`]: committed
//!   iff every backup got the record);
//! * [`resolve_local`]: the decided records are applied or dropped, and the
//!   redo writes this node holds (from a coordinator that was its
//!   partition's only other backup) installed ([`redo_writes_on`]);
//! * [`sync_summary`], [`differing_buckets`], [`sync_digest_where`],
//!   [`merge_sync_digests`], [`install_sync`]: every live copy of a
//!   partition is brought to the newest version of each tuple among them,
//!   which finishes the installs a dead coordinator left undone on live
//!   primaries even when the backups applied its records long before the
//!   failure — comparing a sum per bucket of keys first, so only the
//!   buckets that differ travel.
//!
//! Releasing the dead coordinators' locks is the header reset that
//! `failover` runs after these steps (`Protocol::recovered_header`).
//!
//! Invariant: every version installed here was committed (its record was
//! posted at its coordinator's commit point), and a copy only moves to a
//! newer version.

use std::sync::Arc;

use crate::fabric::NodeId;
use crate::store::NodeStore;

use crate::replication::ring::{self, Decided, LoggedWrite, RECORD_FIXED_WORDS};
use crate::replication::{Placement, Replication};

/// What a recovery did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryOutcome {
    /// `(partition, node now serving it)` for each partition of a failed
    /// node that still has a live copy.
    pub promoted: Vec<(NodeId, NodeId)>,
    /// Partitions with no live copy left.
    pub lost_partitions: Vec<NodeId>,
    /// Log records of failed coordinators found in the survivors' rings.
    pub resolved_from_log_count: u64,
    /// Of those, rolled forward (whole) and discarded (partial).
    pub resolved_committed_count: u64,
    pub resolved_aborted_count: u64,
    /// Tuple versions a live copy lacked and took from a newer live copy
    /// of the same partition ([`install_sync`]) or from a redo write.
    pub versions_rolled_forward: u64,
}

/// What recoveries did to the data, summed over the parties of one and
/// over a run's: the failed coordinators' log records found, of those
/// rolled forward (committed) and discarded (partial, or not committed),
/// the tuple versions live copies took from a newer copy or a redo write,
/// and the tuples whose protocol headers were reset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryCounts {
    pub resolved_from_log_count: u64,
    pub resolved_committed_count: u64,
    pub resolved_aborted_count: u64,
    pub versions_rolled_forward: u64,
    pub headers_reset: u64,
}

impl RecoveryCounts {
    /// How many words [`RecoveryCounts::to_words`] makes.
    pub const WORDS: usize = 5;

    /// The counts as words, in the order the fields are declared.
    pub fn to_words(&self) -> [u64; RecoveryCounts::WORDS] {
        let RecoveryCounts {
            resolved_from_log_count: found,
            resolved_committed_count: committed,
            resolved_aborted_count: aborted,
            versions_rolled_forward: versions,
            headers_reset: headers,
        } = *self;
        [found, committed, aborted, versions, headers]
    }

    /// The counts [`RecoveryCounts::to_words`] made `words` of.
    pub fn from_words(words: [u64; RecoveryCounts::WORDS]) -> RecoveryCounts {
        let [found, committed, aborted, versions, headers] = words;
        RecoveryCounts {
            resolved_from_log_count: found,
            resolved_committed_count: committed,
            resolved_aborted_count: aborted,
            versions_rolled_forward: versions,
            headers_reset: headers,
        }
    }

    /// Adds `other`'s counts to these, count by count.
    pub fn add(&mut self, other: &RecoveryCounts) {
        let (mine, theirs) = (self.to_words(), other.to_words());
        *self = RecoveryCounts::from_words(std::array::from_fn(|i| mine[i] + theirs[i]));
    }
}

impl RecoveryOutcome {
    /// What this outcome did to the data (it resets no header).
    pub fn counts(&self) -> RecoveryCounts {
        RecoveryCounts {
            resolved_from_log_count: self.resolved_from_log_count,
            resolved_committed_count: self.resolved_committed_count,
            resolved_aborted_count: self.resolved_aborted_count,
            versions_rolled_forward: self.versions_rolled_forward,
            headers_reset: 0,
        }
    }

    /// An outcome holding only the promotions of `failed`'s partitions.
    fn promotions(placement: &Placement, failed: &[NodeId]) -> RecoveryOutcome {
        let mut outcome = RecoveryOutcome::default();
        for &node in failed {
            match placement.primary_given(node, |n| !failed.contains(&n)) {
                Some(serving) => outcome.promoted.push((node, serving)),
                None => outcome.lost_partitions.push(node),
            }
        }
        outcome
    }
}

/// Installs `write` on node `store`'s copy of its partition (the primary
/// copy 0 included), creating the row if the copy lacks it.
pub fn apply_on(store: &NodeStore, placement: &Placement, write: &LoggedWrite<'_>) {
    match placement.copy_on(store.node, write.partition) {
        Some(0) => {
            if let Ok(slot) = store.ensure_row(write.table, write.key) {
                ring::install_if_newer(store, write.table, slot, write.seq, write.record);
            }
        }
        Some(_) => {
            let _ = ring::apply_write(store, placement, write);
        }
        None => {}
    }
}

/// A whole record of a failed coordinator, as the recovery judges it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeadRecord {
    pub coordinator: NodeId,
    pub worker: u16,
    pub txn_id: u64,
    pub round: u64,
    /// Nodes other than the coordinator's that got a record of the
    /// transaction.
    pub targets: u32,
}

/// What to do with a failed coordinator's whole record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Committed: installed, then consumed.
    Apply,
    /// Not committed: consumed unapplied.
    Discard,
    /// Not known yet: left in the ring, which stops there.
    Undecided,
}

/// Resolves the records the coordinators in `failed` left in `backup`'s
/// rings, in ring order: `decide` judges each whole one — applied write by
/// write through `apply` and consumed, consumed unapplied, or left (which
/// ends that ring); a partial one (its trailer never landed: nobody
/// acknowledged it) is discarded and ends the ring. Counts in `outcome`.
pub fn recover_rings(
    replication: &Replication,
    backup: &NodeStore,
    failed: &[NodeId],
    outcome: &mut RecoveryOutcome,
    decide: &mut dyn FnMut(&DeadRecord) -> Verdict,
    apply: &mut dyn FnMut(&LoggedWrite<'_>),
) {
    let rings = replication.rings;
    let mut words = Vec::new();
    for &dead in failed {
        for worker in 0..rings.workers {
            let head_addr = rings.head_addr(dead, worker);
            let ring_addr = rings.ring_addr(dead, worker);
            let size = rings.ring_words;
            let region = &backup.region;
            let mut head = region.load(head_addr);
            loop {
                let at = head % size;
                let len = region.load(ring_addr + at);
                if len == 0 {
                    break;
                }
                words.clear();
                if (RECORD_FIXED_WORDS as u64..=size).contains(&len) {
                    for offset in 0..len {
                        words.push(region.load(ring_addr + (at + offset) % size));
                    }
                }
                let Some((txn_id, writes)) = ring::parse_record(&words) else {
                    // Its trailer never landed: the coordinator died
                    // before every backup acknowledged; discarded.
                    outcome.resolved_from_log_count += 1;
                    outcome.resolved_aborted_count += 1;
                    break;
                };
                let (round, targets) = ring::record_meta(&words);
                let record = DeadRecord {
                    coordinator: dead,
                    worker,
                    txn_id,
                    round,
                    targets,
                };
                match decide(&record) {
                    Verdict::Undecided => break,
                    Verdict::Apply => {
                        for write in &writes {
                            apply(write);
                        }
                        outcome.resolved_committed_count += 1;
                    }
                    Verdict::Discard => outcome.resolved_aborted_count += 1,
                }
                outcome.resolved_from_log_count += 1;
                for offset in 0..len {
                    region.store(ring_addr + (at + offset) % size, 0);
                }
                head += len;
                region.store(head_addr, head);
            }
        }
    }
}

/// [`recover_rings`] on a node that reaches only its own memory: the
/// records `decide` applies are installed on `store`'s copies (the other
/// backups apply their own).
fn resolve_own_rings(
    replication: &Replication,
    store: &Arc<NodeStore>,
    failed: &[NodeId],
    outcome: &mut RecoveryOutcome,
    decide: &mut dyn FnMut(&DeadRecord) -> Verdict,
) {
    let placement = replication.placement;
    recover_rings(replication, store, failed, outcome, decide, &mut |write| {
        apply_on(store, &placement, write)
    });
}

/// The whole records of the coordinators in `failed` still in `backup`'s
/// rings and RPC log, unconsumed.
pub fn dead_records(
    replication: &Replication,
    backup: &NodeStore,
    failed: &[NodeId],
) -> Vec<DeadRecord> {
    let rings = replication.rings;
    let mut found = Vec::new();
    let mut words = Vec::new();
    for &dead in failed {
        for worker in 0..rings.workers {
            let ring_addr = rings.ring_addr(dead, worker);
            let size = rings.ring_words;
            let region = &backup.region;
            let mut head = region.load(rings.head_addr(dead, worker));
            loop {
                let at = head % size;
                let len = region.load(ring_addr + at);
                if !(RECORD_FIXED_WORDS as u64..=size).contains(&len) {
                    break;
                }
                words.clear();
                for offset in 0..len {
                    words.push(region.load(ring_addr + (at + offset) % size));
                }
                let Some((txn_id, _)) = ring::parse_record(&words) else {
                    break;
                };
                let (round, targets) = ring::record_meta(&words);
                found.push(DeadRecord {
                    coordinator: dead,
                    worker,
                    txn_id,
                    round,
                    targets,
                });
                head += len;
            }
        }
    }
    let log = replication.rpc_log[backup.node as usize]
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    for record in log.pending.iter().filter(|r| failed.contains(&r.node)) {
        if let Some((txn_id, _)) = ring::parse_record(&record.words) {
            let (round, targets) = ring::record_meta(&record.words);
            found.push(DeadRecord {
                coordinator: record.node,
                worker: record.worker,
                txn_id,
                round,
                targets,
            });
        }
    }
    found
}

/// The watermark this backup last heard from each worker of the
/// coordinators in `failed`: `(node, worker, watermark)`.
fn dead_watermarks(
    replication: &Replication,
    backup: &NodeStore,
    failed: &[NodeId],
) -> Vec<(NodeId, u16, u64)> {
    let rings = replication.rings;
    let log = replication.rpc_log[backup.node as usize]
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let mut marks = Vec::new();
    for &dead in failed {
        for worker in 0..rings.workers {
            let ring_mark = backup.region.load(rings.watermark_addr(dead, worker));
            let rpc_mark = log.watermarks.get(&(dead, worker)).copied().unwrap_or(0);
            marks.push((dead, worker, ring_mark.max(rpc_mark)));
        }
    }
    marks
}

/// What a survivor knows of the failed coordinators' undecided records:
/// the watermark it heard from each of their workers, and their whole
/// records above it that it holds. The cluster decides each (see
/// [`decide_doubts`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Doubts {
    pub watermarks: Vec<(NodeId, u16, u64)>,
    pub records: Vec<DeadRecord>,
}

impl Doubts {
    pub fn encode(&self) -> Vec<u64> {
        let mut words = vec![self.watermarks.len() as u64];
        for &(node, worker, mark) in &self.watermarks {
            words.extend_from_slice(&[node as u64, worker as u64, mark]);
        }
        for record in &self.records {
            words.extend_from_slice(&[
                record.coordinator as u64,
                record.worker as u64,
                record.txn_id,
                record.round,
                record.targets as u64,
            ]);
        }
        words
    }

    pub fn decode(words: &[u64]) -> Result<Doubts, String> {
        let count = *words.first().ok_or("empty doubts")? as usize;
        let marks_end = 1 + 3 * count;
        if words.len() < marks_end || (words.len() - marks_end) % 5 != 0 {
            return Err("malformed doubts".into());
        }
        Ok(Doubts {
            watermarks: words[1..marks_end]
                .chunks_exact(3)
                .map(|c| (c[0] as NodeId, c[1] as u16, c[2]))
                .collect(),
            records: words[marks_end..]
                .chunks_exact(5)
                .map(|c| DeadRecord {
                    coordinator: c[0] as NodeId,
                    worker: c[1] as u16,
                    txn_id: c[2],
                    round: c[3],
                    targets: c[4] as u32,
                })
                .collect(),
        })
    }
}

/// The failed coordinators' transactions that committed, from every
/// survivor's [`Doubts`]: a record's round below the highest watermark any
/// survivor heard from its worker (every backup acknowledged it), or a
/// record held whole by as many survivors as it had targets (every backup
/// got it: the rule, committed iff the record reached every
/// backup). Every other one did not commit.
pub fn decide_doubts(all: &[Doubts]) -> Vec<u64> {
    use std::collections::HashMap;
    let mut marks: HashMap<(NodeId, u16), u64> = HashMap::new();
    let mut holders: HashMap<u64, (DeadRecord, u32)> = HashMap::new();
    for doubts in all {
        for &(node, worker, mark) in &doubts.watermarks {
            let best = marks.entry((node, worker)).or_insert(0);
            *best = (*best).max(mark);
        }
        for record in &doubts.records {
            holders.entry(record.txn_id).or_insert((*record, 0)).1 += 1;
        }
    }
    let mut committed: Vec<u64> = holders
        .values()
        .filter(|(record, held)| {
            let mark = marks
                .get(&(record.coordinator, record.worker))
                .copied()
                .unwrap_or(0);
            record.round < mark || *held >= record.targets
        })
        .map(|(record, _)| record.txn_id)
        .collect();
    committed.sort_unstable();
    committed
}

/// The recovery steps a node runs on its own memory in a run whose nodes
/// are separate processes (`recovery::sequencer` sequences them across the
/// cluster), where a coordinator killed while posting may have left its
/// record on some backups only. Step 1, once every survivor is quiet: the
/// failed coordinators' records below their watermark (decided: every
/// backup acknowledged them) are rolled forward onto this node's copies,
/// every live coordinator's ring and RPC log is drained (all decided: they
/// are quiet), and the rest is reported as [`Doubts`]. Step 2 is
/// [`resolve_local`].
pub fn recover_local(
    replication: &Replication,
    store: &Arc<NodeStore>,
    failed: &[NodeId],
) -> (RecoveryOutcome, Doubts) {
    let placement = replication.placement;
    let alive = |n: NodeId| !failed.contains(&n);
    let mut outcome = RecoveryOutcome::promotions(&placement, failed);
    let watermarks = dead_watermarks(replication, store, failed);
    let mark_of = |node: NodeId, worker: u16| {
        watermarks
            .iter()
            .find(|m| m.0 == node && m.1 == worker)
            .map_or(0, |m| m.2)
    };
    resolve_own_rings(replication, store, failed, &mut outcome, &mut |record| {
        if record.round < mark_of(record.coordinator, record.worker) {
            Verdict::Apply
        } else {
            Verdict::Undecided
        }
    });
    let mut scratch = Vec::new();
    for node in (0..replication.rings.nodes as NodeId).filter(|&n| alive(n)) {
        for worker in 0..replication.rings.workers {
            replication.drain_ring(store, node, worker, Decided::All, &mut scratch);
        }
    }
    replication.apply_rpc_log_where(store, &|record| {
        alive(record.node) || record.round < mark_of(record.node, record.worker)
    });
    let records = dead_records(replication, store, failed);
    (
        outcome,
        Doubts {
            watermarks,
            records,
        },
    )
}

/// Step 2 of [`recover_local`], once the cluster decided the doubts:
/// the failed coordinators' remaining records are applied if their
/// transaction is in `committed`, dropped otherwise, and the redo writes
/// this node holds are installed.
pub fn resolve_local(
    replication: &Replication,
    store: &Arc<NodeStore>,
    failed: &[NodeId],
    committed: &[u64],
) -> RecoveryOutcome {
    let placement = replication.placement;
    let mut outcome = RecoveryOutcome::default();
    resolve_own_rings(replication, store, failed, &mut outcome, &mut |record| {
        if committed.binary_search(&record.txn_id).is_ok() {
            Verdict::Apply
        } else {
            Verdict::Discard
        }
    });
    let pending: Vec<crate::replication::log::PendingRecord> = {
        let mut log = replication.rpc_log[store.node as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let (dead, live): (Vec<_>, Vec<_>) = log
            .pending
            .drain(..)
            .partition(|r| failed.contains(&r.node));
        log.pending = live;
        dead
    };
    for record in pending {
        let Some((txn_id, writes)) = ring::parse_record(&record.words) else {
            continue;
        };
        outcome.resolved_from_log_count += 1;
        if committed.binary_search(&txn_id).is_ok() {
            for write in &writes {
                apply_on(store, &placement, write);
            }
            outcome.resolved_committed_count += 1;
        } else {
            outcome.resolved_aborted_count += 1;
        }
    }
    outcome.versions_rolled_forward += redo_writes_on(replication, store);
    outcome
}

/// Installs, on the copies of `store`, the redo writes it holds
/// (`RedoWrite`: committed writes whose only other record is on their
/// coordinator's own node) that its copy lacks — a failed coordinator's, or
/// a live one's that left installs to the recovery (a committing attempt
/// that found a latch of the failed coordinator) — and drops them all.
/// Returns the writes installed.
pub fn redo_writes_on(replication: &Replication, store: &Arc<NodeStore>) -> u64 {
    let placement = replication.placement;
    let mut installed = 0;
    let held = std::mem::take(
        &mut *replication.redo[store.node as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner()),
    );
    for redo in held {
        let Some(copy) = placement.copy_on(store.node, redo.partition) else {
            continue;
        };
        let handle = copy_handle(store, redo.partition, copy);
        if let Ok(slot) = handle.ensure_row(redo.table, redo.key) {
            if ring::install_if_newer(&handle, redo.table, slot, redo.seq, &redo.record) {
                installed += 1;
            }
        }
    }
    installed
}

/// The tuples of every live copy of each partition with another live
/// copy, among `stores` (every node's, in node order): what a recovery's
/// sync summaries scan, the work of a recovery that grows with the data.
pub fn shared_copy_rows(
    placement: &Placement,
    stores: &[Arc<NodeStore>],
    failed: &[NodeId],
) -> u64 {
    let mut rows = 0;
    for partition in 0..placement.nodes as NodeId {
        let holders = live_holders(placement, partition, failed);
        if holders.len() < 2 {
            continue;
        }
        for (node, copy) in holders {
            let store = &stores[node as usize];
            for table in &store.layout.tables {
                rows += store.rows_in_copy(table.id, copy);
            }
        }
    }
    rows
}

/// The live holders of `partition`: `(node, copy)`.
fn live_holders(placement: &Placement, partition: NodeId, failed: &[NodeId]) -> Vec<(NodeId, u32)> {
    (0..placement.factor)
        .map(|copy| (placement.node_of(partition, copy), copy))
        .filter(|(node, _)| !failed.contains(node))
        .collect()
}

/// Copy sync, step 1 on each node: every tuple
/// version (seq > 0) of every copy `store` holds of a partition with
/// another live copy, as words `[partition, table, key, seq, len,
/// record…]`.
pub fn sync_digest(
    replication: &Replication,
    store: &Arc<NodeStore>,
    failed: &[NodeId],
) -> Vec<u64> {
    sync_digest_where(replication, store, failed, &|_, _, _| true)
}

/// [`sync_digest`] of the tuples whose `(partition, table, bucket)` —
/// [`sync_bucket`] of the key — `wanted` takes.
pub fn sync_digest_where(
    replication: &Replication,
    store: &Arc<NodeStore>,
    failed: &[NodeId],
    wanted: &dyn Fn(NodeId, u32, u64) -> bool,
) -> Vec<u64> {
    let mut digest = Vec::new();
    let mut record = Vec::new();
    for_each_shared_version(
        replication,
        store,
        failed,
        |source, partition, table, slot, key, seq| {
            if !wanted(partition, table, sync_bucket(key)) {
                return;
            }
            source.record(table, slot, &mut record);
            digest.extend_from_slice(&[
                partition as u64,
                table as u64,
                key,
                seq,
                record.len() as u64,
            ]);
            digest.extend_from_slice(&record);
        },
    );
    digest
}

/// How many buckets a [`sync_summary`] splits each copy's table into: the
/// copies of a partition differ only in the few tuples the failure caught
/// in flight, so the versions exchanged are those of a few buckets.
pub const SYNC_BUCKETS: u64 = 4096;

/// The bucket of the tuple keyed `key`, the same on every copy.
pub fn sync_bucket(key: u64) -> u64 {
    key.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29) % SYNC_BUCKETS
}

/// The cheap first round of [`sync_digest`]: for every copy `store` holds
/// of a partition with another live copy, and every table, one word per
/// bucket — the wrapping sum of a mix of `(key, seq)` over the bucket's
/// versions (seq > 0), which two copies share iff they hold the same
/// versions there (but for a 2⁻⁶⁴ collision; the checker compares the
/// copies whole at the run's end). Words: `[partition, table, sums…]`
/// per copy and table.
pub fn sync_summary(
    replication: &Replication,
    store: &Arc<NodeStore>,
    failed: &[NodeId],
) -> Vec<u64> {
    let placement = replication.placement;
    // Every shared copy's every table, versions or none: the decider
    // compares each with every other holder's.
    let mut sums: std::collections::BTreeMap<(NodeId, u32), Vec<u64>> = Default::default();
    for partition in 0..placement.nodes as NodeId {
        let holders = live_holders(&placement, partition, failed);
        if holders.len() >= 2 && holders.iter().any(|(node, _)| *node == store.node) {
            for table in &store.layout.tables {
                sums.insert((partition, table.id), vec![0; SYNC_BUCKETS as usize]);
            }
        }
    }
    for_each_shared_version(
        replication,
        store,
        failed,
        |_, partition, table, _, key, seq| {
            let bucket = sync_bucket(key) as usize;
            let Some(sums) = sums.get_mut(&(partition, table)) else {
                return;
            };
            let mixed = (key ^ seq.rotate_left(32)).wrapping_mul(0xD6E8_FEB8_6659_FD93);
            sums[bucket] = sums[bucket].wrapping_add(mixed ^ (mixed >> 32));
        },
    );
    let mut words = Vec::new();
    for ((partition, table), bucket_sums) in sums {
        words.extend_from_slice(&[partition as u64, table as u64]);
        words.extend_from_slice(&bucket_sums);
    }
    words
}

/// From every live node's [`sync_summary`]: the `(partition, table,
/// bucket)`s whose sums differ between two live copies, or that a live
/// copy lacks, as sorted words `[partition, table, bucket]`.
pub fn differing_buckets(
    placement: &Placement,
    failed: &[NodeId],
    summaries: &[(NodeId, Vec<u64>)],
) -> Result<Vec<u64>, String> {
    use std::collections::BTreeMap;
    let stride = 2 + SYNC_BUCKETS as usize;
    // (partition, table) -> every holder's sums.
    let mut held: BTreeMap<(NodeId, u32), Vec<&[u64]>> = BTreeMap::new();
    for (_, words) in summaries {
        if words.len() % stride != 0 {
            return Err("a sync summary ends inside a table".into());
        }
        for chunk in words.chunks_exact(stride) {
            held.entry((chunk[0] as NodeId, chunk[1] as u32))
                .or_default()
                .push(&chunk[2..]);
        }
    }
    let mut out = Vec::new();
    for ((partition, table), sums) in held {
        // Every live holder summarizes each table of its shared copies;
        // one that did not is compared as a copy that differs everywhere.
        let whole = sums.len() == live_holders(placement, partition, failed).len();
        for bucket in 0..SYNC_BUCKETS as usize {
            let first = sums[0][bucket];
            if !whole || sums.iter().any(|s| s[bucket] != first) {
                out.extend_from_slice(&[partition as u64, table as u64, bucket as u64]);
            }
        }
    }
    Ok(out)
}

/// Calls `visit(copy, partition, table, slot, key, seq)` for every tuple
/// version (seq > 0) of every copy `store` holds of a partition with
/// another live copy.
fn for_each_shared_version(
    replication: &Replication,
    store: &Arc<NodeStore>,
    failed: &[NodeId],
    mut visit: impl FnMut(&NodeStore, NodeId, u32, u64, u64, u64),
) {
    let placement = replication.placement;
    for partition in 0..placement.nodes as NodeId {
        let holders = live_holders(&placement, partition, failed);
        let Some(&(_, copy)) = holders.iter().find(|(node, _)| *node == store.node) else {
            continue;
        };
        if holders.len() < 2 {
            continue;
        }
        let source = copy_handle(store, partition, copy);
        for table in &source.layout.tables {
            let base = table.copy_base(source.copy);
            for slot in base..base + source.rows_in_copy(table.id, source.copy) {
                let seq = source.seq(table.id, slot);
                if seq == 0 {
                    continue;
                }
                let key = source
                    .region
                    .load(table.tuple_addr(slot) + crate::store::KEY_WORD as u64);
                visit(&source, partition, table.id, slot, key, seq);
            }
        }
    }
}

/// One entry of a digest: `(partition, table, key, seq, record)`.
type DigestEntry<'a> = (NodeId, u32, u64, u64, &'a [u64]);

fn digest_entries(words: &[u64]) -> Result<Vec<DigestEntry<'_>>, String> {
    let mut entries = Vec::new();
    let mut at = 0;
    while at < words.len() {
        let fixed = words
            .get(at..at + 5)
            .ok_or("a sync digest ends inside an entry")?;
        let len = fixed[4] as usize;
        let record = words
            .get(at + 5..at + 5 + len)
            .ok_or("a sync digest's record runs past its end")?;
        entries.push((
            fixed[0] as NodeId,
            fixed[1] as u32,
            fixed[2],
            fixed[3],
            record,
        ));
        at += 5 + len;
    }
    Ok(entries)
}

/// Copy sync, step 2 (on the decider):
/// from every live node's [`sync_digest`], for each node the entries its
/// copies lack — the newest version of each tuple among the live copies
/// of its partition, where that node's copy holds an older one or none.
/// Returns `(node, entries)` for every node in `digests`.
pub fn merge_sync_digests(
    placement: &Placement,
    failed: &[NodeId],
    digests: &[(NodeId, Vec<u64>)],
) -> Result<Vec<(NodeId, Vec<u64>)>, String> {
    use std::collections::HashMap;
    // (partition, table, key) -> (newest seq, its record, seq per holder).
    type Newest<'a> = (u64, &'a [u64], Vec<(NodeId, u64)>);
    let mut newest: HashMap<(NodeId, u32, u64), Newest<'_>> = HashMap::new();
    for (node, words) in digests {
        for (partition, table, key, seq, record) in digest_entries(words)? {
            let entry = newest
                .entry((partition, table, key))
                .or_insert((0, &[], Vec::new()));
            if seq > entry.0 {
                entry.0 = seq;
                entry.1 = record;
            }
            entry.2.push((*node, seq));
        }
    }
    let mut out: Vec<(NodeId, Vec<u64>)> = digests
        .iter()
        .map(|(node, _)| (*node, Vec::new()))
        .collect();
    let mut keys: Vec<_> = newest.keys().copied().collect();
    keys.sort_unstable();
    for key in keys {
        let (seq, record, held) = &newest[&key];
        let (partition, table, tuple_key) = key;
        for (node, _) in live_holders(placement, partition, failed) {
            let has = held
                .iter()
                .find(|(holder, _)| *holder == node)
                .map_or(0, |(_, s)| *s);
            if has >= *seq {
                continue;
            }
            if let Some((_, words)) = out.iter_mut().find(|(n, _)| *n == node) {
                words.extend_from_slice(&[
                    partition as u64,
                    table as u64,
                    tuple_key,
                    *seq,
                    record.len() as u64,
                ]);
                words.extend_from_slice(record);
            }
        }
    }
    Ok(out)
}

/// Copy sync, step 3 on each node: installs the
/// entries [`merge_sync_digests`] found its copies lacking. Returns the
/// versions installed.
pub fn install_sync(
    replication: &Replication,
    store: &Arc<NodeStore>,
    entries: &[u64],
) -> Result<u64, String> {
    let placement = replication.placement;
    let mut installed = 0;
    for (partition, table, key, seq, record) in digest_entries(entries)? {
        let copy = placement.copy_on(store.node, partition).ok_or_else(|| {
            format!(
                "node {} was sent a version of partition {partition}, of which it holds no copy",
                store.node
            )
        })?;
        if table as usize >= store.layout.tables.len() {
            return Err(format!(
                "a sync entry names table {table}, which does not exist"
            ));
        }
        let handle = copy_handle(store, partition, copy);
        if let Ok(slot) = handle.ensure_row(table, key) {
            if ring::install_if_newer(&handle, table, slot, seq, record) {
                installed += 1;
            }
        }
    }
    Ok(installed)
}

/// A handle on `store`'s copy `copy` of `partition` (copy 0: the node's
/// own rows), whose inserts go to that copy.
fn copy_handle(store: &Arc<NodeStore>, partition: NodeId, copy: u32) -> NodeStore {
    if copy == 0 {
        store.own_view()
    } else {
        store.backup_view(partition, copy)
    }
}
