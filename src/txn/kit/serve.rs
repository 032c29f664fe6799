//! The handler side of the kit's steps, on the serving node's own memory.

use crate::store::{NodeStore, TableLayout};

use super::{kind, lock_addr, status};

/// Handler side of a tuple fetch: the slot of `key` in table `table_id`,
/// with the whole tuple read into `payload`; `None`, with `payload =
/// [NOT_FOUND]`, if no row has that key.
pub fn load_tuple(
    store: &NodeStore,
    table_id: u32,
    key: u64,
    payload: &mut Vec<u64>,
) -> Option<u64> {
    payload.clear();
    let Some(slot) = store.lookup(table_id, key) else {
        payload.push(status::NOT_FOUND);
        return None;
    };
    let table = store.layout.table(table_id);
    payload.resize(table.tuple_words as usize, 0);
    store.region.read(table.tuple_addr(slot), payload);
    Some(slot)
}

/// Appends the record at `slot` of `table` to a reply under way.
pub fn push_record(store: &NodeStore, table: &TableLayout, slot: u64, payload: &mut Vec<u64>) {
    let start = payload.len();
    payload.resize(start + table.record_words as usize, 0);
    store
        .region
        .read(table.record_addr(slot), &mut payload[start..]);
}

/// Rewrites the words `payload[record..]` of a record of `record_words`
/// words into the reply `[head…, record…]`, in place.
pub fn reply_with_record(payload: &mut Vec<u64>, record: usize, record_words: usize, head: &[u64]) {
    payload.copy_within(record..record + record_words, head.len());
    payload.truncate(head.len() + record_words);
    payload[..head.len()].copy_from_slice(head);
}

/// Serves the handlers every lock-word protocol shares; false if `kind` is
/// not one of them.
pub fn serve_shared(store: &NodeStore, kind: u16, payload: &mut Vec<u64>) -> bool {
    match kind {
        kind::WRITE_BACK => serve_write_back(store, payload),
        kind::UNLOCK => serve_unlock(store, payload),
        _ => return false,
    }
    true
}

/// Handler of `WRITE_BACK`: `[owner, (table, slot, new_seq, record…)…]`.
pub fn serve_write_back(store: &NodeStore, payload: &mut Vec<u64>) {
    let owner = payload[0];
    let mut at = 1;
    while at < payload.len() {
        let table = store.layout.table(payload[at] as u32);
        let slot = payload[at + 1];
        let new_seq = payload[at + 2];
        let record = &payload[at + 3..at + 3 + table.record_words as usize];
        debug_assert_eq!(store.region.load(lock_addr(table, slot)), owner);
        store.region.store(
            table.tuple_addr(slot) + table.seq_end_offset() as u64,
            new_seq,
        );
        store.region.write(table.record_addr(slot), record);
        store.region.store(table.seq_addr(slot), new_seq);
        store.region.store(lock_addr(table, slot), 0);
        at += 3 + table.record_words as usize;
    }
    payload.clear();
}

/// Handler of `UNLOCK`: `[owner, (table, slot)…]`. Unlocks only what
/// `owner` holds (RCC §5.2: an RPC release is a CAS from the owner to 0).
pub fn serve_unlock(store: &NodeStore, payload: &mut Vec<u64>) {
    let owner = payload[0];
    for pair in payload[1..].chunks_exact(2) {
        let table = store.layout.table(pair[0] as u32);
        let previous = store.region.cas(lock_addr(table, pair[1]), owner, 0);
        debug_assert_eq!(previous, owner, "unlock of a lock this owner does not hold");
    }
    payload.clear();
}
