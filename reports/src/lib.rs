//! Paper-style figures from a run's prepared numbers: speedup bars and scaling
//! lines (thesis figs. 3.1, 3.2), throughput and epoch time, time-to-accuracy and loss
//! curves, device utilisation and memory (figs. 7–18 of the single-GPU vs data/model/GPipe
//! study), pipeline timelines
//! (thesis figs. 2.5, 6.1, 7.2) and the bubble against micro-batches, and each rank's
//! step-time breakdown (Holistic Trace Analysis); and a suite's history over runs (asv).
//!
//! Each figure kind is one function in its own file, taking small named structs and a
//! [`FigureTarget`], writing SVG and PNG, and returning the paths written. Failed trials are
//! drawn as failed (a hatched grey stub or an × with the reason), never left out.

pub mod aggregate;
mod asynchrony;
mod draw;
mod figure_target;
mod figures;
mod format;
mod frontier;
mod history_section;
mod html;
mod nodes_section;
mod paper;
mod plotted;
mod png_backend;
mod predictions;
mod render;
mod report_error;
mod run_report;
mod series;
mod stat;
mod style;
pub mod tables;

pub use aggregate::{aggregate_run, RunAggregates};
pub use figure_target::FigureTarget;
pub use figures::asynchrony::{asynchrony, AsynchronyFigure, ModeCurve, StragglerRow, UpdatePoint};
pub use figures::device_usage::{device_usage, DeviceUsageBar};
pub use figures::frontier::{memory_frontier, FrontierBar};
pub use figures::history::{history_chart, HistoryChart, HistoryLine};
pub use figures::loss_curves::{loss_curves, LossCurve, LossCurves, LossPoint};
pub use figures::paper_lines::{paper_lines, PaperLine, PaperLines};
pub use figures::pipeline_bubble::{pipeline_bubble, BubblePoint, PipelineBubble};
pub use figures::pipeline_timeline::{pipeline_timeline, pipeline_timelines, PipelineTimeline, TimelineEvent};
pub use figures::prediction_errors::{prediction_errors, PredictionError};
pub use figures::scaling::{speedup_scaling, speedup_scaling_noted, ScalingLine, ScalingPoint};
pub use figures::signed_errors::{signed_errors, SignedError};
pub use figures::speedup_bars::{speedup_bars, SpeedupBar};
pub use figures::step_breakdown::{step_breakdown, StepBreakdownBar, StepSegments};
pub use figures::throughput::{throughput, ThroughputBar};
pub use figures::time_to_accuracy::{time_to_accuracy, AccuracyCurve, AccuracyPoint, TimeToAccuracy};
pub use format::Format;
pub use frontier::{frontier_bars, frontier_cells, frontier_table, FrontierCell, ProbedBatch};
pub use history_section::{history_chart_of, write_history_figures};
pub use html::{write_report_html, FailedTrialRow, HtmlTable, ReportFigure, ReportPage, ReportSection};
pub use paper::NOT_DRAWN;
pub use plotted::{Plotted, NOT_RECORDED};
pub use predictions::{
    draw_published_scaling, judged_predictions, published_errors, published_summary_text, published_table_text,
    write_predicted_speedup, PredictedCell, PublishedErrors, StepTimes,
};
pub use report_error::ReportError;
pub use run_report::{write_run_report, RunReport};
pub use series::StrategySeries;
pub use stat::Stat;
pub use tables::{matrix_for_terminal, summary_tables, SummaryTable};
