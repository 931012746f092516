//! Per-link accounting: the bytes each link carried (collectives and PP transfers settled
//! from each replica's tokens, KV flows as they start) and the capacity it offered (its
//! bandwidth while up, integrated over time), for the result's link table.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Fabric;
use crate::topo::Topology;

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

impl Fabric {
    /// Add the bytes replica `rep`'s steps put on each link since the last settlement
    /// (its tokens × its bytes per token there) and start counting again. Called before its
    /// communication is re-priced and at the end of the run.
    pub(super) fn settle_link_bytes(&mut self, rep: usize) {
        let t = std::mem::take(&mut self.rep_tokens[rep]);
        for &(l, b) in &self.rep_bpt[rep] {
            self.link_bytes[l as usize] += t * b;
        }
    }

    /// Settle every replica's bytes and carry each link's bytes and capacity over to `topo`
    /// (a swapped topology), matching links by their endpoints' ids; a new link starts at
    /// zero.
    pub(super) fn carry_links_to(&mut self, topo: &Topology) {
        for r in 0..self.rep_tokens.len() {
            self.settle_link_bytes(r);
            self.rep_bpt[r].clear();
        }
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
        self.link_bytes = carried.iter().map(|x| x.0).collect();
        self.link_capacity = carried.iter().map(|x| x.1).collect();
    }

    /// Add each link's capacity since the last settlement (its current bandwidth, or zero
    /// while down) up to `now`. Called before links change and at the end of the run.
    pub(super) fn settle_capacity(&mut self, now: u64) {
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
            self.settle_link_bytes(rep);
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
