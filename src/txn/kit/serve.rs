//! The handler side of the kit's steps, on the serving node's own memory.

use crate::runtime::Served;
use crate::store::{NodeStore, TableLayout};

use super::{kind, lock_addr, lock_reply, seq_end_addr, status};

/// Handler side of an access: the slot of `key` in table `table_id`, or
/// `None`, with the reply `[NOT_FOUND]` in `payload`, if no row has that
/// key (`payload` is left as it is otherwise).
pub fn find_row(store: &NodeStore, table_id: u32, key: u64, payload: &mut Vec<u64>) -> Option<u64> {
    let slot = store.lookup(table_id, key);
    if slot.is_none() {
        payload.clear();
        payload.push(status::NOT_FOUND);
    }
    slot
}

/// Handler side of a tuple fetch: the slot of `key` in table `table_id`
/// and the table's layout, with the whole tuple read into `payload`;
/// `None`, with `payload = [NOT_FOUND]`, if no row has that key.
pub fn load_tuple<'s>(
    store: &'s NodeStore,
    table_id: u32,
    key: u64,
    payload: &mut Vec<u64>,
) -> Option<(u64, &'s TableLayout)> {
    let slot = find_row(store, table_id, key, payload)?;
    let table = store.layout.table(table_id);
    payload.clear();
    payload.resize(table.tuple_words as usize, 0);
    store.region.read(table.tuple_addr(slot), payload);
    Some((slot, table))
}

/// Handler side of a request with one reply word per entry, `[head…,
/// (entry of entry_words words)…]` (a commit-time lock, a check): replaces
/// it in place with `answer(entry)` per entry, in entry order.
pub fn answer_entries(
    payload: &mut Vec<u64>,
    head_words: usize,
    entry_words: usize,
    mut answer: impl FnMut(&[u64]) -> u64,
) {
    let entries = (payload.len() - head_words) / entry_words;
    for entry in 0..entries {
        let at = head_words + entry * entry_words;
        // An entry is read before its reply word, at or before it, is written.
        payload[entry] = answer(&payload[at..at + entry_words]);
    }
    payload.truncate(entries);
}

/// Handler side of a commit-time lock `[owner, (table, slot, seq read)…]`
/// (`OCC_LOCK`, `MVCC_LOCK`): one [`lock_reply`] word per entry, in
/// entry order. Each record's lock word is CASed 0 → `owner` (`CONFLICT`
/// if another holds it); a locked record is `OK` if `still_writable(table,
/// slot, seq read)` says the version read may still be overwritten, else
/// `STALE`, and keeps the lock for the coordinator's release to drop.
pub fn serve_lock(
    store: &NodeStore,
    payload: &mut Vec<u64>,
    still_writable: impl Fn(&TableLayout, u64, u64) -> bool,
) {
    let owner = payload[0];
    answer_entries(payload, 1, 3, |entry| {
        let table = store.layout.table(entry[0] as u32);
        let (slot, read_seq) = (entry[1], entry[2]);
        if store.region.cas(lock_addr(table, slot), 0, owner) != 0 {
            lock_reply::CONFLICT
        } else if still_writable(table, slot, read_seq) {
            lock_reply::OK
        } else {
            lock_reply::STALE
        }
    });
}

/// The status of a read reply: `OK` for a consistent snapshot of the
/// tuple, `INCONSISTENT` for a torn one (`seq != seq_end`).
pub fn read_status(consistent: bool) -> u64 {
    if consistent {
        status::OK
    } else {
        status::INCONSISTENT
    }
}

/// Rewrites a whole tuple of `table` read into `payload` into the reply
/// `[head…, record…]`, in place.
pub fn reply_with_tuple_record(payload: &mut Vec<u64>, table: &TableLayout, head: &[u64]) {
    let record_at = table.record_offset() as usize;
    reply_with_record(payload, record_at, table.record_words as usize, head);
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

/// Serves `kind` if it is one of the kit's handlers ([`serve_shared`]). A
/// request of any other kind reached a protocol that has no handler for
/// it, a bug: panics, naming `protocol`.
pub fn serve_shared_or_panic(
    store: &NodeStore,
    kind: u16,
    payload: &mut Vec<u64>,
    protocol: &str,
) -> Served {
    assert!(
        serve_shared(store, kind, payload),
        "{protocol} has no RPC handler {kind}"
    );
    Served::Reply
}

/// One entry of a write-back request, as [`write_back_entries`] reads it.
pub struct WriteBack<'p> {
    pub table: &'p TableLayout,
    pub slot: u64,
    pub new_seq: u64,
    pub record: &'p [u64],
}

/// The entries of the body `[(table, slot, new_seq, record…)…]` of a
/// write-back request (what follows its head), in order: what
/// [`push_write_back`](super::push_write_back) appends per record.
pub fn write_back_entries<'p>(
    store: &'p NodeStore,
    body: &'p [u64],
) -> impl Iterator<Item = WriteBack<'p>> {
    let mut at = 0;
    std::iter::from_fn(move || {
        (at < body.len()).then(|| {
            let table = store.layout.table(body[at] as u32);
            let words = table.record_words as usize;
            let entry = WriteBack {
                table,
                slot: body[at + 1],
                new_seq: body[at + 2],
                record: &body[at + 3..at + 3 + words],
            };
            at += 3 + words;
            entry
        })
    })
}

/// Handler of `WRITE_BACK`: `[owner, (table, slot, new_seq, record…)…]`.
pub fn serve_write_back(store: &NodeStore, payload: &mut Vec<u64>) {
    let owner = payload[0];
    for WriteBack {
        table,
        slot,
        new_seq,
        record,
    } in write_back_entries(store, &payload[1..])
    {
        debug_assert_eq!(store.region.load(lock_addr(table, slot)), owner);
        store.region.store(seq_end_addr(table, slot), new_seq);
        store.region.write(table.record_addr(slot), record);
        store.region.store(table.seq_addr(slot), new_seq);
        store.region.store(lock_addr(table, slot), 0);
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
