//! The `threads` fabric: every node and worker is an OS thread of one process.
//!
//! A one-sided verb is executed by the issuing thread directly on the target
//! node's [`Region`], as a NIC would by DMA; the target's CPU does nothing.
//! An RPC is pushed into the target worker's mailbox and its handler runs on
//! that worker's event loop, costing that worker CPU as on real hardware.
//!
//! Injected latency (`LatencyConfig`): the effect of a verb is immediate, its
//! completion is reported `rtt` later; a message becomes visible to its
//! receiver `rtt / 2` after it was sent. Accesses of a node to itself take no
//! injected latency.
//!
//! Crash faults (`crash_node`, wall time): from its crash time on, a node's
//! workers stop (`Endpoint::crashed`), and its memory and handlers are
//! unreachable: a verb batch posted to it has no effect and is handed back
//! to the poster as a `MSG_FAILED` completion, a request sent to it (or
//! still in its mailbox) is bounced back to the sender as `MSG_FAILED` —
//! the crashed node's thread keeps bouncing until the run ends, so nothing
//! sent to it is lost in a race with its crash. The runtime holds those
//! until the failure detector declares the node dead, exactly as on `sim`.
//!
//! Idle workers spin for a short while, then yield, then park until a message
//! arrives or their next timer is due (docs/ARCHITECTURE.md, honest on small
//! machines). The mailbox's `parked` flag and `has_mail` flag are both
//! `SeqCst`, so a sender either sees the receiver parked and unparks it, or
//! the receiver sees the mail before parking.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use super::verbs::{Coalescing, VerbKind, MSG_COMPLETION, MSG_FAILED, MSG_REPLY};
use super::{Doorbell, Endpoint, Message, NodeId, Posted, Region, VerbCounters};
use crate::config::profile::LatencyConfig;

const SPIN_ROUNDS: u32 = 200;
/// After spinning, an idle worker yields its core for this long before it
/// parks: a reply or request usually arrives within a few µs (a peer's
/// coroutine finishing its compute), and a futex wake-up costs tens of µs,
/// while `yield` hands the core to any thread that needs it at once.
const YIELD_BUDGET_NS: u64 = 50_000;
/// Upper bound on one park, so a lost wake-up can only cost this much.
const MAX_PARK: Duration = Duration::from_millis(2);
// With more worker threads than cores, an idle worker parks at once instead
// of spinning or yielding: a spinning thread stays runnable, so the thread
// it waits for (a lock holder's, a handler's) waits for a scheduler time
// slice — milliseconds — where a parked one is woken with preemption in
// tens of µs. Waiting protocols collapsed without this: WOUND_WAIT with RPC
// locks committed nothing in 0.3 s with 4 workers on 2 cores, because a
// worker holding parked lock requests polls them every
// `runtime::WAITING_RETRY_NS` and never parked.

struct Mailbox {
    queue: Mutex<Vec<Message>>,
    has_mail: AtomicBool,
    parked: AtomicBool,
    thread: OnceLock<Thread>,
}

struct Shared {
    regions: Vec<Arc<Region>>,
    workers: u16,
    mailboxes: Vec<Mailbox>,
    latency: LatencyConfig,
    epoch: Instant,
    /// How long an idle worker spins, then yields, before it parks: both
    /// zero with more worker threads than the host has cores (see
    /// `MAX_PARK`).
    spin_rounds: u32,
    yield_budget_ns: u64,
    /// Some node has a crash time (skips the per-verb check otherwise).
    faults_armed: AtomicBool,
    /// Per node: its crash time on the fabric's clock (`u64::MAX`: never).
    crash_at_ns: Vec<AtomicU64>,
}

impl Shared {
    #[inline]
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    #[inline]
    fn crashed(&self, node: NodeId) -> bool {
        self.faults_armed.load(Ordering::Relaxed)
            && self.now_ns() >= self.crash_at_ns[node as usize].load(Ordering::Acquire)
    }

    /// Puts `msg` in worker `index`'s mailbox and wakes it if parked.
    fn deliver(&self, index: usize, msg: Message) {
        let mailbox = &self.mailboxes[index];
        mailbox
            .queue
            .lock()
            .expect("a worker panicked while holding a mailbox")
            .push(msg);
        mailbox.has_mail.store(true, Ordering::SeqCst);
        if mailbox.parked.load(Ordering::SeqCst) {
            if let Some(thread) = mailbox.thread.get() {
                thread.unpark();
            }
        }
    }

    /// Hands a request that a crashed node will never serve back to its
    /// sender (see the module docs); other messages are dropped.
    fn bounce(&self, mut msg: Message) {
        if msg.flags & (MSG_REPLY | MSG_COMPLETION) != 0 || self.crashed(msg.src_node) {
            return;
        }
        std::mem::swap(&mut msg.src_node, &mut msg.dst_node);
        std::mem::swap(&mut msg.src_worker, &mut msg.dst_worker);
        msg.flags |= MSG_REPLY | MSG_FAILED;
        msg.deliver_at_ns = 0;
        let index = msg.dst_node as usize * self.workers as usize + msg.dst_worker as usize;
        self.deliver(index, msg);
    }
}

/// The cluster-wide part of the `threads` fabric; hand one endpoint to each
/// worker thread.
#[derive(Clone)]
pub struct ThreadsFabric {
    shared: Arc<Shared>,
}

impl ThreadsFabric {
    pub fn new(regions: Vec<Arc<Region>>, workers: u16, latency: LatencyConfig) -> ThreadsFabric {
        let regions_len = regions.len();
        let mailboxes = (0..regions.len() * workers as usize)
            .map(|_| Mailbox {
                queue: Mutex::new(Vec::new()),
                has_mail: AtomicBool::new(false),
                parked: AtomicBool::new(false),
                thread: OnceLock::new(),
            })
            .collect::<Vec<_>>();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (spin_rounds, yield_budget_ns) = if mailboxes.len() > cores {
            (0, 0)
        } else {
            (SPIN_ROUNDS, YIELD_BUDGET_NS)
        };
        ThreadsFabric {
            shared: Arc::new(Shared {
                regions,
                workers,
                mailboxes,
                latency,
                epoch: Instant::now(),
                spin_rounds,
                yield_budget_ns,
                faults_armed: AtomicBool::new(false),
                crash_at_ns: (0..regions_len).map(|_| AtomicU64::new(u64::MAX)).collect(),
            }),
        }
    }

    /// Crashes `node` at `at_ns` on the fabric's clock ([`Self::now_ns`]).
    pub fn crash_node(&self, node: NodeId, at_ns: u64) {
        self.shared.crash_at_ns[node as usize].fetch_min(at_ns, Ordering::AcqRel);
        self.shared.faults_armed.store(true, Ordering::Release);
    }

    /// The endpoint of worker `worker` of `node`. Call it on the thread that
    /// will use it: that thread is the one unparked when mail arrives.
    pub fn endpoint(&self, node: NodeId, worker: u16) -> ThreadsEndpoint {
        let index = node as usize * self.shared.workers as usize + worker as usize;
        let _ = self.shared.mailboxes[index]
            .thread
            .set(std::thread::current());
        ThreadsEndpoint {
            shared: self.shared.clone(),
            node,
            worker,
            mailbox: index,
            counters: VerbCounters::default(),
            coalescing: Coalescing::default(),
            delayed: Vec::new(),
            inbox: Vec::new(),
        }
    }

    /// The fabric's clock, as every endpoint reads it.
    pub fn now_ns(&self) -> u64 {
        self.shared.now_ns()
    }

    pub fn region(&self, node: NodeId) -> &Arc<Region> {
        &self.shared.regions[node as usize]
    }
}

pub struct ThreadsEndpoint {
    shared: Arc<Shared>,
    node: NodeId,
    worker: u16,
    mailbox: usize,
    counters: VerbCounters,
    /// Counts RPC traffic as the coalescing fabrics send it (this one
    /// delivers each message on its own); a turn ends at `receive` or
    /// `idle`, where `ucx` sends what it coalesced.
    coalescing: Coalescing,
    /// Messages that arrived but are not due yet (injected latency).
    delayed: Vec<Message>,
    /// Swapped with the mailbox's queue, so neither side allocates.
    inbox: Vec<Message>,
}

impl ThreadsEndpoint {
    fn mailbox(&self) -> &Mailbox {
        &self.shared.mailboxes[self.mailbox]
    }

    fn earliest_delayed(&self) -> Option<u64> {
        self.delayed.iter().map(|m| m.deliver_at_ns).min()
    }
}

impl Endpoint for ThreadsEndpoint {
    fn node(&self) -> NodeId {
        self.node
    }

    fn worker(&self) -> u16 {
        self.worker
    }

    #[inline]
    fn now_ns(&self) -> u64 {
        self.shared.now_ns()
    }

    fn post_doorbell(&mut self, doorbell: Doorbell<'_>, results: &mut [u64]) -> Posted {
        let verbs = doorbell.verbs;
        let Some(target) = self.counters.count_batch(verbs) else {
            return Posted::At(0);
        };
        if target != self.node {
            self.counters.count_remote_verbs(verbs);
        }
        if target != self.node && self.shared.crashed(target) {
            self.shared.deliver(
                self.mailbox,
                Message {
                    src_node: target,
                    src_worker: self.worker,
                    dst_node: self.node,
                    dst_worker: self.worker,
                    coroutine: doorbell.coroutine,
                    call: doorbell.tag,
                    kind: verbs.len() as u16,
                    flags: MSG_COMPLETION | MSG_FAILED,
                    deliver_at_ns: 0,
                    payload: Vec::new(),
                },
            );
            return Posted::Deferred;
        }
        let region = &self.shared.regions[target as usize];
        let mut rtt_ns = 0;
        for verb in verbs {
            region.apply(verb, doorbell.write_data, results);
            let verb_rtt_ns = match verb.kind {
                VerbKind::Read | VerbKind::Write => self.shared.latency.onesided_ns,
                VerbKind::Cas | VerbKind::Faa => self.shared.latency.atomic_ns,
            };
            rtt_ns = rtt_ns.max(verb_rtt_ns);
        }
        if target == self.node || rtt_ns == 0 {
            Posted::At(0)
        } else {
            Posted::At(self.now_ns() + rtt_ns)
        }
    }

    fn send(&mut self, mut msg: Message) {
        self.counters.count_send(&msg);
        if msg.dst_node != self.node {
            self.coalescing.count(&msg, &mut self.counters);
        }
        msg.deliver_at_ns = if msg.dst_node == self.node || self.shared.latency.rpc_ns == 0 {
            0
        } else {
            self.now_ns() + self.shared.latency.rpc_ns / 2
        };
        if msg.dst_node != self.node && self.shared.crashed(msg.dst_node) {
            self.shared.bounce(msg);
            return;
        }
        let index = msg.dst_node as usize * self.shared.workers as usize + msg.dst_worker as usize;
        self.shared.deliver(index, msg);
    }

    fn crashed(&self) -> bool {
        self.shared.crashed(self.node)
    }

    fn receive(&mut self, out: &mut Vec<Message>) {
        self.coalescing.end_turn();
        if self.shared.crashed(self.node) {
            // A crashed node serves nothing: hand back what reached it.
            let mut arrived = std::mem::take(&mut self.delayed);
            let mailbox = &self.shared.mailboxes[self.mailbox];
            if mailbox.has_mail.swap(false, Ordering::SeqCst) {
                arrived.append(
                    &mut mailbox
                        .queue
                        .lock()
                        .expect("a worker panicked while holding a mailbox"),
                );
            }
            for msg in arrived {
                self.shared.bounce(msg);
            }
            return;
        }
        if !self.delayed.is_empty() {
            let now = self.now_ns();
            let mut i = 0;
            while i < self.delayed.len() {
                if self.delayed[i].deliver_at_ns <= now {
                    // Keep arrival order among due messages (FIFO per sender).
                    out.push(self.delayed.remove(i));
                } else {
                    i += 1;
                }
            }
        }
        let mailbox = &self.shared.mailboxes[self.mailbox];
        if !mailbox.has_mail.swap(false, Ordering::SeqCst) {
            return;
        }
        {
            let mut queue = mailbox
                .queue
                .lock()
                .expect("a worker panicked while holding a mailbox");
            std::mem::swap(&mut *queue, &mut self.inbox);
        }
        let now = if self.inbox.iter().any(|m| m.deliver_at_ns != 0) {
            self.now_ns()
        } else {
            0
        };
        for msg in self.inbox.drain(..) {
            // A message from a sender with delayed predecessors must wait too.
            let blocked = self
                .delayed
                .iter()
                .any(|d| d.src_node == msg.src_node && d.src_worker == msg.src_worker);
            if msg.deliver_at_ns <= now && !blocked {
                out.push(msg);
            } else {
                self.delayed.push(msg);
            }
        }
    }

    fn spend_cpu(&mut self, ns: u64) {
        if ns == 0 {
            return;
        }
        let until = self.now_ns() + ns;
        while self.now_ns() < until {
            std::hint::spin_loop();
        }
    }

    fn idle(&mut self, wake_at_ns: Option<u64>) {
        self.coalescing.end_turn();
        let wake_at = match (wake_at_ns, self.earliest_delayed()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let due = |endpoint: &Self| wake_at.is_some_and(|t| endpoint.now_ns() >= t);
        for _ in 0..self.shared.spin_rounds {
            if self.mailbox().has_mail.load(Ordering::Relaxed) || due(self) {
                return;
            }
            std::hint::spin_loop();
        }
        let yield_until = self.now_ns() + self.shared.yield_budget_ns;
        while self.now_ns() < yield_until {
            std::thread::yield_now();
            if self.mailbox().has_mail.load(Ordering::Relaxed) || due(self) {
                return;
            }
        }
        let mailbox = &self.shared.mailboxes[self.mailbox];
        mailbox.parked.store(true, Ordering::SeqCst);
        if !mailbox.has_mail.load(Ordering::SeqCst) {
            let timeout = match wake_at {
                Some(t) => Duration::from_nanos(t.saturating_sub(self.now_ns())).min(MAX_PARK),
                None => MAX_PARK,
            };
            if !timeout.is_zero() {
                std::thread::park_timeout(timeout);
            }
        }
        mailbox.parked.store(false, Ordering::SeqCst);
    }

    fn counters(&self) -> &VerbCounters {
        &self.counters
    }
}
