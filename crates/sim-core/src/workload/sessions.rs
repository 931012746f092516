//! `workload.sessions`: generated multi-turn conversations (closed loop).
//!
//! Session starts follow the workload's `arrival` process. A session has `turns` turns;
//! turn k asks a new question of `question` tokens and gets `output` tokens back. Its
//! prompt is the whole conversation so far, every earlier turn's question and answer, then
//! the new question, so its prompt length is Σ_{j<k}(question_j + output_j) + question_k,
//! and it shares every earlier token with turn k−1's prompt and output. Turn k is sent
//! `think_s` after turn k−1 finishes ([`After`]): the load depends on the simulated latency.
//! A session ends at its first turn that cannot fit `max_model_len` (prompt + output): that
//! turn is still sent (and rejected by the server), as a chat client would try it.

use serde::{Deserialize, Serialize};

use super::arrival::{ArrivalModel, Stop};
use super::dist::{Len, SecondsSpec, SecondsModel};
use super::keys::{key, Ns};
use super::sample::{seconds_to_ns, LengthModel, STREAM_ARRIVALS};
use super::{output_key, After, RequestSpec, Segment, Workload, MAX_REQUESTS};
use crate::error::{check, Result, SimError};
use crate::rng::SimRng;

/// RNG streams of the generator: each quantity its own, so changing one distribution does
/// not move the others.
const STREAM_TURNS: u64 = 6;
const STREAM_QUESTION: u64 = 7;
const STREAM_ANSWER: u64 = 8;
const STREAM_THINK: u64 = 9;

/// `workload.sessions`: multi-turn conversations whose starts follow `arrival`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionsSpec {
    /// Number of sessions to start (≥ 1). Optional when `duration_s` or `arrival.stages`
    /// bounds the starts; with both, whichever comes first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Turns per session (≥ 1): a number or a distribution. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<Len>,
    /// Tokens of each turn's new question: a number or a distribution. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<Len>,
    /// Tokens of each answer: a number or a distribution. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Len>,
    /// The user's think time in seconds between an answer and the next question: a number
    /// or a distribution (`{kind = "exponential", mean = 5}`). Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_s: Option<SecondsSpec>,
}

#[derive(Debug, Clone)]
pub(super) struct SessionGen {
    pub(super) arrival: ArrivalModel,
    pub(super) stop: Stop,
    count: Option<u64>,
    turns: LengthModel,
    question: LengthModel,
    output: LengthModel,
    think: Option<SecondsModel>,
    pub(super) priority: i32,
}

impl SessionsSpec {
    /// Validate; `stop` is the workload's `duration_s` / stages bound, if any.
    pub(super) fn resolve(&self, arrival: ArrivalModel, stop: Option<Stop>, priority: i32) -> Result<SessionGen> {
        let stop = match (self.count, stop) {
            (Some(n), bound) => {
                check::in_range("sessions.count", n, 1, MAX_REQUESTS)?;
                bound.unwrap_or(Stop::Count(n))
            }
            (None, Some(bound)) => bound,
            (None, None) => {
                return Err(SimError::config(
                    "sessions.count",
                    "required (or bound the session starts with duration_s or arrival.stages)",
                ))
            }
        };
        let len = |name: &str, v: &Option<Len>| -> Result<LengthModel> {
            v.as_ref()
                .ok_or_else(|| SimError::config(format!("sessions.{name}"), "required"))?
                .resolve(&format!("sessions.{name}"))
        };
        Ok(SessionGen {
            arrival,
            stop,
            count: self.count,
            turns: len("turns", &self.turns)?,
            question: len("question", &self.question)?,
            output: len("output", &self.output)?,
            think: self.think_s.as_ref().map(|t| t.resolve("sessions.think_s")).transpose()?,
            priority,
        })
    }
}

impl SessionGen {
    pub(super) fn generate(&self, seed: u64, max_model_len: u32) -> Result<Workload> {
        let mut arrivals = SimRng::stream(seed, STREAM_ARRIVALS);
        let mut turns_rng = SimRng::stream(seed, STREAM_TURNS);
        let mut questions = SimRng::stream(seed, STREAM_QUESTION);
        let mut answers = SimRng::stream(seed, STREAM_ANSWER);
        let mut thinks = SimRng::stream(seed, STREAM_THINK);
        let mut requests: Vec<RequestSpec> = Vec::new();
        let mut segments: Vec<Segment> = Vec::new();
        let mut sessions = 0u64;
        self.arrival.for_each(&mut arrivals, self.stop, |t_s, _| {
            if self.count.is_some_and(|n| sessions >= n) {
                return Ok(false);
            }
            let start_ns = seconds_to_ns(t_s);
            let start = segments.len() as u32;
            let turns = self.turns.sample(&mut turns_rng);
            let mut context = 0u64;
            let mut prev: Option<u32> = None;
            for k in 0..turns {
                if requests.len() as u64 >= MAX_REQUESTS {
                    return Err(SimError::config("sessions", format!("the sessions have more than {MAX_REQUESTS} turns in all")));
                }
                let id = requests.len() as u32;
                let q = self.question.sample(&mut questions);
                let o = self.output.sample(&mut answers);
                let think_ns = match (&self.think, prev) {
                    (Some(m), Some(_)) => seconds_to_ns(m.sample(&mut thinks)),
                    _ => 0,
                };
                segments.push(Segment { key: key(Ns::GeneratedTurn, sessions, u64::from(k)), len: q });
                let prompt = context + u64::from(q);
                let mut r = RequestSpec::new(id, start_ns, u32::try_from(prompt).unwrap_or(u32::MAX), o, self.priority);
                r.segs = (start, segments.len() as u32 - start);
                r.after = prev.map(|parent| After { parent, think_ns });
                requests.push(r);
                if prompt + u64::from(o) > u64::from(max_model_len) {
                    break;
                }
                segments.push(Segment { key: output_key(id), len: o });
                context = prompt + u64::from(o);
                prev = Some(id);
            }
            sessions += 1;
            Ok(true)
        })?;
        requests.sort_by_key(|r| (r.arrival_ns, r.id));
        Ok(Workload { requests, segments })
    }
}
