//! The common shape of the single-GPU vs data/model/GPipe study's per-strategy bar figures
//! (throughput, epoch time, utilisation, memory): panels per metric, categories per network
//! (and data set), one bar
//! per strategy and worker count in that strategy's colour.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::draw::axes::{axis_top, panel_grid};
use crate::draw::bars::{any_repeats, draw_bar_panel, max_value, Bar, BarGroup, BarPanel, YScale};
use crate::draw::legend::{with_legend_below, LegendEntry, Swatch};
use crate::draw::title::with_title;
use crate::figures::{case_label, repeat_note, unique_in_order};
use crate::render::DrawError;
use crate::style::{strategy_color, strategy_rank, tint};
use crate::Outcome;

/// One trial's values, one per panel, in panel order.
pub(crate) struct CaseRow<'a> {
    pub strategy: &'a str,
    pub network: &'a str,
    pub dataset: &'a str,
    pub workers: u32,
    pub values: Vec<Outcome>,
}

/// A panel's caption and y axis description (with unit).
pub(crate) struct MetricPanel {
    pub title: &'static str,
    pub y_desc: &'static str,
}

/// A bar series: a strategy at one worker count.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    pub strategy: String,
    pub workers: u32,
    pub color: RGBColor,
}

impl Series {
    /// "gpipe (W=4)"; plain "single" for the baseline.
    pub(crate) fn label(&self) -> String {
        if self.strategy.eq_ignore_ascii_case("single") && self.workers == 1 {
            self.strategy.clone()
        } else {
            format!("{} (W={})", self.strategy, self.workers)
        }
    }
}

/// The series of `pairs` in `style.rs`'s strategy order, then by W; a strategy seen at several W
/// keeps its hue, lighter for larger W, so colour still names the strategy.
pub(crate) fn strategy_series<'a>(pairs: impl IntoIterator<Item = (&'a str, u32)>) -> Vec<Series> {
    let mut keys: Vec<(String, u32)> = Vec::new();
    for (strategy, workers) in pairs {
        if !keys.iter().any(|(s, w)| s == strategy && *w == workers) {
            keys.push((strategy.to_string(), workers));
        }
    }
    keys.sort_by_key(|(s, w)| (strategy_rank(s), *w));
    keys.iter()
        .map(|(strategy, workers)| {
            let rank = keys.iter().filter(|(s, w)| s == strategy && w < workers).count();
            let color = tint(strategy_color(strategy), (0.3 * rank as f64).min(0.7));
            Series { strategy: strategy.clone(), workers: *workers, color }
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
    let series = strategy_series(rows.iter().map(|r| (r.strategy, r.workers)));
    let all = rows.iter().flat_map(|r| r.values.iter());
    let repeats = any_repeats(all.clone());
    let title = if one_dataset { format!("{title} — {}", datasets[0]) } else { title.to_string() };

    let body = with_title(root, &title, Some(&repeat_note(all.clone())))?;
    let mut legend: Vec<LegendEntry> =
        series.iter().map(|s| LegendEntry::new(Swatch::Fill(s.color), s.label())).collect();
    if all.clone().any(|o| matches!(o, Outcome::Failed(_))) {
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
                                r.strategy == s.strategy
                                    && r.workers == s.workers
                                    && r.network == network
                                    && r.dataset == dataset
                            })
                            .map(|r| Bar { color: s.color, outcome: r.values[pi].clone() })
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
    fn series_follow_spec_order_then_workers() {
        let series = strategy_series([("gpipe", 4), ("single", 1), ("data-parallel", 8), ("data-parallel", 4)]);
        let labels: Vec<String> = series.iter().map(Series::label).collect();
        assert_eq!(labels, ["single", "data-parallel (W=4)", "data-parallel (W=8)", "gpipe (W=4)"]);
        assert_eq!(series[1].color, strategy_color("data-parallel"));
        assert_ne!(series[2].color, series[1].color);
    }
}
