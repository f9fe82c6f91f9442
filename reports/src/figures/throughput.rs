//! Figs. 7 and 10 of the single-GPU vs data/model/GPipe study: training throughput (samples/s)
//! and seconds per epoch, a bar per strategy, side by side so a reader sees both the rate and
//! the wall-clock cost.

use std::path::PathBuf;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::figures::check_outcome;
use crate::figures::strategy_bars::{draw_strategy_bars, CaseRow, MetricPanel};
use crate::render::{render, DrawError, Figure};
use crate::{FigureTarget, Plotted, ReportError, StrategySeries};

const FIGURE: &str = "throughput";

/// One trial's speed: throughput and epoch time for a strategy, network, data set and W.
#[derive(Debug, Clone, PartialEq)]
pub struct ThroughputBar {
    /// The strategy: its bar colour, and what it computed in as the bar's mark.
    pub series: StrategySeries,
    /// Network name; x category.
    pub network: String,
    /// Data set name; x category (with the network) when the figure has several.
    pub dataset: String,
    /// Worker count W.
    pub workers: u32,
    /// Training samples per second over all workers.
    pub samples_per_s: Plotted,
    /// Seconds per training epoch.
    pub epoch_time_s: Plotted,
}

/// Draws throughput and epoch time per strategy into `target`; returns the files.
pub fn throughput(bars: &[ThroughputBar], target: &FigureTarget) -> Result<Vec<PathBuf>, ReportError> {
    if bars.is_empty() {
        return Err(ReportError::Empty { figure: FIGURE });
    }
    for (i, bar) in bars.iter().enumerate() {
        check_outcome(FIGURE, format!("bars[{i}].samples_per_s"), &bar.samples_per_s)?;
        check_outcome(FIGURE, format!("bars[{i}].epoch_time_s"), &bar.epoch_time_s)?;
    }
    render(&Throughput { bars }, target)
}

struct Throughput<'a> {
    bars: &'a [ThroughputBar],
}

impl Figure for Throughput<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let rows: Vec<CaseRow<'_>> = self
            .bars
            .iter()
            .map(|b| CaseRow {
                series: &b.series,
                network: &b.network,
                dataset: &b.dataset,
                workers: b.workers,
                values: vec![b.samples_per_s.clone(), b.epoch_time_s.clone()],
            })
            .collect();
        let panels = [
            MetricPanel { title: "Training throughput", y_desc: "throughput (samples/s)" },
            MetricPanel { title: "Time per epoch", y_desc: "time per epoch (s)" },
        ];
        draw_strategy_bars(root, "Throughput and epoch time per strategy", &rows, &panels)
    }
}
