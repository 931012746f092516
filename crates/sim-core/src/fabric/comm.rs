//! Each replica's communication, priced on its routes: TP AllReduces (each DP rank's TP
//! group), PP transfers and, with expert parallelism, each stage's all-to-alls, cached per
//! replica between topology changes ([`Fabric::rebuild`]), re-priced for a step
//! whose links another replica's step in flight or a KV flow shares (module docs of
//! [`super`]), and the topology-aware router's probe.

use std::collections::BTreeMap;

use super::Fabric;
use crate::topo::collective::{flow, A2aLanes, A2aMode, Affine, Comm, EpA2a};

impl Fabric {
    /// Recompute which replicas can share links with another and the in-flight counts per
    /// hop, after routes or the set of live replicas changed.
    pub(super) fn recount(&mut self) {
        let hops = 2 * self.topo.links.len();
        let mut users = vec![0u32; hops];
        for (r, l) in self.step_hops.iter().enumerate() {
            if self.alive[r] {
                l.iter().for_each(|&h| users[h] += 1);
            }
        }
        self.hop_steps.clear();
        self.hop_steps.resize(hops, 0);
        for (r, l) in self.step_hops.iter().enumerate() {
            self.overlap[r] = self.alive[r] && l.iter().any(|&h| users[h] > 1);
            if !self.alive[r] {
                self.in_flight[r] = false;
            }
            if self.overlap[r] && self.in_flight[r] {
                l.iter().for_each(|&h| self.hop_steps[h] += 1);
            }
        }
    }

    /// Re-price replica `rep`'s communication; `false` when a peer is unreachable.
    pub(super) fn rebuild(&mut self, rep: usize) -> bool {
        self.settle_link_bytes(rep);
        let stages = &self.placement[rep];
        let tp = Some(self.tp);
        let Some((c, lanes)) = Comm::build_ranks(&self.topo, &mut self.routes, stages, tp, self.layers) else { return false };
        let mut a2a = Vec::new();
        if self.ep {
            for g in stages {
                let Some(l) = A2aLanes::build(&self.topo, &mut self.routes, g) else { return false };
                a2a.push(l);
            }
        }
        // Bytes per token on each link: ring AllReduces (2 per layer, each flow 2(p−1)/p of
        // the activations, every DP rank's TP group of p GPUs) and the PP sends (1/tp of the
        // activations per rank pair). With dp > 1 each DP rank is charged the step's tokens.
        let act = self.hidden * 2.0;
        let mut bpt: BTreeMap<u32, f64> = BTreeMap::new();
        for (s, g) in stages.iter().enumerate() {
            let size = self.tp.min(g.len()).max(1);
            let p = size as f64;
            for group in g.chunks(size).filter(|grp| grp.len() > 1) {
                let per = 2.0 * c.stages[s].2 * 2.0 * (p - 1.0) / p * act;
                for i in 0..group.len() {
                    if let Some(fl) = flow(&self.topo, &mut self.routes, group[i], group[(i + 1) % group.len()]) {
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
        let mut hops = lanes.hops.clone();
        if !a2a.is_empty() {
            hops.extend(a2a.iter().flat_map(|l| l.hops.iter().copied()));
            hops.sort_unstable();
            hops.dedup();
        }
        self.step_hops[rep] = hops;
        self.lanes[rep] = lanes;
        self.a2a_alone[rep] = (!a2a.is_empty()).then(|| stage_mean(&a2a, |_| 1.0));
        self.a2a[rep] = a2a;
        true
    }

    /// Replica `rep`'s expert-parallel all-to-alls for a step starting now, per mode an
    /// [`Affine`] of the bytes one EP rank sends (one dispatch or one combine of one MoE
    /// layer), averaged over its pipeline stages (each stage is its own EP group; with
    /// `pp = 1` the stage's), and priced with each of their links shared among the other
    /// replicas whose step in flight uses it and the KV flows on it, as
    /// [`Fabric::step_comm_s`] prices the TP AllReduces (this replica's own step in flight,
    /// if [`Fabric::step_comm_s`] was called first, does not count). `shared` says how much
    /// of its most used link the others take. `None` without expert parallelism or when the
    /// replica is stopped. Nothing is counted or marked in flight.
    pub fn ep_a2a(&mut self, rep: usize) -> Option<EpA2a> {
        let alone = self.a2a_alone.get(rep).copied().flatten().filter(|_| self.alive[rep])?;
        let shared = self.overlap[rep] || self.kv_busy > 0;
        if !shared {
            return Some(alone);
        }
        let (steps, kv) = (&self.hop_steps, &self.hop_kv);
        let own = u32::from(self.in_flight[rep] && self.overlap[rep]);
        let others = |h: usize| steps[h] - own + kv[h];
        let stages = &self.a2a[rep];
        if !stages.iter().flat_map(|l| &l.hops).any(|&h| others(h) > 0) {
            return Some(alone);
        }
        Some(stage_mean(stages, |h| f64::from(1 + others(h))))
    }

    /// [`Fabric::ep_a2a`] of stage `stage` alone (its own EP group), shared as it is now.
    pub fn ep_a2a_stage(&mut self, rep: usize, stage: usize) -> Option<EpA2a> {
        if !self.alive.get(rep).copied().unwrap_or(false) {
            return None;
        }
        let (steps, kv) = (&self.hop_steps, &self.hop_kv);
        let own = u32::from(self.in_flight[rep] && self.overlap[rep]);
        let l = self.a2a[rep].get(stage)?;
        Some(l.price(|h| f64::from(1 + steps[h] - own + kv[h])))
    }

    /// Count on the links the bytes of one all-to-all of replica `rep` in `mode` where every
    /// EP rank of every stage sends `bytes_per_rank` (the result's per-link table; pricing is
    /// [`Fabric::ep_a2a`]'s). Nothing without expert parallelism.
    pub fn count_ep_bytes(&mut self, rep: usize, mode: A2aMode, bytes_per_rank: f64) {
        if !self.alive.get(rep).copied().unwrap_or(false) {
            return;
        }
        for l in &self.a2a[rep] {
            for (link, b) in l.bytes_on_links(mode, bytes_per_rank) {
                if let Some(x) = self.link_bytes.get_mut(link as usize) {
                    *x += b;
                }
            }
        }
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
            self.step_hops[rep].iter().for_each(|&h| self.hop_steps[h] += 1);
        }
    }

    /// Replica `rep`'s step in flight ended: its links are free of it.
    #[inline]
    pub fn end_step(&mut self, rep: usize) {
        if std::mem::take(&mut self.in_flight[rep]) && self.overlap[rep] {
            self.step_hops[rep].iter().for_each(|&h| self.hop_steps[h] -= 1);
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
}

/// Every mode's cost over a replica's stages (each its own EP group) under `share`: per mode
/// the mean of the stages' α and β (a step's MoE layers are spread evenly over its stages),
/// and the largest `shared` of any stage.
fn stage_mean(stages: &[A2aLanes], share: impl Fn(usize) -> f64 + Copy) -> EpA2a {
    let n = stages.len().max(1) as f64;
    let mut out = EpA2a::default();
    let add = |acc: &mut Affine, x: Affine| {
        acc.a += x.a / n;
        acc.b += x.b / n;
    };
    for l in stages {
        let x = l.price(share);
        add(&mut out.high_throughput, x.high_throughput);
        add(&mut out.low_latency, x.low_latency);
        add(&mut out.allgather, x.allgather);
        out.shared = out.shared.max(x.shared);
    }
    out
}
