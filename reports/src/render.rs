//! Turns one drawing routine into SVG and PNG files, with the bundled font registered first.

use std::path::PathBuf;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::png_backend::PngBackend;
use crate::report_error::write_file;
use crate::style::{DEJAVU_SANS, FONT_FAMILY};
use crate::{FigureTarget, Format, ReportError};

/// A plotters failure while drawing, before the file it belongs to is known.
#[derive(Debug)]
pub(crate) struct DrawError(pub(crate) String);

impl<E: std::error::Error + Send + Sync> From<DrawingAreaErrorKind<E>> for DrawError {
    fn from(error: DrawingAreaErrorKind<E>) -> Self {
        DrawError(error.to_string())
    }
}

/// A figure that can draw itself on any plotters backend; `render` calls it once per format.
pub(crate) trait Figure {
    /// Draw the whole figure on `root`, which is already filled white.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>;
}

/// Registers the bundled font once per process; plotters' `ab_glyph` backend has no other
/// font source.
pub(crate) fn register_font() -> Result<(), ReportError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        // Bold is requested for nothing, but register it so a future bold title does not fail.
        [FontStyle::Normal, FontStyle::Bold]
            .into_iter()
            .all(|style| plotters::style::register_font(FONT_FAMILY, style, DEJAVU_SANS).is_ok())
    });
    if ok {
        Ok(())
    } else {
        Err(ReportError::Font)
    }
}

/// Draws `figure` into every format of `target`; returns the files written.
pub(crate) fn render(figure: &impl Figure, target: &FigureTarget) -> Result<Vec<PathBuf>, ReportError> {
    register_font()?;
    std::fs::create_dir_all(&target.dir).map_err(|source| ReportError::Io { path: target.dir.clone(), source })?;
    let size = (target.width_px, target.height_px);
    let mut written = Vec::with_capacity(target.formats.len());
    for &format in &target.formats {
        let path = target.path(format);
        let draw_failed = |DrawError(message)| ReportError::Draw { path: path.clone(), message };
        match format {
            Format::Svg => {
                let mut svg = String::new();
                {
                    let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
                    draw_on(figure, &root).map_err(draw_failed)?;
                }
                write_file(&path, svg.as_bytes())?;
            }
            Format::Png => {
                // Rendered into our own RGB buffer and encoded with image 0.25: plotters'
                // file encoder would pull in image 0.24. Text is drawn by PngBackend.
                let font = crate::png_backend::font().ok_or(ReportError::Font)?;
                let mut pixels = vec![0u8; size.0 as usize * size.1 as usize * 3];
                {
                    let root = PngBackend::new(&mut pixels, size, font).into_drawing_area();
                    draw_on(figure, &root).map_err(draw_failed)?;
                }
                let image = image::RgbImage::from_raw(size.0, size.1, pixels).ok_or_else(|| ReportError::Draw {
                    path: path.clone(),
                    message: "pixel buffer does not match the canvas size".into(),
                })?;
                let mut png = std::io::Cursor::new(Vec::new());
                image
                    .write_to(&mut png, image::ImageFormat::Png)
                    .map_err(|source| ReportError::Png { path: path.clone(), source })?;
                write_file(&path, png.get_ref())?;
            }
        }
        written.push(path);
    }
    Ok(written)
}

fn draw_on<DB: DrawingBackend>(figure: &impl Figure, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
    root.fill(&WHITE)?;
    figure.draw(root)?;
    root.present()?;
    Ok(())
}
