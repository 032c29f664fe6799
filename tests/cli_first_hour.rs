//! The command line in a new user's first hour: help that fits the screen
//! and lists only the flags a command takes, "did you mean" wherever a
//! name is typed, and the warnings and refusals that save an hour, each
//! with its exit code and message.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

fn verbena(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_verbena"))
        .args(args)
        .env("COLUMNS", "80")
        .output()
        .expect("the verbena binary runs")
}

fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn assert_usage_error(args: &[&str], expected: &[&str]) -> String {
    let output = verbena(args);
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    for text in expected {
        assert!(stderr.contains(text), "{args:?}: lacks `{text}`: {stderr}");
    }
    stderr
}

fn help_of(command: &str) -> String {
    let output = verbena(&[command, "--help"]);
    assert_eq!(output.status.code(), Some(0));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn help_fits_eighty_columns_with_examples_and_only_the_flags_that_apply() {
    let commands = [
        "run",
        "launch",
        "node",
        "sweep",
        "check",
        "hybrid",
        "plot",
        "reproduce",
    ];
    for command in commands {
        let help = help_of(command);
        for line in help.lines() {
            assert!(
                line.chars().count() <= 80,
                "{command} --help has a line of {} columns: {line}",
                line.chars().count()
            );
        }
        assert!(
            help.contains("Examples:"),
            "{command} --help has no example"
        );
    }
    // The flags a command lists, less its examples (which may name the
    // flags it leaves to another command).
    let flags_of = |command: &str| {
        let help = help_of(command);
        help.split("Examples:")
            .next()
            .unwrap_or_default()
            .to_string()
    };
    let run = flags_of("run");
    assert!(run.contains("--jitter") && run.contains("--force"));
    assert!(!run.contains("--transport") && !run.contains("--join-timeout"));
    for rank in ["launch", "node"] {
        let help = flags_of(rank);
        assert!(help.contains("--transport") && help.contains("--nodes"));
        for sim_only in [
            "--jitter",
            "--swarm",
            "--emulated-nodes",
            "--fabric",
            "--profile",
        ] {
            assert!(!help.contains(sim_only), "{rank} --help lists {sim_only}");
        }
    }
}

#[test]
fn a_flag_a_command_ignores_is_refused_there() {
    assert_usage_error(
        &["launch", "--local", "2", "--fabric", "sim"],
        &[
            "--fabric sim does not apply to `verbena launch`",
            "allowed: ucx",
            "verbena run --fabric sim",
        ],
    );
    assert_usage_error(
        &[
            "node",
            "--rank",
            "0",
            "--bootstrap",
            "h:1",
            "--fabric",
            "threads",
        ],
        &["--fabric threads does not apply to `verbena node`"],
    );
    assert_usage_error(
        &["launch", "--local", "2", "--jitter", "0.2"],
        &[
            "--jitter does not apply to `verbena launch`",
            "--fabric sim",
        ],
    );
    assert_usage_error(
        &["run", "--transport", "tcp"],
        &[
            "--transport does not apply to `verbena run`",
            "verbena launch",
        ],
    );
}

#[test]
fn suggestions_wherever_a_name_is_typed() {
    assert_usage_error(&["rn"], &["unknown command `rn`", "did you mean `run`?"]);
    let stderr = assert_usage_error(
        &["sweep", "--vary", "protocl=occ"],
        &["unknown config key `protocl`", "did you mean `protocol`?"],
    );
    assert!(stderr.len() < 300, "no list of every key: {stderr}");

    let dir = std::env::temp_dir().join(format!("verbena-first-hour-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("typos.toml");
    std::fs::File::create(&path)
        .unwrap()
        .write_all(b"duraton_s = 0.2\nduration = 0.2\nnodes = 2\n[ycsb]\nthetaa = 0.5\n")
        .unwrap();
    assert_usage_error(
        &["run", "--config", path.to_str().unwrap()],
        &[
            "3 unknown key(s)",
            "`duraton_s`: did you mean `duration_s`?",
            "`duration`: it is the flag --duration's name; its key is `duration_s`",
            "`ycsb.thetaa`: did you mean `ycsb.theta`?",
        ],
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_threads_run_far_past_the_cores_is_refused_without_force() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // 1024 worker threads is the most a threads run allows; past 128 per
    // core is refused, so only a host of fewer than 8 cores refuses it.
    if cores * 128 >= 1024 {
        return;
    }
    assert_usage_error(
        &["run", "--nodes", "1024", "--duration", "0.01"],
        &[
            "1024 worker threads on",
            "--fabric sim",
            "refused (give --force to run it anyway)",
        ],
    );
}

#[test]
fn a_sim_run_whose_warmup_dominates_says_so() {
    let output = verbena(&[
        "run",
        "--fabric",
        "sim",
        "--rows-per-node",
        "1000",
        "--warmup",
        "0.02",
        "--duration",
        "0.001",
    ]);
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("simulates the 0.02 s warm-up too, 20×"),
        "{stderr}"
    );
}

#[test]
fn rdma_without_a_device_names_the_alternatives() {
    let has_rdma = std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some());
    if has_rdma {
        return;
    }
    for line in [
        "launch --local 2 --transport rdma",
        "node --rank 0 --nodes 2 --bootstrap 127.0.0.1:1 --transport rdma",
    ] {
        let args: Vec<&str> = line.split(' ').collect();
        assert_usage_error(
            &args,
            &[
                "--transport rdma needs an RDMA device",
                "shm",
                "tcp",
                "auto",
            ],
        );
    }
}

#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    for args in [
        &["completions", "bash"][..],
        &["protocols"][..],
        &["run", "--help"][..],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_verbena"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the verbena binary runs");
        // The reader goes away before (or while) verbena writes.
        drop(child.stdout.take());
        let output = child.wait_with_output().expect("verbena ends");
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        assert_eq!(stderr_of(&output), "", "{args:?}");
    }
}
