//! How good are the thresholds on this machine? Takes a folder of repeated, unchanged runs
//! of one suite (e.g. `suite/noise-study.yaml` run N times back to back) and reports:
//!
//! - the false-alarm rate: over every pair of runs (earlier as baseline), how many cells
//!   `compare` calls regressed or improved although nothing changed;
//! - the spread of unchanged changes: the largest |change| and interval ends seen;
//! - the power: the same pairs with the new run's steps slowed by s (a uniform slowdown
//!   injected into real measurements), the share of cells flagged as regressed per s, and
//!   the smallest s caught in every pair.
//!
//! `cargo run --release -p stratlab-regressions --example threshold_study -- <runs folder>
//! [--suite noise-study] [--noise 0.1,0.2,0.3] [--significance 0.05]`

use std::path::PathBuf;

use clap::Parser;
use stratlab_regressions::{compare, gather_runs, Statistic, Thresholds};

#[derive(Parser)]
struct Args {
    /// Folder of runs.
    runs: PathBuf,
    /// Suite label (default: the one with most runs).
    #[arg(long)]
    suite: Option<String>,
    /// Noise thresholds to evaluate, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.1,0.15,0.2,0.25,0.3,0.4")]
    noise: Vec<f64>,
    /// Significance level to evaluate.
    #[arg(long, default_value_t = stratlab_regressions::DEFAULT_SIGNIFICANCE)]
    significance: f64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let suites = gather_runs(&args.runs)?;
    let (suite, runs) = match &args.suite {
        Some(name) => (name.clone(), suites.get(name).cloned().unwrap_or_default()),
        None => suites.into_iter().max_by_key(|(_, runs)| runs.len()).unwrap_or_default(),
    };
    anyhow::ensure!(runs.len() >= 2, "need at least two runs of {suite:?} in {}", args.runs.display());
    let pairs: Vec<(usize, usize)> = (0..runs.len()).flat_map(|i| (i + 1..runs.len()).map(move |j| (i, j))).collect();
    let consecutive = pairs.iter().filter(|(i, j)| j - i == 1).count();
    println!(
        "suite {suite}: {} runs, {} pairs ({consecutive} consecutive), α = {}; every pair compared once per statistic.",
        runs.len(),
        pairs.len(),
        args.significance
    );
    println!(
        "A slowdown s injected into the later run multiplies its every resampled statistic by 1 + s (the resamples \
         draw the same steps), so its interval is the unchanged one × (1 + s): the power columns are exact.\n"
    );
    let slowdowns = [0.2, 0.3, 0.4, 0.5, 0.75, 1.0];
    println!(
        "{:<26} {:>6}  {:>18}  {:>12}  {:>12}   caught at slowdown {}",
        "statistic",
        "noise",
        "false alarms",
        "pairs hit",
        "consec. hit",
        slowdowns.map(|s| format!("{:>5.0}%", s * 100.0)).join(" ")
    );
    for statistic in Statistic::ALL {
        let thresholds = Thresholds { statistic, significance: args.significance, ..Thresholds::default() };
        // (pair index, interval of new ÷ baseline) of every measured cell of every pair.
        let mut intervals: Vec<(usize, f64, f64, f64)> = Vec::new();
        let mut cell_names: Vec<String> = Vec::new();
        for (p, &(i, j)) in pairs.iter().enumerate() {
            // Runs of the study share their cells; a pair with none in common has nothing to add.
            let cells = compare(&runs[i], &runs[j], &thresholds, true).map(|c| c.cells).unwrap_or_default();
            for cell in cells {
                if let Some(r) = cell.step_time_ratio {
                    intervals.push((p, r.ratio, r.low, r.high));
                    cell_names.push(cell.cell.clone());
                }
            }
        }
        for (rule, noise) in ["interval", "point"].iter().flat_map(|rule| args.noise.iter().map(move |n| (*rule, *n))) {
            // interval: the whole interval past the band; point: the estimate past the band
            // and the interval excluding no change.
            let slower = |ratio: f64, low: f64| match rule {
                "interval" => low > 1.0 + noise,
                _ => ratio > 1.0 + noise && low > 1.0,
            };
            let flagged = |ratio: f64, low: f64, high: f64| slower(ratio, low) || slower(1.0 / ratio, 1.0 / high);
            let alarms: Vec<usize> = intervals
                .iter()
                .filter(|(_, ratio, low, high)| flagged(*ratio, *low, *high))
                .map(|(p, _, _, _)| *p)
                .collect();
            let mut hit: Vec<usize> = alarms.clone();
            hit.dedup();
            let consecutive_hit = hit.iter().filter(|&&p| pairs[p].1 - pairs[p].0 == 1).count();
            let power: Vec<String> = slowdowns
                .iter()
                .map(|s| {
                    let caught = intervals
                        .iter()
                        .filter(|(_, ratio, low, _)| slower(ratio * (1.0 + s), low * (1.0 + s)))
                        .count();
                    format!("{:>5.1}%", 100.0 * caught as f64 / intervals.len().max(1) as f64)
                })
                .collect();
            println!(
                "{:<26} {:>5.0}%  {:>4} / {:<4} {:>5.1}%  {:>5} / {:<4}  {:>5} / {:<4}   {}",
                format!("{} {rule}", statistic.name()),
                noise * 100.0,
                alarms.len(),
                intervals.len(),
                100.0 * alarms.len() as f64 / intervals.len().max(1) as f64,
                hit.len(),
                pairs.len(),
                consecutive_hit,
                consecutive,
                power.join(" ")
            );
        }
        // The smallest threshold that keeps every unchanged pair-cell quiet, and the smallest
        // slowdown every pair-cell then shows as regressed.
        let quiet = intervals.iter().map(|(_, _, low, high)| (low - 1.0).max(1.0 / high - 1.0)).fold(0.0, f64::max);
        let caught_all = intervals.iter().map(|(_, _, low, _)| (1.0 + quiet) / low - 1.0).fold(0.0, f64::max);
        if statistic == stratlab_regressions::DEFAULT_STATISTIC {
            // Per cell at the default threshold: which cells are noisy, which are steady.
            let noise = stratlab_regressions::DEFAULT_NOISE_THRESHOLD;
            let mut names: Vec<&String> = cell_names.iter().collect();
            names.sort();
            names.dedup();
            for name in names {
                let of: Vec<&(usize, f64, f64, f64)> =
                    intervals.iter().zip(&cell_names).filter(|(_, n)| *n == name).map(|(i, _)| i).collect();
                let alarms =
                    of.iter().filter(|(_, _, low, high)| *low > 1.0 + noise || *high < 1.0 / (1.0 + noise)).count();
                let widest = of.iter().map(|(_, _, low, high)| (high / low - 1.0) * 100.0).fold(0.0, f64::max);
                let largest =
                    of.iter().map(|(_, ratio, _, _)| (ratio.max(1.0 / ratio) - 1.0) * 100.0).fold(0.0, f64::max);
                let power: Vec<String> = slowdowns
                    .iter()
                    .map(|s| {
                        let caught = of.iter().filter(|(_, _, low, _)| low * (1.0 + s) > 1.0 + noise).count();
                        format!("{:>5.1}%", 100.0 * caught as f64 / of.len().max(1) as f64)
                    })
                    .collect();
                println!(
                    "  at {:.0} %: {name}: {alarms} / {} false alarms, largest |change| {largest:.1} %, widest interval \
                     {widest:.1} %; caught {}",
                    noise * 100.0,
                    of.len(),
                    power.join(" ")
                );
            }
        }
        println!(
            "{:<16} quiet above {:.1} %; at that threshold every pair-cell flags a slowdown of {:.1} %\n",
            statistic.name(),
            quiet * 100.0,
            caught_all * 100.0
        );
    }
    Ok(())
}
