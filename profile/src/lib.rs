//! A network's profile as plain data, on the ground floor: what `stratlab-strategies`
//! measures with libtorch (or puts on a device's roofline), the suite's profile store keeps,
//! and `stratlab-perf-model` predicts from. See the crate README.

mod contention;
mod cost_curve;
mod network_profile;

pub use contention::Contention;
pub use cost_curve::{CostCurve, CurveError};
pub use network_profile::{curve, stage_seconds, value_at, NetworkProfile, StageProfile};
