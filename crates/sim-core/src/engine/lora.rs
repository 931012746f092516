//! Multi-LoRA at a step's start: the adapters of the step's requests must sit in the
//! replica's GPU slots (`scheduler.max_loras`) before its forward pass — vLLM's
//! `LRUCacheWorkerLoRAManager` activates them synchronously in `execute_model`, so a step
//! that brings in an adapter waits for it. A slot is refilled least recently used first
//! (never one of this step's adapters: the scheduler admits at most `max_loras` of them).
//! The adapter comes from the host cache (`max_cpu_loras`, least recently used out) over
//! the GPU's host link, or, not cached there, from disk first.

use crate::num::round_u64;

/// Local NVMe read rate for an adapter's checkpoint, GB/s (a PCIe Gen4 ×4 SSD's sequential
/// read, the figure the SSD tier of `kv_offload` uses).
pub const LORA_DISK_GBPS: f64 = 6.8;

/// Run-wide counters (the summary's `lora`).
#[derive(Debug, Clone, Default)]
pub struct LoraStats {
    /// Adapters copied into a GPU slot.
    pub loads: u64,
    /// Of those, adapters first read from disk (not in the host cache).
    pub disk_loads: u64,
    /// Time steps waited for their adapters, ns.
    pub load_ns: u64,
    /// Steps that waited for a load.
    pub stalled_steps: u64,
}

/// The adapters' residency on every replica and what a load costs.
#[derive(Debug, Clone)]
pub struct LoraRun {
    /// Per replica: adapters in GPU slots, least recently used first.
    gpu: Vec<Vec<u16>>,
    /// Per replica: adapters in host memory, least recently used first.
    cpu: Vec<Vec<u16>>,
    max_loras: usize,
    max_cpu: usize,
    /// A GPU slot fill (one GPU's shard over its host link), ns.
    copy_ns: u64,
    /// Reading one adapter's checkpoint from disk, ns.
    disk_ns: u64,
    pub stats: LoraStats,
}

impl LoraRun {
    /// `bytes_per_gpu`: one adapter on one GPU; `bytes_total`: its checkpoint;
    /// `host_gbps`: the GPU's host link each way.
    pub fn new(replicas: usize, max_loras: u32, max_cpu: u32, bytes_per_gpu: f64, bytes_total: f64, host_gbps: f64) -> LoraRun {
        LoraRun {
            gpu: vec![Vec::new(); replicas],
            cpu: vec![Vec::new(); replicas],
            max_loras: max_loras as usize,
            max_cpu: max_cpu as usize,
            copy_ns: round_u64(bytes_per_gpu / (host_gbps * 1e9) * 1e9),
            disk_ns: round_u64(bytes_total / (LORA_DISK_GBPS * 1e9) * 1e9),
            stats: LoraStats::default(),
        }
    }

    /// Bring the step's `adapters` into replica `rep`'s GPU slots; returns the time the step
    /// waits for them, ns.
    pub fn activate(&mut self, rep: usize, adapters: &[u16]) -> u64 {
        let mut wait = 0;
        for &a in adapters {
            let gpu = &mut self.gpu[rep];
            if let Some(at) = gpu.iter().position(|&x| x == a) {
                let x = gpu.remove(at);
                gpu.push(x);
                continue;
            }
            if gpu.len() >= self.max_loras {
                // The least recently used slot not needed by this step.
                if let Some(at) = gpu.iter().position(|x| !adapters.contains(x)) {
                    gpu.remove(at);
                }
            }
            gpu.push(a);
            let cpu = &mut self.cpu[rep];
            match cpu.iter().position(|&x| x == a) {
                Some(at) => {
                    let x = cpu.remove(at);
                    cpu.push(x);
                }
                None => {
                    if cpu.len() >= self.max_cpu {
                        cpu.remove(0);
                    }
                    cpu.push(a);
                    wait += self.disk_ns;
                    self.stats.disk_loads += 1;
                }
            }
            wait += self.copy_ns;
            self.stats.loads += 1;
        }
        if wait > 0 {
            self.stats.stalled_steps += 1;
            self.stats.load_ns += wait;
        }
        wait
    }
}
