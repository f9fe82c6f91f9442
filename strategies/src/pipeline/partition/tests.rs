//! Every balance on small-cnn (MNIST) and resnet18 (CIFAR-10): plan shape, optimality
//! against `uniform`, explicit lists, and errors that name their numbers.

use super::*;
use stratlab_networks::{spec, InputShape};

fn small_cnn() -> NetworkSpec {
    spec("small-cnn", &InputShape::MNIST).unwrap()
}

fn resnet18() -> NetworkSpec {
    spec("resnet18", &InputShape::CIFAR10).unwrap()
}

fn plan(spec: &NetworkSpec, balance: Balance, parts: usize) -> StagePlan {
    plan_stages(spec, &balance, parts, 2, Device::Cpu).unwrap()
}

fn error(spec: &NetworkSpec, balance: Balance, parts: usize) -> String {
    plan_stages(spec, &balance, parts, 2, Device::Cpu).unwrap_err().to_string()
}

fn counts(plan: &StagePlan) -> Vec<usize> {
    plan.ranges.iter().map(|r| r.len()).collect()
}

fn largest(costs: &[f64]) -> f64 {
    costs.iter().copied().fold(0.0, f64::max)
}

/// Ranges start at 0, follow each other, are non-empty and end at the last stage; one
/// cost per range.
fn assert_covers(plan: &StagePlan, stage_count: usize, parts: usize) {
    assert_eq!(plan.ranges.len(), parts, "{plan:?}");
    assert_eq!(plan.costs.len(), parts, "{plan:?}");
    assert_eq!(plan.ranges[0].start, 0, "{plan:?}");
    assert_eq!(plan.ranges[parts - 1].end, stage_count, "{plan:?}");
    assert!(plan.ranges.windows(2).all(|w| w[0].end == w[1].start), "{plan:?}");
    assert!(plan.ranges.iter().all(|r| !r.is_empty()), "{plan:?}");
}

#[test]
fn every_static_balance_gives_contiguous_plans_covering_all_stages() {
    for spec in [small_cnn(), resnet18()] {
        let n = spec.stages.len();
        for parts in 1..=n {
            let explicit = Balance::Explicit(uniform_counts(n, parts).into_iter().rev().collect());
            for balance in [Balance::Uniform, Balance::Parameters, Balance::Size, explicit] {
                let plan = plan(&spec, balance.clone(), parts);
                assert_covers(&plan, n, parts);
                assert_eq!(plan.balance, balance);
            }
        }
    }
}

#[test]
fn uniform_gives_earlier_parts_the_extra_stage() {
    let plan = plan(&resnet18(), Balance::Uniform, 4);
    // 11 stages: stem, 8 basic blocks, avgpool, fc.
    assert_eq!(plan.ranges, vec![0..3, 3..6, 6..9, 9..11]);
    assert_eq!((plan.costs, plan.unit.as_str()), (vec![3.0, 3.0, 3.0, 2.0], "stages"));
}

#[test]
fn parameters_and_size_never_have_a_larger_bottleneck_than_uniform() {
    for spec in [small_cnn(), resnet18()] {
        let n = spec.stages.len();
        for balance in [Balance::Parameters, Balance::Size] {
            let costs = stage_costs(&spec, &balance, 2, Device::Cpu).unwrap();
            for parts in 1..=n {
                let balanced = plan(&spec, balance.clone(), parts);
                assert_eq!(balanced.unit, costs.unit);
                let uniform: Vec<f64> = ranges_from_counts(&uniform_counts(n, parts))
                    .into_iter()
                    .map(|r| costs.per_stage[r].iter().sum())
                    .collect();
                assert!(
                    largest(&balanced.costs) <= largest(&uniform),
                    "{} {balance} into {parts}: {:?} vs uniform {uniform:?}",
                    spec.name,
                    balanced.costs
                );
            }
        }
    }
}

#[test]
fn parameters_balance_isolates_small_cnns_fc1() {
    // conv1 320, conv2 18,496, pool 0, fc1 1,179,776, fc2 1,290 parameters.
    let spec = small_cnn();
    let two = plan(&spec, Balance::Parameters, 2);
    // Cutting before or after the parameter-free pool ties; earlier parts take more.
    assert_eq!(two.ranges, vec![0..3, 3..5]);
    assert_eq!(two.costs, vec![18_816.0, 1_181_066.0]);
    let three = plan(&spec, Balance::Parameters, 3);
    // fc1 alone is the bottleneck; of the ties, [2, 2, 1] is the most even.
    assert_eq!(three.ranges, vec![0..2, 2..4, 4..5]);
    assert_eq!(three.costs, vec![18_816.0, 1_179_776.0, 1_290.0]);
    assert_eq!(three.unit, "parameters");
    let total = 1_199_882.0;
    assert!((three.predicted_imbalance() - (1_179_776.0 / (total / 3.0) - 1.0)).abs() < 1e-12);
}

#[test]
fn parameters_balance_gives_resnet18s_wide_last_blocks_their_own_stages() {
    let plan = plan(&resnet18(), Balance::Parameters, 4);
    // layer4.1 (4,720,640) and layer4.0 (3,673,088) outweigh everything before them
    // (2,775,104) and neither can take a neighbour without exceeding layer4.1; the
    // parameter-free avgpool ties between layer4.1 and fc and goes to the earlier part.
    assert_eq!(counts(&plan), vec![7, 1, 2, 1]);
    assert_eq!(plan.costs, vec![2_775_104.0, 3_673_088.0, 4_720_640.0, 5_130.0]);
    assert_eq!(plan.costs.iter().sum::<f64>(), resnet18().parameter_count() as f64);
}

#[test]
fn size_counts_sgd_state_output_and_saved_tensors_per_micro_batch() {
    let spec = small_cnn();
    let costs = stage_costs(&spec, &Balance::Size, 2, Device::Cpu).unwrap();
    assert_eq!(costs.unit, "bytes");
    // conv1: 320 parameters × 12 bytes, its 32×26×26 output, nothing kept inside.
    assert_eq!(costs.per_stage[0], (320 * 12 + 2 * 32 * 26 * 26 * 4) as f64);
    // pool: no parameters, its 9,216-float output and as many int64 indices.
    assert_eq!(costs.per_stage[2], (2 * 9216 * 4 + 2 * 9216 * 8) as f64);
    // Doubling the micro-batch doubles everything but the parameter state.
    let double = stage_costs(&spec, &Balance::Size, 4, Device::Cpu).unwrap();
    assert_eq!(double.per_stage[2], 2.0 * costs.per_stage[2]);
    assert_eq!(double.per_stage[4] - costs.per_stage[4], (2 * 10 * 4) as f64);
}

/// The `size` activation estimate against what a training-mode forward leaves allocated
/// on the CPU (the counting allocator's count, process-wide: other tests of this binary
/// allocate and free at the same time, profiles among them, so up to 20 tries a little
/// apart, as the allocator's own test does). Measured while writing it: 151.0 MB against 150.0 MB estimated for
/// resnet18 at batch 32.
#[test]
fn size_activation_estimate_matches_cpu_forward_memory() {
    use crate::memory::{allocated_bytes, count_cpu_allocations};
    use tch::{nn::VarStore, Kind, Tensor};
    assert!(count_cpu_allocations());
    let spec = resnet18();
    let batch = 16;
    let analysis = spec.analyze(1).unwrap();
    let mut estimate = 0;
    let mut input = spec.input.sample_dims();
    for (stage, row) in spec.stages.iter().zip(&analysis.stages) {
        estimate += activation_bytes_per_sample(&stage.block, &input).unwrap().total() * batch;
        input = row.output_shape[1..].to_vec();
    }
    let vs = VarStore::new(Device::Cpu);
    let network = spec.build(&vs.root());
    let images = Tensor::ones([batch as i64, 3, 32, 32], (Kind::Float, Device::Cpu));
    let mut ratios = Vec::new();
    for _ in 0..20 {
        let before = allocated_bytes(Device::Cpu).unwrap() as f64;
        let output = tch::nn::ModuleT::forward_t(&network, &images, true);
        let ratio = (allocated_bytes(Device::Cpu).unwrap() as f64 - before) / estimate as f64;
        drop(output);
        if (0.97..1.1).contains(&ratio) {
            return;
        }
        ratios.push(ratio);
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("measured / estimated activation bytes ({estimate} estimated): {ratios:?}");
}

#[test]
fn explicit_list_is_honoured_and_costed_in_parameters() {
    let plan = plan(&resnet18(), Balance::Explicit(vec![1, 4, 4, 2]), 4);
    assert_eq!(plan.ranges, vec![0..1, 1..5, 5..9, 9..11]);
    assert_eq!(plan.unit, "parameters");
    // The stem's 3×3 conv (1,728) and batch norm (128).
    assert_eq!(plan.costs[0], 1_856.0);
    assert_eq!(plan.costs[3], (512 * 10 + 10) as f64);
    assert!(plan.predicted_imbalance() > 1.0, "{plan:?}");
}

#[test]
fn time_balance_profiles_small_cnn_on_the_cpu() {
    let spec = small_cnn();
    let costs = stage_costs(&spec, &Balance::Time, 2, Device::Cpu).unwrap();
    assert_eq!(costs.unit, "seconds");
    assert!(costs.per_stage.iter().all(|&s| s > 0.0 && s < 10.0), "{costs:?}");
    let plan = plan_stages(&spec, &Balance::Time, 3, 2, Device::Cpu).unwrap();
    assert_covers(&plan, spec.stages.len(), 3);
    assert_eq!(plan.unit, "seconds");
    assert!(plan.costs.iter().all(|&s| s > 0.0), "{plan:?}");
}

#[test]
fn time_balance_from_given_seconds_cuts_them_without_timing_anything() {
    let spec = small_cnn();
    let n = spec.stages.len();
    // The last stage alone weighs as much as all the others: it gets a part of its own.
    let mut seconds = vec![1.0; n];
    seconds[n - 1] = (n - 1) as f64;
    let plan = plan_by_stage_seconds(&spec, &seconds, 2).unwrap();
    assert_eq!(plan.ranges, vec![0..n - 1, n - 1..n]);
    assert_eq!((plan.balance.clone(), plan.unit.as_str()), (Balance::Time, "seconds"));
    assert_eq!(plan.costs, vec![(n - 1) as f64, (n - 1) as f64]);
    // The cut a self-timed plan makes of the same seconds.
    assert_eq!(plan.ranges, linear_partition(&seconds, 2));
    let heavy_first: Vec<f64> = seconds.iter().rev().copied().collect();
    assert_eq!(plan_by_stage_seconds(&spec, &heavy_first, 2).unwrap().ranges, vec![0..1, 1..n]);

    let short = plan_by_stage_seconds(&spec, &seconds[1..], 2).unwrap_err().0;
    assert!(short.contains(&format!("{} stage times given for the {n} stages", n - 1)), "{short}");
    let mut not_a_time = seconds.clone();
    not_a_time[0] = f64::NAN;
    assert!(plan_by_stage_seconds(&spec, &not_a_time, 2).is_err());
    let too_many_parts = plan_by_stage_seconds(&spec, &seconds, n + 1).unwrap_err().0;
    assert!(too_many_parts.contains("stages to split"), "{too_many_parts}");
}

#[test]
fn infeasible_plans_name_their_numbers() {
    let spec = small_cnn();
    assert_eq!(error(&spec, Balance::Uniform, 0), "0 pipeline stages requested; a pipeline needs at least 1");
    assert_eq!(
        error(&spec, Balance::Parameters, 6),
        "6 pipeline stages requested but the network has only 5 stages to split"
    );
    assert_eq!(
        error(&spec, Balance::Explicit(vec![2, 3]), 3),
        "balance [2,3] lists 2 pipeline stages but 3 were requested"
    );
    assert_eq!(
        error(&spec, Balance::Explicit(vec![2, 2]), 2),
        "balance [2,2] sums to 4 but must sum to 5, the network's stage count"
    );
    assert_eq!(
        error(&spec, Balance::Explicit(vec![3, 0, 2]), 3),
        "balance [3,0,2] gives pipeline stage 1 no network stages; every count must be at least 1"
    );
    let micro = plan_stages(&spec, &Balance::Size, 2, 0, Device::Cpu).unwrap_err().to_string();
    assert_eq!(micro, "balance size needs a micro-batch of at least 1 sample, got 0");
    // check_balance says the same without a network.
    assert_eq!(
        check_balance(5, &Balance::Explicit(vec![2, 2]), 2).unwrap_err().to_string(),
        "balance [2,2] sums to 4 but must sum to 5, the network's stage count"
    );
}

#[test]
fn predicted_imbalance_is_the_largest_cost_over_the_mean_minus_one() {
    let plan =
        StagePlan { balance: Balance::Uniform, ranges: vec![0..1, 1..2], costs: vec![1.0, 3.0], unit: "x".into() };
    assert_eq!(plan.predicted_imbalance(), 0.5);
    let idle = StagePlan { costs: vec![0.0, 0.0], ..plan };
    assert_eq!(idle.predicted_imbalance(), 0.0);
}
