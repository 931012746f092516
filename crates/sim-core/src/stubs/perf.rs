use crate::catalog::{Gpu, Model};
use crate::error::Result;
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize, Default)]
#[serde(tag="kind", rename_all="snake_case")]
pub enum CostModelSpec { #[default] Roofline, Linear { base_ms: f64, per_prefill_token_ms: f64, per_decode_seq_ms: f64, per_context_token_ms: f64 } }
impl CostModelSpec { pub fn validate(&self) -> Result<()> { Ok(()) } }
#[derive(Debug, Clone, Copy)] pub struct PrefillItem { pub new_tokens: u32, pub context_before: u32 }
#[derive(Debug, Clone, Copy)]
pub struct BatchShape<'a> { pub prefill: &'a [PrefillItem], pub prefill_tokens: u64, pub decode_seqs: u64, pub decode_context_sum: u64, pub context_sum_after: u64, pub sampled: u64 }
pub struct StepCostModel { spec: CostModelSpec }
impl StepCostModel {
    pub fn new(spec: &CostModelSpec, _m: &Model, _g: &Gpu, _tp: u32, _pp: u32) -> Result<Self> { Ok(Self{spec: spec.clone()}) }
    pub fn step_ns(&self, b: &BatchShape) -> u64 { match self.spec { CostModelSpec::Linear{base_ms,per_prefill_token_ms,per_decode_seq_ms,per_context_token_ms} => ((base_ms + per_prefill_token_ms*b.prefill_tokens as f64 + per_decode_seq_ms*b.decode_seqs as f64 + per_context_token_ms*b.context_sum_after as f64)*1e6).round() as u64, _ => 5_000_000 + 1000*b.prefill_tokens + 10000*b.decode_seqs } }
    pub fn breakdown(&self, _b: &BatchShape) -> Vec<(&'static str, f64)> { vec![] }
}
