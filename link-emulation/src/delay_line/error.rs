//! Why a delay line could not start.

use std::io;
use std::net::Ipv4Addr;

/// Why a delay line could not start.
#[derive(Debug, thiserror::Error)]
pub enum DelayLineError {
    /// The interface name cannot be a Linux interface name.
    #[error("interface name {interface:?} (namespace {namespace}) {reason}")]
    InvalidInterfaceName { namespace: String, interface: String, reason: &'static str },
    /// Two ends claim the same address, so packets to it would have no single owner.
    #[error("address {address} is given to both {first} and {second}")]
    DuplicateAddress { address: Ipv4Addr, first: String, second: String },
    /// The namespace's file under `/run/netns` cannot be opened (most often: no such namespace).
    #[error("cannot open {path} (network namespace {namespace}): {source}")]
    OpenNamespace { namespace: String, path: String, source: io::Error },
    /// `setns` into the namespace failed.
    #[error("cannot enter network namespace {namespace} (setns): {source}{}", root_hint(.source))]
    EnterNamespace { namespace: String, source: io::Error },
    /// `/dev/net/tun` cannot be opened.
    #[error("cannot open /dev/net/tun in network namespace {namespace}: {source}{}", root_hint(.source))]
    OpenTunDevice { namespace: String, source: io::Error },
    /// The kernel refused to create the TUN device.
    #[error("TUNSETIFF on {interface} in network namespace {namespace}: {source}{}", root_hint(.source))]
    CreateTun { namespace: String, interface: String, source: io::Error },
    /// A thread or the stop signal could not be set up.
    #[error("cannot start the delay line's {what}: {source}")]
    Start { what: String, source: io::Error },
}

/// Tells the reader that a permission error means running without CAP_NET_ADMIN / CAP_SYS_ADMIN.
fn root_hint(error: &io::Error) -> &'static str {
    match error.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => " (needs root)",
        _ => "",
    }
}
