//! Rounds of calls: one call per participant node that carries every
//! entry for it, and the reply read back per access.

use crate::fabric::{Batch, CallId, NodeId};
use crate::txn::{AbortReason, Access, TxnCx, TxnResult};

use super::{lock_reply, status};

/// The payload of a per-node call, started with `owner` (if any) on first
/// use.
pub fn call_payload<'p>(
    call: &'p mut Option<Vec<u64>>,
    batch: &mut Batch,
    owner: Option<u64>,
) -> &'p mut Vec<u64> {
    call.get_or_insert_with(|| {
        let mut payload = batch.payload();
        payload.extend(owner);
        payload
    })
}

/// Queues on `cx`'s round one call of `kind` to every node in `cx.nodes`:
/// `head`, then the words `entry` pushes for each access on that
/// node that `pick` selects, in access order. `entry` returns how many
/// words that access's part of the reply has; `cx.queued` gets `(access
/// index, place)` per entry, for [`reply_entry`].
pub fn queue_calls_per_node(
    cx: &mut TxnCx<'_>,
    kind: u16,
    head: &[u64],
    pick: impl Fn(&Access) -> bool,
    entry: impl Fn(&TxnCx<'_>, &Access, &mut Vec<u64>) -> u32,
) {
    let mut batch = cx.round();
    cx.queued.clear();
    for n in 0..cx.nodes.len() {
        let node = cx.nodes[n];
        let mut payload = batch.payload();
        payload.extend_from_slice(head);
        let mut position = 0u32;
        for index in 0..cx.accesses.len() {
            let access = cx.accesses[index];
            if pick(&access) && access.node == node {
                let reply_words = entry(cx, &access, &mut payload);
                cx.queued.push((index, ((n as u32) << 16) | position));
                position += reply_words;
            }
        }
        batch.call(node, kind, payload, false);
    }
}

/// The reply words of the entry at `place` (from [`queue_calls_per_node`])
/// onward.
pub fn reply_entry(batch: &Batch, place: u32) -> &[u64] {
    &batch.reply(CallId((place >> 16) as u16))[(place & 0xffff) as usize..]
}

/// One round of calls of `kind` to every node in `cx.nodes`, queued as
/// [`queue_calls_per_node`] queues them, awaited: whether every node's
/// reply starts with `status::OK` — the verdict of a validation or a
/// renewal whose handler checks every entry it was sent.
pub async fn call_nodes_all_ok(
    cx: &mut TxnCx<'_>,
    kind: u16,
    head: &[u64],
    pick: impl Fn(&Access) -> bool,
    entry: impl Fn(&TxnCx<'_>, &Access, &mut Vec<u64>),
) -> TxnResult<bool> {
    queue_calls_per_node(cx, kind, head, pick, |cx, access, payload| {
        entry(cx, access, payload);
        0
    });
    cx.submit().await?;
    let batch = cx.batch();
    Ok((0..cx.nodes.len()).all(|n| batch.reply(CallId(n as u16))[0] == status::OK))
}

/// After a round of commit-time lock calls with one [`lock_reply`] word
/// per entry: marks every locked access, and fails with `stale` if one
/// was no longer the version read, else with `LockConflict` if one was
/// held by another.
pub fn lock_outcome(cx: &mut TxnCx<'_>, stale: AbortReason) -> TxnResult<()> {
    let batch = cx.batch();
    let mut outcome = Ok(());
    for &(index, place) in &cx.queued {
        match reply_entry(&batch, place)[0] {
            lock_reply::OK => cx.accesses[index].locked = true,
            lock_reply::STALE => {
                cx.accesses[index].locked = true;
                outcome = outcome.and(Err(stale));
            }
            _ => outcome = outcome.and(Err(AbortReason::LockConflict)),
        }
    }
    outcome
}

/// Queues a single-record RPC whose payload is `words`.
pub fn call_one(cx: &TxnCx<'_>, node: NodeId, kind: u16, words: &[u64]) -> CallId {
    let mut batch = cx.round();
    let mut payload = batch.payload();
    payload.extend_from_slice(words);
    batch.call(node, kind, payload, false)
}
