use std::path::{Path, PathBuf};

use super::*;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/clusters")
}

fn example(name: &str) -> Cluster {
    Cluster::load(&examples().join(name)).unwrap_or_else(|error| panic!("{error}"))
}

const VALID: &str = "\
name: test
nodes: 2
devices_per_node: 4
device:
  name: GPU
  memory: 80 GiB
  peak_flops: 67 TFLOP/s
  memory_bandwidth: 3.35 TB/s
links:
  intra_node: {bandwidth: 450 GB/s, latency: 2 us}
  inter_node: {bandwidth: 100 Gbit/s, latency: 5 us}
";

/// The error of parsing `VALID` with `from` replaced by `to`, as a message.
fn error_of(from: &str, to: &str) -> String {
    assert!(VALID.contains(from), "{from}");
    let text = VALID.replace(from, to);
    Cluster::parse(&text, Path::new("clusters/broken.yaml")).expect_err(&text).to_string()
}

/// The message names the file, the field and at least one valid value.
fn assert_names(message: &str, field: &str, valid: &str) {
    for part in ["broken.yaml", field, valid] {
        assert!(message.contains(part), "`{part}` missing from: {message}");
    }
}

#[test]
fn every_example_loads_with_the_devices_it_describes() {
    let mut loaded = 0;
    for entry in std::fs::read_dir(examples()).unwrap() {
        let path = entry.unwrap().path();
        let cluster = Cluster::load(&path).unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(cluster.name, path.file_stem().unwrap().to_str().unwrap(), "name matches the file");
        assert!(!cluster.device.speed.is_validated(), "examples describe machines we do not have");
        loaded += 1;
    }
    assert!(loaded >= 3);

    let one = example("one-node-4-h100.yaml");
    assert_eq!((one.nodes, one.devices_per_node, one.devices()), (1, 4, 4));
    assert_eq!(one.device.memory_bytes, 80 << 30);
    assert_eq!(one.device.speed, DeviceSpeed::Analytical { peak_flops: 67e12, memory_bandwidth_bytes_per_s: 3.35e12 });
    assert_eq!(one.ring_link(4).unwrap(), Link::new(450e9, 2e-6));

    let small = example("one-node-4-small-gpu.yaml");
    assert_eq!((small.devices(), small.device.memory_bytes), (4, 16 << 30));
}

#[test]
fn a_ring_spanning_nodes_is_bound_by_the_inter_node_link() {
    let cluster = example("four-nodes-4-h100-100gbit.yaml");
    assert_eq!(cluster.devices(), 16);
    let network = Link::new(100e9 / 8.0, 5e-6);
    assert_eq!(cluster.ring_link(16).unwrap(), network);
    assert_eq!(cluster.ring_link(5).unwrap(), network);
    assert_eq!(cluster.ring_link(4).unwrap(), cluster.intra_node);
    assert_eq!(cluster.ring_link(1).unwrap(), cluster.intra_node);
    let error = cluster.ring_link(17).unwrap_err().to_string();
    assert!(error.contains("17 workers") && error.contains("16 devices"), "{error}");
}

#[test]
fn the_roofline_is_bound_by_the_slower_of_compute_and_memory() {
    let cluster = Cluster::parse(VALID, Path::new("valid.yaml")).unwrap();
    // 67 TFLOP of work moving 1 GB: a second of compute, 0.3 ms of memory traffic.
    assert!((cluster.analytical_seconds(67e12, 1e9).unwrap() - 1.0).abs() < 1e-12);
    // 1 GFLOP moving 3.35 TB: memory bound, a second.
    assert!((cluster.analytical_seconds(1e9, 3.35e12).unwrap() - 1.0).abs() < 1e-12);
    let local = Cluster::local("this machine", 8, 16 << 30, Link::new(1e9, 1e-5));
    assert_eq!(local.analytical_seconds(1e9, 1e9), None);
    assert!(local.device.speed.is_validated());
    assert_eq!((local.devices(), local.ring_link(8).unwrap()), (8, Link::new(1e9, 1e-5)));
}

#[test]
fn a_local_profile_replaces_the_roofline() {
    let text = VALID.replace("  peak_flops: 67 TFLOP/s\n  memory_bandwidth: 3.35 TB/s\n", "  profile: local\n");
    let cluster = Cluster::parse(&text, Path::new("local.yaml")).unwrap();
    assert_eq!(cluster.device.speed, DeviceSpeed::Profiled);
}

#[test]
fn an_unreadable_file_is_named() {
    let error = Cluster::load(Path::new("/nonexistent/broken.yaml")).unwrap_err();
    assert!(matches!(error, ClusterError::Read { .. }));
    assert!(error.to_string().contains("broken.yaml"), "{error}");
}

#[test]
fn malformed_yaml_keeps_the_line() {
    let message = error_of("name: test", "name: 'test");
    assert!(message.contains("broken.yaml") && message.contains("line 1"), "{message}");
    let message = error_of("name: test\n", "name: test\n  x: y\n");
    assert!(message.contains("broken.yaml") && message.contains("line 2"), "{message}");
}

#[test]
fn an_unknown_field_lists_the_valid_fields() {
    assert_names(&error_of("nodes: 2\n", "nodes: 2\ngpus: 4\n"), "gpus", "devices_per_node");
    assert_names(&error_of("  memory: 80 GiB\n", "  memory: 80 GiB\n  cores: 4\n"), "device", "peak_flops");
    let message = error_of("latency: 5 us}", "latency: 5 us, mtu: 9000}");
    assert_names(&message, "links.inter_node", "bandwidth");
}

#[test]
fn zero_nodes_or_devices_are_refused() {
    assert_names(&error_of("nodes: 2", "nodes: 0"), "`nodes`", "1");
    assert_names(&error_of("devices_per_node: 4", "devices_per_node: 0"), "`devices_per_node`", "1");
    assert_names(&error_of("nodes: 2", "nodes: many"), "nodes", "whole number");
    assert_names(&error_of("devices_per_node: 4", "devices_per_node: 2.5"), "devices_per_node", "whole number");
}

#[test]
fn several_nodes_need_an_inter_node_link() {
    let message = error_of("  inter_node: {bandwidth: 100 Gbit/s, latency: 5 us}\n", "");
    assert_names(&message, "links.inter_node", "Gbit/s");
    // One node needs none.
    let one_node =
        VALID.replace("nodes: 2", "nodes: 1").replace("  inter_node: {bandwidth: 100 Gbit/s, latency: 5 us}\n", "");
    assert_eq!(Cluster::parse(&one_node, Path::new("one.yaml")).unwrap().inter_node, None);
}

#[test]
fn a_bad_unit_lists_the_valid_units() {
    assert_names(&error_of("memory: 80 GiB", "memory: 80 gigs"), "device.memory", "GiB");
    assert_names(&error_of("memory: 80 GiB", "memory: 80"), "device.memory", "TiB");
    assert_names(&error_of("67 TFLOP/s", "67 TFLOPS"), "device.peak_flops", "TFLOP/s");
    assert_names(&error_of("3.35 TB/s", "3.35 TBps"), "device.memory_bandwidth", "TB/s");
    assert_names(&error_of("100 Gbit/s", "100 Gb"), "links.inter_node.bandwidth", "Gbit/s");
    assert_names(&error_of("latency: 2 us", "latency: 2 usec"), "links.intra_node.latency", "us");
}

#[test]
fn a_speed_is_either_a_local_profile_or_a_roofline() {
    let both = error_of("  peak_flops:", "  profile: local\n  peak_flops:");
    assert_names(&both, "`device`", "profile: local");
    assert_names(&both, "`device`", "TFLOP/s");
    let roofline = "  peak_flops: 67 TFLOP/s\n  memory_bandwidth: 3.35 TB/s\n";
    assert_names(&error_of(roofline, ""), "`device`", "profile: local");
    assert_names(&error_of("  memory_bandwidth: 3.35 TB/s\n", ""), "device.memory_bandwidth", "TB/s");
    assert_names(&error_of("  peak_flops: 67 TFLOP/s\n", ""), "device.peak_flops", "TFLOP/s");
    let remote = error_of(roofline, "  profile: remote\n");
    assert_names(&remote, "device.profile", "local");
    assert!(remote.contains("`remote`"), "{remote}");
}

#[test]
fn nvlink_pairs_within_a_node_carry_a_ring_that_fits_them() {
    let thesis = example("thesis-4x-titan-rtx.yaml");
    assert_eq!((thesis.nodes, thesis.devices_per_node, thesis.devices()), (4, 4, 16));
    let groups = thesis.groups.expect("NVLink pairs");
    assert_eq!(groups.devices, 2);
    // A pair talks over its bridge, four GPUs over PCIe between the pairs, more over 40 GbE.
    assert_eq!(thesis.ring_link(2).unwrap(), groups.link);
    assert_eq!(thesis.ring_link(4).unwrap(), thesis.intra_node);
    assert_eq!(thesis.ring_link(8).unwrap(), thesis.inter_node.unwrap());
    assert!(groups.link.bandwidth.0 > thesis.intra_node.bandwidth.0);

    let grouped = |devices: &str| {
        VALID.replace(
            "  intra_node:",
            &format!("  groups: {{devices: {devices}, link: {{bandwidth: 50 GB/s, latency: 2 us}}}}\n  intra_node:"),
        )
    };
    assert!(Cluster::parse(&grouped("2"), Path::new("clusters/ok.yaml")).unwrap().groups.is_some());
    for devices in ["1", "3", "4"] {
        let message = Cluster::parse(&grouped(devices), Path::new("clusters/broken.yaml")).unwrap_err().to_string();
        assert_names(&message, "links.groups.devices", "devices: 2");
    }
}
