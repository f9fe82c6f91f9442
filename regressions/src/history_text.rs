//! A history as text: its runs with the environment changes between them, then its step
//! changes with the changes that could explain each; terminal or Markdown.

use std::collections::{BTreeMap, BTreeSet};

use crate::compare_text::{percent, TextStyle};
use crate::history::History;

/// The history's runs and step changes as text.
pub fn history_text(history: &History, style: TextStyle) -> String {
    let table = |header: &[&str]| style.table(header);
    let heading = |text: &str| style.heading(text);
    let mut out = String::new();
    if style == TextStyle::Markdown {
        out.push_str(&format!("# History of suite {}\n\n", history.suite));
    }
    out.push_str(&format!(
        "{} runs, {} cells; cells summarised by the {} of their timed step times; a step is a lasting change of a \
         cell's level (median over runs) of more than {:.0} % (L1 optimal partition, penalty = the noise threshold).\n\n",
        history.runs.len(),
        history.rows.iter().map(|row| &row.cell).collect::<BTreeSet<_>>().len(),
        history.statistic.name(),
        history.noise_threshold * 100.0
    ));
    out.push_str(&heading("Runs"));
    let mut runs = table(&["#", "run", "started", "environment", "changed since the run before"]);
    let changes: BTreeMap<usize, String> = history
        .environment_changes()
        .into_iter()
        .map(|(i, changes)| {
            (
                i,
                changes
                    .iter()
                    .map(|c| format!("{} {} → {}", c.field, c.baseline, c.new))
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        })
        .collect();
    for (i, run) in history.runs.iter().enumerate() {
        runs.add_row([
            i.to_string(),
            run.run_id.clone(),
            run.run_started.clone(),
            run.environment.clone(),
            changes.get(&i).cloned().unwrap_or_default(),
        ]);
    }
    out.push_str(&format!("{runs}\n\n"));
    out.push_str(&heading("Step changes"));
    if history.steps.is_empty() {
        out.push_str("No cell's metric changed level beyond the noise threshold.\n");
        return out;
    }
    let mut steps = table(&[
        "cell",
        "metric",
        "from run",
        "to run",
        "before",
        "after",
        "change",
        "",
        "environment changes at the step",
    ]);
    for step in &history.steps {
        let suspects = if step.environment_changes.is_empty() {
            "none recorded".to_owned()
        } else {
            step.environment_changes
                .iter()
                .map(|c| format!("{} {} → {}", c.field, c.baseline, c.new))
                .collect::<Vec<_>>()
                .join("; ")
        };
        steps.add_row([
            step.cell.clone(),
            step.metric.axis_label().to_owned(),
            step.from_run.clone(),
            step.to_run.clone(),
            format!("{:.4}", step.before),
            format!("{:.4}", step.after),
            percent(step.after / step.before),
            if step.worse { "worse" } else { "better" }.to_owned(),
            suspects,
        ]);
    }
    out.push_str(&format!("{steps}\n"));
    out
}
