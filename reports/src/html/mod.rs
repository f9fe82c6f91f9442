//! The self-contained HTML report of a run: one `index.html` that
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
mod page;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use crate::report_error::write_file;
use crate::ReportError;

pub use page::{FailedTrialRow, HtmlTable, ReportFigure, ReportPage, ReportSection};

/// The name of the report's "figure" in [`ReportError::InvalidInput`].
const PAGE: &str = "html report";

/// Anchors of the page's fixed parts; a section may not take one of them.
const FIXED_IDS: [&str; 6] = ["contents", "results", "notes", "failures", "environment", "suite"];

/// Writes `page` to `out_dir/index.html` (creating the folder) and returns that path.
///
/// Every figure is read and embedded, so a missing or unreadable file fails here with
/// [`ReportError::ReadFigure`] naming it, rather than leaving a broken image for the reader.
/// The file is written atomically, so a reader (or a crash) never sees half a page.
pub fn write_report_html(page: &ReportPage, out_dir: &Path) -> Result<PathBuf, ReportError> {
    validate(page)?;
    let html = markup::render_page(page)?;
    let path = out_dir.join("index.html");
    write_file(&path, html.as_bytes())?;
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
