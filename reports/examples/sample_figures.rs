//! Renders every figure kind from the hand-made test inputs, to look at them:
//! `cargo run --release -p stratlab-reports --example sample_figures -- <out-dir>`.

#[path = "../tests/integration/common/mod.rs"]
mod common;

use stratlab_reports::*;

fn main() -> Result<(), ReportError> {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "sample-figures".into());
    let target = |stem: &str| FigureTarget::new(&dir, stem);
    let mut written = Vec::new();
    written.extend(speedup_bars(&common::speedup_bars_input(), &target("speedup_bars"))?);
    written.extend(speedup_scaling(&common::scaling_input(), &target("speedup_scaling"))?);
    written.extend(throughput(&common::throughput_input(), &target("throughput"))?);
    written.extend(device_usage(&common::device_usage_input(), &target("device_usage"))?);
    written.extend(time_to_accuracy(&common::time_to_accuracy_input(), &target("time_to_accuracy"))?);
    written.extend(loss_curves(&common::loss_curves_input(), &target("loss_curves"))?);
    written.extend(pipeline_timeline(&common::gpipe_timeline(), &target("pipeline_timeline"))?);
    written.extend(pipeline_timeline(&common::recompute_timeline(), &target("pipeline_timeline_recompute"))?);
    written.extend(pipeline_bubble(&common::pipeline_bubble_input(), &target("pipeline_bubble"))?);
    written.extend(step_breakdown(&common::step_breakdown_input(), &target("step_breakdown"))?);
    for path in written {
        println!("{}", path.display());
    }
    Ok(())
}
