//! Line charts: one panel, or a grid of small multiples on shared axes;
//! a line per series with markers and min–max whiskers, and one legend.
//!
//! Invariants: every panel of a chart shares one x and one y scale (small
//! multiples compare by position); a series is drawn with exactly the
//! [`LineStyle`] it is given.

use std::fmt::Write as _;

use super::{
    escape, format_number, grid_y_label, legend, legend_width, nice_ticks, open_panel, open_svg,
    open_x_axis, text_width, x_axis_label, x_tick_label, y_axis, Frame, Heading, LabelTurn, Swatch,
    BOTTOM, HEIGHT, LEFT, MAX_COLUMNS, TOP, WIDTH,
};

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

    pub(super) fn draw(self, out: &mut String, x: f64, y: f64, color: &str, data: &str) {
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

impl LineStyle {
    /// The stroke's dash attribute (with its leading space), or nothing
    /// for a solid line.
    pub(super) fn dash_attr(&self) -> String {
        if self.dash.is_empty() {
            String::new()
        } else {
            format!(r#" stroke-dasharray="{}""#, self.dash)
        }
    }
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
    pub heading: Heading,
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

const PANEL_WIDTH: f64 = 290.0;
const PANEL_HEIGHT: f64 = 230.0;

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
        let faceted =
            chart.panels.len() > 1 || chart.panels.iter().any(|p| !p.heading.title.is_empty());
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
    open_panel(out, frame, &panel.heading);
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
    open_x_axis(out, frame);
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
        let turn = if rotate {
            LabelTurn::Slanted
        } else {
            LabelTurn::Level
        };
        x_tick_label(out, px, ty, label, turn);
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
    let dash = style.dash_attr();
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
    x_axis_label(
        out,
        (label_left + label_right) / 2.0,
        height,
        &chart.x_label,
    );
    if faceted {
        grid_y_label(out, height, &chart.y_label);
    }
}
