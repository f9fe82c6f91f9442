//! The Parquet schema of every table is derived from its row type, and it is the schema the
//! previous release wrote by hand (`tests/data/previous_release_schemas.txt`): stored runs
//! and the readers of their files see the same columns and dtypes as before the rows were
//! typed.

use std::collections::BTreeMap;

use polars::prelude::Schema;
use stratlab_results::{
    AutoChoiceRow, BatchProbeRow, EpochRow, EvaluationRow, EventRow, GradientUpdateRow, PipelineStageRow,
    PredictedPassRow, PredictionRow, ProbeRow, ProfileRow, RankBreakdownRow, StepRow, Table, TelemetryRow,
    TrialNodeRow, TrialRow, ValidationRow,
};

/// `[RowType]` then one `column: Dtype` line per column, in order.
fn previous_release() -> BTreeMap<String, Vec<String>> {
    let text = include_str!("../data/previous_release_schemas.txt");
    let mut tables: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current = None;
    for line in text.lines().map(str::trim).filter(|line| !line.is_empty() && !line.starts_with('#')) {
        match line.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')) {
            Some(name) => current = Some(name.to_owned()),
            None => tables.entry(current.clone().expect("a [table] first")).or_default().push(line.to_owned()),
        }
    }
    tables
}

/// The schema as `column: Dtype` lines in the file's spelling (`List(UInt64)`).
fn lines(schema: &Schema) -> Vec<String> {
    schema
        .iter()
        .map(|(name, dtype)| {
            let dtype = match dtype {
                polars::prelude::DataType::List(item) => format!("List({item:?})"),
                other => format!("{other:?}"),
            };
            format!("{name}: {dtype}")
        })
        .collect()
}

#[test]
fn every_derived_schema_is_the_one_the_previous_release_wrote() {
    let expected = previous_release();
    let derived: BTreeMap<&str, Vec<String>> = [
        ("AutoChoiceRow", lines(&AutoChoiceRow::schema())),
        ("BatchProbeRow", lines(&BatchProbeRow::schema())),
        ("EpochRow", lines(&EpochRow::schema())),
        ("EvaluationRow", lines(&EvaluationRow::schema())),
        ("EventRow", lines(&EventRow::schema())),
        ("GradientUpdateRow", lines(&GradientUpdateRow::schema())),
        ("PipelineStageRow", lines(&PipelineStageRow::schema())),
        ("PredictedPassRow", lines(&PredictedPassRow::schema())),
        ("PredictionRow", lines(&PredictionRow::schema())),
        ("ProbeRow", lines(&ProbeRow::schema())),
        ("ProfileRow", lines(&ProfileRow::schema())),
        ("RankBreakdownRow", lines(&RankBreakdownRow::schema())),
        ("StepRow", lines(&StepRow::schema())),
        ("TelemetryRow", lines(&TelemetryRow::schema())),
        ("TrialNodeRow", lines(&TrialNodeRow::schema())),
        ("TrialRow", lines(&TrialRow::schema())),
        ("ValidationRow", lines(&ValidationRow::schema())),
    ]
    .into_iter()
    .collect();
    for (table, columns) in &derived {
        assert_eq!(columns, &expected[*table], "{table}");
    }
    // The history table's row lives in stratlab-regressions, which checks it against the same file.
    let checked: std::collections::BTreeSet<&str> = derived.keys().copied().chain(["HistoryRow"]).collect();
    assert_eq!(checked, expected.keys().map(String::as_str).collect());
}
