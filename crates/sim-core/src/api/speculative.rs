//! `[scheduler.speculative]` resolved for a run: the draft network and its weights, the
//! memory it takes from the KV cache, the drafter attached to each pool's cost model, and
//! the result's `deployment.speculative` and `summary.speculative`.

use serde_json::{json, Value};

use crate::catalog::{resolve_model, Model};
use crate::config::{Scenario, SpecMethod, SpecPlan};
use crate::engine::SpecStats;
use crate::error::{Result, SimError};
use crate::memory::{kv_values_per_token_per_gpu, MemoryPlan};
use crate::perf::draft::{draft_network, draft_params};
use crate::perf::Drafter;

/// The scenario's speculation, resolved against its model.
pub(crate) struct Resolved {
    pub plan: SpecPlan,
    /// The network the drafter runs (none for n-gram).
    pub net: Option<Model>,
    /// Parameters the drafter adds to the served weights.
    pub params: f64,
}

/// `None` without `[scheduler.speculative]`. Errors name the field: MTP on a model without
/// an MTP module, a draft model that is not the target's tokenizer's (its vocabulary).
pub(crate) fn resolve(scenario: &Scenario, model: &Model) -> Result<Option<Resolved>> {
    let Some(sp) = &scenario.scheduler.speculative else { return Ok(None) };
    let plan = sp.plan()?;
    let draft = match &sp.draft_model {
        Some(input) => {
            let d = resolve_model(input).map_err(|e| match e {
                SimError::Config { path, message } => {
                    SimError::Config { path: format!("scheduler.speculative.draft_{path}"), message }
                }
                e => e,
            })?;
            if d.vocab != model.vocab {
                return Err(SimError::config(
                    "scheduler.speculative.draft_model",
                    format!(
                        "{} has a vocabulary of {} tokens, {} of {}: a draft model must share the target's tokenizer",
                        d.name, d.vocab, model.name, model.vocab
                    ),
                ));
            }
            Some(d)
        }
        None => None,
    };
    if plan.method == SpecMethod::Mtp && model.mtp_layers == 0 {
        return Err(SimError::config(
            "scheduler.speculative.method",
            format!("mtp runs the model's multi-token-prediction module; {} has none (DeepSeek-V3 and R1 have one)", model.name),
        ));
    }
    let net = draft_network(plan.method, model, draft.as_ref());
    let params = draft_params(plan.method, model, net.as_ref());
    Ok(Some(Resolved { plan, net, params }))
}

/// Take the drafter's weights (over the replica's TP group) and its KV (its layers' per
/// token, in the same blocks: vLLM allocates the draft layers' KV beside the target's) out
/// of one GPU's KV space. An infeasible plan names the drafter.
pub(crate) fn charge(plan: &mut MemoryPlan, r: &Resolved, tp: u32, weight_bytes: f64, kv_bytes: f64) -> Result<()> {
    let weights = r.params * weight_bytes / f64::from(tp.max(1));
    let net_kv = match (&r.net, r.plan.method) {
        (Some(net), m) if m != SpecMethod::Ngram => kv_values_per_token_per_gpu(net, tp, 1) * kv_bytes,
        _ => 0.0,
    };
    plan.charge(weights, net_kv, &format!("the {} drafter's weights", r.plan.method.name()))
}

/// The drafter of a pool on `gpu` at `tp`; `parallel` applies the pool's DP/EP layout to a
/// network (MTP's MoE layer takes the experts' layout, a dense head only the DP ranks).
pub(crate) fn drafter(
    r: &Resolved,
    scenario: &Scenario,
    gpu: &crate::catalog::Gpu,
    tp: u32,
    parallel: impl FnOnce(crate::perf::StepCostModel, &Model) -> Result<crate::perf::StepCostModel>,
) -> Result<Drafter> {
    Drafter::new(r.plan.method, r.plan.k, r.net.as_ref(), &scenario.cost_model, gpu, tp, parallel)
        .map_err(|e| e.under("scheduler.speculative"))
}

/// `deployment.speculative`: the method, k, the per-position acceptance it runs with, the
/// tokens a verifying sequence gains per step in expectation, the drafter's weights.
pub(crate) fn deployment_json(r: &Resolved) -> Value {
    json!({
        "method": r.plan.method.name(),
        "num_tokens": r.plan.k,
        "acceptance_per_position": r.plan.per_position,
        "expected_tokens_per_step": r.plan.tokens_per_step(),
        "draft_model": r.net.as_ref().map(|m| m.name.clone()),
        "draft_params": r.params,
    })
}

/// `summary.speculative`: verifies (decode entries with drafts), drafts proposed and
/// accepted, the acceptance rate, the tokens gained per verify, and the per-position
/// acceptance as vLLM reports it (accepted at position i over drafts reaching i).
pub(crate) fn summary(s: &SpecStats) -> Value {
    let rate = |a: u64, d: u64| if d == 0 { f64::NAN } else { a as f64 / d as f64 };
    json!({
        "verifies": s.verifies,
        "draft_tokens": s.drafts,
        "accepted_tokens": s.accepted,
        "acceptance_rate": rate(s.accepted, s.drafts),
        "mean_accepted_tokens": rate(s.accepted, s.verifies),
        "tokens_per_verify": rate(s.accepted + s.verifies, s.verifies),
        "acceptance_per_position": s.accepted_at.iter().zip(&s.drafted_at).map(|(&a, &d)| rate(a, d)).collect::<Vec<_>>(),
    })
}
