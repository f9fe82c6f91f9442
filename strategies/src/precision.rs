//! The floating-point types a trial trains in: its weights, gradients and optimizer state,
//! and the type its forward computes in.
//!
//! Float32 and float64 compute in the weights' type. Bfloat16 is PyTorch AMP's: float32
//! weights, gradients and optimizer state, the forward and the loss inside an autocast region
//! ([`crate::autocast`]), so convolutions and matrix products compute in bfloat16 (the
//! backward in the same types). Float64 exists for the equivalence
//! tests: in float32 the order of a reduction (which libtorch picks by batch size and CPU)
//! moves results by ~1e-4 relative, so a test that compares a distributed strategy with
//! single-device training must either tolerate that much or run in float64, where the same
//! reorderings move results by ~1e-15 and a tolerance of 1e-9 checks the algorithm exactly.

pub use stratlab_strategy_spec::Precision;
use stratlab_strategy_spec::{MemoryFormat, PrecisionRefused};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::autocast::{AutocastRegion, AutocastType};
use crate::device_double::{self, DeviceCall};
use crate::memory_format::to_memory_format;
use crate::{DeviceChoice, TrainError};

/// Why `precision` cannot train a benchmark cell on `device`, if it cannot.
pub fn check_trainable(precision: Precision, device: DeviceChoice) -> Result<(), PrecisionRefused> {
    precision.check_device(device == DeviceChoice::Cpu)
}

/// What a network computes in: the two suite axes a trial's [`crate::TrainConfig`] carries,
/// together where a measurement must take them both (a profile).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Compute {
    /// The floating-point types.
    pub precision: Precision,
    /// The layout of four-dimensional tensors.
    pub memory_format: MemoryFormat,
}

/// How a [`Precision`] trains in libtorch: the weights' type, the autocast region around
/// the forward, the type that crosses between pipeline stages.
pub trait PrecisionOps: Copy {
    /// The element type of the weights, their gradients and the optimizer state.
    fn kind(self) -> Kind;
    /// The type autocast computes the forward in, where this precision uses it.
    fn autocast_type(self) -> Option<AutocastType>;
    /// The type activations and their gradients cross between pipeline stages in: the
    /// type the forward computes in.
    fn message_kind(self) -> Kind;
    /// Runs `forward` (a forward pass, and the loss where there is one) in this precision
    /// for tensors on `device`: inside an autocast region where it has one.
    fn autocast<T>(self, device: Device, forward: impl FnOnce() -> T) -> Result<T, TrainError>;
    /// Casts a freshly built (float32) store's floating-point variables to this type, and
    /// lays its four-dimensional ones out in `format`. The values are those float32
    /// initialisation drew, so every strategy and the single-device reference start from
    /// the same weights whatever the precision.
    fn apply_to(self, store: &mut VarStore, format: MemoryFormat) -> Result<(), TrainError>;
    /// `input` (a float32 batch from the loader) on `device` in this type and `format`.
    fn input(self, input: &Tensor, device: Device, format: MemoryFormat) -> Result<Tensor, TrainError>;
}

impl PrecisionOps for Precision {
    fn kind(self) -> Kind {
        match self {
            Precision::Float64 => Kind::Double,
            Precision::Float32 | Precision::Tfloat32 | Precision::Bfloat16 | Precision::Float16 => Kind::Float,
        }
    }

    fn autocast_type(self) -> Option<AutocastType> {
        match self {
            Precision::Bfloat16 => Some(AutocastType::Bfloat16),
            Precision::Float16 => Some(AutocastType::Float16),
            Precision::Float32 | Precision::Tfloat32 | Precision::Float64 => None,
        }
    }

    fn message_kind(self) -> Kind {
        match self.autocast_type() {
            Some(AutocastType::Bfloat16) => Kind::BFloat16,
            Some(AutocastType::Float16) => Kind::Half,
            None => self.kind(),
        }
    }

    fn autocast<T>(self, device: Device, forward: impl FnOnce() -> T) -> Result<T, TrainError> {
        let _region = self.autocast_type().map(|dtype| AutocastRegion::enter(device, dtype)).transpose()?;
        // On the scripted CUDA device the tensors are the CPU's: the CUDA region a GPU would
        // open opens beside the CPU region that does the arithmetic.
        let _scripted_cuda = match self.autocast_type() {
            Some(dtype) if device_double::installed() => {
                device_double::record(DeviceCall::Autocast(dtype));
                Some(AutocastRegion::enter(Device::Cuda(0), dtype)?)
            }
            _ => None,
        };
        Ok(forward())
    }

    fn apply_to(self, store: &mut VarStore, format: MemoryFormat) -> Result<(), TrainError> {
        if self == Precision::Float64 {
            store.double();
        }
        if format != MemoryFormat::Contiguous {
            for mut variable in store.variables().into_values().filter(|v| v.dim() == 4) {
                let laid_out = to_memory_format(&variable, format)?;
                // In place of the data, so the store, the optimizer and the network keep
                // the same variable.
                tch::no_grad(|| variable.set_data(&laid_out));
            }
        }
        Ok(())
    }

    fn input(self, input: &Tensor, device: Device, format: MemoryFormat) -> Result<Tensor, TrainError> {
        let input = input.to_device(device).to_kind(self.kind());
        match input.dim() {
            4 => to_memory_format(&input, format),
            _ => Ok(input),
        }
    }
}

#[cfg(test)]
mod tests {
    use stratlab_networks::InputShape;
    use tch::nn::{self, ModuleT, OptimizerConfig};

    use super::*;
    use crate::autocast::autocast_enabled;

    const MNIST: InputShape = InputShape { channels: 1, height: 28, width: 28, classes: 10 };

    /// The small CNN's weights before and after one SGD step (lr 0.1) on a fixed batch in
    /// each of `precisions`, every step from the same weights (restored in between, so the
    /// comparison does not depend on the generator other tests draw from at once).
    fn one_step_each(precisions: &[Precision]) -> (Vec<Tensor>, Vec<Vec<Tensor>>) {
        let spec = stratlab_networks::spec("small-cnn", &MNIST).unwrap();
        let store = nn::VarStore::new(Device::Cpu);
        let model = spec.build(&store.root());
        let images = Tensor::randn([16, 1, 28, 28], (Kind::Float, Device::Cpu));
        let labels = Tensor::randint(10, [16], (Kind::Int64, Device::Cpu));
        let weights = store.trainable_variables();
        let before: Vec<Tensor> = weights.iter().map(Tensor::copy).collect();
        let after = precisions
            .iter()
            .map(|precision| {
                tch::no_grad(|| weights.iter().zip(&before).for_each(|(w, b)| w.shallow_clone().copy_(b)));
                let mut optimizer = nn::Sgd::default().build(&store, 0.1).unwrap();
                let loss = precision
                    .autocast(Device::Cpu, || model.forward_t(&images, true).cross_entropy_for_logits(&labels))
                    .unwrap();
                optimizer.backward_step(&loss);
                weights.iter().map(Tensor::copy).collect()
            })
            .collect();
        (before, after)
    }

    fn norm(tensors: &[Tensor]) -> f64 {
        tensors.iter().map(|t| t.square().sum(Kind::Double).double_value(&[])).sum::<f64>().sqrt()
    }

    #[test]
    fn autocast_computes_the_forward_in_its_type_from_float32_weights_inside_its_region_only() {
        let spec = stratlab_networks::spec("small-cnn", &MNIST).unwrap();
        let store = nn::VarStore::new(Device::Cpu);
        let model = spec.build(&store.root());
        let images = Tensor::randn([4, 1, 28, 28], (Kind::Float, Device::Cpu));
        let logits = Precision::Bfloat16
            .autocast(Device::Cpu, || {
                assert!(autocast_enabled(Device::Cpu));
                // Another thread (a pipeline stage's) has its own state.
                assert!(!std::thread::scope(|scope| scope.spawn(|| autocast_enabled(Device::Cpu)).join().unwrap()));
                model.forward_t(&images, true)
            })
            .unwrap();
        assert_eq!(logits.kind(), Kind::BFloat16);
        assert!(!autocast_enabled(Device::Cpu), "the region closed");
        assert!(store.trainable_variables().iter().all(|w| w.kind() == Kind::Float), "weights stay float32");
        let logits = Precision::Float32.autocast(Device::Cpu, || model.forward_t(&images, true)).unwrap();
        assert_eq!(logits.kind(), Kind::Float);
        assert_eq!(Precision::Bfloat16.message_kind(), Kind::BFloat16);
        assert_eq!(Precision::Bfloat16.kind(), Kind::Float);
        let logits = Precision::Float16.autocast(Device::Cpu, || model.forward_t(&images, true)).unwrap();
        assert_eq!((logits.kind(), Precision::Float16.message_kind()), (Kind::Half, Kind::Half));
    }

    #[test]
    fn one_bfloat16_step_moves_the_weights_as_float32_does_to_bfloat16_rounding() {
        let (before, after) = one_step_each(&[Precision::Float32, Precision::Bfloat16]);
        let (float32, bfloat16) = (&after[0], &after[1]);
        let delta = |a: &[Tensor], b: &[Tensor]| a.iter().zip(b).map(|(a, b)| a - b).collect::<Vec<_>>();
        let update = norm(&delta(float32, &before));
        let apart = norm(&delta(bfloat16, float32)) / update;
        // bfloat16 keeps 8 bits of mantissa (relative rounding 2^-9 = 0.2 %); through the
        // network its step lands 3.2-4.2 % of the update from float32's (three runs on
        // random weights and data). Identical steps would mean the forward never left float32.
        assert!(apart > 1e-4 && apart < 0.1, "the bfloat16 step lands {apart} of the update from float32's");
    }

    #[test]
    fn channels_last_lays_out_weights_and_inputs_and_trains_as_contiguous_does() {
        use crate::memory_format::is_memory_format;
        const CIFAR: InputShape = InputShape { channels: 3, height: 32, width: 32, classes: 10 };
        let spec = stratlab_networks::spec("small-cnn", &CIFAR).unwrap();
        let images = Tensor::randn([8, 3, 32, 32], (Kind::Float, Device::Cpu));
        let labels = Tensor::randint(10, [8], (Kind::Int64, Device::Cpu));
        // The same float64 weights in both formats (copied, not seeded: other tests draw
        // from the same generator at once), one SGD step each.
        let first = nn::VarStore::new(Device::Cpu);
        spec.build(&first.root());
        let step = |format: MemoryFormat| {
            let mut store = nn::VarStore::new(Device::Cpu);
            let model = spec.build(&store.root());
            store.copy(&first).unwrap();
            Precision::Float64.apply_to(&mut store, format).unwrap();
            let four_d: Vec<Tensor> = store.variables().into_values().filter(|v| v.dim() == 4).collect();
            assert!(!four_d.is_empty() && four_d.iter().all(|w| is_memory_format(w, format)), "{format}");
            let input = Precision::Float64.input(&images, Device::Cpu, format).unwrap();
            assert!(is_memory_format(&input, format) && input.kind() == Kind::Double);
            let mut optimizer = nn::Sgd::default().build(&store, 0.1).unwrap();
            optimizer.backward_step(&model.forward_t(&input, true).cross_entropy_for_logits(&labels));
            assert!(four_d.iter().all(|w| is_memory_format(w, format)), "the step keeps the layout");
            let mut named: Vec<(String, Tensor)> = store.variables().into_iter().collect();
            named.sort_by(|a, b| a.0.cmp(&b.0));
            named.into_iter().map(|(_, w)| w.contiguous()).collect::<Vec<_>>()
        };
        let (contiguous, channels_last) = (step(MemoryFormat::Contiguous), step(MemoryFormat::ChannelsLast));
        assert!(!is_memory_format(&images, MemoryFormat::ChannelsLast), "the loader's batches are NCHW");
        for (a, b) in contiguous.iter().zip(&channels_last) {
            // The same arithmetic in another order: float64 rounding apart, nothing more.
            let apart = (a - b).abs().max().double_value(&[]);
            assert!(apart < 1e-12, "channels-last moved a weight {apart} from contiguous");
        }
    }
}
