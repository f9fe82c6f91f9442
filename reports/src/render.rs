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

/// Where one panel's plot area ended up, and the tick labels its axes drew: what a reader
/// sees of a panel, logged while a figure draws so `render` can give a crowded figure more
/// room and tests can check what was drawn.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PanelLayout {
    /// The panel's top edge on the canvas and its height, pixels.
    pub(crate) top_px: i32,
    pub(crate) panel_px: u32,
    /// The height of its plot area (inside the axes), pixels.
    pub(crate) plot_px: u32,
    /// Every (value, label) its y axis labelled, then its x axis.
    pub(crate) y_ticks: Vec<(f64, String)>,
    pub(crate) x_ticks: Vec<(f64, String)>,
    /// The rectangles (x, y, width, height, pixels) of the notes it wrote inside its plot
    /// (a curve's time to target), which must not cover each other.
    pub(crate) notes: Vec<(i32, i32, i32, i32)>,
}

/// The smallest share of a panel's height its plot area keeps: category labels, captions
/// and axis descriptions take the rest.
pub(crate) const PLOT_SHARE_MIN: f64 = 0.5;
/// The smallest plot area height, pixels, whatever the panel.
pub(crate) const PLOT_PX_MIN: u32 = 150;

thread_local! {
    /// The panels of the figure being drawn on this thread.
    static LAYOUTS: std::cell::RefCell<Vec<PanelLayout>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Records a panel the figure being drawn has laid out.
pub(crate) fn log_panel(layout: PanelLayout) {
    LAYOUTS.with(|layouts| layouts.borrow_mut().push(layout));
}

/// A tick formatter for an axis that logs what it labelled, so a panel can report its ticks.
pub(crate) struct TickLog(std::cell::RefCell<Vec<(f64, String)>>);

impl TickLog {
    pub(crate) fn new() -> TickLog {
        TickLog(std::cell::RefCell::new(Vec::new()))
    }

    /// Labels `value` with `format` and remembers it.
    pub(crate) fn label(&self, value: f64, format: impl Fn(&f64) -> String) -> String {
        let text = format(&value);
        let mut ticks = self.0.borrow_mut();
        if !ticks.iter().any(|(known, _)| *known == value) {
            ticks.push((value, text.clone()));
        }
        text
    }

    /// The ticks labelled, in value order.
    pub(crate) fn ticks(self) -> Vec<(f64, String)> {
        let mut ticks = self.0.into_inner();
        ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
        ticks
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
///
/// A figure whose panels come out too cramped (a plot area under [`PLOT_SHARE_MIN`] of its
/// panel or under [`PLOT_PX_MIN`], as long labels and many panel rows make it) is drawn
/// taller, so each panel keeps a readable plot whatever the panel count and label length.
pub(crate) fn render(figure: &impl Figure, target: &FigureTarget) -> Result<Vec<PathBuf>, ReportError> {
    let (files, layouts) = render_logged(figure, target)?;
    LAST_RENDERED.with(|last| *last.borrow_mut() = layouts);
    Ok(files)
}

thread_local! {
    /// The panels of the last figure `render` wrote on this thread.
    static LAST_RENDERED: std::cell::RefCell<Vec<PanelLayout>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The panels of the last figure [`render`] wrote on this thread, as drawn: what a test
/// checks a reader can read.
#[cfg(test)]
pub(crate) fn last_rendered() -> Vec<PanelLayout> {
    LAST_RENDERED.with(|last| last.borrow().clone())
}

/// [`render`], with the panels of the figure as drawn.
pub(crate) fn render_logged(
    figure: &impl Figure,
    target: &FigureTarget,
) -> Result<(Vec<PathBuf>, Vec<PanelLayout>), ReportError> {
    register_font()?;
    std::fs::create_dir_all(&target.dir).map_err(|source| ReportError::Io { path: target.dir.clone(), source })?;
    let draw_failed = |DrawError(message)| ReportError::Draw { path: target.path(target.formats[0]), message };
    let size = fitting_size(figure, (target.width_px, target.height_px)).map_err(draw_failed)?;
    let mut written = Vec::with_capacity(target.formats.len());
    let mut layouts = Vec::new();
    for &format in &target.formats {
        let path = target.path(format);
        let draw_failed = |DrawError(message)| ReportError::Draw { path: path.clone(), message };
        match format {
            Format::Svg => {
                let (svg, drawn) = draw_svg(figure, size).map_err(draw_failed)?;
                layouts = drawn;
                write_file(&path, svg.as_bytes())?;
            }
            Format::Png => {
                // Rendered into our own RGB buffer and encoded with image 0.25: plotters'
                // file encoder would pull in image 0.24. Text is drawn by PngBackend.
                let font = crate::png_backend::font().ok_or(ReportError::Font)?;
                let mut pixels = vec![0u8; size.0 as usize * size.1 as usize * 3];
                {
                    let root = PngBackend::new(&mut pixels, size, font).into_drawing_area();
                    layouts = draw_logged(figure, &root).map_err(draw_failed)?;
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
    Ok((written, layouts))
}

/// The canvas `figure` needs at `size`'s width: `size`, or taller where a panel's plot area
/// would be cramped. Each try draws into an SVG string and reads the panels' layout.
fn fitting_size(figure: &impl Figure, (width, mut height): (u32, u32)) -> Result<(u32, u32), DrawError> {
    for _ in 0..4 {
        let (_, layouts) = draw_svg(figure, (width, height))?;
        let Some(grow) = layouts.iter().map(needed_growth_px).max().filter(|grow| *grow > 0) else { break };
        // Panels in one row share a top edge: the canvas grows by the rows' need.
        let mut tops: Vec<i32> = layouts.iter().map(|layout| layout.top_px).collect();
        tops.sort_unstable();
        tops.dedup();
        height += grow * tops.len() as u32;
    }
    Ok((width, height))
}

/// How much taller a panel must be for its plot area to keep its minimum share and height;
/// what does not grow with the panel (labels, caption, axis description) stays as it is.
fn needed_growth_px(layout: &PanelLayout) -> u32 {
    let fixed = layout.panel_px.saturating_sub(layout.plot_px);
    let by_share = (f64::from(fixed) / (1.0 - PLOT_SHARE_MIN)).ceil() as u32;
    let needed = by_share.max(fixed + PLOT_PX_MIN);
    needed.saturating_sub(layout.panel_px)
}

fn draw_svg(figure: &impl Figure, size: (u32, u32)) -> Result<(String, Vec<PanelLayout>), DrawError> {
    let mut svg = String::new();
    let layouts = {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        draw_logged(figure, &root)?
    };
    Ok((svg, layouts))
}

/// Draws `figure` on `root` and returns the panels it logged.
fn draw_logged<DB: DrawingBackend>(
    figure: &impl Figure,
    root: &DrawingArea<DB, Shift>,
) -> Result<Vec<PanelLayout>, DrawError> {
    LAYOUTS.with(|layouts| layouts.borrow_mut().clear());
    let drawn = draw_on(figure, root);
    let layouts = LAYOUTS.with(|layouts| std::mem::take(&mut *layouts.borrow_mut()));
    drawn.map(|()| layouts)
}

fn draw_on<DB: DrawingBackend>(figure: &impl Figure, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
    root.fill(&WHITE)?;
    figure.draw(root)?;
    root.present()?;
    Ok(())
}
