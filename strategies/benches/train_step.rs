//! One training step (forward, backward, SGD update) of the networks the default suite
//! trains, on the CPU (and on CUDA device 0 where libtorch sees one); and ResNet-18 and
//! VGG-11 on the CIFAR-10 layout at batch 64 and two threads in each precision, the cases
//! compared with PyTorch eager's `torch.autocast` step. The device is synchronised before
//! every clock read, and the device is part of the benchmark's name.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use stratlab_networks::InputShape;
use stratlab_strategies::device::{device_label, synchronize};
use stratlab_strategies::{MemoryFormat, Precision, PrecisionOps};
use tch::nn::{self, ModuleT, OptimizerConfig};
use tch::{Device, Kind, Tensor};

fn devices() -> Vec<Device> {
    let mut devices = vec![Device::Cpu];
    if tch::Cuda::is_available() {
        devices.push(Device::Cuda(0));
    }
    devices
}

fn train_step(c: &mut Criterion) {
    stratlab_strategies::heap::keep_freed_memory();
    tch::set_num_threads(std::thread::available_parallelism().map(|n| n.get() as i32).unwrap_or(1));
    let cases = [
        ("small-cnn", InputShape { channels: 1, height: 28, width: 28, classes: 10 }, 64),
        ("resnet18", InputShape { channels: 3, height: 32, width: 32, classes: 10 }, 32),
    ];
    let mut group = c.benchmark_group("train_step");
    group.sample_size(20).measurement_time(Duration::from_secs(8));
    for device in devices() {
        for (network, input, batch) in &cases {
            tch::manual_seed(0);
            let spec = stratlab_networks::spec(network, input).expect("network exists");
            let store = nn::VarStore::new(device);
            let model = spec.build(&store.root());
            let mut optimizer = nn::Sgd { momentum: 0.9, ..Default::default() }.build(&store, 0.01).expect("optimizer");
            let images = Tensor::randn([*batch, input.channels, input.height, input.width], (Kind::Float, device));
            let labels = Tensor::randint(input.classes, [*batch], (Kind::Int64, device));
            let id = BenchmarkId::new(format!("{network}/b{batch}"), device_label(device).to_string());
            group.bench_function(id, |bencher| {
                bencher.iter_custom(|iterations| {
                    synchronize(device);
                    let started = Instant::now();
                    for _ in 0..iterations {
                        let loss = model.forward_t(&images, true).cross_entropy_for_logits(&labels);
                        optimizer.backward_step(&loss);
                    }
                    synchronize(device);
                    started.elapsed()
                })
            });
        }
    }
    group.finish();
}

/// One step as the single strategy takes it: weights and batch in the memory format, forward
/// and loss in the precision's autocast region, backward and update outside.
fn train_step_precision(c: &mut Criterion) {
    // The malloc settings every stratlab process runs under (its `main` sets them first).
    stratlab_strategies::heap::keep_freed_memory();
    tch::set_num_threads(2);
    let cifar = InputShape { channels: 3, height: 32, width: 32, classes: 10 };
    let batch = 64;
    let mut group = c.benchmark_group("train_step_precision");
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    let device = Device::Cpu;
    let computes = [
        (Precision::Float32, MemoryFormat::Contiguous),
        (Precision::Float32, MemoryFormat::ChannelsLast),
        (Precision::Bfloat16, MemoryFormat::Contiguous),
        (Precision::Bfloat16, MemoryFormat::ChannelsLast),
    ];
    for network in ["resnet18", "vgg11"] {
        for (precision, format) in computes {
            tch::manual_seed(0);
            let spec = stratlab_networks::spec(network, &cifar).expect("network exists");
            let mut store = nn::VarStore::new(device);
            let model = spec.build(&store.root());
            precision.apply_to(&mut store, format).expect("memory format");
            let mut optimizer = nn::Sgd { momentum: 0.9, ..Default::default() }.build(&store, 0.01).expect("optimizer");
            let images = Tensor::randn([batch, 3, 32, 32], (Kind::Float, Device::Cpu));
            let images = precision.input(&images, device, format).expect("memory format");
            let labels = Tensor::randint(cifar.classes, [batch], (Kind::Int64, device));
            let id = BenchmarkId::new(format!("{network}/b{batch}"), format!("{precision}+{format}"));
            group.bench_function(id, |bencher| {
                bencher.iter_custom(|iterations| {
                    synchronize(device);
                    let started = Instant::now();
                    for _ in 0..iterations {
                        let loss = precision
                            .autocast(device, || model.forward_t(&images, true).cross_entropy_for_logits(&labels))
                            .expect("autocast region");
                        optimizer.backward_step(&loss);
                    }
                    synchronize(device);
                    started.elapsed()
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, train_step, train_step_precision);
criterion_main!(benches);
