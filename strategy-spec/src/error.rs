//! What can be wrong with a strategy: a name nobody knows, a sweep that cannot be expanded,
//! a cell that cannot run.

/// A name that is not one of the valid ones (strategy, balance, checkpoint, placement).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{name}`; valid: {valid}")]
pub struct UnknownName {
    /// What was named (`strategy`, `balance`, …).
    pub what: &'static str,
    /// The name given.
    pub name: String,
    /// The valid names, comma separated.
    pub valid: String,
}

impl UnknownName {
    /// The variant of a named enum whose name (what its `name()` gives, from strum's
    /// `IntoStaticStr`) is `name`, or the error naming `what` with every valid name in
    /// declaration order: the `FromStr` of every such enum of the workspace.
    pub fn parse<T>(what: &'static str, name: &str) -> Result<T, UnknownName>
    where
        T: strum::VariantArray + Copy + Into<&'static str>,
    {
        let name_of = |variant: T| -> &'static str { variant.into() };
        T::VARIANTS.iter().copied().find(|&variant| name_of(variant) == name).ok_or_else(|| UnknownName {
            what,
            name: name.to_owned(),
            valid: T::VARIANTS.iter().map(|&variant| name_of(variant)).collect::<Vec<_>>().join(", "),
        })
    }
}

/// Why a cell cannot run as configured (recorded as an `infeasible` outcome, not a crash).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Infeasible(pub String);

/// Why a balance cannot split a network into the requested parts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct PartitionError(pub String);

impl From<Infeasible> for PartitionError {
    fn from(infeasible: Infeasible) -> PartitionError {
        PartitionError(infeasible.0)
    }
}

/// A strategy entry of a suite that breaks a rule; `field` is the entry's field as the
/// suite file spells it (`micro_batches`), the caller adds where the entry is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SweepError {
    /// The entry's field.
    pub field: &'static str,
    /// What is wrong, with the valid choices where there is a list of them.
    pub message: String,
}

/// Stored strategy columns that name no strategy this build knows, or values that do not
/// parse (a corrupt or foreign `trials` table).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("trial {trial_id}: {message}")]
pub struct ColumnsError {
    /// The trial whose row it is.
    pub trial_id: String,
    /// What does not parse.
    pub message: String,
}
