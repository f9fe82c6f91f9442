//! Behaviour seen from outside: readers, the loader and the data cache.
//!
//! One test binary per crate (each file here a module) rather than one per file: every
//! test binary links polars and libtorch, and within one binary libtest runs independent
//! tests side by side.

mod malformed_inputs;
mod parallel_loader;
mod real_mnist;
mod synthetic_learnable;
