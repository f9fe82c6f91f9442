//! The network zoo of stratlab: ResNet, VGG, MobileNetV2 and a small CNN, each described
//! as an ordered list of named stages so that model-parallel and pipeline strategies can
//! cut it between any two stages.
//!
//! A network is data first ([`NetworkSpec`], built from [`Op`]s), read two ways:
//! [`NetworkSpec::build`] makes tch modules with the parameter names of the implementation
//! the network follows (torchvision's, or on MNIST/CIFAR kuangliu/pytorch-cifar's), and
//! [`NetworkSpec::analyze`] infers every stage's shape and counts its parameters and FLOPs.
//!
//! ```no_run
//! use stratlab_networks::{spec, InputShape};
//! let resnet = spec("resnet50", &InputShape::IMAGENET)?;
//! println!("{}", resnet.analyze(32)?);
//! let vs = tch::nn::VarStore::new(tch::Device::Cpu);
//! let first_half = resnet.build_range(0..resnet.stages.len() / 2, &vs.root());
//! # Ok::<(), stratlab_networks::NetworkError>(())
//! ```

mod analysis;
mod block;
mod input_shape;
mod layer;
mod layout;
mod mobilenet_v2;
mod network;
mod network_error;
mod network_spec;
mod op;
mod resnet;
mod small_cnn;
mod stage;
mod stage_spec;
mod vgg;

pub use analysis::{Analysis, StageAnalysis, FLOP_CONVENTION};
pub use block::Block;
pub use input_shape::InputShape;
pub use layout::Layout;
pub use network::Network;
pub use network_error::NetworkError;
pub use network_spec::NetworkSpec;
pub use op::{Conv2d, Linear, Op, OpWork, ShapeError};
pub use stage::Stage;
pub use stage_spec::StageSpec;

/// Every name [`spec`] accepts.
const NETWORK_NAMES: &[&str] = &[
    "small-cnn",
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "resnet152",
    "vgg11",
    "vgg13",
    "vgg16",
    "vgg19",
    "vgg11_bn",
    "vgg13_bn",
    "vgg16_bn",
    "vgg19_bn",
    "vgg19_torchvision",
    "mobilenet_v2",
    "mobilenet_v2_torchvision",
];

/// The names [`spec`] accepts, for suite validation and `--help` listings.
pub fn network_names() -> &'static [&'static str] {
    NETWORK_NAMES
}

/// The stages of network `name` for `input`, in the layout the input calls for
/// (see [`Layout::for_input`]).
///
/// The thesis's six names (`resnet18`, `resnet50`, `resnet152`, `vgg11`, `vgg16`,
/// `mobilenet_v2`) give the networks it ran on each data set: torchvision's on
/// ImageNet-sized inputs, kuangliu/pytorch-cifar's on MNIST and CIFAR. So on small images
/// `vggN` has batch norm (and equals `vggN_bn`), and `mobilenet_v2` is pytorch-cifar's
/// design; `mobilenet_v2_torchvision` keeps torchvision's block rules there, and
/// `vgg19_torchvision` torchvision's VGG-19 (no batch norm, the 4096-wide classifier).
///
/// Fails on an unknown name (listing the valid ones) and on an input the network cannot
/// take, checked by running shape inference through every stage.
pub fn spec(name: &str, input: &InputShape) -> Result<NetworkSpec, NetworkError> {
    let unsupported =
        |reason: String| NetworkError::UnsupportedInput { network: name.to_string(), input: *input, reason };
    if [input.channels, input.height, input.width, input.classes].iter().any(|&n| n < 1) {
        return Err(unsupported("channels, height, width and classes must all be positive".into()));
    }
    let mut layout = Layout::for_input(input);
    let (vgg_name, batch_norm) = name.strip_suffix("_bn").map_or((name, false), |base| (base, true));
    let stages = if name == "small-cnn" {
        if input.height.max(input.width) > small_cnn::MAX_SIDE {
            return Err(unsupported(format!(
                "small-cnn is for images of at most {0}×{0} pixels; use a resnet, vgg or mobilenet_v2",
                small_cnn::MAX_SIDE
            )));
        }
        layout = Layout::SmallImage;
        small_cnn::stages(input)
    } else if name == "mobilenet_v2" {
        mobilenet_v2::stages(input, layout, mobilenet_v2::Design::PytorchCifar)
    } else if name == "vgg19_torchvision" {
        // torchvision's VGG-19 whatever the input, as seed 004 ran it on CIFAR-100: on
        // 32 × 32 the five pools leave 1 × 1, which the adaptive pool spreads to 7 × 7 for
        // the 25088-wide classifier.
        layout = Layout::ImageNet;
        vgg::stages(vgg::config(19).expect("VGG-19 is a configuration"), false, input, layout)
    } else if name == "mobilenet_v2_torchvision" {
        mobilenet_v2::stages(input, layout, mobilenet_v2::Design::Torchvision)
    } else if let Some((kind, blocks)) = depth(name, "resnet").and_then(resnet::config) {
        resnet::stages(kind, blocks, input, layout)
    } else if let Some(convs) = depth(vgg_name, "vgg").and_then(vgg::config) {
        vgg::stages(convs, batch_norm, input, layout)
    } else {
        return Err(NetworkError::UnknownNetwork {
            name: name.to_string(),
            valid: NETWORK_NAMES.iter().map(|n| n.to_string()).collect(),
        });
    };
    let spec = NetworkSpec { name: name.to_string(), input: *input, layout, stages };
    // Shape inference rejects inputs some stage would shrink to nothing, here rather than
    // as a libtorch error in the middle of a training run.
    spec.analyze(1)?;
    Ok(spec)
}

/// `depth("resnet50", "resnet")` is `Some(50)`; the family's `config` decides whether
/// that depth exists.
fn depth(name: &str, family: &str) -> Option<u32> {
    let digits = name.strip_prefix(family)?;
    // Reject "resnet050" and "+50", which parse but are not names we list.
    digits.starts_with(|c: char| c.is_ascii_digit() && c != '0').then(|| digits.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_has_a_spec_and_nothing_else_does() {
        for name in network_names() {
            assert_eq!(spec(name, &InputShape::CIFAR10).unwrap().name, *name);
        }
        for name in ["resnet", "resnet20", "resnet050", "vgg", "vgg12_bn", "vgg16_bn_bn", "VGG16", "mobilenet"] {
            assert!(matches!(spec(name, &InputShape::CIFAR10), Err(NetworkError::UnknownNetwork { .. })), "{name}");
        }
    }
}
