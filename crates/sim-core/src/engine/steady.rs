//! Steady decode runs: consecutive decode steps of an unchanged batch, applied to the
//! requests lazily.
//!
//! Most steps of a busy replica are *steady*: every running request decodes one token, none
//! finishes, nobody waits, so nothing can be admitted or preempted. Such a step's plan is the
//! previous one's, and its shape differs only by the context sums (each request's KV grew by
//! one token). For those steps the engine skips the per-request work of the scheduler and of
//! the step's completion: it advances the shape in O(1), keeps the counters that other code
//! reads (`used_slots`, `outstanding_tokens`) exact, and owes each running request the steps
//! it has not applied yet ([`Steady::owed`]). The owed tokens are applied (`computed +=
//! owed`, `generated += owed`, integers, so the order of application cannot change a result)
//! before anything reads those requests: the next normally scheduled step, a replica
//! stopping, and the end of every `run_events` call (so callers never see a stale request).
//!
//! KV blocks: a request needs a new block when its length passes a block boundary. In a
//! paged pool (vLLM, Sarathi) that happens every `block_size` steps, at steps fixed when the
//! run opens, so the requests are filed by the step (mod `block_size`) at which they cross
//! and a steady step calls the pool's `grow` for exactly those requests, in plan order, with
//! their true length: the same calls with the same effects as the scheduler's pass (the
//! others would take `grow`'s no-op fast path). If the free blocks cannot cover them all, the
//! step is scheduled normally instead (it will preempt). Other pools (Orca's reservation,
//! o1pro's per-request block sizes) end the run at the first boundary instead.
//!
//! Every step is still one event priced by the same cost model from the same shape values,
//! and its metrics are recorded exactly as before: results are byte-identical (the goldens
//! check it, and a property test compares lazy and non-lazy runs). A run opens when a step is
//! scheduled normally and lasts until a request is about to produce its last token
//! ([`Steady::open`]); a step starts lazily only while it lasts and the replica's waiting
//! queue is empty (an arrival, a KV landing or a moved request ends it at once) — or, under
//! a FCFS policy, while the requests that waited when the run opened are held back by what
//! a decoding batch cannot change: the seats or token budget the decodes leave (constant),
//! or a head of the queue that did not fit the free KV (which only shrinks while requests
//! grow and none finishes or is preempted). Arrivals then queue behind that head and change
//! no step; each step counts the head's refusal as the admission pass would. This keeps a
//! KV-bound batch (preempted requests waiting to come back) on the lazy path.
//!
//! Prefix caching: the KV blocks a steady step fills are cached when the owed steps are
//! applied ([`Steady::settle`]) rather than at each step. Nothing can look them up in
//! between — lookups happen only when the replica schedules normally, which it does only
//! after settling — and no other block is cached on the replica meanwhile, so the cache
//! ends up exactly as if every step had cached its own. With prefix caching on, a
//! head refused for want of KV ends the run as before: its hits depend on cache contents.

use crate::kv::KvMode;
use crate::kv::prefix::Apc;
use crate::request::Req;
use crate::sched::{Admission, SchedState};

/// A replica's steady-decode state.
#[derive(Debug, Clone, Default)]
pub struct Steady {
    /// Further steps that may start lazily (0: the next step is scheduled normally).
    pub left: u32,
    /// Steady steps completed whose tokens are not yet applied to the running requests.
    pub owed: u32,
    /// The step in flight started lazily (its completion is O(1)).
    pub in_flight: bool,
    /// Steps started lazily over the run (for tests and profiling).
    pub steps: u64,
    /// Lazy steps started in the current run.
    started: u32,
    /// Requests waited when the run opened, blocked at the head or by seats or budget
    /// ([`Admission`]): arrivals queue behind them and change no step.
    pub waiting_ok: bool,
    /// The head did not fit the free KV when the run opened: each step counts that refusal.
    refuse: bool,
    /// Paged pool: `crossings[k]` = plan positions of the requests that pass a block
    /// boundary at the run's steps j ≡ k (mod `block_size`), in plan order. Empty otherwise.
    crossings: Vec<Vec<u32>>,
}

impl Steady {
    /// After a normally scheduled step: open a run of further steady steps, returning how
    /// many may follow. Zero unless the plan is pure decode over every running request with
    /// nobody waiting and nothing preempted. Then it is the largest `w` such that every
    /// request, after this step and `w` more, has not produced its last token
    /// (`generated + 1 + w < output`), and, outside paged pools, the last of those steps
    /// still fits its blocks (it grows the KV to `computed + w + 1` slots, `computed` as
    /// before this step: `≤ slots held`).
    pub fn open(&mut self, st: &SchedState, reqs: &[Req]) -> u32 {
        self.left = 0;
        // Requests may wait when the admission pass stopped at seats, budget or a head that
        // does not fit: each steady step would stop the same way (module docs).
        let waiting_ok = match st.admission {
            Admission::Stopped => true,
            // With prefix caching the head's fit depends on what the cache holds, which a
            // steady run only updates when it settles.
            Admission::Refused => st.kv.cache.is_none(),
            _ => false,
        };
        if st.shape.prefill_tokens != 0
            || st.plan.len() != st.running.len()
            || !st.preempted.is_empty()
            || !(st.waiting.is_empty() || waiting_ok)
        {
            return 0;
        }
        self.waiting_ok = waiting_ok;
        self.refuse = st.admission == Admission::Refused;
        let bs = st.kv.block_size;
        let paged = st.kv.mode == KvMode::Paged;
        if paged {
            self.crossings.resize_with(bs as usize, Vec::new);
            self.crossings.iter_mut().for_each(Vec::clear);
        } else {
            self.crossings.clear();
        }
        let mut w = i64::from(u32::MAX);
        for (pos, &(id, _)) in st.plan.iter().enumerate() {
            let r = &reqs[id as usize];
            w = w.min(i64::from(r.output) - i64::from(r.generated) - 2);
            let held = r.blocks.len() as i64 * i64::from(bs);
            if paged {
                // Step j grows it to computed + j + 1: past `held` at j = held − computed,
                // then every `bs` steps.
                let k = (held - i64::from(r.computed)).rem_euclid(i64::from(bs));
                self.crossings[k as usize].push(pos as u32);
            } else {
                w = w.min(held - i64::from(r.computed) - 1);
            }
            if w <= 0 {
                return 0;
            }
        }
        self.started = 0;
        self.left = w as u32;
        self.left
    }

    /// Start the next steady step: grow the blocks of the requests crossing a boundary now
    /// (paged pools), then the last step's plan is this one's (same entries, one token
    /// each), every context one token longer. `false` (nothing changed) when the free blocks
    /// cannot cover those requests: the step must be scheduled normally.
    #[inline]
    pub fn advance(&mut self, st: &mut SchedState, reqs: &mut [Req]) -> bool {
        let j = self.started + 1;
        if !self.crossings.is_empty() {
            let due = &self.crossings[(j % st.kv.block_size) as usize];
            if due.len() > st.kv.free_units() as usize {
                return false;
            }
            for &pos in due {
                let r = &mut reqs[st.plan[pos as usize].0 as usize];
                // The true length after this step's token; a no-op if no boundary is passed.
                let len = r.computed + self.owed + 1;
                st.kv.grow(&mut r.blocks, len, r.req_block);
            }
        }
        if self.refuse {
            st.kv.note_refusal(); // the admission pass's refusal of the head, as in `open`
        }
        self.started = j;
        self.left -= 1;
        self.in_flight = true;
        self.steps += 1;
        let b = st.plan.len() as u64;
        st.shape.decode_ctx += b;
        st.shape.ctx_after += b;
        st.shape.decode_blocks_1024 += st.shape.decode_block_step_1024;
        true
    }

    /// A steady step completed: the replica's counters now, the requests later.
    #[inline]
    pub fn complete(&mut self, st: &mut SchedState, outstanding_tokens: &mut u64) {
        let b = st.plan.len() as u64;
        st.used_slots += b;
        *outstanding_tokens -= b;
        self.owed += 1;
        self.in_flight = false;
    }

    /// Apply the owed steps to the running requests (the entries of `st.plan`), and cache
    /// the shared blocks they filled.
    pub fn settle(&mut self, st: &mut SchedState, reqs: &mut [Req], apc: &mut Apc) {
        if self.owed == 0 {
            return;
        }
        for &(id, _) in &st.plan {
            let r = &mut reqs[id as usize];
            r.computed += self.owed;
            r.generated += self.owed;
            if apc.shared && r.computed.min(r.num_tokens()) >= r.apc_gate {
                apc.cache_shared(&mut st.kv, r, r.computed);
            }
        }
        self.owed = 0;
    }

    /// Forget everything (the replica stopped, or the model checker loads a state).
    pub fn reset(&mut self) {
        self.left = 0;
        self.owed = 0;
        self.in_flight = false;
        self.started = 0;
    }
}

#[cfg(test)]
mod tests {
    use crate::{Format, SimOptions, Simulation};

    /// 4 requests of 128 + 300 tokens decoding together, block size 16, linear costs.
    const SCENARIO: &str = r#"{"seed": 1, "model": "llama-3-8b", "gpu": "h100",
        "scheduler": {"policy": "vllm"},
        "cost_model": {"kind": "linear", "base_ms": 1.0, "per_prefill_token_ms": 0.01,
                       "per_decode_seq_ms": 0.1, "per_context_token_ms": 0.001},
        "workload": {"requests": [
            {"arrival_ms": 0, "prompt_tokens": 128, "output_tokens": 300},
            {"arrival_ms": 0, "prompt_tokens": 120, "output_tokens": 280},
            {"arrival_ms": 0, "prompt_tokens": 100, "output_tokens": 310},
            {"arrival_ms": 40, "prompt_tokens": 128, "output_tokens": 250}]}}"#;

    fn run(options: SimOptions) -> (String, u64, u64) {
        let mut sim = Simulation::from_text(SCENARIO, Format::Json, options).unwrap();
        sim.run().unwrap();
        let e = sim.engine();
        // Lazy steps: the steady run's, or the lazy decode set's where it runs instead.
        let (lazy, steps) = (e.replicas[0].steady.steps + e.replicas[0].set.steps, e.replicas[0].stats.steps);
        (sim.finish().unwrap().to_json(), lazy, steps)
    }

    #[test]
    fn most_decode_steps_run_lazily_and_change_no_byte() {
        let (fast, lazy, steps) = run(SimOptions::default());
        // Steady runs pass block boundaries (every 16 tokens, the requests staggered) and
        // end at the arrival at 40 ms and at finishes.
        assert!(lazy * 10 > steps * 9, "{lazy} of {steps} steps lazy");
        let (slow, none, steps_again) = run(SimOptions { check_invariants: true, ..SimOptions::default() });
        assert_eq!(none, 0, "checked runs schedule every step");
        assert_eq!(steps, steps_again);
        assert_eq!(fast, slow);
    }

    #[test]
    fn a_run_sliced_into_single_events_reads_current_requests_between_slices() {
        let mut sim = Simulation::from_text(SCENARIO, Format::Json, SimOptions::default()).unwrap();
        let mut last = 0u32;
        while !sim.run_events(1).unwrap() {
            // Between calls no step is owed: the first request's progress is exact.
            let r = &sim.engine().reqs[0];
            assert!(r.generated >= last && r.generated <= last + 1, "{} after {last}", r.generated);
            last = r.generated;
            crate::check::props::check_invariants(sim.engine()).unwrap();
        }
        assert_eq!(sim.finish().unwrap().to_json(), run(SimOptions::default()).0);
    }

    /// A KV-bound batch: 12 requests of 64 + 400 tokens in 160 blocks of 16 (2,560 slots for
    /// 5,568 tokens), so requests are preempted and wait for room while the others decode,
    /// and arrivals queue behind them.
    fn kv_bound(policy: &str, apc: bool) -> String {
        let mut reqs: Vec<String> = (0..12).map(|_| r#"{"arrival_ms": 0, "prompt_tokens": 64, "output_tokens": 400}"#.to_string()).collect();
        reqs.extend((0..4).map(|k| format!(r#"{{"arrival_ms": {}, "prompt_tokens": 32, "output_tokens": 50}}"#, 300 + 200 * k)));
        format!(
            r#"{{"seed": 1, "model": "llama-3-8b", "gpu": "h100",
            "scheduler": {{"policy": "{policy}", "enable_prefix_caching": {apc}, "num_gpu_blocks": 160, "max_num_batched_tokens": 256, "chunk_size": 256}},
            "cost_model": {{"kind": "linear", "base_ms": 1.0, "per_prefill_token_ms": 0.01, "per_decode_seq_ms": 0.1}},
            "workload": {{"requests": [{}]}}}}"#,
            reqs.join(",")
        )
    }

    #[test]
    fn a_kv_bound_batch_stays_lazy_while_requests_wait_and_changes_no_byte() {
        for (policy, apc) in [("vllm", false), ("sarathi", false), ("vllm", true)] {
            let text = kv_bound(policy, apc);
            let run = |options: SimOptions| {
                let mut sim = Simulation::from_text(&text, Format::Json, options).unwrap();
                sim.run().unwrap();
                let e = sim.engine();
                let lazy = e.replicas[0].steady.steps + e.replicas[0].set.steps;
                (sim.finish().unwrap(), lazy)
            };
            let (fast, lazy) = run(SimOptions::default());
            let (slow, none) = run(SimOptions { check_invariants: true, ..SimOptions::default() });
            assert_eq!(none, 0);
            assert!(fast.summary["preemptions"].as_u64().unwrap() > 5, "{policy}: KV-bound");
            assert!(fast.summary["allocation_failures"].as_u64().unwrap() > 100, "{policy}: refusals counted");
            let steps = fast.summary["steps"].as_u64().unwrap();
            // With prefix caching a refused head ends a lazy run (its fit depends on the
            // cache), so only the seats-or-budget waits stay lazy; the bytes never change.
            if !apc {
                assert!(lazy * 10 > steps * 8, "{policy}: {lazy} of {steps} steps lazy");
            }
            assert_eq!(fast.to_json(), slow.to_json(), "{policy}, prefix caching {apc}");
        }
    }
}
