//! The engine: builds a cluster from a validated [`Config`], loads the
//! workload, runs every worker's coroutines and event loop for the
//! configured time, and gathers what they measured into a [`Report`]
//! (ARCHITECTURE.md: the protocol is the only moving part — this module is
//! the same for every protocol, generic over it).
//!
//! A run: every node's store is allocated (one registered region per node,
//! laid out identically) and loaded in parallel; one OS thread per
//! `(node, worker)` builds its endpoint, location cache and `coroutines`
//! futures; all start together; the measured interval is
//! `[warmup, warmup + duration)` after the start; after it each coroutine
//! finishes its transaction, drains its passive write-backs, and each worker
//! keeps serving RPCs until every worker is done. With `check` on, the
//! committed history of the whole run (warm-up included: the checker needs
//! every version) goes to the serializability checker, and the final store
//! to the workload's invariants.

mod calvin;
pub mod coroutine;
pub mod report;
mod sim;

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use crate::check::{check_serializable, store_matches_history, History};
use crate::config::{Config, ConfigError, FabricKind, LockMode, WorkloadKind};
use crate::fabric::threads::ThreadsFabric;
use crate::fabric::NodeId;
use crate::protocols::cicada::Cicada;
use crate::protocols::drtm::Drtm;
use crate::protocols::lock2pl::{Lock2pl, Policy};
use crate::protocols::maat::Maat;
use crate::protocols::mvcc::Mvcc;
use crate::protocols::no_wait::NoWait;
use crate::protocols::occ::Occ;
use crate::protocols::sundial::Sundial;
use crate::protocols::timestamp::Timestamp;
use crate::protocols::wait_die::WaitDie;
use crate::protocols::wound_wait::WoundWait;
use crate::protocols::{Protocol, ProtocolKind};
use crate::replication::{self, LogWriter, Replication};
use crate::runtime::{RpcService, Served, Worker};
use crate::stats::WorkerStats;
use crate::store::{LocationCache, NodeStore, StoreError, StoreLayout};
use crate::workloads::pps::Pps;
use crate::workloads::smallbank::SmallBank;
use crate::workloads::tpcc::Tpcc;
use crate::workloads::tpce::Tpce;
use crate::workloads::ycsb::Ycsb;
use crate::workloads::Workload;

pub use coroutine::{backoff_ns, CoroutineEnv};
pub use report::{CheckSummary, Report, SimSummary};
pub use sim::tables_hash;

/// Why a run could not be carried out.
#[derive(Debug)]
pub enum RunError {
    Config(ConfigError),
    Load(StoreError),
    /// A multi-process (`ucx`) run failed: a peer, the network or UCX.
    Cluster(String),
    /// This rank of a fault-tolerant `ucx` run was declared failed by its
    /// peers (they stopped hearing from it) and stopped: its partitions
    /// are served by their backups, and the run goes on without it.
    DeclaredFailed(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Config(e) => write!(f, "invalid configuration: {e}"),
            RunError::Load(e) => write!(f, "loading the workload failed: {e}"),
            RunError::Cluster(e) | RunError::DeclaredFailed(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for RunError {}

impl From<ConfigError> for RunError {
    fn from(e: ConfigError) -> Self {
        RunError::Config(e)
    }
}

/// What a run produced.
pub struct RunOutput {
    pub report: Report,
    /// The committed history, when the run recorded it (`check`).
    pub history: Option<History>,
    /// Every node's store as the run left it (quiescent).
    pub stores: Vec<Arc<NodeStore>>,
    /// The run's replication (placement, rings), when it replicated.
    pub replication: Option<Arc<Replication>>,
}

/// Something to do with the run's workload, generic over its type: the one
/// workload switch every driver shares ([`with_workload`]).
pub trait WithWorkload {
    type Output;
    fn with<W: Workload>(self, workload: &W) -> Self::Output;
}

/// Builds `config`'s workload from its section and hands it to `visitor`.
pub fn with_workload<V: WithWorkload>(config: &Config, visitor: V) -> V::Output {
    match config.workload {
        WorkloadKind::Ycsb => visitor.with(&Ycsb::new(&config.ycsb, config.nodes)),
        WorkloadKind::SmallBank => visitor.with(&SmallBank::new(
            &config.smallbank,
            config.nodes,
            config.workers,
        )),
        WorkloadKind::Pps => visitor.with(&Pps::new(&config.pps, config.nodes)),
        WorkloadKind::TpceCp => visitor.with(&Tpce::new(&config.tpce, config.nodes)),
        WorkloadKind::Tpcc => visitor.with(&Tpcc::new(&config.tpcc, config.nodes, config.seed)),
    }
}

/// Validates `config` and runs it with its workload.
pub fn run(config: &Config) -> Result<RunOutput, RunError> {
    struct Validated<'a>(&'a Config);
    impl WithWorkload for Validated<'_> {
        type Output = Result<RunOutput, RunError>;
        fn with<W: Workload>(self, workload: &W) -> Self::Output {
            run_validated(self.0, workload)
        }
    }
    let mut config = config.clone();
    config.validate()?;
    with_workload(&config, Validated(&config))
}

/// Validates `config` and runs it with a workload of the caller's own (the
/// `ycsb` section of the config is then unused): the way to bring a new
/// workload to every protocol and stage choice without touching verbena.
pub fn run_custom<W: Workload>(config: &Config, workload: &W) -> Result<RunOutput, RunError> {
    let mut config = config.clone();
    config.validate()?;
    run_validated(&config, workload)
}

/// Validates `config` and runs it with a protocol instance and a workload of
/// the caller's own (`config.protocol` must name the protocol's kind): how
/// tests run a protocol with a test hook set.
pub fn run_protocol<P: Protocol, W: Workload>(
    config: &Config,
    protocol: &P,
    workload: &W,
) -> Result<RunOutput, RunError> {
    let mut config = config.clone();
    config.validate()?;
    debug_assert_eq!(config.protocol, P::KIND);
    run_workload(&config, protocol, workload)
}

/// Something to do with the run's protocol, generic over its type: how
/// every driver (threads and sim here, the ucx node in `cluster`) shares one
/// protocol switch, [`with_protocol`].
pub trait WithProtocol {
    type Output;
    fn with<P: Protocol>(self, protocol: &P) -> Self::Output;
}

/// Builds `config`'s protocol from its options and hands it to `visitor`;
/// `None` for CALVIN, which has an engine path of its own
/// (`engine::calvin`).
pub fn with_protocol<V: WithProtocol>(config: &Config, visitor: V) -> Option<V::Output> {
    let options = &config.protocol_options;
    let lock2pl = |policy| Lock2pl {
        policy,
        shared: options.lock_mode == LockMode::Shared,
        starvation_fix: options.wait_die_starvation_fix,
    };
    Some(match config.protocol {
        ProtocolKind::NoWait => visitor.with(&NoWait(lock2pl(Policy::NoWait))),
        ProtocolKind::WaitDie => visitor.with(&WaitDie(lock2pl(Policy::WaitDie))),
        ProtocolKind::WoundWait => visitor.with(&WoundWait(lock2pl(Policy::WoundWait))),
        ProtocolKind::Occ => visitor.with(&Occ {
            skip_validation: config.unsafe_skip_occ_validation,
        }),
        ProtocolKind::Timestamp => visitor.with(&Timestamp::new(config)),
        ProtocolKind::Mvcc => visitor.with(&Mvcc::new(config)),
        ProtocolKind::Maat => visitor.with(&Maat::new(options.maat_list_capacity)),
        ProtocolKind::Cicada => visitor.with(&Cicada::new(options.cicada_versions)),
        ProtocolKind::Sundial => visitor.with(&Sundial),
        ProtocolKind::Drtm => visitor.with(&Drtm {
            lease_ns: options.drtm_lease_ns,
            delta_ns: options.drtm_delta_ns,
        }),
        ProtocolKind::Calvin => return None,
    })
}

/// Runs a validated config's protocol with `workload` on threads or sim.
struct RunWith<'a, W> {
    config: &'a Config,
    workload: &'a W,
}

impl<W: Workload> WithProtocol for RunWith<'_, W> {
    type Output = Result<RunOutput, RunError>;
    fn with<P: Protocol>(self, protocol: &P) -> Self::Output {
        run_workload(self.config, protocol, self.workload)
    }
}

fn run_validated<W: Workload>(config: &Config, workload: &W) -> Result<RunOutput, RunError> {
    if config.fabric == FabricKind::Ucx {
        return Err(RunError::Config(ConfigError(UCX_ONE_PROCESS.into())));
    }
    match with_protocol(config, RunWith { config, workload }) {
        Some(output) => output,
        // Deterministic: its own engine path (`engine::calvin`).
        None => calvin::run_calvin(config, workload),
    }
}

/// Why `run` refuses the `ucx` fabric (each node is a process of its own).
pub const UCX_ONE_PROCESS: &str = "fabric ucx runs one process per node: start it with `verbena launch --local N [flags]`, `verbena launch --hosts FILE [flags]`, or one `verbena node --rank R --nodes N --bootstrap HOST:PORT [flags]` per node";

/// Serves the two-sided form of `P`'s stages on one node, and the
/// replication layer's log messages and background apply.
pub(crate) struct Service<'a, P: Protocol> {
    protocol: &'a P,
    store: &'a NodeStore,
    replication: Option<&'a Replication>,
    /// The backup apply's record buffer (kept for its capacity).
    scratch: RefCell<Vec<u64>>,
}

impl<'a, P: Protocol> Service<'a, P> {
    pub(crate) fn new(
        protocol: &'a P,
        store: &'a NodeStore,
        replication: Option<&'a Replication>,
    ) -> Self {
        Service {
            protocol,
            store,
            replication,
            scratch: RefCell::new(Vec::new()),
        }
    }
}

impl<P: Protocol> RpcService for Service<'_, P> {
    fn serve(&self, kind: u16, payload: &mut Vec<u64>, now_ns: u64) -> Served {
        if let Some(replication) = self.replication {
            if replication::log::kind::owned(kind) {
                if let Some(served) = replication.serve(self.store, kind, payload) {
                    return served;
                }
            }
        }
        self.protocol.serve(self.store, kind, payload, now_ns)
    }

    fn waiting_rank(&self, kind: u16, payload: &[u64]) -> u64 {
        self.protocol.waiting_rank(kind, payload)
    }

    fn background(&self, worker: u16) -> bool {
        match self.replication {
            Some(replication) => {
                replication.poll(self.store, worker, &mut self.scratch.borrow_mut())
            }
            None => false,
        }
    }
}

/// Allocates and loads every node's store, one loader thread per node.
fn load_stores<W: Workload>(
    config: &Config,
    workload: &W,
    layout: &Arc<StoreLayout>,
    replication: Option<&Replication>,
) -> Result<Vec<Arc<NodeStore>>, StoreError> {
    let stores: Vec<Arc<NodeStore>> = (0..config.nodes)
        .map(|node| Arc::new(NodeStore::new(node as NodeId, layout.clone())))
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for chunk in stores.chunks(cores) {
        std::thread::scope(|scope| {
            let loaders: Vec<_> = chunk
                .iter()
                .map(|store| {
                    scope.spawn(|| {
                        workload.load(store)?;
                        match replication {
                            Some(r) => replication::load_backups(workload, store, &r.placement),
                            None => Ok(()),
                        }
                    })
                })
                .collect();
            loaders
                .into_iter()
                .map(|loader| loader.join().expect("a loader thread panicked"))
                .collect::<Result<Vec<()>, StoreError>>()
        })?;
    }
    Ok(stores)
}

fn run_workload<P: Protocol, W: Workload>(
    config: &Config,
    protocol: &P,
    workload: &W,
) -> Result<RunOutput, RunError> {
    let mut faults = crate::fault::FaultRun::new(config);
    let mut layout = StoreLayout::with_copies(
        &workload.tables(),
        |r| protocol.header_words_of(r),
        config.replication,
    )
    .with_txn_meta(
        config.workers as u16,
        config.coroutines as u16,
        P::txn_meta_words(config.nodes),
    );
    if faults.is_some() {
        layout = layout.with_heartbeat();
    }
    let (layout, replication) = replicated_layout(config, layout);
    let stores =
        load_stores(config, workload, &layout, replication.as_deref()).map_err(RunError::Load)?;
    if let (Some(faults), Some(replication)) = (faults.as_mut(), &replication) {
        let poll_ns = faults.settings.heartbeat_interval_ns / 4;
        faults.set_failover(Arc::new(replication::Failover::new(
            replication.clone(),
            stores.clone(),
            config.workers * config.coroutines,
            poll_ns,
            P::recovered_header,
        )));
    }
    let (results, sim_run, fault_out) = match config.fabric {
        FabricKind::Threads => {
            let (results, fault_out) = run_threads(
                config,
                protocol,
                workload,
                &layout,
                &stores,
                replication.as_ref(),
                faults.as_ref(),
            );
            (results, None, fault_out)
        }
        FabricKind::Sim => {
            let (results, sim_run) = sim::run_sim(
                config,
                protocol,
                workload,
                &layout,
                &stores,
                replication.as_ref(),
                faults.as_ref(),
            );
            let fault_out = FaultOutcome {
                start_ns: sim::START_NS,
                abandoned_rounds: sim_run.abandoned_rounds,
            };
            (results, Some(sim_run), fault_out)
        }
        FabricKind::Ucx => unreachable!("run_validated refuses the ucx fabric"),
    };

    let mut total = WorkerStats::new();
    let mut history = History::new();
    for (stats, worker_history) in &results {
        total.merge(stats);
        history.append(worker_history);
    }
    let failover = faults.as_ref().and_then(|f| f.failover.clone());
    if let Some(failover) = &failover {
        failover.finish();
    }
    let check = config.check.then(|| {
        let verdict = check_serializable(&history);
        if let (Some(failover), Some(replication)) = (&failover, &replication) {
            return CheckSummary::new(
                verdict,
                check_after_failover(workload, &history, &stores, replication, failover),
            );
        }
        let crashed = |node: usize| faults.as_ref().is_some_and(|f| f.crashed(node));
        if !(0..stores.len()).any(crashed) {
            return check_stores(workload, verdict, &history, &stores, replication.as_deref(), "");
        }
        // With replication 1 a crashed node's partition is lost, and with
        // it what the invariants sum over: the survivors' stores are
        // checked against the history.
        let mut invariants = crate::workloads::InvariantReport {
            ok: true,
            details: vec!["workload invariants not checked: a node crashed and its partition is lost (replication 1)".into()],
        };
        invariants.add_version_check(
            crate::fault::survivors_match_history(&history, &stores, crashed),
            "",
        );
        CheckSummary::new(verdict, invariants)
    });
    let per_worker_committed: Vec<u64> = results.iter().map(|(s, _)| s.committed).collect();
    let mut report = Report::build(
        config,
        workload.name(),
        workload.txn_types(),
        &total,
        &per_worker_committed,
        check,
    );
    report.sim = sim_run.map(|run| run.summary(&history, &stores));
    report.recovery = faults.as_ref().map(|f| {
        f.report(
            config,
            total.fault_commits,
            fault_out.abandoned_rounds,
            fault_out.start_ns,
        )
    });
    Ok(RunOutput {
        report,
        history: config.check.then_some(history),
        stores,
        replication,
    })
}

/// What every driver checks after a run in which no node failed: the
/// history's serializability (`verdict`), the workload's invariants over
/// every node's store, every tuple's version against the last committed
/// write of it, and every backup copy against its primary. `scope` is
/// appended to the version line (where the stores came from).
pub(crate) fn check_stores<W: Workload>(
    workload: &W,
    verdict: crate::check::CheckReport,
    history: &History,
    stores: &[Arc<NodeStore>],
    replication: Option<&Replication>,
    scope: &str,
) -> CheckSummary {
    let mut invariants = workload.check_invariants(stores, history);
    invariants.add_version_check(store_matches_history(history, stores), scope);
    if let Some(replication) = replication {
        replication::check_backups(replication, stores, &[], &mut invariants);
    }
    CheckSummary::new(verdict, invariants)
}

/// The checks of a replicated run with failure handling: every failed
/// partition is read from its promoted copy, so the whole cluster's state
/// is checked against the history of acknowledged commits exactly (every
/// acknowledged commit's writes present, nothing uncommitted visible), the
/// workload invariants hold over every partition, and every remaining
/// backup copy equals the copy that now serves its partition.
pub(crate) fn check_after_failover<W: Workload>(
    workload: &W,
    history: &History,
    stores: &[Arc<NodeStore>],
    replication: &Replication,
    failover: &replication::Failover,
) -> crate::workloads::InvariantReport {
    let failed = failover.failed_nodes();
    let placement = replication.placement;
    let mut serving_stores = Vec::with_capacity(stores.len());
    for store in stores {
        let partition = store.node;
        if !failed.contains(&partition) {
            serving_stores.push(store.clone());
            continue;
        }
        let node = failover.serving(partition);
        let copy = placement
            .copy_on(node, partition)
            .expect("a partition is served by a node holding a copy of it");
        match stores[node as usize].extract_copy(partition, copy) {
            Ok(copy) => serving_stores.push(Arc::new(copy)),
            Err(e) => {
                return crate::workloads::InvariantReport {
                    ok: false,
                    details: vec![format!(
                    "partition {partition}'s promoted copy on node {node} could not be read: {e}"
                )],
                }
            }
        }
    }
    let mut invariants = workload.check_invariants(&serving_stores, history);
    invariants.add_version_check(
        store_matches_history(history, &serving_stores),
        &format!(" (failed nodes {failed:?}: their partitions read from the promoted copies)"),
    );
    replication::check_backups(replication, &serving_stores, &failed, &mut invariants);
    invariants
}

/// `layout` with the replication rings reserved when `config` replicates,
/// and the run's replication (`None` at factor 1).
pub(crate) fn replicated_layout(
    config: &Config,
    mut layout: StoreLayout,
) -> (Arc<StoreLayout>, Option<Arc<Replication>>) {
    let replication = replication::setup(
        &mut layout,
        config.nodes,
        config.workers as u16,
        config.replication,
        config.ring_words(),
    );
    (Arc::new(layout), replication)
}

/// What a driver tells the report's `recovery` about its run.
#[derive(Default)]
struct FaultOutcome {
    /// The fabric time the run started at.
    start_ns: u64,
    abandoned_rounds: u64,
}

/// Runs every worker on an OS thread of its own, in wall time.
fn run_threads<P: Protocol, W: Workload>(
    config: &Config,
    protocol: &P,
    workload: &W,
    layout: &Arc<StoreLayout>,
    stores: &[Arc<NodeStore>],
    replication: Option<&Arc<Replication>>,
    faults: Option<&crate::fault::FaultRun>,
) -> (Vec<(WorkerStats, History)>, FaultOutcome) {
    let fabric = ThreadsFabric::new(
        stores.iter().map(|s| s.region.clone()).collect(),
        config.workers as u16,
        config.threads_latency(),
    );
    let abandoned = AtomicU64::new(0);
    let total_workers = config.total_workers() as usize;
    let ready = Barrier::new(total_workers + 1);
    let go = Barrier::new(total_workers + 1);
    let start_ns = AtomicU64::new(0);
    let finished = AtomicUsize::new(0);
    let warmup_ns = (config.warmup_s * 1e9) as u64;
    let duration_ns = (config.duration_s * 1e9) as u64;

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
                            Worker::new(Box::new(endpoint), config.coroutines as usize);
                        let cache = RefCell::new(LocationCache::new(config.location_cache_entries));
                        let stats = RefCell::new(WorkerStats::new());
                        let history = RefCell::new(History::new());
                        let service = Service::new(
                            protocol,
                            &stores[node as usize],
                            replication.map(|r| &**r),
                        );
                        let log_writer =
                            replication.map(|r| LogWriter::new(r.clone(), node, worker_index));
                        ready.wait();
                        go.wait();
                        let start = start_ns.load(Ordering::SeqCst);
                        let end = start + warmup_ns + duration_ns;
                        if let Some(faults) = faults {
                            worker = faults.attach_in_process(worker, layout, config, end);
                        }
                        let env = CoroutineEnv {
                            worker: &worker,
                            layout,
                            local_store: &stores[node as usize],
                            cache: &cache,
                            stats: &stats,
                            history: config.check.then_some(&history),
                            protocol,
                            workload,
                            plan: config.stages,
                            backoff: config.backoff,
                            seed: config.seed,
                            warmup_end_ns: start + warmup_ns,
                            end_ns: end,
                            log: log_writer.as_ref(),
                            fault_at_ns: faults
                                .map_or(u64::MAX, |f| start.saturating_add(f.first_fault_ns)),
                            record_at_commit_point: faults.is_some(),
                        };
                        let mut coroutines: Vec<Pin<Box<dyn Future<Output = ()> + '_>>> = (0
                            ..config.coroutines as u16)
                            .map(|co| {
                                Box::pin(coroutine::run_coroutine(&env, co))
                                    as Pin<Box<dyn Future<Output = ()> + '_>>
                            })
                            .collect();
                        worker.run(&mut coroutines, &service, finished, total_workers);
                        drop(coroutines);
                        abandoned.fetch_add(worker.abandoned_rounds(), Ordering::Relaxed);
                        let mut stats = stats.into_inner();
                        stats.close();
                        let cache = cache.into_inner();
                        stats.cache_hits = cache.hits;
                        stats.cache_misses = cache.misses;
                        (stats, history.into_inner())
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
        let outcome = FaultOutcome {
            start_ns: start,
            abandoned_rounds: abandoned.load(Ordering::Relaxed),
        };
        (results, outcome)
    })
}
