//! The report of a run: the JSON document scripts consume (the contract of
//! the foundation issue: `config`, `throughput_txn_per_s`, `abort_rate`,
//! `latency_us`, `stages`, `verbs_per_txn`, `check`) and the human table.
//!
//! Every figure covers the measured interval only (warm-up excluded), except
//! `check`, which covers the whole run, and the location-cache hit rate,
//! which covers every lookup of the run.

use std::fmt::Write as _;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::base::ProtocolKind;
use crate::check::CheckReport;
use crate::config::{Config, FabricKind, KeyDistribution, WorkloadKind, YcsbConfig};
use crate::stats::hist::{quantile, Histogram};
use crate::stats::{Latencies, WorkerStats};
use crate::txn::AbortReason;
use crate::workloads::InvariantReport;

/// Name → value pairs serialized as a JSON object in their given order.
#[derive(Clone, Debug, Default)]
pub struct OrderedMap<V>(pub Vec<(&'static str, V)>);

impl<V: Serialize> Serialize for OrderedMap<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// Latency percentiles of committed transactions, µs, read from the run's
/// HdrHistograms (`stats::hist`: each value is the top of its bucket, at
/// most 0.8 % above the true one); `mean` is HdrHistogram's, from bucket
/// midpoints.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LatencyUs {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub mean: f64,
    pub max: f64,
}

impl LatencyUs {
    pub fn of(histogram: &Histogram) -> LatencyUs {
        let us = |ns: u64| ns as f64 / 1_000.0;
        LatencyUs {
            p50: us(quantile(histogram, 0.5)),
            p90: us(quantile(histogram, 0.9)),
            p99: us(quantile(histogram, 0.99)),
            p999: us(quantile(histogram, 0.999)),
            mean: if histogram.is_empty() {
                0.0
            } else {
                histogram.mean() / 1_000.0
            },
            max: us(histogram.max()),
        }
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct VerbsPerTxn {
    pub read: f64,
    pub write: f64,
    pub cas: f64,
    pub faa: f64,
    pub rpc: f64,
    /// Doorbell batches (one MMIO each on real hardware).
    pub doorbells: f64,
    /// Bytes of one-sided READ and WRITE payloads and RPC requests.
    pub bytes: f64,
    /// Messages between nodes per committed transaction, counted alike on
    /// every fabric (`VerbCounters::wire_messages`): two per one-sided
    /// verb to another node (request and response, as an RDMA NIC sends
    /// them, also where a fabric runs the verb on shared or mapped
    /// memory), and RPC requests and replies coalesced as `ucx` sends
    /// them (everything one worker sends to one node in one turn is one
    /// message), so fewer than the logical RPCs above. A one-sided and an
    /// RPC run thus compare across `sim`, `threads` and `ucx`.
    pub wire_messages: f64,
    /// Bytes of those messages, headers included.
    pub wire_bytes: f64,
}

/// Fractions of the worker threads' wall time in the measured interval
/// (RCBench's effective CPU utilisation is `busy`; RCC's point that RPC
/// stages cost the remote side CPU shows in `rpc_handlers`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct WorkerTime {
    /// Not idle: running coroutines, handlers and the event loop (on an
    /// oversubscribed machine, also time the thread waited for a core).
    pub busy: f64,
    /// Serving other workers' RPCs (a share of `busy`).
    pub rpc_handlers: f64,
    /// Nothing runnable and no message: spinning, yielding or parked.
    pub idle: f64,
}

/// Where the coroutines' time went in the measured interval, as fractions
/// of all coroutine time (`nodes × workers × coroutines × duration`): the
/// analogue of Deneva's time breakdown (Deneva §5.3, Fig. 6) for a
/// coroutine-per-transaction engine. Deneva splits a worker thread's CPU
/// time; here a coroutine waiting on the network is counted in the stage it
/// waits in, so these are shares of transaction time, not of CPU time (that
/// is `worker_time`). Stage and execution times are those of committed
/// transactions' final attempts, counted when the commit falls in the
/// measured interval (a transaction begun in the warm-up is counted whole;
/// should the parts then exceed the total, they are scaled to it); aborted
/// attempts and back-off ending in the interval count their part inside it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TimeBreakdown {
    /// The program's own work in committed attempts (Deneva: useful work).
    pub useful_work: f64,
    /// Execution-phase and concurrency-control stages of committed attempts:
    /// read, lock, validate, renew (Deneva: CC manager).
    pub concurrency_control: f64,
    /// Commit-protocol stages of committed attempts: log, commit, release
    /// (Deneva: 2PC / commit).
    pub commit: f64,
    /// Attempts that aborted, their release included (Deneva: abort).
    pub abort: f64,
    /// Back-off sleeps between an abort and the retry.
    pub backoff: f64,
    /// The rest: generating requests, scheduling, edges of the interval
    /// (Deneva: txn manager and idle).
    pub other: f64,
}

/// The checker's and the workload's verdicts.
#[derive(Clone, Debug, Serialize)]
pub struct CheckSummary {
    pub serializable: bool,
    pub invariants_ok: bool,
    /// Transaction ids of a dependency cycle, if one was found.
    pub cycle: Option<Vec<u64>>,
    pub txn_count: usize,
    pub edge_count: usize,
    /// Strongly connected components with a cycle: how widespread the
    /// damage is.
    pub cyclic_components: usize,
    /// The first anomalies found (listed), and how many in all.
    pub anomalies: Vec<String>,
    pub anomaly_count: usize,
    pub invariants: Vec<String>,
}

impl CheckSummary {
    pub fn new(verdict: CheckReport, invariants: InvariantReport) -> CheckSummary {
        CheckSummary {
            serializable: verdict.serializable,
            invariants_ok: invariants.ok,
            cycle: verdict.cycle,
            txn_count: verdict.txn_count,
            edge_count: verdict.edge_count,
            cyclic_components: verdict.cyclic_components,
            anomalies: verdict.anomalies,
            anomaly_count: verdict.anomaly_count,
            invariants: invariants.details,
        }
    }

    pub fn passed(&self) -> bool {
        self.serializable && self.invariants_ok
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub verbena_version: &'static str,
    /// The fully resolved configuration.
    pub config: Config,
    /// The workload that ran (a custom one's own name).
    pub workload: &'static str,
    pub cores: usize,
    /// More worker threads than cores: the figures are those of a
    /// time-shared machine.
    pub oversubscribed: bool,
    pub measured_s: f64,
    pub committed: u64,
    pub throughput_txn_per_s: f64,
    pub throughput_per_worker_txn_per_s: f64,
    /// Each worker's throughput, node-major (`node · workers + worker`).
    pub worker_txn_per_s: Vec<f64>,
    /// Committed transactions in the measured interval by transaction type,
    /// for workloads with several (TPC-C counts its throughput as NewOrder
    /// per second, `throughput_by_type_txn_per_s.new_order`); empty for
    /// workloads with one.
    pub committed_by_type: OrderedMap<u64>,
    pub throughput_by_type_txn_per_s: OrderedMap<f64>,
    /// Aborted attempts / (aborted attempts + commits).
    pub abort_rate: f64,
    /// Aborted attempts by reason.
    pub aborts: OrderedMap<u64>,
    /// Transactions the program gave up on (user aborts, missing keys).
    pub user_aborted: u64,
    pub latency_us: LatencyUs,
    /// Mean time per stage of committed transactions' final attempt, µs,
    /// in the protocol's stage order, then `execution` (the program's own
    /// work between stages).
    pub stages: OrderedMap<f64>,
    pub verbs_per_txn: VerbsPerTxn,
    /// How the worker threads' time went, as fractions of their wall time.
    pub worker_time: WorkerTime,
    /// How the coroutines' time went (Deneva Fig. 6's breakdown).
    pub time_breakdown: TimeBreakdown,
    pub location_cache_hit_rate: f64,
    /// Per transaction type, for workloads with several (empty otherwise).
    pub txn_types: Vec<TxnTypeSummary>,
    /// Null when the run did not check.
    pub check: Option<CheckSummary>,
    /// `wall` (threads) or `simulated` (sim: every time and rate in this
    /// report is virtual).
    pub time: &'static str,
    /// The simulation's own figures; null on other fabrics.
    pub sim: Option<SimSummary>,
    /// The processes of a `ucx` run; null on other fabrics.
    pub cluster: Option<ClusterSummary>,
    /// Injected faults, their detection and the recovery (`recovery`); null
    /// when the run ran no failure detector.
    pub recovery: Option<crate::recovery::RecoveryReport>,
    /// Why a figure may mislead, in words (e.g. a CALVIN run too short for
    /// any epoch to close: nothing could commit); absent when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The histograms `latency_us` and each type's `latency_us` come from,
    /// by type and interval: what `--latency-log` writes.
    #[serde(skip)]
    pub latencies: Latencies,
}

/// What a multi-process (`ucx`) run adds to its report.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterSummary {
    /// UCX's version string.
    pub ucx_version: String,
    /// What the user asked for (`--transport`) and where local verbs ran.
    pub transport: &'static str,
    pub local_atomics: &'static str,
    pub ranks: Vec<RankSummary>,
}

#[derive(Clone, Debug, Serialize)]
pub struct RankSummary {
    pub rank: u32,
    pub host: String,
    pub pid: u32,
    /// The transports UCX chose from this rank to each other rank
    /// (`tl/device`, as `ucp_ep_print_info` names them), by target rank.
    pub transports: Vec<Vec<String>>,
}

/// One transaction type's share of a run (measured interval).
#[derive(Clone, Debug, Serialize)]
pub struct TxnTypeSummary {
    pub name: &'static str,
    pub committed: u64,
    pub throughput_txn_per_s: f64,
    /// Aborted attempts / (aborted attempts + commits) of this type.
    pub abort_rate: f64,
    /// Transactions of this type the program gave up on (e.g. SmallBank's
    /// insufficient funds).
    pub user_aborted: u64,
    /// Mean latency of committed transactions of this type, µs (exact).
    pub mean_latency_us: f64,
    /// Percentiles of this type's latencies (its HdrHistogram).
    pub latency_us: LatencyUs,
}

/// The per-type breakdown of a run with `names` types.
pub fn txn_type_summaries(
    names: &[&'static str],
    stats: &WorkerStats,
    duration_s: f64,
) -> Vec<TxnTypeSummary> {
    names
        .iter()
        .zip(stats.per_type.iter().zip(stats.committed_by_type.iter()))
        .enumerate()
        .map(|(kind, (&name, (counts, &committed)))| TxnTypeSummary {
            name,
            committed,
            throughput_txn_per_s: committed as f64 / duration_s,
            abort_rate: per(counts.aborted, counts.aborted + committed),
            user_aborted: counts.user_aborted,
            mean_latency_us: per(counts.latency_ns_sum, committed) / 1_000.0,
            latency_us: LatencyUs::of(&stats.latency.of_kind(kind)),
        })
        .collect()
}

/// What a `sim` run adds to its report.
#[derive(Clone, Debug, Serialize)]
pub struct SimSummary {
    /// Virtual time the run covered, warm-up and drain included.
    pub simulated_s: f64,
    pub wall_s: f64,
    pub simulated_s_per_wall_s: f64,
    /// Simulator events processed (verb steps, deliveries, turns).
    pub events: u64,
    /// Verbs and messages lost to injected crashes and drops.
    pub lost_messages: u64,
    /// Workers whose coroutines still waited at the virtual deadline
    /// (0 unless faults cut them off).
    pub stuck_workers: usize,
    /// FNV-1a of the committed history and of every node's memory: equal
    /// for two runs of one (config, seed).
    pub history_hash: String,
    pub memory_hash: String,
}

/// Why a run that committed nothing did, in words, from its configuration
/// and its measured abort counts: a 0 txn/s point must not pass for a
/// protocol's throughput. CALVIN's engine replaces these with its own
/// (its epochs, not aborts, decide when it commits).
pub(crate) fn nothing_committed_notes(config: &Config, stats: &WorkerStats) -> Vec<String> {
    if stats.committed > 0 {
        return Vec::new();
    }
    let protocol = config.protocol.name();
    let attempts = stats.aborted();
    let measured = format!("{} s measured", config.duration_s);
    if attempts == 0 {
        return vec![format!(
            "{protocol} committed nothing and aborted nothing in the {measured}: no transaction finished in it; a longer --duration lets some finish"
        )];
    }
    let expired = stats.aborts[AbortReason::LeaseExpired.index()];
    if config.protocol == ProtocolKind::Drtm && expired > 0 {
        // A read lease starts at the read and must still hold at the
        // commit point; what runs between the two is the attempt itself.
        let lease_us = config.drtm_lease_ns() as f64 / 1_000.0;
        let attempt_us = per(stats.aborted_ns, attempts) / 1_000.0;
        let compute = if config.workload == WorkloadKind::Ycsb && config.ycsb.compute_us > 0.0 {
            // Coroutines of one worker do not preempt each other's compute,
            // so a transaction between its reads and its commit can wait for
            // every other coroutine's compute step on its worker.
            format!(
                "; each of a worker's {} coroutines computes {} µs per transaction (ycsb.compute_us) without preemption, so up to {} µs of compute can pass between a transaction's reads and its commit",
                config.coroutines,
                config.ycsb.compute_us,
                config.coroutines as f64 * config.ycsb.compute_us
            )
        } else {
            String::new()
        };
        return vec![format!(
            "drtm committed nothing: {expired} of its {attempts} aborted attempts found a read lease expired at the commit point (lease_expired); a lease lasts {lease_us} µs (protocol_options.drtm_lease_ns) and an aborted attempt took {attempt_us:.0} µs on average{compute}; give longer leases (--vary drtm_lease_ns=N or protocol_options.drtm_lease_ns in --config) or shorter transactions"
        )];
    }
    let mut reasons: Vec<(&'static str, u64)> = AbortReason::ALL
        .iter()
        .map(|r| (r.name(), stats.aborts[r.index()]))
        .filter(|&(_, n)| n > 0)
        .collect();
    reasons.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
    let reasons: Vec<String> = reasons
        .iter()
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    vec![format!(
        "{protocol} committed nothing in the {measured}: all {attempts} attempts aborted ({}); less contention or a longer --duration lets some commit",
        reasons.join(", ")
    )]
}

/// A fraction as every human-readable table prints it: a percentage with
/// its sign, to two decimals (`0.1234` → `12.34 %`). The abort rate is
/// printed so by `run`, `demo`, `sweep`, `hybrid` and the HTML report;
/// the JSON and CSV columns named `abort_rate` keep the fraction.
pub fn percent(fraction: f64) -> String {
    format!("{:.2} %", 100.0 * fraction)
}

/// How YCSB picks its keys, in words, naming only the knobs of its
/// distribution: θ for `zipf`, the hot area for `hot`, none for `uniform`.
pub fn describe_keys(ycsb: &YcsbConfig) -> String {
    // Four decimals at most, trailing zeros dropped: 0.07 of the rows is
    // `7 %`, not `7.000000000000001 %`.
    let short = |value: f64| {
        let text = format!("{value:.4}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    match ycsb.distribution {
        KeyDistribution::Uniform => "uniform keys".into(),
        KeyDistribution::Zipf => format!("Zipf keys (θ {})", short(ycsb.theta)),
        KeyDistribution::Hot => format!(
            "hot area {} % of rows gets {} % of accesses",
            short(100.0 * ycsb.hot_fraction),
            short(100.0 * ycsb.hot_probability)
        ),
    }
}

/// The YCSB write mix in words: the share of operations written, or, with
/// Deneva's mix (`update_txn_ratio`), the share of update transactions and
/// how many of their operations write.
pub fn describe_writes(ycsb: &YcsbConfig) -> String {
    let short = |value: f64| {
        let text = format!("{value:.2}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    match ycsb.update_txn_ratio {
        None => format!("{} % writes", short(100.0 * ycsb.write_ratio)),
        Some(ratio) => format!(
            "{} % update transactions ({} of {} operations write), the rest read-only",
            short(100.0 * ratio),
            ycsb.ops_per_txn / 2,
            ycsb.ops_per_txn
        ),
    }
}

/// Where `verbena run`'s report is explained line by line.
pub const READING_GUIDE: &str = "docs/guide/reading-a-report.md";

/// What the `wire/txn` line counts: the same on every fabric (see
/// `fabric::VerbCounters::wire_messages`), so the label names no fabric.
const WIRE_COUNTS: &str = "messages between nodes: 2 per one-sided verb, RPCs coalesced per turn";

fn per(value: u64, count: u64) -> f64 {
    if count == 0 {
        0.0
    } else {
        value as f64 / count as f64
    }
}

/// Shares of coroutine time; see [`TimeBreakdown`].
fn time_breakdown(config: &Config, stats: &WorkerStats) -> TimeBreakdown {
    use crate::base::Stage;
    let coroutines = config.total_workers() as f64 * config.coroutines as f64;
    let total_ns = coroutines * config.duration_s * 1e9;
    if total_ns <= 0.0 {
        return TimeBreakdown::default();
    }
    let share = |ns: u64| ns as f64 / total_ns;
    let stage_sum =
        |stages: &[Stage]| -> u64 { stages.iter().map(|s| stats.stage_ns[s.index()]).sum() };
    let useful_work = share(stats.execution_ns);
    let concurrency_control = share(stage_sum(&[
        Stage::Read,
        Stage::Lock,
        Stage::Validate,
        Stage::Renew,
    ]));
    let commit = share(stage_sum(&[Stage::Log, Stage::Commit, Stage::Release]));
    let abort = share(stats.aborted_ns);
    let backoff = share(stats.backoff_ns);
    let accounted = useful_work + concurrency_control + commit + abort + backoff;
    // A committed transaction that began in the warm-up is counted whole,
    // so on very short runs the parts can exceed the total by a little:
    // scale them to it then.
    let scale = if accounted > 1.0 {
        1.0 / accounted
    } else {
        1.0
    };
    TimeBreakdown {
        useful_work: useful_work * scale,
        concurrency_control: concurrency_control * scale,
        commit: commit * scale,
        abort: abort * scale,
        backoff: backoff * scale,
        other: (1.0 - accounted).max(0.0),
    }
}

impl Report {
    /// The report of a run of `workload` (whose transaction types are
    /// `txn_types`) from its merged `stats`: every driver's one way to make
    /// it, so every fabric reports the same fields (per-type counts
    /// included).
    pub fn build(
        config: &Config,
        workload: &'static str,
        txn_types: &[&'static str],
        stats: &WorkerStats,
        per_worker_committed: &[u64],
        check: Option<CheckSummary>,
    ) -> Report {
        let workers = per_worker_committed.len().max(1);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let committed = stats.committed;
        let throughput = committed as f64 / config.duration_s;
        let aborted = stats.aborted();
        let latency = stats.latency.total();
        let mut stages: Vec<(&'static str, f64)> = config
            .protocol
            .stages()
            .iter()
            .map(|s| {
                (
                    s.name(),
                    per(stats.stage_ns[s.index()], committed) / 1_000.0,
                )
            })
            .collect();
        stages.push(("execution", per(stats.execution_ns, committed) / 1_000.0));
        let measured = stats.measured;
        let verbs = measured.counters;
        let lookups = stats.cache_hits + stats.cache_misses;
        let mut report = Report {
            verbena_version: env!("CARGO_PKG_VERSION"),
            config: config.clone(),
            workload,
            cores,
            oversubscribed: config.fabric == FabricKind::Threads && workers > cores,
            measured_s: config.duration_s,
            committed,
            throughput_txn_per_s: throughput,
            throughput_per_worker_txn_per_s: throughput / workers as f64,
            worker_txn_per_s: per_worker_committed
                .iter()
                .map(|&n| n as f64 / config.duration_s)
                .collect(),
            committed_by_type: OrderedMap::default(),
            throughput_by_type_txn_per_s: OrderedMap::default(),
            abort_rate: per(aborted, aborted + committed),
            aborts: OrderedMap(
                AbortReason::ALL
                    .iter()
                    .map(|r| (r.name(), stats.aborts[r.index()]))
                    .collect(),
            ),
            user_aborted: stats.user_aborted,
            latency_us: LatencyUs::of(&latency),
            stages: OrderedMap(stages),
            verbs_per_txn: VerbsPerTxn {
                read: per(verbs.read, committed),
                write: per(verbs.write, committed),
                cas: per(verbs.cas, committed),
                faa: per(verbs.faa, committed),
                rpc: per(verbs.rpc, committed),
                doorbells: per(verbs.doorbells, committed),
                bytes: per(
                    verbs.read_bytes + verbs.write_bytes + verbs.rpc_request_bytes,
                    committed,
                ),
                wire_messages: per(verbs.wire_messages, committed),
                wire_bytes: per(verbs.wire_bytes, committed),
            },
            worker_time: {
                let wall = measured.wall_ns.max(1) as f64;
                let idle = (measured.idle_ns as f64 / wall).min(1.0);
                WorkerTime {
                    busy: 1.0 - idle,
                    rpc_handlers: (measured.handler_ns as f64 / wall).min(1.0),
                    idle,
                }
            },
            time_breakdown: time_breakdown(config, stats),
            location_cache_hit_rate: per(stats.cache_hits, lookups),
            txn_types: txn_type_summaries(txn_types, stats, config.duration_s),
            check,
            time: match config.fabric {
                FabricKind::Threads | FabricKind::Ucx => "wall",
                FabricKind::Sim => "simulated",
            },
            sim: None,
            cluster: None,
            recovery: None,
            notes: nothing_committed_notes(config, stats),
            latencies: stats.latency.clone(),
        };
        report.set_txn_types(txn_types, stats);
        report
    }

    /// Fills the per-type counts from `stats` for a workload whose
    /// transaction types are `names`.
    pub fn set_txn_types(&mut self, names: &[&'static str], stats: &WorkerStats) {
        self.committed_by_type = OrderedMap(
            names
                .iter()
                .zip(stats.committed_by_type.iter())
                .map(|(&name, &n)| (name, n))
                .collect(),
        );
        self.throughput_by_type_txn_per_s = OrderedMap(
            self.committed_by_type
                .0
                .iter()
                .map(|&(name, n)| (name, n as f64 / self.measured_s))
                .collect(),
        );
    }

    /// The human-readable summary printed by `verbena run`.
    pub fn table(&self) -> String {
        let mut out = String::new();
        self.write_run(&mut out);
        self.write_outcome(&mut out);
        self.write_costs(&mut out);
        if let Some(recovery) = &self.recovery {
            write_recovery(&mut out, recovery);
        }
        write_check(&mut out, self.check.as_ref());
        let _ = writeln!(out, "  each line explained: {READING_GUIDE}");
        out
    }

    /// What ran, and on what: the config line, notes, the simulator's
    /// summary, the processes of a `ucx` run, and an oversubscription note.
    fn write_run(&self, out: &mut String) {
        let c = &self.config;
        let _ = writeln!(
            out,
            "verbena {} · {} · {} · {} · {} · {} fabric, network {}",
            self.verbena_version,
            c.protocol.name(),
            self.workload,
            c.shape(),
            c.stages.describe(),
            c.fabric.name(),
            c.profile.name
        );
        for note in &self.notes {
            let _ = writeln!(out, "  note: {note}");
        }
        if let Some(sim) = &self.sim {
            let _ = writeln!(
                out,
                "  simulated time: {:.4} virtual s in {:.2} wall s ({:.3e} virtual s per wall s), {} events · history {} · memory {}{}",
                sim.simulated_s,
                sim.wall_s,
                sim.simulated_s_per_wall_s,
                sim.events,
                sim.history_hash,
                sim.memory_hash,
                if sim.stuck_workers > 0 {
                    format!(" · {} worker(s) stuck waiting on lost traffic", sim.stuck_workers)
                } else {
                    String::new()
                }
            );
        }
        if let Some(cluster) = &self.cluster {
            write_processes(out, cluster);
        }
        if self.oversubscribed {
            let _ = writeln!(
                out,
                "note: {} worker threads on {} cores (oversubscribed): figures are of a time-shared machine",
                c.total_workers(),
                self.cores
            );
        }
    }

    /// What came of it: throughput, commits, aborts by reason, and a note
    /// when transactions gave up on a full table.
    fn write_outcome(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "  throughput      {:>12.0} txn/s ({:.0} per worker)",
            self.throughput_txn_per_s, self.throughput_per_worker_txn_per_s
        );
        let _ = writeln!(
            out,
            "  committed       {:>12} in {:.3} s",
            self.committed, self.measured_s
        );
        if !self.throughput_by_type_txn_per_s.0.is_empty() {
            let per_type: Vec<String> = self
                .throughput_by_type_txn_per_s
                .0
                .iter()
                .map(|(name, rate)| format!("{name} {rate:.0}"))
                .collect();
            let _ = writeln!(out, "  by type txn/s   {}", per_type.join("  "));
        }
        let _ = writeln!(out, "  abort rate      {:>14}", percent(self.abort_rate));
        let reasons: Vec<String> = self
            .aborts
            .0
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| format!("{name} {n}"))
            .collect();
        if !reasons.is_empty() {
            let _ = writeln!(out, "  aborts          {}", reasons.join(", "));
        }
        let full = self
            .aborts
            .0
            .iter()
            .find(|(name, _)| *name == AbortReason::TableFull.name())
            .map_or(0, |&(_, n)| n);
        if full > 0 {
            let _ = writeln!(
                out,
                "  note            {full} transactions gave up on a full table: the run outgrew its preallocated room (TPC-C: raise --insert-headroom), and throughput past that point is not comparable"
            );
        }
    }

    /// What a transaction cost: latency, stages, verbs and wire traffic,
    /// each transaction type, and where worker and transaction time went.
    fn write_costs(&self, out: &mut String) {
        let l = &self.latency_us;
        let _ = writeln!(
            out,
            "  latency µs      p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
            l.p50, l.p90, l.p99, l.p999, l.max
        );
        let stages: Vec<String> = self
            .stages
            .0
            .iter()
            .map(|(name, us)| format!("{name} {us:.2}"))
            .collect();
        let _ = writeln!(out, "  stages µs       {}", stages.join("  "));
        let v = &self.verbs_per_txn;
        let _ = writeln!(
            out,
            "  verbs/txn       read {:.2}  write {:.2}  cas {:.2}  faa {:.2}  rpc {:.2}  doorbells {:.2}  bytes {:.0}",
            v.read, v.write, v.cas, v.faa, v.rpc, v.doorbells, v.bytes
        );
        let _ = writeln!(
            out,
            "  wire/txn        messages {:.2}  bytes {:.0}  ({})",
            v.wire_messages, v.wire_bytes, WIRE_COUNTS
        );
        for t in &self.txn_types {
            let _ = writeln!(
                out,
                "  {:<19} abort rate {}  gave up {}  mean latency {:.1} µs",
                t.name,
                percent(t.abort_rate),
                t.user_aborted,
                t.mean_latency_us
            );
        }
        let t = &self.worker_time;
        let _ = writeln!(
            out,
            "  worker time     busy {:.1} %  (rpc handlers {:.1} %)  idle {:.1} %",
            100.0 * t.busy,
            100.0 * t.rpc_handlers,
            100.0 * t.idle
        );
        let b = &self.time_breakdown;
        let _ = writeln!(
            out,
            "  txn time        useful {:.1} %  cc {:.1} %  commit {:.1} %  abort {:.1} %  backoff {:.1} %  other {:.1} %",
            100.0 * b.useful_work,
            100.0 * b.concurrency_control,
            100.0 * b.commit,
            100.0 * b.abort,
            100.0 * b.backoff,
            100.0 * b.other
        );
    }
}

/// The ranks of a `ucx` run: how many, on which hosts, over which UCX
/// transports between ranks.
fn write_processes(out: &mut String, cluster: &ClusterSummary) {
    let mut chosen: Vec<String> = Vec::new();
    for rank in &cluster.ranks {
        for (target, names) in rank.transports.iter().enumerate() {
            if target as u32 != rank.rank {
                for name in names {
                    if !chosen.contains(name) {
                        chosen.push(name.clone());
                    }
                }
            }
        }
    }
    let mut hosts: Vec<&str> = cluster.ranks.iter().map(|r| r.host.as_str()).collect();
    hosts.dedup();
    let _ = writeln!(
        out,
        "  processes: {} rank(s) on {} · UCX {} · transport {} → {} · local atomics {}",
        cluster.ranks.len(),
        hosts.join(", "),
        cluster.ucx_version,
        cluster.transport,
        if chosen.is_empty() {
            "(none between ranks)".to_string()
        } else {
            chosen.join(", ")
        },
        cluster.local_atomics
    );
}

/// The faults of the run, the failover that followed, and the commits
/// before and after.
fn write_recovery(out: &mut String, recovery: &crate::recovery::RecoveryReport) {
    for fault in &recovery.faults {
        let detected = match fault.detection_s {
            Some(s) => format!("detected after {:.1} µs", s * 1e6),
            None => "not detected".into(),
        };
        let _ = writeln!(
            out,
            "  fault           {} node {} at {:.6} s, {detected}",
            fault.kind, fault.node, fault.crash_at_s
        );
    }
    if let Some(s) = recovery.recovery_time_s {
        let promoted: Vec<String> = recovery
            .promoted
            .iter()
            .map(|(p, n)| format!("partition {p} → node {n}"))
            .collect();
        let _ = writeln!(
            out,
            "  failover        survivors paused {:.1} µs; {}; {} log records of dead coordinators in the rings ({} whole: rolled forward); {} versions installed from redo writes and newer copies",
            s * 1e6,
            promoted.join(", "),
            recovery.resolved_from_log_count,
            recovery.resolved_committed_count,
            recovery.versions_rolled_forward
        );
        if recovery.sequenced_finished_count + recovery.sequenced_given_up_count > 0 {
            let _ = writeln!(
                out,
                "  sequenced       of the transactions the dead node had a part in: {} finished by the survivors, {} given up and submitted again",
                recovery.sequenced_finished_count, recovery.sequenced_given_up_count
            );
        }
    }
    let _ = writeln!(
        out,
        "  commits         {} before the fault, {} after ({} once detected)",
        recovery.committed_before_fault,
        recovery.committed_after_fault,
        recovery.committed_after_detection
    );
}

/// The checker's verdict, its cycle and anomalies, or that it was off.
fn write_check(out: &mut String, check: Option<&CheckSummary>) {
    match check {
        None => {
            let _ = writeln!(out, "  check           off (--check turns it on)");
        }
        Some(check) => {
            let _ = writeln!(
                out,
                "  check           serializable: {}  invariants: {}  ({} txns, {} edges)",
                if check.serializable { "yes" } else { "NO" },
                if check.invariants_ok {
                    "ok"
                } else {
                    "VIOLATED"
                },
                check.txn_count,
                check.edge_count
            );
            if let Some(cycle) = &check.cycle {
                let _ = writeln!(out, "  cycle           {cycle:?}");
            }
            for line in check
                .anomalies
                .iter()
                .chain(check.invariants.iter().filter(|_| !check.invariants_ok))
            {
                let _ = writeln!(out, "  !               {line}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats_with(aborts: &[(AbortReason, u64)], aborted_ns: u64) -> WorkerStats {
        let mut stats = WorkerStats::default();
        for &(reason, n) in aborts {
            stats.aborts[reason.index()] = n;
        }
        stats.aborted_ns = aborted_ns;
        stats
    }

    /// RCC Fig. 19's 256 µs point: DRTM's 400 µs read leases run out
    /// while a worker's other coroutines compute, and the note says so
    /// with the figures it was computed from.
    #[test]
    fn drtm_that_commits_nothing_says_its_leases_expired() {
        let mut config = Config {
            protocol: ProtocolKind::Drtm,
            coroutines: 8,
            ..Config::default()
        };
        config.ycsb.compute_us = 256.0;
        let stats = stats_with(
            &[
                (AbortReason::LeaseExpired, 41),
                (AbortReason::LeaseConflict, 9),
            ],
            50 * 900_000,
        );
        let notes = nothing_committed_notes(&config, &stats);
        assert_eq!(notes.len(), 1, "{notes:?}");
        let note = &notes[0];
        for part in [
            "drtm committed nothing",
            "41 of its 50 aborted attempts",
            "lease_expired",
            "400 µs (protocol_options.drtm_lease_ns)",
            "900 µs on average",
            "8 coroutines computes 256 µs",
            "up to 2048 µs",
            "drtm_lease_ns",
        ] {
            assert!(note.contains(part), "`{part}` missing: {note}");
        }
        // The lease is the configured one, not a constant.
        config.protocol_options.drtm_lease_ns = Some(1_000_000);
        assert!(nothing_committed_notes(&config, &stats)[0].contains("1000 µs"));
    }

    #[test]
    fn only_a_run_that_commits_nothing_gets_a_note() {
        let config = Config {
            protocol: ProtocolKind::NoWait,
            ..Config::default()
        };
        let mut stats = stats_with(&[(AbortReason::LockConflict, 7)], 0);
        let notes = nothing_committed_notes(&config, &stats);
        assert!(
            notes.len() == 1
                && notes[0].contains("no_wait committed nothing")
                && notes[0].contains("all 7 attempts aborted (lock_conflict 7)"),
            "{notes:?}"
        );
        // DRTM without expired leases gets the general note.
        let drtm = Config {
            protocol: ProtocolKind::Drtm,
            ..Config::default()
        };
        assert!(!nothing_committed_notes(&drtm, &stats)[0].contains("lease"));
        let idle = WorkerStats::default();
        assert!(nothing_committed_notes(&config, &idle)[0].contains("aborted nothing"));
        stats.committed = 1;
        assert!(nothing_committed_notes(&config, &stats).is_empty());
    }
}
