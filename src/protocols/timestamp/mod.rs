//! TIMESTAMP: basic timestamp ordering (T/O) — RCBench §6.2.2 (Alg. 6) and
//! §7.6.3, Deneva §3.2, Bernstein & Goodman's basic T/O.
//!
//! Every attempt takes a fresh, unique timestamp `ts` in `begin` (Deneva:
//! a restarted transaction gets a new one); the serialization order is the
//! timestamp order. A tuple remembers the largest timestamp that read it
//! (`rts`) and the timestamp of the transaction that wrote its current
//! version (`wts`). A read by `ts < wts` or a write by `ts < rts` (or
//! `ts < wts`) would break the order and aborts the transaction.
//!
//! A record fetched with write intent is a *prewrite* (Bernstein &
//! Goodman; RCBench Alg. 6's Write latches first): the fetch takes the
//! tuple's lock word — which holds the writer's timestamp — and checks
//! `wts` and `rts` under it. The write value is buffered in the
//! transaction's copy (a program only knows it once it has computed it).
//! Locking at the fetch matters: a pending write makes younger readers
//! wait or abort instead of raising `rts` past it, so writers are not
//! starved by the readers that follow them (with the lock taken only at
//! commit, a hot tuple's `rts` kept ahead of every writer and whole runs
//! committed nothing). A record read first and written later is locked at
//! commit, by the lock stage. Two variants, chosen by
//! `ProtocolOptions::timestamp_cascading_aborts` (RCBench §7.6.3):
//!
//! * **no cascading aborts** (default; RCBench §6.2.2's discussion, after
//!   Bernstein & Goodman): writes are installed at the commit point, so
//!   nobody reads an uncommitted write. A reader older than a pending
//!   writer reads the committed version (the write will be ordered after
//!   it); a younger reader waits, as the `wait` module's policy says:
//!   by default a little (RCC: a few polls, or a few `Served::Wait`
//!   answers with the request in the serving event loop's waiting list,
//!   RCC §4.3), or for a time budget (Deneva §4.2's blocking), and then
//!   aborts (`read_locked`).
//! * **cascading aborts** (RCBench Alg. 6): once the lock stage has locked
//!   and checked the write set, the writer marks itself running in its
//!   per-transaction outcome words (`TxnCx::txn_meta_addr`), then installs
//!   its writes in place — record, `wts = ts`, `seq + 1`, the lock word
//!   flagged "installed" — before its commit point. A younger reader may
//!   read such a write and records the writer's timestamp (RCBench's
//!   `T.bL`); before its own commit point it waits until each such writer
//!   has committed, and aborts (`cascading_abort`) if one aborted —
//!   RCBench's CascadingAbortCheck, by polling READs of the writer's
//!   outcome words or an RPC the writer's node answers once the outcome is
//!   known (`Served::Wait` meanwhile). A writer that aborts after
//!   installing marks itself aborted, then restores the committed version
//!   it fetched under the lock (RCBench: "restore its modifications"); one
//!   writer per tuple at a time (the lock), so a restore never undoes
//!   another transaction's write. Waits only go from younger to older
//!   transactions, so they end. So no committed transaction read an
//!   aborted write, and the checker sees committed versions only.
//!
//! Stages (RCC bits): `read` = 2 (execution-phase fetch of a record read
//! only: raise `rts`), `lock` = 1 (the execution-phase fetch of a record
//! with write intent — lock & read, as NO_WAIT's — and at commit: lock the
//! records read first and written later, check they are still writable by
//! `ts`; cascading: then install and wait for the writers read from), `log` = 4 (empty without
//! replication), `commit` = 16 (install record and `wts`, unlock;
//! cascading: mark committed, unlock), `release` = 8 (unlock on abort;
//! cascading, once installed: mark aborted, restore and unlock).
//!
//! * one-sided read: READ the tuple; refuse it if torn (`seq != seq_end`),
//!   if `wts > ts`, or (wait) if an older writer holds it. Then the
//!   Double-Read of RCBench §6.1/Alg. 6: one doorbell batch of CAS(`rts`,
//!   seen → `ts`) (skipped if `rts >= ts` already), READ(lock), READ(seq) —
//!   FIFO puts both READs after the CAS. The read stands if the lock is
//!   free or held by a younger writer and `seq` is unchanged; a failed CAS
//!   (another reader raised `rts`) is retried with the value it returned.
//!   Why it is enough: a writer CASes the lock and *then* reads `rts`. If
//!   its CAS came after our READ(lock), its `rts` read comes after our CAS
//!   and sees `rts >= ts`, so an older writer aborts; if it came before, we
//!   saw its lock, or — if it had already committed — a changed `seq` (the
//!   lock is read before `seq`, as in `occ`, because a writer stores `seq`
//!   before freeing the lock).
//! * RPC read: the handler does the same steps on local memory (a local
//!   CAS on the same `rts` word), replying `[status, slot, seq, wts, rts,
//!   record…]`, or `Served::Wait` while an older writer holds the lock.
//! * fetch with write intent (update): CAS(lock, 0 → ts) and READ(tuple) in
//!   one doorbell batch (FIFO: the READ sees the tuple under the lock);
//!   refused if the lock is held (`lock_conflict`, RCBench Alg. 6 line 15)
//!   or `wts >= ts` or `rts > ts` (`timestamp_order`, lock kept until
//!   release). RPC: `TS_LOCK_READ`, the same on local memory, replying
//!   `[status, slot, seq, wts, rts, record…]`.
//! * lock (commit): CAS(lock, 0 → ts) + READ(`[seq, lock, wts, rts]`) per
//!   record read first and written later, doorbell batched per node (the
//!   READ follows the CAS: FIFO); RPC: one request per node, whose handler
//!   CASes and checks locally. The record is writable iff the CAS won,
//!   `seq` is the version the transaction read, and `rts <= ts` (equal:
//!   its own read).
//! * commit: per record WRITE `seq_end`, WRITE record, WRITE `wts = ts`,
//!   WRITE `[seq, lock = 0]` (passive; `wts` before `seq` so that a READ
//!   that saw the new `seq` saw the new `wts`); RPC: one passive request
//!   per node storing in the same order.
//! * release: `kit::post_release` (WRITE lock = 0, or the shared UNLOCK
//!   handler's CAS `ts → 0`).
//! * cascading lock: the lock round READs the whole tuple (RPC:
//!   `TS_LOCK_FETCH` replies it) to keep the committed version; the install
//!   round WRITEs as a commit does but leaves the lock flagged (RPC:
//!   `TS_INSTALL`) and is awaited, so a later unlock or restore follows it
//!   whatever primitive carries it. Commit unlocks with WRITE lock = 0 or
//!   the shared UNLOCK (CAS from the flagged lock); release restores with
//!   the install's verbs (RPC: `TS_INSTALL` from the flagged owner).
//!
//! Header layout (words after the store's `[key][seq]`): 0 = lock (0 free,
//! else the timestamp of the writer holding it, bit 0 set once its write is
//! installed — cascading variant), 1 = `wts`, 2 = `rts`. Per-transaction
//! metadata (cascading variant): `[ts | state, ts of the latest aborted
//! install]` per coroutine (see `outcome_of`).
//!
//! Hybrid handshakes (RCC §5.2): every form of every stage acts on the same
//! three words with the same atomic steps (the RPC handlers CAS the very
//! words the one-sided CASes target, and store in the same order), the lock
//! word holds the timestamp — which the coordinator knows whatever form
//! took the lock — so a one-sided release frees a lock an RPC took and an
//! RPC release (a CAS from `ts`) frees one a CAS took, and every RPC read
//! replies the slot for later one-sided stages. No other agreed region is
//! needed.
//!
//! Timestamps ([`TsClock`]): `time << id_bits | coroutine`, with `time` the
//! fabric clock in ns, raised past every `wts`/`rts` the coroutine observes
//! (RCC §4.4's clock adjustment) and strictly increasing per coroutine, and
//! `coroutine` a dense index of the coroutine, so timestamps are unique and
//! never 0; T/O keeps two zero bits below the id for its flags. `id_bits`
//! is what the cluster's coroutine count needs, leaving at least 44 bits
//! (4.8 hours) of ns for the largest allowed cluster and 50 or more (13
//! days) for clusters of up to 4096 coroutines; beyond that the time part
//! saturates and that coroutine's transactions would keep aborting — a
//! limit only a run of that length hits.
//!
//! Invariants: a tuple's record, `seq` and `wts` change only under its lock
//! (installed together, between the `seq_end` and `seq` stores); `rts` only
//! grows; a committed transaction read no write of an aborted one; a committed
//! transaction read, for each record, the version with the largest `wts`
//! below its `ts`, and no version with a `wts` between that and `ts` was
//! installed later (all dependency edges go from smaller to larger
//! timestamps, so the history is serializable in timestamp order).
//!
//! Here: the clock, the order rules, the execution-phase read and
//! prewrite (shared with `mvcc`); `commit` holds the commit-time stages,
//! `serve` the RPC handlers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::config::Config;
use crate::fabric::{CallId, VerbId};
use crate::store::{NodeStore, TableLayout, HEADER_WORD, SEQ_WORD};
use crate::txn::{AbortReason, TxnCx, TxnResult};

use super::common::kind;
use super::{Primitive, Protocol, ProtocolKind, Served, Stage};
use crate::txn::kit::{self, lock_addr, lock_reply, status};

/// Header word of `wts` and of `rts`.
const WTS_WORD: u32 = 1;
const RTS_WORD: u32 = 2;

/// Reply status: the transaction's timestamp is out of order for the tuple.
pub(super) const TOO_LATE: u64 = 16;
/// Read reply status (cascading variant): the record is an installed,
/// uncommitted write by the transaction whose timestamp is the reply's `wts`.
const DIRTY_OK: u64 = 18;

/// Low bits of every T/O timestamp left 0 for flags: in a lock word, bit 0
/// says the holder installed its write (cascading variant); in an outcome
/// word, bits 0–1 hold the state.
const FLAG_BITS: u32 = 2;
const TS_MASK: u64 = !((1 << FLAG_BITS) - 1);
const LOCK_INSTALLED: u64 = 1;
/// Outcome word states (cascading variant): the transaction `ts` has
/// installed writes and runs, committed, or aborted.
const META_RUNNING: u64 = 1;
const META_COMMITTED: u64 = 2;
const META_ABORTED: u64 = 3;
/// Polls of the writers a cascading reader depends on before it gives up
/// (about `DEP_POLLS × READ_WAIT_NS`).
const DEP_POLLS: u32 = 10_000;

/// CAS rounds a double-read spends raising `rts` before giving up.
const RTS_TRIES: u32 = 8;

/// The one-sided form of a fetch with write intent, shared by TIMESTAMP and
/// MVCC: CAS(lock, 0 → ts) + READ(tuple) in one doorbell batch (FIFO: the
/// READ sees the tuple under the lock); `stamps` gives the latest
/// version's `(wts, rts)` from the tuple's words and `seq`, where each
/// protocol keeps them. Writable iff the lock was taken and `wts < ts`,
/// `rts <= ts` (the lock is kept otherwise, until release).
pub(super) async fn lock_read_onesided(
    cx: &mut TxnCx<'_>,
    index: usize,
    clock: &TsClock,
    stamps: impl Fn(&TableLayout, &[u64], u64) -> (u64, u64),
) -> TxnResult<()> {
    let (access, table) = kit::locate_onesided(cx, index).await?;
    let ts = cx.timestamp;
    let (cas, read) = kit::queue_cas_then_read_tuple(
        &mut cx.round(),
        access.node,
        table,
        access.slot,
        (lock_addr(table, access.slot), 0, ts),
    );
    cx.submit().await?;
    let batch = cx.batch();
    if batch.result_word(cas) != 0 {
        return Err(AbortReason::LockConflict);
    }
    cx.accesses[index].locked = true;
    let words = batch.result(read);
    let tuple = kit::decode(table, words);
    debug_assert_eq!(tuple.key, access.key, "location cache entry is stale");
    debug_assert_eq!(tuple.seq, tuple.seq_end, "a locked tuple cannot be torn");
    let (wts, rts) = stamps(table, words, tuple.seq);
    clock.observe(cx, wts.max(rts));
    kit::accept_record(cx, index, tuple.seq, tuple.record);
    if writable(ts, tuple.seq, tuple.seq, wts, rts) {
        Ok(())
    } else {
        Err(AbortReason::TimestampOrder)
    }
}

/// The RPC form of a fetch with write intent, shared by TIMESTAMP and MVCC
/// (their handlers answer alike): `[status, slot, seq, wts, rts, record…]`,
/// `STALE` when the lock was taken but the timestamps forbid the write.
pub(super) async fn lock_read_rpc(
    cx: &mut TxnCx<'_>,
    index: usize,
    kind: u16,
    clock: &TsClock,
) -> TxnResult<()> {
    let reply = kit::access_reply(cx, index, kind, &[cx.timestamp]).await?;
    match reply[0] {
        status::OK | status::STALE => {
            cx.accesses[index].locked = true;
            clock.observe(cx, reply[3].max(reply[4]));
            kit::accept_record(cx, index, reply[2], &reply[5..]);
            if reply[0] == status::OK {
                Ok(())
            } else {
                Err(AbortReason::TimestampOrder)
            }
        }
        status::LOCKED => Err(AbortReason::LockConflict),
        _ => Err(AbortReason::NotFound),
    }
}

/// The execution-phase fetch of the timestamp-ordering protocols
/// (TIMESTAMP, MVCC): a read, or for a record fetched with write intent a
/// lock and read (their shared [`lock_read_onesided`], [`lock_read_rpc`]),
/// each in its one-sided and its RPC form.
pub(super) trait OrderedFetch {
    async fn read_onesided(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()>;
    async fn read_rpc(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()>;
    async fn lock_read_onesided(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()>;
    async fn lock_read_rpc(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()>;

    /// `Protocol::access`. Reads use the `read` stage's primitive; a fetch
    /// with write intent is a lock (and read), so it uses the `lock`
    /// stage's.
    async fn fetch(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        if cx.accesses[index].write {
            return kit::in_form!(cx, Stage::Lock,
                onesided: self.lock_read_onesided(cx, index),
                rpc: self.lock_read_rpc(cx, index));
        }
        kit::in_form!(cx, Stage::Read,
            onesided: self.read_onesided(cx, index),
            rpc: self.read_rpc(cx, index))
    }
}

/// Unique transaction timestamps from the local clock (RCC §4.3: clock
/// time with the coroutine's id in the low bits), with RCC §4.4's
/// adjustment: a coroutine that observes a later timestamp moves its own
/// clock past it. `low_bits` zero bits below the id are left free for
/// flags a protocol keeps in words that hold a timestamp.
pub struct TsClock {
    /// Bits below the time part: the id and the free low bits.
    shift: u32,
    low_bits: u32,
    workers: u64,
    coroutines: u64,
    /// Per coroutine (dense index): the least time part its next timestamp
    /// may take. Only the coroutine's own worker thread touches its entry.
    floor: Box<[AtomicU64]>,
}

impl TsClock {
    pub fn new(config: &Config, low_bits: u32) -> TsClock {
        let count = config.nodes as u64 * config.workers as u64 * config.coroutines as u64;
        let id_bits = 64 - count.max(2).saturating_sub(1).leading_zeros();
        TsClock {
            shift: id_bits + low_bits,
            low_bits,
            workers: config.workers as u64,
            coroutines: config.coroutines as u64,
            floor: (0..count.max(1)).map(|_| AtomicU64::new(1)).collect(),
        }
    }

    /// The dense index of `cx`'s coroutine.
    pub fn index(&self, cx: &TxnCx<'_>) -> usize {
        ((cx.worker.node as u64 * self.workers + cx.worker.worker as u64) * self.coroutines
            + cx.co as u64) as usize
    }

    /// `(node, worker, coroutine)` of the coroutine that took `timestamp`.
    pub fn coroutine_of(&self, timestamp: u64) -> (crate::fabric::NodeId, u16, u16) {
        let id = (timestamp & ((1u64 << self.shift) - 1)) >> self.low_bits;
        let co = id % self.coroutines;
        let worker = (id / self.coroutines) % self.workers;
        let node = id / self.coroutines / self.workers;
        (node as crate::fabric::NodeId, worker as u16, co as u16)
    }

    fn max_time(&self) -> u64 {
        u64::MAX >> self.shift
    }

    /// A fresh timestamp for `cx`'s coroutine: later than every timestamp
    /// it took or observed before.
    pub fn next(&self, cx: &TxnCx<'_>) -> u64 {
        self.next_at(self.index(cx), cx.now_ns())
    }

    /// Moves `cx`'s coroutine clock past the time of `timestamp`.
    pub fn observe(&self, cx: &TxnCx<'_>, timestamp: u64) {
        self.observe_at(self.index(cx), timestamp);
    }

    /// [`TsClock::next`] for coroutine `index` at clock time `now_ns`.
    fn next_at(&self, index: usize, now_ns: u64) -> u64 {
        let floor = &self.floor[index];
        let time = now_ns
            .max(floor.load(Ordering::Relaxed))
            .min(self.max_time());
        floor.store(time.saturating_add(1), Ordering::Relaxed);
        (time << self.shift) | ((index as u64) << self.low_bits)
    }

    fn observe_at(&self, index: usize, timestamp: u64) {
        let time = timestamp >> self.shift;
        self.floor[index].fetch_max(time.saturating_add(1), Ordering::Relaxed);
    }
}

/// What a read may do with a tuple it fetched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// Take it; raise `rts` first when `raise`. `dirty`: the version is an
    /// uncommitted write (cascading variant), whose writer's timestamp is
    /// the tuple's `wts`.
    Take {
        raise: bool,
        dirty: bool,
    },
    /// A pending write older than the reader: fetch again later.
    Wait,
    Refuse(AbortReason),
}

/// Basic T/O's read rules for a consistent snapshot of a tuple's header.
fn judge(ts: u64, cascading: bool, lock: u64, wts: u64, rts: u64) -> Verdict {
    if wts > ts {
        Verdict::Refuse(AbortReason::TimestampOrder)
    } else if lock != 0 && lock < ts {
        if cascading && lock & LOCK_INSTALLED != 0 {
            debug_assert_eq!(lock & TS_MASK, wts, "an installed write carries its wts");
            Verdict::Take {
                raise: rts < ts,
                dirty: true,
            }
        } else {
            Verdict::Wait
        }
    } else {
        Verdict::Take {
            raise: rts < ts,
            dirty: false,
        }
    }
}

/// The double-read check after raising `rts`: no writer older than `ts`
/// holds the lock — other than the one whose installed write was read
/// (`accepted_lock`, 0 if none) — and no version was installed since the
/// first READ.
#[inline]
pub(super) fn still_readable(
    ts: u64,
    lock: u64,
    seq: u64,
    seen_seq: u64,
    accepted_lock: u64,
) -> bool {
    (lock == 0 || lock > ts || (accepted_lock != 0 && lock == accepted_lock)) && seq == seen_seq
}

/// One-sided double-read (RCBench §6.1): raises `rts` at `rts_addr` from
/// `seen_rts` to `ts` (if lower) and re-reads the lock, then `seq`. True if
/// the first READ's version still stands.
pub(super) async fn raise_rts_onesided(
    cx: &mut TxnCx<'_>,
    index: usize,
    rts_addr: u64,
    mut seen_rts: u64,
    seen_seq: u64,
    accepted_lock: u64,
) -> bool {
    let access = cx.accesses[index];
    let table = cx.table(access.table);
    let ts = cx.timestamp;
    for _ in 0..RTS_TRIES {
        let (cas, lock) = {
            let mut batch = cx.round();
            let cas = (seen_rts < ts).then(|| batch.cas(access.node, rts_addr, seen_rts, ts));
            let lock = batch.read(access.node, lock_addr(table, access.slot), 1);
            batch.read(access.node, table.seq_addr(access.slot), 1);
            (cas, lock)
        };
        if cx.submit().await.is_err() {
            return false;
        }
        let batch = cx.batch();
        if let Some(cas) = cas {
            let previous = batch.result_word(cas);
            if previous != seen_rts && previous < ts {
                // Another reader raised it, not past us: try again.
                seen_rts = previous;
                continue;
            }
        }
        let lock_now = batch.result_word(lock);
        let seq_now = batch.result_word(VerbId(lock.0 + 1));
        return still_readable(ts, lock_now, seq_now, seen_seq, accepted_lock);
    }
    false
}

/// The local form of [`raise_rts_onesided`], for RPC handlers: a CAS loop on
/// the same word, then the lock and `seq` loads in the same order.
pub(super) fn raise_rts_local(
    store: &NodeStore,
    table: &TableLayout,
    slot: u64,
    rts_word: u32,
    ts: u64,
    seen_seq: u64,
    accepted_lock: u64,
) -> bool {
    store
        .region
        .fetch_max(table.header_addr(slot, rts_word), ts);
    let lock = store.region.load(lock_addr(table, slot));
    let seq = store.region.load(table.seq_addr(slot));
    still_readable(ts, lock, seq, seen_seq, accepted_lock)
}

/// The abort reason of a non-OK read reply status.
pub(super) fn read_failure(status: u64, write: bool) -> AbortReason {
    match status {
        status::LOCKED if write => AbortReason::LockConflict,
        status::LOCKED => AbortReason::ReadLocked,
        status::INCONSISTENT => AbortReason::ReadInconsistent,
        TOO_LATE => AbortReason::TimestampOrder,
        _ => AbortReason::NotFound,
    }
}

/// The reply status of a refusal.
fn refusal_status(reason: AbortReason) -> u64 {
    match reason {
        AbortReason::LockConflict => status::LOCKED,
        _ => TOO_LATE,
    }
}

/// Whether a locked record may be overwritten by `ts`: nobody installed a
/// version since it was read, and no younger transaction read it.
#[inline]
fn writable(ts: u64, read_seq: u64, seq: u64, wts: u64, rts: u64) -> bool {
    seq == read_seq && wts < ts && rts <= ts
}

pub struct Timestamp {
    pub clock: TsClock,
    /// `ProtocolOptions::timestamp_cascading_aborts`.
    pub cascading: bool,
    /// How a read waits for an older writer's pending write.
    pending_wait: PendingWait,
    /// Cascading variant, per coroutine (dense index): the timestamps of
    /// the writers whose uncommitted writes the current attempt read.
    deps: Box<[Mutex<Vec<u64>>]>,
    /// Test hook (cascading variant): about half of the attempts that
    /// install their writes abort right after (as a user abort), so that
    /// tests see readers of those writes abort in cascade. Only tests set
    /// it.
    pub abort_after_install: bool,
}

impl Timestamp {
    pub fn new(config: &Config) -> Timestamp {
        let clock = TsClock::new(config, FLAG_BITS);
        let coroutines =
            config.nodes as usize * config.workers as usize * config.coroutines as usize;
        Timestamp {
            clock,
            cascading: config.protocol_options.timestamp_cascading_aborts,
            pending_wait: PendingWait::from_config(config),
            deps: (0..coroutines).map(|_| Mutex::new(Vec::new())).collect(),
            abort_after_install: false,
        }
    }

    fn deps(&self, cx: &TxnCx<'_>) -> std::sync::MutexGuard<'_, Vec<u64>> {
        // Only the coroutine's own worker thread locks its entry.
        self.deps[self.clock.index(cx)]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl OrderedFetch for Timestamp {
    async fn read_onesided(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let (access, table) = kit::locate_onesided(cx, index).await?;
        let ts = cx.timestamp;
        let mut tries = ReadTries::new(self.pending_wait);
        while let Some(read) = tries.next_read(cx, index).await? {
            let (verdict, seq, lock, wts, rts) = {
                let batch = cx.batch();
                let words = batch.result(read);
                let tuple = kit::decode(table, words);
                debug_assert_eq!(tuple.key, access.key, "location cache entry is stale");
                let wts = words[(HEADER_WORD + WTS_WORD) as usize];
                let rts = words[(HEADER_WORD + RTS_WORD) as usize];
                self.clock.observe(cx, wts.max(rts));
                let verdict = if tuple.seq != tuple.seq_end {
                    None
                } else {
                    Some(judge(ts, self.cascading, tuple.lock, wts, rts))
                };
                if let Some(Verdict::Take { .. }) = verdict {
                    kit::accept_record(cx, index, tuple.seq, tuple.record);
                }
                (verdict, tuple.seq, tuple.lock, wts, rts)
            };
            match verdict {
                Some(Verdict::Refuse(reason)) => return Err(reason),
                None => tries.torn(),
                Some(Verdict::Wait) => tries.wait(cx).await,
                Some(Verdict::Take { raise, dirty }) => {
                    let accepted = if dirty { lock } else { 0 };
                    let rts_addr = table.header_addr(access.slot, RTS_WORD);
                    if !raise || raise_rts_onesided(cx, index, rts_addr, rts, seq, accepted).await {
                        if dirty {
                            self.deps(cx).push(wts);
                        }
                        return Ok(());
                    }
                    tries.raise_lost();
                }
            }
        }
        Err(tries.failure)
    }

    async fn read_rpc(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let reply = kit::access_reply(
            cx,
            index,
            kind::TS_READ,
            &[cx.timestamp, self.cascading as u64, 0],
        )
        .await?;
        if reply[0] != status::OK && reply[0] != DIRTY_OK {
            return Err(read_failure(reply[0], false));
        }
        self.clock.observe(cx, reply[3].max(reply[4]));
        if reply[0] == DIRTY_OK {
            self.deps(cx).push(reply[3]);
        }
        kit::accept_record(cx, index, reply[2], &reply[5..]);
        Ok(())
    }

    /// Execution-phase fetch with write intent — a prewrite (Bernstein &
    /// Goodman; RCBench Alg. 6's Write, RCC §4.4's W1/W2): CAS(lock, 0 →
    /// ts) and READ(tuple) in one doorbell batch (FIFO: the READ sees the
    /// tuple under the lock), then the order check. Holding the lock from
    /// here on, no reader younger than `ts` can raise `rts` past it (they
    /// wait), so a writer is not starved by the readers that follow it.
    async fn lock_read_onesided(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        lock_read_onesided(cx, index, &self.clock, |_, words, _| {
            (
                words[(HEADER_WORD + WTS_WORD) as usize],
                words[(HEADER_WORD + RTS_WORD) as usize],
            )
        })
        .await
    }

    async fn lock_read_rpc(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        lock_read_rpc(cx, index, kind::TS_LOCK_READ, &self.clock).await
    }
}

/// Where the cascading variant keeps, past the records of the accesses in
/// `TxnCx::data`, what it needs to undo its installed writes: one marker
/// word (1 once installed), then per write-set access, in access order,
/// `[committed wts, committed record…]`. Reserved by the lock stage, after
/// the execution phase added its last access.
struct Backups;

impl Backups {
    fn marker(cx: &TxnCx<'_>) -> usize {
        cx.accesses.last().map_or(0, |a| {
            a.data as usize + cx.table(a.table).record_words as usize
        })
    }

    /// Reserves the area (zeroed: not installed).
    fn reserve(cx: &mut TxnCx<'_>) {
        let mut words = Self::marker(cx) + 1;
        for access in &cx.accesses {
            if access.write {
                words += 1 + cx.table(access.table).record_words as usize;
            }
        }
        cx.data.truncate(Self::marker(cx));
        cx.data.resize(words, 0);
    }

    fn installed(cx: &TxnCx<'_>) -> bool {
        cx.data.get(Self::marker(cx)).is_some_and(|&w| w == 1)
    }

    /// First word of the backup of write-set access `index`.
    fn of(cx: &TxnCx<'_>, index: usize) -> usize {
        let mut at = Self::marker(cx) + 1;
        for access in &cx.accesses[..index] {
            if access.write {
                at += 1 + cx.table(access.table).record_words as usize;
            }
        }
        at
    }

    /// The committed version of access `index` kept before its install:
    /// `(wts, record)`.
    fn version<'c>(cx: &'c TxnCx<'_>, index: usize) -> (u64, &'c [u64]) {
        let at = Self::of(cx, index);
        let words = cx.table(cx.accesses[index].table).record_words as usize;
        (cx.data[at], &cx.data[at + 1..at + 1 + words])
    }
}

mod commit;
mod serve;
mod wait;

pub(super) use wait::{PendingWait, ReadTries, READ_TRIES, READ_WAIT_NS};

impl crate::txn::FromConfig for Timestamp {
    fn from_config(config: &crate::config::Config) -> Self {
        Timestamp::new(config)
    }
}

impl Protocol for Timestamp {
    const KIND: ProtocolKind = ProtocolKind::Timestamp;
    const ACCESS_STAGE: Stage = Stage::Read;

    fn header_words(_record_words: u32) -> u32 {
        3
    }

    /// The cascading variant's outcome words (see `outcome_of`).
    fn txn_meta_words(_nodes: u32) -> u32 {
        2
    }

    fn begin(&self, cx: &mut TxnCx<'_>) {
        cx.timestamp = self.clock.next(cx);
        cx.owner = cx.timestamp;
        if self.cascading {
            self.deps(cx).clear();
        }
    }

    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        self.fetch(cx, index).await
    }

    async fn lock(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        let writes = cx.accesses.iter().any(|a| a.write);
        if self.cascading {
            Backups::reserve(cx);
        }
        if writes {
            kit::in_form!(cx, Stage::Lock,
                onesided: self.lock_onesided(cx),
                rpc: self.lock_rpc(cx))?;
            if self.cascading {
                self.install(cx).await?;
                if self.abort_after_install && (cx.timestamp >> FLAG_BITS).count_ones() % 2 == 1 {
                    return Err(AbortReason::User);
                }
            }
        }
        if self.cascading {
            self.await_writers(cx).await?;
        }
        Ok(())
    }

    async fn commit(&self, cx: &mut TxnCx<'_>) {
        self.post_commit(cx);
    }

    async fn release(&self, cx: &mut TxnCx<'_>) {
        if self.cascading && Backups::installed(cx) {
            self.post_restore(cx);
        } else {
            kit::post_release(cx);
        }
    }

    fn serve(&self, store: &NodeStore, kind: u16, payload: &mut Vec<u64>, now_ns: u64) -> Served {
        match kind {
            kind::TS_READ => serve::read(store, payload, self.pending_wait, now_ns),
            kind::TS_LOCK => serve::lock(store, payload),
            kind::TS_LOCK_READ => serve::lock_read(store, payload),
            kind::TS_LOCK_FETCH => serve::lock_fetch(store, payload),
            kind::TS_COMMIT => serve::commit(store, payload),
            kind::TS_INSTALL => serve::install(store, payload),
            kind::TS_OUTCOME => serve::outcome(store, payload),
            other => kit::serve_shared_or_panic(store, other, payload, "timestamp"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::serve::outcome_of;
    use super::*;

    fn clock(nodes: u32, workers: u32, coroutines: u32, low_bits: u32) -> TsClock {
        let config = Config {
            nodes,
            workers,
            coroutines,
            ..Config::default()
        };
        TsClock::new(&config, low_bits)
    }

    #[test]
    fn timestamps_are_unique_increasing_and_name_their_coroutine() {
        let clock = clock(3, 2, 5, FLAG_BITS);
        let mut seen = std::collections::HashSet::new();
        for index in 0..30 {
            let mut last = 0;
            // A clock that stands still still gives growing timestamps.
            for now in [5, 5, 5, 4, 100] {
                let ts = clock.next_at(index, now);
                assert!(ts > last && ts & !TS_MASK == 0 && ts != 0);
                assert!(seen.insert(ts), "timestamp {ts} given twice");
                let (node, worker, co) = clock.coroutine_of(ts);
                let back = (node as usize * 2 + worker as usize) * 5 + co as usize;
                assert_eq!(back, index);
                last = ts;
            }
        }
    }

    #[test]
    fn an_observed_timestamp_moves_the_clock_past_it() {
        let clock = clock(2, 1, 4, 0);
        let theirs = clock.next_at(1, 1_000_000);
        let before = clock.next_at(0, 10);
        assert!(before < theirs);
        clock.observe_at(0, theirs);
        let after = clock.next_at(0, 20);
        assert!(after > theirs, "{after} is not past the observed {theirs}");
    }

    #[test]
    fn basic_ordering_rules() {
        let take = |raise| Verdict::Take {
            raise,
            dirty: false,
        };
        // Reads: too late below wts, wait behind an older pending writer,
        // ignore a younger one, raise rts only when it is below.
        assert_eq!(
            judge(100, false, 0, 104, 0),
            Verdict::Refuse(AbortReason::TimestampOrder)
        );
        assert_eq!(judge(100, false, 96, 92, 0), Verdict::Wait);
        assert_eq!(judge(100, false, 108, 92, 0), take(true));
        assert_eq!(judge(100, false, 0, 92, 112), take(false));
        // Writes, under the lock: rts or wts above ts is too late.
        assert!(writable(100, 7, 7, 96, 100));
        assert!(!writable(100, 7, 7, 104, 0));
        assert!(!writable(100, 7, 7, 96, 104));
        assert!(!writable(100, 7, 8, 96, 96));
        // Cascading: an installed write of an older writer is read, a
        // merely locked one is waited for.
        assert_eq!(
            judge(100, true, 96 | LOCK_INSTALLED, 96, 0),
            Verdict::Take {
                raise: true,
                dirty: true
            }
        );
        assert_eq!(judge(100, true, 96, 92, 0), Verdict::Wait);
    }

    #[test]
    fn a_double_read_stands_only_if_no_older_writer_came_in_between() {
        assert!(still_readable(100, 0, 7, 7, 0));
        assert!(still_readable(100, 104, 7, 7, 0));
        assert!(!still_readable(100, 96, 7, 7, 0));
        assert!(!still_readable(100, 0, 8, 7, 0));
        assert!(still_readable(100, 97, 7, 7, 97));
        assert!(!still_readable(100, 93, 7, 7, 97));
    }

    #[test]
    fn a_writers_outcome_survives_its_next_transaction() {
        let w = 400;
        assert_eq!(outcome_of(w, w | META_RUNNING, 0), META_RUNNING);
        assert_eq!(outcome_of(w, w | META_COMMITTED, 0), META_COMMITTED);
        assert_eq!(outcome_of(w, w | META_ABORTED, w), META_ABORTED);
        // The coroutine has installed again since.
        assert_eq!(outcome_of(w, 800 | META_RUNNING, 200), META_COMMITTED);
        assert_eq!(outcome_of(w, 800 | META_RUNNING, w), META_ABORTED);
        // A later abort hides whether `w` committed: answered aborted.
        assert_eq!(outcome_of(w, 900 | META_ABORTED, 900), META_ABORTED);
    }
}
