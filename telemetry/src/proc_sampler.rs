//! CPU and memory of a process tree, read from Linux `/proc`: the fallback without NVML.

use std::collections::HashMap;
use std::fs;
use std::time::Instant;

use super::process_tree::tree_stats;
use stratlab_results::Sample;

use super::Sampler;

/// Samples a process and all its descendants from `/proc`, as device `cpu`.
///
/// Trials run as a launcher plus worker processes, so the tree is re-discovered every tick
/// (see [`super::process_tree_pids`]); workers started or ended mid-trial are picked up or
/// dropped without error.
///
/// - `utilization_pct` is CPU time (user + system, all threads) the tree used since the
///   previous tick divided by wall time and by the number of online logical cores, in
///   percent: 100 means every core of the machine was busy, 50 on a 2-core machine is one
///   core. Per-process deltas are used so a process that exits between ticks just stops
///   counting (its last partial interval is lost; workers live long, so this is small).
///   Reading is at the kernel's tick granularity (usually 10 ms), and the result is
///   clamped to 0–100 to absorb that rounding.
/// - `memory_used_bytes` is the sum of resident pages (`/proc/<pid>/statm`) times the page
///   size. Pages shared between processes (libtorch's code) count once per process, so
///   this is an upper bound on the tree's physical memory.
#[derive(Debug)]
pub struct ProcSampler {
    /// The root of the tree (usually the trial's launcher or the benchmark itself).
    root_pid: u32,
    /// Online logical cores, the denominator that makes utilisation 0–100.
    cores: f64,
    /// Kernel clock ticks per second (`_SC_CLK_TCK`), the unit of `utime` and `stime`.
    ticks_per_s: f64,
    /// Bytes per page, the unit of `statm`.
    page_bytes: u64,
    /// CPU ticks of each process of the tree at the previous tick.
    previous_ticks: HashMap<u32, u64>,
    /// When the previous tick was read.
    previous_at: Instant,
}

impl ProcSampler {
    /// Starts watching the tree rooted at `root_pid`; the first [`Sampler::sample`] call
    /// reports utilisation since this call.
    pub fn new(root_pid: u32) -> ProcSampler {
        let mut sampler = ProcSampler {
            root_pid,
            cores: sysconf_or(libc::_SC_NPROCESSORS_ONLN, 1) as f64,
            ticks_per_s: sysconf_or(libc::_SC_CLK_TCK, 100) as f64,
            page_bytes: sysconf_or(libc::_SC_PAGESIZE, 4096),
            previous_ticks: HashMap::new(),
            previous_at: Instant::now(),
        };
        sampler.previous_ticks = tree_stats(root_pid).into_iter().map(|p| (p.pid, p.cpu_ticks)).collect();
        sampler
    }

    /// The pid the tree is rooted at.
    pub fn root_pid(&self) -> u32 {
        self.root_pid
    }
}

impl Sampler for ProcSampler {
    fn name(&self) -> &str {
        "proc"
    }

    fn sample(&mut self) -> Vec<Sample> {
        let now = Instant::now();
        let tree = tree_stats(self.root_pid);
        let wall_s = now.duration_since(self.previous_at).as_secs_f64();
        let mut used_ticks = 0u64;
        let mut memory_used_bytes = 0u64;
        let mut ticks = HashMap::with_capacity(tree.len());
        for process in &tree {
            // A process new since the last tick was born during the interval, so all of
            // its CPU time falls inside it.
            let before = self.previous_ticks.get(&process.pid).copied().unwrap_or(0);
            used_ticks += process.cpu_ticks.saturating_sub(before);
            ticks.insert(process.pid, process.cpu_ticks);
            // statm can vanish after stat was read: such a process simply adds nothing.
            memory_used_bytes += read_resident_pages(process.pid).unwrap_or(0) * self.page_bytes;
        }
        self.previous_ticks = ticks;
        self.previous_at = now;
        if tree.is_empty() {
            return Vec::new();
        }
        let utilization_pct = if wall_s > 0.0 {
            (used_ticks as f64 / self.ticks_per_s / wall_s / self.cores * 100.0).clamp(0.0, 100.0)
        } else {
            0.0
        };
        vec![Sample {
            t_s: 0.0,
            device: "cpu".to_owned(),
            utilization_pct,
            memory_used_bytes,
            power_w: None,
            sm_clock_mhz: None,
            // The tree's resident memory is already the process figure; there is no board.
            process_memory_bytes: None,
            energy_counter_mj: None,
            device_id: None,
        }]
    }
}

/// Resident pages from `/proc/<pid>/statm` (its second field).
fn read_resident_pages(pid: u32) -> Option<u64> {
    let statm = fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    statm.split_whitespace().nth(1)?.parse().ok()
}

/// `sysconf(name)`, or `fallback` when the value is unknown (it returns -1 then).
fn sysconf_or(name: libc::c_int, fallback: u64) -> u64 {
    // SAFETY: sysconf only reads a configuration value; any name is allowed.
    let value = unsafe { libc::sysconf(name) };
    if value > 0 {
        value as u64
    } else {
        fallback
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};
    use std::thread::sleep;
    use std::time::Duration;

    /// Kills the child's whole process group on drop, so neither a failed assertion nor a
    /// subshell the script forked leaves a busy loop behind.
    struct Reaped(Child);
    impl Drop for Reaped {
        fn drop(&mut self) {
            // SAFETY: killpg has no memory-safety preconditions; the group is the child's own.
            unsafe { libc::killpg(self.0.id() as libc::pid_t, libc::SIGKILL) };
            let _ = self.0.wait();
        }
    }

    fn spawn_sh(script: &str) -> Reaped {
        use std::os::unix::process::CommandExt;
        Reaped(Command::new("sh").arg("-c").arg(script).process_group(0).spawn().expect("sh must spawn"))
    }

    /// A spinning shell uses one core when it has one to itself; on a shared 2-core
    /// machine (parallel tests, builds) it may get much less, so the bound is "clearly
    /// busy" (a sleeping child reads below 2 %) rather than "one full core".
    const BUSY_FLOOR_PCT: f64 = 5.0;

    #[test]
    fn busy_child_reports_clear_utilisation() {
        let child = spawn_sh("while :; do :; done");
        let mut sampler = ProcSampler::new(child.0.id());
        sleep(Duration::from_millis(1000));
        let samples = sampler.sample();
        assert_eq!(samples.len(), 1);
        let utilization = samples[0].utilization_pct;
        assert!(utilization > BUSY_FLOOR_PCT, "utilisation {utilization} % with {} cores", sampler.cores);
        assert!(utilization <= 100.0 / sampler.cores + 5.0, "one thread cannot use more than one core");
        assert!(samples[0].memory_used_bytes > 0);
    }

    #[test]
    fn busy_grandchild_counts_for_its_root() {
        // `sh` forks a subshell running the loop: the load sits one level below the root.
        let child = spawn_sh("(while :; do :; done) & wait");
        let mut sampler = ProcSampler::new(child.0.id());
        sleep(Duration::from_millis(1000));
        let samples = sampler.sample();
        assert_eq!(samples.len(), 1);
        assert!(samples[0].utilization_pct > BUSY_FLOOR_PCT, "{}", samples[0].utilization_pct);
    }

    #[test]
    fn sleeping_child_reports_about_zero() {
        let child = spawn_sh("sleep 5");
        let mut sampler = ProcSampler::new(child.0.id());
        sleep(Duration::from_millis(1000));
        let samples = sampler.sample();
        assert_eq!(samples.len(), 1);
        assert!(samples[0].utilization_pct < 2.0, "{}", samples[0].utilization_pct);
        assert!(samples[0].memory_used_bytes > 0);
    }

    #[test]
    fn process_that_exits_mid_run_yields_no_error() {
        let mut child = spawn_sh("sleep 0.2");
        let mut sampler = ProcSampler::new(child.0.id());
        assert_eq!(sampler.sample().len(), 1);
        let _ = child.0.wait();
        // Reaped: the root is gone, so a tick reads nothing rather than failing.
        assert!(sampler.sample().is_empty());
        assert!(sampler.sample().is_empty());
    }
}
