//! Parameter counts and names against torchvision and kuangliu/pytorch-cifar, both as
//! counted from the description and as created in a VarStore. (The built ImageNet
//! variants are counted in `forward.rs`, which builds them anyway.)

mod common;

use common::{trainable_numel, TORCHVISION_PARAMETERS};

use stratlab_networks::{spec, InputShape};
use tch::nn::VarStore;
use tch::Device;

/// Builds `name` for `input` on the CPU and returns its VarStore.
fn built(name: &str, input: &InputShape) -> VarStore {
    let vs = VarStore::new(Device::Cpu);
    spec(name, input).unwrap().build(&vs.root());
    vs
}

#[test]
fn imagenet_variants_count_exactly_torchvisions_parameters() {
    for &(name, expected) in TORCHVISION_PARAMETERS {
        let network = spec(name, &InputShape::IMAGENET).unwrap();
        assert_eq!(network.parameter_count(), expected, "{name}");
        assert_eq!(network.analyze(1).unwrap().total_parameters, expected, "{name}");
    }
}

#[test]
fn small_image_variants_count_the_reference_implementations_parameters() {
    // kuangliu/pytorch-cifar ResNet18(), ResNet50(), VGG('VGG16') and the Keras MNIST CNN
    // of seed 002 (model.summary(): 1,199,882).
    let cases = [
        ("resnet18", InputShape::CIFAR10, 11_173_962),
        ("resnet50", InputShape::CIFAR10, 23_520_842),
        ("vgg16_bn", InputShape::CIFAR10, 14_728_266),
        ("small-cnn", InputShape::MNIST, 1_199_882),
    ];
    for (name, input, expected) in cases {
        assert_eq!(spec(name, &input).unwrap().parameter_count(), expected, "{name} on {input}");
        assert_eq!(trainable_numel(&built(name, &input)), expected, "{name} on {input}");
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
    let vs = built("mobilenet_v2", &InputShape::IMAGENET);
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
    assert_variables(&vs, expected, 158);
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
