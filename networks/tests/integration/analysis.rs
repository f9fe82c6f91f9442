//! Shape inference and statistics, checked against published figures and the thesis's
//! appendix A tables; nothing here runs a network.

use stratlab_networks::{network_names, spec, Analysis, Block, InputShape, Layout, NetworkError, FLOP_CONVENTION};

fn analysis(name: &str, input: &InputShape, batch: i64) -> Analysis {
    spec(name, input).unwrap().analyze(batch).unwrap()
}

/// The output shape of stage `stage`.
fn shape_of(analysis: &Analysis, stage: &str) -> Vec<i64> {
    let row = analysis.stages.iter().find(|s| s.name == stage);
    row.unwrap_or_else(|| panic!("{} has no stage `{stage}`", analysis.network)).output_shape.clone()
}

#[test]
fn resnet50_at_224_costs_torchvisions_4_09_gmacs() {
    let resnet = analysis("resnet50", &InputShape::IMAGENET, 1);
    // torchvision's model card: 4.09 GFLOPS, which are multiply-adds; 2 FLOPs each.
    let expected = 2.0 * 4.09e9;
    let conv_linear = resnet.total_conv_linear_flops as f64;
    assert!((conv_linear / expected - 1.0).abs() < 0.01, "conv+linear FLOPs {conv_linear:e}");
    // Batch norm, ReLU, pooling and additions add a few percent, not more.
    let all = resnet.total_forward_flops as f64;
    assert!(all > conv_linear && all < 1.05 * conv_linear, "forward FLOPs {all:e}");
    println!("{resnet}\nconv+linear {conv_linear} FLOPs, all {all} FLOPs");
}

#[test]
fn resnet50_stage_shapes_follow_torchvision() {
    let resnet = analysis("resnet50", &InputShape::IMAGENET, 1);
    assert_eq!(resnet.layout, Layout::ImageNet);
    assert_eq!(resnet.stages.len(), 2 + 3 + 4 + 6 + 3 + 2);
    for (stage, shape) in [
        ("stem", vec![1, 64, 112, 112]),
        ("maxpool", vec![1, 64, 56, 56]),
        ("layer1.2", vec![1, 256, 56, 56]),
        ("layer2.0", vec![1, 512, 28, 28]),
        ("layer3.5", vec![1, 1024, 14, 14]),
        ("layer4.2", vec![1, 2048, 7, 7]),
        ("avgpool", vec![1, 2048]),
        ("fc", vec![1, 1000]),
    ] {
        assert_eq!(shape_of(&resnet, stage), shape, "{stage}");
    }
}

#[test]
fn counts_scale_with_the_batch_but_parameters_do_not() {
    let one = analysis("mobilenet_v2", &InputShape::CIFAR10, 1);
    let many = analysis("mobilenet_v2", &InputShape::CIFAR10, 8);
    assert_eq!(many.total_parameters, one.total_parameters);
    assert_eq!(many.total_forward_flops, 8 * one.total_forward_flops);
    assert_eq!(many.total_conv_linear_flops, 8 * one.total_conv_linear_flops);
    for (a, b) in one.stages.iter().zip(&many.stages) {
        assert_eq!(b.activation_bytes, 8 * a.activation_bytes, "{}", a.name);
        // f32: four bytes per element of the output.
        assert_eq!(b.activation_bytes, 4 * b.output_shape.iter().product::<i64>() as u64);
    }
}

#[test]
fn small_image_resnets_keep_full_resolution_in_their_first_stage() {
    // Thesis tables A.2 (MNIST: 28/14/7/4) and A.5 (CIFAR-10: 32/16/8/4).
    for (input, sides) in [(InputShape::MNIST, [28, 14, 7, 4]), (InputShape::CIFAR10, [32, 16, 8, 4])] {
        for name in ["resnet18", "resnet152"] {
            let resnet = analysis(name, &input, 2);
            assert_eq!(resnet.layout, Layout::SmallImage);
            assert_eq!(shape_of(&resnet, "stem"), vec![2, 64, input.height, input.width]);
            let expansion = if name == "resnet18" { 1 } else { 4 };
            for (layer, (side, planes)) in sides.iter().zip([64, 128, 256, 512]).enumerate() {
                assert_eq!(
                    shape_of(&resnet, &format!("layer{}.1", layer + 1)),
                    vec![2, planes * expansion, *side, *side]
                );
            }
            assert!(resnet.stages.iter().all(|s| s.name != "maxpool"));
            assert_eq!(shape_of(&resnet, "fc"), vec![2, input.classes]);
        }
    }
}

#[test]
fn small_image_vggs_skip_the_pool_that_would_leave_no_pixels() {
    // Thesis tables A.3 and A.6: MNIST pools 28→14→7→3→1 and keeps 1×1 for the last
    // group; CIFAR-10 pools five times down to 1×1.
    for (input, pools) in [(InputShape::MNIST, 4), (InputShape::CIFAR10, 5)] {
        let vgg = analysis("vgg11", &input, 1);
        let pool_rows: Vec<_> =
            vgg.stages.iter().filter(|s| s.name.starts_with("features.") && s.parameters == 0).collect();
        assert_eq!(pool_rows.len(), pools, "{input}");
        assert_eq!(pool_rows.last().unwrap().output_shape, vec![1, 512, 1, 1]);
        assert_eq!(shape_of(&vgg, "flatten"), vec![1, 512]);
        assert_eq!(shape_of(&vgg, "classifier"), vec![1, input.classes]);
    }
}

#[test]
fn small_image_mobilenets_end_at_4x4_as_in_the_thesis() {
    // Tables A.4 and A.7: 28×28 and 32×32 inputs both reach 4×4 before the avg-pool, with
    // the stem and the 24-channel group (its last block: pytorch-cifar's `layers.2`,
    // torchvision's `features.3`) at full resolution.
    for input in [InputShape::MNIST, InputShape::CIFAR100] {
        for (name, stem, group2, head, fc) in [
            ("mobilenet_v2", "stem", "layers.2", "head", "linear"),
            ("mobilenet_v2_torchvision", "features.0", "features.3", "features.18", "classifier"),
        ] {
            let mobilenet = analysis(name, &input, 1);
            assert_eq!(mobilenet.stages.len(), 1 + 17 + 1 + 2, "{name}");
            assert_eq!(shape_of(&mobilenet, stem), vec![1, 32, input.height, input.width], "{name}");
            assert_eq!(shape_of(&mobilenet, group2), vec![1, 24, input.height, input.width], "{name}");
            assert_eq!(shape_of(&mobilenet, head), vec![1, 1280, 4, 4], "{name}");
            assert_eq!(shape_of(&mobilenet, "avgpool"), vec![1, 1280], "{name}");
            assert_eq!(shape_of(&mobilenet, fc), vec![1, input.classes], "{name}");
        }
    }
}

#[test]
fn small_image_mobilenet_v2_has_a_skip_exactly_in_its_stride_1_blocks() {
    // pytorch-cifar adds `shortcut(x)` whenever the stride is 1 (a 1×1 conv + batch norm
    // when the channels change), never at stride 2; torchvision only when the shape is kept.
    let strided = [3, 6, 13];
    let conv_shortcut = [0, 1, 10, 16];
    let mobilenet = spec("mobilenet_v2", &InputShape::CIFAR10).unwrap();
    for block in 0..17 {
        let stage = &mobilenet.stages[block + 1];
        assert_eq!(stage.name, format!("layers.{block}"));
        match &stage.block {
            Block::Residual { shortcut, post, .. } => {
                assert!(!strided.contains(&block), "{}", stage.name);
                assert_eq!(shortcut.len(), if conv_shortcut.contains(&block) { 2 } else { 0 }, "{}", stage.name);
                assert!(post.is_empty(), "{}: no activation after the addition", stage.name);
            }
            Block::Sequential(_) => assert!(strided.contains(&block), "{}", stage.name),
        }
    }
    let torchvision = spec("mobilenet_v2_torchvision", &InputShape::CIFAR10).unwrap();
    let residual = |b: &Block| matches!(b, Block::Residual { .. });
    let skips: Vec<usize> = (1..=17).filter(|&i| residual(&torchvision.stages[i].block)).collect();
    assert_eq!(skips, [3, 5, 6, 8, 9, 10, 12, 13, 15, 16]);
}

#[test]
fn highres_variants_are_the_imagenet_networks_at_larger_activations() {
    // Tables A.11–A.13: 512×512 inputs reach 16×16 in the last stage.
    let resnet = analysis("resnet50", &InputShape::HIGHRES, 32);
    assert_eq!(shape_of(&resnet, "stem"), vec![32, 64, 256, 256]);
    assert_eq!(shape_of(&resnet, "layer4.2"), vec![32, 2048, 16, 16]);
    let vgg = analysis("vgg16", &InputShape::HIGHRES, 32);
    assert_eq!(shape_of(&vgg, "features.30"), vec![32, 512, 16, 16]);
    assert_eq!(shape_of(&vgg, "avgpool"), vec![32, 512 * 7 * 7]);
    for name in ["mobilenet_v2", "mobilenet_v2_torchvision"] {
        let mobilenet = analysis(name, &InputShape::HIGHRES, 32);
        assert_eq!(shape_of(&mobilenet, "features.18"), vec![32, 1280, 16, 16], "{name}");
    }
    for name in network_names().iter().filter(|n| **n != "small-cnn") {
        let highres = analysis(name, &InputShape::HIGHRES, 2);
        let imagenet = analysis(name, &InputShape::IMAGENET, 2);
        assert_eq!(highres.total_parameters, imagenet.total_parameters, "{name}");
        assert_eq!(highres.stages.last().unwrap().output_shape, vec![2, 1000], "{name}");
        assert!(highres.total_forward_flops > 4 * imagenet.total_forward_flops, "{name}");
    }
}

#[test]
fn batch_norm_is_reported_where_there_is_some() {
    // On CIFAR every VGG is pytorch-cifar's, which has batch norm; on ImageNet `vgg16` is
    // torchvision's plain one.
    for (name, input, expected) in [
        ("vgg16", InputShape::IMAGENET, false),
        ("vgg16_bn", InputShape::IMAGENET, true),
        ("vgg16", InputShape::CIFAR10, true),
        ("vgg11", InputShape::MNIST, true),
        ("small-cnn", InputShape::CIFAR10, false),
        ("resnet18", InputShape::CIFAR10, true),
        ("mobilenet_v2", InputShape::CIFAR10, true),
    ] {
        assert_eq!(spec(name, &input).unwrap().has_batch_norm(), expected, "{name} on {input}");
    }
}

#[test]
fn the_table_lists_every_stage_totals_and_the_flop_convention() {
    let resnet = analysis("resnet18", &InputShape::CIFAR10, 64);
    let table = resnet.to_string();
    for stage in &resnet.stages {
        assert!(table.lines().any(|line| line.starts_with(&format!("{} ", stage.name))), "{}", stage.name);
    }
    assert!(table.contains("11,173,962"), "total parameters missing:\n{table}");
    assert!(table.contains(FLOP_CONVENTION));
    assert!(table.contains("batch norm = 2 per element"));
}

#[test]
fn a_batch_of_zero_is_rejected() {
    let error = spec("resnet18", &InputShape::CIFAR10).unwrap().analyze(0).unwrap_err();
    assert_eq!(error, NetworkError::InvalidBatch { network: "resnet18".into(), batch: 0 });
}
