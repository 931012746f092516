//! The engine's topology-driven behaviour: disaggregated prefill/decode hand-offs, KV cache
//! arrivals, topology events and replicas that stop when they lose a peer.
//!
//! `disagg`: a request is routed to a prefill replica; the step that completes its prompt
//! produces the first token there, and then, instead of decoding, the request releases its
//! KV blocks and its KV cache (prompt tokens × KV bytes per token, per GPU pair) moves to a
//! decode replica chosen by the router. When the last byte lands, the first token is
//! delivered (TTFT includes the transfer) and the request waits at the decode replica with
//! its KV present (admission allocates blocks for it and schedules a 1-token step).
//!
//! Prefix caching under `disagg`: each replica has its own cache. The prefill replica looks
//! up and caches prompts as any vLLM engine does; the blocks a request frees when it leaves
//! stay cached there, so later prompts sharing a prefix (another session turn, a shared
//! system prompt) hit them. The decode replica caches the blocks it receives once they are
//! allocated at admission (vLLM's decode side caches received blocks after the transfer)
//! and the decode blocks it fills, so a request preempted there re-hits its own blocks. A
//! landed request never looks up on the decode side (its KV is present): the whole prompt's
//! KV always moves — real P/D connectors skip the part the decode side already caches, which
//! o1sim does not model.
//!
//! A replica that loses a TP/PP peer (GPU removed, no route left) stops: its in-flight step
//! is dropped, and its waiting and running requests are moved to the live replicas of the
//! same role (least outstanding tokens; queue bounds do not apply) to recompute from their
//! prompt plus generated tokens; its prefix cache is lost with its GPUs' memory. No
//! request is lost; `summary.topology.moved_requests` counts them. When a later change (`link_up`, a swap) connects the replica's GPUs again
//! and none of them was removed, it starts again, empty: the router sends it new requests
//! and `disagg` hands it KV caches again (`summary.topology.restarted_replicas`). A step it
//! had in flight when it stopped never completes (its heap entry is recognised as stale).

use super::{Engine, Router};
use crate::error::{Result, SimError};
use crate::fabric::{Changed, Fabric};
use crate::request::Status;

impl Engine {
    /// Attach the topology side (from [`crate::api::build`]).
    pub(crate) fn attach_fabric(&mut self, f: Fabric) {
        self.fabric = Some(Box::new(f));
    }

    /// Everything the fabric has due at this instant: KV arrivals, then topology events.
    pub(crate) fn fabric_instant(&mut self) {
        let now = self.now_ns;
        let Some(f) = self.fabric.as_mut() else { return };
        let landed = f.take_done(now);
        let due = f.event_due(now);
        let changed = if due { f.apply_due(now) } else { Changed::default() };
        for (id, to) in landed {
            self.land_kv(id, to);
        }
        self.apply_changed(changed);
        if due {
            self.refresh_host_paths();
        }
    }

    /// Give the run its offload tiers ([`crate::kv::offload`]): every step is taken as it
    /// comes (a steady decode run would not see an async load end), and the tiers' host
    /// paths come from the topology when there is one.
    pub(crate) fn attach_offload(&mut self, off: crate::kv::offload::Offload) {
        self.apc.offload = Some(Box::new(off));
        self.steady_ok = false;
        self.refresh_host_paths();
    }

    /// The offload tiers' host paths from the topology as it is now (after a change).
    pub(crate) fn refresh_host_paths(&mut self) {
        let (Some(f), Some(off)) = (self.fabric.as_deref_mut(), self.apc.offload.as_deref_mut()) else { return };
        for rep in 0..self.replicas.len() {
            let path = f.host_path(rep).map(|(gbps, lat_s)| (gbps, crate::num::round_u64(lat_s * 1e9)));
            off.set_host_path(rep, path);
        }
    }

    /// Change the topology at the current time and drive the rest of the instant (see
    /// [`crate::Simulation::inject_topology`] for what `json` holds): replicas that lost a
    /// peer stop, the router's queue is drained, idle replicas with work start a step.
    pub(crate) fn inject_topology(&mut self, json: &str) -> Result<()> {
        let now = self.now_ns;
        let Some(f) = self.fabric.as_mut() else {
            return Err(SimError::config("topology", "this simulation has no topology to change (add a `topology` section)"));
        };
        let value: serde_json::Value =
            serde_json::from_str(json).map_err(|e| SimError::config("", format!("invalid JSON: {e}")))?;
        let changed = if value.is_array() {
            let specs: Vec<crate::topo::events::EventSpec> = serde_path_to_error::deserialize(value).map_err(|e| {
                SimError::config(format!("events{}", e.path().to_string().trim_start_matches('.')), e.into_inner())
            })?;
            let evs = crate::topo::events::resolve(&f.topo, &specs)?;
            f.inject(evs, now);
            f.apply_due(now)
        } else {
            let t = crate::topo::Topology::from_json(json).map_err(|e| e.under("topology"))?;
            f.swap(now, t)?
        };
        self.apply_changed(changed);
        self.refresh_host_paths();
        self.drain_dispatch();
        self.kick_idle()
    }

    /// After a topology change: replicas that lost a peer stop (their requests move), those
    /// whose group is whole again start taking requests (they restart empty).
    pub(crate) fn apply_changed(&mut self, changed: Changed) {
        for rep in changed.stopped {
            self.stop_replica(rep);
        }
        for rep in changed.restarted {
            self.mark(rep);
        }
    }

    /// Decode replicas `(first, end)` under `disagg`.
    fn decode_range(&self) -> (usize, usize) {
        let p = self.fabric.as_ref().map_or(0, |f| f.prefill_replicas);
        (p, self.replicas.len())
    }

    fn alive(&self, rep: usize) -> bool {
        self.fabric.as_ref().is_none_or(|f| f.alive[rep])
    }

    /// The decode replica for a request prefilled on `from`, by the router.
    fn pick_decode(&mut self, from: usize) -> Option<usize> {
        let (lo, hi) = self.decode_range();
        let live: Vec<usize> = (lo..hi).filter(|&i| self.alive(i)).collect();
        if live.is_empty() {
            return None;
        }
        match self.router {
            Router::RoundRobin => {
                let n = hi - lo;
                let pick = (0..n).map(|k| lo + (self.rr_decode + k) % n).find(|&i| self.alive(i))?;
                self.rr_decode = (pick - lo + 1) % n;
                Some(pick)
            }
            // The cache-aware routers pick prefill replicas; the KV a decode replica gets is
            // handed over whole, so it goes to the least loaded.
            Router::LeastOutstandingTokens
            | Router::PrecisePrefix
            | Router::ApproxPrefix
            | Router::SessionAffinity
            | Router::ConsistentHash => live.into_iter().min_by_key(|&i| (self.replicas[i].outstanding_tokens, i)),
            Router::TopologyAware => {
                let f = self.fabric.as_mut()?;
                let scored: Vec<(f64, usize)> = live.iter().map(|&i| (f.route_score(from, i), i)).collect();
                scored
                    .into_iter()
                    .max_by(|a, b| {
                        a.0.total_cmp(&b.0)
                            .then(self.replicas[b.1].outstanding_tokens.cmp(&self.replicas[a.1].outstanding_tokens))
                            .then(b.1.cmp(&a.1))
                    })
                    .map(|x| x.1)
            }
        }
    }

    /// After a prefill replica's step: requests that just produced their first token leave
    /// for a decode replica (their KV moves over the topology).
    pub(crate) fn handoff(&mut self, rep: usize) {
        let now = self.now_ns;
        let plan = std::mem::take(&mut self.replicas[rep].sched.plan);
        for &(id, _) in &plan {
            let r = &self.reqs[id as usize];
            if r.status != Status::Running || r.generated != 1 {
                continue;
            }
            let Some(to) = self.pick_decode(rep) else { continue }; // no decode replica: decode here
            let replica = &mut self.replicas[rep];
            let r = &mut self.reqs[id as usize];
            // Its blocks stay cached here (and its own ones can be hit if it ever comes
            // back to recompute).
            let alloc = r.computed;
            self.apc.release(&mut replica.sched.kv, r, Some(alloc));
            r.blocks = Vec::new();
            replica.sched.used_slots = replica.sched.used_slots.saturating_sub(r.computed as u64);
            replica.outstanding_tokens = replica.outstanding_tokens.saturating_sub((r.prompt + r.output - 1) as u64);
            r.status = Status::Transferring;
            // On its way to `to` (it is queued there when its KV lands).
            r.replica = to as i32;
            let prompt = r.prompt;
            if let Some(pos) = replica.sched.running.iter().position(|&x| x == id) {
                replica.sched.running.remove(pos);
            }
            if self.unpriced_steps {
                continue; // the model checker lands KV caches itself, in every order
            }
            if let Some(f) = self.fabric.as_mut() {
                f.start_transfer(now, id, prompt, rep, to);
            }
        }
        self.replicas[rep].sched.plan = plan;
    }

    /// A request's KV cache landed at decode replica `to`: the first token is delivered now
    /// and the request waits there with its KV present.
    pub(crate) fn land_kv(&mut self, id: u32, to: usize) {
        if self.reqs[id as usize].status == Status::Rejected {
            return; // its client timed out while the KV was on the way
        }
        let to = if self.alive(to) { Some(to) } else { self.least_loaded(self.decode_range()) };
        let out = self.frontend.output_ns(1);
        if let Some(c) = self.client.get_mut(id as usize) {
            c.out_first_ns = out;
        }
        let r = &mut self.reqs[id as usize];
        r.first_token_ns = self.now_ns;
        match to {
            Some(to) => {
                r.computed = r.prompt;
                self.replicas[to].sched.used_slots += r.computed as u64;
                self.place(id, to);
            }
            None => {
                // No decode replica left: recompute wherever arrivals can go.
                r.computed = 0;
                self.requeue(id, false);
            }
        }
    }

    /// Least-outstanding live replica in `lo..hi`.
    fn least_loaded(&self, (lo, hi): (usize, usize)) -> Option<usize> {
        (lo..hi).filter(|&i| self.alive(i)).min_by_key(|&i| (self.replicas[i].outstanding_tokens, i))
    }

    /// Queue request `id` at replica `to` (no queue bound: it was already admitted once).
    fn place(&mut self, id: u32, to: usize) {
        self.order_counter += 1;
        let order = self.order_counter;
        let replica = &mut self.replicas[to];
        let r = &mut self.reqs[id as usize];
        r.replica = to as i32;
        replica.outstanding_tokens += (r.prompt + r.output - r.generated) as u64;
        replica.sched.enqueue(&self.pool_params[self.pool_of[to] as usize], r, order);
        self.mark(to);
    }

    /// Move a request with no KV to a live replica of its role (decode when it already has
    /// tokens under `disagg`), else back to the router's queue.
    fn requeue(&mut self, id: u32, decode_role: bool) {
        let range = match (&self.fabric, decode_role) {
            (Some(f), true) if f.prefill_replicas > 0 => self.decode_range(),
            (Some(f), false) if f.prefill_replicas > 0 => (0, f.prefill_replicas),
            _ => (0, self.replicas.len()),
        };
        match self.least_loaded(range) {
            Some(to) => self.place(id, to),
            None => {
                // No live replica of its role: wait in the router's queue (a restart may
                // come), the dispatch timeout counting from now.
                let r = &mut self.reqs[id as usize];
                r.status = Status::Dispatching;
                r.queued_ns = self.now_ns;
                self.dispatch.push_back(id);
            }
        }
    }

    /// Stop replica `rep` and move its requests to the others.
    fn stop_replica(&mut self, rep: usize) {
        self.drop_step(rep);
        let replica = &mut self.replicas[rep];
        replica.steady.settle(&mut replica.sched, &mut self.reqs, &mut self.apc);
        replica.steady.reset();
        replica.set.dissolve(&mut self.reqs);
        replica.set.reset();
        let mut ids: Vec<u32> = std::mem::take(&mut replica.sched.running);
        ids.extend(replica.sched.waiting.iter());
        ids.extend(replica.inbox.drain(..).map(|e| e.0));
        replica.sched.waiting.clear();
        replica.sched.plan.clear();
        replica.sched.used_slots = 0;
        replica.outstanding_tokens = 0;
        replica.busy = false;
        for &id in &ids {
            let r = &mut self.reqs[id as usize];
            if let Some(off) = self.apc.offload.as_deref_mut() {
                off.forget_request(id);
            }
            self.apc.release(&mut replica.sched.kv, r, None);
            r.blocks = Vec::new();
            r.computed = 0;
            r.status = Status::Waiting;
        }
        // Its GPUs' memory is lost: it restarts with an empty cache.
        replica.sched.kv.empty();
        if let Some(f) = self.fabric.as_mut() {
            f.stats.moved_requests += ids.len() as u64;
        }
        let decode_role = self.fabric.as_ref().is_some_and(|f| f.prefill_replicas > 0 && rep >= f.prefill_replicas);
        for id in ids {
            self.requeue(id, decode_role);
        }
    }
}
