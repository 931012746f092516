//! `trtllm`'s batch settings a scenario leaves out, resolved as `trtllm-bench throughput`
//! picks them for the workload it is given ([`crate::sched::trtllm::bench_settings`]): the
//! model's size and KV bytes, the GPUs' memory, the dataset's mean prompt and output and its
//! longest prompt. The workload is the scenario's own, generated.

use crate::catalog::{Gpu, Model};
use crate::config::Scenario;
use crate::perf::{CostModelSpec, Dtype};
use crate::policy::Policy;
use crate::sched::trtllm::{bench_settings, BenchInput};
use crate::workload::RequestSpec;

/// Whether `scenario` runs `trtllm` with a batch setting to resolve from its workload.
pub(super) fn needs_bench(scenario: &Scenario) -> bool {
    let s = &scenario.scheduler;
    s.policy == Policy::Trtllm && (s.max_batch_size.is_none() || s.max_num_tokens.is_none())
}

/// Fill the `max_batch_size` / `max_num_tokens` the scenario leaves out with what
/// `trtllm-bench` picks for `requests` on `model` and `gpu` at the deployment's TP × PP.
/// Weights' bytes: the cost model's precision (FP8 1, BF16 2; INT8/INT4 weight-only are not
/// tuned by `trtllm-bench`: its defaults); KV bytes: `kv_dtype`'s.
pub(super) fn resolve(scenario: &mut Scenario, model: &Model, gpu: &Gpu, requests: &[RequestSpec]) {
    if !needs_bench(scenario) {
        return;
    }
    let d = &scenario.deployment;
    let (tp, pp) = (d.tp.max(1), d.pp.max(1));
    let precision = scenario.cost_model.precision();
    let weight_bytes = match &scenario.cost_model {
        CostModelSpec::Calibrated(s) | CostModelSpec::Roofline(s) => match s.dtype {
            Dtype::Bf16 | Dtype::Fp8 => Some(s.dtype.weight_bytes()),
            Dtype::Int8 | Dtype::Int4 => None,
        },
        CostModelSpec::Linear { .. } => Some(precision.weight_bytes),
    };
    let n = requests.len().max(1) as f64;
    let avg = |f: fn(&RequestSpec) -> u32| requests.iter().map(|r| f64::from(f(r))).sum::<f64>() / n;
    let input = BenchInput {
        params: model.params(),
        weight_bytes,
        // over the TP group: each GPU's share (a KV head replicated where tp > kv_heads)
        kv_bytes_per_token: crate::memory::kv_values_per_token_per_gpu(model, tp, 1) * f64::from(tp) * precision.kv_bytes,
        gpu_gib: gpu.hbm_gib,
        tp,
        pp,
        avg_isl: avg(|r| r.prompt_tokens).max(1.0),
        avg_osl: avg(|r| r.output_tokens).max(1.0),
        max_isl: requests.iter().map(|r| r.prompt_tokens).max().unwrap_or(1),
        kv_fraction: scenario.scheduler.kv_fraction(),
    };
    let (bs, tokens) = bench_settings(&input);
    let s = &mut scenario.scheduler;
    s.max_batch_size.get_or_insert(bs);
    s.max_num_tokens.get_or_insert(tokens);
}

/// The `trtllm` settings a run used, for the result's `deployment.trtllm`.
pub(super) fn deployment_json(scenario: &Scenario) -> serde_json::Value {
    let s = &scenario.scheduler;
    let (p, _) = crate::sched::Params::for_policy(s);
    serde_json::json!({
        "capacity_scheduler_policy": s.capacity_scheduler_policy.unwrap_or_default(),
        "max_batch_size": p.max_num_seqs,
        "max_num_tokens": p.budget,
        "kv_cache_free_gpu_mem_fraction": s.kv_fraction(),
    })
}
