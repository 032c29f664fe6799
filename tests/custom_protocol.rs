//! A protocol written outside verbena runs through the public API on every
//! fabric of one process and every stage choice, under the serializability
//! checker and in the seeded matrix: the example `strict_2pl`
//! (`examples/strict_2pl.rs`), its broken variant, which the checker must
//! catch, and the check that every protocol's stage list names every stage
//! it implements.

use std::future::{poll_fn, Future};
use std::marker::PhantomData;
use std::pin::pin;
use std::sync::Mutex;

use verbena::config::{Config, ConfigError, FabricKind, WorkloadKind};
use verbena::engine::{self, RunError, RunOutput, WithProtocol};
use verbena::experiments::matrix::{self, Case, Failure};
use verbena::protocols::{Primitive, Protocol, ProtocolKind, Served, Stage};
use verbena::store::{NodeStore, TableLayout};
use verbena::txn::{TxnCx, TxnResult};

#[allow(dead_code)] // the example's `main` is not called here
#[path = "../examples/strict_2pl.rs"]
mod strict_2pl;

use strict_2pl::{checked_config, Strict2pl};

/// The three plans every check runs: both pure ones, and the lock stage
/// flipped from one-sided.
const PLANS: [(Primitive, bool); 3] = [
    (Primitive::OneSided, false),
    (Primitive::Rpc, false),
    (Primitive::OneSided, true),
];

fn describe(config: &Config, output: &RunOutput) -> String {
    let check = output.report.check.as_ref().expect("the checker ran");
    format!(
        "{:?} {:?} seed {} plan {}: cycle {:?}, anomalies {:?}, invariants {:?}",
        config.fabric,
        config.workload,
        config.seed,
        output.report.config.stages.describe(),
        check.cycle,
        check.anomalies,
        check.invariants
    )
}

#[test]
fn strict_2pl_is_serializable_on_sim_over_many_seeds_and_plans() {
    for seed in 1..=12 {
        for workload in [WorkloadKind::Ycsb, WorkloadKind::SmallBank] {
            for (primitive, mixed) in PLANS {
                let config = checked_config(FabricKind::Sim, workload, primitive, mixed, seed);
                let output =
                    engine::run_custom_protocol(&config, &Strict2pl::default()).expect("the run");
                let check = output.report.check.as_ref().expect("the checker ran");
                assert!(check.passed(), "{}", describe(&config, &output));
                assert!(
                    output.report.committed > 20,
                    "{}",
                    describe(&config, &output)
                );
                let sim = output.report.sim.as_ref().expect("a sim run");
                assert_eq!(sim.stuck_workers, 0, "{}", describe(&config, &output));
            }
        }
    }
}

#[test]
fn strict_2pl_is_serializable_on_threads() {
    for workload in [WorkloadKind::Ycsb, WorkloadKind::SmallBank] {
        for (primitive, mixed) in PLANS {
            let mut config = checked_config(FabricKind::Threads, workload, primitive, mixed, 1);
            config.duration_s = 0.1;
            let output =
                engine::run_custom_protocol(&config, &Strict2pl::default()).expect("the run");
            let check = output.report.check.as_ref().expect("the checker ran");
            assert!(check.passed(), "{}", describe(&config, &output));
            assert!(
                output.report.committed > 0,
                "{}",
                describe(&config, &output)
            );
        }
    }
}

#[test]
fn the_checker_catches_strict_2pl_releasing_read_locks_early() {
    let broken = Strict2pl {
        release_reads_early: true,
    };
    let mut caught = Vec::new();
    for seed in 1..=12 {
        for workload in [WorkloadKind::Ycsb, WorkloadKind::SmallBank] {
            let config = checked_config(FabricKind::Sim, workload, Primitive::OneSided, true, seed);
            let output = engine::run_custom_protocol(&config, &broken).expect("the run");
            if !output.report.check.as_ref().expect("checked").passed() {
                caught.push((seed, workload));
            }
        }
    }
    assert!(
        !caught.is_empty(),
        "no seed caught read locks released before commit"
    );
}

#[test]
fn a_custom_protocol_is_named_in_the_report_and_refused_where_its_code_is_missing() {
    let config = checked_config(
        FabricKind::Sim,
        WorkloadKind::Ycsb,
        Primitive::Rpc,
        false,
        1,
    );
    let output = engine::run_custom_protocol(&config, &Strict2pl::default()).expect("the run");
    assert_eq!(output.report.config.protocol, Strict2pl::KIND);
    assert_eq!(output.report.config.protocol.stages(), strict_2pl::STAGES);
    let json = serde_json::to_value(&output.report).expect("a report serializes");
    assert_eq!(json["config"]["protocol"], "strict_2pl");
    // The plan was resolved against the protocol's own stages.
    assert_eq!(output.report.config.stages.code(), 0);
    assert_eq!(
        output.report.config.stages.present(),
        Strict2pl::KIND.stage_bits()
    );

    // `engine::run` builds protocols from their names: it cannot build one
    // whose code it does not link.
    let named = Config {
        protocol: Strict2pl::KIND,
        ..config.clone()
    };
    let refused = engine::run(&named).expect_err("refused");
    assert!(
        refused.to_string().contains("run_custom_protocol"),
        "{refused}"
    );
    let ucx = Config {
        fabric: FabricKind::Ucx,
        ..config.clone()
    };
    assert!(engine::run_custom_protocol(&ucx, &Strict2pl::default()).is_err());
    // A custom protocol may not take a built-in name.
    let strict = Strict2pl::default();
    let clash = Relisted::<_, NoWaitName>::new(&strict, None);
    match engine::run_custom_protocol(&config, &clash) {
        Err(RunError::Config(ConfigError(message))) => {
            assert!(message.contains("built-in"), "{message}")
        }
        _ => panic!("a custom protocol named no_wait ran"),
    }
}

/// `strict_2pl`'s stages under a built-in protocol's name, which a run
/// refuses.
struct NoWaitName;

impl Listing for NoWaitName {
    const KIND: ProtocolKind = ProtocolKind::custom("no_wait", strict_2pl::STAGES);
}

#[test]
fn strict_2pl_runs_cases_of_the_seeded_matrix() {
    let cases = matrix::cases_where(
        &[WorkloadKind::Ycsb, WorkloadKind::SmallBank],
        &[Strict2pl::KIND],
        1..=2,
        &[Failure::None],
        |protocol, _| vec![protocol.stage_bits(), 0],
    );
    assert_eq!(cases.len(), 8);
    for case in cases {
        let outcome = matrix::run_case_with(case, &Strict2pl::default(), |_| {});
        assert!(
            outcome.passed,
            "{}: {}",
            matrix::replay_command(case),
            outcome.detail
        );
    }
}

/// The whole matrix over the example: every plan of `matrix::codes`,
/// YCSB and SmallBank, 12 seeds (`.ci/run`'s heavy suites).
#[test]
#[ignore]
fn strict_2pl_passes_the_seeded_matrix() {
    let cases = matrix::cases_of(
        &[WorkloadKind::Ycsb, WorkloadKind::SmallBank],
        &[Strict2pl::KIND],
        1..=12,
    );
    let failed: Vec<String> = cases
        .into_iter()
        .map(|case| matrix::run_case_with(case, &Strict2pl::default(), |_| {}))
        .filter(|outcome| !outcome.passed)
        .map(|outcome| {
            format!(
                "{}: {}",
                matrix::replay_command(outcome.case),
                outcome.detail
            )
        })
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Every stage the staged pipeline can run, in its order.
const EVERY_STAGE: &[Stage] = &[
    Stage::Read,
    Stage::Lock,
    Stage::Validate,
    Stage::Renew,
    Stage::Log,
    Stage::Commit,
    Stage::Release,
];

/// A protocol's kind (name and stage list) for [`Relisted`].
trait Listing: Sync {
    const KIND: ProtocolKind;
}

/// Every stage listed.
struct EveryStage;

impl Listing for EveryStage {
    const KIND: ProtocolKind = ProtocolKind::custom("all_stages", EVERY_STAGE);
}

/// `P` under `L`'s kind, everything else `P`'s own. With a `probe`, a
/// stage `L` lists and `P` does not runs too, and must do nothing (finish
/// at its first poll, post no verb or call, succeed and leave the attempt
/// as it was), or `P` implements a stage its list hides from the driver;
/// the probe collects what such stages did.
struct Relisted<'a, P, L> {
    inner: &'a P,
    probe: Option<&'a Mutex<Vec<String>>>,
    listing: PhantomData<L>,
}

impl<'a, P: Protocol, L: Listing> Relisted<'a, P, L> {
    fn new(inner: &'a P, probe: Option<&'a Mutex<Vec<String>>>) -> Self {
        Relisted {
            inner,
            probe,
            listing: PhantomData,
        }
    }

    /// Notes what stage `stage` did if `P` does not list it: `before` is
    /// the attempt before it ran, `polls` how often its future was polled.
    fn judge(
        &self,
        stage: Stage,
        before: &Before,
        cx: &TxnCx<'_>,
        polls: u32,
        result: &TxnResult<()>,
    ) {
        let Some(found) = self.probe else {
            return;
        };
        if P::KIND.stages().contains(&stage) {
            return;
        }
        let posted = posted(&cx.worker.counters()) - before.posted;
        if polls > 1 || posted > 0 || result.is_err() || attempt_state(cx) != before.state {
            found.lock().unwrap().push(format!(
                "{}: stage {} is not in its list but ran ({polls} polls, {posted} verbs and calls, {result:?})",
                P::KIND.name(),
                stage.name(),
            ));
        }
    }
}

/// An attempt before a stage ran.
struct Before {
    posted: u64,
    state: String,
}

impl Before {
    fn of(cx: &TxnCx<'_>) -> Before {
        Before {
            posted: posted(&cx.worker.counters()),
            state: attempt_state(cx),
        }
    }
}

/// Awaits `future`, counting its polls: more than one means it waited.
async fn polls_of(future: impl Future<Output = TxnResult<()>>) -> (TxnResult<()>, u32) {
    let mut future = pin!(future);
    let mut polls = 0;
    let result = poll_fn(|context| {
        polls += 1;
        future.as_mut().poll(context)
    })
    .await;
    (result, polls)
}

/// Runs one commit-phase stage of the probe.
macro_rules! probed {
    ($self:ident, $cx:ident, $stage:expr, $method:ident) => {{
        let before = Before::of($cx);
        let (result, polls) = polls_of($self.inner.$method($cx)).await;
        $self.judge($stage, &before, $cx, polls, &result);
        result
    }};
}

/// Verbs and calls a worker has posted.
fn posted(counters: &verbena::fabric::VerbCounters) -> u64 {
    counters.read + counters.write + counters.cas + counters.faa + counters.rpc
}

/// What a stage could change in an attempt's context.
fn attempt_state(cx: &TxnCx<'_>) -> String {
    format!("{:?} {} {}", cx.accesses, cx.timestamp, cx.owner)
}

impl<P: Protocol, L: Listing> Protocol for Relisted<'_, P, L> {
    const KIND: ProtocolKind = L::KIND;
    const ACCESS_STAGE: Stage = P::ACCESS_STAGE;

    fn header_words(record_words: u32) -> u32 {
        P::header_words(record_words)
    }
    fn header_words_of(&self, record_words: u32) -> u32 {
        self.inner.header_words_of(record_words)
    }
    fn txn_meta_words(nodes: u32) -> u32 {
        P::txn_meta_words(nodes)
    }
    fn recovered_header(table: &TableLayout, tuple: &mut [u64]) {
        P::recovered_header(table, tuple)
    }
    fn begin(&self, cx: &mut TxnCx<'_>) {
        self.inner.begin(cx)
    }
    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        self.inner.access(cx, index).await
    }
    async fn insert_access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        self.inner.insert_access(cx, index).await
    }
    async fn upgrade(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        self.inner.upgrade(cx, index).await
    }
    async fn lock(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        probed!(self, cx, Stage::Lock, lock)
    }
    async fn validate(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        probed!(self, cx, Stage::Validate, validate)
    }
    async fn renew(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        probed!(self, cx, Stage::Renew, renew)
    }
    async fn log(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        probed!(self, cx, Stage::Log, log)
    }
    async fn commit(&self, cx: &mut TxnCx<'_>) {
        self.inner.commit(cx).await
    }
    async fn release(&self, cx: &mut TxnCx<'_>) {
        self.inner.release(cx).await
    }
    fn serve(&self, store: &NodeStore, kind: u16, payload: &mut Vec<u64>, now_ns: u64) -> Served {
        self.inner.serve(store, kind, payload, now_ns)
    }
    fn waiting_rank(&self, kind: u16, payload: &[u64]) -> u64 {
        self.inner.waiting_rank(kind, payload)
    }
}

/// Runs `protocol` with every stage on, on sim under `primitive`, and
/// returns what its unlisted stages did.
fn unlisted_stages_of<P: Protocol>(
    config: &Config,
    protocol: &P,
    primitive: Primitive,
) -> Vec<String> {
    let found = Mutex::new(Vec::new());
    let probe = Relisted::<_, EveryStage>::new(protocol, Some(&found));
    let config = Config {
        primitive,
        ..config.clone()
    };
    let output = engine::run_protocol(
        &config,
        &probe,
        &verbena::workloads::ycsb::Ycsb::new(&config.ycsb, config.nodes),
    )
    .expect("the run");
    let check = output.report.check.as_ref().expect("checked");
    assert!(
        check.passed(),
        "{} with every stage on: {}",
        P::KIND.name(),
        describe(&config, &output)
    );
    assert!(output.report.committed > 0, "{}", P::KIND.name());
    found.into_inner().unwrap()
}

/// A small contended YCSB run on sim, of `protocol`.
fn probe_config(protocol: ProtocolKind) -> Config {
    let mut config = checked_config(
        FabricKind::Sim,
        WorkloadKind::Ycsb,
        Primitive::Rpc,
        false,
        3,
    );
    config.protocol = protocol;
    config
}

#[test]
fn every_protocol_lists_every_stage_it_implements() {
    struct Probe(Primitive);
    impl WithProtocol for Probe {
        type Output = Vec<String>;
        fn with<P: Protocol>(self, protocol: &P) -> Vec<String> {
            let listed = P::KIND.stages();
            assert!(listed.contains(&P::ACCESS_STAGE), "{}", P::KIND.name());
            assert!(listed.contains(&Stage::Commit) && listed.contains(&Stage::Release));
            unlisted_stages_of(&probe_config(P::KIND), protocol, self.0)
        }
    }
    let mut found = Vec::new();
    for primitive in [Primitive::OneSided, Primitive::Rpc] {
        for kind in ProtocolKind::ALL
            .into_iter()
            .filter(|&p| p != ProtocolKind::Calvin)
        {
            let built = engine::with_protocol(&probe_config(kind), Probe(primitive));
            found.extend(built.expect("every protocol but CALVIN is built by name"));
        }
        found.extend(unlisted_stages_of(
            &probe_config(Strict2pl::KIND),
            &Strict2pl::default(),
            primitive,
        ));
    }
    assert!(found.is_empty(), "{found:#?}");
}

/// OCC's stages but its validation: the probe must see it.
struct OccWithoutValidate;

impl Listing for OccWithoutValidate {
    const KIND: ProtocolKind = ProtocolKind::custom(
        "occ_without_validate",
        &[
            Stage::Read,
            Stage::Lock,
            Stage::Log,
            Stage::Commit,
            Stage::Release,
        ],
    );
}

#[test]
fn a_stage_left_out_of_a_list_is_found() {
    let occ = verbena::protocols::occ::Occ::default();
    let occ = Relisted::<_, OccWithoutValidate>::new(&occ, None);
    let config = probe_config(OccWithoutValidate::KIND);
    for primitive in [Primitive::OneSided, Primitive::Rpc] {
        let found = unlisted_stages_of(&config, &occ, primitive);
        assert!(
            found.iter().any(|f| f.contains("stage validate")),
            "{primitive:?}: {found:?}"
        );
    }
}

#[test]
fn matrix_cases_of_a_custom_protocol_use_its_stages() {
    for seed in 1..=5 {
        let codes = matrix::codes(Strict2pl::KIND, seed);
        assert!(codes.contains(&Strict2pl::KIND.stage_bits()) && codes.contains(&0));
        assert!(codes.iter().all(|c| c & !Strict2pl::KIND.stage_bits() == 0));
    }
    let case = Case {
        protocol: Strict2pl::KIND,
        seed: 4,
        code: Stage::Lock.bit(),
        workload: WorkloadKind::SmallBank,
        failure: Failure::None,
    };
    let config = matrix::case_config(case);
    assert_eq!(config.protocol, Strict2pl::KIND);
    assert_eq!(config.stages.get(Stage::Lock), Primitive::OneSided);
    assert_eq!(config.stages.get(Stage::Commit), Primitive::Rpc);
    assert!(matrix::replay_command(case).contains("strict_2pl"));
}
