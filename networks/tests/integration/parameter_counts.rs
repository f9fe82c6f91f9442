//! Parameter counts of every variant (every network name on MNIST, CIFAR-10 and ImageNet)
//! and parameter names, against torchvision and kuangliu/pytorch-cifar, both as counted
//! from the description and as created in a VarStore. (The built ImageNet variants are
//! counted in `forward.rs`, which builds them anyway.)

use crate::common::{trainable_numel, TORCHVISION_PARAMETERS};

use stratlab_networks::{network_names, spec, InputShape, NetworkError};
use tch::nn::VarStore;
use tch::Device;

/// One network name's parameter count on MNIST (1×28×28), CIFAR-10 (3×32×32) and
/// ImageNet (3×224×224, 1000 classes; `None`: the network refuses it).
struct Pinned {
    name: &'static str,
    mnist: u64,
    cifar10: u64,
    imagenet: Option<u64>,
}

const fn pin(name: &'static str, mnist: u64, cifar10: u64, imagenet: Option<u64>) -> Pinned {
    Pinned { name, mnist, cifar10, imagenet }
}

/// Every variant, derived independently of the code (and cross-checked by summing layer
/// shapes in a throwaway script written from the reference models' source):
///
/// - ImageNet: torchvision's counts (`common::TORCHVISION_PARAMETERS`).
/// - ResNet on MNIST/CIFAR (pytorch-cifar `ResNetN`): torchvision's count, minus the 7×7
///   stem (64·3·49 = 9,408), plus the 3×3 stem (64·3·9 = 1,728), minus the 1000-way fc,
///   plus a 10-way one: basic blocks (512 features) −9,408 + 1,728 − 513,000 + 5,130 =
///   −515,550; bottlenecks (2048 features) −9,408 + 1,728 − 2,049,000 + 20,490 =
///   −2,036,190. E.g. 11,689,512 − 515,550 = 11,173,962 (pytorch-cifar's published
///   ResNet18 count), 25,557,032 − 2,036,190 = 23,520,842 (its ResNet50).
/// - VGG on MNIST/CIFAR (pytorch-cifar `VGG('VGGN')`, conv with bias + batch norm): the
///   features of torchvision's `vggN_bn`, i.e. its count minus the classifier
///   (25,088·4,096 + 4,096 + 4,096·4,096 + 4,096 + 4,096·1,000 + 1,000 = 123,642,856),
///   plus Linear(512, 10) = 5,130. VGG16: 138,365,992 − 123,642,856 + 5,130 = 14,728,266,
///   the widely reported pytorch-cifar VGG16 count. `vggN` and `vggN_bn` are one network
///   on small images (pytorch-cifar's VGG always has batch norm).
/// - `vgg19_torchvision` is torchvision's VGG-19 on every input (seed 004's network on
///   CIFAR-100): 143,667,240 − 4,097,000 (the 1000-way fc) + 40,970 (a 10-way one) =
///   139,611,210 on CIFAR-10, 1,152 fewer on MNIST's one channel, and + 409,700 =
///   139,979,940 with CIFAR-100's 100-way head.
/// - `mobilenet_v2_torchvision` on CIFAR: torchvision's 3,504,872 − 1,281·1,000 + 1,281·10
///   = 2,236,682 (strides do not change parameter counts).
/// - `mobilenet_v2` on CIFAR (pytorch-cifar `MobileNetV2`): the torchvision-rule count
///   plus what pytorch-cifar adds: the t = 1 block's expansion conv 32·32 + BN 64 = 1,088,
///   and four 1×1 conv + BN shortcuts of the stride-1 blocks that change channels,
///   32→16: 512 + 32, 16→24: 384 + 48, 64→96: 6,144 + 192, 160→320: 51,200 + 640; in all
///   60,240, so 2,236,682 + 60,240 = 2,296,922, pytorch-cifar's published count.
/// - MNIST: one input channel instead of three takes 2·9·(stem channels) weights off the
///   first 3×3 conv: −1,152 for ResNet and VGG (64 channels), −576 for MobileNetV2 (32).
/// - `small-cnn`: MNIST 1,199,882 (the TensorFlow MNIST study's Keras `model.summary()`); CIFAR-10:
///   conv1 3·32·9 + 32 = 896, conv2 32·64·9 + 64 = 18,496, fc1 (64·14·14 = 12,544)·128 +
///   128 = 1,605,760, fc2 128·10 + 10 = 1,290; 1,626,442.
const PINNED: &[Pinned] = &[
    pin("small-cnn", 1_199_882, 1_626_442, None),
    pin("resnet18", 11_172_810, 11_173_962, Some(11_689_512)),
    pin("resnet34", 21_280_970, 21_282_122, Some(21_797_672)),
    pin("resnet50", 23_519_690, 23_520_842, Some(25_557_032)),
    pin("resnet101", 42_511_818, 42_512_970, Some(44_549_160)),
    pin("resnet152", 58_155_466, 58_156_618, Some(60_192_808)),
    pin("vgg11", 9_229_962, 9_231_114, Some(132_863_336)),
    pin("vgg13", 9_414_858, 9_416_010, Some(133_047_848)),
    pin("vgg16", 14_727_114, 14_728_266, Some(138_357_544)),
    pin("vgg19", 20_039_370, 20_040_522, Some(143_667_240)),
    pin("vgg11_bn", 9_229_962, 9_231_114, Some(132_868_840)),
    pin("vgg13_bn", 9_414_858, 9_416_010, Some(133_053_736)),
    pin("vgg16_bn", 14_727_114, 14_728_266, Some(138_365_992)),
    pin("vgg19_bn", 20_039_370, 20_040_522, Some(143_678_248)),
    pin("vgg19_torchvision", 139_610_058, 139_611_210, Some(143_667_240)),
    pin("mobilenet_v2", 2_296_346, 2_296_922, Some(3_504_872)),
    pin("mobilenet_v2_torchvision", 2_236_106, 2_236_682, Some(3_504_872)),
];

/// Builds `name` for `input` on the CPU and returns its VarStore.
fn built(name: &str, input: &InputShape) -> VarStore {
    let vs = VarStore::new(Device::Cpu);
    spec(name, input).unwrap().build(&vs.root());
    vs
}

/// The description's count, checked to agree with the analysis's total.
fn counted(name: &str, input: &InputShape) -> u64 {
    let network = spec(name, input).unwrap();
    let count = network.parameter_count();
    assert_eq!(network.analyze(1).unwrap().total_parameters, count, "{name} on {input}");
    count
}

#[test]
fn the_pinned_table_has_every_network_name_once_and_torchvisions_imagenet_counts() {
    let pinned: Vec<&str> = PINNED.iter().map(|p| p.name).collect();
    assert_eq!(pinned, network_names());
    let imagenet: Vec<(&str, u64)> = PINNED.iter().filter_map(|p| Some((p.name, p.imagenet?))).collect();
    assert_eq!(imagenet, TORCHVISION_PARAMETERS);
}

#[test]
fn every_variant_counts_its_pinned_parameters() {
    for pinned in PINNED {
        let name = pinned.name;
        assert_eq!(counted(name, &InputShape::MNIST), pinned.mnist, "{name} on MNIST");
        assert_eq!(counted(name, &InputShape::FASHION_MNIST), pinned.mnist, "{name} on Fashion-MNIST");
        assert_eq!(counted(name, &InputShape::CIFAR10), pinned.cifar10, "{name} on CIFAR-10");
        match pinned.imagenet {
            Some(expected) => {
                assert_eq!(counted(name, &InputShape::IMAGENET), expected, "{name} on ImageNet");
                // Highres runs the ImageNet networks; only activations grow.
                assert_eq!(counted(name, &InputShape::HIGHRES), expected, "{name} on Highres");
            }
            None => assert!(matches!(spec(name, &InputShape::IMAGENET), Err(NetworkError::UnsupportedInput { .. }))),
        }
    }
}

#[test]
fn built_small_image_variants_hold_the_pinned_parameters() {
    for pinned in PINNED {
        assert_eq!(trainable_numel(&built(pinned.name, &InputShape::CIFAR10)), pinned.cifar10, "{}", pinned.name);
    }
    // One MNIST build per family: the 1-channel stem is the only difference.
    for name in ["small-cnn", "resnet18", "vgg11", "mobilenet_v2", "mobilenet_v2_torchvision"] {
        let pinned = PINNED.iter().find(|p| p.name == name).unwrap();
        assert_eq!(trainable_numel(&built(name, &InputShape::MNIST)), pinned.mnist, "{name} on MNIST");
    }
}

/// Asserts that `vs` holds each `(name, shape)` and that it has `tensors` trainable tensors.
fn assert_variables(vs: &VarStore, expected: &[(&str, &[i64])], tensors: usize) {
    let variables = vs.variables();
    for (name, shape) in expected {
        let variable = variables.get(*name).unwrap_or_else(|| {
            let mut names: Vec<_> = variables.keys().collect();
            names.sort();
            panic!("no variable `{name}` among {names:?}")
        });
        assert_eq!(variable.size(), *shape, "{name}");
    }
    assert_eq!(vs.trainable_variables().len(), tensors);
}

#[test]
fn resnet50_variables_have_torchvisions_names_and_shapes() {
    let vs = built("resnet50", &InputShape::IMAGENET);
    let expected: &[(&str, &[i64])] = &[
        ("conv1.weight", &[64, 3, 7, 7]),
        ("bn1.weight", &[64]),
        ("bn1.running_mean", &[64]),
        ("layer1.0.conv1.weight", &[64, 64, 1, 1]),
        ("layer1.0.downsample.0.weight", &[256, 64, 1, 1]),
        ("layer1.0.downsample.1.bias", &[256]),
        ("layer2.0.conv2.weight", &[128, 128, 3, 3]),
        ("layer4.2.bn3.running_var", &[2048]),
        ("fc.weight", &[1000, 2048]),
        ("fc.bias", &[1000]),
    ];
    // model.parameters() has 161 tensors: 53 convs, 53 batch norms × 2, fc × 2.
    assert_variables(&vs, expected, 161);
    assert!(!vs.variables().contains_key("conv1.bias"), "ResNet convolutions have no bias");
}

#[test]
fn mobilenet_v2_variables_have_torchvisions_names_and_shapes() {
    let expected: &[(&str, &[i64])] = &[
        ("features.0.0.weight", &[32, 3, 3, 3]),
        ("features.0.1.weight", &[32]),
        ("features.1.conv.0.0.weight", &[32, 1, 3, 3]),
        ("features.1.conv.1.weight", &[16, 32, 1, 1]),
        ("features.1.conv.2.running_mean", &[16]),
        ("features.3.conv.1.0.weight", &[144, 1, 3, 3]),
        ("features.17.conv.2.weight", &[320, 960, 1, 1]),
        ("features.18.0.weight", &[1280, 320, 1, 1]),
        ("features.18.1.weight", &[1280]),
        ("classifier.1.weight", &[1000, 1280]),
    ];
    // model.parameters() has 158 tensors: 52 convs, 52 batch norms × 2, linear × 2.
    assert_variables(&built("mobilenet_v2", &InputShape::IMAGENET), expected, 158);
    assert_variables(&built("mobilenet_v2_torchvision", &InputShape::IMAGENET), expected, 158);
    // The torchvision-rule small-image variant keeps those names, with a 10-way classifier.
    let mut small = expected.to_vec();
    small.pop();
    small.push(("classifier.1.weight", &[10, 1280]));
    assert_variables(&built("mobilenet_v2_torchvision", &InputShape::CIFAR10), &small, 158);
}

#[test]
fn small_image_mobilenet_v2_has_pytorch_cifars_names_and_shapes() {
    let expected: &[(&str, &[i64])] = &[
        ("conv1.weight", &[32, 3, 3, 3]),
        ("bn1.weight", &[32]),
        // The t = 1 block keeps its expansion conv and has a conv shortcut (32 → 16).
        ("layers.0.conv1.weight", &[32, 32, 1, 1]),
        ("layers.0.conv2.weight", &[32, 1, 3, 3]),
        ("layers.0.conv3.weight", &[16, 32, 1, 1]),
        ("layers.0.shortcut.0.weight", &[16, 32, 1, 1]),
        ("layers.0.shortcut.1.running_var", &[16]),
        // 16 → 24 at stride 1 on CIFAR: a conv shortcut too.
        ("layers.1.shortcut.0.weight", &[24, 16, 1, 1]),
        ("layers.1.conv2.weight", &[96, 1, 3, 3]),
        ("layers.10.shortcut.0.weight", &[96, 64, 1, 1]),
        ("layers.16.conv3.weight", &[320, 960, 1, 1]),
        ("layers.16.shortcut.1.weight", &[320]),
        ("conv2.weight", &[1280, 320, 1, 1]),
        ("bn2.bias", &[1280]),
        ("linear.weight", &[10, 1280]),
        ("linear.bias", &[10]),
    ];
    // 57 convs (stem, 17 blocks × 3, 4 shortcuts, head), 57 batch norms × 2, linear × 2.
    let vs = built("mobilenet_v2", &InputShape::CIFAR10);
    assert_variables(&vs, expected, 57 + 57 * 2 + 2);
    let variables = vs.variables();
    for (block, has_conv_shortcut) in [(2, false), (3, false), (13, false), (15, false)] {
        let name = format!("layers.{block}.shortcut.0.weight");
        assert_eq!(variables.contains_key(&name), has_conv_shortcut, "{name}");
    }
}

#[test]
fn small_image_vggs_have_pytorch_cifars_names_and_batch_norm() {
    // pytorch-cifar's VGG('VGG16'): conv (with bias), batch norm, ReLU per conv, so its
    // feature indices are torchvision's vgg16_bn's; one Linear(512, 10) named `classifier`.
    let expected: &[(&str, &[i64])] = &[
        ("features.0.weight", &[64, 3, 3, 3]),
        ("features.0.bias", &[64]),
        ("features.1.weight", &[64]),
        ("features.1.running_mean", &[64]),
        ("features.40.weight", &[512, 512, 3, 3]),
        ("features.41.bias", &[512]),
        ("classifier.weight", &[10, 512]),
        ("classifier.bias", &[10]),
    ];
    for name in ["vgg16", "vgg16_bn"] {
        assert_variables(&built(name, &InputShape::CIFAR10), expected, 13 * 4 + 2);
    }
}

#[test]
fn vgg16_bn_variables_have_torchvisions_names_and_shapes() {
    // Each conv is followed by its batch norm, so torchvision's indices run to 43.
    let expected: &[(&str, &[i64])] = &[
        ("features.0.weight", &[64, 3, 3, 3]),
        ("features.0.bias", &[64]),
        ("features.1.running_var", &[64]),
        ("features.40.weight", &[512, 512, 3, 3]),
        ("features.41.bias", &[512]),
        ("classifier.0.weight", &[4096, 25088]),
        ("classifier.3.weight", &[4096, 4096]),
        ("classifier.6.bias", &[1000]),
    ];
    assert_variables(&built("vgg16_bn", &InputShape::IMAGENET), expected, 32 + 13 * 2);
    // Without batch norm the last conv is `features.28` and the last pool `features.30`.
    let plain = spec("vgg16", &InputShape::IMAGENET).unwrap();
    assert_eq!(
        plain.stage_names()[16..],
        ["features.28", "features.30", "avgpool", "classifier.0", "classifier.3", "classifier.6"]
    );
}
