//! Behaviour seen from outside: the tables and the run store.
//!
//! One test binary per crate (each file here a module) rather than one per file: every
//! test binary links polars and libtorch, and within one binary libtest runs independent
//! tests side by side.

mod common;
mod pipeline_stages;
mod schemas;
mod store_runs;
mod timeline;
