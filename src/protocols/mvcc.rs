//! MVCC: multi-version timestamp ordering with a fixed number of version
//! slots per tuple (RCC §4.4; RCBench §6.2.2, Alg. 7; Deneva §3.2).
//!
//! Every attempt takes a fresh unique timestamp `ts` (the [`TsClock`] of
//! `timestamp`, with RCC §4.4's clock adjustment: a coroutine moves its
//! clock past every `wts` and `rts` it observes). The serialization order
//! is the timestamp order. A tuple keeps its last `K =
//! ProtocolOptions::mvcc_versions` committed versions, each with the
//! timestamp of its writer (`wts`), in fixed slots inside the tuple, so one
//! READ fetches them all (RCC §4.4: no remote linked list). A reader takes
//! the version with the largest `wts` below its `ts` (RCC Cond R1) — an
//! older one when younger writers have committed since — so reads rarely
//! conflict with writes; a reader aborts only if that version has been
//! overwritten (`version_unavailable`), or waits while a writer older than
//! it is pending on the tuple (Cond R2: that writer's version would be the
//! one to read). A writer must be younger than every reader of the latest
//! version (`rts`) and than its writer (Cond W1) and hold the lock (W2).
//! Writes are buffered and installed at commit, so nobody reads an
//! uncommitted version.
//!
//! Stages (RCC bits): `read` = 2 (execution-phase fetch of a record read
//! only: choose a version; raise `rts` if it is the latest), `lock` = 1
//! (the execution-phase fetch of a record with write intent — RCC §4.4
//! locks it there, W2, and checks W1 under the lock — and at commit: lock
//! the records read first and written later and check W1 again), `log` = 4
//! (empty without replication), `commit` = 16 (install the new version in
//! the oldest slot and as the tuple's record, unlock), `release` = 8
//! (unlock on abort).
//!
//! * one-sided read: one READ of the whole tuple, all versions; refused if
//!   torn (`seq != seq_end`, retried a few times). If the chosen version is
//!   the latest, RCBench's Double-Read raises `rts`: CAS(`rts`), READ(lock)
//!   and READ(`seq`) in one doorbell batch, exactly as in `timestamp` (whose
//!   module doc gives the argument); an older version needs no `rts`: its
//!   successor already exists with a `wts` above the reader's `ts`, and a
//!   new version can only follow the latest.
//! * RPC read: the handler does the same on local memory (CAS on the same
//!   `rts` word) and replies `[status, slot, seq, wts, rts, record…]` with
//!   the chosen version's record and `seq`, or `Served::Wait` while an older
//!   writer holds the lock (the serving event loop's waiting list).
//! * fetch with write intent (update): CAS(lock, 0 → ts) and READ(tuple)
//!   in one doorbell batch (FIFO: the READ sees the tuple under the lock);
//!   the latest version only, refused if the lock is held
//!   (`lock_conflict`) or `ts` is below its `wts` or `rts`
//!   (`timestamp_order`; the lock is kept until release). RPC:
//!   `MVCC_LOCK_READ` does the same on local memory. Holding the lock from
//!   the fetch, a writer makes younger readers wait (Cond R2) instead of
//!   raising `rts` past it, so it is not starved by them.
//! * waiting (Cond R2): as TIMESTAMP's `wait` policy says — RCC's few
//!   polls or `Served::Wait` answers by default, or Deneva's blocking for
//!   a time budget (`ProtocolOptions::pending_write_wait_ns`); then
//!   `read_locked`.
//! * lock (commit, records read first and written later): CAS(lock, 0 →
//!   ts) + READ(`[seq, lock, rts]`) per record (FIFO:
//!   the READ follows the CAS), doorbell batched per node; RPC: one request
//!   per node, CAS and checks done by the handler. Writable iff the CAS won,
//!   `seq` is still the version read, and `rts <= ts`.
//! * commit: per record WRITE `seq_end`, WRITE the slot of the new version
//!   (`[wts = ts, tag, record]`), WRITE the record, WRITE `[seq, lock = 0]`
//!   (passive) — every change between `seq_end` and `seq`, so the store's
//!   tear check covers the version slots too; RPC: one passive request per
//!   node, storing in the same order.
//! * release: `kit::post_release`.
//!
//! Header layout (words after the store's `[key][seq]`): 0 = lock (0 free,
//! else the timestamp of the writer holding it — RCC's `tts`), 1 = `rts`
//! (largest timestamp that read the latest version), then `K` slots of
//! `2 + record_words` words each: `[wts, tag, record…]`. Version `s` lives in
//! slot `s mod K` with `tag = s + 1` (0 = never written); the latest
//! version is also the tuple's record, with the store's `seq` as its
//! number, so the checker and the workload invariants read it as they do
//! for every protocol. The loaded version 0 lives only in the record: once
//! version 1 is installed it is no longer readable (a reader that needs it
//! aborts, as it would after K overwrites). A version's `seq` is what a read
//! reports to the checker.
//!
//! Hybrid handshakes (RCC §5.2): as in `timestamp` — every form acts on the
//! same words with the same atomic steps, the lock word holds the
//! coordinator's timestamp (so a one-sided release frees an RPC-taken lock
//! and an RPC release, a CAS from `ts`, frees a CAS-taken one), and every
//! RPC read replies the slot.
//!
//! Invariants: slots, record, `seq` and `seq_end` change only under the
//! lock, at commit, between the `seq_end` and `seq` stores; the slot of the
//! latest version (`seq > 0`) has `tag = seq + 1`; `wts` grows with the
//! version number; `rts` only grows. Every dependency edge of a committed
//! history goes from a smaller to a larger timestamp.

use crate::config::Config;
use crate::fabric::Batch;
use crate::store::{NodeStore, TableLayout, HEADER_WORD};
use crate::txn::{AbortReason, TxnCx, TxnResult};

use super::common::kind;
use super::timestamp::{
    raise_rts_local, raise_rts_onesided, read_failure, OrderedFetch, PendingWait, ReadTries,
    TsClock, READ_TRIES, TOO_LATE,
};
use super::{Protocol, ProtocolKind, Served, Stage};
use crate::txn::kit::{self, lock_addr, status};

/// Header word of `rts`; the version slots follow it.
const RTS_WORD: u32 = 1;
const FIRST_SLOT_WORD: u32 = 2;

/// Reply status: no slot holds a version old enough.
const NO_VERSION: u64 = 17;

/// Version slots when a caller asks for the header size without an
/// instance (`Protocol::header_words`): the `mvcc_versions` default.
const DEFAULT_VERSIONS: u32 = 4;

pub struct Mvcc {
    pub versions: u32,
    pub clock: TsClock,
    /// How a read waits for an older writer's pending write.
    pending_wait: PendingWait,
}

/// What a read may take from a consistent snapshot of a tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Choice {
    /// The version numbered `seq`, whose record starts at word `record` of
    /// the tuple; raise `rts` first when `raise` (it is the latest).
    Take {
        seq: u64,
        record: usize,
        raise: bool,
    },
    /// A writer older than the reader is pending: fetch again later.
    Wait,
    Refuse(AbortReason),
    /// The snapshot is torn.
    Torn,
}

impl Mvcc {
    pub fn new(config: &Config) -> Mvcc {
        Mvcc {
            versions: config.protocol_options.mvcc_versions,
            clock: TsClock::new(config, 0),
            pending_wait: PendingWait::from_config(config),
        }
    }

    fn slot_words(record_words: u32) -> u32 {
        2 + record_words
    }

    /// Header word where the slot of version `version` starts.
    fn slot_word(&self, table: &TableLayout, version: u64) -> u32 {
        FIRST_SLOT_WORD
            + (version % self.versions as u64) as u32 * Self::slot_words(table.record_words)
    }

    /// `(wts of the latest version, rts)` of a snapshot `words` of a whole
    /// tuple, or `None` if the latest version's slot does not match `seq`.
    fn latest_wts(&self, table: &TableLayout, words: &[u64], seq: u64) -> Option<u64> {
        if seq == 0 {
            return Some(0);
        }
        let at = (HEADER_WORD + self.slot_word(table, seq)) as usize;
        (words[at + 1] == seq + 1).then_some(words[at])
    }

    /// RCC Cond R1/R2 (a read) on a whole-tuple snapshot.
    fn choose(&self, table: &TableLayout, words: &[u64], ts: u64) -> Choice {
        let tuple = kit::decode(table, words);
        if tuple.seq != tuple.seq_end {
            return Choice::Torn;
        }
        let seq = tuple.seq;
        let rts = words[(HEADER_WORD + RTS_WORD) as usize];
        let Some(wts) = self.latest_wts(table, words, seq) else {
            return Choice::Torn;
        };
        let latest = Choice::Take {
            seq,
            record: table.record_offset() as usize,
            raise: rts < ts,
        };
        if tuple.lock != 0 && tuple.lock < ts {
            return Choice::Wait;
        }
        if wts < ts {
            return latest;
        }
        // An older version: the newest one below `ts` still in its slot.
        let oldest = seq.saturating_sub(self.versions as u64 - 1).max(1);
        for version in (oldest..seq).rev() {
            let at = (HEADER_WORD + self.slot_word(table, version)) as usize;
            if words[at + 1] != version + 1 {
                break;
            }
            if words[at] < ts {
                return Choice::Take {
                    seq: version,
                    record: at + 2,
                    raise: false,
                };
            }
        }
        Choice::Refuse(AbortReason::VersionUnavailable)
    }
}

impl OrderedFetch for Mvcc {
    async fn read_onesided(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let (access, table) = kit::locate_onesided(cx, index).await?;
        let ts = cx.timestamp;
        let mut tries = ReadTries::new(self.pending_wait);
        while let Some(read) = tries.next_read(cx, index).await? {
            let (choice, rts) = {
                let batch = cx.batch();
                let words = batch.result(read);
                debug_assert_eq!(
                    words[crate::store::KEY_WORD as usize],
                    access.key,
                    "location cache entry is stale"
                );
                let choice = self.choose(table, words, ts);
                let rts = words[(HEADER_WORD + RTS_WORD) as usize];
                let seq = words[crate::store::SEQ_WORD as usize];
                let wts = self.latest_wts(table, words, seq).unwrap_or(0);
                self.clock.observe(cx, wts.max(rts));
                if let Choice::Take { seq, record, .. } = choice {
                    let record = &words[record..record + table.record_words as usize];
                    kit::accept_record(cx, index, seq, record);
                }
                (choice, rts)
            };
            match choice {
                Choice::Refuse(reason) => return Err(reason),
                Choice::Torn => tries.torn(),
                Choice::Wait => tries.wait(cx).await,
                Choice::Take { raise: false, .. } => return Ok(()),
                Choice::Take { seq, .. } => {
                    let rts_addr = table.header_addr(access.slot, RTS_WORD);
                    if raise_rts_onesided(cx, index, rts_addr, rts, seq, 0).await {
                        return Ok(());
                    }
                    tries.raise_lost();
                }
            }
        }
        Err(tries.failure)
    }

    async fn read_rpc(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let reply = kit::access_reply(cx, index, kind::MVCC_READ, &[cx.timestamp, 0]).await?;
        match reply[0] {
            status::OK => {
                self.clock.observe(cx, reply[3].max(reply[4]));
                kit::accept_record(cx, index, reply[2], &reply[5..]);
                Ok(())
            }
            NO_VERSION => Err(AbortReason::VersionUnavailable),
            other => Err(read_failure(other, false)),
        }
    }

    /// Execution-phase fetch with write intent (RCC §4.4: W2 then W1 under
    /// the lock): CAS(lock, 0 → ts) and READ(tuple) in one doorbell batch
    /// (FIFO: the READ sees the tuple under the lock), then the order check
    /// on the latest version. Holding the lock from here on, no reader
    /// younger than `ts` raises `rts` past it (Cond R2 makes them wait).
    async fn lock_read_onesided(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        super::timestamp::lock_read_onesided(cx, index, &self.clock, |table, words, seq| {
            let wts = self.latest_wts(table, words, seq);
            debug_assert!(wts.is_some(), "the latest version's slot matches seq");
            (
                wts.unwrap_or(u64::MAX),
                words[(HEADER_WORD + RTS_WORD) as usize],
            )
        })
        .await
    }

    async fn lock_read_rpc(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        super::timestamp::lock_read_rpc(cx, index, kind::MVCC_LOCK_READ, &self.clock).await
    }
}

impl Mvcc {
    /// Handler of `MVCC_LOCK_READ`: `[table, key, ts]` → `[status, slot, seq,
    /// wts, rts, record…]`: `OK` (locked, W1 holds), `STALE` (locked, too
    /// late: the requester must release it), or `[LOCKED, slot]`,
    /// `[NOT_FOUND]`.
    fn serve_lock_read(&self, store: &NodeStore, payload: &mut Vec<u64>) {
        let (table_id, key, ts) = (payload[0] as u32, payload[1], payload[2]);
        payload.clear();
        let Some(slot) = kit::find_row(store, table_id, key, payload) else {
            return;
        };
        let table = store.layout.table(table_id);
        if store.region.cas(lock_addr(table, slot), 0, ts) != 0 {
            payload.extend_from_slice(&[status::LOCKED, slot]);
            return;
        }
        // Under the lock nothing but `rts` changes.
        let seq = store.seq(table_id, slot);
        let wts = if seq == 0 {
            0
        } else {
            store
                .region
                .load(table.header_addr(slot, self.slot_word(table, seq)))
        };
        let rts = store.region.load(table.header_addr(slot, RTS_WORD));
        let verdict = if wts < ts && rts <= ts {
            status::OK
        } else {
            status::STALE
        };
        payload.extend_from_slice(&[verdict, slot, seq, wts, rts]);
        kit::push_record(store, table, slot, payload);
    }

    /// Lock stage: locks the records that were read first and written later
    /// (the others were locked when fetched) and checks they are still the
    /// latest version and writable by `ts`.
    async fn lock_onesided(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        let unlocked_write = |a: &crate::txn::Access| a.write && !a.locked;
        cx.collect_nodes(unlocked_write);
        let ts = cx.timestamp;
        kit::queue_lock_then_read_seq(cx, unlocked_write, 3, |cx, a| {
            (lock_addr(cx.table(a.table), a.slot), 0, ts)
        });
        cx.submit().await?;
        kit::judge_locks(cx, |access, previous, words| {
            if previous != 0 {
                return Err(AbortReason::LockConflict);
            }
            access.locked = true;
            // [seq, lock, rts], read after the CAS took the lock.
            if !writable(ts, access.seq, words[0], words[2]) {
                return Err(AbortReason::TimestampOrder);
            }
            Ok(())
        })
    }

    async fn lock_rpc(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        let unlocked_write = |a: &crate::txn::Access| a.write && !a.locked;
        cx.collect_nodes(unlocked_write);
        let ts = [cx.timestamp];
        kit::queue_calls_per_node(cx, kind::MVCC_LOCK, &ts, unlocked_write, |_, a, payload| {
            payload.extend_from_slice(&[a.table as u64, a.slot, a.seq]);
            1
        });
        cx.submit().await?;
        kit::lock_outcome(cx, AbortReason::TimestampOrder)
    }

    /// Commit: installs a new version of every write-set record and unlocks
    /// it, in one passive round.
    fn post_commit(&self, cx: &mut TxnCx<'_>) {
        debug_assert!(
            cx.accesses.iter().all(|a| a.write == a.locked),
            "MVCC commits holding exactly its write set's locks"
        );
        cx.collect_nodes(|a| a.locked);
        if cx.nodes.is_empty() {
            return;
        }
        let form = (
            cx.primitive(Stage::Commit),
            kind::MVCC_COMMIT,
            Some(cx.timestamp),
        );
        let onesided = |cx: &TxnCx<'_>, batch: &mut Batch, index: usize| {
            let access = cx.accesses[index];
            let (node, table, new_seq) = (access.node, cx.table(access.table), access.seq + 1);
            let slot = table.header_addr(access.slot, self.slot_word(table, new_seq));
            batch.write_word(node, kit::seq_end_addr(table, access.slot), new_seq);
            batch.write(node, slot, &[cx.timestamp, new_seq + 1]);
            batch.write(node, slot + 2, cx.record(index));
            batch.write(node, table.record_addr(access.slot), cx.record(index));
            batch.write(node, table.seq_addr(access.slot), &[new_seq, 0]);
        };
        let batch = cx.round();
        kit::post_locked(cx, batch, form, onesided, kit::push_write_back);
    }

    /// Handler of `MVCC_READ`: `[table, key, ts, waits]` → `[status, slot,
    /// seq, wts, rts, record…]` (`[NOT_FOUND]`, or `[status, slot]` on
    /// refusal), or `Served::Wait` (payload untouched) while an older writer
    /// holds the lock.
    fn serve_read(&self, store: &NodeStore, payload: &mut Vec<u64>, now_ns: u64) -> Served {
        let request = [payload[0], payload[1], payload[2], payload[3]];
        let (table_id, key, ts) = (request[0] as u32, request[1], request[2]);
        let Some(slot) = kit::find_row(store, table_id, key, payload) else {
            return Served::Reply;
        };
        let table = store.layout.table(table_id);
        let record_words = table.record_words as usize;
        let mut reply_status = status::INCONSISTENT;
        for _ in 0..READ_TRIES {
            payload.resize(table.tuple_words as usize, 0);
            store.region.read(table.tuple_addr(slot), payload);
            match self.choose(table, payload, ts) {
                Choice::Torn => reply_status = status::INCONSISTENT,
                Choice::Wait => {
                    if let Some(parked) = self.pending_wait.park(payload, &request, 3, now_ns) {
                        return parked;
                    }
                    reply_status = status::LOCKED;
                    break;
                }
                Choice::Refuse(reason) => {
                    reply_status = match reason {
                        AbortReason::LockConflict => status::LOCKED,
                        AbortReason::VersionUnavailable => NO_VERSION,
                        _ => TOO_LATE,
                    };
                    break;
                }
                Choice::Take { seq, record, raise } => {
                    let tuple_seq = payload[crate::store::SEQ_WORD as usize];
                    if raise && !raise_rts_local(store, table, slot, RTS_WORD, ts, tuple_seq, 0) {
                        reply_status = status::LOCKED;
                        continue;
                    }
                    let wts = self.latest_wts(table, payload, tuple_seq).unwrap_or(0);
                    let rts = payload[(HEADER_WORD + RTS_WORD) as usize];
                    let head = [status::OK, slot, seq, wts, rts];
                    kit::reply_with_record(payload, record, record_words, &head);
                    return Served::Reply;
                }
            }
        }
        payload.clear();
        payload.extend_from_slice(&[reply_status, slot]);
        Served::Reply
    }
}

/// Whether a locked record may get a new version from `ts`: nobody
/// installed one since it was read, and no younger transaction read the
/// latest version.
#[inline]
fn writable(ts: u64, read_seq: u64, seq: u64, rts: u64) -> bool {
    seq == read_seq && rts <= ts
}

impl crate::txn::FromConfig for Mvcc {
    fn from_config(config: &crate::config::Config) -> Self {
        Mvcc::new(config)
    }
}

impl Protocol for Mvcc {
    const KIND: ProtocolKind = ProtocolKind::Mvcc;
    const ACCESS_STAGE: Stage = Stage::Read;

    fn header_words(record_words: u32) -> u32 {
        FIRST_SLOT_WORD + DEFAULT_VERSIONS * Self::slot_words(record_words)
    }

    fn header_words_of(&self, record_words: u32) -> u32 {
        FIRST_SLOT_WORD + self.versions * Self::slot_words(record_words)
    }

    /// Unlocked, `rts` 0, and only the latest version readable: in its
    /// slot with `wts` 1 (below every timestamp a transaction takes) and
    /// as the record (the module doc's invariant for `seq > 0`).
    fn recovered_header(table: &TableLayout, tuple: &mut [u64]) {
        let header = HEADER_WORD as usize;
        tuple[header..header + table.header_words as usize].fill(0);
        let seq = tuple[crate::store::SEQ_WORD as usize];
        if seq == 0 {
            return;
        }
        let slot_words = Self::slot_words(table.record_words);
        let versions = (table.header_words - FIRST_SLOT_WORD) / slot_words;
        let slot =
            header + (FIRST_SLOT_WORD + (seq % versions as u64) as u32 * slot_words) as usize;
        let record = table.record_offset() as usize;
        tuple[slot] = 1;
        tuple[slot + 1] = seq + 1;
        let words = table.record_words as usize;
        tuple.copy_within(record..record + words, slot + 2);
    }

    fn begin(&self, cx: &mut TxnCx<'_>) {
        cx.timestamp = self.clock.next(cx);
        cx.owner = cx.timestamp;
    }

    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        self.fetch(cx, index).await
    }

    async fn lock(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        if !cx.accesses.iter().any(|a| a.write && !a.locked) {
            return Ok(());
        }
        kit::in_form!(cx, Stage::Lock,
            onesided: self.lock_onesided(cx),
            rpc: self.lock_rpc(cx))
    }

    async fn commit(&self, cx: &mut TxnCx<'_>) {
        self.post_commit(cx);
    }

    async fn release(&self, cx: &mut TxnCx<'_>) {
        kit::post_release(cx);
    }

    fn serve(&self, store: &NodeStore, kind: u16, payload: &mut Vec<u64>, now_ns: u64) -> Served {
        match kind {
            kind::MVCC_READ => return self.serve_read(store, payload, now_ns),
            kind::MVCC_LOCK_READ => self.serve_lock_read(store, payload),
            kind::MVCC_LOCK => {
                let ts = payload[0];
                kit::serve_lock(store, payload, |table, slot, read_seq| {
                    let seq = store.region.load(table.seq_addr(slot));
                    let rts = store.region.load(table.header_addr(slot, RTS_WORD));
                    writable(ts, read_seq, seq, rts)
                });
            }
            kind::MVCC_COMMIT => {
                let ts = payload[0];
                for entry in kit::write_back_entries(store, &payload[1..]) {
                    let (table, slot, new_seq, record) =
                        (entry.table, entry.slot, entry.new_seq, entry.record);
                    debug_assert_eq!(store.region.load(lock_addr(table, slot)), ts);
                    let version = table.header_addr(slot, self.slot_word(table, new_seq));
                    store.region.store(kit::seq_end_addr(table, slot), new_seq);
                    store.region.write(version, &[ts, new_seq + 1]);
                    store.region.write(version + 2, record);
                    store.region.write(table.record_addr(slot), record);
                    store.region.store(table.seq_addr(slot), new_seq);
                    store.region.store(lock_addr(table, slot), 0);
                }
                payload.clear();
            }
            other => return kit::serve_shared_or_panic(store, other, payload, "mvcc"),
        }
        Served::Reply
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{StoreLayout, TableSpec};

    fn mvcc(versions: u32) -> Mvcc {
        let mut config = Config::default();
        config.protocol_options.mvcc_versions = versions;
        Mvcc::new(&config)
    }

    /// MVCC keeping four versions, and the layout of a one-table store
    /// (record of 2 words) under it.
    fn four_versions() -> (Mvcc, StoreLayout) {
        let mvcc = mvcc(4);
        let layout = layout(&mvcc);
        (mvcc, layout)
    }

    fn layout(mvcc: &Mvcc) -> StoreLayout {
        StoreLayout::new(
            &[TableSpec {
                name: "t",
                record_words: 2,
                capacity_per_node: 4,
            }],
            |r| mvcc.header_words_of(r),
        )
    }

    /// A snapshot of tuple `key = 9` whose versions `first..=latest` were
    /// written by timestamps `10 · version`, with record `[version, version]`.
    fn snapshot(mvcc: &Mvcc, table: &TableLayout, first: u64, latest: u64, lock: u64) -> Vec<u64> {
        let mut words = vec![0; table.tuple_words as usize];
        words[0] = 9;
        words[1] = latest;
        words[HEADER_WORD as usize] = lock;
        for version in first..=latest {
            let at = (HEADER_WORD + mvcc.slot_word(table, version)) as usize;
            words[at..at + 4].copy_from_slice(&[10 * version, version + 1, version, version]);
        }
        let record = table.record_offset() as usize;
        words[record..record + 2].copy_from_slice(&[latest, latest]);
        words[table.seq_end_offset() as usize] = latest;
        words
    }

    #[test]
    fn the_header_holds_every_version_slot() {
        assert_eq!(mvcc(4).header_words_of(8), 2 + 4 * 10);
        assert_eq!(mvcc(2).header_words_of(1), 2 + 2 * 3);
        assert_eq!(Mvcc::header_words(8), mvcc(4).header_words_of(8));
    }

    #[test]
    fn a_reader_takes_the_newest_version_below_its_timestamp() {
        let (m, layout) = four_versions();
        let table = layout.table(0);
        let words = snapshot(&m, table, 3, 6, 0);
        let record = table.record_offset() as usize;
        // Past the latest version: the record, raising rts.
        assert_eq!(
            m.choose(table, &words, 65),
            Choice::Take {
                seq: 6,
                record,
                raise: true
            }
        );
        // Between versions 4 (wts 40) and 5 (wts 50): version 4's slot.
        match m.choose(table, &words, 45) {
            Choice::Take {
                seq: 4,
                record: at,
                raise: false,
            } => assert_eq!(&words[at..at + 2], &[4, 4]),
            other => panic!("{other:?}"),
        }
        // Older than every version still kept.
        assert_eq!(
            m.choose(table, &words, 25),
            Choice::Refuse(AbortReason::VersionUnavailable)
        );
        // An older pending writer makes a reader wait; a younger does not.
        let locked = snapshot(&m, table, 3, 6, 61);
        assert_eq!(m.choose(table, &locked, 65), Choice::Wait);
        assert!(matches!(
            m.choose(table, &locked, 55),
            Choice::Take { seq: 5, .. }
        ));
        // A torn snapshot is refused.
        let mut torn = words.clone();
        torn[table.seq_end_offset() as usize] = 7;
        assert_eq!(m.choose(table, &torn, 65), Choice::Torn);
    }

    #[test]
    fn the_loaded_version_is_readable_until_overwritten() {
        let (m, layout) = four_versions();
        let table = layout.table(0);
        let fresh = snapshot(&m, table, 1, 0, 0);
        assert!(matches!(
            m.choose(table, &fresh, 5),
            Choice::Take { seq: 0, .. }
        ));
        let once = snapshot(&m, table, 1, 1, 0);
        assert_eq!(
            m.choose(table, &once, 5),
            Choice::Refuse(AbortReason::VersionUnavailable)
        );
    }
}
