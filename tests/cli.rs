//! The `verbena` binary as a script sees it: bad input exits 2 with a message
//! naming the value and what is allowed; a run writes the JSON report and the
//! history in the documented shapes.

use std::process::{Command, Output};

fn verbena(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_verbena"))
        .args(args)
        .output()
        .expect("the verbena binary runs")
}

fn assert_usage_error(args: &[&str], expected: &[&str]) {
    let output = verbena(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{args:?} should exit 2; stderr: {stderr}"
    );
    for text in expected {
        assert!(
            stderr.contains(text),
            "{args:?}: stderr lacks `{text}`: {stderr}"
        );
    }
}

#[test]
fn bad_values_exit_2_naming_the_value_and_what_is_allowed() {
    assert_usage_error(
        &["run", "--nodes", "0"],
        &["nodes = 0", "allowed: 1..=4096"],
    );
    assert_usage_error(&["run", "--theta", "1.0"], &["ycsb.theta = 1", "[0, 1)"]);
    assert_usage_error(
        &["run", "--fabric", "ucx", "--warm-location-cache"],
        &[
            "location_cache_warm = true",
            "allowed: fabric = sim or threads",
        ],
    );
    assert_usage_error(&["run", "--theta", "-0.1"], &["ycsb.theta", "[0, 1)"]);
    assert_usage_error(
        &["run", "--protocol", "2pl"],
        &["unknown protocol `2pl`", "no_wait", "drtm"],
    );
    assert_usage_error(
        &["run", "--stages", "validate=rpc"],
        &["no_wait has no stage `validate`", "lock, log"],
    );
    assert_usage_error(
        &["run", "--stages", "fetch=rpc"],
        &["unknown stage `fetch`", "lock, read"],
    );
    assert_usage_error(
        &["run", "--stages", "lock=dma"],
        &["unknown primitive `dma`", "onesided, rpc"],
    );
    assert_usage_error(
        &["run", "--primitive", "verbs"],
        &["unknown primitive `verbs`"],
    );
    assert_usage_error(
        &["run", "--coroutines", "many"],
        &["--coroutines `many` is not a whole number"],
    );
    assert_usage_error(
        &["run", "--record-bytes", "12"],
        &["record_bytes = 12", "multiple of 8"],
    );
    assert_usage_error(&["run", "--nodes"], &["--nodes needs a value"]);
    assert_usage_error(
        &["run", "--nodes", "64", "--workers", "64"],
        &["4096 worker threads", "at most 1024"],
    );
    assert_usage_error(&["run", "--warmup", "nan"], &["warmup_s = NaN"]);
    assert_usage_error(
        &["run", "--rows-per-node", "100000000", "--nodes", "64"],
        &["MiB of registered memory"],
    );
    assert_usage_error(
        &["run", "--frobnicate", "3"],
        &["unknown flag --frobnicate"],
    );
    assert_usage_error(&["deploy"], &["unknown command `deploy`"]);
    assert_usage_error(
        &["run", "--config", "/nonexistent/verbena.toml"],
        &["cannot read config file"],
    );
}

#[test]
fn a_bad_config_file_names_the_key() {
    let dir = std::env::temp_dir().join(format!("verbena-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.toml");
    std::fs::write(&path, "nodes = 2\nwrokers = 3\n").unwrap();
    assert_usage_error(&["run", "--config", path.to_str().unwrap()], &["wrokers"]);
    std::fs::write(&path, "nodes = 2\n[ycsb]\ntheta = 2.0\n").unwrap();
    assert_usage_error(
        &["run", "--config", path.to_str().unwrap()],
        &["ycsb.theta = 2"],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_checked_run_writes_the_report_and_history_scripts_consume() {
    let dir = std::env::temp_dir().join(format!("verbena-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("run.toml");
    std::fs::write(
        &config,
        "protocol = \"occ\"\nnodes = 3\nduration_s = 0.2\nwarmup_s = 0.05\n[stages]\nvalidate = \"rpc\"\n[ycsb]\nrows_per_node = 1000\n",
    )
    .unwrap();
    let json = dir.join("report.json");
    let history = dir.join("history.jsonl");
    let output = verbena(&[
        "run",
        "--config",
        config.to_str().unwrap(),
        "--primitive",
        "onesided",
        "--stages",
        "read=rpc",
        "--check",
        "--json",
        json.to_str().unwrap(),
        "--history",
        history.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout {stdout} stderr {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("serializable: yes"), "{stdout}");

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["config"]["protocol"], "occ");
    assert_eq!(report["config"]["nodes"], 3, "the file's value is kept");
    assert_eq!(
        report["config"]["stages"]["read"], "rpc",
        "the flag's stage choice"
    );
    assert_eq!(
        report["config"]["stages"]["validate"], "rpc",
        "the file's stage choice"
    );
    assert_eq!(
        report["config"]["stages"]["lock"], "onesided",
        "the default primitive"
    );
    assert!(report["throughput_txn_per_s"].as_f64().unwrap() > 0.0);
    assert!(report["abort_rate"].as_f64().unwrap() >= 0.0);
    let per_worker: Vec<f64> = report["worker_txn_per_s"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(per_worker.len(), 3, "one entry per worker thread");
    let total = report["throughput_txn_per_s"].as_f64().unwrap();
    assert!((per_worker.iter().sum::<f64>() - total).abs() < 1e-6 * total.max(1.0));
    for p in ["p50", "p90", "p99", "p999"] {
        assert!(
            report["latency_us"][p].as_f64().unwrap() > 0.0,
            "latency {p}"
        );
    }
    for stage in [
        "read",
        "lock",
        "validate",
        "log",
        "commit",
        "release",
        "execution",
    ] {
        assert!(report["stages"][stage].is_number(), "stage {stage}");
    }
    assert!(report["verbs_per_txn"]["rpc"].as_f64().unwrap() > 0.0);
    assert!(
        report["worker_time"]["rpc_handlers"].as_f64().unwrap() > 0.0,
        "reads are served by RPC"
    );
    assert!(report["verbs_per_txn"]["read"].as_f64().unwrap() > 0.0);
    assert_eq!(report["check"]["serializable"], true);
    assert_eq!(report["check"]["invariants_ok"], true);
    assert!(report["check"]["cycle"].is_null());

    let text = std::fs::read_to_string(&history).unwrap();
    let mut lines = 0;
    for line in text.lines() {
        let txn: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(txn["txn"].is_u64() && txn["node"].as_u64().unwrap() < 3);
        for item in txn["reads"]
            .as_array()
            .unwrap()
            .iter()
            .chain(txn["writes"].as_array().unwrap())
        {
            let item = item.as_array().unwrap();
            assert_eq!(item.len(), 3, "[table, key, seq]");
            assert!(item.iter().all(|v| v.is_u64()));
        }
        lines += 1;
    }
    assert_eq!(lines, report["check"]["txn_count"].as_u64().unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn help_lists_the_commands_and_flags() {
    let output = verbena(&["help"]);
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8_lossy(&output.stdout);
    for needle in [
        "verbena run",
        "verbena demo",
        "--stages",
        "--check",
        "--history",
    ] {
        assert!(text.contains(needle), "help lacks {needle}");
    }
}

#[test]
fn the_example_configs_stay_valid() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/configs");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut config: verbena::config::Config =
            toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        config
            .validate()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        seen += 1;
    }
    assert!(seen >= 2, "examples/configs holds the documented examples");
}

#[test]
fn json_to_stdout_leaves_a_parseable_stream() {
    let output = verbena(&[
        "run",
        "--duration",
        "0.1",
        "--warmup",
        "0",
        "--rows-per-node",
        "1000",
        "--json",
        "-",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("stdout is the JSON report");
    assert_eq!(report["config"]["protocol"], "no_wait");
    assert!(report["check"].is_null(), "no --check: check is null");
    assert!(String::from_utf8_lossy(&output.stderr).contains("throughput"));
}

#[test]
fn hybrid_codes_select_stages_by_rcc_bits_and_refuse_foreign_bits() {
    let output = verbena(&[
        "run",
        "--protocol",
        "occ",
        "--hybrid",
        "0b100011",
        "--fabric",
        "sim",
        "--duration",
        "0.002",
        "--warmup",
        "0",
        "--json",
        "-",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let stages = &report["config"]["stages"];
    // 0b100011 = validate (32) + read (2) + lock (1).
    for (stage, primitive) in [
        ("lock", "onesided"),
        ("read", "onesided"),
        ("validate", "onesided"),
        ("log", "rpc"),
        ("commit", "rpc"),
        ("release", "rpc"),
    ] {
        assert_eq!(stages[stage], primitive, "{stage}: {stages}");
    }
    assert_usage_error(
        &["run", "--protocol", "no_wait", "--hybrid", "34"],
        &["no stage read (2), validate (32)", "lock=1"],
    );
    assert_usage_error(&["run", "--hybrid", "lock"], &["not a hybrid code"]);
    assert_usage_error(
        &["run", "--hybrid", "1", "--stages", "lock=rpc"],
        &["either --hybrid or --stages"],
    );
    let listing = verbena(&["protocols"]);
    let text = String::from_utf8_lossy(&listing.stdout);
    assert!(text.contains("occ") && text.contains("validate=32") && text.contains("renew=64"));
}

#[test]
fn sim_runs_report_virtual_time_and_hashes_and_check_replays() {
    let run = |seed: &str| {
        let output = verbena(&[
            "run",
            "--fabric",
            "sim",
            "--profile",
            "roce",
            "--duration",
            "0.003",
            "--warmup",
            "0",
            "--seed",
            seed,
            "--json",
            "-",
        ]);
        assert_eq!(output.status.code(), Some(0));
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let (a, b) = (run("3"), run("3"));
    assert_eq!(a["time"], "simulated");
    assert_eq!(a["config"]["profile"]["name"], "roce");
    assert_eq!(a["sim"]["history_hash"], b["sim"]["history_hash"]);
    assert_eq!(a["sim"]["memory_hash"], b["sim"]["memory_hash"]);
    assert!(a["sim"]["events"].as_u64().unwrap() > 0);
    assert_usage_error(
        &["run", "--profile", "infiniband"],
        &[
            "unknown network profile `infiniband`",
            "cx4-edr",
            "cloud-lan",
        ],
    );
    assert_usage_error(
        &["run", "--fabric", "dpdk"],
        &["unknown fabric", "threads, sim, ucx"],
    );

    // The command a failing case prints replays that one case, not the
    // ten seeds from it that `--seed` alone would run.
    let replay = verbena::experiments::matrix::replay_command(verbena::experiments::matrix::Case {
        protocol: verbena::base::ProtocolKind::Occ,
        seed: 4,
        code: 5,
        workload: verbena::config::WorkloadKind::Ycsb,
        failure: verbena::experiments::matrix::Failure::None,
    });
    let replay_args: Vec<&str> = replay.split_whitespace().skip(1).collect();
    let check = verbena(&replay_args);
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("check: 1 cases") && stdout.contains("0 failed"),
        "{stdout}"
    );
    assert_usage_error(
        &["check", "--protocol", "no_wait", "--hybrid", "2"],
        &["--hybrid 2", "lock=1"],
    );
    assert_usage_error(&["check", "--seeds", "0"], &["--seeds 0"]);
}

/// `check --expect-hashes` holds a change of the simulator to the recorded
/// hashes: equal ones pass, a moved one fails the check and names the case.
#[test]
fn check_compares_every_case_hash_with_the_recorded_file() {
    let dir = std::env::temp_dir().join(format!("verbena-hashes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let recorded = dir.join("recorded.txt");
    let case = ["check", "--protocol", "mvcc", "--seed", "2", "--seeds", "1"];
    let record = verbena(&[&case[..], &["--hashes", recorded.to_str().unwrap()]].concat());
    assert_eq!(record.status.code(), Some(0));
    let text = std::fs::read_to_string(&recorded).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(
        lines.len() > 2,
        "every plan of the seed is recorded: {text}"
    );
    assert!(lines.iter().all(|l| l.starts_with("ycsb mvcc seed=2 code=")
        && l.contains(" history=")
        && l.contains(" memory=")));

    let again = verbena(&[&case[..], &["--expect-hashes", recorded.to_str().unwrap()]].concat());
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert_eq!(again.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains(": 0 differ"), "{stdout}");

    // One plan's memory hash moved: the check fails and names that case.
    let moved =
        lines[1].rsplit_once(" memory=").unwrap().0.to_string() + " memory=0000000000000000";
    let tampered = dir.join("tampered.txt");
    std::fs::write(&tampered, text.replace(lines[1], &moved)).unwrap();
    let differs = verbena(&[&case[..], &["--expect-hashes", tampered.to_str().unwrap()]].concat());
    let stderr = String::from_utf8_lossy(&differs.stderr);
    assert_eq!(differs.status.code(), Some(3), "{stderr}");
    let key = lines[1].split_once(" history=").unwrap().0;
    assert!(
        stderr.contains(&format!("HASH {key}: recorded")),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&differs.stdout).contains(": 1 differ"));

    assert_usage_error(
        &["check", "--expect-hashes", "/nonexistent/hashes.txt"],
        &["--expect-hashes /nonexistent/hashes.txt", "cannot read"],
    );
    assert_usage_error(
        &["check", "--hashes", "/nonexistent/dir/hashes.txt"],
        &["--hashes /nonexistent/dir/hashes.txt", "cannot create"],
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Multi-process commands (issue 7) check their own flags before anything
/// starts; a build without the `ucx` feature says what to install.
#[test]
fn node_and_launch_refuse_missing_or_bad_flags() {
    assert_usage_error(&["node", "--nodes", "2"], &["needs --rank R"]);
    assert_usage_error(
        &["node", "--rank", "0", "--nodes", "2"],
        &["needs --bootstrap HOST:PORT"],
    );
    assert_usage_error(
        &["node", "--rank", "0", "--bootstrap", "nohostport"],
        &["not HOST:PORT"],
    );
    assert_usage_error(&["launch"], &["needs --local N or --hosts FILE"]);
    assert_usage_error(&["launch", "--local", "0"], &["--local 0", "1..=256"]);
    assert_usage_error(
        &["launch", "--local", "2", "--hosts", "h"],
        &["either --local N or --hosts FILE"],
    );
    assert_usage_error(
        &["launch", "--hosts", "/nonexistent/hosts"],
        &["cannot read hosts file /nonexistent/hosts"],
    );
    assert_usage_error(
        &["launch", "--local", "2", "--transport", "ib"],
        &["unknown transport `ib`", "shm, tcp, rdma, auto"],
    );
}

#[cfg(not(feature = "ucx"))]
#[test]
fn the_ucx_fabric_without_the_feature_says_what_to_install() {
    for args in [
        &["run", "--fabric", "ucx"][..],
        &["launch", "--local", "2"][..],
        &[
            "node",
            "--rank",
            "0",
            "--nodes",
            "2",
            "--bootstrap",
            "localhost:1",
        ][..],
    ] {
        assert_usage_error(args, &["libucx-dev", "--features ucx"]);
    }
}

#[cfg(feature = "ucx")]
#[test]
fn run_with_the_ucx_fabric_points_to_launch() {
    assert_usage_error(
        &["run", "--fabric", "ucx", "--duration", "0.1"],
        &["verbena launch --local N"],
    );
}

#[test]
fn each_command_has_its_own_help() {
    let run = verbena(&["run", "--help"]);
    assert_eq!(run.status.code(), Some(0));
    let text = String::from_utf8_lossy(&run.stdout);
    for flag in [
        "--protocol",
        "--stages",
        "--json",
        "--history",
        "--rows-per-node",
        "--fault",
    ] {
        assert!(text.contains(flag), "run --help lacks {flag}: {text}");
    }
    for flag in ["--seeds", "--hashes", "--vary"] {
        assert!(
            !text.contains(flag),
            "run --help shows {flag} of another command"
        );
    }
    let check = verbena(&["check", "--help"]);
    assert_eq!(
        check.status.code(),
        Some(0),
        "check --help is help, not a flag"
    );
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(
        text.contains("--seeds") && text.contains("--hashes"),
        "{text}"
    );
    assert!(!text.contains("--rows-per-node"), "{text}");
    let sweep = verbena(&["help", "sweep"]);
    assert_eq!(sweep.status.code(), Some(0));
    let text = String::from_utf8_lossy(&sweep.stdout);
    assert!(
        text.contains("--vary") && text.contains("--theta"),
        "{text}"
    );
    let version = verbena(&["--version"]);
    assert_eq!(version.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&version.stdout).contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn misspelled_flags_and_names_get_a_suggestion() {
    assert_usage_error(
        &["run", "--protocl", "occ"],
        &["unknown flag --protocl", "did you mean `--protocol`?"],
    );
    assert_usage_error(
        &["run", "--protocol", "ooc"],
        &["unknown protocol `ooc`", "no_wait", "did you mean `occ`?"],
    );
    assert_usage_error(
        &["run", "--workload=ycbs"],
        &["unknown workload `ycbs`", "did you mean `ycsb`?"],
    );
    assert_usage_error(
        &["run", "--fabric", "simm"],
        &["unknown fabric `simm`", "did you mean `sim`?"],
    );
    assert_usage_error(
        &["run", "--profile", "roec"],
        &["unknown network profile `roec`", "did you mean `roce`?"],
    );
    assert_usage_error(
        &["check", "--protocol", "occ,nowiat"],
        &["unknown protocol `nowiat`", "did you mean `no_wait`?"],
    );
    assert_usage_error(
        &["sweep", "--jbos", "2"],
        &["unknown flag --jbos for `verbena sweep`", "`--jobs`"],
    );
    // Aliases parse as they always did; the last of a repeated flag wins.
    let output = verbena(&[
        "run",
        "--protocol",
        "occ",
        "--protocol=nowait",
        "--primitive",
        "one-sided",
        "--fabric=sim",
        "--duration",
        "0.001",
        "--warmup",
        "0",
        "--json",
        "-",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["config"]["protocol"], "no_wait");
}

#[test]
fn completions_name_every_command() {
    for shell in ["bash", "zsh", "fish"] {
        let output = verbena(&["completions", shell]);
        assert_eq!(output.status.code(), Some(0), "{shell}");
        let script = String::from_utf8_lossy(&output.stdout);
        for word in [
            "sweep",
            "fabric-bench",
            "reproduce",
            "protocol",
            "rows-per-node",
        ] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
    }
    assert_usage_error(&["completions", "tcsh"], &["tcsh"]);
}

/// The guide's flag tables (the configuration reference in
/// docs/guide/running.md and the workload tables of
/// docs/guide/workloads.md) list exactly the flags `verbena run` parses.
#[test]
fn the_guide_flag_tables_match_the_parser() {
    let read = |path: &str| {
        std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR")))
            .unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    let running = read("docs/guide/running.md");
    let guide = format!("{running}\n{}", read("docs/guide/workloads.md"));
    let documented: std::collections::BTreeSet<String> = guide
        .lines()
        .filter_map(|line| line.strip_prefix("| `--"))
        .map(|rest| {
            let cell = rest.split('`').next().unwrap();
            format!("--{}", cell.split_whitespace().next().unwrap())
        })
        .collect();
    let parsed: std::collections::BTreeSet<String> =
        verbena::cli::args::run_flag_names().into_iter().collect();
    let undocumented: Vec<_> = parsed.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&parsed).collect();
    assert!(
        undocumented.is_empty(),
        "run flags missing from the guide's tables: {undocumented:?}"
    );
    assert!(
        unknown.is_empty(),
        "the guide documents flags `verbena run` does not parse: {unknown:?}"
    );
    let reference = running
        .split("## Configuration reference")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/guide/running.md has a Configuration reference");
    for flag in ["--config", "--protocol", "--json", "--fault", "--transport"] {
        assert!(
            reference.contains(&format!("| `{flag}")),
            "the reference table lacks {flag}"
        );
    }
}

fn assert_quick_usage_error(args: &[&str], path: &str) {
    let started = std::time::Instant::now();
    assert_usage_error(args, &[path]);
    // The run asked for an hour; it never started.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{args:?} took {:?}",
        started.elapsed()
    );
}

#[test]
fn bad_output_paths_fail_before_the_run_starts() {
    let hour = ["--duration", "3600", "--warmup", "0"];
    let json = "/nonexistent/dir/out.json";
    assert_quick_usage_error(&[&["run", "--json", json][..], &hour].concat(), json);
    let history = "/nonexistent/dir/history.jsonl";
    assert_quick_usage_error(
        &[&["run", "--history", history][..], &hour].concat(),
        history,
    );
    // A directory below a plain file cannot be made, not even by root.
    let dir = std::env::temp_dir().join(format!("verbena-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("plain-file");
    std::fs::write(&file, "").unwrap();
    let out = file.join("sweep");
    let out = out.to_str().unwrap();
    assert_quick_usage_error(
        &[
            &[
                "sweep",
                "--out",
                out,
                "--vary",
                "coroutines=1,2",
                "--fabric",
                "sim",
            ][..],
            &hour,
        ]
        .concat(),
        out,
    );
    assert_quick_usage_error(
        &[
            &[
                "hybrid",
                "--protocol",
                "occ",
                "--out",
                out,
                "--fabric",
                "sim",
            ][..],
            &hour,
        ]
        .concat(),
        out,
    );
    assert_quick_usage_error(&["plot", dir.to_str().unwrap(), "--out", out], out);
    let hashes = "/nonexistent/dir/hashes.txt";
    assert_quick_usage_error(&["check", "--seeds", "1000", "--hashes", hashes], hashes);
    assert!(!std::path::Path::new(out).exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The TCP transport of verbena's own that `fabric-bench --link socket`
/// measures (for comparison with UCX's TCP) needs no UCX: two processes,
/// RPCs in flight, a rate; and it refuses what it cannot measure.
#[test]
fn fabric_bench_measures_rpcs_over_its_own_socket_transport() {
    let output = verbena(&[
        "fabric-bench",
        "--link",
        "socket",
        "--window",
        "4",
        "--seconds",
        "0.2",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let ops: u64 = stdout
        .split(" ops/s (")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no rate in {stdout}"));
    assert!(ops > 0, "{stdout}");
    assert!(stdout.contains("over socket"), "{stdout}");
    assert_usage_error(
        &["fabric-bench", "--link", "socket", "--op", "read"],
        &["--link socket", "allowed: --op rpc --transport tcp"],
    );
}

/// `verbena check --failover` names its failures, and refuses what would
/// run nothing.
#[test]
fn check_failover_refuses_unknown_failures_and_empty_choices() {
    assert_usage_error(
        &["check", "--failover", "crash-r4"],
        &["crash-r4", "crash-r2, crash-r3, pause-r2, pause-r3"],
    );
    assert_usage_error(
        &["check", "--protocol", "calvin", "--failover", "pause-r2"],
        &["no case to run", "crashes only"],
    );
}
