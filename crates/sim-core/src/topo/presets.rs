//! The shipped fabrics. Bandwidths are GB/s per direction, latencies µs per link
//! (estimates from datasheets; a path GPU → switch → GPU inside a node costs 2 µs, the
//! default per-hop collective latency of the execution-time model, so a preset node prices
//! TP collectives like the model without a topology).
//!
//! * `dgx-a100`, `hgx-h100`, `hgx-h200`: `gpu0`…`gpu7` each linked to `nvswitch0`
//!   (NVLink: A100 300, H100/H200 450 GB/s per direction, 1 µs).
//! * `2x-hgx-h200-ib`, `4x-hgx-h200-ib`: per node `nK.gpu0…7` on `nK.nvswitch0` as above,
//!   each GPU on its own NIC `nK.nicJ` over PCIe Gen5 (64 GB/s, 1 µs), NIC J of every node on
//!   rail switch `ibJ` (400 Gb/s = 50 GB/s, 1 µs): 8 rails. Any `Nx-hgx-h200-ib` with
//!   N in 1..=256 is accepted (`64x-hgx-h200-ib`: 512 GPUs).
//! * `pcie-4x-l40s`: `gpu0`…`gpu3` on a host PCIe root `host0` (Gen4 x16: 32 GB/s, 1.5 µs).
//! * `tpu-v5e-8`, `tpu-v5e-16`: TPU v5e chips `tpu0`… on a 2D torus of ICI links, 2 × 4 (one
//!   host) and 4 × 4: each chip's 400 GB/s of bidirectional ICI over its 4 ports is 50 GB/s
//!   per direction per link (Google Cloud's v5e documentation), 1 µs a hop (an estimate);
//!   a ring of 2 is one link.

use super::{LinkKind, LinkSpec, NodeKind, NodeSpec, RoutingSpec, TopologyTable};

/// Names accepted by [`preset`].
pub const PRESET_NAMES: &[&str] =
    &["dgx-a100", "hgx-h100", "hgx-h200", "2x-hgx-h200-ib", "4x-hgx-h200-ib", "pcie-4x-l40s", "tpu-v5e-8", "tpu-v5e-16"];

const NVSWITCH_LATENCY_US: f64 = 1.0;
const PCIE5_GBPS: f64 = 64.0;
const PCIE_LATENCY_US: f64 = 1.0;
const IB_400G_GBPS: f64 = 50.0;
const IB_LATENCY_US: f64 = 1.0;
const ICI_LINK_GBPS: f64 = 50.0;
const ICI_LATENCY_US: f64 = 1.0;

fn node(id: String, kind: NodeKind, gpu: Option<&str>) -> NodeSpec {
    NodeSpec { id, kind, gpu: gpu.map(str::to_string) }
}

fn link(src: &str, dst: &str, kind: LinkKind, bandwidth_gbps: f64, latency_us: f64) -> LinkSpec {
    LinkSpec { src: src.to_string(), dst: dst.to_string(), kind, bandwidth_gbps, latency_us }
}

/// One NVSwitch box of `n` GPUs, ids prefixed by `prefix` (`""` or `"n0."`).
fn nvswitch_box(t: &mut TopologyTable, prefix: &str, n: usize, gpu: &str, gbps: f64) {
    let sw = format!("{prefix}nvswitch0");
    for i in 0..n {
        t.nodes.push(node(format!("{prefix}gpu{i}"), NodeKind::Gpu, Some(gpu)));
    }
    t.nodes.push(node(sw.clone(), NodeKind::Nvswitch, None));
    for i in 0..n {
        t.links.push(link(&format!("{prefix}gpu{i}"), &sw, LinkKind::Nvswitch, gbps, NVSWITCH_LATENCY_US));
    }
}

/// `nodes` HGX-H200 boxes on 8 InfiniBand rails.
pub fn multi_node(nodes: usize, gpus_per_node: usize) -> TopologyTable {
    let mut t = TopologyTable::default();
    for k in 0..nodes {
        let p = format!("n{k}.");
        nvswitch_box(&mut t, &p, gpus_per_node, "h200", 450.0);
        for j in 0..gpus_per_node {
            t.nodes.push(node(format!("{p}nic{j}"), NodeKind::Nic, None));
            t.links.push(link(&format!("{p}gpu{j}"), &format!("{p}nic{j}"), LinkKind::Pcie, PCIE5_GBPS, PCIE_LATENCY_US));
        }
    }
    for j in 0..gpus_per_node {
        t.nodes.push(node(format!("ib{j}"), NodeKind::Switch, None));
        for k in 0..nodes {
            t.links.push(link(&format!("n{k}.nic{j}"), &format!("ib{j}"), LinkKind::Ib, IB_400G_GBPS, IB_LATENCY_US));
        }
    }
    t
}

/// A `rows × cols` 2D torus of TPU v5e chips `tpu0`… (row-major) joined by ICI links to their
/// neighbours, wrapping around each row and column (a ring of 2 is one link, of 1 none).
pub fn tpu_torus(rows: usize, cols: usize) -> TopologyTable {
    let mut t = TopologyTable::default();
    let id = |r: usize, c: usize| format!("tpu{}", r * cols + c);
    for r in 0..rows {
        for c in 0..cols {
            t.nodes.push(node(id(r, c), NodeKind::Gpu, Some("tpu-v5e")));
        }
    }
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for r in 0..rows {
        for c in 0..cols {
            let here = r * cols + c;
            for there in [r * cols + (c + 1) % cols, ((r + 1) % rows) * cols + c] {
                let key = (here.min(there), here.max(there));
                if here != there && !pairs.contains(&key) {
                    pairs.push(key);
                }
            }
        }
    }
    for (a, b) in pairs {
        t.links.push(link(&format!("tpu{a}"), &format!("tpu{b}"), LinkKind::Ici, ICI_LINK_GBPS, ICI_LATENCY_US));
    }
    t
}

/// The table of a preset, or `None` for an unknown name.
pub fn preset(name: &str) -> Option<TopologyTable> {
    let mut t = TopologyTable { routing: RoutingSpec::default(), ..TopologyTable::default() };
    match name {
        "dgx-a100" => nvswitch_box(&mut t, "", 8, "a100-80g", 300.0),
        "hgx-h100" => nvswitch_box(&mut t, "", 8, "h100", 450.0),
        "hgx-h200" => nvswitch_box(&mut t, "", 8, "h200", 450.0),
        "2x-hgx-h200-ib" => t = multi_node(2, 8),
        "4x-hgx-h200-ib" => t = multi_node(4, 8),
        "tpu-v5e-8" => t = tpu_torus(2, 4),
        "tpu-v5e-16" => t = tpu_torus(4, 4),
        "pcie-4x-l40s" => {
            for i in 0..4 {
                t.nodes.push(node(format!("gpu{i}"), NodeKind::Gpu, Some("l40s")));
            }
            t.nodes.push(node("host0".into(), NodeKind::Host, None));
            for i in 0..4 {
                t.links.push(link(&format!("gpu{i}"), "host0", LinkKind::Pcie, 32.0, 1.5));
            }
        }
        other => {
            // `Nx-hgx-h200-ib` for any N in 1..=256 (64x-hgx-h200-ib: 512 GPUs).
            let n: usize = other.strip_suffix("x-hgx-h200-ib")?.parse().ok()?;
            if !(1..=256).contains(&n) {
                return None;
            }
            t = multi_node(n, 8);
        }
    }
    Some(t)
}
