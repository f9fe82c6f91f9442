//! A trial's events as a Chrome trace (the Trace Event Format), for Perfetto or
//! `chrome://tracing`: one process per rank, one thread per lane, one slice per event.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use crate::{EventRow, Lane};

/// One entry of `traceEvents`: a complete event (`ph` "X") or metadata (`ph` "M").
#[derive(Serialize)]
struct TraceEvent<'a> {
    /// Slice name (the event kind) or metadata name (`process_name`, `thread_name`).
    name: &'a str,
    /// Category, filterable in the viewer: the event kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<&'a str>,
    /// Phase: "X" complete event, "M" metadata.
    ph: &'static str,
    /// Start, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<f64>,
    /// Duration, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    /// Process: the rank.
    pid: u32,
    /// Thread: the lane.
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<u32>,
    /// Event details, or the metadata's value.
    args: Args<'a>,
}

/// What a slice shows when selected, or the name a metadata event gives.
#[derive(Serialize)]
#[serde(untagged)]
enum Args<'a> {
    /// A timed event's details.
    Event {
        step: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        micro_batch: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        bytes: Option<u64>,
        name: &'a str,
    },
    /// The name of a process or thread.
    Name { name: String },
}

/// The events as a Chrome trace: `{"traceEvents": [...], "displayTimeUnit": "ms"}`.
///
/// Every event becomes one complete event (`ph` "X", `ts` and `dur` in microseconds) named
/// by its kind (so the viewer colours a kind alike everywhere), `pid` its rank, `tid` its
/// lane, and its step, micro-batch, bytes and label under `args`. Metadata events name each
/// rank's process `rank N` and its threads after their lanes.
pub fn chrome_trace(events: &[EventRow]) -> Value {
    let mut trace: Vec<TraceEvent<'_>> = Vec::with_capacity(events.len() + 8);
    let ranks: BTreeSet<u32> = events.iter().map(|e| e.rank).collect();
    let threads: BTreeSet<(u32, Lane)> = events.iter().map(|e| (e.rank, e.lane)).collect();
    for rank in ranks {
        trace.push(metadata("process_name", rank, None, format!("rank {rank}")));
    }
    for (rank, lane) in threads {
        trace.push(metadata("thread_name", rank, Some(lane.trace_tid()), lane.name().to_owned()));
    }
    for event in events {
        trace.push(TraceEvent {
            name: event.kind.name(),
            cat: Some(event.kind.name()),
            ph: "X",
            ts: Some(event.start_s * 1e6),
            dur: Some(event.duration_s() * 1e6),
            pid: event.rank,
            tid: Some(event.lane.trace_tid()),
            args: Args::Event {
                step: event.step,
                micro_batch: event.micro_batch,
                bytes: event.bytes,
                name: &event.name,
            },
        });
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Trace<'a> {
        trace_events: Vec<TraceEvent<'a>>,
        display_time_unit: &'static str,
    }
    serde_json::to_value(Trace { trace_events: trace, display_time_unit: "ms" })
        .expect("a trace has string keys and no maps that could fail to serialise")
}

/// A metadata event giving a process (rank) or thread (lane) its display name.
fn metadata(kind: &'static str, pid: u32, tid: Option<u32>, name: String) -> TraceEvent<'static> {
    TraceEvent { name: kind, cat: None, ph: "M", ts: None, dur: None, pid, tid, args: Args::Name { name } }
}
