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

use std::fmt::Write as _;

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

/// How the x axis maps values.
#[derive(Clone, Debug, PartialEq)]
pub enum XAxis {
    Linear,
    /// Powers-of-two style knobs (coroutines 1..64, compute 1..256 µs).
    Log2,
    /// Non-numeric values, evenly spaced in this order.
    Categories(Vec<String>),
}

/// A point of a line: `(x, y, optional (low, high) whisker)`.
pub type LinePoint = (f64, f64, Option<(f64, f64)>);

/// The shape drawn at each point of a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
    TriangleDown,
}

impl Marker {
    pub const ALL: [Marker; 5] = [
        Marker::Circle,
        Marker::Square,
        Marker::Triangle,
        Marker::Diamond,
        Marker::TriangleDown,
    ];

    fn draw(self, out: &mut String, x: f64, y: f64, color: &str, data: &str) {
        let _ = match self {
            Marker::Circle => writeln!(
                out,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="4" fill="{color}" {data}/>"#
            ),
            Marker::Square => writeln!(
                out,
                r#"<rect x="{:.1}" y="{:.1}" width="7.5" height="7.5" fill="{color}" {data}/>"#,
                x - 3.75,
                y - 3.75
            ),
            Marker::Triangle => writeln!(
                out,
                r#"<polygon points="{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}" fill="{color}" {data}/>"#,
                x,
                y - 5.0,
                x + 4.6,
                y + 3.5,
                x - 4.6,
                y + 3.5
            ),
            Marker::Diamond => writeln!(
                out,
                r#"<polygon points="{:.1},{:.1} {:.1},{:.1} {:.1},{:.1} {:.1},{:.1}" fill="{color}" {data}/>"#,
                x,
                y - 5.0,
                x + 5.0,
                y,
                x,
                y + 5.0,
                x - 5.0,
                y
            ),
            Marker::TriangleDown => writeln!(
                out,
                r#"<polygon points="{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}" fill="{color}" {data}/>"#,
                x,
                y + 5.0,
                x + 4.6,
                y - 3.5,
                x - 4.6,
                y - 3.5
            ),
        };
    }
}

/// How one line is drawn.
#[derive(Clone, Debug, PartialEq)]
pub struct LineStyle {
    /// `#rrggbb`.
    pub color: String,
    /// An SVG `stroke-dasharray`; empty for a solid line.
    pub dash: String,
    pub marker: Marker,
}

/// One line.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub style: LineStyle,
    pub points: Vec<LinePoint>,
}

/// One panel of a line chart: a set of lines on the chart's axes.
#[derive(Clone, Debug)]
pub struct Panel {
    /// Shown above the panel; empty for a chart of one panel.
    pub title: String,
    /// Colour of the title (the panel's protocol's, when it has one).
    pub title_color: Option<String>,
    pub series: Vec<Series>,
}

/// Lines against one x knob, in one panel or a grid of small multiples
/// that share both axes.
#[derive(Clone, Debug)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_axis: XAxis,
    pub panels: Vec<Panel>,
}

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 440.0;
const TOP: f64 = 48.0;
const BOTTOM: f64 = 64.0;
const LEFT: f64 = 86.0;

/// Grid of small multiples: at most this many panels per row.
const MAX_COLUMNS: usize = 4;
const PANEL_WIDTH: f64 = 290.0;
const PANEL_HEIGHT: f64 = 230.0;

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
                let dash = if style.dash.is_empty() {
                    String::new()
                } else {
                    format!(r#" stroke-dasharray="{}""#, style.dash)
                };
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

/// The chart's legend: one entry per series name, in first-seen order.
/// A name drawn in different colours (or dashes, or markers) in different
/// panels — a line per primitive in a panel per protocol — shows that
/// property in neutral grey (solid, circle): the panels' titles carry it.
fn line_legend(chart: &LineChart) -> Vec<(String, LineStyle)> {
    let mut entries: Vec<(String, LineStyle)> = Vec::new();
    for series in chart.panels.iter().flat_map(|p| &p.series) {
        match entries.iter_mut().find(|(n, _)| *n == series.name) {
            None => entries.push((series.name.clone(), series.style.clone())),
            Some((_, style)) => {
                if style.color != series.style.color {
                    style.color = "#555555".into();
                }
                if style.dash != series.style.dash {
                    style.dash = String::new();
                }
                if style.marker != series.style.marker {
                    style.marker = Marker::Circle;
                }
            }
        }
    }
    entries
}

/// A line chart with markers, min–max whiskers and a legend; several
/// panels form a grid of small multiples on shared axes.
pub fn line_chart(chart: &LineChart) -> String {
    let legend_entries = line_legend(chart);
    let names: Vec<&str> = legend_entries.iter().map(|(n, _)| n.as_str()).collect();
    let right_pad = legend_width(&names);
    let y_ticks = line_y_ticks(chart);
    let x = XScale::of(chart);
    let layout = LineLayout::of(chart, &x.ticks, right_pad);
    let mut out = String::new();
    open_svg(&mut out, layout.width, layout.height, &chart.title);
    for (panel, frame) in chart.panels.iter().zip(&layout.frames) {
        line_panel(&mut out, chart, panel, *frame, &y_ticks, &x, &layout);
    }
    line_axis_labels(&mut out, chart, &layout);
    let entries: Vec<(&str, Swatch)> = legend_entries
        .iter()
        .map(|(n, s)| (n.as_str(), Swatch::Line(s)))
        .collect();
    let legend_x = layout.width - right_pad + 4.0;
    legend(&mut out, legend_x, TOP + 10.0, &entries);
    out.push_str("</svg>\n");
    out
}

/// Round y ticks shared by every panel: they cover every point and
/// whisker, and 0.
fn line_y_ticks(chart: &LineChart) -> Vec<f64> {
    let ys: Vec<f64> = chart
        .panels
        .iter()
        .flat_map(|p| &p.series)
        .flat_map(|s| {
            s.points
                .iter()
                .flat_map(|(_, y, w)| [Some(*y), w.map(|w| w.0), w.map(|w| w.1)])
        })
        .flatten()
        .filter(|v| v.is_finite())
        .collect();
    let y_high = ys.iter().copied().fold(0.0, f64::max);
    let y_low = ys.iter().copied().fold(0.0, f64::min);
    nice_ticks(y_low, y_high)
}

/// Where an x value sits on the axis, before the pixel map: its log2 on a
/// [`XAxis::Log2`] axis, else itself (a category's index).
fn axis_position(axis: &XAxis, x: f64) -> f64 {
    match axis {
        XAxis::Log2 => x.max(f64::MIN_POSITIVE).log2(),
        _ => x,
    }
}

/// The x axis every panel of a line chart shares: its range in axis
/// positions (padded), and its labelled ticks.
struct XScale<'a> {
    axis: &'a XAxis,
    low: f64,
    high: f64,
    ticks: Vec<(f64, String)>,
}

impl XScale<'_> {
    fn of(chart: &LineChart) -> XScale<'_> {
        let xs: Vec<f64> = chart
            .panels
            .iter()
            .flat_map(|p| &p.series)
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .collect();
        let transform = |x: f64| axis_position(&chart.x_axis, x);
        let (x_low, x_high) = match &chart.x_axis {
            XAxis::Categories(c) => (-0.5, c.len() as f64 - 0.5),
            _ => {
                let lo = xs
                    .iter()
                    .copied()
                    .map(transform)
                    .fold(f64::INFINITY, f64::min);
                let hi = xs
                    .iter()
                    .copied()
                    .map(transform)
                    .fold(f64::NEG_INFINITY, f64::max);
                if hi > lo {
                    let pad = (hi - lo) * 0.04;
                    (lo - pad, hi + pad)
                } else {
                    (lo - 1.0, hi + 1.0)
                }
            }
        };
        let x_ticks: Vec<(f64, String)> = match &chart.x_axis {
            XAxis::Categories(c) => c
                .iter()
                .enumerate()
                .map(|(i, n)| (i as f64, n.clone()))
                .collect(),
            _ => {
                let mut distinct: Vec<f64> = xs.clone();
                distinct.sort_by(f64::total_cmp);
                distinct.dedup();
                if distinct.len() <= 12 {
                    distinct
                        .into_iter()
                        .map(|x| (x, format_number(x)))
                        .collect()
                } else {
                    nice_ticks(x_low, x_high)
                        .into_iter()
                        .filter(|t| *t >= x_low && *t <= x_high)
                        .map(|t| (t, format_number(t)))
                        .collect()
                }
            }
        };
        XScale {
            axis: &chart.x_axis,
            low: x_low,
            high: x_high,
            ticks: x_ticks,
        }
    }

    /// The pixel column of `x` in `frame`.
    fn pixel(&self, x: f64, frame: Frame) -> f64 {
        frame.left
            + (axis_position(self.axis, x) - self.low) / (self.high - self.low)
                * (frame.right - frame.left)
    }
}

/// Where a line chart's panels go: one frame, or a grid of small multiples
/// (at most [`MAX_COLUMNS`] a row); the page's size, and whether the x
/// labels are turned to fit.
struct LineLayout {
    faceted: bool,
    columns: usize,
    rotate: bool,
    width: f64,
    height: f64,
    /// One per panel, row by row.
    frames: Vec<Frame>,
}

impl LineLayout {
    fn of(chart: &LineChart, x_ticks: &[(f64, String)], right_pad: f64) -> LineLayout {
        let faceted = chart.panels.len() > 1 || chart.panels.iter().any(|p| !p.title.is_empty());
        let panel_count = chart.panels.len().max(1);
        let columns = if faceted {
            ((panel_count as f64).sqrt().ceil() as usize).clamp(1, MAX_COLUMNS)
        } else {
            1
        };
        let rows = panel_count.div_ceil(columns);
        // Frames: one per panel, row by row.
        let (inner_width, inner_height) = if faceted {
            (PANEL_WIDTH - 58.0, PANEL_HEIGHT - 62.0)
        } else {
            (WIDTH - 120.0 - 16.0 - LEFT, HEIGHT - BOTTOM - TOP)
        };
        // Category labels wider than their slot are turned 40° (they then
        // need more room below the axis).
        let slot = inner_width / x_ticks.len().max(1) as f64;
        let widest = x_ticks
            .iter()
            .map(|(_, l)| text_width(l))
            .fold(0.0, f64::max);
        let rotate = widest > slot * 0.9;
        let tick_room = if rotate {
            (widest * 0.65 + 14.0).clamp(30.0, 140.0)
        } else {
            22.0
        };
        let (width, height, frames) = if faceted {
            let grid_left = 44.0;
            let cell_height = PANEL_HEIGHT - 22.0 + tick_room;
            let width = grid_left + PANEL_WIDTH * columns as f64 + right_pad + 8.0;
            let height = TOP + cell_height * rows as f64 + 36.0;
            let frames = (0..panel_count)
                .map(|i| {
                    let (row, column) = (i / columns, i % columns);
                    let left = grid_left + PANEL_WIDTH * column as f64 + 50.0;
                    let top = TOP + cell_height * row as f64 + 26.0;
                    Frame {
                        left,
                        top,
                        right: left + inner_width,
                        bottom: top + inner_height,
                    }
                })
                .collect::<Vec<_>>();
            (width, height, frames)
        } else {
            let width = WIDTH + right_pad - 120.0;
            let height = HEIGHT - 22.0 + tick_room;
            let frame = Frame {
                left: LEFT,
                top: TOP,
                right: width - right_pad - 16.0,
                bottom: HEIGHT - BOTTOM,
            };
            (width, height, vec![frame])
        };
        LineLayout {
            faceted,
            columns,
            rotate,
            width,
            height,
            frames,
        }
    }
}

/// One panel in `frame`: its title, its y axis (labelled only when it is
/// the chart's one panel), its x axis and its series.
fn line_panel(
    out: &mut String,
    chart: &LineChart,
    panel: &Panel,
    frame: Frame,
    y_ticks: &[f64],
    x: &XScale,
    layout: &LineLayout,
) {
    let _ = writeln!(
        out,
        r#"<g class="panel" data-name="{}">"#,
        escape(&panel.title)
    );
    if !panel.title.is_empty() {
        let _ = writeln!(
            out,
            r##"<text class="panel-title" x="{:.1}" y="{:.1}" font-size="13" font-weight="bold" text-anchor="middle" fill="{}">{}</text>"##,
            (frame.left + frame.right) / 2.0,
            frame.top - 8.0,
            panel.title_color.as_deref().unwrap_or("#222222"),
            escape(&panel.title)
        );
    }
    let y_label = if layout.faceted {
        ""
    } else {
        chart.y_label.as_str()
    };
    let map_y = y_axis(out, y_ticks, frame, y_label, 18.0);
    let map_x = |v: f64| x.pixel(v, frame);
    line_x_axis(out, frame, &x.ticks, map_x, layout.rotate);
    for series in &panel.series {
        line_series(out, series, map_x, &map_y);
    }
    let _ = writeln!(out, "</g>");
}

/// A panel's x axis: the line, a tick per value and its label (turned when
/// `rotate`).
fn line_x_axis(
    out: &mut String,
    frame: Frame,
    x_ticks: &[(f64, String)],
    map_x: impl Fn(f64) -> f64,
    rotate: bool,
) {
    let _ = writeln!(out, r#"<g class="x-axis">"#);
    let _ = writeln!(
        out,
        r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#333333"/>"##,
        frame.left, frame.bottom, frame.right, frame.bottom
    );
    // A level label that would touch the one before it is left out
    // (its tick stays): 0.8 and 0.9 in a 230-px panel.
    let mut last_right = f64::NEG_INFINITY;
    for (x, label) in x_ticks {
        let px = map_x(*x);
        let _ = writeln!(
            out,
            r##"<line x1="{px:.1}" y1="{:.1}" x2="{px:.1}" y2="{:.1}" stroke="#333333"/>"##,
            frame.bottom,
            frame.bottom + 5.0
        );
        let ty = frame.bottom + 18.0;
        let half = text_width(label) / 2.0;
        if !rotate && px - half < last_right + 4.0 {
            continue;
        }
        last_right = px + half;
        x_tick_label(out, px, ty, label, rotate);
    }
    let _ = writeln!(out, "</g>");
}

/// One series: its line through the points in x order, then each point's
/// whisker and marker.
fn line_series(
    out: &mut String,
    series: &Series,
    map_x: impl Fn(f64) -> f64,
    map_y: impl Fn(f64) -> f64,
) {
    let style = &series.style;
    let color = style.color.as_str();
    let dash = if style.dash.is_empty() {
        String::new()
    } else {
        format!(r#" stroke-dasharray="{}""#, style.dash)
    };
    let _ = writeln!(
        out,
        r#"<g class="series" data-name="{}" data-color="{color}">"#,
        escape(&series.name)
    );
    let mut points: Vec<LinePoint> = series.points.clone();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let path: Vec<String> = points
        .iter()
        .map(|(x, y, _)| format!("{:.1},{:.1}", map_x(*x), map_y(*y)))
        .collect();
    let _ = writeln!(
        out,
        r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2.5"{dash}/>"#,
        path.join(" ")
    );
    for (x, y, whisker) in &points {
        let (px, py) = (map_x(*x), map_y(*y));
        if let Some((lo, hi)) = whisker {
            if hi > lo {
                let _ = writeln!(
                    out,
                    r#"<line class="whisker" x1="{px:.1}" y1="{:.1}" x2="{px:.1}" y2="{:.1}" stroke="{color}" stroke-width="1.5"/>"#,
                    map_y(*lo),
                    map_y(*hi)
                );
            }
        }
        style
            .marker
            .draw(out, px, py, color, &format!(r#"data-x="{x}" data-y="{y}""#));
    }
    let _ = writeln!(out, "</g>");
}

/// The axis labels: under and beside the whole grid when faceted, under
/// and beside the one panel otherwise.
fn line_axis_labels(out: &mut String, chart: &LineChart, layout: &LineLayout) {
    let LineLayout {
        faceted,
        columns,
        height,
        ref frames,
        ..
    } = *layout;
    let (label_left, label_right) = if faceted {
        (frames[0].left, frames[columns.min(frames.len()) - 1].right)
    } else {
        (frames[0].left, frames[0].right)
    };
    let _ = writeln!(
        out,
        r#"<text class="axis-label" x="{:.1}" y="{:.1}" font-size="13" text-anchor="middle">{}</text>"#,
        (label_left + label_right) / 2.0,
        height - 14.0,
        escape(&chart.x_label)
    );
    if faceted {
        let mid = (TOP + height - 36.0) / 2.0;
        let _ = writeln!(
            out,
            r#"<text class="axis-label" x="16" y="{mid:.1}" font-size="13" text-anchor="middle" transform="rotate(-90 16 {mid:.1})">{}</text>"#,
            escape(&chart.y_label)
        );
    }
}

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
    let _ = writeln!(
        out,
        r#"<text class="axis-label" x="{:.1}" y="{:.1}" font-size="13" text-anchor="middle">{}</text>"#,
        (left + plot_right) / 2.0,
        height - 14.0,
        escape(&chart.x_label)
    );
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

/// One category label under the x axis at `(x, y)`: turned 40° when the
/// labels would overlap side by side.
fn x_tick_label(out: &mut String, x: f64, y: f64, label: &str, rotate: bool) {
    if rotate {
        let _ = writeln!(
            out,
            r#"<text class="tick" x="{x:.1}" y="{y:.1}" font-size="11" text-anchor="end" transform="rotate(-40 {x:.1} {y:.1})">{}</text>"#,
            escape(label)
        );
    } else {
        let _ = writeln!(
            out,
            r#"<text class="tick" x="{x:.1}" y="{y:.1}" font-size="12" text-anchor="middle">{}</text>"#,
            escape(label)
        );
    }
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
