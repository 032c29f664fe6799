//! The runtime (docs/ARCHITECTURE.md, layer 4): per worker, a single-threaded
//! executor for C transaction coroutines and the event loop beside them
//! (RCC §3.1, DrTM+H §3.2: coroutines, outstanding requests, doorbell
//! batching, passive ACK).
//!
//! A coroutine is a Rust future, boxed once when the worker starts and polled
//! until the run ends; it waits only through this module — on a round of
//! verbs and RPCs ([`Worker::submit`]), a timer ([`Worker::sleep`]) or a
//! yield — which is what makes the executor the only scheduler and lets the
//! `sim` fabric drive the same code in virtual time.
//!
//! Wakers are not used: each coroutine has a [`CoSlot`] whose counters say
//! when it is runnable (no awaited reply outstanding and its completion time
//! or timer reached). The event loop, between polls, drains the endpoint's
//! inbox: requests run their protocol handler and are answered with the same
//! payload buffer, or wait for a later turn ([`Served::Wait`]); replies and
//! deferred verb completions (`Posted::Deferred`) are filed into the waiting
//! coroutine's batch. The worker accounts its time in handlers and idle, so
//! a report can say what RPC stages cost the serving side.
//!
//! Failed peers: a worker given a membership view ([`Liveness`], which the
//! recovery layer implements; see [`liveness`]) fails the
//! rounds that cannot complete because a peer died. A round posted to a
//! peer already declared dead posts nothing and fails at once; a verb or
//! RPC already outstanding to a peer that then crashes comes back from the
//! backend as a `MSG_FAILED` message, which the worker holds until its
//! node's membership declares that peer dead (until then the failure looks
//! like a slow network, as it would on real hardware) and then files as a
//! failure. [`Worker::submit`] then returns `Err(RoundFailed)` once the
//! whole round is in. A worker of a crashed node (`Endpoint::crashed`)
//! stops polling its coroutines; its turns only let the backend bounce what
//! still arrives. Past the give-up time ([`Worker::set_give_up_at`]) a
//! worker abandons whatever its coroutines still wait for and fails every
//! later round, so a run ends even when a survivor waits on something only
//! the dead could have given (a lock its coordinator held, with
//! replication 1). In a replicated run's failover ([`ClusterState`])
//! the worker routes accesses to the node serving each partition, fails at
//! once the rounds of attempts before their commit point while the cluster
//! pauses (a committing attempt's rounds, and every passive round — they
//! release what an attempt holds — still go out, less their parts for dead
//! peers), refuses the requests waiting on it, and never runs again
//! once its own node is declared failed.
//!
//! Invariants: a `RefCell` borrow of a slot's batch or of the endpoint is
//! never held across an await; `pending` counts exactly the awaited
//! replies and deferred verb completions not yet filed, `unacked` the
//! passive ones; a round's `failed` flag is consumed by the `Round` future
//! that awaits it.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Waker};

use std::sync::Arc;

use crate::fabric::verbs::{MSG_COMPLETION, MSG_FAILED, MSG_PASSIVE, MSG_REFUSED, MSG_REPLY};
use crate::fabric::{Batch, CpuOp, Endpoint, Message, NodeId, Posted};

mod completions;
mod futures;
pub mod liveness;

pub use futures::{Round, Wait, YieldNow};
pub use liveness::{ClusterState, Liveness, Monitor, MONITOR_CO};

/// A round that could not complete: a peer it needed has failed (or the
/// worker gave up on it at the end of the run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoundFailed;

/// A worker's running totals at one instant: verbs posted, and how its
/// time went (wall clock, idle, serving RPCs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WorkerSnapshot {
    pub counters: crate::fabric::VerbCounters,
    pub wall_ns: u64,
    /// In `Endpoint::idle`: nothing runnable, no message.
    pub idle_ns: u64,
    /// In RPC handlers: CPU spent serving other workers' stages.
    pub handler_ns: u64,
}

/// The `tag` of a passive round's doorbell batches (see `Posted::Deferred`).
const PASSIVE_TAG: u16 = u16::MAX;

/// The scheduling state of one coroutine.
#[derive(Default)]
pub struct CoSlot {
    pub batch: RefCell<Batch>,
    /// Awaited RPC replies not yet arrived.
    pending: Cell<u32>,
    /// Passive RPCs whose reply has not come back.
    unacked: Cell<u32>,
    /// Not runnable before this time (verb completion or timer).
    ready_at_ns: Cell<u64>,
    /// Waiting for `unacked` to reach 0 (draining at the end of the run).
    draining: Cell<bool>,
    done: Cell<bool>,
    /// Part of the current round failed (a dead peer): taken by `Round`.
    failed: Cell<bool>,
    /// A round of the current attempt failed (cleared by
    /// [`Worker::take_attempt_failed`]): the commit point's last check.
    attempt_failed: Cell<bool>,
    /// Past its commit point: its rounds go out even while a failover
    /// pauses the cluster (see [`Worker::set_committing`]).
    committing: Cell<bool>,
}

impl CoSlot {
    /// Part of the current round could not go out or complete.
    fn fail_round(&self) {
        self.failed.set(true);
        self.attempt_failed.set(true);
    }

    #[inline]
    fn runnable(&self, now_ns: u64) -> bool {
        self.pending.get() == 0
            && self.ready_at_ns.get() <= now_ns
            && (!self.draining.get() || self.unacked.get() == 0)
    }
}

/// What a handler did with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    /// The payload now holds the reply.
    Reply,
    /// Not servable yet (e.g. a lock a waiting protocol must wait for): the
    /// payload is left as the request, and the event loop offers it again on
    /// its next turns — a waiting list served by the event loop, with no
    /// handler ever blocking the worker (RCC §4.3). Later requests may be
    /// served first; a coroutine awaiting the reply sends nothing meanwhile.
    Wait,
}

/// Handles RPC requests on the target worker: turns the request payload
/// into the reply payload in place, or asks to be offered it again.
/// `now_ns` is the worker's clock at the turn that serves it (virtual on
/// `sim`), for handlers that bound how long a request may wait.
pub trait RpcService {
    fn serve(&self, kind: u16, payload: &mut Vec<u64>, now_ns: u64) -> Served;

    /// Where a request whose handler answered [`Served::Wait`] joins the
    /// waiting list: lower ranks are offered first, equal ones in arrival
    /// order. Default: 0 for every request (first come, first served).
    fn waiting_rank(&self, _kind: u16, _payload: &[u64]) -> u64 {
        0
    }

    /// Work the event loop does on every turn besides messages, on worker
    /// `worker` (the backups' apply of one-sided log records,
    /// `replication::log`). Returns whether it did anything. Default:
    /// nothing.
    fn background(&self, _worker: u16) -> bool {
        false
    }
}

/// How long an event loop with waiting requests may idle before offering
/// them again, ns.
const WAITING_RETRY_NS: u64 = 2_000;

/// One worker: its endpoint, its coroutines' slots, its clock.
pub struct Worker {
    pub node: NodeId,
    pub worker: u16,
    endpoint: RefCell<Box<dyn Endpoint>>,
    slots: Box<[CoSlot]>,
    /// The clock as the scheduler last read it: a waiting coroutine is
    /// polled only once the scheduler saw it runnable, so its `Wait` need
    /// not read the clock again (a clock read costs about 20 ns).
    scheduled_at_ns: Cell<u64>,
    /// Time spent idle and in RPC handlers so far (see `WorkerSnapshot`).
    idle_ns: Cell<u64>,
    handler_ns: Cell<u64>,
    /// Messages taken from the endpoint in the current turn (kept for its
    /// capacity).
    inbox: RefCell<Vec<Message>>,
    /// Requests whose handler answered `Served::Wait`, by
    /// [`RpcService::waiting_rank`], then in arrival order.
    waiting: RefCell<Vec<Message>>,
    /// Failure detection and failed peers (see the module docs).
    faults: Option<FaultState>,
    /// Smoothed time from posting a round of one-sided verbs that left the
    /// node to its coroutine resuming, ns (0 until one completed): what a
    /// round trip to a peer costs this worker now, on any fabric. Rounds
    /// with RPCs are left out: a lock request may wait at its server. Both
    /// ends are the scheduler's clock reading (`scheduled_at_ns`), so
    /// keeping it reads no clock.
    verb_round_trip_ns: Cell<u64>,
}

/// A worker's part in failure handling.
struct FaultState {
    membership: Arc<dyn Liveness>,
    /// The membership epoch when `parked` was last looked through.
    seen_epoch: Cell<u64>,
    /// `MSG_FAILED` messages whose peer is not declared dead yet.
    parked: RefCell<Vec<Message>>,
    /// Run on worker 0 of each node.
    detector: Option<RefCell<Box<dyn Monitor>>>,
    /// How often a worker holding parked failures looks at the membership.
    poll_ns: u64,
    give_up_at_ns: Cell<u64>,
    gave_up: Cell<bool>,
    abandoned_rounds: Cell<u64>,
    /// A replicated run's failover, as the data path sees it.
    failover: Option<Arc<dyn ClusterState>>,
}

impl Worker {
    pub fn new(endpoint: Box<dyn Endpoint>, coroutines: usize) -> Worker {
        Worker {
            node: endpoint.node(),
            worker: endpoint.worker(),
            endpoint: RefCell::new(endpoint),
            slots: (0..coroutines).map(|_| CoSlot::default()).collect(),
            scheduled_at_ns: Cell::new(0),
            idle_ns: Cell::new(0),
            handler_ns: Cell::new(0),
            inbox: RefCell::new(Vec::with_capacity(64)),
            waiting: RefCell::new(Vec::with_capacity(16)),
            faults: None,
            verb_round_trip_ns: Cell::new(0),
        }
    }

    /// The smoothed round trip of this worker's remote one-sided rounds,
    /// ns; 0 before the first completed.
    pub fn verb_round_trip_ns(&self) -> u64 {
        self.verb_round_trip_ns.get()
    }

    /// Folds one completed remote verb round into the estimate, with a
    /// weight of 1/8 (TCP's smoothed RTT, RFC 6298).
    fn note_verb_round_trip(&self, ns: u64) {
        let old = self.verb_round_trip_ns.get();
        let new = if old == 0 { ns } else { old - old / 8 + ns / 8 };
        self.verb_round_trip_ns.set(new);
    }

    /// Makes the worker handle failed peers as its node's `membership`
    /// sees them; `detector` on the one worker per node that runs it.
    /// `poll_ns`: how often a worker holding failures of a peer not yet
    /// declared dead looks at the membership again.
    pub fn with_membership(
        mut self,
        membership: Arc<dyn Liveness>,
        detector: Option<Box<dyn Monitor>>,
        poll_ns: u64,
    ) -> Worker {
        self.faults = Some(FaultState {
            membership,
            seen_epoch: Cell::new(0),
            parked: RefCell::new(Vec::new()),
            detector: detector.map(RefCell::new),
            poll_ns: poll_ns.max(1),
            give_up_at_ns: Cell::new(u64::MAX),
            gave_up: Cell::new(false),
            abandoned_rounds: Cell::new(0),
            failover: None,
        });
        self
    }

    /// Makes the worker take part in a replicated run's failover: route
    /// accesses to the node serving each partition, fail the rounds of
    /// attempts before their commit point while the cluster pauses (and
    /// refuse the requests waiting on this worker), and stop for good once
    /// its own node is declared failed. Needs a membership first.
    pub fn with_failover(mut self, failover: Arc<dyn ClusterState>) -> Worker {
        let faults = self
            .faults
            .as_mut()
            .expect("a failover worker has a membership view");
        faults.failover = Some(failover);
        self
    }

    /// The run's failover as the data path sees it, when it has one.
    pub fn cluster_state(&self) -> Option<&dyn ClusterState> {
        self.faults.as_ref().and_then(|f| f.failover.as_deref())
    }

    /// The node that serves `partition`: the partition's own node, or after
    /// a failover its promoted backup.
    #[inline]
    pub fn serving(&self, partition: NodeId) -> NodeId {
        match self.cluster_state() {
            Some(failover) => failover.serving(partition),
            None => partition,
        }
    }

    /// Marks `co`'s attempt as past (or no longer past) its commit point:
    /// a committing attempt's rounds go out even while the cluster pauses
    /// for a failover, so it can finish.
    pub fn set_committing(&self, co: u16, committing: bool) {
        self.slots[co as usize].committing.set(committing);
    }

    /// Past `at_ns` the worker abandons every round still outstanding and
    /// fails every later one (with a membership only).
    pub fn set_give_up_at(&self, at_ns: u64) {
        if let Some(faults) = &self.faults {
            faults.give_up_at_ns.set(at_ns);
        }
    }

    /// Rounds abandoned at the give-up time.
    pub fn abandoned_rounds(&self) -> u64 {
        self.faults
            .as_ref()
            .map_or(0, |faults| faults.abandoned_rounds.get())
    }

    /// The node's membership view, when the worker has one.
    pub fn membership(&self) -> Option<&dyn Liveness> {
        self.faults.as_ref().map(|faults| &*faults.membership)
    }

    /// Whether `node` is alive as this worker's node sees it (always, for a
    /// worker without a membership view).
    #[inline]
    pub fn peer_alive(&self, node: NodeId) -> bool {
        self.faults
            .as_ref()
            .is_none_or(|faults| faults.membership.is_alive(node))
    }

    /// Whether a round of `co` failed since the last call (the attempt's
    /// last check before its commit point).
    #[inline]
    pub fn take_attempt_failed(&self, co: u16) -> bool {
        self.slots[co as usize].attempt_failed.replace(false)
    }

    pub fn coroutines(&self) -> usize {
        self.slots.len()
    }

    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.endpoint.borrow().now_ns()
    }

    pub fn slot(&self, co: u16) -> &CoSlot {
        &self.slots[co as usize]
    }

    pub fn spend_cpu(&self, ns: u64) {
        self.endpoint.borrow_mut().spend_cpu(ns)
    }

    /// Charges modeled CPU time (see [`CpuOp`]; real backends ignore it).
    #[inline]
    pub fn charge(&self, op: CpuOp, count: u32) {
        self.endpoint.borrow_mut().charge(op, count)
    }

    pub fn counters(&self) -> crate::fabric::VerbCounters {
        *self.endpoint.borrow().counters()
    }

    /// The worker's running totals now.
    pub fn snapshot(&self) -> WorkerSnapshot {
        WorkerSnapshot {
            counters: self.counters(),
            wall_ns: self.now_ns(),
            idle_ns: self.idle_ns.get(),
            handler_ns: self.handler_ns.get(),
        }
    }

    /// Posts everything queued in `co`'s batch: each run of consecutive verbs
    /// to one node as one doorbell batch, all batches and RPCs in flight
    /// together. Passive RPCs are not awaited. Returns when the verbs
    /// complete, whether the round left this node, and whether it carried
    /// verbs only (no RPC).
    fn post(&self, co: u16, passive: bool) -> (u64, bool, bool) {
        let slot = &self.slots[co as usize];
        if self.round_cannot_reach(co, passive) {
            let mut batch = slot.batch.borrow_mut();
            let Batch { calls, pool, .. } = &mut *batch;
            for call in calls.drain(..) {
                self.keep_buffer(pool, call.payload);
            }
            if !passive {
                slot.fail_round();
            }
            return (0, false, false);
        }
        let mut batch = slot.batch.borrow_mut();
        let mut endpoint = self.endpoint.borrow_mut();
        // A committing attempt's round, or a passive one while paused
        // (`round_cannot_reach` lets them through), skips only its verbs
        // and calls to peers declared dead: its writes to the live ones
        // must land.
        let dead = |node: NodeId| {
            self.faults
                .as_ref()
                .is_some_and(|f| f.membership.epoch() > 0 && !f.membership.is_alive(node))
        };
        let Batch {
            verbs,
            write_data,
            results,
            calls,
            pool,
            ..
        } = &mut *batch;
        let mut ready_at = 0;
        let verbs_only = calls.is_empty();
        let mut remote = !verbs_only;
        let mut start = 0;
        while start < verbs.len() {
            let node = verbs[start].node;
            remote |= node != self.node;
            let mut end = start + 1;
            while end < verbs.len() && verbs[end].node == node {
                end += 1;
            }
            if dead(node) {
                if !passive {
                    slot.fail_round();
                }
                start = end;
                continue;
            }
            // A passive round's completion only acknowledges: its results
            // (if any) are not awaited, and its batch may be reused first.
            let tag = if passive { PASSIVE_TAG } else { start as u16 };
            debug_assert!(passive || start < PASSIVE_TAG as usize);
            match endpoint.post(co, tag, &verbs[start..end], write_data, results) {
                Posted::At(at) => ready_at = ready_at.max(at),
                Posted::Deferred if passive => slot.unacked.set(slot.unacked.get() + 1),
                Posted::Deferred => slot.pending.set(slot.pending.get() + 1),
            }
            start = end;
        }
        for (index, call) in calls.drain(..).enumerate() {
            if dead(call.node) {
                if let Some(excess) = Batch::keep(pool, call.payload) {
                    endpoint.recycle(excess);
                }
                if !passive {
                    slot.fail_round();
                }
                continue;
            }
            let flags = if call.passive {
                slot.unacked.set(slot.unacked.get() + 1);
                MSG_PASSIVE
            } else {
                slot.pending.set(slot.pending.get() + 1);
                0
            };
            endpoint.send(Message {
                src_node: self.node,
                src_worker: self.worker,
                dst_node: call.node,
                dst_worker: self.worker,
                coroutine: co,
                call: index as u16,
                kind: call.kind,
                flags,
                deliver_at_ns: 0,
                payload: call.payload,
            });
        }
        (ready_at, remote, verbs_only)
    }

    /// Whether `co`'s queued round needs a peer declared dead (or the
    /// worker gave up): then it is not posted at all.
    fn round_cannot_reach(&self, co: u16, passive: bool) -> bool {
        let Some(faults) = &self.faults else {
            return false;
        };
        if faults.gave_up.get() {
            return true;
        }
        let committing = self.slots[co as usize].committing.get();
        let paused = faults.failover.as_ref().is_some_and(|f| f.paused());
        // While paused, an attempt before its commit point still posts its
        // passive rounds (less their parts for dead peers): they release
        // what it holds — a latch or lock left held would stall a
        // committing attempt, which the recovery waits for.
        if paused && !committing && !passive {
            return true;
        }
        if faults.membership.epoch() == 0 || committing || (paused && passive) {
            return false;
        }
        let batch = self.slots[co as usize].batch.borrow();
        let membership = &faults.membership;
        batch.verbs.iter().any(|v| !membership.is_alive(v.node))
            || batch.calls.iter().any(|c| !membership.is_alive(c.node))
    }

    /// Posts `co`'s round and waits until every verb has completed and every
    /// awaited reply has arrived; `Err` when part of it could not complete
    /// because a peer failed (its results are then meaningless). A round
    /// that left the node yields at least once, as a coroutine does after
    /// posting to a real NIC, so the other coroutines and the event loop
    /// run even when the fabric completes verbs at once; a purely local
    /// round completes without yielding (DrTM+H §4.1: local accesses
    /// bypass the NIC).
    pub fn submit(&self, co: u16) -> Round<'_> {
        let (ready_at, remote, verbs_only) = self.post(co, false);
        self.slots[co as usize].ready_at_ns.set(ready_at);
        Round {
            timed_from_ns: (remote && verbs_only).then(|| self.scheduled_at_ns.get()),
            wait: Wait {
                worker: self,
                co,
                must_yield: remote,
            },
        }
    }

    /// Posts `co`'s round without waiting for it (passive ACK): verbs and
    /// RPCs of later rounds still take effect after these (FIFO).
    pub fn submit_passive(&self, co: u16) {
        let slot = &self.slots[co as usize];
        debug_assert!(
            slot.batch.borrow().calls.iter().all(|c| c.passive),
            "a passive round carries passive calls only"
        );
        self.post(co, true);
    }

    /// Sleeps `ns` (back-off).
    pub fn sleep(&self, co: u16, ns: u64) -> Wait<'_> {
        let slot = &self.slots[co as usize];
        slot.ready_at_ns.set(self.now_ns() + ns);
        Wait {
            worker: self,
            co,
            must_yield: true,
        }
    }

    /// Lets the other coroutines and the event loop run once.
    pub fn yield_now(&self) -> YieldNow {
        YieldNow { yielded: false }
    }

    /// Waits until every passive RPC of `co` has been acknowledged, so no
    /// write-back is still in flight when the run ends.
    pub fn drain(&self, co: u16) -> Wait<'_> {
        self.slots[co as usize].draining.set(true);
        Wait {
            worker: self,
            co,
            must_yield: false,
        }
    }

    /// Whether a failover declared this worker's node failed: it must not
    /// run a coroutine again (a paused node that comes back is fenced).
    fn fenced(&self) -> bool {
        self.cluster_state().is_some_and(|f| f.is_failed(self.node))
    }

    /// While the cluster pauses for a failover, answers every waiting
    /// request as refused: what it waits for may be a lock of the failed
    /// coordinator, which only the recovery releases, and the recovery
    /// waits for every attempt to end. Returns whether any was refused.
    fn refuse_waiting_if_paused(&self, waiting: &mut Vec<Message>) -> bool {
        if !self.cluster_state().is_some_and(|f| f.paused()) {
            return false;
        }
        let refused = !waiting.is_empty();
        for mut msg in waiting.drain(..) {
            msg.flags |= MSG_FAILED | MSG_REFUSED;
            self.send_reply(msg);
        }
        refused
    }

    /// Answers a served request with its own message and buffer.
    fn send_reply(&self, mut msg: Message) {
        std::mem::swap(&mut msg.src_node, &mut msg.dst_node);
        std::mem::swap(&mut msg.src_worker, &mut msg.dst_worker);
        msg.flags |= MSG_REPLY;
        self.endpoint.borrow_mut().send(msg);
    }

    /// Offers every waiting request again, in arrival order, at `now_ns`;
    /// answers those that can be served now. Returns whether any was.
    fn offer_waiting(
        &self,
        waiting: &mut Vec<Message>,
        service: &dyn RpcService,
        now_ns: u64,
    ) -> bool {
        let mut served = false;
        let mut index = 0;
        while index < waiting.len() {
            let msg = &mut waiting[index];
            if service.serve(msg.kind, &mut msg.payload, now_ns) == Served::Reply {
                self.send_reply(waiting.remove(index));
                served = true;
            } else {
                index += 1;
            }
        }
        served
    }

    /// One turn of the event loop: offers waiting requests again, takes what
    /// arrived (serving requests, filing replies and completions), then
    /// polls every runnable coroutine once. Never blocks, so one thread can
    /// drive many workers turn by turn (the `sim` fabric); [`Worker::run`]
    /// loops over it on a thread of its own.
    pub fn turn(
        &self,
        coroutines: &mut [Pin<Box<dyn Future<Output = ()> + '_>>],
        service: &dyn RpcService,
    ) -> Turn {
        debug_assert_eq!(coroutines.len(), self.slots.len());
        if self.endpoint.borrow().crashed() || self.fenced() {
            return self.crashed_turn();
        }
        let mut served = false;
        let mut serve_start_ns = None;
        self.charge(CpuOp::Turn, 1);
        if let Some(faults) = &self.faults {
            if let Some(detector) = &faults.detector {
                let now = self.now_ns();
                let mut endpoint = self.endpoint.borrow_mut();
                served |= detector.borrow_mut().tick(&mut **endpoint, now);
            }
            if faults.give_up_at_ns.get() <= self.now_ns() {
                self.give_up();
            }
        }
        {
            // Requests that had to wait are offered again first, in their
            // order (`RpcService::waiting_rank`), and again before each new
            // request whenever something was served since: a parked
            // request must see the lock its predecessor just released
            // before a newcomer can take it (otherwise a waiting list never
            // makes progress against a stream of fresh requests).
            let mut waiting = self.waiting.borrow_mut();
            if !waiting.is_empty() {
                serve_start_ns = Some(self.now_ns());
                served |= self.refuse_waiting_if_paused(&mut waiting);
            }
            if let Some(now_ns) = serve_start_ns {
                served |= self.offer_waiting(&mut waiting, service, now_ns);
            }
            served |= service.background(self.worker);
            let mut inbox = self.inbox.borrow_mut();
            self.endpoint.borrow_mut().receive(&mut inbox);
            served |= !inbox.is_empty();
            if serve_start_ns.is_none() && !inbox.is_empty() {
                serve_start_ns = Some(self.now_ns());
            }
            // One clock read serves the whole turn's handlers: a parked
            // request's timeout needs µs, not ns.
            let now_ns = serve_start_ns.unwrap_or(0);
            let mut changed = false;
            for mut msg in inbox.drain(..) {
                if msg.flags & MSG_FAILED != 0 {
                    self.on_failed(msg);
                    continue;
                }
                if msg.coroutine == MONITOR_CO && msg.flags & MSG_COMPLETION != 0 {
                    if let Some(detector) = self.faults.as_ref().and_then(|f| f.detector.as_ref()) {
                        let now = self.now_ns();
                        detector.borrow_mut().on_completion(&msg, now);
                    }
                    continue;
                }
                if self.faults.as_ref().is_some_and(|f| f.gave_up.get())
                    && msg.flags & (MSG_REPLY | MSG_COMPLETION) != 0
                {
                    continue; // for a round abandoned at the give-up time
                }
                if msg.flags & (MSG_REPLY | MSG_COMPLETION) != 0 {
                    self.file_reply(msg);
                    continue;
                }
                if changed && !waiting.is_empty() {
                    self.offer_waiting(&mut waiting, service, now_ns);
                }
                if service.serve(msg.kind, &mut msg.payload, now_ns) == Served::Reply {
                    self.send_reply(msg);
                    changed = true;
                } else {
                    let rank = service.waiting_rank(msg.kind, &msg.payload);
                    let at = waiting
                        .partition_point(|w| service.waiting_rank(w.kind, &w.payload) <= rank);
                    waiting.insert(at, msg);
                    changed = false;
                }
            }
        }

        served |= self.file_parked();
        let now = self.now_ns();
        self.scheduled_at_ns.set(now);
        if let Some(start) = serve_start_ns {
            // Includes filing replies: a few ns each, not worth a clock read.
            self.handler_ns.set(self.handler_ns.get() + (now - start));
        }
        let mut context = Context::from_waker(Waker::noop());
        let mut polled = false;
        let mut live = 0;
        let mut wake_at_ns: Option<u64> = None;
        for (index, coroutine) in coroutines.iter_mut().enumerate() {
            let slot = &self.slots[index];
            if slot.done.get() {
                continue;
            }
            if slot.runnable(now) {
                polled = true;
                self.charge(CpuOp::Switch, 1);
                if coroutine.as_mut().poll(&mut context).is_ready() {
                    slot.done.set(true);
                    continue;
                }
            } else if slot.pending.get() == 0 && !slot.draining.get() {
                let at = slot.ready_at_ns.get();
                wake_at_ns = Some(wake_at_ns.map_or(at, |w: u64| w.min(at)));
            }
            live += 1;
        }
        if !self.waiting.borrow().is_empty() {
            let retry_at = now + WAITING_RETRY_NS;
            wake_at_ns = Some(wake_at_ns.map_or(retry_at, |w| w.min(retry_at)));
        }
        if let Some(faults) = &self.faults {
            let mut due = |at: u64| wake_at_ns = Some(wake_at_ns.map_or(at, |w| w.min(at)));
            if let Some(detector) = &faults.detector {
                due(detector.borrow().next_tick_ns());
            }
            if !faults.parked.borrow().is_empty() {
                due(now + faults.poll_ns);
            }
            if live > 0 && !faults.gave_up.get() && faults.give_up_at_ns.get() != u64::MAX {
                due(faults.give_up_at_ns.get().max(now));
            }
        }
        Turn {
            progressed: polled || served,
            coroutines_done: live == 0,
            wake_at_ns,
            now_ns: now,
        }
    }

    /// The turn of a worker whose node has crashed: its coroutines never
    /// run again; every request it still holds (arrived, or waiting for a
    /// lock) goes back to its sender as failed — a real node's crash drops
    /// them, and its peers time the requests out — so no survivor waits
    /// for a reply that can never come.
    fn crashed_turn(&self) -> Turn {
        let mut inbox = self.inbox.borrow_mut();
        let mut endpoint = self.endpoint.borrow_mut();
        endpoint.receive(&mut inbox);
        let mut waiting = self.waiting.borrow_mut();
        for mut msg in waiting.drain(..).chain(inbox.drain(..)) {
            if msg.flags & (MSG_REPLY | MSG_COMPLETION) != 0 {
                continue;
            }
            std::mem::swap(&mut msg.src_node, &mut msg.dst_node);
            std::mem::swap(&mut msg.src_worker, &mut msg.dst_worker);
            msg.flags |= MSG_REPLY | MSG_FAILED;
            endpoint.send(msg);
        }
        let now = endpoint.now_ns();
        Turn {
            progressed: false,
            coroutines_done: true,
            wake_at_ns: None,
            now_ns: now,
        }
    }

    /// Waits, after a turn that did nothing, until a message may have
    /// arrived or `turn.wake_at_ns` passes (the endpoint spins, yields, then
    /// parks), and accounts the time as idle.
    pub fn idle(&self, turn: &Turn) {
        self.endpoint.borrow_mut().idle(turn.wake_at_ns);
        self.idle_ns
            .set(self.idle_ns.get() + (self.now_ns() - turn.now_ns));
    }

    /// Runs the coroutines and the event loop on this thread until every
    /// coroutine has finished and every worker of the cluster has too
    /// (`finished` counts them, up to `total_workers`): a worker keeps
    /// serving RPCs until no peer can need it.
    pub fn run(
        &self,
        coroutines: &mut [Pin<Box<dyn Future<Output = ()> + '_>>],
        service: &dyn RpcService,
        finished: &AtomicUsize,
        total_workers: usize,
    ) {
        assert_eq!(coroutines.len(), self.slots.len());
        let mut announced = false;
        loop {
            let turn = self.turn(coroutines, service);
            if turn.coroutines_done && !announced {
                finished.fetch_add(1, Ordering::SeqCst);
                announced = true;
            }
            if announced && finished.load(Ordering::SeqCst) >= total_workers {
                return;
            }
            if !turn.progressed {
                self.idle(&turn);
            }
        }
    }
}

/// What one [`Worker::turn`] did, and when the worker next needs one.
#[derive(Clone, Copy, Debug)]
pub struct Turn {
    /// A coroutine was polled or a message handled.
    pub progressed: bool,
    /// Every coroutine of the worker has finished.
    pub coroutines_done: bool,
    /// When a sleeping coroutine or a waiting request needs the next turn
    /// if no message arrives first (`None`: only a message can wake it).
    pub wake_at_ns: Option<u64>,
    /// The worker's clock when it polled its coroutines.
    pub now_ns: u64,
}
