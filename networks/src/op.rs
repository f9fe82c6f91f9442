//! The leaves of the network IR: single layers, each knowing its own output shape,
//! parameter count and FLOPs.
//!
//! Every question about a network (how big, how costly, what shape between two stages)
//! is answered by walking these ops, and the tch modules are built from the very same
//! ops (see `layer.rs`), so the analysis cannot drift from what actually runs.

/// A 2-D convolution with square kernel, stride and padding, as `torch.nn.Conv2d`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Conv2d {
    /// PyTorch parameter path, e.g. `layer1.0.conv1`; the weight is `<path>.weight`.
    pub path: String,
    /// Input channels.
    pub in_channels: i64,
    /// Output channels.
    pub out_channels: i64,
    /// Kernel side length.
    pub kernel: i64,
    /// Stride along both axes.
    pub stride: i64,
    /// Zero padding on each side.
    pub padding: i64,
    /// Channel groups; `in_channels` for a depthwise convolution.
    pub groups: i64,
    /// Whether the convolution has a bias (no when a batch norm follows).
    pub bias: bool,
}

impl Conv2d {
    /// The common case in these networks: "same" padding for odd kernels, one group and
    /// no bias because a batch norm follows. Adjust the fields for anything else.
    pub fn new(path: impl Into<String>, in_channels: i64, out_channels: i64, kernel: i64, stride: i64) -> Self {
        Conv2d {
            path: path.into(),
            in_channels,
            out_channels,
            kernel,
            stride,
            padding: (kernel - 1) / 2,
            groups: 1,
            bias: false,
        }
    }
}

/// A fully connected layer, as `torch.nn.Linear`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Linear {
    /// PyTorch parameter path, e.g. `fc` or `classifier.6`.
    pub path: String,
    /// Input features.
    pub in_features: i64,
    /// Output features.
    pub out_features: i64,
    /// Whether the layer has a bias.
    pub bias: bool,
}

impl Linear {
    /// A linear layer with bias, as every classifier layer here has.
    pub fn new(path: impl Into<String>, in_features: i64, out_features: i64) -> Self {
        Linear { path: path.into(), in_features, out_features, bias: true }
    }
}

/// One layer of a network. Parametrised layers carry their PyTorch path so that
/// VarStore names equal torchvision's `state_dict` keys.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum Op {
    /// A convolution.
    Conv2d(Conv2d),
    /// Batch normalisation over channels, with affine weight and bias.
    BatchNorm2d {
        /// PyTorch parameter path, e.g. `layer1.0.bn1`.
        path: String,
        /// Normalised channels.
        channels: i64,
    },
    /// `max(x, 0)`.
    ReLU,
    /// `min(max(x, 0), 6)`, torchvision MobileNetV2's activation (pytorch-cifar's uses ReLU).
    ReLU6,
    /// Max pooling with a square window, no dilation, floor rounding.
    MaxPool2d {
        /// Window side length.
        kernel: i64,
        /// Stride along both axes.
        stride: i64,
        /// Implicit padding on each side.
        padding: i64,
    },
    /// Average pooling to a fixed output size, whatever the input size.
    AdaptiveAvgPool2d {
        /// Output height.
        height: i64,
        /// Output width.
        width: i64,
    },
    /// Flattens channels × height × width into one feature axis.
    Flatten,
    /// Zeroes elements with probability `p` in training, identity in evaluation.
    Dropout {
        /// Drop probability.
        p: f64,
    },
    /// A fully connected layer.
    Linear(Linear),
}

/// Forward FLOPs of one op for one sample (see [`crate::FLOP_CONVENTION`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Flops {
    /// Everything the op computes.
    pub total: u64,
    /// The part spent in convolutions and linear layers, the usual "MACs × 2" figure.
    pub conv_linear: u64,
}

/// What one op of a stage does to memory and arithmetic, for one sample (or, in a
/// [`crate::StageAnalysis`], for its batch): the terms of a roofline, which a device's
/// datasheet turns into seconds where the network cannot be timed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct OpWork {
    /// Forward FLOPs, per [`crate::FLOP_CONVENTION`].
    pub flops: u64,
    /// Elements the forward reads and writes besides the weights: every input and the output.
    pub elements_moved: u64,
    /// Trainable parameters the forward reads (not scaled by the batch).
    pub parameters: u64,
}

impl OpWork {
    /// The same op over `batch` samples: FLOPs and activations scale, weights do not.
    pub fn for_batch(self, batch: u64) -> OpWork {
        OpWork { flops: self.flops * batch, elements_moved: self.elements_moved * batch, parameters: self.parameters }
    }
}

impl std::ops::AddAssign for Flops {
    fn add_assign(&mut self, other: Flops) {
        self.total += other.total;
        self.conv_linear += other.conv_linear;
    }
}

impl Op {
    /// The path of the op's parameters, or `None` for a parameter-free op.
    pub fn param_path(&self) -> Option<&str> {
        match self {
            Op::Conv2d(c) => Some(&c.path),
            Op::Linear(l) => Some(&l.path),
            Op::BatchNorm2d { path, .. } => Some(path),
            _ => None,
        }
    }

    /// Trainable parameters (weights and biases; batch-norm running statistics are
    /// buffers and, as in PyTorch's count, not included).
    pub fn parameter_count(&self) -> u64 {
        let count = match self {
            Op::Conv2d(c) => {
                c.out_channels * (c.in_channels / c.groups) * c.kernel * c.kernel
                    + if c.bias { c.out_channels } else { 0 }
            }
            Op::BatchNorm2d { channels, .. } => 2 * channels,
            Op::Linear(l) => l.in_features * l.out_features + if l.bias { l.out_features } else { 0 },
            _ => 0,
        };
        count as u64
    }

    /// The shape of one output sample given one input sample (both without the batch
    /// axis), or why the input does not fit this op.
    pub fn output_dims(&self, input: &[i64]) -> Result<Vec<i64>, ShapeError> {
        let output = match self {
            Op::Conv2d(c) => {
                let [channels, height, width] = image_dims(input, "conv2d")?;
                if channels != c.in_channels {
                    return Err(ShapeError(format!("{} expects {} channels, got {channels}", c.path, c.in_channels)));
                }
                // Floor division: a window larger than the padded input gives 0, not 1.
                let side = |x: i64| (x + 2 * c.padding - c.kernel).div_euclid(c.stride) + 1;
                vec![c.out_channels, side(height), side(width)]
            }
            Op::BatchNorm2d { path, channels: expected } => {
                let [channels, ..] = image_dims(input, "batch norm")?;
                if channels != *expected {
                    return Err(ShapeError(format!("{path} expects {expected} channels, got {channels}")));
                }
                input.to_vec()
            }
            Op::ReLU | Op::ReLU6 | Op::Dropout { .. } => input.to_vec(),
            Op::MaxPool2d { kernel, stride, padding } => {
                let [channels, height, width] = image_dims(input, "max-pool")?;
                let side = |x: i64| (x + 2 * padding - kernel).div_euclid(*stride) + 1;
                vec![channels, side(height), side(width)]
            }
            Op::AdaptiveAvgPool2d { height, width } => {
                let [channels, ..] = image_dims(input, "adaptive avg-pool")?;
                vec![channels, *height, *width]
            }
            Op::Flatten => vec![input.iter().product()],
            Op::Linear(l) => match input {
                [features] if *features == l.in_features => vec![l.out_features],
                _ => return Err(ShapeError(format!("{} expects [{}] features, got {input:?}", l.path, l.in_features))),
            },
        };
        // A side of zero is how a too-small image shows up: report it at the op that
        // causes it rather than as a libtorch error deep inside a forward pass.
        if output.iter().any(|&d| d < 1) {
            return Err(ShapeError(format!("{self:?} turns {input:?} into {output:?}")));
        }
        Ok(output)
    }

    /// Forward FLOPs for one sample, given the op's input and output shapes.
    pub(crate) fn flops(&self, input: &[i64], output: &[i64]) -> Flops {
        let elements = |dims: &[i64]| dims.iter().product::<i64>() as u64;
        let out = elements(output);
        match self {
            Op::Conv2d(c) => {
                let positions = out / c.out_channels as u64;
                let macs = (c.in_channels / c.groups * c.kernel * c.kernel) as u64 * out;
                let bias = if c.bias { c.out_channels as u64 * positions } else { 0 };
                let total = 2 * macs + bias;
                Flops { total, conv_linear: total }
            }
            Op::Linear(l) => {
                let bias = if l.bias { l.out_features as u64 } else { 0 };
                let total = 2 * (l.in_features * l.out_features) as u64 + bias;
                Flops { total, conv_linear: total }
            }
            Op::BatchNorm2d { .. } => Flops { total: 2 * out, conv_linear: 0 },
            Op::ReLU | Op::ReLU6 => Flops { total: out, conv_linear: 0 },
            Op::MaxPool2d { kernel, .. } => Flops { total: (kernel * kernel) as u64 * out, conv_linear: 0 },
            Op::AdaptiveAvgPool2d { .. } => Flops { total: elements(input), conv_linear: 0 },
            Op::Flatten | Op::Dropout { .. } => Flops::default(),
        }
    }
}

/// Why a sample of some shape does not fit an op or a block (wrong channels, features or rank).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShapeError(pub String);

/// Splits an image-shaped sample into channels, height and width.
fn image_dims(input: &[i64], op: &str) -> Result<[i64; 3], ShapeError> {
    <[i64; 3]>::try_from(input)
        .map_err(|_| ShapeError(format!("{op} needs a channels×height×width input, got {input:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conv_counts_weights_bias_and_flops_per_output_element() {
        let conv = Op::Conv2d(Conv2d { bias: true, ..Conv2d::new("c", 3, 8, 3, 2) });
        assert_eq!(conv.parameter_count(), 8 * 3 * 9 + 8);
        let out = conv.output_dims(&[3, 32, 32]).unwrap();
        assert_eq!(out, vec![8, 16, 16]);
        let flops = conv.flops(&[3, 32, 32], &out);
        assert_eq!(flops.total, 2 * 27 * 8 * 256 + 8 * 256);
        assert_eq!(flops.conv_linear, flops.total);
    }

    #[test]
    fn depthwise_conv_divides_input_channels_by_groups() {
        let conv = Op::Conv2d(Conv2d { groups: 96, ..Conv2d::new("dw", 96, 96, 3, 1) });
        assert_eq!(conv.parameter_count(), 96 * 9);
        assert_eq!(conv.flops(&[96, 7, 7], &[96, 7, 7]).total, 2 * 9 * 96 * 49);
    }

    #[test]
    fn element_wise_ops_follow_the_stated_convention() {
        let dims = [4, 5, 5];
        let bn = Op::BatchNorm2d { path: "bn".into(), channels: 4 };
        assert_eq!(bn.flops(&dims, &dims), Flops { total: 200, conv_linear: 0 });
        assert_eq!(Op::ReLU6.flops(&dims, &dims).total, 100);
        let pool = Op::MaxPool2d { kernel: 3, stride: 2, padding: 1 };
        let out = pool.output_dims(&dims).unwrap();
        assert_eq!(out, vec![4, 3, 3]);
        assert_eq!(pool.flops(&dims, &out).total, 9 * 36);
        let avg = Op::AdaptiveAvgPool2d { height: 1, width: 1 };
        assert_eq!(avg.flops(&dims, &[4, 1, 1]).total, 100);
    }

    #[test]
    fn mismatched_channels_and_vanishing_sides_are_reported() {
        let conv = Op::Conv2d(Conv2d::new("layer1.0.conv1", 64, 64, 3, 1));
        assert!(conv.output_dims(&[32, 8, 8]).unwrap_err().0.contains("layer1.0.conv1"));
        let pool = Op::MaxPool2d { kernel: 2, stride: 2, padding: 0 };
        assert!(pool.output_dims(&[512, 1, 1]).is_err());
        let fc = Op::Linear(Linear::new("fc", 512, 10));
        assert!(fc.output_dims(&[256]).is_err());
    }
}
