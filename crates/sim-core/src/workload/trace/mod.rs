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

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::assemble::{Rows, DEFAULT_HASH_BLOCK_TOKENS};
use super::{Workload, MAX_REQUESTS};
use crate::error::{check, Result, SimError};

mod container;
mod formats;
mod row;
#[cfg(test)]
mod tests;

pub use formats::detect_format;
use container::Container;
use formats::Fmt;
use row::Pipeline;

/// Every value `trace.format` accepts.
pub const TRACE_FORMATS: &[&str] = &["auto", "azure", "mooncake", "vidur", "blis", "inference_perf", "vllm", "csv", "jsonl"];

/// Fields the `columns` table of the `csv`/`jsonl` formats may map.
pub const TRACE_FIELDS: &[&str] = &[
    "arrival",
    "prompt_tokens",
    "output_tokens",
    "priority",
    "prefix_group",
    "prefix_length",
    "hash_ids",
    "session_id",
    "turn",
    "think_ms",
];

/// Units `trace.time_unit` accepts.
pub const TIME_UNITS: &[&str] = &["s", "ms", "us", "ns"];

/// `workload.trace`: replay a trace file. Give `text` (the content) or `path` (read by
/// the Python API and the CLI, relative to the scenario file; the core reads no files).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    /// One of [`TRACE_FORMATS`]; default `auto` (told apart by the first line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// The trace's content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// A file the front end reads (ignored when `text` is given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Divide every arrival time by this (> 0; default 1): 2 is twice the rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_scale: Option<f64>,
    /// Skip the rows before this trace time, seconds after the first row (≥ 0; default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_s: Option<f64>,
    /// Keep only rows within this many seconds after `start_s` (> 0; default: to the end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_s: Option<f64>,
    /// Keep at most this many rows, the first ones (1..=50,000,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_requests: Option<u64>,
    /// Tokens per `hash_ids` entry (≥ 1; default 512, Mooncake's block).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_block_tokens: Option<u32>,
    /// `csv`/`jsonl`: which column holds each field ([`TRACE_FIELDS`]), e.g.
    /// `{arrival = "ts", prompt_tokens = "in"}`; unmapped fields use their own names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub columns: Option<BTreeMap<String, String>>,
    /// `csv`/`jsonl`: the unit of the arrival column ([`TIME_UNITS`]); default from its
    /// name (`arrival_s` is seconds), else `ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_unit: Option<String>,
}

/// The validated options a reader applies to every row.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) format: Option<Fmt>,
    pub(crate) start_ns: i64,
    pub(crate) end_ns: Option<i64>,
    pub(crate) max_requests: u64,
    pub(crate) block_tokens: u32,
    pub(crate) columns: BTreeMap<String, String>,
    pub(crate) time_unit: Option<&'static str>,
}

/// Seconds to integer nanoseconds, when representable.
pub(crate) fn s_to_ns(s: f64) -> Option<i64> {
    let ns = (s * 1e9).round();
    (ns.is_finite() && ns.abs() < 9.0e18).then_some(ns as i64)
}

impl TraceSpec {
    /// A trace of `format` given inline.
    pub fn inline(format: &str, text: impl Into<String>) -> Self {
        TraceSpec { format: Some(format.into()), text: Some(text.into()), ..Default::default() }
    }

    /// A `trace` table from JSON (what the front ends hand over); errors name
    /// `trace.<field>`.
    pub fn from_json(text: &str) -> Result<TraceSpec> {
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let mut path = e.path().to_string();
            let msg = e.inner().to_string();
            if let Some(field) = msg.strip_prefix("unknown field `").and_then(|r| r.split('`').next()) {
                path = if path == "." { field.to_string() } else { format!("{path}.{field}") };
            }
            let path = if path == "." || path == "?" { "trace".to_string() } else { format!("trace.{path}") };
            SimError::config(path, msg)
        })
    }

    fn options(&self) -> Result<Options> {
        let name = self.format.as_deref().unwrap_or("auto");
        if !TRACE_FORMATS.contains(&name) {
            return Err(check::unknown_name("trace.format", "trace format", name, TRACE_FORMATS));
        }
        let format = Fmt::from_name(name);
        if let Some(r) = self.rate_scale {
            check::positive("trace.rate_scale", r)?;
        }
        let start_ns = match self.start_s {
            Some(s) => {
                check::non_negative("trace.start_s", s)?;
                s_to_ns(s).ok_or_else(|| SimError::config("trace.start_s", format!("out of range (got {s})")))?
            }
            None => 0,
        };
        let end_ns = match self.window_s {
            Some(w) => {
                check::positive("trace.window_s", w)?;
                Some(start_ns.saturating_add(s_to_ns(w).unwrap_or(i64::MAX)))
            }
            None => None,
        };
        let max_requests = match self.max_requests {
            Some(n) => {
                check::in_range("trace.max_requests", n, 1, MAX_REQUESTS)?;
                n
            }
            None => MAX_REQUESTS,
        };
        let block_tokens = self.hash_block_tokens.unwrap_or(DEFAULT_HASH_BLOCK_TOKENS);
        if block_tokens == 0 {
            return Err(SimError::config("trace.hash_block_tokens", "must be >= 1 token (got 0)"));
        }
        let plain = matches!(format, None | Some(Fmt::Csv) | Some(Fmt::Jsonl));
        let columns = self.columns.clone().unwrap_or_default();
        for (field, column) in &columns {
            if !plain {
                return Err(SimError::config("trace.columns", format!("only for the csv and jsonl formats, not '{name}'")));
            }
            if !TRACE_FIELDS.contains(&field.as_str()) {
                return Err(check::unknown_name(&format!("trace.columns.{field}"), "trace field", field, TRACE_FIELDS));
            }
            if column.is_empty() {
                return Err(SimError::config(format!("trace.columns.{field}"), "must name a column"));
            }
        }
        let time_unit = match self.time_unit.as_deref() {
            None => None,
            Some(_) if !plain => {
                return Err(SimError::config("trace.time_unit", format!("only for the csv and jsonl formats, not '{name}'")))
            }
            Some(u) => Some(
                *TIME_UNITS.iter().find(|x| **x == u).ok_or_else(|| check::unknown_name("trace.time_unit", "time unit", u, TIME_UNITS))?,
            ),
        };
        Ok(Options { format, start_ns, end_ns, max_requests, block_tokens, columns, time_unit })
    }

    /// The spec without its content: what a [`LoadedTrace`] remembers to check that a
    /// scenario asks for the trace it was loaded for.
    fn shape(&self) -> TraceSpec {
        TraceSpec { text: None, path: None, ..self.clone() }
    }

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
