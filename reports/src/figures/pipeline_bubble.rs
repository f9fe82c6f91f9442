//! The pipeline bubble against the micro-batch count (GPipe paper, thesis ch. 6): the
//! schedule's (p − 1) ÷ (m + p − 1) as a line (interleaved 1F1B's (p − 1) ÷ (v·m + p − 1)
//! as one more, in its colour), the measured idle share of each schedule's trials as
//! markers, so a reader sees how closely the run follows the arithmetic.

use std::path::PathBuf;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::draw::axes::{axis_top, draw_x_categories, fmt_tick, y_label_area_px, LabelLayout};
use crate::draw::bars::any_repeats;
use crate::draw::curves::{draw_failure_on_axis, draw_median_point};
use crate::draw::legend::{with_legend_below, LegendEntry, Swatch};
use crate::draw::title::with_title;
use crate::figures::check_outcome;
use crate::render::{render, DrawError, Figure};
use crate::style::{font, strategy_color, strategy_rank, AXIS_PX, GRID, INK, REFERENCE, TICK_PX};
use crate::{FigureTarget, Plotted, ReportError};
use stratlab_strategy_spec::StrategyKind;

const FIGURE: &str = "pipeline_bubble";

/// One schedule at one micro-batch count: its measured bubble over the repeats.
#[derive(Debug, Clone, PartialEq)]
pub struct BubblePoint {
    /// The schedule (`gpipe`, `1f1b`, `interleaved-1f1b`); one marker colour each, its
    /// strategy's.
    pub schedule: StrategyKind,
    /// Pipeline stages per worker (v): 1 but for interleaved 1F1B.
    pub virtual_stages: u32,
    /// Micro-batches per step m (x axis).
    pub micro_batches: u32,
    /// Measured idle share of the step, 0–1, over the repeats; or why there is none.
    pub bubble: Plotted,
}

/// One figure: the schedules of one network and data set at one stage count p.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineBubble {
    /// Network name.
    pub network: String,
    /// Data set name.
    pub dataset: String,
    /// Stages per pipeline p, which the theoretical line is drawn for.
    pub stages: u32,
    /// The measured points.
    pub points: Vec<BubblePoint>,
}

/// Draws `figure` into `target`; returns the files.
pub fn pipeline_bubble(figure: &PipelineBubble, target: &FigureTarget) -> Result<Vec<PathBuf>, ReportError> {
    if figure.points.is_empty() {
        return Err(ReportError::Empty { figure: FIGURE });
    }
    let invalid = |field: String, value: String, why| ReportError::InvalidInput { figure: FIGURE, field, value, why };
    if figure.stages == 0 {
        return Err(invalid("stages".into(), "0".into(), "a pipeline has at least one stage"));
    }
    for (i, point) in figure.points.iter().enumerate() {
        if point.micro_batches == 0 {
            return Err(invalid(
                format!("points[{i}].micro_batches"),
                "0".into(),
                "a step has at least one micro-batch",
            ));
        }
        check_outcome(FIGURE, format!("points[{i}].bubble"), &point.bubble)?;
    }
    render(&BubbleFigure { figure }, target)
}

struct BubbleFigure<'a> {
    figure: &'a PipelineBubble,
}

/// x position of a micro-batch count: log2, so 1, 2, 4, … 32 sit evenly apart.
fn x_of(micro_batches: f64) -> f64 {
    micro_batches.log2()
}

impl Figure for BubbleFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let f = self.figure;
        let p = f64::from(f.stages);
        let theoretical = |m: f64| 100.0 * (p - 1.0) / (m + p - 1.0);
        let interleaved = |v: u32, m: f64| 100.0 * (p - 1.0) / (f64::from(v) * m + p - 1.0);
        let mut schedules: Vec<(StrategyKind, u32)> =
            f.points.iter().map(|point| (point.schedule, point.virtual_stages)).collect();
        schedules.sort_by_key(|&(kind, v)| (strategy_rank(kind), v));
        schedules.dedup();
        let mut per_worker: Vec<u32> = schedules.iter().map(|&(_, v)| v).filter(|&v| v > 1).collect();
        per_worker.dedup();
        let name = |(kind, v): (StrategyKind, u32)| match v {
            1 => kind.name().to_owned(),
            v => format!("{} v = {v}", kind.name()),
        };
        let outcomes = f.points.iter().map(|point| &point.bubble);
        let title = format!("Pipeline bubble against micro-batches — {} / {}, p = {}", f.network, f.dataset, f.stages);
        let note = if any_repeats(outcomes.clone()) {
            "markers: measured idle share of the step, median over repeats, whiskers: min–max; hollow: n = 1"
        } else {
            "markers: measured idle share of the step, each a single run (n = 1)"
        };
        let body = with_title(root, &title, Some(note))?;
        let mut legend = vec![LegendEntry::new(
            Swatch::Line { color: REFERENCE, dashed: true },
            format!("theoretical (p − 1)/(m + p − 1), p = {}", f.stages),
        )];
        for &v in &per_worker {
            let color = strategy_color(StrategyKind::Interleaved1F1B);
            legend.push(LegendEntry::new(
                Swatch::Line { color, dashed: true },
                format!("(p − 1)/(v·m + p − 1), v = {v}"),
            ));
        }
        legend.extend(schedules.iter().map(|&s| LegendEntry::new(Swatch::Dot(strategy_color(s.0)), name(s))));
        if outcomes.clone().any(|o| !matches!(o, Plotted::Measured(_))) {
            legend.push(LegendEntry::new(Swatch::Cross(INK), "no measurement (reason beside ×)"));
        }
        let plot = with_legend_below(&body, &legend)?;

        let mut counts: Vec<u32> = f.points.iter().map(|point| point.micro_batches).collect();
        counts.sort_unstable();
        counts.dedup();
        let (first, last) = (f64::from(counts[0]), f64::from(counts[counts.len() - 1]));
        let (x_min, x_max) = (x_of(first) - 0.4, x_of(last) + 0.4);
        // The curve starts a little left of the fewest micro-batches drawn, never below one.
        let curve_from = x_min.max(0.0);
        let measured_max = outcomes.clone().filter_map(Plotted::stat).map(|s| s.max * 100.0).fold(0.0, f64::max);
        let y_max = axis_top(theoretical(curve_from.exp2()).max(measured_max)).min(100.0);
        let mut chart = ChartBuilder::on(&plot)
            .margin(10)
            .margin_right(24)
            .x_label_area_size(TICK_PX as u32 + AXIS_PX as u32 + 30)
            .y_label_area_size(y_label_area_px(&plot, y_max)?)
            .build_cartesian_2d(x_min..x_max, 0f64..y_max)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_labels(10)
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .axis_style(INK)
            .label_style(font(TICK_PX))
            .axis_desc_style(font(AXIS_PX))
            .x_desc("micro-batches per step m")
            .y_desc("bubble (% of the step)")
            .y_label_formatter(&fmt_tick)
            .draw()?;
        for &m in &counts {
            let x = x_of(f64::from(m));
            chart.draw_series(std::iter::once(PathElement::new(vec![(x, 0.0), (x, y_max)], GRID)))?;
        }
        // The theoretical curve, sampled finely.
        let samples = 200;
        let curve = (0..=samples).map(|i| {
            let x = curve_from + (x_max - curve_from) * f64::from(i) / f64::from(samples);
            (x, theoretical(x.exp2()))
        });
        chart.draw_series(DashedLineSeries::new(curve, 10, 6, REFERENCE.stroke_width(2)))?;
        for &v in &per_worker {
            let curve = (0..=samples).map(|i| {
                let x = curve_from + (x_max - curve_from) * f64::from(i) / f64::from(samples);
                (x, interleaved(v, x.exp2()))
            });
            let color = strategy_color(StrategyKind::Interleaved1F1B);
            chart.draw_series(DashedLineSeries::new(curve, 6, 6, color.stroke_width(2)))?;
        }

        let screen = plot.use_screen_coord();
        // Schedules at the same m sit side by side instead of on top of each other.
        let offset = |slot: usize| 0.08 * (slot as f64 - (schedules.len() as f64 - 1.0) / 2.0);
        let mut failures_at: Vec<u32> = Vec::new();
        for (slot, &(schedule, v)) in schedules.iter().enumerate() {
            let color = strategy_color(schedule);
            for point in f.points.iter().filter(|point| (point.schedule, point.virtual_stages) == (schedule, v)) {
                let x = x_of(f64::from(point.micro_batches)) + offset(slot);
                match &point.bubble {
                    Plotted::Measured(stat) => draw_median_point(&mut chart, &screen, x, &stat.scaled(100.0), color)?,
                    gap => {
                        let stacked = failures_at.iter().filter(|m| **m == point.micro_batches).count() as i32;
                        failures_at.push(point.micro_batches);
                        let at = chart.backend_coord(&(x, 0.0));
                        draw_failure_on_axis(&screen, at, stacked, &gap.gap_label().unwrap_or_default(), color)?;
                    }
                }
            }
        }
        let top_px = chart.backend_coord(&(x_min, 0.0)).1;
        let labels: Vec<(i32, String)> =
            counts.iter().map(|&m| (chart.backend_coord(&(x_of(f64::from(m)), 0.0)).0, m.to_string())).collect();
        draw_x_categories(&screen, &labels, top_px, LabelLayout::Horizontal)?;
        Ok(())
    }
}
