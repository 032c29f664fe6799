//! Every implemented protocol under every stage-primitive choice the issue
//! names — all one-sided, all RPC, and each single stage flipped from either
//! — on a small, contended YCSB, with the serializability checker and the
//! YCSB invariants on, over several seeds; and a deliberately broken OCC
//! that the checker must catch.

use verbena::config::{Config, KeyDistribution, LatencyConfig};
use verbena::engine::{self, Report};
use verbena::protocols::{Primitive, ProtocolKind, StagePlan};

/// Few rows, many writes, several nodes: conflicts on every run.
fn contended(protocol: ProtocolKind, seed: u64) -> Config {
    let mut config = Config {
        protocol,
        nodes: 3,
        workers: 1,
        coroutines: 4,
        duration_s: 0.25,
        warmup_s: 0.05,
        seed,
        check: true,
        // Odd seeds probe the index on every access (no location cache).
        location_cache_entries: if seed % 2 == 1 { 0 } else { 4096 },
        ..Config::default()
    };
    config.ycsb.rows_per_node = 40;
    config.ycsb.ops_per_txn = 6;
    config.ycsb.write_ratio = 0.5;
    config.ycsb.distribution = KeyDistribution::Uniform;
    config.ycsb.compute_us = 1.0;
    config.ycsb.partitions_per_txn = Some(2);
    config
}

fn assert_checked(config: &Config) -> Report {
    let output = engine::run(config).expect("run");
    let report = output.report;
    let check = report.check.as_ref().expect("check was on");
    assert!(
        check.passed(),
        "{} with {}: serializable {} (cycle {:?}, anomalies {:?}), invariants {} {:?}",
        config.protocol.name(),
        report.config.stages.describe(),
        check.serializable,
        check.cycle,
        check.anomalies,
        check.invariants_ok,
        check.invariants
    );
    assert!(report.committed > 0, "nothing committed");
    assert!(check.txn_count as u64 >= report.committed);
    report
}

/// The plans of `protocol`: both pure forms and every single-stage flip.
fn plans(protocol: ProtocolKind) -> Vec<(Primitive, StagePlan)> {
    let mut plans = vec![
        (Primitive::OneSided, StagePlan::empty()),
        (Primitive::Rpc, StagePlan::empty()),
    ];
    for &stage in protocol.stages() {
        plans.push((
            Primitive::OneSided,
            StagePlan::empty().with(stage, Primitive::Rpc),
        ));
        plans.push((
            Primitive::Rpc,
            StagePlan::empty().with(stage, Primitive::OneSided),
        ));
    }
    plans
}

fn every_plan_is_serializable(protocol: ProtocolKind) {
    let mut aborted = 0.0;
    for (seed, (primitive, stages)) in plans(protocol).into_iter().enumerate() {
        let mut config = contended(protocol, seed as u64 + 1);
        config.primitive = primitive;
        config.stages = stages;
        let report = assert_checked(&config);
        aborted += report.abort_rate;
    }
    assert!(aborted > 0.0, "the contended workload never conflicted");
}

#[test]
fn no_wait_is_serializable_under_every_stage_choice() {
    every_plan_is_serializable(ProtocolKind::NoWait);
}

#[test]
fn occ_is_serializable_under_every_stage_choice() {
    every_plan_is_serializable(ProtocolKind::Occ);
}

#[test]
fn both_protocols_stay_serializable_over_seeds_with_injected_latency() {
    for seed in 100..106 {
        for protocol in [ProtocolKind::NoWait, ProtocolKind::Occ] {
            let mut config = contended(protocol, seed);
            config.primitive = if seed % 2 == 0 {
                Primitive::OneSided
            } else {
                Primitive::Rpc
            };
            config.latency = LatencyConfig {
                onesided_ns: 2_000 + 500 * (seed % 3),
                atomic_ns: 2_500,
                rpc_ns: 4_000,
            };
            config.duration_s = 0.15;
            assert_checked(&config);
        }
    }
}

#[test]
fn several_workers_per_node_and_local_only_transactions_are_serializable() {
    for protocol in [ProtocolKind::NoWait, ProtocolKind::Occ] {
        let mut config = contended(protocol, 7);
        config.nodes = 2;
        config.workers = 2;
        config.ycsb.partitions_per_txn = Some(1);
        assert_checked(&config);
        config.primitive = Primitive::Rpc;
        assert_checked(&config);
    }
}

#[test]
fn the_checker_catches_occ_without_read_validation() {
    // Write skew needs reads: half the operations read, all on a handful of
    // rows, so a broken OCC commits a cycle within a fraction of a second.
    let mut caught = None;
    for seed in 1..=5 {
        let mut config = contended(ProtocolKind::Occ, seed);
        config.unsafe_skip_occ_validation = true;
        config.ycsb.rows_per_node = 8;
        config.ycsb.ops_per_txn = 4;
        let report = engine::run(&config).expect("run").report;
        let check = report.check.expect("check was on");
        if !check.serializable {
            caught = Some(check);
            break;
        }
    }
    let check = caught.expect("OCC without validation passed the checker on 5 seeds");
    let cycle = check.cycle.expect("a cycle is reported");
    assert!(
        cycle.len() >= 2,
        "a cycle has at least two transactions: {cycle:?}"
    );
}

#[test]
fn rpc_stages_cost_the_serving_workers_cpu_and_one_sided_ones_do_not() {
    for protocol in [ProtocolKind::NoWait, ProtocolKind::Occ] {
        let mut config = contended(protocol, 3);
        config.check = false;
        config.primitive = Primitive::OneSided;
        let onesided = engine::run(&config).expect("run").report;
        assert_eq!(onesided.worker_time.rpc_handlers, 0.0);
        assert_eq!(onesided.verbs_per_txn.rpc, 0.0);
        config.primitive = Primitive::Rpc;
        let rpc = engine::run(&config).expect("run").report;
        assert!(rpc.worker_time.rpc_handlers > 0.0, "{:?}", rpc.worker_time);
        assert_eq!(rpc.verbs_per_txn.read + rpc.verbs_per_txn.cas, 0.0);
        for report in [&onesided, &rpc] {
            let t = &report.worker_time;
            assert!((t.busy + t.idle - 1.0).abs() < 1e-9 && t.rpc_handlers <= t.busy);
        }
    }
}

#[test]
fn maat_is_serializable_under_every_stage_choice() {
    every_plan_is_serializable(ProtocolKind::Maat);
}

#[test]
fn cicada_is_serializable_under_every_stage_choice() {
    every_plan_is_serializable(ProtocolKind::Cicada);
}

#[test]
fn maat_list_capacities_are_serializable_and_a_full_list_aborts() {
    for (seed, capacity) in [(21, 1), (22, 2), (23, 64)] {
        let mut config = contended(ProtocolKind::Maat, seed);
        config.protocol_options.maat_list_capacity = capacity;
        config.primitive = if seed % 2 == 0 {
            Primitive::Rpc
        } else {
            Primitive::OneSided
        };
        let report = assert_checked(&config);
        let full = report
            .aborts
            .0
            .iter()
            .find(|(name, _)| *name == "list_full")
            .map_or(0, |(_, count)| *count);
        if capacity == 1 {
            // One reader and one writer per tuple: 4 coroutines on 3 nodes
            // sharing 120 rows overflow the lists.
            assert!(
                full > 0,
                "capacity 1 never overflowed: {:?}",
                report.aborts.0
            );
        }
        if capacity == 64 {
            assert_eq!(full, 0, "12 coroutines cannot fill 64 entries");
        }
    }
}

#[test]
fn cicada_version_counts_are_serializable() {
    for (seed, versions) in [(31, 2), (32, 3), (33, 16)] {
        let mut config = contended(ProtocolKind::Cicada, seed);
        config.protocol_options.cicada_versions = versions;
        config.primitive = if seed % 2 == 0 {
            Primitive::Rpc
        } else {
            Primitive::OneSided
        };
        assert_checked(&config);
    }
}

#[test]
fn maat_and_cicada_stay_serializable_with_injected_latency_and_several_workers() {
    for seed in 40..44 {
        for protocol in [ProtocolKind::Maat, ProtocolKind::Cicada] {
            let mut config = contended(protocol, seed);
            config.primitive = if seed % 2 == 0 {
                Primitive::OneSided
            } else {
                Primitive::Rpc
            };
            if seed >= 42 {
                config.nodes = 2;
                config.workers = 2;
            } else {
                config.latency = LatencyConfig {
                    onesided_ns: 2_000,
                    atomic_ns: 2_500,
                    rpc_ns: 4_000,
                };
            }
            config.duration_s = 0.15;
            assert_checked(&config);
        }
    }
}

#[test]
fn maat_and_cicada_rpc_plans_post_no_one_sided_verbs() {
    for protocol in [ProtocolKind::Maat, ProtocolKind::Cicada] {
        let mut config = contended(protocol, 5);
        config.check = false;
        config.primitive = Primitive::Rpc;
        let rpc = engine::run(&config).expect("run").report;
        let verbs = &rpc.verbs_per_txn;
        assert_eq!(
            verbs.read + verbs.write + verbs.cas + verbs.faa,
            0.0,
            "{verbs:?}"
        );
        assert!(rpc.worker_time.rpc_handlers > 0.0);
        config.primitive = Primitive::OneSided;
        let onesided = engine::run(&config).expect("run").report;
        assert_eq!(onesided.verbs_per_txn.rpc, 0.0);
    }
}

#[test]
fn cicada_version_slots_count_toward_the_memory_limit() {
    let mut config = Config {
        protocol: ProtocolKind::Cicada,
        ..Config::default()
    };
    config.ycsb.record_bytes = 4096;
    config.ycsb.rows_per_node = 100_000;
    config.protocol_options.cicada_versions = 64;
    let error = config
        .clone()
        .validate()
        .expect_err("64 versions of 4 KiB rows");
    assert!(error.to_string().contains("cicada"), "{error}");
    config.protocol_options.cicada_versions = 2;
    config.validate().expect("2 versions fit");
}
