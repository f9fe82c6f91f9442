//! One panel of curves over time or epochs (accuracy, loss): a line per run in its
//! strategy's colour, an optional dashed target, a highlighted point where the target is
//! first reached, and an × with the reason where a failed run stopped; and the median point
//! with its min–max whisker that line plots over repeats share.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::draw::axes::{tick_formatter, y_label_area_px};
use crate::draw::bars::Reference;
use crate::render::{log_panel, DrawError, PanelLayout, TickLog};
use crate::style::{font, AXIS_PX, GRID, INK, NOTE_PX, REFERENCE, TICK_PX};
use crate::Stat;

/// One run's curve, already in plot units.
#[derive(Debug, Clone)]
pub(crate) struct Curve {
    pub color: RGBColor,
    pub points: Vec<(f64, f64)>,
    /// Where and why the run stopped early; drawn as an × at the last point (or the origin).
    pub failure: Option<String>,
    /// A point to ring and annotate (the first evaluation at or above the target); an
    /// empty annotation rings it only.
    pub highlight: Option<((f64, f64), String)>,
}

/// Axes and content of a curve panel.
#[derive(Debug, Clone)]
pub(crate) struct CurvePanel {
    pub x_desc: String,
    pub y_desc: String,
    pub x_max: f64,
    pub y_min: f64,
    pub y_max: f64,
    pub curves: Vec<Curve>,
    pub reference: Option<Reference>,
}

/// Draws `panel` filling `area`.
pub(crate) fn draw_curve_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &CurvePanel,
) -> Result<(), DrawError> {
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .margin_right(24)
        .x_label_area_size(TICK_PX as u32 + AXIS_PX as u32 + 30)
        .y_label_area_size(y_label_area_px(area, panel.y_max)?)
        .build_cartesian_2d(0f64..panel.x_max, panel.y_min..panel.y_max)?;
    let (x_ticks, y_ticks) = (TickLog::new(), TickLog::new());
    let (x_format, y_format) = (tick_formatter(0.0, panel.x_max, 10), tick_formatter(panel.y_min, panel.y_max, 10));
    let x_label = |value: &f64| x_ticks.label(*value, &x_format);
    let y_label = |value: &f64| y_ticks.label(*value, &y_format);
    chart
        .configure_mesh()
        .x_labels(10)
        .y_labels(10)
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .axis_style(INK)
        .label_style(font(TICK_PX))
        .axis_desc_style(font(AXIS_PX))
        .x_desc(panel.x_desc.as_str())
        .y_desc(panel.y_desc.as_str())
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .draw()?;
    let screen = area.use_screen_coord();

    if let Some(reference) = &panel.reference {
        chart.draw_series(DashedLineSeries::new(
            vec![(0.0, reference.y), (panel.x_max, reference.y)],
            10,
            6,
            REFERENCE.stroke_width(2),
        ))?;
        // At the left end, under the line: early in training curves sit low, so it is free.
        let (x, y) = chart.backend_coord(&(0.0, reference.y));
        let style = font(NOTE_PX).color(&REFERENCE).pos(Pos::new(HPos::Left, VPos::Top));
        screen.draw(&Text::new(reference.label.clone(), (x + 8, y + 5), style))?;
    }

    // Label rectangles (x, y, width, height) already drawn.
    let mut placed: Vec<(i32, i32, i32, i32)> = Vec::new();
    for curve in &panel.curves {
        chart.draw_series(LineSeries::new(curve.points.iter().copied(), curve.color.stroke_width(3)))?;
        // Points mark the actual evaluations; the line between them is interpolation.
        if curve.points.len() <= 60 {
            for point in &curve.points {
                screen.draw(&Circle::new(chart.backend_coord(point), 4, curve.color.filled()))?;
            }
        }
        if let Some((point, label)) = &curve.highlight {
            let (px, py) = chart.backend_coord(point);
            let (_, axis_py) = chart.backend_coord(&(point.0, panel.y_min));
            screen.draw(&PathElement::new(vec![(px, py), (px, axis_py)], curve.color.stroke_width(1)))?;
            screen.draw(&Circle::new((px, py), 9, curve.color.stroke_width(3)))?;
            let style = font(NOTE_PX).color(&INK).pos(Pos::new(HPos::Left, VPos::Top));
            let (w, h) = screen.estimate_text_size(label, &style)?;
            // Points reached at nearly the same time would print their times on top of
            // each other: a label goes a line lower until it is clear of those placed, and
            // where none is (the legend says every time), it is left out.
            let lines = if label.is_empty() { 0 } else { 4 };
            let at = (0..lines)
                .map(|line| (px + 6, py + 12 + line * (h as i32 + 2)))
                .find(|&(x, y)| !placed.iter().any(|other| overlaps(other, (x, y, w as i32, h as i32))));
            if let Some((x, y)) = at {
                placed.push((x, y, w as i32, h as i32));
                screen.draw(&Text::new(label.clone(), (x, y), style))?;
            }
        }
        if let Some(reason) = &curve.failure {
            let at = curve.points.last().copied().unwrap_or((0.0, panel.y_min));
            let (px, py) = chart.backend_coord(&at);
            screen.draw(&Cross::new((px, py), 9, curve.color.stroke_width(4)))?;
            let style = font(NOTE_PX).color(&curve.color).pos(Pos::new(HPos::Left, VPos::Bottom));
            screen.draw(&Text::new(reason.clone(), (px + 10, py - 8), style))?;
        }
    }
    log_panel(PanelLayout {
        top_px: area.get_base_pixel().1,
        panel_px: area.dim_in_pixel().1,
        plot_px: chart.plotting_area().dim_in_pixel().1,
        y_ticks: y_ticks.ticks(),
        x_ticks: x_ticks.ticks(),
        notes: placed,
    });
    Ok(())
}

/// Whether two rectangles (x, y, width, height) overlap.
fn overlaps(a: &(i32, i32, i32, i32), b: (i32, i32, i32, i32)) -> bool {
    a.0 < b.0 + b.2 && b.0 < a.0 + a.2 && a.1 < b.1 + b.3 && b.1 < a.1 + a.3
}

/// A measured point at `x`: a dot at the median, filled when it rests on repeats and hollow
/// for a single run, with a capped min–max whisker when the repeats spread.
pub(crate) fn draw_median_point<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    screen: &DrawingArea<DB, Shift>,
    x: f64,
    stat: &Stat,
    color: RGBColor,
) -> Result<(), DrawError> {
    if stat.n > 1 && stat.max > stat.min {
        let style = color.stroke_width(2);
        chart.draw_series(std::iter::once(PathElement::new(vec![(x, stat.min), (x, stat.max)], style)))?;
        for y in [stat.min, stat.max] {
            let (px, py) = chart.backend_coord(&(x, y));
            screen.draw(&PathElement::new(vec![(px - 6, py), (px + 6, py)], style))?;
        }
    }
    let centre = chart.backend_coord(&(x, stat.median));
    screen.draw(&Circle::new(centre, 6, WHITE.filled()))?;
    screen.draw(&Circle::new(centre, 6, if stat.n > 1 { color.filled() } else { color.stroke_width(2) }))?;
    Ok(())
}

/// A failed point: an × on the x axis at `(px, py)` (pixels), raised by `stacked` label
/// heights when other failures sit at the same x, with its reason to the left.
pub(crate) fn draw_failure_on_axis<DB: DrawingBackend>(
    screen: &DrawingArea<DB, Shift>,
    (px, py): (i32, i32),
    stacked: i32,
    reason: &str,
    color: RGBColor,
) -> Result<(), DrawError> {
    // On the axis itself: a failure has no value, so it must not read as a small one.
    let y = py - stacked * (NOTE_PX as i32 + 8);
    screen.draw(&Cross::new((px, y), 7, color.stroke_width(3)))?;
    // Raised off the axis line so the axis does not strike through the reason.
    let style = font(NOTE_PX).color(&color).pos(Pos::new(HPos::Right, VPos::Bottom));
    screen.draw(&Text::new(reason.to_string(), (px - 10, y - 2), style))?;
    Ok(())
}
