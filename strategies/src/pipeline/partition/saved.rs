//! What autograd keeps alive for a stage between its forward and its backward, read off
//! the stage's ops: the `size` balance's activation estimate.

use stratlab_networks::{Block, Op, ShapeError};

/// Bytes of one f32 element.
const F32_BYTES: u64 = std::mem::size_of::<f32>() as u64;
/// Bytes of one max-pool index (libtorch keeps them as int64).
const INDEX_BYTES: u64 = std::mem::size_of::<i64>() as u64;

/// The memory one sample's forward through a stage leaves allocated until its backward:
/// the `size` balance's activation estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActivationBytes {
    /// The stage's output, or 0 when it is a view of the stage's input (a lone flatten).
    pub output: u64,
    /// Tensors autograd saves inside the stage, beyond its input and output.
    pub saved: u64,
}

impl ActivationBytes {
    /// Output and saved tensors together.
    pub fn total(&self) -> u64 {
        self.output + self.saved
    }
}

/// What autograd keeps alive for one sample of a stage, from its ops and `input` (a
/// sample's shape without the batch axis); the stage's input belongs to the stage before.
///
/// Each tensor is counted once, however many ops save it, as libtorch's saved variables
/// share storage. What each op saves in training mode, as PyTorch's derivatives define it:
///
/// - convolution, linear and batch norm: their input (batch norm's per-channel mean and
///   inverse deviation are negligible and left out);
/// - ReLU: its output; ReLU6 (hardtanh): its input;
/// - max-pool: its input, and int64 indices of its output's size;
/// - adaptive average pool: its input, except to 1×1, which libtorch runs as a mean that
///   saves nothing;
/// - dropout: its f32 mask of the output's size (libtorch's CPU path; CUDA's fused kernel
///   keeps a 1-byte mask, so this over-counts there);
/// - flatten is a view and the residual addition saves nothing.
///
/// So a conv → batch norm → ReLU chain keeps the convolution's output (batch norm's input)
/// and the ReLU's output, not the batch-norm output between them. On the CPU this comes
/// within 1–2% of the bytes a training-mode forward of resnet18, vgg11 or mobilenet_v2
/// (CIFAR-10, batch 32) leaves allocated (see the `size` test in `tests.rs`). Fails if
/// the ops do not fit `input`.
pub fn activation_bytes_per_sample(block: &Block, input: &[i64]) -> Result<ActivationBytes, ShapeError> {
    let mut walk = Walk { values: vec![Value { elements: elements(input), kept: false }], extra_bytes: 0 };
    let (output, _) = match block {
        Block::Sequential(ops) => walk.ops(ops, 0, input)?,
        Block::Residual { main, shortcut, post } => {
            let (_, dims) = walk.ops(main, 0, input)?;
            walk.ops(shortcut, 0, input)?;
            let sum = walk.push(&dims, false);
            walk.ops(post, sum, &dims)?
        }
    };
    let bytes = |value: &Value| value.elements * F32_BYTES;
    let saved: u64 = walk
        .values
        .iter()
        .enumerate()
        .filter(|&(index, value)| value.kept && index != 0 && index != output)
        .map(|(_, value)| bytes(value))
        .sum();
    let output = if output == 0 { 0 } else { bytes(&walk.values[output]) };
    Ok(ActivationBytes { output, saved: saved + walk.extra_bytes })
}

/// One tensor the stage computes: its size per sample and whether backward needs it.
struct Value {
    elements: u64,
    kept: bool,
}

/// The tensors of one stage's forward pass, in the order they are made.
struct Walk {
    values: Vec<Value>,
    /// Saved tensors that are not activations: max-pool indices and dropout masks.
    extra_bytes: u64,
}

impl Walk {
    fn push(&mut self, dims: &[i64], kept: bool) -> usize {
        self.values.push(Value { elements: elements(dims), kept });
        self.values.len() - 1
    }

    /// Runs `ops` from value `start` of shape `dims`; returns the last value and its shape.
    fn ops(&mut self, ops: &[Op], start: usize, dims: &[i64]) -> Result<(usize, Vec<i64>), ShapeError> {
        let (mut current, mut dims) = (start, dims.to_vec());
        for op in ops {
            let output = op.output_dims(&dims)?;
            let (saves_input, saves_output) = match op {
                Op::Conv2d(_) | Op::Linear(_) | Op::BatchNorm2d { .. } | Op::ReLU6 => (true, false),
                Op::ReLU => (false, true),
                Op::MaxPool2d { .. } => {
                    self.extra_bytes += elements(&output) * INDEX_BYTES;
                    (true, false)
                }
                Op::AdaptiveAvgPool2d { height, width } => (*height != 1 || *width != 1, false),
                Op::Dropout { p } => {
                    if *p > 0.0 {
                        self.extra_bytes += elements(&output) * F32_BYTES;
                    }
                    (false, false)
                }
                Op::Flatten => {
                    // A view: the same storage under a new shape.
                    dims = output;
                    continue;
                }
            };
            self.values[current].kept |= saves_input;
            current = self.push(&output, saves_output);
            dims = output;
        }
        Ok((current, dims))
    }
}

fn elements(dims: &[i64]) -> u64 {
    dims.iter().product::<i64>() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratlab_networks::{spec, Conv2d, InputShape, Linear};

    fn block_of(network: &str, input: &InputShape, stage: &str) -> (Block, Vec<i64>) {
        let spec = spec(network, input).unwrap();
        let analysis = spec.analyze(1).unwrap();
        let index = spec.stages.iter().position(|s| s.name == stage).unwrap();
        let dims = if index == 0 { input.sample_dims() } else { analysis.stages[index - 1].output_shape[1..].to_vec() };
        (spec.stages[index].block.clone(), dims)
    }

    fn bytes(output: u64, saved: u64) -> ActivationBytes {
        ActivationBytes { output, saved }
    }

    #[test]
    fn conv_bn_relu_keeps_the_conv_output_but_not_the_bn_output() {
        let ops = vec![
            Op::Conv2d(Conv2d::new("conv", 3, 8, 3, 1)),
            Op::BatchNorm2d { path: "bn".into(), channels: 8 },
            Op::ReLU,
        ];
        // Conv output 8×4×4 kept for batch norm; the ReLU's output is the stage output.
        let activation = activation_bytes_per_sample(&Block::Sequential(ops), &[3, 4, 4]).unwrap();
        assert_eq!(activation, bytes(8 * 16 * 4, 8 * 16 * 4));
    }

    #[test]
    fn relu_output_feeding_a_linear_layer_is_counted_once() {
        let ops = vec![Op::Linear(Linear::new("fc1", 10, 20)), Op::ReLU, Op::Linear(Linear::new("fc2", 20, 5))];
        // fc1's output is not kept (ReLU saves its result); the ReLU's output is kept by
        // ReLU and fc2 alike: 20 floats.
        assert_eq!(activation_bytes_per_sample(&Block::Sequential(ops), &[10]).unwrap(), bytes(5 * 4, 20 * 4));
    }

    #[test]
    fn small_cnn_pool_keeps_int64_indices_and_conv_stages_keep_only_their_output() {
        let (pool, dims) = block_of("small-cnn", &InputShape::MNIST, "pool");
        assert_eq!(dims, vec![64, 24, 24]);
        let pooled = 64 * 12 * 12;
        assert_eq!(activation_bytes_per_sample(&pool, &dims).unwrap(), bytes(pooled * 4, pooled * 8));
        let (conv1, dims) = block_of("small-cnn", &InputShape::MNIST, "conv1");
        assert_eq!(activation_bytes_per_sample(&conv1, &dims).unwrap(), bytes(32 * 26 * 26 * 4, 0));
    }

    #[test]
    fn resnet_blocks_keep_each_batch_norm_input_and_the_inner_relu_output() {
        // layer1.0 on CIFAR-10: 64×32×32 throughout, identity shortcut. Kept: conv1's
        // output, the inner ReLU's output, conv2's output = 3 maps.
        let map = 64 * 32 * 32 * 4;
        let (block, dims) = block_of("resnet18", &InputShape::CIFAR10, "layer1.0");
        assert_eq!(activation_bytes_per_sample(&block, &dims).unwrap(), bytes(map, 3 * map));
        // layer2.0 halves the side and has a downsample: its conv's output is kept too.
        let map = 128 * 16 * 16 * 4;
        let (block, dims) = block_of("resnet18", &InputShape::CIFAR10, "layer2.0");
        assert_eq!(activation_bytes_per_sample(&block, &dims).unwrap(), bytes(map, 4 * map));
        // avgpool to 1×1 is a mean (saves nothing) and flatten a view of the pooled map.
        let (block, dims) = block_of("resnet18", &InputShape::CIFAR10, "avgpool");
        assert_eq!(activation_bytes_per_sample(&block, &dims).unwrap(), bytes(512 * 4, 0));
    }

    #[test]
    fn a_lone_flatten_is_a_view_and_costs_nothing() {
        let (block, dims) = block_of("vgg11", &InputShape::CIFAR10, "flatten");
        assert_eq!(dims, vec![512, 1, 1]);
        assert_eq!(activation_bytes_per_sample(&block, &dims).unwrap(), bytes(0, 0));
    }

    #[test]
    fn ops_that_do_not_fit_the_input_are_reported() {
        let ops = vec![Op::Linear(Linear::new("fc", 10, 2))];
        assert!(activation_bytes_per_sample(&Block::Sequential(ops), &[3]).unwrap_err().0.contains("fc"));
    }
}
