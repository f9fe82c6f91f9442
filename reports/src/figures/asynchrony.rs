//! The parameter server's trade, drawn: test accuracy against wall time (hardware and
//! statistical efficiency together) and against updates applied (statistical efficiency
//! alone), a curve per trial in its mode's colour, a row per straggler setting.

use std::path::PathBuf;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::draw::axes::time_unit;
use crate::draw::bars::Reference;
use crate::draw::curves::{draw_curve_panel, Curve, CurvePanel};
use crate::draw::legend::{with_legend_below, LegendEntry, Swatch};
use crate::draw::title::with_title;
use crate::figures::check_non_negative;
use crate::render::{render, DrawError, Figure};
use crate::style::{category_color, font, AXIS_PX, REFERENCE};
use crate::{FigureTarget, ReportError};

const FIGURE: &str = "asynchrony";

/// One evaluation of the weights a trial's workers pulled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpdatePoint {
    /// Wall-clock seconds since training started.
    pub wall_s: f64,
    /// Updates the server had applied.
    pub updates: f64,
    /// Test accuracy, 0–1 (drawn in percent).
    pub test_accuracy: f64,
}

/// One trial's curve.
#[derive(Debug, Clone, PartialEq)]
pub struct ModeCurve {
    /// Index into [`AsynchronyFigure::modes`]: its colour and legend entry.
    pub mode: usize,
    /// Evaluations in time order.
    pub points: Vec<UpdatePoint>,
}

/// The trials of one straggler setting: a row of the figure.
#[derive(Debug, Clone, PartialEq)]
pub struct StragglerRow {
    /// `no straggler`, `straggler rank 1 ×2`.
    pub caption: String,
    /// One curve per trial.
    pub curves: Vec<ModeCurve>,
}

/// Every parameter-server trial of one network and data set.
#[derive(Debug, Clone, PartialEq)]
pub struct AsynchronyFigure {
    /// Network name (title).
    pub network: String,
    /// Data set name (title).
    pub dataset: String,
    /// Target test accuracy, 0–1.
    pub target_accuracy: f64,
    /// The modes' labels, in legend order (`sync`, `async`, `bounded k=2`).
    pub modes: Vec<String>,
    /// A row per straggler setting, none first.
    pub rows: Vec<StragglerRow>,
}

/// Draws `figure` into `target`; returns the files.
pub fn asynchrony(figure: &AsynchronyFigure, target: &FigureTarget) -> Result<Vec<PathBuf>, ReportError> {
    if figure.rows.iter().all(|row| row.curves.is_empty()) {
        return Err(ReportError::Empty { figure: FIGURE });
    }
    for (r, row) in figure.rows.iter().enumerate() {
        for (c, curve) in row.curves.iter().enumerate() {
            if curve.mode >= figure.modes.len() {
                let field = format!("rows[{r}].curves[{c}].mode");
                return Err(ReportError::InvalidInput {
                    figure: FIGURE,
                    field,
                    value: curve.mode.to_string(),
                    why: "not an index into modes",
                });
            }
            for (p, point) in curve.points.iter().enumerate() {
                let field = |name: &str| format!("rows[{r}].curves[{c}].points[{p}].{name}");
                check_non_negative(FIGURE, field("wall_s"), point.wall_s)?;
                check_non_negative(FIGURE, field("updates"), point.updates)?;
                check_non_negative(FIGURE, field("test_accuracy"), point.test_accuracy)?;
            }
        }
    }
    let height = 120 + 380 * figure.rows.len() as u32;
    render(&Drawn { figure }, &target.clone().with_size(target.width_px, height.max(target.height_px)))
}

struct Drawn<'a> {
    figure: &'a AsynchronyFigure,
}

impl Figure for Drawn<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let f = self.figure;
        let all = || f.rows.iter().flat_map(|row| row.curves.iter().flat_map(|curve| curve.points.iter()));
        let (max_s, max_updates) = all().fold((0.0, 0.0), |(s, u), p| (f64::max(s, p.wall_s), f64::max(u, p.updates)));
        let (divisor, unit) = time_unit(max_s);
        let target_pct = f.target_accuracy * 100.0;
        let y_min = all().map(|p| p.test_accuracy * 100.0).fold(target_pct, f64::min);
        let y_min = (y_min / 10.0).floor() * 10.0;
        let mut legend: Vec<LegendEntry> = f
            .modes
            .iter()
            .enumerate()
            .map(|(index, mode)| LegendEntry::new(Swatch::LineDot(category_color(index)), mode.clone()))
            .collect();
        legend.push(LegendEntry::new(
            Swatch::Line { color: REFERENCE, dashed: true },
            format!("target {target_pct:.1} %"),
        ));
        let title = format!("Parameter-server modes — {} on {}", f.network, f.dataset);
        let note = "left: accuracy against wall time; right: against updates the server applied; one curve per \
                    repeat, ringed where it first reaches the target";
        let body = with_title(root, &title, Some(note))?;
        let plot = with_legend_below(&body, &legend)?;
        let reference = || Some(Reference { y: target_pct, label: format!("target {target_pct:.1} %") });
        for (row, area) in f.rows.iter().zip(plot.split_evenly((f.rows.len().max(1), 1))) {
            let (caption, panels) = area.split_vertically(AXIS_PX as i32 + 12);
            let (width, _) = caption.dim_in_pixel();
            caption.draw(&Text::new(
                row.caption.clone(),
                (width as i32 / 2, 4),
                font(AXIS_PX).pos(plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Center,
                    plotters::style::text_anchor::VPos::Top,
                )),
            ))?;
            let curves = |x: fn(&UpdatePoint) -> f64, scale: f64| -> Vec<Curve> {
                row.curves
                    .iter()
                    .map(|curve| Curve {
                        color: category_color(curve.mode),
                        points: curve.points.iter().map(|p| (x(p) / scale, p.test_accuracy * 100.0)).collect(),
                        failure: None,
                        highlight: curve
                            .points
                            .iter()
                            .find(|p| p.test_accuracy >= f.target_accuracy)
                            // Ringed only: three repeats of three modes would write their
                            // times over each other and the target's label; the table has them.
                            .map(|p| ((x(p) / scale, p.test_accuracy * 100.0), String::new())),
                    })
                    .collect()
            };
            let halves = panels.split_evenly((1, 2));
            draw_curve_panel(
                &halves[0],
                &CurvePanel {
                    x_desc: format!("wall-clock time ({unit})"),
                    y_desc: "test accuracy (%)".into(),
                    x_max: (max_s / divisor * 1.05).max(1e-9),
                    y_min,
                    y_max: 100.0,
                    curves: curves(|p| p.wall_s, divisor),
                    reference: reference(),
                },
            )?;
            draw_curve_panel(
                &halves[1],
                &CurvePanel {
                    x_desc: "updates applied".into(),
                    y_desc: "test accuracy (%)".into(),
                    x_max: (max_updates * 1.05).max(1.0),
                    y_min,
                    y_max: 100.0,
                    curves: curves(|p| p.updates, 1.0),
                    reference: reference(),
                },
            )?;
        }
        Ok(())
    }
}
