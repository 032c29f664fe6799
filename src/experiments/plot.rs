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
//! - Both bar figures as small multiples where one panel would hold more
//!   than [`MAX_BARS_PER_PANEL`] bars: a panel per protocol (whose stages
//!   the bars stack) where that leaves 2 to that many bars a panel, else
//!   per the knob the line figures would choose by the same rule, else per
//!   the knob leaving the fewest bars a panel; `--facet` picks the knob
//!   for these too. No figure is wider than [`svg::MAX_WIDTH`]: bars
//!   narrow, and only every few is labelled, before it grows past it.
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
//!
//! This file chooses the knobs and draws the line figures; `style` holds
//! the colours, dashes and markers of lines, `bars` the bar figures, and
//! `png` the PNG copies.

mod bars;
mod png;
mod style;

use serde_json::Value;

use super::hybrid::Analysis;
use super::svg::{self, Heading, LineChart, Panel, Series, XAxis};
use super::sweep::group_by_point;
use super::table::{number_at, Spread};
use bars::{hybrid_figures, stage_bars, time_breakdown_bars, BarLayout};
pub use png::{write_figures, Rasterizer};
use style::Styler;
pub use style::{protocol_color, PROTOCOL_COLORS};

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

/// More bars than this in one panel (a bar per point) and the bars and
/// their labels shrink to a strip on the page; the bar figures become
/// small multiples.
pub const MAX_BARS_PER_PANEL: usize = 16;

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
    Ok(fewest_panels(rows, others, MAX_LINES_PER_PANEL))
}

/// The knob among `others` whose panels would leave 2 to `limit` of
/// `others`' combinations each, in the fewest panels (a tie goes to the
/// knob given first); `None` when all fit one panel, or no knob does that.
fn fewest_panels(rows: &[Value], others: &[String], limit: usize) -> Option<String> {
    if combinations(rows, others).len() <= limit {
        return None;
    }
    others
        .iter()
        .filter_map(|key| {
            let per_panel = per_panel(rows, others, key);
            (2..=limit)
                .contains(&per_panel)
                .then(|| (distinct_values(rows, key).len(), key.clone()))
        })
        .min_by_key(|(panels, _)| *panels)
        .map(|(_, key)| key)
}

/// How many combinations of `others` but `key` the rows hold: what one
/// panel per value of `key` would show at most.
fn per_panel(rows: &[Value], others: &[String], key: &str) -> usize {
    let rest: Vec<String> = others.iter().filter(|k| *k != key).cloned().collect();
    combinations(rows, &rest).len()
}

/// The heading of the panel of small multiples whose facet knob `facet`
/// has `value`: `protocol=occ`, in OCC's colour (the last part of a dotted
/// key: `theta=0.9`).
fn facet_heading(facet: &str, value: &str) -> Heading {
    Heading {
        title: format!("{}={value}", facet.rsplit('.').next().unwrap_or(facet)),
        color: (facet == "protocol").then(|| protocol_color(value).to_string()),
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
                    heading: match &facet {
                        Some(f) => facet_heading(f, value),
                        None => Heading::default(),
                    },
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
    let bars = BarLayout::of(rows, &keys, options.facet.as_deref());
    if let Some(stages) = stage_bars(rows, &bars, unit) {
        figures.push(stages);
    }
    if let Some(breakdown) = time_breakdown_bars(rows, &bars) {
        figures.push(breakdown);
    }
    if figures.is_empty() {
        return Err("the results hold nothing to plot".into());
    }
    Ok(figures)
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

#[cfg(test)]
mod tests {
    use super::*;

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
