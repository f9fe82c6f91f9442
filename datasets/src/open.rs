//! One entry point from a selector to a ready data set: synthetic twins are built, real
//! files are located (and fetched when allowed), parsed and checked.

use std::path::PathBuf;
use std::sync::Arc;

use crate::cifar::{cifar_dirs, cifar_file_names, load_cifar};
use crate::fetch::{fetch, has_idx_files, is_fetchable, missing, real_dirs};
use crate::idx::{find_idx_file, idx_file_names, load_idx};
use crate::{
    DataCache, DataError, Dataset, DatasetInfo, DatasetSelector, ImageFolderDataset, Source, Split, SyntheticDataset,
};

/// Knobs of [`open`] that are not part of the data set's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenOptions {
    /// Seed of synthetic twins (templates and samples); ignored for real data.
    pub seed: u64,
    /// Whether absent real files may be downloaded or installed (see [`fetch`]).
    pub allow_fetch: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions { seed: 0, allow_fetch: true }
    }
}

/// Opens one split of the selected data set.
pub fn open(
    selector: &DatasetSelector,
    split: Split,
    cache: &DataCache,
    options: &OpenOptions,
) -> Result<Arc<dyn Dataset>, DataError> {
    let info = selector.info()?;
    match selector.source {
        Source::Synthetic => Ok(Arc::new(SyntheticDataset::new(info, split, options.seed))),
        Source::Real if info.synthetic_only => Err(missing(info, cache)),
        Source::Real => match info.name {
            "mnist" | "fashion-mnist" => open_idx(info, split, cache, options.allow_fetch),
            "cifar10" | "cifar100" => open_cifar(info, split, cache),
            _ => open_image_folder(info, split, cache),
        },
    }
}

fn open_idx(
    info: &'static DatasetInfo,
    split: Split,
    cache: &DataCache,
    allow_fetch: bool,
) -> Result<Arc<dyn Dataset>, DataError> {
    let found = real_dirs(info, cache).into_iter().find(|d| has_idx_files(d));
    let dir = match found {
        Some(dir) => dir,
        None if allow_fetch && is_fetchable(info) => fetch(info.name, cache)?,
        None => return Err(missing(info, cache)),
    };
    let (images, labels) = idx_file_names(split);
    let find = |base: &str| find_idx_file(&dir, base).ok_or_else(|| missing(info, cache));
    Ok(Arc::new(load_idx(&find(images)?, &find(labels)?, info)?))
}

fn open_cifar(info: &'static DatasetInfo, split: Split, cache: &DataCache) -> Result<Arc<dyn Dataset>, DataError> {
    let names = cifar_file_names(info, split);
    for dir in cifar_dirs(&cache.dir(info.name)) {
        let files: Vec<PathBuf> = names.iter().map(|n| dir.join(n)).collect();
        if files.iter().all(|f| f.is_file()) {
            return Ok(Arc::new(load_cifar(&files, info)?));
        }
    }
    Err(missing(info, cache))
}

fn open_image_folder(
    info: &'static DatasetInfo,
    split: Split,
    cache: &DataCache,
) -> Result<Arc<dyn Dataset>, DataError> {
    let root = cache.dir(info.name);
    let train = root.join("train");
    let split_dir = match split {
        Split::Train => train.clone(),
        Split::Test => root.join("val"),
    };
    if !split_dir.is_dir() {
        return Err(missing(info, cache));
    }
    let class_dir = if train.is_dir() { &train } else { &split_dir };
    Ok(Arc::new(ImageFolderDataset::open(&split_dir, class_dir, info)?))
}
