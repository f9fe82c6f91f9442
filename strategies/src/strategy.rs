//! The strategies stratlab knows by name: plain data, so suites, trials and results can
//! name them without depending on how each one trains.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A way of spreading training over workers (the thesis's *distribution model*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum StrategyKind {
    /// One worker; the baseline every speedup divides by.
    Single,
}

impl StrategyKind {
    /// Every strategy this build can train, in the order reports list them.
    pub const ALL: &'static [StrategyKind] = &[StrategyKind::Single];

    /// The name used in suite files and results.
    pub fn name(self) -> &'static str {
        match self {
            StrategyKind::Single => "single",
        }
    }

    /// Whether the strategy can run with `workers` workers, and if not, why (an
    /// `infeasible` outcome rather than a crash).
    pub fn check_workers(self, workers: usize) -> Result<(), String> {
        match self {
            StrategyKind::Single if workers == 1 => Ok(()),
            StrategyKind::Single => Err(format!("single trains on exactly 1 worker, not {workers}")),
        }
    }

    /// The valid names, for error messages.
    pub fn valid_names() -> Vec<&'static str> {
        Self::ALL.iter().map(|kind| kind.name()).collect()
    }
}

impl FromStr for StrategyKind {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .copied()
            .find(|kind| kind.name() == text)
            .ok_or_else(|| format!("unknown strategy `{text}`; valid: {}", Self::valid_names().join(", ")))
    }
}

impl TryFrom<String> for StrategyKind {
    type Error = String;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<StrategyKind> for String {
    fn from(kind: StrategyKind) -> String {
        kind.name().to_string()
    }
}

impl fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
