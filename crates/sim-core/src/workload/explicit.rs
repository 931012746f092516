//! One request of an explicit `requests` list, as written ([`ExplicitRequest`]);
//! [`super::assemble`] turns the list into a workload.

use serde::{Deserialize, Serialize};

use super::dist::IdValue;

/// One request of an explicit list (`requests[i]` in the section).
///
/// Shared tokens, for prefix caching: `prefix_group` + `prefix_length` (the first
/// `prefix_length` prompt tokens are the same in every request of the group, the rest
/// unique: BLIS's workload-spec convention), or `hash_ids` (Mooncake's: one id per
/// `hash_block_tokens` of prompt, equal ids at equal positions being equal content). A
/// session turn (`session_id`, `turn`) shares the whole conversation before it; its
/// `prompt_tokens` counts the whole prompt, earlier turns included (see [`super::assemble`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExplicitRequest {
    /// Arrival time in milliseconds since the start (finite, ≥ 0). Required, except on a
    /// session's later turns (which then wait only for the previous turn). The list need
    /// not be sorted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_ms: Option<f64>,
    /// Prompt length in tokens (≥ 1). Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u32>,
    /// Output length in tokens (≥ 1). Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u32>,
    /// Priority, lower = more urgent; 0 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Name of the group whose first `prefix_length` tokens this prompt starts with (a
    /// string or an integer; `3` and `"3"` are the same group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_group: Option<IdValue>,
    /// Tokens of the group's shared prefix (1..=prompt_tokens). Required with
    /// `prefix_group`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_length: Option<u32>,
    /// Block ids of the prompt, one per `hash_block_tokens` tokens (the last block may be
    /// partial): exactly ⌈prompt_tokens / hash_block_tokens⌉ non-negative integers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_ids: Option<Vec<u64>>,
    /// The conversation this request is a turn of (a string or an integer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<IdValue>,
    /// The turn's number in its session (turns are ordered by it; without it, by their
    /// order in the list). Give it on every turn of a session or on none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// Think time in milliseconds: the turn is sent this long after the previous turn
    /// finishes (and not before its `arrival_ms`, when given). Default 0; ignored on a
    /// session's first turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_ms: Option<f64>,
    /// Nesting depth of the prompt's template, 0..=65,535 (default 0); o1pro rejects a depth
    /// over 8 at arrival (seed §4.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_depth: Option<i64>,
    /// The LoRA adapter it is served through (0-based, below `workload.lora.adapters`);
    /// absent: drawn by the adapters' popularity. Only with `workload.lora`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora: Option<u32>,
}

impl ExplicitRequest {
    /// A request arriving at `arrival_ms` milliseconds with the given lengths in tokens and
    /// default priority.
    pub fn new(arrival_ms: f64, prompt_tokens: u32, output_tokens: u32) -> Self {
        ExplicitRequest {
            arrival_ms: Some(arrival_ms),
            prompt_tokens: Some(prompt_tokens),
            output_tokens: Some(output_tokens),
            ..Default::default()
        }
    }
}
