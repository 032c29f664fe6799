//! In-run failover (issue 8 item 3): when the failure detector declares a
//! node dead in a replicated run, the survivors stop starting transactions,
//! finish the ones past their commit point, and once the cluster is quiet
//! the survivors recover — every log record the dead coordinator left
//! that every backup got is rolled forward onto every live copy of the
//! partitions it names (one that reached some backups only, or a partial
//! one, is discarded), every ring is drained into its backup copy, the
//! live copies of each partition are brought to the newest version among
//! them, each of the dead node's partitions is promoted to
//! its first live backup (`Placement::primary_given`), and every live
//! copy's protocol headers are reset to the loaded state, which releases the
//! locks, leases, reader lists and versions the dead coordinator held.
//! Then the clients of the survivors resume, and the programs' accesses to
//! the failed partitions go to the promoted copies ([`Failover::serving`]).
//!
//! The model is FaRM's reconfiguration (DrTM+H §5.4 names FaRM's recovery
//! and leaves it unimplemented; RCC §6.1 runs 3-way replication without
//! failures): detection by leases (here the heartbeat detector of `recovery::detector`),
//! a pause while the configuration changes, recovery from the backups' logs.
//! The pause is what lets one generic step serve every protocol: with no
//! transaction in flight, a tuple's header holds nothing a later
//! transaction needs, so resetting it to the state the loader leaves (all
//! words 0) is safe — every transaction that ends before the pause precedes,
//! in real time and in every conflict, every transaction that starts after
//! it, so the whole history is serializable iff both halves are.
//!
//! The commit point of a replicated run is the post of its log records
//! (`engine::coroutine`): from then on the transaction is committed (the
//! history records it there), its log round ignores backups that died
//! (their copies are gone), and its commit stage's writes to a dead primary
//! are superseded by the promoted backup, which holds them through the log.
//! A committing attempt that finds a latch the failed coordinator held
//! (MAAT's commit latches each tuple) takes it over rather than wait for
//! the recovery, which waits for the attempt (`protocols::maat`).
//! A coordinator's records to all its backups leave in one round, so a
//! coordinator that dies after its commit point has its records on every
//! live backup; one that dies before posted nothing.
//!
//! Where it runs: everywhere the steps are the failover sequencer's
//! (`recovery::sequencer`: quiet → recover locally → decide the doubts →
//! exchange and install the newest versions → reset → resume), each node
//! a party over its own memory. On `sim` and `threads`, whose nodes share
//! one address space, one `Failover` serves the whole cluster
//! ([`Failover::new`]): it pauses and parks every node's coroutines, and
//! the last to park runs every survivor's party over an in-process
//! channel (`recovery::loopback`; on `sim` the recovery takes virtual
//! time for the tuples it visits, charged to that worker). On `ucx` each
//! process has its own ([`Failover::for_node`]): the pause and the parking
//! are the same, and the party's messages are carried by
//! `cluster::failover`.
//!
//! Invariants: a partition is served by exactly one node at a time, which
//! holds an up-to-date copy of it before serving it; no transaction is
//! before its commit point while a recovery runs (`Failover::recover` only
//! runs with every live coroutine parked, and a parked coroutine has
//! nothing outstanding); background apply never runs during a recovery
//! (`Replication::apply_gate`); a node declared failed never runs a
//! coroutine again (fenced), even a paused one that comes back.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use std::sync::{Arc, Mutex, OnceLock};

use super::FailureHook;
use crate::fabric::{CpuOp, NodeId};
use crate::runtime::{ClusterState, Worker};
use crate::store::{NodeStore, TableLayout};

use super::steps as recovery;
use crate::replication::Replication;

/// A protocol's `Protocol::recovered_header`.
type RecoveredHeader = fn(&TableLayout, &mut [u64]);

/// A protocol's own recovery steps around the generic ones (CALVIN's
/// resolution of its sequenced transactions, `engine::calvin::failover`),
/// run by [`Failover`]'s recovery on `sim` and `threads` — before and after
/// the sequencer's parties — with every live coroutine parked or stepped
/// out and the background apply gated.
pub trait RecoveryHook: Send + Sync {
    /// Before the failed coordinators' log records are rolled forward and
    /// the rings drained (they are still there to be read).
    fn before(&self, failed: &[NodeId]);
    /// After every live copy is up to date and the failed partitions are
    /// routed to their promoted copies, before the survivors resume.
    /// Returns the transactions it resolved: `(finished, given up)`.
    fn after(&self, failed: &[NodeId]) -> (u64, u64);
}

/// What the failovers of a run did, for the report's `recovery`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FailoverReport {
    /// Failovers completed (one per group of failures recovered together).
    pub recoveries: u32,
    /// From the first declaration of a failure to the survivors resuming,
    /// ns, summed over the recoveries (a single crash: its recovery time).
    pub recovery_ns: u64,
    /// `(partition, node now serving it)`.
    pub promoted: Vec<(NodeId, NodeId)>,
    /// What the recoveries did to the data (a version rolled forward is
    /// one a live copy took from a newer copy of its partition or from a
    /// redo write: committed writes a dead coordinator had not installed
    /// everywhere).
    pub counts: recovery::RecoveryCounts,
    /// Declarations not acted on: the node holds a partition's last live
    /// copy (see [`Failover::fail`]).
    pub suspicions_ignored: u64,
    /// CALVIN: sequenced transactions a failed node had a part in that the
    /// recovery finished, and that it gave up (resubmitted by their
    /// clients) (`engine::calvin::failover`).
    pub sequenced_finished_count: u64,
    pub sequenced_given_up_count: u64,
}

/// A replicated run's failover state, shared by every worker of every node
/// (one per run, passed explicitly; see the module doc).
pub struct Failover {
    replication: Arc<Replication>,
    stores: Vec<Arc<NodeStore>>,
    /// Per node: declared failed by some survivor.
    failed: Box<[AtomicBool]>,
    /// Per node: whether its partitions and logs were recovered.
    recovered: Box<[AtomicBool]>,
    /// A failure is declared and not yet recovered.
    paused: AtomicBool,
    /// When the current pause began (fabric clock, ns).
    paused_at_ns: AtomicU64,
    /// When the last recovery's work ended on the worker that ran it
    /// (fabric clock, ns): no parked coroutine resumes before it.
    resume_at_ns: AtomicU64,
    /// Per node: coroutines neither parked nor finished.
    active: Box<[AtomicU32]>,
    /// Taken by the one worker that runs a recovery.
    recovering: AtomicBool,
    /// How often a parked coroutine looks again, ns.
    poll_ns: u64,
    /// The protocol's `Protocol::recovered_header`.
    recovered_header: fn(&TableLayout, &mut [u64]),
    report: Mutex<FailoverReport>,
    /// `Some(node)`: this failover is one process's (`for_node`; `stores`
    /// holds that node's store only) and the cluster driver recovers.
    local: Option<NodeId>,
    /// The protocol's own recovery steps, if it has any.
    hook: OnceLock<Arc<dyn RecoveryHook>>,
    /// Whether the per-process steps take the replication's apply gate
    /// themselves: not a party of an in-process recovery, whose driver
    /// holds it throughout ([`Failover::party_in_process`]).
    takes_apply_gate: bool,
}

impl Failover {
    /// The failover of a run over `stores` (every node's, in node order)
    /// whose nodes run `coroutines_per_node` coroutines each.
    pub fn new(
        replication: Arc<Replication>,
        stores: Vec<Arc<NodeStore>>,
        coroutines_per_node: u32,
        poll_ns: u64,
        recovered_header: fn(&TableLayout, &mut [u64]),
    ) -> Failover {
        debug_assert_eq!(stores.len() as u32, replication.placement.nodes);
        let settings = (coroutines_per_node, poll_ns, recovered_header);
        Failover::build(replication, stores, settings, None)
    }

    fn build(
        replication: Arc<Replication>,
        stores: Vec<Arc<NodeStore>>,
        (coroutines_per_node, poll_ns, recovered_header): (u32, u64, RecoveredHeader),
        local: Option<NodeId>,
    ) -> Failover {
        let nodes = replication.placement.nodes as usize;
        Failover {
            replication,
            stores,
            failed: (0..nodes).map(|_| AtomicBool::new(false)).collect(),
            recovered: (0..nodes).map(|_| AtomicBool::new(false)).collect(),
            paused: AtomicBool::new(false),
            paused_at_ns: AtomicU64::new(0),
            resume_at_ns: AtomicU64::new(0),
            active: (0..nodes)
                .map(|_| AtomicU32::new(coroutines_per_node))
                .collect(),
            recovering: AtomicBool::new(false),
            poll_ns: poll_ns.max(1),
            recovered_header,
            report: Mutex::new(FailoverReport::default()),
            local,
            hook: OnceLock::new(),
            takes_apply_gate: true,
        }
    }

    /// Node `store`'s party in a recovery of a run whose nodes share one
    /// address space (`recovery::loopback`): [`Failover::for_node`] with
    /// no coroutine of its own to wait for, whose steps run under the
    /// apply gate the recovering worker already holds.
    pub fn party_in_process(
        replication: Arc<Replication>,
        store: Arc<NodeStore>,
        recovered_header: RecoveredHeader,
    ) -> Failover {
        let mut party = Failover::for_node(replication, store, 0, 1, recovered_header);
        party.takes_apply_gate = false;
        party
    }

    /// The replication's apply gate, held while a step changes this
    /// node's copies (background apply must not run meanwhile); `None`
    /// where the caller holds it.
    fn apply_gate(&self) -> Option<std::sync::RwLockWriteGuard<'_, ()>> {
        self.takes_apply_gate.then(|| {
            self.replication
                .apply_gate
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        })
    }

    /// Adds the protocol's own recovery steps (once, before the run).
    pub fn set_hook(&self, hook: Arc<dyn RecoveryHook>) {
        let set = self.hook.set(hook);
        debug_assert!(set.is_ok(), "a failover's hook is set once");
    }

    /// A coroutine of `node` stops counting as active while it waits on
    /// something the recovery must not wait for (CALVIN's sequencer while
    /// it delivers an epoch whose receivers may be parked): the recovery
    /// may run meanwhile. Pair with [`Failover::step_in`].
    pub fn step_out(&self, node: NodeId, now_ns: u64) {
        self.active[node as usize].fetch_sub(1, Ordering::AcqRel);
        self.try_recover(None, now_ns);
    }

    /// Counts a coroutine that stepped out as active again.
    pub fn step_in(&self, node: NodeId) {
        self.active[node as usize].fetch_add(1, Ordering::AcqRel);
    }

    /// The failover of one process of a multi-process run (`ucx`): it
    /// hosts `store`'s node of a `nodes`-node cluster (from the placement);
    /// the recovery steps are run by the cluster driver through
    /// [`Failover::recover_locally`] and the methods after it.
    pub fn for_node(
        replication: Arc<Replication>,
        store: Arc<NodeStore>,
        coroutines_per_node: u32,
        poll_ns: u64,
        recovered_header: RecoveredHeader,
    ) -> Failover {
        let node = store.node;
        let settings = (coroutines_per_node, poll_ns, recovered_header);
        Failover::build(replication, vec![store], settings, Some(node))
    }

    /// The one store of a per-process failover.
    fn local_store(&self) -> &Arc<NodeStore> {
        debug_assert!(self.local.is_some());
        &self.stores[0]
    }

    /// Per process: paused, and every coroutine of this node parked or
    /// finished (nothing of its own before its commit point, nothing of its
    /// own outstanding).
    pub fn quiet_locally(&self) -> bool {
        let node = self.local.expect("a per-process failover") as usize;
        self.paused() && self.active[node].load(Ordering::Acquire) == 0
    }

    /// Per process, once every survivor is quiet: rolls the failed
    /// coordinators' decided records in this node's rings forward onto its
    /// copies, drains its other rings, and reports the undecided ones
    /// (`recovery::recover_local`).
    pub fn recover_locally(&self) -> (recovery::RecoveryOutcome, recovery::Doubts) {
        let _gate = self.apply_gate();
        recovery::recover_local(&self.replication, self.local_store(), &self.failed_nodes())
    }

    /// Per process, once the cluster decided the doubts: applies the
    /// failed coordinators' remaining records whose transaction is in
    /// `committed` (sorted), drops the others, installs the redo writes
    /// (`recovery::resolve_local`).
    pub fn resolve_locally(&self, committed: &[u64]) -> recovery::RecoveryOutcome {
        let _gate = self.apply_gate();
        recovery::resolve_local(
            &self.replication,
            self.local_store(),
            &self.failed_nodes(),
            committed,
        )
    }

    /// Per process, after [`Failover::recover_locally`] everywhere: this
    /// node's versions of the partitions it shares with another survivor
    /// (`recovery::sync_digest`).
    pub fn sync_digest(&self) -> Vec<u64> {
        recovery::sync_digest(&self.replication, self.local_store(), &self.failed_nodes())
    }

    /// Per process, the cheap first round of [`Failover::sync_digest`]:
    /// a sum per bucket of each shared copy's versions
    /// (`recovery::sync_summary`).
    pub fn sync_summary(&self) -> Vec<u64> {
        recovery::sync_summary(&self.replication, self.local_store(), &self.failed_nodes())
    }

    /// Per process, the second round: [`Failover::sync_digest`] of the
    /// `[partition, table, bucket]` words `buckets` (sorted) names.
    pub fn sync_digest_of(&self, buckets: &[u64]) -> Vec<u64> {
        let wanted: std::collections::HashSet<(NodeId, u32, u64)> = buckets
            .chunks_exact(3)
            .map(|b| (b[0] as NodeId, b[1] as u32, b[2]))
            .collect();
        recovery::sync_digest_where(
            &self.replication,
            self.local_store(),
            &self.failed_nodes(),
            &|partition, table, bucket| wanted.contains(&(partition, table, bucket)),
        )
    }

    /// Per process: installs the versions the merge of every survivor's
    /// digest found this node lacking. Returns how many.
    pub fn install_sync(&self, entries: &[u64]) -> Result<u64, String> {
        let _gate = self.apply_gate();
        recovery::install_sync(&self.replication, self.local_store(), entries)
    }

    /// Per process, the last step before resuming: resets this node's
    /// protocol headers (releasing what the dead coordinators held) and
    /// routes each failed partition to its promoted copy. Returns the
    /// headers reset and the promotions.
    pub fn reset_locally(&self) -> (u64, Vec<(NodeId, NodeId)>) {
        let failed = self.failed_nodes();
        let headers_reset = self.local_store().reset_headers(self.recovered_header);
        let placement = self.replication.placement;
        let mut promoted = Vec::new();
        for &partition in &failed {
            if let Some(node) = placement.primary_given(partition, |n| !failed.contains(&n)) {
                self.replication.serving[partition as usize].store(node as u32, Ordering::Release);
                promoted.push((partition, node));
            }
        }
        (headers_reset, promoted)
    }

    /// Per process, once every survivor has reset: the clients resume.
    /// `cluster`: what the whole recovery did (rank 0 reports it; others
    /// may pass their own part).
    pub fn resume(&self, recovery_ns: u64, cluster: &FailoverReport) {
        self.record(Some(recovery_ns), &cluster.promoted, &cluster.counts);
        self.paused.store(false, Ordering::Release);
    }

    /// Counts a declaration the cluster did not act on.
    pub fn ignore_suspicion(&self) {
        self.report
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .suspicions_ignored += 1;
    }

    /// Where every partition's copies live.
    pub fn placement(&self) -> crate::replication::Placement {
        self.replication.placement
    }

    /// The node that serves `partition` now.
    #[inline]
    pub fn serving(&self, partition: NodeId) -> NodeId {
        self.replication.serving(partition)
    }

    /// Whether `node` was declared failed (it is then fenced).
    #[inline]
    pub fn is_failed(&self, node: NodeId) -> bool {
        self.failed[node as usize].load(Ordering::Acquire)
    }

    /// Whether the survivors are paused for a recovery.
    #[inline]
    pub fn paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }

    /// Declares `node` failed at `at_ns` (the first survivor to detect it):
    /// the survivors pause until it is recovered. Returns whether `node` is
    /// failed (now or already). A node whose loss would leave a partition
    /// without a live copy is not failed over (it can only be a false
    /// suspicion, or a failure beyond what the replication factor
    /// tolerates): fencing it would lose committed data, so it stays in
    /// the configuration and a member for every survivor — the one that
    /// suspected it included, whose log rounds must still reach the
    /// backups it holds — and the report counts the suspicion.
    pub fn fail(&self, node: NodeId, at_ns: u64) -> bool {
        if self.is_failed(node) {
            return true;
        }
        let placement = self.replication.placement;
        let last_copy = (0..placement.nodes as NodeId).any(|partition| {
            placement
                .primary_given(partition, |n| n != node && !self.is_failed(n))
                .is_none()
        });
        if last_copy {
            let mut report = self.report.lock().unwrap_or_else(|p| p.into_inner());
            report.suspicions_ignored += 1;
            return false;
        }
        if self.failed[node as usize].swap(true, Ordering::AcqRel) {
            return true;
        }
        if !self.paused.swap(true, Ordering::AcqRel) {
            self.paused_at_ns.store(at_ns, Ordering::Release);
        }
        true
    }

    /// Whether a parked coroutine may go on: no recovery is pending, and
    /// the last one's work is over at `now_ns` (each worker's own clock:
    /// on `sim` they differ within a window). The clock is read only in a
    /// run that has recovered, so the check at every attempt's start reads
    /// none otherwise.
    fn resumed(&self, now_ns: impl FnOnce() -> u64) -> bool {
        if self.paused() {
            return false;
        }
        let resume_at_ns = self.resume_at_ns.load(Ordering::Acquire);
        resume_at_ns == 0 || now_ns() >= resume_at_ns
    }

    /// Parks coroutine `co` of `worker` while a recovery is pending, after
    /// its passive operations are acknowledged; the last coroutine to park
    /// runs the recovery. Returns at once when not paused; returns early
    /// (still paused) once the worker's clock reaches `end_ns`.
    pub async fn park(&self, worker: &Worker, co: u16, end_ns: u64) {
        let now_ns = || worker.now_ns();
        if self.resumed(now_ns) {
            return;
        }
        worker.drain(co).await;
        let node = worker.node as usize;
        self.active[node].fetch_sub(1, Ordering::AcqRel);
        while !self.resumed(now_ns) && worker.now_ns() < end_ns {
            self.try_recover(Some(worker), worker.now_ns());
            if self.resumed(now_ns) {
                break;
            }
            worker.sleep(co, self.poll_ns).await;
        }
        self.active[node].fetch_add(1, Ordering::AcqRel);
    }

    /// A coroutine of `node` has finished for good.
    pub fn finished(&self, node: NodeId) {
        self.active[node as usize].fetch_sub(1, Ordering::AcqRel);
        self.try_recover(None, u64::MAX);
    }

    /// Runs the pending recovery if every live coroutine is parked or
    /// finished, on `worker` when a parked coroutine runs it. `now_ns`: the
    /// fabric clock (`u64::MAX`: unknown, the run's end).
    fn try_recover(&self, worker: Option<&Worker>, now_ns: u64) {
        if !self.paused() || self.local.is_some() {
            return;
        }
        let quiet = (0..self.active.len())
            .all(|n| self.is_failed(n as NodeId) || self.active[n].load(Ordering::Acquire) == 0);
        if !quiet || self.recovering.swap(true, Ordering::AcqRel) {
            return;
        }
        self.recover(worker, now_ns);
        self.recovering.store(false, Ordering::Release);
    }

    /// After the run (every worker stopped): a recovery still pending runs
    /// now, so the final state has every failed partition on its promoted
    /// copy.
    pub fn finish(&self) {
        if self.paused() && self.local.is_none() {
            self.recover(None, u64::MAX);
        }
    }

    /// The recovery, on `worker` (charged for its work: on `sim` its clock
    /// and heartbeat stop meanwhile, as a real worker's do) or, at the
    /// run's end, on no worker: the failover sequencer with every survivor
    /// a party over its own memory (`recovery::loopback`), between the
    /// protocol's own steps.
    fn recover(&self, worker: Option<&Worker>, now_ns: u64) {
        let _gate = self
            .replication
            .apply_gate
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let failed = self.failed_nodes();
        let hook = self.hook.get();
        if let Some(hook) = hook {
            hook.before(&failed);
        }
        let recovered = super::loopback::recover_in_process(
            &self.replication,
            &self.stores,
            &failed,
            self.recovered_header,
        )
        .unwrap_or_else(|why| panic!("the in-process recovery failed: {why}"));
        let end_ns = match worker {
            Some(worker) => {
                // The work that grows with the data: every shared copy's
                // tuples summarized, every live header reset.
                let placement = &self.replication.placement;
                let tuples = recovery::shared_copy_rows(placement, &self.stores, &failed)
                    + recovered.counts.headers_reset;
                worker.charge(CpuOp::RecoveryTuple, tuples.min(u32::MAX as u64) as u32);
                worker.now_ns()
            }
            None => now_ns,
        };
        let recovery_ns = (end_ns != u64::MAX).then(|| {
            self.resume_at_ns.fetch_max(end_ns, Ordering::AcqRel);
            end_ns.saturating_sub(self.paused_at_ns.load(Ordering::Acquire))
        });
        self.record(recovery_ns, &recovered.promoted, &recovered.counts);
        if let Some(hook) = hook {
            let (finished, given_up) = hook.after(&failed);
            let mut report = self.report.lock().unwrap_or_else(|p| p.into_inner());
            report.sequenced_finished_count += finished;
            report.sequenced_given_up_count += given_up;
        }
        self.paused.store(false, Ordering::Release);
    }

    /// Adds one recovery to the report: `recovery_ns` long (`None`: it ran
    /// after the run, untimed), promoting `promoted`, doing `counts`.
    fn record(
        &self,
        recovery_ns: Option<u64>,
        promoted: &[(NodeId, NodeId)],
        counts: &recovery::RecoveryCounts,
    ) {
        let mut report = self.report.lock().unwrap_or_else(|p| p.into_inner());
        for &(partition, node) in promoted {
            if !self.recovered[partition as usize].swap(true, Ordering::AcqRel) {
                report.promoted.push((partition, node));
            }
        }
        report.recoveries += 1;
        report.recovery_ns += recovery_ns.unwrap_or(0);
        report.counts.add(counts);
    }

    /// What the recoveries did.
    pub fn report(&self) -> FailoverReport {
        self.report
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The nodes declared failed.
    pub fn failed_nodes(&self) -> Vec<NodeId> {
        (0..self.failed.len() as NodeId)
            .filter(|&n| self.is_failed(n))
            .collect()
    }
}

impl ClusterState for Failover {
    #[inline]
    fn serving(&self, partition: NodeId) -> NodeId {
        Failover::serving(self, partition)
    }

    #[inline]
    fn is_failed(&self, node: NodeId) -> bool {
        Failover::is_failed(self, node)
    }

    #[inline]
    fn paused(&self) -> bool {
        Failover::paused(self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The run's failover `worker` takes part in, when it was given one
/// (`Worker::with_failover`): the runtime keeps it as a [`ClusterState`]
/// only, and the layers that run the recovery's steps (parking, finishing)
/// need the whole of it.
#[inline]
pub fn failover_of(worker: &Worker) -> Option<&Failover> {
    worker.cluster_state()?.as_any().downcast_ref::<Failover>()
}

impl FailureHook for Failover {
    fn on_suspected(&self, _observer: NodeId, suspect: NodeId, detected_at_ns: u64) -> bool {
        self.fail(suspect, detected_at_ns)
    }

    fn may_suspect(&self, peer: NodeId, now_ns: u64) -> bool {
        self.is_failed(peer) || self.resumed(|| now_ns)
    }
}
