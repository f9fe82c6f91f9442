//! The straggler axis in the plan: which cells it slows, their ids, and its errors.

use std::path::Path;

use super::plan;
use crate::suite_file::SuiteFile;
use crate::trial::TrialSpec;

fn planned(text: &str) -> Vec<TrialSpec> {
    plan(&SuiteFile::parse(text).unwrap(), Path::new("test.yaml")).unwrap()
}

#[test]
fn stragglers_slow_multi_worker_cells_that_have_their_ranks_and_keep_the_ids_without() {
    let trials = planned(
        "name: t
networks: [small-cnn]
datasets: [mnist:synthetic]
strategies: [single, {name: data-parallel, workers: [2, 4]}]
budget: {steps: 1}
straggler: [none, {ranks: [1], slowdown: 2.0}, {ranks: [3], slowdown: 1.5, jitter: 0.2}]
",
    );
    let ids: Vec<&str> = trials.iter().map(|t| t.trial_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "small-cnn__mnist-synthetic__single__w1__b128__r0",
            "small-cnn__mnist-synthetic__data-parallel__w2__b128__r0",
            "small-cnn__mnist-synthetic__data-parallel__w2__b128__strag-r1-x2__r0",
            "small-cnn__mnist-synthetic__data-parallel__w4__b128__r0",
            "small-cnn__mnist-synthetic__data-parallel__w4__b128__strag-r1-x2__r0",
            "small-cnn__mnist-synthetic__data-parallel__w4__b128__strag-r3-x1.5-j0.2__r0",
        ]
    );
    assert_eq!(trials[2].train.straggler.as_ref().map(|s| s.ranks.clone()), Some(vec![1]));
    assert!(trials[2].label().ends_with("· straggler rank 1 ×2"), "{}", trials[2].label());
    assert_eq!(trials[2].cell_key().baseline(), trials[0].cell_key(), "speedups divide by single without one");
    assert_eq!(trials[2].cell_key().without_straggler(), trials[1].cell_key());
    for (axis, says) in [
        ("straggler: []\n", "straggler: empty axis"),
        ("straggler: [{ranks: [2], slowdown: 2}]\n", "straggler[0].ranks: straggler rank 2 is not among the 2 ranks"),
        ("straggler: [{ranks: [1], slowdown: 0.9}]\n", "slowdown 0.9 must be at least 1"),
        ("straggler: [slow]\n", "give `none` or a map"),
    ] {
        let text = format!(
            "name: t\nnetworks: [small-cnn]\ndatasets: [mnist:synthetic]\nbudget: {{steps: 1}}\n\
             strategies: [{{name: data-parallel, workers: [2]}}]\n{axis}"
        );
        let error = match SuiteFile::parse(&text) {
            Ok(suite) => plan(&suite, Path::new("s.yaml")).unwrap_err().to_string(),
            Err(error) => error.to_string(),
        };
        assert!(error.contains(says), "{axis}: {error}");
    }
}
