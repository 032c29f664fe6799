//! Recovery (layer 8 of the crate's map): what happens once a node stops.
//! How the surviving nodes find out ([`detector`]: heartbeats read with
//! one-sided READs, the lease scheme of DrTM §4.5 and FaRM), what each
//! node then believes ([`Membership`]), whom the engine tells
//! ([`FailureHook`]), the failover state machine of a replicated run
//! ([`failover`]: declare, pause, recover, resume) and its steps
//! ([`steps`]: roll the logs forward, promote, reset headers,
//! re-replicate), the one sequencer that runs those steps across parties
//! that each reach only their own memory, on every fabric ([`sequencer`]:
//! the phases, each party's part and the decider's, over any
//! [`sequencer::ControlChannel`]; [`loopback`] is its channel in one
//! process, which `sim` and `threads` recover over, and `cluster::failover`
//! its transport between `ucx` ranks), the one
//! crash injector every fabric uses
//! ([`CrashInjector`]: the schedule, and the backend's way to stop a
//! node), the injected faults' bookkeeping ([`FaultRun`]) and what the
//! report says ([`RecoveryReport`]). What a run is told to break is
//! configuration (`config::faults`); the runtime sees all of this only
//! through the narrow views of `runtime::liveness`, which this module
//! implements.
//!
//! The contract a failed peer gives everyone above the fabric (see also
//! `runtime`): until a node's detector declares a peer dead, a verb or RPC
//! that did not reach it simply has not completed (as on a real network,
//! where a lost packet looks like a slow one); from the moment it is
//! declared dead, every such operation still outstanding, and every later
//! one, completes with an error. The coroutine's `submit` returns
//! `Err(AbortReason::PeerFailed)`, the transaction aborts, releases what it
//! holds on the survivors, and the coroutine moves on to its next request
//! (with replication 1 the dead node's partition is gone, so retrying the
//! same request could never succeed).
//!
//! Invariants: a node is declared dead at most once per observer, and only
//! ever after it really stopped or stopped answering for the configured
//! timeout (a paused node is indistinguishable from a dead one, exactly as
//! with FaRM's leases); `Membership::epoch` counts the declarations and
//! only grows; `is_alive` of a node never returns to `true`.

pub mod detector;
pub mod failover;
pub mod injector;
pub mod loopback;
pub mod sequencer;
pub mod steps;
#[cfg(feature = "ucx")]
pub mod verdicts;

pub use failover::{failover_of, Failover, FailoverReport, RecoveryHook};
pub use injector::CrashInjector;
#[cfg(feature = "ucx")]
pub use verdicts::RankVerdicts;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use serde::Serialize;

use crate::check::History;
use crate::config::faults::{DetectorSettings, RunFault};
use crate::config::Config;
use crate::fabric::NodeId;
use crate::runtime::{Liveness, Monitor, Worker};
use crate::stats::FaultCommits;
use crate::store::{NodeStore, KEY_WORD};

/// What one node believes about the cluster: which peers are alive, when
/// it declared each dead, and how many declarations it has made (the
/// epoch). Shared by the node's workers (interior mutability, lock-free);
/// the node's detector writes it, everything else reads it.
#[derive(Debug)]
pub struct Membership {
    node: NodeId,
    alive: Box<[AtomicBool]>,
    detected_at_ns: Box<[AtomicU64]>,
    epoch: AtomicU64,
}

impl Liveness for Membership {
    #[inline]
    fn is_alive(&self, node: NodeId) -> bool {
        Membership::is_alive(self, node)
    }

    #[inline]
    fn epoch(&self) -> u64 {
        Membership::epoch(self)
    }
}

impl Membership {
    /// Every node of `nodes` alive, as `node` sees them.
    pub fn new(node: NodeId, nodes: u32) -> Membership {
        Membership {
            node,
            alive: (0..nodes).map(|_| AtomicBool::new(true)).collect(),
            detected_at_ns: (0..nodes).map(|_| AtomicU64::new(u64::MAX)).collect(),
            epoch: AtomicU64::new(0),
        }
    }

    /// The node whose view this is.
    pub fn node(&self) -> NodeId {
        self.node
    }

    #[inline]
    pub fn is_alive(&self, node: NodeId) -> bool {
        self.alive[node as usize].load(Ordering::Acquire)
    }

    /// Declarations so far (0: everyone alive).
    #[inline]
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The peers declared dead, with when (the fabric's clock, ns).
    pub fn failed_nodes(&self) -> Vec<(NodeId, u64)> {
        (0..self.alive.len())
            .filter(|&n| !self.alive[n].load(Ordering::Acquire))
            .map(|n| (n as NodeId, self.detected_at_ns[n].load(Ordering::Acquire)))
            .collect()
    }

    /// Declares `node` dead at `at_ns`; true the first time only.
    pub fn declare_dead(&self, node: NodeId, at_ns: u64) -> bool {
        debug_assert_ne!(node, self.node, "a node does not declare itself dead");
        if !self.alive[node as usize].swap(false, Ordering::AcqRel) {
            return false;
        }
        self.detected_at_ns[node as usize].store(at_ns, Ordering::Release);
        self.epoch.fetch_add(1, Ordering::AcqRel);
        true
    }
}

/// Asked by a node's detector (on its worker 0) about each peer it
/// suspects, before any coroutine of the node learns of it: replication's
/// recovery (promote backups, resolve the dead coordinator's transactions
/// from the logs, release its locks) decides whether the cluster fails the
/// peer over. Only then does the observer's [`Membership`] declare it dead
/// (its rounds to the peer fail from then on); a refused suspect stays a
/// member, reachable as before.
pub trait FailureHook: Send + Sync {
    /// Whether `suspect` is now failed (newly, or already) in the run's
    /// configuration; `false`: the suspicion is refused.
    fn on_suspected(&self, observer: NodeId, suspect: NodeId, detected_at_ns: u64) -> bool;

    /// Whether a silence of `peer` at `now_ns` can count against it.
    /// Not while the cluster recovers from a failure: the survivors are
    /// paused and one of them works through the recovery, its event loop
    /// (and heartbeat) stopped meanwhile — unless the configuration has
    /// already failed `peer`, which every observer must still learn.
    fn may_suspect(&self, _peer: NodeId, _now_ns: u64) -> bool {
        true
    }
}

/// The hook of a run without replication: nothing to recover (with
/// replication 1 the failed node's partition is unavailable).
pub struct NoRecovery;

impl FailureHook for NoRecovery {
    fn on_suspected(&self, _observer: NodeId, _suspect: NodeId, _detected_at_ns: u64) -> bool {
        true
    }
}

/// One injected fault as the run saw it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FaultRecord {
    pub node: u32,
    /// `crash` or `pause`; `lost`: a rank of a `ucx` run that died without
    /// a planned fault (killed from outside) — its `crash_at_s` is then
    /// when it was first declared dead, an upper bound, and its
    /// `detection_s` null.
    pub kind: &'static str,
    /// When the fault struck, seconds since the run's start.
    pub crash_at_s: f64,
    /// When the first survivor declared the node dead (null: nobody did —
    /// the run ended first, or a pause was shorter than the timeout).
    pub detected_at_s: Option<f64>,
    /// `detected_at_s − crash_at_s`.
    pub detection_s: Option<f64>,
    /// Surviving nodes that declared it dead, and when (s since the start).
    pub detected_by: Vec<(u32, f64)>,
}

/// The report's `recovery` object (present when the run injected a fault
/// or ran the failure detector).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RecoveryReport {
    pub faults: Vec<FaultRecord>,
    /// The detector's timing, seconds.
    pub heartbeat_interval_s: f64,
    pub timeout_s: f64,
    /// Commits in the measured interval before the first fault struck, and
    /// at or after it (by the survivors: a dead node commits nothing).
    pub committed_before_fault: u64,
    pub committed_after_fault: u64,
    /// Of those after: commits once every survivor knew of every crash.
    pub committed_after_detection: u64,
    /// Replication fills these: the time from detection until the failed
    /// partitions were served again (the survivors' pause; null: no
    /// failover completed during the run), each failed partition and the
    /// node whose backup copy was promoted to serve it, the dead
    /// coordinators' log records found in the survivors' rings (rolled
    /// forward when whole, discarded when partial), and the tuples whose
    /// protocol headers the recovery reset.
    pub recovery_time_s: Option<f64>,
    pub promoted: Vec<(u32, u32)>,
    pub resolved_from_log_count: u64,
    pub resolved_committed_count: u64,
    pub resolved_aborted_count: u64,
    pub versions_rolled_forward: u64,
    pub headers_reset: u64,
    /// Declarations of death the failover did not act on because the
    /// node holds the last live copy of a partition (it is then only
    /// unreachable from the survivors that declared it; nothing is lost).
    pub suspicions_ignored: u64,
    /// CALVIN only: sequenced transactions the failed node had a part in
    /// that the recovery finished on the survivors, and that it gave up
    /// (their clients submit them again).
    pub sequenced_finished_count: u64,
    pub sequenced_given_up_count: u64,
    /// Rounds a worker abandoned at the end of the run because what they
    /// waited for never came (e.g. a lock a dead coordinator left behind
    /// with replication 1). Zero in a run whose survivors all finished.
    pub abandoned_rounds: u64,
}

impl RecoveryReport {
    /// Fills the faults from the crash times and every survivor's view.
    /// `start_ns` is the fabric time the run started at.
    pub fn build(
        faults: &[RunFault],
        settings: DetectorSettings,
        views: &[&Membership],
        start_ns: u64,
    ) -> RecoveryReport {
        let seconds = |ns: u64| ns.saturating_sub(start_ns) as f64 / 1e9;
        let records = faults
            .iter()
            .map(|fault| {
                let node = fault.node();
                let mut detected_by: Vec<(u32, f64)> = views
                    .iter()
                    .filter(|view| view.node() as u32 != node)
                    .filter_map(|view| {
                        view.failed_nodes()
                            .into_iter()
                            .find(|&(n, _)| n as u32 == node)
                            .map(|(_, at)| (view.node() as u32, seconds(at)))
                    })
                    .collect();
                detected_by.sort_by_key(|d| d.0);
                let detected_at_s = detected_by.iter().map(|d| d.1).reduce(f64::min);
                FaultRecord {
                    node,
                    kind: fault.kind_name(),
                    crash_at_s: fault.at_s(),
                    detected_at_s,
                    detection_s: detected_at_s.map(|d| d - fault.at_s()),
                    detected_by,
                }
            })
            .collect();
        RecoveryReport {
            faults: records,
            heartbeat_interval_s: settings.heartbeat_interval_ns as f64 / 1e9,
            timeout_s: settings.timeout_ns as f64 / 1e9,
            ..RecoveryReport::default()
        }
    }
}

impl RecoveryReport {
    /// A record of kind `lost` for each of `failed` that no planned fault
    /// names: a node that died without being told to, detected by `views`
    /// (times counted from `start_ns`).
    pub fn add_unplanned_losses(
        &mut self,
        failed: &[NodeId],
        views: &[&Membership],
        start_ns: u64,
    ) {
        for &node in failed {
            if self.faults.iter().any(|f| f.node == node as u32) {
                continue;
            }
            let mut detected_by: Vec<(u32, f64)> = views
                .iter()
                .filter_map(|view| {
                    view.failed_nodes()
                        .into_iter()
                        .find(|&(n, _)| n == node)
                        .map(|(_, at)| {
                            (view.node() as u32, at.saturating_sub(start_ns) as f64 / 1e9)
                        })
                })
                .collect();
            detected_by.sort_by_key(|d| d.0);
            let detected_at_s = detected_by.iter().map(|d| d.1).reduce(f64::min);
            self.faults.push(FaultRecord {
                node: node as u32,
                kind: "lost",
                crash_at_s: detected_at_s.unwrap_or(0.0),
                detected_at_s,
                detection_s: None,
                detected_by,
            });
        }
    }
}

impl RecoveryReport {
    /// The commit counts, the abandoned rounds and what the failover (if
    /// any) did.
    pub fn fill(
        &mut self,
        commits: FaultCommits,
        abandoned_rounds: u64,
        failover: Option<&crate::recovery::Failover>,
    ) {
        self.committed_before_fault = commits.before_fault;
        self.committed_after_fault = commits.after_fault;
        self.committed_after_detection = commits.after_detection;
        self.abandoned_rounds = abandoned_rounds;
        if let Some(failover) = failover {
            let done = failover.report();
            if done.recoveries > 0 {
                self.recovery_time_s = Some(done.recovery_ns as f64 / 1e9);
            }
            self.promoted = done
                .promoted
                .iter()
                .map(|&(p, n)| (p as u32, n as u32))
                .collect();
            self.resolved_from_log_count = done.counts.resolved_from_log_count;
            self.resolved_committed_count = done.counts.resolved_committed_count;
            self.resolved_aborted_count = done.counts.resolved_aborted_count;
            self.headers_reset = done.counts.headers_reset;
            self.versions_rolled_forward = done.counts.versions_rolled_forward;
            self.suspicions_ignored = done.suspicions_ignored;
            self.sequenced_finished_count = done.sequenced_finished_count;
            self.sequenced_given_up_count = done.sequenced_given_up_count;
        }
    }
}

/// The recovery actions of a run: replication's, once merged; until then
/// (and with replication 1) nothing to recover.
pub fn failure_hook(_config: &Config) -> Arc<dyn FailureHook> {
    Arc::new(NoRecovery)
}

/// A run's failure handling as the engine drives it: one membership view
/// per node, the hook, and when each node crashes.
pub struct FaultRun {
    pub settings: DetectorSettings,
    pub memberships: Vec<Arc<Membership>>,
    pub hook: Arc<dyn FailureHook>,
    /// The planned crashes, which the backend injects ([`CrashInjector`]).
    pub crashes: CrashInjector,
    /// The first injected fault, ns since the run's start.
    pub first_fault_ns: u64,
    /// A replicated run's failover (`recovery::failover`), also the hook.
    pub failover: Option<Arc<crate::recovery::Failover>>,
    /// Per node: where its detector declares deaths, when not in its
    /// membership (a `ucx` process, whose membership only the cluster's
    /// decisions change: `recovery::sequencer`).
    pub detector_views: Option<Vec<Arc<Membership>>>,
}

impl FaultRun {
    /// `None` when `config` runs no failure detector.
    pub fn new(config: &Config) -> Option<FaultRun> {
        let settings = DetectorSettings::of(config)?;
        let first_fault_ns = config
            .faults
            .iter()
            .map(|f| (f.at_s() * 1e9) as u64)
            .min()
            .unwrap_or(u64::MAX);
        Some(FaultRun {
            settings,
            memberships: (0..config.nodes)
                .map(|node| Arc::new(Membership::new(node as NodeId, config.nodes)))
                .collect(),
            hook: failure_hook(config),
            crashes: CrashInjector::new(&config.faults, config.nodes),
            first_fault_ns,
            failover: None,
            detector_views: None,
        })
    }

    /// Makes `failover` the run's recovery: the detectors tell it, and the
    /// workers attached from now on take part in it.
    pub fn set_failover(&mut self, failover: Arc<crate::recovery::Failover>) {
        self.hook = failover.clone();
        self.failover = Some(failover);
    }

    /// Gives `worker` its node's membership view (and the detector, on
    /// worker 0); past `end_ns` plus the give-up margin it abandons what it
    /// still waits for. `heartbeat_addr` from the store layout.
    pub fn attach(
        &self,
        worker: Worker,
        heartbeat_addr: u64,
        nodes: u32,
        duration_ns: u64,
        end_ns: u64,
    ) -> Worker {
        let membership = self.memberships[worker.node as usize].clone();
        let detector_view = match &self.detector_views {
            Some(views) => views[worker.node as usize].clone(),
            None => membership.clone(),
        };
        let detector = (worker.worker == 0).then(|| {
            detector::Detector::new(
                detector_view,
                self.hook.clone(),
                self.settings,
                heartbeat_addr,
                nodes,
            )
        });
        let mut worker = worker.with_membership(
            membership,
            detector.map(|d| Box::new(d) as Box<dyn Monitor>),
            self.settings.heartbeat_interval_ns / 4,
        );
        if let Some(failover) = &self.failover {
            worker = worker.with_failover(failover.clone());
        }
        worker.set_give_up_at(end_ns.saturating_add(self.settings.give_up_after_ns(duration_ns)));
        worker
    }

    /// [`FaultRun::attach`] for an in-process run (`sim`, `threads`) of
    /// `config` whose store layout is `layout`; `end_ns` as there.
    pub fn attach_in_process(
        &self,
        worker: Worker,
        layout: &crate::store::StoreLayout,
        config: &Config,
        end_ns: u64,
    ) -> Worker {
        self.attach(
            worker,
            layout
                .heartbeat_addr
                .expect("a detector run has a heartbeat"),
            config.nodes,
            (config.duration_s * 1e9) as u64,
            end_ns,
        )
    }

    /// Whether `node` crashed during the run.
    pub fn crashed(&self, node: usize) -> bool {
        self.crashes.crashes(node as NodeId)
    }

    /// The detectors' views of the nodes that did not crash: whose
    /// detections the report gives, when they live in this process.
    pub fn surviving_views(&self) -> Vec<&Membership> {
        self.memberships
            .iter()
            .enumerate()
            .filter(|(node, _)| !self.crashed(*node))
            .map(|(_, m)| m.as_ref())
            .collect()
    }

    /// The report's `recovery` object from the detections in `views`,
    /// whose times count from the fabric time `start_ns` the run started
    /// at: the planned faults, then every node failed over without one (a
    /// process killed from outside), then the commits and what the failover
    /// did.
    pub fn report(
        &self,
        config: &Config,
        views: &[&Membership],
        start_ns: u64,
        commits: FaultCommits,
        abandoned_rounds: u64,
    ) -> RecoveryReport {
        let mut report = RecoveryReport::build(&config.faults, self.settings, views, start_ns);
        if let Some(failover) = &self.failover {
            report.add_unplanned_losses(&failover.failed_nodes(), views, start_ns);
        }
        report.fill(commits, abandoned_rounds, self.failover.as_deref());
        report
    }
}

/// `check::store_matches_history` over the surviving nodes only, for a
/// run in which nodes crashed: a crashed node's memory is gone, and so are
/// the versions its writes installed there. A transaction whose
/// coordinator crashed after its commit point (it is in the history,
/// recorded there) may not have installed every write on the survivors
/// when it died — with replication 1 nobody finishes it (replication's
/// recovery does, from the logs) — so a survivor's tuple whose last writer
/// is such a transaction may hold that version or the one before it.
/// Everything else must match exactly.
pub fn survivors_match_history(
    history: &History,
    stores: &[Arc<NodeStore>],
    crashed: impl Fn(usize) -> bool,
) -> Vec<String> {
    // (table, key) -> (last installed seq, its coordinator crashed).
    let mut last: std::collections::HashMap<(u32, u64), (u64, bool)> =
        std::collections::HashMap::new();
    for txn in &history.txns {
        let in_doubt = crashed(txn.node as usize);
        for item in history.writes(txn) {
            let entry = last.entry((item.table, item.key)).or_insert((0, false));
            if item.seq >= entry.0 {
                *entry = (item.seq, in_doubt);
            }
        }
    }
    let mut problems = Vec::new();
    let mut count = 0usize;
    for (node, store) in stores.iter().enumerate() {
        if crashed(node) {
            continue;
        }
        for table in &store.layout.tables {
            for slot in 0..store.rows(table.id) {
                let key = store.region.load(table.tuple_addr(slot) + KEY_WORD as u64);
                let seq = store.seq(table.id, slot);
                let (expected, in_doubt) =
                    last.get(&(table.id, key)).copied().unwrap_or((0, false));
                let ok = seq == expected || (in_doubt && seq + 1 == expected);
                if !ok {
                    count += 1;
                    if problems.len() < 10 {
                        problems.push(format!(
                            "table {} key {key}: the store holds version {seq} but the last committed write installed {expected}",
                            table.id
                        ));
                    }
                }
            }
        }
    }
    if count > problems.len() {
        problems.push(format!("… {count} mismatches in all"));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_declares_each_peer_dead_once() {
        let view = Membership::new(0, 3);
        assert!(view.is_alive(2) && view.epoch() == 0);
        assert!(view.declare_dead(2, 500));
        assert!(!view.declare_dead(2, 900));
        assert!(!view.is_alive(2) && view.is_alive(1));
        assert_eq!(view.epoch(), 1);
        assert_eq!(view.failed_nodes(), vec![(2, 500)]);
    }
}
