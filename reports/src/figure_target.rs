//! Where a figure goes: folder, file stem, formats and pixel size.

use std::path::{Path, PathBuf};

use crate::Format;

/// The destination of one figure: `<dir>/<stem>.<ext>` for each format.
#[derive(Debug, Clone, PartialEq)]
pub struct FigureTarget {
    /// Folder the files are written to (created if missing).
    pub dir: PathBuf,
    /// File name without extension, e.g. `"speedup_w4"`.
    pub stem: String,
    /// Formats to write; both by default.
    pub formats: Vec<Format>,
    /// Canvas width in pixels (SVG user units); 1200 by default.
    pub width_px: u32,
    /// Canvas height in pixels; 800 by default.
    pub height_px: u32,
}

impl FigureTarget {
    /// A 1200×800 figure in SVG and PNG: the size the fonts and margins are tuned for.
    pub fn new(dir: impl Into<PathBuf>, stem: impl Into<String>) -> Self {
        Self { dir: dir.into(), stem: stem.into(), formats: Format::ALL.to_vec(), width_px: 1200, height_px: 800 }
    }

    /// The same target with only the given formats.
    pub fn with_formats(mut self, formats: &[Format]) -> Self {
        self.formats = formats.to_vec();
        self
    }

    /// The same target with another canvas size (crowded figures may need more room).
    pub fn with_size(mut self, width_px: u32, height_px: u32) -> Self {
        self.width_px = width_px;
        self.height_px = height_px;
        self
    }

    /// The path of the file in `format`.
    pub fn path(&self, format: Format) -> PathBuf {
        Path::new(&self.dir).join(format!("{}.{}", self.stem, format.extension()))
    }
}
