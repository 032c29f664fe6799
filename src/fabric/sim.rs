//! The `sim` fabric: deterministic simulation of a whole cluster on one OS
//! thread, in virtual time (docs/ARCHITECTURE.md, fabric, layer 2; the method of
//! FoundationDB's simulator and TigerBeetle's VOPR).
//!
//! Every node, worker and coroutine runs on the calling thread. A discrete
//! event queue, in the processing order below, holds:
//! * the next turn of each worker's event loop (`Worker::turn`), which the
//!   engine runs when [`SimFabric::next_run`] hands it out;
//! * the steps of one-sided verbs: a verb takes effect on the target's
//!   memory at its modeled arrival time — a WRITE whole (its payload
//!   arrived whole), CAS/FAA atomically, and a multi-word READ one word per
//!   step over its modeled duration, so a WRITE landing meanwhile tears it
//!   (8-byte atomicity only, as a NIC's DMA gives). A step copies as many
//!   words as come before the next event; the step after that is keyed in
//!   the queue's order but kept aside (`PendingRead`) and run just before
//!   the first queued event it precedes, so a READ costs one queued event
//!   however many other events fall inside it;
//! * the completion of each doorbell batch at its modeled completion time,
//!   delivered as a `MSG_COMPLETION` message (`Posted::Deferred`);
//! * the arrival of RPC messages at a worker's mailbox — a coalesced wire
//!   message from another node, or a message from a worker of the same
//!   node — where its event loop serves them on its next turn.
//!
//! Processing order. Every event belongs to a node: a worker's turn and
//! the arrivals at its mailbox to the worker's node, a verb's steps to its
//! target, a batch's completion to its poster. Nothing one node does
//! reaches another sooner than the profile's smallest one-way time, the
//! lookahead (jitter, the wire, NIC queues and link delays only add to
//! it). So the events run window by window of the lookahead, and within a
//! window node by node, each node's by `(virtual time, insertion number)`:
//! no event of a window can cause another node's event in the same window,
//! so every node sees exactly the events it would see in global time order.
//! What one node's event changes of another node's state at once (the
//! target NIC's reservations and connection cache at posting, the
//! fabric's jitter and fault draws) changes in this order, which within a
//! window is not time order: the model's resolution, as with the NIC's
//! windows. Running a node's events of a window together keeps its
//! workers and memory in the cache (1.09–1.18× the speed of global time
//! order at 64 nodes, docs/performance-archive.md), and it is the order in which a
//! parallel simulator could run the nodes of a window side by side. With
//! one node, or a profile without latency, it is plain time order. The
//! queue's key folds (window, node, time) into one number (`Order`).
//!
//! CPU time is modeled too ([`CpuModel`]): each worker has a virtual clock
//! that its own work advances — posting, sending, serving a request, filing
//! a completion, resuming a coroutine, accessing a record, and transaction
//! compute (`spend_cpu`, YCSB's compute phase) — so an RPC handler delays
//! the worker that runs it, and a busy worker turns later.
//!
//! Latency model per verb (a [`NetworkProfile`]): half the class's round
//! trip out, the payload's wire time, FIFO behind earlier verbs of the same
//! queue pair (worker → node), behind the target NIC's op-rate cap, then the
//! steps, then half the round trip (plus read data) back. The cap counts
//! operations by arrival time in fixed windows of about 1 µs and delays one
//! only when its window is full (`nic`'s module doc: worker clocks run
//! ahead of each other, so operations reach the model out of arrival
//! order, and a single "free at" time per NIC delayed early ones behind
//! later ones at a NIC far below its cap). Every one-way time
//! gets a seeded random jitter of up to `jitter` × itself; with `swarm` each
//! latency class is also scaled per seed by a factor in [0.5, 2), so seeds
//! explore different timing regimes (swarm testing).
//!
//! RPC messages are coalesced as the `ucx` fabric sends them, so the two
//! agree on what a message costs: everything a worker sends to one node
//! within one turn of its event loop (requests, replies and passive
//! messages of all its coroutines) leaves as one wire message when the
//! turn ends ([`SimFabric::turn_done`]; also at the start of `receive`,
//! for what the turn sent before it, and at once when its frames reach
//! [`MAX_COALESCED_WORDS`](super::verbs::MAX_COALESCED_WORDS)). Its
//! costs split as a NIC's and a CPU's do:
//! * per wire message: the sender's doorbell or system call
//!   ([`CpuModel::send_ns`], charged as it leaves), one one-way RPC
//!   latency (jittered once), a 16-byte header at the wire rate, one
//!   operation of the target NIC's op-rate cap, one draw of each link
//!   fault (a delay delays it; a drop loses the whole message, which the
//!   transport sends again after its timeout, drawing again), FIFO
//!   behind the previous message of the same (worker, node) channel, and
//!   one arrival event;
//! * per part: writing its frame into the outbox (`frame_ns`, when it is
//!   sent), its frame (16-byte header and payload) at the wire rate, and
//!   on the receiver serving a request (`handler_ns` plus
//!   `handler_word_ns` per payload word) or filing a reply
//!   (`completion_ns`).
//!
//! This is doorbell batching applied to RPCs. DrTM+H §3.2: one MMIO rings
//! the doorbell for a whole batch of requests, which saves sender CPU and
//! PCIe bandwidth, and it always pays for two-sided RPCs because all of a
//! worker's requests to a peer go through one queue pair (the UD RPCs of
//! FaSST, its ref. 18); RCC §3.3 counts it among the optimizations every
//! protocol gets. Batching saves messages, not service: the receiver still
//! runs one handler per request. A wire message of one part costs its
//! sender `send_ns + frame_ns` and 32 bytes of header on the wire. After
//! the arrival the receivers' mailboxes hold the parts in send order; at a
//! crashed node every part is lost (each counts in `lost_count`, as does
//! each copy of a wire message a drop loses) and each request goes back
//! to its sender as `MSG_FAILED` one lookahead after the message would
//! have arrived. A message between workers of one node never reaches the wire:
//! it costs `frame_ns` and is delivered at once.
//! One-sided verbs are not coalesced: on RDMA a doorbell batch is already
//! one doorbell to one queue pair and each verb is its own work request
//! for the NIC (`ucx` coalesces verb batches only where it emulates them
//! over TCP, `am/verbs`, which this model does not describe).
//!
//! A node's verbs to itself bypass the NIC (DrTM+H §4.1) and take effect at
//! once, as do the memory effects of a whole turn: a turn is atomic in
//! virtual time, and lasts only the CPU time it is charged.
//!
//! Faults, all deterministic given the seed: pause a node's CPUs for an
//! interval (its memory still serves one-sided verbs, as a NIC would),
//! crash a node (its workers stop, verbs and messages to it are lost), delay
//! or drop messages and verbs on a link for an interval. What a crash
//! loses comes back to a surviving poster or sender as a `MSG_FAILED`
//! message (a batch at its modeled completion time, an RPC request when it
//! would have been delivered), which the runtime holds until the failure
//! detector declares the node dead (see `recovery`). What a dropped link
//! loses the transport sends again after its timeout (RC's Local ACK
//! Timeout, TCP's RTO; [`TransportRetry`]), so it arrives late, once; past the
//! transport's retry budget the connection between the two nodes breaks
//! and what was lost, and everything later sent over it, comes back as
//! `MSG_FAILED` from the peer, exactly as a crash's losses do: the fabric
//! reports the unreachable peer, and the recovery decides what follows.
//!
//! Invariants: events run in the processing order (its key only grows, and
//! every event is scheduled at or after the current one's: at its own
//! node no earlier, at another node at least a lookahead later), so a
//! node's virtual time never goes backwards; verbs of one queue pair apply in
//! issue order, each after the previous one's last step; a batch completes
//! strictly after its last step; messages of one worker pair deliver in
//! send order (all travel on one (worker, node) channel); a wire message
//! leaves once, at the latest at the end of the turn that filled it. The
//! run is a pure function of (config, seed): nothing reads the wall
//! clock or iterates a hash map.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use super::event_queue::EventQueue;
use super::verbs::VerbKind;
use super::{Message, NodeId, Region};
use crate::base::rng::Rng;
use crate::config::profile::NetworkProfile;
use crate::config::sim::{CpuModel, FaultSpec, SimConfig};
use connections::ConnectionCaches;
use nic::NicCap;
use order::Order;

mod connections;
mod endpoint;
mod messages;
mod nic;
mod onesided;
mod order;
mod transport;

pub use endpoint::SimEndpoint;
pub use transport::TransportRetry;

/// Latencies after swarm scaling, ns.
#[derive(Clone, Copy, Debug)]
struct Timing {
    onesided_one_way_ns: u64,
    atomic_one_way_ns: u64,
    rpc_one_way_ns: u64,
    per_byte_ps: u64,
    nic_op_ns: u64,
    /// Time between two words of a multi-word READ (at least 1, so that
    /// other verbs can land between its words).
    word_ns: u64,
}

/// One verb of a batch in flight, with its operands copied at post time.
struct SimVerb {
    kind: VerbKind,
    addr: u64,
    len: u32,
    /// Write: offset in the batch's `write_data`; else in its `results`.
    buf: u32,
    compare: u64,
    swap: u64,
}

/// A doorbell batch in flight.
struct InFlight {
    initiator: u32,
    coroutine: u16,
    tag: u16,
    target: NodeId,
    verbs: Vec<SimVerb>,
    write_data: Vec<u64>,
    results: Vec<u64>,
    /// A verb of it was lost to its target's crash or to a broken
    /// connection: it never completes normally, and its poster hears of
    /// it (`MSG_FAILED`) at its completion time.
    lost: bool,
}

enum Event {
    RunWorker {
        worker: u32,
    },
    /// A crashed worker's last turn, at its crash: the runtime hands back
    /// the requests it still held (`runtime::Worker`'s crashed turn).
    CrashTurn {
        worker: u32,
    },
    /// A verb arrives at its target and takes effect (a READ: its first
    /// words; the rest are read lazily, see [`PendingRead`]).
    Step {
        batch: u32,
        verb: u16,
    },
    Complete {
        batch: u32,
    },
    /// A message between two workers of one node (never on the wire).
    Deliver {
        worker: u32,
        msg: Message,
    },
    /// A coalesced wire message arrives at `parts[0].dst_node`: its parts,
    /// in send order, all from one worker.
    Arrive {
        parts: Vec<Message>,
    },
}

/// A multi-word READ whose remaining words a queued step would copy: the
/// step's key `(at_ns, seq)` (it reads word `word` then) is taken from the
/// queue's own time and insertion-number sequence, but the step is not
/// queued. [`SimState::catch_up`] runs it, in key order, before the first
/// queued event whose key is larger — exactly where the queue would have
/// popped it — so the run is the one a queued step gives, event for
/// event, without a queue push and pop per interleaving opportunity.
#[derive(Clone, Copy, Debug)]
struct PendingRead {
    at_ns: u64,
    seq: u64,
    batch: u32,
    verb: u16,
    /// The READ's target, whose events it is ordered among.
    node: NodeId,
    word: u32,
}

/// The RPC messages one worker queued for one node in the current turn:
/// the wire message they will leave as (see "RPC messages" in the module
/// docs).
struct Outbox {
    node: NodeId,
    /// Words of its frames (`Message::frame_words`), for the size cap.
    words: usize,
    parts: Vec<Message>,
}

/// Bytes of a wire message's own header in the time model, before its
/// frames: the coalesced message's frame count and the transport's
/// routing. With one frame's 16 bytes this is the 32 bytes of header the
/// model charged an uncoalesced RPC.
const WIRE_HEADER_BYTES: u64 = 16;

/// Most completion payloads kept for reuse: enough for every doorbell
/// batch in flight at once in a large cluster, after which the runtime's
/// excess is freed.
const SPARE_RESULTS: usize = 1 << 14;

#[derive(Clone, Copy, Debug)]
struct LinkFault {
    from: NodeId,
    to: NodeId,
    start_ns: u64,
    end_ns: u64,
    extra_ns: u64,
    drop_probability: f64,
}

impl LinkFault {
    /// A fault on `from → to` during `[start_ns, start_ns + for_ns)` that
    /// neither delays nor drops yet.
    fn between(from: u32, to: u32, start_ns: u64, for_ns: u64) -> LinkFault {
        LinkFault {
            from: from as NodeId,
            to: to as NodeId,
            start_ns,
            end_ns: start_ns + for_ns,
            extra_ns: 0,
            drop_probability: 0.0,
        }
    }
}

/// A queued event is a `u64`: a tag in the bits from `TAG_SHIFT` up, and
/// below them the event itself (a worker; a batch and its verb) or, for
/// the events that carry messages, the slot in `SimState::events` that
/// holds it. Most events need no slot, so popping one touches only the
/// queue's own memory.
const TAG_SHIFT: u32 = 60;
const TAG_RUN: u64 = 0;
const TAG_CRASH: u64 = 1;
const TAG_STEP: u64 = 2;
const TAG_COMPLETE: u64 = 3;
const TAG_SLOT: u64 = 4;

/// `SimState::pending_min` when no READ is pending.
const NO_PENDING: (u64, u64) = (u64::MAX, u64::MAX);

/// Scheduled as "never" in `next_turn_ns`.
const UNSCHEDULED: u64 = u64::MAX;

struct SimState {
    /// The time of the event being processed (a turn's worker may run
    /// ahead of it), and its key.
    now_ns: u64,
    now_key: u64,
    /// The latest time any node has reached.
    frontier_ns: u64,
    order: Order,
    next_seq: u64,
    queue: EventQueue,
    /// The queued events that carry messages (see [`TAG_SHIFT`]).
    events: Vec<Option<Event>>,
    free_events: Vec<u32>,
    batches: Vec<Option<InFlight>>,
    free_batches: Vec<u32>,
    /// READs whose later words are not copied yet (unordered; a handful
    /// at a time), and the smallest key among them (`(u64::MAX, u64::MAX)`
    /// when none).
    pending_reads: Vec<PendingRead>,
    pending_min: (u64, u64),
    regions: Vec<Arc<Region>>,
    workers_per_node: u16,
    timing: Timing,
    cpu: CpuModel,
    jitter: f64,
    rng: Rng,
    /// Per worker: its virtual clock, and when its next turn is queued.
    clock_ns: Vec<u64>,
    next_turn_ns: Vec<u64>,
    mailboxes: Vec<Vec<Message>>,
    /// The NICs' op-rate cap, reserved by arrival time (`nic`); `None`
    /// when the profile has none.
    nic_cap: Option<NicCap>,
    /// Per (worker, target node), at `worker * nodes + node`: when the
    /// queue pair's last verb finished.
    qp_free_ns: Vec<u64>,
    /// Per (sender worker, destination node), at `worker * nodes + node`:
    /// the last delivery time of a message on that channel (FIFO: every
    /// message of a worker pair travels on one).
    channel_last_ns: Vec<u64>,
    /// Per worker: the wire messages it is filling this turn, one per
    /// destination node, in the order it first sent to each.
    outboxes: Vec<Vec<Outbox>>,
    /// Emptied part vectors, for the next outboxes (no allocation in
    /// steady state).
    spare_parts: Vec<Vec<Message>>,
    /// Emptied verb and write-data vectors of completed batches, for the
    /// next batches (likewise).
    spare_verbs: Vec<Vec<SimVerb>>,
    spare_write_data: Vec<Vec<u64>>,
    /// Completion payloads the runtime handed back
    /// ([`Endpoint::recycle`](super::Endpoint::recycle)), at most
    /// [`SPARE_RESULTS`], for the next batches' results.
    spare_results: Vec<Vec<u64>>,
    crash_at_ns: Vec<u64>,
    pauses: Vec<(NodeId, u64, u64)>,
    links: Vec<LinkFault>,
    /// How the transport retransmits what a `drop` loses.
    transport: TransportRetry,
    /// Node pairs (smaller first) whose connection ran out of retries.
    broken_connections: Vec<(NodeId, NodeId)>,
    events_processed: u64,
    lost_count: u64,
    /// Transfers the transport sent again after a loss.
    retransmitted_count: u64,
    /// The NICs' connection caches; `None` when the profile has none.
    connections: Option<ConnectionCaches>,
}

impl SimState {
    /// Queues `event` at `node` at `at_ns`: never before the event being
    /// processed in the processing order (an event of this node no
    /// earlier than now, or of another node at least a lookahead later).
    fn schedule(&mut self, node: NodeId, at_ns: u64, event: Event) {
        let key = self.order.key(node, at_ns);
        debug_assert!(
            key >= self.now_key,
            "an event before the current one: {at_ns} ns at node {node}, now {} ns",
            self.now_ns
        );
        // The lookahead itself, which the order relies on (before the
        // first event, the run's setup schedules freely).
        debug_assert!(
            self.events_processed == 0
                || node as u64 == self.order.node_of_key(self.now_key)
                || at_ns >= self.now_ns + self.order.lookahead_ns,
            "an event at node {node} at {at_ns} ns, sooner than the lookahead ({} ns) after {} ns",
            self.order.lookahead_ns,
            self.now_ns
        );
        let payload = match event {
            Event::RunWorker { worker } => (TAG_RUN << TAG_SHIFT) | worker as u64,
            Event::CrashTurn { worker } => (TAG_CRASH << TAG_SHIFT) | worker as u64,
            Event::Step { batch, verb } => {
                (TAG_STEP << TAG_SHIFT) | ((batch as u64) << 16) | verb as u64
            }
            Event::Complete { batch } => (TAG_COMPLETE << TAG_SHIFT) | batch as u64,
            event @ (Event::Deliver { .. } | Event::Arrive { .. }) => {
                let slot = match self.free_events.pop() {
                    Some(slot) => {
                        self.events[slot as usize] = Some(event);
                        slot
                    }
                    None => {
                        self.events.push(Some(event));
                        (self.events.len() - 1) as u32
                    }
                };
                (TAG_SLOT << TAG_SHIFT) | slot as u64
            }
        };
        self.queue.push(key, self.next_seq, payload);
        self.next_seq += 1;
    }

    /// The event a queue payload names (see [`TAG_SHIFT`]), taking it out
    /// of its slot if it has one.
    fn take_event(&mut self, payload: u64) -> Event {
        let low = payload & ((1 << TAG_SHIFT) - 1);
        match payload >> TAG_SHIFT {
            TAG_RUN => Event::RunWorker { worker: low as u32 },
            TAG_CRASH => Event::CrashTurn { worker: low as u32 },
            TAG_STEP => Event::Step {
                batch: (low >> 16) as u32,
                verb: low as u16,
            },
            TAG_COMPLETE => Event::Complete { batch: low as u32 },
            tag => {
                debug_assert_eq!(tag, TAG_SLOT);
                let event = self.events[low as usize]
                    .take()
                    .expect("a queued event is present");
                self.free_events.push(low as u32);
                event
            }
        }
    }

    fn node_of(&self, worker: u32) -> NodeId {
        (worker / self.workers_per_node as u32) as NodeId
    }

    fn crashed(&self, node: NodeId, at_ns: u64) -> bool {
        at_ns >= self.crash_at_ns[node as usize]
    }

    /// The first time at or after `at_ns` when `node`'s CPUs run.
    fn unpaused(&self, node: NodeId, mut at_ns: u64) -> u64 {
        loop {
            let moved = self
                .pauses
                .iter()
                .filter(|(n, start, end)| *n == node && *start <= at_ns && at_ns < *end)
                .map(|(_, _, end)| *end)
                .max();
            match moved {
                Some(end) => at_ns = end,
                None => return at_ns,
            }
        }
    }

    /// Queues `worker`'s next turn at `at_ns` unless one is queued earlier.
    /// Crashes `node` at `at_ns` (the earliest crash counts), with a last
    /// turn for each of its workers then.
    fn set_crash(&mut self, node: NodeId, at_ns: u64) {
        let at = &mut self.crash_at_ns[node as usize];
        if at_ns >= *at {
            return;
        }
        *at = at_ns;
        let per_node = self.workers_per_node as u32;
        for worker in node as u32 * per_node..(node as u32 + 1) * per_node {
            self.schedule(node, at_ns, Event::CrashTurn { worker });
        }
    }

    /// Schedules a configured fault (times in µs, as configured).
    fn inject(&mut self, fault: &FaultSpec) {
        let ns = |us: f64| (us * 1_000.0) as u64;
        match *fault {
            FaultSpec::Pause {
                node,
                at_us,
                for_us,
            } => self
                .pauses
                .push((node as NodeId, ns(at_us), ns(at_us) + ns(for_us))),
            FaultSpec::Crash { node, at_us } => self.set_crash(node as NodeId, ns(at_us)),
            FaultSpec::Delay {
                from,
                to,
                at_us,
                for_us,
                extra_ns,
            } => self.links.push(LinkFault {
                extra_ns,
                ..LinkFault::between(from, to, ns(at_us), ns(for_us))
            }),
            FaultSpec::Drop {
                from,
                to,
                at_us,
                for_us,
                probability,
            } => self.links.push(LinkFault {
                drop_probability: probability,
                ..LinkFault::between(from, to, ns(at_us), ns(for_us))
            }),
        }
    }

    fn wake(&mut self, worker: u32, at_ns: u64) {
        let node = self.node_of(worker);
        let at_ns = self.unpaused(node, at_ns.max(self.clock_ns[worker as usize]));
        if self.crashed(node, at_ns) || self.next_turn_ns[worker as usize] <= at_ns {
            return;
        }
        self.next_turn_ns[worker as usize] = at_ns;
        self.schedule(node, at_ns, Event::RunWorker { worker });
    }

    /// Random extra time on a one-way trip of `base_ns`.
    fn jittered(&mut self, base_ns: u64) -> u64 {
        if self.jitter == 0.0 || base_ns == 0 {
            return base_ns;
        }
        base_ns + (self.rng.unit() * self.jitter * base_ns as f64) as u64
    }

    /// Link faults on `from → to` at `at_ns`: extra delay, and whether the
    /// transfer is lost.
    fn link_effect(&mut self, from: NodeId, to: NodeId, at_ns: u64) -> (u64, bool) {
        let mut extra = 0;
        let mut lost = false;
        for index in 0..self.links.len() {
            let link = self.links[index];
            if link.from == from && link.to == to && link.start_ns <= at_ns && at_ns < link.end_ns {
                extra += link.extra_ns;
                if link.drop_probability > 0.0 && self.rng.unit() < link.drop_probability {
                    lost = true;
                }
            }
        }
        (extra, lost)
    }

    fn wire_ns(&self, bytes: u64) -> u64 {
        (bytes * self.timing.per_byte_ps).div_ceil(1000)
    }

    /// Reserves the target NIC for one operation arriving at `at_ns`; returns
    /// when it starts. By arrival time, not by the order turns happen to be
    /// simulated in (`nic`), so an unsaturated NIC delays nothing.
    fn through_nic(&mut self, node: NodeId, at_ns: u64) -> u64 {
        match self.nic_cap.as_mut() {
            Some(cap) => cap.reserve(node, at_ns, self.order.floor_ns(self.now_ns)),
            None => at_ns,
        }
    }
}

/// The simulated cluster; hand one [`SimEndpoint`] to each worker and drive
/// the workers with [`SimFabric::next_run`] and [`SimFabric::turn_done`].
#[derive(Clone)]
pub struct SimFabric {
    state: Rc<RefCell<SimState>>,
}

impl SimFabric {
    pub fn new(
        regions: Vec<Arc<Region>>,
        workers_per_node: u16,
        profile: &NetworkProfile,
        config: &SimConfig,
        seed: u64,
    ) -> SimFabric {
        let nodes = regions.len();
        let mut rng = Rng::derive(seed, &[0x5151]);
        let mut scale = |ns: u64| {
            if config.swarm {
                (ns as f64 * (0.5 + 1.5 * rng.unit())) as u64
            } else {
                ns
            }
        };
        let timing = Timing {
            onesided_one_way_ns: scale(profile.onesided_rtt_ns) / 2,
            atomic_one_way_ns: scale(profile.atomic_rtt_ns) / 2,
            rpc_one_way_ns: scale(profile.rpc_rtt_ns) / 2,
            per_byte_ps: profile.per_byte_ps,
            nic_op_ns: profile.nic_op_ns(),
            word_ns: ((8 * profile.per_byte_ps) / 1000).max(1),
        };
        let total_workers = nodes * workers_per_node as usize;
        // Every message and verb between nodes takes at least its one-way
        // latency (jitter, the wire, NIC queues and link delays only add).
        let order = Order::new(
            nodes,
            timing
                .onesided_one_way_ns
                .min(timing.atomic_one_way_ns)
                .min(timing.rpc_one_way_ns),
        );
        let mut state = SimState {
            now_ns: 0,
            now_key: 0,
            frontier_ns: 0,
            order,
            next_seq: 0,
            queue: EventQueue::new(order.bucket_shift()),
            events: Vec::with_capacity(1024),
            free_events: Vec::new(),
            batches: Vec::new(),
            free_batches: Vec::new(),
            pending_reads: Vec::new(),
            pending_min: NO_PENDING,
            regions,
            workers_per_node,
            timing,
            cpu: config.cpu,
            jitter: config.jitter,
            rng: Rng::derive(seed, &[0x5152]),
            clock_ns: vec![0; total_workers],
            next_turn_ns: vec![UNSCHEDULED; total_workers],
            mailboxes: (0..total_workers).map(|_| Vec::new()).collect(),
            nic_cap: NicCap::new(
                nodes,
                timing.nic_op_ns,
                timing
                    .onesided_one_way_ns
                    .max(timing.atomic_one_way_ns)
                    .max(timing.rpc_one_way_ns),
                config.jitter,
            ),
            qp_free_ns: vec![0; total_workers * nodes],
            channel_last_ns: vec![0; total_workers * nodes],
            outboxes: (0..total_workers).map(|_| Vec::new()).collect(),
            spare_parts: Vec::new(),
            spare_verbs: Vec::new(),
            spare_write_data: Vec::new(),
            spare_results: Vec::new(),
            crash_at_ns: vec![u64::MAX; nodes],
            pauses: Vec::new(),
            links: Vec::new(),
            transport: TransportRetry::of(profile),
            broken_connections: Vec::new(),
            events_processed: 0,
            lost_count: 0,
            retransmitted_count: 0,
            connections: ConnectionCaches::new(
                profile,
                config.emulated_nodes,
                nodes,
                workers_per_node,
            ),
        };
        for fault in &config.faults {
            state.inject(fault);
        }
        SimFabric {
            state: Rc::new(RefCell::new(state)),
        }
    }

    /// The endpoint of worker `worker` of `node`.
    pub fn endpoint(&self, node: NodeId, worker: u16) -> SimEndpoint {
        SimEndpoint::new(self.state.clone(), node, worker)
    }

    /// The latest virtual time any node has reached, ns: every node has
    /// run its events up to the start of this time's window.
    pub fn frontier_ns(&self) -> u64 {
        self.state.borrow().frontier_ns
    }

    /// Queues a turn of worker `index` (= node × workers + worker) at
    /// `at_ns`, e.g. the first turn of every worker.
    pub fn wake(&self, index: usize, at_ns: u64) {
        self.state.borrow_mut().wake(index as u32, at_ns)
    }

    /// Processes events in the processing order until a worker's turn is due,
    /// and returns that worker's index with its clock set to the turn's
    /// time; `None` when no event is left.
    pub fn next_run(&self) -> Option<usize> {
        let mut state = self.state.borrow_mut();
        while let Some((key, seq, payload)) = state.queue.pop() {
            if state.pending_min < (key, seq) {
                state.catch_up(key, seq);
            }
            debug_assert!(key >= state.now_key, "went back in the order");
            let at_ns = state.order.time_ns(key);
            state.now_key = key;
            state.now_ns = at_ns;
            state.frontier_ns = state.frontier_ns.max(at_ns);
            state.events_processed += 1;
            let event = state.take_event(payload);
            match event {
                Event::RunWorker { worker } => {
                    let index = worker as usize;
                    if state.next_turn_ns[index] != at_ns {
                        continue; // superseded by an earlier turn
                    }
                    state.next_turn_ns[index] = UNSCHEDULED;
                    let node = state.node_of(worker);
                    if state.crashed(node, at_ns) {
                        continue;
                    }
                    let resumed = state.unpaused(node, at_ns);
                    if resumed != at_ns {
                        state.wake(worker, resumed);
                        continue;
                    }
                    state.clock_ns[index] = state.clock_ns[index].max(at_ns);
                    return Some(index);
                }
                Event::CrashTurn { worker } => {
                    let index = worker as usize;
                    state.clock_ns[index] = state.clock_ns[index].max(at_ns);
                    return Some(index);
                }
                Event::Step { batch, verb } => state.step(batch, verb),
                Event::Complete { batch } => state.complete(batch),
                Event::Deliver { worker, msg } => {
                    if state.crashed(state.node_of(worker), at_ns) {
                        state.lost_count += 1;
                        state.bounce(msg);
                        continue;
                    }
                    state.mailboxes[worker as usize].push(msg);
                    state.wake(worker, at_ns);
                }
                Event::Arrive { parts } => state.arrive(parts),
            }
        }
        None
    }

    /// After a turn of worker `index`: queue its next one — at once if the
    /// turn did something (it may have more to do), at `wake_at_ns` if a
    /// timer is pending, else when a message or completion arrives.
    pub fn turn_done(&self, index: usize, progressed: bool, wake_at_ns: Option<u64>) {
        let mut state = self.state.borrow_mut();
        // What the turn sent leaves now, one wire message per node, as
        // `ucx` sends it at the start of the next turn or when idle.
        state.flush(index as u32);
        let clock = state.clock_ns[index];
        if progressed || !state.mailboxes[index].is_empty() {
            state.wake(index as u32, clock);
        } else if let Some(at) = wake_at_ns {
            state.wake(index as u32, at.max(clock));
        }
    }

    /// Events processed so far (a measure of simulation work).
    pub fn events_processed(&self) -> u64 {
        self.state.borrow().events_processed
    }

    /// Connection-cache lookups and misses so far, summed over the NICs
    /// (`(0, 0)` when the profile models no connection cache).
    pub fn connection_cache(&self) -> (u64, u64) {
        self.state
            .borrow()
            .connections
            .as_ref()
            .map_or((0, 0), |c| (c.lookups, c.misses))
    }

    /// Verbs, batches and messages lost to crashes, and copies of them
    /// lost to drops.
    pub fn lost_count(&self) -> u64 {
        self.state.borrow().lost_count
    }

    /// Copies of verbs and wire messages the transport sent again after
    /// a drop lost one.
    pub fn retransmitted_count(&self) -> u64 {
        self.state.borrow().retransmitted_count
    }

    /// Pauses `node`'s CPUs during `[at_ns, at_ns + for_ns)`.
    pub fn pause_node(&self, node: NodeId, at_ns: u64, for_ns: u64) {
        self.state
            .borrow_mut()
            .pauses
            .push((node, at_ns, at_ns + for_ns));
    }

    /// Crashes `node` at `at_ns`.
    pub fn crash_node(&self, node: NodeId, at_ns: u64) {
        self.state.borrow_mut().set_crash(node, at_ns);
    }

    /// Nodes of the cluster.
    pub fn nodes(&self) -> usize {
        self.state.borrow().regions.len()
    }

    /// When `node` crashes (`u64::MAX`: never).
    pub fn crash_at_ns(&self, node: NodeId) -> u64 {
        self.state.borrow().crash_at_ns[node as usize]
    }

    /// Whether `node` has crashed by `at_ns`.
    pub fn is_crashed(&self, node: NodeId, at_ns: u64) -> bool {
        self.state.borrow().crashed(node, at_ns)
    }
}

/// FNV-1a over 64-bit words: the hash of a run's history and memory that
/// proves two runs of one seed identical.
#[derive(Clone, Copy, Debug)]
pub struct WordHasher(u64);

impl Default for WordHasher {
    fn default() -> Self {
        WordHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl WordHasher {
    #[inline]
    pub fn word(&mut self, word: u64) {
        for byte in word.to_le_bytes() {
            self.0 ^= byte as u64;
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    pub fn finish(self) -> u64 {
        self.0
    }
}
