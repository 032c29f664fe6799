//! MAAT's commit and release (RCBench Alg. 10, the write phase): leave
//! every reader and writer list the attempt registered in, and on commit
//! install the writes and raise `wts`/`rts` to the commit timestamp; one
//! passive round, one-sided or by RPC.
//!
//! Invariant: a tuple's latch is held only while its lists and version
//! change, and freed in the same round.

use super::*;

impl Maat {
    /// One passive round that leaves every list this attempt registered in;
    /// on commit (`ts`) also installs writes and raises `wts`/`rts`.
    pub(super) async fn finish_onesided(&self, cx: &mut TxnCx<'_>, ts: u64) {
        cx.queued.clear();
        for (index, access) in cx.accesses.iter().enumerate() {
            if access.meta != 0 {
                cx.queued.push((index, 0));
            }
        }
        // Per queued access: the latch value to CAS from — 0, or the owner
        // found holding it when that owner's node has failed (see below).
        // Empty (no allocation) until a failover needs it.
        let mut expected: Vec<u64> = Vec::new();
        while !cx.queued.is_empty() {
            {
                let mut batch = cx.round();
                for (position, entry) in cx.queued.iter_mut().enumerate() {
                    let from = expected.get(position).copied().unwrap_or(0);
                    let access = cx.accesses[entry.0];
                    let table = cx.layout.table(access.table);
                    let words = Words::of(table);
                    let cas = batch.cas(
                        access.node,
                        table.header_addr(access.slot, 0),
                        from,
                        cx.owner,
                    );
                    batch.read(access.node, table.header_addr(access.slot, words.wts()), 2);
                    entry.1 = cas.0;
                }
            }
            if cx.submit().await.is_err() {
                // A peer failed: its entries are gone with it; finish the
                // survivors' (or stop, if the worker gave up on everything).
                let before = cx.queued.len();
                let (worker, accesses) = (cx.worker, &cx.accesses);
                if !expected.is_empty() {
                    let mut keep = cx
                        .queued
                        .iter()
                        .map(|&(index, _)| worker.peer_alive(accesses[index].node));
                    expected.retain(|_| keep.next().unwrap_or(false));
                }
                cx.queued
                    .retain(|&(index, _)| worker.peer_alive(accesses[index].node));
                if cx.queued.len() == before {
                    return;
                }
                continue;
            }
            {
                let batch = cx.batch();
                cx.scratch.clear();
                for (position, &(index, cas)) in cx.queued.iter().enumerate() {
                    let from = expected.get(position).copied().unwrap_or(0);
                    // Latched now, or by a round that failed on another
                    // (dead) node after this CAS took effect here.
                    let previous = batch.result_word(VerbId(cas));
                    if previous == from || previous == cx.owner {
                        let stamps = batch.result(VerbId(cas + 1));
                        cx.scratch
                            .extend_from_slice(&[index as u64, stamps[0], stamps[1]]);
                    } else {
                        // A failover takes over the latch of a coordinator
                        // on a failed node: the recovery that would free it
                        // waits for this committing attempt. Its latching
                        // round and its install round are separate and a
                        // posted round lands whole, so a latch it still
                        // holds covers no write of its own (and MAAT lets
                        // no two writers of one version commit).
                        let dead = previous != 0
                            && cx.worker.cluster_state().is_some_and(|f| {
                                f.is_failed(crate::txn::ids::split_owner(previous).0)
                            });
                        if dead || from != 0 {
                            expected.resize(cx.queued.len(), 0);
                            expected[position] = if dead { previous } else { 0 };
                        }
                    }
                }
            }
            {
                let mut batch = cx.round();
                for latched in cx.scratch.chunks_exact(3) {
                    let index = latched[0] as usize;
                    let access = cx.accesses[index];
                    let table = cx.table(access.table);
                    let words = Words::of(table);
                    let (node, slot) = (access.node, access.slot);
                    for word in words.held(access.meta) {
                        batch.write_word(node, table.header_addr(slot, word), 0);
                    }
                    if access.write {
                        let new_seq = access.seq + 1;
                        batch.write_word(node, kit::seq_end_addr(table, slot), new_seq);
                        batch.write(node, table.record_addr(slot), cx.record(index));
                        batch.write(
                            node,
                            table.header_addr(slot, words.wts()),
                            &[latched[1].max(ts), latched[2].max(ts)],
                        );
                        batch.write(node, table.seq_addr(slot), &[new_seq, 0]);
                    } else {
                        batch.write_word(
                            node,
                            table.header_addr(slot, words.rts()),
                            latched[2].max(ts),
                        );
                        batch.write_word(node, table.header_addr(slot, 0), 0);
                    }
                }
            }
            cx.submit_passive();
            let done = &cx.scratch;
            if !expected.is_empty() {
                let mut keep = cx
                    .queued
                    .iter()
                    .map(|&(index, _)| !done.chunks_exact(3).any(|l| l[0] == index as u64));
                expected.retain(|_| keep.next().unwrap_or(false));
            }
            cx.queued
                .retain(|&(index, _)| !done.chunks_exact(3).any(|l| l[0] == index as u64));
            if !cx.queued.is_empty() {
                cx.worker.yield_now().await;
            }
        }
    }

    pub(super) fn commit_rpc(&self, cx: &mut TxnCx<'_>, ts: u64) {
        cx.collect_nodes(|a| a.meta != 0);
        let mut batch = cx.round();
        for &node in &cx.nodes {
            let mut payload = batch.payload();
            payload.extend_from_slice(&[cx.owner, ts]);
            for (index, access) in cx.accesses.iter().enumerate() {
                if access.node != node || access.meta == 0 {
                    continue;
                }
                payload.extend_from_slice(&[
                    access.table as u64,
                    access.slot,
                    access.meta,
                    if access.write { access.seq + 1 } else { 0 },
                ]);
                if access.write {
                    payload.extend_from_slice(cx.record(index));
                }
            }
            batch.call(node, kind::MAAT_COMMIT, payload, true);
        }
        drop(batch);
        cx.submit_passive();
    }

    /// [`Self::release`] in its one-sided form.
    pub(super) async fn release_onesided(&self, cx: &mut TxnCx<'_>) {
        let (own_node, own_slot) = slot_of(cx, cx.txn_id);
        let mut batch = cx.round();
        batch.write_word(own_node, own_slot + STATE, ABORTED);
        for access in &cx.accesses {
            let table = cx.table(access.table);
            let words = Words::of(table);
            for word in words.held(access.meta) {
                batch.cas(
                    access.node,
                    table.header_addr(access.slot, word),
                    cx.txn_id,
                    0,
                );
            }
        }
    }

    /// [`Self::release`] in its RPC form.
    pub(super) async fn release_rpc(&self, cx: &mut TxnCx<'_>) {
        let (own_node, own_slot) = slot_of(cx, cx.txn_id);
        cx.collect_nodes(|a| a.meta != 0);
        let mut batch = cx.round();
        let mut payload = batch.payload();
        payload.push(own_slot);
        batch.call(own_node, kind::MAAT_ABORT, payload, true);
        for &node in &cx.nodes {
            let mut payload = batch.payload();
            payload.push(cx.txn_id);
            for access in cx.accesses.iter().filter(|a| a.node == node && a.meta != 0) {
                payload.extend_from_slice(&[access.table as u64, access.slot, access.meta]);
            }
            batch.call(node, kind::MAAT_UNREGISTER, payload, true);
        }
    }
}
