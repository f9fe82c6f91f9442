//! Where each rank's step time goes, as Holistic Trace Analysis draws its temporal
//! breakdown: one horizontal stacked bar per trial and rank, compute | exposed
//! communication | idle in ms per step, with the communication hidden behind compute
//! hatched inside the compute segment; a panel per network and data set, each on its own
//! scale, and beside each bar the exposed share of the step and the overlapped share of
//! the communication.

use std::path::PathBuf;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::draw::axes::{axis_top, draw_y_categories, fmt_tick};
use crate::draw::hatch::hatch_rect;
use crate::draw::legend::{with_legend_below, LegendEntry, Swatch};
use crate::draw::title::with_title;
use crate::figures::check_non_negative;
use crate::plotted::outcome_mark;
use crate::render::{render, DrawError, Figure};
use crate::style::{font, is_light, shade, AXIS_PX, GRID, INK, NOTE_PX, TICK_PX};
use crate::tables::three_significant;
use crate::{FigureTarget, ReportError, StrategySeries};
use stratlab_results::Outcome;

const FIGURE: &str = "step_breakdown";
/// Pixels per bar row; the canvas height [`fitting_height_px`] gives keeps labels apart.
const ROW_PX: u32 = 46;
/// Pixels a panel needs besides its rows: caption, x axis labels and description, margins.
const PANEL_PX: u32 = 130;

/// One rank of one trial: its mean counted step split into segments.
#[derive(Debug, Clone, PartialEq)]
pub struct StepBreakdownBar {
    /// Network name; with the data set, the panel.
    pub network: String,
    /// Data set name (`cifar10:synthetic` for synthetic data).
    pub dataset: String,
    /// The strategy (with what it computed in, where that was not the default).
    pub series: StrategySeries,
    /// Worker count W.
    pub workers: u32,
    /// Samples per worker per step; shown when a panel holds several.
    pub batch_size: u32,
    /// Repeat number, from 0; shown when a panel holds repeats.
    pub repeat: i64,
    /// The rank, from 0.
    pub rank: u32,
    /// How the trial ended, when not `ok`: its bar is what it recorded before that.
    pub failure: Option<Outcome>,
    /// The mean counted step; `None` when no step was counted after warm-up.
    pub per_step: Option<StepSegments>,
}

/// Seconds per step of each part; compute + exposed communication + idle is the step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepSegments {
    /// Computing, overlapped communication included.
    pub compute_s: f64,
    /// Communication while nothing was computed.
    pub exposed_communication_s: f64,
    /// Communication behind computation (part of `compute_s` on the clock; at most it).
    pub overlapped_communication_s: f64,
    /// Neither computing nor communicating.
    pub idle_s: f64,
}

impl StepSegments {
    fn wall_s(&self) -> f64 {
        self.compute_s + self.exposed_communication_s + self.idle_s
    }
}

/// Draws the breakdown bars into `target`; returns the files. Give the target a height
/// from [`fitting_height_px`] so every row stays readable.
pub fn step_breakdown(bars: &[StepBreakdownBar], target: &FigureTarget) -> Result<Vec<PathBuf>, ReportError> {
    if bars.is_empty() {
        return Err(ReportError::Empty { figure: FIGURE });
    }
    for (i, bar) in bars.iter().enumerate() {
        let Some(step) = &bar.per_step else { continue };
        let field = |name: &str| format!("bars[{i}].per_step.{name}");
        check_non_negative(FIGURE, field("compute_s"), step.compute_s)?;
        check_non_negative(FIGURE, field("exposed_communication_s"), step.exposed_communication_s)?;
        check_non_negative(FIGURE, field("overlapped_communication_s"), step.overlapped_communication_s)?;
        check_non_negative(FIGURE, field("idle_s"), step.idle_s)?;
    }
    render(&Breakdown { bars }, target)
}

/// A canvas height (pixels, at least 600) that gives each bar row and panel of `bars` room.
pub(crate) fn fitting_height_px(bars: &[StepBreakdownBar]) -> u32 {
    let panels = panels(bars).len() as u32;
    (170 + panels * PANEL_PX + bars.len() as u32 * ROW_PX).max(600)
}

/// The (network, data set) panels in order of first appearance, each with its bars.
fn panels(bars: &[StepBreakdownBar]) -> Vec<((String, String), Vec<&StepBreakdownBar>)> {
    let mut panels: Vec<((String, String), Vec<&StepBreakdownBar>)> = Vec::new();
    for bar in bars {
        let case = (bar.network.clone(), bar.dataset.clone());
        match panels.iter_mut().find(|(c, _)| *c == case) {
            Some((_, members)) => members.push(bar),
            None => panels.push((case, vec![bar])),
        }
    }
    panels
}

/// Fills and hatch of the segments: Tol's muted teal and rose, never a strategy colour.
struct Look {
    compute: RGBColor,
    overlapped: RGBColor,
    overlapped_hatch: RGBColor,
    exposed: RGBColor,
    idle: RGBColor,
}

const LOOK: Look = Look {
    compute: RGBColor(68, 170, 153),
    overlapped: RGBColor(151, 209, 199),
    overlapped_hatch: RGBColor(136, 34, 85),
    exposed: RGBColor(204, 102, 119),
    idle: RGBColor(225, 225, 225),
};

fn legend() -> Vec<LegendEntry> {
    vec![
        LegendEntry::new(Swatch::Fill(LOOK.compute), "compute"),
        LegendEntry::new(
            Swatch::Hatched { fill: LOOK.overlapped, hatch: LOOK.overlapped_hatch },
            "communication overlapped with compute",
        ),
        LegendEntry::new(Swatch::Fill(LOOK.exposed), "exposed communication"),
        LegendEntry::new(Swatch::Fill(LOOK.idle), "idle"),
    ]
}

/// A row's label: strategy, W, rank, and batch or repeat only where the panel varies them.
fn row_label(bar: &StepBreakdownBar, several_batches: bool, repeats: bool) -> String {
    let mut label = format!("{} W={}", bar.series.full_label(), bar.workers);
    if several_batches {
        label.push_str(&format!(" b{}", bar.batch_size));
    }
    if repeats {
        label.push_str(&format!(" r{}", bar.repeat));
    }
    label.push_str(&format!(" · rank {}", bar.rank));
    if let Some(failure) = &bar.failure {
        label.push_str(&format!(" ({})", outcome_mark(*failure).to_uppercase()));
    }
    label
}

/// The note beside a bar: exposed share of the step and overlapped share of communication.
fn shares_note(step: &StepSegments) -> String {
    let wall = step.wall_s();
    let communication = step.exposed_communication_s + step.overlapped_communication_s;
    let exposed =
        if wall > 0.0 { three_significant(100.0 * step.exposed_communication_s / wall) } else { "—".into() };
    if communication > 0.0 {
        let overlap = three_significant(100.0 * step.overlapped_communication_s / communication);
        format!("exposed {exposed} % · overlap {overlap} %")
    } else {
        "no communication".into()
    }
}

struct Breakdown<'a> {
    bars: &'a [StepBreakdownBar],
}

impl Figure for Breakdown<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let body = with_title(
            root,
            "Step-time breakdown per rank",
            Some(
                "ms per step after warm-up; right: exposed communication as % of the step, \
                 overlap = % of communication hidden behind compute",
            ),
        )?;
        let plot = with_legend_below(&body, &legend())?;
        let panels = panels(self.bars);
        let labels: Vec<Vec<String>> = panels
            .iter()
            .map(|(_, members)| {
                let several_batches = members.iter().any(|b| b.batch_size != members[0].batch_size);
                let repeats = members.iter().any(|b| b.repeat != 0);
                members.iter().map(|b| row_label(b, several_batches, repeats)).collect()
            })
            .collect();
        // One label width and one note width for every panel, so the bars line up.
        let mut label_w = 0;
        for label in labels.iter().flatten() {
            label_w = label_w.max(plot.estimate_text_size(label, &font(TICK_PX))?.0);
        }
        let mut note_w = plot.estimate_text_size("no communication", &font(NOTE_PX))?.0;
        for step in self.bars.iter().filter_map(|b| b.per_step.as_ref()) {
            note_w = note_w.max(plot.estimate_text_size(&shares_note(step), &font(NOTE_PX))?.0);
        }
        // 8 % slack: SVG viewers substitute their own sans-serif, often a little wider.
        let note_w = (f64::from(note_w) * 1.08).ceil() as u32;

        let (_, plot_h) = plot.dim_in_pixel();
        let rows = self.bars.len() as u32;
        let row_px = (plot_h.saturating_sub(panels.len() as u32 * PANEL_PX) / rows.max(1)).max(1);
        let mut rest = plot;
        for (pi, ((network, dataset), members)) in panels.iter().enumerate() {
            let area = if pi + 1 == panels.len() {
                rest.clone()
            } else {
                let (area, below) = rest.split_vertically(PANEL_PX + row_px * members.len() as u32);
                rest = below;
                area
            };
            let caption = format!("{network} / {dataset}");
            draw_panel(&area, &caption, members, &labels[pi], label_w, note_w)?;
        }
        Ok(())
    }
}

/// One panel: a row per bar, rows top to bottom in the given order.
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    caption: &str,
    bars: &[&StepBreakdownBar],
    labels: &[String],
    label_w: u32,
    note_w: u32,
) -> Result<(), DrawError> {
    let ms = 1e3;
    let max_ms = bars.iter().filter_map(|b| b.per_step.map(|s| s.wall_s() * ms)).fold(0.0, f64::max);
    let x_max = axis_top(max_ms);
    let rows = bars.len();
    let mut chart = ChartBuilder::on(area)
        .caption(caption, font(AXIS_PX))
        .margin(8)
        .margin_right(note_w as i32 + 24)
        .x_label_area_size(TICK_PX as u32 + AXIS_PX as u32 + 30)
        .y_label_area_size(label_w + 20)
        .build_cartesian_2d(0f64..x_max, 0f64..rows as f64)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_labels(10)
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .axis_style(INK)
        .label_style(font(TICK_PX))
        .axis_desc_style(font(AXIS_PX))
        .x_desc("ms per step")
        .x_label_formatter(&fmt_tick)
        .draw()?;
    let screen = area.use_screen_coord();
    let row_of = |i: usize| (rows - 1 - i) as f64;
    let (left_px, _) = chart.backend_coord(&(0.0, 0.0));
    let (right_px, _) = chart.backend_coord(&(x_max, 0.0));
    let mut names = Vec::new();
    for (i, bar) in bars.iter().enumerate() {
        let (y0, y1) = (row_of(i) + 0.18, row_of(i) + 0.82);
        let y_mid_px = chart.backend_coord(&(0.0, row_of(i) + 0.5)).1;
        names.push((y_mid_px, labels[i].clone()));
        let Some(step) = bar.per_step else {
            let style = font(NOTE_PX).color(&RGBColor(80, 80, 80)).pos(Pos::new(HPos::Left, VPos::Center));
            screen.draw(&Text::new("no step after warm-up", (left_px + 8, y_mid_px), style))?;
            continue;
        };
        let compute = step.compute_s * ms;
        let exposed = step.exposed_communication_s * ms;
        let overlapped = (step.overlapped_communication_s * ms).min(compute);
        let segments = [
            (0.0, compute, LOOK.compute),
            (compute, compute + exposed, LOOK.exposed),
            (compute + exposed, compute + exposed + step.idle_s * ms, LOOK.idle),
        ];
        for (start, end, fill) in segments {
            if end <= start {
                continue;
            }
            chart.draw_series(std::iter::once(Rectangle::new([(start, y0), (end, y1)], fill.filled())))?;
        }
        if overlapped > 0.0 {
            // The hidden communication ends where compute does: it ran beside the backward pass.
            let corners = [(compute - overlapped, y0), (compute, y1)];
            chart.draw_series(std::iter::once(Rectangle::new(corners, LOOK.overlapped.filled())))?;
            let (p0, p1) = (chart.backend_coord(&corners[0]), chart.backend_coord(&corners[1]));
            hatch_rect(&screen, p0, p1, LOOK.overlapped_hatch, 6)?;
            chart.draw_series(std::iter::once(Rectangle::new(corners, shade(LOOK.overlapped_hatch, 0.2))))?;
        }
        for (start, end, fill) in segments {
            if end > start {
                chart.draw_series(std::iter::once(Rectangle::new([(start, y0), (end, y1)], INK.stroke_width(1))))?;
                segment_value(&chart, &screen, (start, end), row_of(i) + 0.5, fill)?;
            }
        }
        let note = shares_note(&step);
        let style = font(NOTE_PX).pos(Pos::new(HPos::Left, VPos::Center));
        screen.draw(&Text::new(note, (right_px + 10, y_mid_px), style))?;
    }
    draw_y_categories(&screen, &names, left_px)?;
    Ok(())
}

/// A segment's length in ms, written inside it when it fits.
fn segment_value<DB: DrawingBackend>(
    chart: &ChartContext<
        '_,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    screen: &DrawingArea<DB, Shift>,
    (start, end): (f64, f64),
    y: f64,
    fill: RGBColor,
) -> Result<(), DrawError> {
    let text = three_significant(end - start);
    let color = if is_light(fill) { INK } else { WHITE };
    let style = font(NOTE_PX).color(&color);
    let (text_w, _) = screen.estimate_text_size(&text, &style)?;
    let (x0, y_px) = chart.backend_coord(&(start, y));
    let (x1, _) = chart.backend_coord(&(end, y));
    if x1 - x0 > text_w as i32 + 8 {
        let centre = ((x0 + x1) / 2, y_px);
        screen.draw(&Text::new(text, centre, style.pos(Pos::new(HPos::Center, VPos::Center))))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(rank: u32, per_step: Option<StepSegments>) -> StepBreakdownBar {
        StepBreakdownBar {
            network: "resnet18".into(),
            dataset: "cifar10".into(),
            series: StrategySeries::of(stratlab_strategy_spec::StrategyKind::DataParallel),
            workers: 2,
            batch_size: 64,
            repeat: 0,
            rank,
            failure: None,
            per_step,
        }
    }

    #[test]
    fn the_note_gives_exposed_share_of_step_and_overlapped_share_of_communication() {
        let step =
            StepSegments { compute_s: 0.3, exposed_communication_s: 0.1, overlapped_communication_s: 0.3, idle_s: 0.0 };
        assert_eq!(shares_note(&step), "exposed 25.0 % · overlap 75.0 %");
        let quiet = StepSegments { exposed_communication_s: 0.0, overlapped_communication_s: 0.0, ..step };
        assert_eq!(shares_note(&quiet), "no communication");
    }

    #[test]
    fn labels_name_batch_repeat_and_failure_only_when_needed() {
        let mut failed = bar(1, None);
        failed.failure = Some(Outcome::Crashed);
        assert_eq!(row_label(&failed, false, false), "data-parallel W=2 · rank 1 (CRASHED)");
        assert_eq!(row_label(&bar(0, None), true, true), "data-parallel W=2 b64 r0 · rank 0");
    }
}
