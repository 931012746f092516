//! Scheduling policies. Each step a policy turns the replica's queues into a plan
//! `request → tokens this step` (vLLM v1's idea: no separate prefill/decode phases) plus the
//! requests it preempted. The policies are compositions of a few small shared functions:
//! [`schedule_running`] (grow running requests, preempting on allocation failure) and
//! [`admit_waiting`] (admit from the waiting queue while budget, seats and KV allow).
//!
//! `vllm` follows vLLM v1's `Scheduler.schedule()` (`vllm/v1/core/sched/scheduler.py`),
//! behaviour by behaviour:
//! 1. one token budget per step, `max_num_batched_tokens`;
//! 2. running requests first, in admission order: a decode takes 1 token, an unfinished
//!    prefill takes `min(remaining, budget)` (chunked prefill);
//! 3. when a running request cannot get blocks, the *last* entry of `running` (the most
//!    recently admitted) is preempted — possibly the request itself, which ends the running
//!    pass; blocks freed, progress reset (recompute), pushed to the *head* of waiting;
//! 4. no admissions in a step that preempted;
//! 5. waiting requests in strict FCFS: if the head cannot be admitted nobody behind it is;
//!    admission stops at `max_num_seqs` running or an exhausted budget;
//! 6. a waiting request is admitted only if the free blocks cover its whole current length
//!    (prompt + tokens already generated; vLLM's `allocate_slots(..., full_sequence_must_fit)`
//!    check); blocks are then allocated for the chunk only;
//! 7. a chunk is `min(remaining prompt, remaining budget)`;
//! 8. the step completing the prompt produces the first token (engine side);
//! 9. arrivals join at step boundaries; an idle engine starts at the next arrival (engine).
//!
//! With prefix caching on ([`crate::kv::prefix`], vLLM's `enable_prefix_caching`):
//! 10. a waiting request with nothing computed (new, or preempted) first looks up its
//!     longest chain of cached full blocks (`get_computed_blocks`, at most `num_tokens − 1`
//!     tokens); the hit tokens count as computed, are not scheduled and take no budget;
//! 11. rule 6 then counts only the blocks still to allocate, plus the hit blocks that are
//!     free (they leave the free queue; `get_num_blocks_to_allocate`);
//! 12. every full block a step will fill is cached when it is allocated (`cache_blocks` in
//!     `allocate_slots`), so a request admitted later in the same step can hit it; blocks a
//!     request frees stay cached until reused, least recently freed first (a freed block
//!     holding no hash, a partly filled or unscheduled tail, is reused before them).
//! 13. the hit is recorded at admission (`record_prefix_cache_stats`; lookups of requests
//!     that then wait are not counted), in vLLM's two classes: first admissions (the
//!     `prefix_cache_queries/hits` counters) and re-admissions after a preemption.
//!
//! `scheduling_policy = "priority"` (vLLM's `--scheduling-policy priority`,
//! `request_queue.py`'s `PriorityRequestQueue`): the waiting queue is ordered by
//! `(priority, arrival time, request id)` — a preempted request goes back to its place in
//! that order, not to the head — and the preemption victim is
//! `max(running, key=(priority, arrival time))`, the first such in `running` on a tie,
//! which may be a request already scheduled in this step (its tokens go back to the
//! budget); a request that preempted itself does not end the running loop (vLLM 0.33:
//! the requests after it outrank it and may fit in the blocks it freed).
//!
//! `trtllm` (TensorRT-LLM's batch manager: a capacity scheduler, then the micro-batch
//! scheduler) is its own pass, with its rules written beside it in [`trtllm`].

pub mod trtllm;

use crate::kv::{KvMode, KvPool};
use crate::perf::PrefillItem;
use crate::policy::Policy;
use crate::kv::offload::TierHit;
use crate::kv::prefix::{Apc, Hit};
use crate::request::{Req, Status, NO_TIME};

/// Aggregates of the plan that the execution-time model needs, accumulated while the
/// plan is built (one pass over the batch instead of two).
#[derive(Debug, Clone, Copy, Default)]
pub struct PlanShape {
    pub tokens: u64,
    pub prefill_tokens: u64,
    pub decode_seqs: u64,
    /// Σ KV length after the step over decode entries.
    pub decode_ctx: u64,
    /// Σ KV length after the step over all entries.
    pub ctx_after: u64,
    /// Entries that produce a token (decodes, prefills completing their target).
    pub sampled: u64,
    /// Σ over decode entries of (KV length after the step − 1) · 1024 / the request's block
    /// size ([`crate::perf::BatchShape::decode_blocks_1024`]).
    pub decode_blocks_1024: u64,
    /// Σ over decode entries of 1024 / the request's block size: what a steady step (every
    /// context one token longer) adds to `decode_blocks_1024`.
    pub decode_block_step_1024: u64,
    /// Speculative decoding: Σ over decode entries of the draft tokens verified (`n − 1`).
    pub spec_tokens: u64,
    /// Multi-LoRA: distinct adapters of the plan's requests ([`SchedState::count_loras`]).
    pub lora_adapters: u64,
}

/// Which victim a policy preempts when a running request cannot grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Victim {
    /// Never preempt (orca reserves everything up front).
    Never,
    /// The last entry of `running` (vLLM FCFS).
    LastAdmitted,
    /// The least urgent running request (highest priority value), latest admitted among
    /// equals (o1pro).
    LowestPriority,
    /// vLLM's priority policy: the running request with the largest `(priority, arrival
    /// time)`, the first in `running` among equals (Python's `max`).
    PriorityArrival,
}

/// A bug class injected into the real scheduler code for the model checker's mutation
/// proof (`scheduler.inject_bug`). Each is one branch on a cold path (preemption, admission,
/// victim choice), so the correct code pays nothing measurable for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Bug {
    /// The correct code.
    #[default]
    None,
    /// Preemption forgets the victim's block table instead of returning it to the pool.
    LeakOnPreempt,
    /// Admission leaves the request in the waiting queue, so it is admitted again.
    DoubleAdmit,
    /// No victim is ever chosen: a request that cannot grow blocks everyone.
    NoPreempt,
    /// A preempted request is not put back in the waiting queue.
    DropOnRequeue,
    /// Priority preemption only when the KV cache is full: with every seat of the batch
    /// taken (`max_num_seqs`), an urgent request waits like any other.
    NoSeatPreempt,
}

impl Bug {
    /// The switch named by `scheduler.inject_bug` (validated against
    /// [`crate::config::BUGS`]; an unknown name means no bug).
    pub fn from_name(name: Option<&str>) -> Bug {
        match name {
            Some("leak_on_preempt") => Bug::LeakOnPreempt,
            Some("double_admit") => Bug::DoubleAdmit,
            Some("no_preempt") => Bug::NoPreempt,
            Some("drop_on_requeue") => Bug::DropOnRequeue,
            Some("no_seat_preempt") => Bug::NoSeatPreempt,
            _ => Bug::None,
        }
    }
}

/// The resolved knobs of one policy.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    pub max_num_seqs: u32,
    /// Token budget of a step.
    pub budget: u32,
    /// Most tokens of one request in a step (o1pro flow control); u32::MAX otherwise.
    pub per_request_cap: u32,
    /// Schedule running decodes before running prefills (stall-free batching).
    pub decodes_first: bool,
    /// Prompts may be split over steps.
    pub chunked: bool,
    pub victim: Victim,
    /// A more urgent waiting request may preempt less urgent running ones (o1pro), when
    /// the KV cache cannot hold it or when the batch is full (`max_num_seqs`).
    pub priority_preemption: bool,
    /// Waiting order honours priority (else strict FCFS).
    pub priority_order: bool,
    /// vLLM's priority scheduling: the waiting queue by `(priority, arrival, id)`.
    pub vllm_priority: bool,
    /// Prefix caching is on ([`crate::kv::prefix`]).
    pub apc: bool,
    /// Injected bug (model checking); [`Bug::None`] in every normal run.
    pub bug: Bug,
    /// Speculative decoding (`[scheduler.speculative]`): draft tokens a decode verifies with
    /// its next token (`num_tokens`, k; 0 = off). vLLM schedules `1 + k` tokens for a
    /// running request with drafts; they count against the token budget.
    pub spec_k: u32,
    /// KV slots allocated past a decode's scheduled tokens for the drafter's next proposals
    /// (vLLM's `num_lookahead_tokens`: k for EAGLE and MTP, whose heads write KV; 0 for
    /// n-gram and draft models).
    pub lookahead: u32,
    /// Multi-LoRA: most distinct adapters in one step (vLLM's `max_loras`); 0 = no LoRA.
    pub max_loras: u32,
    /// `trtllm`: TensorRT-LLM's capacity scheduler ([`trtllm`]; `max_num_seqs` is then its
    /// `max_batch_size`, `budget` its `max_num_tokens`); `None` for the other policies.
    pub trtllm: Option<crate::config::CapacityPolicy>,
}

impl Params {
    /// The knobs of a named policy from the scheduler section.
    pub fn for_policy(cfg: &crate::config::SchedulerConfig) -> (Params, KvMode) {
        let base = Params {
            max_num_seqs: cfg.max_num_seqs,
            budget: cfg.max_num_batched_tokens,
            per_request_cap: u32::MAX,
            decodes_first: false,
            chunked: true,
            victim: Victim::LastAdmitted,
            priority_preemption: false,
            priority_order: false,
            vllm_priority: cfg.priority_scheduling(),
            apc: cfg.prefix_caching(),
            bug: Bug::from_name(cfg.inject_bug.as_deref()),
            spec_k: cfg.speculative.as_ref().map_or(0, |sp| sp.num_tokens()),
            lookahead: cfg.speculative.as_ref().map_or(0, |sp| if sp.method.writes_kv() { sp.num_tokens() } else { 0 }),
            max_loras: 0,
            trtllm: None,
        };
        let base = if base.vllm_priority { Params { victim: Victim::PriorityArrival, ..base } } else { base };
        match cfg.policy {
            Policy::Orca => (Params { chunked: false, victim: Victim::Never, decodes_first: true, ..base }, KvMode::Contiguous),
            Policy::Sarathi => (Params { budget: cfg.chunk_size, decodes_first: true, ..base }, KvMode::Paged),
            Policy::O1pro => (
                Params {
                    per_request_cap: cfg.max_tokens_per_request,
                    decodes_first: true,
                    victim: Victim::LowestPriority,
                    priority_preemption: true,
                    priority_order: true,
                    ..base
                },
                KvMode::PagedPerRequest,
            ),
            Policy::Trtllm => (
                Params {
                    max_num_seqs: cfg.max_batch_size.unwrap_or(crate::config::TRTLLM_DEFAULT_MAX_BATCH_SIZE),
                    budget: cfg.max_num_tokens.unwrap_or(crate::config::TRTLLM_DEFAULT_MAX_NUM_TOKENS),
                    chunked: false,
                    victim: Victim::Never,
                    trtllm: Some(cfg.capacity_scheduler_policy.unwrap_or_default()),
                    ..base
                },
                KvMode::Paged,
            ),
            Policy::Vllm | Policy::Disagg => (base, KvMode::Paged),
        }
    }
}

/// A replica's waiting queue, ordered by `(priority, order)`; FCFS policies use priority 0
/// for everyone. Arrivals get increasing orders; preempted requests decreasing negative
/// ones, so the latest preempted is at the head (vLLM's `prepend_request`).
#[derive(Debug, Clone, Default)]
pub struct WaitQueue {
    items: std::collections::VecDeque<((i32, i64), u32)>,
}

impl WaitQueue {
    pub fn len(&self) -> usize {
        self.items.len()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    pub fn peek(&self) -> Option<u32> {
        self.items.front().map(|x| x.1)
    }
    pub fn pop(&mut self) -> Option<u32> {
        self.items.pop_front().map(|x| x.1)
    }
    /// The `i`-th request in queue order.
    #[inline]
    pub fn nth(&self, i: usize) -> Option<u32> {
        self.items.get(i).map(|x| x.1)
    }
    /// Take the `i`-th request out of the queue (`pop` for 0).
    #[inline]
    pub fn remove_nth(&mut self, i: usize) -> Option<u32> {
        if i == 0 {
            self.pop()
        } else {
            self.items.remove(i).map(|x| x.1)
        }
    }
    /// Insert by key, ties by id; O(1) at either end (the common cases), binary search
    /// otherwise.
    pub fn insert(&mut self, key: (i32, i64), id: u32) {
        let e = (key, id);
        match self.items.back() {
            None => self.items.push_back(e),
            Some(&b) if b <= e => self.items.push_back(e),
            _ => {
                if self.items.front().is_some_and(|&f| e < f) {
                    self.items.push_front(e);
                } else {
                    let at = self.items.partition_point(|&x| x <= e);
                    self.items.insert(at, e);
                }
            }
        }
    }
    /// Take request `id` out of the queue (a client abort); `false` if it is not there.
    /// Searches from the head, where the oldest requests are.
    pub fn remove(&mut self, id: u32) -> bool {
        match self.items.iter().position(|x| x.1 == id) {
            Some(at) => {
                self.items.remove(at);
                true
            }
            None => false,
        }
    }
    /// Empty the queue (the model checker rebuilds states into one engine).
    pub fn clear(&mut self) {
        self.items.clear();
    }
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.items.iter().map(|x| x.1)
    }
}

/// The scheduler-side state of one replica.
#[derive(Debug, Clone)]
pub struct SchedState {
    pub waiting: WaitQueue,
    /// Admission order.
    pub running: Vec<u32>,
    pub kv: KvPool,
    /// Σ computed tokens of running requests (KV slots written).
    pub used_slots: u64,
    /// Counter for preempted requests' queue order (decreasing).
    pub front_counter: i64,
    /// This step's plan: (request, tokens) in schedule order.
    pub plan: Vec<(u32, u32)>,
    /// Requests preempted while building this step's plan.
    pub preempted: Vec<u32>,
    pub budget_left: u32,
    /// Aggregates of `plan` (valid when `shape_dirty` is false).
    pub shape: PlanShape,
    /// Prefill entries of `plan` for the attention model.
    pub prefill_items: Vec<PrefillItem>,
    /// A preemption removed an entry from `plan`: `shape` must be rebuilt.
    pub shape_dirty: bool,
    /// Prefix-cache lookups recorded while building this step (first admissions only,
    /// as vLLM's `prefix_cache_queries`/`hits`): tokens looked up and tokens hit.
    pub step_queries: u64,
    pub step_hits: u64,
    /// (request, tokens hit) of this step's admissions that hit the prefix cache.
    pub admitted_hits: Vec<(u32, u32)>,
    /// How this step's admission pass ended ([`Admission`]).
    pub admission: Admission,
    /// Multi-LoRA: the adapters of the requests scheduled in this step (scratch of the
    /// admission pass, vLLM's `scheduled_loras`).
    pub step_loras: Vec<u16>,
    /// Multi-LoRA: requests passed over at least once because their adapter could not join
    /// a step (`max_loras` other adapters scheduled), over the run.
    pub lora_waits: u64,
}

/// How a step's admission pass ended, for steady decode runs ([`crate::engine::steady`]): whether the
/// same pass, run again while the batch only decodes, would end the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Admission {
    /// Anything else: requests admitted, a priority policy, a preemption this step.
    #[default]
    Other,
    /// The waiting queue is empty.
    Empty,
    /// Requests wait but the seats or the token budget ran out first (FCFS policy): both
    /// stay as they are while the batch only decodes.
    Stopped,
    /// The head of the waiting queue did not fit the free KV (FCFS policy; one refusal
    /// counted). Free KV only shrinks while the batch only decodes, so it keeps not fitting.
    Refused,
}

impl SchedState {
    pub fn new(kv: KvPool) -> Self {
        SchedState {
            waiting: WaitQueue::default(),
            running: Vec::new(),
            kv,
            used_slots: 0,
            front_counter: 0,
            plan: Vec::new(),
            preempted: Vec::new(),
            budget_left: 0,
            shape: PlanShape::default(),
            prefill_items: Vec::new(),
            shape_dirty: false,
            step_queries: 0,
            step_hits: 0,
            admitted_hits: Vec::new(),
            admission: Admission::Other,
            step_loras: Vec::new(),
            lora_waits: 0,
        }
    }

    /// Multi-LoRA: the distinct adapters of the plan's requests into `shape.lora_adapters`
    /// (what the step's LoRA kernels read), leaving them in `step_loras`.
    pub fn count_loras(&mut self, reqs: &[Req]) {
        self.step_loras.clear();
        for &(id, _) in &self.plan {
            let a = reqs[id as usize].lora;
            if a > 0 && !self.step_loras.contains(&a) {
                self.step_loras.push(a);
            }
        }
        self.shape.lora_adapters = self.step_loras.len() as u64;
    }

    /// A request's key in the waiting queue (ties broken by id).
    pub fn waiting_key(p: &Params, r: &Req) -> (i32, i64) {
        if p.vllm_priority {
            (r.priority, r.arrival_ns as i64)
        } else {
            (if p.priority_order { r.priority } else { 0 }, r.order)
        }
    }

    /// Queue a newly dispatched request at the back of its class.
    pub fn enqueue(&mut self, p: &Params, r: &mut Req, order: i64) {
        r.order = order;
        r.status = Status::Waiting;
        let key = Self::waiting_key(p, r);
        self.waiting.insert(key, r.id);
    }

    /// Append `(id, n)` to the plan and to its aggregates.
    fn push_plan(&mut self, r: &Req, n: u32) {
        self.plan.push((r.id, n));
        add_to_shape(&mut self.shape, &mut self.prefill_items, r, n);
    }

    /// Rebuild the aggregates from `plan` if a preemption removed an entry.
    pub fn settle_shape(&mut self, reqs: &[Req]) {
        self.settle_shape_from(0, reqs);
    }

    /// [`SchedState::settle_shape`] of the plan's entries from `from` on (the ones before are
    /// a lazy decode set the engine adds itself, [`SchedState::schedule_from`]).
    pub fn settle_shape_from(&mut self, from: usize, reqs: &[Req]) {
        if !self.shape_dirty {
            return;
        }
        self.shape = PlanShape::default();
        self.prefill_items.clear();
        for &(id, n) in &self.plan[from.min(self.plan.len())..] {
            add_to_shape(&mut self.shape, &mut self.prefill_items, &reqs[id as usize], n);
        }
        self.shape_dirty = false;
    }

    /// Build this step's plan at time `now_ns`. `reqs` is the engine's arena (by id),
    /// `apc` the prefix-cache side of the run.
    pub fn schedule(&mut self, p: &Params, reqs: &mut [Req], apc: &mut Apc, now_ns: u64) {
        self.schedule_from(0, p, reqs, apc, now_ns);
    }

    /// [`SchedState::schedule`] when the first `lazy` running requests are a steady decode
    /// set the engine schedules itself ([`crate::engine::steady`]): each decodes one token,
    /// its blocks already grown, and the plan's first `lazy` entries are theirs. The rest is
    /// the policy's pass over the running requests after them and the admissions, with the
    /// budget they leave; `shape` holds the rest's aggregates only. vLLM's loop would give
    /// the same: they are the first in `running`, so they take their tokens before anything
    /// else, and a preemption's victim (the last admitted, FCFS) is never one of them.
    pub fn schedule_from(&mut self, lazy: usize, p: &Params, reqs: &mut [Req], apc: &mut Apc, now_ns: u64) {
        if let Some(cap) = p.trtllm {
            debug_assert_eq!(lazy, 0, "no lazy decode set with TensorRT-LLM's scheduler");
            return self.schedule_trtllm(p, cap, reqs, apc, now_ns);
        }
        self.plan.truncate(lazy);
        self.preempted.clear();
        self.prefill_items.clear();
        self.shape = PlanShape::default();
        self.shape_dirty = false;
        self.budget_left = p.budget.saturating_sub(lazy as u32);
        self.step_queries = 0;
        self.step_hits = 0;
        self.admitted_hits.clear();
        if p.decodes_first {
            // A request that preempted itself ends vLLM's running loop: no prefill pass then.
            if schedule_running(self, p, reqs, apc, Pass::Decodes, lazy) {
                schedule_running(self, p, reqs, apc, Pass::Prefills, lazy);
            }
        } else {
            schedule_running(self, p, reqs, apc, Pass::All, lazy);
        }
        // vLLM: no admissions in a step that preempted.
        self.admission = Admission::Other;
        if self.preempted.is_empty() {
            admit_waiting(self, p, reqs, apc, now_ns);
        }
    }

    /// Preempt `victim` (recompute): free its KV (its full blocks stay cached), reset
    /// progress, undo its slot in the plan, put it back in the waiting queue (at the head of
    /// its class, or at its (priority, arrival) place under vLLM's priority scheduling).
    fn preempt(&mut self, p: &Params, reqs: &mut [Req], apc: &mut Apc, victim: u32) {
        if let Some(pos) = self.running.iter().position(|&x| x == victim) {
            self.running.remove(pos);
        }
        let mut scheduled = 0;
        if let Some(pos) = self.plan.iter().position(|&(x, _)| x == victim) {
            let (_, n) = self.plan.remove(pos);
            self.budget_left += n;
            self.shape_dirty = true;
            scheduled = n;
        }
        let r = &mut reqs[victim as usize];
        if p.bug == Bug::LeakOnPreempt {
            r.blocks.clear(); // mutant: the units never return to the free list
        } else {
            // Its blocks were cached up to what this step had scheduled for it.
            // (Drafts are never cached: at most the tokens it holds.)
            let alloc = (r.computed + scheduled).min(r.num_tokens());
            apc.release(&mut self.kv, r, Some(alloc));
        }
        self.used_slots -= r.computed as u64;
        r.computed = 0;
        r.preemptions += 1;
        r.status = Status::Waiting;
        self.front_counter -= 1;
        r.order = i64::MIN / 2 + self.front_counter;
        let key = Self::waiting_key(p, r);
        if p.bug != Bug::DropOnRequeue {
            self.waiting.insert(key, victim);
        }
        self.preempted.push(victim);
    }

    /// The running request to preempt under `p.victim`.
    fn pick_victim(&self, p: &Params, reqs: &[Req]) -> Option<u32> {
        if p.bug == Bug::NoPreempt {
            return None;
        }
        match p.victim {
            Victim::Never => None,
            Victim::LastAdmitted => self.running.last().copied(),
            Victim::LowestPriority => {
                // max by priority, latest admitted among equals (the last such in `running`).
                let mut best: Option<u32> = None;
                for &id in &self.running {
                    let pr = reqs[id as usize].priority;
                    if best.is_none_or(|b| pr >= reqs[b as usize].priority) {
                        best = Some(id);
                    }
                }
                best
            }
            Victim::PriorityArrival => {
                let key = |id: u32| (reqs[id as usize].priority, reqs[id as usize].arrival_ns);
                let mut best: Option<u32> = None;
                for &id in &self.running {
                    if best.is_none_or(|b| key(id) > key(b)) {
                        best = Some(id);
                    }
                }
                best
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    All,
    Decodes,
    Prefills,
}

/// Add one plan entry to the aggregates (the request as it is *before* the step).
#[inline]
fn add_to_shape(sh: &mut PlanShape, items: &mut Vec<PrefillItem>, r: &Req, n: u32) {
    let after = (r.computed + n) as u64;
    sh.tokens += n as u64;
    sh.ctx_after += after;
    if r.in_prefill() {
        sh.prefill_tokens += n as u64;
        items.push(PrefillItem { new_tokens: n, context_before: r.computed });
        sh.sampled += (r.computed + n >= r.num_tokens()) as u64;
    } else {
        sh.decode_seqs += 1;
        sh.decode_ctx += after;
        // A decode of 1 + k tokens verifies k drafts: every position is sampled.
        sh.sampled += n as u64;
        sh.spec_tokens += n as u64 - 1;
        // 1024 / block as a shift: block sizes are powers of two in 1..=1024.
        let per_block = 1024u64 >> r.req_block.trailing_zeros().min(10);
        sh.decode_blocks_1024 += (after - 1) * per_block;
        sh.decode_block_step_1024 += per_block;
    }
}

/// Tokens a request wants this step: the rest of its (re)prefill, or 1 decode token.
#[inline]
fn wanted(r: &Req) -> u32 {
    r.num_tokens() - r.computed
}

/// Speculative decoding: the drafts a decoding request verifies this step, `k` but never
/// past its last output token (vLLM proposes them and throws them away; o1sim does not
/// schedule them: at most k tokens of one step per request).
#[inline]
fn drafts(r: &Req, k: u32) -> u32 {
    k.min(r.output.saturating_sub(r.generated + 1))
}

/// Schedule running requests of the given pass in admission order. Returns `false` when
/// the pass ended because a request preempted itself (vLLM stops the running loop then).
fn schedule_running(st: &mut SchedState, p: &Params, reqs: &mut [Req], apc: &mut Apc, pass: Pass, from: usize) -> bool {
    match pass {
        Pass::All => schedule_running_in::<PASS_ALL>(st, p, reqs, apc, from),
        Pass::Decodes => schedule_running_in::<PASS_DECODES>(st, p, reqs, apc, from),
        Pass::Prefills => schedule_running_in::<PASS_PREFILLS>(st, p, reqs, apc, from),
    }
}

const PASS_ALL: u8 = 0;
const PASS_DECODES: u8 = 1;
const PASS_PREFILLS: u8 = 2;

/// [`schedule_running`] for one pass (a constant, so the common `All` pass has no filter).
fn schedule_running_in<const PASS: u8>(st: &mut SchedState, p: &Params, reqs: &mut [Req], apc: &mut Apc, from: usize) -> bool {
    // Hot loop: aggregates and budget live in locals and are written back before anything
    // that reads them from `st` (a preemption) and at the end.
    let mut sh = st.shape;
    let mut budget = st.budget_left;
    // The running requests before `from` are the engine's lazy decode set.
    let mut i = from;
    let cap = p.per_request_cap;
    // Shared blocks are cached as they are scheduled (only when some prompt shares tokens).
    let share = apc.shared;
    st.plan.reserve(st.running.len());
    loop {
        // Fast part: every request that grows without preempting. The fields are borrowed
        // apart so that the running list and the pool's block size stay in registers.
        let failed = {
            let SchedState { running, kv, plan, prefill_items, .. } = &mut *st;
            let running: &[u32] = running;
            let mut failed = false;
            while i < running.len() && budget > 0 {
                let id = running[i];
                let r = &mut reqs[id as usize];
                let prefill = r.in_prefill();
                if (PASS == PASS_DECODES && prefill) || (PASS == PASS_PREFILLS && !prefill) {
                    i += 1;
                    continue;
                }
                let mut n = wanted(r);
                // A decode with drafts verifies 1 + k tokens; a short budget trims the drafts.
                let spec = p.spec_k > 0 && !prefill;
                if spec {
                    n += drafts(r, p.spec_k);
                }
                let n = n.min(budget).min(cap);
                if n == 0 {
                    i += 1;
                    continue;
                }
                let (len, blk) = (r.computed + n, r.req_block);
                // EAGLE/MTP heads write their next proposals' KV: lookahead slots, within
                // the request's whole length.
                let slots = if spec { (len + p.lookahead).min((r.prompt + r.output).max(len)) } else { len };
                if !kv.grow(&mut r.blocks, slots, blk) {
                    failed = true;
                    break;
                }
                if share && len.min(r.num_tokens()) >= r.apc_gate {
                    // Drafts are not cached: only tokens the request holds (vLLM caches up to
                    // `request.num_tokens`).
                    apc.cache_shared(kv, r, len.min(r.num_tokens()));
                }
                plan.push((id, n));
                add_to_shape(&mut sh, prefill_items, r, n);
                budget -= n;
                i += 1;
            }
            failed
        };
        if !failed {
            break;
        }
        let id = st.running[i];
        // Allocation failed: preempt until it fits or the request itself goes.
        st.shape = sh;
        st.budget_left = budget;
        let Some(victim) = st.pick_victim(p, reqs) else {
            // Orca never preempts; its reservation makes this unreachable. Skip.
            i += 1;
            continue;
        };
        let vpos = st.running.iter().position(|&x| x == victim);
        st.preempt(p, reqs, apc, victim);
        sh = st.shape;
        budget = st.budget_left;
        if victim == id {
            if p.victim == Victim::PriorityArrival {
                // vLLM's priority policy (0.33): the lowest-priority request preempted itself;
                // those after it outrank it and may fit in what it freed, so the loop goes
                // on with the next (index `i` now points at it).
                continue;
            }
            return false;
        }
        if vpos.is_some_and(|vp| vp < i) {
            i -= 1;
        }
        // Retry the same request (index `i` now points at it again).
    }
    st.shape = sh;
    st.budget_left = budget;
    true
}

/// What an admission of `r` would hit in the prefix cache: a lookup for a request with
/// nothing computed when caching is on (rule 10), nothing otherwise.
#[inline]
fn lookup(st: &mut SchedState, p: &Params, apc: &mut Apc, r: &Req) -> Hit {
    if p.apc && r.computed == 0 {
        apc.lookup(&mut st.kv, r)
    } else {
        apc.clear_hits();
        Hit::default()
    }
}

/// Admit waiting requests in queue order while seats, budget and KV allow.
fn admit_waiting(st: &mut SchedState, p: &Params, reqs: &mut [Req], apc: &mut Apc, now_ns: u64) {
    let mut prefill_admitted = false;
    let fcfs = !p.priority_order && !p.priority_preemption;
    st.admission = match (st.waiting.is_empty(), fcfs) {
        (true, _) => Admission::Empty,
        (false, true) => Admission::Stopped, // unless the loop below says otherwise
        (false, false) => Admission::Other,
    };
    // Offload tiers: requests waiting for an async load are passed over (vLLM skips its
    // `WAITING_FOR_REMOTE_KVS` requests and keeps them at the head): `skip` of them so far.
    let tiers = apc.offload.is_some();
    let mut skip = 0usize;
    let lora = p.max_loras > 0;
    if lora {
        // vLLM: the adapters of the running requests scheduled so far this step.
        st.step_loras.clear();
        for &(id, _) in &st.plan {
            let a = reqs[id as usize].lora;
            if a > 0 && !st.step_loras.contains(&a) {
                st.step_loras.push(a);
            }
        }
    }
    while st.budget_left > 0 {
        if (st.running.len() as u32) >= p.max_num_seqs && !(p.priority_preemption && preempt_for_seat(st, p, reqs, apc)) {
            break;
        }
        let Some(id) = st.waiting.nth(skip) else { break };
        if fcfs {
            st.admission = Admission::Other;
        }
        if tiers && apc.offload.as_ref().is_some_and(|o| o.loading(id, now_ns)) {
            skip += 1;
            continue;
        }
        let r = &mut reqs[id as usize];
        if lora && r.lora > 0 && st.step_loras.len() as u32 >= p.max_loras && !st.step_loras.contains(&r.lora) {
            // vLLM: "scheduling would exceed max_loras": passed over, it keeps its place at
            // the head; the requests behind it may still join.
            st.lora_waits += u64::from(!r.lora_waited);
            r.lora_waited = true;
            st.admission = Admission::Other;
            skip += 1;
            continue;
        }
        let len = r.num_tokens();
        // Orca reserves prompt + max output; paged managers check the whole current length.
        let need = if st.kv.mode == KvMode::Contiguous { r.prompt + r.output } else { len };
        let looked = p.apc && r.computed == 0;
        let hit = lookup(st, p, apc, r);
        // The tiers below HBM: the prompt's blocks past the GPU's hit they hold.
        let ext = if tiers && looked { apc.tier_lookup(&st.kv, r, &hit, now_ns) } else { TierHit::default() };
        let ext_tokens = ext.blocks * st.kv.block_size.max(r.req_block);
        if !st.kv.fits_with_hits(need, r.req_block, r.blocks.len(), hit.units, || apc.evictable(&st.kv, &hit)) {
            if p.priority_preemption && preempt_for(st, p, reqs, apc, id, need) {
                continue;
            }
            if tiers && st.running.is_empty() && cancel_loads(st, reqs, apc, skip) {
                continue;
            }
            st.kv.note_refusal();
            if fcfs {
                st.admission = Admission::Refused;
            }
            break;
        }
        let mut n = len - r.computed - hit.tokens - ext_tokens;
        // An async load: the request takes its blocks now and is scheduled once they are in.
        let loading = ext.blocks > 0 && apc.offload.as_ref().is_some_and(|o| !o.blocking);
        if loading {
            n = 0;
        } else if p.chunked {
            n = n.min(st.budget_left).min(p.per_request_cap);
        } else if n > st.budget_left && prefill_admitted {
            // Whole prompts only: one that exceeds what is left waits for the next step
            // (the first prompt of a step may exceed the budget so it can ever run).
            break;
        }
        let r = &mut reqs[id as usize];
        if r.blocks.capacity() == 0 {
            // Its whole table at once (a prompt's chunks and its decode then grow it in place),
            // up to 256 KiB; past that, or if it cannot be had, it grows as it fills.
            let whole = st.kv.units_for(r.prompt.saturating_add(r.output).saturating_add(p.lookahead), r.req_block);
            let _ = r.blocks.try_reserve_exact(whole.min(st.kv.total()).min(1 << 16) as usize);
        }
        if hit.units > 0 {
            apc.take_hits(&mut st.kv, r);
            r.computed += hit.tokens;
            st.used_slots += hit.tokens as u64;
            st.admitted_hits.push((id, hit.tokens));
        }
        if let Some(off) = apc.offload.as_deref_mut().filter(|_| ext.blocks > 0) {
            // Blocks for the tokens loaded, which count as computed once they are in.
            off.load(st.kv.replica as usize, id, now_ns, &ext);
            if r.preemptions == 0 {
                off.stats.hit_tokens += u64::from(ext_tokens);
            }
            r.computed += ext_tokens;
            st.used_slots += u64::from(ext_tokens);
        }
        let alloc = if st.kv.mode == KvMode::Contiguous { need } else { r.computed + n };
        if !st.kv.grow(&mut r.blocks, alloc, r.req_block) {
            break; // unreachable: the check above covers `alloc`
        }
        if apc.shared && !loading {
            apc.cache_shared(&mut st.kv, r, alloc);
        }
        if looked && r.preemptions == 0 {
            // Not a re-admission after a preemption (vLLM's `prefix_cache_stats.queries`
            // and `hits`; re-admissions go to its `preempted_*` counters).
            st.step_queries += len as u64;
            st.step_hits += hit.tokens as u64;
        }
        if loading {
            // It waits for its blocks in the queue, at its place (vLLM's
            // `WAITING_FOR_REMOTE_KVS`); its cached tokens are what it hit in all.
            if r.first_sched_ns == NO_TIME {
                r.first_sched_ns = now_ns;
                apc.set_cached_tokens(id, hit.tokens + ext_tokens);
            }
            skip += 1;
            continue;
        }
        if let Some(off) = apc.offload.as_deref_mut() {
            off.clear_loading(id);
        }
        if p.bug != Bug::DoubleAdmit {
            st.waiting.remove_nth(skip);
        }
        r.status = Status::Running;
        r.prefill_target = len;
        if r.first_sched_ns == NO_TIME {
            r.first_sched_ns = now_ns;
            apc.set_cached_tokens(id, hit.tokens + ext_tokens);
        }
        st.running.push(id);
        if lora && r.lora > 0 && !st.step_loras.contains(&r.lora) {
            st.step_loras.push(r.lora);
        }
        st.push_plan(&reqs[id as usize], n);
        st.budget_left = st.budget_left.saturating_sub(n);
        prefill_admitted = true;
    }
}

/// With offload tiers, requests waiting for async loads hold GPU blocks. When the replica
/// runs nothing and the request at position `head` of the waiting queue cannot fit, the
/// holds of requests behind it may be all that keeps it out (a more urgent request arrived
/// while they loaded), and nothing would ever release them: vLLM's loop stops at the head.
/// Cancel the loads behind it, returning their blocks; each looks its tiers up again when
/// its turn comes. Holders ahead of it are left alone: their loads end, and they are
/// admitted first. Returns whether any was cancelled.
fn cancel_loads(st: &mut SchedState, reqs: &mut [Req], apc: &mut Apc, head: usize) -> bool {
    let mut any = false;
    let mut i = head + 1;
    while let Some(id) = st.waiting.nth(i) {
        i += 1;
        let r = &mut reqs[id as usize];
        if r.blocks.is_empty() || !apc.offload.as_deref().is_some_and(|o| o.awaits_load(id)) {
            continue;
        }
        if let Some(off) = apc.offload.as_deref_mut() {
            off.clear_loading(id);
        }
        st.used_slots -= r.computed as u64;
        r.computed = 0;
        apc.release(&mut st.kv, r, None);
        r.blocks = Vec::new();
        any = true;
    }
    any
}

/// o1pro with the batch full: the head of the waiting queue takes the seat of the least
/// urgent running request (latest admitted among equals) when it is strictly more urgent.
/// Returns whether a seat was freed.
fn preempt_for_seat(st: &mut SchedState, p: &Params, reqs: &mut [Req], apc: &mut Apc) -> bool {
    if p.bug == Bug::NoSeatPreempt {
        return false;
    }
    let Some(id) = st.waiting.peek() else { return false };
    let Some(victim) = st.pick_victim(p, reqs) else { return false };
    if reqs[victim as usize].priority <= reqs[id as usize].priority {
        return false;
    }
    st.preempt(p, reqs, apc, victim);
    true
}

/// o1pro: make room for the urgent waiting request `id` by preempting strictly less urgent
/// running requests (least urgent, latest admitted first). Returns whether it now fits.
fn preempt_for(st: &mut SchedState, p: &Params, reqs: &mut [Req], apc: &mut Apc, id: u32, need: u32) -> bool {
    let prio = reqs[id as usize].priority;
    loop {
        let Some(victim) = st.pick_victim(p, reqs) else { return false };
        if reqs[victim as usize].priority <= prio {
            return false;
        }
        st.preempt(p, reqs, apc, victim);
        let r = &reqs[id as usize];
        // A victim's freed blocks may change what the request hits.
        let hit = lookup(st, p, apc, r);
        if st.kv.fits_with_hits(need, r.req_block, r.blocks.len(), hit.units, || apc.evictable(&st.kv, &hit)) {
            return true;
        }
    }
}
