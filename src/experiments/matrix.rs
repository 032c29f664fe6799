//! The seeded correctness matrix: every implemented protocol × every stage
//! plan that matters × YCSB under high contention × many seeds, on the
//! `sim` fabric, with the serializability checker and the invariants on.
//!
//! A case is `(workload, protocol, seed, hybrid code, failure)`. The seed
//! alone draws the cluster shape, contention, record size, network profile
//! and location cache (so every protocol and plan of one seed meets the
//! same workload); the swarm and jitter of the `sim` fabric draw its
//! timing from the seed too. Because `sim` is deterministic, a case is replayed exactly by
//! [`replay_command`], which a failure prints.
//!
//! Workloads: YCSB by default; SmallBank, PPS and TPC-E customer-position
//! with `verbena check --workload W[,W…]|all` ([`cases_of`]). A case's
//! workload is part of the case; the seed draws the cluster exactly as for
//! YCSB, then the workload's own small, contended scale from a stream of
//! its own (so adding workloads changed no YCSB case): a few dozen
//! customers, products or securities per node, every transaction type on,
//! writers always present (TPC-E's market feed next to its read-only
//! customer-position).
//!
//! Plans per protocol and seed ([`codes`]): all one-sided, all RPC, each
//! single stage flipped from either, and two random full codes (RCC §5.1's
//! hybrid codes). Contention: YCSB with θ ≥ 0.9 Zipf or ≥ 90 % of accesses
//! to a hot area of a few rows, half the operations or more are writes.
//!
//! Failover cases (`verbena check --failover`, [`failover_cases`]): the
//! same draws on three or four nodes with 2 or 3 copies per partition, and
//! one node crashed, or paused past the failure detector's timeout, at a
//! time drawn from the seed; both pure plans only. The checker then also
//! compares every surviving backup with the copy serving its partition.
//! Their hashes pin the recovery path (`tests/hashes/failover.txt`).
//!
//! A protocol written outside verbena runs the same cases: its kind
//! (`ProtocolKind::custom`) makes the cases ([`cases_of`]) and the plans
//! from its own stage list, and [`run_case_with`] runs a case with its
//! code (`docs/WRITING_A_PROTOCOL.md`).

use crate::base::rng::Rng;
use crate::base::{Primitive, ProtocolKind, Stage, StagePlan};
use crate::config::profile::NetworkProfile;
use crate::config::{Config, KeyDistribution, TpccMix, WorkloadKind};
use crate::engine::{self, RunError, RunOutput};
use crate::txn::Protocol;

/// One cell of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Case {
    pub protocol: ProtocolKind,
    pub seed: u64,
    /// RCC hybrid code over the protocol's stages (bit set = one-sided).
    pub code: u16,
    pub workload: WorkloadKind,
    /// The fault the case injects ([`Failure::None`]: the plain matrix).
    pub failure: Failure,
}

/// What a failover case breaks, with its replication factor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    None,
    /// A node stops for good.
    Crash {
        replication: u32,
    },
    /// A node's CPUs stop for three detector timeouts: it is declared dead,
    /// failed over, and finds itself fenced when it wakes.
    Pause {
        replication: u32,
    },
}

impl Failure {
    /// The failover variants, in the order a matrix runs them.
    pub const FAILOVER: [Failure; 4] = [
        Failure::Crash { replication: 2 },
        Failure::Crash { replication: 3 },
        Failure::Pause { replication: 2 },
        Failure::Pause { replication: 3 },
    ];

    /// `crash-r2`, `pause-r3`, …; empty for [`Failure::None`].
    pub fn name(self) -> String {
        match self {
            Failure::None => String::new(),
            Failure::Crash { replication } => format!("crash-r{replication}"),
            Failure::Pause { replication } => format!("pause-r{replication}"),
        }
    }

    /// Parses [`Failure::name`]'s form.
    pub fn parse(text: &str) -> Option<Failure> {
        Failure::FAILOVER
            .into_iter()
            .find(|failure| failure.name() == text.trim())
    }
}

/// The hybrid codes the matrix runs for `protocol` on `seed`: both pure
/// forms, every single-stage flip from each, and two random codes.
pub fn codes(protocol: ProtocolKind, seed: u64) -> Vec<u16> {
    let present = protocol.stage_bits();
    let mut codes = vec![present, 0];
    for stage in protocol.stages() {
        codes.push(present & !stage.bit());
        codes.push(stage.bit());
    }
    let mut rng = Rng::derive(seed, &[0xc0de, protocol.ordinal()]);
    for _ in 0..2 {
        codes.push(rng.next_u64() as u16 & present);
    }
    let mut unique = Vec::with_capacity(codes.len());
    for code in codes {
        if !unique.contains(&code) {
            unique.push(code);
        }
    }
    unique
}

/// The stage plan of `code` for `protocol`.
pub fn plan_of(protocol: ProtocolKind, code: u16) -> StagePlan {
    protocol
        .stages()
        .iter()
        .fold(StagePlan::empty(), |plan, &stage: &Stage| {
            let primitive = if code & stage.bit() != 0 {
                Primitive::OneSided
            } else {
                Primitive::Rpc
            };
            plan.with(stage, primitive)
        })
}

/// The configuration of `case`: drawn from its seed, high contention,
/// `sim` with swarm timing, checker on.
pub fn case_config(case: Case) -> Config {
    let mut config = contended_config(case);
    apply_failure(&mut config, case.failure);
    config
}

/// The fault of a failover case, drawn from its seed on a stream of its
/// own (so the plain matrix's draws stay as they are): at least as many
/// nodes as copies plus one, the node that fails, and when.
fn apply_failure(config: &mut Config, failure: Failure) {
    let (replication, pause) = match failure {
        Failure::None => return,
        Failure::Crash { replication } => (replication, false),
        Failure::Pause { replication } => (replication, true),
    };
    let mut rng = Rng::derive(config.seed, &[0xfa11, replication as u64, pause as u64]);
    config.nodes = config.nodes.max(replication + 1);
    config.replication = replication;
    let node = rng.below(config.nodes as u64) as u32;
    let at_s = config.warmup_s + config.duration_s * (0.1 + 0.4 * rng.unit());
    let detector =
        crate::config::faults::DetectorSettings::defaults(config.fabric, &config.profile);
    config.faults = vec![if pause {
        let for_s = 3.0 * detector.timeout_ns as f64 / 1e9;
        crate::config::faults::RunFault::Pause { node, at_s, for_s }
    } else {
        crate::config::faults::RunFault::Crash { node, at_s }
    }];
    // Room after the failure for the detection, the recovery and the
    // survivors' commits.
    config.duration_s += 20.0 * detector.timeout_ns as f64 / 1e9;
}

/// The plain matrix's configuration of `case` (no fault).
fn contended_config(case: Case) -> Config {
    let mut rng = Rng::derive(case.seed, &[0x3a7e1c]);
    let nodes = 2 + rng.below(3) as u32;
    let profile_name = ["none", "cx4-edr", "cx3", "roce", "tcp-10g"][rng.below(5) as usize];
    let profile = NetworkProfile::builtin(profile_name).expect("a built-in profile");
    // Long enough for a few thousand round trips of the slowest verb.
    let slowest_ns = profile.rpc_rtt_ns.max(profile.atomic_rtt_ns).max(2_000);
    let duration_s = (3_000 * slowest_ns) as f64 / 1e9;
    let mut config = Config {
        fabric: crate::config::FabricKind::Sim,
        protocol: case.protocol,
        nodes,
        workers: 1 + rng.below(2) as u32,
        coroutines: 2 + rng.below(7) as u32,
        primitive: Primitive::Rpc,
        stages: plan_of(case.protocol, case.code),
        duration_s,
        warmup_s: duration_s / 10.0,
        seed: case.seed,
        check: true,
        profile,
        location_cache_entries: [0, 64, 4096][rng.below(3) as usize],
        ..Config::default()
    };
    // CALVIN: a few dozen epochs per case (its 5 ms default would be one).
    config.protocol_options.calvin_epoch_us = ((duration_s * 1e6) as u64 / 24).max(1);
    if case.protocol == ProtocolKind::Calvin {
        // Its clients: the default requests in flight (each epoch
        // sequences all that arrived), a few, or the lockstep clients —
        // from a stream of their own, so every other draw stays the same.
        let mut clients = Rng::derive(case.seed, &[0x3a7e1c, 0xca1]);
        config.protocol_options.calvin_inflight = match clients.below(3) {
            0 => crate::config::DEFAULT_CALVIN_INFLIGHT,
            1 => 1 + clients.below(8) as u32,
            _ => 0,
        };
    }
    config.sim.swarm = true;
    config.sim.jitter = [0.0, 0.1, 0.5, 1.0][rng.below(4) as usize];
    let y = &mut config.ycsb;
    y.rows_per_node = [16, 64, 256][rng.below(3) as usize];
    y.ops_per_txn = 2 + rng.below(7) as u32;
    y.write_ratio = [0.5, 0.8, 1.0][rng.below(3) as usize];
    if rng.below(2) == 0 {
        y.distribution = KeyDistribution::Zipf;
        y.theta = 0.9 + 0.09 * rng.unit();
    } else {
        y.distribution = KeyDistribution::Hot;
        y.hot_fraction = 0.05;
        y.hot_probability = 0.9 + 0.1 * rng.unit();
    }
    y.compute_us = rng.below(3) as f64;
    y.record_bytes = 8 * (1 + rng.below(12) as u32);
    y.partitions_per_txn = Some(1 + rng.below(nodes.min(y.ops_per_txn) as u64) as u32);
    apply_workload(&mut config, case.workload);
    config
}

/// Turns a case's config (drawn by [`case_config`]) into one of `workload`
/// at small scale, keeping the cluster shape, timing and plan the seed drew
/// and drawing the workload's own knobs from the same seed: the matrix
/// covers each workload.
///
/// TPC-C: one or two warehouses per node (so district and warehouse rows
/// are hot), 100 items, 30 customers per district, remote items and
/// customers far above the specification's rates so that most transactions
/// cross nodes, and either the standard mix or DrTM+H's always-distributed
/// NewOrder. SmallBank, PPS, TPC-E: a few dozen customers, products or
/// securities per node, every transaction type on with a random weight,
/// writers always present (TPC-E's market feed next to its read-only
/// customer-position).
pub fn apply_workload(config: &mut Config, workload: WorkloadKind) {
    let mut rng = Rng::derive(config.seed, &[0x3a7e1c, workload as u64]);
    let weight = |rng: &mut Rng| 1 + rng.below(4) as u32;
    config.workload = workload;
    match workload {
        WorkloadKind::Ycsb => {}
        WorkloadKind::Tpcc => {
            let t = &mut config.tpcc;
            t.warehouses_per_node = 1 + rng.below(2) as u32;
            t.items = 100;
            t.customers_per_district = 30;
            t.insert_headroom_per_district = 300;
            t.remote_item_probability = [0.01, 0.2, 0.5][rng.below(3) as usize];
            t.payment_remote_probability = [0.15, 0.5][rng.below(2) as usize];
            if config.nodes > 1 && rng.below(4) == 0 {
                t.mix = TpccMix::NEW_ORDER_ONLY;
                t.new_order_always_distributed = true;
            } else {
                t.mix = TpccMix::STANDARD;
                t.new_order_always_distributed = false;
            }
            // The transactions are long: a shorter run keeps a case quick.
            config.duration_s /= 2.0;
            config.warmup_s /= 2.0;
        }
        WorkloadKind::SmallBank => {
            let sb = &mut config.smallbank;
            sb.accounts_per_worker = [4, 16, 64][rng.below(3) as usize];
            sb.hot_account_fraction = 0.1;
            sb.hot_account_probability = 0.5 + 0.5 * rng.unit();
            sb.distributed_probability = [0.2, 0.5, 1.0][rng.below(3) as usize];
            sb.max_amount = [100, 15_000][rng.below(2) as usize];
            sb.lookup_accounts = rng.below(2) == 0;
            let weights: Vec<u32> = (0..6).map(|_| weight(&mut rng)).collect();
            sb.mix = crate::workloads::smallbank::SmallBankMix::from_weights(&weights);
        }
        WorkloadKind::Pps => {
            let pps = &mut config.pps;
            pps.products_per_node = 4 + rng.below(29);
            pps.parts_per_node = 4 + rng.below(13);
            pps.suppliers_per_node = 2 + rng.below(7);
            pps.parts_per_product = 1 + rng.below(6) as u32;
            pps.parts_per_supplier = 1 + rng.below(4) as u32;
            pps.local_part_probability = [0.0, 0.5][rng.below(2) as usize];
            pps.initial_stock = [60, 1_000_000][rng.below(2) as usize];
            let weights: Vec<u32> = (0..4).map(|_| weight(&mut rng)).collect();
            pps.mix = crate::workloads::pps::PpsMix::from_weights(&weights);
        }
        WorkloadKind::TpceCp => {
            let tpce = &mut config.tpce;
            tpce.customers_per_node = 4 + rng.below(29);
            tpce.max_accounts_per_customer = 1 + rng.below(4) as u32;
            tpce.holdings_per_account = 1 + rng.below(3) as u32;
            tpce.securities_per_node = 4 + rng.below(13);
            tpce.feed_size = 1 + rng.below(4) as u32;
            let weights = [weight(&mut rng), weight(&mut rng)];
            tpce.mix = crate::workloads::tpce::TpceMix::from_weights(&weights);
        }
    }
}

/// The command that replays `case` as a case of `workload`.
pub fn replay_command_for(case: Case, workload: WorkloadKind) -> String {
    replay_command(Case { workload, ..case })
}

/// `prefix` and the failure's name, or nothing for a case without one.
fn failure_suffix(failure: Failure, prefix: &str) -> String {
    match failure {
        Failure::None => String::new(),
        failure => format!("{prefix}{}", failure.name()),
    }
}

/// The command that replays `case` exactly (for a custom protocol, the
/// call: the `verbena` binary does not link its code).
pub fn replay_command(case: Case) -> String {
    if let ProtocolKind::Custom(custom) = case.protocol {
        return format!(
            "experiments::matrix::run_case_with(Case {{ protocol: {}, seed: {}, code: {}, workload: {}, failure: {:?} }}, &protocol, |_| {{}})",
            custom.name,
            case.seed,
            case.code,
            case.workload.name(),
            case.failure
        );
    }
    let workload = match case.workload {
        WorkloadKind::Ycsb => String::new(),
        other => format!(" --workload {}", other.name()),
    };
    let failure = failure_suffix(case.failure, " --failover ");
    format!(
        "verbena check --protocol {} --seed {} --seeds 1 --hybrid {}{workload}{failure}",
        case.protocol.name(),
        case.seed,
        case.code
    )
}

/// What one case found.
#[derive(Clone, Debug)]
pub struct CaseOutcome {
    pub case: Case,
    pub passed: bool,
    pub committed: u64,
    pub abort_rate: f64,
    /// Why it failed (empty when it passed).
    pub detail: String,
    pub history_hash: String,
    /// FNV-1a of every node's memory at the end of the run.
    pub memory_hash: String,
    /// The run's report table (for a failure's context).
    pub report_table: String,
}

/// Runs `case`, after `adjust` may change its config (tests use it to
/// break a protocol on purpose).
pub fn run_case(case: Case, adjust: impl FnOnce(&mut Config)) -> CaseOutcome {
    judge_case(case, adjust, engine::run)
}

/// [`run_case`] with `protocol`, whose kind is the case's: how a protocol
/// written outside verbena runs the matrix (`engine::run_custom_protocol`).
pub fn run_case_with<P: Protocol>(
    case: Case,
    protocol: &P,
    adjust: impl FnOnce(&mut Config),
) -> CaseOutcome {
    assert_eq!(case.protocol, P::KIND, "a case of another protocol");
    judge_case(case, adjust, |config| {
        engine::run_custom_protocol(config, protocol)
    })
}

/// Runs `case`'s config (after `adjust`) with `run` and says what the
/// checker, the invariants and the simulator found.
fn judge_case(
    case: Case,
    adjust: impl FnOnce(&mut Config),
    run: impl FnOnce(&Config) -> Result<RunOutput, RunError>,
) -> CaseOutcome {
    let mut config = case_config(case);
    adjust(&mut config);
    let report = match run(&config) {
        Ok(output) => output.report,
        Err(error) => {
            return CaseOutcome {
                case,
                passed: false,
                committed: 0,
                abort_rate: 0.0,
                detail: format!("the run failed: {error}"),
                history_hash: String::new(),
                memory_hash: String::new(),
                report_table: String::new(),
            }
        }
    };
    let check = report.check.as_ref().expect("matrix cases check");
    let sim = report.sim.as_ref().expect("matrix cases run on sim");
    let mut problems = Vec::new();
    if !check.serializable {
        problems.push(format!(
            "not serializable: cycle {:?}, anomalies {:?}",
            check.cycle, check.anomalies
        ));
    }
    if !check.invariants_ok {
        problems.push(format!("invariants violated: {:?}", check.invariants));
    }
    if report.committed == 0 {
        problems.push("nothing committed in the measured interval".into());
    }
    if sim.stuck_workers > 0 {
        problems.push(format!(
            "{} worker(s) still waiting at the virtual deadline (a lost wake-up or a deadlock)",
            sim.stuck_workers
        ));
    }
    CaseOutcome {
        case,
        passed: problems.is_empty(),
        committed: report.committed,
        abort_rate: report.abort_rate,
        detail: problems.join("; "),
        history_hash: sim.history_hash.clone(),
        memory_hash: sim.memory_hash.clone(),
        report_table: report.table(),
    }
}

/// Every YCSB case of `protocols` × `seeds` × [`codes`].
pub fn cases(protocols: &[ProtocolKind], seeds: impl IntoIterator<Item = u64>) -> Vec<Case> {
    cases_of(&[WorkloadKind::Ycsb], protocols, seeds)
}

/// Every case of `workloads` × `protocols` × `seeds` × [`codes`].
pub fn cases_of(
    workloads: &[WorkloadKind],
    protocols: &[ProtocolKind],
    seeds: impl IntoIterator<Item = u64>,
) -> Vec<Case> {
    cases_where(workloads, protocols, seeds, &[Failure::None], codes)
}

/// Every failover case of `workloads` × `protocols` × `seeds` ×
/// `failures`, on both pure plans (CALVIN: crashes only).
pub fn failover_cases(
    workloads: &[WorkloadKind],
    protocols: &[ProtocolKind],
    seeds: impl IntoIterator<Item = u64>,
    failures: &[Failure],
) -> Vec<Case> {
    let pure_plans = |protocol: ProtocolKind, _seed| vec![protocol.stage_bits(), 0];
    cases_where(workloads, protocols, seeds, failures, pure_plans)
}

/// The cases of every (seed, workload, protocol, failure), in that order,
/// on the plans `plans` gives for (protocol, seed). A pause is left out
/// for CALVIN, whose failover resolves crashes only (a pause would be
/// failed over as one, which its run refuses).
pub fn cases_where(
    workloads: &[WorkloadKind],
    protocols: &[ProtocolKind],
    seeds: impl IntoIterator<Item = u64>,
    failures: &[Failure],
    plans: impl Fn(ProtocolKind, u64) -> Vec<u16>,
) -> Vec<Case> {
    let mut all = Vec::new();
    for seed in seeds {
        for &workload in workloads {
            for &protocol in protocols {
                for &failure in failures {
                    let pause = matches!(failure, Failure::Pause { .. });
                    if pause && protocol == ProtocolKind::Calvin {
                        continue;
                    }
                    all.extend(plans(protocol, seed).into_iter().map(|code| Case {
                        protocol,
                        seed,
                        code,
                        workload,
                        failure,
                    }));
                }
            }
        }
    }
    all
}

/// One line of a recorded hash file: the case's identity, then its two
/// hashes. Lines sort by case, so a file diffs cleanly.
pub fn hash_line(outcome: &CaseOutcome) -> String {
    let case = outcome.case;
    let failure = failure_suffix(case.failure, " failure=");
    format!(
        "{} {} seed={} code={}{failure} history={} memory={}",
        case.workload.name(),
        case.protocol.name(),
        case.seed,
        case.code,
        outcome.history_hash,
        outcome.memory_hash
    )
}

/// The text of a hash file for `outcomes`: a header, then [`hash_line`]s.
pub fn hash_file(outcomes: &[CaseOutcome]) -> String {
    let mut text = String::from(
        "# verbena check: history and memory hashes per case (workload protocol seed code).\n\
         # A sim run is a pure function of config and seed: a change that moves a line\n\
         # changes what the simulator does, and its commit says why.\n",
    );
    for outcome in outcomes {
        text.push_str(&hash_line(outcome));
        text.push('\n');
    }
    text
}

/// Compares `outcomes` with a recorded hash file's text. Cases the file
/// lacks are reported as unrecorded; cases of the file that did not run
/// are ignored, so a subset of the matrix compares against the whole file.
/// Returns one message per difference.
pub fn compare_hashes(outcomes: &[CaseOutcome], recorded: &str) -> Vec<String> {
    let mut expected = std::collections::HashMap::new();
    for line in recorded.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some((key, hashes)) = line.split_once(" history=") {
            expected.insert(key.to_string(), hashes.to_string());
        }
    }
    let mut differences = Vec::new();
    for outcome in outcomes {
        let line = hash_line(outcome);
        let (key, hashes) = line
            .split_once(" history=")
            .expect("hash_line always has a history field");
        match expected.get(key) {
            None => differences.push(format!("{key}: not recorded (history={hashes})")),
            Some(recorded) if recorded != hashes => differences.push(format!(
                "{key}: recorded history={recorded}, now history={hashes}"
            )),
            Some(_) => {}
        }
    }
    differences
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_cover_pure_forms_and_every_single_flip() {
        let protocol = ProtocolKind::Occ;
        let present = protocol.stage_bits();
        let codes = codes(protocol, 1);
        assert!(codes.contains(&present) && codes.contains(&0));
        for stage in protocol.stages() {
            assert!(codes.contains(&stage.bit()));
            assert!(codes.contains(&(present & !stage.bit())));
        }
        assert!(codes.iter().all(|c| c & !present == 0));
    }

    #[test]
    fn case_configs_are_contended_valid_and_seed_determined() {
        for seed in 1..50 {
            let case = Case {
                protocol: ProtocolKind::NoWait,
                seed,
                code: 1,
                workload: WorkloadKind::Ycsb,
                failure: Failure::None,
            };
            let mut config = case_config(case);
            assert_eq!(config, case_config(case));
            crate::engine::validate(&mut config).expect("a matrix config validates");
            let y = &config.ycsb;
            match y.distribution {
                KeyDistribution::Zipf => assert!(y.theta >= 0.9),
                KeyDistribution::Hot => assert!(y.hot_probability >= 0.9),
                KeyDistribution::Uniform => panic!("the matrix is contended"),
            }
            assert_eq!(config.stages.code(), 1);
        }
    }

    #[test]
    fn every_workload_draws_a_valid_small_instance_with_writers() {
        for workload in WorkloadKind::NAMED.map(|(_, kind)| kind) {
            for seed in 1..50 {
                let case = Case {
                    protocol: ProtocolKind::Occ,
                    seed,
                    code: 0,
                    workload,
                    failure: Failure::None,
                };
                let mut config = case_config(case);
                assert_eq!(config, case_config(case));
                assert_eq!(config.workload, workload);
                crate::engine::validate(&mut config).expect("a matrix config validates");
                match workload {
                    WorkloadKind::Ycsb => assert!(config.ycsb.rows_per_node <= 256),
                    WorkloadKind::Tpcc => assert!(config.tpcc.items == 100),
                    WorkloadKind::SmallBank => {
                        assert!(config.smallbank.accounts_per_worker <= 64);
                        assert!(config.smallbank.mix.weights().iter().all(|&w| w > 0));
                    }
                    WorkloadKind::Pps => {
                        assert!(config.pps.products_per_node <= 32);
                        assert!(config.pps.mix.weights().iter().all(|&w| w > 0));
                    }
                    WorkloadKind::TpceCp => {
                        assert!(config.tpce.customers_per_node <= 32);
                        assert!(config.tpce.mix.market_feed > 0);
                    }
                }
            }
            let replay = replay_command(Case {
                protocol: ProtocolKind::Occ,
                seed: 3,
                code: 0,
                workload,
                failure: Failure::None,
            });
            assert_eq!(
                replay.contains("--workload"),
                workload != WorkloadKind::Ycsb,
                "{replay}"
            );
        }
    }
}
