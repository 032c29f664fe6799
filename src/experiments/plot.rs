//! Figures of a sweep's rows (`verbena plot`).
//!
//! - Lines of throughput, p50 and p99 latency and abort rate against one
//!   knob (the x knob), one line per combination of the other knobs — so a
//!   sweep over `protocol × primitive × coroutines` draws RCC Fig. 16, one
//!   over `hot_probability` RCC Fig. 18, over `compute_us` RCC Fig. 19,
//!   over `theta` or `write_ratio` Deneva Fig. 2–3, over `nodes` Deneva
//!   Fig. 5. Points are means over repetitions, whiskers their min and max.
//! - Small multiples where one panel would hold more than
//!   [`MAX_LINES_PER_PANEL`] lines: one panel per value of a facet knob on
//!   shared axes, as the papers draw them (RCC Fig. 18: a panel per
//!   protocol, a line per primitive; Deneva Fig. 2: a line per protocol).
//!   `--facet KNOB` picks the knob, `--facet none` keeps one panel.
//! - Stacked per-stage latency bars, one bar per point (RCC Fig. 13).
//! - The time breakdown, one 100 % bar per point (Deneva Fig. 6; see
//!   `engine::report::TimeBreakdown` for what is approximated).
//! - For `verbena hybrid` results: every code ranked by throughput and by
//!   latency, pure forms and winners coloured (RCC Fig. 14).
//!
//! The x knob is `--x KEY`, else the knob with the most distinct numeric
//! values (not `seed` or `hybrid`), else the first knob, as categories.
//!
//! Invariants: a protocol has one colour in every line figure and panel
//! ([`protocol_color`], a fixed table over a colour-blind-safe palette);
//! one-sided lines are solid and RPC lines dashed, other primitive, stage
//! or hybrid values get the further [`svg::DASHES`] in first-seen order;
//! lines that colour and dash do not tell apart differ by marker.
//!
//! PNG copies are rendered in process from the same SVG with `resvg`
//! (usvg parses, tiny-skia rasterizes, fonts come from the system through
//! fontdb). Not `plotters`: it would draw the figures a second time with
//! its own layout, so the PNG and the SVG — which tests and scripts read
//! back — could disagree, and its bitmap text needs FreeType/fontconfig
//! through C libraries; resvg renders exactly the markup written here and
//! is pure Rust. No browser: headless Chromium took 3–4 s per figure
//! (docs/performance-archive.md); resvg takes milliseconds. Text needs a font:
//! without one, PNGs are skipped with a message naming the package to
//! install, never written without their labels.

use std::path::Path;
use std::sync::Arc;

use resvg::{tiny_skia, usvg};

use serde_json::Value;

use super::hybrid::Analysis;
use super::svg::{
    self, BarKind, LineChart, LineStyle, Marker, Panel, RankedBars, Series, StackedBars, XAxis,
};
use super::sweep::group_by_point;
use super::table::{number_at, Spread};
use crate::base::{ProtocolKind, Stage};

/// What `verbena plot` draws, and how.
#[derive(Clone, Debug, Default)]
pub struct PlotOptions {
    /// The x knob (`--x`); chosen from the rows when `None`.
    pub x: Option<String>,
    /// The knob whose values get a panel each (`--facet`): `None` chooses
    /// one when a panel would hold more than [`MAX_LINES_PER_PANEL`] lines,
    /// `Some("none")` keeps one panel.
    pub facet: Option<String>,
    /// Also write a PNG of every figure (`--no-png` turns it off).
    pub png: bool,
}

/// More lines than this in one panel and the colours and the legend stop
/// being readable; the figure becomes small multiples.
pub const MAX_LINES_PER_PANEL: usize = 8;

/// Each protocol's colour, the same in every figure. NO_WAIT and OCC, the
/// pair most sweeps compare (the README's), get Okabe–Ito's most distinct
/// pair, blue and vermillion; hues that are near each other (the blues)
/// go to protocols seldom drawn side by side.
pub const PROTOCOL_COLORS: [(&str, &str); 11] = [
    ("no_wait", svg::PALETTE[0]),
    ("occ", svg::PALETTE[1]),
    ("wait_die", svg::PALETTE[2]),
    ("wound_wait", svg::PALETTE[3]),
    ("timestamp", svg::PALETTE[4]),
    ("mvcc", svg::PALETTE[5]),
    ("maat", svg::PALETTE[6]),
    ("sundial", svg::PALETTE[7]),
    ("cicada", svg::PALETTE[8]),
    ("calvin", svg::PALETTE[9]),
    ("drtm", svg::PALETTE[10]),
];

/// The colour of a protocol by name (any spelling `--protocol` takes);
/// grey for a name no protocol has.
pub fn protocol_color(name: &str) -> &'static str {
    let canonical = ProtocolKind::parse(name).map(ProtocolKind::name);
    PROTOCOL_COLORS
        .iter()
        .find(|(p, _)| Some(*p) == canonical)
        .map_or(svg::PALETTE[11], |(_, c)| c)
}

/// Knobs that choose primitives: their values set a line's dash.
const PRIMITIVE_KNOBS: [&str; 3] = ["primitive", "stages", "hybrid"];

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

/// Distinct combinations of `keys`' values among the rows.
fn combinations(rows: &[Value], keys: &[String]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for row in rows {
        let name = point_name(row, keys, None);
        if !seen.contains(&name) {
            seen.push(name);
        }
    }
    seen
}

/// The facet knob: `requested` checked against the knobs that tell lines
/// apart (`others`: every knob but x), or, when one panel would hold more
/// than [`MAX_LINES_PER_PANEL`] lines, the knob leaving 2 to that many
/// lines per panel in the fewest panels (a tie goes to the knob given
/// first). `None`: one panel.
pub fn choose_facet(
    rows: &[Value],
    x: &str,
    others: &[String],
    requested: Option<&str>,
) -> Result<Option<String>, String> {
    if let Some(name) = requested {
        if name == "none" {
            return Ok(None);
        }
        let key = super::sweep::canonical_key(name).unwrap_or_else(|_| name.to_string());
        let allowed = others
            .iter()
            .map(String::as_str)
            .chain(["none"])
            .collect::<Vec<_>>()
            .join(", ");
        if key == x {
            return Err(format!(
                "--facet {name}: `{key}` is the x axis, so it cannot also split the panels; allowed: {allowed}"
            ));
        }
        if !others.contains(&key) {
            return Err(format!(
                "--facet {name}: the results vary no knob `{key}`; allowed: {allowed}"
            ));
        }
        return Ok(Some(key));
    }
    if combinations(rows, others).len() <= MAX_LINES_PER_PANEL {
        return Ok(None);
    }
    Ok(others
        .iter()
        .filter_map(|key| {
            let rest: Vec<String> = others.iter().filter(|k| *k != key).cloned().collect();
            let per_panel = combinations(rows, &rest).len();
            (2..=MAX_LINES_PER_PANEL)
                .contains(&per_panel)
                .then(|| (distinct_values(rows, key).len(), key.clone()))
        })
        .min_by_key(|(panels, _)| *panels)
        .map(|(_, key)| key))
}

/// The protocol a row ran: its knob, else its config's.
fn protocol_of(row: &Value) -> &str {
    row["knobs"]["protocol"]
        .as_str()
        .or_else(|| row["report"]["config"]["protocol"].as_str())
        .unwrap_or("")
}

/// How each line is drawn, from the knobs of its rows.
struct Styler {
    x: String,
    /// `protocol` is a knob other than x: colour names the protocol.
    protocol_varies: bool,
    /// Knobs choosing primitives (not x): their values pick the dash.
    dash_keys: Vec<String>,
    /// Values of `dash_keys` other than `onesided` and `rpc`, first seen
    /// first.
    other_dash_values: Vec<String>,
    /// The remaining knobs that tell lines apart.
    rest_keys: Vec<String>,
    rest_values: Vec<String>,
}

impl Styler {
    fn new(rows: &[Value], x: &str, identity: &[String], others: &[String]) -> Styler {
        let dash_keys: Vec<String> = others
            .iter()
            .filter(|k| PRIMITIVE_KNOBS.contains(&k.as_str()))
            .cloned()
            .collect();
        let rest_keys: Vec<String> = identity
            .iter()
            .filter(|k| *k != "protocol" && !dash_keys.contains(k))
            .cloned()
            .collect();
        let mut other_dash_values: Vec<String> = Vec::new();
        for row in rows {
            let value = Self::dash_value(&dash_keys, row);
            if value != "onesided" && value != "rpc" && !other_dash_values.contains(&value) {
                other_dash_values.push(value);
            }
        }
        Styler {
            x: x.to_string(),
            protocol_varies: others.iter().any(|k| k == "protocol"),
            dash_keys,
            other_dash_values,
            rest_values: combinations(rows, &rest_keys),
            rest_keys,
        }
    }

    /// What colour, dash and marker mean in this figure.
    fn note(&self) -> String {
        let mut parts = Vec::new();
        if self.protocol_varies {
            parts.push("colour: protocol".to_string());
        } else if !self.rest_keys.is_empty() {
            parts.push(format!("colour: {}", self.rest_keys.join(" × ")));
        }
        if !self.dash_keys.is_empty() {
            parts.push(format!(
                "dash: {} (solid one-sided, dashed RPC)",
                self.dash_keys.join(" × ")
            ));
        }
        if self.protocol_varies && !self.rest_keys.is_empty() {
            parts.push(format!("marker: {}", self.rest_keys.join(" × ")));
        }
        parts.iter().map(|p| format!("{p}; ")).collect()
    }

    fn dash_value(keys: &[String], row: &Value) -> String {
        keys.iter()
            .map(|k| knob_value(row, k))
            .collect::<Vec<_>>()
            .join("+")
    }

    fn style(&self, row: &Value) -> LineStyle {
        let dash = if self.dash_keys.is_empty() {
            0
        } else {
            match Self::dash_value(&self.dash_keys, row).as_str() {
                "onesided" => 0,
                "rpc" => 1,
                other => {
                    2 + self
                        .other_dash_values
                        .iter()
                        .position(|v| v == other)
                        .unwrap_or(0)
                }
            }
        };
        let rest = point_name(row, &self.rest_keys, None);
        let rest_index = self
            .rest_values
            .iter()
            .position(|v| *v == rest)
            .unwrap_or(0);
        let (color, marker) = if self.protocol_varies {
            (
                protocol_color(protocol_of(row)),
                Marker::ALL[rest_index % 5],
            )
        } else if !self.rest_keys.is_empty() {
            (
                svg::PALETTE[rest_index % svg::PALETTE.len()],
                Marker::Circle,
            )
        } else if self.x == "protocol" {
            (svg::PALETTE[0], Marker::Circle)
        } else {
            (protocol_color(protocol_of(row)), Marker::Circle)
        };
        LineStyle {
            color: color.to_string(),
            dash: svg::DASHES[dash % svg::DASHES.len()].to_string(),
            marker,
        }
    }
}

/// Every figure the rows support.
pub fn figures(
    rows: &[Value],
    options: &PlotOptions,
    hybrid: Option<&Analysis>,
) -> Result<Vec<Figure>, String> {
    let mut figures = Vec::new();
    let keys = knob_keys(rows);
    let unit = time_unit(rows);
    let requested_x = options.x.as_deref();
    if let Some(analysis) = hybrid {
        figures.extend(hybrid_figures(analysis, unit));
    }
    let x = if keys.iter().any(|k| k == "hybrid") && requested_x.is_none() {
        None // hybrid codes rank; they do not make a line
    } else {
        choose_x(rows, requested_x)?
    };
    if let (None, Some(name)) = (&x, options.facet.as_deref()) {
        if name != "none" {
            return Err(format!(
                "--facet {name}: these results draw no line figures to split into panels (give --x KNOB to draw lines)"
            ));
        }
    }
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
        let facet = choose_facet(rows, x, &others, options.facet.as_deref())?;
        let identity: Vec<String> = others
            .iter()
            .filter(|k| Some(*k) != facet.as_ref())
            .cloned()
            .collect();
        // A panel of one line per panel value names its line by the facet.
        let line_keys = if identity.is_empty() {
            &others
        } else {
            &identity
        };
        let styler = Styler::new(rows, x, &identity, &others);
        let panel_values: Vec<String> = match &facet {
            Some(f) => distinct_values(rows, f),
            None => vec![String::new()],
        };
        let groups = group_by_point(rows);
        for (stem, title, y_label, path, scale) in LINE_METRICS {
            let mut panels: Vec<Panel> = panel_values
                .iter()
                .map(|value| Panel {
                    title: match &facet {
                        Some(f) => format!("{}={value}", f.rsplit('.').next().unwrap_or(f)),
                        None => String::new(),
                    },
                    title_color: (facet.as_deref() == Some("protocol"))
                        .then(|| protocol_color(value).to_string()),
                    series: Vec::new(),
                })
                .collect();
            for (_, members) in &groups {
                let row = members[0];
                let panel = match &facet {
                    Some(f) => panel_values
                        .iter()
                        .position(|v| v == knob_value(row, f))
                        .unwrap_or(0),
                    None => 0,
                };
                let name = point_name(row, line_keys, None);
                let value = knob_value(row, x);
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
                let series = &mut panels[panel].series;
                match series.iter_mut().find(|se| se.name == name) {
                    Some(se) => se.points.push((xv, s.mean, whisker)),
                    None => series.push(Series {
                        name,
                        style: styler.style(row),
                        points: vec![(xv, s.mean, whisker)],
                    }),
                }
            }
            let chart = LineChart {
                title: format!("{title} vs {}", knob_label(x)),
                x_label: knob_label(x),
                y_label: y_label.replace("{t}", unit),
                x_axis: axis.clone(),
                panels,
            };
            let lines = if others.is_empty() {
                "sweep".to_string()
            } else {
                line_keys.join(" × ")
            };
            let layout = match &facet {
                Some(f) => format!("one panel per {f} (shared axes), one line per {lines}"),
                None => format!("one line per {lines}"),
            };
            figures.push(Figure {
                name: stem.into(),
                title: chart.title.clone(),
                caption: format!(
                    "{} against {}; {layout}; {}points are means over repetitions, whiskers min–max.",
                    chart.y_label,
                    knob_label(x),
                    styler.note(),
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

/// Families tried, in order, for the figures' generic `sans-serif`: the
/// one the SVG names first, then the usual metric-compatible stand-ins.
const SANS_FAMILIES: [&str; 6] = [
    "DejaVu Sans",
    "Liberation Sans",
    "Noto Sans",
    "FreeSans",
    "Arial",
    "Helvetica",
];

/// Turns the SVG figures into PNG images in process. Loads the system's
/// fonts once (a few ms with a handful of font files).
pub struct Rasterizer {
    options: usvg::Options<'static>,
}

impl Rasterizer {
    /// Loads the system fonts (fontconfig's directories and the usual
    /// ones); an error, naming what to install, when there is none to set
    /// the labels in.
    pub fn new() -> Result<Rasterizer, String> {
        let mut db = usvg::fontdb::Database::new();
        db.load_system_fonts();
        Self::with_fonts(db)
    }

    /// As [`Rasterizer::new`] with a font database of the caller's.
    pub fn with_fonts(mut db: usvg::fontdb::Database) -> Result<Rasterizer, String> {
        let has_family = |db: &usvg::fontdb::Database, family: &str| {
            db.faces()
                .any(|f| f.families.iter().any(|(name, _)| name == family))
        };
        let sans = SANS_FAMILIES
            .iter()
            .find(|f| has_family(&db, f))
            .map(|f| f.to_string())
            .or_else(|| {
                db.faces()
                    .find_map(|f| f.families.first().map(|(name, _)| name.clone()))
            })
            .ok_or(
                "no font found to set the figures' labels in (searched fontconfig's and the usual font directories); install one, e.g. `apt-get install fonts-dejavu-core` on Debian/Ubuntu, or use --no-png",
            )?;
        db.set_sans_serif_family(sans.clone());
        let options = usvg::Options {
            font_family: sans,
            fontdb: Arc::new(db),
            ..usvg::Options::default()
        };
        Ok(Rasterizer { options })
    }

    /// The family the labels are set in.
    pub fn font_family(&self) -> &str {
        &self.options.font_family
    }

    /// The PNG of `svg` at its declared size (1 SVG px = 1 pixel).
    pub fn png(&self, svg: &str) -> Result<Vec<u8>, String> {
        let tree = usvg::Tree::from_str(svg, &self.options).map_err(|e| e.to_string())?;
        let size = tree.size().to_int_size();
        let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
            .ok_or_else(|| format!("cannot draw {}x{} pixels", size.width(), size.height()))?;
        resvg::render(
            &tree,
            tiny_skia::Transform::identity(),
            &mut pixmap.as_mut(),
        );
        pixmap.encode_png().map_err(|e| e.to_string())
    }
}

/// Writes each figure's SVG, and its PNG when `png`; returns a line per
/// file written (or skipped). Without a font the PNGs are skipped with a
/// line saying so: the SVGs are complete, and a PNG without its labels
/// would mislead.
pub fn write_figures(figures: &[Figure], out: &Path, png: bool) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    let rasterizer = if png {
        match Rasterizer::new() {
            Ok(r) => Some(r),
            Err(e) => {
                lines.push(format!("PNG skipped: {e}; the SVGs are complete"));
                None
            }
        }
    } else {
        None
    };
    for figure in figures {
        let path = out.join(format!("{}.svg", figure.name));
        std::fs::write(&path, &figure.svg)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        lines.push(format!("wrote {}", path.display()));
        if let Some(rasterizer) = &rasterizer {
            let png_path = out.join(format!("{}.png", figure.name));
            let bytes = rasterizer
                .png(&figure.svg)
                .map_err(|e| format!("cannot render {}: {e}", figure.name))?;
            std::fs::write(&png_path, bytes)
                .map_err(|e| format!("cannot write {}: {e}", png_path.display()))?;
            lines.push(format!("wrote {}", png_path.display()));
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_protocol_has_its_own_colour() {
        for kind in ProtocolKind::ALL {
            let color = protocol_color(kind.name());
            assert_ne!(color, svg::PALETTE[11], "{} has no colour", kind.name());
            let others = ProtocolKind::ALL
                .iter()
                .filter(|k| **k != kind && protocol_color(k.name()) == color)
                .count();
            assert_eq!(others, 0, "{} shares {color}", kind.name());
        }
        // Any spelling the CLI takes maps to the same colour.
        assert_eq!(protocol_color("NO_WAIT"), protocol_color("no_wait"));
        assert_eq!(protocol_color("nowait"), protocol_color("no_wait"));
    }

    #[test]
    fn without_a_font_pngs_are_refused_naming_the_package() {
        let error = Rasterizer::with_fonts(usvg::fontdb::Database::new())
            .err()
            .expect("no fonts: no rasterizer");
        assert!(error.contains("fonts-dejavu-core"), "{error}");
    }

    fn row(protocol: &str, primitive: &str, coroutines: &str) -> Value {
        serde_json::json!({
            "point": format!("{protocol}/{primitive}/{coroutines}"),
            "knobs": {"protocol": protocol, "primitive": primitive, "coroutines": coroutines},
            "report": {"throughput_txn_per_s": 1.0}
        })
    }

    #[test]
    fn the_facet_leaves_at_most_eight_lines_a_panel_in_the_fewest_panels() {
        let keys = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut rows = Vec::new();
        for p in ["no_wait", "occ", "mvcc", "maat", "drtm"] {
            for m in ["onesided", "rpc"] {
                for c in ["1", "2"] {
                    rows.push(row(p, m, c));
                }
            }
        }
        let others = keys(&["protocol", "primitive"]);
        // 10 lines: a panel per protocol leaves 2 each; a panel per
        // primitive would leave 5, in 2 panels, so it wins.
        assert_eq!(
            choose_facet(&rows, "coroutines", &others, None).unwrap(),
            Some("primitive".to_string())
        );
        // Eight lines or fewer: one panel.
        let few: Vec<Value> = rows
            .iter()
            .filter(|r| r["knobs"]["protocol"] != "drtm")
            .cloned()
            .collect();
        assert_eq!(
            choose_facet(&few, "coroutines", &others, None).unwrap(),
            None
        );
        assert_eq!(
            choose_facet(&rows, "coroutines", &others, Some("none")).unwrap(),
            None
        );
        let error = choose_facet(&rows, "coroutines", &others, Some("seed")).unwrap_err();
        assert!(
            error.contains("allowed: protocol, primitive, none"),
            "{error}"
        );
    }
}
