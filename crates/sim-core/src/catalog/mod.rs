//! Hardware and model catalog: GPU and transformer descriptions, their presets, and the
//! scenario inputs (`model = "llama-3-8b"` or `model = { preset = "...", layers = 40 }`) that
//! resolve to them.
//!
//! Units used throughout: FLOP/s in TFLOP/s (10¹²), memory sizes in GiB (2³⁰ bytes), memory
//! bandwidth in TB/s (10¹² bytes/s), interconnect bandwidth in GB/s (10⁹ bytes/s).

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::error::{check, Result, SimError};

// ---------------------------------------------------------------------------------------------
// GPU
// ---------------------------------------------------------------------------------------------

/// One accelerator: its datasheet peaks and the fraction of them real kernels reach.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gpu {
    /// Preset or user-chosen name (e.g. `h100`).
    pub name: String,
    /// Dense (no sparsity) BF16 tensor-core peak, TFLOP/s.
    pub bf16_tflops: f64,
    /// Dense FP8 tensor-core peak, TFLOP/s; 0 when the part has no FP8 tensor cores.
    pub fp8_tflops: f64,
    /// Device memory visible to the framework, GiB (2³⁰ bytes).
    pub hbm_gib: f64,
    /// Peak device-memory bandwidth, TB/s (10¹² bytes/s).
    pub hbm_tbps: f64,
    /// Streaming multiprocessors.
    pub sms: u32,
    /// Per-GPU bidirectional NVLink bandwidth, GB/s (10⁹ bytes/s); PCIe-only parts give their
    /// PCIe rate. Each direction carries half of it.
    pub nvlink_gbps: f64,
    /// Fraction of `bf16_tflops` reached by large GEMMs, in (0, 1].
    pub compute_efficiency: f64,
    /// Fraction of `hbm_tbps` reached by streaming kernels, in (0, 1].
    pub memory_efficiency: f64,
}

impl Gpu {
    /// Whether this GPU is at least as capable as `other` in every datasheet figure a step
    /// or a deployment depends on: BF16 and FP8 compute, memory bandwidth and size, and
    /// interconnect. Such a GPU never runs a step slower (see `perf`'s ranking bound).
    pub fn dominates(&self, other: &Gpu) -> bool {
        self.bf16_tflops >= other.bf16_tflops
            && self.fp8_tflops >= other.fp8_tflops
            && self.hbm_tbps >= other.hbm_tbps
            && self.hbm_gib >= other.hbm_gib
            && self.nvlink_gbps >= other.nvlink_gbps
    }

    /// Check every field; error paths are relative (`hbm_gib`), callers prefix them (`gpu`).
    pub fn validate(&self) -> Result<()> {
        if self.name.trim().is_empty() {
            return Err(SimError::config("name", "must not be empty"));
        }
        check::positive("bf16_tflops", self.bf16_tflops)?;
        check::non_negative("fp8_tflops", self.fp8_tflops)?;
        check::positive("hbm_gib", self.hbm_gib)?;
        check::positive("hbm_tbps", self.hbm_tbps)?;
        at_least_one("sms", self.sms)?;
        check::positive("nvlink_gbps", self.nvlink_gbps)?;
        fraction("compute_efficiency", self.compute_efficiency)?;
        fraction("memory_efficiency", self.memory_efficiency)?;
        Ok(())
    }
}

/// `value` must be finite and in (0, 1].
pub(crate) fn fraction(path: &str, value: f64) -> Result<()> {
    check::finite(path, value)?;
    if value <= 0.0 || value > 1.0 {
        return Err(SimError::config(
            path,
            format!("must be in (0, 1] (got {value})"),
        ));
    }
    Ok(())
}

/// Whether `d` divides `n` (false for `d == 0`, never panics).
pub(crate) fn divides(d: u32, n: u32) -> bool {
    n.checked_rem(d) == Some(0)
}

fn at_least_one(path: &str, value: u32) -> Result<()> {
    if value < 1 {
        return Err(SimError::config(
            path,
            format!("must be >= 1 (got {value})"),
        ));
    }
    Ok(())
}

/// 48 GB (decimal, as NVIDIA's L40S datasheet states it) expressed in GiB.
const L40S_GIB: f64 = 48.0e9 / 1_073_741_824.0;

/// The GPU presets.
///
/// Sources (dense, i.e. without 2:4 sparsity, SXM form factor):
/// * `a100-80g`: NVIDIA A100 Tensor Core GPU datasheet (BF16 312 TFLOP/s, 80 GB HBM2e,
///   2,039 GB/s, NVLink 600 GB/s) and the NVIDIA A100 architecture whitepaper (108 SMs).
///   No FP8 tensor cores.
/// * `h100`: NVIDIA H100 Tensor Core GPU datasheet, SXM5 (BF16 989.4 / FP8 1,978.9 TFLOP/s
///   dense, 80 GB HBM3, 3.35 TB/s, NVLink 900 GB/s) and the Hopper whitepaper (132 SMs).
/// * `h200`: NVIDIA H200 datasheet, SXM (same tensor cores as H100, 141 GB HBM3e, 4.8 TB/s,
///   NVLink 900 GB/s). Memory is our own measurement: 139.8 GiB visible to PyTorch.
/// * `l40s`: NVIDIA L40S datasheet (BF16 362.05 / FP8 733 TFLOP/s dense, 48 GB GDDR6 =
///   44.7 GiB, 864 GB/s, 142 SMs, PCIe Gen4 x16 = 64 GB/s bidirectional, no NVLink).
///
/// * `b200`: NVIDIA HGX/DGX B200 datasheets, per GPU (FP8 4.5 / BF16 2.25 PFLOP/s dense,
///   i.e. half the sparse figures; 180 GB HBM3e at 8 TB/s; fifth-generation NVLink
///   1.8 TB/s). 148 SMs is the commonly reported count, not a datasheet figure.
/// * `mi300x`: AMD Instinct MI300X datasheet (BF16 1,307.4 / FP8 2,614.9 TFLOP/s dense,
///   192 GB HBM3 at 5.3 TB/s, 304 compute units — `sms` holds CUs —, Infinity Fabric
///   7 × 128 GB/s = 896 GB/s to its peers). CUDA tile alignment is kept (an approximation).
///   Like H100 memory, these capacities are taken as GiB (HBM stacks are binary).
///
/// Efficiencies: our H200 measurements show an 8192³ BF16 matmul at 767.8 TFLOP/s (0.78 of
/// peak) and a device-to-device copy at 4,211 GB/s read+write (0.88 of peak); the presets use
/// slightly lower round figures (0.75 / 0.85) for Hopper since serving GEMMs are smaller, and
/// 0.70 / 0.80 for A100, L40S, B200 and MI300X (estimates, not measured). Calibrated profiles
/// ship for h200 (our measurements), a100-80g and h100 (derived from Vidur's); the others
/// price steps with this roofline, flagged `roofline`.
pub fn gpu_presets() -> Vec<Gpu> {
    #[allow(clippy::too_many_arguments)]
    fn gpu(
        name: &str,
        bf16_tflops: f64,
        fp8_tflops: f64,
        hbm_gib: f64,
        hbm_tbps: f64,
        sms: u32,
        nvlink_gbps: f64,
        compute_efficiency: f64,
        memory_efficiency: f64,
    ) -> Gpu {
        Gpu {
            name: name.to_string(),
            bf16_tflops,
            fp8_tflops,
            hbm_gib,
            hbm_tbps,
            sms,
            nvlink_gbps,
            compute_efficiency,
            memory_efficiency,
        }
    }
    vec![
        gpu("a100-80g", 312.0, 0.0, 80.0, 2.039, 108, 600.0, 0.70, 0.80),
        gpu("h100", 989.4, 1978.9, 80.0, 3.35, 132, 900.0, 0.75, 0.85),
        gpu("h200", 989.4, 1978.9, 139.8, 4.8, 132, 900.0, 0.75, 0.85),
        gpu(
            "l40s", 362.05, 733.0, L40S_GIB, 0.864, 142, 64.0, 0.70, 0.80,
        ),
        gpu("b200", 2250.0, 4500.0, 180.0, 8.0, 148, 1800.0, 0.70, 0.80),
        gpu("mi300x", 1307.4, 2614.9, 192.0, 5.3, 304, 896.0, 0.70, 0.80),
    ]
}

/// Names of the GPU presets, in catalog order.
pub fn gpu_preset_names() -> Vec<&'static str> {
    vec!["a100-80g", "h100", "h200", "l40s", "b200", "mi300x"]
}

fn gpu_preset(name: &str) -> Option<Gpu> {
    gpu_presets().into_iter().find(|g| g.name == name)
}

// ---------------------------------------------------------------------------------------------
// Model
// ---------------------------------------------------------------------------------------------

/// A decoder-only transformer (Llama-style: RMSNorm, rotary attention with grouped-query KV
/// heads, gated SiLU MLP, optionally a mixture of experts in place of the MLP).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Model {
    /// Preset or user-chosen name (e.g. `llama-3-8b`).
    pub name: String,
    /// Transformer blocks.
    pub layers: u32,
    /// Residual-stream width (model dimension).
    pub hidden: u32,
    /// Query heads.
    pub heads: u32,
    /// Key/value heads (grouped-query attention); divides `heads`.
    pub kv_heads: u32,
    /// Width of one attention head.
    pub head_dim: u32,
    /// MLP inner width (per expert for MoE models).
    pub intermediate: u32,
    /// Vocabulary size.
    pub vocab: u32,
    /// Longest context the model supports, tokens.
    pub max_context: u32,
    /// Experts per MoE layer; 1 = dense MLP.
    pub experts: u32,
    /// Experts each token is routed to (top-k); 1 for dense models.
    pub experts_per_token: u32,
    /// Whether the lm_head shares the input-embedding matrix.
    pub tied_embeddings: bool,
}

impl Model {
    /// Total parameter count, including the embedding table and the lm_head (counted once
    /// when tied) and the RMSNorm weights.
    pub fn params(&self) -> f64 {
        let embed = f64::from(self.vocab) * f64::from(self.hidden);
        let lm_head = if self.tied_embeddings { 0.0 } else { embed };
        let final_norm = f64::from(self.hidden);
        embed + lm_head + final_norm + f64::from(self.layers) * self.params_per_layer()
    }

    /// Parameters of one transformer block: attention projections (q, k, v, o), the MLP
    /// (gate, up, down for each expert, plus the router when `experts > 1`) and its two
    /// RMSNorm weight vectors.
    pub fn params_per_layer(&self) -> f64 {
        let hidden = f64::from(self.hidden);
        let head_dim = f64::from(self.head_dim);
        let q = hidden * f64::from(self.heads) * head_dim;
        let kv = 2.0 * hidden * f64::from(self.kv_heads) * head_dim;
        let o = f64::from(self.heads) * head_dim * hidden;
        let experts = f64::from(self.experts);
        let mlp = experts * 3.0 * hidden * f64::from(self.intermediate);
        let router = if self.experts > 1 {
            hidden * experts
        } else {
            0.0
        };
        let norms = 2.0 * hidden;
        q + kv + o + mlp + router + norms
    }

    /// Bytes of K and V cache one token occupies across all layers of the whole model
    /// (`2 · layers · kv_heads · head_dim · dtype_bytes`).
    pub fn kv_bytes_per_token(&self, dtype_bytes: f64) -> f64 {
        2.0 * f64::from(self.layers)
            * f64::from(self.kv_heads)
            * f64::from(self.head_dim)
            * dtype_bytes
    }

    /// Check every field; error paths are relative (`heads`), callers prefix them (`model`).
    pub fn validate(&self) -> Result<()> {
        if self.name.trim().is_empty() {
            return Err(SimError::config("name", "must not be empty"));
        }
        for (path, value) in [
            ("layers", self.layers),
            ("hidden", self.hidden),
            ("heads", self.heads),
            ("kv_heads", self.kv_heads),
            ("head_dim", self.head_dim),
            ("intermediate", self.intermediate),
            ("vocab", self.vocab),
            ("max_context", self.max_context),
            ("experts", self.experts),
            ("experts_per_token", self.experts_per_token),
        ] {
            at_least_one(path, value)?;
        }
        if !divides(self.kv_heads, self.heads) {
            return Err(SimError::config(
                "heads",
                format!(
                    "must be a multiple of kv_heads (got heads={}, kv_heads={})",
                    self.heads, self.kv_heads
                ),
            ));
        }
        if self.experts_per_token > self.experts {
            return Err(SimError::config(
                "experts_per_token",
                format!(
                    "must be <= experts (got experts_per_token={}, experts={})",
                    self.experts_per_token, self.experts
                ),
            ));
        }
        Ok(())
    }
}

/// The model presets.
///
/// Sources: the `config.json` published with each model on the Hugging Face Hub
/// (`meta-llama/Meta-Llama-3-8B`, `meta-llama/Meta-Llama-3-70B`, `meta-llama/Llama-3.1-405B`,
/// `Qwen/Qwen2.5-72B`, `mistralai/Mixtral-8x7B-v0.1`): `num_hidden_layers`, `hidden_size`,
/// `num_attention_heads`, `num_key_value_heads`, `intermediate_size`, `vocab_size`,
/// `max_position_embeddings` (Qwen2.5-72B: 32,768 native context), `num_local_experts`,
/// `num_experts_per_tok`, `tie_word_embeddings` (false for all of these).
pub fn model_presets() -> Vec<Model> {
    #[allow(clippy::too_many_arguments)]
    fn model(
        name: &str,
        layers: u32,
        hidden: u32,
        heads: u32,
        kv_heads: u32,
        intermediate: u32,
        vocab: u32,
        max_context: u32,
        experts: u32,
        experts_per_token: u32,
    ) -> Model {
        Model {
            name: name.to_string(),
            layers,
            hidden,
            heads,
            kv_heads,
            head_dim: 128,
            intermediate,
            vocab,
            max_context,
            experts,
            experts_per_token,
            tied_embeddings: false,
        }
    }
    vec![
        model("llama-3-8b", 32, 4096, 32, 8, 14336, 128_256, 8192, 1, 1),
        model("llama-3-70b", 80, 8192, 64, 8, 28672, 128_256, 8192, 1, 1),
        model(
            "llama-3.1-405b",
            126,
            16384,
            128,
            8,
            53248,
            128_256,
            131_072,
            1,
            1,
        ),
        model("qwen2.5-72b", 80, 8192, 64, 8, 29568, 152_064, 32768, 1, 1),
        model("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768, 8, 2),
    ]
}

/// Names of the model presets, in catalog order.
pub fn model_preset_names() -> Vec<&'static str> {
    vec![
        "llama-3-8b",
        "llama-3-70b",
        "llama-3.1-405b",
        "qwen2.5-72b",
        "mixtral-8x7b",
    ]
}

fn model_preset(name: &str) -> Option<Model> {
    model_presets().into_iter().find(|m| m.name == name)
}

// ---------------------------------------------------------------------------------------------
// Scenario inputs
// ---------------------------------------------------------------------------------------------

/// The `model` entry of a scenario: a preset name, or a table of fields (optionally starting
/// from a preset whose fields it overrides).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ModelInput {
    /// `model = "llama-3-8b"`.
    Preset(String),
    /// `model = { preset = "llama-3-8b", layers = 16 }` or a complete custom model.
    Custom(ModelFields),
}

/// Table form of [`ModelInput`]. Every field is optional; without `preset`, all structural
/// fields are required. Fields with defaults when no preset is given: `name` ("custom"),
/// `experts` (1), `experts_per_token` (1, required when `experts > 1`), `tied_embeddings`
/// (false). Units as in [`Model`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelFields {
    /// Preset to start from; the other fields override it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// Overrides [`Model::name`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Overrides [`Model::layers`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<u32>,
    /// Overrides [`Model::hidden`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<u32>,
    /// Overrides [`Model::heads`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heads: Option<u32>,
    /// Overrides [`Model::kv_heads`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_heads: Option<u32>,
    /// Overrides [`Model::head_dim`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<u32>,
    /// Overrides [`Model::intermediate`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intermediate: Option<u32>,
    /// Overrides [`Model::vocab`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vocab: Option<u32>,
    /// Overrides [`Model::max_context`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_context: Option<u32>,
    /// Overrides [`Model::experts`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts: Option<u32>,
    /// Overrides [`Model::experts_per_token`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts_per_token: Option<u32>,
    /// Overrides [`Model::tied_embeddings`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tied_embeddings: Option<bool>,
}

/// The `gpu` entry of a scenario: a preset name, or a table of fields (optionally starting
/// from a preset whose fields it overrides).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum GpuInput {
    /// `gpu = "h100"`.
    Preset(String),
    /// `gpu = { preset = "h100", hbm_gib = 94 }` or a complete custom GPU.
    Custom(GpuFields),
}

/// Table form of [`GpuInput`]. Every field is optional; without `preset`, all datasheet
/// fields are required. Fields with defaults when no preset is given: `name` ("custom"),
/// `fp8_tflops` (0 = none), `compute_efficiency` (0.70), `memory_efficiency` (0.80). Units as
/// in [`Gpu`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuFields {
    /// Preset to start from; the other fields override it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// Overrides [`Gpu::name`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Overrides [`Gpu::bf16_tflops`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bf16_tflops: Option<f64>,
    /// Overrides [`Gpu::fp8_tflops`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8_tflops: Option<f64>,
    /// Overrides [`Gpu::hbm_gib`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hbm_gib: Option<f64>,
    /// Overrides [`Gpu::hbm_tbps`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hbm_tbps: Option<f64>,
    /// Overrides [`Gpu::sms`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sms: Option<u32>,
    /// Overrides [`Gpu::nvlink_gbps`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_gbps: Option<f64>,
    /// Overrides [`Gpu::compute_efficiency`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_efficiency: Option<f64>,
    /// Overrides [`Gpu::memory_efficiency`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_efficiency: Option<f64>,
}

/// Default compute efficiency of a custom GPU given without a preset.
pub const CUSTOM_GPU_COMPUTE_EFFICIENCY: f64 = 0.70;
/// Default memory efficiency of a custom GPU given without a preset.
pub const CUSTOM_GPU_MEMORY_EFFICIENCY: f64 = 0.80;

impl From<&str> for ModelInput {
    fn from(name: &str) -> Self {
        ModelInput::Preset(name.to_string())
    }
}

impl From<&str> for GpuInput {
    fn from(name: &str) -> Self {
        GpuInput::Preset(name.to_string())
    }
}

// `ModelInput` / `GpuInput` deserialize through hand-written visitors ("a string or a table")
// so that a wrong type gives a clear `expecting` message instead of serde's "data did not
// match any variant of untagged enum", and unknown table fields are named by
// `deny_unknown_fields` on the `*Fields` structs.

struct ModelInputVisitor;

impl<'de> Visitor<'de> for ModelInputVisitor {
    type Value = ModelInput;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(
            "a model preset name (string) or a table of model fields (optionally with `preset`)",
        )
    }

    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<ModelInput, E> {
        Ok(ModelInput::Preset(v.to_string()))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<ModelInput, A::Error> {
        ModelFields::deserialize(de::value::MapAccessDeserializer::new(map)).map(ModelInput::Custom)
    }
}

impl<'de> Deserialize<'de> for ModelInput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(ModelInputVisitor)
    }
}

struct GpuInputVisitor;

impl<'de> Visitor<'de> for GpuInputVisitor {
    type Value = GpuInput;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(
            "a GPU preset name (string) or a table of GPU fields (optionally with `preset`)",
        )
    }

    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<GpuInput, E> {
        Ok(GpuInput::Preset(v.to_string()))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<GpuInput, A::Error> {
        GpuFields::deserialize(de::value::MapAccessDeserializer::new(map)).map(GpuInput::Custom)
    }
}

impl<'de> Deserialize<'de> for GpuInput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(GpuInputVisitor)
    }
}

/// The override if given, else the preset's value, else the default, else a "required"
/// error at `path`.
fn pick<T: Clone>(
    path: &str,
    given: &Option<T>,
    preset: Option<T>,
    default: Option<T>,
) -> Result<T> {
    given.clone().or(preset).or(default).ok_or_else(|| {
        SimError::config(
            path,
            "is required when no `preset` is given (name a preset or give every field)",
        )
    })
}

/// Resolve a scenario's `model` entry to a validated [`Model`]. Error paths start with
/// `model` (`model`, `model.preset`, `model.layers`, …).
pub fn resolve_model(input: &ModelInput) -> Result<Model> {
    let model = match input {
        ModelInput::Preset(name) => model_preset(name)
            .ok_or_else(|| check::unknown_name("model", "model", name, &model_preset_names()))?,
        ModelInput::Custom(f) => {
            let base = match &f.preset {
                Some(name) => Some(model_preset(name).ok_or_else(|| {
                    check::unknown_name("model.preset", "model", name, &model_preset_names())
                })?),
                None => None,
            };
            let b = base.as_ref();
            let experts = pick("model.experts", &f.experts, b.map(|m| m.experts), Some(1))?;
            Model {
                name: pick(
                    "model.name",
                    &f.name,
                    b.map(|m| m.name.clone()),
                    Some("custom".to_string()),
                )?,
                layers: pick("model.layers", &f.layers, b.map(|m| m.layers), None)?,
                hidden: pick("model.hidden", &f.hidden, b.map(|m| m.hidden), None)?,
                heads: pick("model.heads", &f.heads, b.map(|m| m.heads), None)?,
                kv_heads: pick("model.kv_heads", &f.kv_heads, b.map(|m| m.kv_heads), None)?,
                head_dim: pick("model.head_dim", &f.head_dim, b.map(|m| m.head_dim), None)?,
                intermediate: pick(
                    "model.intermediate",
                    &f.intermediate,
                    b.map(|m| m.intermediate),
                    None,
                )?,
                vocab: pick("model.vocab", &f.vocab, b.map(|m| m.vocab), None)?,
                max_context: pick(
                    "model.max_context",
                    &f.max_context,
                    b.map(|m| m.max_context),
                    None,
                )?,
                experts,
                experts_per_token: pick(
                    "model.experts_per_token",
                    &f.experts_per_token,
                    b.map(|m| m.experts_per_token),
                    if experts == 1 { Some(1) } else { None },
                )?,
                tied_embeddings: pick(
                    "model.tied_embeddings",
                    &f.tied_embeddings,
                    b.map(|m| m.tied_embeddings),
                    Some(false),
                )?,
            }
        }
    };
    model.validate().map_err(|e| e.under("model"))?;
    Ok(model)
}

/// Resolve a scenario's `gpu` entry to a validated [`Gpu`]. Error paths start with `gpu`
/// (`gpu`, `gpu.preset`, `gpu.hbm_gib`, …).
pub fn resolve_gpu(input: &GpuInput) -> Result<Gpu> {
    let gpu = match input {
        GpuInput::Preset(name) => gpu_preset(name)
            .ok_or_else(|| check::unknown_name("gpu", "gpu", name, &gpu_preset_names()))?,
        GpuInput::Custom(f) => {
            let base = match &f.preset {
                Some(name) => Some(gpu_preset(name).ok_or_else(|| {
                    check::unknown_name("gpu.preset", "gpu", name, &gpu_preset_names())
                })?),
                None => None,
            };
            let b = base.as_ref();
            Gpu {
                name: pick(
                    "gpu.name",
                    &f.name,
                    b.map(|g| g.name.clone()),
                    Some("custom".to_string()),
                )?,
                bf16_tflops: pick(
                    "gpu.bf16_tflops",
                    &f.bf16_tflops,
                    b.map(|g| g.bf16_tflops),
                    None,
                )?,
                fp8_tflops: pick(
                    "gpu.fp8_tflops",
                    &f.fp8_tflops,
                    b.map(|g| g.fp8_tflops),
                    Some(0.0),
                )?,
                hbm_gib: pick("gpu.hbm_gib", &f.hbm_gib, b.map(|g| g.hbm_gib), None)?,
                hbm_tbps: pick("gpu.hbm_tbps", &f.hbm_tbps, b.map(|g| g.hbm_tbps), None)?,
                sms: pick("gpu.sms", &f.sms, b.map(|g| g.sms), None)?,
                nvlink_gbps: pick(
                    "gpu.nvlink_gbps",
                    &f.nvlink_gbps,
                    b.map(|g| g.nvlink_gbps),
                    None,
                )?,
                compute_efficiency: pick(
                    "gpu.compute_efficiency",
                    &f.compute_efficiency,
                    b.map(|g| g.compute_efficiency),
                    Some(CUSTOM_GPU_COMPUTE_EFFICIENCY),
                )?,
                memory_efficiency: pick(
                    "gpu.memory_efficiency",
                    &f.memory_efficiency,
                    b.map(|g| g.memory_efficiency),
                    Some(CUSTOM_GPU_MEMORY_EFFICIENCY),
                )?,
            }
        }
    };
    gpu.validate().map_err(|e| e.under("gpu"))?;
    Ok(gpu)
}

#[cfg(test)]
mod tests;
