//! The HTML report page of a sweep (`report.html`): what ran and where
//! (version, git revision, host, base config), every figure with its
//! caption, the per-point summary table, the hybrid rankings when present,
//! and links to the raw rows. Self-contained apart from the SVG files it
//! shows, which sit beside it; printable.
//!
//! The page is a run of `<section>`s in this order: `setup` (the preset,
//! provenance, base config), `figures`, `results` (the per-point table),
//! `hybrid` (when present). Each stands alone in the one 1,150-px column,
//! so a further section — a preset's verdict per claim, say — goes between
//! two of them (after `setup` for a verdict) and adds its rows to the
//! page-height estimate; figures are scaled to the column, none wider than
//! `svg::MAX_WIDTH` to begin with.
//!
//! `verbena plot` takes no screenshot of the page: that needs a browser,
//! which is the point only where the page itself is checked (CI's
//! `.ci/check_report.py`, or a reader's own browser). The page's estimated
//! height at 1200 px wide is in `<meta name="verbena-page-height">` for
//! such a screenshot.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use super::hybrid::Analysis;
use super::plot::{self, knob_keys, Figure};
use super::provenance::iso8601_utc;
use super::svg::{escape, format_number};
use super::sweep::{check_verdicts, group_by_point};
use super::table::report_spread;
use crate::config::YcsbConfig;
use crate::engine::report::{describe_keys, describe_writes, percent};

const STYLE: &str = "
body { font-family: 'DejaVu Sans', Helvetica, Arial, sans-serif; margin: 24px 40px; color: #222; max-width: 1150px; }
h1 { font-size: 24px; margin-bottom: 4px; } h2 { font-size: 19px; margin-top: 28px; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f0f0f0; } td.l, th.l { text-align: left; }
figure { margin: 16px 0; page-break-inside: avoid; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 13px; color: #444; max-width: 900px; }
.meta { font-size: 13px; color: #444; } .bad { color: #b00; font-weight: bold; } code { font-size: 12px; }
";

fn provenance(out: &mut String, rows: &[Value]) {
    let first = &rows[0];
    let host = &first["host"];
    let started: Vec<f64> = rows
        .iter()
        .filter_map(|r| r["started_unix_s"].as_f64())
        .collect();
    let wall: f64 = rows.iter().filter_map(|r| r["run_wall_s"].as_f64()).sum();
    let _ = writeln!(
        out,
        "<p class=\"meta\">verbena {} · git {} · host {} ({}, {} cores, {} {}) · {} runs, {:.0} s of runs{}</p>",
        escape(first["verbena_version"].as_str().unwrap_or("?")),
        escape(first["git_revision"].as_str().unwrap_or("?")),
        escape(host["name"].as_str().unwrap_or("?")),
        escape(host["cpu"].as_str().unwrap_or("?")),
        host["cores"],
        escape(host["os"].as_str().unwrap_or("?")),
        escape(host["arch"].as_str().unwrap_or("?")),
        rows.len(),
        wall,
        if started.is_empty() {
            String::new()
        } else {
            format!(
                " · started {}",
                iso8601_utc(started.iter().copied().fold(f64::INFINITY, f64::min))
            )
        }
    );
}

/// The base's YCSB write mix and how it picks keys, naming only the
/// knobs that apply (`describe_writes`, `describe_keys`); the write ratio
/// and the distribution's name alone for a config this version does not
/// read.
fn base_ycsb(ycsb: &Value) -> (String, String) {
    match serde_json::from_value::<YcsbConfig>(ycsb.clone()) {
        Ok(y) => (describe_writes(&y), describe_keys(&y)),
        Err(_) => (
            format!(
                "{} % writes",
                format_number(ycsb["write_ratio"].as_f64().unwrap_or(0.0) * 100.0)
            ),
            format!("{} keys", ycsb["distribution"].as_str().unwrap_or("?")),
        ),
    }
}

fn base_config(out: &mut String, rows: &[Value]) {
    let c = &rows[0]["report"]["config"];
    let y = &c["ycsb"];
    let (writes, keys) = base_ycsb(y);
    let _ = writeln!(
        out,
        "<p class=\"meta\">Base of the first point: fabric <b>{}</b> ({} time), network profile <b>{}</b>, {} node(s) × {} worker(s) × {} coroutine(s), protocol {}, YCSB {} ops/txn, {}, {}, {} µs compute, {} s measured after {} s warm-up. The full resolved config of every run is in <a href=\"results.json\">results.json</a> and <a href=\"results.csv\">results.csv</a>.</p>",
        escape(c["fabric"].as_str().unwrap_or("?")),
        escape(rows[0]["report"]["time"].as_str().unwrap_or("?")),
        escape(c["profile"]["name"].as_str().unwrap_or("?")),
        c["nodes"], c["workers"], c["coroutines"],
        escape(c["protocol"].as_str().unwrap_or("?")),
        y["ops_per_txn"],
        escape(&writes),
        escape(&keys),
        y["compute_us"],
        c["duration_s"], c["warmup_s"],
    );
}

fn summary_table(out: &mut String, rows: &[Value]) {
    let keys = knob_keys(rows);
    let _ = writeln!(out, "<h2>Results per point</h2>\n<table>\n<tr>");
    for key in &keys {
        let _ = write!(out, "<th class=\"l\">{}</th>", escape(key));
    }
    let _ = writeln!(
        out,
        "<th>runs</th><th>txn/s (mean)</th><th>± sd</th><th>p50 µs</th><th>p99 µs</th><th>abort rate</th><th>RPCs/txn</th><th>check</th></tr>"
    );
    for (_, members) in group_by_point(rows) {
        let metric = |path: &str| report_spread(&members, path);
        let _ = write!(out, "<tr>");
        for key in &keys {
            let _ = write!(
                out,
                "<td class=\"l\">{}</td>",
                escape(members[0]["knobs"][key].as_str().unwrap_or(""))
            );
        }
        let checked = check_verdicts(&members);
        let verdict = if checked.is_empty() {
            "off".to_string()
        } else if checked.iter().all(|&ok| ok) {
            "serializable".to_string()
        } else {
            "<span class=\"bad\">VIOLATION</span>".to_string()
        };
        let t = metric("throughput_txn_per_s");
        let _ = writeln!(
            out,
            "<td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{}</td><td>{:.2}</td><td>{verdict}</td></tr>",
            members.len(),
            format_number(t.mean),
            format_number(t.stdev),
            metric("latency_us.p50").mean,
            metric("latency_us.p99").mean,
            percent(metric("abort_rate").mean),
            metric("verbs_per_txn.rpc").mean,
        );
    }
    let _ = writeln!(out, "</table>");
}

/// `[5, 21]`, or `none`.
fn codes_or_none(codes: &[u16]) -> String {
    if codes.is_empty() {
        "none".to_string()
    } else {
        format!("{codes:?}")
    }
}

fn hybrid_tables(out: &mut String, analysis: &Analysis) {
    for group in &analysis.groups {
        let _ = writeln!(
            out,
            "<h2>{} hybrid codes · {}</h2>\n<p class=\"meta\">Hybrids beating both pure forms — throughput: {}; p50 latency: {}; better than both only within the noise — throughput: {}; p50 latency: {}.</p>",
            escape(&analysis.protocol.to_uppercase()),
            escape(&group.label),
            codes_or_none(&group.beat_both_throughput),
            codes_or_none(&group.beat_both_latency),
            codes_or_none(&group.above_both_within_noise),
            codes_or_none(&group.below_both_latency_within_noise),
        );
        let _ = writeln!(
            out,
            "<table><tr><th>rank</th><th>code</th><th class=\"l\">plan</th><th>txn/s</th><th>± sd</th><th>p50 µs</th><th>p99 µs</th><th>abort rate</th></tr>"
        );
        for (rank, code) in group.by_throughput.iter().enumerate() {
            if let Some(c) = group.codes.iter().find(|c| c.code == *code) {
                let _ = writeln!(
                    out,
                    "<tr><td>{}</td><td>{}</td><td class=\"l\"><code>{}</code></td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{}</td></tr>",
                    rank + 1,
                    c.code,
                    escape(&c.plan),
                    format_number(c.throughput_txn_per_s),
                    format_number(c.throughput_stdev),
                    c.latency_p50_us,
                    c.latency_p99_us,
                    percent(c.abort_rate)
                );
            }
        }
        let _ = writeln!(out, "</table>");
        if let Some(b) = &group.breakdown {
            let _ = writeln!(
                out,
                "<p class=\"meta\">Latency-breakdown method: proposed code <b>{}</b>{}.</p>",
                b.proposed_code,
                b.throughput_rank.map_or(String::new(), |r| format!(
                    ", rank {r} of {} by throughput",
                    group.codes.len()
                ))
            );
        }
    }
}

/// `(name, source, title, scale)` from the `preset.json` that `verbena
/// reproduce` leaves in its output directory (`scale` is `paper` or
/// `small`; absent in a directory written before presets had two).
fn read_preset(dir: &Path) -> Option<(String, String, String, Option<String>)> {
    let text = std::fs::read_to_string(dir.join("preset.json")).ok()?;
    let value: Value = serde_json::from_str(&text).ok()?;
    let field = |name: &str| value[name].as_str().map(str::to_string);
    Some((
        field("name")?,
        field("source")?,
        field("title")?,
        field("scale"),
    ))
}

/// Writes `report.html` into `out`; returns a line saying what was
/// written.
pub fn write_report(
    out: &Path,
    rows: &[Value],
    figures: &[Figure],
    hybrid: Option<&Analysis>,
) -> Result<String, String> {
    let title = match hybrid {
        Some(a) => format!("verbena: {} hybrid stage codes", a.protocol.to_uppercase()),
        None => {
            let keys = knob_keys(rows);
            if keys.is_empty() {
                "verbena: results".to_string()
            } else {
                format!("verbena sweep over {}", keys.join(" × "))
            }
        }
    };
    let mut body = String::from("<section id=\"setup\">\n");
    if let Some(preset) = read_preset(out) {
        let _ = writeln!(
            body,
            "<p><b>Preset <code>{}</code></b>: {} — {} of {}.</p>",
            escape(&preset.0),
            escape(&preset.2),
            match preset.3.as_deref() {
                Some("paper") => "the paper's configuration (scaled where <code>verbena reproduce --list</code> says)",
                _ => "a small-scale version",
            },
            escape(&preset.1)
        );
    }
    provenance(&mut body, rows);
    base_config(&mut body, rows);
    let _ = writeln!(
        body,
        "</section>\n<section id=\"figures\">\n<h2>Figures</h2>"
    );
    // Page height for a screenshot: header, figures at their size (a
    // wider one is scaled to the 1120-px column) with captions, tables.
    let mut height = 300u32;
    for figure in figures {
        let (w, h) = plot::svg_size(&figure.svg);
        height += h * 1120 / w.max(1120) + 75;
        let _ = writeln!(
            body,
            "<figure><img src=\"{}.svg\" alt=\"{}\"><figcaption><b>{}.</b> {}</figcaption></figure>",
            escape(&figure.name),
            escape(&figure.title),
            escape(&figure.title),
            escape(&figure.caption)
        );
    }
    let _ = writeln!(body, "</section>\n<section id=\"results\">");
    summary_table(&mut body, rows);
    let _ = writeln!(body, "</section>");
    height += 60 + 26 * group_by_point(rows).len() as u32;
    if let Some(analysis) = hybrid {
        let _ = writeln!(body, "<section id=\"hybrid\">");
        hybrid_tables(&mut body, analysis);
        let _ = writeln!(body, "</section>");
        height += analysis
            .groups
            .iter()
            .map(|g| 120 + 24 * g.codes.len() as u32)
            .sum::<u32>();
    }
    let _ = writeln!(body, "</body></html>");
    let html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"verbena-page-height\" content=\"{}\"><title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n{body}",
        height.min(16_000),
        escape(&title),
        escape(&title)
    );
    let path = out.join("report.html");
    std::fs::write(&path, html).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(format!("wrote {}", path.display()))
}
