//! The experiment commands of the `verbena` binary: `sweep`, `hybrid`,
//! `plot` and `reproduce` (the library side is `crate::experiments`).
//! Their run flags are `verbena run`'s, parsed by the same code, so every
//! knob a run has is a sweep's base too.

use std::path::{Path, PathBuf};

use super::args::{ExperimentFlags, HybridArgs, PlotArgs, ReproduceArgs, RunFlags, SweepArgs};
use super::run_config::run_config_unresolved;
use super::terminal::print_out;
use super::{check_output_dir, failed, usage, CliError};
use super::{EXIT_CHECK_FAILED, EXIT_OK};
use crate::experiments::plot::PlotOptions;
use crate::experiments::sweep::{self, Knob, SweepOptions, SweepSpec};
use crate::experiments::{html, hybrid, plot, presets};

/// Refuses what the experiment flags cannot mean together.
fn check_experiment_flags(parsed: &ExperimentFlags) -> Result<(), CliError> {
    for (flag, given) in [("--json", &parsed.json), ("--history", &parsed.history)] {
        if given.is_some() {
            return Err(usage(format!(
                "{flag} is a flag of `verbena run`; an experiment writes its rows to --out DIR (rows.jsonl, results.json, results.csv)"
            )));
        }
    }
    if parsed.jobs == Some(0) {
        return Err(usage("--jobs 0 runs nothing; allowed: 1 or more"));
    }
    for (i, knob) in parsed.knobs.iter().enumerate() {
        if parsed.knobs[..i].iter().any(|k| k.key == knob.key) {
            return Err(usage(format!("--vary {} is given twice", knob.key)));
        }
    }
    Ok(())
}

/// Resolves every point (a bad value fails before any run) and refuses
/// parallel runs on the threads fabric.
fn check_points(spec: &SweepSpec, jobs: usize) -> Result<(), CliError> {
    let points = spec.points().map_err(usage)?;
    let threads = points
        .iter()
        .any(|p| p.config.fabric == crate::config::FabricKind::Threads);
    if jobs > 1 && threads {
        return Err(usage(format!(
            "--jobs {jobs} would run threads-fabric runs at once, and they would measure each other; allowed: --jobs 1, or --fabric sim for every point"
        )));
    }
    Ok(())
}

/// A stable directory name for a sweep: the same command resumes into it.
fn default_out(kind: &str, identity: &serde_json::Value) -> PathBuf {
    let mut hash: u64 = 0xcbf29ce484222325;
    for byte in identity.to_string().bytes() {
        hash = (hash ^ byte as u64).wrapping_mul(0x100000001b3);
    }
    PathBuf::from("results").join(format!("{kind}-{:08x}", hash as u32))
}

/// The sweep of `parsed`'s knobs (after `extra_knobs`) over the base
/// config `flags` sets; `given` are those flags as given, the sweep's
/// recorded identity.
fn spec_of(
    parsed: &ExperimentFlags,
    flags: &RunFlags,
    given: Vec<String>,
    extra_knobs: Vec<Knob>,
) -> Result<SweepSpec, CliError> {
    let (base, base_hybrid) = run_config_unresolved(flags)?;
    let mut knobs = extra_knobs;
    knobs.extend(parsed.knobs.iter().cloned());
    Ok(SweepSpec {
        base_args: given,
        base,
        base_hybrid,
        knobs,
        repeat: parsed.repeat.unwrap_or(1),
    })
}

fn options_of(parsed: &ExperimentFlags, out: PathBuf) -> SweepOptions {
    SweepOptions {
        out_dir: out,
        jobs: parsed.jobs.unwrap_or(1),
        progress: !parsed.quiet,
        restart: parsed.restart,
    }
}

/// `verbena sweep`; `given` are its run flags as given.
pub(super) fn command_sweep(a: SweepArgs, given: Vec<String>) -> Result<i32, CliError> {
    let parsed = a.experiment;
    check_experiment_flags(&parsed)?;
    let spec = spec_of(&parsed, &a.flags, given, Vec::new())?;
    let jobs = parsed.jobs.unwrap_or(1);
    // Validate every point, and the output directory, before the first run.
    check_points(&spec, jobs)?;
    let out = parsed
        .out
        .clone()
        .unwrap_or_else(|| default_out("sweep", &spec.identity()));
    check_output_dir("--out", &out)?;
    let outcome = sweep::run_sweep(&spec, &options_of(&parsed, out.clone())).map_err(failed)?;
    let keys: Vec<String> = spec.knobs.iter().map(|k| k.key.clone()).collect();
    print_out(&sweep::summary_table(&outcome.rows, &keys))?;
    print_out(&format!(
        "results: {} (results.csv, results.json, summary.csv; rows.jsonl is the journal){}\n",
        out.display(),
        if outcome.resumed > 0 {
            format!(" · {} run(s) resumed from the journal", outcome.resumed)
        } else {
            String::new()
        }
    ))?;
    if parsed.plot {
        render(&out, &out, &plot_options(None, !parsed.no_png))?;
    }
    Ok(verdict(outcome.check_failures))
}

fn verdict(check_failures: usize) -> i32 {
    if check_failures > 0 {
        eprintln!("verbena: the checker found a violation in {check_failures} run(s) (see check_passed in summary.csv)");
        EXIT_CHECK_FAILED
    } else {
        EXIT_OK
    }
}

/// Renders the figures and report page of `results` into `out`.
fn render(results: &Path, out: &Path, options: &PlotOptions) -> Result<(), CliError> {
    let rows = sweep::read_results(results).map_err(usage)?;
    let hybrid_analysis = hybrid::read_analysis(results);
    let figures = plot::figures(&rows, options, hybrid_analysis.as_ref()).map_err(usage)?;
    std::fs::create_dir_all(out)
        .map_err(|e| failed(format!("cannot create {}: {e}", out.display())))?;
    let written = plot::write_figures(&figures, out, options.png).map_err(failed)?;
    let page =
        html::write_report(out, &rows, &figures, hybrid_analysis.as_ref()).map_err(failed)?;
    for line in written.iter().chain(std::iter::once(&page)) {
        print_out(&format!("{line}\n"))?;
    }
    Ok(())
}

/// The plot options of an experiment command: the default knobs, PNGs
/// unless `--no-png`.
fn plot_options(x: Option<&str>, png: bool) -> PlotOptions {
    PlotOptions {
        x: x.map(str::to_string),
        facet: None,
        png,
    }
}

/// `verbena plot RESULTS`.
pub(super) fn command_plot(a: PlotArgs) -> Result<i32, CliError> {
    let results = a.results.ok_or_else(|| {
        usage("verbena plot needs RESULTS: a sweep directory, its results.json or rows.jsonl")
    })?;
    let out = a.out.unwrap_or_else(|| {
        if results.is_dir() {
            results.clone()
        } else {
            results
                .parent()
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
        }
    });
    check_output_dir("--out", &out)?;
    render(
        &results,
        &out,
        &PlotOptions {
            x: a.x.clone(),
            facet: a.facet.clone(),
            png: !a.no_png,
        },
    )?;
    Ok(EXIT_OK)
}

/// `verbena hybrid --protocol P …`.
pub(super) fn command_hybrid(a: HybridArgs, given: Vec<String>) -> Result<i32, CliError> {
    let parsed = a.experiment;
    check_experiment_flags(&parsed)?;
    let method = a.method.unwrap_or(hybrid::Method::Both);
    if parsed
        .knobs
        .iter()
        .any(|k| k.key == "hybrid" || k.key == "protocol" || k.key == "stages")
    {
        return Err(usage(
            "verbena hybrid chooses the stage codes itself; --vary hybrid, protocol or stages belongs to verbena sweep",
        ));
    }
    if a.flags.hybrid.is_some() || !a.flags.stages.is_empty() || a.flags.primitive.is_some() {
        return Err(usage(
            "verbena hybrid runs every stage code itself; drop --hybrid, --stages and --primitive",
        ));
    }
    let base_spec = spec_of(&parsed, &a.flags, given, Vec::new())?;
    check_points(&base_spec, parsed.jobs.unwrap_or(1))?;
    let protocol = base_spec.base.protocol;
    let out = parsed.out.clone().unwrap_or_else(|| {
        default_out(
            &format!("hybrid-{}", protocol.name()),
            &base_spec.identity(),
        )
    });
    check_output_dir("--out", &out)?;
    let options = options_of(&parsed, out.clone());
    let analysis = hybrid::run(&base_spec, &options, method).map_err(failed)?;
    print_out(&analysis.table())?;
    print_out(&format!(
        "results: {} (hybrid.json, results.csv, results.json)\n",
        out.display()
    ))?;
    if parsed.plot {
        render(&out, &out, &plot_options(None, !parsed.no_png))?;
    }
    Ok(verdict(analysis.check_failures))
}

/// `verbena reproduce NAME [--small]` / `--list`.
/// `args` is the whole command line: the preset's own run flags are parsed
/// again in front of the user's, so the user's win.
pub(super) fn command_reproduce(a: ReproduceArgs, args: &[String]) -> Result<i32, CliError> {
    let name = match &a.name {
        Some(name) if !a.list => name,
        _ => {
            print_out(&presets::list_text())?;
            return Ok(EXIT_OK);
        }
    };
    let preset = presets::find(name).expect("clap checked the preset name");
    let scale = if a.small {
        presets::Scale::Small
    } else {
        presets::Scale::Paper
    };
    let mut all_args = vec![args[0].clone()];
    all_args.extend(preset.setup(scale).args.iter().map(|s| s.to_string()));
    all_args.extend(args[1..].iter().cloned());
    let (a, given) = match super::parse(&all_args)? {
        super::Parsed {
            command: Some(super::args::Commands::Reproduce(a)),
            given,
        } => (a, given),
        _ => unreachable!("the same command line parses to the same command"),
    };
    let parsed = a.experiment;
    check_experiment_flags(&parsed)?;
    // Each scale has its own directory: a sweep resumes only into its own.
    let out = parsed.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(match scale {
            presets::Scale::Paper => preset.name.to_string(),
            presets::Scale::Small => format!("{}-small", preset.name),
        })
    });
    check_output_dir("--out", &out)?;
    eprintln!(
        "{}: {} ({}), {} scale, {} on 2 cores",
        preset.name,
        preset.title,
        preset.source,
        scale.name(),
        preset.setup(scale).wall_time
    );
    let code = match &preset.kind {
        presets::Kind::Sweep(_) => {
            let preset_knobs: Vec<Knob> = preset
                .knobs(scale)
                .iter()
                .map(|k| sweep::parse_knob(k).map_err(usage))
                .collect::<Result<_, _>>()?;
            // A knob given on the command line replaces the preset's own.
            let preset_knobs: Vec<Knob> = preset_knobs
                .into_iter()
                .filter(|k| !parsed.knobs.iter().any(|given| given.key == k.key))
                .collect();
            let spec = spec_of(&parsed, &a.flags, given, preset_knobs)?;
            check_points(&spec, parsed.jobs.unwrap_or(1))?;
            let outcome =
                sweep::run_sweep(&spec, &options_of(&parsed, out.clone())).map_err(failed)?;
            let keys: Vec<String> = spec.knobs.iter().map(|k| k.key.clone()).collect();
            print_out(&sweep::summary_table(&outcome.rows, &keys))?;
            verdict(outcome.check_failures)
        }
        presets::Kind::Hybrid(method) => {
            let spec = spec_of(&parsed, &a.flags, given, Vec::new())?;
            let analysis =
                hybrid::run(&spec, &options_of(&parsed, out.clone()), *method).map_err(failed)?;
            print_out(&analysis.table())?;
            verdict(analysis.check_failures)
        }
    };
    let about = serde_json::json!({
        "name": preset.name,
        "source": preset.source,
        "title": preset.title,
        "scale": scale.name(),
    });
    std::fs::write(out.join("preset.json"), about.to_string() + "\n").map_err(|e| {
        failed(format!(
            "cannot write {}: {e}",
            out.join("preset.json").display()
        ))
    })?;
    render(&out, &out, &plot_options(preset.x, !parsed.no_png))?;
    print_out(&format!("report: {}\n", out.join("report.html").display()))?;
    Ok(code)
}
