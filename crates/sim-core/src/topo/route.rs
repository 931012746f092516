//! RTMPv2 routing (seed §2.3, DESIGN "Topology").
//!
//! For a GPU pair the candidates are the k shortest loop-free paths by summed latency over
//! links that are up (Yen's algorithm over a Dijkstra with reusable buffers). Each candidate has
//! B = bottleneck bandwidth (GB/s per direction) and D = summed latency (µs), and the score
//! `w = α·B/B_min + (1−α)·D_max/D`: α = 0.65 by default, B_min the nominal cluster
//! bandwidth (the smallest link bandwidth as loaded, so scores stay comparable across
//! events), D_max the largest candidate latency seen for this pair so far. The best-scoring
//! candidate is chosen; afterwards a route is replaced only when a candidate beats it by
//! more than the hysteresis (3%), or when it breaks (a link on it went down). Candidates
//! not dominated in (higher B, lower D) form the Pareto frontier; the choice is made among
//! them, and a KV transfer may split its bytes over all of them (`routing.multipath_kv`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::events::{self, Action};
use super::Topology;

/// A loop-free path: node indices and the links between them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Path {
    pub nodes: Vec<u32>,
    pub links: Vec<u32>,
}

/// One candidate path with its RTMPv2 numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub path: Path,
    /// Bottleneck bandwidth, GB/s per direction.
    pub bandwidth_gbps: f64,
    /// Summed latency, µs.
    pub latency_us: f64,
    pub score: f64,
    pub frontier: bool,
}

/// Integer path cost: latency in picoseconds × 16 + 1 per hop, so equal latencies prefer
/// fewer hops and ties are exact.
fn cost(t: &Topology, link: u32) -> u64 {
    let l = &t.links[link as usize];
    (l.latency_us * 1e6).round() as u64 * 16 + 1
}

/// A min-priority queue of nodes bucketed by exact key. Path costs on a fabric take few
/// distinct values (multiples of the link latencies plus hop counts), so a search's frontier
/// sits in a handful of buckets: push and pop are a vector push/pop plus an ordered-map
/// lookup over those few keys (a binary heap of the same entries cost 60% of a re-route).
/// Nodes of equal key pop in any order: neither search below depends on it.
#[derive(Debug, Default)]
struct Buckets {
    map: BTreeMap<u64, Vec<u32>>,
    spare: Vec<Vec<u32>>,
}

impl Buckets {
    fn push(&mut self, key: u64, node: u32) {
        let spare = &mut self.spare;
        self.map.entry(key).or_insert_with(|| spare.pop().unwrap_or_default()).push(node);
    }

    fn pop(&mut self) -> Option<(u64, u32)> {
        let mut e = self.map.first_entry()?;
        let key = *e.key();
        let node = e.get_mut().pop().unwrap_or(u32::MAX);
        if e.get().is_empty() {
            self.spare.push(e.remove());
        }
        Some((key, node))
    }

    fn clear(&mut self) {
        while let Some((_, v)) = self.map.pop_first() {
            let mut v = v;
            v.clear();
            self.spare.push(v);
        }
    }
}

/// Reusable buffers of [`shortest`] for one `k_shortest` call: the integer link costs, the
/// distances to the destination (the A* heuristic), and lazily reset search arrays.
#[derive(Debug, Default)]
struct Scratch {
    /// Per link: [`cost`], or `u64::MAX` when the link is down.
    cost: Vec<u64>,
    /// The destination.
    d: u32,
    /// Per node: shortest distance to the destination over links that are up.
    h: Vec<u64>,
    g: Vec<u64>,
    closed: Vec<bool>,
    touched: Vec<u32>,
    heap: Buckets,
    /// Yen's root nodes (all false between spur searches).
    banned_nodes: Vec<bool>,
}

/// Most destinations whose buffers [`Scratches`] keeps (each is a few arrays the size of
/// the fabric).
const MAX_SCRATCHES: usize = 32;

/// [`Scratch`]es by destination, for the pairs re-routed after one change: they see the
/// same topology, so pairs toward the same GPU share one reverse Dijkstra.
#[derive(Debug, Default)]
pub(crate) struct Scratches(Vec<Scratch>);

impl Scratches {
    fn for_dst(&mut self, t: &Topology, d: u32) -> &mut Scratch {
        match self.0.iter().position(|sc| sc.d == d) {
            Some(i) => &mut self.0[i],
            None => {
                // Bounded (a whole re-route touches every destination): oldest out first.
                if self.0.len() >= MAX_SCRATCHES {
                    self.0.remove(0);
                }
                self.0.push(Scratch::new(t, d));
                self.0.last_mut().unwrap_or_else(|| unreachable!())
            }
        }
    }
}

impl Scratch {
    /// Link costs and the distances of every node to `d` (a plain Dijkstra from `d`).
    fn new(t: &Topology, d: u32) -> Scratch {
        let n = t.nodes.len();
        let cost: Vec<u64> = (0..t.links.len() as u32).map(|l| if t.links[l as usize].up { cost(t, l) } else { u64::MAX }).collect();
        let mut h = vec![u64::MAX; n];
        let mut heap = Buckets::default();
        h[d as usize] = 0;
        heap.push(0, d);
        while let Some((du, u)) = heap.pop() {
            if du > h[u as usize] {
                continue;
            }
            for &(v, li) in &t.adj[u as usize] {
                let c = cost[li as usize];
                if c == u64::MAX {
                    continue;
                }
                let nd = du + c;
                if nd < h[v as usize] {
                    h[v as usize] = nd;
                    heap.push(nd, v);
                }
            }
        }
        Scratch { cost, d, h, g: vec![u64::MAX; n], closed: vec![false; n], touched: Vec::new(), heap, banned_nodes: vec![false; n] }
    }
}

/// Shortest path from `s` to the destination of `sc` over links that are up, avoiding
/// `banned_links` and `banned_nodes`, and no costlier than `limit`.
///
/// The result is exactly the path of a plain Dijkstra that settles nodes in (distance, node
/// index) order and keeps the first predecessor that reaches a node at its distance: that
/// predecessor is the tight one (g(u) + c = g(v)) with the smallest (g(u), u), the first
/// such link in u's adjacency list. Yen runs this search once per spur node, hundreds per
/// pair on a large fabric, so it is an A* guided by the exact distances to the destination
/// without bans (admissible and consistent under any bans): it settles only the nodes whose
/// f = g + h is at most the optimum (all of them, so every tight predecessor of a node on an
/// optimal path has its exact g), then rebuilds the path backwards by the rule above. On
/// the 512-GPU fabric this settles a few hundred of its 1,616 nodes per search.
fn shortest(t: &Topology, s: u32, banned_links: &[u32], banned_nodes: &[bool], limit: u64, sc: &mut Scratch) -> Option<Path> {
    for &x in &sc.touched {
        sc.g[x as usize] = u64::MAX;
        sc.closed[x as usize] = false;
    }
    sc.touched.clear();
    sc.heap.clear();
    let d = sc.d;
    if sc.h[s as usize] == u64::MAX || sc.h[s as usize] > limit {
        return None;
    }
    let usable = |sc: &Scratch, li: u32, v: u32| sc.cost[li as usize] != u64::MAX && !banned_nodes[v as usize] && !banned_links.contains(&li);
    sc.g[s as usize] = 0;
    sc.touched.push(s);
    sc.heap.push(sc.h[s as usize], s);
    let mut best = u64::MAX; // f of the destination once settled
    while let Some((f, u)) = sc.heap.pop() {
        if f > best || f > limit {
            break;
        }
        let gu = sc.g[u as usize];
        if sc.closed[u as usize] || f != gu + sc.h[u as usize] {
            continue;
        }
        sc.closed[u as usize] = true;
        if u == d {
            best = gu;
            continue;
        }
        for &(v, li) in &t.adj[u as usize] {
            if !usable(sc, li, v) || sc.h[v as usize] == u64::MAX {
                continue;
            }
            let nd = gu + sc.cost[li as usize];
            // Beyond the bound (or the optimum, once known) a node is never settled.
            if nd < sc.g[v as usize] && nd + sc.h[v as usize] <= limit.min(best) {
                if sc.g[v as usize] == u64::MAX {
                    sc.touched.push(v);
                }
                sc.g[v as usize] = nd;
                sc.heap.push(nd + sc.h[v as usize], v);
            }
        }
    }
    if best == u64::MAX {
        return None;
    }
    let (mut nodes, mut links) = (vec![d], Vec::new());
    let mut x = d;
    while x != s {
        let gx = sc.g[x as usize];
        // The tight settled predecessor with the smallest (g, index).
        let mut pick: Option<(u64, u32)> = None;
        for &(u, li) in &t.adj[x as usize] {
            if !sc.closed[u as usize] || banned_nodes[u as usize] || sc.cost[li as usize] == u64::MAX || banned_links.contains(&li) {
                continue;
            }
            let gu = sc.g[u as usize];
            if gu + sc.cost[li as usize] == gx && pick.is_none_or(|p| (gu, u) < p) {
                pick = Some((gu, u));
            }
        }
        let (gu, u) = pick?;
        // Its first tight link to x, in its adjacency order.
        let li = t.adj[u as usize]
            .iter()
            .find(|&&(v, li)| v == x && usable(sc, li, x) && gu + sc.cost[li as usize] == gx)
            .map(|&(_, li)| li)?;
        links.push(li);
        nodes.push(u);
        x = u;
    }
    nodes.reverse();
    links.reverse();
    Some(Path { nodes, links })
}

fn path_cost(t: &Topology, p: &Path) -> u64 {
    p.links.iter().map(|&l| cost(t, l)).sum()
}

/// The `k` shortest loop-free paths from `s` to `d` over links that are up (Yen).
///
/// A spur path only matters if it can still be picked: once the pool of found paths holds
/// as many paths at cost ≤ c as picks remain, a spur search is bounded by c (less the
/// root's cost) — a costlier path would never be taken, so the result is Yen's exactly.
pub fn k_shortest(t: &Topology, s: u32, d: u32, k: usize) -> Vec<Path> {
    k_shortest_in(t, s, k, &mut Scratch::new(t, d))
}

/// [`k_shortest`] toward the destination of `sc` (whose buffers it reuses).
fn k_shortest_in(t: &Topology, s: u32, k: usize, sc: &mut Scratch) -> Vec<Path> {
    let mut banned_nodes = std::mem::take(&mut sc.banned_nodes);
    let paths = yen(t, s, k, sc, &mut banned_nodes);
    sc.banned_nodes = banned_nodes;
    paths
}

fn yen(t: &Topology, s: u32, k: usize, sc: &mut Scratch, banned_nodes: &mut [bool]) -> Vec<Path> {
    let Some(first) = shortest(t, s, &[], banned_nodes, u64::MAX, sc) else { return Vec::new() };
    let mut a = vec![first];
    let mut b: Vec<(u64, Path)> = Vec::new();
    let mut banned_links = Vec::new();
    let mut costs: Vec<u64> = Vec::new();
    while a.len() < k {
        let prev = a.last().cloned().unwrap_or_else(|| unreachable!());
        let mut root_cost = 0u64;
        for i in 0..prev.nodes.len() - 1 {
            let spur = prev.nodes[i];
            let root = &prev.nodes[..=i];
            if i > 0 {
                root_cost += sc.cost[prev.links[i - 1] as usize];
            }
            banned_links.clear();
            for p in &a {
                if p.nodes.len() > i + 1 && p.nodes[..=i] == *root {
                    banned_links.push(p.links[i]);
                }
            }
            // Bound: the (k − |a|)-th cheapest cost in the pool, if it holds that many.
            let need = k - a.len();
            let limit = if b.len() >= need {
                costs.clear();
                costs.extend(b.iter().map(|(c, _)| *c));
                let (_, nth, _) = costs.select_nth_unstable(need - 1);
                nth.saturating_sub(root_cost)
            } else {
                u64::MAX
            };
            for &x in &root[..i] {
                banned_nodes[x as usize] = true;
            }
            if let Some(sp) = shortest(t, spur, &banned_links, banned_nodes, limit, sc) {
                let mut nodes = root[..i].to_vec();
                nodes.extend_from_slice(&sp.nodes);
                let mut links = prev.links[..i].to_vec();
                links.extend_from_slice(&sp.links);
                let p = Path { nodes, links };
                if !a.contains(&p) && !b.iter().any(|(_, q)| *q == p) {
                    b.push((path_cost(t, &p), p));
                }
            }
            for &x in &root[..i] {
                banned_nodes[x as usize] = false;
            }
        }
        if b.is_empty() {
            break;
        }
        // Cheapest next; ties by node sequence (deterministic).
        let best = (0..b.len()).min_by(|&x, &y| b[x].cmp(&b[y])).unwrap_or(0);
        a.push(b.swap_remove(best).1);
    }
    // Equal-latency paths come out in search order; list them by node sequence.
    a.sort_by_cached_key(|p| (path_cost(t, p), p.clone()));
    a
}

/// RTMPv2 score.
pub fn score(alpha: f64, b: f64, b_min: f64, d: f64, d_max: f64) -> f64 {
    alpha * b / b_min + (1.0 - alpha) * d_max / d
}

/// (B, D) of a path under the topology's current link state.
pub fn measure(t: &Topology, p: &Path) -> (f64, f64) {
    let mut b = f64::INFINITY;
    let mut d = 0.0;
    for &l in &p.links {
        let l = &t.links[l as usize];
        b = b.min(l.bandwidth_gbps);
        d += l.latency_us;
    }
    (b, d)
}

/// Mark the Pareto frontier: not dominated by a candidate with B ≥ and D ≤, one strictly.
fn mark_frontier(c: &mut [Candidate]) {
    for i in 0..c.len() {
        let (bi, di) = (c[i].bandwidth_gbps, c[i].latency_us);
        c[i].frontier = !c.iter().any(|o| {
            o.bandwidth_gbps >= bi && o.latency_us <= di && (o.bandwidth_gbps > bi || o.latency_us < di)
        });
    }
}

/// The routing state of one GPU pair (stored with `src < dst`; paths run src → dst).
#[derive(Debug, Clone)]
pub struct PairRoute {
    pub src: u32,
    pub dst: u32,
    pub cands: Vec<Candidate>,
    /// Index into `cands`; `None` when the pair has no path.
    pub chosen: Option<usize>,
    /// Largest candidate latency seen for this pair, µs.
    pub d_max: f64,
}

impl PairRoute {
    /// Candidates, scores and the best route of a fresh pair.
    pub fn new(t: &Topology, src: u32, dst: u32) -> PairRoute {
        let mut r = PairRoute { src, dst, cands: Vec::new(), chosen: None, d_max: 0.0 };
        r.recompute(t, true, None);
        r
    }

    /// The chosen candidate.
    pub fn route(&self) -> Option<&Candidate> {
        self.chosen.map(|i| &self.cands[i])
    }

    /// The frontier candidates (the paths a multipath transfer splits over), best latency
    /// first; the chosen one among them.
    pub fn frontier(&self) -> impl Iterator<Item = &Candidate> {
        self.cands.iter().filter(|c| c.frontier)
    }

    fn set_paths(&mut self, t: &Topology, paths: Vec<Path>) {
        self.cands = paths
            .into_iter()
            .map(|path| Candidate { path, bandwidth_gbps: 0.0, latency_us: 0.0, score: 0.0, frontier: false })
            .collect();
        self.rescore(t);
    }

    fn rescore(&mut self, t: &Topology) {
        for c in &mut self.cands {
            let (b, d) = measure(t, &c.path);
            c.bandwidth_gbps = b;
            c.latency_us = d;
            self.d_max = self.d_max.max(d);
        }
        let alpha = t.routing.alpha;
        for c in &mut self.cands {
            c.score = score(alpha, c.bandwidth_gbps, t.b_min, c.latency_us, self.d_max);
        }
        mark_frontier(&mut self.cands);
    }

    /// Re-evaluate after a topology change: new candidate paths when `structural` (a link
    /// went down or up, a latency changed), else new (B, D) of the same paths. The current
    /// route stays unless broken or beaten by more than the hysteresis. Returns whether the
    /// chosen path changed.
    /// `scratches`: reverse-Dijkstra buffers shared by the pairs re-routed on the same
    /// topology (None: fresh ones).
    pub(crate) fn recompute(&mut self, t: &Topology, structural: bool, scratches: Option<&mut Scratches>) -> bool {
        let old = self.route().map(|c| c.path.clone());
        if structural || self.cands.is_empty() {
            let k = t.routing.k_paths as usize;
            let paths = match scratches {
                Some(s) => k_shortest_in(t, self.src, k, s.for_dst(t, self.dst)),
                None => k_shortest(t, self.src, self.dst, k),
            };
            self.set_paths(t, paths);
        } else {
            self.rescore(t);
        }
        // The decision is made on the Pareto frontier: α's score chooses among the paths no
        // other beats in both bandwidth and latency (a dominated path scores no higher than
        // its dominator anyway, so this states the rule rather than changing a choice).
        let best = (0..self.cands.len()).filter(|&i| self.cands[i].frontier).max_by(|&x, &y| {
            // highest score; ties to the earlier (shorter) candidate
            self.cands[x].score.total_cmp(&self.cands[y].score).then(y.cmp(&x))
        });
        let current = old.as_ref().and_then(|p| self.cands.iter().position(|c| c.path == *p));
        self.chosen = match (current, best) {
            (Some(cur), Some(b)) => {
                let keep = self.cands[b].score <= self.cands[cur].score * (1.0 + t.routing.hysteresis);
                Some(if keep { cur } else { b })
            }
            (None, b) => b,
            (Some(cur), None) => Some(cur),
        };
        self.route().map(|c| &c.path) != old.as_ref()
    }
}

/// Routes of the GPU pairs a deployment uses, keyed `(min, max)`.
///
/// Re-evaluation after a change of one link touches only the pairs whose candidates use it;
/// when a link comes back up (or gets faster), the pairs that lost it when it went down and
/// the pairs with fewer than k candidates are re-evaluated too. (A pair whose k candidates
/// never included the link keeps them: on a large fabric re-running Yen for every pair
/// would cost ~1 ms per pair.)
#[derive(Debug, Clone, Default)]
pub struct RouteTable {
    pub pairs: BTreeMap<(u32, u32), PairRoute>,
    /// Link that is down → pairs (sorted) whose candidates it was on.
    disturbed: BTreeMap<u32, Vec<(u32, u32)>>,
    /// Pairs whose chosen route changed in the last [`RouteTable::on_link_change`].
    pub changed: Vec<(u32, u32)>,
}

impl RouteTable {
    /// The route between two nodes, computed on first use.
    pub fn get(&mut self, t: &Topology, a: u32, b: u32) -> &PairRoute {
        let k = (a.min(b), a.max(b));
        self.pairs.entry(k).or_insert_with(|| PairRoute::new(t, k.0, k.1))
    }

    /// Recompute after a change of `link` (structural: down/up/latency). Pairs whose
    /// candidates avoid the link are untouched unless a link came up or got faster (then
    /// any pair may gain a path). Returns how many chosen routes changed.
    pub fn on_link_change(&mut self, t: &Topology, link: u32, structural: bool, may_add_paths: bool) -> u32 {
        let k = t.routing.k_paths as usize;
        let mut changed = 0;
        let mut disturbed = self.disturbed.remove(&link).unwrap_or_default();
        let mut scratches = Scratches::default();
        for (key, r) in self.pairs.iter_mut() {
            let uses = r.cands.iter().any(|c| c.path.links.contains(&link));
            let regain = may_add_paths && (r.cands.len() < k || disturbed.binary_search(key).is_ok());
            if uses || regain {
                if uses && structural && !t.links[link as usize].up {
                    disturbed.push(*key);
                }
                if r.recompute(t, structural, Some(&mut scratches)) {
                    changed += 1;
                    self.changed.push(*key);
                }
            }
        }
        if !t.links[link as usize].up && !disturbed.is_empty() {
            disturbed.sort_unstable();
            disturbed.dedup();
            self.disturbed.insert(link, disturbed);
        }
        changed
    }

    /// Recompute every pair (after a node was removed).
    pub fn recompute_all(&mut self, t: &Topology) -> u32 {
        let mut scratches = Scratches::default();
        self.pairs.values_mut().map(|r| r.recompute(t, true, Some(&mut scratches)) as u32).sum()
    }

    /// Apply one topology action to `t` and re-route as the simulator does: an action that
    /// touches several links (a GPU removed) re-evaluates every pair, a one-link change only
    /// the pairs it concerns ([`RouteTable::on_link_change`]). The simulator's event handling
    /// and the route view ([`candidates_view`]) both go through here, so they cannot drift.
    /// Returns the links touched and how many chosen routes changed.
    pub fn apply(&mut self, t: &mut Topology, a: &Action) -> (Vec<u32>, u32) {
        let (touched, structural, may_add) = events::apply(t, a);
        let changed = match touched[..] {
            [] => 0,
            [l] => self.on_link_change(t, l, structural, may_add),
            _ => self.recompute_all(t),
        };
        (touched, changed)
    }
}

/// One candidate as the front ends see it.
#[derive(Debug, Clone, Serialize)]
pub struct CandidateView {
    /// Node ids, src first.
    pub path: Vec<String>,
    pub bandwidth_gbps: f64,
    pub latency_us: f64,
    pub score: f64,
    pub chosen: bool,
    pub frontier: bool,
}

/// Candidates between two nodes, listed `src → dst`, best-latency first, as the simulator
/// holds them once the links `down` have gone down.
///
/// This is the simulator's own sequence, not a fresh search on the reduced graph: the pair's
/// route is computed on the topology as given (as a deployment's routes are, when the
/// simulation starts), then each link of `down` goes down in turn, as a `link_down` event
/// does, through [`RouteTable::apply`]. So the chosen route keeps its hysteresis (a route
/// that survives stays unless beaten by more than 3%) and `D_max` remembers the latencies of
/// paths lost — what the page's "taken down" links (events at t = 0) do in a run. A link
/// listed twice goes down once. When `down` disconnects the pair the list is empty: the
/// simulator then has no route either (a replica with such a pair stops).
///
/// Like the simulator's table the pair is kept as `(min, max)`; for `src > dst` the paths
/// are reversed, so ties between equal-latency paths resolve as in a run.
pub fn candidates_view(t: &Topology, src: u32, dst: u32, down: &[u32]) -> Vec<CandidateView> {
    let mut table = RouteTable::default();
    let mut t = t.clone();
    table.get(&t, src, dst);
    for &l in down {
        table.apply(&mut t, &Action::LinkDown(l));
    }
    let Some(r) = table.pairs.get(&(src.min(dst), src.max(dst))) else { return Vec::new() };
    let id = |n: &u32| t.nodes[*n as usize].id.clone();
    r.cands
        .iter()
        .enumerate()
        .map(|(i, c)| CandidateView {
            path: if src <= dst { c.path.nodes.iter().map(id).collect() } else { c.path.nodes.iter().rev().map(id).collect() },
            bandwidth_gbps: c.bandwidth_gbps,
            latency_us: c.latency_us,
            score: c.score,
            chosen: r.chosen == Some(i),
            frontier: c.frontier,
        })
        .collect()
}

/// The plain Dijkstra-under-Yen of the first version, kept to check that the A*-with-bounds
/// search returns exactly its paths.
#[cfg(test)]
pub mod reference {
    use super::{cost, Path, Topology};

    /// Reusable buffers of [`shortest`]: Yen's algorithm runs a shortest-path search per spur
    /// node, hundreds per pair on a large fabric, so this is a plain Dijkstra on the adjacency
    /// lists with arrays reset lazily (petgraph's A* allocates hash maps on every call; this
    /// halved the 512-GPU build, 753 → 392 ms). Ties resolve by node index: deterministic.
    #[derive(Debug, Default)]
    pub(crate) struct RefScratch {
        dist: Vec<u64>,
        via: Vec<u32>,
        touched: Vec<u32>,
        heap: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u32)>>,
    }

    /// Shortest path from `s` to `d` over links that are up, avoiding `banned_links` and
    /// `banned_nodes`; stops when `d` is settled.
    fn shortest(t: &Topology, s: u32, d: u32, banned_links: &[u32], banned_nodes: &[bool], sc: &mut RefScratch) -> Option<Path> {
        use std::cmp::Reverse;
        let n = t.nodes.len();
        if sc.dist.len() != n {
            sc.dist = vec![u64::MAX; n];
            sc.via = vec![u32::MAX; n];
        }
        for &x in &sc.touched {
            sc.dist[x as usize] = u64::MAX;
            sc.via[x as usize] = u32::MAX;
        }
        sc.touched.clear();
        sc.heap.clear();
        sc.dist[s as usize] = 0;
        sc.touched.push(s);
        sc.heap.push(Reverse((0, s)));
        let mut found = false;
        while let Some(Reverse((du, u))) = sc.heap.pop() {
            if du > sc.dist[u as usize] {
                continue;
            }
            if u == d {
                found = true;
                break;
            }
            for &(v, li) in &t.adj[u as usize] {
                let l = &t.links[li as usize];
                if !l.up || banned_nodes[v as usize] || banned_links.contains(&li) {
                    continue;
                }
                let nd = du + cost(t, li);
                if nd < sc.dist[v as usize] {
                    if sc.dist[v as usize] == u64::MAX {
                        sc.touched.push(v);
                    }
                    sc.dist[v as usize] = nd;
                    sc.via[v as usize] = li;
                    sc.heap.push(Reverse((nd, v)));
                }
            }
        }
        if !found {
            return None;
        }
        let (mut nodes, mut links) = (vec![d], Vec::new());
        let mut x = d;
        while x != s {
            let li = sc.via[x as usize];
            let l = &t.links[li as usize];
            x = if l.src == x { l.dst } else { l.src };
            links.push(li);
            nodes.push(x);
        }
        nodes.reverse();
        links.reverse();
        Some(Path { nodes, links })
    }


    /// The `k` shortest loop-free paths from `s` to `d` over links that are up (Yen).
    pub fn k_shortest_reference(t: &Topology, s: u32, d: u32, k: usize) -> Vec<Path> {
        let n = t.nodes.len();
        let mut banned_nodes = vec![false; n];
        let mut sc = RefScratch::default();
        let Some(first) = shortest(t, s, d, &[], &banned_nodes, &mut sc) else { return Vec::new() };
        let mut a = vec![first];
        let mut b: Vec<(u64, Path)> = Vec::new();
        let mut banned_links = Vec::new();
        while a.len() < k {
            let prev = a.last().cloned().unwrap_or_else(|| unreachable!());
            for i in 0..prev.nodes.len() - 1 {
                let spur = prev.nodes[i];
                let root = &prev.nodes[..=i];
                banned_links.clear();
                for p in &a {
                    if p.nodes.len() > i + 1 && p.nodes[..=i] == *root {
                        banned_links.push(p.links[i]);
                    }
                }
                for &x in &root[..i] {
                    banned_nodes[x as usize] = true;
                }
                if let Some(sp) = shortest(t, spur, d, &banned_links, &banned_nodes, &mut sc) {
                    let mut nodes = root[..i].to_vec();
                    nodes.extend_from_slice(&sp.nodes);
                    let mut links = prev.links[..i].to_vec();
                    links.extend_from_slice(&sp.links);
                    let p = Path { nodes, links };
                    if !a.contains(&p) && !b.iter().any(|(_, q)| *q == p) {
                        b.push((path_cost(t, &p), p));
                    }
                }
                for &x in &root[..i] {
                    banned_nodes[x as usize] = false;
                }
            }
            if b.is_empty() {
                break;
            }
            // Cheapest next; ties by node sequence (deterministic).
            let best = (0..b.len()).min_by(|&x, &y| b[x].cmp(&b[y])).unwrap_or(0);
            a.push(b.swap_remove(best).1);
        }
        // Equal-latency paths come out in search order; list them by node sequence.
        a.sort_by_cached_key(|p| (path_cost(t, p), p.clone()));
        a
    }

    fn path_cost(t: &Topology, p: &Path) -> u64 {
        p.links.iter().map(|&l| cost(t, l)).sum()
    }
}
