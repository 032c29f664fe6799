//! Fetching a record: finding its tuple (one-sided index probes or the
//! slot an RPC reply names), reading it, and locking it in the same round.

use std::cell::RefMut;
use std::ops::Deref;

use crate::fabric::{Batch, CallId, NodeId, VerbId};
use crate::store::index::{IndexLayout, BUCKET_WORDS};
use crate::store::TableLayout;
use crate::txn::{AbortReason, Access, TxnCx, TxnResult};

use super::status;

/// Makes `cx.accesses[index].slot` known: a location-cache hit costs
/// nothing; a miss probes the three cuckoo buckets with one doorbell batch of
/// READs (one round trip) and fills the cache. Returns the access, its slot
/// set, and the layout of its table, which a one-sided stage addresses the
/// tuple's words in.
pub async fn locate_onesided<'w>(
    cx: &mut TxnCx<'w>,
    index: usize,
) -> TxnResult<(Access, &'w TableLayout)> {
    let table = cx.table(cx.accesses[index].table);
    if cx.locate_cached(index) {
        return Ok((cx.accesses[index], table));
    }
    let access = cx.accesses[index];
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
            Ok((cx.accesses[index], table))
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
) -> TxnResult<CallId> {
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

/// A reply read back from the round that brought it: derefs to its words.
/// It holds the round (`cx.batch()`) borrowed until dropped, as reading
/// the round by hand would.
pub struct Reply<'w> {
    batch: RefMut<'w, Batch>,
    call: CallId,
}

impl Deref for Reply<'_> {
    type Target = [u64];

    fn deref(&self) -> &[u64] {
        self.batch.reply(self.call)
    }
}

/// [`call_access`], read back: the reply `[status, slot, …]`, its slot
/// already kept.
pub async fn access_reply<'w>(
    cx: &mut TxnCx<'w>,
    index: usize,
    kind: u16,
    extra: &[u64],
) -> TxnResult<Reply<'w>> {
    let call = call_access(cx, index, kind, extra).await?;
    Ok(Reply {
        batch: cx.batch(),
        call,
    })
}

/// One READ of the whole tuple of `cx.accesses[index]` (its slot known),
/// awaited: the words are `cx.batch().result` of the verb returned.
pub async fn read_tuple_onesided(cx: &mut TxnCx<'_>, index: usize) -> TxnResult<VerbId> {
    let access = cx.accesses[index];
    let table = cx.table(access.table);
    let read = cx.round().read(
        access.node,
        table.tuple_addr(access.slot),
        table.tuple_words,
    );
    cx.submit().await?;
    Ok(read)
}

/// After the round [`queue_lock_then_read_seq`] queued, awaited: hands
/// `judge` each queued access with the word its CAS found and the words its
/// READ returned, and fails with the first error `judge` gives. Every
/// access is judged, so each lock the round took is marked held.
pub fn judge_locks(
    cx: &mut TxnCx<'_>,
    mut judge: impl FnMut(&mut Access, u64, &[u64]) -> TxnResult<()>,
) -> TxnResult<()> {
    let batch = cx.batch();
    let mut outcome = Ok(());
    for &(index, cas) in &cx.queued {
        let found = batch.result_word(VerbId(cas));
        let verdict = judge(
            &mut cx.accesses[index],
            found,
            batch.result(VerbId(cas + 1)),
        );
        outcome = outcome.and(verdict);
    }
    outcome
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
/// that `pick` selects (in access order), the verbs `queue` appends for it;
/// `cx.queued` gets `(access index, the verb id `queue` returns)`, where
/// the caller reads its results. Verbs to one node run in order (FIFO on
/// the queue pair), so one access's later verbs see what its earlier ones
/// did.
pub fn queue_per_node(
    cx: &mut TxnCx<'_>,
    pick: impl Fn(&Access) -> bool,
    queue: impl Fn(&TxnCx<'_>, &mut Batch, &Access) -> VerbId,
) {
    let mut batch = cx.round();
    cx.queued.clear();
    for n in 0..cx.nodes.len() {
        let node = cx.nodes[n];
        for index in 0..cx.accesses.len() {
            let access = cx.accesses[index];
            if pick(&access) && access.node == node {
                let first = queue(cx, &mut batch, &access);
                cx.queued.push((index, first.0));
            }
        }
    }
}

/// [`queue_per_node`] of a CAS of each picked access's lock word (`lock`
/// gives `(address, expected, desired)`), then a READ of `read_words`
/// words from its `seq`: FIFO on the queue pair, so the READ sees the
/// tuple as the CAS left it. `cx.queued` gets `(access index, the CAS's
/// verb id)`; the READ is the next verb.
pub fn queue_lock_then_read_seq(
    cx: &mut TxnCx<'_>,
    pick: impl Fn(&Access) -> bool,
    read_words: u32,
    lock: impl Fn(&TxnCx<'_>, &Access) -> (u64, u64, u64),
) {
    queue_per_node(cx, pick, |cx, batch, access| {
        let (word, expected, desired) = lock(cx, access);
        let cas = batch.cas(access.node, word, expected, desired);
        let table = cx.table(access.table);
        batch.read(access.node, table.seq_addr(access.slot), read_words);
        cas
    });
}
