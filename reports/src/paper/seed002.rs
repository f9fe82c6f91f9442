//! Seed 002's two comparisons: images per epoch-second on 1 and 2 devices against ideal
//! scaling with its percentage of scaling (69.63 % on MNIST), and power.

use polars::prelude::Column;
use stratlab_results::stats::median;
use stratlab_results::PaperFigure;

use super::drawn::{stem, Drawn, PaperRun};
use crate::tables::SummaryTable;
use crate::{speedup_scaling_noted, ReportError, ScalingPoint};

/// The scaling comparison: a table of every multi-worker cell's throughput against W ×
/// single's, and the speedup figure.
pub(super) fn scaling(paper_run: &PaperRun<'_>) -> Result<Drawn, ReportError> {
    let aggregates = paper_run.aggregates;
    let cells: Vec<_> = aggregates.throughput.iter().filter(|cell| cell.key.workers > 1).collect();
    if cells.is_empty() {
        return Ok(Drawn::Missing("the run has no cell on more than one worker".into()));
    }
    let baseline = |cell: &crate::aggregate::ThroughputCell| {
        aggregates.throughput.iter().find(|single| single.key == cell.key.baseline())
    };
    let text = |f: &dyn Fn(&crate::aggregate::ThroughputCell) -> String| cells.iter().map(|c| f(c)).collect::<Vec<_>>();
    let number = |f: &dyn Fn(&crate::aggregate::ThroughputCell) -> Option<f64>| {
        cells.iter().map(|c| f(c)).collect::<Vec<Option<f64>>>()
    };
    let single_rate = |cell: &crate::aggregate::ThroughputCell| {
        baseline(cell).and_then(|single| single.wall_samples_per_s.stat()).map(|stat| stat.median)
    };
    let columns = vec![
        Column::new("network".into(), text(&|c| c.key.network.clone())),
        Column::new("dataset".into(), text(&|c| c.key.dataset_label())),
        Column::new("strategy".into(), text(&|c| aggregates.labels.strategy(&c.key))),
        Column::new("W".into(), cells.iter().map(|c| i64::from(c.key.workers)).collect::<Vec<_>>()),
        Column::new("single samples/s".into(), number(&|c| single_rate(c))),
        Column::new(
            "ideal samples/s (W × single)".into(),
            number(&|c| single_rate(c).map(|r| r * f64::from(c.key.workers))),
        ),
        Column::new("measured samples/s".into(), number(&|c| c.wall_samples_per_s.stat().map(|s| s.median))),
        Column::new("scaling (%)".into(), number(&|c| c.speedup.efficiency().map(|s| 100.0 * s.median))),
        Column::new(
            "scaling min–max (%)".into(),
            text(&|c| {
                c.speedup
                    .efficiency()
                    .map(|s| format!("{:.1}–{:.1}", 100.0 * s.min, 100.0 * s.max))
                    .unwrap_or_else(|| c.speedup.baseline_note().unwrap_or_default())
            }),
        ),
    ];
    let table = SummaryTable::from_columns(
        "seed002_scaling",
        "Seed 002: samples per second on 1 and W devices, ideal and measured, and the percentage of scaling",
        columns,
    )?;
    let points: Vec<ScalingPoint> = aggregates.scaling_points();
    let paths = speedup_scaling_noted(
        &points,
        Some("speedup over single against devices; the dashed diagonal is the theoretical scaling"),
        &(paper_run.figure)(&stem(PaperFigure::Seed002Scaling)),
    )?;
    Ok(Drawn::Shown {
        figures: crate::run_report::embed(paths, "Speedup against devices with ideal scaling".to_owned()),
        tables: vec![table],
        caption: "As seed 002's computing-power comparison (MNIST, 1 and 2 GPUs, real against theoretical images \
                  per epoch; \"we achieve 69.63 percent of scaling\"): scaling is measured throughput ÷ (W × \
                  single's), the median over repeats with its range."
            .to_owned(),
    })
}

/// The power comparison: energy per trial and per sample where NVML gave it.
pub(super) fn energy(paper_run: &PaperRun<'_>) -> Result<Drawn, ReportError> {
    let run = paper_run.run;
    let cells = run.cells();
    if cells.is_empty() {
        return Ok(Drawn::Missing("the run has no finished trial".into()));
    }
    let mut per_trial: Vec<Vec<f64>> = vec![Vec::new(); cells.len()];
    let mut per_sample: Vec<Vec<f64>> = vec![Vec::new(); cells.len()];
    let mut sources: Vec<Option<String>> = vec![None; cells.len()];
    for (i, trial) in run.trials().iter().enumerate().filter(|(_, trial)| trial.outcome.is_ok()) {
        let cell = run.cell_index(i);
        let Some(joules) = trial.load.energy_j else { continue };
        per_trial[cell].push(joules);
        let samples = trial.steps_completed as f64 * trial.global_batch as f64;
        if samples > 0.0 {
            per_sample[cell].push(joules / samples);
        }
        sources[cell] = trial.load.energy_source.map(|source| source.to_string());
    }
    let measured = per_trial.iter().any(|joules| !joules.is_empty());
    let none = "none: energy comes from NVML's boards, and this run's devices had none";
    let columns = vec![
        Column::new("network".into(), cells.iter().map(|key| key.network.clone()).collect::<Vec<_>>()),
        Column::new("dataset".into(), cells.iter().map(|key| key.dataset_label()).collect::<Vec<_>>()),
        Column::new(
            "strategy".into(),
            cells
                .iter()
                .map(|key| format!("{}×{}", paper_run.aggregates.labels.strategy(key), key.workers))
                .collect::<Vec<_>>(),
        ),
        Column::new("energy per trial (J, median)".into(), per_trial.iter().map(|j| median(j)).collect::<Vec<_>>()),
        Column::new(
            "energy per sample (mJ, median)".into(),
            per_sample.iter().map(|j| median(j).map(|j| 1e3 * j)).collect::<Vec<_>>(),
        ),
        Column::new(
            "measured by".into(),
            sources.iter().map(|source| source.clone().unwrap_or_else(|| none.to_owned())).collect::<Vec<_>>(),
        ),
    ];
    let table =
        SummaryTable::from_columns("seed002_energy", "Seed 002: energy per trial and per trained sample", columns)?;
    let caption = match measured {
        true => "As seed 002's power comparison: the energy all of a trial's devices drew between their first and \
                 last telemetry sample (the boards' energy counters, else power integrated over time), per trial \
                 and per sample trained, medians over repeats."
            .to_owned(),
        false => format!(
            "As seed 002's power comparison. This run measured no energy ({none}); on a GPU node the table holds \
             each trial's joules and joules per sample."
        ),
    };
    Ok(Drawn::Shown { figures: Vec::new(), tables: vec![table], caption })
}
