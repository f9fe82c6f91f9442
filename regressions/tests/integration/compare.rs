//! `compare` on hand-made runs: verdicts, outcome changes, unmatched cells and flips.

use crate::common::{fingerprint_at, run, Made};
use stratlab_regressions::{compare, comparison_text, Ranking, RegressionError, TextStyle, Thresholds, Verdict};

#[test]
fn a_ranking_flip_is_called_out_and_fails_the_gate() {
    // Baseline: data parallel leads (64 samples in 0.10 s against 0.12 s).
    let baseline = run(
        "20261123T100000Z-matrix",
        fingerprint_at(0),
        &[Made::new("data-parallel", 2, Some(0.10)), Made::new("parameter-server", 2, Some(0.12))],
    );
    // New run: data parallel slowed to 0.16 s, the parameter server is now 45 % faster.
    let new = run(
        "20261123T110000Z-matrix",
        fingerprint_at(60),
        &[Made::new("data-parallel", 2, Some(0.16)), Made::new("parameter-server", 2, Some(0.11))],
    );
    let comparison = compare(&baseline, &new, &Thresholds::default(), false).unwrap();
    assert_eq!(comparison.leaders.len(), 1);
    let leader = &comparison.leaders[0];
    assert_eq!(leader.ranking, Ranking::Flipped, "{leader:?}");
    assert!(leader.baseline_leader.as_ref().unwrap().0.starts_with("data-parallel ×2"));
    assert!(leader.new_leader.as_ref().unwrap().0.starts_with("parameter-server ×2"));
    let margin = leader.margin.unwrap();
    assert!((margin.ratio - 0.16 / 0.11).abs() < 0.02 && margin.low > 1.3, "{margin:?}");
    assert!(comparison.fails_gate());
    let text = comparison_text(&comparison, TextStyle::Terminal);
    assert!(text.contains("FLIPPED") && text.contains("1 ranking flip."), "{text}");
}

#[test]
fn a_new_leader_within_noise_is_reported_without_failing_the_gate() {
    let baseline = run(
        "20261123T100000Z-matrix",
        fingerprint_at(0),
        &[Made::new("data-parallel", 2, Some(0.100)), Made::new("parameter-server", 2, Some(0.120))],
    );
    // The parameter server improves beyond noise (0.12 → 0.085 s, +41 % throughput) and now
    // leads data parallel by 24 %: within the 30 % noise threshold, so not a flip.
    let new = run(
        "20261123T110000Z-matrix",
        fingerprint_at(60),
        &[Made::new("data-parallel", 2, Some(0.105)), Made::new("parameter-server", 2, Some(0.085))],
    );
    let comparison = compare(&baseline, &new, &Thresholds::default(), false).unwrap();
    assert_eq!(comparison.leaders[0].ranking, Ranking::LeaderWithinNoise);
    let verdicts: Vec<Verdict> = comparison.cells.iter().map(|cell| cell.verdict).collect();
    assert_eq!(verdicts, [Verdict::Noise, Verdict::Improved]);
    assert!(!comparison.fails_gate());
}

#[test]
fn outcomes_unmatched_cells_settings_and_environment_are_listed() {
    let mut later = fingerprint_at(60);
    later.nvidia_driver_version = Some("580.65".into());
    let baseline = run(
        "20261123T100000Z-matrix",
        fingerprint_at(0),
        &[Made::new("single", 1, Some(0.05)), Made::new("gpipe", 2, Some(0.08)), Made::new("hybrid", 4, Some(0.1))],
    );
    let mut one_thread = Made::new("single", 1, Some(0.05));
    one_thread.threads = 2;
    let new = run(
        "20261123T110000Z-matrix",
        later,
        &[one_thread, Made::new("gpipe", 2, None), Made::new("1f1b", 2, Some(0.07))],
    );
    let comparison = compare(&baseline, &new, &Thresholds::default(), false).unwrap();
    let fields: Vec<&str> = comparison.environment_changes.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(fields, ["nvidia_driver_version"]);
    let gpipe = comparison.cells.iter().find(|c| c.key.strategy.name() == "gpipe").unwrap();
    assert!(gpipe.outcome_changed && gpipe.verdict == Verdict::Regressed, "{gpipe:?}");
    assert_eq!((gpipe.baseline_outcome.as_str(), gpipe.new_outcome.as_str()), ("ok", "oom"));
    let single = comparison.cells.iter().find(|c| c.key.strategy.name() == "single").unwrap();
    assert_eq!(single.settings_changed, ["threads 1 → 2"]);
    assert_eq!(single.verdict, Verdict::Noise);
    assert_eq!(comparison.only_in_baseline.len(), 1);
    assert!(comparison.only_in_baseline[0].contains("hybrid ×4"));
    assert!(comparison.only_in_new[0].contains("1f1b ×2"));
    assert!(comparison.fails_gate(), "an ok → oom cell is a regression");
    let markdown = comparison_text(&comparison, TextStyle::Markdown);
    assert!(markdown.contains("| nvidia_driver_version |") && markdown.contains("ok → oom"), "{markdown}");
    let json = serde_json::to_value(&comparison).unwrap();
    assert_eq!(json["cells"][0]["verdict"], "regressed");
}

#[test]
fn identical_runs_have_no_change_and_pass() {
    let cells = [Made::new("single", 1, Some(0.05)), Made::new("data-parallel", 2, Some(0.04))];
    let a = run("20261123T100000Z-matrix", fingerprint_at(0), &cells);
    let b = run("20261123T110000Z-matrix", fingerprint_at(60), &cells);
    let comparison = compare(&a, &b, &Thresholds::default(), false).unwrap();
    assert!(comparison.environment_changes.is_empty());
    assert!(comparison.cells.iter().all(|c| c.verdict == Verdict::Noise && c.step_time_ratio.unwrap().ratio == 1.0));
    assert_eq!(comparison.leaders[0].ranking, Ranking::Unchanged);
    assert!(!comparison.fails_gate());
}

#[test]
fn a_run_stored_before_the_precision_axis_matches_fp32_cells_and_no_other_precision() {
    let before = [Made::new("single", 1, Some(0.05)), Made::new("data-parallel", 2, Some(0.04))];
    let in_precision =
        |precision| before.iter().map(|made| Made { precision: Some(precision), ..*made }).collect::<Vec<_>>();
    let old = run("20261123T100000Z-matrix", fingerprint_at(0), &before);
    let fp32 = run("20261123T110000Z-matrix", fingerprint_at(60), &in_precision("fp32"));
    let comparison = compare(&old, &fp32, &Thresholds::default(), false).unwrap();
    assert!(!comparison.fails_gate(), "a null precision is fp32: the same cells");
    assert!(comparison.cells.iter().all(|c| c.verdict == Verdict::Noise));
    let bf16 = run("20261123T120000Z-matrix", fingerprint_at(120), &in_precision("bf16"));
    let error = compare(&old, &bf16, &Thresholds::default(), false).unwrap_err().to_string();
    assert!(error.contains("no cell in common"), "bf16 cells are other cells: {error}");
    assert!(bf16.cells.keys().all(|key| key.to_string().ends_with("· bf16 · b32")), "the label names the precision");
}

#[test]
fn a_run_stored_before_the_optimizer_axis_matches_sgd_cells_and_not_adam_ones() {
    let before = [Made::new("single", 1, Some(0.05)), Made::new("data-parallel", 2, Some(0.04))];
    let with = |optimizer| before.iter().map(|made| Made { optimizer: Some(optimizer), ..*made }).collect::<Vec<_>>();
    let old = run("20261123T100000Z-matrix", fingerprint_at(0), &before);
    let sgd = run("20261123T110000Z-matrix", fingerprint_at(60), &with("sgd"));
    let comparison = compare(&old, &sgd, &Thresholds::default(), false).unwrap();
    assert!(!comparison.fails_gate() && comparison.cells.len() == 2, "a null optimizer is SGD: the same cells");
    let adam = run("20261123T120000Z-matrix", fingerprint_at(120), &with("adam"));
    let error = compare(&old, &adam, &Thresholds::default(), false).unwrap_err().to_string();
    assert!(error.contains("no cell in common"), "Adam's cells are other cells: {error}");
    assert!(adam.cells.keys().all(|key| key.to_string().ends_with("· adam · b32")), "the label names the optimizer");
}

#[test]
fn a_baseline_cell_the_new_run_lacks_fails_the_gate_unless_allowed() {
    let cells = [Made::new("single", 1, Some(0.05)), Made::new("data-parallel", 2, Some(0.04))];
    let baseline = run("20261123T100000Z-matrix", fingerprint_at(0), &cells);
    let new = run("20261123T110000Z-matrix", fingerprint_at(60), &cells[..1]);
    let strict = compare(&baseline, &new, &Thresholds::default(), false).unwrap();
    assert!(strict.cells.iter().all(|c| c.verdict == Verdict::Noise), "the cell both have is unchanged");
    assert!(strict.fails_for_missing_cells() && strict.fails_gate(), "a run that lost a cell measured less");
    let text = comparison_text(&strict, TextStyle::Terminal);
    assert!(text.contains("absent (fails the gate)") && text.contains("RESULT: cells missing"), "{text}");

    let lenient = compare(&baseline, &new, &Thresholds::default(), true).unwrap();
    assert!(!lenient.fails_gate(), "--allow-missing lists the cell without failing");
    let text = comparison_text(&lenient, TextStyle::Markdown);
    assert!(text.contains("absent (allowed)") && text.contains("RESULT: no regression (missing cells allowed)"));
    assert_eq!(serde_json::to_value(&lenient).unwrap()["missing_allowed"], true);
}

#[test]
fn runs_without_a_cell_in_common_are_nothing_to_compare() {
    let baseline = run("20261123T100000Z-matrix", fingerprint_at(0), &[Made::new("single", 1, Some(0.05))]);
    let empty = run("20261123T110000Z-matrix", fingerprint_at(60), &[]);
    for allow_missing in [false, true] {
        let error = compare(&baseline, &empty, &Thresholds::default(), allow_missing).unwrap_err();
        assert!(matches!(error, RegressionError::NothingToCompare { only_in_baseline: 1, only_in_new: 0, .. }));
        assert!(error.to_string().starts_with("nothing to compare"), "{error}");
    }
}

/// Both runs predicted their cells before training. A slowdown the model foresaw (its
/// profile slowed as much) keeps the model's error; one it did not moves it, and the
/// comparison says so.
#[test]
fn a_change_the_model_did_not_foresee_moves_its_error_and_is_listed() {
    let cells =
        |dp: f64, ps: f64| [Made::new("data-parallel", 2, Some(dp)), Made::new("parameter-server", 2, Some(ps))];
    let mut baseline = run("20261123T100000Z-matrix", fingerprint_at(0), &cells(0.10, 0.12));
    let mut new = run("20261123T110000Z-matrix", fingerprint_at(60), &cells(0.13, 0.156));
    let predict = |run: &mut stratlab_regressions::RunCells, dp: f64, ps: f64| {
        for cell in run.cells.values_mut() {
            let strategy = cell.key.strategy.name();
            cell.predicted_step_s = Some(if strategy == "data-parallel" { dp } else { ps });
        }
    };
    // The model foresaw data-parallel's 30 % slowdown, not the parameter server's.
    predict(&mut baseline, 0.10, 0.12);
    predict(&mut new, 0.13, 0.12);
    let comparison = compare(&baseline, &new, &Thresholds::default(), false).unwrap();
    let cell = |name: &str| comparison.cells.iter().find(|cell| cell.key.strategy.name() == name).unwrap();
    let (dp, ps) = (cell("data-parallel"), cell("parameter-server"));
    // Both slowed by 30 % (within the default noise threshold of a shared machine, but
    // outside the bootstrap interval of steady steps).
    assert!(dp.step_time_ratio.unwrap().low > 1.2 && ps.step_time_ratio.unwrap().low > 1.2);
    assert!(!dp.prediction_error_moved, "{dp:?}");
    assert!(ps.prediction_error_moved, "{ps:?}");
    let (before, after) = ps.prediction_errors.unwrap();
    assert!(before.abs() < 0.03 && (after - (0.12 / 0.156 - 1.0)).abs() < 0.03, "{before} {after}");
    let text = comparison_text(&comparison, TextStyle::Terminal);
    let section = text.split("Prediction errors that moved beyond noise").nth(1).unwrap_or_else(|| panic!("{text}"));
    let listed = section.split("Fastest strategy").next().unwrap();
    assert!(listed.contains("parameter-server") && !listed.contains("data-parallel"), "{listed}");
    // Runs without predictions have no such section.
    let plain = compare(
        &run("a-x", fingerprint_at(0), &cells(0.10, 0.12)),
        &run("b-x", fingerprint_at(60), &cells(0.13, 0.156)),
        &Thresholds::default(),
        false,
    )
    .unwrap();
    assert!(plain.cells.iter().all(|cell| cell.prediction_errors.is_none() && !cell.prediction_error_moved));
}

/// Both runs timed the runner's reference work before each trial: the new run's took 30 %
/// longer, and every cell's row says so beside its own change (the verdicts stand).
#[test]
fn the_machines_own_slowdown_is_shown_beside_each_cell() {
    let cells = [Made::new("data-parallel", 2, Some(0.10)), Made::new("parameter-server", 2, Some(0.12))];
    let slower = [Made::new("data-parallel", 2, Some(0.13)), Made::new("parameter-server", 2, Some(0.156))];
    let mut baseline = run("20261123T100000Z-matrix", fingerprint_at(0), &cells);
    let mut new = run("20261123T110000Z-matrix", fingerprint_at(60), &slower);
    let time_reference = |run: &mut stratlab_regressions::RunCells, seconds: Option<f64>| {
        for trial in run.cells.values_mut().flat_map(|cell| cell.trials.iter_mut()) {
            trial.speed_reference_s = seconds;
        }
    };
    time_reference(&mut baseline, Some(0.008));
    time_reference(&mut new, Some(0.0104));
    let comparison = compare(&baseline, &new, &Thresholds::default(), false).unwrap();
    for cell in &comparison.cells {
        assert!((cell.machine_slowdown.unwrap() - 0.3).abs() < 1e-9, "{cell:?}");
        assert_eq!(cell.verdict, Verdict::Noise, "30 % is within the default threshold, reference or not");
    }
    let text = comparison_text(&comparison, TextStyle::Markdown);
    assert!(text.contains("machine (reference work)") && text.contains("+30.0 %"), "{text}");
    // A baseline from before the reference was timed: nothing to set beside.
    time_reference(&mut baseline, None);
    let comparison = compare(&baseline, &new, &Thresholds::default(), false).unwrap();
    assert!(comparison.cells.iter().all(|cell| cell.machine_slowdown.is_none()));
    let text = comparison_text(&comparison, TextStyle::Markdown);
    assert!(!text.contains("machine (reference work)"), "no column of dashes: {text}");
}

/// `per_machine_speed` judges each cell's change divided by the machine's: a cell that
/// slowed as much as the host did is noise, and one that slowed while the host sped up is a
/// regression the raw ratio hid within the noise band. As measured (the default), the same
/// runs give the opposite verdicts.
#[test]
fn per_machine_speed_takes_the_hosts_own_change_out_of_the_verdict() {
    let time_reference = |run: &mut stratlab_regressions::RunCells, seconds: f64| {
        for trial in run.cells.values_mut().flat_map(|cell| cell.trials.iter_mut()) {
            trial.speed_reference_s = Some(seconds);
        }
    };
    let judged = |before: f64, after: f64, reference: (f64, f64)| {
        let mut baseline = run("20261123T100000Z-matrix", fingerprint_at(0), &[Made::new("single", 1, Some(before))]);
        let mut new = run("20261123T110000Z-matrix", fingerprint_at(60), &[Made::new("single", 1, Some(after))]);
        time_reference(&mut baseline, reference.0);
        time_reference(&mut new, reference.1);
        let verdicts = [false, true].map(|per_machine_speed| {
            let thresholds = Thresholds { per_machine_speed, ..Thresholds::default() };
            let comparison = compare(&baseline, &new, &thresholds, false).unwrap();
            let cell = &comparison.cells[0];
            let (raw, per_machine) = (cell.step_time_ratio.unwrap(), cell.per_machine_step_time_ratio.unwrap());
            assert!((per_machine.ratio - raw.ratio * reference.0 / reference.1).abs() < 1e-9, "{cell:?}");
            let text = comparison_text(&comparison, TextStyle::Markdown);
            assert_eq!(text.contains("step time change ÷ machine"), per_machine_speed, "{text}");
            cell.verdict
        });
        verdicts
    };
    // +60 % on a host 50 % slower: as measured a regression, per machine +7 %, noise.
    assert_eq!(judged(0.10, 0.16, (0.008, 0.012)), [Verdict::Regressed, Verdict::Noise]);
    // +25 % on a host that ran 25 % faster: as measured noise, per machine +67 %.
    assert_eq!(judged(0.10, 0.125, (0.008, 0.006)), [Verdict::Noise, Verdict::Regressed]);
}
