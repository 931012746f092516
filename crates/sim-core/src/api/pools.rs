//! The deployment's pools resolved ([`crate::config::Deployment::pool_views`]): each pool's
//! GPU, memory plan, KV blocks per replica and cost model — a pool of L40S replicas beside a
//! pool of H200 replicas is priced with each GPU's own tables or roofline.

use crate::catalog::{resolve_gpu, Gpu, Model};
use crate::config::{PoolRole, Scenario};
use crate::error::{Result, SimError};
use crate::memory::{plan_memory_free_fraction, plan_memory_par, MemoryPlan, Parallel};
use crate::perf::StepCostModel;

/// One pool, resolved.
pub(crate) struct BuiltPool {
    pub name: String,
    pub role: PoolRole,
    pub gpu: Gpu,
    pub plan: MemoryPlan,
    /// KV blocks of one replica.
    pub blocks: u32,
    pub perf: StepCostModel,
    pub replicas: u32,
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    pub ep: u32,
}

impl BuiltPool {
    /// GPUs of one replica.
    pub fn gpus_per_replica(&self) -> u32 {
        self.dp * self.tp * self.pp
    }

    /// The pool in a result's `deployment.pools`.
    pub fn json(&self, block_size: u32) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "role": self.role,
            "gpu": self.gpu.name,
            "replicas": self.replicas,
            "tp": self.tp,
            "pp": self.pp,
            "dp": self.dp,
            "ep": self.ep,
            "gpus": self.gpus_per_replica() * self.replicas,
            "num_gpu_blocks": self.blocks,
            "kv_capacity_tokens": u64::from(self.blocks) * u64::from(block_size),
            "memory": self.plan,
        })
    }
}

/// Every pool of `scenario` in replica order, on `base_gpu` unless a pool names its own.
/// Errors name the pool's field (`deployment.pools[1].gpu`), and an infeasible memory plan
/// names the pool.
pub(crate) fn build_pools(scenario: &Scenario, model: &Model, base_gpu: &Gpu) -> Result<Vec<BuiltPool>> {
    let s = &scenario.scheduler;
    let listed = !scenario.deployment.pools.is_empty();
    let spec = super::speculative::resolve(scenario, model)?;
    let mut out = Vec::new();
    for v in scenario.deployment.pool_views(s.policy.disaggregated()) {
        let gpu = match v.gpu {
            Some(g) => resolve_gpu(g).map_err(|e| e.under(&v.path))?,
            None => base_gpu.clone(),
        };
        // A listed pool's errors name its fields: `deployment.tp` is `deployment.pools[i].tp`,
        // its own GPU's `gpu.x` is `deployment.pools[i].gpu.x`; an infeasible plan names it.
        let own_gpu = v.gpu.is_some();
        let named = |e: SimError| match e {
            _ if !listed => e,
            SimError::Infeasible { message } => SimError::Infeasible { message: format!("pool {:?}: {message}", v.name) },
            SimError::Config { path, message } => {
                let path = match path.strip_prefix("deployment.") {
                    Some(rest) => format!("{}.{rest}", v.path),
                    None if own_gpu && (path == "gpu" || path.starts_with("gpu.")) => format!("{}.{path}", v.path),
                    None => path,
                };
                SimError::Config { path, message }
            }
            e => e,
        };
        let par = Parallel { tp: v.tp, pp: v.pp, dp: v.dp, ep: v.ep, redundant_experts: scenario.deployment.moe.redundant_experts };
        let precision = scenario.cost_model.precision();
        let mut plan = if s.policy == crate::policy::Policy::Trtllm {
            // TensorRT-LLM's KvCacheCreator: a fraction of what its profiling run leaves
            let tokens = s.max_num_tokens.unwrap_or(crate::config::TRTLLM_DEFAULT_MAX_NUM_TOKENS);
            let how = crate::memory::FreeFraction {
                fraction: s.kv_fraction(),
                max_num_tokens: tokens,
                // ModelOpt's quantised checkpoints keep the embedding and lm_head in BF16
                bf16_embeddings: precision.weight_bytes < crate::memory::WEIGHT_BYTES,
                runtime_bytes: crate::sched::trtllm::RUNTIME_GIB * crate::memory::GIB,
            };
            plan_memory_free_fraction(model, &gpu, &par, &how, precision)
        } else {
            plan_memory_par(model, &gpu, &par, s.gpu_memory_utilization, s.max_num_batched_tokens, precision)
        }
        .map_err(named)?;
        if let Some(r) = &spec {
            super::speculative::charge(&mut plan, r, v.tp, precision.weight_bytes, precision.kv_bytes).map_err(named)?;
        }
        if let Some(shapes) = super::lora::shapes(scenario, model, v.tp)? {
            super::lora::charge(&mut plan, scenario, &shapes).map_err(named)?;
        }
        let blocks = match s.num_gpu_blocks {
            Some(n) => n,
            None => plan.kv_capacity_tokens / u64::from(s.block_size),
        };
        if blocks == 0 {
            return Err(named(SimError::Infeasible {
                message: format!(
                    "{} on {} leaves no room for a single KV block of {} tokens (kv {:.2} GiB per GPU)",
                    model.name, gpu.name, s.block_size, plan.kv_gib
                ),
            }));
        }
        let perf = cost_model(scenario, model, &gpu, &v).map_err(named)?;
        out.push(BuiltPool {
            name: v.name,
            role: v.role,
            gpu,
            plan,
            blocks: u32::try_from(blocks).unwrap_or(u32::MAX),
            perf,
            replicas: v.replicas,
            tp: v.tp,
            pp: v.pp,
            dp: v.dp,
            ep: v.ep,
        });
    }
    Ok(out)
}

/// The execution-time model of a scenario's replicas: the cost model priced for its model,
/// GPU and parallelism, communication left to the topology when there is one, and the
/// block-table remap of its KV manager (Orca's contiguous reservation has none; o1pro's
/// blocks are sized per request; the others' are `block_size`).
pub(super) fn cost_model(scenario: &Scenario, model: &crate::catalog::Model, gpu: &crate::catalog::Gpu, pool: &crate::config::PoolView) -> Result<StepCostModel> {
    let s = &scenario.scheduler;
    let perf = if scenario.topology.is_some() {
        StepCostModel::new_external_comm(&scenario.cost_model, model, gpu, pool.tp, pool.pp)
    } else {
        StepCostModel::new(&scenario.cost_model, model, gpu, pool.tp, pool.pp)
    }
    .map_err(|e| e.under("cost_model"))?
    // the policy's seats: vLLM's max_num_seqs, TensorRT-LLM's max_batch_size
    .with_max_num_seqs(crate::sched::Params::for_policy(s).0.max_num_seqs)
    .with_parallel(&ep_spec(scenario, pool), model, gpu, pool.pp)?;
    let perf = match super::speculative::resolve(scenario, model)? {
        None => perf,
        Some(r) => {
            // The drafter's network takes the pool's DP ranks; only an MoE network (MTP's
            // layer) spreads experts.
            let drafter = super::speculative::drafter(&r, scenario, gpu, pool.tp, |m, net| {
                let mut ep = ep_spec(scenario, pool);
                if net.experts <= 1 {
                    ep.ep = 1;
                    ep.redundant_experts = 0;
                }
                Ok(m.with_max_num_seqs(s.max_num_seqs).with_parallel(&ep, net, gpu, 1)?.with_block_size(s.block_size))
            })?;
            perf.with_drafter(drafter)
        }
    };
    let perf = match super::lora::shapes(scenario, model, pool.tp)? {
        None => perf,
        Some(shapes) => perf.with_lora(shapes),
    };
    Ok(match crate::sched::Params::for_policy(s).1 {
        crate::kv::KvMode::Contiguous => perf,
        crate::kv::KvMode::PagedPerRequest => perf.with_per_request_blocks(),
        crate::kv::KvMode::Paged => perf.with_block_size(s.block_size),
    })
}

/// A pool's DP/EP layout for the cost model (the expert options are the deployment's).
fn ep_spec(scenario: &Scenario, pool: &crate::config::PoolView) -> crate::perf::ep::EpSpec {
    let moe = &scenario.deployment.moe;
    crate::perf::ep::EpSpec {
        dp: pool.dp,
        tp: pool.tp,
        ep: pool.ep,
        redundant_experts: moe.redundant_experts,
        expert_load_cv: moe.expert_load_cv.unwrap_or(crate::perf::ep::DEFAULT_EXPERT_LOAD_CV),
        all_to_all: moe.all_to_all,
        two_batch_overlap: moe.two_batch_overlap,
    }
}
