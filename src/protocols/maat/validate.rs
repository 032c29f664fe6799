//! MAAT's validation (RCBench Alg. 10): learn the state and interval of
//! every transaction this one must be ordered against, push the running
//! ones' intervals past this one's (Eq. 2, with a Dekker handshake against
//! their freeze), order against the frozen ones (Eq. 1), and freeze this
//! interval — each step in one-sided and RPC form on the same metadata
//! slot words.
//!
//! Invariant: an interval only shrinks, and once frozen no other
//! transaction changes it.

use super::*;

/// No node: [`queue_unsettled_calls`] puts no own slot first.
const NO_NODE: NodeId = NodeId::MAX;

/// Sets `cx.nodes` to `first` (if any), then every node holding the
/// metadata slot of an entry not yet settled, each once.
fn collect_unsettled_nodes(cx: &mut TxnCx<'_>, first: Option<NodeId>) {
    cx.nodes.clear();
    cx.nodes.extend(first);
    for e in 0..entries(cx) {
        let k = at(e);
        if cx.scratch[k + 1] & DONE == 0 {
            let node = slot_of(cx, cx.scratch[k]).0;
            if !cx.nodes.contains(&node) {
                cx.nodes.push(node);
            }
        }
    }
}

/// Queues one call of `kind` per node in `cx.nodes` with, per entry not
/// yet settled whose slot lives there, what `entry` pushes (given the
/// entry and its slot address); the call to `own_node` starts with
/// `own_slot`. `cx.queued` gets `(entry, call << 16 | its place among the
/// call's entries)`, read back with [`entry_reply`].
fn queue_unsettled_calls(
    cx: &mut TxnCx<'_>,
    kind: u16,
    own_node: NodeId,
    own_slot: u64,
    entry: impl Fn(&TxnCx<'_>, usize, u64, &mut Vec<u64>),
) {
    let mut batch = cx.round();
    for n in 0..cx.nodes.len() {
        let node = cx.nodes[n];
        let mut payload = batch.payload();
        let mut position = 0u32;
        if node == own_node {
            payload.push(own_slot);
            position = 1;
        }
        for e in 0..entries(cx) {
            let k = at(e);
            if cx.scratch[k + 1] & DONE != 0 {
                continue;
            }
            let (at_node, slot) = slot_of(cx, cx.scratch[k]);
            if at_node == node {
                entry(cx, e, slot, &mut payload);
                cx.queued.push((e, ((n as u32) << 16) | position));
                position += 1;
            }
        }
        batch.call(node, kind, payload, false);
    }
}

/// Takes in the metadata slot of entry `e` as fetched (`words`): its state
/// and bounds, into the scratch entry; `ValidationFailed` if the slot was
/// reused by a later transaction (its `id` or `id_end` changed).
fn take_slot(scratch: &mut [u64], e: usize, words: &[u64]) -> TxnResult<()> {
    let k = at(e);
    if words[ID as usize] != scratch[k] || words[ID_END as usize] != scratch[k] {
        return Err(AbortReason::ValidationFailed);
    }
    scratch[k + 2] = words[STATE as usize];
    scratch[k + 3] = words[LOWER as usize];
    scratch[k + 4] = words[UPPER as usize];
    Ok(())
}

/// The `words` reply words of the entry at `place` (from
/// [`queue_unsettled_calls`]).
fn entry_reply(batch: &Batch, place: u32, words: usize) -> &[u64] {
    let reply = batch.reply(CallId((place >> 16) as u16));
    let start = (place & 0xffff) as usize * words;
    &reply[start..start + words]
}

impl Maat {
    /// Reads the metadata slot of every entry not yet settled (and this
    /// transaction's own bounds) into the scratch entries; `Err` if a slot
    /// was reused.
    pub(super) async fn fetch(&self, cx: &mut TxnCx<'_>) -> TxnResult<(u64, u64)> {
        cx.queued.clear();
        kit::in_form!(cx, Stage::Validate,
            onesided: self.fetch_onesided(cx),
            rpc: self.fetch_rpc(cx))
    }

    /// [`Self::fetch`] in its one-sided form.
    pub(super) async fn fetch_onesided(&self, cx: &mut TxnCx<'_>) -> TxnResult<(u64, u64)> {
        let (own_node, own_slot) = slot_of(cx, cx.txn_id);
        let own_read = {
            let mut batch = cx.round();
            for e in 0..entries(cx) {
                let k = at(e);
                if cx.scratch[k + 1] & DONE != 0 {
                    continue;
                }
                let (node, slot) = slot_of(cx, cx.scratch[k]);
                let read = batch.read(node, slot, SLOT_WORDS as u32);
                cx.queued.push((e, read.0));
            }
            batch.read(own_node, own_slot + LOWER, 2)
        };
        cx.submit().await?;
        let batch = cx.batch();
        let bounds = batch.result(own_read);
        let own = (bounds[0], bounds[1]);
        for &(e, read) in &cx.queued {
            let words = batch.result(VerbId(read));
            take_slot(&mut cx.scratch, e, words)?;
        }
        Ok(own)
    }

    /// [`Self::fetch`] in its RPC form.
    pub(super) async fn fetch_rpc(&self, cx: &mut TxnCx<'_>) -> TxnResult<(u64, u64)> {
        let (own_node, own_slot) = slot_of(cx, cx.txn_id);
        collect_unsettled_nodes(cx, Some(own_node));
        // This transaction's own slot leads its node's call.
        queue_unsettled_calls(
            cx,
            kind::MAAT_META_READ,
            own_node,
            own_slot,
            |_, _, slot, payload| {
                payload.push(slot);
            },
        );
        cx.submit().await?;
        let batch = cx.batch();
        let mine = batch.reply(CallId(0));
        let own = (mine[LOWER as usize], mine[UPPER as usize]);
        for &(e, place) in &cx.queued {
            let words = entry_reply(&batch, place, SLOT_WORDS as usize);
            take_slot(&mut cx.scratch, e, words)?;
        }
        Ok(own)
    }

    /// Pushes the interval of every running entry past this transaction's
    /// (Eq. 2), then reads its state back (the Dekker handshake). Returns
    /// whether an entry still needs another round.
    pub(super) async fn push(&self, cx: &mut TxnCx<'_>, lb: u64, ub: u64) -> TxnResult<bool> {
        cx.queued.clear();
        kit::in_form!(cx, Stage::Validate,
            onesided: self.push_onesided(cx, lb, ub),
            rpc: self.push_rpc(cx, lb, ub))
    }

    /// [`Self::push`] in its one-sided form.
    async fn push_onesided(&self, cx: &mut TxnCx<'_>, lb: u64, ub: u64) -> TxnResult<bool> {
        let (want_lb, want_ub) = (ub + 1, lb - 1);
        {
            let mut batch = cx.round();
            for e in 0..entries(cx) {
                let k = at(e);
                let flags = cx.scratch[k + 1];
                if flags & DONE != 0 {
                    continue;
                }
                let (node, slot) = slot_of(cx, cx.scratch[k]);
                let (seen_lb, seen_ub) = (cx.scratch[k + 3], cx.scratch[k + 4]);
                // Verbs, in order: [CAS ub], [CAS lb], FAA state,
                // READ id_end. The first verb's id marks the group.
                let mut first = None;
                if flags & BEFORE != 0 && seen_ub > want_ub {
                    first.get_or_insert(batch.cas(node, slot + UPPER, seen_ub, want_ub).0);
                }
                if flags & AFTER != 0 && seen_lb < want_lb {
                    let id = batch.cas(node, slot + LOWER, seen_lb, want_lb).0;
                    first.get_or_insert(id);
                }
                let faa = batch.faa(node, slot + STATE, 0).0;
                batch.read(node, slot + ID_END, 1);
                cx.queued.push((e, first.unwrap_or(faa)));
            }
        }
        cx.submit().await?;
        let batch = cx.batch();
        let mut again = false;
        for &(e, first) in &cx.queued {
            let k = at(e);
            let flags = cx.scratch[k + 1];
            let (seen_lb, seen_ub) = (cx.scratch[k + 3], cx.scratch[k + 4]);
            let mut verb = first;
            let mut settled = true;
            if flags & BEFORE != 0 && seen_ub > want_ub {
                let previous = batch.result_word(VerbId(verb));
                verb += 1;
                if previous != seen_ub {
                    cx.scratch[k + 4] = previous;
                    settled &= previous <= want_ub;
                }
            }
            if flags & AFTER != 0 && seen_lb < want_lb {
                let previous = batch.result_word(VerbId(verb));
                verb += 1;
                if previous != seen_lb {
                    cx.scratch[k + 3] = previous;
                    settled &= previous >= want_lb;
                }
            }
            let state = batch.result_word(VerbId(verb));
            let id_end = batch.result_word(VerbId(verb + 1));
            if id_end != cx.scratch[k] {
                return Err(AbortReason::ValidationFailed);
            }
            cx.scratch[k + 2] = state;
            if state == RUNNING && settled {
                cx.scratch[k + 1] |= DONE;
            } else if state == RUNNING || state == FREEZING {
                again = true;
            }
            // ABORTED / COMMITTED: the caller settles it.
        }
        Ok(again)
    }

    /// [`Self::push`] in its RPC form.
    async fn push_rpc(&self, cx: &mut TxnCx<'_>, lb: u64, ub: u64) -> TxnResult<bool> {
        let (want_lb, want_ub) = (ub + 1, lb - 1);
        collect_unsettled_nodes(cx, None);
        queue_unsettled_calls(cx, kind::MAAT_PUSH, NO_NODE, 0, |cx, e, slot, payload| {
            let flags = cx.scratch[at(e) + 1];
            let ub_goal = if flags & BEFORE != 0 {
                want_ub
            } else {
                u64::MAX
            };
            let lb_goal = if flags & AFTER != 0 { want_lb } else { 0 };
            payload.extend_from_slice(&[slot, ub_goal, lb_goal]);
        });
        cx.submit().await?;
        let batch = cx.batch();
        let mut again = false;
        for &(e, place) in &cx.queued {
            let reply = entry_reply(&batch, place, 2);
            let (state, id_end) = (reply[0], reply[1]);
            let k = at(e);
            if id_end != cx.scratch[k] {
                return Err(AbortReason::ValidationFailed);
            }
            cx.scratch[k + 2] = state;
            if state == RUNNING {
                cx.scratch[k + 1] |= DONE;
            } else if state == FREEZING {
                again = true;
            }
        }
        Ok(again)
    }

    /// Settles every entry whose verdict is known (Eq. 1 for committed
    /// ones); returns whether one is still FREEZING.
    pub(super) fn settle(cx: &mut TxnCx<'_>, lb: &mut u64, ub: &mut u64) -> bool {
        let mut freezing = false;
        for e in 0..entries(cx) {
            let k = at(e);
            let flags = cx.scratch[k + 1];
            if flags & DONE != 0 {
                continue;
            }
            let state = cx.scratch[k + 2];
            if state == ABORTED {
                cx.scratch[k + 1] |= DONE;
            } else if let Some(ts) = committed_ts(state) {
                order_against_committed(flags, ts, lb, ub);
                cx.scratch[k + 1] |= DONE;
            } else if state == FREEZING {
                freezing = true;
            }
        }
        freezing
    }

    /// Freezes this transaction's interval: `Some(ts)` if it commits.
    pub(super) async fn freeze(&self, cx: &mut TxnCx<'_>, lb: u64, ub: u64) -> Option<u64> {
        kit::in_form!(cx, Stage::Validate,
            onesided: self.freeze_onesided(cx, lb, ub),
            rpc: self.freeze_rpc(cx, lb, ub))
    }

    /// [`Self::freeze`] in its one-sided form.
    async fn freeze_onesided(&self, cx: &mut TxnCx<'_>, lb: u64, ub: u64) -> Option<u64> {
        let (node, slot) = slot_of(cx, cx.txn_id);
        let cas = {
            let mut batch = cx.round();
            let cas = batch.cas(node, slot + STATE, RUNNING, FREEZING);
            batch.faa(node, slot + LOWER, 0);
            batch.faa(node, slot + UPPER, 0);
            cas
        };
        cx.submit().await.ok()?;
        let verdict = {
            let batch = cx.batch();
            debug_assert_eq!(batch.result_word(cas), RUNNING, "only the owner freezes");
            let lb_now = batch.result_word(VerbId(cas.0 + 1));
            let ub_now = batch.result_word(VerbId(cas.0 + 2));
            let ts = lb.max(lb_now);
            (ts <= ub.min(ub_now)).then_some(ts)
        };
        let state = verdict.map_or(ABORTED, committed);
        cx.round().write_word(node, slot + STATE, state);
        cx.submit_passive();
        verdict
    }

    /// [`Self::freeze`] in its RPC form.
    async fn freeze_rpc(&self, cx: &mut TxnCx<'_>, lb: u64, ub: u64) -> Option<u64> {
        let (node, slot) = slot_of(cx, cx.txn_id);
        let call = kit::call_one(cx, node, kind::MAAT_FREEZE, &[slot, lb, ub]);
        cx.submit().await.ok()?;
        let batch = cx.batch();
        let reply = batch.reply(call);
        (reply[0] == status::OK).then_some(reply[1])
    }
}
