//! Panel grids, tick formatting and hand-placed category labels. plotters places ticks where
//! its own algorithm likes; categories (data sets, networks, workers) need a label exactly
//! under their bars or rows.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::render::DrawError;
use crate::style::{font, TICK_PX};

/// Splits `area` into `count` panels, rows × columns chosen to keep panels near the
/// canvas's aspect ratio (1 → 1×1, 2 → 1×2, 3 → 1×3, 4 → 2×2, 6 → 2×3, 9 → 3×3).
pub(crate) fn panel_grid<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    count: usize,
) -> Vec<DrawingArea<DB, Shift>> {
    let count = count.max(1);
    let (rows, cols) = match count {
        1..=3 => (1, count),
        4 => (2, 2),
        5..=6 => (2, 3),
        7..=9 => (3, 3),
        _ => (count.div_ceil(4), 4),
    };
    area.split_evenly((rows, cols)).into_iter().take(count).collect()
}

/// A tick label with no trailing zeros: 0, 0.5, 2, 12000.
pub(crate) fn fmt_tick(value: &f64) -> String {
    let decimals = if value.abs() >= 100.0 { 0 } else { 2 };
    fmt_with(*value, decimals)
}

/// `value` to at most `decimals` decimals, trailing zeros dropped, never `-0`.
fn fmt_with(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text };
    if text == "-0" {
        "0".into()
    } else {
        text
    }
}

/// A tick formatter for an axis from `low` to `high` with about `ticks` labels: as many
/// decimals as the step between ticks needs, so neighbouring ticks never read alike (an
/// axis over 0–0.016 epochs labels 0.002, 0.004, … rather than 0, 0, 0.01).
pub(crate) fn tick_formatter(low: f64, high: f64, ticks: usize) -> impl Fn(&f64) -> String {
    let step = (high - low).abs() / ticks.max(1) as f64;
    let decimals = match step.is_finite() && step > 0.0 {
        // A step of 0.002 needs 3 decimals, of 0.25 two (a nice step is 1, 2 or 5 × 10^k,
        // or 2.5 × 10^k: one more).
        true => ((-step.log10()).ceil().max(0.0) as usize + 1).min(9),
        false => 2,
    };
    move |value: &f64| match value.abs() >= 100.0 && decimals <= 2 {
        true => fmt_with(*value, 0),
        false => fmt_with(*value, decimals),
    }
}

/// Where a category label breaks when it is too wide for its slot: `network / data set`
/// becomes two lines.
const LINE_BREAK: &str = " / ";

/// Where a data set's label breaks after the separator if it must: `cifar10:synthetic`
/// becomes `cifar10:` over `synthetic`.
const SOURCE_BREAK: char = ':';

/// A label's lines when broken at [`LINE_BREAK`], and each part after a [`SOURCE_BREAK`].
fn label_lines(label: &str) -> Vec<String> {
    label
        .split(LINE_BREAK)
        .flat_map(|part| match part.split_once(SOURCE_BREAK) {
            Some((name, source)) if !name.is_empty() && !source.is_empty() => {
                vec![format!("{name}{SOURCE_BREAK}"), source.to_owned()]
            }
            _ => vec![part.to_owned()],
        })
        .collect()
}

/// How category labels under an x axis are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LabelLayout {
    /// One line, centred under the category.
    Horizontal,
    /// Broken at [`LINE_BREAK`] into lines that each fit the slot, stacked and centred.
    Stacked,
    /// Vertical, reading bottom to top, broken at [`LINE_BREAK`] into lines side by side:
    /// labels too wide for their slot even when broken. Takes as much height as the longest
    /// line is long.
    Rotated,
}

/// How category labels are laid out and the height they take below the plot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CategoryLabels {
    /// Height of the label area below the plot, in pixels.
    pub area_px: u32,
    pub layout: LabelLayout,
}

/// Sizes the label area for `labels`, each given `slot_px` of width; `desc_px` is added for
/// an axis description below them. A label too wide for its slot is broken into lines
/// before it is turned on its side: rotated labels of a 2×2 grid of panels once took most of
/// each panel's height, leaving its bars a few pixels tall.
pub(crate) fn category_labels<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    labels: &[String],
    slot_px: f64,
    desc_px: u32,
) -> Result<CategoryLabels, DrawError> {
    let style = font(TICK_PX);
    let fits = |width: u32| f64::from(width) <= slot_px * 0.95;
    let mut widest = 0u32;
    let mut widest_line = 0u32;
    let mut most_lines = 1u32;
    for label in labels {
        widest = widest.max(area.estimate_text_size(label, &style)?.0);
        let lines = label_lines(label);
        most_lines = most_lines.max(lines.len() as u32);
        for line in &lines {
            widest_line = widest_line.max(area.estimate_text_size(line, &style)?.0);
        }
    }
    let line_px = TICK_PX as u32 + 4;
    let (layout, label_px) = if fits(widest) {
        (LabelLayout::Horizontal, TICK_PX as u32 + 14)
    } else if most_lines > 1 && fits(widest_line) {
        (LabelLayout::Stacked, most_lines * line_px + 10)
    } else {
        (LabelLayout::Rotated, widest_line + 14)
    };
    Ok(CategoryLabels { area_px: label_px + desc_px, layout })
}

/// Draws `labels` at absolute x pixel positions just below `top_px`, on `screen` (an area
/// in screen coordinates), as `layout` says.
pub(crate) fn draw_x_categories<DB: DrawingBackend>(
    screen: &DrawingArea<DB, Shift>,
    labels: &[(i32, String)],
    top_px: i32,
    layout: LabelLayout,
) -> Result<(), DrawError> {
    let style = font(TICK_PX);
    let centred = style.pos(Pos::new(HPos::Center, VPos::Top));
    for (x, label) in labels {
        match layout {
            LabelLayout::Horizontal => screen.draw(&Text::new(label.clone(), (*x, top_px + 8), centred.clone()))?,
            LabelLayout::Stacked => {
                for (i, line) in label_lines(label).into_iter().enumerate() {
                    let y = top_px + 8 + i as i32 * (TICK_PX as i32 + 4);
                    screen.draw(&Text::new(line.to_owned(), (*x, y), centred.clone()))?;
                }
            }
            LabelLayout::Rotated => {
                // Each line reads bottom to top, ending just under the axis; lines side by side.
                let vertical = style.transform(FontTransform::Rotate270).pos(Pos::new(HPos::Right, VPos::Center));
                let lines = label_lines(label);
                let pitch = TICK_PX as i32 + 4;
                for (i, line) in lines.iter().enumerate() {
                    let dx = (2 * i as i32 - (lines.len() as i32 - 1)) * pitch / 2;
                    screen.draw(&Text::new(line.clone(), (*x + dx, top_px + 8), vertical.clone()))?;
                }
            }
        }
    }
    Ok(())
}

/// Draws `labels` right-aligned at absolute y pixel positions just left of `right_px`.
pub(crate) fn draw_y_categories<DB: DrawingBackend>(
    screen: &DrawingArea<DB, Shift>,
    labels: &[(i32, String)],
    right_px: i32,
) -> Result<(), DrawError> {
    let style = font(TICK_PX).pos(Pos::new(HPos::Right, VPos::Center));
    for (y, label) in labels {
        screen.draw(&Text::new(label.clone(), (right_px - 8, *y), style.clone()))?;
    }
    Ok(())
}

/// Width of a y label area that fits tick labels up to `max_value` and the axis description.
pub(crate) fn y_label_area_px<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    max_value: f64,
) -> Result<u32, DrawError> {
    let (tick_w, _) = area.estimate_text_size(&fmt_tick(&max_value), &font(TICK_PX))?;
    Ok(tick_w.max(20) + 50)
}

/// A readable unit for durations up to `max_s`: the divisor to apply to seconds and its
/// name (ms below 1 s, minutes above 10 min, hours above 10 h).
pub(crate) fn time_unit(max_s: f64) -> (f64, &'static str) {
    if max_s < 1.0 {
        (1e-3, "ms")
    } else if max_s <= 600.0 {
        (1.0, "s")
    } else if max_s <= 36_000.0 {
        (60.0, "min")
    } else {
        (3600.0, "h")
    }
}

/// A rounded-up axis end with head-room above `max` (labels sit above bars).
pub(crate) fn axis_top(max: f64) -> f64 {
    if max.is_finite() && max > 0.0 {
        max * 1.15
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_axis_s_ticks_get_the_decimals_its_step_needs() {
        // A ResNet-18 loss curve over a sixtieth of an epoch.
        let format = tick_formatter(0.0, 0.0168, 10);
        let labels: Vec<String> = [0.0, 0.002, 0.004, 0.006, 0.008, 0.01].iter().map(&format).collect();
        assert_eq!(labels, ["0", "0.002", "0.004", "0.006", "0.008", "0.01"]);
        let format = tick_formatter(0.0, 2.5, 10);
        assert_eq!([0.25, 0.5, 0.75].iter().map(&format).collect::<Vec<_>>(), ["0.25", "0.5", "0.75"]);
        let format = tick_formatter(0.0, 2000.0, 8);
        assert_eq!([500.0, 1000.0].iter().map(&format).collect::<Vec<_>>(), ["500", "1000"]);
    }

    #[test]
    fn labels_break_at_the_network_separator_and_after_a_source() {
        assert_eq!(label_lines("resnet18 / cifar10:synthetic"), ["resnet18", "cifar10:", "synthetic"]);
        assert_eq!(label_lines("mnist"), ["mnist"]);
    }

    #[test]
    fn ticks_drop_trailing_zeros() {
        assert_eq!(fmt_tick(&0.0), "0");
        assert_eq!(fmt_tick(&0.5), "0.5");
        assert_eq!(fmt_tick(&2.0), "2");
        assert_eq!(fmt_tick(&12000.0), "12000");
        assert_eq!(fmt_tick(&0.25), "0.25");
    }
}
