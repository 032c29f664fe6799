//! Parameter sweeps: the cartesian product of knob values, each point run
//! `repeat` times, one self-describing row per run.
//!
//! A knob is any config key by its TOML path (`ycsb.theta`,
//! `protocol_options.lock_mode`, `sim.jitter`, `profile`), a key's unique
//! leaf name (`theta`, `jitter`), a run flag's name (`hot-probability`,
//! `compute-us`, `duration`), or one of the plan keys: `hybrid` (an RCC
//! code, RCC §5.1) and `stages` (`read=rpc+lock=onesided`). `protocol=all`
//! expands to every protocol this build implements. Values are separated by
//! `,` — or by `|` when one contains a comma (`stages=read=rpc,lock=rpc|`).
//!
//! Order: the first knob varies slowest; repetitions are the outermost loop
//! (pass 1 runs every point once, pass 2 again, …), so a drifting machine
//! affects every point alike and a cut-short sweep still covers every point.
//! Repetition `r` runs with seed `seed + r`: repeats are independent samples
//! (on `sim`, the same seed would repeat the same run exactly).
//!
//! Every point is resolved and validated before the first run, so a bad
//! value fails at once, naming the point. Runs append their row to
//! `rows.jsonl` in the output directory as each finishes (the journal);
//! `results.json`, `results.csv` and `summary.csv` are rewritten from it.
//! Started again with the same sweep, a sweep skips the runs its journal
//! holds (a torn last line from a kill is dropped) — on `sim` the resumed
//! rows equal an uninterrupted sweep's, field for field, except the wall
//! time each run took. A journal of a different sweep is refused, never
//! mixed in.
//!
//! `sim` runs are single-threaded and deterministic, so a sim sweep may run
//! `jobs` runs at once; a `threads` sweep runs one at a time (parallel runs
//! would measure each other).

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::matrix::plan_of;
use super::progress::Progress;
use super::provenance::{self, Host};
use super::table::{self, Spread};
use crate::base::{Primitive, ProtocolKind, Stage, StagePlan};
use crate::config::{Config, FabricKind};
use crate::engine;
use crate::fabric::NetworkProfile;

/// One varied key and its values, as given.
#[derive(Clone, Debug, PartialEq)]
pub struct Knob {
    pub key: String,
    pub values: Vec<String>,
}

/// Names of run flags whose config key is not found by the leaf rule.
const FLAG_ALIASES: [(&str, &str); 6] = [
    ("duration", "duration_s"),
    ("warmup", "warmup_s"),
    ("location_cache", "location_cache_entries"),
    ("warm_location_cache", "location_cache_warm"),
    ("backoff_base_ns", "backoff.base_ns"),
    ("backoff_cap_ns", "backoff.cap_ns"),
];

/// Parses `KEY=V1,V2,…` (or `KEY=V1|V2|…`).
pub fn parse_knob(text: &str) -> Result<Knob, String> {
    let (key, values) = text
        .split_once('=')
        .ok_or_else(|| format!("--vary `{text}` is not KEY=V1,V2,… (e.g. coroutines=1,2,4,8)"))?;
    let key = canonical_key(key.trim())?;
    let separator = if values.contains('|') { '|' } else { ',' };
    let mut list: Vec<String> = values
        .split(separator)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    if key == "protocol" && list.iter().any(|v| v == "all") {
        list = ProtocolKind::implemented_names()
            .into_iter()
            .map(String::from)
            .collect();
    }
    if list.is_empty() {
        return Err(format!("--vary {key} has no values; give at least one"));
    }
    let mut seen = BTreeSet::new();
    for value in &list {
        if !seen.insert(value.as_str()) {
            return Err(format!("--vary {key} lists `{value}` twice"));
        }
    }
    Ok(Knob { key, values: list })
}

/// Every leaf key path of a config, for lookups and error messages.
fn leaf_paths(value: &Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                // A profile or plan is set whole (by name / by code).
                if prefix.is_empty() && (key == "profile" || key == "stages") {
                    out.push(path);
                } else {
                    leaf_paths(inner, &path, out);
                }
            }
        }
        _ => out.push(prefix.to_string()),
    }
}

/// The config keys a knob may name, by TOML path.
pub fn config_keys() -> Vec<String> {
    let mut keys = Vec::new();
    let json = serde_json::to_value(Config::default()).expect("a config serializes");
    leaf_paths(&json, "", &mut keys);
    keys.retain(|k| !k.starts_with("sim.faults"));
    keys.push("hybrid".into());
    keys.sort();
    keys
}

/// Resolves a knob's name to its TOML path (or `hybrid`).
pub fn canonical_key(name: &str) -> Result<String, String> {
    let normalized = name.replace('-', "_");
    if normalized == "hybrid" {
        return Ok(normalized);
    }
    if let Some((_, path)) = FLAG_ALIASES.iter().find(|(alias, _)| *alias == normalized) {
        return Ok(path.to_string());
    }
    let keys = config_keys();
    if keys.contains(&normalized) {
        return Ok(normalized);
    }
    let by_leaf: Vec<&String> = keys
        .iter()
        .filter(|k| k.rsplit('.').next() == Some(normalized.as_str()))
        .collect();
    match by_leaf.as_slice() {
        [one] => Ok(one.to_string()),
        [] => Err(format!(
            "--vary: unknown config key `{name}`; keys: {}",
            keys.join(", ")
        )),
        many => Err(format!(
            "--vary: `{name}` is ambiguous; name one of {}",
            many.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Parses `read=rpc+lock=onesided` (items separated by `+`, `,` or `;`).
fn parse_stage_list(text: &str) -> Result<StagePlan, String> {
    let mut plan = StagePlan::empty();
    for part in text.split(['+', ',', ';']).filter(|p| !p.trim().is_empty()) {
        let (stage, primitive) = part
            .split_once('=')
            .ok_or_else(|| format!("stages entry `{part}` is not STAGE=PRIMITIVE"))?;
        let stage_value = Stage::parse(stage.trim()).ok_or_else(|| {
            format!(
                "unknown stage `{stage}`; stages: {}",
                Stage::ALL.map(|s| s.name()).join(", ")
            )
        })?;
        let primitive_value = Primitive::parse(primitive.trim())
            .ok_or_else(|| format!("unknown primitive `{primitive}`; allowed: onesided, rpc"))?;
        plan = plan.with(stage_value, primitive_value);
    }
    Ok(plan)
}

/// An RCC hybrid code, decimal or `0b…`.
pub fn parse_code(text: &str) -> Result<u16, String> {
    let text = text.trim();
    match text.strip_prefix("0b").or_else(|| text.strip_prefix("0B")) {
        Some(binary) => u16::from_str_radix(binary, 2),
        None => text.parse(),
    }
    .map_err(|_| {
        format!("hybrid `{text}` is not a code; allowed: decimal (28) or binary (0b11100)")
    })
}

/// Sets `key` (a canonical path) to `value` in an unresolved config.
pub fn apply_knob(config: &mut Config, key: &str, value: &str) -> Result<(), String> {
    match key {
        "stages" => {
            let given = parse_stage_list(value)?;
            for stage in given.stages() {
                config.stages = config.stages.with(stage, given.get(stage));
            }
            return Ok(());
        }
        "profile" => {
            config.profile = NetworkProfile::resolve(value)?;
            return Ok(());
        }
        _ => {}
    }
    let mut json = serde_json::to_value(&*config).map_err(|e| e.to_string())?;
    let mut at = &mut json;
    for part in key.split('.') {
        at = at
            .get_mut(part)
            .ok_or_else(|| format!("unknown config key `{key}`"))?;
    }
    let parsed = match at {
        Value::Bool(_) => Value::Bool(match value {
            "true" | "on" | "yes" | "1" => true,
            "false" | "off" | "no" | "0" => false,
            _ => {
                return Err(format!(
                    "{key} = `{value}` is not a boolean; allowed: true, false"
                ))
            }
        }),
        Value::Number(_) | Value::Null => match serde_json::from_str::<Value>(value) {
            Ok(number @ Value::Number(_)) => number,
            _ if at.is_null() => Value::String(value.to_string()),
            _ => return Err(format!("{key} = `{value}` is not a number")),
        },
        _ => Value::String(value.to_string()),
    };
    *at = parsed;
    *config = serde_json::from_value(json).map_err(|e| format!("{key} = `{value}`: {e}"))?;
    Ok(())
}

/// The config of one point: `base` (unresolved, as flags and file left
/// it) with the knob values set, the hybrid code applied, validated.
pub fn resolve_point(
    base: &Config,
    base_hybrid: Option<u16>,
    knobs: &[(String, String)],
) -> Result<Config, String> {
    let mut config = base.clone();
    let mut hybrid = base_hybrid;
    for (key, value) in knobs {
        if key == "hybrid" {
            hybrid = Some(parse_code(value)?);
        } else {
            apply_knob(&mut config, key, value)?;
        }
    }
    if let Some(code) = hybrid {
        let present = config.protocol.stage_bits();
        if code & !present != 0 {
            return Err(format!(
                "hybrid code {code} has bits for stages protocol {} lacks; its stages are {}",
                config.protocol.name(),
                config
                    .protocol
                    .stages()
                    .iter()
                    .map(|s| format!("{}={}", s.name(), s.bit()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        config.stages = plan_of(config.protocol, code);
    }
    config.validate().map_err(|e| e.0)?;
    Ok(config)
}

/// What a sweep is: its identity for resuming.
#[derive(Clone, Debug)]
pub struct SweepSpec {
    /// The base flags as given (for the record).
    pub base_args: Vec<String>,
    /// The base config before knobs (after flags and file).
    pub base: Config,
    pub base_hybrid: Option<u16>,
    pub knobs: Vec<Knob>,
    pub repeat: u32,
}

/// One point of the product, resolved.
#[derive(Clone, Debug)]
pub struct Point {
    pub knobs: Vec<(String, String)>,
    pub config: Config,
}

impl Point {
    pub fn label(&self) -> String {
        if self.knobs.is_empty() {
            return "base".into();
        }
        self.knobs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl SweepSpec {
    /// Every point, first knob slowest, each resolved and validated.
    pub fn points(&self) -> Result<Vec<Point>, String> {
        if self.repeat == 0 {
            return Err("--repeat 0 runs nothing; allowed: 1 or more".into());
        }
        let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
        for knob in &self.knobs {
            combos = combos
                .into_iter()
                .flat_map(|combo| {
                    knob.values.iter().map(move |value| {
                        let mut next = combo.clone();
                        next.push((knob.key.clone(), value.clone()));
                        next
                    })
                })
                .collect();
        }
        combos
            .into_iter()
            .map(|knobs| {
                let config = resolve_point(&self.base, self.base_hybrid, &knobs).map_err(|e| {
                    let label = Point {
                        knobs: knobs.clone(),
                        config: Config::default(),
                    }
                    .label();
                    format!("sweep point {label}: {e}")
                })?;
                Ok(Point { knobs, config })
            })
            .collect()
    }

    /// The identity a journal must match to be resumed.
    pub fn identity(&self) -> Value {
        json!({
            "base": self.base,
            "base_hybrid": self.base_hybrid,
            "knobs": self.knobs.iter().map(|k| json!({"key": k.key, "values": k.values})).collect::<Vec<_>>(),
            "repeat": self.repeat,
        })
    }
}

/// How a sweep runs.
#[derive(Clone, Debug)]
pub struct SweepOptions {
    pub out_dir: PathBuf,
    /// Runs at once (sim only).
    pub jobs: usize,
    pub progress: bool,
    /// Discard a journal of another sweep instead of refusing.
    pub restart: bool,
}

/// What a finished sweep left.
#[derive(Debug)]
pub struct SweepOutcome {
    /// Every row, in run order.
    pub rows: Vec<Value>,
    /// Runs taken from the journal rather than run now.
    pub resumed: usize,
    /// Rows whose checker found a violation.
    pub check_failures: usize,
}

/// The seed of repetition `repeat` of a point.
pub fn repeat_seed(config: &Config, repeat: u32) -> u64 {
    config.seed.wrapping_add(repeat as u64)
}

/// Where and when a run ran.
struct RunMeta<'a> {
    host: &'a Host,
    started_unix_s: f64,
    run_wall_s: f64,
}

/// The journal row of one run.
fn make_row(
    run: usize,
    point_index: usize,
    repeat: u32,
    point: &Point,
    report: &engine::Report,
    meta: RunMeta,
) -> Value {
    let knobs: serde_json::Map<String, Value> = point
        .knobs
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    json!({
        "run": run,
        "point": point_index,
        "repeat": repeat,
        "knobs": knobs,
        "verbena_version": provenance::VERSION,
        "git_revision": provenance::GIT_REVISION,
        "host": meta.host,
        "started_unix_s": meta.started_unix_s,
        "run_wall_s": meta.run_wall_s,
        "report": report,
    })
}

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

fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
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
            let values: Vec<f64> = members
                .iter()
                .filter_map(|r| table::number_at(&r["report"], path))
                .collect();
            let s = Spread::of(&values);
            for (stat, v) in [
                ("mean", s.mean),
                ("stdev", s.stdev),
                ("min", s.min),
                ("max", s.max),
            ] {
                record.push((format!("{name}.{stat}"), format!("{v}")));
            }
        }
        let checks: Vec<bool> = members
            .iter()
            .filter_map(|r| r["report"]["check"].as_object())
            .map(|c| c["serializable"] == true && c["invariants_ok"] == true)
            .collect();
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

fn row_passed_check(row: &Value) -> bool {
    match row["report"]["check"].as_object() {
        None => true,
        Some(c) => c["serializable"] == true && c["invariants_ok"] == true,
    }
}

/// Runs the sweep into `options.out_dir`, resuming from its journal.
pub fn run_sweep(spec: &SweepSpec, options: &SweepOptions) -> Result<SweepOutcome, String> {
    let points = spec.points()?;
    let runs = points.len() * spec.repeat as usize;
    let threads = points
        .iter()
        .any(|p| p.config.fabric == FabricKind::Threads);
    if threads && options.jobs > 1 {
        return Err(format!(
            "--jobs {} runs threads-fabric runs at once, which would measure each other; allowed: --jobs 1 unless every point is on --fabric sim",
            options.jobs
        ));
    }
    let dir = &options.out_dir;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let spec_path = dir.join("sweep.json");
    let journal_path = dir.join("rows.jsonl");
    let identity = spec.identity();
    let mut rows = earlier_rows(dir, &identity, options.restart)?;
    let stored_spec = json!({
        "verbena_version": provenance::VERSION,
        "git_revision": provenance::GIT_REVISION,
        "base_args": spec.base_args,
        "runs": runs,
        "points": points.len(),
        "identity": identity,
    });
    write_atomically(
        &spec_path,
        &(serde_json::to_string_pretty(&stored_spec).map_err(|e| e.to_string())? + "\n"),
    )?;
    let done = keep_rows_of_runs(&mut rows, runs, &journal_path)?;
    let resumed = rows.len();
    let todo: Vec<usize> = (0..runs).filter(|run| !done.contains(run)).collect();
    let knob_keys: Vec<String> = spec.knobs.iter().map(|k| k.key.clone()).collect();
    if options.progress && resumed > 0 {
        eprintln!(
            "resuming {}: {resumed} of {runs} runs already done",
            dir.display()
        );
    }
    let guess = points.first().and_then(|p| {
        (p.config.fabric == FabricKind::Threads)
            .then_some(p.config.warmup_s + p.config.duration_s + 0.2)
    });
    let mut progress = Progress::new(runs, resumed, guess, options.progress);
    let mut journal = std::fs::OpenOptions::new()
        .append(true)
        .open(&journal_path)
        .map_err(|e| format!("cannot open {}: {e}", journal_path.display()))?;
    let host = Host::current();
    let describe = |run: usize| {
        let point = run % points.len();
        let repeat = run / points.len();
        if spec.repeat > 1 {
            format!(
                "{} (repeat {}/{})",
                points[point].label(),
                repeat + 1,
                spec.repeat
            )
        } else {
            points[point].label()
        }
    };
    let run_one = |run: usize| -> Result<Value, String> {
        let point_index = run % points.len();
        let repeat = (run / points.len()) as u32;
        let point = &points[point_index];
        let mut config = point.config.clone();
        config.seed = repeat_seed(&config, repeat);
        let started_unix_s = provenance::unix_now_s();
        let started = std::time::Instant::now();
        let output =
            engine::run(&config).map_err(|e| format!("run {run} ({}): {e}", describe(run)))?;
        Ok(make_row(
            run,
            point_index,
            repeat,
            point,
            &output.report,
            RunMeta {
                host: &host,
                started_unix_s,
                run_wall_s: started.elapsed().as_secs_f64(),
            },
        ))
    };
    let record =
        |row: Value, progress: &mut Progress, rows: &mut Vec<Value>| -> Result<(), String> {
            let run = row["run"].as_u64().unwrap_or(0) as usize;
            // One write per row, so a kill tears at most the last line.
            let line = format!("{row}\n");
            journal
                .write_all(line.as_bytes())
                .and_then(|_| journal.flush())
                .map_err(|e| format!("cannot append to {}: {e}", journal_path.display()))?;
            progress.finished(&describe(run));
            rows.push(row);
            Ok(())
        };
    let failure = if options.jobs <= 1 {
        run_serially(&todo, &mut progress, &mut rows, describe, run_one, record)?
    } else {
        run_in_parallel(
            options.jobs,
            &todo,
            &mut progress,
            &mut rows,
            &run_one,
            record,
        )?
    };
    progress.close();
    rows.sort_by_key(|r| r["run"].as_u64().unwrap_or(u64::MAX));
    write_outputs(dir, &rows, &knob_keys)?;
    if let Some(e) = failure {
        return Err(format!(
            "{e}\n{} runs are saved in {}; the same command resumes the sweep",
            rows.len(),
            dir.display()
        ));
    }
    let check_failures = rows.iter().filter(|r| !row_passed_check(r)).count();
    Ok(SweepOutcome {
        rows,
        resumed,
        check_failures,
    })
}

/// The rows an earlier run of this same sweep left in `dir`'s journal.
/// Another sweep's results are refused, or discarded with `restart`; so is
/// a journal without its `sweep.json`.
fn earlier_rows(dir: &Path, identity: &Value, restart: bool) -> Result<Vec<Value>, String> {
    let spec_path = dir.join("sweep.json");
    let journal_path = dir.join("rows.jsonl");
    let mut rows = Vec::new();
    if spec_path.exists() {
        let text = std::fs::read_to_string(&spec_path)
            .map_err(|e| format!("cannot read {}: {e}", spec_path.display()))?;
        let stored: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if stored.get("identity") == Some(identity) {
            rows = read_journal(&journal_path)?;
        } else if restart {
            let _ = std::fs::remove_file(&journal_path);
        } else {
            return Err(format!(
                "{} holds the results of a different sweep (other base config, knobs or repeat); give another --out, or --restart to discard them",
                dir.display()
            ));
        }
    } else if journal_path.exists() && !restart {
        return Err(format!(
            "{} has a rows.jsonl but no sweep.json; give another --out, or --restart to discard it",
            dir.display()
        ));
    }
    Ok(rows)
}

/// Keeps only rows of runs this sweep has, each run once, and rewrites the
/// journal to hold just them (a torn line is gone after this rewrite);
/// returns the runs done.
fn keep_rows_of_runs(
    rows: &mut Vec<Value>,
    runs: usize,
    journal_path: &Path,
) -> Result<BTreeSet<usize>, String> {
    let mut done = BTreeSet::new();
    rows.retain(|row| {
        let run = row.get("run").and_then(Value::as_u64).map(|r| r as usize);
        matches!(run, Some(run) if run < runs && done.insert(run))
    });
    let mut journal_text = String::new();
    for row in rows.iter() {
        journal_text.push_str(&row.to_string());
        journal_text.push('\n');
    }
    write_atomically(journal_path, &journal_text)?;
    Ok(done)
}

/// Runs `todo` one at a time, recording each row; the first failed run
/// stops the sweep and comes back as `Ok(Some(why))`. A row that cannot be
/// recorded is an error at once.
fn run_serially(
    todo: &[usize],
    progress: &mut Progress,
    rows: &mut Vec<Value>,
    describe: impl Fn(usize) -> String,
    run_one: impl Fn(usize) -> Result<Value, String>,
    mut record: impl FnMut(Value, &mut Progress, &mut Vec<Value>) -> Result<(), String>,
) -> Result<Option<String>, String> {
    let mut failure = None;
    for &run in todo {
        progress.starting(&describe(run));
        match run_one(run) {
            Ok(row) => record(row, progress, rows)?,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    Ok(failure)
}

/// Runs `todo` on `jobs` threads, recording each row as it comes back; a
/// failed run stops the threads from starting more, and the first failure
/// comes back as `Ok(Some(why))`. A row that cannot be recorded is an
/// error at once.
fn run_in_parallel(
    jobs: usize,
    todo: &[usize],
    progress: &mut Progress,
    rows: &mut Vec<Value>,
    run_one: &(impl Fn(usize) -> Result<Value, String> + Sync),
    mut record: impl FnMut(Value, &mut Progress, &mut Vec<Value>) -> Result<(), String>,
) -> Result<Option<String>, String> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let mut failure = None;
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (send, receive) = std::sync::mpsc::channel::<Result<Value, String>>();
    std::thread::scope(|scope| -> Result<(), String> {
        for _ in 0..jobs.min(todo.len()) {
            let send = send.clone();
            let (next, stop) = (&next, &stop);
            scope.spawn(move || loop {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let Some(&run) = todo.get(next.fetch_add(1, Ordering::Relaxed)) else {
                    return;
                };
                if send.send(run_one(run)).is_err() {
                    return;
                }
            });
        }
        drop(send);
        for result in receive {
            match result {
                Ok(row) => record(row, progress, rows)?,
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    failure.get_or_insert(e);
                }
            }
        }
        Ok(())
    })?;
    Ok(failure)
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
        "point", "runs", "txn/s", "± sd", "abort%", "p50 µs", "p99 µs"
    );
    for (_, members) in group_by_point(rows) {
        let metric = |path: &str| {
            Spread::of(
                &members
                    .iter()
                    .filter_map(|r| table::number_at(&r["report"], path))
                    .collect::<Vec<_>>(),
            )
        };
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
            "{:<label_width$}  {:>4}  {:>12.0} {:>9.0} {:>8.2} {:>9.1} {:>8.1}  {}",
            point_label(members[0], knob_keys),
            members.len(),
            throughput.mean,
            throughput.stdev,
            100.0 * metric("abort_rate").mean,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knob_names_resolve_to_toml_paths() {
        assert_eq!(canonical_key("ycsb.theta").unwrap(), "ycsb.theta");
        assert_eq!(canonical_key("theta").unwrap(), "ycsb.theta");
        assert_eq!(
            canonical_key("hot-probability").unwrap(),
            "ycsb.hot_probability"
        );
        assert_eq!(canonical_key("duration").unwrap(), "duration_s");
        assert_eq!(canonical_key("jitter").unwrap(), "sim.jitter");
        assert_eq!(
            canonical_key("lock_mode").unwrap(),
            "protocol_options.lock_mode"
        );
        assert_eq!(canonical_key("profile").unwrap(), "profile");
        let err = canonical_key("thetta").unwrap_err();
        assert!(
            err.contains("unknown config key `thetta`") && err.contains("ycsb.theta"),
            "{err}"
        );
        let knob = parse_knob("stages=read=rpc,lock=rpc|read=onesided").unwrap();
        assert_eq!(knob.values, ["read=rpc,lock=rpc", "read=onesided"]);
        let all = parse_knob("protocol=all").unwrap();
        assert_eq!(all.values, ProtocolKind::implemented_names());
        assert!(parse_knob("coroutines=1,1").unwrap_err().contains("twice"));
    }

    #[test]
    fn a_stored_identity_reads_back_equal_for_awkward_floats() {
        let mut base = Config::default();
        base.ycsb.theta = 0.1 + 0.2;
        base.ycsb.hot_fraction = 1.0 / 3.0;
        base.sim.jitter = 7.0e-7;
        base.warmup_s = 0.000_123_456_789_012_345_6;
        let spec = SweepSpec {
            base_args: vec![],
            base,
            base_hybrid: None,
            knobs: vec![parse_knob("compute_us=0.1,2.675").unwrap()],
            repeat: 1,
        };
        let identity = spec.identity();
        let back: Value = serde_json::from_str(&identity.to_string()).unwrap();
        assert_eq!(back, identity);
    }

    #[test]
    fn points_resolve_knobs_and_name_bad_ones() {
        let spec = SweepSpec {
            base_args: vec![],
            base: Config::default(),
            base_hybrid: None,
            knobs: vec![
                parse_knob("protocol=no_wait,occ").unwrap(),
                parse_knob("theta=0.5,0.9").unwrap(),
                parse_knob("profile=cx3").unwrap(),
            ],
            repeat: 2,
        };
        let points = spec.points().unwrap();
        assert_eq!(points.len(), 4);
        assert_eq!(points[1].config.protocol, ProtocolKind::NoWait);
        assert_eq!(points[1].config.ycsb.theta, 0.9);
        assert_eq!(points[2].config.protocol, ProtocolKind::Occ);
        assert_eq!(points[3].config.profile.name, "cx3");
        let hybrid = resolve_point(
            &Config::default(),
            None,
            &[
                ("protocol".into(), "occ".into()),
                ("hybrid".into(), "2".into()),
            ],
        )
        .unwrap();
        assert_eq!(hybrid.stages.code(), 2);
        let bad = SweepSpec {
            knobs: vec![parse_knob("coroutines=4,999").unwrap()],
            ..spec
        };
        let err = bad.points().unwrap_err();
        assert!(
            err.contains("coroutines=999") && err.contains("1..=255"),
            "{err}"
        );
    }
}
