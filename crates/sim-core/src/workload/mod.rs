//! The scenario's `workload` section: which requests arrive, when, and how long they are.
//!
//! Its forms (never mixed):
//!
//! * **Generated** — an arrival process plus length distributions:
//!   `{"arrival": {"kind": "poisson", "rate": 2.0}, "num_requests": 1000,
//!     "prompt": {"kind": "fixed", "value": 512}, "output": {"kind": "uniform", "min": 16, "max": 256}}`
//!   (or `"duration_s"` instead of `"num_requests"`, or `"arrival": {"stages": [{"rate",
//!   "duration_s"}, …]}` for load that changes over time, and an optional `"priority"`).
//!   Instead of `prompt`/`output`, `shared_prefix` generates inference-perf's shared-prefix
//!   data ([`shared`]) and `sessions` multi-turn conversations ([`sessions`]).
//! * **Explicit** — a list: `{"requests": [{"arrival_ms": 0, "prompt_tokens": 100, "output_tokens": 20}]}`,
//!   each request optionally naming shared tokens (`prefix_group` + `prefix_length`, or
//!   `hash_ids`) or a session turn (`session_id`, `turn`, `think_ms`); see [`assemble`].
//! * **Trace** — `{"trace": {"format": "azure", "path": "trace.csv"}}`: a real service's
//!   requests ([`trace`]).
//!
//! Token identity: requests carry [`Segment`]s naming which of their prompt tokens other
//! prompts share ([`keys`] keeps the sources apart), for prefix caching; a session's later
//! turns carry [`After`], for the closed loop.
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

pub mod adversarial;
mod arrival;
pub mod assemble;
mod dist;
pub mod keys;
mod sample;
pub mod sessions;
pub mod shared;
pub mod trace;

pub use adversarial::{AdversarialSpec, ADVERSARIAL_KINDS};
pub use arrival::{StageSpec, ARRIVAL_KINDS};
pub use dist::{IdValue, Len, SecondsDist, SecondsSpec};
pub use sessions::SessionsSpec;
pub use shared::SharedPrefixSpec;
pub use trace::{LoadedTrace, TraceReader, TraceSpec, TRACE_FORMATS};

use arrival::{resolve_arrival, Stop};
use sample::*;

/// The most requests one workload may contain (generated or explicit). Why: every request
/// is materialized up front (24 bytes each, plus per-request engine state), so this bounds
/// memory at about a gigabyte and rejects typos such as a rate in req/ms.
pub const MAX_REQUESTS: u64 = 50_000_000;

/// RNG stream ids: arrivals, prompt lengths and output lengths draw from independent streams
/// of the run seed, so changing one distribution never shifts the others.
const STREAM_ARRIVALS: u64 = 1;
const STREAM_PROMPT: u64 = 2;
const STREAM_OUTPUT: u64 = 3;

/// Valid values of `prompt.kind` / `output.kind` (exported by [`crate::registry`]).
pub const LENGTH_KINDS: &[&str] = &["fixed", "uniform", "normal", "lognormal", "zipf"];

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
    /// `parent` finishes, and not before `arrival_ns` (a trace's recorded send time, the
    /// scheduled slot of inference-perf's multi-turn chat, or the session's start, which
    /// any parent finish follows).
    pub after: Option<After>,
    /// Nesting depth of the prompt's template (0 = none; seed §4.4: o1pro rejects > 8).
    pub template_depth: u16,
    /// An attacker of `workload.adversarial` (the `adversarial` class of the metrics).
    pub adversarial: bool,
}

impl RequestSpec {
    /// A request with unique tokens and no dependency.
    pub fn new(id: u32, arrival_ns: u64, prompt_tokens: u32, output_tokens: u32, priority: i32) -> Self {
        RequestSpec {
            id,
            arrival_ns,
            prompt_tokens,
            output_tokens,
            priority,
            segs: (0, 0),
            after: None,
            template_depth: 0,
            adversarial: false,
        }
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
/// Inter-arrival gaps are i.i.d.; the first request arrives at t = 0. With `stages`, each
/// stage is its own process at its own rate (see [`arrival`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrivalSpec {
    /// `"poisson"` (exponential gaps), `"gamma"` (gamma-distributed gaps, burstiness set by
    /// `cv`), `"constant"` (every gap is exactly `1/rate`) or `"poisson_count"` (exactly
    /// rate × duration arrivals per stage at exponential gaps scaled to the stage:
    /// inference-perf's `constant` load type). Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Mean arrival rate in requests per second (> 0). Required, unless `stages` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Load over time, as inference-perf's `load.stages`: `[{rate, duration_s}, …]`, one
    /// after the other from t = 0; generation ends with the last stage (so `num_requests`
    /// and `duration_s` are not given). Replaces `rate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<Vec<StageSpec>>,
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
            ..Default::default()
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

    /// Arrivals of `kind` in stages of `(rate per second, duration in seconds)`.
    pub fn staged(kind: &str, stages: &[(f64, f64)]) -> Self {
        ArrivalSpec {
            kind: Some(kind.into()),
            stages: Some(stages.iter().map(|&(r, d)| StageSpec::new(r, d)).collect()),
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
///
/// Shared tokens, for prefix caching: `prefix_group` + `prefix_length` (the first
/// `prefix_length` prompt tokens are the same in every request of the group, the rest
/// unique: BLIS's workload-spec convention), or `hash_ids` (Mooncake's: one id per
/// `hash_block_tokens` of prompt, equal ids at equal positions being equal content). A
/// session turn (`session_id`, `turn`) shares the whole conversation before it; its
/// `prompt_tokens` counts the whole prompt, earlier turns included (see [`assemble`]).
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
    /// Explicit form: tokens per `hash_ids` entry (≥ 1; default 512, Mooncake's block).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_block_tokens: Option<u32>,
    /// Generated form: inference-perf's shared-prefix data instead of `prompt`/`output`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_prefix: Option<SharedPrefixSpec>,
    /// Generated form: multi-turn sessions (starts follow `arrival`) instead of
    /// `prompt`/`output`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<SessionsSpec>,
    /// Trace form: replay a trace file (cannot be combined with any other field but
    /// `timeout_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceSpec>,
    /// Client timeout in seconds (> 0), any form: a request not finished this long after
    /// its arrival is aborted as a client would (KV freed, rejected with reason `timeout`).
    /// Absent: clients wait forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
    /// Attackers mixed into any of the forms above (seed §4.4; see [`adversarial`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adversarial: Option<AdversarialSpec>,
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
            ..WorkloadSpec::empty()
        }
    }
}

impl WorkloadSpec {
    /// A section with no field set (not valid by itself: a starting point for the forms).
    pub fn empty() -> Self {
        WorkloadSpec {
            arrival: None,
            num_requests: None,
            duration_s: None,
            prompt: None,
            output: None,
            priority: None,
            requests: None,
            hash_block_tokens: None,
            shared_prefix: None,
            sessions: None,
            trace: None,
            timeout_s: None,
            adversarial: None,
        }
    }

    /// An explicit-form workload from a list of requests.
    pub fn explicit(requests: Vec<ExplicitRequest>) -> Self {
        WorkloadSpec { requests: Some(requests), ..WorkloadSpec::empty() }
    }

    /// A trace-form workload.
    pub fn from_trace(trace: TraceSpec) -> Self {
        WorkloadSpec { trace: Some(trace), ..WorkloadSpec::empty() }
    }

    /// Check every rule; errors name paths relative to the section (`arrival.rate`,
    /// `prompt.max`, `requests[3].prompt_tokens`). `max_model_len` (tokens) bounds
    /// `prompt_tokens + output_tokens` of explicit requests; generated and traced requests
    /// are not checked against it (the engine rejects those individually, with a reason).
    /// An inline trace is parsed whole; a trace given by `path` cannot be checked here.
    pub fn validate(&self, max_model_len: u32) -> Result<()> {
        self.check_timeout()?;
        match &self.trace {
            Some(t) if self.only_field() == "trace" && t.text.is_none() => TraceReader::new(t).map(|_| ()),
            _ => self.resolve(max_model_len).map(|_| ()),
        }
    }

    /// Generate all requests, sorted by `(arrival_ns, id)`.
    ///
    /// `id` is the 0-based position in an explicit list or a trace (its order there, even
    /// when arrivals are not sorted), the generation order otherwise. Explicit requests
    /// whose `prompt_tokens + output_tokens > max_model_len` are a config error naming
    /// `requests[i].prompt_tokens`; generated ones are not filtered. The result depends only
    /// on the spec and `seed`.
    pub fn generate(&self, seed: u64, max_model_len: u32) -> Result<Vec<RequestSpec>> {
        Ok(self.generate_workload(seed, max_model_len)?.requests)
    }

    /// [`WorkloadSpec::generate`] with the segment arena the requests' `segs` index.
    pub fn generate_workload(&self, seed: u64, max_model_len: u32) -> Result<Workload> {
        self.generate_with(seed, max_model_len, None)
    }

    /// [`WorkloadSpec::generate_workload`], taking a trace a front end has already loaded
    /// (from `trace.path`) instead of parsing `trace.text`. The loaded trace must have been
    /// read with this section's trace options.
    pub fn generate_with(&self, seed: u64, max_model_len: u32, loaded: Option<LoadedTrace>) -> Result<Workload> {
        self.generate_capped(seed, max_model_len, loaded, MAX_REQUESTS)
    }

    /// [`WorkloadSpec::generate_with`] where a random arrival process may produce at most
    /// `cap` requests (what the run's memory limit allows): past it, a `ResourceError`
    /// naming the arrival field, before the requests are held. An arrival process's count is
    /// random (a gamma process with a huge `cv` sends bursts of millions), so the estimate
    /// made before generating cannot bound it.
    pub fn generate_capped(&self, seed: u64, max_model_len: u32, loaded: Option<LoadedTrace>, cap: u64) -> Result<Workload> {
        let mut w = self.generate_plain(seed, max_model_len, loaded, cap.min(MAX_REQUESTS))?;
        if let Some(list) = &self.requests {
            for r in w.requests.iter_mut() {
                if let Some(d) = list.get(r.id as usize).and_then(|x| x.template_depth) {
                    r.template_depth = adversarial::template_depth(&format!("requests[{}].template_depth", r.id), d)?;
                }
            }
        }
        if let Some(a) = &self.adversarial {
            a.mix(&mut w, seed, max_model_len, self.priority.unwrap_or(0)).map_err(|e| e.under("adversarial"))?;
        }
        Ok(w)
    }

    /// [`WorkloadSpec::generate_with`] without the attackers and template depths.
    fn generate_plain(&self, seed: u64, max_model_len: u32, loaded: Option<LoadedTrace>, cap: u64) -> Result<Workload> {
        match self.resolve(max_model_len)? {
            Resolved::Explicit(rows) => rows.assemble(),
            Resolved::Generated(g) => Ok(Workload { requests: g.generate(seed, cap)?, segments: Vec::new() }),
            Resolved::Shared(g) => g.generate(seed, max_model_len, cap),
            Resolved::Sessions(g) => g.generate(seed, max_model_len),
            Resolved::Trace(spec) => {
                let trace = match loaded {
                    Some(t) if t.matches(spec) => t,
                    Some(_) => {
                        return Err(SimError::config("trace", "the loaded trace was read with other options than this scenario's"))
                    }
                    None => spec.load_inline()?,
                };
                trace.into_workload(seed)
            }
        }
    }

    /// Number of requests without generating: `num_requests`, or the length of the
    /// explicit list; `None` otherwise (duration mode, stages, sessions, traces).
    pub fn num_requests_hint(&self) -> Option<u64> {
        match &self.requests {
            Some(list) => Some(list.len() as u64),
            None if self.shared_prefix.is_some() || self.arrival.as_ref().is_some_and(|a| a.stages.is_some()) => {
                self.num_requests
            }
            None if self.sessions.is_some() || self.trace.is_some() => None,
            None => self.num_requests,
        }
    }

    /// The fields present, by name, in a fixed order.
    fn present(&self) -> [(&'static str, bool); 11] {
        [
            ("arrival", self.arrival.is_some()),
            ("num_requests", self.num_requests.is_some()),
            ("duration_s", self.duration_s.is_some()),
            ("prompt", self.prompt.is_some()),
            ("output", self.output.is_some()),
            ("priority", self.priority.is_some()),
            ("requests", self.requests.is_some()),
            ("hash_block_tokens", self.hash_block_tokens.is_some()),
            ("shared_prefix", self.shared_prefix.is_some()),
            ("sessions", self.sessions.is_some()),
            ("trace", self.trace.is_some()),
        ]
    }

    /// `"trace"` when the trace is the only field given.
    fn only_field(&self) -> &'static str {
        let present: Vec<&str> = self.present().iter().filter(|(_, p)| *p).map(|(n, _)| *n).collect();
        if present == ["trace"] {
            "trace"
        } else {
            ""
        }
    }

    /// `timeout_s` must be positive and finite (at most 1e9 s, the engine's horizon).
    fn check_timeout(&self) -> Result<()> {
        if let Some(t) = self.timeout_s {
            check::positive("timeout_s", t)?;
            if t > 1e9 {
                return Err(SimError::config("timeout_s", format!("must be at most 1e9 s, about 31.7 years (got {t})")));
            }
        }
        Ok(())
    }

    /// Validate and turn the optional-field representation into a typed model
    /// (`timeout_s` goes with every form, so it is not among the fields a form excludes).
    fn resolve(&self, max_model_len: u32) -> Result<Resolved<'_>> {
        self.check_timeout()?;
        if let Some(a) = &self.adversarial {
            a.validate(max_model_len).map_err(|e| e.under("adversarial"))?;
        }
        if let Some(list) = &self.requests {
            for (i, r) in list.iter().enumerate() {
                if let Some(d) = r.template_depth {
                    adversarial::template_depth(&format!("requests[{i}].template_depth"), d)?;
                }
            }
        }
        let present = self.present();
        let reject_others = |form: &str, allowed: &[&str]| -> Result<()> {
            match present.iter().find(|(name, p)| *p && *name != form && !allowed.contains(name)) {
                Some((name, _)) => Err(SimError::config(
                    *name,
                    format!(
                        "cannot be combined with `{form}` (a workload is either generated, an explicit `requests` list or a `trace`{})",
                        if form == "requests" { "; per-request priority goes in requests[i].priority" } else { "" }
                    ),
                )),
                None => Ok(()),
            }
        };
        if let Some(list) = &self.requests {
            reject_others("requests", &["hash_block_tokens"])?;
            let block = self.hash_block_tokens.unwrap_or(assemble::DEFAULT_HASH_BLOCK_TOKENS);
            if block == 0 {
                return Err(SimError::config("hash_block_tokens", "must be >= 1 token (got 0)"));
            }
            return assemble::explicit_rows(list, max_model_len, block).map(Resolved::Explicit);
        }
        if let Some(t) = &self.trace {
            reject_others("trace", &[])?;
            return Ok(Resolved::Trace(t));
        }
        if self.hash_block_tokens.is_some() {
            return Err(SimError::config("hash_block_tokens", "only applies to an explicit `requests` list (a trace sets trace.hash_block_tokens)"));
        }

        let arrival = match &self.arrival {
            Some(a) => resolve_arrival(a)?,
            None => {
                return Err(SimError::config(
                    "arrival",
                    "required: give either a generated workload (arrival, num_requests or \
                     duration_s, prompt, output), an explicit `requests` list or a `trace`",
                ))
            }
        };
        let staged = !arrival.stages.is_empty();
        let kinds = [("shared_prefix", self.shared_prefix.is_some()), ("sessions", self.sessions.is_some())];
        let form = kinds.iter().find(|(_, p)| *p).map(|(n, _)| *n);
        if let Some(form) = form {
            for (name, p) in [("prompt", self.prompt.is_some()), ("output", self.output.is_some())]
                .into_iter()
                .chain(kinds.into_iter().filter(|(n, _)| *n != form))
            {
                if p {
                    return Err(SimError::config(name, format!("cannot be combined with `{form}` (it sets the lengths itself)")));
                }
            }
        }
        let priority = self.priority.unwrap_or(0);
        if form == Some("sessions") {
            if self.num_requests.is_some() {
                return Err(SimError::config("num_requests", "not used by `sessions` (give sessions.count, duration_s or arrival.stages)"));
            }
            let bound = match (self.duration_s, staged) {
                (Some(_), true) => return Err(self.stages_conflict("duration_s")),
                (Some(d), false) => {
                    check::positive("duration_s", d)?;
                    Some(Stop::Duration(d))
                }
                (None, true) => Some(Stop::Stages),
                (None, false) => None,
            };
            let spec = self.sessions.as_ref().expect("form is sessions");
            return spec.resolve(arrival, bound, priority).map(Resolved::Sessions);
        }
        let stop = self.stop(&arrival, staged)?;
        if let Some(spec) = &self.shared_prefix {
            return spec.resolve(arrival, stop, priority).map(Resolved::Shared);
        }
        let prompt = match &self.prompt {
            Some(p) => resolve_length(p, "prompt")?,
            None => return Err(SimError::config("prompt", "required for a generated workload (or give shared_prefix or sessions)")),
        };
        let output = match &self.output {
            Some(o) => resolve_length(o, "output")?,
            None => return Err(SimError::config("output", "required for a generated workload")),
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
        Ok(Resolved::Generated(Generated { arrival, stop, prompt, output, priority }))
    }

    fn stages_conflict(&self, field: &str) -> SimError {
        SimError::config(field, "cannot be combined with arrival.stages (the stages' durations set the length)")
    }

    /// When generation stops: `num_requests`, `duration_s` or the end of the stages.
    fn stop(&self, arrival: &arrival::ArrivalModel, staged: bool) -> Result<Stop> {
        match (self.num_requests, self.duration_s) {
            (Some(_), _) if staged => Err(self.stages_conflict("num_requests")),
            (_, Some(_)) if staged => Err(self.stages_conflict("duration_s")),
            (None, None) if staged => Ok(Stop::Stages),
            (Some(_), Some(_)) => Err(SimError::config("duration_s", "cannot be combined with num_requests; give exactly one of them")),
            (None, None) => Err(SimError::config(
                "num_requests",
                "required: give exactly one of num_requests or duration_s (or arrival.stages)",
            )),
            (Some(n), None) => {
                check::in_range("num_requests", n, 1, MAX_REQUESTS)?;
                Ok(Stop::Count(n))
            }
            (None, Some(d)) => {
                check::positive("duration_s", d)?;
                let expected = arrival.rate * d;
                if expected > MAX_REQUESTS as f64 {
                    return Err(SimError::config(
                        "duration_s",
                        format!("arrival.rate × duration_s = {expected} expected requests, more than the limit of {MAX_REQUESTS}"),
                    ));
                }
                if let Some(cap) = arrival.max_gap_s {
                    let at_least = d / cap;
                    if at_least > MAX_REQUESTS as f64 {
                        return Err(SimError::config(
                            "duration_s",
                            format!(
                                "duration_s / arrival.max_gap_s = {at_least}: at least that many requests, more than the limit of {MAX_REQUESTS}"
                            ),
                        ));
                    }
                }
                Ok(Stop::Duration(d))
            }
        }
    }
}

/// The validated, typed form of a [`WorkloadSpec`].
enum Resolved<'a> {
    /// An explicit list's rows, validated.
    Explicit(assemble::Rows),
    Generated(Generated),
    Shared(shared::SharedGen),
    Sessions(sessions::SessionGen),
    Trace(&'a TraceSpec),
}


#[cfg(test)]
mod forms_tests;
#[cfg(test)]
mod tests;
