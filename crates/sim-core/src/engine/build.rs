//! Building an engine from a resolved scenario: its requests, the arrival order, the
//! front end's per-request delays, and the replica slots with their KV pools.

use std::collections::{BinaryHeap, VecDeque};

use super::sessions::Sessions;
use super::decode_set::DecodeSet;
use super::steady::Steady;
use super::{Engine, Replica, Router, SimOptions};
use crate::config::Scenario;
use crate::error::Result;
use crate::limits::out_of_memory;
use crate::kv::prefix::Apc;
use crate::kv::{o1pro_block_size, KvMode, KvPool};
use crate::metrics::{ReplicaStats, Series};
use crate::perf::StepCostModel;
use crate::request::{Client, Reason, Req, Status, NO_TIME};
use crate::sched::{Params, SchedState};
use crate::frontend::Frontend;
use crate::workload::{RequestSpec, Workload};

impl Engine {
    /// Build an engine from a validated scenario, its pools (each with its cost model, KV
    /// pool size and replicas, in replica order) and requests. A KV pool that cannot be
    /// allocated is a `ResourceError` naming `kv_field` (the field that sized it). Each pool
    /// reserves room for the units the requests can take in all (their whole lengths, at
    /// most its size): a pool never stores more unless requests are run again (preempted
    /// with prefix caching, restarted by a fault), and then grows fallibly.
    ///
    /// Long because of the `Engine` literal (one field a line, over half the body); the
    /// work before it is already in `requests`, `arrivals`, `Apc::new` and `Sessions::new`,
    /// and splitting the literal would only spread one struct's defaults over two places.
    pub fn new(
        scenario: &Scenario,
        pools: Vec<EnginePool>,
        max_model_len: u32,
        workload: Workload,
        options: SimOptions,
        kv_field: &'static str,
    ) -> Result<Engine> {
        let Workload { requests: specs, segments } = workload;
        let (mut base, mode) = Params::for_policy(&scenario.scheduler);
        if scenario.workload.lora.is_some() {
            base.max_loras = scenario.scheduler.effective_max_loras();
        }
        let pool_params: Vec<Params> = pools.iter().map(|p| rank_params(base, p.dp)).collect();
        let params = pool_params[0];
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
        let reqs = requests(&specs, &frontend, req_block);
        let (arrival_order, client) = arrivals(&specs, &reqs, &frontend);
        let mut apc = Apc::new(params.apc && mode != KvMode::Contiguous, &specs, segments, |s| {
            req_block(s.prompt_tokens, s.output_tokens)
        });
        // The units the requests can take in all: their whole lengths.
        let units: u64 = specs
            .iter()
            .map(|s| {
                let len = s.prompt_tokens.saturating_add(s.output_tokens);
                u64::from(KvPool::units_in(mode, bs, len, req_block(s.prompt_tokens, s.output_tokens)))
            })
            .sum();
        let kv_pool = |blocks: u32| {
            let used = units.min(u64::from(blocks)) as u32;
            KvPool::try_new(mode, bs, blocks, apc.on, used).map_err(|_| {
                let bytes = crate::limits::kv_pool_bytes(used, apc.on);
                out_of_memory(kv_field, bytes, &format!("a replica's KV pool of {blocks} blocks"))
            })
        };
        // Under autoscaling (one pool) every slot the controller may use exists from the start.
        let mut pool_of = Vec::new();
        for (k, p) in pools.iter().enumerate() {
            let n = if pools.len() == 1 { scenario.scaling.as_ref().map_or(p.replicas, |s| s.max_replicas) } else { p.replicas };
            pool_of.extend(std::iter::repeat_n(k as u32, n as usize));
        }
        let slots = pool_of.len() as u32;
        if scenario.deployment.router == Router::PrecisePrefix {
            // The precise prefix router reads every replica's index: nothing is registered
            // cold.
            apc.cold_max = 0;
            if scenario.deployment.kv_event_delay_ms > 0.0 {
                apc.stored = Some(vec![Default::default(); slots as usize]);
            }
        }
        let pool_first: Vec<u32> = (0..pools.len()).map(|k| pool_of.iter().position(|&p| p as usize == k).unwrap_or(0) as u32).collect();
        let replicas = (0..slots)
            .map(|i| Ok(Replica::new(SchedState::new(kv_pool(pools[pool_of[i as usize] as usize].num_blocks)?.for_replica(i)))))
            .collect::<Result<_>>()?;
        let warmups = pools.iter().map(|p| p.perf.warmup_plan(base.budget, base.max_num_seqs)).collect();
        let perfs: Vec<StepCostModel> = pools.into_iter().map(|p| p.perf).collect();
        Ok(Engine {
            reqs,
            arrival_order,
            next_arrival: 0,
            replicas,
            params,
            pool_params,
            pool_of,
            pool_first,
            memos: perfs.iter().map(|_| crate::perf::StepMemo::default()).collect(),
            perfs,
            warmups,
            router: scenario.deployment.router,
            routing: super::router_state::Routing::new(scenario),
            rr_next: 0,
            max_waiting: scenario.effective_max_waiting().map(|w| w.saturating_mul(scenario.deployment.dp)),
            dispatch_timeout_ns: (scenario.deployment.dispatch_timeout_ms * 1e6).round() as u64,
            dispatch: VecDeque::new(),
            max_model_len,
            heap: BinaryHeap::new(),
            wakes: BinaryHeap::new(),
            seq: 0,
            now_ns: 0,
            order_counter: 0,
            events: 0,
            done_requests: 0,
            options,
            observer: None,
            steps_log: Vec::new(),
            finished_buf: Vec::new(),
            set_done: Vec::new(),
            first_buf: Vec::new(),
            kick: Vec::new(),
            kick_flag: vec![false; slots as usize],
            lot: None,
            fabric: None,
            rr_decode: 0,
            // Stored KV events are stamped with the time a step is scheduled, so every step
            // is taken as it comes when they are kept.
            steady_ok: !options.record_steps && !options.check_invariants && apc.stored.is_none(),
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
            kv_field,
            #[cfg(test)]
            unguarded: false,
            scaler: None,
            decision_ns: 0,
            spec: None,
            lora: None,
            max_template_depth: scenario.scheduler.policy.info().o1pro_admission
                .then_some(crate::workload::adversarial::O1PRO_MAX_TEMPLATE_DEPTH),
        })
    }
}


/// One pool as the engine builds it: its step cost model, KV blocks per replica, replicas and
/// data-parallel attention ranks.
pub struct EnginePool {
    pub perf: StepCostModel,
    pub num_blocks: u32,
    pub replicas: u32,
    pub dp: u32,
}

/// The scheduler's limits for a replica of `dp` data-parallel attention ranks scheduled as
/// one batch ([`crate::perf::ep`]): dp times a rank's sequences and tokens, no request more
/// than one rank's budget.
fn rank_params(base: Params, dp: u32) -> Params {
    if dp <= 1 {
        return base;
    }
    Params {
        per_request_cap: base.per_request_cap.min(base.budget),
        max_num_seqs: base.max_num_seqs.saturating_mul(dp),
        budget: base.budget.saturating_mul(dp),
        ..base
    }
}

impl Replica {
    /// An idle replica scheduling over `sched` (its KV pool inside).
    fn new(sched: SchedState) -> Replica {
        Replica {
            sched,
            busy: false,
            step_seq: 0,
            step_start_ns: 0,
            outstanding_tokens: 0,
            series: Series::default(),
            stats: ReplicaStats::default(),
            steady: Steady::default(),
            set: DecodeSet::default(),
            inbox: Vec::new(),
            last_end_ns: u64::MAX,
            last_dur_ns: 0,
            last_comm_s: 0.0,
            last_decision_ns: 0,
            compiled: 0,
        }
    }
}

/// The engine's requests, by id, from the workload's specs: a session's later turn waits
/// (no arrival time) until its parent ends; the others arrive once the front end has taken
/// them in.
fn requests(specs: &[RequestSpec], frontend: &Frontend, req_block: impl Fn(u32, u32) -> u32) -> Vec<Req> {
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
            apc_gate: 0,
            req_block: req_block(s.prompt_tokens, s.output_tokens),
            blocks: Vec::new(),
            order: 0,
            queued_ns: s.arrival_ns.saturating_add(u64::from(frontend.ingest_ns(s.prompt_tokens))),
            template_depth: s.template_depth,
            adversarial: s.adversarial,
            lora: s.lora,
            lora_waited: false,
        })
        .collect();
    v.sort_by_key(|r| r.id);
    v
}

/// The ids of the requests sent at a fixed time, in arrival order, and per request id what
/// the front end adds to its times (empty without a front end).
fn arrivals(specs: &[RequestSpec], reqs: &[Req], frontend: &Frontend) -> (Vec<u32>, Vec<Client>) {
    // `specs` come sorted by (arrival, id); the front end's ingest (longer for longer
    // prompts) may reorder them. Session turns that wait for another are sent later.
    let mut arrival_order: Vec<u32> = specs.iter().filter(|s| s.after.is_none()).map(|s| s.id).collect();
    let mut client = Vec::new();
    if !frontend.is_none() {
        sort_nearly_sorted(&mut arrival_order, |&id| (reqs[id as usize].arrival_ns, id));
        client = vec![Client::default(); reqs.len()];
        specs.iter().for_each(|s| client[s.id as usize].ingest_ns = frontend.ingest_ns(s.prompt_tokens));
    }
    (arrival_order, client)
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
