//! The command line's grammar: every subcommand and flag of `verbena`, as
//! clap derive structs, so `--help`, usage lines, "did you mean" hints and
//! shell completions all come from the one definition the parser uses.
//!
//! Invariants:
//! - Flags parse text into values and nothing more: value ranges live in
//!   `Config::validate` (`config`), the single source of what a run allows.
//!   A value parser here only turns text into a value (a number, a protocol)
//!   and reports text that names nothing.
//! - Every run flag is an `Option`: `None` means "not given", so a flag only
//!   overrides what the user wrote, never a `--config` file's value with a
//!   default.
//! - Flag names equal the TOML keys' documented flags (docs/guide/running.md,
//!   "Configuration reference"); scripts use them, so they do not change.
//!
//! The value parser [`Parse`] is hand-written rather than clap's typed
//! parsers because the project's messages (`--coroutines `many` is not a
//! whole number`, `unknown protocol `2pl`; protocols: …`) and its aliases
//! (`nowait`, `one-sided`, a profile TOML path) predate clap, and scripts and
//! tests read them; clap's own would say less.

// Doc comments here are the flags' help text, where `[default]` in brackets
// is the help's convention, not an intra-doc link.
#![allow(rustdoc::broken_intra_doc_links)]

use std::ffi::OsStr;
use std::path::PathBuf;

use clap::builder::{PossibleValue, TypedValueParser};
use clap::{Args, Parser, Subcommand};

use super::run_config::{parse_hybrid_code, parse_number, parse_stages};
use super::{usage, CliError};
use crate::base::{Primitive, ProtocolKind, StagePlan};
use crate::config::faults::RunFault;
use crate::config::profile::{NetworkProfile, BUILTIN_PROFILES};
use crate::config::{
    FabricKind, KeyDistribution, LocalAtomics, LockMode, UcxTransport, WorkloadKind,
};
use crate::experiments::sweep::{self, Knob};

/// Turns a flag's text into a `T` with the project's own message, adding a
/// "did you mean" hint when the flag takes one of a closed set of names.
#[derive(Clone)]
pub struct Parse<T> {
    parse: fn(&str, &str) -> Result<T, CliError>,
    /// The names a closed set allows (hints, help, completions).
    names: fn() -> Vec<&'static str>,
    /// Whether `names` is every value (a profile may also be a file path).
    closed: bool,
}

fn no_names() -> Vec<&'static str> {
    Vec::new()
}

/// A flag whose text is parsed by `parse(flag, text)`.
fn parse<T>(parse: fn(&str, &str) -> Result<T, CliError>) -> Parse<T> {
    Parse {
        parse,
        names: no_names,
        closed: false,
    }
}

/// A flag that takes one of `names` (aliases allowed by `parse`).
fn one_of<T>(
    parse: fn(&str, &str) -> Result<T, CliError>,
    names: fn() -> Vec<&'static str>,
) -> Parse<T> {
    Parse {
        parse,
        names,
        closed: true,
    }
}

/// The closest of `names` to `text`, if one is close (clap's own rule for
/// flag names: Jaro similarity above 0.7).
pub fn closest<'a>(text: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    names
        .into_iter()
        .map(|name| (strsim::jaro(text, name), name))
        .filter(|(similarity, _)| *similarity > 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| name)
}

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Parse<T> {
    type Value = T;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let flag = arg
            .and_then(|a| a.get_long())
            .map_or_else(|| "value".to_string(), |long| format!("--{long}"));
        let text = value.to_str().ok_or_else(|| {
            clap::Error::raw(
                clap::error::ErrorKind::InvalidUtf8,
                format!("{flag}: the value is not UTF-8\n"),
            )
        })?;
        (self.parse)(&flag, text).map_err(|error| {
            let mut message = error.message;
            // A list (`occ,nowiat`) is hinted at by its first unknown name.
            let names = (self.names)();
            let unknown = text
                .split(',')
                .map(str::trim)
                .find(|part| !names.contains(part))
                .unwrap_or(text);
            if let Some(near) = closest(unknown, names) {
                message.push_str(&format!("; did you mean `{near}`?"));
            }
            message.push('\n');
            clap::Error::raw(clap::error::ErrorKind::ValueValidation, message)
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        if !self.closed {
            return None;
        }
        Some(Box::new((self.names)().into_iter().map(PossibleValue::new)))
    }
}

fn count<T: std::str::FromStr + Clone + Send + Sync + 'static>() -> Parse<T> {
    parse(|flag, text| parse_number(flag, text, "a whole number"))
}

fn real() -> Parse<f64> {
    parse(|flag, text| parse_number(flag, text, "a number"))
}

fn protocol_names() -> Vec<&'static str> {
    ProtocolKind::names()
}

pub(super) fn parse_protocol(_flag: &str, v: &str) -> Result<ProtocolKind, CliError> {
    ProtocolKind::parse(v.trim()).ok_or_else(|| {
        usage(format!(
            "unknown protocol `{v}`; protocols: {}",
            protocol_names().join(", ")
        ))
    })
}

fn parse_primitive(_flag: &str, v: &str) -> Result<Primitive, CliError> {
    Primitive::parse(v)
        .ok_or_else(|| usage(format!("unknown primitive `{v}`; allowed: onesided, rpc")))
}

fn workload_names() -> Vec<&'static str> {
    WorkloadKind::NAMED.map(|(name, _)| name).to_vec()
}

fn parse_workload(_flag: &str, v: &str) -> Result<WorkloadKind, CliError> {
    WorkloadKind::parse(v).ok_or_else(|| {
        usage(format!(
            "unknown workload `{v}`; workloads in this build: {}",
            workload_names().join(", ")
        ))
    })
}

fn failure_names() -> Vec<&'static str> {
    vec!["crash-r2", "crash-r3", "pause-r2", "pause-r3", "all"]
}

fn check_workload_names() -> Vec<&'static str> {
    let mut names = workload_names();
    names.push("all");
    names
}

fn parse_fabric(_flag: &str, v: &str) -> Result<FabricKind, CliError> {
    FabricKind::parse(v)
        .ok_or_else(|| usage(format!("unknown fabric `{v}`; allowed: threads, sim, ucx")))
}

pub(super) fn parse_transport(_flag: &str, v: &str) -> Result<UcxTransport, CliError> {
    UcxTransport::parse(v).ok_or_else(|| {
        usage(format!(
            "unknown transport `{v}`; allowed: shm, tcp, rdma, auto"
        ))
    })
}

fn parse_local_atomics(_flag: &str, v: &str) -> Result<LocalAtomics, CliError> {
    LocalAtomics::parse(v)
        .ok_or_else(|| usage(format!("unknown local atomics `{v}`; allowed: nic, cpu")))
}

fn parse_distribution(_flag: &str, v: &str) -> Result<KeyDistribution, CliError> {
    match v {
        "uniform" => Ok(KeyDistribution::Uniform),
        "zipf" => Ok(KeyDistribution::Zipf),
        "hot" => Ok(KeyDistribution::Hot),
        other => Err(usage(format!(
            "unknown distribution `{other}`; allowed: uniform, zipf, hot"
        ))),
    }
}

fn parse_lock_mode(_flag: &str, v: &str) -> Result<LockMode, CliError> {
    match v {
        "exclusive" => Ok(LockMode::Exclusive),
        "shared" => Ok(LockMode::Shared),
        other => Err(usage(format!(
            "unknown lock mode `{other}`; allowed: exclusive, shared"
        ))),
    }
}

fn parse_starvation_fix(_flag: &str, v: &str) -> Result<bool, CliError> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(usage(format!(
            "--wait-die-starvation-fix = `{other}` is not allowed; allowed: true, false"
        ))),
    }
}

fn parse_detector(_flag: &str, v: &str) -> Result<bool, CliError> {
    match v {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(usage(format!(
            "--failure-detector `{other}`; allowed: on, off"
        ))),
    }
}

fn parse_switch(flag: &str, v: &str) -> Result<bool, CliError> {
    match v.trim() {
        "true" | "on" | "yes" | "1" => Ok(true),
        "false" | "off" | "no" | "0" => Ok(false),
        other => Err(usage(format!(
            "{flag} `{other}` is not a switch; allowed: true, false"
        ))),
    }
}

fn parse_profile(_flag: &str, v: &str) -> Result<NetworkProfile, CliError> {
    NetworkProfile::resolve(v).map_err(usage)
}

fn profile_names() -> Vec<&'static str> {
    BUILTIN_PROFILES.to_vec()
}

fn parse_fault(_flag: &str, v: &str) -> Result<RunFault, CliError> {
    RunFault::parse(v).map_err(usage)
}

fn parse_knob(_flag: &str, v: &str) -> Result<Knob, CliError> {
    sweep::parse_knob(v).map_err(usage)
}

fn mix_text(_flag: &str, v: &str) -> Result<String, CliError> {
    Ok(v.to_string())
}

/// `verbena`'s command line.
#[derive(Parser)]
#[command(
    name = "verbena",
    version,
    about = "verbena — distributed in-memory transactions: every concurrency-control\nprotocol on one store, runtime and network; each stage one-sided or RPC.",
    after_help = "Typical use:\n    verbena run --protocol occ --stages read=rpc --check --history h.jsonl\n    verbena demo                 NO_WAIT and OCC, one-sided and RPC, checker on\n    verbena sweep --vary protocol=all --fabric sim\n    verbena <COMMAND> --help     that command's flags\n\nExit codes: 0 ok, 1 run failed, 2 bad input, 3 check found a violation,\n4 (a ucx rank) declared failed by its peers",
    disable_help_subcommand = false
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Commands>,
}

#[derive(Subcommand)]
pub enum Commands {
    /// Run one configuration and report it
    Run(RunArgs),
    /// YCSB on 2 nodes: NO_WAIT and OCC, one-sided and RPC, checker on, one comparison table
    Demo(DemoArgs),
    /// The seeded correctness matrix on the sim fabric: every
    /// protocol × all one-sided, all RPC, each stage flipped, random hybrid
    /// codes × seeds, under high contention, checker on
    Check(CheckArgs),
    /// Each protocol's stages and hybrid-code bits
    Protocols,
    /// Run every combination of knob values, with repetitions; rows to CSV and JSON; resumable
    Sweep(SweepArgs),
    /// Every hybrid stage code of a protocol, ranked (RCC §5.1), and the latency-breakdown pick
    Hybrid(HybridArgs),
    /// SVG/PNG figures and an HTML report of a sweep
    Plot(PlotArgs),
    /// A small-scale paper experiment and its report (--list names them)
    Reproduce(ReproduceArgs),
    /// Start every node of a ucx run: --local N processes on this host, or
    /// one per line of --hosts FILE by ssh
    Launch(LaunchArgs),
    /// One node of a multi-process ucx run, for any launcher (rank and size
    /// also from srun, mpirun, PMI)
    Node(NodeArgs),
    /// One verb type's rate between two local processes over UCX (compare with ucx_perftest)
    FabricBench(FabricBenchArgs),
    /// Print a shell completion script (e.g. `verbena completions bash > /etc/bash_completion.d/verbena`)
    Completions(CompletionsArgs),
    /// The version (as --version)
    #[command(hide = true)]
    Version,
}

/// Where a run writes its results. Each path is checked as creatable
/// before the run starts (`cli::outputs`); a new output flag is one
/// field here and one line in `Outputs::check`.
#[derive(Args, Clone, Default)]
#[command(next_help_heading = "Outputs")]
pub struct Outputs {
    /// Write the JSON report (`-`: to stdout, and the table to stderr)
    #[arg(long, value_name = "PATH")]
    pub json: Option<String>,
    /// Write the committed history as JSON lines (implies --check)
    #[arg(long, value_name = "PATH")]
    pub history: Option<String>,
    /// Write HdrHistogram's interval log of commit latencies: per second of
    /// the run's clock, all and per transaction type (rank 0 of a ucx run
    /// writes the merged log)
    #[arg(long, value_name = "PATH")]
    pub latency_log: Option<String>,
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub flags: RunFlags,
    #[command(flatten)]
    pub outputs: Outputs,
}

/// The flags that configure a run (`verbena run`, and the base of every
/// sweep point, launch and node). Defaults in brackets.
#[derive(Args, Clone, Default)]
pub struct RunFlags {
    /// TOML file with any config key (flags win over it)
    #[arg(long, value_name = "FILE")]
    pub config: Option<String>,
    /// Nodes [2]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub nodes: Option<u32>,
    /// Worker threads per node [1]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub workers: Option<u32>,
    /// Transaction coroutines per worker [8]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub coroutines: Option<u32>,
    /// The workload [ycsb]
    #[arg(long, value_name = "W", value_parser = one_of(parse_workload, workload_names))]
    pub workload: Option<WorkloadKind>,
    /// Concurrency-control protocol [no_wait]
    #[arg(long, value_name = "NAME", value_parser = one_of(parse_protocol, protocol_names))]
    pub protocol: Option<ProtocolKind>,
    /// 2PL family: the lock mode [exclusive]
    #[arg(long, value_name = "M", value_parser = one_of(parse_lock_mode, || vec!["exclusive", "shared"]))]
    pub lock_mode: Option<LockMode>,
    /// WAIT_DIE: RCC §4.3's starvation fix [false]
    #[arg(long, value_name = "B", value_parser = one_of(parse_starvation_fix, || vec!["true", "false"]))]
    pub wait_die_starvation_fix: Option<bool>,
    /// CALVIN: sequencing epoch, µs [5000]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub calvin_epoch_us: Option<u64>,
    /// CALVIN: requests each worker's client keeps outstanding; 0 =
    /// lockstep, one per coroutine per epoch [100]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub calvin_inflight: Option<u32>,
    /// Every stage's default primitive [onesided]
    #[arg(long, value_name = "P", value_parser = one_of(parse_primitive, || vec!["onesided", "rpc"]))]
    pub primitive: Option<Primitive>,
    /// Per-stage choice, e.g. read=rpc,lock=onesided (stages: lock, read,
    /// validate, renew, log, commit, release, txn_broadcast_input,
    /// value_forwarding — those the protocol has); repeatable
    #[arg(long, value_name = "LIST", value_parser = parse(|_, v| parse_stages(v)))]
    pub stages: Vec<StagePlan>,
    /// RCC hybrid code: bit set = stage one-sided (28 or 0b11100; bits per `verbena protocols`)
    #[arg(long, value_name = "CODE", value_parser = parse(|_, v| parse_hybrid_code(v)))]
    pub hybrid: Option<u16>,
    /// Measured seconds [2]
    #[arg(long, value_name = "S", value_parser = real())]
    pub duration: Option<f64>,
    /// Warm-up seconds, not measured [0.5]
    #[arg(long, value_name = "S", value_parser = real())]
    pub warmup: Option<f64>,
    /// Seed of every generator [1]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub seed: Option<u64>,
    /// Record the history; run the serializability checker and the workload invariants
    #[arg(long)]
    pub check: bool,
    /// threads; sim (deterministic, virtual time); ucx (one process per
    /// node: `verbena launch` / `verbena node`) [threads]
    #[arg(long, value_name = "F", value_parser = one_of(parse_fabric, || vec!["threads", "sim", "ucx"]))]
    pub fabric: Option<FabricKind>,
    /// Network: none, cx4-edr, cx4-edr-qp, cx3, roce, tcp-10g, cloud-lan, or a TOML
    /// file [none]; sim runs on it, threads injects its round trips
    #[arg(long, value_name = "P", value_parser = Parse { closed: false, ..one_of(parse_profile, profile_names) })]
    pub profile: Option<NetworkProfile>,
    /// Sim: random extra share of each one-way time [0.1]
    #[arg(long, value_name = "F", value_parser = real())]
    pub jitter: Option<f64>,
    /// Sim: scale each latency class per seed
    #[arg(long)]
    pub swarm: bool,
    /// Sim: connections each worker spreads its doorbell batches over, as
    /// if the cluster had N nodes (RCC Fig. 20); 0 = the real cluster [0]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub emulated_nodes: Option<u32>,
    /// Abort back-off base, ns [1000]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub backoff_base_ns: Option<u64>,
    /// Abort back-off cap, ns [100000]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub backoff_cap_ns: Option<u64>,
    /// Location-cache entries per worker, 0 = off [262144]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub location_cache: Option<u32>,
    /// Start each location cache holding every loaded row's slot that
    /// fits, as after a long run (sim, threads)
    #[arg(long)]
    pub warm_location_cache: bool,
    /// Copies of every partition, primary included: 1..=3, <= nodes [1]
    #[arg(long, value_name = "R", value_parser = count::<u32>())]
    pub replication: Option<u32>,
    /// Coordinator log ring per worker per backup, bytes [65536]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub log_ring_bytes: Option<u64>,
    #[command(flatten)]
    pub faults: FaultFlags,
    #[command(flatten)]
    pub ucx: UcxFlags,
    #[command(flatten)]
    pub ycsb: YcsbFlags,
    #[command(flatten)]
    pub tpcc: TpccFlags,
    #[command(flatten)]
    pub smallbank: SmallBankFlags,
    #[command(flatten)]
    pub pps: PpsFlags,
    #[command(flatten)]
    pub tpce: TpceFlags,
}

#[derive(Args, Clone, Default)]
#[command(next_help_heading = "Faults")]
pub struct FaultFlags {
    /// Crash node N S seconds into the run (crash:N@S; virtual on sim, wall
    /// on threads and ucx, where rank N kills itself); also pause:N@S+D on
    /// sim; repeatable. Turns on the failure detector
    #[arg(long, value_name = "SPEC", value_parser = parse(parse_fault))]
    pub fault: Vec<RunFault>,
    /// Failure detector heartbeat, µs [per fabric]
    #[arg(long, value_name = "U", value_parser = real())]
    pub heartbeat_interval_us: Option<f64>,
    /// Silence before a peer is dead, µs [per fabric]
    #[arg(long, value_name = "U", value_parser = real())]
    pub detector_timeout_us: Option<f64>,
    /// Run the detector without a planned fault (on ucx with --replication
    /// >= 2 the survivors then fail over a killed rank) [on with --fault]
    #[arg(long, value_name = "on|off", value_parser = one_of(parse_detector, || vec!["on", "off"]))]
    pub failure_detector: Option<bool>,
}

#[derive(Args, Clone, Default)]
#[command(next_help_heading = "UCX (fabric ucx: verbena launch / verbena node)")]
pub struct UcxFlags {
    /// UCX_TLS [auto]
    #[arg(long, value_name = "T", value_parser = one_of(parse_transport, || vec!["shm", "tcp", "rdma", "auto"]))]
    pub transport: Option<UcxTransport>,
    /// A node's own verbs through its NIC (loopback) or on the CPU; cpu
    /// only with shm or tcp [nic]
    #[arg(long, value_name = "A", value_parser = one_of(parse_local_atomics, || vec!["nic", "cpu"]))]
    pub local_atomics: Option<LocalAtomics>,
    /// Wait for every rank to join, s [60]
    #[arg(long, value_name = "S", value_parser = real())]
    pub join_timeout: Option<f64>,
    /// A silent or unfinished rank is hung after S seconds [10]
    #[arg(long, value_name = "S", value_parser = real())]
    pub stall_timeout: Option<f64>,
}

#[derive(Args, Clone, Default)]
#[command(next_help_heading = "YCSB")]
pub struct YcsbFlags {
    /// Rows per node [100000]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub rows_per_node: Option<u64>,
    /// Record size, a multiple of 8 [64]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub record_bytes: Option<u32>,
    /// Operations per transaction, 1..=64 [10]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub ops_per_txn: Option<u32>,
    /// Share of read-modify-writes [0.2]
    #[arg(long, value_name = "F", value_parser = real())]
    pub write_ratio: Option<f64>,
    /// Deneva's mix instead of --write-ratio: share of update transactions
    /// (half their operations written), the rest read-only [unset]
    #[arg(long, value_name = "F", value_parser = real())]
    pub update_txn_ratio: Option<f64>,
    /// Key distribution [hot]
    #[arg(long, value_name = "D", value_parser = one_of(parse_distribution, || vec!["uniform", "zipf", "hot"]))]
    pub distribution: Option<KeyDistribution>,
    /// Zipf skew in [0, 1) [0.99]
    #[arg(long, value_name = "F", value_parser = real())]
    pub theta: Option<f64>,
    /// Share of rows in the hot area [0.001]
    #[arg(long, value_name = "F", value_parser = real())]
    pub hot_fraction: Option<f64>,
    /// Share of accesses to the hot area [0.1]
    #[arg(long, value_name = "F", value_parser = real())]
    pub hot_probability: Option<f64>,
    /// Execution-phase compute per txn, µs [5]
    #[arg(long, value_name = "F", value_parser = real())]
    pub compute_us: Option<f64>,
    /// Nodes a transaction touches [min(2, nodes)]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub partitions_per_txn: Option<u32>,
}

#[derive(Args, Clone, Default)]
#[command(next_help_heading = "TPC-C (--workload tpcc)")]
pub struct TpccFlags {
    /// Warehouses per node [1]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub warehouses: Option<u32>,
    /// ITEM rows (specification: 100000) [100000]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub items: Option<u32>,
    /// Customers, and initial orders, per district (specification: 3000) [3000]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub customers_per_district: Option<u32>,
    /// Run-time orders each district has room for [5000]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub insert_headroom: Option<u32>,
    /// standard (45,43,4,4,4) | new-order-only | new-order-distributed
    /// (DrTM+H: NewOrder only, each with a supplier on another node) |
    /// NO,P,OS,D,SL weights [standard]
    #[arg(long, value_name = "MIX", value_parser = parse(mix_text))]
    pub tpcc_mix: Option<String>,
    /// NewOrder remote stock per item [0.01]
    #[arg(long, value_name = "F", value_parser = real())]
    pub remote_item_probability: Option<f64>,
    /// NewOrder rolled back (unused item) [0.01]
    #[arg(long, value_name = "F", value_parser = real())]
    pub invalid_item_probability: Option<f64>,
    /// Payment remote customer [0.15]
    #[arg(long, value_name = "F", value_parser = real())]
    pub payment_remote_probability: Option<f64>,
    /// Payment/OrderStatus by last name [0.6]
    #[arg(long, value_name = "F", value_parser = real())]
    pub by_last_name_probability: Option<f64>,
}

#[derive(Args, Clone, Default)]
#[command(next_help_heading = "SmallBank (--workload smallbank; DrTM Table 5, DrTM+H §5)")]
pub struct SmallBankFlags {
    /// Customers per worker thread [100000]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub sb_accounts_per_worker: Option<u64>,
    /// Share of customers that is hot [0.04]
    #[arg(long, value_name = "F", value_parser = real())]
    pub sb_hot_fraction: Option<f64>,
    /// Share of accesses to hot customers [0.9]
    #[arg(long, value_name = "F", value_parser = real())]
    pub sb_hot_probability: Option<f64>,
    /// Probability a txn crosses nodes [1.0]
    #[arg(long, value_name = "F", value_parser = real())]
    pub sb_distributed: Option<f64>,
    /// Amounts uniform in 1..=N [100]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub sb_max_amount: Option<u64>,
    /// Read the accounts row first: true | false [false]
    #[arg(long, value_name = "B", value_parser = parse(parse_switch))]
    pub sb_lookup_accounts: Option<bool>,
    /// Weights, e.g. send_payment=25,balance=15 (types not named get 0)
    /// [send_payment=25, amalgamate, balance, deposit_checking,
    /// write_check, transact_savings=15 each]
    #[arg(long, value_name = "LIST", value_parser = parse(mix_text))]
    pub sb_mix: Option<String>,
}

#[derive(Args, Clone, Default)]
#[command(next_help_heading = "PPS (--workload pps; Deneva §4.1)")]
pub struct PpsFlags {
    /// Products per node [10000]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub pps_products_per_node: Option<u64>,
    /// Parts per node [10000]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub pps_parts_per_node: Option<u64>,
    /// Suppliers per node [1000]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub pps_suppliers_per_node: Option<u64>,
    /// Parts each product uses, 1..=32 [10]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub pps_parts_per_product: Option<u32>,
    /// Parts each supplier supplies, 1..=32 [10]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub pps_parts_per_supplier: Option<u32>,
    /// Share of part assignments on the owner's node; 0 = uniform over the cluster [0]
    #[arg(long, value_name = "F", value_parser = real())]
    pub pps_local_parts: Option<f64>,
    /// Order quantities uniform in 1..=N [10]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub pps_max_quantity: Option<u64>,
    /// Stock of each part when loaded [1000000000]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub pps_initial_stock: Option<u64>,
    /// Weights of order_product, lookup_product, update_product_part,
    /// lookup_supplier [40, 40, 20, 0]
    #[arg(long, value_name = "LIST", value_parser = parse(mix_text))]
    pub pps_mix: Option<String>,
}

#[derive(Args, Clone, Default)]
#[command(next_help_heading = "TPC-E customer-position (--workload tpce-cp; DrTM+H §5.5)")]
pub struct TpceFlags {
    /// Customers per node [5000]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub tpce_customers_per_node: Option<u64>,
    /// Accounts per customer 1..=N, N <= 10 [10]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub tpce_max_accounts: Option<u32>,
    /// Holdings per account, 1..=16 [4]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub tpce_holdings_per_account: Option<u32>,
    /// Securities per node [6850]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub tpce_securities_per_node: Option<u64>,
    /// Securities a market_feed reprices [10]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub tpce_feed_size: Option<u32>,
    /// Weights of customer_position, market_feed [100, 0]
    #[arg(long, value_name = "LIST", value_parser = parse(mix_text))]
    pub tpce_mix: Option<String>,
}

#[derive(Args)]
pub struct DemoArgs {
    /// Measured seconds per configuration [2]
    #[arg(long, value_name = "S", value_parser = real())]
    pub duration: Option<f64>,
    /// Warm-up seconds [0.5]
    #[arg(long, value_name = "S", value_parser = real())]
    pub warmup: Option<f64>,
    /// Write all four JSON reports
    #[arg(long, value_name = "PATH")]
    pub json: Option<String>,
}

#[derive(Args)]
pub struct CheckArgs {
    /// Seeds to run [10]
    #[arg(long, value_name = "N", value_parser = count::<u64>())]
    pub seeds: Option<u64>,
    /// First seed [1]
    #[arg(long, alias = "first-seed", value_name = "S", value_parser = count::<u64>())]
    pub seed: Option<u64>,
    /// Only these protocols, P[,P…] [every one]
    #[arg(long, value_name = "P", value_parser = one_of(|_, v| super::check::parse_check_protocols(v).map(|_| v.to_string()), protocol_names))]
    pub protocol: Option<String>,
    /// Only this hybrid code (replays a failure)
    #[arg(long, value_name = "CODE", value_parser = parse(|_, v| parse_hybrid_code(v)))]
    pub hybrid: Option<u16>,
    /// Workloads W[,W…] or all, each at a small contended scale drawn from the seed [ycsb]
    #[arg(long, value_name = "W", value_parser = one_of(|_, v| super::check::parse_check_workloads(v).map(|_| v.to_string()), check_workload_names))]
    pub workload: Option<String>,
    /// Record every case's history and memory hash in PATH
    #[arg(long, value_name = "PATH")]
    pub hashes: Option<String>,
    /// Compare every case's hashes with a file --hashes wrote; fail on any difference
    #[arg(long, value_name = "PATH")]
    pub expect_hashes: Option<String>,
    /// The failover matrix: a node crashed or paused, 2 or 3 copies, both pure plans;
    /// F[,F…] of crash-r2, crash-r3, pause-r2, pause-r3, or all [all]
    #[arg(long, value_name = "F", num_args = 0..=1, default_missing_value = "all",
          value_parser = one_of(|_, v| super::check::parse_check_failures(v).map(|_| v.to_string()), failure_names))]
    pub failover: Option<String>,
}

/// The flags every experiment command shares.
#[derive(Args, Clone, Default)]
#[command(next_help_heading = "Experiment")]
pub struct ExperimentFlags {
    /// A knob KEY=V1,V2,...: a config key by TOML path (ycsb.theta,
    /// profile), its leaf name (theta) or flag name (hot-probability), or
    /// hybrid / stages (stages=read=rpc+lock=rpc); `|` separates values
    /// that hold commas; protocol=all; repeatable
    #[arg(long = "vary", value_name = "KEY=V1,V2,...", value_parser = parse(parse_knob))]
    pub knobs: Vec<Knob>,
    /// Runs per point, seeds seed, seed+1, ... [1]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub repeat: Option<u32>,
    /// Results directory; the same command resumes an interrupted run
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Sim runs at once [1]
    #[arg(long, value_name = "N", value_parser = count::<usize>())]
    pub jobs: Option<usize>,
    /// Discard another sweep's results in DIR
    #[arg(long)]
    pub restart: bool,
    /// No progress line
    #[arg(long)]
    pub quiet: bool,
    /// Render figures and report.html afterwards
    #[arg(long)]
    pub plot: bool,
    /// SVG figures only (no PNG copies)
    #[arg(long)]
    pub no_png: bool,
    /// (a flag of `verbena run`; experiments write to --out DIR)
    #[arg(long, hide = true, value_name = "PATH")]
    pub json: Option<String>,
    /// (a flag of `verbena run`; experiments write to --out DIR)
    #[arg(long, hide = true, value_name = "PATH")]
    pub history: Option<String>,
}

#[derive(Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub experiment: ExperimentFlags,
    #[command(flatten)]
    pub flags: RunFlags,
}

#[derive(Args)]
pub struct HybridArgs {
    /// Enumerate every code, rank by the latency breakdown, or both [both]
    #[arg(long, value_name = "M", value_parser = one_of(|_, v| {
        crate::experiments::hybrid::Method::parse(v).ok_or_else(|| usage(format!(
            "unknown --method `{v}`; allowed: exhaustive, breakdown, both"
        )))
    }, || vec!["exhaustive", "breakdown", "both"]))]
    pub method: Option<crate::experiments::hybrid::Method>,
    #[command(flatten)]
    pub experiment: ExperimentFlags,
    #[command(flatten)]
    pub flags: RunFlags,
}

#[derive(Args)]
pub struct PlotArgs {
    /// A sweep/hybrid directory, its results.json or rows.jsonl
    #[arg(value_name = "RESULTS")]
    pub results: Option<PathBuf>,
    /// Where figures and report.html go [RESULTS' directory]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The knob on the x axis
    #[arg(long, value_name = "KNOB")]
    pub x: Option<String>,
    /// The knob whose values get one panel each (small multiples), or
    /// `none` for one panel [past 8 lines, the knob that leaves 2-8 per panel]
    #[arg(long, value_name = "KNOB|none")]
    pub facet: Option<String>,
    /// SVG figures only (no PNG copies)
    #[arg(long)]
    pub no_png: bool,
}

#[derive(Args)]
pub struct ReproduceArgs {
    /// The experiment (--list names them)
    #[arg(value_name = "NAME", value_parser = one_of(|_, v| {
        crate::experiments::presets::find(v).map(|p| p.name.to_string()).ok_or_else(|| usage(format!(
            "unknown preset `{v}`; presets: {} (verbena reproduce --list)",
            preset_names().join(", ")
        )))
    }, preset_names))]
    pub name: Option<String>,
    /// List the experiments
    #[arg(long, short = 'l')]
    pub list: bool,
    /// Run the small-scale configuration (4 nodes × 1 worker for a few ms
    /// of virtual time, what CI runs) instead of the paper's
    #[arg(long)]
    pub small: bool,
    #[command(flatten)]
    pub experiment: ExperimentFlags,
    #[command(flatten)]
    pub flags: RunFlags,
}

fn preset_names() -> Vec<&'static str> {
    crate::experiments::presets::PRESETS
        .iter()
        .map(|p| p.name)
        .collect()
}

#[derive(Args)]
pub struct LaunchArgs {
    /// N processes on this host, one per node
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub local: Option<u32>,
    /// One process per line of FILE, started by ssh
    #[arg(long, value_name = "FILE")]
    pub hosts: Option<String>,
    /// Bootstrap port of rank 0 with --hosts [17017]
    #[arg(long, value_name = "P", value_parser = parse(|flag, v| parse_number::<u16>(flag, v, "a port number")))]
    pub port: Option<u16>,
    /// verbena on the hosts [this binary's path]
    #[arg(long, value_name = "PATH")]
    pub remote_exe: Option<String>,
    /// The job's secret, at least 16 bytes (or VERBENA_CLUSTER_KEY, which
    /// ps does not show) [a random one per launch]
    #[arg(long, value_name = "KEY")]
    pub cluster_key: Option<String>,
    #[command(flatten)]
    pub flags: RunFlags,
    #[command(flatten)]
    pub outputs: Outputs,
}

#[derive(Args)]
pub struct NodeArgs {
    /// This node's rank (or SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK)
    #[arg(long, value_name = "R", value_parser = count::<u32>())]
    pub rank: Option<u32>,
    /// HOST:PORT where rank 0 listens (or VERBENA_BOOTSTRAP)
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap: Option<String>,
    /// The job's secret, the same on every rank (or VERBENA_CLUSTER_KEY,
    /// which ps does not show)
    #[arg(long, value_name = "KEY")]
    pub cluster_key: Option<String>,
    #[command(flatten)]
    pub flags: RunFlags,
    #[command(flatten)]
    pub outputs: Outputs,
}

#[derive(Args)]
pub struct FabricBenchArgs {
    /// UCX_TLS [shm]
    #[arg(long, value_name = "T", value_parser = one_of(parse_transport, || vec!["shm", "tcp", "rdma", "auto"]))]
    pub transport: Option<UcxTransport>,
    /// The verb measured [read]
    #[arg(long, value_name = "OP", value_parser = one_of(|_, v| {
        if FABRIC_BENCH_OPS.contains(&v) { Ok(v.to_string()) } else {
            Err(usage(format!("unknown --op `{v}`; allowed: {}", FABRIC_BENCH_OPS.join(", "))))
        }
    }, || FABRIC_BENCH_OPS.to_vec()))]
    pub op: Option<String>,
    /// READ/WRITE/RPC payload, bytes [8]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub bytes: Option<u32>,
    /// Operations in flight [16]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub window: Option<u32>,
    /// Measured seconds [2]
    #[arg(long, value_name = "S", value_parser = real())]
    pub seconds: Option<f64>,
    /// `ucx` (the fabric's endpoint) or `socket` (a TCP transport of
    /// verbena's own, --op rpc only, for comparison) [ucx]
    #[arg(long, value_name = "L", value_parser = one_of(|_, v| {
        if ["ucx", "socket"].contains(&v) { Ok(v.to_string()) } else {
            Err(usage(format!("unknown --link `{v}`; allowed: ucx, socket")))
        }
    }, || vec!["ucx", "socket"]))]
    pub link: Option<String>,
    /// (internal: this process is rank R of the two)
    #[arg(long, hide = true, value_name = "R", value_parser = parse(|flag, v| parse_number::<u32>(flag, v, "0 or 1")))]
    pub rank: Option<u32>,
    /// (internal: rank 0's address)
    #[arg(long, hide = true, value_name = "HOST:PORT")]
    pub bootstrap: Option<String>,
}

pub const FABRIC_BENCH_OPS: [&str; 5] = ["read", "write", "cas", "faa", "rpc"];

#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// The whole command line as clap sees it, with the settings every
/// subcommand shares: a repeated flag's last value wins (as before clap;
/// `--fault` and `--vary` collect instead), and `-0.1` is a value.
pub fn command() -> clap::Command {
    use clap::CommandFactory as _;
    let mut command = Cli::command();
    let names: Vec<String> = command
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        command = command.mut_subcommand(name, |sub| {
            sub.args_override_self(true).allow_negative_numbers(true)
        });
    }
    command
}

/// The long names of `verbena run`'s flags (for the guide's flag-table check).
pub fn run_flag_names() -> Vec<String> {
    let command = command();
    let run = command
        .find_subcommand("run")
        .expect("verbena has a run command");
    run.get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .filter(|l| l != "--help")
        .collect()
}

/// The flags given on the command line among `ids`, as `--flag=value` (a
/// switch as `--flag`), in command-line order: what a sweep records as its
/// base and a launcher passes on to every rank.
pub fn given_flags(
    command: &clap::Command,
    matches: &clap::ArgMatches,
    ids: &[&str],
) -> Vec<String> {
    let mut given: Vec<(usize, String)> = Vec::new();
    for arg in command.get_arguments() {
        let id = arg.get_id().as_str();
        if !ids.contains(&id) {
            continue;
        }
        if matches.value_source(id) != Some(clap::parser::ValueSource::CommandLine) {
            continue;
        }
        let Some(long) = arg.get_long() else { continue };
        let indices: Vec<usize> = matches
            .indices_of(id)
            .map(|i| i.collect())
            .unwrap_or_default();
        let takes_value = arg.get_num_args().is_none_or(|n| n.takes_values());
        if takes_value && arg.get_action().takes_values() {
            let raw: Vec<String> = matches
                .get_raw(id)
                .map(|values| values.map(|v| v.to_string_lossy().into_owned()).collect())
                .unwrap_or_default();
            for (index, value) in indices.into_iter().zip(raw) {
                given.push((index, format!("--{long}={value}")));
            }
        } else if let Some(&index) = indices.first() {
            given.push((index, format!("--{long}")));
        }
    }
    given.sort_by_key(|(index, _)| *index);
    given.into_iter().map(|(_, flag)| flag).collect()
}

/// The ids of the args `T` defines (flattened groups included).
pub fn ids_of<T: Args>() -> Vec<String> {
    T::augment_args(clap::Command::new("ids"))
        .get_arguments()
        .map(|a| a.get_id().as_str().to_string())
        .collect()
}
