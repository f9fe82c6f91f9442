//! Where a run's trials ran as Slurm job steps and what joined the nodes: each node as its ranks
//! fingerprinted themselves there (`trial_nodes`), and every pair of hosts the run's probes
//! measured between (`probes` rows naming two hosts), beside the pairs within one host.

use std::collections::BTreeMap;

use stratlab_results::{ProbeKind, ProbeRow, RunStore, Table, TrialNodeRow};

use crate::html::ReportSection;
use crate::tables::{Columns, SummaryTable};
use crate::ReportError;

/// The section, where the run's trials ran as job steps (none otherwise).
pub(crate) fn nodes_section(
    store: &RunStore,
    html_table: impl Fn(&SummaryTable) -> crate::html::HtmlTable,
    tables: &mut Vec<SummaryTable>,
) -> Result<Option<ReportSection>, ReportError> {
    let nodes: Vec<TrialNodeRow> =
        store.load_rows().map_err(|source| ReportError::Load { table: TrialNodeRow::NAME, source })?;
    if nodes.is_empty() {
        return Ok(None);
    }
    let probes: Vec<ProbeRow> =
        store.load_rows().map_err(|source| ReportError::Load { table: ProbeRow::NAME, source })?;
    let mut section_tables = vec![node_table(&nodes)?];
    section_tables.extend(link_table(&probes)?);
    let section = ReportSection {
        id: "nodes".into(),
        title: "Nodes and the links between them".into(),
        caption: "The trials ran as Slurm job steps. Each node is listed as its ranks fingerprinted \
                  themselves there (a node that differs from the others in driver, libraries or binary shows \
                  it here); the runner's own host is under Environment. The links are the run's probes before \
                  its trials: latency is the median one-way time of the smallest point-to-point message, \
                  bandwidth the largest message's size over its median time less that latency."
            .into(),
        figures: Vec::new(),
        tables: section_tables.iter().map(&html_table).collect(),
    };
    tables.extend(section_tables);
    Ok(Some(section))
}

/// One row per node: its ranks' trials and ranks, and its environment.
fn node_table(nodes: &[TrialNodeRow]) -> Result<SummaryTable, ReportError> {
    let mut by_host: BTreeMap<Option<&str>, Vec<&TrialNodeRow>> = BTreeMap::new();
    for row in nodes {
        by_host.entry(row.host_name.as_deref()).or_default().push(row);
    }
    let first = |rows: &Vec<&TrialNodeRow>, field: &dyn Fn(&TrialNodeRow) -> Option<String>| {
        let mut values: Vec<String> = rows.iter().filter_map(|row| field(row)).collect();
        values.sort();
        values.dedup();
        (!values.is_empty()).then(|| values.join(" | "))
    };
    let hosts = by_host.values();
    Columns::default()
        .text("host", by_host.keys().map(|host| host.unwrap_or("unknown").to_owned()).collect())
        .int(
            "trials",
            hosts
                .clone()
                .map(|rows| {
                    Some(rows.iter().map(|row| &row.trial_id).collect::<std::collections::BTreeSet<_>>().len() as i64)
                })
                .collect(),
        )
        .maybe_text("ranks", hosts.clone().map(|rows| first(rows, &|row| Some(row.rank.to_string()))).collect())
        .maybe_text("CPU", hosts.clone().map(|rows| first(rows, &|row| row.cpu_model.clone())).collect())
        .int("cores", hosts.clone().map(|rows| rows.first().map(|row| row.logical_cores as i64)).collect())
        .maybe_text(
            "GPUs",
            hosts
                .clone()
                .map(|rows| first(rows, &|row| (!row.gpu_models.is_empty()).then(|| row.gpu_models.join(", "))))
                .collect(),
        )
        .maybe_text("driver", hosts.clone().map(|rows| first(rows, &|row| row.nvidia_driver_version.clone())).collect())
        .maybe_text("NCCL", hosts.clone().map(|rows| first(rows, &|row| row.nccl_version.clone())).collect())
        .maybe_text("libtorch", hosts.clone().map(|rows| first(rows, &|row| row.libtorch_version.clone())).collect())
        .maybe_text(
            "binary (SHA-256)",
            hosts
                .map(|rows| first(rows, &|row| row.binary_sha256.as_ref().map(|sha| sha.chars().take(12).collect())))
                .collect(),
        )
        .finish("nodes", "The nodes the run's trials ran on, as job steps")
}

/// One row per pair of hosts the probes measured between (and one for the pairs within a
/// host of the same probes); `None` where no probe spanned hosts.
fn link_table(probes: &[ProbeRow]) -> Result<Option<SummaryTable>, ReportError> {
    let spans = |row: &&ProbeRow| row.hosts.is_some_and(|hosts| hosts > 1);
    if !probes.iter().any(|row| spans(&row)) {
        return Ok(None);
    }
    // Pairs between hosts by their hosts, and loopback within one beside them
    // (emulated links stand for no network between nodes).
    let mut pairs: BTreeMap<String, Vec<&ProbeRow>> = BTreeMap::new();
    for row in probes.iter().filter(|row| row.kind == ProbeKind::P2p) {
        let host = |host: &Option<String>| host.clone().unwrap_or_else(|| "unknown".into());
        let name = match (spans(&row), row.link) {
            (true, _) if row.src_host == row.dst_host => format!("within {}", host(&row.src_host)),
            (true, _) => format!("{} → {}", host(&row.src_host), host(&row.dst_host)),
            (false, None) => match &row.src_host {
                Some(host) => format!("loopback on {host}"),
                None => "loopback on the runner's host".to_owned(),
            },
            (false, Some(_)) => continue,
        };
        pairs.entry(name).or_default().push(row);
    }
    let (mut names, mut latency_us, mut bandwidth) = (Vec::new(), Vec::new(), Vec::new());
    for (name, rows) in &pairs {
        let link = stratlab_results::point_to_point_link(rows.iter().copied());
        let sizes: std::collections::BTreeSet<u64> = rows.iter().map(|row| row.bytes).collect();
        names.push(name.clone());
        latency_us.push(link.map(|link| link.latency.0 * 1e6));
        // One size gives a latency and no bandwidth.
        bandwidth.push(link.filter(|_| sizes.len() > 1).map(|link| link.bandwidth.0 * 8.0 / 1e9));
    }
    Columns::default()
        .text("hosts", names)
        .float("latency (µs, one way)", latency_us)
        .float("bandwidth (Gbit/s)", bandwidth)
        .finish("node_links", "The links between nodes, as the run's probes measured them")
        .map(Some)
}
