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
//!
//! By file: what generation produces ([`RequestSpec`], [`Segment`], [`Workload`]:
//! `request.rs`), the section's parts as written (the arrival process in `arrival.rs`, length
//! distributions in `length.rs`, an explicit list's rows in `explicit.rs`, the shorthand values
//! in `dist.rs`), the samplers they validate to (`sample.rs`), and the forms ([`shared`],
//! [`sessions`], [`assemble`], [`trace`], [`adversarial`]); this file holds the section
//! itself ([`WorkloadSpec`]): which form it is, and generating it.

use serde::{Deserialize, Serialize};

use crate::error::{check, Result, SimError};

pub mod adversarial;
mod arrival;
pub mod assemble;
mod dist;
mod explicit;
pub mod keys;
mod length;
pub mod lora;
mod request;
mod sample;
pub mod sessions;
pub mod shared;
pub mod trace;

pub use adversarial::{AdversarialSpec, ADVERSARIAL_KINDS};
pub use arrival::{ArrivalSpec, StageSpec, ARRIVAL_KINDS};
pub use dist::{IdValue, Len, SecondsDist, SecondsSpec};
pub use explicit::ExplicitRequest;
pub use length::{LengthSpec, LENGTH_KINDS};
pub use lora::{LoraSpec, Popularity, LORA_MODULES};
pub use request::{output_key, After, RequestSpec, Segment, Workload, MAX_REQUESTS, OUTPUT_KEY_BIT};
pub use sessions::SessionsSpec;
pub use shared::SharedPrefixSpec;
pub use trace::{LoadedTrace, TraceReader, TraceSpec, TRACE_FORMATS};

use arrival::{resolve_arrival, ArrivalModel, Stop};
use sample::{resolve_length, Generated};

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
    /// Requests served through LoRA adapters, any form ([`lora`]): `lora = { adapters = 32,
    /// rank = 16, popularity = "zipf" }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora: Option<LoraSpec>,
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
            lora: None,
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
        if let Some(l) = &self.lora {
            l.validate()?;
        }
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
        match &self.lora {
            Some(l) => l.assign(&mut w, seed, self.trace.is_some())?,
            None if self.trace.is_some() && w.requests.iter().any(|r| r.lora > 0) => {
                return Err(SimError::config("trace", "its rows name LoRA adapters (the lora column): add workload.lora (adapters, rank)"));
            }
            None => {}
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
        if let Some(l) = &self.lora {
            l.validate()?;
        }
        if let Some(list) = &self.requests {
            if self.lora.is_none() {
                if let Some(i) = list.iter().position(|r| r.lora.is_some()) {
                    return Err(SimError::config(format!("requests[{i}].lora"), "names an adapter: add workload.lora (adapters, rank)"));
                }
            }
        }
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
    fn stop(&self, arrival: &ArrivalModel, staged: bool) -> Result<Stop> {
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
