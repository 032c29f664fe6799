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
use crate::recovery::{Failover, FaultRun};
use crate::runtime::Worker;
use crate::stats::WorkerStats;
use crate::store::StoreLayout;
use crate::workloads::Workload;

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
