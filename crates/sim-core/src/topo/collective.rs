//! Collectives priced with α–β costs on the chosen routes.
//!
//! A collective is a set of concurrent point-to-point *flows*, each following the chosen
//! route of its GPU pair. Flows that cross the same link in the same direction share its
//! bandwidth equally, so a flow's bandwidth is `min over its links of bw / flows on it`;
//! a collective's α is the largest route latency among its flows and its β the smallest
//! flow bandwidth (the slowest flow paces every step). With p GPUs and n bytes:
//! * ring AllReduce: `2(p−1)·α + 2(p−1)/p · n / B` (reduce-scatter then all-gather);
//! * tree AllReduce: `2⌈log2 p⌉·α + 2·n / B` (pipelined reduce up a binary tree, broadcast
//!   down); cheaper for small n, the ring for large n — [`Comm::allreduce_s`] takes the min;
//! * send/recv (a pipeline stage's activations): `α + n / B`.
//!
//! Traffic of *other* replicas and KV transfers on the same links is a separate input:
//! [`CommLanes`] keeps, per collective, the links its flows cross and the bandwidth each flow
//! gets there on its own, so the engine can re-price a step with each link's bandwidth
//! divided among the replicas using it at that moment (see [`crate::fabric`]).

use std::collections::BTreeMap;

use super::route::RouteTable;
use super::Topology;

/// `a + b · bytes`, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Affine {
    /// Fixed part, s.
    pub a: f64,
    /// Seconds per byte.
    pub b: f64,
}

impl Affine {
    #[inline]
    pub fn at(&self, bytes: f64) -> f64 {
        self.a + self.b * bytes
    }
}

/// A point-to-point flow along a chosen route: `(link, forward)` hops and its latency.
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    pub hops: Vec<(u32, bool)>,
    pub latency_s: f64,
}

/// The flow `u → v` on the chosen route, `None` when the pair has no path. `u == v` is an
/// empty flow (no cost).
pub fn flow(t: &Topology, routes: &mut RouteTable, u: u32, v: u32) -> Option<Flow> {
    if u == v {
        return Some(Flow { hops: Vec::new(), latency_s: 0.0 });
    }
    let r = routes.get(t, u, v).route()?;
    Some(flow_on(t, r, u))
}

/// The flow from `u` along candidate `c` of `u`'s pair (its path oriented from `u`).
pub fn flow_on(t: &Topology, c: &super::route::Candidate, u: u32) -> Flow {
    let p = &c.path;
    let forward_path = p.nodes[0] == u;
    let n = p.links.len();
    let mut hops = Vec::with_capacity(n);
    for i in 0..n {
        let (j, from) = if forward_path { (i, p.nodes[i]) } else { (n - 1 - i, p.nodes[n - i]) };
        let li = p.links[j];
        hops.push((li, t.links[li as usize].src == from));
    }
    Flow { hops, latency_s: c.latency_us * 1e-6 }
}

/// The flows `u → v` over every path of the pair's Pareto frontier, each with the fraction
/// of the bytes it carries (its bottleneck bandwidth over the frontier's sum), best latency
/// first; `None` when the pair has no path. `u == v` is one empty flow.
pub fn frontier_flows(t: &Topology, routes: &mut RouteTable, u: u32, v: u32) -> Option<Vec<(Flow, f64)>> {
    if u == v {
        return Some(vec![(Flow { hops: Vec::new(), latency_s: 0.0 }, 1.0)]);
    }
    let r = routes.get(t, u, v);
    r.route()?;
    let total: f64 = r.frontier().map(|c| c.bandwidth_gbps).sum();
    Some(r.frontier().map(|c| (flow_on(t, c, u), c.bandwidth_gbps / total)).collect())
}

/// Index of a (link, direction) hop in per-hop tables: `2·link + forward`.
#[inline]
pub fn hop_key(h: (u32, bool)) -> usize {
    h.0 as usize * 2 + usize::from(h.1)
}

/// The links a set of concurrent flows crosses (one collective, or one stage boundary's
/// send/recv), kept so that its cost can be re-priced when other traffic shares them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lanes {
    /// α: the largest route latency among the flows, s.
    pub alpha: f64,
    /// Each (link, direction) crossed, as ([`hop_key`], bytes/s one flow of the set gets
    /// there: the link's bandwidth over the set's flows on it), in hop order.
    pub hops: Vec<(usize, f64)>,
}

impl Lanes {
    /// The lanes of concurrent `flows`.
    pub fn of(t: &Topology, flows: &[Flow]) -> Lanes {
        let mut count: BTreeMap<(u32, bool), u32> = BTreeMap::new();
        let mut alpha: f64 = 0.0;
        for f in flows {
            alpha = alpha.max(f.latency_s);
            for &h in &f.hops {
                *count.entry(h).or_insert(0) += 1;
            }
        }
        let hops = count
            .into_iter()
            .map(|(h, n)| (hop_key(h), t.links[h.0 as usize].bandwidth_gbps * 1e9 / f64::from(n)))
            .collect();
        Lanes { alpha, hops }
    }

    /// B: the smallest per-flow bandwidth, bytes/s, when each hop's is further divided by
    /// `share(hop key)` (≥ 1: how many parties use the link in that direction now). With
    /// every share 1 this is exactly the set's own bandwidth (x / 1.0 = x).
    #[inline]
    pub fn bandwidth(&self, share: impl Fn(usize) -> f64) -> f64 {
        self.hops.iter().fold(f64::INFINITY, |b, &(h, bw)| b.min(bw / share(h)))
    }
}

/// (α = largest latency, B = smallest shared bandwidth in bytes/s) of concurrent flows.
pub fn shared(t: &Topology, flows: &[Flow]) -> (f64, f64) {
    let l = Lanes::of(t, flows);
    (l.alpha, l.bandwidth(|_| 1.0))
}

fn ring_affine(p: usize, alpha: f64, b: f64) -> Affine {
    let pf = p as f64;
    Affine { a: 2.0 * (pf - 1.0) * alpha, b: 2.0 * (pf - 1.0) / pf / b }
}

fn tree_affine(p: usize, alpha: f64, b: f64) -> Affine {
    Affine { a: 2.0 * ceil_log2(p) * alpha, b: 2.0 / b }
}

fn send_recv_affine(pairs: usize, alpha: f64, b: f64) -> Affine {
    Affine { a: alpha, b: 1.0 / (b * pairs.max(1) as f64) }
}

fn ring_flows(t: &Topology, routes: &mut RouteTable, gpus: &[u32]) -> Option<Vec<Flow>> {
    let p = gpus.len();
    (0..p).map(|i| flow(t, routes, gpus[i], gpus[(i + 1) % p])).collect()
}

fn tree_flows(t: &Topology, routes: &mut RouteTable, gpus: &[u32]) -> Option<Vec<Flow>> {
    (1..gpus.len()).map(|i| flow(t, routes, gpus[i], gpus[(i - 1) / 2])).collect()
}

fn ceil_log2(p: usize) -> f64 {
    (usize::BITS - (p.max(1) - 1).leading_zeros()) as f64
}

/// Ring AllReduce over `gpus` (ring order), as an affine function of the bytes reduced.
pub fn ring_allreduce(t: &Topology, routes: &mut RouteTable, gpus: &[u32]) -> Option<Affine> {
    let p = gpus.len();
    if p < 2 {
        return Some(Affine::default());
    }
    let (alpha, b) = shared(t, &ring_flows(t, routes, gpus)?);
    Some(ring_affine(p, alpha, b))
}

/// Binary-tree AllReduce over `gpus` (`gpus[0]` the root, parent of i is (i−1)/2).
pub fn tree_allreduce(t: &Topology, routes: &mut RouteTable, gpus: &[u32]) -> Option<Affine> {
    let p = gpus.len();
    if p < 2 {
        return Some(Affine::default());
    }
    let (alpha, b) = shared(t, &tree_flows(t, routes, gpus)?);
    Some(tree_affine(p, alpha, b))
}

/// The communication of one replica, cached between topology changes: per stage the ring
/// and tree AllReduce of its TP group, and the stage-to-stage activation transfers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Comm {
    /// Per stage: (ring, tree, layers in the stage).
    pub stages: Vec<(Affine, Affine, f64)>,
    /// Σ over stage boundaries of the send/recv cost (affine in the activation bytes).
    pub pp: Affine,
}

impl Comm {
    /// The cheaper AllReduce of stage `s` for `bytes`.
    #[inline]
    pub fn allreduce_s(&self, s: usize, bytes: f64) -> f64 {
        let (ring, tree, _) = &self.stages[s];
        ring.at(bytes).min(tree.at(bytes))
    }

    /// Communication time of one step of `tokens` tokens with hidden size `hidden`
    /// (bf16 activations): 2 AllReduces per layer in every stage, plus the PP transfers.
    #[inline]
    pub fn step_s(&self, tokens: f64, hidden: f64) -> f64 {
        let bytes = tokens * hidden * 2.0;
        let mut s = if self.stages.len() > 1 { self.pp.at(bytes) } else { 0.0 };
        for (i, st) in self.stages.iter().enumerate() {
            if st.2 > 0.0 && (st.0.b > 0.0 || st.0.a > 0.0) {
                s += 2.0 * st.2 * self.allreduce_s(i, bytes);
            }
        }
        s
    }

    /// Build from a placement: `stages[s]` the GPUs of stage s (TP rank order), one TP group
    /// per stage.
    pub fn build(t: &Topology, routes: &mut RouteTable, stages: &[Vec<u32>], layers: f64) -> Option<Comm> {
        Some(Comm::build_lanes(t, routes, stages, layers)?.0)
    }

    /// [`Comm::build`] plus the lanes that re-price it under sharing with other traffic.
    pub fn build_lanes(t: &Topology, routes: &mut RouteTable, stages: &[Vec<u32>], layers: f64) -> Option<(Comm, CommLanes)> {
        Comm::build_ranks(t, routes, stages, None, layers)
    }

    /// [`Comm::build_lanes`] for stages of data-parallel ranks: each stage is its DP ranks'
    /// TP groups of `tp` consecutive GPUs (`None`: the whole stage is one TP group). The
    /// groups of a stage all-reduce at once (each on its own tokens), so a stage's ring and
    /// tree are priced over all its groups' flows together: a TP group of `tp` GPUs whose
    /// slowest flow, links shared with the other groups' flows, paces them all. A stage
    /// boundary's send/recv sends each rank's activations over its `tp` GPU pairs. With one
    /// group per stage (`dp = 1`) this is exactly [`Comm::build_lanes`] as it has always been.
    pub fn build_ranks(
        t: &Topology,
        routes: &mut RouteTable,
        stages: &[Vec<u32>],
        tp: Option<usize>,
        layers: f64,
    ) -> Option<(Comm, CommLanes)> {
        let per_stage = layers / stages.len().max(1) as f64;
        let size = |g: &[u32]| tp.unwrap_or(g.len()).clamp(1, g.len().max(1));
        let mut lanes = CommLanes::default();
        for g in stages {
            let p = size(g);
            let (ring, tree) = if p < 2 {
                (Lanes::default(), Lanes::default())
            } else {
                let (mut ring, mut tree) = (Vec::new(), Vec::new());
                for group in g.chunks(p) {
                    ring.extend(ring_flows(t, routes, group)?);
                    tree.extend(tree_flows(t, routes, group)?);
                }
                (Lanes::of(t, &ring), Lanes::of(t, &tree))
            };
            lanes.stages.push((p, ring, tree, per_stage));
        }
        for w in stages.windows(2) {
            let flows: Option<Vec<Flow>> = w[0].iter().zip(&w[1]).map(|(&a, &b)| flow(t, routes, a, b)).collect();
            let flows = flows?;
            let x = (!flows.iter().all(|f| f.hops.is_empty())).then(|| Lanes::of(t, &flows));
            lanes.pp.push((x, size(&w[0])));
        }
        let mut hops: Vec<usize> = lanes
            .stages
            .iter()
            .flat_map(|s| s.1.hops.iter().chain(&s.2.hops))
            .chain(lanes.pp.iter().filter_map(|x| x.0.as_ref()).flat_map(|l| &l.hops))
            .map(|h| h.0)
            .collect();
        hops.sort_unstable();
        hops.dedup();
        lanes.hops = hops;
        let mut c = Comm::default();
        lanes.price(|_| 1.0, &mut c);
        Some((c, lanes))
    }
}

/// A replica's collectives and PP transfers as [`Lanes`]: what [`Comm`] is built from,
/// kept to re-price it when other traffic shares its links.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommLanes {
    /// Per stage: (TP size, ring AllReduce lanes, tree AllReduce lanes, layers in the stage);
    /// with several DP ranks a stage's lanes hold every rank's TP group's flows.
    pub stages: Vec<(usize, Lanes, Lanes, f64)>,
    /// Per stage boundary: (its send/recv lanes, `None` when every pair is one GPU; the GPU
    /// pairs one rank's activations are split over, its `tp`).
    pub pp: Vec<(Option<Lanes>, usize)>,
    /// Every hop ([`hop_key`]) any of them crosses, sorted, unique.
    pub hops: Vec<usize>,
}

impl CommLanes {
    /// The replica's [`Comm`] with each hop's bandwidth divided by `share(hop)`; with every
    /// share 1 it is exactly the one [`Comm::build`] returns (same operations, same order).
    pub fn price(&self, share: impl Fn(usize) -> f64 + Copy, out: &mut Comm) {
        out.stages.clear();
        for (p, ring, tree, layers) in &self.stages {
            if *p < 2 {
                out.stages.push((Affine::default(), Affine::default(), *layers));
            } else {
                let r = ring_affine(*p, ring.alpha, ring.bandwidth(share));
                out.stages.push((r, tree_affine(*p, tree.alpha, tree.bandwidth(share)), *layers));
            }
        }
        out.pp = Affine::default();
        for (lanes, pairs) in &self.pp {
            if let Some(l) = lanes {
                let x = send_recv_affine(*pairs, l.alpha, l.bandwidth(share));
                out.pp.a += x.a;
                out.pp.b += x.b;
            }
        }
    }
}

/// Makespan of a pipeline of stages with compute `stage_s[i]` per micro-batch and transfer
/// `xfer_s[i]` after stage i (one fewer than stages), for `micro_batches` micro-batches: the
/// first micro-batch crosses every stage and transfer, each further one leaves one period
/// later, the period being the slowest stage or transfer (it bounds throughput).
pub fn pipeline_makespan(stage_s: &[f64], xfer_s: &[f64], micro_batches: u32) -> f64 {
    let first: f64 = stage_s.iter().sum::<f64>() + xfer_s.iter().sum::<f64>();
    let period = stage_s.iter().chain(xfer_s).fold(0.0f64, |m, &x| m.max(x));
    first + f64::from(micro_batches.max(1) - 1) * period
}

