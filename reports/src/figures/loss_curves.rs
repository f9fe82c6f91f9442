//! Fig. 14 of the single-GPU vs data/model/GPipe study: training loss against epochs, a curve
//! per strategy, so a reader sees that strategies converge alike (or which one diverged and
//! when).

use std::path::PathBuf;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::draw::curves::{draw_curve_panel, Curve, CurvePanel};
use crate::draw::legend::{with_legend_below, LegendEntry, Swatch};
use crate::draw::title::with_title;
use crate::figures::check_non_negative;
use crate::figures::strategy_bars::curve_series;
use crate::plotted::outcome_mark;
use crate::render::{render, DrawError, Figure};
use crate::{FigureTarget, ReportError, StrategySeries};
use stratlab_results::Outcome;

const FIGURE: &str = "loss_curves";

/// One recorded training loss.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossPoint {
    /// Position in training, in epochs (fractional for per-step points: step ÷ steps per epoch).
    pub epoch: f64,
    /// Training loss (cross-entropy); NaN or ±∞ where it diverged.
    pub loss: f64,
}

/// One run's loss curve.
#[derive(Debug, Clone, PartialEq)]
pub struct LossCurve {
    /// The strategy: the curve's colour (lighter for more workers or another compute choice).
    pub series: StrategySeries,
    /// Worker count W.
    pub workers: u32,
    /// Losses in training order.
    pub points: Vec<LossPoint>,
    /// How the run ended where it stopped early. A non-finite loss counts as diverged even
    /// when this is `None`.
    pub failure: Option<Outcome>,
}

/// The loss curves of one network and data set.
#[derive(Debug, Clone, PartialEq)]
pub struct LossCurves {
    /// Network name (title).
    pub network: String,
    /// Data set name (title).
    pub dataset: String,
    /// One curve per run.
    pub curves: Vec<LossCurve>,
}

/// Draws training loss against epochs into `target`; returns the files.
pub fn loss_curves(figure: &LossCurves, target: &FigureTarget) -> Result<Vec<PathBuf>, ReportError> {
    if figure.curves.is_empty() {
        return Err(ReportError::Empty { figure: FIGURE });
    }
    for (i, curve) in figure.curves.iter().enumerate() {
        for (j, point) in curve.points.iter().enumerate() {
            check_non_negative(FIGURE, format!("curves[{i}].points[{j}].epoch"), point.epoch)?;
        }
    }
    render(&Loss { figure }, target)
}

impl LossCurve {
    /// The points before the first non-finite loss, and the failure to show: the recorded
    /// one, or "diverged" when the loss stopped being finite.
    fn finite_part(&self) -> (Vec<(f64, f64)>, Option<String>) {
        let end = self.points.iter().position(|p| !p.loss.is_finite()).unwrap_or(self.points.len());
        let points = self.points[..end].iter().map(|p| (p.epoch, p.loss)).collect();
        let failure = match (&self.failure, end < self.points.len()) {
            (Some(failure), _) => Some(outcome_mark(*failure).to_owned()),
            (None, true) => Some(outcome_mark(Outcome::Diverged).to_owned()),
            (None, false) => None,
        };
        (points, failure)
    }
}

struct Loss<'a> {
    figure: &'a LossCurves,
}

impl Figure for Loss<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let f = self.figure;
        let series = curve_series(f.curves.iter().map(|c| (&c.series, c.workers)));
        let mut legend = Vec::new();
        let mut curves = Vec::new();
        for s in &series {
            for c in f.curves.iter().filter(|c| s.is(&c.series, c.workers)) {
                let (points, failure) = c.finite_part();
                let label = match &failure {
                    Some(reason) => format!("{} ({reason})", s.label()),
                    None => s.label(),
                };
                let swatch = if points.is_empty() { Swatch::Cross(s.color) } else { Swatch::LineDot(s.color) };
                legend.push(LegendEntry::new(swatch, label));
                curves.push(Curve { color: s.color, points, failure, highlight: None });
            }
        }
        let x_max = curves.iter().flat_map(|c| c.points.iter().map(|p| p.0)).fold(0.0, f64::max);
        let y_max = curves.iter().flat_map(|c| c.points.iter().map(|p| p.1)).fold(0.0, f64::max);
        let y_min = curves.iter().flat_map(|c| c.points.iter().map(|p| p.1)).fold(0.0, f64::min);
        let title = format!("Training loss — {} on {}", f.network, f.dataset);
        let body = with_title(root, &title, Some("× marks where a run stopped, with the reason"))?;
        let plot = with_legend_below(&body, &legend)?;
        let panel = CurvePanel {
            x_desc: "epoch".into(),
            y_desc: "training loss (cross-entropy)".into(),
            x_max: if x_max > 0.0 { x_max * 1.05 } else { 1.0 },
            y_min,
            y_max: if y_max > y_min { y_max * 1.08 } else { y_min + 1.0 },
            curves,
            reference: None,
        };
        draw_curve_panel(&plot, &panel)
    }
}
