//! Thesis fig. 3.1: speedup over a single device at one worker count, a panel per strategy,
//! bars per network grouped by data set, with the ideal speedup W drawn across each panel.

use std::path::PathBuf;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::draw::axes::{axis_top, panel_grid};
use crate::draw::bars::{
    any_repeats, compute_marks, draw_bar_panel, mark_legend, max_value, Bar, BarGroup, BarPanel, Mark, Reference,
    YScale,
};
use crate::draw::legend::{with_legend_below, LegendEntry, Swatch};
use crate::draw::title::with_title;
use crate::figures::{check_outcome, repeat_note, unique_in_order};
use crate::render::{render, DrawError, Figure};
use crate::style::{category_color, REFERENCE};
use crate::{FigureTarget, Plotted, ReportError, StrategySeries};

const FIGURE: &str = "speedup_bars";

/// One bar: a strategy's speedup over `single` for one network and data set at `workers`.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeedupBar {
    /// The strategy: one panel each, whatever it computed in (that is the bar's mark).
    pub series: StrategySeries,
    /// Network name, e.g. `"resnet50"`; one bar colour each.
    pub network: String,
    /// Data set name, e.g. `"cifar10"`; one group of bars each.
    pub dataset: String,
    /// Worker count W; the same for every bar of the figure.
    pub workers: u32,
    /// Speedup over `single` (×), or why the trial failed.
    pub speedup: Plotted,
}

/// Draws thesis fig. 3.1 from `bars` (all at the same W) into `target`; returns the files.
pub fn speedup_bars(bars: &[SpeedupBar], target: &FigureTarget) -> Result<Vec<PathBuf>, ReportError> {
    let first = bars.first().ok_or(ReportError::Empty { figure: FIGURE })?;
    for (i, bar) in bars.iter().enumerate() {
        if bar.workers != first.workers {
            return Err(ReportError::InvalidInput {
                figure: FIGURE,
                field: format!("bars[{i}].workers"),
                value: bar.workers.to_string(),
                why: "every bar of the figure must have the same worker count (plot other W separately)",
            });
        }
        check_outcome(FIGURE, format!("bars[{i}].speedup"), &bar.speedup)?;
    }
    render(&SpeedupBars { bars, workers: first.workers }, target)
}

struct SpeedupBars<'a> {
    bars: &'a [SpeedupBar],
    workers: u32,
}

impl Figure for SpeedupBars<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let mut strategies: Vec<StrategySeries> = self.bars.iter().map(|b| b.series.strategy()).collect();
        strategies.sort();
        strategies.dedup();
        let marks = compute_marks(self.bars.iter().map(|b| b.series.compute.as_str()));
        let mark_of = |compute: &str| marks.iter().find(|(c, _)| c == compute).map_or(Mark::Plain, |(_, m)| *m);
        let networks = unique_in_order(self.bars.iter().map(|b| b.network.as_str()));
        let datasets = unique_in_order(self.bars.iter().map(|b| b.dataset.as_str()));
        let outcomes = self.bars.iter().map(|b| &b.speedup);
        let repeats = any_repeats(outcomes.clone());
        let w = self.workers;

        let body = with_title(
            root,
            &format!("Speedup over a single device at W = {w}"),
            Some(&repeat_note(outcomes.clone())),
        )?;
        let mut legend: Vec<LegendEntry> = networks
            .iter()
            .enumerate()
            .map(|(i, n)| LegendEntry::new(Swatch::Fill(category_color(i)), n.clone()))
            .collect();
        legend.push(LegendEntry::new(
            Swatch::Line { color: REFERENCE, dashed: true },
            format!("ideal (speedup = W = {w})"),
        ));
        legend.extend(mark_legend(marks.iter().map(|(compute, mark)| (compute.as_str(), *mark))));
        if self.bars.iter().any(|b| !matches!(b.speedup, Plotted::Measured(_))) {
            legend.push(LegendEntry::new(Swatch::Failed, "failed trial (reason above)"));
        }
        let plot = with_legend_below(&body, &legend)?;

        // One y scale for all panels, so bar heights compare across strategies.
        let y_max = axis_top(max_value(outcomes).max(f64::from(w)));
        for (strategy, area) in strategies.iter().zip(panel_grid(&plot, strategies.len())) {
            let groups = datasets
                .iter()
                .map(|dataset| BarGroup {
                    label: dataset.clone(),
                    // A slot per network and compute choice, so slots line up across groups.
                    bars: networks
                        .iter()
                        .enumerate()
                        .flat_map(|(ni, network)| marks.iter().map(move |(compute, _)| (ni, network, compute)))
                        .filter(|(_, network, compute)| {
                            self.bars.iter().any(|b| {
                                b.series.strategy() == *strategy
                                    && &b.network == *network
                                    && &b.series.compute == *compute
                            })
                        })
                        .map(|(ni, network, compute)| {
                            self.bars
                                .iter()
                                .find(|b| {
                                    b.series.strategy() == *strategy
                                        && &b.network == network
                                        && &b.dataset == dataset
                                        && &b.series.compute == compute
                                })
                                .map(|b| Bar {
                                    color: category_color(ni),
                                    outcome: b.speedup.clone(),
                                    mark: mark_of(compute),
                                })
                        })
                        .collect(),
                })
                .collect();
            let panel = BarPanel {
                title: strategy.label.clone(),
                y_desc: "speedup over single (×)".into(),
                x_desc: Some("data set".into()),
                groups,
                reference: Some(Reference { y: f64::from(w), label: format!("ideal {w}×") }),
                y_max,
                // Speedups are ratios near the ideal W, read against its line: linear.
                y_scale: YScale::Linear,
                label_single_runs: repeats,
            };
            draw_bar_panel(&area, &panel)?;
        }
        Ok(())
    }
}
