//! The common shape of the single-GPU vs data/model/GPipe study's per-strategy bar figures
//! (throughput, epoch time, utilisation, memory): panels per metric, categories per network
//! (and data set), one bar
//! per strategy and worker count in that strategy's colour.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::draw::axes::{axis_top, panel_grid};
use crate::draw::bars::{
    any_repeats, compute_marks, draw_bar_panel, mark_legend, max_value, Bar, BarGroup, BarPanel, Mark, YScale,
};
use crate::draw::legend::{with_legend_below, LegendEntry, Swatch};
use crate::draw::title::with_title;
use crate::figures::{case_label, repeat_note, unique_in_order};
use crate::render::DrawError;
use crate::style::{strategy_color, tint};
use crate::{Plotted, StrategySeries};
use stratlab_strategy_spec::StrategyKind;

/// One trial's values, one per panel, in panel order.
pub(crate) struct CaseRow<'a> {
    pub series: &'a StrategySeries,
    pub network: &'a str,
    pub dataset: &'a str,
    pub workers: u32,
    pub values: Vec<Plotted>,
}

/// A panel's caption and y axis description (with unit).
pub(crate) struct MetricPanel {
    pub title: &'static str,
    pub y_desc: &'static str,
}

/// A bar series: a strategy at one worker count, computing one way.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    /// The strategy (its compute choice in `compute`).
    pub strategy: StrategySeries,
    pub workers: u32,
    /// What it computed in, empty for the default.
    pub compute: String,
    pub color: RGBColor,
    pub mark: Mark,
}

impl Series {
    /// "gpipe (W=4)"; plain "single" for the baseline. What it computed in is the mark's
    /// own legend entry.
    pub(crate) fn label(&self) -> String {
        if self.strategy.kind == StrategyKind::Single && self.workers == 1 {
            self.strategy.label.clone()
        } else {
            format!("{} (W={})", self.strategy.label, self.workers)
        }
    }
}

/// The series of `pairs` in the figures' strategy order, then by W and compute; a strategy
/// seen at several W keeps its hue, lighter for larger W, so colour still names the
/// strategy, and what it computed in is its mark ([`compute_marks`]).
pub(crate) fn strategy_series<'a>(pairs: impl IntoIterator<Item = (&'a StrategySeries, u32)>) -> Vec<Series> {
    let mut keys: Vec<(StrategySeries, u32, String)> = Vec::new();
    for (series, workers) in pairs {
        let key = (series.strategy(), workers, series.compute.clone());
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys.sort();
    let marks = compute_marks(keys.iter().map(|(_, _, compute)| compute.as_str()));
    let mut widths: Vec<(StrategySeries, u32)> = keys.iter().map(|(s, w, _)| (s.clone(), *w)).collect();
    widths.dedup();
    keys.iter()
        .map(|(strategy, workers, compute)| {
            let rank = widths.iter().filter(|(s, w)| s == strategy && w < workers).count();
            let color = tint(strategy_color(strategy.kind), (0.3 * rank as f64).min(0.7));
            let mark = marks.iter().find(|(c, _)| c == compute).map_or(Mark::Plain, |(_, mark)| *mark);
            Series { strategy: strategy.clone(), workers: *workers, compute: compute.clone(), color, mark }
        })
        .collect()
}

/// A curve's series: a strategy at one worker count computing one way, in its strategy's
/// colour, lighter for each further worker count or compute choice of the strategy.
pub(crate) struct CurveSeries {
    series: StrategySeries,
    workers: u32,
    pub color: RGBColor,
}

impl CurveSeries {
    /// Whether a curve of `series` at `workers` belongs to this series.
    pub(crate) fn is(&self, series: &StrategySeries, workers: u32) -> bool {
        &self.series == series && self.workers == workers
    }

    /// "gpipe (W=4) · bf16"; plain "single" for the baseline.
    pub(crate) fn label(&self) -> String {
        let compute = match self.series.compute.is_empty() {
            true => String::new(),
            false => format!(" · {}", self.series.compute),
        };
        if self.series.kind == StrategyKind::Single && self.workers == 1 {
            format!("{}{compute}", self.series.label)
        } else {
            format!("{} (W={}){compute}", self.series.label, self.workers)
        }
    }
}

/// The curve series of `pairs` in the figures' strategy order, then by W and compute.
pub(crate) fn curve_series<'a>(pairs: impl IntoIterator<Item = (&'a StrategySeries, u32)>) -> Vec<CurveSeries> {
    let mut keys: Vec<(StrategySeries, u32, String, StrategySeries)> = Vec::new();
    for (series, workers) in pairs {
        let key = (series.strategy(), workers, series.compute.clone(), series.clone());
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys.sort();
    keys.iter()
        .enumerate()
        .map(|(i, (strategy, workers, _, series))| {
            let rank = keys[..i].iter().filter(|(s, ..)| s == strategy).count();
            let color = tint(strategy_color(strategy.kind), (0.3 * rank as f64).min(0.7));
            CurveSeries { series: series.clone(), workers: *workers, color }
        })
        .collect()
}

/// Draws the title, legend and one bar panel per metric.
pub(crate) fn draw_strategy_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    rows: &[CaseRow<'_>],
    panels: &[MetricPanel],
) -> Result<(), DrawError> {
    let datasets = unique_in_order(rows.iter().map(|r| r.dataset));
    let one_dataset = datasets.len() == 1;
    let cases: Vec<(String, String)> = {
        let mut cases = Vec::new();
        for row in rows {
            let case = (row.network.to_string(), row.dataset.to_string());
            if !cases.contains(&case) {
                cases.push(case);
            }
        }
        cases
    };
    let series = strategy_series(rows.iter().map(|r| (r.series, r.workers)));
    let all = rows.iter().flat_map(|r| r.values.iter());
    let repeats = any_repeats(all.clone());
    let title = if one_dataset { format!("{title} — {}", datasets[0]) } else { title.to_string() };

    let body = with_title(root, &title, Some(&repeat_note(all.clone())))?;
    let mut legend: Vec<LegendEntry> = Vec::new();
    for s in &series {
        let entry = LegendEntry::new(Swatch::Fill(s.color), s.label());
        if !legend.iter().any(|known| known.label == entry.label) {
            legend.push(entry);
        }
    }
    legend.extend(mark_legend(series.iter().map(|s| (s.compute.as_str(), s.mark))));
    if all.clone().any(|o| !matches!(o, Plotted::Measured(_))) {
        legend.push(LegendEntry::new(Swatch::Failed, "failed trial (reason above)"));
    }
    let plot = with_legend_below(&body, &legend)?;

    for (pi, (metric, area)) in panels.iter().zip(panel_grid(&plot, panels.len())).enumerate() {
        let groups = cases
            .iter()
            .map(|(network, dataset)| BarGroup {
                label: case_label(network, dataset, one_dataset),
                bars: series
                    .iter()
                    .map(|s| {
                        rows.iter()
                            .find(|r| {
                                r.series.strategy() == s.strategy
                                    && r.series.compute == s.compute
                                    && r.workers == s.workers
                                    && r.network == network
                                    && r.dataset == dataset
                            })
                            .map(|r| Bar { color: s.color, outcome: r.values[pi].clone(), mark: s.mark })
                    })
                    .collect(),
            })
            .collect();
        let y_max = axis_top(max_value(rows.iter().map(|r| &r.values[pi])));
        let y_scale = YScale::for_values(rows.iter().map(|r| &r.values[pi]));
        let panel = BarPanel {
            title: metric.title.into(),
            y_desc: metric.y_desc.into(),
            x_desc: Some(if one_dataset { "network".into() } else { "network / data set".into() }),
            groups,
            reference: None,
            y_max,
            y_scale,
            label_single_runs: repeats,
        };
        draw_bar_panel(&area, &panel)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_follow_the_strategy_order_then_workers_and_keep_one_colour_per_strategy() {
        let (gpipe, single, dp) = (
            StrategySeries::of(StrategyKind::Gpipe),
            StrategySeries::of(StrategyKind::Single),
            StrategySeries::of(StrategyKind::DataParallel),
        );
        let dp_bf16 = dp.clone().computing("bf16");
        let series = strategy_series([(&gpipe, 4), (&single, 1), (&dp, 8), (&dp, 4), (&dp_bf16, 4)]);
        let labels: Vec<String> = series.iter().map(Series::label).collect();
        assert_eq!(
            labels,
            ["single", "data-parallel (W=4)", "data-parallel (W=4)", "data-parallel (W=8)", "gpipe (W=4)"]
        );
        assert_eq!(series[1].color, strategy_color(StrategyKind::DataParallel));
        // bf16 is a mark within data-parallel's colour, not another strategy.
        assert_eq!((series[2].color, series[2].mark), (series[1].color, Mark::Hatched));
        assert_ne!(series[3].color, series[1].color);
    }
}
