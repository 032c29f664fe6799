//! CALVIN: deterministic concurrency control (RCC §4.6, Deneva §3.4,
//! RCBench §6.2.4; Thomson et al., SIGMOD 2012).
//!
//! Unlike every other protocol here, CALVIN has no per-transaction stages
//! run by a coordinator, no 2PC and no conflict aborts. Transactions are
//! ordered before they run, and the nodes that own their data run them:
//!
//! 1. **Sequencing** ([`sequencer`]). Each node has one sequencer
//!    coroutine. Time is cut into epochs of `calvin_epoch_us`; at the end of
//!    epoch `e` the sequencer takes the requests its clients submitted
//!    during it, numbers them in submission order, and delivers to every
//!    node the sub-batch of those that touch it — each with its input: the
//!    declared read/write set and the encoded request. A node gets a
//!    (possibly empty) sub-batch from every sequencer every epoch, which is
//!    how its scheduler knows an epoch is complete. The global order is
//!    `(epoch, sequencer node, position in the sequencer's batch)`.
//!    *Stage `txn_broadcast_input` (RCC bit 128)*: RPC — one call per node
//!    carrying the sub-batch, stored by the handler; one-sided — two
//!    doorbell-batched WRITEs per node into that node's CALVIN request
//!    buffer (CRB, RCC Fig. 11–12): the entries, then the header's tag
//!    word, which FIFO order makes visible only once the entries are.
//! 2. **Scheduling** ([`scheduler`]). Each node has one scheduler
//!    coroutine. It takes epoch `e`'s sub-batches once all have arrived and,
//!    in the global order, requests the locks of each transaction's local
//!    records from a deterministic lock manager: FIFO queues per record,
//!    shared for reads and exclusive for writes, granted strictly in queue
//!    order. A transaction whose local locks are all granted is ready.
//!    Because every node enqueues in the same global order, the waits-for
//!    relation follows that order and cannot deadlock, and conflicting
//!    transactions run in the same order on every node.
//! 3. **Execution** ([`executor`]). The transaction coroutines of every
//!    worker are executors. An executor takes a ready transaction, reads its
//!    local records, and — RCC §4.6 — if the node is a *passive*
//!    participant (reads only) forwards them to every *active* participant
//!    (nodes that write) and is done; if active, it forwards its local
//!    records to the other active participants, waits for every remote
//!    record, runs the transaction program on the full set, installs its
//!    local writes and releases its locks at once. *Stage
//!    `value_forwarding` (RCC bit 256)*: RPC — a passive call carrying the
//!    records, stored by the handler; one-sided — WRITEs of each record
//!    block into the receiver's CALVIN forward buffer (CFB), then a notify
//!    WRITE of each block's tag. Read-only transactions have no active
//!    participant: each node completes after its local reads. An executor
//!    never blocks on forwarded values: it parks the transaction and takes
//!    other work, so ready transactions always get their reads forwarded.
//! 4. **Logging** (`--replication R`, R ≥ 2). An active participant whose
//!    program committed sends its own partition's writes — each with the
//!    version it is about to install — to every backup of that partition
//!    and waits for their acknowledgements, then installs them (see
//!    *Replication* below). *Stage `log` (bit 4)*, the same code as every
//!    other protocol's (`replication::log`): one-sided — a WRITE of one
//!    record into this worker's ring on each backup, applied there in the
//!    background; RPC — a `LOG_APPEND` call the backup stores and
//!    answers at once; either is applied once the watermark says every
//!    backup acknowledged it (`replication::ring`).
//! 5. **Completion.** Each participant adds one to the origin's completion
//!    counter of the transaction's client slot (one-sided: a FETCH_AND_ADD;
//!    RPC: a passive call whose handler does the same add; the primitive of
//!    `value_forwarding`). The origin counts the transaction committed once
//!    all participants reported.
//!
//! ## Replication
//!
//! Calvin itself (Thomson et al. §3, §3.1) replicates the sequenced
//! *input*: every replica receives the same batches and, being
//! deterministic, executes them to the same state; RCC §4.6 sketches the
//! same for RDMA (backups keep request buffers "for receiving asynchronous
//! backup requests for each epoch"). Verbena replicates CALVIN as it does
//! every other protocol instead — RCC §4.1's coordinator log, with 3-way
//! replication as in RCC §6.1 — because its placement
//! (`replication::placement`) is primary–backup per partition: partition
//! `p`'s backups live on nodes that are primaries of other partitions and
//! run no second scheduler or executor for `p`, and the value forwarding a
//! re-execution on them would need has no counterpart there. So the unit
//! replicated is a participant's part, not the input: before an active
//! participant installs anything or reports completion, it logs the
//! writes it is about to install — those of its own partition only
//! (`LogWriter::for_served`), although its program computed the whole
//! write set; the other active participants log theirs — through the `log`
//! stage every protocol uses, so `--stages log=onesided|rpc` both apply,
//! the backups apply with the same idempotent newer-version rule, and the
//! engine's `--check` compares every backup with its primary after the run
//! (`replication::check_backups`). Rows the program inserts on this node
//! are logged with the other writes (the backup claims them on apply).
//! The log stage runs while the transaction's locks are held, so the
//! versions logged are exactly those installed next, and no later writer
//! of the same record is logged before it (a backup would install either
//! order correctly anyway: only newer versions apply).
//!
//! Failover (`--fault` with replication 2 or 3, on `sim` and `threads`):
//! [`failover`]. A crash is recovered as for every other protocol (pause,
//! roll the dead node's log forward, promote its partition's first live
//! backup), and then every sequenced transaction the dead node had a part
//! in is resolved: finished by the survivors (from the promoted copy and
//! from what a live active participant computed) or, when no part of it
//! installed anything, given up and submitted again by its client. After
//! the pause every access goes to the node *serving* its partition
//! (`Scheduled::homes`), and sequencers and schedulers count live nodes
//! only.
//!
//! Choices where the papers are silent, and why:
//! * Clients (Deneva §2.3, §3.4: clients keep several transactions
//!   outstanding and send them to the sequencers, which batch "all of the
//!   transactions that they collected in the last epoch"). A *client* here
//!   is one per worker, as Deneva runs client threads: each keeps
//!   `calvin_inflight` requests outstanding (default 100,
//!   `config::DEFAULT_CALVIN_INFLIGHT`), so a node has `workers ×
//!   calvin_inflight` client slots ([`client_slots`]), each one request in
//!   a closed loop. A slot whose request completed submits its next at
//!   once; the sequencer seals each epoch at its boundary with every
//!   request that arrived meanwhile — however many, and without waiting
//!   for earlier epochs' transactions, which the executors run as their
//!   locks are granted. So throughput is bounded by the executors
//!   (`workers × coroutines` per node), the locks and the network, not by
//!   one transaction per coroutine per epoch. Latency runs from a
//!   request's submission (its slot's previous completion) to the
//!   completion of its last participant, the wait for its epoch to close
//!   included (stage `sequence`).
//!   What an epoch holds then depends on when transactions completed, so
//!   two runs sequence the same input only on `sim` with the same seed
//!   and configuration. `calvin_inflight = 0` keeps the *lockstep*
//!   clients instead: `workers × coroutines` slots, one request each per
//!   epoch, each epoch sealed once the previous one's transactions all
//!   completed (epochs stretch when they run long) — the input is then a
//!   function of the seed and configuration alone, so any fabric,
//!   primitive and worker/coroutine split of the same clients ends in the
//!   same state (the replica property CALVIN is built on; the tests
//!   check it in that mode).
//! * The forward buffer is addressed by the transaction's place in the
//!   global order (`epoch mod RING`, sequencer, position) rather than by
//!   executing coroutine as in RCC: which coroutine runs a transaction is
//!   decided on each node at run time, while every node computes that
//!   address from the input alone.
//! * Flow control: buffers are rings of [`RING`] epochs. A node frees its
//!   request-buffer slot of epoch `e` only once every transaction of `e`
//!   finished there; a one-sided sequencer READs every receiver's slot
//!   header and writes epoch `e` to none before all are free, and an RPC
//!   receiver holds epoch `e`'s call (`Served::Wait`) until it finished
//!   epoch `e − RING + 1`. Either way, no node starts epoch `e + RING`
//!   before every node finished epoch `e`, so forward blocks are never
//!   overwritten while still needed.
//! * The committed history is recorded by each participant for its own
//!   records (reads with the version seen, writes with the version
//!   installed) and merged per transaction after the run
//!   ([`merge_partial_history`]).
//! * Read/write sets are declared up front
//!   (`Workload::declare_accesses`), or, where they depend on data, found
//!   by a reconnaissance run ([`recon`], Deneva §3.4); a program that
//!   touches an undeclared record aborts deterministically on every active
//!   participant (`AbortReason::Undeclared`), and a reconnoitred request is
//!   then reconnoitred and submitted again.
//! * Inserts (`Reach::insert_access` of [`CalvinExec`]): a row the
//!   program inserts is not declared — its key must derive from a record
//!   the transaction writes (TPC-C's district counters), whose exclusive
//!   lock covers it. The origin (the program's home, `TxnCx::home`) claims
//!   the row while executing and installs it with its other writes; the
//!   other active participants run the program on an absent copy. Every
//!   participant sees the row absent, so all decide alike; a workload must
//!   not let an insert fail on the home alone (TPC-C caps its ids per
//!   district from the district row, and sizes its tables to fit them).
//! * Ordered indexes change at the commit point on the origin, after its
//!   rows are installed and before its locks are released
//!   (`Workload::at_commit_point`); a workload declares, beside the
//!   reconnoitred set, the records whose locks order a range read against
//!   the index's writers (`Workload::declare_accesses`).
//! * Programs see a clock fixed by the input (`Txn::now_ns`: the end of the
//!   transaction's epoch from the run's start), Calvin's rule for every
//!   nondeterministic value, so records that store dates are the same on
//!   every replica.
//! * Forward blocks are addressed by the record's place among those on
//!   other nodes than the receiver, so the buffer is sized by
//!   `Workload::max_forwarded_accesses` (TPC-C: 33) rather than by the
//!   largest set (StockLevel's several hundred local records).
//!
//! Invariants: a record is read or written only under its lock from the
//! lock manager; locks of one node are requested in the global order; a
//! request-buffer slot is rewritten only after its receiver freed it; a
//! transaction's writes are installed only by the node that owns them,
//! after every remote record it reads has arrived — and, when replicated,
//! only after every backup of that node's partition acknowledged them.

mod exec;
pub mod executor;
pub mod failover;
mod history;
mod layout;
mod program;
pub mod recon;
pub mod scheduler;
pub mod sequencer;
mod service;

pub use exec::{CalvinExec, CalvinRun, Reach, INSERTED};
pub use history::merge_partial_history;
pub use layout::{pack_access, unpack_access, CalvinLayout, Place};
pub use service::CalvinService;

pub(crate) use program::with_calvin_program;

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crate::base::StagePlan;
use crate::check::History;
use crate::config::Config;
use crate::engine::program::RunClock;
use crate::fabric::NodeId;
use crate::replication::LogWriter;
use crate::runtime::Worker;
use crate::stats::WorkerStats;
use crate::store::{LocationCache, NodeStore, StoreLayout, TableId};
use crate::workloads::Workload;

use scheduler::{LockTable, Scheduled};

/// Epochs each request and forward buffer holds.
pub const RING: u64 = 4;

/// How long an idle sequencer, scheduler or executor first waits before
/// looking again, ns ([`Poll`]).
pub const POLL_NS: u64 = 2_000;

/// The longest such wait, ns; shorter for short epochs (`epoch / 64`).
pub const MAX_POLL_NS: u64 = 64_000;

/// The waits of a coroutine that polls for work (forwarded records and
/// request-buffer tags are written one-sided, with no message to wake
/// anyone): they double from [`POLL_NS`] while nothing comes, up to
/// `min(epoch / 64, MAX_POLL_NS)`, so an idle node leaves the cores to its
/// peers (docs/ARCHITECTURE.md: honest on small machines) while a busy one
/// looks again soon.
#[derive(Clone, Copy, Debug)]
pub struct Poll {
    next_ns: u64,
    max_ns: u64,
}

impl Poll {
    pub fn new(epoch_ns: u64) -> Poll {
        Poll {
            next_ns: POLL_NS,
            max_ns: (epoch_ns / 64).clamp(POLL_NS, MAX_POLL_NS),
        }
    }

    /// The next wait, ns.
    pub fn wait_ns(&mut self) -> u64 {
        let wait = self.next_ns;
        self.next_ns = (self.next_ns * 2).min(self.max_ns);
        wait
    }

    /// Work came: look again soon next time.
    pub fn reset(&mut self) {
        self.next_ns = POLL_NS;
    }
}

/// RPC handler kinds.
pub const RPC_BATCH: u16 = 0xca01;
pub const RPC_FORWARD: u16 = 0xca02;
pub const RPC_DONE: u16 = 0xca03;
pub const RPC_READ: u16 = 0xca04;
const _: () = crate::base::rpc_kind::CALVIN.check(&[RPC_BATCH, RPC_FORWARD, RPC_DONE, RPC_READ]);

/// Words of a request-buffer slot's header: `[tag, count, words,
/// sealed_ns, stop]`; `tag` is `epoch + 1` once the slot holds a complete
/// batch of that epoch, 0 while free; `stop` is 1 once the sequencer orders
/// no more requests (see [`CalvinEnv::final_epoch`]). The entries follow.
pub const CRB_HEADER_WORDS: u64 = 5;

/// Fixed words of a batch entry: `[txn id, origin << 32 | client slot,
/// position, accesses << 32 | request words, submitted_ns]`, then two
/// words per access, `[table << 32 | node << 1 | write, key]`, then the
/// request.
pub const ENTRY_FIXED_WORDS: usize = 5;

/// A record a node does not hold: its version in forwarded blocks.
pub const MISSING: u64 = u64::MAX;

/// Completion counter: participants report in the low 23 bits; an active
/// participant whose program aborted adds one of these too, each counted
/// in a 20-bit field of its own (one per node at most: no carry).
pub const DONE_COUNT_MASK: u64 = (1 << 23) - 1;
/// Set by a failover's recovery (`failover`): the transaction was given
/// up because a participant died before it committed; complete at once.
pub const DONE_FAILED: u64 = 1 << 23;
pub const DONE_USER_ABORT: u64 = 1 << 24;
pub const DONE_UNDECLARED: u64 = 1 << 44;
/// The field of one abort flag's count.
pub const DONE_FLAG_MASK: u64 = (1 << 20) - 1;

/// CALVIN's own stages, for the report (RCC §4.6's communication stages
/// split where the time goes).
/// `log` (the replication of a participant's writes) is last, and reported
/// only by replicated runs.
pub const STAGE_NAMES: [&str; 7] = [
    "sequence", "dispatch", "lock", "read", "forward", "execute", "log",
];
pub const ST_SEQUENCE: usize = 0;
pub const ST_DISPATCH: usize = 1;
pub const ST_LOCK: usize = 2;
pub const ST_READ: usize = 3;
pub const ST_FORWARD: usize = 4;
pub const ST_EXECUTE: usize = 5;
pub const ST_LOG: usize = 6;

/// One sequencer's sub-batch of an epoch, as the scheduler takes it: read
/// from the request buffer, or arrived by RPC and kept until then.
pub struct SubBatch {
    pub sealed_ns: u64,
    pub stop: bool,
    pub count: u64,
    pub entries: Vec<u64>,
}

/// Per-stage time sums of one worker, for the report.
#[derive(Clone, Copy, Debug, Default)]
pub struct CalvinStats {
    /// Sums of the participant-side stages, ns (index `ST_*`; sequence is
    /// summed at the origin over committed transactions).
    pub stage_ns: [u64; 7],
    /// Participant parts finished in the measured interval.
    pub parts: u64,
}

/// The state one node's sequencer, scheduler, executors and handlers
/// share (behind one mutex: on `threads` the workers of a node are
/// threads; on `sim` it is never contended).
#[derive(Default)]
pub struct NodeState {
    pub rpc_batches: HashMap<(NodeId, u64), SubBatch>,
    /// Forwarded record blocks by their transaction's place: the count of
    /// blocks and their words `[access, seq, record]`
    /// ([`Scheduled::forwarded`]).
    pub forwards: HashMap<Place, (u32, Vec<u64>)>,
    pub locks: LockTable,
    /// Transactions scheduled and not finished; `None` while an executor
    /// holds one (its index stays reserved for the lock queues).
    pub txns: Vec<Option<Scheduled>>,
    pub free: Vec<usize>,
    pub ready: VecDeque<usize>,
    /// Active transactions waiting for forwarded records.
    pub parked: Vec<usize>,
    /// Unfinished transactions of each epoch in the ring.
    pub epoch_left: [u64; RING as usize],
    /// Epochs `0..scheduled_below` are scheduled here.
    pub scheduled_below: u64,
    /// Epochs `0..done_below` have every transaction finished here.
    pub done_below: u64,
    /// The last epoch of the run, once the scheduler saw every sequencer
    /// stop in it.
    pub last_epoch: Option<u64>,
    /// With failure handling only: what this node's active parts computed
    /// for the transactions of the last epochs (`failover::Retained`).
    pub retained: VecDeque<failover::Retained>,
    /// With failure handling only: per client slot of this node, its
    /// transaction in flight (`failover::InFlight`).
    pub in_flight: Vec<failover::InFlight>,
}

/// One node's CALVIN machinery.
pub struct NodeShared {
    pub node: NodeId,
    pub state: Mutex<NodeState>,
}

impl NodeShared {
    pub fn new(node: NodeId) -> NodeShared {
        NodeShared {
            node,
            state: Mutex::new(NodeState::default()),
        }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, NodeState> {
        // A poisoned lock means a worker thread panicked: the run is lost.
        self.state.lock().expect("a CALVIN worker panicked")
    }
}

impl NodeState {
    /// Drops the local lock requests of `txn`, slab entry `index` on `node`
    /// — released when its part finished, withdrawn (granted or not) when
    /// a failover gave it up — and readies the parts they granted, ready
    /// since `now_ns` (`None`: unknown, left as it was).
    pub fn drop_locks(
        &mut self,
        node: NodeId,
        index: usize,
        txn: &scheduler::Scheduled,
        withdraw: bool,
        now_ns: Option<u64>,
    ) {
        let mut granted = Vec::new();
        for (access, &home) in txn.accesses.iter().zip(&txn.homes) {
            if home != node {
                continue;
            }
            if withdraw {
                self.locks
                    .withdraw(access.table, access.key, index, &mut granted);
            } else {
                self.locks
                    .release(access.table, access.key, index, &mut granted);
            }
        }
        for other in granted {
            let waiting = self.txns[other].as_mut().expect("a waiting transaction");
            debug_assert!(waiting.locks_pending > 0);
            waiting.locks_pending -= 1;
            if waiting.locks_pending == 0 {
                if let Some(now_ns) = now_ns {
                    waiting.ready_ns = now_ns;
                }
                self.ready.push_back(other);
            }
        }
    }

    /// Retires `txn`, slab entry `index`, whose part here finished or was
    /// given up: one less unfinished transaction in its epoch, and the
    /// entry free again.
    pub fn retire(&mut self, index: usize, txn: &scheduler::Scheduled) {
        let left = &mut self.epoch_left[(txn.place.epoch % RING) as usize];
        debug_assert!(*left > 0);
        *left -= 1;
        self.free.push(index);
    }

    /// Marks epochs finished while the lowest unfinished one is scheduled
    /// and empty; frees their request-buffer slots (`store`'s region).
    pub fn advance(&mut self, store: &NodeStore, calvin: &CalvinLayout) {
        while self.done_below < self.scheduled_below
            && self.epoch_left[(self.done_below % RING) as usize] == 0
        {
            for sender in 0..calvin.nodes as NodeId {
                store
                    .region
                    .store(calvin.crb_addr(sender, self.done_below), 0);
            }
            self.done_below += 1;
        }
    }
}

/// Everything the CALVIN coroutines of one worker share.
pub struct CalvinEnv<'a, W: Workload> {
    pub worker: &'a Worker,
    pub shared: &'a NodeShared,
    pub store: &'a NodeStore,
    pub layout: &'a StoreLayout,
    pub calvin: &'a CalvinLayout,
    pub workload: &'a W,
    pub plan: StagePlan,
    pub cache: &'a RefCell<LocationCache>,
    pub stats: &'a RefCell<WorkerStats>,
    pub calvin_stats: &'a RefCell<CalvinStats>,
    /// This worker's side of the log to its partitions' backups
    /// ([`LogWriter::for_served`]); `None` without replication.
    pub log: Option<&'a LogWriter>,
    /// The run's CALVIN failover (`--fault` with `--replication 2|3`):
    /// the pause points, what parts retain, the routing generation.
    pub failover: Option<&'a failover::CalvinFailover>,
    pub history: Option<&'a RefCell<History>>,
    pub seed: u64,
    /// The run's start, warm-up end and measured interval's end.
    pub(crate) clock: RunClock,
    /// When the first injected fault strikes, fabric ns (`u64::MAX`: none).
    pub fault_at_ns: u64,
    pub epoch_ns: u64,
    /// The lockstep clients (`calvin_inflight = 0`, see the module docs):
    /// an epoch is sealed only once every transaction of the one before
    /// completed, and every slot submits into each epoch.
    pub lockstep: bool,
    /// The last epoch a sequencer orders requests in: the one in which
    /// `end_ns` falls — or, when epochs stretched (their transactions ran
    /// longer than an epoch) and the clock passed `stop_ns`, the one it is
    /// sealing then. Later epochs carry the `stop` flag and no requests,
    /// and go out until every sequencer has stopped: the run's last epoch
    /// is the first whose sub-batches all carry it. On `sim`, and whenever
    /// epochs keep pace, every sequencer stops at `final_epoch`, so what is
    /// sequenced depends on the configuration alone. With requests in
    /// flight (not `lockstep`) a sequencer also stops at its first seal at
    /// or past `end_ns`.
    pub final_epoch: u64,
    /// See `final_epoch`: `end_ns` plus the run's length again (at least
    /// 1 s), so a run with epochs too short for its transactions ends in
    /// at most about twice its time.
    pub stop_ns: u64,
}

impl<W: Workload> CalvinEnv<'_, W> {
    /// Set-up of coroutine `co`: with failure handling, its rounds go out
    /// even while a failover pauses the cluster (to live peers only): a
    /// sequenced transaction has no abort to fall back on, so every part
    /// under way finishes and only then parks (`failover`).
    pub fn enter(&self, co: u16) {
        if self.failover.is_some() {
            self.worker.set_committing(co, true);
        }
    }

    /// Parks coroutine `co` while a failover pauses the cluster (see
    /// `failover`); returns at once otherwise.
    pub async fn park_if_paused(&self, co: u16) {
        if let Some(failover) = crate::recovery::failover_of(self.worker) {
            if failover.paused() {
                failover.park(self.worker, co, self.stop_ns).await;
            }
        }
    }

    /// Sends the passive calls in `co`'s batch; with failure handling
    /// returns only once they landed (`failover`).
    pub async fn submit_passive(&self, co: u16) {
        self.worker.submit_passive(co);
        if self.failover.is_some() {
            self.worker.drain(co).await;
        }
    }

    /// The node serving `partition` now.
    #[inline]
    pub fn serving(&self, partition: NodeId) -> NodeId {
        self.worker.serving(partition)
    }

    /// Whether `node` was declared failed (never, without failure handling).
    #[inline]
    pub fn is_failed(&self, node: NodeId) -> bool {
        crate::recovery::failover_of(self.worker).is_some_and(|f| f.is_failed(node))
    }

    pub fn measured(&self, at_ns: u64) -> bool {
        at_ns >= self.clock.warmup_end_ns && at_ns < self.clock.end_ns
    }

    pub fn nodes(&self) -> u32 {
        self.calvin.nodes
    }

    /// Snapshots the worker's counters at the edges of the measured
    /// interval (as `engine::coroutine` does).
    pub fn note_boundaries(&self, now_ns: u64) {
        self.stats.borrow_mut().note_boundaries(
            self.worker,
            now_ns,
            self.clock.warmup_end_ns,
            self.clock.end_ns,
        );
    }
}

/// Reads the committed version of `(table, key)` from `store` into
/// `record` without a lock, retrying until `seq` and `seq_end` agree
/// around it (the store's rule for a whole version); returns `seq`, or
/// [`MISSING`] when the key is not there.
pub fn read_consistent(store: &NodeStore, table: TableId, key: u64, record: &mut [u64]) -> u64 {
    let Some(slot) = store.lookup(table, key) else {
        return MISSING;
    };
    let layout = store.layout.table(table);
    let tuple = layout.tuple_addr(slot);
    loop {
        let seq = store.region.load(layout.seq_addr(slot));
        store.region.read(layout.record_addr(slot), record);
        if store.region.load(tuple + layout.seq_end_offset() as u64) == seq {
            return seq;
        }
        std::hint::spin_loop();
    }
}

/// Client slots per node: `workers × calvin_inflight`, or with the
/// lockstep clients (`calvin_inflight = 0`) one per executor coroutine.
pub fn client_slots(config: &Config) -> u32 {
    match config.protocol_options.calvin_inflight {
        0 => config.workers * config.coroutines,
        inflight => config.workers * inflight,
    }
}

/// The last epoch of a run whose clients submit during
/// `[start_ns, end_ns)`.
pub fn final_epoch(start_ns: u64, end_ns: u64, epoch_ns: u64) -> u64 {
    debug_assert!(epoch_ns > 0 && end_ns > start_ns);
    (end_ns - start_ns).div_ceil(epoch_ns) - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_back_off_to_a_cap_that_follows_the_epoch() {
        let mut poll = Poll::new(5_000_000);
        let waits: Vec<u64> = (0..8).map(|_| poll.wait_ns()).collect();
        assert_eq!(waits[0], POLL_NS);
        assert!(waits.windows(2).all(|w| w[1] >= w[0]));
        assert_eq!(*waits.last().unwrap(), MAX_POLL_NS);
        poll.reset();
        assert_eq!(poll.wait_ns(), POLL_NS);
        let mut short = Poll::new(100_000);
        for _ in 0..10 {
            assert!(short.wait_ns() <= POLL_NS.max(100_000 / 64));
        }
    }

    #[test]
    fn final_epoch_is_the_one_holding_the_end() {
        assert_eq!(final_epoch(0, 10, 5), 1);
        assert_eq!(final_epoch(0, 11, 5), 2);
        assert_eq!(final_epoch(100, 101, 5), 0);
    }
}
