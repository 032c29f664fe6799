//! Every implemented protocol under every stage-primitive choice the issue
//! names — all one-sided, all RPC, and each single stage flipped from either
//! — on a small, contended YCSB, with the serializability checker and the
//! YCSB invariants on, over several seeds; and a deliberately broken OCC
//! that the checker must catch.

use verbena::config::{Config, KeyDistribution, LockMode, ProtocolOptions};
use verbena::engine::{self, Report};
use verbena::fabric::NetworkProfile;
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
    every_plan_is_serializable_with(protocol, ProtocolOptions::default());
}

fn every_plan_is_serializable_with(protocol: ProtocolKind, options: ProtocolOptions) {
    let mut aborted = 0.0;
    for (seed, (primitive, stages)) in plans(protocol).into_iter().enumerate() {
        let mut config = contended(protocol, seed as u64 + 1);
        config.protocol_options = options;
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
            config.profile = NetworkProfile {
                name: "injected".into(),
                onesided_rtt_ns: 2_000 + 500 * (seed % 3),
                atomic_rtt_ns: 2_500,
                rpc_rtt_ns: 4_000,
                ..NetworkProfile::none()
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

fn shared_locks() -> ProtocolOptions {
    ProtocolOptions {
        lock_mode: LockMode::Shared,
        ..ProtocolOptions::default()
    }
}

#[test]
fn wait_die_is_serializable_under_every_stage_choice() {
    every_plan_is_serializable(ProtocolKind::WaitDie);
}

#[test]
fn wound_wait_is_serializable_under_every_stage_choice() {
    every_plan_is_serializable(ProtocolKind::WoundWait);
}

#[test]
fn no_wait_with_shared_locks_is_serializable_under_every_stage_choice() {
    every_plan_is_serializable_with(ProtocolKind::NoWait, shared_locks());
}

#[test]
fn wait_die_with_shared_locks_is_serializable_under_every_stage_choice() {
    every_plan_is_serializable_with(ProtocolKind::WaitDie, shared_locks());
}

#[test]
fn wound_wait_with_shared_locks_is_serializable_under_every_stage_choice() {
    every_plan_is_serializable_with(ProtocolKind::WoundWait, shared_locks());
}

#[test]
fn wait_die_with_the_starvation_fix_is_serializable_under_every_stage_choice() {
    let fix = ProtocolOptions {
        wait_die_starvation_fix: true,
        ..ProtocolOptions::default()
    };
    every_plan_is_serializable_with(ProtocolKind::WaitDie, fix);
    every_plan_is_serializable_with(
        ProtocolKind::WaitDie,
        ProtocolOptions {
            lock_mode: LockMode::Shared,
            ..fix
        },
    );
}

/// One hot row per node, one update per transaction, served by RPC so that
/// the coroutines of a node interleave on it: every conflict is between two
/// transactions and one lock.
fn one_hot_row(protocol: ProtocolKind, seed: u64) -> Config {
    let mut config = contended(protocol, seed);
    config.nodes = 2;
    config.coroutines = 8;
    config.primitive = Primitive::Rpc;
    config.ycsb.rows_per_node = 1;
    config.ycsb.ops_per_txn = 1;
    config.ycsb.partitions_per_txn = Some(1);
    config.ycsb.write_ratio = 1.0;
    config.ycsb.compute_us = 5.0;
    config
}

fn aborts_per_commit(config: &Config) -> (f64, Report) {
    let report = assert_checked(config);
    let aborts: u64 = report.aborts.0.iter().map(|(_, n)| n).sum();
    (aborts as f64 / report.committed as f64, report)
}

fn aborts_for(report: &Report, reason: &str) -> u64 {
    report
        .aborts
        .0
        .iter()
        .find(|(name, _)| *name == reason)
        .map_or(0, |(_, n)| *n)
}

#[test]
fn each_2pl_policy_aborts_for_its_own_reason_and_wound_wait_lets_the_younger_wait() {
    // One hot row: NO_WAIT aborts on every conflict; WAIT_DIE only kills
    // the younger requester (`died`; the older one waits in the handler's
    // waiting list); WOUND_WAIT never aborts a requester — the younger one
    // waits, the older one wounds — so it aborts less than NO_WAIT. (WAIT_DIE
    // need not abort less: its dying younger transactions retry and die
    // again while the older one waits — Deneva §5 sees the same.)
    let (mut no_wait, mut wound_wait) = (0.0, 0.0);
    for seed in 1..=2 {
        let (rate, report) = aborts_per_commit(&one_hot_row(ProtocolKind::NoWait, seed));
        no_wait += rate;
        assert_eq!(
            aborts_for(&report, "died") + aborts_for(&report, "wounded"),
            0
        );
        let (_, report) = aborts_per_commit(&one_hot_row(ProtocolKind::WaitDie, seed));
        assert_eq!(
            aborts_for(&report, "lock_conflict") + aborts_for(&report, "wounded"),
            0
        );
        let (rate, report) = aborts_per_commit(&one_hot_row(ProtocolKind::WoundWait, seed));
        wound_wait += rate;
        assert_eq!(
            aborts_for(&report, "lock_conflict") + aborts_for(&report, "died"),
            0
        );
    }
    assert!(no_wait > 0.0, "the hot row never conflicted");
    assert!(
        wound_wait < no_wait,
        "aborts per commit: no_wait {no_wait}, wound_wait {wound_wait}"
    );
}

#[test]
fn shared_locks_let_readers_share_and_exclusive_locks_do_not() {
    for protocol in [
        ProtocolKind::NoWait,
        ProtocolKind::WaitDie,
        ProtocolKind::WoundWait,
    ] {
        let mut config = one_hot_row(protocol, 5);
        config.ycsb.write_ratio = 0.0;
        config.protocol_options = shared_locks();
        let (shared, _) = aborts_per_commit(&config);
        assert_eq!(shared, 0.0, "{}: readers conflicted", protocol.name());
    }
    let mut config = one_hot_row(ProtocolKind::NoWait, 5);
    config.ycsb.write_ratio = 0.0;
    let (exclusive, _) = aborts_per_commit(&config);
    assert!(exclusive > 0.0, "exclusive read locks never conflicted");
}

#[test]
fn lease_protocols_stay_serializable_with_latency_and_several_workers() {
    for (seed, protocol) in [(200, ProtocolKind::Sundial), (201, ProtocolKind::Drtm)] {
        for primitive in [Primitive::OneSided, Primitive::Rpc] {
            let mut config = contended(protocol, seed);
            config.primitive = primitive;
            config.profile = NetworkProfile {
                name: "injected".into(),
                onesided_rtt_ns: 2_000,
                atomic_rtt_ns: 2_500,
                rpc_rtt_ns: 4_000,
                ..NetworkProfile::none()
            };
            config.duration_s = 0.15;
            assert_checked(&config);
            let mut config = contended(protocol, seed + 2);
            config.primitive = primitive;
            config.nodes = 2;
            config.workers = 2;
            config.ycsb.partitions_per_txn = Some(1);
            assert_checked(&config);
        }
    }
}

#[test]
fn sundial_reads_locked_tuples_and_renews_leases() {
    // Sundial never refuses a read because the tuple is locked (the
    // version's lease stays valid up to the rts the writer froze); under
    // contention, leases short of the commit timestamp are renewed, and
    // some renewals fail.
    for primitive in [Primitive::OneSided, Primitive::Rpc] {
        let mut config = contended(ProtocolKind::Sundial, 11);
        config.primitive = primitive;
        config.ycsb.rows_per_node = 12;
        let report = assert_checked(&config);
        assert_eq!(aborts_for(&report, "read_locked"), 0);
        assert!(
            aborts_for(&report, "renew_failed") > 0,
            "no renewal failed: {:?}",
            report.aborts
        );
    }
}

#[test]
fn drtm_lease_options_are_serializable() {
    for (seed, lease_ns, delta_ns) in [(21, 1_000_000, 0), (22, 400_000, 100_000), (23, 200_000, 0)]
    {
        for primitive in [Primitive::OneSided, Primitive::Rpc] {
            let mut config = contended(ProtocolKind::Drtm, seed);
            config.primitive = primitive;
            config.protocol_options.drtm_lease_ns = lease_ns;
            config.protocol_options.drtm_delta_ns = delta_ns;
            assert_checked(&config);
        }
    }
}

#[test]
fn drtm_writers_abort_on_unexpired_read_leases() {
    // Reads dominate a handful of rows: a writer nearly always meets a
    // reader's lease, long enough never to expire during the run.
    for primitive in [Primitive::OneSided, Primitive::Rpc] {
        let mut config = contended(ProtocolKind::Drtm, 31);
        config.primitive = primitive;
        config.ycsb.rows_per_node = 8;
        config.ycsb.write_ratio = 0.2;
        config.protocol_options.drtm_lease_ns = 1_000_000_000;
        let report = engine::run(&config).expect("run").report;
        let check = report.check.as_ref().expect("check was on");
        assert!(check.passed(), "{:?} {:?}", check.cycle, check.anomalies);
        assert!(
            aborts_for(&report, "lease_conflict") > 0,
            "no writer met a lease: {:?}",
            report.aborts
        );
    }
}

#[test]
fn drtm_a_lease_within_the_clock_skew_bound_never_confirms() {
    // VALID(end) needs now < end - DELTA: a lease of DELTA ns or less is
    // never valid, so no transaction that reads can commit, while
    // write-only ones still do.
    for primitive in [Primitive::OneSided, Primitive::Rpc] {
        let mut config = contended(ProtocolKind::Drtm, 41);
        config.primitive = primitive;
        config.protocol_options.drtm_lease_ns = 50_000;
        config.protocol_options.drtm_delta_ns = 50_000;
        config.ycsb.write_ratio = 0.0;
        let reads = engine::run(&config).expect("run").report;
        assert_eq!(reads.committed, 0);
        assert!(
            aborts_for(&reads, "lease_expired") > 0,
            "{:?}",
            reads.aborts
        );
        assert!(reads.check.as_ref().expect("check was on").passed());
        config.ycsb.write_ratio = 1.0;
        let writes = assert_checked(&config);
        assert_eq!(aborts_for(&writes, "lease_expired"), 0);
    }
}

#[test]
fn drtm_read_only_transactions_commit_without_commit_verbs() {
    // DrTM §4.5: a read-only transaction holds only leases; its commit is
    // the lease confirmation, with no write-back and nothing to unlock.
    let mut config = contended(ProtocolKind::Drtm, 51);
    config.ycsb.write_ratio = 0.0;
    let report = assert_checked(&config);
    assert_eq!(report.verbs_per_txn.write, 0.0);
    assert!(
        report.verbs_per_txn.cas >= 1.0,
        "{:?}",
        report.verbs_per_txn
    );
}
