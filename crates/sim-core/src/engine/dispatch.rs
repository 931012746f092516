//! Admission at arrival, the router's queue and its policies, and rejections.

use std::cmp::Reverse;

use super::{Engine, Router};
use crate::kv::KvMode;
use crate::perf::BatchShape;
use crate::request::{Reason, Status};

impl Engine {
    /// Request `id` ends without finishing, at `at_ns`: rejected (or timed out). A
    /// session's later turns are never sent then ([`crate::engine::client`]).
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
        // Every pool's (the smallest decides: a request the router might send anywhere).
        let too_small = self.pool_first.iter().any(|&first| {
            let pool = &self.replicas[first as usize].sched.kv;
            // TensorRT-LLM's guaranteed_no_evict reserves the whole length too.
            let whole = pool.mode == KvMode::Contiguous || self.params.trtllm == Some(crate::config::CapacityPolicy::GuaranteedNoEvict);
            let max_len = if whole { total } else { total - 1 } as u32;
            pool.units_for(max_len.max(1), r.req_block) > pool.total()
        });
        if too_small {
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

    pub(super) fn has_room(&self, rep: usize) -> bool {
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
        if self.routing.is_some() || self.router == Router::SessionAffinity {
            return self.pick_cache_aware(id, n);
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
            _ => self.least_outstanding(n),
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
            spec_tokens: 0,
            lora_adapters: 0,
        };
        // Each pool prices the reference step on its own GPU.
        let compute: Vec<f64> = self.perfs.iter().map(|p| p.step_ns_plus(&shape, 0.0) as f64 * 1e-9).collect();
        let mut best: Option<(f64, u64, usize)> = None;
        for i in 0..n {
            if !self.has_room(i) {
                continue;
            }
            let compute_s = compute[self.pool_of[i] as usize];
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
                replica.sched.enqueue(&self.pool_params[self.pool_of[rep] as usize], r, order);
            }
            self.mark(rep);
        }
    }

    /// Offer `rep` a new step at this instant.
    pub(crate) fn mark(&mut self, rep: usize) {
        if let Some(l) = self.lot.as_mut() {
            l.touch(rep);
        }
        if !self.kick_flag[rep] {
            self.kick_flag[rep] = true;
            self.kick.push(rep as u32);
        }
    }
}
