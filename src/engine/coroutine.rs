//! The transaction driver: what one coroutine does for the whole run (RCC
//! §3.1's closed loop). It takes a request from the workload's generator,
//! starts an attempt (the protocol's `begin`), runs the program (whose
//! accesses run the protocol's execution-phase stage), then the commit
//! stages in RCC's order — `lock`, `validate`, `renew`, `log`, `commit` —
//! timing each; on an abort it runs `release`, backs off
//! `min(base · 2^n, cap)` with jitter, and retries the same request.
//!
//! Invariants: a request is retried until it commits, the program aborts by
//! its own choice, or the run ends; every abort runs `release` before the
//! next attempt; nothing here allocates per transaction (the context, the
//! history scratch lists and the batch arenas keep their capacity).

use std::cell::RefCell;

use crate::base::rng::Rng;
use crate::base::{Stage, StagePlan};
use crate::check::{History, Item};
use crate::config::BackoffConfig;
use crate::replication::{self, LogWriter};
use crate::runtime::Worker;
use crate::stats::WorkerStats;
use crate::store::{LocationCache, NodeStore, StoreLayout};
use crate::txn::{ids, AbortReason, Protocol, Txn, TxnCx, TxnResult};
use crate::workloads::Workload;

/// Everything the coroutines of one worker share (all on the worker's
/// thread, so `RefCell`s suffice).
pub struct CoroutineEnv<'a, P: Protocol, W: Workload> {
    pub worker: &'a Worker,
    pub layout: &'a StoreLayout,
    /// The worker's own node's store (run-time inserts).
    pub local_store: &'a NodeStore,
    pub cache: &'a RefCell<LocationCache>,
    pub stats: &'a RefCell<WorkerStats>,
    /// Present when the run records its history for the checker.
    pub history: Option<&'a RefCell<History>>,
    pub protocol: &'a P,
    pub workload: &'a W,
    pub plan: StagePlan,
    pub backoff: BackoffConfig,
    pub seed: u64,
    pub warmup_end_ns: u64,
    pub end_ns: u64,
    /// This worker's side of the coordinator log (`replication`); `None`
    /// without replication.
    pub log: Option<&'a LogWriter>,
    /// When the first injected fault strikes (`u64::MAX`: none), on the
    /// worker's clock: splits the commits for the report's `recovery`.
    pub fault_at_ns: u64,
    /// Record a commit in the history at its commit point rather than once
    /// acknowledged (runs with failure detection: a coordinator that dies
    /// past its commit point leaves writes on the survivors, which the
    /// checker must be able to account for).
    pub record_at_commit_point: bool,
}

/// One attempt at a transaction, as its commit or abort is counted: the
/// transaction's type, when the transaction began and when this attempt
/// started (ns, the worker's clock).
#[derive(Clone, Copy, Debug)]
struct Attempt {
    kind: usize,
    begin_ns: u64,
    start_ns: u64,
}

impl<P: Protocol, W: Workload> CoroutineEnv<'_, P, W> {
    fn measured(&self, at_ns: u64) -> bool {
        at_ns >= self.warmup_end_ns && at_ns < self.end_ns
    }

    /// Counts a commit at `commit_ns` of the transaction whose committing
    /// attempt is `attempt`, if it falls in the measured interval.
    fn count_commit(&self, cx: &TxnCx<'_>, attempt: Attempt, commit_ns: u64) {
        if !self.measured(commit_ns) {
            return;
        }
        let Attempt {
            kind,
            begin_ns,
            start_ns: attempt_start_ns,
        } = attempt;
        let mut stats = self.stats.borrow_mut();
        stats.committed += 1;
        stats.committed_by_type[kind] += 1;
        stats
            .latency
            .record(kind, commit_ns - self.warmup_end_ns, commit_ns - begin_ns);
        stats.per_type[kind].latency_ns_sum += commit_ns - begin_ns;
        let mut in_stages = 0;
        for (sum, ns) in stats.stage_ns.iter_mut().zip(cx.stage_ns.iter()) {
            *sum += ns;
            in_stages += ns;
        }
        stats.execution_ns += (commit_ns - attempt_start_ns).saturating_sub(in_stages);
        let detected = self.worker.membership().is_some_and(|m| m.epoch() > 0);
        // No planned fault (a `ucx` rank killed from outside): the
        // detection splits the run.
        let unplanned = self.fault_at_ns == u64::MAX;
        if commit_ns < self.fault_at_ns && !(unplanned && detected) {
            stats.fault_commits.before_fault += 1;
        } else {
            stats.fault_commits.after_fault += 1;
            if detected {
                stats.fault_commits.after_detection += 1;
            }
        }
    }

    /// Counts an aborted `attempt` (released by `now`), and the
    /// transaction if the program gave it up, if it falls in the measured
    /// interval.
    fn count_abort(&self, reason: AbortReason, attempt: Attempt, gives_up: bool, now: u64) {
        if !self.measured(now) {
            return;
        }
        let Attempt {
            kind,
            start_ns: attempt_start_ns,
            ..
        } = attempt;
        let mut stats = self.stats.borrow_mut();
        // Only the part inside the measured interval.
        stats.aborted_ns += now - attempt_start_ns.max(self.warmup_end_ns);
        stats.aborts[reason.index()] += 1;
        stats.per_type[kind].aborted += 1;
        if gives_up {
            stats.user_aborted += 1;
            stats.per_type[kind].user_aborted += 1;
        }
    }

    /// Sleeps coroutine `co` before retry `retries` after an abort for
    /// `reason` at `now`, and counts the measured part of the sleep.
    async fn back_off(&self, co: u16, reason: AbortReason, retries: u32, rng: &mut Rng, now: u64) {
        let pause = self.retry_pause_ns(reason, retries, rng);
        self.worker.sleep(co, pause).await;
        let woke = self.worker.now_ns();
        if self.measured(woke) {
            self.stats.borrow_mut().backoff_ns += woke - now.max(self.warmup_end_ns);
        }
    }

    /// How long to back off before retry `retries` after an abort for
    /// `reason`.
    fn retry_pause_ns(&self, reason: AbortReason, retries: u32, rng: &mut Rng) -> u64 {
        let pause = backoff_ns(self.backoff, retries, rng);
        if reason != AbortReason::Wounded {
            return pause;
        }
        // The older transaction that wounded this one takes the lock with
        // its next CAS, a round trip away if it waits one-sided; a retry
        // sooner (the same timestamp, so younger again) would take the
        // lock back first from a node near it, be wounded again, and so on
        // (docs/performance-archive.md, "WOUND_WAIT at long round trips").
        pause.max(WOUNDED_RETRY_ROUND_TRIPS * self.worker.verb_round_trip_ns())
    }

    /// Snapshots the verb counters at the edges of the measured interval.
    fn note_boundaries(&self, now_ns: u64) {
        self.stats.borrow_mut().note_boundaries(
            self.worker,
            now_ns,
            self.warmup_end_ns,
            self.end_ns,
        );
    }
}

/// A wounded transaction retries no sooner than this many of its worker's
/// remote verb round trips after its abort
/// ([`crate::runtime::Worker::verb_round_trip_ns`]).
const WOUNDED_RETRY_ROUND_TRIPS: u64 = 2;

/// Back-off before retry number `attempt` (1-based): uniform in
/// `[d/2, d]` with `d = min(base · 2^(attempt-1), cap)`.
pub fn backoff_ns(config: BackoffConfig, attempt: u32, rng: &mut Rng) -> u64 {
    let shift = attempt.saturating_sub(1).min(32);
    let ceiling = config
        .base_ns
        .saturating_mul(1u64 << shift)
        .min(config.cap_ns);
    if ceiling == 0 {
        return 0;
    }
    ceiling / 2 + rng.below(ceiling / 2 + 1)
}

macro_rules! timed_stage {
    ($cx:expr, $stage:expr, $call:expr) => {{
        let start = $cx.now_ns();
        let result = $call.await;
        let elapsed = $cx.now_ns() - start;
        $cx.add_stage_time($stage, elapsed);
        result
    }};
}

/// Runs a commit-phase stage if the protocol has it, charging the time
/// since `mark` to it: consecutive stages share one clock read at each
/// boundary, and stages a protocol lacks cost nothing.
macro_rules! commit_stage {
    ($cx:expr, $mark:ident, $stage:expr, $call:expr) => {{
        if $cx.plan.present() & $stage.bit() != 0 {
            let result = $call.await;
            let now = $cx.now_ns();
            $cx.add_stage_time($stage, now - $mark);
            $mark = now;
            result
        } else {
            Ok(())
        }
    }};
}

/// One attempt: the program, then the commit stages. On `Err`, locks may
/// still be held; the caller releases them.
async fn attempt<P: Protocol, W: Workload>(
    protocol: &P,
    workload: &W,
    cx: &mut TxnCx<'_>,
    request: &W::Request,
    log: Option<&LogWriter>,
    at_commit_point: impl FnOnce(&TxnCx<'_>),
) -> TxnResult<()> {
    {
        let mut txn = Txn::new(cx, protocol);
        workload.execute(&mut txn, request).await?;
    }
    let mut mark = cx.now_ns();
    commit_stage!(cx, mark, Stage::Lock, protocol.lock(cx))?;
    commit_stage!(cx, mark, Stage::Validate, protocol.validate(cx))?;
    commit_stage!(cx, mark, Stage::Renew, protocol.renew(cx))?;
    // The protocol's own step of the log stage (its commit point, where it
    // has one), then the coordinator log to the backups (`replication`),
    // whose post is the attempt's commit point.
    commit_stage!(cx, mark, Stage::Log, async {
        protocol.log(cx).await?;
        // No attempt that saw a round fail may commit, whatever the
        // protocol made of the failure.
        if cx.worker.take_attempt_failed(cx.co) {
            return Err(AbortReason::PeerFailed);
        }
        // Committing first, then the pause check: a failover's recovery
        // waits for every committing attempt, so no attempt can slip past
        // a pause that began in between (`recovery::failover`).
        cx.worker.set_committing(cx.co, true);
        if cx.worker.cluster_state().is_some_and(|f| f.paused()) {
            cx.worker.set_committing(cx.co, false);
            return Err(AbortReason::PeerFailed);
        }
        // The commit point (right before the log records are posted, with
        // no yield in between): the history records the commit, and
        // ordered-index changes take effect, before the write-back releases
        // anything (see `store::ordered`) — and before a coordinator that
        // dies once its records are out could miss them.
        let commit_point = |cx: &TxnCx<'_>| {
            at_commit_point(cx);
            if !cx.index_ops.is_empty() {
                workload.at_commit_point(cx.worker.node, &cx.index_ops);
            }
        };
        let logged = replication::log::log(cx, log, commit_point).await;
        if logged.is_err() {
            cx.worker.set_committing(cx.co, false);
        }
        logged
    })?;
    // Past the commit point: commit cannot fail, and every protocol has it.
    protocol.commit(cx).await;
    cx.worker.set_committing(cx.co, false);
    let elapsed = cx.now_ns() - mark;
    cx.add_stage_time(Stage::Commit, elapsed);
    Ok(())
}

/// Appends the committed attempt in `cx` to `history`.
fn record_history(
    cx: &TxnCx<'_>,
    kind: usize,
    history: &RefCell<History>,
    reads: &mut Vec<Item>,
    writes: &mut Vec<Item>,
) {
    reads.clear();
    writes.clear();
    for access in &cx.accesses {
        reads.push(Item {
            table: access.table,
            key: access.key,
            seq: access.seq,
        });
        if access.write {
            writes.push(Item {
                table: access.table,
                key: access.key,
                seq: access.seq + 1,
            });
        }
    }
    history.borrow_mut().push_noted(
        cx.txn_id,
        cx.worker.node,
        kind as u8,
        cx.note,
        reads,
        writes,
    );
}

/// Whether an abort for `reason` ends the request for good: the program
/// gave up, or the data it needs is not there (a missing key, a full
/// table) — retrying would end alike.
fn program_gives_up(reason: AbortReason) -> bool {
    matches!(
        reason,
        AbortReason::User | AbortReason::NotFound | AbortReason::TableFull
    )
}

/// The closed loop of coroutine `co` until the run ends.
pub async fn run_coroutine<P: Protocol, W: Workload>(env: &CoroutineEnv<'_, P, W>, co: u16) {
    let worker = env.worker;
    let mut cx =
        TxnCx::new(worker, co, env.layout, env.cache, env.plan).with_local_store(env.local_store);
    let coroutine = ids::coroutine_id(worker.node, worker.worker, co);
    let mut rng = Rng::derive(
        env.seed,
        &[worker.node as u64, worker.worker as u64, co as u64],
    );
    let mut counter: u64 = 0;
    let mut history_reads: Vec<Item> = Vec::with_capacity(64);
    let mut history_writes: Vec<Item> = Vec::with_capacity(64);
    loop {
        let begin_ns = worker.now_ns();
        env.note_boundaries(begin_ns);
        if begin_ns >= env.end_ns {
            break;
        }
        let request = env.workload.generate(&mut rng, worker.node);
        let kind = env.workload.txn_type(&request);
        debug_assert!(
            kind < crate::workloads::MAX_TXN_TYPES
                && (env.workload.txn_types().is_empty() || kind < env.workload.txn_types().len()),
            "transaction type {kind} beyond the workload's types"
        );
        let mut retries = 0u32;
        loop {
            if let Some(failover) = crate::recovery::failover_of(worker) {
                // A failover pauses the cluster: no attempt starts until
                // the failed partitions are served again.
                failover.park(worker, co, env.end_ns).await;
                if worker.now_ns() >= env.end_ns {
                    break;
                }
            }
            counter += 1;
            worker.take_attempt_failed(co);
            cx.begin(ids::txn_id(coroutine, counter), retries);
            env.protocol.begin(&mut cx);
            let this_attempt = Attempt {
                kind,
                begin_ns,
                start_ns: worker.now_ns(),
            };
            let early = env.record_at_commit_point;
            let outcome = attempt(
                env.protocol,
                env.workload,
                &mut cx,
                &request,
                env.log,
                |cx| {
                    if let (true, Some(history)) = (early, env.history) {
                        record_history(cx, kind, history, &mut history_reads, &mut history_writes);
                    }
                },
            )
            .await;
            match outcome {
                Ok(()) => {
                    debug_assert!(
                        cx.accesses.iter().all(|a| !a.locked),
                        "commit left a lock held"
                    );
                    let commit_ns = worker.now_ns();
                    if let (false, Some(history)) = (early, env.history) {
                        record_history(&cx, kind, history, &mut history_reads, &mut history_writes);
                    }
                    env.count_commit(&cx, this_attempt, commit_ns);
                    break;
                }
                Err(mut reason) => {
                    if worker.take_attempt_failed(co) {
                        // Whatever the protocol concluded from a failed
                        // round, the cause is the failed peer.
                        reason = AbortReason::PeerFailed;
                    }
                    timed_stage!(cx, Stage::Release, env.protocol.release(&mut cx));
                    debug_assert!(
                        cx.accesses.iter().all(|a| !a.locked),
                        "release left a lock held"
                    );
                    let now = worker.now_ns();
                    let gives_up = program_gives_up(reason);
                    // A request that needs a dead node is dropped: with
                    // replication 1 it could never commit (not a user abort).
                    // With a failover it is retried once the failed
                    // partitions are served again.
                    let dropped = reason == AbortReason::PeerFailed
                        && crate::recovery::failover_of(worker).is_none();
                    env.count_abort(reason, this_attempt, gives_up, now);
                    if gives_up || dropped || now >= env.end_ns {
                        break;
                    }
                    retries += 1;
                    env.back_off(co, reason, retries, &mut rng, now).await;
                }
            }
        }
        // Let the event loop serve peers between transactions even when
        // every round of this one stayed local.
        worker.yield_now().await;
    }
    env.note_boundaries(worker.now_ns());
    worker.drain(co).await;
    if let Some(failover) = crate::recovery::failover_of(worker) {
        failover.finished(worker.node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_with_jitter() {
        let config = BackoffConfig {
            base_ns: 1_000,
            cap_ns: 16_000,
        };
        let mut rng = Rng::new(3);
        for attempt in 1..40 {
            let ceiling = (1_000u64 << (attempt - 1).min(20)).min(16_000);
            for _ in 0..50 {
                let pause = backoff_ns(config, attempt, &mut rng);
                assert!(
                    pause >= ceiling / 2 && pause <= ceiling,
                    "attempt {attempt}: {pause}"
                );
            }
        }
        let none = BackoffConfig {
            base_ns: 0,
            cap_ns: 0,
        };
        assert_eq!(backoff_ns(none, 5, &mut rng), 0);
    }
}
