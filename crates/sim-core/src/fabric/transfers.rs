//! KV transfers (`disagg`) as a fluid model (module docs of [`super`]): one flow per GPU
//! pair, sharing each (link, direction) equally among the flows in their data phase, then
//! the route's latency; re-routed when the topology changes.

use super::{Fabric, KvFlow};
use crate::topo::collective::{flow, frontier_flows, hop_key, Flow};
use crate::topo::Topology;

impl Fabric {
    /// Are KV transfers in flight?
    pub fn transfers_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    pub(super) fn next_flow_time(&self) -> Option<u64> {
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
    pub(super) fn advance(&mut self, now: u64) {
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
    pub(super) fn reshare(&mut self) {
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

    /// After the routes changed: re-route flows in their data phase (a multipath part keeps
    /// its own path while it is up); a flow with no route left finishes now (the engine then
    /// recomputes that request's KV at the destination). Then re-share.
    pub(super) fn reroute_flows(&mut self, now: u64) {
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
    }

    /// The flows' GPU ids in a new topology (`u32::MAX` where the GPU is gone).
    pub(super) fn renumber_flows(&mut self, topo: &Topology) {
        for f in &mut self.flows {
            f.src = topo.index.get(&self.topo.nodes[f.src as usize].id).copied().unwrap_or(u32::MAX);
            f.dst = topo.index.get(&self.topo.nodes[f.dst as usize].id).copied().unwrap_or(u32::MAX);
        }
    }
}
