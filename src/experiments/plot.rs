//! Figures of a sweep's rows (`verbena plot`).
//!
//! - Lines of throughput, p50 and p99 latency and abort rate against one
//!   knob (the x knob), one line per combination of the other knobs — so a
//!   sweep over `protocol × primitive × coroutines` draws RCC Fig. 16, one
//!   over `hot_probability` RCC Fig. 18, over `compute_us` RCC Fig. 19,
//!   over `theta` or `write_ratio` Deneva Fig. 2–3, over `nodes` Deneva
//!   Fig. 5. Points are means over repetitions, whiskers their min and max.
//! - Stacked per-stage latency bars, one bar per point (RCC Fig. 13).
//! - The time breakdown, one 100 % bar per point (Deneva Fig. 6; see
//!   `engine::report::TimeBreakdown` for what is approximated).
//! - For `verbena hybrid` results: every code ranked by throughput and by
//!   latency, pure forms and winners coloured (RCC Fig. 14).
//!
//! The x knob is `--x KEY`, else the knob with the most distinct numeric
//! values (not `seed` or `hybrid`), else the first knob, as categories.
//! PNG copies come from headless Chromium when it is installed.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::hybrid::Analysis;
use super::svg::{self, BarKind, LineChart, RankedBars, Series, StackedBars, XAxis};
use super::sweep::group_by_point;
use super::table::{number_at, Spread};
use crate::protocols::Stage;

/// One rendered figure.
#[derive(Clone, Debug)]
pub struct Figure {
    /// File stem (`throughput`, `stages`, …).
    pub name: String,
    pub title: String,
    pub caption: String,
    pub svg: String,
}

/// Knob keys of the rows in the sweep's order (first knob slowest). JSON
/// objects come back sorted, so the order is recovered from the points:
/// the slower a knob's value changes along the point order, the earlier it
/// was given.
pub fn knob_keys(rows: &[Value]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for row in rows {
        if let Some(map) = row["knobs"].as_object() {
            for key in map.keys() {
                if !keys.contains(key) {
                    keys.push(key.clone());
                }
            }
        }
    }
    let groups = group_by_point(rows);
    let changes = |key: &String| {
        groups
            .windows(2)
            .filter(|w| knob_value(w[0].1[0], key) != knob_value(w[1].1[0], key))
            .count()
    };
    keys.sort_by_key(|k| (changes(k), k.clone()));
    keys
}

fn knob_value<'a>(row: &'a Value, key: &str) -> &'a str {
    row["knobs"][key].as_str().unwrap_or("")
}

fn distinct_values(rows: &[Value], key: &str) -> Vec<String> {
    let mut values: Vec<String> = Vec::new();
    for row in rows {
        let v = knob_value(row, key).to_string();
        if !values.contains(&v) {
            values.push(v);
        }
    }
    values
}

/// The axis label of a knob, with its unit.
pub fn knob_label(key: &str) -> String {
    match key {
        "coroutines" => "coroutines per worker".into(),
        "workers" => "workers per node".into(),
        "nodes" => "nodes".into(),
        "ycsb.theta" => "Zipf skew θ".into(),
        "ycsb.hot_probability" => "probability an access goes to the hot area".into(),
        "ycsb.hot_fraction" => "hot area (fraction of rows)".into(),
        "ycsb.write_ratio" => "write ratio (read-modify-writes per access)".into(),
        "ycsb.compute_us" => "compute per transaction (µs)".into(),
        "ycsb.ops_per_txn" => "operations per transaction".into(),
        "ycsb.record_bytes" => "record size (bytes)".into(),
        "ycsb.partitions_per_txn" => "partitions per transaction".into(),
        "duration_s" => "measured duration (s)".into(),
        "profile" => "network profile".into(),
        "sim.jitter" => "sim jitter (fraction of one-way time)".into(),
        other => other.to_string(),
    }
}

/// Chooses the x knob.
pub fn choose_x(rows: &[Value], requested: Option<&str>) -> Result<Option<String>, String> {
    let keys = knob_keys(rows);
    if let Some(name) = requested {
        let key = super::sweep::canonical_key(name).unwrap_or_else(|_| name.to_string());
        if !keys.contains(&key) {
            return Err(format!(
                "--x {name}: the results vary no knob `{key}`; their knobs: {}",
                if keys.is_empty() {
                    "none".into()
                } else {
                    keys.join(", ")
                }
            ));
        }
        return Ok(Some(key));
    }
    let numeric = |key: &String| {
        let values = distinct_values(rows, key);
        values
            .iter()
            .all(|v| v.parse::<f64>().is_ok())
            .then_some(values.len())
    };
    let best = keys
        .iter()
        .filter(|k| *k != "seed" && *k != "hybrid")
        .filter_map(|k| numeric(k).filter(|n| *n > 1).map(|n| (n, k)))
        .max_by_key(|(n, _)| *n)
        .map(|(_, k)| k.clone());
    Ok(best.or_else(|| keys.iter().find(|k| *k != "hybrid").cloned()))
}

fn time_unit(rows: &[Value]) -> &'static str {
    if rows.iter().any(|r| r["report"]["time"] == "simulated") {
        "simulated "
    } else {
        ""
    }
}

/// The metrics drawn as lines: (file stem, title, y label, path, scale).
const LINE_METRICS: [(&str, &str, &str, &str, f64); 4] = [
    (
        "throughput",
        "Throughput",
        "throughput ({t}txn/s)",
        "throughput_txn_per_s",
        1.0,
    ),
    (
        "latency_p50",
        "Median latency",
        "p50 latency ({t}µs)",
        "latency_us.p50",
        1.0,
    ),
    (
        "latency_p99",
        "Tail latency",
        "p99 latency ({t}µs)",
        "latency_us.p99",
        1.0,
    ),
    (
        "abort_rate",
        "Abort rate",
        "aborted attempts (%)",
        "abort_rate",
        100.0,
    ),
];

/// Short label of a point: its knob values (x excluded when given).
fn point_name(row: &Value, keys: &[String], skip: Option<&str>) -> String {
    let parts: Vec<String> = keys
        .iter()
        .filter(|k| Some(k.as_str()) != skip)
        .map(|k| {
            let short = k.rsplit('.').next().unwrap_or(k);
            format!("{short}={}", knob_value(row, k))
        })
        .collect();
    if parts.is_empty() {
        "base".into()
    } else {
        parts.join(" ")
    }
}

/// Every figure the rows support.
pub fn figures(
    rows: &[Value],
    requested_x: Option<&str>,
    hybrid: Option<&Analysis>,
) -> Result<Vec<Figure>, String> {
    let mut figures = Vec::new();
    let keys = knob_keys(rows);
    let unit = time_unit(rows);
    if let Some(analysis) = hybrid {
        figures.extend(hybrid_figures(analysis, unit));
    }
    let x = if keys.iter().any(|k| k == "hybrid") && requested_x.is_none() {
        None // hybrid codes rank; they do not make a line
    } else {
        choose_x(rows, requested_x)?
    };
    if let Some(x) = &x {
        let values = distinct_values(rows, x);
        let numbers: Option<Vec<f64>> = values.iter().map(|v| v.parse().ok()).collect();
        let axis = match &numbers {
            Some(n)
                if n.iter().all(|v| *v > 0.0) && {
                    let hi = n.iter().copied().fold(f64::MIN, f64::max);
                    let lo = n.iter().copied().fold(f64::MAX, f64::min);
                    hi / lo >= 16.0
                } =>
            {
                XAxis::Log2
            }
            Some(_) => XAxis::Linear,
            None => XAxis::Categories(values.clone()),
        };
        let others: Vec<String> = keys.iter().filter(|k| *k != x).cloned().collect();
        let groups = group_by_point(rows);
        for (stem, title, y_label, path, scale) in LINE_METRICS {
            let mut series: Vec<Series> = Vec::new();
            for (_, members) in &groups {
                let name = point_name(members[0], &others, None);
                let value = knob_value(members[0], x);
                let xv = match &axis {
                    XAxis::Categories(c) => c.iter().position(|v| v == value).unwrap_or(0) as f64,
                    _ => value.parse().unwrap_or(0.0),
                };
                let samples: Vec<f64> = members
                    .iter()
                    .filter_map(|r| number_at(&r["report"], path))
                    .map(|v| v * scale)
                    .collect();
                if samples.is_empty() {
                    continue;
                }
                let s = Spread::of(&samples);
                let whisker = (s.count > 1).then_some((s.min, s.max));
                match series.iter_mut().find(|se| se.name == name) {
                    Some(se) => se.points.push((xv, s.mean, whisker)),
                    None => series.push(Series {
                        name,
                        points: vec![(xv, s.mean, whisker)],
                    }),
                }
            }
            let chart = LineChart {
                title: format!("{title} vs {}", knob_label(x)),
                x_label: knob_label(x),
                y_label: y_label.replace("{t}", unit),
                x_axis: axis.clone(),
                series,
            };
            figures.push(Figure {
                name: stem.into(),
                title: chart.title.clone(),
                caption: format!(
                    "{} against {}; one line per {}; points are means over repetitions, whiskers min–max.",
                    chart.y_label,
                    knob_label(x),
                    if others.is_empty() { "sweep".to_string() } else { others.join(" × ") }
                ),
                svg: svg::line_chart(&chart),
            });
        }
    }
    if let Some(stages) = stage_bars(rows, &keys, unit) {
        figures.push(stages);
    }
    if let Some(breakdown) = time_breakdown_bars(rows, &keys) {
        figures.push(breakdown);
    }
    if figures.is_empty() {
        return Err("the results hold nothing to plot".into());
    }
    Ok(figures)
}

/// Mean stage latencies per point (RCC Fig. 13).
fn stage_bars(rows: &[Value], keys: &[String], unit: &str) -> Option<Figure> {
    let groups = group_by_point(rows);
    let mut layer_names: Vec<String> = Vec::new();
    for (_, members) in &groups {
        if let Some(stages) = members[0]["report"]["stages"].as_object() {
            for name in stages.keys() {
                if !layer_names.contains(name) {
                    layer_names.push(name.clone());
                }
            }
        }
    }
    if layer_names.is_empty() {
        return None;
    }
    let order = |name: &String| {
        Stage::ALL
            .iter()
            .position(|s| s.name() == name)
            .unwrap_or(Stage::ALL.len())
    };
    layer_names.sort_by_key(order);
    let bars: Vec<String> = groups
        .iter()
        .map(|(_, m)| point_name(m[0], keys, None))
        .collect();
    let layers = layer_names
        .iter()
        .map(|name| {
            let values = groups
                .iter()
                .map(|(_, members)| {
                    Spread::of(
                        &members
                            .iter()
                            .filter_map(|r| number_at(&r["report"]["stages"], name))
                            .collect::<Vec<_>>(),
                    )
                    .mean
                })
                .collect();
            (name.clone(), values)
        })
        .collect();
    let chart = StackedBars {
        title: "Per-stage latency of committed transactions".into(),
        y_label: format!("mean {unit}µs per transaction"),
        bars,
        layers,
        normalize: false,
    };
    Some(Figure {
        name: "stages".into(),
        title: chart.title.clone(),
        caption: "Mean time per stage of committed transactions' final attempt, stacked (RCC Fig. 13); `execution` is the program's own work between stages.".into(),
        svg: svg::stacked_bars(&chart),
    })
}

/// Where coroutine time went, per point (Deneva Fig. 6).
fn time_breakdown_bars(rows: &[Value], keys: &[String]) -> Option<Figure> {
    const CATEGORIES: [(&str, &str); 6] = [
        ("useful_work", "useful work"),
        ("concurrency_control", "concurrency control"),
        ("commit", "commit protocol"),
        ("abort", "abort"),
        ("backoff", "back-off"),
        ("other", "other"),
    ];
    let groups = group_by_point(rows);
    if !groups
        .iter()
        .any(|(_, m)| m[0]["report"]["time_breakdown"].is_object())
    {
        return None;
    }
    let bars = groups
        .iter()
        .map(|(_, m)| point_name(m[0], keys, None))
        .collect();
    let layers = CATEGORIES
        .iter()
        .map(|(field, label)| {
            let values = groups
                .iter()
                .map(|(_, members)| {
                    Spread::of(
                        &members
                            .iter()
                            .filter_map(|r| number_at(&r["report"]["time_breakdown"], field))
                            .collect::<Vec<_>>(),
                    )
                    .mean
                })
                .collect();
            (label.to_string(), values)
        })
        .collect();
    let chart = StackedBars {
        title: "Time breakdown of transactions".into(),
        y_label: "share of coroutine time (%)".into(),
        bars,
        layers,
        normalize: true,
    };
    Some(Figure {
        name: "time_breakdown".into(),
        title: chart.title.clone(),
        caption: "Share of all coroutines' time in the measured interval (Deneva Fig. 6's categories): useful work = execution of committed transactions; concurrency control = read/lock/validate/renew stages; commit protocol = log/commit/release; abort = aborted attempts; other = request generation, scheduling and interval edges. Shares of transaction time, not CPU time.".into(),
        svg: svg::stacked_bars(&chart),
    })
}

/// RCC Fig. 14: each group's codes ranked by throughput and by latency.
fn hybrid_figures(analysis: &Analysis, unit: &str) -> Vec<Figure> {
    let mut figures = Vec::new();
    for (g, group) in analysis.groups.iter().enumerate() {
        let suffix = if analysis.groups.len() > 1 {
            format!("_{g}")
        } else {
            String::new()
        };
        let proposed = group.breakdown.as_ref().map(|b| b.proposed_code);
        let kind = |code: u16, beats: &[u16]| {
            if code == analysis.all_onesided_code {
                BarKind::PureOneSided
            } else if code == 0 {
                BarKind::PureRpc
            } else if beats.contains(&code) {
                BarKind::BeatsBoth
            } else if Some(code) == proposed {
                BarKind::Proposed
            } else {
                BarKind::Hybrid
            }
        };
        let find = |code: u16| group.codes.iter().find(|c| c.code == code);
        for (stem, title, x_label, order, beats, value) in [
            (
                "hybrid_throughput",
                "ranked by throughput",
                format!("throughput ({unit}txn/s)"),
                &group.by_throughput,
                &group.beat_both_throughput,
                (|c: &super::hybrid::CodeResult| c.throughput_txn_per_s) as fn(&_) -> f64,
            ),
            (
                "hybrid_latency",
                "ranked by p50 latency",
                format!("p50 latency ({unit}µs)"),
                &group.by_latency,
                &group.beat_both_latency,
                (|c: &super::hybrid::CodeResult| c.latency_p50_us) as fn(&_) -> f64,
            ),
        ] {
            let bars = order
                .iter()
                .filter_map(|code| find(*code))
                .map(|c| {
                    (
                        format!("{:>3} {}", c.code, c.plan),
                        value(c),
                        kind(c.code, beats),
                    )
                })
                .collect();
            let chart = RankedBars {
                title: format!(
                    "{} hybrid codes {title} · {}",
                    analysis.protocol.to_uppercase(),
                    group.label
                ),
                x_label,
                bars,
            };
            figures.push(Figure {
                name: format!("{stem}{suffix}"),
                title: chart.title.clone(),
                caption: "Every stage code of the protocol (RCC §5.1 hybrid codes; 1s = one-sided), best first (RCC Fig. 14). Blue and orange: the pure forms; green: hybrids beating both; pink: the latency-breakdown method's pick.".into(),
                svg: svg::ranked_bars(&chart),
            });
        }
        // RCC Fig. 13 for this group: stage latencies of the pure forms and
        // the pick.
        let mut shown: Vec<u16> = vec![analysis.all_onesided_code, 0];
        if let Some(p) = proposed {
            if !shown.contains(&p) {
                shown.push(p);
            }
        }
        let results: Vec<&super::hybrid::CodeResult> =
            shown.iter().filter_map(|c| find(*c)).collect();
        if let Some(first) = results.first() {
            let layers = first
                .stages_us
                .iter()
                .map(|(name, _)| {
                    let values = results
                        .iter()
                        .map(|r| {
                            r.stages_us
                                .iter()
                                .find(|(n, _)| n == name)
                                .map_or(0.0, |(_, v)| *v)
                        })
                        .collect();
                    (name.clone(), values)
                })
                .collect();
            let bars = results
                .iter()
                .map(|r| match r.code {
                    c if c == analysis.all_onesided_code => format!("all one-sided ({c})"),
                    0 => "all RPC (0)".to_string(),
                    c => format!("pick {c}"),
                })
                .collect();
            let chart = StackedBars {
                title: format!(
                    "{} stage latency: pure forms and the pick · {}",
                    analysis.protocol.to_uppercase(),
                    group.label
                ),
                y_label: format!("mean {unit}µs per transaction"),
                bars,
                layers,
                normalize: false,
            };
            figures.push(Figure {
                name: format!("hybrid_stages{suffix}"),
                title: chart.title.clone(),
                caption: "The latency-breakdown method (RCC §5.1, Fig. 13): each stage's mean latency in the two pure forms; the pick takes the faster primitive per stage.".into(),
                svg: svg::stacked_bars(&chart),
            });
        }
    }
    figures
}

/// The Chromium binary: `VERBENA_CHROMIUM`, else the usual names on PATH.
pub fn find_chromium() -> Option<String> {
    if let Ok(path) = std::env::var("VERBENA_CHROMIUM") {
        return (!path.is_empty()).then_some(path);
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in [
            "chromium",
            "chromium-browser",
            "google-chrome",
            "google-chrome-stable",
        ] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate.to_string_lossy().into_owned());
            }
        }
    }
    None
}

/// Pixel size declared by an SVG's root element.
pub fn svg_size(svg: &str) -> (u32, u32) {
    let attr = |name: &str| {
        let key = format!(" {name}=\"");
        let start = svg.find(&key)? + key.len();
        let end = start + svg[start..].find('"')?;
        svg[start..end].parse::<f64>().ok()
    };
    (
        attr("width").unwrap_or(720.0).ceil() as u32,
        attr("height").unwrap_or(440.0).ceil() as u32,
    )
}

/// Screenshots `input` (an SVG or HTML file) to `output` with headless
/// Chromium at `width × height` pixels; gives up after 60 s.
pub fn screenshot(
    chromium: &str,
    input: &Path,
    output: &Path,
    width: u32,
    height: u32,
) -> Result<(), String> {
    let input = std::fs::canonicalize(input).map_err(|e| format!("{}: {e}", input.display()))?;
    let out_abs = std::env::current_dir()
        .map(|d| d.join(output))
        .unwrap_or_else(|_| output.to_path_buf());
    let profile = std::env::temp_dir().join(format!("verbena-chromium-{}", std::process::id()));
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--disable-dev-shm-usage",
            "--force-device-scale-factor=1",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", out_abs.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("file://{}", input.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {chromium}: {e}"))?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() > Duration::from_secs(60) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{chromium} took over 60 s to render {}",
                    input.display()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(format!("waiting for {chromium}: {e}")),
        }
    }
    let _ = std::fs::remove_dir_all(&profile);
    if !output.exists() {
        return Err(format!(
            "{chromium} wrote no screenshot of {}",
            input.display()
        ));
    }
    Ok(())
}

/// Writes each figure's SVG, and its PNG when `png` and Chromium is found;
/// returns a line per file written (or skipped).
pub fn write_figures(figures: &[Figure], out: &Path, png: bool) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    let chromium = if png { find_chromium() } else { None };
    for figure in figures {
        let path = out.join(format!("{}.svg", figure.name));
        std::fs::write(&path, &figure.svg)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        lines.push(format!("wrote {}", path.display()));
        if let Some(chromium) = &chromium {
            let (w, h) = svg_size(&figure.svg);
            let png_path = out.join(format!("{}.png", figure.name));
            match screenshot(chromium, &path, &png_path, w, h) {
                Ok(()) => lines.push(format!("wrote {}", png_path.display())),
                Err(e) => lines.push(format!("PNG of {} skipped: {e}", figure.name)),
            }
        }
    }
    if png && chromium.is_none() {
        lines.push(
            "PNG skipped: Chromium not found (install chromium, or set VERBENA_CHROMIUM to its path); the SVGs are complete".into(),
        );
    }
    Ok(lines)
}
