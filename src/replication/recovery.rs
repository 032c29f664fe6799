//! Recovery of a failed node's partitions from their backups (issue 8
//! item 3; DrTM+H §5.4 leaves it unimplemented, FaRM's recovery is the
//! model): promote, for each partition the failed node was primary of, its
//! first live backup (`Placement::primary_given`), and resolve the failed
//! coordinator's transactions from the log records it left in the
//! survivors' rings.
//!
//! What this module does today, and its limits (see the branch report):
//!
//! * it runs on a **quiescent** cluster (after a `sim` run in which a node
//!   crashed), with direct access to the survivors' memory — the shape of
//!   the `FailureHook` the fault-detection side calls, minus the in-run
//!   pause/resume and re-routing of accesses to the promoted copy, which
//!   are not implemented;
//! * a whole record of the failed coordinator found in a survivor's ring
//!   is rolled forward onto every live copy of every partition it names;
//!   a partial record (its trailer never landed) is discarded. Records a
//!   backup already applied in the background are in its copy already;
//! * it does not release the failed coordinators' locks (each protocol's
//!   header would need an orphan-release function).

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
    outcome
}
