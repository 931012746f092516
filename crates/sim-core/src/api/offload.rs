//! `[scheduler.kv_offload]` resolved for a run: each tier's capacity in blocks and its path
//! to the replica's GPUs ([`crate::kv::offload`] for what the tiers do).

use crate::catalog::Gpu;
use crate::config::{KvOffload, OffloadEviction, OffloadMedium, OffloadTier, Scenario};
use crate::kv::offload::{Offload, TierSpec};

/// NVLink-C2C between a Grace CPU and its GPU, GB/s each way: 900 GB/s bidirectional
/// (NVIDIA GB200 NVL72 and GH200 datasheets).
const C2C_GBPS: f64 = 450.0;
/// One PCIe Gen4 NVMe drive's sequential read, GB/s (Samsung PM9A3 datasheet: 6,800 MB/s).
const SSD_GBPS: f64 = 6.8;
/// NVMe read latency, µs (a drive's 4 KiB random read, order of magnitude).
const SSD_LATENCY_US: f64 = 80.0;
/// A 400 Gb/s NIC per GPU (one ConnectX-7 per GPU on HGX boards), GB/s each way.
const NIC_GBPS: f64 = 50.0;
/// An RDMA round trip and the remote store's lookup, µs.
const REMOTE_LATENCY_US: f64 = 10.0;
/// A PCIe hop's latency, µs (the topology presets' figure).
const PCIE_LATENCY_US: f64 = 1.0;

/// The GPU's own host link, GB/s each way: NVLink-C2C on a Grace-hosted GPU, else half
/// its bidirectional PCIe figure.
pub fn host_link_gbps(gpu: &Gpu) -> f64 {
    if gpu.name.starts_with("gb200") || gpu.name.starts_with("gh200") {
        C2C_GBPS
    } else {
        gpu.pcie_gbps / 2.0
    }
}

/// The run's tiers ([`Offload`]) and their description for the result's deployment.
pub fn build(o: &KvOffload, scenario: &Scenario, gpu: &Gpu, kv_bytes_per_token: f64, replicas: usize, requests: usize) -> (Offload, serde_json::Value) {
    let d = &scenario.deployment;
    let block = f64::from(scenario.scheduler.block_size);
    // Every GPU of a replica's TP × PP group holds its share of each token (DP ranks hold
    // different requests).
    let gpus = f64::from(d.tp * d.pp).max(1.0);
    let block_bytes = kv_bytes_per_token * block;
    let tiers: Vec<OffloadTier> = match o.cpu_gib {
        Some(g) => vec![OffloadTier { medium: OffloadMedium::Cpu, capacity_gib: g, bandwidth_gbps: None, latency_us: None, eviction: OffloadEviction::Lru }],
        None => o.tiers.clone(),
    };
    let specs: Vec<TierSpec> = tiers
        .iter()
        .map(|t| {
            let (medium, replica_gbps, latency_us) = match t.medium {
                OffloadMedium::Cpu => ("cpu", t.bandwidth_gbps, t.latency_us),
                OffloadMedium::Ssd => ("ssd", Some(t.bandwidth_gbps.unwrap_or(SSD_GBPS)), Some(t.latency_us.unwrap_or(SSD_LATENCY_US))),
                OffloadMedium::Remote => ("remote", Some(t.bandwidth_gbps.unwrap_or(NIC_GBPS * gpus)), Some(t.latency_us.unwrap_or(REMOTE_LATENCY_US))),
            };
            let bytes = t.capacity_gib * (1u64 << 30) as f64;
            TierSpec {
                medium,
                capacity_blocks: (bytes / (block_bytes * gpus).max(1.0)).floor().min(1e15) as u64,
                // The replica's bandwidth shared by its GPUs, each moving its own share.
                gbps: replica_gbps.map(|b| b / gpus),
                latency_ns: latency_us.map(|l| crate::num::round_u64(l * 1e3)),
                lru: t.eviction == OffloadEviction::Lru,
            }
        })
        .collect();
    let host = (host_link_gbps(gpu), crate::num::round_u64(PCIE_LATENCY_US * 1e3));
    let mut offload = Offload::new(&specs, o.load == crate::config::OffloadLoad::Blocking, block_bytes, replicas, requests, |_| host);
    offload.gpus = gpus;
    let json = serde_json::json!({
        "load": o.load,
        "block_bytes_per_gpu": block_bytes,
        "host_link_gbps": host.0,
        "tiers": specs.iter().map(|t| serde_json::json!({
            "medium": t.medium,
            "capacity_blocks": t.capacity_blocks,
            "bandwidth_gbps_per_gpu": t.gbps,
            "latency_us": t.latency_ns.map(|l| l as f64 / 1e3),
            "eviction": if t.lru { "lru" } else { "fifo" },
        })).collect::<Vec<_>>(),
    });
    (offload, json)
}

/// The summary's `kv_offload`: per tier its hits, stores and evictions; the bytes moved;
/// the load times of the requests that loaded; and the hit rate across HBM and the tiers
/// (prompt tokens found anywhere at first admissions over those looked up).
pub fn summary(off: &Offload, summary: &serde_json::Value) -> serde_json::Value {
    let mut ms: Vec<f64> = off.load_ns.iter().filter(|&&n| n > 0).map(|&n| n as f64 / 1e6).collect();
    ms.sort_by(f64::total_cmp);
    let pick = |q: f64| if ms.is_empty() { 0.0 } else { ms[((ms.len() - 1) as f64 * q).round() as usize] };
    let mean = if ms.is_empty() { 0.0 } else { ms.iter().sum::<f64>() / ms.len() as f64 };
    let queries = summary["prefix_cache_queries"].as_f64().unwrap_or(0.0);
    let gpu_hits = summary["prefix_cache_hits"].as_f64().unwrap_or(0.0);
    let s = &off.stats;
    serde_json::json!({
        "tiers": off.tier_stats(),
        "loads": s.loads,
        "load_gib": s.load_bytes / (1u64 << 30) as f64,
        "store_gib": s.store_bytes / (1u64 << 30) as f64,
        "tier_hit_tokens": s.hit_tokens,
        "hit_rate_all_tiers": if queries > 0.0 { (gpu_hits + s.hit_tokens as f64) / queries } else { 0.0 },
        "load_ms": {"mean": mean, "p50": pick(0.5), "p99": pick(0.99), "requests": ms.len()},
        "load_stall_ms": s.stall_ns as f64 / 1e6,
    })
}
