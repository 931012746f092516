//! The serving front end: what lies between a client and the engine.
//!
//! A benchmark client measures TTFT and E2E from the moment it sends a request to the moment
//! a streamed chunk reaches it. In between sit the API server (HTTP parsing, request
//! validation, tokenisation of the prompt, the hand-off to the engine core's input queue) and,
//! for every token, the way back (the engine core's output message, incremental
//! detokenisation, the SSE chunk, the network and the client's parse). The API server handles
//! the outputs of one engine step one request after another, so a token waits on average for
//! half of its step's outputs.
//!
//! The model, per request of `p` prompt tokens:
//! * the engine receives it `request_ms + p · prompt_token_us` after the client sent it;
//! * a token the engine produced in a step with `B` outputs reaches the client
//!   `token_ms + batch_token_us · (B + 1) / 2` later.
//!
//! So client TTFT = engine TTFT + ingest + the first token's way back, client E2E likewise
//! with the last token's; the inter-token latency is the engine's. With the vLLM engine
//! ([`crate::perf::Engine::Vllm`]) the defaults are [`VLLM_FRONTEND`]; other cost models
//! (the reference engine, the linear model) have no front end unless the scenario's
//! `[frontend]` section gives one.

use serde::{Deserialize, Serialize};

use crate::error::{check, Result, SimError};

/// Front-end costs, resolved (every field set).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Frontend {
    /// Fixed cost of one request before the engine sees it, ms.
    pub request_ms: f64,
    /// Tokenisation per prompt token, µs.
    pub prompt_token_us: f64,
    /// One output token's way from the engine to the client, ms.
    pub token_ms: f64,
    /// API-server time per output token of a step, µs (a token waits for half its step's).
    pub batch_token_us: f64,
    /// Headline latencies of the summary: client-side (true) or engine-side.
    pub report_client: bool,
}

/// No front end: client-side times are the engine's.
pub const NO_FRONTEND: Frontend =
    Frontend { request_ms: 0.0, prompt_token_us: 0.0, token_ms: 0.0, batch_token_us: 0.0, report_client: true };

/// vLLM v0.15's OpenAI-compatible server in front of its V1 engine, as the development runs
/// measured it (inference-perf streaming completions, `../shared/data/real-vllm-h100`).
/// Calibrated there with `benchmarks/real_vllm.py` (client TTFT less the engine's, at
/// batches of ~10–110 requests): about 3 ms per request for HTTP handling, validation and
/// the hand-off to the engine core process; tokenisation at 1 µs per prompt token (Hugging
/// Face's Rust tokenizers encode on the order of a million tokens per second on one core);
/// 2.5 ms for a token's way back (the engine core's output message, the output processor,
/// the SSE chunk, the client's parse); 60 µs of API-server work per output token of a step.
pub const VLLM_FRONTEND: Frontend =
    Frontend { request_ms: 3.0, prompt_token_us: 1.0, token_ms: 2.5, batch_token_us: 60.0, report_client: true };

/// The scenario's `[frontend]` section: every field optional (the engine's defaults apply).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrontendSpec {
    /// Fixed cost of one request before the engine sees it (HTTP, validation, hand-off), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_ms: Option<f64>,
    /// Tokenisation per prompt token, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_token_us: Option<f64>,
    /// One output token's way from the engine to the client, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_ms: Option<f64>,
    /// API-server time per output token of an engine step (detokenisation, SSE), µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_token_us: Option<f64>,
    /// `"client"` (default: as benchmarks measure) or `"engine"`: which side's TTFT, TPOT
    /// and E2E head the summary (both are in the request table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
}

/// Names accepted for `frontend.report`.
pub const REPORT_NAMES: [&str; 2] = ["client", "engine"];

impl FrontendSpec {
    /// Check every field; paths relative to the section (`request_ms`).
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("request_ms", self.request_ms),
            ("prompt_token_us", self.prompt_token_us),
            ("token_ms", self.token_ms),
            ("batch_token_us", self.batch_token_us),
        ] {
            if let Some(v) = v {
                check::non_negative(name, v)?;
                if v > 1e6 {
                    return Err(SimError::config(name, format!("must be at most 1e6 (got {v})")));
                }
            }
        }
        if let Some(r) = &self.report {
            if !REPORT_NAMES.contains(&r.as_str()) {
                return Err(check::unknown_name("report", "latency view", r, &REPORT_NAMES));
            }
        }
        Ok(())
    }

    /// The front end with the fields given here over `defaults`.
    pub fn resolve(&self, defaults: Frontend) -> Frontend {
        Frontend {
            request_ms: self.request_ms.unwrap_or(defaults.request_ms),
            prompt_token_us: self.prompt_token_us.unwrap_or(defaults.prompt_token_us),
            token_ms: self.token_ms.unwrap_or(defaults.token_ms),
            batch_token_us: self.batch_token_us.unwrap_or(defaults.batch_token_us),
            report_client: self.report.as_deref().map_or(defaults.report_client, |r| r == "client"),
        }
    }
}

impl Frontend {
    /// Time from the client's send to the engine's input queue for a prompt of `prompt`
    /// tokens, ns.
    #[inline]
    pub fn ingest_ns(&self, prompt: u32) -> u32 {
        let ns = self.request_ms * 1e6 + self.prompt_token_us * 1e3 * f64::from(prompt);
        crate::num::round_u64(ns).min(u64::from(u32::MAX)) as u32
    }

    /// Time from the engine producing a token in a step with `outputs` outputs to the client
    /// holding it, ns.
    #[inline]
    pub fn output_ns(&self, outputs: usize) -> u32 {
        let ns = self.token_ms * 1e6 + self.batch_token_us * 1e3 * (outputs as f64 + 1.0) / 2.0;
        crate::num::round_u64(ns).min(u64::from(u32::MAX)) as u32
    }

    /// Whether every cost is zero (client-side times equal the engine's).
    pub fn is_none(&self) -> bool {
        self.request_ms == 0.0 && self.prompt_token_us == 0.0 && self.token_ms == 0.0 && self.batch_token_us == 0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_follow_prompt_and_step_outputs() {
        let f = VLLM_FRONTEND;
        // 3 ms + 600 µs for a 600-token prompt
        assert_eq!(f.ingest_ns(600), 3_600_000);
        // 2.5 ms + 60 µs × (1 + 1) / 2 alone in its step; half of a 99-token step's outputs
        assert_eq!(f.output_ns(1), 2_560_000);
        assert_eq!(f.output_ns(99), 5_500_000);
        assert_eq!(NO_FRONTEND.ingest_ns(10_000), 0);
        assert_eq!(NO_FRONTEND.output_ns(256), 0);
        assert!(NO_FRONTEND.is_none() && !f.is_none());
    }

    #[test]
    fn spec_overrides_defaults_and_checks_fields() {
        let s = FrontendSpec { token_ms: Some(1.0), report: Some("engine".into()), ..Default::default() };
        s.validate().unwrap();
        let f = s.resolve(VLLM_FRONTEND);
        assert_eq!((f.token_ms, f.request_ms, f.report_client), (1.0, 3.0, false));
        let bad = FrontendSpec { request_ms: Some(-1.0), ..Default::default() };
        assert_eq!(bad.validate().unwrap_err().path(), Some("request_ms"));
        let bad = FrontendSpec { report: Some("clients".into()), ..Default::default() };
        let e = bad.validate().unwrap_err();
        assert_eq!(e.path(), Some("report"));
        assert!(e.to_string().contains("did you mean client"), "{e}");
    }
}
