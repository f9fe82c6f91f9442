//! The samples a profile times a trial's network on, its stages and its contention copies
//! alike: the first of the trial's own training data, as its loader normalises them, or
//! its data set's synthetic twin where that data is not on this machine (said once).
//! Why samples and not a constant: `stratlab_strategies::profile`.

use std::sync::Arc;

use anyhow::Context;
use stratlab_datasets::{DataCache, Dataset, OpenOptions, Source, Split, SyntheticDataset};
use tch::Tensor;

use crate::trial::TrialSpec;

/// A trial's training data, opened for its first samples.
pub(crate) struct ProfileSamples {
    dataset: Arc<dyn Dataset>,
    /// Why the synthetic twin stands in, where it does.
    stand_in: Option<String>,
}

impl ProfileSamples {
    /// The first samples of a training split already open.
    pub(crate) fn of(dataset: Arc<dyn Dataset>) -> ProfileSamples {
        ProfileSamples { dataset, stand_in: None }
    }

    /// Opens `trial`'s training split without fetching; its synthetic twin where the real
    /// files are not here.
    pub(crate) fn open(trial: &TrialSpec) -> anyhow::Result<ProfileSamples> {
        let selector = &trial.dataset;
        let options = OpenOptions { seed: trial.train.seed, allow_fetch: false };
        match stratlab_datasets::open(selector, Split::Train, &DataCache::from_env(), &options) {
            Ok(dataset) => Ok(ProfileSamples::of(dataset)),
            Err(error) if selector.source == Source::Real => {
                let info = selector.info()?;
                let twin = SyntheticDataset::new(info, Split::Train, trial.train.seed);
                let stand_in = format!("stages timed on {}'s synthetic twin: {error}", info.name);
                Ok(ProfileSamples { dataset: Arc::new(twin), stand_in: Some(stand_in) })
            }
            Err(error) => Err(error).with_context(|| format!("opening {} for its profile", selector.name)),
        }
    }

    /// The first `count` samples (all of them where the split holds fewer), float32 `N×C×H×W`.
    pub(crate) fn first(&self, count: usize) -> anyhow::Result<Tensor> {
        let indices: Vec<usize> = (0..count.clamp(1, self.dataset.len().max(1))).collect();
        let batch = self.dataset.batch(&indices).context("reading the samples a profile times")?;
        Ok(batch.images)
    }

    /// Why the synthetic twin stands in for the trial's data, where it does.
    pub(crate) fn stand_in(&self) -> Option<&str> {
        self.stand_in.as_deref()
    }
}
