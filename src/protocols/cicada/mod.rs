//! CICADA: multi-version optimistic concurrency control (RCBench §6.2.3,
//! Alg. 11; Lim et al., "Cicada", SIGMOD 2017).
//!
//! Every tuple keeps `cicada_versions` version slots. A transaction gets a
//! unique timestamp `bts` at begin; it reads the version with the greatest
//! write timestamp below `bts` (re-reading a while if it is pending) and,
//! for a write, the latest version, which must be committed and neither
//! written nor read after `bts`. At commit time it installs its writes as
//! PENDING versions stamped `bts` on top of the versions it read (`lock`),
//! checks that each version it read is still the one visible at `bts` and
//! raises its `rts` (`validate`), then flips its versions to COMMITTED
//! (`commit`) or ABORTED (`release`). Timestamps are `clock << 28 |
//! coroutine id` (`Protocol::begin`), unique and increasing per coroutine,
//! fresh on every attempt. The serialization order is `bts`
//! order: a tuple's versions are installed in increasing `wts`, so their
//! `seq` (which each slot keeps, and reads report) follows the same order.
//!
//! Stages (RCC bits): `read` = 2 (one READ of the tuple, RCBench's One-Read
//! principle), `lock` = 1 (latch, re-check the latest version and its
//! `rts`, install the pending version, unlatch: Alg. 11 lines 13–23),
//! `validate` = 32 (latch, re-find the visible version, raise its `rts`,
//! unlatch: lines 24–32), `log` = 4 (empty without replication), `commit` =
//! 16 (mirror the record, status → COMMITTED: line 35), `release` = 8
//! (status → ABORTED).
//!
//! Tuple header (H = 2 + V·(R + 4) words, V = `cicada_versions`, R the
//! record size): word 0 = latch (0 free, else owner), word 1 = `rts` of the
//! loaded base version, then V slots of `[wts, rts, sst, data (R), wts_end]`
//! where `sst` = `seq << 2 | status` (status 0 = empty, 1 pending, 2
//! committed, 3 aborted). While every slot is empty the only version is the
//! loaded one in the tuple's record (`wts` 0, its `rts` in word 1); the first
//! install copies it into slot 0. The tuple's own `seq` and record mirror the
//! latest committed version, which is what the checker and the workload
//! invariants read after the run.
//!
//! Installing into a slot writes `wts_end`, then the data, then `[rts,
//! sst]`, then `wts`, against a reader's increasing address order, so a
//! READ that saw `wts == wts_end` saw that version whole (the store's
//! `seq`/`seq_end` argument, per slot); write timestamps are unique, so a
//! reused slot never shows its old `wts` at both ends. A slot being
//! installed is only ever replaced under the latch, and the slot replaced is
//! an empty or aborted one, else the oldest committed one that is not the
//! latest: the kept versions are always the newest ones.
//!
//! Hybrid handshakes (RCC §5.2), stage pair by stage pair:
//! * read (either form) → lock/validate/commit (either form): every RPC
//!   reply carries the tuple's slot (the location cache fills), and the
//!   read's `seq` is what later stages compare, never a slot index, so a
//!   version read by RPC is validated one-sided and vice versa.
//! * lock (either form) → commit/release (either form): the version slot
//!   the install took is the agreed region — a one-sided install knows it,
//!   an RPC install replies it — kept in `Access::meta`; commit and release
//!   store that slot's `sst`. A one-sided install is awaited before a
//!   commit or release by RPC: the fabric does not order an RPC after a
//!   verb, and a flip landing before the install's WRITEs would leave the
//!   version pending for good.
//! * lock × validate (of any transactions, any forms): both take the
//!   tuple's latch, one word that a one-sided CAS and a handler's local CAS
//!   both take (a handler that finds it busy answers `Served::Wait`, all or
//!   none of its tuples; a one-sided taker retries), so a writer's "no read
//!   after me" check and a reader's "no newer visible version" check are
//!   exclusive — the heart of Cicada's validation.
//! * read × lock/commit: a read takes no latch; the per-slot
//!   `wts`/`wts_end` check (or the base record's `seq`/`seq_end`) finds an
//!   install in progress and the read retries (a handler waits a turn); a
//!   pending version makes a read re-read — one-sided, or by asking the
//!   handler again — up to `PENDING_TRIES` times before it aborts, and a
//!   write abort at once (Alg. 11 lines 2–6, 10).
//!   Status flips and the record mirror need no latch: only the version's
//!   owner writes them, with single-word stores, mirror first, and the next
//!   install on that tuple is refused until the flip (a pending latest
//!   version refuses it).
//!
//! Hence every mix of one-sided and RPC stages is correct; the matrix test
//! runs both pure forms and every single-stage flip.
//!
//! Invariants: at most one pending version per tuple, and it is the latest;
//! a version is installed only on top of the version its writer read, with
//! a `wts` above that version's `wts` and `rts`; a committed read's version
//! is the one visible at `bts` and stays so (its `rts` ≥ `bts` stops later
//! installs below `bts`).
//!
//! Here: the version slots, the visibility and install rules, the fetch;
//! `rounds` holds the commit-time stages, `serve` the RPC handlers.

use crate::fabric::{CallId, VerbId};
use crate::store::{NodeStore, TableLayout, HEADER_WORD, SEQ_WORD};
use crate::txn::{AbortReason, Access, TxnCx, TxnResult};

use super::common::kind;
use super::{Primitive, Protocol, ProtocolKind, Served, Stage};
use crate::txn::kit::{self, status};

const EMPTY: u64 = 0;
const PENDING: u64 = 1;
const COMMITTED: u64 = 2;
const ABORTED: u64 = 3;

/// Header words before the version slots.
const LATCH: u32 = 0;
const BASE_RTS: u32 = 1;
/// Words of a slot besides its data, and their offsets.
const SLOT_EXTRA: u32 = 4;
const S_WTS: usize = 0;
const S_RTS: usize = 1;
const S_SST: usize = 2;
const S_DATA: usize = 3;
/// `Version::slot` of the loaded base version.
const BASE: u32 = u32::MAX;
/// Retries of a torn or pending read, and of a busy latch.
const TRIES: u32 = 1024;
/// Re-reads of a pending version before the read gives up (Alg. 11 waits
/// without bound; a short bound keeps readers from queueing behind a writer
/// whose commit is slow, e.g. an RPC commit on a loaded node).
const PENDING_TRIES: u32 = 16;
/// `CICADA_READ` reply status: the visible version is pending, ask again.
const READ_AGAIN: u64 = 64;
/// Bits of the coroutine id in a timestamp.
const ID_BITS: u32 = 28;
/// The clock part of a timestamp counts 4096 ns units: 36 bits last 78
/// hours, beyond the longest warm-up plus run the config allows (48 h).
const CLOCK_SHIFT: u32 = 12;
const DEFAULT_VERSIONS: u32 = 4;

#[inline]
fn sst(seq: u64, status: u64) -> u64 {
    (seq << 2) | status
}

#[derive(Clone, Debug)]
pub struct Cicada {
    versions: u32,
}

impl Default for Cicada {
    fn default() -> Self {
        Cicada::new(DEFAULT_VERSIONS)
    }
}

/// Where the slots of a table's tuples are.
#[derive(Clone, Copy)]
struct Shape {
    versions: u32,
    record: usize,
}

impl Shape {
    fn of(table: &TableLayout) -> Shape {
        Shape {
            versions: (table.header_words - 2) / (table.record_words + SLOT_EXTRA),
            record: table.record_words as usize,
        }
    }
    /// Offset of slot `v` in the tuple.
    fn slot(self, v: u32) -> usize {
        HEADER_WORD as usize + 2 + v as usize * (self.record + SLOT_EXTRA as usize)
    }
    fn wts_end(self, v: u32) -> usize {
        self.slot(v) + S_DATA + self.record
    }
}

/// One version as seen in a tuple (offsets into the tuple).
#[derive(Clone, Copy, Debug)]
struct Version {
    slot: u32,
    wts: u64,
    rts: u64,
    seq: u64,
    status: u64,
    rts_at: usize,
    data_at: usize,
}

/// The versions of a tuple, read through `get(offset)` (a fetched copy or
/// the region itself).
struct Tuple<'a, G: Fn(usize) -> u64> {
    table: &'a TableLayout,
    shape: Shape,
    get: G,
}

/// A tuple of `table` read into `words` (a fetched or local copy).
fn tuple_in<'a>(table: &'a TableLayout, words: &'a [u64]) -> Tuple<'a, impl Fn(usize) -> u64 + 'a> {
    Tuple {
        table,
        shape: Shape::of(table),
        get: move |i: usize| words[i],
    }
}

impl<G: Fn(usize) -> u64> Tuple<'_, G> {
    fn version(&self, v: u32) -> Version {
        let at = self.shape.slot(v);
        let sst = (self.get)(at + S_SST);
        Version {
            slot: v,
            wts: (self.get)(at + S_WTS),
            rts: (self.get)(at + S_RTS),
            seq: sst >> 2,
            status: sst & 3,
            rts_at: at + S_RTS,
            data_at: at + S_DATA,
        }
    }

    fn base(&self) -> Version {
        Version {
            slot: BASE,
            wts: 0,
            rts: (self.get)(HEADER_WORD as usize + BASE_RTS as usize),
            seq: (self.get)(SEQ_WORD as usize),
            status: COMMITTED,
            rts_at: HEADER_WORD as usize + BASE_RTS as usize,
            data_at: self.table.record_offset() as usize,
        }
    }

    fn all_empty(&self) -> bool {
        (0..self.shape.versions).all(|v| (self.get)(self.shape.slot(v) + S_SST) == EMPTY)
    }

    /// A slot caught mid-install, or a base record mid-write.
    fn torn(&self) -> bool {
        if self.all_empty() {
            return (self.get)(SEQ_WORD as usize)
                != (self.get)(self.table.seq_end_offset() as usize);
        }
        (0..self.shape.versions)
            .any(|v| (self.get)(self.shape.slot(v) + S_WTS) != (self.get)(self.shape.wts_end(v)))
    }

    /// The live (pending or committed) version with the greatest `wts`
    /// below `below`; the base version while every slot is empty.
    fn newest_below(&self, below: u64) -> Option<Version> {
        if self.all_empty() {
            return Some(self.base());
        }
        (0..self.shape.versions)
            .map(|v| self.version(v))
            .filter(|v| (v.status == PENDING || v.status == COMMITTED) && v.wts < below)
            .max_by_key(|v| v.wts)
    }

    fn latest(&self) -> Option<Version> {
        self.newest_below(u64::MAX)
    }

    /// The slot a new version replaces: an empty one, else an aborted one,
    /// else the oldest committed one other than `latest`.
    fn victim(&self, latest: u32) -> u32 {
        let versions = (0..self.shape.versions).map(|v| self.version(v));
        versions
            .clone()
            .find(|v| v.status == EMPTY)
            .or_else(|| versions.clone().find(|v| v.status == ABORTED))
            .or_else(|| {
                versions
                    .filter(|v| v.slot != latest && v.status == COMMITTED)
                    .min_by_key(|v| v.wts)
            })
            .map_or(0, |v| v.slot)
    }
}

/// What a fetch found.
enum Pick {
    Found(Version),
    /// Try again (torn, or the visible version is pending).
    Retry(AbortReason),
    Abort(AbortReason),
}

/// The version an access at `bts` reads: the visible one, or for a write
/// the latest, which must be committed and older than `bts` in `wts` and
/// `rts` (Alg. 11 lines 2–6, 9–10).
fn pick<G: Fn(usize) -> u64>(tuple: &Tuple<'_, G>, bts: u64, write: bool) -> Pick {
    if tuple.torn() {
        return Pick::Retry(AbortReason::ReadInconsistent);
    }
    if write {
        match tuple.latest() {
            Some(v) if v.status == PENDING => Pick::Abort(AbortReason::VersionPending),
            Some(v) if v.wts >= bts || v.rts > bts => Pick::Abort(AbortReason::ValidationFailed),
            Some(v) => Pick::Found(v),
            None => Pick::Abort(AbortReason::VersionUnavailable),
        }
    } else {
        match tuple.newest_below(bts) {
            Some(v) if v.status == PENDING => Pick::Retry(AbortReason::VersionPending),
            Some(v) => Pick::Found(v),
            // Slot 0 may be mid-copy of the base version: look again.
            None if (0..tuple.shape.versions).any(|v| tuple.version(v).status == EMPTY) => {
                Pick::Retry(AbortReason::VersionUnavailable)
            }
            None => Pick::Abort(AbortReason::VersionUnavailable),
        }
    }
}

/// Lock-stage check on a latched tuple: the version written over is still
/// the latest, committed, `seq`, and neither written nor read after `bts`.
/// `Ok(slot to install into)`.
fn check_install<G: Fn(usize) -> u64>(tuple: &Tuple<'_, G>, bts: u64, seq: u64) -> TxnResult<u32> {
    let Some(latest) = tuple.latest() else {
        return Err(AbortReason::VersionUnavailable);
    };
    if latest.status == PENDING {
        return Err(AbortReason::VersionPending);
    }
    if latest.seq != seq || latest.wts >= bts || latest.rts > bts {
        return Err(AbortReason::ValidationFailed);
    }
    Ok(if latest.slot == BASE {
        1
    } else {
        tuple.victim(latest.slot)
    })
}

/// Validate-stage check on a latched tuple: the version visible at `bts` is
/// still the committed one read. `Ok(version)`.
fn check_read<G: Fn(usize) -> u64>(tuple: &Tuple<'_, G>, bts: u64, seq: u64) -> TxnResult<Version> {
    match tuple.newest_below(bts) {
        Some(v) if v.status == COMMITTED && v.seq == seq => Ok(v),
        _ => Err(AbortReason::ValidationFailed),
    }
}

impl Cicada {
    pub fn new(versions: u32) -> Cicada {
        Cicada { versions }
    }

    async fn fetch(&self, cx: &mut TxnCx<'_>, index: usize, write: bool) -> TxnResult<()> {
        kit::in_form!(cx, Stage::Read,
            onesided: self.fetch_onesided(cx, index, write),
            rpc: self.fetch_rpc(cx, index, write))
    }

    async fn fetch_onesided(&self, cx: &mut TxnCx<'_>, index: usize, write: bool) -> TxnResult<()> {
        let (access, table) = kit::locate_onesided(cx, index).await?;
        let shape = Shape::of(table);
        let mut tries = 0;
        loop {
            let read = kit::read_tuple_onesided(cx, index).await?;
            let retry = {
                let batch = cx.batch();
                let words = batch.result(read);
                debug_assert_eq!(words[0], access.key, "location cache entry is stale");
                let tuple = tuple_in(table, words);
                match pick(&tuple, cx.timestamp, write) {
                    Pick::Found(v) => {
                        kit::accept_record(
                            cx,
                            index,
                            v.seq,
                            &words[v.data_at..v.data_at + shape.record],
                        );
                        return Ok(());
                    }
                    Pick::Abort(reason) => return Err(reason),
                    Pick::Retry(reason) => reason,
                }
            };
            tries += 1;
            let limit = if retry == AbortReason::VersionPending {
                PENDING_TRIES
            } else {
                TRIES
            };
            if tries >= limit {
                return Err(retry);
            }
            cx.worker.yield_now().await;
        }
    }

    async fn fetch_rpc(&self, cx: &mut TxnCx<'_>, index: usize, write: bool) -> TxnResult<()> {
        let access = cx.accesses[index];
        let mut tries = 0;
        loop {
            let call = kit::call_one(
                cx,
                access.node,
                kind::CICADA_READ,
                &[access.table as u64, access.key, cx.timestamp, write as u64],
            );
            cx.submit().await?;
            if cx.batch().reply(call)[0] != READ_AGAIN {
                break;
            }
            // The visible version is pending: ask again, as the one-sided
            // read re-reads (Alg. 11 lines 2–6).
            tries += 1;
            if tries >= PENDING_TRIES {
                return Err(AbortReason::VersionPending);
            }
            cx.worker.yield_now().await;
        }
        let batch = cx.batch();
        let reply = batch.reply(CallId(0));
        kit::remember_reply_slot(cx, index, reply);
        match reply[0] {
            status::OK => {
                kit::accept_record(cx, index, reply[2], &reply[3..]);
                Ok(())
            }
            status::NOT_FOUND => Err(AbortReason::NotFound),
            status::PENDING => Err(AbortReason::VersionPending),
            status::UNAVAILABLE => Err(AbortReason::VersionUnavailable),
            _ => Err(AbortReason::ValidationFailed),
        }
    }
}

mod rounds;
mod serve;

impl crate::txn::FromConfig for Cicada {
    fn from_config(config: &crate::config::Config) -> Self {
        Cicada::new(config.protocol_options.cicada_versions)
    }
}

impl Protocol for Cicada {
    const KIND: ProtocolKind = ProtocolKind::Cicada;
    const ACCESS_STAGE: Stage = Stage::Read;

    fn header_words(record_words: u32) -> u32 {
        2 + DEFAULT_VERSIONS * (record_words + SLOT_EXTRA)
    }

    fn header_words_of(&self, record_words: u32) -> u32 {
        2 + self.versions * (record_words + SLOT_EXTRA)
    }

    /// A fresh timestamp per attempt: the clock in 4096 ns units above the
    /// coroutine id (so timestamps are unique), strictly above the
    /// coroutine's previous one.
    fn begin(&self, cx: &mut TxnCx<'_>) {
        let id = cx.owner - 1;
        let max_units = (1u64 << (64 - ID_BITS)) - 1;
        let previous = cx.timestamp >> ID_BITS;
        let units = (cx.now_ns() >> CLOCK_SHIFT)
            .max(previous + 1)
            .min(max_units);
        cx.timestamp = (units << ID_BITS) | id;
    }

    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let write = cx.accesses[index].write;
        self.fetch(cx, index, write).await
    }

    async fn upgrade(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let read = cx.accesses[index].seq;
        self.fetch(cx, index, true).await?;
        if cx.accesses[index].seq != read {
            return Err(AbortReason::ValidationFailed);
        }
        Ok(())
    }

    async fn lock(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        if !cx.accesses.iter().any(|a| a.write) {
            return Ok(());
        }
        kit::in_form!(cx, Stage::Lock,
            onesided: self.install_onesided(cx),
            rpc: self.install_rpc(cx))
    }

    async fn validate(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        kit::in_form!(cx, Stage::Validate,
            onesided: self.validate_onesided(cx),
            rpc: self.validate_rpc(cx))
    }

    async fn commit(&self, cx: &mut TxnCx<'_>) {
        self.finish(cx, true);
    }

    async fn release(&self, cx: &mut TxnCx<'_>) {
        self.finish(cx, false);
    }

    fn serve(&self, store: &NodeStore, kind: u16, payload: &mut Vec<u64>, _now_ns: u64) -> Served {
        match kind {
            kind::CICADA_READ => serve::read(store, payload),
            kind::CICADA_INSTALL => serve::install(store, payload),
            kind::CICADA_VALIDATE => serve::validate(store, payload),
            kind::CICADA_FINISH => serve::finish(store, payload),
            other => panic!("cicada has no RPC handler {other}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{StoreLayout, TableSpec};

    fn layout() -> StoreLayout {
        let spec = TableSpec {
            name: "t",
            record_words: 2,
            capacity_per_node: 4,
        };
        StoreLayout::new(&[spec], |r| Cicada::new(4).header_words_of(r))
    }

    fn put(tuple: &mut [u64], shape: Shape, v: u32, wts: u64, seq: u64, status: u64, data: u64) {
        let at = shape.slot(v);
        tuple[at + S_WTS] = wts;
        tuple[at + S_SST] = sst(seq, status);
        tuple[at + S_DATA] = data;
        tuple[shape.wts_end(v)] = wts;
    }

    fn found<G: Fn(usize) -> u64>(tuple: &Tuple<'_, G>, bts: u64, write: bool) -> Option<u64> {
        match pick(tuple, bts, write) {
            Pick::Found(v) => Some(v.seq),
            _ => None,
        }
    }

    #[test]
    fn reads_see_the_version_visible_at_their_timestamp() {
        let layout = layout();
        let table = layout.table(0);
        let shape = Shape::of(table);
        assert_eq!(shape.versions, 4);
        let mut words = vec![0u64; table.tuple_words as usize];
        words[SEQ_WORD as usize] = 7;
        words[table.seq_end_offset() as usize] = 7;
        {
            // Only the loaded version: everyone reads it, the first install
            // goes to slot 1 (slot 0 receives the loaded version).
            let tuple = tuple_in(table, &words);
            assert_eq!(found(&tuple, 5, false), Some(7));
            assert_eq!(found(&tuple, 5, true), Some(7));
            assert_eq!(check_install(&tuple, 5, 7), Ok(1));
        }
        put(&mut words, shape, 0, 0, 7, COMMITTED, 70);
        put(&mut words, shape, 1, 100, 8, COMMITTED, 80);
        put(&mut words, shape, 2, 200, 9, PENDING, 90);
        {
            let tuple = tuple_in(table, &words);
            assert_eq!(found(&tuple, 50, false), Some(7));
            assert_eq!(found(&tuple, 150, false), Some(8));
            assert!(matches!(
                pick(&tuple, 250, false),
                Pick::Retry(AbortReason::VersionPending)
            ));
            assert!(matches!(
                pick(&tuple, 250, true),
                Pick::Abort(AbortReason::VersionPending)
            ));
            assert_eq!(check_read(&tuple, 150, 8).map(|v| v.slot), Ok(1));
            // A version newer than the one read is visible at 250.
            assert!(check_read(&tuple, 250, 8).is_err());
        }
        put(&mut words, shape, 2, 200, 9, ABORTED, 90);
        {
            let tuple = tuple_in(table, &words);
            // The aborted version is skipped; the install takes the empty slot.
            assert_eq!(found(&tuple, 250, false), Some(8));
            assert_eq!(found(&tuple, 250, true), Some(8));
            assert_eq!(check_install(&tuple, 250, 8), Ok(3));
            // Too old to write over the latest version, or stale.
            assert!(check_install(&tuple, 90, 8).is_err());
            assert!(check_install(&tuple, 250, 7).is_err());
        }
        put(&mut words, shape, 3, 300, 9, COMMITTED, 90);
        put(&mut words, shape, 2, 400, 10, COMMITTED, 100);
        {
            let tuple = tuple_in(table, &words);
            // Full: the oldest committed version (slot 0) is replaced.
            assert_eq!(check_install(&tuple, 500, 10), Ok(0));
            assert_eq!(found(&tuple, 350, false), Some(9));
        }
        // A read rts above the writer's timestamp refuses the install.
        words[shape.slot(2) + S_RTS] = 600;
        {
            let tuple = tuple_in(table, &words);
            assert!(check_install(&tuple, 500, 10).is_err());
        }
        // A slot caught mid-install is torn.
        words[shape.wts_end(1)] = 999;
        let tuple = tuple_in(table, &words);
        assert!(matches!(
            pick(&tuple, 350, false),
            Pick::Retry(AbortReason::ReadInconsistent)
        ));
    }
}
