//! The `workload.trace` table as written ([`TraceSpec`]), the names it accepts (formats,
//! mapped fields, time units) and the options it validates to, which the reader applies to
//! every row (`Options`). Each known format is a `Fmt`, with the container its bytes are cut
//! by.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::workload::assemble::DEFAULT_HASH_BLOCK_TOKENS;
use crate::workload::MAX_REQUESTS;
use crate::error::{check, Result, SimError};

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
    "lora",
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

/// A known trace format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fmt {
    Azure,
    Mooncake,
    Vidur,
    Blis,
    InferencePerf,
    Vllm,
    Csv,
    Jsonl,
}

/// How a format's bytes are cut into rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Csv,
    Lines,
    Array,
    Whole,
}

impl Fmt {
    /// The format named `name`; `None` for `auto` (validated by the caller).
    pub(crate) fn from_name(name: &str) -> Option<Fmt> {
        Some(match name {
            "azure" => Fmt::Azure,
            "mooncake" => Fmt::Mooncake,
            "vidur" => Fmt::Vidur,
            "blis" => Fmt::Blis,
            "inference_perf" => Fmt::InferencePerf,
            "vllm" => Fmt::Vllm,
            "csv" => Fmt::Csv,
            "jsonl" => Fmt::Jsonl,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Fmt::Azure => "azure",
            Fmt::Mooncake => "mooncake",
            Fmt::Vidur => "vidur",
            Fmt::Blis => "blis",
            Fmt::InferencePerf => "inference_perf",
            Fmt::Vllm => "vllm",
            Fmt::Csv => "csv",
            Fmt::Jsonl => "jsonl",
        }
    }

    pub(crate) fn kind(self) -> Kind {
        match self {
            Fmt::Azure | Fmt::Vidur | Fmt::Blis | Fmt::Csv => Kind::Csv,
            Fmt::Mooncake | Fmt::Jsonl => Kind::Lines,
            Fmt::InferencePerf => Kind::Array,
            Fmt::Vllm => Kind::Whole,
        }
    }
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

    pub(super) fn options(&self) -> Result<Options> {
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

    /// The spec without its content: what a [`LoadedTrace`](super::LoadedTrace) remembers to check that a
    /// scenario asks for the trace it was loaded for.
    pub(super) fn shape(&self) -> TraceSpec {
        TraceSpec { text: None, path: None, ..self.clone() }
    }
}
