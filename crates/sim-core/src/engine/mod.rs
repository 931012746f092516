//! The discrete-event engine: arrivals, a router, replicas stepping their scheduler, the
//! execution-time model pricing each step, and metrics.
//!
//! Time is integer nanoseconds. Events are ordered by `(time, kind rank, insertion seq)`:
//! at one instant all step completions are handled first (replica order), then KV
//! transfers and topology events, then client timeouts (deadline, then id order), then all
//! arrivals (id order; a session's later turns arrive when sent, see [`crate::client`]),
//! then the router's queue is drained, then every idle replica with work starts its next
//! step. So arrivals join at step boundaries, an idle engine starts at the next arrival,
//! and a request finishing exactly at its deadline counts as finished.

mod client;
mod disagg;
mod scaling;
pub(crate) mod sessions;
pub(crate) mod steady;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::config::Scenario;
use crate::error::{Result, SimError};
use crate::kv::{o1pro_block_size, KvMode, KvPool};
use crate::metrics::{ReplicaStats, Series, StepRecord, StepSample};
use crate::perf::{BatchShape, StepCostModel};
use crate::kv::prefix::Apc;
use crate::request::{Client, Reason, Req, Status, MAX_TIME_NS, NO_TIME};
use crate::sched::{Params, SchedState};
use crate::workload::Workload;
use sessions::Sessions;
use steady::Steady;

/// Options of one run that are not part of the scenario.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimOptions {
    /// Keep a record of every scheduler step (for tests and debugging; costs memory).
    pub record_steps: bool,
    /// Check the model checker's state invariants after every instant and stop with an
    /// `InternalError` naming the property at the first violation (replaying a
    /// counterexample; tests). Off by default: it costs O(requests) per instant.
    pub check_invariants: bool,
}

/// A check of the engine's state after each instant, set by whoever builds the engine
/// ([`crate::api`] plugs in the model checker's invariants when
/// [`SimOptions::check_invariants`] is on). The engine only calls it, so it depends on no
/// checker; the error is `property: what is wrong`.
pub type InvariantObserver = fn(&Engine) -> std::result::Result<(), String>;

/// One model replica.
pub struct Replica {
    pub sched: SchedState,
    pub busy: bool,
    /// Identity (heap sequence number) of the step in flight, 0 when none. A completion
    /// applies only to the step it was scheduled for: the completion of a step dropped when
    /// the replica stopped (the replica may have restarted and be running another step, or
    /// be idle with an old plan) finds another identity here and is ignored.
    pub step_seq: u64,
    pub step_start_ns: u64,
    /// Σ (prompt + output − generated) over unfinished requests dispatched here.
    pub outstanding_tokens: u64,
    pub series: Series,
    pub stats: ReplicaStats,
    /// Steady decode steps applied lazily ([`crate::steady`]).
    pub(crate) steady: Steady,
    /// Async scheduling: requests that reached the replica while a step was running, with
    /// their queue order and that step's number ([`ReplicaStats::steps`]); they join the
    /// waiting queue once a later step has started (the step after the running one was
    /// already scheduled), or at once when the replica would otherwise have nothing to run.
    pub(crate) inbox: Vec<(u32, i64, u64)>,
    /// When the last step ended and how long it ran, ns: a scheduling decision made while
    /// it ran (async dispatch) is hidden if the next step starts as it ends.
    pub(crate) last_end_ns: u64,
    pub(crate) last_dur_ns: u64,
    /// What the step in flight added to the cost model's price: communication priced on
    /// the topology (s) and exposed decision latency (ns); kept for its [`StepRecord`].
    pub(crate) last_comm_s: f64,
    pub(crate) last_decision_ns: u64,
}

/// Router policies (defined with their names in [`crate::policy`]).
pub use crate::policy::Router;

/// The state of a running simulation.
pub struct Engine {
    pub reqs: Vec<Req>,
    /// Ids of the requests sent at a fixed time, in arrival order.
    pub(crate) arrival_order: Vec<u32>,
    pub(crate) next_arrival: usize,
    pub replicas: Vec<Replica>,
    pub(crate) params: Params,
    perf: StepCostModel,
    pub(crate) router: Router,
    pub(crate) rr_next: usize,
    pub(crate) max_waiting: Option<u32>,
    pub(crate) dispatch_timeout_ns: u64,
    pub(crate) dispatch: VecDeque<u32>,
    max_model_len: u32,
    /// Pending step completions: (time, seq, replica).
    heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
    seq: u64,
    pub now_ns: u64,
    pub(crate) order_counter: i64,
    pub events: u64,
    pub done_requests: u64,
    options: SimOptions,
    /// Called after every instant; an error stops the run with an `InternalError`.
    observer: Option<InvariantObserver>,
    pub steps_log: Vec<StepRecord>,
    pub(crate) finished_buf: Vec<u32>,
    /// Requests that produced their first token in the step being completed.
    first_buf: Vec<u32>,
    /// Replicas whose state changed at this instant (a step ended, a request was queued)
    /// and that must be offered a new step; `kick_flag` dedups.
    kick: Vec<u32>,
    kick_flag: Vec<bool>,
    /// The topology side (only with a `topology` section): routes, collectives, events,
    /// KV transfers ([`crate::fabric`]).
    pub(crate) fabric: Option<Box<crate::fabric::Fabric>>,
    /// Round-robin cursor over decode replicas (`disagg`).
    pub(crate) rr_decode: usize,
    /// Steady decode steps may run lazily ([`crate::steady`]); off when every step is
    /// recorded or checked, and for the model checker (it drives steps itself).
    pub(crate) steady_ok: bool,
    /// Start steps without pricing them (no duration, step metrics or completion event):
    /// the model checker, which explores every completion order itself, sets it.
    pub(crate) unpriced_steps: bool,
    /// Prefix caching: token identity of the prompts, block hashes, per-request cache
    /// state ([`crate::kv::prefix`]).
    pub(crate) apc: Apc,
    /// Closed-loop sessions: which request waits for which ([`crate::client`]); `None`
    /// when no request does.
    pub(crate) sessions: Option<Box<Sessions>>,
    /// Session turns already sent, by send time then id.
    pub(crate) sent: BinaryHeap<Reverse<(u64, u32)>>,
    /// `workload.timeout_s` in ns, if set.
    pub(crate) timeout_ns: Option<u64>,
    /// Client deadlines (deadline, id) of arrived requests; entries of requests already
    /// done are dropped when they reach the top.
    pub(crate) deadlines: BinaryHeap<Reverse<(u64, u32)>>,
    /// The serving front end between clients and the engine ([`crate::frontend`]).
    pub(crate) frontend: crate::frontend::Frontend,
    /// Per request id, what the front end adds to its times; empty without a front end.
    pub(crate) client: Vec<Client>,
    /// vLLM's async scheduling ([`crate::config::SchedulerConfig::async_scheduling`]).
    async_sched: bool,
    /// Bytes of the recorded step log, the most it may hold (half the memory limit), and
    /// why recording stopped (reported by [`Engine::run_events`]).
    log_bytes: u64,
    log_limit_bytes: u64,
    log_error: Option<SimError>,
    /// [`Engine::run_events`] pauses at the end of an instant once this many requests are
    /// done (progress reports; `u64::MAX`: never).
    pub(crate) pause_at_done: u64,
    /// Tests only: switch off the guards that make a second finish impossible (a completion
    /// applies only to its own step; only a running request on the replica progresses), to
    /// show that the model checker catches what they prevent.
    #[cfg(test)]
    pub(crate) unguarded: bool,
    /// The autoscaler (only with a `scaling` section): replica slots join and leave
    /// ([`crate::scaling`]).
    pub(crate) scaler: Option<Box<crate::scaling::Autoscaler>>,
    /// Deepest prompt template admitted (o1pro: 8, seed §4.4); `None`: no check.
    pub(crate) max_template_depth: Option<u16>,
    /// Latency of one scheduling decision (o1pro, seed §3.3), ns; 0 for the other policies
    /// (their decision is part of the step's CPU time). See [`Engine::decision_exposed_ns`].
    pub(crate) decision_ns: u64,
}

impl Engine {
    /// Build an engine from a validated scenario, its cost model, KV pool size and requests.
    pub fn new(
        scenario: &Scenario,
        perf: StepCostModel,
        num_blocks: u32,
        max_model_len: u32,
        workload: Workload,
        options: SimOptions,
    ) -> Engine {
        let Workload { requests: specs, segments } = workload;
        let (params, mode) = Params::for_policy(&scenario.scheduler);
        let bs = scenario.scheduler.block_size;
        let req_block = |prompt: u32, output: u32| {
            if mode == KvMode::PagedPerRequest {
                o1pro_block_size(prompt.saturating_add(output)).max(bs)
            } else {
                bs
            }
        };
        let sessions = Sessions::new(&specs);
        let frontend = scenario.effective_frontend();
        let reqs: Vec<Req> = {
            let mut v: Vec<Req> = specs
                .iter()
                .map(|s| Req {
                    id: s.id,
                    // A session's later turn is sent when its predecessor finishes; the
                    // engine sees a request once the front end has taken it in.
                    arrival_ns: if s.after.is_some() {
                        NO_TIME
                    } else {
                        s.arrival_ns.saturating_add(u64::from(frontend.ingest_ns(s.prompt_tokens)))
                    },
                    prompt: s.prompt_tokens,
                    output: s.output_tokens,
                    priority: s.priority,
                    status: Status::Pending,
                    replica: -1,
                    computed: 0,
                    generated: 0,
                    prefill_target: 0,
                    first_sched_ns: NO_TIME,
                    first_token_ns: NO_TIME,
                    finish_ns: NO_TIME,
                    preemptions: 0,
                    reason: Reason::None,
                    apc_private: false,
                    req_block: req_block(s.prompt_tokens, s.output_tokens),
                    blocks: Vec::new(),
                    order: 0,
                    queued_ns: s.arrival_ns.saturating_add(u64::from(frontend.ingest_ns(s.prompt_tokens))),
                    template_depth: s.template_depth,
                    adversarial: s.adversarial,
                })
                .collect();
            v.sort_by_key(|r| r.id);
            v
        };
        // `specs` come sorted by (arrival, id); the front end's ingest (longer for longer
        // prompts) may reorder them. Session turns that wait for another are sent later.
        let mut arrival_order: Vec<u32> = specs.iter().filter(|s| s.after.is_none()).map(|s| s.id).collect();
        let mut client = Vec::new();
        if !frontend.is_none() {
            sort_nearly_sorted(&mut arrival_order, |&id| (reqs[id as usize].arrival_ns, id));
            client = vec![Client::default(); reqs.len()];
            specs.iter().for_each(|s| client[s.id as usize].ingest_ns = frontend.ingest_ns(s.prompt_tokens));
        }
        let apc = Apc::new(params.apc && mode != KvMode::Contiguous, &specs, segments, |s| {
            req_block(s.prompt_tokens, s.output_tokens)
        });
        let pool = || if apc.on { KvPool::with_prefix_caching(mode, bs, num_blocks) } else { KvPool::new(mode, bs, num_blocks) };
        // Under autoscaling every slot the controller may use exists from the start.
        let slots = scenario.scaling.as_ref().map_or(scenario.deployment.replicas, |s| s.max_replicas);
        let replicas = (0..slots)
            .map(|i| Replica {
                sched: SchedState::new(pool().for_replica(i)),
                busy: false,
                step_seq: 0,
                step_start_ns: 0,
                outstanding_tokens: 0,
                series: Series::default(),
                stats: ReplicaStats::default(),
                steady: Steady::default(),
                inbox: Vec::new(),
                last_end_ns: u64::MAX,
                last_dur_ns: 0,
                last_comm_s: 0.0,
                last_decision_ns: 0,
            })
            .collect();
        Engine {
            reqs,
            arrival_order,
            next_arrival: 0,
            replicas,
            params,
            perf,
            router: scenario.deployment.router,
            rr_next: 0,
            max_waiting: scenario.effective_max_waiting(),
            dispatch_timeout_ns: (scenario.deployment.dispatch_timeout_ms * 1e6).round() as u64,
            dispatch: VecDeque::new(),
            max_model_len,
            heap: BinaryHeap::new(),
            seq: 0,
            now_ns: 0,
            order_counter: 0,
            events: 0,
            done_requests: 0,
            options,
            observer: None,
            steps_log: Vec::new(),
            finished_buf: Vec::new(),
            first_buf: Vec::new(),
            kick: Vec::new(),
            kick_flag: vec![false; slots as usize],
            fabric: None,
            rr_decode: 0,
            steady_ok: !options.record_steps && !options.check_invariants,
            unpriced_steps: false,
            apc,
            sessions,
            sent: BinaryHeap::new(),
            timeout_ns: scenario.workload.timeout_s.map(|t| (t * 1e9).round() as u64),
            deadlines: BinaryHeap::new(),
            frontend,
            client,
            async_sched: scenario.effective_async_scheduling(),
            pause_at_done: u64::MAX,
            log_bytes: 0,
            log_limit_bytes: scenario.limits.memory_bytes() / 2,
            log_error: None,
            #[cfg(test)]
            unguarded: false,
            scaler: None,
            decision_ns: 0,
            max_template_depth: scenario.scheduler.policy.info().o1pro_admission
                .then_some(crate::workload::adversarial::O1PRO_MAX_TEMPLATE_DEPTH),
        }
    }

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
            let t_arr = self.next_arrival_ns();
            let t_step = self.heap.peek().map(|Reverse((t, _, _))| *t);
            let t_fab = if done { None } else { self.fabric.as_ref().and_then(|f| f.next_time()) };
            let t_due = self.next_deadline_ns();
            let Some(t) = [t_arr, t_step, t_fab, t_due].into_iter().flatten().min() else { break };
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
                return Err(SimError::Stalled {
                    message: format!(
                        "simulated time passed 10^9 s ({:.3e} s) with {} request(s) unfinished: a rate, latency \
                         or cost in the scenario is outside any realistic range",
                        t as f64 / 1e9,
                        self.unfinished()
                    ),
                });
            }
            self.now_ns = t;
            let events_before = self.events;
            while let Some(Reverse((ts, seq, rep))) = self.heap.peek().copied() {
                if ts != t {
                    break;
                }
                self.heap.pop();
                self.events += 1;
                budget = budget.saturating_sub(1);
                if self.complete_step(rep as usize, seq) && self.scaler.is_some() {
                    self.check_drained(rep as usize);
                }
            }
            if self.fabric.is_some() && !done {
                self.fabric_instant();
            }
            if t_due == Some(t) {
                budget = budget.saturating_sub(self.expire_due(t));
            }
            if t_scale == Some(t) {
                self.scaling_instant();
            }
            budget = budget.saturating_sub(self.arrivals_at(t));
            if let Some(sc) = self.scaler.as_mut() {
                if self.events != events_before {
                    sc.note_activity(t);
                } else if t_scale == Some(t) {
                    // Only the controller acted: it counts as an event for the caller's budget.
                    self.events += 1;
                    budget = budget.saturating_sub(1);
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
        }
        self.settle_steady();
        if self.is_done() {
            return Ok(true);
        }
        let transfers = self.fabric.as_ref().is_some_and(|f| f.transfers_pending());
        let due = self.next_deadline_ns().is_some();
        if self.heap.is_empty() && self.next_arrival_ns().is_none() && !transfers && !due {
            // Nothing more can happen: whatever is still in the router queue times out.
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
            return Ok(true);
        }
        Ok(self.is_done())
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

    /// Request `id` ends without finishing, at `at_ns`: rejected (or timed out). A
    /// session's later turns are never sent then ([`crate::client`]).
    pub(crate) fn reject(&mut self, id: u32, reason: Reason, at_ns: u64) {
        let r = &mut self.reqs[id as usize];
        if r.status.is_done() {
            return;
        }
        r.status = Status::Rejected;
        r.reason = reason;
        r.finish_ns = at_ns;
        self.done_requests += 1;
        self.forget_cached(id);
        if self.sessions.is_some() {
            self.drop_turns_after(id, at_ns);
        }
    }

    /// Request `id` is done: drop what the prefix cache keeps for its own lookups.
    pub(crate) fn forget_cached(&mut self, id: u32) {
        for rep in self.apc.forget(id) {
            if let Some(c) = self.replicas[rep as usize].sched.kv.cache.as_deref_mut() {
                c.forget(id);
            }
        }
    }

    /// Admission control at arrival, then routing.
    pub(crate) fn arrive(&mut self, id: u32) {
        let r = &self.reqs[id as usize];
        let total = r.prompt as u64 + r.output as u64;
        if total > self.max_model_len as u64 {
            return self.reject(id, Reason::TooLong, self.now_ns);
        }
        // o1pro's admission control (seed §4.4): a template nested deeper than its limit.
        if self.max_template_depth.is_some_and(|d| r.template_depth > d) {
            return self.reject(id, Reason::TemplateDepth, self.now_ns);
        }
        // Never-fit: the most KV the request can ever hold (the last token's KV is never
        // written; Orca reserves prompt + output) must fit an empty pool.
        let pool = &self.replicas[0].sched.kv;
        let max_len = if pool.mode == KvMode::Contiguous { total } else { total - 1 } as u32;
        if pool.units_for(max_len.max(1), r.req_block) > pool.total() {
            return self.reject(id, Reason::KvTooSmall, self.now_ns);
        }
        self.reqs[id as usize].status = Status::Dispatching;
        self.dispatch.push_back(id);
        if let Some(to) = self.timeout_ns {
            // The client's clock: from its send, before the front end's ingest.
            let ingest = self.client.get(id as usize).map_or(0, |c| u64::from(c.ingest_ns));
            let deadline = self.now_ns.saturating_sub(ingest).saturating_add(to);
            self.deadlines.push(Reverse((deadline, id)));
        }
    }

    fn has_room(&self, rep: usize) -> bool {
        let r = &self.replicas[rep];
        self.max_waiting.is_none_or(|m| ((r.sched.waiting.len() + r.inbox.len()) as u32) < m)
            && self.fabric.as_ref().is_none_or(|f| f.alive[rep])
            && self.scaler.as_ref().is_none_or(|s| s.routable(rep))
    }

    /// Replicas arrivals go to: all, or the prefill replicas under `disagg`.
    fn arrival_replicas(&self) -> usize {
        match &self.fabric {
            Some(f) if f.prefill_replicas > 0 => f.prefill_replicas,
            _ => self.replicas.len(),
        }
    }

    /// The replica the router picks for request `id`, among those with queue room.
    fn pick_replica(&mut self, id: u32) -> Option<usize> {
        let n = self.arrival_replicas();
        if self.router == Router::TopologyAware && self.fabric.is_some() {
            return self.pick_by_links(id, n);
        }
        match self.router {
            Router::RoundRobin => {
                for k in 0..n {
                    let rep = (self.rr_next + k) % n;
                    if self.has_room(rep) {
                        self.rr_next = (rep + 1) % n;
                        return Some(rep);
                    }
                }
                None
            }
            Router::LeastOutstandingTokens | Router::TopologyAware => (0..n)
                .filter(|&i| self.has_room(i))
                .min_by_key(|&i| (self.replicas[i].outstanding_tokens, i)),
        }
    }

    /// The topology-aware router: the replica that would finish its outstanding work plus
    /// this request soonest, each replica's pace taken from a step of this request's prompt
    /// priced on its own links as they are now (degraded, down, or shared with other
    /// replicas' steps and KV transfers; [`crate::fabric::Fabric::probe_comm_s`]):
    /// `(outstanding tokens + this request's) × (compute + its communication)`. The compute
    /// part is the same on every replica, so with identical links this is
    /// least-outstanding-tokens (exact ties fall back to it, then to the replica index).
    fn pick_by_links(&mut self, id: u32, n: usize) -> Option<usize> {
        let r = &self.reqs[id as usize];
        let need = u64::from(r.prompt) + u64::from(r.output);
        // The reference step: this prompt joining a batch of the replicas' mean running
        // requests (one size for all replicas, so that only their links tell them apart).
        let running: usize = (0..n).map(|i| self.replicas[i].sched.running.len()).sum();
        let m = (r.prompt as usize + running / n.max(1)).clamp(1, 65_536) as u32;
        let item = [crate::perf::PrefillItem { new_tokens: m, context_before: 0 }];
        let shape = BatchShape {
            prefill: &item,
            prefill_tokens: u64::from(m),
            decode_seqs: 0,
            decode_context_sum: 0,
            context_sum_after: u64::from(m),
            sampled: 1,
            decode_blocks_1024: 0,
        };
        let compute_s = self.perf.step_ns_plus(&shape, 0.0) as f64 * 1e-9;
        let mut best: Option<(f64, u64, usize)> = None;
        for i in 0..n {
            if !self.has_room(i) {
                continue;
            }
            let comm_s = self.fabric.as_mut().map_or(0.0, |f| f.probe_comm_s(i, f64::from(m)));
            let out = self.replicas[i].outstanding_tokens;
            let key = ((out + need) as f64 * (compute_s + comm_s), out, i);
            if best.is_none_or(|b| key.0.total_cmp(&b.0).then(key.1.cmp(&b.1)).then(key.2.cmp(&b.2)).is_lt()) {
                best = Some(key);
            }
        }
        best.map(|b| b.2)
    }

    /// Move requests from the router's queue to replicas while there is room; requests
    /// that waited past the timeout are rejected at their deadline. Room only appears at
    /// step boundaries, where this runs, so the lazy check is exact.
    pub(crate) fn drain_dispatch(&mut self) {
        while let Some(&id) = self.dispatch.front() {
            let deadline = self.reqs[id as usize].queued_ns.saturating_add(self.dispatch_timeout_ns);
            if self.now_ns > deadline {
                self.dispatch.pop_front();
                self.reject(id, Reason::DispatchQueueFull, deadline);
                continue;
            }
            let Some(rep) = self.pick_replica(id) else { break };
            self.dispatch.pop_front();
            self.order_counter += 1;
            let order = self.order_counter;
            let replica = &mut self.replicas[rep];
            let r = &mut self.reqs[id as usize];
            r.replica = rep as i32;
            replica.outstanding_tokens += (r.prompt + r.output) as u64;
            if self.async_sched && replica.busy {
                // the next step was scheduled when the running one started
                r.status = Status::Waiting;
                replica.inbox.push((id, order, replica.stats.steps));
            } else {
                replica.sched.enqueue(&self.params, r, order);
            }
            self.mark(rep);
        }
    }

    /// Offer `rep` a new step at this instant.
    pub(crate) fn mark(&mut self, rep: usize) {
        if !self.kick_flag[rep] {
            self.kick_flag[rep] = true;
            self.kick.push(rep as u32);
        }
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
        let params = &self.params;
        replica.inbox.retain(|&(id, order, step)| {
            if all || steps > step {
                st.enqueue(params, &mut reqs[id as usize], order);
                false
            } else {
                true
            }
        });
    }

    /// Apply every replica's owed steady steps to its requests ([`crate::steady`]), so that
    /// whoever reads the requests next sees them current.
    pub(crate) fn settle_steady(&mut self) {
        for replica in &mut self.replicas {
            replica.steady.settle(&mut replica.sched, &mut self.reqs, &mut self.apc);
        }
    }

    /// Ask the policy for a plan (or continue a steady decode run), price it, schedule its
    /// completion. `false` if empty.
    fn start_step(&mut self, rep: usize) -> bool {
        let now = self.now_ns;
        let replica = &mut self.replicas[rep];
        let st = &mut replica.sched;
        let lazy = replica.steady.left > 0
            && (st.waiting.is_empty() || replica.steady.waiting_ok)
            && replica.steady.advance(st, &mut self.reqs);
        if !lazy {
            replica.steady.settle(st, &mut self.reqs, &mut self.apc);
            replica.steady.left = 0;
            st.schedule(&self.params, &mut self.reqs, &mut self.apc, now);
            if st.plan.is_empty() {
                return false;
            }
            st.settle_shape(&self.reqs);
            // Not on prefill replicas of `disagg`: their completions hand requests off.
            if self.steady_ok && self.fabric.as_ref().is_none_or(|f| rep >= f.prefill_replicas) {
                replica.steady.open(st, &self.reqs);
            }
        }
        self.seq += 1;
        replica.step_seq = self.seq;
        if self.unpriced_steps {
            // The model checker orders completions itself: no duration, metrics or event.
            replica.busy = true;
            replica.stats.steps += 1;
            return true;
        }
        let sh = st.shape;
        let tokens = sh.tokens as u32;
        let shape = BatchShape {
            prefill: &st.prefill_items,
            prefill_tokens: sh.prefill_tokens,
            decode_seqs: sh.decode_seqs,
            decode_context_sum: sh.decode_ctx,
            context_sum_after: sh.ctx_after,
            sampled: sh.sampled,
            decode_blocks_1024: sh.decode_blocks_1024,
        };
        // Clamped so that nanosecond sums stay far from u64::MAX; a step this long ends the
        // run at the time horizon anyway.
        let mut comm_s = 0.0;
        let dur = match &mut self.fabric {
            None => self.perf.step_ns(&shape),
            Some(f) if self.perf.stages() > 1 => {
                let mb = self.perf.micro_batches(&shape);
                let (ar, x) = f.step_comm_pipeline(rep, sh.tokens, mb);
                comm_s = ar * f64::from(mb) + x;
                self.perf.step_ns_pipeline(&shape, mb, ar, x)
            }
            Some(f) => {
                comm_s = f.step_comm_s(rep, sh.tokens);
                self.perf.step_ns_plus(&shape, comm_s)
            }
        }
        .clamp(1, MAX_TIME_NS);
        let decision = Self::decision_exposed_ns(self.decision_ns, replica.last_end_ns, replica.last_dur_ns, now);
        let dur = dur + decision;
        replica.last_comm_s = comm_s;
        replica.last_decision_ns = decision;
        replica.last_end_ns = now.saturating_add(dur);
        replica.last_dur_ns = dur;
        replica.busy = true;
        replica.step_start_ns = now;
        // Metrics of the step (KV state as allocated for it).
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
        // Lookups happen only in a normally scheduled step.
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
        self.heap.push(Reverse((now.saturating_add(dur), self.seq, rep as u32)));
        true
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
            // No token is a first or a last one, no block changes hands ([`crate::steady`]).
            replica.steady.complete(st, &mut replica.outstanding_tokens);
            return;
        }
        self.finished_buf.clear();
        // Hot loop: counters in locals, written back once.
        let (mut used_slots, mut outstanding, mut done) = (st.used_slots, replica.outstanding_tokens, 0u64);
        self.first_buf.clear();
        #[cfg(test)]
        let guarded = !self.unguarded;
        #[cfg(not(test))]
        let guarded = true;
        for &(id, n) in &st.plan {
            let r = &mut self.reqs[id as usize];
            if guarded && (r.status != Status::Running || r.replica != rep as i32) {
                // Moved off this replica, or already done: this step no longer owns it (a
                // request finishes once, on the replica running it).
                continue;
            }
            r.computed += n;
            used_slots += n as u64;
            if r.computed < r.num_tokens() {
                continue; // a prefill chunk short of its target
            }
            r.generated += 1;
            outstanding = outstanding.saturating_sub(1);
            if r.generated == 1 {
                r.first_token_ns = now;
                self.first_buf.push(id);
                if let Some(sc) = self.scaler.as_mut() {
                    sc.on_first_token(now, (now - r.arrival_ns) as f64 / 1e6);
                }
            }
            if r.generated >= r.output {
                self.apc.release(&mut st.kv, r, None);
                r.blocks = Vec::new(); // a finished request keeps no allocation
                used_slots = used_slots.saturating_sub(r.computed as u64);
                r.status = Status::Finished;
                r.finish_ns = now;
                if let Some(sc) = self.scaler.as_mut() {
                    sc.on_finish(now, (now - r.arrival_ns) as f64 / 1e6);
                }
                outstanding = outstanding.saturating_sub(r.prompt as u64);
                done += 1;
                self.finished_buf.push(id);
            }
        }
        st.used_slots = used_slots;
        replica.outstanding_tokens = outstanding;
        self.done_requests += done;
        let any_token = !self.first_buf.is_empty() || !self.finished_buf.is_empty();
        if !self.client.is_empty() && any_token {
            // a token of this step reaches its client after the front end handled the step's outputs
            let out = self.frontend.output_ns(st.plan.len());
            self.first_buf.iter().for_each(|&id| self.client[id as usize].out_first_ns = out);
            self.finished_buf.iter().for_each(|&id| self.client[id as usize].out_last_ns = out);
        }
        if !self.finished_buf.is_empty() {
            let reqs = &self.reqs;
            st.running.retain(|&id| reqs[id as usize].status == Status::Running);
            if self.apc.on || self.sessions.is_some() {
                self.finished(now);
            }
        }
        if self.fabric.as_ref().is_some_and(|f| rep < f.prefill_replicas) {
            self.handoff(rep);
        }
        let replica = &mut self.replicas[rep];
        let st = &mut replica.sched;
        if self.options.record_steps && self.log_error.is_none() {
            // The log's size is not known in advance: it may use half the memory limit, and
            // its growth is a fallible allocation (a ResourceError, never an abort).
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
                        comm_ms: replica.last_comm_s * 1e3,
                        decision_ms: replica.last_decision_ns as f64 / 1e6,
                    },
                });
            }
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
        self.replicas.iter_mut().for_each(|r| r.steady.reset());
        self.kick.clear();
        self.kick_flag.iter_mut().for_each(|f| *f = false);
    }

    /// The execution-time model pricing this engine's steps (the model checker times
    /// counterexample replays with it).
    pub(crate) fn perf(&self) -> &StepCostModel {
        &self.perf
    }

    /// Check the state after every instant with `observe` (replacing any earlier one).
    pub fn set_invariant_observer(&mut self, observe: InvariantObserver) {
        self.observer = Some(observe);
    }
}

/// Sorts a slice that is usually almost in order (the front end shifts each arrival by a
/// few milliseconds): an insertion sort, linear in the length plus the number of pairs out
/// of order, where a general sort pays `n log n` comparisons. Arrivals in bursts (a batch
/// sent at once) can be far from order: past a budget of moves it hands over to a general
/// sort.
fn sort_nearly_sorted<T: Copy, K: Ord>(v: &mut [T], key: impl Fn(&T) -> K) {
    let mut budget = 8 * v.len();
    for i in 1..v.len() {
        let x = v[i];
        let kx = key(&x);
        let mut j = i;
        while j > 0 && key(&v[j - 1]) > kx {
            if budget == 0 {
                v[j] = x;
                v.sort_unstable_by_key(key);
                return;
            }
            budget -= 1;
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

#[cfg(test)]
mod sort_tests {
    use super::sort_nearly_sorted;

    #[test]
    fn nearly_sorted_and_far_from_sorted_both_come_out_sorted() {
        let mut a: Vec<u32> = (0..1000).map(|i| i * 10 + (i * 7919) % 13).collect();
        sort_nearly_sorted(&mut a, |&x| x);
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        let mut b: Vec<u32> = (0..5000).map(|i| (i * 7919) % 5003).collect();
        let mut c = b.clone();
        sort_nearly_sorted(&mut b, |&x| x);
        c.sort_unstable();
        assert_eq!(b, c);
    }
}
