//! The figure's title line, with an optional note under it (e.g. that every value is n = 1).

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::render::DrawError;
use crate::style::{font, NOTE_PX, TITLE_PX};

/// Draws `title` (and `note` below it, smaller) centred at the top of `area`; returns the
/// area left beneath.
pub(crate) fn with_title<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    note: Option<&str>,
) -> Result<DrawingArea<DB, Shift>, DrawError> {
    let (width, _) = area.dim_in_pixel();
    let centre = width as i32 / 2;
    let title_h = TITLE_PX as i32 + 16;
    area.draw(&Text::new(title.to_string(), (centre, 10), font(TITLE_PX).pos(Pos::new(HPos::Center, VPos::Top))))?;
    let mut used = title_h;
    if let Some(note) = note {
        let style = font(NOTE_PX).color(&RGBColor(80, 80, 80)).pos(Pos::new(HPos::Center, VPos::Top));
        area.draw(&Text::new(note.to_string(), (centre, used), style))?;
        used += NOTE_PX as i32 + 8;
    }
    Ok(area.split_vertically(used).1)
}
