//! How a trial ended: the `trials.outcome` column's vocabulary.

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use stratlab_strategy_spec::UnknownName;
use strum::VariantArray;

/// How one trial ended, as recorded in `trials.outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[derive(strum::IntoStaticStr, strum::Display, strum::VariantArray)]
#[strum(serialize_all = "lowercase")]
pub enum Outcome {
    /// Trained to the end of its budget.
    Ok,
    /// Ran out of memory.
    Oom,
    /// A worker panicked, aborted, was killed or exited with an error.
    Crashed,
    /// Killed by the runner after the suite's `timeout_s`.
    Timeout,
    /// The loss became NaN or infinite.
    Diverged,
    /// Not started: the configuration cannot run (e.g. more stages than the network has).
    Infeasible,
}

impl Outcome {
    /// The name stored in the results.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Every outcome, in the order reports list them (declaration order).
    pub const ALL: &'static [Outcome] = Self::VARIANTS;

    /// Whether the trial produced measurements (only `ok` does).
    pub fn is_ok(self) -> bool {
        self == Outcome::Ok
    }
}

stratlab_columns::text_column!(Outcome);

impl FromStr for Outcome {
    type Err = UnknownName;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        UnknownName::parse("trial outcome", name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        let names: Vec<&str> = Outcome::ALL.iter().map(|outcome| outcome.name()).collect();
        assert_eq!(names, ["ok", "oom", "crashed", "timeout", "diverged", "infeasible"]);
        for &outcome in Outcome::ALL {
            assert_eq!(outcome.name().parse::<Outcome>(), Ok(outcome));
            assert_eq!(outcome.to_string(), outcome.name());
            assert_eq!(serde_json::to_string(&outcome).unwrap(), format!("\"{}\"", outcome.name()));
        }
        assert_eq!(
            "exploded".parse::<Outcome>().unwrap_err().to_string(),
            "unknown trial outcome `exploded`; valid: ok, oom, crashed, timeout, diverged, infeasible"
        );
    }
}
