//! The engine's side of a topology: placement, per-replica communication costs cached
//! between topology changes, topology events, KV transfers that share links, per-link
//! accounting. Only built when the scenario has a `topology`; without one the engine never
//! touches this module (and its results are unchanged).
//!
//! KV transfers are a fluid model: each transfer is one flow per GPU pair (prefill rank →
//! decode rank of the same stage), each flow crossing its chosen route; flows on the same
//! link and direction share its bandwidth equally, so a flow's rate is
//! `min over its links of bw / flows there`. Rates are recomputed whenever a flow starts or
//! ends or the topology changes (in-flight transfers are re-costed, and re-routed when
//! their route changed). A flow ends when its bytes are through, plus its route latency.
//!
//! Collectives of different replicas share links too, priced per step: when a replica starts
//! a step, each (link, direction) its TP AllReduces (ring or tree) and PP sends cross is
//! divided among `1 + r + k` parties, r the other replicas whose step in flight uses that
//! link in that direction and k the KV flows in their data phase on it; the step's
//! collectives are priced with those shares (the slowest flow paces each collective, as
//! alone) and the price holds for the whole step. With no one else on its links a step is
//! priced from the cached costs, bit for bit as before. The approximation: a step in
//! flight counts as using its links for its whole duration (its collectives are assumed to
//! coincide with the newcomer's, a pessimistic bound: in reality they take a fraction of a
//! step), a step already running is not re-priced when another starts, and KV flows do not
//! slow down for collectives (their fluid model shares links among KV flows only).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{Result, SimError};
use crate::topo::collective::{flow, frontier_flows, hop_key, Comm, CommLanes, Flow};
use crate::topo::events::{self, Action, TopoEvent};
use crate::topo::placement::{self, Placement};
use crate::topo::route::RouteTable;
use crate::topo::Topology;

/// One KV flow in flight.
#[derive(Debug, Clone)]
struct KvFlow {
    req: u32,
    src: u32,
    dst: u32,
    flow: Flow,
    /// Bytes still to send (data phase).
    remaining: f64,
    /// Bytes per ns under the current sharing.
    rate: f64,
    /// Set once the data is through: the time the last byte lands.
    done_at: Option<u64>,
    /// One part of a transfer split over its pair's frontier (`routing.multipath_kv`): it
    /// keeps its own path while that path is up, instead of following the chosen route.
    pinned: bool,
}

/// Counters reported in `summary.topology`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FabricStats {
    /// Requests moved off a replica that stopped (re-queued, none lost).
    pub moved_requests: u64,
    /// Replicas stopped because they lost a TP/PP peer.
    pub stopped_replicas: u64,
    pub events_applied: u64,
    /// Chosen routes that changed over the run.
    pub route_changes: u64,
    /// Replicas started again after their TP/PP group was connected again (`link_up`).
    pub restarted_replicas: u64,
    /// Steps whose collectives were priced sharing a link with another replica's step in
    /// flight or with a KV transfer.
    pub shared_steps: u64,
    pub kv_transfers: u64,
    pub kv_bytes: f64,
    /// Durations of completed KV transfers, ms (for percentiles).
    #[serde(skip)]
    pub kv_transfer_ms: Vec<f64>,
}

/// Replicas whose state a topology change flipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changed {
    /// Lost a TP/PP peer (GPU removed, no route left): they stop, their requests move.
    pub stopped: Vec<usize>,
    /// Stopped earlier, now connected again with none of their GPUs removed: they start
    /// again, empty.
    pub restarted: Vec<usize>,
}

/// Per-link table of a result (the dashboard draws it; one entry per link).
#[derive(Debug, Clone, Default, Serialize)]
pub struct LinkTable {
    pub src: Vec<String>,
    pub dst: Vec<String>,
    pub kind: Vec<String>,
    /// At the end of the run, GB/s per direction.
    pub bandwidth_gbps: Vec<f64>,
    pub nominal_gbps: Vec<f64>,
    pub latency_us: Vec<f64>,
    pub up: Vec<bool>,
    /// Bytes carried (both directions): collectives, PP activations, KV transfers.
    pub bytes: Vec<f64>,
    /// bytes / (bytes the link could carry over the run: its bandwidth at each moment, both
    /// directions, zero while down), 0–1. A link degraded or down for part of the run is
    /// measured against what it offered, not its nominal rate.
    pub utilization: Vec<f64>,
}

/// Topology state of a running engine.
#[derive(Debug, Clone)]
pub struct Fabric {
    pub topo: Topology,
    pub routes: RouteTable,
    pub placement: Placement,
    comm: Vec<Comm>,
    pub alive: Vec<bool>,
    events: Vec<TopoEvent>,
    next_event: usize,
    hidden: f64,
    layers: f64,
    /// Replicas `0..prefill_replicas` prefill, the rest decode; 0 when co-located.
    pub prefill_replicas: usize,
    /// KV bytes per token on one GPU (its layers and KV heads).
    kv_bytes_per_token_gpu: f64,
    flows: Vec<KvFlow>,
    flows_t: u64,
    /// Request → (flows left, destination replica, start time).
    pending: BTreeMap<u32, (u32, u32, u64)>,
    pub stats: FabricStats,
    link_bytes: Vec<f64>,
    /// ∫ bandwidth dt per link (bytes one direction could carry), settled at link changes.
    link_capacity: Vec<f64>,
    /// Time up to which `link_capacity` is settled, ns.
    capacity_t: u64,
    /// Tokens each replica processed since its communication was last rebuilt.
    rep_tokens: Vec<f64>,
    /// Per replica: (link, bytes per token) of its collectives and PP transfers.
    rep_bpt: Vec<Vec<(u32, f64)>>,
    /// Per replica: the links of its collectives, to re-price them when shared.
    lanes: Vec<CommLanes>,
    /// Per replica: some link of its collectives is also used by another live replica's.
    overlap: Vec<bool>,
    /// Per replica: a step is in flight (between [`Fabric::step_comm_s`] and
    /// [`Fabric::end_step`]).
    in_flight: Vec<bool>,
    /// Per hop ([`hop_key`]): replicas with `overlap` whose step in flight uses it.
    hop_steps: Vec<u32>,
    /// Per hop: KV flows in their data phase on it (as of the last re-share).
    hop_kv: Vec<u32>,
    /// KV flows in their data phase (as of the last re-share).
    kv_busy: usize,
    /// A replica's communication re-priced under sharing (reused buffer).
    scratch: Comm,
}

impl Fabric {
    /// Place the deployment on the topology and price each replica's communication.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        topo: Topology,
        events: Vec<TopoEvent>,
        placement: Placement,
        hidden: u32,
        layers: u32,
        kv_bytes_per_token_gpu: f64,
        prefill_replicas: usize,
    ) -> Result<Fabric> {
        placement::check_connected(&topo, &placement, "deployment.placement")?;
        let n = placement.len();
        let links = topo.links.len();
        let mut f = Fabric {
            topo,
            routes: RouteTable::default(),
            placement,
            comm: vec![Comm::default(); n],
            alive: vec![true; n],
            events,
            next_event: 0,
            hidden: f64::from(hidden),
            layers: f64::from(layers),
            prefill_replicas,
            kv_bytes_per_token_gpu,
            flows: Vec::new(),
            flows_t: 0,
            pending: BTreeMap::new(),
            stats: FabricStats::default(),
            link_bytes: vec![0.0; links],
            link_capacity: vec![0.0; links],
            capacity_t: 0,
            rep_tokens: vec![0.0; n],
            rep_bpt: vec![Vec::new(); n],
            lanes: vec![CommLanes::default(); n],
            overlap: vec![false; n],
            in_flight: vec![false; n],
            hop_steps: vec![0; 2 * links],
            hop_kv: vec![0; 2 * links],
            kv_busy: 0,
            scratch: Comm::default(),
        };
        for rep in 0..n {
            if !f.rebuild(rep) {
                return Err(SimError::config("topology", format!("replica {rep}: its GPUs have no route between them")));
            }
        }
        f.recount();
        Ok(f)
    }

    /// Recompute which replicas can share links with another and the in-flight counts per
    /// hop, after routes or the set of live replicas changed.
    fn recount(&mut self) {
        let hops = 2 * self.topo.links.len();
        let mut users = vec![0u32; hops];
        for (r, l) in self.lanes.iter().enumerate() {
            if self.alive[r] {
                l.hops.iter().for_each(|&h| users[h] += 1);
            }
        }
        self.hop_steps.clear();
        self.hop_steps.resize(hops, 0);
        for (r, l) in self.lanes.iter().enumerate() {
            self.overlap[r] = self.alive[r] && l.hops.iter().any(|&h| users[h] > 1);
            if !self.alive[r] {
                self.in_flight[r] = false;
            }
            if self.overlap[r] && self.in_flight[r] {
                l.hops.iter().for_each(|&h| self.hop_steps[h] += 1);
            }
        }
    }

    /// Re-price replica `rep`'s communication; `false` when a peer is unreachable.
    fn rebuild(&mut self, rep: usize) -> bool {
        let t = self.rep_tokens[rep];
        for &(l, b) in &self.rep_bpt[rep] {
            self.link_bytes[l as usize] += t * b;
        }
        self.rep_tokens[rep] = 0.0;
        let stages = &self.placement[rep];
        let Some((c, lanes)) = Comm::build_lanes(&self.topo, &mut self.routes, stages, self.layers) else { return false };
        // Bytes per token on each link: ring AllReduces (2 per layer, each flow 2(p−1)/p of
        // the activations) and the PP sends (1/tp of the activations per rank pair).
        let act = self.hidden * 2.0;
        let mut bpt: BTreeMap<u32, f64> = BTreeMap::new();
        for (s, g) in stages.iter().enumerate() {
            let p = g.len() as f64;
            if g.len() > 1 {
                let per = 2.0 * c.stages[s].2 * 2.0 * (p - 1.0) / p * act;
                for i in 0..g.len() {
                    if let Some(fl) = flow(&self.topo, &mut self.routes, g[i], g[(i + 1) % g.len()]) {
                        for (l, _) in fl.hops {
                            *bpt.entry(l).or_insert(0.0) += per;
                        }
                    }
                }
            }
            if let Some(next) = stages.get(s + 1) {
                for (&a, &b) in g.iter().zip(next) {
                    if let Some(fl) = flow(&self.topo, &mut self.routes, a, b) {
                        for (l, _) in fl.hops {
                            *bpt.entry(l).or_insert(0.0) += act / p;
                        }
                    }
                }
            }
        }
        self.rep_bpt[rep] = bpt.into_iter().collect();
        self.comm[rep] = c;
        self.lanes[rep] = lanes;
        true
    }

    /// Communication seconds of a step of `tokens` tokens starting now on `rep` (hot path: a
    /// few flops alone on its links). The step counts as in flight until
    /// [`Fabric::end_step`].
    #[inline]
    pub fn step_comm_s(&mut self, rep: usize, tokens: u64) -> f64 {
        self.rep_tokens[rep] += tokens as f64;
        let hidden = self.hidden;
        let s = self.comm_now(rep).step_s(tokens as f64, hidden);
        self.begin_step(rep);
        s
    }

    /// Replica `rep`'s communication priced for a step starting now: the cached costs when
    /// nobody else uses its links, else re-priced with each hop shared among the replicas
    /// whose step in flight uses it and the KV flows on it (module docs).
    #[inline]
    fn comm_now(&mut self, rep: usize) -> &Comm {
        if !(self.overlap[rep] || self.kv_busy > 0) {
            return &self.comm[rep];
        }
        let (steps, kv) = (&self.hop_steps, &self.hop_kv);
        let lanes = &self.lanes[rep];
        if !lanes.hops.iter().any(|&h| steps[h] + kv[h] > 0) {
            return &self.comm[rep];
        }
        lanes.price(|h| f64::from(1 + steps[h] + kv[h]), &mut self.scratch);
        self.stats.shared_steps += 1;
        &self.scratch
    }

    /// Communication seconds a step of `tokens` tokens would cost on `rep` if it started now,
    /// with its links shared as they are at this moment (the topology-aware router's probe:
    /// nothing is counted or marked in flight). A replica whose links are degraded, or
    /// shared with other replicas' steps and KV transfers, answers more; one that lost a
    /// peer answers infinity.
    pub fn probe_comm_s(&mut self, rep: usize, tokens: f64) -> f64 {
        if !self.alive[rep] {
            return f64::INFINITY;
        }
        let (steps, kv) = (&self.hop_steps, &self.hop_kv);
        let lanes = &self.lanes[rep];
        // Its own step in flight does not share with its next one.
        let own = u32::from(self.in_flight[rep] && self.overlap[rep]);
        let others = |h: usize| steps[h] - own + kv[h];
        let shared = (self.overlap[rep] || self.kv_busy > 0) && lanes.hops.iter().any(|&h| others(h) > 0);
        if !shared {
            return self.comm[rep].step_s(tokens, self.hidden);
        }
        lanes.price(|h| f64::from(1 + others(h)), &mut self.scratch);
        self.scratch.step_s(tokens, self.hidden)
    }

    #[inline]
    fn begin_step(&mut self, rep: usize) {
        self.in_flight[rep] = true;
        if self.overlap[rep] {
            self.lanes[rep].hops.iter().for_each(|&h| self.hop_steps[h] += 1);
        }
    }

    /// Replica `rep`'s step in flight ended: its links are free of it.
    #[inline]
    pub fn end_step(&mut self, rep: usize) {
        if std::mem::take(&mut self.in_flight[rep]) && self.overlap[rep] {
            self.lanes[rep].hops.iter().for_each(|&h| self.hop_steps[h] -= 1);
        }
    }

    /// Communication of a pipelined step (pp > 1) of `tokens` tokens on `rep` split into
    /// `mb` micro-batches: (TP AllReduces of one micro-batch over all stages, one
    /// micro-batch's transfer across one stage boundary — the boundaries' routed send/recv
    /// averaged), seconds.
    pub fn step_comm_pipeline(&mut self, rep: usize, tokens: u64, mb: u32) -> (f64, f64) {
        self.rep_tokens[rep] += tokens as f64;
        let bytes = tokens as f64 / f64::from(mb.max(1)) * self.hidden * 2.0;
        let c = self.comm_now(rep);
        let mut ar = 0.0;
        for (i, st) in c.stages.iter().enumerate() {
            if st.2 > 0.0 && (st.0.b > 0.0 || st.0.a > 0.0) {
                ar += 2.0 * st.2 * c.allreduce_s(i, bytes);
            }
        }
        let boundaries = c.stages.len().saturating_sub(1).max(1) as f64;
        let x = c.pp.at(bytes) / boundaries;
        self.begin_step(rep);
        (ar, x)
    }

    /// Next instant something happens here: a topology event or a KV flow milestone.
    pub fn next_time(&self) -> Option<u64> {
        let ev = self.events.get(self.next_event).map(|e| e.at_ns);
        let fl = self.next_flow_time();
        match (ev, fl) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Topology events not applied: due after the run's work was done (a run ends when every
    /// request is finished or rejected; later events are reported, never applied).
    pub fn events_not_reached(&self) -> usize {
        self.events.len() - self.next_event
    }

    /// Are KV transfers in flight?
    pub fn transfers_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    fn next_flow_time(&self) -> Option<u64> {
        self.flows
            .iter()
            .map(|f| match f.done_at {
                Some(t) => t,
                None if f.rate > 0.0 => self.flows_t + libm::ceil(f.remaining / f.rate) as u64,
                None => u64::MAX,
            })
            .min()
            .filter(|&t| t != u64::MAX)
    }

    /// Advance flows to `now`: data phases that end by then enter their latency tail.
    fn advance(&mut self, now: u64) {
        let dt = now.saturating_sub(self.flows_t) as f64;
        let t0 = self.flows_t;
        for f in self.flows.iter_mut().filter(|f| f.done_at.is_none() && f.rate > 0.0) {
            let end = t0 + libm::ceil(f.remaining / f.rate) as u64;
            if end <= now {
                f.remaining = 0.0;
                f.done_at = Some(end + (f.flow.latency_s * 1e9).round() as u64);
            } else {
                f.remaining -= f.rate * dt;
            }
        }
        self.flows_t = now;
    }

    /// Equal shares of each (link, direction) among flows in their data phase (also the
    /// per-hop KV counts that collectives see).
    fn reshare(&mut self) {
        let count = &mut self.hop_kv;
        count.clear();
        count.resize(2 * self.topo.links.len(), 0);
        self.kv_busy = 0;
        for f in self.flows.iter().filter(|f| f.done_at.is_none()) {
            self.kv_busy += 1;
            for &h in &f.flow.hops {
                count[hop_key(h)] += 1;
            }
        }
        for f in self.flows.iter_mut().filter(|f| f.done_at.is_none()) {
            f.rate = f
                .flow
                .hops
                .iter()
                .map(|&h| self.topo.links[h.0 as usize].bandwidth_gbps / f64::from(count[hop_key(h)]))
                .fold(f64::INFINITY, f64::min);
            if !f.rate.is_finite() {
                f.rate = f64::INFINITY; // same GPU: instantaneous
            }
        }
    }

    /// Start moving request `req`'s KV (`prompt` tokens) from replica `from` to `to`.
    pub fn start_transfer(&mut self, now: u64, req: u32, prompt: u32, from: usize, to: usize) {
        self.advance(now);
        let bytes = f64::from(prompt) * self.kv_bytes_per_token_gpu;
        let mut parts = 0;
        let pairs: Vec<(u32, u32)> = self.placement[from]
            .iter()
            .flatten()
            .zip(self.placement[to].iter().flatten())
            .map(|(&a, &b)| (a, b))
            .collect();
        let multipath = self.topo.routing.multipath_kv;
        for (a, b) in pairs {
            let split = if multipath { frontier_flows(&self.topo, &mut self.routes, a, b) } else { None };
            let split = split.unwrap_or_else(|| {
                vec![(flow(&self.topo, &mut self.routes, a, b).unwrap_or(Flow { hops: Vec::new(), latency_s: 0.0 }), 1.0)]
            });
            let pinned = split.len() > 1;
            for (fl, share) in split {
                let part = bytes * share;
                for &(l, _) in &fl.hops {
                    self.link_bytes[l as usize] += part;
                }
                self.flows.push(KvFlow { req, src: a, dst: b, flow: fl, remaining: part, rate: 0.0, done_at: None, pinned });
                parts += 1;
            }
            self.stats.kv_bytes += bytes;
        }
        self.pending.insert(req, (parts, to as u32, now));
        self.stats.kv_transfers += 1;
        self.reshare();
        // Empty routes (same GPU) finish at once.
        for f in self.flows.iter_mut().filter(|f| f.rate.is_infinite()) {
            f.remaining = 0.0;
            f.done_at = Some(now);
        }
    }

    /// Transfers complete at `now`: (request, destination replica).
    pub fn take_done(&mut self, now: u64) -> Vec<(u32, usize)> {
        self.advance(now);
        let mut out = Vec::new();
        let mut i = 0;
        let mut changed = false;
        while i < self.flows.len() {
            if self.flows[i].done_at.is_some_and(|t| t <= now) {
                let f = self.flows.remove(i);
                changed = true;
                if let Some(p) = self.pending.get_mut(&f.req) {
                    p.0 -= 1;
                    if p.0 == 0 {
                        let (_, to, start) = self.pending.remove(&f.req).unwrap_or((0, 0, now));
                        self.stats.kv_transfer_ms.push((now - start) as f64 / 1e6);
                        out.push((f.req, to as usize));
                    }
                }
            } else {
                i += 1;
            }
        }
        if changed {
            self.reshare();
        }
        out
    }

    /// Is a topology event due at `now`?
    pub fn event_due(&self, now: u64) -> bool {
        self.events.get(self.next_event).is_some_and(|e| e.at_ns <= now)
    }

    /// Add events (runtime injection); those in the past apply at the next instant.
    pub fn inject(&mut self, mut evs: Vec<TopoEvent>, now: u64) {
        for e in &mut evs {
            e.at_ns = e.at_ns.max(now);
        }
        let mut rest = self.events.split_off(self.next_event);
        rest.extend(evs);
        rest.sort_by_key(|e| e.at_ns);
        self.events.extend(rest);
    }

    /// Apply every event due at `now`. Returns the replicas that must stop or may restart.
    pub fn apply_due(&mut self, now: u64) -> Changed {
        let mut actions = Vec::new();
        while let Some(e) = self.events.get(self.next_event).filter(|e| e.at_ns <= now) {
            actions.push(e.action);
            self.next_event += 1;
        }
        self.apply_actions(now, &actions)
    }

    /// Apply actions now: update links, re-route (with hysteresis), re-price replicas,
    /// re-route and re-share KV flows. Returns the replicas that lost a peer or got their
    /// group back.
    pub fn apply_actions(&mut self, now: u64, actions: &[Action]) -> Changed {
        self.advance(now);
        self.settle_capacity(now);
        // Single-link changes re-price only the replicas they reach (see `refresh_only`).
        let mut links: Vec<u32> = Vec::new();
        let mut whole = false;
        self.routes.changed.clear();
        for a in actions {
            let (touched, changed) = self.routes.apply(&mut self.topo, a);
            self.stats.events_applied += 1;
            self.stats.route_changes += u64::from(changed);
            match touched[..] {
                [] => {}
                [l] => links.push(l),
                _ => whole = true,
            }
        }
        if whole {
            return self.refresh(now);
        }
        // Replicas with a pair whose chosen route crosses a changed link or changed itself.
        let mut rep_of = vec![u32::MAX; self.topo.nodes.len()];
        for (r, st) in self.placement.iter().enumerate() {
            for &g in st.iter().flatten() {
                rep_of[g as usize] = r as u32;
            }
        }
        let mut hit = vec![false; self.placement.len()];
        for (key, pr) in &self.routes.pairs {
            let r = rep_of[key.0 as usize];
            if r == u32::MAX || r != rep_of[key.1 as usize] || hit[r as usize] {
                continue;
            }
            let crosses = pr.route().is_none_or(|c| c.path.links.iter().any(|l| links.contains(l)));
            if crosses || self.routes.changed.contains(key) {
                hit[r as usize] = true;
            }
        }
        self.refresh_only(now, Some(&hit))
    }

    /// Replace the whole topology (runtime swap). The placement's GPU ids must exist. GPUs
    /// removed earlier stay removed (their links in the new topology go down).
    pub fn swap(&mut self, now: u64, mut topo: Topology) -> Result<Changed> {
        self.advance(now);
        self.settle_capacity(now);
        let mut placement = self.placement.clone();
        for g in placement.iter_mut().flatten().flatten() {
            let id = &self.topo.nodes[*g as usize].id;
            *g = topo.node("topology", id)?;
        }
        for (r, t) in self.rep_tokens.iter_mut().enumerate() {
            for &(l, b) in &self.rep_bpt[r] {
                self.link_bytes[l as usize] += *t * b;
            }
            *t = 0.0;
            self.rep_bpt[r].clear();
        }
        // Per-link bytes and capacity are kept by link id string across the swap.
        let mut old: BTreeMap<(String, String), (f64, f64)> = BTreeMap::new();
        for ((l, b), c) in self.topo.links.iter().zip(&self.link_bytes).zip(&self.link_capacity) {
            let (a, z) = (&self.topo.nodes[l.src as usize].id, &self.topo.nodes[l.dst as usize].id);
            old.insert((a.clone().min(z.clone()), a.clone().max(z.clone())), (*b, *c));
        }
        let carried: Vec<(f64, f64)> = topo
            .links
            .iter()
            .map(|l| {
                let (a, z) = (&topo.nodes[l.src as usize].id, &topo.nodes[l.dst as usize].id);
                old.get(&(a.clone().min(z.clone()), a.clone().max(z.clone()))).copied().unwrap_or((0.0, 0.0))
            })
            .collect();
        for (n, _) in self.topo.nodes.iter().zip(&self.topo.removed).filter(|x| *x.1) {
            if let Some(&j) = topo.index.get(&n.id) {
                events::apply(&mut topo, &Action::RemoveGpu(j));
            }
        }
        self.link_bytes = carried.iter().map(|x| x.0).collect();
        self.link_capacity = carried.iter().map(|x| x.1).collect();
        for f in &mut self.flows {
            f.src = topo.index.get(&self.topo.nodes[f.src as usize].id).copied().unwrap_or(u32::MAX);
            f.dst = topo.index.get(&self.topo.nodes[f.dst as usize].id).copied().unwrap_or(u32::MAX);
        }
        self.topo = topo;
        self.placement = placement;
        self.routes = RouteTable::default();
        self.stats.events_applied += 1;
        Ok(self.refresh(now))
    }

    /// After a change: stop replicas that lost a peer, restart those whose group is whole
    /// again, re-price the others, re-route flows.
    fn refresh(&mut self, now: u64) -> Changed {
        self.refresh_only(now, None)
    }

    /// [`Fabric::refresh`] limited to the replicas marked in `only` (the others' routes and
    /// the links on them are unchanged, so re-pricing them would give the same costs; their
    /// carried bytes are still settled now, so the per-link sums are added in the same order).
    /// Stopped replicas are always looked at: one restarts when none of its GPUs was removed,
    /// they are connected again and every pair has a route.
    fn refresh_only(&mut self, now: u64, only: Option<&[bool]>) -> Changed {
        let comp = placement::components(&self.topo);
        let mut stopped = Vec::new();
        let mut restarted = Vec::new();
        for rep in 0..self.placement.len() {
            if !self.alive[rep] {
                let gpus = &self.placement[rep];
                let whole = !gpus.iter().flatten().any(|&g| self.topo.removed[g as usize])
                    && placement::disconnected(&comp, gpus).is_none();
                if whole && self.rebuild(rep) {
                    self.alive[rep] = true;
                    self.stats.restarted_replicas += 1;
                    restarted.push(rep);
                }
                continue;
            }
            if only.is_some_and(|o| !o[rep]) {
                let t = std::mem::take(&mut self.rep_tokens[rep]);
                for &(l, b) in &self.rep_bpt[rep] {
                    self.link_bytes[l as usize] += t * b;
                }
                continue;
            }
            let lost = placement::disconnected(&comp, &self.placement[rep]).is_some() || !self.rebuild(rep);
            if lost {
                self.alive[rep] = false;
                self.stats.stopped_replicas += 1;
                stopped.push(rep);
            }
        }
        self.recount();
        // Re-route flows in their data phase; a flow with no route left finishes now (the
        // engine then recomputes that request's KV at the destination).
        let mut flows = std::mem::take(&mut self.flows);
        for f in flows.iter_mut().filter(|f| f.done_at.is_none()) {
            if f.pinned && f.src != u32::MAX && f.flow.hops.iter().all(|h| self.topo.links[h.0 as usize].up) {
                continue; // a multipath part keeps its own path while it is up
            }
            let ok = f.src != u32::MAX && f.dst != u32::MAX;
            match ok.then(|| flow(&self.topo, &mut self.routes, f.src, f.dst)).flatten() {
                Some(fl) => f.flow = fl,
                None => {
                    f.remaining = 0.0;
                    f.done_at = Some(now);
                }
            }
        }
        self.flows = flows;
        self.reshare();
        Changed { stopped, restarted }
    }

    /// Is `to` reachable from `from` for a KV move (both alive)?
    pub fn route_score(&mut self, from: usize, to: usize) -> f64 {
        let (a, b) = (self.placement[from][0][0], self.placement[to][0][0]);
        if a == b {
            return f64::INFINITY;
        }
        self.routes.get(&self.topo, a, b).route().map_or(f64::NEG_INFINITY, |c| c.score)
    }

    /// Add each link's capacity since the last settlement (its current bandwidth, or zero
    /// while down) up to `now`. Called before links change and at the end of the run.
    fn settle_capacity(&mut self, now: u64) {
        let dt = now.saturating_sub(self.capacity_t) as f64 / 1e9;
        if dt > 0.0 {
            for (c, l) in self.link_capacity.iter_mut().zip(&self.topo.links) {
                if l.up {
                    *c += l.bandwidth_gbps * 1e9 * dt;
                }
            }
        }
        self.capacity_t = self.capacity_t.max(now);
    }

    /// The per-link table over a run of `duration_ns`.
    pub fn link_table(&mut self, duration_ns: u64) -> LinkTable {
        self.settle_capacity(duration_ns);
        for rep in 0..self.rep_tokens.len() {
            let t = std::mem::take(&mut self.rep_tokens[rep]);
            for &(l, b) in &self.rep_bpt[rep] {
                self.link_bytes[l as usize] += t * b;
            }
        }
        let mut out = LinkTable::default();
        for ((l, &b), &cap) in self.topo.links.iter().zip(&self.link_bytes).zip(&self.link_capacity) {
            out.src.push(self.topo.nodes[l.src as usize].id.clone());
            out.dst.push(self.topo.nodes[l.dst as usize].id.clone());
            out.kind.push(serde_json::to_value(l.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default());
            out.bandwidth_gbps.push(l.bandwidth_gbps);
            out.nominal_gbps.push(l.nominal_gbps);
            out.latency_us.push(l.latency_us);
            out.up.push(l.up);
            out.bytes.push(b);
            out.utilization.push(if cap > 0.0 { (b / (2.0 * cap)).min(1.0) } else { 0.0 });
        }
        out
    }
}

#[cfg(test)]
mod tests;
