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
//!
//! Expert-parallel all-to-alls ([`all_to_all`], [`A2aLanes`]) are priced with the same flows
//! and lanes, but their flows carry unequal bytes (a forwarder's IB leg carries a whole
//! node's share), so each (link, direction) is charged the bytes its flows carry per byte a
//! rank sends ([`Lanes::weighted`]) and the slowest link paces the whole exchange (the flows
//! are concurrent and DeepEP's forwarding is pipelined). Without a topology,
//! [`default_a2a`] prices the same three modes from the GPU record alone.

use std::collections::BTreeMap;

use super::route::RouteTable;
use super::{LinkKind, NodeKind, Topology};
use crate::catalog::Gpu;

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

    /// The lanes of concurrent flows that carry unequal bytes: `load.w[hop key]` is the bytes
    /// the flows crossing that (link, direction) carry per byte of the quantity priced
    /// (see [`Load`]); each hop's figure is its bandwidth over that load (bytes of the
    /// quantity per second the hop lets through), so [`Lanes::bandwidth`] is the rate the
    /// most loaded hop allows. With every load 1 per flow this is [`Lanes::of`].
    fn weighted(t: &Topology, load: &Load) -> Lanes {
        let hops = load
            .w
            .iter()
            .enumerate()
            .filter(|(_, &w)| w > 0.0)
            .map(|(h, &w)| (h, t.links[h / 2].bandwidth_gbps * 1e9 / w))
            .collect();
        Lanes { alpha: load.alpha, hops }
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

// ---------------------------------------------------------------------------------------
// Expert-parallel all-to-all (MoE dispatch and combine)
// ---------------------------------------------------------------------------------------

/// How an expert-parallel group moves tokens to their experts and back: the three ways
/// [`all_to_all`] prices (`deployment.moe.all_to_all` names them; its `auto` picks one per
/// step, which is the step model's choice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum A2aMode {
    /// DeepEP's normal ("high-throughput") kernels: NVLink inside a scale-up domain; to
    /// another domain over the network once per destination domain, to the GPU of the same
    /// local index, which forwards over NVLink (hierarchical).
    HighThroughput,
    /// DeepEP's low-latency kernels: every peer directly over RDMA (pure RDMA, as DeepEP V1's
    /// README describes them), a small fixed cost. A GPU without a NIC in the topology (the
    /// single-box presets) uses the pair's route instead. DeepEP's
    /// `allow_nvlink_for_low_latency_mode`, which reaches peers of the same node over NVLink,
    /// is not modelled on a topology: peers in the same box or NVL72 rack still go over their
    /// NICs. [`default_a2a`], with no NICs to go by, prices it on NVLink inside one domain.
    LowLatency,
    /// The naive alternative: dispatch as an all-gather of every rank's tokens, combine as a
    /// reduce-scatter, each a ring over the group.
    Allgather,
}

impl A2aMode {
    /// Every mode, in the order [`EpA2a`] and [`A2aLanes`] keep them.
    pub const ALL: [A2aMode; 3] = [A2aMode::HighThroughput, A2aMode::LowLatency, A2aMode::Allgather];

    fn index(self) -> usize {
        match self {
            A2aMode::HighThroughput => 0,
            A2aMode::LowLatency => 1,
            A2aMode::Allgather => 2,
        }
    }

    /// The fixed cost one dispatch (or one combine) adds to its route latencies, s.
    pub fn floor_s(self) -> f64 {
        match self {
            A2aMode::HighThroughput => HT_FLOOR_S,
            A2aMode::LowLatency => LL_FLOOR_S,
            A2aMode::Allgather => ALLGATHER_FLOOR_S,
        }
    }
}

/// Fixed cost of one DeepEP normal (high-throughput) dispatch or combine beyond its route
/// latencies, s. An estimate: DeepEP's README (V1, `docs/legacy.md`) describes the normal
/// dispatch as a layout/notify step and a CPU wait for the GPU's receive counts (which is why
/// it cannot be captured in a CUDA graph), and publishes its bandwidths at 4,096 tokens per
/// batch (153 GB/s NVLink intranode, 43–58 GB/s RDMA internode on H800), not a zero-byte
/// latency; 25 µs stands for two kernel launches and a GPU → CPU → GPU round trip.
pub const HT_FLOOR_S: f64 = 25e-6;

/// Fixed cost of one DeepEP low-latency dispatch or combine beyond its route latencies, s.
/// An estimate bounded by DeepEP's published low-latency table (V1, `docs/legacy.md`, H800
/// with CX7 400 Gb/s, 128 tokens × top-8 × 7,168 hidden, FP8 dispatch): dispatch 77 µs at
/// EP 8, 118 µs at EP 16, 194 µs at EP 256, combine 114–369 µs, latencies dominated by the
/// bytes at 39–127 GB/s; the kernels are CUDA-graph capturable and signal over IBGDA, so the
/// zero-byte part is taken as one launch plus a completion flag, 10 µs.
pub const LL_FLOOR_S: f64 = 10e-6;

/// Fixed cost of one NCCL all-gather or reduce-scatter beyond its ring's hop latencies, s:
/// one kernel launch and its synchronisation, an estimate (10 µs).
pub const ALLGATHER_FLOOR_S: f64 = 10e-6;

/// What an all-to-all costs, one mode per field, each an [`Affine`] of the bytes one rank
/// sends in the exchange (see [`all_to_all`]); `shared` tells how much of its links other
/// traffic takes at the moment it was priced.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EpA2a {
    pub high_throughput: Affine,
    pub low_latency: Affine,
    pub allgather: Affine,
    /// On the group's most used (link, direction), the share of its bandwidth that other
    /// replicas' steps in flight and KV flows in their data phase take right now: 0 when
    /// nothing else uses the group's links, 0.5 with one other party on a link, … (the
    /// affines above are already priced with each link shared that way).
    pub shared: f64,
}

impl EpA2a {
    /// The affine of `mode`.
    pub fn get(&self, mode: A2aMode) -> Affine {
        match mode {
            A2aMode::HighThroughput => self.high_throughput,
            A2aMode::LowLatency => self.low_latency,
            A2aMode::Allgather => self.allgather,
        }
    }
}

/// Per (link, direction) ([`hop_key`]): the bytes the flows crossing it carry per byte of
/// the quantity priced, and the largest latency among those flows (α).
#[derive(Debug, Clone, Default)]
struct Load {
    w: Vec<f64>,
    alpha: f64,
}

impl Load {
    fn new(t: &Topology) -> Load {
        Load { w: vec![0.0; 2 * t.links.len()], alpha: 0.0 }
    }

    /// A flow over `hops` carrying `weight` bytes per byte priced, with latency `latency_s`
    /// from the exchange's start to its last byte's arrival.
    fn add(&mut self, hops: &[(u32, bool)], weight: f64, latency_s: f64) {
        for &h in hops {
            self.w[hop_key(h)] += weight;
        }
        if !hops.is_empty() {
            self.alpha = self.alpha.max(latency_s);
        }
    }

    /// Bytes each link carries (both directions) per byte priced.
    fn per_link(&self) -> Vec<(u32, f64)> {
        self.w
            .chunks(2)
            .enumerate()
            .filter(|(_, d)| d[0] + d[1] > 0.0)
            .map(|(l, d)| (l as u32, d[0] + d[1]))
            .collect()
    }
}

/// Scale-up link kinds (a GPU's NVLink or NVSwitch port, a TPU's ICI): the links of a
/// scale-up domain, over which DeepEP's normal kernels forward and its low-latency ones
/// (as modelled here) do not go.
fn scale_up(kind: LinkKind) -> bool {
    matches!(kind, LinkKind::Nvlink | LinkKind::Nvswitch | LinkKind::Ici)
}

/// Per node: its scale-up domain, the connected component over scale-up links that are up
/// (an HGX box, a GB200 NVL72 rack, a TPU torus; a GPU without such links alone).
fn domains(t: &Topology) -> Vec<u32> {
    let mut uf = petgraph::unionfind::UnionFind::<u32>::new(t.nodes.len());
    for l in t.links.iter().filter(|l| l.up && scale_up(l.kind)) {
        uf.union(l.src, l.dst);
    }
    uf.into_labeling()
}

/// The way from GPU `g` into the network: the lowest-latency path over links that are up
/// and not scale-up, through no other GPU, to the nearest network switch (for the presets
/// `gpu → nic → ib rail`), as forward hops from `g` and their latency, s. `None` when `g`
/// has no such path (a box without NICs, a NIC link down).
fn uplink(t: &Topology, g: u32) -> Option<Uplink> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let ps = |l: u32| (t.links[l as usize].latency_us * 1e6).round() as u64;
    let mut dist: BTreeMap<u32, (u64, Option<u32>)> = BTreeMap::new();
    let mut heap = BinaryHeap::new();
    dist.insert(g, (0, None));
    heap.push(Reverse((0u64, g)));
    while let Some(Reverse((d, u))) = heap.pop() {
        if dist.get(&u).is_some_and(|&(du, _)| d > du) {
            continue;
        }
        if t.nodes[u as usize].kind == NodeKind::Switch {
            let mut hops = Vec::new();
            let mut x = u;
            while let Some((_, Some(li))) = dist.get(&x).copied() {
                let l = &t.links[li as usize];
                let from = if l.dst == x { l.src } else { l.dst };
                hops.push((li, l.src == from));
                x = from;
            }
            hops.reverse();
            return Some((hops, d as f64 * 1e-12));
        }
        if u != g && t.nodes[u as usize].kind == NodeKind::Gpu {
            continue;
        }
        for &(v, li) in &t.adj[u as usize] {
            let l = &t.links[li as usize];
            if !l.up || scale_up(l.kind) || t.removed[v as usize] {
                continue;
            }
            let nd = d + ps(li);
            if dist.get(&v).is_none_or(|&(dv, _)| nd < dv) {
                dist.insert(v, (nd, Some(li)));
                heap.push(Reverse((nd, v)));
            }
        }
    }
    None
}

/// The hops of `up` (a GPU's [`uplink`]) walked the other way: network → GPU.
fn downlink(up: &[(u32, bool)]) -> impl Iterator<Item = (u32, bool)> + '_ {
    up.iter().rev().map(|&(l, f)| (l, !f))
}

/// A GPU's way into the network ([`uplink`]): forward hops and their latency, s.
type Uplink = (Vec<(u32, bool)>, f64);

/// An EP group's view of the fabric: per member, its scale-up domain (as an index into
/// `members`), its local index there, and its way into the network.
struct Group {
    /// Per domain (first-appearance order): the positions in `gpus` of its members.
    members: Vec<Vec<usize>>,
    /// Per position: (domain, local index).
    at: Vec<(usize, usize)>,
    up: Vec<Option<Uplink>>,
}

impl Group {
    fn of(t: &Topology, gpus: &[u32]) -> Group {
        let dom = domains(t);
        let mut labels: Vec<u32> = Vec::new();
        let mut members: Vec<Vec<usize>> = Vec::new();
        let mut at = Vec::with_capacity(gpus.len());
        for (i, &g) in gpus.iter().enumerate() {
            let d = match labels.iter().position(|&x| x == dom[g as usize]) {
                Some(d) => d,
                None => {
                    labels.push(dom[g as usize]);
                    members.push(Vec::new());
                    labels.len() - 1
                }
            };
            at.push((d, members[d].len()));
            members[d].push(i);
        }
        let up = gpus.iter().map(|&g| uplink(t, g)).collect();
        Group { members, at, up }
    }

    /// The RDMA flow from member `i` to member `j`: `i`'s uplink then `j`'s downlink (the
    /// network between their switches taken as non-blocking: rail-optimised clusters join
    /// their rails by a spine the presets leave out), or, when either has no way into the
    /// network, the pair's chosen route.
    fn rdma(&self, t: &Topology, routes: &mut RouteTable, gpus: &[u32], i: usize, j: usize) -> Option<Flow> {
        match (&self.up[i], &self.up[j]) {
            (Some((ui, li)), Some((uj, lj))) => {
                let mut hops = ui.clone();
                hops.extend(downlink(uj));
                Some(Flow { hops, latency_s: li + lj })
            }
            _ => flow(t, routes, gpus[i], gpus[j]),
        }
    }
}

/// DeepEP's normal kernels over `gpus`: each rank's bytes spread evenly over the other
/// p − 1 ranks (w = 1/(p − 1) of them to each); to a peer of its own scale-up domain on the
/// pair's route; to another domain E (m GPUs) once, m·w over the network to E's GPU of the
/// same local index (modulo m), which forwards w to each other member of E on its route.
fn ht_load(t: &Topology, routes: &mut RouteTable, gpus: &[u32], g: &Group) -> Option<Load> {
    let p = gpus.len();
    let w = 1.0 / (p - 1) as f64;
    let mut load = Load::new(t);
    for i in 0..p {
        let (di, li) = g.at[i];
        for (d, members) in g.members.iter().enumerate() {
            if d == di {
                for &j in members.iter().filter(|&&j| j != i) {
                    let f = flow(t, routes, gpus[i], gpus[j])?;
                    load.add(&f.hops, w, f.latency_s);
                }
                continue;
            }
            let m = members.len();
            let fwd = members[li % m];
            let leg = g.rdma(t, routes, gpus, i, fwd)?;
            load.add(&leg.hops, m as f64 * w, leg.latency_s);
            for &j in members.iter().filter(|&&j| j != fwd) {
                let f = flow(t, routes, gpus[fwd], gpus[j])?;
                load.add(&f.hops, w, leg.latency_s + f.latency_s);
            }
        }
    }
    Some(load)
}

/// DeepEP's low-latency kernels over `gpus`: w = 1/(p − 1) of each rank's bytes to every
/// peer directly over RDMA ([`Group::rdma`]), none forwarded.
fn ll_load(t: &Topology, routes: &mut RouteTable, gpus: &[u32], g: &Group) -> Option<Load> {
    let p = gpus.len();
    let w = 1.0 / (p - 1) as f64;
    let mut load = Load::new(t);
    for i in 0..p {
        for j in (0..p).filter(|&j| j != i) {
            let f = g.rdma(t, routes, gpus, i, j)?;
            load.add(&f.hops, w, f.latency_s);
        }
    }
    Some(load)
}

/// A ring all-gather over `gpus` (ring order): p − 1 steps, each rank sending one rank's
/// bytes to its successor each step, so every ring flow carries p − 1 times the bytes of a
/// rank; α is one step's (the slowest ring hop's) latency, counted p − 1 times by the caller.
fn allgather_load(t: &Topology, routes: &mut RouteTable, gpus: &[u32]) -> Option<Load> {
    let steps = (gpus.len() - 1) as f64;
    let mut load = Load::new(t);
    for f in ring_flows(t, routes, gpus)? {
        load.add(&f.hops, steps, f.latency_s);
    }
    Some(load)
}

/// The cost of `mode` from its lanes, each hop's bandwidth divided by `share(hop)`.
fn a2a_affine(mode: A2aMode, ranks: usize, lanes: &Lanes, share: impl Fn(usize) -> f64) -> Affine {
    if ranks < 2 {
        return Affine::default();
    }
    let steps = if mode == A2aMode::Allgather { (ranks - 1) as f64 } else { 1.0 };
    let bw = lanes.bandwidth(share);
    Affine { a: steps * lanes.alpha + mode.floor_s(), b: if bw.is_finite() { 1.0 / bw } else { 0.0 } }
}

/// One expert-parallel group's all-to-alls as [`Lanes`], one per mode, kept (like
/// [`CommLanes`]) to re-price them when other traffic shares their links.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct A2aLanes {
    /// Ranks in the group.
    pub ranks: usize,
    /// Per mode ([`A2aMode::ALL`] order): the exchange's lanes.
    pub modes: [Lanes; 3],
    /// Per mode: each link's bytes (both directions) per byte a rank sends.
    pub link_bytes: [Vec<(u32, f64)>; 3],
    /// Every hop ([`hop_key`]) any mode crosses, sorted, unique.
    pub hops: Vec<usize>,
}

impl A2aLanes {
    /// The lanes of the group `gpus` (the EP ranks of one pipeline stage, in rank order);
    /// `None` when a pair it needs has no route.
    pub fn build(t: &Topology, routes: &mut RouteTable, gpus: &[u32]) -> Option<A2aLanes> {
        let mut out = A2aLanes { ranks: gpus.len(), ..A2aLanes::default() };
        if gpus.len() < 2 {
            return Some(out);
        }
        let g = Group::of(t, gpus);
        let loads = [ht_load(t, routes, gpus, &g)?, ll_load(t, routes, gpus, &g)?, allgather_load(t, routes, gpus)?];
        for (k, load) in loads.iter().enumerate() {
            out.modes[k] = Lanes::weighted(t, load);
            out.link_bytes[k] = load.per_link();
        }
        let mut hops: Vec<usize> = out.modes.iter().flat_map(|l| l.hops.iter().map(|h| h.0)).collect();
        hops.sort_unstable();
        hops.dedup();
        out.hops = hops;
        Some(out)
    }

    /// The cost of `mode` with each hop's bandwidth divided by `share(hop)` (≥ 1; all 1:
    /// the group alone on its links).
    pub fn affine(&self, mode: A2aMode, share: impl Fn(usize) -> f64) -> Affine {
        a2a_affine(mode, self.ranks, &self.modes[mode.index()], share)
    }

    /// Every mode's cost under `share`, and the share of the most used hop others take.
    pub fn price(&self, share: impl Fn(usize) -> f64 + Copy) -> EpA2a {
        let most = self.hops.iter().map(|&h| share(h)).fold(1.0f64, f64::max);
        EpA2a {
            high_throughput: self.affine(A2aMode::HighThroughput, share),
            low_latency: self.affine(A2aMode::LowLatency, share),
            allgather: self.affine(A2aMode::Allgather, share),
            shared: 1.0 - 1.0 / most,
        }
    }

    /// Each link's bytes (both directions) when every rank sends `bytes` in `mode`.
    pub fn bytes_on_links(&self, mode: A2aMode, bytes: f64) -> impl Iterator<Item = (u32, f64)> + '_ {
        self.link_bytes[mode.index()].iter().map(move |&(l, c)| (l, c * bytes))
    }
}

/// An all-to-all over the group `gpus` (the EP ranks of a stage, in rank order) on the
/// topology's routes, as an affine function of the bytes ONE rank sends in the exchange,
/// seconds; `None` when a pair it needs has no route. The bytes are spread evenly over the
/// other p − 1 ranks (for [`A2aMode::Allgather`] the argument is the rank's own bytes, which
/// every other rank receives: p − 1 times as much on the wire). Flows that share a link share
/// its bandwidth, so the most loaded link sets β (one slow IB link slows every exchange whose
/// flows cross it, and none that stays inside a node); α is the slowest flow's route latency
/// (an IB leg plus its NVLink forward for `HighThroughput`; p − 1 ring hops for `Allgather`)
/// plus the mode's kernel floor ([`A2aMode::floor_s`]). One call prices one dispatch or one
/// combine.
pub fn all_to_all(t: &Topology, routes: &mut RouteTable, gpus: &[u32], mode: A2aMode) -> Option<Affine> {
    Some(A2aLanes::build(t, routes, gpus)?.affine(mode, |_| 1.0))
}

/// Latency of a GPU → NVSwitch → GPU path without a topology, s: the presets' (two links of
/// 1 µs), which is also the step model's default hop (`perf::spec::DEFAULT_COMM_LATENCY_US`).
pub const DEFAULT_NVLINK_PATH_S: f64 = 2e-6;
/// Latency of a GPU → NIC → switch → NIC → GPU path without a topology, s (the presets'
/// four links of 1 µs).
pub const DEFAULT_RDMA_PATH_S: f64 = 4e-6;
/// Per-direction bandwidth of the NIC each GPU is assumed to have for traffic that leaves
/// its NVLink domain when no topology is given, bytes/s: 400 Gb/s = 50 GB/s, the ConnectX-7
/// per GPU of HGX H100/H200/B200 and DGX systems (DGX B200 user guide) and of DeepSeek's H800
/// runs (DeepEP's README), capped by the GPU's own PCIe (per direction, half its
/// `pcie_gbps`), which the NIC hangs off.
pub const DEFAULT_NIC_BYTES_PER_S: f64 = 50e9;

/// An all-to-all over `ranks` EP ranks without a topology, from the GPU record alone, in the
/// units of [`all_to_all`] (bytes one rank sends → seconds). The ranks fill NVLink domains of
/// `gpu.nvlink_gpus` GPUs in order. Inside one domain (`ranks ≤ nvlink_gpus`) every mode
/// runs on NVLink at half `gpu.nvlink_gbps` per direction, B: high-throughput and
/// low-latency `α + n/B` (every rank's n leaves over its own link), all-gather a ring,
/// `(p−1)·α + (p−1)·n/B`. Beyond one domain every GPU is assumed to have its own 400 Gb/s
/// (50 GB/s, [`DEFAULT_NIC_BYTES_PER_S`]) NIC for the traffic that leaves its domain, the
/// domains joined by a non-blocking network: high-throughput sends the remote share
/// f = (p − k)/(p − 1) over the NIC and, with the forwarding, d·(k − 1)/(p − 1) of n over
/// NVLink (d = ⌈p/k⌉ domains), the slower of the two pacing; low-latency sends all of n
/// over the NIC; the all-gather ring crosses the NIC at its slowest hop. α: the paths'
/// latencies ([`DEFAULT_NVLINK_PATH_S`], [`DEFAULT_RDMA_PATH_S`]) plus the mode's floor. The
/// same formulas as [`all_to_all`] gives on an HGX preset (`hgx-h200`, `2x-hgx-h200-ib`).
pub fn default_a2a(gpu: &Gpu, ranks: u32, mode: A2aMode) -> Affine {
    if ranks < 2 {
        return Affine::default();
    }
    let p = f64::from(ranks);
    let k = f64::from(gpu.nvlink_gpus.max(1));
    let nvl = gpu.nvlink_gbps * 1e9 / 2.0;
    let floor = mode.floor_s();
    if ranks <= gpu.nvlink_gpus {
        return match mode {
            A2aMode::HighThroughput | A2aMode::LowLatency => Affine { a: DEFAULT_NVLINK_PATH_S + floor, b: 1.0 / nvl },
            A2aMode::Allgather => Affine { a: (p - 1.0) * DEFAULT_NVLINK_PATH_S + floor, b: (p - 1.0) / nvl },
        };
    }
    let nic = DEFAULT_NIC_BYTES_PER_S.min(gpu.pcie_gbps * 1e9 / 2.0);
    match mode {
        A2aMode::HighThroughput => {
            let remote = (p - k) / (p - 1.0);
            let forwarded = (p / k).ceil() * (k - 1.0) / (p - 1.0);
            let b = (remote / nic).max(forwarded / nvl);
            let a = if k > 1.0 { DEFAULT_RDMA_PATH_S + DEFAULT_NVLINK_PATH_S } else { DEFAULT_RDMA_PATH_S };
            Affine { a: a + floor, b }
        }
        A2aMode::LowLatency => Affine { a: DEFAULT_RDMA_PATH_S + floor, b: 1.0 / nic },
        A2aMode::Allgather => {
            let hop = if k > 1.0 { DEFAULT_RDMA_PATH_S + DEFAULT_NVLINK_PATH_S } else { DEFAULT_RDMA_PATH_S };
            Affine { a: (p - 1.0) * hop + floor, b: (p - 1.0) / nic.min(nvl) }
        }
    }
}
