//! What a caller sees for names and inputs the zoo does not have.

use stratlab_networks::{network_names, spec, InputShape, NetworkError};

#[test]
fn an_unknown_name_errors_listing_every_valid_name() {
    let error = spec("resnet51", &InputShape::CIFAR10).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("resnet51"), "{message}");
    for name in network_names() {
        assert!(message.contains(name), "`{name}` missing from: {message}");
    }
    match error {
        NetworkError::UnknownNetwork { name, valid } => {
            assert_eq!(name, "resnet51");
            assert_eq!(valid, network_names().iter().map(|n| n.to_string()).collect::<Vec<_>>());
        }
        other => panic!("expected UnknownNetwork, got {other:?}"),
    }
}

#[test]
fn small_cnn_refuses_imagenet_sized_inputs() {
    let error = spec("small-cnn", &InputShape::IMAGENET).unwrap_err();
    assert!(matches!(&error, NetworkError::UnsupportedInput { network, input, .. }
        if network == "small-cnn" && *input == InputShape::IMAGENET));
    assert!(error.to_string().contains("at most 64×64"), "{error}");
    assert!(spec("small-cnn", &InputShape::new(3, 64, 64, 10)).is_ok());
}

#[test]
fn an_input_a_stage_would_shrink_to_nothing_names_that_stage() {
    let error = spec("small-cnn", &InputShape::new(1, 5, 5, 10)).unwrap_err();
    assert!(error.to_string().contains("stage `pool`"), "{error}");
}

#[test]
fn empty_inputs_and_zero_classes_are_refused() {
    for input in [InputShape::new(0, 32, 32, 10), InputShape::new(3, 32, 32, 0)] {
        assert!(matches!(spec("resnet18", &input), Err(NetworkError::UnsupportedInput { .. })), "{input}");
    }
}
