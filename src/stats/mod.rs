//! Measurement (ARCHITECTURE.md, "Measurement"): what each worker counts
//! while it runs, and how the counts of all workers merge into a report.
//!
//! Each worker owns one [`WorkerStats`] (no sharing on the hot path). Only
//! transactions that commit inside the measured interval `[warmup_end,
//! end)` are counted; warm-up is excluded. Latency is from the first attempt's
//! start to the commit (retries and back-off included), in ns.

pub mod hist;

pub use hist::Histogram;

use crate::fabric::VerbCounters;
use crate::protocols::Stage;
use crate::txn::AbortReason;

/// Counts of one worker (or, after merging, of the run).
#[derive(Clone, Debug, Default)]
pub struct WorkerStats {
    pub committed: u64,
    /// Aborted attempts in the measured interval, by `AbortReason::index`.
    pub aborts: [u64; AbortReason::ALL.len()],
    /// Transactions the program itself gave up (user aborts): counted once.
    pub user_aborted: u64,
    pub latency_ns: Histogram,
    /// Sum over committed transactions of the committing attempt's time in
    /// each stage (index `Stage::index`).
    pub stage_ns: [u64; Stage::ALL.len()],
    /// Sum over committed transactions of the committing attempt's time not
    /// spent in any stage: the program's own work (execution).
    pub execution_ns: u64,
    /// The endpoint's verb counters when the measured interval began and
    /// ended (taken by the first coroutine that sees each boundary).
    pub counters_at_start: Option<VerbCounters>,
    pub counters_at_end: Option<VerbCounters>,
    pub cache_hits: u64,
    pub cache_misses: u64,
}

impl WorkerStats {
    pub fn new() -> WorkerStats {
        WorkerStats::default()
    }

    pub fn aborted(&self) -> u64 {
        self.aborts.iter().sum()
    }

    /// Verbs posted in the measured interval.
    pub fn measured_counters(&self) -> VerbCounters {
        match (self.counters_at_start, self.counters_at_end) {
            (Some(start), Some(end)) => end.sub(&start),
            _ => VerbCounters::default(),
        }
    }

    /// Adds `other`'s counts; the verb counters are summed as measured
    /// deltas (the merged value lives in `counters_at_end`).
    pub fn merge(&mut self, other: &WorkerStats) {
        let mine = self.measured_counters();
        let mut sum = mine;
        sum.add(&other.measured_counters());
        self.counters_at_start = Some(VerbCounters::default());
        self.counters_at_end = Some(sum);
        self.committed += other.committed;
        for (a, b) in self.aborts.iter_mut().zip(other.aborts.iter()) {
            *a += b;
        }
        self.user_aborted += other.user_aborted;
        self.latency_ns.merge(&other.latency_ns);
        for (a, b) in self.stage_ns.iter_mut().zip(other.stage_ns.iter()) {
            *a += b;
        }
        self.execution_ns += other.execution_ns;
        self.cache_hits += other.cache_hits;
        self.cache_misses += other.cache_misses;
    }
}
