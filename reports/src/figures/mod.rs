//! The figure kinds, one file each, plus the small checks and orderings they share.

pub mod asynchrony;
pub mod device_usage;
pub mod frontier;
pub mod history;
pub mod loss_curves;
pub mod paper_lines;
pub mod pipeline_bubble;
pub mod pipeline_timeline;
pub mod prediction_errors;
#[cfg(test)]
mod readable;
pub mod scaling;
pub mod signed_errors;
pub mod speedup_bars;
pub mod step_breakdown;
mod strategy_bars;
pub mod throughput;
pub mod time_to_accuracy;

use crate::{Plotted, ReportError};

/// Distinct values in order of first appearance: the caller's order is the figure's order.
pub(crate) fn unique_in_order<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for value in values {
        if !seen.iter().any(|s| s == value) {
            seen.push(value.to_string());
        }
    }
    seen
}

/// Rejects measured values that cannot be drawn (NaN, ∞, min > max).
pub(crate) fn check_outcome(figure: &'static str, field: String, outcome: &Plotted) -> Result<(), ReportError> {
    if let Plotted::Measured(stat) = outcome {
        if !stat.is_finite() || stat.min > stat.max || stat.n == 0 {
            return Err(ReportError::InvalidInput {
                figure,
                field,
                value: format!("{stat:?}"),
                why: "a measured value must be finite with min <= max and n >= 1 (record a failure instead)",
            });
        }
    }
    Ok(())
}

/// Rejects a non-finite or negative number.
pub(crate) fn check_non_negative(figure: &'static str, field: String, value: f64) -> Result<(), ReportError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(ReportError::InvalidInput { figure, field, value: value.to_string(), why: "expected a finite number >= 0" })
    }
}

/// The subtitle that says how to read bars: single runs or medians with whiskers.
pub(crate) fn repeat_note<'a>(outcomes: impl IntoIterator<Item = &'a Plotted>) -> String {
    if crate::draw::bars::any_repeats(outcomes) {
        "bars: median over repeats, whiskers: min–max; n=1 marks a single run".into()
    } else {
        "every bar is a single run (n = 1): no spread measured".into()
    }
}

/// The x label of a (network, data set) category: the data set is left out when the whole
/// figure has one (the title says it).
pub(crate) fn case_label(network: &str, dataset: &str, one_dataset: bool) -> String {
    if one_dataset {
        network.to_string()
    } else {
        format!("{network} / {dataset}")
    }
}
