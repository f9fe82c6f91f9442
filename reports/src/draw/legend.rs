//! Legends drawn below the plot in their own strip, flowing into as many rows as needed, so
//! a legend never covers data and never drops an entry.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::draw::hatch::{back_hatch_rect, hatch_rect};
use crate::render::DrawError;
use crate::style::{font, FAILED_FILL, FAILED_HATCH, INK, LEGEND_PX};

/// How an entry's key looks.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Swatch {
    /// A filled box (bars, blocks).
    Fill(RGBColor),
    /// A filled box with "/" hatching (backward passes).
    Hatched { fill: RGBColor, hatch: RGBColor },
    /// A filled box with "\\" hatching (a second compute choice).
    BackHatched { fill: RGBColor, hatch: RGBColor },
    /// A filled box with "/" and "\\" hatching (recomputed forward passes).
    CrossHatched { fill: RGBColor, hatch: RGBColor },
    /// The failed-trial stub: grey, hatched.
    Failed,
    /// A line; dashed for reference lines.
    Line { color: RGBColor, dashed: bool },
    /// A line with a dot, for measured curves.
    LineDot(RGBColor),
    /// A filled dot (a measured point with no line through it).
    Dot(RGBColor),
    /// A hollow dot (a single run on a line plot).
    HollowDot(RGBColor),
    /// An × marker (a failure on a curve).
    Cross(RGBColor),
    /// An empty box with an outline (idle time).
    Empty,
}

/// One key and its text.
#[derive(Debug, Clone)]
pub(crate) struct LegendEntry {
    pub swatch: Swatch,
    pub label: String,
}

impl LegendEntry {
    pub(crate) fn new(swatch: Swatch, label: impl Into<String>) -> Self {
        Self { swatch, label: label.into() }
    }
}

const SWATCH_W: i32 = 30;
const SWATCH_H: i32 = 16;
const GAP: i32 = 8;
const ENTRY_SPACING: i32 = 28;
const ROW_H: i32 = 30;
const PAD: i32 = 10;

/// Splits `area` into the plot above and a legend strip below just tall enough for
/// `entries`, and draws the legend; returns the plot part.
pub(crate) fn with_legend_below<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[LegendEntry],
) -> Result<DrawingArea<DB, Shift>, DrawError> {
    if entries.is_empty() {
        return Ok(area.clone());
    }
    let (width, height) = area.dim_in_pixel();
    let rows = layout(area, entries, width as i32)?;
    let strip_h = rows.len() as i32 * ROW_H + 2 * PAD;
    let (plot, strip) = area.split_vertically(height as i32 - strip_h);
    draw_rows(&strip, entries, &rows)?;
    Ok(plot)
}

/// Entry indices per row and each row's width, flowing left to right.
fn layout<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[LegendEntry],
    width: i32,
) -> Result<Vec<(Vec<usize>, i32)>, DrawError> {
    let style = font(LEGEND_PX);
    let mut rows: Vec<(Vec<usize>, i32)> = vec![(Vec::new(), 0)];
    for (index, entry) in entries.iter().enumerate() {
        let (text_w, _) = area.estimate_text_size(&entry.label, &style)?;
        // 8 % slack: SVG viewers substitute their own sans-serif, often a little wider.
        let entry_w = SWATCH_W + GAP + (f64::from(text_w) * 1.08).ceil() as i32;
        let row = rows.last_mut().expect("rows starts non-empty");
        let needed = if row.0.is_empty() { entry_w } else { row.1 + ENTRY_SPACING + entry_w };
        if needed > width - 2 * PAD && !row.0.is_empty() {
            rows.push((vec![index], entry_w));
        } else {
            row.0.push(index);
            row.1 = needed;
        }
    }
    Ok(rows)
}

fn draw_rows<DB: DrawingBackend>(
    strip: &DrawingArea<DB, Shift>,
    entries: &[LegendEntry],
    rows: &[(Vec<usize>, i32)],
) -> Result<(), DrawError> {
    let style = font(LEGEND_PX);
    let (width, _) = strip.dim_in_pixel();
    for (row_index, (indices, row_w)) in rows.iter().enumerate() {
        // Rows are centred under the figure, like a paper's legend.
        let mut x = ((width as i32 - row_w) / 2).max(PAD);
        let y_mid = PAD + row_index as i32 * ROW_H + ROW_H / 2;
        for &index in indices {
            let entry = &entries[index];
            draw_swatch(strip, entry.swatch, (x, y_mid - SWATCH_H / 2))?;
            x += SWATCH_W + GAP;
            strip.draw(&Text::new(
                entry.label.clone(),
                (x, y_mid),
                style.pos(plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Left,
                    plotters::style::text_anchor::VPos::Center,
                )),
            ))?;
            let (text_w, _) = strip.estimate_text_size(&entry.label, &style)?;
            x += (f64::from(text_w) * 1.08).ceil() as i32 + ENTRY_SPACING;
        }
    }
    Ok(())
}

/// Draws a key with its top-left corner at `(x, y)` in `area`'s pixel coordinates.
pub(crate) fn draw_swatch<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    swatch: Swatch,
    (x, y): (i32, i32),
) -> Result<(), DrawError> {
    let corner = (x + SWATCH_W, y + SWATCH_H);
    let mid = y + SWATCH_H / 2;
    match swatch {
        Swatch::Fill(color) => {
            area.draw(&Rectangle::new([(x, y), corner], color.filled()))?;
            area.draw(&Rectangle::new([(x, y), corner], INK.stroke_width(1)))?;
        }
        Swatch::Hatched { fill, hatch }
        | Swatch::BackHatched { fill, hatch }
        | Swatch::CrossHatched { fill, hatch } => {
            area.draw(&Rectangle::new([(x, y), corner], fill.filled()))?;
            let (bx, by) = area.get_base_pixel();
            let (p0, p1) = ((x + bx, y + by), (corner.0 + bx, corner.1 + by));
            if !matches!(swatch, Swatch::BackHatched { .. }) {
                hatch_rect(&area.use_screen_coord(), p0, p1, hatch, 6)?;
            }
            if matches!(swatch, Swatch::CrossHatched { .. } | Swatch::BackHatched { .. }) {
                back_hatch_rect(&area.use_screen_coord(), p0, p1, hatch, 6)?;
            }
            area.draw(&Rectangle::new([(x, y), corner], INK.stroke_width(1)))?;
        }
        Swatch::Failed => {
            area.draw(&Rectangle::new([(x, y), corner], FAILED_FILL.filled()))?;
            let (bx, by) = area.get_base_pixel();
            hatch_rect(&area.use_screen_coord(), (x + bx, y + by), (corner.0 + bx, corner.1 + by), FAILED_HATCH, 5)?;
            area.draw(&Rectangle::new([(x, y), corner], FAILED_HATCH.stroke_width(1)))?;
        }
        Swatch::Line { color, dashed } => {
            let style = color.stroke_width(3);
            if dashed {
                area.draw(&PathElement::new(vec![(x, mid), (x + 11, mid)], style))?;
                area.draw(&PathElement::new(vec![(x + 19, mid), (x + SWATCH_W, mid)], style))?;
            } else {
                area.draw(&PathElement::new(vec![(x, mid), (x + SWATCH_W, mid)], style))?;
            }
        }
        Swatch::LineDot(color) => {
            area.draw(&PathElement::new(vec![(x, mid), (x + SWATCH_W, mid)], color.stroke_width(3)))?;
            area.draw(&Circle::new((x + SWATCH_W / 2, mid), 5, color.filled()))?;
        }
        Swatch::Dot(color) => {
            area.draw(&Circle::new((x + SWATCH_W / 2, mid), 6, color.filled()))?;
        }
        Swatch::HollowDot(color) => {
            area.draw(&Circle::new((x + SWATCH_W / 2, mid), 6, color.stroke_width(2)))?;
        }
        Swatch::Cross(color) => {
            let c = (x + SWATCH_W / 2, mid);
            area.draw(&Cross::new(c, 7, color.stroke_width(3)))?;
        }
        Swatch::Empty => {
            area.draw(&Rectangle::new([(x, y), corner], INK.stroke_width(1)))?;
        }
    }
    Ok(())
}
