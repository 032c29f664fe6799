//! Recovery of a failed node's partitions from their backups (issue 8
//! item 3; DrTM+H §5.4 leaves it unimplemented, FaRM's recovery is the
//! model): promote, for each partition the failed node was primary of, its
//! first live backup (`Placement::primary_given`), and resolve the failed
//! coordinator's transactions from the log records it left in the
//! survivors' rings.
//!
//! The steps, each run on a quiet cluster (no transaction before its
//! commit point; `failover` drives them during a run, a test may call
//! [`recover`] after one), with direct access to the survivors' memory:
//!
//! * [`recover`]: a whole record of a failed coordinator found in a
//!   survivor's ring is rolled forward onto every live copy of every
//!   partition it names; a partial one (its trailer never landed: the
//!   coordinator died while posting, before its commit point) is
//!   discarded; every other ring is drained into its backup copy;
//! * [`redo_writes`]: the redo writes a serving node holds (from a
//!   coordinator that was its partition's only other backup) are installed
//!   where the serving copy lacks them;
//! * [`sync_copies`]: every live copy of a partition is brought to the
//!   newest version of each tuple among them, which finishes the installs
//!   a dead coordinator left undone on live primaries even when the
//!   backups applied its records long before the failure.
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

use super::ring::{self, LoggedWrite, RECORD_FIXED_WORDS};
use super::{Placement, Replication};

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
    /// of the same partition ([`sync_copies`]).
    pub versions_rolled_forward: u64,
}

/// Installs `write` on node `store`'s copy of its partition (the primary
/// copy 0 included), creating the row if the copy lacks it.
fn apply_on(store: &NodeStore, placement: &Placement, write: &LoggedWrite<'_>) {
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

/// Recovers from the failure of the nodes in `failed`; `stores` are every
/// node's stores (the failed ones are not read). Survivors' rings of live
/// coordinators are drained too, so the copies are up to date.
pub fn recover(
    replication: &Replication,
    stores: &[Arc<NodeStore>],
    failed: &[NodeId],
) -> RecoveryOutcome {
    let placement = replication.placement;
    let rings = replication.rings;
    let alive = |n: NodeId| !failed.contains(&n);
    let mut outcome = RecoveryOutcome::default();
    for &node in failed {
        match placement.primary_given(node, alive) {
            Some(serving) => outcome.promoted.push((node, serving)),
            None => outcome.lost_partitions.push(node),
        }
    }
    let mut words = Vec::new();
    for backup in stores.iter().filter(|s| alive(s.node)) {
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
                    outcome.resolved_from_log_count += 1;
                    words.clear();
                    if (RECORD_FIXED_WORDS as u64..=size).contains(&len) {
                        for offset in 0..len {
                            words.push(region.load(ring_addr + (at + offset) % size));
                        }
                    }
                    let Some((_, writes)) = ring::parse_record(&words) else {
                        // Its trailer never landed: the coordinator died
                        // before every backup acknowledged; discarded.
                        outcome.resolved_aborted_count += 1;
                        break;
                    };
                    for write in &writes {
                        for store in stores.iter().filter(|s| alive(s.node)) {
                            apply_on(store, &placement, write);
                        }
                    }
                    outcome.resolved_committed_count += 1;
                    for offset in 0..len {
                        region.store(ring_addr + (at + offset) % size, 0);
                    }
                    head += len;
                    region.store(head_addr, head);
                }
            }
        }
        replication.drain_all(backup);
    }
    outcome.versions_rolled_forward = sync_copies(replication, stores, failed);
    outcome
}

/// Installs, on the node serving each partition, the redo writes it holds
/// (`RedoWrite`: committed writes whose only other record is on their
/// coordinator's own node) that its copy lacks — a failed coordinator's, or
/// a live one's that left installs to the recovery (a committing attempt
/// that found a latch of the failed coordinator) — and drops them all.
/// Returns the writes installed.
pub fn redo_writes(replication: &Replication, stores: &[Arc<NodeStore>], failed: &[NodeId]) -> u64 {
    let placement = replication.placement;
    let mut installed = 0;
    for store in stores.iter().filter(|s| !failed.contains(&s.node)) {
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
    }
    installed
}

/// Brings every live copy of every partition to the newest version of
/// each tuple found among them (newest wins; run-time inserts a copy lacks
/// are created). Run after the rings are drained, on a quiet cluster: a
/// backup copy then holds exactly the writes of committed transactions
/// (records are posted at the commit point), so a newer version on a
/// backup than on the primary is a committed write whose coordinator died
/// before installing it there — including records the backup had applied
/// long before the failure, which are no longer in its ring. Returns the
/// versions installed.
pub fn sync_copies(replication: &Replication, stores: &[Arc<NodeStore>], failed: &[NodeId]) -> u64 {
    let placement = replication.placement;
    let alive = |n: NodeId| !failed.contains(&n);
    let mut installed = 0;
    let mut record = Vec::new();
    for partition in 0..placement.nodes as NodeId {
        // The live holders of the partition: (node, copy).
        let holders: Vec<(NodeId, u32)> = (0..placement.factor)
            .map(|copy| (placement.node_of(partition, copy), copy))
            .filter(|&(node, _)| alive(node))
            .collect();
        if holders.len() < 2 {
            continue;
        }
        let handles: Vec<NodeStore> = holders
            .iter()
            .map(|&(node, copy)| copy_handle(&stores[node as usize], partition, copy))
            .collect();
        for (from, source) in handles.iter().enumerate() {
            for table in &source.layout.tables {
                let base = table.copy_base(source.copy);
                for slot in base..base + source.rows_in_copy(table.id, source.copy) {
                    let key = source
                        .region
                        .load(table.tuple_addr(slot) + crate::store::KEY_WORD as u64);
                    let seq = source.seq(table.id, slot);
                    if seq == 0 {
                        continue;
                    }
                    source.record(table.id, slot, &mut record);
                    for (to, target) in handles.iter().enumerate() {
                        if to == from {
                            continue;
                        }
                        let behind = target
                            .lookup(table.id, key)
                            .is_none_or(|s| target.seq(table.id, s) < seq);
                        if !behind {
                            continue;
                        }
                        if let Ok(target_slot) = target.ensure_row(table.id, key) {
                            if ring::install_if_newer(target, table.id, target_slot, seq, &record) {
                                installed += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    installed
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
