//! Measurement (docs/ARCHITECTURE.md, "Measurement"): what each worker counts
//! while it runs, and how the counts of all workers merge into a report.
//!
//! Each worker owns one [`WorkerStats`] (no sharing on the hot path). Only
//! transactions that commit inside the measured interval `[warmup_end,
//! end)` are counted; warm-up is excluded. Latency is from the first attempt's
//! start to the commit (retries and back-off included), in ns; each is
//! recorded by type and interval in [`hist::Latencies`] (HdrHistogram), and
//! [`log`] writes those as HdrHistogram's interval log.

pub mod hist;
pub mod log;

pub use hist::{Histogram, Latencies};

use crate::base::Stage;
use crate::runtime::Worker;
pub use crate::runtime::WorkerSnapshot;
use crate::txn::AbortReason;

/// Most transaction types a workload may name (`Workload::txn_types`; the
/// per-type counters are fixed arrays, so counting costs no allocation).
pub const MAX_TXN_TYPES: usize = 8;

impl WorkerSnapshot {
    pub fn since(&self, earlier: &WorkerSnapshot) -> WorkerSnapshot {
        WorkerSnapshot {
            counters: self.counters.sub(&earlier.counters),
            wall_ns: self.wall_ns - earlier.wall_ns,
            idle_ns: self.idle_ns - earlier.idle_ns,
            handler_ns: self.handler_ns - earlier.handler_ns,
        }
    }

    pub fn add(&mut self, other: &WorkerSnapshot) {
        self.counters.add(&other.counters);
        self.wall_ns += other.wall_ns;
        self.idle_ns += other.idle_ns;
        self.handler_ns += other.handler_ns;
    }
}

/// Counts of one transaction type (`Workload::txn_type`) in the measured
/// interval, besides its commits (`WorkerStats::committed_by_type`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TypeCounts {
    /// Aborted attempts (every reason).
    pub aborted: u64,
    /// Transactions the program gave up on.
    pub user_aborted: u64,
    /// Sum of committed transactions' latencies, ns (for the mean).
    pub latency_ns_sum: u64,
}

/// Counts of one worker (or, after merging, of the run).
#[derive(Clone, Debug, Default)]
pub struct WorkerStats {
    pub committed: u64,
    /// Committed transactions by the workload's transaction type
    /// (`Workload::txn_type`).
    pub committed_by_type: [u64; MAX_TXN_TYPES],
    /// Aborted attempts in the measured interval, by `AbortReason::index`.
    pub aborts: [u64; AbortReason::ALL.len()],
    /// Transactions the program itself gave up (user aborts): counted once.
    pub user_aborted: u64,
    /// Committed transactions' latencies, ns, by type and interval.
    pub latency: Latencies,
    /// Sum over committed transactions of the committing attempt's time in
    /// each stage (index `Stage::index`).
    pub stage_ns: [u64; Stage::ALL.len()],
    /// Sum over committed transactions of the committing attempt's time not
    /// spent in any stage: the program's own work (execution).
    pub execution_ns: u64,
    /// Time of aborted attempts in the measured interval, from the
    /// attempt's start to the end of its `release` (Deneva's "abort" time).
    pub aborted_ns: u64,
    /// Time slept in back-off after aborts, in the measured interval.
    pub backoff_ns: u64,
    /// The worker's counters when the measured interval began and ended
    /// (taken by the first coroutine that sees each boundary).
    pub at_start: Option<WorkerSnapshot>,
    pub at_end: Option<WorkerSnapshot>,
    /// What the worker did between the two: set by `close`, summed by
    /// `merge`.
    pub measured: WorkerSnapshot,
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// Per transaction type (index `Workload::txn_type`).
    pub per_type: [TypeCounts; MAX_TXN_TYPES],
    /// Runs with an injected fault (`recovery`): commits in the measured
    /// interval before the first fault and at or after it, and of those
    /// after, the ones made once this worker's node had declared a peer dead.
    pub fault_commits: FaultCommits,
}

/// Commits around an injected fault (the report's `recovery`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCommits {
    pub before_fault: u64,
    pub after_fault: u64,
    pub after_detection: u64,
}

impl WorkerStats {
    pub fn new() -> WorkerStats {
        WorkerStats::default()
    }

    /// Snapshots `worker`'s counters at the edges of the measured
    /// interval `[warmup_end_ns, end_ns)`: at the first call at or past
    /// each edge (`at_start`, `at_end`).
    pub fn note_boundaries(
        &mut self,
        worker: &Worker,
        now_ns: u64,
        warmup_end_ns: u64,
        end_ns: u64,
    ) {
        if now_ns < warmup_end_ns {
            return;
        }
        if self.at_start.is_none() {
            self.at_start = Some(worker.snapshot());
        }
        if now_ns >= end_ns && self.at_end.is_none() {
            self.at_end = Some(worker.snapshot());
        }
    }

    pub fn aborted(&self) -> u64 {
        self.aborts.iter().sum()
    }

    /// Fixes `measured` from the boundary snapshots once the worker ends,
    /// and seals its last latency interval.
    pub fn close(&mut self) {
        self.latency.seal();
        if let (Some(start), Some(end)) = (self.at_start, self.at_end) {
            self.measured = end.since(&start);
        }
    }

    /// Adds `other`'s counts (both closed).
    pub fn merge(&mut self, other: &WorkerStats) {
        self.measured.add(&other.measured);
        self.committed += other.committed;
        for (a, b) in self
            .committed_by_type
            .iter_mut()
            .zip(other.committed_by_type.iter())
        {
            *a += b;
        }
        for (a, b) in self.aborts.iter_mut().zip(other.aborts.iter()) {
            *a += b;
        }
        self.user_aborted += other.user_aborted;
        self.latency.merge(&other.latency);
        for (a, b) in self.stage_ns.iter_mut().zip(other.stage_ns.iter()) {
            *a += b;
        }
        self.execution_ns += other.execution_ns;
        self.aborted_ns += other.aborted_ns;
        self.backoff_ns += other.backoff_ns;
        self.cache_hits += other.cache_hits;
        self.cache_misses += other.cache_misses;
        self.fault_commits.before_fault += other.fault_commits.before_fault;
        self.fault_commits.after_fault += other.fault_commits.after_fault;
        self.fault_commits.after_detection += other.fault_commits.after_detection;
        for (a, b) in self.per_type.iter_mut().zip(other.per_type.iter()) {
            a.aborted += b.aborted;
            a.user_aborted += b.user_aborted;
            a.latency_ns_sum += b.latency_ns_sum;
        }
    }
}
