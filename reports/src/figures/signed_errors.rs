//! Thesis figs. 4.1, 5.1 and 6.2 in their shape: each prediction's signed error, (predicted
//! − measured) ÷ measured, per network grouped by data set, a panel per predictor; above
//! zero the predictor overestimated the time, below it underestimated. Dashed lines at
//! ±15 %, the bound the thesis reported for its sequential predictor.

use std::path::PathBuf;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::draw::axes::{axis_top, category_labels, draw_x_categories, fmt_tick, panel_grid, y_label_area_px};
use crate::draw::legend::{with_legend_below, LegendEntry, Swatch};
use crate::draw::title::with_title;
use crate::figures::unique_in_order;
use crate::render::{render, DrawError, Figure};
use crate::style::{category_color, font, AXIS_PX, GRID, INK, NOTE_PX, REFERENCE, TICK_PX};
use crate::{FigureTarget, ReportError};

const FIGURE: &str = "signed_errors";

/// The thesis's bound for its sequential predictor (fig. 4.1: "at most 15 percent off").
const BOUND_PERCENT: f64 = 15.0;

/// One cell's signed error by one predictor.
#[derive(Debug, Clone, PartialEq)]
pub struct SignedError {
    /// The predictor (`stratlab model`); one panel each.
    pub predictor: String,
    /// Network name; one bar colour each.
    pub network: String,
    /// Data set name; one group of bars each.
    pub dataset: String,
    /// (predicted − measured) ÷ measured, in %; the median where several cells share a
    /// network and data set.
    pub error_percent: f64,
}

/// Draws `errors` under `title` into `target`; returns the files.
pub fn signed_errors(errors: &[SignedError], title: &str, target: &FigureTarget) -> Result<Vec<PathBuf>, ReportError> {
    if errors.is_empty() {
        return Err(ReportError::Empty { figure: FIGURE });
    }
    if let Some((i, error)) = errors.iter().enumerate().find(|(_, e)| !e.error_percent.is_finite()) {
        return Err(ReportError::InvalidInput {
            figure: FIGURE,
            field: format!("errors[{i}].error_percent"),
            value: error.error_percent.to_string(),
            why: "an error must be a finite percentage",
        });
    }
    render(&SignedErrors { errors, title }, target)
}

struct SignedErrors<'a> {
    errors: &'a [SignedError],
    title: &'a str,
}

impl Figure for SignedErrors<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let predictors = unique_in_order(self.errors.iter().map(|e| e.predictor.as_str()));
        let networks = unique_in_order(self.errors.iter().map(|e| e.network.as_str()));
        let datasets = unique_in_order(self.errors.iter().map(|e| e.dataset.as_str()));
        let body = with_title(
            root,
            self.title,
            Some("(predicted − measured) ÷ measured: above 0 the prediction was too slow, below it too fast"),
        )?;
        let mut legend: Vec<LegendEntry> = networks
            .iter()
            .enumerate()
            .map(|(i, n)| LegendEntry::new(Swatch::Fill(category_color(i)), n.clone()))
            .collect();
        legend.push(LegendEntry::new(Swatch::Line { color: REFERENCE, dashed: true }, format!("±{BOUND_PERCENT} %")));
        let plot = with_legend_below(&body, &legend)?;
        let largest = self.errors.iter().map(|e| e.error_percent.abs()).fold(BOUND_PERCENT, f64::max);
        let top = axis_top(largest * 1.1);
        for (predictor, area) in predictors.iter().zip(panel_grid(&plot, predictors.len())) {
            let errors: Vec<&SignedError> = self.errors.iter().filter(|e| &e.predictor == predictor).collect();
            draw_panel(&area, predictor, &errors, &networks, &datasets, top)?;
        }
        Ok(())
    }
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    predictor: &str,
    errors: &[&SignedError],
    networks: &[String],
    datasets: &[String],
    top: f64,
) -> Result<(), DrawError> {
    let groups = datasets.len().max(1);
    let y_area = y_label_area_px(area, -top)?;
    let group_px = f64::from(area.dim_in_pixel().0.saturating_sub(y_area + 30)) / groups as f64;
    let cats = category_labels(area, datasets, group_px, AXIS_PX as u32 + 6)?;
    let mut chart = ChartBuilder::on(area)
        .caption(predictor, font(AXIS_PX))
        .margin(8)
        .margin_right(18)
        .x_label_area_size(cats.area_px)
        .y_label_area_size(y_area)
        .build_cartesian_2d(0f64..groups as f64, -top..top)?;
    let format = |value: &f64| fmt_tick(value);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_labels(9)
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .axis_style(INK)
        .label_style(font(TICK_PX))
        .axis_desc_style(font(AXIS_PX))
        .x_desc("data set")
        .y_desc("step error (%)")
        .y_label_formatter(&format)
        .draw()?;
    chart.draw_series(LineSeries::new([(0.0, 0.0), (groups as f64, 0.0)], INK.stroke_width(1)))?;
    for bound in [BOUND_PERCENT, -BOUND_PERCENT] {
        chart.draw_series(DashedLineSeries::new(
            [(0.0, bound), (groups as f64, bound)],
            8,
            5,
            REFERENCE.stroke_width(2),
        ))?;
    }
    let slots = networks.len().max(1) as f64;
    // A lone network's bar stays a bar, not a slab across its data set.
    let width = (0.8 / slots).min(0.3);
    let first = 0.5 - width * slots / 2.0;
    let screen = area.use_screen_coord();
    for (g, dataset) in datasets.iter().enumerate() {
        for (n, network) in networks.iter().enumerate() {
            let Some(error) = errors.iter().find(|e| &e.dataset == dataset && &e.network == network) else { continue };
            let x0 = g as f64 + first + n as f64 * width;
            let value = error.error_percent.clamp(-top, top);
            chart.draw_series([Rectangle::new([(x0, 0.0), (x0 + width * 0.9, value)], category_color(n).filled())])?;
            let (px, py) = chart.backend_coord(&(x0 + width * 0.45, value));
            let (anchor, dy) = if value >= 0.0 { (VPos::Bottom, -3) } else { (VPos::Top, 3) };
            let style = font(NOTE_PX).color(&INK).pos(Pos::new(HPos::Center, anchor));
            screen.draw(&Text::new(format!("{:+.0}", error.error_percent), (px, py + dy), style))?;
        }
    }
    let bottom_px = chart.backend_coord(&(0.0, -top)).1;
    let labels: Vec<(i32, String)> = datasets
        .iter()
        .enumerate()
        .map(|(g, dataset)| (chart.backend_coord(&(g as f64 + 0.5, -top)).0, dataset.clone()))
        .collect();
    draw_x_categories(&screen, &labels, bottom_px, cats.layout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Format;

    fn error(predictor: &str, network: &str, dataset: &str, error_percent: f64) -> SignedError {
        SignedError { predictor: predictor.into(), network: network.into(), dataset: dataset.into(), error_percent }
    }

    #[test]
    fn signed_bars_per_network_and_data_set_a_panel_per_predictor() {
        let dir = tempfile::tempdir().unwrap();
        let errors = vec![
            error("stratlab model", "resnet18", "mnist", 8.0),
            error("stratlab model", "vgg11", "mnist", -12.0),
            error("stratlab model", "resnet18", "cifar10", -40.0),
            error("thesis closed forms", "resnet18", "mnist", 25.0),
        ];
        let target = FigureTarget::new(dir.path(), "signed").with_formats(&[Format::Svg]);
        let svg = std::fs::read_to_string(&signed_errors(&errors, "Thesis fig. 5.1", &target).unwrap()[0]).unwrap();
        for text in ["thesis closed forms", "cifar10", "vgg11", "-40", "+25", "±15 %"] {
            assert!(svg.contains(text), "{text}");
        }
        assert!(signed_errors(&[error("m", "n", "d", f64::INFINITY)], "t", &target).is_err());
        assert!(signed_errors(&[], "t", &target).is_err());
    }
}
