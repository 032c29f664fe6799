//! MAAT: optimistic concurrency control with dynamic timestamp intervals
//! (RCBench §6.2.3, Alg. 9–10; Deneva §3.3; Mahmoud et al., "MaaT", VLDB
//! 2014).
//!
//! Every transaction owns an interval `[lb, ub]` of commit timestamps in
//! per-transaction global metadata that other workers READ and CAS
//! (`Protocol::txn_meta_words`). At access time a transaction registers in
//! the tuple's reader or writer list under the tuple's latch and learns who
//! it must be ordered against (Alg. 9 `Read`/`Write`); in validation it
//! narrows its own interval against committed transactions (Eq. 1) and the
//! intervals of running ones against itself (Eq. 2), then *freezes*: it
//! picks `ts = lb` if `lb <= ub` and commits, else aborts (Alg. 10
//! `Validation`, `Commit`); the commit stage installs writes and raises the
//! tuples' `wts`/`rts` to `ts`.
//!
//! Ordering rules (RCBench §6.2.3 and MaaT §3), with `T` the registrant:
//! a reader is ordered before every writer it finds in the writer list (it
//! does not see their writes); a writer is ordered after every reader in the
//! reader list. Every write in verbena is a read-modify-write (the program
//! reads the version it replaces), so a writer also orders itself *both*
//! ways against every writer in the writer list: of two concurrent writers
//! of one tuple at most one commits, which keeps the install order of a
//! tuple's versions (its `seq`) equal to their timestamp order — the order
//! the checker sees. `lb` starts above the `wts` of every tuple accessed and
//! the `rts` of every tuple written.
//!
//! Stages (RCC bits): `read` = 2 (register and fetch), `validate` = 32
//! (interval adjustment and freeze), `log` = 4 (empty without replication),
//! `commit` = 16 (install, raise `wts`/`rts`, leave the lists), `release` = 8
//! (state ABORTED, leave the lists). MaaT has no lock stage (RCBench Alg.
//! 9–10), so `ProtocolKind::stages` lists none for it.
//!
//! * one-sided read: CAS(latch, 0 → owner) + READ(tuple) in one doorbell
//!   batch (FIFO: the READ sees the tuple latched); then WRITE(list entry),
//!   WRITE(latch = 0), passive. A busy latch is retried (yielding) and the
//!   attempt aborts after `LATCH_TRIES`. RPC read: the handler latches with
//!   a local CAS on the same word (or answers `Served::Wait`), registers,
//!   and replies the tuple.
//! * one-sided validate: READ of each other transaction's metadata slot;
//!   CAS of its `ub`/`lb` then FAA(state, 0) and READ(id_end) (Eq. 2);
//!   freeze = CAS(own state, RUNNING → FREEZING) + FAA(lb, 0) + FAA(ub, 0),
//!   then WRITE(state = COMMITTED(ts) or ABORTED). RPC validate: the same
//!   word operations in handlers on the metadata's node.
//! * commit: per tuple, latch (CAS + READ [wts, rts]), then WRITE seq_end,
//!   record, [wts, rts], the list entry, then [seq, latch = 0] (the store's
//!   write-back order), passive; RPC: one handler per node that latches all
//!   its tuples or waits. Release: CAS(entry, txn → 0) per registration (no
//!   latch needed: a registrant only ever writes the one free entry it
//!   chose) and WRITE(state = ABORTED); or the same in handlers.
//!
//! Tuple header (H = 3 + 2·cap words, cap = `maat_list_capacity`): word 0 =
//! latch (0 free, else owner), words 1..=cap = reader list, cap+1..=2·cap =
//! writer list (entries are transaction ids, 0 = free), 2·cap+1 = wts,
//! 2·cap+2 = rts (greatest committed writer's / reader's timestamp).
//!
//! Transaction metadata: a ring of 32 slots per coroutine, slot =
//! `txn counter mod 32`, each `[id, state, lb, ub, id_end]`; state is RUNNING
//! (0), FREEZING (1), ABORTED (2) or `ts << 2 | 3` (COMMITTED at `ts`). A
//! slot is initialised in the first access round by writing `id_end`, then
//! `[state, lb, ub]`, then `id`, against the reader's increasing address
//! order, so a READ with `id == id_end ==` the expected id saw that
//! transaction's words; the ring keeps a finished transaction's verdict
//! readable for its coroutine's next 31 attempts. A reader that finds another
//! id (the slot was reused) aborts itself: it cannot know the verdict.
//!
//! Hybrid handshakes (RCC §5.2), stage pair by stage pair:
//! * read (either form) → commit/release (either form): the read replies
//!   the tuple's slot and the list position it took; that position, kept in
//!   `Access::meta`, is the agreed region a later stage clears (by a store
//!   under the latch at commit, or a CAS `txn → 0` on release) — so a
//!   one-sided commit can leave a list an RPC read entered, and vice versa.
//! * read × commit of other transactions: the tuple latch is one word that a
//!   one-sided CAS and a handler's local CAS both take; a handler that finds
//!   it busy answers `Served::Wait` (never spins), a one-sided taker retries.
//!   Registration and install are therefore exclusive whatever their forms.
//! * read (init) → validate: the metadata slot is initialised in the first
//!   read round, which is awaited, so it precedes this transaction's own
//!   validation in every form; others who reach the slot early see another
//!   id and abort themselves (safe).
//! * validate × validate of another transaction (push against freeze): a
//!   Dekker handshake on two words — the pusher CASes `lb`/`ub` and then
//!   reads `state` with an FAA(0); the freezer CASes `state` and then reads
//!   `lb`/`ub` with FAA(0). These are read-modify-writes in both forms (a
//!   handler uses the same atomics on the same words), so at least one side
//!   sees the other. A pusher that sees FREEZING waits for the verdict and
//!   orders itself by Eq. 1 instead. A one-sided CAS that lost a race is
//!   retried with the value it returned; a handler loops locally.
//!
//! Hence every mix of one-sided and RPC stages is correct; the matrix test
//! runs both pure forms and every single-stage flip.
//!
//! Invariants: intervals only shrink (`lb` grows, `ub` falls), so an order
//! established from stale bounds stays established; a committed `ts` lies in
//! the interval at the freeze; two concurrent writers of one tuple never
//! both commit, so a write installs `seq + 1` of the version it read.
//!
//! Here: the words, the registration at access and the stage order;
//! `validate` holds validation's steps, `finish` the commit and release,
//! `serve` the RPC handlers.

use crate::fabric::{Batch, CallId, NodeId, VerbId};
use crate::store::{NodeStore, TableLayout, HEADER_WORD, SEQ_WORD};
use crate::txn::ids::{self, COUNTER_BITS};
use crate::txn::{AbortReason, TxnCx, TxnResult};

use super::common::kind;
use super::{Protocol, ProtocolKind, Served, Stage};
use crate::txn::kit::{self, status};

/// Metadata slots per coroutine, and their words.
const META_SLOTS: u64 = 32;
const SLOT_WORDS: u64 = 5;
const ID: u64 = 0;
const STATE: u64 = 1;
const LOWER: u64 = 2;
const UPPER: u64 = 3;
const ID_END: u64 = 4;

/// Transaction states (the `state` word).
const RUNNING: u64 = 0;
const FREEZING: u64 = 1;
const ABORTED: u64 = 2;
const COMMITTED_TAG: u64 = 3;
/// The greatest timestamp (the state word keeps two tag bits).
pub const MAX_TS: u64 = u64::MAX >> 2;
/// How far above `lb` a transaction with no upper bound caps itself before
/// pushing later transactions past it.
const SLACK: u64 = 1 << 16;
/// Busy-latch retries before an access aborts.
const LATCH_TRIES: u32 = 256;
/// Rounds validation waits for other transactions' verdicts.
const STATE_TRIES: u32 = 4096;
/// Default list capacity for the static `header_words`.
const DEFAULT_CAPACITY: u32 = 8;

/// Relation flags of a transaction to order against (scratch entries).
const BEFORE: u64 = 1;
const AFTER: u64 = 2;
const DONE: u64 = 4;
/// Scratch: `[floor, (id, flags, state, lb, ub)…]`.
const ENTRY: usize = 5;

/// Register request flags.
const REG_WRITE: u64 = 1;
const REG_UPGRADE: u64 = 2;

/// What an access registers for: a place in the writer list (else the
/// reader list), and whether it upgrades a record read before, whose
/// version must not have changed since.
#[derive(Clone, Copy)]
struct Intent {
    write: bool,
    upgrade: bool,
}

impl Intent {
    /// The flags of a `MAAT_REGISTER` request.
    fn flags(self) -> u64 {
        let write = if self.write { REG_WRITE } else { 0 };
        write | if self.upgrade { REG_UPGRADE } else { 0 }
    }
}

#[inline]
fn committed(ts: u64) -> u64 {
    debug_assert!(ts <= MAX_TS);
    (ts << 2) | COMMITTED_TAG
}

#[inline]
fn committed_ts(state: u64) -> Option<u64> {
    (state & 3 == COMMITTED_TAG).then_some(state >> 2)
}

#[derive(Clone, Debug)]
pub struct Maat {
    /// Entries of each reader and writer list.
    cap: u32,
}

impl Default for Maat {
    fn default() -> Self {
        Maat::new(DEFAULT_CAPACITY)
    }
}

/// Header word offsets for a list capacity.
#[derive(Clone, Copy)]
struct Words {
    cap: u32,
}

impl Words {
    fn of(table: &TableLayout) -> Words {
        Words {
            cap: (table.header_words - 3) / 2,
        }
    }
    fn reader(self, pos: u32) -> u32 {
        1 + pos
    }
    fn writer(self, pos: u32) -> u32 {
        1 + self.cap + pos
    }
    fn wts(self) -> u32 {
        1 + 2 * self.cap
    }
    fn rts(self) -> u32 {
        2 + 2 * self.cap
    }
    /// The header words of the list entries an access holds, reader's
    /// first, from its `meta` (list position + 1 of its reader entry in
    /// bits 0–15, of its writer entry in bits 16–31; 0 for none).
    fn held(self, meta: u64) -> impl Iterator<Item = u32> {
        let reader = meta & 0xffff;
        let writer = (meta >> 16) & 0xffff;
        [
            (reader != 0).then(|| self.reader(reader as u32 - 1)),
            (writer != 0).then(|| self.writer(writer as u32 - 1)),
        ]
        .into_iter()
        .flatten()
    }
}

/// The node and address of transaction `txn`'s metadata slot.
fn slot_of(cx: &TxnCx<'_>, txn: u64) -> (NodeId, u64) {
    let coroutine = (txn >> COUNTER_BITS) as u32;
    let (node, base) = cx.txn_meta_of(ids::lock_owner(coroutine));
    let counter = txn & ((1u64 << COUNTER_BITS) - 1);
    (node, base + (counter % META_SLOTS) * SLOT_WORDS)
}

/// Notes that `txn` must be ordered `relation` this transaction.
fn note(cx: &mut TxnCx<'_>, txn: u64, relation: u64) {
    if txn == 0 || txn == cx.txn_id {
        return;
    }
    let mut at = 1;
    while at < cx.scratch.len() {
        if cx.scratch[at] == txn {
            cx.scratch[at + 1] |= relation;
            return;
        }
        at += ENTRY;
    }
    cx.scratch
        .extend_from_slice(&[txn, relation, RUNNING, 0, MAX_TS]);
}

fn entries(cx: &TxnCx<'_>) -> usize {
    cx.scratch.len().saturating_sub(1) / ENTRY
}

/// Scratch offset of entry `e`.
fn at(e: usize) -> usize {
    1 + e * ENTRY
}

/// Queues the initialisation of this attempt's metadata slot: `id_end`,
/// then `[state, lb, ub]`, then `id` (see the module doc).
fn queue_init_onesided(cx: &TxnCx<'_>, batch: &mut Batch) {
    let (node, slot) = slot_of(cx, cx.txn_id);
    batch.write_word(node, slot + ID_END, cx.txn_id);
    batch.write(node, slot + STATE, &[RUNNING, 0, MAX_TS]);
    batch.write_word(node, slot + ID, cx.txn_id);
}

/// `IntervalEmpty` unless the interval `[lb, ub]` holds a timestamp.
fn nonempty(lb: u64, ub: u64) -> TxnResult<()> {
    if lb > ub {
        return Err(AbortReason::IntervalEmpty);
    }
    Ok(())
}

/// Counts one more round of waiting for other transactions' verdicts:
/// yields the worker before the next, or gives up (`IntervalEmpty`) after
/// `STATE_TRIES`.
async fn wait_a_round(cx: &TxnCx<'_>, rounds: &mut u32) -> TxnResult<()> {
    *rounds += 1;
    if *rounds >= STATE_TRIES {
        return Err(AbortReason::IntervalEmpty);
    }
    cx.worker.yield_now().await;
    Ok(())
}

/// Applies a committed transaction's timestamp to this one's bounds (Eq. 1).
fn order_against_committed(flags: u64, ts: u64, lb: &mut u64, ub: &mut u64) {
    if flags & BEFORE != 0 {
        *lb = (*lb).max(ts + 1);
    }
    if flags & AFTER != 0 {
        *ub = (*ub).min(ts.saturating_sub(1));
        if ts == 0 {
            // Nothing precedes timestamp 0: make the interval empty.
            *lb = (*lb).max(1);
            *ub = 0;
        }
    }
}

impl Maat {
    pub fn new(list_capacity: u32) -> Maat {
        Maat { cap: list_capacity }
    }

    /// Folds a latched tuple's header into this transaction's ordering
    /// state and registers the access (RCBench Alg. 9 lines 7–9, 16–20).
    fn absorb(&self, cx: &mut TxnCx<'_>, index: usize, tuple: &[u64], intent: Intent, pos: u32) {
        let Intent { write, upgrade } = intent;
        let table = cx.table(cx.accesses[index].table);
        let words = Words::of(table);
        let header = &tuple[HEADER_WORD as usize..];
        let cap = words.cap as usize;
        let wts = header[words.wts() as usize];
        let rts = header[words.rts() as usize];
        let mut floor = cx.scratch[0].max(wts + 1);
        if write {
            floor = floor.max(rts + 1);
        }
        cx.scratch[0] = floor;
        let writer_relation = if write { AFTER | BEFORE } else { AFTER };
        for i in 0..cap {
            note(cx, header[words.writer(i as u32) as usize], writer_relation);
            if write {
                note(cx, header[words.reader(i as u32) as usize], BEFORE);
            }
        }
        if write {
            cx.accesses[index].meta |= (pos as u64 + 1) << 16;
        } else {
            cx.accesses[index].meta |= pos as u64 + 1;
        }
        if !upgrade {
            let view = kit::decode(table, tuple);
            debug_assert_eq!(view.seq, view.seq_end, "a latched tuple cannot be torn");
            let seq = view.seq;
            let record_at = table.record_offset() as usize;
            cx.accesses[index].seq = seq;
            cx.record_mut(index)
                .copy_from_slice(&tuple[record_at..record_at + table.record_words as usize]);
        }
    }

    async fn register(&self, cx: &mut TxnCx<'_>, index: usize, intent: Intent) -> TxnResult<()> {
        kit::in_form!(cx, Stage::Read,
            onesided: self.register_onesided(cx, index, intent),
            rpc: self.register_rpc(cx, index, intent))
    }

    async fn register_onesided(
        &self,
        cx: &mut TxnCx<'_>,
        index: usize,
        intent: Intent,
    ) -> TxnResult<()> {
        let Intent { write, upgrade } = intent;
        let (access, table) = kit::locate_onesided(cx, index).await?;
        let words = Words::of(table);
        let latch = table.header_addr(access.slot, 0);
        let mut tries = 0;
        let (cas, read) = loop {
            let init = cx.scratch.is_empty();
            let (cas, read) = {
                let mut batch = cx.round();
                if init {
                    queue_init_onesided(cx, &mut batch);
                }
                kit::queue_cas_then_read_tuple(
                    &mut batch,
                    access.node,
                    table,
                    access.slot,
                    (latch, 0, cx.owner),
                )
            };
            cx.submit().await?;
            if init {
                cx.scratch.push(0);
            }
            if cx.batch().result_word(cas) == 0 {
                break (cas, read);
            }
            tries += 1;
            if tries >= LATCH_TRIES {
                return Err(AbortReason::LockConflict);
            }
            cx.worker.yield_now().await;
        };
        let _ = cas;
        // Latched: choose a list entry and take in the header.
        let outcome = {
            let batch = cx.batch();
            let tuple = batch.result(read);
            debug_assert_eq!(tuple[0], access.key, "location cache entry is stale");
            let header = &tuple[HEADER_WORD as usize..];
            let first = if write {
                words.writer(0)
            } else {
                words.reader(0)
            } as usize;
            let free = header[first..first + words.cap as usize]
                .iter()
                .position(|&e| e == 0);
            if upgrade && tuple[SEQ_WORD as usize] != access.seq {
                Err(AbortReason::ValidationFailed)
            } else if let Some(pos) = free {
                self.absorb(cx, index, tuple, intent, pos as u32);
                Ok(pos as u32)
            } else {
                Err(AbortReason::ListFull)
            }
        };
        {
            let mut batch = cx.round();
            if let Ok(pos) = outcome {
                let word = if write {
                    words.writer(pos)
                } else {
                    words.reader(pos)
                };
                batch.write_word(access.node, table.header_addr(access.slot, word), cx.txn_id);
            }
            batch.write_word(access.node, latch, 0);
        }
        cx.submit_passive();
        outcome.map(|_| ())
    }

    async fn register_rpc(
        &self,
        cx: &mut TxnCx<'_>,
        index: usize,
        intent: Intent,
    ) -> TxnResult<()> {
        let access = cx.accesses[index];
        let init = cx.scratch.is_empty();
        let call = {
            let mut batch = cx.round();
            if init {
                let (node, slot) = slot_of(cx, cx.txn_id);
                let mut payload = batch.payload();
                payload.extend_from_slice(&[slot, cx.txn_id]);
                batch.call(node, kind::MAAT_INIT, payload, false);
            }
            let flags = intent.flags();
            let mut payload = batch.payload();
            payload.extend_from_slice(&[
                access.table as u64,
                access.key,
                cx.txn_id,
                cx.owner,
                flags,
                access.seq,
            ]);
            batch.call(access.node, kind::MAAT_REGISTER, payload, false)
        };
        cx.submit().await?;
        if init {
            cx.scratch.push(0);
        }
        let batch = cx.batch();
        let reply = batch.reply(call);
        kit::remember_reply_slot(cx, index, reply);
        match reply[0] {
            status::OK => {
                self.absorb(cx, index, &reply[3..], intent, reply[2] as u32);
                Ok(())
            }
            status::STALE => Err(AbortReason::ValidationFailed),
            status::NOT_FOUND => Err(AbortReason::NotFound),
            _ => Err(AbortReason::ListFull),
        }
    }
}

mod finish;
mod serve;
mod validate;

impl crate::txn::FromConfig for Maat {
    fn from_config(config: &crate::config::Config) -> Self {
        Maat::new(config.protocol_options.maat_list_capacity)
    }
}

impl Protocol for Maat {
    const KIND: ProtocolKind = ProtocolKind::Maat;
    const ACCESS_STAGE: Stage = Stage::Read;

    fn header_words(_record_words: u32) -> u32 {
        3 + 2 * DEFAULT_CAPACITY
    }

    fn header_words_of(&self, _record_words: u32) -> u32 {
        3 + 2 * self.cap
    }

    fn txn_meta_words(_nodes: u32) -> u32 {
        (META_SLOTS * SLOT_WORDS) as u32
    }

    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let write = cx.accesses[index].write;
        let intent = Intent {
            write,
            upgrade: false,
        };
        self.register(cx, index, intent).await
    }

    async fn upgrade(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let intent = Intent {
            write: true,
            upgrade: true,
        };
        self.register(cx, index, intent).await
    }

    async fn validate(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        if cx.scratch.is_empty() {
            return Ok(());
        }
        let mut lb = cx.scratch[0].max(1);
        let mut ub = MAX_TS;
        // Learn the verdict or the bounds of everyone to order against.
        let mut rounds = 0;
        loop {
            let own = self.fetch(cx).await?;
            lb = lb.max(own.0);
            ub = ub.min(own.1);
            let freezing = Self::settle(cx, &mut lb, &mut ub);
            nonempty(lb, ub)?;
            if !freezing {
                break;
            }
            wait_a_round(cx, &mut rounds).await?;
        }
        // Cap an open interval so later transactions can be pushed past it.
        if ub == MAX_TS {
            ub = lb.saturating_add(SLACK).min(MAX_TS);
        }
        // Eq. 2 on the running ones, with the handshake against their
        // freeze; ones that froze meanwhile are ordered by Eq. 1.
        let mut rounds = 0;
        while (0..entries(cx)).any(|e| cx.scratch[at(e) + 1] & DONE == 0) {
            if ub >= MAX_TS {
                return Err(AbortReason::IntervalEmpty);
            }
            let again = self.push(cx, lb, ub).await?;
            Self::settle(cx, &mut lb, &mut ub);
            nonempty(lb, ub)?;
            if again {
                wait_a_round(cx, &mut rounds).await?;
            }
        }
        match self.freeze(cx, lb, ub).await {
            Some(ts) => {
                cx.timestamp = ts;
                Ok(())
            }
            None => Err(AbortReason::IntervalEmpty),
        }
    }

    async fn commit(&self, cx: &mut TxnCx<'_>) {
        let ts = cx.timestamp;
        kit::in_form!(cx, Stage::Commit,
            onesided: self.finish_onesided(cx, ts),
            rpc: async { self.commit_rpc(cx, ts) });
        for access in cx.accesses.iter_mut() {
            access.meta = 0;
        }
    }

    async fn release(&self, cx: &mut TxnCx<'_>) {
        if cx.scratch.is_empty() {
            return;
        }
        kit::in_form!(cx, Stage::Release,
            onesided: self.release_onesided(cx),
            rpc: self.release_rpc(cx));
        cx.submit_passive();
        for access in cx.accesses.iter_mut() {
            access.meta = 0;
        }
    }

    fn serve(&self, store: &NodeStore, kind: u16, payload: &mut Vec<u64>, _now_ns: u64) -> Served {
        match kind {
            kind::MAAT_INIT => serve::init(store, payload),
            kind::MAAT_REGISTER => serve::register(store, payload),
            kind::MAAT_META_READ => serve::meta_read(store, payload),
            kind::MAAT_PUSH => serve::push(store, payload),
            kind::MAAT_FREEZE => serve::freeze(store, payload),
            kind::MAAT_COMMIT => serve::commit(store, payload),
            kind::MAAT_UNREGISTER => serve::unregister(store, payload),
            kind::MAAT_ABORT => serve::abort(store, payload),
            other => panic!("maat has no RPC handler {other}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_encode_a_commit_timestamp_apart_from_the_other_states() {
        for ts in [0, 1, 12345, MAX_TS] {
            assert_eq!(committed_ts(committed(ts)), Some(ts));
        }
        for state in [RUNNING, FREEZING, ABORTED] {
            assert_eq!(committed_ts(state), None);
        }
    }

    #[test]
    fn a_committed_transaction_bounds_the_interval_on_its_side() {
        let (mut lb, mut ub) = (5, 100);
        order_against_committed(BEFORE, 10, &mut lb, &mut ub);
        assert_eq!((lb, ub), (11, 100));
        order_against_committed(AFTER, 50, &mut lb, &mut ub);
        assert_eq!((lb, ub), (11, 49));
        // Both ways at once: the interval empties (two writers of a tuple).
        order_against_committed(BEFORE | AFTER, 20, &mut lb, &mut ub);
        assert!(lb > ub);
    }
}
