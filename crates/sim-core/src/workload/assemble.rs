//! From listed requests (an explicit `requests` list or the rows of a trace) to a
//! [`Workload`]: token identity from prefix groups, `hash_ids` and sessions, closed-loop
//! dependencies between a session's turns, and the arrival order.
//!
//! **Sessions.** Rows sharing a `session_id` are the turns of one conversation, ordered by
//! `turn` (or by their order in the list or file when no row gives `turn`). A turn's
//! `prompt_tokens` counts its *whole* prompt, as the server received it: the previous
//! turn's prompt and output, then the tokens new in this turn. So turn k's prompt holds
//! turn k−1's prompt (the same segments), turn k−1's output ([`output_key`]), then its own
//! new tokens; a turn shorter than the conversation so far is an error. Turn k is sent at
//! the later of its own arrival time (when given) and `think_ms` after turn k−1 finishes
//! ([`After`]); the first turn needs an arrival time.

use std::collections::HashMap;

use super::keys::{blocks_for, key, key_str, push_hash_blocks, Ns};
use super::sample::tokens_at_least_one;
use super::explicit::ExplicitRequest;
use super::{output_key, After, RequestSpec, Segment, Workload, MAX_REQUESTS};
use crate::error::{check, Result, SimError};

/// A row's own leading content (before any session history).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Own {
    /// Every token unique (or, for a session turn, only the session's history is shared).
    None,
    /// The first `len` tokens are the prefix group `key`'s.
    Group { key: u64, len: u32 },
    /// Hash-id blocks already in the arena: `arena[start .. start + count]`.
    Segs { start: u32, count: u32 },
}

/// "No session" in [`Row::session`].
pub(crate) const NO_SESSION: u32 = u32::MAX;
/// "No explicit turn number" in [`Row::turn`]: the row's order in its session decides.
pub(crate) const NO_TURN: u32 = u32::MAX;

/// One listed request before assembly.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    /// Arrival (or earliest send time of a later turn) in ns; `None` only for a session's
    /// later turns, which then wait only for the previous turn.
    pub arrival_ns: Option<u64>,
    pub prompt: u32,
    pub output: u32,
    pub priority: i32,
    pub own: Own,
    /// Index into [`Rows`]'s sessions, or [`NO_SESSION`].
    pub session: u32,
    /// Turn number, or [`NO_TURN`].
    pub turn: u32,
    /// Closed-loop delay after the previous turn finishes (ignored on a first turn).
    pub think_ns: u64,
    /// The LoRA adapter the row names, index + 1 (0: none named; `workload.lora` draws one).
    pub lora: u16,
}

/// Listed requests plus what their rows index.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rows {
    pub rows: Vec<Row>,
    /// Hash-id blocks of the rows (indexed by [`Own::Segs`]); the head of the final arena.
    pub arena: Vec<Segment>,
    /// Session name → index (lookups only, never iterated).
    session_index: HashMap<String, u32>,
    /// Per session: its name (errors) and the hash its turn keys derive from.
    sessions: Vec<(String, u64)>,
    /// Per row: its 1-based line in the trace file; empty for an explicit list.
    pub lines: Vec<u32>,
    /// What `lines` count: "line" (default) or "request" (a trace without lines).
    pub row_label: &'static str,
}

impl Rows {
    /// The index of session `name`, creating it on first sight.
    pub(crate) fn session(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.session_index.get(name) {
            return i;
        }
        let i = self.sessions.len() as u32;
        self.session_index.insert(name.to_string(), i);
        self.sessions.push((name.to_string(), key_str(Ns::SessionTurn, name)));
        i
    }

    /// Where row `i` came from, for an error: `requests[i]` or `line N`.
    fn at(&self, i: usize, field: &str) -> (String, String) {
        match self.lines.get(i) {
            Some(line) => {
                let label = if self.row_label.is_empty() { "line" } else { self.row_label };
                ("trace".to_string(), format!("{label} {line}: {field}: "))
            }
            None => (format!("requests[{i}].{field}"), String::new()),
        }
    }

    fn error(&self, i: usize, field: &str, message: impl std::fmt::Display) -> SimError {
        let (path, lead) = self.at(i, field);
        SimError::config(path, format!("{lead}{message}"))
    }

    /// Build the workload: segments for prefixes and sessions, `after` links, and the
    /// requests sorted by `(arrival_ns, id)`. Request ids are row positions.
    pub(crate) fn assemble(mut self) -> Result<Workload> {
        let mut reqs: Vec<RequestSpec> = Vec::with_capacity(self.rows.len());
        let mut arena = std::mem::take(&mut self.arena);
        let mut turns: Vec<Vec<u32>> = vec![Vec::new(); self.sessions.len()];
        for (i, row) in self.rows.iter().enumerate() {
            if row.session != NO_SESSION {
                turns[row.session as usize].push(i as u32);
                continue;
            }
            let segs = match row.own {
                Own::None => (0, 0),
                Own::Group { key, len } => {
                    arena.push(Segment { key, len });
                    (arena.len() as u32 - 1, 1)
                }
                Own::Segs { start, count } => (start, count),
            };
            let arrival_ns = row.arrival_ns.ok_or_else(|| self.error(i, "arrival_ms", "required"))?;
            reqs.push(RequestSpec { segs, lora: row.lora, ..RequestSpec::new(i as u32, arrival_ns, row.prompt, row.output, row.priority) });
        }
        for (s, mut idxs) in turns.into_iter().enumerate() {
            self.order_turns(s, &mut idxs)?;
            self.push_session(s, &idxs, &mut arena, &mut reqs)?;
        }
        if u32::try_from(arena.len()).is_err() {
            return Err(SimError::config("", "the workload's prompts have more than 2^32 shared segments"));
        }
        reqs.sort_by_key(|r| (r.arrival_ns, r.id));
        Ok(Workload { requests: reqs, segments: arena })
    }

    /// Sort one session's rows by turn (or keep their order when no row gives one).
    fn order_turns(&self, s: usize, idxs: &mut [u32]) -> Result<()> {
        let numbered = idxs.iter().filter(|&&i| self.rows[i as usize].turn != NO_TURN).count();
        if numbered == 0 {
            return Ok(());
        }
        if numbered != idxs.len() {
            let i = *idxs.iter().find(|&&i| self.rows[i as usize].turn == NO_TURN).unwrap_or(&idxs[0]);
            return Err(self.error(i as usize, "turn", format!("give `turn` on every request of session '{}' or on none", self.sessions[s].0)));
        }
        idxs.sort_by_key(|&i| (self.rows[i as usize].turn, i));
        for w in idxs.windows(2) {
            if self.rows[w[0] as usize].turn == self.rows[w[1] as usize].turn {
                return Err(self.error(
                    w[1] as usize,
                    "turn",
                    format!("session '{}' has turn {} twice", self.sessions[s].0, self.rows[w[1] as usize].turn),
                ));
            }
        }
        Ok(())
    }

    /// Lay out session `s` in the arena as `[own prefix] q0 o0 q1 o1 …` so that each turn's
    /// prompt is one contiguous range starting at the session's first segment.
    fn push_session(&self, s: usize, idxs: &[u32], arena: &mut Vec<Segment>, reqs: &mut Vec<RequestSpec>) -> Result<()> {
        let (name, skey) = &self.sessions[s];
        let start = arena.len();
        let mut prev: Option<usize> = None;
        let mut first_arrival = 0;
        for (k, &i) in idxs.iter().enumerate() {
            let i = i as usize;
            let row = &self.rows[i];
            let turn_key = key(Ns::SessionTurn, *skey, if row.turn == NO_TURN { k as u64 } else { u64::from(row.turn) });
            let (new_tokens, after, arrival_ns) = match prev {
                None => {
                    let prefix = match row.own {
                        Own::None => 0,
                        Own::Group { key, len } => {
                            arena.push(Segment { key, len });
                            len
                        }
                        Own::Segs { .. } => return Err(self.error(i, "hash_ids", "cannot be combined with session_id")),
                    };
                    first_arrival = row.arrival_ns.ok_or_else(|| {
                        self.error(i, "arrival_ms", format!("required on the first turn of session '{name}'"))
                    })?;
                    (row.prompt - prefix, None, first_arrival)
                }
                Some(p) => {
                    let before = &self.rows[p];
                    if row.own != Own::None {
                        return Err(self.error(i, "prefix_group", "only the first turn of a session may set a prefix (later turns repeat the conversation)"));
                    }
                    let history = u64::from(before.prompt) + u64::from(before.output);
                    if u64::from(row.prompt) < history {
                        return Err(self.error(
                            i,
                            "prompt_tokens",
                            format!(
                                "{} is shorter than session '{name}' so far: the previous turn's prompt ({}) + output ({}) = {history}; a turn's prompt_tokens counts the whole prompt, earlier turns included",
                                row.prompt, before.prompt, before.output
                            ),
                        ));
                    }
                    arena.push(Segment { key: output_key(p as u32), len: before.output });
                    let after = After { parent: p as u32, think_ns: row.think_ns };
                    ((u64::from(row.prompt) - history) as u32, Some(after), row.arrival_ns.unwrap_or(first_arrival))
                }
            };
            if new_tokens > 0 {
                arena.push(Segment { key: turn_key, len: new_tokens });
            }
            let segs = (start as u32, (arena.len() - start) as u32);
            reqs.push(RequestSpec { segs, after, lora: row.lora, ..RequestSpec::new(i as u32, arrival_ns, row.prompt, row.output, row.priority) });
            prev = Some(i);
        }
        Ok(())
    }
}

/// Default tokens per `hash_ids` entry (Mooncake's traces use 512-token blocks).
pub const DEFAULT_HASH_BLOCK_TOKENS: u32 = 512;

/// Validate an explicit `requests` list into rows; errors name `requests[i].field`.
/// `prompt_tokens + output_tokens` above `max_model_len` is an error here (a list is
/// written by hand), unlike in a trace, whose rows the engine rejects one by one.
pub(super) fn explicit_rows(list: &[ExplicitRequest], max_model_len: u32, block_tokens: u32) -> Result<Rows> {
    if list.is_empty() {
        return Err(SimError::config("requests", "must contain at least one request"));
    }
    if list.len() as u64 > MAX_REQUESTS {
        return Err(SimError::config("requests", format!("too many requests ({}); the limit is {MAX_REQUESTS}", list.len())));
    }
    let mut rows = Rows { rows: Vec::with_capacity(list.len()), ..Rows::default() };
    for (i, r) in list.iter().enumerate() {
        let path = |field: &str| format!("requests[{i}].{field}");
        let prompt = r.prompt_tokens.ok_or_else(|| SimError::config(path("prompt_tokens"), "required"))?;
        tokens_at_least_one(&path("prompt_tokens"), prompt)?;
        let output = r.output_tokens.ok_or_else(|| SimError::config(path("output_tokens"), "required"))?;
        tokens_at_least_one(&path("output_tokens"), output)?;
        let total = u64::from(prompt) + u64::from(output);
        if total > u64::from(max_model_len) {
            return Err(SimError::config(
                path("prompt_tokens"),
                format!("prompt_tokens + output_tokens = {total} exceeds the model's max_model_len ({max_model_len})"),
            ));
        }
        if r.turn == Some(NO_TURN) {
            return Err(SimError::config(path("turn"), format!("must be below {NO_TURN}")));
        }
        let session = match &r.session_id {
            Some(id) => rows.session(&id.text()),
            None => {
                for (field, present) in [("turn", r.turn.is_some()), ("think_ms", r.think_ms.is_some())] {
                    if present {
                        return Err(SimError::config(path(field), "only applies to a session's turns (set session_id)"));
                    }
                }
                NO_SESSION
            }
        };
        let arrival_ns = match r.arrival_ms {
            Some(ms) => {
                check::non_negative(&path("arrival_ms"), ms)?;
                Some((ms * 1e6).round() as u64)
            }
            None if session != NO_SESSION => None,
            None => return Err(SimError::config(path("arrival_ms"), "required (milliseconds)")),
        };
        let think_ns = match r.think_ms {
            Some(ms) => {
                check::non_negative(&path("think_ms"), ms)?;
                ((ms * 1e6).round() as u64).min(crate::request::MAX_TIME_NS)
            }
            None => 0,
        };
        let own = match (&r.prefix_group, r.prefix_length, &r.hash_ids) {
            (Some(_), _, Some(_)) => {
                return Err(SimError::config(path("hash_ids"), "cannot be combined with prefix_group (give one way of naming shared tokens)"))
            }
            (Some(g), Some(len), None) => {
                if len == 0 || len > prompt {
                    return Err(SimError::config(
                        path("prefix_length"),
                        format!("must be in 1..=prompt_tokens ({prompt}) (got {len})"),
                    ));
                }
                Own::Group { key: key_str(Ns::PrefixGroup, &g.text()), len }
            }
            (Some(_), None, None) => return Err(SimError::config(path("prefix_length"), "required with prefix_group (tokens)")),
            (None, Some(_), _) => return Err(SimError::config(path("prefix_group"), "required with prefix_length")),
            (None, None, Some(ids)) => {
                if session != NO_SESSION {
                    return Err(SimError::config(path("hash_ids"), "cannot be combined with session_id"));
                }
                let want = blocks_for(prompt, block_tokens);
                if ids.len() as u64 != want {
                    return Err(SimError::config(
                        path("hash_ids"),
                        format!(
                            "{} ids for a prompt of {prompt} tokens; with hash_block_tokens = {block_tokens} it spans {want} blocks, one id each",
                            ids.len()
                        ),
                    ));
                }
                let start = rows.arena.len() as u32;
                push_hash_blocks(&mut rows.arena, ids.iter().copied(), prompt, block_tokens);
                Own::Segs { start, count: ids.len() as u32 }
            }
            (None, None, None) => Own::None,
        };
        rows.rows.push(Row {
            arrival_ns,
            prompt,
            output,
            priority: r.priority.unwrap_or(0),
            own,
            session,
            turn: r.turn.unwrap_or(NO_TURN),
            think_ns,
            lora: match r.lora {
                None => 0,
                Some(a) => u16::try_from(a).ok().filter(|&a| a < u16::MAX).map(|a| a + 1).ok_or_else(|| {
                    SimError::config(format!("requests[{i}].lora"), format!("adapter {a} is out of range (at most 65,534)"))
                })?,
            },
        });
    }
    Ok(rows)
}
