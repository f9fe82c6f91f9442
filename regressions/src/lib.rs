//! Did performance change between runs? `compare` sets two runs side by side cell by cell
//! (bootstrap interval, verdict against a noise threshold, outcome changes, the fastest
//! strategy per network and data set); `history` follows every run of a suite over time and
//! finds lasting step changes, each attributed to the environment fields that changed.
//!
//! Reads runs through `stratlab-results` only: no libtorch. The binary's `compare` and
//! `history` subcommands and the reports' history figures are its users.

pub mod bootstrap;
mod cells;
mod compare;
mod compare_text;
mod error;
mod history;
mod history_text;
mod outputs;
pub mod step_detection;
mod thresholds;

pub use bootstrap::Statistic;
pub use cells::{suite_label, Cell, CellKey, CellSettings, RunCells};
pub use compare::{compare, statistics_text, CellChange, Comparison, EnvironmentChange, Leadership, Ranking, RunSide};
pub use compare_text::{comparison_text, TextStyle};
pub use error::RegressionError;
pub use history::{environment_key, gather_runs, HeadlineMetric, History, HistoryRow, HistoryRun, HistoryStep};
pub use history_text::history_text;
pub use outputs::{write_comparison, write_history};
pub use thresholds::{Thresholds, Verdict, DEFAULT_NOISE_THRESHOLD, DEFAULT_SIGNIFICANCE, DEFAULT_STATISTIC};
