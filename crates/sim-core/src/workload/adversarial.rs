//! Adversarial traffic (seed §4.4): `workload.adversarial` mixes attackers into any workload,
//! and requests may carry a prompt-template nesting depth (`requests[i].template_depth`).
//!
//! The seed's attack is a prompt whose template nests `{{` a thousand times in front of the
//! system prompt, so the server's template parser and token buffer grow without bound. The
//! simulator does not run a template parser: a request carries its nesting depth, and a
//! policy with admission control (o1pro) rejects depths over 8 with the reason `template
//! depth` before it reaches a replica; the others serve the request like any other (a real
//! server would also pay the parser's time and memory, which are not modelled). Three kinds
//! of attackers:
//! * `flood`: many short requests, all arriving inside the attack window;
//! * `long_prompt`: prompts of `prompt_tokens` (default 32,000) — o1pro splits them into
//!   2,048-token pieces a step;
//! * `deep_template`: ordinary prompts with a template nested `template_depth` deep
//!   (default 64).
//!
//! Attackers are added on top of the workload: `share` is their fraction of all requests
//! (`share / (1 − share)` of the workload's count, rounded), their ids follow the
//! workload's, they arrive at uniformly random times inside `[start_s, start_s +
//! duration_s]` (default: the workload's span), and they are marked as the `adversarial`
//! class for per-class metrics. Their priority is the workload's unless given: an attacker
//! does not announce itself, but a deployment that classes unknown tenants as less urgent
//! can say so (`priority = 1`).

use serde::{Deserialize, Serialize};

use super::{RequestSpec, Workload, MAX_REQUESTS};
use crate::error::{check, Result, SimError};
use crate::rng::SimRng;

/// RNG stream of the attackers' arrival times.
const STREAM_ADVERSARIAL: u64 = 10;
/// Valid values of `adversarial.kind`.
pub const ADVERSARIAL_KINDS: &[&str] = &["flood", "long_prompt", "deep_template"];
/// Deepest template nesting a request may declare (a deeper one is a typo, not an attack).
pub const MAX_TEMPLATE_DEPTH: i64 = 65_535;
/// Deepest template nesting o1pro admits (seed §4.4).
pub const O1PRO_MAX_TEMPLATE_DEPTH: u16 = 8;

/// The `workload.adversarial` table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdversarialSpec {
    /// Attackers' share of all requests, in [0, 1). Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
    /// `flood`, `long_prompt` or `deep_template`. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Attackers' prompt length, tokens (default: 32,000 for `long_prompt`, else 512;
    /// clamped so that prompt + output fit `max_model_len`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u32>,
    /// Attackers' output length, tokens (default 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u32>,
    /// `deep_template`: the template nesting depth, 0..=65,535 (default 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_depth: Option<i64>,
    /// Attackers' priority (lower = more urgent); default: the workload's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Start of the attack window, s (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_s: Option<f64>,
    /// Length of the attack window, s (default: from `start_s` to the workload's last
    /// arrival, at least 1 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
}

/// The checked form of an [`AdversarialSpec`].
#[derive(Debug, Clone, Copy)]
struct Attack {
    share: f64,
    prompt: u32,
    output: u32,
    depth: u16,
    priority: Option<i32>,
    start_s: f64,
    duration_s: Option<f64>,
}

/// A template depth as given (`path` names it): 0..=[`MAX_TEMPLATE_DEPTH`].
pub(crate) fn template_depth(path: &str, depth: i64) -> Result<u16> {
    if !(0..=MAX_TEMPLATE_DEPTH).contains(&depth) {
        return Err(SimError::config(
            path,
            format!("must be a nesting depth in 0..={MAX_TEMPLATE_DEPTH} (got {depth}); o1pro rejects depths over {O1PRO_MAX_TEMPLATE_DEPTH}"),
        ));
    }
    Ok(depth as u16)
}

impl AdversarialSpec {
    /// Check every field; paths are relative to the table (`share`, `kind`, …).
    fn resolve(&self, max_model_len: u32) -> Result<Attack> {
        let share = self.share.ok_or_else(|| SimError::config("share", "required: the attackers' share of all requests, in [0, 1)"))?;
        check::finite("share", share)?;
        if !(0.0..1.0).contains(&share) {
            return Err(SimError::config("share", format!("must be in [0, 1): the attackers' fraction of all requests (got {share})")));
        }
        let kind = self.kind.as_deref().ok_or_else(|| SimError::config("kind", "required: flood, long_prompt or deep_template"))?;
        if !ADVERSARIAL_KINDS.contains(&kind) {
            return Err(check::unknown_name("kind", "attack kind", kind, ADVERSARIAL_KINDS));
        }
        let output = self.output_tokens.unwrap_or(16);
        super::sample::tokens_at_least_one("output_tokens", output)?;
        if output >= max_model_len {
            return Err(SimError::config("output_tokens", format!("must leave room for a prompt within max_model_len ({max_model_len})")));
        }
        let prompt = match self.prompt_tokens {
            Some(p) => {
                super::sample::tokens_at_least_one("prompt_tokens", p)?;
                if u64::from(p) + u64::from(output) > u64::from(max_model_len) {
                    return Err(SimError::config(
                        "prompt_tokens",
                        format!("prompt_tokens + output_tokens = {} exceeds max_model_len ({max_model_len})", u64::from(p) + u64::from(output)),
                    ));
                }
                p
            }
            None => (if kind == "long_prompt" { 32_000 } else { 512 }).min(max_model_len - output),
        };
        let depth = match (self.template_depth, kind) {
            (Some(d), "deep_template") => template_depth("template_depth", d)?,
            (Some(_), _) => return Err(SimError::config("template_depth", "only applies to kind = \"deep_template\"")),
            (None, "deep_template") => 64,
            (None, _) => 0,
        };
        let start_s = self.start_s.unwrap_or(0.0);
        check::non_negative("start_s", start_s)?;
        if let Some(d) = self.duration_s {
            check::positive("duration_s", d)?;
        }
        for (name, v) in [("start_s", Some(start_s)), ("duration_s", self.duration_s)] {
            if v.is_some_and(|x| x > 1e9) {
                return Err(SimError::config(name, "must be at most 1e9 s"));
            }
        }
        Ok(Attack { share, prompt, output, depth, priority: self.priority, start_s, duration_s: self.duration_s })
    }

    /// Check the table against `max_model_len`.
    pub(crate) fn validate(&self, max_model_len: u32) -> Result<()> {
        self.resolve(max_model_len).map(|_| ())
    }

    /// Add the attackers to `w` (see the [module docs](self)); `priority` is the workload's.
    pub(crate) fn mix(&self, w: &mut Workload, seed: u64, max_model_len: u32, priority: i32) -> Result<()> {
        let a = self.resolve(max_model_len)?;
        let normal = w.requests.len() as u64;
        let n = libm::round(a.share / (1.0 - a.share) * normal as f64);
        if n + normal as f64 > MAX_REQUESTS as f64 {
            return Err(SimError::config("share", format!("{n} attackers on {normal} requests: more than the limit of {MAX_REQUESTS}")));
        }
        let n = n as u64;
        if n == 0 {
            return Ok(());
        }
        let first_id = w.requests.iter().map(|r| u64::from(r.id) + 1).max().unwrap_or(0);
        if first_id + n > u64::from(u32::MAX) {
            return Err(SimError::config("share", "too many attackers for request ids"));
        }
        let last_ns = w.requests.iter().map(|r| r.arrival_ns).max().unwrap_or(0);
        let start_ns = (a.start_s * 1e9).round() as u64;
        let span_ns = match a.duration_s {
            Some(d) => (d * 1e9).round() as u64,
            None => last_ns.saturating_sub(start_ns).max(1_000_000_000),
        };
        let mut rng = SimRng::stream(seed, STREAM_ADVERSARIAL);
        let prio = a.priority.unwrap_or(priority);
        for k in 0..n {
            let at = start_ns + libm::floor(rng.uniform() * span_ns as f64) as u64;
            let mut r = RequestSpec::new((first_id + k) as u32, at, a.prompt, a.output, prio);
            r.adversarial = true;
            r.template_depth = a.depth;
            w.requests.push(r);
        }
        w.requests.sort_by_key(|r| (r.arrival_ns, r.id));
        Ok(())
    }
}
