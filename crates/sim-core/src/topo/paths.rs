//! The k shortest loop-free paths between two nodes (Yen's algorithm), the candidates of
//! RTMPv2 routing ([`super::route`]).
//!
//! Path cost is [`super::twins::link_cost`]: latency in picoseconds × 16 + 1 per hop, over links that are
//! up. Each of Yen's searches returns exactly the path of a plain Dijkstra that settles nodes
//! in (distance, node index) order and keeps the first predecessor reaching a node at its
//! distance ([`reference`] is that Dijkstra; a test holds the two equal); found paths of
//! equal cost are taken in node-sequence order.
//!
//! What makes it fast on a large fabric:
//! * each search is an A* guided by the exact distances to the destination, bounded by the
//!   cost of the (k − found)-th cheapest pooled path (a costlier spur path is never taken);
//! * a search sees, of each class of twin units ([`super::twins`]: the identical boxes of a
//!   multi-node fabric), only the units it touches and the lowest other one, which changes
//!   no path it returns; and the distances to the destination come from a search over the
//!   lowest two, a twin's node taking its partner's. A pair's paths then cost the same on
//!   2 boxes as on 512;
//! * buffers the size of the fabric are allocated once per [`Router`] and reset by the
//!   entries a search touched, and distances to a destination are kept for the next pairs
//!   toward it until the topology changes.

use std::collections::BTreeMap;

use super::twins::{Twins, View, HUB};
use super::Topology;

/// A loop-free path: node indices and the links between them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Path {
    pub nodes: Vec<u32>,
    pub links: Vec<u32>,
}

/// Distance not computed (the search for `d` did not reach the node, or it is not in the
/// searched part): see [`ToDst::get`].
const NOT_SET: u64 = u64::MAX - 1;

/// Destinations whose distances a [`Router`] keeps.
const MAX_DSTS: usize = 16;

/// A min-priority queue of nodes bucketed by exact key. Path costs on a fabric take few
/// distinct values (multiples of the link latencies plus hop counts), so a search's frontier
/// sits in a handful of buckets: push and pop are a vector push/pop plus an ordered-map
/// lookup over those few keys (a binary heap of the same entries cost 60% of a re-route).
/// Nodes of equal key pop in any order: neither search below depends on it.
#[derive(Debug, Clone, Default)]
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
        while let Some((_, mut v)) = self.map.pop_first() {
            v.clear();
            self.spare.push(v);
        }
    }
}

/// Distances to one destination: exact for the nodes its search reached, the rest read
/// through a twin ([`ToDst::get`]).
#[derive(Debug, Clone, Default)]
struct ToDst {
    d: u32,
    /// Per node: distance to `d`, [`NOT_SET`] where not computed, `u64::MAX` unreachable.
    h: Vec<u64>,
    /// Nodes whose entry is set (to reset them).
    set: Vec<u32>,
}

impl ToDst {
    /// Distance from `v` to `d` (`u64::MAX`: unreachable). The search for `d` saw the hubs,
    /// `d`'s unit and the lowest two other members of each class; a node of another unit is
    /// as far as its partner in the lowest member (the swap of the two fixes `d`), read once
    /// and kept.
    #[inline]
    fn get(&mut self, tw: &Twins, v: u32) -> u64 {
        let x = self.h[v as usize];
        if x != NOT_SET {
            return x;
        }
        let (u, du) = (tw.unit_of[v as usize], tw.unit_of[self.d as usize]);
        let y = if u == HUB || u == du {
            NOT_SET
        } else {
            match tw.partner_in_lowest(v, du) {
                Some(p) if p != v => self.h[p as usize],
                _ => NOT_SET,
            }
        };
        let y = if y == NOT_SET { u64::MAX } else { y };
        self.h[v as usize] = y;
        self.set.push(v);
        y
    }

    fn reset(&mut self) {
        for &x in &self.set {
            self.h[x as usize] = NOT_SET;
        }
        self.set.clear();
    }
}

/// The A* buffers, reset by the entries a search touched.
#[derive(Debug, Clone, Default)]
struct Buffers {
    g: Vec<u64>,
    closed: Vec<bool>,
    touched: Vec<u32>,
    heap: Buckets,
    /// Yen's root nodes (all false between spur searches).
    banned_nodes: Vec<bool>,
}

/// What the searches of one topology share: its twin units (kept in step with link events
/// through [`Router::relink`]), the search buffers and the distances to recent destinations.
#[derive(Debug, Clone, Default)]
pub struct Router {
    twins: Twins,
    view: View,
    buf: Buffers,
    dsts: Vec<ToDst>,
    /// Next slot of `dsts` to reuse.
    next: usize,
}

impl Router {
    /// A router for `t` as it is now.
    pub fn new(t: &Topology) -> Router {
        let n = t.nodes.len();
        Router {
            twins: Twins::new(t),
            buf: Buffers { g: vec![u64::MAX; n], closed: vec![false; n], banned_nodes: vec![false; n], ..Buffers::default() },
            ..Router::default()
        }
    }

    /// Whether this router follows `t` (built from it, or kept in step since).
    pub fn follows(&self, t: &Topology) -> bool {
        self.twins.version == t.version && self.twins.cost.len() == t.links.len() && self.twins.unit_of.len() == t.nodes.len()
    }

    /// Follow a change of `links` in `t` (their state or latency).
    pub fn relink(&mut self, t: &Topology, links: &[u32]) {
        if self.twins.cost.len() != t.links.len() || self.twins.unit_of.len() != t.nodes.len() {
            *self = Router::new(t);
            return;
        }
        self.twins.relink(t, links);
        for x in &mut self.dsts {
            x.reset();
            x.d = u32::MAX;
        }
    }

    /// The `k` shortest loop-free paths from `s` to `d` over links that are up, cheapest
    /// first, equal costs by node sequence (module docs). Rebuilds itself first if `t`
    /// changed other than through [`Router::relink`].
    pub fn k_shortest(&mut self, t: &Topology, s: u32, d: u32, k: usize) -> Vec<Path> {
        if !self.follows(t) {
            *self = Router::new(t);
        }
        let slot = self.dst_slot(t, d);
        let Router { twins, view, buf, dsts, .. } = self;
        yen(t, twins, view, buf, &mut dsts[slot], s, k)
    }

    /// The slot of `dsts` holding the distances to `d`, computed if not kept: a Dijkstra
    /// from `d` over the hubs, `d`'s unit and the lowest two other members of each class.
    fn dst_slot(&mut self, t: &Topology, d: u32) -> usize {
        if let Some(i) = self.dsts.iter().position(|x| x.d == d) {
            return i;
        }
        let i = if self.dsts.len() < MAX_DSTS {
            self.dsts.push(ToDst { d: u32::MAX, h: vec![NOT_SET; t.nodes.len()], set: Vec::new() });
            self.dsts.len() - 1
        } else {
            self.next = (self.next + 1) % MAX_DSTS;
            self.next
        };
        let Router { twins: tw, view, buf, dsts, .. } = self;
        let x = &mut dsts[i];
        x.reset();
        x.d = d;
        view.start(tw, 2, [d]);
        let heap = &mut buf.heap;
        heap.clear();
        x.h[d as usize] = 0;
        x.set.push(d);
        heap.push(0, d);
        while let Some((du, u)) = heap.pop() {
            if du > x.h[u as usize] {
                continue;
            }
            view.neighbors(t, tw, u, |v, li| {
                let c = tw.cost[li as usize];
                if c == u64::MAX {
                    return;
                }
                let nd = du + c;
                let hv = &mut x.h[v as usize];
                if *hv == NOT_SET {
                    x.set.push(v);
                    *hv = u64::MAX;
                }
                if nd < *hv {
                    *hv = nd;
                    heap.push(nd, v);
                }
            });
        }
        i
    }
}

/// Shortest path from `s` to `hd.d` over links that are up, avoiding `banned_links` and the
/// nodes `root` (marked in `sc.banned_nodes`), and no costlier than `limit`.
///
/// The result is exactly the path of a plain Dijkstra that settles nodes in (distance, node
/// index) order and keeps the first predecessor that reaches a node at its distance: that
/// predecessor is the tight one (g(u) + c = g(v)) with the smallest (g(u), u). Yen runs this
/// search once per spur node, so it is an A* guided by the exact distances to the
/// destination without bans (admissible and consistent under any bans): it settles only the
/// nodes whose f = g + h is at most the optimum (all of them, so every tight predecessor of
/// a node on an optimal path has its exact g), then rebuilds the path backwards by the rule
/// above. It sees only the units of [`View`] (the touched ones: those of `s`, `d`, `root`
/// and the banned links; of the others the lowest of each class), which returns the same
/// path ([`super::twins`]).
#[allow(clippy::too_many_arguments)]
fn shortest(
    t: &Topology,
    tw: &Twins,
    view: &mut View,
    sc: &mut Buffers,
    hd: &mut ToDst,
    s: u32,
    root: &[u32],
    banned_links: &[u32],
    limit: u64,
) -> Option<Path> {
    for &x in &sc.touched {
        sc.g[x as usize] = u64::MAX;
        sc.closed[x as usize] = false;
    }
    sc.touched.clear();
    sc.heap.clear();
    let d = hd.d;
    let hs = hd.get(tw, s);
    if hs == u64::MAX || hs > limit {
        return None;
    }
    let ends = banned_links.iter().flat_map(|&l| [t.links[l as usize].src, t.links[l as usize].dst]);
    view.start(tw, 1, [s, d].into_iter().chain(root.iter().copied()).chain(ends));
    sc.g[s as usize] = 0;
    sc.touched.push(s);
    sc.heap.push(hs, s);
    let mut best = u64::MAX; // f of the destination once settled
    while let Some((f, u)) = sc.heap.pop() {
        if f > best || f > limit {
            break;
        }
        let gu = sc.g[u as usize];
        if sc.closed[u as usize] || f != gu + hd.get(tw, u) {
            continue;
        }
        sc.closed[u as usize] = true;
        if u == d {
            best = gu;
            continue;
        }
        let bound = limit.min(best);
        view.neighbors(t, tw, u, |v, li| {
            let c = tw.cost[li as usize];
            if c == u64::MAX || sc.banned_nodes[v as usize] || banned_links.contains(&li) {
                return;
            }
            let hv = hd.get(tw, v);
            if hv == u64::MAX {
                return;
            }
            let nd = gu + c;
            // Beyond the bound (or the optimum, once known) a node is never settled.
            if nd < sc.g[v as usize] && nd + hv <= bound {
                if sc.g[v as usize] == u64::MAX {
                    sc.touched.push(v);
                }
                sc.g[v as usize] = nd;
                sc.heap.push(nd + hv, v);
            }
        });
    }
    if best == u64::MAX {
        return None;
    }
    let (mut nodes, mut links) = (vec![d], Vec::new());
    let mut x = d;
    while x != s {
        let gx = sc.g[x as usize];
        // The tight settled predecessor with the smallest (g, index), and its link to x (a
        // pair of nodes has one link).
        let mut pick: Option<(u64, u32, u32)> = None;
        view.neighbors(t, tw, x, |u, li| {
            let c = tw.cost[li as usize];
            if !sc.closed[u as usize] || sc.banned_nodes[u as usize] || c == u64::MAX || banned_links.contains(&li) {
                return;
            }
            let gu = sc.g[u as usize];
            if gu + c == gx && pick.is_none_or(|p| (gu, u) < (p.0, p.1)) {
                pick = Some((gu, u, li));
            }
        });
        let (_, u, li) = pick?;
        links.push(li);
        nodes.push(u);
        x = u;
    }
    nodes.reverse();
    links.reverse();
    Some(Path { nodes, links })
}

fn path_cost(tw: &Twins, p: &Path) -> u64 {
    p.links.iter().map(|&l| tw.cost[l as usize]).sum()
}

/// The `k` shortest loop-free paths from `s` to `d` over links that are up (Yen), for one-off
/// use (a [`Router`] keeps its buffers between pairs).
///
/// A spur path only matters if it can still be picked: once the pool of found paths holds
/// as many paths at cost ≤ c as picks remain, a spur search is bounded by c (less the
/// root's cost) — a costlier path would never be taken, so the result is Yen's exactly.
pub fn k_shortest(t: &Topology, s: u32, d: u32, k: usize) -> Vec<Path> {
    Router::new(t).k_shortest(t, s, d, k)
}

#[allow(clippy::too_many_arguments)]
fn yen(t: &Topology, tw: &Twins, view: &mut View, sc: &mut Buffers, hd: &mut ToDst, s: u32, k: usize) -> Vec<Path> {
    let Some(first) = shortest(t, tw, view, sc, hd, s, &[], &[], u64::MAX) else { return Vec::new() };
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
                root_cost += tw.cost[prev.links[i - 1] as usize];
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
                sc.banned_nodes[x as usize] = true;
            }
            let found = shortest(t, tw, view, sc, hd, spur, &root[..i], &banned_links, limit);
            for &x in &root[..i] {
                sc.banned_nodes[x as usize] = false;
            }
            if let Some(sp) = found {
                let mut nodes = root[..i].to_vec();
                nodes.extend_from_slice(&sp.nodes);
                let mut links = prev.links[..i].to_vec();
                links.extend_from_slice(&sp.links);
                let p = Path { nodes, links };
                if !a.contains(&p) && !b.iter().any(|(_, q)| *q == p) {
                    b.push((path_cost(tw, &p), p));
                }
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
    a.sort_by_cached_key(|p| (path_cost(tw, p), p.clone()));
    a
}

/// The plain Dijkstra-under-Yen of the first version, kept to check that the searches above
/// return exactly its paths.
#[cfg(test)]
pub mod reference {
    use super::{Path, Topology};

    fn cost(t: &Topology, link: u32) -> u64 {
        (t.links[link as usize].latency_us * 1e6).round() as u64 * 16 + 1
    }

    /// Reusable buffers of [`shortest`]: a plain Dijkstra on the adjacency lists with arrays
    /// reset lazily. Ties resolve by node index: deterministic.
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
