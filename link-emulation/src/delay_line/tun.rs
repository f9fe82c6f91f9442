//! A TUN device made inside a network namespace: the delay line's ends.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::error::DelayLineError;
use super::thread_cpu::clock_ns;
use crate::end::{namespace_path, WorkerEnd};

/// `TUNSETIFF` from `<linux/if_tun.h>`: `_IOW('T', 202, int)`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// A layer-3 device: reads and writes carry bare IP packets.
const IFF_TUN: libc::c_short = 0x0001;
/// No 4-byte packet-information header before each packet.
const IFF_NO_PI: libc::c_short = 0x1000;
pub(super) fn check_interface_name(end: &WorkerEnd) -> Result<(), DelayLineError> {
    let reason = if end.interface.is_empty() {
        Some("is empty")
    } else if end.interface.len() > libc::IFNAMSIZ - 1 {
        Some("is longer than 15 bytes")
    } else if end.interface.bytes().any(|byte| byte == 0 || byte == b'/' || byte.is_ascii_whitespace()) {
        Some("holds a NUL, '/' or whitespace")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(DelayLineError::InvalidInterfaceName {
            namespace: end.namespace.clone(),
            interface: end.interface.clone(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Creates `end`'s TUN inside its namespace from a short-lived thread, since `setns` moves
/// only the calling thread; the descriptor keeps working from any thread afterwards. Also
/// returns that thread's CPU time.
pub(super) fn create_tun_in_namespace(end: &WorkerEnd) -> Result<(OwnedFd, u64), DelayLineError> {
    let path = namespace_path(&end.namespace);
    let namespace_file = std::fs::File::open(&path).map_err(|source| DelayLineError::OpenNamespace {
        namespace: end.namespace.clone(),
        path: path.clone(),
        source,
    })?;
    let end = end.clone();
    std::thread::Builder::new()
        .name("dl-setns".into())
        .spawn(move || {
            // SAFETY: a valid namespace descriptor; affects only this thread, which ends here.
            if unsafe { libc::setns(namespace_file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(DelayLineError::EnterNamespace {
                    namespace: end.namespace.clone(),
                    source: io::Error::last_os_error(),
                });
            }
            let tun = open_tun(&end)?;
            Ok((tun, clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0)))
        })
        .map_err(|source| DelayLineError::Start { what: "namespace thread".into(), source })?
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Opens `/dev/net/tun` and makes it `end.interface`, in the calling thread's namespace.
fn open_tun(end: &WorkerEnd) -> Result<OwnedFd, DelayLineError> {
    let device = CString::new("/dev/net/tun").expect("no NUL in a literal");
    // SAFETY: a NUL-terminated path; the result is checked before use.
    let fd = unsafe { libc::open(device.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK) };
    if fd < 0 {
        return Err(DelayLineError::OpenTunDevice {
            namespace: end.namespace.clone(),
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    let tun = unsafe { OwnedFd::from_raw_fd(fd) };

    // SAFETY: ifreq is plain data; all zeroes is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    // The name was checked: at most 15 bytes and no NUL, so the zeroed tail terminates it.
    for (slot, byte) in request.ifr_name.iter_mut().zip(end.interface.bytes()) {
        *slot = byte as libc::c_char;
    }
    request.ifr_ifru.ifru_flags = IFF_TUN | IFF_NO_PI;
    // SAFETY: TUNSETIFF reads and writes one ifreq, which outlives the call.
    if unsafe { libc::ioctl(tun.as_raw_fd(), TUNSETIFF as _, &mut request as *mut libc::ifreq) } != 0 {
        return Err(DelayLineError::CreateTun {
            namespace: end.namespace.clone(),
            interface: end.interface.clone(),
            source: io::Error::last_os_error(),
        });
    }
    Ok(tun)
}
