//! The memory frontier from a run's `batch_probes`: each searched cell's largest batch that
//! trained beside the model's prediction, the throughput its trials measured there, and a
//! cell where nothing fits drawn as failed.

use stratlab_reports::aggregate::Labels;
use stratlab_reports::{frontier_bars, frontier_cells, frontier_table, memory_frontier, FigureTarget};
use stratlab_results::{BatchProbeRow, Outcome, RunView, TrialTables};
use stratlab_strategy_spec::Precision;

const LIMIT: u64 = 64 << 20;

/// Probe `index` of the cell `trial_id` at `batch` (global = batch × `workers`).
fn probe(trial_id: &str, strategy: &str, workers: i64, step: i64, index: i64, batch: i64, fits: bool) -> BatchProbeRow {
    BatchProbeRow {
        run_id: "run".into(),
        trial_id: trial_id.into(),
        label: format!("small-cnn · mnist · {strategy}×{workers} · bmax"),
        network: "small-cnn".into(),
        dataset: "mnist".into(),
        strategy: strategy.parse().unwrap(),
        workers,
        strategy_label: if step > 1 { format!("{strategy} m{step}") } else { strategy.into() },
        batch_step: step,
        probe: index,
        batch_size: batch,
        global_batch: batch * if strategy == "data-parallel" { workers } else { 1 },
        outcome: if fits { Outcome::Ok } else { Outcome::Oom },
        fits,
        reason: (!fits).then(|| "out of memory: stratlab memory limit: …".into()),
        peak_memory_bytes: fits.then_some((batch as u64) << 19),
        memory_limit_bytes: Some(LIMIT),
        predicted_batch_size: Some(if step > 1 { 8 } else { 64 }),
        wall_time_s: 1.5,
    }
}

#[test]
fn a_cell_is_its_largest_fitting_probe_beside_the_prediction_and_its_trials_throughput() {
    let single = "small-cnn__mnist__single__w1__bmax__r0";
    let gpipe = "small-cnn__mnist__gpipe__w2__bmax__m4__r0";
    let mut probes: Vec<BatchProbeRow> = [(64, true), (128, false), (96, false), (80, true), (88, false), (84, false)]
        .into_iter()
        .enumerate()
        .map(|(i, (batch, fits))| probe(single, "single", 1, 1, i as i64, batch, fits))
        .collect();
    probes.extend(
        [(8, false), (4, false)].into_iter().enumerate().map(|(i, (b, f))| probe(gpipe, "gpipe", 2, 4, i as i64, b, f)),
    );
    // The cell's two repeats at the answer, another cell at the same batch that is not it
    // (it computed in bf16), and the pipeline that fitted nothing, recorded infeasible.
    let dir = tempfile::tempdir().unwrap();
    let store = crate::aggregate::new_store(dir.path());
    for (repeat, wall) in [(0, 100.0), (1, 110.0)] {
        let mut trial = crate::aggregate::trial(repeat, "single", 1, 80, repeat, "ok", Some(wall));
        trial.trial_id = format!("small-cnn__mnist__single__w1__bmax__r{repeat}");
        store.write_trial(TrialTables::new(&trial)).unwrap();
    }
    let mut other = crate::aggregate::trial(2, "single", 1, 80, 0, "ok", Some(1000.0));
    other.stored_precision = Some(Precision::Bfloat16);
    store.write_trial(TrialTables::new(&other)).unwrap();
    let mut none_fits = crate::aggregate::trial(3, "gpipe", 2, 4, 0, "infeasible", None);
    none_fits.trial_id = gpipe.into();
    store.write_trial(TrialTables::new(&none_fits)).unwrap();
    let run = RunView::open(store.run_dir()).unwrap();

    let cells = frontier_cells(&probes, &run, &Labels::of(run.cells()));
    assert_eq!(cells.len(), 2);
    let found = &cells[0];
    let largest = found.largest.as_ref().unwrap();
    assert_eq!((largest.batch_size, largest.global_batch, largest.peak_memory_bytes), (80, 80, Some(40 << 20)));
    assert_eq!(found.smallest_failing.as_ref().map(|b| (b.batch_size, b.outcome)), Some((84, Outcome::Oom)));
    assert_eq!(found.predicted, Some((64, 64)));
    // 64 is 16 under 80: more than a bisection step (a sixteenth of 80, at least one sample).
    assert_eq!(found.predicted_within_a_step(), Some(false));
    assert_eq!(found.samples_per_s, Some(105.0), "the median of the cell's own trials");
    assert_eq!((found.probes, found.probing_s), (6, 9.0));
    let none = &cells[1];
    assert!(none.largest.is_none() && none.samples_per_s.is_none() && none.predicted_within_a_step().is_none());

    let table = frontier_table(&cells).unwrap();
    assert_eq!(table.frame.height(), 2);
    let markdown = table.to_markdown();
    assert!(markdown.contains("| gpipe ") && markdown.contains("| no "), "{markdown}");

    let written = memory_frontier(&frontier_bars(&cells), &FigureTarget::new(dir.path(), "memory_frontier")).unwrap();
    let svg = std::fs::read_to_string(&written[0]).unwrap();
    assert!(
        svg.contains("Largest batch that trains") && svg.contains("gpipe (W=2)"),
        "the cell that fits nothing is drawn"
    );
    assert!(svg.contains("oom"), "as failed, with why");
}
