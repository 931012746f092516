//! `[scheduler.speculative]`: speculative decoding as vLLM v1 runs it (the scheduler's side in
//! [`crate::sched`], the drafter's price in [`crate::perf::draft`], acceptance in
//! [`crate::engine`]'s step completion).
//!
//! `speculative = { method = "eagle3", num_tokens = 3, acceptance_rate = 0.7 }`: each
//! decoding request verifies `num_tokens` (k) drafts with its next token every step; draft
//! `i` is accepted, given that the ones before it were, with probability `acceptance_rate`.
//! The full form lists the per-position acceptance as vLLM's metrics report it
//! (`vllm:spec_decode_num_accepted_tokens_per_pos` over the drafts: the share of drafts whose
//! position `i` was accepted, non-increasing), e.g. `acceptance_rate = [0.8, 0.6, 0.45]`.
//! The accepted prefix is drawn per request and position from the run's seed, so a
//! request's tokens do not depend on the batch it ran in and results stay byte-identical.

use serde::{Deserialize, Serialize};

use crate::catalog::ModelInput;
use crate::error::{check, Result, SimError};
pub use crate::perf::draft::SpecMethod;

/// Most drafts a step verifies per request.
pub const MAX_SPEC_TOKENS: u32 = 16;

/// MTP's acceptance when the scenario gives none: DeepSeek-V3 technical report (arXiv
/// 2412.19437, §5.4.3), "the acceptance rate of the second token prediction ranges between
/// 85% and 90%" — the low end.
pub const MTP_DEFAULT_ACCEPTANCE: f64 = 0.85;

const P: &str = "scheduler.speculative";

/// `[scheduler.speculative]` as written.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Speculative {
    /// `eagle`, `eagle3`, `mtp`, `ngram` or `draft_model` ([`SpecMethod`]).
    pub method: SpecMethod,
    /// Drafts verified per decoding request and step (vLLM's `num_speculative_tokens`), 1 to
    /// 16. Default: 1 for `mtp` (DeepSeek-V3's one module); required otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_tokens: Option<u32>,
    /// The mean per-position acceptance (each draft accepted with this probability given
    /// the ones before it were), or the per-position list as vLLM reports it. Default only
    /// for `mtp` ([`MTP_DEFAULT_ACCEPTANCE`]): a head's or a draft model's acceptance depends
    /// on its training and the traffic, so the scenario must say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance_rate: Option<Acceptance>,
    /// The draft model of `draft_model` (a preset name or a table, as `model`); it shares
    /// the target's tokenizer and runs at its TP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_model: Option<ModelInput>,
}

/// `acceptance_rate`: one number or the per-position list.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Acceptance {
    Mean(f64),
    PerPosition(Vec<f64>),
}

/// `[scheduler.speculative]` resolved: the method, k, and each position's acceptance.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecPlan {
    pub method: SpecMethod,
    pub k: u32,
    /// Share of drafts whose position `i` is accepted (vLLM's per-position rate), length k.
    pub per_position: Vec<f64>,
}

impl SpecPlan {
    /// Probability that draft `i` is accepted given drafts `0..i` were.
    pub fn conditional(&self) -> Vec<f64> {
        let mut prev = 1.0;
        self.per_position
            .iter()
            .map(|&a| {
                let c = if prev > 0.0 { (a / prev).min(1.0) } else { 0.0 };
                prev = a;
                c
            })
            .collect()
    }

    /// Tokens a verifying sequence gains per step in expectation: 1 + Σ per-position rates.
    pub fn tokens_per_step(&self) -> f64 {
        1.0 + self.per_position.iter().sum::<f64>()
    }
}

impl Speculative {
    /// Draft tokens per step, resolved.
    pub fn num_tokens(&self) -> u32 {
        self.num_tokens.unwrap_or(1)
    }

    /// Check the section and resolve it. Errors name the field.
    pub fn plan(&self) -> Result<SpecPlan> {
        let k = match (self.num_tokens, self.method) {
            (Some(k), _) => k,
            (None, SpecMethod::Mtp) => 1,
            (None, m) => {
                return Err(SimError::config(
                    format!("{P}.num_tokens"),
                    format!("how many drafts {} proposes per step (vLLM's num_speculative_tokens, e.g. 3)", m.name()),
                ))
            }
        };
        check::in_range(&format!("{P}.num_tokens"), k, 1, MAX_SPEC_TOKENS)?;
        let field = format!("{P}.acceptance_rate");
        let per_position = match &self.acceptance_rate {
            None if self.method == SpecMethod::Mtp => geometric(MTP_DEFAULT_ACCEPTANCE, k),
            None => {
                return Err(SimError::config(
                    field,
                    format!(
                        "{}'s acceptance depends on its draft and the traffic: give the mean per-position acceptance \
                         (e.g. 0.7; vLLM logs it as the draft acceptance rate) or the per-position list",
                        self.method.name()
                    ),
                ))
            }
            Some(Acceptance::Mean(a)) => {
                check_rate(&field, *a)?;
                geometric(*a, k)
            }
            Some(Acceptance::PerPosition(v)) => {
                if v.len() != k as usize {
                    return Err(SimError::config(field, format!("lists {} positions; num_tokens is {k}", v.len())));
                }
                let mut prev = 1.0;
                for (i, &a) in v.iter().enumerate() {
                    let at = format!("{field}[{i}]");
                    check_rate(&at, a)?;
                    if a > prev {
                        return Err(SimError::config(
                            at,
                            format!("{a} is above the position before it ({prev}): a draft is accepted only after the ones before it"),
                        ));
                    }
                    prev = a;
                }
                v.clone()
            }
        };
        match (self.method, &self.draft_model) {
            (SpecMethod::DraftModel, None) => {
                return Err(SimError::config(format!("{P}.draft_model"), "draft_model needs the draft: a preset name (e.g. \"llama-3.2-1b\") or a table"))
            }
            (m, Some(_)) if m != SpecMethod::DraftModel => {
                return Err(SimError::config(format!("{P}.draft_model"), format!("only with method = \"draft_model\" (the method is {})", m.name())))
            }
            _ => {}
        }
        Ok(SpecPlan { method: self.method, k, per_position })
    }
}

/// A constant conditional acceptance `a` over `k` positions: `a, a², …`.
fn geometric(a: f64, k: u32) -> Vec<f64> {
    (1..=k as i32).map(|i| libm::pow(a, f64::from(i))).collect()
}

fn check_rate(path: &str, a: f64) -> Result<()> {
    check::finite(path, a)?;
    if !(0.0..=1.0).contains(&a) {
        return Err(SimError::config(path, format!("an acceptance probability in [0, 1] (got {a})")));
    }
    Ok(())
}
