//! Multi-process runs started as a user starts them on a cluster, and the
//! job key that keeps strangers out of them:
//!
//! * three ranks under Open MPI's `mpirun`, each a `verbena node` that
//!   takes its rank and size from `OMPI_COMM_WORLD_RANK`/`SIZE`;
//! * three ranks in three Linux network namespaces joined by a bridge,
//!   each with its own address, over TCP, started by `verbena launch
//!   --hosts FILE` through a remote shell that is `ip netns exec` (as ssh
//!   is on a real cluster);
//! * connections that are not this job's — garbage, a wrong key, a rank of
//!   another job — refused and logged while the run completes.
//!
//! Every run has the checker on. Where `mpirun` is missing, or network
//! namespaces cannot be made (not root, no `ip`, a sandbox that forbids
//! them), that test says so on stderr (`SKIPPED …`) and passes without
//! running; `VERBENA_REQUIRE_LAUNCHERS` lists what must not be skipped
//! (`mpirun`, `netns`: `.ci/run` installs `openmpi-bin` and requires
//! both).
//!
//! Built only with `--features ucx`.
#![cfg(feature = "ucx")]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

mod common;
use common::output_within;

const VERBENA: &str = env!("CARGO_BIN_EXE_verbena");

/// Says why a test does not run, where the harness does not swallow it
/// (it captures `eprintln!`, not writes to the stderr handle); fails
/// instead when `VERBENA_REQUIRE_LAUNCHERS` names `what`.
fn skip(test: &str, what: &str, why: &str) {
    let required = std::env::var("VERBENA_REQUIRE_LAUNCHERS").unwrap_or_default();
    if required.split(',').any(|r| r.trim() == what) {
        panic!("{test} cannot run here ({why}) and VERBENA_REQUIRE_LAUNCHERS names {what}");
    }
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// The JSON report on `output`'s stdout, after asserting the run passed.
fn report_of(output: &Output, what: &str) -> serde_json::Value {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{what} failed: {stderr}");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{what}: no JSON report ({e}); stdout: {}; stderr: {stderr}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// A checked run of `nodes` ranks over `transport`: serializable,
/// invariants held, every rank a process of its own.
fn assert_checked(report: &serde_json::Value, nodes: usize, transport: &str) {
    let check = &report["check"];
    assert_eq!(check["serializable"], true, "{check}");
    assert_eq!(check["invariants_ok"], true, "{check}");
    assert!(check["txn_count"].as_u64().unwrap() > 0, "{check}");
    assert!(report["committed"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(report["config"]["fabric"], "ucx");
    assert_eq!(report["config"]["nodes"], nodes);
    let cluster = &report["cluster"];
    assert_eq!(cluster["transport"], transport);
    let ranks = cluster["ranks"].as_array().expect("ranks listed");
    assert_eq!(ranks.len(), nodes);
    let mut pids: Vec<u64> = ranks.iter().map(|r| r["pid"].as_u64().unwrap()).collect();
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), nodes, "one process per rank: {cluster}");
}

/// The run's flags every test here uses (small, short, checked, RPCs so
/// every transport commits).
const RUN: [&str; 16] = [
    "--duration",
    "0.5",
    "--warmup",
    "0.1",
    "--rows-per-node",
    "2000",
    "--workers",
    "1",
    "--check",
    "--protocol",
    "occ",
    "--primitive",
    "rpc",
    "--join-timeout",
    "30",
    "--json",
];

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn on_path(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

// ---- mpirun ----

#[test]
fn three_ranks_under_mpirun_are_serializable() {
    if !on_path("mpirun") {
        return skip(
            "three_ranks_under_mpirun_are_serializable",
            "mpirun",
            "mpirun is not installed (Debian: apt-get install openmpi-bin)",
        );
    }
    let port = free_port();
    let bootstrap = format!("127.0.0.1:{port}");
    // The guide's command (docs/guide/fabrics.md): the key in the environment (`-x` exports it to
    // every rank), no --rank or --nodes (they come from mpirun), and the
    // flags CI needs as root on a small machine.
    let mut command = Command::new("mpirun");
    command
        .env("VERBENA_CLUSTER_KEY", "mpirun test key 0123456789")
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "--bind-to",
            "none",
        ])
        .args(["-np", "3", "-x", "VERBENA_CLUSTER_KEY", VERBENA, "node"])
        .args(["--bootstrap", &bootstrap, "--transport", "shm"])
        .args(RUN)
        .arg("-");
    let output = output_within(command, Duration::from_secs(240));
    let report = report_of(&output, "mpirun -np 3 verbena node");
    assert_checked(&report, 3, "shm");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("refused"), "{stderr}");
}

// ---- network namespaces ----

/// The namespaces of one test: one per rank, each with `eth0` on its own
/// address, and one holding the bridge that joins them (so nothing is
/// added to the host's own namespace). Removed on drop, on every path.
struct Namespaces {
    ranks: Vec<String>,
    switch: String,
}

/// 10.77.0.0/24: a private range, used only on these namespaces' links.
fn rank_address(rank: usize) -> String {
    format!("10.77.0.{}", rank + 1)
}

fn ip(args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("`ip` cannot run: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

impl Namespaces {
    fn create(ranks: usize) -> Result<Namespaces, String> {
        static RUN: AtomicU32 = AtomicU32::new(0);
        let prefix = format!(
            "verbena-test-{}-{}",
            std::process::id(),
            RUN.fetch_add(1, Ordering::Relaxed)
        );
        remove_stale_namespaces();
        // Created one by one into the guard, so a failure halfway removes
        // what was made.
        let mut made = Namespaces {
            ranks: Vec::new(),
            switch: String::new(),
        };
        let switch = format!("{prefix}-switch");
        ip(&["netns", "add", &switch])?;
        made.switch = switch.clone();
        ip(&["-n", &switch, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &switch, "link", "set", "br0", "up"])?;
        for rank in 0..ranks {
            let name = format!("{prefix}-rank{rank}");
            ip(&["netns", "add", &name])?;
            made.ranks.push(name.clone());
            let port = format!("port{rank}");
            ip(&[
                "-n", &switch, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                "netns", &name,
            ])?;
            ip(&["-n", &switch, "link", "set", &port, "master", "br0", "up"])?;
            let address = format!("{}/24", rank_address(rank));
            ip(&["-n", &name, "addr", "add", &address, "dev", "eth0"])?;
            ip(&["-n", &name, "link", "set", "eth0", "up"])?;
            ip(&["-n", &name, "link", "set", "lo", "up"])?;
        }
        Ok(made)
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        // Deleting a namespace deletes its interfaces (and the veth peers).
        for name in self.ranks.iter().chain([&self.switch]) {
            if !name.is_empty() {
                let _ = ip(&["netns", "delete", name]);
            }
        }
    }
}

/// Namespaces an earlier run of these tests left behind when it was
/// killed (no `Drop`): those whose process is gone.
fn remove_stale_namespaces() {
    let Ok(listing) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&listing.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix("verbena-test-") else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        if !pid.is_empty() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "delete", name]);
        }
    }
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("verbena-launchers-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn three_ranks_in_three_network_namespaces_over_tcp_from_a_hosts_file() {
    const TEST: &str = "three_ranks_in_three_network_namespaces_over_tcp_from_a_hosts_file";
    if !on_path("ip") {
        return skip(TEST, "netns", "`ip` (iproute2) is not installed");
    }
    let namespaces = match Namespaces::create(3) {
        Ok(namespaces) => namespaces,
        Err(why) => {
            return skip(
                TEST,
                "netns",
                &format!("network namespaces cannot be made here (not root, or a sandbox forbids them): {why}"),
            )
        }
    };
    let scratch = Scratch::new("netns");
    // The hosts file of a three-host cluster, and the remote shell that
    // reaches each host: `ip netns exec` into its namespace where a real
    // cluster has `ssh HOST`.
    let hosts = scratch.0.join("hosts");
    std::fs::write(
        &hosts,
        format!(
            "# three hosts, one rank each\n{}\n{}\n{}\n",
            rank_address(0),
            rank_address(1),
            rank_address(2)
        ),
    )
    .unwrap();
    let mut agent = String::from("#!/bin/sh\n# HOST COMMAND, as ssh takes them\ncase \"$1\" in\n");
    for (rank, name) in namespaces.ranks.iter().enumerate() {
        agent.push_str(&format!("{}) ns={name} ;;\n", rank_address(rank)));
    }
    agent.push_str("*) echo \"no namespace for host $1\" >&2; exit 255 ;;\nesac\n");
    agent.push_str("exec ip netns exec \"$ns\" sh -c \"$2\"\n");
    let rsh = scratch.0.join("rsh");
    std::fs::write(&rsh, agent).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&rsh, std::fs::Permissions::from_mode(0o755)).unwrap();

    let mut command = Command::new(VERBENA);
    command
        .env("VERBENA_RSH", &rsh)
        .args([
            "launch",
            "--hosts",
            hosts.to_str().unwrap(),
            "--port",
            "17017",
        ])
        .args(["--transport", "tcp", "--stall-timeout", "15"])
        .args(RUN)
        .arg("-");
    let output = output_within(command, Duration::from_secs(240));
    let report = report_of(&output, "verbena launch --hosts (three namespaces)");
    assert_checked(&report, 3, "tcp");
    // Each rank ran in its own namespace: the addresses rank 0 saw them
    // join from are the three hosts' own, not loopback.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("refused"), "{stderr}");
    for rank in report["cluster"]["ranks"].as_array().unwrap() {
        let names: Vec<String> = rank["transports"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|n| n.as_array().unwrap().clone())
            .map(|n| n.as_str().unwrap().to_string())
            .collect();
        assert!(
            names.iter().any(|n| n.starts_with("tcp/eth0")),
            "UCX's TCP runs over each namespace's eth0: {names:?}"
        );
    }
    drop(namespaces);
}

// ---- strangers ----

fn node(rank: u32, port: u16, key: &str, job: &str, extra: &[&str]) -> Command {
    let mut command = Command::new(VERBENA);
    command
        .env("VERBENA_CLUSTER_KEY", key)
        .env("VERBENA_JOB_ID", job)
        .args(["node", "--rank", &rank.to_string(), "--nodes", "3"])
        .args(["--bootstrap", &format!("127.0.0.1:{port}")])
        .args(["--transport", "shm"])
        .args(RUN)
        .args(extra);
    command
}

fn spawn_quiet(mut command: Command) -> Child {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("verbena node starts")
}

#[test]
fn strangers_are_refused_and_logged_and_the_run_completes_checked() {
    let port = free_port();
    let key = "this job's key: 7f3a9c0e5b21";
    let job = "job-1";
    let scratch = Scratch::new("strangers");
    let report_path = scratch.0.join("report.json");
    let rank0 = node(0, port, key, job, &[report_path.to_str().unwrap()]);
    let rank0 = std::thread::spawn(move || output_within(rank0, Duration::from_secs(240)));

    // Garbage, once rank 0 listens.
    let started = Instant::now();
    let mut garbage = loop {
        match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(stream) => break stream,
            Err(_) if started.elapsed() < Duration::from_secs(60) => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => panic!("rank 0 never listened: {e}"),
        }
    };
    let garbage_port = garbage.local_addr().unwrap().port();
    // Rank 0 may refuse the stranger before the bytes go out (a reset):
    // that is a refusal too, and the run must go on all the same.
    if let Err(e) = garbage.write_all(b"GET / HTTP/1.0\r\n\r\n") {
        assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ),
            "writing to rank 0: {e}"
        );
    }
    // A rank 1 with the wrong key, a rank 2 of another job (right key):
    // each is refused, told why, and stops — the one of another job after
    // trying again until its (short) join timeout, since the address may
    // yet be its own rank 0's.
    for (rank, key, job, reason) in [
        (
            1,
            "not this job's key 0123",
            job,
            "does not hold this job's cluster key",
        ),
        (2, key, "job-2", "belongs to another job (job `job-2`"),
    ] {
        let intruder = spawn_quiet(node(rank, port, key, job, &["-", "--join-timeout", "2"]));
        let output = output_within_child(intruder, Duration::from_secs(120));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("refused this rank") && stderr.contains(reason),
            "{stderr}"
        );
    }
    // The job's own ranks join, and the run completes checked.
    let members: Vec<Child> = (1..3)
        .map(|rank| spawn_quiet(node(rank, port, key, job, &["-"])))
        .collect();
    let output = rank0.join().unwrap();
    for member in members {
        let output = output_within_child(member, Duration::from_secs(120));
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report_path).unwrap()).unwrap();
    assert_checked(&report, 3, "shm");
    // Each refusal logged once, with the peer's address and the reason.
    let refusals: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("refused a connection from 127.0.0.1:"))
        .collect();
    // The garbage connection stays open and sends an incomplete frame: rank 0
    // refuses it when its handshake limit (10 s) runs out, which a short run
    // may not reach; the run must go on beside it either way.
    let garbage_refusals = refusals
        .iter()
        .filter(|l| l.contains(&format!("127.0.0.1:{garbage_port}:")))
        .count();
    assert!(garbage_refusals <= 1, "{stderr}");
    assert_eq!(refusals.len(), 2 + garbage_refusals, "{stderr}");
    for reason in [
        "does not hold this job's cluster key".to_string(),
        "belongs to another job".to_string(),
    ] {
        let lines = refusals.iter().filter(|l| l.contains(&reason)).count();
        assert_eq!(lines, 1, "`{reason}` logged once: {stderr}");
    }
    drop(garbage);
}

/// Waits for a child spawned with piped stderr, at most `limit`.
fn output_within_child(mut child: Child, limit: Duration) -> Output {
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "a rank did not stop within {limit:?}: it hangs; stderr: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
