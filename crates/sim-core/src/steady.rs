//! Steady decode runs: consecutive decode steps of an unchanged batch, applied to the
//! requests lazily.
//!
//! Most steps of a busy replica are *steady*: every running request decodes one token, none
//! finishes, none needs a new KV block, nobody waits, so nothing can be preempted or
//! admitted. Such a step's plan is the previous one's, and its shape differs only by the
//! context sums (each request's KV grew by one token). For those steps the engine skips the
//! per-request work of the scheduler and of the step's completion: it advances the shape in
//! O(1), keeps the counters that other code reads (`used_slots`, `outstanding_tokens`)
//! exact, and owes each running request the steps it has not applied yet
//! ([`Steady::owed`]). The owed tokens are applied (`computed += owed`, `generated +=
//! owed`, integers, so the order of application cannot change a result) before anything
//! reads those requests: the next normally scheduled step, a replica stopping, and the end of
//! every `run_events` call (so callers never see a stale request).
//!
//! Every step is still one event priced by the same cost model from the same shape values,
//! and its metrics are recorded exactly as before: results are byte-identical (the goldens
//! check it). Which steps qualify is decided when a step is scheduled normally: the window is
//! the number of further steps in which no running request reaches its last token or the end
//! of its allocated KV blocks ([`Steady::window`]); a step starts lazily only while the
//! window lasts and the replica's waiting queue is empty (an arrival, a KV landing or a moved
//! request ends the run at once).

use crate::request::Req;
use crate::sched::SchedState;

/// A replica's steady-decode state.
#[derive(Debug, Clone, Copy, Default)]
pub struct Steady {
    /// Further steps that may start lazily (0: the next step is scheduled normally).
    pub left: u32,
    /// Steady steps completed whose tokens are not yet applied to the running requests.
    pub owed: u32,
    /// The step in flight started lazily (its completion is O(1)).
    pub in_flight: bool,
    /// Steps started lazily over the run (for tests and profiling).
    pub steps: u64,
}

impl Steady {
    /// After a normally scheduled step: how many further steps can be steady. Zero unless
    /// the plan is pure decode over every running request with nobody waiting and nothing
    /// preempted. Then it is the largest `w` such that for every request, after this step
    /// and `w` more, it has not produced its last token (`generated + 1 + w < output`) and
    /// the last of those steps still fits its blocks (it grows the KV to `computed + w + 1`
    /// slots, `computed` as before this step: `≤ slots held`, the grow fast path).
    pub fn window(st: &SchedState, reqs: &[Req]) -> u32 {
        if st.shape.prefill_tokens != 0
            || st.plan.len() != st.running.len()
            || !st.preempted.is_empty()
            || !st.waiting.is_empty()
        {
            return 0;
        }
        let slots_per_unit = i64::from(st.kv.block_size);
        let mut w = i64::from(u32::MAX);
        for &(id, _) in &st.plan {
            let r = &reqs[id as usize];
            let by_finish = i64::from(r.output) - i64::from(r.generated) - 2;
            let by_blocks = r.blocks.len() as i64 * slots_per_unit - i64::from(r.computed) - 1;
            w = w.min(by_finish).min(by_blocks);
        }
        w.max(0) as u32
    }

    /// Start a steady step: the last step's plan is the next one's (same entries, one token
    /// each), every context one token longer.
    #[inline]
    pub fn advance(&mut self, st: &mut SchedState) {
        self.left -= 1;
        self.in_flight = true;
        self.steps += 1;
        let b = st.plan.len() as u64;
        st.shape.decode_ctx += b;
        st.shape.ctx_after += b;
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

    /// Apply the owed steps to the running requests (the entries of `st.plan`).
    pub fn settle(&mut self, st: &SchedState, reqs: &mut [Req]) {
        if self.owed == 0 {
            return;
        }
        for &(id, _) in &st.plan {
            let r = &mut reqs[id as usize];
            r.computed += self.owed;
            r.generated += self.owed;
        }
        self.owed = 0;
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
        let (lazy, steps) = (e.replicas[0].steady.steps, e.replicas[0].stats.steps);
        (sim.finish().unwrap().to_json(), lazy, steps)
    }

    #[test]
    fn most_decode_steps_run_lazily_and_change_no_byte() {
        let (fast, lazy, steps) = run(SimOptions::default());
        // Steady runs end at block boundaries (every 16 tokens, the requests staggered),
        // at the arrival at 40 ms and at finishes.
        assert!(lazy * 10 > steps * 7, "{lazy} of {steps} steps lazy");
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
            sim.engine().check_invariants().unwrap();
        }
        assert_eq!(sim.finish().unwrap().to_json(), run(SimOptions::default()).0);
    }
}
