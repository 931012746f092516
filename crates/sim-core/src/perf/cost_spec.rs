//! Which execution-time model a scenario asks for ([`CostModelSpec`]: `calibrated`,
//! `roofline` or `linear`, with its parameters), and its hand-written deserializer, which
//! names every field that does not apply to the kind given.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::warmup::WarmupSpec;
use super::spec::{parse_dtype, parse_engine, parse_fusion, StepSpec, DTYPE_NAMES, KV_DTYPE_NAMES};
use crate::error::{check, Result, SimError};

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
    warmup: Option<WarmupSpec>,
    base_ms: Option<f64>,
    per_prefill_token_ms: Option<f64>,
    per_decode_seq_ms: Option<f64>,
    per_context_token_ms: Option<f64>,
}

const KINDS: [&str; 3] = ["calibrated", "roofline", "linear"];
const LINEAR_FIELDS: &str = "base_ms, per_prefill_token_ms, per_decode_seq_ms, per_context_token_ms";
const STEP_FIELDS: &str = "engine, dtype, kv_dtype, cuda_graphs, cuda_graph_max_tokens, fusion, fusion_latency_threshold_ms, \
                           memory_coalesce, compute_efficiency, memory_efficiency, kernel_floor_us, launch_us, \
                           comm_latency_us, cpu_overhead_ms, profile, warmup";

fn wrong_kind(field: &str, kind: &str, valid: &str) -> String {
    format!("field `{field}` does not apply to kind \"{kind}\" (its fields: {valid})")
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
            warmup: self.warmup.clone().unwrap_or_default(),
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
                    ("warmup", self.warmup.is_some()),
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
