//! How a trial ended: the `trials.outcome` column's vocabulary.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How one trial ended, as recorded in `trials.outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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
        match self {
            Outcome::Ok => "ok",
            Outcome::Oom => "oom",
            Outcome::Crashed => "crashed",
            Outcome::Timeout => "timeout",
            Outcome::Diverged => "diverged",
            Outcome::Infeasible => "infeasible",
        }
    }

    /// Every outcome, in the order reports list them.
    pub const ALL: [Outcome; 6] =
        [Outcome::Ok, Outcome::Oom, Outcome::Crashed, Outcome::Timeout, Outcome::Diverged, Outcome::Infeasible];

    /// Whether the trial produced measurements (only `ok` does).
    pub fn is_ok(self) -> bool {
        self == Outcome::Ok
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A stored outcome name that is not one of [`Outcome::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown trial outcome {0:?} (expected one of: ok, oom, crashed, timeout, diverged, infeasible)")]
pub struct UnknownOutcome(pub String);

impl FromStr for Outcome {
    type Err = UnknownOutcome;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Outcome::ALL.into_iter().find(|outcome| outcome.name() == name).ok_or_else(|| UnknownOutcome(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for outcome in Outcome::ALL {
            assert_eq!(outcome.name().parse::<Outcome>(), Ok(outcome));
            assert_eq!(serde_json::to_string(&outcome).unwrap(), format!("\"{outcome}\""));
        }
        assert!("exploded".parse::<Outcome>().unwrap_err().to_string().contains("expected one of"));
    }
}
