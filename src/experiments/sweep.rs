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
//!
//! This file holds what a sweep is and runs it; `knobs` resolves knob
//! names and sets their values in a config, and `results` reads and writes
//! the journal and the result files and summarises them.

mod knobs;
mod results;

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::progress::Progress;
use super::provenance::{self, Host};
use crate::config::{Config, FabricKind};
use crate::engine;
pub use knobs::{
    apply_knob, canonical_key, config_keys, parse_code, parse_knob, resolve_point, Knob,
};
pub use results::{
    check_verdicts, group_by_point, point_label, read_journal, read_results, summary_csv,
    summary_table, write_outputs, SUMMARY_METRICS, WALL_CLOCK_FIELDS,
};
use results::{row_passed_check, write_atomically};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ProtocolKind;

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
        assert_eq!(all.values, ProtocolKind::names());
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
