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
        match self.resolve(max_model_len)? {
            Resolved::Explicit(list) => Ok(list),
            Resolved::Generated(g) => g.generate(seed),
        }
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
        Ok(Resolved::Generated(Generated {
            arrival,
            stop,
            prompt,
            output,
            priority: self.priority.unwrap_or(0),
        }))
    }
}

/// The validated, typed form of a [`WorkloadSpec`].
enum Resolved {
    /// An explicit list, already converted and sorted.
    Explicit(Vec<RequestSpec>),
    /// A generated workload's model.
    Generated(Generated),
}

/// When generation stops.
#[derive(Debug, Clone, Copy)]
enum Stop {
    /// After this many requests.
    Count(u64),
    /// At the first arrival at or after this time (seconds).
    Duration(f64),
}

/// The typed inter-arrival gap distribution (seconds).
#[derive(Debug, Clone, Copy)]
enum Gap {
    Poisson { rate: f64 },
    Gamma { shape: f64, scale: f64 },
    Constant { gap_s: f64 },
}

#[derive(Debug, Clone, Copy)]
struct ArrivalModel {
    /// Mean rate, requests per second (for the duration-mode size check).
    rate: f64,
    gap: Gap,
    /// Cap on each gap, seconds.
    max_gap_s: Option<f64>,
}

impl ArrivalModel {
    /// The next inter-arrival gap in seconds (≥ 0).
    fn next_gap(&self, rng: &mut SimRng) -> f64 {
        let g = match self.gap {
            Gap::Poisson { rate } => rng.exponential(rate),
            Gap::Gamma { shape, scale } => rng.gamma(shape, scale),
            Gap::Constant { gap_s } => gap_s,
        };
        match self.max_gap_s {
            Some(cap) if g > cap => cap,
            _ => g,
        }
    }
}

/// The typed length distribution (before rounding and clamping).
#[derive(Debug, Clone)]
enum LengthDist {
    Fixed(u32),
    Uniform { min: u32, max: u32 },
    Normal { mean: f64, std: f64 },
    LogNormal { mu: f64, sigma: f64 },
    Zipf(Zipf),
}

#[derive(Debug, Clone)]
struct LengthModel {
    dist: LengthDist,
    /// Inclusive clamp, tokens (lo ≥ 1, lo ≤ hi).
    lo: u32,
    hi: u32,
}

impl LengthModel {
    /// One length in tokens, within `lo..=hi`.
    fn sample(&self, rng: &mut SimRng) -> u32 {
        let x = match &self.dist {
            LengthDist::Fixed(v) => return (*v).clamp(self.lo, self.hi),
            LengthDist::Uniform { min, max } => return rng.range_u32(*min, *max),
            LengthDist::Zipf(z) => return z.sample(rng),
            LengthDist::Normal { mean, std } => mean + std * rng.standard_normal(),
            LengthDist::LogNormal { mu, sigma } => libm::exp(mu + sigma * rng.standard_normal()),
        };
        round_clamp(x, self.lo, self.hi)
    }
}

/// Round a real-valued length to the nearest integer and clamp it to `lo..=hi` (NaN → lo).
fn round_clamp(x: f64, lo: u32, hi: u32) -> u32 {
    if x.is_nan() {
        return lo;
    }
    let r = x.round();
    if r <= f64::from(lo) {
        lo
    } else if r >= f64::from(hi) {
        hi
    } else {
        r as u32
    }
}

/// Zipf sampler over the integers `min..=max`, P(k) ∝ k^-s, by rejection-inversion
/// (Hörmann & Derflinger 1996): O(1) memory and expected O(1) time for any support size,
/// exact in distribution. Works for every s > 0, including s = 1 (the helper functions
/// below are the continuous limits of `(e^x - 1)/x` and `ln(1 + x)/x` near 0).
#[derive(Debug, Clone)]
struct Zipf {
    min: u32,
    max: u32,
    s: f64,
    /// H(min + 1/2) - h(min): lower end of the sampled hat area.
    h_lo: f64,
    /// H(max + 1/2): upper end of the sampled hat area.
    h_hi: f64,
}

impl Zipf {
    fn new(min: u32, max: u32, s: f64) -> Self {
        let mut z = Zipf {
            min,
            max,
            s,
            h_lo: 0.0,
            h_hi: 0.0,
        };
        z.h_lo = z.big_h(f64::from(min) + 0.5) - z.h(f64::from(min));
        z.h_hi = z.big_h(f64::from(max) + 0.5);
        z
    }

    /// The unnormalized density h(x) = x^-s.
    fn h(&self, x: f64) -> f64 {
        libm::exp(-self.s * libm::log(x))
    }

    /// H(x) = ∫ h = (x^(1-s) - 1)/(1-s) (ln x when s = 1), computed stably.
    fn big_h(&self, x: f64) -> f64 {
        let lx = libm::log(x);
        expm1_over_x((1.0 - self.s) * lx) * lx
    }

    /// The inverse of H.
    fn big_h_inv(&self, y: f64) -> f64 {
        let mut t = y * (1.0 - self.s);
        if t < -1.0 {
            // Only reachable through rounding; keeps the logarithm finite.
            t = -1.0;
        }
        libm::exp(log1p_over_x(t) * y)
    }

    fn sample(&self, rng: &mut SimRng) -> u32 {
        loop {
            // u is uniform over (h_lo, h_hi]: the hat area of all k in min..=max.
            let u = self.h_hi + rng.uniform() * (self.h_lo - self.h_hi);
            let x = self.big_h_inv(u);
            let k_f = (x + 0.5).floor();
            let k = if k_f <= f64::from(self.min) {
                self.min
            } else if k_f >= f64::from(self.max) {
                self.max
            } else {
                k_f as u32
            };
            // Accept when u falls in the part of k's hat slice whose area is exactly h(k).
            // For k = min this always holds (u > h_lo).
            let kf = f64::from(k);
            if u >= self.big_h(kf + 0.5) - self.h(kf) {
                return k;
            }
        }
    }
}

/// (e^x - 1)/x, continuous at 0.
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        libm::expm1(x) / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

/// ln(1 + x)/x, continuous at 0.
fn log1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        libm::log1p(x) / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

#[derive(Debug, Clone)]
struct Generated {
    arrival: ArrivalModel,
    stop: Stop,
    prompt: LengthModel,
    output: LengthModel,
    priority: i32,
}

impl Generated {
    fn generate(&self, seed: u64) -> Result<Vec<RequestSpec>> {
        let mut arrivals = SimRng::stream(seed, STREAM_ARRIVALS);
        let mut prompts = SimRng::stream(seed, STREAM_PROMPT);
        let mut outputs = SimRng::stream(seed, STREAM_OUTPUT);
        let capacity = match self.stop {
            Stop::Count(n) => n,
            Stop::Duration(d) => (self.arrival.rate * d).min(MAX_REQUESTS as f64) as u64,
        };
        let mut out = Vec::with_capacity(capacity as usize);
        let mut t_s = 0.0_f64;
        loop {
            let n = out.len() as u64;
            match self.stop {
                Stop::Count(limit) if n >= limit => break,
                Stop::Duration(d) if t_s.is_nan() || t_s >= d => break,
                Stop::Duration(_) if n >= MAX_REQUESTS => {
                    return Err(SimError::config(
                        "duration_s",
                        format!("the arrival process produced more than {MAX_REQUESTS} requests in this duration"),
                    ))
                }
                _ => {}
            }
            out.push(RequestSpec {
                id: n as u32,
                arrival_ns: seconds_to_ns(t_s),
                prompt_tokens: self.prompt.sample(&mut prompts),
                output_tokens: self.output.sample(&mut outputs),
                priority: self.priority,
            });
            t_s += self.arrival.next_gap(&mut arrivals);
        }
        Ok(out)
    }
}

/// Seconds (f64) to integer nanoseconds, rounded; saturates at the u64 range.
fn seconds_to_ns(t_s: f64) -> u64 {
    (t_s * 1e9).round() as u64
}

/// Validate the arrival process.
fn resolve_arrival(a: &ArrivalSpec) -> Result<ArrivalModel> {
    let kind = a.kind.as_deref().ok_or_else(|| {
        SimError::config(
            "arrival.kind",
            format!("required: one of {}", ARRIVAL_KINDS.join(", ")),
        )
    })?;
    if !ARRIVAL_KINDS.contains(&kind) {
        return Err(check::unknown_name(
            "arrival.kind",
            "arrival kind",
            kind,
            ARRIVAL_KINDS,
        ));
    }
    let rate = a
        .rate
        .ok_or_else(|| SimError::config("arrival.rate", "required (requests per second)"))?;
    check::positive("arrival.rate", rate)?;
    if let Some(cap) = a.max_gap_s {
        check::positive("arrival.max_gap_s", cap)?;
    }
    let gap = match kind {
        "gamma" => {
            let cv =
                a.cv.ok_or_else(|| SimError::config("arrival.cv", "required for kind 'gamma'"))?;
            check::positive("arrival.cv", cv)?;
            let shape = 1.0 / (cv * cv);
            let scale = 1.0 / (rate * shape);
            if !shape.is_finite() || !scale.is_finite() || scale <= 0.0 {
                return Err(SimError::config(
                    "arrival.cv",
                    format!(
                        "cv = {cv} with rate = {rate} gives an unrepresentable gamma distribution"
                    ),
                ));
            }
            Gap::Gamma { shape, scale }
        }
        other => {
            if a.cv.is_some() {
                return Err(SimError::config(
                    "arrival.cv",
                    format!("only used by kind 'gamma', not '{other}'"),
                ));
            }
            if other == "poisson" {
                Gap::Poisson { rate }
            } else {
                Gap::Constant { gap_s: 1.0 / rate }
            }
        }
    };
    Ok(ArrivalModel {
        rate,
        gap,
        max_gap_s: a.max_gap_s,
    })
}

/// A required token count (≥ 1) at `prefix.name`.
fn required_tokens(prefix: &str, name: &str, value: Option<u32>, kind: &str) -> Result<u32> {
    let v = value.ok_or_else(|| {
        SimError::config(
            format!("{prefix}.{name}"),
            format!("required for kind '{kind}'"),
        )
    })?;
    tokens_at_least_one(&format!("{prefix}.{name}"), v)?;
    Ok(v)
}

/// A token count must be ≥ 1.
fn tokens_at_least_one(path: &str, v: u32) -> Result<()> {
    if v < 1 {
        return Err(SimError::config(
            path,
            format!("must be >= 1 token (got {v})"),
        ));
    }
    Ok(())
}

/// A required finite real at `prefix.name`.
fn required_real(prefix: &str, name: &str, value: Option<f64>, kind: &str) -> Result<f64> {
    value.ok_or_else(|| {
        SimError::config(
            format!("{prefix}.{name}"),
            format!("required for kind '{kind}'"),
        )
    })
}

/// `min <= max`, reported at `prefix.max`.
fn ordered(prefix: &str, min: u32, max: u32) -> Result<()> {
    if min > max {
        return Err(SimError::config(
            format!("{prefix}.max"),
            format!("must be >= min ({min}) (got {max})"),
        ));
    }
    Ok(())
}

/// Validate a length distribution found at `prefix` (`prompt` or `output`).
fn resolve_length(spec: &LengthSpec, prefix: &str) -> Result<LengthModel> {
    let kind = spec.kind.as_deref().ok_or_else(|| {
        SimError::config(
            format!("{prefix}.kind"),
            format!("required: one of {}", LENGTH_KINDS.join(", ")),
        )
    })?;
    let allowed: &[&str] = match kind {
        "fixed" => &["value", "min", "max"],
        "uniform" => &["min", "max"],
        "normal" => &["mean", "std", "min", "max"],
        "lognormal" => &["mean", "sigma", "min", "max"],
        "zipf" => &["min", "max", "s"],
        other => {
            return Err(check::unknown_name(
                &format!("{prefix}.kind"),
                "length distribution kind",
                other,
                LENGTH_KINDS,
            ))
        }
    };
    if let Some((name, _)) = spec
        .present_fields()
        .iter()
        .find(|(name, present)| *present && !allowed.contains(name))
    {
        return Err(SimError::config(
            format!("{prefix}.{name}"),
            format!(
                "not used by kind '{kind}' (it takes: {})",
                allowed.join(", ")
            ),
        ));
    }

    // Clamps for the kinds where min/max are optional.
    let clamps = || -> Result<(u32, u32)> {
        let lo = spec.min.unwrap_or(1);
        let hi = spec.max.unwrap_or(u32::MAX);
        if spec.min.is_some() {
            tokens_at_least_one(&format!("{prefix}.min"), lo)?;
        }
        if spec.max.is_some() {
            tokens_at_least_one(&format!("{prefix}.max"), hi)?;
        }
        ordered(prefix, lo, hi)?;
        Ok((lo, hi))
    };

    let (dist, lo, hi) = match kind {
        "fixed" => {
            let v = required_tokens(prefix, "value", spec.value, kind)?;
            let (lo, hi) = clamps()?;
            (LengthDist::Fixed(v), lo, hi)
        }
        "uniform" => {
            let min = required_tokens(prefix, "min", spec.min, kind)?;
            let max = required_tokens(prefix, "max", spec.max, kind)?;
            ordered(prefix, min, max)?;
            (LengthDist::Uniform { min, max }, min, max)
        }
        "normal" => {
            let mean = required_real(prefix, "mean", spec.mean, kind)?;
            check::positive(&format!("{prefix}.mean"), mean)?;
            let std = required_real(prefix, "std", spec.std, kind)?;
            check::non_negative(&format!("{prefix}.std"), std)?;
            let (lo, hi) = clamps()?;
            (LengthDist::Normal { mean, std }, lo, hi)
        }
        "lognormal" => {
            let mean = required_real(prefix, "mean", spec.mean, kind)?;
            check::positive(&format!("{prefix}.mean"), mean)?;
            let sigma = required_real(prefix, "sigma", spec.sigma, kind)?;
            check::non_negative(&format!("{prefix}.sigma"), sigma)?;
            let mu = libm::log(mean) - 0.5 * sigma * sigma;
            check::finite(&format!("{prefix}.sigma"), mu).map_err(|_| {
                SimError::config(
                    format!("{prefix}.sigma"),
                    format!("too large (got {sigma})"),
                )
            })?;
            let (lo, hi) = clamps()?;
            (LengthDist::LogNormal { mu, sigma }, lo, hi)
        }
        _ => {
            // zipf (the kind was matched above)
            let min = required_tokens(prefix, "min", spec.min, kind)?;
            let max = required_tokens(prefix, "max", spec.max, kind)?;
            ordered(prefix, min, max)?;
            let s = required_real(prefix, "s", spec.s, kind)?;
            check::positive(&format!("{prefix}.s"), s)?;
            (LengthDist::Zipf(Zipf::new(min, max, s)), min, max)
        }
    };
    Ok(LengthModel { dist, lo, hi })
}

/// Validate an explicit list and convert it to sorted [`RequestSpec`]s.
fn resolve_explicit(list: &[ExplicitRequest], max_model_len: u32) -> Result<Vec<RequestSpec>> {
    if list.is_empty() {
        return Err(SimError::config(
            "requests",
            "must contain at least one request",
        ));
    }
    if list.len() as u64 > MAX_REQUESTS {
        return Err(SimError::config(
            "requests",
            format!(
                "too many requests ({}); the limit is {MAX_REQUESTS}",
                list.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(list.len());
    for (i, r) in list.iter().enumerate() {
        let path = |field: &str| format!("requests[{i}].{field}");
        let arrival_ms = r
            .arrival_ms
            .ok_or_else(|| SimError::config(path("arrival_ms"), "required (milliseconds)"))?;
        check::non_negative(&path("arrival_ms"), arrival_ms)?;
        let prompt = r
            .prompt_tokens
            .ok_or_else(|| SimError::config(path("prompt_tokens"), "required"))?;
        tokens_at_least_one(&path("prompt_tokens"), prompt)?;
        let output = r
            .output_tokens
            .ok_or_else(|| SimError::config(path("output_tokens"), "required"))?;
        tokens_at_least_one(&path("output_tokens"), output)?;
        let total = u64::from(prompt) + u64::from(output);
        if total > u64::from(max_model_len) {
            return Err(SimError::config(
                path("prompt_tokens"),
                format!(
                    "prompt_tokens + output_tokens = {total} exceeds the model's max_model_len ({max_model_len})"
                ),
            ));
        }
        out.push(RequestSpec {
            id: i as u32,
            arrival_ns: (arrival_ms * 1e6).round() as u64,
            prompt_tokens: prompt,
            output_tokens: output,
            priority: r.priority.unwrap_or(0),
        });
    }
    // Stable order: by arrival, ties by list position.
    out.sort_by_key(|r| (r.arrival_ns, r.id));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MML: u32 = 1_000_000;

    fn generated(
        arrival: ArrivalSpec,
        n: u64,
        prompt: LengthSpec,
        output: LengthSpec,
    ) -> WorkloadSpec {
        WorkloadSpec {
            arrival: Some(arrival),
            num_requests: Some(n),
            duration_s: None,
            prompt: Some(prompt),
            output: Some(output),
            priority: None,
            requests: None,
        }
    }

    fn err_path(spec: &WorkloadSpec) -> String {
        let err = spec.validate(MML).expect_err("expected a config error");
        assert_eq!(err.kind_name(), "ConfigError", "{err}");
        err.path().expect("config error has a path").to_string()
    }

    fn mean_cv(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
        (mean, var.sqrt() / mean)
    }

    fn gaps_s(reqs: &[RequestSpec]) -> Vec<f64> {
        reqs.windows(2)
            .map(|w| (w[1].arrival_ns - w[0].arrival_ns) as f64 * 1e-9)
            .collect()
    }

    #[test]
    fn default_is_valid() {
        let w = WorkloadSpec::default();
        w.validate(MML).unwrap();
        let reqs = w.generate(1, MML).unwrap();
        assert_eq!(reqs.len(), 100);
        assert_eq!(w.num_requests_hint(), Some(100));
        assert_eq!(reqs[0].arrival_ns, 0);
        assert!(reqs
            .iter()
            .all(|r| r.prompt_tokens == 512 && r.output_tokens == 128 && r.priority == 0));
    }

    #[test]
    fn determinism() {
        let w = generated(
            ArrivalSpec::gamma(5.0, 2.0),
            1000,
            LengthSpec::lognormal(300.0, 0.8),
            LengthSpec::zipf(1, 2000, 1.1),
        );
        let a = w.generate(11, MML).unwrap();
        let b = w.generate(11, MML).unwrap();
        assert_eq!(a, b);
        let c = w.generate(12, MML).unwrap();
        assert_ne!(a, c);
    }

    #[test]
    fn streams_are_separate() {
        let a = generated(
            ArrivalSpec::poisson(3.0),
            500,
            LengthSpec::fixed(10),
            LengthSpec::fixed(5),
        );
        let mut b = a.clone();
        b.output = Some(LengthSpec::normal(100.0, 30.0));
        b.prompt = Some(LengthSpec::uniform(1, 100));
        let ra = a.generate(3, MML).unwrap();
        let rb = b.generate(3, MML).unwrap();
        let ta: Vec<u64> = ra.iter().map(|r| r.arrival_ns).collect();
        let tb: Vec<u64> = rb.iter().map(|r| r.arrival_ns).collect();
        assert_eq!(ta, tb);
        // Changing the output distribution does not change prompts.
        let mut c = b.clone();
        c.output = Some(LengthSpec::fixed(7));
        let rc = c.generate(3, MML).unwrap();
        assert!(rb
            .iter()
            .zip(&rc)
            .all(|(x, y)| x.prompt_tokens == y.prompt_tokens));
    }

    #[test]
    fn poisson_mean_gap() {
        let w = generated(
            ArrivalSpec::poisson(4.0),
            200_001,
            LengthSpec::fixed(1),
            LengthSpec::fixed(1),
        );
        let reqs = w.generate(5, MML).unwrap();
        let (mean, cv) = mean_cv(&gaps_s(&reqs));
        assert!((mean - 0.25).abs() / 0.25 < 0.03, "mean gap {mean}");
        assert!((cv - 1.0).abs() < 0.05, "cv {cv}");
        assert!(reqs.windows(2).all(|w| w[0].arrival_ns <= w[1].arrival_ns));
    }

    #[test]
    fn gamma_cv() {
        for &cv_target in &[0.5, 2.0] {
            let w = generated(
                ArrivalSpec::gamma(10.0, cv_target),
                200_001,
                LengthSpec::fixed(1),
                LengthSpec::fixed(1),
            );
            let reqs = w.generate(6, MML).unwrap();
            let (mean, cv) = mean_cv(&gaps_s(&reqs));
            assert!((mean - 0.1).abs() / 0.1 < 0.03, "mean gap {mean}");
            assert!(
                (cv - cv_target).abs() / cv_target < 0.05,
                "cv {cv} vs {cv_target}"
            );
        }
    }

    #[test]
    fn constant_and_max_gap() {
        let w = generated(
            ArrivalSpec::constant(4.0),
            5,
            LengthSpec::fixed(1),
            LengthSpec::fixed(1),
        );
        let t: Vec<u64> = w
            .generate(0, MML)
            .unwrap()
            .iter()
            .map(|r| r.arrival_ns)
            .collect();
        assert_eq!(
            t,
            vec![0, 250_000_000, 500_000_000, 750_000_000, 1_000_000_000]
        );

        let mut a = ArrivalSpec::poisson(1.0);
        a.max_gap_s = Some(3.0);
        let w = generated(a, 50_000, LengthSpec::fixed(1), LengthSpec::fixed(1));
        let reqs = w.generate(8, MML).unwrap();
        let gaps = gaps_s(&reqs);
        assert!(gaps.iter().all(|g| *g <= 3.0 + 1e-9));
        assert!(
            gaps.iter().any(|g| (*g - 3.0).abs() < 1e-9),
            "some gap should hit the cap"
        );
    }

    #[test]
    fn duration_mode() {
        let w = WorkloadSpec {
            arrival: Some(ArrivalSpec::poisson(100.0)),
            num_requests: None,
            duration_s: Some(50.0),
            prompt: Some(LengthSpec::fixed(3)),
            output: Some(LengthSpec::fixed(4)),
            priority: Some(-2),
            requests: None,
        };
        assert_eq!(w.num_requests_hint(), None);
        let reqs = w.generate(9, MML).unwrap();
        assert!(reqs
            .iter()
            .all(|r| r.arrival_ns < 50_000_000_000 && r.priority == -2));
        assert!((4700..=5300).contains(&reqs.len()), "{}", reqs.len());
        assert!(reqs.iter().enumerate().all(|(i, r)| r.id == i as u32));

        let c = WorkloadSpec {
            arrival: Some(ArrivalSpec::constant(2.0)),
            duration_s: Some(2.0),
            ..w
        };
        assert_eq!(c.generate(0, MML).unwrap().len(), 4); // t = 0, 0.5, 1.0, 1.5
    }

    #[test]
    fn lognormal_mean() {
        let w = generated(
            ArrivalSpec::poisson(1.0),
            200_000,
            LengthSpec::lognormal(500.0, 1.0),
            LengthSpec::fixed(1),
        );
        let xs: Vec<f64> = w
            .generate(10, MML)
            .unwrap()
            .iter()
            .map(|r| f64::from(r.prompt_tokens))
            .collect();
        let (mean, _) = mean_cv(&xs);
        assert!((mean - 500.0).abs() / 500.0 < 0.03, "mean {mean}");
    }

    #[test]
    fn normal_and_uniform_moments() {
        let w = generated(
            ArrivalSpec::poisson(1.0),
            100_000,
            LengthSpec::normal(1000.0, 100.0),
            LengthSpec::uniform(10, 20),
        );
        let reqs = w.generate(10, MML).unwrap();
        let p: Vec<f64> = reqs.iter().map(|r| f64::from(r.prompt_tokens)).collect();
        let (mean, cv) = mean_cv(&p);
        assert!(
            (mean - 1000.0).abs() < 2.0 && (cv - 0.1).abs() < 0.005,
            "{mean} {cv}"
        );
        let mut seen = [0u32; 11];
        for r in &reqs {
            seen[(r.output_tokens - 10) as usize] += 1;
        }
        assert!(seen.iter().all(|c| (8_500..=9_700).contains(c)), "{seen:?}");
    }

    #[test]
    fn zipf_support_and_mode() {
        for &(min, max, s) in &[
            (1u32, 50u32, 1.0),
            (5, 40, 1.5),
            (3, 10_000_000, 0.7),
            (2, 2, 3.0),
        ] {
            let w = generated(
                ArrivalSpec::poisson(1.0),
                50_000,
                LengthSpec::zipf(min, max, s),
                LengthSpec::fixed(1),
            );
            let reqs = w.generate(13, MML).unwrap();
            assert!(reqs.iter().all(|r| (min..=max).contains(&r.prompt_tokens)));
            let mut counts = std::collections::BTreeMap::new();
            for r in &reqs {
                *counts.entry(r.prompt_tokens).or_insert(0u32) += 1;
            }
            let mode = counts
                .iter()
                .max_by_key(|(k, c)| (**c, std::cmp::Reverse(**k)))
                .map(|(k, _)| *k)
                .unwrap();
            assert_eq!(mode, min, "support {min}..={max} s={s}");
        }
    }

    #[test]
    fn zipf_matches_pmf() {
        let (min, max, s) = (3u32, 12u32, 1.2);
        let z = Zipf::new(min, max, s);
        let mut rng = SimRng::new(77);
        let n = 200_000;
        let mut counts = [0u32; 10];
        for _ in 0..n {
            counts[(z.sample(&mut rng) - min) as usize] += 1;
        }
        let weights: Vec<f64> = (min..=max).map(|k| libm::pow(f64::from(k), -s)).collect();
        let total: f64 = weights.iter().sum();
        for (i, w) in weights.iter().enumerate() {
            let p = w / total;
            let got = f64::from(counts[i]) / n as f64;
            let sd = (p * (1.0 - p) / n as f64).sqrt();
            assert!(
                (got - p).abs() < 5.0 * sd,
                "k={} got {got} want {p}",
                min + i as u32
            );
        }
    }

    #[test]
    fn clamps_hold() {
        let cases = [
            LengthSpec::normal(100.0, 500.0).clamped(Some(20), Some(300)),
            LengthSpec::lognormal(100.0, 2.0).clamped(Some(5), Some(150)),
            LengthSpec::fixed(1000).clamped(None, Some(64)),
            LengthSpec::fixed(3).clamped(Some(8), None),
            LengthSpec::normal(1.0, 50.0),
        ];
        let bounds = [(20, 300), (5, 150), (64, 64), (8, 8), (1, u32::MAX)];
        for (len, (lo, hi)) in cases.iter().zip(bounds) {
            let w = generated(
                ArrivalSpec::poisson(1.0),
                5_000,
                len.clone(),
                LengthSpec::fixed(1),
            );
            let reqs = w.generate(14, MML).unwrap();
            assert!(
                reqs.iter()
                    .all(|r| r.prompt_tokens >= lo && r.prompt_tokens <= hi),
                "{len:?}"
            );
            if lo != hi {
                assert!(
                    reqs.iter().any(|r| r.prompt_tokens == lo),
                    "{len:?} never hits lo"
                );
            }
        }
    }

    #[test]
    fn explicit_list_keeps_ids_and_sorts() {
        let mut reqs = vec![
            ExplicitRequest::new(20.0, 10, 5),
            ExplicitRequest::new(0.0, 11, 6),
            ExplicitRequest::new(20.0, 12, 7),
            ExplicitRequest::new(1.5, 13, 8),
        ];
        reqs[3].priority = Some(-1);
        let w = WorkloadSpec::explicit(reqs);
        assert_eq!(w.num_requests_hint(), Some(4));
        let out = w.generate(123, MML).unwrap();
        let ids: Vec<u32> = out.iter().map(|r| r.id).collect();
        assert_eq!(ids, vec![1, 3, 0, 2]);
        assert_eq!(
            out[1],
            RequestSpec {
                id: 3,
                arrival_ns: 1_500_000,
                prompt_tokens: 13,
                output_tokens: 8,
                priority: -1
            }
        );
        assert_eq!(out[2].arrival_ns, 20_000_000);
        // The seed does not matter for an explicit list.
        assert_eq!(out, w.generate(9, MML).unwrap());
    }

    #[test]
    fn explicit_too_long_for_model() {
        let w = WorkloadSpec::explicit(vec![
            ExplicitRequest::new(0.0, 10, 5),
            ExplicitRequest::new(0.0, 100, 29),
        ]);
        let err = w.generate(0, 128).unwrap_err();
        assert_eq!(err.path(), Some("requests[1].prompt_tokens"));
        assert!(w.generate(0, 129).is_ok());
        assert_eq!(
            w.validate(128).unwrap_err().path(),
            Some("requests[1].prompt_tokens")
        );
        let under = w.validate(128).unwrap_err().under("workload");
        assert_eq!(under.path(), Some("workload.requests[1].prompt_tokens"));
    }

    #[test]
    fn bad_inputs_name_their_path() {
        let ok = WorkloadSpec::default();
        let with = |f: &dyn Fn(&mut WorkloadSpec)| {
            let mut w = ok.clone();
            f(&mut w);
            err_path(&w)
        };
        let arr = |f: &dyn Fn(&mut ArrivalSpec)| {
            with(&|w: &mut WorkloadSpec| f(w.arrival.as_mut().unwrap()))
        };
        let prompt = |l: LengthSpec| with(&|w: &mut WorkloadSpec| w.prompt = Some(l.clone()));

        // Arrival.
        assert_eq!(arr(&|a| a.rate = Some(0.0)), "arrival.rate");
        assert_eq!(arr(&|a| a.rate = Some(-1.0)), "arrival.rate");
        assert_eq!(arr(&|a| a.rate = Some(f64::NAN)), "arrival.rate");
        assert_eq!(arr(&|a| a.rate = Some(f64::INFINITY)), "arrival.rate");
        assert_eq!(arr(&|a| a.rate = None), "arrival.rate");
        assert_eq!(arr(&|a| a.kind = None), "arrival.kind");
        assert_eq!(arr(&|a| a.kind = Some("poison".into())), "arrival.kind");
        assert_eq!(arr(&|a| a.cv = Some(1.0)), "arrival.cv");
        assert_eq!(
            arr(&|a| *a = ArrivalSpec {
                cv: None,
                ..ArrivalSpec::gamma(1.0, 1.0)
            }),
            "arrival.cv"
        );
        assert_eq!(arr(&|a| *a = ArrivalSpec::gamma(1.0, 0.0)), "arrival.cv");
        assert_eq!(
            arr(&|a| *a = ArrivalSpec::gamma(1.0, f64::NAN)),
            "arrival.cv"
        );
        assert_eq!(arr(&|a| *a = ArrivalSpec::gamma(1.0, 1e-200)), "arrival.cv");
        assert_eq!(arr(&|a| a.max_gap_s = Some(0.0)), "arrival.max_gap_s");
        assert_eq!(arr(&|a| a.max_gap_s = Some(f64::NAN)), "arrival.max_gap_s");

        // Count / duration.
        assert_eq!(with(&|w| w.num_requests = Some(0)), "num_requests");
        assert_eq!(
            with(&|w| w.num_requests = Some(MAX_REQUESTS + 1)),
            "num_requests"
        );
        assert_eq!(with(&|w| w.duration_s = Some(10.0)), "duration_s");
        assert_eq!(with(&|w| w.num_requests = None), "num_requests");
        let dur = |d: f64, rate: f64| {
            with(&|w| {
                w.num_requests = None;
                w.duration_s = Some(d);
                w.arrival = Some(ArrivalSpec::poisson(rate));
            })
        };
        assert_eq!(dur(0.0, 1.0), "duration_s");
        assert_eq!(dur(-5.0, 1.0), "duration_s");
        assert_eq!(dur(f64::NAN, 1.0), "duration_s");
        assert_eq!(dur(1e6, 100.0), "duration_s"); // 1e8 expected requests
        assert_eq!(
            with(&|w| {
                w.num_requests = None;
                w.duration_s = Some(1e3);
                w.arrival = Some(ArrivalSpec {
                    max_gap_s: Some(1e-6),
                    ..ArrivalSpec::poisson(1.0)
                });
            }),
            "duration_s"
        );

        // Missing sections.
        assert_eq!(with(&|w| w.arrival = None), "arrival");
        assert_eq!(with(&|w| w.prompt = None), "prompt");
        assert_eq!(with(&|w| w.output = None), "output");

        // Lengths.
        assert_eq!(prompt(LengthSpec::fixed(0)), "prompt.value");
        assert_eq!(
            prompt(LengthSpec {
                value: None,
                ..LengthSpec::fixed(1)
            }),
            "prompt.value"
        );
        assert_eq!(
            prompt(LengthSpec {
                kind: None,
                ..LengthSpec::fixed(1)
            }),
            "prompt.kind"
        );
        assert_eq!(
            prompt(LengthSpec {
                kind: Some("fixd".into()),
                ..LengthSpec::fixed(1)
            }),
            "prompt.kind"
        );
        assert_eq!(
            prompt(LengthSpec {
                mean: Some(3.0),
                ..LengthSpec::fixed(1)
            }),
            "prompt.mean"
        );
        assert_eq!(
            prompt(LengthSpec::fixed(5).clamped(Some(10), Some(4))),
            "prompt.max"
        );
        assert_eq!(
            prompt(LengthSpec::fixed(5).clamped(Some(0), None)),
            "prompt.min"
        );
        assert_eq!(prompt(LengthSpec::uniform(10, 5)), "prompt.max");
        assert_eq!(prompt(LengthSpec::uniform(0, 5)), "prompt.min");
        assert_eq!(
            prompt(LengthSpec {
                max: None,
                ..LengthSpec::uniform(1, 5)
            }),
            "prompt.max"
        );
        assert_eq!(prompt(LengthSpec::normal(100.0, -1.0)), "prompt.std");
        assert_eq!(prompt(LengthSpec::normal(f64::NAN, 1.0)), "prompt.mean");
        assert_eq!(
            prompt(LengthSpec::normal(100.0, f64::INFINITY)),
            "prompt.std"
        );
        assert_eq!(
            prompt(LengthSpec {
                std: None,
                ..LengthSpec::normal(1.0, 1.0)
            }),
            "prompt.std"
        );
        assert_eq!(
            prompt(LengthSpec {
                sigma: Some(1.0),
                ..LengthSpec::normal(1.0, 1.0)
            }),
            "prompt.sigma"
        );
        assert_eq!(prompt(LengthSpec::lognormal(100.0, -0.1)), "prompt.sigma");
        assert_eq!(prompt(LengthSpec::lognormal(0.0, 0.5)), "prompt.mean");
        assert_eq!(prompt(LengthSpec::lognormal(100.0, 1e200)), "prompt.sigma");
        assert_eq!(prompt(LengthSpec::zipf(1, 100, 0.0)), "prompt.s");
        assert_eq!(prompt(LengthSpec::zipf(1, 100, f64::NAN)), "prompt.s");
        assert_eq!(prompt(LengthSpec::zipf(50, 10, 1.0)), "prompt.max");
        assert_eq!(prompt(LengthSpec::zipf(0, 10, 1.0)), "prompt.min");
        assert_eq!(
            with(&|w| w.output = Some(LengthSpec::fixed(0))),
            "output.value"
        );

        // Explicit list.
        let ex = |reqs: Vec<ExplicitRequest>| err_path(&WorkloadSpec::explicit(reqs));
        let good = ExplicitRequest::new(0.0, 1, 1);
        assert_eq!(ex(vec![]), "requests");
        assert_eq!(
            ex(vec![good.clone(), ExplicitRequest::new(-1.0, 1, 1)]),
            "requests[1].arrival_ms"
        );
        assert_eq!(
            ex(vec![ExplicitRequest::new(f64::NAN, 1, 1)]),
            "requests[0].arrival_ms"
        );
        assert_eq!(
            ex(vec![ExplicitRequest::new(f64::INFINITY, 1, 1)]),
            "requests[0].arrival_ms"
        );
        assert_eq!(
            ex(vec![
                good.clone(),
                good.clone(),
                ExplicitRequest::new(0.0, 0, 1)
            ]),
            "requests[2].prompt_tokens"
        );
        assert_eq!(
            ex(vec![ExplicitRequest::new(0.0, 1, 0)]),
            "requests[0].output_tokens"
        );
        assert_eq!(
            ex(vec![ExplicitRequest {
                prompt_tokens: None,
                ..good.clone()
            }]),
            "requests[0].prompt_tokens"
        );
        assert_eq!(
            ex(vec![ExplicitRequest {
                output_tokens: None,
                ..good.clone()
            }]),
            "requests[0].output_tokens"
        );
        assert_eq!(
            ex(vec![ExplicitRequest {
                arrival_ms: None,
                ..good.clone()
            }]),
            "requests[0].arrival_ms"
        );

        // Mixing the two forms.
        let mixed = WorkloadSpec {
            requests: Some(vec![good.clone()]),
            ..WorkloadSpec::default()
        };
        assert_eq!(err_path(&mixed), "arrival");
        let mixed = WorkloadSpec {
            priority: Some(1),
            ..WorkloadSpec::explicit(vec![good.clone()])
        };
        assert_eq!(err_path(&mixed), "priority");
        let mixed = WorkloadSpec {
            duration_s: Some(1.0),
            ..WorkloadSpec::explicit(vec![good])
        };
        assert_eq!(err_path(&mixed), "duration_s");
    }

    #[test]
    fn nan_message() {
        let mut w = WorkloadSpec::default();
        w.arrival.as_mut().unwrap().rate = Some(f64::NAN);
        let err = w.validate(MML).unwrap_err();
        assert_eq!(
            err.to_string(),
            "arrival.rate: must be a finite number (got NaN)"
        );
        let err = err.under("workload");
        assert_eq!(err.path(), Some("workload.arrival.rate"));
    }

    #[test]
    fn unknown_kind_suggests() {
        let mut w = WorkloadSpec::default();
        w.arrival.as_mut().unwrap().kind = Some("poison".into());
        let msg = w.validate(MML).unwrap_err().to_string();
        assert!(msg.contains("did you mean poisson"), "{msg}");
    }

    #[test]
    fn parse_json() {
        let json = r#"{
            "arrival": {"kind": "gamma", "rate": 2, "cv": 3.0, "max_gap_s": 1.5},
            "duration_s": 60,
            "prompt": {"kind": "lognormal", "mean": 800, "sigma": 0.5, "max": 4000},
            "output": {"kind": "zipf", "min": 1, "max": 1000, "s": 1.1},
            "priority": 3
        }"#;
        let w: WorkloadSpec = serde_json::from_str(json).unwrap();
        assert_eq!(
            w.arrival,
            Some(ArrivalSpec {
                max_gap_s: Some(1.5),
                ..ArrivalSpec::gamma(2.0, 3.0)
            })
        );
        assert_eq!(w.duration_s, Some(60.0));
        assert_eq!(
            w.prompt,
            Some(LengthSpec::lognormal(800.0, 0.5).clamped(None, Some(4000)))
        );
        assert_eq!(w.priority, Some(3));
        w.validate(MML).unwrap();
        let reqs = w.generate(1, MML).unwrap();
        assert!(
            !reqs.is_empty()
                && reqs
                    .iter()
                    .all(|r| r.priority == 3 && r.prompt_tokens <= 4000)
        );

        // Round trip through Serialize (the resolved scenario is echoed back).
        let echoed = serde_json::to_string(&w).unwrap();
        assert!(!echoed.contains("null"), "{echoed}");
        let back: WorkloadSpec = serde_json::from_str(&echoed).unwrap();
        assert_eq!(back, w);

        let explicit = r#"{"requests": [
            {"arrival_ms": 5, "prompt_tokens": 10, "output_tokens": 2, "priority": -1},
            {"arrival_ms": 0.25, "prompt_tokens": 20, "output_tokens": 4}
        ]}"#;
        let w: WorkloadSpec = serde_json::from_str(explicit).unwrap();
        let reqs = w.generate(0, MML).unwrap();
        assert_eq!(
            reqs[0],
            RequestSpec {
                id: 1,
                arrival_ns: 250_000,
                prompt_tokens: 20,
                output_tokens: 4,
                priority: 0
            }
        );
        assert_eq!(reqs[1].priority, -1);

        let d = WorkloadSpec::default();
        let back: WorkloadSpec = serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
        assert_eq!(back, d);
    }

    #[test]
    fn parse_toml() {
        let text = r#"
            num_requests = 10
            [arrival]
            kind = "poisson"
            rate = 5
            [prompt]
            kind = "uniform"
            min = 10
            max = 20
            [output]
            kind = "normal"
            mean = 100.0
            std = 10
            min = 50
        "#;
        let w: WorkloadSpec = toml::from_str(text).unwrap();
        assert_eq!(w.arrival, Some(ArrivalSpec::poisson(5.0)));
        assert_eq!(
            w.output,
            Some(LengthSpec::normal(100.0, 10.0).clamped(Some(50), None))
        );
        assert_eq!(w.generate(2, MML).unwrap().len(), 10);

        let explicit = r#"
            [[requests]]
            arrival_ms = 1.0
            prompt_tokens = 3
            output_tokens = 4
        "#;
        let w: WorkloadSpec = toml::from_str(explicit).unwrap();
        assert_eq!(w.generate(0, MML).unwrap().len(), 1);

        // TOML can spell NaN; validation names the field.
        let nan = "num_requests = 1\n[arrival]\nkind = \"poisson\"\nrate = nan\n[prompt]\nkind = \"fixed\"\nvalue = 1\n[output]\nkind = \"fixed\"\nvalue = 1\n";
        let w: WorkloadSpec = toml::from_str(nan).unwrap();
        let err = w.validate(MML).unwrap_err();
        assert_eq!(err.path(), Some("arrival.rate"));
        assert!(
            err.to_string()
                .contains("must be a finite number (got NaN)"),
            "{err}"
        );
    }

    #[test]
    fn unknown_fields_rejected() {
        let cases = [
            r#"{"arival": {"kind": "poisson", "rate": 1}}"#,
            r#"{"arrival": {"kind": "poisson", "rate": 1, "burst": 2}}"#,
            r#"{"requests": [{"arrival_ms": 0, "prompt_tokens": 1, "output_tokens": 1, "x": 1}]}"#,
            r#"{"prompt": {"kind": "fixed", "value": 1, "avg": 3}}"#,
        ];
        for c in cases {
            let err = serde_json::from_str::<WorkloadSpec>(c)
                .unwrap_err()
                .to_string();
            assert!(err.contains("unknown field"), "{c}: {err}");
        }
        assert!(toml::from_str::<WorkloadSpec>("foo = 1").is_err());
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn clamp_pair() -> impl Strategy<Value = (Option<u32>, Option<u32>)> {
            (
                proptest::option::of(1u32..500),
                proptest::option::of(1u32..5000),
            )
                .prop_map(|(lo, hi)| match (lo, hi) {
                    (Some(l), Some(h)) if l > h => (Some(h), Some(l)),
                    other => other,
                })
        }

        fn length() -> impl Strategy<Value = LengthSpec> {
            prop_oneof![
                (1u32..10_000, clamp_pair())
                    .prop_map(|(v, (lo, hi))| LengthSpec::fixed(v).clamped(lo, hi)),
                (1u32..1000, 0u32..1000).prop_map(|(a, d)| LengthSpec::uniform(a, a + d)),
                (-100.0f64..2000.0, 0.0f64..1000.0, clamp_pair())
                    .prop_filter("mean > 0", |(m, _, _)| *m > 0.0)
                    .prop_map(|(m, s, (lo, hi))| LengthSpec::normal(m, s).clamped(lo, hi)),
                (0.5f64..5000.0, 0.0f64..4.0, clamp_pair())
                    .prop_map(|(m, s, (lo, hi))| LengthSpec::lognormal(m, s).clamped(lo, hi)),
                (1u32..1000, 0u32..2_000_000, 0.01f64..5.0).prop_map(|(a, d, s)| LengthSpec::zipf(
                    a,
                    a + d,
                    s
                )),
            ]
        }

        fn arrival() -> impl Strategy<Value = ArrivalSpec> {
            (
                0u8..3,
                0.01f64..1000.0,
                0.1f64..5.0,
                proptest::option::of(0.001f64..10.0),
            )
                .prop_map(|(k, rate, cv, cap)| {
                    let mut a = match k {
                        0 => ArrivalSpec::poisson(rate),
                        1 => ArrivalSpec::gamma(rate, cv),
                        _ => ArrivalSpec::constant(rate),
                    };
                    a.max_gap_s = cap;
                    a
                })
        }

        fn bounds(l: &LengthSpec) -> (u32, u32) {
            (l.min.unwrap_or(1).max(1), l.max.unwrap_or(u32::MAX))
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(200))]
            #[test]
            fn generated_requests_respect_bounds(
                a in arrival(), p in length(), o in length(), n in 1u64..300, seed in any::<u64>()
            ) {
                let w = generated(a, n, p.clone(), o.clone());
                w.validate(MML).unwrap();
                let reqs = w.generate(seed, MML).unwrap();
                prop_assert_eq!(reqs.len() as u64, n);
                prop_assert_eq!(reqs[0].arrival_ns, 0);
                let (plo, phi) = bounds(&p);
                let (olo, ohi) = bounds(&o);
                for (i, r) in reqs.iter().enumerate() {
                    prop_assert_eq!(r.id, i as u32);
                    prop_assert!(r.prompt_tokens >= 1 && r.prompt_tokens >= plo && r.prompt_tokens <= phi);
                    prop_assert!(r.output_tokens >= 1 && r.output_tokens >= olo && r.output_tokens <= ohi);
                }
                prop_assert!(reqs.windows(2).all(|w| w[0].arrival_ns <= w[1].arrival_ns));
            }
        }
    }
}
