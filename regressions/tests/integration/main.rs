//! Behaviour seen from outside: run comparisons and histories.
//!
//! One test binary per crate (each file here a module) rather than one per file: every
//! test binary links polars and libtorch, and within one binary libtest runs independent
//! tests side by side.

mod common;
mod compare;
mod history;
