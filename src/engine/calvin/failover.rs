//! CALVIN's failover: what the survivors of a replicated run
//! (`--replication 2|3`) do when the failure detector declares a node
//! dead, so that every sequenced transaction ends the same way everywhere
//! and the survivors' clients keep running.
//!
//! Calvin itself (Thomson et al. §3.1) survives failures by replicating the
//! *input* and re-executing it deterministically on a replica. Verbena
//! replicates CALVIN as every other protocol, by RCC §4.1's coordinator log
//! of each participant's writes (`engine::calvin`, *Replication*), and
//! fails over as every other protocol does (`recovery::failover`: a
//! pause, the dead node's log records rolled forward, its partitions
//! promoted to their first live backup, FaRM's reconfiguration, DrTM+H
//! §5.4). What CALVIN adds is the resolution of the transactions the dead
//! node D had a hand in, run by [`CalvinFailover`] as a
//! `replication::RecoveryHook` while every survivor is parked:
//!
//! * **Committed or given up.** A transaction `T` that D sequenced or whose
//!   set touches D's partition is *committed* if some live active
//!   participant finished it (its part logged and installed) or D logged
//!   its own part (a whole record in a survivor's ring, or the promoted
//!   copy already holding a newer version of a record D writes than the
//!   one D forwarded). Otherwise no participant installed anything (a part
//!   installs only after its log is acknowledged, and passive parts only
//!   read), so `T` is *given up*: every live part still scheduled is
//!   dropped (its locks withdrawn), every live node that has not scheduled
//!   it yet skips it (its entry carries the routing generation it was
//!   sealed under, [`CalvinFailover::generation`]), and its origin's client
//!   learns `DONE_FAILED` and submits the request again.
//! * **A committed transaction finishes everywhere.** Every live active
//!   participant needs D's records: D forwarded them before it logged or
//!   released a lock, and with failure handling a part goes on only once
//!   its forwards landed (`executor::start`), so a live part still missing
//!   one of D's records proves D had neither logged nor released `T` — the
//!   promoted copy then holds exactly the versions `T` reads, and the
//!   recovery forwards them from it. D's writes come from the log, or when
//!   D never logged them, from a live active participant that finished `T`:
//!   every active participant runs the whole program, and each keeps what
//!   it computed for the last epochs ([`Retained`]); the recovery installs
//!   D's partition's writes from it on every live copy, and records D's
//!   part in the history.
//! * **Origins learn the outcome.** A live origin's client whose
//!   transaction D had a part in gets its completion counter set: given up
//!   (`DONE_FAILED`), or committed with D's report counted.
//! * **After the pause** D's partition is served by its promoted backup:
//!   sequencers deliver to live nodes only and route each access to the
//!   node serving its partition, schedulers wait for live sequencers only,
//!   and a node may serve two partitions.
//!
//! Each part of a transaction keeps the routing it was scheduled with
//! (`Scheduled::homes`): a failover resolves every transaction it touches
//! before anyone resumes, so a transaction scheduled before it and still
//! running after it never involves the failed node.
//!
//! Where it runs: `sim` and `threads`, whose recovery reads and writes the
//! survivors' memory directly, as for every protocol. CALVIN does not run
//! on `ucx` at all. One failure per run: `config::faults::validate` refuses more.
//! What it assumes of the fabric: what the dead node posted before it died
//! lands (or is lost) before it is declared dead — the detector's timeout
//! is many round trips — so no forward, record or report of it arrives
//! after the recovery counted it.
//!
//! Invariants: a transaction is committed iff some part of it installed
//! or logged a write, and then every live part finishes it; a transaction
//! given up left no write anywhere; no part scheduled before a failover
//! involves the failed node after it; an origin counts each transaction
//! once.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::scheduler::Scheduled;
use super::{
    read_consistent, CalvinLayout, NodeShared, NodeState, Place, DONE_COUNT_MASK, DONE_FAILED,
    MISSING, RING,
};
use crate::check::history::SECONDARY_ENTRY;
use crate::check::{History, Item};
use crate::fabric::NodeId;
use crate::recovery::steps::{self as recovery, apply_on};
use crate::recovery::RecoveryHook;
use crate::replication::ring::LoggedWrite;
use crate::replication::Replication;
use crate::store::{NodeStore, TableId};
use crate::txn::{IndexOp, TxnCx};
use crate::workloads::Declared;

/// The bits of a log record's transaction id below its node and worker
/// (`txn::ids`): a CALVIN part puts its transaction's id there.
const PLACE_BITS: u32 = 44;

/// The transaction id a CALVIN part's log records carry: the writing node
/// and worker (the ring's owner, as `replication` reads it back) above the
/// transaction's own id (`sequencer << 40 | counter`, the counter cut to
/// 32 bits), so a recovery knows which transaction a record belongs to.
pub fn log_txn_id(node: NodeId, worker: u16, id: u64) -> u64 {
    let sequencer = id >> 40;
    debug_assert!(sequencer < 1 << 12);
    debug_assert!(
        id & ((1 << 40) - 1) < 1 << 32,
        "a sequencer counter past 2^32"
    );
    let place = (sequencer << 32) | (id & 0xffff_ffff);
    ((node as u64) << (PLACE_BITS + 8)) | ((worker as u64 & 0xff) << PLACE_BITS) | place
}

/// The CALVIN transaction id inside a log record's id ([`log_txn_id`]).
pub fn calvin_id_of_log(txn_id: u64) -> u64 {
    let place = txn_id & ((1 << PLACE_BITS) - 1);
    ((place >> 32) << 40) | (place & 0xffff_ffff)
}

/// One access of a [`Retained`] part.
#[derive(Clone, Copy, Debug)]
pub struct RetainedItem {
    pub table: TableId,
    pub partition: NodeId,
    pub key: u64,
    /// Written (a row the program inserted is written too: by the home
    /// node only, which is its partition's).
    pub write: bool,
    /// The version the program read (`MISSING`: absent).
    pub seq: u64,
    /// Where its record's words start in [`Retained::records`] (writes).
    pub record_at: usize,
}

/// What an active participant computed for a transaction it finished, kept
/// (with failure handling only) for the epochs a failed participant may
/// still have been running it: every access with the version read and
/// every write's new record.
#[derive(Clone, Debug)]
pub struct Retained {
    pub place: Place,
    pub id: u64,
    pub origin: NodeId,
    /// The history type of the designated part: the workload's type of
    /// the request, or `SECONDARY_ENTRY` when the program aborted (it
    /// committed nothing of its type).
    pub kind: u8,
    /// The program's note (0 when it aborted).
    pub note: i64,
    /// The node whose part carries the type and note in the history
    /// (`executor::designated_node`).
    pub designated: Option<NodeId>,
    pub items: Vec<RetainedItem>,
    pub records: Vec<u64>,
    /// The ordered-index changes the program made (applied by the home).
    pub index_ops: Vec<IndexOp>,
}

impl Retained {
    /// What `cx` (whose program ran for `txn`) computed; an aborted
    /// program wrote nothing.
    pub fn of_part(
        txn: &Scheduled,
        cx: &TxnCx<'_>,
        aborted: bool,
        txn_type: u8,
        note: i64,
    ) -> Retained {
        let mut items = Vec::with_capacity(cx.accesses.len());
        let mut records = Vec::new();
        for (index, access) in cx.accesses.iter().enumerate() {
            let record_at = records.len();
            if access.write && !aborted {
                records.extend_from_slice(cx.record(index));
            }
            items.push(RetainedItem {
                table: access.table,
                partition: access.partition,
                key: access.key,
                write: access.write && !aborted,
                seq: access.seq,
                record_at,
            });
        }
        Retained {
            place: txn.place,
            id: txn.id,
            origin: txn.origin,
            kind: if aborted { SECONDARY_ENTRY } else { txn_type },
            note,
            designated: super::executor::designated_node(&txn.accesses, &txn.homes),
            items,
            records,
            index_ops: if aborted {
                Vec::new()
            } else {
                cx.index_ops.clone()
            },
        }
    }
}

/// Drops what no failover can need any more: parts of epochs every node
/// finished long ago (no node starts epoch `e + RING` before every node
/// finished `e`, so a node past `e + 2·RING` knows every part of `e` ended).
pub fn prune_retained(state: &mut NodeState) {
    while state
        .retained
        .front()
        .is_some_and(|r| r.place.epoch + 2 * RING < state.done_below)
    {
        state.retained.pop_front();
    }
}

/// An origin's client transaction in flight (with failure handling only).
#[derive(Clone, Debug, Default)]
pub struct InFlight {
    pub busy: bool,
    pub id: u64,
    pub epoch: u64,
    /// The participants it was sealed with (the nodes serving its
    /// partitions then).
    pub nodes: Vec<NodeId>,
    /// The partitions its set touches.
    pub partitions: Vec<NodeId>,
}

impl InFlight {
    pub fn set(&mut self, id: u64, epoch: u64, nodes: &[NodeId], declared: &[Declared]) {
        self.busy = true;
        self.id = id;
        self.epoch = epoch;
        self.nodes.clear();
        self.nodes.extend_from_slice(nodes);
        self.partitions.clear();
        for access in declared {
            if !self.partitions.contains(&access.node) {
                self.partitions.push(access.node);
            }
        }
    }
}

/// What CALVIN's recoveries did (added to the report's `recovery`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CalvinResolution {
    /// Transactions the failed node had a hand in that the recovery
    /// finished: live parts still to run, or writes of the failed node's
    /// part the promoted copy lacked.
    pub committed: u64,
    /// Transactions given up (their clients submit them again).
    pub given_up: u64,
}

/// A run's CALVIN failover: shared by every node on `sim` and `threads`.
pub struct CalvinFailover {
    shared: Arc<[NodeShared]>,
    stores: Vec<Arc<NodeStore>>,
    calvin: CalvinLayout,
    replication: Arc<Replication>,
    onesided_forwards: bool,
    generation: AtomicU32,
    /// The transactions whose whole log records the failed nodes left in
    /// the survivors' rings (found before they are rolled forward).
    dead_logged: Mutex<HashSet<u64>>,
    /// The failed nodes' parts the recoveries recorded.
    history: Mutex<History>,
    /// Ordered-index changes of failed homes the recovery took from a
    /// survivor's computation, for the first executor to apply
    /// ([`CalvinFailover::apply_index_ops`]).
    index_ops: Mutex<Vec<(NodeId, Vec<IndexOp>)>>,
    index_ops_pending: AtomicBool,
}

/// One transaction the failed nodes had a hand in, as the survivors hold
/// it.
#[derive(Default)]
struct Case {
    /// Its live parts still scheduled: `(node, slab index)`.
    parts: Vec<(NodeId, usize)>,
    /// A live active part that finished it: `(node, index in retained)`.
    retained: Option<(NodeId, usize)>,
    committed: bool,
}

impl CalvinFailover {
    pub fn new(
        shared: Arc<[NodeShared]>,
        stores: Vec<Arc<NodeStore>>,
        calvin: CalvinLayout,
        replication: Arc<Replication>,
        onesided_forwards: bool,
    ) -> CalvinFailover {
        CalvinFailover {
            shared,
            stores,
            calvin,
            replication,
            onesided_forwards,
            generation: AtomicU32::new(0),
            dead_logged: Mutex::new(HashSet::new()),
            history: Mutex::new(History::new()),
            index_ops: Mutex::new(Vec::new()),
            index_ops_pending: AtomicBool::new(false),
        }
    }

    /// Applies, through `apply(home, ops)` (the workload's
    /// `at_commit_point`), the ordered-index changes a recovery took for a
    /// failed home; at once if there are none. Every executor calls it
    /// before taking work, and the others wait while one applies.
    pub fn apply_index_ops(&self, apply: impl Fn(NodeId, &[IndexOp])) {
        if !self.index_ops_pending.load(Ordering::Acquire) {
            return;
        }
        let mut pending = unpoisoned(&self.index_ops);
        for (home, ops) in pending.drain(..) {
            apply(home, &ops);
        }
        self.index_ops_pending.store(false, Ordering::Release);
    }

    /// The routing generation: how many failovers have completed. A
    /// sequencer seals each entry with it.
    #[inline]
    pub fn generation(&self) -> u32 {
        self.generation.load(Ordering::Acquire)
    }

    /// The failed nodes' parts the recoveries recorded (merged into the
    /// run's history with the survivors' parts).
    pub fn take_history(&self) -> History {
        std::mem::take(&mut *unpoisoned(&self.history))
    }

    /// Where in `node`'s forward buffer the record of access `k` of `txn`
    /// lands.
    fn forward_addr(&self, node: NodeId, txn: &Scheduled, k: usize) -> u64 {
        self.calvin.fwd_addr(txn.place, txn.forward_block(node, k))
    }

    /// The sequence number of the record forwarded to `node` for access `k`
    /// of `txn`, if it has arrived there.
    fn forwarded_seq(
        &self,
        state: &NodeState,
        node: NodeId,
        txn: &Scheduled,
        k: usize,
    ) -> Option<u64> {
        if self.onesided_forwards {
            let addr = self.forward_addr(node, txn, k);
            let region = &self.stores[node as usize].region;
            (region.load(addr) == txn.place.tag()).then(|| region.load(addr + 1))
        } else {
            let (_, words) = state.forwards.get(&txn.place)?;
            txn.forwarded(words, &self.stores[node as usize].layout)
                .find(|&(j, _, _)| j == k)
                .map(|(_, seq, _)| seq)
        }
    }

    /// Forwards to `node`, for access `k` of `txn`, the record as the
    /// promoted copy of its partition holds it.
    fn forward_from_promoted(
        &self,
        state: &mut NodeState,
        node: NodeId,
        txn: &Scheduled,
        k: usize,
    ) {
        let access = txn.accesses[k];
        let promoted = self.replication.serving(access.node);
        let store = &self.stores[promoted as usize];
        let words = store.layout.table(access.table).record_words as usize;
        let mut value = vec![0u64; 1 + words];
        value[0] = read_consistent(store, access.table, access.key, &mut value[1..]);
        if self.onesided_forwards {
            let addr = self.forward_addr(node, txn, k);
            let region = &self.stores[node as usize].region;
            region.write(addr + 1, &value);
            region.store(addr, txn.place.tag());
        } else {
            let entry = state.forwards.entry(txn.place).or_default();
            entry.0 += 1;
            entry.1.push(k as u64);
            entry.1.extend_from_slice(&value);
        }
    }

    /// Whether a failed node logged its part of the transaction that `parts`
    /// still run: the promoted copy holds a newer version of a record it
    /// writes than the one it forwarded.
    fn logged_by_versions(
        &self,
        states: &[Option<MutexGuard<'_, NodeState>>],
        parts: &[(NodeId, usize)],
        failed: &[NodeId],
    ) -> bool {
        for &(node, index) in parts {
            let state = states[node as usize].as_ref().expect("a live node");
            let txn = state.txns[index].as_ref().expect("a scheduled part");
            for (k, access) in txn.accesses.iter().enumerate() {
                if !access.write || !failed.contains(&txn.homes[k]) {
                    continue;
                }
                let Some(read) = self.forwarded_seq(state, node, txn, k) else {
                    continue;
                };
                let promoted = &self.stores[self.replication.serving(access.node) as usize];
                let now = promoted
                    .lookup(access.table, access.key)
                    .map_or(MISSING, |slot| promoted.seq(access.table, slot));
                if read != MISSING && now != MISSING && now > read {
                    return true;
                }
            }
        }
        false
    }

    /// Installs the failed partitions' writes `retained` computed on every
    /// live copy of them, and records the failed nodes' part of it.
    /// Returns how many of the writes the promoted copies lacked.
    fn install_retained(&self, retained: &Retained, failed: &[NodeId], live: &[NodeId]) -> u64 {
        let placement = self.replication.placement;
        let mut installed = 0;
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        for item in &retained.items {
            if !failed.contains(&item.partition) {
                continue;
            }
            let read = Item {
                table: item.table,
                key: item.key,
                seq: item.seq,
            };
            if item.seq != MISSING {
                reads.push(read);
            }
            if !item.write {
                continue;
            }
            let seq = if item.seq == MISSING { 0 } else { item.seq } + 1;
            let words = self.stores[0].layout.table(item.table).record_words as usize;
            let promoted = &self.stores[self.replication.serving(item.partition) as usize];
            let newer = promoted
                .lookup(item.table, item.key)
                .is_none_or(|slot| promoted.seq(item.table, slot) < seq);
            let write = LoggedWrite {
                table: item.table,
                partition: item.partition,
                key: item.key,
                seq,
                record: &retained.records[item.record_at..item.record_at + words],
            };
            for &node in live {
                if placement.copy_on(node, item.partition).is_some() {
                    apply_on(&self.stores[node as usize], &placement, &write);
                }
            }
            installed += newer as u64;
            writes.push(Item { seq, ..read });
        }
        // The type and note ride on the designated part (`executor`).
        let (kind, note) = match retained.designated {
            Some(node) if failed.contains(&node) && retained.kind != SECONDARY_ENTRY => {
                (retained.kind, retained.note)
            }
            _ => (SECONDARY_ENTRY, 0),
        };
        unpoisoned(&self.history).push_noted(
            retained.id,
            retained.origin,
            kind,
            note,
            &reads,
            &writes,
        );
        installed
    }

    /// Drops a live part of a transaction given up: its lock requests are
    /// withdrawn (granting what waited behind them) and it leaves every
    /// queue.
    fn drop_part(&self, state: &mut NodeState, node: NodeId, index: usize) {
        let txn = state.txns[index].take().expect("a scheduled part");
        state.ready.retain(|&i| i != index);
        state.parked.retain(|&i| i != index);
        // Parts it granted may be given up too: they leave the ready
        // queue again when their turn comes.
        state.drop_locks(node, index, &txn, true, None);
        state.forwards.remove(&txn.place);
        state.retire(index, &txn);
    }

    /// Resolves every transaction the `failed` nodes had a hand in (see the
    /// module docs). Runs with every survivor parked.
    fn resolve(&self, failed: &[NodeId]) -> CalvinResolution {
        let nodes = self.shared.len() as NodeId;
        let live: Vec<NodeId> = (0..nodes).filter(|n| !failed.contains(n)).collect();
        let mut states: Vec<Option<MutexGuard<'_, NodeState>>> = (0..nodes)
            .map(|n| (!failed.contains(&n)).then(|| self.shared[n as usize].lock()))
            .collect();
        let dead_logged = std::mem::take(&mut *unpoisoned(&self.dead_logged));
        let mut cases = cases_of(&states, &live, failed);
        let mut resolution = CalvinResolution::default();
        let mut ids: Vec<u64> = cases.keys().copied().collect();
        ids.sort_unstable();
        for id in &ids {
            let case = cases.get_mut(id).expect("listed");
            case.committed = case.retained.is_some()
                || dead_logged.contains(id)
                || self.logged_by_versions(&states, &case.parts, failed);
            if case.committed {
                let finished = self.finish_committed(&mut states, case, failed, &live);
                resolution.committed += finished as u64;
            } else {
                resolution.given_up += 1;
                for &(node, index) in &case.parts {
                    let state = states[node as usize].as_mut().expect("a live node");
                    self.drop_part(state, node, index);
                }
            }
        }
        for &node in &live {
            let state = states[node as usize].as_mut().expect("a live node");
            state.advance(&self.stores[node as usize], &self.calvin);
        }
        let settled = self.settle_origins(&mut states, &cases, &dead_logged, failed, &live);
        resolution.committed += settled.committed;
        resolution.given_up += settled.given_up;
        self.generation.fetch_add(1, Ordering::AcqRel);
        resolution
    }

    /// Finishes a committed `case` on the survivors: forwards to its live
    /// parts the failed nodes' records they still miss (from the promoted
    /// copies), and installs the failed partitions' writes a live part
    /// computed. Returns whether anything was left to finish.
    fn finish_committed(
        &self,
        states: &mut [Option<MutexGuard<'_, NodeState>>],
        case: &Case,
        failed: &[NodeId],
        live: &[NodeId],
    ) -> bool {
        let mut finished_here = !case.parts.is_empty();
        for &(node, index) in &case.parts {
            let state = states[node as usize].as_mut().expect("a live node");
            debug_assert!(
                state.parked.contains(&index),
                "a committed transaction's live part has not forwarded yet"
            );
            let txn = state.txns[index].take().expect("a scheduled part");
            for k in 0..txn.accesses.len() {
                if failed.contains(&txn.homes[k])
                    && self.forwarded_seq(state, node, &txn, k).is_none()
                {
                    self.forward_from_promoted(state, node, &txn, k);
                }
            }
            state.txns[index] = Some(txn);
        }
        if let Some((node, at)) = case.retained {
            let state = states[node as usize].as_ref().expect("a live node");
            let retained = state.retained[at].clone();
            let installed = self.install_retained(&retained, failed, live);
            finished_here |= installed > 0;
            // The promoted copy lacked the failed home's writes: it never
            // reached its commit point, where it would have changed its
            // ordered indexes (`executor`).
            if installed > 0 && failed.contains(&retained.origin) && !retained.index_ops.is_empty()
            {
                unpoisoned(&self.index_ops).push((retained.origin, retained.index_ops.clone()));
                self.index_ops_pending.store(true, Ordering::Release);
            }
        }
        finished_here
    }

    /// Tells every `live` origin's client whose transaction the failed
    /// nodes had a part in how it ended, through its completion counter:
    /// given up (`DONE_FAILED`), or committed with the reports still
    /// missing counted. `dead_logged`: the transactions the failed nodes
    /// logged. Returns the transactions it resolved that no case held.
    fn settle_origins(
        &self,
        states: &mut [Option<MutexGuard<'_, NodeState>>],
        cases: &HashMap<u64, Case>,
        dead_logged: &HashSet<u64>,
        failed: &[NodeId],
        live: &[NodeId],
    ) -> CalvinResolution {
        let mut resolution = CalvinResolution::default();
        let scheduled_below: Vec<u64> = states
            .iter()
            .map(|s| s.as_ref().map_or(0, |s| s.scheduled_below))
            .collect();
        for &origin in live {
            let state = states[origin as usize].as_mut().expect("a live node");
            let region = &self.stores[origin as usize].region;
            for (slot, flight) in state.in_flight.iter().enumerate() {
                if !flight.busy || !touches_failed(failed, origin, &flight.partitions) {
                    continue;
                }
                let addr = self.calvin.done_addr(slot as u32);
                let done = region.load(addr);
                let participants = flight.nodes.len() as u64;
                let given_up = DONE_FAILED | participants;
                let counted = |remaining: usize| {
                    (done & !DONE_COUNT_MASK) | (participants - remaining as u64)
                };
                let value = match cases.get(&flight.id) {
                    Some(case) if case.committed => counted(case.parts.len()),
                    Some(_) => given_up,
                    None => {
                        let unscheduled = flight.nodes.iter().any(|&n| {
                            !failed.contains(&n) && scheduled_below[n as usize] <= flight.epoch
                        });
                        if unscheduled {
                            // Scheduled nowhere it was not yet: not
                            // committed, and skipped from now on.
                            resolution.given_up += 1;
                            given_up
                        } else if done & DONE_COUNT_MASK >= participants {
                            done
                        } else if dead_logged.contains(&flight.id) {
                            resolution.committed += 1;
                            counted(0)
                        } else {
                            resolution.given_up += 1;
                            given_up
                        }
                    }
                };
                region.store(addr, value);
            }
        }
        resolution
    }
}

/// Whether a transaction `sequencer` sequenced, touching `partitions`,
/// involves a `failed` node.
fn touches_failed(failed: &[NodeId], sequencer: NodeId, partitions: &[NodeId]) -> bool {
    failed.contains(&sequencer) || partitions.iter().any(|p| failed.contains(p))
}

/// The transactions the `failed` nodes had a hand in, as the survivors
/// (`live`, whose `states` are held) hold them, by id.
fn cases_of(
    states: &[Option<MutexGuard<'_, NodeState>>],
    live: &[NodeId],
    failed: &[NodeId],
) -> HashMap<u64, Case> {
    let mut cases: HashMap<u64, Case> = HashMap::new();
    for &node in live {
        let state = states[node as usize].as_ref().expect("a live node");
        for (index, txn) in state.txns.iter().enumerate() {
            let Some(txn) = txn else { continue };
            if touches_failed(failed, txn.place.sequencer, &txn.homes) {
                cases.entry(txn.id).or_default().parts.push((node, index));
            }
        }
        for (at, retained) in state.retained.iter().enumerate() {
            let partitions: Vec<NodeId> = retained.items.iter().map(|i| i.partition).collect();
            if touches_failed(failed, retained.place.sequencer, &partitions) {
                cases.entry(retained.id).or_default().retained = Some((node, at));
            }
        }
    }
    cases
}

/// A mutex's guard, poisoned or not: what a recovery keeps stays whole
/// even if a worker panicked while holding it.
fn unpoisoned<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl RecoveryHook for CalvinFailover {
    fn before(&self, failed: &[NodeId]) {
        let mut logged = unpoisoned(&self.dead_logged);
        for store in self.stores.iter().filter(|s| !failed.contains(&s.node)) {
            for record in recovery::dead_records(&self.replication, store, failed) {
                logged.insert(calvin_id_of_log(record.txn_id));
            }
        }
    }

    fn after(&self, failed: &[NodeId]) -> (u64, u64) {
        let resolution = self.resolve(failed);
        (resolution.committed, resolution.given_up)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_record_id_names_its_writer_and_its_transaction() {
        let id = (7u64 << 40) | 123_456;
        let txn_id = log_txn_id(3, 5, id);
        assert_eq!(crate::txn::ids::node_of_txn(txn_id), 3);
        assert_eq!((txn_id >> (crate::txn::ids::COUNTER_BITS + 8)) & 0xff, 5);
        assert_eq!(calvin_id_of_log(txn_id), id);
        let last = (4095u64 << 40) | 0xffff_ffff;
        assert_eq!(calvin_id_of_log(log_txn_id(4095, 255, last)), last);
    }

    #[test]
    fn old_parts_are_pruned_once_every_node_is_far_past_them() {
        let shared = NodeShared::new(0);
        let mut state = shared.lock();
        for epoch in 0..20 {
            state.retained.push_back(Retained {
                place: Place {
                    epoch,
                    ..Place::default()
                },
                id: epoch,
                origin: 0,
                kind: 0,
                note: 0,
                designated: None,
                items: Vec::new(),
                records: Vec::new(),
                index_ops: Vec::new(),
            });
        }
        state.done_below = 12;
        prune_retained(&mut state);
        assert_eq!(
            state.retained.front().map(|r| r.place.epoch),
            Some(12 - 2 * RING)
        );
    }
}
