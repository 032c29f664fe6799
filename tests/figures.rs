//! The figures of large sweeps stay readable: no figure is wider than
//! about 2,000 px or unreasonably tall, and past a panel's worth of bars
//! the per-point bar figures become small multiples. The results are
//! made here in the shape `verbena sweep` writes (a row per point, the
//! report's fields the figures read), for every preset's knobs at both
//! scales, so no preset has to run.

use serde_json::{json, Value};
use verbena::experiments::plot::{self, figures, svg_size, PlotOptions};
use verbena::experiments::presets::{Kind, Scale, PRESETS};
use verbena::experiments::sweep::parse_knob;

/// Widest a figure may be, px.
const MAX_WIDTH_PX: u32 = 2_000;
/// Tallest a figure of a preset may be, px.
const MAX_PRESET_HEIGHT_PX: u32 = 2_400;

/// A row per point of the sweep over `knobs` (`KEY=V1,V2,…`), the first
/// knob slowest, each with made-up throughput, latencies, stage times and
/// a time breakdown.
fn rows_of(knobs: &[String]) -> Vec<Value> {
    let knobs: Vec<_> = knobs.iter().map(|k| parse_knob(k).unwrap()).collect();
    let point_count: usize = knobs.iter().map(|k| k.values.len()).product();
    (0..point_count)
        .map(|i| {
            // Point i in mixed radix, the last knob the fastest digit.
            let mut rest = i;
            let mut values = serde_json::Map::new();
            for knob in knobs.iter().rev() {
                let value = &knob.values[rest % knob.values.len()];
                values.insert(knob.key.clone(), Value::String(value.clone()));
                rest /= knob.values.len();
            }
            let f = i as f64;
            json!({
                "point": i,
                "knobs": values,
                "report": {
                    "time": "simulated",
                    "throughput_txn_per_s": 100_000.0 + 997.0 * f,
                    "abort_rate": 0.01 * (i % 50) as f64,
                    "latency_us": {"p50": 20.0 + f, "p99": 80.0 + 2.0 * f},
                    "stages": {"read": 4.0 + f % 7.0, "lock": 3.0, "validate": 2.5, "log": 1.0, "commit": 2.0, "release": 1.5, "execution": 5.0},
                    "time_breakdown": {"useful_work": 0.3, "concurrency_control": 0.3, "commit": 0.2, "abort": 0.1, "backoff": 0.05, "other": 0.05}
                }
            })
        })
        .collect()
}

/// `(name, width, height)` of every figure of `rows`.
fn figure_sizes(rows: &[Value], x: Option<&str>, facet: Option<&str>) -> Vec<(String, u32, u32)> {
    let options = PlotOptions {
        x: x.map(str::to_string),
        facet: facet.map(str::to_string),
        png: false,
    };
    figures(rows, &options, None)
        .unwrap()
        .into_iter()
        .map(|f| {
            let (w, h) = svg_size(&f.svg);
            (f.name, w, h)
        })
        .collect()
}

#[test]
fn no_figure_of_any_preset_is_wider_than_two_thousand_pixels() {
    for preset in PRESETS.iter() {
        if !matches!(preset.kind, Kind::Sweep(_)) {
            continue;
        }
        for scale in [Scale::Small, Scale::Paper] {
            let rows = rows_of(&preset.knobs(scale));
            for (name, width, height) in figure_sizes(&rows, preset.x, None) {
                let what = format!(
                    "{} {scale:?}: {name}.svg is {width} × {height}",
                    preset.name
                );
                assert!(width <= MAX_WIDTH_PX, "{what}");
                assert!(height <= MAX_PRESET_HEIGHT_PX, "{what}");
                assert!(width >= 400 && height >= 300, "{what}");
            }
        }
    }
}

/// `(panel name, bars in it)` of a bar figure, from its markup.
fn bar_panels(svg: &str) -> Vec<(String, usize)> {
    svg.split("<g class=\"panel\" data-name=\"")
        .skip(1)
        .map(|panel| {
            let name = panel[..panel.find('"').unwrap()].to_string();
            let first_layer = panel.split("<g class=\"layer\"").nth(1).unwrap();
            let bars = first_layer[..first_layer.find("</g>").unwrap()]
                .matches("<rect")
                .count();
            (name, bars)
        })
        .collect()
}

#[test]
fn a_sweep_of_110_points_draws_a_panel_of_bars_per_protocol() {
    // rcc-compute --small: 11 protocols × 2 primitives × 5 compute times.
    let preset = PRESETS.iter().find(|p| p.name == "rcc-compute").unwrap();
    let rows = rows_of(&preset.knobs(Scale::Small));
    assert_eq!(rows.len(), 110);
    let all = figures(&rows, &PlotOptions::default(), None).unwrap();
    for name in ["stages", "time_breakdown"] {
        let figure = all.iter().find(|f| f.name == name).unwrap();
        let panels = bar_panels(&figure.svg);
        assert_eq!(panels.len(), 11, "{name}: {panels:?}");
        assert!(panels
            .iter()
            .all(|(p, n)| p.starts_with("protocol=") && *n == 10));
        // A protocol's panel title is in its colour, as in the line figures.
        let occ = plot::protocol_color("occ");
        assert!(figure
            .svg
            .contains(&format!("fill=\"{occ}\">protocol=occ</text>")));
        // Bars are named by the other knobs' values; the axis says which.
        assert!(figure.svg.contains(">onesided · 1</text>"), "{name}");
        assert!(
            figure.svg.contains("bars: primitive · compute_us"),
            "{name}"
        );
        assert!(figure.caption.contains("One panel per protocol"), "{name}");
        // One legend, every label turned straight down (never slanted
        // into the panel on its left).
        assert_eq!(figure.svg.matches("<g class=\"legend\">").count(), 1);
        assert!(!figure.svg.contains("rotate(-40"), "{name}");
        let (width, _) = svg_size(&figure.svg);
        assert!(width <= 1_600, "{name}: {width}");
    }
    // --facet picks the panels of the bar figures too; `none` keeps one
    // panel, whose bars then narrow to stay within the width.
    let sizes = figure_sizes(&rows, None, Some("none"));
    assert!(
        sizes.iter().all(|(_, w, _)| *w <= MAX_WIDTH_PX),
        "{sizes:?}"
    );
    let by_primitive = figures(
        &rows,
        &PlotOptions {
            facet: Some("primitive".into()),
            ..PlotOptions::default()
        },
        None,
    )
    .unwrap();
    let stages = by_primitive.iter().find(|f| f.name == "stages").unwrap();
    assert_eq!(
        bar_panels(&stages.svg),
        [
            ("primitive=onesided".to_string(), 55),
            ("primitive=rpc".to_string(), 55)
        ]
    );
    assert!(svg_size(&stages.svg).0 <= MAX_WIDTH_PX);
}

#[test]
fn a_few_points_keep_one_panel_of_bars_named_by_their_knobs() {
    let rows = rows_of(&["protocol=no_wait,occ".into(), "coroutines=1,2,8".into()]);
    let all = figures(&rows, &PlotOptions::default(), None).unwrap();
    let stages = all.iter().find(|f| f.name == "stages").unwrap();
    assert!(!stages.svg.contains("class=\"panel\""));
    assert!(stages.svg.contains("protocol=no_wait coroutines=1"));
    assert!(!stages.caption.contains('`'), "{}", stages.caption);
}

#[test]
fn a_sweep_too_large_for_any_one_knob_stays_within_the_width() {
    // 11 × 7 × 6 = 462 points: no single knob leaves 16 bars a panel.
    let rows = rows_of(&[
        "protocol=all".into(),
        "theta=0,0.3,0.6,0.7,0.8,0.9,0.99".into(),
        "coroutines=1,3,5,7,9,11".into(),
    ]);
    for (name, width, height) in figure_sizes(&rows, Some("coroutines"), None) {
        assert!(width <= MAX_WIDTH_PX, "{name}: {width} × {height}");
    }
}

#[test]
fn the_png_of_a_large_sweeps_bars_is_the_svgs_size() {
    let Ok(rasterizer) = plot::Rasterizer::new() else {
        eprintln!(
            "no font on this host: the PNG is not rendered (the SVG sizes are checked above)"
        );
        return;
    };
    let preset = PRESETS.iter().find(|p| p.name == "rcc-coroutines").unwrap();
    let rows = rows_of(&preset.knobs(Scale::Small));
    let all = figures(&rows, &PlotOptions::default(), None).unwrap();
    let stages = all.iter().find(|f| f.name == "stages").unwrap();
    let png = rasterizer.png(&stages.svg).unwrap();
    let pixmap = resvg::tiny_skia::Pixmap::decode_png(&png).unwrap();
    assert_eq!((pixmap.width(), pixmap.height()), svg_size(&stages.svg));
    assert!(pixmap.width() <= MAX_WIDTH_PX);
}

#[test]
fn the_report_page_has_a_section_each_and_an_iso_8601_start() {
    let preset = PRESETS.iter().find(|p| p.name == "rcc-compute").unwrap();
    let mut rows = rows_of(&preset.knobs(Scale::Small));
    for row in &mut rows {
        row["started_unix_s"] = json!(1_795_837_591.5);
        row["report"]["config"] = json!({"ycsb": {"distribution": "hot", "theta": 0.99, "hot_fraction": 0.001, "hot_probability": 0.9}});
    }
    let all = figures(&rows, &PlotOptions::default(), None).unwrap();
    let dir = std::env::temp_dir().join(format!("verbena-figures-page-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    verbena::experiments::html::write_report(&dir, &rows, &all, None).unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let sections: Vec<&str> = html
        .split("<section id=\"")
        .skip(1)
        .map(|s| &s[..s.find('"').unwrap()])
        .collect();
    assert_eq!(sections, ["setup", "figures", "results"]);
    assert_eq!(
        html.matches("<section").count(),
        html.matches("</section>").count()
    );
    assert!(html.contains("started 2026-11-28T03:46:31Z"), "{html}");
    assert!(!html.contains("Unix time"));
    // The hot area, not θ, for the `hot` distribution.
    assert!(html.contains("hot area 0.1 % of rows gets 90 % of accesses"));
    assert!(!html.contains("θ 0.99"));
    // Captions say no Markdown.
    assert!(all.iter().all(|f| !f.caption.contains('`')));
}
