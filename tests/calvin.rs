//! CALVIN (`engine::calvin`) as its users depend on it: the checker
//! accepts its histories on many seeds and every stage choice; runs of one
//! configuration end in the same database state whatever the fabric, the
//! primitives and the split of clients into workers and coroutines (the
//! determinism CALVIN replicates by); programs that abort do so on every
//! participant alike; workloads it cannot run are refused clearly.

use std::sync::Arc;

use verbena::base::rng::Rng;
use verbena::base::{Primitive, ProtocolKind, Stage};
use verbena::check::History;
use verbena::config::profile::NetworkProfile;
use verbena::config::{Config, FabricKind, KeyDistribution};
use verbena::engine::{self, tables_hash};
use verbena::experiments::matrix::{self, Case};
use verbena::fabric::NodeId;
use verbena::store::{NodeStore, StoreError, TableSpec};
use verbena::txn::{AbortReason, Protocol, Txn, TxnResult};
use verbena::workloads::{Declared, InvariantReport, Workload};

#[test]
fn the_checker_accepts_calvin_on_sim_seeds_and_every_stage_choice() {
    let seeds = std::env::var("VERBENA_CALVIN_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4u64);
    let cases = matrix::cases(&[ProtocolKind::Calvin], 1..=seeds);
    // Both pure forms and both mixed codes of CALVIN's two stages.
    for seed in 1..=seeds {
        let codes: Vec<u16> = cases
            .iter()
            .filter(|c| c.seed == seed)
            .map(|c| c.code)
            .collect();
        for code in [0, 128, 256, 384] {
            assert!(codes.contains(&code), "seed {seed} lacks code {code}");
        }
    }
    for case in cases {
        let outcome = matrix::run_case(case, |_| {});
        assert!(
            outcome.passed,
            "{:?}: {} — replay: {}",
            case,
            outcome.detail,
            matrix::replay_command(case)
        );
        assert_eq!(outcome.abort_rate, 0.0, "CALVIN never aborts on conflicts");
    }
}

/// A small, contended YCSB configuration with `clients = workers ×
/// coroutines` per node.
fn contended(fabric: FabricKind, workers: u32, coroutines: u32, code: u16) -> Config {
    let mut config = Config {
        fabric,
        protocol: ProtocolKind::Calvin,
        nodes: 3,
        workers,
        coroutines,
        stages: matrix::plan_of(ProtocolKind::Calvin, code),
        duration_s: 0.02,
        warmup_s: 0.004,
        seed: 11,
        check: true,
        profile: NetworkProfile::builtin("cx4-edr").expect("built in"),
        ..Config::default()
    };
    config.protocol_options.calvin_epoch_us = 1_000;
    let y = &mut config.ycsb;
    y.rows_per_node = 32;
    y.ops_per_txn = 6;
    y.write_ratio = 0.5;
    y.distribution = KeyDistribution::Zipf;
    y.theta = 0.95;
    y.compute_us = 1.0;
    y.partitions_per_txn = Some(2);
    config
}

#[test]
fn every_replica_of_one_configuration_ends_in_the_same_state() {
    // Eight lockstep clients per node (`calvin_inflight = 0`: one request
    // per coroutine per epoch), split three ways; every stage choice; the
    // deterministic simulator and real threads. CALVIN sequences the same
    // input in every run, so each must execute it to the same database.
    // (With requests in flight, an epoch holds what arrived in it, which
    // depends on timing: the input, and so the state, differ by run.)
    let mut runs = Vec::new();
    let shapes = [
        (FabricKind::Sim, 1, 8, 0),
        (FabricKind::Sim, 2, 4, 384),
        (FabricKind::Sim, 4, 2, 128),
        (FabricKind::Threads, 1, 8, 256),
        (FabricKind::Threads, 2, 4, 384),
    ];
    for (fabric, workers, coroutines, code) in shapes {
        let mut config = contended(fabric, workers, coroutines, code);
        config.protocol_options.calvin_inflight = 0;
        let output = engine::run(&config).expect("a valid configuration");
        let check = output.report.check.as_ref().expect("check on");
        assert!(
            check.passed(),
            "{fabric:?} {workers}×{coroutines} code {code}: {:?} {:?} {:?}",
            check.cycle,
            check.anomalies,
            check.invariants
        );
        if fabric == FabricKind::Sim {
            // (On a loaded machine a threads run may stretch its epochs
            // past the measured interval; its history still covers all.)
            assert!(output.report.committed > 0);
        }
        let history = output.history.expect("recorded");
        runs.push((
            format!("{fabric:?} {workers}×{coroutines} code {code}"),
            tables_hash(&output.stores),
            history_items(&history),
            output.report.committed,
        ));
    }
    let (first_name, first_tables, first_history, _) = &runs[0];
    assert!(
        first_history
            .iter()
            .filter(|(_, _, w)| !w.is_empty())
            .count()
            > 50,
        "the runs wrote"
    );
    for (name, tables, history, _) in &runs[1..] {
        assert_eq!(
            tables, first_tables,
            "{name} ended in another state than {first_name}"
        );
        assert_eq!(
            history, first_history,
            "{name} committed another history than {first_name}"
        );
    }
}

/// `VERBENA_CALVIN_SEEDS`, or `default`.
fn calvin_seeds(default: u64) -> u64 {
    std::env::var("VERBENA_CALVIN_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

#[test]
fn each_epoch_sequences_every_request_that_arrived_on_sim_seeds() {
    // Two executor coroutines per node and 40 requests in flight per
    // worker, on 32 hot rows per node, with the checker on. The lockstep
    // clients would sequence two requests per node per epoch; these
    // clients sequence whatever completed and came back during it.
    for seed in 1..=calvin_seeds(6) {
        let code = [0, 128, 256, 384][seed as usize % 4];
        let mut config = contended(FabricKind::Sim, 1, 2, code);
        config.seed = seed;
        config.nodes = 2 + (seed % 2) as u32;
        config.sim.swarm = true;
        let inflight = 40;
        config.protocol_options.calvin_inflight = inflight;
        let what = format!("seed {seed} code {code} nodes {}", config.nodes);
        let output = engine::run(&config).expect("run");
        let report = &output.report;
        let check = report.check.as_ref().expect("check on");
        assert!(
            check.passed(),
            "{what}: {:?} {:?} {:?}",
            check.cycle,
            check.anomalies,
            check.invariants
        );
        assert_eq!(report.abort_rate, 0.0, "{what}: CALVIN aborted");
        // More than the lockstep clients could: one per executor per
        // epoch that closes in the measured interval (and one more).
        let epochs = (config.duration_s * 1e6) as u64 / config.protocol_options.calvin_epoch_us;
        let executors = (config.nodes * config.workers * config.coroutines) as u64;
        let lockstep_most = executors * (epochs + 1);
        assert!(
            report.committed > 4 * lockstep_most,
            "{what}: {} committed; the lockstep clients could commit {lockstep_most}",
            report.committed
        );
        // Honest latency, from submission to completion: a closed loop
        // keeps every request in flight all the time, so throughput ×
        // mean latency is the requests in flight (Little's law) — far
        // more than if the wait for the epoch to close were left out.
        let in_flight = (config.nodes * config.workers * inflight) as f64;
        let little = report.throughput_txn_per_s * report.latency_us.mean / 1e6;
        assert!(
            (0.8..1.2).contains(&(little / in_flight)),
            "{what}: {} txn/s × {} µs = {little} in flight, not {in_flight}",
            report.throughput_txn_per_s,
            report.latency_us.mean
        );
        let sequence_us = report.stages.0[0].1;
        assert!(
            sequence_us > 0.0 && report.latency_us.mean > sequence_us,
            "{what}: latency {} µs, sequence stage {sequence_us} µs",
            report.latency_us.mean
        );
    }
}

/// The history as a sorted list of `(txn, reads, writes)`: equal for two
/// runs that committed the same transactions with the same versions.
type Items = Vec<(u32, u64, u64)>;

fn history_items(history: &History) -> Vec<(u64, Items, Items)> {
    let mut all: Vec<_> = history
        .txns
        .iter()
        .map(|txn| {
            let mut reads: Vec<_> = history
                .reads(txn)
                .iter()
                .map(|i| (i.table, i.key, i.seq))
                .collect();
            let mut writes: Vec<_> = history
                .writes(txn)
                .iter()
                .map(|i| (i.table, i.key, i.seq))
                .collect();
            reads.sort_unstable();
            writes.sort_unstable();
            (txn.id, reads, writes)
        })
        .collect();
    all.sort_unstable();
    all
}

#[test]
fn calvin_runs_on_threads_with_either_primitive_and_reports_its_own_stages() {
    for primitive in [Primitive::OneSided, Primitive::Rpc] {
        let mut config = contended(FabricKind::Threads, 1, 4, 0);
        config.primitive = primitive;
        config.stages = verbena::base::StagePlan::empty();
        config.duration_s = 0.1;
        let report = engine::run(&config).expect("run").report;
        assert!(report.check.as_ref().expect("check on").passed());
        assert_eq!(
            report.config.stages.get(Stage::TxnBroadcastInput),
            primitive
        );
        assert_eq!(report.config.stages.get(Stage::ValueForwarding), primitive);
        let names: Vec<&str> = report.stages.0.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            names,
            ["sequence", "dispatch", "lock", "read", "forward", "execute"]
        );
        // A transaction waits for its epoch to close.
        let sequence_us = report.stages.0[0].1;
        assert!(sequence_us > 0.0, "sequence {sequence_us} µs");
        let verbs = &report.verbs_per_txn;
        match primitive {
            Primitive::OneSided => assert!(verbs.rpc == 0.0 && verbs.write > 0.0),
            Primitive::Rpc => assert!(verbs.rpc > 0.0 && verbs.write == 0.0 && verbs.read == 0.0),
        }
    }
}

const ACCOUNTS_PER_NODE: u64 = 8;
const START_BALANCE: u64 = 100;

/// Transfers between accounts on any node, which abort (by the program's
/// choice) when the payer lacks the money. `declare` says how much of its
/// set a request declares.
struct Transfers {
    nodes: u64,
    declare: Declare,
}

#[derive(Clone, Copy, PartialEq)]
enum Declare {
    /// Both accounts, written.
    Both,
    /// Only the payer: the program then touches an undeclared record.
    PayerOnly,
    /// The payer twice (read, then written) and the payee: merged.
    Twice,
    /// The accounts, and a record on a node the cluster lacks.
    NoSuchNode,
    /// Nothing: the workload does not support deterministic protocols.
    Unsupported,
}

#[derive(Clone, Copy)]
struct Transfer {
    from: (NodeId, u64),
    to: (NodeId, u64),
    amount: u64,
}

impl Transfers {
    fn account(&self, rng: &mut Rng) -> (NodeId, u64) {
        let node = rng.below(self.nodes) as NodeId;
        (
            node,
            node as u64 * ACCOUNTS_PER_NODE + rng.below(ACCOUNTS_PER_NODE),
        )
    }
}

impl Workload for Transfers {
    type Request = Transfer;

    fn name(&self) -> &'static str {
        "calvin-transfers"
    }

    fn tables(&self) -> Vec<TableSpec> {
        vec![TableSpec {
            name: "accounts",
            record_words: 1,
            capacity_per_node: ACCOUNTS_PER_NODE,
        }]
    }

    fn load(&self, store: &NodeStore) -> Result<(), StoreError> {
        for row in 0..ACCOUNTS_PER_NODE {
            store.insert(
                0,
                store.node as u64 * ACCOUNTS_PER_NODE + row,
                &[START_BALANCE],
            )?;
        }
        Ok(())
    }

    fn generate(&self, rng: &mut Rng, _node: NodeId) -> Transfer {
        let from = self.account(rng);
        let mut to = self.account(rng);
        while to == from {
            to = self.account(rng);
        }
        Transfer {
            from,
            to,
            amount: 1 + rng.below(80),
        }
    }

    async fn execute<P: Protocol>(
        &self,
        txn: &mut Txn<'_, '_, P>,
        request: &Transfer,
    ) -> TxnResult<()> {
        let from = txn.update(0, request.from.0, request.from.1).await?;
        if txn.get(from)[0] < request.amount {
            return Err(txn.user_abort());
        }
        txn.get_mut(from)[0] -= request.amount;
        let to = txn.update(0, request.to.0, request.to.1).await?;
        txn.get_mut(to)[0] += request.amount;
        Ok(())
    }

    fn check_invariants(&self, stores: &[Arc<NodeStore>], _history: &History) -> InvariantReport {
        let mut total = 0;
        let mut record = Vec::new();
        for store in stores {
            for slot in 0..store.rows(0) {
                store.record(0, slot, &mut record);
                total += record[0];
            }
        }
        let expected = START_BALANCE * ACCOUNTS_PER_NODE * self.nodes;
        InvariantReport {
            ok: total == expected,
            details: vec![format!("total balance {total}, expected {expected}")],
        }
    }

    fn max_request_words(&self) -> usize {
        match self.declare {
            Declare::Unsupported => 0,
            _ => 5,
        }
    }

    fn max_accesses(&self) -> usize {
        3
    }

    fn encode_request(&self, request: &Transfer, out: &mut Vec<u64>) {
        out.extend_from_slice(&[
            request.from.0 as u64,
            request.from.1,
            request.to.0 as u64,
            request.to.1,
            request.amount,
        ]);
    }

    fn decode_request(&self, words: &[u64]) -> Option<Transfer> {
        match words {
            &[from_node, from, to_node, to, amount] => Some(Transfer {
                from: (from_node as NodeId, from),
                to: (to_node as NodeId, to),
                amount,
            }),
            _ => None,
        }
    }

    fn declare_accesses(&self, request: &Transfer, out: &mut Vec<Declared>) -> bool {
        let account = |(node, key): (NodeId, u64)| Declared {
            table: 0,
            node,
            key,
            write: true,
        };
        match self.declare {
            Declare::Both => out.extend([account(request.from), account(request.to)]),
            Declare::PayerOnly => out.push(account(request.from)),
            Declare::Twice => out.extend([
                Declared {
                    write: false,
                    ..account(request.from)
                },
                account(request.to),
                account(request.from),
            ]),
            Declare::NoSuchNode => out.extend([
                account(request.from),
                account(request.to),
                account((self.nodes as NodeId + 1, 0)),
            ]),
            Declare::Unsupported => return false,
        }
        true
    }
}

fn transfers_config(fabric: FabricKind, primitive: Primitive) -> Config {
    let mut config = Config {
        fabric,
        protocol: ProtocolKind::Calvin,
        primitive,
        nodes: 3,
        coroutines: 6,
        duration_s: if fabric == FabricKind::Sim {
            0.02
        } else {
            0.15
        },
        warmup_s: 0.0,
        check: true,
        ..Config::default()
    };
    config.protocol_options.calvin_epoch_us = 1_000;
    config
}

#[test]
fn transfers_conserve_money_and_abort_alike_on_every_participant() {
    for fabric in [FabricKind::Sim, FabricKind::Threads] {
        for primitive in [Primitive::OneSided, Primitive::Rpc] {
            let workload = Transfers {
                nodes: 3,
                declare: Declare::Both,
            };
            let config = transfers_config(fabric, primitive);
            let report = engine::run_custom(&config, &workload).expect("run").report;
            let check = report.check.as_ref().expect("check on");
            assert!(
                check.passed(),
                "{fabric:?} {}: {:?} {:?} {:?}",
                primitive.name(),
                check.cycle,
                check.anomalies,
                check.invariants
            );
            // On threads the count depends on the host's load; on sim it
            // is exact.
            let least = if fabric == FabricKind::Sim { 50 } else { 1 };
            assert!(report.committed >= least, "{} committed", report.committed);
            // Eight accounts of 100 per node and payments up to 80: some
            // payers run dry, and their transfers give up everywhere.
            let user = report
                .aborts
                .0
                .iter()
                .find(|(n, _)| *n == "user")
                .unwrap()
                .1;
            assert!(
                user > 0,
                "{fabric:?} {}: no payer ran dry",
                primitive.name()
            );
            assert_eq!(report.user_aborted, user);
        }
    }
}

#[test]
fn a_program_leaving_its_declared_set_aborts_without_writing() {
    let workload = Transfers {
        nodes: 3,
        declare: Declare::PayerOnly,
    };
    let config = transfers_config(FabricKind::Sim, Primitive::OneSided);
    let output = engine::run_custom(&config, &workload).expect("run");
    let report = &output.report;
    let check = report.check.as_ref().expect("check on");
    assert!(check.passed(), "{:?}", check.invariants);
    let undeclared = report
        .aborts
        .0
        .iter()
        .find(|(n, _)| *n == AbortReason::Undeclared.name())
        .unwrap()
        .1;
    assert!(undeclared > 0, "the program touched undeclared records");
    assert_eq!(report.committed, 0, "only the payer could be declared");
    let history = output.history.expect("recorded");
    assert!(history.txns.iter().all(|t| history.writes(t).is_empty()));
}

#[test]
fn workloads_without_deterministic_support_are_refused_by_name() {
    let workload = Transfers {
        nodes: 3,
        declare: Declare::Unsupported,
    };
    let config = transfers_config(FabricKind::Sim, Primitive::Rpc);
    let error = match engine::run_custom(&config, &workload) {
        Ok(_) => panic!("calvin ran a workload without declared sets"),
        Err(error) => error.to_string(),
    };
    assert!(
        error.contains("calvin") && error.contains("calvin-transfers"),
        "{error}"
    );
    // The same workload runs under the other protocols.
    let mut other = config.clone();
    other.protocol = ProtocolKind::NoWait;
    let report = engine::run_custom(&other, &workload).expect("run").report;
    assert!(report.check.expect("check on").passed());
}

#[test]
fn matrix_cases_give_calvin_a_few_dozen_epochs() {
    let config = matrix::case_config(Case {
        protocol: ProtocolKind::Calvin,
        seed: 5,
        code: 0,
        workload: verbena::config::WorkloadKind::Ycsb,
        failure: matrix::Failure::None,
    });
    let epochs = config.duration_s * 1e6 / config.protocol_options.calvin_epoch_us as f64;
    assert!((20.0..=30.0).contains(&epochs), "{epochs} epochs");
}

#[test]
fn epochs_shorter_than_their_transactions_still_end_the_run() {
    // 1 µs epochs. Lockstep: every epoch waits for the last one's
    // transactions, so far fewer than the 24,000 numbered epochs fit; the
    // sequencers stop ordering at the latest 1 s past the end, and every
    // node drains. In flight: epochs go out as the request buffers' ring
    // lets them, mostly empty.
    for inflight in [0, 100] {
        let mut config = contended(FabricKind::Threads, 1, 4, 384);
        config.protocol_options.calvin_epoch_us = 1;
        config.protocol_options.calvin_inflight = inflight;
        let started = std::time::Instant::now();
        let output = engine::run(&config).expect("run");
        let elapsed = started.elapsed().as_secs_f64();
        assert!(
            elapsed < 10.0,
            "inflight {inflight}: the run took {elapsed} s"
        );
        let check = output.report.check.as_ref().expect("check on");
        assert!(
            check.passed(),
            "inflight {inflight}: {:?}",
            check.invariants
        );
        assert!(!output.history.expect("recorded").is_empty());
    }
}

#[test]
fn a_run_shorter_than_an_epoch_says_why_it_committed_nothing() {
    // The presets' 5 ms of virtual time against the 5 ms default epoch.
    let mut config = contended(FabricKind::Sim, 1, 2, 0);
    config.duration_s = 0.004;
    config.warmup_s = 0.001;
    config.protocol_options.calvin_epoch_us = 5_000;
    let report = engine::run(&config).expect("run").report;
    assert_eq!(report.committed, 0);
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("first epoch closes 5000 µs") && n.contains("--calvin-epoch-us")),
        "{:?}",
        report.notes
    );
    assert!(report.table().contains("note: calvin committed nothing"));
    config.protocol_options.calvin_epoch_us = 200;
    let report = engine::run(&config).expect("run").report;
    assert!(
        report.committed > 0 && report.notes.is_empty(),
        "{:?}",
        report.notes
    );
}

fn verbena(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_verbena"))
        .args(args)
        .output()
        .expect("the verbena binary runs")
}

#[test]
fn the_command_line_runs_calvin_and_refuses_bad_epochs() {
    for primitive in ["onesided", "rpc"] {
        let output = verbena(&[
            "run",
            "--protocol",
            "calvin",
            "--primitive",
            primitive,
            "--fabric",
            "sim",
            "--duration",
            "0.005",
            "--warmup",
            "0.001",
            "--calvin-epoch-us",
            "500",
            "--calvin-inflight",
            "7",
            "--check",
            "--json",
            "-",
        ]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report["check"]["serializable"], true);
        assert_eq!(report["check"]["invariants_ok"], true);
        assert_eq!(report["config"]["protocol_options"]["calvin_epoch_us"], 500);
        assert_eq!(report["config"]["protocol_options"]["calvin_inflight"], 7);
        assert_eq!(report["config"]["stages"]["txn_broadcast_input"], primitive);
        assert_eq!(report["config"]["stages"]["value_forwarding"], primitive);
        assert!(report["stages"]["forward"].is_number());
    }
    // Hybrid code 128: dispatch one-sided, forwarding by RPC.
    let output = verbena(&[
        "run",
        "--protocol",
        "calvin",
        "--hybrid",
        "128",
        "--fabric",
        "sim",
        "--duration",
        "0.003",
        "--warmup",
        "0",
        "--calvin-epoch-us",
        "300",
        "--json",
        "-",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        report["config"]["stages"]["txn_broadcast_input"],
        "onesided"
    );
    assert_eq!(report["config"]["stages"]["value_forwarding"], "rpc");
    for (args, expected) in [
        (
            &["run", "--protocol", "calvin", "--calvin-epoch-us", "0"][..],
            "protocol_options.calvin_epoch_us = 0 is out of range; allowed: 1..=1000000",
        ),
        (
            &["run", "--protocol", "calvin", "--calvin-inflight", "10001"][..],
            "protocol_options.calvin_inflight = 10001 is out of range; allowed: 0..=10000",
        ),
        (
            &["run", "--protocol", "calvin", "--calvin-inflight", "-1"][..],
            "--calvin-inflight",
        ),
        (
            &["run", "--protocol", "calvin", "--calvin-epoch-us", "five"][..],
            "--calvin-epoch-us `five` is not a whole number",
        ),
        (
            &["run", "--protocol", "calvin", "--stages", "lock=rpc"][..],
            "its stages are txn_broadcast_input, value_forwarding",
        ),
    ] {
        let output = verbena(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn records_declared_twice_merge_and_impossible_sets_are_given_up() {
    let twice = Transfers {
        nodes: 3,
        declare: Declare::Twice,
    };
    let config = transfers_config(FabricKind::Sim, Primitive::Rpc);
    let report = engine::run_custom(&config, &twice).expect("run").report;
    let check = report.check.as_ref().expect("check on");
    assert!(
        check.passed(),
        "{:?} {:?}",
        check.anomalies,
        check.invariants
    );
    assert!(report.committed > 50);

    let impossible = Transfers {
        nodes: 3,
        declare: Declare::NoSuchNode,
    };
    let report = engine::run_custom(&config, &impossible)
        .expect("run")
        .report;
    assert!(report.check.as_ref().expect("check on").passed());
    assert_eq!(report.committed, 0);
    assert!(report.user_aborted > 0, "every request is given up");
}

const POINTERS_PER_NODE: u64 = 4;

/// Payments through pointers: a `Pay` reads a pointer record to find the
/// account it pays from, so its read/write set depends on data and CALVIN
/// must reconnoitre it; a `Repoint` moves a pointer to another account,
/// which makes reconnaissance runs go stale.
struct Pointers {
    nodes: u64,
}

#[derive(Clone, Copy)]
enum PointerOp {
    Pay {
        pointer: (NodeId, u64),
        to: (NodeId, u64),
        amount: u64,
    },
    Repoint {
        pointer: (NodeId, u64),
        target: (NodeId, u64),
    },
}

fn pack(account: (NodeId, u64)) -> u64 {
    ((account.0 as u64) << 32) | account.1
}

fn unpack(word: u64) -> (NodeId, u64) {
    ((word >> 32) as NodeId, word & 0xffff_ffff)
}

impl Pointers {
    fn account(&self, rng: &mut Rng) -> (NodeId, u64) {
        let node = rng.below(self.nodes) as NodeId;
        (
            node,
            node as u64 * ACCOUNTS_PER_NODE + rng.below(ACCOUNTS_PER_NODE),
        )
    }

    fn pointer(&self, rng: &mut Rng) -> (NodeId, u64) {
        let node = rng.below(self.nodes) as NodeId;
        (
            node,
            node as u64 * POINTERS_PER_NODE + rng.below(POINTERS_PER_NODE),
        )
    }
}

impl Workload for Pointers {
    type Request = PointerOp;

    fn name(&self) -> &'static str {
        "calvin-pointers"
    }

    fn tables(&self) -> Vec<TableSpec> {
        vec![
            TableSpec {
                name: "accounts",
                record_words: 1,
                capacity_per_node: ACCOUNTS_PER_NODE,
            },
            TableSpec {
                name: "pointers",
                record_words: 1,
                capacity_per_node: POINTERS_PER_NODE,
            },
        ]
    }

    fn load(&self, store: &NodeStore) -> Result<(), StoreError> {
        let node = store.node as u64;
        for row in 0..ACCOUNTS_PER_NODE {
            store.insert(0, node * ACCOUNTS_PER_NODE + row, &[START_BALANCE])?;
        }
        for row in 0..POINTERS_PER_NODE {
            let target_node = (node + row) % self.nodes;
            let target = (target_node as NodeId, target_node * ACCOUNTS_PER_NODE + row);
            store.insert(1, node * POINTERS_PER_NODE + row, &[pack(target)])?;
        }
        Ok(())
    }

    fn generate(&self, rng: &mut Rng, _node: NodeId) -> PointerOp {
        let pointer = self.pointer(rng);
        if rng.below(10) < 3 {
            PointerOp::Repoint {
                pointer,
                target: self.account(rng),
            }
        } else {
            PointerOp::Pay {
                pointer,
                to: self.account(rng),
                amount: 1 + rng.below(40),
            }
        }
    }

    async fn execute<P: Protocol>(
        &self,
        txn: &mut Txn<'_, '_, P>,
        request: &PointerOp,
    ) -> TxnResult<()> {
        match *request {
            PointerOp::Pay {
                pointer,
                to,
                amount,
            } => {
                let pointer = txn.read(1, pointer.0, pointer.1).await?;
                let from = unpack(txn.get(pointer)[0]);
                if from == to {
                    return Ok(());
                }
                let payer = txn.update(0, from.0, from.1).await?;
                if txn.get(payer)[0] < amount {
                    return Err(txn.user_abort());
                }
                txn.get_mut(payer)[0] -= amount;
                let payee = txn.update(0, to.0, to.1).await?;
                txn.get_mut(payee)[0] += amount;
            }
            PointerOp::Repoint { pointer, target } => {
                let pointer = txn.update(1, pointer.0, pointer.1).await?;
                txn.get_mut(pointer)[0] = pack(target);
            }
        }
        Ok(())
    }

    fn check_invariants(&self, stores: &[Arc<NodeStore>], _history: &History) -> InvariantReport {
        let mut total = 0;
        let mut record = Vec::new();
        for store in stores {
            for slot in 0..store.rows(0) {
                store.record(0, slot, &mut record);
                total += record[0];
            }
        }
        let expected = START_BALANCE * ACCOUNTS_PER_NODE * self.nodes;
        InvariantReport {
            ok: total == expected,
            details: vec![format!("total balance {total}, expected {expected}")],
        }
    }

    fn max_request_words(&self) -> usize {
        6
    }

    fn max_accesses(&self) -> usize {
        3
    }

    fn encode_request(&self, request: &PointerOp, out: &mut Vec<u64>) {
        match *request {
            PointerOp::Pay {
                pointer,
                to,
                amount,
            } => out.extend_from_slice(&[0, pack(pointer), pack(to), amount]),
            PointerOp::Repoint { pointer, target } => {
                out.extend_from_slice(&[1, pack(pointer), pack(target)])
            }
        }
    }

    fn decode_request(&self, words: &[u64]) -> Option<PointerOp> {
        match *words {
            [0, pointer, to, amount] => Some(PointerOp::Pay {
                pointer: unpack(pointer),
                to: unpack(to),
                amount,
            }),
            [1, pointer, target] => Some(PointerOp::Repoint {
                pointer: unpack(pointer),
                target: unpack(target),
            }),
            _ => None,
        }
    }

    fn declare_accesses(&self, request: &PointerOp, out: &mut Vec<Declared>) -> bool {
        match *request {
            // Which account pays depends on the pointer's value.
            PointerOp::Pay { .. } => false,
            PointerOp::Repoint { pointer, .. } => {
                out.push(Declared {
                    table: 1,
                    node: pointer.0,
                    key: pointer.1,
                    write: true,
                });
                true
            }
        }
    }
}

#[test]
fn data_dependent_sets_are_reconnoitred_and_restarted_when_stale() {
    for fabric in [FabricKind::Sim, FabricKind::Threads] {
        for primitive in [Primitive::OneSided, Primitive::Rpc] {
            let workload = Pointers { nodes: 3 };
            let config = transfers_config(fabric, primitive);
            let output = engine::run_custom(&config, &workload).expect("run");
            let report = &output.report;
            let check = report.check.as_ref().expect("check on");
            assert!(
                check.passed(),
                "{fabric:?} {}: {:?} {:?} {:?}",
                primitive.name(),
                check.cycle,
                check.anomalies,
                check.invariants
            );
            // On threads the count depends on the host's load; on sim it
            // is exact.
            let least = if fabric == FabricKind::Sim { 50 } else { 1 };
            assert!(report.committed >= least, "{} committed", report.committed);
            let restarts = report
                .aborts
                .0
                .iter()
                .find(|(n, _)| *n == AbortReason::Undeclared.name())
                .unwrap()
                .1;
            if fabric == FabricKind::Sim {
                assert!(
                    restarts > 0,
                    "{}: no stale reconnaissance",
                    primitive.name()
                );
            }
            // Restarts are retried, not given up: only payers running dry are.
            let user = report
                .aborts
                .0
                .iter()
                .find(|(n, _)| *n == "user")
                .unwrap()
                .1;
            assert_eq!(report.user_aborted, user);
            // Committed payments read a pointer, then wrote two accounts.
            let history = output.history.expect("recorded");
            assert!(history
                .txns
                .iter()
                .any(|t| history.reads(t).iter().any(|i| i.table == 1)
                    && history.writes(t).iter().filter(|i| i.table == 0).count() == 2));
        }
    }
}
