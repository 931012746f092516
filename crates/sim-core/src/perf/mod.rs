//! Execution-time model: how long one scheduler step of one replica takes.
//!
//! Two models behind [`CostModelSpec`]:
//! * `calibrated` (default) and `roofline`: the reference engine's operators composed into a
//!   step ([`step`]) — per layer the qkv, o, gate_up and down GEMMs at M = tokens in the step,
//!   prefill attention per request by FLOPs, decode attention by KV bytes read, the
//!   elementwise ops, TP all-reduces; then lm_head on the sampled rows; launch cost eager
//!   (a CPU/GPU pipeline) or as one CUDA-graph replay. `calibrated` takes each operator from
//!   the GPU's measured profile ([`crate::calib`]) where there is one and from a roofline with
//!   table-fitted efficiency otherwise; `roofline` ignores the tables (datasheet peaks).
//!   Every number carries its provenance ([`Source`]).
//! * `linear`: an affine function of the batch's token counts (for fits and tests).

mod layer_mix;
mod ops;
pub mod predict;
pub mod seed;
mod step;

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::num::round_u64;
use crate::catalog::{fraction, Gpu, Model};
use crate::error::{check, Result, SimError};
use crate::memory::check_parallelism;

pub use crate::calib::Source;
pub use seed::Fusion;
pub use step::{Anatomy, KernelColumns, OpCost};

/// Default per-kernel GPU floor in a CUDA-graph replay (a tiny kernel's run time plus the
/// gap to the next), µs. An estimate for Hopper (Nsight traces of graph-replayed decode steps
/// show ~2–3 µs per small kernel); not in our tables, which time eager calls.
pub const DEFAULT_KERNEL_FLOOR_US: f64 = 2.5;
/// Default CPU cost of launching one kernel from eager PyTorch when no profile fits it, µs:
/// the launch floor our H200 host showed for single-kernel elementwise ops (~20 µs). A host
/// property, reused for GPUs without tables.
pub const DEFAULT_LAUNCH_US: f64 = 20.0;
/// Default latency of one hop of a ring collective or a point-to-point transfer, µs. An
/// estimate: small-message all-reduce over NVLink on 8 GPUs (14 ring hops) costs tens of µs.
pub const DEFAULT_COMM_LATENCY_US: f64 = 2.0;

/// Weight/compute precision of the linear layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// BF16 weights and activations (the default).
    Bf16,
    /// FP8 (e4m3) weights and activations on FP8 tensor cores.
    Fp8,
    /// INT8 weights, BF16 activations (weight-only: dequantised in the GEMM).
    Int8,
    /// INT4 weights, BF16 activations (weight-only).
    Int4,
}

impl Dtype {
    /// Bytes per weight value.
    pub fn weight_bytes(self) -> f64 {
        match self {
            Dtype::Bf16 => 2.0,
            Dtype::Fp8 | Dtype::Int8 => 1.0,
            Dtype::Int4 => 0.5,
        }
    }
}

/// Names accepted for [`Dtype`].
pub const DTYPE_NAMES: [&str; 4] = ["bf16", "fp8", "int8", "int4"];
/// Names accepted for `kv_dtype`.
pub const KV_DTYPE_NAMES: [&str; 2] = ["bf16", "fp8"];

/// The serving engine whose kernels and runtime a step is priced as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// vLLM v0.15 (V1 engine) with its defaults, as the development runs
    /// (`../shared/data/real-vllm-h100`) ran it: CUDA graphs up to `min(2 · max_num_seqs, 512)`
    /// tokens (a full graph for decode-only batches, piecewise graphs around an eager attention
    /// call for mixed ones), one FlashAttention varlen call per layer for every request of the
    /// step, fused kernels (residual add + RMSNorm, rotary embedding of q and k, the KV-cache
    /// write, SiLU·mul: one kernel each, no layout copy after attention), vLLM's custom
    /// all-reduce between NVLink-connected GPUs, and async scheduling (the CPU prepares step
    /// n+1 while the GPU runs step n). The default.
    Vllm,
    /// The plain PyTorch reference engine our H200 tables were measured in
    /// (`../shared/data/h200-calibration/README.md`): unfused elementwise ops (RoPE ~16
    /// kernels, SiLU·mul 2, a transpose copy, separate residual adds), one attention call per
    /// prefill request plus one for all decodes, a ring all-reduce, synchronous steps.
    Reference,
}

/// Names accepted for `engine`.
pub const ENGINE_NAMES: [&str; 2] = ["vllm", "reference"];

/// Parse an engine name.
pub fn parse_engine(path: &str, name: &str) -> Result<Engine> {
    match name {
        "vllm" => Ok(Engine::Vllm),
        "reference" => Ok(Engine::Reference),
        _ => Err(check::unknown_name(path, "engine", name, &ENGINE_NAMES)),
    }
}

/// Parameters of the `calibrated` and `roofline` models. Every field has a default.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepSpec {
    /// The engine whose kernels and runtime are priced: `vllm` (default) or `reference`.
    pub engine: Engine,
    /// Linear-layer precision; default bf16.
    pub dtype: Dtype,
    /// KV-cache precision: `bf16` (default) or `fp8` (halves the bytes decode reads).
    pub kv_dtype: Dtype,
    /// Replay each step as one CUDA graph (true, default) or launch kernels eagerly.
    pub cuda_graphs: bool,
    /// Steps with more tokens than this run eagerly even with `cuda_graphs` (none: no limit
    /// for the reference engine; vLLM's capture bound `min(2 · max_num_seqs, 512)` for `vllm`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_graph_max_tokens: Option<u32>,
    /// Elementwise fusion (§2.1) of the reference engine's ops: none (default) | fine | coarse |
    /// hybrid. The `vllm` engine's kernels are fused already: only `none` applies to it.
    pub fusion: Fusion,
    /// Fusion latency threshold, ms (seed: 0.8).
    pub fusion_latency_threshold_ms: f64,
    /// Whether fused ops keep their hand-offs on chip (seed: true).
    pub memory_coalesce: bool,
    /// Overrides the GPU's `compute_efficiency` in roofline estimates, (0, 1].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_efficiency: Option<f64>,
    /// Overrides the GPU's `memory_efficiency` in roofline estimates, (0, 1].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_efficiency: Option<f64>,
    /// Per-kernel GPU floor, µs; default [`DEFAULT_KERNEL_FLOOR_US`].
    pub kernel_floor_us: f64,
    /// CPU cost of one eager kernel launch, µs; default: fitted from the profile, else
    /// [`DEFAULT_LAUNCH_US`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch_us: Option<f64>,
    /// Latency of one collective hop, µs; default [`DEFAULT_COMM_LATENCY_US`].
    pub comm_latency_us: f64,
    /// Extra CPU time per step outside the forward pass (scheduler, detokenisation), ms;
    /// default 0 (the reference engine's step is the forward pass).
    pub cpu_overhead_ms: f64,
    /// A calibration profile (the format of `profiles/h200.json`, e.g. written by
    /// `tools/make_profile.py` from `benchmarks/gpu/reference_ops.py`'s tables) that replaces
    /// the GPU's shipped one; none = the shipped profile, if the GPU has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<serde_json::Value>,
}

impl Default for StepSpec {
    fn default() -> Self {
        StepSpec {
            engine: Engine::Vllm,
            dtype: Dtype::Bf16,
            kv_dtype: Dtype::Bf16,
            cuda_graphs: true,
            cuda_graph_max_tokens: None,
            fusion: Fusion::None,
            fusion_latency_threshold_ms: seed::DEFAULT_FUSION_LATENCY_THRESHOLD_MS,
            memory_coalesce: true,
            compute_efficiency: None,
            memory_efficiency: None,
            kernel_floor_us: DEFAULT_KERNEL_FLOOR_US,
            launch_us: None,
            comm_latency_us: DEFAULT_COMM_LATENCY_US,
            cpu_overhead_ms: 0.0,
            profile: None,
        }
    }
}

impl StepSpec {
    /// The reference engine's defaults (the old default: our H200 tables' plain PyTorch).
    pub fn reference() -> Self {
        StepSpec { engine: Engine::Reference, ..StepSpec::default() }
    }

    fn validate(&self) -> Result<()> {
        if self.engine == Engine::Vllm && self.fusion != Fusion::None {
            return Err(SimError::config(
                "fusion",
                "applies to the reference engine's unfused ops; vLLM's kernels are fused already (use engine = \"reference\")",
            ));
        }
        if let Some(v) = self.compute_efficiency {
            fraction("compute_efficiency", v)?;
        }
        if let Some(v) = self.memory_efficiency {
            fraction("memory_efficiency", v)?;
        }
        if !matches!(self.kv_dtype, Dtype::Bf16 | Dtype::Fp8) {
            return Err(SimError::config("kv_dtype", "must be 'bf16' or 'fp8'"));
        }
        check::positive("fusion_latency_threshold_ms", self.fusion_latency_threshold_ms)?;
        check::non_negative("kernel_floor_us", self.kernel_floor_us)?;
        if let Some(v) = self.launch_us {
            check::non_negative("launch_us", v)?;
        }
        check::non_negative("comm_latency_us", self.comm_latency_us)?;
        check::non_negative("cpu_overhead_ms", self.cpu_overhead_ms)?;
        self.custom_profile()?;
        Ok(())
    }

    /// The profile given in `profile`, parsed; `Ok(None)` when none is given.
    pub fn custom_profile(&self) -> Result<Option<crate::calib::Profile>> {
        match &self.profile {
            None => Ok(None),
            Some(v) => crate::calib::Profile::from_value(v.clone()).map(Some),
        }
    }
}

/// Which execution-time model to use, with its parameters. Deserializes from a table
/// internally tagged by `kind` (`"calibrated"`, the default when `kind` is absent,
/// `"roofline"` or `"linear"`), or from a bare kind name. Unknown fields, and fields of
/// another kind, are rejected by name.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum CostModelSpec {
    /// Measured tables where the GPU has a profile, roofline elsewhere.
    Calibrated(StepSpec),
    /// The same composition with roofline operators only (datasheet peaks × efficiency).
    Roofline(StepSpec),
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
        CostModelSpec::Calibrated(StepSpec::default())
    }
}

impl CostModelSpec {
    /// Storage precision of weights and KV cache for the memory plan (BF16 for the linear
    /// model, which has no precision of its own).
    pub fn precision(&self) -> crate::memory::Precision {
        match self {
            CostModelSpec::Calibrated(s) | CostModelSpec::Roofline(s) => crate::memory::Precision {
                weight_bytes: s.dtype.weight_bytes(),
                kv_bytes: s.kv_dtype.weight_bytes(),
            },
            CostModelSpec::Linear { .. } => crate::memory::Precision::default(),
        }
    }

    /// Check the parameters: efficiencies in (0, 1], everything else finite and ≥ 0. Error
    /// paths are relative to the spec (`base_ms`); callers prefix them.
    pub fn validate(&self) -> Result<()> {
        match self {
            CostModelSpec::Calibrated(s) | CostModelSpec::Roofline(s) => s.validate(),
            CostModelSpec::Linear { base_ms, per_prefill_token_ms, per_decode_seq_ms, per_context_token_ms } => {
                check::non_negative("base_ms", *base_ms)?;
                check::non_negative("per_prefill_token_ms", *per_prefill_token_ms)?;
                check::non_negative("per_decode_seq_ms", *per_decode_seq_ms)?;
                check::non_negative("per_context_token_ms", *per_context_token_ms)?;
                Ok(())
            }
        }
    }
}

/// Input form of [`CostModelSpec`]: every field of every kind, all optional.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a cost model table such as { kind = \"calibrated\" } or { kind = \"linear\", base_ms = 5.0 }"
)]
struct RawCostModel {
    kind: Option<String>,
    engine: Option<String>,
    dtype: Option<String>,
    kv_dtype: Option<String>,
    cuda_graphs: Option<bool>,
    cuda_graph_max_tokens: Option<u32>,
    fusion: Option<String>,
    fusion_latency_threshold_ms: Option<f64>,
    memory_coalesce: Option<bool>,
    compute_efficiency: Option<f64>,
    memory_efficiency: Option<f64>,
    kernel_floor_us: Option<f64>,
    launch_us: Option<f64>,
    comm_latency_us: Option<f64>,
    cpu_overhead_ms: Option<f64>,
    profile: Option<serde_json::Value>,
    base_ms: Option<f64>,
    per_prefill_token_ms: Option<f64>,
    per_decode_seq_ms: Option<f64>,
    per_context_token_ms: Option<f64>,
}

const KINDS: [&str; 3] = ["calibrated", "roofline", "linear"];
const LINEAR_FIELDS: &str = "base_ms, per_prefill_token_ms, per_decode_seq_ms, per_context_token_ms";
const STEP_FIELDS: &str = "engine, dtype, kv_dtype, cuda_graphs, cuda_graph_max_tokens, fusion, fusion_latency_threshold_ms, \
                           memory_coalesce, compute_efficiency, memory_efficiency, kernel_floor_us, launch_us, \
                           comm_latency_us, cpu_overhead_ms, profile";

fn wrong_kind(field: &str, kind: &str, valid: &str) -> String {
    format!("field `{field}` does not apply to kind \"{kind}\" (its fields: {valid})")
}

/// Parse a precision name (`dtype` or `kv_dtype`).
pub fn parse_dtype(path: &str, name: &str, valid: &[&str]) -> Result<Dtype> {
    let d = match name {
        "bf16" => Dtype::Bf16,
        "fp8" => Dtype::Fp8,
        "int8" => Dtype::Int8,
        "int4" => Dtype::Int4,
        _ => return Err(check::unknown_name(path, "precision", name, valid)),
    };
    if !valid.contains(&name) {
        return Err(check::unknown_name(path, "precision", name, valid));
    }
    Ok(d)
}

/// Parse a fusion granularity name.
pub fn parse_fusion(path: &str, name: &str) -> Result<Fusion> {
    Ok(match name {
        "none" => Fusion::None,
        "fine" => Fusion::Fine,
        "coarse" => Fusion::Coarse,
        "hybrid" => Fusion::Hybrid,
        _ => return Err(check::unknown_name(path, "fusion granularity", name, &seed::FUSION_NAMES)),
    })
}

impl RawCostModel {
    fn step_spec(&self) -> std::result::Result<StepSpec, String> {
        let d = StepSpec::default();
        let err = |e: SimError| e.to_string();
        Ok(StepSpec {
            engine: match &self.engine {
                Some(n) => parse_engine("engine", n).map_err(err)?,
                None => d.engine,
            },
            dtype: match &self.dtype {
                Some(n) => parse_dtype("dtype", n, &DTYPE_NAMES).map_err(err)?,
                None => d.dtype,
            },
            kv_dtype: match &self.kv_dtype {
                Some(n) => parse_dtype("kv_dtype", n, &KV_DTYPE_NAMES).map_err(err)?,
                None => d.kv_dtype,
            },
            cuda_graphs: self.cuda_graphs.unwrap_or(d.cuda_graphs),
            cuda_graph_max_tokens: self.cuda_graph_max_tokens,
            fusion: match &self.fusion {
                Some(n) => parse_fusion("fusion", n).map_err(err)?,
                None => d.fusion,
            },
            fusion_latency_threshold_ms: self.fusion_latency_threshold_ms.unwrap_or(d.fusion_latency_threshold_ms),
            memory_coalesce: self.memory_coalesce.unwrap_or(d.memory_coalesce),
            compute_efficiency: self.compute_efficiency,
            memory_efficiency: self.memory_efficiency,
            kernel_floor_us: self.kernel_floor_us.unwrap_or(d.kernel_floor_us),
            launch_us: self.launch_us,
            comm_latency_us: self.comm_latency_us.unwrap_or(d.comm_latency_us),
            cpu_overhead_ms: self.cpu_overhead_ms.unwrap_or(d.cpu_overhead_ms),
            profile: self.profile.clone(),
        })
    }

    fn into_spec(self) -> std::result::Result<CostModelSpec, String> {
        match self.kind.as_deref() {
            None | Some("calibrated") | Some("roofline") => {
                let kind = self.kind.as_deref().unwrap_or("calibrated");
                for (name, given) in [
                    ("base_ms", self.base_ms.is_some()),
                    ("per_prefill_token_ms", self.per_prefill_token_ms.is_some()),
                    ("per_decode_seq_ms", self.per_decode_seq_ms.is_some()),
                    ("per_context_token_ms", self.per_context_token_ms.is_some()),
                ] {
                    if given {
                        return Err(wrong_kind(name, kind, STEP_FIELDS));
                    }
                }
                let s = self.step_spec()?;
                Ok(if kind == "roofline" { CostModelSpec::Roofline(s) } else { CostModelSpec::Calibrated(s) })
            }
            Some("linear") => {
                for (name, given) in [
                    ("engine", self.engine.is_some()),
                    ("dtype", self.dtype.is_some()),
                    ("kv_dtype", self.kv_dtype.is_some()),
                    ("cuda_graphs", self.cuda_graphs.is_some()),
                    ("cuda_graph_max_tokens", self.cuda_graph_max_tokens.is_some()),
                    ("fusion", self.fusion.is_some()),
                    ("fusion_latency_threshold_ms", self.fusion_latency_threshold_ms.is_some()),
                    ("memory_coalesce", self.memory_coalesce.is_some()),
                    ("compute_efficiency", self.compute_efficiency.is_some()),
                    ("memory_efficiency", self.memory_efficiency.is_some()),
                    ("kernel_floor_us", self.kernel_floor_us.is_some()),
                    ("launch_us", self.launch_us.is_some()),
                    ("comm_latency_us", self.comm_latency_us.is_some()),
                    ("cpu_overhead_ms", self.cpu_overhead_ms.is_some()),
                    ("profile", self.profile.is_some()),
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
            Some(other) => Err(check::unknown_name("kind", "cost model kind", other, &KINDS).to_string()),
        }
    }
}

struct CostModelVisitor;

impl<'de> Visitor<'de> for CostModelVisitor {
    type Value = CostModelSpec;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a cost model table such as { kind = \"calibrated\" } or { kind = \"linear\", base_ms = 5.0 }")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<CostModelSpec, E> {
        match v {
            "calibrated" => Ok(CostModelSpec::default()),
            "roofline" => Ok(CostModelSpec::Roofline(StepSpec::default())),
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
    /// Σ over decode requests of the KV tokens read (context after the step − 1) divided by
    /// the request's own block size, in 1/1024 blocks: `(ctx − 1) · 1024 / block`, exact
    /// because block sizes are powers of two ≤ 1024. Only a cache with per-request block
    /// sizes (o1pro, [`StepCostModel::with_per_request_blocks`]) reads it; 0 elsewhere.
    pub decode_blocks_1024: u64,
}

impl BatchShape<'_> {
    fn is_empty(&self) -> bool {
        self.prefill.is_empty()
            && self.prefill_tokens == 0
            && self.decode_seqs == 0
            && self.sampled == 0
    }
}


/// Names of the linear components, in [`StepCostModel::breakdown`] order.
const LINEAR_NAMES: [&str; 4] = ["base", "prefill_tokens", "decode_seqs", "context_tokens"];

/// A precomputed execution-time model for one (model, GPU, tp, pp) replica.
#[derive(Debug, Clone)]
pub struct StepCostModel {
    inner: Inner,
}

#[derive(Debug, Clone)]
enum Inner {
    Linear { base_ms: f64, prefill_ms: f64, decode_ms: f64, context_ms: f64 },
    Step(Box<step::StepModel>),
}

impl StepCostModel {
    /// Precompute the model for one replica of `model` on `gpu` with tensor parallelism `tp`
    /// and pipeline parallelism `pp`. Errors: spec problems under `cost_model` (e.g.
    /// `cost_model.base_ms`), invalid model/GPU under `model` / `gpu`, bad
    /// `deployment.tp` / `deployment.pp`, FP8 on a GPU without FP8 tensor cores
    /// (`cost_model.dtype`).
    pub fn new(spec: &CostModelSpec, model: &Model, gpu: &Gpu, tp: u32, pp: u32) -> Result<Self> {
        Self::build(spec, model, gpu, tp, pp, false)
    }

    /// As [`StepCostModel::new`], but TP AllReduce and PP transfer times are left to the
    /// caller ([`StepCostModel::step_ns_plus`] with a topology's collective costs).
    pub fn new_external_comm(spec: &CostModelSpec, model: &Model, gpu: &Gpu, tp: u32, pp: u32) -> Result<Self> {
        Self::build(spec, model, gpu, tp, pp, true)
    }

    fn build(spec: &CostModelSpec, model: &Model, gpu: &Gpu, tp: u32, pp: u32, external_comm: bool) -> Result<Self> {
        spec.validate().map_err(|e| e.under("cost_model"))?;
        model.validate().map_err(|e| e.under("model"))?;
        gpu.validate().map_err(|e| e.under("gpu"))?;
        check_parallelism(model, tp, pp)?;
        let inner = match spec {
            CostModelSpec::Linear { base_ms, per_prefill_token_ms, per_decode_seq_ms, per_context_token_ms } => {
                Inner::Linear {
                    base_ms: *base_ms,
                    prefill_ms: *per_prefill_token_ms,
                    decode_ms: *per_decode_seq_ms,
                    context_ms: *per_context_token_ms,
                }
            }
            CostModelSpec::Calibrated(s) | CostModelSpec::Roofline(s) => {
                if gpu.matrix_unit == crate::catalog::MatrixUnit::Mxu {
                    // A TPU runs a step as one compiled XLA program: CUDA graphs are a GPU option.
                    let why = format!("a GPU-only option: {} runs each step as one compiled XLA program", gpu.name);
                    if s.cuda_graph_max_tokens.is_some() {
                        return Err(SimError::config("cuda_graph_max_tokens", why));
                    }
                    if !s.cuda_graphs {
                        return Err(SimError::config("cuda_graphs", why));
                    }
                }
                if s.dtype == Dtype::Fp8 && gpu.fp8_tflops <= 0.0 {
                    return Err(SimError::config(
                        "cost_model.dtype",
                        format!("fp8 needs FP8 tensor cores; {} has none (fp8_tflops = 0)", gpu.name),
                    ));
                }
                let tables = matches!(spec, CostModelSpec::Calibrated(_));
                Inner::Step(Box::new(step::StepModel::new(s, tables, model, gpu, tp, pp, external_comm)))
            }
        };
        Ok(StepCostModel { inner })
    }

    /// Use a paged KV cache of `block_size` tokens: decode attention pays the block-table
    /// remap cost ([`seed::remap_s`]). The reference engine's contiguous cache does not
    /// (nor Orca's, which reserves one contiguous region per request: it has no block table).
    pub fn with_block_size(mut self, block_size: u32) -> Self {
        if let Inner::Step(s) = &mut self.inner {
            s.set_block_size(block_size);
        }
        self
    }

    /// The scheduler's `max_num_seqs`, which sets vLLM's CUDA-graph capture bound
    /// (`min(2 · max_num_seqs, 512)` tokens) unless the spec gives `cuda_graph_max_tokens`.
    pub fn with_max_num_seqs(mut self, max_num_seqs: u32) -> Self {
        if let Inner::Step(s) = &mut self.inner {
            s.set_max_num_seqs(max_num_seqs);
        }
        self
    }

    /// Use a paged KV cache where each request has its own block size (o1pro: 16, 32 or 64
    /// tokens by length): decode attention pays the remap cost of the blocks the batch's
    /// requests actually hold, read from [`BatchShape::decode_blocks_1024`].
    pub fn with_per_request_blocks(mut self) -> Self {
        if let Inner::Step(s) = &mut self.inner {
            s.set_per_request_blocks();
        }
        self
    }

    /// Duration of the step in integer nanoseconds (computed in f64, rounded once). 0 for an
    /// empty batch, ≥ 1 ns otherwise. No allocation for steps up to 65,536 tokens;
    /// O(`prefill.len()`) work.
    #[inline]
    pub fn step_ns(&self, b: &BatchShape) -> u64 {
        if b.is_empty() {
            return 0;
        }
        let seconds = match &self.inner {
            Inner::Linear { .. } => self.linear_ms(b).iter().sum::<f64>() * 1e-3,
            Inner::Step(s) if s.stages() > 1 => s.pipeline_s(b, s.micro_batches(b), None),
            Inner::Step(s) => s.step_s(b),
        };
        round_u64(seconds * 1e9).max(1)
    }

    /// [`StepCostModel::step_ns`] plus `extra_s` seconds (communication priced on a
    /// topology), rounded once.
    pub fn step_ns_plus(&self, b: &BatchShape, extra_s: f64) -> u64 {
        if b.is_empty() {
            return 0;
        }
        let seconds = match &self.inner {
            Inner::Linear { .. } => self.linear_ms(b).iter().sum::<f64>() * 1e-3,
            Inner::Step(s) => s.step_s(b),
        } + extra_s;
        round_u64(seconds * 1e9).max(1)
    }

    /// Pipeline stages of a replica priced by the step model (1 for a linear model, which
    /// has no stages).
    pub fn stages(&self) -> u32 {
        match &self.inner {
            Inner::Linear { .. } => 1,
            Inner::Step(s) => s.stages(),
        }
    }

    /// Micro-batches a pipelined step (`stages() > 1`) of this batch is split into: one per
    /// stage, at most one per sequence ([`step::StepModel::micro_batches`]).
    pub fn micro_batches(&self, b: &BatchShape) -> u32 {
        match &self.inner {
            Inner::Linear { .. } => 1,
            Inner::Step(s) => s.micro_batches(b),
        }
    }

    /// A pipelined step (pp > 1) whose communication a topology prices: `allreduce_s` the
    /// TP AllReduces of one micro-batch over all stages, `xfer_s` one micro-batch's routed
    /// transfer across one stage boundary ([`step::StepModel::pipeline_s`]).
    pub fn step_ns_pipeline(&self, b: &BatchShape, mb: u32, allreduce_s: f64, xfer_s: f64) -> u64 {
        if b.is_empty() {
            return 0;
        }
        let seconds = match &self.inner {
            Inner::Linear { .. } => self.linear_ms(b).iter().sum::<f64>() * 1e-3 + allreduce_s * f64::from(mb) + xfer_s,
            Inner::Step(s) => s.pipeline_s(b, mb, Some((allreduce_s, xfer_s))),
        };
        round_u64(seconds * 1e9).max(1)
    }

    /// The step's duration broken down by operator (summed over layers), with each line's
    /// source, and whether it ran as a CUDA graph. Linear: `base, prefill_tokens,
    /// decode_seqs, context_tokens` (source `model`). The lines sum to the step's exact
    /// time, which `step_ns` matches within 0.2% (it interpolates the dense part on a grid).
    pub fn breakdown(&self, b: &BatchShape) -> (Vec<OpCost>, bool) {
        match &self.inner {
            Inner::Linear { .. } => {
                let ms = self.linear_ms(b);
                let empty = b.is_empty();
                let ops = LINEAR_NAMES
                    .iter()
                    .zip(ms)
                    .map(|(n, v)| OpCost { op: n.to_string(), ms: if empty { 0.0 } else { v }, source: Source::Model })
                    .collect();
                (ops, false)
            }
            Inner::Step(s) if !b.is_empty() => s.breakdown(b),
            Inner::Step(_) => (Vec::new(), false),
        }
    }

    /// The step's kernels on a timeline ([`Anatomy`]): `comm_s` is the communication a
    /// topology priced for it, `decision_s` the scheduling decision it waited for. A linear
    /// model has no kernels: one `linear_model` row spans its price.
    pub fn anatomy(&self, b: &BatchShape, comm_s: f64, decision_s: f64) -> Anatomy {
        match &self.inner {
            Inner::Step(s) => s.anatomy(b, comm_s, decision_s),
            Inner::Linear { .. } => {
                let ms = if b.is_empty() { 0.0 } else { self.linear_ms(b).iter().sum::<f64>() } + (comm_s + decision_s) * 1e3;
                let mut k = KernelColumns::default();
                k.name.push("linear_model".into());
                k.layer.push(-1);
                k.part.push(0);
                k.parts.push(1);
                k.launched_us.push(0.0);
                k.start_us.push(0.0);
                k.end_us.push(ms * 1e3);
                k.stream.push("compute");
                k.source.push(Source::Model);
                k.ctas.push(0.0);
                k.sm_occupancy.push(0.0);
                Anatomy { step_ms: ms, graph: false, pipelined: false, sms: 0, kernels: k }
            }
        }
    }

    fn linear_ms(&self, b: &BatchShape) -> [f64; 4] {
        match self.inner {
            Inner::Linear { base_ms, prefill_ms, decode_ms, context_ms } => [
                base_ms,
                prefill_ms * b.prefill_tokens as f64,
                decode_ms * b.decode_seqs as f64,
                context_ms * b.context_sum_after as f64,
            ],
            Inner::Step(_) => [0.0; 4],
        }
    }
}

#[cfg(test)]
mod arch_tests;
#[cfg(test)]
mod tests;
