//! The transaction path allocates nothing per transaction in steady state.
//!
//! A counting global allocator counts every allocation of the process. Two
//! runs of the same configuration that differ only in length allocate the
//! same set-up (stores, threads, futures, arenas growing to their working
//! size); if the transaction path allocated, the longer run would allocate
//! in proportion to its extra transactions.
//!
//! The same allocator keeps the live bytes and their peak, so that a run's
//! memory can be seen not to grow with its length beyond what it must
//! keep (the committed history).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use verbena::base::{Primitive, ProtocolKind};
use verbena::config::{Config, FabricKind};
use verbena::engine;

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static LIVE_BYTES: AtomicU64 = AtomicU64::new(0);
static PEAK_LIVE_BYTES: AtomicU64 = AtomicU64::new(0);

fn grew(bytes: usize) {
    let live = LIVE_BYTES.fetch_add(bytes as u64, Ordering::Relaxed) + bytes as u64;
    PEAK_LIVE_BYTES.fetch_max(live, Ordering::Relaxed);
}

fn shrank(bytes: usize) {
    LIVE_BYTES.fetch_sub(bytes as u64, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        grew(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrank(layout.size());
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // Counted as a new block beside the old one, which it may be.
        grew(new_size);
        shrank(layout.size());
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs are measured one at a time: the counter is process-wide.
static SERIAL: Mutex<()> = Mutex::new(());

fn allocations_and_commits(config: &Config) -> (u64, u64) {
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    let report = engine::run(config).expect("run").report;
    let after = ALLOCATIONS.load(Ordering::SeqCst);
    (
        after - before,
        report.committed + report.aborts.0.iter().map(|(_, n)| n).sum::<u64>(),
    )
}

fn steady_state_allocates_nothing(protocol: ProtocolKind, primitive: Primitive) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut config = Config {
        protocol,
        primitive,
        warmup_s: 0.1,
        ..Config::default()
    };
    config.ycsb.rows_per_node = 10_000;
    config.duration_s = 0.2;
    let (short_allocs, short_txns) = allocations_and_commits(&config);
    config.duration_s = 1.0;
    let (long_allocs, long_txns) = allocations_and_commits(&config);
    let extra_txns = long_txns.saturating_sub(short_txns);
    assert!(
        extra_txns > 1_000,
        "the longer run did too little work: {short_txns} vs {long_txns}"
    );
    let extra_allocs = long_allocs.saturating_sub(short_allocs);
    eprintln!(
        "{} {}: {extra_allocs} extra allocations for {extra_txns} extra attempts",
        protocol.name(),
        primitive.name()
    );
    // Set-up noise (thread start-up, a vector reaching its working size a
    // little later) is up to a few dozen allocations, whatever the length;
    // one per transaction would be thousands (and on a loaded machine,
    // where the runs do little work, still above the floor: more than a
    // thousand extra transactions are asserted above).
    const SETUP_NOISE_ALLOCS: u64 = 40;
    assert!(
        extra_allocs < SETUP_NOISE_ALLOCS.max(extra_txns / 100),
        "{} {}: {extra_allocs} more allocations for {extra_txns} more transactions \
         ({short_allocs} in the short run, {long_allocs} in the long one)",
        protocol.name(),
        primitive.name()
    );
}

#[test]
fn no_wait_one_sided_steady_state_allocates_nothing() {
    steady_state_allocates_nothing(ProtocolKind::NoWait, Primitive::OneSided);
}

#[test]
fn no_wait_rpc_steady_state_allocates_nothing() {
    steady_state_allocates_nothing(ProtocolKind::NoWait, Primitive::Rpc);
}

#[test]
fn occ_one_sided_steady_state_allocates_nothing() {
    steady_state_allocates_nothing(ProtocolKind::Occ, Primitive::OneSided);
}

#[test]
fn occ_rpc_steady_state_allocates_nothing() {
    steady_state_allocates_nothing(ProtocolKind::Occ, Primitive::Rpc);
}

#[test]
fn maat_steady_state_allocates_nothing() {
    steady_state_allocates_nothing(ProtocolKind::Maat, Primitive::OneSided);
    steady_state_allocates_nothing(ProtocolKind::Maat, Primitive::Rpc);
}

#[test]
fn cicada_steady_state_allocates_nothing() {
    steady_state_allocates_nothing(ProtocolKind::Cicada, Primitive::OneSided);
    steady_state_allocates_nothing(ProtocolKind::Cicada, Primitive::Rpc);
}

#[test]
fn sundial_and_drtm_steady_state_allocates_nothing() {
    for protocol in [ProtocolKind::Sundial, ProtocolKind::Drtm] {
        for primitive in [Primitive::OneSided, Primitive::Rpc] {
            steady_state_allocates_nothing(protocol, primitive);
        }
    }
}

/// Bytes a run held at its peak above what was live when it began, and its
/// committed transactions.
fn peak_bytes_and_commits(config: &Config) -> (u64, u64) {
    let before = LIVE_BYTES.load(Ordering::SeqCst);
    PEAK_LIVE_BYTES.store(before, Ordering::SeqCst);
    let report = engine::run(config).expect("run").report;
    let peak = PEAK_LIVE_BYTES.load(Ordering::SeqCst);
    (peak - before, report.committed)
}

/// A `sim` run four times as long holds, at its peak, no more than the
/// history of its extra commits more: the buffers completions bring back
/// are reused, not kept. (A coroutine that only posts verbs once kept
/// every completion's buffer to the end of the run: here some 2 KB per
/// committed transaction, at 64 nodes × 8 × 8 about 67 MB per virtual
/// ms.)
fn long_sim_run_holds_only_its_history_more(protocol: ProtocolKind, primitive: Primitive) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut config = Config {
        fabric: FabricKind::Sim,
        protocol,
        primitive,
        nodes: 4,
        warmup_s: 0.001,
        duration_s: 0.005,
        ..Config::default()
    };
    // Few rows, so that the location caches reach their working size in
    // the short run already.
    config.ycsb.rows_per_node = 1_000;
    let (short_bytes, short_commits) = peak_bytes_and_commits(&config);
    config.duration_s = 0.02;
    let (long_bytes, long_commits) = peak_bytes_and_commits(&config);
    let extra_commits = long_commits.saturating_sub(short_commits);
    assert!(
        extra_commits > 1_000,
        "the longer run did too little work: {short_commits} vs {long_commits} commits"
    );
    let extra_bytes = long_bytes.saturating_sub(short_bytes);
    let per_commit = extra_bytes / extra_commits;
    eprintln!(
        "{} {}: {extra_bytes} more peak bytes for {extra_commits} more commits ({per_commit} per commit)",
        protocol.name(),
        primitive.name()
    );
    // The history keeps an entry and 10 items per YCSB commit (48 + 240
    // bytes), and its vectors double: up to three times that while one
    // moves.
    const HISTORY_BYTES_PER_COMMIT_AT_PEAK: u64 = 3 * (48 + 10 * 24);
    assert!(
        per_commit <= HISTORY_BYTES_PER_COMMIT_AT_PEAK,
        "{} {}: the peak grew by {per_commit} bytes per extra commit ({short_bytes} bytes \
         for {short_commits} commits, {long_bytes} for {long_commits}); the history needs at \
         most {HISTORY_BYTES_PER_COMMIT_AT_PEAK}",
        protocol.name(),
        primitive.name()
    );
}

#[test]
fn long_one_sided_sim_run_holds_only_its_history_more() {
    long_sim_run_holds_only_its_history_more(ProtocolKind::NoWait, Primitive::OneSided);
    long_sim_run_holds_only_its_history_more(ProtocolKind::Occ, Primitive::OneSided);
}

#[test]
fn long_rpc_sim_run_holds_only_its_history_more() {
    long_sim_run_holds_only_its_history_more(ProtocolKind::NoWait, Primitive::Rpc);
}
