//! Measured bandwidth of the machine's links: point-to-point transfers and all-reduces of
//! a given size, timed before any training so strategy results can be read against them.

use std::str::FromStr;

use polars::prelude::{ChunkAgg, ChunkQuantile, Float64Chunked, NewChunkedArray};
use serde::{Deserialize, Serialize};
use stratlab_columns::Columns;
use stratlab_strategy_spec::UnknownName;
use stratlab_units::Link;
use strum::VariantArray;

use crate::Table;

/// What a probe measured, as stored in `probes.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::Display, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum ProbeKind {
    /// One rank sends, one receives (`src` → `dst`).
    P2p,
    /// All ranks all-reduce a buffer.
    AllReduce,
    /// All ranks all-reduce a buffer while every core of theirs computes, as a training
    /// step's buckets do: on a machine whose workers share the cores, the collective then
    /// waits for a core as well as for the wire.
    AllReduceLoaded,
    /// All ranks gather every rank's equal chunk into one buffer (`bytes` is the gathered
    /// buffer), as sharded data parallelism gathers a unit's weights.
    AllGather,
    /// [`ProbeKind::AllGather`] with every core busy, as [`ProbeKind::AllReduceLoaded`].
    AllGatherLoaded,
    /// All ranks reduce a buffer (`bytes`) and each keeps its chunk of the result, as
    /// sharded data parallelism reduce-scatters a unit's gradients.
    ReduceScatter,
    /// [`ProbeKind::ReduceScatter`] with every core busy, as [`ProbeKind::AllReduceLoaded`].
    ReduceScatterLoaded,
}

stratlab_columns::text_column!(ProbeKind);

impl ProbeKind {
    /// Every kind, in declaration order.
    pub const ALL: &'static [ProbeKind] = Self::VARIANTS;

    /// The name stored in `probes.kind`.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Bus bandwidth ÷ algorithm bandwidth for `world_size` ranks, as nccl-tests defines it
    /// (doc/PERFORMANCE.md): a ring all-reduce moves `2(W−1)/W` times the buffer over each
    /// link, an all-gather or a reduce-scatter `(W−1)/W`, so bus bandwidth compares with the
    /// link's peak whatever W is; 1 for p2p.
    pub fn bus_factor(self, world_size: u32) -> f64 {
        let ranks = f64::from(world_size);
        match self {
            ProbeKind::P2p => 1.0,
            _ if world_size == 0 => 0.0,
            ProbeKind::AllReduce | ProbeKind::AllReduceLoaded => 2.0 * (ranks - 1.0) / ranks,
            ProbeKind::AllGather
            | ProbeKind::AllGatherLoaded
            | ProbeKind::ReduceScatter
            | ProbeKind::ReduceScatterLoaded => (ranks - 1.0) / ranks,
        }
    }

    /// Whether the ranks' cores were kept busy while it was timed.
    pub fn loaded(self) -> bool {
        matches!(self, ProbeKind::AllReduceLoaded | ProbeKind::AllGatherLoaded | ProbeKind::ReduceScatterLoaded)
    }
}

impl FromStr for ProbeKind {
    type Err = UnknownName;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        UnknownName::parse("probe kind", name)
    }
}

/// Algorithm bandwidth in GB/s (1e9 bytes per second): `bytes ÷ seconds`.
pub fn algorithm_gbps(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / seconds / 1e9
}

/// The link point-to-point rows measured: the one-way latency of the smallest message and
/// the bandwidth of the largest (its size over its time less that latency), each time the
/// median over the rows of that size; `None` without point-to-point rows. What the model
/// predicts over and the report lists a pair of hosts by.
pub fn point_to_point_link<'a>(rows: impl IntoIterator<Item = &'a ProbeRow>) -> Option<Link> {
    let mut by_size: std::collections::BTreeMap<u64, Vec<f64>> = std::collections::BTreeMap::new();
    for row in rows.into_iter().filter(|row| row.kind == ProbeKind::P2p) {
        by_size.entry(row.bytes).or_default().push(row.median_s);
    }
    let (_, smallest_times) = by_size.first_key_value()?;
    let (&largest, largest_times) = by_size.last_key_value()?;
    let latency_s = crate::stats::median(smallest_times).unwrap_or(0.0);
    let largest_s = crate::stats::median(largest_times).unwrap_or(0.0);
    Some(Link::new(largest as f64 / (largest_s - latency_s).max(1e-9), latency_s))
}

/// What was probed, before timing: everything of a [`ProbeRow`] but the times.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeSpec {
    /// The run the probe belongs to.
    pub run_id: String,
    /// Point-to-point or all-reduce.
    pub kind: ProbeKind,
    /// Communication backend (`gloo`, `nccl`).
    pub backend: String,
    /// Ranks in the process group.
    pub world_size: u32,
    /// Sending rank of a p2p pair.
    pub src: Option<u32>,
    /// Receiving rank of a p2p pair.
    pub dst: Option<u32>,
    /// Bytes per transfer (the buffer size).
    pub bytes: u64,
}

/// Why repeated probe times cannot make a [`ProbeRow`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProbeError {
    /// No repeat was timed.
    #[error("{kind} probe of {bytes} bytes has no times")]
    NoTimes {
        /// The probe's kind.
        kind: ProbeKind,
        /// Its size.
        bytes: u64,
    },
    /// A time that is zero, negative or not finite would give an infinite bandwidth.
    #[error("{kind} probe of {bytes} bytes has time {time_s} s; times must be positive and finite")]
    BadTime {
        /// The probe's kind.
        kind: ProbeKind,
        /// Its size.
        bytes: u64,
        /// The offending time, seconds.
        time_s: f64,
    },
    /// A process group has at least one rank.
    #[error("{kind} probe has world size 0")]
    EmptyWorld {
        /// The probe's kind.
        kind: ProbeKind,
    },
}

/// One probe result: a transfer size timed `repeats` times, as stored in `probes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Columns)]
pub struct ProbeRow {
    /// The run the probe belongs to.
    pub run_id: String,
    /// What was timed (`p2p`, `all_reduce`, `all_reduce_loaded`, …).
    pub kind: ProbeKind,
    /// Communication backend (`gloo`, `nccl`).
    pub backend: String,
    /// Ranks in the process group.
    pub world_size: u32,
    /// Sending rank of a p2p pair.
    pub src: Option<u32>,
    /// Receiving rank of a p2p pair.
    pub dst: Option<u32>,
    /// The sending rank's host (a p2p pair across nodes names two); `None` for collectives
    /// and in runs made before it was stored.
    #[serde(default)]
    pub src_host: Option<String>,
    /// The receiving rank's host.
    #[serde(default)]
    pub dst_host: Option<String>,
    /// Distinct hosts the group's ranks ran on (2 for a probe across two nodes); `None` in
    /// runs made before it was stored.
    #[serde(default)]
    pub hosts: Option<u32>,
    /// Bytes per transfer.
    pub bytes: u64,
    /// Timed repeats (after any warm-up the prober discarded).
    pub repeats: u32,
    /// Median time of one transfer, seconds.
    pub median_s: f64,
    /// Fastest transfer, seconds.
    pub min_s: f64,
    /// Slowest transfer, seconds.
    pub max_s: f64,
    /// Mean time, seconds: what a transfer costs on average where its times are bimodal
    /// (an all-reduce on busy cores either finds one at once or waits for the scheduler),
    /// so the expected cost of a step's many transfers. `None` in runs made before it was
    /// stored.
    pub mean_s: Option<f64>,
    /// The emulated link the ranks talked over, stored by its name (`1 Gbit/s`,
    /// `100 Mbit/s · 1 ms`); `None` on the machine's own links, and in runs made before it
    /// was stored.
    #[serde(default, with = "stratlab_units::stored_link")]
    pub link: Option<stratlab_units::Link>,
    /// `bytes ÷ median_s`, GB/s (1e9 bytes/s).
    pub algorithm_gbps: f64,
    /// `algorithm_gbps × ProbeKind::bus_factor(world_size)`: `2(W−1)/W` for all-reduce
    /// (nccl-tests' bus bandwidth), equal to `algorithm_gbps` for p2p.
    pub bus_gbps: f64,
}

impl ProbeRow {
    /// The row for `spec` timed as `times_s` (one entry per repeat): median (of an even
    /// count, the mean of the middle two), min, max, mean, and bandwidths from the median.
    pub fn from_times(spec: ProbeSpec, times_s: &[f64]) -> Result<ProbeRow, ProbeError> {
        let (kind, bytes) = (spec.kind, spec.bytes);
        if spec.world_size == 0 {
            return Err(ProbeError::EmptyWorld { kind });
        }
        if let Some(&time_s) = times_s.iter().find(|t| !(t.is_finite() && **t > 0.0)) {
            return Err(ProbeError::BadTime { kind, bytes, time_s });
        }
        let times = Float64Chunked::from_slice("times_s".into(), times_s);
        let (Some(median_s), Some(min_s), Some(max_s), Some(mean_s)) =
            (times.median(), times.min(), times.max(), times.mean())
        else {
            return Err(ProbeError::NoTimes { kind, bytes });
        };
        let algorithm = algorithm_gbps(bytes, median_s);
        Ok(ProbeRow {
            run_id: spec.run_id,
            kind,
            backend: spec.backend,
            world_size: spec.world_size,
            src: spec.src,
            dst: spec.dst,
            src_host: None,
            dst_host: None,
            hosts: None,
            bytes,
            repeats: u32::try_from(times_s.len()).unwrap_or(u32::MAX),
            median_s,
            min_s,
            max_s,
            mean_s: Some(mean_s),
            link: None,
            algorithm_gbps: algorithm,
            bus_gbps: algorithm * kind.bus_factor(spec.world_size),
        })
    }
}

impl Table for ProbeRow {
    const NAME: &'static str = crate::table_names::PROBES;
    const PER_TRIAL: bool = false;

    fn trial_id(&self) -> Option<&str> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: ProbeKind, world_size: u32) -> ProbeSpec {
        ProbeSpec {
            run_id: "r".into(),
            kind,
            backend: "gloo".into(),
            world_size,
            src: None,
            dst: None,
            bytes: 1_000_000_000,
        }
    }

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let row = ProbeRow::from_times(spec(ProbeKind::P2p, 2), &[4.0, 1.0, 2.0, 8.0]).unwrap();
        assert_eq!((row.median_s, row.min_s, row.max_s, row.repeats), (3.0, 1.0, 8.0, 4));
        assert_eq!(row.mean_s, Some(3.75));
        // 1e9 bytes in 3 s.
        assert_eq!(row.algorithm_gbps, 1.0 / 3.0);
        assert_eq!(row.bus_gbps, row.algorithm_gbps);
    }

    #[test]
    fn bus_bandwidth_follows_each_collective_s_ring() {
        // Four ranks: an all-reduce's ring moves 2·3/4 of the buffer over each link, a
        // gather's or a scatter's 3/4.
        assert_eq!(ProbeKind::AllReduceLoaded.bus_factor(4), 1.5);
        assert_eq!(ProbeKind::AllGather.bus_factor(4), 0.75);
        assert_eq!(ProbeKind::ReduceScatterLoaded.bus_factor(4), 0.75);
        assert_eq!(ProbeKind::AllGather.bus_factor(0), 0.0);
        assert!(ProbeKind::AllGatherLoaded.loaded() && !ProbeKind::ReduceScatter.loaded());
    }

    #[test]
    fn times_that_give_no_bandwidth_are_rejected() {
        let all_reduce = || spec(ProbeKind::AllReduce, 2);
        assert!(matches!(ProbeRow::from_times(all_reduce(), &[]), Err(ProbeError::NoTimes { .. })));
        let zero = ProbeRow::from_times(all_reduce(), &[1.0, 0.0]).unwrap_err();
        assert_eq!(zero, ProbeError::BadTime { kind: ProbeKind::AllReduce, bytes: 1_000_000_000, time_s: 0.0 });
        assert!(ProbeRow::from_times(all_reduce(), &[f64::NAN]).is_err());
        assert!(matches!(
            ProbeRow::from_times(spec(ProbeKind::AllReduce, 0), &[1.0]),
            Err(ProbeError::EmptyWorld { .. })
        ));
    }

    #[test]
    fn kind_names_round_trip_and_match_serde() {
        let names: Vec<&str> = ProbeKind::ALL.iter().map(|kind| kind.name()).collect();
        assert_eq!(
            names,
            [
                "p2p",
                "all_reduce",
                "all_reduce_loaded",
                "all_gather",
                "all_gather_loaded",
                "reduce_scatter",
                "reduce_scatter_loaded"
            ]
        );
        for &kind in ProbeKind::ALL {
            assert_eq!(kind.name().parse::<ProbeKind>(), Ok(kind));
            assert_eq!(kind.to_string(), kind.name());
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{}\"", kind.name()));
        }
        assert_eq!(
            "broadcast".parse::<ProbeKind>().unwrap_err().to_string(),
            "unknown probe kind `broadcast`; valid: p2p, all_reduce, all_reduce_loaded, all_gather, \
             all_gather_loaded, reduce_scatter, reduce_scatter_loaded"
        );
    }
}
