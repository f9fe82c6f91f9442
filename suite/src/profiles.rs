//! Each network's profile for the cells that need one: taken from the store's `profiles`
//! when one matches everything it depends on (network, data set, device, threads, the
//! optimizer, numerics, libtorch and this very binary) and covers the sizes, measured
//! otherwise and stored for the next run. `stratlab profile` fills the store ahead.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::sync::OnceLock;

use sha2::{Digest, Sha256};
use stratlab_profile::NetworkProfile;
use stratlab_results::{ProfileRow, ProfileStore, UtcTime};
use stratlab_strategies::stored_profile::{profile_rows, stored_profile, ProfileLabel, ProfileNeeds};
use stratlab_strategies::{LibtorchBuild, Numerics};
use stratlab_strategy_spec::{MemoryFormat, OptimizerKind, Precision, StrategyKind};

use crate::profile_worker::measure_apart;
use crate::speed_reference::reference_seconds;
use crate::trial::TrialSpec;

/// Which network, data set and threads a profile was taken for, the precision and memory
/// format it computed in, and the optimizer whose step it timed.
pub(crate) type ProfileKey = (String, String, usize, Precision, MemoryFormat, OptimizerKind);

/// The key of `trial`'s profile.
pub(crate) fn key_of(trial: &TrialSpec) -> ProfileKey {
    let train = &trial.train;
    (
        trial.network.clone(),
        trial.dataset.name.to_string(),
        train.threads,
        train.precision,
        train.memory_format,
        train.optimizer,
    )
}

/// How far a stored profile's speed reference may read slower than the machine does now
/// before the profile is retaken, as a fraction. Above the reference's own spread on a quiet
/// machine: between the profiles and the trials of one run it read a median 6 % slower,
/// p10 −10.6 %, p90 +11.2 %; a slow spell read 19–25 % and left predictions 15–45 % high.
pub const STALE_PROFILE_LIMIT: f64 = 0.15;

/// Which stored profiles a command may reuse.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReusePolicy {
    /// Reuse none: take every profile again (the new ones are stored).
    pub fresh: bool,
    /// Retake a stored profile whose speed reference read slower than the machine does
    /// now by more than this fraction ([`STALE_PROFILE_LIMIT`] by default).
    pub stale_limit: f64,
}

impl Default for ReusePolicy {
    fn default() -> Self {
        ReusePolicy { fresh: false, stale_limit: STALE_PROFILE_LIMIT }
    }
}

/// A stored profile's speed reference against the machine's now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Staleness {
    /// Within the limit either way, or not judged (the profile has no reference).
    Current,
    /// Taken while the machine ran slower than now by this fraction, past the limit: its
    /// stages would predict every cell high.
    TakenInSlowSpell(f64),
    /// The machine runs slower now than when the profile was taken, by this fraction past
    /// the limit: the stored profile is the undisturbed one, and is kept.
    SlowerNow(f64),
}

impl Staleness {
    /// Compares the reference seconds stored with a profile to the reference timed now.
    pub fn judge(stored_s: Option<f64>, now_s: f64, limit: f64) -> Staleness {
        let Some(stored_s) = stored_s.filter(|s| s.is_finite() && *s > 0.0) else { return Staleness::Current };
        if !(now_s.is_finite() && now_s > 0.0) {
            return Staleness::Current;
        }
        match stored_s / now_s - 1.0 {
            slower if slower > limit => Staleness::TakenInSlowSpell(slower),
            _ if now_s / stored_s - 1.0 > limit => Staleness::SlowerNow(now_s / stored_s - 1.0),
            _ => Staleness::Current,
        }
    }
}

/// One profile taken or reused during a command.
struct Taken {
    profile: NetworkProfile,
    /// The reference work's seconds timed with it (`None`: a stored profile from before
    /// it was timed).
    speed_reference_s: Option<f64>,
    /// Why a stored profile was retaken, when it was.
    retaken: Option<String>,
}

/// Profiles measured or reused during one command.
pub struct ProfileCache {
    /// Where profiles are kept; `None`: measured afresh, kept nowhere.
    store: Option<ProfileStore>,
    /// What the store held when opened.
    stored: Vec<ProfileRow>,
    /// Each profile taken or reused.
    taken: BTreeMap<ProfileKey, Taken>,
    /// How far a stored profile's reference may be from now's.
    stale_limit: f64,
    /// The fastest reading of the reference in this command: what the machine does with
    /// nothing else running, as near as it has shown (a reading is only ever slowed).
    fastest_reference_s: f64,
}

impl ProfileCache {
    /// The profiles of the store at `store_dir`, reused as `policy` allows.
    pub fn open(store_dir: Option<&Path>, policy: ReusePolicy) -> anyhow::Result<ProfileCache> {
        let store = store_dir.map(ProfileStore::new);
        let stored = match (&store, policy.fresh) {
            (Some(store), false) => store.load()?,
            _ => Vec::new(),
        };
        Ok(ProfileCache {
            store,
            stored,
            taken: BTreeMap::new(),
            stale_limit: policy.stale_limit,
            fastest_reference_s: f64::INFINITY,
        })
    }

    /// Holds `profile` as the one `trial`'s cell uses, taken elsewhere (a fixture, another
    /// machine): [`Self::measured`] then neither measures nor looks in the store for it.
    pub fn hold(&mut self, trial: &TrialSpec, profile: NetworkProfile) {
        self.taken.insert(key_of(trial), Taken { profile, speed_reference_s: None, retaken: None });
    }

    /// The profile `trial`'s cell needs on this machine's CPU, at the sizes every trial of
    /// its key needs; where `cores` is given (the workers share this machine), with the
    /// contention of the workers that compute at once. Returns the seconds measuring took
    /// (0 when it was taken before or reused); `report` hears which.
    pub fn measured(
        &mut self,
        trials: &[TrialSpec],
        trial: &TrialSpec,
        cores: Option<usize>,
        report: &mut dyn FnMut(&str),
    ) -> anyhow::Result<(&NetworkProfile, f64)> {
        let key = key_of(trial);
        let mut profile_s = 0.0;
        if !self.taken.contains_key(&key) {
            // The trial's numerics, in force before the key reads them and while the profile
            // is measured: a training step sets them, so reading whatever an earlier profile
            // left behind gave the first lookup of every process another key than the one
            // its profile had been stored under, and it was measured again.
            trial.apply_numerics()?;
            let needs = Needs::of(trials, &key, cores);
            let needs = needs.as_profile_needs();
            let stored_key = stored_key(trial);
            let reused = stored_key.as_deref().and_then(|stored_key| stored_profile(&self.stored, stored_key, &needs));
            let mut retaken = None;
            if let Some((profile, taken_at)) = reused {
                let what = format!(
                    "the profile of {} on {} at {} thread(s){} taken {taken_at}",
                    key.0,
                    key.1,
                    key.2,
                    trial.compute_label()
                );
                let stored_reference = stored_key.as_deref().and_then(|key| self.stored_reference(key, &taken_at));
                // The machine now is the fastest it has read in this command: one reading
                // taken while a neighbour ran read a spell profile as current.
                self.reading();
                let now_s = self.fastest_reference_s;
                let milliseconds = |s: Option<f64>| s.map_or("?".to_owned(), |s| format!("{:.2} ms", s * 1e3));
                let readings = format!(
                    "reference {} then, {} now (the fastest this command)",
                    milliseconds(stored_reference),
                    milliseconds(Some(now_s))
                );
                match Staleness::judge(stored_reference, now_s, self.stale_limit) {
                    Staleness::TakenInSlowSpell(slower) => {
                        let why = format!(
                            "taken while the machine ran {:.0} % slower than now ({readings}; limit {:.0} %)",
                            100.0 * slower,
                            100.0 * self.stale_limit
                        );
                        report(&format!("retaking {what}: {why}"));
                        retaken = Some(why);
                    }
                    staleness => {
                        let note = match staleness {
                            Staleness::SlowerNow(slower) => {
                                format!(
                                    "; kept: the machine runs {:.0} % slower now than then ({readings})",
                                    100.0 * slower
                                )
                            }
                            _ => format!(" ({readings})"),
                        };
                        report(&format!("reused {what}{note}"));
                        let taken = Taken { profile, speed_reference_s: stored_reference, retaken: None };
                        self.taken.insert(key.clone(), taken);
                    }
                }
            }
            if !self.taken.contains_key(&key) {
                let before = self.reading();
                let (profile, seconds) = measure_apart(trial, &needs, report)?;
                // A spell during the profile shows in the reading on one side of it or the
                // other: the slower is stored, so a later command retakes the profile.
                let speed_reference_s = before.max(self.reading());
                if let Some(stored_key) = stored_key.as_deref() {
                    self.keep(&profile, stored_key, &key, seconds, speed_reference_s)?;
                }
                profile_s = seconds;
                self.taken.insert(key.clone(), Taken { profile, speed_reference_s: Some(speed_reference_s), retaken });
            }
        }
        Ok((&self.taken[&key].profile, profile_s))
    }

    /// The profile [`Self::measured`] would reuse for `trial`'s cell (the latest stored one
    /// with everything the trials of its key need), never measured here: `None` when the
    /// store has none.
    pub fn stored(&mut self, trials: &[TrialSpec], trial: &TrialSpec, cores: Option<usize>) -> Option<&NetworkProfile> {
        let key = key_of(trial);
        if !self.taken.contains_key(&key) {
            // The key names the numerics in force, as when the profile was stored.
            trial.apply_numerics().ok()?;
            let needs = Needs::of(trials, &key, cores);
            let stored_key = stored_key(trial)?;
            let (profile, taken_at) = stored_profile(&self.stored, &stored_key, &needs.as_profile_needs())?;
            let speed_reference_s = self.stored_reference(&stored_key, &taken_at);
            self.taken.insert(key.clone(), Taken { profile, speed_reference_s, retaken: None });
        }
        Some(&self.taken[&key].profile)
    }

    /// The reference work's seconds timed with the profile of `trial`'s cell, once
    /// [`Self::measured`] has taken or reused it; `None` for a stored profile from before
    /// the reference was timed.
    pub fn speed_reference_s(&self, trial: &TrialSpec) -> Option<f64> {
        self.taken.get(&key_of(trial)).and_then(|taken| taken.speed_reference_s)
    }

    /// Why the stored profile of `trial`'s cell was retaken by [`Self::measured`], when it
    /// was.
    pub fn retaken(&self, trial: &TrialSpec) -> Option<&str> {
        self.taken.get(&key_of(trial)).and_then(|taken| taken.retaken.as_deref())
    }

    /// Times the reference work now, and remembers the reading if it is the fastest of
    /// this command.
    fn reading(&mut self) -> f64 {
        let seconds = reference_seconds();
        self.fastest_reference_s = self.fastest_reference_s.min(seconds);
        seconds
    }

    /// The reference work's seconds stored with the profile `stored_key` taken at `taken_at`.
    fn stored_reference(&self, stored_key: &str, taken_at: &str) -> Option<f64> {
        self.stored
            .iter()
            .find(|row| row.profile_key == stored_key && row.taken_at == taken_at)
            .and_then(|row| row.speed_reference_s)
    }

    /// Adds a profile just taken to the store, if there is one, under `stored_key`.
    fn keep(
        &mut self,
        profile: &NetworkProfile,
        stored_key: &str,
        key: &ProfileKey,
        profile_s: f64,
        speed_reference_s: f64,
    ) -> anyhow::Result<()> {
        let Some(store) = &self.store else { return Ok(()) };
        let taken_at = UtcTime::now().rfc3339();
        let label = ProfileLabel {
            key: stored_key,
            network: &key.0,
            dataset: &key.1,
            device: "cpu",
            threads: key.2,
            taken_at: &taken_at,
            profile_s,
            speed_reference_s: Some(speed_reference_s),
        };
        let rows = profile_rows(profile, &label);
        store.append(&rows)?;
        self.stored.extend(rows);
        Ok(())
    }
}

/// Everything a stored profile of `trial`'s network must match to be reused; `None` when
/// this binary cannot be identified (then nothing is reused or stored).
fn stored_key(trial: &TrialSpec) -> Option<String> {
    let numerics = Numerics::current().map_or_else(|| "numerics unknown".to_owned(), |n| format!("{n:?}"));
    let libtorch = LibtorchBuild::read().torch_version.unwrap_or_else(|| "unknown".into());
    Some(format!(
        "{} · {} · cpu · {} thread(s) · {} · {} · {} · momentum {} · weight decay {} · {numerics} · libtorch {libtorch} · binary {}",
        trial.network,
        trial.dataset.name,
        trial.train.threads,
        trial.train.precision,
        trial.train.memory_format,
        trial.train.optimizer,
        trial.train.momentum,
        trial.train.weight_decay,
        binary_digest()?,
    ))
}

/// The first 16 hex digits of the SHA-256 of this executable: a rebuilt binary (another
/// commit, other flags) profiles again.
pub(crate) fn binary_digest() -> Option<&'static str> {
    static DIGEST: OnceLock<Option<String>> = OnceLock::new();
    DIGEST
        .get_or_init(|| {
            let mut file = std::fs::File::open(std::env::current_exe().ok()?).ok()?;
            let mut hasher = Sha256::new();
            let mut buffer = vec![0u8; 1 << 20];
            loop {
                let read = file.read(&mut buffer).ok()?;
                if read == 0 {
                    break;
                }
                hasher.update(&buffer[..read]);
            }
            Some(hasher.finalize().iter().take(8).map(|byte| format!("{byte:02x}")).collect())
        })
        .as_deref()
}

/// What the profile of one (network, data set, threads) must hold for its trials.
struct Needs {
    sizes: Vec<usize>,
    contention: Option<(usize, Vec<usize>)>,
    training_steps: Vec<usize>,
    /// Whether a zero-bubble trial needs the stages' split backwards timed.
    split_backward: bool,
}

impl Needs {
    /// Where `cores` is given (the workers share this machine), with their contention.
    fn of(trials: &[TrialSpec], key: &ProfileKey, cores: Option<usize>) -> Needs {
        let training_steps = training_steps_for(trials, key);
        let sizes = sizes_for(trials, key, &training_steps);
        let contention = cores.and_then(|cores| contention_for(trials, key, cores));
        let split_backward =
            trials_of(trials, key).any(|t| t.strategy.schedule().is_some_and(|schedule| schedule.splits_backward()));
        Needs { sizes, contention, training_steps, split_backward }
    }

    fn as_profile_needs(&self) -> ProfileNeeds<'_> {
        ProfileNeeds {
            sizes: &self.sizes,
            contention: self.contention.as_ref().map(|(copies, at)| (*copies, at.as_slice())),
            training_steps: &self.training_steps,
            split_backward: self.split_backward,
        }
    }
}

/// The trials one profile serves.
fn trials_of<'a>(trials: &'a [TrialSpec], key: &'a ProfileKey) -> impl Iterator<Item = &'a TrialSpec> + Clone {
    trials.iter().filter(move |t| key_of(t) == *key)
}

/// The batch sizes the trials of one (network, data set, threads) need their stages timed
/// at: what a stage of each runs at once (its per-worker batch, or its micro-batch for
/// pipelines), but for the single cells predicted from training steps at `stepped` batches.
pub(crate) fn sizes_for(trials: &[TrialSpec], key: &ProfileKey, stepped: &[usize]) -> Vec<usize> {
    let mut sizes: Vec<usize> = trials_of(trials, key)
        .filter(|t| t.strategy.kind() != StrategyKind::Single || !stepped.contains(&t.train.batch_size))
        .map(|t| t.strategy.stage_samples(t.train.batch_size))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// The batches of the single cells of one (network, data set, threads) that are ranked
/// against other strategies (a multi-worker cell of the same network, data set, batch and
/// swept threads): their prediction decides which strategy is recommended, so it is a few
/// real training steps at each, which cost about what the stages do. A single cell alone
/// in its group (the validation suite's at 1 thread, whose two workers would each need a
/// core of their own) is predicted from its stages summed; timing its steps as well took
/// 80 of the validation suite's 390 s of profiling.
fn training_steps_for(trials: &[TrialSpec], key: &ProfileKey) -> Vec<usize> {
    let ranked = |single: &TrialSpec| {
        trials.iter().any(|other| {
            other.workers > 1
                && other.network == single.network
                && other.dataset.name == single.dataset.name
                && other.train.batch_size == single.train.batch_size
                && other.swept_threads == single.swept_threads
                && other.train.compute() == single.train.compute()
        })
    };
    let mut batches: Vec<usize> = trials_of(trials, key)
        .filter(|t| t.strategy.kind() == StrategyKind::Single && ranked(t))
        .map(|t| t.train.batch_size)
        .collect();
    batches.sort_unstable();
    batches.dedup();
    batches
}

/// How many workers of the trials of one (network, data set, threads) compute on this
/// machine's `cores` at once, at most, and the sample counts contention is measured at,
/// where that is at least 2 workers: the smallest and largest any of them computes at, and
/// every batch of the strategies without a schedule (data parallelism, the parameter
/// server), whose workers all compute at once the whole step. Interpolated there instead,
/// MobileNetV2 on MNIST at 16 samples got ×1.03 from ×0.98 at 2 and ×1.15 at 64, and its
/// data-parallel and parameter-server cells came out 13–19 % short.
fn contention_for(trials: &[TrialSpec], key: &ProfileKey, cores: usize) -> Option<(usize, Vec<usize>)> {
    let sharing: Vec<&TrialSpec> = trials_of(trials, key).filter(|t| t.workers > 1).collect();
    let workers = sharing.iter().map(|t| t.workers).max()?;
    let copies = workers.min(cores / key.2.max(1));
    let samples = sharing.iter().map(|t| t.strategy.stage_samples(t.train.batch_size));
    let (smallest, largest) = (samples.clone().min()?, samples.max()?);
    let all_at_once = sharing
        .iter()
        .filter(|t| t.strategy.schedule().is_none())
        .map(|t| t.strategy.stage_samples(t.train.batch_size));
    let mut sizes: Vec<usize> = [smallest, largest].into_iter().chain(all_at_once).collect();
    sizes.sort_unstable();
    sizes.dedup();
    (copies >= 2).then_some((copies, sizes))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::plan::plan;
    use crate::suite_file::SuiteFile;

    /// The validation suite's shape in small: single at 1 and 2 threads, data parallelism at
    /// 2 threads (a thread per worker), a pipeline whose micro-batches are 8 samples.
    fn trials() -> Vec<TrialSpec> {
        let suite = SuiteFile::parse(
            "name: t\nnetworks: [small-cnn]\ndatasets: [mnist:synthetic]\nbatch_size: [16]\nthreads: [1, 2]\n\
             strategies: [single, {name: data-parallel, workers: [2]}, {name: gpipe, workers: [2], micro_batches: [2]}]\n\
             budget: {steps: 2}\n",
        )
        .unwrap();
        plan(&suite, Path::new("t.yaml")).unwrap()
    }

    fn key(threads: usize) -> ProfileKey {
        ("small-cnn".into(), "mnist".into(), threads, Precision::Float32, MemoryFormat::Contiguous, OptimizerKind::Sgd)
    }

    #[test]
    fn only_a_single_cell_ranked_against_other_strategies_gets_training_steps_and_no_stage_timing() {
        let trials = trials();
        // At 2 threads single is ranked against the 2-worker cells: its steps predict it.
        assert_eq!(training_steps_for(&trials, &key(2)), [16]);
        assert_eq!(sizes_for(&trials, &key(2), &[16]), Vec::<usize>::new(), "nothing else runs at 2 threads a worker");
        // At 1 thread single is alone in its group: its stages summed, timed at its batch,
        // which data parallelism's workers (1 thread each) need anyway, as gpipe needs 8.
        assert_eq!(training_steps_for(&trials, &key(1)), Vec::<usize>::new());
        assert_eq!(sizes_for(&trials, &key(1), &[]), [8, 16]);
        // Without the steps (a datasheet profile), every cell's stages are sized.
        assert_eq!(sizes_for(&trials, &key(2), &[]), [16]);
    }

    #[test]
    fn a_profile_is_stale_only_past_the_limit_and_only_when_it_was_taken_slower() {
        let limit = STALE_PROFILE_LIMIT;
        // Taken at 6 ms of reference, 5 ms now: 20 % slower then, past 15 %.
        match Staleness::judge(Some(6e-3), 5e-3, limit) {
            Staleness::TakenInSlowSpell(slower) => assert!((slower - 0.2).abs() < 1e-12, "{slower}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(Staleness::judge(Some(5.5e-3), 5e-3, limit), Staleness::Current, "10 % is noise");
        // Slower now: the stored profile is the undisturbed one.
        match Staleness::judge(Some(5e-3), 6e-3, limit) {
            Staleness::SlowerNow(slower) => assert!((slower - 0.2).abs() < 1e-12, "{slower}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(Staleness::judge(None, 5e-3, limit), Staleness::Current, "no reference: nothing to judge");
        assert_eq!(Staleness::judge(Some(6e-3), f64::NAN, limit), Staleness::Current);
        assert_eq!(Staleness::judge(Some(60e-3), 5e-3, f64::INFINITY), Staleness::Current, "no limit");
    }
}
