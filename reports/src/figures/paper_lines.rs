//! Seed 000's line figures in their paper's shape: a panel per network and data set, a line
//! per strategy, over batch size (figs. 5–6), epochs (fig. 14) or wall time (fig. 11).

use std::path::PathBuf;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::draw::axes::panel_grid;
use crate::draw::curves::{draw_curve_panel, Curve, CurvePanel};
use crate::draw::legend::{with_legend_below, LegendEntry, Swatch};
use crate::draw::title::with_title;
use crate::figures::unique_in_order;
use crate::render::{render, DrawError, Figure};
use crate::style::category_color;
use crate::{FigureTarget, ReportError};

const FIGURE: &str = "paper_lines";

/// One line: a strategy's values on one panel.
#[derive(Debug, Clone, PartialEq)]
pub struct PaperLine {
    /// The panel (`resnet18 / cifar10`).
    pub panel: String,
    /// The legend's name of the line; one colour each over the figure.
    pub label: String,
    /// (x, y) in drawing order; every value finite.
    pub points: Vec<(f64, f64)>,
}

/// A figure of lines, a panel per `PaperLine::panel`.
#[derive(Debug, Clone, PartialEq)]
pub struct PaperLines {
    /// The title.
    pub title: String,
    /// How to read it, under the title.
    pub note: String,
    /// What x is (`batch size`).
    pub x_desc: String,
    /// What y is (`test accuracy (%)`).
    pub y_desc: String,
    /// Whether the y axis starts at zero (times, rates); else it spans the values (an
    /// accuracy's 97–98 % would be a flat line on 0–100).
    pub y_from_zero: bool,
    /// The lines.
    pub lines: Vec<PaperLine>,
}

/// Draws `figure` into `target`; returns the files.
pub fn paper_lines(figure: &PaperLines, target: &FigureTarget) -> Result<Vec<PathBuf>, ReportError> {
    if figure.lines.iter().all(|line| line.points.is_empty()) {
        return Err(ReportError::Empty { figure: FIGURE });
    }
    for (i, line) in figure.lines.iter().enumerate() {
        if let Some((j, point)) = line.points.iter().enumerate().find(|(_, (x, y))| !x.is_finite() || !y.is_finite()) {
            return Err(ReportError::InvalidInput {
                figure: FIGURE,
                field: format!("lines[{i}].points[{j}]"),
                value: format!("{point:?}"),
                why: "a point must be finite",
            });
        }
    }
    render(&Lines { figure }, target)
}

struct Lines<'a> {
    figure: &'a PaperLines,
}

impl Figure for Lines<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let f = self.figure;
        let labels = unique_in_order(f.lines.iter().map(|line| line.label.as_str()));
        let panels = unique_in_order(f.lines.iter().map(|line| line.panel.as_str()));
        let color = |label: &str| category_color(labels.iter().position(|l| l == label).unwrap_or(0));
        let legend: Vec<LegendEntry> =
            labels.iter().map(|label| LegendEntry::new(Swatch::LineDot(color(label)), label.clone())).collect();
        let body = with_title(root, &f.title, Some(&f.note))?;
        let plot = with_legend_below(&body, &legend)?;
        let points = || f.lines.iter().flat_map(|line| line.points.iter());
        let x_max = points().map(|p| p.0).fold(0.0, f64::max);
        let (low, high) = (
            points().map(|p| p.1).fold(f64::INFINITY, f64::min),
            points().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max),
        );
        let (y_min, y_max) = match f.y_from_zero {
            true => (low.min(0.0), high.max(0.0)),
            // A tenth of the span (or of the value, where all are equal) on either side.
            false => {
                let pad = ((high - low) * 0.1).max(high.abs() * 0.01).max(f64::EPSILON);
                (low - pad, high)
            }
        };
        for (panel, area) in panels.iter().zip(panel_grid(&plot, panels.len())) {
            let area = with_title(&area, panel, None)?;
            let curves = f
                .lines
                .iter()
                .filter(|line| &line.panel == panel)
                .map(|line| Curve {
                    color: color(&line.label),
                    points: line.points.clone(),
                    failure: None,
                    highlight: None,
                })
                .collect();
            let curve_panel = CurvePanel {
                x_desc: f.x_desc.clone(),
                y_desc: f.y_desc.clone(),
                x_max: if x_max > 0.0 { x_max * 1.08 } else { 1.0 },
                y_min,
                y_max: if y_max > y_min { y_max + (y_max - y_min) * 0.08 } else { y_min + 1.0 },
                curves,
                reference: None,
            };
            draw_curve_panel(&area, &curve_panel)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Format;

    #[test]
    fn a_panel_per_case_a_line_per_strategy_and_bad_points_refused() {
        let dir = tempfile::tempdir().unwrap();
        let line = |panel: &str, label: &str, points: Vec<(f64, f64)>| PaperLine {
            panel: panel.into(),
            label: label.into(),
            points,
        };
        let mut figure = PaperLines {
            title: "Final accuracy against batch size".into(),
            note: "one point per cell".into(),
            x_desc: "batch size".into(),
            y_desc: "test accuracy (%)".into(),
            y_from_zero: false,
            lines: vec![
                line("small-cnn / mnist", "single", vec![(32.0, 97.0), (64.0, 96.0), (128.0, 94.0)]),
                line("small-cnn / mnist", "data-parallel×2", vec![(32.0, 96.0), (64.0, 95.0)]),
                line("vgg11 / mnist", "single", vec![(64.0, 90.0)]),
            ],
        };
        let target = FigureTarget::new(dir.path(), "lines").with_formats(&[Format::Svg]);
        let svg = std::fs::read_to_string(&paper_lines(&figure, &target).unwrap()[0]).unwrap();
        assert!(svg.contains("vgg11 / mnist") && svg.contains("data-parallel×2") && svg.contains("batch size"));
        figure.lines[0].points[1].1 = f64::NAN;
        assert!(paper_lines(&figure, &target).unwrap_err().to_string().contains("lines[0].points[1]"));
        figure.lines.iter_mut().for_each(|line| line.points.clear());
        assert!(paper_lines(&figure, &target).is_err());
    }
}
