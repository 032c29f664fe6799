//! MAAT's RPC handlers, one per kind (RCBench Alg. 9–10): each does on
//! the serving node what the one-sided form of its stage does with verbs,
//! on the same words (the tuple latch, the reader and writer lists, the
//! metadata slots), so that the two forms mix (RCC §5.2).
//!
//! Invariant: a handler that takes a tuple latch frees it before it
//! replies, or answers `Served::Wait` holding none.

use super::*;

/// `MAAT_INIT` `[metadata slot, txn]` → `[]`: opens the slot for `txn`,
/// running with the interval `[0, MAX_TS]`.
pub(super) fn init(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let region = &store.region;
    let (slot, txn) = (payload[0], payload[1]);
    region.store(slot + ID_END, txn);
    region.write(slot + STATE, &[RUNNING, 0, MAX_TS]);
    region.store(slot + ID, txn);
    payload.clear();
    Served::Reply
}

/// `MAAT_REGISTER` `[table, key, txn, owner, flags, seq]` → `[status,
/// slot, position, tuple…]`: under the tuple latch, adds `txn` to the
/// tuple's reader or writer list (`FULL` if no place is free, `STALE` if
/// an upgrade's version is gone); `Served::Wait` while the latch is held.
pub(super) fn register(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let region = &store.region;
    let (table_id, key, txn, owner) = (payload[0] as u32, payload[1], payload[2], payload[3]);
    let (flags, expected_seq) = (payload[4], payload[5]);
    let Some(slot) = kit::find_row(store, table_id, key, payload) else {
        return Served::Reply;
    };
    let table = store.layout.table(table_id);
    let words = Words::of(table);
    let latch = table.header_addr(slot, 0);
    if region.cas(latch, 0, owner) != 0 {
        return Served::Wait;
    }
    let write = flags & REG_WRITE != 0;
    let status = if flags & REG_UPGRADE != 0 && store.seq(table_id, slot) != expected_seq {
        status::STALE
    } else {
        status::OK
    };
    payload.clear();
    payload.extend_from_slice(&[status, slot, 0]);
    let start = payload.len();
    payload.resize(start + table.tuple_words as usize, 0);
    region.read(table.tuple_addr(slot), &mut payload[start..]);
    if status == status::OK {
        let list = (0..words.cap).map(|pos| {
            if write {
                words.writer(pos)
            } else {
                words.reader(pos)
            }
        });
        let header = start + HEADER_WORD as usize;
        let mut chosen = None;
        for (pos, word) in list.enumerate() {
            if payload[header + word as usize] == 0 {
                chosen = Some((pos, word));
                break;
            }
        }
        match chosen {
            Some((pos, word)) => {
                region.store(table.header_addr(slot, word), txn);
                payload[2] = pos as u64;
            }
            None => payload[0] = status::FULL,
        }
    }
    region.store(latch, 0);
    Served::Reply
}

/// `MAAT_META_READ` `[slot…]` → `[slot words…]`: the metadata slots, each
/// in place of its address.
pub(super) fn meta_read(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let region = &store.region;
    let count = payload.len();
    payload.resize(count * (1 + SLOT_WORDS as usize), 0);
    // Addresses first; expand from the back so none is lost.
    for i in (0..count).rev() {
        let slot = payload[i];
        let mut words = [0u64; SLOT_WORDS as usize];
        region.read(slot, &mut words);
        let start = i * SLOT_WORDS as usize;
        payload[start..start + SLOT_WORDS as usize].copy_from_slice(&words);
    }
    payload.truncate(count * SLOT_WORDS as usize);
    Served::Reply
}

/// `MAAT_PUSH` `[(slot, upper goal, lower goal)…]` → `[(state, id_end)…]`:
/// pushes each interval past the goals (Eq. 2), then reads its state back.
pub(super) fn push(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let region = &store.region;
    let count = payload.len() / 3;
    for i in 0..count {
        let (slot, ub_goal, lb_goal) = (payload[3 * i], payload[3 * i + 1], payload[3 * i + 2]);
        loop {
            let current = region.load(slot + UPPER);
            if current <= ub_goal || region.cas(slot + UPPER, current, ub_goal) == current {
                break;
            }
        }
        loop {
            let current = region.load(slot + LOWER);
            if current >= lb_goal || region.cas(slot + LOWER, current, lb_goal) == current {
                break;
            }
        }
        let state = region.faa(slot + STATE, 0);
        let id_end = region.load(slot + ID_END);
        // Replies overwrite requests already consumed.
        payload[2 * i] = state;
        payload[2 * i + 1] = id_end;
    }
    payload.truncate(2 * count);
    Served::Reply
}

/// `MAAT_FREEZE` `[slot, lb, ub]` → `[OK | STALE, ts]`: freezes the
/// owner's interval and commits at its lower bound if it is not empty.
pub(super) fn freeze(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let region = &store.region;
    let (slot, lb, ub) = (payload[0], payload[1], payload[2]);
    let previous = region.cas(slot + STATE, RUNNING, FREEZING);
    debug_assert_eq!(previous, RUNNING, "only the owner freezes");
    let lb_now = region.faa(slot + LOWER, 0);
    let ub_now = region.faa(slot + UPPER, 0);
    let ts = lb.max(lb_now);
    let commits = ts <= ub.min(ub_now);
    region.store(slot + STATE, if commits { committed(ts) } else { ABORTED });
    payload.clear();
    payload.extend_from_slice(&[if commits { status::OK } else { status::STALE }, ts]);
    Served::Reply
}

/// `MAAT_COMMIT` `[owner, ts, entry…]` → `[]`: latches every tuple (or
/// none, and waits), leaves its lists, installs the writes and raises
/// `wts`/`rts` to `ts`.
pub(super) fn commit(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let region = &store.region;
    let (owner, ts) = (payload[0], payload[1]);
    // Latch every tuple first, or none (and wait).
    let mut at = 2;
    while at < payload.len() {
        let table = store.layout.table(payload[at] as u32);
        let latch = table.header_addr(payload[at + 1], 0);
        if region.cas(latch, 0, owner) != 0 {
            let mut undo = 2;
            while undo < at {
                let table = store.layout.table(payload[undo] as u32);
                region.store(table.header_addr(payload[undo + 1], 0), 0);
                undo += entry_words(table, payload[undo + 3]);
            }
            return Served::Wait;
        }
        at += entry_words(table, payload[at + 3]);
    }
    let mut at = 2;
    while at < payload.len() {
        let table = store.layout.table(payload[at] as u32);
        let words = Words::of(table);
        let (slot, meta, new_seq) = (payload[at + 1], payload[at + 2], payload[at + 3]);
        for word in words.held(meta) {
            region.store(table.header_addr(slot, word), 0);
        }
        let rts = table.header_addr(slot, words.rts());
        region.store(rts, region.load(rts).max(ts));
        if new_seq != 0 {
            debug_assert_eq!(store.seq(table.id, slot) + 1, new_seq);
            let record = &payload[at + 4..at + 4 + table.record_words as usize];
            region.store(kit::seq_end_addr(table, slot), new_seq);
            region.write(table.record_addr(slot), record);
            let wts = table.header_addr(slot, words.wts());
            region.store(wts, region.load(wts).max(ts));
            region.store(table.seq_addr(slot), new_seq);
        }
        region.store(table.header_addr(slot, 0), 0);
        at += entry_words(table, new_seq);
    }
    payload.clear();
    Served::Reply
}

/// `MAAT_UNREGISTER` `[txn, (table, slot, meta)…]` → `[]`: leaves the
/// lists the positions in `meta` name, where `txn` still stands.
pub(super) fn unregister(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let region = &store.region;
    let txn = payload[0];
    for entry in payload[1..].chunks_exact(3) {
        let table = store.layout.table(entry[0] as u32);
        let words = Words::of(table);
        let (slot, meta) = (entry[1], entry[2]);
        for word in words.held(meta) {
            region.cas(table.header_addr(slot, word), txn, 0);
        }
    }
    payload.clear();
    Served::Reply
}

/// `MAAT_ABORT` `[slot]` → `[]`: marks the owner's metadata aborted.
pub(super) fn abort(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let region = &store.region;
    region.store(payload[0] + STATE, ABORTED);
    payload.clear();
    Served::Reply
}

/// Words of one `MAAT_COMMIT` entry: `[table, slot, meta, new_seq]` and the
/// record when it writes (`new_seq != 0`).
pub(super) fn entry_words(table: &TableLayout, new_seq: u64) -> usize {
    4 + if new_seq != 0 {
        table.record_words as usize
    } else {
        0
    }
}
