//! The two environment variables that decide which board a CUDA ordinal is.

use std::fs;

/// `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER` as a process sees them.
///
/// A CUDA ordinal is only meaningful together with these: `cuda:0` is the first board of
/// the visible list, and the list's integer entries (and the order when the list is unset)
/// count boards in `CUDA_DEVICE_ORDER`. Only `PCI_BUS_ID` is an order NVML can reproduce;
/// CUDA's default, `FASTEST_FIRST`, puts a heuristic "fastest" board first and leaves the
/// rest unspecified, so under it the mapping is a guess (bus order) and says so.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CudaEnv {
    /// `CUDA_VISIBLE_DEVICES`: `None` when unset (every board visible), `Some("")` when
    /// set empty (none visible).
    pub visible_devices: Option<String>,
    /// `CUDA_DEVICE_ORDER`: `None` when unset, which CUDA treats as `FASTEST_FIRST`.
    pub device_order: Option<String>,
}

impl CudaEnv {
    /// The order under which CUDA's numbering equals PCI bus order.
    pub const PCI_BUS_ID: &'static str = "PCI_BUS_ID";

    /// What the runner's workers see: this process's `CUDA_VISIBLE_DEVICES` (inherited)
    /// and `CUDA_DEVICE_ORDER=PCI_BUS_ID`, which the runner sets for every worker.
    pub fn for_workers() -> CudaEnv {
        CudaEnv { device_order: Some(CudaEnv::PCI_BUS_ID.to_owned()), ..CudaEnv::from_env() }
    }

    /// This process's values.
    pub fn from_env() -> CudaEnv {
        // A value that is not UTF-8 cannot name a board; it counts as unset.
        CudaEnv {
            visible_devices: std::env::var("CUDA_VISIBLE_DEVICES").ok(),
            device_order: std::env::var("CUDA_DEVICE_ORDER").ok(),
        }
    }

    /// The values process `pid` was started with, from `/proc/<pid>/environ`; `None` when
    /// that cannot be read (the process is gone or belongs to another user).
    ///
    /// This is what the workers' CUDA really sees: the runner sets variables for its
    /// workers (it forces `CUDA_DEVICE_ORDER=PCI_BUS_ID`) that its own environment lacks.
    /// Changes a process makes to its own environment after start are not visible here.
    pub fn of_process(pid: u32) -> Option<CudaEnv> {
        let environ = fs::read(format!("/proc/{pid}/environ")).ok()?;
        let mut env = CudaEnv::default();
        for entry in environ.split(|&byte| byte == 0) {
            let Ok(entry) = std::str::from_utf8(entry) else { continue };
            match entry.split_once('=') {
                Some(("CUDA_VISIBLE_DEVICES", value)) => env.visible_devices = Some(value.to_owned()),
                Some(("CUDA_DEVICE_ORDER", value)) => env.device_order = Some(value.to_owned()),
                _ => {}
            }
        }
        Some(env)
    }

    /// Whether CUDA numbers boards in PCI bus order, the order the mapping can reproduce.
    pub fn is_pci_bus_order(&self) -> bool {
        self.device_order.as_deref().map(str::trim) == Some(CudaEnv::PCI_BUS_ID)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_started_with_variables_shows_them() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .env("CUDA_VISIBLE_DEVICES", "1,0")
            .env("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
            .spawn()
            .expect("sleep must spawn");
        // Until the child has exec'd, its environ is still a copy of ours: wait for the new one.
        let mut env = None;
        for _ in 0..200 {
            env = CudaEnv::of_process(child.id());
            if env.as_ref().is_some_and(|env| env.visible_devices.is_some()) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        let env = env.expect("a child's environ is readable");
        assert_eq!(env.visible_devices.as_deref(), Some("1,0"));
        assert!(env.is_pci_bus_order());
        assert!(CudaEnv::of_process(0).is_none());
        assert!(!CudaEnv { device_order: Some("FASTEST_FIRST".into()), ..CudaEnv::default() }.is_pci_bus_order());
    }
}
