//! OCC in the DrTM+H style (DrTM+H §5.1–5.3; RCC §4, which bases its OCC on
//! DrTM+H; FaRM/Silo lineage).
//!
//! Execution reads records without locks and remembers their versions; at
//! commit the write set is locked, the read set is validated, and the writes
//! are installed and unlocked.
//!
//! Stages (RCC bits): `read` = 2 (execution-phase fetch), `lock` = 1 (lock
//! the write set; the version of each locked record is checked in the same
//! round, DrTM+H §5.2's optimization — a locked record cannot change), `validate`
//! = 32 (re-read `seq` and the lock of read-only records), `log` = 4 (empty
//! without replication), `commit` = 16 (update & unlock), `release` = 8
//! (unlock on abort).
//!
//! * one-sided read: one READ of the whole tuple (after an index probe on a
//!   cache miss). The tuple is refused if locked (`read_locked`) or if
//!   `seq != seq_end` (`read_inconsistent`: a torn READ; see `store`).
//!   With `protocol_options.occ_read_through_locks` a locked tuple is
//!   taken: RCC's OCC (its DrTM+H-based code reads the version and the
//!   record, never the lock word, in the execution phase; RCC §4 "reads
//!   records speculatively without locking and validates data upon
//!   transaction commits") leaves every conflict to commit time. That is
//!   safe because a lock holder changes neither record nor `seq` before it
//!   commits (a commit in progress is a torn READ), so what was read is a
//!   committed version, and the lock or validate stage aborts the
//!   transaction if the holder commits (a new `seq`) or still holds the
//!   lock when a read-only record is validated. The default refuses
//!   locked reads, which saves the compute and commit rounds of an attempt
//!   that would most likely fail validation.
//! * RPC read: the handler reads the tuple locally and replies
//!   `[status, slot, seq, record…]` (the handler's word-by-word copy can race
//!   a one-sided write-back just as a READ can, and is checked the same way).
//! * one-sided lock: CAS(lock, 0 → owner) + READ(seq) per record, doorbell
//!   batched per node; RPC lock: one request per node, the handler CASes and
//!   compares each version and replies a status per record.
//! * one-sided validate: READ(lock) then READ(seq) per record, doorbell
//!   batched per node; RPC validate: one request per node, whose handler
//!   loads the lock, then seq. The lock must be read *before* seq: a writer
//!   installs seq and then frees the lock, so a single READ of the adjacent
//!   words `[seq, lock]` (increasing address order) can see the old seq and
//!   then the freed lock of a writer that committed in between — a missed
//!   conflict that the seeded checker found as a write-skew cycle. Read
//!   lock-then-seq, a free lock and an unchanged seq mean no writer
//!   installed a version between the read and the validation.
//!
//! Header layout: word 0 = lock (0 free, else owner = coroutine id + 1). The
//! version is the store's `seq` word.
//! Hybrid handshakes (RCC §5.2): none beyond the lock word and the slot
//! returned by every RPC read, which lets a one-sided lock, commit or release
//! address a tuple first fetched by RPC.
//!
//! Invariant: a transaction commits only if every record it read still has
//! the version it read, with no other owner's lock, at a time when it holds
//! every lock of its write set — the serialization point.

use crate::fabric::VerbId;
use crate::store::NodeStore;
use crate::txn::{AbortReason, Access, TxnCx, TxnResult};

use super::common::kind;
use super::{Protocol, ProtocolKind, Served, Stage};
use crate::txn::kit::{self, lock_addr, status};

#[derive(Clone, Debug, Default)]
pub struct Occ {
    /// Broken on purpose: skip read-set validation. Only tests set it, to
    /// prove the checker catches a non-serializable protocol.
    pub skip_validation: bool,
    /// Take locked tuples at read time (RCC's variant, see the module
    /// docs; `protocol_options.occ_read_through_locks`).
    pub read_through_locks: bool,
}

impl Occ {
    async fn read_onesided(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let (access, table) = kit::locate_onesided(cx, index).await?;
        let read = kit::read_tuple_onesided(cx, index).await?;
        let batch = cx.batch();
        let tuple = kit::decode(table, batch.result(read));
        debug_assert_eq!(tuple.key, access.key, "location cache entry is stale");
        if tuple.lock != 0 && !self.read_through_locks {
            return Err(AbortReason::ReadLocked);
        }
        if tuple.seq != tuple.seq_end {
            return Err(AbortReason::ReadInconsistent);
        }
        kit::accept_record(cx, index, tuple.seq, tuple.record);
        Ok(())
    }

    async fn read_rpc(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let reply = kit::access_reply(cx, index, kind::OCC_READ, &[]).await?;
        match reply[0] {
            status::OK => {
                kit::accept_record(cx, index, reply[2], &reply[3..]);
                Ok(())
            }
            status::LOCKED => Err(AbortReason::ReadLocked),
            status::INCONSISTENT => Err(AbortReason::ReadInconsistent),
            _ => Err(AbortReason::NotFound),
        }
    }

    async fn lock_onesided(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        cx.collect_nodes(|a| a.write);
        kit::queue_lock_then_read_seq(
            cx,
            |a| a.write,
            1,
            |cx, a| (lock_addr(cx.table(a.table), a.slot), 0, cx.owner),
        );
        cx.submit().await?;
        kit::judge_locks(cx, |access, previous, seq| {
            if previous != 0 {
                return Err(AbortReason::LockConflict);
            }
            access.locked = true;
            if seq[0] != access.seq {
                return Err(AbortReason::ValidationFailed);
            }
            Ok(())
        })
    }

    async fn lock_rpc(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        cx.collect_nodes(|a| a.write);
        // The reply has one status word per entry, in entry order.
        kit::queue_calls_per_node(
            cx,
            kind::OCC_LOCK,
            &[cx.owner],
            |a| a.write,
            |_, a, payload| {
                payload.extend_from_slice(&[a.table as u64, a.slot, a.seq]);
                1
            },
        );
        cx.submit().await?;
        kit::lock_outcome(cx, AbortReason::ValidationFailed)
    }

    async fn validate_onesided(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        cx.collect_nodes(|a| !a.write);
        if cx.nodes.is_empty() {
            return Ok(());
        }
        kit::queue_per_node(
            cx,
            |a| !a.write,
            |cx, batch, a| {
                let table = cx.table(a.table);
                // Lock first, then seq, as two verbs (FIFO): see the
                // module doc for why one READ of [seq, lock] is unsafe.
                let lock = batch.read(a.node, lock_addr(table, a.slot), 1);
                batch.read(a.node, table.seq_addr(a.slot), 1);
                lock
            },
        );
        cx.submit().await?;
        let batch = cx.batch();
        for &(index, lock) in &cx.queued {
            let seq = batch.result_word(VerbId(lock + 1));
            if batch.result_word(VerbId(lock)) != 0 || seq != cx.accesses[index].seq {
                return Err(AbortReason::ValidationFailed);
            }
        }
        Ok(())
    }

    async fn validate_rpc(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        cx.collect_nodes(|a| !a.write);
        if cx.nodes.is_empty() {
            return Ok(());
        }
        let read_only = |a: &Access| !a.write;
        let valid =
            kit::call_nodes_all_ok(cx, kind::OCC_VALIDATE, &[], read_only, |_, a, words| {
                words.extend_from_slice(&[a.table as u64, a.slot, a.seq]);
            });
        if !valid.await? {
            return Err(AbortReason::ValidationFailed);
        }
        Ok(())
    }
}

impl crate::txn::FromConfig for Occ {
    fn from_config(config: &crate::config::Config) -> Self {
        Occ {
            skip_validation: config.unsafe_skip_occ_validation,
            read_through_locks: config.protocol_options.occ_read_through_locks,
        }
    }
}

impl Protocol for Occ {
    const KIND: ProtocolKind = ProtocolKind::Occ;
    const ACCESS_STAGE: Stage = Stage::Read;

    fn header_words(_record_words: u32) -> u32 {
        1
    }

    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        kit::in_form!(cx, Stage::Read,
            onesided: self.read_onesided(cx, index),
            rpc: self.read_rpc(cx, index))
    }

    async fn lock(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        if !cx.accesses.iter().any(|a| a.write) {
            return Ok(());
        }
        kit::in_form!(cx, Stage::Lock,
            onesided: self.lock_onesided(cx),
            rpc: self.lock_rpc(cx))
    }

    async fn validate(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        if self.skip_validation {
            return Ok(());
        }
        kit::in_form!(cx, Stage::Validate,
            onesided: self.validate_onesided(cx),
            rpc: self.validate_rpc(cx))
    }

    fn serve(&self, store: &NodeStore, kind: u16, payload: &mut Vec<u64>, _now_ns: u64) -> Served {
        match kind {
            kind::OCC_READ => {
                let (table_id, key) = (payload[0] as u32, payload[1]);
                let Some((slot, table)) = kit::load_tuple(store, table_id, key, payload) else {
                    return Served::Reply;
                };
                let tuple = kit::decode(table, payload);
                let (lock, seq, seq_end) = (tuple.lock, tuple.seq, tuple.seq_end);
                let status = if lock != 0 && !self.read_through_locks {
                    status::LOCKED
                } else {
                    kit::read_status(seq == seq_end)
                };
                kit::reply_with_tuple_record(payload, table, &[status, slot, seq]);
            }
            kind::OCC_LOCK => kit::serve_lock(store, payload, |table, slot, seq| {
                store.region.load(table.seq_addr(slot)) == seq
            }),
            kind::OCC_VALIDATE => {
                // Lock before seq, for the reason the module doc gives.
                let valid = payload.chunks_exact(3).all(|entry| {
                    let table = store.layout.table(entry[0] as u32);
                    let slot = entry[1];
                    store.region.load(lock_addr(table, slot)) == 0
                        && store.region.load(table.seq_addr(slot)) == entry[2]
                });
                payload.clear();
                payload.push(if valid { status::OK } else { status::STALE });
            }
            other => return kit::serve_shared_or_panic(store, other, payload, "occ"),
        }
        Served::Reply
    }
}
