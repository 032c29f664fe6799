//! Replication (docs/ARCHITECTURE.md, layer 6): every partition kept on
//! `r` nodes (a primary and `r − 1` backups, `placement`), the coordinator
//! log that keeps the backups up to date before a transaction commits
//! (`log`, with its one-sided ring buffers and RPC form, `ring`), and the
//! check that every backup copy equals its primary.
//!
//! Sources: RCC §4.1 (the log stage: "the coordinator sends log records to
//! the backups and waits for acknowledgements" before commit) and §6.1
//! (3-way replication); DrTM+H §5.4 (primary-backup replication with
//! one-sided logging into the backups' memory, FaRM-style).
//!
//! Replication factor 1 (the default) is the unreplicated system exactly:
//! no backup copies, no rings, the log stage returns at once — the region
//! layout, histories and memory hashes of `r = 1` runs are unchanged.
//!
//! Invariants: a transaction commits (installs anything on a primary) only
//! after every backup of every partition it wrote acknowledged its record;
//! a backup copy only ever moves to a newer version of a tuple; after the
//! rings are drained, every backup copy equals its primary.

pub mod log;
pub mod ring;

use std::sync::Arc;

use crate::fabric::NodeId;
use crate::store::{NodeStore, StoreError, StoreLayout, KEY_WORD};

pub use crate::base::placement::Placement;
pub use log::{LogWriter, RedoWrite, Replication};
pub use ring::RingLayout;

/// Replication of a run with `factor` copies on `nodes` nodes of
/// `workers` workers each, with rings of `ring_words`; reserves the rings
/// in `layout` (which must have been laid out with `factor` copies).
/// `None` for factor 1: nothing is replicated.
pub fn setup(
    layout: &mut StoreLayout,
    nodes: u32,
    workers: u16,
    factor: u32,
    ring_words: u64,
) -> Option<Arc<Replication>> {
    if factor <= 1 {
        return None;
    }
    debug_assert_eq!(layout.copies(), factor);
    let rings = RingLayout::reserve(layout, nodes, workers, ring_words);
    Some(Arc::new(Replication::new(
        Placement::new(nodes, factor),
        rings,
    )))
}

/// Loads the backup copies `store`'s node holds with `load`, the
/// workload's own loader, each through a [`NodeStore::backup_view`] (the
/// loader sees the partition's rows as if it loaded its primary).
pub fn load_backups(
    store: &NodeStore,
    placement: &Placement,
    load: impl Fn(&NodeStore) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    for (partition, copy) in placement.backed_up_by(store.node) {
        load(&store.backup_view(partition, copy))?;
    }
    Ok(())
}

/// Differences between every backup copy and its primary (key set,
/// version and record of every row); empty when they agree. Quiescent use,
/// after the rings were drained. `stores[p]` is partition `p`'s serving
/// copy; the copies held by the nodes in `failed` are not compared (they
/// are gone), nor are the copies a promoted node serves.
pub fn backups_match_primaries(
    stores: &[Arc<NodeStore>],
    placement: &Placement,
    failed: &[NodeId],
) -> Vec<String> {
    let mut problems = Vec::new();
    let (mut primary_record, mut backup_record) = (Vec::new(), Vec::new());
    for backup in stores.iter().filter(|s| !failed.contains(&s.node)) {
        for (partition, copy) in placement.backed_up_by(backup.node) {
            if failed.contains(&partition)
                && serving_node(placement, partition, failed) == Some(backup.node)
            {
                continue;
            }
            let primary = &stores[partition as usize];
            for table in &backup.layout.tables {
                let rows = primary.rows(table.id);
                // The backup's own rows: none may be newer than, or absent
                // from, the primary.
                let base = table.copy_base(copy);
                for slot in base..base + backup.rows_in_copy(table.id, copy) {
                    let key = backup.region.load(table.tuple_addr(slot) + KEY_WORD as u64);
                    let seq = backup.seq(table.id, slot);
                    if seq > 0 && primary.lookup(table.id, key).is_none() {
                        problems.push(format!(
                            "table {} key {key}: version {seq} on backup node {} but absent on primary node {partition}",
                            table.name, backup.node
                        ));
                    }
                }
                for slot in 0..rows {
                    let key = primary
                        .region
                        .load(table.tuple_addr(slot) + KEY_WORD as u64);
                    let Some(copy_slot) = backup.lookup(table.id, key) else {
                        // A run-time insert's placeholder that never
                        // committed (version 0) is not logged.
                        if primary.seq(table.id, slot) == 0 {
                            continue;
                        }
                        problems.push(format!(
                            "table {} key {key}: missing on backup node {}",
                            table.name, backup.node
                        ));
                        continue;
                    };
                    primary.record(table.id, slot, &mut primary_record);
                    backup.record(table.id, copy_slot, &mut backup_record);
                    let (seq, copy_seq) =
                        (primary.seq(table.id, slot), backup.seq(table.id, copy_slot));
                    if seq != copy_seq || primary_record != backup_record {
                        problems.push(format!(
                            "table {} key {key}: version {seq} on primary node {partition}, version {copy_seq} on backup node {}{}",
                            table.name,
                            backup.node,
                            if seq == copy_seq { " with a different record" } else { "" }
                        ));
                    }
                    if problems.len() >= 10 {
                        return problems;
                    }
                }
            }
        }
    }
    problems
}

/// The node that serves `partition` once the nodes in `failed` are gone.
pub fn serving_node(placement: &Placement, partition: NodeId, failed: &[NodeId]) -> Option<NodeId> {
    placement.primary_given(partition, |n| !failed.contains(&n))
}

/// After a quiescent run: applies what is still in the rings, then checks
/// every backup copy against its primary, into `invariants`.
pub fn check_backups(
    replication: &Replication,
    stores: &[Arc<NodeStore>],
    failed: &[NodeId],
    invariants: &mut crate::check::InvariantReport,
) {
    let drained: u64 = stores
        .iter()
        .filter(|s| !failed.contains(&s.node))
        .map(|s| replication.drain_all(s))
        .sum();
    let problems = backups_match_primaries(stores, &replication.placement, failed);
    if problems.is_empty() {
        invariants.details.push(if failed.is_empty() {
            format!(
                "every backup copy ({} per partition) equals its primary ({drained} log records were still in the rings at the end)",
                replication.placement.factor - 1
            )
        } else {
            format!(
                "every live backup copy equals the copy serving its partition (nodes {failed:?} failed; {drained} log records were still in the rings at the end)"
            )
        });
    } else {
        invariants.ok = false;
        invariants
            .details
            .extend(problems.into_iter().map(|p| format!("replication: {p}")));
    }
}
