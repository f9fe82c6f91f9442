//! What every test that needs network namespaces shares: it either runs, or skips knowingly
//! when STRATLAB_SKIP_NETNS asks; it never passes by returning early on its own.

use std::fmt::Display;

/// `made`, or `None` when making it failed and STRATLAB_SKIP_NETNS asks to skip (said on
/// stderr); otherwise the failure fails the test, saying what the test needs.
pub fn or_skip<T, E: Display>(made: Result<T, E>) -> Option<T> {
    match made {
        Ok(made) => Some(made),
        Err(reason) if std::env::var_os("STRATLAB_SKIP_NETNS").is_some() => {
            eprintln!("skipped as STRATLAB_SKIP_NETNS asks: network namespaces cannot be made here: {reason}");
            None
        }
        Err(reason) => panic!(
            "network namespaces cannot be made here ({reason}): this test needs root (CAP_NET_ADMIN) and \
             iproute2 (`just setup` installs it); run it as root, or set STRATLAB_SKIP_NETNS=1 to skip it knowingly"
        ),
    }
}

/// Whether links can be emulated here ([`crate::check_feasible`]), under [`or_skip`]'s rule.
pub fn feasible_or_skip() -> bool {
    or_skip(crate::check_feasible()).is_some()
}
