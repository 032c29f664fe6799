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
//! Writes are buffered in the transaction's copy and installed at commit
//! (the "postponed writes" of RCBench §6.2.2's discussion and §7.6.3), so
//! this is the **no-cascading-abort variant**: nobody ever reads an
//! uncommitted write. A pending write is marked by its writer holding the
//! tuple's lock word, which holds the writer's timestamp; a reader older
//! than the pending writer reads the committed version and is unaffected
//! (the write will be ordered after it), while a younger reader *waits* —
//! one-sided it polls the tuple a bounded number of times with a short
//! sleep, by RPC the handler answers `Served::Wait` so the request sits in
//! the serving event loop's waiting list (RCC §4.3) until the lock is free.
//! `ProtocolOptions::timestamp_cascading_aborts` (readers see uncommitted
//! writes) is refused by config validation: it is not built (see the
//! report of the branch that added this module).
//!
//! Stages (RCC bits): `read` = 2 (execution-phase fetch of every record;
//! read-only records also raise `rts`), `lock` = 1 (at commit: lock the
//! write set and check it is still writable by `ts`), `log` = 4 (empty
//! without replication), `commit` = 16 (install record and `wts`, unlock),
//! `release` = 8 (unlock on abort).
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
//! * write-intent read (update): READ the tuple, refuse it if locked or if
//!   `max(wts, rts) > ts`; `rts` is not raised — the lock stage checks
//!   that the version read is still the current one.
//! * lock: CAS(lock, 0 → ts) + READ(`[seq, lock, wts, rts]`) per record,
//!   doorbell batched per node (the READ follows the CAS: FIFO); RPC: one
//!   request per node, whose handler CASes and checks locally. The record
//!   is writable iff the CAS won, `seq` is the version the transaction
//!   read, and `rts <= ts` (equal: its own read).
//! * commit: per record WRITE `seq_end`, WRITE record, WRITE `wts = ts`,
//!   WRITE `[seq, lock = 0]` (passive; `wts` before `seq` so that a READ
//!   that saw the new `seq` saw the new `wts`); RPC: one passive request
//!   per node storing in the same order.
//! * release: `common::post_release` (WRITE lock = 0, or the shared UNLOCK
//!   handler's CAS `ts → 0`).
//!
//! Header layout (words after the store's `[key][seq]`): 0 = lock (0 free,
//! else the timestamp of the writer holding it), 1 = `wts`, 2 = `rts`.
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
//! never 0. `id_bits` is what the cluster's coroutine count needs, leaving
//! at least 46 bits (19 hours) of ns for the largest allowed cluster;
//! beyond that the time part saturates (and transactions of that coroutine
//! would abort) — a limit a run of that length would hit.
//!
//! Invariants: a tuple's record, `seq` and `wts` change only under its lock
//! and are installed together at commit; `rts` only grows; a committed
//! transaction read, for each record, the version with the largest `wts`
//! below its `ts`, and no version with a `wts` between that and `ts` was
//! installed later (all dependency edges go from smaller to larger
//! timestamps, so the history is serializable in timestamp order).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::config::Config;
use crate::fabric::{CallId, VerbId};
use crate::store::{NodeStore, HEADER_WORD};
use crate::txn::{AbortReason, TxnCx, TxnResult};

use super::common::{self, kind, lock_addr, status};
use super::{Primitive, Protocol, ProtocolKind, Served, Stage};

/// Header word of `wts` and of `rts`.
const WTS_WORD: u32 = 1;
const RTS_WORD: u32 = 2;

/// Reply status: the transaction's timestamp is out of order for the tuple.
pub(super) const TOO_LATE: u64 = 16;

/// Lock reply entries.
const LOCK_OK: u64 = 0;
const LOCK_CONFLICT: u64 = 1;
const LOCK_STALE: u64 = 2;

/// Tries of a one-sided read before it gives up (a wait for an older
/// writer, a torn READ, or a failed double-read each cost one).
pub(super) const READ_TRIES: u32 = 8;
/// Sleep between two tries of a one-sided read waiting for a writer, ns.
pub(super) const READ_WAIT_NS: u64 = 1_000;
/// CAS rounds a double-read spends raising `rts` before giving up.
const RTS_TRIES: u32 = 8;

/// Unique transaction timestamps from the local clock (RCC §4.3: clock
/// time with the coroutine's id in the low bits), with RCC §4.4's
/// adjustment: a coroutine that observes a later timestamp moves its own
/// clock past it.
pub struct TsClock {
    id_bits: u32,
    workers: u64,
    coroutines: u64,
    /// Per coroutine (dense index): the least time part its next timestamp
    /// may take. Only the coroutine's own worker thread touches its entry.
    floor: Box<[AtomicU64]>,
}

impl TsClock {
    pub fn new(config: &Config) -> TsClock {
        let count = config.nodes as u64 * config.workers as u64 * config.coroutines as u64;
        let id_bits = 64 - count.max(2).saturating_sub(1).leading_zeros();
        TsClock {
            id_bits,
            workers: config.workers as u64,
            coroutines: config.coroutines as u64,
            floor: (0..count.max(1)).map(|_| AtomicU64::new(1)).collect(),
        }
    }

    fn index(&self, cx: &TxnCx<'_>) -> usize {
        ((cx.worker.node as u64 * self.workers + cx.worker.worker as u64) * self.coroutines
            + cx.co as u64) as usize
    }

    fn max_time(&self) -> u64 {
        u64::MAX >> self.id_bits
    }

    /// A fresh timestamp for `cx`'s coroutine: later than every timestamp
    /// it took or observed before.
    pub fn next(&self, cx: &TxnCx<'_>) -> u64 {
        let index = self.index(cx);
        let floor = &self.floor[index];
        let time = cx
            .now_ns()
            .max(floor.load(Ordering::Relaxed))
            .min(self.max_time());
        floor.store(time.saturating_add(1), Ordering::Relaxed);
        (time << self.id_bits) | index as u64
    }

    /// Moves `cx`'s coroutine clock past the time of `timestamp`.
    pub fn observe(&self, cx: &TxnCx<'_>, timestamp: u64) {
        let time = timestamp >> self.id_bits;
        self.floor[self.index(cx)].fetch_max(time.saturating_add(1), Ordering::Relaxed);
    }
}

/// What a read may do with a tuple it fetched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// Take it; raise `rts` first when `raise`.
    Take {
        raise: bool,
    },
    /// A pending write older than the reader: fetch again later.
    Wait,
    Refuse(AbortReason),
}

/// Basic T/O's rules for a consistent snapshot of a tuple's header.
fn judge(ts: u64, write: bool, lock: u64, wts: u64, rts: u64) -> Verdict {
    if write {
        if lock != 0 {
            Verdict::Refuse(AbortReason::LockConflict)
        } else if wts > ts || rts > ts {
            Verdict::Refuse(AbortReason::TimestampOrder)
        } else {
            Verdict::Take { raise: false }
        }
    } else if wts > ts {
        Verdict::Refuse(AbortReason::TimestampOrder)
    } else if lock != 0 && lock < ts {
        Verdict::Wait
    } else {
        Verdict::Take { raise: rts < ts }
    }
}

/// The double-read check after raising `rts`: no writer older than `ts`
/// holds the lock, and no version was installed since the first READ.
#[inline]
pub(super) fn still_readable(ts: u64, lock: u64, seq: u64, seen_seq: u64) -> bool {
    (lock == 0 || lock > ts) && seq == seen_seq
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
        cx.submit().await;
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
        return still_readable(ts, lock_now, seq_now, seen_seq);
    }
    false
}

/// The local form of [`raise_rts_onesided`], for RPC handlers: a CAS loop on
/// the same word, then the lock and `seq` loads in the same order.
pub(super) fn raise_rts_local(
    store: &NodeStore,
    rts_addr: u64,
    lock_addr: u64,
    seq_addr: u64,
    ts: u64,
    seen_seq: u64,
) -> bool {
    let mut current = store.region.load(rts_addr);
    while current < ts {
        let previous = store.region.cas(rts_addr, current, ts);
        if previous == current {
            break;
        }
        current = previous;
    }
    let lock = store.region.load(lock_addr);
    let seq = store.region.load(seq_addr);
    still_readable(ts, lock, seq, seen_seq)
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

pub struct Timestamp {
    pub clock: TsClock,
}

impl Timestamp {
    pub fn new(config: &Config) -> Timestamp {
        Timestamp {
            clock: TsClock::new(config),
        }
    }

    async fn read_onesided(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        common::locate_onesided(cx, index).await?;
        let access = cx.accesses[index];
        let table = cx.table(access.table);
        let ts = cx.timestamp;
        let mut failure = AbortReason::ReadLocked;
        for _ in 0..READ_TRIES {
            let read = cx.round().read(
                access.node,
                table.tuple_addr(access.slot),
                table.tuple_words,
            );
            cx.submit().await;
            let (verdict, seq, rts) = {
                let batch = cx.batch();
                let words = batch.result(read);
                let tuple = common::decode(table, words);
                debug_assert_eq!(tuple.key, access.key, "location cache entry is stale");
                let wts = words[(HEADER_WORD + WTS_WORD) as usize];
                let rts = words[(HEADER_WORD + RTS_WORD) as usize];
                self.clock.observe(cx, wts.max(rts));
                let verdict = if tuple.seq != tuple.seq_end {
                    None
                } else {
                    Some(judge(ts, access.write, tuple.lock, wts, rts))
                };
                if let Some(Verdict::Take { .. }) = verdict {
                    common::accept_record(cx, index, tuple.seq, tuple.record);
                }
                (verdict, tuple.seq, rts)
            };
            match verdict {
                Some(Verdict::Refuse(reason)) => return Err(reason),
                None => failure = AbortReason::ReadInconsistent,
                Some(Verdict::Wait) => {
                    failure = AbortReason::ReadLocked;
                    cx.worker.sleep(cx.co, READ_WAIT_NS).await;
                }
                Some(Verdict::Take { raise: false }) => return Ok(()),
                Some(Verdict::Take { raise: true }) => {
                    let rts_addr = table.header_addr(access.slot, RTS_WORD);
                    if raise_rts_onesided(cx, index, rts_addr, rts, seq).await {
                        return Ok(());
                    }
                    failure = AbortReason::ReadLocked;
                }
            }
        }
        Err(failure)
    }

    async fn read_rpc(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let access = cx.accesses[index];
        let call = common::call_one(
            cx,
            access.node,
            kind::TS_READ,
            &[
                access.table as u64,
                access.key,
                cx.timestamp,
                access.write as u64,
            ],
        );
        cx.submit().await;
        let batch = cx.batch();
        let reply = batch.reply(call);
        if reply[0] != status::NOT_FOUND {
            cx.remember_slot(index, reply[1]);
        }
        if reply[0] != status::OK {
            return Err(read_failure(reply[0], access.write));
        }
        self.clock.observe(cx, reply[3].max(reply[4]));
        common::accept_record(cx, index, reply[2], &reply[5..]);
        Ok(())
    }

    async fn lock_onesided(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        cx.collect_nodes(|a| a.write);
        let ts = cx.timestamp;
        {
            let mut batch = cx.round();
            cx.queued.clear();
            for &node in &cx.nodes {
                for (index, access) in cx.accesses.iter().enumerate() {
                    if !(access.write && access.node == node) {
                        continue;
                    }
                    let table = cx.table(access.table);
                    let cas = batch.cas(node, lock_addr(table, access.slot), 0, ts);
                    batch.read(node, table.seq_addr(access.slot), 4);
                    cx.queued.push((index, cas.0));
                }
            }
        }
        cx.submit().await;
        let batch = cx.batch();
        let mut outcome = Ok(());
        for &(index, cas) in &cx.queued {
            if batch.result_word(VerbId(cas)) != 0 {
                outcome = outcome.and(Err(AbortReason::LockConflict));
                continue;
            }
            cx.accesses[index].locked = true;
            // [seq, lock, wts, rts], read after the CAS took the lock.
            let words = batch.result(VerbId(cas + 1));
            if !writable(ts, cx.accesses[index].seq, words[0], words[2], words[3]) {
                outcome = outcome.and(Err(AbortReason::TimestampOrder));
            }
        }
        outcome
    }

    async fn lock_rpc(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        cx.collect_nodes(|a| a.write);
        {
            let mut batch = cx.round();
            cx.queued.clear();
            for (n, &node) in cx.nodes.iter().enumerate() {
                let mut payload = batch.payload();
                payload.push(cx.timestamp);
                let mut position = 0u32;
                for (index, access) in cx.accesses.iter().enumerate() {
                    if access.write && access.node == node {
                        payload.extend_from_slice(&[access.table as u64, access.slot, access.seq]);
                        cx.queued.push((index, ((n as u32) << 16) | position));
                        position += 1;
                    }
                }
                batch.call(node, kind::TS_LOCK, payload, false);
            }
        }
        cx.submit().await;
        let batch = cx.batch();
        let mut outcome = Ok(());
        for &(index, at) in &cx.queued {
            let reply = batch.reply(CallId((at >> 16) as u16));
            match reply[(at & 0xffff) as usize] {
                LOCK_OK => cx.accesses[index].locked = true,
                LOCK_STALE => {
                    cx.accesses[index].locked = true;
                    outcome = outcome.and(Err(AbortReason::TimestampOrder));
                }
                _ => outcome = outcome.and(Err(AbortReason::LockConflict)),
            }
        }
        outcome
    }

    /// Commit: installs every write-set record with `wts = ts` and unlocks
    /// it, in one passive round.
    fn post_commit(&self, cx: &mut TxnCx<'_>) {
        debug_assert!(
            cx.accesses.iter().all(|a| a.write == a.locked),
            "T/O commits holding exactly its write set's locks"
        );
        cx.collect_nodes(|a| a.locked);
        if cx.nodes.is_empty() {
            return;
        }
        let primitive = cx.primitive(Stage::Commit);
        let ts = cx.timestamp;
        let mut batch = cx.round();
        for &node in &cx.nodes {
            let mut payload: Option<Vec<u64>> = None;
            for (index, access) in cx.accesses.iter().enumerate() {
                if access.node != node || !access.locked {
                    continue;
                }
                let table = cx.table(access.table);
                let new_seq = access.seq + 1;
                match primitive {
                    Primitive::OneSided => {
                        let tuple = table.tuple_addr(access.slot);
                        batch.write_word(node, tuple + table.seq_end_offset() as u64, new_seq);
                        batch.write(node, table.record_addr(access.slot), cx.record(index));
                        batch.write_word(node, table.header_addr(access.slot, WTS_WORD), ts);
                        batch.write(node, table.seq_addr(access.slot), &[new_seq, 0]);
                    }
                    Primitive::Rpc => {
                        let payload = payload.get_or_insert_with(|| {
                            let mut payload = batch.payload();
                            payload.push(ts);
                            payload
                        });
                        payload.extend_from_slice(&[access.table as u64, access.slot, new_seq]);
                        payload.extend_from_slice(cx.record(index));
                    }
                }
            }
            if let Some(payload) = payload {
                batch.call(node, kind::TS_COMMIT, payload, true);
            }
        }
        drop(batch);
        for access in cx.accesses.iter_mut() {
            access.locked = false;
        }
        cx.submit_passive();
    }
}

/// Whether a locked record may be overwritten by `ts`: nobody installed a
/// version since it was read, and no younger transaction read it.
#[inline]
fn writable(ts: u64, read_seq: u64, seq: u64, wts: u64, rts: u64) -> bool {
    seq == read_seq && wts < ts && rts <= ts
}

impl Protocol for Timestamp {
    const KIND: ProtocolKind = ProtocolKind::Timestamp;
    const ACCESS_STAGE: Stage = Stage::Read;

    fn header_words(_record_words: u32) -> u32 {
        3
    }

    fn begin(&self, cx: &mut TxnCx<'_>) {
        cx.timestamp = self.clock.next(cx);
        cx.owner = cx.timestamp;
    }

    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        match cx.primitive(Stage::Read) {
            Primitive::OneSided => self.read_onesided(cx, index).await,
            Primitive::Rpc => self.read_rpc(cx, index).await,
        }
    }

    async fn lock(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        if !cx.accesses.iter().any(|a| a.write) {
            return Ok(());
        }
        match cx.primitive(Stage::Lock) {
            Primitive::OneSided => self.lock_onesided(cx).await,
            Primitive::Rpc => self.lock_rpc(cx).await,
        }
    }

    async fn commit(&self, cx: &mut TxnCx<'_>) {
        self.post_commit(cx);
    }

    async fn release(&self, cx: &mut TxnCx<'_>) {
        common::post_release(cx);
    }

    fn serve(&self, store: &NodeStore, kind: u16, payload: &mut Vec<u64>) -> Served {
        match kind {
            kind::TS_READ => return serve_read(store, payload),
            kind::TS_LOCK => {
                let ts = payload[0];
                let entries = (payload.len() - 1) / 3;
                for entry in 0..entries {
                    let at = 1 + 3 * entry;
                    let table = store.layout.table(payload[at] as u32);
                    let (slot, read_seq) = (payload[at + 1], payload[at + 2]);
                    payload[entry] = if store.region.cas(lock_addr(table, slot), 0, ts) != 0 {
                        LOCK_CONFLICT
                    } else {
                        let seq = store.region.load(table.seq_addr(slot));
                        let wts = store.region.load(table.header_addr(slot, WTS_WORD));
                        let rts = store.region.load(table.header_addr(slot, RTS_WORD));
                        if writable(ts, read_seq, seq, wts, rts) {
                            LOCK_OK
                        } else {
                            LOCK_STALE
                        }
                    };
                }
                payload.truncate(entries);
            }
            kind::TS_COMMIT => {
                let ts = payload[0];
                let mut at = 1;
                while at < payload.len() {
                    let table = store.layout.table(payload[at] as u32);
                    let (slot, new_seq) = (payload[at + 1], payload[at + 2]);
                    let record = &payload[at + 3..at + 3 + table.record_words as usize];
                    debug_assert_eq!(store.region.load(lock_addr(table, slot)), ts);
                    store.region.store(
                        table.tuple_addr(slot) + table.seq_end_offset() as u64,
                        new_seq,
                    );
                    store.region.write(table.record_addr(slot), record);
                    store.region.store(table.header_addr(slot, WTS_WORD), ts);
                    store.region.store(table.seq_addr(slot), new_seq);
                    store.region.store(lock_addr(table, slot), 0);
                    at += 3 + table.record_words as usize;
                }
                payload.clear();
            }
            other => assert!(
                common::serve_shared(store, other, payload),
                "timestamp has no RPC handler {other}"
            ),
        }
        Served::Reply
    }
}

/// Handler of `TS_READ`: `[table, key, ts, write]` → `[status, slot, seq,
/// wts, rts, record…]` (`[NOT_FOUND]`, or `[status, slot]` on refusal), or
/// `Served::Wait` (payload untouched) while an older writer holds the lock.
fn serve_read(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let (table_id, key, ts, write) = (payload[0] as u32, payload[1], payload[2], payload[3] != 0);
    let Some(slot) = store.lookup(table_id, key) else {
        payload.clear();
        payload.push(status::NOT_FOUND);
        return Served::Reply;
    };
    let table = store.layout.table(table_id);
    let region = &store.region;
    let record_words = table.record_words as usize;
    let mut reply_status = status::INCONSISTENT;
    let (mut seq, mut wts, mut rts) = (0, 0, 0);
    // Scratch for the record: the reply buffer past its 5 leading words.
    let mut words = std::mem::take(payload);
    words.clear();
    words.resize(5 + record_words, 0);
    for _ in 0..READ_TRIES {
        // The same word order as a READ: seq, header, record, seq_end.
        seq = region.load(table.seq_addr(slot));
        let lock = region.load(lock_addr(table, slot));
        wts = region.load(table.header_addr(slot, WTS_WORD));
        rts = region.load(table.header_addr(slot, RTS_WORD));
        region.read(table.record_addr(slot), &mut words[5..]);
        let seq_end = region.load(table.tuple_addr(slot) + table.seq_end_offset() as u64);
        if seq != seq_end {
            reply_status = status::INCONSISTENT;
            continue;
        }
        match judge(ts, write, lock, wts, rts) {
            Verdict::Refuse(reason) => {
                reply_status = refusal_status(reason);
                break;
            }
            Verdict::Wait => {
                // Leave the request as it came, to be offered again.
                words.clear();
                words.extend_from_slice(&[table_id as u64, key, ts, write as u64]);
                *payload = words;
                return Served::Wait;
            }
            Verdict::Take { raise } => {
                let rts_addr = table.header_addr(slot, RTS_WORD);
                if !raise
                    || raise_rts_local(
                        store,
                        rts_addr,
                        lock_addr(table, slot),
                        table.seq_addr(slot),
                        ts,
                        seq,
                    )
                {
                    reply_status = status::OK;
                    break;
                }
                reply_status = status::LOCKED;
            }
        }
    }
    if reply_status == status::OK {
        words[..5].copy_from_slice(&[status::OK, slot, seq, wts, rts]);
    } else {
        words.clear();
        words.extend_from_slice(&[reply_status, slot]);
    }
    *payload = words;
    Served::Reply
}
