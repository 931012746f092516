//! Speculative decoding's drafter (`[scheduler.speculative]`), priced by the same step model
//! as the target.
//!
//! A speculative step runs as vLLM v1 runs it (`vllm/v1/spec_decode/`, `gpu_model_runner.py`):
//! the target's forward pass verifies each decoding sequence's `1 + k` tokens (its last
//! token and the `k` drafts proposed in the step before; [`super::BatchShape::spec_tokens`]),
//! the rejection sampler keeps the accepted prefix plus one token of the target's own, and
//! then the drafter proposes the next `k` drafts for every sequence that sampled:
//! * `eagle` / `eagle3` (EAGLE's proposer): one draft layer run `k` times. The first pass
//!   reads the hidden states of every token the target just processed (the whole step's
//!   tokens, prefill chunks included: the head keeps its own one-layer KV cache), the other
//!   `k − 1` passes one token per sequence. EAGLE-1 shares the target's `lm_head`; EAGLE-3
//!   has its own over a 32,000-token draft vocabulary (the published EAGLE-3 heads'
//!   `draft_vocab_size`) and fuses three of the target's layers (`3·hidden → hidden`).
//! * `mtp` (DeepSeek-V3's multi-token-prediction module, vLLM's `DeepSeekMTP`): the model's
//!   MTP layer — one transformer layer of the target's kind (MLA, MoE) with the full
//!   vocabulary's head — run the same way, `k` passes (vLLM reuses the one module when `k`
//!   exceeds the checkpoint's modules).
//! * `draft_model`: a second, smaller model (`draft_model`, at the target's TP), `k`
//!   autoregressive passes of its whole forward.
//! * `ngram` (prompt lookup): no GPU work; the proposer scans each sequence's tokens on the
//!   CPU ([`NGRAM_NS_PER_TOKEN`]).
//!
//! Every draft pass is a step of its own network priced by [`super::StepCostModel`] (its own GEMMs,
//! attention, launch or CUDA-graph replay), so the drafter's cost follows the GPU, the TP
//! degree and the batch like the target's does ([`super::Drafter`]: the drafter itself).

use serde::{Deserialize, Serialize};

use crate::catalog::Model;

/// A drafting method of `[scheduler.speculative]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpecMethod {
    /// EAGLE (Li et al., ICML 2024): a one-layer head over the target's hidden states.
    Eagle,
    /// EAGLE-3 (Li et al., 2025): the head fuses three target layers, its own draft vocabulary.
    Eagle3,
    /// The model's own multi-token-prediction module (DeepSeek-V3).
    Mtp,
    /// Prompt lookup: drafts copied from an earlier match of the last tokens.
    Ngram,
    /// A second, smaller model of the same tokenizer.
    DraftModel,
}

impl SpecMethod {
    /// Every method, in the order the docs list them.
    pub const ALL: [SpecMethod; 5] = [SpecMethod::Eagle, SpecMethod::Eagle3, SpecMethod::Mtp, SpecMethod::Ngram, SpecMethod::DraftModel];

    /// The method's name in a scenario.
    pub fn name(self) -> &'static str {
        match self {
            SpecMethod::Eagle => "eagle",
            SpecMethod::Eagle3 => "eagle3",
            SpecMethod::Mtp => "mtp",
            SpecMethod::Ngram => "ngram",
            SpecMethod::DraftModel => "draft_model",
        }
    }

    /// The drafter writes KV for its proposals in the target's block table (EAGLE and MTP
    /// heads): vLLM allocates `k` lookahead slots per decoding request for them.
    pub fn writes_kv(self) -> bool {
        matches!(self, SpecMethod::Eagle | SpecMethod::Eagle3 | SpecMethod::Mtp)
    }
}

/// EAGLE-3's draft vocabulary (`draft_vocab_size` of the published EAGLE-3 heads).
pub const EAGLE3_DRAFT_VOCAB: u32 = 32_000;

/// CPU time of the n-gram proposer per token of context it scans, s: vLLM's numba-compiled
/// KMP search over each request's tokens is linear in them. An estimate (about a
/// nanosecond per int32 token compared), not a measurement: at 64 sequences of 2,000 tokens
/// it adds 0.13 ms to a step.
pub const NGRAM_NS_PER_TOKEN: f64 = 1.0;

/// The network a method's drafter runs, as a [`Model`]: EAGLE's head and the MTP module as a
/// one-layer model of the target's widths, the draft model as itself. `None` for n-gram.
pub fn draft_network(method: SpecMethod, target: &Model, draft: Option<&Model>) -> Option<Model> {
    match method {
        SpecMethod::Ngram => None,
        SpecMethod::DraftModel => draft.cloned(),
        SpecMethod::Mtp => Some(Model {
            name: format!("{} (MTP module)", target.name),
            layers: 1,
            moe_layers: u32::from(target.moe_layers > 0),
            mtp_layers: 0,
            serve_mtp: false,
            ..target.clone()
        }),
        SpecMethod::Eagle | SpecMethod::Eagle3 => {
            // A Llama-style dense decoder layer of the target's widths (the published heads
            // for MoE targets are dense too); MLA targets get grouped-query attention with
            // one KV head per query head.
            let dense = if target.dense_intermediate > 0 { target.dense_intermediate } else { target.intermediate };
            let kv_heads = if target.mla.is_some() { target.heads } else { target.kv_heads };
            Some(Model {
                name: format!("{} ({} head)", target.name, method.name()),
                layers: 1,
                kv_heads,
                intermediate: dense,
                dense_intermediate: dense,
                experts: 1,
                experts_per_token: 1,
                moe_layers: 0,
                shared_expert_intermediate: 0,
                vocab: if method == SpecMethod::Eagle3 { target.vocab.min(EAGLE3_DRAFT_VOCAB) } else { target.vocab },
                local_attention: None,
                mla: None,
                attention_sinks: false,
                expert_format: None,
                mtp_layers: 0,
                serve_mtp: false,
                qk_norm_layers: 0,
                ..target.clone()
            })
        }
    }
}

/// Parameters the drafter adds to the served weights: EAGLE's layer and fusion projection
/// (EAGLE-3's own draft-vocabulary head too; EAGLE-1 shares the target's embedding and
/// head), the MTP modules ([`Model::mtp_params`]), or the whole draft model.
pub fn draft_params(method: SpecMethod, target: &Model, net: Option<&Model>) -> f64 {
    let hidden = f64::from(target.hidden);
    match (method, net) {
        (SpecMethod::Ngram, _) | (_, None) => 0.0,
        (SpecMethod::Mtp, _) => {
            let m = Model { serve_mtp: true, ..target.clone() };
            m.mtp_params()
        }
        (SpecMethod::DraftModel, Some(d)) => d.params(),
        (SpecMethod::Eagle, Some(h)) => h.params_per_dense_layer() + 2.0 * hidden * hidden,
        (SpecMethod::Eagle3, Some(h)) => h.params_per_dense_layer() + 3.0 * hidden * hidden + f64::from(h.vocab) * hidden,
    }
}
