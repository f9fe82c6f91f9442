//! How stratlab starts the processes it runs itself as (trial workers, probe ranks, profile
//! workers): each in a process group of its own, so that stopping it stops whatever it
//! started, and dying with its parent, so that a killed runner leaves nothing computing;
//! and how such a child reads what it was asked to do.

use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::process::Command;

use serde::de::DeserializeOwned;

/// Makes `command` start in a group of its own and die with this process; under an
/// address-space limit of `address_space_limit` bytes where given.
pub(crate) fn own_group_dying_with_parent(command: &mut Command, address_space_limit: Option<u64>) {
    // SAFETY: only async-signal-safe calls (setpgid, prctl, setrlimit) run between fork and exec.
    unsafe {
        command.pre_exec(move || {
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if let Some(bytes) = address_space_limit {
                let limit = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
                if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// The one JSON line a worker process reads on stdin: what its parent asks of it.
fn read_request<T: DeserializeOwned>() -> anyhow::Result<T> {
    let mut text = String::new();
    std::io::stdin().lock().read_line(&mut text)?;
    Ok(serde_json::from_str(&text)?)
}

/// [`read_request`], or exit code 2 once stderr says that `command` could not read `what`.
pub(crate) fn read_request_or_exit_code<T: DeserializeOwned>(command: &str, what: &str) -> Result<T, i32> {
    read_request().map_err(|error| {
        eprintln!("stratlab {command}: cannot read {what} on stdin: {error}");
        2
    })
}

/// The last three lines of a child's stderr, joined by ` | `: what a failure message quotes.
pub(crate) fn stderr_tail(stderr: &str) -> String {
    let tail: Vec<&str> = stderr.lines().rev().take(3).collect::<Vec<_>>().into_iter().rev().collect();
    tail.join(" | ")
}
