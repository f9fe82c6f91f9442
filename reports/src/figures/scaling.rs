//! Thesis fig. 3.2: speedup against worker count, a panel per network (and data set), a
//! line per strategy, with the ideal speedup = W as a dashed diagonal.

use std::path::PathBuf;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::draw::axes::{axis_top, draw_x_categories, fmt_tick, panel_grid, y_label_area_px, LabelLayout};
use crate::draw::bars::any_repeats;
use crate::draw::curves::{draw_failure_on_axis, draw_median_point};
use crate::draw::legend::{with_legend_below, LegendEntry, Swatch};
use crate::draw::title::with_title;
use crate::figures::{check_outcome, unique_in_order};
use crate::render::{log_panel, render, DrawError, Figure, PanelLayout, TickLog};
use crate::style::{category_color, font, strategy_color, tint, AXIS_PX, GRID, INK, REFERENCE, TICK_PX};
use crate::{FigureTarget, Plotted, ReportError, Stat, StrategySeries};

const FIGURE: &str = "speedup_scaling";

/// What a line of the scaling figure stands for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScalingLine {
    /// A strategy: its colour, a lighter one for each further compute choice.
    Strategy(StrategySeries),
    /// A strategy's numbers from another source beside its own (the measured speedups
    /// beside predicted ones): its colour, dashed, named `<label> (<source>)`.
    Also(StrategySeries, String),
    /// A figure's own series that is no strategy (`published`, `model`): the category
    /// palette's colours in order.
    Named(String),
}

impl ScalingLine {
    /// The legend's name of the line.
    pub fn label(&self) -> String {
        match self {
            ScalingLine::Strategy(series) => series.full_label(),
            ScalingLine::Also(series, source) => format!("{} ({source})", series.full_label()),
            ScalingLine::Named(name) => name.clone(),
        }
    }
}

/// One point: a strategy's speedup over `single` on one network and data set at W workers.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingPoint {
    /// The line it belongs to.
    pub line: ScalingLine,
    /// Network name; one panel per network and data set.
    pub network: String,
    /// Data set name.
    pub dataset: String,
    /// Worker count W (x axis).
    pub workers: u32,
    /// Speedup over `single` (×), or why the trial failed.
    pub speedup: Plotted,
}

/// Draws speedup against W into `target`; returns the files.
pub fn speedup_scaling(points: &[ScalingPoint], target: &FigureTarget) -> Result<Vec<PathBuf>, ReportError> {
    speedup_scaling_noted(points, None, target)
}

/// [`speedup_scaling`] with the subtitle `note` instead of one about repeats (predicted
/// points have none).
pub fn speedup_scaling_noted(
    points: &[ScalingPoint],
    note: Option<&str>,
    target: &FigureTarget,
) -> Result<Vec<PathBuf>, ReportError> {
    if points.is_empty() {
        return Err(ReportError::Empty { figure: FIGURE });
    }
    for (i, point) in points.iter().enumerate() {
        if point.workers == 0 {
            return Err(ReportError::InvalidInput {
                figure: FIGURE,
                field: format!("points[{i}].workers"),
                value: "0".into(),
                why: "a trial has at least one worker",
            });
        }
        check_outcome(FIGURE, format!("points[{i}].speedup"), &point.speedup)?;
    }
    render(&Scaling { points, note }, target)
}

struct Scaling<'a> {
    points: &'a [ScalingPoint],
    note: Option<&'a str>,
}

impl Figure for Scaling<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let mut lines: Vec<ScalingLine> = self.points.iter().map(|p| p.line.clone()).collect();
        lines.sort();
        lines.dedup();
        let looks = line_looks(&lines);
        let mut cases: Vec<(String, String)> = Vec::new();
        for p in self.points {
            let case = (p.network.clone(), p.dataset.clone());
            if !cases.contains(&case) {
                cases.push(case);
            }
        }
        let one_dataset = unique_in_order(self.points.iter().map(|p| p.dataset.as_str())).len() == 1;
        let outcomes = self.points.iter().map(|p| &p.speedup);
        let stats = || outcomes.clone().filter_map(Plotted::stat);
        let mut title = "Speedup over a single device against worker count".to_string();
        if one_dataset {
            title.push_str(&format!(" — {}", cases[0].1));
        }
        let note = if let Some(note) = self.note {
            note
        } else if any_repeats(outcomes.clone()) {
            "points: median over repeats, whiskers: min–max; hollow points: single runs (n=1)"
        } else {
            "every point is a single run (n = 1): no spread measured"
        };
        let body = with_title(root, &title, Some(note))?;

        let mut legend: Vec<LegendEntry> = lines
            .iter()
            .zip(&looks)
            .map(|(line, (color, dashed))| match dashed {
                true => LegendEntry::new(Swatch::Line { color: *color, dashed: true }, line.label()),
                false => LegendEntry::new(Swatch::LineDot(*color), line.label()),
            })
            .collect();
        legend.push(LegendEntry::new(Swatch::Line { color: REFERENCE, dashed: true }, "ideal (speedup = W)"));
        if stats().any(|s| s.n == 1) && stats().any(|s| s.n > 1) {
            legend.push(LegendEntry::new(Swatch::HollowDot(INK), "single run (n=1)"));
        }
        if outcomes.clone().any(|o| !matches!(o, Plotted::Measured(_))) {
            legend.push(LegendEntry::new(Swatch::Cross(INK), "failed trial (reason beside ×)"));
        }
        let plot = with_legend_below(&body, &legend)?;

        // Shared axes across panels, so slopes compare.
        let max_w = self.points.iter().map(|p| p.workers).max().unwrap_or(1);
        let y_max = axis_top(stats().map(|s| s.max).fold(f64::from(max_w), f64::max));
        let x_max = f64::from(max_w) * 1.08;
        let ticks = {
            let mut w: Vec<u32> = self.points.iter().map(|p| p.workers).collect();
            w.push(1);
            w.sort_unstable();
            w.dedup();
            w
        };
        for ((network, dataset), area) in cases.iter().zip(panel_grid(&plot, cases.len())) {
            let caption = if one_dataset { network.clone() } else { format!("{network} / {dataset}") };
            let in_case: Vec<&ScalingPoint> =
                self.points.iter().filter(|p| &p.network == network && &p.dataset == dataset).collect();
            draw_panel(&area, &caption, (&lines, &looks), &in_case, &ticks, x_max, y_max)?;
        }
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    caption: &str,
    (lines, looks): (&[ScalingLine], &[(RGBColor, bool)]),
    points: &[&ScalingPoint],
    ticks: &[u32],
    x_max: f64,
    y_max: f64,
) -> Result<(), DrawError> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, font(AXIS_PX))
        .margin(8)
        .margin_right(18)
        .x_label_area_size(TICK_PX as u32 + AXIS_PX as u32 + 30)
        .y_label_area_size(y_label_area_px(area, y_max)?)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
    let y_ticks = TickLog::new();
    let y_label = |value: &f64| y_ticks.label(*value, fmt_tick);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_labels(8)
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .axis_style(INK)
        .label_style(font(TICK_PX))
        .axis_desc_style(font(AXIS_PX))
        .y_desc("speedup over single (×)")
        .x_desc("workers W")
        .y_label_formatter(&y_label)
        .draw()?;
    for &w in ticks {
        chart.draw_series(std::iter::once(PathElement::new(vec![(f64::from(w), 0.0), (f64::from(w), y_max)], GRID)))?;
    }
    let ideal_end = x_max.min(y_max);
    chart.draw_series(DashedLineSeries::new(
        vec![(1.0, 1.0), (ideal_end, ideal_end)],
        10,
        6,
        REFERENCE.stroke_width(2),
    ))?;

    let screen = area.use_screen_coord();
    // Failures at the same W stack their labels instead of overprinting.
    let mut failures_at: Vec<(u32, i32)> = Vec::new();
    for (line, &(color, dashed)) in lines.iter().zip(looks) {
        let mut mine: Vec<&ScalingPoint> = points.iter().copied().filter(|p| &p.line == line).collect();
        mine.sort_by_key(|p| p.workers);
        let measured: Vec<(f64, Stat)> =
            mine.iter().filter_map(|p| p.speedup.stat().map(|s| (f64::from(p.workers), *s))).collect();
        let path = measured.iter().map(|(w, s)| (*w, s.median));
        match dashed {
            true => chart.draw_series(DashedLineSeries::new(path, 12, 8, color.stroke_width(3)))?,
            false => chart.draw_series(LineSeries::new(path, color.stroke_width(3)))?,
        };
        for (w, s) in &measured {
            draw_median_point(&mut chart, &screen, *w, s, color)?;
        }
        for p in mine.iter().filter(|p| !matches!(p.speedup, Plotted::Measured(_))) {
            let Some(label) = p.speedup.gap_label() else { continue };
            let stacked = failures_at.iter().filter(|(w, _)| *w == p.workers).count() as i32;
            failures_at.push((p.workers, stacked));
            let at = chart.backend_coord(&(f64::from(p.workers), 0.0));
            draw_failure_on_axis(&screen, at, stacked, &label, color)?;
        }
    }

    let top_px = chart.backend_coord(&(0.0, 0.0)).1;
    let labels: Vec<(i32, String)> =
        ticks.iter().map(|&w| (chart.backend_coord(&(f64::from(w), 0.0)).0, w.to_string())).collect();
    draw_x_categories(&screen, &labels, top_px, LabelLayout::Horizontal)?;
    log_panel(PanelLayout {
        top_px: area.get_base_pixel().1,
        panel_px: area.dim_in_pixel().1,
        plot_px: chart.plotting_area().dim_in_pixel().1,
        y_ticks: y_ticks.ticks(),
        x_ticks: labels.into_iter().map(|(x, label)| (f64::from(x), label)).collect(),
        notes: Vec::new(),
    });
    Ok(())
}

/// Each line's colour and whether it is dashed: a strategy its own colour (lighter for each
/// further compute choice of the same strategy), its other source dashed in the same
/// colour, a figure's own series the category palette's colours in order.
fn line_looks(lines: &[ScalingLine]) -> Vec<(RGBColor, bool)> {
    let mut named = 0;
    let mut seen: Vec<StrategySeries> = Vec::new();
    lines
        .iter()
        .map(|line| match line {
            ScalingLine::Strategy(series) | ScalingLine::Also(series, _) => {
                let computes = seen.iter().filter(|s| s.strategy() == series.strategy() && *s != series).count();
                if !seen.contains(series) {
                    seen.push(series.clone());
                }
                let color = tint(strategy_color(series.kind), (0.35 * computes as f64).min(0.7));
                (color, matches!(line, ScalingLine::Also(..)))
            }
            ScalingLine::Named(_) => {
                named += 1;
                (category_color(named - 1), false)
            }
        })
        .collect()
}
