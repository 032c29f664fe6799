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
    pack_access, CalvinEnv, Poll, CRB_HEADER_WORDS, DONE_COUNT_MASK, DONE_FAILED, DONE_FLAG_MASK,
    DONE_UNDECLARED, DONE_USER_ABORT, ENTRY_FIXED_WORDS, INSERTED, RPC_BATCH, ST_SEQUENCE,
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
                    now - env.warmup_end_ns,
                    now - client.submitted_ns,
                );
                env.calvin_stats.borrow_mut().stage_ns[ST_SEQUENCE] +=
                    client.sealed_ns - client.submitted_ns;
            } else {
                let count = |flag: u64| (done / flag) & DONE_FLAG_MASK;
                let reason = if given_up {
                    AbortReason::PeerFailed
                } else if count(DONE_UNDECLARED) > 0 {
                    AbortReason::Undeclared
                } else {
                    debug_assert!(count(DONE_USER_ABORT) > 0);
                    AbortReason::User
                };
                stats.aborts[reason.index()] += 1;
                stats.per_type[client.kind].aborted += 1;
                if reason == AbortReason::User
                    || (reason == AbortReason::Undeclared && !client.reconnoitred)
                {
                    stats.user_aborted += 1;
                    stats.per_type[client.kind].user_aborted += 1;
                }
            }
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
    let worker = env.worker;
    env.enter(co);
    let node = env.shared.node;
    let nodes = env.nodes() as usize;
    let calvin = env.calvin;
    let onesided = env.plan.get(Stage::TxnBroadcastInput) == Primitive::OneSided;
    let mut rng = Rng::derive(env.seed, &[node as u64, 0xca1, 0x5e9]);
    let mut clients = vec![
        Client {
            submitted_ns: env.start_ns,
            ..Client::default()
        };
        calvin.clients as usize
    ];
    // Per receiver: entry count and words of this epoch's sub-batch.
    let mut sub_batches: Vec<(u64, Vec<u64>)> = vec![(0, Vec::new()); nodes];
    let mut declared: Vec<Declared> = Vec::new();
    let mut request_words: Vec<u64> = Vec::new();
    let mut entry: Vec<u64> = Vec::new();
    let mut touched: Vec<bool> = vec![false; nodes];
    let mut counter: u64 = 0;
    let mut requests: Vec<Option<W::Request>> = vec![None; calvin.clients as usize];
    let recon = Recon { store: env.store };
    let mut recon_cx = TxnCx::new(worker, co, env.layout, env.cache, env.plan);
    let mut recon_runs: u64 = 0;
    // Completions are looked for at most this often between boundaries
    // (latency is measured to within it).
    let mut poll = Poll::new(env.epoch_ns);
    let mut stopped = false;
    let mut epoch: u64 = 0;
    if env.failover.is_some() {
        let mut state = env.shared.lock();
        state.in_flight = (0..calvin.clients)
            .map(|_| super::failover::InFlight::default())
            .collect();
    }
    let mut nodes_touched: Vec<NodeId> = Vec::new();
    'epochs: loop {
        let boundary = env.start_ns + (epoch + 1) * env.epoch_ns;
        if stopped {
            // Empty epochs go out, each once this node has scheduled the
            // one before, until some epoch saw every sequencer stopped.
            loop {
                env.park_if_paused(co).await;
                collect_completions(env, &mut clients);
                env.note_boundaries(worker.now_ns());
                let (scheduled_below, last_epoch) = {
                    let state = env.shared.lock();
                    (state.scheduled_below, state.last_epoch)
                };
                if last_epoch.is_some() {
                    break 'epochs;
                }
                if scheduled_below >= epoch {
                    break;
                }
                worker.sleep(co, poll.wait_ns()).await;
            }
        } else {
            // The boundary; in lockstep also every client's last
            // transaction complete (epoch-synchronous).
            loop {
                env.park_if_paused(co).await;
                collect_completions(env, &mut clients);
                let now = worker.now_ns();
                env.note_boundaries(now);
                let waits_for_boundary_only = !env.lockstep || clients.iter().all(|c| !c.busy);
                if now >= boundary && waits_for_boundary_only {
                    break;
                }
                let wait = poll.wait_ns();
                let wait = if waits_for_boundary_only {
                    wait.min(boundary - now)
                } else {
                    wait
                };
                worker.sleep(co, wait).await;
            }
        }

        // Seal the epoch: every free client's request (in lockstep every
        // client's), unless this is past the sequencer's last epoch.
        let sealed_ns = worker.now_ns();
        let mut positions: u64 = 0;
        for (count, words) in sub_batches.iter_mut() {
            *count = 0;
            words.clear();
        }
        // With requests in flight the input depends on timing anyway, so a
        // sequencer that fell behind its epochs (flow control held it)
        // stops at the first seal past the end rather than sealing every
        // epoch up to `final_epoch` after it, ordering requests that can
        // no longer be measured.
        let stop = epoch >= env.final_epoch
            || sealed_ns >= env.stop_ns
            || (!env.lockstep && sealed_ns >= env.end_ns);
        // The routing the entries are sealed under (`failover`).
        let generation = env.failover.map_or(0, |f| f.generation());
        for (slot, client) in clients.iter_mut().enumerate() {
            if stopped {
                break;
            }
            if client.busy {
                // Its transaction of an earlier epoch is still running:
                // one request in flight per slot.
                debug_assert!(!env.lockstep, "a lockstep epoch sealed early");
                continue;
            }
            debug_assert!(client.submitted_ns <= sealed_ns);
            let request = if client.retry {
                client.retry = false;
                requests[slot].expect("a request to retry")
            } else {
                let request = env.workload.generate(&mut rng, node);
                requests[slot] = Some(request);
                request
            };
            declared.clear();
            request_words.clear();
            let mut declared_ok = env.workload.declare_accesses(&request, &mut declared);
            client.reconnoitred = !declared_ok;
            if !declared_ok {
                // The set depends on data: reconnoitre it (what the
                // workload declared anyway is kept: see `recon`).
                recon_runs += 1;
                recon_cx.begin(recon_runs, 0);
                {
                    let mut program = Txn::new(&mut recon_cx, &recon);
                    // Its outcome does not matter: execution decides.
                    let _ = env.workload.execute(&mut program, &request).await;
                }
                declared.extend(
                    recon_cx
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
                declared_ok = true;
            }
            if declared_ok {
                env.workload.encode_request(&request, &mut request_words);
            }
            if !declared_ok || !well_formed(env, &mut declared, request_words.len()) {
                // A set naming records no node can hold, or beyond the
                // workload's own bounds, is given up.
                if env.measured(sealed_ns) {
                    let mut stats = env.stats.borrow_mut();
                    stats.aborts[AbortReason::Undeclared.index()] += 1;
                    stats.user_aborted += 1;
                }
                client.submitted_ns = sealed_ns;
                continue;
            }
            debug_assert!(declared.len() <= calvin.max_accesses as usize);
            debug_assert!(
                request_words.len() + 2 * declared.len() + ENTRY_FIXED_WORDS
                    <= calvin.entry_words as usize
            );
            counter += 1;
            let id = ((node as u64) << 40) | counter;
            // Positions are dense, so forward blocks of the low positions
            // are the ones reused.
            let position = positions;
            positions += 1;
            debug_assert!(position < calvin.clients as u64);
            // Each participant is the node serving a partition the set
            // touches (one node may serve several after a failover).
            touched.iter_mut().for_each(|t| *t = false);
            for access in &declared {
                touched[env.serving(access.node) as usize] = true;
            }
            client.busy = true;
            client.sealed_ns = sealed_ns;
            client.participants = touched.iter().filter(|&&t| t).count() as u32;
            client.kind = env.workload.txn_type(&request);
            // Free slot: every report of its last transaction is in.
            env.store.region.store(calvin.done_addr(slot as u32), 0);
            if env.failover.is_some() {
                nodes_touched.clear();
                nodes_touched
                    .extend((0..nodes as NodeId).filter(|&receiver| touched[receiver as usize]));
                let mut state = env.shared.lock();
                state.in_flight[slot].set(id, epoch, &nodes_touched, &declared);
            }
            entry.clear();
            entry.extend_from_slice(&[
                id,
                ((node as u64) << 32) | slot as u64,
                ((generation as u64) << 32) | position,
                ((declared.len() as u64) << 32) | request_words.len() as u64,
                client.submitted_ns,
            ]);
            for access in &declared {
                entry.extend_from_slice(&pack_access(access));
            }
            entry.extend_from_slice(&request_words);
            for (receiver, (count, words)) in sub_batches.iter_mut().enumerate() {
                if touched[receiver] {
                    *count += 1;
                    words.extend_from_slice(&entry);
                }
            }
        }

        // Deliver, to the live nodes. Receivers may be parked by a failover
        // meanwhile (flow control then waits for them): the recovery need
        // not wait for this coroutine, whose rounds go out regardless.
        let failover = crate::recovery::failover_of(worker);
        if let Some(failover) = failover {
            failover.step_out(node, worker.now_ns());
        }
        let live = |receiver: NodeId| !env.is_failed(receiver);
        if onesided {
            loop {
                let ids: Vec<_> = {
                    let mut batch = worker.slot(co).batch.borrow_mut();
                    batch.clear();
                    (0..nodes as NodeId)
                        .filter(|&receiver| live(receiver))
                        .map(|receiver| batch.read(receiver, calvin.crb_addr(node, epoch), 1))
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
                    break;
                }
                collect_completions(env, &mut clients);
                worker.sleep(co, poll.wait_ns()).await;
            }
            {
                let mut batch = worker.slot(co).batch.borrow_mut();
                batch.clear();
                let slot = calvin.crb_addr(node, epoch);
                for (receiver, (count, words)) in sub_batches.iter().enumerate() {
                    let receiver = receiver as NodeId;
                    if !live(receiver) {
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
            // Only a receiver declared failed misses it (`failover`).
            let _ = worker.submit(co).await;
        } else {
            loop {
                {
                    let mut batch = worker.slot(co).batch.borrow_mut();
                    batch.clear();
                    for (receiver, (count, words)) in sub_batches.iter().enumerate() {
                        if !live(receiver as NodeId) {
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
                    break;
                }
                // A receiver declared failed misses it (`failover`); but a
                // live one that held the call for flow control
                // (`Served::Wait`) refuses it when a failover pauses the
                // cluster, and must still get the epoch. So after the
                // pause, every live receiver gets it again (one that has
                // it already ignores the copy). Epochs pipelined behind
                // slow ones make held calls common.
                while failover.is_some_and(|f| f.paused()) && worker.now_ns() < env.stop_ns {
                    worker.sleep(co, poll.wait_ns()).await;
                }
                collect_completions(env, &mut clients);
            }
        }
        if let Some(failover) = failover {
            failover.step_in(node);
        }
        stopped = stop;
        epoch += 1;
    }
    // Every transaction sequenced here completes before the node stops.
    while clients.iter().any(|c| c.busy) {
        env.park_if_paused(co).await;
        collect_completions(env, &mut clients);
        env.note_boundaries(worker.now_ns());
        if clients.iter().any(|c| c.busy) {
            worker.sleep(co, poll.wait_ns()).await;
        }
    }
    env.note_boundaries(worker.now_ns());
    worker.drain(co).await;
    if let Some(failover) = crate::recovery::failover_of(worker) {
        failover.finished(node);
    }
}
