//! What generation hands the engine: each request ([`RequestSpec`]), the token segments
//! prompts share ([`Segment`]) and a session turn's dependency ([`After`]), gathered in a
//! [`Workload`]; and the most requests one workload may hold.

/// The most requests one workload may contain (generated or explicit). Why: every request
/// is materialized up front (24 bytes each, plus per-request engine state), so this bounds
/// memory at about a gigabyte and rejects typos such as a rate in req/ms.
pub const MAX_REQUESTS: u64 = 50_000_000;

/// One request as the engine sees it, after generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestSpec {
    /// Stable identifier: the position in an explicit list, or the generation order (0-based).
    pub id: u32,
    /// Arrival time in nanoseconds since the start of the simulation (integer so that event
    /// ordering is exact and platform independent).
    pub arrival_ns: u64,
    /// Prompt (input) length in tokens, ≥ 1.
    pub prompt_tokens: u32,
    /// Number of tokens to generate (output length), ≥ 1.
    pub output_tokens: u32,
    /// Scheduling priority: lower is more urgent, 0 by default (as vLLM's priority
    /// scheduling).
    pub priority: i32,
    /// What the prompt is made of, for prefix caching: `segments[segs.0 .. segs.0 + segs.1]`
    /// of the [`Workload`], covering the prompt's first tokens in order. Tokens they do not
    /// cover (all of them for `(0, 0)`) are unique to this request.
    pub segs: (u32, u32),
    /// Closed loop (a session's later turn): the request is sent `think_ns` after request
    /// `parent` finishes, and not before `arrival_ns` (a trace's recorded send time, the
    /// scheduled slot of inference-perf's multi-turn chat, or the session's start, which
    /// any parent finish follows).
    pub after: Option<After>,
    /// Nesting depth of the prompt's template (0 = none; seed §4.4: o1pro rejects > 8).
    pub template_depth: u16,
    /// An attacker of `workload.adversarial` (the `adversarial` class of the metrics).
    pub adversarial: bool,
    /// The LoRA adapter it is served through, index + 1 (0: the base model; `workload.lora`).
    pub lora: u16,
}

impl RequestSpec {
    /// A request with unique tokens and no dependency.
    pub fn new(id: u32, arrival_ns: u64, prompt_tokens: u32, output_tokens: u32, priority: i32) -> Self {
        RequestSpec {
            id,
            arrival_ns,
            prompt_tokens,
            output_tokens,
            priority,
            segs: (0, 0),
            after: None,
            template_depth: 0,
            adversarial: false,
            lora: 0,
        }
    }
}

/// A closed-loop dependency: sent `think_ns` after request `parent` finishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct After {
    pub parent: u32,
    pub think_ns: u64,
}

/// A run of `len` tokens of the token stream `key`, from the stream's start. Token identity
/// for prefix caching: two prompts hold the same token at position p exactly when the
/// segments covering p have the same key and p falls at the same offset into them. Keys are
/// opaque; keys with [`OUTPUT_KEY_BIT`] set are requests' outputs ([`output_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub key: u64,
    pub len: u32,
}

/// Set in the key of every output stream; workload keys never have it.
pub const OUTPUT_KEY_BIT: u64 = 1 << 63;

/// The key of the tokens request `id` generates (a session's next turn repeats them).
pub const fn output_key(id: u32) -> u64 {
    OUTPUT_KEY_BIT | id as u64
}

/// Every request of a run plus the segment arena their `segs` index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workload {
    /// Sorted by `(arrival_ns, id)`.
    pub requests: Vec<RequestSpec>,
    pub segments: Vec<Segment>,
}
