//! Trace replay: requests read from a real service's log or a benchmark's output.
//!
//! The core reads no files. A front end creates a [`TraceReader`] from the scenario's
//! `workload.trace` table, feeds it the file's bytes in chunks of any size
//! ([`TraceReader::feed`]: a million-row file streams without its text ever being held
//! whole), and gets a [`LoadedTrace`] back ([`TraceReader::finish`]); the page and the
//! golden files put small traces inline (`trace.text`) and the core feeds that itself.
//!
//! Formats ([`TRACE_FORMATS`]; `auto` tells them apart by their first line):
//!
//! | format | container | time | prompt | output | also |
//! |---|---|---|---|---|---|
//! | `azure` | CSV | `TIMESTAMP` (date and time) | `ContextTokens` | `GeneratedTokens` | Azure LLM inference traces 2023/2024 |
//! | `mooncake` | JSONL | `timestamp` (ms) | `input_length` | `output_length` | `hash_ids`, one per `hash_block_tokens` (512) |
//! | `vidur` | CSV | `arrived_at` (s) | `num_prefill_tokens` | `num_decode_tokens` | Vidur's request traces |
//! | `blis` | CSV | `send_time_us` when > 0, else `arrival_time_us` (µs) | `input_tokens` (+ `prefix_length` with a `prefix_group`) | `output_tokens` | BLIS trace v2 data: `prefix_group`, `session_id`, `round_index`, `vllm_priority`, `think_time_us` |
//! | `inference_perf` | JSON array | `start_time` (s) | `info.input_tokens` | `info.output_tokens` (or `info.response_metrics.output_tokens`) | inference-perf's `per_request_lifecycle_metrics.json`; failed requests (`error`) are left out; `info.extra_info.user_session` / `chat_round` as session and turn |
//! | `vllm` | JSON object | `start_times` (s) when present, else generated from `request_rate` and `burstiness` | `input_lens` | `output_lens` | vLLM `benchmark_serving` / `vllm bench serve` result saved with `--save-detailed`; requests with an error are left out |
//! | `csv`, `jsonl` | CSV / JSONL | `arrival_ms` (or `arrival_s`, `arrival_us`, `arrival_ns`) | `prompt_tokens` | `output_tokens` | every field of an explicit request by name; `columns` maps other names |
//!
//! Every row gets the checks of an explicit request, and errors name the line (`trace:
//! line 17: GeneratedTokens: must be >= 1 token (got 0)`). Timestamps must not be negative
//! and must not decrease. Time 0 is the first row's timestamp; `start_s` / `window_s` keep a
//! window of trace time (which then starts at 0), `max_requests` the first rows, and
//! `rate_scale` divides every arrival time (2 replays twice as fast; think times stay).
//! Rows whose prompt + output exceed `max_model_len` are kept: the engine rejects them one
//! by one, with a reason, as the real server would have.
//!
//! By file: the `trace` table, the names it accepts and the options it validates to
//! (`spec.rs`), each format's columns and units and how `auto` tells them apart
//! (`formats.rs`), cutting bytes into rows (`container.rs`), what happens to every row
//! (`row.rs`); this file holds the reader that drives them and the loaded trace.

use super::assemble::Rows;
use super::Workload;
use crate::error::{Result, SimError};

mod container;
mod formats;
mod row;
mod spec;
#[cfg(test)]
mod tests;

pub use formats::detect_format;
pub use spec::{TraceSpec, TIME_UNITS, TRACE_FIELDS, TRACE_FORMATS};
use container::Container;
use row::Pipeline;
use spec::Fmt;

impl TraceSpec {
    /// Parse the inline `text` (or fail: a `path` must be read by a front end).
    pub fn load_inline(&self) -> Result<LoadedTrace> {
        let Some(text) = &self.text else {
            return Err(match &self.path {
                Some(p) => SimError::config(
                    "trace.path",
                    format!("'{p}' must be read by a front end (the Python API, the CLI) or given inline as trace.text; the core reads no files"),
                ),
                None => SimError::config("trace.text", "required: the trace's content (or a path, read by the Python API and the CLI)"),
            });
        };
        let mut reader = TraceReader::new(self)?;
        reader.feed(text.as_bytes())?;
        reader.finish()
    }
}

/// An incremental trace parser: feed it bytes, then finish.
pub struct TraceReader {
    shape: TraceSpec,
    container: Container,
    pipeline: Pipeline,
}

impl TraceReader {
    /// A reader for `spec`'s format and options (its `text`/`path` are not read).
    pub fn new(spec: &TraceSpec) -> Result<TraceReader> {
        let options = spec.options()?;
        Ok(TraceReader { shape: spec.shape(), container: Container::new(options.format), pipeline: Pipeline::new(options) })
    }

    /// Parse the next chunk. Returns false once no more input is wanted (`max_requests`
    /// rows read, or the window's end passed): the caller may stop reading.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<bool> {
        if self.pipeline.done {
            return Ok(false);
        }
        self.container.feed(bytes, &mut self.pipeline)?;
        Ok(!self.pipeline.done)
    }

    /// The format in use: the one asked for, or the one detected (`None` until the first
    /// line has been seen with `auto`).
    pub fn format(&self) -> Option<&'static str> {
        self.container.format().map(Fmt::name)
    }

    /// Parse what remains and check the whole trace (not empty, sessions consistent).
    pub fn finish(mut self) -> Result<LoadedTrace> {
        if !self.pipeline.done {
            self.container.finish(&mut self.pipeline)?;
        }
        let fmt = self.container.format().ok_or_else(|| SimError::config("trace", "the trace is empty"))?;
        let Pipeline { rows, fill, options, seen, .. } = self.pipeline;
        if rows.rows.is_empty() {
            let why = if seen > 0 && (options.start_ns > 0 || options.end_ns.is_some()) {
                format!("none of its {seen} rows falls in the window (trace.start_s, trace.window_s)")
            } else {
                "the trace has no requests".to_string()
            };
            return Err(SimError::config("trace", why));
        }
        if fill.is_some() && (options.start_ns > 0 || options.end_ns.is_some()) {
            return Err(SimError::config(
                "trace.window_s",
                "this trace has no timestamps (a vLLM result without start_times): its arrivals are generated from its request_rate, so there is no trace time to window",
            ));
        }
        Ok(LoadedTrace { shape: self.shape, format: fmt, rows, fill })
    }
}

/// A parsed trace, ready to become a workload.
#[derive(Debug, Clone)]
pub struct LoadedTrace {
    shape: TraceSpec,
    format: Fmt,
    rows: Rows,
    /// Arrival process for a trace without times: (rate per second, burstiness).
    fill: Option<(f64, f64)>,
}

impl LoadedTrace {
    /// The trace's format (the detected one for `auto`).
    pub fn format(&self) -> &'static str {
        self.format.name()
    }

    /// Number of requests kept.
    pub fn len(&self) -> usize {
        self.rows.rows.len()
    }

    /// Seconds from the first to the last arrival, `rate_scale` applied; `None` for a trace
    /// whose arrivals are generated (a vLLM result without start times).
    pub fn span_s(&self) -> Option<f64> {
        if self.fill.is_some() {
            return None;
        }
        let last = self.rows.rows.iter().filter_map(|r| r.arrival_ns).max()?;
        Some(last as f64 / 1e9 / self.shape.rate_scale.unwrap_or(1.0))
    }

    /// Whether no request was kept (never true for a finished reader).
    pub fn is_empty(&self) -> bool {
        self.rows.rows.is_empty()
    }

    /// Whether this trace was loaded with `spec`'s options (its content aside).
    pub fn matches(&self, spec: &TraceSpec) -> bool {
        self.shape == spec.shape()
    }

    /// The requests, arrival times scaled by `rate_scale`. `seed` drives the arrival
    /// process of a trace without times.
    pub fn into_workload(mut self, seed: u64) -> Result<Workload> {
        let scale = self.shape.rate_scale.unwrap_or(1.0);
        if let Some((rate, burstiness)) = self.fill {
            row::fill_arrivals(&mut self.rows, rate, burstiness, seed);
        }
        if scale != 1.0 {
            for r in &mut self.rows.rows {
                if let Some(t) = &mut r.arrival_ns {
                    *t = (*t as f64 / scale).round() as u64;
                }
            }
        }
        self.rows.assemble()
    }
}
