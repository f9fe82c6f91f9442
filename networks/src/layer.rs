//! The tch side of an [`Op`]: the one place where IR ops become libtorch calls.

use tch::nn::{self, ModuleT};
use tch::Tensor;

use crate::op::Op;

/// A built op. Parameter-free ops keep their IR description and are applied directly.
#[derive(Debug)]
pub(crate) enum Layer {
    Conv2d(nn::Conv2D),
    BatchNorm2d(nn::BatchNorm),
    Linear(nn::Linear),
    Stateless(Op),
}

impl Layer {
    /// Creates the op's variables under `root / <op path>`, named as PyTorch names them.
    pub fn new(op: &Op, root: &nn::Path) -> Layer {
        match op {
            Op::Conv2d(c) => {
                let config = nn::ConvConfig {
                    stride: c.stride,
                    padding: c.padding,
                    groups: c.groups,
                    bias: c.bias,
                    ..Default::default()
                };
                Layer::Conv2d(nn::conv2d(sub_path(root, &c.path), c.in_channels, c.out_channels, c.kernel, config))
            }
            Op::BatchNorm2d { path, channels } => {
                // PyTorch starts batch-norm scales at 1; tch's default draws them from U(0, 1).
                let config = nn::BatchNormConfig { ws_init: nn::Init::Const(1.0), ..Default::default() };
                Layer::BatchNorm2d(nn::batch_norm2d(sub_path(root, path), *channels, config))
            }
            Op::Linear(l) => {
                let config = nn::LinearConfig { bias: l.bias, ..Default::default() };
                Layer::Linear(nn::linear(sub_path(root, &l.path), l.in_features, l.out_features, config))
            }
            stateless => Layer::Stateless(stateless.clone()),
        }
    }
}

impl ModuleT for Layer {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        match self {
            Layer::Conv2d(conv) => conv.forward_t(xs, train),
            Layer::BatchNorm2d(bn) => bn.forward_t(xs, train),
            Layer::Linear(linear) => linear.forward_t(xs, train),
            Layer::Stateless(op) => match op {
                Op::ReLU => xs.relu(),
                Op::ReLU6 => xs.relu6(),
                Op::MaxPool2d { kernel, stride, padding } => {
                    xs.max_pool2d([*kernel, *kernel], [*stride, *stride], [*padding, *padding], [1, 1], false)
                }
                Op::AdaptiveAvgPool2d { height, width } => xs.adaptive_avg_pool2d([*height, *width]),
                Op::Flatten => xs.flatten(1, -1),
                Op::Dropout { p } => xs.dropout(*p, train),
                Op::Conv2d(_) | Op::BatchNorm2d { .. } | Op::Linear(_) => {
                    unreachable!("Layer::new builds parametrised ops as modules")
                }
            },
        }
    }
}

/// `root / "layer1" / "0" / "conv1"` for the dotted path `layer1.0.conv1`: tch forbids
/// dots inside one path component but joins components with dots, giving PyTorch's names.
fn sub_path<'a>(root: &nn::Path<'a>, dotted: &str) -> nn::Path<'a> {
    dotted.split('.').fold(root.clone(), |path, part| path / part)
}
