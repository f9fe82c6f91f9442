//! Test-only fault injection for the runner's fault-isolation tests. A fault is chosen per
//! trial by the environment variable `STRATLAB_TEST_FAULT`, a comma-separated list of
//! `<trial-id substring>=<fault>`.
//!
//! Compiled only with the cargo feature `fault-injection`, which the crate's tests enable
//! (a dev-dependency on itself): a binary built without it — `just build`, `just
//! bench-matrix` — ignores the variable, so a stray environment can never turn a benchmark
//! into a crash test. A build with the feature records it, and the rules in force, in every
//! run's fingerprint.

/// Whether this binary can inject faults at all.
pub const ENABLED: bool = cfg!(feature = "fault-injection");

/// The fault rules in force (the variable's value), when this build honours them.
pub fn configured_rules() -> Option<String> {
    if ENABLED {
        std::env::var(Fault::VARIABLE).ok()
    } else {
        None
    }
}

/// A failure the worker provokes on purpose, after [`Fault::STEP`] steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A Rust panic.
    Panic,
    /// `abort()`, as a C++ `std::terminate` would.
    Abort,
    /// SIGKILL of the worker by itself, as the kernel's OOM killer or a user would.
    Sigkill,
    /// Sleep forever, so the runner's timeout must end the trial.
    Hang,
    /// NaN inputs from then on, so the loss diverges.
    Nan,
    /// Allocate far more memory than the trial's limit allows.
    Alloc,
}

impl Fault {
    /// Steps trained before the fault fires.
    pub const STEP: usize = 2;
    /// The environment variable that selects faults.
    pub const VARIABLE: &'static str = "STRATLAB_TEST_FAULT";

    /// The fault configured for rank `rank` of `trial_id`, if any; always `None` without
    /// the feature. A rule `<pattern>=<fault>` applies to every rank of matching trials,
    /// `<pattern>=<fault>@<rank>` to that rank only (one rank of a group dying).
    pub fn for_trial(trial_id: &str, rank: usize) -> Option<Fault> {
        let rules = configured_rules()?;
        rules.split(',').find_map(|rule| {
            let (pattern, fault) = rule.split_once('=')?;
            let (fault, only_rank) = match fault.split_once('@') {
                Some((fault, only)) => (fault, Some(only.trim().parse::<usize>().ok()?)),
                None => (fault, None),
            };
            (trial_id.contains(pattern.trim()) && only_rank.is_none_or(|only| only == rank))
                .then(|| Fault::parse(fault.trim()))
                .flatten()
        })
    }

    #[cfg(not(feature = "fault-injection"))]
    fn parse(_name: &str) -> Option<Fault> {
        None
    }

    #[cfg(feature = "fault-injection")]
    fn parse(name: &str) -> Option<Fault> {
        Some(match name {
            "panic" => Fault::Panic,
            "abort" => Fault::Abort,
            "sigkill" => Fault::Sigkill,
            "hang" => Fault::Hang,
            "nan" => Fault::Nan,
            "alloc" => Fault::Alloc,
            _ => return None,
        })
    }

    /// Provokes the fault (`Nan` is handled by the caller, which poisons the data); does
    /// nothing in a build without the feature.
    #[cfg(not(feature = "fault-injection"))]
    pub fn fire(self) {}

    /// Provokes the fault (`Nan` is handled by the caller, which poisons the data).
    #[cfg(feature = "fault-injection")]
    pub fn fire(self) {
        match self {
            Fault::Panic => panic!("injected test fault: panic"),
            Fault::Abort => std::process::abort(),
            Fault::Sigkill => {
                // SAFETY: kill(2) on our own pid has no memory-safety preconditions.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            }
            Fault::Hang => loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            },
            Fault::Nan => {}
            Fault::Alloc => {
                // 64 GiB of floats, left unwritten: over any memory limit a test sets, and over what
                // this machine would commit even without one, so it fails without touching pages.
                let huge = tch::Tensor::empty([16 << 30], (tch::Kind::Float, tch::Device::Cpu));
                eprintln!("allocated {} elements", huge.numel());
            }
        }
    }
}
