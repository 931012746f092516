//! The parameters of the `calibrated` and `roofline` models ([`StepSpec`]): the engine
//! priced, the precisions, CUDA graphs, fusion, the per-kernel and per-hop constants, an
//! optional profile; and the names each accepts.

use serde::{Deserialize, Serialize};

use super::warmup::WarmupSpec;
use super::seed::{Fusion, DEFAULT_FUSION_LATENCY_THRESHOLD_MS, FUSION_NAMES};
use crate::catalog::fraction;
use crate::error::{check, Result, SimError};

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
    /// TensorRT-LLM's PyTorch backend (v0.20, as `trtllm-bench` ran it for the published
    /// max-throughput tables; [`super::trtllm`]): FP8 GEMMs with a static per-tensor
    /// activation quantisation before each, its attention op (RoPE and the paged-cache write
    /// in one preprocessing kernel, FMHA for context tokens, XQA for generation tokens, FP8
    /// when the cache is FP8), fused residual add + RMSNorm, its custom all-reduce; CUDA
    /// graphs for generation-only steps padded up to the next captured batch size, mixed
    /// steps launched eagerly; the overlap scheduler (the host prepares step n+1 while the
    /// GPU runs step n, so the host's per-request work bounds a step from below).
    Trtllm,
}

/// Names accepted for `engine`.
pub const ENGINE_NAMES: [&str; 3] = ["vllm", "reference", "trtllm"];

/// What the front ends show of each engine (`o1sim.presets()["engines"]`): `(name, label,
/// summary)`, in [`ENGINE_NAMES`] order.
pub const ENGINE_INFO: [(&str, &str, &str); 3] = [
    ("vllm", "vLLM", "vLLM v0.15's V1 engine: fused kernels, one attention call per layer, custom all-reduce, async scheduling"),
    ("reference", "PyTorch reference", "the plain PyTorch engine o1sim's H200 tables were timed in: unfused ops, synchronous steps"),
    ("trtllm", "TensorRT-LLM", "TensorRT-LLM's PyTorch backend: FP8 GEMMs, FMHA/XQA attention, padded CUDA graphs, overlap scheduler"),
];

/// Parse an engine name.
pub fn parse_engine(path: &str, name: &str) -> Result<Engine> {
    match name {
        "vllm" => Ok(Engine::Vllm),
        "reference" => Ok(Engine::Reference),
        "trtllm" => Ok(Engine::Trtllm),
        _ => Err(check::unknown_name(path, "engine", name, &ENGINE_NAMES)),
    }
}

impl Engine {
    /// The name `cost_model.engine` takes.
    pub const fn name(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Reference => "reference",
            Engine::Trtllm => "trtllm",
        }
    }

    /// Runs fused kernels (vLLM, TensorRT-LLM): one kernel per elementwise group, the MoE
    /// experts in one grouped GEMM, no reference-engine fusion policy to apply.
    pub const fn fused(self) -> bool {
        !matches!(self, Engine::Reference)
    }
}

/// Parameters of the `calibrated` and `roofline` models. Every field has a default.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepSpec {
    /// The engine whose kernels and runtime are priced: `vllm` (default), `reference` or
    /// `trtllm`.
    pub engine: Engine,
    /// Linear-layer precision; default bf16.
    pub dtype: Dtype,
    /// KV-cache precision: `bf16` (default) or `fp8` (halves the bytes decode reads).
    pub kv_dtype: Dtype,
    /// Replay each step as one CUDA graph (true, default) or launch kernels eagerly.
    pub cuda_graphs: bool,
    /// Steps with more tokens than this run eagerly even with `cuda_graphs` (none: no limit
    /// for the reference engine; vLLM's capture bound `min(2 · max_num_seqs, 512)` for `vllm`;
    /// the largest captured batch size, 8,192 sequences, for `trtllm`).
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
    /// One-time stalls of kernels compiled on first use while serving ([`super::warmup`]):
    /// on by default; only the `vllm` engine's fused-MoE kernels have any.
    pub warmup: WarmupSpec,
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
            fusion_latency_threshold_ms: DEFAULT_FUSION_LATENCY_THRESHOLD_MS,
            memory_coalesce: true,
            compute_efficiency: None,
            memory_efficiency: None,
            kernel_floor_us: DEFAULT_KERNEL_FLOOR_US,
            launch_us: None,
            comm_latency_us: DEFAULT_COMM_LATENCY_US,
            cpu_overhead_ms: 0.0,
            profile: None,
            warmup: WarmupSpec::default(),
        }
    }
}

impl StepSpec {
    /// The reference engine's defaults (the old default: our H200 tables' plain PyTorch).
    pub fn reference() -> Self {
        StepSpec { engine: Engine::Reference, ..StepSpec::default() }
    }

    pub(super) fn validate(&self) -> Result<()> {
        if self.engine.fused() && self.fusion != Fusion::None {
            let who = if self.engine == Engine::Vllm { "vLLM's" } else { "TensorRT-LLM's" };
            return Err(SimError::config(
                "fusion",
                format!("applies to the reference engine's unfused ops; {who} kernels are fused already (use engine = \"reference\")"),
            ));
        }
        if self.engine != Engine::Vllm && self.warmup.enabled && self.warmup != WarmupSpec::default() {
            return Err(SimError::config(
                "warmup",
                format!(
                    "models vLLM's Triton fused-MoE kernels compiled on first use; {} has none (use engine = \"vllm\", or warmup = false)",
                    self.engine.name()
                ),
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
        self.warmup.validate()?;
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
        _ => return Err(check::unknown_name(path, "fusion granularity", name, &FUSION_NAMES)),
    })
}
