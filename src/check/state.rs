//! The final store against the history: nothing committed is lost, nothing
//! uncommitted is installed.
//!
//! After a quiescent run, every tuple's `seq` must equal the version the
//! last committed write to it installed (0 if none did), and every key the
//! history wrote must exist. A write-back that never arrived, one applied
//! twice, or one from an aborted attempt shows here even when the history
//! itself is serializable. Workload invariants check the record contents;
//! this checks the versions for every workload alike.
//!
//! Invariant relied on: keys are unique per table across nodes (the history
//! names a tuple by `(table, key)`, as the checker does).

use std::sync::Arc;

use super::History;
use crate::store::{NodeStore, KEY_WORD};

/// How many mismatches are described; all are counted.
const MAX_LISTED: usize = 10;

/// Mismatches between `stores` and `history`; empty when they agree.
pub fn store_matches_history(history: &History, stores: &[Arc<NodeStore>]) -> Vec<String> {
    // (table, key, last installed seq), one entry per written tuple.
    let mut written: Vec<(u32, u64, u64)> = history
        .txns
        .iter()
        .flat_map(|txn| history.writes(txn))
        .map(|item| (item.table, item.key, item.seq))
        .collect();
    written.sort_unstable();
    written.dedup_by(|later, earlier| {
        // Keep the highest version of each tuple (sorted: later is higher).
        let same = later.0 == earlier.0 && later.1 == earlier.1;
        if same {
            earlier.2 = later.2;
        }
        same
    });
    let mut stored: Vec<(u32, u64, u64)> = Vec::new();
    for store in stores {
        for table in &store.layout.tables {
            for slot in 0..store.rows(table.id) {
                let key = store.region.load(table.tuple_addr(slot) + KEY_WORD as u64);
                stored.push((table.id, key, store.seq(table.id, slot)));
            }
        }
    }
    stored.sort_unstable();

    let mut problems = Vec::new();
    let mut count = 0usize;
    let mut note = |text: String| {
        count += 1;
        if problems.len() < MAX_LISTED {
            problems.push(text);
        }
    };
    let mut next_written = written.iter().peekable();
    for &(table, key, seq) in &stored {
        while let Some(&&(t, k, last)) = next_written.peek() {
            if (t, k) >= (table, key) {
                break;
            }
            note(format!(
                "table {t} key {k}: the history installed version {last} but no node holds the key"
            ));
            next_written.next();
        }
        let expected = match next_written.peek() {
            Some(&&(t, k, last)) if (t, k) == (table, key) => {
                next_written.next();
                last
            }
            _ => 0,
        };
        if seq != expected {
            note(format!(
                "table {table} key {key}: the store holds version {seq} but the last committed write installed {expected}"
            ));
        }
    }
    for &(t, k, last) in next_written {
        note(format!(
            "table {t} key {k}: the history installed version {last} but no node holds the key"
        ));
    }
    if count > problems.len() {
        problems.push(format!("{count} mismatches in all"));
    }
    problems
}

/// The half of [`store_matches_history`] that a partial history supports
/// (a multi-process run that lost a rank loses that rank's history with
/// it): every tuple `history` wrote exists in `stores` at the version its
/// last write in `history` installed or a later one (versions count up by
/// one per write). Nothing a listed transaction committed is lost; what
/// unlisted transactions installed is not judged. Empty when it holds.
pub fn store_holds_history_writes(history: &History, stores: &[Arc<NodeStore>]) -> Vec<String> {
    let mut written: std::collections::HashMap<(u32, u64), u64> = std::collections::HashMap::new();
    for item in history.txns.iter().flat_map(|txn| history.writes(txn)) {
        let last = written.entry((item.table, item.key)).or_insert(0);
        *last = (*last).max(item.seq);
    }
    let mut stored: std::collections::HashMap<(u32, u64), u64> = std::collections::HashMap::new();
    for store in stores {
        for table in &store.layout.tables {
            for slot in 0..store.rows(table.id) {
                let key = store.region.load(table.tuple_addr(slot) + KEY_WORD as u64);
                stored.insert((table.id, key), store.seq(table.id, slot));
            }
        }
    }
    let mut keys: Vec<_> = written.keys().copied().collect();
    keys.sort_unstable();
    let mut problems = Vec::new();
    let mut count = 0usize;
    for (table, key) in keys {
        let last = written[&(table, key)];
        let problem = match stored.get(&(table, key)) {
            None => format!("table {table} key {key}: a committed write installed version {last} but no node holds the key"),
            Some(&seq) if seq < last => format!(
                "table {table} key {key}: the store holds version {seq}, older than the committed version {last}"
            ),
            Some(_) => continue,
        };
        count += 1;
        if problems.len() < MAX_LISTED {
            problems.push(problem);
        }
    }
    if count > problems.len() {
        problems.push(format!("{count} lost writes in all"));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Item;
    use crate::store::{StoreLayout, TableSpec};

    fn store_with(keys: &[u64]) -> Arc<NodeStore> {
        let layout = Arc::new(StoreLayout::new(
            &[TableSpec {
                name: "t",
                record_words: 1,
                capacity_per_node: 16,
            }],
            |_| 1,
        ));
        let store = NodeStore::new(0, layout);
        for &key in keys {
            store.insert(0, key, &[0]).unwrap();
        }
        Arc::new(store)
    }

    fn set_seq(store: &NodeStore, key: u64, seq: u64) {
        let slot = store.lookup(0, key).unwrap();
        store
            .region
            .store(store.layout.table(0).seq_addr(slot), seq);
    }

    fn write(table: u32, key: u64, seq: u64) -> Item {
        Item { table, key, seq }
    }

    #[test]
    fn agreeing_store_and_history_pass() {
        let store = store_with(&[1, 2, 3]);
        let mut history = History::new();
        history.push(10, 0, &[], &[write(0, 1, 1)]);
        history.push(11, 0, &[], &[write(0, 1, 2), write(0, 3, 1)]);
        set_seq(&store, 1, 2);
        set_seq(&store, 3, 1);
        assert!(store_matches_history(&history, &[store]).is_empty());
    }

    #[test]
    fn a_partial_history_judges_only_lost_writes() {
        let store = store_with(&[1, 2, 3]);
        let mut history = History::new();
        history.push(10, 0, &[], &[write(0, 1, 1), write(0, 2, 3)]);
        history.push(11, 0, &[], &[write(0, 9, 1)]);
        set_seq(&store, 1, 4); // later writes by transactions not listed
        set_seq(&store, 2, 2); // the write of version 3 was lost
        set_seq(&store, 3, 7); // never written by a listed transaction
        let problems = store_holds_history_writes(&history, &[store]);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0]
            .contains("key 2: the store holds version 2, older than the committed version 3"));
        assert!(problems[1].contains("key 9") && problems[1].contains("no node holds the key"));
    }

    #[test]
    fn lost_extra_and_missing_writes_are_named() {
        let store = store_with(&[1, 2, 3]);
        let mut history = History::new();
        history.push(10, 0, &[], &[write(0, 1, 1), write(0, 9, 1)]);
        history.push(11, 0, &[], &[write(0, 1, 2)]);
        set_seq(&store, 1, 1); // the second write-back was lost
        set_seq(&store, 2, 1); // a write nobody committed
        let problems = store_matches_history(&history, &[store]);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(
            problems[0].contains("key 1: the store holds version 1")
                && problems[0].contains("installed 2")
        );
        assert!(
            problems[1].contains("key 2: the store holds version 1")
                && problems[1].contains("installed 0")
        );
        assert!(problems[2].contains("key 9") && problems[2].contains("no node holds"));
    }
}
