//! A headline metric against run date (asv's and Bencher's history plots): one line per
//! cell, a dashed vertical where the environment changed (labelled with what changed), and
//! a ring on the first run after a step change, so a reader can match steps to upgrades.

use std::path::PathBuf;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use stratlab_results::UtcTime;

use crate::draw::axes::{axis_top, fmt_tick, y_label_area_px};
use crate::draw::legend::{with_legend_below, LegendEntry, Swatch};
use crate::draw::title::with_title;
use crate::render::{render, DrawError, Figure};
use crate::style::{category_color, font, AXIS_PX, GRID, INK, NOTE_PX, REFERENCE, TICK_PX};
use crate::{FigureTarget, ReportError};

const FIGURE: &str = "history";

/// One cell's values over the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryLine {
    /// The cell.
    pub label: String,
    /// `(run index, value)`, in run order; runs without a value are left out.
    pub points: Vec<(usize, f64)>,
}

/// One metric's history.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryChart {
    /// Figure title.
    pub title: String,
    /// y axis label with unit.
    pub y_label: String,
    /// Each run's start, Unix seconds, in run order.
    pub run_times_s: Vec<i64>,
    /// One line per cell.
    pub lines: Vec<HistoryLine>,
    /// `(run index, what changed)` for each run whose environment differs from the one before.
    pub environment_changes: Vec<(usize, String)>,
    /// `(line index, run index)` of the first run at a new level.
    pub steps: Vec<(usize, usize)>,
}

/// Draws `chart` into `target`; returns the files.
pub fn history_chart(chart: &HistoryChart, target: &FigureTarget) -> Result<Vec<PathBuf>, ReportError> {
    if chart.lines.iter().all(|line| line.points.is_empty()) {
        return Err(ReportError::Empty { figure: FIGURE });
    }
    let runs = chart.run_times_s.len();
    let invalid = |field: String, value: String, why| ReportError::InvalidInput { figure: FIGURE, field, value, why };
    for (l, line) in chart.lines.iter().enumerate() {
        for (p, (run, value)) in line.points.iter().enumerate() {
            if *run >= runs {
                return Err(invalid(format!("lines[{l}].points[{p}].run"), run.to_string(), "past the last run"));
            }
            if !value.is_finite() {
                return Err(invalid(format!("lines[{l}].points[{p}].value"), value.to_string(), "not a number"));
            }
        }
    }
    render(&HistoryFigure { chart }, target)
}

struct HistoryFigure<'a> {
    chart: &'a HistoryChart,
}

impl HistoryFigure<'_> {
    /// Hours since the first run.
    fn x_of(&self, run: usize) -> f64 {
        (self.chart.run_times_s[run] - self.chart.run_times_s[0]) as f64 / 3600.0
    }
}

impl Figure for HistoryFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let c = self.chart;
        let note = "one line per cell; dashed: the environment changed (what, at the top); ring: first run after a step change";
        let body = with_title(root, &c.title, Some(note))?;
        let mut legend: Vec<LegendEntry> = c
            .lines
            .iter()
            .enumerate()
            .map(|(i, line)| LegendEntry::new(Swatch::LineDot(category_color(i)), line.label.clone()))
            .collect();
        if !c.environment_changes.is_empty() {
            legend.push(LegendEntry::new(Swatch::Line { color: REFERENCE, dashed: true }, "environment change"));
        }
        if !c.steps.is_empty() {
            legend.push(LegendEntry::new(Swatch::HollowDot(INK), "step change (first run at the new level)"));
        }
        let plot = with_legend_below(&body, &legend)?;

        let last = self.x_of(c.run_times_s.len() - 1);
        let pad = (last * 0.05).max(0.05);
        let (x_min, x_max) = (-pad, last + pad);
        let y_max = axis_top(c.lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)).fold(0.0, f64::max));
        let start = c.run_times_s[0];
        let date = move |hours: &f64| {
            UtcTime::from_unix_s(start + (hours * 3600.0).round() as i64)
                .map(|t| t.rfc3339().get(5..16).unwrap_or_default().replace('T', " "))
                .unwrap_or_default()
        };
        let mut chart = ChartBuilder::on(&plot)
            .margin(10)
            .margin_right(30)
            .margin_top(20 + 2 * NOTE_PX as u32)
            .x_label_area_size(TICK_PX as u32 + AXIS_PX as u32 + 30)
            .y_label_area_size(y_label_area_px(&plot, y_max)?)
            .build_cartesian_2d(x_min..x_max, 0f64..y_max)?;
        chart
            .configure_mesh()
            .x_labels(6)
            .y_labels(10)
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .axis_style(INK)
            .label_style(font(TICK_PX))
            .axis_desc_style(font(AXIS_PX))
            .x_desc("run date (UTC, month-day time)")
            .y_desc(c.y_label.as_str())
            .x_label_formatter(&date)
            .y_label_formatter(&fmt_tick)
            .draw()?;

        for (slot, (run, what)) in c.environment_changes.iter().enumerate() {
            let x = if *run == 0 { self.x_of(0) } else { (self.x_of(run - 1) + self.x_of(*run)) / 2.0 };
            chart.draw_series(DashedLineSeries::new(vec![(x, 0.0), (x, y_max)], 6, 4, REFERENCE.stroke_width(2)))?;
            // Labels just above the plot, staggered so neighbours do not overlap.
            let (px, py) = chart.backend_coord(&(x, y_max));
            let base = root.get_base_pixel();
            let y = py - 6 - (slot % 2) as i32 * (NOTE_PX as i32 + 4);
            let style = font(NOTE_PX).color(&REFERENCE).pos(Pos::new(HPos::Center, VPos::Bottom));
            root.draw(&Text::new(what.clone(), (px - base.0, y - base.1), style))?;
        }
        for (i, line) in c.lines.iter().enumerate() {
            let color = category_color(i);
            let points: Vec<(f64, f64)> = line.points.iter().map(|(run, value)| (self.x_of(*run), *value)).collect();
            chart.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?;
            chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
        }
        for &(line, run) in &c.steps {
            if let Some((_, value)) = c.lines.get(line).and_then(|l| l.points.iter().find(|(r, _)| *r == run)) {
                chart.draw_series(std::iter::once(Circle::new((self.x_of(run), *value), 10, INK.stroke_width(2))))?;
            }
        }
        Ok(())
    }
}
