//! Stage pieces that several protocols share: index lookup by one-sided
//! READs, tuple decoding, and the update-and-unlock commit and the unlock
//! release of the lock-word protocols (RCC §4.2 Fig. 5; DrTM+H §5.3), each in
//! one-sided and RPC form, with their RPC handlers.
//!
//! Commit write-back order, which `store`'s tear check relies on: a WRITE of
//! `seq_end`, then a WRITE of the record, then one WRITE of the adjacent
//! words `[seq, lock = 0]` — three verbs in one doorbell batch, FIFO on the
//! queue pair (the RPC handler stores in the same order). The trailer is
//! written first and the header last, against the reader's increasing
//! address order, so a READ that saw any new record word also saw the new
//! `seq_end`, and one that saw the new `seq` saw the whole new record: a
//! reader that sees `seq == seq_end` read one version only.
//!
//! Both commit and release use passive ACK (DrTM+H §3.2, §5.3): the
//! coordinator does not wait for them; the runtime drains them before the
//! run ends.

use std::cell::RefMut;

use crate::fabric::{Batch, CallId, NodeId, VerbId};
use crate::store::index::{IndexLayout, BUCKET_WORDS};
use crate::store::{NodeStore, TableLayout, KEY_WORD, SEQ_WORD};
use crate::txn::{AbortReason, Access, TxnCx, TxnResult};

use super::{Primitive, Stage};

/// RPC handler kinds, in the protocols' range of `base::rpc_kind`. Shared
/// ones first; each protocol owns a decade.
pub mod kind {
    /// Declares the kinds and [`ALL`], which the build checks against the
    /// protocols' range: in it, and no two equal.
    macro_rules! kinds {
        ($($(#[$doc:meta])* $name:ident = $value:expr;)*) => {
            $($(#[$doc])* pub const $name: u16 = $value;)*
            /// Every kind above.
            pub const ALL: &[u16] = &[$($name),*];
            const _: () = crate::base::rpc_kind::PROTOCOLS.check(ALL);
        };
    }

    kinds! {
        WRITE_BACK = 1;
        UNLOCK = 2;
        /// The 2PL family (`lock2pl`: NO_WAIT, WAIT_DIE, WOUND_WAIT): 10–19.
        NO_WAIT_LOCK_READ = 10;
        LOCK2PL_UPGRADE = 11;
        LOCK2PL_UNLOCK_SHARED = 12;
        LOCK2PL_STATUS_CAS = 13;
        /// WOUND_WAIT by RPC: wound a holder and learn where it waits.
        LOCK2PL_WOUND = 14;
        /// WOUND_WAIT by RPC: answer a wounded waiter's parked request.
        LOCK2PL_WAKE = 15;
        OCC_READ = 20;
        OCC_LOCK = 21;
        OCC_VALIDATE = 22;
        TS_READ = 40;
        TS_LOCK = 41;
        TS_COMMIT = 42;
        TS_LOCK_FETCH = 43;
        TS_INSTALL = 44;
        TS_OUTCOME = 45;
        TS_LOCK_READ = 46;
        MVCC_READ = 50;
        MVCC_LOCK = 51;
        MVCC_COMMIT = 52;
        MVCC_LOCK_READ = 53;
        MAAT_INIT = 60;
        MAAT_REGISTER = 61;
        MAAT_META_READ = 62;
        MAAT_PUSH = 63;
        MAAT_FREEZE = 64;
        MAAT_COMMIT = 65;
        MAAT_UNREGISTER = 66;
        MAAT_ABORT = 67;
        CICADA_READ = 70;
        CICADA_INSTALL = 71;
        CICADA_VALIDATE = 72;
        CICADA_FINISH = 73;
        SUNDIAL_READ = 80;
        SUNDIAL_LOCK = 81;
        SUNDIAL_RENEW = 82;
        SUNDIAL_WRITE_BACK = 83;
        SUNDIAL_RELEASE = 84;
        /// `protocol_options.sundial_lock_at_access`: lock & read at access.
        SUNDIAL_LOCK_READ = 85;
        DRTM_ACCESS = 110;
    }
}

/// Status words in RPC replies.
pub mod status {
    pub const OK: u64 = 0;
    pub const LOCKED: u64 = 1;
    pub const NOT_FOUND: u64 = 2;
    pub const INCONSISTENT: u64 = 3;
    pub const STALE: u64 = 4;
    pub const FULL: u64 = 5;
    pub const PENDING: u64 = 6;
    pub const UNAVAILABLE: u64 = 7;
}

/// Address of the lock word: protocol header word 0.
#[inline]
pub fn lock_addr(table: &TableLayout, slot: u64) -> u64 {
    table.header_addr(slot, 0)
}

/// A fetched tuple, decoded.
pub struct TupleView<'a> {
    pub key: u64,
    pub seq: u64,
    pub seq_end: u64,
    pub lock: u64,
    pub record: &'a [u64],
}

pub fn decode<'a>(table: &TableLayout, tuple: &'a [u64]) -> TupleView<'a> {
    debug_assert_eq!(tuple.len(), table.tuple_words as usize);
    let record = table.record_offset() as usize;
    TupleView {
        key: tuple[KEY_WORD as usize],
        seq: tuple[SEQ_WORD as usize],
        seq_end: tuple[table.seq_end_offset() as usize],
        lock: tuple[table.record_offset() as usize - table.header_words as usize],
        record: &tuple[record..record + table.record_words as usize],
    }
}

/// Runs a stage in the form the run's plan gives it (`TxnCx::primitive`):
/// `in_form!(cx, stage, onesided: A, rpc: B)` awaits the future `A` or the
/// future `B`, and builds only the one it awaits, so both may borrow `cx`.
/// Every stage with both forms chooses here, so no protocol decides the
/// form on its own.
macro_rules! in_form {
    ($cx:ident, $stage:expr, onesided: $onesided:expr, rpc: $rpc:expr $(,)?) => {
        match $cx.primitive($stage) {
            $crate::base::Primitive::OneSided => $onesided.await,
            $crate::base::Primitive::Rpc => $rpc.await,
        }
    };
}
pub(crate) use in_form;

/// Makes `cx.accesses[index].slot` known: a location-cache hit costs
/// nothing; a miss probes the three cuckoo buckets with one doorbell batch of
/// READs (one round trip) and fills the cache.
pub async fn locate_onesided(cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
    if cx.locate_cached(index) {
        return Ok(());
    }
    let access = cx.accesses[index];
    let table = cx.table(access.table);
    let reads = {
        let mut batch = cx.round();
        table
            .index
            .candidates(access.key)
            .map(|bucket| batch.read(access.node, bucket, BUCKET_WORDS as u32))
    };
    cx.submit().await?;
    let found = {
        let batch = cx.batch();
        reads
            .iter()
            .find_map(|&id| IndexLayout::find_in_bucket(access.key, batch.result(id)))
    };
    match found {
        Some(slot) => {
            cx.remember_slot(index, slot);
            Ok(())
        }
        None => Err(AbortReason::NotFound),
    }
}

/// After an RPC access's reply `[status, slot, …]`: keeps the slot the
/// serving node found, in the access and in the location cache (which RPC
/// replies refill too, DrTM+H §5.1), unless it found no such row.
pub fn remember_reply_slot(cx: &mut TxnCx<'_>, index: usize, reply: &[u64]) {
    if reply[0] != status::NOT_FOUND {
        cx.remember_slot(index, reply[1]);
    }
}

/// The RPC access of `cx.accesses[index]`: one call of `kind` to its node
/// with `[table, key, extra…]`, awaited; the slot the reply names
/// (`[status, slot, …]`) is kept as [`remember_reply_slot`] does. Returns
/// the call, whose reply `cx.batch()` holds.
pub async fn call_access(
    cx: &mut TxnCx<'_>,
    index: usize,
    kind: u16,
    extra: &[u64],
) -> TxnResult<crate::fabric::CallId> {
    let access = cx.accesses[index];
    let call = {
        let mut batch = cx.round();
        let mut payload = batch.payload();
        payload.extend_from_slice(&[access.table as u64, access.key]);
        payload.extend_from_slice(extra);
        batch.call(access.node, kind, payload, false)
    };
    cx.submit().await?;
    let batch = cx.batch();
    remember_reply_slot(cx, index, batch.reply(call));
    Ok(call)
}

/// Copies a fetched record into the access's copy and notes its version.
pub fn accept_record(cx: &mut TxnCx<'_>, index: usize, seq: u64, record: &[u64]) {
    cx.accesses[index].seq = seq;
    cx.record_mut(index).copy_from_slice(record);
}

/// Appends CAS(`word`, `expected` → `desired`) and a READ of the whole
/// tuple at `slot` on `node` to `batch`, in that order: the queue pair's
/// FIFO makes the READ see the tuple as the CAS left it, so one round both
/// takes a lock word and fetches what it guards (or shows who holds it).
pub fn queue_cas_then_read_tuple(
    batch: &mut Batch,
    node: NodeId,
    table: &TableLayout,
    slot: u64,
    (word, expected, desired): (u64, u64, u64),
) -> (VerbId, VerbId) {
    let cas = batch.cas(node, word, expected, desired);
    let read = batch.read(node, table.tuple_addr(slot), table.tuple_words);
    (cas, read)
}

/// Queues on `cx`'s round, per node in `cx.nodes` and each access there
/// that `pick` selects, a CAS of its lock word (`lock` gives `(address,
/// expected, desired)`), then a READ of `read_words` words from its `seq`:
/// FIFO on the queue pair, so the READ sees the tuple as the CAS left it.
/// `cx.queued` gets `(access index, the CAS's verb id)`; the READ is the
/// next verb.
pub fn queue_lock_then_read_seq(
    cx: &mut TxnCx<'_>,
    pick: impl Fn(&Access) -> bool,
    read_words: u32,
    lock: impl Fn(&TxnCx<'_>, &Access) -> (u64, u64, u64),
) {
    let mut batch = cx.round();
    cx.queued.clear();
    for n in 0..cx.nodes.len() {
        let node = cx.nodes[n];
        for index in 0..cx.accesses.len() {
            let access = cx.accesses[index];
            if !(pick(&access) && access.node == node) {
                continue;
            }
            let (word, expected, desired) = lock(cx, &access);
            let cas = batch.cas(node, word, expected, desired);
            let table = cx.table(access.table);
            batch.read(node, table.seq_addr(access.slot), read_words);
            cx.queued.push((index, cas.0));
        }
    }
}

/// Posts the verbs queued in `cx`'s round that this attempt's commit or
/// release must find in place. The fabric orders verbs after verbs and
/// RPCs after RPCs, not an RPC after a verb: where commit or release may go
/// by RPC, the round is awaited (a commit or release landing before these
/// WRITEs would be overtaken by them); otherwise it goes passive, FIFO
/// before the later stages' verbs.
pub async fn submit_before_commit(cx: &mut TxnCx<'_>) -> TxnResult<()> {
    if cx.primitive(Stage::Commit) == Primitive::Rpc
        || cx.primitive(Stage::Release) == Primitive::Rpc
    {
        cx.submit().await
    } else {
        cx.submit_passive();
        Ok(())
    }
}

/// Appends the one-sided update-and-unlock of access `index` to `batch`.
pub fn queue_write_back_onesided(cx: &TxnCx<'_>, batch: &mut Batch, index: usize) {
    let access = &cx.accesses[index];
    let table = cx.table(access.table);
    let new_seq = access.seq + 1;
    let tuple = table.tuple_addr(access.slot);
    debug_assert_eq!(
        lock_addr(table, access.slot),
        table.seq_addr(access.slot) + 1
    );
    batch.write_word(access.node, tuple + table.seq_end_offset() as u64, new_seq);
    batch.write(
        access.node,
        table.record_addr(access.slot),
        cx.record(index),
    );
    batch.write(access.node, table.seq_addr(access.slot), &[new_seq, 0]);
}

/// Commit stage of the lock-word protocols: every locked write-set record is
/// written back and unlocked (commit primitive); every other locked record is
/// unlocked (release primitive). Posted with passive ACK.
pub fn post_commit(cx: &mut TxnCx<'_>) {
    post_unlock(cx, true, |_, _| false);
}

/// Release stage: unlock every record the attempt holds locked (abort path),
/// with passive ACK.
pub fn post_release(cx: &mut TxnCx<'_>) {
    post_unlock(cx, false, |_, _| false);
}

/// One passive round that frees every lock the attempt holds, writing back
/// the write set first when `install` (commit) — per node, one-sided verbs,
/// or at most one `WRITE_BACK`, one `UNLOCK` and one
/// `LOCK2PL_UNLOCK_SHARED` call. Written records use the commit primitive,
/// the others the release primitive. A record for which `shared` holds is
/// held in a shared lock word (`lock2pl`, E/S mode): its unlock is a
/// FETCH_AND_ADD of −1 instead of a store of 0.
pub fn post_unlock(cx: &mut TxnCx<'_>, install: bool, shared: impl Fn(&TxnCx<'_>, usize) -> bool) {
    debug_assert!(
        cx.accesses
            .iter()
            .all(|a| !a.locked || a.slot != crate::txn::NO_SLOT),
        "a locked record's slot is known (RCC §5.2: every RPC lock replies it)"
    );
    debug_assert!(
        !install || cx.accesses.iter().all(|a| !a.write || a.locked),
        "commit with a write-set record not locked"
    );
    cx.collect_nodes(|a| a.locked);
    if cx.nodes.is_empty() {
        return;
    }
    let commit = cx.primitive(Stage::Commit);
    let release = cx.primitive(Stage::Release);
    let mut batch = cx.round();
    for n in 0..cx.nodes.len() {
        let node = cx.nodes[n];
        let mut write_back: Option<Vec<u64>> = None;
        let mut unlock: Option<Vec<u64>> = None;
        let mut unlock_shared: Option<Vec<u64>> = None;
        for index in 0..cx.accesses.len() {
            let access = cx.accesses[index];
            if access.node != node || !access.locked {
                continue;
            }
            let writes = install && access.write;
            let shared = !writes && shared(cx, index);
            let lock = lock_addr(cx.table(access.table), access.slot);
            match (writes, shared, if writes { commit } else { release }) {
                (true, _, Primitive::OneSided) => {
                    queue_write_back_onesided(cx, &mut batch, index);
                }
                (false, false, Primitive::OneSided) => {
                    batch.write_word(node, lock, 0);
                }
                (false, true, Primitive::OneSided) => {
                    batch.faa(node, lock, u64::MAX);
                }
                (true, _, Primitive::Rpc) => {
                    let payload = call_payload(&mut write_back, &mut batch, Some(cx.owner));
                    payload.extend_from_slice(&[access.table as u64, access.slot, access.seq + 1]);
                    payload.extend_from_slice(cx.record(index));
                }
                (false, false, Primitive::Rpc) => {
                    let payload = call_payload(&mut unlock, &mut batch, Some(cx.owner));
                    payload.extend_from_slice(&[access.table as u64, access.slot]);
                }
                (false, true, Primitive::Rpc) => {
                    let payload = call_payload(&mut unlock_shared, &mut batch, None);
                    payload.extend_from_slice(&[access.table as u64, access.slot]);
                }
            }
        }
        for (payload, kind) in [
            (write_back, kind::WRITE_BACK),
            (unlock, kind::UNLOCK),
            (unlock_shared, kind::LOCK2PL_UNLOCK_SHARED),
        ] {
            if let Some(payload) = payload {
                batch.call(node, kind, payload, true);
            }
        }
    }
    drop(batch);
    for access in cx.accesses.iter_mut() {
        access.locked = false;
    }
    cx.submit_passive();
}

/// The locked records' part of a passive commit or release round, queued
/// on `batch` (the round of `cx`, which the caller may have started): per
/// node in `cx.nodes`, `onesided` queues each locked access's verbs, or
/// `rpc` appends its words to the node's one call of `kind`, which starts
/// with `head`. Then every lock counts as released and the round is posted
/// with passive ACK.
pub fn post_locked(
    cx: &mut TxnCx<'_>,
    mut batch: RefMut<'_, Batch>,
    (primitive, kind, head): (Primitive, u16, Option<u64>),
    onesided: impl Fn(&TxnCx<'_>, &mut Batch, usize),
    rpc: impl Fn(&TxnCx<'_>, &mut Vec<u64>, usize),
) {
    for &node in &cx.nodes {
        let mut call: Option<Vec<u64>> = None;
        for (index, access) in cx.accesses.iter().enumerate() {
            if access.node != node || !access.locked {
                continue;
            }
            match primitive {
                Primitive::OneSided => onesided(cx, &mut batch, index),
                Primitive::Rpc => rpc(cx, call_payload(&mut call, &mut batch, head), index),
            }
        }
        if let Some(payload) = call {
            batch.call(node, kind, payload, true);
        }
    }
    drop(batch);
    for access in cx.accesses.iter_mut() {
        access.locked = false;
    }
    cx.submit_passive();
}

/// The payload of a per-node call, started with `owner` (if any) on first
/// use.
pub fn call_payload<'p>(
    call: &'p mut Option<Vec<u64>>,
    batch: &mut Batch,
    owner: Option<u64>,
) -> &'p mut Vec<u64> {
    call.get_or_insert_with(|| {
        let mut payload = batch.payload();
        payload.extend(owner);
        payload
    })
}

/// Per-record statuses of a commit-time lock reply (`OCC_LOCK`,
/// `MVCC_LOCK`, `TS_LOCK`, `SUNDIAL_LOCK`): locked, held by another, or
/// locked but no longer the version read.
pub mod lock_reply {
    pub const OK: u64 = 0;
    pub const CONFLICT: u64 = 1;
    pub const STALE: u64 = 2;
}

/// Queues on `cx`'s round one call of `kind` to every node in `cx.nodes`:
/// `head` (if any), then the words `entry` pushes for each access on that
/// node that `pick` selects, in access order. `entry` returns how many
/// words that access's part of the reply has; `cx.queued` gets `(access
/// index, place)` per entry, for [`reply_entry`].
pub fn queue_calls_per_node(
    cx: &mut TxnCx<'_>,
    kind: u16,
    head: Option<u64>,
    pick: impl Fn(&Access) -> bool,
    entry: impl Fn(&TxnCx<'_>, &Access, &mut Vec<u64>) -> u32,
) {
    let mut batch = cx.round();
    cx.queued.clear();
    for n in 0..cx.nodes.len() {
        let node = cx.nodes[n];
        let mut payload = batch.payload();
        payload.extend(head);
        let mut position = 0u32;
        for index in 0..cx.accesses.len() {
            let access = cx.accesses[index];
            if pick(&access) && access.node == node {
                let reply_words = entry(cx, &access, &mut payload);
                cx.queued.push((index, ((n as u32) << 16) | position));
                position += reply_words;
            }
        }
        batch.call(node, kind, payload, false);
    }
}

/// The reply words of the entry at `place` (from [`queue_calls_per_node`])
/// onward.
pub fn reply_entry(batch: &Batch, place: u32) -> &[u64] {
    &batch.reply(CallId((place >> 16) as u16))[(place & 0xffff) as usize..]
}

/// After a round of commit-time lock calls with one [`lock_reply`] word
/// per entry: marks every locked access, and fails with `stale` if one
/// was no longer the version read, else with `LockConflict` if one was
/// held by another.
pub fn lock_outcome(cx: &mut TxnCx<'_>, stale: AbortReason) -> TxnResult<()> {
    let batch = cx.batch();
    let mut outcome = Ok(());
    for &(index, place) in &cx.queued {
        match reply_entry(&batch, place)[0] {
            lock_reply::OK => cx.accesses[index].locked = true,
            lock_reply::STALE => {
                cx.accesses[index].locked = true;
                outcome = outcome.and(Err(stale));
            }
            _ => outcome = outcome.and(Err(AbortReason::LockConflict)),
        }
    }
    outcome
}

/// Handler side of a tuple fetch: the slot of `key` in table `table_id`,
/// with the whole tuple read into `payload`; `None`, with `payload =
/// [NOT_FOUND]`, if no row has that key.
pub fn load_tuple(
    store: &NodeStore,
    table_id: u32,
    key: u64,
    payload: &mut Vec<u64>,
) -> Option<u64> {
    payload.clear();
    let Some(slot) = store.lookup(table_id, key) else {
        payload.push(status::NOT_FOUND);
        return None;
    };
    let table = store.layout.table(table_id);
    payload.resize(table.tuple_words as usize, 0);
    store.region.read(table.tuple_addr(slot), payload);
    Some(slot)
}

/// Appends the record at `slot` of `table` to a reply under way.
pub fn push_record(store: &NodeStore, table: &TableLayout, slot: u64, payload: &mut Vec<u64>) {
    let start = payload.len();
    payload.resize(start + table.record_words as usize, 0);
    store
        .region
        .read(table.record_addr(slot), &mut payload[start..]);
}

/// Rewrites the words `payload[record..]` of a record of `record_words`
/// words into the reply `[head…, record…]`, in place.
pub fn reply_with_record(payload: &mut Vec<u64>, record: usize, record_words: usize, head: &[u64]) {
    payload.copy_within(record..record + record_words, head.len());
    payload.truncate(head.len() + record_words);
    payload[..head.len()].copy_from_slice(head);
}

/// Serves the handlers every lock-word protocol shares; false if `kind` is
/// not one of them.
pub fn serve_shared(store: &NodeStore, kind: u16, payload: &mut Vec<u64>) -> bool {
    match kind {
        kind::WRITE_BACK => serve_write_back(store, payload),
        kind::UNLOCK => serve_unlock(store, payload),
        _ => return false,
    }
    true
}

/// Handler of `WRITE_BACK`: `[owner, (table, slot, new_seq, record…)…]`.
pub fn serve_write_back(store: &NodeStore, payload: &mut Vec<u64>) {
    let owner = payload[0];
    let mut at = 1;
    while at < payload.len() {
        let table = store.layout.table(payload[at] as u32);
        let slot = payload[at + 1];
        let new_seq = payload[at + 2];
        let record = &payload[at + 3..at + 3 + table.record_words as usize];
        debug_assert_eq!(store.region.load(lock_addr(table, slot)), owner);
        store.region.store(
            table.tuple_addr(slot) + table.seq_end_offset() as u64,
            new_seq,
        );
        store.region.write(table.record_addr(slot), record);
        store.region.store(table.seq_addr(slot), new_seq);
        store.region.store(lock_addr(table, slot), 0);
        at += 3 + table.record_words as usize;
    }
    payload.clear();
}

/// Handler of `UNLOCK`: `[owner, (table, slot)…]`. Unlocks only what
/// `owner` holds (RCC §5.2: an RPC release is a CAS from the owner to 0).
pub fn serve_unlock(store: &NodeStore, payload: &mut Vec<u64>) {
    let owner = payload[0];
    for pair in payload[1..].chunks_exact(2) {
        let table = store.layout.table(pair[0] as u32);
        let previous = store.region.cas(lock_addr(table, pair[1]), owner, 0);
        debug_assert_eq!(previous, owner, "unlock of a lock this owner does not hold");
    }
    payload.clear();
}

/// Queues a single-record RPC whose payload is `words`.
pub fn call_one(cx: &TxnCx<'_>, node: NodeId, kind: u16, words: &[u64]) -> crate::fabric::CallId {
    let mut batch = cx.round();
    let mut payload = batch.payload();
    payload.extend_from_slice(words);
    batch.call(node, kind, payload, false)
}
