//! What a cell computes in, libtorch-free: its floating-point [`Precision`] and the
//! [`MemoryFormat`] of its convolution tensors, the two axes a suite sweeps beside the
//! strategies (`precision: [fp32, bf16]`, `memory_format: [contiguous, channels_last]`), and
//! [`AutoOr`], a value given or left for the runner to resolve on the device.
//!
//! How each precision runs on a device lives with the trainer (`stratlab_strategies`); here
//! are the names every table, cell key and label uses.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer, IntoDeserializer};
use serde::{Deserialize, Serialize, Serializer};

use crate::{Schedule, StrategyKind, UnknownName};

/// The floating-point types a cell trains in.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
pub enum Precision {
    /// IEEE float32 throughout; on CUDA with TF32 off in matrix products and convolutions.
    #[default]
    #[serde(rename = "fp32", alias = "float32")]
    #[strum(serialize = "fp32")]
    Float32,
    /// float32 weights and activations, matrix products and convolutions on CUDA's tensor
    /// cores in TF32 (10 bits of mantissa); a CUDA mode, refused on a CPU.
    #[serde(rename = "tf32")]
    #[strum(serialize = "tf32")]
    Tfloat32,
    /// PyTorch AMP in bfloat16: float32 weights, gradients and optimizer state; the forward
    /// and the loss under autocast.
    #[serde(rename = "bf16", alias = "bfloat16")]
    #[strum(serialize = "bf16")]
    Bfloat16,
    /// PyTorch AMP in float16, which needs a dynamic loss scaler.
    #[serde(rename = "fp16", alias = "float16")]
    #[strum(serialize = "fp16")]
    Float16,
    /// float64 throughout: the equivalence tests', where reordered reductions move results
    /// by ~1e-15 instead of float32's ~1e-4.
    #[serde(rename = "fp64", alias = "float64")]
    #[strum(serialize = "fp64")]
    Float64,
}

/// Why a precision cannot train a cell: every rule about which precision applies where, in
/// one place (the planner, the runner's `auto`, the trial and the pipeline stages ask it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PrecisionRefused {
    /// fp64 is kept for the equivalence tests.
    #[error("fp64 is the equivalence tests' precision, not a benchmark's; valid: fp32, bf16, tf32, auto")]
    TestsOnly,
    /// tf32 is a CUDA tensor-core mode.
    #[error("tf32 is a CUDA tensor-core mode and this trial's device is the CPU; valid on a CPU: fp32, bf16, auto")]
    NotOnCpu,
    /// float16's loss scale needs every stage to take or skip an update together, and this
    /// strategy updates each stage on its own after each of its micro-batches (PipeDream):
    /// agreeing would take a collective per micro-batch that stalls the pipeline it exists
    /// to keep full.
    #[error(
        "{precision} needs a dynamic loss scale that every stage agrees on at each update, and {strategy} updates \
         each stage on its own after each micro-batch; valid for {strategy}: fp32, bf16, auto"
    )]
    UnsharedLossScale {
        /// The precision asked for.
        precision: Precision,
        /// The strategy that updates per micro-batch.
        strategy: StrategyKind,
    },
}

impl Precision {
    /// Whether this precision trains with a dynamic loss scale (AMP's float16).
    pub fn needs_loss_scale(self) -> bool {
        self == Precision::Float16
    }

    /// Why this precision cannot train a benchmark cell on a device that is (`on_cpu`) or
    /// may be a CUDA device, if it cannot.
    pub fn check_device(self, on_cpu: bool) -> Result<(), PrecisionRefused> {
        match self {
            Precision::Float64 => Err(PrecisionRefused::TestsOnly),
            Precision::Tfloat32 if on_cpu => Err(PrecisionRefused::NotOnCpu),
            _ => Ok(()),
        }
    }

    /// Why `strategy` cannot train in this precision, if it cannot.
    pub fn check_strategy(self, strategy: StrategyKind) -> Result<(), PrecisionRefused> {
        let per_micro_batch = Schedule::of(strategy).is_some_and(Schedule::updates_per_micro_batch);
        if per_micro_batch && self.needs_loss_scale() {
            return Err(PrecisionRefused::UnsharedLossScale { precision: self, strategy });
        }
        Ok(())
    }

    /// The name suites, tables and labels use (`fp32`, `bf16`, …).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Whether this is float32 with nothing lowered: what every cell trained in before the
    /// axis existed, so it adds nothing to a trial's id.
    pub fn is_float32(self) -> bool {
        self == Precision::Float32
    }
}

stratlab_columns::text_column!(Precision, MemoryFormat, MatmulPrecision);

impl FromStr for Precision {
    type Err = UnknownName;

    fn from_str(name: &str) -> Result<Self, UnknownName> {
        UnknownName::parse("precision", name)
    }
}

/// `torch.set_float32_matmul_precision`: how float32 matrix products may be computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[derive(strum::IntoStaticStr, strum::Display, strum::VariantArray)]
#[strum(serialize_all = "lowercase")]
pub enum MatmulPrecision {
    /// Full float32 (PyTorch's default): no TF32 in cuBLAS.
    Highest,
    /// TF32 (or bf16×3) allowed in cuBLAS: faster on Ampere and later, ~1e-3 relative error.
    High,
    /// bf16 allowed.
    Medium,
}

impl MatmulPrecision {
    /// The name libtorch and PyTorch use.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// How a cell lays out its four-dimensional tensors (images, activations, convolution
/// weights).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::Display, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum MemoryFormat {
    /// NCHW, libtorch's default.
    #[default]
    Contiguous,
    /// NHWC (`torch.channels_last`): what cuDNN's tensor-core convolutions and oneDNN's
    /// blocked kernels read without reordering.
    ChannelsLast,
}

impl MemoryFormat {
    /// The name suites, tables and labels use.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

impl FromStr for MemoryFormat {
    type Err = UnknownName;

    fn from_str(name: &str) -> Result<Self, UnknownName> {
        UnknownName::parse("memory format", name)
    }
}

/// How a cell's precision and memory format join its label: nothing for float32 on
/// contiguous tensors (what every cell computed in before the axes), else ` · bf16`,
/// ` · channels_last`, or both.
pub fn compute_label(precision: Precision, memory_format: MemoryFormat) -> String {
    compute_label_chosen(precision, false, memory_format, false)
}

/// [`compute_label`] for a cell whose precision or format `auto` may have chosen: a value
/// `auto` chose is named even where it is the default, and marked ` (auto)`.
pub fn compute_label_chosen(
    precision: Precision,
    precision_auto: bool,
    memory_format: MemoryFormat,
    memory_format_auto: bool,
) -> String {
    let auto = |is_auto: bool| if is_auto { " (auto)" } else { "" };
    let mut label = String::new();
    if !precision.is_float32() || precision_auto {
        label += &format!(" · {precision}{}", auto(precision_auto));
    }
    if memory_format != MemoryFormat::Contiguous || memory_format_auto {
        label += &format!(" · {memory_format}{}", auto(memory_format_auto));
    }
    label
}

/// A suite's value for an axis: given, or `auto`, resolved by the runner on the device
/// before the cell trains (and recorded resolved).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AutoOr<T> {
    /// Whatever is fastest and safe on the device, found there.
    Auto,
    /// This value.
    Given(T),
}

impl<T> AutoOr<T> {
    /// The given value, `None` for `auto`.
    pub fn given(self) -> Option<T> {
        match self {
            AutoOr::Auto => None,
            AutoOr::Given(value) => Some(value),
        }
    }
}

/// `auto`, or the value's own name (`bf16`): how a command line gives an axis value.
impl<T: FromStr> FromStr for AutoOr<T> {
    type Err = T::Err;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "auto" => Ok(AutoOr::Auto),
            text => text.parse().map(AutoOr::Given),
        }
    }
}

impl<T: fmt::Display> fmt::Display for AutoOr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AutoOr::Auto => f.write_str("auto"),
            AutoOr::Given(value) => value.fmt(f),
        }
    }
}

impl<T: Serialize> Serialize for AutoOr<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            AutoOr::Auto => serializer.serialize_str("auto"),
            AutoOr::Given(value) => value.serialize(serializer),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for AutoOr<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        if name == "auto" {
            return Ok(AutoOr::Auto);
        }
        // The value's own error lists its valid names; `auto` is valid beside them.
        let value: Result<T, de::value::Error> = T::deserialize(name.as_str().into_deserializer());
        value.map(AutoOr::Given).map_err(|error| de::Error::custom(format!("{error}, or `auto`")))
    }
}

#[cfg(test)]
mod tests {
    use strum::VariantArray;

    use super::*;

    #[test]
    fn each_precision_rule_refuses_what_it_names_and_lists_the_valid_choices() {
        assert_eq!(Precision::Float64.check_device(false), Err(PrecisionRefused::TestsOnly));
        assert_eq!(Precision::Tfloat32.check_device(true), Err(PrecisionRefused::NotOnCpu));
        assert_eq!(Precision::Tfloat32.check_device(false), Ok(()), "a CUDA device, or auto");
        for precision in [Precision::Float32, Precision::Bfloat16, Precision::Float16] {
            assert_eq!(precision.check_device(true), Ok(()));
        }
        let refused = Precision::Float16.check_strategy(StrategyKind::PipeDream).unwrap_err();
        assert_eq!(
            refused,
            PrecisionRefused::UnsharedLossScale { precision: Precision::Float16, strategy: StrategyKind::PipeDream }
        );
        assert!(refused.to_string().ends_with("valid for pipedream: fp32, bf16, auto"), "{refused}");
        for kind in StrategyKind::VARIANTS.iter().copied().filter(|&kind| kind != StrategyKind::PipeDream) {
            assert_eq!(Precision::Float16.check_strategy(kind), Ok(()), "{kind}");
        }
        assert_eq!(Precision::Bfloat16.check_strategy(StrategyKind::PipeDream), Ok(()));
    }

    #[test]
    fn names_are_the_suite_s_and_serde_strum_agree() {
        let names: Vec<&str> = Precision::VARIANTS.iter().map(|p| p.name()).collect();
        assert_eq!(names, ["fp32", "tf32", "bf16", "fp16", "fp64"]);
        for &precision in Precision::VARIANTS {
            assert_eq!(serde_json::to_string(&precision).unwrap(), format!("\"{precision}\""));
            assert_eq!(precision.name().parse::<Precision>().unwrap(), precision);
        }
        // Trial specs written before the axis spelled the types out.
        assert_eq!(serde_json::from_str::<Precision>("\"bfloat16\"").unwrap(), Precision::Bfloat16);
        assert_eq!(serde_json::from_str::<Precision>("\"float64\"").unwrap(), Precision::Float64);
        assert_eq!(MemoryFormat::ChannelsLast.name(), "channels_last");
        assert_eq!("channels_last".parse::<MemoryFormat>().unwrap(), MemoryFormat::ChannelsLast);
    }

    #[test]
    fn auto_or_a_value_and_a_mistake_names_the_valid_choices() {
        let parse = |yaml: &str| serde_saphyr::from_str::<Vec<AutoOr<Precision>>>(yaml);
        assert_eq!(parse("[auto, bf16]").unwrap(), [AutoOr::Auto, AutoOr::Given(Precision::Bfloat16)]);
        let error = parse("[bf17]").unwrap_err().to_string();
        assert!(error.contains("bf17") && error.contains("fp32") && error.contains("`auto`"), "{error}");
        let error = serde_saphyr::from_str::<AutoOr<MemoryFormat>>("nhwc").unwrap_err().to_string();
        assert!(error.contains("channels_last"), "{error}");
        assert_eq!(serde_json::to_string(&AutoOr::Given(MemoryFormat::ChannelsLast)).unwrap(), "\"channels_last\"");
        assert_eq!(AutoOr::<Precision>::Auto.to_string(), "auto");
        assert_eq!(
            "bf17".parse::<Precision>().unwrap_err().to_string(),
            "unknown precision `bf17`; valid: fp32, tf32, bf16, fp16, fp64"
        );
        assert_eq!(compute_label(Precision::Float32, MemoryFormat::Contiguous), "");
        assert_eq!(compute_label(Precision::Bfloat16, MemoryFormat::ChannelsLast), " · bf16 · channels_last");
        let chosen = compute_label_chosen(Precision::Float32, true, MemoryFormat::ChannelsLast, false);
        assert_eq!(chosen, " · fp32 (auto) · channels_last");
    }
}
