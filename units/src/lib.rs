//! Quantities with their units, on the ground floor: the performance model, the link
//! emulation, the runner and the results tables all read the same [`ByteSize`],
//! [`Bandwidth`], [`Latency`] and [`Link`], so a link means one thing from a suite file to
//! a stored row. See the crate README.

mod link;
mod units;

pub use link::{stored_link, Bandwidth, Latency, Link};
pub use units::{byte_unit_names, ByteSize, FlopRate, UnitError, BYTE_SIZE_GRAMMAR};
