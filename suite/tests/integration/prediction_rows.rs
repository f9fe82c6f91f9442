//! The prediction rows of shipped suites on shipped cluster files, held as snapshots
//! (`snapshots/integration__prediction_rows__*.snap`), one JSON line per row with every
//! float as serde writes it (the shortest text that reads back to the same bits). A
//! cluster's devices have datasheet speeds, so no profile is measured and the rows follow
//! from the plan and the model alone: a change that moves any prediction by one bit, or
//! a refactor of how trials reach the model, shows here.

use std::path::Path;

use stratlab::plan::plan;
use stratlab::predictions::{predict_cells, Placement};
use stratlab::profiles::{ProfileCache, ReusePolicy};
use stratlab::suite_file::SuiteFile;
use stratlab_perf_model::cluster::Cluster;

fn rows_of(suite: &str, cluster: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let suite_path = root.join("suite").join(suite);
    let (suite_file, _) = SuiteFile::load(&suite_path).unwrap();
    let trials = plan(&suite_file, &suite_path).unwrap();
    let cluster = Cluster::load(&root.join("examples/clusters").join(cluster)).unwrap();
    let mut cache = ProfileCache::open(None, ReusePolicy::default()).unwrap();
    let rows = predict_cells(&trials, &Placement::Cluster(&cluster), &mut cache, "golden", &mut |_| {}).unwrap();
    assert_eq!(rows.len(), trials.iter().filter(|trial| trial.repeat == 0).count());
    assert!(rows.iter().any(|row| row.step_s.is_some()), "{suite} on {cluster:?}: nothing predicted");
    rows.iter().map(|row| serde_json::to_string(row).unwrap()).collect::<Vec<_>>().join("\n")
}

#[test]
fn shipped_suites_on_shipped_clusters_predict_the_rows_they_always_have() {
    for (suite, cluster, name) in [
        ("scaling-predicted.yaml", "sixteen-nodes-4-h100-100gbit.yaml", "scaling_predicted_on_sixteen_nodes"),
        ("scaling-predicted.yaml", "one-server-8-p40-pcie.yaml", "scaling_predicted_on_eight_p40"),
        ("pipeline-study.yaml", "one-node-4-small-gpu.yaml", "pipeline_study_on_four_small_gpus"),
        ("zero-memory.yaml", "one-node-4-h100.yaml", "zero_memory_on_four_h100"),
        ("default.yaml", "two-dgx1-v100-4x100gbit-ib.yaml", "default_on_two_dgx1"),
    ] {
        insta::assert_snapshot!(name, rows_of(suite, cluster));
    }
}
