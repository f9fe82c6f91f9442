//! The shared look: font sizes, colour-blind-safe palettes, and the fixed strategy → colour
//! map, so a strategy has the same colour in every figure of a report.

use plotters::style::{IntoFont, RGBColor, TextStyle, BLACK};

/// DejaVu Sans, compiled in: rendering needs no fontconfig, freetype or system fonts, and
/// looks the same on every machine (see reports/README.md).
pub(crate) static DEJAVU_SANS: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");

/// The family the bundled DejaVu Sans is registered under; SVG files name it too, so
/// viewers fall back to their own sans-serif.
pub(crate) const FONT_FAMILY: &str = "sans-serif";

// Font sizes as em heights in pixels at the 1200×800 default canvas (what an SVG's
// `font-size` says); the smallest stays ≥ 14 px so text is readable when the figure is
// shrunk into a two-column paper.
pub(crate) const TITLE_PX: f64 = 22.0;
pub(crate) const AXIS_PX: f64 = 18.0;
pub(crate) const TICK_PX: f64 = 16.0;
pub(crate) const NOTE_PX: f64 = 14.0;
pub(crate) const LEGEND_PX: f64 = 16.0;

/// plotters divides a font's size by 1.24 to get the em (SVG `font-size`, ab_glyph layout
/// height); sizes above are em pixels, so they are multiplied back here.
pub(crate) const PLOTTERS_SIZE_PER_EM: f64 = 1.24;

/// Grid lines: visible but quieter than data.
pub(crate) const GRID: RGBColor = RGBColor(225, 225, 225);
/// Axis lines and outlines.
pub(crate) const INK: RGBColor = RGBColor(40, 40, 40);
/// Reference lines (ideal speedup, accuracy target).
pub(crate) const REFERENCE: RGBColor = RGBColor(110, 110, 110);
/// Fill and hatch of failed-trial stubs: neutral grey, never a strategy colour.
pub(crate) const FAILED_FILL: RGBColor = RGBColor(215, 215, 215);
pub(crate) const FAILED_HATCH: RGBColor = RGBColor(90, 90, 90);

/// A text style in the bundled font, `em_px` pixels to the em.
pub(crate) fn font(em_px: f64) -> TextStyle<'static> {
    TextStyle::from((FONT_FAMILY, em_px * PLOTTERS_SIZE_PER_EM).into_font()).color(&BLACK)
}

/// Okabe & Ito (2008), the palette built for colour-vision deficiencies.
const OKABE_ITO: [RGBColor; 8] = [
    RGBColor(0, 0, 0),       // black
    RGBColor(0, 114, 178),   // blue
    RGBColor(230, 159, 0),   // orange
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(240, 228, 66),  // yellow (last: weak on white)
];

/// Paul Tol's "muted" qualitative scheme, also colour-blind safe; used where colour encodes
/// something other than strategy (networks in per-strategy panels, micro-batches), so it
/// never reads as a strategy.
const TOL_MUTED: [RGBColor; 9] = [
    RGBColor(51, 34, 136),   // indigo
    RGBColor(136, 204, 238), // cyan
    RGBColor(68, 170, 153),  // teal
    RGBColor(17, 119, 51),   // green
    RGBColor(153, 153, 51),  // olive
    RGBColor(221, 204, 119), // sand
    RGBColor(204, 102, 119), // rose
    RGBColor(136, 34, 85),   // wine
    RGBColor(170, 68, 153),  // purple
];

/// The known strategies in a fixed order, each with a fixed Okabe–Ito slot.
const KNOWN_STRATEGIES: [&str; 8] =
    ["single", "data_parallel", "model_parallel", "gpipe", "1f1b", "parameter_server", "pipedream", "hybrid"];

/// The colour of a strategy, the same in every figure. Names are matched ignoring case and
/// `-`/`_`; unknown strategies get a stable colour from their name.
pub(crate) fn strategy_color(strategy: &str) -> RGBColor {
    let key = strategy.to_lowercase().replace('-', "_");
    match KNOWN_STRATEGIES.iter().position(|known| *known == key) {
        Some(slot) => OKABE_ITO[slot],
        None => TOL_MUTED[stable_hash(&key) % TOL_MUTED.len()],
    }
}

/// The colours of the lines of one figure: each known strategy its own, the others (a
/// figure's own series: `published`, `model`) distinct palette colours in order, so two
/// unknown names never share one by their hashes.
pub(crate) fn line_colors(series: &[String]) -> Vec<RGBColor> {
    let mut unknown = 0;
    series
        .iter()
        .map(|name| match strategy_rank(name) < KNOWN_STRATEGIES.len() {
            true => strategy_color(name),
            false => {
                unknown += 1;
                category_color(unknown - 1)
            }
        })
        .collect()
}

/// Sort key placing known strategies in `KNOWN_STRATEGIES`' order and unknown ones after them.
pub(crate) fn strategy_rank(strategy: &str) -> usize {
    let key = strategy.to_lowercase().replace('-', "_");
    KNOWN_STRATEGIES.iter().position(|known| *known == key).unwrap_or(KNOWN_STRATEGIES.len())
}

/// The i-th colour of the secondary palette (networks, micro-batches), cycling.
pub(crate) fn category_color(index: usize) -> RGBColor {
    TOL_MUTED[index % TOL_MUTED.len()]
}

/// `color` mixed with white; `amount` 0 keeps it, 1 gives white.
pub(crate) fn tint(color: RGBColor, amount: f64) -> RGBColor {
    let mix = |c: u8| (f64::from(c) + (255.0 - f64::from(c)) * amount).round() as u8;
    RGBColor(mix(color.0), mix(color.1), mix(color.2))
}

/// `color` mixed with black; `amount` 0 keeps it, 1 gives black.
pub(crate) fn shade(color: RGBColor, amount: f64) -> RGBColor {
    let mix = |c: u8| (f64::from(c) * (1.0 - amount)).round() as u8;
    RGBColor(mix(color.0), mix(color.1), mix(color.2))
}

/// Whether black text is readable on `color` (else use white).
pub(crate) fn is_light(color: RGBColor) -> bool {
    0.299 * f64::from(color.0) + 0.587 * f64::from(color.1) + 0.114 * f64::from(color.2) > 140.0
}

// FNV-1a: std's hasher is randomly seeded per process, which would recolour strategies
// between runs.
fn stable_hash(text: &str) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategy_colours_ignore_case_and_dashes() {
        assert_eq!(strategy_color("data-parallel"), strategy_color("Data_Parallel"));
        assert_ne!(strategy_color("gpipe"), strategy_color("1f1b"));
        assert_eq!(strategy_color("my-new-strategy"), strategy_color("my_new_strategy"));
    }

    #[test]
    fn tint_and_shade_reach_white_and_black() {
        assert_eq!(tint(RGBColor(0, 114, 178), 1.0), RGBColor(255, 255, 255));
        assert_eq!(shade(RGBColor(0, 114, 178), 1.0), RGBColor(0, 0, 0));
    }
}
