//! The copies a profile times together for the contention of a machine's workers, each in
//! a process of its own (`stratlab contention-copy`) as trial workers are, not in threads
//! of the profile worker (why: `stratlab_strategies::contention`).
//!
//! The protocol, one line each way: the profile worker sends the trial (JSON) once; then
//! `size N`, answered `ready` once the copy holds an input of N samples; then `go` per pass,
//! answered with the pass's seconds. A copy that fails answers `error <why>` and exits; one
//! whose stdin closes exits.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{bail, Context};
use stratlab_strategies::contention::ContentionCopy;

use crate::profile_samples::ProfileSamples;
use crate::trial::TrialSpec;

/// Running copies of a trial's network, each in a process of its own; killed when dropped.
pub(crate) struct CopyProcesses {
    copies: Vec<CopyProcess>,
}

struct CopyProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// Untimed passes at each size before the timed ones. A fresh process's heap is still
/// growing in its first passes (a trial's first steps show it: MobileNetV2 on MNIST at one
/// thread, 381, 272 and 232 ms, then 222–242), and, most likely, two copies faulting
/// pages in at once slow each other more than their compute does. With one warm-up pass MobileNetV2 on
/// MNIST at 64 samples measured ×1.18, 1.19 and 1.24, with two ×1.12, 1.09 and 1.15
/// (interleaved), its 2-worker trials about ×1.1.
const WARMUP_PASSES: usize = 2;

impl CopyProcesses {
    /// Starts `copies` processes, each building `trial`'s network on its threads.
    pub(crate) fn start(trial: &TrialSpec, copies: usize) -> anyhow::Result<CopyProcesses> {
        let exe = std::env::current_exe().context("locating the stratlab executable")?;
        let request = serde_json::to_string(trial)?;
        let mut started = CopyProcesses { copies: Vec::with_capacity(copies) };
        for index in 0..copies {
            let mut command = Command::new(&exe);
            command.arg("contention-copy").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
            crate::child_process::own_group_dying_with_parent(&mut command, None);
            let mut child = command.spawn().with_context(|| format!("starting contention copy {index}"))?;
            let mut stdin = child.stdin.take().expect("stdin is piped");
            let stdout = BufReader::new(child.stdout.take().expect("stdout is piped"));
            writeln!(stdin, "{request}").with_context(|| format!("sending contention copy {index} its trial"))?;
            started.copies.push(CopyProcess { child, stdin, stdout });
        }
        Ok(started)
    }

    /// [`WARMUP_PASSES`] untimed and `passes` timed passes of every copy at `samples`
    /// samples, each pass started in all copies at once; every copy's timed passes.
    pub(crate) fn together(&mut self, samples: usize, passes: usize) -> anyhow::Result<Vec<f64>> {
        self.tell_all(&format!("size {samples}"))?;
        for copy in &mut self.copies {
            let answer = copy.answer()?;
            if answer != "ready" {
                bail!("contention copy at {samples} samples answered {answer:?} instead of ready");
            }
        }
        let mut times = Vec::with_capacity(self.copies.len() * passes);
        for pass in 0..WARMUP_PASSES + passes {
            self.tell_all("go")?;
            for copy in &mut self.copies {
                let answer = copy.answer()?;
                let seconds: f64 =
                    answer.parse().map_err(|_| anyhow::anyhow!("contention copy at {samples} samples: {answer}"))?;
                if pass >= WARMUP_PASSES {
                    times.push(seconds);
                }
            }
        }
        Ok(times)
    }

    fn tell_all(&mut self, line: &str) -> anyhow::Result<()> {
        for copy in &mut self.copies {
            writeln!(copy.stdin, "{line}")
                .and_then(|_| copy.stdin.flush())
                .with_context(|| format!("telling a contention copy {line:?}"))?;
        }
        Ok(())
    }
}

impl CopyProcess {
    fn answer(&mut self) -> anyhow::Result<String> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line).context("reading a contention copy")? == 0 {
            bail!("a contention copy ended without answering (its error is above)");
        }
        Ok(line.trim().to_owned())
    }
}

impl Drop for CopyProcesses {
    fn drop(&mut self) {
        for copy in &mut self.copies {
            let _ = copy.child.kill();
            let _ = copy.child.wait();
        }
    }
}

/// Runs `stratlab contention-copy` on this process's stdin and stdout. Returns the exit code.
pub fn run_contention_copy() -> i32 {
    let trial: TrialSpec = match crate::child_process::read_request_or_exit_code("contention-copy", "the trial") {
        Ok(trial) => trial,
        Err(code) => return code,
    };
    match serve(&trial) {
        Ok(()) => 0,
        Err(error) => {
            println!("error {error:#}");
            1
        }
    }
}

fn serve(trial: &TrialSpec) -> anyhow::Result<()> {
    trial.apply_numerics()?;
    tch::set_num_threads(trial.train.threads as i32);
    let spec = trial.network_spec()?;
    let mut copy = ContentionCopy::new(&spec);
    // The samples the profile's stages were timed on: its first `size` at each size.
    let samples = ProfileSamples::open(trial)?;
    let mut stdout = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let line = line.context("reading the next order")?;
        let answer = match line.trim().split_once(' ') {
            Some(("size", size)) => {
                let size: usize = size.parse().with_context(|| format!("size {size:?}"))?;
                copy.resize(&samples.first(size)?, size);
                "ready".to_owned()
            }
            _ if line.trim() == "go" => copy.pass()?.to_string(),
            _ => bail!("unknown order {line:?}"),
        };
        writeln!(stdout, "{answer}").and_then(|_| stdout.flush())?;
    }
    Ok(())
}
