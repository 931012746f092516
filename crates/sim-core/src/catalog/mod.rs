//! Hardware and model catalog: GPU and transformer descriptions, their presets, and the
//! scenario inputs that resolve to them: `model = "llama-3-8b"` (or a Hugging Face id such
//! as `"meta-llama/Llama-3.1-8B"`), `model = { preset = "...", layers = 40 }`, or
//! `model = { hf_config = {...} }` (a `config.json`, parsed by the front ends).
//!
//! By file: the GPU record and its presets (`gpu.rs`), the model record (`model.rs`), the
//! model presets (`presets.rs`, each a Hugging Face `config.json` read by [`hf`]), the field
//! checks both records share (`checks.rs`); this file holds the scenario inputs (`model`,
//! `gpu`) and their resolution against the presets.
//!
//! Units used throughout: FLOP/s in TFLOP/s (10¹²), memory sizes in GiB (2³⁰ bytes), memory
//! bandwidth in TB/s (10¹² bytes/s), interconnect bandwidth in GB/s (10⁹ bytes/s).

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::error::{check, Result, SimError};

mod checks;
mod gpu;
pub mod hf;
mod model;
mod presets;

pub use gpu::{
    gpu_preset_names, gpu_presets, Gpu, GpuFields, MatrixUnit, CUSTOM_GPU_COMPUTE_EFFICIENCY,
    CUSTOM_GPU_MEMORY_EFFICIENCY, GPU_ONLY_FIELDS, ROOFLINE,
};
pub use model::{Activation, LocalAttention, LocalKind, Mla, Model, ModelFields, WeightFormat, MAX_COUNT, MAX_WIDTH};
pub use presets::{model_preset_names, model_presets, ModelPreset, MODEL_PRESETS};

pub(crate) use checks::{divides, fraction};

use gpu::gpu_preset;
use presets::model_preset;

/// The catalog's models as the `presets` listing shows them: each model's fields plus its
/// Hugging Face ids (`hf_ids`), total and active parameter counts (`params`,
/// `active_params`).
pub fn model_catalog_json() -> Vec<serde_json::Value> {
    MODEL_PRESETS
        .iter()
        .zip(model_presets())
        .map(|(p, m)| {
            let mut v = serde_json::to_value(&m).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("hf_ids".into(), serde_json::json!(p.hf_ids));
                o.insert("params".into(), serde_json::json!(m.params()));
                o.insert("active_params".into(), serde_json::json!(m.active_params()));
            }
            v
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Scenario inputs
// ---------------------------------------------------------------------------------------------

/// The `model` entry of a scenario: a preset name, or a table of fields (optionally starting
/// from a preset whose fields it overrides).
// Parsed once per scenario: the table variant's size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ModelInput {
    /// `model = "llama-3-8b"`.
    Preset(String),
    /// `model = { preset = "llama-3-8b", layers = 16 }` or a complete custom model.
    Custom(ModelFields),
}

/// The `gpu` entry of a scenario: a preset name, or a table of fields (optionally starting
/// from a preset whose fields it overrides).
// Parsed once per scenario: the table variant's size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum GpuInput {
    /// `gpu = "h100"`.
    Preset(String),
    /// `gpu = { preset = "h100", hbm_gib = 94 }` or a complete custom GPU.
    Custom(GpuFields),
}

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
/// `model` (`model`, `model.preset`, `model.layers`, `model.hf_config.num_attention_heads`,
/// …).
pub fn resolve_model(input: &ModelInput) -> Result<Model> {
    let model = match input {
        ModelInput::Preset(name) => model_preset(name)
            .ok_or_else(|| check::unknown_name("model", "model", name, &model_preset_names()))?,
        ModelInput::Custom(f) => {
            let base = match (&f.preset, &f.hf_config) {
                (Some(_), Some(_)) => {
                    return Err(SimError::config(
                        "model.hf_config",
                        "give either `preset` or `hf_config`, not both",
                    ))
                }
                (Some(name), None) => Some(model_preset(name).ok_or_else(|| {
                    check::unknown_name("model.preset", "model", name, &model_preset_names())
                })?),
                (None, Some(config)) => Some(hf::model_from_hf_config(config).map_err(|e| e.under("model.hf_config"))?),
                (None, None) => None,
            };
            from_fields(f, base.as_ref())?
        }
    };
    model.validate().map_err(|e| e.under("model"))?;
    Ok(model)
}

/// A count of layers of some kind (`of_base` of the base's `base_layers`) carried over to a
/// model of `layers` layers when only `layers` was overridden: all stay all, else the base's
/// share, rounded.
fn rescaled(of_base: u32, base_layers: u32, layers: u32) -> u32 {
    if of_base >= base_layers {
        return layers;
    }
    let share = u64::from(of_base) * u64::from(layers);
    u32::try_from((share + u64::from(base_layers) / 2) / u64::from(base_layers)).unwrap_or(u32::MAX)
}

/// A [`Model`] from a table's fields over `b` (a preset or a loaded config), or from the
/// fields alone.
fn from_fields(f: &ModelFields, b: Option<&Model>) -> Result<Model> {
    // Picked in field order, so a table missing several fields names the first.
    let experts = pick("model.experts", &f.experts, b.map(|m| m.experts), Some(1))?;
    let name = pick("model.name", &f.name, b.map(|m| m.name.clone()), Some("custom".to_string()))?;
    let layers = pick("model.layers", &f.layers, b.map(|m| m.layers), None)?;
    let hidden = pick("model.hidden", &f.hidden, b.map(|m| m.hidden), None)?;
    let heads = pick("model.heads", &f.heads, b.map(|m| m.heads), None)?;
    let kv_heads = pick("model.kv_heads", &f.kv_heads, b.map(|m| m.kv_heads), None)?;
    let mla = f.mla.or(b.and_then(|m| m.mla));
    // A table giving `mla` sets the q/k head width it implies unless it gives head_dim too.
    let head_dim = match (&f.head_dim, &f.mla) {
        (None, Some(m)) => m.qk_head_dim(),
        _ => pick("model.head_dim", &f.head_dim, b.map(|m| m.head_dim), None)?,
    };
    let intermediate = pick("model.intermediate", &f.intermediate, b.map(|m| m.intermediate), None)?;
    // Counts of layers of a kind keep the base's share when only `layers` changes.
    let carried = |count: fn(&Model) -> u32| b.map(|m| rescaled(count(m), m.layers, layers));
    let moe_default = match b {
        _ if experts == 1 => Some(0),
        Some(m) if m.experts > 1 => carried(|m| m.moe_layers),
        _ => Some(layers),
    };
    let local_attention = match (&f.local_attention, b.and_then(|m| m.local_attention)) {
        (Some(given), _) => Some(*given),
        (None, Some(base)) => Some(LocalAttention {
            layers: rescaled(base.layers, b.map_or(0, |m| m.layers), layers),
            ..base
        }),
        (None, None) => None,
    };
    Ok(Model {
        name,
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim,
        intermediate,
        vocab: pick("model.vocab", &f.vocab, b.map(|m| m.vocab), None)?,
        max_context: pick("model.max_context", &f.max_context, b.map(|m| m.max_context), None)?,
        experts,
        experts_per_token: pick(
            "model.experts_per_token",
            &f.experts_per_token,
            b.map(|m| m.experts_per_token),
            if experts == 1 { Some(1) } else { None },
        )?,
        tied_embeddings: pick("model.tied_embeddings", &f.tied_embeddings, b.map(|m| m.tied_embeddings), Some(false))?,
        moe_layers: pick("model.moe_layers", &f.moe_layers, None, moe_default)?,
        dense_intermediate: pick(
            "model.dense_intermediate",
            &f.dense_intermediate,
            // A base whose dense width is its expert width keeps that tie to an override.
            b.filter(|m| m.dense_intermediate != m.intermediate).map(|m| m.dense_intermediate),
            Some(intermediate),
        )?,
        shared_expert_intermediate: pick(
            "model.shared_expert_intermediate",
            &f.shared_expert_intermediate,
            b.map(|m| m.shared_expert_intermediate),
            Some(0),
        )?,
        qkv_bias: pick("model.qkv_bias", &f.qkv_bias, b.map(|m| m.qkv_bias), Some(false))?,
        qk_norm_layers: pick("model.qk_norm_layers", &f.qk_norm_layers, carried(|m| m.qk_norm_layers), Some(0))?,
        post_norms: pick("model.post_norms", &f.post_norms, b.map(|m| m.post_norms), Some(false))?,
        activation: pick("model.activation", &f.activation, b.map(|m| m.activation), Some(Activation::Silu))?,
        local_attention,
        mla,
        attention_sinks: pick("model.attention_sinks", &f.attention_sinks, b.map(|m| m.attention_sinks), Some(false))?,
        expert_format: f.expert_format.or(b.and_then(|m| m.expert_format)),
        mtp_layers: pick("model.mtp_layers", &f.mtp_layers, b.map(|m| m.mtp_layers), Some(0))?,
        serve_mtp: pick("model.serve_mtp", &f.serve_mtp, b.map(|m| m.serve_mtp), Some(false))?,
    })
}

/// Whether a `gpu` table changes a figure a calibration profile's tables embody.
fn changes_the_part(f: &GpuFields) -> bool {
    f.bf16_tflops.is_some() || f.fp8_tflops.is_some() || f.hbm_tbps.is_some() || f.sms.is_some() || f.sm_clock_mhz.is_some()
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
            let unit = f.matrix_unit.or(b.map(|g| g.matrix_unit)).unwrap_or_default();
            if unit == MatrixUnit::Mxu {
                if let Some(field) = f.gpu_only_set().first() {
                    return Err(SimError::config(
                        format!("gpu.{field}"),
                        "a GPU-only option: a TPU has no NVLink or paged-attention descriptor cache (set its ICI with \
                         gpu.ici_gbps)",
                    ));
                }
            } else if f.ici_gbps.is_some() {
                return Err(SimError::config("gpu.ici_gbps", "only a TPU (matrix_unit = \"mxu\") has ICI links; a GPU sets nvlink_gbps"));
            }
            let nvlink = if f.ici_gbps.is_some() { &f.ici_gbps } else { &f.nvlink_gbps };
            Gpu {
                name: pick("gpu.name", &f.name, b.map(|g| g.name.clone()), Some("custom".to_string()))?,
                bf16_tflops: pick("gpu.bf16_tflops", &f.bf16_tflops, b.map(|g| g.bf16_tflops), None)?,
                fp8_tflops: pick("gpu.fp8_tflops", &f.fp8_tflops, b.map(|g| g.fp8_tflops), Some(0.0))?,
                hbm_gib: pick("gpu.hbm_gib", &f.hbm_gib, b.map(|g| g.hbm_gib), None)?,
                hbm_tbps: pick("gpu.hbm_tbps", &f.hbm_tbps, b.map(|g| g.hbm_tbps), None)?,
                sms: pick("gpu.sms", &f.sms, b.map(|g| g.sms), None)?,
                nvlink_gbps: pick(if f.ici_gbps.is_some() { "gpu.ici_gbps" } else { "gpu.nvlink_gbps" }, nvlink, b.map(|g| g.nvlink_gbps), None)?,
                nvlink_gpus: pick("gpu.nvlink_gpus", &f.nvlink_gpus, b.map(|g| g.nvlink_gpus), Some(8))?,
                pcie_gbps: pick("gpu.pcie_gbps", &f.pcie_gbps, b.map(|g| g.pcie_gbps), Some(64.0))?,
                sm_clock_mhz: pick("gpu.sm_clock_mhz", &f.sm_clock_mhz, b.map(|g| g.sm_clock_mhz), Some(1980.0))?,
                descriptor_cache_entries: pick(
                    "gpu.descriptor_cache_entries",
                    &f.descriptor_cache_entries,
                    b.map(|g| g.descriptor_cache_entries),
                    Some(256),
                )?,
                descriptor_miss_cycles: pick(
                    "gpu.descriptor_miss_cycles",
                    &f.descriptor_miss_cycles,
                    b.map(|g| g.descriptor_miss_cycles),
                    Some(2.0),
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
                // A profile's tables time the preset's own part: a table that changes its
                // peaks, bandwidth, SMs or clock describes another part, priced by the
                // roofline unless it names a profile.
                priced_by: pick(
                    "gpu.priced_by",
                    &f.priced_by,
                    b.filter(|_| !changes_the_part(f)).map(|g| g.priced_by.clone()),
                    Some(ROOFLINE.to_string()),
                )?,
                matrix_unit: unit,
            }
        }
    };
    gpu.validate().map_err(|e| e.under("gpu"))?;
    Ok(gpu)
}

#[cfg(test)]
mod hf_tests;
#[cfg(test)]
mod tests;
