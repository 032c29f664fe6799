//! CALVIN's scheduler (RCC §4.6; Deneva §3.4; Calvin §3.2): per node, takes
//! each epoch's sub-batches from every sequencer once all have arrived, and
//! requests each transaction's local locks in the global order from a
//! deterministic lock manager; a transaction whose locks are all granted
//! goes to the ready queue the executors take from.
//!
//! The lock manager keeps one FIFO queue per record. A request is granted
//! when it reaches the front (exclusive) or when only shared requests are
//! ahead of it (shared); a release grants, in order, what is now grantable.
//! Nothing ever waits out of order, so the same global order yields the
//! same conflict order on every node, and no cycle of waits can form.
//!
//! Invariants: a queue holds at most one request per transaction; granted
//! requests form a prefix of their queue; a transaction is ready exactly
//! when none of its local requests is ungranted.

use std::collections::{HashMap, VecDeque};

use super::{
    unpack_access, CalvinEnv, NodeState, Place, Poll, SubBatch, CRB_HEADER_WORDS,
    ENTRY_FIXED_WORDS, RING,
};
use crate::base::{Primitive, Stage};
use crate::fabric::NodeId;
use crate::store::{StoreLayout, TableId};
use crate::workloads::{Declared, Workload};

/// One lock request in a record's queue.
#[derive(Clone, Copy, Debug)]
struct Request {
    txn: usize,
    write: bool,
    granted: bool,
}

/// The deterministic lock manager of one node.
#[derive(Default)]
pub struct LockTable {
    queues: HashMap<(TableId, u64), VecDeque<Request>>,
}

impl LockTable {
    /// Enqueues `txn`'s request on `(table, key)`; true if granted at once.
    pub fn acquire(&mut self, table: TableId, key: u64, txn: usize, write: bool) -> bool {
        let queue = self.queues.entry((table, key)).or_default();
        debug_assert!(queue.iter().all(|r| r.txn != txn), "locked twice");
        let granted = if write {
            queue.is_empty()
        } else {
            queue.iter().all(|r| !r.write && r.granted)
        };
        queue.push_back(Request {
            txn,
            write,
            granted,
        });
        granted
    }

    /// Drops `txn`'s request on `(table, key)` and appends to `granted` the
    /// transactions whose request it granted.
    pub fn release(&mut self, table: TableId, key: u64, txn: usize, granted: &mut Vec<usize>) {
        self.remove(table, key, txn, true, granted);
    }

    /// Drops `txn`'s request on `(table, key)`, granted or not (a failover
    /// gives the transaction up, `failover`), granting what it unblocks.
    pub fn withdraw(&mut self, table: TableId, key: u64, txn: usize, granted: &mut Vec<usize>) {
        self.remove(table, key, txn, false, granted);
    }

    fn remove(
        &mut self,
        table: TableId,
        key: u64,
        txn: usize,
        must_be_granted: bool,
        granted: &mut Vec<usize>,
    ) {
        let Some(queue) = self.queues.get_mut(&(table, key)) else {
            debug_assert!(false, "release of a lock never requested");
            return;
        };
        let Some(at) = queue.iter().position(|r| r.txn == txn) else {
            debug_assert!(false, "release of a lock never requested");
            return;
        };
        debug_assert!(
            queue[at].granted || !must_be_granted,
            "release of an ungranted lock"
        );
        queue.remove(at);
        if queue.is_empty() {
            self.queues.remove(&(table, key));
            return;
        }
        for (index, request) in queue.iter_mut().enumerate() {
            if request.write {
                if index == 0 && !request.granted {
                    request.granted = true;
                    granted.push(request.txn);
                }
                break;
            }
            if !request.granted {
                request.granted = true;
                granted.push(request.txn);
            }
        }
        debug_assert!(
            {
                let prefix = queue.iter().take_while(|r| r.granted).count();
                queue.iter().skip(prefix).all(|r| !r.granted)
            },
            "granted requests are not a prefix"
        );
    }

    /// Records with a queue (tests, invariants after a run).
    pub fn queued_records(&self) -> usize {
        self.queues.len()
    }
}

/// A transaction scheduled on this node.
#[derive(Default)]
pub struct Scheduled {
    pub place: Place,
    pub id: u64,
    pub origin: NodeId,
    /// The origin's client slot, whose completion counter the part
    /// reports to.
    pub client: u32,
    /// The declared read/write set, in program order.
    pub accesses: Vec<Declared>,
    /// Per access, the node that serves its partition for this
    /// transaction (fixed when it was scheduled: a failover that moves a
    /// partition resolves every transaction scheduled before it).
    pub homes: Vec<NodeId>,
    pub request: Vec<u64>,
    /// Local lock requests not yet granted.
    pub locks_pending: u32,
    /// Per access: the local tuple slot, once read.
    pub slots: Vec<u64>,
    /// Per access, `[seq, record]` (stride `1 + max_record_words`) for the
    /// local ones, once read.
    pub values: Vec<u64>,
    // When the part reached each stage, for the report's breakdown.
    pub sealed_ns: u64,
    pub scheduled_ns: u64,
    pub ready_ns: u64,
    /// When the executor started forwarding (parked transactions).
    pub forward_start_ns: u64,
    /// Time in the read stage.
    pub read_ns: u64,
}

impl Scheduled {
    /// The forward block at `receiver` that holds the record of access
    /// `k`: its place among the accesses on other nodes than `receiver`
    /// (`CalvinLayout::fwd_addr`).
    pub fn forward_block(&self, receiver: NodeId, k: usize) -> u32 {
        self.homes[..k].iter().filter(|&&h| h != receiver).count() as u32
    }

    /// The blocks `[access, seq, record]` of the records forwarded to this
    /// node by RPC (`words`): per block, the access's index, the version
    /// forwarded, and where its record starts in `words`.
    pub fn forwarded<'w>(
        &'w self,
        words: &'w [u64],
        layout: &'w StoreLayout,
    ) -> impl Iterator<Item = (usize, u64, usize)> + 'w {
        let mut at = 0;
        std::iter::from_fn(move || {
            let k = *words.get(at)? as usize;
            let block = (k, words[at + 1], at + 2);
            at += 2 + layout.table(self.accesses[k].table).record_words as usize;
            Some(block)
        })
    }
}

/// How the scheduler routes and filters the entries it registers.
struct Routing<'r> {
    /// The node serving a partition now.
    serving: &'r dyn Fn(NodeId) -> NodeId,
    /// Whether an entry sealed under generation `generation` with these
    /// accesses was given up by a failover (`failover`).
    given_up: &'r dyn Fn(u32, &[u64]) -> bool,
}

/// Decodes the entry that starts at word `at` (`ENTRY_FIXED_WORDS`, then
/// the accesses, then the request) of `sequencer`'s sub-batch of `epoch`,
/// scheduled at `now_ns`; returns it (`None`: a failover gave it up) and
/// where the next entry starts.
fn decode_entry(
    batch: &SubBatch,
    at: usize,
    (epoch, sequencer): (u64, NodeId),
    now_ns: u64,
    routing: &Routing<'_>,
) -> (Option<Scheduled>, usize) {
    let entries = &batch.entries;
    let fixed = &entries[at..at + ENTRY_FIXED_WORDS];
    let accesses = (fixed[3] >> 32) as usize;
    let request_words = (fixed[3] & 0xffff_ffff) as usize;
    let access_words = &entries[at + ENTRY_FIXED_WORDS..at + ENTRY_FIXED_WORDS + 2 * accesses];
    let request_at = at + ENTRY_FIXED_WORDS + 2 * accesses;
    let generation = (fixed[2] >> 32) as u32;
    let next = request_at + request_words;
    if (routing.given_up)(generation, access_words) {
        return (None, next);
    }
    let declared: Vec<Declared> = access_words.chunks_exact(2).map(unpack_access).collect();
    let homes: Vec<NodeId> = declared.iter().map(|a| (routing.serving)(a.node)).collect();
    let txn = Scheduled {
        place: Place {
            epoch,
            sequencer,
            position: fixed[2] as u32,
        },
        id: fixed[0],
        origin: (fixed[1] >> 32) as NodeId,
        client: fixed[1] as u32,
        accesses: declared,
        homes,
        request: entries[request_at..next].to_vec(),
        sealed_ns: batch.sealed_ns,
        scheduled_ns: now_ns,
        ready_ns: now_ns,
        ..Scheduled::default()
    };
    (Some(txn), next)
}

/// Registers every entry of `sequencer`'s sub-batch of `epoch` in
/// `state`, requesting this node's locks; returns how many it registered.
fn schedule_entries(
    state: &mut NodeState,
    node: NodeId,
    at_epoch: (u64, NodeId),
    batch: &SubBatch,
    now_ns: u64,
    routing: &Routing<'_>,
) -> u64 {
    let mut at = 0;
    let mut local_txns = 0;
    for _ in 0..batch.count {
        let (txn, next) = decode_entry(batch, at, at_epoch, now_ns, routing);
        at = next;
        let Some(mut txn) = txn else { continue };
        let index = match state.free.pop() {
            Some(index) => index,
            None => {
                state.txns.push(None);
                state.txns.len() - 1
            }
        };
        for (access, &home) in txn.accesses.iter().zip(&txn.homes) {
            if home == node
                && !state
                    .locks
                    .acquire(access.table, access.key, index, access.write)
            {
                txn.locks_pending += 1;
            }
        }
        debug_assert!(
            txn.homes.contains(&node),
            "a sub-batch entry that does not touch its node"
        );
        if txn.locks_pending == 0 {
            state.ready.push_back(index);
        }
        state.txns[index] = Some(txn);
        local_txns += 1;
    }
    debug_assert_eq!(at, batch.entries.len(), "sub-batch words left over");
    local_txns
}

/// Whether every live sequencer's sub-batch of `epoch` is here (a failed
/// one's are given up: `failover`).
fn epoch_complete<W: Workload>(env: &CalvinEnv<'_, W>, epoch: u64, onesided: bool) -> bool {
    let nodes = env.nodes() as NodeId;
    if onesided {
        let region = &env.store.region;
        (0..nodes)
            .all(|s| env.is_failed(s) || region.load(env.calvin.crb_addr(s, epoch)) == epoch + 1)
    } else {
        let state = env.shared.lock();
        (0..nodes).all(|s| env.is_failed(s) || state.rpc_batches.contains_key(&(s, epoch)))
    }
}

/// `sequencer`'s sub-batch of `epoch` from this node's request buffer
/// (`[tag, count, words, sealed_ns, stop]`, then the entries).
fn read_sub_batch<W: Workload>(env: &CalvinEnv<'_, W>, sequencer: NodeId, epoch: u64) -> SubBatch {
    let region = &env.store.region;
    let slot = env.calvin.crb_addr(sequencer, epoch);
    let mut entries = vec![0; region.load(slot + 2) as usize];
    region.read(slot + CRB_HEADER_WORDS, &mut entries);
    SubBatch {
        count: region.load(slot + 1),
        sealed_ns: region.load(slot + 3),
        stop: region.load(slot + 4) != 0,
        entries,
    }
}

/// The scheduler coroutine of a node: epochs in order, up to the first in
/// which every sequencer has stopped (`CalvinEnv::final_epoch`).
pub async fn run_scheduler<W: Workload>(env: &CalvinEnv<'_, W>, co: u16) {
    let worker = env.worker;
    env.enter(co);
    let node = env.shared.node;
    let nodes = env.nodes() as NodeId;
    let onesided = env.plan.get(Stage::TxnBroadcastInput) == Primitive::OneSided;
    let mut poll = Poll::new(env.epoch_ns);
    let serving = |partition: NodeId| env.serving(partition);
    // A failover gives up every transaction sealed before it that touches
    // a failed partition and was not scheduled everywhere (`failover`).
    let given_up = |generation: u32, access_words: &[u64]| match env.failover {
        Some(failover) if generation < failover.generation() => access_words
            .chunks_exact(2)
            .any(|words| env.is_failed(unpack_access(words).node)),
        _ => false,
    };
    let routing = Routing {
        serving: &serving,
        given_up: &given_up,
    };
    for epoch in 0.. {
        poll.reset();
        loop {
            env.park_if_paused(co).await;
            if epoch_complete(env, epoch, onesided) {
                break;
            }
            env.note_boundaries(worker.now_ns());
            worker.sleep(co, poll.wait_ns()).await;
        }
        let now = worker.now_ns();
        {
            let mut state = env.shared.lock();
            debug_assert!(epoch < state.done_below + RING, "ring overrun");
            let mut local_txns = 0;
            let mut all_stop = true;
            for sequencer in 0..nodes {
                if env.is_failed(sequencer) {
                    state.rpc_batches.remove(&(sequencer, epoch));
                    continue;
                }
                let batch = if onesided {
                    read_sub_batch(env, sequencer, epoch)
                } else {
                    state
                        .rpc_batches
                        .remove(&(sequencer, epoch))
                        .expect("checked present")
                };
                all_stop &= batch.stop;
                local_txns +=
                    schedule_entries(&mut state, node, (epoch, sequencer), &batch, now, &routing);
            }
            state.epoch_left[(epoch % RING) as usize] = local_txns;
            state.scheduled_below = epoch + 1;
            if all_stop {
                state.last_epoch = Some(epoch);
            }
            state.advance(env.store, env.calvin);
            if all_stop {
                break;
            }
        }
        worker.yield_now().await;
    }
    env.note_boundaries(worker.now_ns());
    if let Some(failover) = crate::recovery::failover_of(worker) {
        failover.finished(node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_grant_in_queue_order_shared_together() {
        let mut locks = LockTable::default();
        let mut granted = Vec::new();
        assert!(locks.acquire(0, 1, 10, false));
        assert!(locks.acquire(0, 1, 11, false));
        assert!(!locks.acquire(0, 1, 12, true));
        // A reader behind a waiting writer waits too (no overtaking).
        assert!(!locks.acquire(0, 1, 13, false));
        locks.release(0, 1, 10, &mut granted);
        assert!(granted.is_empty());
        locks.release(0, 1, 11, &mut granted);
        assert_eq!(granted, vec![12]);
        granted.clear();
        locks.release(0, 1, 12, &mut granted);
        assert_eq!(granted, vec![13]);
        granted.clear();
        locks.release(0, 1, 13, &mut granted);
        assert!(granted.is_empty());
        assert_eq!(locks.queued_records(), 0);
    }

    #[test]
    fn writers_take_turns_in_order() {
        let mut locks = LockTable::default();
        let mut granted = Vec::new();
        assert!(locks.acquire(1, 5, 1, true));
        assert!(!locks.acquire(1, 5, 2, true));
        assert!(!locks.acquire(1, 5, 3, false));
        assert!(!locks.acquire(1, 5, 4, false));
        assert!(
            locks.acquire(1, 6, 2, true),
            "other records are independent"
        );
        locks.release(1, 5, 1, &mut granted);
        assert_eq!(granted, vec![2]);
        granted.clear();
        locks.release(1, 5, 2, &mut granted);
        assert_eq!(granted, vec![3, 4]);
    }
}
