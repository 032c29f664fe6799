//! CICADA's RPC handlers, one per kind (RCBench Alg. 11): each runs on the
//! serving node the check its one-sided form runs on a fetched tuple, under
//! the same tuple latch (header word 0), so that the two forms mix (RCC
//! §5.2).
//!
//! Invariant: a handler frees every latch it took before it replies, or
//! answers `Served::Wait` holding none.

use super::*;

/// `CICADA_READ` `[table, key, bts, write]` → `[status, slot, …]`: the
/// version visible at `bts` (the latest one for a write), re-read while
/// it is pending.
pub(super) fn read(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let region = &store.region;
    let (table_id, key, bts, write) = (payload[0] as u32, payload[1], payload[2], payload[3] != 0);
    let Some(slot) = kit::find_row(store, table_id, key, payload) else {
        return Served::Reply;
    };
    let table = store.layout.table(table_id);
    let shape = Shape::of(table);
    // Copy the tuple into the buffer after a 3-word reply head.
    payload.clear();
    payload.resize(3 + table.tuple_words as usize, 0);
    region.read(table.tuple_addr(slot), &mut payload[3..]);
    let picked = {
        let words = &payload[3..];
        let tuple = tuple_in(table, words);
        pick(&tuple, bts, write)
    };
    match picked {
        Pick::Found(v) => {
            payload.copy_within(3 + v.data_at..3 + v.data_at + shape.record, 3);
            payload.truncate(3 + shape.record);
            payload[0] = status::OK;
            payload[1] = slot;
            payload[2] = v.seq;
        }
        Pick::Retry(AbortReason::VersionPending) => {
            payload.clear();
            payload.extend_from_slice(&[READ_AGAIN, slot]);
        }
        Pick::Retry(_) => {
            // Torn (an install in progress, under a one-sided
            // latch): restore the request and wait a turn.
            payload.clear();
            payload.extend_from_slice(&[table_id as u64, key, bts, write as u64]);
            return Served::Wait;
        }
        Pick::Abort(reason) => {
            payload.clear();
            payload.push(match reason {
                AbortReason::VersionPending => status::PENDING,
                AbortReason::VersionUnavailable => status::UNAVAILABLE,
                _ => status::STALE,
            });
            payload.push(slot);
        }
    }
    Served::Reply
}

/// `CICADA_INSTALL` `[owner, bts, entry…]` → one status per entry: under
/// every entry's latch (or none, and waits), checks that each write may
/// still be installed, then installs all as pending versions, or none.
pub(super) fn install(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let region = &store.region;
    let (owner, bts) = (payload[0], payload[1]);
    let stride = |t: &TableLayout| 3 + t.record_words as usize;
    if !latch_all(store, payload, 2, owner, stride) {
        return Served::Wait;
    }
    // Check every entry first, then install all or none.
    let mut verdict = Ok(());
    let mut at = 2;
    while at < payload.len() {
        let table = store.layout.table(payload[at] as u32);
        let base = table.tuple_addr(payload[at + 1]);
        let tuple = Tuple {
            table,
            shape: Shape::of(table),
            get: |i: usize| region.load(base + i as u64),
        };
        verdict = verdict.and(check_install(&tuple, bts, payload[at + 2]).map(|_| ()));
        at += stride(table);
    }
    if verdict.is_ok() {
        let mut at = 2;
        while at < payload.len() {
            let table = store.layout.table(payload[at] as u32);
            let shape = Shape::of(table);
            let base = table.tuple_addr(payload[at + 1]);
            let tuple = Tuple {
                table,
                shape,
                get: |i: usize| region.load(base + i as u64),
            };
            let seq = payload[at + 2];
            let target = check_install(&tuple, bts, seq).unwrap_or(0);
            if tuple.all_empty() {
                let loaded = tuple.base();
                let slot0 = base + shape.slot(0) as u64;
                for w in 0..shape.record {
                    let word = region.load(table.record_addr(payload[at + 1]) + w as u64);
                    region.store(slot0 + (S_DATA + w) as u64, word);
                }
                region.store(slot0 + S_RTS as u64, loaded.rts);
                region.store(slot0 + S_SST as u64, sst(loaded.seq, COMMITTED));
            }
            let slot = base + shape.slot(target) as u64;
            region.store(base + shape.wts_end(target) as u64, bts);
            region.write(
                slot + S_DATA as u64,
                &payload[at + 3..at + 3 + shape.record],
            );
            region.store(slot + S_RTS as u64, bts);
            region.store(slot + S_SST as u64, sst(seq + 1, PENDING));
            region.store(slot + S_WTS as u64, bts);
            // The entry's seq word now holds its target slot.
            payload[at + 2] = target as u64;
            at += stride(table);
        }
    }
    unlatch(store, payload, 2, &stride);
    if verdict.is_ok() {
        // Reply [OK, target…]: entry k's target moves to k + 1,
        // never past an entry not yet read.
        let mut at = 2;
        let mut k = 0;
        while at < payload.len() {
            let table = store.layout.table(payload[at] as u32);
            payload[1 + k] = payload[at + 2];
            k += 1;
            at += stride(table);
        }
        payload.truncate(1 + k);
        payload[0] = status::OK;
        return Served::Reply;
    }
    payload.clear();
    match verdict {
        Err(AbortReason::VersionPending) => payload.push(status::PENDING),
        Err(AbortReason::VersionUnavailable) => payload.push(status::UNAVAILABLE),
        _ => payload.push(status::STALE),
    }
    Served::Reply
}

/// `CICADA_VALIDATE` `[owner, bts, (table, slot, seq)…]` → `[status]`:
/// under the latches, checks that every read's version is still the one
/// visible at `bts` and raises its `rts`.
pub(super) fn validate(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let region = &store.region;
    let (owner, bts) = (payload[0], payload[1]);
    let stride = |_: &TableLayout| 3;
    if !latch_all(store, payload, 2, owner, stride) {
        return Served::Wait;
    }
    let mut valid = true;
    for entry in payload[2..].chunks_exact(3) {
        let table = store.layout.table(entry[0] as u32);
        let base = table.tuple_addr(entry[1]);
        let tuple = Tuple {
            table,
            shape: Shape::of(table),
            get: |i: usize| region.load(base + i as u64),
        };
        match check_read(&tuple, bts, entry[2]) {
            Ok(v) if v.rts < bts => region.store(base + v.rts_at as u64, bts),
            Ok(_) => {}
            Err(_) => valid = false,
        }
    }
    unlatch(store, payload, 2, &stride);
    payload.clear();
    payload.push(if valid { status::OK } else { status::STALE });
    Served::Reply
}

/// `CICADA_FINISH` `[commit, (table, slot, target, new_seq, record…)…]` →
/// `[]`: flips each pending version to committed (mirroring the record)
/// or aborted.
pub(super) fn finish(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let region = &store.region;
    let commit = payload[0] != 0;
    let mut at = 1;
    while at < payload.len() {
        let table = store.layout.table(payload[at] as u32);
        let shape = Shape::of(table);
        let (slot, target, new_seq) = (payload[at + 1], payload[at + 2] as u32, payload[at + 3]);
        let tuple = table.tuple_addr(slot);
        if commit {
            let record = &payload[at + 4..at + 4 + shape.record];
            region.store(kit::seq_end_addr(table, slot), new_seq);
            region.write(table.record_addr(slot), record);
            region.store(table.seq_addr(slot), new_seq);
        }
        let status = if commit { COMMITTED } else { ABORTED };
        region.store(
            tuple + (shape.slot(target) + S_SST) as u64,
            sst(new_seq, status),
        );
        at += 4 + if commit { shape.record } else { 0 };
    }
    payload.clear();
    Served::Reply
}

/// Latches every tuple of a handler's entries (`[table, slot, …]` records of
/// `stride(table)` words from `first`), or none: `false` means one was busy
/// and nothing is held.
pub(super) fn latch_all(
    store: &NodeStore,
    payload: &[u64],
    first: usize,
    owner: u64,
    stride: impl Fn(&TableLayout) -> usize,
) -> bool {
    let mut at = first;
    while at < payload.len() {
        let table = store.layout.table(payload[at] as u32);
        if store
            .region
            .cas(table.header_addr(payload[at + 1], LATCH), 0, owner)
            != 0
        {
            unlatch(store, &payload[..at], first, &stride);
            return false;
        }
        at += stride(table);
    }
    true
}

pub(super) fn unlatch(
    store: &NodeStore,
    payload: &[u64],
    first: usize,
    stride: &impl Fn(&TableLayout) -> usize,
) {
    let mut at = first;
    while at < payload.len() {
        let table = store.layout.table(payload[at] as u32);
        store
            .region
            .store(table.header_addr(payload[at + 1], LATCH), 0);
        at += stride(table);
    }
}
