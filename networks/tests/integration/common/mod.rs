//! Reference figures and helpers shared by the behaviour tests.

use tch::nn::VarStore;

/// torchvision 0.2x: `sum(p.numel() for p in models.<name>().parameters())`, one row per
/// network name (in `network_names()` order) but `small-cnn`, which has no ImageNet variant.
pub const TORCHVISION_PARAMETERS: &[(&str, u64)] = &[
    ("resnet18", 11_689_512),
    ("resnet34", 21_797_672),
    ("resnet50", 25_557_032),
    ("resnet101", 44_549_160),
    ("resnet152", 60_192_808),
    ("vgg11", 132_863_336),
    ("vgg13", 133_047_848),
    ("vgg16", 138_357_544),
    ("vgg19", 143_667_240),
    ("vgg11_bn", 132_868_840),
    ("vgg13_bn", 133_053_736),
    ("vgg16_bn", 138_365_992),
    ("vgg19_bn", 143_678_248),
    ("vgg19_torchvision", 143_667_240),
    ("mobilenet_v2", 3_504_872),
    // On ImageNet-sized inputs both MobileNetV2 names are torchvision's network.
    ("mobilenet_v2_torchvision", 3_504_872),
];

/// What PyTorch's parameter count is for a built network: elements of trainable tensors.
pub fn trainable_numel(vs: &VarStore) -> u64 {
    vs.trainable_variables().iter().map(|v| v.numel() as u64).sum()
}
