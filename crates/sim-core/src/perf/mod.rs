//! Execution-time model v1: how long one scheduler step of one replica takes on the GPU.
//!
//! Two models behind [`CostModelSpec`]:
//! * `linear`: an affine function of the batch's token counts (for calibrated fits and tests);
//! * `roofline` (default): a sum of small per-operator roofline estimates — each kernel takes
//!   the longer of its FLOPs at the achieved compute rate and its bytes at the achieved
//!   memory bandwidth — plus communication, kernel-launch and CPU overheads.
//!
//! Everything is BF16 (weights, activations, KV cache). A later version replaces the roofline
//! with calibrated tables; this one aims to be simple, documented and monotone.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::catalog::{fraction, Gpu, Model};
use crate::error::{check, Result};
use crate::memory::{check_parallelism, kv_heads_per_gpu};

/// Default fraction of the BF16 peak reached by attention kernels. An estimate: the
/// FlashAttention-3 paper (Shah et al., 2024) reports up to 740 TFLOP/s (75 %) on H100 for
/// long sequences; serving batches are shorter and ragged, so 0.6.
pub const DEFAULT_ATTENTION_EFFICIENCY: f64 = 0.6;
/// Default fixed CPU time per step (scheduler, input preparation, output processing), ms.
/// An estimate for vLLM V1-style engines.
pub const DEFAULT_CPU_OVERHEAD_MS: f64 = 1.0;
/// Default CPU time per scheduled request per step (input tensors, detokenisation), µs. An
/// estimate.
pub const DEFAULT_CPU_PER_SEQ_US: f64 = 5.0;
/// Default cost of launching one kernel from eager PyTorch (op dispatch + `cudaLaunchKernel`),
/// µs; also the latency of one CUDA-graph replay. An estimate.
pub const DEFAULT_KERNEL_LAUNCH_US: f64 = 6.0;
/// Default latency of one hop of a ring collective or a point-to-point transfer, µs. An
/// estimate: small-message all-reduce over NVLink on 8 GPUs (14 ring hops) costs a few tens of
/// µs.
pub const DEFAULT_COMM_LATENCY_US: f64 = 2.0;
/// Default largest pure-decode batch replayed as a CUDA graph (vLLM captures graphs for
/// batch sizes up to 512).
pub const DEFAULT_CUDA_GRAPH_MAX_BATCH: u32 = 512;

/// Bytes per BF16 value.
const BF16: f64 = 2.0;
/// Bytes per FP32 value.
const FP32: f64 = 4.0;
/// Passes over the FP32 logits in the sampler (temperature, softmax read/write, top-k/p,
/// sample). An estimate.
const SAMPLER_PASSES: f64 = 6.0;
/// Kernels per transformer layer in eager mode: 2 RMSNorms, qkv GEMM, rotary, KV-cache write,
/// attention, o GEMM, gate_up GEMM, SiLU·mul, down GEMM.
const KERNELS_PER_LAYER: f64 = 10.0;
/// Extra kernels per MoE layer (router GEMM, top-k, token permutation).
const KERNELS_PER_MOE_LAYER: f64 = 3.0;
/// Kernels outside the layers: embedding, final norm, lm_head, ~8 sampler kernels.
const KERNELS_PER_STEP: f64 = 11.0;

/// Which execution-time model to use, with its parameters. Deserializes from a table
/// internally tagged by `kind` (`"roofline"`, the default when `kind` is absent, or
/// `"linear"`), or from the bare string `"roofline"`. Unknown fields, and fields of the other
/// kind, are rejected by name.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum CostModelSpec {
    /// Per-operator roofline (see the module docs). All fields optional in the input.
    Roofline {
        /// Overrides the GPU's `compute_efficiency` (fraction of BF16 peak for GEMMs), (0, 1].
        #[serde(skip_serializing_if = "Option::is_none")]
        compute_efficiency: Option<f64>,
        /// Overrides the GPU's `memory_efficiency` (fraction of HBM bandwidth), (0, 1].
        #[serde(skip_serializing_if = "Option::is_none")]
        memory_efficiency: Option<f64>,
        /// Fraction of BF16 peak reached by attention, (0, 1]; default
        /// [`DEFAULT_ATTENTION_EFFICIENCY`].
        attention_efficiency: f64,
        /// Fixed CPU time per step, ms; default [`DEFAULT_CPU_OVERHEAD_MS`].
        cpu_overhead_ms: f64,
        /// CPU time per scheduled request per step, µs; default [`DEFAULT_CPU_PER_SEQ_US`].
        cpu_per_seq_us: f64,
        /// Launch cost of one eager kernel / one graph replay, µs; default
        /// [`DEFAULT_KERNEL_LAUNCH_US`].
        kernel_launch_us: f64,
        /// Latency of one collective hop or point-to-point transfer, µs; default
        /// [`DEFAULT_COMM_LATENCY_US`].
        comm_latency_us: f64,
        /// Largest pure-decode batch run as one CUDA-graph replay (0 = always eager);
        /// default [`DEFAULT_CUDA_GRAPH_MAX_BATCH`].
        cuda_graph_max_batch: u32,
    },
    /// `ms = base_ms + per_prefill_token_ms · prefill_tokens + per_decode_seq_ms · decode_seqs
    /// + per_context_token_ms · context_sum_after`. Missing coefficients are 0.
    Linear {
        /// Fixed time per step, ms.
        base_ms: f64,
        /// Time per prefill token, ms.
        per_prefill_token_ms: f64,
        /// Time per decoding sequence, ms.
        per_decode_seq_ms: f64,
        /// Time per token of KV context (after the step) over all scheduled requests, ms.
        per_context_token_ms: f64,
    },
}

impl Default for CostModelSpec {
    fn default() -> Self {
        CostModelSpec::Roofline {
            compute_efficiency: None,
            memory_efficiency: None,
            attention_efficiency: DEFAULT_ATTENTION_EFFICIENCY,
            cpu_overhead_ms: DEFAULT_CPU_OVERHEAD_MS,
            cpu_per_seq_us: DEFAULT_CPU_PER_SEQ_US,
            kernel_launch_us: DEFAULT_KERNEL_LAUNCH_US,
            comm_latency_us: DEFAULT_COMM_LATENCY_US,
            cuda_graph_max_batch: DEFAULT_CUDA_GRAPH_MAX_BATCH,
        }
    }
}

impl CostModelSpec {
    /// Check the parameters: efficiencies in (0, 1], everything else finite and ≥ 0. Error
    /// paths are relative to the spec (`base_ms`); callers prefix them.
    pub fn validate(&self) -> Result<()> {
        match self {
            CostModelSpec::Roofline {
                compute_efficiency,
                memory_efficiency,
                attention_efficiency,
                cpu_overhead_ms,
                cpu_per_seq_us,
                kernel_launch_us,
                comm_latency_us,
                cuda_graph_max_batch: _,
            } => {
                if let Some(v) = compute_efficiency {
                    fraction("compute_efficiency", *v)?;
                }
                if let Some(v) = memory_efficiency {
                    fraction("memory_efficiency", *v)?;
                }
                fraction("attention_efficiency", *attention_efficiency)?;
                check::non_negative("cpu_overhead_ms", *cpu_overhead_ms)?;
                check::non_negative("cpu_per_seq_us", *cpu_per_seq_us)?;
                check::non_negative("kernel_launch_us", *kernel_launch_us)?;
                check::non_negative("comm_latency_us", *comm_latency_us)?;
            }
            CostModelSpec::Linear {
                base_ms,
                per_prefill_token_ms,
                per_decode_seq_ms,
                per_context_token_ms,
            } => {
                check::non_negative("base_ms", *base_ms)?;
                check::non_negative("per_prefill_token_ms", *per_prefill_token_ms)?;
                check::non_negative("per_decode_seq_ms", *per_decode_seq_ms)?;
                check::non_negative("per_context_token_ms", *per_context_token_ms)?;
            }
        }
        Ok(())
    }
}

/// Input form of [`CostModelSpec`]: every field of both kinds, all optional.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a cost model table such as { kind = \"roofline\" } or { kind = \"linear\", base_ms = 5.0 }"
)]
struct RawCostModel {
    kind: Option<String>,
    compute_efficiency: Option<f64>,
    memory_efficiency: Option<f64>,
    attention_efficiency: Option<f64>,
    cpu_overhead_ms: Option<f64>,
    cpu_per_seq_us: Option<f64>,
    kernel_launch_us: Option<f64>,
    comm_latency_us: Option<f64>,
    cuda_graph_max_batch: Option<u32>,
    base_ms: Option<f64>,
    per_prefill_token_ms: Option<f64>,
    per_decode_seq_ms: Option<f64>,
    per_context_token_ms: Option<f64>,
}

const KINDS: [&str; 2] = ["roofline", "linear"];
const LINEAR_FIELDS: &str =
    "base_ms, per_prefill_token_ms, per_decode_seq_ms, per_context_token_ms";
const ROOFLINE_FIELDS: &str = "compute_efficiency, memory_efficiency, attention_efficiency, cpu_overhead_ms, \
                               cpu_per_seq_us, kernel_launch_us, comm_latency_us, cuda_graph_max_batch";

fn wrong_kind(field: &str, kind: &str, valid: &str) -> String {
    format!("field `{field}` does not apply to kind \"{kind}\" (its fields: {valid})")
}

impl RawCostModel {
    fn into_spec(self) -> std::result::Result<CostModelSpec, String> {
        match self.kind.as_deref() {
            None | Some("roofline") => {
                for (name, given) in [
                    ("base_ms", self.base_ms.is_some()),
                    ("per_prefill_token_ms", self.per_prefill_token_ms.is_some()),
                    ("per_decode_seq_ms", self.per_decode_seq_ms.is_some()),
                    ("per_context_token_ms", self.per_context_token_ms.is_some()),
                ] {
                    if given {
                        return Err(wrong_kind(name, "roofline", ROOFLINE_FIELDS));
                    }
                }
                Ok(CostModelSpec::Roofline {
                    compute_efficiency: self.compute_efficiency,
                    memory_efficiency: self.memory_efficiency,
                    attention_efficiency: self
                        .attention_efficiency
                        .unwrap_or(DEFAULT_ATTENTION_EFFICIENCY),
                    cpu_overhead_ms: self.cpu_overhead_ms.unwrap_or(DEFAULT_CPU_OVERHEAD_MS),
                    cpu_per_seq_us: self.cpu_per_seq_us.unwrap_or(DEFAULT_CPU_PER_SEQ_US),
                    kernel_launch_us: self.kernel_launch_us.unwrap_or(DEFAULT_KERNEL_LAUNCH_US),
                    comm_latency_us: self.comm_latency_us.unwrap_or(DEFAULT_COMM_LATENCY_US),
                    cuda_graph_max_batch: self
                        .cuda_graph_max_batch
                        .unwrap_or(DEFAULT_CUDA_GRAPH_MAX_BATCH),
                })
            }
            Some("linear") => {
                for (name, given) in [
                    ("compute_efficiency", self.compute_efficiency.is_some()),
                    ("memory_efficiency", self.memory_efficiency.is_some()),
                    ("attention_efficiency", self.attention_efficiency.is_some()),
                    ("cpu_overhead_ms", self.cpu_overhead_ms.is_some()),
                    ("cpu_per_seq_us", self.cpu_per_seq_us.is_some()),
                    ("kernel_launch_us", self.kernel_launch_us.is_some()),
                    ("comm_latency_us", self.comm_latency_us.is_some()),
                    ("cuda_graph_max_batch", self.cuda_graph_max_batch.is_some()),
                ] {
                    if given {
                        return Err(wrong_kind(name, "linear", LINEAR_FIELDS));
                    }
                }
                Ok(CostModelSpec::Linear {
                    base_ms: self.base_ms.unwrap_or(0.0),
                    per_prefill_token_ms: self.per_prefill_token_ms.unwrap_or(0.0),
                    per_decode_seq_ms: self.per_decode_seq_ms.unwrap_or(0.0),
                    per_context_token_ms: self.per_context_token_ms.unwrap_or(0.0),
                })
            }
            Some(other) => {
                Err(check::unknown_name("kind", "cost model kind", other, &KINDS).to_string())
            }
        }
    }
}

struct CostModelVisitor;

impl<'de> Visitor<'de> for CostModelVisitor {
    type Value = CostModelSpec;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a cost model table such as { kind = \"roofline\" } or { kind = \"linear\", base_ms = 5.0 }")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<CostModelSpec, E> {
        match v {
            "roofline" => Ok(CostModelSpec::default()),
            "linear" => Err(E::custom(
                "the linear cost model needs coefficients: use a table { kind = \"linear\", base_ms = ..., ... }",
            )),
            other => Err(E::custom(check::unknown_name("kind", "cost model kind", other, &KINDS))),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<CostModelSpec, A::Error> {
        let raw = RawCostModel::deserialize(de::value::MapAccessDeserializer::new(map))?;
        raw.into_spec().map_err(de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for CostModelSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(CostModelVisitor)
    }
}

/// One request in the prefill phase this step.
#[derive(Debug, Clone, Copy)]
pub struct PrefillItem {
    /// Prompt (or recomputed) tokens processed this step.
    pub new_tokens: u32,
    /// Tokens whose KV is already cached before this step (prefix hits, earlier chunks).
    pub context_before: u32,
}

/// Aggregate description of one scheduler step of one replica.
#[derive(Debug, Clone, Copy)]
pub struct BatchShape<'a> {
    /// Requests below their (re)prefill target: tokens this step + KV already there.
    pub prefill: &'a [PrefillItem],
    /// Σ `new_tokens` over `prefill`.
    pub prefill_tokens: u64,
    /// Requests producing their next output token from a 1-token decode.
    pub decode_seqs: u64,
    /// Σ over decode requests of KV length after the step (including the new token).
    pub decode_context_sum: u64,
    /// Σ over all scheduled requests of KV length after the step, this step's tokens included.
    pub context_sum_after: u64,
    /// Rows that go through lm_head + sampling (decodes + prefills completing their prompt).
    pub sampled: u64,
}

impl BatchShape<'_> {
    fn is_empty(&self) -> bool {
        self.prefill.is_empty()
            && self.prefill_tokens == 0
            && self.decode_seqs == 0
            && self.sampled == 0
    }
}

/// Names of the roofline components, in [`StepCostModel::breakdown`] order.
const ROOFLINE_NAMES: [&str; 11] = [
    "qkv_proj",
    "attention",
    "o_proj",
    "mlp",
    "elementwise",
    "tp_comm",
    "pp_transfer",
    "lm_head",
    "sampler",
    "launch",
    "cpu",
];
/// Names of the linear components, in [`StepCostModel::breakdown`] order.
const LINEAR_NAMES: [&str; 4] = ["base", "prefill_tokens", "decode_seqs", "context_tokens"];

/// A precomputed execution-time model for one (model, GPU, tp, pp) replica.
#[derive(Debug, Clone)]
pub struct StepCostModel {
    inner: Inner,
}

#[derive(Debug, Clone)]
enum Inner {
    Linear {
        base_ms: f64,
        prefill_ms: f64,
        decode_ms: f64,
        context_ms: f64,
    },
    Roofline(Box<Roofline>),
}

/// The MLP of one layer, per-GPU shapes (K = input width, N = output width).
#[derive(Debug, Clone)]
enum Mlp {
    Dense {
        gate_up: (f64, f64),
        down: (f64, f64),
    },
    Moe {
        router: (f64, f64),
        experts: f64,
        top_k: f64,
        gate_up: (f64, f64),
        down: (f64, f64),
    },
}

/// Everything the roofline needs, precomputed. Rates in FLOP/s and bytes/s, times in s.
#[derive(Debug, Clone)]
struct Roofline {
    /// Layers executed per step (all stages run one after another).
    layers: f64,
    /// Achieved GEMM rate, FLOP/s.
    gemm_flops: f64,
    /// Achieved attention rate, FLOP/s.
    attn_flops: f64,
    /// Achieved memory bandwidth, bytes/s.
    mem_bw: f64,
    /// Per-direction link bandwidth (half the bidirectional NVLink/PCIe rate), bytes/s.
    link_bw: f64,
    qkv: (f64, f64),
    o: (f64, f64),
    mlp: Mlp,
    /// Query width on one GPU: `heads / tp · head_dim`.
    q_dim: f64,
    /// KV bytes per token per layer on one GPU.
    kv_bytes_tok_layer: f64,
    /// Elementwise bytes moved per token per layer.
    elem_bytes_tok_layer: f64,
    /// Embedding lookup bytes per token.
    embed_bytes_tok: f64,
    lm_head: (f64, f64),
    /// Sampler bytes per sampled row.
    sampler_bytes_row: f64,
    /// TP all-reduces per step (2 per layer when tp > 1, else 0).
    allreduces: f64,
    /// Bytes each GPU sends per token per all-reduce: `2 (tp−1)/tp · hidden · 2`.
    allreduce_bytes_tok: f64,
    /// Latency of one all-reduce: `2 (tp−1)` hops.
    allreduce_latency: f64,
    /// Bytes each GPU sends per sampled row to gather the logits: `(tp−1)/tp · vocab · 2`.
    gather_bytes_row: f64,
    /// Latency of the logits gather: `tp − 1` hops (0 when tp = 1).
    gather_latency: f64,
    /// Pipeline-stage boundaries (`pp − 1`).
    pp_boundaries: f64,
    /// Activation bytes per token crossing a stage boundary: `hidden · 2`.
    pp_bytes_tok: f64,
    /// One hop latency, s.
    hop_latency: f64,
    /// Kernels launched by one eager step.
    eager_kernels: f64,
    launch: f64,
    cpu_step: f64,
    cpu_per_seq: f64,
    graph_max: u64,
}

/// Roofline time of one GEMM of `m × k` by `k × n` (BF16 in and out): the longer of its FLOPs
/// at `flops` and its bytes (weights + input + output) at `bw`; 0 when `m` is 0.
fn gemm_time(m: f64, (k, n): (f64, f64), flops: f64, bw: f64) -> f64 {
    if m <= 0.0 {
        return 0.0;
    }
    let compute = 2.0 * m * k * n / flops;
    let memory = (k * n + m * k + m * n) * BF16 / bw;
    compute.max(memory)
}

impl Roofline {
    fn new(spec: &CostModelSpec, model: &Model, gpu: &Gpu, tp: u32, pp: u32) -> Self {
        let (ce, me, ae, cpu_ms, per_seq_us, launch_us, latency_us, graph_max) = match spec {
            CostModelSpec::Roofline {
                compute_efficiency,
                memory_efficiency,
                attention_efficiency,
                cpu_overhead_ms,
                cpu_per_seq_us,
                kernel_launch_us,
                comm_latency_us,
                cuda_graph_max_batch,
            } => (
                compute_efficiency.unwrap_or(gpu.compute_efficiency),
                memory_efficiency.unwrap_or(gpu.memory_efficiency),
                *attention_efficiency,
                *cpu_overhead_ms,
                *cpu_per_seq_us,
                *kernel_launch_us,
                *comm_latency_us,
                *cuda_graph_max_batch,
            ),
            CostModelSpec::Linear { .. } => {
                let d = CostModelSpec::default();
                return Roofline::new(&d, model, gpu, tp, pp);
            }
        };
        let tpf = f64::from(tp);
        let hidden = f64::from(model.hidden);
        let head_dim = f64::from(model.head_dim);
        let q_dim = f64::from(model.heads) / tpf * head_dim;
        let kv_dim = f64::from(kv_heads_per_gpu(model, tp)) * head_dim;
        let inter = f64::from(model.intermediate) / tpf;
        let top_k = f64::from(model.experts_per_token);
        let moe = model.experts > 1;
        let mlp = if moe {
            Mlp::Moe {
                router: (hidden, f64::from(model.experts)),
                experts: f64::from(model.experts),
                top_k,
                gate_up: (hidden, 2.0 * inter),
                down: (inter, hidden),
            }
        } else {
            Mlp::Dense {
                gate_up: (hidden, 2.0 * inter),
                down: (inter, hidden),
            }
        };
        // Two fused add+RMSNorms (read x and residual, write both: 4 passes each), SiLU·mul
        // (read gate and up, write product) per routed expert, rotary (read+write q and k),
        // KV-cache write (read k and v, write them into the cache), MoE token permute and
        // un-permute (read+write the hidden state per routed copy, twice).
        let moe_bytes = if moe {
            4.0 * top_k * hidden * BF16
        } else {
            0.0
        };
        let elem_bytes_tok_layer = 8.0 * hidden * BF16
            + 3.0 * inter * top_k * BF16
            + 2.0 * (q_dim + kv_dim) * BF16
            + 4.0 * kv_dim * BF16
            + moe_bytes;
        let hop = latency_us * 1e-6;
        let layers = f64::from(model.layers);
        let vocab = f64::from(model.vocab);
        let ring = (tpf - 1.0) / tpf;
        let pp_boundaries = f64::from(pp) - 1.0;
        let eager_kernels = layers
            * (KERNELS_PER_LAYER
                + if moe { KERNELS_PER_MOE_LAYER } else { 0.0 }
                + if tp > 1 { 2.0 } else { 0.0 })
            + KERNELS_PER_STEP
            + 2.0 * pp_boundaries;
        Roofline {
            layers,
            gemm_flops: gpu.bf16_tflops * 1e12 * ce,
            attn_flops: gpu.bf16_tflops * 1e12 * ae,
            mem_bw: gpu.hbm_tbps * 1e12 * me,
            link_bw: gpu.nvlink_gbps * 1e9 / 2.0,
            qkv: (hidden, q_dim + 2.0 * kv_dim),
            o: (q_dim, hidden),
            mlp,
            q_dim,
            kv_bytes_tok_layer: 2.0 * kv_dim * BF16,
            elem_bytes_tok_layer,
            embed_bytes_tok: 2.0 * hidden * BF16,
            lm_head: (hidden, vocab / tpf),
            sampler_bytes_row: vocab * FP32 * SAMPLER_PASSES,
            allreduces: if tp > 1 { 2.0 * layers } else { 0.0 },
            allreduce_bytes_tok: 2.0 * ring * hidden * BF16,
            allreduce_latency: 2.0 * (tpf - 1.0) * hop,
            gather_bytes_row: ring * vocab * BF16,
            gather_latency: (tpf - 1.0) * hop,
            pp_boundaries,
            pp_bytes_tok: hidden * BF16,
            hop_latency: hop,
            eager_kernels,
            launch: launch_us * 1e-6,
            cpu_step: cpu_ms * 1e-3,
            cpu_per_seq: per_seq_us * 1e-6,
            graph_max: u64::from(graph_max),
        }
    }

    fn gemm(&self, m: f64, shape: (f64, f64)) -> f64 {
        gemm_time(m, shape, self.gemm_flops, self.mem_bw)
    }

    /// MLP of one layer for `m` tokens. MoE: `m · top_k` token-expert pairs; weights are read
    /// for `min(experts, pairs)` experts; plus the router GEMM.
    fn mlp_layer(&self, m: f64) -> f64 {
        if m <= 0.0 {
            return 0.0;
        }
        match self.mlp {
            Mlp::Dense { gate_up, down } => self.gemm(m, gate_up) + self.gemm(m, down),
            Mlp::Moe {
                router,
                experts,
                top_k,
                gate_up,
                down,
            } => {
                let pairs = m * top_k;
                let active = experts.min(pairs);
                let grouped = |(k, n): (f64, f64)| {
                    let compute = 2.0 * pairs * k * n / self.gemm_flops;
                    let memory = (active * k * n + pairs * k + pairs * n) * BF16 / self.mem_bw;
                    compute.max(memory)
                };
                self.gemm(m, router) + grouped(gate_up) + grouped(down)
            }
        }
    }

    /// Attention of one layer: prefill (causal, FLOPs `4 · q_dim · new · (context_before +
    /// new/2)`, bytes = KV read + Q read + O write) and decode (FLOPs `4 · q_dim · context`,
    /// bytes = KV read for every context token) each take the longer of compute at the
    /// attention rate and memory at the achieved bandwidth.
    fn attention_layer(&self, b: &BatchShape) -> f64 {
        let mut flops = 0.0;
        let mut bytes = 0.0;
        for item in b.prefill {
            let new = f64::from(item.new_tokens);
            let ctx = f64::from(item.context_before);
            flops += 4.0 * self.q_dim * new * (ctx + new / 2.0);
            bytes += (ctx + new) * self.kv_bytes_tok_layer + 2.0 * new * self.q_dim * BF16;
        }
        let prefill = (flops / self.attn_flops).max(bytes / self.mem_bw);
        let ctx = b.decode_context_sum as f64;
        let seqs = b.decode_seqs as f64;
        let decode_flops = 4.0 * self.q_dim * ctx;
        let decode_bytes = ctx * self.kv_bytes_tok_layer + 2.0 * seqs * self.q_dim * BF16;
        let decode = (decode_flops / self.attn_flops).max(decode_bytes / self.mem_bw);
        prefill + decode
    }

    /// Component times in seconds, in [`ROOFLINE_NAMES`] order.
    fn components(&self, b: &BatchShape) -> [f64; 11] {
        let m = (b.prefill_tokens + b.decode_seqs) as f64;
        let sampled = b.sampled as f64;
        let l = self.layers;
        let qkv = l * self.gemm(m, self.qkv);
        let attention = l * self.attention_layer(b);
        let o = l * self.gemm(m, self.o);
        let mlp = l * self.mlp_layer(m);
        let elementwise = m * (l * self.elem_bytes_tok_layer + self.embed_bytes_tok) / self.mem_bw;
        let mut tp_comm = 0.0;
        if self.allreduces > 0.0 {
            if m > 0.0 {
                tp_comm += self.allreduces
                    * (m * self.allreduce_bytes_tok / self.link_bw + self.allreduce_latency);
            }
            if sampled > 0.0 {
                tp_comm += sampled * self.gather_bytes_row / self.link_bw + self.gather_latency;
            }
        }
        let pp = if m > 0.0 {
            self.pp_boundaries * (m * self.pp_bytes_tok / self.link_bw + self.hop_latency)
        } else {
            0.0
        };
        let lm_head = self.gemm(sampled, self.lm_head);
        let sampler = sampled * self.sampler_bytes_row / self.mem_bw;
        let gpu = qkv + attention + o + mlp + elementwise + tp_comm + pp + lm_head + sampler;
        let graph = b.prefill_tokens == 0
            && b.prefill.is_empty()
            && b.decode_seqs > 0
            && b.decode_seqs <= self.graph_max;
        // A CUDA graph costs one replay; eager kernels are launched while earlier ones run, so
        // launching only adds time when the CPU cannot keep ahead of the GPU, plus the latency
        // of the first launch.
        let launch = if graph {
            self.launch
        } else {
            self.launch + (self.eager_kernels * self.launch - gpu).max(0.0)
        };
        let seqs = b.prefill.len() as f64 + b.decode_seqs as f64;
        let cpu = self.cpu_step + self.cpu_per_seq * seqs;
        [
            qkv,
            attention,
            o,
            mlp,
            elementwise,
            tp_comm,
            pp,
            lm_head,
            sampler,
            launch,
            cpu,
        ]
    }
}

impl StepCostModel {
    /// Precompute the model for one replica of `model` on `gpu` with tensor parallelism `tp`
    /// and pipeline parallelism `pp`. Errors: spec problems under `cost_model` (e.g.
    /// `cost_model.base_ms`), invalid model/GPU under `model` / `gpu`, bad
    /// `deployment.tp` / `deployment.pp`.
    pub fn new(spec: &CostModelSpec, model: &Model, gpu: &Gpu, tp: u32, pp: u32) -> Result<Self> {
        spec.validate().map_err(|e| e.under("cost_model"))?;
        model.validate().map_err(|e| e.under("model"))?;
        gpu.validate().map_err(|e| e.under("gpu"))?;
        check_parallelism(model, tp, pp)?;
        let inner = match spec {
            CostModelSpec::Linear {
                base_ms,
                per_prefill_token_ms,
                per_decode_seq_ms,
                per_context_token_ms,
            } => Inner::Linear {
                base_ms: *base_ms,
                prefill_ms: *per_prefill_token_ms,
                decode_ms: *per_decode_seq_ms,
                context_ms: *per_context_token_ms,
            },
            CostModelSpec::Roofline { .. } => {
                Inner::Roofline(Box::new(Roofline::new(spec, model, gpu, tp, pp)))
            }
        };
        Ok(StepCostModel { inner })
    }

    /// Duration of the step in integer nanoseconds (computed in f64, rounded once). 0 for an
    /// empty batch, ≥ 1 ns otherwise. No allocation; O(`prefill.len()`) work.
    pub fn step_ns(&self, b: &BatchShape) -> u64 {
        if b.is_empty() {
            return 0;
        }
        let seconds = match &self.inner {
            Inner::Linear { .. } => self.linear_ms(b).iter().sum::<f64>() * 1e-3,
            Inner::Roofline(r) => r.components(b).iter().sum::<f64>(),
        };
        let ns = (seconds * 1e9).round();
        // `as` saturates (and maps NaN to 0), so this never panics.
        (ns as u64).max(1)
    }

    /// The step's duration broken down by component, `(name, ms)`, in a fixed order. Roofline:
    /// `qkv_proj, attention, o_proj, mlp, elementwise, tp_comm, pp_transfer, lm_head, sampler,
    /// launch, cpu`; linear: `base, prefill_tokens, decode_seqs, context_tokens`. All zeros
    /// for an empty batch.
    pub fn breakdown(&self, b: &BatchShape) -> Vec<(&'static str, f64)> {
        let empty = b.is_empty();
        match &self.inner {
            Inner::Linear { .. } => {
                let ms = self.linear_ms(b);
                LINEAR_NAMES
                    .iter()
                    .zip(ms)
                    .map(|(n, v)| (*n, if empty { 0.0 } else { v }))
                    .collect()
            }
            Inner::Roofline(r) => {
                let s = r.components(b);
                ROOFLINE_NAMES
                    .iter()
                    .zip(s)
                    .map(|(n, v)| (*n, if empty { 0.0 } else { v * 1e3 }))
                    .collect()
            }
        }
    }

    fn linear_ms(&self, b: &BatchShape) -> [f64; 4] {
        match self.inner {
            Inner::Linear {
                base_ms,
                prefill_ms,
                decode_ms,
                context_ms,
            } => [
                base_ms,
                prefill_ms * b.prefill_tokens as f64,
                decode_ms * b.decode_seqs as f64,
                context_ms * b.context_sum_after as f64,
            ],
            Inner::Roofline(_) => [0.0; 4],
        }
    }
}

#[cfg(test)]
mod tests;
