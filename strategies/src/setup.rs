//! What every strategy does before its first step: the configuration applied to this
//! process, the network's weights in a store at the configured precision, and the
//! optimizer over them.

use tch::nn::{self, VarStore};
use tch::Device;

use crate::loss_scale::LossScaler;
use crate::{device_memory, memory, PrecisionOps, TrainConfig, TrainError};

/// A worker's copy of the weights it trains (the whole network, or a pipeline stage's
/// part), ready for its first step.
pub struct Replica<M> {
    /// The store holding the weights, at the configured precision.
    pub store: VarStore,
    /// What the strategy built on the store.
    pub model: M,
    /// The trial's optimizer over the store's trainable variables ([`crate::optimizer::UpdateRule`]).
    pub optimizer: nn::Optimizer,
    /// The dynamic loss scale, where the precision needs one (float16).
    pub loss_scaler: Option<LossScaler>,
}

/// Builds `build`'s model in a fresh store on `device` (after [`prepare`], so its weights
/// are seeded), converts it to the configured precision and makes its optimizer and loss
/// scaler.
pub fn replica<M>(
    config: &TrainConfig,
    device: Device,
    build: impl FnOnce(&mut VarStore) -> Result<M, TrainError>,
) -> Result<Replica<M>, TrainError> {
    let mut store = VarStore::new(device);
    let model = build(&mut store)?;
    config.precision.apply_to(&mut store, config.memory_format)?;
    let optimizer = config.update_rule().build(&store, config.lr)?;
    let loss_scaler = LossScaler::for_precision(config.precision, config.loss_scale);
    Ok(Replica { store, model, optimizer, loss_scaler })
}

/// Validates the configuration and applies it to this process (threads, numerics, seed);
/// returns the device to train on. Call before building the model, so weights are seeded.
pub fn prepare(config: &TrainConfig) -> Result<Device, TrainError> {
    config.validate()?;
    let device = config.device.resolve().map_err(|error| TrainError::Device(error.0))?;
    // Count CPU tensor memory from here on: the weights, optimizer state and every step.
    memory::count_cpu_allocations();
    // Before the first tensor on the device, so the cap holds for every one.
    device_memory::cap_device(device, config.device_memory_limit_bytes)?;
    tch::set_num_threads(config.threads as i32);
    config.numerics.apply().map_err(|error| TrainError::Device(error.0))?;
    tch::manual_seed(config.seed as i64);
    Ok(device)
}
