//! A process and its descendants, read from Linux `/proc`.
//!
//! Both samplers need "the trial's processes": the `/proc` sampler to add up their CPU time
//! and resident memory, the GPU sampler to pick the trial's entries out of NVML's list of
//! processes on a board. The walk lives here once so both agree on what the trial is.

use std::collections::{HashMap, HashSet};
use std::fs;

/// What one `/proc/<pid>/stat` line tells us.
pub(super) struct ProcStat {
    /// The process.
    pub pid: u32,
    /// Its parent.
    pub ppid: u32,
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
}

/// The pids of `root_pid` and all its live descendants, root first, read now.
///
/// Empty when the root is gone. The tree is re-read on every call because workers start
/// and end during a trial; a process that exits while the tree is read simply is not in it.
pub fn process_tree_pids(root_pid: u32) -> Vec<u32> {
    tree_stats(root_pid).into_iter().map(|stat| stat.pid).collect()
}

/// The `/proc/<pid>/stat` readings of `root_pid` and its live descendants, root first.
pub(super) fn tree_stats(root_pid: u32) -> Vec<ProcStat> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let all: Vec<ProcStat> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(read_stat)
        .collect();
    let mut children: HashMap<u32, Vec<usize>> = HashMap::new();
    let mut root = None;
    for (i, stat) in all.iter().enumerate() {
        children.entry(stat.ppid).or_default().push(i);
        if stat.pid == root_pid {
            root = Some(i);
        }
    }
    let Some(root) = root else { return Vec::new() };
    // Breadth-first from the root; `seen` guards against pid reuse making a cycle.
    let mut seen = HashSet::from([root]);
    let mut queue = vec![root];
    let mut next = 0;
    while next < queue.len() {
        let pid = all[queue[next]].pid;
        next += 1;
        for &child in children.get(&pid).map(Vec::as_slice).unwrap_or_default() {
            if seen.insert(child) {
                queue.push(child);
            }
        }
    }
    let mut tree: Vec<Option<ProcStat>> = all.into_iter().map(Some).collect();
    queue.into_iter().filter_map(|i| tree[i].take()).collect()
}

/// Parses `/proc/<pid>/stat`; `None` if the process vanished or the line is malformed.
fn read_stat(pid: u32) -> Option<ProcStat> {
    let line = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may itself contain spaces or ')', so the
    // numeric fields start after the last ')'. After it: state(3) ppid(4) … utime(14) stime(15).
    let rest = &line[line.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ppid = fields.get(1)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(ProcStat { pid, ppid, cpu_ticks: utime + stime })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_of_this_process_starts_with_it_and_a_dead_root_has_none() {
        let me = std::process::id();
        let pids = process_tree_pids(me);
        assert_eq!(pids.first(), Some(&me));
        // Pid 0 is the kernel's idle task, never listed in /proc.
        assert!(process_tree_pids(0).is_empty());
    }

    #[test]
    fn a_child_belongs_to_its_parents_tree() {
        let mut child = std::process::Command::new("sleep").arg("5").spawn().expect("sleep must spawn");
        let pids = process_tree_pids(std::process::id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(pids.contains(&child.id()), "{pids:?} lacks {}", child.id());
    }
}
