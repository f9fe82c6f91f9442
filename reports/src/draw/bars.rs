//! One panel of grouped bars: categories along x, a fixed slot per series inside each
//! category, medians as bars, min–max whiskers for repeats, "n=1" marks for single runs and
//! hatched grey stubs labelled with the reason for failed trials.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::draw::axes::{category_labels, draw_x_categories, fmt_tick, y_label_area_px};
use crate::draw::hatch::hatch_rect;
use crate::render::DrawError;
use crate::style::{font, AXIS_PX, FAILED_FILL, FAILED_HATCH, GRID, INK, NOTE_PX, REFERENCE, TICK_PX};
use crate::Outcome;

/// One bar: its colour and what it shows.
#[derive(Debug, Clone)]
pub(crate) struct Bar {
    pub color: RGBColor,
    pub outcome: Outcome,
}

/// One category on the x axis; `bars[i]` sits in series slot `i` (`None`: not run, left
/// empty so slots line up across groups).
#[derive(Debug, Clone)]
pub(crate) struct BarGroup {
    pub label: String,
    pub bars: Vec<Option<Bar>>,
}

/// A dashed horizontal reference (the ideal speedup), labelled at the right end.
#[derive(Debug, Clone)]
pub(crate) struct Reference {
    pub y: f64,
    pub label: String,
}

/// Everything one bar panel shows.
#[derive(Debug, Clone)]
pub(crate) struct BarPanel {
    pub title: String,
    pub y_desc: String,
    pub x_desc: Option<String>,
    pub groups: Vec<BarGroup>,
    pub reference: Option<Reference>,
    /// Top of the y axis; shared between panels of a figure so bars compare across panels.
    pub y_max: f64,
    /// Mark single runs with "n=1" on the bar (off when the whole figure is n = 1 and says
    /// so once in its subtitle).
    pub label_single_runs: bool,
}

/// Fraction of a category's width the bars use; the rest separates categories.
const GROUP_FILL: f64 = 0.8;

/// The largest value a set of outcomes reaches, whiskers included.
pub(crate) fn max_value<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>) -> f64 {
    outcomes.into_iter().filter_map(Outcome::stat).map(|s| s.max.max(s.median)).fold(0.0, f64::max)
}

/// Whether any measured outcome rests on more than one run.
pub(crate) fn any_repeats<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>) -> bool {
    outcomes.into_iter().filter_map(Outcome::stat).any(|s| s.n > 1)
}

/// Draws `panel` filling `area`.
pub(crate) fn draw_bar_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &BarPanel,
) -> Result<(), DrawError> {
    let slots = panel.groups.iter().map(|g| g.bars.len()).max().unwrap_or(1).max(1);
    let n_groups = panel.groups.len().max(1);
    let (width, _) = area.dim_in_pixel();
    let y_area = y_label_area_px(area, panel.y_max)?;
    let group_px = f64::from(width.saturating_sub(y_area + 30)) / n_groups as f64;
    let labels: Vec<String> = panel.groups.iter().map(|g| g.label.clone()).collect();
    let desc_px = if panel.x_desc.is_some() { AXIS_PX as u32 + 6 } else { 0 };
    let cats = category_labels(area, &labels, group_px, desc_px)?;

    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, font(AXIS_PX))
        .margin(8)
        .margin_right(18)
        .x_label_area_size(cats.area_px)
        .y_label_area_size(y_area)
        .build_cartesian_2d(0f64..n_groups as f64, 0f64..panel.y_max)?;
    let mut mesh = chart.configure_mesh();
    mesh.disable_x_mesh()
        .x_labels(0)
        .y_labels(8)
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .axis_style(INK)
        .label_style(font(TICK_PX))
        .axis_desc_style(font(AXIS_PX))
        .y_desc(panel.y_desc.as_str())
        .y_label_formatter(&fmt_tick);
    if let Some(desc) = &panel.x_desc {
        mesh.x_desc(desc.as_str());
    }
    mesh.draw()?;

    let screen = area.use_screen_coord();
    let slot_w = GROUP_FILL / slots as f64;
    let slot_px = group_px * slot_w;
    for (gi, group) in panel.groups.iter().enumerate() {
        let left = gi as f64 + (1.0 - GROUP_FILL) / 2.0;
        for (si, bar) in group.bars.iter().enumerate() {
            let Some(bar) = bar else { continue };
            let x0 = left + si as f64 * slot_w + slot_w * 0.06;
            let x1 = left + (si + 1) as f64 * slot_w - slot_w * 0.06;
            let x_mid_px = chart.backend_coord(&((x0 + x1) / 2.0, 0.0)).0;
            match &bar.outcome {
                Outcome::Measured(stat) => {
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(x0, 0.0), (x1, stat.median)],
                        bar.color.filled(),
                    )))?;
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(x0, 0.0), (x1, stat.median)],
                        INK.stroke_width(1),
                    )))?;
                    let mut top = stat.median;
                    if stat.n > 1 && stat.max > stat.min {
                        draw_whisker(&chart, (x0 + x1) / 2.0, (x1 - x0) * 0.3, stat.min, stat.max)?;
                        top = top.max(stat.max);
                    }
                    if stat.n == 1 && panel.label_single_runs {
                        let top_px = chart.backend_coord(&(x0, top)).1;
                        label_above(&screen, "n=1", x_mid_px, top_px, slot_px, RGBColor(80, 80, 80))?;
                    }
                }
                Outcome::Failed(failure) => {
                    // A stub, not a bar: the height carries no value, the hatching and label say so.
                    let stub = panel.y_max * 0.035;
                    let (px0, py0) = chart.backend_coord(&(x0, stub));
                    let (px1, py1) = chart.backend_coord(&(x1, 0.0));
                    chart
                        .draw_series(std::iter::once(Rectangle::new([(x0, 0.0), (x1, stub)], FAILED_FILL.filled())))?;
                    hatch_rect(&screen, (px0, py0), (px1, py1), FAILED_HATCH, 5)?;
                    // Outlined in the series colour so the reader sees whose trial failed.
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(x0, 0.0), (x1, stub)],
                        bar.color.stroke_width(2),
                    )))?;
                    label_above(&screen, failure.label(), x_mid_px, py0, slot_px, INK)?;
                }
            }
        }
    }

    if let Some(reference) = &panel.reference {
        let end = n_groups as f64;
        chart.draw_series(DashedLineSeries::new(
            vec![(0.0, reference.y), (end, reference.y)],
            10,
            6,
            REFERENCE.stroke_width(2),
        ))?;
        let (x_px, y_px) = chart.backend_coord(&(end, reference.y));
        let style = font(NOTE_PX).color(&REFERENCE).pos(Pos::new(HPos::Right, VPos::Bottom));
        screen.draw(&Text::new(reference.label.clone(), (x_px - 4, y_px - 4), style))?;
    }

    let top_px = chart.backend_coord(&(0.0, 0.0)).1;
    let placed: Vec<(i32, String)> = panel
        .groups
        .iter()
        .enumerate()
        .map(|(gi, g)| (chart.backend_coord(&(gi as f64 + 0.5, 0.0)).0, g.label.clone()))
        .collect();
    draw_x_categories(&screen, &placed, top_px, cats.rotated)?;
    Ok(())
}

/// A vertical min–max line with caps, centred at `x`.
fn draw_whisker<DB: DrawingBackend>(
    chart: &ChartContext<
        '_,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    x: f64,
    cap: f64,
    min: f64,
    max: f64,
) -> Result<(), DrawError> {
    let style = INK.stroke_width(2);
    let area = chart.plotting_area();
    area.draw(&PathElement::new(vec![(x, min), (x, max)], style))?;
    for y in [min, max] {
        area.draw(&PathElement::new(vec![(x - cap / 2.0, y), (x + cap / 2.0, y)], style))?;
    }
    Ok(())
}

/// A short note above a bar at `(x_px, top_px)`; vertical when wider than the bar's slot.
pub(crate) fn label_above<DB: DrawingBackend>(
    screen: &DrawingArea<DB, Shift>,
    text: &str,
    x_px: i32,
    top_px: i32,
    slot_px: f64,
    color: RGBColor,
) -> Result<(), DrawError> {
    let style = font(NOTE_PX).color(&color);
    let (text_w, _) = screen.estimate_text_size(text, &style)?;
    if f64::from(text_w) <= slot_px * 1.2 {
        screen.draw(&Text::new(
            text.to_string(),
            (x_px, top_px - 4),
            style.pos(Pos::new(HPos::Center, VPos::Bottom)),
        ))?;
    } else {
        let vertical = style.transform(FontTransform::Rotate270).pos(Pos::new(HPos::Left, VPos::Center));
        screen.draw(&Text::new(text.to_string(), (x_px, top_px - 4), vertical))?;
    }
    Ok(())
}
