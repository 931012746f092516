//! The event loop: one instant at a time (step completions, fabric events, client
//! timeouts, autoscaler timers, arrivals, then the router and idle replicas), and the end
//! of a run (done, or stalled with a typed error).

use std::cmp::Reverse;

use super::{Engine, InvariantObserver};
use crate::error::{Result, SimError};
use crate::perf::StepCostModel;
use crate::request::{Reason, MAX_TIME_NS};

impl Engine {
    /// Is every request finished or rejected?
    pub fn is_done(&self) -> bool {
        self.done_requests == self.reqs.len() as u64
    }

    /// Advance through at most `max_events` events (step completions and arrivals, each
    /// counted once). Returns `true` when the run is complete.
    pub fn run_events(&mut self, max_events: u64) -> Result<bool> {
        let mut budget = max_events;
        while budget > 0 {
            // Once every request finished or was rejected, only the steps in flight complete
            // (their GPU work was launched; a client that timed out mid-step gets nothing
            // from it): topology events that remain are reported as not reached, never
            // applied.
            let done = self.is_done();
            if done && self.heap.is_empty() {
                break;
            }
            if self.done_requests >= self.pause_at_done {
                break; // a progress report is due; the next call goes on from here
            }
            if !done {
                if let Some(used) = self.lone_completion()? {
                    budget = budget.saturating_sub(used);
                    continue;
                }
            }
            let Some(next) = self.next_instant(done)? else { break };
            budget = budget.saturating_sub(self.instant(next, done)?);
        }
        self.settle_steady();
        if self.is_done() {
            return Ok(true);
        }
        self.end_when_nothing_can_happen()
    }

    /// When the next instant is and what is due at it; `None` when nothing is left to
    /// happen. An error past the time horizon.
    fn next_instant(&mut self, done: bool) -> Result<Option<Instant>> {
        let t_arr = self.next_arrival_ns();
        let t_step = self.heap.peek().map(|Reverse((t, _, _))| *t);
        let t_fab = if done { None } else { self.fabric.as_ref().and_then(|f| f.next_time()) };
        let t_due = self.next_deadline_ns();
        let t_wake = if done { None } else { self.wakes.peek().map(|Reverse((t, _))| *t) };
        // The earliest of those present (a fold over the five options by hand: the iterator
        // chain spilled them to the stack every instant, 5% of a one-replica run).
        let earliest = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, None) | (None, x) => x,
        };
        let Some(t) = earliest(earliest(earliest(t_arr, t_step), earliest(t_fab, t_due)), t_wake) else { return Ok(None) };
        // The autoscaler's timers only while requests remain and something else will
        // happen within the horizon (they alone never keep a finished or stalled run
        // going, nor tick for 10⁹ s towards a step that ends beyond it).
        let now = self.now_ns;
        let t_scale = match &self.scaler {
            // A decision due while the clock jumped over an idle gap happens now.
            Some(sc) if !done && t <= MAX_TIME_NS => sc.next_time().map(|x| x.max(now)),
            _ => None,
        };
        let t = t_scale.map_or(t, |x| t.min(x));
        if t > MAX_TIME_NS {
            // A time at the clock's ceiling is a cost that saturated, not a moment to print.
            let when = if t >= u64::MAX / 2 { "beyond any time the clock holds".to_string() } else { format!("at {:.3e} s", t as f64 / 1e9) };
            return Err(SimError::Stalled {
                message: format!(
                    "simulated time would pass 10^9 s (the next event is {when}) with {} request(s) unfinished at \
                     {:.3e} s: a rate, latency or cost in the scenario is outside any realistic range",
                    self.unfinished(),
                    now as f64 / 1e9
                ),
            });
        }
        Ok(Some(Instant { t, deadlines: t_due == Some(t), scaling: t_scale == Some(t) }))
    }

    /// The next instant when it holds one step completion and nothing else (no other
    /// completion, arrival, deadline, wake-up, router queue, topology, autoscaler, session or
    /// observer): handled as [`Engine::instant`] would, without its general machinery, and a
    /// quiet step ([`Engine::quiet_step`]) in O(1). `None` (nothing changed) otherwise.
    fn lone_completion(&mut self) -> Result<Option<u64>> {
        if self.fabric.is_some()
            || self.scaler.is_some()
            || self.observer.is_some()
            || self.sessions.is_some()
            || !self.dispatch.is_empty()
            || !self.wakes.is_empty()
        {
            return Ok(None);
        }
        let Some(&Reverse((t, seq, rep))) = self.heap.peek() else { return Ok(None) };
        if t > MAX_TIME_NS || self.next_arrival_ns().is_some_and(|a| a <= t) || self.next_deadline_ns().is_some_and(|d| d <= t) {
            return Ok(None);
        }
        // The entry is the one peeked: its value is not read back from `pop` (a stall on the
        // returned copy), and a lone entry (one replica) is dropped without the call.
        if self.heap.len() == 1 {
            self.heap.clear();
        } else {
            self.heap.pop();
            if self.heap.peek().is_some_and(|Reverse((u, _, _))| *u == t) {
                self.heap.push(Reverse((t, seq, rep))); // completions share the instant: the general path orders them
                return Ok(None);
            }
        }
        self.now_ns = t;
        self.events += 1;
        let rep = rep as usize;
        if !self.quiet_step(rep, seq) {
            self.complete_step(rep, seq);
        }
        let kicked = self.kick_idle();
        if let Some(e) = self.log_error.take() {
            return Err(e);
        }
        kicked?;
        Ok(Some(1))
    }

    /// Handle everything due at one instant, in the order the module docs give; returns the
    /// events it counted against the caller's budget.
    fn instant(&mut self, next: Instant, done: bool) -> Result<u64> {
        let t = next.t;
        self.now_ns = t;
        let events_before = self.events;
        let mut used = 0u64;
        while let Some(Reverse((ts, seq, rep))) = self.heap.peek().copied() {
            if ts != t {
                break;
            }
            self.heap.pop();
            self.events += 1;
            used += 1;
            if self.complete_step(rep as usize, seq) && self.scaler.is_some() {
                self.check_drained(rep as usize);
            }
        }
        if self.fabric.is_some() && !done {
            self.fabric_instant();
        }
        while let Some(&Reverse((tw, rep))) = self.wakes.peek() {
            if tw > t {
                break;
            }
            self.wakes.pop();
            self.mark(rep as usize);
        }
        if next.deadlines {
            used += self.expire_due(t);
        }
        if next.scaling {
            self.scaling_instant();
        }
        used += self.arrivals_at(t);
        if let Some(sc) = self.scaler.as_mut() {
            if self.events != events_before {
                sc.note_activity(t);
            } else if next.scaling {
                // Only the controller acted: it counts as an event for the caller's budget.
                self.events += 1;
                used += 1;
            }
        }
        self.drain_dispatch();
        let kicked = self.kick_idle();
        // A broken invariant explains a stall that follows from it: report it first (as
        // the model checker does).
        if let Some(e) = self.log_error.take() {
            return Err(e);
        }
        if let Some(observe) = self.observer {
            observe(self).map_err(|m| SimError::Internal {
                message: format!("invariant violated at t = {:.6} ms: {m}", self.now_ns as f64 / 1e6),
            })?;
        }
        kicked?;
        Ok(used)
    }

    /// The loop stopped short of done: if nothing more can happen, what is still in the
    /// router's queue times out, and requests left unfinished are a stall. `Ok(false)`:
    /// events remain (the caller's budget ran out or a progress report is due).
    fn end_when_nothing_can_happen(&mut self) -> Result<bool> {
        let transfers = self.fabric.as_ref().is_some_and(|f| f.transfers_pending());
        let due = self.next_deadline_ns().is_some();
        let more = !self.heap.is_empty() || self.next_arrival_ns().is_some() || transfers || due || !self.wakes.is_empty();
        if more {
            return Ok(self.is_done());
        }
        while let Some(id) = self.dispatch.pop_front() {
            let deadline = self.reqs[id as usize].queued_ns.saturating_add(self.dispatch_timeout_ns);
            self.reject(id, Reason::DispatchQueueFull, deadline);
        }
        if !self.is_done() {
            let stuck = self.unfinished();
            return Err(SimError::Stalled {
                message: format!(
                    "simulation stopped making progress at t = {:.3} ms with {stuck} request(s) unfinished \
                     and no replica able to schedule them",
                    self.now_ns as f64 / 1e6
                ),
            });
        }
        Ok(true)
    }

    /// Requests neither finished nor rejected (counted from their states, so no counter
    /// can disagree with them).
    pub fn unfinished(&self) -> usize {
        self.reqs.iter().filter(|r| !r.status.is_done()).count()
    }

    /// The completion of step `seq` on replica `rep` is due: apply it if that step is still
    /// the one in flight there (see [`Replica::step_seq`]), else ignore it. Returns whether
    /// it applied.
    pub(crate) fn complete_step(&mut self, rep: usize, seq: u64) -> bool {
        let replica = &mut self.replicas[rep];
        #[cfg(test)]
        let stale_ok = self.unguarded;
        #[cfg(not(test))]
        let stale_ok = false;
        if !stale_ok && (!replica.busy || replica.step_seq != seq) {
            return false; // dropped when the replica stopped; its requests moved on
        }
        replica.step_seq = 0;
        if let Some(f) = self.fabric.as_mut() {
            f.end_step(rep);
        }
        self.finish_step(rep);
        self.mark(rep);
        true
    }

    /// Start a step on every marked replica that is idle and has work, in replica order;
    /// replicas marked meanwhile (by the router) are handled in a further round.
    pub(crate) fn kick_idle(&mut self) -> Result<()> {
        while !self.kick.is_empty() {
            let mut batch = std::mem::take(&mut self.kick);
            batch.sort_unstable();
            for &rep in &batch {
                let rep = rep as usize;
                self.kick_flag[rep] = false;
                if !self.replicas[rep].busy {
                    self.try_start(rep)?;
                }
                self.drain_dispatch();
            }
            batch.clear();
            if self.kick.is_empty() {
                self.kick = batch; // keep the allocation
            }
        }
        Ok(())
    }

    /// Start a step on an idle replica if it has work; retry while the scheduler only
    /// preempted (vLLM calls schedule() again); error if it has work but can never run.
    fn try_start(&mut self, rep: usize) -> Result<()> {
        if let Some(l) = self.lot.as_mut() {
            l.touch(rep); // its queue and inbox change now
        }
        self.release_inbox(rep);
        for _attempt in 0..4 {
            let st = &self.replicas[rep].sched;
            if st.waiting.is_empty() && st.running.is_empty() {
                return Ok(());
            }
            if self.start_step(rep) {
                return Ok(());
            }
            if self.replicas[rep].sched.preempted.is_empty() {
                break;
            }
        }
        let st = &self.replicas[rep].sched;
        if st.kv.out_of_memory {
            return Err(super::step::kv_out_of_memory(&st.kv, self.kv_field));
        }
        let now = self.now_ns;
        if self.apc.offload.as_ref().is_some_and(|o| st.waiting.iter().any(|id| o.loading(id, now))) {
            // Its requests wait for tier loads: the end of each wakes it.
            return Ok(());
        }
        Err(SimError::Stalled {
            message: format!(
                "replica {rep} is idle with {} waiting and {} running request(s) but schedules nothing at t = {:.3} ms",
                st.waiting.len(),
                st.running.len(),
                self.now_ns as f64 / 1e6
            ),
        })
    }

    /// Move the inbox's requests whose wait is over into the scheduler's waiting queue: those
    /// that arrived before the last step started, or all of them when the replica has
    /// nothing else to run.
    fn release_inbox(&mut self, rep: usize) {
        let replica = &mut self.replicas[rep];
        if replica.inbox.is_empty() {
            return;
        }
        let steps = replica.stats.steps;
        let st = &mut replica.sched;
        let all = st.waiting.is_empty() && st.running.is_empty();
        let reqs = &mut self.reqs;
        let params = &self.pool_params[self.pool_of[rep] as usize];
        replica.inbox.retain(|&(id, order, step)| {
            if all || steps > step {
                st.enqueue(params, &mut reqs[id as usize], order);
                false
            } else {
                true
            }
        });
    }

    /// Apply every replica's owed steady steps to its requests ([`crate::engine::steady`]), so that
    /// whoever reads the requests next sees them current.
    pub(crate) fn settle_steady(&mut self) {
        for replica in &mut self.replicas {
            replica.steady.settle(&mut replica.sched, &mut self.reqs, &mut self.apc);
            replica.set.settle(&mut self.reqs);
        }
    }

    /// Replica `rep` stops: its step in flight, if any, will never complete (its heap entry
    /// stays and is ignored when due, [`Engine::complete_step`]).
    pub(crate) fn drop_step(&mut self, rep: usize) {
        let replica = &mut self.replicas[rep];
        replica.step_seq = 0;
        replica.busy = false;
        if let Some(f) = self.fabric.as_mut() {
            f.end_step(rep);
        }
    }

    /// Forget in-flight bookkeeping (pending completions, replicas marked for a step) so
    /// the model checker can load a state into this engine.
    pub(crate) fn reset_transient(&mut self) {
        self.heap.clear();
        self.replicas.iter_mut().for_each(|r| {
            r.steady.reset();
            r.set.reset();
        });
        self.kick.clear();
        self.kick_flag.iter_mut().for_each(|f| *f = false);
        self.lot = None;
    }

    /// The execution-time model pricing this engine's steps, its first pool's (the model
    /// checker times counterexample replays with it; `examples/price_only.rs` prices a
    /// recorded run's steps again with it).
    pub fn perf(&self) -> &StepCostModel {
        &self.perfs[0]
    }

    /// Check the state after every instant with `observe` (replacing any earlier one).
    pub fn set_invariant_observer(&mut self, observe: InvariantObserver) {
        self.observer = Some(observe);
    }
}

/// The next instant of the event loop: its time, and whether client deadlines and the
/// autoscaler's timer are due at it.
#[derive(Debug, Clone, Copy)]
struct Instant {
    t: u64,
    deadlines: bool,
    scaling: bool,
}
