//! A CALVIN run's history, merged: each participant of a transaction
//! records its own part (the items it read and wrote), and the check
//! needs one entry per transaction (`check::history`).
//!
//! Invariants: the merged history holds one entry per transaction id, in
//! id order, with every part's reads and then its writes, each item once
//! (a failover may record a failed node's part a second time); the
//! workload's type and note come from the one part that carries them.

use crate::check::history::SECONDARY_ENTRY;
use crate::check::{History, Item};

/// Drops repeated items, keeping the first of each (a transaction's parts
/// are few and small: a scan, unless the set is large).
fn dedup_items(items: &mut Vec<Item>) {
    if items.len() > 32 {
        let mut seen = std::collections::HashSet::with_capacity(items.len());
        items.retain(|item| seen.insert((item.table, item.key, item.seq)));
        return;
    }
    let mut kept = 0;
    for at in 0..items.len() {
        let item = items[at];
        if !items[..kept].contains(&item) {
            items[kept] = item;
            kept += 1;
        }
    }
    items.truncate(kept);
}

/// Merges the per-participant partial entries of each transaction into one
/// entry (reads first, then writes), in transaction-id order.
pub fn merge_partial_history(partial: &History) -> History {
    let mut order: Vec<usize> = (0..partial.txns.len()).collect();
    order.sort_by_key(|&i| (partial.txns[i].id, i));
    let mut merged = History::new();
    let mut reads: Vec<Item> = Vec::new();
    let mut writes: Vec<Item> = Vec::new();
    let mut at = 0;
    while at < order.len() {
        let first = &partial.txns[order[at]];
        reads.clear();
        writes.clear();
        let mut end = at;
        // The workload's type and note ride on one part (the others are
        // `SECONDARY_ENTRY`, see `executor::record_part`). A failover may
        // record a failed node's part that the node had recorded itself
        // (`failover`): the same items twice, and the type on both.
        let (mut kind, mut note) = (SECONDARY_ENTRY, 0i64);
        while end < order.len() && partial.txns[order[end]].id == first.id {
            let part = &partial.txns[order[end]];
            reads.extend_from_slice(partial.reads(part));
            writes.extend_from_slice(partial.writes(part));
            if part.kind != SECONDARY_ENTRY && kind == SECONDARY_ENTRY {
                kind = part.kind;
                note = part.note;
            }
            end += 1;
        }
        dedup_items(&mut reads);
        dedup_items(&mut writes);
        merged.push_noted(first.id, first.node, kind, note, &reads, &writes);
        at = end;
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_entries_merge_into_one_per_transaction() {
        let mut partial = History::new();
        let item = |key, seq| Item { table: 0, key, seq };
        partial.push(7, 1, &[item(1, 3)], &[item(1, 4)]);
        partial.push(5, 0, &[item(9, 0)], &[]);
        partial.push(7, 1, &[item(2, 8)], &[]);
        let merged = merge_partial_history(&partial);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged.txns[0].id, 5);
        let seven = merged.txns[1];
        assert_eq!(seven.id, 7);
        assert_eq!(merged.reads(&seven), &[item(1, 3), item(2, 8)]);
        assert_eq!(merged.writes(&seven), &[item(1, 4)]);
    }

    #[test]
    fn a_part_recorded_twice_merges_into_one() {
        let mut partial = History::new();
        let item = |key, seq| Item { table: 0, key, seq };
        // A failed node's part, recorded by the node and by a failover.
        partial.push_noted(9, 1, 2, 40, &[item(1, 3)], &[item(1, 4)]);
        partial.push_noted(9, 1, 2, 40, &[item(1, 3)], &[item(1, 4)]);
        partial.push_noted(9, 1, SECONDARY_ENTRY, 0, &[item(2, 8)], &[]);
        let many: Vec<Item> = (0..40).map(|k| item(100 + k, 1)).collect();
        partial.push_noted(10, 0, 1, 5, &many, &[]);
        partial.push_noted(10, 0, SECONDARY_ENTRY, 0, &many, &[]);
        let merged = merge_partial_history(&partial);
        assert_eq!(merged.len(), 2);
        let nine = merged.txns[0];
        assert_eq!(merged.reads(&nine), &[item(1, 3), item(2, 8)]);
        assert_eq!(merged.writes(&nine), &[item(1, 4)]);
        assert_eq!((nine.kind, nine.note), (2, 40), "the type and note once");
        assert_eq!(merged.reads(&merged.txns[1]), &many[..]);
    }
}
