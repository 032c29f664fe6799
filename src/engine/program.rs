//! The interface between the driver and what runs on its nodes: a node
//! program ([`NodeProgram`]) is handed the cluster the driver built
//! ([`Cluster`]) and its workers ([`WorkerStart`]), makes their coroutines
//! and services, has a backend run them ([`Drive`]), and returns one
//! [`WorkerResult`] per worker. The staged pipeline every two-phase
//! protocol shares (`engine::coroutine`) and CALVIN (`engine::calvin`) are
//! the two programs; the driver (`engine::driver`) and its backends sit
//! above this interface and know no program.
//!
//! Programs sit on layer 9 of the crate's map and the driver on 10, so
//! this interface, the run's error ([`RunError`]) and the report's type
//! (`engine::report`), which a program fills its part of, live on 9 too.
//!
//! Invariants: `run_workers` returns one result per worker, in the order
//! it was given them; on `sim` the order in which a program makes its
//! coroutines is part of the simulator's input (the recorded hashes depend
//! on it).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::report::Report;
use crate::check::History;
use crate::config::{Config, ConfigError};
use crate::fabric::NodeId;
use crate::recovery::{Failover, FaultRun};
use crate::replication::Replication;
use crate::runtime::{RpcService, Worker};
use crate::stats::WorkerStats;
use crate::store::{LocationCache, NodeStore, StoreError, StoreLayout, TableLayout};

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

impl std::fmt::Debug for RunOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOutput")
            .field("committed", &self.report.committed)
            .field("history", &self.history.is_some())
            .field("stores", &self.stores.len())
            .finish_non_exhaustive()
    }
}

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
    /// A `sim` run whose workers still waited at the virtual deadline on
    /// traffic that never came (a crashed or unreachable peer that no
    /// failure detector declared): it did not finish, and its numbers
    /// describe a run cut short. `output` is what it left, for a caller
    /// that crashed a node on purpose without failover and inspects the
    /// stores itself.
    Unfinished {
        stuck_workers: usize,
        output: Box<RunOutput>,
    },
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Config(e) => write!(f, "invalid configuration: {e}"),
            RunError::Load(e) => write!(f, "loading the workload failed: {e}"),
            RunError::Cluster(e) | RunError::DeclaredFailed(e) => f.write_str(e),
            RunError::Unfinished {
                stuck_workers,
                output,
            } => write!(
                f,
                "{stuck_workers} worker(s) still waited at the virtual deadline on traffic that \
                 never came (a crashed or unreachable peer that no failure detector declared: \
                 add --failure-detector on, or a --fault that turns it on); the run did not \
                 finish. Its report:\n{}",
                output.report.table()
            ),
        }
    }
}

impl std::error::Error for RunError {}

impl From<ConfigError> for RunError {
    fn from(e: ConfigError) -> Self {
        RunError::Config(e)
    }
}

/// Something to do with the run's node program, generic over its type:
/// how the driver, whatever its backend (in process, or a `ucx` rank from
/// `cluster::node`), gets the program of `config`'s protocol,
/// `engine::with_program`.
pub(crate) trait WithProgram {
    type Output;
    /// `layout`: the store's layout for `program` (tables, the heartbeat
    /// when asked for, the program's own parts), before replication.
    fn with<G: NodeProgram>(self, program: &G, layout: StoreLayout) -> Self::Output;
}

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

    /// `worker` with this run's faults attached, when the backend lets
    /// them strike workers (`attach_faults`); as it is otherwise. Every
    /// backend's worker thread calls this once its clock has started.
    pub(crate) fn with_faults<G: NodeProgram>(
        &self,
        worker: Worker,
        config: &Config,
        program: &G,
        clock: RunClock,
    ) -> Worker {
        match self.attached_faults() {
            Some(faults) => {
                faults.attach_in_process(worker, &self.layout, config, program.give_up_ns(clock))
            }
            None => worker,
        }
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
