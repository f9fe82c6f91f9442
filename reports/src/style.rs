//! The shared look: font sizes, colour-blind-safe palettes, and the strategy → colour and
//! order maps (exhaustive matches on the kind), so a strategy has the same colour and
//! place in every figure of a report.

use plotters::style::{IntoFont, RGBColor, TextStyle, BLACK};
use stratlab_strategy_spec::StrategyKind;

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

/// The strategies' colours: Okabe & Ito (2008), the palette built for colour-vision
/// deficiencies, then five more of Paul Tol's, so the kinds the lab adds next still get a
/// colour of their own.
const STRATEGY_PALETTE: [RGBColor; 13] = [
    RGBColor(0, 0, 0),       // black
    RGBColor(0, 114, 178),   // blue
    RGBColor(230, 159, 0),   // orange
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(240, 228, 66),  // yellow (weak on white: kept for a kind that rarely runs)
    RGBColor(238, 51, 119),  // magenta (Tol's vibrant)
    RGBColor(34, 85, 34),    // dark green
    RGBColor(153, 102, 51),  // brown
    RGBColor(119, 119, 119), // grey
    RGBColor(0, 153, 136),   // teal (Tol's vibrant)
];

/// Paul Tol's "muted" qualitative scheme, also colour-blind safe; used where colour encodes
/// something other than strategy (networks in per-strategy panels, micro-batches, a
/// figure's own series such as `published`), so it never reads as a strategy.
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

/// The colour of a strategy, the same in every figure: a new kind without one does not
/// compile.
pub(crate) fn strategy_color(kind: StrategyKind) -> RGBColor {
    STRATEGY_PALETTE[match kind {
        StrategyKind::Single => 0,
        StrategyKind::DataParallel => 1,
        StrategyKind::ModelParallel => 2,
        StrategyKind::Gpipe => 3,
        StrategyKind::OneFOneB => 4,
        StrategyKind::ParameterServer => 5,
        StrategyKind::PipeDream => 6,
        StrategyKind::Hybrid => 7,
        StrategyKind::ShardedDataParallel => 8,
        StrategyKind::Interleaved1F1B => 9,
        StrategyKind::ZeroBubble => 10,
    }]
}

/// Where a strategy sits in every figure's panels, legends and columns: the baseline, the
/// data-parallel family, the server, then the pipelines from the simplest.
pub(crate) fn strategy_rank(kind: StrategyKind) -> usize {
    match kind {
        StrategyKind::Single => 0,
        StrategyKind::DataParallel => 1,
        StrategyKind::ShardedDataParallel => 2,
        StrategyKind::ModelParallel => 3,
        StrategyKind::Gpipe => 4,
        StrategyKind::OneFOneB => 5,
        StrategyKind::ParameterServer => 6,
        StrategyKind::PipeDream => 7,
        StrategyKind::Interleaved1F1B => 8,
        StrategyKind::ZeroBubble => 9,
        StrategyKind::Hybrid => 10,
    }
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

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_strategy_has_its_own_colour_and_place_with_room_for_more() {
        let colours: HashSet<(u8, u8, u8)> = StrategyKind::ALL
            .iter()
            .map(|&kind| {
                let RGBColor(r, g, b) = strategy_color(kind);
                (r, g, b)
            })
            .collect();
        assert_eq!(colours.len(), StrategyKind::ALL.len(), "two strategies share a colour");
        let ranks: HashSet<usize> = StrategyKind::ALL.iter().map(|&kind| strategy_rank(kind)).collect();
        assert_eq!(ranks.len(), StrategyKind::ALL.len(), "two strategies share a place");
        // Newer schedules (DualPipeV, looped BFS) are next: the palette has room.
        assert!(STRATEGY_PALETTE.len() >= StrategyKind::ALL.len() + 2);
        // No strategy reads as a network or another category.
        for &kind in StrategyKind::ALL {
            assert!(!TOL_MUTED.contains(&strategy_color(kind)), "{kind}");
        }
    }

    #[test]
    fn tint_and_shade_reach_white_and_black() {
        assert_eq!(tint(RGBColor(0, 114, 178), 1.0), RGBColor(255, 255, 255));
        assert_eq!(shade(RGBColor(0, 114, 178), 1.0), RGBColor(0, 0, 0));
    }
}
