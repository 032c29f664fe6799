//! SUNDIAL: logical leases (RCC §4.5, after Yu et al.'s Sundial as RCC
//! describes it; RCBench §6.2).
//!
//! Every tuple carries a logical lease `[wts, rts]`: the version it holds was
//! written at logical time `wts` and may be read by any transaction that
//! commits at a logical time up to `rts`. A transaction reads without locks
//! and remembers each lease; at commit it locks its write set, computes its
//! commit timestamp `commit_ts = max(wts of every record read, rts + 1 of
//! every record written)`, and then *renews* every read lease that does not
//! reach `commit_ts` by raising the tuple's `rts` — which fails if the tuple
//! changed since it was read or is locked by a writer. Writes install
//! `wts = rts = commit_ts`. Reads never abort on a locked tuple: the version
//! they see stays valid for every timestamp up to the `rts` the writer froze.
//!
//! Stages (RCC bits): `read` = 2 (execution-phase fetch of every record,
//! written ones included), `lock` = 1 (lock the write set and check each
//! version is still the one read; with `sundial_lock_at_access`, done at
//! each first write access instead, its time counted in `read`, see
//! below), `renew` = 64 (extend read leases to
//! `commit_ts`), `log` = 4 (empty without replication), `commit` = 16
//! (install the writes and the new lease, unlock), `release` = 8 (unlock on
//! abort).
//!
//! Header layout (2 words; 3 with `sundial_lock_at_access`):
//!
//! ```text
//! word 0  lease word: bit 63 = write lock, bits 0..63 = rts
//! word 1  wts
//! word 2  (sundial_lock_at_access) the lock holder's WAIT_DIE lock value, or 0
//! ```
//!
//! The version number is the store's `seq`. The lock shares its word with
//! `rts` on purpose: RCC §4.5 renews a lease with one CAS on `rts`, and that
//! CAS must fail while a writer holds the lock — a writer computed its
//! timestamp from the `rts` it saw when it locked, so a renewal that slipped
//! in between would let a reader claim a logical time at or after the
//! writer's while it read the version the writer replaces. With both in one
//! word the lock *freezes* `rts`: a writer locks with
//! `CAS(lease, rts → LOCK | rts)` (learning `rts` atomically), a renewal is
//! `CAS(lease, rts → commit_ts)` and so fails on any lock, and every commit
//! strictly raises `rts` (`commit_ts ≥ rts + 1`), so the word never returns to
//! an earlier unlocked value once a newer version is installed: a renewal CAS
//! whose expected value is the unlocked lease word the reader saw succeeds
//! only if the version is still the one read (an aborted writer restores the
//! very word it locked). A failed CAS returns the current word; if it is
//! unlocked and `seq` (READ after the CAS, FIFO) is unchanged, the lease was
//! merely extended by another reader: it either covers `commit_ts` already or
//! the CAS is retried from the new value (a few rounds at most).
//!
//! * one-sided read: one READ of the whole tuple; `seq == seq_end` proves it
//!   is one version (see `store`), and `wts` and the lease word lie between
//!   the two, so they belong to it; a torn READ is retried, then aborts.
//! * RPC read: the handler copies the tuple locally (re-reading a torn copy)
//!   and replies `[status, slot, seq, wts, lease, record…]`.
//! * one-sided lock: CAS(lease) + READ(seq) per record, doorbell batched per
//!   node; RPC lock: one request per node whose handler runs the same CAS
//!   loop on the same word.
//! * one-sided renew: CAS(lease, rts → commit_ts) + READ(seq) per record;
//!   RPC renew: one request per node, the same CAS loop locally.
//! * commit: WRITE `seq_end`, WRITE record, WRITE `wts`, then one WRITE of the
//!   adjacent `[seq, lease = commit_ts]` (unlocks), per written record, with
//!   passive ACK; RPC: one `SUNDIAL_WRITE_BACK` per node storing in the same
//!   order. Release: WRITE of the lease word as it was when locked (or RPC).
//!
//! Hybrid handshakes (RCC §5.2): every form of every stage acts on the same
//! lease word with the same CAS (an RPC handler CASes locally the word a
//! one-sided CAS targets), every RPC read replies the tuple's slot and lease
//! word, and every RPC lock replies the lease word it locked, so a later
//! stage of either form can address the tuple and restore or replace the
//! word. Commit writes in the same order in both forms, so the tear check of
//! either read form holds against either commit form. No further agreed
//! region is needed.
//!
//! # RCC's variant: write locks at access (`sundial_lock_at_access`)
//!
//! RCC §4.5 locks a write-set record when the transaction accesses it
//! ("when accessing a record in WS, the transaction tries to lock the
//! tuple ... the transaction's commit_tts is updated to
//! Max(commit_tts, tuple.rts+1)"), and RCC's code resolves a held lock as
//! WAIT_DIE does: an older requester waits for the holder, a younger one
//! aborts. `protocol_options.sundial_lock_at_access` runs that variant;
//! off (the default), the write set is locked at commit and any held lock
//! aborts (`lock_conflict`). With it on:
//!
//! * The first write access of a record (or the upgrade of one read
//!   before) locks it in the execution phase, with the `lock` stage's
//!   primitive, on the same lease word: `CAS(lease, rts → LOCK | rts)`
//!   freezes `rts` as the commit-time lock does, and `commit_ts` rises to
//!   `rts + 1` at once. The record is read under the lock, so it is the
//!   version the write replaces; an upgrade checks that `seq` is still the
//!   one its read saw (`validation_failed` otherwise). The `lock` stage at
//!   commit then has nothing left to lock.
//! * Header word 2 names the holder: its WAIT_DIE lock value (the 2PL
//!   family's timestamp `clock:34 | owner:29` with bit 63, taken when a
//!   request first starts and kept across its retries; `lock2pl`). The
//!   lease word cannot hold it — its bits are the frozen `rts` that readers
//!   and the holder's `commit_ts` need — so the holder writes word 2 right
//!   after it locks and clears it before it unlocks (commit writes
//!   `[wts, 0]` in one WRITE; release writes 0 before the lease word). A
//!   requester that finds the lock held decides on word 2 with the 2PL
//!   family's WAIT_DIE rule (`Lock2pl::decide`): it waits if it is older
//!   than the holder (or is its own earlier attempt, whose release is in
//!   flight), and dies (`died`) if it is younger. A word 2 of 0 (the holder
//!   has not named itself yet) is waited for. Word 2 only guides the
//!   choice between waiting and dying, never serializability: every retry
//!   decides again on the lease word as it is. It must not name the wrong
//!   holder for long, though, or a wait could go from a younger
//!   transaction to an older one and close a cycle (below).
//! * One-sided: CAS(lease) + READ(tuple) per round, from the lease word
//!   read before (an upgrade) or 0; a CAS that met another unlocked word
//!   (readers extended the lease, or a newer version) is retried from that
//!   word at once — so a first write of a tuple whose lease is not 0 costs
//!   two rounds, where RCC's separate lock word costs one — and a wait
//!   sleeps 0.5–8 µs (doubling, as WAIT_DIE's one-sided wait) before the
//!   next round. Once locked, a WRITE names the holder: passive, FIFO
//!   before the commit's or release's verbs; awaited (one more round trip)
//!   when commit or release goes by RPC, which the fabric does not order
//!   after a verb — a clear by RPC overtaken by the naming WRITE would
//!   leave a stale name on the next holder's lock (as CICADA awaits its
//!   one-sided install).
//! * RPC: one `SUNDIAL_LOCK_READ`; the handler locks with a local CAS on
//!   the same word, names the holder and replies the tuple, or parks the
//!   request in the event loop's waiting list (`Served::Wait`, decided
//!   again at every offer, as WAIT_DIE's lock handler) while it must wait.
//!   Its reply carries the slot and the unlocked lease word it froze, so a
//!   one-sided commit or release can address the tuple and restore the
//!   word, as after the commit-time lock.
//!
//! Waits only go from an older transaction to a younger (or not yet
//! named) holder, so there is no deadlock: every wait is decided again on
//! every round or offer, and a holder names itself right after it locks.
//! Reads, renewals and commit are unchanged; a writer just holds its locks
//! from its access to its commit, so renewals meet locks more often.
//!
//! Per-access state (`Access::meta`): the lease word, as read (or the newer
//! one a failed CAS returned) and, once locked, the unlocked value the lock
//! froze; the `wts` read only raises `commit_ts` when it is fetched.
//! `TxnCx::timestamp` is the attempt's `commit_ts`; with
//! `sundial_lock_at_access`, `TxnCx::owner` is the WAIT_DIE lock value.
//!
//! Invariants: `rts` never decreases, and rises by at least one at every
//! commit; only the lock holder changes a locked lease word; a transaction
//! commits at `commit_ts` only if every version it read has a lease covering
//! `commit_ts` while unlocked (or frozen by a writer, whose timestamp then
//! exceeds it), and every version it writes is locked and unchanged since it
//! was read. With `sundial_lock_at_access`, a holder's naming WRITE lands
//! before its clear, and its clear before its unlock, so while a lock is
//! held word 2 is 0 or the holder's lock value.
//!
//! Here: the lease words, the read and the lock at access; `commit` holds
//! the commit-time stages, `serve` the RPC handlers.

use crate::fabric::VerbId;
use crate::store::{NodeStore, TableLayout, HEADER_WORD};
use crate::txn::{AbortReason, Access, TxnCx, TxnResult};

use super::common::kind;
use super::lock2pl::{
    wait_die_timestamp, Decision, Lock2pl, EXCLUSIVE, WAIT_PAUSE_MAX_NS, WAIT_PAUSE_MIN_NS,
};
use super::wait_die::WaitDie;
use super::{Protocol, ProtocolKind, Served, Stage};
use crate::txn::kit::{self, lock_reply, status};

/// Write-lock bit of the lease word.
pub const LOCKED: u64 = 1 << 63;
/// The `rts` bits of the lease word.
pub const RTS_MASK: u64 = LOCKED - 1;

/// Header words.
const LEASE_WORD: u32 = 0;
const WTS_WORD: u32 = 1;
/// With `lock_at_access` only: the lock holder's WAIT_DIE lock value, 0
/// while nobody is known to hold it.
const OWNER_WORD: u32 = 2;

/// Rounds of one-sided CAS a lock or renewal may take when other readers
/// keep extending the lease, and the bound of the handlers' local loops.
const CAS_ROUNDS: u32 = 4;
const LOCAL_CAS_TRIES: u32 = 64;
/// READs of a tuple found torn before the read aborts.
const READ_TRIES: u32 = 3;

/// Per-record status in a `SUNDIAL_LOCK` reply besides `kit::lock_reply`'s.
/// Not locked: the version changed before the lock was taken.
const LOCK_STALE_FREE: u64 = 3;

/// Reply statuses of `SUNDIAL_LOCK_READ` (the access-time lock of
/// `lock_at_access`) besides `status::{OK, NOT_FOUND}`.
/// Locked, but the version is not the one the upgraded read saw.
const ACCESS_LOCKED_STALE: u64 = 10;
/// Not locked: the version the upgraded read saw is gone.
const ACCESS_STALE: u64 = 11;
/// Not locked: an older transaction holds it (WAIT_DIE).
const ACCESS_DIED: u64 = 12;
/// `SUNDIAL_LOCK_READ` of a record not read before: no version to check.
const NO_SEQ: u64 = u64::MAX;

/// The conflict rule of the access-time lock: WAIT_DIE's, from the 2PL
/// family, on the holder's lock value in `OWNER_WORD`.
const WAIT_DIE: Lock2pl<WaitDie> = Lock2pl::new(false, false);

#[derive(Clone, Debug, Default)]
pub struct Sundial {
    /// RCC's variant (`protocol_options.sundial_lock_at_access`; module
    /// doc): write locks at the first write access, WAIT_DIE on conflict.
    pub lock_at_access: bool,
}

#[inline]
fn lease_addr(table: &TableLayout, slot: u64) -> u64 {
    table.header_addr(slot, LEASE_WORD)
}

#[inline]
fn wts_addr(table: &TableLayout, slot: u64) -> u64 {
    table.header_addr(slot, WTS_WORD)
}

#[inline]
fn owner_addr(table: &TableLayout, slot: u64) -> u64 {
    table.header_addr(slot, OWNER_WORD)
}

/// Whether a requester with lock value `me` waits for the holder whose
/// lock value is `holder` (0: not yet known): WAIT_DIE's rule, an unknown
/// holder waited for (it names itself right after it locks).
fn waits_for(holder: u64, me: u64) -> bool {
    holder == 0 || WAIT_DIE.decide(holder, me, true) == Decision::Wait
}

/// A read lease that does not reach `commit_ts` and must be renewed.
#[inline]
fn needs_renewal(access: &Access, commit_ts: u64) -> bool {
    !access.write && access.meta & RTS_MASK < commit_ts
}

/// Takes a fetched version: its record, `seq`, and lease; `commit_ts` must
/// not precede its `wts`.
fn accept(cx: &mut TxnCx<'_>, index: usize, seq: u64, wts: u64, lease: u64, record: &[u64]) {
    kit::accept_record(cx, index, seq, record);
    cx.accesses[index].meta = lease;
    cx.timestamp = cx.timestamp.max(wts);
}

/// What a failed lock or renewal CAS means for the access.
enum CasOutcome {
    /// Another transaction holds the lock.
    Locked,
    /// The version changed since it was read.
    Changed,
    /// The lease was extended by another reader; `meta` holds the new word.
    Extended,
}

fn after_failed_cas(access: &mut Access, previous: u64, seq: u64) -> CasOutcome {
    if previous & LOCKED != 0 {
        CasOutcome::Locked
    } else if seq != access.seq {
        CasOutcome::Changed
    } else {
        access.meta = previous;
        CasOutcome::Extended
    }
}

impl Sundial {
    async fn read_onesided(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let (access, table) = kit::locate_onesided(cx, index).await?;
        for _ in 0..READ_TRIES {
            let read = kit::read_tuple_onesided(cx, index).await?;
            let batch = cx.batch();
            let words = batch.result(read);
            let tuple = kit::decode(table, words);
            debug_assert_eq!(tuple.key, access.key, "location cache entry is stale");
            if tuple.seq != tuple.seq_end {
                continue;
            }
            let wts = words[(HEADER_WORD + WTS_WORD) as usize];
            accept(cx, index, tuple.seq, wts, tuple.lock, tuple.record);
            return Ok(());
        }
        Err(AbortReason::ReadInconsistent)
    }

    async fn read_rpc(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let reply = kit::access_reply(cx, index, kind::SUNDIAL_READ, &[]).await?;
        match reply[0] {
            status::OK => {
                accept(cx, index, reply[2], reply[3], reply[4], &reply[5..]);
                Ok(())
            }
            status::INCONSISTENT => Err(AbortReason::ReadInconsistent),
            _ => Err(AbortReason::NotFound),
        }
    }

    /// `lock_at_access`: locks `cx.accesses[index]` at its first write
    /// access — `upgrade` if the record was read before, whose version must
    /// still be the one read — waiting while a younger transaction (or one
    /// not yet named) holds it and dying if an older one does.
    async fn lock_on_access(
        &self,
        cx: &mut TxnCx<'_>,
        index: usize,
        upgrade: bool,
    ) -> TxnResult<()> {
        kit::in_form!(cx, Stage::Lock,
            onesided: self.lock_on_access_onesided(cx, index, upgrade),
            rpc: self.lock_on_access_rpc(cx, index, upgrade))?;
        // Order after the lease the written version had when locked.
        let access = &cx.accesses[index];
        debug_assert!(access.locked && access.meta & LOCKED == 0);
        cx.timestamp = cx.timestamp.max((access.meta & RTS_MASK) + 1);
        Ok(())
    }

    /// One-sided access-time lock: CAS(lease, rts → LOCK | rts) + READ of
    /// the tuple per round, starting from the lease word read before (an
    /// upgrade) or 0; a CAS that found another unlocked word is retried
    /// from it at once, one that found the lock decides on the holder named
    /// in the READ's owner word and, to wait, sleeps (0.5–8 µs, doubling)
    /// before the next round. Once locked, a WRITE names the holder (module doc).
    async fn lock_on_access_onesided(
        &self,
        cx: &mut TxnCx<'_>,
        index: usize,
        upgrade: bool,
    ) -> TxnResult<()> {
        let (access, table) = kit::locate_onesided(cx, index).await?;
        let lease = lease_addr(table, access.slot);
        let owner_at = (HEADER_WORD + OWNER_WORD) as usize;
        let wts_at = (HEADER_WORD + WTS_WORD) as usize;
        let mut expected = if upgrade { access.meta & RTS_MASK } else { 0 };
        let mut pause = WAIT_PAUSE_MIN_NS;
        loop {
            let (cas, read) = kit::queue_cas_then_read_tuple(
                &mut cx.round(),
                access.node,
                table,
                access.slot,
                (lease, expected, expected | LOCKED),
            );
            cx.submit().await?;
            let (previous, stale, holder) = {
                let batch = cx.batch();
                let previous = batch.result_word(cas);
                let words = batch.result(read);
                let tuple = kit::decode(table, words);
                debug_assert_eq!(tuple.key, access.key, "location cache entry is stale");
                let stale = upgrade && tuple.seq != access.seq;
                if previous == expected {
                    debug_assert_eq!(tuple.seq, tuple.seq_end, "a locked tuple cannot be torn");
                    cx.accesses[index].locked = true;
                    if upgrade {
                        cx.accesses[index].meta = expected;
                    } else {
                        accept(cx, index, tuple.seq, words[wts_at], expected, tuple.record);
                    }
                }
                (previous, stale, words[owner_at])
            };
            if previous == expected {
                cx.round()
                    .write_word(access.node, owner_addr(table, access.slot), cx.owner);
                // A commit or release by RPC that cleared the owner word and
                // unlocked before this WRITE landed would leave this
                // transaction named as the next holder — a wrong age, and a
                // wait cycle (matrix: smallbank seed 2, code 79).
                kit::submit_before_commit(cx).await?;
                return if stale {
                    Err(AbortReason::ValidationFailed)
                } else {
                    Ok(())
                };
            }
            if stale {
                return Err(AbortReason::ValidationFailed);
            }
            if previous & LOCKED == 0 {
                // Readers extended the lease, or a newer version came.
                expected = previous;
                continue;
            }
            if !waits_for(holder, cx.owner) {
                return Err(AbortReason::Died);
            }
            expected = previous & RTS_MASK;
            cx.worker.sleep(cx.co, pause).await;
            pause = (pause * 2).min(WAIT_PAUSE_MAX_NS);
        }
    }

    /// RPC access-time lock: one `SUNDIAL_LOCK_READ`, whose handler locks
    /// with a local CAS on the same lease word, names the holder, and parks
    /// the request in the event loop's waiting list while it must wait.
    async fn lock_on_access_rpc(
        &self,
        cx: &mut TxnCx<'_>,
        index: usize,
        upgrade: bool,
    ) -> TxnResult<()> {
        let access = cx.accesses[index];
        let seq = if upgrade { access.seq } else { NO_SEQ };
        let reply = kit::access_reply(cx, index, kind::SUNDIAL_LOCK_READ, &[cx.owner, seq]).await?;
        match reply[0] {
            status::OK if upgrade => {
                cx.accesses[index].locked = true;
                cx.accesses[index].meta = reply[4];
                Ok(())
            }
            status::OK => {
                cx.accesses[index].locked = true;
                accept(cx, index, reply[2], reply[3], reply[4], &reply[5..]);
                Ok(())
            }
            ACCESS_LOCKED_STALE => {
                cx.accesses[index].locked = true;
                cx.accesses[index].meta = reply[4];
                Err(AbortReason::ValidationFailed)
            }
            ACCESS_STALE => Err(AbortReason::ValidationFailed),
            status::NOT_FOUND => Err(AbortReason::NotFound),
            _ => {
                debug_assert_eq!(reply[0], ACCESS_DIED);
                Err(AbortReason::Died)
            }
        }
    }
}

mod commit;
mod serve;

impl crate::txn::FromConfig for Sundial {
    fn from_config(config: &crate::config::Config) -> Self {
        Sundial {
            lock_at_access: config.protocol_options.sundial_lock_at_access,
        }
    }
}

impl Protocol for Sundial {
    const KIND: ProtocolKind = ProtocolKind::Sundial;
    const ACCESS_STAGE: Stage = Stage::Read;

    fn header_words(_record_words: u32) -> u32 {
        2
    }

    fn header_words_of(&self, record_words: u32) -> u32 {
        if self.lock_at_access {
            OWNER_WORD + 1
        } else {
            Self::header_words(record_words)
        }
    }

    fn begin(&self, cx: &mut TxnCx<'_>) {
        // commit_ts of the attempt, raised by every read and lock.
        cx.timestamp = 0;
        if self.lock_at_access && cx.attempt == 0 {
            // The WAIT_DIE lock value, kept across retries so that a
            // restarted transaction ages (RCC §4.3).
            cx.owner = EXCLUSIVE | wait_die_timestamp(cx);
        }
    }

    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        if self.lock_at_access && cx.accesses[index].write {
            return self.lock_on_access(cx, index, false).await;
        }
        kit::in_form!(cx, Stage::Read,
            onesided: self.read_onesided(cx, index),
            rpc: self.read_rpc(cx, index))
    }

    async fn upgrade(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        if !self.lock_at_access {
            // Locked with the rest of the write set at commit.
            return Ok(());
        }
        self.lock_on_access(cx, index, true).await
    }

    async fn lock(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        if !cx.accesses.iter().any(|a| a.write) {
            return Ok(());
        }
        if self.lock_at_access {
            // Every write-set record was locked at its first write access.
            debug_assert!(cx.accesses.iter().all(|a| !a.write || a.locked));
            return Ok(());
        }
        kit::in_form!(cx, Stage::Lock,
            onesided: self.lock_onesided(cx),
            rpc: self.lock_rpc(cx))?;
        // Order after every lease the written versions had when locked.
        for access in cx.accesses.iter().filter(|a| a.write) {
            debug_assert!(access.locked);
            cx.timestamp = cx.timestamp.max((access.meta & RTS_MASK) + 1);
        }
        Ok(())
    }

    async fn renew(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        let commit_ts = cx.timestamp;
        if !cx.accesses.iter().any(|a| needs_renewal(a, commit_ts)) {
            return Ok(());
        }
        kit::in_form!(cx, Stage::Renew,
            onesided: self.renew_onesided(cx),
            rpc: self.renew_rpc(cx))
    }

    async fn commit(&self, cx: &mut TxnCx<'_>) {
        debug_assert!(
            cx.accesses
                .iter()
                .all(|a| a.write || a.meta & RTS_MASK >= cx.timestamp),
            "commit_ts outside a read lease"
        );
        self.post_commit(cx);
    }

    async fn release(&self, cx: &mut TxnCx<'_>) {
        self.post_release(cx);
    }

    fn serve(&self, store: &NodeStore, kind: u16, payload: &mut Vec<u64>, _now_ns: u64) -> Served {
        self.serve_kind(store, kind, payload)
    }
}

#[cfg(test)]
mod tests {
    use super::serve::serve_lock_read;
    use super::*;
    use crate::protocols::lock2pl::OWNER_BITS;

    /// A WAIT_DIE lock value: clock part `clock`, coroutine `owner`.
    fn ts(clock: u64, owner: u64) -> u64 {
        EXCLUSIVE | (clock << OWNER_BITS) | owner
    }

    /// One node with record 7 (version `seq` 0) under a lease word of
    /// rts 5, laid out for `lock_at_access`.
    fn store() -> (NodeStore, u64) {
        use crate::store::{StoreLayout, TableSpec};
        let sundial = Sundial {
            lock_at_access: true,
        };
        let layout = StoreLayout::new(
            &[TableSpec {
                name: "t",
                record_words: 1,
                capacity_per_node: 4,
            }],
            |r| sundial.header_words_of(r),
        );
        let store = NodeStore::new(0, std::sync::Arc::new(layout));
        store.insert(0, 7, &[0]).unwrap();
        let slot = store.lookup(0, 7).unwrap();
        store
            .region
            .store(lease_addr(store.layout.table(0), slot), 5);
        (store, slot)
    }

    fn request(me: u64, seq: u64) -> Vec<u64> {
        vec![0, 7, me, seq]
    }

    #[test]
    fn the_access_lock_handler_locks_waits_for_younger_holders_and_dies_on_older_ones() {
        let (old, young) = (ts(5, 1), ts(9, 2));
        let (store, slot) = store();
        let table = store.layout.table(0);
        let (lease, owner) = (lease_addr(table, slot), owner_addr(table, slot));

        // Free: locked, the holder named, rts frozen and replied.
        let mut payload = request(young, NO_SEQ);
        assert!(serve_lock_read(&store, &mut payload) == Served::Reply);
        assert_eq!(payload[..5], [status::OK, slot, 0, 0, 5]);
        assert_eq!(store.region.load(lease), LOCKED | 5);
        assert_eq!(store.region.load(owner), young);

        // Held by a younger holder: an older requester waits; held by an
        // older one: a younger requester dies; its own lock is waited for.
        let mut waiting = request(old, NO_SEQ);
        assert!(serve_lock_read(&store, &mut waiting) == Served::Wait);
        assert!(serve_lock_read(&store, &mut request(young, NO_SEQ)) == Served::Wait);
        store.region.store(owner, old);
        let mut dying = request(young, NO_SEQ);
        assert!(serve_lock_read(&store, &mut dying) == Served::Reply);
        assert_eq!(dying, [ACCESS_DIED, slot]);
        // A holder not named yet is waited for.
        store.region.store(owner, 0);
        assert!(serve_lock_read(&store, &mut request(young, NO_SEQ)) == Served::Wait);

        // Released: the parked request gets the lock at its next offer.
        store.region.store(lease, 5);
        assert!(serve_lock_read(&store, &mut waiting) == Served::Reply);
        assert_eq!(waiting[0], status::OK);
        assert_eq!(store.region.load(owner), old);

        // An upgrade whose version is gone: refused while held, locked
        // and reported stale when free (release restores the word).
        let mut upgrade = request(young, 3);
        assert!(serve_lock_read(&store, &mut upgrade) == Served::Reply);
        assert_eq!(upgrade, [ACCESS_STALE, slot]);
        store.region.store(lease, 5);
        let mut upgrade = request(young, 3);
        assert!(serve_lock_read(&store, &mut upgrade) == Served::Reply);
        assert_eq!(upgrade[..5], [ACCESS_LOCKED_STALE, slot, 0, 0, 5]);
    }

    #[test]
    fn the_variant_adds_the_owner_word_and_the_default_keeps_two() {
        assert_eq!(Sundial::default().header_words_of(4), 2);
        let variant = Sundial {
            lock_at_access: true,
        };
        assert_eq!(variant.header_words_of(4), 3);
    }
}
