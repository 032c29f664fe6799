//! `verbena sweep`, `hybrid` and `plot` as a user runs them, on the
//! deterministic sim fabric: outputs parse back into what ran, an
//! interrupted sweep resumes into exactly the rows of an uninterrupted one,
//! figures hold the expected series, and bad input exits 2 with a message.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use verbena::experiments::sweep::WALL_CLOCK_FIELDS;
use verbena::experiments::table::parse_csv;

fn verbena(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_verbena"))
        .args(args)
        .output()
        .expect("the verbena binary runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("verbena-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A small, fast sim cluster (a run takes a fraction of a second).
const SMALL_SIM: [&str; 14] = [
    "--fabric",
    "sim",
    "--profile",
    "cx4-edr",
    "--rows-per-node",
    "2000",
    "--location-cache",
    "1024",
    "--duration",
    "0.001",
    "--warmup",
    "0.0002",
    "--seed",
    "5",
];

fn sweep_args<'a>(out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["sweep", "--out", out, "--quiet"];
    args.extend(SMALL_SIM);
    args.extend(extra);
    args
}

fn read_rows(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("results.json")).expect("results.json");
    match serde_json::from_str(&text).expect("results.json is JSON") {
        Value::Array(rows) => rows,
        other => panic!("results.json is not an array: {other}"),
    }
}

/// A row without the fields that time the host.
fn without_wall_clock(mut row: Value) -> Value {
    for field in WALL_CLOCK_FIELDS {
        let mut parts: Vec<&str> = field.split('.').collect();
        let last = parts.pop().unwrap();
        let mut at = &mut row;
        for part in parts {
            at = &mut at[part];
        }
        at.as_object_mut().expect("an object").remove(last);
    }
    row
}

#[test]
fn sweep_rows_parse_back_as_json_and_csv() {
    let dir = scratch("parse");
    let out = dir.to_str().unwrap();
    let output = verbena(&sweep_args(
        out,
        &[
            "--check",
            "--vary",
            "protocol=no_wait,occ",
            "--vary",
            "ycsb.theta=0.5,0.9",
            "--distribution",
            "zipf",
            "--repeat",
            "2",
        ],
    ));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("protocol=occ ycsb.theta=0.9"), "{stdout}");
    let rows = read_rows(&dir);
    assert_eq!(rows.len(), 8, "2 protocols × 2 θ × 2 repeats");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["run"], i as u64);
        let report = &row["report"];
        let config = &report["config"];
        // The knobs are in the resolved config; repeat r runs seed 5 + r.
        assert_eq!(config["protocol"], row["knobs"]["protocol"]);
        assert_eq!(
            config["ycsb"]["theta"].as_f64().unwrap().to_string(),
            row["knobs"]["ycsb.theta"].as_str().unwrap()
        );
        assert_eq!(config["seed"], 5 + row["repeat"].as_u64().unwrap());
        assert_eq!(config["fabric"], "sim");
        assert!(config["stages"].as_object().is_some_and(|s| !s.is_empty()));
        assert_eq!(row["verbena_version"], env!("CARGO_PKG_VERSION"));
        assert!(row["git_revision"].as_str().is_some_and(|r| !r.is_empty()));
        assert!(row["host"]["cores"].as_u64().unwrap() >= 1);
        assert!(report["throughput_txn_per_s"].as_f64().unwrap() > 0.0);
        assert!(report["latency_us"]["p99"].as_f64().unwrap() > 0.0);
        assert!(report["time_breakdown"]["useful_work"].as_f64().unwrap() > 0.0);
        assert_eq!(report["check"]["serializable"], true);
        // The time breakdown accounts for (nearly) all coroutine time and
        // never for more than there was.
        let shares = report["time_breakdown"].as_object().unwrap();
        let total: f64 = shares.values().map(|v| v.as_f64().unwrap()).sum();
        assert!((total - 1.0).abs() < 1e-9, "{shares:?}");
        assert!(shares.values().all(|v| v.as_f64().unwrap() >= 0.0));
        assert!(shares["other"].as_f64().unwrap() < 0.2, "{shares:?}");
    }
    // Repeats with different seeds are different samples.
    assert_ne!(
        rows[0]["report"]["sim"]["history_hash"],
        rows[4]["report"]["sim"]["history_hash"]
    );
    // The CSV holds the same rows and values.
    let csv = parse_csv(&std::fs::read_to_string(dir.join("results.csv")).unwrap()).unwrap();
    let header = &csv[0];
    assert_eq!(
        &header[..5],
        ["run", "point", "repeat", "knob.protocol", "knob.ycsb.theta"]
    );
    assert_eq!(csv.len(), 1 + rows.len());
    let column = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    for (record, row) in csv[1..].iter().zip(&rows) {
        assert_eq!(record.len(), header.len());
        let throughput: f64 = record[column("throughput_txn_per_s")].parse().unwrap();
        assert_eq!(
            throughput,
            row["report"]["throughput_txn_per_s"].as_f64().unwrap()
        );
        assert_eq!(
            record[column("config.protocol")],
            row["knobs"]["protocol"].as_str().unwrap()
        );
        assert_eq!(
            record[column("git_revision")],
            row["git_revision"].as_str().unwrap()
        );
        assert_eq!(record[column("check.serializable")], "true");
        assert!(!record[column("config.profile.name")].is_empty());
    }
    // The summary: one line per point, means over the two repeats.
    let summary = parse_csv(&std::fs::read_to_string(dir.join("summary.csv")).unwrap()).unwrap();
    assert_eq!(summary.len(), 1 + 4);
    let mean_col = summary[0]
        .iter()
        .position(|h| h == "throughput_txn_per_s.mean")
        .unwrap();
    let expected = (rows[0]["report"]["throughput_txn_per_s"].as_f64().unwrap()
        + rows[4]["report"]["throughput_txn_per_s"].as_f64().unwrap())
        / 2.0;
    let got: f64 = summary[1][mean_col].parse().unwrap();
    assert!(
        (got - expected).abs() < 1e-6 * expected,
        "{got} vs {expected}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_interrupted_sweep_resumes_into_the_rows_of_an_uninterrupted_one() {
    let knobs = [
        "--vary",
        "coroutines=1,2,4",
        "--vary",
        "primitive=onesided,rpc",
        "--repeat",
        "2",
    ];
    let whole = scratch("whole");
    let output = verbena(&sweep_args(whole.to_str().unwrap(), &knobs));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected: Vec<Value> = read_rows(&whole)
        .into_iter()
        .map(without_wall_clock)
        .collect();
    assert_eq!(expected.len(), 12);

    // Kill a second sweep once its first row is in the journal.
    let cut = scratch("cut");
    let cut_str = cut.to_str().unwrap().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_verbena"))
        .args(sweep_args(&cut_str, &knobs))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let journal = cut.join("rows.jsonl");
    let started = Instant::now();
    // Rows whose line is complete (a row being written has no newline yet).
    let complete_rows = || {
        std::fs::read_to_string(&journal)
            .map(|t| t.matches('\n').count())
            .unwrap_or(0)
    };
    while complete_rows() == 0 && started.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill();
    let _ = child.wait();
    let rows_at_kill = complete_rows();
    assert!(
        (1..12).contains(&rows_at_kill),
        "the kill should land mid-sweep; the journal had {rows_at_kill} rows"
    );
    // A kill in the middle of a write leaves a torn last line.
    let mut text = std::fs::read_to_string(&journal).unwrap();
    text.push_str("{\"run\": 5, \"point\": 5, \"rep");
    std::fs::write(&journal, text).unwrap();

    let output = verbena(
        &sweep_args(&cut_str, &knobs)
            .into_iter()
            .filter(|a| *a != "--quiet")
            .collect::<Vec<_>>(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("{rows_at_kill} of 12 runs already done")),
        "{stderr}"
    );
    let resumed: Vec<Value> = read_rows(&cut)
        .into_iter()
        .map(without_wall_clock)
        .collect();
    assert_eq!(resumed, expected);
    // The journal is whole again: one row per run.
    let journal_rows = std::fs::read_to_string(&journal).unwrap();
    assert_eq!(journal_rows.lines().count(), 12);

    // Run once more: nothing left to do, same rows.
    let output = verbena(&sweep_args(&cut_str, &knobs));
    assert!(output.status.success());
    assert_eq!(
        read_rows(&cut)
            .into_iter()
            .map(without_wall_clock)
            .collect::<Vec<_>>(),
        expected
    );

    // Another sweep into the same directory is refused, not mixed in.
    let output = verbena(&sweep_args(&cut_str, &["--vary", "coroutines=8"]));
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("different sweep") && stderr.contains("--restart"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&whole);
    let _ = std::fs::remove_dir_all(&cut);
}

/// `(series name, its points' data-x values)` of a line chart.
fn svg_series(svg: &str) -> Vec<(String, Vec<f64>)> {
    let mut series = Vec::new();
    for chunk in svg.split("<g class=\"series\" data-name=\"").skip(1) {
        let name = chunk[..chunk.find('"').unwrap()].to_string();
        let body = &chunk[..chunk.find("</g>").unwrap()];
        let xs = body
            .split("data-x=\"")
            .skip(1)
            .map(|s| s[..s.find('"').unwrap()].parse().unwrap())
            .collect();
        series.push((name, xs));
    }
    series
}

fn svg_layers(svg: &str) -> Vec<String> {
    svg.split("<g class=\"layer\" data-name=\"")
        .skip(1)
        .map(|c| c[..c.find('"').unwrap()].to_string())
        .collect()
}

fn assert_well_formed(svg: &str) {
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<g").count(), svg.matches("</g>").count());
    assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
}

#[test]
fn plot_draws_one_series_per_other_knob_with_units_and_legends() {
    let dir = scratch("plot");
    let out = dir.to_str().unwrap();
    let output = verbena(&sweep_args(
        out,
        &[
            "--vary",
            "protocol=no_wait,occ",
            "--vary",
            "coroutines=1,2,8",
        ],
    ));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = verbena(&["plot", out, "--no-png"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    for name in [
        "throughput",
        "latency_p50",
        "latency_p99",
        "abort_rate",
        "stages",
        "time_breakdown",
    ] {
        assert_well_formed(&read(&format!("{name}.svg")));
        assert!(stdout.contains(&format!("{name}.svg")), "{stdout}");
    }
    let throughput = read("throughput.svg");
    // x = coroutines (the numeric knob); one line per protocol, each with
    // a point per coroutine count.
    let series = svg_series(&throughput);
    assert_eq!(
        series,
        vec![
            ("protocol=no_wait".to_string(), vec![1.0, 2.0, 8.0]),
            ("protocol=occ".to_string(), vec![1.0, 2.0, 8.0]),
        ]
    );
    assert!(throughput.contains("coroutines per worker"));
    assert!(throughput.contains("throughput (simulated txn/s)"));
    let legend = &throughput[throughput.find("<g class=\"legend\">").expect("a legend")..];
    assert!(legend.contains(">protocol=no_wait</text>") && legend.contains(">protocol=occ</text>"));
    assert!(read("abort_rate.svg").contains("aborted attempts (%)"));
    // Stacked stage bars: one layer per stage the protocols have, plus
    // execution; one bar per point.
    let stages = read("stages.svg");
    let layers = svg_layers(&stages);
    for stage in ["lock", "read", "validate", "log", "commit", "execution"] {
        assert!(layers.iter().any(|l| l == stage), "{layers:?}");
    }
    let lock_layer = &stages[stages.find("data-name=\"lock\"").unwrap()..];
    let lock_layer = &lock_layer[..lock_layer.find("</g>").unwrap()];
    assert_eq!(lock_layer.matches("<rect").count(), 6);
    assert_eq!(
        svg_layers(&read("time_breakdown.svg")),
        [
            "useful work",
            "concurrency control",
            "commit protocol",
            "abort",
            "back-off",
            "other"
        ]
    );
    // The report page shows every figure and the table.
    let html = read("report.html");
    for name in ["throughput.svg", "stages.svg", "time_breakdown.svg"] {
        assert!(html.contains(&format!("src=\"{name}\"")), "{name}");
    }
    assert!(html.contains("Results per point") && html.contains("git "));
    // --x picks another knob: protocol as categories, a line per count.
    let output = verbena(&["plot", out, "--no-png", "--x", "protocol"]);
    assert!(output.status.success());
    let names: Vec<String> = svg_series(&read("throughput.svg"))
        .into_iter()
        .map(|s| s.0)
        .collect();
    assert_eq!(names, ["coroutines=1", "coroutines=2", "coroutines=8"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hybrid_enumeration_ranks_every_code_and_tests_the_breakdown_pick() {
    let dir = scratch("hybrid");
    let out = dir.to_str().unwrap();
    let mut args = vec![
        "hybrid",
        "--protocol",
        "no_wait",
        "--out",
        out,
        "--quiet",
        "--check",
    ];
    args.extend(SMALL_SIM);
    let output = verbena(&args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("ranked by throughput") && stdout.contains("latency-breakdown method"));
    let analysis: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("hybrid.json")).unwrap()).unwrap();
    let group = &analysis["groups"][0];
    let codes = group["codes"].as_array().unwrap();
    assert_eq!(codes.len(), 16, "NO_WAIT has 4 stages: 2^4 codes");
    let throughput_of = |code: &Value| {
        codes.iter().find(|c| c["code"] == *code).unwrap()["throughput_txn_per_s"]
            .as_f64()
            .unwrap()
    };
    let ranked: Vec<f64> = group["by_throughput"]
        .as_array()
        .unwrap()
        .iter()
        .map(throughput_of)
        .collect();
    assert!(ranked.windows(2).all(|w| w[0] >= w[1]), "{ranked:?}");
    let all = analysis["all_onesided_code"].as_u64().unwrap();
    let best_pure = throughput_of(&Value::from(all)).max(throughput_of(&Value::from(0)));
    for code in group["beat_both_throughput"].as_array().unwrap() {
        assert!(throughput_of(code) > best_pure);
    }
    let proposed = &group["breakdown"]["proposed_code"];
    assert!(
        group["breakdown"]["proposed"]["throughput_txn_per_s"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(codes.iter().any(|c| c["code"] == *proposed));
    assert!(codes.iter().all(|c| c["check_passed"] == true));
    // The ranking figure has a bar per code, best first.
    let output = verbena(&["plot", out, "--no-png"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let svg = std::fs::read_to_string(dir.join("hybrid_throughput.svg")).unwrap();
    assert_well_formed(&svg);
    let values: Vec<f64> = svg
        .split("class=\"bar\"")
        .skip(1)
        .map(|s| {
            let v = &s[s.find("data-value=\"").unwrap() + 12..];
            v[..v.find('"').unwrap()].parse().unwrap()
        })
        .collect();
    assert_eq!(values, ranked);
    assert!(svg.contains("all one-sided") && svg.contains("all RPC"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_sweep_runs_on_the_threads_fabric_too() {
    let dir = scratch("threads");
    let out = dir.to_str().unwrap();
    let output = verbena(&[
        "sweep",
        "--out",
        out,
        "--quiet",
        "--duration",
        "0.05",
        "--warmup",
        "0.01",
        "--rows-per-node",
        "2000",
        "--location-cache",
        "1024",
        "--check",
        "--vary",
        "primitive=onesided,rpc",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rows = read_rows(&dir);
    assert_eq!(rows.len(), 2);
    for row in &rows {
        assert_eq!(row["report"]["time"], "wall");
        assert_eq!(row["report"]["config"]["fabric"], "threads");
        assert!(row["report"]["committed"].as_u64().unwrap() > 0);
        assert_eq!(row["report"]["check"]["serializable"], true);
        assert!(row["run_wall_s"].as_f64().unwrap() >= 0.06);
    }
    let output = verbena(&["plot", out, "--no-png"]);
    assert!(output.status.success());
    let svg = std::fs::read_to_string(dir.join("throughput.svg")).unwrap();
    assert!(svg.contains("throughput (txn/s)"), "wall-time units");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_preset_runs_its_paper_experiment_and_writes_a_report_naming_it() {
    let dir = scratch("preset");
    let out = dir.to_str().unwrap();
    let output = verbena(&[
        "reproduce",
        "drtmh-phases",
        "--small",
        "--out",
        out,
        "--quiet",
        "--no-png",
        // 3 nodes: the preset replicates 3 ways (DrTM+H §4.1).
        "--nodes",
        "3",
        "--rows-per-node",
        "2000",
        "--duration",
        "0.001",
        "--warmup",
        "0.0002",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rows = read_rows(&dir);
    assert_eq!(rows.len(), 6, "six phase choices");
    for row in &rows {
        let config = &row["report"]["config"];
        // The flags given after the name override the preset's base.
        assert_eq!(config["nodes"], 3);
        assert_eq!(config["protocol"], "occ");
        assert_eq!(config["replication"], 3);
        assert_eq!(row["report"]["check"]["serializable"], true);
        let knob = row["knobs"]["stages"].as_str().unwrap();
        for part in knob.split('+') {
            let (stage, primitive) = part.split_once('=').unwrap();
            assert_eq!(config["stages"][stage], primitive, "{knob}");
        }
    }
    let all_rpc = &rows[5]["report"]["config"]["stages"];
    assert!(all_rpc.as_object().unwrap().values().all(|p| p == "rpc"));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("DrTM+H §5, Fig. 7–10") && html.contains("drtmh-phases"));
    assert!(dir.join("stages.svg").exists());
    let preset: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("preset.json")).unwrap()).unwrap();
    assert_eq!(preset["scale"], "small");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `verbena reproduce ARGS --out DIR` and returns its rows.
fn reproduce_rows(dir: &std::path::Path, args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec!["reproduce"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--out", dir.to_str().unwrap(), "--quiet", "--no-png"]);
    let output = verbena(&all);
    assert!(
        output.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    read_rows(dir)
}

/// A preset runs the paper's cluster by default and today's small one with
/// `--small`; at either scale a flag after the name overrides the base and
/// `--vary` replaces the preset's knob of the same key.
#[test]
fn a_preset_runs_the_papers_cluster_unless_small() {
    let dir = scratch("preset-scale");
    // The paper's 4 nodes × 10 threads × 1 coroutine with 3-way
    // replication (RCC §6.1–6.2), cut to a sliver of virtual time.
    let rows = reproduce_rows(
        &dir,
        &[
            "rcc-stage-latency",
            "--vary",
            "protocol=no_wait",
            "--vary",
            "primitive=onesided",
            "--rows-per-node",
            "2000",
            "--duration",
            "0.001",
            "--warmup",
            "0",
        ],
    );
    assert_eq!(rows.len(), 1, "the knobs given replace the preset's");
    let config = &rows[0]["report"]["config"];
    assert_eq!(config["nodes"], 4);
    assert_eq!(config["workers"], 10);
    assert_eq!(config["coroutines"], 1);
    assert_eq!(config["replication"], 3);
    assert_eq!(config["ycsb"]["rows_per_node"], 2000, "the override wins");
    let preset: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("preset.json")).unwrap()).unwrap();
    assert_eq!(preset["scale"], "paper");
    let _ = std::fs::remove_dir_all(&dir);

    let dir = scratch("preset-small");
    let rows = reproduce_rows(
        &dir,
        &[
            "rcc-contention",
            "--small",
            "--vary",
            "protocol=occ",
            "--vary",
            "hot_probability=0.5",
            "--coroutines",
            "2",
            "--duration",
            "0.001",
        ],
    );
    assert_eq!(rows.len(), 2, "one-sided and RPC at one hot probability");
    for row in &rows {
        let config = &row["report"]["config"];
        assert_eq!(config["nodes"], 4);
        assert_eq!(config["workers"], 1);
        assert_eq!(config["coroutines"], 2, "the override wins");
        assert_eq!(config["replication"], 1);
        assert_eq!(config["ycsb"]["rows_per_node"], 10000);
        assert_eq!(config["ycsb"]["hot_probability"], 0.5);
        assert_eq!(config["duration_s"], 0.001);
        assert_eq!(config["warmup_s"], 0.001, "the small base's warm-up");
        assert_eq!(row["report"]["check"]["serializable"], true);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn assert_usage_error(args: &[&str], expected: &[&str]) {
    let output = verbena(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    for text in expected {
        assert!(
            stderr.contains(text),
            "{args:?}: stderr lacks `{text}`: {stderr}"
        );
    }
}

#[test]
fn bad_experiment_input_exits_2_naming_what_is_allowed() {
    assert_usage_error(
        &["sweep", "--vary", "thetta=0.1"],
        &["unknown config key `thetta`", "did you mean `theta`?"],
    );
    assert_usage_error(&["sweep", "--vary", "coroutines"], &["not KEY=V1,V2"]);
    assert_usage_error(
        &["sweep", "--vary", "coroutines=4,300"],
        &["sweep point coroutines=300", "1..=255"],
    );
    assert_usage_error(
        &["sweep", "--vary", "theta=0.5,x"],
        &["ycsb.theta = `x` is not a number"],
    );
    assert_usage_error(
        &["sweep", "--vary", "nodes=2", "--jobs", "2"],
        &["--jobs 2", "--fabric sim"],
    );
    assert_usage_error(&["sweep", "--json", "x.json"], &["--out DIR"]);
    assert_usage_error(
        &["sweep", "--vary", "protocol=occ", "--hybrid", "64"],
        &["hybrid code 64", "occ"],
    );
    assert_usage_error(
        &["hybrid", "--protocol", "occ", "--vary", "hybrid=1,2"],
        &["chooses the stage codes itself"],
    );
    assert_usage_error(&["plot"], &["needs RESULTS"]);
    assert_usage_error(
        &["plot", "/nonexistent/results.json"],
        &["cannot read results"],
    );
    assert_usage_error(
        &["reproduce", "fig99"],
        &["unknown preset `fig99`", "rcc-coroutines"],
    );
    let list = verbena(&["reproduce", "--list"]);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(list.status.success());
    for name in [
        "rcc-coroutines",
        "rcc-contention",
        "deneva-contention",
        "drtmh-phases",
        "Fig. 14",
        "--small",
        "paper scale",
        "on 2 cores",
    ] {
        assert!(text.contains(name), "{text}");
    }
}

/// The `width` and `height` an SVG's root element declares.
fn svg_declared_size(svg: &str) -> (u32, u32) {
    let attr = |name: &str| {
        let key = format!(" {name}=\"");
        let start = svg.find(&key).unwrap() + key.len();
        svg[start..start + svg[start..].find('"').unwrap()]
            .parse()
            .unwrap()
    };
    (attr("width"), attr("height"))
}

/// `(panel name, [(series name, data-color, stroke-dasharray)])` of a line
/// chart, in drawing order.
type PanelLines = Vec<(String, Vec<(String, String, String)>)>;

fn svg_panels(svg: &str) -> PanelLines {
    let attr = |text: &str, name: &str| {
        let key = format!("{name}=\"");
        text.find(&key).map_or(String::new(), |at| {
            let rest = &text[at + key.len()..];
            rest[..rest.find('"').unwrap()].to_string()
        })
    };
    svg.split("<g class=\"panel\" ")
        .skip(1)
        .map(|panel| {
            let lines = panel
                .split("<g class=\"series\" ")
                .skip(1)
                .map(|series| {
                    let polyline = &series[series.find("<polyline").unwrap()..];
                    let polyline = &polyline[..polyline.find("/>").unwrap()];
                    (
                        attr(series, "data-name"),
                        attr(series, "data-color"),
                        attr(polyline, "stroke-dasharray"),
                    )
                })
                .collect();
            (attr(panel, "data-name"), lines)
        })
        .collect()
}

#[test]
fn plot_writes_png_copies_in_process_with_their_labels() {
    let dir = scratch("png");
    let out = dir.to_str().unwrap();
    let output = verbena(&sweep_args(
        out,
        &["--vary", "protocol=no_wait,occ", "--vary", "coroutines=1,2"],
    ));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // No browser reachable: PATH holds nothing and VERBENA_CHROMIUM is unset.
    let empty = dir.join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_verbena"))
        .args(["plot", out])
        .env("PATH", &empty)
        .env_remove("VERBENA_CHROMIUM")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!stdout.contains("skipped"), "{stdout}");
    for name in [
        "throughput",
        "latency_p50",
        "latency_p99",
        "abort_rate",
        "stages",
        "time_breakdown",
    ] {
        assert!(stdout.contains(&format!("{name}.png")), "{stdout}");
        let svg = std::fs::read_to_string(dir.join(format!("{name}.svg"))).unwrap();
        let png = resvg::tiny_skia::Pixmap::load_png(dir.join(format!("{name}.png")))
            .unwrap_or_else(|e| panic!("{name}.png does not decode: {e}"));
        assert_eq!(
            (png.width(), png.height()),
            svg_declared_size(&svg),
            "{name}.png is the SVG's size"
        );
        let pixels = png.pixels();
        let is_dark = |p: &resvg::tiny_skia::PremultipliedColorU8| {
            u32::from(p.red()) + u32::from(p.green()) + u32::from(p.blue()) < 300
        };
        let coloured = pixels
            .iter()
            .filter(|p| {
                p.red().max(p.green()).max(p.blue()) - p.red().min(p.green()).min(p.blue()) > 80
            })
            .count();
        assert!(coloured > 200, "{name}.png: {coloured} coloured pixels");
        // Left of the y axis (x < 78 px, between the top and bottom ticks)
        // there is only text: the axis label, and the tick labels where
        // the axis is not moved right for turned bar labels. Unrendered
        // text leaves it white.
        let text_pixels = (60..370)
            .flat_map(|y| (10..78).map(move |x| (x, y)))
            .filter(|&(x, y)| is_dark(&pixels[(y * png.width() + x) as usize]))
            .count();
        assert!(
            text_pixels > 100,
            "{name}.png: {text_pixels} dark pixels where the y labels are: text not rendered"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn more_than_eight_lines_become_small_multiples_each_protocol_keeping_its_colour() {
    let dir = scratch("facet");
    let out = dir.to_str().unwrap();
    let protocols = ["no_wait", "wait_die", "timestamp", "occ", "mvcc"];
    let vary = format!("protocol={}", protocols.join(","));
    let output = verbena(&sweep_args(
        out,
        &[
            "--vary",
            &vary,
            "--vary",
            "primitive=onesided,rpc",
            "--vary",
            "coroutines=1,2",
        ],
    ));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let plot = |extra: &[&str]| {
        let mut args = vec!["plot", out, "--no-png"];
        args.extend(extra);
        let output = verbena(&args);
        assert!(
            output.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        svg_panels(&read("throughput.svg"))
    };
    // 10 lines: more than a panel holds. By default the fewest panels of
    // at most 8 lines: a panel per primitive (Deneva Fig. 2's layout), a
    // line per protocol in the protocol's colour, dashed in the RPC panel.
    let by_primitive = plot(&[]);
    assert_eq!(by_primitive.len(), 2, "{by_primitive:?}");
    for (title, lines) in &by_primitive {
        let dash = if title == "primitive=rpc" { "7 4" } else { "" };
        let expected: Vec<(String, String, String)> = protocols
            .iter()
            .map(|p| {
                (
                    format!("protocol={p}"),
                    verbena::experiments::plot::protocol_color(p).to_string(),
                    dash.to_string(),
                )
            })
            .collect();
        assert_eq!(lines, &expected, "{title}");
    }
    assert_well_formed(&read("throughput.svg"));
    assert!(read("report.html").contains("one panel per primitive"));
    assert_eq!(plot(&["--facet", "primitive"]), by_primitive);
    // A panel per protocol (RCC Fig. 18), a line per primitive: solid
    // one-sided and dashed RPC, in that protocol's colour again.
    let panels = plot(&["--facet", "protocol"]);
    assert_eq!(panels.len(), protocols.len(), "{panels:?}");
    for ((title, lines), protocol) in panels.iter().zip(protocols) {
        assert_eq!(title, &format!("protocol={protocol}"));
        let color = verbena::experiments::plot::protocol_color(protocol);
        assert_eq!(
            lines,
            &vec![
                (
                    "primitive=onesided".to_string(),
                    color.to_string(),
                    String::new()
                ),
                (
                    "primitive=rpc".to_string(),
                    color.to_string(),
                    "7 4".to_string()
                ),
            ],
            "{protocol}"
        );
    }
    assert_well_formed(&read("throughput.svg"));
    // One panel on request.
    let panels = plot(&["--facet", "none"]);
    assert_eq!(panels.len(), 1);
    assert_eq!(panels[0].1.len(), 10);
    // Colours are fixed per protocol, not per position: OCC is drawn alike
    // in a sweep where it is the second protocol.
    let other = dir.join("two");
    let output = verbena(&sweep_args(
        other.to_str().unwrap(),
        &["--vary", "protocol=mvcc,occ", "--vary", "coroutines=1,2"],
    ));
    assert!(output.status.success());
    let output = verbena(&["plot", other.to_str().unwrap(), "--no-png"]);
    assert!(output.status.success());
    let two = svg_panels(&std::fs::read_to_string(other.join("throughput.svg")).unwrap());
    let occ = |panels: &PanelLines| {
        panels
            .iter()
            .flat_map(|(_, lines)| lines)
            .find(|(name, _, _)| name.contains("protocol=occ"))
            .map(|(_, color, _)| color.clone())
            .unwrap()
    };
    assert_eq!(occ(&two), occ(&panels));
    assert_ne!(two[0].1[0].1, two[0].1[1].1, "MVCC and OCC differ");
    // A knob the results do not vary, or the x knob, is a usage error
    // naming the knobs that can split the panels.
    assert_usage_error(
        &["plot", out, "--no-png", "--facet", "theta"],
        &[
            "--facet theta",
            "ycsb.theta",
            "allowed: protocol, primitive, none",
        ],
    );
    assert_usage_error(
        &["plot", out, "--no-png", "--facet", "coroutines"],
        &["is the x axis", "allowed: protocol, primitive, none"],
    );
    assert_usage_error(&["plot", out, "--facet"], &["--facet needs a value"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A DRTM point whose read leases are shorter than its transactions
/// commits nothing, and both its report and the sweep's table say why
/// (RCC Fig. 19's 256 µs compute against DRTM's lease).
#[test]
fn a_point_that_commits_nothing_says_why() {
    let dir = scratch("lease-note");
    let out = dir.to_str().unwrap();
    let output = verbena(&sweep_args(
        out,
        &[
            "--protocol",
            "drtm",
            "--compute-us",
            "256",
            "--vary",
            "drtm_lease_ns=20000",
        ],
    ));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rows = read_rows(&dir);
    let report = &rows[0]["report"];
    assert_eq!(report["committed"], 0, "20 µs leases, 256 µs of compute");
    let note = report["notes"][0].as_str().unwrap();
    assert!(
        note.contains("lease_expired") && note.contains("20 µs") && note.contains("256 µs"),
        "{note}"
    );
    assert!(
        stdout.contains("note: protocol_options.drtm_lease_ns=20000")
            && stdout.contains("drtm committed nothing"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
