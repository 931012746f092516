//! The scenario's `workload` section: which requests arrive, when, and how long they are.
//!
//! Two forms are accepted (never mixed):
//!
//! * **Generated** — an arrival process plus length distributions:
//!   `{"arrival": {"kind": "poisson", "rate": 2.0}, "num_requests": 1000,
//!     "prompt": {"kind": "fixed", "value": 512}, "output": {"kind": "uniform", "min": 16, "max": 256}}`
//!   (or `"duration_s"` instead of `"num_requests"`, and an optional `"priority"`).
//! * **Explicit** — a trace: `{"requests": [{"arrival_ms": 0, "prompt_tokens": 100, "output_tokens": 20}]}`.
//!
//! Deserialization is deliberately permissive about *which* fields are present (every field is
//! optional in the serde types) so that [`WorkloadSpec::validate`] can report precise,
//! path-named errors (`arrival.rate: must be > 0 (got -1)`, `requests[3].prompt_tokens:
//! required`) instead of serde's "data did not match any variant". Unknown fields are still
//! rejected by serde (`deny_unknown_fields`). Error paths are relative to the section; the
//! caller prefixes them with `.under("workload")`.
//!
//! Generation is deterministic: a pure function of the spec and the seed, identical on
//! native and WASM targets (all transcendental math goes through `libm` in [`crate::rng`]).

use serde::{Deserialize, Serialize};

use crate::error::{check, Result, SimError};
use crate::rng::SimRng;

/// The most requests one workload may contain (generated or explicit). Why: every request
/// is materialized up front (24 bytes each, plus per-request engine state), so this bounds
/// memory at about a gigabyte and rejects typos such as a rate in req/ms.
pub const MAX_REQUESTS: u64 = 50_000_000;

/// RNG stream ids: arrivals, prompt lengths and output lengths draw from independent streams
/// of the run seed, so changing one distribution never shifts the others.
const STREAM_ARRIVALS: u64 = 1;
const STREAM_PROMPT: u64 = 2;
const STREAM_OUTPUT: u64 = 3;

/// Valid values of `arrival.kind`.
const ARRIVAL_KINDS: &[&str] = &["poisson", "gamma", "constant"];
/// Valid values of `prompt.kind` / `output.kind`.
const LENGTH_KINDS: &[&str] = &["fixed", "uniform", "normal", "lognormal", "zipf"];

/// One request as the engine sees it, after generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestSpec {
    /// Stable identifier: the position in an explicit list, or the generation order (0-based).
    pub id: u32,
    /// Arrival time in nanoseconds since the start of the simulation (integer so that event
    /// ordering is exact and platform independent).
    pub arrival_ns: u64,
    /// Prompt (input) length in tokens, ≥ 1.
    pub prompt_tokens: u32,
    /// Number of tokens to generate (output length), ≥ 1.
    pub output_tokens: u32,
    /// Scheduling priority: lower is more urgent, 0 by default (as vLLM's priority
    /// scheduling).
    pub priority: i32,
    /// What the prompt is made of, for prefix caching: `segments[segs.0 .. segs.0 + segs.1]`
    /// of the [`Workload`], covering the prompt's first tokens in order. Tokens they do not
    /// cover (all of them for `(0, 0)`) are unique to this request.
    pub segs: (u32, u32),
    /// Closed loop (a session's later turn): the request is sent `think_ns` after request
    /// `parent` finishes, not at `arrival_ns`.
    pub after: Option<After>,
}

impl RequestSpec {
    /// A request with unique tokens and no dependency.
    pub fn new(id: u32, arrival_ns: u64, prompt_tokens: u32, output_tokens: u32, priority: i32) -> Self {
        RequestSpec { id, arrival_ns, prompt_tokens, output_tokens, priority, segs: (0, 0), after: None }
    }
}

/// A closed-loop dependency: sent `think_ns` after request `parent` finishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct After {
    pub parent: u32,
    pub think_ns: u64,
}

/// A run of `len` tokens of the token stream `key`, from the stream's start. Token identity
/// for prefix caching: two prompts hold the same token at position p exactly when the
/// segments covering p have the same key and p falls at the same offset into them. Keys are
/// opaque; keys with [`OUTPUT_KEY_BIT`] set are requests' outputs ([`output_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub key: u64,
    pub len: u32,
}

/// Set in the key of every output stream; workload keys never have it.
pub const OUTPUT_KEY_BIT: u64 = 1 << 63;

/// The key of the tokens request `id` generates (a session's next turn repeats them).
pub const fn output_key(id: u32) -> u64 {
    OUTPUT_KEY_BIT | id as u64
}

/// Every request of a run plus the segment arena their `segs` index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workload {
    /// Sorted by `(arrival_ns, id)`.
    pub requests: Vec<RequestSpec>,
    pub segments: Vec<Segment>,
}

/// The arrival process of a generated workload (`arrival` in the section).
///
/// Inter-arrival gaps are i.i.d.; the first request arrives at t = 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrivalSpec {
    /// `"poisson"` (exponential gaps), `"gamma"` (gamma-distributed gaps, burstiness set by
    /// `cv`) or `"constant"` (every gap is exactly `1/rate`). Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Mean arrival rate in requests per second (> 0). Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Coefficient of variation of the gaps (std / mean, > 0): 1 is Poisson-like, > 1 is
    /// burstier. Required for, and only allowed with, `kind = "gamma"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv: Option<f64>,
    /// Optional cap on any single inter-arrival gap, in seconds (> 0). Why: Vidur's request
    /// generator caps gaps at `3/rate`; setting this reproduces its traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_gap_s: Option<f64>,
}

impl ArrivalSpec {
    /// Poisson arrivals at `rate` requests per second.
    pub fn poisson(rate: f64) -> Self {
        ArrivalSpec {
            kind: Some("poisson".into()),
            rate: Some(rate),
            ..Default::default()
        }
    }

    /// Gamma-renewal arrivals at `rate` requests per second with gap coefficient of
    /// variation `cv`.
    pub fn gamma(rate: f64, cv: f64) -> Self {
        ArrivalSpec {
            kind: Some("gamma".into()),
            rate: Some(rate),
            cv: Some(cv),
            max_gap_s: None,
        }
    }

    /// Evenly spaced arrivals, one every `1/rate` seconds.
    pub fn constant(rate: f64) -> Self {
        ArrivalSpec {
            kind: Some("constant".into()),
            rate: Some(rate),
            ..Default::default()
        }
    }
}

/// A token-length distribution (`prompt` or `output` in the section).
///
/// Samples are rounded to the nearest integer, then clamped to ≥ 1 and to `min`/`max`.
/// Which fields apply depends on `kind`:
///
/// | kind        | required             | optional clamps |
/// |-------------|----------------------|-----------------|
/// | `fixed`     | `value`              | `min`, `max`    |
/// | `uniform`   | `min`, `max` (support, integers inclusive) | — |
/// | `normal`    | `mean`, `std`        | `min`, `max`    |
/// | `lognormal` | `mean`, `sigma`      | `min`, `max`    |
/// | `zipf`      | `min`, `max` (support), `s` | —        |
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LengthSpec {
    /// One of `fixed`, `uniform`, `normal`, `lognormal`, `zipf`. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `fixed`: the length in tokens (≥ 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<u32>,
    /// Lower bound in tokens (≥ 1): the support's minimum for `uniform`/`zipf`, a clamp
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<u32>,
    /// Upper bound in tokens (≥ `min`): the support's maximum for `uniform`/`zipf`, a clamp
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
    /// `normal`: the mean in tokens; `lognormal`: the *arithmetic* mean in tokens (> 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    /// `normal`: standard deviation in tokens (≥ 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub std: Option<f64>,
    /// `lognormal`: standard deviation of ln(length), dimensionless (≥ 0). The log-space
    /// mean is derived as `mu = ln(mean) - sigma²/2` so that `mean` stays the arithmetic mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma: Option<f64>,
    /// `zipf`: exponent (> 0), P(k) ∝ k^-s over the integers `min..=max`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s: Option<f64>,
}

impl LengthSpec {
    /// Every request has exactly `value` tokens.
    pub fn fixed(value: u32) -> Self {
        LengthSpec {
            kind: Some("fixed".into()),
            value: Some(value),
            ..Default::default()
        }
    }

    /// Uniform over the integers `min..=max`.
    pub fn uniform(min: u32, max: u32) -> Self {
        LengthSpec {
            kind: Some("uniform".into()),
            min: Some(min),
            max: Some(max),
            ..Default::default()
        }
    }

    /// Normal with `mean` and `std` in tokens.
    pub fn normal(mean: f64, std: f64) -> Self {
        LengthSpec {
            kind: Some("normal".into()),
            mean: Some(mean),
            std: Some(std),
            ..Default::default()
        }
    }

    /// Log-normal with arithmetic `mean` in tokens and log-space `sigma`.
    pub fn lognormal(mean: f64, sigma: f64) -> Self {
        LengthSpec {
            kind: Some("lognormal".into()),
            mean: Some(mean),
            sigma: Some(sigma),
            ..Default::default()
        }
    }

    /// Zipf over `min..=max` with exponent `s`.
    pub fn zipf(min: u32, max: u32, s: f64) -> Self {
        LengthSpec {
            kind: Some("zipf".into()),
            min: Some(min),
            max: Some(max),
            s: Some(s),
            ..Default::default()
        }
    }

    /// The same distribution with clamps `min`/`max` (tokens) set.
    pub fn clamped(mut self, min: Option<u32>, max: Option<u32>) -> Self {
        self.min = min;
        self.max = max;
        self
    }

    /// `(field name, present)` in a fixed order, for the "field not used by this kind" check.
    fn present_fields(&self) -> [(&'static str, bool); 7] {
        [
            ("value", self.value.is_some()),
            ("min", self.min.is_some()),
            ("max", self.max.is_some()),
            ("mean", self.mean.is_some()),
            ("std", self.std.is_some()),
            ("sigma", self.sigma.is_some()),
            ("s", self.s.is_some()),
        ]
    }
}

/// One request of an explicit list (`requests[i]` in the section).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExplicitRequest {
    /// Arrival time in milliseconds since the start (finite, ≥ 0). Required. The list need
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
}

impl ExplicitRequest {
    /// A request arriving at `arrival_ms` milliseconds with the given lengths in tokens and
    /// default priority.
    pub fn new(arrival_ms: f64, prompt_tokens: u32, output_tokens: u32) -> Self {
        ExplicitRequest {
            arrival_ms: Some(arrival_ms),
            prompt_tokens: Some(prompt_tokens),
            output_tokens: Some(output_tokens),
            priority: None,
        }
    }
}

/// The deserialized `workload` section, exactly as written (it is echoed back, as JSON, in
/// the resolved scenario). Every field is optional at the serde level; [`validate`]
/// enforces which combination is required and names the offending field.
///
/// [`validate`]: WorkloadSpec::validate
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Generated form: the arrival process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<ArrivalSpec>,
    /// Generated form: generate exactly this many requests (1..=[`MAX_REQUESTS`]). Exactly
    /// one of `num_requests` / `duration_s` must be given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_requests: Option<u64>,
    /// Generated form: generate every request arriving before this time, in seconds (> 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Generated form: prompt-length distribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<LengthSpec>,
    /// Generated form: output-length distribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<LengthSpec>,
    /// Generated form: priority given to every generated request (lower = more urgent;
    /// 0 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Explicit form: the list of requests (cannot be combined with the fields above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<Vec<ExplicitRequest>>,
}

impl Default for WorkloadSpec {
    /// A small, quick workload: Poisson arrivals at 1 req/s, 100 requests, 512-token prompts
    /// and 128-token outputs.
    fn default() -> Self {
        WorkloadSpec {
            arrival: Some(ArrivalSpec::poisson(1.0)),
            num_requests: Some(100),
            duration_s: None,
            prompt: Some(LengthSpec::fixed(512)),
            output: Some(LengthSpec::fixed(128)),
            priority: None,
            requests: None,
        }
    }
}

impl WorkloadSpec {
    /// An explicit-form workload from a list of requests.
    pub fn explicit(requests: Vec<ExplicitRequest>) -> Self {
        WorkloadSpec {
            arrival: None,
            num_requests: None,
            duration_s: None,
            prompt: None,
            output: None,
            priority: None,
            requests: Some(requests),
        }
    }

    /// Check every rule; errors name paths relative to the section (`arrival.rate`,
    /// `prompt.max`, `requests[3].prompt_tokens`). `max_model_len` (tokens) bounds
    /// `prompt_tokens + output_tokens` of explicit requests; generated requests are not
    /// checked against it (the engine rejects those individually, with a reason).
    pub fn validate(&self, max_model_len: u32) -> Result<()> {
        self.resolve(max_model_len).map(|_| ())
    }

    /// Generate all requests, sorted by `(arrival_ns, id)`.
    ///
    /// `id` is the 0-based position in an explicit list (its order in the list, even when
    /// `arrival_ms` is not sorted), the generation order otherwise. Explicit requests whose
    /// `prompt_tokens + output_tokens > max_model_len` are a config error naming
    /// `requests[i].prompt_tokens`; generated ones are not filtered. The result depends only
    /// on the spec and `seed`.
    pub fn generate(&self, seed: u64, max_model_len: u32) -> Result<Vec<RequestSpec>> {
        Ok(self.generate_workload(seed, max_model_len)?.requests)
    }

    /// [`WorkloadSpec::generate`] with the segment arena the requests' `segs` index.
    pub fn generate_workload(&self, seed: u64, max_model_len: u32) -> Result<Workload> {
        let requests = match self.resolve(max_model_len)? {
            Resolved::Explicit(list) => list,
            Resolved::Generated(g) => g.generate(seed)?,
        };
        Ok(Workload { requests, segments: Vec::new() })
    }

    /// Number of requests without generating: `num_requests`, or the length of the
    /// explicit list; `None` in duration mode (the count is random).
    pub fn num_requests_hint(&self) -> Option<u64> {
        match &self.requests {
            Some(list) => Some(list.len() as u64),
            None => self.num_requests,
        }
    }

    /// Validate and turn the optional-field representation into a typed model.
    fn resolve(&self, max_model_len: u32) -> Result<Resolved> {
        if let Some(list) = &self.requests {
            let generated_fields = [
                ("arrival", self.arrival.is_some()),
                ("num_requests", self.num_requests.is_some()),
                ("duration_s", self.duration_s.is_some()),
                ("prompt", self.prompt.is_some()),
                ("output", self.output.is_some()),
                ("priority", self.priority.is_some()),
            ];
            if let Some((name, _)) = generated_fields.iter().find(|(_, present)| *present) {
                return Err(SimError::config(
                    *name,
                    "cannot be combined with an explicit `requests` list (use either the generated \
                     form or `requests`, not both; per-request priority goes in requests[i].priority)",
                ));
            }
            return resolve_explicit(list, max_model_len).map(Resolved::Explicit);
        }

        let arrival = match &self.arrival {
            Some(a) => resolve_arrival(a)?,
            None => {
                return Err(SimError::config(
                    "arrival",
                    "required: give either a generated workload (arrival, num_requests or \
                     duration_s, prompt, output) or an explicit `requests` list",
                ))
            }
        };
        let stop = match (self.num_requests, self.duration_s) {
            (Some(_), Some(_)) => {
                return Err(SimError::config(
                    "duration_s",
                    "cannot be combined with num_requests; give exactly one of them",
                ))
            }
            (None, None) => {
                return Err(SimError::config(
                    "num_requests",
                    "required: give exactly one of num_requests or duration_s",
                ))
            }
            (Some(n), None) => {
                check::in_range("num_requests", n, 1, MAX_REQUESTS)?;
                Stop::Count(n)
            }
            (None, Some(d)) => {
                check::positive("duration_s", d)?;
                let expected = arrival.rate * d;
                if expected > MAX_REQUESTS as f64 {
                    return Err(SimError::config(
                        "duration_s",
                        format!(
                            "arrival.rate × duration_s = {expected} expected requests, more than the \
                             limit of {MAX_REQUESTS}"
                        ),
                    ));
                }
                if let Some(cap) = arrival.max_gap_s {
                    let at_least = d / cap;
                    if at_least > MAX_REQUESTS as f64 {
                        return Err(SimError::config(
                            "duration_s",
                            format!(
                                "duration_s / arrival.max_gap_s = {at_least}: at least that many \
                                 requests, more than the limit of {MAX_REQUESTS}"
                            ),
                        ));
                    }
                }
                Stop::Duration(d)
            }
        };
        let prompt = match &self.prompt {
            Some(p) => resolve_length(p, "prompt")?,
            None => {
                return Err(SimError::config(
                    "prompt",
                    "required for a generated workload",
                ))
            }
        };
        let output = match &self.output {
            Some(o) => resolve_length(o, "output")?,
            None => {
                return Err(SimError::config(
                    "output",
                    "required for a generated workload",
                ))
            }
        };
        // A request longer than max_model_len is rejected on arrival; when even the
        // shortest prompt and output exceed it, every request would be: refuse the workload.
        let (p_min, o_min) = (prompt.min_len(), output.min_len());
        if u64::from(p_min) + u64::from(o_min) > u64::from(max_model_len) {
            return Err(SimError::config(
                "prompt",
                format!(
                    "every request exceeds max_model_len = {max_model_len} tokens (the shortest prompt is {p_min} \
                     and the shortest output {o_min}); every one would be rejected"
                ),
            ));
        }
        Ok(Resolved::Generated(Generated {
            arrival,
            stop,
            prompt,
            output,
            priority: self.priority.unwrap_or(0),
        }))
    }
}

mod sample;
use sample::*;

#[cfg(test)]
mod tests;
