//! What this host has — cores, available memory, RDMA devices — and what a
//! run asks of it: the warnings that save an hour before a run starts.
//!
//! - A `threads` run starts one OS thread per worker of every node; far
//!   more threads than cores measure the scheduler, not the protocol, and
//!   the `sim` fabric runs any cluster size in virtual time instead.
//! - A run's tables live in this process's memory (`sim` and `threads`
//!   alike); an estimate beyond what the host has available would swap or
//!   be killed.
//! - `sim` simulates the warm-up too: a warm-up far longer than the
//!   measured time is most of the run's wall time.
//! - `--transport rdma` without an RDMA device fails deep inside UCX; it
//!   is refused here, naming the transports this host has.
//!
//! Invariant: a warning is one line on stderr and changes nothing; a
//! refusal is a usage error (exit 2) that `--force` overrides where the
//! run could still finish. None of this touches the run's configuration,
//! so a run's results never depend on the host it was checked on.

use super::{usage, CliError};
use crate::config::{Config, FabricKind, UcxTransport, WorkloadKind};
use crate::workloads::footprint::tables_bytes_estimate;

/// Worker threads per core past which a `threads` run gets a warning.
const WARN_THREADS_PER_CORE: u64 = 16;

/// Worker threads per core past which a `threads` run is refused without
/// `--force` (`--nodes 1000` on 2 cores: 500).
const MAX_THREADS_PER_CORE: u64 = 128;

/// The share of the host's available memory past which the tables' estimate
/// gets a warning; past all of it the run is refused without `--force`.
const WARN_MEMORY_SHARE: f64 = 0.5;

/// A warm-up this many times the measured time is most of a sim run.
const WARMUP_DOMINATES: f64 = 4.0;

/// Where Linux lists a host's RDMA devices (one entry per HCA).
const RDMA_DEVICES_DIR: &str = "/sys/class/infiniband";

/// The host's cores (what the scheduler may run at once).
fn host_cores() -> u64 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
}

/// Bytes of memory the host has available (Linux's `MemAvailable`), if
/// it says.
fn host_available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

/// The warnings a run on this host earns, printed to stderr; an error
/// when its cost is past a limit and `force` is not given.
pub(super) fn check_run_cost(config: &Config, force: bool) -> Result<(), CliError> {
    let mut refusals = Vec::new();
    if config.fabric == FabricKind::Threads {
        check_threads(config, host_cores(), &mut refusals);
    }
    if let Some(have) = host_available_bytes() {
        check_memory(
            config.workload,
            tables_bytes_estimate(config),
            have,
            &mut refusals,
        );
    }
    if let Some(note) = warmup_note(config) {
        eprintln!("verbena: note: {note}");
    }
    match refusals.first() {
        Some(reason) if !force => Err(usage(format!(
            "{reason}; refused (give --force to run it anyway)"
        ))),
        _ => {
            for reason in &refusals {
                eprintln!("verbena: warning: {reason} (running anyway: --force)");
            }
            Ok(())
        }
    }
}

/// Warns of (or, past the limit, records for refusal) more worker threads
/// than the `cores` can run.
fn check_threads(config: &Config, cores: u64, refusals: &mut Vec<String>) {
    let threads = config.total_workers() as u64;
    let per_core = threads / cores.max(1);
    if per_core <= WARN_THREADS_PER_CORE {
        return;
    }
    let what = format!(
        "{threads} worker threads on {cores} core(s), {per_core} per core: the threads fabric time-shares them, so the run measures the scheduler more than the protocol; --fabric sim runs a cluster of any size in virtual time"
    );
    if per_core > MAX_THREADS_PER_CORE {
        refusals.push(format!(
            "{what} (more than {MAX_THREADS_PER_CORE} per core)"
        ));
    } else {
        eprintln!("verbena: warning: {what}");
    }
}

/// The flags that scale `workload`'s tables on each node.
fn scale_flag(workload: WorkloadKind) -> &'static str {
    match workload {
        WorkloadKind::Ycsb => "--rows-per-node",
        WorkloadKind::Tpcc => "--warehouses",
        WorkloadKind::SmallBank => "--sb-accounts-per-worker",
        WorkloadKind::Pps => {
            "--pps-products-per-node, --pps-parts-per-node or --pps-suppliers-per-node"
        }
        WorkloadKind::TpceCp => "--tpce-customers-per-node",
    }
}

/// Warns of (or, past all the host has, records for refusal) `workload`'s
/// tables that need `need` bytes of the `have` available.
fn check_memory(workload: WorkloadKind, need: u64, have: u64, refusals: &mut Vec<String>) {
    if (need as f64) <= WARN_MEMORY_SHARE * have as f64 {
        return;
    }
    let what = format!(
        "the run's {} tables need about {:.1} GiB of memory and this host has {:.1} GiB available; lowering {} (or --nodes) shrinks them",
        workload.name(),
        gib(need),
        gib(have),
        scale_flag(workload)
    );
    if need > have {
        refusals.push(what);
    } else {
        eprintln!("verbena: warning: {what}");
    }
}

/// The note for a sim run whose simulated warm-up dwarfs its measured
/// time, if this one is.
fn warmup_note(config: &Config) -> Option<String> {
    let dominates =
        config.fabric == FabricKind::Sim && config.warmup_s > WARMUP_DOMINATES * config.duration_s;
    dominates.then(|| {
        format!(
            "the sim fabric simulates the {} s warm-up too, {:.0}× the {} s measured, so most of this run is warm-up; a shorter --warmup (e.g. {}) saves that time",
            config.warmup_s,
            config.warmup_s / config.duration_s,
            config.duration_s,
            config.duration_s
        )
    })
}

/// The RDMA devices this host lists (`mlx5_0`, …); empty when it has none.
fn rdma_devices() -> Vec<String> {
    std::fs::read_dir(RDMA_DEVICES_DIR)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Refuses `--transport rdma` on a host with no RDMA device (before UCX
/// fails to reach any peer), naming the transports it has.
pub(super) fn refuse_rdma_without_device(transport: UcxTransport) -> Result<(), CliError> {
    if transport != UcxTransport::Rdma || !rdma_devices().is_empty() {
        return Ok(());
    }
    Err(usage(format!(
        "--transport rdma needs an RDMA device, and this host has none ({RDMA_DEVICES_DIR} lists no device); allowed here: shm (every rank on this host), tcp (over any network) or auto (UCX picks what the host has)"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_counts_warn_then_refuse() {
        let mut config = Config {
            fabric: FabricKind::Threads,
            nodes: 16,
            ..Config::default()
        };
        let mut refusals = Vec::new();
        check_threads(&config, 2, &mut refusals);
        assert!(refusals.is_empty());
        config.nodes = 1000;
        check_threads(&config, 2, &mut refusals);
        assert_eq!(refusals.len(), 1);
        assert!(refusals[0].contains("1000 worker threads on 2 core(s), 500 per core"));
        assert!(refusals[0].contains("--fabric sim"));
    }

    #[test]
    fn memory_beyond_the_host_is_refused() {
        let mut refusals = Vec::new();
        let ycsb = WorkloadKind::Ycsb;
        check_memory(ycsb, 1 << 30, 4 << 30, &mut refusals);
        check_memory(ycsb, 3 << 30, 4 << 30, &mut refusals);
        assert!(refusals.is_empty());
        check_memory(ycsb, 5 << 30, 4 << 30, &mut refusals);
        assert_eq!(refusals.len(), 1);
        assert!(refusals[0].contains("5.0 GiB") && refusals[0].contains("4.0 GiB"));
    }

    #[test]
    fn a_sim_warmup_far_past_the_measured_time_is_noted() {
        let mut config = Config {
            fabric: FabricKind::Sim,
            duration_s: 0.002,
            warmup_s: 0.5,
            ..Config::default()
        };
        assert!(warmup_note(&config).is_some_and(|n| n.contains("250×")));
        config.duration_s = 0.2;
        assert_eq!(warmup_note(&config), None);
        config.duration_s = 0.002;
        config.fabric = FabricKind::Threads;
        assert_eq!(warmup_note(&config), None);
    }

    #[test]
    fn every_workload_gets_the_memory_check() {
        for (_, workload) in WorkloadKind::NAMED {
            let mut config = Config {
                workload,
                nodes: 1_000_000,
                ..Config::default()
            };
            config.smallbank.accounts_per_worker = 1_000_000;
            let mut refusals = Vec::new();
            let need = tables_bytes_estimate(&config);
            check_memory(workload, need, 1 << 30, &mut refusals);
            assert_eq!(refusals.len(), 1, "{workload:?}");
            assert!(
                refusals[0].contains(scale_flag(workload)),
                "{}",
                refusals[0]
            );
        }
    }
}
