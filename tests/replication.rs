//! Replication (issue 8): with `r` = 2 and 3 copies, every protocol's
//! commits reach every backup through the coordinator log — one-sided ring
//! WRITEs or RPC, chosen by the `log` stage of the hybrid code — so that
//! after the run (rings drained) every backup copy equals its primary, and
//! the serializability checker and workload invariants still pass. Bad
//! replication settings get a clear error, and `r = 1` stays the
//! unreplicated system. CALVIN has no coordinator: each active participant
//! logs its own partition's writes to that partition's backups before it
//! installs them (`engine::calvin`), through the same `log` stage.

use verbena::base::{Primitive, ProtocolKind, Stage};
use verbena::config::profile::NetworkProfile;
use verbena::config::{Config, FabricKind, WorkloadKind};
use verbena::engine::{self, Report};
use verbena::recovery::loopback::recover_in_process;
use verbena::replication::{backups_match_primaries, Placement};

fn replicated(
    protocol: ProtocolKind,
    workload: WorkloadKind,
    log: Primitive,
    others: Primitive,
    replication: u32,
    seed: u64,
) -> Config {
    let mut config = Config {
        fabric: FabricKind::Sim,
        protocol,
        primitive: others,
        workload,
        nodes: 3,
        workers: 2,
        coroutines: 4,
        duration_s: 0.003,
        warmup_s: 0.0005,
        seed,
        check: true,
        replication,
        profile: NetworkProfile::builtin("cx4-edr").unwrap(),
        ..Config::default()
    };
    config.stages = config.stages.with(Stage::Log, log);
    config.ycsb.rows_per_node = 200;
    config.ycsb.write_ratio = 0.5;
    config.smallbank.accounts_per_worker = 100;
    config
}

fn assert_replicated(config: &Config, what: &str) -> Report {
    let output = engine::run(config).unwrap_or_else(|e| panic!("{what}: {e}"));
    let report = output.report;
    let check = report.check.as_ref().expect("checked");
    assert!(check.serializable, "{what}: {:?}", check.cycle);
    assert!(check.invariants_ok, "{what}: {:?}", check.invariants);
    assert!(
        check
            .invariants
            .iter()
            .any(|d| d.starts_with("every backup copy")),
        "{what}: the backups were not checked: {:?}",
        check.invariants
    );
    // Not vacuous: the run committed (a 30 ms `threads` run on a loaded
    // host may commit nothing inside its measured interval, which is not
    // what this checks, so every commit of the run counts).
    assert!(check.txn_count > 0, "{what}: nothing committed");
    // The engine's check drained the rings; compare once more directly.
    let placement = Placement::new(config.nodes, config.replication);
    let problems = backups_match_primaries(&output.stores, &placement, &[]);
    assert!(problems.is_empty(), "{what}: {problems:?}");
    report
}

/// The protocols with a coordinator per transaction. CALVIN, whose
/// participants each log their own partition's writes, has tests of its
/// own below (`calvin_*`).
fn protocols() -> Vec<ProtocolKind> {
    ProtocolKind::ALL
        .into_iter()
        .filter(|p| *p != ProtocolKind::Calvin)
        .collect()
}

#[test]
fn every_protocol_keeps_its_backups_equal_to_its_primaries_with_either_log_primitive() {
    for protocol in protocols() {
        for (log, others) in [
            (Primitive::OneSided, Primitive::OneSided),
            (Primitive::Rpc, Primitive::OneSided),
            (Primitive::OneSided, Primitive::Rpc),
        ] {
            for (workload, replication, seed) in
                [(WorkloadKind::Ycsb, 2, 1), (WorkloadKind::SmallBank, 3, 2)]
            {
                let config = replicated(protocol, workload, log, others, replication, seed);
                let what = format!(
                    "{} {} log={} others={} r={replication} seed {seed}",
                    protocol.name(),
                    workload.name(),
                    log.name(),
                    others.name()
                );
                assert_replicated(&config, &what);
            }
        }
    }
}

#[test]
fn every_workload_replicates_including_run_time_inserts() {
    for workload in [WorkloadKind::Tpcc, WorkloadKind::Pps, WorkloadKind::TpceCp] {
        for log in [Primitive::OneSided, Primitive::Rpc] {
            let mut config =
                replicated(ProtocolKind::Occ, workload, log, Primitive::OneSided, 3, 5);
            config.tpcc.warehouses_per_node = 1;
            assert_replicated(&config, &format!("{} log={}", workload.name(), log.name()));
        }
    }
}

#[test]
fn a_small_ring_is_reclaimed_lazily_and_loses_nothing() {
    for seed in 1..=3 {
        let mut config = replicated(
            ProtocolKind::NoWait,
            WorkloadKind::Ycsb,
            Primitive::OneSided,
            Primitive::OneSided,
            3,
            seed,
        );
        // A few records' worth: the coordinators wrap and wait on it often.
        config.replication_options.ring_bytes = 2048;
        config.coroutines = 8;
        assert_replicated(&config, &format!("small ring seed {seed}"));
    }
}

#[test]
fn logging_costs_verbs_only_when_replicated_and_only_for_writers() {
    let base = replicated(
        ProtocolKind::Occ,
        WorkloadKind::Ycsb,
        Primitive::OneSided,
        Primitive::OneSided,
        1,
        3,
    );
    let mut replicated3 = base.clone();
    replicated3.replication = 3;
    let plain = engine::run(&base).unwrap().report;
    let logged = assert_replicated(&replicated3, "occ r=3");
    assert!(
        logged.verbs_per_txn.write > plain.verbs_per_txn.write,
        "r=3 must WRITE log records: {} vs {}",
        logged.verbs_per_txn.write,
        plain.verbs_per_txn.write
    );
    // Read-only transactions log nothing: with no writes, r=3 sends no
    // more verbs than r=1.
    let mut read_only = base.clone();
    read_only.ycsb.write_ratio = 0.0;
    let mut read_only3 = read_only.clone();
    read_only3.replication = 3;
    let (a, b) = (
        engine::run(&read_only).unwrap().report,
        engine::run(&read_only3).unwrap().report,
    );
    assert_eq!(
        a.verbs_per_txn.write, b.verbs_per_txn.write,
        "a read-only transaction logged something"
    );
}

#[test]
fn replicated_runs_work_on_threads() {
    for log in [Primitive::OneSided, Primitive::Rpc] {
        let mut config = replicated(
            ProtocolKind::NoWait,
            WorkloadKind::SmallBank,
            log,
            Primitive::OneSided,
            2,
            9,
        );
        config.fabric = FabricKind::Threads;
        config.profile = NetworkProfile::none();
        config.duration_s = 0.05;
        config.warmup_s = 0.01;
        assert_replicated(&config, &format!("threads log={}", log.name()));
    }
}

#[test]
fn bad_replication_settings_are_refused_with_what_is_allowed() {
    let mut config = replicated(
        ProtocolKind::NoWait,
        WorkloadKind::Ycsb,
        Primitive::OneSided,
        Primitive::OneSided,
        4,
        1,
    );
    let error = engine::run(&config).expect_err("r = 4").to_string();
    assert!(
        error.contains("replication = 4") && error.contains("1..=3"),
        "{error}"
    );
    config.replication = 3;
    config.nodes = 2;
    let error = engine::run(&config).expect_err("r > nodes").to_string();
    assert!(
        error.contains("nodes = 2") && error.contains("1..=2"),
        "{error}"
    );
    config.nodes = 3;
    config.replication_options.ring_bytes = 100;
    let error = engine::run(&config).expect_err("ring").to_string();
    assert!(error.contains("ring_bytes = 100"), "{error}");
    config.replication_options.ring_bytes = 4096;
    config.replication = 0;
    let error = engine::run(&config).expect_err("r = 0").to_string();
    assert!(error.contains("replication = 0"), "{error}");
}

/// A node crashes at a seeded virtual time in the middle of the run; the
/// survivors' rings are resolved and the failed partition's first backup
/// promoted by the failover sequencer in one process
/// (`recovery::loopback::recover_in_process`, on the quiescent cluster
/// after the run, with no failure detector). Every commit acknowledged
/// before the crash must be on the promoted copy.
fn crash_and_recover(protocol: ProtocolKind, log: Primitive, replication: u32, seed: u64) {
    use verbena::config::sim::FaultSpec;
    use verbena::store::KEY_WORD;
    let mut config = replicated(
        protocol,
        WorkloadKind::Ycsb,
        log,
        Primitive::OneSided,
        replication,
        seed,
    );
    let crashed = (seed % 3) as u16;
    let at_us = 700.0 + (seed * 397 % 2_000) as f64;
    config.sim.faults = vec![FaultSpec::Crash {
        node: crashed as u32,
        at_us,
    }];
    let output = run_through_crash(&config);
    let what = format!(
        "{} log={} r={replication} seed {seed}: node {crashed} crashed at {at_us} µs",
        protocol.name(),
        log.name()
    );
    let check = output.report.check.as_ref().unwrap();
    assert!(check.serializable, "{what}: {:?}", check.cycle);
    let history = output.history.expect("history");
    let rep = output.replication.expect("replicated run");
    let outcome = recover_in_process(&rep, &output.stores, &[crashed], loaded_header)
        .unwrap_or_else(|why| panic!("{what}: {why}"));
    let (_, serving) = outcome.promoted[0];
    assert_ne!(serving, crashed);
    // The last version each acknowledged commit installed, per (table, key).
    let mut acked = std::collections::HashMap::new();
    for txn in &history.txns {
        for item in history.writes(txn) {
            let last = acked.entry((item.table, item.key)).or_insert(0);
            *last = (*last).max(item.seq);
        }
    }
    // The failed partition's keys (read from the dead node's memory by the
    // test only, as the oracle) must be on the promoted copy, at least at
    // their last acknowledged version.
    let dead = &output.stores[crashed as usize];
    let promoted = &output.stores[serving as usize];
    let mut checked = 0;
    for table in &dead.layout.tables {
        for slot in 0..dead.rows(table.id) {
            let key = dead.region.load(table.tuple_addr(slot) + KEY_WORD as u64);
            let expected = acked.get(&(table.id, key)).copied().unwrap_or(0);
            let copy_slot = promoted
                .lookup(table.id, key)
                .unwrap_or_else(|| panic!("{what}: key {key} missing on node {serving}"));
            let seq = promoted.seq(table.id, copy_slot);
            assert!(
                seq >= expected,
                "{what}: key {key} at version {seq} on node {serving}, acknowledged {expected}"
            );
            checked += u64::from(expected > 0);
        }
    }
    assert!(
        checked > 0,
        "{what}: no acknowledged write to the failed partition"
    );
}

#[test]
fn no_acknowledged_commit_is_lost_when_a_node_crashes() {
    for protocol in protocols() {
        for log in [Primitive::OneSided, Primitive::Rpc] {
            crash_and_recover(protocol, log, 2, 1);
        }
    }
}

#[test]
#[ignore = "the crash matrix: every protocol x log primitive x r x many seeds (run by .ci/run)"]
fn no_acknowledged_commit_is_lost_when_a_node_crashes_many_seeds() {
    for protocol in protocols() {
        for log in [Primitive::OneSided, Primitive::Rpc] {
            for replication in [2, 3] {
                for seed in 1..=12 {
                    crash_and_recover(protocol, log, replication, seed);
                }
            }
        }
    }
}

/// A replicated CALVIN run: several epochs in the run's time, the TPC-C
/// scale small. On `threads`, wall time: a longer run, longer epochs.
fn calvin_replicated(
    fabric: FabricKind,
    workload: WorkloadKind,
    log: Primitive,
    others: Primitive,
    replication: u32,
    seed: u64,
) -> Config {
    let mut config = replicated(
        ProtocolKind::Calvin,
        workload,
        log,
        others,
        replication,
        seed,
    );
    config.fabric = fabric;
    config.protocol_options.calvin_epoch_us = 250;
    let t = &mut config.tpcc;
    t.warehouses_per_node = 1;
    t.items = 200;
    t.customers_per_district = 30;
    t.insert_headroom_per_district = 200;
    // Far above the specification's rates: most transactions write on
    // two partitions, so several participants log.
    t.remote_item_probability = 0.2;
    t.payment_remote_probability = 0.5;
    if fabric == FabricKind::Threads {
        config.profile = NetworkProfile::none();
        config.duration_s = 0.03;
        config.warmup_s = 0.005;
        config.protocol_options.calvin_epoch_us = 1_000;
    }
    config
}

/// Seeds per CALVIN case: `VERBENA_CALVIN_SEEDS`, or `default`.
fn calvin_seeds(default: u64) -> u64 {
    std::env::var("VERBENA_CALVIN_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// CALVIN × workload × log primitive × r on `fabric`, `seeds` seeds each;
/// the other stages' primitive alternates with the seed, and every third
/// seed runs with small rings.
fn calvin_matrix(fabric: FabricKind, seeds: u64) {
    for workload in [
        WorkloadKind::Ycsb,
        WorkloadKind::SmallBank,
        WorkloadKind::Tpcc,
    ] {
        for log in [Primitive::OneSided, Primitive::Rpc] {
            for replication in [2, 3] {
                for seed in 1..=seeds {
                    let others = if seed % 2 == 0 {
                        Primitive::Rpc
                    } else {
                        Primitive::OneSided
                    };
                    let mut config =
                        calvin_replicated(fabric, workload, log, others, replication, seed);
                    // Every third seed, rings of a few records: one-sided
                    // participants wrap and reclaim space often (and a
                    // record larger than the ring goes by RPC).
                    if seed % 3 == 0 {
                        config.replication_options.ring_bytes = 2048;
                    }
                    // The clients: the default requests in flight, a few,
                    // or lockstep.
                    config.protocol_options.calvin_inflight =
                        [verbena::config::DEFAULT_CALVIN_INFLIGHT, 3, 0][(seed % 3) as usize];
                    let what = format!(
                        "calvin {} {} log={} others={} r={replication} seed {seed} ring {} B inflight {}",
                        fabric.name(),
                        workload.name(),
                        log.name(),
                        others.name(),
                        config.replication_options.ring_bytes,
                        config.protocol_options.calvin_inflight
                    );
                    let report = assert_replicated(&config, &what);
                    assert!(
                        report.stages.0.iter().any(|(name, _)| *name == "log"),
                        "{what}: no log stage in {:?}",
                        report.stages
                    );
                }
            }
        }
    }
}

#[test]
fn calvin_keeps_its_backups_equal_to_its_primaries_on_sim_seeds() {
    calvin_matrix(FabricKind::Sim, calvin_seeds(6));
}

#[test]
#[ignore = "the calvin replication matrix on 24 sim seeds (run by .ci/run)"]
fn calvin_keeps_its_backups_equal_to_its_primaries_on_many_sim_seeds() {
    calvin_matrix(FabricKind::Sim, calvin_seeds(24));
}

#[test]
fn calvin_keeps_its_backups_equal_to_its_primaries_on_threads() {
    calvin_matrix(FabricKind::Threads, calvin_seeds(3));
}

/// Every active participant logs one record to each backup of its own
/// partition — not the whole write set its program computed — and only
/// when the run replicates; read-only transactions log nothing.
#[test]
fn calvin_participants_log_their_own_partitions_writes_only_when_replicated() {
    let write_all = |replication, log| {
        let mut config = calvin_replicated(
            FabricKind::Sim,
            WorkloadKind::Ycsb,
            log,
            Primitive::OneSided,
            replication,
            7,
        );
        // Every transaction writes on exactly two partitions.
        config.ycsb.write_ratio = 1.0;
        config.ycsb.partitions_per_txn = Some(2);
        config
    };
    for replication in [2u32, 3] {
        // By RPC (the other stages one-sided, so every RPC is a log
        // record): two participants × (r − 1) backups each. Were each to
        // log the whole write set, r = 2 would send 4 and r = 3 would send 6.
        let config = write_all(replication, Primitive::Rpc);
        let report = assert_replicated(&config, &format!("calvin write-all r={replication}"));
        let expected = 2.0 * (replication - 1) as f64;
        let rpc = report.verbs_per_txn.rpc;
        assert!(
            (rpc - expected).abs() <= 0.1 * expected,
            "r={replication}: {rpc} log RPCs per transaction, expected {expected}"
        );
    }
    let plain = engine::run(&write_all(1, Primitive::OneSided))
        .expect("r = 1")
        .report;
    let logged = assert_replicated(&write_all(3, Primitive::OneSided), "calvin write-all r=3");
    assert!(
        logged.verbs_per_txn.write > plain.verbs_per_txn.write,
        "r=3 must WRITE log records: {} vs {}",
        logged.verbs_per_txn.write,
        plain.verbs_per_txn.write
    );
    assert!(
        !plain.stages.0.iter().any(|(name, _)| *name == "log"),
        "r = 1 reports no log stage: {:?}",
        plain.stages
    );
    let mut read_only = write_all(1, Primitive::OneSided);
    read_only.ycsb.write_ratio = 0.0;
    let mut read_only3 = read_only.clone();
    read_only3.replication = 3;
    let (a, b) = (
        engine::run(&read_only).expect("r = 1").report,
        assert_replicated(&read_only3, "calvin read-only r=3"),
    );
    assert_eq!(
        (a.verbs_per_txn.write, a.verbs_per_txn.rpc),
        (b.verbs_per_txn.write, b.verbs_per_txn.rpc),
        "a read-only CALVIN transaction logged something"
    );
}

/// CALVIN fails over only from a backup (a sequenced transaction cannot
/// abort) and one crash per run: anything else is refused before the run
/// starts, saying what is allowed (`tests/failover.rs` runs the failover).
#[test]
fn calvin_with_a_fault_it_cannot_fail_over_is_refused() {
    let mut config = calvin_replicated(
        FabricKind::Sim,
        WorkloadKind::Ycsb,
        Primitive::OneSided,
        Primitive::OneSided,
        1,
        1,
    );
    config.faults = vec![verbena::config::faults::RunFault::Crash {
        node: 1,
        at_s: 0.002,
    }];
    let error = engine::run(&config)
        .expect_err("calvin with --fault and replication 1")
        .to_string();
    assert!(
        error.contains("protocol calvin needs --replication 2 or 3"),
        "{error}"
    );
    config.replication = 2;
    config
        .faults
        .push(verbena::config::faults::RunFault::Crash {
            node: 2,
            at_s: 0.003,
        });
    let error = engine::run(&config)
        .expect_err("calvin with two crashes")
        .to_string();
    assert!(
        error.contains("allowed: exactly one crash:NODE@SECONDS"),
        "{error}"
    );
}

/// The protocol headers as the loader leaves them.
fn loaded_header(_table: &verbena::store::TableLayout, header: &mut [u64]) {
    header.fill(0);
}

/// Runs `config`, which crashes a node with no failure detector to fail it
/// over: peers left waiting on it make the run end `Unfinished`, and the
/// test inspects what it left (a run whose crash stranded nobody is `Ok`).
fn run_through_crash(config: &Config) -> engine::RunOutput {
    match engine::run(config) {
        Ok(output) => output,
        Err(engine::RunError::Unfinished { output, .. }) => *output,
        Err(e) => panic!("run: {e}"),
    }
}
