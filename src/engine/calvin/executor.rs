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
    CalvinEnv, CalvinExec, CalvinRun, NodeState, Poll, DONE_UNDECLARED, DONE_USER_ABORT, INSERTED,
    MISSING, RPC_DONE, RPC_FORWARD, ST_DISPATCH, ST_EXECUTE, ST_FORWARD, ST_LOCK, ST_LOG, ST_READ,
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

/// The executor coroutine `co` of a worker; returns once every epoch this
/// node schedules has finished here.
pub async fn run_executor<W: Workload>(env: &CalvinEnv<'_, W>, co: u16) {
    let worker = env.worker;
    env.enter(co);
    let mut executor = Executor {
        env,
        co,
        node: env.shared.node,
        onesided: env.plan.get(Stage::ValueForwarding) == Primitive::OneSided,
        stride: 1 + env.calvin.max_record_words as usize,
        cx: TxnCx::new(worker, co, env.layout, env.cache, env.plan),
        attempts: 0,
        items: Items::default(),
    };
    let mut poll = Poll::new(env.epoch_ns);
    loop {
        env.note_boundaries(worker.now_ns());
        env.park_if_paused(co).await;
        if let Some(failover) = env.failover {
            // A failed home's ordered-index changes that a failover took
            // from a survivor's computation, before any new work reads them.
            failover.apply_index_ops(|home, ops| env.workload.at_commit_point(home, ops));
        }
        match executor.take_work() {
            Work::Done => break,
            Work::Idle => {
                worker.sleep(co, poll.wait_ns()).await;
                continue;
            }
            Work::Fresh(index, txn) => {
                poll.reset();
                executor.start(index, txn).await;
            }
            Work::Resume(index, txn) => {
                poll.reset();
                executor.execute(index, txn).await;
            }
        }
        worker.yield_now().await;
    }
    env.note_boundaries(worker.now_ns());
    worker.drain(co).await;
    if let Some(failover) = crate::recovery::failover_of(worker) {
        failover.finished(executor.node);
    }
}

/// One executor coroutine: its transaction context and scratch lists,
/// kept across the parts it runs.
struct Executor<'e, 'a, W: Workload> {
    env: &'e CalvinEnv<'a, W>,
    co: u16,
    node: NodeId,
    /// `value_forwarding` is one-sided (else RPC).
    onesided: bool,
    /// Words per access in `Scheduled::values`: `[seq, record]`.
    stride: usize,
    cx: TxnCx<'a>,
    /// Program runs so far (a part's id without failure handling).
    attempts: u64,
    items: Items,
}

impl<W: Workload> Executor<'_, '_, W> {
    /// Whether every record `txn` needs from other nodes has been
    /// forwarded here.
    fn forwards_complete(&self, state: &NodeState, txn: &Scheduled) -> bool {
        let env = self.env;
        let remote = txn.homes.iter().filter(|&&home| home != self.node).count() as u32;
        if remote == 0 {
            true
        } else if self.onesided {
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

    /// The next work: a ready transaction first, then a parked one whose
    /// records have all arrived.
    fn take_work(&self) -> Work {
        let mut state = self.env.shared.lock();
        if let Some(index) = state.ready.pop_front() {
            let txn = state.txns[index].take().expect("a ready transaction");
            return Work::Fresh(index, txn);
        }
        let found = state.parked.iter().position(|&index| {
            let txn = state.txns[index].as_ref().expect("a parked transaction");
            self.forwards_complete(&state, txn)
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

    /// `[seq, record]` of local access `k` of `txn`, as read.
    fn value<'t>(&self, txn: &'t Scheduled, k: usize) -> &'t [u64] {
        let words = self.env.layout.table(txn.accesses[k].table).record_words as usize;
        &txn.values[k * self.stride..k * self.stride + 1 + words]
    }

    /// Starts a ready transaction, slab entry `index`: reads and forwards
    /// its local records ([`Executor::read_and_forward`]); a passive part
    /// is then done, an active one executes once every remote record is
    /// here, and parks until then.
    async fn start(&mut self, index: usize, mut txn: Scheduled) {
        if !self.read_and_forward(&mut txn).await {
            return self.finish(index, txn, Part::default()).await;
        }
        if self.forwards_complete(&self.env.shared.lock(), &txn) {
            return self.execute(index, txn).await;
        }
        // Re-checked by every idle executor: what arrives meanwhile is
        // not missed.
        let mut state = self.env.shared.lock();
        state.txns[index] = Some(txn);
        state.parked.push(index);
    }

    /// Reads `txn`'s local records and forwards them to the active
    /// participants; true if this node is active (it must execute). With
    /// failure handling it returns only once every forward landed, so a
    /// part that goes on (logs, or releases its locks) has delivered its
    /// records to every live participant (`failover`).
    async fn read_and_forward(&self, txn: &mut Scheduled) -> bool {
        let (env, node, stride) = (self.env, self.node, self.stride);
        let worker = env.worker;
        let region = &env.store.region;
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
            self.forward(txn, &actives);
            env.submit_passive(self.co).await;
        }
        active_here
    }

    /// Queues in the coroutine's batch the forwards of `txn`'s local
    /// records to every node of `actives`.
    fn forward(&self, txn: &Scheduled, actives: &[NodeId]) {
        let (env, node) = (self.env, self.node);
        let mut batch = env.worker.slot(self.co).batch.borrow_mut();
        batch.clear();
        let local = || (0..txn.accesses.len()).filter(|&k| txn.homes[k] == node);
        for &receiver in actives {
            if self.onesided {
                // Block `b` at the receiver holds its `b`-th access on
                // another node than itself (`CalvinLayout::fwd_addr`):
                // every record first, then every tag.
                let addr = |k| {
                    env.calvin
                        .fwd_addr(txn.place, txn.forward_block(receiver, k))
                };
                for k in local() {
                    batch.write(receiver, addr(k) + 1, self.value(txn, k));
                }
                for k in local() {
                    batch.write_word(receiver, addr(k), txn.place.tag());
                }
            } else {
                let mut payload = batch.payload();
                let place = txn.place;
                payload.extend_from_slice(&[
                    place.epoch,
                    place.sequencer as u64,
                    place.position as u64,
                    local().count() as u64,
                ]);
                for k in local() {
                    payload.push(k as u64);
                    payload.extend_from_slice(self.value(txn, k));
                }
                batch.call(receiver, RPC_FORWARD, payload, true);
            }
        }
    }

    /// Runs the program of an active participant on the whole set, installs
    /// this node's writes, and finishes the part.
    async fn execute(&mut self, index: usize, txn: Scheduled) {
        let (env, node) = (self.env, self.node);
        let worker = env.worker;
        self.attempts += 1;
        let execute_start = worker.now_ns();
        // Clocks of different workers (and `sim`'s per-worker virtual
        // clocks) need not agree to the nanosecond: stage times saturate
        // at 0.
        let forward_ns = execute_start.saturating_sub(txn.forward_start_ns);
        let txn_id = self.part_txn_id(&txn);
        let cx = &mut self.cx;
        cx.begin_part(txn_id, 0);
        // The program runs for the origin, at a time fixed by the input:
        // the end of its epoch, counted from the run's start (the same on
        // every fabric and every replay).
        cx.home = txn.origin;
        cx.program_clock_ns = Some((txn.place.epoch + 1) * env.epoch_ns);
        let cx_index = self.preload_set(&txn);
        let cx = &mut self.cx;
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
                self.collect_inserted(preloaded);
                if let Some(writer) = env.log {
                    let log_start = worker.now_ns();
                    recorded = self.log_writes(writer, &txn).await;
                    log_ns = worker.now_ns().saturating_sub(log_start);
                }
                let cx = &self.cx;
                install_writes(env, cx, &txn, &cx_index, preloaded);
                // The ordered indexes change at the commit point, on the
                // home node, after the rows they name are installed and
                // while the locks that order them are still held
                // (`store::ordered`).
                if node == txn.origin && !cx.index_ops.is_empty() && !recorded {
                    env.workload.at_commit_point(node, &cx.index_ops);
                }
                0
            }
            // A record outside the set, or a row the set expected live that
            // is absent: the reconnaissance went stale.
            Err(AbortReason::Undeclared | AbortReason::RowStale) => DONE_UNDECLARED,
            Err(_) => DONE_USER_ABORT,
        };
        let execute_ns = worker
            .now_ns()
            .saturating_sub(execute_start)
            .saturating_sub(log_ns);
        let note = if addend == 0 { self.cx.note } else { 0 };
        if env.failover.is_some() {
            // The request's type, whichever part carries it in the history.
            let txn_type = env.workload.txn_type(&request) as u8;
            let retained = failover::Retained::of_part(&txn, &self.cx, addend != 0, txn_type, note);
            env.shared.lock().retained.push_back(retained);
        }
        let times = PartTimes {
            forward_ns,
            execute_ns,
            log_ns,
        };
        let part = Part {
            times,
            abort: addend,
            note,
            recorded,
        };
        self.finish(index, txn, part).await;
    }

    /// A coordinator-style id of this part (node, worker, then its place):
    /// a log record names the node and worker that wrote it
    /// (`replication::ring`) and, with failure handling, the transaction it
    /// belongs to (`failover::log_txn_id`).
    fn part_txn_id(&self, txn: &Scheduled) -> u64 {
        let (node, worker) = (self.node, self.env.worker.worker);
        if self.env.failover.is_some() {
            failover::log_txn_id(node, worker, txn.id)
        } else {
            ids::txn_id(ids::coroutine_id(node, worker, self.co), self.attempts)
        }
    }

    /// Preloads the whole declared set into the context: this node's
    /// records from the values read, the others from the forward buffer
    /// (one-sided) or the forwarding RPCs. Returns each access's index in
    /// the context (`None`: the record is missing).
    fn preload_set(&mut self, txn: &Scheduled) -> Vec<Option<usize>> {
        let env = self.env;
        let forwarded = if self.onesided {
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
        if let Some(words) = &forwarded {
            for (k, seq, at) in txn.forwarded(words, env.layout) {
                remote[k] = (seq, at);
            }
        }
        let mut scratch: Vec<u64> = Vec::new();
        let mut cx_index: Vec<Option<usize>> = vec![None; txn.accesses.len()];
        let mut block: u32 = 0;
        for (k, access) in txn.accesses.iter().enumerate() {
            let record_words = env.layout.table(access.table).record_words as usize;
            let (seq, record): (u64, &[u64]) = if txn.homes[k] == self.node {
                let value = self.value(txn, k);
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
                let (table, node, key, write) =
                    (access.table, access.node, access.key, access.write);
                cx_index[k] = Some(self.cx.preload(table, node, key, write, seq, record));
            }
        }
        cx_index
    }

    /// Rows the program inserted here (its home node), claimed by
    /// `CalvinExec::insert_access`: at the version they were read.
    fn collect_inserted(&mut self, preloaded: usize) {
        let inserted = &mut self.items.inserted;
        inserted.clear();
        for access in &self.cx.accesses[preloaded..] {
            if access.meta == INSERTED && access.node == self.node {
                inserted.push(Item {
                    table: access.table,
                    key: access.key,
                    seq: access.seq,
                });
            }
        }
    }

    /// Replication: this node's writes go to its partitions' backups and
    /// are acknowledged before any of them is installed here or reported
    /// done (RCC §4.1's log-before-write-back, per participant; see the
    /// module docs). The program has finished and the locks are held, so
    /// the versions logged are the ones installed after. Returns whether
    /// the part was recorded in the history at its commit point.
    async fn log_writes(&mut self, writer: &replication::LogWriter, txn: &Scheduled) -> bool {
        let Executor {
            env,
            node,
            stride,
            cx,
            items,
            ..
        } = self;
        let (env, node, stride) = (*env, *node, *stride);
        // With failure handling the part is recorded at its commit point,
        // as every protocol's is then (`replication::log`): once its
        // records are posted it is committed, even if this node dies
        // before it installs.
        let record_now = env.failover.is_some() && env.history.is_some();
        loop {
            let note = cx.note;
            let logged = replication::log::log(cx, Some(writer), |cx| {
                if record_now {
                    record_part(env, txn, stride, (0, note), items);
                    // The ordered indexes change here too, as every
                    // protocol's do in fault runs: a home that dies with its
                    // records out must not lose them. The locks that order
                    // range reads are held, so no one reads them ahead of
                    // the rows.
                    if node == txn.origin && !cx.index_ops.is_empty() {
                        env.workload.at_commit_point(node, &cx.index_ops);
                    }
                }
            })
            .await;
            match logged {
                Ok(()) => return record_now,
                // Only a ring on a backup that failed meanwhile refuses
                // (before the commit point): build the records again for
                // the live backups.
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

    /// Records this node's part in the history (unless it was at its
    /// commit point), releases its locks, reports to the origin and
    /// retires the transaction here. With failure handling it returns only
    /// once the report landed (`failover`).
    async fn finish(&mut self, index: usize, txn: Scheduled, part: Part) {
        let (env, node) = (self.env, self.node);
        let worker = env.worker;
        let now = worker.now_ns();
        if !part.recorded {
            record_part(
                env,
                &txn,
                self.stride,
                (part.abort, part.note),
                &mut self.items,
            );
        }
        // Only this transaction's part uses them.
        self.items.inserted.clear();
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
            let mut batch = worker.slot(self.co).batch.borrow_mut();
            batch.clear();
            let addend = 1 + part.abort;
            if self.onesided {
                batch.faa(txn.origin, env.calvin.done_addr(txn.client), addend);
            } else {
                let mut payload = batch.payload();
                payload.extend_from_slice(&[txn.client as u64, addend]);
                batch.call(txn.origin, RPC_DONE, payload, true);
            }
        }
        env.submit_passive(self.co).await;
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

/// Records this node's part of `txn` (whose values are `stride` words
/// apart) in the history: its reads (with the versions read) and, unless
/// the program aborted (`abort`, as in [`Part`]), its writes and the rows
/// it inserted. Every participant records an entry; the workload's
/// transaction type and `note` go on the designated one only
/// ([`designated_node`]) and the others carry `SECONDARY_ENTRY`, so
/// invariants that sum notes or count types see each transaction once. A
/// transaction the program aborted carries `SECONDARY_ENTRY` everywhere:
/// it committed nothing of its type.
fn record_part<W: Workload>(
    env: &CalvinEnv<'_, W>,
    txn: &Scheduled,
    stride: usize,
    (abort, note): (u64, i64),
    items: &mut Items,
) {
    let Some(history) = env.history else {
        return;
    };
    let node = env.shared.node;
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
        let item = Item {
            table: access.table,
            key: access.key,
            seq,
        };
        reads.push(item);
        if access.write && abort == 0 {
            writes.push(Item {
                seq: seq + 1,
                ..item
            });
        }
    }
    let designated = abort == 0 && designated_node(&txn.accesses, &txn.homes) == Some(node);
    let (kind, note) = match env.workload.decode_request(&txn.request) {
        Some(request) if designated => (env.workload.txn_type(&request) as u8, note),
        _ => (SECONDARY_ENTRY, 0),
    };
    history
        .borrow_mut()
        .push_noted(txn.id, txn.origin, kind, note, reads, writes);
}
