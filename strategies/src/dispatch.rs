//! The one place a [`Strategy`] value picks the implementation that trains it.

use stratlab_comm::ProcessGroup;
use stratlab_strategy_spec::Strategy;

use crate::train_loop::TrainContext;
use crate::{
    data_parallel, parameter_server, pipeline, sharded_data_parallel, single, TrainError, TrainObserver, TrainReport,
};

/// Trains `context` with `strategy`. `group` is the process group this rank belongs to,
/// which every strategy but `single` needs.
pub fn train(
    strategy: &Strategy,
    context: &TrainContext<'_>,
    group: Option<&ProcessGroup>,
    observer: &mut dyn TrainObserver,
) -> Result<TrainReport, TrainError> {
    let Some(group) = group else {
        return match strategy {
            Strategy::Single => single::train(context, observer),
            other => Err(TrainError::InvalidConfig {
                field: "strategy",
                reason: format!("{} trains in a process group and was given none", other.name()),
            }),
        };
    };
    match strategy {
        Strategy::Single => single::train(context, observer),
        Strategy::DataParallel { .. } => {
            data_parallel::train(context, group, strategy.fusion_threshold_bytes(), observer)
        }
        Strategy::ParameterServer { .. } => {
            parameter_server::train(context, group, strategy.server_settings(), observer)
        }
        Strategy::ShardedDataParallel { .. } => {
            let stage = strategy.zero_stage().unwrap_or_default();
            sharded_data_parallel::train(context, group, stage, strategy.shard_unit(), observer)
        }
        Strategy::ModelParallel { .. }
        | Strategy::Gpipe { .. }
        | Strategy::OneFOneB { .. }
        | Strategy::PipeDream { .. }
        | Strategy::Interleaved1F1B { .. }
        | Strategy::ZeroBubble { .. }
        | Strategy::Hybrid { .. } => pipeline::train(context, group, strategy, observer),
    }
}
