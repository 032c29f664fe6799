//! SVG charts, written by hand: line charts with axes, ticks, unit labels
//! and a legend, one panel or a grid of small multiples; stacked bars;
//! ranked horizontal bars. Sized for print (720 px wide for one panel,
//! 12–16 px sans-serif text).
//!
//! Hand-written because the figures are a few hundred lines of plain
//! markup whose structure tests and scripts read back, and a plotting
//! crate would bring its own layout, fonts and backends for that; PNG
//! copies are rendered from this same markup (`plot`'s module doc says
//! with what and why).
//!
//! The markup is regular so scripts and tests can read a figure back:
//! every line panel is a `<g class="panel" data-name="…">` (one, with an
//! empty name, when the chart is not faceted), every line series inside it
//! a `<g class="series" data-name="…" data-color="…">` whose markers carry
//! `data-x`/`data-y`, every stack layer a `<g class="layer" data-name="…">`,
//! every ranked bar a `<rect class="bar" data-name="…" data-value="…">`,
//! and the legend a `<g class="legend">` of `<text>` entries.
//!
//! Invariants: every panel of a chart shares one x and one y scale (small
//! multiples compare by position); a series is drawn with exactly the
//! [`LineStyle`] it is given, so a colour means the same thing in every
//! panel and figure that gives it.
//!
//! This file holds what every chart shares (palette, ticks, numbers, the
//! frame, the legend, the y axis); `line` draws the line charts and `bars`
//! the stacked and ranked bars.

mod bars;
mod line;

use std::fmt::Write as _;

pub use bars::{ranked_bars, stacked_bars, BarKind, BarPanel, RankedBars, StackedBars};
pub use line::{line_chart, LineChart, LinePoint, LineStyle, Marker, Panel, Series, XAxis};

/// Okabe–Ito's colour-blind-safe palette (yellow dropped: unreadable on
/// white), then Paul Tol's muted wine, indigo, olive and rose, and grey:
/// twelve hues that stay apart for the common colour-vision deficiencies
/// (the last few only in lightness as well as hue, so lines also differ by
/// dash and marker where it matters).
pub const PALETTE: [&str; 12] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#882255",
    "#332288", "#999933", "#CC6677", "#7F7F7F",
];

/// Dash patterns, told apart at 2.5 px stroke width: solid, dashed,
/// dotted, dash-dot, long dash, dash-dot-dot.
pub const DASHES: [&str; 6] = ["", "7 4", "2 3", "9 3 2 3", "14 4", "8 3 2 3 2 3"];

pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// About five round tick values covering `[low, high]`.
pub fn nice_ticks(low: f64, high: f64) -> Vec<f64> {
    let (low, high) = if (high - low).abs() < f64::EPSILON * high.abs().max(1.0) {
        if high == 0.0 {
            (0.0, 1.0)
        } else {
            (low.min(0.0), high.max(0.0) * 1.1 + f64::EPSILON)
        }
    } else {
        (low, high)
    };
    let raw = (high - low) / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude);
    let first = (low / step).floor() * step;
    let mut ticks = Vec::new();
    let mut t = first;
    while t < high + step * 0.999 {
        ticks.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
        if ticks.len() > 20 {
            break;
        }
    }
    ticks
}

/// `1.5M`, `250k`, `12`, `0.25`.
pub fn format_number(value: f64) -> String {
    let a = value.abs();
    let trimmed = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if a >= 1e9 {
        trimmed(format!("{:.2}", value / 1e9)) + "G"
    } else if a >= 1e6 {
        trimmed(format!("{:.2}", value / 1e6)) + "M"
    } else if a >= 1e4 {
        trimmed(format!("{:.1}", value / 1e3)) + "k"
    } else if a >= 100.0 || a == 0.0 {
        format!("{value:.0}")
    } else if a >= 1.0 {
        trimmed(format!("{value:.2}"))
    } else {
        trimmed(format!("{value:.3}"))
    }
}

const WIDTH: f64 = 720.0;
/// No figure is wider than this: a page shows it scaled to about 1,100 px,
/// and wider strips (a bar per point of a large sweep) become unreadable
/// there. Charts that would grow past it become small multiples or narrow
/// their bars.
pub const MAX_WIDTH: f64 = 1_900.0;
/// Grid of small multiples: at most this many panels per row.
const MAX_COLUMNS: usize = 4;
const HEIGHT: f64 = 440.0;
const TOP: f64 = 48.0;
const BOTTOM: f64 = 64.0;
const LEFT: f64 = 86.0;

/// The plot area of one panel, in pixels.
#[derive(Clone, Copy, Debug)]
struct Frame {
    left: f64,
    top: f64,
    right: f64,
    bottom: f64,
}

fn legend_width(names: &[&str]) -> f64 {
    let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    (longest as f64 * 7.2 + 44.0).clamp(120.0, 340.0)
}

fn open_svg(out: &mut String, width: f64, height: f64, title: &str) {
    let _ = writeln!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">"##
    );
    let _ = writeln!(
        out,
        r##"<rect width="100%" height="100%" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        out,
        r##"<text class="title" x="{:.1}" y="28" font-size="16" font-weight="bold" text-anchor="middle">{}</text>"##,
        width / 2.0,
        escape(title)
    );
}

/// A legend entry: a filled box, or a line sample with its dash and marker.
enum Swatch<'a> {
    Box(&'a str),
    Line(&'a LineStyle),
}

fn legend(out: &mut String, x: f64, y: f64, entries: &[(&str, Swatch)]) {
    let _ = writeln!(out, r#"<g class="legend">"#);
    for (i, (name, swatch)) in entries.iter().enumerate() {
        let ey = y + i as f64 * 20.0;
        match swatch {
            Swatch::Line(style) => {
                let dash = style.dash_attr();
                let _ = writeln!(
                    out,
                    r#"<line x1="{x:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{}" stroke-width="2.5"{dash}/>"#,
                    ey - 4.0,
                    x + 26.0,
                    ey - 4.0,
                    style.color
                );
                style.marker.draw(out, x + 13.0, ey - 4.0, &style.color, "");
            }
            Swatch::Box(color) => {
                let _ = writeln!(
                    out,
                    r#"<rect x="{x:.1}" y="{:.1}" width="16" height="12" fill="{color}"/>"#,
                    ey - 11.0
                );
            }
        }
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{ey:.1}" font-size="12">{}</text>"#,
            x + 32.0,
            escape(name)
        );
    }
    let _ = writeln!(out, "</g>");
}

/// Y grid lines and tick labels in `frame` (and the axis label at
/// `label_x`, unless empty), returning the value→pixel map.
fn y_axis(
    out: &mut String,
    ticks: &[f64],
    frame: Frame,
    label: &str,
    label_x: f64,
) -> impl Fn(f64) -> f64 {
    let (low, high) = (ticks[0], *ticks.last().expect("ticks"));
    let span = (high - low).max(f64::MIN_POSITIVE);
    let Frame {
        left,
        top,
        right,
        bottom,
    } = frame;
    let map = move |v: f64| bottom - (v - low) / span * (bottom - top);
    let _ = writeln!(out, r#"<g class="y-axis">"#);
    for &t in ticks {
        let y = map(t);
        let _ = writeln!(
            out,
            r##"<line x1="{left:.1}" y1="{y:.1}" x2="{right:.1}" y2="{y:.1}" stroke="#dddddd"/>"##
        );
        let _ = writeln!(
            out,
            r#"<text class="tick" x="{:.1}" y="{:.1}" font-size="12" text-anchor="end">{}</text>"#,
            left - 6.0,
            y + 4.0,
            format_number(t)
        );
    }
    let _ = writeln!(
        out,
        r##"<line x1="{left:.1}" y1="{top:.1}" x2="{left:.1}" y2="{bottom:.1}" stroke="#333333"/>"##
    );
    if !label.is_empty() {
        let mid = (top + bottom) / 2.0;
        let _ = writeln!(
            out,
            r#"<text class="axis-label" x="{label_x:.1}" y="{mid:.1}" font-size="13" text-anchor="middle" transform="rotate(-90 {label_x:.1} {mid:.1})">{}</text>"#,
            escape(label)
        );
    }
    let _ = writeln!(out, "</g>");
    map
}

/// Approximate width of `text` at 12 px in DejaVu Sans.
fn text_width(text: &str) -> f64 {
    text.chars().count() as f64 * 7.0
}

/// The x axis's label, centred at `center_x` near the bottom of a chart
/// `height` high.
fn x_axis_label(out: &mut String, center_x: f64, height: f64, label: &str) {
    let _ = writeln!(
        out,
        r#"<text class="axis-label" x="{center_x:.1}" y="{:.1}" font-size="13" text-anchor="middle">{}</text>"#,
        height - 14.0,
        escape(label)
    );
}

/// What names one panel of small multiples, above it: the facet knob's
/// value (`protocol=occ`), in the protocol's colour when it names one.
/// Empty for a chart's only panel.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Heading {
    pub title: String,
    /// `#rrggbb`; near-black when `None`.
    pub color: Option<String>,
}

/// Opens one panel, `<g class="panel" data-name="TITLE">` (the caller
/// closes it), with its heading centred above `frame`; an untitled panel,
/// a chart's only one, gets none.
fn open_panel(out: &mut String, frame: Frame, heading: &Heading) {
    let Heading { title, color } = heading;
    let _ = writeln!(out, r#"<g class="panel" data-name="{}">"#, escape(title));
    if !title.is_empty() {
        let _ = writeln!(
            out,
            r##"<text class="panel-title" x="{:.1}" y="{:.1}" font-size="13" font-weight="bold" text-anchor="middle" fill="{}">{}</text>"##,
            (frame.left + frame.right) / 2.0,
            frame.top - 8.0,
            color.as_deref().unwrap_or("#222222"),
            escape(title)
        );
    }
}

/// Opens a panel's x axis, `<g class="x-axis">` (the caller adds the
/// ticks and labels and closes it), with its line along `frame`'s bottom.
fn open_x_axis(out: &mut String, frame: Frame) {
    let _ = writeln!(out, r#"<g class="x-axis">"#);
    let _ = writeln!(
        out,
        r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#333333"/>"##,
        frame.left, frame.bottom, frame.right, frame.bottom
    );
}

/// The one y label of a grid of small multiples `height` px high: turned,
/// left of the grid, centred on the panels (between the title and the x
/// label).
fn grid_y_label(out: &mut String, height: f64, label: &str) {
    let mid = (TOP + height - 36.0) / 2.0;
    let _ = writeln!(
        out,
        r#"<text class="axis-label" x="16" y="{mid:.1}" font-size="13" text-anchor="middle" transform="rotate(-90 16 {mid:.1})">{}</text>"#,
        escape(label)
    );
}

/// How a category label under the x axis is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LabelTurn {
    /// Level, centred under its tick: the labels fit side by side.
    Level,
    /// Turned 40°, ending at its tick: it reaches left, under the labels
    /// before it (a single panel, with room kept on the left).
    Slanted,
    /// Turned 90°, ending at its tick: it reaches only down, so it never
    /// runs into a neighbouring panel of small multiples.
    Vertical,
}

/// One category label under the x axis at `(x, y)`, set as `turn` says.
fn x_tick_label(out: &mut String, x: f64, y: f64, label: &str, turn: LabelTurn) {
    let angle = match turn {
        LabelTurn::Level => {
            let _ = writeln!(
                out,
                r#"<text class="tick" x="{x:.1}" y="{y:.1}" font-size="12" text-anchor="middle">{}</text>"#,
                escape(label)
            );
            return;
        }
        LabelTurn::Slanted => -40,
        LabelTurn::Vertical => -90,
    };
    // A vertical label starts half its height right of the tick, so that
    // its middle, not its baseline, sits under the tick.
    let x = if turn == LabelTurn::Vertical {
        x + 4.0
    } else {
        x
    };
    let _ = writeln!(
        out,
        r#"<text class="tick" x="{x:.1}" y="{y:.1}" font-size="11" text-anchor="end" transform="rotate({angle} {x:.1} {y:.1})">{}</text>"#,
        escape(label)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(
            nice_ticks(0.0, 95.0),
            vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
        );
        let t = nice_ticks(0.0, 1.234e6);
        assert!(
            t[0] == 0.0 && *t.last().unwrap() >= 1.234e6 && t.len() <= 8,
            "{t:?}"
        );
        assert_eq!(
            nice_ticks(0.0, 0.0),
            vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]
        );
        assert_eq!(format_number(1_500_000.0), "1.5M");
        assert_eq!(format_number(250_000.0), "250k");
        assert_eq!(format_number(0.25), "0.25");
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
