//! Multi-LoRA's cost in a step (`workload.lora`): the adapters' GEMMs beside the base
//! model's, as vLLM runs them with its Punica kernels (`vllm/lora/ops/`: a *shrink* `x · A`
//! to the rank and an *expand* `· B` back, each one kernel for all the step's rows whatever
//! adapter each row uses — SGMV/BGMV).
//!
//! Per layer, vLLM fuses the adapted projections into four groups (the packed `qkv_proj`'s
//! slices, `o_proj`, the packed `gate_up_proj`, `down_proj`), each a shrink and an expand
//! kernel. A kernel reads the weights of every adapter in the step once (the rows are
//! grouped by adapter) and does `2 · rows · in · rank` FLOPs (shrink) or `2 · rows · rank ·
//! out` (expand): it costs the GPU's kernel floor plus the larger of its weight read at the
//! streaming bandwidth and its FLOPs at the GEMM rate. So rank 64 costs eight times rank 8's
//! weight traffic, and every extra adapter in a batch adds its weights' read.
//!
//! Under TP an adapter is split as its layer is: a column-parallel projection (q, k, v,
//! gate, up) keeps `A` whole and splits `B`'s outputs, a row-parallel one (o, down) splits
//! `A`'s inputs and keeps `B` whole (vLLM's `ColumnParallelLinearWithLoRA` /
//! `RowParallelLinearWithLoRA`). Adapters are BF16.

use crate::catalog::Model;

/// Bytes per adapter weight (vLLM keeps LoRA weights in the model's 16-bit dtype).
pub const LORA_WEIGHT_BYTES: f64 = 2.0;

/// One fused LoRA group of a layer on one GPU: its shrink's input width, and the expand's
/// output width, summed over the group's adapted projections (`slices`).
#[derive(Debug, Clone, Copy)]
struct Group {
    input: f64,
    /// Σ output widths of the adapted projections (each its own `B`).
    output: f64,
    /// Adapted projections in the group (each its own `A` of `input × rank`).
    slices: f64,
    /// Column-parallel (A whole, B split over TP) rather than row-parallel.
    column: bool,
}

/// The adapters' shapes on one GPU of a replica at TP `tp`.
#[derive(Debug, Clone)]
pub struct LoraShapes {
    groups: Vec<Group>,
    layers: f64,
    rank: f64,
    tp: f64,
}

impl LoraShapes {
    /// The groups `targets` adapts (module names of [`crate::workload::LORA_MODULES`]).
    pub fn new(model: &Model, tp: u32, rank: u32, targets: impl Fn(&str) -> bool) -> LoraShapes {
        let t = f64::from(tp.max(1));
        let h = f64::from(model.hidden);
        let q = f64::from(model.heads * model.head_dim);
        let kv = f64::from(model.kv_heads * model.head_dim);
        let inter = f64::from(if model.dense_intermediate > 0 { model.dense_intermediate } else { model.intermediate });
        let mut groups = Vec::new();
        let mut group = |names: &[(&str, f64)], input: f64, column: bool| {
            let (mut output, mut slices) = (0.0, 0.0);
            for &(n, w) in names {
                if targets(n) {
                    output += w;
                    slices += 1.0;
                }
            }
            if slices > 0.0 {
                groups.push(Group { input, output, slices, column });
            }
        };
        group(&[("q_proj", q / t), ("k_proj", kv / t), ("v_proj", kv / t)], h, true);
        group(&[("o_proj", h)], q / t, false);
        group(&[("gate_proj", inter / t), ("up_proj", inter / t)], h, true);
        group(&[("down_proj", h)], inter / t, false);
        LoraShapes { groups, layers: f64::from(model.layers), rank: f64::from(rank), tp: t }
    }

    /// One adapter's bytes on one GPU (what a GPU slot holds and a load copies).
    pub fn bytes_per_gpu(&self) -> f64 {
        let per_layer: f64 = self.groups.iter().map(|g| self.rank * (g.slices * g.input + g.output)).sum();
        self.layers * per_layer * LORA_WEIGHT_BYTES
    }

    /// One whole adapter's bytes (its checkpoint, read from disk): every GPU's shard of the
    /// split matrices, the whole ones once.
    pub fn bytes_total(&self) -> f64 {
        // Column groups keep A whole (input h) and split B; row groups split A and keep B.
        let per_layer: f64 = self
            .groups
            .iter()
            .map(|g| {
                if g.column {
                    self.rank * (g.slices * g.input + g.output * self.tp)
                } else {
                    self.rank * (g.slices * g.input * self.tp + g.output)
                }
            })
            .sum();
        self.layers * per_layer * LORA_WEIGHT_BYTES
    }

    /// The adapters' rank.
    pub fn rank(&self) -> u32 {
        self.rank as u32
    }

    /// Kernels per layer (a shrink and an expand per group).
    pub fn kernels_per_layer(&self) -> f64 {
        2.0 * self.groups.len() as f64
    }

    /// GPU time of the LoRA kernels of a step of `rows` rows using `adapters` distinct
    /// adapters, s, at `stream_bw` bytes/s, `flops` FLOP/s and a kernel floor of `floor` s.
    pub fn step_s(&self, rows: f64, adapters: f64, stream_bw: f64, flops: f64, floor: f64) -> f64 {
        if adapters <= 0.0 || rows <= 0.0 {
            return 0.0;
        }
        let r = self.rank;
        let kernel = |weights: f64, work: f64| floor + (adapters * weights * LORA_WEIGHT_BYTES / stream_bw).max(work / flops);
        let per_layer: f64 = self
            .groups
            .iter()
            .map(|g| kernel(g.slices * g.input * r, 2.0 * rows * g.slices * g.input * r) + kernel(r * g.output, 2.0 * rows * r * g.output))
            .sum();
        self.layers * per_layer
    }
}
