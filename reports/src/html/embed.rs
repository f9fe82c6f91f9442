//! Figure files as `data:` URIs, so the page carries its images inside it.

use std::path::Path;

use base64::Engine as _;

use crate::ReportError;

/// The `data:` URI of an SVG or PNG file, its type taken from the extension.
///
/// SVG is base64-encoded too, although it is text: percent-encoding it would need care with
/// `#`, quotes and non-ASCII labels ("×", "–"), and base64 has no such cases.
pub(super) fn data_uri(path: &Path) -> Result<String, ReportError> {
    let mime = mime_type(path).ok_or_else(|| ReportError::FigureFormat { path: path.to_path_buf() })?;
    let bytes = std::fs::read(path).map_err(|source| ReportError::ReadFigure { path: path.to_path_buf(), source })?;
    let mut uri = format!("data:{mime};base64,");
    base64::engine::general_purpose::STANDARD.encode_string(bytes, &mut uri);
    Ok(uri)
}

/// The media type a browser needs to decode the file; `None` for anything but SVG and PNG.
fn mime_type(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "svg" => Some("image/svg+xml"),
        "png" => Some("image/png"),
        _ => None,
    }
}
