//! `stratlab compare` and `stratlab history`: the command-line side of regression tracking.
//! The statistics live in `stratlab-regressions`, the figures in `stratlab-reports`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use stratlab_regressions::{
    compare, comparison_text, gather_runs, history_text, write_comparison, write_history, History, RegressionError,
    RunCells, TextStyle, Thresholds,
};

use crate::cli::{CompareArgs, FigureFormatArg, HistoryArgs, ThresholdArgs};
use crate::exit::{InputError, REGRESSION_EXIT};

fn thresholds(args: &ThresholdArgs) -> anyhow::Result<Thresholds> {
    let mut thresholds = Thresholds {
        statistic: args.statistic.into(),
        significance: args.significance,
        noise: args.noise_threshold,
        ..Thresholds::default()
    };
    thresholds.bootstrap.resamples = args.resamples;
    thresholds.validate().map_err(|why| InputError(format!("--significance/--noise-threshold/--resamples: {why}")))?;
    Ok(thresholds)
}

fn load(run: &Path, role: &str) -> anyhow::Result<RunCells> {
    RunCells::load(run).with_context(|| format!("reading the {role} run {}", run.display()))
}

/// Compares two runs; exit status 3 on a regression or a ranking flip.
pub fn compare_runs(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    let thresholds = Thresholds { per_machine_speed: args.per_machine_speed, ..thresholds(&args.thresholds)? };
    let baseline = load(&args.baseline, "baseline")?;
    let new = load(&args.new, "new")?;
    let comparison = compare(&baseline, &new, &thresholds, args.allow_missing)?;
    let out = args.out.clone().unwrap_or_else(|| args.new.join("compare").join(&baseline.run_id));
    let files = write_comparison(&comparison, &out)
        .with_context(|| format!("writing the comparison into {}", out.display()))?;
    println!("{}", comparison_text(&comparison, TextStyle::Terminal));
    for file in files {
        println!("{}", file.display());
    }
    Ok(if comparison.fails_gate() { ExitCode::from(REGRESSION_EXIT) } else { ExitCode::SUCCESS })
}

/// The history of every suite (or one) in a runs folder.
pub fn history(args: &HistoryArgs) -> anyhow::Result<ExitCode> {
    let thresholds = thresholds(&args.thresholds)?;
    let histories = histories(&args.runs, args.suite.as_deref(), &thresholds)?;
    let out_root = args.out.clone().unwrap_or_else(|| args.runs.join("history"));
    let format = figure_format(args.format);
    for history in histories {
        let out = out_root.join(&history.suite);
        let mut files = write_history(&history, &out).with_context(|| format!("writing {}", out.display()))?;
        let figures = stratlab_reports::write_history_figures(&history, &out.join("figures"), format)
            .with_context(|| format!("drawing the history figures into {}", out.display()))?;
        files.extend(figures.into_iter().map(|(_, path)| path));
        println!("{}", history_text(&history, TextStyle::Terminal));
        for file in files {
            println!("{}", file.display());
        }
        println!();
    }
    Ok(ExitCode::SUCCESS)
}

/// The histories of `runs_folder`: of `suite` only, or of every suite in it.
pub fn histories(runs_folder: &Path, suite: Option<&str>, thresholds: &Thresholds) -> anyhow::Result<Vec<History>> {
    let mut suites =
        gather_runs(runs_folder).with_context(|| format!("reading the runs in {}", runs_folder.display()))?;
    let names: Vec<String> = suites.keys().cloned().collect();
    let available = if names.is_empty() { "none".to_owned() } else { names.join(", ") };
    let chosen: Vec<(String, Vec<RunCells>)> = match suite {
        Some(name) => match suites.remove(name) {
            Some(runs) => vec![(name.to_owned(), runs)],
            None => {
                let folder = runs_folder.to_path_buf();
                return Err(RegressionError::NoSuchSuite { folder, suite: name.to_owned(), available }.into());
            }
        },
        None if suites.is_empty() => {
            return Err(InputError(format!(
                "{} holds no run (no folder with fingerprint.json and suite.yaml)",
                runs_folder.display()
            ))
            .into())
        }
        None => suites.into_iter().collect(),
    };
    Ok(chosen.into_iter().map(|(suite, runs)| History::new(&suite, runs, thresholds)).collect())
}

/// The figure format the reports crate draws for a command-line choice.
pub fn figure_format(format: FigureFormatArg) -> stratlab_reports::Format {
    match format {
        FigureFormatArg::Svg => stratlab_reports::Format::Svg,
        FigureFormatArg::Png => stratlab_reports::Format::Png,
    }
}

/// The history of `run`'s own suite in `runs_folder`, for `report --history`.
pub fn history_of_run(run: &Path, runs_folder: &Path) -> anyhow::Result<History> {
    let run_id = run.file_name().map_or_else(String::new, |name| name.to_string_lossy().into_owned());
    let suite = stratlab_regressions::suite_label(&run_id);
    let mut histories = histories(runs_folder, Some(&suite), &Thresholds::default())?;
    Ok(histories.remove(0))
}
