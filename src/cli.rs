//! The `verbena` command line (docs/ARCHITECTURE.md, layer 12): `run`, `demo`,
//! `check`, the experiment commands, the multi-process ones and `help`.
//! The grammar — every flag, its help and usage, "did you mean" hints and
//! shell completions — is clap's, defined once in [`args`]; this module maps
//! parsed flags onto a [`Config`] and runs the command.
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
mod experiments;
mod outputs;

use std::fmt::Write as _;
use std::io::Write as _;

use clap::FromArgMatches as _;

use crate::base::{Primitive, ProtocolKind, Stage, StagePlan};
use crate::config::{Config, FabricKind, TpccMix, UcxTransport, WorkloadKind};
use crate::engine::{self, Report};
use args::{Cli, Commands, Outputs, RunFlags};
pub use outputs::{check_output_dir, check_output_path};

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
            print!("{error}");
            return CliError {
                code: EXIT_OK,
                message: String::new(),
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
        ErrorKind::InvalidSubcommand => format!(
            "unknown command `{}`; commands: {}{}",
            context(ContextKind::InvalidSubcommand).unwrap_or_default(),
            args::command()
                .get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(|s| s.get_name())
                .chain(["help"])
                .collect::<Vec<_>>()
                .join(", "),
            hint(ContextKind::SuggestedSubcommand)
        ),
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

fn dispatch(args: &[String]) -> Result<i32, CliError> {
    let parsed = match parse(args) {
        Ok(parsed) => parsed,
        Err(e) if e.code == EXIT_OK => return Ok(EXIT_OK),
        Err(e) => return Err(e),
    };
    let Some(command) = parsed.command else {
        print!("{}", args::command().render_help());
        return Ok(EXIT_OK);
    };
    match command {
        Commands::Run(a) => command_run(a.flags, a.outputs),
        Commands::Demo(a) => command_demo(a),
        Commands::Check(a) => command_check(a),
        Commands::Protocols => command_protocols(),
        Commands::Sweep(a) => experiments::command_sweep(a, parsed.given),
        Commands::Hybrid(a) => experiments::command_hybrid(a, parsed.given),
        Commands::Plot(a) => experiments::command_plot(a),
        Commands::Reproduce(a) => experiments::command_reproduce(a, args),
        Commands::Node(a) => command_node(a),
        Commands::Launch(a) => command_launch(a, parsed.given),
        Commands::FabricBench(a) => command_fabric_bench(a, &args[1..]),
        Commands::Completions(a) => {
            let mut command = args::command();
            let mut script = Vec::new();
            clap_complete::generate(a.shell, &mut command, "verbena", &mut script);
            std::io::stdout()
                .write_all(&script)
                .map_err(|e| failed(format!("cannot write the completion script: {e}")))?;
            Ok(EXIT_OK)
        }
        Commands::Version => {
            println!("verbena {}", env!("CARGO_PKG_VERSION"));
            Ok(EXIT_OK)
        }
    }
}

fn parse_number<T: std::str::FromStr>(flag: &str, text: &str, what: &str) -> Result<T, CliError> {
    text.trim()
        .parse()
        .map_err(|_| usage(format!("{flag} `{text}` is not {what}")))
}

fn parse_stages(text: &str) -> Result<StagePlan, CliError> {
    let mut plan = StagePlan::empty();
    for part in text.split(',').filter(|p| !p.trim().is_empty()) {
        let (stage, primitive) = part.split_once('=').ok_or_else(|| {
            usage(format!(
                "--stages entry `{part}` is not STAGE=PRIMITIVE (e.g. read=rpc)"
            ))
        })?;
        let stage_value = Stage::parse(stage.trim()).ok_or_else(|| {
            usage(format!(
                "--stages: unknown stage `{stage}`; stages: {}",
                Stage::ALL.map(|s| s.name()).join(", ")
            ))
        })?;
        let primitive_value = Primitive::parse(primitive.trim()).ok_or_else(|| {
            usage(format!(
                "--stages: unknown primitive `{primitive}` for stage {stage}; allowed: onesided, rpc"
            ))
        })?;
        plan = plan.with(stage_value, primitive_value);
    }
    Ok(plan)
}

/// An RCC hybrid code: decimal (`28`) or binary (`0b11100`).
fn parse_hybrid_code(text: &str) -> Result<u16, CliError> {
    let text = text.trim();
    let parsed = match text.strip_prefix("0b").or_else(|| text.strip_prefix("0B")) {
        Some(binary) => u16::from_str_radix(binary, 2),
        None => text.parse(),
    };
    parsed.map_err(|_| {
        usage(format!(
            "--hybrid `{text}` is not a hybrid code; allowed: a decimal (28) or binary (0b11100) number whose bits are stages (see `verbena protocols`)"
        ))
    })
}

/// Applies `--hybrid CODE`: every stage of the protocol whose bit is set
/// is one-sided, every other one RPC (RCC §5.1).
fn apply_hybrid(config: &mut Config, code: u16) -> Result<(), CliError> {
    let present = config.protocol.stage_bits();
    if code & !present != 0 {
        let stray: Vec<String> = Stage::ALL
            .iter()
            .filter(|s| code & s.bit() != 0 && present & s.bit() == 0)
            .map(|s| format!("{} ({})", s.name(), s.bit()))
            .collect();
        let stray_bits = code & !present;
        let stray_text = if stray.is_empty() {
            format!("bits {stray_bits:#b} name no stage")
        } else {
            format!("it has no stage {}", stray.join(", "))
        };
        return Err(usage(format!(
            "--hybrid {code} does not fit protocol {}: {stray_text}; its stages are {}",
            config.protocol.name(),
            config
                .protocol
                .stages()
                .iter()
                .map(|s| format!("{}={}", s.name(), s.bit()))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    if config.stages.stages().next().is_some() {
        return Err(usage("give either --hybrid or --stages, not both"));
    }
    let plan = StagePlan::from_code(present, code);
    config.stages = config
        .protocol
        .stages()
        .iter()
        .fold(StagePlan::empty(), |acc, &stage| {
            acc.with(stage, plan.get(stage))
        });
    Ok(())
}

fn load_toml(path: &str) -> Result<Config, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read config file {path}: {e}")))?;
    toml::from_str(&text).map_err(|e| usage(format!("config file {path}: {e}")))
}

/// Builds the configuration of a run from its flags: defaults, then
/// `--config`, then every flag given; `--hybrid` applied; validated.
fn run_config(flags: &RunFlags) -> Result<Config, CliError> {
    let (mut config, hybrid) = run_config_unresolved(flags)?;
    if let Some(code) = hybrid {
        apply_hybrid(&mut config, code)?;
    }
    engine::validate(&mut config).map_err(|e| usage(e.0))?;
    Ok(config)
}

/// The flags applied to the defaults (or `--config`), before `--hybrid` is
/// applied and the config validated: sweeps set their knobs on this and
/// then resolve each point.
fn run_config_unresolved(flags: &RunFlags) -> Result<(Config, Option<u16>), CliError> {
    fn set<T: Clone>(slot: &mut T, value: &Option<T>) {
        if let Some(value) = value {
            *slot = value.clone();
        }
    }
    let mut config = match &flags.config {
        Some(path) => load_toml(path)?,
        None => Config::default(),
    };
    let c = &mut config;
    set(&mut c.nodes, &flags.nodes);
    set(&mut c.workers, &flags.workers);
    set(&mut c.coroutines, &flags.coroutines);
    set(&mut c.workload, &flags.workload);
    set(&mut c.protocol, &flags.protocol);
    set(&mut c.protocol_options.lock_mode, &flags.lock_mode);
    set(
        &mut c.protocol_options.wait_die_starvation_fix,
        &flags.wait_die_starvation_fix,
    );
    set(
        &mut c.protocol_options.calvin_epoch_us,
        &flags.calvin_epoch_us,
    );
    set(
        &mut c.protocol_options.calvin_inflight,
        &flags.calvin_inflight,
    );
    set(&mut c.primitive, &flags.primitive);
    for given in &flags.stages {
        for stage in given.stages() {
            c.stages = c.stages.with(stage, given.get(stage));
        }
    }
    set(&mut c.duration_s, &flags.duration);
    set(&mut c.warmup_s, &flags.warmup);
    set(&mut c.seed, &flags.seed);
    c.check |= flags.check;
    set(&mut c.fabric, &flags.fabric);
    set(&mut c.profile, &flags.profile);
    set(&mut c.sim.jitter, &flags.jitter);
    c.sim.swarm |= flags.swarm;
    set(&mut c.sim.emulated_nodes, &flags.emulated_nodes);
    set(&mut c.backoff.base_ns, &flags.backoff_base_ns);
    set(&mut c.backoff.cap_ns, &flags.backoff_cap_ns);
    set(&mut c.location_cache_entries, &flags.location_cache);
    c.location_cache_warm |= flags.warm_location_cache;
    set(&mut c.replication, &flags.replication);
    set(&mut c.replication_options.ring_bytes, &flags.log_ring_bytes);

    let f = &flags.faults;
    c.faults.extend(f.fault.iter().cloned());
    if f.heartbeat_interval_us.is_some() {
        c.failure_detector.heartbeat_interval_us = f.heartbeat_interval_us;
    }
    if f.detector_timeout_us.is_some() {
        c.failure_detector.timeout_us = f.detector_timeout_us;
    }
    if f.failure_detector.is_some() {
        c.failure_detector.enabled = f.failure_detector;
    }

    let u = &flags.ucx;
    set(&mut c.ucx.transport, &u.transport);
    set(&mut c.ucx.local_atomics, &u.local_atomics);
    set(&mut c.ucx.join_timeout_s, &u.join_timeout);
    set(&mut c.ucx.stall_timeout_s, &u.stall_timeout);

    let y = &flags.ycsb;
    set(&mut c.ycsb.rows_per_node, &y.rows_per_node);
    set(&mut c.ycsb.record_bytes, &y.record_bytes);
    set(&mut c.ycsb.ops_per_txn, &y.ops_per_txn);
    set(&mut c.ycsb.write_ratio, &y.write_ratio);
    if y.update_txn_ratio.is_some() {
        c.ycsb.update_txn_ratio = y.update_txn_ratio;
    }
    set(&mut c.ycsb.distribution, &y.distribution);
    set(&mut c.ycsb.theta, &y.theta);
    set(&mut c.ycsb.hot_fraction, &y.hot_fraction);
    set(&mut c.ycsb.hot_probability, &y.hot_probability);
    set(&mut c.ycsb.compute_us, &y.compute_us);
    if y.partitions_per_txn.is_some() {
        c.ycsb.partitions_per_txn = y.partitions_per_txn;
    }

    let t = &flags.tpcc;
    set(&mut c.tpcc.warehouses_per_node, &t.warehouses);
    set(&mut c.tpcc.items, &t.items);
    set(
        &mut c.tpcc.customers_per_district,
        &t.customers_per_district,
    );
    set(&mut c.tpcc.insert_headroom_per_district, &t.insert_headroom);
    set(
        &mut c.tpcc.remote_item_probability,
        &t.remote_item_probability,
    );
    set(
        &mut c.tpcc.invalid_item_probability,
        &t.invalid_item_probability,
    );
    set(
        &mut c.tpcc.payment_remote_probability,
        &t.payment_remote_probability,
    );
    set(
        &mut c.tpcc.by_last_name_probability,
        &t.by_last_name_probability,
    );
    if let Some(v) = &t.tpcc_mix {
        if v == "new-order-distributed" {
            c.tpcc.mix = TpccMix::NEW_ORDER_ONLY;
            c.tpcc.new_order_always_distributed = true;
        } else {
            c.tpcc.mix = TpccMix::parse(v).ok_or_else(|| {
                usage(format!(
                    "--tpcc-mix `{v}` is not a mix; allowed: standard, new-order-only, new-order-distributed, or five weights NO,P,OS,D,SL such as 45,43,4,4,4"
                ))
            })?;
        }
    }
    apply_workload_flags(c, flags)?;
    Ok((config, flags.hybrid))
}

/// The SmallBank, PPS and TPC-E flags (`--sb-…`, `--pps-…`, `--tpce-…`).
fn apply_workload_flags(c: &mut Config, flags: &RunFlags) -> Result<(), CliError> {
    use crate::workloads::{common::parse_mix, pps, smallbank, tpce};
    fn set<T: Clone>(slot: &mut T, value: &Option<T>) {
        if let Some(value) = value {
            *slot = value.clone();
        }
    }
    let sb = &flags.smallbank;
    set(
        &mut c.smallbank.accounts_per_worker,
        &sb.sb_accounts_per_worker,
    );
    set(&mut c.smallbank.hot_account_fraction, &sb.sb_hot_fraction);
    set(
        &mut c.smallbank.hot_account_probability,
        &sb.sb_hot_probability,
    );
    set(&mut c.smallbank.distributed_probability, &sb.sb_distributed);
    set(&mut c.smallbank.max_amount, &sb.sb_max_amount);
    set(&mut c.smallbank.lookup_accounts, &sb.sb_lookup_accounts);
    if let Some(v) = &sb.sb_mix {
        let weights = parse_mix("--sb-mix", v, &smallbank::TXN_TYPES).map_err(usage)?;
        c.smallbank.mix = smallbank::SmallBankMix::from_weights(&weights);
    }
    let p = &flags.pps;
    set(&mut c.pps.products_per_node, &p.pps_products_per_node);
    set(&mut c.pps.parts_per_node, &p.pps_parts_per_node);
    set(&mut c.pps.suppliers_per_node, &p.pps_suppliers_per_node);
    set(&mut c.pps.parts_per_product, &p.pps_parts_per_product);
    set(&mut c.pps.parts_per_supplier, &p.pps_parts_per_supplier);
    set(&mut c.pps.local_part_probability, &p.pps_local_parts);
    set(&mut c.pps.max_quantity, &p.pps_max_quantity);
    set(&mut c.pps.initial_stock, &p.pps_initial_stock);
    if let Some(v) = &p.pps_mix {
        c.pps.mix =
            pps::PpsMix::from_weights(&parse_mix("--pps-mix", v, &pps::TXN_TYPES).map_err(usage)?);
    }
    let t = &flags.tpce;
    set(&mut c.tpce.customers_per_node, &t.tpce_customers_per_node);
    set(&mut c.tpce.max_accounts_per_customer, &t.tpce_max_accounts);
    set(
        &mut c.tpce.holdings_per_account,
        &t.tpce_holdings_per_account,
    );
    set(&mut c.tpce.securities_per_node, &t.tpce_securities_per_node);
    set(&mut c.tpce.feed_size, &t.tpce_feed_size);
    if let Some(v) = &t.tpce_mix {
        c.tpce.mix = tpce::TpceMix::from_weights(
            &parse_mix("--tpce-mix", v, &tpce::TXN_TYPES).map_err(usage)?,
        );
    }
    Ok(())
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

fn command_run(mut flags: RunFlags, outputs: Outputs) -> Result<i32, CliError> {
    flags.check |= outputs.history.is_some();
    let config = run_config(&flags)?;
    if config.fabric == FabricKind::Ucx {
        return Err(usage(engine::UCX_ONE_PROCESS));
    }
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
        "{} · {} · {} node(s) × {} worker(s) × {} coroutine(s) · {} fabric · seed {}",
        c.protocol.name(),
        report.workload,
        c.nodes,
        c.workers,
        c.coroutines,
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
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        serde_json::to_writer_pretty(&mut out, &output.report)
            .map_err(std::io::Error::other)
            .and_then(|_| out.write_all(b"\n"))
            .map_err(|e| failed(format!("cannot write the report to stdout: {e}")))?;
    } else {
        print!("{}", output.report.table());
        if let Some(path) = &outputs.json {
            write_json(path, &output.report)?;
        }
    }
    if let (Some(path), Some(history)) = (&outputs.history, &output.history) {
        write_file(path, |out| history.write_jsonl(out))?;
    }
    Ok(check_exit(&[&output.report]))
}

fn command_demo(a: args::DemoArgs) -> Result<i32, CliError> {
    let (duration_s, warmup_s) = (a.duration.unwrap_or(2.0), a.warmup.unwrap_or(0.5));
    let mut configs = demo_configs(duration_s, warmup_s);
    for config in &mut configs {
        engine::validate(config).map_err(|e| usage(e.0))?;
    }
    if let Some(path) = &a.json {
        check_output_path("--json", path)?;
    }
    let mut reports = Vec::new();
    for config in configs {
        eprintln!(
            "running {} with {} verbs for {:.1} s (+{:.1} s warm-up), checker on…",
            config.protocol.name(),
            config.primitive.name(),
            duration_s,
            warmup_s
        );
        let output = engine::run(&config).map_err(|e| failed(e.to_string()))?;
        reports.push(output.report);
    }
    print!("{}", demo_table(&reports));
    if let Some(path) = &a.json {
        write_json(path, &reports)?;
    }
    Ok(check_exit(&reports.iter().collect::<Vec<_>>()))
}

/// The protocols of `verbena check --protocol`: a list, each implemented.
fn parse_check_protocols(text: &str) -> Result<Vec<ProtocolKind>, CliError> {
    text.split(',')
        .map(|name| {
            let protocol = ProtocolKind::parse(name.trim()).ok_or_else(|| {
                usage(format!(
                    "unknown protocol `{name}`; protocols: {}",
                    ProtocolKind::ALL.map(|p| p.name()).join(", ")
                ))
            })?;
            if !protocol.implemented() {
                return Err(usage(format!(
                    "protocol {} is not implemented in this build yet; implemented: {}",
                    protocol.name(),
                    ProtocolKind::implemented_names().join(", ")
                )));
            }
            Ok(protocol)
        })
        .collect()
}

// ---- multi-process runs over UCX: `verbena node`, `verbena launch` ----

/// `verbena node`: this process is one node of a `ucx` run.
fn command_node(a: args::NodeArgs) -> Result<i32, CliError> {
    let from_env =
        crate::cluster::launch::rank_from_env(|name| std::env::var(name).ok()).map_err(usage)?;
    let rank = match (a.rank, &from_env) {
        (Some(rank), _) => rank,
        (None, Some(source)) => source.rank,
        (None, None) => {
            return Err(usage(
                "verbena node needs --rank R (or a launcher's SLURM_PROCID, OMPI_COMM_WORLD_RANK or PMI_RANK)",
            ))
        }
    };
    let bootstrap = a
        .bootstrap
        .clone()
        .or_else(|| std::env::var("VERBENA_BOOTSTRAP").ok())
        .ok_or_else(|| {
            usage(
                "verbena node needs --bootstrap HOST:PORT (rank 0's address; or VERBENA_BOOTSTRAP)",
            )
        })?;
    if !bootstrap.contains(':') {
        return Err(usage(format!("--bootstrap `{bootstrap}` is not HOST:PORT")));
    }
    let mut flags = a.flags;
    if let Some(source) = &from_env {
        // The launcher's size is the default; a --nodes flag wins.
        flags.nodes.get_or_insert(source.size);
    }
    flags.fabric = Some(FabricKind::Ucx);
    flags.check |= a.outputs.history.is_some();
    let config = run_config(&flags)?;
    if let Some(source) = &from_env {
        if source.size != config.nodes {
            return Err(usage(format!(
                "--nodes {} contradicts the launcher's {} (size {})",
                config.nodes, source.origin, source.size
            )));
        }
    }
    if rank >= config.nodes {
        return Err(usage(format!(
            "--rank {rank} is out of range; allowed: 0..={} (--nodes {})",
            config.nodes - 1,
            config.nodes
        )));
    }
    // Rank 0 writes the outputs; it alone checks them.
    if rank == 0 {
        a.outputs.check()?;
    }
    let key = cluster_key(a.cluster_key.as_deref())?;
    let job = crate::cluster::auth::job_id_from_env(|name| std::env::var(name).ok())
        .map(|(id, _)| id)
        .unwrap_or_default();
    let options = crate::cluster::launch::NodeOptions {
        rank,
        bootstrap,
        key,
        job,
    };
    run_node_and_report(&config, options, &a.outputs)
}

/// The job's key: `--cluster-key`, else `VERBENA_CLUSTER_KEY`, else none.
fn cluster_key(flag: Option<&str>) -> Result<Option<crate::cluster::auth::ClusterKey>, CliError> {
    use crate::cluster::auth::ClusterKey;
    match flag {
        Some(text) => ClusterKey::parse(text, "--cluster-key").map(Some),
        None => match std::env::var("VERBENA_CLUSTER_KEY") {
            Ok(text) => ClusterKey::parse(&text, "VERBENA_CLUSTER_KEY").map(Some),
            Err(_) => Ok(None),
        },
    }
    .map_err(usage)
}

/// `verbena launch`: starts every node of a `ucx` run; `given` are the run
/// and output flags as given, passed on to every rank.
fn command_launch(a: args::LaunchArgs, given: Vec<String>) -> Result<i32, CliError> {
    use crate::cluster::launch::{free_local_port, read_hosts, spawn_rank, wait_all, Spawn};
    let hosts = match (a.local, &a.hosts) {
        (Some(_), Some(_)) => return Err(usage("give either --local N or --hosts FILE, not both")),
        (Some(count), None) => {
            if count == 0 || count > 256 {
                return Err(usage(format!(
                    "--local {count} is out of range; allowed: 1..=256 processes"
                )));
            }
            vec![None; count as usize]
        }
        (None, Some(path)) => read_hosts(path)
            .map_err(usage)?
            .into_iter()
            .map(Some)
            .collect(),
        (None, None) => return Err(usage("verbena launch needs --local N or --hosts FILE")),
    };
    let nodes = hosts.len() as u32;
    // Check the flags once here, before any process starts.
    let mut flags = a.flags;
    flags.nodes.get_or_insert(nodes);
    flags.fabric = Some(FabricKind::Ucx);
    flags.check |= a.outputs.history.is_some();
    let config = run_config(&flags)?;
    if config.nodes != nodes {
        return Err(usage(format!(
            "--nodes {} contradicts the {nodes} process(es) to launch",
            config.nodes
        )));
    }
    a.outputs.check()?;
    // Every launch is a job of its own: the user's key, or a random one.
    let key = match cluster_key(a.cluster_key.as_deref())? {
        Some(key) => key,
        None => crate::cluster::auth::ClusterKey::generate().map_err(failed)?,
    };
    let job_id = crate::cluster::auth::fresh_job_id().map_err(failed)?;
    let job = crate::cluster::launch::Job {
        key: &key,
        id: &job_id,
    };
    let remote_exe = match &a.remote_exe {
        Some(path) => path.clone(),
        None => std::env::current_exe()
            .map(|p| p.display().to_string())
            .map_err(|e| failed(format!("cannot find this program's path: {e}")))?,
    };
    let bootstrap = match &hosts[0] {
        None => format!("127.0.0.1:{}", free_local_port().map_err(failed)?),
        Some(host) => format!("{host}:{}", a.port.unwrap_or(17017)),
    };
    let mut children = Vec::with_capacity(hosts.len());
    for (rank, host) in hosts.iter().enumerate() {
        let spawn = match host {
            None => Spawn::Local,
            Some(host) => Spawn::Ssh {
                host,
                remote_exe: &remote_exe,
            },
        };
        match spawn_rank(&spawn, rank as u32, nodes, &bootstrap, &given, &job) {
            Ok(child) => children.push((rank as u32, child)),
            Err(e) => {
                for (_, mut child) in children {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                return Err(failed(e));
            }
        }
    }
    let grace = std::time::Duration::from_secs_f64(
        config.ucx.join_timeout_s + 3.0 * config.ucx.stall_timeout_s,
    );
    let tolerant =
        config.replication > 1 && crate::config::faults::DetectorSettings::of(&config).is_some();
    Ok(wait_all(children, grace, tolerant))
}

/// `verbena fabric-bench`: starts two local processes (or, with the
/// internal `--rank`/`--bootstrap`, is one of them); `raw` are its
/// arguments as given, passed on to both.
fn command_fabric_bench(a: args::FabricBenchArgs, raw: &[String]) -> Result<i32, CliError> {
    let socket = a.link.as_deref() == Some("socket");
    let transport = a.transport.unwrap_or(if socket {
        UcxTransport::Tcp
    } else {
        UcxTransport::Shm
    });
    let op =
        a.op.as_deref()
            .unwrap_or(if socket { "rpc" } else { "read" });
    let bytes = a.bytes.unwrap_or(8);
    if bytes == 0 || bytes % 8 != 0 || bytes > 1 << 20 {
        return Err(usage(format!(
            "--bytes {bytes} is not allowed; allowed: a multiple of 8 in 8..=1048576"
        )));
    }
    let window = a.window.unwrap_or(16);
    if window == 0 || window > 1024 {
        return Err(usage(format!(
            "--window {window} is out of range; allowed: 1..=1024"
        )));
    }
    let seconds = a.seconds.unwrap_or(2.0);
    if !(0.1..=600.0).contains(&seconds) {
        return Err(usage(format!(
            "--seconds {seconds} is out of range; allowed: [0.1, 600]"
        )));
    }
    if socket && (op != "rpc" || transport != UcxTransport::Tcp) {
        return Err(usage(format!(
            "--link socket runs RPCs over TCP only; given --op {op} --transport {}; allowed: --op rpc --transport tcp",
            transport.name()
        )));
    }
    if !socket && !cfg!(feature = "ucx") {
        return Err(usage(crate::config::UCX_MISSING));
    }
    match (a.rank, &a.bootstrap) {
        (Some(rank), Some(bootstrap)) => {
            if rank > 1 {
                return Err(usage("--rank of fabric-bench is 0 or 1"));
            }
            if socket {
                return match crate::cluster::socket_bench::run_rank(
                    rank, bootstrap, window, bytes, seconds,
                ) {
                    Ok(Some(line)) => {
                        println!("{line}");
                        Ok(EXIT_OK)
                    }
                    Ok(None) => Ok(EXIT_OK),
                    Err(e) => Err(failed(format!("fabric-bench rank {rank}: {e}"))),
                };
            }
            fabric_bench_rank(transport, op, bytes, window, seconds, rank, bootstrap)
        }
        _ => {
            let port = crate::cluster::launch::free_local_port().map_err(failed)?;
            let exe = std::env::current_exe()
                .map_err(|e| failed(format!("cannot find this program's path: {e}")))?;
            let mut children = Vec::new();
            for rank in 0..2u32 {
                let mut command = std::process::Command::new(&exe);
                command.arg("fabric-bench").args(raw).args([
                    "--rank".to_string(),
                    rank.to_string(),
                    "--bootstrap".to_string(),
                    format!("127.0.0.1:{port}"),
                ]);
                if rank == 1 {
                    command.stdout(std::process::Stdio::null());
                }
                let child = command
                    .spawn()
                    .map_err(|e| failed(format!("starting rank {rank}: {e}")))?;
                children.push((rank, child));
            }
            Ok(crate::cluster::launch::wait_all(
                children,
                std::time::Duration::from_secs(30),
                false,
            ))
        }
    }
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
        "protocol     built  stages (RCC hybrid-code bit; 1 = one-sided)          all one-sided"
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
            "{:<12} {:<6} {:<52} {}",
            protocol.name(),
            if protocol.implemented() { "yes" } else { "no" },
            stages,
            protocol.stage_bits()
        );
    }
    print!("{out}");
    Ok(EXIT_OK)
}

/// `verbena check`: the seeded correctness matrix on `sim`.
fn command_check(a: args::CheckArgs) -> Result<i32, CliError> {
    use crate::experiments::matrix::{self, Case, Failure};
    let seeds = a.seeds.unwrap_or(10);
    let failures = match &a.failover {
        Some(list) => parse_check_failures(list)?,
        None => vec![Failure::None],
    };
    let first_seed = a.seed.unwrap_or(1);
    let protocols: Vec<ProtocolKind> = match &a.protocol {
        Some(list) => parse_check_protocols(list)?,
        None => ProtocolKind::ALL
            .into_iter()
            .filter(|p| p.implemented())
            .collect(),
    };
    let hybrid = a.hybrid;
    let workloads = match &a.workload {
        Some(list) => parse_check_workloads(list)?,
        None => vec![WorkloadKind::Ycsb],
    };
    let hashes_out = a.hashes.clone();
    if let Some(path) = &hashes_out {
        check_output_path("--hashes", path)?;
    }
    let hashes_expected = match &a.expect_hashes {
        Some(path) => {
            let recorded = std::fs::read_to_string(path).map_err(|e| {
                usage(format!(
                    "--expect-hashes {path}: cannot read the recorded hashes: {e}"
                ))
            })?;
            Some((path.clone(), recorded))
        }
        None => None,
    };
    if seeds == 0 {
        return Err(usage("--seeds 0 runs nothing; allowed: 1 or more"));
    }
    // Pairs a protocol cannot run are left out (none since CALVIN runs
    // TPC-C; `WorkloadKind::runs_under` keeps the place for new ones).
    let skipped: Vec<String> = workloads
        .iter()
        .flat_map(|&w| protocols.iter().map(move |&p| (w, p)))
        .filter(|&(w, p)| !w.runs_under(p))
        .map(|(w, p)| format!("{} on {}", p.name(), w.name()))
        .collect();
    if !skipped.is_empty() {
        eprintln!(
            "check: skipping {} (cannot run this workload yet)",
            skipped.join(", ")
        );
    }
    if !workloads
        .iter()
        .any(|&w| protocols.iter().any(|&p| w.runs_under(p)))
    {
        return Err(usage("no chosen protocol can run these workloads"));
    }
    let seed_range = first_seed..first_seed.saturating_add(seeds);
    if let Some(code) = hybrid {
        for &protocol in &protocols {
            if code & !protocol.stage_bits() != 0 {
                return Err(usage(format!(
                    "--hybrid {code} has bits for stages protocol {} lacks; its stages are {}",
                    protocol.name(),
                    protocol
                        .stages()
                        .iter()
                        .map(|s| format!("{}={}", s.name(), s.bit()))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
    }
    let cases: Vec<Case> = match hybrid {
        Some(code) => {
            let only = |_, _| vec![code];
            matrix::cases_where(&workloads, &protocols, seed_range, &failures, only)
        }
        None if failures == [Failure::None] => matrix::cases_of(&workloads, &protocols, seed_range),
        None => matrix::failover_cases(&workloads, &protocols, seed_range, &failures),
    };
    let cases: Vec<Case> = cases
        .into_iter()
        .filter(|case| case.workload.runs_under(case.protocol))
        .collect();
    if cases.is_empty() {
        return Err(usage(
            "these choices leave no case to run (CALVIN's failover cases are crashes only: crash-r2, crash-r3)",
        ));
    }
    let started = std::time::Instant::now();
    let outcomes = run_cases_in_parallel(&cases);
    let mut failed = 0;
    for outcome in &outcomes {
        if !outcome.passed {
            failed += 1;
            eprintln!(
                "FAIL {} {} seed {} code {}{} ({}): {}\n  replay: {}",
                outcome.case.workload.name(),
                outcome.case.protocol.name(),
                outcome.case.seed,
                outcome.case.code,
                match outcome.case.failure {
                    Failure::None => String::new(),
                    failure => format!(" {}", failure.name()),
                },
                matrix::plan_of(outcome.case.protocol, outcome.case.code).describe(),
                outcome.detail,
                matrix::replay_command(outcome.case)
            );
            if cases.len() == 1 {
                eprint!("{}", outcome.report_table);
            }
        }
    }
    if let Some(path) = &hashes_out {
        let text = matrix::hash_file(&outcomes);
        write_file(path, |out| out.write_all(text.as_bytes()))?;
    }
    if let Some((path, recorded)) = &hashes_expected {
        let differences = matrix::compare_hashes(&outcomes, recorded);
        for difference in &differences {
            eprintln!("HASH {difference}");
        }
        println!(
            "check: hashes of {} cases compared with {path}: {} differ",
            outcomes.len(),
            differences.len()
        );
        failed += differences.len();
    }
    let committed: u64 = outcomes.iter().map(|o| o.committed).sum();
    println!(
        "check: {} cases ({} workload(s) × {} protocol(s) × seeds {}..={} × plans), {} failed, {} transactions committed and checked, {:.1} s",
        outcomes.len(),
        workloads.len(),
        protocols.len(),
        first_seed,
        first_seed + seeds - 1,
        failed,
        committed,
        started.elapsed().as_secs_f64()
    );
    Ok(if failed == 0 {
        EXIT_OK
    } else {
        EXIT_CHECK_FAILED
    })
}

/// The failures of `verbena check --failover`: a list, or `all`.
fn parse_check_failures(text: &str) -> Result<Vec<crate::experiments::matrix::Failure>, CliError> {
    use crate::experiments::matrix::Failure;
    let names = Failure::FAILOVER.map(|f| f.name());
    parse_named_list(
        text,
        "failure",
        "check --failover",
        &Failure::FAILOVER,
        &names,
        Failure::parse,
    )
}

/// The workloads of `verbena check --workload`: a list, or `all`.
fn parse_check_workloads(text: &str) -> Result<Vec<WorkloadKind>, CliError> {
    let all = WorkloadKind::NAMED.map(|(_, kind)| kind);
    let names = WorkloadKind::NAMED.map(|(name, _)| name);
    parse_named_list(text, "workload", "check", &all, &names, WorkloadKind::parse)
}

/// A comma-separated list of `what`s named as in `names` (each once, in
/// the order given), or `all` of them; an unknown name is refused with
/// the allowed ones.
fn parse_named_list<T: Copy + PartialEq, N: std::fmt::Display>(
    text: &str,
    what: &str,
    flag_of: &str,
    all: &[T],
    names: &[N],
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Vec<T>, CliError> {
    if text.trim() == "all" {
        return Ok(all.to_vec());
    }
    let mut chosen = Vec::new();
    for name in text.split(',') {
        let item = parse(name).ok_or_else(|| {
            let allowed: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            usage(format!(
                "unknown {what} `{}` for {flag_of}; allowed: {}, or all",
                name.trim(),
                allowed.join(", ")
            ))
        })?;
        if !chosen.contains(&item) {
            chosen.push(item);
        }
    }
    Ok(chosen)
}

/// Runs the cases on every core (each `sim` run is one thread), printing a
/// dot per case; the outcomes come back in case order.
fn run_cases_in_parallel(
    cases: &[crate::experiments::matrix::Case],
) -> Vec<crate::experiments::matrix::CaseOutcome> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let outcomes = Mutex::new(Vec::with_capacity(cases.len()));
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..threads.min(cases.len()) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(&case) = cases.get(index) else {
                    return;
                };
                let outcome = crate::experiments::matrix::run_case(case, |_| {});
                let mut all = outcomes.lock().expect("a check thread panicked");
                all.push((index, outcome));
                if all.len() % 50 == 0 {
                    eprintln!("  {} / {} cases", all.len(), cases.len());
                }
            });
        }
    });
    let mut outcomes = outcomes.into_inner().expect("a check thread panicked");
    outcomes.sort_by_key(|(index, _)| *index);
    outcomes.into_iter().map(|(_, outcome)| outcome).collect()
}

/// The configurations `verbena demo` compares.
pub fn demo_configs(duration_s: f64, warmup_s: f64) -> Vec<Config> {
    let mut configs = Vec::new();
    for protocol in [ProtocolKind::NoWait, ProtocolKind::Occ] {
        for primitive in [Primitive::OneSided, Primitive::Rpc] {
            configs.push(Config {
                protocol,
                primitive,
                duration_s,
                warmup_s,
                check: true,
                ..Config::default()
            });
        }
    }
    configs
}

/// One row per report: the comparison `verbena demo` prints.
pub fn demo_table(reports: &[Report]) -> String {
    let mut out = String::new();
    if let Some(first) = reports.first() {
        let c = &first.config;
        let _ = writeln!(
            out,
            "\nYCSB, {} nodes × {} worker × {} coroutines, {} ops/txn, {:.0} % writes, hot area {} % of rows gets {:.0} % of accesses, {:.0} µs compute",
            c.nodes,
            c.workers,
            c.coroutines,
            c.ycsb.ops_per_txn,
            c.ycsb.write_ratio * 100.0,
            c.ycsb.hot_fraction * 100.0,
            c.ycsb.hot_probability * 100.0,
            c.ycsb.compute_us
        );
        if first.oversubscribed {
            let _ = writeln!(
                out,
                "(more worker threads than the {} cores: time-shared)",
                first.cores
            );
        }
    }
    let _ = writeln!(
        out,
        "{:<9} {:<9} {:>11} {:>7} {:>8} {:>8} {:>6} {:>6} {:>6} {:>5}  check",
        "protocol",
        "primitive",
        "txn/s",
        "abort%",
        "p50 µs",
        "p99 µs",
        "reads",
        "cas",
        "rpcs",
        "dbell",
    );
    for r in reports {
        let verdict = match &r.check {
            None => "off".to_string(),
            Some(c) if c.passed() => format!("serializable, invariants ok ({} txns)", c.txn_count),
            Some(c) => format!(
                "FAILED (serializable: {}, invariants: {})",
                c.serializable, c.invariants_ok
            ),
        };
        let v = &r.verbs_per_txn;
        let _ = writeln!(
            out,
            "{:<9} {:<9} {:>11.0} {:>7.2} {:>8.1} {:>8.1} {:>6.2} {:>6.2} {:>6.2} {:>5.2}  {}",
            r.config.protocol.name(),
            r.config.primitive.name(),
            r.throughput_txn_per_s,
            r.abort_rate * 100.0,
            r.latency_us.p50,
            r.latency_us.p99,
            v.read,
            v.cas,
            v.rpc,
            v.doorbells,
            verdict
        );
    }
    out
}

#[cfg(feature = "ucx")]
fn run_node_and_report(
    config: &Config,
    options: crate::cluster::launch::NodeOptions,
    outputs: &Outputs,
) -> Result<i32, CliError> {
    let rank = options.rank;
    // Crash-stop: a rank whose thread panicked must not linger half alive
    // (its peers would wait on it); it dies at once, its connections
    // close, and the launcher reports it as failed.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        eprintln!("rank {rank}: a thread panicked (a bug in verbena); the process aborts");
        std::process::abort();
    }));
    let started = std::time::SystemTime::now();
    match crate::cluster::node::run_node(config, &options) {
        Ok(Some(output)) => emit_report(&output, outputs, started),
        Ok(None) => Ok(EXIT_OK),
        Err(engine::RunError::Config(e)) => Err(usage(e.0)),
        Err(engine::RunError::DeclaredFailed(e)) => Err(CliError {
            code: EXIT_DECLARED_FAILED,
            message: format!("rank {rank}: {e}"),
        }),
        Err(e) => Err(failed(format!("rank {rank}: {e}"))),
    }
}

#[cfg(not(feature = "ucx"))]
fn run_node_and_report(
    _config: &Config,
    _options: crate::cluster::launch::NodeOptions,
    _outputs: &Outputs,
) -> Result<i32, CliError> {
    // `Config::validate` refuses fabric ucx in such a build first.
    Err(usage(crate::config::UCX_MISSING))
}

#[cfg(feature = "ucx")]
fn fabric_bench_rank(
    transport: UcxTransport,
    op: &str,
    bytes: u32,
    window: u32,
    seconds: f64,
    rank: u32,
    bootstrap: &str,
) -> Result<i32, CliError> {
    use crate::cluster::fabric_bench::{run_rank, BenchOp, BenchOptions};
    let options = BenchOptions {
        transport,
        op: BenchOp::parse(op).expect("checked"),
        window,
        bytes,
        seconds,
    };
    match run_rank(&options, rank, bootstrap) {
        Ok(Some(line)) => {
            println!("{line}");
            Ok(EXIT_OK)
        }
        Ok(None) => Ok(EXIT_OK),
        Err(e) => Err(failed(format!("fabric-bench rank {rank}: {e}"))),
    }
}

#[cfg(not(feature = "ucx"))]
fn fabric_bench_rank(
    _transport: UcxTransport,
    _op: &str,
    _bytes: u32,
    _window: u32,
    _seconds: f64,
    _rank: u32,
    _bootstrap: &str,
) -> Result<i32, CliError> {
    Err(usage(crate::config::UCX_MISSING))
}
