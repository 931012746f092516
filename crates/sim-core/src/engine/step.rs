//! One scheduler step on one replica: planned and priced when it starts, applied when it
//! completes (tokens, first tokens, finishes, freed blocks), and recorded.

use std::cmp::Reverse;

use super::{Engine, Replica};
use crate::fabric::Fabric;
use crate::perf::{StepCostModel, StepMemo};
use crate::sched::SchedState;
use crate::error::SimError;
use crate::metrics::{StepRecord, StepSample};
use crate::perf::BatchShape;
use crate::request::{Status, MAX_TIME_NS};

impl Engine {
    /// Ask the policy for a plan (or continue a steady decode run), price it, schedule its
    /// completion. `false` if empty.
    pub(super) fn start_step(&mut self, rep: usize) -> bool {
        let now = self.now_ns;
        let planned = self.plan_step(rep, now);
        self.note_out_of_memory(rep);
        let Some(lazy) = planned else { return false };
        self.launch(rep, lazy);
        true
    }

    /// A KV pool whose free list could not grow while the step was planned: the run's
    /// error, reported after the instant.
    #[inline]
    fn note_out_of_memory(&mut self, rep: usize) {
        if self.replicas[rep].sched.kv.out_of_memory && self.log_error.is_none() {
            self.log_error = Some(kv_out_of_memory(&self.replicas[rep].sched.kv, self.kv_field));
        }
    }

    /// Price the step planned on `rep` (`lazy`: a steady run's step, which made no
    /// prefix-cache lookups), record its metrics and schedule its completion.
    fn launch(&mut self, rep: usize, lazy: bool) {
        let now = self.now_ns;
        self.seq += 1;
        let replica = &mut self.replicas[rep];
        replica.step_seq = self.seq;
        if self.unpriced_steps {
            // The model checker orders completions itself: no duration, metrics or event.
            replica.busy = true;
            replica.stats.steps += 1;
            return;
        }
        let pool = self.pool_of[rep] as usize;
        let (dur, comm_s) = price_step(&self.perfs[pool], &mut self.memos[pool], self.fabric.as_deref_mut(), rep, &replica.sched);
        let decision = Self::decision_exposed_ns(self.decision_ns, replica.last_end_ns, replica.last_dur_ns, now);
        // Blocking tier loads of this step's admissions: the batch waits for them; so it
        // does for adapters brought into GPU slots.
        // The first step that needs a kernel variant start-up did not compile waits for its
        // compilation (perf/warmup.rs).
        // Saturating and clamped as the price is ([`price_step`]): a stall the user set
        // absurdly long ends the step past the time horizon (a typed error when it comes
        // due), not in an overflow.
        let stall = self
            .apc
            .offload
            .as_deref_mut()
            .map_or(0, |o| o.take_stall(rep))
            .saturating_add(self.lora.as_deref_mut().map_or(0, |l| l.activate(rep, &replica.sched.step_loras)))
            .saturating_add(
                self.warmups[self.pool_of[rep] as usize]
                    .as_ref()
                    .map_or(0, |w| w.stall(&mut replica.compiled, replica.sched.shape.tokens)),
            );
        let dur = dur.saturating_add(decision).saturating_add(stall).min(MAX_TIME_NS);
        replica.last_comm_s = comm_s;
        replica.last_decision_ns = decision;
        replica.last_end_ns = now.saturating_add(dur);
        replica.last_dur_ns = dur;
        replica.busy = true;
        replica.step_start_ns = now;
        record_step_metrics(replica, now, dur, lazy);
        self.heap.push(Reverse((now.saturating_add(dur), self.seq, rep as u32)));
    }

    /// The completion of step `seq` on `rep` and the start of the next, in O(1), when the
    /// step is a lazy decode set's alone ([`crate::engine::decode_set::DecodeSet::quiet`]):
    /// every running request is a member, none produces its last token, nothing waits, and
    /// the last plan's admission pass found the waiting queue empty. Then the completion is
    /// the set's own (no token is a first or a last one, nothing joins), and the next plan
    /// is the set again: the policy's passes over the rest of the batch and the waiting
    /// queue have nothing to do, so their only effect, a fresh shape, is made here.
    /// `false` (nothing changed) for any other step. When the set cannot take the next step
    /// (its growth does not fit), the replica is marked for an ordinary start instead.
    /// The caller has checked that nothing else is due at this instant.
    pub(super) fn quiet_step(&mut self, rep: usize, seq: u64) -> bool {
        let replica = &mut self.replicas[rep];
        let st = &replica.sched;
        let quiet = replica.busy
            && replica.step_seq == seq
            && !replica.steady.in_flight
            && replica.inbox.is_empty()
            && st.waiting.is_empty()
            && st.admission == crate::sched::Admission::Empty
            && st.prefill_items.is_empty()
            && st.preempted.is_empty()
            && replica.set.quiet(st)
            && !self.options.record_steps
            && !self.unpriced_steps;
        if !quiet {
            return false;
        }
        replica.busy = false;
        replica.step_seq = 0;
        replica.set.quiet += 1;
        replica.set.complete(&mut replica.sched, &mut self.reqs, &mut replica.outstanding_tokens, &mut self.set_done);
        debug_assert!(self.set_done.is_empty(), "no member of a quiet step finishes");
        if let Some(l) = self.lot.as_mut() {
            l.touch(rep); // its outstanding tokens changed
        }
        let budget = self.pool_params[self.pool_of[rep] as usize].budget;
        let st = &mut replica.sched;
        if !replica.set.advance(st, &mut self.reqs, budget) {
            self.mark(rep);
            return true;
        }
        st.shape = replica.set.shape();
        st.shape_dirty = false;
        self.apc.now_ns = self.now_ns;
        self.note_out_of_memory(rep);
        self.launch(rep, false);
        true
    }

    /// The next step's plan on `rep`: the steady decode run's next step when it may go on
    /// (`Some(true)`, lazy), else the policy's plan (`Some(false)`), or `None` when the
    /// policy plans nothing.
    fn plan_step(&mut self, rep: usize, now: u64) -> Option<bool> {
        let pool = self.pool_of[rep] as usize;
        let set_on = self.steady_ok
            && crate::engine::decode_set::allowed(&self.pool_params[pool], self.replicas[rep].sched.kv.mode, self.apc.offload.is_some())
            && self.fabric.as_ref().is_none_or(|f| rep >= f.prefill_replicas);
        if set_on {
            return self.plan_with_set(rep, now);
        }
        let replica = &mut self.replicas[rep];
        let st = &mut replica.sched;
        let lazy = replica.steady.left > 0
            && (st.waiting.is_empty() || replica.steady.waiting_ok)
            && replica.steady.advance(st, &mut self.reqs);
        if !lazy {
            replica.steady.settle(st, &mut self.reqs, &mut self.apc);
            replica.steady.left = 0;
            self.apc.now_ns = now;
            st.schedule(&self.pool_params[self.pool_of[rep] as usize], &mut self.reqs, &mut self.apc, now);
            if let Some(off) = self.apc.offload.as_deref_mut() {
                self.wakes.extend(off.wakes.drain(..).map(Reverse));
            }
            if st.plan.is_empty() {
                return None;
            }
            st.settle_shape(&self.reqs);
            if self.lora.is_some() {
                st.count_loras(&self.reqs);
            }
            // Not on prefill replicas of `disagg`: their completions hand requests off.
            if self.steady_ok && self.fabric.as_ref().is_none_or(|f| rep >= f.prefill_replicas) {
                replica.steady.open(st, &self.reqs);
            }
        }
        Some(lazy)
    }

    /// [`Engine::plan_step`] where a lazy decode set may lead the batch
    /// ([`crate::engine::decode_set`]): the set's step when it has one (the policy then
    /// schedules only the rest), else the policy's whole plan. `Some(false)`: the step made
    /// its prefix-cache lookups like any scheduled step.
    fn plan_with_set(&mut self, rep: usize, now: u64) -> Option<bool> {
        let params = self.pool_params[self.pool_of[rep] as usize];
        let replica = &mut self.replicas[rep];
        let st = &mut replica.sched;
        let lazy = replica.set.advance(st, &mut self.reqs, params.budget);
        if !lazy {
            replica.set.dissolve(&mut self.reqs);
        }
        let s = replica.set.len();
        self.apc.now_ns = now;
        st.schedule_from(s, &params, &mut self.reqs, &mut self.apc, now);
        if st.plan.is_empty() {
            return None;
        }
        st.settle_shape_from(s, &self.reqs);
        if lazy {
            replica.set.add_shape(st);
        }
        Some(false)
    }

    /// Set the latency of one scheduling decision (o1pro; see [`Engine::decision_exposed_ns`]).
    pub(crate) fn set_decision_latency_ns(&mut self, ns: u64) {
        self.decision_ns = ns;
    }

    /// The part of a scheduling decision of `decision_ns` that delays a step starting at
    /// `now` on a replica whose last step ended at `last_end_ns` after `last_dur_ns` (seed §2.2, §3.3): with async dispatch the next decision is made
    /// while the current step runs, so it is hidden when the step starts back to back with
    /// the previous one and that one lasted at least as long as the decision; after an idle
    /// gap (or behind a shorter step) the GPU waits for it.
    #[inline]
    fn decision_exposed_ns(decision_ns: u64, last_end_ns: u64, last_dur_ns: u64, now: u64) -> u64 {
        if decision_ns == 0 || (last_end_ns == now && last_dur_ns >= decision_ns) {
            0
        } else {
            decision_ns
        }
    }

    /// Apply a completed step: progress, tokens, finishes, freed blocks.
    pub(crate) fn finish_step(&mut self, rep: usize) {
        let now = self.now_ns;
        let replica = &mut self.replicas[rep];
        replica.busy = false;
        let st = &mut replica.sched;
        if replica.steady.in_flight {
            // No token is a first or a last one, no block changes hands ([`crate::engine::steady`]).
            replica.steady.complete(st, &mut replica.outstanding_tokens);
            return;
        }
        self.finished_buf.clear();
        self.first_buf.clear();
        // A lazy decode set led the step: one token each in O(1); its members that produced
        // their last token are finished first, in batch order, as the loop below would.
        let lazy = if replica.set.in_flight { replica.set.len() } else { 0 };
        if lazy > 0 {
            replica.set.complete(st, &mut self.reqs, &mut replica.outstanding_tokens, &mut self.set_done);
        }
        // Hot loop: counters in locals, written back once. The set's members that produced
        // their last token finish first, in batch order, then the rest of the plan.
        let (mut used_slots, mut outstanding, mut done) = (st.used_slots, replica.outstanding_tokens, 0u64);
        for &id in &self.set_done[..if lazy > 0 { self.set_done.len() } else { 0 }] {
            let r = &mut self.reqs[id as usize];
            finish_request(r, &mut st.kv, &mut self.apc, self.scaler.as_deref_mut(), now, &mut used_slots, &mut outstanding);
            done += 1;
            self.finished_buf.push(id);
        }
        #[cfg(test)]
        let guarded = !self.unguarded;
        #[cfg(not(test))]
        let guarded = true;
        let mut spec = self.spec.as_deref_mut();
        for &(id, n) in &st.plan[lazy..] {
            let r = &mut self.reqs[id as usize];
            if guarded && (r.status != Status::Running || r.replica != rep as i32) {
                // Moved off this replica, or already done: this step no longer owns it (a
                // request finishes once, on the replica running it).
                continue;
            }
            // A decode of 1 + k tokens keeps its accepted drafts and the target's own token;
            // the rejected drafts' slots are written again by the next step.
            let mut made = 1;
            let n = match spec.as_deref_mut() {
                Some(sp) if n > 1 && !r.in_prefill() => {
                    made = 1 + sp.accept(id, r.generated, n - 1);
                    made
                }
                _ => n,
            };
            r.computed += n;
            used_slots += n as u64;
            if r.computed < r.num_tokens() {
                continue; // a prefill chunk short of its target
            }
            r.generated += made;
            outstanding = outstanding.saturating_sub(u64::from(made));
            if r.generated == 1 {
                r.first_token_ns = now;
                self.first_buf.push(id);
                if let Some(sc) = self.scaler.as_mut() {
                    sc.on_first_token(now, (now - r.arrival_ns) as f64 / 1e6);
                }
            }
            if r.generated >= r.output {
                finish_request(r, &mut st.kv, &mut self.apc, self.scaler.as_deref_mut(), now, &mut used_slots, &mut outstanding);
                done += 1;
                self.finished_buf.push(id);
            }
        }
        st.used_slots = used_slots;
        replica.outstanding_tokens = outstanding;
        self.done_requests += done;
        if self.apc.offload.is_some() {
            // Write-through: the full blocks this step computed go down to the tiers.
            for &(id, _) in &st.plan {
                let r = &self.reqs[id as usize];
                if r.replica == rep as i32 && matches!(r.status, Status::Running | Status::Finished) {
                    self.apc.offer(&st.kv, r, now);
                }
            }
        }
        let any_token = !self.first_buf.is_empty() || !self.finished_buf.is_empty();
        if !self.client.is_empty() && any_token {
            // a token of this step reaches its client after the front end handled the step's outputs
            let out = self.frontend.output_ns(st.plan.len());
            self.first_buf.iter().for_each(|&id| self.client[id as usize].out_first_ns = out);
            self.finished_buf.iter().for_each(|&id| self.client[id as usize].out_last_ns = out);
        }
        if !self.finished_buf.is_empty() {
            debug_assert!(st.running.iter().all(|&id| (self.reqs[id as usize].status == Status::Running) != self.finished_buf.contains(&id)));
            drop_finished(&mut st.running, &self.finished_buf);
            if self.apc.on || self.sessions.is_some() {
                self.finished(now);
            }
        }
        if self.fabric.as_ref().is_some_and(|f| rep < f.prefill_replicas) {
            self.handoff(rep);
        }
        if self.options.record_steps && self.log_error.is_none() {
            self.record_step(rep, now);
        }
        let replica = &mut self.replicas[rep];
        if self.steady_ok && !replica.steady.in_flight {
            // The requests right after the set that now decode join it (a no-op unless the
            // set is on for this replica: the next plan dissolves it otherwise).
            let params = &self.pool_params[self.pool_of[rep] as usize];
            if crate::engine::decode_set::allowed(params, replica.sched.kv.mode, self.apc.offload.is_some())
                && self.fabric.as_ref().is_none_or(|f| rep >= f.prefill_replicas)
            {
                replica.set.join(&replica.sched, &self.reqs, &self.apc, params.budget);
            }
        }
    }

    /// Add the completed step to the recorded step log (`record_steps`). The log's size is
    /// not known in advance: it may use half the memory limit, and its growth is a fallible
    /// allocation (a `ResourceError`, never an abort).
    fn record_step(&mut self, rep: usize, now: u64) {
        let replica = &self.replicas[rep];
        let st = &replica.sched;
        let bytes = std::mem::size_of::<StepRecord>()
            + 8 * st.plan.len()
            + 4 * (st.preempted.len() + self.finished_buf.len())
            + std::mem::size_of_val(st.admitted_hits.as_slice())
            + 8 * st.prefill_items.len();
        self.log_bytes = self.log_bytes.saturating_add(bytes as u64);
        let len = self.steps_log.len();
        let grown = if len == self.steps_log.capacity() {
            crate::limits::try_reserve(&mut self.steps_log, len.max(64), "record_steps", "the step log")
        } else {
            Ok(())
        };
        if let Err(e) = grown {
            self.log_error = Some(e);
        } else if self.log_bytes > self.log_limit_bytes {
            self.log_error = Some(SimError::resource(
                "record_steps",
                format!(
                    "the recorded step log passed {} (half of limits.max_memory_gib) after {} steps: record the \
                     steps of a shorter run, or raise limits.max_memory_gib",
                    crate::limits::bytes_text(self.log_limit_bytes),
                    self.steps_log.len()
                ),
            ));
        } else {
            self.steps_log.push(StepRecord {
                replica: rep as u32,
                start_ms: replica.step_start_ns as f64 / 1e6,
                end_ms: now as f64 / 1e6,
                scheduled: st.plan.clone(),
                preempted: st.preempted.clone(),
                finished: self.finished_buf.clone(),
                free_blocks_after: st.kv.free_units() as u64,
                cached: st.admitted_hits.clone(),
                shape: crate::metrics::StepShape {
                    prefill: st.prefill_items.iter().map(|p| (p.new_tokens, p.context_before)).collect(),
                    decode_seqs: st.shape.decode_seqs,
                    decode_context_sum: st.shape.decode_ctx,
                    context_sum_after: st.shape.ctx_after,
                    sampled: st.shape.sampled,
                    decode_blocks_1024: st.shape.decode_blocks_1024,
                    spec_tokens: st.shape.spec_tokens,
                    lora_adapters: st.shape.lora_adapters,
                    comm_ms: replica.last_comm_s * 1e3,
                    decision_ms: replica.last_decision_ns as f64 / 1e6,
                },
            });
        }
    }
}

/// Take the requests this step `finished` out of `running`. They are exactly the requests of
/// `running` not running any more (a timeout, a hand-off or a preemption takes its request
/// out of `running` at once), and they come in `running`'s order (the set's members first,
/// then the rest of the plan, whose running requests precede its admissions): each is
/// searched for after the last, and the stretches between them slide down, without reading
/// any request (a cache miss each on a large batch) or visiting the running one by one.
/// Any not met in that order are dropped by a second pass.
fn drop_finished(running: &mut Vec<u32>, finished: &[u32]) {
    let (mut read, mut write, mut k) = (0, 0, 0);
    while let Some(&id) = finished.get(k) {
        let Some(off) = position_u32(&running[read..], id) else { break };
        running.copy_within(read..read + off, write);
        write += off;
        read += off + 1;
        k += 1;
    }
    let len = running.len();
    running.copy_within(read..len, write);
    running.truncate(write + len - read);
    if k < finished.len() {
        let mut rest = finished[k..].to_vec();
        rest.sort_unstable();
        running.retain(|id| rest.binary_search(id).is_err());
    }
}

/// The first position of `x` in `hay`: sixteen at a time without an early exit inside a
/// group, so the comparisons vectorize.
#[inline]
fn position_u32(hay: &[u32], x: u32) -> Option<usize> {
    let mut groups = hay.chunks_exact(16);
    let mut base = 0;
    for g in &mut groups {
        if g.iter().fold(false, |any, &y| any | (y == x)) {
            return g.iter().position(|&y| y == x).map(|p| base + p);
        }
        base += 16;
    }
    groups.remainder().iter().position(|&y| y == x).map(|p| base + p)
}

/// A request produced its last token at `now`: free its KV (its blocks stay cached), mark
/// it finished, and take it out of the replica's counters.
#[inline]
fn finish_request(
    r: &mut crate::request::Req,
    kv: &mut crate::kv::KvPool,
    apc: &mut crate::kv::prefix::Apc,
    scaler: Option<&mut crate::scaling::Autoscaler>,
    now: u64,
    used_slots: &mut u64,
    outstanding: &mut u64,
) {
    apc.release(kv, r, None);
    r.blocks = Vec::new(); // a finished request keeps no allocation
    *used_slots = used_slots.saturating_sub(r.computed as u64);
    r.status = Status::Finished;
    r.finish_ns = now;
    if let Some(sc) = scaler {
        sc.on_finish(now, (now - r.arrival_ns) as f64 / 1e6);
    }
    *outstanding = outstanding.saturating_sub(r.prompt as u64);
}

/// The planned step of `st` on replica `rep` priced: its duration in ns (clamped so that
/// nanosecond sums stay far from `u64::MAX`; a step this long ends the run at the time
/// horizon anyway) and the communication the topology added, s.
/// The `ResourceError` of a KV pool whose free list could not grow for units handed out
/// for the first time (`field` sized the pools).
#[cold]
pub(super) fn kv_out_of_memory(kv: &crate::kv::KvPool, field: &str) -> SimError {
    crate::limits::out_of_memory(
        field,
        crate::limits::kv_pool_bytes(kv.issued(), kv.caching()),
        &format!("the free list of a replica's KV pool of {} blocks ({} of them used so far)", kv.total(), kv.issued()),
    )
}

fn price_step(perf: &StepCostModel, memo: &mut StepMemo, fabric: Option<&mut Fabric>, rep: usize, st: &SchedState) -> (u64, f64) {
    let sh = st.shape;
    let shape = BatchShape {
        prefill: &st.prefill_items,
        prefill_tokens: sh.prefill_tokens,
        decode_seqs: sh.decode_seqs,
        decode_context_sum: sh.decode_ctx,
        context_sum_after: sh.ctx_after,
        sampled: sh.sampled,
        decode_blocks_1024: sh.decode_blocks_1024,
        spec_tokens: sh.spec_tokens,
        lora_adapters: sh.lora_adapters,
    };
    let mut comm_s = 0.0;
    let dur = match fabric {
        None => perf.step_ns_memo(&shape, memo),
        Some(f) if perf.stages() > 1 => {
            let mb = perf.micro_batches(&shape);
            let (ar, x) = f.step_comm_pipeline(rep, sh.tokens, mb);
            comm_s = ar * f64::from(mb) + x;
            perf.step_ns_pipeline(&shape, mb, ar, x)
        }
        Some(f) if perf.dp() > 0 => {
            // DP/EP: one rank's tokens over its own TP group, the exchanges on the group's routes
            let rank_tokens = sh.tokens.div_ceil(u64::from(perf.dp().max(1)));
            comm_s = f.step_comm_s(rep, rank_tokens);
            let a2a = f.ep_a2a(rep).map(|e| crate::perf::ep::A2aCosts {
                high_throughput: e.high_throughput,
                low_latency: e.low_latency,
                allgather: e.allgather,
            });
            perf.step_ns_ep(&shape, comm_s, a2a.as_ref())
        }
        Some(f) => {
            comm_s = f.step_comm_s(rep, sh.tokens);
            perf.step_ns_plus(&shape, comm_s)
        }
    }
    .clamp(1, MAX_TIME_NS);
    (dur, comm_s)
}

/// A started step's metrics on its replica (KV state as allocated for it): counters, KV use
/// and fragmentation weighted by the step's duration, and the time series. A lazy (steady)
/// step made no prefix-cache lookups.
fn record_step_metrics(replica: &mut Replica, now: u64, dur: u64, lazy: bool) {
    let st = &replica.sched;
    let sh = st.shape;
    let tokens = sh.tokens as u32;
    let total = st.kv.total().max(1) as f64;
    let used_units = st.kv.used_units();
    let kv_usage = used_units as f64 / total;
    let s = &mut replica.stats;
    s.steps += 1;
    s.busy_ns = s.busy_ns.saturating_add(dur);
    s.kv_usage_ns += kv_usage * dur as f64;
    s.kv_peak = s.kv_peak.max(kv_usage);
    s.prefill_tokens += sh.prefill_tokens;
    s.decode_tokens += sh.decode_seqs;
    s.max_batch = s.max_batch.max(st.plan.len() as u32);
    s.batch_sum += st.plan.len() as u64;
    let (queries, hits) = if lazy { (0, 0) } else { (st.step_queries, st.step_hits) };
    s.prefix_queries += queries;
    s.prefix_hits += hits;
    let reserved_slots = used_units as u64 * st.kv.block_size as u64;
    if reserved_slots > 0 {
        let used = (st.used_slots + tokens as u64).min(reserved_slots);
        s.frag_ns += (1.0 - used as f64 / reserved_slots as f64) * dur as f64;
        s.frag_weight_ns += dur as f64;
    }
    replica.series.record(&StepSample {
        start_ns: now,
        dur_ns: dur,
        batch: st.plan.len() as u32,
        tokens,
        kv_usage,
        waiting: st.waiting.len() as u32,
        running: st.running.len() as u32,
        prefix_queries: queries,
        prefix_hits: hits,
    });
}

#[cfg(test)]
mod tests {
    use super::{drop_finished, position_u32};

    /// Running batches of 0–300 distinct ids; finished subsets in running's order (the
    /// merge) and shuffled (the second pass): what is left is running minus finished, in
    /// running's order.
    #[test]
    fn finished_requests_leave_running_in_order_whatever_their_order() {
        let mut rng = crate::rng::SimRng::new(11);
        for case in 0..3000u32 {
            let n = (case % 301) as usize;
            let running: Vec<u32> = (0..n as u32).map(|i| i * 7 + (case & 3)).collect();
            let finished: Vec<u32> = running.iter().copied().filter(|_| rng.uniform() < [0.02, 0.1, 0.5, 1.0][(case % 4) as usize]).collect();
            let mut shuffled = finished.clone();
            if case % 3 == 0 {
                for i in (1..shuffled.len()).rev() {
                    shuffled.swap(i, rng.range_u32(0, i as u32) as usize);
                }
            }
            let want: Vec<u32> = running.iter().copied().filter(|id| !finished.contains(id)).collect();
            let mut got = running.clone();
            drop_finished(&mut got, &shuffled);
            assert_eq!(got, want, "case {case}: {n} running, {} finished", finished.len());
        }
    }

    #[test]
    fn position_is_the_first_match_in_every_group_and_the_tail() {
        let hay: Vec<u32> = (0..53).map(|i| i % 40).collect();
        for x in 0..45 {
            assert_eq!(position_u32(&hay, x), hay.iter().position(|&y| y == x), "{x}");
        }
    }
}
