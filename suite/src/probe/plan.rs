//! What a probe measures, checked before anything starts: the plan every rank follows, the
//! shape of one measurement, and the constants the ranks agree on.

use std::time::Duration;

use stratlab_comm::Backend;
use stratlab_results::ProbeKind;

use crate::cli::{AllReduceLoad, ProbeArgs, DEFAULT_SIZES};
use crate::exit::InputError;

/// Bytes per element of the probe's buffers (float32, as gradients are all-reduced).
pub(super) const ELEMENT_BYTES: u64 = 4;
/// The backend the probe measures: Gloo, on the CPU tensors this lab trains with.
pub(super) const BACKEND: Backend = Backend::Gloo;

/// A probe needs two ranks: with one there is no pair to time and no traffic to all-reduce.
pub(super) fn check_world_size(world_size: usize, source: &str) -> Result<(), InputError> {
    match world_size {
        0 => Err(InputError(format!("{source} must be at least 2, got 0"))),
        1 => Err(InputError(format!(
            "{source} is 1: with a single rank there is nothing to measure (no pair of ranks, no traffic); \
             probe at least 2 ranks"
        ))),
        _ => Ok(()),
    }
}

/// What every rank measures, checked once before anything starts.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ProbePlan {
    /// Message sizes, bytes, in the order given.
    pub(super) sizes: Vec<u64>,
    /// Untimed iterations before the timed ones, per pair (or all-reduce) and size.
    pub(super) warmup: usize,
    /// Timed iterations per pair (or all-reduce) and size.
    pub(super) repeats: usize,
    /// How long a rank waits for its peers (rendezvous, each operation).
    pub(super) timeout: Duration,
    /// The cores' states the collectives are timed in, each once, idle before loaded.
    pub(super) all_reduce: Vec<AllReduceLoad>,
    /// The collectives timed in each of those states.
    pub(super) collectives: Vec<Collective>,
}

/// A collective the probe times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Collective {
    AllReduce,
    AllGather,
    ReduceScatter,
}

impl Collective {
    /// The kind of its rows in `load`.
    pub(super) fn kind(self, load: AllReduceLoad) -> ProbeKind {
        let loaded = load == AllReduceLoad::Loaded;
        match self {
            Collective::AllReduce if loaded => ProbeKind::AllReduceLoaded,
            Collective::AllReduce => ProbeKind::AllReduce,
            Collective::AllGather if loaded => ProbeKind::AllGatherLoaded,
            Collective::AllGather => ProbeKind::AllGather,
            Collective::ReduceScatter if loaded => ProbeKind::ReduceScatterLoaded,
            Collective::ReduceScatter => ProbeKind::ReduceScatter,
        }
    }

    /// The message of `bytes` it can time over `world_size` ranks: a gather's or a
    /// scatter's buffer splits into equal float32 chunks, so it is rounded up to a multiple
    /// of `world_size` elements.
    pub(super) fn message_bytes(self, bytes: u64, world_size: usize) -> u64 {
        match self {
            Collective::AllReduce => bytes,
            Collective::AllGather | Collective::ReduceScatter => {
                let whole = ELEMENT_BYTES * world_size.max(1) as u64;
                bytes.div_ceil(whole) * whole
            }
        }
    }
}

impl ProbePlan {
    pub(super) fn from_args(args: &ProbeArgs) -> Result<ProbePlan, InputError> {
        if args.sizes.is_empty() {
            return Err(InputError(format!("--sizes is empty; give sizes like {DEFAULT_SIZES}")));
        }
        if let Some(bad) = args.sizes.iter().find(|&&bytes| bytes == 0 || bytes % ELEMENT_BYTES != 0) {
            return Err(InputError(format!(
                "--sizes: {bad} bytes is not a positive multiple of {ELEMENT_BYTES} (the buffers are float32)"
            )));
        }
        if args.repeats == 0 {
            return Err(InputError("--repeats must be at least 1".into()));
        }
        if args.timeout_s == 0 || args.time_limit_s == 0 {
            return Err(InputError("--timeout and --time-limit must be at least 1 second".into()));
        }
        if args.threads == Some(0) {
            return Err(InputError("--threads must be at least 1".into()));
        }
        let mut all_reduce = args.all_reduce.clone();
        all_reduce.sort_unstable();
        all_reduce.dedup();
        if all_reduce.is_empty() {
            return Err(InputError("--all-reduce is empty; give idle, loaded or idle,loaded".into()));
        }
        let mut collectives = vec![Collective::AllReduce];
        if args.gather_scatter {
            collectives.extend([Collective::AllGather, Collective::ReduceScatter]);
        }
        Ok(ProbePlan {
            sizes: args.sizes.clone(),
            warmup: args.warmup,
            repeats: args.repeats,
            timeout: Duration::from_secs(args.timeout_s),
            all_reduce,
            collectives,
        })
    }
}

/// The timed repeats of one probe: a p2p pair (`src` → `dst`) or a collective, one size.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Measurement {
    pub(super) kind: ProbeKind,
    pub(super) src: Option<usize>,
    pub(super) dst: Option<usize>,
    pub(super) bytes: u64,
    /// One entry per timed repeat: one-way time of a p2p transfer, or the slowest rank's
    /// time of a collective.
    pub(super) times_s: Vec<f64>,
}
