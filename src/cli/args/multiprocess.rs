//! The flags of the multi-process commands (`launch`, `node`,
//! `fabric-bench`) and of `completions`.

// Doc comments here are the flags' help text, where `[default]` in brackets
// is the help's convention, not an intra-doc link.
#![allow(rustdoc::broken_intra_doc_links)]

use clap::Args;

use super::super::run_config::parse_number;
use super::super::usage;
use super::run::{Outputs, RunFlags};
use super::values::*;
use crate::config::UcxTransport;

#[derive(Args)]
pub struct LaunchArgs {
    /// N processes on this host, one per node
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub local: Option<u32>,
    /// One process per line of FILE, started by ssh
    #[arg(long, value_name = "FILE")]
    pub hosts: Option<String>,
    /// Bootstrap port of rank 0 with --hosts [17017]
    #[arg(long, value_name = "P", value_parser = parse(|flag, v| parse_number::<u16>(flag, v, "a port number")))]
    pub port: Option<u16>,
    /// verbena on the hosts [this binary's path]
    #[arg(long, value_name = "PATH")]
    pub remote_exe: Option<String>,
    #[command(flatten)]
    pub job: JobFlags,
}

#[derive(Args)]
pub struct NodeArgs {
    /// This node's rank (or SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK)
    #[arg(long, value_name = "R", value_parser = count::<u32>())]
    pub rank: Option<u32>,
    /// HOST:PORT where rank 0 listens (or VERBENA_BOOTSTRAP)
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap: Option<String>,
    #[command(flatten)]
    pub job: JobFlags,
}

/// What every rank of a ucx job is given, by `launch` or by whatever
/// starts each `node`: the job's secret, the run's flags, and what rank 0
/// writes.
#[derive(Args, Clone, Default)]
pub struct JobFlags {
    /// The job's secret, at least 16 bytes and the same on every rank (or
    /// VERBENA_CLUSTER_KEY, which ps does not show); `launch` makes a
    /// random one when none is given
    #[arg(long, value_name = "KEY")]
    pub cluster_key: Option<String>,
    #[command(flatten)]
    pub flags: RunFlags,
    #[command(flatten)]
    pub outputs: Outputs,
}

#[derive(Args)]
pub struct FabricBenchArgs {
    /// UCX_TLS [shm]
    #[arg(long, value_name = "T", value_parser = one_of(parse_transport, || vec!["shm", "tcp", "rdma", "auto"]))]
    pub transport: Option<UcxTransport>,
    /// The verb measured [read]
    #[arg(long, value_name = "OP", value_parser = one_of(|_, v| {
        if FABRIC_BENCH_OPS.contains(&v) { Ok(v.to_string()) } else {
            Err(usage(format!("unknown --op `{v}`; allowed: {}", FABRIC_BENCH_OPS.join(", "))))
        }
    }, || FABRIC_BENCH_OPS.to_vec()))]
    pub op: Option<String>,
    /// READ/WRITE/RPC payload, bytes [8]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub bytes: Option<u32>,
    /// Operations in flight [16]
    #[arg(long, value_name = "N", value_parser = count::<u32>())]
    pub window: Option<u32>,
    /// Measured seconds [2]
    #[arg(long, value_name = "S", value_parser = real())]
    pub seconds: Option<f64>,
    /// `ucx` (the fabric's endpoint) or `socket` (a TCP transport of
    /// verbena's own, --op rpc only, for comparison) [ucx]
    #[arg(long, value_name = "L", value_parser = one_of(|_, v| {
        if ["ucx", "socket"].contains(&v) { Ok(v.to_string()) } else {
            Err(usage(format!("unknown --link `{v}`; allowed: ucx, socket")))
        }
    }, || vec!["ucx", "socket"]))]
    pub link: Option<String>,
    /// (internal: this process is rank R of the two)
    #[arg(long, hide = true, value_name = "R", value_parser = parse(|flag, v| parse_number::<u32>(flag, v, "0 or 1")))]
    pub rank: Option<u32>,
    /// (internal: rank 0's address)
    #[arg(long, hide = true, value_name = "HOST:PORT")]
    pub bootstrap: Option<String>,
}

pub const FABRIC_BENCH_OPS: [&str; 5] = ["read", "write", "cas", "faa", "rpc"];

#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}
