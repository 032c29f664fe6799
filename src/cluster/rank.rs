//! A `ucx` rank as a backend of the one driver (`engine::driver`): this
//! process hosts node `rank` (its store, loaded here, and its workers as
//! threads); every other node is another process, reached through UCX.
//! The driver builds the cluster, checks and reports as for `threads`;
//! what is a rank's own is here: the UCX context, the bootstrap exchange,
//! the control loop, and gathering every rank's results on rank 0.
//!
//! Sequence (every wait bounded, see `bootstrap`):
//! 1. load this node's partition into a region registered with UCX
//!    ([`RankBackend::load_stores`]);
//! 2. each worker thread creates its `ucp_worker` and hands its address to
//!    the main thread;
//! 3. join: addresses, rkeys and region layouts of every rank are exchanged
//!    (rank 0 admits only ranks of this job — the job key and job id of
//!    `cluster::auth` — and checks that every rank runs the same
//!    configuration and the same region size);
//! 4. each worker connects to the worker of its index on every node, then a
//!    cluster barrier (`Ready` → `Go`) starts every rank's clock;
//! 5. the main thread watches: its workers' progress, peers' heartbeats and
//!    UCX's peer-failure flag; a rank whose workers all finished says
//!    `Done`; when all have, rank 0 says `AllDone` and the workers stop
//!    serving (until then they serve RPCs and UCX progress for their peers);
//! 6. every rank sends rank 0 its workers' statistics, its history and —
//!    with `check` — an image of its region and what the workload keeps of
//!    its node outside the region (`Workload::export_node_local`: TPC-C's
//!    ordered indexes); rank 0 hands them to the driver, which checks and
//!    reports them as a `threads` run's, plus the processes and the
//!    transports UCX chose ([`RankBackend::finish_report`]).
//!
//! Endpoints are torn down only after the results are in, so a rank that
//! finished early never looks like a failed peer to one still finishing.
//!
//! A replicated run with the failure detector on tolerates the death of a
//! rank other than 0: the survivors fail it over (`cluster::failover`) and
//! go on; rank 0 gathers the survivors' results, and the dead rank's
//! history is read back from its journal (`node::check_after_lost_rank`).
//!
//! The worker threads are in `worker`, the main thread's part from the
//! join on in `control`.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use super::bootstrap::{hostname, Bootstrap, BootstrapOptions, RankInfo};
use super::launch::NodeOptions;
use super::node::{check_after_lost_rank, detections_of, journal_prefix};
use super::wire;
use crate::config::{Config, UcxTransport};
use crate::engine::driver::{Backend, BackendRun, FailedOver, ReplicatedLayout, RunInputs};
use crate::engine::program::{Cluster, FailoverParts, NodeProgram, WorkerResult};
use crate::engine::report::{ClusterSummary, Report};
use crate::engine::RunError;
use crate::fabric::ucx::{PeerInfo, TransportChoice, UcxContext};
use crate::fabric::NodeId;
use crate::recovery::{Failover, FaultRun, Membership, NoRecovery, RankVerdicts};
use crate::store::NodeStore;
use crate::workloads::{InvariantReport, Workload};

mod control;
mod worker;

use control::Control;
use worker::{ReadyReport, WorkerLinks, WorkerThread};

/// The backend of one rank: made from the launch's options, it holds the
/// UCX context from loading on, and on rank 0 what the report takes of
/// the other ranks.
pub(crate) struct RankBackend<'o> {
    options: &'o NodeOptions,
    context: Option<UcxContext>,
    /// Where the ranks' history journals live (a checked run with failover).
    journal_prefix: Option<String>,
    /// Worker threads per rank, as the journals are named.
    workers: u16,
    /// What this rank's endpoints go by in a fault-tolerant run.
    verdicts: Option<Arc<RankVerdicts>>,
    /// Rank 0, after the run: the processes and the transports UCX chose,
    /// and whether every rank ran on one host.
    summary: Option<(ClusterSummary, bool)>,
}

impl<'o> RankBackend<'o> {
    pub(crate) fn new(options: &'o NodeOptions) -> RankBackend<'o> {
        RankBackend {
            options,
            context: None,
            journal_prefix: None,
            workers: 0,
            verdicts: None,
            summary: None,
        }
    }

    fn context(&self) -> &UcxContext {
        self.context
            .as_ref()
            .expect("load_stores made the UCX context")
    }
}

fn cluster<E: std::fmt::Display>(e: E) -> RunError {
    RunError::Cluster(e.to_string())
}

impl Backend for RankBackend<'_> {
    fn load_stores<G: NodeProgram, W: Workload>(
        &mut self,
        inputs: &RunInputs<G, W>,
        layout: &ReplicatedLayout,
    ) -> Result<Vec<Arc<NodeStore>>, RunError> {
        let (config, workload) = (inputs.config, inputs.workload);
        let ReplicatedLayout {
            layout,
            replication,
        } = layout;
        let rank = self.options.rank;
        self.workers = config.workers as u16;
        let transport = match config.ucx.transport {
            UcxTransport::Shm => TransportChoice::Shm,
            UcxTransport::Tcp => TransportChoice::Tcp,
            UcxTransport::Rdma => TransportChoice::Rdma,
            UcxTransport::Auto => TransportChoice::Auto,
        };
        let endpoints = config.nodes as usize * config.workers as usize;
        let context = UcxContext::new(transport, layout.region_words, endpoints)
            .map_err(|e| cluster(format!("rank {rank} (host {}): {e}", hostname())))?;
        let region = context.region().clone();
        self.context = Some(context);
        let store = Arc::new(NodeStore::with_region(
            rank as NodeId,
            layout.clone(),
            region,
        ));
        workload.load(&store).map_err(RunError::Load)?;
        if let Some(replication) = replication {
            crate::replication::load_backups(&store, &replication.placement, |view| {
                workload.load(view)
            })
            .map_err(RunError::Load)?;
        }
        Ok(vec![store])
    }

    /// A rank fails over only a replicated run with a detector; rank 0
    /// decides failures (`cluster::failover`), so the detector only
    /// declares them in this process's own view.
    fn fault_run<G: NodeProgram, W: Workload>(
        &mut self,
        inputs: &RunInputs<G, W>,
        replicated: Option<FailoverParts<'_>>,
    ) -> Option<FaultRun> {
        let (config, program) = (inputs.config, inputs.program);
        let FailoverParts {
            stores,
            replication,
        } = replicated.filter(|_| config.tolerates_rank_loss())?;
        let mut faults = FaultRun::new(config).expect("a detector run");
        // The fabric reports unreachable peers; this rank's membership
        // (declared into by `cluster::failover`) and lease decide.
        let membership = faults.memberships[self.options.rank as usize].clone();
        let verdicts = Arc::new(RankVerdicts::new(membership));
        self.context().failure.follow(verdicts.clone());
        self.verdicts = Some(verdicts);
        let failover = Arc::new(Failover::for_node(
            replication.clone(),
            stores[0].clone(),
            program.failover_coroutines(),
            faults.settings.heartbeat_interval_ns / 4,
            program.recovered_header(),
        ));
        faults.set_failover(failover);
        faults.hook = Arc::new(NoRecovery);
        faults.detector_views = Some(
            (0..config.nodes)
                .map(|node| Arc::new(Membership::new(node as NodeId, config.nodes)))
                .collect(),
        );
        Some(faults)
    }

    fn run<G: NodeProgram, W: Workload>(
        &mut self,
        inputs: &RunInputs<G, W>,
        cluster_parts: &Cluster,
    ) -> Result<Option<BackendRun<G::Extra>>, RunError> {
        let (config, program, workload) = (inputs.config, inputs.program, inputs.workload);
        let digest = wire::digest(serde_json::to_string(config).map_err(cluster)?.as_bytes());
        // A checked fault-tolerant run journals each rank's history, so a
        // rank that dies leaves it behind for the checker.
        self.journal_prefix = (cluster_parts.faults.is_some() && config.check)
            .then(|| journal_prefix(digest, &self.options.bootstrap));
        let context = self.context();
        let gathered = run_rank(
            config,
            RankParts {
                options: self.options,
                context,
                cluster: cluster_parts,
                digest,
                journal_prefix: self.journal_prefix.as_deref(),
                verdicts: self.verdicts.as_deref(),
            },
            program,
            workload,
        )?;
        let Some(gathered) = gathered else {
            return Ok(None);
        };
        let (detections, abandoned_rounds) =
            detections_of(config, &gathered.fault_sections).map_err(cluster)?;
        self.summary = Some((gathered.summary, gathered.one_host));
        Ok(Some(BackendRun {
            results: gathered.results,
            start_ns: 0,
            abandoned_rounds,
            stores: Some(gathered.stores),
            detections: Some(detections),
            sim: None,
        }))
    }

    fn check_failed_over<W: Workload>(&self, workload: &W, run: FailedOver<'_>) -> InvariantReport {
        check_after_lost_rank(
            workload,
            run.history,
            run.stores,
            run.replication,
            &run.failover.failed_nodes(),
            self.journal_prefix.as_deref(),
            self.workers,
        )
    }

    /// Rank 0 checks every rank's store, gathered over the bootstrap.
    fn stores_scope(&self) -> &'static str {
        " (all ranks' stores)"
    }

    fn finish_report(&mut self, config: &Config, report: &mut Report) {
        if let Some((summary, one_host)) = self.summary.take() {
            report.oversubscribed = one_host && config.total_workers() as usize > report.cores;
            report.cluster = Some(summary);
        }
    }
}

/// What one rank's run reads of the backend and the cluster.
struct RankParts<'r> {
    options: &'r NodeOptions,
    context: &'r UcxContext,
    cluster: &'r Cluster,
    digest: u64,
    journal_prefix: Option<&'r str>,
    verdicts: Option<&'r RankVerdicts>,
}

/// What rank 0 gathered of every rank.
struct Gathered<X> {
    results: Vec<WorkerResult<X>>,
    /// Every reporting rank's store (with `check`; else rank 0's), in node
    /// order.
    stores: Vec<Arc<NodeStore>>,
    fault_sections: Vec<(u32, Vec<u64>)>,
    summary: ClusterSummary,
    /// Every rank on one host.
    one_host: bool,
}

/// What the worker threads and the main thread share.
struct Shared<'r> {
    /// Set when the whole cluster is done: the workers stop serving.
    stop: AtomicBool,
    /// Workers whose coroutines finished.
    local_done: AtomicUsize,
    abandoned: AtomicU64,
    journal_prefix: Option<&'r str>,
}

/// Sets the stop flag when the main thread leaves, on any path, and lets
/// no worker wait on UCX any longer.
struct StopOnDrop<'a>(&'a AtomicBool, &'a crate::fabric::ucx::PeerFailure);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
        self.1.abandon();
    }
}

/// The main thread's ends of the links to its worker threads.
struct MainLinks<X> {
    addresses: Receiver<(u16, Result<Vec<u8>, String>)>,
    peers: Vec<Sender<Vec<PeerInfo>>>,
    ready: Receiver<ReadyReport>,
    go: Vec<Sender<u64>>,
    result: Receiver<(u16, WorkerResult<X>)>,
    teardown: Vec<Sender<()>>,
}

/// Runs this rank: its worker threads, the join, the control loop, and
/// the results on rank 0 (`None` on the others).
fn run_rank<G: NodeProgram, W: Workload>(
    config: &Config,
    parts: RankParts<'_>,
    program: &G,
    workload: &W,
) -> Result<Option<Gathered<G::Extra>>, RunError> {
    let rank = parts.options.rank;
    let shared = Shared {
        stop: AtomicBool::new(false),
        local_done: AtomicUsize::new(0),
        abandoned: AtomicU64::new(0),
        journal_prefix: parts.journal_prefix,
    };
    let stall = Duration::from_secs_f64(config.ucx.stall_timeout_s);
    let context = parts.context;
    std::thread::scope(|scope| {
        let _stop_guard = StopOnDrop(&shared.stop, &context.failure);
        let (mut main, worker_links) = links::<G::Extra>(config.workers as u16);
        for (worker_index, links) in worker_links.into_iter().enumerate() {
            let (shared, cluster_parts) = (&shared, parts.cluster);
            std::thread::Builder::new()
                .name(format!("verbena-n{rank}-w{worker_index}"))
                .spawn_scoped(scope, move || {
                    let worker_index = worker_index as u16;
                    let thread = WorkerThread {
                        config,
                        context,
                        cluster: cluster_parts,
                        shared,
                    };
                    thread.run(program, worker_index, links)
                })
                .map_err(|e| cluster(format!("starting a worker thread: {e}")))?;
        }
        let addresses = worker_addresses(config, rank, &main.addresses)?;
        let boot = join(config, &parts, addresses)?;
        let teardown = std::mem::take(&mut main.teardown);
        let mut control = Control {
            config,
            context,
            cluster: parts.cluster,
            boot,
            links: main,
            shared: &shared,
            verdicts: parts.verdicts,
            stall,
        };
        match control.drive(workload) {
            Ok(gathered) => {
                if rank != 0 {
                    control.boot.linger(stall);
                }
                drop(teardown);
                Ok(gathered)
            }
            Err(message) => {
                context.failure.abandon();
                let message = control.boot.abort(message);
                Err(if context.failure.declared_failed() {
                    RunError::DeclaredFailed(message)
                } else {
                    cluster(message)
                })
            }
        }
    })
}

/// The links between the main thread and each of `workers` threads.
fn links<X>(workers: u16) -> (MainLinks<X>, Vec<WorkerLinks<X>>) {
    let (address_tx, addresses) = channel();
    let (ready_tx, ready) = channel();
    let (result_tx, result) = channel();
    let mut main = MainLinks {
        addresses,
        peers: Vec::new(),
        ready,
        go: Vec::new(),
        result,
        teardown: Vec::new(),
    };
    let mut worker_links = Vec::new();
    for _ in 0..workers {
        let (peer_tx, peers) = channel();
        let (go_tx, go) = channel();
        let (teardown_tx, teardown) = channel();
        main.peers.push(peer_tx);
        main.go.push(go_tx);
        main.teardown.push(teardown_tx);
        worker_links.push(WorkerLinks {
            address: address_tx.clone(),
            peers,
            ready: ready_tx.clone(),
            go,
            result: result_tx.clone(),
            teardown,
        });
    }
    (main, worker_links)
}

/// Each local worker's UCX address, in worker order.
fn worker_addresses(
    config: &Config,
    rank: u32,
    addresses: &Receiver<(u16, Result<Vec<u8>, String>)>,
) -> Result<Vec<Vec<u8>>, RunError> {
    let local_wait = Duration::from_secs(60);
    let mut by_worker = vec![Vec::new(); config.workers as usize];
    for _ in 0..config.workers {
        let (w, address) = addresses
            .recv_timeout(local_wait)
            .map_err(|_| cluster("a worker thread did not create its UCX worker"))?;
        by_worker[w as usize] = address.map_err(|e| cluster(format!("rank {rank}: {e}")))?;
    }
    Ok(by_worker)
}

/// Step 3: this rank joins the cluster with what its peers need of it.
fn join(
    config: &Config,
    parts: &RankParts<'_>,
    addresses: Vec<Vec<u8>>,
) -> Result<Bootstrap, RunError> {
    let options = parts.options;
    let boot_options = BootstrapOptions {
        rank: options.rank,
        nodes: config.nodes,
        address: options.bootstrap.clone(),
        join_timeout: Duration::from_secs_f64(config.ucx.join_timeout_s),
        stall_timeout: Duration::from_secs_f64(config.ucx.stall_timeout_s),
        digest: parts.digest,
        key: options.key.clone(),
        job: options.job.clone(),
    };
    let mine = RankInfo {
        rank: options.rank,
        host: hostname(),
        pid: std::process::id(),
        region_words: parts.cluster.layout.region_words,
        base_address: parts.context.base_address(),
        rkey: parts.context.rkey().to_vec(),
        workers: addresses,
    };
    Bootstrap::join(&boot_options, mine).map_err(cluster)
}
