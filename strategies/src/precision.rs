//! The floating-point type a trial trains in: weights, gradients, activations and the
//! messages strategies exchange.
//!
//! Every trial the runner starts trains in float32. Float64 exists for the equivalence
//! tests: in float32 the order of a reduction (which libtorch picks by batch size and CPU)
//! moves results by ~1e-4 relative, so a test that compares a distributed strategy with
//! single-device training must either tolerate that much or run in float64, where the same
//! reorderings move results by ~1e-15 and a tolerance of 1e-9 checks the algorithm exactly.

use serde::{Deserialize, Serialize};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

/// Weights, gradients and activations in this type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// 32-bit floats, what every benchmark trial trains in.
    #[default]
    Float32,
    /// 64-bit floats, for tests that compare strategies to rounding error.
    Float64,
}

impl Precision {
    /// The libtorch element type.
    pub fn kind(self) -> Kind {
        match self {
            Precision::Float32 => Kind::Float,
            Precision::Float64 => Kind::Double,
        }
    }

    /// Casts a freshly built (float32) store's floating-point variables to this type. The
    /// values are those float32 initialisation drew, so every strategy and the single-device
    /// reference start from the same weights whatever the precision.
    pub fn apply_to(self, store: &mut VarStore) {
        if self == Precision::Float64 {
            store.double();
        }
    }

    /// `input` (a float32 batch from the loader) on `device` in this type.
    pub fn input(self, input: &Tensor, device: Device) -> Tensor {
        input.to_device(device).to_kind(self.kind())
    }
}
