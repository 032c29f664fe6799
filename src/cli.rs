//! The `verbena` command line (docs/ARCHITECTURE.md, layer 12): `run`, `demo`,
//! `check`, the experiment commands, the multi-process ones and `help`.
//! The grammar — every flag, its help and usage, "did you mean" hints and
//! shell completions — is clap's, defined once in [`args`]; this module maps
//! parsed flags onto a [`Config`](crate::config::Config) and runs the
//! command.
//!
//! This file parses, dispatches and runs `run` and `protocols`; the flags
//! become a config in `run_config`, and the other commands each have a
//! file: `check`, `demo`, `experiments` (sweep, hybrid, plot, reproduce)
//! and `multiprocess` (node, launch, fabric-bench). Around them: `args`
//! (the grammar, and which flags each command takes), `config_keys` (a
//! `--config` file's unknown keys), `host` (what a run asks of this host:
//! its warnings and refusals) and `terminal` (help wrapped to the
//! terminal's width, and output a closed pipe ends quietly).
//!
//! A run's configuration comes from defaults, then an optional TOML file
//! (`--config`), then flags (flags win, and only those given); the result is
//! checked by `Config::validate`, the one place that knows value ranges.
//! Every output path is checked as creatable before the first transaction
//! (`outputs`). Every bad value exits with code 2 and a message that names
//! the value and what is allowed; nothing here panics on user input.
//!
//! Exit codes: 0 success (`--help` and `--version` too, on stdout); 1 the run
//! failed (e.g. writing the report); 2 bad input (clap's own parse errors
//! included); 3 the run finished but `--check` found a violation; 4 (a `ucx`
//! rank) this rank was declared failed by its peers and stopped, the run
//! going on without it.

pub mod args;
mod check;
mod config_keys;
mod demo;
mod experiments;
mod host;
mod multiprocess;
mod outputs;
mod run_config;
mod terminal;

use std::fmt::Write as _;
use std::io::Write as _;

use clap::FromArgMatches as _;

use crate::base::ProtocolKind;
use crate::config::FabricKind;
use crate::engine::{self, Report};
use args::{Cli, Commands, Outputs, RunFlags};
pub use demo::{demo_configs, demo_table};
pub use outputs::{check_output_dir, check_output_path};
use run_config::run_config;
use terminal::print_out;

pub use crate::base::exit::{
    EXIT_CHECK_FAILED, EXIT_DECLARED_FAILED, EXIT_FAILED, EXIT_OK, EXIT_USAGE,
};

/// A failure with the exit code it maps to.
#[derive(Debug)]
pub struct CliError {
    pub code: i32,
    pub message: String,
}

fn usage(message: impl Into<String>) -> CliError {
    CliError {
        code: EXIT_USAGE,
        message: message.into(),
    }
}

fn failed(message: impl Into<String>) -> CliError {
    CliError {
        code: EXIT_FAILED,
        message: message.into(),
    }
}

/// Runs the command line `args` (without the program name); returns the
/// exit code. Output goes to stdout, errors to stderr.
pub fn main_with_args(args: &[String]) -> i32 {
    let command_name = args
        .first()
        .filter(|a| args::command().find_subcommand(a.as_str()).is_some())
        .cloned();
    match dispatch(args) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("verbena: {}", error.message.trim_end());
            if error.code == EXIT_USAGE {
                match command_name {
                    Some(name) => eprintln!("(see `verbena {name} --help`)"),
                    None => eprintln!("(see `verbena help`)"),
                }
            }
            error.code
        }
    }
}

/// A parsed command line: the command, and the run flags as given (in
/// order, `--flag=value`), which a sweep records and a launcher passes on.
struct Parsed {
    command: Option<Commands>,
    given: Vec<String>,
}

/// Parses `args` with clap; help and version print here and come back as
/// `Err` with exit code 0 so the caller stops.
fn parse(args: &[String]) -> Result<Parsed, CliError> {
    let command = args::command();
    let argv = std::iter::once("verbena".to_string()).chain(args.iter().cloned());
    let matches = match command.clone().try_get_matches_from(argv) {
        Ok(matches) => matches,
        Err(error) => return Err(clap_failure(&error, args)),
    };
    let cli = Cli::from_arg_matches(&matches).map_err(|e| clap_failure(&e, args))?;
    let given = match matches.subcommand() {
        Some((name, sub)) => {
            let mut ids = args::ids_of::<RunFlags>();
            // A launcher passes the output flags on to rank 0.
            if name == "launch" {
                ids.extend(args::ids_of::<Outputs>());
            }
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let sub_command = command
                .find_subcommand(name)
                .expect("clap matched this subcommand");
            args::refuse_inapplicable(sub_command, sub)?;
            args::given_flags(sub_command, sub, &ids)
        }
        None => Vec::new(),
    };
    Ok(Parsed {
        command: cli.command,
        given,
    })
}

/// Help and version go to stdout with exit 0; every other clap error
/// becomes a usage error (exit 2) worded like the project's own.
fn clap_failure(error: &clap::Error, args: &[String]) -> CliError {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let context = |kind: ContextKind| match error.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(v)) => v.first().cloned(),
        _ => None,
    };
    let hint = |kind: ContextKind| {
        context(kind)
            .map(|near| format!("; did you mean `{near}`?"))
            .unwrap_or_default()
    };
    let message = match error.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let text = error.render().to_string();
            return match print_help(&text) {
                Ok(()) => CliError {
                    code: EXIT_OK,
                    message: String::new(),
                },
                Err(e) => e,
            };
        }
        ErrorKind::UnknownArgument => {
            let arg = context(ContextKind::InvalidArg).unwrap_or_default();
            let command = match args.first() {
                Some(name) if args::command().find_subcommand(name).is_some() => {
                    format!("verbena {name}")
                }
                _ => "verbena".to_string(),
            };
            if arg.starts_with('-') {
                let flag = arg.split('=').next().unwrap_or(&arg);
                format!(
                    "unknown flag {flag} for `{command}`{}",
                    hint(ContextKind::SuggestedArg)
                )
            } else {
                format!("unexpected argument `{arg}` for `{command}`; flags start with --")
            }
        }
        ErrorKind::InvalidSubcommand => {
            let typed = context(ContextKind::InvalidSubcommand).unwrap_or_default();
            let command = args::command();
            let names: Vec<&str> = command
                .get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(|s| s.get_name())
                .chain(["help"])
                .collect();
            let near = args::closest(&typed, names.iter().copied())
                .map(|near| format!("; did you mean `{near}`?"))
                .unwrap_or_default();
            format!(
                "unknown command `{typed}`; commands: {}{near}",
                names.join(", ")
            )
        }
        ErrorKind::InvalidValue
            if context(ContextKind::InvalidValue).is_none_or(|v| v.is_empty()) =>
        {
            let arg = context(ContextKind::InvalidArg).unwrap_or_default();
            format!("{} needs a value", arg.split(' ').next().unwrap_or(&arg))
        }
        _ => {
            // clap's own wording, less its "error: " and usage lines (the
            // caller points to --help).
            let text = error.render().to_string();
            let text = text.strip_prefix("error: ").unwrap_or(&text);
            let text = text.split("\n\nUsage:").next().unwrap_or(text);
            text.trim_end().to_string()
        }
    };
    usage(message)
}

/// Help (or the version) as clap renders it, wrapped to the terminal.
fn print_help(text: &str) -> Result<(), CliError> {
    print_out(&terminal::wrap_help(text, terminal::help_width()))
}

fn dispatch(args: &[String]) -> Result<i32, CliError> {
    let parsed = match parse(args) {
        Ok(parsed) => parsed,
        Err(e) if e.code == EXIT_OK => return Ok(EXIT_OK),
        Err(e) => return Err(e),
    };
    let Some(command) = parsed.command else {
        print_help(&args::command().render_help().to_string())?;
        return Ok(EXIT_OK);
    };
    match command {
        Commands::Run(a) => command_run(a.flags, a.outputs, a.force),
        Commands::Demo(a) => demo::command_demo(a),
        Commands::Check(a) => check::command_check(a),
        Commands::Protocols => command_protocols(),
        Commands::Sweep(a) => experiments::command_sweep(a, parsed.given),
        Commands::Hybrid(a) => experiments::command_hybrid(a, parsed.given),
        Commands::Plot(a) => experiments::command_plot(a),
        Commands::Reproduce(a) => experiments::command_reproduce(a, args),
        Commands::Node(a) => multiprocess::command_node(a),
        Commands::Launch(a) => multiprocess::command_launch(a, parsed.given),
        Commands::FabricBench(a) => multiprocess::command_fabric_bench(a, &args[1..]),
        Commands::Completions(a) => {
            let mut command = args::command();
            let mut script = Vec::new();
            clap_complete::generate(a.shell, &mut command, "verbena", &mut script);
            terminal::write_out(&script)?;
            Ok(EXIT_OK)
        }
        Commands::Version => {
            print_out(&format!("verbena {}\n", env!("CARGO_PKG_VERSION")))?;
            Ok(EXIT_OK)
        }
    }
}

fn write_file(
    path: &str,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> Result<(), CliError> {
    let file =
        std::fs::File::create(path).map_err(|e| failed(format!("cannot create {path}: {e}")))?;
    let mut out = std::io::BufWriter::new(file);
    write(&mut out)
        .and_then(|_| out.flush())
        .map_err(|e| failed(format!("cannot write {path}: {e}")))
}
fn write_json<T: serde::Serialize>(path: &str, value: &T) -> Result<(), CliError> {
    write_file(path, |out| {
        serde_json::to_writer_pretty(&mut *out, value).map_err(std::io::Error::other)?;
        out.write_all(b"\n")
    })
}

/// `verbena run`: one configuration, checked against this host first
/// (`force` runs one past its limits).
fn command_run(mut flags: RunFlags, outputs: Outputs, force: bool) -> Result<i32, CliError> {
    flags.check |= outputs.history.is_some();
    let config = run_config(&flags)?;
    if config.fabric == FabricKind::Ucx {
        return Err(usage(engine::UCX_ONE_PROCESS));
    }
    host::check_run_cost(&config, force)?;
    outputs.check()?;
    let started = std::time::SystemTime::now();
    let output = engine::run(&config).map_err(|e| failed(e.to_string()))?;
    emit_report(&output, &outputs, started)
}

/// Writes the run's latencies as HdrHistogram's interval log to `path`.
fn write_latency_log(
    path: &str,
    report: &Report,
    started: std::time::SystemTime,
) -> Result<(), CliError> {
    let c = &report.config;
    let run = format!(
        "{} · {} · {} · {} fabric · seed {}",
        c.protocol.name(),
        report.workload,
        c.shape(),
        c.fabric.name(),
        c.seed
    );
    let types: Vec<&str> = report.txn_types.iter().map(|t| t.name).collect();
    let header = crate::stats::log::LogHeader {
        run: &run,
        started,
        measured_s: report.measured_s,
        time: report.time,
    };
    write_file(path, |out| {
        crate::stats::log::write_interval_log(out, &report.latencies, &types, &header)
    })
}

/// Prints a run's report (`verbena run`, rank 0 of a `ucx` run) and writes
/// its outputs.
fn emit_report(
    output: &engine::RunOutput,
    outputs: &Outputs,
    started: std::time::SystemTime,
) -> Result<i32, CliError> {
    if let Some(path) = &outputs.latency_log {
        write_latency_log(path, &output.report, started)?;
    }
    if outputs.json.as_deref() == Some("-") {
        // The report is the output; the table goes where messages go.
        eprint!("{}", output.report.table());
        let json = serde_json::to_string_pretty(&output.report)
            .map_err(|e| failed(format!("cannot write the report to stdout: {e}")))?;
        print_out(&(json + "\n"))?;
    } else {
        print_out(&output.report.table())?;
        if let Some(path) = &outputs.json {
            write_json(path, &output.report)?;
        }
    }
    if let (Some(path), Some(history)) = (&outputs.history, &output.history) {
        write_file(path, |out| history.write_jsonl(out))?;
    }
    Ok(check_exit(&[&output.report]))
}

fn check_exit(reports: &[&Report]) -> i32 {
    let failed = reports
        .iter()
        .any(|r| r.check.as_ref().is_some_and(|c| !c.passed()));
    if failed {
        eprintln!("verbena: the checker found a violation (see the report above)");
        EXIT_CHECK_FAILED
    } else {
        EXIT_OK
    }
}

/// `verbena protocols`: each protocol with its stages and their RCC bits.
fn command_protocols() -> Result<i32, CliError> {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "protocol     stages (RCC hybrid-code bit; 1 = one-sided)          all one-sided"
    );
    for protocol in ProtocolKind::ALL {
        let stages = protocol
            .stages()
            .iter()
            .map(|s| format!("{}={}", s.name(), s.bit()))
            .collect::<Vec<_>>()
            .join(" ");
        let _ = writeln!(
            out,
            "{:<12} {:<52} {}",
            protocol.name(),
            stages,
            protocol.stage_bits()
        );
    }
    print_out(&out)?;
    Ok(EXIT_OK)
}
