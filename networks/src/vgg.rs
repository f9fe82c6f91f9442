//! VGG-11/13/16/19: torchvision's networks (with or without batch norm) for
//! ImageNet-sized inputs, and kuangliu/pytorch-cifar's `VGG` (conv + batch norm + ReLU
//! stacks, then one fc) for MNIST and CIFAR, the network the thesis ran there.

use crate::input_shape::InputShape;
use crate::layout::Layout;
use crate::op::{Conv2d, Linear, Op};
use crate::stage_spec::StageSpec;

/// Channels of the five convolution groups; each group ends in a 2×2/2 max-pool.
const GROUP_CHANNELS: [i64; 5] = [64, 128, 256, 512, 512];

/// Convolutions per group of Simonyan & Zisserman's configurations A, B, D and E (the
/// "[3×3, 64] × n" of the thesis's tables A.3, A.6, A.9, A.12).
pub(crate) fn config(depth: u32) -> Option<[usize; 5]> {
    Some(match depth {
        11 => [1, 1, 2, 2, 2],
        13 => [2, 2, 2, 2, 2],
        16 => [2, 2, 3, 3, 3],
        19 => [2, 2, 4, 4, 4],
        _ => return None,
    })
}

/// Stages: one per conv(+BN)+ReLU and per pool, named `features.<index>` after the
/// torchvision (and pytorch-cifar) index of their first module; then the classifier.
///
/// `batch_norm` chooses between torchvision's `vggN` and `vggN_bn` on ImageNet-sized
/// inputs. Small images always get batch norm: pytorch-cifar's VGG has it after every
/// conv and has no variant without, so that is the thesis's CIFAR/MNIST VGG.
pub(crate) fn stages(
    convs_per_group: [usize; 5],
    batch_norm: bool,
    input: &InputShape,
    layout: Layout,
) -> Vec<StageSpec> {
    let batch_norm = batch_norm || layout == Layout::SmallImage;
    let mut stages = Vec::new();
    let (mut channels, mut height, mut width) = (input.channels, input.height, input.width);
    let mut index = 0;
    for (&convs, out) in convs_per_group.iter().zip(GROUP_CHANNELS) {
        for _ in 0..convs {
            let name = format!("features.{index}");
            let conv = Conv2d { bias: true, ..Conv2d::new(name.clone(), channels, out, 3, 1) };
            let mut ops = vec![Op::Conv2d(conv)];
            if batch_norm {
                ops.push(Op::BatchNorm2d { path: format!("features.{}", index + 1), channels: out });
            }
            ops.push(Op::ReLU);
            index += ops.len();
            stages.push(StageSpec::sequential(name, ops));
            channels = out;
        }
        // Small images run out of pixels before the configuration runs out of pools
        // (28 → 14 → 7 → 3 → 1): a pool that would leave no pixels is left out.
        if height >= 2 && width >= 2 {
            let pool = Op::MaxPool2d { kernel: 2, stride: 2, padding: 0 };
            stages.push(StageSpec::sequential(format!("features.{index}"), vec![pool]));
            index += 1;
            (height, width) = (height / 2, width / 2);
        }
    }
    match layout {
        Layout::ImageNet => {
            stages.push(StageSpec::avgpool(7, 7));
            let hidden = |i: usize, in_features| {
                let linear = Op::Linear(Linear::new(format!("classifier.{i}"), in_features, 4096));
                StageSpec::sequential(format!("classifier.{i}"), vec![linear, Op::ReLU, Op::Dropout { p: 0.5 }])
            };
            stages.push(hidden(0, channels * 7 * 7));
            stages.push(hidden(3, 4096));
            let last = Op::Linear(Linear::new("classifier.6", 4096, input.classes));
            stages.push(StageSpec::sequential("classifier.6", vec![last]));
        }
        Layout::SmallImage => {
            // pytorch-cifar ends `features` with AvgPool2d(kernel 1, stride 1), the
            // identity, which is left out: it has no parameters and changes no value.
            stages.push(StageSpec::sequential("flatten", vec![Op::Flatten]));
            // 512 features for square inputs, which end at 1×1.
            let fc = Op::Linear(Linear::new("classifier", channels * height * width, input.classes));
            stages.push(StageSpec::sequential("classifier", vec![fc]));
        }
    }
    stages
}
