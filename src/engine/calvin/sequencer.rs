//! CALVIN's sequencer (RCC §4.6 and Fig. 11; Deneva §3.4; Calvin §3.1): per
//! node, the closed-loop clients' requests of each epoch, numbered and
//! delivered to the nodes they touch.
//!
//! The node's client slots (`super::client_slots`: `workers ×
//! calvin_inflight`) each keep one request outstanding: a slot whose
//! transaction completed submits its next at once (its new request's
//! `submitted_ns` is that instant), and epoch `e` is sealed at its
//! boundary, `start + (e + 1) · epoch`, with every free slot's request —
//! all that arrived during the epoch, as Deneva §3.4's sequencers batch
//! "all of the transactions that they collected in the last epoch". Slots
//! still busy with an earlier epoch's transaction are left out; nothing
//! waits for them. The batch is in slot order, and each request comes
//! from the node's seeded generator as it is sealed, so on `sim` what is
//! sequenced depends on the seed and configuration alone.
//!
//! With the lockstep clients (`calvin_inflight = 0`, `CalvinEnv::lockstep`)
//! every slot — one per executor coroutine — submits into every epoch, and
//! epoch `e` is sealed only once every transaction of epoch `e − 1` has
//! completed (RCC §6.3: CALVIN synchronizes its sequencers by epochs; an
//! epoch whose transactions run longer than the epoch stretches the next).
//! Then what is sequenced — which request, in which epoch, at which place
//! — depends on the seed and the configuration alone, never on timing:
//! every run of one configuration, on any fabric, with any stage
//! primitives and any split of its clients into workers and coroutines,
//! executes the same transactions in the same order and ends in the same
//! state (the replica property CALVIN is built on, which the tests check).
//! One exception bounds a run's length: a sequencer whose epochs stretched
//! so far that the clock passes `CalvinEnv::stop_ns` (the run's length
//! again, at least 1 s, after its end) stops
//! ordering requests at the epoch it is sealing; the others follow with
//! empty epochs (see `CalvinEnv::final_epoch`). Requests whose sets are
//! reconnoitred ([`super::recon`]) depend on the state at sealing time too.
//!
//! Sealing runs the reconnaissance of requests that need one, and submits
//! again in the next epoch a reconnoitred request whose set went stale.
//!
//! Delivery: to each node, the entries that touch it (an empty sub-batch to
//! the others, so every scheduler knows when an epoch is complete).
//! One-sided, into the receiver's request-buffer slot: first a READ round
//! checks that every receiver has freed its slot (flow control, see the
//! module docs), then per receiver a doorbell batch of two WRITEs — the
//! header's count fields with the entries, then the tag word. RPC: one
//! call per receiver, which its handler holds until it may accept the
//! epoch.
//!
//! Between boundaries the sequencer polls its slots' completion counters;
//! a slot whose participants have all reported completes (committed, or
//! given up if its program aborted).
//!
//! Invariants: epochs are sent in order, each exactly once to each node;
//! a slot is sequenced again only once its previous transaction completed,
//! so a slot has at most one transaction in flight and its counter is
//! reset only once every report of the previous one is in; positions in a
//! batch are `0..count`, in slot order.

use super::recon::Recon;
use super::{
    pack_access, CalvinEnv, CalvinRun, Poll, CRB_HEADER_WORDS, DONE_COUNT_MASK, DONE_FAILED,
    DONE_FLAG_MASK, DONE_UNDECLARED, DONE_USER_ABORT, ENTRY_FIXED_WORDS, INSERTED, RPC_BATCH,
    ST_SEQUENCE,
};
use crate::base::rng::Rng;
use crate::base::{Primitive, Stage};
use crate::fabric::NodeId;
use crate::txn::{AbortReason, Txn, TxnCx};
use crate::workloads::{Declared, Workload};

/// One closed-loop client of the node.
#[derive(Clone, Copy, Debug, Default)]
struct Client {
    busy: bool,
    /// Its set came from a reconnaissance run.
    reconnoitred: bool,
    /// The reconnoitred set proved stale: submit the request again.
    retry: bool,
    /// When the client submitted its current request (or became free).
    submitted_ns: u64,
    sealed_ns: u64,
    participants: u32,
    /// The workload's type of its current request (`Workload::txn_type`).
    kind: usize,
}

/// Polls every busy client's completion counter; completes those whose
/// participants have all reported.
fn collect_completions<W: Workload>(env: &CalvinEnv<'_, W>, clients: &mut [Client]) {
    let region = &env.store.region;
    let now = env.worker.now_ns();
    for (slot, client) in clients.iter_mut().enumerate() {
        if !client.busy {
            continue;
        }
        let done = region.load(env.calvin.done_addr(slot as u32));
        let reported = (done & DONE_COUNT_MASK) as u32;
        let given_up = done & DONE_FAILED != 0;
        debug_assert!(reported <= client.participants, "more reports than nodes");
        if reported < client.participants && !given_up {
            continue;
        }
        client.busy = false;
        if env.failover.is_some() {
            let mut state = env.shared.lock();
            state.in_flight[slot].busy = false;
        }
        if env.measured(now) {
            count_completion(env, client, done, now);
        }
        // A stale reconnaissance restarts the request (Deneva §3.4), and
        // so does a failover that gave it up.
        let count = (done / DONE_UNDECLARED) & DONE_FLAG_MASK;
        client.retry = (client.reconnoitred && count > 0) || given_up;
        if !client.retry {
            client.submitted_ns = now;
        }
    }
}

/// Counts in the worker's stats `client`'s transaction, complete at
/// `now` with its counter at `done`: a commit (its latency, and when it
/// fell against an injected fault), or an abort with its reason.
fn count_completion<W: Workload>(env: &CalvinEnv<'_, W>, client: &Client, done: u64, now: u64) {
    let mut stats = env.stats.borrow_mut();
    if done & !DONE_COUNT_MASK == 0 {
        stats.committed += 1;
        if let Some(membership) = env.worker.membership() {
            let detected = membership.epoch() > 0;
            if now < env.fault_at_ns {
                stats.fault_commits.before_fault += 1;
            } else {
                stats.fault_commits.after_fault += 1;
                if detected {
                    stats.fault_commits.after_detection += 1;
                }
            }
        }
        stats.committed_by_type[client.kind] += 1;
        stats.per_type[client.kind].latency_ns_sum += now - client.submitted_ns;
        stats.latency.record(
            client.kind,
            now - env.clock.warmup_end_ns,
            now - client.submitted_ns,
        );
        env.calvin_stats.borrow_mut().stage_ns[ST_SEQUENCE] +=
            client.sealed_ns - client.submitted_ns;
        return;
    }
    let count = |flag: u64| (done / flag) & DONE_FLAG_MASK;
    let reason = if done & DONE_FAILED != 0 {
        AbortReason::PeerFailed
    } else if count(DONE_UNDECLARED) > 0 {
        AbortReason::Undeclared
    } else {
        debug_assert!(count(DONE_USER_ABORT) > 0);
        AbortReason::User
    };
    stats.aborts[reason.index()] += 1;
    stats.per_type[client.kind].aborted += 1;
    if reason == AbortReason::User || (reason == AbortReason::Undeclared && !client.reconnoitred) {
        stats.user_aborted += 1;
        stats.per_type[client.kind].user_aborted += 1;
    }
}

/// Merges records declared twice (written if either is) and checks that
/// the set and the request fit the buffers and name existing nodes and
/// tables.
fn well_formed<W: Workload>(
    env: &CalvinEnv<'_, W>,
    declared: &mut Vec<Declared>,
    request_words: usize,
) -> bool {
    let mut at = 0;
    while at < declared.len() {
        let access = declared[at];
        let first = declared[..at]
            .iter()
            .position(|d| d.table == access.table && d.node == access.node && d.key == access.key);
        match first {
            Some(first) => {
                declared[first].write |= access.write;
                declared.remove(at);
            }
            None => at += 1,
        }
    }
    let calvin = env.calvin;
    !declared.is_empty()
        && declared.len() <= calvin.max_accesses as usize
        && calvin.forwards_fit(declared)
        && ENTRY_FIXED_WORDS + 2 * declared.len() + request_words <= calvin.entry_words as usize
        && declared
            .iter()
            .all(|d| (d.node as u32) < calvin.nodes && (d.table as usize) < env.layout.tables.len())
}

/// The sequencer coroutine of a node.
pub async fn run_sequencer<W: Workload>(env: &CalvinEnv<'_, W>, co: u16) {
    env.enter(co);
    let mut sequencer = Sequencer::new(env, co);
    let mut stopped = false;
    let mut epoch: u64 = 0;
    loop {
        if stopped {
            if sequencer.await_turn_after_stop(epoch).await {
                break;
            }
        } else {
            sequencer.await_boundary(epoch).await;
        }
        let sealed_ns = env.worker.now_ns();
        // With requests in flight the input depends on timing anyway, so a
        // sequencer that fell behind its epochs (flow control held it)
        // stops at the first seal past the end rather than sealing every
        // epoch up to `final_epoch` after it, ordering requests that can
        // no longer be measured.
        let stop = epoch >= env.final_epoch
            || sealed_ns >= env.stop_ns
            || (!env.lockstep && sealed_ns >= env.clock.end_ns);
        sequencer.clear_sub_batches();
        if !stopped {
            sequencer.seal(epoch, sealed_ns).await;
        }
        sequencer.deliver(epoch, sealed_ns, stop).await;
        stopped = stop;
        epoch += 1;
    }
    sequencer.finish().await;
}

/// A node's sequencer between epochs: its clients, and the buffers an
/// epoch's sub-batches are built in (kept for their capacity).
struct Sequencer<'e, 'a, W: Workload> {
    env: &'e CalvinEnv<'a, W>,
    co: u16,
    node: NodeId,
    rng: Rng,
    clients: Vec<Client>,
    /// Each client's current request (kept for a retry).
    requests: Vec<Option<W::Request>>,
    /// Per receiver: entry count and words of this epoch's sub-batch.
    sub_batches: Vec<(u64, Vec<u64>)>,
    declared: Vec<Declared>,
    request_words: Vec<u64>,
    entry: Vec<u64>,
    touched: Vec<bool>,
    nodes_touched: Vec<NodeId>,
    /// Transactions this sequencer numbered so far.
    counter: u64,
    recon: CalvinRun<Recon<'a>>,
    recon_cx: TxnCx<'a>,
    recon_runs: u64,
    /// Completions are looked for at most this often between boundaries
    /// (latency is measured to within it).
    poll: Poll,
}

impl<'e, 'a, W: Workload> Sequencer<'e, 'a, W> {
    fn new(env: &'e CalvinEnv<'a, W>, co: u16) -> Self {
        let node = env.shared.node;
        let nodes = env.nodes() as usize;
        let clients = env.calvin.clients as usize;
        if env.failover.is_some() {
            let mut state = env.shared.lock();
            state.in_flight = vec![super::failover::InFlight::default(); clients];
        }
        Sequencer {
            env,
            co,
            node,
            rng: Rng::derive(env.seed, &[node as u64, 0xca1, 0x5e9]),
            clients: vec![
                Client {
                    submitted_ns: env.clock.start_ns,
                    ..Client::default()
                };
                clients
            ],
            requests: vec![None; clients],
            sub_batches: vec![(0, Vec::new()); nodes],
            declared: Vec::new(),
            request_words: Vec::new(),
            entry: Vec::new(),
            touched: vec![false; nodes],
            nodes_touched: Vec::new(),
            counter: 0,
            recon: CalvinRun(Recon { store: env.store }),
            recon_cx: TxnCx::new(env.worker, co, env.layout, env.cache, env.plan),
            recon_runs: 0,
            poll: Poll::new(env.epoch_ns),
        }
    }

    /// One look between waits: parks while a failover pauses the cluster,
    /// completes the clients whose transactions finished, and notes the
    /// measured interval's edges. Returns the time.
    async fn look(&mut self) -> u64 {
        let env = self.env;
        env.park_if_paused(self.co).await;
        collect_completions(env, &mut self.clients);
        let now = env.worker.now_ns();
        env.note_boundaries(now);
        now
    }

    /// After the last epoch that orders requests: waits until this node
    /// has scheduled `epoch - 1`, so empty epochs go out one at a time.
    /// Returns whether the run's last epoch is known (some epoch saw
    /// every sequencer stopped), which ends the sequencing.
    async fn await_turn_after_stop(&mut self, epoch: u64) -> bool {
        let (env, worker) = (self.env, self.env.worker);
        loop {
            self.look().await;
            let (scheduled_below, last_epoch) = {
                let state = env.shared.lock();
                (state.scheduled_below, state.last_epoch)
            };
            if last_epoch.is_some() {
                return true;
            }
            if scheduled_below >= epoch {
                return false;
            }
            worker.sleep(self.co, self.poll.wait_ns()).await;
        }
    }

    /// Waits for `epoch`'s boundary; in lockstep also for every client's
    /// last transaction to complete (epoch-synchronous).
    async fn await_boundary(&mut self, epoch: u64) {
        let (env, worker) = (self.env, self.env.worker);
        let boundary = env.clock.start_ns + (epoch + 1) * env.epoch_ns;
        loop {
            let now = self.look().await;
            let waits_for_boundary_only = !env.lockstep || self.clients.iter().all(|c| !c.busy);
            if now >= boundary && waits_for_boundary_only {
                return;
            }
            let wait = self.poll.wait_ns();
            let wait = if waits_for_boundary_only {
                wait.min(boundary - now)
            } else {
                wait
            };
            worker.sleep(self.co, wait).await;
        }
    }

    fn clear_sub_batches(&mut self) {
        for (count, words) in self.sub_batches.iter_mut() {
            *count = 0;
            words.clear();
        }
    }

    /// Seals `epoch` at `sealed_ns`: every free client's request (in
    /// lockstep every client's) goes into the sub-batches of the nodes it
    /// touches, at dense positions in slot order.
    async fn seal(&mut self, epoch: u64, sealed_ns: u64) {
        let env = self.env;
        // The routing the entries are sealed under (`failover`).
        let generation = env.failover.map_or(0, |f| f.generation());
        let mut positions: u64 = 0;
        for slot in 0..self.clients.len() {
            if self.clients[slot].busy {
                // Its transaction of an earlier epoch is still running:
                // one request in flight per slot.
                debug_assert!(!env.lockstep, "a lockstep epoch sealed early");
                continue;
            }
            debug_assert!(self.clients[slot].submitted_ns <= sealed_ns);
            let request = self.next_request(slot);
            if !self.declare(slot, &request).await {
                // A set naming records no node can hold, or beyond the
                // workload's own bounds, is given up.
                if env.measured(sealed_ns) {
                    let mut stats = env.stats.borrow_mut();
                    stats.aborts[AbortReason::Undeclared.index()] += 1;
                    stats.user_aborted += 1;
                }
                self.clients[slot].submitted_ns = sealed_ns;
                continue;
            }
            // Positions are dense, so forward blocks of the low positions
            // are the ones reused.
            let position = positions;
            positions += 1;
            self.sequence(slot, &request, epoch, sealed_ns, (generation, position));
        }
    }

    /// Client `slot`'s next request: the one to retry, or a new one from
    /// the node's generator.
    fn next_request(&mut self, slot: usize) -> W::Request {
        let client = &mut self.clients[slot];
        if client.retry {
            client.retry = false;
            return self.requests[slot].expect("a request to retry");
        }
        let request = self.env.workload.generate(&mut self.rng, self.node);
        self.requests[slot] = Some(request);
        request
    }

    /// Fills `declared` with the request's set — reconnoitred when it
    /// depends on data — and `request_words` with its encoding. Returns
    /// whether the set is well formed.
    async fn declare(&mut self, slot: usize, request: &W::Request) -> bool {
        let env = self.env;
        self.declared.clear();
        self.request_words.clear();
        let declared_ok = env.workload.declare_accesses(request, &mut self.declared);
        self.clients[slot].reconnoitred = !declared_ok;
        if !declared_ok {
            // The set depends on data: reconnoitre it (what the workload
            // declared anyway is kept: see `recon`).
            self.reconnoitre(request).await;
        }
        env.workload
            .encode_request(request, &mut self.request_words);
        well_formed(env, &mut self.declared, self.request_words.len())
    }

    /// Runs the program against the committed state and adds the records
    /// it touched (but not the rows it inserts) to `declared`.
    async fn reconnoitre(&mut self, request: &W::Request) {
        self.recon_runs += 1;
        self.recon_cx.begin(self.recon_runs, 0);
        {
            let mut program = Txn::new(&mut self.recon_cx, &self.recon);
            // Its outcome does not matter: execution decides.
            let _ = self.env.workload.execute(&mut program, request).await;
        }
        self.declared.extend(
            self.recon_cx
                .accesses
                .iter()
                .filter(|a| a.meta != INSERTED)
                .map(|a| Declared {
                    table: a.table,
                    node: a.node,
                    key: a.key,
                    write: a.write,
                }),
        );
    }

    /// Numbers client `slot`'s declared request and appends its entry to
    /// the sub-batch of every participant; `at` is the routing generation
    /// and the entry's position in the batch.
    fn sequence(
        &mut self,
        slot: usize,
        request: &W::Request,
        epoch: u64,
        sealed_ns: u64,
        at: (u32, u64),
    ) {
        let env = self.env;
        let calvin = env.calvin;
        let (generation, position) = at;
        debug_assert!(self.declared.len() <= calvin.max_accesses as usize);
        debug_assert!(
            self.request_words.len() + 2 * self.declared.len() + ENTRY_FIXED_WORDS
                <= calvin.entry_words as usize
        );
        debug_assert!(position < calvin.clients as u64);
        self.counter += 1;
        let id = ((self.node as u64) << 40) | self.counter;
        // Each participant is the node serving a partition the set
        // touches (one node may serve several after a failover).
        self.touched.iter_mut().for_each(|t| *t = false);
        for access in &self.declared {
            self.touched[env.serving(access.node) as usize] = true;
        }
        let client = &mut self.clients[slot];
        client.busy = true;
        client.sealed_ns = sealed_ns;
        client.participants = self.touched.iter().filter(|&&t| t).count() as u32;
        client.kind = env.workload.txn_type(request);
        // Free slot: every report of its last transaction is in.
        env.store.region.store(calvin.done_addr(slot as u32), 0);
        if env.failover.is_some() {
            let touched = &self.touched;
            self.nodes_touched.clear();
            self.nodes_touched
                .extend((0..touched.len() as NodeId).filter(|&n| touched[n as usize]));
            let mut state = env.shared.lock();
            state.in_flight[slot].set(id, epoch, &self.nodes_touched, &self.declared);
        }
        self.entry.clear();
        self.entry.extend_from_slice(&[
            id,
            ((self.node as u64) << 32) | slot as u64,
            ((generation as u64) << 32) | position,
            ((self.declared.len() as u64) << 32) | self.request_words.len() as u64,
            client.submitted_ns,
        ]);
        for access in &self.declared {
            self.entry.extend_from_slice(&pack_access(access));
        }
        self.entry.extend_from_slice(&self.request_words);
        for (receiver, (count, words)) in self.sub_batches.iter_mut().enumerate() {
            if self.touched[receiver] {
                *count += 1;
                words.extend_from_slice(&self.entry);
            }
        }
    }

    /// Delivers `epoch`'s sub-batches to the live nodes. Receivers may be
    /// parked by a failover meanwhile (flow control then waits for them):
    /// the recovery need not wait for this coroutine, whose rounds go out
    /// regardless.
    async fn deliver(&mut self, epoch: u64, sealed_ns: u64, stop: bool) {
        let worker = self.env.worker;
        let failover = crate::recovery::failover_of(worker);
        if let Some(failover) = failover {
            failover.step_out(self.node, worker.now_ns());
        }
        if self.env.plan.get(Stage::TxnBroadcastInput) == Primitive::OneSided {
            self.await_free_slots(epoch).await;
            self.write_sub_batches(epoch, sealed_ns, stop);
            // Only a receiver declared failed misses it (`failover`).
            let _ = worker.submit(self.co).await;
        } else {
            self.call_sub_batches(epoch, sealed_ns, stop).await;
        }
        if let Some(failover) = failover {
            failover.step_in(self.node);
        }
    }

    /// Flow control of the one-sided delivery: reads until every live
    /// receiver has freed its request-buffer slot for `epoch`.
    async fn await_free_slots(&mut self, epoch: u64) {
        let (env, worker, co) = (self.env, self.env.worker, self.co);
        let crb_addr = env.calvin.crb_addr(self.node, epoch);
        loop {
            let ids: Vec<_> = {
                let mut batch = worker.slot(co).batch.borrow_mut();
                batch.clear();
                (0..env.nodes() as NodeId)
                    .filter(|&receiver| !env.is_failed(receiver))
                    .map(|receiver| batch.read(receiver, crb_addr, 1))
                    .collect()
            };
            // A round fails only for a receiver declared failed, which
            // the next round leaves out.
            let _ = worker.submit(co).await;
            let all_free = {
                let batch = worker.slot(co).batch.borrow();
                ids.iter().all(|&id| batch.result_word(id) == 0)
            };
            if all_free {
                return;
            }
            collect_completions(env, &mut self.clients);
            worker.sleep(co, self.poll.wait_ns()).await;
        }
    }

    /// Queues, per live receiver, the two WRITEs of the one-sided
    /// delivery: the header's count fields with the entries, then the tag
    /// word (FIFO order makes it visible only once the entries are).
    fn write_sub_batches(&self, epoch: u64, sealed_ns: u64, stop: bool) {
        let env = self.env;
        let mut batch = env.worker.slot(self.co).batch.borrow_mut();
        batch.clear();
        let slot = env.calvin.crb_addr(self.node, epoch);
        for (receiver, (count, words)) in self.sub_batches.iter().enumerate() {
            let receiver = receiver as NodeId;
            if env.is_failed(receiver) {
                continue;
            }
            let mut body = Vec::with_capacity(4 + words.len());
            body.extend_from_slice(&[*count, words.len() as u64, sealed_ns, stop as u64]);
            body.extend_from_slice(words);
            batch.write(receiver, slot + 1, &body);
            batch.write_word(receiver, slot, epoch + 1);
        }
        debug_assert_eq!(CRB_HEADER_WORDS, 5);
    }

    /// The RPC delivery: one call per live receiver, until every one got
    /// the epoch (or this node failed, or the run is past `stop_ns`).
    async fn call_sub_batches(&mut self, epoch: u64, sealed_ns: u64, stop: bool) {
        let (env, worker, co, node) = (self.env, self.env.worker, self.co, self.node);
        let failover = crate::recovery::failover_of(worker);
        loop {
            {
                let mut batch = worker.slot(co).batch.borrow_mut();
                batch.clear();
                for (receiver, (count, words)) in self.sub_batches.iter().enumerate() {
                    if env.is_failed(receiver as NodeId) {
                        continue;
                    }
                    let mut payload = batch.payload();
                    payload.extend_from_slice(&[
                        node as u64,
                        epoch,
                        sealed_ns,
                        *count,
                        stop as u64,
                    ]);
                    payload.extend_from_slice(words);
                    batch.call(receiver as NodeId, RPC_BATCH, payload, false);
                }
            }
            let delivered = worker.submit(co).await.is_ok();
            // (Past `stop_ns` the worker gives its rounds up.)
            if delivered || env.is_failed(node) || worker.now_ns() >= env.stop_ns {
                return;
            }
            // A receiver declared failed misses it (`failover`); but a
            // live one that held the call for flow control
            // (`Served::Wait`) refuses it when a failover pauses the
            // cluster, and must still get the epoch. So after the
            // pause, every live receiver gets it again (one that has
            // it already ignores the copy). Epochs pipelined behind
            // slow ones make held calls common.
            while failover.is_some_and(|f| f.paused()) && worker.now_ns() < env.stop_ns {
                worker.sleep(co, self.poll.wait_ns()).await;
            }
            collect_completions(env, &mut self.clients);
        }
    }

    /// Every transaction sequenced here completes before the node stops.
    async fn finish(&mut self) {
        let (env, worker, co) = (self.env, self.env.worker, self.co);
        while self.clients.iter().any(|c| c.busy) {
            self.look().await;
            if self.clients.iter().any(|c| c.busy) {
                worker.sleep(co, self.poll.wait_ns()).await;
            }
        }
        env.note_boundaries(worker.now_ns());
        worker.drain(co).await;
        if let Some(failover) = crate::recovery::failover_of(worker) {
            failover.finished(self.node);
        }
    }
}
