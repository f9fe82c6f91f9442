//! Fig. 13 of the single-GPU vs data/model/GPipe study: test accuracy against wall-clock time,
//! a curve per strategy, the data set's target drawn, and each run's time-to-accuracy marked
//! where it first reaches it.

use std::path::PathBuf;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::draw::axes::time_unit;
use crate::draw::bars::Reference;
use crate::draw::curves::{draw_curve_panel, Curve, CurvePanel};
use crate::draw::legend::{with_legend_below, LegendEntry, Swatch};
use crate::draw::title::with_title;
use crate::figures::check_non_negative;
use crate::figures::strategy_bars::curve_series;
use crate::plotted::outcome_mark;
use crate::render::{render, DrawError, Figure};
use crate::style::REFERENCE;
use crate::{FigureTarget, ReportError, StrategySeries};
use stratlab_results::Outcome;

const FIGURE: &str = "time_to_accuracy";

/// One evaluation of the test set during training.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AccuracyPoint {
    /// Wall-clock seconds since training started.
    pub wall_s: f64,
    /// Test accuracy as a fraction in [0, 1] (drawn in percent).
    pub test_accuracy: f64,
}

/// One run's accuracy over time.
#[derive(Debug, Clone, PartialEq)]
pub struct AccuracyCurve {
    /// The strategy: the curve's colour (lighter for more workers or another compute choice).
    pub series: StrategySeries,
    /// Worker count W.
    pub workers: u32,
    /// Evaluations in time order (may be empty for a run that failed before its first).
    pub points: Vec<AccuracyPoint>,
    /// How the run ended where it stopped early; drawn as an × where it stopped.
    pub failure: Option<Outcome>,
}

/// The curves of one network and data set, with the data set's target accuracy.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeToAccuracy {
    /// Network name (title).
    pub network: String,
    /// Data set name (title).
    pub dataset: String,
    /// Target test accuracy as a fraction in [0, 1].
    pub target_accuracy: f64,
    /// One curve per run.
    pub curves: Vec<AccuracyCurve>,
}

impl AccuracyCurve {
    /// The first evaluation at or above `target`: the run's time-to-accuracy.
    pub fn first_reaching(&self, target: f64) -> Option<AccuracyPoint> {
        self.points.iter().copied().find(|p| p.test_accuracy >= target)
    }
}

/// Draws accuracy against wall time into `target`; returns the files.
pub fn time_to_accuracy(figure: &TimeToAccuracy, target: &FigureTarget) -> Result<Vec<PathBuf>, ReportError> {
    if figure.curves.is_empty() {
        return Err(ReportError::Empty { figure: FIGURE });
    }
    check_fraction("target_accuracy".into(), figure.target_accuracy)?;
    for (i, curve) in figure.curves.iter().enumerate() {
        for (j, point) in curve.points.iter().enumerate() {
            check_non_negative(FIGURE, format!("curves[{i}].points[{j}].wall_s"), point.wall_s)?;
            check_fraction(format!("curves[{i}].points[{j}].test_accuracy"), point.test_accuracy)?;
        }
    }
    render(&Tta { figure }, target)
}

fn check_fraction(field: String, value: f64) -> Result<(), ReportError> {
    if (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(ReportError::InvalidInput {
            figure: FIGURE,
            field,
            value: value.to_string(),
            why: "expected a fraction in [0, 1]",
        })
    }
}

struct Tta<'a> {
    figure: &'a TimeToAccuracy,
}

impl Figure for Tta<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let f = self.figure;
        let max_s = f.curves.iter().flat_map(|c| c.points.iter().map(|p| p.wall_s)).fold(0.0, f64::max);
        let (divisor, unit) = time_unit(max_s);
        let target_pct = f.target_accuracy * 100.0;
        let series = curve_series(f.curves.iter().map(|c| (&c.series, c.workers)));

        let mut legend = Vec::new();
        let mut curves = Vec::new();
        // Legend entries in series order, so the same strategy sits in the same place everywhere.
        for s in &series {
            for c in f.curves.iter().filter(|c| s.is(&c.series, c.workers)) {
                let reached = c.first_reaching(f.target_accuracy);
                let status = match (&c.failure, reached) {
                    (_, Some(p)) => format!("{} {unit} to target", crate::draw::axes::fmt_tick(&(p.wall_s / divisor))),
                    (Some(failure), None) => match c.points.last() {
                        Some(last) => format!(
                            "{} at {} {unit}",
                            outcome_mark(*failure),
                            crate::draw::axes::fmt_tick(&(last.wall_s / divisor))
                        ),
                        None => format!("{} before first evaluation", outcome_mark(*failure)),
                    },
                    (None, None) => "target not reached".into(),
                };
                let swatch = if c.failure.is_some() && c.points.is_empty() {
                    Swatch::Cross(s.color)
                } else {
                    Swatch::LineDot(s.color)
                };
                legend.push(LegendEntry::new(swatch, format!("{}: {status}", s.label())));
                curves.push(Curve {
                    color: s.color,
                    points: c.points.iter().map(|p| (p.wall_s / divisor, p.test_accuracy * 100.0)).collect(),
                    failure: c.failure.map(|outcome| outcome_mark(outcome).to_owned()),
                    highlight: reached.map(|p| {
                        let x = p.wall_s / divisor;
                        ((x, p.test_accuracy * 100.0), format!("{} {unit}", crate::draw::axes::fmt_tick(&x)))
                    }),
                });
            }
        }
        legend.push(LegendEntry::new(
            Swatch::Line { color: REFERENCE, dashed: true },
            format!("target {target_pct:.1} %"),
        ));

        let title = format!("Time to accuracy — {} on {}", f.network, f.dataset);
        let body = with_title(root, &title, Some("ringed point: first evaluation at or above the target"))?;
        let plot = with_legend_below(&body, &legend)?;
        let panel = CurvePanel {
            x_desc: format!("wall-clock time ({unit})"),
            y_desc: "test accuracy (%)".into(),
            x_max: (max_s / divisor * 1.05).max(1e-9),
            y_min: 0.0,
            y_max: 100.0,
            curves,
            reference: Some(Reference { y: target_pct, label: format!("target {target_pct:.1} %") }),
        };
        draw_curve_panel(&plot, &panel)
    }
}
