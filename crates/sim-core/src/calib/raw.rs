//! A calibration profile as its JSON file writes it (`crates/sim-core/profiles/*.json`, or a
//! scenario's `cost_model.profile`): the measured tables, before they are built into curves
//! ([`super::build`]).

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
pub(super) struct RawGemm {
    pub(super) dtype: String,
    pub(super) op: String,
    pub(super) label: String,
    pub(super) k: u32,
    pub(super) n: u32,
    pub(super) m: Vec<f64>,
    pub(super) ms: Vec<f64>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct RawPrefill {
    pub(super) hq: u32,
    pub(super) hkv: u32,
    pub(super) hd: u32,
    pub(super) seq: Vec<f64>,
    pub(super) ms: Vec<f64>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct RawChunk {
    pub(super) hq: u32,
    pub(super) hkv: u32,
    pub(super) hd: u32,
    pub(super) chunk: u32,
    pub(super) context: Vec<f64>,
    pub(super) ms: Vec<f64>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct RawDecode {
    pub(super) hq: u32,
    pub(super) hkv: u32,
    pub(super) hd: u32,
    pub(super) b: Vec<f64>,
    pub(super) ctx: Vec<f64>,
    pub(super) ms: Vec<f64>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct RawElem {
    pub(super) op: String,
    pub(super) label: String,
    pub(super) width: u32,
    pub(super) m: Vec<f64>,
    pub(super) ms: Vec<f64>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct RawProfile {
    pub(super) gpu: String,
    pub(super) source: String,
    /// `"shipped"`: this file carries no tables of its own but adjusts the shipped profile of
    /// `gpu` (what `o1sim calibrate` writes); `"roofline"`: it adjusts the datasheet roofline
    /// (a GPU without a shipped profile).
    #[serde(default)]
    pub(super) base: Option<String>,
    /// Every GPU kernel time (GEMMs, attention, elementwise ops) multiplied by this: a
    /// machine's own speed against the tables', fitted by `o1sim calibrate` (absent = 1).
    #[serde(default)]
    pub(super) gpu_time_scale: Option<f64>,
    /// The serving front end measured with this GPU (the `[frontend]` fields, which a
    /// scenario's own section overrides; `o1sim calibrate` fits them).
    #[serde(default)]
    pub(super) frontend: Option<serde_json::Value>,
    #[serde(default)]
    pub(super) copy_gbps: f64,
    #[serde(default)]
    pub(super) gemm_tflops: f64,
    /// What one isolated timing adds beyond the op's launch and GPU time, µs (absent = 0).
    #[serde(default)]
    pub(super) isolated_overhead_us: f64,
    /// How rows were timed: `isolated` (default: one eager call between two events, launch
    /// included) or `in_stream` (events around the op inside a running forward pass: GPU
    /// time only).
    #[serde(default)]
    pub(super) timing: Option<String>,
    /// Kernels each elementwise op launched in the engine the tables come from, where it
    /// differs from the reference engine's (RoPE 16, SiLU·mul 2, the others 1): e.g. a
    /// vLLM-style engine's fused RoPE and SiLU·mul are one kernel each.
    #[serde(default)]
    pub(super) kernels: std::collections::BTreeMap<String, u32>,
    #[serde(default)]
    pub(super) gemm: Vec<RawGemm>,
    #[serde(default)]
    pub(super) attention_prefill: Vec<RawPrefill>,
    #[serde(default)]
    pub(super) attention_chunk: Vec<RawChunk>,
    #[serde(default)]
    pub(super) attention_decode: Vec<RawDecode>,
    #[serde(default)]
    pub(super) elementwise: Vec<RawElem>,
}
