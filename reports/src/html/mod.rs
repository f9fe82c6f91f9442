//! The self-contained HTML report of a run (SPEC §8, issue 9 point 4): one `index.html` that
//! a reader can open from a mail attachment or an archive years later and see everything.
//!
//! The page is a plain data model ([`ReportPage`] and its parts) plus one writer,
//! [`write_report_html`]. Self-contained means: figures are embedded as `data:` URIs, the CSS
//! sits in a `<style>` block, there is no script and no external URL, and a
//! Content-Security-Policy forbids loading anything but `data:` images, so a later edit that
//! adds a link to a CDN fails visibly instead of silently breaking offline copies.
//! Markup comes from `maud`, which escapes every interpolated string: trial reasons and suite
//! files are user text and may hold `<`, `&` or worse.

mod embed;
mod markup;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use crate::ReportError;

/// The name of the report's "figure" in [`ReportError::InvalidInput`].
const PAGE: &str = "html report";

/// Anchors of the page's fixed parts; a section may not take one of them.
const FIXED_IDS: [&str; 6] = ["contents", "results", "notes", "failures", "environment", "suite"];

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
    pub failures: Vec<FailedTrial>,
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
}

/// A trial that produced no result, listed with the reason so a failure is never a gap.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FailedTrial {
    /// The trial's identifier, as stored.
    pub trial_id: String,
    /// Network name.
    pub network: String,
    /// Data set name.
    pub dataset: String,
    /// Strategy name.
    pub strategy: String,
    /// Worker count W.
    pub workers: u32,
    /// The recorded outcome, e.g. `"oom"`, `"crashed"`, `"timeout"`.
    pub outcome: String,
    /// The recorded reason (an error message or the tail of a log), shown verbatim.
    pub reason: String,
}

/// Writes `page` to `out_dir/index.html` (creating the folder) and returns that path.
///
/// Every figure is read and embedded, so a missing or unreadable file fails here with
/// [`ReportError::ReadFigure`] naming it, rather than leaving a broken image for the reader.
/// The file is written to a temporary name in the same folder and renamed into place, so a
/// reader (or a crash) never sees half a page.
pub fn write_report_html(page: &ReportPage, out_dir: &Path) -> Result<PathBuf, ReportError> {
    validate(page)?;
    let html = markup::render_page(page)?;
    std::fs::create_dir_all(out_dir).map_err(|source| ReportError::Io { path: out_dir.to_path_buf(), source })?;
    let path = out_dir.join("index.html");
    // The pid keeps two processes writing the same report from clobbering each other's
    // temporary file; the rename then makes the last one win whole.
    let tmp = out_dir.join(format!("index.html.tmp-{}", std::process::id()));
    if let Err(source) = std::fs::write(&tmp, html.as_bytes()) {
        let _ = std::fs::remove_file(&tmp);
        return Err(ReportError::Io { path: tmp, source });
    }
    std::fs::rename(&tmp, &path).map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        ReportError::Io { path: path.clone(), source }
    })?;
    Ok(path)
}

/// Rejects what would make a broken page: ragged tables, bad or duplicate anchors, figures
/// without alternative text.
fn validate(page: &ReportPage) -> Result<(), ReportError> {
    if let Some(table) = &page.headline {
        validate_table("headline", table)?;
    }
    let mut seen: Vec<&str> = Vec::new();
    for (s, section) in page.sections.iter().enumerate() {
        let field = || format!("sections[{s}].id");
        let id = section.id.as_str();
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(invalid(field(), id, "an anchor needs ASCII letters, digits, '-' or '_' only"));
        }
        if FIXED_IDS.contains(&id) {
            return Err(invalid(field(), id, "this anchor belongs to a fixed part of the page"));
        }
        if seen.contains(&id) {
            return Err(invalid(field(), id, "two sections share this anchor"));
        }
        seen.push(id);
        for (f, figure) in section.figures.iter().enumerate() {
            if figure.alt.trim().is_empty() {
                let path = figure.path.display().to_string();
                return Err(invalid(format!("sections[{s}].figures[{f}].alt"), &path, "every figure needs alt text"));
            }
        }
        for (t, table) in section.tables.iter().enumerate() {
            validate_table(&format!("sections[{s}].tables[{t}]"), table)?;
        }
    }
    Ok(())
}

fn validate_table(name: &str, table: &HtmlTable) -> Result<(), ReportError> {
    for (r, row) in table.rows.iter().enumerate() {
        if row.len() != table.header.len() {
            let value = format!("{} cells, header has {}", row.len(), table.header.len());
            return Err(invalid(format!("{name}.rows[{r}]"), &value, "a row needs one cell per column"));
        }
    }
    Ok(())
}

fn invalid(field: String, value: &str, why: &'static str) -> ReportError {
    ReportError::InvalidInput { figure: PAGE, field, value: value.to_string(), why }
}
