//! The discrete-event engine: arrivals, a router, replicas stepping their scheduler, the
//! execution-time model pricing each step, and metrics.
//!
//! Time is integer nanoseconds. Events are ordered by `(time, kind rank, insertion seq)`:
//! at one instant all step completions are handled first (replica order), then KV
//! transfers and topology events, then client timeouts (deadline, then id order), then all
//! arrivals (id order; a session's later turns arrive when sent, see [`crate::engine::client`]),
//! then the router's queue is drained, then every idle replica with work starts its next
//! step. So arrivals join at step boundaries, an idle engine starts at the next arrival,
//! and a request finishing exactly at its deadline counts as finished.

mod build;
pub use build::EnginePool;
mod client;
mod disagg;
mod dispatch;
mod features;
mod run;
mod scaling;
mod lora;
mod speculative;
pub use lora::{LoraRun, LoraStats};
pub use speculative::{SpecRun, SpecStats};
pub(crate) mod sessions;
pub(crate) mod decode_set;
pub(crate) mod steady;
mod lot_index;
mod route;
mod router_state;
mod step;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::error::SimError;
use crate::kv::prefix::Apc;
use crate::metrics::{ReplicaStats, Series, StepRecord};
use crate::perf::StepCostModel;
use crate::request::{Client, Req};
use crate::sched::{Params, SchedState};
use sessions::Sessions;
use decode_set::DecodeSet;
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
    /// Steady decode steps applied lazily ([`crate::engine::steady`]).
    pub(crate) steady: Steady,
    /// The lazy decode set at the head of the batch ([`crate::engine::decode_set`]).
    pub(crate) set: DecodeSet,
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
    /// Kernel variants this replica compiled while serving, one bit each
    /// ([`crate::perf::warmup::WarmupPlan::stall`]).
    pub(crate) compiled: u64,
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
    /// The first pool's scheduler limits (the model checker's runs have one pool).
    pub(crate) params: Params,
    /// Per pool: the scheduler limits of its replicas (its DP ranks scheduled as one).
    pub(crate) pool_params: Vec<Params>,
    /// Per replica: its pool.
    pub(crate) pool_of: Vec<u32>,
    /// Per pool: its first replica.
    pub(crate) pool_first: Vec<u32>,
    /// Per pool: the cost model pricing its replicas' steps (its own GPU and layout).
    perfs: Vec<StepCostModel>,
    /// What each pool's steps repeat, remembered for its cost model ([`crate::perf::StepMemo`]).
    memos: Vec<crate::perf::StepMemo>,
    /// Per pool: its first-use compilation stalls ([`crate::perf::warmup`]); `None`: none.
    warmups: Vec<Option<crate::perf::warmup::WarmupPlan>>,
    pub(crate) router: Router,
    /// The cache-aware routers' state ([`route`]); `None` for the others.
    pub(crate) routing: Option<Box<router_state::Routing>>,
    pub(crate) rr_next: usize,
    pub(crate) max_waiting: Option<u32>,
    pub(crate) dispatch_timeout_ns: u64,
    pub(crate) dispatch: VecDeque<u32>,
    max_model_len: u32,
    /// Pending step completions: (time, seq, replica).
    heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
    /// Offload tiers: when async loads end, (time, replica): the replica is offered a step
    /// then (its request can be scheduled).
    pub(crate) wakes: BinaryHeap<Reverse<(u64, u32)>>,
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
    /// Scratch: the lazy decode set's members that finished in a step.
    pub(crate) set_done: Vec<u32>,
    /// Requests that produced their first token in the step being completed.
    first_buf: Vec<u32>,
    /// Replicas whose state changed at this instant (a step ended, a request was queued)
    /// and that must be offered a new step; `kick_flag` dedups.
    kick: Vec<u32>,
    kick_flag: Vec<bool>,
    /// The least-outstanding-tokens router's index, built at its first pick
    /// ([`crate::engine::lot_index`]).
    lot: Option<lot_index::LotIndex>,
    /// The topology side (only with a `topology` section): routes, collectives, events,
    /// KV transfers ([`crate::fabric`]).
    pub(crate) fabric: Option<Box<crate::fabric::Fabric>>,
    /// Round-robin cursor over decode replicas (`disagg`).
    pub(crate) rr_decode: usize,
    /// Steady decode steps may run lazily ([`crate::engine::steady`]); off when every step is
    /// recorded or checked, and for the model checker (it drives steps itself).
    pub(crate) steady_ok: bool,
    /// Start steps without pricing them (no duration, step metrics or completion event):
    /// the model checker, which explores every completion order itself, sets it.
    pub(crate) unpriced_steps: bool,
    /// Prefix caching: token identity of the prompts, block hashes, per-request cache
    /// state ([`crate::kv::prefix`]).
    pub(crate) apc: Apc,
    /// Closed-loop sessions: which request waits for which ([`crate::engine::client`]); `None`
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
    /// why the run stops: recording ran out of room, or a KV pool's list did (reported by
    /// [`Engine::run_events`]).
    log_bytes: u64,
    log_limit_bytes: u64,
    log_error: Option<SimError>,
    /// The field that sized the KV pools (a pool out of memory names it).
    kv_field: &'static str,
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
    /// Speculative decoding's acceptance and counters (`[scheduler.speculative]`).
    pub(crate) spec: Option<Box<SpecRun>>,
    /// Multi-LoRA's adapter slots and counters (`workload.lora`).
    pub(crate) lora: Option<Box<LoraRun>>,
}
