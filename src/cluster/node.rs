//! One node of a multi-process run on the `ucx` fabric: this process hosts
//! node `rank` (its store, loaded here, and its workers as threads); every
//! other node is another process, reached through UCX.
//!
//! Sequence (every wait bounded, see `bootstrap`):
//! 1. load this node's partition; register its region with UCX;
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
//!    ordered indexes); rank 0 merges them and runs the same checker and
//!    invariants as a `threads` run on the gathered history and on every
//!    node's final store, and reports exactly like a `threads` run, plus
//!    the processes and the transports UCX chose.
//!
//! Endpoints are torn down only after the results are in, so a rank that
//! finished early never looks like a failed peer to one still finishing.
//!
//! A replicated run with the failure detector on (`--replication` ≥ 2 and
//! `--fault`, or `--failure-detector on`) tolerates the death of a rank
//! other than 0: the survivors fail it over (`cluster::failover`) and go
//! on; rank 0 gathers the survivors' results, and the report's `recovery`
//! gives the detection and recovery times and the commits before and
//! after. The dead rank's history died with it, so the checker judges the
//! survivors' history: serializable, every write it committed present on
//! the node now serving its partition, every backup equal to its serving
//! copy.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::bootstrap::{hostname, Bootstrap, BootstrapOptions, RankInfo};
use super::failover::ClusterFailover;
use super::wire::{self, Dec, Enc, Kind};
use crate::check::{
    check_serializable, store_holds_history_writes, store_matches_history, History, Item,
};
use crate::config::{Config, ConfigError, FabricKind, LocalAtomics, UcxTransport};
use crate::engine::program::{Cluster, ExtraStats, NodeProgram, RunClock, WorkerStart};
use crate::engine::report::{ClusterSummary, RankSummary};
use crate::engine::{self, CheckSummary, RunError, RunOutput, WithProgram, WithWorkload};
use crate::engine::{driver, program};
use crate::fabric::ucx::{ucx_version, PeerInfo, TransportChoice, UcxContext, UcxWorkerHost};
use crate::fabric::NodeId;
use crate::recovery::{Failover, FaultRun, Membership, NoRecovery, RecoveryReport};
use crate::replication::Replication;
use crate::runtime::Worker;
use crate::stats::WorkerStats;
use crate::store::{NodeStore, StoreLayout};
use crate::workloads::Workload;
use std::sync::atomic::AtomicU64;

pub use super::launch::NodeOptions;

/// Runs this process's node of `config` (fabric forced to `ucx`). Rank 0
/// returns the run's output; the other ranks `None`.
pub fn run_node(config: &Config, options: &NodeOptions) -> Result<Option<RunOutput>, RunError> {
    let mut config = config.clone();
    config.fabric = FabricKind::Ucx;
    crate::engine::validate(&mut config)?;
    if options.rank >= config.nodes {
        return Err(RunError::Config(ConfigError(format!(
            "rank {} is out of range; allowed: 0..={} (--nodes {})",
            options.rank,
            config.nodes - 1,
            config.nodes
        ))));
    }
    struct NodeWorkload<'a>(&'a Config, &'a NodeOptions);
    impl WithWorkload for NodeWorkload<'_> {
        type Output = Result<Option<RunOutput>, RunError>;
        fn with<W: Workload>(self, workload: &W) -> Self::Output {
            run_node_custom(self.0, self.1, workload)
        }
    }
    engine::with_workload(&config, NodeWorkload(&config, options))
}

/// [`run_node`] with a workload of the caller's own.
pub fn run_node_custom<W: Workload>(
    config: &Config,
    options: &NodeOptions,
    workload: &W,
) -> Result<Option<RunOutput>, RunError> {
    struct OnNode<'a, W> {
        config: &'a Config,
        options: &'a NodeOptions,
        workload: &'a W,
    }
    impl<W: Workload> WithProgram for OnNode<'_, W> {
        type Output = Result<Option<RunOutput>, RunError>;
        fn with<G: NodeProgram>(self, program: &G, layout: StoreLayout) -> Self::Output {
            run_program(self.config, self.options, program, self.workload, layout)
        }
    }
    let on_node = OnNode {
        config,
        options,
        workload,
    };
    engine::with_program(config, workload, config.tolerates_rank_loss(), on_node)?
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

type WorkerResult<X> = program::WorkerResult<X>;
/// A worker's word that its endpoints are up: the transports UCX chose to
/// each node (worker 0 only), or what went wrong.
type ReadyReport = (u16, Result<Vec<Vec<String>>, String>);

/// What the main thread hands a worker thread, and gets back.
struct WorkerLinks<X> {
    address: Sender<(u16, Result<Vec<u8>, String>)>,
    peers: Receiver<Vec<PeerInfo>>,
    ready: Sender<ReadyReport>,
    go: Receiver<u64>,
    result: Sender<(u16, WorkerResult<X>)>,
    teardown: Receiver<()>,
}

#[allow(clippy::too_many_arguments)]
fn worker_thread<G: NodeProgram>(
    config: &Config,
    context: &UcxContext,
    cluster: &Cluster,
    program: &G,
    worker_index: u16,
    links: WorkerLinks<G::Extra>,
    stop: &AtomicBool,
    local_done: &AtomicUsize,
    abandoned: &AtomicU64,
    journal_prefix: Option<&str>,
) {
    let node = cluster.stores[0].node;
    let host = match UcxWorkerHost::new(context, node, worker_index) {
        Ok(host) => {
            let _ = links
                .address
                .send((worker_index, Ok(host.address().to_vec())));
            host
        }
        Err(e) => {
            let _ = links.address.send((worker_index, Err(e)));
            return;
        }
    };
    let Ok(peers) = links.peers.recv() else {
        return;
    };
    let endpoint = match host.connect(
        context,
        &peers,
        config.ucx.local_atomics == LocalAtomics::Cpu,
    ) {
        Ok(endpoint) => endpoint,
        Err(e) => {
            let _ = links.ready.send((worker_index, Err(e)));
            return;
        }
    };
    let transports = if worker_index == 0 {
        (0..config.nodes as NodeId)
            .map(|n| endpoint.transports_to(n))
            .collect()
    } else {
        Vec::new()
    };
    let _ = links.ready.send((worker_index, Ok(transports)));
    let Ok(start_ns) = links.go.recv() else {
        return;
    };
    let clock = RunClock::starting_at(config, start_ns);
    let mut worker = Worker::new(Box::new(endpoint), program.slots(worker_index));
    if let Some(faults) = cluster.attached_faults() {
        worker =
            faults.attach_in_process(worker, &cluster.layout, config, program.give_up_ns(clock));
    }
    let history = match journal_prefix {
        Some(prefix) => {
            let path = journal_path(prefix, node as u32, worker_index);
            match std::fs::File::create(&path) {
                Ok(file) => History::journaled(file),
                Err(e) => {
                    eprintln!(
                        "verbena: rank {node}: cannot create the history journal {path}: {e}; should this rank die, its history is lost"
                    );
                    History::new()
                }
            }
        }
        None => History::new(),
    };
    let start = WorkerStart {
        workers: std::slice::from_ref(&worker),
        histories: vec![history],
        clock,
        record_history: config.check,
    };
    let mut results = program.run_workers(cluster, start, &mut |coroutines, services| {
        let mut announced = false;
        loop {
            let turn = worker.turn(&mut coroutines[0], services[0]);
            if turn.coroutines_done && !announced {
                local_done.fetch_add(1, Ordering::SeqCst);
                announced = true;
            }
            // Keep serving peers until the whole cluster is done.
            if stop.load(Ordering::SeqCst) {
                break;
            }
            if !turn.progressed {
                worker.idle(&turn);
            }
        }
    });
    abandoned.fetch_add(worker.abandoned_rounds(), Ordering::Relaxed);
    let result = results.pop().expect("one result per worker");
    let _ = links.result.send((worker_index, result));
    // The endpoints go only once every rank is past its run (see docs).
    let _ = links.teardown.recv();
    drop(worker);
}

fn cluster<E: std::fmt::Display>(e: E) -> RunError {
    RunError::Cluster(e.to_string())
}

fn run_program<G: NodeProgram, W: Workload>(
    config: &Config,
    options: &NodeOptions,
    program: &G,
    workload: &W,
    layout: StoreLayout,
) -> Result<Option<RunOutput>, RunError> {
    let rank = options.rank;
    let nodes = config.nodes;
    let workers = config.workers as u16;
    let tolerant = config.tolerates_rank_loss();
    debug_assert_eq!(tolerant, layout.heartbeat_addr.is_some());
    let (layout, replication) = crate::engine::replicated_layout(config, layout);
    let transport = match config.ucx.transport {
        UcxTransport::Shm => TransportChoice::Shm,
        UcxTransport::Tcp => TransportChoice::Tcp,
        UcxTransport::Rdma => TransportChoice::Rdma,
        UcxTransport::Auto => TransportChoice::Auto,
    };
    let context = UcxContext::new(
        transport,
        layout.region_words,
        nodes as usize * workers as usize,
    )
    .map_err(|e| cluster(format!("rank {rank} (host {}): {e}", hostname())))?;
    let store = Arc::new(NodeStore::with_region(
        rank as NodeId,
        layout.clone(),
        context.region().clone(),
    ));
    workload.load(&store).map_err(RunError::Load)?;
    if let Some(replication) = &replication {
        crate::replication::load_backups(&store, &replication.placement, |view| {
            workload.load(view)
        })
        .map_err(RunError::Load)?;
    }
    let faults = match (&replication, tolerant) {
        (Some(replication), true) => {
            context.failure.tolerate();
            let mut faults = FaultRun::new(config).expect("a detector run");
            let failover = Arc::new(Failover::for_node(
                replication.clone(),
                store.clone(),
                program.failover_coroutines(),
                faults.settings.heartbeat_interval_ns / 4,
                program.recovered_header(),
            ));
            faults.set_failover(failover);
            // Rank 0 decides failures (`cluster::failover`); the detector
            // only declares them in this process's membership.
            faults.hook = Arc::new(NoRecovery);
            faults.detector_views = Some(
                (0..config.nodes)
                    .map(|node| Arc::new(Membership::new(node as NodeId, config.nodes)))
                    .collect(),
            );
            Some(faults)
        }
        _ => None,
    };
    let cluster_parts = Cluster {
        layout,
        stores: vec![store],
        replication,
        attach_faults: faults.is_some(),
        faults,
    };
    let abandoned = AtomicU64::new(0);
    let config_digest = wire::digest(serde_json::to_string(config).map_err(cluster)?.as_bytes());
    // A checked fault-tolerant run journals each rank's history, so a
    // rank that dies leaves it behind for the checker.
    let journal_prefix = (cluster_parts.faults.is_some() && config.check)
        .then(|| journal_prefix(config_digest, &options.bootstrap));
    let layout = &cluster_parts.layout;
    let stall = Duration::from_secs_f64(config.ucx.stall_timeout_s);
    let boot_options = BootstrapOptions {
        rank,
        nodes,
        address: options.bootstrap.clone(),
        join_timeout: Duration::from_secs_f64(config.ucx.join_timeout_s),
        stall_timeout: stall,
        digest: config_digest,
        key: options.key.clone(),
        job: options.job.clone(),
    };
    let stop = AtomicBool::new(false);
    let local_done = AtomicUsize::new(0);

    std::thread::scope(|scope| {
        let _stop_guard = StopOnDrop(&stop, &context.failure);
        let (address_tx, address_rx) = channel();
        let (ready_tx, ready_rx) = channel();
        let (result_tx, result_rx) = channel();
        let mut peer_txs = Vec::new();
        let mut go_txs = Vec::new();
        let mut teardown_txs = Vec::new();
        for worker_index in 0..workers {
            let (peer_tx, peer_rx) = channel();
            let (go_tx, go_rx) = channel();
            let (teardown_tx, teardown_rx) = channel();
            peer_txs.push(peer_tx);
            go_txs.push(go_tx);
            teardown_txs.push(teardown_tx);
            let links = WorkerLinks {
                address: address_tx.clone(),
                peers: peer_rx,
                ready: ready_tx.clone(),
                go: go_rx,
                result: result_tx.clone(),
                teardown: teardown_rx,
            };
            let (context, cluster_parts, stop, local_done) =
                (&context, &cluster_parts, &stop, &local_done);
            let abandoned = &abandoned;
            let journal_prefix = journal_prefix.as_deref();
            std::thread::Builder::new()
                .name(format!("verbena-n{rank}-w{worker_index}"))
                .spawn_scoped(scope, move || {
                    worker_thread(
                        config,
                        context,
                        cluster_parts,
                        program,
                        worker_index,
                        links,
                        stop,
                        local_done,
                        abandoned,
                        journal_prefix,
                    )
                })
                .map_err(|e| cluster(format!("starting a worker thread: {e}")))?;
        }
        drop((address_tx, ready_tx, result_tx));
        let local_wait = Duration::from_secs(60);
        let mut addresses = vec![Vec::new(); workers as usize];
        for _ in 0..workers {
            let (w, address) = address_rx
                .recv_timeout(local_wait)
                .map_err(|_| cluster("a worker thread did not create its UCX worker"))?;
            addresses[w as usize] = address.map_err(|e| cluster(format!("rank {rank}: {e}")))?;
        }
        let mine = RankInfo {
            rank,
            host: hostname(),
            pid: std::process::id(),
            region_words: layout.region_words,
            base_address: context.base_address(),
            rkey: context.rkey().to_vec(),
            workers: addresses,
        };
        let mut boot = Bootstrap::join(&boot_options, mine).map_err(cluster)?;
        let outcome = drive(
            config,
            workers,
            &context,
            program,
            &cluster_parts,
            workload,
            &mut boot,
            &peer_txs,
            &go_txs,
            &ready_rx,
            &result_rx,
            &stop,
            &local_done,
            stall,
            &abandoned,
            journal_prefix.as_deref(),
        );
        match outcome {
            Ok(output) => {
                if rank != 0 {
                    boot.linger(stall);
                }
                drop(teardown_txs);
                Ok(output)
            }
            Err(message) => {
                context.failure.abandon();
                let message = boot.abort(message);
                Err(if context.failure.declared_failed() {
                    RunError::DeclaredFailed(message)
                } else {
                    cluster(message)
                })
            }
        }
    })
}

/// Steps 4–6 of the module docs; an `Err` is the message every rank gets.
#[allow(clippy::too_many_arguments)]
fn drive<G: NodeProgram, W: Workload>(
    config: &Config,
    workers: u16,
    context: &UcxContext,
    program: &G,
    cluster_parts: &Cluster,
    workload: &W,
    boot: &mut Bootstrap,
    peer_txs: &[Sender<Vec<PeerInfo>>],
    go_txs: &[Sender<u64>],
    ready_rx: &Receiver<ReadyReport>,
    result_rx: &Receiver<(u16, WorkerResult<G::Extra>)>,
    stop: &AtomicBool,
    local_done: &AtomicUsize,
    stall: Duration,
    abandoned: &AtomicU64,
    journal_prefix: Option<&str>,
) -> Result<Option<RunOutput>, String> {
    let store = &cluster_parts.stores[0];
    let layout = &cluster_parts.layout;
    let replication = cluster_parts.replication.clone();
    let faults = cluster_parts.faults.as_ref();
    let rank = boot.rank;
    let nodes = boot.nodes;
    let me = boot.describe(rank);
    for info in &boot.ranks {
        if info.workers.len() != workers as usize || info.region_words != layout.region_words {
            return Err(format!(
                "{} has {} workers and a region of {} words; this run needs {} and {}",
                boot.describe(info.rank),
                info.workers.len(),
                info.region_words,
                workers,
                layout.region_words
            ));
        }
    }
    // How long an idle worker may spin depends on how many share the host.
    let my_host = boot
        .ranks
        .iter()
        .find(|info| info.rank == rank)
        .map(|info| &info.host);
    context.set_host_worker_threads(
        boot.ranks
            .iter()
            .filter(|info| Some(&info.host) == my_host)
            .map(|info| info.workers.len())
            .sum(),
    );
    for (w, tx) in peer_txs.iter().enumerate() {
        let peers = boot
            .ranks
            .iter()
            .map(|info| PeerInfo {
                worker_address: info.workers[w].clone(),
                rkey: info.rkey.clone(),
                base_address: info.base_address,
            })
            .collect();
        tx.send(peers)
            .map_err(|_| format!("{me}: a worker thread stopped"))?;
    }
    let mut transports = Vec::new();
    for _ in 0..workers {
        let (w, result) = wait_local(boot, ready_rx, stall * 6, "connect its UCX endpoints")?;
        let chosen = result.map_err(|e| format!("{me}: {e}"))?;
        if w == 0 {
            transports = chosen;
        }
    }
    // Cluster barrier: every endpoint of every rank exists.
    let deadline = Instant::now() + stall * 6;
    if rank == 0 {
        boot.gather(Kind::Ready, deadline, "connect its UCX endpoints")?;
        boot.send(Kind::Go, &[])?;
    } else {
        boot.send(Kind::Ready, &[1])?;
        boot.gather(Kind::Go, deadline, "start the run")?;
    }
    let start_ns = context.epoch.elapsed().as_nanos() as u64;
    for tx in go_txs {
        tx.send(start_ns)
            .map_err(|_| format!("{me}: a worker thread stopped"))?;
    }
    if let Some(at_s) = crash_time_of(config, rank) {
        // `--fault crash:RANK@S` on ucx: this process dies as `kill -9`
        // kills it — no cleanup, no goodbye.
        std::thread::Builder::new()
            .name("verbena-crash".into())
            .spawn(move || {
                std::thread::sleep(Duration::from_secs_f64(at_s));
                kill_self();
            })
            .map_err(|e| format!("{me}: starting the crash timer: {e}"))?;
    }
    let mut cluster_failover = match (faults, &faults.and_then(|f| f.failover.clone())) {
        (Some(faults), Some(failover)) => {
            if rank == 0 {
                boot.tolerate_loss();
            }
            boot.enable_leases(context.epoch);
            Some(ClusterFailover::new(
                failover.clone(),
                faults.memberships[rank as usize].clone(),
                faults.detector_views.as_ref().map_or_else(
                    || faults.memberships[rank as usize].clone(),
                    |v| v[rank as usize].clone(),
                ),
                &context.failure,
                context.epoch,
                rank,
                nodes,
            ))
        }
        _ => None,
    };

    // The run: watch workers, peers and UCX until every rank is done.
    let run_for = Duration::from_secs_f64(config.warmup_s + config.duration_s);
    // Rank 0 judges first; the others wait longer, to hear its verdict.
    let grace = if rank == 0 { stall } else { stall * 2 };
    let mut deadline = Instant::now() + run_for + grace;
    let mut done = vec![false; nodes as usize];
    let mut sent_done = false;
    let mut recovering_since: Option<Instant> = None;
    loop {
        // The lease as the bootstrap last renewed it (rank 0's echoes).
        if let Some(until) = boot.lease_until_ns() {
            context.failure.set_lease_until(until);
        }
        if let Some(driver) = cluster_failover.as_mut() {
            driver.poll(boot)?;
            if driver.recovering() {
                // A recovery may outlast the run; its end restarts the
                // clock. But it must end: every phase is a few messages
                // and local scans, so a recovery that takes longer than
                // the stall timeout waits on a rank that will not answer.
                let since = *recovering_since.get_or_insert_with(Instant::now);
                if since.elapsed() > grace {
                    return Err(format!(
                        "{me}: {} within {:.1} s (raise --stall-timeout if the store is large)",
                        driver.stalled(boot),
                        grace.as_secs_f64()
                    ));
                }
                deadline = deadline.max(Instant::now() + grace);
            } else {
                recovering_since = None;
            }
            for failed in driver.failed() {
                done[failed as usize] = true;
            }
        }
        if let Some((node, why)) = context.failure.get() {
            return Err(format!(
                "{me}: UCX reports {} failed: {why}",
                boot.describe(node as u32)
            ));
        }
        if !sent_done && local_done.load(Ordering::SeqCst) == workers as usize {
            sent_done = true;
            done[rank as usize] = true;
            if rank != 0 {
                boot.send(Kind::Done, &[])?;
            }
        }
        let recovering = cluster_failover.as_ref().is_some_and(|d| d.recovering());
        if rank == 0 && !recovering && done.iter().all(|&d| d) {
            boot.send(Kind::AllDone, &[])?;
            break;
        }
        if Instant::now() >= deadline {
            let late: Vec<String> = (0..nodes)
                .filter(|&r| !done[r as usize] && (rank == 0 || r == rank))
                .map(|r| boot.describe(r))
                .collect();
            return Err(if rank == 0 {
                format!(
                    "{} did not finish within {:.1} s after the measured interval (workers stuck waiting on a peer, or transactions slower than that: raise --stall-timeout)",
                    late.join(", "),
                    stall.as_secs_f64()
                )
            } else {
                format!(
                    "{me}: rank 0 did not end the run within {:.1} s after the measured interval",
                    stall.as_secs_f64()
                )
            });
        }
        match boot.next(Duration::from_millis(5))? {
            Some((from, frame)) if frame.kind == Kind::Done => done[from as usize] = true,
            Some((_, frame)) if frame.kind == Kind::AllDone => break,
            Some((from, frame))
                if cluster_failover.is_some()
                    && cluster_failover
                        .as_mut()
                        .expect("checked")
                        .on_frame(boot, from, &frame)? => {}
            Some((from, frame)) => {
                return Err(format!(
                    "{} sent {:?} during the run",
                    boot.describe(from),
                    frame.kind
                ))
            }
            None => {}
        }
    }
    // The run is over: no failover any more, so no lease either (the
    // workers finish their last transactions while this thread waits).
    boot.disable_leases();
    context.failure.set_lease_until(u64::MAX);
    stop.store(true, Ordering::SeqCst);
    let mut results: Vec<Option<WorkerResult<G::Extra>>> = (0..workers).map(|_| None).collect();
    for _ in 0..workers {
        let (w, result) = wait_local(boot, result_rx, stall, "hand over their results")?;
        results[w as usize] = Some(result);
    }
    let results: Vec<WorkerResult<G::Extra>> =
        results.into_iter().map(|r| r.expect("all")).collect();

    if let Some(replication) = &replication {
        // Every coordinator is done: what this node's backups still hold
        // (records above a watermark no later post carried, and the RPC
        // log, which lives outside the region rank 0 is sent) is decided.
        let _gate = replication
            .apply_gate
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        replication.drain_all(store);
    }
    let fault_words = fault_section(faults, rank, abandoned, start_ns);
    if rank != 0 {
        let mut enc = Enc::default();
        encode_rank_result(&mut enc, &transports, &results);
        enc.words(&fault_words);
        if config.check {
            let words: Vec<u64> = (0..layout.region_words)
                .map(|w| store.region.load(w))
                .collect();
            enc.words(&words);
            let rows: Vec<u64> = store.row_counters();
            enc.words(&rows);
            // What the invariants read beside the region (TPC-C's ordered
            // indexes), which only this process holds.
            enc.words(&workload.export_node_local(rank as NodeId));
        }
        boot.send(Kind::Result, &enc.bytes)?;
        remove_journals(journal_prefix, rank, workers);
        return Ok(None);
    }

    // Rank 0: gather, merge, check, report.
    let deadline = Instant::now() + stall * 6;
    let frames = boot.gather(Kind::Result, deadline, "send its results")?;
    let mut all_results: Vec<WorkerResult<G::Extra>> = results;
    let mut rank_transports = vec![(0u32, transports)];
    let mut stores = vec![store.clone()];
    let mut fault_sections = vec![(0u32, fault_words)];
    for (from, frame) in frames {
        boot.mark_finished(from);
        let who = boot.describe(from);
        let mut dec = Dec::new(&frame.body);
        let (chosen, results) =
            decode_rank_result(&mut dec, workers).map_err(|e| format!("{who}: {e}"))?;
        rank_transports.push((from, chosen));
        all_results.extend(results);
        let section = dec
            .words("failure detections")
            .map_err(|e| format!("{who}: {e}"))?;
        fault_sections.push((from, section));
        if config.check {
            let words = dec
                .words("region image")
                .map_err(|e| format!("{who}: {e}"))?;
            let rows = dec.words("row counts").map_err(|e| format!("{who}: {e}"))?;
            let image = NodeStore::from_image(from as NodeId, layout.clone(), &words, &rows)
                .ok_or_else(|| format!("{who}: its region image does not fit the layout"))?;
            stores.push(Arc::new(image));
            let local = dec
                .words("node-local state")
                .map_err(|e| format!("{who}: {e}"))?;
            if !workload.import_node_local(from as NodeId, &local) {
                return Err(format!(
                    "{who}: its node-local state does not fit the workload"
                ));
            }
        }
    }
    // Node order, as the checker and the invariants expect.
    stores.sort_by_key(|store| store.node);
    let mut gathered = driver::gather(program, &mut all_results);
    let failed: Vec<NodeId> = cluster_failover
        .as_ref()
        .map(|driver| driver.failed())
        .unwrap_or_default();
    remove_journals(journal_prefix, 0, workers);
    if let Some(driver) = &cluster_failover {
        driver.finish();
    }
    let check = config.check.then(|| {
        if let (false, Some(replication)) = (failed.is_empty(), &replication) {
            let (verdict, invariants) = check_after_lost_rank(
                workload,
                &mut gathered.history,
                &stores,
                replication,
                &failed,
                journal_prefix,
                workers,
            );
            return CheckSummary::new(verdict, invariants);
        }
        let verdict = check_serializable(&gathered.history);
        crate::engine::check_stores(
            workload,
            verdict,
            &gathered.history,
            &stores,
            replication.as_deref(),
            " (all ranks' stores)",
        )
    });
    let mut report = driver::build_report(
        config,
        program,
        workload,
        &gathered,
        check,
        replication.is_some(),
    );
    let one_host = boot.ranks.iter().all(|r| r.host == boot.ranks[0].host);
    report.oversubscribed = one_host && config.total_workers() as usize > report.cores;
    report.cluster = Some(ClusterSummary {
        ucx_version: ucx_version(),
        transport: config.ucx.transport.name(),
        local_atomics: config.ucx.local_atomics.name(),
        ranks: boot
            .ranks
            .iter()
            .map(|info| RankSummary {
                rank: info.rank,
                host: info.host.clone(),
                pid: info.pid,
                transports: rank_transports
                    .iter()
                    .find(|(rank, _)| *rank == info.rank)
                    .map(|(_, names)| names.clone())
                    .unwrap_or_default(),
            })
            .collect(),
    });
    if let Some(faults) = faults {
        report.recovery = Some(recovery_report(
            config,
            faults,
            &gathered.total,
            &fault_sections,
        )?);
    }
    Ok(Some(RunOutput {
        report,
        history: config.check.then_some(gathered.history),
        // Every node's store with `check` (gathered for it), else rank 0's.
        stores,
        replication,
    }))
}

/// When `config` crashes `rank` (`--fault crash:RANK@S`), seconds after
/// the start.
fn crash_time_of(config: &Config, rank: u32) -> Option<f64> {
    config.faults.iter().find_map(|fault| match *fault {
        crate::config::faults::RunFault::Crash { node, at_s } if node == rank => Some(at_s),
        _ => None,
    })
}

extern "C" {
    fn kill(pid: i32, signal: i32) -> i32;
}

/// Ends this process as `kill -9` would.
fn kill_self() -> ! {
    const SIGKILL: i32 = 9;
    // SAFETY: kill(2) on this process's own pid.
    unsafe {
        kill(std::process::id() as i32, SIGKILL);
    }
    // SIGKILL cannot be caught; should delivery lag, do not run on.
    loop {
        std::thread::park();
    }
}

/// What a rank tells rank 0 of failures: `[abandoned rounds, then per
/// peer it declared dead: node, ns after the start]`.
fn fault_section(
    faults: Option<&FaultRun>,
    rank: u32,
    abandoned: &AtomicU64,
    start_ns: u64,
) -> Vec<u64> {
    let mut words = vec![abandoned.load(Ordering::Relaxed)];
    if let Some(membership) = faults.and_then(|f| f.memberships.get(rank as usize)) {
        for (node, at_ns) in membership.failed_nodes() {
            words.push(node as u64);
            words.push(at_ns.saturating_sub(start_ns));
        }
    }
    words
}

/// The report's `recovery` of a fault-tolerant multi-process run, from
/// every surviving rank's detections and rank 0's failover.
fn recovery_report(
    config: &Config,
    faults: &FaultRun,
    total: &WorkerStats,
    sections: &[(u32, Vec<u64>)],
) -> Result<RecoveryReport, String> {
    let mut views = Vec::new();
    let mut abandoned_rounds = 0;
    for (rank, words) in sections {
        let (&abandoned, pairs) = words
            .split_first()
            .ok_or_else(|| format!("rank {rank}: an empty failure section"))?;
        abandoned_rounds += abandoned;
        let view = Membership::new(*rank as NodeId, config.nodes);
        for pair in pairs.chunks(2) {
            if let [node, at_ns] = *pair {
                if node < config.nodes as u64 && node != *rank as u64 {
                    view.declare_dead(node as NodeId, at_ns);
                }
            }
        }
        views.push(view);
    }
    let view_refs: Vec<&Membership> = views.iter().collect();
    let mut report = RecoveryReport::build(&config.faults, faults.settings, &view_refs, 0);
    // Ranks that died without a planned fault (`kill -9` from outside).
    let failed = faults
        .failover
        .as_ref()
        .map(|f| f.failed_nodes())
        .unwrap_or_default();
    for node in failed {
        if report.faults.iter().any(|f| f.node == node as u32) {
            continue;
        }
        let mut detected_by: Vec<(u32, f64)> = views
            .iter()
            .filter_map(|view| {
                view.failed_nodes()
                    .into_iter()
                    .find(|&(n, _)| n == node)
                    .map(|(_, at)| (view.node() as u32, at as f64 / 1e9))
            })
            .collect();
        detected_by.sort_by_key(|d| d.0);
        let detected_at_s = detected_by.iter().map(|d| d.1).reduce(f64::min);
        report.faults.push(crate::recovery::FaultRecord {
            node: node as u32,
            kind: "lost",
            crash_at_s: detected_at_s.unwrap_or(0.0),
            detected_at_s,
            detection_s: None,
            detected_by,
        });
    }
    report.fill(
        total.fault_commits,
        abandoned_rounds,
        faults.failover.as_deref(),
    );
    Ok(report)
}

/// The checks of a multi-process run that lost ranks (`failed`), as
/// thorough as a `threads` run's after a failover: the survivors' `stores`
/// (node order) give every partition — a failed one from its promoted
/// copy; the history is the survivors' plus each dead rank's, read back
/// from its journal (`History::journaled`) and appended to `history`; on
/// it the serializability verdict, the exact store check (every committed
/// write present, nothing uncommitted visible), the workload invariants,
/// and every backup against the copy serving its partition.
///
/// A dead rank's journal records each transaction at its commit point, the
/// post of its log records; the kill may have fallen between the two. So
/// the last entry of each of its coroutines is in doubt (every earlier one
/// was acknowledged: a coroutine starts its next transaction only after
/// its log round returned), and it counts as committed iff its first
/// write's version is on the serving copy (or a later one) and no other
/// transaction installed that same version.
fn check_after_lost_rank<W: Workload>(
    workload: &W,
    history: &mut History,
    stores: &[Arc<NodeStore>],
    replication: &Replication,
    failed: &[NodeId],
    journal_prefix: Option<&str>,
    workers: u16,
) -> (crate::check::CheckReport, crate::workloads::InvariantReport) {
    let placement = replication.placement;
    let mut serving_stores = Vec::with_capacity(placement.nodes as usize);
    let mut problems = Vec::new();
    for partition in 0..placement.nodes as NodeId {
        let served_by = crate::replication::serving_node(&placement, partition, failed);
        let copy = served_by.and_then(|node| {
            let store = stores.iter().find(|s| s.node == node)?;
            let copy = placement.copy_on(node, partition)?;
            if copy == 0 {
                Some(Ok(store.clone()))
            } else {
                Some(store.extract_copy(partition, copy).map(Arc::new))
            }
        });
        match copy {
            Some(Ok(store)) => serving_stores.push(store),
            Some(Err(e)) => problems.push(format!(
                "partition {partition}'s serving copy could not be read: {e}"
            )),
            None => problems.push(format!(
                "partition {partition} has no live copy among the ranks that reported"
            )),
        }
    }
    let mut details = Vec::new();
    let mut journals_whole = journal_prefix.is_some();
    for &rank in failed {
        let Some(prefix) = journal_prefix else {
            break;
        };
        let mut journal = History::new();
        for worker in 0..workers {
            let path = journal_path(prefix, rank as u32, worker);
            match std::fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|b| History::read_journal(&b))
            {
                Ok(part) => journal.append(&part),
                Err(e) => {
                    journals_whole = false;
                    problems.push(format!(
                        "rank {rank}'s history journal {path} could not be read ({e}): with ranks on several hosts, set TMPDIR to a directory they share"
                    ));
                }
            }
            let _ = std::fs::remove_file(&path);
        }
        let (kept, in_doubt, dropped) = resolve_in_doubt(&journal, history, &serving_stores);
        details.push(format!(
            "rank {rank} failed: its history read back from its journal, {} transaction(s); {in_doubt} in doubt at its death (recorded at the commit point), of which {dropped} had not committed",
            kept.len() + dropped
        ));
        history.append(&kept);
    }
    let verdict = check_serializable(history);
    let mut invariants = if problems.is_empty() && journals_whole {
        workload.check_invariants(&serving_stores, history)
    } else {
        crate::workloads::InvariantReport {
            ok: problems.is_empty(),
            details: vec![
                "workload invariants not checked: a dead rank's history is incomplete".into(),
            ],
        }
    };
    invariants.ok &= problems.is_empty();
    invariants.details.extend(details);
    invariants.details.extend(problems);
    if serving_stores.len() == placement.nodes as usize {
        let mismatches = if journals_whole {
            store_matches_history(history, &serving_stores)
        } else {
            store_holds_history_writes(history, &serving_stores)
        };
        invariants.add_version_check(
            mismatches,
            &format!(
                " (failed rank(s) {failed:?}: their partitions read from the promoted copies)"
            ),
        );
        crate::replication::check_backups(replication, &serving_stores, failed, &mut invariants);
    }
    (verdict, invariants)
}

/// Splits a dead rank's `journal` into the transactions that committed
/// and counts those in doubt and those dropped (see
/// `check_after_lost_rank`). `others`: everyone else's history.
fn resolve_in_doubt(
    journal: &History,
    others: &History,
    serving: &[Arc<NodeStore>],
) -> (History, usize, usize) {
    use std::collections::{HashMap, HashSet};
    let coroutine_of = |id: u64| id >> crate::txn::ids::COUNTER_BITS;
    let mut last: HashMap<u64, usize> = HashMap::new();
    for (index, txn) in journal.txns.iter().enumerate() {
        last.insert(coroutine_of(txn.id), index);
    }
    let in_doubt: HashSet<usize> = last.values().copied().collect();
    // Every version and the transactions that claim to have installed it.
    let mut installed: HashMap<Item, Vec<u64>> = HashMap::new();
    for history in [others, journal] {
        for txn in &history.txns {
            for item in history.writes(txn) {
                installed.entry(*item).or_default().push(txn.id);
            }
        }
    }
    let mut kept = History::new();
    let mut dropped = 0;
    for (index, txn) in journal.txns.iter().enumerate() {
        let writes = journal.writes(txn);
        if in_doubt.contains(&index) {
            if let Some(first) = writes.first() {
                let taken_by_another = installed
                    .get(first)
                    .is_some_and(|ids| ids.iter().any(|&id| id != txn.id));
                let on_store = serving.iter().find_map(|store| {
                    store
                        .lookup(first.table, first.key)
                        .map(|slot| store.seq(first.table, slot))
                });
                let committed = !taken_by_another && on_store.is_some_and(|seq| seq >= first.seq);
                if !committed {
                    dropped += 1;
                    continue;
                }
            }
        }
        kept.push_noted(
            txn.id,
            txn.node,
            txn.kind,
            txn.note,
            journal.reads(txn),
            writes,
        );
    }
    (kept, in_doubt.len(), dropped)
}

/// Where the history journals of the run with this configuration digest
/// and bootstrap address live (`std::env::temp_dir`, i.e. `TMPDIR`).
fn journal_prefix(digest: u64, bootstrap: &str) -> String {
    let address: String = bootstrap
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    std::env::temp_dir()
        .join(format!("verbena-journal-{digest:016x}-{address}"))
        .display()
        .to_string()
}

fn journal_path(prefix: &str, rank: u32, worker: u16) -> String {
    format!("{prefix}-r{rank}-w{worker}")
}

/// Removes this rank's journals (its history reached rank 0 another way).
fn remove_journals(prefix: Option<&str>, rank: u32, workers: u16) {
    if let Some(prefix) = prefix {
        for worker in 0..workers {
            let _ = std::fs::remove_file(journal_path(prefix, rank, worker));
        }
    }
}

/// Waits for a local worker thread's message while keeping the bootstrap
/// alive (heartbeats, peers' faults).
fn wait_local<T>(
    boot: &mut Bootstrap,
    rx: &Receiver<T>,
    timeout: Duration,
    what: &str,
) -> Result<T, String> {
    let until = Instant::now() + timeout;
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(value) => return Ok(value),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(format!(
                    "{}: a worker thread ended before it could {what}",
                    boot.describe(boot.rank)
                ))
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        boot.poll_faults()?;
        if Instant::now() >= until {
            return Err(format!(
                "{}: its workers did not {what} within {:.0} s",
                boot.describe(boot.rank),
                timeout.as_secs_f64()
            ));
        }
    }
}

fn encode_rank_result<X: ExtraStats>(
    enc: &mut Enc,
    transports: &[Vec<String>],
    results: &[WorkerResult<X>],
) {
    enc.u64(transports.len() as u64);
    for names in transports {
        enc.str(&names.join(","));
    }
    enc.u64(results.len() as u64);
    for result in results {
        wire::encode_stats(enc, &result.stats);
        wire::encode_history(enc, &result.history);
        enc.words(&result.extra.to_words());
    }
}

#[allow(clippy::type_complexity)]
fn decode_rank_result<X: ExtraStats>(
    dec: &mut Dec,
    workers: u16,
) -> Result<(Vec<Vec<String>>, Vec<WorkerResult<X>>), String> {
    let targets = dec.u64("transport count")?;
    if targets > 4096 {
        return Err("malformed results".into());
    }
    let mut transports = Vec::new();
    for _ in 0..targets {
        let names = dec.str("transports")?;
        transports.push(
            names
                .split(',')
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect(),
        );
    }
    let count = dec.u64("worker count")?;
    if count != workers as u64 {
        return Err(format!("results of {count} workers, expected {workers}"));
    }
    let mut results = Vec::new();
    for _ in 0..count {
        let stats = wire::decode_stats(dec)?;
        let history = wire::decode_history(dec)?;
        let words = dec.words("the node program's statistics")?;
        let extra = X::from_words(&words)
            .ok_or("malformed results: the node program's statistics do not fit it")?;
        results.push(WorkerResult {
            stats,
            history,
            extra,
        });
    }
    Ok((transports, results))
}
