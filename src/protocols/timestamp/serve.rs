//! Basic T/O's RPC handlers: the read, the lock & read, the lock & fetch,
//! and the install a one-sided stage does with verbs, done on the serving
//! node on the same lock, `wts` and `rts` words (RCC §5.2), and the
//! cascading writers' outcome words.
//!
//! Invariant: a handler that cannot decide now answers `Served::Wait`
//! holding nothing.

use super::*;

/// The local form of [`queue_install_onesided`].
pub(super) fn install_local(
    store: &NodeStore,
    table: &TableLayout,
    slot: u64,
    seq: u64,
    record: &[u64],
    wts: u64,
    lock: u64,
) {
    store.region.store(kit::seq_end_addr(table, slot), seq);
    store.region.write(table.record_addr(slot), record);
    store.region.store(table.header_addr(slot, WTS_WORD), wts);
    store.region.store(table.seq_addr(slot), seq);
    store.region.store(lock_addr(table, slot), lock);
}

/// The outcome of the cascading writer `writer` from its coroutine's two
/// outcome words, read in address order: `last`, the state of the latest
/// transaction of the coroutine that installed writes (`ts | state`), and
/// `aborted`, the latest such transaction that aborted (written together
/// with `last` on abort). A coroutine's timestamps grow, so once `last`
/// names a later transaction, `writer` aborted iff `aborted >= writer` —
/// except that `aborted > writer` cannot tell, and counts as aborted (the
/// safe answer).
pub(super) fn outcome_of(writer: u64, last: u64, aborted: u64) -> u64 {
    let latest = last & TS_MASK;
    if latest == writer {
        last & !TS_MASK
    } else if latest > writer && aborted < writer {
        META_COMMITTED
    } else {
        META_ABORTED
    }
}

/// Local lock-and-check of one record (`held`: `ts` holds it already):
/// `lock_reply::OK`, `lock_reply::STALE` (locked but not writable) or `lock_reply::CONFLICT`.
pub(super) fn lock_local(
    store: &NodeStore,
    table: &TableLayout,
    slot: u64,
    ts: u64,
    read_seq: u64,
    held: bool,
) -> u64 {
    if held {
        debug_assert_eq!(store.region.load(lock_addr(table, slot)), ts);
    } else if store.region.cas(lock_addr(table, slot), 0, ts) != 0 {
        return lock_reply::CONFLICT;
    }
    let seq = store.region.load(table.seq_addr(slot));
    let wts = store.region.load(table.header_addr(slot, WTS_WORD));
    let rts = store.region.load(table.header_addr(slot, RTS_WORD));
    if writable(ts, read_seq, seq, wts, rts) {
        lock_reply::OK
    } else {
        lock_reply::STALE
    }
}

/// Handler of `TS_LOCK_READ`: `[table, key, ts]` → `[status, slot, seq, wts,
/// rts, record…]`: `OK` (locked and writable), `STALE` (locked, too late:
/// the requester must release it), or `[LOCKED, slot]`, `[NOT_FOUND]`.
pub(super) fn lock_read(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let (table_id, key, ts) = (payload[0] as u32, payload[1], payload[2]);
    payload.clear();
    let Some(slot) = kit::find_row(store, table_id, key, payload) else {
        return Served::Reply;
    };
    let table = store.layout.table(table_id);
    if store.region.cas(lock_addr(table, slot), 0, ts) != 0 {
        payload.extend_from_slice(&[status::LOCKED, slot]);
        return Served::Reply;
    }
    let seq = store.seq(table_id, slot);
    let wts = store.region.load(table.header_addr(slot, WTS_WORD));
    let rts = store.region.load(table.header_addr(slot, RTS_WORD));
    let verdict = if writable(ts, seq, seq, wts, rts) {
        status::OK
    } else {
        status::STALE
    };
    payload.extend_from_slice(&[verdict, slot, seq, wts, rts]);
    kit::push_record(store, table, slot, payload);
    Served::Reply
}

/// Handler of `TS_LOCK_FETCH`: `[ts, (table, slot, seq, held)…]` → per entry
/// `[status, wts, record…]` (the committed version, for the backup). The
/// request entries are first moved past the reply, so the reply is built in
/// the same buffer.
pub(super) fn lock_fetch(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let ts = payload[0];
    let entries = (payload.len() - 1) / 4;
    let reply_words: usize = (0..entries)
        .map(|e| 2 + store.layout.table(payload[1 + 4 * e] as u32).record_words as usize)
        .sum();
    let from = reply_words.max(1);
    payload.resize(from + 4 * entries, 0);
    payload.copy_within(1..1 + 4 * entries, from);
    let mut at = 0;
    for entry in 0..entries {
        let e = from + 4 * entry;
        let table = store.layout.table(payload[e] as u32);
        let (slot, read_seq, held) = (payload[e + 1], payload[e + 2], payload[e + 3] != 0);
        let words = table.record_words as usize;
        payload[at] = lock_local(store, table, slot, ts, read_seq, held);
        payload[at + 1] = store.region.load(table.header_addr(slot, WTS_WORD));
        store.region.read(
            table.record_addr(slot),
            &mut payload[at + 2..at + 2 + words],
        );
        at += 2 + words;
    }
    payload.truncate(reply_words);
    Served::Reply
}

/// Handler of `TS_READ`: `[table, key, ts, cascading, waits]` → `[status, slot, seq, wts, rts, record…]` (`DIRTY_OK`:
/// an installed, uncommitted write by `wts`; `[NOT_FOUND]`, or `[status,
/// slot]` on refusal), or `Served::Wait` (payload untouched) while an older
/// writer holds the lock.
pub(super) fn read(
    store: &NodeStore,
    payload: &mut Vec<u64>,
    wait: PendingWait,
    now_ns: u64,
) -> Served {
    let request = [payload[0], payload[1], payload[2], payload[3], payload[4]];
    let (table_id, key, ts) = (request[0] as u32, request[1], request[2]);
    let cascading = request[3] != 0;
    let Some(slot) = kit::find_row(store, table_id, key, payload) else {
        return Served::Reply;
    };
    let table = store.layout.table(table_id);
    let region = &store.region;
    let record_words = table.record_words as usize;
    let mut reply_status = status::INCONSISTENT;
    let (mut seq, mut wts, mut rts) = (0, 0, 0);
    payload.clear();
    payload.resize(5 + record_words, 0);
    for _ in 0..READ_TRIES {
        // The same word order as a READ: seq, header, record, seq_end.
        seq = region.load(table.seq_addr(slot));
        let lock = region.load(lock_addr(table, slot));
        wts = region.load(table.header_addr(slot, WTS_WORD));
        rts = region.load(table.header_addr(slot, RTS_WORD));
        region.read(table.record_addr(slot), &mut payload[5..]);
        let seq_end = region.load(kit::seq_end_addr(table, slot));
        if seq != seq_end {
            reply_status = status::INCONSISTENT;
            continue;
        }
        match judge(ts, cascading, lock, wts, rts) {
            Verdict::Refuse(reason) => {
                reply_status = refusal_status(reason);
                break;
            }
            Verdict::Wait => {
                if let Some(parked) = wait.park(payload, &request, 4, now_ns) {
                    return parked;
                }
                reply_status = status::LOCKED;
                break;
            }
            Verdict::Take { raise, dirty } => {
                let accepted = if dirty { lock } else { 0 };
                if !raise || raise_rts_local(store, table, slot, RTS_WORD, ts, seq, accepted) {
                    reply_status = if dirty { DIRTY_OK } else { status::OK };
                    break;
                }
                reply_status = status::LOCKED;
            }
        }
    }
    if reply_status == status::OK || reply_status == DIRTY_OK {
        payload[..5].copy_from_slice(&[reply_status, slot, seq, wts, rts]);
    } else {
        payload.clear();
        payload.extend_from_slice(&[reply_status, slot]);
    }
    Served::Reply
}

/// `TS_LOCK` `[ts, (table, slot, read seq, held)…]` → one
/// `kit::lock_reply` word per entry ([`lock_local`]).
pub(super) fn lock(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let ts = payload[0];
    kit::answer_entries(payload, 1, 4, |entry| {
        let table = store.layout.table(entry[0] as u32);
        let (slot, read_seq, held) = (entry[1], entry[2], entry[3] != 0);
        lock_local(store, table, slot, ts, read_seq, held)
    });
    Served::Reply
}

/// `TS_COMMIT` `[ts, (table, slot, new seq, record…)…]` → `[]`: installs
/// each locked record with `wts = ts` and unlocks it.
pub(super) fn commit(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let ts = payload[0];
    for entry in kit::write_back_entries(store, &payload[1..]) {
        let (table, slot) = (entry.table, entry.slot);
        debug_assert_eq!(store.region.load(lock_addr(table, slot)), ts);
        install_local(store, table, slot, entry.new_seq, entry.record, ts, 0);
    }
    payload.clear();
    Served::Reply
}

/// `TS_INSTALL` `[owner, (table, slot, seq, wts, record…)…]` → `[]`: an
/// install (the lock stays, flagged installed) or, from an owner already
/// flagged, a restore (unlocks).
pub(super) fn install(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    // [owner, (table, slot, seq, wts, record…)…]: an install
    // (lock stays, flagged installed) or, from an owner already
    // flagged, a restore (unlocks).
    let owner = payload[0];
    let lock = if owner & LOCK_INSTALLED == 0 {
        owner | LOCK_INSTALLED
    } else {
        0
    };
    let mut at = 1;
    while at < payload.len() {
        let table = store.layout.table(payload[at] as u32);
        let (slot, seq, wts) = (payload[at + 1], payload[at + 2], payload[at + 3]);
        let record = &payload[at + 4..at + 4 + table.record_words as usize];
        debug_assert_eq!(
            store.region.load(lock_addr(table, slot)) & TS_MASK,
            owner & TS_MASK
        );
        install_local(store, table, slot, seq, record, wts, lock);
        at += 4 + table.record_words as usize;
    }
    payload.clear();
    Served::Reply
}

/// `TS_OUTCOME` `[addr, writer]` → `[both outcome words]`; waits while the
/// writer runs.
pub(super) fn outcome(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    // [addr, writer] → [both outcome words]; waits while the
    // writer runs. Loaded in READ order.
    let (addr, writer) = (payload[0], payload[1]);
    let last = store.region.load(addr);
    let aborted = store.region.load(addr + 1);
    if outcome_of(writer, last, aborted) == META_RUNNING {
        return Served::Wait;
    }
    payload.clear();
    payload.extend_from_slice(&[last, aborted]);
    Served::Reply
}
