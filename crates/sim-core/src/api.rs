//! The front-end facing API (stub until the engine lands).
use crate::error::{Result, SimError};
use serde::Serialize;

/// Input format of a scenario text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format { Json, Toml }

impl Format {
    /// `"json"` or `"toml"`.
    pub fn parse(s: &str) -> Result<Format> {
        match s { "json" => Ok(Format::Json), "toml" => Ok(Format::Toml),
            other => Err(SimError::config("format", format!("must be 'json' or 'toml' (got '{other}')"))) }
    }
}

/// Options of one run that are not part of the scenario.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimOptions {
    /// Keep a record of every scheduler step (for tests and debugging; costs memory).
    pub record_steps: bool,
}

/// How far a running simulation has come.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Progress { pub finished_requests: u64, pub total_requests: u64, pub now_ms: f64, pub events: u64 }

/// Per-request result columns (one entry per request, in request-id order).
#[derive(Debug, Clone, Default, Serialize)]
pub struct RequestColumns {
    pub request_id: Vec<u32>,
    pub arrival_ms: Vec<f64>,
    /// NaN (null in JSON) when the request never produced a token.
    pub first_token_ms: Vec<f64>,
    pub finish_ms: Vec<f64>,
    pub prompt_tokens: Vec<u32>,
    pub output_tokens: Vec<u32>,
    pub preemptions: Vec<u32>,
    /// -1 when never assigned to a replica.
    pub replica: Vec<i32>,
    /// Index into [`STATUS_NAMES`].
    pub status: Vec<u8>,
    /// Index into [`REASON_NAMES`].
    pub reason: Vec<u8>,
}

pub const STATUS_NAMES: &[&str] = &["finished", "rejected"];
pub const REASON_NAMES: &[&str] = &["", "prompt exceeds max_model_len", "kv cache too small", "dispatch queue full"];

/// Per-replica time series, bucketed at `interval_ms`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TimeSeries {
    pub interval_ms: f64,
    pub time_ms: Vec<f64>,
    pub replica: Vec<u32>,
    pub batch_size: Vec<f64>,
    pub tokens: Vec<f64>,
    pub kv_usage: Vec<f64>,
    pub waiting: Vec<f64>,
    pub running: Vec<f64>,
}

/// One scheduler step (only with `record_steps`).
#[derive(Debug, Clone, Serialize)]
pub struct StepRecord {
    pub replica: u32,
    pub start_ms: f64,
    pub end_ms: f64,
    /// (request id, tokens scheduled) in schedule order.
    pub scheduled: Vec<(u32, u32)>,
    pub preempted: Vec<u32>,
    pub finished: Vec<u32>,
    pub free_blocks_after: u64,
}

/// Everything a run produces.
#[derive(Debug, Clone, Serialize)]
pub struct SimResult {
    pub summary: serde_json::Value,
    pub requests: RequestColumns,
    pub timeseries: TimeSeries,
    #[serde(skip)]
    pub steps: Vec<StepRecord>,
}

impl SimResult {
    pub fn to_json(&self) -> String { serde_json::to_string(self).unwrap_or_default() }
    pub fn summary_json(&self) -> String { serde_json::to_string(&self.summary).unwrap_or_default() }
    pub fn steps_json(&self) -> String { serde_json::to_string(&self.steps).unwrap_or_default() }
}

/// A simulation that can be advanced in slices (for progress bars) or run to the end.
pub struct Simulation { total: u64, done: u64 }

impl Simulation {
    pub fn from_text(text: &str, format: Format, _options: SimOptions) -> Result<Simulation> {
        let _ = (text, format);
        Ok(Simulation { total: 10, done: 0 })
    }
    /// Process at most `max_events` events; `true` when the run is complete.
    pub fn run_events(&mut self, max_events: u64) -> Result<bool> {
        self.done = (self.done + max_events).min(self.total);
        Ok(self.done == self.total)
    }
    pub fn progress(&self) -> Progress {
        Progress { finished_requests: self.done, total_requests: self.total, now_ms: 0.0, events: self.done }
    }
    pub fn run(&mut self) -> Result<()> { self.run_events(u64::MAX).map(|_| ()) }
    pub fn finish(mut self) -> Result<SimResult> {
        self.run()?;
        Ok(SimResult { summary: serde_json::json!({"num_requests": self.total}), requests: RequestColumns::default(), timeseries: TimeSeries::default(), steps: vec![] })
    }
}

/// Validate a scenario; returns the resolved scenario (presets expanded) as JSON.
pub fn validate(text: &str, format: Format) -> Result<String> { let _ = (text, format); Ok("{}".into()) }
/// The catalog (GPUs, models, policies) as JSON.
pub fn presets_json() -> String { "{}".into() }
/// The embedded default scenario (TOML).
pub fn default_scenario_toml() -> &'static str { "seed = 0\n" }
