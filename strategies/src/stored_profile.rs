//! A [`NetworkProfile`] as the store keeps it (`stratlab_results::ProfileStore`): one
//! `ProfileRow` per stage and sample count, and back. Whoever stores a profile names in
//! its key everything it must match to be reused.

use std::collections::BTreeMap;

use stratlab_profile::Contention;
use stratlab_results::ProfileRow;

use stratlab_profile::{value_at, NetworkProfile, StageProfile};

/// What a stored profile is, beside its measurements.
pub struct ProfileLabel<'a> {
    /// Everything it must match to be reused, as one string.
    pub key: &'a str,
    /// The network's name.
    pub network: &'a str,
    /// The data set its input shape came from.
    pub dataset: &'a str,
    /// The device (`cpu`).
    pub device: &'a str,
    /// libtorch threads.
    pub threads: usize,
    /// When it was taken (RFC 3339).
    pub taken_at: &'a str,
    /// Seconds it took.
    pub profile_s: f64,
    /// Seconds of the runner's reference work timed just before it (the machine's speed
    /// then), where timed.
    pub speed_reference_s: Option<f64>,
}

/// The rows of `profile`: every stage at every sample count its stages or its whole
/// training steps were measured at (the stage's timings null where only the steps were);
/// the contention and the training steps ride on the first stage's rows.
pub fn profile_rows(profile: &NetworkProfile, label: &ProfileLabel<'_>) -> Vec<ProfileRow> {
    let contention = |samples: usize| {
        let contention = profile.contention.as_ref()?;
        Some((contention.copies as u32, value_at(&contention.ratio, samples)?))
    };
    let mut rows = Vec::new();
    for (index, stage) in profile.stages.iter().enumerate() {
        let mut sizes: Vec<usize> =
            stage.forward_s.iter().chain(&profile.training_step_s).map(|&(samples, _)| samples).collect();
        sizes.sort_unstable();
        sizes.dedup();
        for samples in sizes {
            let first = |points: &[(usize, f64)]| value_at(points, samples).filter(|_| index == 0);
            let measured_contention = contention(samples).filter(|_| index == 0);
            rows.push(ProfileRow {
                profile_key: label.key.to_owned(),
                network: label.network.to_owned(),
                dataset: label.dataset.to_owned(),
                device: label.device.to_owned(),
                threads: label.threads as u32,
                stage: index as u32,
                stage_name: stage.name.clone(),
                samples: samples as u64,
                forward_s: value_at(&stage.forward_s, samples),
                backward_s: value_at(&stage.backward_s, samples),
                kept_bytes: value_at(&stage.kept_bytes, samples),
                transient_bytes: value_at(&stage.transient_bytes, samples),
                output_bytes_per_sample: stage.output_bytes_per_sample,
                parameter_bytes: stage.parameter_bytes.clone(),
                optimizer_s: profile.optimizer_s,
                whole_model_copy_s: Some(profile.whole_model_copy_s),
                contention_copies: measured_contention.map(|(copies, _)| copies),
                contention_ratio: measured_contention.map(|(_, ratio)| ratio),
                training_step_s: first(&profile.training_step_s),
                training_step_peak_bytes: first(&profile.training_step_peak_bytes),
                taken_at: label.taken_at.to_owned(),
                profile_s: label.profile_s,
                speed_reference_s: label.speed_reference_s,
                input_backward_s: value_at(&stage.input_backward_s, samples),
                weight_backward_s: value_at(&stage.weight_backward_s, samples),
            });
        }
    }
    rows
}

/// What a stored profile must hold to serve: every stage at every one of `sizes`; where
/// `contention` names copies and sample counts, the contention of that many copies at each
/// of them; training steps at each of `training_steps`; and where `split_backward`, every
/// stage's backward halves at each of `sizes`.
#[derive(Debug, Clone, Copy)]
pub struct ProfileNeeds<'a> {
    /// Sample counts every stage must have been timed at.
    pub sizes: &'a [usize],
    /// Copies and the sample counts their contention must have been measured at.
    pub contention: Option<(usize, &'a [usize])>,
    /// Batches whole training steps must have been timed at.
    pub training_steps: &'a [usize],
    /// Whether the stages' split backwards must have been timed (a zero-bubble cell).
    pub split_backward: bool,
}

/// The latest profile stored under `key` that has all `needs` asks; `None` when no stored
/// profile has.
pub fn stored_profile(rows: &[ProfileRow], key: &str, needs: &ProfileNeeds<'_>) -> Option<(NetworkProfile, String)> {
    let ProfileNeeds { sizes, contention, training_steps, split_backward } = *needs;
    // Profiles under one key, by when they were taken.
    let mut taken: BTreeMap<&str, Vec<&ProfileRow>> = BTreeMap::new();
    for row in rows.iter().filter(|row| row.profile_key == key) {
        taken.entry(&row.taken_at).or_default().push(row);
    }
    taken.into_iter().rev().find_map(|(taken_at, rows)| {
        let profile = rebuild(&rows)?;
        let has_sizes = profile.stages.iter().all(|stage| {
            let timed = |points: &[(usize, f64)]| sizes.iter().all(|&samples| value_at(points, samples).is_some());
            timed(&stage.forward_s) && (!split_backward || timed(&stage.input_backward_s))
        });
        let has_contention = match contention {
            None => true,
            Some((copies, at)) => profile.contention.as_ref().is_some_and(|measured| {
                measured.copies == copies && at.iter().all(|&samples| value_at(&measured.ratio, samples).is_some())
            }),
        };
        let has_training_steps =
            training_steps.iter().all(|&samples| value_at(&profile.training_step_s, samples).is_some());
        (has_sizes && has_contention && has_training_steps).then(|| (profile, taken_at.to_owned()))
    })
}

/// One profile from its rows; `None` when they do not make one (a stage missing).
fn rebuild(rows: &[&ProfileRow]) -> Option<NetworkProfile> {
    let stages = rows.iter().map(|row| row.stage as usize).max()? + 1;
    let mut profiles: Vec<Option<StageProfile>> = vec![None; stages];
    let mut ratio = Vec::new();
    let mut copies = None;
    let (mut training_step_s, mut training_step_peak_bytes) = (Vec::new(), Vec::new());
    for row in rows {
        if let Some(seconds) = row.training_step_s {
            training_step_s.push((row.samples as usize, seconds));
        }
        if let Some(bytes) = row.training_step_peak_bytes {
            training_step_peak_bytes.push((row.samples as usize, bytes));
        }
        if let (Some(row_copies), Some(row_ratio)) = (row.contention_copies, row.contention_ratio) {
            copies = Some(row_copies as usize);
            ratio.push((row.samples as usize, row_ratio));
        }
        let stage = profiles[row.stage as usize].get_or_insert_with(|| StageProfile {
            name: row.stage_name.clone(),
            forward_s: Vec::new(),
            backward_s: Vec::new(),
            parameter_bytes: row.parameter_bytes.clone(),
            output_bytes_per_sample: row.output_bytes_per_sample,
            kept_bytes: Vec::new(),
            transient_bytes: Vec::new(),
            input_backward_s: Vec::new(),
            weight_backward_s: Vec::new(),
        });
        let samples = row.samples as usize;
        if let (Some(input_s), Some(weight_s)) = (row.input_backward_s, row.weight_backward_s) {
            stage.input_backward_s.push((samples, input_s));
            stage.weight_backward_s.push((samples, weight_s));
        }
        if let (Some(forward_s), Some(backward_s)) = (row.forward_s, row.backward_s) {
            stage.forward_s.push((samples, forward_s));
            stage.backward_s.push((samples, backward_s));
        }
        if let (Some(kept), Some(transient)) = (row.kept_bytes, row.transient_bytes) {
            stage.kept_bytes.push((samples, kept));
            stage.transient_bytes.push((samples, transient));
        }
    }
    let stages: Option<Vec<StageProfile>> = profiles.into_iter().collect();
    ratio.sort_by_key(|&(samples, _)| samples);
    training_step_s.sort_by_key(|&(samples, _)| samples);
    training_step_peak_bytes.sort_by_key(|&(samples, _)| samples);
    Some(NetworkProfile {
        stages: stages?,
        optimizer_s: rows[0].optimizer_s,
        whole_model_copy_s: rows[0].whole_model_copy_s.unwrap_or(0.0),
        contention: copies.map(|copies| Contention { copies, ratio }),
        training_step_s,
        training_step_peak_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(contention: Option<Contention>) -> NetworkProfile {
        let stage = |name: &str, scale: f64| StageProfile {
            name: name.into(),
            forward_s: vec![(8, 0.01 * scale), (32, 0.03 * scale)],
            backward_s: vec![(8, 0.02 * scale), (32, 0.06 * scale)],
            parameter_bytes: vec![4096, 64],
            output_bytes_per_sample: 2048,
            kept_bytes: vec![(8, 1e5), (32, 4e5)],
            transient_bytes: vec![(8, 2e4), (32, 8e4)],
            input_backward_s: vec![(8, 0.012 * scale)],
            weight_backward_s: vec![(8, 0.011 * scale)],
        };
        NetworkProfile {
            stages: vec![stage("conv", 1.0), stage("head", 0.5)],
            optimizer_s: 0.004,
            whole_model_copy_s: 0.002,
            contention,
            training_step_s: vec![(32, 0.1)],
            training_step_peak_bytes: vec![(32, 5e6)],
        }
    }

    fn needs<'a>(sizes: &'a [usize], contention: Option<(usize, &'a [usize])>) -> ProfileNeeds<'a> {
        ProfileNeeds { sizes, contention, training_steps: &[], split_backward: false }
    }

    fn label(key: &str) -> ProfileLabel<'_> {
        ProfileLabel {
            key,
            network: "small-cnn",
            dataset: "mnist",
            device: "cpu",
            threads: 1,
            taken_at: "2026-11-25T21:00:00Z",
            profile_s: 2.0,
            speed_reference_s: Some(0.008),
        }
    }

    #[test]
    fn a_profile_comes_back_from_its_rows_unchanged() {
        let measured = profile(Some(Contention { copies: 2, ratio: vec![(8, 1.2), (32, 1.1)] }));
        let rows = profile_rows(&measured, &label("k"));
        assert_eq!(rows.len(), 4, "two stages at two sizes");
        let (back, taken_at) = stored_profile(&rows, "k", &needs(&[8, 32], Some((2, &[8, 32])))).unwrap();
        assert_eq!(back, measured);
        assert_eq!(taken_at, "2026-11-25T21:00:00Z");
    }

    #[test]
    fn training_steps_at_a_size_the_stages_were_not_timed_at_come_back_without_stage_timings() {
        let mut measured = profile(None);
        measured.training_step_s.push((64, 0.3));
        measured.training_step_peak_bytes.push((64, 9e6));
        let rows = profile_rows(&measured, &label("k"));
        assert_eq!(rows.len(), 6, "two stages at two timed sizes and at the stepped one");
        let untimed: Vec<&ProfileRow> = rows.iter().filter(|row| row.samples == 64).collect();
        assert!(untimed.iter().all(|row| row.forward_s.is_none() && row.backward_s.is_none()));
        assert_eq!(untimed[0].training_step_peak_bytes, Some(9e6));
        let stepped = ProfileNeeds { training_steps: &[32, 64], ..needs(&[8, 32], None) };
        let (back, _) = stored_profile(&rows, "k", &stepped).unwrap();
        assert_eq!(back, measured);
        assert!(stored_profile(&rows, "k", &needs(&[64], None)).is_none(), "the stages were never timed at 64");
    }

    #[test]
    fn a_profile_is_reused_only_under_its_key_with_every_size_and_the_contention_asked_for() {
        let rows = profile_rows(&profile(None), &label("k"));
        assert!(stored_profile(&rows, "other binary", &needs(&[8], None)).is_none());
        assert!(stored_profile(&rows, "k", &needs(&[8, 16], None)).is_none(), "16 was never measured");
        assert!(stored_profile(&rows, "k", &needs(&[8], Some((2, &[8])))).is_none(), "no contention stored");
        assert!(stored_profile(&rows, "k", &needs(&[32], None)).is_some());
        let stepped = |training_steps| ProfileNeeds { training_steps, ..needs(&[8, 32], None) };
        assert!(stored_profile(&rows, "k", &stepped(&[32])).is_some());
        assert!(stored_profile(&rows, "k", &stepped(&[8])).is_none(), "no training steps at 8 samples");
        let split = |sizes| ProfileNeeds { split_backward: true, ..needs(sizes, None) };
        assert!(stored_profile(&rows, "k", &split(&[8])).is_some(), "the halves were timed at 8 samples");
        assert!(stored_profile(&rows, "k", &split(&[8, 32])).is_none(), "but not at 32");
        let three = profile_rows(&profile(Some(Contention { copies: 3, ratio: vec![(8, 1.3)] })), &label("k"));
        assert!(stored_profile(&three, "k", &needs(&[8], Some((2, &[8])))).is_none(), "measured with 3 copies, not 2");
    }

    #[test]
    fn the_latest_profile_that_covers_the_sizes_wins() {
        let mut older = profile(None);
        older.optimizer_s = 1.0;
        let mut rows = profile_rows(&older, &label("k"));
        let newer_label = ProfileLabel { taken_at: "2026-11-25T22:00:00Z", ..label("k") };
        rows.extend(profile_rows(&profile(None), &newer_label));
        let (reused, taken_at) = stored_profile(&rows, "k", &needs(&[8], None)).unwrap();
        assert_eq!((reused.optimizer_s, taken_at.as_str()), (0.004, "2026-11-25T22:00:00Z"));
    }
}
