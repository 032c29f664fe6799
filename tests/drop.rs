//! Lost messages on the `sim` fabric: a `drop` link fault loses verbs and
//! wire messages, and the transport sends each lost one again after its
//! timeout (RC's Local ACK Timeout on the RDMA profiles, TCP's RTO on the
//! TCP ones: `fabric::sim`'s transport), so it arrives once, late; past the
//! transport's retry budget the connection breaks and what was lost comes
//! back as a failure from the peer, which only a failure detector turns
//! into a declaration the recovery acts on. No run ends with workers
//! waiting on lost traffic: a run that would fails, saying so.
//!
//! The matrix: every protocol × SmallBank and TPC-C × replication 1 and 2
//! × 5 seeds, a drop from node 0 to node 1 with probability 0.3 for 2 ms of
//! a 6 ms run on 3 nodes, checker on (serializable, invariants, backups
//! equal to their primaries). A seeded sample runs in the plain test
//! command; the whole matrix is `--ignored`. Each case's history and
//! memory hashes are recorded in `tests/hashes/drop.txt` (rewritten by
//! running the ignored matrix with `VERBENA_RECORD_DROP_HASHES=1`).

use verbena::base::ProtocolKind;
use verbena::config::sim::FaultSpec;
use verbena::config::{Config, FabricKind, WorkloadKind};
use verbena::engine;

const HASH_FILE: &str = "tests/hashes/drop.txt";

/// The link fault of the matrix: node 0 → 1, 2 ms from 2 ms in, p = 0.3.
fn lossy_link() -> FaultSpec {
    FaultSpec::Drop {
        from: 0,
        to: 1,
        at_us: 2_000.0,
        for_us: 2_000.0,
        probability: 0.3,
    }
}

fn drop_config(
    protocol: ProtocolKind,
    workload: WorkloadKind,
    replication: u32,
    seed: u64,
) -> Config {
    let mut config = Config {
        protocol,
        workload,
        replication,
        seed,
        check: true,
        ..Config::default()
    };
    six_ms_on_three_nodes(&mut config);
    config.smallbank.accounts_per_worker = 1_000;
    config.tpcc.items = 1_000;
    config.tpcc.customers_per_district = 100;
    config.tpcc.insert_headroom_per_district = 2_000;
    config.sim.faults = vec![lossy_link()];
    config
}

/// The matrix's cluster and run: 3 nodes of 2 workers × 4 coroutines on
/// `sim` over ConnectX-4 EDR (RC's retransmission), 1 ms of warm-up and
/// 5 ms measured.
fn six_ms_on_three_nodes(config: &mut Config) {
    config.fabric = FabricKind::Sim;
    config.profile = verbena::config::profile::NetworkProfile::resolve("cx4-edr").unwrap();
    config.nodes = 3;
    config.workers = 2;
    config.coroutines = 4;
    config.warmup_s = 0.001;
    config.duration_s = 0.005;
}

/// A link 0 → 1 that loses everything from 2 ms in for two virtual
/// seconds: longer than RC's whole retry budget (8 × 67 ms).
fn broken_link() -> FaultSpec {
    FaultSpec::Drop {
        from: 0,
        to: 1,
        at_us: 2_000.0,
        for_us: 2e6,
        probability: 1.0,
    }
}

/// One case's identity, as its line in the hash file begins.
fn case_name(
    protocol: ProtocolKind,
    workload: WorkloadKind,
    replication: u32,
    seed: u64,
) -> String {
    format!(
        "{} {} seed={seed} replication={replication}",
        workload.name(),
        protocol.name()
    )
}

/// Runs one case and checks it; returns its hash line.
fn run_case(protocol: ProtocolKind, workload: WorkloadKind, replication: u32, seed: u64) -> String {
    let name = case_name(protocol, workload, replication, seed);
    let config = drop_config(protocol, workload, replication, seed);
    let output = engine::run(&config).unwrap_or_else(|e| panic!("{name}: {e}"));
    let report = &output.report;
    let check = report.check.as_ref().expect("checked");
    assert!(check.passed(), "{name}: {check:?}\n{}", report.table());
    let sim = report.sim.as_ref().expect("a sim run");
    assert_eq!(sim.stuck_workers, 0, "{name}");
    assert!(report.committed > 0, "{name}: nothing committed");
    format!(
        "{name} history={} memory={}",
        sim.history_hash, sim.memory_hash
    )
}

/// Compares `lines` with the recorded hash file (cases it lacks fail).
fn expect_recorded(lines: &[String]) {
    let recorded = std::fs::read_to_string(HASH_FILE).expect("tests/hashes/drop.txt");
    let mut differences = Vec::new();
    for line in lines {
        let (key, _) = line.split_once(" history=").expect("a hash line");
        let found = recorded
            .lines()
            .find(|l| l.split_once(" history=").is_some_and(|(k, _)| k == key));
        match found {
            Some(l) if l == line => {}
            Some(l) => differences.push(format!("recorded {l}\n     now {line}")),
            None => differences.push(format!("not recorded: {line}")),
        }
    }
    assert!(
        differences.is_empty(),
        "{} case(s) moved (a change of what the simulator does must say why):\n{}",
        differences.len(),
        differences.join("\n")
    );
}

/// The sample of the plain test command: a 2PL protocol, OCC and CALVIN
/// with replication 2 on SmallBank (where a lost message used to leave
/// backups ahead of their primaries), and TPC-C once.
#[test]
fn lost_messages_are_retransmitted_and_every_run_passes_its_check() {
    let mut lines = Vec::new();
    for (protocol, workload) in [
        (ProtocolKind::NoWait, WorkloadKind::SmallBank),
        (ProtocolKind::Occ, WorkloadKind::SmallBank),
        (ProtocolKind::Calvin, WorkloadKind::SmallBank),
        (ProtocolKind::Mvcc, WorkloadKind::Tpcc),
    ] {
        lines.push(run_case(protocol, workload, 2, 1));
    }
    lines.push(run_case(
        ProtocolKind::Sundial,
        WorkloadKind::SmallBank,
        1,
        2,
    ));
    expect_recorded(&lines);
}

/// The whole matrix: every protocol × SmallBank and TPC-C × R = 1, 2 × 5
/// seeds (220 runs), each checked, each hash as recorded.
#[test]
#[ignore = "the whole drop matrix: 220 checked runs"]
fn drop_matrix_every_protocol_workload_and_replication() {
    let mut lines = Vec::new();
    for replication in [1, 2] {
        for workload in [WorkloadKind::SmallBank, WorkloadKind::Tpcc] {
            for protocol in ProtocolKind::ALL {
                for seed in 1..=5 {
                    lines.push(run_case(protocol, workload, replication, seed));
                }
            }
        }
    }
    if std::env::var_os("VERBENA_RECORD_DROP_HASHES").is_some() {
        let mut text = String::from(
            "# Drop matrix (tests/drop.rs): history and memory hashes per case.\n\
             # A sim run is a pure function of config and seed: a change that moves a line\n\
             # changes what the simulator does, and its commit says why. Rewritten by\n\
             #   VERBENA_RECORD_DROP_HASHES=1 cargo test --test drop -- --ignored\n",
        );
        for line in &lines {
            text.push_str(line);
            text.push('\n');
        }
        std::fs::write(HASH_FILE, text).expect("writing tests/hashes/drop.txt");
    }
    expect_recorded(&lines);
}

/// Lost copies arrive, late, and a retransmitted run repeats exactly.
#[test]
fn a_retransmitted_run_repeats_exactly() {
    let config = drop_config(ProtocolKind::WaitDie, WorkloadKind::SmallBank, 2, 3);
    let a = engine::run(&config).unwrap().report;
    let b = engine::run(&config).unwrap().report;
    let (a, b) = (a.sim.unwrap(), b.sim.unwrap());
    assert!(a.lost_messages > 0, "the link lost something");
    assert_eq!(a.history_hash, b.history_hash);
    assert_eq!(a.memory_hash, b.memory_hash);
    // A copy lost late in the run arrives one RC timeout (67.1 ms) later.
    assert!(a.simulated_s > 0.067, "{}", a.simulated_s);
}

/// Over the TCP profile the transport waits its RTO (200 ms) before it
/// sends a lost copy again, and the run still passes its check.
#[test]
fn the_tcp_profile_retransmits_after_its_rto() {
    let mut config = drop_config(ProtocolKind::NoWait, WorkloadKind::SmallBank, 2, 1);
    config.profile = verbena::config::profile::NetworkProfile::resolve("tcp-10g").unwrap();
    let report = engine::run(&config)
        .unwrap_or_else(|e| panic!("{e}"))
        .report;
    assert!(
        report.check.as_ref().unwrap().passed(),
        "{}",
        report.table()
    );
    let sim = report.sim.unwrap();
    assert!(sim.lost_messages > 0, "the link lost something");
    assert!(sim.simulated_s > 0.2, "{}", sim.simulated_s);
}

/// A link that loses everything for longer than the transport's whole
/// retry budget breaks the connection. Without a failure detector nobody
/// declares the peer, the workers that needed it wait, and the run fails
/// saying so — never a silent pass.
#[test]
fn a_broken_connection_without_a_detector_fails_the_run_saying_why() {
    let mut config = drop_config(ProtocolKind::NoWait, WorkloadKind::SmallBank, 1, 1);
    config.check = false;
    config.sim.faults = vec![broken_link()];
    let error = engine::run(&config).expect_err("the run fails").to_string();
    assert!(
        error.contains("worker(s) still waited at the virtual deadline"),
        "{error}"
    );
    assert!(error.contains("--failure-detector on"), "{error}");
}

/// The same broken link with the failure detector on and two copies: the
/// unreachable node is declared and failed over like a crashed one, the
/// survivors go on, and the checker passes on the whole run.
///
/// Not yet: a coordinator past its commit point whose writes to the
/// peer are still being retransmitted when the peer is declared waits for
/// the transport to give up (a crash's losses fail at once), so it learns
/// of the failure after the recovery resumed the survivors, and its write
/// to the failed partition is skipped instead of reaching the promoted
/// copy (the checker finds a version missing there). What a node
/// outstanding to a declared peer holds must fail at the declaration.
#[test]
#[ignore = "not yet: retransmissions outstanding to a declared peer outlive the failover"]
fn a_broken_connection_with_a_detector_fails_the_peer_over() {
    let mut config = drop_config(ProtocolKind::Occ, WorkloadKind::SmallBank, 2, 1);
    config.failure_detector.enabled = Some(true);
    config.sim.faults = vec![broken_link()];
    let output = engine::run(&config).unwrap_or_else(|e| panic!("{e}"));
    let report = &output.report;
    let check = report.check.as_ref().expect("checked");
    assert!(check.passed(), "{check:?}\n{}", report.table());
    let recovery = report.recovery.as_ref().expect("a detector run");
    assert!(
        recovery
            .promoted
            .iter()
            .any(|&(partition, _)| partition == 1),
        "node 1, unreachable from node 0, is failed over: {recovery:?}"
    );
    assert_eq!(report.sim.as_ref().unwrap().stuck_workers, 0);
}
