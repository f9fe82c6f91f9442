//! MobileNetV2 (Sandler et al. 2018): torchvision's network for ImageNet-sized inputs,
//! and for MNIST and CIFAR the thesis's variant (tables A.4/A.7) with the first conv and
//! the second bottleneck group at stride 1, so 32×32 images end at 4×4, not 1×1.

use crate::input_shape::InputShape;
use crate::layout::Layout;
use crate::op::{Conv2d, Linear, Op};
use crate::stage_spec::StageSpec;

/// Bottleneck groups: expansion t, output channels c, repeats n, first stride s.
const GROUPS: [(i64, i64, usize, i64); 7] =
    [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)];

/// Channels of the stem and of the last 1×1 convolution.
const STEM_CHANNELS: i64 = 32;
const HEAD_CHANNELS: i64 = 1280;

/// Stages: `features.0` (stem), `features.1` … `features.17` (inverted residuals),
/// `features.18` (1×1 head), `avgpool`, `classifier`.
pub(crate) fn stages(input: &InputShape, layout: Layout) -> Vec<StageSpec> {
    let small = layout == Layout::SmallImage;
    // Thesis tables A.4/A.7: small images keep stride 1 in the stem and in the second
    // bottleneck group (t=6, c=24), losing 4× less resolution than on ImageNet.
    let stem_stride = if small { 1 } else { 2 };
    let stem = conv_bn_relu6("features.0", input.channels, STEM_CHANNELS, 3, stem_stride, 1);
    let mut stages = vec![StageSpec::sequential("features.0", stem)];
    let mut in_channels = STEM_CHANNELS;
    for (group, &(expansion, out_channels, repeats, stride)) in GROUPS.iter().enumerate() {
        let stride = if small && group == 1 { 1 } else { stride };
        for repeat in 0..repeats {
            let path = format!("features.{}", stages.len());
            let stride = if repeat == 0 { stride } else { 1 };
            stages.push(inverted_residual(&path, in_channels, out_channels, stride, expansion));
            in_channels = out_channels;
        }
    }
    let path = format!("features.{}", stages.len());
    let head = conv_bn_relu6(&path, in_channels, HEAD_CHANNELS, 1, 1, 1);
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
