//! Which half of a data set to read.

/// Training or test split; synthetic twins also draw different samples per split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Split {
    /// The training samples.
    Train,
    /// The held-out samples accuracy is measured on.
    Test,
}

impl Split {
    /// A stable number mixed into synthetic seeds so train and test never share samples.
    pub(crate) fn seed_tag(self) -> u64 {
        match self {
            Split::Train => 0x7472_6169_6e00_0001,
            Split::Test => 0x7465_7374_0000_0002,
        }
    }
}
