//! `predict_step`: the execution-time model of one step, as a function front ends call
//! directly. The simulator prices every step with the same [`StepCostModel`].

use serde::{Deserialize, Serialize};

use crate::catalog::{resolve_gpu, resolve_model, GpuInput, ModelInput};
use crate::error::{Result, SimError};

use super::{parse_dtype, parse_engine, parse_fusion, BatchShape, CostModelSpec, OpCost, PrefillItem, StepCostModel, StepSpec};
use super::{DTYPE_NAMES, KV_DTYPE_NAMES};

/// One request in the step: `new_tokens` processed now over `context_tokens` already cached.
/// A decode at KV length L is `{new_tokens: 1, context_tokens: L-1}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictItem {
    pub new_tokens: i64,
    #[serde(default)]
    pub context_tokens: i64,
    /// Whether the step samples this request's last position (default true; false for a
    /// prefill chunk that does not finish its prompt).
    #[serde(default)]
    pub sampled: Option<bool>,
}

/// Input of [`predict`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictRequest {
    pub model: ModelInput,
    pub gpu: GpuInput,
    #[serde(default = "one")]
    pub tp: i64,
    #[serde(default = "one")]
    pub pp: i64,
    pub batch: Vec<PredictItem>,
    #[serde(default)]
    pub cuda_graphs: Option<bool>,
    #[serde(default)]
    pub dtype: Option<String>,
    #[serde(default)]
    pub kv_dtype: Option<String>,
    #[serde(default)]
    pub fusion: Option<String>,
    /// `vllm` (default) or `reference` (see [`super::Engine`]).
    #[serde(default)]
    pub engine: Option<String>,
    /// Paged KV cache block size (adds the remap cost); none = contiguous cache.
    #[serde(default)]
    pub block_size: Option<u32>,
    /// A calibration profile replacing the GPU's shipped one (see `StepSpec::profile`).
    #[serde(default)]
    pub profile: Option<serde_json::Value>,
}

fn one() -> i64 {
    1
}

/// Output of [`predict`].
#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    pub total_ms: f64,
    /// `"graph"` or `"eager"`.
    pub mode: &'static str,
    /// The GPU's calibration profile source, or `None` (roofline only).
    pub profile: Option<String>,
    pub breakdown: Vec<OpCost>,
}

fn count(path: &str, v: i64) -> Result<u32> {
    if v < 1 {
        return Err(SimError::config(path, format!("must be >= 1 (got {v})")));
    }
    u32::try_from(v).map_err(|_| SimError::config(path, format!("is too large (got {v})")))
}

/// The step model's parameters a request gives (the defaults otherwise).
fn step_spec(req: &PredictRequest) -> Result<StepSpec> {
    let mut spec = StepSpec::default();
    if let Some(g) = req.cuda_graphs {
        spec.cuda_graphs = g;
    }
    if let Some(d) = &req.dtype {
        spec.dtype = parse_dtype("dtype", d, &DTYPE_NAMES)?;
    }
    if let Some(d) = &req.kv_dtype {
        spec.kv_dtype = parse_dtype("kv_dtype", d, &KV_DTYPE_NAMES)?;
    }
    if let Some(e) = &req.engine {
        spec.engine = parse_engine("engine", e)?;
    }
    if let Some(f) = &req.fusion {
        spec.fusion = parse_fusion("fusion", f)?;
    }
    spec.profile = req.profile.clone();
    Ok(spec)
}

/// Predict one step. Errors (`ConfigError` with the field): unknown model/GPU (`model`,
/// `gpu`), tokens < 1 (`batch[i].new_tokens`), negative context or context beyond the model's
/// maximum (`batch[i].context_tokens`), `tp` not dividing the heads (`tp`), bad precision or
/// fusion names.
pub fn predict(req: &PredictRequest) -> Result<Prediction> {
    let model = resolve_model(&req.model)?;
    let gpu = resolve_gpu(&req.gpu)?;
    let tp = count("tp", req.tp)?;
    let pp = count("pp", req.pp)?;
    if req.batch.is_empty() {
        return Err(SimError::config("batch", "must hold at least one request"));
    }
    let spec = step_spec(req)?;
    let custom = spec.custom_profile()?;
    let mut items = Vec::new();
    let (mut decode_seqs, mut decode_ctx, mut ctx_after, mut sampled, mut prefill_tokens) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for (i, it) in req.batch.iter().enumerate() {
        let new = count(&format!("batch[{i}].new_tokens"), it.new_tokens)?;
        let path = format!("batch[{i}].context_tokens");
        if it.context_tokens < 0 {
            return Err(SimError::config(path, format!("must be >= 0 (got {})", it.context_tokens)));
        }
        let total = it.context_tokens.saturating_add(i64::from(new));
        if total > i64::from(model.max_context) {
            return Err(SimError::config(
                path,
                format!("context + new tokens = {total} exceeds {}'s maximum context {}", model.name, model.max_context),
            ));
        }
        let ctx = it.context_tokens as u32;
        let after = u64::from(ctx) + u64::from(new);
        ctx_after += after;
        sampled += u64::from(it.sampled.unwrap_or(true));
        if new == 1 && ctx > 0 {
            decode_seqs += 1;
            decode_ctx += after;
        } else {
            prefill_tokens += u64::from(new);
            items.push(PrefillItem { new_tokens: new, context_before: ctx });
        }
    }
    let spec = CostModelSpec::Calibrated(spec);
    let cost = StepCostModel::new(&spec, &model, &gpu, tp, pp).map_err(|e| match e {
        SimError::Config { path, message } if path.starts_with("deployment.") => {
            SimError::config(path.trim_start_matches("deployment."), message)
        }
        SimError::Config { path, message } if path.starts_with("cost_model.") => {
            SimError::config(path.trim_start_matches("cost_model."), message)
        }
        other => other,
    })?;
    let cost = match req.block_size {
        Some(b) => cost.with_block_size(b),
        None => cost,
    };
    let shape = BatchShape {
        prefill: &items,
        prefill_tokens,
        decode_seqs,
        decode_context_sum: decode_ctx,
        context_sum_after: ctx_after,
        sampled,
        decode_blocks_1024: 0,
        spec_tokens: 0,
        lora_adapters: 0,
    };
    let (breakdown, graph) = cost.breakdown(&shape);
    Ok(Prediction {
        total_ms: breakdown.iter().map(|o| o.ms).sum(),
        mode: if graph { "graph" } else { "eager" },
        profile: custom.map(|p| p.source).or_else(|| gpu.profile_name().and_then(crate::calib::Profile::builtin_shared).map(|p| p.source.clone())),
        breakdown,
    })
}
