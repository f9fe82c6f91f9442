//! The report page as plain data: what [`super::write_report_html`] renders.

use std::path::PathBuf;

/// Everything the HTML report of one run shows, in page order: headline table, notes, one
/// section per figure kind, failed trials, environment fingerprint, suite file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportPage {
    /// Page title (`<title>` and the top heading), e.g. `"stratlab run 2025-06-01T10-00Z"`.
    pub title: String,
    /// The run's identifier, as stored.
    pub run_id: String,
    /// When the report was generated, already formatted (UTC ISO 8601 recommended).
    pub generated_at: String,
    /// The results matrix, shown first; `None` when the run has no headline numbers yet.
    pub headline: Option<HtmlTable>,
    /// One section per figure kind, in the order given.
    pub sections: Vec<ReportSection>,
    /// Failed trials with their reasons; an empty list prints "no trial failed".
    pub failures: Vec<FailedTrialRow>,
    /// The environment fingerprint as key/value pairs, in the order given.
    pub fingerprint: Vec<(String, String)>,
    /// The suite file as it was run, shown verbatim.
    pub suite_yaml: String,
    /// Caveats a reader must see next to the numbers, e.g. "single repeat: spread not shown".
    pub notes: Vec<String>,
}

/// One figure kind: its figures (already written to disk) and any tables that go with them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportSection {
    /// Anchor of the section (`#id` in the table of contents): ASCII letters, digits, `-`
    /// and `_`, unique in the page, and not one of the fixed anchors `contents`, `results`,
    /// `notes`, `failures`, `environment`, `suite`.
    pub id: String,
    /// Section heading, e.g. `"Speedup over single, W = 4"`.
    pub title: String,
    /// How to read the figures (what bars, whiskers and hatching mean); may be empty.
    pub caption: String,
    /// Figure files to embed, in order. Give each figure once, in one format (SVG keeps text
    /// sharp at any zoom); both formats of a figure would show it twice.
    pub figures: Vec<ReportFigure>,
    /// Tables shown below the figures.
    pub tables: Vec<HtmlTable>,
}

/// A figure file to embed and the text that stands in for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportFigure {
    /// An `.svg` or `.png` file (as written by the figure functions); read when the page is
    /// written, so a missing file is an error then.
    pub path: PathBuf,
    /// Alternative text: what the figure shows, for screen readers and for when the image
    /// cannot be shown, e.g. `"Speedup over single per network, one panel per strategy"`.
    /// Must not be blank.
    pub alt: String,
}

impl ReportFigure {
    /// A figure file with its alternative text.
    pub fn new(path: impl Into<PathBuf>, alt: impl Into<String>) -> Self {
        Self { path: path.into(), alt: alt.into() }
    }
}

/// A table of already formatted cells: the caller decides units and precision.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HtmlTable {
    /// Shown as the table's caption; may be empty.
    pub title: String,
    /// Column headings.
    pub header: Vec<String>,
    /// Rows of cells; each as long as `header`.
    pub rows: Vec<Vec<String>>,
    /// Which columns hold numbers and are right-aligned (so digits line up); a column past
    /// the end of this list is left-aligned.
    pub numeric_columns: Vec<bool>,
    /// Shown with every column even where one is the same in every row: a paper's grid,
    /// whose columns are the data sets or configurations it compares, keeps its shape.
    pub whole: bool,
}

/// A trial that produced no result, as the page lists it with the reason, so a failure is
/// never a gap.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedTrialRow {
    /// The trial's identifier, as stored.
    pub trial_id: String,
    /// Network name.
    pub network: String,
    /// Data set name.
    pub dataset: String,
    /// The strategy as the report names it (`gpipe (m4) · bf16`).
    pub strategy: String,
    /// Worker count W.
    pub workers: u32,
    /// How it ended.
    pub outcome: stratlab_results::Outcome,
    /// The recorded reason (an error message or the tail of a log), shown verbatim.
    pub reason: String,
}
