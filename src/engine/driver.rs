//! The one cluster driver: every run goes through it, whatever its fabric
//! and whatever runs on its nodes (docs/ARCHITECTURE.md: the engine is the same
//! for every protocol; the fabric is chosen at run time).
//!
//! It splits a run into two parts that vary independently:
//! * a **node program** ([`NodeProgram`]): what each worker of a node runs
//!   — the stage pipeline of a protocol (`engine::coroutine`, RCC §3.1's
//!   closed loop of coroutines), or CALVIN's sequencer, scheduler and
//!   executors (`engine::calvin`, Calvin as Deneva §3.4 describes it) —
//!   with the services it serves and the statistics it keeps;
//! * a **backend** ([`Backend`]): how the fabric hosts nodes and runs
//!   workers — every node in this process ([`InProcess`]), one OS thread
//!   per worker in wall time (`threads`, [`run_threads`]) or all on the
//!   calling thread in virtual time (`sim`, `engine::sim`); or one node
//!   per process with a thread per worker (a `ucx` rank, `cluster::rank`).
//!
//! The driver ([`run`]) builds the cluster (layout, replication, the
//! stores the backend hosts, failure handling and failover), has the
//! backend hand its workers to the program and gather every node's
//! results (a `ucx` rank 0 gathers the other ranks' over the bootstrap),
//! then checks them ([`check_run`]) and builds the report
//! ([`build_report`]) the same way for every backend. So every program
//! runs on every fabric by construction.
//!
//! Invariants: a backend makes each worker with [`NodeProgram::slots`]
//! coroutine slots and, with failure handling, a give-up time of
//! [`NodeProgram::give_up_ns`]; the program's `run_workers` returns one
//! result per worker in the order it was given them; on `sim` the order in
//! which workers, endpoints and coroutines are made is the simulator's
//! input, so it stays the same for a given configuration (the `verbena
//! check` hashes depend on it).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use super::program::{
    Cluster, ExtraStats, FailoverParts, NodeProgram, RunClock, WorkerResult, WorkerStart,
};
use super::{
    check_after_failover, check_stores, load_stores, replicated_layout, CheckSummary, Report,
    RunError, RunOutput,
};
use crate::check::{check_serializable, History};
use crate::config::{Config, FabricKind};
use crate::fabric::threads::ThreadsFabric;
use crate::fabric::NodeId;
use crate::recovery::{Failover, FaultRun, Membership};
use crate::replication::Replication;
use crate::runtime::Worker;
use crate::stats::WorkerStats;
use crate::store::{NodeStore, StoreLayout};
use crate::workloads::{InvariantReport, Workload};

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

/// How a fabric hosts a run's nodes: all of them in this process
/// ([`InProcess`]: `threads`, `sim`) or one per process (a `ucx` rank,
/// `cluster::rank`). The driver ([`run`]) does the rest, the same for
/// every backend: the layout and replication, the cluster, gathering,
/// checking and the report.
pub(crate) trait Backend {
    /// Makes and loads the store of every node this process hosts (in
    /// node order), each with its backup copies.
    fn load_stores<G: NodeProgram, W: Workload>(
        &mut self,
        inputs: &RunInputs<G, W>,
        layout: &ReplicatedLayout,
    ) -> Result<Vec<Arc<NodeStore>>, RunError>;

    /// The run's failure handling, its failover over the `replicated`
    /// stores included; `None` when the run has none. It exists iff the
    /// layout has the detector's heartbeat.
    fn fault_run<G: NodeProgram, W: Workload>(
        &mut self,
        inputs: &RunInputs<G, W>,
        replicated: Option<FailoverParts<'_>>,
    ) -> Option<FaultRun>;

    /// Runs the workers of the nodes this process hosts until the run is
    /// over, and gathers every node's results here; `None` where another
    /// process gathers them (a `ucx` rank other than 0).
    fn run<G: NodeProgram, W: Workload>(
        &mut self,
        inputs: &RunInputs<G, W>,
        cluster: &Cluster,
    ) -> Result<Option<BackendRun<G::Extra>>, RunError>;

    /// The checks of a replicated run with failure handling, over every
    /// node's final stores: each failed partition is read from the copy
    /// that now serves it. The history may gain what only the backend
    /// kept (a dead rank's journal).
    fn check_failed_over<W: Workload>(&self, workload: &W, run: FailedOver<'_>) -> InvariantReport;

    /// What the store check's line adds of where the final stores came
    /// from (nothing: they are this process's own).
    fn stores_scope(&self) -> &'static str {
        ""
    }

    /// Adds the backend's own parts to the report.
    fn finish_report(&mut self, _config: &Config, _report: &mut Report) {}
}

/// What the driver runs, as every step of a backend takes it: the
/// configuration, the node program and the workload.
pub(crate) struct RunInputs<'a, G, W> {
    pub config: &'a Config,
    pub program: &'a G,
    pub workload: &'a W,
}

/// The run's tables with the replication rings reserved, and the
/// replication they serve (`None`: one copy): what every node's store is
/// made from.
pub(crate) struct ReplicatedLayout {
    pub layout: Arc<StoreLayout>,
    pub replication: Option<Arc<Replication>>,
}

/// A replicated run whose failure handling failed nodes over, as its
/// checks take it: the history, every node's final store (in node
/// order), the replication and the failover.
pub(crate) struct FailedOver<'a> {
    pub history: &'a mut History,
    pub stores: &'a [Arc<NodeStore>],
    pub replication: &'a Replication,
    pub failover: &'a Failover,
}

/// What a backend's run hands the driver: every node's results.
pub(crate) struct BackendRun<X> {
    /// Every worker's result, in node and worker order.
    pub results: Vec<WorkerResult<X>>,
    /// The fabric time the run started at.
    pub start_ns: u64,
    /// Rounds workers abandoned at their give-up time (`recovery`).
    pub abandoned_rounds: u64,
    /// Every node's final store, in node order, where the backend gathered
    /// them from other processes; `None`: the cluster's own.
    pub stores: Option<Vec<Arc<NodeStore>>>,
    /// What each surviving node's detector declared, where the backend
    /// gathered it from other processes (times since the start); `None`:
    /// the memberships of the cluster's failure handling.
    pub detections: Option<Vec<Membership>>,
    /// What the simulator saw (`sim` only).
    pub sim: Option<super::sim::SimRun>,
}

/// Runs `program` on the cluster `backend` hosts, from `layout` (the
/// tables, the heartbeat when the run has a detector, and the program's
/// own parts, as [`super::with_program`] made it; the driver adds the
/// replication rings). `None` on a process whose results another gathers.
pub(crate) fn run<G: NodeProgram, W: Workload, B: Backend>(
    config: &Config,
    program: &G,
    workload: &W,
    layout: StoreLayout,
    backend: &mut B,
) -> Result<Option<RunOutput>, RunError> {
    let inputs = RunInputs {
        config,
        program,
        workload,
    };
    let cluster = build_cluster(&inputs, layout, backend)?;
    let Some(mut run) = backend.run(&inputs, &cluster)? else {
        return Ok(None);
    };
    let mut gathered = gather(program, &mut run.results);
    let stores = run.stores.take().unwrap_or_else(|| cluster.stores.clone());
    let check = config.check.then(|| {
        check_run(
            workload,
            backend,
            &cluster,
            &stores,
            &mut gathered.history,
            backend.stores_scope(),
        )
    });
    let replicated = cluster.replication.is_some();
    let mut report = build_report(config, program, workload, &gathered, check, replicated);
    report.sim = run
        .sim
        .as_ref()
        .map(|sim| sim.summary(&gathered.history, &stores));
    report.recovery = cluster.faults.as_ref().map(|faults| {
        let views = match &run.detections {
            Some(views) => views.iter().collect(),
            None => faults.surviving_views(),
        };
        let start_ns = if run.detections.is_some() {
            0
        } else {
            run.start_ns
        };
        let commits = gathered.total.fault_commits;
        faults.report(config, &views, start_ns, commits, run.abandoned_rounds)
    });
    backend.finish_report(config, &mut report);
    let output = RunOutput {
        report,
        history: config.check.then_some(gathered.history),
        stores,
        replication: cluster.replication,
    };
    refuse_stuck_workers(output).map(Some)
}

/// A run whose workers still waited at the simulator's virtual deadline
/// did not finish: what they waited for never came (a crashed peer with
/// no failure detector to declare it, or traffic the transport gave up
/// on), so its numbers describe a run cut short. It fails, with that as
/// the reason, rather than passing silently; the error keeps what the
/// run left for a caller that crashed a node on purpose.
fn refuse_stuck_workers(output: RunOutput) -> Result<RunOutput, RunError> {
    let stuck_workers = output
        .report
        .sim
        .as_ref()
        .map_or(0, |sim| sim.stuck_workers);
    if stuck_workers == 0 {
        return Ok(output);
    }
    Err(RunError::Unfinished {
        stuck_workers,
        output: Box::new(output),
    })
}

/// The cluster a run's program runs on: the layout with its replication,
/// the stores `backend` hosts, and the failure handling.
fn build_cluster<G: NodeProgram, W: Workload, B: Backend>(
    inputs: &RunInputs<G, W>,
    layout: StoreLayout,
    backend: &mut B,
) -> Result<Cluster, RunError> {
    let (layout, replication) = replicated_layout(inputs.config, layout);
    let layout = ReplicatedLayout {
        layout,
        replication,
    };
    let stores = backend.load_stores(inputs, &layout)?;
    let replicated = layout
        .replication
        .as_ref()
        .map(|replication| FailoverParts {
            stores: &stores,
            replication,
        });
    let faults = backend.fault_run(inputs, replicated);
    debug_assert_eq!(faults.is_some(), layout.layout.heartbeat_addr.is_some());
    let attach_faults = faults
        .as_ref()
        .is_some_and(|f| f.failover.is_some() || inputs.program.detector_without_failover());
    Ok(Cluster {
        layout: layout.layout,
        stores,
        replication: layout.replication,
        faults,
        attach_faults,
    })
}

/// The checker's verdict on `history` and the final `stores` (every
/// node's, in node order): after a failover each failed partition is
/// read from its serving copy (as the backend knows how); with
/// replication 1 a crashed node's partition is lost, and the survivors
/// are checked against the history; otherwise every store, invariant and
/// backup. `scope` says where the stores came from.
fn check_run<W: Workload, B: Backend>(
    workload: &W,
    backend: &B,
    cluster: &Cluster,
    stores: &[Arc<NodeStore>],
    history: &mut History,
    scope: &str,
) -> CheckSummary {
    let faults = cluster.faults.as_ref();
    let failover = faults.and_then(|f| f.failover.as_deref());
    if let (Some(failover), Some(replication)) = (failover, &cluster.replication) {
        if failover.failed_nodes().is_empty() {
            // Every node serves its own partition, crashed or not.
            let verdict = check_serializable(history);
            return check_stores(workload, verdict, history, stores, Some(replication), scope);
        }
        let failed_over = FailedOver {
            history,
            stores,
            replication,
            failover,
        };
        let invariants = backend.check_failed_over(workload, failed_over);
        return CheckSummary::new(check_serializable(history), invariants);
    }
    let verdict = check_serializable(history);
    let crashed = |node: usize| faults.is_some_and(|f| f.crashed(node));
    if !(0..stores.len()).any(crashed) {
        return check_stores(
            workload,
            verdict,
            history,
            stores,
            cluster.replication.as_deref(),
            scope,
        );
    }
    // With replication 1 a crashed node's partition is lost, and with
    // it what the invariants sum over: the survivors' stores are
    // checked against the history.
    let mut invariants = InvariantReport {
        ok: true,
        details: vec!["workload invariants not checked: a node crashed and its partition is lost (replication 1)".into()],
    };
    invariants.add_version_check(
        crate::recovery::survivors_match_history(history, stores, crashed),
        "",
    );
    CheckSummary::new(verdict, invariants)
}

/// The backend of a cluster in this process: `threads` or `sim`.
pub(crate) struct InProcess;

impl Backend for InProcess {
    fn load_stores<G: NodeProgram, W: Workload>(
        &mut self,
        inputs: &RunInputs<G, W>,
        layout: &ReplicatedLayout,
    ) -> Result<Vec<Arc<NodeStore>>, RunError> {
        let replication = layout.replication.as_deref();
        load_stores(inputs.config, inputs.workload, &layout.layout, replication)
            .map_err(RunError::Load)
    }

    fn fault_run<G: NodeProgram, W: Workload>(
        &mut self,
        inputs: &RunInputs<G, W>,
        replicated: Option<FailoverParts<'_>>,
    ) -> Option<FaultRun> {
        let program = inputs.program;
        let mut faults = FaultRun::new(inputs.config)?;
        if let Some(parts) = replicated {
            let failover = Arc::new(Failover::new(
                parts.replication.clone(),
                parts.stores.to_vec(),
                program.failover_coroutines(),
                faults.settings.heartbeat_interval_ns / 4,
                program.recovered_header(),
            ));
            program.on_failover(&failover, parts);
            faults.set_failover(failover);
        }
        Some(faults)
    }

    fn run<G: NodeProgram, W: Workload>(
        &mut self,
        inputs: &RunInputs<G, W>,
        cluster: &Cluster,
    ) -> Result<Option<BackendRun<G::Extra>>, RunError> {
        let (config, program) = (inputs.config, inputs.program);
        let run = match config.fabric {
            FabricKind::Threads => run_threads(config, program, cluster),
            FabricKind::Sim => super::sim::run_sim(config, program, cluster),
            FabricKind::Ucx => unreachable!("run_validated refuses the ucx fabric"),
        };
        if let Some(failover) = cluster.faults.as_ref().and_then(|f| f.failover.as_ref()) {
            failover.finish();
        }
        let stuck = run.sim.as_ref().is_some_and(|s| s.stuck_workers > 0);
        program.after_run(cluster, stuck);
        Ok(Some(run))
    }

    fn check_failed_over<W: Workload>(&self, workload: &W, run: FailedOver<'_>) -> InvariantReport {
        check_after_failover(
            workload,
            run.history,
            run.stores,
            run.replication,
            run.failover,
        )
    }
}

/// Runs `program` on a cluster of `config.nodes` nodes in this process
/// (`threads` or `sim`): [`run`] with the [`InProcess`] backend.
pub(crate) fn run_in_process<G: NodeProgram, W: Workload>(
    config: &Config,
    program: &G,
    workload: &W,
    layout: StoreLayout,
) -> Result<RunOutput, RunError> {
    let output = run(config, program, workload, layout, &mut InProcess)?;
    Ok(output.expect("a cluster in one process gathers its own results"))
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
                        let worker = Worker::new(Box::new(endpoint), program.slots(worker_index));
                        ready.wait();
                        go.wait();
                        let clock = RunClock::starting_at(config, start_ns.load(Ordering::SeqCst));
                        let worker = cluster.with_faults(worker, config, program, clock);
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
            faults
                .crashes
                .inject_all(start, |node, at| fabric.crash_node(node, at));
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
            stores: None,
            detections: None,
            sim: None,
        }
    })
}
