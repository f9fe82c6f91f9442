//! MobileNetV2 (Sandler et al. 2018) in the two designs the zoo offers:
//!
//! - [`Design::PytorchCifar`], `mobilenet_v2` on MNIST and CIFAR: kuangliu/pytorch-cifar's
//!   `MobileNetV2`, the network the thesis ran there (tables A.4/A.7, its reference 43).
//! - [`Design::Torchvision`]: torchvision's `mobilenet_v2`, which `mobilenet_v2` is on
//!   ImageNet-sized inputs and `mobilenet_v2_torchvision` is everywhere.
//!
//! On small images both designs keep the first conv and the second bottleneck group at
//! stride 1, so 32×32 and 28×28 images end at 4×4, not 1×1.

use crate::input_shape::InputShape;
use crate::layout::Layout;
use crate::op::{Conv2d, Linear, Op};
use crate::stage_spec::StageSpec;

/// Which MobileNetV2 implementation to follow layer for layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Design {
    /// pytorch-cifar's `MobileNetV2`; only defined for the small-image layout, since
    /// pytorch-cifar has no ImageNet network (the thesis used torchvision's there).
    PytorchCifar,
    /// torchvision's `mobilenet_v2`, with the small-image strides on small inputs.
    Torchvision,
}

/// Bottleneck groups: expansion t, output channels c, repeats n, first stride s
/// (ImageNet strides; see [`group_stride`] for small images).
const GROUPS: [(i64, i64, usize, i64); 7] =
    [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)];

/// Channels of the stem and of the last 1×1 convolution.
const STEM_CHANNELS: i64 = 32;
const HEAD_CHANNELS: i64 = 1280;

/// The network in `design`, except that pytorch-cifar's design on an ImageNet-sized input
/// is torchvision's: the thesis's ImageNet MobileNetV2 (table A.10) is torchvision's.
pub(crate) fn stages(input: &InputShape, layout: Layout, design: Design) -> Vec<StageSpec> {
    match (design, layout) {
        (Design::PytorchCifar, Layout::SmallImage) => pytorch_cifar(input),
        _ => torchvision(input, layout),
    }
}

/// Thesis tables A.4/A.7 and pytorch-cifar (for both designs): small images keep stride 1
/// in the second bottleneck group (t=6, c=24), losing 4× less resolution than on ImageNet
/// (the stem's stride is lowered alongside, by the callers).
fn group_stride(group: usize, stride: i64, layout: Layout) -> i64 {
    if layout == Layout::SmallImage && group == 1 {
        1
    } else {
        stride
    }
}

/// (input channels, output channels, stride, expansion) of every bottleneck, in order.
fn bottlenecks(layout: Layout) -> Vec<(i64, i64, i64, i64)> {
    let mut blocks = Vec::new();
    let mut in_channels = STEM_CHANNELS;
    for (group, &(expansion, out_channels, repeats, stride)) in GROUPS.iter().enumerate() {
        for repeat in 0..repeats {
            let stride = if repeat == 0 { group_stride(group, stride, layout) } else { 1 };
            blocks.push((in_channels, out_channels, stride, expansion));
            in_channels = out_channels;
        }
    }
    blocks
}

/// pytorch-cifar's `MobileNetV2`, with its parameter names. Stages: `stem` (`conv1`,
/// `bn1`), `layers.0` … `layers.16`, `head` (`conv2`, `bn2`), `avgpool`, `linear`.
///
/// It differs from torchvision's in three ways that change the parameter count (2,296,922
/// against 2,236,682 for 10 classes): ReLU instead of ReLU6, the 1×1 expansion conv even at
/// t = 1, and a 1×1 conv + batch-norm shortcut in stride-1 blocks that change the channel
/// count (torchvision has no skip there).
fn pytorch_cifar(input: &InputShape) -> Vec<StageSpec> {
    let stem = Conv2d::new("conv1", input.channels, STEM_CHANNELS, 3, 1);
    let mut stages = vec![StageSpec::sequential("stem", conv_bn_relu(stem, "bn1"))];
    for (index, (in_channels, out_channels, stride, expansion)) in
        bottlenecks(Layout::SmallImage).into_iter().enumerate()
    {
        stages.push(pytorch_cifar_block(&format!("layers.{index}"), in_channels, out_channels, stride, expansion));
    }
    let head = Conv2d::new("conv2", GROUPS[6].1, HEAD_CHANNELS, 1, 1);
    stages.push(StageSpec::sequential("head", conv_bn_relu(head, "bn2")));
    // pytorch-cifar's `avg_pool2d(out, 4)` pools the 4×4 map both MNIST and CIFAR reach;
    // pooling to 1×1 is the same there and still gives 1280 features for other small sizes.
    stages.push(StageSpec::avgpool(1, 1));
    let fc = Op::Linear(Linear::new("linear", HEAD_CHANNELS, input.classes));
    stages.push(StageSpec::sequential("linear", vec![fc]));
    stages
}

/// `conv`, batch norm at `bn_path`, ReLU.
fn conv_bn_relu(conv: Conv2d, bn_path: &str) -> Vec<Op> {
    let channels = conv.out_channels;
    vec![Op::Conv2d(conv), Op::BatchNorm2d { path: bn_path.into(), channels }, Op::ReLU]
}

/// pytorch-cifar's `Block`: 1×1 expansion, 3×3 depthwise, linear 1×1 projection, each
/// with batch norm. A skip connection only at stride 1: identity when the channel count
/// is unchanged, otherwise `shortcut.0` (1×1 conv) + `shortcut.1` (batch norm).
fn pytorch_cifar_block(path: &str, in_channels: i64, out_channels: i64, stride: i64, expansion: i64) -> StageSpec {
    let hidden = in_channels * expansion;
    let expand = Conv2d::new(format!("{path}.conv1"), in_channels, hidden, 1, 1);
    let depthwise = Conv2d { groups: hidden, ..Conv2d::new(format!("{path}.conv2"), hidden, hidden, 3, stride) };
    let project = Conv2d::new(format!("{path}.conv3"), hidden, out_channels, 1, 1);
    let mut main = conv_bn_relu(expand, &format!("{path}.bn1"));
    main.extend(conv_bn_relu(depthwise, &format!("{path}.bn2")));
    main.extend([Op::Conv2d(project), Op::BatchNorm2d { path: format!("{path}.bn3"), channels: out_channels }]);
    if stride != 1 {
        return StageSpec::sequential(path, main);
    }
    let shortcut = if in_channels == out_channels {
        Vec::new()
    } else {
        vec![
            Op::Conv2d(Conv2d::new(format!("{path}.shortcut.0"), in_channels, out_channels, 1, 1)),
            Op::BatchNorm2d { path: format!("{path}.shortcut.1"), channels: out_channels },
        ]
    };
    StageSpec::residual(path, main, shortcut, Vec::new())
}

/// torchvision's `mobilenet_v2`, with its parameter names. Stages: `features.0` (stem),
/// `features.1` … `features.17` (inverted residuals), `features.18` (1×1 head),
/// `avgpool`, `classifier`.
fn torchvision(input: &InputShape, layout: Layout) -> Vec<StageSpec> {
    let small = layout == Layout::SmallImage;
    let stem_stride = if small { 1 } else { 2 };
    let stem = conv_bn_relu6("features.0", input.channels, STEM_CHANNELS, 3, stem_stride, 1);
    let mut stages = vec![StageSpec::sequential("features.0", stem)];
    for (in_channels, out_channels, stride, expansion) in bottlenecks(layout) {
        let path = format!("features.{}", stages.len());
        stages.push(inverted_residual(&path, in_channels, out_channels, stride, expansion));
    }
    let path = format!("features.{}", stages.len());
    let head = conv_bn_relu6(&path, GROUPS[6].1, HEAD_CHANNELS, 1, 1, 1);
    stages.push(StageSpec::sequential(path, head));
    stages.push(StageSpec::avgpool(1, 1));
    // torchvision's classifier is Sequential(Dropout(0.2), Linear); the small-image
    // variant has no dropout but keeps the name `classifier.1` so weights map across.
    let fc = Op::Linear(Linear::new("classifier.1", HEAD_CHANNELS, input.classes));
    let classifier = if small { vec![fc] } else { vec![Op::Dropout { p: 0.2 }, fc] };
    stages.push(StageSpec::sequential("classifier", classifier));
    stages
}

/// torchvision's `Conv2dNormActivation`: `<path>.0` conv, `<path>.1` batch norm, ReLU6.
fn conv_bn_relu6(path: &str, in_channels: i64, out_channels: i64, kernel: i64, stride: i64, groups: i64) -> Vec<Op> {
    let conv = Conv2d { groups, ..Conv2d::new(format!("{path}.0"), in_channels, out_channels, kernel, stride) };
    vec![Op::Conv2d(conv), Op::BatchNorm2d { path: format!("{path}.1"), channels: out_channels }, Op::ReLU6]
}

/// torchvision's `InvertedResidual`: optional 1×1 expansion, 3×3 depthwise, linear 1×1
/// projection; a skip connection when the shape is unchanged.
fn inverted_residual(path: &str, in_channels: i64, out_channels: i64, stride: i64, expansion: i64) -> StageSpec {
    let hidden = in_channels * expansion;
    let mut main = Vec::new();
    // torchvision numbers the block's modules `conv.0`, `conv.1`, …; without the
    // expansion conv every later index moves down by one.
    let mut modules = 0;
    let mut next = || {
        modules += 1;
        format!("{path}.conv.{}", modules - 1)
    };
    if expansion != 1 {
        main.extend(conv_bn_relu6(&next(), in_channels, hidden, 1, 1, 1));
    }
    main.extend(conv_bn_relu6(&next(), hidden, hidden, 3, stride, hidden));
    let projection = Conv2d::new(next(), hidden, out_channels, 1, 1);
    main.extend(vec![Op::Conv2d(projection), Op::BatchNorm2d { path: next(), channels: out_channels }]);
    if stride == 1 && in_channels == out_channels {
        StageSpec::residual(path, main, Vec::new(), Vec::new())
    } else {
        StageSpec::sequential(path, main)
    }
}
