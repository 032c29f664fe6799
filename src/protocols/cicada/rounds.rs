//! CICADA's commit-time stages (RCBench Alg. 11 lines 13–35): `lock`
//! installs every write as a pending version, `validate` re-finds every
//! read's visible version and raises its `rts` — each in latched one-sided
//! rounds or one RPC per node — and `finish` flips the pending versions to
//! committed or aborted in one passive round.
//!
//! Invariant: a version is installed or checked only while its tuple's
//! latch is held, and every latch taken is freed in the same stage.

use super::*;

/// Sets `cx.queued` to the accesses `pick` selects, in access order, for
/// [`Cicada::latched_rounds`].
fn queue_accesses(cx: &mut TxnCx<'_>, pick: impl Fn(&Access) -> bool) {
    cx.queued.clear();
    for (index, access) in cx.accesses.iter().enumerate() {
        if pick(access) {
            cx.queued.push((index, 0));
        }
    }
}

impl Cicada {
    /// Latches the tuples of the accesses in `cx.queued` (one-sided CAS +
    /// READ per tuple), hands each latched tuple to `decide`, which queues
    /// what to write before the unlatching WRITE, and retries busy latches.
    /// `decide` returns `Err` to fail the stage (it still runs for every
    /// tuple latched in that round, so each gets unlatched).
    pub(super) async fn latched_rounds(
        &self,
        cx: &mut TxnCx<'_>,
        decide: impl Fn(&mut TxnCx<'_>, usize, &[u64]) -> TxnResult<()>,
    ) -> TxnResult<()> {
        let mut tries = 0;
        let mut outcome = Ok(());
        while !cx.queued.is_empty() {
            {
                let mut batch = cx.round();
                for entry in cx.queued.iter_mut() {
                    let access = cx.accesses[entry.0];
                    let table = cx.layout.table(access.table);
                    let cas = batch.cas(
                        access.node,
                        table.header_addr(access.slot, LATCH),
                        0,
                        cx.owner,
                    );
                    batch.read(
                        access.node,
                        table.tuple_addr(access.slot),
                        table.tuple_words,
                    );
                    entry.1 = cas.0;
                }
            }
            cx.submit().await?;
            // Decisions go to `scratch` as [index, len, words…] records, so
            // that the next round can be built after the results are read.
            cx.scratch.clear();
            {
                let batch = cx.batch();
                for q in 0..cx.queued.len() {
                    let (index, cas) = cx.queued[q];
                    if batch.result_word(VerbId(cas)) != 0 {
                        continue;
                    }
                    cx.scratch.extend_from_slice(&[index as u64, 0]);
                    let mark = cx.scratch.len();
                    let verdict = decide(cx, index, batch.result(VerbId(cas + 1)));
                    let len = cx.scratch.len() - mark;
                    cx.scratch[mark - 1] = len as u64;
                    outcome = outcome.and(verdict);
                }
            }
            {
                let mut batch = cx.round();
                let mut at = 0;
                while at < cx.scratch.len() {
                    let index = cx.scratch[at] as usize;
                    let len = cx.scratch[at + 1] as usize;
                    let access = cx.accesses[index];
                    let table = cx.table(access.table);
                    let words = &cx.scratch[at + 2..at + 2 + len];
                    if outcome.is_ok() {
                        self.queue_effect(cx, &mut batch, index, words);
                    }
                    batch.write_word(access.node, table.header_addr(access.slot, LATCH), 0);
                    at += 2 + len;
                }
            }
            // Installs of a round are all or none: only now are they made.
            let mut installed = false;
            let mut at = 0;
            while at < cx.scratch.len() {
                let index = cx.scratch[at] as usize;
                let len = cx.scratch[at + 1] as usize;
                if outcome.is_ok() && len > 0 && cx.scratch[at + 2] == 0 {
                    cx.accesses[index].meta = cx.scratch[at + 3] + 1;
                    installed = true;
                }
                cx.queued.retain(|&(i, _)| i != index);
                at += 2 + len;
            }
            // A status flip by RPC (`CICADA_FINISH`) landing before these
            // install WRITEs would leave the version PENDING for good.
            if installed {
                kit::submit_before_commit(cx).await?;
            } else {
                cx.submit_passive();
            }
            outcome?;
            if !cx.queued.is_empty() {
                tries += 1;
                if tries >= TRIES {
                    return Err(AbortReason::LockConflict);
                }
                cx.worker.yield_now().await;
            }
        }
        outcome
    }

    /// Queues the writes a latched decision recorded: `[kind, …]` with kind
    /// 0 = install `[0, target, base_seq, base_rts, materialize, base data…]`,
    /// 1 = raise an rts `[1, offset, value]`.
    pub(super) fn queue_effect(
        &self,
        cx: &TxnCx<'_>,
        batch: &mut crate::fabric::Batch,
        index: usize,
        words: &[u64],
    ) {
        let access = cx.accesses[index];
        let table = cx.table(access.table);
        let shape = Shape::of(table);
        let tuple = table.tuple_addr(access.slot);
        let node = access.node;
        match words[0] {
            0 => {
                let target = words[1] as u32;
                if words[4] != 0 {
                    // Copy the loaded version into slot 0 (wts stays 0):
                    // data, then rts, then sst.
                    let slot0 = tuple + shape.slot(0) as u64;
                    batch.write(node, slot0 + S_DATA as u64, &words[5..5 + shape.record]);
                    batch.write(
                        node,
                        slot0 + S_RTS as u64,
                        &[words[3], sst(words[2], COMMITTED)],
                    );
                }
                let bts = cx.timestamp;
                let slot = tuple + shape.slot(target) as u64;
                batch.write_word(node, tuple + shape.wts_end(target) as u64, bts);
                batch.write(node, slot + S_DATA as u64, cx.record(index));
                batch.write(
                    node,
                    slot + S_RTS as u64,
                    &[bts, sst(access.seq + 1, PENDING)],
                );
                batch.write_word(node, slot + S_WTS as u64, bts);
            }
            _ => {
                if words[2] != 0 {
                    batch.write_word(node, tuple + words[1], words[2]);
                }
            }
        }
    }

    /// Status flip of every installed version (and, on commit, the record
    /// mirror first), passive.
    pub(super) fn finish(&self, cx: &mut TxnCx<'_>, commit: bool) {
        cx.collect_nodes(|a| a.meta != 0);
        if cx.nodes.is_empty() {
            return;
        }
        let primitive = cx.primitive(if commit {
            Stage::Commit
        } else {
            Stage::Release
        });
        let mut batch = cx.round();
        for &node in &cx.nodes {
            let mut payload = None;
            for (index, access) in cx.accesses.iter().enumerate() {
                if access.node != node || access.meta == 0 {
                    continue;
                }
                let table = cx.table(access.table);
                let shape = Shape::of(table);
                let target = (access.meta - 1) as u32;
                let new_seq = access.seq + 1;
                match primitive {
                    Primitive::OneSided => {
                        let tuple = table.tuple_addr(access.slot);
                        if commit {
                            batch.write_word(node, kit::seq_end_addr(table, access.slot), new_seq);
                            batch.write(node, table.record_addr(access.slot), cx.record(index));
                            batch.write_word(node, table.seq_addr(access.slot), new_seq);
                        }
                        let status = if commit { COMMITTED } else { ABORTED };
                        batch.write_word(
                            node,
                            tuple + (shape.slot(target) + S_SST) as u64,
                            sst(new_seq, status),
                        );
                    }
                    Primitive::Rpc => {
                        let payload = payload.get_or_insert_with(|| {
                            let mut payload = batch.payload();
                            payload.push(commit as u64);
                            payload
                        });
                        payload.extend_from_slice(&[
                            access.table as u64,
                            access.slot,
                            target as u64,
                            new_seq,
                        ]);
                        if commit {
                            payload.extend_from_slice(cx.record(index));
                        }
                    }
                }
            }
            if let Some(payload) = payload {
                batch.call(node, kind::CICADA_FINISH, payload, true);
            }
        }
        drop(batch);
        cx.submit_passive();
        for access in cx.accesses.iter_mut() {
            access.meta = 0;
        }
    }

    /// The one-sided `lock` stage: latch every written tuple, check that its
    /// version may still be installed and note where (RCBench Alg. 11).
    pub(super) async fn install_onesided(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        queue_accesses(cx, |a| a.write);
        self.latched_rounds(cx, |cx, index, words| {
            let access = cx.accesses[index];
            let table = cx.table(access.table);
            let tuple = tuple_in(table, words);
            let target = check_install(&tuple, cx.timestamp, access.seq)?;
            let materialize = tuple.all_empty();
            let base = tuple.base();
            cx.scratch.extend_from_slice(&[
                0,
                target as u64,
                base.seq,
                base.rts,
                materialize as u64,
            ]);
            if materialize {
                let record = table.record_offset() as usize;
                cx.scratch
                    .extend_from_slice(&words[record..record + table.record_words as usize]);
            }
            Ok(())
        })
        .await
    }

    pub(super) async fn install_rpc(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        cx.collect_nodes(|a| a.write);
        {
            let mut batch = cx.round();
            for &node in &cx.nodes {
                let mut payload = batch.payload();
                payload.extend_from_slice(&[cx.owner, cx.timestamp]);
                for (index, access) in cx.accesses.iter().enumerate() {
                    if access.write && access.node == node {
                        payload.extend_from_slice(&[access.table as u64, access.slot, access.seq]);
                        payload.extend_from_slice(cx.record(index));
                    }
                }
                batch.call(node, kind::CICADA_INSTALL, payload, false);
            }
        }
        cx.submit().await?;
        let batch = cx.batch();
        let mut outcome = Ok(());
        for n in 0..cx.nodes.len() {
            let node = cx.nodes[n];
            let reply = batch.reply(CallId(n as u16));
            if reply[0] != status::OK {
                outcome = outcome.and(Err(match reply[0] {
                    status::PENDING => AbortReason::VersionPending,
                    status::UNAVAILABLE => AbortReason::VersionUnavailable,
                    _ => AbortReason::ValidationFailed,
                }));
                continue;
            }
            let mut position = 1;
            for access in cx.accesses.iter_mut() {
                if access.write && access.node == node {
                    access.meta = reply[position] + 1;
                    position += 1;
                }
            }
        }
        outcome
    }

    /// The one-sided `validate` stage: latch every read tuple, check that the
    /// version read is still the one visible at the timestamp and note the
    /// `rts` raise (RCBench Alg. 11).
    pub(super) async fn validate_onesided(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        queue_accesses(cx, |a| !a.write);
        self.latched_rounds(cx, |cx, index, words| {
            let access = cx.accesses[index];
            let table = cx.table(access.table);
            let tuple = tuple_in(table, words);
            let version = check_read(&tuple, cx.timestamp, access.seq)?;
            let raise = if version.rts < cx.timestamp {
                cx.timestamp
            } else {
                0
            };
            cx.scratch
                .extend_from_slice(&[1, version.rts_at as u64, raise]);
            Ok(())
        })
        .await
    }

    pub(super) async fn validate_rpc(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        let read_only = |a: &Access| !a.write;
        cx.collect_nodes(read_only);
        if cx.nodes.is_empty() {
            return Ok(());
        }
        let head = [cx.owner, cx.timestamp];
        let valid = kit::call_nodes_all_ok(
            cx,
            kind::CICADA_VALIDATE,
            &head,
            read_only,
            |_, a, words| {
                words.extend_from_slice(&[a.table as u64, a.slot, a.seq]);
            },
        );
        if !valid.await? {
            return Err(AbortReason::ValidationFailed);
        }
        Ok(())
    }
}
