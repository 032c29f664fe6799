//! `verbena run --latency-log PATH`: the log is HdrHistogram's interval log
//! (read back here with the `hdrhistogram` crate's own reader), its
//! intervals add up to the report's commits, overall and per transaction
//! type, and give the report's percentiles; a path that cannot be created
//! fails before the run.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use serde_json::Value;

struct Log {
    text: String,
    /// Untagged (`None`) and per-tag histograms, summed over intervals.
    sums: BTreeMap<Option<String>, Histogram<u64>>,
    /// Untagged intervals: (start, length, max column).
    intervals: Vec<(Duration, Duration, f64)>,
    start_time: bool,
    base_time: bool,
}

fn read_log(path: &std::path::Path) -> Log {
    let text = std::fs::read_to_string(path).expect("the log was written");
    let mut log = Log {
        text: text.clone(),
        sums: BTreeMap::new(),
        intervals: Vec::new(),
        start_time: false,
        base_time: false,
    };
    let mut deserializer = Deserializer::new();
    for entry in IntervalLogIterator::new(text.as_bytes()) {
        match entry.expect("every line parses") {
            LogEntry::StartTime(_) => log.start_time = true,
            LogEntry::BaseTime(_) => log.base_time = true,
            LogEntry::Interval(interval) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(interval.encoded_histogram())
                    .expect("the histogram is base64");
                let histogram: Histogram<u64> = deserializer
                    .deserialize(&mut bytes.as_slice())
                    .expect("the histogram decodes");
                // The max column is the interval's max in ms (ns / 10⁶).
                assert!(
                    (interval.max() - histogram.max() as f64 / 1e6).abs() < 0.001,
                    "max column {} vs histogram {}",
                    interval.max(),
                    histogram.max()
                );
                let tag = interval.tag().map(|t| t.as_str().to_string());
                if tag.is_none() {
                    log.intervals.push((
                        interval.start_timestamp(),
                        interval.duration(),
                        interval.max(),
                    ));
                }
                log.sums
                    .entry(tag)
                    .or_insert_with(|| Histogram::new(2).expect("valid"))
                    .add(&histogram)
                    .expect("auto-resizing sum");
            }
        }
    }
    log
}

fn run(args: &[&str], log: &std::path::Path) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_verbena"))
        .arg("run")
        .args(args)
        .arg("--latency-log")
        .arg(log)
        .args(["--json", "-"])
        .output()
        .expect("verbena runs");
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the report is JSON")
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1_000.0
}

/// The report's `latency_us` against a histogram read from the log.
fn assert_same_percentiles(what: &str, report: &Value, histogram: &Histogram<u64>) {
    for (field, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999)] {
        assert_eq!(
            report[field].as_f64(),
            Some(us(histogram.value_at_quantile(q))),
            "{what} {field}"
        );
    }
    assert_eq!(
        report["max"].as_f64(),
        Some(us(histogram.max())),
        "{what} max"
    );
}

#[test]
fn the_log_adds_up_to_the_report_overall_and_per_type() {
    let dir = tempdir("types");
    let path = dir.join("smallbank.hlog");
    // Threads, wall clock: 1.5 measured seconds make two intervals, the
    // second half a second long.
    let report = run(
        &[
            "--workload",
            "smallbank",
            "--duration",
            "1.5",
            "--warmup",
            "0.1",
            "--coroutines",
            "2",
        ],
        &path,
    );
    let log = read_log(&path);
    assert!(log.start_time && log.base_time, "{}", log.text);
    assert!(
        log.text.contains("\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n"),
        "legend line: {}",
        log.text
    );
    let committed = report["committed"].as_u64().expect("committed");
    assert!(committed > 0);
    let total = &log.sums[&None];
    assert_eq!(total.len(), committed, "untagged lines count every commit");
    assert_same_percentiles("overall", &report["latency_us"], total);
    let starts: Vec<(f64, f64)> = log
        .intervals
        .iter()
        .map(|(start, length, _)| (start.as_secs_f64(), length.as_secs_f64()))
        .collect();
    assert_eq!(starts, [(0.0, 1.0), (1.0, 0.5)], "one line per second");

    let types = report["txn_types"].as_array().expect("smallbank has types");
    assert!(types.len() > 1);
    let mut per_type_sum = 0;
    for t in types {
        let name = t["name"].as_str().expect("name");
        let committed = t["committed"].as_u64().expect("count");
        per_type_sum += committed;
        match log.sums.get(&Some(name.to_string())) {
            Some(histogram) => {
                assert_eq!(histogram.len(), committed, "{name}");
                assert_same_percentiles(name, &t["latency_us"], histogram);
            }
            None => assert_eq!(committed, 0, "{name} committed but has no log lines"),
        }
    }
    assert_eq!(per_type_sum, committed);
    assert_eq!(
        log.sums.len(),
        1 + types
            .iter()
            .filter(|t| t["committed"].as_u64() > Some(0))
            .count(),
        "tags are exactly the types that committed"
    );
}

#[test]
fn a_sim_run_logs_virtual_time_and_a_one_type_workload_has_no_tags() {
    let dir = tempdir("sim");
    let path = dir.join("ycsb.hlog");
    let report = run(
        &["--fabric", "sim", "--duration", "0.01", "--warmup", "0.001"],
        &path,
    );
    let log = read_log(&path);
    assert!(log.text.contains("simulated time"), "{}", log.text);
    assert_eq!(log.sums.len(), 1, "YCSB has one type: untagged lines only");
    let total = &log.sums[&None];
    assert_eq!(total.len(), report["committed"].as_u64().expect("count"));
    assert_same_percentiles("sim", &report["latency_us"], total);
    // The one interval is cut to the measured interval's 10 ms.
    assert_eq!(log.intervals.len(), 1);
    assert_eq!(log.intervals[0].1, Duration::from_millis(10));
}

#[test]
fn a_path_that_cannot_be_created_fails_before_the_run() {
    let dir = tempdir("bad");
    let missing = dir.join("no-such-dir").join("x.hlog");
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_verbena"))
        .args(["run", "--duration", "30", "--latency-log"])
        .arg(&missing)
        .output()
        .expect("verbena runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&*missing.to_string_lossy()), "{stderr}");
    assert!(output.stdout.is_empty(), "no report: the run never started");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "a 30 s run did not start"
    );
    // Nor is a directory a file.
    let output = Command::new(env!("CARGO_BIN_EXE_verbena"))
        .args(["run", "--latency-log"])
        .arg(&dir)
        .output()
        .expect("verbena runs");
    assert_eq!(output.status.code(), Some(2));
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("verbena-latency-log-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}
