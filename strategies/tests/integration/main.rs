//! Behaviour seen from outside: every strategy's training.
//!
//! One test binary per crate (each file here a module) rather than one per file: every
//! test binary links polars and libtorch, and within one binary libtest runs independent
//! tests side by side.

mod asynchrony;
mod common;
mod device_double;
mod distributed_equivalence;
mod pipeline_equivalence;
mod pipeline_ranks;
mod pipeline_timelines;
mod single_training;
mod straggler;
