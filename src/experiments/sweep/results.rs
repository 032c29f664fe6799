//! A sweep's files: the journal (`rows.jsonl`, one row per run, appended
//! as each finishes), and `results.json`, `results.csv` and `summary.csv`,
//! rewritten from it; reading them back, and summarising rows per point.
//!
//! Invariant: a torn last journal line (a kill mid-write) is dropped, any
//! other damaged line is an error; files are replaced atomically.

use std::path::Path;

use serde_json::Value;

use crate::engine::report::percent;
use crate::experiments::table;

/// Fields of a row that measure the host rather than the run: the only ones
/// a resumed `sim` sweep may differ in.
pub const WALL_CLOCK_FIELDS: [&str; 4] = [
    "started_unix_s",
    "run_wall_s",
    "report.sim.wall_s",
    "report.sim.simulated_s_per_wall_s",
];

/// Reads the journal; drops a torn last line (a kill mid-write).
pub fn read_journal(path: &Path) -> Result<Vec<Value>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut rows = Vec::with_capacity(lines.len());
    for (index, line) in lines.iter().enumerate() {
        match serde_json::from_str::<Value>(line) {
            Ok(row) => rows.push(row),
            Err(_) if index + 1 == lines.len() => break,
            Err(e) => {
                return Err(format!(
                    "{} line {}: not a result row ({e}); the journal is damaged",
                    path.display(),
                    index + 1
                ))
            }
        }
    }
    Ok(rows)
}

/// Reads every row of a results path: a sweep directory, its
/// `results.json`, or a `rows.jsonl` journal.
pub fn read_results(path: &Path) -> Result<Vec<Value>, String> {
    let file = if path.is_dir() {
        let journal = path.join("rows.jsonl");
        if journal.exists() {
            journal
        } else {
            path.join("results.json")
        }
    } else {
        path.to_path_buf()
    };
    let rows = if file.extension().is_some_and(|e| e == "jsonl") {
        read_journal(&file)?
    } else {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read results {}: {e}", file.display()))?;
        match serde_json::from_str::<Value>(&text)
            .map_err(|e| format!("{}: not JSON ({e})", file.display()))?
        {
            Value::Array(rows) => rows,
            _ => {
                return Err(format!(
                    "{}: expected an array of result rows",
                    file.display()
                ))
            }
        }
    };
    if rows.is_empty() {
        return Err(format!("{}: no result rows", file.display()));
    }
    for (i, row) in rows.iter().enumerate() {
        if row.get("report").is_none() || row.get("knobs").is_none() {
            return Err(format!(
                "{} row {}: not a verbena sweep row (no `report` or `knobs`)",
                file.display(),
                i + 1
            ));
        }
    }
    let mut rows = rows;
    rows.sort_by_key(|r| r.get("run").and_then(Value::as_u64).unwrap_or(u64::MAX));
    Ok(rows)
}

pub(super) fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Rewrites `results.json`, `results.csv` and `summary.csv` from `rows`.
pub fn write_outputs(dir: &Path, rows: &[Value], knob_keys: &[String]) -> Result<(), String> {
    let mut sorted = rows.to_vec();
    sorted.sort_by_key(|r| r.get("run").and_then(Value::as_u64).unwrap_or(u64::MAX));
    let json = serde_json::to_string_pretty(&sorted).map_err(|e| e.to_string())?;
    write_atomically(&dir.join("results.json"), &(json + "\n"))?;
    let leading: Vec<String> = ["run", "point", "repeat"]
        .iter()
        .map(|s| s.to_string())
        .chain(knob_keys.iter().map(|k| format!("knob.{k}")))
        .collect();
    let flat: Vec<Vec<(String, String)>> = sorted.iter().map(table::row_columns).collect();
    write_atomically(&dir.join("results.csv"), &table::to_csv(&flat, &leading))?;
    write_atomically(&dir.join("summary.csv"), &summary_csv(&sorted, knob_keys))
}

/// The metrics `summary.csv` aggregates over repetitions.
pub const SUMMARY_METRICS: [(&str, &str); 6] = [
    ("throughput_txn_per_s", "throughput_txn_per_s"),
    ("latency_p50_us", "latency_us.p50"),
    ("latency_p99_us", "latency_us.p99"),
    ("abort_rate", "abort_rate"),
    ("latency_mean_us", "latency_us.mean"),
    ("verbs_rpc_per_txn", "verbs_per_txn.rpc"),
];

/// Per run of a point that checked: whether it passed (serializable, and
/// the workload's invariants held). Empty when none checked.
pub fn check_verdicts(members: &[&Value]) -> Vec<bool> {
    members
        .iter()
        .filter_map(|r| r["report"]["check"].as_object())
        .map(|c| c["serializable"] == true && c["invariants_ok"] == true)
        .collect()
}

/// Rows grouped by point, in point order.
pub fn group_by_point(rows: &[Value]) -> Vec<(usize, Vec<&Value>)> {
    let mut groups: Vec<(usize, Vec<&Value>)> = Vec::new();
    for row in rows {
        let point = row.get("point").and_then(Value::as_u64).unwrap_or(0) as usize;
        match groups.iter_mut().find(|(p, _)| *p == point) {
            Some((_, members)) => members.push(row),
            None => groups.push((point, vec![row])),
        }
    }
    groups.sort_by_key(|(p, _)| *p);
    groups
}

/// One line per point: its knobs, runs, mean/stdev/min/max of each metric,
/// and whether every run's checker passed (empty when unchecked).
pub fn summary_csv(rows: &[Value], knob_keys: &[String]) -> String {
    let mut header: Vec<String> = vec!["point".into()];
    header.extend(knob_keys.iter().map(|k| format!("knob.{k}")));
    header.push("runs".into());
    for (name, _) in SUMMARY_METRICS {
        for stat in ["mean", "stdev", "min", "max"] {
            header.push(format!("{name}.{stat}"));
        }
    }
    header.push("check_passed".into());
    let mut records: Vec<Vec<(String, String)>> = Vec::new();
    for (point, members) in group_by_point(rows) {
        let mut record = vec![("point".to_string(), point.to_string())];
        for key in knob_keys {
            let value = members[0]
                .pointer(&format!("/knobs/{}", key.replace('/', "~1")))
                .and_then(Value::as_str)
                .unwrap_or("");
            record.push((format!("knob.{key}"), value.to_string()));
        }
        record.push(("runs".into(), members.len().to_string()));
        for (name, path) in SUMMARY_METRICS {
            let s = table::report_spread(&members, path);
            for (stat, v) in [
                ("mean", s.mean),
                ("stdev", s.stdev),
                ("min", s.min),
                ("max", s.max),
            ] {
                record.push((format!("{name}.{stat}"), format!("{v}")));
            }
        }
        let checks = check_verdicts(&members);
        let verdict = if checks.is_empty() {
            String::new()
        } else {
            checks.iter().all(|&ok| ok).to_string()
        };
        record.push(("check_passed".into(), verdict));
        records.push(record);
    }
    table::to_csv(&records, &header)
}

pub(super) fn row_passed_check(row: &Value) -> bool {
    match row["report"]["check"].as_object() {
        None => true,
        Some(c) => c["serializable"] == true && c["invariants_ok"] == true,
    }
}

/// A one-line-per-point table of a finished sweep (means over repeats).
pub fn summary_table(rows: &[Value], knob_keys: &[String]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let label_width = group_by_point(rows)
        .iter()
        .map(|(_, m)| point_label(m[0], knob_keys).len())
        .max()
        .unwrap_or(5)
        .max(5);
    let _ = writeln!(
        out,
        "{:<label_width$}  {:>4}  {:>12} {:>9} {:>8} {:>9} {:>8}  check",
        "point", "runs", "txn/s", "± sd", "abort", "p50 µs", "p99 µs"
    );
    for (_, members) in group_by_point(rows) {
        let metric = |path: &str| table::report_spread(&members, path);
        let throughput = metric("throughput_txn_per_s");
        let checked: Vec<&&Value> = members
            .iter()
            .filter(|r| r["report"]["check"].is_object())
            .collect();
        let verdict = if checked.is_empty() {
            "off"
        } else if checked.iter().all(|r| row_passed_check(r)) {
            "ok"
        } else {
            "FAILED"
        };
        let _ = writeln!(
            out,
            "{:<label_width$}  {:>4}  {:>12.0} {:>9.0} {:>8} {:>9.1} {:>8.1}  {}",
            point_label(members[0], knob_keys),
            members.len(),
            throughput.mean,
            throughput.stdev,
            percent(metric("abort_rate").mean),
            metric("latency_us.p50").mean,
            metric("latency_us.p99").mean,
            verdict
        );
    }
    // A point that committed nothing says why (the report's `notes`): a
    // 0 in the table is not a protocol's throughput.
    for row in rows {
        let Some(notes) = row["report"]["notes"].as_array() else {
            continue;
        };
        for note in notes.iter().filter_map(Value::as_str) {
            let _ = writeln!(
                out,
                "note: {} (seed {}): {note}",
                point_label(row, knob_keys),
                row["report"]["config"]["seed"]
            );
        }
    }
    out
}

/// `key=value …` of a row's knobs in sweep order.
pub fn point_label(row: &Value, knob_keys: &[String]) -> String {
    if knob_keys.is_empty() {
        return "base".into();
    }
    knob_keys
        .iter()
        .map(|k| format!("{k}={}", row["knobs"][k].as_str().unwrap_or("")))
        .collect::<Vec<_>>()
        .join(" ")
}
