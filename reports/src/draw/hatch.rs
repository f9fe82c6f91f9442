//! Diagonal hatching of a pixel rectangle; plotters has no fill patterns. Hatching keeps
//! failed stubs and backward passes distinguishable in greyscale print.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::render::DrawError;

/// Fills the rectangle `(x0, y0)–(x1, y1)` (absolute pixels, drawn on `screen`, an area in
/// screen coordinates) with "/" lines `spacing` pixels apart.
pub(crate) fn hatch_rect<DB: DrawingBackend>(
    screen: &DrawingArea<DB, Shift>,
    p0: (i32, i32),
    p1: (i32, i32),
    color: RGBColor,
    spacing: i32,
) -> Result<(), DrawError> {
    hatch(screen, p0, p1, color, spacing, false)
}

/// Like [`hatch_rect`] with "\\" lines; drawn over a "/" hatch it cross-hatches (the
/// recompute blocks of a pipeline timeline).
pub(crate) fn back_hatch_rect<DB: DrawingBackend>(
    screen: &DrawingArea<DB, Shift>,
    p0: (i32, i32),
    p1: (i32, i32),
    color: RGBColor,
    spacing: i32,
) -> Result<(), DrawError> {
    hatch(screen, p0, p1, color, spacing, true)
}

/// "/" lines over the rectangle, or with `mirrored` the same lines flipped left to right.
fn hatch<DB: DrawingBackend>(
    screen: &DrawingArea<DB, Shift>,
    (x0, y0): (i32, i32),
    (x1, y1): (i32, i32),
    color: RGBColor,
    spacing: i32,
    mirrored: bool,
) -> Result<(), DrawError> {
    let (x0, x1) = (x0.min(x1), x0.max(x1));
    let (y0, y1) = (y0.min(y1), y0.max(y1));
    let spacing = spacing.max(2);
    let flip = |x: i32| if mirrored { x0 + x1 - x } else { x };
    // Lines x + y = c, clipped to the rectangle analytically.
    let mut c = x0 + y0 + spacing;
    while c < x1 + y1 {
        let xa = x0.max(c - y1);
        let xb = x1.min(c - y0);
        if xa < xb {
            screen.draw(&PathElement::new(vec![(flip(xa), c - xa), (flip(xb), c - xb)], color.stroke_width(1)))?;
        }
        c += spacing;
    }
    Ok(())
}
