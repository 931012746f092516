//! The lazy decode set: the running requests at the head of a replica's batch that decode
//! one token a step, scheduled and applied in O(1) a step while the rest of the batch is
//! scheduled as usual.
//!
//! [`crate::engine::steady`] skips the scheduler only while the whole batch decodes and
//! nobody can be admitted; a busy replica (arrivals every few steps, a request finishing
//! every few steps, a long batch of 128 or 256 sequences) then schedules every request of
//! its batch at almost every step. Here the batch is split instead: `running[..s]` — the
//! *set* — are requests past their prefill, each decoding exactly one token a step, and the
//! policy schedules only what comes after them (prefill chunks, decodes behind a prefill,
//! admissions) with the budget the set leaves ([`crate::sched::SchedState::schedule_from`]).
//! That is vLLM's own loop: the set's requests come first in `running`, so they take their
//! tokens before anything else, and under FCFS a preemption's victim is the last admitted,
//! never one of them. A member's progress is affine in the steps the set has completed, `t`:
//! its KV length is `base + t` and its output count `gbase + t`, both fixed when it joins, so
//! a step costs O(1) plus its events:
//! - **blocks**: a member needs a new block when its length is a multiple of the block size,
//!   i.e. at the steps `t ≡ −base` (mod block size), so members are filed by that residue
//!   and the step grows exactly those, in batch order, with the scheduler's own `grow`
//!   calls (same units, same allocation counters). If the free units cannot cover them the
//!   set is dissolved and the step is scheduled whole (it will preempt);
//! - **shape**: the set adds its decodes to the step's aggregates from sums kept over its
//!   members (all integers, so the step is priced from the same values);
//! - **finishes**: a member produces its last token at step `output − gbase`, known when it
//!   joins; at that step's completion it is brought up to date and finished exactly as the
//!   completion loop finishes a request, in batch order, before the rest of the plan;
//! - **joins**: after every completion, the requests right after the set that now decode
//!   join it (a prefill that completed, a request admitted behind it).
//!
//! Members are brought up to date (`computed = base + t`, `generated = gbase + t`) whenever
//! anything else may read them: when the set is dissolved (a step that must be scheduled
//! whole, a client's timeout, a stopped replica) and at the end of every `run_events` call.
//! The set is used only where every one of these holds: a paged pool, a FCFS policy without
//! priority preemption, no speculative decoding, LoRA, KV offload or TensorRT-LLM scheduler,
//! and a member's KV holds no block another request could hit (its prefix-cache gate is
//! passed) — elsewhere [`crate::engine::steady`] runs as before. Results are byte-identical to
//! scheduling every request every step: the goldens and the property tests that compare lazy
//! and checked runs (which schedule every step) hold it.
//!
//! **Quiet steps.** When the set is the whole batch, none of its members produces its last
//! token, nothing waits and the last admission pass found the queue empty, and the step's
//! completion is the only thing due at its instant, the engine completes it and starts the
//! next one directly ([`crate::engine::Engine::quiet_step`]): the set's O(1) completion and
//! advance, a fresh shape, the price, the metrics and the heap entry — none of the event
//! loop's general instant, the completion loop or the policy's passes, which would find
//! nothing to do. Checked runs take the general path at every instant.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::kv::prefix::Apc;
use crate::kv::KvMode;
use crate::request::Req;
use crate::sched::{Params, PlanShape, SchedState};

/// A slot of [`DecodeSet::members`] whose member left.
const FREE: u32 = u32::MAX;

/// One member of the set: its progress as affine functions of the set's step count.
#[derive(Debug, Clone, Copy)]
struct Member {
    id: u32,
    /// KV length = `base + t` (tokens computed).
    base: i64,
    /// Output tokens produced = `gbase + t`.
    gbase: i64,
    /// Join order (= batch order).
    seq: u64,
    /// 1024 / the request's block size ([`crate::sched::PlanShape::decode_blocks_1024`]).
    per_block: u64,
}

/// A replica's lazy decode set ([`crate::engine::decode_set`]).
#[derive(Debug, Clone, Default)]
pub struct DecodeSet {
    /// The members (`running[..len]`, in no particular order), each in a slot it keeps for
    /// its life in the set (its finish entry names the slot, so leaving is O(1)); a slot
    /// whose member left holds `id == FREE` until a join takes it.
    members: Vec<Member>,
    /// Slots of `members` whose member left.
    free_slots: Vec<u32>,
    /// Steps the set has completed (its clock; members' lengths are affine in it).
    t: i64,
    /// Joins so far.
    seq: u64,
    /// (step at which it produces its last token, join order, id, slot).
    finishes: BinaryHeap<Reverse<(i64, u64, u32, u32)>>,
    /// Paged pool: `crossings[k]` = the members (id, base) that pass a block boundary at the
    /// steps t ≡ k (mod block size), in batch order.
    crossings: Vec<Vec<(u32, i64)>>,
    /// Σ base, Σ base · per_block, Σ per_block over the members.
    sum_base: i64,
    sum_base_pb: i64,
    sum_pb: u64,
    /// The plan's first entries are not the members' any more (a member left or joined).
    plan_stale: bool,
    /// The step in flight scheduled the set lazily (its completion applies it in O(1)).
    pub in_flight: bool,
    /// Steps started with a lazy set (for tests and profiling).
    pub steps: u64,
    /// Of those, steps completed and started again without the event loop's general path
    /// ([`crate::engine::Engine::quiet_step`]; for tests and profiling).
    pub quiet: u64,
}

/// Whether a replica whose policy has `p`, whose pool is `mode` and whose requests have no
/// KV offload tier may keep a lazy decode set (see the module docs).
pub fn allowed(p: &Params, mode: KvMode, offload: bool) -> bool {
    mode == KvMode::Paged
        && !p.priority_preemption
        && !p.vllm_priority
        && p.spec_k == 0
        && p.lookahead == 0
        && p.max_loras == 0
        && p.trtllm.is_none()
        && p.per_request_cap == u32::MAX
        && p.bug == crate::sched::Bug::None
        && !offload
}

impl DecodeSet {
    /// Members now (the first entries of `running`).
    #[inline]
    pub fn len(&self) -> usize {
        self.members.len() - self.free_slots.len()
    }

    /// Start a step with the set: grow the members that pass a block boundary now, and make
    /// the plan's first entries theirs. `false` (nothing changed) when there is no set, it
    /// would not get a token each from `budget`, or the free units cannot cover its growth.
    pub fn advance(&mut self, st: &mut SchedState, reqs: &mut [Req], budget: u32) -> bool {
        let s = self.len();
        if s == 0 || s as u64 > u64::from(budget) {
            return false;
        }
        let bs = i64::from(st.kv.block_size.max(1));
        let due = &self.crossings[self.t.rem_euclid(bs) as usize];
        if due.len() > st.kv.free_units() as usize {
            return false;
        }
        for &(id, base) in due {
            let r = &mut reqs[id as usize];
            // Its length after this step's token; the scheduler's own call.
            let grew = st.kv.grow(&mut r.blocks, (base + self.t + 1) as u32, r.req_block);
            debug_assert!(grew, "the free units cover the set's growth");
        }
        if self.plan_stale {
            st.plan.clear();
            st.plan.extend(st.running[..s].iter().map(|&id| (id, 1)));
            self.plan_stale = false;
        } else {
            st.plan.truncate(s);
        }
        debug_assert!(
            {
                let mut ids: Vec<u32> = self.members.iter().map(|m| m.id).filter(|&id| id != FREE).collect();
                let mut plan: Vec<u32> = st.plan.iter().map(|p| p.0).collect();
                ids.sort_unstable();
                plan.sort_unstable();
                ids == plan && st.plan.iter().zip(&st.running).all(|(p, &id)| p.0 == id)
            },
            "the plan is the set, in running's order"
        );
        self.in_flight = true;
        self.steps += 1;
        true
    }

    /// The step in flight is the set's alone (every running request is a member, nothing
    /// else was planned) and no member produces its last token when it completes.
    #[inline]
    pub fn quiet(&self, st: &SchedState) -> bool {
        let s = self.len();
        self.in_flight
            && s == st.plan.len()
            && s == st.running.len()
            && self.finishes.peek().is_none_or(|&Reverse((at, ..))| at > self.t + 1)
    }

    /// Add the set's decodes to the step's aggregates (the policy's pass wrote the rest's).
    pub fn add_shape(&self, st: &mut SchedState) {
        let own = self.shape();
        let sh = &mut st.shape;
        sh.tokens += own.tokens;
        sh.decode_seqs += own.decode_seqs;
        sh.sampled += own.sampled;
        sh.ctx_after += own.ctx_after;
        sh.decode_ctx += own.decode_ctx;
        sh.decode_blocks_1024 += own.decode_blocks_1024;
        sh.decode_block_step_1024 += own.decode_block_step_1024;
    }

    /// The aggregates of a step of the set alone: its decodes' (one token each, every one
    /// sampled), nothing else. Written whole by a quiet step, not added to a cleared shape:
    /// the same integers, without reading back what was just stored.
    #[inline]
    pub fn shape(&self) -> PlanShape {
        let s = self.len() as u64;
        // Σ over members of the KV length after this step: Σ (base + t + 1).
        let after = (self.sum_base + self.t * s as i64) as u64 + s;
        PlanShape {
            tokens: s,
            decode_seqs: s,
            sampled: s,
            ctx_after: after,
            decode_ctx: after,
            // Σ (length after − 1) · per_block.
            decode_blocks_1024: (self.sum_base_pb + self.t * self.sum_pb as i64) as u64,
            decode_block_step_1024: self.sum_pb,
            ..PlanShape::default()
        }
    }

    /// The step in flight completed: one token for every member. Returns its members in
    /// batch order that produced their last token, each brought up to date (to be finished
    /// by the caller, in that order) and out of the set.
    pub fn complete(&mut self, st: &mut SchedState, reqs: &mut [Req], outstanding: &mut u64, done: &mut Vec<u32>) {
        self.in_flight = false;
        let s = self.len() as u64;
        st.used_slots += s;
        *outstanding = outstanding.saturating_sub(s);
        self.t += 1;
        done.clear();
        while let Some(&Reverse((at, _, id, slot))) = self.finishes.peek() {
            if at > self.t {
                break;
            }
            debug_assert_eq!(at, self.t, "a member finishes at the step it was due");
            self.finishes.pop();
            done.push(id);
            let m = std::mem::replace(&mut self.members[slot as usize], Member { id: FREE, base: 0, gbase: 0, seq: 0, per_block: 0 });
            debug_assert_eq!(m.id, id, "a finishing member is in its slot");
            self.free_slots.push(slot);
            self.update(&m, &mut reqs[id as usize]);
            self.leave(&m, st.kv.block_size);
        }
    }

    /// Bring member `m`'s request up to date.
    #[inline]
    fn update(&self, m: &Member, r: &mut Req) {
        r.computed = (m.base + self.t) as u32;
        r.generated = (m.gbase + self.t) as u32;
    }

    /// Take `m` (no longer in `members`) out of the sums and the crossings.
    fn leave(&mut self, m: &Member, block_size: u32) {
        self.sum_base -= m.base;
        self.sum_base_pb -= m.base * m.per_block as i64;
        self.sum_pb -= m.per_block;
        let bs = i64::from(block_size.max(1));
        let c = &mut self.crossings[(-m.base).rem_euclid(bs) as usize];
        if let Some(k) = c.iter().position(|&(id, _)| id == m.id) {
            c.remove(k);
        }
        self.plan_stale = true;
    }

    /// After a completion: the requests right after the set in `running` that now decode
    /// one token a step join it, while it still gets a token each from `budget`. A request
    /// whose KV may hold blocks another can hit (prefix caching has more to register for
    /// it) stays out, as does everything behind it.
    pub fn join(&mut self, st: &SchedState, reqs: &[Req], apc: &Apc, budget: u32) {
        let bs = st.kv.block_size.max(1);
        if self.crossings.len() != bs as usize {
            self.crossings.resize_with(bs as usize, Vec::new);
        }
        while let Some(&id) = st.running.get(self.len()) {
            if self.len() as u64 >= u64::from(budget) {
                break;
            }
            let r = &reqs[id as usize];
            let decodes = r.status == crate::request::Status::Running
                && !r.in_prefill()
                && r.computed + 1 == r.num_tokens()
                && r.generated < r.output
                && r.replica >= 0
                && (!apc.shared || r.apc_gate == u32::MAX);
            if !decodes {
                break;
            }
            let m = Member {
                id,
                base: i64::from(r.computed) - self.t,
                gbase: i64::from(r.generated) - self.t,
                seq: self.seq,
                per_block: 1024u64 >> r.req_block.trailing_zeros().min(10),
            };
            self.seq += 1;
            let slot = match self.free_slots.pop() {
                Some(k) => {
                    self.members[k as usize] = m;
                    k
                }
                None => {
                    self.members.push(m);
                    (self.members.len() - 1) as u32
                }
            };
            self.finishes.push(Reverse((i64::from(r.output) - m.gbase, m.seq, id, slot)));
            self.crossings[(-m.base).rem_euclid(i64::from(bs)) as usize].push((id, m.base));
            self.sum_base += m.base;
            self.sum_base_pb += m.base * m.per_block as i64;
            self.sum_pb += m.per_block;
            self.plan_stale = true;
        }
    }

    /// Bring every member up to date; the set goes on (its members' progress stays affine
    /// in the same clock).
    pub fn settle(&self, reqs: &mut [Req]) {
        for m in self.members.iter().filter(|m| m.id != FREE) {
            self.update(m, &mut reqs[m.id as usize]);
        }
    }

    /// Bring every member up to date and dissolve the set: the next step schedules the whole
    /// batch. A step in flight then completes as an ordinary one (its entries for the members
    /// are ordinary plan entries of requests now current).
    pub fn dissolve(&mut self, reqs: &mut [Req]) {
        self.settle(reqs);
        self.empty();
    }

    /// Forget everything (the model checker loads a state).
    pub fn reset(&mut self) {
        self.empty();
        self.t = 0;
    }

    /// No members, nothing in flight (the clock kept).
    fn empty(&mut self) {
        self.members.clear();
        self.free_slots.clear();
        self.finishes.clear();
        self.crossings.iter_mut().for_each(Vec::clear);
        self.sum_base = 0;
        self.sum_base_pb = 0;
        self.sum_pb = 0;
        self.plan_stale = true;
        self.in_flight = false;
    }
}

#[cfg(test)]
mod tests {
    use crate::{Format, SimOptions, Simulation};

    /// A busy replica: arrivals every few steps and a request finishing every few steps, the
    /// whole of each request's life inside the run.
    fn busy(policy: &str, extra: &str, blocks: u32) -> String {
        format!(
            r#"{{"seed": 7, "model": "llama-3-8b", "gpu": "h100",
            "scheduler": {{"policy": "{policy}", "num_gpu_blocks": {blocks}, "max_num_batched_tokens": 512, "chunk_size": 256 {extra}}},
            "cost_model": {{"kind": "linear", "base_ms": 5.0, "per_prefill_token_ms": 0.02,
                           "per_decode_seq_ms": 0.1, "per_context_token_ms": 0.0001}},
            "workload": {{"num_requests": 300, "arrival": {{"kind": "poisson", "rate": 40.0}},
                         "shared_prefix": {{"groups": 3, "prefix_tokens": 96, "users_per_group": 20,
                                            "question": {{"kind": "uniform", "min": 16, "max": 600}},
                                            "output": {{"kind": "uniform", "min": 1, "max": 200}}}}}}}}"#
        )
    }

    fn run(text: &str, options: SimOptions) -> (String, u64, u64, u64) {
        let mut sim = Simulation::from_text(text, Format::Json, options).unwrap();
        sim.run().unwrap();
        let e = sim.engine();
        let lazy = e.replicas.iter().map(|r| r.set.steps).sum();
        let steps = e.replicas.iter().map(|r| r.stats.steps).sum();
        let quiet: u64 = e.replicas.iter().map(|r| r.set.quiet).sum();
        assert!(quiet <= lazy);
        (sim.finish().unwrap().to_json(), lazy, steps, quiet)
    }

    /// Arrivals, prefills and finishes in the middle of the batch: most steps still schedule
    /// the decoding head lazily, and the bytes are those of scheduling every request every
    /// step (the checked run), with prefix caching on or off, under vLLM's and Sarathi's
    /// budgets, and in a pool small enough to preempt (the set dissolves at a shortage).
    #[test]
    fn a_busy_batch_schedules_its_decoding_head_lazily_and_changes_no_byte() {
        for (policy, extra, blocks, min_lazy) in [
            ("vllm", "", 100_000, 0.6),
            ("sarathi", "", 100_000, 0.6),
            ("vllm", r#", "enable_prefix_caching": false"#, 100_000, 0.6),
            ("vllm", "", 400, 0.0),
        ] {
            let text = busy(policy, extra, blocks);
            let (fast, lazy, steps, quiet) = run(&text, SimOptions::default());
            let (slow, none, steps_again, _) = run(&text, SimOptions { check_invariants: true, ..SimOptions::default() });
            assert_eq!(none, 0, "checked runs schedule every step");
            // Between arrivals and finishes, steps of the set alone skip the event loop.
            assert!(blocks < 1000 || quiet * 5 > steps, "{policy} {extra}: {quiet} of {steps} steps quiet");
            assert_eq!(steps, steps_again, "{policy} {extra} {blocks}");
            assert!(lazy as f64 >= min_lazy * steps as f64, "{policy} {extra} {blocks}: {lazy} of {steps} steps lazy");
            assert_eq!(fast, slow, "{policy} {extra} {blocks}");
        }
    }
}
