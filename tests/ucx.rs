//! Multi-process runs on the `ucx` fabric, on loopback: every rank a real
//! process started by the `verbena` binary, over shared memory and over
//! TCP, 2 and 4 processes, with the serializability checker and the
//! invariants on; and the faults a user must never see hang — a rank that
//! never joins, one that is killed, one that stops responding.
//!
//! Built only with `--features ucx` (`.ci/run` runs it and fails if it is
//! skipped).
#![cfg(feature = "ucx")]

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::output_within;

fn verbena() -> Command {
    Command::new(env!("CARGO_BIN_EXE_verbena"))
}

fn launch(args: &[&str]) -> (Output, serde_json::Value) {
    let mut command = verbena();
    command.arg("launch").args(args).args([
        "--json",
        "-",
        "--join-timeout",
        "30",
        "--stall-timeout",
        "15",
    ]);
    // Join, run, a recovery and the stall timeouts, with room to spare.
    let output = output_within(command, Duration::from_secs(240));
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(
        output.status.code(),
        Some(0),
        "launch {args:?} failed: {stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("launch {args:?}: no JSON report ({e}); stderr: {stderr}"));
    (output, report)
}

/// Asserts a checked multi-process report: serializable, invariants held,
/// every rank named, and the transports UCX chose of the kind asked for.
fn assert_checked_report(report: &serde_json::Value, nodes: usize, transport: &str) {
    let check = &report["check"];
    assert_eq!(check["serializable"], true, "{check}");
    assert_eq!(check["invariants_ok"], true, "{check}");
    assert!(check["txn_count"].as_u64().unwrap() > 0, "{check}");
    assert_eq!(report["config"]["fabric"], "ucx");
    assert_eq!(report["config"]["nodes"], nodes);
    assert_eq!(report["time"], "wall");
    let workers = report["config"]["workers"].as_u64().unwrap() as usize;
    assert_eq!(
        report["worker_txn_per_s"].as_array().unwrap().len(),
        nodes * workers,
        "one entry per worker of every rank"
    );
    let cluster = &report["cluster"];
    let ranks = cluster["ranks"].as_array().expect("ranks listed");
    assert_eq!(ranks.len(), nodes);
    for (index, rank) in ranks.iter().enumerate() {
        assert_eq!(rank["rank"], index);
        assert!(rank["pid"].as_u64().unwrap() > 0);
        let to_others: Vec<String> = rank["transports"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .filter(|(target, _)| *target != index)
            .flat_map(|(_, names)| names.as_array().unwrap().clone())
            .map(|n| n.as_str().unwrap().to_string())
            .collect();
        assert!(!to_others.is_empty(), "rank {index} names no transport");
        for name in &to_others {
            let ok = match transport {
                "tcp" => name.starts_with("tcp/") || name == "am/verbs",
                _ => ["sysv/", "posix/", "cma/", "xpmem/", "knem/", "cpu/mapped"]
                    .iter()
                    .any(|p| name.starts_with(p)),
            };
            assert!(ok, "transport {transport} but UCX chose {name}");
        }
        // Over shared memory one-sided verbs run on the peers' mapped
        // regions, over TCP as verbena's own messages (UCX's PUT is a
        // memcpy there, not word-atomic).
        let mapped = to_others.iter().any(|n| n == "cpu/mapped");
        assert_eq!(mapped, transport == "shm", "rank {index}: {to_others:?}");
        let by_message = to_others.iter().any(|n| n == "am/verbs");
        assert_eq!(
            by_message,
            transport == "tcp",
            "rank {index}: {to_others:?}"
        );
    }
    assert_eq!(cluster["transport"], transport);
}

const SMALL: [&str; 8] = [
    "--duration",
    "0.4",
    "--warmup",
    "0.1",
    "--rows-per-node",
    "2000",
    "--check",
    "--compute-us",
];

fn run_case(nodes: usize, transport: &str, protocol_args: &[&str]) {
    let count = nodes.to_string();
    let mut args = vec!["--local", count.as_str(), "--transport", transport];
    args.extend_from_slice(&SMALL);
    args.push("1");
    args.extend_from_slice(protocol_args);
    let (_, report) = launch(&args);
    assert_checked_report(&report, nodes, transport);
    if protocol_args.contains(&"rpc") || transport == "shm" {
        assert!(
            report["committed"].as_u64().unwrap() > 0,
            "{args:?} committed nothing"
        );
    }
}

#[test]
fn two_processes_over_shared_memory_are_serializable() {
    run_case(2, "shm", &["--protocol", "no_wait"]);
    run_case(2, "shm", &["--protocol", "occ", "--stages", "read=rpc"]);
    run_case(2, "shm", &["--protocol", "no_wait", "--primitive", "rpc"]);
}

#[test]
fn four_processes_over_shared_memory_are_serializable() {
    run_case(4, "shm", &["--protocol", "occ"]);
    run_case(
        4,
        "shm",
        &["--protocol", "no_wait", "--local-atomics", "cpu"],
    );
}

/// Four ranks' coroutines all fight for each rank's one hot row (200 rows
/// a rank, hot area 1 row), releasing with one-sided WRITEs while the others
/// CAS the same lock word. UCX's PUT is a `memcpy` (into the mapped segment
/// over shared memory, on the target's worker thread over TCP), which
/// stores an 8-byte word twice; a CAS landing between the two stores was
/// wiped, and two transactions held one lock (the checker saw lost updates,
/// debug builds "an exclusive lock holds its owner", in about one shared
/// memory run of three). Verbs now run as word-atomic CPU operations: on
/// the mapped regions over shared memory, by the target's fabric over TCP
/// (two workers a rank, so two threads serve each rank's words).
#[test]
fn a_hot_lock_word_is_never_lost() {
    for (transport, local_atomics, workers) in [
        ("shm", "nic", "1"),
        ("shm", "cpu", "1"),
        ("shm", "nic", "2"),
        ("tcp", "nic", "2"),
    ] {
        let (_, report) = launch(&[
            "--local",
            "4",
            "--transport",
            transport,
            "--workers",
            workers,
            "--duration",
            "1",
            "--warmup",
            "0.1",
            "--rows-per-node",
            "200",
            "--check",
            "--compute-us",
            "1",
            "--protocol",
            "no_wait",
            "--local-atomics",
            local_atomics,
        ]);
        assert_checked_report(&report, 4, transport);
        assert!(report["committed"].as_u64().unwrap() > 0, "{transport}");
    }
}

#[test]
fn two_processes_over_tcp_are_serializable() {
    run_case(2, "tcp", &["--protocol", "occ", "--primitive", "rpc"]);
    run_case(2, "tcp", &["--protocol", "no_wait", "--stages", "lock=rpc"]);
    run_case(2, "tcp", &["--protocol", "occ"]);
}

#[test]
fn four_processes_over_tcp_are_serializable() {
    run_case(4, "tcp", &["--protocol", "no_wait", "--primitive", "rpc"]);
    run_case(
        4,
        "tcp",
        &["--protocol", "occ", "--stages", "lock=rpc,read=rpc"],
    );
}

/// Over TCP everything one worker sends to one node within one turn of its
/// event loop leaves as one active message: RPC requests, replies and
/// emulated verb batches of all its coroutines. The report keeps the
/// logical counts (RPCs and doorbells per transaction, as the papers count
/// them) and adds the wire messages, which with 16 coroutines must be far
/// fewer; the checker shows the coalesced parts kept their order.
#[test]
fn tcp_coalesces_a_turns_messages_to_one_node_into_one() {
    for (primitive, logical) in [("rpc", "rpc"), ("onesided", "doorbells")] {
        let mut args = vec!["--local", "2", "--transport", "tcp", "--coroutines", "16"];
        args.extend_from_slice(&SMALL);
        args.extend_from_slice(&["1", "--protocol", "no_wait", "--primitive", primitive]);
        let (_, report) = launch(&args);
        assert_checked_report(&report, 2, "tcp");
        assert!(report["committed"].as_u64().unwrap() > 0, "{primitive}");
        let per_txn = &report["verbs_per_txn"];
        let wire = per_txn["wire_messages"].as_f64().unwrap();
        let sent = per_txn[logical].as_f64().unwrap();
        // Uncoalesced, each remote request and its reply is a message of
        // its own: about as many as the logical count (half the accesses
        // are remote).
        assert!(
            wire > 0.0 && wire < sent / 2.0,
            "{primitive}: {wire} wire messages per transaction for {sent} {logical}"
        );
    }
}

/// CALVIN is a node program like any other protocol's, so it runs on
/// every fabric: here its sequencers, schedulers and executors in separate
/// processes, over shared memory and TCP, forwarding values by RPC and by
/// one-sided WRITE, and logging to backups on other ranks; the checker
/// judges the merged history, the stores and every backup copy.
#[test]
fn calvin_runs_across_processes_with_the_checker() {
    for (transport, nodes, extra) in [
        ("shm", 2, &["--primitive", "rpc"][..]),
        ("tcp", 2, &["--primitive", "onesided"][..]),
        ("tcp", 3, &["--primitive", "rpc", "--replication", "2"][..]),
    ] {
        let count = nodes.to_string();
        let mut args = vec!["--local", count.as_str(), "--transport", transport];
        args.extend_from_slice(&SMALL);
        args.extend_from_slice(&["1", "--protocol", "calvin", "--calvin-epoch-us", "1000"]);
        args.extend_from_slice(extra);
        let (_, report) = launch(&args);
        assert_checked_report(&report, nodes, transport);
        assert!(
            report["committed"].as_u64().unwrap() > 0,
            "{args:?} committed nothing"
        );
        // CALVIN's own stage breakdown came back from every rank.
        assert!(
            report["stages"]["sequence"].as_f64().unwrap() > 0.0,
            "{args:?}: {}",
            report["stages"]
        );
    }
}

// ---- every workload across processes ----

/// Runs `workload_args` (a workload on small tables) on two ranks with the
/// checker, once with every stage one-sided (over shared memory) and once
/// with every stage by RPC (over TCP): rank 0 checks the merged history
/// and every rank's final store with the workload's invariants, as a
/// `threads` run does. Returns both reports.
fn checked_on_two_ranks(workload_args: &[&str]) -> Vec<serde_json::Value> {
    let mut reports = Vec::new();
    for (primitive, transport) in [("onesided", "shm"), ("rpc", "tcp")] {
        let mut args = vec![
            "--local",
            "2",
            "--transport",
            transport,
            "--primitive",
            primitive,
            "--duration",
            "0.3",
            "--warmup",
            "0.1",
            "--check",
        ];
        args.extend_from_slice(workload_args);
        let (_, report) = launch(&args);
        assert_checked_report(&report, 2, transport);
        assert_eq!(report["config"]["workload"], workload_args[1], "{args:?}");
        assert!(
            report["committed"].as_u64().unwrap() > 0,
            "{args:?} committed nothing"
        );
        reports.push(report);
    }
    reports
}

#[test]
fn ycsb_on_two_ranks_passes_the_checker_one_sided_and_by_rpc() {
    checked_on_two_ranks(&[
        "--workload",
        "ycsb",
        "--rows-per-node",
        "2000",
        "--compute-us",
        "1",
    ]);
}

#[test]
fn smallbank_on_two_ranks_passes_the_checker_one_sided_and_by_rpc() {
    checked_on_two_ranks(&["--workload", "smallbank", "--sb-accounts-per-worker", "200"]);
}

/// TPC-C's ordered indexes live outside the registered region, in each
/// rank's own process; the invariants check every node's against its live
/// rows. Rank 0 used to check the other ranks' stores against indexes it
/// never had (empty), and every TPC-C run over `launch` failed its check.
#[test]
fn tpcc_on_two_ranks_passes_the_checker_one_sided_and_by_rpc() {
    let reports = checked_on_two_ranks(&[
        "--workload",
        "tpcc",
        "--items",
        "200",
        "--customers-per-district",
        "30",
        "--insert-headroom",
        "2000",
    ]);
    for report in reports {
        let check = &report["check"];
        assert!(
            check["invariants"].as_array().unwrap().iter().any(|d| d
                .as_str()
                .unwrap()
                .contains("the ordered indexes match the live rows")),
            "{check}"
        );
    }
}

#[test]
fn pps_on_two_ranks_passes_the_checker_one_sided_and_by_rpc() {
    checked_on_two_ranks(&["--workload", "pps", "--pps-products-per-node", "100"]);
}

#[test]
fn tpce_on_two_ranks_passes_the_checker_one_sided_and_by_rpc() {
    checked_on_two_ranks(&[
        "--workload",
        "tpce-cp",
        "--tpce-customers-per-node",
        "50",
        "--tpce-mix",
        "customer_position=4,market_feed=1",
    ]);
}

// ---- faults: bounded time, the rank and host named ----

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_node(rank: u32, nodes: u32, port: u16, extra: &[&str]) -> Child {
    verbena()
        .args([
            "node",
            "--rank",
            &rank.to_string(),
            "--nodes",
            &nodes.to_string(),
            "--bootstrap",
            &format!("127.0.0.1:{port}"),
            "--transport",
            "shm",
            "--rows-per-node",
            "2000",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("verbena node starts")
}

/// Waits for `child` at most `limit`; its exit code and stderr.
fn finish_within(mut child: Child, limit: Duration) -> (i32, String) {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut stderr)
                .unwrap();
            return (status.code().unwrap_or(-1), stderr);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("a rank did not stop within {limit:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_rank_that_never_joins_stops_the_others_in_bounded_time() {
    let port = free_port();
    let timeouts = ["--join-timeout", "2", "--duration", "0.5"];
    let rank0 = start_node(0, 3, port, &timeouts);
    let rank1 = start_node(1, 3, port, &timeouts);
    // Rank 2 is never started.
    for child in [rank0, rank1] {
        let (code, stderr) = finish_within(child, Duration::from_secs(20));
        assert_eq!(code, 1, "{stderr}");
        assert!(stderr.contains("rank(s) 2 never joined"), "{stderr}");
    }
}

#[test]
fn a_killed_rank_is_named_by_the_others_in_bounded_time() {
    let port = free_port();
    let args = ["--duration", "60", "--warmup", "0", "--stall-timeout", "3"];
    let rank0 = start_node(0, 3, port, &args);
    let mut rank1 = start_node(1, 3, port, &args);
    let rank2 = start_node(2, 3, port, &args);
    std::thread::sleep(Duration::from_secs(3));
    let pid = rank1.id();
    rank1.kill().unwrap();
    rank1.wait().unwrap();
    let started = Instant::now();
    for child in [rank0, rank2] {
        let (code, stderr) = finish_within(child, Duration::from_secs(30));
        assert_eq!(code, 1, "{stderr}");
        assert!(
            stderr.contains("rank 1 (host ") && stderr.contains(&format!("pid {pid})")),
            "the error names the dead rank, its host and pid: {stderr}"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn a_hung_rank_is_named_by_the_others_in_bounded_time() {
    let port = free_port();
    let args = ["--duration", "60", "--warmup", "0", "--stall-timeout", "3"];
    let rank0 = start_node(0, 3, port, &args);
    let rank1 = start_node(1, 3, port, &args);
    let mut rank2 = start_node(2, 3, port, &args);
    std::thread::sleep(Duration::from_secs(3));
    let pid = rank2.id();
    let stopped = Command::new("kill")
        .args(["-STOP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    for child in [rank0, rank1] {
        let (code, stderr) = finish_within(child, Duration::from_secs(30));
        assert_eq!(code, 1, "{stderr}");
        assert!(
            stderr.contains(&format!("pid {pid})")) && stderr.contains("rank 2"),
            "the error names the hung rank: {stderr}"
        );
    }
    let _ = Command::new("kill")
        .args(["-CONT", &pid.to_string()])
        .status();
    let _ = rank2.kill();
    let _ = rank2.wait();
}

#[test]
fn mismatched_ranks_and_bad_launch_flags_are_refused() {
    // Two ranks with different configurations.
    let port = free_port();
    let rank0 = start_node(0, 2, port, &["--join-timeout", "5", "--seed", "1"]);
    let rank1 = start_node(1, 2, port, &["--join-timeout", "5", "--seed", "2"]);
    for child in [rank0, rank1] {
        let (code, stderr) = finish_within(child, Duration::from_secs(20));
        assert_eq!(code, 1, "{stderr}");
        assert!(stderr.contains("different configuration"), "{stderr}");
    }
    let mut command = verbena();
    command.args([
        "launch",
        "--local",
        "2",
        // auto, not rdma: on a host without an RDMA device `--transport
        // rdma` is refused before the configuration is checked.
        "--transport",
        "auto",
        "--local-atomics",
        "cpu",
    ]);
    let output = output_within(command, Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("local_atomics = cpu") && stderr.contains("shm or tcp"),
        "{stderr}"
    );
    let mut command = verbena();
    command.args(["launch", "--local", "2", "--nodes", "3"]);
    let output = output_within(command, Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--nodes 3 contradicts"), "{stderr}");
    // CALVIN's failover needs the whole cluster in one process: asked of
    // ucx, it is refused once, by the launcher, before any rank starts.
    let mut command = verbena();
    command.args([
        "launch",
        "--local",
        "3",
        "--protocol",
        "calvin",
        "--replication",
        "2",
        "--fault",
        "crash:1@0.2",
    ]);
    let output = output_within(command, Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr
            .matches("protocol calvin does not fail over a lost rank on the ucx fabric")
            .count(),
        1,
        "{stderr}"
    );
}

#[test]
fn fabric_bench_reports_a_rate_and_the_chosen_transports() {
    for (transport, op) in [("shm", "cas"), ("shm", "rpc"), ("tcp", "read")] {
        let mut command = verbena();
        command.args([
            "fabric-bench",
            "--transport",
            transport,
            "--op",
            op,
            "--window",
            "4",
            "--seconds",
            "0.3",
        ]);
        let output = output_within(command, Duration::from_secs(120));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let rate: f64 = stdout
            .split(" ops/s")
            .next()
            .and_then(|head| head.rsplit(' ').next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no rate in {stdout}"));
        assert!(rate > 0.0, "{stdout}");
        assert!(
            stdout.contains(&format!("{op} 8 B over {transport}")),
            "{stdout}"
        );
    }
}

/// Asserts the report of a run in which rank `killed` died mid-run: the
/// survivors detected it, promoted a backup of its partition, resumed and
/// kept committing, and the checker passed on the whole run — the dead
/// rank's history read back from its journal.
fn assert_failed_over(report: &serde_json::Value, killed: u64) {
    let check = &report["check"];
    assert_eq!(check["serializable"], true, "{check}");
    assert_eq!(check["invariants_ok"], true, "{check}");
    let details = check["invariants"].as_array().unwrap();
    assert!(
        details
            .iter()
            .any(|d| d.as_str().unwrap().contains(&format!(
                "rank {killed} failed: its history read back from its journal"
            ))),
        "the dead rank's history is checked too: {check}"
    );
    let recovery = &report["recovery"];
    let recovery_s = recovery["recovery_time_s"]
        .as_f64()
        .expect("a recovery completed");
    assert!(recovery_s > 0.0 && recovery_s < 5.0, "{recovery}");
    let promoted = recovery["promoted"].as_array().unwrap();
    assert_eq!(promoted.len(), 1, "{recovery}");
    assert_eq!(promoted[0][0], killed, "{recovery}");
    assert_ne!(promoted[0][1], killed, "{recovery}");
    assert!(
        recovery["committed_after_detection"].as_u64().unwrap() > 0,
        "the survivors went on: {recovery}"
    );
}

#[test]
fn a_rank_killed_mid_run_fails_over_and_the_survivors_go_on() {
    // --fault crash:N@S makes rank N SIGKILL itself: kill -9 from within.
    for (protocol, log, replication, killed, transport) in [
        ("no_wait", "onesided", "2", 2, "shm"),
        ("occ", "rpc", "2", 1, "shm"),
        ("mvcc", "onesided", "3", 1, "shm"),
        ("maat", "rpc", "2", 2, "tcp"),
    ] {
        let crash = format!("crash:{killed}@1.0");
        let (output, report) = launch(&[
            "--local",
            "3",
            "--transport",
            transport,
            "--protocol",
            protocol,
            "--stages",
            &format!("log={log}"),
            "--replication",
            replication,
            "--fault",
            &crash,
            "--workers",
            "1",
            "--coroutines",
            "4",
            "--rows-per-node",
            "2000",
            "--duration",
            "2.5",
            "--warmup",
            "0.2",
            "--check",
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!("rank {killed} was killed by signal 9")),
            "{protocol}: {stderr}"
        );
        assert_failed_over(&report, killed);
        let fault = &report["recovery"]["faults"][0];
        assert_eq!(fault["node"], killed);
        let detection = fault["detection_s"].as_f64().expect("detected");
        // Each rank times from its own start, and starts differ by a few
        // ms: a kill detected at once can read slightly negative.
        assert!((-0.05..2.0).contains(&detection), "{fault}");
        let recovery = &report["recovery"];
        assert!(
            recovery["committed_before_fault"].as_u64().unwrap() > 0,
            "{recovery}"
        );
    }
}

/// Starts 3 ranks of a replicated run with the failure detector on (rank
/// 0 writes its report into the returned directory), for a test that then
/// kills or freezes one of them.
fn start_fault_tolerant_trio(
    name: &str,
    protocol: &str,
) -> (Child, Child, Child, std::path::PathBuf) {
    let port = free_port();
    let dir = std::env::temp_dir().join(format!(
        "verbena-ucx-{name}-{}-{protocol}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let report_arg = dir.join("report.json").display().to_string();
    let common = [
        "--protocol",
        protocol,
        "--replication",
        "2",
        "--failure-detector",
        "on",
        "--duration",
        "4",
        "--warmup",
        "0.2",
        "--workers",
        "1",
        "--coroutines",
        "4",
        "--check",
    ];
    let mut rank0_args = common.to_vec();
    rank0_args.extend(["--json", report_arg.as_str()]);
    let rank0 = start_node(0, 3, port, &rank0_args);
    let rank1 = start_node(1, 3, port, &common);
    let rank2 = start_node(2, 3, port, &common);
    (rank0, rank1, rank2, dir)
}

/// Rank 0's report from `start_fault_tolerant_trio`'s directory, which
/// it then removes.
fn read_report(dir: &std::path::Path) -> serde_json::Value {
    let report = serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
    std::fs::remove_dir_all(dir).unwrap();
    report
}

#[test]
fn an_external_kill_9_of_a_rank_is_failed_over() {
    let (rank0, mut rank1, rank2, dir) = start_fault_tolerant_trio("kill9", "no_wait");
    std::thread::sleep(Duration::from_secs(2));
    let killed = Command::new("kill")
        .args(["-9", &rank1.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let _ = rank1.wait();
    let (code, stderr) = finish_within(rank2, Duration::from_secs(60));
    assert_eq!(code, 0, "rank 2 goes on and finishes: {stderr}");
    let (code, stderr) = finish_within(rank0, Duration::from_secs(60));
    assert_eq!(code, 0, "rank 0 goes on and reports: {stderr}");
    assert_failed_over(&read_report(&dir), 1);
}

/// A rank frozen (SIGSTOP) long enough to be declared failed, then woken
/// (SIGCONT): the survivors fail it over as if it had died, and when it
/// runs again its lease is gone, so it writes nothing into their memory
/// before it learns it was declared failed and stops (exit code 4) — the
/// checker passes on the whole run. Without the lease a woken rank went on
/// installing writes over the survivors' newer versions. Over `shm` the
/// lease is 100 ms (`config::faults::lease_of`), so a freeze of 0.3 s —
/// shorter than the 500 ms lease of old — is declared too: about one
/// lease after the rank froze.
#[test]
fn a_frozen_rank_is_failed_over_and_writes_nothing_when_it_wakes() {
    for (protocol, frozen_s) in [("occ", 0.8), ("maat", 2.5), ("occ", 0.3)] {
        let (rank0, rank1, rank2, dir) = start_fault_tolerant_trio("freeze", protocol);
        std::thread::sleep(Duration::from_secs(2));
        let signal = |name: &str| {
            let sent = Command::new("kill")
                .args([name, &rank1.id().to_string()])
                .status()
                .unwrap();
            assert!(sent.success());
        };
        signal("-STOP");
        std::thread::sleep(Duration::from_secs_f64(frozen_s));
        signal("-CONT");
        let (code, stderr) = finish_within(rank1, Duration::from_secs(60));
        assert_eq!(code, 4, "{protocol}: the woken rank stops: {stderr}");
        assert!(stderr.contains("declared failed"), "{protocol}: {stderr}");
        let (code, stderr) = finish_within(rank2, Duration::from_secs(60));
        assert_eq!(code, 0, "{protocol}: rank 2 goes on: {stderr}");
        let (code, stderr) = finish_within(rank0, Duration::from_secs(60));
        assert_eq!(code, 0, "{protocol}: rank 0 goes on and reports: {stderr}");
        assert_failed_over(&read_report(&dir), 1);
    }
}
