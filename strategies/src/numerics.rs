//! Numerical settings of libtorch that change speed on a GPU and must therefore be set
//! explicitly and recorded with every trial: cuDNN autotuning and TF32.
//!
//! PyTorch's own defaults differ between matmuls (TF32 off) and convolutions (TF32 on),
//! and cuDNN's benchmark mode is off; a lab that relied on whatever the library happened to
//! default to could not explain why two runs differ. tch exposes only the benchmark switch,
//! so the rest goes through a small C++ shim (`cpp/torch_context.cpp`).

use std::ffi::{c_char, c_int, CString};

use serde::{Deserialize, Serialize};

use crate::device::DeviceError;
use crate::Precision;

extern "C" {
    fn stratlab_set_float32_matmul_precision(precision: *const c_char) -> c_int;
    fn stratlab_float32_matmul_precision() -> c_int;
    fn stratlab_set_allow_tf32_cudnn(allow: c_int) -> c_int;
    fn stratlab_allow_tf32_cudnn() -> c_int;
    fn stratlab_benchmark_cudnn() -> c_int;
    fn stratlab_show_config(buffer: *mut c_char, capacity: usize) -> usize;
}

/// How float32 matrix products may be computed, in the strategy vocabulary beside the
/// precisions (the trials table stores it).
pub use stratlab_strategy_spec::MatmulPrecision;

/// The settings a trial trains under; recorded per trial.
///
/// Defaults: cuDNN benchmark **on** — trials time fixed shapes after warm-up steps, which
/// absorb the autotuning, as MLPerf and torchvision's reference scripts do; matmul precision
/// `highest` and cuDNN TF32 **on** — PyTorch's own defaults, so numbers compare with plain
/// PyTorch runs. On the CPU none of them changes anything, but they are still recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Numerics {
    /// `torch.backends.cudnn.benchmark`: let cuDNN time its algorithms per shape.
    pub cudnn_benchmark: bool,
    /// `torch.set_float32_matmul_precision`.
    pub matmul_precision: MatmulPrecision,
    /// `torch.backends.cudnn.allow_tf32`: TF32 in convolutions.
    pub cudnn_tf32: bool,
}

impl Default for Numerics {
    fn default() -> Self {
        Numerics { cudnn_benchmark: true, matmul_precision: MatmulPrecision::Highest, cudnn_tf32: true }
    }
}

impl Numerics {
    /// These settings with the TF32 switches a trial's precision decides, so that a cell
    /// named `fp32` is float32 on every device: `fp32` turns TF32 off in matrix products and
    /// convolutions (cuDNN's own default would leave it on in convolutions), `tf32` turns both
    /// on; the other precisions keep these settings for the float32 work autocast leaves.
    pub fn for_precision(self, precision: Precision) -> Numerics {
        match precision {
            Precision::Float32 => Numerics { matmul_precision: MatmulPrecision::Highest, cudnn_tf32: false, ..self },
            Precision::Tfloat32 => Numerics { matmul_precision: MatmulPrecision::High, cudnn_tf32: true, ..self },
            Precision::Bfloat16 | Precision::Float16 | Precision::Float64 => self,
        }
    }

    /// Sets these values in libtorch's global context (for this process).
    pub fn apply(&self) -> Result<(), DeviceError> {
        tch::Cuda::cudnn_set_benchmark(self.cudnn_benchmark);
        let precision = CString::new(self.matmul_precision.name()).expect("no NUL in a fixed name");
        // SAFETY: the shim takes a NUL-terminated string it only reads, and catches every
        // C++ exception.
        if unsafe { stratlab_set_float32_matmul_precision(precision.as_ptr()) } != 0 {
            return Err(DeviceError(format!("libtorch rejected matmul precision `{}`", self.matmul_precision)));
        }
        // SAFETY: plain value in, status out; exceptions are caught in the shim.
        if unsafe { stratlab_set_allow_tf32_cudnn(c_int::from(self.cudnn_tf32)) } != 0 {
            return Err(DeviceError("libtorch rejected the cuDNN TF32 setting".into()));
        }
        Ok(())
    }

    /// What libtorch's global context holds now (`None` when it cannot be read), so a trial
    /// records the values in force, not the values asked for.
    pub fn current() -> Option<Numerics> {
        // SAFETY: the shim's getters take no arguments and catch every C++ exception.
        let (precision, tf32, benchmark) =
            unsafe { (stratlab_float32_matmul_precision(), stratlab_allow_tf32_cudnn(), stratlab_benchmark_cudnn()) };
        let matmul_precision = match precision {
            0 => MatmulPrecision::Highest,
            1 => MatmulPrecision::High,
            2 => MatmulPrecision::Medium,
            _ => return None,
        };
        (tf32 >= 0 && benchmark >= 0).then_some(Numerics {
            cudnn_benchmark: benchmark == 1,
            matmul_precision,
            cudnn_tf32: tf32 == 1,
        })
    }
}

/// What the linked libtorch says about its own build (`at::show_config()`): read from the
/// library at run time, so a fingerprint cannot claim a version other than the one loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LibtorchBuild {
    /// `TORCH_VERSION` of the build settings (`2.13.0`).
    pub torch_version: Option<String>,
    /// `CUDA_VERSION` the library was built with (`13.0`), absent in CPU builds.
    pub cuda_version: Option<String>,
    /// `CUDNN_VERSION` the library was built with, absent in CPU builds.
    pub cudnn_version: Option<String>,
}

impl LibtorchBuild {
    /// Reads the linked library's build configuration.
    pub fn read() -> LibtorchBuild {
        LibtorchBuild::parse(&show_config())
    }

    /// Picks the versions out of `at::show_config()`'s `Build settings:` line
    /// (`…, CUDA_VERSION=13.0, CUDNN_VERSION=9.10.2, …, TORCH_VERSION=2.13.0, …`).
    pub fn parse(config: &str) -> LibtorchBuild {
        let setting = |key: &str| {
            config
                .split([',', '\n'])
                .filter_map(|item| item.trim().strip_prefix(key)?.strip_prefix('='))
                .map(|value| value.trim().to_owned())
                .find(|value| !value.is_empty())
        };
        LibtorchBuild {
            torch_version: setting("TORCH_VERSION"),
            cuda_version: setting("CUDA_VERSION"),
            cudnn_version: setting("CUDNN_VERSION"),
        }
    }
}

/// `at::show_config()` of the linked libtorch.
pub fn show_config() -> String {
    let mut buffer = vec![0u8; 8192];
    loop {
        // SAFETY: the shim writes at most `buffer.len()` bytes, NUL included.
        let needed = unsafe { stratlab_show_config(buffer.as_mut_ptr().cast(), buffer.len()) };
        if needed < buffer.len() {
            buffer.truncate(needed);
            return String::from_utf8_lossy(&buffer).into_owned();
        }
        buffer.resize(needed + 1, 0);
    }
}

#[cfg(test)]
mod tests {
    use strum::VariantArray;

    use super::*;

    #[test]
    fn precision_names_are_libtorch_s_and_serde_uses_them() {
        let names: Vec<&str> = MatmulPrecision::VARIANTS.iter().map(|precision| precision.name()).collect();
        assert_eq!(names, ["highest", "high", "medium"]);
        for &precision in MatmulPrecision::VARIANTS {
            assert_eq!(precision.to_string(), precision.name());
            assert_eq!(serde_json::to_string(&precision).unwrap(), format!("\"{}\"", precision.name()));
        }
    }

    #[test]
    fn fp32_turns_tf32_off_and_tf32_on_whatever_the_suite_said() {
        let suite = Numerics::default();
        assert!(suite.cudnn_tf32, "cuDNN's default, which would make an fp32 cell TF32 in its convolutions");
        let fp32 = suite.for_precision(Precision::Float32);
        assert_eq!((fp32.matmul_precision, fp32.cudnn_tf32), (MatmulPrecision::Highest, false));
        let tf32 = suite.for_precision(Precision::Tfloat32);
        assert_eq!((tf32.matmul_precision, tf32.cudnn_tf32), (MatmulPrecision::High, true));
        assert_eq!(suite.for_precision(Precision::Bfloat16), suite);
        assert_eq!(tf32.cudnn_benchmark, suite.cudnn_benchmark, "the rest is the suite's");
    }

    #[test]
    fn settings_round_trip_through_libtorch() {
        let wanted = Numerics { cudnn_benchmark: false, matmul_precision: MatmulPrecision::High, cudnn_tf32: false };
        wanted.apply().unwrap();
        assert_eq!(Numerics::current(), Some(wanted));
        Numerics::default().apply().unwrap();
        assert_eq!(Numerics::current(), Some(Numerics::default()));
    }

    #[test]
    fn the_linked_library_reports_its_version() {
        let build = LibtorchBuild::read();
        // tch 0.26 binds libtorch 2.13 (see `tools/libtorch.py`); the number comes from the library itself.
        assert!(build.torch_version.as_deref().is_some_and(|v| v.starts_with("2.13")), "{build:?}");
    }

    #[test]
    fn build_settings_are_parsed_by_key() {
        let config = "PyTorch built with:\n  - Build settings: BLAS_INFO=mkl, CUDA_VERSION=13.0, \
                      CUDNN_VERSION=9.10.2, TORCH_VERSION=2.13.0, USE_CUDA=ON\n";
        let build = LibtorchBuild::parse(config);
        assert_eq!(build.torch_version.as_deref(), Some("2.13.0"));
        assert_eq!(build.cuda_version.as_deref(), Some("13.0"));
        assert_eq!(build.cudnn_version.as_deref(), Some("9.10.2"));
        assert_eq!(LibtorchBuild::parse("Build settings: USE_CUDA=OFF").cuda_version, None);
    }
}
