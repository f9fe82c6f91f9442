//! Behaviour seen from outside: the network zoo.
//!
//! One test binary per crate (each file here a module) rather than one per file: every
//! test binary links polars and libtorch, and within one binary libtest runs independent
//! tests side by side.

mod analysis;
mod common;
mod errors;
mod forward;
mod parameter_counts;
