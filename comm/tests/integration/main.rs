//! Behaviour seen from outside: collectives over c10d on loopback.
//!
//! One test binary per crate (each file here a module) rather than one per file: every
//! test binary links polars and libtorch, and within one binary libtest runs independent
//! tests side by side.

mod collectives;
