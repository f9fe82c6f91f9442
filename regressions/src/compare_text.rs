//! A comparison as text: the same sections for the terminal (box-drawn tables) and for
//! Markdown (pipe tables), so what CI logs show and what a pull request shows agree.

use comfy_table::presets::{ASCII_MARKDOWN, UTF8_FULL_CONDENSED};
use comfy_table::{CellAlignment, ContentArrangement, Table};

use crate::bootstrap::RatioEstimate;
use crate::compare::{CellChange, Comparison, Leadership, Ranking};
use crate::thresholds::Verdict;

/// Where the text goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextStyle {
    /// Box-drawn tables, plain headings.
    Terminal,
    /// Pipe tables and `#` headings.
    Markdown,
}

impl TextStyle {
    /// An empty table with `header`, drawn for this style.
    pub(crate) fn table(self, header: &[&str]) -> Table {
        let mut table = Table::new();
        match self {
            TextStyle::Terminal => {
                table.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Disabled)
            }
            TextStyle::Markdown => table.load_preset(ASCII_MARKDOWN),
        };
        table.set_header(header.iter().copied());
        table
    }

    /// A section heading for this style.
    pub(crate) fn heading(self, text: &str) -> String {
        match self {
            TextStyle::Terminal => format!("{text}\n{}\n", "─".repeat(text.chars().count())),
            TextStyle::Markdown => format!("## {text}\n\n"),
        }
    }
}

/// Percent change of a ratio: 1.083 → `+8.3 %`.
pub fn percent(ratio: f64) -> String {
    format!("{:+.1} %", (ratio - 1.0) * 100.0)
}

fn seconds(value: Option<f64>) -> String {
    match value {
        Some(s) if s < 1.0 => format!("{:.1} ms", s * 1e3),
        Some(s) => format!("{s:.3} s"),
        None => "—".to_owned(),
    }
}

fn rate(value: Option<f64>) -> String {
    value.map_or_else(|| "—".to_owned(), |v| format!("{v:.1}"))
}

/// The comparison as text in `style`.
pub fn comparison_text(comparison: &Comparison, style: TextStyle) -> String {
    let c = comparison;
    let mut out = String::new();
    if style == TextStyle::Markdown {
        out.push_str(&format!("# stratlab compare: {} → {}\n\n", c.baseline.run_id, c.new.run_id));
    } else {
        out.push_str(&format!("baseline {}  →  new {}\n", c.baseline.run_id, c.new.run_id));
    }
    out.push_str(&format!(
        "\nverdict rule: a cell regressed (improved) when the whole {:.0} % interval of its step-time ratio lies above \
         +{:.0} % (below −{:.0} % throughput); {} bootstrap resamples, seed {}.\nstatistics: {}\n\n",
        c.thresholds.confidence() * 100.0,
        c.thresholds.noise * 100.0,
        c.thresholds.noise * 100.0,
        c.thresholds.bootstrap.resamples,
        c.thresholds.bootstrap.seed,
        c.statistics
    ));
    if c.thresholds.per_machine_speed {
        out.push_str(
            "per machine speed: each verdict judges the step-time ratio divided by the machine's own (the runner's \
             reference work, new ÷ baseline), where both runs timed it.\n\n",
        );
    }

    out.push_str(&style.heading("Environment"));
    if c.environment_changes.is_empty() {
        out.push_str("No fingerprint field differs (same code, libraries, driver, devices and host).\n\n");
    } else {
        let mut table = style.table(&["field", "baseline", "new"]);
        for change in &c.environment_changes {
            table.add_row([change.field.as_str(), change.baseline.as_str(), change.new.as_str()]);
        }
        out.push_str(&format!("{table}\n\n"));
    }

    out.push_str(&style.heading("Cells"));
    out.push_str(&cells_table(&c.cells, c.thresholds.per_machine_speed, style));
    out.push_str("\n\n");

    let changed: Vec<&CellChange> = c.cells.iter().filter(|cell| cell.outcome_changed).collect();
    if !changed.is_empty() || !c.only_in_baseline.is_empty() || !c.only_in_new.is_empty() {
        out.push_str(&style.heading("Outcome changes and unmatched cells"));
        let mut table = style.table(&["cell", "baseline", "new"]);
        for cell in changed {
            table.add_row([cell.cell.as_str(), cell.baseline_outcome.as_str(), cell.new_outcome.as_str()]);
        }
        let absent = if c.missing_allowed { "absent (allowed)" } else { "absent (fails the gate)" };
        for cell in &c.only_in_baseline {
            table.add_row([cell.as_str(), "present", absent]);
        }
        for cell in &c.only_in_new {
            table.add_row([cell.as_str(), "absent", "present"]);
        }
        out.push_str(&format!("{table}\n\n"));
    }

    let moved: Vec<&CellChange> = c.cells.iter().filter(|cell| cell.prediction_error_moved).collect();
    if !moved.is_empty() {
        out.push_str(&style.heading("Prediction errors that moved beyond noise"));
        out.push_str(
            "The model predicted each cell before either run trained; its error moved where the change it \
             foresaw lies outside the measured change's interval.\n\n",
        );
        let mut table = style.table(&["cell", "model error", "predicted change", "measured change"]);
        for cell in moved {
            let errors = cell.prediction_errors.map_or("—".to_owned(), |(before, after)| {
                format!("{:+.0} % → {:+.0} %", 100.0 * before, 100.0 * after)
            });
            let foreseen = cell.predicted_step_ratio.map_or("—".to_owned(), |ratio| format!("×{ratio:.3}"));
            let measured = cell
                .step_time_ratio
                .map_or("—".to_owned(), |r| format!("×{:.3} [{:.3}, {:.3}]", r.ratio, r.low, r.high));
            table.add_row([cell.cell.clone(), errors, foreseen, measured]);
        }
        out.push_str(&format!("{table}\n\n"));
    }

    out.push_str(&style.heading("Fastest strategy per network × data set"));
    out.push_str(&leaders_table(&c.leaders, style));
    out.push_str("\n\n");
    out.push_str(&summary(c));
    out.push('\n');
    out
}

fn cells_table(cells: &[CellChange], per_machine_speed: bool, style: TextStyle) -> String {
    // Runs from before the reference work was timed show no column of dashes.
    let machine_timed = cells.iter().any(|cell| cell.machine_slowdown.is_some());
    let mut header = vec![
        "cell",
        "outcome",
        "step time (baseline → new)",
        "step time change [CI]",
        "throughput samples/s (baseline → new)",
        "throughput change",
        "verdict",
        "settings changed",
    ];
    if machine_timed {
        header.push("machine (reference work)");
    }
    let per_machine_column = machine_timed && per_machine_speed;
    if per_machine_column {
        header.push("step time change ÷ machine [CI]");
    }
    let mut table = style.table(&header);
    for cell in cells {
        let outcome = if cell.baseline_outcome == cell.new_outcome {
            cell.new_outcome.clone()
        } else {
            format!("{} → {}", cell.baseline_outcome, cell.new_outcome)
        };
        let change = |ratio: Option<RatioEstimate>| {
            ratio.map_or_else(
                || "—".to_owned(),
                |r| format!("{} [{}, {}]", percent(r.ratio), percent(r.low), percent(r.high)),
            )
        };
        let verdict = match cell.verdict {
            Verdict::Regressed | Verdict::Improved if style == TextStyle::Markdown => {
                format!("**{}**", cell.verdict.as_str())
            }
            verdict => verdict.as_str().to_owned(),
        };
        let mut row = vec![
            cell.cell.clone(),
            outcome,
            format!("{} → {}", seconds(cell.baseline_step_time_s), seconds(cell.new_step_time_s)),
            change(cell.step_time_ratio),
            format!("{} → {}", rate(cell.baseline_throughput), rate(cell.new_throughput)),
            cell.throughput_ratio.map_or_else(|| "—".to_owned(), |r| percent(r.ratio)),
            verdict,
            cell.settings_changed.join("; "),
        ];
        if machine_timed {
            row.push(cell.machine_slowdown.map_or_else(|| "—".to_owned(), |slowdown| percent(1.0 + slowdown)));
        }
        if per_machine_column {
            row.push(change(cell.per_machine_step_time_ratio));
        }
        table.add_row(row);
    }
    for column in [2, 3, 4, 5] {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table.to_string()
}

fn leaders_table(leaders: &[Leadership], style: TextStyle) -> String {
    let mut table = style.table(&[
        "network · data set",
        "baseline fastest",
        "new fastest",
        "new ÷ old leader in new run",
        "ranking",
    ]);
    let leader =
        |l: &Option<(String, f64)>| l.as_ref().map_or_else(|| "—".to_owned(), |(n, t)| format!("{n} ({t:.1}/s)"));
    for l in leaders {
        let ranking = match l.ranking {
            Ranking::Unchanged => "unchanged",
            Ranking::Flipped if style == TextStyle::Markdown => "**FLIPPED**",
            Ranking::Flipped => "FLIPPED",
            Ranking::LeaderWithinNoise => "new leader within noise",
            Ranking::Incomparable => "incomparable (old leader not in new run)",
        };
        table.add_row([
            format!("{} · {}", l.network, l.dataset),
            leader(&l.baseline_leader),
            leader(&l.new_leader),
            l.margin.map_or_else(|| "—".to_owned(), |m| format!("{:.3} [{:.3}, {:.3}]", m.ratio, m.low, m.high)),
            ranking.to_owned(),
        ]);
    }
    table.to_string()
}

fn summary(c: &Comparison) -> String {
    let count = |verdict| c.cells_with(verdict).count();
    let flips = c.flips().count();
    format!(
        "{} cells compared: {} regressed, {} improved, {} within noise, {} unmeasured; {} only in baseline, {} only in \
         new; {} ranking flip{}. {}",
        c.cells.len(),
        count(Verdict::Regressed),
        count(Verdict::Improved),
        count(Verdict::Noise),
        count(Verdict::Unmeasured),
        c.only_in_baseline.len(),
        c.only_in_new.len(),
        flips,
        if flips == 1 { "" } else { "s" },
        result(c)
    )
}

/// The gate's verdict in words, naming missing cells when they alone fail it.
fn result(c: &Comparison) -> &'static str {
    let regressed = c.cells_with(Verdict::Regressed).next().is_some() || c.flips().next().is_some();
    match (regressed, c.fails_for_missing_cells()) {
        (true, _) => "RESULT: regression",
        (false, true) => "RESULT: cells missing from the new run (--allow-missing lists them without failing)",
        (false, false) if !c.only_in_baseline.is_empty() => "RESULT: no regression (missing cells allowed)",
        (false, false) => "RESULT: no regression",
    }
}
