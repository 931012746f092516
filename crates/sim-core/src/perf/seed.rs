//! The seed specification's sub-models (§2.1, §2.4, §2.5, §3.3), each a small function with
//! the seed's parameters. The seed is partly speculative: these encode its rules as stated,
//! with our reading noted where it was ambiguous, so their effect can be switched on and
//! measured rather than trusted.

use crate::catalog::Gpu;

/// How elementwise operators are fused (§2.1). `None` is the reference engine the H200
/// tables come from: every op is its own kernel(s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fusion {
    /// No fusion (RoPE stays ~16 kernels, SiLU·mul 2).
    None,
    /// Each op becomes one kernel (intra-op fusion), ops stay separate.
    Fine,
    /// Adjacent elementwise ops between two GEMMs/attention fuse into one kernel.
    Coarse,
    /// Coarse while both adjacent ops (unfused) are under the latency threshold, else fine.
    Hybrid,
}

/// Names accepted for [`Fusion`].
pub const FUSION_NAMES: [&str; 4] = ["none", "fine", "coarse", "hybrid"];

/// Seed default: adjacent ops fuse only while each is under 0.8 ms (§2.1).
pub const DEFAULT_FUSION_LATENCY_THRESHOLD_MS: f64 = 0.8;
/// Seed limit on register-pressure growth of a fused kernel (§2.1).
pub const MAX_REGISTER_GROWTH: f64 = 0.15;
/// Register-pressure growth per op added to a fused kernel: an estimate (each extra op keeps
/// a few more live values per thread); with the seed's 15% cap a fused kernel holds ≤ 4 ops.
pub const REGISTER_GROWTH_PER_OP: f64 = 0.05;

/// One elementwise op as the fusion planner sees it.
#[derive(Debug, Clone, Copy)]
pub struct ElemCost {
    /// Measured (or roofline) GPU time unfused, s.
    pub gpu_s: f64,
    /// Kernels it launches unfused.
    pub kernels: f64,
    /// Bytes one pass over its inputs and outputs moves.
    pub bytes: f64,
    /// Bytes of its output that the next op of the group reads back (a round trip fusion
    /// with `memory_coalesce` removes: written once, read once).
    pub handoff_bytes: f64,
}

/// One kernel after fusion: which ops (indices into the group) it holds and its GPU time.
#[derive(Debug, Clone, PartialEq)]
pub struct FusedKernel {
    pub ops: Vec<usize>,
    pub gpu_s: f64,
}

/// Fusion parameters (§2.1).
#[derive(Debug, Clone, Copy)]
pub struct FusionPolicy {
    pub granularity: Fusion,
    pub latency_threshold_s: f64,
    pub memory_coalesce: bool,
    /// Whether the GPU can run fused kernels (all CUDA presets can).
    pub gpu_supports: bool,
}

/// Plan the kernels of one group of adjacent elementwise ops (between two GEMMs or
/// attention). A fused kernel costs one per-kernel floor plus its bytes at the copy
/// bandwidth `bw` (bytes/s); with `memory_coalesce` the hand-offs inside it stay on chip.
/// It never costs more than its ops unfused. Returns the kernels and the bytes saved.
pub fn plan_fusion(group: &[ElemCost], p: &FusionPolicy, floor_s: f64, bw: f64) -> (Vec<FusedKernel>, f64) {
    let single = |i: usize| {
        let c = &group[i];
        if p.granularity == Fusion::None || !p.gpu_supports {
            c.gpu_s
        } else {
            c.gpu_s.min(floor_s + c.bytes / bw)
        }
    };
    if p.granularity == Fusion::None || !p.gpu_supports {
        let ks = (0..group.len()).map(|i| FusedKernel { ops: vec![i], gpu_s: single(i) }).collect();
        return (ks, 0.0);
    }
    let mut out: Vec<FusedKernel> = Vec::new();
    let mut saved = 0.0;
    for i in 0..group.len() {
        let t = single(i);
        let joins = match out.last() {
            None => false,
            Some(k) => {
                let growth = REGISTER_GROWTH_PER_OP * k.ops.len() as f64;
                let within_regs = growth <= MAX_REGISTER_GROWTH + 1e-12;
                let cross = match p.granularity {
                    Fusion::Coarse => true,
                    Fusion::Hybrid => {
                        let prev = k.ops.last().map_or(0.0, |&j| group[j].gpu_s);
                        prev < p.latency_threshold_s && group[i].gpu_s < p.latency_threshold_s
                    }
                    Fusion::Fine | Fusion::None => false,
                };
                cross && within_regs
            }
        };
        if joins {
            let prev = *out.last().and_then(|k| k.ops.last()).unwrap_or(&i);
            let handoff = if p.memory_coalesce { 2.0 * group[prev].handoff_bytes } else { 0.0 };
            saved += handoff;
            let k = out.last_mut().expect("joins implies a kernel");
            let merged = k.gpu_s + t - floor_s - handoff / bw;
            k.gpu_s = merged.max(floor_s).min(k.gpu_s + t);
            k.ops.push(i);
        } else {
            out.push(FusedKernel { ops: vec![i], gpu_s: t });
        }
    }
    (out, saved)
}

/// A matrix unit's tile (§2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TileUnit {
    /// CUDA tensor cores: 16×16 tiles (≤ 255 registers per thread).
    Cuda,
    /// TPU MXU as the seed states it: 8×8 tiles with int8 weights.
    TpuMxu,
    /// Both constraints: TPU alignment first (hard), then the CUDA block size adjusted.
    TpuThenCuda,
}

/// `x` rounded up to a multiple of `unit` (≥ 1).
fn round_up(x: f64, unit: f64) -> f64 {
    (x / unit).ceil().max(1.0) * unit
}

/// GEMM dimensions `(m, k, n)` padded to the unit's tile (§2.4). Padding is work the unit
/// does anyway, so it costs time in the compute roof. For `TpuThenCuda` the 8-alignment is
/// applied first and the result then rounded to the CUDA 16 block (i.e. 16 overall, since 8
/// divides 16: the TPU constraint is never broken by the CUDA adjustment).
pub fn tile_aligned(m: f64, k: f64, n: f64, unit: TileUnit) -> (f64, f64, f64) {
    match unit {
        TileUnit::Cuda => (round_up(m, 16.0), round_up(k, 16.0), round_up(n, 16.0)),
        TileUnit::TpuMxu => (round_up(m, 8.0), round_up(k, 8.0), round_up(n, 8.0)),
        TileUnit::TpuThenCuda => {
            let (m, k, n) = tile_aligned(m, k, n, TileUnit::TpuMxu);
            tile_aligned(m, k, n, TileUnit::Cuda)
        }
    }
}

/// Block-table descriptor cache of a GPU (§2.5): `(entries, remap latency hint in cycles)`,
/// from its record (seed values: A100 64 entries / 4 cycles, H100 and H200 256 / 2).
pub fn descriptor_cache(gpu: &Gpu) -> (f64, f64) {
    (f64::from(gpu.descriptor_cache_entries), gpu.descriptor_miss_cycles)
}

/// SM clock used to turn cycles into time, Hz: the record's boost clock.
pub fn sm_clock_hz(gpu: &Gpu) -> f64 {
    gpu.sm_clock_mhz * 1e6
}

/// Remap cost of one layer's decode attention (§2.5), s: `decode_seqs` sequences holding
/// `context_tokens` tokens in blocks of `block_size` visit ⌈ctx/block⌉ blocks each; blocks
/// beyond the descriptor cache (per sequence) miss and cost the latency hint. Aggregated over
/// sequences (the engine keeps decode attention aggregated): misses = max(0, blocks − entries
/// · seqs) with blocks ≈ ctx/block + seqs/2 (half a block of rounding per sequence).
pub fn remap_s(context_tokens: f64, decode_seqs: f64, block_size: f64, gpu: &Gpu) -> f64 {
    if decode_seqs <= 0.0 || block_size <= 0.0 {
        return 0.0;
    }
    let (entries, cycles) = descriptor_cache(gpu);
    remap_with(context_tokens, decode_seqs, block_size, entries, cycles, sm_clock_hz(gpu))
}

/// [`remap_s`] with the GPU's constants resolved (`descriptor_cache`, `sm_clock_hz`), for
/// callers that price many steps on one GPU.
#[inline]
pub fn remap_with(context_tokens: f64, decode_seqs: f64, block_size: f64, entries: f64, cycles: f64, clock_hz: f64) -> f64 {
    if decode_seqs <= 0.0 || block_size <= 0.0 {
        return 0.0;
    }
    remap_blocks(context_tokens / block_size, decode_seqs, entries, cycles, clock_hz)
}

/// [`remap_with`] given the blocks the sequences' context fills, `Σ ctx_i / block_i` (each
/// request with its own block size, as o1pro's cache holds them), plus half a block of
/// rounding per sequence.
#[inline]
pub fn remap_blocks(context_blocks: f64, decode_seqs: f64, entries: f64, cycles: f64, clock_hz: f64) -> f64 {
    if decode_seqs <= 0.0 {
        return 0.0;
    }
    let blocks = context_blocks + decode_seqs / 2.0;
    let misses = (blocks - entries * decode_seqs).max(0.0);
    misses * cycles / clock_hz
}

/// L2 line contention (§3.3), cycles, when `sms` SMs touch the same metadata lines: seed
/// points 1 → 42, 4 → 187, 8 → 392, linear between them and beyond the last two.
pub fn l2_contention_cycles(sms: f64) -> f64 {
    const PTS: [(f64, f64); 3] = [(1.0, 42.0), (4.0, 187.0), (8.0, 392.0)];
    let s = sms.max(1.0);
    let (a, b) = if s <= 4.0 { (PTS[0], PTS[1]) } else { (PTS[1], PTS[2]) };
    a.1 + (s - a.0) * (b.1 - a.1) / (b.0 - a.0)
}

/// Lower bound on a scheduling decision's latency (§3.3), s: moving `metadata_bytes` over a
/// link of `link_gbps` GB/s with `link_latency_s`, plus L2 contention of `sms` SMs at the
/// SM clock. (The seed's 256 KiB at 600 GB/s is 437 ns, not 344 ns.)
pub fn decision_latency_s(metadata_bytes: f64, link_gbps: f64, link_latency_s: f64, sms: f64, clock_hz: f64) -> f64 {
    metadata_bytes / (link_gbps * 1e9) + link_latency_s + l2_contention_cycles(sms) / clock_hz
}

/// Scheduler metadata one decision moves (§3.3: 256 KiB of control metadata).
pub const DECISION_METADATA_BYTES: f64 = 256.0 * 1024.0;

/// The decision latency of one o1pro scheduling step on a replica of `tp` GPUs (§3.3): the
/// seed's 256 KiB of metadata over the GPU's NVLink (its `nvlink_gbps`, the seed's 600 GB/s on
/// an A100; link latency left out, as the seed's lower bound does) plus L2 line contention
/// among the `tp` ranks reading it (one SM each) at the SM clock. 0.46 µs on an A100 at TP 1.
pub fn o1pro_decision_latency_s(gpu: &Gpu, tp: u32) -> f64 {
    decision_latency_s(DECISION_METADATA_BYTES, gpu.nvlink_gbps, 0.0, f64::from(tp.max(1)), sm_clock_hz(gpu))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group() -> Vec<ElemCost> {
        // residual_add then rms_norm at 1,024 tokens of width 4,096 (bytes at ~4 TB/s)
        let tok = 1024.0 * 4096.0 * 2.0;
        vec![
            ElemCost { gpu_s: 5e-6, kernels: 1.0, bytes: 3.0 * tok, handoff_bytes: tok },
            ElemCost { gpu_s: 6e-6, kernels: 1.0, bytes: 2.0 * tok, handoff_bytes: 0.0 },
        ]
    }

    fn policy(g: Fusion) -> FusionPolicy {
        FusionPolicy { granularity: g, latency_threshold_s: 0.8e-3, memory_coalesce: true, gpu_supports: true }
    }

    #[test]
    fn fusion_saves_launches_and_bytes() {
        let g = group();
        let (none, s0) = plan_fusion(&g, &policy(Fusion::None), 2.5e-6, 4.2e12);
        let (coarse, s1) = plan_fusion(&g, &policy(Fusion::Coarse), 2.5e-6, 4.2e12);
        assert_eq!((none.len(), coarse.len(), s0), (2, 1, 0.0));
        assert_eq!(s1, 2.0 * 1024.0 * 4096.0 * 2.0); // the hand-off written and read back
        let t0: f64 = none.iter().map(|k| k.gpu_s).sum();
        let t1: f64 = coarse.iter().map(|k| k.gpu_s).sum();
        // one floor and one round trip of 8 MiB saved: ~2.5 + 4 µs of 11 µs
        assert!(t1 < t0 && t1 > 0.3 * t0, "{t0} {t1}");
        let (fine, _) = plan_fusion(&g, &policy(Fusion::Fine), 2.5e-6, 4.2e12);
        assert_eq!(fine.len(), 2);
        // no coalescing: one launch saved, no bytes
        let mut p = policy(Fusion::Coarse);
        p.memory_coalesce = false;
        let (nc, s2) = plan_fusion(&g, &p, 2.5e-6, 4.2e12);
        assert_eq!((nc.len(), s2), (1, 0.0));
        assert!(nc[0].gpu_s > t1);
        p.gpu_supports = false;
        assert_eq!(plan_fusion(&g, &p, 2.5e-6, 4.2e12).0.len(), 2);
    }

    #[test]
    fn hybrid_stops_at_the_latency_threshold_and_registers_cap_groups() {
        let mut g = group();
        g[1].gpu_s = 1.0e-3; // a long op stays alone under hybrid
        assert_eq!(plan_fusion(&g, &policy(Fusion::Hybrid), 2.5e-6, 4.2e12).0.len(), 2);
        assert_eq!(plan_fusion(&g, &policy(Fusion::Coarse), 2.5e-6, 4.2e12).0.len(), 1);
        let six = vec![group()[0]; 6];
        let (ks, _) = plan_fusion(&six, &policy(Fusion::Coarse), 2.5e-6, 4.2e12);
        assert_eq!(ks.iter().map(|k| k.ops.len()).collect::<Vec<_>>(), vec![4, 2]);
    }

    #[test]
    fn tile_alignment_pads_small_dims() {
        assert_eq!(tile_aligned(1.0, 4096.0, 6144.0, TileUnit::Cuda), (16.0, 4096.0, 6144.0));
        assert_eq!(tile_aligned(12.0, 100.0, 7.0, TileUnit::TpuMxu), (16.0, 104.0, 8.0));
        assert_eq!(tile_aligned(12.0, 100.0, 7.0, TileUnit::TpuThenCuda), (16.0, 112.0, 16.0));
        // a decode batch of 1 does 16x the FLOPs of its useful work on tensor cores
        let (m, _, _) = tile_aligned(1.0, 1.0, 1.0, TileUnit::Cuda);
        assert_eq!(m, 16.0);
    }

    #[test]
    fn remap_cost_grows_with_small_blocks_and_long_context() {
        let gpu = |name: &str| crate::catalog::resolve_gpu(&name.into()).unwrap();
        let h200 = |ctx: f64, bs: f64| remap_s(ctx, 1.0, bs, &gpu("h200"));
        assert_eq!(h200(2048.0, 16.0), 0.0); // 128 blocks fit the 256-entry cache
        let t16 = h200(131072.0, 16.0); // 8,192 blocks: 7,936.5 misses x 2 cycles
        assert!((t16 - 7936.5 * 2.0 / 1.98e9).abs() < 1e-15);
        assert!(h200(131072.0, 128.0) < 0.1 * t16); // larger blocks: 1,024 blocks, 768 misses
        assert!(remap_s(131072.0, 1.0, 16.0, &gpu("a100-80g")) > 2.0 * t16); // 64 entries, 4 cycles
        // The A100 variants share the A100's cache; each GPU's own clock turns cycles into time.
        assert_eq!(remap_s(131072.0, 1.0, 16.0, &gpu("a100-40g")), remap_s(131072.0, 1.0, 16.0, &gpu("a100-80g")));
        let pcie = remap_s(131072.0, 1.0, 16.0, &gpu("h100-pcie"));
        assert!((pcie / t16 - 1980.0 / 1755.0).abs() < 1e-12, "{pcie} {t16}");
    }

    #[test]
    fn decision_latency_matches_the_seed_arithmetic() {
        assert_eq!(l2_contention_cycles(4.0), 187.0);
        assert_eq!(l2_contention_cycles(8.0), 392.0);
        let t = decision_latency_s(256.0 * 1024.0, 600.0, 0.0, 1.0, 1.98e9);
        // 437 ns of transfer (not 344) + 42 cycles at 1.98 GHz
        assert!((t - (437.0e-9 + 42.0 / 1.98e9)).abs() < 1e-9, "{t}");
        assert!(decision_latency_s(0.0, 600.0, 0.0, 8.0, 1.98e9) > decision_latency_s(0.0, 600.0, 0.0, 1.0, 1.98e9));
    }
}
