//! Where one worker sits on an emulated link: its network namespace, the interface its
//! traffic leaves by and its address; and how a process is started inside it. The link's
//! namespaces and the delay line both build on it.

use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Where `ip netns` keeps a file per named network namespace.
pub(crate) const NETNS_DIR: &str = "/run/netns";

/// The file that names namespace `name`: opened to enter it (`setns`).
pub(crate) fn namespace_path(name: &str) -> String {
    format!("{NETNS_DIR}/{name}")
}

/// Where one worker sits on the link (and, with latency, one end of the delay line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerEnd {
    /// Its namespace's name (`/run/netns/<namespace>`).
    pub namespace: String,
    /// The interface its traffic leaves by (c10d's `GLOO_SOCKET_IFNAME`).
    pub interface: String,
    /// Its address on that interface.
    pub address: Ipv4Addr,
}

impl WorkerEnd {
    /// Makes `command` start inside this end's namespace (entered between fork and exec)
    /// and tells c10d which interface to use (`GLOO_SOCKET_IFNAME`).
    pub fn start_inside(&self, command: &mut Command) -> std::io::Result<()> {
        let path = namespace_path(&self.namespace);
        let namespace = std::fs::File::open(&path).map_err(|error| {
            std::io::Error::new(error.kind(), format!("opening the network namespace {path}: {error}"))
        })?;
        command.env("GLOO_SOCKET_IFNAME", &self.interface);
        // SAFETY: setns is async-signal-safe; the file moves into the closure, so its
        // descriptor is open until the command is dropped (it is close-on-exec).
        unsafe {
            command.pre_exec(move || {
                if libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(())
    }
}
