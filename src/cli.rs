//! The `verbena` command line (ARCHITECTURE.md layer 10): `run`, `demo`,
//! `help`. A run's configuration comes from defaults, then an optional TOML
//! file (`--config`), then flags (flags win); `Config::validate` checks the
//! result. Every bad value exits with code 2 and a message that names the
//! value and what is allowed; nothing here panics on user input.
//!
//! Exit codes: 0 success; 1 the run failed (e.g. writing the report); 2 bad
//! input; 3 the run finished but `--check` found a violation; 4 (a `ucx`
//! rank) this rank was declared failed by its peers and stopped, the run
//! going on without it.

mod experiments;

use std::fmt::Write as _;
use std::io::Write as _;

use crate::config::{
    Config, FabricKind, KeyDistribution, LocalAtomics, LockMode, TpccMix, UcxTransport,
    WorkloadKind,
};
use crate::engine::{self, Report};
use crate::fabric::NetworkProfile;
use crate::protocols::{Primitive, ProtocolKind, Stage, StagePlan};

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILED: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_CHECK_FAILED: i32 = 3;
pub const EXIT_DECLARED_FAILED: i32 = 4;

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

pub const HELP: &str = "\
verbena — distributed in-memory transactions: every concurrency-control
protocol on one store, runtime and network; each stage one-sided or RPC.

USAGE:
    verbena run [FLAGS]     run one configuration and report it
    verbena demo [FLAGS]    YCSB on 2 nodes: NO_WAIT and OCC, one-sided and
                            RPC, checker on, one comparison table
    verbena check [FLAGS]   the seeded correctness matrix on the sim fabric
    verbena protocols       each protocol's stages and hybrid-code bits
    verbena sweep [FLAGS]   run every combination of knob values, with
                            repetitions; rows to CSV and JSON; resumable
    verbena hybrid [FLAGS]  every hybrid stage code of a protocol, ranked
                            (RCC §5.1), and the latency-breakdown pick
    verbena plot RESULTS    SVG/PNG figures and an HTML report of a sweep
    verbena reproduce NAME  a small-scale paper experiment and its report
                            (--list names them)
    verbena launch --local N [FLAGS]     N processes on this host, one per
                            node, over UCX (fabric ucx)
    verbena launch --hosts FILE [FLAGS]  one process per line of FILE, by ssh
    verbena node --rank R --nodes N --bootstrap HOST:PORT [FLAGS]
                            one node of a multi-process run, for any
                            launcher (rank/size also from srun, mpirun, PMI)
    verbena fabric-bench [FLAGS]  one verb type's rate between two local
                            processes over UCX (compare with ucx_perftest)
    verbena help            this text

RUN FLAGS (defaults in brackets; `--flag value` or `--flag=value`):
    --config FILE             TOML file with any of the keys below (flags win)
    --nodes N                 nodes [2]
    --workers N               worker threads per node [1]
    --coroutines N            transaction coroutines per worker [8]
    --workload W              ycsb | smallbank | pps | tpce-cp [ycsb]
    --protocol NAME           no_wait | wait_die | wound_wait | timestamp |
                              mvcc | occ | maat | sundial | cicada | drtm |
                              calvin [no_wait]
    --lock-mode M             2PL family: exclusive | shared [exclusive]
    --wait-die-starvation-fix B  true | false: RCC §4.3's fix [false]
    --calvin-epoch-us N       CALVIN: sequencing epoch, µs, 1..=1000000 [5000]
    --primitive P             onesided | rpc: every stage's default [onesided]
    --stages LIST             per-stage choice, e.g. read=rpc,lock=onesided
                              stages: lock, read, validate, renew, log,
                              commit, release, txn_broadcast_input,
                              value_forwarding (those the protocol has)
    --duration S              measured seconds [2]
    --warmup S                warm-up seconds, not measured [0.5]
    --seed N                  seed of every generator [1]
    --check                   record the history; run the serializability
                              checker and the workload invariants
    --json PATH               write the JSON report (`-`: to stdout, and the
                              table to stderr)
    --history PATH            write the committed history as JSON lines
                              (implies --check)
    --latency-log PATH        write HdrHistogram's interval log of commit
                              latencies: per second of the run's clock, all
                              and per transaction type (checked before the
                              run; rank 0 of a ucx run writes the merged log)
    --hybrid CODE             RCC hybrid code: bit set = stage one-sided
                              (28 or 0b11100; bits per `verbena protocols`)
    --fabric F                threads | sim (deterministic, virtual time)
                              [threads]; ucx: one process per node, run
                              with `verbena launch` or `verbena node`
    --profile P               network: none, cx4-edr, cx3, roce, tcp-10g,
                              cloud-lan, or a TOML file [none]; sim runs on
                              it, threads injects its round trips
    --jitter F                sim: random extra share of each one-way time
                              [0.1]
    --swarm                   sim: scale each latency class per seed
    --fault crash:N@S         crash node N S seconds into the run (virtual on
                              sim, wall on threads and ucx, where rank N
                              kills itself with SIGKILL); repeatable; also
                              pause:N@S+D on sim. Turns on the failure
                              detector; the report gains `recovery`
    --heartbeat-interval-us U failure detector heartbeat [per fabric]
    --detector-timeout-us U   silence before a peer is dead [per fabric]
    --failure-detector on|off run the detector without a planned fault; on
                              ucx with --replication >= 2 the survivors then
                              fail over a rank that is killed [on with --fault]
    --backoff-base-ns N       abort back-off base [1000]
    --replication R           copies of every partition, primary included: 1..=3, <= nodes [1]
    --log-ring-bytes N        coordinator log ring per worker per backup, bytes [65536]
    --backoff-cap-ns N        abort back-off cap [100000]
    --location-cache N        location-cache entries per worker, 0 = off [262144]
    --workload W              ycsb | tpcc [ycsb]
  UCX (fabric ucx: verbena launch / verbena node):
    --transport T             shm | tcp | rdma | auto: UCX_TLS [auto]
    --local-atomics A         nic | cpu: a node's own verbs through its NIC
                              (loopback) or on the CPU; cpu only with shm
                              or tcp [nic]
    --join-timeout S          wait for every rank to join [60]
    --stall-timeout S         a silent or unfinished rank is hung after [10]
  YCSB:
    --rows-per-node N         [100000]
    --record-bytes N          multiple of 8 [64]
    --ops-per-txn N           1..=64 [10]
    --write-ratio F           [0.2]
    --distribution D          uniform | zipf | hot [hot]
    --theta F                 Zipf skew in [0, 1) [0.99]
    --hot-fraction F          share of rows in the hot area [0.001]
    --hot-probability F       share of accesses to the hot area [0.1]
    --compute-us F            execution-phase compute per txn, µs [5]
    --partitions-per-txn N    nodes a transaction touches [min(2, nodes)]
  TPC-C (--workload tpcc; `[tpcc]` in a config file):
    --warehouses N            warehouses per node [1]
    --items N                 ITEM rows (specification: 100000) [100000]
    --customers-per-district N  customers, and initial orders, per district
                              (specification: 3000) [3000]
    --insert-headroom N       run-time orders each district has room for
                              [5000]
    --tpcc-mix MIX            standard (45,43,4,4,4) | new-order-only |
                              new-order-distributed (DrTM+H: NewOrder only,
                              each with a supplier on another node) |
                              NO,P,OS,D,SL weights [standard]
    --remote-item-probability F   NewOrder remote stock per item [0.01]
    --invalid-item-probability F  NewOrder rolled back (unused item) [0.01]
    --payment-remote-probability F  Payment remote customer [0.15]
    --by-last-name-probability F    Payment/OrderStatus by last name [0.6]
  SmallBank (--workload smallbank; DrTM Table 5, DrTM+H §5):
    --sb-accounts-per-worker N customers per worker thread [100000]
    --sb-hot-fraction F       share of customers that is hot [0.04]
    --sb-hot-probability F    share of accesses to hot customers [0.9]
    --sb-distributed F        probability a txn crosses nodes [1.0]
    --sb-max-amount N         amounts uniform in 1..=N [100]
    --sb-lookup-accounts B    read the accounts row first: true|false [false]
    --sb-mix LIST             weights, e.g. send_payment=25,balance=15 (types
                              not named get 0) [send_payment=25, amalgamate,
                              balance, deposit_checking, write_check,
                              transact_savings=15 each]
  PPS (--workload pps; Deneva §4.1):
    --pps-products-per-node N [10000]
    --pps-parts-per-node N    [10000]
    --pps-suppliers-per-node N [1000]
    --pps-parts-per-product N parts each product uses, 1..=32 [10]
    --pps-parts-per-supplier N parts each supplier supplies, 1..=32 [10]
    --pps-local-parts F       share of part assignments on the owner's node;
                              0 = uniform over the cluster [0]
    --pps-max-quantity N      order quantities uniform in 1..=N [10]
    --pps-initial-stock N     stock of each part when loaded [1000000000]
    --pps-mix LIST            order_product, lookup_product,
                              update_product_part, lookup_supplier
                              [40, 40, 20, 0]
  TPC-E customer-position (--workload tpce-cp; DrTM+H §5.5):
    --tpce-customers-per-node N   [5000]
    --tpce-max-accounts N         accounts per customer 1..=N, N <= 10 [10]
    --tpce-holdings-per-account N 1..=16 [4]
    --tpce-securities-per-node N  [6850]
    --tpce-feed-size N            securities a market_feed reprices [10]
    --tpce-mix LIST               customer_position, market_feed [100, 0]

CHECK FLAGS (verbena check: the correctness matrix on the sim fabric —
every implemented protocol × all one-sided, all RPC, each stage flipped,
random hybrid codes × seeds, YCSB under high contention, checker on):
    --seeds N                 seeds to run [10]
    --seed S                  first seed [1]
    --protocol P[,P…]         only these protocols [every implemented one]
    --hybrid CODE             only this hybrid code (replays a failure)
    --workload W[,W…]|all     workloads, each at a small contended scale
                              drawn from the seed: ycsb, tpcc, smallbank,
                              pps, tpce-cp [ycsb]

SWEEP FLAGS (verbena sweep; every RUN FLAG sets the base of each point):
    --vary KEY=V1,V2,...      a knob: any config key by TOML path
                              (ycsb.theta, profile, protocol_options.lock_mode),
                              its leaf name (theta) or flag name
                              (hot-probability), or hybrid / stages
                              (stages=read=rpc+lock=rpc); `|` separates values
                              that hold commas; protocol=all; repeatable
    --repeat N                runs per point, seeds seed, seed+1, ... [1]
    --out DIR                 results directory [results/sweep-<hash>]; the
                              same command resumes an interrupted sweep
    --restart                 discard another sweep's results in DIR
    --jobs N                  sim runs at once [1]
    --quiet                   no progress line
    --plot                    render figures and report.html afterwards
    --no-png                  SVG figures only (no Chromium screenshots)

HYBRID FLAGS (verbena hybrid --protocol P [RUN FLAGS]): --method
    exhaustive | breakdown | both [both], --repeat, --out, --jobs, --plot,
    --vary (e.g. coroutines=1,8: one enumeration per value)

PLOT: verbena plot RESULTS [--out DIR] [--x KNOB] [--no-png]
    RESULTS: a sweep/hybrid directory, results.json or rows.jsonl. Writes
    SVG figures, PNG copies when Chromium is installed, and report.html.

REPRODUCE: verbena reproduce --list | NAME [RUN FLAGS] [--out DIR] [--no-png]

LAUNCH FLAGS: --local N | --hosts FILE, --port P (bootstrap port of
    rank 0 with --hosts [17017]), --remote-exe PATH (verbena on the hosts
    [this binary's path]); every RUN FLAG is passed to every rank
NODE FLAGS: --rank R, --bootstrap HOST:PORT (rank 0 listens there; or
    VERBENA_BOOTSTRAP), --nodes N; rank and size may come from
    SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_RANK/SIZE or PMI_RANK/PMI_SIZE

FABRIC-BENCH FLAGS: --transport shm|tcp|rdma|auto [shm], --op
    read|write|cas|faa|rpc [read], --bytes N (READ/WRITE/RPC payload) [8],
    --window N (operations in flight) [16], --seconds S [2]

DEMO FLAGS: --duration S [2], --warmup S [0.5], --json PATH (all four reports)

EXIT CODES: 0 ok, 1 run failed, 2 bad input, 3 check found a violation
";

/// Runs the command line `args` (without the program name); returns the
/// exit code. Output goes to stdout, errors to stderr.
pub fn main_with_args(args: &[String]) -> i32 {
    match dispatch(args) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("verbena: {}", error.message);
            if error.code == EXIT_USAGE {
                eprintln!("(see `verbena help`)");
            }
            error.code
        }
    }
}

fn dispatch(args: &[String]) -> Result<i32, CliError> {
    let Some(command) = args.first() else {
        print!("{HELP}");
        return Ok(EXIT_OK);
    };
    match command.as_str() {
        "run" => command_run(&args[1..]),
        "demo" => command_demo(&args[1..]),
        "check" => command_check(&args[1..]),
        "protocols" => command_protocols(),
        "sweep" => experiments::command_sweep(&args[1..]),
        "hybrid" => experiments::command_hybrid(&args[1..]),
        "plot" => experiments::command_plot(&args[1..]),
        "reproduce" => experiments::command_reproduce(&args[1..]),
        "node" => command_node(&args[1..]),
        "launch" => command_launch(&args[1..]),
        "fabric-bench" => command_fabric_bench(&args[1..]),
        "help" | "--help" | "-h" => {
            print!("{HELP}");
            Ok(EXIT_OK)
        }
        "--version" | "-V" | "version" => {
            println!("verbena {}", env!("CARGO_PKG_VERSION"));
            Ok(EXIT_OK)
        }
        other => Err(usage(format!(
            "unknown command `{other}`; commands: run, demo, check, protocols, sweep, hybrid, plot, reproduce, node, launch, fabric-bench, help"
        ))),
    }
}

/// Where a run's outputs go.
#[derive(Default)]
struct Outputs {
    json: Option<String>,
    history: Option<String>,
    latency_log: Option<String>,
}

/// Fails with a usage error unless `path` can be created (or already is a
/// writable file), so that a bad path fails before the run, not after it.
/// Nothing is left behind: a file made by the check is removed again.
fn check_creatable(flag: &str, path: &str) -> Result<(), CliError> {
    let existed = std::path::Path::new(path).exists();
    match std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
    {
        Ok(_) => {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(e) => Err(usage(format!(
            "{flag} {path}: cannot create that file ({e}); give a path in a writable directory"
        ))),
    }
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

/// Splits `--flag=value` / `--flag value` pairs.
struct Flags<'a> {
    args: &'a [String],
    at: usize,
}

impl<'a> Flags<'a> {
    fn new(args: &'a [String]) -> Flags<'a> {
        Flags { args, at: 0 }
    }

    /// Next `(flag, inline value)`.
    fn next_flag(&mut self) -> Option<Result<(String, Option<String>), CliError>> {
        let arg = self.args.get(self.at)?;
        self.at += 1;
        if !arg.starts_with("--") {
            return Some(Err(usage(format!(
                "unexpected argument `{arg}`; flags start with --"
            ))));
        }
        Some(Ok(match arg.split_once('=') {
            Some((flag, value)) => (flag.to_string(), Some(value.to_string())),
            None => (arg.clone(), None),
        }))
    }

    fn value(&mut self, flag: &str, inline: Option<String>) -> Result<String, CliError> {
        if let Some(value) = inline {
            return Ok(value);
        }
        let value = self
            .args
            .get(self.at)
            .ok_or_else(|| usage(format!("{flag} needs a value")))?;
        self.at += 1;
        Ok(value.clone())
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

/// Flags of `verbena run` that take no value (the experiment commands
/// split their arguments by this list too).
const RUN_BARE_FLAGS: [&str; 2] = ["--check", "--swarm"];

/// Builds the configuration of `verbena run` from its flags.
fn parse_run_flags(args: &[String]) -> Result<(Config, Outputs), CliError> {
    let (mut config, outputs, hybrid) = parse_run_flags_unresolved(args)?;
    if let Some(code) = hybrid {
        apply_hybrid(&mut config, code)?;
    }
    config.validate().map_err(|e| usage(e.0))?;
    Ok((config, outputs))
}

/// The flags of `verbena run` applied to the defaults (or `--config`), before
/// `--hybrid` is applied and the config validated: sweeps set their knobs on
/// this and then resolve each point with [`resolve_run_config`].
fn parse_run_flags_unresolved(args: &[String]) -> Result<(Config, Outputs, Option<u16>), CliError> {
    // Split into (flag, value) pairs first: the file is read before any flag
    // applies, whatever its position, so flags override it.
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut flags = Flags::new(args);
    while let Some(flag) = flags.next_flag() {
        let (flag, inline) = flag?;
        if RUN_BARE_FLAGS.contains(&flag.as_str()) {
            if inline.is_some() {
                return Err(usage(format!("{flag} takes no value")));
            }
            pairs.push((flag, String::new()));
        } else {
            let value = flags.value(&flag, inline)?;
            pairs.push((flag, value));
        }
    }
    let mut config = match pairs.iter().rev().find(|(flag, _)| flag == "--config") {
        Some((_, path)) => load_toml(path)?,
        None => Config::default(),
    };
    let mut outputs = Outputs::default();
    let mut hybrid = None;
    for (flag, value) in pairs {
        let f = flag.as_str();
        let v = value.as_str();
        let count = "a whole number";
        let real = "a number";
        match f {
            "--config" => {}
            "--check" => config.check = true,
            "--nodes" => config.nodes = parse_number(f, v, count)?,
            "--workers" => config.workers = parse_number(f, v, count)?,
            "--coroutines" => config.coroutines = parse_number(f, v, count)?,
            "--protocol" => {
                config.protocol = ProtocolKind::parse(v).ok_or_else(|| {
                    usage(format!(
                        "unknown protocol `{v}`; protocols: {}",
                        ProtocolKind::ALL.map(|p| p.name()).join(", ")
                    ))
                })?
            }
            "--primitive" => {
                config.primitive = Primitive::parse(v).ok_or_else(|| {
                    usage(format!("unknown primitive `{v}`; allowed: onesided, rpc"))
                })?
            }
            "--stages" => {
                let given = parse_stages(v)?;
                for stage in given.stages() {
                    config.stages = config.stages.with(stage, given.get(stage));
                }
            }
            "--workload" => {
                config.workload = WorkloadKind::parse(v).ok_or_else(|| {
                    usage(format!(
                        "unknown workload `{v}`; workloads in this build: {}",
                        WorkloadKind::NAMED.map(|(name, _)| name).join(", ")
                    ))
                })?
            }
            "--duration" => config.duration_s = parse_number(f, v, real)?,
            "--warmup" => config.warmup_s = parse_number(f, v, real)?,
            "--seed" => config.seed = parse_number(f, v, count)?,
            "--json" => outputs.json = Some(value),
            "--latency-log" => outputs.latency_log = Some(value),
            "--history" => {
                outputs.history = Some(value);
                config.check = true;
            }
            "--fabric" => {
                config.fabric = FabricKind::parse(v).ok_or_else(|| {
                    usage(format!("unknown fabric `{v}`; allowed: threads, sim, ucx"))
                })?
            }
            "--transport" => {
                config.ucx.transport = UcxTransport::parse(v).ok_or_else(|| {
                    usage(format!(
                        "unknown transport `{v}`; allowed: shm, tcp, rdma, auto"
                    ))
                })?
            }
            "--local-atomics" => {
                config.ucx.local_atomics = LocalAtomics::parse(v).ok_or_else(|| {
                    usage(format!("unknown local atomics `{v}`; allowed: nic, cpu"))
                })?
            }
            "--join-timeout" => config.ucx.join_timeout_s = parse_number(f, v, real)?,
            "--stall-timeout" => config.ucx.stall_timeout_s = parse_number(f, v, real)?,
            "--profile" => config.profile = NetworkProfile::resolve(v).map_err(usage)?,
            "--jitter" => config.sim.jitter = parse_number(f, v, real)?,
            "--swarm" => config.sim.swarm = true,
            "--hybrid" => hybrid = Some(parse_hybrid_code(v)?),
            "--backoff-base-ns" => config.backoff.base_ns = parse_number(f, v, count)?,
            // Replication (issue 8, `replication`).
            "--replication" => config.replication = parse_number(f, v, count)?,
            "--log-ring-bytes" => {
                config.replication_options.ring_bytes = parse_number(f, v, count)?
            }
            "--calvin-epoch-us" => {
                config.protocol_options.calvin_epoch_us = parse_number(f, v, count)?
            }
            "--backoff-cap-ns" => config.backoff.cap_ns = parse_number(f, v, count)?,
            "--location-cache" => config.location_cache_entries = parse_number(f, v, count)?,
            "--rows-per-node" => config.ycsb.rows_per_node = parse_number(f, v, count)?,
            "--record-bytes" => config.ycsb.record_bytes = parse_number(f, v, count)?,
            "--ops-per-txn" => config.ycsb.ops_per_txn = parse_number(f, v, count)?,
            "--write-ratio" => config.ycsb.write_ratio = parse_number(f, v, real)?,
            "--distribution" => {
                config.ycsb.distribution = match v {
                    "uniform" => KeyDistribution::Uniform,
                    "zipf" => KeyDistribution::Zipf,
                    "hot" => KeyDistribution::Hot,
                    other => {
                        return Err(usage(format!(
                            "unknown distribution `{other}`; allowed: uniform, zipf, hot"
                        )))
                    }
                }
            }
            "--theta" => config.ycsb.theta = parse_number(f, v, real)?,
            "--hot-fraction" => config.ycsb.hot_fraction = parse_number(f, v, real)?,
            "--hot-probability" => config.ycsb.hot_probability = parse_number(f, v, real)?,
            "--compute-us" => config.ycsb.compute_us = parse_number(f, v, real)?,
            "--lock-mode" => {
                config.protocol_options.lock_mode = match v {
                    "exclusive" => LockMode::Exclusive,
                    "shared" => LockMode::Shared,
                    other => {
                        return Err(usage(format!(
                            "unknown lock mode `{other}`; allowed: exclusive, shared"
                        )))
                    }
                }
            }
            "--wait-die-starvation-fix" => {
                config.protocol_options.wait_die_starvation_fix = match v {
                    "true" => true,
                    "false" => false,
                    other => {
                        return Err(usage(format!(
                    "--wait-die-starvation-fix = `{other}` is not allowed; allowed: true, false"
                )))
                    }
                }
            }
            "--partitions-per-txn" => {
                config.ycsb.partitions_per_txn = Some(parse_number(f, v, count)?)
            }
            other => {
                if !apply_workload_flag(&mut config, other, v)?
                    && !apply_fault_flag(&mut config, other, v)?
                {
                    return Err(usage(format!("unknown flag {other} for `verbena run`")));
                }
            }
        }
    }
    Ok((config, outputs, hybrid))
}

/// The fault-injection flags of `verbena run` (`fault`): `--fault`
/// (repeatable), `--heartbeat-interval-us`, `--detector-timeout-us`;
/// false if `flag` is not one of them.
fn apply_fault_flag(config: &mut Config, flag: &str, value: &str) -> Result<bool, CliError> {
    let real = "a number";
    match flag {
        "--fault" => config
            .faults
            .push(crate::fault::RunFault::parse(value).map_err(usage)?),
        "--heartbeat-interval-us" => {
            config.failure_detector.heartbeat_interval_us = Some(parse_number(flag, value, real)?)
        }
        "--detector-timeout-us" => {
            config.failure_detector.timeout_us = Some(parse_number(flag, value, real)?)
        }
        "--failure-detector" => {
            config.failure_detector.enabled = Some(match value {
                "on" => true,
                "off" => false,
                other => {
                    return Err(usage(format!(
                        "--failure-detector `{other}`; allowed: on, off"
                    )))
                }
            })
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// The TPC-C flags of `verbena run`; false if `flag` is not one of them.
fn apply_tpcc_flag(config: &mut Config, flag: &str, value: &str) -> Result<bool, CliError> {
    let (f, v) = (flag, value);
    let count = "a whole number";
    let real = "a number";
    let t = &mut config.tpcc;
    match f {
        "--warehouses" => t.warehouses_per_node = parse_number(f, v, count)?,
        "--items" => t.items = parse_number(f, v, count)?,
        "--customers-per-district" => t.customers_per_district = parse_number(f, v, count)?,
        "--insert-headroom" => t.insert_headroom_per_district = parse_number(f, v, count)?,
        "--remote-item-probability" => t.remote_item_probability = parse_number(f, v, real)?,
        "--invalid-item-probability" => t.invalid_item_probability = parse_number(f, v, real)?,
        "--payment-remote-probability" => t.payment_remote_probability = parse_number(f, v, real)?,
        "--by-last-name-probability" => t.by_last_name_probability = parse_number(f, v, real)?,
        "--tpcc-mix" => {
            if v == "new-order-distributed" {
                t.mix = TpccMix::NEW_ORDER_ONLY;
                t.new_order_always_distributed = true;
            } else {
                t.mix = TpccMix::parse(v).ok_or_else(|| {
                    usage(format!(
                        "--tpcc-mix `{v}` is not a mix; allowed: standard, new-order-only, new-order-distributed, or five weights NO,P,OS,D,SL such as 45,43,4,4,4"
                    ))
                })?;
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// The flags of the SmallBank, PPS and TPC-E workloads (`--sb-…`,
/// `--pps-…`, `--tpce-…`); false when `flag` is none of them.
fn apply_workload_flag(config: &mut Config, flag: &str, v: &str) -> Result<bool, CliError> {
    let count = "a whole number";
    let real = "a number";
    let boolean = |v: &str| match v.trim() {
        "true" | "on" | "yes" | "1" => Ok(true),
        "false" | "off" | "no" | "0" => Ok(false),
        other => Err(usage(format!(
            "{flag} `{other}` is not a switch; allowed: true, false"
        ))),
    };
    let sb = &mut config.smallbank;
    match flag {
        "--sb-accounts-per-worker" => sb.accounts_per_worker = parse_number(flag, v, count)?,
        "--sb-hot-fraction" => sb.hot_account_fraction = parse_number(flag, v, real)?,
        "--sb-hot-probability" => sb.hot_account_probability = parse_number(flag, v, real)?,
        "--sb-distributed" => sb.distributed_probability = parse_number(flag, v, real)?,
        "--sb-max-amount" => sb.max_amount = parse_number(flag, v, count)?,
        "--sb-lookup-accounts" => sb.lookup_accounts = boolean(v)?,
        "--sb-mix" => {
            let weights = crate::workloads::common::parse_mix(
                flag,
                v,
                &crate::workloads::smallbank::TXN_TYPES,
            )
            .map_err(usage)?;
            sb.mix = crate::workloads::smallbank::SmallBankMix::from_weights(&weights);
        }
        _ => return apply_pps_tpce_flag(config, flag, v),
    }
    Ok(true)
}

fn apply_pps_tpce_flag(config: &mut Config, flag: &str, v: &str) -> Result<bool, CliError> {
    use crate::workloads::{common::parse_mix, pps, tpce};
    let count = "a whole number";
    let (p, t) = (&mut config.pps, &mut config.tpce);
    match flag {
        "--pps-products-per-node" => p.products_per_node = parse_number(flag, v, count)?,
        "--pps-parts-per-node" => p.parts_per_node = parse_number(flag, v, count)?,
        "--pps-suppliers-per-node" => p.suppliers_per_node = parse_number(flag, v, count)?,
        "--pps-parts-per-product" => p.parts_per_product = parse_number(flag, v, count)?,
        "--pps-parts-per-supplier" => p.parts_per_supplier = parse_number(flag, v, count)?,
        "--pps-local-parts" => p.local_part_probability = parse_number(flag, v, "a number")?,
        "--pps-max-quantity" => p.max_quantity = parse_number(flag, v, count)?,
        "--pps-initial-stock" => p.initial_stock = parse_number(flag, v, count)?,
        "--pps-mix" => {
            p.mix = pps::PpsMix::from_weights(&parse_mix(flag, v, &pps::TXN_TYPES).map_err(usage)?)
        }
        "--tpce-customers-per-node" => t.customers_per_node = parse_number(flag, v, count)?,
        "--tpce-max-accounts" => t.max_accounts_per_customer = parse_number(flag, v, count)?,
        "--tpce-holdings-per-account" => t.holdings_per_account = parse_number(flag, v, count)?,
        "--tpce-securities-per-node" => t.securities_per_node = parse_number(flag, v, count)?,
        "--tpce-feed-size" => t.feed_size = parse_number(flag, v, count)?,
        "--tpce-mix" => {
            t.mix =
                tpce::TpceMix::from_weights(&parse_mix(flag, v, &tpce::TXN_TYPES).map_err(usage)?)
        }
        _ => return apply_tpcc_flag(config, flag, v),
    }
    Ok(true)
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

fn command_run(args: &[String]) -> Result<i32, CliError> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{HELP}");
        return Ok(EXIT_OK);
    }
    let (config, outputs) = parse_run_flags(args)?;
    if config.fabric == FabricKind::Ucx {
        return Err(usage(engine::UCX_ONE_PROCESS));
    }
    if let Some(path) = &outputs.latency_log {
        check_creatable("--latency-log", path)?;
    }
    let started = std::time::SystemTime::now();
    let output = engine::run(&config).map_err(|e| failed(e.to_string()))?;
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
    if let Some(path) = &outputs.latency_log {
        write_latency_log(path, &output.report, started)?;
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
fn command_check(args: &[String]) -> Result<i32, CliError> {
    use crate::check::matrix::{self, Case};
    let mut seeds = 10u64;
    let mut first_seed = 1u64;
    let mut protocols: Vec<ProtocolKind> = ProtocolKind::ALL
        .into_iter()
        .filter(|p| p.implemented())
        .collect();
    let mut hybrid = None;
    let mut workloads = vec![WorkloadKind::Ycsb];
    let mut flags = Flags::new(args);
    while let Some(flag) = flags.next_flag() {
        let (flag, inline) = flag?;
        let value = flags.value(&flag, inline)?;
        let f = flag.as_str();
        match f {
            "--workload" => workloads = parse_check_workloads(&value)?,
            "--seeds" => seeds = parse_number(f, &value, "a whole number")?,
            "--seed" | "--first-seed" => first_seed = parse_number(f, &value, "a whole number")?,
            "--protocol" => {
                protocols = value
                    .split(',')
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
                    .collect::<Result<_, _>>()?
            }
            "--hybrid" => hybrid = Some(parse_hybrid_code(&value)?),
            other => {
                return Err(usage(format!(
                    "unknown flag `{other}` for check; flags: --seeds N, --seed S, --protocol P[,P…], --hybrid CODE, --workload W[,W…]|all"
                )))
            }
        }
    }
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
    let cases: Vec<Case> = match hybrid {
        Some(code) => {
            let mut cases = Vec::new();
            for &protocol in &protocols {
                let present = protocol.stage_bits();
                if code & !present != 0 {
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
                for &workload in &workloads {
                    cases.extend(seed_range.clone().map(|seed| Case {
                        protocol,
                        seed,
                        code,
                        workload,
                    }));
                }
            }
            cases
        }
        None => matrix::cases_of(&workloads, &protocols, seed_range),
    };
    let cases: Vec<Case> = cases
        .into_iter()
        .filter(|case| case.workload.runs_under(case.protocol))
        .collect();
    let started = std::time::Instant::now();
    let outcomes = run_cases_in_parallel(&cases);
    let mut failed = 0;
    for outcome in &outcomes {
        if !outcome.passed {
            failed += 1;
            eprintln!(
                "FAIL {} {} seed {} code {} ({}): {}\n  replay: {}",
                outcome.case.workload.name(),
                outcome.case.protocol.name(),
                outcome.case.seed,
                outcome.case.code,
                matrix::plan_of(outcome.case.protocol, outcome.case.code).describe(),
                outcome.detail,
                matrix::replay_command(outcome.case)
            );
            if cases.len() == 1 {
                eprint!("{}", outcome.report_table);
            }
        }
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

/// The workloads of `verbena check --workload`: a list, or `all`.
fn parse_check_workloads(text: &str) -> Result<Vec<WorkloadKind>, CliError> {
    if text.trim() == "all" {
        return Ok(WorkloadKind::NAMED.map(|(_, kind)| kind).to_vec());
    }
    let mut workloads = Vec::new();
    for name in text.split(',') {
        let kind = WorkloadKind::parse(name).ok_or_else(|| {
            usage(format!(
                "unknown workload `{}` for check; allowed: {}, or all",
                name.trim(),
                WorkloadKind::NAMED.map(|(name, _)| name).join(", ")
            ))
        })?;
        if !workloads.contains(&kind) {
            workloads.push(kind);
        }
    }
    Ok(workloads)
}

/// Runs the cases on every core (each `sim` run is one thread), printing a
/// dot per case; the outcomes come back in case order.
fn run_cases_in_parallel(
    cases: &[crate::check::matrix::Case],
) -> Vec<crate::check::matrix::CaseOutcome> {
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
                let outcome = crate::check::matrix::run_case(case, |_| {});
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

fn command_demo(args: &[String]) -> Result<i32, CliError> {
    let (mut duration_s, mut warmup_s, mut json) = (2.0, 0.5, None);
    let mut flags = Flags::new(args);
    while let Some(flag) = flags.next_flag() {
        let (flag, inline) = flag?;
        let value = flags.value(&flag, inline)?;
        match flag.as_str() {
            "--duration" => duration_s = parse_number(&flag, &value, "a number")?,
            "--warmup" => warmup_s = parse_number(&flag, &value, "a number")?,
            "--json" => json = Some(value),
            other => {
                return Err(usage(format!(
                    "unknown flag {other} for `verbena demo`; allowed: --duration, --warmup, --json"
                )))
            }
        }
    }
    let mut reports = Vec::new();
    for mut config in demo_configs(duration_s, warmup_s) {
        config.validate().map_err(|e| usage(e.0))?;
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
    if let Some(path) = &json {
        write_json(path, &reports)?;
    }
    Ok(check_exit(&reports.iter().collect::<Vec<_>>()))
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

// ---- multi-process runs over UCX (issue 7): `verbena node`, `verbena launch` ----

/// Takes `--NAME VALUE` / `--NAME=VALUE` out of `args` for each of `names`;
/// returns the values found (last wins) and the remaining arguments.
fn take_flags(
    args: &[String],
    names: &[&str],
) -> Result<(Vec<Option<String>>, Vec<String>), CliError> {
    let mut values = vec![None; names.len()];
    let mut rest = Vec::new();
    let mut index = 0;
    while index < args.len() {
        let arg = &args[index];
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if arg.starts_with("--") => (flag, Some(value.to_string())),
            _ => (arg.as_str(), None),
        };
        if let Some(slot) = names.iter().position(|n| *n == flag) {
            let value = match inline {
                Some(value) => value,
                None => {
                    index += 1;
                    args.get(index)
                        .cloned()
                        .ok_or_else(|| usage(format!("{flag} needs a value")))?
                }
            };
            values[slot] = Some(value);
        } else {
            rest.push(arg.clone());
        }
        index += 1;
    }
    Ok((values, rest))
}

/// Prints a run's report as `verbena run` does (rank 0 of a `ucx` run).
#[cfg(feature = "ucx")]
fn emit_report(
    output: &engine::RunOutput,
    outputs: &Outputs,
    started: std::time::SystemTime,
) -> Result<i32, CliError> {
    if outputs.json.as_deref() == Some("-") {
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
    if let Some(path) = &outputs.latency_log {
        write_latency_log(path, &output.report, started)?;
    }
    Ok(check_exit(&[&output.report]))
}

/// `verbena node`: this process is one node of a `ucx` run.
fn command_node(args: &[String]) -> Result<i32, CliError> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{HELP}");
        return Ok(EXIT_OK);
    }
    let (values, mut rest) = take_flags(args, &["--rank", "--bootstrap"])?;
    let from_env =
        crate::cluster::launch::rank_from_env(|name| std::env::var(name).ok()).map_err(usage)?;
    let rank = match (&values[0], &from_env) {
        (Some(text), _) => parse_number::<u32>("--rank", text, "a whole number")?,
        (None, Some(source)) => source.rank,
        (None, None) => {
            return Err(usage(
                "verbena node needs --rank R (or a launcher's SLURM_PROCID, OMPI_COMM_WORLD_RANK or PMI_RANK)",
            ))
        }
    };
    let bootstrap = values[1]
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
    if let Some(source) = &from_env {
        // The launcher's size is the default; flags given later win.
        rest.insert(0, format!("--nodes={}", source.size));
    }
    rest.push("--fabric=ucx".into());
    let (config, outputs) = parse_run_flags(&rest)?;
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
    run_node_and_report(&config, rank, bootstrap, &outputs)
}

#[cfg(feature = "ucx")]
fn run_node_and_report(
    config: &Config,
    rank: u32,
    bootstrap: String,
    outputs: &Outputs,
) -> Result<i32, CliError> {
    if let (0, Some(path)) = (rank, &outputs.latency_log) {
        check_creatable("--latency-log", path)?;
    }
    let started = std::time::SystemTime::now();
    let options = crate::cluster::node::NodeOptions { rank, bootstrap };
    // Crash-stop: a rank whose thread panicked must not linger half alive
    // (its peers would wait on it); it dies at once, its connections
    // close, and the launcher reports it as failed.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        eprintln!("rank {rank}: a thread panicked (a bug in verbena); the process aborts");
        std::process::abort();
    }));
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
    _rank: u32,
    _bootstrap: String,
    _outputs: &Outputs,
) -> Result<i32, CliError> {
    // `Config::validate` refuses fabric ucx in such a build first.
    Err(usage(crate::config::UCX_MISSING))
}

/// `verbena launch`: starts every node of a `ucx` run.
fn command_launch(args: &[String]) -> Result<i32, CliError> {
    use crate::cluster::launch::{free_local_port, read_hosts, spawn_rank, wait_all, Spawn};
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{HELP}");
        return Ok(EXIT_OK);
    }
    let (values, rest) = take_flags(args, &["--local", "--hosts", "--port", "--remote-exe"])?;
    let hosts = match (&values[0], &values[1]) {
        (Some(_), Some(_)) => return Err(usage("give either --local N or --hosts FILE, not both")),
        (Some(count), None) => {
            let count: u32 = parse_number("--local", count, "a whole number")?;
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
    let mut check_args = vec![format!("--nodes={nodes}")];
    check_args.extend(rest.iter().cloned());
    check_args.push("--fabric=ucx".into());
    let (config, _) = parse_run_flags(&check_args)?;
    if config.nodes != nodes {
        return Err(usage(format!(
            "--nodes {} contradicts the {nodes} process(es) to launch",
            config.nodes
        )));
    }
    let remote_exe = match &values[3] {
        Some(path) => path.clone(),
        None => std::env::current_exe()
            .map(|p| p.display().to_string())
            .map_err(|e| failed(format!("cannot find this program's path: {e}")))?,
    };
    let bootstrap = match &hosts[0] {
        None => format!("127.0.0.1:{}", free_local_port().map_err(failed)?),
        Some(host) => {
            let port: u16 = match &values[2] {
                Some(text) => parse_number("--port", text, "a port number")?,
                None => 17017,
            };
            format!("{host}:{port}")
        }
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
        match spawn_rank(&spawn, rank as u32, nodes, &bootstrap, &rest) {
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
    let tolerant = config.replication > 1 && crate::fault::DetectorSettings::of(&config).is_some();
    Ok(wait_all(children, grace, tolerant))
}

/// `verbena fabric-bench`: starts two local processes (or, with the
/// internal `--rank`/`--bootstrap`, is one of them).
fn command_fabric_bench(args: &[String]) -> Result<i32, CliError> {
    let (values, rest) = take_flags(
        args,
        &[
            "--transport",
            "--op",
            "--bytes",
            "--window",
            "--seconds",
            "--rank",
            "--bootstrap",
        ],
    )?;
    if let Some(extra) = rest.first() {
        return Err(usage(format!(
            "unknown flag {extra} for fabric-bench; flags: --transport, --op, --bytes, --window, --seconds"
        )));
    }
    let transport = match &values[0] {
        Some(v) => UcxTransport::parse(v).ok_or_else(|| {
            usage(format!(
                "unknown transport `{v}`; allowed: shm, tcp, rdma, auto"
            ))
        })?,
        None => UcxTransport::Shm,
    };
    let op = values[1].as_deref().unwrap_or("read");
    let known = ["read", "write", "cas", "faa", "rpc"];
    if !known.contains(&op) {
        return Err(usage(format!(
            "unknown --op `{op}`; allowed: {}",
            known.join(", ")
        )));
    }
    let bytes: u32 = match &values[2] {
        Some(v) => parse_number("--bytes", v, "a whole number")?,
        None => 8,
    };
    if bytes == 0 || bytes % 8 != 0 || bytes > 1 << 20 {
        return Err(usage(format!(
            "--bytes {bytes} is not allowed; allowed: a multiple of 8 in 8..=1048576"
        )));
    }
    let window: u32 = match &values[3] {
        Some(v) => parse_number("--window", v, "a whole number")?,
        None => 16,
    };
    if window == 0 || window > 1024 {
        return Err(usage(format!(
            "--window {window} is out of range; allowed: 1..=1024"
        )));
    }
    let seconds: f64 = match &values[4] {
        Some(v) => parse_number("--seconds", v, "a number")?,
        None => 2.0,
    };
    if !(0.1..=600.0).contains(&seconds) {
        return Err(usage(format!(
            "--seconds {seconds} is out of range; allowed: [0.1, 600]"
        )));
    }
    if !cfg!(feature = "ucx") {
        return Err(usage(crate::config::UCX_MISSING));
    }
    match (&values[5], &values[6]) {
        (Some(rank), Some(bootstrap)) => {
            let rank: u32 = parse_number("--rank", rank, "0 or 1")?;
            if rank > 1 {
                return Err(usage("--rank of fabric-bench is 0 or 1"));
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
                command.arg("fabric-bench").args(args).args([
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
