//! What a network is built for: one sample's image size and the number of classes.

use std::fmt;

/// One sample's shape (channels × height × width) and the class count of the data set.
///
/// The networks read only this, never the data, so the data sets crate and this crate
/// agree through four numbers. The constants below are the thesis's data sets (table 3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct InputShape {
    /// Colour channels: 1 for grey, 3 for RGB.
    pub channels: i64,
    /// Image height in pixels.
    pub height: i64,
    /// Image width in pixels.
    pub width: i64,
    /// Number of classes, i.e. the width of the network's output.
    pub classes: i64,
}

impl InputShape {
    /// MNIST: 28×28 grey digits, 10 classes.
    pub const MNIST: InputShape = InputShape::new(1, 28, 28, 10);
    /// Fashion-MNIST: same shape as MNIST.
    pub const FASHION_MNIST: InputShape = InputShape::new(1, 28, 28, 10);
    /// CIFAR-10: 32×32 RGB, 10 classes.
    pub const CIFAR10: InputShape = InputShape::new(3, 32, 32, 10);
    /// CIFAR-100: 32×32 RGB, 100 classes.
    pub const CIFAR100: InputShape = InputShape::new(3, 32, 32, 100);
    /// ImageNet: 224×224 RGB crops, 1000 classes.
    pub const IMAGENET: InputShape = InputShape::new(3, 224, 224, 1000);
    /// Highres: the thesis's synthetic 512×512 RGB set, 1000 classes.
    pub const HIGHRES: InputShape = InputShape::new(3, 512, 512, 1000);

    /// An input of `channels`×`height`×`width` images in `classes` classes.
    pub const fn new(channels: i64, height: i64, width: i64, classes: i64) -> Self {
        InputShape { channels, height, width, classes }
    }

    /// One sample's shape as a tensor would have it, without the batch dimension.
    pub fn sample_dims(&self) -> Vec<i64> {
        vec![self.channels, self.height, self.width]
    }
}

impl fmt::Display for InputShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}×{}×{} ({} classes)", self.channels, self.height, self.width, self.classes)
    }
}
