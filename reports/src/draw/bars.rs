//! One panel of grouped bars: categories along x, a fixed slot per series inside each
//! category, medians as bars, min–max whiskers for repeats, "n=1" marks for single runs and
//! hatched grey stubs labelled with the reason for failed trials. The y axis is linear, or
//! logarithmic where the bars' values span so much that the small ones would vanish.

use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::draw::axes::{category_labels, draw_x_categories, fmt_tick, y_label_area_px, LabelLayout};
use crate::draw::hatch::{back_hatch_rect, hatch_rect};
use crate::draw::legend::{LegendEntry, Swatch};
use crate::render::{log_panel, DrawError, PanelLayout, TickLog};
use crate::style::{font, is_light, AXIS_PX, FAILED_FILL, FAILED_HATCH, GRID, INK, NOTE_PX, REFERENCE, TICK_PX};
use crate::Plotted;

/// One bar: its colour, what it shows, and the mark of what it computed in.
#[derive(Debug, Clone)]
pub(crate) struct Bar {
    pub color: RGBColor,
    pub outcome: Plotted,
    pub mark: Mark,
}

/// How a bar says what its cell computed in, within its strategy's colour: plain for the
/// default (float32, contiguous, SGD), then hatchings in the order the choices appear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// No hatching.
    Plain,
    /// "/" lines.
    Hatched,
    /// "\\" lines.
    BackHatched,
    /// Both.
    CrossHatched,
}

/// The marks of the compute choices `computes` (empty: the default), in order of
/// appearance: the default plain, the others hatched; past three they cycle.
pub(crate) fn compute_marks<'a>(computes: impl IntoIterator<Item = &'a str>) -> Vec<(String, Mark)> {
    const MARKS: [Mark; 3] = [Mark::Hatched, Mark::BackHatched, Mark::CrossHatched];
    let mut marks: Vec<(String, Mark)> = Vec::new();
    for compute in computes {
        if marks.iter().any(|(known, _)| known == compute) {
            continue;
        }
        let others = marks.iter().filter(|(known, _)| !known.is_empty()).count();
        let mark = if compute.is_empty() { Mark::Plain } else { MARKS[others % MARKS.len()] };
        marks.push((compute.to_owned(), mark));
    }
    marks
}

/// Legend entries for the marks of non-default compute choices; none when every bar
/// computed by default. A figure that shows both names the default too.
pub(crate) fn mark_legend<'a>(marks: impl IntoIterator<Item = (&'a str, Mark)>) -> Vec<LegendEntry> {
    let mut seen: Vec<(&str, Mark)> = Vec::new();
    for (compute, mark) in marks {
        if !seen.iter().any(|(known, _)| *known == compute) {
            seen.push((compute, mark));
        }
    }
    if seen.iter().all(|(compute, _)| compute.is_empty()) {
        return Vec::new();
    }
    let grey = RGBColor(150, 150, 150);
    seen.into_iter()
        .map(|(compute, mark)| {
            let label = if compute.is_empty() { "fp32 · contiguous".to_owned() } else { compute.to_owned() };
            let swatch = match mark {
                Mark::Plain => Swatch::Fill(grey),
                Mark::Hatched => Swatch::Hatched { fill: grey, hatch: INK },
                Mark::BackHatched => Swatch::BackHatched { fill: grey, hatch: INK },
                Mark::CrossHatched => Swatch::CrossHatched { fill: grey, hatch: INK },
            };
            LegendEntry::new(swatch, label)
        })
        .collect()
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
    /// How values map onto the y axis.
    pub y_scale: YScale,
    /// Mark single runs with "n=1" on the bar (off when the whole figure is n = 1 and says
    /// so once in its subtitle).
    pub label_single_runs: bool,
}

/// Fraction of a category's width the bars use; the rest separates categories.
const GROUP_FILL: f64 = 0.8;

/// Largest ratio of a panel's largest to smallest value still drawn on a linear axis: past
/// it the smallest bar would be under a tenth of the axis (the ResNet-18 bars of a default
/// run, 50 samples/s beside the small CNN's 1700, were a few pixels tall).
pub(crate) const LINEAR_SPREAD_MAX: f64 = 10.0;

/// How a bar panel's y axis maps values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum YScale {
    /// From 0 to the panel's top: a bar's height is its value.
    Linear,
    /// Logarithmic from `bottom`, a power of ten at least twice below the smallest value, so
    /// every bar keeps a readable height; a bar's height is then log(value ÷ bottom), which
    /// the panel's title says.
    Log { bottom: f64 },
}

impl YScale {
    /// Linear unless the measured values (medians and whiskers) span more than
    /// [`LINEAR_SPREAD_MAX`]×.
    pub(crate) fn for_values<'a>(outcomes: impl IntoIterator<Item = &'a Plotted>) -> YScale {
        let values: Vec<f64> = outcomes
            .into_iter()
            .filter_map(Plotted::stat)
            .flat_map(|s| [s.min, s.median, s.max])
            .filter(|v| v.is_finite())
            .collect();
        let smallest = values.iter().copied().fold(f64::INFINITY, f64::min);
        let largest = values.iter().copied().fold(0.0, f64::max);
        // NaN-safe: a smallest value that is not positive (or not a number) draws linear.
        if smallest.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) || largest / smallest <= LINEAR_SPREAD_MAX {
            return YScale::Linear;
        }
        let mut bottom = 10f64.powf(smallest.log10().floor());
        if smallest / bottom < 2.0 {
            bottom /= 10.0;
        }
        YScale::Log { bottom }
    }

    /// Where bars start.
    fn base(self) -> f64 {
        match self {
            YScale::Linear => 0.0,
            YScale::Log { bottom } => bottom,
        }
    }

    /// The value `fraction` of the way up an axis that ends at `top`.
    fn at_fraction(self, top: f64, fraction: f64) -> f64 {
        match self {
            YScale::Linear => top * fraction,
            YScale::Log { bottom } => bottom * (top / bottom).powf(fraction),
        }
    }

    /// The panel's title with the scale named when it is not linear (in the title: the
    /// rotated axis description has no room to spare).
    pub(crate) fn title(self, title: &str) -> String {
        match self {
            YScale::Linear => title.to_owned(),
            YScale::Log { .. } => format!("{title} (log scale)"),
        }
    }
}

/// The largest value a set of outcomes reaches, whiskers included.
pub(crate) fn max_value<'a>(outcomes: impl IntoIterator<Item = &'a Plotted>) -> f64 {
    outcomes.into_iter().filter_map(Plotted::stat).map(|s| s.max.max(s.median)).fold(0.0, f64::max)
}

/// Whether any measured outcome rests on more than one run.
pub(crate) fn any_repeats<'a>(outcomes: impl IntoIterator<Item = &'a Plotted>) -> bool {
    outcomes.into_iter().filter_map(Plotted::stat).any(|s| s.n > 1)
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

    let mut builder = ChartBuilder::on(area);
    builder
        .caption(panel.y_scale.title(&panel.title), font(AXIS_PX))
        .margin(8)
        .margin_right(18)
        .x_label_area_size(cats.area_px)
        .y_label_area_size(y_area);
    let x_range = 0f64..n_groups as f64;
    let layout = Layout { group_px, slots, labels: cats.layout };
    match panel.y_scale {
        YScale::Linear => draw_bars(area, builder.build_cartesian_2d(x_range, 0f64..panel.y_max)?, panel, &layout),
        YScale::Log { bottom } => {
            draw_bars(area, builder.build_cartesian_2d(x_range, (bottom..panel.y_max).log_scale())?, panel, &layout)
        }
    }
}

/// Horizontal layout of a panel, worked out before its chart is built.
struct Layout {
    /// Pixels per category.
    group_px: f64,
    /// Bar slots per category.
    slots: usize,
    /// How category labels are laid out.
    labels: LabelLayout,
}

/// Draws the mesh, bars, whiskers, stubs, reference line and category labels of `panel` on
/// `chart`, whose y axis is linear or logarithmic as `panel.y_scale` says.
fn draw_bars<DB: DrawingBackend, Y: Ranged<ValueType = f64> + ValueFormatter<f64>>(
    area: &DrawingArea<DB, Shift>,
    mut chart: ChartContext<'_, DB, Cartesian2d<RangedCoordf64, Y>>,
    panel: &BarPanel,
    layout: &Layout,
) -> Result<(), DrawError> {
    let Layout { group_px, slots, labels } = *layout;
    let n_groups = panel.groups.len().max(1);
    let base = panel.y_scale.base();
    let y_ticks = TickLog::new();
    let y_label = |value: &f64| y_ticks.label(*value, fmt_tick);
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
        .y_label_formatter(&y_label);
    if let Some(desc) = &panel.x_desc {
        mesh.x_desc(desc.as_str());
    }
    mesh.draw()?;

    let screen = area.use_screen_coord();
    if let YScale::Log { bottom } = panel.y_scale {
        draw_log_minor_ticks(&chart, &screen, bottom, panel.y_max, &y_ticks)?;
    }
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
                Plotted::Measured(stat) => {
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(x0, base), (x1, stat.median)],
                        bar.color.filled(),
                    )))?;
                    let p0 = chart.backend_coord(&(x0, stat.median));
                    let p1 = chart.backend_coord(&(x1, base));
                    draw_mark(&screen, p0, p1, bar.mark, bar.color)?;
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(x0, base), (x1, stat.median)],
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
                gap => {
                    // A stub, not a bar: the height carries no value, the hatching and label say so.
                    let stub = panel.y_scale.at_fraction(panel.y_max, 0.035);
                    let (px0, py0) = chart.backend_coord(&(x0, stub));
                    let (px1, py1) = chart.backend_coord(&(x1, base));
                    chart
                        .draw_series(std::iter::once(Rectangle::new([(x0, base), (x1, stub)], FAILED_FILL.filled())))?;
                    hatch_rect(&screen, (px0, py0), (px1, py1), FAILED_HATCH, 5)?;
                    // Outlined in the series colour so the reader sees whose trial failed.
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(x0, base), (x1, stub)],
                        bar.color.stroke_width(2),
                    )))?;
                    label_above(&screen, &gap.gap_label().unwrap_or_default(), x_mid_px, py0, slot_px, INK)?;
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

    let top_px = chart.backend_coord(&(0.0, base)).1;
    let placed: Vec<(i32, String)> = panel
        .groups
        .iter()
        .enumerate()
        .map(|(gi, g)| (chart.backend_coord(&(gi as f64 + 0.5, 0.0)).0, g.label.clone()))
        .collect();
    draw_x_categories(&screen, &placed, top_px, labels)?;
    log_panel(PanelLayout {
        top_px: area.get_base_pixel().1,
        panel_px: area.dim_in_pixel().1,
        plot_px: chart.plotting_area().dim_in_pixel().1,
        y_ticks: y_ticks.ticks(),
        x_ticks: placed.into_iter().map(|(x, label)| (f64::from(x), label)).collect(),
        notes: Vec::new(),
    });
    Ok(())
}

/// Hatches a bar's rectangle as its mark says, in ink or white, whichever reads on its colour.
fn draw_mark<DB: DrawingBackend>(
    screen: &DrawingArea<DB, Shift>,
    p0: (i32, i32),
    p1: (i32, i32),
    mark: Mark,
    color: RGBColor,
) -> Result<(), DrawError> {
    let ink = if is_light(color) { INK } else { WHITE };
    if matches!(mark, Mark::Hatched | Mark::CrossHatched) {
        hatch_rect(screen, p0, p1, ink, 7)?;
    }
    if matches!(mark, Mark::BackHatched | Mark::CrossHatched) {
        back_hatch_rect(screen, p0, p1, ink, 7)?;
    }
    Ok(())
}

/// plotters labels a log axis at powers of ten only, which over the one or two decades a
/// bar panel spans leaves one or two labels; this adds gridlines and labels at 2× and 5×
/// each power, as log-scale plots commonly have.
fn draw_log_minor_ticks<DB: DrawingBackend, Y: Ranged<ValueType = f64> + ValueFormatter<f64>>(
    chart: &ChartContext<'_, DB, Cartesian2d<RangedCoordf64, Y>>,
    screen: &DrawingArea<DB, Shift>,
    bottom: f64,
    top: f64,
    ticks: &TickLog,
) -> Result<(), DrawError> {
    let (x_start, x_end) = (chart.x_range().start, chart.x_range().end);
    let style = font(TICK_PX).pos(Pos::new(HPos::Right, VPos::Center));
    let mut decade = bottom;
    while decade < top {
        for value in [2.0 * decade, 5.0 * decade].into_iter().filter(|v| *v < top) {
            chart.plotting_area().draw(&PathElement::new(vec![(x_start, value), (x_end, value)], GRID))?;
            let (x_px, y_px) = chart.backend_coord(&(x_start, value));
            screen.draw(&Text::new(ticks.label(value, fmt_tick), (x_px - 6, y_px), style.clone()))?;
        }
        decade *= 10.0;
    }
    Ok(())
}

/// A vertical min–max line with caps, centred at `x`.
fn draw_whisker<DB: DrawingBackend, Y: Ranged<ValueType = f64> + ValueFormatter<f64>>(
    chart: &ChartContext<'_, DB, Cartesian2d<RangedCoordf64, Y>>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Stat;

    fn measured(values: &[f64]) -> Vec<Plotted> {
        values.iter().map(|&v| Plotted::Measured(Stat { median: v, min: v, max: v, n: 1 })).collect()
    }

    #[test]
    fn values_within_ten_times_of_each_other_stay_on_a_linear_axis() {
        assert_eq!(YScale::for_values(&measured(&[150.0, 1400.0])), YScale::Linear);
        assert_eq!(YScale::for_values(&measured(&[])), YScale::Linear);
    }

    #[test]
    fn a_wider_spread_gets_a_log_axis_from_a_power_of_ten_at_least_twice_below_the_smallest() {
        // 49.9 samples/s beside 1430: from 10 (49.9 is 5× above it).
        assert_eq!(YScale::for_values(&measured(&[49.9, 1430.0])), YScale::Log { bottom: 10.0 });
        // 0.25 GiB beside 6.03: 0.1 would leave 0.25 only 2.5× above the axis, still enough.
        assert_eq!(YScale::for_values(&measured(&[0.25, 6.03])), YScale::Log { bottom: 0.1 });
        // A value on a power of ten would be a bar of no height: one decade lower.
        assert_eq!(YScale::for_values(&measured(&[100.0, 5000.0])), YScale::Log { bottom: 10.0 });
        let log = YScale::Log { bottom: 10.0 };
        assert!((log.at_fraction(1000.0, 0.5) - 100.0).abs() < 1e-9);
        assert_eq!(log.title("Training throughput"), "Training throughput (log scale)");
    }

    #[test]
    fn whiskers_count_towards_the_spread() {
        let wide = Plotted::Measured(Stat { median: 300.0, min: 20.0, max: 400.0, n: 3 });
        assert_eq!(YScale::for_values(&[wide]), YScale::Log { bottom: 10.0 });
    }
}
