//! What a command's failure means to the shell: the error type for input the user can fix,
//! and the exit codes (2 for bad input, 3 for a regression `compare` found, 1 for anything
//! else). Commands, the runner, the probe and the regression commands all depend on this
//! module; it depends on none of them.

use stratlab_datasets::DataError;
use stratlab_networks::NetworkError;
use stratlab_regressions::RegressionError;
use stratlab_reports::ReportError;
use stratlab_results::StoreError;
use stratlab_strategies::TrainError;

use crate::suite_error::SuiteError;

/// Exit status of `compare` when a cell regressed, the fastest strategy flipped or a
/// baseline cell is missing: distinct from 1 (the command failed) and 2 (bad input), so CI
/// can tell a regression from a broken job.
pub const REGRESSION_EXIT: u8 = 3;

/// Input the user can fix: an unknown name, a malformed file, an impossible setting.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

/// The exit code of a failed command: 2 for anything the user's input caused (names,
/// files, settings), 1 otherwise.
pub fn exit_code(error: &anyhow::Error) -> u8 {
    let input = error.chain().any(|cause| {
        cause.is::<InputError>()
            || cause.is::<SuiteError>()
            || cause.downcast_ref::<StoreError>().is_some_and(StoreError::is_unreadable_run)
            || cause.downcast_ref::<RegressionError>().is_some_and(|error| match error {
                RegressionError::Store(store) => store.is_unreadable_run(),
                RegressionError::NoSuchSuite { .. }
                | RegressionError::NothingToCompare { .. }
                | RegressionError::Thresholds(_)
                | RegressionError::Strategy { .. } => true,
                _ => false,
            })
            || matches!(cause.downcast_ref::<ReportError>(), Some(ReportError::Strategy(_)))
            || cause.is::<NetworkError>()
            || cause.is::<DataError>()
            || matches!(
                cause.downcast_ref::<TrainError>(),
                Some(TrainError::InvalidConfig { .. } | TrainError::Device(_))
            )
    });
    if input {
        2
    } else {
        1
    }
}
