//! The flags of `demo`, `check` and the experiment commands (`sweep`,
//! `hybrid`, `plot`, `reproduce`).

// Doc comments here are the flags' help text, where `[default]` in brackets
// is the help's convention, not an intra-doc link.
#![allow(rustdoc::broken_intra_doc_links)]

use std::path::PathBuf;

use clap::Args;

use super::super::run_config::parse_hybrid_code;
use super::super::usage;
use super::run::RunFlags;
use super::values::*;
use crate::experiments::sweep::Knob;

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
    #[arg(long, value_name = "P", value_parser = one_of(|_, v| super::super::check::parse_check_protocols(v).map(|_| v.to_string()), protocol_names))]
    pub protocol: Option<String>,
    /// Only this hybrid code (replays a failure)
    #[arg(long, value_name = "CODE", value_parser = parse(|_, v| parse_hybrid_code(v)))]
    pub hybrid: Option<u16>,
    /// Workloads W[,W…] or all, each at a small contended scale drawn from the seed [ycsb]
    #[arg(long, value_name = "W", value_parser = one_of(|_, v| super::super::check::parse_check_workloads(v).map(|_| v.to_string()), check_workload_names))]
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
          value_parser = one_of(|_, v| super::super::check::parse_check_failures(v).map(|_| v.to_string()), failure_names))]
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
