//! One emulated link between a trial's workers: a network namespace per worker, joined by a
//! veth pair (two workers) or through a bridge in a hub namespace (more), every end's
//! egress shaped with tbf; where the link has a one-way latency, TUN devices and the
//! userspace [`DelayLine`] instead of veths (this kernel has no netem), still shaped by tbf.
//!
//! Namespaces are named `stratlab-<tag>-p<pid>-<serial>-…` and removed when the
//! [`EmulatedLink`] drops; what a killed process left is removed by [`sweep_leftovers`],
//! which knows a leftover by its owner's pid being gone. Interfaces are made inside the
//! namespaces (a veth's two ends each in its own), never in the root namespace, so deleting
//! the namespaces deletes them and their qdiscs, and their names need only be unique there.

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use stratlab_units::Link;

use crate::delay_line::DelayLine;
use crate::end::{WorkerEnd, NETNS_DIR};

/// Every namespace this crate makes starts so.
pub const NAMESPACE_PREFIX: &str = "stratlab-";
/// A worker's interface in its namespace (c10d's `GLOO_SOCKET_IFNAME`).
const WORKER_INTERFACE: &str = "stratlab0";
/// The bridge in the hub namespace, and its port towards worker `i` (`stratlab-p<i>`).
const BRIDGE: &str = "stratlab-br";
/// The workers' subnet, inside namespaces of their own (so runs side by side never clash).
const SUBNET: [u8; 3] = [10, 233, 0];
/// Kernel ticks per second assumed for tbf's burst: 100, the lowest Linux has, so the burst
/// covers a tick's worth of bytes whatever HZ the kernel was built with.
const LOWEST_HZ: f64 = 100.0;
/// tbf's burst at least (64 KiB: a TSO segment passes whole).
const MIN_BURST_BYTES: f64 = 65_536.0;
/// Seconds of traffic tbf may queue before dropping: TCP backs off through its own small
/// queues long before, but an all-reduce's burst of a few MB must not be dropped.
const QUEUE_S: f64 = 0.25;

/// Why a link cannot be emulated here, or a command that failed.
#[derive(Debug, thiserror::Error)]
pub enum EmulationError {
    /// Not root (no CAP_NET_ADMIN), or `ip`/`tc` missing.
    #[error("links cannot be emulated here: {0}")]
    Infeasible(String),
    /// A command of iproute2 failed.
    #[error("`{command}` failed: {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// What it said.
        stderr: String,
    },
    /// The delay line failed.
    #[error("delay line: {0}")]
    DelayLine(String),
}

/// An emulated link between `workers` namespaces; removed on drop, whatever happened.
pub struct EmulatedLink {
    ends: Vec<WorkerEnd>,
    /// Every namespace made (the workers' and the hub's), deleted on drop.
    namespaces: Vec<String>,
    /// The TUN devices' forwarder, where the link has latency; dropped before the namespaces.
    delay_line: Option<DelayLine>,
}

impl EmulatedLink {
    /// Makes the namespaces, interfaces and qdiscs of `link` between `workers` workers
    /// (at least 2), named after `tag` (the run) and this process. Whatever was made before
    /// an error is removed again.
    pub fn create(tag: &str, workers: usize, link: &Link) -> Result<EmulatedLink, EmulationError> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        check_feasible()?;
        let pid = std::process::id();
        let serial = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tag: String = tag.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
        let base = format!("{NAMESPACE_PREFIX}{tag}-p{pid}-{serial}");
        let mut emulated = EmulatedLink { ends: Vec::new(), namespaces: Vec::new(), delay_line: None };
        for worker in 0..workers.max(2) {
            let namespace = format!("{base}-w{worker}");
            ip(&["netns", "add", &namespace])?;
            emulated.namespaces.push(namespace.clone());
            ip(&["-n", &namespace, "link", "set", "lo", "up"])?;
            emulated.ends.push(WorkerEnd {
                namespace,
                interface: WORKER_INTERFACE.to_owned(),
                address: Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], worker as u8 + 1),
            });
        }
        if link.latency.0 > 0.0 {
            emulated.tun_links(link)?;
        } else {
            emulated.veth_links(&base, link)?;
        }
        Ok(emulated)
    }

    /// The workers' ends, worker 0 first (its address is the rendezvous's).
    pub fn ends(&self) -> &[WorkerEnd] {
        &self.ends
    }

    /// CPU seconds the delay line has used so far (0 without one).
    pub fn delay_line_cpu_s(&self) -> f64 {
        self.delay_line.as_ref().map_or(0.0, DelayLine::cpu_seconds)
    }

    /// Veth pairs: one between the two workers, or one from each worker to a bridge in a
    /// hub namespace; every end shaped, so each direction of each hop passes one tbf.
    fn veth_links(&mut self, base: &str, link: &Link) -> Result<(), EmulationError> {
        let ends = self.ends.clone();
        if let [a, b] = ends.as_slice() {
            veth(a, (&b.namespace, &b.interface))?;
            for end in [a, b] {
                configure(end, link)?;
            }
            return Ok(());
        }
        let hub = format!("{base}-hub");
        ip(&["netns", "add", &hub])?;
        self.namespaces.push(hub.clone());
        ip(&["-n", &hub, "link", "add", BRIDGE, "type", "bridge"])?;
        ip(&["-n", &hub, "link", "set", BRIDGE, "up"])?;
        for (worker, end) in ends.iter().enumerate() {
            let port = format!("stratlab-p{worker}");
            veth(end, (&hub, &port))?;
            ip(&["-n", &hub, "link", "set", &port, "master", BRIDGE])?;
            ip(&["-n", &hub, "link", "set", &port, "up"])?;
            shape(&hub, &port, link)?;
            configure(end, link)?;
        }
        Ok(())
    }

    /// A TUN device per worker, forwarded between them by the delay line after the one-way
    /// latency, each shaped by tbf.
    fn tun_links(&mut self, link: &Link) -> Result<(), EmulationError> {
        let delay = Duration::from_secs_f64(link.latency.0);
        self.delay_line =
            Some(DelayLine::start(&self.ends, delay).map_err(|error| EmulationError::DelayLine(error.to_string()))?);
        for end in self.ends.clone() {
            configure(&end, link)?;
        }
        Ok(())
    }
}

impl Drop for EmulatedLink {
    fn drop(&mut self) {
        // The TUN devices go with the delay line's descriptors; deleting a namespace deletes
        // the interfaces inside it, and with a veth its peer, and with them their qdiscs.
        self.delay_line.take();
        for namespace in &self.namespaces {
            let _ = ip(&["netns", "delete", namespace]);
        }
    }
}

/// A veth pair made with its ends already in their namespaces: `end`'s interface, and
/// `peer` (namespace, interface).
fn veth(end: &WorkerEnd, (peer_namespace, peer): (&str, &str)) -> Result<(), EmulationError> {
    let (namespace, interface) = (end.namespace.as_str(), end.interface.as_str());
    ip(&[
        "link",
        "add",
        "name",
        interface,
        "netns",
        namespace,
        "type",
        "veth",
        "peer",
        "name",
        peer,
        "netns",
        peer_namespace,
    ])
}

/// Addresses `end`'s interface in its namespace, brings it up and shapes its egress.
fn configure(end: &WorkerEnd, link: &Link) -> Result<(), EmulationError> {
    let address = format!("{}/24", end.address);
    ip(&["-n", &end.namespace, "addr", "add", &address, "dev", &end.interface])?;
    ip(&["-n", &end.namespace, "link", "set", &end.interface, "up"])?;
    shape(&end.namespace, &end.interface, link)
}

/// tbf on `interface`'s egress at the link's bandwidth: a burst of a tick's bytes at the
/// lowest HZ (at least 64 KiB: over a veth at 1 Gbit/s a 10 KB burst gave 857 Mbit/s,
/// 256 KB gave 944), and a queue of [`QUEUE_S`] of traffic.
fn shape(namespace: &str, interface: &str, link: &Link) -> Result<(), EmulationError> {
    let rate_bytes = link.bandwidth.0;
    let burst = (rate_bytes / LOWEST_HZ).max(MIN_BURST_BYTES).ceil() as u64;
    let limit = ((rate_bytes * QUEUE_S).ceil() as u64).max(2 * burst);
    let rate = format!("{}bit", (rate_bytes * 8.0).round() as u64);
    let (burst, limit) = (burst.to_string(), limit.to_string());
    tc(namespace, &["qdisc", "add", "dev", interface, "root", "tbf", "rate", &rate, "burst", &burst, "limit", &limit])
}

/// Whether links can be emulated here: root (CAP_NET_ADMIN), `ip` and `tc`; the reason if not.
pub fn check_feasible() -> Result<(), EmulationError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(EmulationError::Infeasible("needs root (CAP_NET_ADMIN) to make network namespaces".into()));
    }
    for tool in ["ip", "tc"] {
        let found = Command::new(tool).arg("-V").output().is_ok_and(|out| out.status.success());
        if !found {
            return Err(EmulationError::Infeasible(format!(
                "`{tool}` (iproute2) is not installed: `just setup` installs it"
            )));
        }
    }
    Ok(())
}

/// Removes what processes that are gone left behind: every namespace named
/// `stratlab-…-p<pid>-…` whose pid no longer runs (with the interfaces and qdiscs inside).
/// Returns the names removed. Another process's live link is left alone.
pub fn sweep_leftovers() -> Result<Vec<String>, EmulationError> {
    let mut removed = Vec::new();
    for (name, owner) in namespaces_made() {
        if !alive(owner) {
            ip(&["netns", "delete", &name])?;
            removed.push(name);
        }
    }
    Ok(removed)
}

/// The namespaces process `pid` made and has not removed: a link must leave nothing once
/// its trial, probe or process is over.
pub fn made_by(pid: u32) -> Vec<String> {
    namespaces_made().into_iter().filter(|&(_, owner)| owner == pid).map(|(name, _)| name).collect()
}

/// Every namespace this module named, and the process that made it.
fn namespaces_made() -> Vec<(String, u32)> {
    std::fs::read_dir(NETNS_DIR)
        .map(|entries| entries.filter_map(|entry| entry.ok()?.file_name().into_string().ok()).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|name| {
            let owner = name.strip_prefix(NAMESPACE_PREFIX).and_then(namespace_owner)?;
            Some((name, owner))
        })
        .collect()
}

/// The pid in `<tag>-p<pid>-<serial>-…`: the last `-p<digits>-` part.
fn namespace_owner(rest: &str) -> Option<u32> {
    rest.split('-').rev().find_map(|part| part.strip_prefix('p')?.parse().ok())
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let result = unsafe { libc::kill(pid as libc::pid_t, 0) };
    result == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Runs `ip args`; its stderr is the error.
fn ip(args: &[&str]) -> Result<(), EmulationError> {
    run("ip", args)
}

/// Runs `tc args` inside `namespace`.
fn tc(namespace: &str, args: &[&str]) -> Result<(), EmulationError> {
    let mut full = vec!["-n", namespace];
    full.extend_from_slice(args);
    run("tc", &full)
}

fn run(tool: &str, args: &[&str]) -> Result<(), EmulationError> {
    let command = format!("{tool} {}", args.join(" "));
    let out = Command::new(tool)
        .args(args)
        .output()
        .map_err(|error| EmulationError::Infeasible(format!("cannot run `{tool}` (iproute2): {error}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(EmulationError::Command { command, stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_read_from_the_names_this_module_gives() {
        assert_eq!(namespace_owner("20261126T014254Z-predictor-validation-p4242-0-w1"), Some(4242));
        assert_eq!(namespace_owner("run-p17-3-hub"), Some(17));
        assert_eq!(namespace_owner("no-owner-here"), None);
    }

    #[test]
    fn interface_names_fit_the_kernels_15_bytes() {
        for name in [WORKER_INTERFACE, BRIDGE, "stratlab-p255"] {
            assert!(name.len() <= 15, "{name}");
        }
    }
}
