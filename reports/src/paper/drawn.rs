//! What a paper section reads and what drawing one gives, shared by the papers' modules.

use stratlab_results::{PaperFigure, PredictionRow, RunView};

use crate::aggregate::RunAggregates;
use crate::run_report::embed;
use crate::tables::SummaryTable;
use crate::{FigureTarget, ReportFigure};

/// What a paper section reads.
pub(crate) struct PaperRun<'a> {
    pub(crate) aggregates: &'a RunAggregates,
    pub(crate) run: &'a RunView,
    pub(crate) predictions: &'a [PredictionRow],
    pub(crate) figure: &'a dyn Fn(&str) -> FigureTarget,
}

/// One paper figure as drawn: its figures, its tables and how to read them; or why the run
/// could not give it.
pub(crate) enum Drawn {
    Shown { figures: Vec<ReportFigure>, tables: Vec<SummaryTable>, caption: String },
    Missing(String),
}

impl Drawn {
    /// A figure's files and a caption, no table.
    pub(super) fn figure(paths: Vec<std::path::PathBuf>, alt: &str, caption: String) -> Drawn {
        Drawn::Shown { figures: embed(paths, alt.to_owned()), tables: Vec::new(), caption }
    }
}

/// A file-name stem for a paper figure (`paper_thesis_fig_3_1`).
pub(super) fn stem(figure: PaperFigure) -> String {
    figure.anchor().replace('-', "_")
}
