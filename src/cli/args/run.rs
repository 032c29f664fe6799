//! The flags of one run: what it writes (`Outputs`), how it is configured
//! (`RunFlags`, the base of every sweep point, launch and node), its faults
//! and its UCX settings.

// Doc comments here are the flags' help text, where `[default]` in brackets
// is the help's convention, not an intra-doc link.
#![allow(rustdoc::broken_intra_doc_links)]

use clap::Args;

use super::super::run_config::{parse_hybrid_code, parse_stages};
use super::values::*;
use super::workloads::{PpsFlags, SmallBankFlags, TpccFlags, TpceFlags, YcsbFlags};
use crate::base::{Primitive, ProtocolKind, StagePlan};
use crate::config::faults::RunFault;
use crate::config::profile::NetworkProfile;
use crate::config::{FabricKind, LocalAtomics, LockMode, UcxTransport, WorkloadKind};

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
    /// Run even a configuration far beyond this host (too many threads
    /// per core, tables past its memory), which is otherwise refused
    #[arg(long)]
    pub force: bool,
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
    #[arg(long, value_name = "P", value_parser = one_of_or_more(parse_profile, profile_names))]
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
    /// A rank's lease with the failure detector on, ms: a frozen rank is
    /// declared about one lease after it froze, 2..=60000 [shm 100, else
    /// 500]
    #[arg(long, value_name = "MS", value_parser = real())]
    pub lease_ms: Option<f64>,
}
