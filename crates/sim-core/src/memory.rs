//! Per-GPU memory plan of one replica: weights, an activation reserve, and what is left for
//! the KV cache (as vLLM sizes its cache after a profiling run).
//!
//! Sizes are in GiB (2³⁰ bytes) unless a name says bytes. Weights and KV cache are BF16
//! (2 bytes per value) unless a [`Precision`] says otherwise (FP8/INT8/INT4 weights, FP8 KV).

use crate::catalog::{divides, Gpu, Model};
use crate::error::{check, Result, SimError};

/// Bytes in one GiB.
pub const GIB: f64 = 1_073_741_824.0;
/// Bytes per weight value (BF16).
pub const WEIGHT_BYTES: f64 = 2.0;
/// Bytes per KV-cache value (BF16).
pub const KV_BYTES: f64 = 2.0;
/// Bytes per activation value (BF16).
pub const ACTIVATION_BYTES: f64 = 2.0;
/// Fixed reserve for the CUDA context, cuBLAS/NCCL workspaces and captured CUDA graphs, GiB.
/// An estimate: vLLM logs typically report 0.3–0.7 GiB of "non-torch" memory plus graph pools.
pub const FIXED_RESERVE_GIB: f64 = 0.5;
/// Rows whose logits the activation reserve provisions for: vLLM's profiling run samples
/// `max_num_seqs` rows, 256 by default.
pub const SAMPLED_ROWS_RESERVE: u32 = 256;
/// Bytes per logit value (vLLM upcasts logits to FP32 before sampling).
pub const LOGIT_BYTES: f64 = 4.0;
/// Copies of the logits alive at the sampler's peak (logits + probabilities).
pub const LOGIT_COPIES: f64 = 2.0;

/// How one replica's GPUs split the model: `tp` GPUs per attention rank (TP), `dp`
/// data-parallel attention ranks, `pp` pipeline stages, experts over `ep` GPUs (1, or
/// `dp × tp`: every GPU of a stage) with `redundant_experts` extra expert slots (EPLB).
/// GPUs of one replica = `dp × tp × pp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parallel {
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    pub ep: u32,
    pub redundant_experts: u32,
}

impl Parallel {
    /// TP × PP, no data-parallel attention, no expert parallelism.
    pub fn tp_pp(tp: u32, pp: u32) -> Parallel {
        Parallel { tp, pp, dp: 1, ep: 1, redundant_experts: 0 }
    }

    /// GPUs of one replica.
    pub fn gpus(&self) -> u32 {
        self.dp.saturating_mul(self.tp).saturating_mul(self.pp)
    }
}

/// How one replica's GPUs spend their memory. Per-GPU figures are for the most loaded GPU
/// (the pipeline stage with the most layers when `layers` is not a multiple of `pp`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MemoryPlan {
    /// Device memory of one GPU, GiB.
    pub gpu_memory_gib: f64,
    /// Memory the engine may use on one GPU: `gpu_memory_gib · gpu_memory_utilization`, GiB.
    pub usable_gib: f64,
    /// Weights held by one GPU, GiB.
    pub weights_gib: f64,
    /// Activation reserve of one GPU (forward-pass peak + fixed reserve), GiB.
    pub activation_gib: f64,
    /// KV cache of one GPU: `usable − weights − activation`, GiB.
    pub kv_gib: f64,
    /// KV-cache bytes one token occupies on one GPU, bytes.
    pub kv_bytes_per_token: f64,
    /// Tokens of KV one replica can hold (every GPU of the replica holds its share of every
    /// token, so this is the per-GPU KV space divided by the per-GPU bytes per token).
    pub kv_capacity_tokens: u64,
}

/// Check the replica's parallelism against the model: `tp ≥ 1` divides `heads` and either
/// divides `kv_heads` or is a multiple of it (KV heads are then replicated); `1 ≤ pp ≤ layers`.
/// Errors at `deployment.tp` / `deployment.pp`.
pub fn check_parallelism(model: &Model, tp: u32, pp: u32) -> Result<()> {
    if tp < 1 {
        return Err(SimError::config(
            "deployment.tp",
            format!("must be >= 1 (got {tp})"),
        ));
    }
    if !divides(tp, model.heads) {
        return Err(SimError::config(
            "deployment.tp",
            format!(
                "must divide the attention heads of {} ({}) (got {tp})",
                model.name, model.heads
            ),
        ));
    }
    if !divides(tp, model.kv_heads) && !divides(model.kv_heads, tp) {
        return Err(SimError::config(
            "deployment.tp",
            format!(
                "must divide the KV heads of {} ({}) or be a multiple of them (got {tp})",
                model.name, model.kv_heads
            ),
        ));
    }
    if pp < 1 || pp > model.layers {
        return Err(SimError::config(
            "deployment.pp",
            format!(
                "must be in 1..={} (the layers of {}) (got {pp})",
                model.layers, model.name
            ),
        ));
    }
    Ok(())
}

/// KV heads stored on one GPU: `kv_heads / tp`, or 1 when `tp > kv_heads` (replicated).
pub fn kv_heads_per_gpu(model: &Model, tp: u32) -> u32 {
    if tp == 0 || tp >= model.kv_heads {
        1
    } else {
        model.kv_heads / tp
    }
}

/// Layers of the largest pipeline stage: `ceil(layers / pp)`.
pub fn layers_per_stage(model: &Model, pp: u32) -> u32 {
    model.layers.div_ceil(pp.max(1))
}

/// K and V values per token on one GPU, `2 (K and V) · layers_per_stage · kv_heads_per_gpu ·
/// head_dim` (multiply by the KV precision's bytes).
fn kv_values_per_token_per_gpu(model: &Model, tp: u32, pp: u32) -> f64 {
    2.0 * f64::from(layers_per_stage(model, pp)) * f64::from(kv_heads_per_gpu(model, tp)) * f64::from(model.head_dim)
}

/// Storage precision of the weights and of the KV cache, in bytes per value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Precision {
    /// 2 (BF16), 1 (FP8, INT8) or 0.5 (INT4).
    pub weight_bytes: f64,
    /// 2 (BF16) or 1 (FP8).
    pub kv_bytes: f64,
}

impl Default for Precision {
    fn default() -> Self {
        Precision { weight_bytes: WEIGHT_BYTES, kv_bytes: KV_BYTES }
    }
}

/// Activation reserve of one GPU in bytes, for a forward pass over `tokens` tokens.
///
/// Estimate of the transient peak inside one layer (layers run one after another, so only
/// one layer's intermediates are alive), all BF16:
/// * `4 · hidden` per token: residual stream, normed input, attention output, MLP output;
/// * `2 · intermediate / tp · experts_per_token` per token: the gate/up projection output
///   (the SiLU·mul result reuses half of it), plus the shared expert's on MoE layers; or the
///   dense layers' `2 · dense_intermediate / tp` when that is larger (interleaved models);
/// * `2 · (heads / tp) · head_dim` per token: queries and attention output before `o_proj`;
///
/// plus FP32 logits (and one more copy for probabilities) for [`SAMPLED_ROWS_RESERVE`] rows
/// over the full vocabulary (vLLM gathers logits onto one rank), plus [`FIXED_RESERVE_GIB`].
pub fn activation_bytes(model: &Model, tp: u32, tokens: u32) -> f64 {
    let tp = f64::from(tp.max(1));
    let mlp = if model.experts > 1 {
        let moe = 2.0 * f64::from(model.intermediate) / tp * f64::from(model.experts_per_token)
            + 2.0 * f64::from(model.shared_expert_intermediate) / tp;
        let dense = if model.moe_layers < model.layers { 2.0 * f64::from(model.dense_intermediate) / tp } else { 0.0 };
        moe.max(dense)
    } else {
        2.0 * f64::from(model.intermediate) / tp * f64::from(model.experts_per_token)
    };
    let per_token = 4.0 * f64::from(model.hidden) + mlp + 2.0 * f64::from(model.heads) / tp * f64::from(model.head_dim);
    let forward = f64::from(tokens) * per_token * ACTIVATION_BYTES;
    let rows = f64::from(tokens.min(SAMPLED_ROWS_RESERVE));
    let logits = rows * f64::from(model.vocab) * LOGIT_BYTES * LOGIT_COPIES;
    forward + logits + FIXED_RESERVE_GIB * GIB
}

/// Plan one replica's per-GPU memory: weights (`params · 2 bytes / (tp · pp)`, the embedding
/// and lm_head split like every other weight), the activation reserve for a step of
/// `max_num_batched_tokens` tokens ([`activation_bytes`]), and the KV cache in what remains of
/// `hbm_gib · gpu_memory_utilization`.
///
/// Errors: `scheduler.gpu_memory_utilization` outside (0, 1], `scheduler.max_num_batched_tokens`
/// of 0, bad `deployment.tp` / `deployment.pp` ([`check_parallelism`]), an invalid model or
/// GPU (paths under `model` / `gpu`), and [`SimError::Infeasible`] when no memory is left for
/// the KV cache.
pub fn plan_memory(
    model: &Model,
    gpu: &Gpu,
    tp: u32,
    pp: u32,
    gpu_memory_utilization: f64,
    max_num_batched_tokens: u32,
) -> Result<MemoryPlan> {
    plan_memory_with(model, gpu, tp, pp, gpu_memory_utilization, max_num_batched_tokens, Precision::default())
}

/// [`plan_memory`] with weights and KV cache stored at `precision` (quantised weights take
/// fewer bytes; an FP8 KV cache holds twice the tokens).
pub fn plan_memory_with(
    model: &Model,
    gpu: &Gpu,
    tp: u32,
    pp: u32,
    gpu_memory_utilization: f64,
    max_num_batched_tokens: u32,
    precision: Precision,
) -> Result<MemoryPlan> {
    model.validate().map_err(|e| e.under("model"))?;
    gpu.validate().map_err(|e| e.under("gpu"))?;
    check::finite("scheduler.gpu_memory_utilization", gpu_memory_utilization)?;
    if gpu_memory_utilization <= 0.0 || gpu_memory_utilization > 1.0 {
        return Err(SimError::config(
            "scheduler.gpu_memory_utilization",
            format!("must be in (0, 1] (got {gpu_memory_utilization})"),
        ));
    }
    if max_num_batched_tokens < 1 {
        return Err(SimError::config(
            "scheduler.max_num_batched_tokens",
            "must be >= 1 (got 0)",
        ));
    }
    check_parallelism(model, tp, pp)?;

    let usable_bytes = gpu.hbm_gib * GIB * gpu_memory_utilization;
    let weights_bytes = model.params() * precision.weight_bytes / (f64::from(tp) * f64::from(pp));
    let activation = activation_bytes(model, tp, max_num_batched_tokens);
    let kv_bytes = usable_bytes - weights_bytes - activation;
    let per_token = kv_values_per_token_per_gpu(model, tp, pp) * precision.kv_bytes;
    let capacity = if kv_bytes > 0.0 {
        libm::floor(kv_bytes / per_token)
    } else {
        0.0
    };

    if kv_bytes <= 0.0 || capacity < 1.0 {
        return Err(SimError::Infeasible {
            message: format!(
                "{} needs {:.1} GiB per GPU for weights + {:.1} GiB activations but {} offers {:.1} GiB \
                 usable at gpu_memory_utilization {} (tp={tp}, pp={pp}), leaving no room for the KV \
                 cache: use more GPUs per replica (tp/pp) or a larger GPU",
                model.name,
                weights_bytes / GIB,
                activation / GIB,
                gpu.name,
                usable_bytes / GIB,
                gpu_memory_utilization,
            ),
        });
    }

    Ok(MemoryPlan {
        gpu_memory_gib: gpu.hbm_gib,
        usable_gib: usable_bytes / GIB,
        weights_gib: weights_bytes / GIB,
        activation_gib: activation / GIB,
        kv_gib: kv_bytes / GIB,
        kv_bytes_per_token: per_token,
        // `as` saturates for huge values; capacity is finite and >= 1 here.
        kv_capacity_tokens: capacity as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{resolve_gpu, resolve_model};

    fn model(name: &str) -> Model {
        resolve_model(&name.into()).unwrap()
    }
    fn gpu(name: &str) -> Gpu {
        resolve_gpu(&name.into()).unwrap()
    }

    #[test]
    fn llama8b_on_h100() {
        let p = plan_memory(&model("llama-3-8b"), &gpu("h100"), 1, 1, 0.9, 8192).unwrap();
        assert!((p.usable_gib - 72.0).abs() < 1e-9);
        // 8.03e9 params · 2 bytes = 14.96 GiB
        assert!((p.weights_gib - 14.96).abs() < 0.05, "{}", p.weights_gib);
        // 8192 · (4·4096 + 2·14336 + 2·4096) · 2 B = 0.8125 GiB, logits 256·128256·8 B = 0.245 GiB
        assert!(
            (p.activation_gib - (0.8125 + 0.2446 + 0.5)).abs() < 0.01,
            "{}",
            p.activation_gib
        );
        assert_eq!(p.kv_bytes_per_token, 131072.0); // 2·32·8·128·2
        let expect = (p.kv_gib * GIB / 131072.0).floor() as u64;
        assert_eq!(p.kv_capacity_tokens, expect);
        assert!(p.kv_capacity_tokens > 400_000 && p.kv_capacity_tokens < 500_000);
        assert!((p.usable_gib - p.weights_gib - p.activation_gib - p.kv_gib).abs() < 1e-9);
    }

    #[test]
    fn tp_splits_weights_and_kv() {
        let m = model("llama-3-70b");
        let p4 = plan_memory(&m, &gpu("h100"), 4, 1, 0.9, 8192).unwrap();
        assert!((p4.weights_gib - m.params() * 2.0 / 4.0 / GIB).abs() < 1e-9);
        assert_eq!(p4.kv_bytes_per_token, 2.0 * 80.0 * 2.0 * 128.0 * 2.0);
        // tp 16 > kv_heads 8: one KV head per GPU (replicated), not half of one
        let p16 = plan_memory(&m, &gpu("h100"), 16, 1, 0.9, 8192).unwrap();
        assert_eq!(p16.kv_bytes_per_token, 2.0 * 80.0 * 1.0 * 128.0 * 2.0);
        // pp 3 over 80 layers: largest stage has 27 layers
        let pp3 = plan_memory(&m, &gpu("h200"), 2, 3, 0.9, 8192).unwrap();
        assert_eq!(pp3.kv_bytes_per_token, 2.0 * 27.0 * 4.0 * 128.0 * 2.0);
    }

    #[test]
    fn too_big_is_infeasible() {
        let err = plan_memory(&model("llama-3-70b"), &gpu("h100"), 1, 1, 0.9, 8192).unwrap_err();
        // FP8 weights halve the weight bytes and an FP8 KV cache doubles the tokens held.
        let bf16 = plan_memory(&model("llama-3-8b"), &gpu("h100"), 1, 1, 0.9, 8192).unwrap();
        let fp8 = plan_memory_with(
            &model("llama-3-8b"),
            &gpu("h100"),
            1,
            1,
            0.9,
            8192,
            Precision { weight_bytes: 1.0, kv_bytes: 1.0 },
        )
        .unwrap();
        assert!((fp8.weights_gib * 2.0 - bf16.weights_gib).abs() < 1e-9);
        assert_eq!(fp8.kv_bytes_per_token * 2.0, bf16.kv_bytes_per_token);
        assert!(fp8.kv_capacity_tokens > 2 * bf16.kv_capacity_tokens);
        match &err {
            SimError::Infeasible { message } => {
                assert!(
                    message.contains("llama-3-70b needs 131.4 GiB per GPU"),
                    "{message}"
                );
                assert!(message.contains("h100 offers 72.0 GiB usable"), "{message}");
                assert!(message.contains("tp=1, pp=1"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        // 405B does not fit on one 8×H100 node in BF16 either
        assert!(matches!(
            plan_memory(&model("llama-3.1-405b"), &gpu("h100"), 8, 1, 0.9, 8192),
            Err(SimError::Infeasible { .. })
        ));
        assert!(plan_memory(&model("llama-3.1-405b"), &gpu("h200"), 8, 1, 0.95, 8192).is_ok());
    }

    #[test]
    fn config_errors() {
        let m = model("llama-3-8b");
        let g = gpu("h200");
        for (tp, pp, util, tokens, path) in [
            (0, 1, 0.9, 8192, "deployment.tp"),
            (3, 1, 0.9, 8192, "deployment.tp"),
            (1, 0, 0.9, 8192, "deployment.pp"),
            (1, 33, 0.9, 8192, "deployment.pp"),
            (1, 1, 0.0, 8192, "scheduler.gpu_memory_utilization"),
            (1, 1, 1.5, 8192, "scheduler.gpu_memory_utilization"),
            (1, 1, f64::NAN, 8192, "scheduler.gpu_memory_utilization"),
            (1, 1, 0.9, 0, "scheduler.max_num_batched_tokens"),
        ] {
            let err = plan_memory(&m, &g, tp, pp, util, tokens).unwrap_err();
            assert_eq!(err.path(), Some(path), "{err}");
        }
        // tp 16 on 32 heads / 8 kv heads is fine (multiple of kv_heads); tp 64 is not (heads)
        assert!(check_parallelism(&m, 16, 1).is_ok());
        assert_eq!(
            check_parallelism(&m, 64, 1).unwrap_err().path(),
            Some("deployment.tp")
        );
        let mut bad = m.clone();
        bad.heads = 0;
        assert_eq!(
            plan_memory(&bad, &g, 1, 1, 0.9, 1).unwrap_err().path(),
            Some("model.heads")
        );
    }

    #[test]
    fn monotone_in_inputs() {
        let m = model("llama-3-8b");
        let g = gpu("h200");
        let a = plan_memory(&m, &g, 1, 1, 0.8, 2048).unwrap();
        let b = plan_memory(&m, &g, 1, 1, 0.9, 2048).unwrap();
        let c = plan_memory(&m, &g, 1, 1, 0.9, 16384).unwrap();
        assert!(b.kv_capacity_tokens > a.kv_capacity_tokens);
        assert!(c.kv_capacity_tokens < b.kv_capacity_tokens);
        assert!(c.activation_gib > b.activation_gib);
    }
}
