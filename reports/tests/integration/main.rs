//! Behaviour seen from outside: aggregation, figures and the HTML report.
//!
//! One test binary per crate (each file here a module) rather than one per file: every
//! test binary links polars and libtorch, and within one binary libtest runs independent
//! tests side by side.

mod aggregate;
mod asynchrony;
mod common;
mod default_run;
mod figures;
mod frontier;
mod history;
mod html_chromium;
mod matrix;
mod pipelines;
mod step_breakdown;
/// The run-store fixtures of `stratlab-results`' tests (which allow their own dead code).
#[path = "../../../results/tests/integration/common/mod.rs"]
mod store_fixtures;
