//! Finishing an attempt: the update-and-unlock commit and the unlock
//! release of the lock-word protocols, in one passive round.

use std::cell::RefMut;

use crate::base::{Primitive, Stage};
use crate::fabric::Batch;
use crate::txn::{TxnCx, TxnResult};

use super::{call_payload, kind, lock_addr, seq_end_addr};

/// Posts the verbs queued in `cx`'s round that this attempt's commit or
/// release must find in place. The fabric orders verbs after verbs and
/// RPCs after RPCs, not an RPC after a verb: where commit or release may go
/// by RPC, the round is awaited (a commit or release landing before these
/// WRITEs would be overtaken by them); otherwise it goes passive, FIFO
/// before the later stages' verbs.
pub async fn submit_before_commit(cx: &mut TxnCx<'_>) -> TxnResult<()> {
    if cx.primitive(Stage::Commit) == Primitive::Rpc
        || cx.primitive(Stage::Release) == Primitive::Rpc
    {
        cx.submit().await
    } else {
        cx.submit_passive();
        Ok(())
    }
}

/// Appends the one-sided update-and-unlock of access `index` to `batch`.
pub fn queue_write_back_onesided(cx: &TxnCx<'_>, batch: &mut Batch, index: usize) {
    let access = &cx.accesses[index];
    let table = cx.table(access.table);
    let new_seq = access.seq + 1;
    debug_assert_eq!(
        lock_addr(table, access.slot),
        table.seq_addr(access.slot) + 1
    );
    batch.write_word(access.node, seq_end_addr(table, access.slot), new_seq);
    batch.write(
        access.node,
        table.record_addr(access.slot),
        cx.record(index),
    );
    batch.write(access.node, table.seq_addr(access.slot), &[new_seq, 0]);
}

/// Appends the write-back entry of access `index` — `[table, slot, new_seq,
/// record…]`, its next version — to the payload of a commit call (read
/// back by [`write_back_entries`](super::write_back_entries)).
pub fn push_write_back(cx: &TxnCx<'_>, payload: &mut Vec<u64>, index: usize) {
    let access = &cx.accesses[index];
    payload.extend_from_slice(&[access.table as u64, access.slot, access.seq + 1]);
    payload.extend_from_slice(cx.record(index));
}

/// Commit stage of the lock-word protocols: every locked write-set record is
/// written back and unlocked (commit primitive); every other locked record is
/// unlocked (release primitive). Posted with passive ACK.
pub fn post_commit(cx: &mut TxnCx<'_>) {
    post_unlock(cx, true, |_, _| false);
}

/// Release stage: unlock every record the attempt holds locked (abort path),
/// with passive ACK.
pub fn post_release(cx: &mut TxnCx<'_>) {
    post_unlock(cx, false, |_, _| false);
}

/// One passive round that frees every lock the attempt holds, writing back
/// the write set first when `install` (commit) — per node, one-sided verbs,
/// or at most one `WRITE_BACK`, one `UNLOCK` and one
/// `UNLOCK_SHARED` call. Written records use the commit primitive,
/// the others the release primitive. A record for which `shared` holds is
/// held in a shared lock word (`lock2pl`, E/S mode): its unlock is a
/// FETCH_AND_ADD of −1 instead of a store of 0.
pub fn post_unlock(cx: &mut TxnCx<'_>, install: bool, shared: impl Fn(&TxnCx<'_>, usize) -> bool) {
    debug_assert!(
        cx.accesses
            .iter()
            .all(|a| !a.locked || a.slot != crate::txn::NO_SLOT),
        "a locked record's slot is known (RCC §5.2: every RPC lock replies it)"
    );
    debug_assert!(
        !install || cx.accesses.iter().all(|a| !a.write || a.locked),
        "commit with a write-set record not locked"
    );
    cx.collect_nodes(|a| a.locked);
    if cx.nodes.is_empty() {
        return;
    }
    let commit = cx.primitive(Stage::Commit);
    let release = cx.primitive(Stage::Release);
    let mut batch = cx.round();
    for n in 0..cx.nodes.len() {
        let node = cx.nodes[n];
        let mut write_back: Option<Vec<u64>> = None;
        let mut unlock: Option<Vec<u64>> = None;
        let mut unlock_shared: Option<Vec<u64>> = None;
        for index in 0..cx.accesses.len() {
            let access = cx.accesses[index];
            if access.node != node || !access.locked {
                continue;
            }
            let writes = install && access.write;
            let shared = !writes && shared(cx, index);
            let lock = lock_addr(cx.table(access.table), access.slot);
            match (writes, shared, if writes { commit } else { release }) {
                (true, _, Primitive::OneSided) => {
                    queue_write_back_onesided(cx, &mut batch, index);
                }
                (false, false, Primitive::OneSided) => {
                    batch.write_word(node, lock, 0);
                }
                (false, true, Primitive::OneSided) => {
                    batch.faa(node, lock, u64::MAX);
                }
                (true, _, Primitive::Rpc) => {
                    let payload = call_payload(&mut write_back, &mut batch, Some(cx.owner));
                    push_write_back(cx, payload, index);
                }
                (false, false, Primitive::Rpc) => {
                    let payload = call_payload(&mut unlock, &mut batch, Some(cx.owner));
                    payload.extend_from_slice(&[access.table as u64, access.slot]);
                }
                (false, true, Primitive::Rpc) => {
                    let payload = call_payload(&mut unlock_shared, &mut batch, None);
                    payload.extend_from_slice(&[access.table as u64, access.slot]);
                }
            }
        }
        for (payload, kind) in [
            (write_back, kind::WRITE_BACK),
            (unlock, kind::UNLOCK),
            (unlock_shared, kind::UNLOCK_SHARED),
        ] {
            if let Some(payload) = payload {
                batch.call(node, kind, payload, true);
            }
        }
    }
    post_unlocked(cx, batch);
}

/// The locked records' part of a passive commit or release round, queued
/// on `batch` (the round of `cx`, which the caller may have started): per
/// node in `cx.nodes`, `onesided` queues each locked access's verbs, or
/// `rpc` appends its words to the node's one call of `kind`, which starts
/// with `head`. Then every lock counts as released and the round is posted
/// with passive ACK.
pub fn post_locked(
    cx: &mut TxnCx<'_>,
    mut batch: RefMut<'_, Batch>,
    (primitive, kind, head): (Primitive, u16, Option<u64>),
    onesided: impl Fn(&TxnCx<'_>, &mut Batch, usize),
    rpc: impl Fn(&TxnCx<'_>, &mut Vec<u64>, usize),
) {
    for &node in &cx.nodes {
        let mut call: Option<Vec<u64>> = None;
        for (index, access) in cx.accesses.iter().enumerate() {
            if access.node != node || !access.locked {
                continue;
            }
            match primitive {
                Primitive::OneSided => onesided(cx, &mut batch, index),
                Primitive::Rpc => rpc(cx, call_payload(&mut call, &mut batch, head), index),
            }
        }
        if let Some(payload) = call {
            batch.call(node, kind, payload, true);
        }
    }
    post_unlocked(cx, batch);
}

/// Posts `batch`, the round of `cx` that frees every lock the attempt
/// holds, with passive ACK; from here on no lock counts as held.
fn post_unlocked(cx: &mut TxnCx<'_>, batch: RefMut<'_, Batch>) {
    drop(batch);
    for access in cx.accesses.iter_mut() {
        access.locked = false;
    }
    cx.submit_passive();
}
