//! The source papers' figures and tables a suite regenerates, by the papers' own numbering:
//! a suite file's typed `regenerates:` block, copied with the suite into every run, which
//! the report reads to draw each of them in its paper's shape. Runs of suites without the
//! block, and runs made before it existed, regenerate nothing.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One figure or table of a source paper (`shared/seeds/`), as the paper numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum PaperFigure {
    /// Thesis fig. 3.1: speedup over one device at the suite's worker count, a panel per
    /// strategy, bars per network grouped by data set, out-of-memory cells marked.
    ThesisSpeedupPanels,
    /// Thesis fig. 3.2: speedup against nodes (against workers within one node).
    ThesisScaling,
    /// Thesis fig. 4.1: the sequential predictor's signed error per network × data set.
    ThesisSequentialError,
    /// Thesis fig. 5.1: data parallelism's (Horovod's) signed error per network × data set.
    ThesisDataParallelError,
    /// Thesis fig. 6.2: GPipe's signed error per network × data set.
    ThesisGpipeError,
    /// Thesis table 6.1: GPipe configurations (micro-batch size × count), seconds per epoch
    /// and eq. 6.1's factor.
    ThesisGpipeConfigurations,
    /// Thesis table 8.1: per network × data set the recommended and the measured fastest
    /// strategy and their relative difference.
    ThesisRecommendations,
    /// Thesis table 8.2: per network × data set whether the recommendation was right, with
    /// the share per data set and overall.
    ThesisRecommendationScores,
    /// Seed 000 fig. 5: final test accuracy against batch size.
    Seed000AccuracyAgainstBatch,
    /// Seed 000 fig. 6: total training time against batch size.
    Seed000TimeAgainstBatch,
    /// Seed 000 figs. 7–10: time per epoch, mean and peak utilisation, memory and
    /// throughput per strategy.
    Seed000PerStrategy,
    /// Seed 000 fig. 11: evaluation throughput over the run.
    Seed000EvaluationThroughput,
    /// Seed 000 fig. 14: validation loss per epoch.
    Seed000ValidationLoss,
    /// Seed 002's images per epoch on 1 and 2 devices against ideal scaling, with its
    /// percentage of scaling.
    Seed002Scaling,
    /// Seed 002's power comparison: energy per trial and per sample.
    Seed002Energy,
    /// Seed 004 table 2: loss and training time per device count × balance at 16
    /// micro-batches.
    Seed004Table2,
    /// Seed 004 table 3: loss and training time per device count × balance at 8
    /// micro-batches and at 1 (pure model parallelism).
    Seed004Table3,
}

impl PaperFigure {
    /// Every figure, in the papers' order.
    pub const ALL: [PaperFigure; 17] = [
        PaperFigure::ThesisSpeedupPanels,
        PaperFigure::ThesisScaling,
        PaperFigure::ThesisSequentialError,
        PaperFigure::ThesisDataParallelError,
        PaperFigure::ThesisGpipeError,
        PaperFigure::ThesisGpipeConfigurations,
        PaperFigure::ThesisRecommendations,
        PaperFigure::ThesisRecommendationScores,
        PaperFigure::Seed000AccuracyAgainstBatch,
        PaperFigure::Seed000TimeAgainstBatch,
        PaperFigure::Seed000PerStrategy,
        PaperFigure::Seed000EvaluationThroughput,
        PaperFigure::Seed000ValidationLoss,
        PaperFigure::Seed002Scaling,
        PaperFigure::Seed002Energy,
        PaperFigure::Seed004Table2,
        PaperFigure::Seed004Table3,
    ];

    /// The name a suite file gives it (`thesis-fig-3.1`).
    pub fn name(self) -> &'static str {
        match self {
            PaperFigure::ThesisSpeedupPanels => "thesis-fig-3.1",
            PaperFigure::ThesisScaling => "thesis-fig-3.2",
            PaperFigure::ThesisSequentialError => "thesis-fig-4.1",
            PaperFigure::ThesisDataParallelError => "thesis-fig-5.1",
            PaperFigure::ThesisGpipeError => "thesis-fig-6.2",
            PaperFigure::ThesisGpipeConfigurations => "thesis-table-6.1",
            PaperFigure::ThesisRecommendations => "thesis-table-8.1",
            PaperFigure::ThesisRecommendationScores => "thesis-table-8.2",
            PaperFigure::Seed000AccuracyAgainstBatch => "seed000-fig-5",
            PaperFigure::Seed000TimeAgainstBatch => "seed000-fig-6",
            PaperFigure::Seed000PerStrategy => "seed000-figs-7-10",
            PaperFigure::Seed000EvaluationThroughput => "seed000-fig-11",
            PaperFigure::Seed000ValidationLoss => "seed000-fig-14",
            PaperFigure::Seed002Scaling => "seed002-scaling",
            PaperFigure::Seed002Energy => "seed002-power",
            PaperFigure::Seed004Table2 => "seed004-table-2",
            PaperFigure::Seed004Table3 => "seed004-table-3",
        }
    }

    /// How the report heads it: the paper's number and what it shows.
    pub fn title(self) -> &'static str {
        match self {
            PaperFigure::ThesisSpeedupPanels => "Thesis fig. 3.1: speedup over one device, a panel per strategy",
            PaperFigure::ThesisScaling => "Thesis fig. 3.2: speedup against the number of devices",
            PaperFigure::ThesisSequentialError => "Thesis fig. 4.1: the sequential prediction's signed error",
            PaperFigure::ThesisDataParallelError => "Thesis fig. 5.1: data parallelism's signed prediction error",
            PaperFigure::ThesisGpipeError => "Thesis fig. 6.2: GPipe's signed prediction error",
            PaperFigure::ThesisGpipeConfigurations => "Thesis table 6.1: GPipe configurations",
            PaperFigure::ThesisRecommendations => "Thesis table 8.1: recommended against measured fastest",
            PaperFigure::ThesisRecommendationScores => "Thesis table 8.2: was the recommendation right",
            PaperFigure::Seed000AccuracyAgainstBatch => "Seed 000 fig. 5: final accuracy against batch size",
            PaperFigure::Seed000TimeAgainstBatch => "Seed 000 fig. 6: training time against batch size",
            PaperFigure::Seed000PerStrategy => {
                "Seed 000 figs. 7–10: epoch time, utilisation, memory and throughput per strategy"
            }
            PaperFigure::Seed000EvaluationThroughput => "Seed 000 fig. 11: evaluation throughput over the run",
            PaperFigure::Seed000ValidationLoss => "Seed 000 fig. 14: validation loss per epoch",
            PaperFigure::Seed002Scaling => "Seed 002: images per epoch on 1 and 2 devices, and scaling",
            PaperFigure::Seed002Energy => "Seed 002: energy per trial and per sample",
            PaperFigure::Seed004Table2 => "Seed 004 table 2: pipelines at 16 micro-batches",
            PaperFigure::Seed004Table3 => "Seed 004 table 3: pipelines at 8 micro-batches and at 1",
        }
    }

    /// Whether it judges the predictions a run makes before training (a run with
    /// `--no-predict` cannot give it).
    pub fn needs_predictions(self) -> bool {
        matches!(
            self,
            PaperFigure::ThesisSequentialError
                | PaperFigure::ThesisDataParallelError
                | PaperFigure::ThesisGpipeError
                | PaperFigure::ThesisRecommendations
                | PaperFigure::ThesisRecommendationScores
        )
    }

    /// The report's anchor for it (`paper-thesis-fig-3-1`).
    pub fn anchor(self) -> String {
        format!("paper-{}", self.name().replace('.', "-"))
    }
}

impl fmt::Display for PaperFigure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no paper figure the lab regenerates.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown paper figure `{name}`; valid: {}", PaperFigure::ALL.map(PaperFigure::name).join(", "))]
pub struct UnknownPaperFigure {
    /// The name given.
    pub name: String,
}

impl TryFrom<String> for PaperFigure {
    type Error = UnknownPaperFigure;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        PaperFigure::ALL.into_iter().find(|figure| figure.name() == name).ok_or(UnknownPaperFigure { name })
    }
}

impl From<PaperFigure> for String {
    fn from(figure: PaperFigure) -> String {
        figure.name().to_owned()
    }
}

/// What a suite regenerates of a paper, and how faithfully.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Regenerates {
    /// The paper (`thesis (seed 003), chapter 3`).
    pub source: String,
    /// The figures and tables, by the paper's numbering.
    pub figures: Vec<PaperFigure>,
    /// The source's settings the suite keeps.
    #[serde(default)]
    pub keeps: Vec<String>,
    /// The settings it changes, each with why.
    #[serde(default)]
    pub changes: Vec<String>,
    /// Minutes the suite is expected to take.
    pub expected_minutes: ExpectedMinutes,
}

/// Expected wall minutes of a whole suite.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedMinutes {
    /// On one GPU node of the kind the paper used.
    pub gpu_node: f64,
    /// On this project's 2-core CPU machine.
    pub here: f64,
}

/// The `regenerates:` block of a suite file's text, if it has one; every other field is the
/// suite's own and is left to the suite crate.
pub fn regenerated_by(suite_yaml: &str) -> Result<Option<Regenerates>, serde_saphyr::Error> {
    #[derive(Deserialize)]
    struct SuiteRegenerates {
        #[serde(default)]
        regenerates: Option<Regenerates>,
    }
    if suite_yaml.trim().is_empty() {
        return Ok(None);
    }
    Ok(serde_saphyr::from_str::<SuiteRegenerates>(suite_yaml)?.regenerates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_an_unknown_one_lists_the_valid_names() {
        for figure in PaperFigure::ALL {
            assert_eq!(PaperFigure::try_from(figure.name().to_owned()), Ok(figure));
            assert!(!figure.anchor().contains('.'), "{}", figure.anchor());
        }
        let error = PaperFigure::try_from("thesis-fig-9.9".to_owned()).unwrap_err().to_string();
        assert!(error.contains("thesis-fig-9.9") && error.contains("thesis-table-6.1"), "{error}");
    }

    #[test]
    fn a_suite_names_what_it_regenerates_and_older_suites_nothing() {
        let suite = "name: x\nnetworks: [small-cnn]\nregenerates:\n  source: thesis\n  figures: [thesis-fig-3.1, seed004-table-2]\n  expected_minutes: {gpu_node: 60, here: 3}\n";
        let regenerates = regenerated_by(suite).unwrap().unwrap();
        assert_eq!(regenerates.figures, [PaperFigure::ThesisSpeedupPanels, PaperFigure::Seed004Table2]);
        assert_eq!(regenerates.expected_minutes.here, 3.0);
        assert_eq!(regenerated_by("name: x\nnetworks: [small-cnn]\n").unwrap(), None);
        assert_eq!(regenerated_by("").unwrap(), None);
        assert!(regenerated_by(
            "regenerates:\n  source: t\n  figures: [nope]\n  expected_minutes: {gpu_node: 1, here: 1}\n"
        )
        .unwrap_err()
        .to_string()
        .contains("nope"));
    }
}
