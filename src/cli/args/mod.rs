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

mod experiments;
mod multiprocess;
mod run;
mod scope;
mod values;
mod workloads;

use clap::{Args, Parser, Subcommand};

pub use experiments::{
    CheckArgs, DemoArgs, ExperimentFlags, HybridArgs, PlotArgs, ReproduceArgs, SweepArgs,
};
pub use multiprocess::{
    CompletionsArgs, FabricBenchArgs, JobFlags, LaunchArgs, NodeArgs, FABRIC_BENCH_OPS,
};
pub use run::{FaultFlags, Outputs, RunArgs, RunFlags, UcxFlags};
pub use scope::{refuse_inapplicable, UCX_COMMANDS};
pub use values::{closest, Parse};
pub use workloads::{PpsFlags, SmallBankFlags, TpccFlags, TpceFlags, YcsbFlags};

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
    #[command(after_help = "Examples:
    verbena run --protocol occ --check
    verbena run --fabric sim --profile cx4-edr --nodes 16 --duration 0.01 --warmup 0.002
    verbena run --workload tpcc --stages read=rpc --json report.json
    verbena run --config cluster.toml --seed 7

Ucx flags (--transport, --join-timeout…) belong to `verbena launch` and `verbena node`.")]
    Run(RunArgs),
    /// YCSB on 2 nodes: NO_WAIT and OCC, one-sided and RPC, checker on, one comparison table
    Demo(DemoArgs),
    /// The seeded correctness matrix on the sim fabric: every
    /// protocol × all one-sided, all RPC, each stage flipped, random hybrid
    /// codes × seeds, under high contention, checker on
    #[command(after_help = "Examples:
    verbena check --seeds 20
    verbena check --protocol no_wait --hybrid 5 --seed 3 --seeds 1   (replays one case)
    verbena check --workload all --failover --seeds 2")]
    Check(CheckArgs),
    /// Each protocol's stages and hybrid-code bits
    Protocols,
    /// Run every combination of knob values, with repetitions; rows to CSV and JSON; resumable
    #[command(after_help = "Examples:
    verbena sweep --vary protocol=all --fabric sim --duration 0.01 --warmup 0.002
    verbena sweep --vary theta=0.5,0.9,0.99 --vary primitive=onesided,rpc --plot")]
    Sweep(SweepArgs),
    /// Every hybrid stage code of a protocol, ranked (RCC §5.1), and the latency-breakdown pick
    #[command(after_help = "Examples:
    verbena hybrid --protocol occ --fabric sim --duration 0.01 --warmup 0.002")]
    Hybrid(HybridArgs),
    /// SVG/PNG figures and an HTML report of a sweep
    #[command(after_help = "Examples:
    verbena plot results/sweep-1a2b3c
    verbena plot results/sweep-1a2b3c/rows.jsonl --x coroutines --facet protocol")]
    Plot(PlotArgs),
    /// A small-scale paper experiment and its report (--list names them)
    #[command(after_help = "Examples:
    verbena reproduce --list
    verbena reproduce rcc-coroutines --small --plot")]
    Reproduce(ReproduceArgs),
    /// Start every node of a ucx run: --local N processes on this host, or
    /// one per line of --hosts FILE by ssh
    #[command(after_help = "Examples:
    verbena launch --local 2 --transport shm --duration 1 --check
    verbena launch --hosts hosts.txt --transport rdma --nodes 4 --json report.json

A launch always runs fabric ucx; --profile and the sim-only flags (--jitter, --swarm…) belong to `verbena run`.")]
    Launch(LaunchArgs),
    /// One node of a multi-process ucx run, for any launcher (rank and size
    /// also from srun, mpirun, PMI)
    #[command(after_help = "Examples:
    verbena node --rank 0 --nodes 2 --bootstrap 10.0.0.1:17017 --transport tcp
    srun -N 4 verbena node --bootstrap head01:17017 --transport auto --check

A node always runs fabric ucx; --profile and the sim-only flags (--jitter, --swarm…) belong to `verbena run`.")]
    Node(NodeArgs),
    /// One verb type's rate between two local processes over UCX (compare with ucx_perftest)
    #[command(after_help = "Examples:
    verbena fabric-bench --transport shm --op read --bytes 64
    verbena fabric-bench --link socket --op rpc")]
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
            scope::hide_inapplicable(sub.args_override_self(true).allow_negative_numbers(true))
        });
    }
    command
}

/// The long names of the run flags: `verbena run`'s and the ucx ones
/// `launch` and `node` take instead (for the guide's flag-table check).
pub fn run_flag_names() -> Vec<String> {
    use clap::CommandFactory as _;
    let command = Cli::command();
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
