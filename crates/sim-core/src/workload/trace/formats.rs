//! The trace formats: which column holds what, in which unit, and how `auto` tells the
//! formats apart. Column layouts were read from each project's own code: Azure's public
//! dataset CSVs; Mooncake's FAST'25 traces; Vidur's `TraceRequestGenerator`
//! (`arrived_at`, `num_prefill_tokens`, `num_decode_tokens`); BLIS's trace v2
//! (`sim/workload/tracev2.go`); inference-perf's `per_request_lifecycle_metrics.json`
//! (`reportgen/base.py`); vLLM's benchmark result (`benchmarks/serve.py`).

use serde::Deserialize;

use super::row::{CellError, Names, RawRow};
use super::spec::{s_to_ns, Fmt, Options, TRACE_FIELDS};
use crate::error::{Result, SimError};

/// The format a trace's first non-blank line suggests: a JSON array is inference-perf's
/// per-request report; a JSON object line is Mooncake (with `hash_ids` or
/// `input_length`), a vLLM result (`input_lens`, `request_rate`) or plain JSONL; an object
/// that does not end on its line is a (pretty-printed) vLLM result; otherwise the CSV
/// header decides (Azure, Vidur, BLIS, or plain CSV).
pub fn detect_format(first_line: &[u8]) -> &'static str {
    let line = trim(first_line);
    match line.first() {
        Some(b'[') => return "inference_perf",
        Some(b'{') => {
            return match serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(line) {
                Ok(m) if ["input_lens", "output_lens", "request_rate"].iter().any(|k| m.contains_key(*k)) => "vllm",
                Ok(m) if ["hash_ids", "input_length"].iter().any(|k| m.contains_key(*k)) => "mooncake",
                Ok(_) => "jsonl",
                Err(_) => "vllm",
            }
        }
        _ => {}
    }
    let header: Vec<String> = String::from_utf8_lossy(line).split(',').map(|c| c.trim().trim_matches('"').to_ascii_lowercase()).collect();
    let has = |name: &str| header.iter().any(|c| c == name);
    if has("timestamp") && has("contexttokens") {
        "azure"
    } else if has("arrived_at") && has("num_prefill_tokens") {
        "vidur"
    } else if has("arrival_time_us") && has("input_tokens") {
        "blis"
    } else {
        "csv"
    }
}

fn trim(b: &[u8]) -> &[u8] {
    let b = b.strip_prefix(b"\xef\xbb\xbf").unwrap_or(b);
    let start = b.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !c.is_ascii_whitespace()).map_or(start, |e| e + 1);
    &b[start..end]
}

/// The fields a row may carry, in a fixed order (index into a plan's columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum F {
    Time = 0,
    Send,
    Prompt,
    Output,
    Priority,
    Group,
    PrefixLen,
    ServerIn,
    Hash,
    Session,
    Turn,
    Think,
    Lora,
}
const NF: usize = 13;

/// How a time cell reads.
#[derive(Debug, Clone, Copy)]
enum Time {
    /// `2023-11-16 18:17:03.9799600` (optionally `T`, `Z` or an offset).
    DateTime,
    /// A number of this many ns per unit.
    Number(f64),
}

/// Which column (name, and index once a CSV header is known) holds each field.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    fmt: Fmt,
    col: [Option<String>; NF],
    idx: [Option<usize>; NF],
    time: Time,
    /// Nanoseconds per unit of `think` cells.
    think_ns: f64,
    pub(crate) names: Names,
}

const UNIT_NS: [(&str, f64); 4] = [("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1.0)];

fn unit_ns(u: &str) -> f64 {
    UNIT_NS.iter().find(|(n, _)| *n == u).map_or(1e6, |(_, v)| *v)
}

/// Whether a header cell looks like a column name (at most 40 letters, digits, `_`, `-`,
/// `.`, spaces or brackets): only those are repeated in an error message.
fn names_a_column(h: &str) -> bool {
    h.len() <= 40 && h.chars().all(|c| c.is_ascii_alphanumeric() || " _-.()[]".contains(c))
}

impl Plan {
    /// The columns of `fmt` (for `csv`/`jsonl`, from `columns`, `time_unit` and, when the
    /// arrival column is not mapped, the header: `arrival_ms`, `arrival_s`, …).
    pub(crate) fn new(fmt: Fmt, options: &Options, header: Option<&[String]>) -> Plan {
        let mut col: [Option<String>; NF] = Default::default();
        let mut set = |f: F, name: &str| col[f as usize] = Some(name.to_string());
        let mut time = Time::Number(1e6);
        let mut think_ns = 1e6;
        match fmt {
            Fmt::Azure => {
                set(F::Time, "TIMESTAMP");
                set(F::Prompt, "ContextTokens");
                set(F::Output, "GeneratedTokens");
                time = Time::DateTime;
            }
            Fmt::Mooncake => {
                set(F::Time, "timestamp");
                set(F::Prompt, "input_length");
                set(F::Output, "output_length");
                set(F::Hash, "hash_ids");
            }
            Fmt::Vidur => {
                set(F::Time, "arrived_at");
                set(F::Prompt, "num_prefill_tokens");
                set(F::Output, "num_decode_tokens");
                time = Time::Number(1e9);
            }
            Fmt::Blis => {
                for (f, n) in [
                    (F::Time, "arrival_time_us"),
                    (F::Send, "send_time_us"),
                    (F::Prompt, "input_tokens"),
                    (F::Output, "output_tokens"),
                    (F::Group, "prefix_group"),
                    (F::PrefixLen, "prefix_length"),
                    (F::ServerIn, "server_input_tokens"),
                    (F::Session, "session_id"),
                    (F::Turn, "round_index"),
                    (F::Priority, "vllm_priority"),
                    (F::Think, "think_time_us"),
                ] {
                    set(f, n);
                }
                time = Time::Number(1e3);
                think_ns = 1e3;
            }
            Fmt::Csv | Fmt::Jsonl => {
                let fields =
                    [F::Time, F::Prompt, F::Output, F::Priority, F::Group, F::PrefixLen, F::Hash, F::Session, F::Turn, F::Think, F::Lora];
                for (f, name) in fields.iter().zip(TRACE_FIELDS) {
                    let default = if *f == F::Time { "arrival_ms" } else { name };
                    set(*f, options.columns.get(*name).map_or(default, String::as_str));
                }
                let mapped = options.columns.contains_key("arrival");
                let mut unit = options.time_unit.unwrap_or("ms");
                if !mapped {
                    let found = header.and_then(|h| {
                        UNIT_NS.iter().find(|(u, _)| h.iter().any(|c| c == &format!("arrival_{u}"))).map(|(u, _)| *u)
                    });
                    if let Some(u) = found {
                        set(F::Time, &format!("arrival_{u}"));
                        unit = options.time_unit.unwrap_or(u);
                    }
                }
                time = Time::Number(unit_ns(unit));
            }
            Fmt::InferencePerf | Fmt::Vllm => time = Time::Number(1e9),
        }
        let name = |f: F| col[f as usize].clone().unwrap_or_default();
        let (unit_ns, unit) = match time {
            Time::DateTime => (1e9, "s"),
            Time::Number(ns) => (ns, UNIT_NS.iter().find(|(_, v)| *v == ns).map_or("ms", |(u, _)| u)),
        };
        let names = Names {
            time: name(F::Time),
            unit_ns,
            unit,
            prompt: name(F::Prompt),
            output: name(F::Output),
            prefix_length: name(F::PrefixLen),
            hash_ids: name(F::Hash),
            turn: name(F::Turn),
        };
        Plan { fmt, col, idx: [None; NF], time, think_ns, names }
    }

    /// The columns every format needs.
    fn required(&self) -> &'static [F] {
        &[F::Time, F::Prompt, F::Output]
    }

    /// Resolve column indices from a CSV header (matched without regard to case for the
    /// fixed formats); a missing required column (or one `columns` maps) is an error.
    pub(crate) fn bind_header(&mut self, header: &[String], columns_mapped: &dyn Fn(usize) -> bool) -> Result<()> {
        let exact = matches!(self.fmt, Fmt::Csv);
        for f in 0..NF {
            let Some(name) = &self.col[f] else { continue };
            self.idx[f] = header.iter().position(|h| if exact { h == name } else { h.eq_ignore_ascii_case(name) });
        }
        self.check_columns(&|f| self.idx[f].is_some(), header, columns_mapped)
    }

    fn check_columns(&self, present: &dyn Fn(usize) -> bool, header: &[String], columns_mapped: &dyn Fn(usize) -> bool) -> Result<()> {
        for f in 0..NF {
            let Some(name) = &self.col[f] else { continue };
            let required = self.required().iter().any(|r| *r as usize == f) || columns_mapped(f);
            if required && !present(f) {
                let need: Vec<&str> = self.required().iter().filter_map(|r| self.col[*r as usize].as_deref()).collect();
                // Only cells that look like column names are shown: a file that is no trace
                // (a server's /etc/passwd) must not have its first line echoed.
                let mut shown: Vec<&str> = header.iter().map(|h| if names_a_column(h) { h.as_str() } else { "?" }).take(12).collect();
                if header.len() > 12 {
                    shown.push("…");
                }
                return Err(SimError::config(
                    "trace",
                    format!(
                        "missing column `{name}` (format {} needs {}; found: {})",
                        self.fmt.name(),
                        need.join(", "),
                        if shown.is_empty() { "nothing".to_string() } else { shown.join(", ") }
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Which of this plan's fields `columns` mapped explicitly (those must exist).
    pub(crate) fn mapped(&self, options: &Options) -> [bool; NF] {
        let mut out = [false; NF];
        if matches!(self.fmt, Fmt::Csv | Fmt::Jsonl) {
            let fields =
                [F::Time, F::Prompt, F::Output, F::Priority, F::Group, F::PrefixLen, F::Hash, F::Session, F::Turn, F::Think];
            for (f, name) in fields.iter().zip(TRACE_FIELDS) {
                out[*f as usize] = options.columns.contains_key(*name);
            }
        }
        out
    }

    /// Fill `raw` from one CSV record.
    pub(crate) fn csv_row(&self, fields: &[&str], raw: &mut RawRow) -> std::result::Result<(), CellError> {
        let get = |f: F| -> Option<&str> {
            let v = fields.get(self.idx[f as usize]?)?.trim();
            (!v.is_empty()).then_some(v)
        };
        self.fill(raw, &|f| get(f).map(Cell::Text))
    }

    /// Fill `raw` from one JSON object (Mooncake or plain JSONL).
    pub(crate) fn json_row(&self, obj: &serde_json::Map<String, serde_json::Value>, raw: &mut RawRow) -> std::result::Result<(), CellError> {
        let get = |f: F| -> Option<Cell<'_>> {
            let v = obj.get(self.col[f as usize].as_deref()?)?;
            (!v.is_null()).then_some(Cell::Json(v))
        };
        for f in 0..NF {
            let required = self.required().iter().any(|r| *r as usize == f);
            if let (true, Some(name)) = (required, &self.col[f]) {
                if !obj.contains_key(name) {
                    return Err(CellError::new("", format!("missing field `{name}` (format {})", self.fmt.name())));
                }
            }
        }
        self.fill(raw, &get)
    }

    fn fill<'a>(&self, raw: &mut RawRow, get: &dyn Fn(F) -> Option<Cell<'a>>) -> std::result::Result<(), CellError> {
        let name = |f: F| self.col[f as usize].as_deref().unwrap_or("");
        let need = |f: F| get(f).ok_or_else(|| CellError::new(name(f), "required (empty)"));
        let time = |f: F, c: Cell| -> std::result::Result<i64, CellError> {
            match self.time {
                Time::DateTime => parse_datetime_ns(c.text().unwrap_or("")).map_err(|m| CellError::new(name(f), m)),
                Time::Number(unit) => {
                    let x = c.real(name(f))?;
                    s_to_ns(x * unit / 1e9).ok_or_else(|| CellError::new(name(f), format!("out of range (got {x})")))
                }
            }
        };
        raw.t_ns = Some(time(F::Time, need(F::Time)?)?);
        if let Some(send) = get(F::Send) {
            let t = time(F::Send, send)?;
            if t > 0 {
                raw.t_ns = Some(t);
            }
        }
        raw.prompt = need(F::Prompt)?.count(name(F::Prompt))?;
        raw.output = need(F::Output)?.count(name(F::Output))?;
        if let Some(p) = get(F::Priority) {
            raw.priority = p.int(name(F::Priority))?;
        }
        if let Some(a) = get(F::Lora) {
            raw.lora = Some(a.count(name(F::Lora))?);
        }
        if let Some(g) = get(F::Group) {
            let len = need(F::PrefixLen)?.count(name(F::PrefixLen))?;
            if self.fmt != Fmt::Blis {
                raw.group = Some((g.id(name(F::Group))?, len));
            } else if len > 0 {
                // BLIS: input_tokens is what follows the group's prefix, and a group with
                // no length shares nothing (its trace v2 replay).
                raw.prompt += len;
                raw.group = Some((g.id(name(F::Group))?, len));
            }
        } else if self.fmt != Fmt::Blis && get(F::PrefixLen).is_some() {
            return Err(CellError::new(name(F::PrefixLen), format!("needs a prefix group (`{}`)", name(F::Group))));
        }
        if self.fmt == Fmt::Blis && raw.group.is_none() {
            // BLIS prefers the server's own prompt count when it was recorded.
            if let Some(n) = get(F::ServerIn).map(|c| c.count(name(F::ServerIn))).transpose()?.filter(|n| *n > 0) {
                raw.prompt = n;
            }
        }
        if let Some(h) = get(F::Hash) {
            raw.has_hash = true;
            h.ids(name(F::Hash), &mut raw.hash_ids)?;
        }
        if let Some(s) = get(F::Session) {
            raw.session = Some(s.id(name(F::Session))?);
            if let Some(t) = get(F::Turn) {
                raw.turn = Some(t.count(name(F::Turn))?);
            }
            if let Some(t) = get(F::Think) {
                let x = t.real(name(F::Think))?;
                if x < 0.0 {
                    return Err(CellError::new(name(F::Think), format!("must be >= 0 (got {x})")));
                }
                raw.think_ns = ((x * self.think_ns).round() as u64).min(crate::request::MAX_TIME_NS);
            }
        } else if self.fmt != Fmt::Blis {
            for f in [F::Turn, F::Think] {
                if get(f).is_some() {
                    return Err(CellError::new(name(f), format!("needs a session column (`{}`)", name(F::Session))));
                }
            }
        }
        Ok(())
    }
}

/// One cell: CSV text or a JSON value.
#[derive(Debug, Clone, Copy)]
enum Cell<'a> {
    Text(&'a str),
    Json(&'a serde_json::Value),
}

impl Cell<'_> {
    fn text(&self) -> Option<&str> {
        match self {
            Cell::Text(s) => Some(s),
            Cell::Json(v) => v.as_str(),
        }
    }

    fn real(&self, col: &str) -> std::result::Result<f64, CellError> {
        let x = match self {
            Cell::Text(s) => s.parse::<f64>().ok(),
            Cell::Json(v) => v.as_f64(),
        };
        match x {
            Some(x) if x.is_finite() => Ok(x),
            _ => Err(CellError::new(col, format!("expected a number (got {})", self.show()))),
        }
    }

    /// A whole, non-negative count (`12` or `12.0`).
    fn count(&self, col: &str) -> std::result::Result<u64, CellError> {
        if let Cell::Json(v) = self {
            if let Some(n) = v.as_u64() {
                return Ok(n);
            }
        }
        if let Cell::Text(s) = self {
            if let Ok(n) = s.parse::<u64>() {
                return Ok(n);
            }
        }
        match self.real(col) {
            Ok(x) if x >= 0.0 && x.fract() == 0.0 && x < 1e18 => Ok(x as u64),
            _ => Err(CellError::new(col, format!("expected a whole number >= 0 (got {})", self.show()))),
        }
    }

    fn int(&self, col: &str) -> std::result::Result<i64, CellError> {
        match self.real(col) {
            Ok(x) if x.fract() == 0.0 && x.abs() < 1e18 => Ok(x as i64),
            _ => Err(CellError::new(col, format!("expected an integer (got {})", self.show()))),
        }
    }

    /// A name: a string, or an integer written as its decimal text.
    fn id(&self, col: &str) -> std::result::Result<String, CellError> {
        match self {
            Cell::Text(s) => Ok(s.to_string()),
            Cell::Json(serde_json::Value::String(s)) => Ok(s.clone()),
            Cell::Json(v) if v.is_i64() || v.is_u64() => Ok(v.to_string()),
            _ => Err(CellError::new(col, format!("expected a string or an integer (got {})", self.show()))),
        }
    }

    /// A list of ids: a JSON array of integers, or in a CSV cell integers separated by
    /// spaces, commas or semicolons, optionally in brackets.
    fn ids(&self, col: &str, out: &mut Vec<u64>) -> std::result::Result<(), CellError> {
        out.clear();
        match self {
            Cell::Json(serde_json::Value::Array(a)) => {
                for (i, v) in a.iter().enumerate() {
                    out.push(v.as_u64().ok_or_else(|| {
                        CellError::new(format!("{col}[{i}]"), format!("expected a non-negative integer (got {v})"))
                    })?);
                }
                Ok(())
            }
            Cell::Text(s) => {
                let inner = s.trim().trim_start_matches('[').trim_end_matches(']');
                for (i, part) in inner.split([' ', ',', ';']).filter(|p| !p.is_empty()).enumerate() {
                    out.push(part.parse::<u64>().map_err(|_| {
                        CellError::new(format!("{col}[{i}]"), format!("expected a non-negative integer (got '{part}')"))
                    })?);
                }
                Ok(())
            }
            Cell::Json(v) => Err(CellError::new(col, format!("expected a list of integers (got {v})"))),
        }
    }

    fn show(&self) -> String {
        match self {
            Cell::Text(s) => format!("'{s}'"),
            Cell::Json(v) => v.to_string(),
        }
    }
}

/// `YYYY-MM-DD HH:MM:SS[.fraction]` (or `T` between date and time), optionally followed by
/// `Z` or a `±HH:MM` offset, to nanoseconds since 1970 (UTC).
pub(crate) fn parse_datetime_ns(s: &str) -> std::result::Result<i64, String> {
    let bad = || format!("expected a date and time like 2023-11-16 18:17:03.98 (got '{s}')");
    let b = s.trim().as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let d = b.get(r)?;
        d.iter().all(u8::is_ascii_digit).then(|| d.iter().fold(0i64, |a, c| a * 10 + i64::from(c - b'0')))
    };
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !(b[10] == b' ' || b[10] == b'T') || b[13] != b':' || b[16] != b':' {
        return Err(bad());
    }
    let (y, mo, d) = (num(0..4).ok_or_else(bad)?, num(5..7).ok_or_else(bad)?, num(8..10).ok_or_else(bad)?);
    let (h, mi, sec) = (num(11..13).ok_or_else(bad)?, num(14..16).ok_or_else(bad)?, num(17..19).ok_or_else(bad)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return Err(bad());
    }
    let mut i = 19;
    let mut frac_ns = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let mut scale = 100_000_000i64;
        while let Some(c) = b.get(i).filter(|c| c.is_ascii_digit()) {
            frac_ns += i64::from(c - b'0') * scale;
            scale /= 10;
            i += 1;
        }
    }
    let offset_s = match b.get(i) {
        None => 0,
        Some(b'Z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) if b.len() == i + 6 && b[i + 3] == b':' => {
            let off = num(i + 1..i + 3).ok_or_else(bad)? * 3600 + num(i + 4..i + 6).ok_or_else(bad)? * 60;
            if sign == b'+' {
                off
            } else {
                -off
            }
        }
        _ => return Err(bad()),
    };
    // Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    let yy = if mo <= 2 { y - 1 } else { y };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * (if mo > 2 { mo - 3 } else { mo + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_s;
    Ok(secs * 1_000_000_000 + frac_ns)
}

/// One element of inference-perf's `per_request_lifecycle_metrics.json`.
#[derive(Debug, Deserialize)]
pub(crate) struct InferencePerfRow {
    pub start_time: Option<f64>,
    pub info: Option<InferencePerfInfo>,
    #[serde(default)]
    pub error: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct InferencePerfInfo {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub response_metrics: Option<InferencePerfResponse>,
    pub extra_info: Option<InferencePerfExtra>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct InferencePerfResponse {
    pub output_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct InferencePerfExtra {
    pub user_session: Option<String>,
    pub chat_round: Option<u64>,
}

impl InferencePerfRow {
    /// Fill `raw`; `Ok(false)` for a failed request (left out).
    pub(crate) fn fill(self, raw: &mut RawRow) -> std::result::Result<bool, CellError> {
        if self.error.as_ref().is_some_and(|e| !e.is_null()) {
            return Ok(false);
        }
        let t = self.start_time.ok_or_else(|| CellError::new("start_time", "required"))?;
        raw.t_ns = Some(s_to_ns(t).ok_or_else(|| CellError::new("start_time", format!("out of range (got {t})")))?);
        let info = self.info.ok_or_else(|| CellError::new("info", "required"))?;
        raw.prompt = info.input_tokens.ok_or_else(|| CellError::new("info.input_tokens", "required"))?;
        raw.output = info
            .output_tokens
            .or(info.response_metrics.and_then(|r| r.output_tokens))
            .ok_or_else(|| CellError::new("info.output_tokens", "required"))?;
        if let Some(x) = info.extra_info {
            raw.session = x.user_session;
            raw.turn = x.chat_round.filter(|_| raw.session.is_some());
        }
        Ok(true)
    }
}

/// The parts of a vLLM benchmark result that describe its requests.
#[derive(Debug, Deserialize)]
pub(crate) struct VllmResult {
    pub input_lens: Option<Vec<u64>>,
    pub output_lens: Option<Vec<u64>>,
    pub start_times: Option<Vec<f64>>,
    pub errors: Option<Vec<Option<String>>>,
    pub request_rate: Option<serde_json::Value>,
    pub burstiness: Option<f64>,
}

impl VllmResult {
    /// The arrival process to generate when the result has no `start_times`.
    pub(crate) fn rate(&self) -> Result<(f64, f64)> {
        let rate = match &self.request_rate {
            Some(serde_json::Value::String(s)) if s == "inf" => f64::INFINITY,
            Some(v) => v.as_f64().filter(|r| *r > 0.0).ok_or_else(|| {
                SimError::config("trace", format!("request_rate: expected a positive number or \"inf\" (got {v})"))
            })?,
            None => {
                return Err(SimError::config(
                    "trace",
                    "request_rate: required when the result has no start_times (the arrival times are generated from it)",
                ))
            }
        };
        let burstiness = self.burstiness.unwrap_or(1.0);
        let scale = 1.0 / (rate * burstiness);
        if !(burstiness.is_finite() && burstiness > 0.0) || (rate.is_finite() && !(scale.is_finite() && scale > 0.0)) {
            return Err(SimError::config(
                "trace",
                format!("burstiness: must be > 0 and give a representable gap with request_rate {rate} (got {burstiness})"),
            ));
        }
        Ok((rate, burstiness))
    }
}
