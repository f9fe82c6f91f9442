//! Which of the two architectures of a network family an input gets.

use std::fmt;

use crate::input_shape::InputShape;

/// The thesis (appendix A) builds each family twice: torchvision's networks for ImageNet
/// and Highres, and kuangliu/pytorch-cifar-style networks for MNIST and CIFAR, whose
/// images would otherwise be downsampled to nothing by an ImageNet stem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// torchvision's layout, for inputs of at least [`Layout::IMAGENET_MIN_PIXELS`].
    ImageNet,
    /// The CIFAR/MNIST layout: no early downsampling, for smaller inputs.
    SmallImage,
}

impl Layout {
    /// Inputs whose smaller side has at least this many pixels get the ImageNet layout.
    pub const IMAGENET_MIN_PIXELS: i64 = 64;

    /// The layout the thesis uses for this input.
    pub fn for_input(input: &InputShape) -> Layout {
        if input.height.min(input.width) >= Self::IMAGENET_MIN_PIXELS {
            Layout::ImageNet
        } else {
            Layout::SmallImage
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layout::ImageNet => "imagenet",
            Layout::SmallImage => "small-image",
        })
    }
}
