//! A protocol written outside verbena runs one process per node over UCX:
//! every rank calls `cluster::node::run_node_custom_protocol` with the
//! same config and the example `strict_2pl` (`examples/strict_2pl.rs`), as
//! a researcher's own binary started by `mpirun` or a job script would,
//! and rank 0's checker judges the whole run (serializable, invariants).
//!
//! The ranks are this test binary run again: the test starts one child per
//! rank, each running [`rank_entry`] with its rank and the bootstrap
//! address in the environment.

#![cfg(feature = "ucx")]

use std::process::Command;
use std::time::Duration;

mod common;
use common::output_within;

use verbena::cluster::launch::{free_local_port, NodeOptions};
use verbena::cluster::node::run_node_custom_protocol;
use verbena::config::ucx::UcxTransport;
use verbena::config::{FabricKind, WorkloadKind};
use verbena::protocols::Primitive;

#[allow(dead_code)] // the example's `main` is not called here
#[path = "../examples/strict_2pl.rs"]
mod strict_2pl;

use strict_2pl::{checked_config, Strict2pl};

const RANK_VAR: &str = "VERBENA_TEST_CUSTOM_RANK";
const CASE_VAR: &str = "VERBENA_TEST_CUSTOM_CASE";
const BOOTSTRAP_VAR: &str = "VERBENA_TEST_CUSTOM_BOOTSTRAP";
const NODES: u32 = 2;

/// The cases: the example's plan choice, over shared memory and over TCP.
const CASES: [(&str, WorkloadKind, Primitive, bool, UcxTransport); 3] = [
    (
        "ycsb-onesided-shm",
        WorkloadKind::Ycsb,
        Primitive::OneSided,
        false,
        UcxTransport::Shm,
    ),
    (
        "smallbank-rpc-tcp",
        WorkloadKind::SmallBank,
        Primitive::Rpc,
        false,
        UcxTransport::Tcp,
    ),
    (
        "ycsb-mixed-tcp",
        WorkloadKind::Ycsb,
        Primitive::OneSided,
        true,
        UcxTransport::Tcp,
    ),
];

/// One rank of a case, when the test below starts it; otherwise nothing. Rank 0 prints `RESULT committed=N passed=B detail`.
#[test]
fn rank_entry() {
    let (Ok(rank), Ok(case), Ok(bootstrap)) = (
        std::env::var(RANK_VAR),
        std::env::var(CASE_VAR),
        std::env::var(BOOTSTRAP_VAR),
    ) else {
        return;
    };
    let rank: u32 = rank.parse().expect("a rank number");
    let (_, workload, primitive, mixed, transport) = CASES
        .into_iter()
        .find(|c| c.0 == case)
        .expect("a known case");
    let mut config = checked_config(FabricKind::Ucx, workload, primitive, mixed, 1);
    config.nodes = NODES;
    config.ucx.transport = transport;
    // The example's contention is sized for one process; over TCP a lock
    // round takes tens of microseconds, and NO_WAIT-style locking on 32 hot
    // rows would commit almost nothing (built-in `no_wait` does the same).
    config.ycsb.rows_per_node = 1024;
    config.ycsb.theta = 0.6;
    config.smallbank.accounts_per_worker = 256;
    let options = NodeOptions {
        rank,
        bootstrap,
        key: None,
        job: String::new(),
    };
    let output = run_node_custom_protocol(&config, &options, &Strict2pl::default())
        .unwrap_or_else(|e| panic!("rank {rank}: {e}"));
    if let Some(output) = output {
        let report = output.report;
        let check = report.check.as_ref().expect("the checker ran");
        println!(
            "RESULT committed={} passed={} protocol={} cycle={:?} invariants={:?}",
            report.committed,
            check.passed(),
            report.config.protocol.name(),
            check.cycle,
            check.invariants
        );
    }
}

#[test]
fn strict_2pl_runs_one_process_per_node_under_the_checker() {
    let this_test = std::env::current_exe().expect("the test binary");
    for (case, ..) in CASES {
        let port = free_local_port().expect("a free port");
        let rank_command = |rank: u32| {
            let mut command = Command::new(&this_test);
            command
                .args([
                    "--exact",
                    "rank_entry",
                    "--nocapture",
                    "--test-threads",
                    "1",
                ])
                .env(RANK_VAR, rank.to_string())
                .env(CASE_VAR, case)
                .env(BOOTSTRAP_VAR, format!("127.0.0.1:{port}"));
            command
        };
        let limit = Duration::from_secs(120);
        let others: Vec<_> = (1..NODES)
            .map(|rank| {
                let command = rank_command(rank);
                std::thread::spawn(move || output_within(command, limit))
            })
            .collect();
        let mut outputs = vec![output_within(rank_command(0), limit)];
        outputs.extend(
            others
                .into_iter()
                .map(|t| t.join().expect("a rank's output")),
        );
        for (rank, output) in outputs.iter().enumerate() {
            assert!(
                output.status.success(),
                "{case}: rank {rank} failed: {}\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let stdout = String::from_utf8_lossy(&outputs[0].stdout);
        let result = stdout
            .lines()
            .find_map(|line| line.split_once("RESULT ").map(|(_, result)| result))
            .unwrap_or_else(|| panic!("{case}: rank 0 printed no result:\n{stdout}"));
        assert!(result.contains("passed=true"), "{case}: {result}");
        assert!(result.contains("protocol=strict_2pl"), "{case}: {result}");
        let committed: u64 = result
            .split_whitespace()
            .find_map(|w| w.strip_prefix("committed="))
            .and_then(|n| n.parse().ok())
            .expect("a committed count");
        assert!(committed > 20, "{case}: only {committed} committed");
    }
}
