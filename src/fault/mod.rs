//! Fault injection and failure detection (issue 8, the FAULT half): what a
//! run is told to break (`--fault crash:NODE@SECONDS`), how the surviving
//! nodes find out ([`detector`]: heartbeats read with one-sided READs, the
//! lease scheme of DrTM §4.5 and FaRM), what each node then believes
//! ([`Membership`]), whom the engine tells ([`FailureHook`], implemented by
//! replication's recovery), and what the report says ([`RecoveryReport`]).
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

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::check::History;
use crate::config::{Config, FabricKind};
use crate::fabric::profile::NetworkProfile;
use crate::fabric::NodeId;
use crate::runtime::Worker;
use crate::stats::FaultCommits;
use crate::store::{NodeStore, KEY_WORD};

/// A fault the run injects, from `--fault` or `faults = [...]` in a config
/// file. Times are seconds since the run started (warm-up included):
/// virtual seconds on `sim`, wall seconds on `threads` and `ucx`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum RunFault {
    /// `crash:NODE@SECONDS`: the node stops for good — its workers stop,
    /// its memory and handlers become unreachable (on `ucx` the process
    /// kills itself with SIGKILL).
    Crash { node: u32, at_s: f64 },
    /// `pause:NODE@SECONDS+DURATION` (`sim` only): the node's CPUs stop for
    /// `for_s`, its memory still serves one-sided verbs. A pause longer
    /// than the detector's timeout gets the node declared dead.
    Pause { node: u32, at_s: f64, for_s: f64 },
}

/// The forms `--fault` accepts, for error messages.
pub const FAULT_FORMS: &str =
    "crash:NODE@SECONDS or pause:NODE@SECONDS+DURATION (e.g. crash:2@1.5)";

impl RunFault {
    /// Parses `crash:NODE@SECONDS` or `pause:NODE@SECONDS+DURATION`.
    pub fn parse(text: &str) -> Result<RunFault, String> {
        let bad = |why: &str| format!("--fault `{text}`: {why}; allowed: {FAULT_FORMS}");
        let (kind, rest) = text.split_once(':').ok_or_else(|| bad("no `:`"))?;
        let (node, time) = rest.split_once('@').ok_or_else(|| bad("no `@`"))?;
        let node: u32 = node
            .trim()
            .parse()
            .map_err(|_| bad("the node is not a non-negative integer"))?;
        let seconds = |s: &str, what: &str| -> Result<f64, String> {
            let value: f64 = s
                .trim()
                .parse()
                .map_err(|_| bad(&format!("the {what} is not a number of seconds")))?;
            if !value.is_finite() || value < 0.0 {
                return Err(bad(&format!("the {what} must be finite and >= 0")));
            }
            Ok(value)
        };
        match kind.trim() {
            "crash" => Ok(RunFault::Crash {
                node,
                at_s: seconds(time, "time")?,
            }),
            "pause" => {
                let (at, length) = time
                    .split_once('+')
                    .ok_or_else(|| bad("a pause needs `+DURATION`"))?;
                let for_s = seconds(length, "duration")?;
                if for_s == 0.0 {
                    return Err(bad("the duration must be > 0"));
                }
                Ok(RunFault::Pause {
                    node,
                    at_s: seconds(at, "time")?,
                    for_s,
                })
            }
            other => Err(bad(&format!("unknown fault kind `{other}`"))),
        }
    }

    pub fn node(&self) -> u32 {
        match *self {
            RunFault::Crash { node, .. } | RunFault::Pause { node, .. } => node,
        }
    }

    pub fn at_s(&self) -> f64 {
        match *self {
            RunFault::Crash { at_s, .. } | RunFault::Pause { at_s, .. } => at_s,
        }
    }

    pub fn kind_name(&self) -> &'static str {
        match self {
            RunFault::Crash { .. } => "crash",
            RunFault::Pause { .. } => "pause",
        }
    }
}

impl std::fmt::Display for RunFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            RunFault::Crash { node, at_s } => write!(f, "crash:{node}@{at_s}"),
            RunFault::Pause { node, at_s, for_s } => write!(f, "pause:{node}@{at_s}+{for_s}"),
        }
    }
}

impl TryFrom<String> for RunFault {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        RunFault::parse(&text)
    }
}

impl From<RunFault> for String {
    fn from(fault: RunFault) -> String {
        fault.to_string()
    }
}

/// The `[failure_detector]` section: heartbeats every `heartbeat_interval_us`,
/// a peer whose heartbeat has not advanced for `timeout_us` is dead. Unset
/// values resolve per fabric and network profile ([`DetectorSettings`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FailureDetectorConfig {
    /// Run the detector. Unset: on exactly when the run injects a fault
    /// (`--failure-detector on` turns it on without one). Off, a crashed
    /// peer is waited for forever (`sim`) or stops the run with an error
    /// (`ucx`); on, with replication ≥ 2, a `ucx` run fails a dead rank
    /// over and goes on.
    pub enabled: Option<bool>,
    pub heartbeat_interval_us: Option<f64>,
    pub timeout_us: Option<f64>,
}

/// The detector's resolved timing, ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DetectorSettings {
    pub heartbeat_interval_ns: u64,
    pub timeout_ns: u64,
}

impl DetectorSettings {
    /// Defaults: on `sim`, 20 network round trips (at least 20 µs) between
    /// heartbeats and 10 intervals to declare a death — fast enough for
    /// millisecond-long simulated runs, far above the modeled jitter, and
    /// above the longest stretch a loaded worker's event loop goes without
    /// a turn in the modeled CPU (TPC-C's local scans; 5 intervals let a
    /// survivor that had taken over a failed partition be suspected). On
    /// `threads`, 2 ms and 50 ms: worker threads time-share the cores, and
    /// an OS scheduler may hold a runnable thread back for tens of ms on a
    /// loaded host, which must not count as a death. On `ucx`, 5 ms and
    /// 200 ms (separate processes, possibly a TCP network, FaRM's leases
    /// are of that order on a real cluster).
    pub fn defaults(fabric: FabricKind, profile: &NetworkProfile) -> DetectorSettings {
        let rtt = profile
            .onesided_rtt_ns
            .max(profile.rpc_rtt_ns)
            .max(profile.atomic_rtt_ns);
        match fabric {
            FabricKind::Sim => {
                let interval = (20 * rtt).max(20_000);
                DetectorSettings {
                    heartbeat_interval_ns: interval,
                    timeout_ns: 10 * interval,
                }
            }
            FabricKind::Threads => DetectorSettings {
                heartbeat_interval_ns: (20 * rtt).max(2_000_000),
                timeout_ns: (100 * rtt).max(50_000_000),
            },
            FabricKind::Ucx => DetectorSettings {
                heartbeat_interval_ns: (20 * rtt).max(5_000_000),
                timeout_ns: (100 * rtt).max(200_000_000),
            },
        }
    }

    /// The settings of `config`: its `[failure_detector]` values over the
    /// defaults. `None` when the detector is off.
    pub fn of(config: &Config) -> Option<DetectorSettings> {
        let section = &config.failure_detector;
        if !section.enabled.unwrap_or(!config.faults.is_empty()) {
            return None;
        }
        let mut settings = DetectorSettings::defaults(config.fabric, &config.profile);
        if let Some(us) = section.heartbeat_interval_us {
            settings.heartbeat_interval_ns = (us * 1_000.0) as u64;
        }
        if let Some(us) = section.timeout_us {
            settings.timeout_ns = (us * 1_000.0) as u64;
        }
        Some(settings)
    }

    /// How long after the end of the measured interval a worker still
    /// waits for outstanding operations before it abandons them (see
    /// `runtime::Worker::set_give_up_at`): a bound on the run's end even
    /// when a survivor waits on a lock a dead coordinator left behind.
    pub fn give_up_after_ns(&self, duration_ns: u64) -> u64 {
        (4 * (self.timeout_ns + self.heartbeat_interval_ns)).max(duration_ns / 10)
    }
}

/// Checks the run-level faults and the detector knobs of `config`; called
/// by `Config::validate`.
pub fn validate(config: &Config) -> Result<(), String> {
    let section = &config.failure_detector;
    for (name, value) in [
        ("heartbeat_interval_us", section.heartbeat_interval_us),
        ("timeout_us", section.timeout_us),
    ] {
        if let Some(us) = value {
            if !us.is_finite() || !(1.0..=60_000_000.0).contains(&us) {
                return Err(format!(
                    "failure_detector.{name} = {us} is out of range; allowed: [1, 60000000] µs"
                ));
            }
        }
    }
    if let Some(settings) = DetectorSettings::of(config) {
        if settings.timeout_ns < 2 * settings.heartbeat_interval_ns {
            return Err(format!(
                "failure_detector.timeout_us = {} is too short for heartbeat_interval_us = {}; allowed: timeout >= 2 × interval",
                settings.timeout_ns as f64 / 1e3,
                settings.heartbeat_interval_ns as f64 / 1e3
            ));
        }
    }
    if config.faults.is_empty() {
        return Ok(());
    }
    if config.failure_detector.enabled == Some(false) {
        return Err(
            "--fault needs the failure detector; remove failure_detector.enabled = false".into(),
        );
    }
    if config.fabric == FabricKind::Ucx {
        if config.replication < 2 {
            return Err("--fault on the ucx fabric needs --replication 2 or 3: a killed process's memory dies with it, so its partitions must fail over to backups on the survivors (sim and threads also run --fault with replication 1)".into());
        }
        if config.faults.len() > 1 {
            return Err(format!(
                "--fault is given {} times; allowed on ucx: one crash (the survivors recover from one failure at a time)",
                config.faults.len()
            ));
        }
        if config.faults.iter().any(|f| f.node() == 0) {
            return Err("--fault crash:0@… on ucx: rank 0 runs the bootstrap and gathers the results, so it must survive; allowed: a node in 1..nodes".into());
        }
    }
    if config.protocol == crate::base::ProtocolKind::Calvin {
        // CALVIN's failover (`protocols::calvin::failover`) moves a dead
        // node's partition to its promoted backup and resolves what it
        // sequenced or touched; that needs a backup, and it resolves one
        // failure.
        if config.replication < 2 {
            return Err("--fault with protocol calvin needs --replication 2 or 3: a sequenced transaction cannot abort, so a dead node's partition must go on from a backup copy".into());
        }
        let crashes = config
            .faults
            .iter()
            .filter(|f| matches!(f, RunFault::Crash { .. }))
            .count();
        if crashes != 1 || config.faults.len() != 1 {
            return Err(format!(
                "--fault is given {} time(s) with protocol calvin; allowed: exactly one crash:NODE@SECONDS (CALVIN's failover resolves one failure per run, and a pause would be failed over as a crash)",
                config.faults.len()
            ));
        }
    }
    let run_s = config.warmup_s + config.duration_s;
    let mut crashed = vec![false; config.nodes as usize];
    for fault in &config.faults {
        let node = fault.node();
        if node >= config.nodes {
            return Err(format!(
                "--fault {fault} names node {node}; allowed: 0..{} (the run has {} nodes)",
                config.nodes, config.nodes
            ));
        }
        if fault.at_s() >= run_s {
            return Err(format!(
                "--fault {fault} is at {} s, after the run ends; allowed: [0, {run_s}) s (warm-up + duration)",
                fault.at_s()
            ));
        }
        match fault {
            RunFault::Crash { .. } => crashed[node as usize] = true,
            RunFault::Pause { .. } if config.fabric != FabricKind::Sim => {
                return Err(format!(
                    "--fault {fault}: pause faults need --fabric sim; allowed on {}: crash:NODE@SECONDS",
                    config.fabric.name()
                ));
            }
            RunFault::Pause { .. } => {}
        }
    }
    if crashed.iter().all(|&c| c) {
        return Err(format!(
            "--fault crashes every node ({}); allowed: at least one node must survive",
            config.nodes
        ));
    }
    if config.replication > 1 && config.replication <= config.nodes {
        // Every partition must keep a live copy to fail over to.
        let placement = crate::replication::Placement::new(config.nodes, config.replication);
        for partition in 0..config.nodes {
            let lost = (0..config.replication)
                .all(|copy| crashed[placement.node_of(partition as NodeId, copy) as usize]);
            if lost {
                return Err(format!(
                    "--fault crashes every node holding partition {partition} (replication {}); allowed: at most {} crashed node(s) among any {} consecutive nodes",
                    config.replication,
                    config.replication - 1,
                    config.replication
                ));
            }
        }
    }
    Ok(())
}

/// When each node crashes, ns since the run's start (`u64::MAX`: never).
pub fn crash_times_ns(faults: &[RunFault], nodes: u32) -> Vec<u64> {
    let mut at = vec![u64::MAX; nodes as usize];
    for fault in faults {
        if let RunFault::Crash { node, at_s } = *fault {
            let ns = (at_s * 1e9) as u64;
            at[node as usize] = at[node as usize].min(ns);
        }
    }
    at
}

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
    /// The commit counts, the abandoned rounds and what the failover (if
    /// any) did.
    pub fn fill(
        &mut self,
        commits: FaultCommits,
        abandoned_rounds: u64,
        failover: Option<&crate::replication::Failover>,
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
            self.resolved_from_log_count = done.resolved_from_log_count;
            self.resolved_committed_count = done.resolved_committed_count;
            self.resolved_aborted_count = done.resolved_aborted_count;
            self.headers_reset = done.headers_reset;
            self.versions_rolled_forward = done.versions_rolled_forward;
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
    /// Per node: crash time, ns since the run's start (`u64::MAX`: never).
    pub crash_after_ns: Vec<u64>,
    /// The first injected fault, ns since the run's start.
    pub first_fault_ns: u64,
    /// A replicated run's failover (`replication::failover`), also the hook.
    pub failover: Option<Arc<crate::replication::Failover>>,
    /// Per node: where its detector declares deaths, when not in its
    /// membership (a `ucx` process, whose membership only the cluster's
    /// decisions change: `cluster::failover`).
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
            crash_after_ns: crash_times_ns(&config.faults, config.nodes),
            first_fault_ns,
            failover: None,
            detector_views: None,
        })
    }

    /// Makes `failover` the run's recovery: the detectors tell it, and the
    /// workers attached from now on take part in it.
    pub fn set_failover(&mut self, failover: Arc<crate::replication::Failover>) {
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
            detector,
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

    /// Calls `crash(node, at_ns)` for every node the run crashes, with its
    /// crash time on a fabric clock whose run started at `start_ns`.
    pub fn each_crash(&self, start_ns: u64, mut crash: impl FnMut(NodeId, u64)) {
        for (node, &after) in self.crash_after_ns.iter().enumerate() {
            if after != u64::MAX {
                crash(node as NodeId, start_ns.saturating_add(after));
            }
        }
    }

    /// Whether `node` crashed during the run.
    pub fn crashed(&self, node: usize) -> bool {
        self.crash_after_ns[node] != u64::MAX
    }

    /// The report's `recovery` object. `start_ns`: the fabric time the run
    /// started at (what the memberships' detection times count from).
    pub fn report(
        &self,
        config: &Config,
        commits: FaultCommits,
        abandoned_rounds: u64,
        start_ns: u64,
    ) -> RecoveryReport {
        let views: Vec<&Membership> = self
            .memberships
            .iter()
            .enumerate()
            .filter(|(node, _)| !self.crashed(*node))
            .map(|(_, m)| m.as_ref())
            .collect();
        let mut report = RecoveryReport::build(&config.faults, self.settings, &views, start_ns);
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
    fn fault_specs_parse_and_print_back() {
        assert_eq!(
            RunFault::parse("crash:2@1.5").unwrap(),
            RunFault::Crash { node: 2, at_s: 1.5 }
        );
        assert_eq!(
            RunFault::parse("pause:0@0.25+0.5").unwrap(),
            RunFault::Pause {
                node: 0,
                at_s: 0.25,
                for_s: 0.5
            }
        );
        let fault = RunFault::parse("crash:1@0.001").unwrap();
        assert_eq!(RunFault::parse(&fault.to_string()).unwrap(), fault);
    }

    #[test]
    fn bad_fault_specs_say_what_is_allowed() {
        for (text, why) in [
            ("crash", "no `:`"),
            ("crash:1", "no `@`"),
            ("crash:x@1", "not a non-negative integer"),
            ("crash:-1@1", "not a non-negative integer"),
            ("crash:1@soon", "not a number"),
            ("crash:1@-2", ">= 0"),
            ("crash:1@inf", "finite"),
            ("explode:1@2", "unknown fault kind `explode`"),
            ("pause:1@2", "`+DURATION`"),
            ("pause:1@2+0", "> 0"),
        ] {
            let error = RunFault::parse(text).unwrap_err();
            assert!(error.contains(why), "{text}: {error}");
            assert!(error.contains("allowed: crash:NODE@SECONDS"), "{error}");
        }
    }

    fn config_with(faults: &[&str]) -> Config {
        Config {
            nodes: 3,
            warmup_s: 0.5,
            duration_s: 1.0,
            faults: faults.iter().map(|f| RunFault::parse(f).unwrap()).collect(),
            ..Config::default()
        }
    }

    #[test]
    fn run_faults_are_checked_against_the_cluster_and_the_run() {
        assert!(validate(&config_with(&["crash:2@1.0"])).is_ok());
        let error = validate(&config_with(&["crash:3@1.0"])).unwrap_err();
        assert!(error.contains("names node 3; allowed: 0..3"), "{error}");
        let error = validate(&config_with(&["crash:1@1.5"])).unwrap_err();
        assert!(
            error.contains("after the run ends; allowed: [0, 1.5)"),
            "{error}"
        );
        let error =
            validate(&config_with(&["crash:0@0.6", "crash:1@0.7", "crash:2@1"])).unwrap_err();
        assert!(error.contains("at least one node must survive"), "{error}");
        let error = validate(&config_with(&["pause:1@0.6+0.1"])).unwrap_err();
        assert!(error.contains("need --fabric sim"), "{error}");
        let mut ucx = config_with(&["crash:1@1"]);
        ucx.fabric = FabricKind::Ucx;
        assert!(validate(&ucx)
            .unwrap_err()
            .contains("needs --replication 2 or 3"));
        ucx.replication = 2;
        assert!(validate(&ucx).is_ok());
        let mut ucx_rank0 = ucx.clone();
        ucx_rank0.faults = vec![RunFault::parse("crash:0@1").unwrap()];
        assert!(validate(&ucx_rank0)
            .unwrap_err()
            .contains("rank 0 runs the bootstrap"));
        let mut ucx_two = ucx.clone();
        ucx_two.faults.push(RunFault::parse("crash:2@1").unwrap());
        assert!(validate(&ucx_two).unwrap_err().contains("one crash"));
        let mut calvin = config_with(&["crash:1@1"]);
        calvin.protocol = crate::base::ProtocolKind::Calvin;
        assert!(validate(&calvin)
            .unwrap_err()
            .contains("calvin needs --replication 2 or 3"));
        calvin.replication = 2;
        assert!(validate(&calvin).is_ok());
        calvin.faults.push(RunFault::parse("crash:2@1.2").unwrap());
        assert!(validate(&calvin)
            .unwrap_err()
            .contains("allowed: exactly one crash"));
        calvin.fabric = FabricKind::Sim;
        calvin.faults = vec![RunFault::parse("pause:1@1+0.1").unwrap()];
        assert!(validate(&calvin)
            .unwrap_err()
            .contains("allowed: exactly one crash"));
        let mut off = config_with(&["crash:1@1"]);
        off.failure_detector.enabled = Some(false);
        assert!(validate(&off)
            .unwrap_err()
            .contains("needs the failure detector"));
        let mut tight = config_with(&["crash:1@1"]);
        tight.failure_detector.heartbeat_interval_us = Some(100.0);
        tight.failure_detector.timeout_us = Some(150.0);
        assert!(validate(&tight)
            .unwrap_err()
            .contains("timeout >= 2 × interval"));
        let mut zero = config_with(&[]);
        zero.failure_detector.timeout_us = Some(0.0);
        assert!(validate(&zero).unwrap_err().contains("timeout_us = 0"));
    }

    #[test]
    fn the_detector_is_on_exactly_when_asked_or_a_fault_is_injected() {
        let mut config = config_with(&[]);
        assert_eq!(DetectorSettings::of(&config), None);
        config.failure_detector.enabled = Some(true);
        let on = DetectorSettings::of(&config).unwrap();
        assert_eq!(on.heartbeat_interval_ns, 2_000_000);
        assert_eq!(on.timeout_ns, 50_000_000);
        let mut faulty = config_with(&["crash:1@1"]);
        faulty.fabric = FabricKind::Sim;
        faulty.failure_detector.timeout_us = Some(300.0);
        let settings = DetectorSettings::of(&faulty).unwrap();
        assert_eq!(settings.timeout_ns, 300_000);
        assert_eq!(settings.heartbeat_interval_ns, 20_000);
        faulty.failure_detector.timeout_us = None;
        assert_eq!(DetectorSettings::of(&faulty).unwrap().timeout_ns, 200_000);
    }

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
