//! Request state as the engine and the policies see it.

/// Lifecycle of a request, in order. `Preempted` requests are back in `Waiting` (recompute);
/// the count is kept in [`Req::preemptions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Not arrived yet.
    Pending,
    /// In the router's dispatch queue, no replica has room.
    Dispatching,
    /// In a replica's waiting queue.
    Waiting,
    /// Admitted: holds KV and is scheduled every step until it finishes or is preempted.
    Running,
    Finished,
    Rejected,
    /// `disagg`: prefilled, its KV cache on the way to a decode replica. (Last, so the
    /// model checker's status codes 0–5 stay as they were; the checker never sees it.)
    Transferring,
}

impl Status {
    /// Finished or rejected: a terminal state, entered once.
    #[inline]
    pub fn is_done(self) -> bool {
        matches!(self, Status::Finished | Status::Rejected)
    }
}

/// Why a request was rejected (index into `REASON_NAMES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Reason {
    None = 0,
    TooLong = 1,
    KvTooSmall = 2,
    DispatchQueueFull = 3,
    /// The client gave up: not finished `workload.timeout_s` after its arrival.
    Timeout = 4,
    /// A session's earlier turn was rejected or timed out, so this turn was never sent.
    SessionAborted = 5,
    /// o1pro's admission control: the prompt's template nests deeper than 8 (seed §4.4).
    TemplateDepth = 6,
}

/// Sentinel for "no time yet".
pub const NO_TIME: u64 = u64::MAX;

/// Longest simulated time a run may reach: 10⁹ s (about 31.7 years). Beyond it a rate,
/// latency or cost in the scenario is out of any realistic range, and the run stops with an
/// error instead of letting nanosecond sums approach `u64::MAX`.
pub const MAX_TIME_NS: u64 = 1_000_000_000_000_000_000;

/// One request. Indexed by id in the engine's arena. Fields touched every step fill the
/// first cache line and the struct is cache-line aligned, so a step reads one line per
/// scheduled request; the rest fill the second line exactly (128 bytes: a field that does
/// not fit would add a third line to every request, 64 MB at 1M requests — the assertion
/// below the struct holds the size).
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub struct Req {
    // --- hot: read or written every step (64 bytes) ---
    /// Tokens whose KV has been computed.
    pub computed: u32,
    /// Output tokens produced so far.
    pub generated: u32,
    pub prompt: u32,
    /// Output tokens to generate (the request's `max_tokens`; it always generates all).
    pub output: u32,
    /// Length to (re)compute at admission: prompt + tokens generated before admission.
    /// Tokens scheduled below it are prefill, the rest decode.
    pub prefill_target: u32,
    /// Per-request block size (o1pro); the pool's block size otherwise.
    pub req_block: u32,
    /// KV units held (ids into the replica's pool).
    pub blocks: Vec<u32>,
    pub status: Status,
    /// Prefix caching: the length (in tokens computed) from which a step has shared blocks of
    /// this request to cache ([`crate::kv::prefix::Apc::cache_shared`]), so that the
    /// scheduler's hot loop asks the cache only then; `u32::MAX`: none are left; 0: unknown
    /// (ask).
    pub apc_gate: u32,
    pub first_sched_ns: u64,
    // --- cold (64 bytes) ---
    pub id: u32,
    /// Lower is more urgent (vLLM's convention).
    pub priority: i32,
    pub arrival_ns: u64,
    /// Replica it was dispatched to, or -1.
    pub replica: i32,
    pub preemptions: u32,
    pub first_token_ns: u64,
    pub finish_ns: u64,
    /// Position key in the waiting queue: (priority, order).
    pub order: i64,
    /// When it last entered the router's dispatch queue: its arrival, or the moment a
    /// stopped replica's request found no live replica to move to. The dispatch timeout
    /// counts from here.
    pub queued_ns: u64,
    pub reason: Reason,
    /// Prefix caching: the request freed cached blocks of its own without finishing
    /// (preempted, handed off), so a later admission looks them up.
    pub apc_private: bool,
    /// An attacker of `workload.adversarial` (the metrics' `adversarial` class).
    pub adversarial: bool,
    /// Multi-LoRA: it was passed over at least once because its adapter had no slot.
    pub lora_waited: bool,
    /// Nesting depth of the prompt's template (0 = none).
    pub template_depth: u16,
    /// The LoRA adapter it is served through, index + 1; 0 = the base model
    /// (`workload.lora`).
    pub lora: u16,
}

const _: () = assert!(std::mem::size_of::<Req>() == 128, "a request is two cache lines");

/// What the serving front end adds to one request's times ([`crate::frontend`]), kept
/// beside [`Req`] (whose two cache lines hold what the engine touches): the client sent it
/// `ingest_ns` before it reached the engine (`Req::arrival_ns`), and its first and last
/// tokens reached the client `out_first_ns` / `out_last_ns` after the engine produced them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Client {
    pub ingest_ns: u32,
    pub out_first_ns: u32,
    pub out_last_ns: u32,
}

impl Req {
    /// Prompt plus generated tokens: what a recompute must rebuild.
    #[inline]
    pub fn num_tokens(&self) -> u32 {
        self.prompt + self.generated
    }

    /// Is the request still below its (re)prefill target?
    #[inline]
    pub fn in_prefill(&self) -> bool {
        self.computed < self.prefill_target
    }
}
