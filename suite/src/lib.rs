//! stratlab as a library: the parts of the binary that tests, benches and other tools reuse.
pub mod cli;
pub mod commands;
pub mod fault;
pub mod fingerprint;
pub mod memory_guard;
pub mod plan;
pub mod progress;
pub mod protocol;
pub mod runner;
pub mod shapes;
pub mod suite_error;
pub mod suite_file;
pub mod telemetry;
pub mod training;
pub mod trial;
pub mod trial_rows;
pub mod worker;
