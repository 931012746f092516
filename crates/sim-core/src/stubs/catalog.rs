use serde::{Deserialize, Serialize};
use crate::error::Result;
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gpu { pub name: String, pub bf16_tflops: f64, pub fp8_tflops: f64, pub hbm_gib: f64, pub hbm_tbps: f64, pub sms: u32, pub nvlink_gbps: f64, pub compute_efficiency: f64, pub memory_efficiency: f64 }
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Model { pub name: String, pub layers: u32, pub hidden: u32, pub heads: u32, pub kv_heads: u32, pub head_dim: u32, pub intermediate: u32, pub vocab: u32, pub max_context: u32, pub experts: u32, pub experts_per_token: u32, pub tied_embeddings: bool }
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInput(pub String);
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuInput(pub String);
pub fn resolve_model(_i: &ModelInput) -> Result<Model> { Ok(Model{name:"llama-3-8b".into(), layers:32, hidden:4096, heads:32, kv_heads:8, head_dim:128, intermediate:14336, vocab:128256, max_context:8192, experts:1, experts_per_token:1, tied_embeddings:false}) }
pub fn resolve_gpu(_i: &GpuInput) -> Result<Gpu> { Ok(Gpu{name:"h200".into(), bf16_tflops:989.0, fp8_tflops:1979.0, hbm_gib:140.0, hbm_tbps:4.8, sms:132, nvlink_gbps:900.0, compute_efficiency:0.75, memory_efficiency:0.85}) }
pub fn model_preset_names() -> Vec<&'static str> { vec!["llama-3-8b"] }
pub fn gpu_preset_names() -> Vec<&'static str> { vec!["h200"] }
pub fn model_presets() -> Vec<Model> { vec![] }
pub fn gpu_presets() -> Vec<Gpu> { vec![] }
