//! The entry of one rank of a multi-process run on the `ucx` fabric
//! ([`run_node`]: the rank's backend, `cluster::rank`, on the one driver),
//! and what is a rank's own beside it: the results and detections a rank
//! sends rank 0, how it stops at its planned crash (SIGKILL of itself),
//! and the history journals with which rank 0 checks a run that lost a
//! rank.
//!
//! A replicated run with the failure detector on (`--replication` ≥ 2 and
//! `--fault`, or `--failure-detector on`) tolerates the death of a rank
//! other than 0: the survivors fail it over (`cluster::failover`) and go
//! on; rank 0 gathers the survivors' results, and the report's `recovery`
//! gives the detection and recovery times and the commits before and
//! after. The dead rank's history is read back from its journal
//! (`check_after_lost_rank`), so the checker judges the whole history:
//! serializable, every write it committed present on the node now serving
//! its partition, every backup equal to its serving copy.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::rank::RankBackend;
use super::wire::{self, Dec, Enc};
use crate::check::{store_holds_history_writes, store_matches_history, History, Item};
use crate::config::{Config, ConfigError, FabricKind};
use crate::engine::driver;
use crate::engine::program::{ExtraStats, NodeProgram, WorkerResult};
use crate::engine::{self, RunError, RunOutput, WithProgram, WithWorkload};
use crate::fabric::NodeId;
use crate::recovery::{FaultRun, Membership};
use crate::replication::Replication;
use crate::store::{NodeStore, StoreLayout};
use crate::txn::Protocol;
use crate::workloads::{InvariantReport, Workload};

pub use super::launch::NodeOptions;

/// Runs this process's node of `config` (fabric forced to `ucx`). Rank 0
/// returns the run's output; the other ranks `None`.
pub fn run_node(config: &Config, options: &NodeOptions) -> Result<Option<RunOutput>, RunError> {
    let mut config = config.clone();
    config.fabric = FabricKind::Ucx;
    crate::engine::validate(&mut config)?;
    check_rank(&config, options)?;
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
    let on_rank = OnRank {
        config,
        options,
        workload,
    };
    engine::with_program(config, workload, config.tolerates_rank_loss(), on_rank)?
}

/// Runs a node program on this process's rank: what every entry point of
/// a ucx node hands its program to.
struct OnRank<'a, W> {
    config: &'a Config,
    options: &'a NodeOptions,
    workload: &'a W,
}

impl<W: Workload> WithProgram for OnRank<'_, W> {
    type Output = Result<Option<RunOutput>, RunError>;
    fn with<G: NodeProgram>(self, program: &G, layout: StoreLayout) -> Self::Output {
        let mut backend = RankBackend::new(self.options);
        driver::run(self.config, program, self.workload, layout, &mut backend)
    }
}

/// [`run_node`] with a protocol of the caller's own
/// (`docs/WRITING_A_PROTOCOL.md`): every rank of the run calls it with the
/// same config and protocol, as every rank of `verbena launch` runs
/// `verbena node`. `config.protocol` is replaced by `P::KIND`, as in
/// `engine::run_custom_protocol`.
pub fn run_node_custom_protocol<P: Protocol>(
    config: &Config,
    options: &NodeOptions,
    protocol: &P,
) -> Result<Option<RunOutput>, RunError> {
    let mut config = config.clone();
    config.fabric = FabricKind::Ucx;
    let config = engine::validated_protocol::<P>(config)?;
    check_rank(&config, options)?;
    struct OnNode<'a, P> {
        config: &'a Config,
        options: &'a NodeOptions,
        protocol: &'a P,
    }
    impl<P: Protocol> WithWorkload for OnNode<'_, P> {
        type Output = Result<Option<RunOutput>, RunError>;
        fn with<W: Workload>(self, workload: &W) -> Self::Output {
            let heartbeat = self.config.tolerates_rank_loss();
            let on_rank = OnRank {
                config: self.config,
                options: self.options,
                workload,
            };
            engine::with_staged_program(self.config, self.protocol, workload, heartbeat, on_rank)
        }
    }
    let on_node = OnNode {
        config: &config,
        options,
        protocol,
    };
    engine::with_workload(&config, on_node)
}

/// Why `options.rank` is not a rank of `config`'s cluster.
fn check_rank(config: &Config, options: &NodeOptions) -> Result<(), RunError> {
    if options.rank < config.nodes {
        return Ok(());
    }
    Err(RunError::Config(ConfigError(format!(
        "rank {} is out of range; allowed: 0..={} (--nodes {})",
        options.rank,
        config.nodes - 1,
        config.nodes
    ))))
}

extern "C" {
    fn kill(pid: i32, signal: i32) -> i32;
}

/// Ends this process as `kill -9` would: a rank's way to stop when the
/// crash injector (`recovery::CrashInjector`) says its crash is due.
pub(super) fn kill_self() -> ! {
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
pub(super) fn fault_section(
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

/// What every surviving rank's detector declared (`sections`, as
/// [`fault_section`] made them: times since the start), and the rounds
/// abandoned on all of them.
pub(super) fn detections_of(
    config: &Config,
    sections: &[(u32, Vec<u64>)],
) -> Result<(Vec<Membership>, u64), String> {
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
    Ok((views, abandoned_rounds))
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
pub(super) fn check_after_lost_rank<W: Workload>(
    workload: &W,
    history: &mut History,
    stores: &[Arc<NodeStore>],
    replication: &Replication,
    failed: &[NodeId],
    journal_prefix: Option<&str>,
    workers: u16,
) -> InvariantReport {
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
    let mut invariants = if problems.is_empty() && journals_whole {
        workload.check_invariants(&serving_stores, history)
    } else {
        InvariantReport {
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
    invariants
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
pub(super) fn journal_prefix(digest: u64, bootstrap: &str) -> String {
    let address: String = bootstrap
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    std::env::temp_dir()
        .join(format!("verbena-journal-{digest:016x}-{address}"))
        .display()
        .to_string()
}

pub(super) fn journal_path(prefix: &str, rank: u32, worker: u16) -> String {
    format!("{prefix}-r{rank}-w{worker}")
}

/// Removes this rank's journals (its history reached rank 0 another way).
pub(super) fn remove_journals(prefix: Option<&str>, rank: u32, workers: u16) {
    if let Some(prefix) = prefix {
        for worker in 0..workers {
            let _ = std::fs::remove_file(journal_path(prefix, rank, worker));
        }
    }
}

pub(super) fn encode_rank_result<X: ExtraStats>(
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
pub(super) fn decode_rank_result<X: ExtraStats>(
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
