//! ImageNet-style folders, `<split>/<class>/<image>.{jpg,jpeg,png}`: only the file list is
//! kept in memory (1.28 M paths), each image is decoded, resized and cropped when its batch
//! is asked for, on the loader's pool.

use std::path::{Path, PathBuf};

use image::imageops::FilterType;
use image::DynamicImage;

use crate::batch::{check_sample, Normaliser};
use crate::{build_batch, Batch, DataError, Dataset, DatasetInfo, Source};

/// Extensions (compared case-insensitively: ImageNet's files end in `.JPEG`) we decode.
const IMAGE_EXTENSIONS: [&str; 3] = ["jpg", "jpeg", "png"];

/// torchvision's evaluation transform resizes the shorter side to 256 before cropping 224;
/// we keep that ratio for every target size.
const RESIZE_RATIO: f64 = 256.0 / 224.0;

/// One split of an image folder; samples are (class index, path relative to the split).
#[derive(Debug)]
pub struct ImageFolderDataset {
    info: &'static DatasetInfo,
    root: PathBuf,
    classes: Vec<String>,
    samples: Vec<(u32, Box<Path>)>,
    normaliser: Normaliser,
}

impl ImageFolderDataset {
    /// Lists `split_dir`. Class indices come from the sorted folder names of `class_dir`
    /// (the train folder), so train and validation agree even if validation lacks a class.
    pub fn open(split_dir: &Path, class_dir: &Path, info: &'static DatasetInfo) -> Result<Self, DataError> {
        let classes = sorted_entries(class_dir, true)?;
        if classes.is_empty() {
            return Err(DataError::BadFolder {
                path: class_dir.to_path_buf(),
                reason: "no class folders (expected one folder per class holding images)".into(),
            });
        }
        if classes.len() > info.classes {
            return Err(DataError::BadFolder {
                path: class_dir.to_path_buf(),
                reason: format!("{} class folders, but {} has {} classes", classes.len(), info.name, info.classes),
            });
        }
        let mut samples = Vec::new();
        for class in sorted_entries(split_dir, true)? {
            let Ok(label) = classes.binary_search(&class) else {
                return Err(DataError::BadFolder {
                    path: split_dir.join(&class),
                    reason: format!("class folder not present in {}", class_dir.display()),
                });
            };
            for file in sorted_entries(&split_dir.join(&class), false)? {
                let is_image = Path::new(&file)
                    .extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| IMAGE_EXTENSIONS.iter().any(|x| x.eq_ignore_ascii_case(e)));
                if is_image {
                    samples.push((label as u32, Path::new(&class).join(file).into_boxed_path()));
                }
            }
        }
        if samples.is_empty() {
            return Err(DataError::BadFolder {
                path: split_dir.to_path_buf(),
                reason: format!("no images ({}) in any class folder", IMAGE_EXTENSIONS.join(", ")),
            });
        }
        Ok(ImageFolderDataset {
            info,
            root: split_dir.to_path_buf(),
            classes,
            samples,
            normaliser: Normaliser::new(info),
        })
    }

    /// Class names, index = label.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// Decodes one image and writes it, resized and centre-cropped, as C planes into `out`.
    fn decode_into(&self, relative: &Path, out: &mut [u8]) -> Result<(), DataError> {
        let path = self.root.join(relative);
        let unreadable = |source| DataError::UnreadableImage { path: path.clone(), source };
        // Detect the format from the bytes, not the extension: `.jpg` files that are really
        // PNGs are common in scraped folders.
        let img = image::ImageReader::open(&path)
            .and_then(|r| r.with_guessed_format())
            .map_err(|e| unreadable(image::ImageError::IoError(e)))?
            .decode()
            .map_err(unreadable)?;
        let (h, w) = (self.info.height as u32, self.info.width as u32);
        let scale = (f64::from(h) * RESIZE_RATIO / f64::from(img.height()))
            .max(f64::from(w) * RESIZE_RATIO / f64::from(img.width()));
        let new_w = ((f64::from(img.width()) * scale).round() as u32).max(w);
        let new_h = ((f64::from(img.height()) * scale).round() as u32).max(h);
        let resized = img.resize_exact(new_w, new_h, FilterType::Triangle);
        let cropped = resized.crop_imm((new_w - w) / 2, (new_h - h) / 2, w, h);
        let interleaved = match self.info.channels {
            1 => DynamicImage::ImageLuma8(cropped.to_luma8()).into_bytes(),
            _ => DynamicImage::ImageRgb8(cropped.to_rgb8()).into_bytes(),
        };
        // HWC (image crate) → CHW (tch).
        let (c, plane) = (self.info.channels, (h * w) as usize);
        for (p, px) in interleaved.chunks_exact(c).enumerate() {
            for (ch, &v) in px.iter().enumerate() {
                out[ch * plane + p] = v;
            }
        }
        Ok(())
    }
}

/// Names in `dir` that are folders (`dirs`) or files (`!dirs`), sorted; hidden names skipped.
fn sorted_entries(dir: &Path, dirs: bool) -> Result<Vec<String>, DataError> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| DataError::io(dir, e))? {
        let entry = entry.map_err(|e| DataError::io(dir, e))?;
        let kind = entry.file_type().map_err(|e| DataError::io(entry.path(), e))?;
        // Follow symlinks: image folders are often linked in from elsewhere.
        let is_dir = if kind.is_symlink() { entry.path().is_dir() } else { kind.is_dir() };
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_dir == dirs && !name.starts_with('.') {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

impl Dataset for ImageFolderDataset {
    fn info(&self) -> &'static DatasetInfo {
        self.info
    }

    fn source(&self) -> Source {
        Source::Real
    }

    fn len(&self) -> usize {
        self.samples.len()
    }

    // Decoding dominates (milliseconds per image): the loader spreads a batch's images over
    // its pool, each decoded straight into its own slot.
    fn batch(&self, indices: &[usize]) -> Result<Batch, DataError> {
        build_batch(self, indices)
    }

    fn sample_into(&self, index: usize, out: &mut [f32]) -> Result<i64, DataError> {
        check_sample(self.info, index, self.samples.len(), out)?;
        let (label, relative) = &self.samples[index];
        let mut pixels = vec![0u8; out.len()];
        self.decode_into(relative, &mut pixels)?;
        self.normaliser.image(&pixels, out);
        Ok(i64::from(*label))
    }
}
