//! How a parameter server applies what its workers push: a round of every gradient
//! (`sync`, optionally dropping the last `backup_workers`), each gradient as it arrives
//! (`async`, Downpour's and Hogwild's way), or as it arrives with no worker more than
//! `staleness` updates ahead of the slowest (`bounded`, stale synchronous parallel).

use serde::{Deserialize, Serialize};

use crate::{ServerPlacement, UnknownName};

/// A parameter server's consistency mode, as suites name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
#[derive(strum::IntoStaticStr, strum::Display, strum::VariantArray)]
#[strum(serialize_all = "kebab-case")]
pub enum ServerMode {
    /// One update per round of every worker's gradient, averaged.
    #[default]
    Sync,
    /// Each gradient applied as it arrives; a worker never waits for another.
    Async,
    /// Each gradient applied as it arrives; a worker more than `staleness` updates ahead
    /// of the slowest waits (Ho et al. 2013).
    Bounded,
}

impl ServerMode {
    /// The name used in suites and results.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

impl std::str::FromStr for ServerMode {
    type Err = UnknownName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        UnknownName::parse("mode", text)
    }
}

stratlab_columns::text_column!(ServerMode);

/// The learning rate each per-gradient update takes, as a suite gives it
/// (`lr_per_update: 0.005`): compared, ordered and hashed by its value's bits, so a
/// strategy carrying one stays a key; stored as a number.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LearningRate(pub f64);

impl LearningRate {
    /// Why this is no learning rate, if it is not (zero, negative, not finite).
    pub fn check(self) -> Result<(), String> {
        match self.0.is_finite() && self.0 > 0.0 {
            true => Ok(()),
            false => Err(format!("{} is not a learning rate: give a positive number", self.0)),
        }
    }
}

impl PartialEq for LearningRate {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for LearningRate {}

impl std::hash::Hash for LearningRate {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

impl PartialOrd for LearningRate {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for LearningRate {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl std::fmt::Display for LearningRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl stratlab_columns::ColumnValue for LearningRate {
    fn column_type() -> stratlab_columns::ColumnType {
        stratlab_columns::ColumnType::Float64
    }
}

/// What a parameter server's ranks train by, every default resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerSettings {
    /// Where the server runs.
    pub placement: ServerPlacement,
    /// When the server applies a gradient.
    pub consistency: Consistency,
    /// Each per-gradient update's learning rate, where the suite gives one (else the
    /// suite's ÷ the training ranks).
    pub lr_per_update: Option<LearningRate>,
}

/// A synchronous server without backup workers at `placement`.
impl From<ServerPlacement> for ServerSettings {
    fn from(placement: ServerPlacement) -> ServerSettings {
        ServerSettings { placement, consistency: Consistency::Sync { backup_workers: 0 }, lr_per_update: None }
    }
}

/// When a parameter server applies a pushed gradient.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consistency {
    /// Rounds: the first `workers − backup_workers` gradients in are averaged into one
    /// update; the rest of the round's are dropped.
    Sync {
        /// Gradients per round the server does not wait for (0: it waits for every one).
        backup_workers: usize,
    },
    /// Each gradient is its own optimizer step; a worker runs at most `staleness` updates
    /// ahead of the slowest (`None`: unbounded, `async`).
    PerGradient {
        /// The bound, `bounded`'s k.
        staleness: Option<usize>,
    },
}

impl ServerSettings {
    /// The settings of the given parameters; `mode: bounded` without `staleness` is refused
    /// by [`crate::Strategy::new`] before it gets here (it reads as k = 0).
    pub fn new(
        server: Option<ServerPlacement>,
        mode: Option<ServerMode>,
        staleness: Option<usize>,
        backup_workers: Option<usize>,
        lr_per_update: Option<LearningRate>,
    ) -> ServerSettings {
        let consistency = match mode.unwrap_or_default() {
            ServerMode::Sync => Consistency::Sync { backup_workers: backup_workers.unwrap_or(0) },
            ServerMode::Async => Consistency::PerGradient { staleness: None },
            ServerMode::Bounded => Consistency::PerGradient { staleness: Some(staleness.unwrap_or(0)) },
        };
        ServerSettings { placement: server.unwrap_or_default(), consistency, lr_per_update }
    }

    /// What a per-gradient update multiplies a worker's scheduled learning rate by, for a
    /// suite learning rate `suite_lr` over `training_ranks`: `lr_per_update` ÷ `suite_lr`
    /// where given (the schedule keeps its shape), else 1 ÷ the training ranks, so that N
    /// updates move the weights as far as one round of N gradients.
    pub fn lr_scale(&self, suite_lr: f64, training_ranks: usize) -> f64 {
        match self.lr_per_update {
            Some(rate) if suite_lr > 0.0 => rate.0 / suite_lr,
            _ => 1.0 / training_ranks.max(1) as f64,
        }
    }

    /// Whether each gradient is applied on its own as it arrives.
    pub fn per_gradient(&self) -> bool {
        matches!(self.consistency, Consistency::PerGradient { .. })
    }
}

/// Checks `backup_workers` against a cell's `workers` ranks under `placement`: a round
/// needs at least one gradient, so at most the training ranks − 1 may be backups.
pub fn check_backup_workers(backup_workers: usize, workers: usize, placement: ServerPlacement) -> Result<(), String> {
    let training = placement.training_ranks(workers);
    if backup_workers >= training.max(1) {
        return Err(format!(
            "{backup_workers} backup workers of {training} training ranks ({workers} workers, {placement} server): \
             at most {} (a round applies at least one gradient)",
            training.saturating_sub(1)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_keep_their_names_and_resolve_their_defaults() {
        assert_eq!("bounded".parse::<ServerMode>().unwrap(), ServerMode::Bounded);
        let unknown = "hogwild".parse::<ServerMode>().unwrap_err().to_string();
        assert!(unknown.contains("sync, async, bounded"), "{unknown}");
        let settings = ServerSettings::new(None, None, None, None, None);
        assert_eq!(settings.placement, ServerPlacement::Colocated);
        assert_eq!(settings.consistency, Consistency::Sync { backup_workers: 0 });
        let dedicated = Some(ServerPlacement::Dedicated);
        let bounded = ServerSettings::new(dedicated, Some(ServerMode::Bounded), Some(2), None, None);
        assert_eq!(bounded.consistency, Consistency::PerGradient { staleness: Some(2) });
        assert!(bounded.per_gradient());
        assert_eq!(bounded.lr_scale(0.01, 4), 0.25, "the suite's rate over the training ranks");
        let given = ServerSettings::new(dedicated, Some(ServerMode::Bounded), Some(2), None, Some(LearningRate(0.005)));
        assert_eq!(given.lr_scale(0.01, 4), 0.5, "the rate given, the schedule's shape kept");
        assert!(LearningRate(0.0).check().is_err() && LearningRate(f64::NAN).check().is_err());
        assert_eq!(LearningRate(0.005).to_string(), "0.005");
    }

    #[test]
    fn a_round_keeps_at_least_one_gradient() {
        assert!(check_backup_workers(1, 3, ServerPlacement::Dedicated).is_ok());
        let refused = check_backup_workers(2, 3, ServerPlacement::Dedicated).unwrap_err();
        assert_eq!(
            refused,
            "2 backup workers of 2 training ranks (3 workers, dedicated server): at most 1 (a round applies at \
             least one gradient)"
        );
        assert!(check_backup_workers(2, 3, ServerPlacement::Colocated).is_ok());
    }
}
