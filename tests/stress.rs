//! The heavy correctness sweep, run by `.ci/run` (`cargo test --test stress
//! -- --ignored`): many seeds, each drawing its own cluster shape, stage
//! plan, contention and injected latency, for every implemented protocol,
//! with the serializability checker and the YCSB invariants on.
//! `VERBENA_STRESS_SEEDS=N` runs N seeds instead of 40.

use verbena::base::rng::Rng;
use verbena::base::{Primitive, ProtocolKind, StagePlan};
use verbena::config::profile::NetworkProfile;
use verbena::config::{Config, KeyDistribution, LockMode};
use verbena::engine;

fn drawn(protocol: ProtocolKind, seed: u64) -> Config {
    let mut rng = Rng::derive(seed, &[protocol.ordinal()]);
    let mut stages = StagePlan::empty();
    for &stage in protocol.stages() {
        let primitive = if rng.below(2) == 0 {
            Primitive::OneSided
        } else {
            Primitive::Rpc
        };
        stages = stages.with(stage, primitive);
    }
    let nodes = 1 + rng.below(4) as u32;
    let mut config = Config {
        protocol,
        nodes,
        workers: 1 + rng.below(2) as u32,
        coroutines: 1 + rng.below(8) as u32,
        stages,
        duration_s: 0.3,
        warmup_s: 0.0,
        seed,
        check: true,
        location_cache_entries: [0, 64, 4096][rng.below(3) as usize],
        ..Config::default()
    };
    if rng.below(2) == 0 {
        config.profile = NetworkProfile {
            name: "injected".into(),
            onesided_rtt_ns: rng.below(5_000),
            atomic_rtt_ns: rng.below(5_000),
            rpc_rtt_ns: rng.below(10_000),
            ..NetworkProfile::none()
        };
    }
    let y = &mut config.ycsb;
    y.rows_per_node = [16, 64, 1_000][rng.below(3) as usize];
    y.ops_per_txn = 1 + rng.below(12) as u32;
    y.write_ratio = [0.0, 0.2, 0.5, 1.0][rng.below(4) as usize];
    y.distribution = [
        KeyDistribution::Uniform,
        KeyDistribution::Zipf,
        KeyDistribution::Hot,
    ][rng.below(3) as usize];
    y.hot_fraction = 0.05;
    y.hot_probability = 0.9;
    y.compute_us = rng.below(3) as f64;
    y.record_bytes = 8 * (1 + rng.below(16) as u32);
    y.partitions_per_txn = Some(1 + rng.below(nodes.min(y.ops_per_txn) as u64) as u32);
    config.protocol_options.mvcc_versions = 2 + rng.below(5) as u32;
    config.protocol_options.timestamp_cascading_aborts = rng.below(2) == 0;
    config
}

/// Runs `config` and asserts its history serializable and its invariants
/// held.
fn run_checked(config: &Config) -> verbena::engine::Report {
    let (seed, protocol) = (config.seed, config.protocol.name());
    let report = engine::run(config)
        .unwrap_or_else(|e| panic!("seed {seed} {protocol}: {e}"))
        .report;
    let check = report.check.as_ref().expect("check on");
    assert!(
        check.passed(),
        "seed {seed} {protocol} {:?}: cycle {:?}, anomalies {:?}, invariants {:?}",
        report.config,
        check.cycle,
        check.anomalies,
        check.invariants
    );
    report
}

#[test]
#[ignore = "heavy: run by .ci/run"]
fn many_seeds_every_protocol_random_shapes_and_plans() {
    // VERBENA_STRESS_SEEDS widens the sweep for a local soak.
    let seeds: u64 = std::env::var("VERBENA_STRESS_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    for seed in 1..=seeds {
        for protocol in [
            ProtocolKind::NoWait,
            ProtocolKind::WaitDie,
            ProtocolKind::WoundWait,
            ProtocolKind::Occ,
            ProtocolKind::Timestamp,
            ProtocolKind::Mvcc,
            ProtocolKind::Maat,
            ProtocolKind::Cicada,
            ProtocolKind::Sundial,
            // DRTM is left out: serializable on every seed tried, but under
            // the hottest drawn shapes on an oversubscribed machine (seed 3:
            // 12 operations, 24 coroutines on 2 cores) its 400 µs leases
            // outlive transactions that take milliseconds, and a run can
            // commit nothing in 0.3 s. The sim matrix covers it.
            ProtocolKind::Calvin,
        ] {
            let mut config = drawn(protocol, seed);
            // The 2PL family's options, from the seed (the shape draws above
            // stay as they were).
            let options = &mut config.protocol_options;
            options.lock_mode = if seed % 2 == 0 {
                LockMode::Shared
            } else {
                LockMode::Exclusive
            };
            options.wait_die_starvation_fix = seed % 3 == 0;
            let report = run_checked(&config);
            // WOUND_WAIT's liveness on `threads` is not asserted: under the
            // hottest drawn shapes on a loaded 2-core host it can commit
            // nothing for seconds (seeds 11 and 23 in CI; release builds on
            // a quiet host commit thousands per second, and `sim` commits on
            // every seed). A known weakness, tracked in docs/performance-archive.md:
            // a wounded transaction parked or sleeping elsewhere notices the
            // wound late, while fresh attempts take the freed lock first.
            // Its histories are still checked above.
            if report.committed == 0 && protocol != ProtocolKind::WoundWait {
                // Liveness, not speed: the hottest drawn shapes (one hot row
                // per node, 12 operations, 24 coroutines on an oversubscribed
                // host) can leave a waiting protocol without a commit in
                // 0.3 s of wall time (WOUND_WAIT notices a wound on a parked
                // RPC lock only when the park times out). Ten times longer
                // must commit something, or the protocol is stuck.
                config.duration_s = 3.0;
                let again = run_checked(&config);
                assert!(
                    again.committed > 0,
                    "seed {seed} {}: nothing committed in 3 s; aborts {:?}; {:?}",
                    protocol.name(),
                    again.aborts.0,
                    again.config
                );
            }
        }
    }
}
