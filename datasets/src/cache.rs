//! Where real data lives on disk: one folder per data set under a cache root.

use std::path::{Path, PathBuf};

/// Environment variable that overrides the cache root.
pub const DATA_DIR_ENV: &str = "STRATLAB_DATA_DIR";

/// The data cache: `<root>/<dataset>/` holds that data set's real files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataCache {
    /// The cache root.
    pub root: PathBuf,
}

impl DataCache {
    /// A cache rooted at `root` (tests use temporary folders).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        DataCache { root: root.into() }
    }

    /// `$STRATLAB_DATA_DIR` when set and non-empty, else `<workspace root>/.data`, which is
    /// git-ignored and shared by every checkout's binaries, tests and benches.
    pub fn from_env() -> Self {
        match std::env::var_os(DATA_DIR_ENV) {
            Some(dir) if !dir.is_empty() => DataCache::new(dir),
            _ => DataCache::new(Self::project_default()),
        }
    }

    /// `<workspace root>/.data`, with the workspace root fixed at compile time as this
    /// crate's parent folder.
    pub fn project_default() -> PathBuf {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        manifest.parent().unwrap_or(manifest).join(".data")
    }

    /// The folder of one data set.
    pub fn dir(&self, dataset: &str) -> PathBuf {
        self.root.join(dataset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_workspace_dot_data() {
        let dir = DataCache::project_default();
        assert!(dir.ends_with(".data"));
        assert!(dir.parent().unwrap().join("Cargo.toml").exists());
        assert_eq!(DataCache::new("/x").dir("mnist"), PathBuf::from("/x/mnist"));
    }
}
