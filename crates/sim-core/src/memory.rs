//! Per-GPU memory plan of one replica: weights, an activation reserve, and what is left for
//! the KV cache (as vLLM sizes its cache after a profiling run).
//!
//! Sizes are in GiB (2³⁰ bytes) unless a name says bytes. Weights and KV cache are BF16
//! (2 bytes per value) unless a [`Precision`] says otherwise (FP8/INT8/INT4 weights, FP8 KV),
//! and a model's routed experts take the bytes of their own format where the checkpoint
//! sets one ([`Model::expert_format`]: MXFP4, FP8).
//!
//! A replica of `dp` data-parallel attention ranks of `tp × pp` GPUs each ([`Parallel`]):
//! every rank holds the weights that are not experts split over its `tp × pp` GPUs
//! (replicated across the ranks), the routed experts are split over the `ep` GPUs of a
//! stage when `ep > 1` (with `redundant_experts` extra slots, as vLLM's EPLB places them) and
//! over `tp` otherwise, and every rank holds its own KV cache: the replica's capacity is `dp`
//! ranks' worth.

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

impl MemoryPlan {
    /// Take `weights_bytes` more weights per GPU (a drafter, LoRA slots) out of the KV space,
    /// and let each token hold `kv_per_token_extra` more bytes of KV per GPU (a drafter's
    /// own layers, in the same blocks). An infeasible plan is an error naming `what`.
    pub fn charge(&mut self, weights_bytes: f64, kv_per_token_extra: f64, what: &str) -> Result<()> {
        let kv = self.kv_gib * GIB - weights_bytes;
        let per_token = self.kv_bytes_per_token + kv_per_token_extra;
        if kv <= per_token {
            return Err(SimError::Infeasible {
                message: format!(
                    "{what} take {:.2} GiB per GPU, leaving no room for the KV cache ({:.2} GiB was left)",
                    weights_bytes / GIB,
                    self.kv_gib
                ),
            });
        }
        self.weights_gib += weights_bytes / GIB;
        self.kv_gib = kv / GIB;
        self.kv_bytes_per_token = per_token;
        self.kv_capacity_tokens = libm::floor(kv / per_token) as u64;
        Ok(())
    }
}

/// Check the replica's parallelism against the model: `tp ≥ 1` divides `heads` and either
/// divides `kv_heads` or is a multiple of it (KV heads are then replicated; an MLA model has
/// no KV heads to split: every TP rank holds the whole latent); `1 ≤ pp ≤ layers`.
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
    if model.mla.is_none() && !divides(tp, model.kv_heads) && !divides(model.kv_heads, tp) {
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

/// [`check_parallelism`] for a whole [`Parallel`] layout, and its expert parallelism: `dp ≥ 1`;
/// `ep > 1` only on a mixture-of-experts model, at most its expert slots (`experts +
/// redundant_experts`), which it must divide (every EP rank holds as many). Errors at
/// `deployment.dp`, `deployment.ep` or `deployment.moe.redundant_experts` (the field that
/// makes the slots uneven, when there are redundant ones).
pub fn check_parallel(model: &Model, par: &Parallel) -> Result<()> {
    check_parallelism(model, par.tp, par.pp)?;
    if par.dp < 1 {
        return Err(SimError::config("deployment.dp", "must be >= 1 (got 0)"));
    }
    if par.ep < 1 {
        return Err(SimError::config("deployment.ep", "must be >= 1 (got 0)"));
    }
    if par.ep == 1 {
        return Ok(());
    }
    if model.experts <= 1 {
        return Err(SimError::config(
            "deployment.ep",
            format!("expert parallelism needs a mixture-of-experts model: {} is dense (set ep = 1) (got {})", model.name, par.ep),
        ));
    }
    let slots = u64::from(model.experts) + u64::from(par.redundant_experts);
    let (e, r) = (model.experts, par.redundant_experts);
    if u64::from(par.ep) > slots {
        return Err(SimError::config(
            "deployment.ep",
            format!("must be <= the expert slots of {} ({e} experts + {r} redundant = {slots}) (got {})", model.name, par.ep),
        ));
    }
    if slots % u64::from(par.ep) != 0 {
        let path = if r > 0 { "deployment.moe.redundant_experts" } else { "deployment.ep" };
        return Err(SimError::config(
            path,
            format!(
                "{} has {e} experts + {r} redundant = {slots} expert slots, which do not split evenly over ep = {} GPUs \
                 (each EP rank holds the same number): make experts + redundant_experts a multiple of ep",
                model.name, par.ep
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
/// head_dim` (multiply by the KV precision's bytes). With MLA the compressed latent and the
/// RoPE key, `(kv_lora_rank + qk_rope_head_dim)` per layer of the stage, whatever `tp`:
/// vLLM's MLA backends keep the whole latent on every TP rank (its KV spec has one KV head,
/// `MLAAttentionSpec`), as the DeepSeek-V2 paper's cache of `d_c + d_h^R` per token (§2.1.2)
/// is shared by all heads. Served MTP modules add their layers (to the last stage's).
pub fn kv_values_per_token_per_gpu(model: &Model, tp: u32, pp: u32) -> f64 {
    match &model.mla {
        Some(mla) => {
            let mtp = if model.serve_mtp { model.mtp_layers } else { 0 };
            let layers = model.layers.saturating_add(mtp).div_ceil(pp.max(1));
            f64::from(layers) * f64::from(mla.cached_values())
        }
        None => 2.0 * f64::from(layers_per_stage(model, pp)) * f64::from(kv_heads_per_gpu(model, tp)) * f64::from(model.head_dim),
    }
}

/// Weight bytes on one GPU of a replica laid out as `par`: the weights that are not routed
/// experts over the `tp · pp` GPUs of a DP rank (replicated across the ranks); the routed
/// experts ([`Model::expert_params`], at [`Model::expert_format`]'s bytes where the model
/// sets one, else the precision's) over the `ep · pp` GPUs of the replica with their
/// `(experts + redundant_experts) / experts` slots when `ep > 1`, else over the `dp · tp · pp`
/// GPUs of the replica (vLLM without `--enable-expert-parallel`: the expert layers form one
/// TP group of `dp × tp` GPUs; `dp = 1` is plain TP). Without EP, DP or an expert format:
/// `params · bytes / (tp · pp)`.
pub fn weight_bytes_per_gpu(model: &Model, par: &Parallel, precision: Precision) -> f64 {
    let (tp, pp) = (f64::from(par.tp), f64::from(par.pp));
    let flat_dp = if model.experts > 1 { f64::from(par.dp.max(1)) } else { 1.0 };
    if par.ep <= 1 && model.expert_format.is_none() && flat_dp == 1.0 {
        return model.params() * precision.weight_bytes / (tp * pp);
    }
    let experts = model.expert_params();
    let expert_bytes = model.expert_format.map_or(precision.weight_bytes, |f| f.bytes());
    let rest = (model.params() - experts) * precision.weight_bytes / (tp * pp);
    let routed = if par.ep > 1 {
        let slots = f64::from(model.experts) + f64::from(par.redundant_experts);
        experts * expert_bytes * slots / f64::from(model.experts) / (f64::from(par.ep) * pp)
    } else {
        experts * expert_bytes / (flat_dp * tp * pp)
    };
    rest + routed
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
    plan_memory_par(model, gpu, &Parallel::tp_pp(tp, pp), gpu_memory_utilization, max_num_batched_tokens, precision)
}

/// [`plan_memory_with`] for a replica of `par.dp` data-parallel attention ranks with expert
/// parallelism `par.ep` (see the [module docs](self)): weights per GPU by
/// [`weight_bytes_per_gpu`], the activation reserve of one DP rank's step on each of its
/// GPUs, the KV cache in what remains, and `kv_capacity_tokens` the replica's: `dp` times
/// one rank's (each rank caches its own requests). For `dp = ep = 1` the plan is
/// [`plan_memory_with`]'s. Errors as [`plan_memory`]'s, and bad `deployment.dp` /
/// `deployment.ep` / `deployment.moe.redundant_experts` ([`check_parallel`]).
pub fn plan_memory_par(
    model: &Model,
    gpu: &Gpu,
    par: &Parallel,
    gpu_memory_utilization: f64,
    max_num_batched_tokens: u32,
    precision: Precision,
) -> Result<MemoryPlan> {
    let (tp, pp) = (par.tp, par.pp);
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
    check_parallel(model, par)?;

    let usable_bytes = gpu.hbm_gib * GIB * gpu_memory_utilization;
    let weights_bytes = weight_bytes_per_gpu(model, par, precision);
    let activation = activation_bytes(model, tp, max_num_batched_tokens);
    let kv_bytes = usable_bytes - weights_bytes - activation;
    let per_token = kv_values_per_token_per_gpu(model, tp, pp) * precision.kv_bytes;
    let capacity = if kv_bytes > 0.0 {
        libm::floor(kv_bytes / per_token)
    } else {
        0.0
    };

    if kv_bytes <= 0.0 || capacity < 1.0 {
        let layout = if par.dp > 1 || par.ep > 1 { format!(", dp={}, ep={}", par.dp, par.ep) } else { String::new() };
        let more = if par.ep > 1 { "more GPUs per replica (tp/pp, or ep over more ranks)" } else { "more GPUs per replica (tp/pp)" };
        return Err(SimError::Infeasible {
            message: format!(
                "{} needs {:.1} GiB per GPU for weights + {:.1} GiB activations but {} offers {:.1} GiB \
                 usable at gpu_memory_utilization {} (tp={tp}, pp={pp}{layout}), leaving no room for the KV \
                 cache: use {more} or a larger GPU",
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
        // `as` saturates for huge values; capacity is finite and >= 1 here. Each DP rank
        // caches its own requests.
        kv_capacity_tokens: (capacity as u64).saturating_mul(u64::from(par.dp)),
    })
}

/// What TensorRT-LLM's `KvCacheCreator` sizes a KV cache from ([`plan_memory_free_fraction`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FreeFraction {
    /// `kv_cache_free_gpu_mem_fraction`, in (0, 1].
    pub fraction: f64,
    /// The profiling run's tokens (`max_num_tokens`).
    pub max_num_tokens: u32,
    /// The embedding table and `lm_head` stay BF16 whatever the precision of the rest.
    pub bf16_embeddings: bool,
    /// The engine's own memory beyond the weights and the estimated activations, bytes.
    pub runtime_bytes: f64,
}

/// A replica's memory as TensorRT-LLM's PyTorch backend sizes its KV cache (`KvCacheCreator`
/// in `tensorrt_llm/_torch/pyexecutor/_util.py`): after loading the weights it runs a
/// forward pass of `how.max_num_tokens` tokens and takes `how.fraction`
/// (`kv_cache_free_gpu_mem_fraction`) of what the GPU has left below that run's peak:
/// `kv = fraction · (hbm − weights − activation peak − runtime)`, the activation peak
/// estimated as for vLLM's profiling run ([`activation_bytes`]) and `how.runtime_bytes` the
/// engine's own memory beyond it (CUDA context, libraries' workspaces). `usable_gib` is then
/// the whole memory (the fraction applies to what is free, not to the total).
/// `how.bf16_embeddings`: the embedding table and `lm_head` stay BF16 (a ModelOpt FP8
/// checkpoint). Errors as [`plan_memory_par`]'s, with
/// `scheduler.kv_cache_free_gpu_mem_fraction` and `scheduler.max_num_tokens` the fields.
pub fn plan_memory_free_fraction(model: &Model, gpu: &Gpu, par: &Parallel, how: &FreeFraction, precision: Precision) -> Result<MemoryPlan> {
    let FreeFraction { fraction, max_num_tokens, bf16_embeddings, runtime_bytes } = *how;
    model.validate().map_err(|e| e.under("model"))?;
    gpu.validate().map_err(|e| e.under("gpu"))?;
    check::finite("scheduler.kv_cache_free_gpu_mem_fraction", fraction)?;
    if !(fraction > 0.0 && fraction <= 1.0) {
        return Err(SimError::config("scheduler.kv_cache_free_gpu_mem_fraction", format!("must be in (0, 1] (got {fraction})")));
    }
    if max_num_tokens < 1 {
        return Err(SimError::config("scheduler.max_num_tokens", "must be >= 1 (got 0)"));
    }
    check_parallel(model, par)?;
    let total = gpu.hbm_gib * GIB;
    let embeddings = f64::from(model.vocab) * f64::from(model.hidden) * if model.tied_embeddings { 1.0 } else { 2.0 };
    let unquantized = if bf16_embeddings { embeddings * (WEIGHT_BYTES - precision.weight_bytes).max(0.0) } else { 0.0 };
    let weights_bytes = weight_bytes_per_gpu(model, par, precision) + unquantized / f64::from(par.tp.max(1) * par.pp.max(1));
    let activation = activation_bytes(model, par.tp, max_num_tokens) + runtime_bytes.max(0.0);
    let free = total - weights_bytes - activation;
    let kv_bytes = free * fraction;
    let per_token = kv_values_per_token_per_gpu(model, par.tp, par.pp) * precision.kv_bytes;
    let capacity = if kv_bytes > 0.0 { libm::floor(kv_bytes / per_token) } else { 0.0 };
    if kv_bytes <= 0.0 || capacity < 1.0 {
        return Err(SimError::Infeasible {
            message: format!(
                "{} needs {:.1} GiB per GPU for weights + {:.1} GiB activations but {} has {:.1} GiB (tp={}, pp={}), \
                 leaving no room for the KV cache: use more GPUs per replica (tp/pp) or a larger GPU",
                model.name,
                weights_bytes / GIB,
                activation / GIB,
                gpu.name,
                gpu.hbm_gib,
                par.tp,
                par.pp,
            ),
        });
    }
    Ok(MemoryPlan {
        gpu_memory_gib: gpu.hbm_gib,
        usable_gib: gpu.hbm_gib,
        weights_gib: weights_bytes / GIB,
        activation_gib: activation / GIB,
        kv_gib: kv_bytes / GIB,
        kv_bytes_per_token: per_token,
        kv_capacity_tokens: (capacity as u64).saturating_mul(u64::from(par.dp)),
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

    const FP8: Precision = Precision { weight_bytes: 1.0, kv_bytes: 2.0 };

    fn par(tp: u32, dp: u32, ep: u32, redundant_experts: u32) -> Parallel {
        Parallel { tp, pp: 1, dp, ep, redundant_experts }
    }

    #[test]
    fn deepseek_v3_with_expert_parallelism_and_dp_attention() {
        let m = model("deepseek-v3");
        let h200 = gpu("h200");
        // 16 H200, DP attention 16 × TP 1, EP 16, FP8: every GPU holds the non-expert weights
        // and 1/16 of the experts, and room for KV.
        let p = plan_memory_par(&m, &h200, &par(1, 16, 16, 0), 0.9, 8192, FP8).unwrap();
        let experts = m.expert_params();
        let expect = (m.params() - experts) * 1.0 + experts * 1.0 / 16.0;
        assert!((p.weights_gib * GIB - expect).abs() < 1.0, "{} vs {expect}", p.weights_gib * GIB);
        assert!(p.weights_gib > 50.0 && p.weights_gib < 60.0, "{}", p.weights_gib);
        assert!(p.kv_gib > 50.0, "{}", p.kv_gib);
        // The latent, whatever the TP: 61 layers × 576 values × 2 bytes.
        assert_eq!(p.kv_bytes_per_token, 70_272.0);
        // Each of the 16 ranks caches its own tokens.
        let one = (p.kv_gib * GIB / 70_272.0).floor() as u64;
        assert_eq!(p.kv_capacity_tokens, 16 * one);
        // 32 redundant experts (288 slots over 16 GPUs, 18 each) cost 32/256 of the experts more.
        let r = plan_memory_par(&m, &h200, &par(1, 16, 16, 32), 0.9, 8192, FP8).unwrap();
        assert!(((r.weights_gib - p.weights_gib) * GIB - experts / 16.0 * 32.0 / 256.0).abs() < 1.0);
        // One 8 × H200 node, TP 8, FP8: fits; the latent is not split over TP.
        let t8 = plan_memory_par(&m, &h200, &par(8, 1, 1, 0), 0.9, 8192, FP8).unwrap();
        assert!(t8.weights_gib > 75.0 && t8.weights_gib < 80.0 && t8.kv_gib > 30.0, "{t8:?}");
        assert_eq!(t8.kv_bytes_per_token, 70_272.0);
        assert_eq!(t8.kv_capacity_tokens, (t8.kv_gib * GIB / 70_272.0).floor() as u64);
        // BF16 on one 8 × H100 node does not fit (the checkpoint's FP8 experts alone are 80 GiB
        // per GPU); nor with the experts in BF16 too.
        let h100 = gpu("h100");
        let bf16 = plan_memory_par(&m, &h100, &par(8, 1, 1, 0), 0.9, 8192, Precision::default()).unwrap_err();
        assert!(matches!(&bf16, SimError::Infeasible { message } if message.contains("deepseek-v3 needs") && message.contains("tp=8, pp=1)")), "{bf16}");
        let all_bf16 = Model { expert_format: Some(crate::catalog::WeightFormat::Bf16), ..m.clone() };
        assert!(matches!(plan_memory(&all_bf16, &h100, 8, 1, 0.9, 8192), Err(SimError::Infeasible { .. })));
        let ep = plan_memory_par(&m, &h100, &par(1, 8, 8, 0), 0.9, 8192, Precision::default()).unwrap_err();
        assert!(matches!(&ep, SimError::Infeasible { message } if message.contains("dp=8, ep=8")), "{ep}");
        // MLA's KV bytes per token at BF16 and FP8, per GPU, at any TP.
        for tp in [1, 2, 4, 8, 16] {
            let p = plan_memory_par(&m, &h200, &par(tp, 1, 1, 0), 0.95, 2048, Precision { weight_bytes: 1.0, kv_bytes: 1.0 });
            if let Ok(p) = p {
                assert_eq!(p.kv_bytes_per_token, 35_136.0, "tp {tp}");
            }
        }
        assert_eq!(m.kv_bytes_per_token(2.0), 70_272.0);
        // Serving the MTP module adds its weights and its layer's latent.
        let mtp = Model { serve_mtp: true, ..m.clone() };
        let with = plan_memory_par(&mtp, &h200, &par(8, 1, 1, 0), 0.9, 8192, FP8).unwrap();
        assert_eq!(with.kv_bytes_per_token, 62.0 * 576.0 * 2.0);
        assert!(with.weights_gib > t8.weights_gib);
    }

    #[test]
    fn mxfp4_experts_put_gpt_oss_120b_on_one_80_gb_gpu() {
        // The gpt-oss model card: the 120b "runs within 80GB of memory" thanks to its MXFP4
        // MoE weights; in BF16 it would need 218 GiB.
        let m = model("gpt-oss-120b");
        let p = plan_memory(&m, &gpu("h100"), 1, 1, 0.9, 8192).unwrap();
        let experts = m.expert_params();
        let expect = (m.params() - experts) * 2.0 + experts * 4.25 / 8.0;
        assert!((p.weights_gib * GIB - expect).abs() < 1.0);
        assert!(p.weights_gib > 60.0 && p.weights_gib < 66.0, "{}", p.weights_gib);
        let bf16 = Model { expert_format: None, ..m.clone() };
        assert!(matches!(plan_memory(&bf16, &gpu("h100"), 1, 1, 0.9, 8192), Err(SimError::Infeasible { .. })));
    }

    #[test]
    fn one_rank_layouts_are_the_tp_pp_plan_to_the_bit() {
        // dp = ep = 1 is plan_memory's plan exactly, for dense, MoE and MLA models alike.
        for (name, tp, pp) in [("llama-3-8b", 1, 1), ("llama-3-70b", 4, 2), ("mixtral-8x7b", 2, 1), ("qwen3-30b-a3b", 1, 1), ("deepseek-v3", 8, 2)] {
            let (m, g) = (model(name), gpu("h200"));
            for precision in [Precision::default(), FP8] {
                let a = plan_memory_with(&m, &g, tp, pp, 0.9, 4096, precision);
                let b = plan_memory_par(&m, &g, &Parallel::tp_pp(tp, pp), 0.9, 4096, precision);
                assert_eq!(format!("{a:?}"), format!("{b:?}"), "{name}");
            }
        }
        // DP alone on a dense model replicates the weights and multiplies the cache by dp.
        let (d, g) = (model("llama-3-70b"), gpu("h200"));
        let one = plan_memory(&d, &g, 2, 1, 0.9, 4096).unwrap();
        let four = plan_memory_par(&d, &g, &par(2, 4, 1, 0), 0.9, 4096, Precision::default()).unwrap();
        assert_eq!((four.weights_gib, four.kv_gib, four.kv_bytes_per_token), (one.weights_gib, one.kv_gib, one.kv_bytes_per_token));
        assert_eq!(four.kv_capacity_tokens, 4 * one.kv_capacity_tokens);
        // On a MoE model DP without EP shards the experts over all dp × tp GPUs (vLLM's expert
        // TP group); EP over the same 8 GPUs puts one whole expert on each instead of an
        // eighth of each of the 8 — the same bytes for this even split.
        let m = model("mixtral-8x7b");
        let one = plan_memory(&m, &g, 2, 1, 0.9, 4096).unwrap();
        let flat = plan_memory_par(&m, &g, &par(2, 4, 1, 0), 0.9, 4096, Precision::default()).unwrap();
        let ep = plan_memory_par(&m, &g, &par(2, 4, 8, 0), 0.9, 4096, Precision::default()).unwrap();
        let experts = m.expert_params() * 2.0;
        let expect = (m.params() * 2.0 - experts) / 2.0 + experts / 8.0;
        assert!((ep.weights_gib * GIB - expect).abs() < 1.0);
        assert!((flat.weights_gib * GIB - expect).abs() < 1.0);
        assert!(ep.weights_gib < one.weights_gib);
    }

    #[test]
    fn expert_parallelism_errors_name_the_field() {
        let v3 = model("deepseek-v3");
        let err = |m: &Model, p: Parallel| check_parallel(m, &p).unwrap_err();
        // A dense model has no experts to spread.
        let e = err(&model("llama-3-70b"), par(4, 2, 8, 0));
        assert_eq!(e.path(), Some("deployment.ep"));
        assert!(e.to_string().contains("dense"), "{e}");
        // 256 experts over 24 GPUs: uneven; with 32 redundant (288 slots) they split, with
        // 16 (272) they do not: the redundant count is named.
        let e = err(&v3, par(8, 3, 24, 0));
        assert_eq!(e.path(), Some("deployment.ep"));
        assert!(e.to_string().contains("256 experts + 0 redundant = 256 expert slots"), "{e}");
        assert!(check_parallel(&v3, &par(8, 3, 24, 32)).is_ok());
        let e = err(&v3, par(8, 3, 24, 16));
        assert_eq!(e.path(), Some("deployment.moe.redundant_experts"));
        assert!(e.to_string().contains("272 expert slots") && e.to_string().contains("ep = 24"), "{e}");
        // More EP ranks than expert slots.
        let e = err(&model("mixtral-8x7b"), par(4, 4, 16, 0));
        assert_eq!(e.path(), Some("deployment.ep"));
        assert!(e.to_string().contains("8 experts + 0 redundant = 8"), "{e}");
        assert_eq!(err(&v3, par(8, 0, 1, 0)).path(), Some("deployment.dp"));
        // Through the plan too, before any sizing.
        let g = gpu("h200");
        let e = plan_memory_par(&v3, &g, &par(8, 3, 24, 16), 0.9, 8192, FP8).unwrap_err();
        assert_eq!(e.path(), Some("deployment.moe.redundant_experts"));
        // MLA: TP need not divide the KV heads (there are none to split).
        let mla = Model { heads: 24, kv_heads: 3, ..model("deepseek-v3") };
        assert!(check_parallelism(&mla, 2, 1).is_ok());
        let gqa = Model { mla: None, head_dim: 128, ..mla.clone() };
        assert_eq!(check_parallelism(&gqa, 2, 1).unwrap_err().path(), Some("deployment.tp"));
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
