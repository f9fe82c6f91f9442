//! Learnable synthetic twins. Each class owns a random low-resolution template (8×8 per
//! channel); a sample is its class's template, blended with a weaker distractor template of
//! another class, randomly shifted, upsampled bilinearly to full size, plus pixel noise.
//! A small CNN learns this well above chance within an epoch, but noise and distractors keep
//! it from being solved at once, so time-to-accuracy stays meaningful. Every sample is
//! generated on demand from (seed, split, index): nothing is materialised (highres alone
//! would be 47 GB), and any thread can produce any batch reproducibly.

use crate::batch::{check_sample, Normaliser};
use crate::rng::SplitMix64;
use crate::{build_batch, Batch, DataError, Dataset, DatasetInfo, Source, Split};

/// Side of the per-class template grid.
const GRID: usize = 8;
/// Template amplitude, in units of the data set's pixel standard deviation.
const SIGNAL: f32 = 1.0;
/// Pixel-noise amplitude, in the same units (triangular noise on `[-NOISE, NOISE]`).
const NOISE: f32 = 2.5;
/// Largest weight of the distractor template relative to the class template.
const MAX_DISTRACTOR: f32 = 0.8;

/// The synthetic twin of one split of a data set.
#[derive(Debug)]
pub struct SyntheticDataset {
    info: &'static DatasetInfo,
    split: Split,
    seed: u64,
    len: usize,
    /// `classes × C × GRID × GRID`, values in `[-1, 1]`; depends on the seed only, so train
    /// and test share their classes.
    templates: Vec<f32>,
    normaliser: Normaliser,
}

impl SyntheticDataset {
    /// The twin of `info`'s `split`, with the data set's real length.
    pub fn new(info: &'static DatasetInfo, split: Split, seed: u64) -> Self {
        Self::with_len(info, split, seed, info.len(split))
    }

    /// A twin with a chosen number of samples (quick tests and benchmarks).
    pub fn with_len(info: &'static DatasetInfo, split: Split, seed: u64, len: usize) -> Self {
        let mut rng = SplitMix64::derived(&[seed, 0x7465_6d70_6c61_7465]);
        let n = info.classes * info.channels * GRID * GRID;
        let templates = (0..n).map(|_| rng.unit() * 2.0 - 1.0).collect();
        SyntheticDataset { info, split, seed, len, templates, normaliser: Normaliser::new(info) }
    }

    /// The label of sample `index` (cheap: the first draw of the sample's stream).
    pub fn label(&self, index: usize) -> usize {
        self.sample_rng(index).below(self.info.classes as u64) as usize
    }

    fn sample_rng(&self, index: usize) -> SplitMix64 {
        SplitMix64::derived(&[self.seed, self.split.seed_tag(), index as u64])
    }

    fn template(&self, class: usize, channel: usize) -> &[f32] {
        let start = (class * self.info.channels + channel) * GRID * GRID;
        &self.templates[start..start + GRID * GRID]
    }

    /// Writes sample `index`, normalised, as C×H×W planes into `out`; returns its label.
    /// Pixels are quantised to u8 first, like real 8-bit images.
    fn generate(&self, index: usize, out: &mut [f32]) -> usize {
        let info = self.info;
        let (h, w) = (info.height, info.width);
        let mut rng = self.sample_rng(index);
        let label = rng.below(info.classes as u64) as usize;
        let other = (label + 1 + rng.below(info.classes as u64 - 1) as usize) % info.classes;
        let distractor = rng.unit() * MAX_DISTRACTOR;
        let contrast = 0.7 + 0.3 * rng.unit();
        let max_shift = (h.min(w) / 14).max(1) as i64;
        let dy = rng.below(2 * max_shift as u64 + 1) as i64 - max_shift;
        let dx = rng.below(2 * max_shift as u64 + 1) as i64 - max_shift;
        let ys = interpolation_table(h, dy);
        let xs = interpolation_table(w, dx);

        let mut grid = [0f32; GRID * GRID];
        let mut row = [0f32; GRID];
        let mut noise_bits = 0u64;
        let mut noise_left = 0;
        for (c, plane) in out.chunks_exact_mut(h * w).enumerate() {
            let std = info.std[c] * 255.0;
            let base = info.mean[c] * 255.0;
            let signal = SIGNAL * std * contrast;
            for ((g, &t), &d) in grid.iter_mut().zip(self.template(label, c)).zip(self.template(other, c)) {
                *g = signal * (t + distractor * d);
            }
            let noise_scale = NOISE * std / 255.0;
            let table = self.normaliser.table(c);
            for (&(y0, y1, fy), line) in ys.iter().zip(plane.chunks_exact_mut(w)) {
                for (r, gx) in row.iter_mut().enumerate() {
                    *gx = grid[y0 * GRID + r] * (1.0 - fy) + grid[y1 * GRID + r] * fy;
                }
                for (&(x0, x1, fx), px) in xs.iter().zip(line.iter_mut()) {
                    let value = row[x0] * (1.0 - fx) + row[x1] * fx;
                    if noise_left == 0 {
                        noise_bits = rng.next_u64();
                        noise_left = 4;
                    }
                    // Triangular noise from two 8-bit uniforms: four samples per draw, and
                    // finer steps would vanish in the u8 quantisation anyway.
                    let a = (noise_bits & 0xff) as f32;
                    let b = ((noise_bits >> 8) & 0xff) as f32;
                    noise_bits >>= 16;
                    noise_left -= 1;
                    let noise = (a + b - 255.0) * noise_scale;
                    // `as u8` saturates, so this rounds and clamps to 0..=255 in one step.
                    *px = table[(base + value + noise + 0.5).max(0.0) as u8 as usize];
                }
            }
        }
        label
    }
}

/// For each output coordinate (shifted by `shift` pixels), the two template cells it lies
/// between and the weight of the second: bilinear upsampling of GRID cells to `size` pixels.
fn interpolation_table(size: usize, shift: i64) -> Vec<(usize, usize, f32)> {
    let last = (GRID - 1) as f32;
    (0..size as i64)
        .map(|p| {
            let u = (((p + shift) as f32 + 0.5) * GRID as f32 / size as f32 - 0.5).clamp(0.0, last);
            let i0 = u.floor() as usize;
            let i1 = (i0 + 1).min(GRID - 1);
            (i0, i1, u - i0 as f32)
        })
        .collect()
}

impl Dataset for SyntheticDataset {
    fn info(&self) -> &'static DatasetInfo {
        self.info
    }

    fn source(&self) -> Source {
        Source::Synthetic
    }

    fn len(&self) -> usize {
        self.len
    }

    fn batch(&self, indices: &[usize]) -> Result<Batch, DataError> {
        build_batch(self, indices)
    }

    fn sample_into(&self, index: usize, out: &mut [f32]) -> Result<i64, DataError> {
        check_sample(self.info, index, self.len, out)?;
        Ok(self.generate(index, out) as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{dataset_names, info};

    #[test]
    fn deterministic_per_seed_split_and_index() {
        let i = info("cifar10").unwrap();
        let a = SyntheticDataset::new(i, Split::Train, 7).batch(&[3, 9]).unwrap();
        let b = SyntheticDataset::new(i, Split::Train, 7).batch(&[3, 9]).unwrap();
        assert!(a.images.equal(&b.images) && a.labels.equal(&b.labels));
        let c = SyntheticDataset::new(i, Split::Train, 8).batch(&[3, 9]).unwrap();
        assert!(!a.images.equal(&c.images));
        let t = SyntheticDataset::new(i, Split::Test, 7).batch(&[3, 9]).unwrap();
        assert!(!a.images.equal(&t.images));
        // A sample does not depend on the batch it is in.
        let single = SyntheticDataset::new(i, Split::Train, 7).batch(&[9]).unwrap();
        assert!(single.images.get(0).equal(&a.images.get(1)));
    }

    #[test]
    fn shapes_of_all_data_sets() {
        for name in dataset_names() {
            let i = info(name).unwrap();
            let ds = SyntheticDataset::new(i, Split::Train, 1);
            assert_eq!(ds.len(), i.train_len);
            assert_eq!(SyntheticDataset::new(i, Split::Test, 1).len(), i.test_len);
            let b = ds.batch(&[0, i.train_len - 1]).unwrap();
            assert_eq!(b.images.size(), vec![2, i.channels as i64, i.height as i64, i.width as i64], "{name}");
            assert_eq!(b.images.kind(), tch::Kind::Float);
            assert_eq!(b.labels.kind(), tch::Kind::Int64);
            let labels = Vec::<i64>::try_from(&b.labels).unwrap();
            assert!(labels.iter().all(|&l| (0..i.classes as i64).contains(&l)));
        }
    }

    #[test]
    fn labels_are_balanced_and_pixels_roughly_normalised() {
        let i = info("mnist").unwrap();
        let ds = SyntheticDataset::new(i, Split::Train, 3);
        let mut counts = [0usize; 10];
        for idx in 0..10_000 {
            counts[ds.label(idx)] += 1;
        }
        assert!(counts.iter().all(|&c| (850..1150).contains(&c)), "{counts:?}");
        let idx: Vec<usize> = (0..256).collect();
        let b = ds.batch(&idx).unwrap();
        assert_eq!(
            Vec::<i64>::try_from(&b.labels).unwrap()[..16],
            (0..16).map(|k| ds.label(k) as i64).collect::<Vec<_>>()
        );
        let (mean, std) = (b.images.mean(tch::Kind::Float).double_value(&[]), b.images.std(true).double_value(&[]));
        assert!(mean.abs() < 0.6 && (0.5..2.0).contains(&std), "mean {mean} std {std}");
    }

    #[test]
    fn out_of_range_index_is_an_error() {
        let ds = SyntheticDataset::with_len(info("mnist").unwrap(), Split::Test, 0, 5);
        assert!(matches!(ds.batch(&[5]), Err(DataError::IndexOutOfRange { index: 5, len: 5, .. })));
    }
}
