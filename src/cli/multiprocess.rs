//! The multi-process commands over UCX: `verbena node` (this process is
//! one rank of a run), `verbena launch` (start every rank, locally or over
//! ssh) and `verbena fabric-bench` (two ranks measuring the fabric).
//!
//! Invariant: every flag is checked once, before any process starts; only
//! rank 0 checks and writes the outputs.

use super::args::{self, Outputs};
use super::run_config::{run_config, run_config_unresolved};
use super::terminal::print_out;
#[cfg(feature = "ucx")]
use super::{emit_report, EXIT_DECLARED_FAILED};
use super::{failed, usage, CliError, EXIT_OK};
use crate::config::{Config, FabricKind, UcxTransport};
#[cfg(feature = "ucx")]
use crate::engine;

/// `verbena node`: this process is one node of a `ucx` run.
pub(super) fn command_node(a: args::NodeArgs) -> Result<i32, CliError> {
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
    refuse_other_fabric("node", &a.job.flags)?;
    refuse_rdma_without_device(&a.job.flags)?;
    let mut flags = a.job.flags;
    if let Some(source) = &from_env {
        // The launcher's size is the default; a --nodes flag wins.
        flags.nodes.get_or_insert(source.size);
    }
    flags.fabric = Some(FabricKind::Ucx);
    flags.check |= a.job.outputs.history.is_some();
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
        a.job.outputs.check()?;
    }
    let key = cluster_key(a.job.cluster_key.as_deref())?;
    let job = crate::cluster::auth::job_id_from_env(|name| std::env::var(name).ok())
        .map(|(id, _)| id)
        .unwrap_or_default();
    let options = crate::cluster::launch::NodeOptions {
        rank,
        bootstrap,
        key,
        job,
    };
    run_node_and_report(&config, options, &a.job.outputs)
}

/// `launch` and `node` run fabric ucx: `--fabric` may only say so.
fn refuse_other_fabric(command: &str, flags: &args::RunFlags) -> Result<(), CliError> {
    match flags.fabric {
        Some(fabric) if fabric != FabricKind::Ucx => Err(usage(format!(
            "--fabric {} does not apply to `verbena {command}`, which runs fabric ucx only (allowed: ucx, or leave --fabric out); for a {} run use `verbena run --fabric {}`",
            fabric.name(),
            fabric.name(),
            fabric.name()
        ))),
        _ => Ok(()),
    }
}

/// `--transport rdma` (by flag or `--config`) on a host without an RDMA
/// device is refused before any rank starts.
fn refuse_rdma_without_device(flags: &args::RunFlags) -> Result<(), CliError> {
    let (config, _) = run_config_unresolved(flags)?;
    super::host::refuse_rdma_without_device(config.ucx.transport)
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
pub(super) fn command_launch(a: args::LaunchArgs, given: Vec<String>) -> Result<i32, CliError> {
    use crate::cluster::launch::{free_local_port, read_hosts, spawn_rank, wait_all, Spawn};
    refuse_other_fabric("launch", &a.job.flags)?;
    let hosts = match (a.local, &a.hosts) {
        (Some(_), Some(_)) => return Err(usage("give either --local N or --hosts FILE, not both")),
        (Some(count), None) => {
            // Every rank runs here, so this host's devices are theirs.
            refuse_rdma_without_device(&a.job.flags)?;
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
    let mut flags = a.job.flags;
    flags.nodes.get_or_insert(nodes);
    flags.fabric = Some(FabricKind::Ucx);
    flags.check |= a.job.outputs.history.is_some();
    let config = run_config(&flags)?;
    if config.nodes != nodes {
        return Err(usage(format!(
            "--nodes {} contradicts the {nodes} process(es) to launch",
            config.nodes
        )));
    }
    a.job.outputs.check()?;
    // Every launch is a job of its own: the user's key, or a random one.
    let key = match cluster_key(a.job.cluster_key.as_deref())? {
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
pub(super) fn command_fabric_bench(
    a: args::FabricBenchArgs,
    raw: &[String],
) -> Result<i32, CliError> {
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
                        print_out(&format!("{line}\n"))?;
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
            print_out(&format!("{line}\n"))?;
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
