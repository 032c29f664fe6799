//! The bar figures: per-stage latency stacks (RCC Fig. 13), the time
//! breakdown (Deneva Fig. 6), and `verbena hybrid`'s codes ranked by
//! throughput and by latency (RCC Fig. 14).
//!
//! Invariant: the two per-point figures lay their bars out alike
//! ([`BarLayout`]): the same panels, the same bars in the same order.

use serde_json::Value;

use super::{
    combinations, distinct_values, facet_heading, fewest_panels, knob_label, knob_value, per_panel,
    point_name, Figure, MAX_BARS_PER_PANEL,
};
use crate::base::Stage;
use crate::experiments::hybrid::{Analysis, CodeResult};
use crate::experiments::svg::{self, BarKind, BarPanel, RankedBars, StackedBars};
use crate::experiments::sweep::group_by_point;
use crate::experiments::table::{number_at, Spread};

/// Per point (group of runs), the mean over its runs of the report's
/// `section.field` (runs without it left out).
fn mean_per_point(groups: &[(usize, Vec<&Value>)], section: &str, field: &str) -> Vec<f64> {
    groups
        .iter()
        .map(|(_, members)| {
            let values: Vec<f64> = members
                .iter()
                .filter_map(|r| number_at(&r["report"][section], field))
                .collect();
            Spread::of(&values).mean
        })
        .collect()
}

/// Where the per-point bars go: one panel of a bar per point, or small
/// multiples, a panel per value of a facet knob and a bar per combination
/// of the other knobs (the plot module's doc gives the rule).
pub(super) struct BarLayout {
    /// Each point's bar label, in point order: every knob's `key=value`
    /// in one panel, the other knobs' values in small multiples.
    labels: Vec<String>,
    /// What tells the bars of a panel apart (empty in one panel).
    x_label: String,
    /// Empty: one panel.
    panels: Vec<BarPanel>,
    /// The caption's words for the layout (empty in one panel).
    note: String,
}

impl BarLayout {
    /// The layout of `rows`' points, whose knobs are `keys`; `requested`
    /// is `--facet` (already checked against the knobs by the line
    /// figures, `none` keeps one panel).
    pub(super) fn of(rows: &[Value], keys: &[String], requested: Option<&str>) -> BarLayout {
        let groups = group_by_point(rows);
        let facet = match requested {
            Some("none") => None,
            Some(name) => {
                let key = crate::experiments::sweep::canonical_key(name)
                    .unwrap_or_else(|_| name.to_string());
                keys.contains(&key).then_some(key)
            }
            None => bar_facet(rows, keys),
        };
        let Some(facet) = facet else {
            return BarLayout {
                labels: groups
                    .iter()
                    .map(|(_, m)| point_name(m[0], keys, None))
                    .collect(),
                x_label: String::new(),
                panels: Vec::new(),
                note: String::new(),
            };
        };
        let rest: Vec<String> = keys.iter().filter(|k| **k != facet).cloned().collect();
        let short = |k: &String| k.rsplit('.').next().unwrap_or(k).to_string();
        let labels = groups
            .iter()
            .map(|(_, m)| {
                let values: Vec<&str> = rest.iter().map(|k| knob_value(m[0], k)).collect();
                values.join(" · ")
            })
            .collect();
        let x_label = match rest.as_slice() {
            [one] => knob_label(one),
            _ => format!(
                "bars: {}",
                rest.iter().map(short).collect::<Vec<_>>().join(" · ")
            ),
        };
        let panels = distinct_values(rows, &facet)
            .into_iter()
            .map(|value| BarPanel {
                heading: facet_heading(&facet, &value),
                bars: groups
                    .iter()
                    .enumerate()
                    .filter(|(_, (_, m))| knob_value(m[0], &facet) == value)
                    .map(|(b, _)| b)
                    .collect(),
            })
            .collect();
        let note = format!(
            " One panel per {facet} (shared y axis), a bar per {}.",
            if rest.is_empty() {
                "point".to_string()
            } else {
                rest.join(" × ")
            }
        );
        BarLayout {
            labels,
            x_label,
            panels,
            note,
        }
    }

    /// The stacked bars of `layers` (a value per point) in this layout.
    fn chart(
        &self,
        title: &str,
        y_label: String,
        layers: Vec<(String, Vec<f64>)>,
        normalize: bool,
    ) -> StackedBars {
        StackedBars {
            title: title.into(),
            y_label,
            x_label: self.x_label.clone(),
            bars: self.labels.clone(),
            layers,
            normalize,
            panels: self.panels.clone(),
        }
    }
}

/// The knob whose values get a panel each when one panel would hold more
/// than [`MAX_BARS_PER_PANEL`] bars: `protocol` where that leaves 2 to
/// that many a panel (the bars stack a protocol's own stages), else the
/// line figures' rule ([`fewest_panels`]), else the knob leaving the
/// fewest bars a panel, at least 2 (bars then narrow to fit).
fn bar_facet(rows: &[Value], keys: &[String]) -> Option<String> {
    if combinations(rows, keys).len() <= MAX_BARS_PER_PANEL {
        return None;
    }
    let fits = |key: &str| (2..=MAX_BARS_PER_PANEL).contains(&per_panel(rows, keys, key));
    if keys.iter().any(|k| k == "protocol") && fits("protocol") {
        return Some("protocol".into());
    }
    fewest_panels(rows, keys, MAX_BARS_PER_PANEL).or_else(|| {
        keys.iter()
            .map(|k| (per_panel(rows, keys, k), k))
            .filter(|(n, _)| *n >= 2)
            .min_by_key(|(n, _)| *n)
            .map(|(_, k)| k.clone())
    })
}

/// Mean stage latencies per point (RCC Fig. 13).
pub(super) fn stage_bars(rows: &[Value], layout: &BarLayout, unit: &str) -> Option<Figure> {
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
    let layers = layer_names
        .iter()
        .map(|name| (name.clone(), mean_per_point(&groups, "stages", name)))
        .collect();
    let chart = layout.chart(
        "Per-stage latency of committed transactions",
        format!("mean {unit}µs per transaction"),
        layers,
        false,
    );
    Some(Figure {
        name: "stages".into(),
        title: chart.title.clone(),
        caption: format!(
            "Mean time per stage of committed transactions' final attempt, stacked (RCC Fig. 13); execution is the program's own work between stages.{}",
            layout.note
        ),
        svg: svg::stacked_bars(&chart),
    })
}

/// Where coroutine time went, per point (Deneva Fig. 6).
pub(super) fn time_breakdown_bars(rows: &[Value], layout: &BarLayout) -> Option<Figure> {
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
    let layers = CATEGORIES
        .iter()
        .map(|(field, label)| {
            let values = mean_per_point(&groups, "time_breakdown", field);
            (label.to_string(), values)
        })
        .collect();
    let chart = layout.chart(
        "Time breakdown of transactions",
        "share of coroutine time (%)".into(),
        layers,
        true,
    );
    Some(Figure {
        name: "time_breakdown".into(),
        title: chart.title.clone(),
        caption: format!(
            "Share of all coroutines' time in the measured interval (Deneva Fig. 6's categories): useful work = execution of committed transactions; concurrency control = read/lock/validate/renew stages; commit protocol = log/commit/release; abort = aborted attempts; other = request generation, scheduling and interval edges. Shares of transaction time, not CPU time.{}",
            layout.note
        ),
        svg: svg::stacked_bars(&chart),
    })
}

/// RCC Fig. 14: each group's codes ranked by throughput and by latency.
pub(super) fn hybrid_figures(analysis: &Analysis, unit: &str) -> Vec<Figure> {
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
        // Every figure of a group: "PROTOCOL what · group".
        let group_title = |what: &str| {
            format!(
                "{} {what} · {}",
                analysis.protocol.to_uppercase(),
                group.label
            )
        };
        for (stem, title, x_label, order, beats, value) in [
            (
                "hybrid_throughput",
                "ranked by throughput",
                format!("throughput ({unit}txn/s)"),
                &group.by_throughput,
                &group.beat_both_throughput,
                (|c: &CodeResult| c.throughput_txn_per_s) as fn(&_) -> f64,
            ),
            (
                "hybrid_latency",
                "ranked by p50 latency",
                format!("p50 latency ({unit}µs)"),
                &group.by_latency,
                &group.beat_both_latency,
                (|c: &CodeResult| c.latency_p50_us) as fn(&_) -> f64,
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
                title: group_title(&format!("hybrid codes {title}")),
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
        let results: Vec<&CodeResult> = shown.iter().filter_map(|c| find(*c)).collect();
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
                title: group_title("stage latency: pure forms and the pick"),
                y_label: format!("mean {unit}µs per transaction"),
                x_label: String::new(),
                bars,
                layers,
                normalize: false,
                panels: Vec::new(),
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
