//! The bar figures: per-stage latency stacks (RCC Fig. 13), the time
//! breakdown (Deneva Fig. 6), and `verbena hybrid`'s codes ranked by
//! throughput and by latency (RCC Fig. 14).

use serde_json::Value;

use super::{point_name, Figure};
use crate::base::Stage;
use crate::experiments::hybrid::{Analysis, CodeResult};
use crate::experiments::svg::{self, BarKind, RankedBars, StackedBars};
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

/// Mean stage latencies per point (RCC Fig. 13).
pub(super) fn stage_bars(rows: &[Value], keys: &[String], unit: &str) -> Option<Figure> {
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
        .map(|name| (name.clone(), mean_per_point(&groups, "stages", name)))
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
pub(super) fn time_breakdown_bars(rows: &[Value], keys: &[String]) -> Option<Figure> {
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
            let values = mean_per_point(&groups, "time_breakdown", field);
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
