//! Output formats of a figure.

/// A file format a figure is written in. SVG is for papers and the HTML report (vector,
/// text stays text); PNG for quick looks and places that cannot show SVG.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Scalable vector graphics; text is left to the viewer's `sans-serif` font.
    Svg,
    /// A raster image, text drawn with the bundled DejaVu Sans.
    Png,
}

impl Format {
    /// Both formats, the default of every figure.
    pub const ALL: [Format; 2] = [Format::Svg, Format::Png];

    /// The file extension, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Svg => "svg",
            Format::Png => "png",
        }
    }
}
