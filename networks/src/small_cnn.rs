//! The small CNN for quick runs (the TensorFlow MNIST study's Keras model, PyTorch's `examples/mnist`
//! without dropout): two valid 3×3 convolutions, one max-pool, two fc layers.

use crate::input_shape::InputShape;
use crate::op::{Conv2d, Linear, Op};
use crate::stage_spec::StageSpec;

/// Largest image side it accepts: with no downsampling before `fc1`, larger inputs give
/// an fc layer of hundreds of millions of weights.
pub(crate) const MAX_SIDE: i64 = 64;

/// Stages: `conv1`, `conv2`, `pool` (max-pool and flatten), `fc1`, `fc2`.
pub(crate) fn stages(input: &InputShape) -> Vec<StageSpec> {
    let conv = |path: &str, in_channels, out_channels| {
        vec![
            Op::Conv2d(Conv2d { padding: 0, bias: true, ..Conv2d::new(path, in_channels, out_channels, 3, 1) }),
            Op::ReLU,
        ]
    };
    // Two valid 3×3 convolutions take 4 pixels off each side length, the pool halves it.
    let features = 64 * ((input.height - 4) / 2) * ((input.width - 4) / 2);
    vec![
        StageSpec::sequential("conv1", conv("conv1", input.channels, 32)),
        StageSpec::sequential("conv2", conv("conv2", 32, 64)),
        StageSpec::sequential("pool", vec![Op::MaxPool2d { kernel: 2, stride: 2, padding: 0 }, Op::Flatten]),
        StageSpec::sequential("fc1", vec![Op::Linear(Linear::new("fc1", features, 128)), Op::ReLU]),
        StageSpec::sequential("fc2", vec![Op::Linear(Linear::new("fc2", 128, input.classes))]),
    ]
}
