//! The one cluster driver: every run goes through it, whatever its fabric
//! and whatever runs on its nodes (ARCHITECTURE.md: the engine is the same
//! for every protocol; the fabric is chosen at run time).
//!
//! It splits a run into two parts that vary independently:
//! * a **node program** ([`NodeProgram`]): what each worker of a node runs
//!   — the stage pipeline of a protocol (`engine::coroutine`, RCC §3.1's
//!   closed loop of coroutines), or CALVIN's sequencer, scheduler and
//!   executors (`engine::calvin`, Calvin as Deneva §3.4 describes it) —
//!   with the services it serves and the statistics it keeps;
//! * a **backend**: how the fabric runs workers — one OS thread each in
//!   wall time (`threads`, [`run_threads`]), all on the calling thread in
//!   virtual time (`sim`, `engine::sim`), or one process per node with a
//!   thread per worker (`ucx`, `cluster::node`).
//!
//! The driver builds the cluster (layout, replication, stores, failover:
//! [`run_in_process`]; a `ucx` rank builds its own node the same way),
//! hands each backend's workers to the program, and after the run gathers
//! the workers' results, checks them and builds the report
//! ([`gather`], [`build_report`]). So every program runs on every fabric
//! by construction.
//!
//! Invariants: a backend makes each worker with [`NodeProgram::slots`]
//! coroutine slots and, with failure handling, a give-up time of
//! [`NodeProgram::give_up_ns`]; the program's `run_workers` returns one
//! result per worker in the order it was given them; on `sim` the order in
//! which workers, endpoints and coroutines are made is the simulator's
//! input, so it stays the same for a given configuration (the `verbena
//! check` hashes depend on it).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use super::{
    check_after_failover, check_stores, load_stores, replicated_layout, CheckSummary, Report,
    RunError, RunOutput,
};
use crate::check::{check_serializable, History};
use crate::config::{Config, FabricKind};
use crate::fabric::threads::ThreadsFabric;
use crate::fabric::NodeId;
use crate::recovery::Failover;
use crate::recovery::FaultRun;
use crate::replication::Replication;
use crate::runtime::{RpcService, Worker};
use crate::stats::WorkerStats;
use crate::store::{LocationCache, NodeStore, StoreLayout, TableLayout};
use crate::workloads::Workload;

/// One worker's coroutines.
pub(crate) type Coroutines<'a> = Vec<Pin<Box<dyn Future<Output = ()> + 'a>>>;

/// How a backend runs the coroutines a program made for its workers:
/// `coroutines[i]` and `services[i]` belong to the `i`-th worker handed to
/// [`NodeProgram::run_workers`]. Returns when they are done.
pub(crate) type Drive<'d> = &'d mut dyn for<'a> FnMut(&mut [Coroutines<'a>], &[&'a dyn RpcService]);

/// A run's instants on its fabric's clock, ns.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunClock {
    pub start_ns: u64,
    /// End of the warm-up: the measured interval starts.
    pub warmup_end_ns: u64,
    /// End of the measured interval.
    pub end_ns: u64,
}

impl RunClock {
    pub(crate) fn starting_at(config: &Config, start_ns: u64) -> RunClock {
        let warmup_end_ns = start_ns + (config.warmup_s * 1e9) as u64;
        RunClock {
            start_ns,
            warmup_end_ns,
            end_ns: warmup_end_ns + (config.duration_s * 1e9) as u64,
        }
    }
}

/// The parts of a cluster that the driver built and a program runs on.
pub(crate) struct Cluster {
    pub layout: Arc<StoreLayout>,
    /// The stores of the nodes this process hosts, in node order: every
    /// node's in one process, the rank's own on a `ucx` rank.
    pub stores: Vec<Arc<NodeStore>>,
    pub replication: Option<Arc<Replication>>,
    /// The run's failure handling, when it runs a detector.
    pub faults: Option<FaultRun>,
    /// Whether the workers carry the failure handling (`faults`): a
    /// program may run a detector's run without it
    /// ([`NodeProgram::detector_without_failover`]).
    pub attach_faults: bool,
}

impl Cluster {
    /// The store of `node`, which this process hosts.
    pub(crate) fn store(&self, node: NodeId) -> &Arc<NodeStore> {
        let store = &self.stores[(node - self.stores[0].node) as usize];
        debug_assert_eq!(store.node, node);
        store
    }

    /// The failure handling the workers carry.
    pub(crate) fn attached_faults(&self) -> Option<&FaultRun> {
        self.faults.as_ref().filter(|_| self.attach_faults)
    }

    /// When the first injected fault strikes on a clock that started at
    /// `start_ns` (`u64::MAX`: none).
    pub(crate) fn fault_at_ns(&self, start_ns: u64) -> u64 {
        self.attached_faults()
            .map_or(u64::MAX, |f| start_ns.saturating_add(f.first_fault_ns))
    }
}

/// What a backend hands a program for its workers.
pub(crate) struct WorkerStart<'w> {
    /// The workers, made with the program's slots and failure handling.
    pub workers: &'w [Worker],
    /// One empty history per worker (a journaled one where the backend
    /// keeps them on disk).
    pub histories: Vec<History>,
    pub clock: RunClock,
    /// Whether the coroutines record the committed history.
    pub record_history: bool,
}

/// What one worker hands back after its run.
pub(crate) struct WorkerResult<X> {
    pub stats: WorkerStats,
    pub history: History,
    /// The program's own statistics.
    pub extra: X,
}

/// Statistics a program keeps beside [`WorkerStats`], merged over
/// workers and sent between processes as words.
pub(crate) trait ExtraStats: Default + Send {
    fn merge(&mut self, other: &Self);
    // Only a `ucx` rank sends them; a build without it never does.
    #[cfg_attr(not(feature = "ucx"), allow(dead_code))]
    fn to_words(&self) -> Vec<u64>;
    /// `None` when `words` is not what [`ExtraStats::to_words`] makes.
    #[cfg_attr(not(feature = "ucx"), allow(dead_code))]
    fn from_words(words: &[u64]) -> Option<Self>;
}

impl ExtraStats for () {
    fn merge(&mut self, _other: &()) {}
    fn to_words(&self) -> Vec<u64> {
        Vec::new()
    }
    fn from_words(words: &[u64]) -> Option<()> {
        words.is_empty().then_some(())
    }
}

/// What every worker of every node runs, and what the run makes of it.
pub(crate) trait NodeProgram: Sync {
    type Extra: ExtraStats;

    /// Coroutine slots of worker `index` of a node.
    fn slots(&self, index: u16) -> usize;

    /// When a worker gives up on what a failure lost (`recovery`), for a run
    /// with this clock.
    fn give_up_ns(&self, clock: RunClock) -> u64 {
        clock.end_ns
    }

    /// Makes the coroutines and services of `start.workers` (each knows
    /// its node and index), hands them to `drive`, and returns each
    /// worker's result in order.
    fn run_workers(
        &self,
        cluster: &Cluster,
        start: WorkerStart<'_>,
        drive: Drive<'_>,
    ) -> Vec<WorkerResult<Self::Extra>>;

    /// Coroutines per node that a failover waits on to pause.
    fn failover_coroutines(&self) -> u32;

    /// How a promoted copy's tuple headers are reset.
    fn recovered_header(&self) -> fn(&TableLayout, &mut [u64]);

    /// Called once the run's failover exists, before any worker runs.
    fn on_failover(&self, _failover: &Arc<Failover>, _cluster_parts: FailoverParts<'_>) {}

    /// Whether the workers carry a detector that runs without a failover
    /// (`--failure-detector on` at replication 1).
    fn detector_without_failover(&self) -> bool {
        true
    }

    /// After every worker finished: a debug check of the program's state.
    fn after_run(&self, _cluster: &Cluster, _stuck: bool) {}

    /// The run's history from what the workers recorded.
    fn history(&self, recorded: History) -> History {
        recorded
    }

    /// Adds the program's own parts to the report.
    fn finish_report(
        &self,
        _report: &mut Report,
        _total: &WorkerStats,
        _extra: &Self::Extra,
        _replicated: bool,
    ) {
    }
}

/// What [`NodeProgram::on_failover`] may keep of the cluster.
pub(crate) struct FailoverParts<'a> {
    pub stores: &'a [Arc<NodeStore>],
    pub replication: &'a Arc<Replication>,
}

/// The workers' results summed: what the checker and the report take.
pub(crate) struct Gathered<X> {
    pub total: WorkerStats,
    /// The run's history ([`NodeProgram::history`] of the recorded one).
    pub history: History,
    pub per_worker_committed: Vec<u64>,
    pub extra: X,
}

/// Sums `results` (in worker order) and makes the run's history, taking
/// each worker's history out of its result: the run's is sized once and
/// each worker's is freed as soon as it is copied, so that a long run's
/// histories are not held twice over (with doubling slack) at its peak.
pub(crate) fn gather<G: NodeProgram>(
    program: &G,
    results: &mut [WorkerResult<G::Extra>],
) -> Gathered<G::Extra> {
    let mut total = WorkerStats::new();
    let mut extra = G::Extra::default();
    let mut recorded = History::with_room_for(results.iter().map(|r| &r.history));
    for result in results.iter_mut() {
        total.merge(&result.stats);
        extra.merge(&result.extra);
        recorded.append(&std::mem::take(&mut result.history));
    }
    Gathered {
        total,
        history: program.history(recorded),
        per_worker_committed: results.iter().map(|r| r.stats.committed).collect(),
        extra,
    }
}

/// The report of a run from what was gathered: the same for every
/// backend; the caller adds its backend's parts (`sim`, `cluster`,
/// `recovery`).
pub(crate) fn build_report<G: NodeProgram, W: Workload>(
    config: &Config,
    program: &G,
    workload: &W,
    gathered: &Gathered<G::Extra>,
    check: Option<CheckSummary>,
    replicated: bool,
) -> Report {
    let mut report = Report::build(
        config,
        workload.name(),
        workload.txn_types(),
        &gathered.total,
        &gathered.per_worker_committed,
        check,
    );
    program.finish_report(&mut report, &gathered.total, &gathered.extra, replicated);
    report
}

/// What every program keeps for each worker it runs, in the workers'
/// order: a location cache, the statistics and the history.
pub(crate) struct WorkerCells {
    pub caches: Vec<RefCell<LocationCache>>,
    pub stats: Vec<RefCell<WorkerStats>>,
    pub histories: Vec<RefCell<History>>,
}

impl WorkerCells {
    /// One set per history handed over, with caches of `cache_entries`.
    pub(crate) fn new(histories: Vec<History>, cache_entries: u32) -> WorkerCells {
        let count = histories.len();
        WorkerCells {
            caches: (0..count)
                .map(|_| RefCell::new(LocationCache::new(cache_entries)))
                .collect(),
            stats: (0..count)
                .map(|_| RefCell::new(WorkerStats::new()))
                .collect(),
            histories: histories.into_iter().map(RefCell::new).collect(),
        }
    }

    /// Each worker's result: its statistics closed with its cache's
    /// counts, its history, and the program's own statistics.
    pub(crate) fn close<X>(self, extras: impl IntoIterator<Item = X>) -> Vec<WorkerResult<X>> {
        self.stats
            .into_iter()
            .zip(self.histories)
            .zip(self.caches)
            .zip(extras)
            .map(|(((stats, history), cache), extra)| {
                let mut stats = stats.into_inner();
                stats.close();
                let cache = cache.into_inner();
                stats.cache_hits = cache.hits;
                stats.cache_misses = cache.misses;
                WorkerResult {
                    stats,
                    history: history.into_inner(),
                    extra,
                }
            })
            .collect()
    }
}

/// The nodes `workers` are on (they come in node order): a program makes
/// one service per node of this range.
pub(crate) fn nodes_of(workers: &[Worker]) -> std::ops::RangeInclusive<NodeId> {
    workers[0].node..=workers[workers.len() - 1].node
}

/// Each worker's service among `services` (one per node of
/// [`nodes_of`]`(workers)`), as [`Drive`] takes them.
pub(crate) fn service_of_each<'a, S: RpcService>(
    workers: &[Worker],
    services: &'a [S],
) -> Vec<&'a dyn RpcService> {
    let first = workers[0].node;
    workers
        .iter()
        .map(|w| &services[(w.node - first) as usize] as &dyn RpcService)
        .collect()
}

/// Each worker's side of the replication log, made by `writer`; all
/// `None` without replication.
pub(crate) fn log_writers(
    cluster: &Cluster,
    workers: &[Worker],
    writer: fn(Arc<Replication>, NodeId, u16) -> crate::replication::LogWriter,
) -> Vec<Option<crate::replication::LogWriter>> {
    workers
        .iter()
        .map(|w| {
            cluster
                .replication
                .as_ref()
                .map(|r| writer(r.clone(), w.node, w.worker))
        })
        .collect()
}

/// What a backend of one process returns.
pub(crate) struct BackendRun<X> {
    pub results: Vec<WorkerResult<X>>,
    /// The fabric time the run started at.
    pub start_ns: u64,
    /// Rounds workers abandoned at their give-up time (`recovery`).
    pub abandoned_rounds: u64,
    /// What the simulator saw (`sim` only).
    pub sim: Option<super::sim::SimRun>,
}

/// Runs `program` on a cluster of `config.nodes` nodes in this process
/// (`threads` or `sim`), from `layout` (the tables, the heartbeat when the
/// run has a detector, and the program's own parts, as
/// [`super::with_program`] made it; the driver adds the replication rings).
pub(crate) fn run_in_process<G: NodeProgram, W: Workload>(
    config: &Config,
    program: &G,
    workload: &W,
    layout: StoreLayout,
) -> Result<RunOutput, RunError> {
    let mut faults = FaultRun::new(config);
    debug_assert_eq!(faults.is_some(), layout.heartbeat_addr.is_some());
    let (layout, replication) = replicated_layout(config, layout);
    let stores =
        load_stores(config, workload, &layout, replication.as_deref()).map_err(RunError::Load)?;
    if let (Some(faults), Some(replication)) = (faults.as_mut(), &replication) {
        let failover = Arc::new(Failover::new(
            replication.clone(),
            stores.clone(),
            program.failover_coroutines(),
            faults.settings.heartbeat_interval_ns / 4,
            program.recovered_header(),
        ));
        program.on_failover(
            &failover,
            FailoverParts {
                stores: &stores,
                replication,
            },
        );
        faults.set_failover(failover);
    }
    let attach_faults = faults
        .as_ref()
        .is_some_and(|f| f.failover.is_some() || program.detector_without_failover());
    let cluster = Cluster {
        layout,
        stores,
        replication,
        faults,
        attach_faults,
    };
    let mut run = match config.fabric {
        FabricKind::Threads => run_threads(config, program, &cluster),
        FabricKind::Sim => super::sim::run_sim(config, program, &cluster),
        FabricKind::Ucx => unreachable!("run_validated refuses the ucx fabric"),
    };
    let Cluster {
        stores,
        replication,
        faults,
        ..
    } = &cluster;
    let failover = faults.as_ref().and_then(|f| f.failover.clone());
    if let Some(failover) = &failover {
        failover.finish();
    }
    program.after_run(
        &cluster,
        run.sim.as_ref().is_some_and(|s| s.stuck_workers > 0),
    );
    let gathered = gather(program, &mut run.results);
    let history = &gathered.history;
    let check = config.check.then(|| {
        let verdict = check_serializable(history);
        if let (Some(failover), Some(replication)) = (&failover, replication) {
            // Every failed partition is read from its promoted copy.
            return CheckSummary::new(
                verdict,
                check_after_failover(workload, history, stores, replication, failover),
            );
        }
        let crashed = |node: usize| faults.as_ref().is_some_and(|f| f.crashed(node));
        if !(0..stores.len()).any(crashed) {
            return check_stores(workload, verdict, history, stores, replication.as_deref(), "");
        }
        // With replication 1 a crashed node's partition is lost, and with
        // it what the invariants sum over: the survivors' stores are
        // checked against the history.
        let mut invariants = crate::workloads::InvariantReport {
            ok: true,
            details: vec!["workload invariants not checked: a node crashed and its partition is lost (replication 1)".into()],
        };
        invariants.add_version_check(
            crate::recovery::survivors_match_history(history, stores, crashed),
            "",
        );
        CheckSummary::new(verdict, invariants)
    });
    let mut report = build_report(
        config,
        program,
        workload,
        &gathered,
        check,
        replication.is_some(),
    );
    report.sim = run.sim.map(|sim| sim.summary(history, stores));
    report.recovery = faults.as_ref().map(|f| {
        f.report(
            config,
            gathered.total.fault_commits,
            run.abandoned_rounds,
            run.start_ns,
        )
    });
    let Cluster {
        stores,
        replication,
        ..
    } = cluster;
    Ok(RunOutput {
        report,
        history: config.check.then_some(gathered.history),
        stores,
        replication,
    })
}

/// The `threads` backend: every worker on an OS thread of its own, in
/// wall time; a worker serves its peers until every worker is done.
fn run_threads<G: NodeProgram>(
    config: &Config,
    program: &G,
    cluster: &Cluster,
) -> BackendRun<G::Extra> {
    let fabric = ThreadsFabric::new(
        cluster.stores.iter().map(|s| s.region.clone()).collect(),
        config.workers as u16,
        config.threads_latency(),
    );
    let faults = cluster.attached_faults();
    let abandoned = AtomicU64::new(0);
    let total_workers = config.total_workers() as usize;
    let ready = Barrier::new(total_workers + 1);
    let go = Barrier::new(total_workers + 1);
    let start_ns = AtomicU64::new(0);
    let finished = AtomicUsize::new(0);

    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(total_workers);
        for node in 0..config.nodes as NodeId {
            for worker_index in 0..config.workers as u16 {
                let fabric = &fabric;
                let (ready, go, start_ns, finished) = (&ready, &go, &start_ns, &finished);
                let abandoned = &abandoned;
                let handle = std::thread::Builder::new()
                    .name(format!("verbena-n{node}-w{worker_index}"))
                    .spawn_scoped(scope, move || {
                        let endpoint = fabric.endpoint(node, worker_index);
                        let mut worker =
                            Worker::new(Box::new(endpoint), program.slots(worker_index));
                        ready.wait();
                        go.wait();
                        let clock = RunClock::starting_at(config, start_ns.load(Ordering::SeqCst));
                        if let Some(faults) = faults {
                            worker = faults.attach_in_process(
                                worker,
                                &cluster.layout,
                                config,
                                program.give_up_ns(clock),
                            );
                        }
                        let start = WorkerStart {
                            workers: std::slice::from_ref(&worker),
                            histories: vec![History::new()],
                            clock,
                            record_history: config.check,
                        };
                        let mut results =
                            program.run_workers(cluster, start, &mut |coroutines, services| {
                                worker.run(&mut coroutines[0], services[0], finished, total_workers)
                            });
                        abandoned.fetch_add(worker.abandoned_rounds(), Ordering::Relaxed);
                        results.pop().expect("one result per worker")
                    })
                    .expect("spawning a worker thread");
                handles.push(handle);
            }
        }
        ready.wait();
        let start = fabric.now_ns();
        start_ns.store(start, Ordering::SeqCst);
        if let Some(faults) = faults {
            faults.each_crash(start, |node, at| fabric.crash_node(node, at));
        }
        go.wait();
        let results = handles
            .into_iter()
            .map(|h| h.join().expect("a worker thread panicked"))
            .collect();
        BackendRun {
            results,
            start_ns: start,
            abandoned_rounds: abandoned.load(Ordering::Relaxed),
            sim: None,
        }
    })
}
