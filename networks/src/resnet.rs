//! ResNet-18/34/50/101/152: torchvision's networks for ImageNet-sized inputs, and
//! kuangliu/pytorch-cifar's variant (3×3 stem, no max-pool) for MNIST and CIFAR.

use crate::input_shape::InputShape;
use crate::layout::Layout;
use crate::op::{Conv2d, Linear, Op};
use crate::stage_spec::StageSpec;

/// The two residual block designs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockKind {
    /// Two 3×3 convolutions (ResNet-18/34).
    Basic,
    /// 1×1 reduce, 3×3, 1×1 expand by 4 (ResNet-50/101/152), stride on the 3×3 as in
    /// torchvision ("ResNet v1.5").
    Bottleneck,
}

impl BlockKind {
    fn expansion(self) -> i64 {
        match self {
            BlockKind::Basic => 1,
            BlockKind::Bottleneck => 4,
        }
    }
}

/// Block design and blocks per stage of each depth (He et al. 2016, table 1).
pub(crate) fn config(depth: u32) -> Option<(BlockKind, [usize; 4])> {
    Some(match depth {
        18 => (BlockKind::Basic, [2, 2, 2, 2]),
        34 => (BlockKind::Basic, [3, 4, 6, 3]),
        50 => (BlockKind::Bottleneck, [3, 4, 6, 3]),
        101 => (BlockKind::Bottleneck, [3, 4, 23, 3]),
        152 => (BlockKind::Bottleneck, [3, 8, 36, 3]),
        _ => return None,
    })
}

/// Stages: `stem`, (`maxpool`), `layer1.0` … `layer4.N`, `avgpool`, `fc`.
pub(crate) fn stages(kind: BlockKind, blocks: [usize; 4], input: &InputShape, layout: Layout) -> Vec<StageSpec> {
    let bn = |path: &str, channels| Op::BatchNorm2d { path: path.into(), channels };
    let mut stages = Vec::new();
    match layout {
        Layout::ImageNet => {
            let stem = Conv2d { padding: 3, ..Conv2d::new("conv1", input.channels, 64, 7, 2) };
            stages.push(StageSpec::sequential("stem", vec![Op::Conv2d(stem), bn("bn1", 64), Op::ReLU]));
            stages.push(StageSpec::sequential("maxpool", vec![Op::MaxPool2d { kernel: 3, stride: 2, padding: 1 }]));
        }
        Layout::SmallImage => {
            let stem = Conv2d::new("conv1", input.channels, 64, 3, 1);
            stages.push(StageSpec::sequential("stem", vec![Op::Conv2d(stem), bn("bn1", 64), Op::ReLU]));
        }
    }
    let mut in_channels = 64;
    for (layer, (&count, planes)) in blocks.iter().zip([64, 128, 256, 512]).enumerate() {
        for index in 0..count {
            let stride = if layer > 0 && index == 0 { 2 } else { 1 };
            let path = format!("layer{}.{index}", layer + 1);
            stages.push(block(kind, &path, in_channels, planes, stride));
            in_channels = planes * kind.expansion();
        }
    }
    stages.push(StageSpec::avgpool(1, 1));
    stages.push(StageSpec::sequential("fc", vec![Op::Linear(Linear::new("fc", in_channels, input.classes))]));
    stages
}

/// One residual block as torchvision names it: `conv1`, `bn1`, …, `downsample.0/1`.
fn block(kind: BlockKind, path: &str, in_channels: i64, planes: i64, stride: i64) -> StageSpec {
    let out_channels = planes * kind.expansion();
    // (kernel, output channels, stride) of each convolution on the main path.
    let convs = match kind {
        BlockKind::Basic => vec![(3, planes, stride), (3, planes, 1)],
        BlockKind::Bottleneck => vec![(1, planes, 1), (3, planes, stride), (1, out_channels, 1)],
    };
    let mut main = Vec::new();
    let mut channels = in_channels;
    for (i, &(kernel, out, conv_stride)) in convs.iter().enumerate() {
        if i > 0 {
            main.push(Op::ReLU);
        }
        main.push(Op::Conv2d(Conv2d::new(format!("{path}.conv{}", i + 1), channels, out, kernel, conv_stride)));
        main.push(Op::BatchNorm2d { path: format!("{path}.bn{}", i + 1), channels: out });
        channels = out;
    }
    let shortcut = if stride != 1 || in_channels != out_channels {
        vec![
            Op::Conv2d(Conv2d::new(format!("{path}.downsample.0"), in_channels, out_channels, 1, stride)),
            Op::BatchNorm2d { path: format!("{path}.downsample.1"), channels: out_channels },
        ]
    } else {
        Vec::new()
    };
    StageSpec::residual(path, main, shortcut, vec![Op::ReLU])
}
