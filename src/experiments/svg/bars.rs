//! Bar charts: stacked vertical bars (one layer per component, optionally
//! normalised to 100 %), and ranked horizontal bars, best first.

use std::fmt::Write as _;

use super::{
    escape, format_number, grid_y_label, legend, legend_width, nice_ticks, open_panel, open_svg,
    open_x_axis, x_axis_label, x_tick_label, y_axis, Frame, Heading, LabelTurn, Swatch, BOTTOM,
    HEIGHT, LEFT, MAX_COLUMNS, MAX_WIDTH, PALETTE, TOP, WIDTH,
};

/// Stacked vertical bars: one bar per category, one layer per component;
/// in one panel, or in small multiples that share the y axis.
#[derive(Clone, Debug)]
pub struct StackedBars {
    pub title: String,
    pub y_label: String,
    /// Under the bars: what tells the bars of a panel apart (empty: none).
    pub x_label: String,
    pub bars: Vec<String>,
    /// `(layer name, value per bar)`.
    pub layers: Vec<(String, Vec<f64>)>,
    /// Scale each bar to 100 %.
    pub normalize: bool,
    /// Small multiples: each panel and the bars it holds. Empty: one panel
    /// of every bar.
    pub panels: Vec<BarPanel>,
}

/// One panel of stacked bars: its heading and the bars it holds, as
/// indices into [`StackedBars::bars`] in drawing order.
#[derive(Clone, Debug)]
pub struct BarPanel {
    pub heading: Heading,
    pub bars: Vec<usize>,
}

/// Widest a bar is drawn, px.
const MAX_BAR_WIDTH: f64 = 60.0;
/// A single panel's bar slot when there is room, px.
const SINGLE_SLOT: f64 = 46.0;
/// A small multiple's bar slot when there is room, px.
const PANEL_SLOT: f64 = 26.0;
/// Closest two turned labels may sit (their baselines' spacing), px: more
/// crowded, only every few bars is labelled.
const MIN_LABEL_SPACING: f64 = 13.0;
/// A small multiple's plot area height, px.
const PANEL_PLOT_HEIGHT: f64 = 170.0;
/// Room left of a small multiple's plot for its tick labels, px.
const PANEL_LEFT: f64 = 50.0;
/// Room right of a small multiple's plot, before the next panel, px.
const PANEL_GAP: f64 = 18.0;
/// Left of the grid of small multiples: the shared y axis label, px.
const GRID_LEFT: f64 = 44.0;
/// Width of a character of an 11-px label, px (DejaVu Sans, on average).
const SMALL_CHAR: f64 = 6.4;

pub fn stacked_bars(chart: &StackedBars) -> String {
    if chart.panels.is_empty() {
        single_stacked_bars(chart)
    } else {
        faceted_stacked_bars(chart)
    }
}

/// The chart's bars' heights: each layer's value, scaled to the bar's
/// total when the chart is normalised (negative values drawn as 0).
struct Stacks<'a> {
    chart: &'a StackedBars,
    totals: Vec<f64>,
}

impl<'a> Stacks<'a> {
    fn of(chart: &'a StackedBars) -> Stacks<'a> {
        let totals = (0..chart.bars.len())
            .map(|b| {
                chart
                    .layers
                    .iter()
                    .map(|(_, v)| v.get(b).copied().unwrap_or(0.0).max(0.0))
                    .sum()
            })
            .collect();
        Stacks { chart, totals }
    }

    fn height(&self, bar: usize, value: f64) -> f64 {
        let value = value.max(0.0);
        if self.chart.normalize && self.totals[bar] > 0.0 {
            100.0 * value / self.totals[bar]
        } else {
            value
        }
    }

    /// Round y ticks shared by every panel.
    fn ticks(&self) -> Vec<f64> {
        let high = if self.chart.normalize {
            100.0
        } else {
            self.totals.iter().copied().fold(0.0, f64::max)
        };
        nice_ticks(0.0, high)
    }

    /// One `<g class="layer">` per layer with a rect per bar of `members`,
    /// the `i`-th centred at `center(i)`; `prefix` starts each tooltip.
    fn draw(
        &self,
        out: &mut String,
        members: &[usize],
        center: impl Fn(usize) -> f64,
        bar_width: f64,
        map_y: impl Fn(f64) -> f64,
        prefix: &str,
    ) {
        let chart = self.chart;
        for (l, (name, values)) in chart.layers.iter().enumerate() {
            let color = PALETTE[l % PALETTE.len()];
            let _ = writeln!(out, r#"<g class="layer" data-name="{}">"#, escape(name));
            for (i, &b) in members.iter().enumerate() {
                let value = values.get(b).copied().unwrap_or(0.0);
                let below: f64 = chart.layers[..l]
                    .iter()
                    .map(|(_, v)| self.height(b, v.get(b).copied().unwrap_or(0.0)))
                    .sum();
                let (y_top, y_base) = (map_y(below + self.height(b, value)), map_y(below));
                let _ = writeln!(
                    out,
                    r#"<rect x="{:.1}" y="{y_top:.1}" width="{bar_width:.1}" height="{:.1}" fill="{color}" data-bar="{}" data-value="{value}"><title>{prefix}{}: {}: {}</title></rect>"#,
                    center(i) - bar_width / 2.0,
                    (y_base - y_top).max(0.0),
                    escape(&chart.bars[b]),
                    escape(&chart.bars[b]),
                    escape(name),
                    format_number(value)
                );
            }
            let _ = writeln!(out, "</g>");
        }
    }

    /// The legend: a box per layer, in the layers' colours.
    fn legend(&self, out: &mut String, x: f64) {
        let entries: Vec<(&str, Swatch)> = self
            .chart
            .layers
            .iter()
            .enumerate()
            .map(|(l, (name, _))| (name.as_str(), Swatch::Box(PALETTE[l % PALETTE.len()])))
            .collect();
        legend(out, x, TOP + 10.0, &entries);
    }
}

/// Every how many bars a label fits, turned, in slots `slot` px wide.
fn label_step(slot: f64) -> usize {
    (MIN_LABEL_SPACING / slot.max(f64::MIN_POSITIVE))
        .ceil()
        .max(1.0) as usize
}

/// The x axis under bars centred at `center(i)`: its line from `frame`'s
/// left to right, and the labels (every `step`-th one) set as `turn` says.
fn bar_labels(
    out: &mut String,
    frame: Frame,
    labels: &[&str],
    center: impl Fn(usize) -> f64,
    turn: LabelTurn,
    step: usize,
) {
    open_x_axis(out, frame);
    for (i, label) in labels.iter().enumerate().step_by(step.max(1)) {
        let y = frame.bottom
            + if turn == LabelTurn::Vertical {
                8.0
            } else {
                16.0
            };
        x_tick_label(out, center(i), y, label, turn);
    }
    let _ = writeln!(out, "</g>");
}

/// One panel of every bar, turned labels below; bars narrow (and only
/// every few is labelled) rather than the chart growing past
/// [`MAX_WIDTH`].
fn single_stacked_bars(chart: &StackedBars) -> String {
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
    let fixed = left + right_pad + 30.0;
    let slot = SINGLE_SLOT.min((MAX_WIDTH - fixed) / bar_count as f64);
    let width = (fixed + bar_count as f64 * slot).max(WIDTH + right_pad - 120.0);
    let plot_right = width - right_pad - 16.0;
    let stacks = Stacks::of(chart);
    let mut out = String::new();
    open_svg(&mut out, width, height, &chart.title);
    let plot_bottom = HEIGHT - BOTTOM;
    let frame = Frame {
        left,
        top: TOP,
        right: plot_right,
        bottom: plot_bottom,
    };
    let map_y = y_axis(&mut out, &stacks.ticks(), frame, &chart.y_label, 18.0);
    let slot = (plot_right - left) / bar_count as f64;
    let bar_width = (slot * 0.7).min(MAX_BAR_WIDTH);
    let center = |b: usize| left + slot * (b as f64 + 0.5);
    let every: Vec<usize> = (0..chart.bars.len()).collect();
    stacks.draw(&mut out, &every, center, bar_width, &map_y, "");
    let labels: Vec<&str> = chart.bars.iter().map(String::as_str).collect();
    let (turn, step) = if rotate {
        (LabelTurn::Slanted, label_step(slot * 0.64))
    } else {
        (LabelTurn::Level, 1)
    };
    bar_labels(&mut out, frame, &labels, center, turn, step);
    if !chart.x_label.is_empty() {
        x_axis_label(&mut out, (left + plot_right) / 2.0, height, &chart.x_label);
    }
    stacks.legend(&mut out, plot_right + 18.0);
    out.push_str("</svg>\n");
    out
}

/// `label` cut to `chars` characters, an ellipsis marking the cut.
fn shortened(label: &str, chars: usize) -> String {
    if label.chars().count() <= chars {
        label.to_string()
    } else {
        let kept: String = label.chars().take(chars.saturating_sub(1)).collect();
        format!("{kept}…")
    }
}

/// Where the small multiples of stacked bars go: the bar slot, the
/// columns of the grid and each panel's frame. As many columns as a square
/// grid has (at most [`MAX_COLUMNS`]) while the chart stays within
/// [`MAX_WIDTH`]; in one column, narrower bars.
struct BarGrid {
    slot: f64,
    columns: usize,
    cell_width: f64,
    cell_height: f64,
    turn: LabelTurn,
    /// Most characters a label keeps.
    label_chars: usize,
    width: f64,
    height: f64,
}

impl BarGrid {
    fn of(chart: &StackedBars, right_pad: f64) -> BarGrid {
        let most = chart
            .panels
            .iter()
            .map(|p| p.bars.len())
            .max()
            .unwrap_or(1)
            .max(1) as f64;
        let fixed = GRID_LEFT + right_pad + 8.0;
        let cell = |slot: f64| PANEL_LEFT + (most * slot).max(120.0) + PANEL_GAP;
        let panel_count = chart.panels.len().max(1);
        let mut columns = ((panel_count as f64).sqrt().ceil() as usize).clamp(1, MAX_COLUMNS);
        while columns > 1 && fixed + columns as f64 * cell(PANEL_SLOT) > MAX_WIDTH {
            columns -= 1;
        }
        let slot = PANEL_SLOT.min((MAX_WIDTH - fixed - PANEL_LEFT - PANEL_GAP) / most);
        let widest = chart
            .panels
            .iter()
            .flat_map(|p| &p.bars)
            .map(|&b| chart.bars[b].chars().count())
            .max()
            .unwrap_or(0);
        let turn = if widest as f64 * SMALL_CHAR > slot * 0.9 {
            LabelTurn::Vertical
        } else {
            LabelTurn::Level
        };
        // Turned labels longer than 24 characters are cut: the tooltips
        // of the bars keep them whole.
        let label_chars = widest.min(24);
        let tick_room = match turn {
            LabelTurn::Vertical => label_chars as f64 * SMALL_CHAR + 14.0,
            _ => 24.0,
        };
        let cell_height = 26.0 + PANEL_PLOT_HEIGHT + tick_room;
        let rows = panel_count.div_ceil(columns);
        let cell_width = cell(slot);
        BarGrid {
            slot,
            columns,
            cell_width,
            cell_height,
            turn,
            label_chars,
            width: fixed + columns as f64 * cell_width,
            height: TOP + cell_height * rows as f64 + 36.0,
        }
    }

    /// The plot area of the `i`-th panel, row by row.
    fn frame(&self, i: usize) -> Frame {
        let (row, column) = (i / self.columns, i % self.columns);
        let left = GRID_LEFT + self.cell_width * column as f64 + PANEL_LEFT;
        let top = TOP + self.cell_height * row as f64 + 26.0;
        Frame {
            left,
            top,
            right: left + self.cell_width - PANEL_LEFT - PANEL_GAP,
            bottom: top + PANEL_PLOT_HEIGHT,
        }
    }
}

/// Small multiples of stacked bars: a panel per [`BarPanel`] on one y
/// scale, its title above it, its bars' labels turned below it, the y
/// label and the x label once for the grid, and one legend.
fn faceted_stacked_bars(chart: &StackedBars) -> String {
    let names: Vec<&str> = chart.layers.iter().map(|(n, _)| n.as_str()).collect();
    let right_pad = legend_width(&names);
    let grid = BarGrid::of(chart, right_pad);
    let stacks = Stacks::of(chart);
    let ticks = stacks.ticks();
    let mut out = String::new();
    open_svg(&mut out, grid.width, grid.height, &chart.title);
    for (i, panel) in chart.panels.iter().enumerate() {
        let frame = grid.frame(i);
        open_panel(&mut out, frame, &panel.heading);
        let map_y = y_axis(&mut out, &ticks, frame, "", 0.0);
        let slot = grid.slot;
        let center = |i: usize| frame.left + slot * (i as f64 + 0.5);
        let bar_width = (slot * 0.7).min(MAX_BAR_WIDTH);
        let prefix = escape(&format!("{} ", panel.heading.title));
        stacks.draw(&mut out, &panel.bars, center, bar_width, &map_y, &prefix);
        let labels: Vec<String> = panel
            .bars
            .iter()
            .map(|&b| shortened(&chart.bars[b], grid.label_chars))
            .collect();
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        bar_labels(
            &mut out,
            frame,
            &labels,
            center,
            grid.turn,
            label_step(slot),
        );
        let _ = writeln!(out, "</g>");
    }
    let last_column = grid.frame(grid.columns.min(chart.panels.len()).max(1) - 1);
    x_axis_label(
        &mut out,
        (grid.frame(0).left + last_column.right) / 2.0,
        grid.height,
        &chart.x_label,
    );
    grid_y_label(&mut out, grid.height, &chart.y_label);
    stacks.legend(&mut out, grid.width - right_pad + 4.0);
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
