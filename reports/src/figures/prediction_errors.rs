//! Thesis figs. 4.1, 5.1 and 6.2: how far the step predictions made before training were
//! from the measured steps, a panel per strategy, a group per network, a bar per predictor
//! (stratlab's model, the thesis's closed forms): the median |error| over the network's
//! cells (data sets, batches, parameters), whiskers from the smallest to the largest, and
//! a dashed line at 10 %, where the published step-time predictors land.

use std::collections::BTreeMap;
use std::path::PathBuf;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::draw::axes::{axis_top, panel_grid};
use crate::draw::bars::{any_repeats, draw_bar_panel, max_value, Bar, BarGroup, BarPanel, Mark, Reference, YScale};
use crate::draw::legend::{with_legend_below, LegendEntry, Swatch};
use crate::draw::title::with_title;
use crate::figures::{check_non_negative, unique_in_order};
use crate::render::{render, DrawError, Figure};
use crate::style::{category_color, REFERENCE};
use crate::{FigureTarget, Plotted, ReportError, Stat, StrategySeries};

const FIGURE: &str = "prediction_errors";

/// Where the dashed line is drawn: the error the field's predictors report (3–15 %).
const TARGET_PERCENT: f64 = 10.0;

/// One cell's step error by one predictor.
#[derive(Debug, Clone, PartialEq)]
pub struct PredictionError {
    /// The strategy; one panel each.
    pub series: StrategySeries,
    /// Network name; one group of bars each.
    pub network: String,
    /// The predictor, e.g. `"stratlab model"`; one bar colour each.
    pub predictor: String,
    /// |predicted − measured| ÷ measured, in %.
    pub abs_error_percent: f64,
}

/// Draws the deviation bars of `errors` into `target`; returns the files.
pub fn prediction_errors(errors: &[PredictionError], target: &FigureTarget) -> Result<Vec<PathBuf>, ReportError> {
    if errors.is_empty() {
        return Err(ReportError::Empty { figure: FIGURE });
    }
    for (i, error) in errors.iter().enumerate() {
        check_non_negative(FIGURE, format!("errors[{i}].abs_error_percent"), error.abs_error_percent)?;
    }
    render(&PredictionErrors { errors }, target)
}

struct PredictionErrors<'a> {
    errors: &'a [PredictionError],
}

/// The median and range of the errors of each (strategy, network, predictor).
fn outcomes(errors: &[PredictionError]) -> BTreeMap<(StrategySeries, &str, &str), Plotted> {
    let mut grouped: BTreeMap<(StrategySeries, &str, &str), Vec<f64>> = BTreeMap::new();
    for error in errors {
        let key = (error.series.strategy(), error.network.as_str(), error.predictor.as_str());
        grouped.entry(key).or_default().push(error.abs_error_percent);
    }
    grouped
        .into_iter()
        .filter_map(|(key, errors)| Some((key, Plotted::Measured(Stat::from_samples(&errors)?))))
        .collect()
}

impl Figure for PredictionErrors<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let mut strategies: Vec<StrategySeries> = self.errors.iter().map(|e| e.series.strategy()).collect();
        strategies.sort();
        strategies.dedup();
        let networks = unique_in_order(self.errors.iter().map(|e| e.network.as_str()));
        let predictors = unique_in_order(self.errors.iter().map(|e| e.predictor.as_str()));
        let outcomes = outcomes(self.errors);
        let subtitle = match any_repeats(outcomes.values()) {
            true => "bars: median |step error| over the network's cells, whiskers: smallest–largest",
            false => "every bar is one cell",
        };
        let body = with_title(root, "Predicted (before training) vs measured step: |error|", Some(subtitle))?;
        let mut legend: Vec<LegendEntry> = predictors
            .iter()
            .enumerate()
            .map(|(i, p)| LegendEntry::new(Swatch::Fill(category_color(i)), p.clone()))
            .collect();
        legend.push(LegendEntry::new(
            Swatch::Line { color: REFERENCE, dashed: true },
            format!("{TARGET_PERCENT} % (published predictors: 3–15 %)"),
        ));
        let plot = with_legend_below(&body, &legend)?;
        let y_max = axis_top(max_value(outcomes.values()).max(TARGET_PERCENT));
        for (strategy, area) in strategies.iter().zip(panel_grid(&plot, strategies.len())) {
            let groups = networks
                .iter()
                .map(|network| BarGroup {
                    label: network.clone(),
                    bars: predictors
                        .iter()
                        .enumerate()
                        .map(|(pi, predictor)| {
                            let outcome = outcomes.get(&(strategy.clone(), network.as_str(), predictor.as_str()))?;
                            Some(Bar { color: category_color(pi), outcome: outcome.clone(), mark: Mark::Plain })
                        })
                        .collect(),
                })
                .collect();
            let panel = BarPanel {
                title: strategy.label.clone(),
                y_desc: "|step error| (%)".into(),
                x_desc: Some("network".into()),
                groups,
                reference: Some(Reference { y: TARGET_PERCENT, label: format!("{TARGET_PERCENT} %") }),
                y_max,
                y_scale: YScale::Linear,
                label_single_runs: false,
            };
            draw_bar_panel(&area, &panel)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Format;

    fn error(strategy: &str, network: &str, predictor: &str, abs_error_percent: f64) -> PredictionError {
        PredictionError {
            series: StrategySeries::of(strategy.parse().unwrap()),
            network: network.into(),
            predictor: predictor.into(),
            abs_error_percent,
        }
    }

    #[test]
    fn deviation_bars_are_drawn_per_strategy_and_bad_values_refused() {
        let dir = tempfile::tempdir().unwrap();
        let errors = vec![
            error("data-parallel", "resnet18", "stratlab model", 8.0),
            error("data-parallel", "resnet18", "stratlab model", 12.0),
            error("data-parallel", "resnet18", "thesis closed forms", 20.0),
            error("gpipe", "vgg11", "stratlab model", 31.0),
        ];
        let target = FigureTarget::new(dir.path(), "errors").with_formats(&[Format::Svg]);
        let files = prediction_errors(&errors, &target).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.contains("data-parallel") && svg.contains("gpipe") && svg.contains("thesis closed forms"));
        let bad = vec![error("gpipe", "vgg11", "stratlab model", f64::NAN)];
        assert!(prediction_errors(&bad, &target).is_err());
        assert!(prediction_errors(&[], &target).is_err());
    }
}
