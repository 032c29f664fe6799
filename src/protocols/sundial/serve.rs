//! SUNDIAL's RPC handlers (RCC §4.5): the read, the commit-time lock, the
//! lease renewal, the write-back and the release a one-sided stage does
//! with verbs, done on the serving node on the same lease word (RCC §5.2),
//! and the lock & read of the lock-at-access variant.
//!
//! Invariant: a handler changes a lease word only with the CAS or store
//! its one-sided form uses, so the two forms mix.

use super::*;

/// The lock CAS loop of the RPC lock handler: `(status, lease word locked)`.
pub(super) fn lock_local(
    store: &NodeStore,
    table: &TableLayout,
    slot: u64,
    seq: u64,
    lease: u64,
) -> [u64; 2] {
    let addr = lease_addr(table, slot);
    let mut expected = lease & RTS_MASK;
    for _ in 0..LOCAL_CAS_TRIES {
        let previous = store.region.cas(addr, expected, expected | LOCKED);
        if previous == expected {
            let same = store.region.load(table.seq_addr(slot)) == seq;
            return [
                if same {
                    lock_reply::OK
                } else {
                    lock_reply::STALE
                },
                expected,
            ];
        }
        if previous & LOCKED != 0 {
            return [lock_reply::CONFLICT, 0];
        }
        if store.region.load(table.seq_addr(slot)) != seq {
            return [LOCK_STALE_FREE, 0];
        }
        expected = previous;
    }
    [lock_reply::CONFLICT, 0]
}

/// The renewal CAS loop of the RPC renew handler: whether the lease of the
/// version `seq` now reaches `commit_ts`.
pub(super) fn renew_local(
    store: &NodeStore,
    table: &TableLayout,
    slot: u64,
    seq: u64,
    lease: u64,
    commit_ts: u64,
) -> bool {
    let addr = lease_addr(table, slot);
    let mut expected = lease & RTS_MASK;
    for _ in 0..LOCAL_CAS_TRIES {
        if expected >= commit_ts {
            return true;
        }
        let previous = store.region.cas(addr, expected, commit_ts);
        if previous == expected {
            return true;
        }
        if previous & LOCKED != 0 || store.region.load(table.seq_addr(slot)) != seq {
            return false;
        }
        expected = previous;
    }
    false
}

/// The access-time lock handler of `lock_at_access`: `[table, key, me,
/// seq read or NO_SEQ]` → `[OK | ACCESS_LOCKED_STALE, slot, seq, wts,
/// lease locked, record…]`, `[ACCESS_STALE | ACCESS_DIED, slot]`,
/// `[NOT_FOUND]`, or `Served::Wait` (decided again at every offer) while
/// it waits. The same CAS on the same word as the one-sided form.
pub(super) fn serve_lock_read(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let (table_id, key, me, seq_read) = (payload[0] as u32, payload[1], payload[2], payload[3]);
    let Some(slot) = kit::find_row(store, table_id, key, payload) else {
        return Served::Reply;
    };
    let table = store.layout.table(table_id);
    let addr = lease_addr(table, slot);
    let stale = || seq_read != NO_SEQ && store.region.load(table.seq_addr(slot)) != seq_read;
    let lease = loop {
        let word = store.region.load(addr);
        if word & LOCKED == 0 {
            if store.region.cas(addr, word, word | LOCKED) == word {
                break word;
            }
            continue;
        }
        let answer = if stale() {
            ACCESS_STALE
        } else if waits_for(store.region.load(owner_addr(table, slot)), me) {
            return Served::Wait;
        } else {
            ACCESS_DIED
        };
        payload.clear();
        payload.extend_from_slice(&[answer, slot]);
        return Served::Reply;
    };
    store.region.store(owner_addr(table, slot), me);
    let answer = if stale() {
        ACCESS_LOCKED_STALE
    } else {
        status::OK
    };
    // Locked: no commit is in progress, so the copy is one version.
    payload.clear();
    payload.extend_from_slice(&[
        answer,
        slot,
        store.region.load(table.seq_addr(slot)),
        store.region.load(wts_addr(table, slot)),
        lease,
    ]);
    kit::push_record(store, table, slot, payload);
    Served::Reply
}

impl Sundial {
    /// The handler of `kind`, as [`Protocol::serve`].
    pub(super) fn serve_kind(
        &self,
        store: &NodeStore,
        kind: u16,
        payload: &mut Vec<u64>,
    ) -> Served {
        match kind {
            kind::SUNDIAL_READ => {
                let (table_id, key) = (payload[0] as u32, payload[1]);
                let Some((slot, table)) = kit::load_tuple(store, table_id, key, payload) else {
                    return Served::Reply;
                };
                let mut consistent = false;
                for read in 0..READ_TRIES {
                    if read > 0 {
                        store.region.read(table.tuple_addr(slot), payload);
                    }
                    let tuple = kit::decode(table, payload);
                    if tuple.seq == tuple.seq_end {
                        consistent = true;
                        break;
                    }
                }
                let tuple = kit::decode(table, payload);
                let (seq, lease) = (tuple.seq, tuple.lock);
                let wts = payload[(HEADER_WORD + WTS_WORD) as usize];
                let head = [kit::read_status(consistent), slot, seq, wts, lease];
                kit::reply_with_tuple_record(payload, table, &head);
            }
            kind::SUNDIAL_LOCK => {
                let entries = payload.len() / 4;
                for entry in 0..entries {
                    let at = 4 * entry;
                    let table = store.layout.table(payload[at] as u32);
                    let (slot, seq, lease) = (payload[at + 1], payload[at + 2], payload[at + 3]);
                    let reply = lock_local(store, table, slot, seq, lease);
                    payload[2 * entry..2 * entry + 2].copy_from_slice(&reply);
                }
                payload.truncate(2 * entries);
            }
            kind::SUNDIAL_RENEW => {
                let commit_ts = payload[0];
                let renewed = payload[1..].chunks_exact(4).all(|entry| {
                    let table = store.layout.table(entry[0] as u32);
                    renew_local(store, table, entry[1], entry[2], entry[3], commit_ts)
                });
                payload.clear();
                payload.push(if renewed { status::OK } else { status::STALE });
            }
            kind::SUNDIAL_WRITE_BACK => {
                let commit_ts = payload[0];
                for entry in kit::write_back_entries(store, &payload[1..]) {
                    let (table, slot, new_seq, record) =
                        (entry.table, entry.slot, entry.new_seq, entry.record);
                    debug_assert_ne!(store.region.load(lease_addr(table, slot)) & LOCKED, 0);
                    // The order of the one-sided commit (module doc).
                    store.region.store(kit::seq_end_addr(table, slot), new_seq);
                    store.region.write(table.record_addr(slot), record);
                    store.region.store(wts_addr(table, slot), commit_ts);
                    if self.lock_at_access {
                        store.region.store(owner_addr(table, slot), 0);
                    }
                    store.region.store(table.seq_addr(slot), new_seq);
                    store.region.store(lease_addr(table, slot), commit_ts);
                }
                payload.clear();
            }
            kind::SUNDIAL_RELEASE => {
                for entry in payload.chunks_exact(3) {
                    let table = store.layout.table(entry[0] as u32);
                    let addr = lease_addr(table, entry[1]);
                    debug_assert_eq!(store.region.load(addr), entry[2] | LOCKED);
                    if self.lock_at_access {
                        store.region.store(owner_addr(table, entry[1]), 0);
                    }
                    store.region.store(addr, entry[2]);
                }
                payload.clear();
            }
            kind::SUNDIAL_LOCK_READ if self.lock_at_access => {
                return serve_lock_read(store, payload);
            }
            other => panic!("sundial has no RPC handler {other}"),
        }
        Served::Reply
    }
}
