//! CALVIN's node program (the protocol is the parent module), which does not fit the
//! per-transaction stage pipeline of `engine::coroutine`: each node runs a
//! sequencer and a scheduler coroutine on its worker 0 beside the
//! transaction coroutines, which here are CALVIN's executors.
//!
//! Everything else is shared with the other protocols through the one
//! cluster driver (`engine::driver`): the store and its loader, every
//! fabric's backend (`threads`, `sim` — so a CALVIN run is as
//! deterministic as any other — and a `ucx` rank per process), the
//! runtime, the workload's generator and program, the stats, the report
//! and the checker. The history each participant records for its own
//! records is merged per transaction before it is checked. With `--replication R` the store
//! holds backup copies and log rings as for every protocol
//! (`engine::replicated_layout`, `replication`), each worker's executors
//! log through a `LogWriter::for_served` of the partitions the node serves,
//! the CALVIN service serves the log messages and applies ring records in
//! the background, and `--check` compares every backup with its primary.
//! With `--fault` too, the run's `replication::Failover` pauses and
//! recovers the cluster as for every protocol, with CALVIN's resolution of
//! its sequenced transactions as its hook (`calvin::failover`); the failed
//! partitions are then checked on their promoted copies. That failover
//! reads every node's scheduler state, so it needs the whole cluster in
//! one process: a `ucx` run of CALVIN has no failover (a dead rank ends it
//! with an error), and one that asks for it is refused.
//!
//! A run: clients submit until `warmup + duration`; every epoch up to the
//! one holding that instant is sequenced and then executed to the end on
//! every node (a sequenced transaction must run everywhere), so the final
//! store holds exactly the committed history.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use super::failover::CalvinFailover;
use super::{
    client_slots, executor, final_epoch, merge_partial_history, scheduler, sequencer, CalvinEnv,
    CalvinLayout, CalvinService, CalvinStats, NodeShared, STAGE_NAMES, ST_LOG, ST_SEQUENCE,
};
use crate::base::{Primitive, Stage};
use crate::check::History;
use crate::config::{Config, ConfigError, MAX_REGION_BYTES};
use crate::engine::program::{
    log_writers, nodes_of, service_of_each, Cluster, Coroutines, Drive, ExtraStats, FailoverParts,
    NodeProgram, RunClock, WorkerCells, WorkerResult, WorkerStart,
};
use crate::engine::program::{RunError, WithProgram};
use crate::engine::report::{OrderedMap, Report};
use crate::fabric::NodeId;
use crate::recovery::Failover;
use crate::replication::LogWriter;
use crate::stats::WorkerStats;
use crate::store::{StoreLayout, TableLayout};
use crate::workloads::Workload;

/// A run whose epochs stretch stops ordering requests this long after its
/// end at the latest, or after its own length again if that is longer
/// (`CalvinEnv::stop_ns`).
const STOP_SLACK_NS: u64 = 1_000_000_000;

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

/// Builds CALVIN's node program for a validated `config` and `workload`,
/// and its layout (the tables, the heartbeat word when `heartbeat`, then
/// CALVIN's request and forward buffers), and hands both to `visitor`.
pub(crate) fn with_calvin_program<W: Workload, V: WithProgram>(
    config: &Config,
    workload: &W,
    heartbeat: bool,
    visitor: V,
) -> Result<V::Output, RunError> {
    check_workload(workload)?;
    // With replication, every node also holds backup copies of other
    // partitions (`replication::placement`) and, after CALVIN's buffers,
    // the log rings of every coordinator worker.
    let mut layout = StoreLayout::with_copies(&workload.tables(), |_| 0, config.replication);
    if heartbeat {
        layout = layout.with_heartbeat();
    }
    let clients = client_slots(config);
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
    let program = CalvinProgram {
        config,
        workload,
        calvin,
        shared: (0..config.nodes as NodeId).map(NodeShared::new).collect(),
        failover: OnceLock::new(),
    };
    Ok(visitor.with(&program, layout))
}

/// CALVIN on every node: executors on every worker, and the node's
/// sequencer and scheduler on its worker 0.
struct CalvinProgram<'a, W> {
    config: &'a Config,
    workload: &'a W,
    calvin: CalvinLayout,
    /// Every node's scheduler state (a `ucx` rank uses its own only).
    shared: Arc<[NodeShared]>,
    /// CALVIN's resolution of its sequenced transactions, when the run
    /// fails over (`--fault` with `--replication 2|3`).
    failover: OnceLock<Arc<CalvinFailover>>,
}

impl<W> CalvinProgram<'_, W> {
    fn stop_ns(clock: RunClock) -> u64 {
        clock.end_ns + (clock.end_ns - clock.start_ns).max(STOP_SLACK_NS)
    }
}

impl ExtraStats for CalvinStats {
    fn merge(&mut self, other: &CalvinStats) {
        for (a, b) in self.stage_ns.iter_mut().zip(other.stage_ns.iter()) {
            *a += b;
        }
        self.parts += other.parts;
    }

    fn to_words(&self) -> Vec<u64> {
        let mut words = self.stage_ns.to_vec();
        words.push(self.parts);
        words
    }

    fn from_words(words: &[u64]) -> Option<CalvinStats> {
        let (&parts, stage_ns) = words.split_last()?;
        Some(CalvinStats {
            stage_ns: stage_ns.try_into().ok()?,
            parts,
        })
    }
}

impl<W: Workload> NodeProgram for CalvinProgram<'_, W> {
    type Extra = CalvinStats;

    fn slots(&self, index: u16) -> usize {
        self.config.coroutines as usize + if index == 0 { 2 } else { 0 }
    }

    /// A worker gives up on what a failure lost past the sequencers' stop
    /// (plus the detector's margin), not the measured interval's end: a
    /// sequenced transaction runs to its end.
    fn give_up_ns(&self, clock: RunClock) -> u64 {
        Self::stop_ns(clock)
    }

    fn run_workers(
        &self,
        cluster: &Cluster,
        start: WorkerStart<'_>,
        drive: Drive<'_>,
    ) -> Vec<WorkerResult<CalvinStats>> {
        let config = self.config;
        let workers = start.workers;
        let cells = WorkerCells::new(start.histories, 0);
        let calvin_stats: Vec<RefCell<CalvinStats>> = workers
            .iter()
            .map(|_| RefCell::new(CalvinStats::default()))
            .collect();
        let replication = cluster.replication.as_deref();
        let services: Vec<CalvinService> = nodes_of(workers)
            .map(|node| {
                CalvinService::new(
                    &self.shared[node as usize],
                    cluster.store(node),
                    &self.calvin,
                    replication,
                )
            })
            .collect();
        let log_writers = log_writers(cluster, workers, LogWriter::for_served);
        let clock = start.clock;
        let epoch_ns = config.protocol_options.calvin_epoch_us * 1_000;
        let lockstep = config.protocol_options.calvin_inflight == 0;
        let stop_ns = Self::stop_ns(clock);
        let envs: Vec<CalvinEnv<W>> = workers
            .iter()
            .enumerate()
            .map(|(index, worker)| CalvinEnv {
                worker,
                shared: &self.shared[worker.node as usize],
                store: cluster.store(worker.node),
                layout: &cluster.layout,
                calvin: &self.calvin,
                workload: self.workload,
                plan: config.stages,
                cache: &cells.caches[index],
                stats: &cells.stats[index],
                calvin_stats: &calvin_stats[index],
                log: log_writers[index].as_ref(),
                failover: self.failover.get().map(|f| &**f),
                history: start.record_history.then_some(&cells.histories[index]),
                seed: config.seed,
                clock,
                fault_at_ns: cluster.fault_at_ns(clock.start_ns),
                epoch_ns,
                lockstep,
                final_epoch: final_epoch(clock.start_ns, clock.end_ns, epoch_ns),
                stop_ns,
            })
            .collect();
        let mut coroutines: Vec<Coroutines> = envs
            .iter()
            .zip(workers)
            .map(|(env, worker)| coroutines_of(env, config.coroutines as u16, worker.worker))
            .collect();
        drive(&mut coroutines, &service_of_each(workers, &services));
        drop(coroutines);
        drop(envs);
        cells.close(calvin_stats.into_iter().map(RefCell::into_inner))
    }

    /// The executors, and the sequencer and scheduler of worker 0.
    fn failover_coroutines(&self) -> u32 {
        self.config.workers * self.config.coroutines + 2
    }

    /// CALVIN's tuples have no protocol header to reset.
    fn recovered_header(&self) -> fn(&TableLayout, &mut [u64]) {
        |_, _| {}
    }

    fn on_failover(&self, failover: &Arc<Failover>, cluster: FailoverParts<'_>) {
        let calvin_failover = Arc::new(CalvinFailover::new(
            self.shared.clone(),
            cluster.stores.to_vec(),
            self.calvin,
            cluster.replication.clone(),
            self.config.stages.get(Stage::ValueForwarding) == Primitive::OneSided,
        ));
        failover.set_hook(calvin_failover.clone());
        let fresh = self.failover.set(calvin_failover).is_ok();
        debug_assert!(fresh, "one failover per run");
    }

    /// CALVIN's detector works only with its failover.
    fn detector_without_failover(&self) -> bool {
        false
    }

    fn after_run(&self, cluster: &Cluster, stuck: bool) {
        let failover = cluster.faults.as_ref().and_then(|f| f.failover.as_ref());
        for store in &cluster.stores {
            let node_shared = &self.shared[store.node as usize];
            let state = node_shared.lock();
            debug_assert!(
                stuck
                    || failover.is_some_and(|f| f.is_failed(node_shared.node))
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
    }

    /// Every participant's records of each transaction merged into one,
    /// with the parts survivors finished for failed nodes.
    fn history(&self, recorded: History) -> History {
        // Merging needs the flat form; a hash-only history is unpacked for
        // it here, once, after the run.
        let mut recorded = recorded.into_flat();
        if let Some(failover) = self.failover.get() {
            recorded.append(&failover.take_history());
        }
        merge_partial_history(&recorded)
    }

    fn finish_report(
        &self,
        report: &mut Report,
        total: &WorkerStats,
        extra: &CalvinStats,
        replicated: bool,
    ) {
        report.stages = calvin_stages(extra, total.committed, replicated);
        report.notes = nothing_committed_notes(self.config, total.committed);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Epochs far shorter than the run, yet nothing finished (RCC Fig.
    /// 18's hot points by RPC at 4 × 10 × 10): the note names the
    /// outstanding requests, and suggests no epoch longer than the one run.
    #[test]
    fn a_run_with_short_epochs_that_committed_nothing_names_the_queue() {
        let mut config = Config {
            protocol: crate::base::ProtocolKind::Calvin,
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
