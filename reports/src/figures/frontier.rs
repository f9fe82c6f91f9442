//! The memory frontier: per strategy (with its workers, micro-batches and checkpointing),
//! the largest global batch that trained under the memory limit beside the model's
//! prediction of it, and the throughput the cell measured there. A cell where nothing
//! trained is drawn as failed, with why.

use std::path::PathBuf;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::figures::check_outcome;
use crate::figures::strategy_bars::{draw_strategy_bars, CaseRow, MetricPanel};
use crate::render::{render, DrawError, Figure};
use crate::{FigureTarget, Plotted, ReportError, StrategySeries};

const FIGURE: &str = "memory_frontier";

/// One searched cell.
#[derive(Debug, Clone, PartialEq)]
pub struct FrontierBar {
    /// The strategy with its parameters; bar colour and legend, with the workers.
    pub series: StrategySeries,
    /// Workers.
    pub workers: u32,
    /// Network name; x category.
    pub network: String,
    /// Data set name; x category (with the network) when the figure has several.
    pub dataset: String,
    /// The largest global batch that trained.
    pub largest_global_batch: Option<f64>,
    /// The model's largest global batch.
    pub predicted_global_batch: Option<f64>,
    /// Samples/s the cell's trials measured at the largest batch.
    pub samples_per_s: Option<f64>,
    /// Why nothing trained, where nothing did (the smallest probe's outcome).
    pub why_none: Option<String>,
}

/// Draws the frontier into `target`; returns the files.
pub fn memory_frontier(bars: &[FrontierBar], target: &FigureTarget) -> Result<Vec<PathBuf>, ReportError> {
    if bars.is_empty() {
        return Err(ReportError::Empty { figure: FIGURE });
    }
    for (i, bar) in bars.iter().enumerate() {
        for (field, value) in bar.values().iter().enumerate() {
            check_outcome(FIGURE, format!("bars[{i}].values[{field}]"), value)?;
        }
    }
    render(&Frontier { bars }, target)
}

impl FrontierBar {
    /// Measured batch, predicted batch and throughput, each drawn or failed with why.
    fn values(&self) -> [Plotted; 3] {
        let none_fits = || Plotted::Missing(self.why_none.clone().unwrap_or_else(|| "none fits".into()));
        let or = |value: Option<f64>, gap: Plotted| value.map_or(gap, Plotted::single);
        [
            or(self.largest_global_batch, none_fits()),
            or(self.predicted_global_batch, Plotted::Missing("no prediction".into())),
            match (self.samples_per_s, &self.why_none) {
                (Some(samples_per_s), _) => Plotted::single(samples_per_s),
                (None, Some(_)) => none_fits(),
                (None, None) => Plotted::Missing("no ok trial".into()),
            },
        ]
    }
}

struct Frontier<'a> {
    bars: &'a [FrontierBar],
}

impl Figure for Frontier<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let rows: Vec<CaseRow<'_>> = self
            .bars
            .iter()
            .map(|bar| CaseRow {
                series: &bar.series,
                network: &bar.network,
                dataset: &bar.dataset,
                workers: bar.workers,
                values: bar.values().to_vec(),
            })
            .collect();
        let panels = [
            MetricPanel { title: "Largest batch that trains", y_desc: "global batch (samples/step)" },
            MetricPanel { title: "Predicted before probing", y_desc: "global batch (samples/step)" },
            MetricPanel { title: "Throughput there", y_desc: "throughput (samples/s)" },
        ];
        draw_strategy_bars(root, "Memory frontier per strategy", &rows, &panels)
    }
}
