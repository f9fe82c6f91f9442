//! The one place that turns a data set's registry entry into a network's input shape, so
//! the networks crate need not know about data sets.

use stratlab_datasets::DatasetInfo;
use stratlab_networks::InputShape;

/// The input a network built for `info` must accept.
pub fn input_shape(info: &DatasetInfo) -> InputShape {
    InputShape {
        channels: info.channels as i64,
        height: info.height as i64,
        width: info.width as i64,
        classes: info.classes as i64,
    }
}
