//! What happens to every row, whatever its format: time checks and windowing, the checks
//! of an explicit request, and the move into [`Rows`].

use super::spec::Options;
use crate::error::{Result, SimError};
use crate::rng::SimRng;
use crate::workload::assemble::{Own, Row, Rows, NO_SESSION, NO_TURN};
use crate::workload::keys::{blocks_for, key_str, push_hash_blocks, Ns};
use crate::workload::sample::STREAM_ARRIVALS;

/// One row as a format read it, before the common checks. Reused from row to row.
#[derive(Debug, Default)]
pub(crate) struct RawRow {
    /// Timestamp in ns on the trace's own clock (`None`: the trace has no times).
    pub t_ns: Option<i64>,
    pub prompt: u64,
    pub output: u64,
    pub priority: i64,
    /// Prefix group name and length.
    pub group: Option<(String, u64)>,
    pub has_hash: bool,
    pub hash_ids: Vec<u64>,
    pub session: Option<String>,
    pub turn: Option<u64>,
    pub think_ns: u64,
    /// The LoRA adapter the row names (0-based), if its trace has the column.
    pub lora: Option<u64>,
}

impl RawRow {
    pub(crate) fn clear(&mut self) {
        self.t_ns = None;
        self.prompt = 0;
        self.output = 0;
        self.priority = 0;
        self.lora = None;
        self.group = None;
        self.has_hash = false;
        self.hash_ids.clear();
        self.session = None;
        self.turn = None;
        self.think_ns = 0;
    }
}

/// The column names a format reads each field from (for error messages), and how its
/// time column counts.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    pub time: String,
    /// Nanoseconds per unit of the time column, and the unit's name.
    pub unit_ns: f64,
    pub unit: &'static str,
    pub prompt: String,
    pub output: String,
    pub prefix_length: String,
    pub hash_ids: String,
    pub turn: String,
}

/// A failure inside one cell: the column and what is wrong with it.
#[derive(Debug)]
pub(crate) struct CellError {
    pub column: String,
    pub message: String,
}

impl CellError {
    pub(crate) fn new(column: impl Into<String>, message: impl std::fmt::Display) -> Self {
        CellError { column: column.into(), message: message.to_string() }
    }

    /// The config error for this cell at row `at` (`line 17`).
    pub(crate) fn at(self, label: &str, at: u64) -> SimError {
        let col = if self.column.is_empty() { String::new() } else { format!("{}: ", self.column) };
        SimError::config("trace", format!("{label} {at}: {col}{}", self.message))
    }
}

/// The shared state of a reader: options, rows so far, time bookkeeping.
#[derive(Debug)]
pub(crate) struct Pipeline {
    pub options: Options,
    pub rows: Rows,
    /// Arrivals to generate at the end (a vLLM result without times): (rate, burstiness).
    pub fill: Option<(f64, f64)>,
    /// No more rows wanted.
    pub done: bool,
    /// Rows read (inside the window or not).
    pub seen: u64,
    /// The format's rows are not in time order (a benchmark's report lists requests as
    /// they finish): keep absolute times, then sort and window at the end.
    pub unsorted: bool,
    t0: Option<i64>,
    last: Option<(i64, u64)>,
    pub raw: RawRow,
}

impl Pipeline {
    pub(crate) fn new(options: Options) -> Pipeline {
        Pipeline { options, rows: Rows::default(), fill: None, done: false, seen: 0, unsorted: false, t0: None, last: None, raw: RawRow::default() }
    }

    /// Check `self.raw` (row number `at`, counted as `label`) and keep it if it falls in
    /// the window.
    pub(crate) fn accept(&mut self, names: &Names, label: &'static str, at: u64) -> Result<()> {
        self.seen += 1;
        self.rows.row_label = label;
        let raw = &self.raw;
        let err = |column: &str, message: String| CellError::new(column, message).at(label, at);
        let arrival_ns = match raw.t_ns {
            Some(t) => {
                if t < 0 {
                    return Err(err(&names.time, format!("must be >= 0 (got {} {})", t as f64 / names.unit_ns, names.unit)));
                }
                if self.unsorted {
                    Some(t as u64)
                } else {
                if let Some((lt, lat)) = self.last {
                    if t < lt {
                        let t0 = self.t0.unwrap_or(0);
                        return Err(err(
                            &names.time,
                            format!(
                                "goes back in time: {} s after the first row, before {label} {lat}'s {} s (a trace must be sorted by time)",
                                (t - t0) as f64 / 1e9,
                                (lt - t0) as f64 / 1e9
                            ),
                        ));
                    }
                }
                self.last = Some((t, at));
                let t0 = *self.t0.get_or_insert(t);
                let rel = t - t0;
                if rel < self.options.start_ns {
                    return Ok(());
                }
                if self.options.end_ns.is_some_and(|end| rel >= end) {
                    self.done = true;
                    return Ok(());
                }
                Some((rel - self.options.start_ns) as u64)
                }
            }
            None => None,
        };
        let tokens = |column: &str, v: u64| -> Result<u32> {
            if v == 0 {
                return Err(err(column, "must be >= 1 token (got 0)".to_string()));
            }
            u32::try_from(v).map_err(|_| err(column, format!("{v} tokens is out of range")))
        };
        let prompt = tokens(&names.prompt, raw.prompt)?;
        let output = tokens(&names.output, raw.output)?;
        let priority = i32::try_from(raw.priority).map_err(|_| err("priority", format!("{} is out of range", raw.priority)))?;
        let own = if let Some((group, len)) = &raw.group {
            if *len == 0 || *len > u64::from(prompt) {
                return Err(err(&names.prefix_length, format!("must be in 1..={prompt} (the prompt's tokens) (got {len})")));
            }
            Own::Group { key: key_str(Ns::PrefixGroup, group), len: *len as u32 }
        } else if raw.has_hash {
            let block = self.options.block_tokens;
            let want = blocks_for(prompt, block);
            if raw.hash_ids.len() as u64 != want {
                return Err(err(
                    &names.hash_ids,
                    format!(
                        "{} ids for a prompt of {prompt} tokens; with hash_block_tokens = {block} it spans {want} blocks, one id each",
                        raw.hash_ids.len()
                    ),
                ));
            }
            if raw.session.is_some() {
                return Err(err(&names.hash_ids, "cannot be combined with a session".to_string()));
            }
            let start = self.rows.arena.len() as u32;
            push_hash_blocks(&mut self.rows.arena, raw.hash_ids.iter().copied(), prompt, block);
            Own::Segs { start, count: raw.hash_ids.len() as u32 }
        } else {
            Own::None
        };
        let turn = match raw.turn {
            Some(t) if t >= u64::from(NO_TURN) => return Err(err(&names.turn, format!("{t} is out of range"))),
            Some(t) => t as u32,
            None => NO_TURN,
        };
        let session = match &raw.session {
            Some(s) => {
                let s = s.clone();
                self.rows.session(&s)
            }
            None => NO_SESSION,
        };
        let lora = match raw.lora {
            None => 0,
            Some(a) if a < u64::from(u16::MAX) => a as u16 + 1,
            Some(a) => return Err(err("lora", format!("adapter {a} is out of range (at most 65,534)"))),
        };
        self.rows.rows.push(Row { arrival_ns, prompt, output, priority, own, session, turn, think_ns: self.raw.think_ns, lora });
        self.rows.lines.push(u32::try_from(at).unwrap_or(u32::MAX));
        if !self.unsorted && self.rows.rows.len() as u64 >= self.options.max_requests {
            self.done = true;
        }
        Ok(())
    }

    /// For an unsorted format: order the rows by time (ties by position), make the first
    /// one time 0, and apply the window and `max_requests`.
    pub(crate) fn sort_and_window(&mut self) {
        let rows = std::mem::take(&mut self.rows.rows);
        let lines = std::mem::take(&mut self.rows.lines);
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_by_key(|&i| (rows[i].arrival_ns, i));
        let t0 = order.first().and_then(|&i| rows[i].arrival_ns).unwrap_or(0);
        let (start, end) = (self.options.start_ns as u64, self.options.end_ns.map(|e| e as u64));
        for i in order {
            let Some(t) = rows[i].arrival_ns else { continue };
            let rel = t - t0;
            if rel < start || end.is_some_and(|e| rel >= e) {
                continue;
            }
            if self.rows.rows.len() as u64 >= self.options.max_requests {
                break;
            }
            self.rows.rows.push(Row { arrival_ns: Some(rel - start), ..rows[i].clone() });
            self.rows.lines.push(lines[i]);
        }
    }
}

/// Arrival times for a trace without them, as vLLM's benchmark sends: the first request at
/// 0, then gamma gaps of mean 1/rate and shape `burstiness` (1 = Poisson); an infinite rate
/// sends all at 0. `seed` is the scenario's.
pub(crate) fn fill_arrivals(rows: &mut Rows, rate: f64, burstiness: f64, seed: u64) {
    let mut rng = SimRng::stream(seed, STREAM_ARRIVALS);
    let mut t_s = 0.0_f64;
    for r in &mut rows.rows {
        r.arrival_ns = Some((t_s * 1e9).round() as u64);
        if rate.is_finite() {
            t_s += rng.gamma(burstiness, 1.0 / (rate * burstiness));
        }
    }
}
