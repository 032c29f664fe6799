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
fn sundial_is_serializable_under_every_stage_choice() {
    every_plan_is_serializable(ProtocolKind::Sundial);
}

#[test]
fn drtm_is_serializable_under_every_stage_choice() {
    every_plan_is_serializable(ProtocolKind::Drtm);
}
