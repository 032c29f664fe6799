//! The transaction path allocates nothing per transaction in steady state.
//!
//! A counting global allocator counts every allocation of the process. Two
//! runs of the same configuration that differ only in length allocate the
//! same set-up (stores, threads, futures, arenas growing to their working
//! size); if the transaction path allocated, the longer run would allocate
//! in proportion to its extra transactions.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use verbena::config::Config;
use verbena::engine;
use verbena::protocols::{Primitive, ProtocolKind};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
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
