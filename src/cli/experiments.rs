//! The experiment commands of the `verbena` binary: `sweep`, `hybrid`,
//! `plot` and `reproduce` (the library side is `crate::experiments`).
//! Their run flags are `verbena run`'s, parsed by the same code, so every
//! knob a run has is a sweep's base too.

use std::path::{Path, PathBuf};

use super::{
    failed, parse_number, parse_run_flags_unresolved, usage, CliError, Flags, RUN_BARE_FLAGS,
};
use super::{EXIT_CHECK_FAILED, EXIT_OK};
use crate::experiments::plot::PlotOptions;
use crate::experiments::sweep::{self, Knob, SweepOptions, SweepSpec};
use crate::experiments::{html, hybrid, plot, presets};

/// The flags the experiment commands share, and the run flags left over.
struct ExperimentFlags {
    knobs: Vec<Knob>,
    repeat: u32,
    out: Option<PathBuf>,
    jobs: usize,
    restart: bool,
    quiet: bool,
    plot: bool,
    /// Render PNGs (`--no-png` turns them off).
    png: bool,
    /// Flags of the command itself (e.g. `--protocol` for hybrid is a run
    /// flag; `--method` is not), by name.
    own: Vec<(String, String)>,
    run_args: Vec<String>,
}

fn split_flags(
    args: &[String],
    own_valued: &[&str],
    own_bare: &[&str],
) -> Result<ExperimentFlags, CliError> {
    let mut parsed = ExperimentFlags {
        knobs: Vec::new(),
        repeat: 1,
        out: None,
        jobs: 1,
        restart: false,
        quiet: false,
        plot: false,
        png: true,
        own: Vec::new(),
        run_args: Vec::new(),
    };
    let mut flags = Flags::new(args);
    while let Some(flag) = flags.next_flag() {
        let (flag, inline) = flag?;
        let f = flag.as_str();
        let bare = ["--restart", "--quiet", "--plot", "--no-png"].contains(&f)
            || RUN_BARE_FLAGS.contains(&f)
            || own_bare.contains(&f);
        if bare {
            if inline.is_some() {
                return Err(usage(format!("{flag} takes no value")));
            }
            match f {
                "--restart" => parsed.restart = true,
                "--quiet" => parsed.quiet = true,
                "--plot" => parsed.plot = true,
                "--no-png" => parsed.png = false,
                _ if own_bare.contains(&f) => parsed.own.push((flag.clone(), String::new())),
                _ => parsed.run_args.push(flag.clone()),
            }
            continue;
        }
        let value = flags.value(&flag, inline)?;
        match f {
            "--vary" => parsed.knobs.push(sweep::parse_knob(&value).map_err(usage)?),
            "--repeat" => parsed.repeat = parse_number(f, &value, "a whole number")?,
            "--out" => parsed.out = Some(PathBuf::from(value)),
            "--jobs" => {
                parsed.jobs = parse_number(f, &value, "a whole number")?;
                if parsed.jobs == 0 {
                    return Err(usage("--jobs 0 runs nothing; allowed: 1 or more"));
                }
            }
            "--json" | "--history" => {
                return Err(usage(format!(
                    "{flag} is a flag of `verbena run`; an experiment writes its rows to --out DIR (rows.jsonl, results.json, results.csv)"
                )))
            }
            _ if own_valued.contains(&f) => parsed.own.push((flag.clone(), value)),
            _ => parsed.run_args.push(format!("{flag}={value}")),
        }
    }
    for (i, knob) in parsed.knobs.iter().enumerate() {
        if parsed.knobs[..i].iter().any(|k| k.key == knob.key) {
            return Err(usage(format!("--vary {} is given twice", knob.key)));
        }
    }
    Ok(parsed)
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

fn spec_of(parsed: &ExperimentFlags, extra_knobs: Vec<Knob>) -> Result<SweepSpec, CliError> {
    let (base, outputs, base_hybrid) =
        parse_run_flags_unresolved(&parsed.run_args).map_err(|mut e| {
            if e.message.starts_with("unknown flag") {
                e.message.push_str(
                    "; experiments take every run flag plus --vary, --repeat, --out, --jobs, --restart, --quiet, --plot, --no-png",
                );
            }
            e
        })?;
    debug_assert!(outputs.json.is_none() && outputs.history.is_none());
    let mut knobs = extra_knobs;
    knobs.extend(parsed.knobs.iter().cloned());
    Ok(SweepSpec {
        base_args: parsed.run_args.clone(),
        base,
        base_hybrid,
        knobs,
        repeat: parsed.repeat,
    })
}

fn options_of(parsed: &ExperimentFlags, out: PathBuf) -> SweepOptions {
    SweepOptions {
        out_dir: out,
        jobs: parsed.jobs,
        progress: !parsed.quiet,
        restart: parsed.restart,
    }
}

/// `verbena sweep`.
pub(super) fn command_sweep(args: &[String]) -> Result<i32, CliError> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{}", super::HELP);
        return Ok(EXIT_OK);
    }
    let parsed = split_flags(args, &[], &[])?;
    let spec = spec_of(&parsed, Vec::new())?;
    // Validate every point before the first run.
    check_points(&spec, parsed.jobs)?;
    let out = parsed
        .out
        .clone()
        .unwrap_or_else(|| default_out("sweep", &spec.identity()));
    let outcome = sweep::run_sweep(&spec, &options_of(&parsed, out.clone())).map_err(failed)?;
    let keys: Vec<String> = spec.knobs.iter().map(|k| k.key.clone()).collect();
    print!("{}", sweep::summary_table(&outcome.rows, &keys));
    println!(
        "results: {} (results.csv, results.json, summary.csv; rows.jsonl is the journal){}",
        out.display(),
        if outcome.resumed > 0 {
            format!(" · {} run(s) resumed from the journal", outcome.resumed)
        } else {
            String::new()
        }
    );
    if parsed.plot {
        render(&out, &out, &plot_options(None, parsed.png))?;
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
        println!("{line}");
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
pub(super) fn command_plot(args: &[String]) -> Result<i32, CliError> {
    let mut results = None;
    let mut out = None;
    let mut options = plot_options(None, true);
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if arg.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = || -> Result<String, CliError> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            i += 1;
            args.get(i)
                .cloned()
                .ok_or_else(|| usage(format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--out" => out = Some(PathBuf::from(value()?)),
            "--x" => options.x = Some(value()?),
            "--facet" => options.facet = Some(value()?),
            "--no-png" => options.png = false,
            "--help" | "-h" => {
                print!("{}", super::HELP);
                return Ok(EXIT_OK);
            }
            f if f.starts_with("--") => {
                return Err(usage(format!(
                    "unknown flag {f} for `verbena plot`; allowed: --out DIR, --x KNOB, --facet KNOB|none, --no-png"
                )))
            }
            _ if results.is_none() => results = Some(PathBuf::from(arg)),
            _ => {
                return Err(usage(format!(
                    "unexpected argument `{arg}`; give one RESULTS path"
                )))
            }
        }
        i += 1;
    }
    let results = results.ok_or_else(|| {
        usage("verbena plot needs RESULTS: a sweep directory, its results.json or rows.jsonl")
    })?;
    let out = out.unwrap_or_else(|| {
        if results.is_dir() {
            results.clone()
        } else {
            results
                .parent()
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
        }
    });
    render(&results, &out, &options)?;
    Ok(EXIT_OK)
}

/// `verbena hybrid --protocol P …`.
pub(super) fn command_hybrid(args: &[String]) -> Result<i32, CliError> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{}", super::HELP);
        return Ok(EXIT_OK);
    }
    let parsed = split_flags(args, &["--method"], &[])?;
    let method = match parsed.own.iter().rev().find(|(f, _)| f == "--method") {
        None => hybrid::Method::Both,
        Some((_, m)) => hybrid::Method::parse(m).ok_or_else(|| {
            usage(format!(
                "unknown --method `{m}`; allowed: exhaustive, breakdown, both"
            ))
        })?,
    };
    if parsed
        .knobs
        .iter()
        .any(|k| k.key == "hybrid" || k.key == "protocol" || k.key == "stages")
    {
        return Err(usage(
            "verbena hybrid chooses the stage codes itself; --vary hybrid, protocol or stages belongs to verbena sweep",
        ));
    }
    if parsed.run_args.iter().any(|a| {
        a.starts_with("--hybrid") || a.starts_with("--stages") || a.starts_with("--primitive")
    }) {
        return Err(usage(
            "verbena hybrid runs every stage code itself; drop --hybrid, --stages and --primitive",
        ));
    }
    let base_spec = spec_of(&parsed, Vec::new())?;
    check_points(&base_spec, parsed.jobs)?;
    let protocol = base_spec.base.protocol;
    if !protocol.implemented() {
        return Err(usage(format!(
            "protocol {} is not implemented in this build yet; implemented: {}",
            protocol.name(),
            crate::protocols::ProtocolKind::implemented_names().join(", ")
        )));
    }
    let out = parsed.out.clone().unwrap_or_else(|| {
        default_out(
            &format!("hybrid-{}", protocol.name()),
            &base_spec.identity(),
        )
    });
    let options = options_of(&parsed, out.clone());
    let analysis = hybrid::run(&base_spec, &options, method).map_err(failed)?;
    print!("{}", analysis.table());
    println!(
        "results: {} (hybrid.json, results.csv, results.json)",
        out.display()
    );
    if parsed.plot {
        render(&out, &out, &plot_options(None, parsed.png))?;
    }
    Ok(verdict(analysis.check_failures))
}

/// `verbena reproduce NAME` / `--list`.
pub(super) fn command_reproduce(args: &[String]) -> Result<i32, CliError> {
    if args.is_empty() || args.iter().any(|a| a == "--list" || a == "-l") {
        print!("{}", presets::list_text());
        return Ok(EXIT_OK);
    }
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{}", super::HELP);
        return Ok(EXIT_OK);
    }
    let name = &args[0];
    let preset = presets::find(name).ok_or_else(|| {
        usage(format!(
            "unknown preset `{name}`; presets: {} (verbena reproduce --list)",
            presets::PRESETS
                .iter()
                .map(|p| p.name)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    let mut all_args: Vec<String> = preset.base_args.iter().map(|s| s.to_string()).collect();
    all_args.extend(args[1..].iter().cloned());
    let parsed = split_flags(&all_args, &[], &[])?;
    let out = parsed
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(preset.name));
    eprintln!("{}: {} ({})", preset.name, preset.title, preset.source);
    let code = match &preset.kind {
        presets::Kind::Sweep(knobs) => {
            let preset_knobs: Vec<Knob> = knobs
                .iter()
                .map(|k| sweep::parse_knob(k).map_err(usage))
                .collect::<Result<_, _>>()?;
            // A knob given on the command line replaces the preset's own.
            let preset_knobs: Vec<Knob> = preset_knobs
                .into_iter()
                .filter(|k| !parsed.knobs.iter().any(|given| given.key == k.key))
                .collect();
            let spec = spec_of(&parsed, preset_knobs)?;
            check_points(&spec, parsed.jobs)?;
            let outcome =
                sweep::run_sweep(&spec, &options_of(&parsed, out.clone())).map_err(failed)?;
            let keys: Vec<String> = spec.knobs.iter().map(|k| k.key.clone()).collect();
            print!("{}", sweep::summary_table(&outcome.rows, &keys));
            verdict(outcome.check_failures)
        }
        presets::Kind::Hybrid(method) => {
            let spec = spec_of(&parsed, Vec::new())?;
            let analysis =
                hybrid::run(&spec, &options_of(&parsed, out.clone()), *method).map_err(failed)?;
            print!("{}", analysis.table());
            verdict(analysis.check_failures)
        }
    };
    let about =
        serde_json::json!({"name": preset.name, "source": preset.source, "title": preset.title});
    std::fs::write(out.join("preset.json"), about.to_string() + "\n").map_err(|e| {
        failed(format!(
            "cannot write {}: {e}",
            out.join("preset.json").display()
        ))
    })?;
    render(&out, &out, &plot_options(preset.x, parsed.png))?;
    println!("report: {}", out.join("report.html").display());
    Ok(code)
}
