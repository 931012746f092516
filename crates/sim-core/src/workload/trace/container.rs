//! Cutting a trace's bytes into rows, chunk by chunk: CSV records (`csv-core`, which
//! never allocates and takes input in pieces), JSON lines, the objects of a top-level JSON
//! array, or one whole JSON document. Only the current row (or, for the whole-document
//! vLLM result, the document) is held.

use serde::Deserialize;

use super::formats::{detect_format, InferencePerfRow, Plan, VllmResult};
use super::row::{CellError, Pipeline};
use super::spec::{s_to_ns, Fmt, Kind};
use crate::error::{Result, SimError};

/// The reader's state: waiting for the first line (to detect the format or read a CSV
/// header), then one reader per kind.
pub(crate) enum Container {
    Start { want: Option<Fmt>, buf: Vec<u8> },
    Csv(Box<CsvIn>),
    Lines(Box<LinesIn>),
    Array(ArrayIn),
    Whole { buf: Vec<u8> },
}

impl Container {
    pub(crate) fn new(want: Option<Fmt>) -> Container {
        match want {
            Some(Fmt::Vllm) => Container::Whole { buf: Vec::new() },
            _ => Container::Start { want, buf: Vec::new() },
        }
    }

    pub(crate) fn format(&self) -> Option<Fmt> {
        match self {
            Container::Start { .. } => None,
            Container::Csv(c) => Some(c.fmt),
            Container::Lines(l) => Some(l.fmt),
            Container::Array(_) => Some(Fmt::InferencePerf),
            Container::Whole { .. } => Some(Fmt::Vllm),
        }
    }

    pub(crate) fn feed(&mut self, bytes: &[u8], p: &mut Pipeline) -> Result<()> {
        match self {
            Container::Start { want, buf } => {
                buf.extend_from_slice(bytes);
                let Some(line) = first_line(buf, false) else { return Ok(()) };
                let fmt = want.unwrap_or_else(|| Fmt::from_name(detect_format(line)).unwrap_or(Fmt::Csv));
                let held = std::mem::take(buf);
                *self = Container::of(fmt);
                self.feed(&held, p)
            }
            Container::Csv(c) => c.run(bytes, p, false),
            Container::Lines(l) => l.feed(bytes, p),
            Container::Array(a) => a.feed(bytes, p),
            Container::Whole { buf } => {
                buf.extend_from_slice(bytes);
                Ok(())
            }
        }
    }

    pub(crate) fn finish(&mut self, p: &mut Pipeline) -> Result<()> {
        match self {
            Container::Start { want, buf } => {
                let Some(line) = first_line(buf, true) else { return Ok(()) };
                let fmt = want.unwrap_or_else(|| Fmt::from_name(detect_format(line)).unwrap_or(Fmt::Csv));
                let held = std::mem::take(buf);
                *self = Container::of(fmt);
                self.feed(&held, p)?;
                self.finish(p)
            }
            Container::Csv(c) => c.run(&[], p, true),
            Container::Lines(l) => l.finish(p),
            Container::Array(a) => a.finish(p),
            Container::Whole { buf } => whole(buf, p),
        }?;
        if p.unsorted {
            p.sort_and_window();
        }
        Ok(())
    }

    fn of(fmt: Fmt) -> Container {
        match fmt.kind() {
            Kind::Csv => Container::Csv(Box::new(CsvIn::new(fmt))),
            Kind::Lines => Container::Lines(Box::new(LinesIn { fmt, buf: Vec::new(), line: 0, plan: None })),
            Kind::Array => Container::Array(ArrayIn::default()),
            Kind::Whole => Container::Whole { buf: Vec::new() },
        }
    }
}

/// The first non-blank line of `buf` once it is complete (or, at the end, whatever is there).
fn first_line(buf: &[u8], at_end: bool) -> Option<&[u8]> {
    let mut start = 0;
    while start < buf.len() {
        match buf[start..].iter().position(|&c| c == b'\n') {
            Some(n) => {
                let line = &buf[start..start + n];
                if line.iter().any(|c| !c.is_ascii_whitespace()) && line != b"\xef\xbb\xbf" {
                    return Some(line);
                }
                start += n + 1;
            }
            None => {
                let rest = &buf[start..];
                return (at_end && rest.iter().any(|c| !c.is_ascii_whitespace())).then_some(rest);
            }
        }
    }
    None
}

fn utf8(bytes: &[u8], line: u64) -> Result<&str> {
    std::str::from_utf8(bytes).map_err(|e| SimError::config("trace", format!("line {line}: not UTF-8 text ({e})")))
}

/// CSV records through `csv-core`.
pub(crate) struct CsvIn {
    fmt: Fmt,
    rdr: csv_core::Reader,
    out: Vec<u8>,
    ends: Vec<usize>,
    nout: usize,
    nend: usize,
    plan: Option<Plan>,
}

impl CsvIn {
    fn new(fmt: Fmt) -> CsvIn {
        CsvIn {
            fmt,
            rdr: csv_core::Reader::new(),
            out: vec![0; 4096],
            ends: vec![0; 64],
            nout: 0,
            nend: 0,
            plan: None,
        }
    }

    fn run(&mut self, mut input: &[u8], p: &mut Pipeline, eof: bool) -> Result<()> {
        use csv_core::ReadRecordResult as R;
        loop {
            if p.done {
                return Ok(());
            }
            let (res, nin, nout, nend) = self.rdr.read_record(input, &mut self.out[self.nout..], &mut self.ends[self.nend..]);
            // A record's line is the line of its terminator: before an LF the reader has
            // counted it already, before a lone CR (the LF of CR LF still to come) not yet.
            let ended_by_lf = nin > 0 && input[nin - 1] == b'\n';
            input = &input[nin..];
            self.nout += nout;
            self.nend += nend;
            match res {
                R::InputEmpty if !eof => return Ok(()),
                R::InputEmpty => {}
                R::OutputFull => self.out.resize(self.out.len() * 2, 0),
                R::OutputEndsFull => self.ends.resize(self.ends.len() * 2, 0),
                R::Record => {
                    let line = if ended_by_lf { self.rdr.line() - 1 } else { self.rdr.line() };
                    self.record(line, p)?;
                    self.nout = 0;
                    self.nend = 0;
                }
                R::End => return Ok(()),
            }
        }
    }

    fn record(&mut self, line: u64, p: &mut Pipeline) -> Result<()> {
        let data = &self.out[..self.nout];
        let mut fields: Vec<&str> = Vec::with_capacity(self.nend);
        let mut at = 0;
        for &end in &self.ends[..self.nend] {
            fields.push(utf8(&data[at..end], line)?);
            at = end;
        }
        if fields.iter().all(|f| f.trim().is_empty()) {
            return Ok(());
        }
        let Some(plan) = &self.plan else {
            let header: Vec<String> = fields.iter().map(|f| f.trim().trim_start_matches('\u{feff}').to_string()).collect();
            let mut plan = Plan::new(self.fmt, &p.options, Some(&header));
            let mapped = plan.mapped(&p.options);
            plan.bind_header(&header, &|f| mapped[f]).map_err(|e| at_line(e, line))?;
            self.plan = Some(plan);
            return Ok(());
        };
        p.raw.clear();
        plan.csv_row(&fields, &mut p.raw).map_err(|e| e.at("line", line))?;
        p.accept(&plan.names, "line", line)
    }
}

/// Put `line N:` in front of a trace error's message.
fn at_line(e: SimError, line: u64) -> SimError {
    match e {
        SimError::Config { path, message } => SimError::Config { path, message: format!("line {line}: {message}") },
        other => other,
    }
}

/// One JSON object per line (Mooncake, plain JSONL).
pub(crate) struct LinesIn {
    fmt: Fmt,
    buf: Vec<u8>,
    /// Lines completed so far.
    line: u64,
    plan: Option<Plan>,
}

/// A Mooncake row, read without building a JSON tree (the fast path of the biggest
/// traces). Other fields are ignored.
#[derive(Deserialize)]
struct MooncakeRow {
    timestamp: Option<f64>,
    input_length: Option<u64>,
    output_length: Option<u64>,
    hash_ids: Option<Vec<u64>>,
}

impl LinesIn {
    fn feed(&mut self, mut input: &[u8], p: &mut Pipeline) -> Result<()> {
        while !p.done {
            let Some(n) = input.iter().position(|&c| c == b'\n') else {
                self.buf.extend_from_slice(input);
                return Ok(());
            };
            self.line += 1;
            if self.buf.is_empty() {
                self.row(&input[..n], self.line, p)?;
            } else {
                self.buf.extend_from_slice(&input[..n]);
                let held = std::mem::take(&mut self.buf);
                self.row(&held, self.line, p)?;
            }
            input = &input[n + 1..];
        }
        Ok(())
    }

    fn finish(&mut self, p: &mut Pipeline) -> Result<()> {
        if !self.buf.is_empty() && !p.done {
            let held = std::mem::take(&mut self.buf);
            self.row(&held, self.line + 1, p)?;
        }
        Ok(())
    }

    fn row(&mut self, bytes: &[u8], line: u64, p: &mut Pipeline) -> Result<()> {
        let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let bad = |e: String| SimError::config("trace", format!("line {line}: {e}"));
        if self.fmt == Fmt::Mooncake {
            let plan = self.plan.get_or_insert_with(|| Plan::new(Fmt::Mooncake, &p.options, None));
            // Fast path: plain serde; only a row that fails is parsed again to name the field.
            let row: MooncakeRow = match serde_json::from_slice(bytes) {
                Ok(row) => row,
                Err(_) => {
                    let mut de = serde_json::Deserializer::from_slice(bytes);
                    let e = match serde_path_to_error::deserialize::<_, MooncakeRow>(&mut de) {
                        Ok(_) => return Err(bad("not valid JSON".to_string())),
                        Err(e) => e,
                    };
                    let path = e.path().to_string();
                    return Err(if path == "." || path == "?" {
                        bad(format!("not a JSON object: {}", e.inner()))
                    } else {
                        bad(format!("{path}: {}", e.inner()))
                    });
                }
            };
            let missing = |name: &str| bad(format!("missing field `{name}` (format mooncake)"));
            let r = &mut p.raw;
            r.clear();
            let t = row.timestamp.ok_or_else(|| missing("timestamp"))?;
            r.t_ns = Some(s_to_ns(t / 1e3).ok_or_else(|| bad(format!("timestamp: out of range (got {t})")))?);
            r.prompt = row.input_length.ok_or_else(|| missing("input_length"))?;
            r.output = row.output_length.ok_or_else(|| missing("output_length"))?;
            if let Some(ids) = row.hash_ids {
                r.has_hash = true;
                r.hash_ids = ids;
            }
            return p.accept(&plan.names, "line", line);
        }
        let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| bad(format!("not valid JSON: {e}")))?;
        let Some(obj) = value.as_object() else {
            return Err(bad("expected a JSON object".to_string()));
        };
        if self.plan.is_none() {
            let keys: Vec<String> = obj.keys().cloned().collect();
            self.plan = Some(Plan::new(self.fmt, &p.options, Some(&keys)));
        }
        let plan = self.plan.as_ref().expect("set above");
        p.raw.clear();
        plan.json_row(obj, &mut p.raw).map_err(|e| e.at("line", line))?;
        p.accept(&plan.names, "line", line)
    }
}

/// The objects of a top-level JSON array (inference-perf's per-request report), cut out
/// by bracket depth so that only one is held at a time.
#[derive(Default)]
pub(crate) struct ArrayIn {
    state: ArrayState,
    buf: Vec<u8>,
    line: u64,
    elem_line: u64,
    depth: u32,
    in_str: bool,
    escaped: bool,
}

#[derive(Default, PartialEq, Eq)]
enum ArrayState {
    #[default]
    BeforeOpen,
    Between,
    InElement,
    Closed,
}

impl ArrayIn {
    fn feed(&mut self, input: &[u8], p: &mut Pipeline) -> Result<()> {
        if self.line == 0 {
            self.line = 1;
        }
        let bad = |line: u64, what: &str| SimError::config("trace", format!("line {line}: {what}"));
        for &c in input {
            if p.done {
                return Ok(());
            }
            if c == b'\n' {
                self.line += 1;
            }
            match self.state {
                ArrayState::BeforeOpen => match c {
                    b'[' => self.state = ArrayState::Between,
                    c if c.is_ascii_whitespace() || c == 0xef || c == 0xbb || c == 0xbf => {}
                    _ => return Err(bad(self.line, "expected a JSON array of request records ('[')")),
                },
                ArrayState::Between => match c {
                    b']' => self.state = ArrayState::Closed,
                    b'{' => {
                        self.state = ArrayState::InElement;
                        self.elem_line = self.line;
                        self.buf.clear();
                        self.buf.push(c);
                        self.depth = 1;
                    }
                    c if c.is_ascii_whitespace() || c == b',' => {}
                    _ => return Err(bad(self.line, "expected a request record (a JSON object)")),
                },
                ArrayState::InElement => {
                    self.buf.push(c);
                    if self.in_str {
                        if self.escaped {
                            self.escaped = false;
                        } else if c == b'\\' {
                            self.escaped = true;
                        } else if c == b'"' {
                            self.in_str = false;
                        }
                    } else {
                        match c {
                            b'"' => self.in_str = true,
                            b'{' | b'[' => self.depth += 1,
                            b'}' | b']' => {
                                self.depth -= 1;
                                if self.depth == 0 {
                                    self.element(p)?;
                                    self.state = ArrayState::Between;
                                }
                            }
                            _ => {}
                        }
                    }
                }
                ArrayState::Closed if c.is_ascii_whitespace() => {}
                ArrayState::Closed => return Err(bad(self.line, "unexpected text after the end of the array")),
            }
        }
        Ok(())
    }

    fn element(&mut self, p: &mut Pipeline) -> Result<()> {
        let line = self.elem_line;
        let row: InferencePerfRow = match serde_json::from_slice(&self.buf) {
            Ok(row) => row,
            Err(_) => {
                let mut de = serde_json::Deserializer::from_slice(&self.buf);
                let e = serde_path_to_error::deserialize::<_, InferencePerfRow>(&mut de).err();
                let what = e.map_or("not valid JSON".to_string(), |e| format!("{}: {}", e.path(), e.inner()));
                return Err(SimError::config("trace", format!("line {line}: {what}")));
            }
        };
        p.raw.clear();
        if !row.fill(&mut p.raw).map_err(|e| e.at("line", line))? {
            return Ok(());
        }
        p.unsorted = true;
        p.accept(&inference_perf_names(), "line", line)
    }

    fn finish(&mut self, p: &mut Pipeline) -> Result<()> {
        match self.state {
            ArrayState::Closed => Ok(()),
            ArrayState::BeforeOpen if self.buf.is_empty() => Ok(()),
            _ if p.done => Ok(()),
            _ => Err(SimError::config("trace", format!("line {}: the JSON array is not closed (a truncated file?)", self.line))),
        }
    }
}

fn inference_perf_names() -> super::row::Names {
    super::row::Names {
        time: "start_time".into(),
        unit_ns: 1e9,
        unit: "s",
        prompt: "info.input_tokens".into(),
        output: "info.output_tokens".into(),
        prefix_length: String::new(),
        hash_ids: String::new(),
        turn: "info.extra_info.chat_round".into(),
    }
}

/// A vLLM benchmark result: one JSON object with a list per field.
fn whole(buf: &[u8], p: &mut Pipeline) -> Result<()> {
    if buf.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    let mut de = serde_json::Deserializer::from_slice(buf);
    let doc: VllmResult = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| SimError::config("trace", format!("not a vLLM benchmark result: {}: {}", e.path(), e.inner())))?;
    let lens = |name: &str, v: &Option<Vec<u64>>| -> Result<Vec<u64>> {
        v.clone().ok_or_else(|| {
            SimError::config(
                "trace",
                format!("{name}: missing (vLLM saves the per-request lengths only with --save-detailed)"),
            )
        })
    };
    let inputs = lens("input_lens", &doc.input_lens)?;
    let outputs = lens("output_lens", &doc.output_lens)?;
    let n = inputs.len();
    let same = |name: &str, len: usize| -> Result<()> {
        if len != n {
            return Err(SimError::config("trace", format!("{name}: {len} entries, but input_lens has {n}")));
        }
        Ok(())
    };
    same("output_lens", outputs.len())?;
    if let Some(t) = &doc.start_times {
        same("start_times", t.len())?;
        p.unsorted = true;
    } else {
        p.fill = Some(doc.rate()?);
    }
    if let Some(e) = &doc.errors {
        same("errors", e.len())?;
    }
    let names = super::row::Names {
        time: "start_times".into(),
        unit_ns: 1e9,
        unit: "s",
        prompt: "input_lens".into(),
        output: "output_lens".into(),
        prefix_length: String::new(),
        hash_ids: String::new(),
        turn: String::new(),
    };
    for i in 0..n {
        if doc.errors.as_ref().and_then(|e| e[i].as_deref()).is_some_and(|e| !e.is_empty()) {
            continue;
        }
        p.raw.clear();
        p.raw.prompt = inputs[i];
        p.raw.output = outputs[i];
        if let Some(t) = &doc.start_times {
            p.raw.t_ns = Some(s_to_ns(t[i]).ok_or_else(|| {
                CellError::new("start_times", format!("out of range (got {})", t[i])).at("request", i as u64 + 1)
            })?);
        }
        p.accept(&names, "request", i as u64 + 1)?;
    }
    Ok(())
}
