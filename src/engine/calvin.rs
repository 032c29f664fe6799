//! The engine path of CALVIN (`protocols::calvin`), which does not fit the
//! per-transaction stage pipeline of `engine::coroutine`: each node runs a
//! sequencer and a scheduler coroutine on its worker 0 beside the
//! transaction coroutines, which here are CALVIN's executors.
//!
//! Everything else is shared with the other protocols: the store and its
//! loader, the fabrics (`threads` runs each worker's event loop on its own
//! OS thread; `sim` drives them turn by turn with `sim::drive`, so a CALVIN
//! run is as deterministic as any other), the runtime, the workload's
//! generator and program, the stats, the report and the checker. The
//! history each participant records for its own records is merged per
//! transaction before it is checked. With `--replication R` the store
//! holds backup copies and log rings as for every protocol
//! (`engine::replicated_layout`, `replication`), each worker's executors
//! log through a `LogWriter::for_served` of the partitions the node serves,
//! the CALVIN service serves the log messages and applies ring records in
//! the background, and `--check` compares every backup with its primary.
//! With `--fault` too, the run's `replication::Failover` pauses and
//! recovers the cluster as for every protocol, with CALVIN's resolution of
//! its sequenced transactions as its hook (`calvin::failover`); the failed
//! partitions are then checked on their promoted copies.
//!
//! A run: clients submit until `warmup + duration`; every epoch up to the
//! one holding that instant is sequenced and then executed to the end on
//! every node (a sequenced transaction must run everywhere), so the final
//! store holds exactly the committed history.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use super::report::OrderedMap;
use super::sim::{self as simdrv, Coroutines, SimRun, START_NS};
use super::{load_stores, replicated_layout, RunError, RunOutput};
use crate::check::{check_serializable, History};
use crate::config::{Config, ConfigError, FabricKind, MAX_REGION_BYTES};
use crate::engine::{CheckSummary, Report};
use crate::fabric::sim::SimFabric;
use crate::fabric::threads::ThreadsFabric;
use crate::fabric::NodeId;
use crate::fault::FaultRun;
use crate::protocols::calvin::failover::CalvinFailover;
use crate::protocols::calvin::{
    client_slots, executor, final_epoch, merge_partial_history, scheduler, sequencer, CalvinEnv,
    CalvinLayout, CalvinService, CalvinStats, NodeShared, STAGE_NAMES, ST_LOG, ST_SEQUENCE,
};
use crate::protocols::{Primitive, Stage};
use crate::replication::{Failover, LogWriter, Replication};
use crate::runtime::{RpcService, Worker};
use crate::stats::WorkerStats;
use crate::store::{LocationCache, NodeStore, StoreLayout};
use crate::workloads::Workload;

/// A run whose epochs stretch stops ordering requests this long after its
/// end at the latest, or after its own length again if that is longer
/// (`CalvinEnv::stop_ns`).
const STOP_SLACK_NS: u64 = 1_000_000_000;

/// What each worker hands back: also the rounds it abandoned at its
/// give-up time.
type WorkerResult = (WorkerStats, History, CalvinStats, u64);

/// A CALVIN run's failure handling, as the drivers need it.
#[derive(Clone, Copy)]
struct Faults<'a> {
    run: &'a FaultRun,
    calvin: &'a CalvinFailover,
}

/// Refuses workloads CALVIN cannot run, with what is missing.
fn check_workload<W: Workload>(workload: &W) -> Result<(), RunError> {
    if workload.max_request_words() == 0 || workload.max_accesses() == 0 {
        return Err(RunError::Config(ConfigError(format!(
            "protocol calvin ships each request to the nodes it touches, as words; workload {} does not say how (Workload::max_request_words, max_accesses, encode_request, decode_request)",
            workload.name()
        ))));
    }
    Ok(())
}

/// Runs a validated CALVIN `config` with `workload`.
pub(crate) fn run_calvin<W: Workload>(
    config: &Config,
    workload: &W,
) -> Result<RunOutput, RunError> {
    check_workload(workload)?;
    let executors = config.workers * config.coroutines;
    let clients = client_slots(config);
    let mut faults = FaultRun::new(config);
    // With replication, every node also holds backup copies of other
    // partitions (`replication::placement`) and, after CALVIN's buffers,
    // the log rings of every coordinator worker.
    let mut layout = StoreLayout::with_copies(&workload.tables(), |_| 0, config.replication);
    if faults.is_some() {
        layout = layout.with_heartbeat();
    }
    let calvin = CalvinLayout::reserve(
        &mut layout,
        config.nodes,
        clients,
        workload.max_accesses() as u32,
        workload.max_forwarded_accesses() as u32,
        workload.max_request_words() as u32,
    );
    let region_bytes = layout.region_words.saturating_mul(8);
    if region_bytes.saturating_mul(config.nodes as u64) > MAX_REGION_BYTES {
        return Err(RunError::Config(ConfigError(format!(
            "CALVIN's request and forward buffers with {} nodes × {} requests in flight per node ({}) need {} MiB of registered memory per node; allowed: at most {} MiB in all — use fewer nodes or workers, or a smaller protocol_options.calvin_inflight",
            config.nodes,
            clients,
            if config.protocol_options.calvin_inflight == 0 {
                "workers × coroutines, lockstep"
            } else {
                "workers × protocol_options.calvin_inflight"
            },
            region_bytes >> 20,
            MAX_REGION_BYTES >> 20
        ))));
    }
    let (layout, replication) = replicated_layout(config, layout);
    let stores =
        load_stores(config, workload, &layout, replication.as_deref()).map_err(RunError::Load)?;
    let shared: Arc<[NodeShared]> = (0..config.nodes as NodeId).map(NodeShared::new).collect();
    // Failure handling (`--fault`; `fault::validate` asks replication 2
    // or 3 of CALVIN): the generic failover, with CALVIN's resolution of
    // its sequenced transactions as its hook (`calvin::failover`).
    let calvin_failover = match (faults.as_mut(), &replication) {
        (Some(faults), Some(replication)) => {
            let poll_ns = faults.settings.heartbeat_interval_ns / 4;
            let failover = Arc::new(Failover::new(
                replication.clone(),
                stores.clone(),
                executors + 2,
                poll_ns,
                |_, _| {},
            ));
            let calvin_failover = Arc::new(CalvinFailover::new(
                shared.clone(),
                stores.clone(),
                calvin,
                replication.clone(),
                config.stages.get(Stage::ValueForwarding) == Primitive::OneSided,
            ));
            failover.set_hook(calvin_failover.clone());
            faults.set_failover(failover);
            Some(calvin_failover)
        }
        _ => None,
    };
    let run_faults = faults
        .as_ref()
        .zip(calvin_failover.as_deref())
        .map(|(run, calvin)| Faults { run, calvin });
    let (results, sim_run, fault_start_ns) = match config.fabric {
        FabricKind::Threads => {
            let (results, start_ns) = run_threads(
                config,
                workload,
                &layout,
                &calvin,
                &stores,
                &shared,
                replication.as_ref(),
                run_faults,
            );
            (results, None, start_ns)
        }
        FabricKind::Sim => {
            let (results, run) = run_sim(
                config,
                workload,
                &layout,
                &calvin,
                &stores,
                &shared,
                replication.as_ref(),
                run_faults,
            );
            (results, Some(run), START_NS)
        }
        FabricKind::Ucx => {
            return Err(RunError::Config(ConfigError(super::UCX_ONE_PROCESS.into())))
        }
    };
    let failover = faults.as_ref().and_then(|f| f.failover.clone());
    if let Some(failover) = &failover {
        failover.finish();
    }
    for node_shared in shared.iter() {
        let state = node_shared.lock();
        debug_assert!(
            sim_run.as_ref().is_some_and(|r| r.stuck_workers > 0)
                || failover.as_ref().is_some_and(|f| f.is_failed(node_shared.node))
                || (state.locks.queued_records() == 0
                    && state.ready.is_empty()
                    && state.parked.is_empty()),
            "a CALVIN node ended with work left: {} locked records, {} ready, {} parked, done below epoch {} of {}",
            state.locks.queued_records(),
            state.ready.len(),
            state.parked.len(),
            state.done_below,
            state.scheduled_below
        );
    }

    let mut total = WorkerStats::new();
    let mut calvin_total = CalvinStats::default();
    let mut partial = History::new();
    let mut abandoned_rounds = 0;
    for (stats, history, calvin_stats, abandoned) in &results {
        total.merge(stats);
        calvin_total.merge(calvin_stats);
        partial.append(history);
        abandoned_rounds += abandoned;
    }
    // The failed nodes' parts that survivors finished for them.
    if let Some(calvin_failover) = &calvin_failover {
        partial.append(&calvin_failover.take_history());
    }
    let history = merge_partial_history(&partial);
    let check = config.check.then(|| {
        let verdict = check_serializable(&history);
        if let (Some(failover), Some(replication)) = (&failover, &replication) {
            // Every failed partition is read from its promoted copy.
            return CheckSummary::new(
                verdict,
                super::check_after_failover(workload, &history, &stores, replication, failover),
            );
        }
        // Every participant logged its writes to its partition's backups
        // before installing them: after the rings drain, every backup copy
        // must equal its primary.
        super::check_stores(
            workload,
            verdict,
            &history,
            &stores,
            replication.as_deref(),
            "",
        )
    });
    let per_worker_committed: Vec<u64> = results.iter().map(|(s, ..)| s.committed).collect();
    let mut report = Report::build(
        config,
        workload.name(),
        workload.txn_types(),
        &total,
        &per_worker_committed,
        check,
    );
    report.stages = calvin_stages(&calvin_total, total.committed, replication.is_some());
    report.notes = nothing_committed_notes(config, total.committed);
    report.sim = sim_run.map(|mut run| {
        run.abandoned_rounds = abandoned_rounds;
        run.summary(&history, &stores)
    });
    report.recovery = faults.as_ref().map(|f| {
        f.report(
            config,
            total.fault_commits,
            abandoned_rounds,
            fault_start_ns,
        )
    });
    Ok(RunOutput {
        report,
        history: config.check.then_some(history),
        stores,
        replication,
    })
}

/// Why a CALVIN run that committed nothing did: a transaction completes
/// only after its epoch closed, so a run not longer than one epoch cannot
/// commit (the presets' few ms of virtual time against the 5 ms default).
fn nothing_committed_notes(config: &Config, committed: u64) -> Vec<String> {
    if committed > 0 {
        return Vec::new();
    }
    let epoch_us = config.protocol_options.calvin_epoch_us;
    let run_us = ((config.warmup_s + config.duration_s) * 1e6) as u64;
    // A few dozen epochs per run, as the check matrix gives CALVIN.
    let suggested_us = (run_us / 24).max(1);
    if epoch_us >= run_us {
        vec![format!(
            "calvin committed nothing: its first epoch closes {epoch_us} µs after the start (protocol_options.calvin_epoch_us), not before the run ends at {run_us} µs (warmup + duration), and a transaction completes only after its epoch closed; try --calvin-epoch-us {suggested_us} or a longer run"
        )]
    } else if suggested_us < epoch_us {
        vec![format!(
            "calvin committed nothing in the measured interval: {} epoch(s) of {epoch_us} µs close within the {run_us} µs run, and no transaction completed after the warmup and before the end; try shorter epochs (--calvin-epoch-us {suggested_us}) or a longer run",
            run_us / epoch_us
        )]
    } else {
        // Epochs short enough, yet nothing finished: each request waited
        // longer than the run, behind the others its clients keep
        // outstanding (lock queues on hot records).
        vec![format!(
            "calvin committed nothing in the measured interval: {} epoch(s) of {epoch_us} µs close within the {run_us} µs run, but no transaction completed after the warmup and before the end: each waited longer than that behind the other requests its clients keep outstanding ({} per worker, protocol_options.calvin_inflight); try fewer (--calvin-inflight) or a longer run",
            run_us / epoch_us,
            match config.protocol_options.calvin_inflight {
                0 => "one per coroutine per epoch".to_string(),
                n => n.to_string(),
            }
        )]
    }
}

/// CALVIN's stage breakdown, µs: `sequence` per committed transaction (at
/// its origin), the others per participant part; `log` only when the run
/// replicated.
fn calvin_stages(stats: &CalvinStats, committed: u64, replicated: bool) -> OrderedMap<f64> {
    let per = |ns: u64, count: u64| {
        if count == 0 {
            0.0
        } else {
            ns as f64 / count as f64 / 1_000.0
        }
    };
    OrderedMap(
        STAGE_NAMES
            .iter()
            .enumerate()
            .filter(|&(index, _)| replicated || index != ST_LOG)
            .map(|(index, &name)| {
                let count = if index == ST_SEQUENCE {
                    committed
                } else {
                    stats.parts
                };
                (name, per(stats.stage_ns[index], count))
            })
            .collect(),
    )
}

/// The coroutines of one worker: its executors, and on worker 0 the
/// node's sequencer and scheduler after them.
fn coroutines_of<'a, W: Workload>(
    env: &'a CalvinEnv<'a, W>,
    executors: u16,
    worker_index: u16,
) -> Coroutines<'a> {
    let mut coroutines: Coroutines<'a> = (0..executors)
        .map(|co| Box::pin(executor::run_executor(env, co)) as Pin<Box<dyn Future<Output = ()>>>)
        .collect();
    if worker_index == 0 {
        coroutines.push(Box::pin(sequencer::run_sequencer(env, executors)));
        coroutines.push(Box::pin(scheduler::run_scheduler(env, executors + 1)));
    }
    coroutines
}

fn slots_of(config: &Config, worker_index: u16) -> usize {
    config.coroutines as usize + if worker_index == 0 { 2 } else { 0 }
}

fn close(
    stats: RefCell<WorkerStats>,
    history: RefCell<History>,
    calvin_stats: RefCell<CalvinStats>,
    cache: RefCell<LocationCache>,
    abandoned_rounds: u64,
) -> WorkerResult {
    let mut stats = stats.into_inner();
    stats.close();
    let cache = cache.into_inner();
    stats.cache_hits = cache.hits;
    stats.cache_misses = cache.misses;
    (
        stats,
        history.into_inner(),
        calvin_stats.into_inner(),
        abandoned_rounds,
    )
}

/// `worker` with its node's membership, detector and failover when the
/// run handles failures; it gives up on what it still waits for past
/// `stop_ns` plus the detector's margin.
fn attach_faults(
    worker: Worker,
    faults: Option<Faults<'_>>,
    layout: &StoreLayout,
    config: &Config,
    stop_ns: u64,
) -> Worker {
    match faults {
        Some(faults) => faults
            .run
            .attach_in_process(worker, layout, config, stop_ns),
        None => worker,
    }
}

/// Runs every worker on an OS thread of its own; returns the results and
/// the fabric time the run started at.
#[allow(clippy::too_many_arguments)]
fn run_threads<W: Workload>(
    config: &Config,
    workload: &W,
    layout: &Arc<StoreLayout>,
    calvin: &CalvinLayout,
    stores: &[Arc<NodeStore>],
    shared: &[NodeShared],
    replication: Option<&Arc<Replication>>,
    faults: Option<Faults<'_>>,
) -> (Vec<WorkerResult>, u64) {
    let fabric = ThreadsFabric::new(
        stores.iter().map(|s| s.region.clone()).collect(),
        config.workers as u16,
        config.threads_latency(),
    );
    let total_workers = config.total_workers() as usize;
    let ready = Barrier::new(total_workers + 1);
    let go = Barrier::new(total_workers + 1);
    let start_ns = AtomicU64::new(0);
    let finished = AtomicUsize::new(0);
    let warmup_ns = (config.warmup_s * 1e9) as u64;
    let duration_ns = (config.duration_s * 1e9) as u64;
    let epoch_ns = config.protocol_options.calvin_epoch_us * 1_000;
    let lockstep = config.protocol_options.calvin_inflight == 0;

    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(total_workers);
        for node in 0..config.nodes as NodeId {
            for worker_index in 0..config.workers as u16 {
                let fabric = &fabric;
                let (ready, go, start_ns, finished) = (&ready, &go, &start_ns, &finished);
                let handle = std::thread::Builder::new()
                    .name(format!("verbena-n{node}-w{worker_index}"))
                    .spawn_scoped(scope, move || {
                        let endpoint = fabric.endpoint(node, worker_index);
                        let mut worker =
                            Worker::new(Box::new(endpoint), slots_of(config, worker_index));
                        let cache = RefCell::new(LocationCache::new(0));
                        let stats = RefCell::new(WorkerStats::new());
                        let calvin_stats = RefCell::new(CalvinStats::default());
                        let history = RefCell::new(History::new());
                        let store = &stores[node as usize];
                        let service = CalvinService::new(
                            &shared[node as usize],
                            store,
                            calvin,
                            replication.map(|r| &**r),
                        );
                        let log = replication
                            .map(|r| LogWriter::for_served(r.clone(), node, worker_index));
                        ready.wait();
                        go.wait();
                        let start = start_ns.load(Ordering::SeqCst);
                        let end = start + warmup_ns + duration_ns;
                        let stop_ns = end + (end - start).max(STOP_SLACK_NS);
                        worker = attach_faults(worker, faults, layout, config, stop_ns);
                        let env = CalvinEnv {
                            worker: &worker,
                            shared: &shared[node as usize],
                            store,
                            layout,
                            calvin,
                            workload,
                            plan: config.stages,
                            cache: &cache,
                            stats: &stats,
                            calvin_stats: &calvin_stats,
                            log: log.as_ref(),
                            failover: faults.map(|f| f.calvin),
                            history: config.check.then_some(&history),
                            seed: config.seed,
                            start_ns: start,
                            warmup_end_ns: start + warmup_ns,
                            end_ns: end,
                            fault_at_ns: faults
                                .map_or(u64::MAX, |f| start.saturating_add(f.run.first_fault_ns)),
                            epoch_ns,
                            lockstep,
                            final_epoch: final_epoch(start, end, epoch_ns),
                            stop_ns,
                        };
                        let mut coroutines =
                            coroutines_of(&env, config.coroutines as u16, worker_index);
                        worker.run(&mut coroutines, &service, finished, total_workers);
                        drop(coroutines);
                        let abandoned = worker.abandoned_rounds();
                        close(stats, history, calvin_stats, cache, abandoned)
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
                .run
                .each_crash(start, |node, at| fabric.crash_node(node, at));
        }
        go.wait();
        let results = handles
            .into_iter()
            .map(|h| h.join().expect("a worker thread panicked"))
            .collect();
        (results, start)
    })
}

#[allow(clippy::too_many_arguments)]
fn run_sim<W: Workload>(
    config: &Config,
    workload: &W,
    layout: &Arc<StoreLayout>,
    calvin: &CalvinLayout,
    stores: &[Arc<NodeStore>],
    shared: &[NodeShared],
    replication: Option<&Arc<Replication>>,
    faults: Option<Faults<'_>>,
) -> (Vec<WorkerResult>, SimRun) {
    let wall = Instant::now();
    let workers_per_node = config.workers as u16;
    let fabric = SimFabric::new(
        stores.iter().map(|s| s.region.clone()).collect(),
        workers_per_node,
        &config.profile,
        &config.sim,
        config.seed,
    );
    let total = config.total_workers() as usize;
    let node_of = |index: usize| (index / workers_per_node as usize) as NodeId;
    let worker_of = |index: usize| (index % workers_per_node as usize) as u16;
    let warmup_end_ns = START_NS + (config.warmup_s * 1e9) as u64;
    let end_ns = warmup_end_ns + (config.duration_s * 1e9) as u64;
    let stop_ns = end_ns + (end_ns - START_NS).max(STOP_SLACK_NS);
    if let Some(faults) = faults {
        faults
            .run
            .each_crash(START_NS, |node, at| fabric.crash_node(node, at));
    }
    let workers: Vec<Worker> = (0..total)
        .map(|index| {
            let endpoint = fabric.endpoint(node_of(index), worker_of(index));
            let worker = Worker::new(Box::new(endpoint), slots_of(config, worker_of(index)));
            attach_faults(worker, faults, layout, config, stop_ns)
        })
        .collect();
    let caches: Vec<RefCell<LocationCache>> = (0..total)
        .map(|_| RefCell::new(LocationCache::new(0)))
        .collect();
    let stats: Vec<RefCell<WorkerStats>> = (0..total)
        .map(|_| RefCell::new(WorkerStats::new()))
        .collect();
    let calvin_stats: Vec<RefCell<CalvinStats>> = (0..total)
        .map(|_| RefCell::new(CalvinStats::default()))
        .collect();
    let histories: Vec<RefCell<History>> =
        (0..total).map(|_| RefCell::new(History::new())).collect();
    let services: Vec<CalvinService> = (0..config.nodes as usize)
        .map(|node| {
            CalvinService::new(
                &shared[node],
                &stores[node],
                calvin,
                replication.map(|r| &**r),
            )
        })
        .collect();
    let log_writers: Vec<Option<LogWriter>> = (0..total)
        .map(|index| {
            replication.map(|r| LogWriter::for_served(r.clone(), node_of(index), worker_of(index)))
        })
        .collect();
    let epoch_ns = config.protocol_options.calvin_epoch_us * 1_000;
    let lockstep = config.protocol_options.calvin_inflight == 0;
    let envs: Vec<CalvinEnv<W>> = (0..total)
        .map(|index| CalvinEnv {
            worker: &workers[index],
            shared: &shared[node_of(index) as usize],
            store: &stores[node_of(index) as usize],
            layout,
            calvin,
            workload,
            plan: config.stages,
            cache: &caches[index],
            stats: &stats[index],
            calvin_stats: &calvin_stats[index],
            log: log_writers[index].as_ref(),
            failover: faults.map(|f| f.calvin),
            history: Some(&histories[index]),
            seed: config.seed,
            start_ns: START_NS,
            warmup_end_ns,
            end_ns,
            fault_at_ns: faults.map_or(u64::MAX, |f| START_NS.saturating_add(f.run.first_fault_ns)),
            epoch_ns,
            lockstep,
            final_epoch: final_epoch(START_NS, end_ns, epoch_ns),
            stop_ns,
        })
        .collect();
    let mut coroutines: Vec<Coroutines> = envs
        .iter()
        .enumerate()
        .map(|(index, env)| coroutines_of(env, config.coroutines as u16, worker_of(index)))
        .collect();
    let service_refs: Vec<&dyn RpcService> = (0..total)
        .map(|index| &services[node_of(index) as usize] as &dyn RpcService)
        .collect();
    let (simulated_ns, done_count) =
        simdrv::drive(&fabric, &workers, &mut coroutines, &service_refs, end_ns);
    drop(coroutines);
    drop(envs);
    let results = stats
        .into_iter()
        .zip(histories)
        .zip(calvin_stats)
        .zip(caches)
        .zip(&workers)
        .map(|((((stats, history), calvin_stats), cache), worker)| {
            close(
                stats,
                history,
                calvin_stats,
                cache,
                worker.abandoned_rounds(),
            )
        })
        .collect();
    let run = SimRun {
        abandoned_rounds: 0,
        simulated_ns,
        wall_s: wall.elapsed().as_secs_f64(),
        events: fabric.events_processed(),
        lost: fabric.lost_count(),
        stuck_workers: total - done_count,
    };
    (results, run)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Epochs far shorter than the run, yet nothing finished (RCC Fig.
    /// 18's hot points by RPC at 4 × 10 × 10): the note names the
    /// outstanding requests, and suggests no epoch longer than the one run.
    #[test]
    fn a_run_with_short_epochs_that_committed_nothing_names_the_queue() {
        let mut config = Config {
            protocol: crate::protocols::ProtocolKind::Calvin,
            duration_s: 0.006,
            warmup_s: 0.001,
            ..Config::default()
        };
        config.protocol_options.calvin_epoch_us = 200;
        let notes = nothing_committed_notes(&config, 0);
        assert!(
            notes.len() == 1
                && notes[0].contains("35 epoch(s) of 200 µs")
                && notes[0].contains("calvin_inflight")
                && !notes[0].contains("--calvin-epoch-us"),
            "{notes:?}"
        );
        // Epochs too long for the run: shorter ones are suggested.
        config.protocol_options.calvin_epoch_us = 1_000;
        assert!(nothing_committed_notes(&config, 0)[0].contains("--calvin-epoch-us 291"));
        assert!(nothing_committed_notes(&config, 1).is_empty());
    }
}
