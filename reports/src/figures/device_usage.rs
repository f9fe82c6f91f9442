//! Figs. 8, 9, 17 and 18 of the single-GPU vs data/model/GPipe study: mean and max device
//! utilisation and memory per strategy, four panels so mean and peak are read on their own
//! scales.

use std::path::PathBuf;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::figures::check_outcome;
use crate::figures::strategy_bars::{draw_strategy_bars, CaseRow, MetricPanel};
use crate::render::{render, DrawError, Figure};
use crate::{FigureTarget, Plotted, ReportError, StrategySeries};

const FIGURE: &str = "device_usage";
const BYTES_PER_GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// One trial's device usage, already reduced over its workers (e.g. mean over workers of
/// each worker's mean, and the max over workers of each worker's max).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceUsageBar {
    /// The strategy: its bar colour, and what it computed in as the bar's mark.
    pub series: StrategySeries,
    /// Network name; x category.
    pub network: String,
    /// Data set name.
    pub dataset: String,
    /// Worker count W.
    pub workers: u32,
    /// Mean device utilisation, percent (0–100).
    pub utilisation_mean_pct: Plotted,
    /// Peak device utilisation, percent (0–100).
    pub utilisation_max_pct: Plotted,
    /// Mean device memory in use, bytes.
    pub memory_mean_bytes: Plotted,
    /// Peak device memory in use, bytes.
    pub memory_max_bytes: Plotted,
}

/// Draws utilisation and memory per strategy into `target`; returns the files.
pub fn device_usage(bars: &[DeviceUsageBar], target: &FigureTarget) -> Result<Vec<PathBuf>, ReportError> {
    if bars.is_empty() {
        return Err(ReportError::Empty { figure: FIGURE });
    }
    for (i, bar) in bars.iter().enumerate() {
        check_outcome(FIGURE, format!("bars[{i}].utilisation_mean_pct"), &bar.utilisation_mean_pct)?;
        check_outcome(FIGURE, format!("bars[{i}].utilisation_max_pct"), &bar.utilisation_max_pct)?;
        check_outcome(FIGURE, format!("bars[{i}].memory_mean_bytes"), &bar.memory_mean_bytes)?;
        check_outcome(FIGURE, format!("bars[{i}].memory_max_bytes"), &bar.memory_max_bytes)?;
    }
    render(&DeviceUsage { bars }, target)
}

struct DeviceUsage<'a> {
    bars: &'a [DeviceUsageBar],
}

impl Figure for DeviceUsage<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let gib = 1.0 / BYTES_PER_GIB;
        let rows: Vec<CaseRow<'_>> = self
            .bars
            .iter()
            .map(|b| CaseRow {
                series: &b.series,
                network: &b.network,
                dataset: &b.dataset,
                workers: b.workers,
                values: vec![
                    b.utilisation_mean_pct.clone(),
                    b.utilisation_max_pct.clone(),
                    b.memory_mean_bytes.scaled(gib),
                    b.memory_max_bytes.scaled(gib),
                ],
            })
            .collect();
        let panels = [
            MetricPanel { title: "Mean device utilisation", y_desc: "utilisation (%)" },
            MetricPanel { title: "Max device utilisation", y_desc: "utilisation (%)" },
            MetricPanel { title: "Mean device memory", y_desc: "memory (GiB)" },
            MetricPanel { title: "Max device memory", y_desc: "memory (GiB)" },
        ];
        draw_strategy_bars(root, "Device utilisation and memory per strategy", &rows, &panels)
    }
}
