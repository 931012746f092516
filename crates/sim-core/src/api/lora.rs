//! `workload.lora` resolved for a run: the adapters' shapes on each pool's GPUs, the GPU
//! slots they take from the KV cache, the LoRA kernels in each pool's cost model, the
//! engine's slots and loads, and the result's `deployment.lora` and `summary.lora`.

use serde_json::{json, Value};

use crate::catalog::Model;
use crate::config::Scenario;
use crate::engine::LoraRun;
use crate::error::{Result, SimError};
use crate::memory::MemoryPlan;
use crate::perf::lora::LoraShapes;

/// The adapters' shapes at TP `tp`, or `None` without `workload.lora`. A MoE model's
/// experts carry no adapter here: targeting its MLP is an error naming the field.
pub(crate) fn shapes(scenario: &Scenario, model: &Model, tp: u32) -> Result<Option<LoraShapes>> {
    let Some(l) = &scenario.workload.lora else { return Ok(None) };
    if model.experts > 1 && ["gate_proj", "up_proj", "down_proj"].iter().any(|m| l.targets(m)) {
        return Err(SimError::config(
            "workload.lora.target_modules",
            format!(
                "adapters on {}'s experts are not modelled: target the attention projections (q_proj, k_proj, v_proj, o_proj)",
                model.name
            ),
        ));
    }
    Ok(Some(LoraShapes::new(model, tp, l.rank, |m| l.targets(m))))
}

/// vLLM allocates `max_loras` GPU slots of the adapters' rank up front: they come out of
/// the KV space.
pub(crate) fn charge(plan: &mut MemoryPlan, scenario: &Scenario, shapes: &LoraShapes) -> Result<()> {
    let slots = f64::from(scenario.scheduler.effective_max_loras());
    plan.charge(slots * shapes.bytes_per_gpu(), 0.0, "the LoRA slots (max_loras × one adapter)")
}

/// The engine's adapter slots over `replicas` replicas of `gpu`.
pub(crate) fn run(scenario: &Scenario, shapes: &LoraShapes, gpu: &crate::catalog::Gpu, replicas: usize) -> LoraRun {
    let s = &scenario.scheduler;
    let host = super::offload::host_link_gbps(gpu);
    LoraRun::new(replicas, s.effective_max_loras(), s.effective_max_cpu_loras(), shapes.bytes_per_gpu(), shapes.bytes_total(), host)
}

/// `deployment.lora`: adapters, rank, slots, and one adapter's size.
pub(crate) fn deployment_json(scenario: &Scenario, shapes: &LoraShapes) -> Value {
    let (l, s) = (scenario.workload.lora.as_ref(), &scenario.scheduler);
    json!({
        "adapters": l.map_or(0, |l| l.adapters),
        "rank": shapes.rank(),
        "max_loras": s.effective_max_loras(),
        "max_cpu_loras": s.effective_max_cpu_loras(),
        "adapter_mib": shapes.bytes_total() / (1u64 << 20) as f64,
        "adapter_mib_per_gpu": shapes.bytes_per_gpu() / (1u64 << 20) as f64,
    })
}

/// `summary.lora`: adapter loads into GPU slots (and from disk), the time steps waited for
/// them, and how often a waiting request was passed over for want of a slot.
pub(crate) fn summary(stats: &crate::engine::LoraStats, slot_waits: u64) -> Value {
    json!({
        "adapter_loads": stats.loads,
        "adapter_loads_from_disk": stats.disk_loads,
        "load_ms": stats.load_ns as f64 / 1e6,
        "stalled_steps": stats.stalled_steps,
        "slot_waits": slot_waits,
    })
}
