//! Basic T/O's commit-time stages (RCBench §6.2.2, Alg. 6–7): `lock`
//! prewrites every written record (CAS its lock word to the timestamp and
//! check the order), the cascading variant installs its writes early and
//! waits for the writers it read from, and `commit` / `release` install or
//! restore the records and unlock them in one passive round — each in
//! one-sided and RPC form on the same lock words.
//!
//! Invariant: a record is installed only under its lock, and every lock an
//! attempt took is freed by its commit or release.

use super::serve::outcome_of;
use super::*;
use crate::fabric::Batch;
use crate::txn::Access;

impl Timestamp {
    /// The records the lock stage takes: the written ones not locked when
    /// fetched, or every written one in the cascading variant, which backs
    /// them all up. Collects their nodes in `cx.nodes`; `None` if there are
    /// none.
    fn collect_lock_set(&self, cx: &mut TxnCx<'_>) -> Option<impl Fn(&Access) -> bool + Copy> {
        let fetch = self.cascading;
        let pick = move |a: &Access| a.write && (fetch || !a.locked);
        cx.collect_nodes(pick);
        (!cx.nodes.is_empty()).then_some(pick)
    }

    /// Lock stage, first round: lock the records that were read first and
    /// written later (the others were locked when fetched) and check they
    /// are still writable by `ts`. The cascading variant also fetches every
    /// write-set record's committed `wts` and record into its backup (see
    /// [`Backups`]), taking no lock it already holds.
    pub(super) async fn lock_onesided(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        let Some(pick) = self.collect_lock_set(cx) else {
            return Ok(());
        };
        let fetch = self.cascading;
        let ts = cx.timestamp;
        kit::queue_per_node(cx, pick, |cx, batch, access| {
            let (node, table) = (access.node, cx.table(access.table));
            if !access.locked {
                batch.cas(node, lock_addr(table, access.slot), 0, ts);
            }
            if fetch {
                batch.read(node, table.tuple_addr(access.slot), table.tuple_words)
            } else {
                batch.read(node, table.seq_addr(access.slot), 4)
            }
        });
        cx.submit().await?;
        let mut outcome = Ok(());
        for q in 0..cx.queued.len() {
            let (index, read) = cx.queued[q];
            let batch = cx.batch();
            // The CAS, if any, is the verb before the READ.
            if !cx.accesses[index].locked && batch.result_word(VerbId(read - 1)) != 0 {
                outcome = outcome.and(Err(AbortReason::LockConflict));
                continue;
            }
            cx.accesses[index].locked = true;
            // Read under the lock.
            let words = batch.result(VerbId(read));
            let (seq, wts, rts) = if fetch {
                (
                    words[SEQ_WORD as usize],
                    words[(HEADER_WORD + WTS_WORD) as usize],
                    words[(HEADER_WORD + RTS_WORD) as usize],
                )
            } else {
                (words[0], words[2], words[3])
            };
            if !writable(ts, cx.accesses[index].seq, seq, wts, rts) {
                outcome = outcome.and(Err(AbortReason::TimestampOrder));
            } else if fetch {
                let table = cx.table(cx.accesses[index].table);
                let record = table.record_offset() as usize;
                let at = Backups::of(cx, index);
                cx.data[at] = wts;
                let words = batch.result(VerbId(read));
                cx.data[at + 1..at + 1 + table.record_words as usize]
                    .copy_from_slice(&words[record..record + table.record_words as usize]);
            }
        }
        outcome
    }

    pub(super) async fn lock_rpc(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        let Some(pick) = self.collect_lock_set(cx) else {
            return Ok(());
        };
        let fetch = self.cascading;
        let kind = if fetch {
            kind::TS_LOCK_FETCH
        } else {
            kind::TS_LOCK
        };
        // Where each entry's reply starts: one word per entry, or
        // `[status, wts, record…]` when fetching.
        let head = [cx.timestamp];
        kit::queue_calls_per_node(cx, kind, &head, pick, |cx, a, payload| {
            payload.extend_from_slice(&[a.table as u64, a.slot, a.seq, a.locked as u64]);
            if fetch {
                2 + cx.table(a.table).record_words
            } else {
                1
            }
        });
        cx.submit().await?;
        let mut outcome = Ok(());
        for q in 0..cx.queued.len() {
            let (index, at) = cx.queued[q];
            let batch = cx.batch();
            let reply = kit::reply_entry(&batch, at);
            match reply[0] {
                lock_reply::OK => {
                    cx.accesses[index].locked = true;
                    if fetch {
                        let words = cx.table(cx.accesses[index].table).record_words as usize;
                        let to = Backups::of(cx, index);
                        cx.data[to..to + 1 + words].copy_from_slice(&reply[1..2 + words]);
                    }
                }
                lock_reply::STALE => {
                    cx.accesses[index].locked = true;
                    outcome = outcome.and(Err(AbortReason::TimestampOrder));
                }
                _ => outcome = outcome.and(Err(AbortReason::LockConflict)),
            }
        }
        outcome
    }

    /// Cascading variant, after the write set is locked and writable: marks
    /// this transaction running in its metadata word, then installs every
    /// write (record, `wts = ts`, `seq + 1`, lock flagged installed) where
    /// readers younger than `ts` may read it. Awaited, so the commit's or
    /// release's unlock follows it whatever primitives the stages use.
    pub(super) async fn install(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        let ts = cx.timestamp;
        let node = cx.worker.node;
        let meta = cx.txn_meta_addr();
        cx.round().write_word(node, meta, ts | META_RUNNING);
        cx.submit().await?;
        cx.collect_nodes(|a| a.write);
        let primitive = cx.primitive(Stage::Lock);
        {
            let mut batch = cx.round();
            for &node in &cx.nodes {
                let mut payload: Option<Vec<u64>> = None;
                for (index, access) in cx.accesses.iter().enumerate() {
                    if access.node != node || !access.write {
                        continue;
                    }
                    debug_assert!(access.locked);
                    let table = cx.table(access.table);
                    let new_seq = access.seq + 1;
                    match primitive {
                        Primitive::OneSided => queue_install_onesided(
                            &mut batch,
                            table,
                            node,
                            access.slot,
                            new_seq,
                            cx.record(index),
                            ts,
                            ts | LOCK_INSTALLED,
                        ),
                        Primitive::Rpc => {
                            let payload = kit::call_payload(&mut payload, &mut batch, Some(ts));
                            payload.extend_from_slice(&[
                                access.table as u64,
                                access.slot,
                                new_seq,
                                ts,
                            ]);
                            payload.extend_from_slice(cx.record(index));
                        }
                    }
                }
                if let Some(payload) = payload {
                    batch.call(node, kind::TS_INSTALL, payload, false);
                }
            }
        }
        let at = Backups::marker(cx);
        cx.data[at] = 1;
        cx.owner = ts | LOCK_INSTALLED;
        cx.submit().await
    }

    /// Cascading variant: waits until every writer whose uncommitted write
    /// this attempt read has finished; fails if one aborted (or its outcome
    /// is no longer known: its coroutine installed again since).
    pub(super) async fn await_writers(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        let mut pending = std::mem::take(&mut *self.deps(cx));
        pending.sort_unstable();
        pending.dedup();
        let primitive = cx.primitive(Stage::Lock);
        let mut outcome = Ok(());
        for _ in 0..DEP_POLLS {
            if pending.is_empty() {
                break;
            }
            {
                let mut batch = cx.round();
                cx.queued.clear();
                for (i, &writer) in pending.iter().enumerate() {
                    let (node, worker, co) = self.clock.coroutine_of(writer);
                    let addr = cx.layout.txn_meta.addr(worker, co);
                    let id = match primitive {
                        Primitive::OneSided => batch.read(node, addr, 2).0,
                        Primitive::Rpc => {
                            let mut payload = batch.payload();
                            payload.extend_from_slice(&[addr, writer]);
                            batch.call(node, kind::TS_OUTCOME, payload, false).0 as u32
                        }
                    };
                    cx.queued.push((i, id));
                }
            }
            cx.submit().await?;
            let mut still = 0;
            {
                let batch = cx.batch();
                for &(i, id) in &cx.queued {
                    let words = match primitive {
                        Primitive::OneSided => batch.result(VerbId(id)),
                        Primitive::Rpc => batch.reply(CallId(id as u16)),
                    };
                    let writer = pending[i];
                    match outcome_of(writer, words[0], words[1]) {
                        META_COMMITTED => {}
                        META_RUNNING => {
                            pending[still] = writer;
                            still += 1;
                        }
                        _ => outcome = Err(AbortReason::CascadingAbort),
                    }
                }
            }
            pending.truncate(still);
            if outcome.is_err() {
                break;
            }
            if !pending.is_empty() {
                cx.worker.sleep(cx.co, READ_WAIT_NS).await;
            }
        }
        if !pending.is_empty() {
            outcome = Err(AbortReason::CascadingAbort);
        }
        pending.clear();
        // Hand the vector back for its capacity.
        *self.deps(cx) = pending;
        outcome
    }

    /// Commit: installs every write-set record with `wts = ts` and unlocks
    /// it, in one passive round. Cascading variant: the writes are
    /// installed already; mark the transaction committed, then unlock.
    pub(super) fn post_commit(&self, cx: &mut TxnCx<'_>) {
        debug_assert!(
            cx.accesses.iter().all(|a| a.write == a.locked),
            "T/O commits holding exactly its write set's locks"
        );
        let installed = self.cascading && cx.accesses.iter().any(|a| a.write);
        cx.collect_nodes(|a| a.locked);
        if cx.nodes.is_empty() {
            return;
        }
        let ts = cx.timestamp;
        let form = if installed {
            (cx.primitive(Stage::Commit), kind::UNLOCK, Some(cx.owner))
        } else {
            (cx.primitive(Stage::Commit), kind::TS_COMMIT, Some(ts))
        };
        let mut batch = cx.round();
        if installed {
            batch.write_word(cx.worker.node, cx.txn_meta_addr(), ts | META_COMMITTED);
        }
        let onesided = |cx: &TxnCx<'_>, batch: &mut Batch, index: usize| {
            let access = cx.accesses[index];
            let (node, table) = (access.node, cx.table(access.table));
            if installed {
                batch.write_word(node, lock_addr(table, access.slot), 0);
            } else {
                let (slot, record) = (access.slot, cx.record(index));
                queue_install_onesided(batch, table, node, slot, access.seq + 1, record, ts, 0);
            }
        };
        kit::post_locked(cx, batch, form, onesided, |cx, payload, index| {
            if installed {
                let access = cx.accesses[index];
                payload.extend_from_slice(&[access.table as u64, access.slot]);
            } else {
                kit::push_write_back(cx, payload, index);
            }
        });
    }

    /// Cascading variant's release once the writes are installed: mark the
    /// transaction aborted (readers of its writes abort in cascade), then
    /// put every record's committed version back and unlock it.
    pub(super) fn post_restore(&self, cx: &mut TxnCx<'_>) {
        cx.collect_nodes(|a| a.locked);
        let form = (
            cx.primitive(Stage::Release),
            kind::TS_INSTALL,
            Some(cx.owner),
        );
        let ts = cx.timestamp;
        let mut batch = cx.round();
        // Both outcome words in one WRITE: see `outcome_of`.
        batch.write(cx.worker.node, cx.txn_meta_addr(), &[ts | META_ABORTED, ts]);
        let onesided = |cx: &TxnCx<'_>, batch: &mut Batch, index: usize| {
            let access = cx.accesses[index];
            let (wts, record) = Backups::version(cx, index);
            let table = cx.table(access.table);
            queue_install_onesided(
                batch,
                table,
                access.node,
                access.slot,
                access.seq,
                record,
                wts,
                0,
            );
        };
        kit::post_locked(cx, batch, form, onesided, |cx, payload, index| {
            let access = cx.accesses[index];
            let (wts, record) = Backups::version(cx, index);
            payload.extend_from_slice(&[access.table as u64, access.slot, access.seq, wts]);
            payload.extend_from_slice(record);
        });
    }
}

/// Queues the one-sided install of a version — WRITE `seq_end`, WRITE
/// record, WRITE `wts`, WRITE `[seq, lock]` — in the store's write-back
/// order (`wts` before `seq`, so a READ that saw the new `seq` saw it).
#[allow(clippy::too_many_arguments)]
pub(super) fn queue_install_onesided(
    batch: &mut Batch,
    table: &TableLayout,
    node: crate::fabric::NodeId,
    slot: u64,
    seq: u64,
    record: &[u64],
    wts: u64,
    lock: u64,
) {
    batch.write_word(node, kit::seq_end_addr(table, slot), seq);
    batch.write(node, table.record_addr(slot), record);
    batch.write_word(node, table.header_addr(slot, WTS_WORD), wts);
    batch.write(node, table.seq_addr(slot), &[seq, lock]);
}
