//! The shipped fabrics. Bandwidths are GB/s per direction, latencies µs per link
//! (estimates from datasheets; a path GPU → switch → GPU inside a node costs 2 µs, the
//! default per-hop collective latency of the execution-time model, so a preset node prices
//! TP collectives like the model without a topology). Every GPU node names its catalog GPU
//! (`gpu = "h100"`), which a scenario's `gpu` must match.
//!
//! * `dgx-a100`, `hgx-h100`, `hgx-h200`: `gpu0`…`gpu7` each linked to `nvswitch0`
//!   (NVLink: A100 300, H100/H200 450 GB/s per direction, 1 µs).
//! * `2x-hgx-h200-ib`, `4x-hgx-h200-ib`, `4x-hgx-h100-ib`, `2x-hgx-h800-ib`: per node
//!   `nK.gpu0…7` on `nK.nvswitch0` (NVLink per direction: H100/H200 450, H800 200 — its
//!   datasheet's 400 GB/s bidirectional —, B200 900), each GPU on its own NIC `nK.nicJ` over
//!   PCIe Gen5 (64 GB/s, 1 µs), NIC J of every node on rail switch `ibJ` (400 Gb/s = 50 GB/s,
//!   1 µs; the ConnectX-7 of HGX H100/H200/B200 boxes, and the "CX7 InfiniBand 400 Gb/s" per
//!   H800 of DeepEP's README): 8 rails.
//! * The pattern `{N}x-hgx-{gpu}-ib` (see [`PATTERN`]) gives any number of such boxes without
//!   a preset per N: `gpu` one of [`HGX_GPUS`] (`h100`, `h200`, `h800`, `b200`), N in 1..=64
//!   (`h200`: 1..=512: `64x-hgx-h200-ib` is 512 GPUs, `512x-hgx-h200-ib` 4,096). [`PRESET_NAMES`] lists the
//!   canonical names only; the unknown-name error states the pattern.
//! * `gb200-nvl72`: one GB200 NVL72 rack: `gpu0`…`gpu71` on one NVLink Switch domain,
//!   modelled as one switch `nvswitch0` (the rack's 9 switch trays are non-blocking: NVIDIA's
//!   GB200 NVL72 datasheet, 130 TB/s over 72 GPUs = 1.8 TB/s per GPU, 900 GB/s per
//!   direction, 1 µs), and a NIC per GPU `nicK` (PCIe Gen5, 64 GB/s, 1 µs) on rail switch
//!   `ib{K mod 4}` (400 Gb/s = 50 GB/s, 1 µs): NVIDIA's multi-node tuning guide gives 18
//!   compute trays of 4 GPUs with ConnectX-7 NICs, so 4 rails, GPU K in tray K / 4.
//! * `pcie-4x-l40s`: `gpu0`…`gpu3` on a host PCIe root `host0` (Gen4 x16: 32 GB/s, 1.5 µs).
//! * `tpu-v5e-8`, `tpu-v5e-16`: TPU v5e chips `tpu0`… on a 2D torus of ICI links, 2 × 4 (one
//!   host) and 4 × 4: each chip's 400 GB/s of bidirectional ICI over its 4 ports is 50 GB/s
//!   per direction per link (Google Cloud's v5e documentation), 1 µs a hop (an estimate);
//!   a ring of 2 is one link.

use super::{LinkKind, LinkSpec, NodeKind, NodeSpec, RoutingSpec, TopologyTable};
use crate::error::{check, SimError};

/// The canonical names [`preset`] accepts (the registry lists these). It also accepts every
/// name of the pattern [`PATTERN`]: N HGX boxes on InfiniBand rails.
pub const PRESET_NAMES: &[&str] = &[
    "dgx-a100",
    "hgx-h100",
    "hgx-h200",
    "2x-hgx-h200-ib",
    "4x-hgx-h200-ib",
    "4x-hgx-h100-ib",
    "2x-hgx-h800-ib",
    "gb200-nvl72",
    "pcie-4x-l40s",
    "tpu-v5e-8",
    "tpu-v5e-16",
];

/// The multi-node pattern, as the unknown-name error states it.
pub const PATTERN: &str = "{N}x-hgx-{h100|h200|h800|b200}-ib (N HGX boxes of 8 GPUs on 8 InfiniBand rails; 1 ≤ N ≤ 64, h200 up to 512)";

/// The GPUs of the HGX boxes of [`PATTERN`]: (catalog name, NVLink GB/s per direction, most
/// boxes). NVLink per direction is half the catalog's bidirectional figure (H100/H200 900,
/// H800 400, B200 1,800 GB/s: their datasheets, `catalog/gpu.rs`).
pub const HGX_GPUS: &[(&str, f64, usize)] = &[("h100", 450.0, 64), ("h200", 450.0, 512), ("h800", 200.0, 64), ("b200", 900.0, 64)];

/// GB200 NVL72: GPUs, NVLink GB/s per direction (1.8 TB/s bidirectional per GPU), rails.
const NVL72_GPUS: usize = 72;
const NVL72_NVLINK_GBPS: f64 = 900.0;
const NVL72_RAILS: usize = 4;

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

/// `nodes` HGX boxes of `gpus_per_node` GPUs `gpu` (NVLink `nvlink_gbps` per direction), each
/// GPU on its own NIC, NIC J of every box on rail switch `ibJ`.
pub fn multi_node(nodes: usize, gpus_per_node: usize, gpu: &str, nvlink_gbps: f64) -> TopologyTable {
    let mut t = TopologyTable::default();
    for k in 0..nodes {
        let p = format!("n{k}.");
        nvswitch_box(&mut t, &p, gpus_per_node, gpu, nvlink_gbps);
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

/// One GB200 NVL72 rack (module docs): 72 GPUs on one NVLink switch, a NIC per GPU on 4 rails.
pub fn nvl72() -> TopologyTable {
    let mut t = TopologyTable::default();
    nvswitch_box(&mut t, "", NVL72_GPUS, "gb200", NVL72_NVLINK_GBPS);
    for k in 0..NVL72_GPUS {
        t.nodes.push(node(format!("nic{k}"), NodeKind::Nic, None));
        t.links.push(link(&format!("gpu{k}"), &format!("nic{k}"), LinkKind::Pcie, PCIE5_GBPS, PCIE_LATENCY_US));
    }
    for j in 0..NVL72_RAILS {
        t.nodes.push(node(format!("ib{j}"), NodeKind::Switch, None));
        for k in (j..NVL72_GPUS).step_by(NVL72_RAILS) {
            t.links.push(link(&format!("nic{k}"), &format!("ib{j}"), LinkKind::Ib, IB_400G_GBPS, IB_LATENCY_US));
        }
    }
    t
}

/// The boxes and GPU a name of the pattern [`PATTERN`] stands for: `Ok(None)` when the name
/// is not of the pattern, an error message when it is but N or the GPU is out of range.
pub fn parse_pattern(name: &str) -> std::result::Result<Option<(usize, &'static str, f64)>, String> {
    let Some((n, gpu)) = name.strip_suffix("-ib").and_then(|r| r.split_once("x-hgx-")) else { return Ok(None) };
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(None);
    }
    let Some(&(g, gbps, most)) = HGX_GPUS.iter().find(|h| h.0 == gpu) else {
        let names: Vec<&str> = HGX_GPUS.iter().map(|h| h.0).collect();
        return Err(format!("'{name}': no HGX box of GPU '{gpu}' (one of {})", names.join(", ")));
    };
    match n.parse::<usize>() {
        Ok(k) if (1..=most).contains(&k) && !n.starts_with('0') => Ok(Some((k, g, gbps))),
        _ => Err(format!("'{name}': the number of {gpu} boxes must be 1 to {most} (got {n})")),
    }
}

/// The error for a name that is neither a preset nor of the pattern, at `path`: the close
/// canonical names and the pattern; or, for a name of the pattern, what is out of range.
pub fn unknown(path: &str, name: &str) -> SimError {
    match parse_pattern(name) {
        Err(why) => SimError::config(path, format!("topology preset {why}")),
        Ok(_) => match check::unknown_name(path, "topology preset", name, PRESET_NAMES) {
            SimError::Config { path, message } => SimError::Config { path, message: format!("{message}; or {PATTERN}") },
            other => other,
        },
    }
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
        "gb200-nvl72" => t = nvl72(),
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
            // `{N}x-hgx-{gpu}-ib` (`2x-hgx-h200-ib`, `4x-hgx-h100-ib`, … among them).
            let (n, gpu, gbps) = parse_pattern(other).ok()??;
            t = multi_node(n, 8, gpu, gbps);
        }
    }
    Some(t)
}
