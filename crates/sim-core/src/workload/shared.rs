//! `workload.shared_prefix`: inference-perf's `shared_prefix` data generator, as a
//! workload (kubernetes-sigs/inference-perf, `datagen/synthetic/shared_prefix_datagen.py`
//! and `apis/user_session.py`, read at commit 7de5ef2).
//!
//! What it matches:
//! * `groups` system prompts, one length drawn per group (`prefix_tokens`); each group has
//!   `users_per_group` prompts = the group's system prompt then the user's own question
//!   (`question` tokens), with an output length per prompt (`output`).
//! * The `groups × users_per_group` prompts are shuffled once (seeded); the n-th request of
//!   a load stage sends prompt n mod N of that order, the index starting again at every
//!   stage (inference-perf restarts its data generator per stage). A prompt sent again is
//!   the same text, so it shares every token with its earlier sending.
//! * `multi_turn = true` (inference-perf's `enable_multi_turn_chat`): each prompt is one
//!   user's chat. The user's context starts as the system prompt; each request sends the
//!   context, then the user's prompt again (system prompt and question); after the answer
//!   the context becomes that whole prompt plus the answer. A user's next request waits
//!   for the previous one to finish (inference-perf's per-session lock): it is sent at the
//!   later of its scheduled time and that finish ([`After`] with no think time). A request
//!   the server rejects (prompt + output > `max_model_len`) leaves the context as it was,
//!   as inference-perf's failure path does, so the next one is the same prompt again: it
//!   is rejected too, at its scheduled time (the rejection is immediate, so nothing waits
//!   for it: those requests carry no [`After`]).
//!
//! Lengths and the shuffle come from o1sim's seeded generator, not numpy's, so the
//! prompts match inference-perf's in distribution, not draw for draw. Tokenization at the
//! join of system prompt and question (inference-perf decodes and re-tokenizes the text) is
//! not modelled: the lengths add exactly.

use serde::{Deserialize, Serialize};

use super::arrival::{ArrivalModel, Stop};
use super::dist::Len;
use super::keys::{key, Ns};
use super::sample::{seconds_to_ns, LengthModel, STREAM_ARRIVALS};
use super::{output_key, After, RequestSpec, Segment, Workload};
use crate::error::{Result, SimError};
use crate::rng::SimRng;

/// RNG streams of the generator (arrivals use the workload's arrival stream).
const STREAM_LENGTHS: u64 = 4;
const STREAM_SHUFFLE: u64 = 5;

/// `workload.shared_prefix`: groups of prompts sharing a system prompt (inference-perf's
/// `shared_prefix` data). Needs `arrival` and one of `num_requests`, `duration_s` or
/// `arrival.stages`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedPrefixSpec {
    /// Number of system prompts (inference-perf `num_groups` / `num_unique_system_prompts`),
    /// ≥ 1. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<u32>,
    /// Length of each group's system prompt in tokens (`system_prompt_len`): a number or a
    /// distribution, drawn once per group. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_tokens: Option<Len>,
    /// Prompts (users) per group (`num_prompts_per_group` / `num_users_per_system_prompt`),
    /// ≥ 1. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users_per_group: Option<u32>,
    /// Question length in tokens (`question_len`), drawn per prompt. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<Len>,
    /// Output length in tokens (`output_len`, the server generating exactly that many, as
    /// with `ignore_eos`), drawn per prompt. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Len>,
    /// Each prompt is one user's chat whose context grows turn by turn
    /// (`enable_multi_turn_chat`). Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_turn: Option<bool>,
}

/// The validated generator.
#[derive(Debug, Clone)]
pub(super) struct SharedGen {
    pub(super) arrival: ArrivalModel,
    pub(super) stop: Stop,
    groups: u32,
    users: u32,
    prefix: LengthModel,
    question: LengthModel,
    output: LengthModel,
    multi_turn: bool,
    pub(super) priority: i32,
}

/// The most prompts (`groups × users_per_group`) one generator holds.
const MAX_PROMPTS: u64 = 10_000_000;

impl SharedPrefixSpec {
    /// Validate (paths relative to the workload section).
    pub(super) fn resolve(&self, arrival: ArrivalModel, stop: Stop, priority: i32) -> Result<SharedGen> {
        let need = |name: &str| SimError::config(format!("shared_prefix.{name}"), "required");
        let groups = self.groups.ok_or_else(|| need("groups"))?;
        let users = self.users_per_group.ok_or_else(|| need("users_per_group"))?;
        for (name, v) in [("groups", groups), ("users_per_group", users)] {
            if v == 0 {
                return Err(SimError::config(format!("shared_prefix.{name}"), "must be >= 1 (got 0)"));
            }
        }
        if u64::from(groups) * u64::from(users) > MAX_PROMPTS {
            return Err(SimError::config(
                "shared_prefix.users_per_group",
                format!("groups × users_per_group = {} prompts, more than the limit of {MAX_PROMPTS}", u64::from(groups) * u64::from(users)),
            ));
        }
        let len = |name: &str, v: &Option<Len>| -> Result<LengthModel> {
            v.as_ref().ok_or_else(|| need(name))?.resolve(&format!("shared_prefix.{name}"))
        };
        Ok(SharedGen {
            arrival,
            stop,
            groups,
            users,
            prefix: len("prefix_tokens", &self.prefix_tokens)?,
            question: len("question", &self.question)?,
            output: len("output", &self.output)?,
            multi_turn: self.multi_turn.unwrap_or(false),
            priority,
        })
    }
}

/// One of the N prompts.
#[derive(Debug, Clone, Copy)]
struct Prompt {
    group: u32,
    user: u32,
    prefix: u32,
    question: u32,
    output: u32,
}

impl SharedGen {
    /// The N prompts in inference-perf's draw order (group lengths, then per group the
    /// questions and the outputs), then shuffled.
    fn prompts(&self, seed: u64) -> Vec<Prompt> {
        let mut rng = SimRng::stream(seed, STREAM_LENGTHS);
        let prefixes: Vec<u32> = (0..self.groups).map(|_| self.prefix.sample(&mut rng)).collect();
        let mut out = Vec::with_capacity((self.groups * self.users) as usize);
        for (g, &prefix) in prefixes.iter().enumerate() {
            let questions: Vec<u32> = (0..self.users).map(|_| self.question.sample(&mut rng)).collect();
            let outputs: Vec<u32> = (0..self.users).map(|_| self.output.sample(&mut rng)).collect();
            for u in 0..self.users as usize {
                out.push(Prompt { group: g as u32, user: u as u32, prefix, question: questions[u], output: outputs[u] });
            }
        }
        let mut shuffle = SimRng::stream(seed, STREAM_SHUFFLE);
        for i in (1..out.len()).rev() {
            let j = shuffle.range_u32(0, i as u32) as usize;
            out.swap(i, j);
        }
        out
    }

    /// Generate the workload. `max_model_len` decides which multi-turn requests the server
    /// rejects (their answer never joins the context).
    pub(super) fn generate(&self, seed: u64, max_model_len: u32, cap: u64) -> Result<Workload> {
        let prompts = self.prompts(seed);
        let n_prompts = prompts.len() as u64;
        let mut arrivals = SimRng::stream(seed, STREAM_ARRIVALS);
        // (arrival_ns, prompt index) per request, in arrival order = id order.
        let mut sent: Vec<(u64, u32)> = Vec::with_capacity(self.arrival.expected(self.stop) as usize);
        let (mut stage, mut local) = (0u32, 0u64);
        self.arrival.for_each(&mut arrivals, self.stop, |t_s, k| {
            if k != stage {
                (stage, local) = (k, 0);
            }
            if sent.len() as u64 >= cap {
                return Err(super::sample::too_many("arrival", cap));
            }
            sent.push((seconds_to_ns(t_s), (local % n_prompts) as u32));
            local += 1;
            Ok(true)
        })?;
        let system = |p: &Prompt| Segment { key: key(Ns::SharedSystem, u64::from(p.group), 0), len: p.prefix };
        let question =
            |p: &Prompt| Segment { key: key(Ns::SharedQuestion, u64::from(p.group), u64::from(p.user)), len: p.question };
        let mut segments = Vec::new();
        let mut requests: Vec<RequestSpec> = sent
            .iter()
            .enumerate()
            .map(|(id, &(t, i))| {
                let p = &prompts[i as usize];
                RequestSpec::new(id as u32, t, p.prefix + p.question, p.output, self.priority)
            })
            .collect();
        if !self.multi_turn {
            // Each prompt's two segments once; every sending of it points there.
            for p in &prompts {
                segments.push(system(p));
                segments.push(question(p));
            }
            for (r, &(_, i)) in requests.iter_mut().zip(&sent) {
                r.segs = (2 * i, 2);
            }
            return Ok(Workload { requests, segments });
        }
        // Multi-turn: each user's requests in order, laid out as
        // [system] (system question output)* so every prompt is one contiguous range.
        let mut by_user: Vec<Vec<u32>> = vec![Vec::new(); prompts.len()];
        for (id, &(_, i)) in sent.iter().enumerate() {
            by_user[i as usize].push(id as u32);
        }
        for (i, ids) in by_user.iter().enumerate() {
            let p = &prompts[i];
            let start = segments.len() as u32;
            segments.push(system(p));
            let mut context_tokens = u64::from(p.prefix);
            let mut pending: Option<(u32, u64)> = None; // a rejected turn's (segs len, tokens)
            let mut prev: Option<u32> = None;
            for &id in ids {
                let (len, prompt_tokens) = match pending {
                    Some(same) => same,
                    None => {
                        segments.push(system(p));
                        segments.push(question(p));
                        (segments.len() as u32 - start, context_tokens + u64::from(p.prefix + p.question))
                    }
                };
                let r = &mut requests[id as usize];
                r.prompt_tokens = u32::try_from(prompt_tokens).unwrap_or(u32::MAX);
                r.segs = (start, len);
                if pending.is_none() {
                    r.after = prev.map(|parent| After { parent, think_ns: 0 });
                }
                prev = Some(id);
                if prompt_tokens + u64::from(p.output) > u64::from(max_model_len) {
                    pending = Some((len, prompt_tokens));
                } else {
                    segments.push(Segment { key: output_key(id), len: p.output });
                    context_tokens = prompt_tokens + u64::from(p.output);
                    pending = None;
                }
            }
        }
        Ok(Workload { requests, segments })
    }
}
