//! Built networks run: every variant gives class scores, small variants train a step,
//! and running stages piecewise is exactly the whole network.

use crate::common::{trainable_numel, TORCHVISION_PARAMETERS};
use stratlab_networks::{network_names, spec, InputShape, Network, NetworkSpec};
use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};

const BATCH: i64 = 2;

fn images(input: &InputShape) -> Tensor {
    Tensor::randn([BATCH, input.channels, input.height, input.width], (Kind::Float, Device::Cpu))
}

/// Forward in training mode, cross-entropy, backward: every parameter must get a finite
/// gradient and the scores must be `[batch, classes]`.
fn assert_trains_one_step(name: &str, input: &InputShape) {
    tch::manual_seed(0);
    let vs = VarStore::new(Device::Cpu);
    let network = spec(name, input).unwrap().build(&vs.root());
    let scores = network.forward_t(&images(input), true);
    assert_eq!(scores.size(), [BATCH, input.classes], "{name} on {input}");
    let labels = Tensor::from_slice(&[0i64, input.classes - 1]);
    let loss = scores.cross_entropy_for_logits(&labels);
    loss.backward();
    assert!(loss.double_value(&[]).is_finite(), "{name} on {input}");
    for (variable_name, variable) in vs.variables() {
        if variable.requires_grad() {
            let grad = variable.grad();
            assert!(grad.defined(), "{name} on {input}: no gradient for {variable_name}");
            assert!(grad.isfinite().all().int64_value(&[]) == 1, "{name} on {input}: {variable_name}");
        }
    }
}

fn assert_small_inputs_train(names: impl Fn(&str) -> bool) {
    for name in network_names().iter().filter(|n| names(n)) {
        for input in [InputShape::MNIST, InputShape::CIFAR10, InputShape::CIFAR100] {
            assert_trains_one_step(name, &input);
        }
    }
}

#[test]
fn small_image_resnets_give_class_scores_and_gradients() {
    assert_small_inputs_train(|n| n.starts_with("resnet"));
}

#[test]
fn small_image_vggs_give_class_scores_and_gradients() {
    assert_small_inputs_train(|n| n.starts_with("vgg"));
}

#[test]
fn small_image_mobilenets_and_small_cnn_give_class_scores_and_gradients() {
    assert_small_inputs_train(|n| n.starts_with("mobilenet_v2") || n == "small-cnn");
}

/// Builds each ImageNet variant once (building a VGG takes seconds of initialisation),
/// checks its VarStore holds exactly torchvision's parameter count, and runs it forward
/// at 224×224 in evaluation mode without autograd, to keep the big ones quick.
fn assert_imagenet_variants(names: impl Fn(&str) -> bool) {
    let input = InputShape::IMAGENET;
    for &(name, parameters) in TORCHVISION_PARAMETERS.iter().filter(|(n, _)| names(n)) {
        let vs = VarStore::new(Device::Cpu);
        let network = spec(name, &input).unwrap().build(&vs.root());
        assert_eq!(trainable_numel(&vs), parameters, "{name}");
        let scores = tch::no_grad(|| network.forward_t(&images(&input), false));
        assert_eq!(scores.size(), [BATCH, 1000], "{name}");
    }
}

#[test]
fn imagenet_resnets_and_mobilenets_hold_torchvisions_parameters_and_give_1000_class_scores() {
    assert_imagenet_variants(|n| n.starts_with("resnet") || n.starts_with("mobilenet_v2"));
}

#[test]
fn imagenet_vggs_hold_torchvisions_parameters_and_give_1000_class_scores() {
    assert_imagenet_variants(|n| n.starts_with("vgg"));
}

#[test]
fn every_network_but_small_cnn_has_an_imagenet_variant() {
    let listed: Vec<&str> = TORCHVISION_PARAMETERS.iter().map(|(n, _)| *n).collect();
    let expected: Vec<&str> = network_names().iter().copied().filter(|n| *n != "small-cnn").collect();
    assert_eq!(listed, expected);
}

/// Networks with every kind of stage: residual blocks with and without downsampling,
/// inverted residuals with identity, conv and no shortcut, conv+BN+ReLU and pool stages,
/// fc stages.
fn varied_networks() -> Vec<NetworkSpec> {
    [
        ("resnet18", InputShape::CIFAR10),
        ("mobilenet_v2", InputShape::MNIST),
        ("mobilenet_v2_torchvision", InputShape::CIFAR10),
        ("vgg11_bn", InputShape::CIFAR100),
        ("small-cnn", InputShape::FASHION_MNIST),
    ]
    .iter()
    .map(|(name, input)| spec(name, input).unwrap())
    .collect()
}

/// Runs `network`'s stages one by one with `forward_stage`.
fn stage_by_stage(network: &Network, xs: &Tensor) -> Tensor {
    (0..network.stages().len()).fold(xs.shallow_clone(), |x, i| network.forward_stage(i, &x, false))
}

#[test]
fn running_stages_one_by_one_equals_the_whole_network() {
    tch::manual_seed(1);
    for spec in varied_networks() {
        let vs = VarStore::new(Device::Cpu);
        let network = spec.build(&vs.root());
        assert_eq!(network.stage_names(), spec.stage_names());
        let xs = images(&spec.input);
        let whole = tch::no_grad(|| network.forward_t(&xs, false));
        let piecewise = tch::no_grad(|| stage_by_stage(&network, &xs));
        assert!(whole.equal(&piecewise), "{}", spec.name);
    }
}

#[test]
fn stage_ranges_built_apart_and_loaded_by_name_equal_the_whole_network() {
    tch::manual_seed(2);
    for spec in varied_networks() {
        let whole_vs = VarStore::new(Device::Cpu);
        let whole = spec.build(&whole_vs.root());
        // Three pieces in one fresh VarStore, as a pipeline would place them in three;
        // they must create exactly the whole network's variables, so weights load by name.
        let n = spec.stages.len();
        let cuts = [0, n / 3, 2 * n / 3, n];
        let mut pieces_vs = VarStore::new(Device::Cpu);
        let pieces: Vec<Network> = cuts.windows(2).map(|w| spec.build_range(w[0]..w[1], &pieces_vs.root())).collect();
        let mut whole_names: Vec<_> = whole_vs.variables().into_keys().collect();
        let mut piece_names: Vec<_> = pieces_vs.variables().into_keys().collect();
        whole_names.sort();
        piece_names.sort();
        assert_eq!(piece_names, whole_names, "{}", spec.name);
        pieces_vs.copy(&whole_vs).unwrap();

        assert_eq!(pieces[1].stage_range(), cuts[1]..cuts[2]);
        assert_eq!(pieces[1].stage_names(), spec.stage_names()[cuts[1]..cuts[2]]);
        let xs = images(&spec.input);
        let expected = tch::no_grad(|| whole.forward_t(&xs, false));
        let chained = tch::no_grad(|| pieces.iter().fold(xs, |x, piece| piece.forward_t(&x, false)));
        assert!(expected.equal(&chained), "{}", spec.name);
    }
}

#[test]
fn inferred_shapes_equal_the_real_output_of_every_stage() {
    let mut networks = varied_networks();
    networks.push(spec("resnet50", &InputShape::IMAGENET).unwrap());
    networks.push(spec("mobilenet_v2", &InputShape::IMAGENET).unwrap());
    for spec in networks {
        let vs = VarStore::new(Device::Cpu);
        let network = spec.build(&vs.root());
        let analysis = spec.analyze(BATCH).unwrap();
        let mut x = images(&spec.input);
        for (i, row) in analysis.stages.iter().enumerate() {
            x = tch::no_grad(|| network.forward_stage(i, &x, false));
            assert_eq!(x.size(), row.output_shape, "{} stage {}", spec.name, row.name);
        }
    }
}

#[test]
fn a_network_can_move_to_another_thread() {
    fn assert_send<T: Send>(_: &T) {}
    let vs = VarStore::new(Device::Cpu);
    let network = spec("small-cnn", &InputShape::MNIST).unwrap().build(&vs.root());
    assert_send(&network);
    let scores =
        std::thread::spawn(move || network.forward_t(&images(&InputShape::MNIST), false).size()).join().unwrap();
    assert_eq!(scores, [BATCH, 10]);
}

#[test]
fn torchvisions_vgg19_trains_on_cifar100_with_its_pinned_count() {
    // Seed 004's network: five pools leave 1 × 1 of a 32 × 32 image, which the adaptive
    // pool spreads to 7 × 7 for the 25088-wide classifier (as torchvision's does).
    let input = InputShape::CIFAR100;
    let vgg19 = spec("vgg19_torchvision", &input).unwrap();
    assert_eq!(vgg19.parameter_count(), 139_979_940);
    assert_trains_one_step("vgg19_torchvision", &input);
}
