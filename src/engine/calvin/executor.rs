//! CALVIN's executors (RCC §4.6; Deneva §3.4; Calvin §3.2.1): every
//! transaction coroutine of every worker takes ready transactions — all
//! local locks granted — from its node's queue and runs its node's part:
//!
//! 1. *read*: the local records of the read/write set, under the locks;
//! 2. *forward*: if any node writes (active participants), the local
//!    records go to every active participant but this one — RPC: one
//!    passive call per receiver; one-sided: per record a WRITE of `[seq,
//!    record]` into the receiver's forward block, then a notify WRITE of
//!    each block's tag (`epoch + 1`), all in one doorbell batch, so FIFO
//!    order shows the tag only after the data;
//! 3. a passive participant (no local write) is then done; an active one
//!    waits for every remote record — parking the transaction and taking
//!    other work meanwhile, never blocking on it — then runs the program
//!    on the whole set (`TxnCx::preload`); in a replicated run logs its
//!    own partition's writes to that partition's backups and waits for
//!    their acknowledgements (the `log` stage, `replication::log`); then
//!    installs its local writes (`seq_end`, record, `seq`, as the store's
//!    invariant asks) — on the origin also the rows the program inserted,
//!    then its ordered-index changes — and releases its locks;
//! 4. the part reports to the origin's completion counter.
//!
//! Invariants: records are read and written only while their locks are
//! held; every active participant runs the program on the same values, so
//! they agree on its outcome; a transaction leaves the slab only when its
//! part here is finished.

use super::failover;
use super::scheduler::Scheduled;
use super::{
    CalvinEnv, CalvinExec, CalvinRun, Poll, DONE_UNDECLARED, DONE_USER_ABORT, INSERTED, MISSING,
    RPC_DONE, RPC_FORWARD, ST_DISPATCH, ST_EXECUTE, ST_FORWARD, ST_LOCK, ST_LOG, ST_READ,
};
use crate::base::{Primitive, Stage};
use crate::check::history::SECONDARY_ENTRY;
use crate::check::Item;
use crate::fabric::NodeId;
use crate::replication;
use crate::txn::{ids, AbortReason, Txn, TxnCx, NO_SLOT};
use crate::workloads::{Declared, Workload};

/// An executor's scratch lists of history items: one part's reads and
/// writes, and the rows its program inserted here (at the version it
/// read).
#[derive(Default)]
struct Items {
    reads: Vec<Item>,
    writes: Vec<Item>,
    inserted: Vec<Item>,
}

/// What an executor takes from its node.
enum Work {
    /// Ready: locks granted, nothing read yet.
    Fresh(usize, Scheduled),
    /// Parked, and every remote record has now arrived.
    Resume(usize, Scheduled),
    /// Nothing to do yet.
    Idle,
    /// Every epoch this node schedules has finished here.
    Done,
}

/// Whether every record `txn` needs from other nodes has been forwarded
/// to `node`.
fn forwards_complete<W: Workload>(
    env: &CalvinEnv<'_, W>,
    state: &super::NodeState,
    txn: &Scheduled,
    node: NodeId,
    onesided: bool,
) -> bool {
    let remote = txn.homes.iter().filter(|&&home| home != node).count() as u32;
    if remote == 0 {
        true
    } else if onesided {
        (0..remote).all(|block| {
            env.store.region.load(env.calvin.fwd_addr(txn.place, block)) == txn.place.tag()
        })
    } else {
        state
            .forwards
            .get(&txn.place)
            .is_some_and(|(count, _)| *count == remote)
    }
}

/// The next work for an executor of `node`: a ready transaction first,
/// then a parked one whose records have all arrived.
fn take_work<W: Workload>(env: &CalvinEnv<'_, W>, node: NodeId, onesided: bool) -> Work {
    let mut state = env.shared.lock();
    if let Some(index) = state.ready.pop_front() {
        let txn = state.txns[index].take().expect("a ready transaction");
        return Work::Fresh(index, txn);
    }
    let found = state.parked.iter().position(|&index| {
        let txn = state.txns[index].as_ref().expect("a parked transaction");
        forwards_complete(env, &state, txn, node, onesided)
    });
    match found {
        Some(at) => {
            let index = state.parked.swap_remove(at);
            let txn = state.txns[index].take().expect("a parked transaction");
            Work::Resume(index, txn)
        }
        None if state.last_epoch.is_some_and(|last| state.done_below > last) => Work::Done,
        None => Work::Idle,
    }
}

/// The executor coroutine `co` of a worker; returns once every epoch this
/// node schedules has finished here.
pub async fn run_executor<W: Workload>(env: &CalvinEnv<'_, W>, co: u16) {
    let worker = env.worker;
    env.enter(co);
    let node = env.shared.node;
    let onesided = env.plan.get(Stage::ValueForwarding) == Primitive::OneSided;
    let mut cx = TxnCx::new(worker, co, env.layout, env.cache, env.plan);
    let mut attempts: u64 = 0;
    let mut items = Items::default();
    let mut poll = Poll::new(env.epoch_ns);
    loop {
        env.note_boundaries(worker.now_ns());
        env.park_if_paused(co).await;
        if let Some(failover) = env.failover {
            // A failed home's ordered-index changes that a failover took
            // from a survivor's computation, before any new work reads them.
            failover.apply_index_ops(|home, ops| env.workload.at_commit_point(home, ops));
        }
        let (index, txn) = match take_work(env, node, onesided) {
            Work::Done => break,
            Work::Idle => {
                worker.sleep(co, poll.wait_ns()).await;
                continue;
            }
            Work::Resume(index, txn) => (index, txn),
            Work::Fresh(index, mut txn) => {
                poll.reset();
                if !start(env, co, &mut txn, onesided).await {
                    finish(env, co, index, txn, Part::default(), &mut items).await;
                    worker.yield_now().await;
                    continue;
                }
                if !forwards_complete(env, &env.shared.lock(), &txn, node, onesided) {
                    // Re-checked by every idle executor: what arrives
                    // meanwhile is not missed.
                    let mut state = env.shared.lock();
                    state.txns[index] = Some(txn);
                    state.parked.push(index);
                    worker.yield_now().await;
                    continue;
                }
                (index, txn)
            }
        };
        poll.reset();
        attempts += 1;
        execute(env, &mut cx, attempts, index, txn, onesided, &mut items).await;
        worker.yield_now().await;
    }
    env.note_boundaries(worker.now_ns());
    worker.drain(co).await;
    if let Some(failover) = crate::recovery::failover_of(worker) {
        failover.finished(node);
    }
}

/// Reads `txn`'s local records and forwards them to the active
/// participants; true if this node is active (it must execute). With
/// failure handling it returns only once every forward landed, so a part
/// that goes on (logs, or releases its locks) has delivered its records
/// to every live participant (`failover`).
async fn start<W: Workload>(
    env: &CalvinEnv<'_, W>,
    co: u16,
    txn: &mut Scheduled,
    onesided: bool,
) -> bool {
    let worker = env.worker;
    let node = env.shared.node;
    let region = &env.store.region;
    let stride = 1 + env.calvin.max_record_words as usize;
    let read_start = worker.now_ns();
    txn.slots.clear();
    txn.slots.resize(txn.accesses.len(), u64::MAX);
    txn.values.clear();
    txn.values.resize(txn.accesses.len() * stride, 0);
    for (k, access) in txn.accesses.iter().enumerate() {
        if txn.homes[k] != node {
            continue;
        }
        let value = &mut txn.values[k * stride..(k + 1) * stride];
        match env.store.lookup(access.table, access.key) {
            Some(slot) => {
                let table = env.layout.table(access.table);
                txn.slots[k] = slot;
                value[0] = region.load(table.seq_addr(slot));
                region.read(
                    table.record_addr(slot),
                    &mut value[1..1 + table.record_words as usize],
                );
            }
            None => value[0] = MISSING,
        }
    }
    worker.charge(crate::fabric::CpuOp::Access, txn.accesses.len() as u32);
    let now = worker.now_ns();
    txn.read_ns = now - read_start;
    txn.forward_start_ns = now;

    // Forward to every active participant but this node.
    let mut active_here = false;
    let mut actives: Vec<NodeId> = Vec::new();
    for (access, &home) in txn.accesses.iter().zip(&txn.homes) {
        if !access.write {
            continue;
        }
        if home == node {
            active_here = true;
        } else if !actives.contains(&home) {
            actives.push(home);
        }
    }
    if !actives.is_empty() {
        forward(env, co, txn, &actives, onesided);
        env.submit_passive(co).await;
    }
    active_here
}

/// Queues in `co`'s batch the forwards of `txn`'s local records to every
/// node of `actives` (see [`start`]).
fn forward<W: Workload>(
    env: &CalvinEnv<'_, W>,
    co: u16,
    txn: &Scheduled,
    actives: &[NodeId],
    onesided: bool,
) {
    let node = env.shared.node;
    let stride = 1 + env.calvin.max_record_words as usize;
    let mut batch = env.worker.slot(co).batch.borrow_mut();
    batch.clear();
    for &receiver in actives {
        if onesided {
            // Block `b` at the receiver holds its `b`-th access on
            // another node than itself (`CalvinLayout::fwd_addr`): every
            // record first, then every tag.
            let blocks: Vec<(usize, u64)> = (0..txn.accesses.len())
                .filter(|&k| txn.homes[k] == node)
                .map(|k| {
                    (
                        k,
                        env.calvin
                            .fwd_addr(txn.place, txn.forward_block(receiver, k)),
                    )
                })
                .collect();
            for &(k, addr) in &blocks {
                let words = env.layout.table(txn.accesses[k].table).record_words as usize;
                batch.write(
                    receiver,
                    addr + 1,
                    &txn.values[k * stride..k * stride + 1 + words],
                );
            }
            for &(_, addr) in &blocks {
                batch.write_word(receiver, addr, txn.place.tag());
            }
        } else {
            let mut payload = batch.payload();
            let local = txn.homes.iter().filter(|&&home| home == node).count();
            let place = txn.place;
            payload.extend_from_slice(&[
                place.epoch,
                place.sequencer as u64,
                place.position as u64,
                local as u64,
            ]);
            for (k, access) in txn.accesses.iter().enumerate() {
                if txn.homes[k] != node {
                    continue;
                }
                let words = env.layout.table(access.table).record_words as usize;
                payload.push(k as u64);
                payload.extend_from_slice(&txn.values[k * stride..k * stride + 1 + words]);
            }
            batch.call(receiver, RPC_FORWARD, payload, true);
        }
    }
}

/// Runs the program of an active participant on the whole set, installs
/// this node's writes, and finishes the part.
#[allow(clippy::too_many_arguments)]
async fn execute<W: Workload>(
    env: &CalvinEnv<'_, W>,
    cx: &mut TxnCx<'_>,
    attempt_id: u64,
    index: usize,
    txn: Scheduled,
    onesided: bool,
    items: &mut Items,
) {
    let worker = env.worker;
    let node = env.shared.node;
    let execute_start = worker.now_ns();
    // Clocks of different workers (and `sim`'s per-worker virtual clocks)
    // need not agree to the nanosecond: stage times saturate at 0.
    let forward_ns = execute_start.saturating_sub(txn.forward_start_ns);
    cx.begin_part(part_txn_id(env, cx.co, attempt_id, &txn), 0);
    // The program runs for the origin, at a time fixed by the input: the
    // end of its epoch, counted from the run's start (the same on every
    // fabric and every replay).
    cx.home = txn.origin;
    cx.program_clock_ns = Some((txn.place.epoch + 1) * env.epoch_ns);
    let cx_index = preload_set(env, cx, &txn, onesided);
    let preloaded = cx.accesses.len();
    let request = env
        .workload
        .decode_request(&txn.request)
        .expect("the sequencer encoded this request");
    let outcome = {
        let exec = CalvinRun(CalvinExec {
            declared: &txn.accesses,
            store: env.store,
        });
        let mut program = Txn::new(cx, &exec);
        env.workload.execute(&mut program, &request).await
    };
    let mut log_ns = 0;
    let mut recorded = false;
    let addend = match outcome {
        Ok(()) => {
            collect_inserted(cx, preloaded, node, items);
            if let Some(writer) = env.log {
                let log_start = worker.now_ns();
                recorded = log_writes(env, cx, writer, &txn, items).await;
                log_ns = worker.now_ns().saturating_sub(log_start);
            }
            install_writes(env, cx, &txn, &cx_index, preloaded);
            // The ordered indexes change at the commit point, on the home
            // node, after the rows they name are installed and while the
            // locks that order them are still held (`store::ordered`).
            if node == txn.origin && !cx.index_ops.is_empty() && !recorded {
                env.workload.at_commit_point(node, &cx.index_ops);
            }
            0
        }
        // A record outside the set, or a row the set expected live that is
        // absent: the reconnaissance went stale.
        Err(AbortReason::Undeclared | AbortReason::RowStale) => DONE_UNDECLARED,
        Err(_) => DONE_USER_ABORT,
    };
    let execute_ns = worker
        .now_ns()
        .saturating_sub(execute_start)
        .saturating_sub(log_ns);
    let note = if addend == 0 { cx.note } else { 0 };
    if env.failover.is_some() {
        // The request's type, whichever part carries it in the history.
        let txn_type = env.workload.txn_type(&request) as u8;
        let retained = failover::Retained::of_part(&txn, cx, addend != 0, txn_type, note);
        env.shared.lock().retained.push_back(retained);
    }
    let part = Part {
        times: PartTimes {
            forward_ns,
            execute_ns,
            log_ns,
        },
        abort: addend,
        note,
        recorded,
    };
    finish(env, cx.co, index, txn, part, items).await;
}

/// A coordinator-style id of this part (node, worker, then its place): a
/// log record names the node and worker that wrote it
/// (`replication::ring`) and, with failure handling, the transaction it
/// belongs to (`failover::log_txn_id`).
fn part_txn_id<W: Workload>(
    env: &CalvinEnv<'_, W>,
    co: u16,
    attempt_id: u64,
    txn: &Scheduled,
) -> u64 {
    let (node, worker) = (env.shared.node, env.worker.worker);
    if env.failover.is_some() {
        failover::log_txn_id(node, worker, txn.id)
    } else {
        ids::txn_id(ids::coroutine_id(node, worker, co), attempt_id)
    }
}

/// Preloads the whole declared set into `cx`: this node's records from
/// the values the scheduler read, the others from the forward buffer
/// (one-sided) or the forwarding RPCs. Returns each access's index in
/// `cx` (`None`: the record is missing).
fn preload_set<W: Workload>(
    env: &CalvinEnv<'_, W>,
    cx: &mut TxnCx<'_>,
    txn: &Scheduled,
    onesided: bool,
) -> Vec<Option<usize>> {
    let node = env.shared.node;
    let stride = 1 + env.calvin.max_record_words as usize;
    let forwarded = if onesided {
        None
    } else {
        env.shared
            .lock()
            .forwards
            .remove(&txn.place)
            .map(|(_, words)| words)
    };
    // Remote records by access index, from the RPCs.
    let mut remote: Vec<(u64, usize)> = vec![(MISSING, 0); txn.accesses.len()];
    let mut scratch: Vec<u64> = Vec::new();
    if let Some(words) = &forwarded {
        for (k, seq, at) in txn.forwarded(words, env.layout) {
            remote[k] = (seq, at);
        }
    }
    let mut cx_index: Vec<Option<usize>> = vec![None; txn.accesses.len()];
    let mut block: u32 = 0;
    for (k, access) in txn.accesses.iter().enumerate() {
        let record_words = env.layout.table(access.table).record_words as usize;
        let (seq, record): (u64, &[u64]) = if txn.homes[k] == node {
            let value = &txn.values[k * stride..k * stride + 1 + record_words];
            (value[0], &value[1..])
        } else if let Some(words) = &forwarded {
            let (seq, at) = remote[k];
            (seq, &words[at..at + record_words])
        } else {
            let addr = env.calvin.fwd_addr(txn.place, block);
            block += 1;
            scratch.resize(1 + record_words, 0);
            env.store.region.read(addr + 1, &mut scratch);
            (scratch[0], &scratch[1..])
        };
        if seq != MISSING {
            cx_index[k] = Some(cx.preload(
                access.table,
                access.node,
                access.key,
                access.write,
                seq,
                record,
            ));
        }
    }
    cx_index
}

/// Rows the program inserted here (its home node), claimed by
/// `CalvinExec::insert_access`: at the version they were read.
fn collect_inserted(cx: &TxnCx<'_>, preloaded: usize, node: NodeId, items: &mut Items) {
    items.inserted.clear();
    for access in &cx.accesses[preloaded..] {
        if access.meta == INSERTED && access.node == node {
            items.inserted.push(Item {
                table: access.table,
                key: access.key,
                seq: access.seq,
            });
        }
    }
}

/// Replication: this node's writes go to its partitions' backups and are
/// acknowledged before any of them is installed here or reported done
/// (RCC §4.1's log-before-write-back, per participant; see the module
/// docs). The program has finished and the locks are held, so the
/// versions logged are the ones installed after. Returns whether the part
/// was recorded in the history at its commit point.
async fn log_writes<W: Workload>(
    env: &CalvinEnv<'_, W>,
    cx: &mut TxnCx<'_>,
    writer: &replication::LogWriter,
    txn: &Scheduled,
    items: &mut Items,
) -> bool {
    let node = env.shared.node;
    // With failure handling the part is recorded at its commit point, as
    // every protocol's is then (`replication::log`): once its records are
    // posted it is committed, even if this node dies before it installs.
    let record_now = env.failover.is_some() && env.history.is_some();
    loop {
        let note = cx.note;
        let logged = replication::log::log(cx, Some(writer), |cx| {
            if record_now {
                record_part(env, txn, 0, note, items);
                // The ordered indexes change here too, as every protocol's
                // do in fault runs: a home that dies with its records out
                // must not lose them. The locks that order range reads are
                // held, so no one reads them ahead of the rows.
                if node == txn.origin && !cx.index_ops.is_empty() {
                    env.workload.at_commit_point(node, &cx.index_ops);
                }
            }
        })
        .await;
        match logged {
            Ok(()) => return record_now,
            // Only a ring on a backup that failed meanwhile refuses
            // (before the commit point): build the records again for the
            // live backups.
            Err(reason) => {
                debug_assert!(
                    env.failover.is_some(),
                    "a CALVIN log stage failed without failure handling: {reason:?}"
                );
                env.worker.yield_now().await;
            }
        }
    }
}

/// Installs this node's writes: each written record of the set, and each
/// row the program inserted here, one version past the one read.
fn install_writes<W: Workload>(
    env: &CalvinEnv<'_, W>,
    cx: &TxnCx<'_>,
    txn: &Scheduled,
    cx_index: &[Option<usize>],
    preloaded: usize,
) {
    let node = env.shared.node;
    let install = |j: usize, slot: u64| {
        let access = &cx.accesses[j];
        let table = env.layout.table(access.table);
        let region = &env.store.region;
        // The store's `seq_end`, record, `seq` order.
        let installed = access.seq + 1;
        region.store(
            table.tuple_addr(slot) + table.seq_end_offset() as u64,
            installed,
        );
        region.write(table.record_addr(slot), cx.record(j));
        region.store(table.seq_addr(slot), installed);
    };
    for (k, access) in txn.accesses.iter().enumerate() {
        if txn.homes[k] != node || !access.write {
            continue;
        }
        if let Some(j) = cx_index[k] {
            install(j, txn.slots[k]);
        }
    }
    for (j, access) in cx.accesses.iter().enumerate().skip(preloaded) {
        if access.meta == INSERTED && access.node == node {
            debug_assert!(access.write && access.slot != NO_SLOT);
            install(j, access.slot);
        }
    }
}

/// Where an active participant's time went, ns (all 0 for a passive one).
#[derive(Clone, Copy, Default)]
struct PartTimes {
    forward_ns: u64,
    execute_ns: u64,
    log_ns: u64,
}

/// How a node's part of a transaction ended (`default`: a passive part).
#[derive(Default)]
struct Part {
    times: PartTimes,
    /// 0, or the `DONE_*` flag of the program's abort (active
    /// participants only).
    abort: u64,
    /// The program's `Txn::note` (active participants that committed).
    note: i64,
    /// The part is already in the history (recorded at its commit point).
    recorded: bool,
}

/// The node whose part carries the transaction's type and note in the
/// history: the lowest writing node (an active participant, so it ran the
/// program), or the lowest node of a read-only transaction.
pub fn designated_node(accesses: &[Declared], homes: &[NodeId]) -> Option<NodeId> {
    let writers = accesses
        .iter()
        .zip(homes)
        .filter(|(a, _)| a.write)
        .map(|(_, &home)| home)
        .min();
    writers.or_else(|| homes.iter().copied().min())
}

/// The history type of `node`'s part: the workload's type on the
/// designated part of a committed transaction, `SECONDARY_ENTRY` otherwise.
fn designated_kind<W: Workload>(
    env: &CalvinEnv<'_, W>,
    txn: &Scheduled,
    abort: u64,
    node: NodeId,
) -> u8 {
    match env.workload.decode_request(&txn.request) {
        Some(request) if abort == 0 && designated_node(&txn.accesses, &txn.homes) == Some(node) => {
            env.workload.txn_type(&request) as u8
        }
        _ => SECONDARY_ENTRY,
    }
}

/// Records this node's part of `txn` in the history: its reads (with the
/// versions read) and, unless the program aborted, its writes and the rows
/// it inserted. Every participant records an entry; the workload's
/// transaction type and note go on the designated one only
/// ([`designated_node`]) and the others carry `SECONDARY_ENTRY`, so
/// invariants that sum notes or count types see each transaction once. A
/// transaction the program aborted carries `SECONDARY_ENTRY` everywhere:
/// it committed nothing of its type.
fn record_part<W: Workload>(
    env: &CalvinEnv<'_, W>,
    txn: &Scheduled,
    abort: u64,
    note: i64,
    items: &mut Items,
) {
    let Some(history) = env.history else {
        return;
    };
    let node = env.shared.node;
    let stride = 1 + env.calvin.max_record_words as usize;
    let Items {
        reads,
        writes,
        inserted,
    } = items;
    reads.clear();
    writes.clear();
    if abort == 0 {
        for item in inserted.iter() {
            reads.push(*item);
            writes.push(Item {
                seq: item.seq + 1,
                ..*item
            });
        }
    }
    for (k, access) in txn.accesses.iter().enumerate() {
        let seq = txn.values[k * stride];
        if txn.homes[k] != node || seq == MISSING {
            continue;
        }
        reads.push(Item {
            table: access.table,
            key: access.key,
            seq,
        });
        if access.write && abort == 0 {
            writes.push(Item {
                table: access.table,
                key: access.key,
                seq: seq + 1,
            });
        }
    }
    let kind = designated_kind(env, txn, abort, node);
    let note = if kind == SECONDARY_ENTRY { 0 } else { note };
    history
        .borrow_mut()
        .push_noted(txn.id, txn.origin, kind, note, reads, writes);
}

/// Records this node's part in the history (unless it was at its commit
/// point), releases its locks, reports to the origin and retires the
/// transaction here. With failure handling it returns only once the report
/// landed (`failover`).
async fn finish<W: Workload>(
    env: &CalvinEnv<'_, W>,
    co: u16,
    index: usize,
    txn: Scheduled,
    part: Part,
    items: &mut Items,
) {
    let worker = env.worker;
    let node = env.shared.node;
    let now = worker.now_ns();
    if !part.recorded {
        record_part(env, &txn, part.abort, part.note, items);
    }
    // Only this transaction's part uses them.
    items.inserted.clear();
    {
        let mut state = env.shared.lock();
        state.drop_locks(node, index, &txn, false, Some(now));
        state.retire(index, &txn);
        state.advance(env.store, env.calvin);
        if env.failover.is_some() {
            failover::prune_retained(&mut state);
        }
    }
    // A failed origin's clients are gone with it.
    if !env.is_failed(txn.origin) {
        let mut batch = worker.slot(co).batch.borrow_mut();
        batch.clear();
        let addend = 1 + part.abort;
        if env.plan.get(Stage::ValueForwarding) == Primitive::OneSided {
            batch.faa(txn.origin, env.calvin.done_addr(txn.client), addend);
        } else {
            let mut payload = batch.payload();
            payload.extend_from_slice(&[txn.client as u64, addend]);
            batch.call(txn.origin, RPC_DONE, payload, true);
        }
    }
    env.submit_passive(co).await;
    if env.measured(now) {
        let PartTimes {
            forward_ns,
            execute_ns,
            log_ns,
        } = part.times;
        let mut stats = env.calvin_stats.borrow_mut();
        stats.parts += 1;
        stats.stage_ns[ST_DISPATCH] += txn.scheduled_ns.saturating_sub(txn.sealed_ns);
        stats.stage_ns[ST_LOCK] += txn.ready_ns.saturating_sub(txn.scheduled_ns);
        stats.stage_ns[ST_READ] += txn.read_ns;
        stats.stage_ns[ST_FORWARD] += if execute_ns > 0 || forward_ns > 0 {
            forward_ns
        } else {
            now.saturating_sub(txn.forward_start_ns)
        };
        stats.stage_ns[ST_EXECUTE] += execute_ns;
        stats.stage_ns[ST_LOG] += log_ns;
    }
}
