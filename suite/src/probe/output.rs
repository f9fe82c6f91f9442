//! Rank 0's output: the probe rows for the store and the terminal tables.

use anyhow::Context;
use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, Table};
use stratlab_results::{ProbeKind, ProbeRow, ProbeSpec};

use super::plan::{Collective, Measurement, ProbePlan, BACKEND};
use crate::cli::AllReduceLoad;
use stratlab_units::ByteSize;

/// The stored rows of `measurements`, each p2p pair naming its ranks' hosts (`hosts`, by
/// rank).
pub(super) fn probe_rows(
    run_id: &str,
    hosts: &[String],
    measurements: &[Measurement],
    link: Option<stratlab_perf_model::Link>,
) -> anyhow::Result<Vec<ProbeRow>> {
    let world_size = u32::try_from(hosts.len()).context("world size")?;
    let distinct = hosts.iter().collect::<std::collections::BTreeSet<_>>().len() as u32;
    let host = |rank: Option<usize>| rank.and_then(|rank| hosts.get(rank).cloned());
    measurements
        .iter()
        .map(|m| {
            let spec = ProbeSpec {
                run_id: run_id.to_owned(),
                kind: m.kind,
                backend: BACKEND.name().to_owned(),
                world_size,
                src: m.src.map(|rank| rank as u32),
                dst: m.dst.map(|rank| rank as u32),
                bytes: m.bytes,
            };
            let row = ProbeRow::from_times(spec, &m.times_s)?;
            Ok(ProbeRow { link, src_host: host(m.src), dst_host: host(m.dst), hosts: Some(distinct), ..row })
        })
        .collect()
}

/// Prints one table per kind: size, median/min/max time, algorithm and bus bandwidth.
pub(super) fn print_tables(rows: &[ProbeRow], world_size: usize, plan: &ProbePlan) {
    let repeats = format!("{} repeats after {} warm-up", plan.repeats, plan.warmup);
    let hosts = rows.first().and_then(|row| row.hosts).filter(|&hosts| hosts > 1);
    let across = hosts.map(|hosts| format!(" on {hosts} hosts (pairs name theirs)")).unwrap_or_default();
    println!(
        "point-to-point, {} over {world_size} ranks{across}: ping-pong, one-way time = round trip / 2; {repeats}",
        BACKEND.name()
    );
    println!("{}", kind_table(rows, ProbeKind::P2p));
    for &collective in &plan.collectives {
        let (name, bus) = match collective {
            Collective::AllReduce => ("all-reduce (sum, float32)", "busbw = algbw × 2(W−1)/W"),
            Collective::AllGather => ("all-gather (float32; size = the gathered buffer)", "busbw = algbw × (W−1)/W"),
            Collective::ReduceScatter => {
                ("reduce-scatter (sum, float32; size = the reduced buffer)", "busbw = algbw × (W−1)/W")
            }
        };
        println!(
            "{name}, {} over {world_size} ranks: each repeat's time is the slowest rank's; {bus}; {repeats}",
            BACKEND.name()
        );
        for &load in &plan.all_reduce {
            if load == AllReduceLoad::Loaded {
                println!("every libtorch thread's core kept busy (as during a training step's backward):");
            }
            println!("{}", kind_table(rows, collective.kind(load)));
        }
    }
}

pub(super) fn kind_table(rows: &[ProbeRow], kind: ProbeKind) -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    let p2p = kind == ProbeKind::P2p;
    let mut header = vec!["size", "median", "min", "max", "algbw GB/s", "busbw GB/s"];
    if p2p {
        header.insert(0, "pair");
    }
    table.set_header(header.clone());
    for row in rows.iter().filter(|row| row.kind == kind) {
        let mut cells = vec![
            ByteSize(row.bytes).approximate(),
            format_duration(row.median_s),
            format_duration(row.min_s),
            format_duration(row.max_s),
            format_gbps(row.algorithm_gbps),
            format_gbps(row.bus_gbps),
        ];
        if p2p {
            let rank = |rank: Option<u32>| rank.map_or("?".to_owned(), |rank| rank.to_string());
            // A pair within one host of several says so; a pair across two names both.
            let place = match (&row.src_host, &row.dst_host, row.hosts) {
                (Some(src), Some(dst), Some(hosts)) if hosts > 1 && src != dst => format!(" ({src}→{dst})"),
                (Some(src), Some(_), Some(hosts)) if hosts > 1 => format!(" (within {src})"),
                _ => String::new(),
            };
            cells.insert(0, format!("{}→{}{place}", rank(row.src), rank(row.dst)));
        }
        table.add_row(cells);
    }
    for column in usize::from(p2p)..header.len() {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}

/// `12.3 µs`, `4.56 ms`, `1.23 s`.
pub(super) fn format_duration(seconds: f64) -> String {
    if seconds < 1e-3 {
        format!("{:.1} µs", seconds * 1e6)
    } else if seconds < 1.0 {
        format!("{:.2} ms", seconds * 1e3)
    } else {
        format!("{seconds:.2} s")
    }
}

/// Three significant digits, without switching to scientific notation.
pub(super) fn format_gbps(gbps: f64) -> String {
    if gbps >= 100.0 {
        format!("{gbps:.0}")
    } else if gbps >= 10.0 {
        format!("{gbps:.1}")
    } else if gbps >= 1.0 {
        format!("{gbps:.2}")
    } else if gbps >= 0.001 {
        format!("{gbps:.3}")
    } else {
        format!("{gbps:.2e}")
    }
}
