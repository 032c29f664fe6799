//! Bar charts: stacked vertical bars (one layer per component, optionally
//! normalised to 100 %), and ranked horizontal bars, best first.

use std::fmt::Write as _;

use super::{
    escape, format_number, legend, legend_width, nice_ticks, open_svg, x_axis_label, x_tick_label,
    y_axis, Frame, Swatch, BOTTOM, HEIGHT, LEFT, PALETTE, TOP, WIDTH,
};

/// Stacked vertical bars: one bar per category, one layer per component.
#[derive(Clone, Debug)]
pub struct StackedBars {
    pub title: String,
    pub y_label: String,
    pub bars: Vec<String>,
    /// `(layer name, value per bar)`.
    pub layers: Vec<(String, Vec<f64>)>,
    /// Scale each bar to 100 %.
    pub normalize: bool,
}

pub fn stacked_bars(chart: &StackedBars) -> String {
    let names: Vec<&str> = chart.layers.iter().map(|(n, _)| n.as_str()).collect();
    let right_pad = legend_width(&names);
    let bar_count = chart.bars.len().max(1);
    let longest_label = chart
        .bars
        .iter()
        .map(|b| b.chars().count())
        .max()
        .unwrap_or(0);
    let rotate = longest_label as f64 * 7.0 > (WIDTH - LEFT - right_pad) / bar_count as f64;
    let bottom = if rotate {
        (longest_label as f64 * 6.2 + 40.0).clamp(BOTTOM, 260.0)
    } else {
        BOTTOM
    };
    let height = HEIGHT - BOTTOM + bottom;
    // Rotated labels reach left of their bar: the first must stay inside.
    let left = if rotate {
        (longest_label as f64 * 4.8 + 12.0).clamp(LEFT, 300.0)
    } else {
        LEFT
    };
    let width = (left + right_pad + 30.0 + bar_count as f64 * 46.0).max(WIDTH + right_pad - 120.0);
    let plot_right = width - right_pad - 16.0;
    let totals: Vec<f64> = (0..chart.bars.len())
        .map(|b| {
            chart
                .layers
                .iter()
                .map(|(_, v)| v.get(b).copied().unwrap_or(0.0).max(0.0))
                .sum()
        })
        .collect();
    let scale = |b: usize, v: f64| {
        if chart.normalize && totals[b] > 0.0 {
            100.0 * v / totals[b]
        } else {
            v
        }
    };
    let high = if chart.normalize {
        100.0
    } else {
        totals.iter().copied().fold(0.0, f64::max)
    };
    let mut out = String::new();
    open_svg(&mut out, width, height, &chart.title);
    // The y axis is laid out for HEIGHT; shift it when the labels need room.
    let ticks = nice_ticks(0.0, high);
    let plot_bottom = HEIGHT - BOTTOM;
    let frame = Frame {
        left,
        top: TOP,
        right: plot_right,
        bottom: plot_bottom,
    };
    let map_y = y_axis(&mut out, &ticks, frame, &chart.y_label, 18.0);
    let slot = (plot_right - left) / bar_count as f64;
    let bar_width = (slot * 0.7).min(60.0);
    let center = |b: usize| left + slot * (b as f64 + 0.5);
    let mut entries = Vec::new();
    for (l, (name, values)) in chart.layers.iter().enumerate() {
        let color = PALETTE[l % PALETTE.len()];
        let _ = writeln!(out, r#"<g class="layer" data-name="{}">"#, escape(name));
        for (b, value) in values.iter().enumerate().take(chart.bars.len()) {
            let below: f64 = chart.layers[..l]
                .iter()
                .map(|(_, v)| scale(b, v.get(b).copied().unwrap_or(0.0).max(0.0)))
                .sum();
            let v = scale(b, value.max(0.0));
            let (y_top, y_base) = (map_y(below + v), map_y(below));
            let _ = writeln!(
                out,
                r#"<rect x="{:.1}" y="{y_top:.1}" width="{bar_width:.1}" height="{:.1}" fill="{color}" data-bar="{}" data-value="{value}"><title>{}: {}</title></rect>"#,
                center(b) - bar_width / 2.0,
                (y_base - y_top).max(0.0),
                escape(&chart.bars[b]),
                escape(name),
                format_number(*value)
            );
        }
        let _ = writeln!(out, "</g>");
        entries.push((name.as_str(), Swatch::Box(color)));
    }
    let _ = writeln!(out, r#"<g class="x-axis">"#);
    let _ = writeln!(
        out,
        r##"<line x1="{left:.1}" y1="{plot_bottom:.1}" x2="{plot_right:.1}" y2="{plot_bottom:.1}" stroke="#333333"/>"##
    );
    for (b, label) in chart.bars.iter().enumerate() {
        let x = center(b);
        let y = plot_bottom + 16.0;
        x_tick_label(&mut out, x, y, label, rotate);
    }
    let _ = writeln!(out, "</g>");
    legend(&mut out, plot_right + 18.0, TOP + 10.0, &entries);
    out.push_str("</svg>\n");
    out
}

/// How a ranked bar is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarKind {
    PureOneSided,
    PureRpc,
    Hybrid,
    /// A hybrid that beats both pure forms on this metric.
    BeatsBoth,
    /// The latency-breakdown method's pick.
    Proposed,
}

impl BarKind {
    fn color(self) -> &'static str {
        match self {
            BarKind::PureOneSided => PALETTE[0],
            BarKind::PureRpc => PALETTE[1],
            BarKind::Hybrid => "#b0b0b0",
            BarKind::BeatsBoth => PALETTE[2],
            BarKind::Proposed => PALETTE[3],
        }
    }

    fn name(self) -> &'static str {
        match self {
            BarKind::PureOneSided => "all one-sided",
            BarKind::PureRpc => "all RPC",
            BarKind::Hybrid => "hybrid",
            BarKind::BeatsBoth => "hybrid beating both pure forms",
            BarKind::Proposed => "latency-breakdown pick",
        }
    }
}

/// Horizontal bars, best first (RCC Fig. 14's ranking of hybrid codes).
#[derive(Clone, Debug)]
pub struct RankedBars {
    pub title: String,
    pub x_label: String,
    /// `(label, value, kind)`, in rank order.
    pub bars: Vec<(String, f64, BarKind)>,
}

pub fn ranked_bars(chart: &RankedBars) -> String {
    let row_height = 18.0;
    let label_width = chart
        .bars
        .iter()
        .map(|b| b.0.chars().count())
        .max()
        .unwrap_or(4) as f64
        * 7.0
        + 16.0;
    let left = label_width.max(LEFT);
    let legend_pad = 250.0;
    let width = (left + 420.0 + legend_pad).max(WIDTH);
    let plot_right = width - legend_pad - 16.0;
    let plot_bottom = TOP + row_height * chart.bars.len().max(1) as f64;
    let height = plot_bottom + BOTTOM;
    let mut out = String::new();
    open_svg(&mut out, width, height, &chart.title);
    let high = chart.bars.iter().map(|b| b.1).fold(0.0, f64::max);
    let ticks = nice_ticks(0.0, high);
    let top_tick = *ticks.last().expect("ticks");
    let map_x = |v: f64| left + v / top_tick.max(f64::MIN_POSITIVE) * (plot_right - left);
    let _ = writeln!(out, r#"<g class="x-axis">"#);
    for t in &ticks {
        let x = map_x(*t);
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{TOP:.1}" x2="{x:.1}" y2="{plot_bottom:.1}" stroke="#dddddd"/>"##
        );
        let _ = writeln!(
            out,
            r#"<text class="tick" x="{x:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"#,
            plot_bottom + 18.0,
            format_number(*t)
        );
    }
    x_axis_label(&mut out, (left + plot_right) / 2.0, height, &chart.x_label);
    let _ = writeln!(out, "</g>");
    let mut kinds: Vec<BarKind> = Vec::new();
    for (i, (label, value, kind)) in chart.bars.iter().enumerate() {
        let y = TOP + i as f64 * row_height;
        let _ = writeln!(
            out,
            r#"<rect class="bar" x="{left:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}" data-name="{}" data-value="{value}"/>"#,
            y + 2.0,
            (map_x(*value) - left).max(0.5),
            row_height - 4.0,
            kind.color(),
            escape(label)
        );
        let _ = writeln!(
            out,
            r#"<text class="tick" x="{:.1}" y="{:.1}" font-size="12" text-anchor="end">{}</text>"#,
            left - 6.0,
            y + row_height - 5.0,
            escape(label)
        );
        if !kinds.contains(kind) {
            kinds.push(*kind);
        }
    }
    kinds.sort_by_key(|k| *k as u8);
    let entries: Vec<(&str, Swatch)> = kinds
        .iter()
        .map(|k| (k.name(), Swatch::Box(k.color())))
        .collect();
    legend(&mut out, plot_right + 18.0, TOP + 10.0, &entries);
    out.push_str("</svg>\n");
    out
}
