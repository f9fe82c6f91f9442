//! Why a delay line could not start.

use std::io;
use std::net::Ipv4Addr;

/// Why a delay line could not start.
#[derive(Debug, thiserror::Error)]
pub enum DelayLineError {
    /// The interface name cannot be a Linux interface name.
    #[error("interface name {interface:?} (namespace {namespace}) {reason}")]
    InvalidInterfaceName {
        /// The network namespace.
        namespace: String,
        /// The interface.
        interface: String,
        /// What is wrong with the name.
        reason: &'static str,
    },
    /// Two ends claim the same address, so packets to it would have no single owner.
    #[error("address {address} is given to both {first} and {second}")]
    DuplicateAddress {
        /// The address.
        address: Ipv4Addr,
        /// One end claiming it.
        first: String,
        /// The other end claiming it.
        second: String,
    },
    /// The namespace's file under `/run/netns` cannot be opened (most often: no such namespace).
    #[error("cannot open {path} (network namespace {namespace}): {source}")]
    OpenNamespace {
        /// The network namespace.
        namespace: String,
        /// The namespace's file.
        path: String,
        /// What the system said.
        source: io::Error,
    },
    /// `setns` into the namespace failed.
    #[error("cannot enter network namespace {namespace} (setns): {source}{}", root_hint(.source))]
    EnterNamespace {
        /// The network namespace.
        namespace: String,
        /// What the system said.
        source: io::Error,
    },
    /// `/dev/net/tun` cannot be opened.
    #[error("cannot open /dev/net/tun in network namespace {namespace}: {source}{}", root_hint(.source))]
    OpenTunDevice {
        /// The network namespace.
        namespace: String,
        /// What the system said.
        source: io::Error,
    },
    /// The kernel refused to create the TUN device.
    #[error("TUNSETIFF on {interface} in network namespace {namespace}: {source}{}", root_hint(.source))]
    CreateTun {
        /// The network namespace.
        namespace: String,
        /// The interface.
        interface: String,
        /// What the system said.
        source: io::Error,
    },
    /// A thread or the stop signal could not be set up.
    #[error("cannot start the delay line's {what}: {source}")]
    Start {
        /// What could not be started.
        what: String,
        /// What the system said.
        source: io::Error,
    },
}

/// Tells the reader that a permission error means running without CAP_NET_ADMIN / CAP_SYS_ADMIN.
fn root_hint(error: &io::Error) -> &'static str {
    match error.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => " (needs root)",
        _ => "",
    }
}
