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
/// blocks are sized per request; the others' are `block_size`), then the drafter of
/// speculative decoding and the LoRA kernels, which leave the rest as it is. The part before
/// the drafter is kept for the process ([`Kept::get`]).
pub(super) fn cost_model(scenario: &Scenario, model: &crate::catalog::Model, gpu: &crate::catalog::Gpu, pool: &crate::config::PoolView) -> Result<StepCostModel> {
    let s = &scenario.scheduler;
    let (params, kv) = crate::sched::Params::for_policy(s);
    let perf = KEPT.get(CostInputs {
        spec: scenario.cost_model.clone(),
        model: model.clone(),
        gpu: gpu.clone(),
        tp: pool.tp,
        pp: pool.pp,
        external_comm: scenario.topology.is_some(),
        // the policy's seats: vLLM's max_num_seqs, TensorRT-LLM's max_batch_size
        max_num_seqs: params.max_num_seqs,
        ep: ep_spec(scenario, pool),
        kv,
        block_size: s.block_size,
    })?;
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
    Ok(match super::lora::shapes(scenario, model, pool.tp)? {
        None => perf,
        Some(shapes) => perf.with_lora(shapes),
    })
}

/// Everything a pool's cost model before its drafter and LoRA kernels is built from
/// ([`base_cost_model`] reads nothing else): equal inputs build equal models.
#[derive(Debug, Clone, PartialEq)]
struct CostInputs {
    spec: crate::perf::CostModelSpec,
    model: Model,
    gpu: Gpu,
    tp: u32,
    pp: u32,
    /// A topology prices the TP and PP communication.
    external_comm: bool,
    max_num_seqs: u32,
    ep: crate::perf::ep::EpSpec,
    kv: crate::kv::KvMode,
    block_size: u32,
}

fn base_cost_model(i: &CostInputs) -> Result<StepCostModel> {
    let perf = if i.external_comm {
        StepCostModel::new_external_comm(&i.spec, &i.model, &i.gpu, i.tp, i.pp)
    } else {
        StepCostModel::new(&i.spec, &i.model, &i.gpu, i.tp, i.pp)
    }
    .map_err(|e| e.under("cost_model"))?
    .with_max_num_seqs(i.max_num_seqs)
    .with_parallel(&i.ep, &i.model, &i.gpu, i.pp)?;
    Ok(match i.kv {
        crate::kv::KvMode::Contiguous => perf,
        crate::kv::KvMode::PagedPerRequest => perf.with_per_request_blocks(),
        crate::kv::KvMode::Paged => perf.with_block_size(i.block_size),
    })
}

/// Cost models built earlier, with their inputs, most recently used last ([`Kept::get`]).
struct Kept(std::sync::Mutex<Vec<(CostInputs, StepCostModel)>>);

/// The cost models this process keeps.
static KEPT: Kept = Kept(std::sync::Mutex::new(Vec::new()));

/// How many cost models the process keeps (each with the values it computed on first use:
/// tens of kB, up to ~0.7 MB at 4,096 seats).
const KEEP: usize = 8;

impl Kept {
    /// A clone of the model kept for inputs equal to `inputs`, else [`base_cost_model`]'s,
    /// kept (the least recently used one goes beyond [`KEEP`]). A clone shares the values
    /// the model computes on first use (its step grids), which every run that prices with
    /// it then fills once for all the others: a sweep of points on one model and GPU pays
    /// for them once. They are functions of the model's fields alone, so a run's results do
    /// not depend on which runs came before it.
    fn get(&self, inputs: CostInputs) -> Result<StepCostModel> {
        let lock = || self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        {
            let mut kept = lock();
            if let Some(at) = kept.iter().position(|(k, _)| *k == inputs) {
                let entry = kept.remove(at);
                let perf = entry.1.clone();
                kept.push(entry);
                return Ok(perf);
            }
        }
        // Built without the lock held (a build may fail; another thread may build the
        // same model meanwhile: then the one kept first is the one shared).
        let perf = base_cost_model(&inputs)?;
        let mut kept = lock();
        if let Some((_, p)) = kept.iter().find(|(k, _)| *k == inputs) {
            return Ok(p.clone());
        }
        if kept.len() >= KEEP {
            kept.remove(0);
        }
        kept.push((inputs, perf.clone()));
        Ok(perf)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{resolve_gpu, resolve_model};
    use crate::kv::KvMode;
    use crate::perf::{BatchShape, PrefillItem, StepMemo};

    fn inputs(model: &str) -> CostInputs {
        CostInputs {
            spec: crate::perf::CostModelSpec::default(),
            model: resolve_model(&model.into()).unwrap(),
            gpu: resolve_gpu(&"h100".into()).unwrap(),
            tp: 1,
            pp: 1,
            external_comm: false,
            max_num_seqs: 256,
            ep: crate::perf::ep::EpSpec {
                dp: 1,
                tp: 1,
                ep: 1,
                redundant_experts: 0,
                expert_load_cv: crate::perf::ep::DEFAULT_EXPERT_LOAD_CV,
                all_to_all: crate::perf::AllToAll::Auto,
                two_batch_overlap: false,
            },
            kv: KvMode::Paged,
            block_size: 16,
        }
    }

    /// A cost model asked for again with equal inputs is the kept one, sharing what it
    /// computed on first use; inputs that differ in any field the model is built from get
    /// a model of their own; beyond [`KEEP`] models the least recently used goes; and the
    /// kept model, warmed by earlier pricing, prices every step to the bit as a model built
    /// afresh does.
    #[test]
    fn kept_cost_models_are_shared_by_equal_inputs_only_and_price_as_fresh_ones() {
        let kept = Kept(std::sync::Mutex::new(Vec::new()));
        let base = inputs("llama-3-8b");
        let a = kept.get(base.clone()).unwrap();
        let item = [PrefillItem { new_tokens: 300, context_before: 40 }];
        let shape = |n: u64, ctx: u64, prefill: bool| BatchShape {
            prefill: if prefill { &item } else { &[] },
            prefill_tokens: if prefill { 300 } else { 0 },
            decode_seqs: n,
            decode_context_sum: ctx,
            context_sum_after: ctx,
            sampled: n + u64::from(prefill),
            decode_blocks_1024: 0,
            spec_tokens: 0,
            lora_adapters: 0,
        };
        let mut memo = StepMemo::default();
        let priced = |m: &StepCostModel, memo: &mut StepMemo| -> Vec<u64> {
            (1..200u64).flat_map(|n| [shape(n, n * 700, false), shape(n, n * 90, true)]).map(|b| m.step_ns_memo(&b, memo)).collect()
        };
        let warm = priced(&a, &mut memo);
        let b = kept.get(base.clone()).unwrap();
        assert!(a.shares_first_use_values(&b), "equal inputs share the kept model");
        let fresh = base_cost_model(&base).unwrap();
        assert!(!fresh.shares_first_use_values(&a));
        assert!(!a.clone().with_block_size(32).shares_first_use_values(&a), "a clone changed gets cells of its own");
        assert_eq!(priced(&b, &mut StepMemo::default()), warm, "the kept model, warm, prices as it did cold");
        assert_eq!(priced(&fresh, &mut StepMemo::default()), warm, "and as a model built afresh");
        let variants = [
            CostInputs { block_size: 32, ..base.clone() },
            CostInputs { kv: KvMode::Contiguous, ..base.clone() },
            CostInputs { max_num_seqs: 128, ..base.clone() },
            CostInputs { tp: 2, ..base.clone() },
            CostInputs { external_comm: true, ..base.clone() },
            CostInputs { gpu: resolve_gpu(&"h200".into()).unwrap(), ..base.clone() },
            inputs("qwen2.5-7b"),
        ];
        for v in &variants {
            let m = kept.get(v.clone()).unwrap();
            assert!(!m.shares_first_use_values(&a), "{v:?}");
            assert_eq!(priced(&m, &mut StepMemo::default()), priced(&base_cost_model(v).unwrap(), &mut StepMemo::default()), "{v:?}");
        }
        // 1 + 7 models kept, the base used last but for the variants: one more evicts it.
        assert_eq!(kept.0.lock().unwrap().len(), KEEP);
        kept.get(CostInputs { block_size: 64, ..base.clone() }).unwrap();
        assert!(!kept.get(base).unwrap().shares_first_use_values(&a), "the least recently used model went");
    }
}
