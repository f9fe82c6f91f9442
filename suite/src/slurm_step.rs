//! A trial across nodes as one Slurm job step: where it may run (inside an allocation of
//! enough nodes), the `srun` that starts its ranks, how their labelled output is taken apart
//! again, how srun says each task ended, and how a step is cancelled by its name.
//!
//! Each rank reads the trial on its standard input (`--input=all` hands every task the same
//! line), forms its group from the variables srun sets (`stratlab_comm::Launch`: rank 0 on
//! the step's first host, at a port derived from the job and step ids) and reports on its
//! standard output as a local worker does; `--label` prefixes each line with the rank.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The Slurm allocation this process runs in, read from the variables `salloc` and
/// `sbatch` set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Allocation {
    /// `SLURM_JOB_ID`.
    pub(crate) job_id: String,
    /// `SLURM_JOB_NUM_NODES` (or the older `SLURM_NNODES`).
    pub(crate) nodes: usize,
    /// The fewest CPUs it gives a node (`SLURM_JOB_CPUS_PER_NODE`, `2(x3),1`), where said.
    pub(crate) cpus_per_node: Option<usize>,
    /// That variable as Slurm wrote it, for messages.
    cpus_text: String,
}

impl Allocation {
    /// The allocation around this process, if any.
    pub(crate) fn from_env() -> Option<Allocation> {
        Allocation::from_lookup(|name| std::env::var(name).ok())
    }

    /// As [`Allocation::from_env`], through `lookup`.
    pub(crate) fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Option<Allocation> {
        let job_id = lookup("SLURM_JOB_ID").filter(|id| !id.trim().is_empty())?;
        let nodes = lookup("SLURM_JOB_NUM_NODES")
            .or_else(|| lookup("SLURM_NNODES"))
            .and_then(|nodes| nodes.trim().parse().ok())
            .unwrap_or(1);
        let cpus_text = lookup("SLURM_JOB_CPUS_PER_NODE").unwrap_or_default();
        // `2(x3),1`: three nodes of 2 CPUs, one of 1.
        let cpus_per_node =
            cpus_text.split(',').filter_map(|group| group.split('(').next()?.trim().parse::<usize>().ok()).min();
        Some(Allocation { job_id, nodes, cpus_per_node, cpus_text })
    }
}

/// Why a trial of `ranks_per_node` ranks on each of `nodes` nodes cannot run in
/// `allocation` (where the runner starts it as a job step), if it cannot.
pub(crate) fn infeasibility(nodes: usize, ranks_per_node: usize, allocation: Option<&Allocation>) -> Option<String> {
    match allocation {
        Some(allocation) if allocation.cpus_per_node.is_some_and(|cpus| cpus < ranks_per_node) => Some(format!(
            "needs {ranks_per_node} CPUs on a node for its ranks; Slurm job {} gives {} \
             (SLURM_JOB_CPUS_PER_NODE={}): ask for them (`salloc --exclusive`, `--ntasks-per-node={ranks_per_node}`)",
            allocation.job_id,
            allocation.cpus_per_node.unwrap_or_default(),
            allocation.cpus_text
        )),
        _ if nodes <= 1 => None,
        None => Some(format!(
            "a cell of {nodes} nodes runs as a Slurm job step, and this run is outside an allocation \
             (SLURM_JOB_ID is unset): run it inside `salloc -N {nodes}` or an sbatch script"
        )),
        Some(allocation) if allocation.nodes < nodes => Some(format!(
            "needs {nodes} nodes; Slurm job {} has {} (SLURM_JOB_NUM_NODES)",
            allocation.job_id, allocation.nodes
        )),
        Some(_) => None,
    }
}

/// The name every step of run `run_id` carries before its trial's id: what `--resume` and
/// a trial's timeout cancel by.
pub(crate) fn run_prefix(run_id: &str) -> String {
    format!("stratlab.{run_id}.")
}

/// The job-step name of a trial.
pub(crate) fn step_name(run_id: &str, trial_id: &str) -> String {
    run_prefix(run_id) + trial_id
}

/// `srun` starting `workers` ranks of `program args` over `nodes` nodes, `workers / nodes`
/// on each, rank-major (Slurm's block distribution), as step `name`; a rank that fails
/// ends the step (`--kill-on-bad-exit`), so no rank waits on a dead peer until the timeout.
pub(crate) fn srun(name: &str, nodes: usize, workers: usize, program: &std::path::Path, args: &[&str]) -> Command {
    let mut command = Command::new("srun");
    command
        .arg(format!("--job-name={name}"))
        .arg(format!("--nodes={nodes}"))
        .arg(format!("--ntasks={workers}"))
        .arg(format!("--ntasks-per-node={}", workers / nodes.max(1)))
        .args(["--distribution=block", "--input=all", "--label", "--kill-on-bad-exit=1", "--quiet"])
        .arg(program)
        .args(args);
    command
}

/// `program` to measure the machine with: inside an allocation a one-task job step named
/// `name` on one of its nodes (where the trials run; its output labelled, as every step's
/// is), else this machine's own process; and whether it is a step.
pub(crate) fn on_a_compute_node(name: &str, program: &std::path::Path) -> (Command, bool) {
    match Allocation::from_env() {
        Some(_) => (srun(name, 1, 1, program, &[]), true),
        None => (Command::new(program), false),
    }
}

/// srun's I/O cuts a long line into pieces of this many bytes, each with its label.
const SRUN_CHUNK_BYTES: usize = 1024;

/// A line as a worker writes it under srun: one that fills srun's pieces exactly gets a
/// trailing space, so that the piece after it is never taken for its continuation (JSON
/// ignores the space).
pub(crate) fn unambiguous_line(mut line: String) -> String {
    if !line.is_empty() && line.len().is_multiple_of(SRUN_CHUNK_BYTES) {
        line.push(' ');
    }
    line
}

/// Takes srun's labelled output (`0: text`, ` 1: text`) apart into each rank's whole
/// lines: a piece of exactly [`SRUN_CHUNK_BYTES`] continues in the rank's next piece.
#[derive(Debug, Default)]
pub(crate) struct LabelledLines {
    partial: BTreeMap<usize, String>,
}

impl LabelledLines {
    /// Takes one line of srun's output; the rank and its whole line once it is complete.
    /// Lines without a label (srun's own) are returned as rank `None`.
    pub(crate) fn push(&mut self, line: &str) -> Option<(Option<usize>, String)> {
        let Some((rank, piece)) = split_label(line) else {
            return Some((None, line.to_owned()));
        };
        let buffer = self.partial.entry(rank).or_default();
        buffer.push_str(piece);
        if piece.len() == SRUN_CHUNK_BYTES {
            return None;
        }
        let whole = std::mem::take(buffer);
        self.partial.remove(&rank);
        Some((Some(rank), whole))
    }

    /// Whatever ranks left unfinished when the output closed.
    pub(crate) fn rest(self) -> impl Iterator<Item = (usize, String)> {
        self.partial.into_iter().filter(|(_, text)| !text.is_empty())
    }
}

/// `(rank, text)` of a labelled line: digits after optional padding, then `: `.
fn split_label(line: &str) -> Option<(usize, &str)> {
    let trimmed = line.trim_start_matches(' ');
    let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let after = &trimmed[digits..];
    let rest = after.strip_prefix(": ").or_else(|| (after == ":").then_some(""))?;
    Some((trimmed[..digits].parse().ok()?, rest))
}

/// How srun said tasks ended: `srun: error: node2: task 1: Exited with exit code 3`,
/// `srun: error: node1: tasks 0-1: Killed`. Each rank named, its node and the words.
pub(crate) fn task_ends(line: &str) -> Vec<(usize, String, String)> {
    let Some(rest) = line.strip_prefix("srun: error: ") else {
        return Vec::new();
    };
    let mut parts = rest.splitn(3, ": ");
    let (Some(host), Some(tasks), Some(how)) = (parts.next(), parts.next(), parts.next()) else {
        return Vec::new();
    };
    let Some(list) = tasks.strip_prefix("tasks ").or_else(|| tasks.strip_prefix("task ")) else {
        return Vec::new();
    };
    let mut ranks = Vec::new();
    for part in list.split(',') {
        let bounds: Vec<Option<usize>> = part.split('-').map(|n| n.trim().parse().ok()).collect();
        match bounds.as_slice() {
            [Some(rank)] => ranks.push(*rank),
            [Some(first), Some(last)] if first <= last => ranks.extend(*first..=*last),
            _ => return Vec::new(),
        }
    }
    ranks.into_iter().map(|rank| (rank, host.to_owned(), how.trim().to_owned())).collect()
}

/// Cancels every step of this job whose name starts with `prefix` (one trial's name, or a
/// run's prefix to clear what a killed runner left); the names of those cancelled. Slurm
/// cancels a step by id, so the ids are looked up by name first; the job itself is left.
pub(crate) fn cancel_steps(allocation: &Allocation, prefix: &str) -> std::io::Result<Vec<String>> {
    let listed = Command::new("squeue")
        .args(["--steps", "--noheader", "--format=%i %.200j", "--jobs", &allocation.job_id])
        .output()?;
    let mut cancelled = Vec::new();
    for line in String::from_utf8_lossy(&listed.stdout).lines() {
        let Some((step_id, name)) = line.trim().split_once(' ') else { continue };
        if name.trim().starts_with(prefix) {
            Command::new("scancel").args(["--signal=KILL", "--full", step_id]).status()?;
            cancelled.push(name.trim().to_owned());
        }
    }
    Ok(cancelled)
}

/// Whether a job step of this runner is running now: a signal that would end the runner
/// then waits for the step to be cancelled first.
static STEP_RUNNING: AtomicBool = AtomicBool::new(false);
/// Set by the handler when SIGINT, SIGTERM or SIGHUP arrived while a step ran.
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

/// While it lives, a SIGINT, SIGTERM or SIGHUP to the runner does not end it at once: the
/// trial's watcher sees [`StepGuard::interrupted`], cancels the step by name, and the
/// runner then ends by the same signal, so that no step outlives the runner (srun, killed
/// with it, would leave its step's ranks running). Outside a guard the signals end the
/// runner as always.
pub(crate) struct StepGuard;

impl StepGuard {
    /// Marks a step as running, the handlers installed.
    pub(crate) fn hold() -> StepGuard {
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: installs a handler that only touches atomics and calls the
            // async-signal-safe `signal` and `raise`.
            unsafe { libc::signal(signal, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t) };
        }
        STEP_RUNNING.store(true, Ordering::SeqCst);
        StepGuard
    }

    /// The signal that asked the runner to end while the step ran, if one did.
    pub(crate) fn interrupted(&self) -> Option<i32> {
        Some(INTERRUPTED.load(Ordering::SeqCst)).filter(|&signal| signal != 0)
    }
}

impl Drop for StepGuard {
    /// The step is over: a signal that came meanwhile now ends the runner, as it would have.
    fn drop(&mut self) {
        STEP_RUNNING.store(false, Ordering::SeqCst);
        let signal = INTERRUPTED.swap(0, Ordering::SeqCst);
        if signal != 0 {
            // SAFETY: restores the default disposition and delivers the signal to this process.
            unsafe {
                libc::signal(signal, libc::SIG_DFL);
                libc::raise(signal);
            }
        }
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    if STEP_RUNNING.load(Ordering::SeqCst) {
        INTERRUPTED.store(signal, Ordering::SeqCst);
    } else {
        // SAFETY: both are async-signal-safe; the runner ends as if no handler were there.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_node_cell_needs_an_allocation_of_enough_nodes() {
        let lookup = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| value.to_string())
        };
        assert_eq!(infeasibility(1, 2, None), None);
        let outside = infeasibility(2, 1, None).unwrap();
        assert!(outside.contains("outside an allocation") && outside.contains("salloc -N 2"), "{outside}");
        let one = Allocation::from_lookup(lookup(&[("SLURM_JOB_ID", "7"), ("SLURM_JOB_NUM_NODES", "1")])).unwrap();
        assert_eq!(infeasibility(2, 1, Some(&one)).unwrap(), "needs 2 nodes; Slurm job 7 has 1 (SLURM_JOB_NUM_NODES)");
        let two = Allocation::from_lookup(lookup(&[("SLURM_JOB_ID", "8"), ("SLURM_NNODES", "2")])).unwrap();
        assert_eq!((two.nodes, infeasibility(2, 4, Some(&two))), (2, None), "CPUs unknown: srun decides");
        const NARROW: [(&str, &str); 3] =
            [("SLURM_JOB_ID", "9"), ("SLURM_JOB_NUM_NODES", "3"), ("SLURM_JOB_CPUS_PER_NODE", "2(x2),1")];
        let narrow = Allocation::from_lookup(lookup(&NARROW)).unwrap();
        assert_eq!(narrow.cpus_per_node, Some(1));
        assert_eq!(infeasibility(1, 1, Some(&narrow)), None);
        let why = infeasibility(1, 2, Some(&narrow)).unwrap();
        assert!(
            why.starts_with("needs 2 CPUs on a node") && why.contains("2(x2),1") && why.contains("--exclusive"),
            "{why}"
        );
        assert_eq!(Allocation::from_lookup(lookup(&[("SLURM_NNODES", "2")])), None);
    }

    #[test]
    fn labelled_pieces_become_each_ranks_whole_lines() {
        let long = "x".repeat(2500);
        let mut lines = LabelledLines::default();
        let mut whole = Vec::new();
        let pieces = [
            format!("1: {}", &long[..1024]),
            "0: short".to_owned(),
            format!("1: {}", &long[1024..2048]),
            format!("1: {}", &long[2048..]),
            "srun: error: node2: task 1: Exited with exit code 3".to_owned(),
            " 0: ".to_owned(),
        ];
        for piece in &pieces {
            whole.extend(lines.push(piece));
        }
        assert_eq!(
            whole,
            [
                (Some(0), "short".to_owned()),
                (Some(1), long.clone()),
                (None, "srun: error: node2: task 1: Exited with exit code 3".to_owned()),
                (Some(0), String::new()),
            ]
        );
        assert_eq!(lines.rest().count(), 0);
        assert_eq!(unambiguous_line("y".repeat(2048)).len(), 2049);
        assert_eq!(unambiguous_line("y".repeat(2047)).len(), 2047);
    }

    #[test]
    fn srun_task_lines_name_each_rank_its_node_and_how_it_ended() {
        assert_eq!(
            task_ends("srun: error: node2: task 1: Exited with exit code 3"),
            [(1, "node2".to_owned(), "Exited with exit code 3".to_owned())]
        );
        let killed = task_ends("srun: error: node1: tasks 0-1,3: Killed");
        assert_eq!(killed.iter().map(|(rank, _, _)| *rank).collect::<Vec<_>>(), [0, 1, 3]);
        assert!(task_ends("srun: launch/slurm: _step_signal: Terminating StepId=1.0").is_empty());
        assert!(task_ends("0: some output").is_empty());
    }

    #[test]
    fn srun_places_ranks_evenly_and_names_the_step() {
        let command =
            srun(&step_name("run-1", "t__w4__n2__r0"), 2, 4, std::path::Path::new("/bin/stratlab"), &["worker"]);
        let args: Vec<String> = command.get_args().map(|arg| arg.to_string_lossy().into_owned()).collect();
        for expected in ["--job-name=stratlab.run-1.t__w4__n2__r0", "--nodes=2", "--ntasks=4", "--ntasks-per-node=2"] {
            assert!(args.contains(&expected.to_owned()), "{args:?}");
        }
        assert_eq!(&args[args.len() - 2..], ["/bin/stratlab", "worker"]);
    }
}
