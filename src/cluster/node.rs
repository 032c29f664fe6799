//! One node of a multi-process run on the `ucx` fabric: this process hosts
//! node `rank` (its store, loaded here, and its workers as threads); every
//! other node is another process, reached through UCX.
//!
//! Sequence (every wait bounded, see `bootstrap`):
//! 1. load this node's partition; register its region with UCX;
//! 2. each worker thread creates its `ucp_worker` and hands its address to
//!    the main thread;
//! 3. join: addresses, rkeys and region layouts of every rank are exchanged
//!    (rank 0 checks that every rank runs the same configuration and the
//!    same region size);
//! 4. each worker connects to the worker of its index on every node, then a
//!    cluster barrier (`Ready` → `Go`) starts every rank's clock;
//! 5. the main thread watches: its workers' progress, peers' heartbeats and
//!    UCX's peer-failure flag; a rank whose workers all finished says
//!    `Done`; when all have, rank 0 says `AllDone` and the workers stop
//!    serving (until then they serve RPCs and UCX progress for their peers);
//! 6. every rank sends rank 0 its workers' statistics, its history and —
//!    with `check` — an image of its region; rank 0 merges them and runs
//!    the same checker and invariants as a `threads` run on the gathered
//!    history and on every node's final store, and reports exactly like a
//!    `threads` run, plus the processes and the transports UCX chose.
//!
//! Endpoints are torn down only after the results are in, so a rank that
//! finished early never looks like a failed peer to one still finishing.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::bootstrap::{hostname, Bootstrap, BootstrapOptions, RankInfo};
use super::wire::{self, Dec, Enc, Kind};
use crate::check::{check_serializable, store_matches_history, History};
use crate::config::{Config, ConfigError, FabricKind, LocalAtomics, UcxTransport};
use crate::engine::coroutine::{self, CoroutineEnv};
use crate::engine::report::{ClusterSummary, RankSummary};
use crate::engine::{self, CheckSummary, Report, RunError, RunOutput, WithProtocol, WithWorkload};
use crate::fabric::ucx::{ucx_version, PeerInfo, TransportChoice, UcxContext, UcxWorkerHost};
use crate::fabric::NodeId;
use crate::protocols::Protocol;
use crate::replication::{LogWriter, Replication};
use crate::runtime::{RpcService, Served, Worker};
use crate::stats::WorkerStats;
use crate::store::{LocationCache, NodeStore, StoreLayout};
use crate::workloads::Workload;

/// Which node this process is, and where rank 0 listens.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    pub rank: u32,
    pub bootstrap: String,
}

/// Runs this process's node of `config` (fabric forced to `ucx`). Rank 0
/// returns the run's output; the other ranks `None`.
pub fn run_node(config: &Config, options: &NodeOptions) -> Result<Option<RunOutput>, RunError> {
    let mut config = config.clone();
    config.fabric = FabricKind::Ucx;
    config.validate()?;
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
    impl<W: Workload> WithProtocol for OnNode<'_, W> {
        type Output = Result<Option<RunOutput>, RunError>;
        fn with<P: Protocol>(self, protocol: &P) -> Self::Output {
            run_protocol(self.config, self.options, protocol, self.workload)
        }
    }
    let on_node = OnNode {
        config,
        options,
        workload,
    };
    engine::with_protocol(config, on_node).unwrap_or_else(|| {
        Err(RunError::Config(ConfigError(format!(
            "protocol {} does not run on the ucx fabric in this build (its sequencer and scheduler run on the threads and sim fabrics)",
            config.protocol.name()
        ))))
    })
}

struct NodeService<'a, P: Protocol> {
    protocol: &'a P,
    store: &'a NodeStore,
    replication: Option<&'a Replication>,
    scratch: RefCell<Vec<u64>>,
}

impl<P: Protocol> RpcService for NodeService<'_, P> {
    fn serve(&self, kind: u16, payload: &mut Vec<u64>) -> Served {
        if let Some(replication) = self.replication {
            if let Some(served) = replication.serve(self.store, kind, payload) {
                return served;
            }
        }
        self.protocol.serve(self.store, kind, payload)
    }

    fn background(&self, worker: u16) -> bool {
        match self.replication {
            Some(r) => r.poll(self.store, worker, &mut self.scratch.borrow_mut()),
            None => false,
        }
    }
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

type WorkerResult = (WorkerStats, History);
/// A worker's word that its endpoints are up: the transports UCX chose to
/// each node (worker 0 only), or what went wrong.
type ReadyReport = (u16, Result<Vec<Vec<String>>, String>);

/// What the main thread hands a worker thread, and gets back.
struct WorkerLinks {
    address: Sender<(u16, Result<Vec<u8>, String>)>,
    peers: Receiver<Vec<PeerInfo>>,
    ready: Sender<ReadyReport>,
    go: Receiver<u64>,
    result: Sender<(u16, WorkerResult)>,
    teardown: Receiver<()>,
}

#[allow(clippy::too_many_arguments)]
fn worker_thread<P: Protocol, W: Workload>(
    config: &Config,
    context: &UcxContext,
    store: &NodeStore,
    layout: &StoreLayout,
    protocol: &P,
    workload: &W,
    worker_index: u16,
    links: WorkerLinks,
    stop: &AtomicBool,
    local_done: &AtomicUsize,
    replication: Option<&Arc<Replication>>,
) {
    let node = store.node;
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
    let Ok(start) = links.go.recv() else {
        return;
    };
    let worker = Worker::new(Box::new(endpoint), config.coroutines as usize);
    let cache = RefCell::new(LocationCache::new(config.location_cache_entries));
    let stats = RefCell::new(WorkerStats::new());
    let history = RefCell::new(History::new());
    let service = NodeService {
        protocol,
        store,
        replication: replication.map(|r| &**r),
        scratch: RefCell::new(Vec::new()),
    };
    let log_writer = replication.map(|r| LogWriter::new(r.clone(), store.node, worker_index));
    let warmup_ns = (config.warmup_s * 1e9) as u64;
    let duration_ns = (config.duration_s * 1e9) as u64;
    let env = CoroutineEnv {
        worker: &worker,
        layout,
        cache: &cache,
        stats: &stats,
        history: config.check.then_some(&history),
        local_store: store,
        protocol,
        workload,
        plan: config.stages,
        backoff: config.backoff,
        seed: config.seed,
        warmup_end_ns: start + warmup_ns,
        end_ns: start + warmup_ns + duration_ns,
        log: log_writer.as_ref(),
        fault_at_ns: u64::MAX,
        record_at_commit_point: false,
    };
    let mut coroutines: Vec<Pin<Box<dyn Future<Output = ()> + '_>>> = (0..config.coroutines as u16)
        .map(|co| {
            Box::pin(coroutine::run_coroutine(&env, co)) as Pin<Box<dyn Future<Output = ()> + '_>>
        })
        .collect();
    let mut announced = false;
    loop {
        let turn = worker.turn(&mut coroutines, &service);
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
    drop(coroutines);
    let mut stats = stats.into_inner();
    stats.close();
    let cache = cache.into_inner();
    stats.cache_hits = cache.hits;
    stats.cache_misses = cache.misses;
    let _ = links
        .result
        .send((worker_index, (stats, history.into_inner())));
    // The endpoints go only once every rank is past its run (see docs).
    let _ = links.teardown.recv();
    drop(worker);
}

fn cluster<E: std::fmt::Display>(e: E) -> RunError {
    RunError::Cluster(e.to_string())
}

fn run_protocol<P: Protocol, W: Workload>(
    config: &Config,
    options: &NodeOptions,
    protocol: &P,
    workload: &W,
) -> Result<Option<RunOutput>, RunError> {
    let rank = options.rank;
    let nodes = config.nodes;
    let workers = config.workers as u16;
    let (layout, replication) = crate::engine::replicated_layout(
        config,
        StoreLayout::with_copies(&workload.tables(), P::header_words, config.replication)
            .with_txn_meta(workers, config.coroutines as u16, P::txn_meta_words()),
    );
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
        crate::replication::load_backups(workload, &store, &replication.placement)
            .map_err(RunError::Load)?;
    }
    let config_json = serde_json::to_string(config).map_err(cluster)?;
    let stall = Duration::from_secs_f64(config.ucx.stall_timeout_s);
    let boot_options = BootstrapOptions {
        rank,
        nodes,
        address: options.bootstrap.clone(),
        join_timeout: Duration::from_secs_f64(config.ucx.join_timeout_s),
        stall_timeout: stall,
        digest: wire::digest(config_json.as_bytes()),
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
            let (context, store, layout, stop, local_done) =
                (&context, &store, &layout, &stop, &local_done);
            let replication = replication.as_ref();
            std::thread::Builder::new()
                .name(format!("verbena-n{rank}-w{worker_index}"))
                .spawn_scoped(scope, move || {
                    worker_thread(
                        config,
                        context,
                        store,
                        layout,
                        protocol,
                        workload,
                        worker_index,
                        links,
                        stop,
                        local_done,
                        replication,
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
            &store,
            &layout,
            workload,
            &mut boot,
            &peer_txs,
            &go_txs,
            &ready_rx,
            &result_rx,
            &stop,
            &local_done,
            stall,
            replication.clone(),
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
                Err(cluster(boot.abort(message)))
            }
        }
    })
}

/// Steps 4–6 of the module docs; an `Err` is the message every rank gets.
#[allow(clippy::too_many_arguments)]
fn drive<W: Workload>(
    config: &Config,
    workers: u16,
    context: &UcxContext,
    store: &Arc<NodeStore>,
    layout: &Arc<StoreLayout>,
    workload: &W,
    boot: &mut Bootstrap,
    peer_txs: &[Sender<Vec<PeerInfo>>],
    go_txs: &[Sender<u64>],
    ready_rx: &Receiver<ReadyReport>,
    result_rx: &Receiver<(u16, WorkerResult)>,
    stop: &AtomicBool,
    local_done: &AtomicUsize,
    stall: Duration,
    replication: Option<Arc<Replication>>,
) -> Result<Option<RunOutput>, String> {
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

    // The run: watch workers, peers and UCX until every rank is done.
    let run_for = Duration::from_secs_f64(config.warmup_s + config.duration_s);
    // Rank 0 judges first; the others wait longer, to hear its verdict.
    let grace = if rank == 0 { stall } else { stall * 2 };
    let deadline = Instant::now() + run_for + grace;
    let mut done = vec![false; nodes as usize];
    let mut sent_done = false;
    loop {
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
        if rank == 0 && done.iter().all(|&d| d) {
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
    stop.store(true, Ordering::SeqCst);
    let mut results: Vec<Option<WorkerResult>> = (0..workers).map(|_| None).collect();
    for _ in 0..workers {
        let (w, result) = wait_local(boot, result_rx, stall, "hand over their results")?;
        results[w as usize] = Some(result);
    }
    let results: Vec<WorkerResult> = results.into_iter().map(|r| r.expect("all")).collect();

    if rank != 0 {
        let mut enc = Enc::default();
        encode_rank_result(&mut enc, &transports, &results);
        if config.check {
            let words: Vec<u64> = (0..layout.region_words)
                .map(|w| store.region.load(w))
                .collect();
            enc.words(&words);
            let rows: Vec<u64> = store.row_counters();
            enc.words(&rows);
        }
        boot.send(Kind::Result, &enc.bytes)?;
        return Ok(None);
    }

    // Rank 0: gather, merge, check, report.
    let deadline = Instant::now() + stall * 6;
    let frames = boot.gather(Kind::Result, deadline, "send its results")?;
    let mut all_results: Vec<WorkerResult> = results;
    let mut rank_transports = vec![transports];
    let mut stores = vec![store.clone()];
    for (from, frame) in frames {
        boot.mark_finished(from);
        let who = boot.describe(from);
        let mut dec = Dec::new(&frame.body);
        let (chosen, results) =
            decode_rank_result(&mut dec, workers).map_err(|e| format!("{who}: {e}"))?;
        rank_transports.push(chosen);
        all_results.extend(results);
        if config.check {
            let words = dec
                .words("region image")
                .map_err(|e| format!("{who}: {e}"))?;
            let rows = dec.words("row counts").map_err(|e| format!("{who}: {e}"))?;
            let image = NodeStore::from_image(from as NodeId, layout.clone(), &words, &rows)
                .ok_or_else(|| format!("{who}: its region image does not fit the layout"))?;
            stores.push(Arc::new(image));
        }
    }
    // Node order, as the checker and the invariants expect.
    stores.sort_by_key(|store| store.node);
    let mut total = WorkerStats::new();
    let mut history = History::new();
    for (stats, worker_history) in &all_results {
        total.merge(stats);
        history.append(worker_history);
    }
    let check = config.check.then(|| {
        let verdict = check_serializable(&history);
        let mut invariants = workload.check_invariants(&stores, &history);
        let mismatches = store_matches_history(&history, &stores);
        if mismatches.is_empty() {
            invariants.details.push(
                "every tuple's version is the one its last committed write installed (all ranks' stores)"
                    .into(),
            );
        } else {
            invariants.ok = false;
            invariants.details.extend(mismatches);
        }
        if let Some(replication) = &replication {
            crate::replication::check_backups(replication, &stores, &[], &mut invariants);
        }
        CheckSummary::new(verdict, invariants)
    });
    let per_worker_committed: Vec<u64> = all_results.iter().map(|(s, _)| s.committed).collect();
    let mut report = Report::build(
        config,
        workload.name(),
        &total,
        &per_worker_committed,
        check,
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
            .zip(rank_transports)
            .map(|(info, transports)| RankSummary {
                rank: info.rank,
                host: info.host.clone(),
                pid: info.pid,
                transports,
            })
            .collect(),
    });
    Ok(Some(RunOutput {
        report,
        history: config.check.then_some(history),
        // Every node's store with `check` (gathered for it), else rank 0's.
        stores,
        replication,
    }))
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

fn encode_rank_result(enc: &mut Enc, transports: &[Vec<String>], results: &[WorkerResult]) {
    enc.u64(transports.len() as u64);
    for names in transports {
        enc.str(&names.join(","));
    }
    enc.u64(results.len() as u64);
    for (stats, history) in results {
        wire::encode_stats(enc, stats);
        wire::encode_history(enc, history);
    }
}

fn decode_rank_result(
    dec: &mut Dec,
    workers: u16,
) -> Result<(Vec<Vec<String>>, Vec<WorkerResult>), String> {
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
        results.push((stats, history));
    }
    Ok((transports, results))
}
