//! A straggler: named ranks whose compute is slowed by a factor, for every strategy (a
//! suite axis, `straggler: [none, {ranks: [1], slowdown: 2.0}]`). A slowed rank waits
//! `(slowdown − 1) ×` each forward's and backward's own compute time after it, so compute,
//! the wait and communication stay apart in its events; `jitter` draws each step's factor
//! around the slowdown from the trial's seed.

use std::fmt;

use serde::{Deserialize, Serialize};
use stratlab_columns::Columns;

use crate::{ColumnsError, Infeasible, SweepError};

/// Named ranks slowed by a factor. Its numbers are finite ([`Straggler::check`]), so it
/// compares and hashes by their bits and can key a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Straggler {
    /// The slowed ranks (0-based, each at most once).
    pub ranks: Vec<u32>,
    /// How many times longer their compute takes: at least 1.
    pub slowdown: f64,
    /// Each step's factor is drawn uniformly from `slowdown × (1 ± jitter)` (never below
    /// 1); 0, the default, slows every step alike.
    #[serde(default)]
    pub jitter: f64,
}

impl Eq for Straggler {}

impl std::hash::Hash for Straggler {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (&self.ranks, self.slowdown.to_bits(), self.jitter.to_bits()).hash(state);
    }
}

impl PartialOrd for Straggler {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// By ranks, then the milder slowdown first, then less jitter.
impl Ord for Straggler {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.ranks
            .cmp(&other.ranks)
            .then(self.slowdown.total_cmp(&other.slowdown))
            .then(self.jitter.total_cmp(&other.jitter))
    }
}

impl Straggler {
    /// The rules a suite's entry must keep: some ranks, each once, a slowdown of at least 1
    /// and a jitter in [0, 1), all finite.
    pub fn check(&self) -> Result<(), SweepError> {
        let error = |message: String| Err(SweepError { field: "straggler", message });
        if self.ranks.is_empty() {
            return error("name the slowed ranks, e.g. {ranks: [1], slowdown: 2.0}".into());
        }
        let mut ranks = self.ranks.clone();
        ranks.sort_unstable();
        ranks.dedup();
        if ranks.len() != self.ranks.len() {
            return error(format!("ranks {:?} name a rank twice", self.ranks));
        }
        if !(self.slowdown.is_finite() && self.slowdown >= 1.0) {
            return error(format!("slowdown {} must be at least 1 (2.0: compute takes twice as long)", self.slowdown));
        }
        if !(self.jitter.is_finite() && (0.0..1.0).contains(&self.jitter)) {
            return error(format!(
                "jitter {} must lie in [0, 1): a step's factor is slowdown × (1 ± jitter)",
                self.jitter
            ));
        }
        Ok(())
    }

    /// Whether a trial of `workers` ranks has every slowed rank.
    pub fn fits(&self, workers: usize) -> Result<(), Infeasible> {
        match self.ranks.iter().find(|&&rank| rank as usize >= workers) {
            Some(rank) => Err(Infeasible(format!("straggler rank {rank} is not among the {workers} ranks"))),
            None => Ok(()),
        }
    }

    /// Whether it slows rank `rank`.
    pub fn slows(&self, rank: usize) -> bool {
        self.ranks.contains(&(rank as u32))
    }

    /// The factor rank `rank`'s compute is slowed by, `None` for a rank at full speed;
    /// `draw` is a uniform draw in [−1, 1] for this step (used only with jitter).
    pub fn factor(&self, rank: usize, draw: impl FnOnce() -> f64) -> Option<f64> {
        if !self.slows(rank) {
            return None;
        }
        let factor = match self.jitter > 0.0 {
            true => self.slowdown * (1.0 + self.jitter * draw()),
            false => self.slowdown,
        };
        Some(factor.max(1.0))
    }

    /// Its fragment of a trial id (a file name: no brackets, commas or dots kept ambiguous):
    /// `__strag-r1-x2`, `__strag-r1-3-x1.5-j0.2`.
    pub fn id_part(&self) -> String {
        let ranks: Vec<String> = self.ranks.iter().map(u32::to_string).collect();
        let jitter = if self.jitter > 0.0 { format!("-j{}", self.jitter) } else { String::new() };
        format!("__strag-r{}-x{}{jitter}", ranks.join("-"), self.slowdown)
    }
}

/// How labels name it: `rank 1 ×2`, `ranks 1, 3 ×1.5 ±20 %`.
impl fmt::Display for Straggler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ranks: Vec<String> = self.ranks.iter().map(u32::to_string).collect();
        let noun = if self.ranks.len() == 1 { "rank" } else { "ranks" };
        write!(f, "{noun} {} ×{}", ranks.join(", "), self.slowdown)?;
        if self.jitter > 0.0 {
            write!(f, " ±{} %", self.jitter * 100.0)?;
        }
        Ok(())
    }
}

/// One entry of a suite's `straggler` axis: `none`, or a [`Straggler`] map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "StragglerEntryText", into = "StragglerEntryText")]
pub struct StragglerEntry(pub Option<Straggler>);

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum StragglerEntryText {
    Name(String),
    Slowed(Straggler),
}

impl TryFrom<StragglerEntryText> for StragglerEntry {
    type Error = SweepError;

    fn try_from(text: StragglerEntryText) -> Result<Self, Self::Error> {
        match text {
            StragglerEntryText::Name(name) if name == "none" => Ok(StragglerEntry(None)),
            StragglerEntryText::Name(name) => Err(SweepError {
                field: "straggler",
                message: format!("`{name}`: give `none` or a map such as {{ranks: [1], slowdown: 2.0, jitter: 0.2}}"),
            }),
            StragglerEntryText::Slowed(straggler) => straggler.check().map(|()| StragglerEntry(Some(straggler))),
        }
    }
}

impl From<StragglerEntry> for StragglerEntryText {
    fn from(entry: StragglerEntry) -> Self {
        match entry.0 {
            None => StragglerEntryText::Name("none".into()),
            Some(straggler) => StragglerEntryText::Slowed(straggler),
        }
    }
}

/// A trial's straggler as the `trials` table stores it, flattened into the row: null
/// columns for a trial without one (and for runs stored before the axis).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Columns)]
pub struct StragglerColumns {
    /// The slowed ranks.
    #[serde(default)]
    pub straggler_ranks: Option<Vec<i64>>,
    /// Their slowdown factor.
    #[serde(default)]
    pub straggler_slowdown: Option<f64>,
    /// The per-step jitter of the factor.
    #[serde(default)]
    pub straggler_jitter: Option<f64>,
}

impl From<Option<&Straggler>> for StragglerColumns {
    fn from(straggler: Option<&Straggler>) -> Self {
        match straggler {
            None => StragglerColumns::default(),
            Some(straggler) => StragglerColumns {
                straggler_ranks: Some(straggler.ranks.iter().map(|&rank| rank as i64).collect()),
                straggler_slowdown: Some(straggler.slowdown),
                straggler_jitter: Some(straggler.jitter),
            },
        }
    }
}

impl StragglerColumns {
    /// The straggler the columns of trial `trial_id` store, or what is wrong with them (a
    /// rank that is not a rank, a partial set, numbers outside the rules): a corrupt or
    /// foreign table.
    pub fn straggler(&self, trial_id: &str) -> Result<Option<Straggler>, ColumnsError> {
        let error = |message: String| ColumnsError { trial_id: trial_id.to_owned(), message };
        match (&self.straggler_ranks, self.straggler_slowdown, self.straggler_jitter) {
            (None, None, None) => Ok(None),
            (Some(ranks), Some(slowdown), jitter) => {
                let ranks = ranks
                    .iter()
                    .map(|&rank| u32::try_from(rank).map_err(|_| error(format!("straggler rank {rank} is not a rank"))))
                    .collect::<Result<Vec<u32>, ColumnsError>>()?;
                let straggler = Straggler { ranks, slowdown, jitter: jitter.unwrap_or(0.0) };
                straggler.check().map_err(|wrong| error(wrong.to_string()))?;
                Ok(Some(straggler))
            }
            _ => Err(error(
                "straggler columns are partly null: straggler_ranks and straggler_slowdown go together".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(yaml: &str) -> Result<Vec<StragglerEntry>, serde_saphyr::Error> {
        serde_saphyr::from_str(yaml)
    }

    #[test]
    fn an_axis_reads_none_and_maps_and_names_them_in_ids_and_labels() {
        let axis = entries("[none, {ranks: [1], slowdown: 2.0}, {ranks: [1, 3], slowdown: 1.5, jitter: 0.2}]").unwrap();
        assert_eq!(axis[0], StragglerEntry(None));
        let (two, jittered) = (axis[1].0.clone().unwrap(), axis[2].0.clone().unwrap());
        assert_eq!(two.id_part(), "__strag-r1-x2");
        assert_eq!(two.to_string(), "rank 1 ×2");
        assert_eq!(jittered.id_part(), "__strag-r1-3-x1.5-j0.2");
        assert_eq!(jittered.to_string(), "ranks 1, 3 ×1.5 ±20 %");
        assert!(two < jittered);
    }

    #[test]
    fn bad_entries_name_the_field_and_the_rule() {
        for (yaml, says) in [
            ("[slow]", "give `none` or a map"),
            ("[{ranks: [1], slowdown: 0.5}]", "at least 1"),
            ("[{ranks: [], slowdown: 2}]", "name the slowed ranks"),
            ("[{ranks: [1, 1], slowdown: 2}]", "twice"),
            ("[{ranks: [1], slowdown: 2, jitter: 1.5}]", "[0, 1)"),
        ] {
            let error = entries(yaml).unwrap_err().to_string();
            assert!(error.contains(says), "{yaml}: {error}");
        }
        let error = entries("[{ranks: [1], slowdown: 2, speed: 3}]").unwrap_err().to_string();
        assert!(error.contains("speed"), "{error}");
    }

    #[test]
    fn only_the_named_ranks_are_slowed_and_jitter_stays_in_its_band() {
        let straggler = Straggler { ranks: vec![1], slowdown: 2.0, jitter: 0.25 };
        assert_eq!(straggler.factor(0, || 1.0), None);
        assert_eq!(straggler.factor(1, || 1.0), Some(2.5));
        assert_eq!(straggler.factor(1, || -1.0), Some(1.5));
        let mild = Straggler { ranks: vec![0], slowdown: 1.0, jitter: 0.5 };
        assert_eq!(mild.factor(0, || -1.0), Some(1.0), "never faster than full speed");
        assert!(straggler.fits(2).is_ok());
        assert!(straggler.fits(1).unwrap_err().0.contains("rank 1"));
    }

    #[test]
    fn columns_round_trip_and_refuse_a_partial_set() {
        let straggler = Straggler { ranks: vec![0, 2], slowdown: 3.0, jitter: 0.1 };
        let columns = StragglerColumns::from(Some(&straggler));
        assert_eq!(columns.straggler("t0"), Ok(Some(straggler)));
        assert_eq!(StragglerColumns::default().straggler("t0"), Ok(None));
        let partial = StragglerColumns { straggler_slowdown: Some(2.0), ..StragglerColumns::default() };
        let error = partial.straggler("t3").unwrap_err().to_string();
        assert!(error.starts_with("trial t3: straggler columns are partly null"), "{error}");
    }
}
