//! Thesis figs. 2.5, 6.1 and 7.2: a pipeline's execution timeline, a row per worker, time
//! along x, forward (light), recompute (pale, cross-hatched) and backward (dark, hatched)
//! blocks coloured by micro-batch, so the fill-and-drain bubbles show as white gaps; each
//! row ends with its idle share.

use std::path::PathBuf;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::draw::axes::{draw_y_categories, fmt_tick, time_unit};
use crate::draw::hatch::{back_hatch_rect, hatch_rect};
use crate::draw::legend::{with_legend_below, LegendEntry, Swatch};
use crate::draw::title::with_title;
use crate::render::{render, DrawError, Figure};
use crate::style::{category_color, font, is_light, shade, tint, AXIS_PX, GRID, INK, TICK_PX};
use crate::{FigureTarget, ReportError};
use stratlab_results::EventKind;

const FIGURE: &str = "pipeline_timeline";
/// How many micro-batch colours exist before they repeat (Tol's muted scheme).
const MICRO_BATCH_COLOURS: u32 = 9;

/// How an event is drawn: its block's look, from the stored kind (collectives look alike,
/// so do a send and a receive); `None` for what is no part of a step's timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Forward,
    Backward,
    /// A split backward's input gradient (zero-bubble's `I`).
    InputBackward,
    /// A split backward's weight gradients (zero-bubble's `W`).
    WeightBackward,
    Recompute,
    Collective,
    SendRecv,
    Optimizer,
    DataWait,
    HostToDevice,
    StragglerWait,
}

impl Block {
    fn of(kind: EventKind) -> Option<Block> {
        Some(match kind {
            EventKind::Forward => Block::Forward,
            EventKind::Backward => Block::Backward,
            EventKind::BackwardInput => Block::InputBackward,
            EventKind::BackwardWeight => Block::WeightBackward,
            EventKind::Recompute => Block::Recompute,
            EventKind::AllReduce
            | EventKind::Broadcast
            | EventKind::Reduce
            | EventKind::AllGather
            | EventKind::ReduceScatter => Block::Collective,
            EventKind::Send | EventKind::Recv => Block::SendRecv,
            EventKind::Optimizer => Block::Optimizer,
            EventKind::DataWait => Block::DataWait,
            EventKind::H2d => Block::HostToDevice,
            EventKind::StragglerWait => Block::StragglerWait,
            EventKind::Barrier | EventKind::Idle | EventKind::Eval => return None,
        })
    }
}

/// One interval of one worker's time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimelineEvent {
    /// Worker index, 0-based; worker 0 is the top row.
    pub worker: u32,
    /// What the worker did, as stored (evaluation, barriers and recorded idle time are not
    /// drawn: a gap shows idle time).
    pub kind: EventKind,
    /// The micro-batch it belongs to, for forward and backward passes.
    pub micro_batch: Option<u32>,
    /// The pipeline stage of the pass, given where a worker holds several (interleaved):
    /// its block is labelled as PyTorch writes the action (`2F0`).
    pub pipeline_stage: Option<u32>,
    /// Start, seconds on any clock shared by all workers.
    pub start_s: f64,
    /// End, seconds on the same clock.
    pub end_s: f64,
}

/// One training step (or a few) of a pipeline, as recorded or as scheduled: the input of
/// the timeline figure.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineTimeline {
    /// Figure title, e.g. "GPipe, 2 workers, 4 micro-batches".
    pub title: String,
    /// Number of workers; a worker without events is drawn as an all-idle row.
    pub workers: u32,
    /// Row names by worker index (`stage 0`, `replica 1 · stage 0`); a worker past the end
    /// of the list is named `worker <index>`.
    pub worker_labels: Vec<String>,
    /// The events, in any order.
    pub events: Vec<TimelineEvent>,
}

impl PipelineTimeline {
    /// The row name of `worker`.
    pub fn worker_label(&self, worker: u32) -> String {
        self.worker_labels.get(worker as usize).cloned().unwrap_or_else(|| format!("worker {worker}"))
    }

    /// Earliest start and latest end over all events; `None` without events.
    pub fn span_s(&self) -> Option<(f64, f64)> {
        let start = self.events.iter().map(|e| e.start_s).reduce(f64::min)?;
        let end = self.events.iter().map(|e| e.end_s).reduce(f64::max)?;
        Some((start, end))
    }

    /// The share of the timeline's span in which `worker` runs nothing (waiting for data
    /// counts as idle): the measured pipeline bubble plus any other stall.
    pub fn idle_share(&self, worker: u32) -> f64 {
        let Some((start, end)) = self.span_s() else { return 1.0 };
        if end <= start {
            return 0.0;
        }
        let mut busy: Vec<(f64, f64)> = self
            .events
            .iter()
            .filter(|e| e.worker == worker && e.kind != EventKind::DataWait)
            .map(|e| (e.start_s, e.end_s))
            .collect();
        busy.sort_by(|a, b| a.0.total_cmp(&b.0));
        // Union of intervals, so overlapping events (compute and communication) count once.
        let mut covered = 0.0;
        let mut current: Option<(f64, f64)> = None;
        for (s, e) in busy {
            current = match current {
                Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
                Some((cs, ce)) => {
                    covered += ce - cs;
                    Some((s, e))
                }
                None => Some((s, e)),
            };
        }
        if let Some((cs, ce)) = current {
            covered += ce - cs;
        }
        1.0 - covered / (end - start)
    }
}

/// Draws `timeline` into `target`; returns the files.
pub fn pipeline_timeline(timeline: &PipelineTimeline, target: &FigureTarget) -> Result<Vec<PathBuf>, ReportError> {
    check(timeline, "")?;
    render(&TimelineFigure { title: &timeline.title, panels: vec![Panel { caption: None, timeline }] }, target)
}

/// Draws `panels` one above the other under `title` (thesis fig. 7.1 above 7.2: the
/// predicted step above the measured one), each headed by its timeline's title, on one
/// time axis from each panel's first event, so their lengths compare; returns the files.
pub fn pipeline_timelines(
    title: &str,
    panels: &[&PipelineTimeline],
    target: &FigureTarget,
) -> Result<Vec<PathBuf>, ReportError> {
    if panels.is_empty() {
        return Err(ReportError::Empty { figure: FIGURE });
    }
    for (i, timeline) in panels.iter().enumerate() {
        check(timeline, &format!("panels[{i}]."))?;
    }
    let panels = panels.iter().map(|&timeline| Panel { caption: Some(&timeline.title), timeline }).collect();
    render(&TimelineFigure { title, panels }, target)
}

/// Refuses a timeline the figure cannot draw; `at` prefixes the field names.
fn check(timeline: &PipelineTimeline, at: &str) -> Result<(), ReportError> {
    if timeline.events.is_empty() {
        return Err(ReportError::Empty { figure: FIGURE });
    }
    let invalid = |field: String, value: String, why| ReportError::InvalidInput { figure: FIGURE, field, value, why };
    if timeline.workers == 0 {
        return Err(invalid(format!("{at}workers"), "0".into(), "a timeline has at least one worker"));
    }
    for (i, e) in timeline.events.iter().enumerate() {
        if e.worker >= timeline.workers {
            return Err(invalid(
                format!("{at}events[{i}].worker"),
                e.worker.to_string(),
                "worker index must be below `workers`",
            ));
        }
        if !(e.start_s.is_finite() && e.end_s.is_finite() && e.start_s <= e.end_s) {
            return Err(invalid(
                format!("{at}events[{i}].end_s"),
                format!("{} (start {})", e.end_s, e.start_s),
                "start and end must be finite with start <= end",
            ));
        }
    }
    Ok(())
}

/// One timeline of the figure, under its caption where the figure has several.
struct Panel<'a> {
    caption: Option<&'a str>,
    timeline: &'a PipelineTimeline,
}

struct TimelineFigure<'a> {
    title: &'a str,
    panels: Vec<Panel<'a>>,
}

/// Fill, outline, hatch and label of a block of micro-batch `micro_batch` (and pipeline
/// stage `stage`, where given).
fn block_look(
    block: Block,
    micro_batch: Option<u32>,
    stage: Option<u32>,
) -> (RGBColor, RGBColor, Option<RGBColor>, String) {
    let neutral = RGBColor(120, 120, 120);
    let mb_color = micro_batch.map(|m| category_color(m as usize)).unwrap_or(neutral);
    let mb = micro_batch.map(|m| m.to_string()).unwrap_or_default();
    let stage = stage.map(|stage| stage.to_string()).unwrap_or_default();
    match block {
        Block::Forward => (tint(mb_color, 0.5), shade(mb_color, 0.3), None, format!("{stage}F{mb}")),
        Block::Backward => (mb_color, shade(mb_color, 0.4), Some(tint(mb_color, 0.45)), format!("{stage}B{mb}")),
        // The halves of a split backward: I as dark as a backward, W darker still and hatched
        // the other way, so the W passes that fill the bubble read apart from the I chain.
        Block::InputBackward => (mb_color, shade(mb_color, 0.4), None, format!("{stage}I{mb}")),
        Block::WeightBackward => {
            (shade(mb_color, 0.25), shade(mb_color, 0.5), Some(tint(mb_color, 0.3)), format!("{stage}W{mb}"))
        }
        Block::Recompute => {
            (tint(mb_color, 0.8), shade(mb_color, 0.3), Some(tint(mb_color, 0.35)), format!("{stage}R{mb}"))
        }
        Block::Collective => (RGBColor(100, 100, 100), INK, None, "AR".into()),
        Block::SendRecv => (RGBColor(185, 185, 185), RGBColor(120, 120, 120), None, "S/R".into()),
        Block::Optimizer => (RGBColor(30, 30, 30), INK, None, "opt".into()),
        Block::DataWait => (RGBColor(242, 242, 242), RGBColor(170, 170, 170), None, "wait".into()),
        Block::HostToDevice => (RGBColor(215, 215, 215), RGBColor(120, 120, 120), None, "H2D".into()),
        // Tol's muted rose: the one warm block, so a slowed rank's waits stand out.
        Block::StragglerWait => (RGBColor(204, 102, 119), RGBColor(136, 34, 85), None, "slow".into()),
    }
}

impl Figure for TimelineFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let timelines: Vec<&PipelineTimeline> = self.panels.iter().map(|panel| panel.timeline).collect();
        // One scale for every panel: each from its own first event, to the longest span.
        let longest_s = timelines.iter().filter_map(|t| t.span_s()).map(|(start, end)| end - start).fold(0.0, f64::max);
        let (divisor, unit) = time_unit(longest_s);
        let x_max = (longest_s / divisor).max(1e-9);

        let body = with_title(root, self.title, Some(&subtitle(&timelines)))?;
        let plot = with_legend_below(&body, &legend(&timelines))?;
        let mut label_w = 0;
        for t in &timelines {
            for worker in 0..t.workers {
                label_w = label_w.max(plot.estimate_text_size(&t.worker_label(worker), &font(TICK_PX))?.0);
            }
        }
        // Panels share the height by their rows, each with its caption and axis.
        let rows: Vec<u32> = timelines.iter().map(|t| t.workers).collect();
        let (_, height) = plot.dim_in_pixel();
        let caption_px = if self.panels.iter().any(|panel| panel.caption.is_some()) { AXIS_PX as u32 + 12 } else { 0 };
        let axis_px = TICK_PX as u32 + AXIS_PX as u32 + 30;
        let fixed = (caption_px + axis_px + 20) * rows.len() as u32;
        let per_row = height.saturating_sub(fixed) as f64 / f64::from(rows.iter().sum::<u32>().max(1));
        let mut rest = plot;
        for (i, panel) in self.panels.iter().enumerate() {
            let panel_px = caption_px + axis_px + 20 + (per_row * f64::from(rows[i])) as u32;
            let area = match i + 1 == self.panels.len() {
                true => rest.clone(),
                false => {
                    let (area, below) = rest.split_vertically(panel_px);
                    rest = below;
                    area
                }
            };
            let area = match panel.caption {
                Some(caption) => {
                    let (head, area) = area.split_vertically(caption_px);
                    let style = font(AXIS_PX).pos(Pos::new(HPos::Left, VPos::Center));
                    head.draw(&Text::new(caption.to_owned(), (label_w as i32 + 30, caption_px as i32 / 2), style))?;
                    area
                }
                None => area,
            };
            draw_panel(&area, panel.timeline, (divisor, unit, x_max), label_w, axis_px)?;
        }
        Ok(())
    }
}

/// One timeline's rows on `area`: its blocks from its first event at 0, on the figure's
/// scale (`divisor` seconds per `unit`, `x_max` units wide), each row's idle share at its
/// right.
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    t: &PipelineTimeline,
    (divisor, unit, x_max): (f64, &str, f64),
    label_w: u32,
    axis_px: u32,
) -> Result<(), DrawError> {
    let (t0, _) = t.span_s().unwrap_or((0.0, 1.0));
    let rows = t.workers;
    let (idle_w, _) = area.estimate_text_size("idle 100 %", &font(TICK_PX))?;
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .margin_right(idle_w as i32 + 24)
        .x_label_area_size(axis_px)
        .y_label_area_size(label_w + 20)
        .build_cartesian_2d(0f64..x_max, 0f64..f64::from(rows))?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_labels(12)
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .axis_style(INK)
        .label_style(font(TICK_PX))
        .axis_desc_style(font(AXIS_PX))
        .x_desc(format!("time ({unit})"))
        .x_label_formatter(&fmt_tick)
        .draw()?;
    let screen = area.use_screen_coord();
    // Worker 0 on top, as in the thesis.
    let row_of = |worker: u32| f64::from(rows - 1 - worker);

    // Communication first: where it overlaps a pass (a comm thread), the pass stays visible.
    let mut in_order: Vec<(Block, &TimelineEvent)> =
        t.events.iter().filter_map(|e| Some((Block::of(e.kind)?, e))).collect();
    in_order.sort_by_key(|(block, _)| !matches!(block, Block::Collective | Block::SendRecv));
    for (block, event) in in_order {
        let (fill, outline, hatch, label) = block_look(block, event.micro_batch, event.pipeline_stage);
        let row = row_of(event.worker);
        let x0 = (event.start_s - t0) / divisor;
        let x1 = (event.end_s - t0) / divisor;
        let corners = [(x0, row + 0.14), (x1, row + 0.86)];
        chart.draw_series(std::iter::once(Rectangle::new(corners, fill.filled())))?;
        let p0 = chart.backend_coord(&corners[0]);
        let p1 = chart.backend_coord(&corners[1]);
        if let Some(hatch) = hatch {
            if block == Block::Recompute {
                hatch_rect(&screen, p0, p1, hatch, 12)?;
                back_hatch_rect(&screen, p0, p1, hatch, 12)?;
            } else if block == Block::WeightBackward {
                back_hatch_rect(&screen, p0, p1, hatch, 8)?;
            } else {
                hatch_rect(&screen, p0, p1, hatch, 8)?;
            }
        }
        chart.draw_series(std::iter::once(Rectangle::new(corners, outline.stroke_width(1))))?;
        let style = font(TICK_PX).color(if is_light(fill) { &INK } else { &WHITE });
        let (text_w, _) = screen.estimate_text_size(&label, &style)?;
        if (p1.0 - p0.0).abs() > text_w as i32 + 6 {
            let centre = ((p0.0 + p1.0) / 2, (p0.1 + p1.1) / 2);
            screen.draw(&Text::new(label, centre, style.pos(Pos::new(HPos::Center, VPos::Center))))?;
        }
    }

    let (right_px, _) = chart.backend_coord(&(x_max, 0.0));
    let (left_px, _) = chart.backend_coord(&(0.0, 0.0));
    let mut names = Vec::new();
    for worker in 0..rows {
        let y_px = chart.backend_coord(&(0.0, row_of(worker) + 0.5)).1;
        names.push((y_px, t.worker_label(worker)));
        let idle = format!("idle {:.0} %", t.idle_share(worker) * 100.0);
        let style = font(TICK_PX).pos(Pos::new(HPos::Left, VPos::Center));
        screen.draw(&Text::new(idle, (right_px + 10, y_px), style))?;
    }
    draw_y_categories(&screen, &names, left_px)?;
    Ok(())
}

/// How to read the blocks; recompute is named only when the timeline has some.
fn subtitle(timelines: &[&PipelineTimeline]) -> String {
    let events = || timelines.iter().flat_map(|t| &t.events);
    let split = events().any(|e| e.kind == EventKind::BackwardWeight);
    let passes = match (events().any(|e| e.kind == EventKind::Recompute), split) {
        (_, true) => "light: forward, dark: input gradient (I), darker back-hatched: weight gradients (W)",
        (true, false) => "light: forward, pale cross-hatched: recompute, dark hatched: backward",
        (false, false) => "light: forward, dark hatched: backward",
    };
    let labels = match events().any(|e| e.pipeline_stage.is_some()) {
        true => "; 2F0: stage 2, forward of micro-batch 0",
        false => "",
    };
    format!("{passes}, colour: micro-batch{labels}; white gaps: idle")
}

/// Micro-batch colours (once each, they cycle), the pass encodings and the other kinds present.
fn legend(timelines: &[&PipelineTimeline]) -> Vec<LegendEntry> {
    let events = || timelines.iter().flat_map(|t| &t.events);
    let mut entries = Vec::new();
    let max_mb = events().filter_map(|e| e.micro_batch).max();
    if let Some(max_mb) = max_mb {
        for m in 0..=max_mb.min(MICRO_BATCH_COLOURS - 1) {
            let label = if max_mb >= MICRO_BATCH_COLOURS {
                let repeats: Vec<String> =
                    (m..=max_mb).step_by(MICRO_BATCH_COLOURS as usize).take(3).map(|k| k.to_string()).collect();
                let more = if (m..=max_mb).step_by(MICRO_BATCH_COLOURS as usize).count() > 3 { ", …" } else { "" };
                format!("micro-batch {}{more}", repeats.join(", "))
            } else {
                format!("micro-batch {m}")
            };
            entries.push(LegendEntry::new(Swatch::Fill(category_color(m as usize)), label));
        }
    }
    let grey = RGBColor(120, 120, 120);
    let has = |block: Block| events().any(|e| Block::of(e.kind) == Some(block));
    if has(Block::Forward) {
        entries.push(LegendEntry::new(Swatch::Fill(tint(grey, 0.5)), "forward (F)"));
    }
    if has(Block::Recompute) {
        entries.push(LegendEntry::new(Swatch::CrossHatched { fill: tint(grey, 0.8), hatch: grey }, "recompute (R)"));
    }
    if has(Block::Backward) {
        entries.push(LegendEntry::new(Swatch::Hatched { fill: grey, hatch: tint(grey, 0.45) }, "backward (B)"));
    }
    if has(Block::InputBackward) {
        entries.push(LegendEntry::new(Swatch::Fill(grey), "input gradient (I)"));
    }
    if has(Block::WeightBackward) {
        let swatch = Swatch::Hatched { fill: shade(grey, 0.25), hatch: tint(grey, 0.3) };
        entries.push(LegendEntry::new(swatch, "weight gradients (W)"));
    }
    for block in [
        Block::Collective,
        Block::SendRecv,
        Block::Optimizer,
        Block::HostToDevice,
        Block::DataWait,
        Block::StragglerWait,
    ] {
        if has(block) {
            let (fill, _, _, short) = block_look(block, None, None);
            let name = match block {
                Block::Collective => "all-reduce",
                Block::SendRecv => "send/receive",
                Block::Optimizer => "optimizer step",
                Block::HostToDevice => "host-to-device copy",
                Block::StragglerWait => "straggler's slowdown",
                _ => "data wait (idle)",
            };
            entries.push(LegendEntry::new(Swatch::Fill(fill), format!("{name} ({short})")));
        }
    }
    entries.push(LegendEntry::new(Swatch::Empty, "idle"));
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(worker: u32, kind: EventKind, start_s: f64, end_s: f64) -> TimelineEvent {
        TimelineEvent { worker, kind, micro_batch: Some(0), pipeline_stage: None, start_s, end_s }
    }

    #[test]
    fn idle_share_counts_overlaps_once_and_data_wait_as_idle() {
        let t = PipelineTimeline {
            title: String::new(),
            workers: 2,
            worker_labels: Vec::new(),
            events: vec![
                event(0, EventKind::Forward, 0.0, 4.0),
                event(0, EventKind::Send, 3.0, 5.0),
                event(0, EventKind::DataWait, 5.0, 8.0),
                event(1, EventKind::Backward, 2.0, 10.0),
            ],
        };
        assert!((t.idle_share(0) - 0.5).abs() < 1e-12);
        assert!((t.idle_share(1) - 0.2).abs() < 1e-12);
    }
}
