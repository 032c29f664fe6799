//! The engine: builds a cluster from a validated [`Config`], loads the
//! workload, runs every worker's coroutines and event loop for the
//! configured time, and gathers what they measured into a [`Report`]
//! (docs/ARCHITECTURE.md: the protocol is the only moving part — this module is
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
//!
//! What a worker runs is a node program, and how its fabric runs workers
//! is a backend: both meet in one driver (`engine::driver`), which every
//! fabric — a `ucx` rank too — goes through.

pub mod calvin;
pub mod coroutine;
pub(crate) mod driver;
pub(crate) mod program;
pub mod report;
mod sim;

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::base::protocol_kind::builtin_protocols;
use crate::base::ProtocolKind;
use crate::check::{store_matches_history, History};
use crate::config::{Config, ConfigError, FabricKind, WorkloadKind};
use crate::fabric::NodeId;
use crate::protocols;
use crate::replication::{self, LogWriter, Replication};
use crate::runtime::{RpcService, Served};
use crate::store::{NodeStore, StoreError, StoreLayout};
use crate::txn::{FromConfig, Protocol};
use crate::workloads::pps::Pps;
use crate::workloads::smallbank::SmallBank;
use crate::workloads::tpcc::Tpcc;
use crate::workloads::tpce::Tpce;
use crate::workloads::ycsb::Ycsb;
use crate::workloads::Workload;

pub use coroutine::{backoff_ns, CoroutineEnv};
pub(crate) use program::WithProgram;
pub use program::{RunError, RunOutput};
pub use report::{CheckSummary, Report, SimSummary};
pub use sim::tables_hash;

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
    validate(&mut config)?;
    with_workload(&config, Validated(&config))
}

/// Checks `config` as a run will use it: every value, resolving the
/// stage plan (`Config::validate`), then whether the workload's tables fit
/// in memory (`workloads::check_footprint`, which knows their schemas).
/// Every entry point that runs a config goes through this.
pub fn validate(config: &mut Config) -> Result<(), ConfigError> {
    config.validate()?;
    crate::workloads::check_footprint(config)
}

/// Validates `config` and runs it with a workload of the caller's own (the
/// `ycsb` section of the config is then unused): the way to bring a new
/// workload to every protocol and stage choice without touching verbena.
pub fn run_custom<W: Workload>(config: &Config, workload: &W) -> Result<RunOutput, RunError> {
    let mut config = config.clone();
    validate(&mut config)?;
    run_validated(&config, workload)
}

/// Validates `config` and runs it with a protocol of the caller's own on
/// the config's workload: the way to bring a new protocol to every
/// workload, fabric in one process (`threads`, `sim`) and stage choice
/// without touching verbena (`docs/WRITING_A_PROTOCOL.md`). The twin of
/// [`run_custom`]. `config.protocol` is replaced by `P::KIND`, whose stage
/// list the plan is resolved against; with `check` on, the report's
/// `check` holds the serializability checker's verdict and the
/// workload's invariants.
pub fn run_custom_protocol<P: Protocol>(
    config: &Config,
    protocol: &P,
) -> Result<RunOutput, RunError> {
    struct WithCustom<'a, P>(&'a Config, &'a P);
    impl<P: Protocol> WithWorkload for WithCustom<'_, P> {
        type Output = Result<RunOutput, RunError>;
        fn with<W: Workload>(self, workload: &W) -> Self::Output {
            run_staged(self.0, self.1, workload)
        }
    }
    let config = validated_for::<P>(config)?;
    with_workload(&config, WithCustom(&config, protocol))
}

/// Validates `config` and runs it with a protocol instance and a workload,
/// both the caller's own: how tests run a protocol with a test hook set,
/// and a protocol written outside verbena on a workload written outside
/// it. `config.protocol` is replaced by `P::KIND`, as in
/// [`run_custom_protocol`].
pub fn run_protocol<P: Protocol, W: Workload>(
    config: &Config,
    protocol: &P,
    workload: &W,
) -> Result<RunOutput, RunError> {
    let config = validated_for::<P>(config)?;
    run_staged(&config, protocol, workload)
}

/// `config` validated for running `P` in this process: its protocol named
/// by `P::KIND`, a custom kind's name and stages accepted
/// (`ProtocolKind::check_custom`), and a fabric of one process.
fn validated_for<P: Protocol>(config: &Config) -> Result<Config, RunError> {
    if config.fabric == FabricKind::Ucx {
        return Err(RunError::Config(ConfigError(UCX_ONE_PROCESS.into())));
    }
    validated_protocol::<P>(config.clone())
}

/// `config` validated for running `P` on any fabric: its protocol named
/// by `P::KIND`, a custom kind's name and stages accepted. A ucx rank
/// (`cluster::node::run_node_custom_protocol`) starts here.
pub(crate) fn validated_protocol<P: Protocol>(mut config: Config) -> Result<Config, RunError> {
    config.protocol = P::KIND;
    P::KIND.check_custom(P::ACCESS_STAGE).map_err(ConfigError)?;
    validate(&mut config)?;
    Ok(config)
}

/// Runs a validated config with `protocol`'s stage pipeline on threads or
/// sim.
fn run_staged<P: Protocol, W: Workload>(
    config: &Config,
    protocol: &P,
    workload: &W,
) -> Result<RunOutput, RunError> {
    let program = StagedProgram {
        config,
        protocol,
        workload,
    };
    let heartbeat = crate::config::faults::DetectorSettings::of(config).is_some();
    driver::run_in_process(config, &program, workload, program.layout(heartbeat))
}

/// Something to do with the run's protocol, generic over its type: how
/// every driver (threads and sim here, the ucx node in `cluster`) shares one
/// protocol switch, [`with_protocol`].
pub trait WithProtocol {
    type Output;
    fn with<P: Protocol>(self, protocol: &P) -> Self::Output;
}

/// Builds `config`'s protocol from its options and hands it to `visitor`;
/// `None` for CALVIN, which is a node program of its own
/// (`engine::calvin`, `with_program`), and for a custom protocol, which
/// only the caller that links its code can build.
pub fn with_protocol<V: WithProtocol>(config: &Config, visitor: V) -> Option<V::Output> {
    // One arm per line of the registry (`base::protocol_kind`): a
    // `protocol(T)` line builds `T` from the config, a `program(…)` line
    // has no `Protocol` to hand over.
    macro_rules! build {
        (protocol($protocol:ty)) => {
            Some(visitor.with(&<$protocol as FromConfig>::from_config(config)))
        };
        (program($($program:tt)*)) => {
            None
        };
    }
    macro_rules! switch {
        (() $($variant:ident $name:literal [$($stage:ident),*] => $how:ident($($build:tt)*);)*) => {
            match config.protocol {
                $(ProtocolKind::$variant => build!($how($($build)*)),)*
                ProtocolKind::Custom(_) => None,
            }
        };
    }
    builtin_protocols!(switch!())
}

/// Builds the node program of `config`'s protocol with `workload` — the
/// stage pipeline of a [`Protocol`], or CALVIN's — and its store layout
/// (with the detector's heartbeat word when `heartbeat`), and hands both
/// to `visitor`.
pub(crate) fn with_program<W: Workload, V: WithProgram>(
    config: &Config,
    workload: &W,
    heartbeat: bool,
    visitor: V,
) -> Result<V::Output, RunError> {
    struct Staged<'a, W, V> {
        config: &'a Config,
        workload: &'a W,
        heartbeat: bool,
        visitor: V,
    }
    impl<W: Workload, V: WithProgram> WithProtocol for Staged<'_, W, V> {
        type Output = V::Output;
        fn with<P: Protocol>(self, protocol: &P) -> V::Output {
            with_staged_program(
                self.config,
                protocol,
                self.workload,
                self.heartbeat,
                self.visitor,
            )
        }
    }
    if config.protocol == ProtocolKind::Calvin {
        return calvin::with_calvin_program(config, workload, heartbeat, visitor);
    }
    if let ProtocolKind::Custom(custom) = config.protocol {
        return Err(RunError::Config(ConfigError(format!(
            "protocol {} is written outside verbena: run it with `engine::run_custom_protocol` (threads, sim) or `cluster::node::run_node_custom_protocol` (one ucx rank), which are given its code",
            custom.name
        ))));
    }
    let staged = Staged {
        config,
        workload,
        heartbeat,
        visitor,
    };
    Ok(with_protocol(config, staged).expect("with_protocol builds every protocol but CALVIN"))
}

/// Builds the stage pipeline of `protocol` with `workload` and its store
/// layout (with the detector's heartbeat word when `heartbeat`), and hands
/// both to `visitor`: a built-in protocol's program and a custom one's
/// alike.
pub(crate) fn with_staged_program<P: Protocol, W: Workload, V: WithProgram>(
    config: &Config,
    protocol: &P,
    workload: &W,
    heartbeat: bool,
    visitor: V,
) -> V::Output {
    let program = StagedProgram {
        config,
        protocol,
        workload,
    };
    let layout = program.layout(heartbeat);
    visitor.with(&program, layout)
}

/// Runs a validated config's program on threads or sim.
fn run_validated<W: Workload>(config: &Config, workload: &W) -> Result<RunOutput, RunError> {
    if config.fabric == FabricKind::Ucx {
        return Err(RunError::Config(ConfigError(UCX_ONE_PROCESS.into())));
    }
    struct InProcess<'a, W> {
        config: &'a Config,
        workload: &'a W,
    }
    impl<W: Workload> WithProgram for InProcess<'_, W> {
        type Output = Result<RunOutput, RunError>;
        fn with<G: program::NodeProgram>(self, program: &G, layout: StoreLayout) -> Self::Output {
            driver::run_in_process(self.config, program, self.workload, layout)
        }
    }
    let heartbeat = crate::config::faults::DetectorSettings::of(config).is_some();
    with_program(config, workload, heartbeat, InProcess { config, workload })?
}

/// The node program of a [`Protocol`]: every worker runs `coroutines`
/// transaction coroutines through the stage pipeline
/// (`engine::coroutine`), and serves the two-sided form of its stages and
/// the replication log ([`Service`]).
pub(crate) struct StagedProgram<'a, P, W> {
    config: &'a Config,
    protocol: &'a P,
    workload: &'a W,
}

impl<P: Protocol, W: Workload> StagedProgram<'_, P, W> {
    /// The tables laid out with the protocol's headers, every coroutine's
    /// transaction metadata, and the heartbeat word when asked for.
    fn layout(&self, heartbeat: bool) -> StoreLayout {
        let config = self.config;
        let layout = StoreLayout::with_copies(
            &self.workload.tables(),
            |r| self.protocol.header_words_of(r),
            config.replication,
        )
        .with_txn_meta(
            config.workers as u16,
            config.coroutines as u16,
            P::txn_meta_words(config.nodes),
        );
        if heartbeat {
            layout.with_heartbeat()
        } else {
            layout
        }
    }
}

impl<P: Protocol, W: Workload> program::NodeProgram for StagedProgram<'_, P, W> {
    type Extra = ();

    fn slots(&self, _index: u16) -> usize {
        self.config.coroutines as usize
    }

    fn run_workers(
        &self,
        cluster: &program::Cluster,
        start: program::WorkerStart<'_>,
        drive: program::Drive<'_>,
    ) -> Vec<program::WorkerResult<()>> {
        let config = self.config;
        let workers = start.workers;
        // Only one-sided stages look a location up in the cache; under a
        // plan without any, the slots RPC replies carry would be stored
        // and never read: a cold cache line written per access.
        let cache_entries = if config.stages.code() == 0 {
            0
        } else {
            config.location_cache_entries
        };
        let cells = program::WorkerCells::new(start.histories, cache_entries);
        if config.location_cache_warm && cache_entries > 0 {
            // One warm cache, copied to every worker: each would put the
            // same rows in the same order.
            let mut warm = crate::store::LocationCache::new(cache_entries);
            warm.warm(&cluster.stores);
            for cache in &cells.caches {
                *cache.borrow_mut() = warm.clone();
            }
        }
        let replication = cluster.replication.as_deref();
        let services: Vec<Service<P>> = program::nodes_of(workers)
            .map(|node| Service::new(self.protocol, cluster.store(node), replication))
            .collect();
        let log_writers = program::log_writers(cluster, workers, LogWriter::new);
        let clock = start.clock;
        let envs: Vec<CoroutineEnv<P, W>> = workers
            .iter()
            .enumerate()
            .map(|(index, worker)| CoroutineEnv {
                worker,
                layout: &cluster.layout,
                local_store: cluster.store(worker.node),
                cache: &cells.caches[index],
                stats: &cells.stats[index],
                history: start.record_history.then_some(&cells.histories[index]),
                protocol: self.protocol,
                workload: self.workload,
                plan: config.stages,
                backoff: config.backoff,
                seed: config.seed,
                warmup_end_ns: clock.warmup_end_ns,
                end_ns: clock.end_ns,
                log: log_writers[index].as_ref(),
                fault_at_ns: cluster.fault_at_ns(clock.start_ns),
                record_at_commit_point: cluster.attached_faults().is_some(),
            })
            .collect();
        let mut coroutines: Vec<program::Coroutines> = envs
            .iter()
            .map(|env| {
                (0..config.coroutines as u16)
                    .map(|co| {
                        Box::pin(coroutine::run_coroutine(env, co))
                            as Pin<Box<dyn Future<Output = ()> + '_>>
                    })
                    .collect()
            })
            .collect();
        drive(
            &mut coroutines,
            &program::service_of_each(workers, &services),
        );
        drop(coroutines);
        drop(envs);
        cells.close(std::iter::repeat(()))
    }

    fn failover_coroutines(&self) -> u32 {
        self.config.workers * self.config.coroutines
    }

    fn recovered_header(&self) -> fn(&crate::store::TableLayout, &mut [u64]) {
        P::recovered_header
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
                            Some(r) => replication::load_backups(store, &r.placement, |view| {
                                workload.load(view)
                            }),
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
    failover: &crate::recovery::Failover,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What a registry line built: its protocol's kind and stage list.
    struct KindOf;
    impl WithProtocol for KindOf {
        type Output = ProtocolKind;
        fn with<P: Protocol>(self, _protocol: &P) -> ProtocolKind {
            P::KIND
        }
    }

    /// Each line of the registry names a type whose own kind is that
    /// line's: a line pasted with the wrong type would run one protocol
    /// under another's name and stage list.
    #[test]
    fn every_registered_protocol_builds_as_its_own_kind() {
        for kind in ProtocolKind::ALL {
            let config = Config {
                protocol: kind,
                ..Config::default()
            };
            match with_protocol(&config, KindOf) {
                Some(built) => assert_eq!(built, kind, "{}", kind.name()),
                None => assert_eq!(kind, ProtocolKind::Calvin, "{} built nothing", kind.name()),
            }
        }
    }
}
