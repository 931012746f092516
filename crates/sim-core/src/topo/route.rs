//! RTMPv2 routing (seed §2.3, DESIGN "Topology").
//!
//! For a GPU pair the candidates are the k shortest loop-free paths by summed latency over
//! links that are up ([`super::paths`]: Yen's algorithm). Each candidate has
//! B = bottleneck bandwidth (GB/s per direction) and D = summed latency (µs), and the score
//! `w = α·B/B_min + (1−α)·D_max/D`: α = 0.65 by default, B_min the nominal cluster
//! bandwidth (the smallest link bandwidth as loaded, so scores stay comparable across
//! events), D_max the largest candidate latency seen for this pair so far. The best-scoring
//! candidate is chosen; afterwards a route is replaced only when a candidate beats it by
//! more than the hysteresis (3%), or when it breaks (a link on it went down). Candidates
//! not dominated in (higher B, lower D) form the Pareto frontier; the choice is made among
//! them, and a KV transfer may split its bytes over all of them (`routing.multipath_kv`).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::events::{self, Action};
use super::paths::Router;
pub use super::paths::{k_shortest, Path};
use super::Topology;

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
        PairRoute::new_in(t, src, dst, None)
    }

    /// [`PairRoute::new`] searching with `router` (None: a fresh one).
    fn new_in(t: &Topology, src: u32, dst: u32, router: Option<&mut Router>) -> PairRoute {
        let mut r = PairRoute { src, dst, cands: Vec::new(), chosen: None, d_max: 0.0 };
        r.recompute(t, true, router);
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

    /// The links of its candidates, sorted, unique.
    fn links(&self) -> Vec<u32> {
        let mut l: Vec<u32> = self.cands.iter().flat_map(|c| c.path.links.iter().copied()).collect();
        l.sort_unstable();
        l.dedup();
        l
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
    /// `router`: the searches' state shared by the pairs of one topology (None: a fresh one).
    pub(crate) fn recompute(&mut self, t: &Topology, structural: bool, router: Option<&mut Router>) -> bool {
        let old = self.route().map(|c| c.path.clone());
        if structural || self.cands.is_empty() {
            let k = t.routing.k_paths as usize;
            let paths = match router {
                Some(r) => r.k_shortest(t, self.src, self.dst, k),
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
/// Re-evaluation after a change of one link touches only the pairs whose candidates use it
/// (found through an index: per link, the pairs whose candidates cross it); when a link
/// comes back up (or gets faster), the pairs that lost it when it went down and the pairs
/// with fewer than k candidates are re-evaluated too. (A pair whose k candidates never
/// included the link keeps them: re-running Yen for every pair would cost the whole build.)
///
/// The table's [`Router`] follows its topology through [`RouteTable::apply`]; a topology
/// changed some other way is noticed by its [`Topology::version`] and routed afresh.
#[derive(Debug, Clone, Default)]
pub struct RouteTable {
    pub pairs: BTreeMap<(u32, u32), PairRoute>,
    /// Link that is down → pairs (sorted) whose candidates it was on.
    disturbed: BTreeMap<u32, Vec<(u32, u32)>>,
    /// Pairs whose chosen route changed in the last [`RouteTable::on_link_change`].
    pub changed: Vec<(u32, u32)>,
    /// Per link: the pairs whose candidates cross it (in no order).
    users: Vec<Vec<(u32, u32)>>,
    /// Pairs with fewer than k candidates (those with no route among them).
    short: BTreeSet<(u32, u32)>,
    router: Option<Box<Router>>,
}

impl RouteTable {
    /// The route between two nodes, computed on first use.
    pub fn get(&mut self, t: &Topology, a: u32, b: u32) -> &PairRoute {
        let key = (a.min(b), a.max(b));
        if !self.pairs.contains_key(&key) {
            let r = PairRoute::new_in(t, key.0, key.1, Some(self.router(t)));
            self.index(t, key, &[], &r);
            self.pairs.insert(key, r);
        }
        &self.pairs[&key]
    }

    /// The searches' state, following `t`.
    fn router(&mut self, t: &Topology) -> &mut Router {
        let r = self.router.get_or_insert_with(|| Box::new(Router::new(t)));
        if !r.follows(t) {
            **r = Router::new(t);
        }
        r
    }

    /// Move `key` in the index from the links `old` to those of `r`'s candidates.
    fn index(&mut self, t: &Topology, key: (u32, u32), old: &[u32], r: &PairRoute) {
        if self.users.len() != t.links.len() {
            self.users.resize(t.links.len(), Vec::new());
        }
        for &l in old {
            let u = &mut self.users[l as usize];
            if let Some(i) = u.iter().position(|&p| p == key) {
                u.swap_remove(i);
            }
        }
        for l in r.links() {
            self.users[l as usize].push(key);
        }
        if r.cands.len() < t.routing.k_paths as usize {
            self.short.insert(key);
        } else {
            self.short.remove(&key);
        }
    }

    /// Re-evaluate pair `key` ([`PairRoute::recompute`]), keeping the index; whether its
    /// chosen route changed.
    fn reroute(&mut self, t: &Topology, key: (u32, u32), structural: bool) -> bool {
        let mut router = self.router.take().filter(|r| r.follows(t)).unwrap_or_else(|| Box::new(Router::new(t)));
        let Some(mut r) = self.pairs.remove(&key) else { return false };
        let searched = structural || r.cands.is_empty();
        let old = if searched { r.links() } else { Vec::new() };
        let changed = r.recompute(t, structural, Some(&mut router));
        if searched {
            self.index(t, key, &old, &r);
        }
        self.pairs.insert(key, r);
        self.router = Some(router);
        changed
    }

    /// Recompute after a change of `link` (structural: down/up/latency). Pairs whose
    /// candidates avoid the link are untouched unless a link came up or got faster (then
    /// any pair may gain a path). Returns how many chosen routes changed.
    pub fn on_link_change(&mut self, t: &Topology, link: u32, structural: bool, may_add_paths: bool) -> u32 {
        let k = t.routing.k_paths as usize;
        let mut changed = 0;
        let mut disturbed = self.disturbed.remove(&link).unwrap_or_default();
        let mut users = self.users.get(link as usize).cloned().unwrap_or_default();
        users.sort_unstable();
        let mut todo = users.clone();
        if may_add_paths {
            todo.extend(self.short.iter().copied());
            todo.extend(disturbed.iter().copied());
            todo.sort_unstable();
            todo.dedup();
        }
        // In key order, as a walk over every pair would meet them.
        for key in todo {
            let Some(r) = self.pairs.get(&key) else { continue };
            let uses = users.binary_search(&key).is_ok();
            let regain = may_add_paths && (r.cands.len() < k || disturbed.binary_search(&key).is_ok());
            if uses || regain {
                if uses && structural && !t.links[link as usize].up {
                    disturbed.push(key);
                }
                if self.reroute(t, key, structural) {
                    changed += 1;
                    self.changed.push(key);
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
        let keys: Vec<(u32, u32)> = self.pairs.keys().copied().collect();
        keys.into_iter().map(|key| self.reroute(t, key, true) as u32).sum()
    }

    /// The pairs whose chosen route crosses one of `links`, has no route, or changed in the
    /// last [`RouteTable::on_link_change`] (`changed`): sorted, unique.
    pub fn reached(&self, links: &[u32]) -> Vec<(u32, u32)> {
        let mut out: Vec<(u32, u32)> = links
            .iter()
            .filter_map(|&l| self.users.get(l as usize))
            .flatten()
            .copied()
            .filter(|key| self.pairs[key].route().is_some_and(|c| c.path.links.iter().any(|l| links.contains(l))))
            .chain(self.short.iter().copied().filter(|key| self.pairs[key].route().is_none()))
            .chain(self.changed.iter().copied())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Apply one topology action to `t` and re-route as the simulator does: an action that
    /// touches several links (a GPU removed) re-evaluates every pair, a one-link change only
    /// the pairs it concerns ([`RouteTable::on_link_change`]). The simulator's event handling
    /// and the route view ([`candidates_view`]) both go through here, so they cannot drift.
    /// Returns the links touched and how many chosen routes changed.
    pub fn apply(&mut self, t: &mut Topology, a: &Action) -> (Vec<u32>, u32) {
        let (touched, structural, may_add) = events::apply(t, a);
        if let Some(r) = &mut self.router {
            r.relink(t, &touched);
        }
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
