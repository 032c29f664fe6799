//! SUNDIAL's commit-time stages (RCC §4.5): `lock` write-locks the write
//! set's lease words, `renew` extends every read lease that does not reach
//! the commit timestamp, and `commit` / `release` write back and unlock in
//! one passive round — each in one-sided and RPC form.
//!
//! Invariant: a lease is renewed only if the version read is still the
//! latest and unlocked, and a written record is unlocked only after it is
//! written back.

use super::*;
use crate::fabric::Batch;

impl Sundial {
    /// Locks every unlocked write-set record, in rounds: a CAS that failed
    /// only because readers extended the lease is retried from the word it
    /// returned.
    pub(super) async fn lock_onesided(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        for _ in 0..CAS_ROUNDS {
            cx.collect_nodes(|a| a.write && !a.locked);
            if cx.nodes.is_empty() {
                return Ok(());
            }
            let unlocked_write = |a: &Access| a.write && !a.locked;
            kit::queue_lock_then_read_seq(cx, unlocked_write, 1, |cx, a| {
                let expected = a.meta & RTS_MASK;
                (
                    lease_addr(cx.table(a.table), a.slot),
                    expected,
                    expected | LOCKED,
                )
            });
            cx.submit().await?;
            kit::judge_locks(cx, |access, previous, seq| {
                let expected = access.meta & RTS_MASK;
                if previous == expected {
                    access.locked = true;
                    access.meta = expected;
                    if seq[0] != access.seq {
                        return Err(AbortReason::ValidationFailed);
                    }
                    return Ok(());
                }
                match after_failed_cas(access, previous, seq[0]) {
                    CasOutcome::Locked => Err(AbortReason::LockConflict),
                    CasOutcome::Changed => Err(AbortReason::ValidationFailed),
                    CasOutcome::Extended => Ok(()),
                }
            })?;
        }
        if cx.accesses.iter().any(|a| a.write && !a.locked) {
            return Err(AbortReason::LockConflict);
        }
        Ok(())
    }

    pub(super) async fn lock_rpc(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        cx.collect_nodes(|a| a.write);
        // The reply has [status, lease] per entry, in entry order.
        kit::queue_calls_per_node(
            cx,
            kind::SUNDIAL_LOCK,
            &[],
            |a| a.write,
            |_, a, payload| {
                payload.extend_from_slice(&[a.table as u64, a.slot, a.seq, a.meta]);
                2
            },
        );
        cx.submit().await?;
        let batch = cx.batch();
        let mut outcome = Ok(());
        for &(index, at) in &cx.queued {
            let entry = &kit::reply_entry(&batch, at)[..2];
            let access = &mut cx.accesses[index];
            match entry[0] {
                lock_reply::OK | lock_reply::STALE => {
                    access.locked = true;
                    access.meta = entry[1];
                    if entry[0] == lock_reply::STALE {
                        outcome = outcome.and(Err(AbortReason::ValidationFailed));
                    }
                }
                LOCK_STALE_FREE => outcome = outcome.and(Err(AbortReason::ValidationFailed)),
                _ => outcome = outcome.and(Err(AbortReason::LockConflict)),
            }
        }
        outcome
    }

    /// Renews, in rounds, every read lease short of `commit_ts`.
    pub(super) async fn renew_onesided(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        let commit_ts = cx.timestamp;
        for _ in 0..CAS_ROUNDS {
            cx.collect_nodes(|a| needs_renewal(a, commit_ts));
            if cx.nodes.is_empty() {
                return Ok(());
            }
            kit::queue_lock_then_read_seq(
                cx,
                |a| needs_renewal(a, commit_ts),
                1,
                |cx, a| {
                    let lease = lease_addr(cx.table(a.table), a.slot);
                    (lease, a.meta & RTS_MASK, commit_ts)
                },
            );
            cx.submit().await?;
            let batch = cx.batch();
            for &(index, cas) in &cx.queued {
                let previous = batch.result_word(VerbId(cas));
                let seq = batch.result_word(VerbId(cas + 1));
                let access = &mut cx.accesses[index];
                if previous == access.meta & RTS_MASK {
                    access.meta = commit_ts;
                    continue;
                }
                match after_failed_cas(access, previous, seq) {
                    CasOutcome::Locked | CasOutcome::Changed => {
                        return Err(AbortReason::RenewFailed)
                    }
                    CasOutcome::Extended => {}
                }
            }
        }
        if cx.accesses.iter().any(|a| needs_renewal(a, commit_ts)) {
            return Err(AbortReason::RenewFailed);
        }
        Ok(())
    }

    pub(super) async fn renew_rpc(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        let commit_ts = cx.timestamp;
        let short = |a: &Access| needs_renewal(a, commit_ts);
        cx.collect_nodes(short);
        let head = [commit_ts];
        let renewed =
            kit::call_nodes_all_ok(cx, kind::SUNDIAL_RENEW, &head, short, |_, a, words| {
                words.extend_from_slice(&[a.table as u64, a.slot, a.seq, a.meta]);
            });
        if !renewed.await? {
            return Err(AbortReason::RenewFailed);
        }
        // Every lease short of commit_ts now reaches it.
        for access in cx.accesses.iter_mut() {
            if needs_renewal(access, commit_ts) {
                access.meta = commit_ts;
            }
        }
        Ok(())
    }

    /// Installs every locked (written) record at `commit_ts` and unlocks it,
    /// with passive ACK.
    pub(super) fn post_commit(&self, cx: &mut TxnCx<'_>) {
        cx.collect_nodes(|a| a.locked);
        if cx.nodes.is_empty() {
            return;
        }
        let commit_ts = cx.timestamp;
        debug_assert!(commit_ts < LOCKED, "logical time ran out of rts bits");
        let form = (
            cx.primitive(Stage::Commit),
            kind::SUNDIAL_WRITE_BACK,
            Some(commit_ts),
        );
        let onesided = |cx: &TxnCx<'_>, batch: &mut Batch, index: usize| {
            let access = cx.accesses[index];
            debug_assert!(access.write, "only write-set records are locked");
            debug_assert!(
                access.meta < commit_ts,
                "commit_ts is past the rts the lock froze"
            );
            let (node, table, new_seq) = (access.node, cx.table(access.table), access.seq + 1);
            batch.write_word(node, kit::seq_end_addr(table, access.slot), new_seq);
            batch.write(node, table.record_addr(access.slot), cx.record(index));
            if self.lock_at_access {
                // wts and the owner word, adjacent: no holder.
                batch.write(node, wts_addr(table, access.slot), &[commit_ts, 0]);
            } else {
                batch.write_word(node, wts_addr(table, access.slot), commit_ts);
            }
            batch.write(node, table.seq_addr(access.slot), &[new_seq, commit_ts]);
        };
        let batch = cx.round();
        kit::post_locked(cx, batch, form, onesided, |cx, payload, index| {
            debug_assert!(
                cx.accesses[index].write,
                "only write-set records are locked"
            );
            kit::push_write_back(cx, payload, index);
        });
    }

    /// Restores the lease word of every locked record, with passive ACK.
    pub(super) fn post_release(&self, cx: &mut TxnCx<'_>) {
        cx.collect_nodes(|a| a.locked);
        if cx.nodes.is_empty() {
            return;
        }
        let form = (cx.primitive(Stage::Release), kind::SUNDIAL_RELEASE, None);
        let onesided = |cx: &TxnCx<'_>, batch: &mut Batch, index: usize| {
            let access = cx.accesses[index];
            let (node, table, lease) = (access.node, cx.table(access.table), access.meta);
            debug_assert_eq!(lease & LOCKED, 0);
            if self.lock_at_access {
                batch.write_word(node, owner_addr(table, access.slot), 0);
            }
            batch.write_word(node, lease_addr(table, access.slot), lease);
        };
        let batch = cx.round();
        kit::post_locked(cx, batch, form, onesided, |cx, payload, index| {
            let access = cx.accesses[index];
            debug_assert_eq!(access.meta & LOCKED, 0);
            payload.extend_from_slice(&[access.table as u64, access.slot, access.meta]);
        });
    }
}
