//! Interchangeable parts of a fabric, so that a route search looks at one of each kind.
//!
//! A *hub* is a node with at least [`HUB_DEGREE`] links (an InfiniBand rail switch, an
//! NVL72 rack's NVLink switch). The *units* are the connected components of the graph
//! without its hubs (an HGX box: 8 GPUs, their NVSwitch and NICs), joined to hubs by
//! *ports* (a NIC's rail link). Two units are *twins* when the map that pairs their nodes in
//! index order carries every link of one onto a link of the other with the same routing
//! cost and state (up or down), every port onto a port to the same hub likewise, and keeps
//! the order: each node of the lower twin has a smaller index than its partner. Twins form
//! a *class* (the boxes of a `{N}x-hgx-…-ib` preset are one class of N until an event
//! touches one of them: it then leaves the class).
//!
//! Why it is exact. Take a search from `s` to `d` with some nodes and links banned (Yen's
//! spur searches), and call a unit *touched* when it holds `s`, `d`, a banned node or an end
//! of a banned link. For two untouched twins C1 < C2, swapping them (each node for its
//! partner) is an automorphism of the searched graph that fixes `s`, `d` and every hub. The
//! path a Dijkstra returns ([`super::paths`]: back from `d`, each node's predecessor is the
//! tight one with the smallest (distance, index)) never enters C2: at the hub X where it
//! would last leave C2 (walking back from `d`) through e2, e2's partner e1 in C1 is as far
//! from `s` (the swap maps a shortest path to e2 onto one to e1) and links to X at the same
//! cost, so it is tight too, with a smaller index, and would have been taken instead. So the
//! search may drop every untouched unit of a class but the lowest: the path it returns,
//! distances on it and the predecessors it compares are unchanged (a dropped node was
//! never chosen, and dropping nodes only lengthens the paths of nodes not on it). The
//! distances to `d` that guide it ([`super::paths`]'s A*) are exact when the search keeps
//! the lowest *two* untouched units of each class (a node of the lowest may route through
//! the second), and a node of any other untouched unit is as far from `d` as its partner
//! in the lowest. On a 2,048-GPU fabric a search then sees a few boxes instead of 256.

use std::collections::BTreeMap;

use super::Topology;

/// Nodes with at least this many links are hubs. Any value gives the same routes (see the
/// module docs); it only decides how much a search may drop. 16 makes the rail switches of
/// the multi-node presets and the NVL72 rack's switch hubs, and an HGX box (8 GPUs on one
/// NVSwitch) one unit.
pub const HUB_DEGREE: usize = 16;

/// No unit: the node is a hub.
pub const HUB: u32 = u32::MAX;

/// Integer routing cost of a link that is up: latency in picoseconds × 16 + 1 per hop, so
/// equal latencies prefer fewer hops and ties are exact. `u64::MAX` when the link is down.
pub fn link_cost(t: &Topology, link: u32) -> u64 {
    let l = &t.links[link as usize];
    if l.up {
        (l.latency_us * 1e6).round() as u64 * 16 + 1
    } else {
        u64::MAX
    }
}

/// The units and twin classes of a topology, kept in step with its link changes
/// ([`Twins::relink`]).
#[derive(Debug, Clone, Default)]
pub struct Twins {
    /// Per link: [`link_cost`] as of the last sync.
    pub cost: Vec<u64>,
    /// Per node: its unit, or [`HUB`].
    pub unit_of: Vec<u32>,
    /// Per node in a unit: its position among the unit's nodes (by index).
    rank: Vec<u32>,
    /// Per unit: its nodes, by index.
    nodes: Vec<Vec<u32>>,
    /// Per unit: its ports `(hub, node, link)`, sorted.
    ports: Vec<Vec<(u32, u32, u32)>>,
    /// Per unit: its class.
    class_of: Vec<u32>,
    /// Per class: its member units, lowest first (empty: a free class id).
    members: Vec<Vec<u32>>,
    /// Per class: its key ([`Twins::key`]).
    keys: Vec<Vec<u64>>,
    /// Classes by key (a unit whose indices interleave a class's differently starts
    /// another class of the same key).
    by_key: BTreeMap<Vec<u64>, Vec<u32>>,
    /// Free class ids.
    free: Vec<u32>,
    /// Per hub: its links to other hubs `(hub, link)`.
    hub_adj: Vec<Vec<(u32, u32)>>,
    /// Per hub: the classes with a port on it, sorted.
    hub_classes: Vec<Vec<u32>>,
    /// The topology's change count ([`Topology::version`]) as of the last sync.
    pub version: u64,
}

impl Twins {
    /// Units and classes of `t` as it is now.
    pub fn new(t: &Topology) -> Twins {
        let n = t.nodes.len();
        let hub: Vec<bool> = t.adj.iter().map(|a| a.len() >= HUB_DEGREE).collect();
        let mut tw = Twins {
            cost: (0..t.links.len() as u32).map(|l| link_cost(t, l)).collect(),
            unit_of: vec![HUB; n],
            rank: vec![0; n],
            hub_adj: vec![Vec::new(); n],
            hub_classes: vec![Vec::new(); n],
            version: t.version,
            ..Twins::default()
        };
        // Units in order of their lowest node, each listed by index (a search from the
        // lowest unassigned node collects its component; sorting it fixes the order).
        let mut stack = Vec::new();
        for start in 0..n as u32 {
            if hub[start as usize] || tw.unit_of[start as usize] != HUB {
                continue;
            }
            let u = tw.nodes.len() as u32;
            let mut members = vec![start];
            tw.unit_of[start as usize] = u;
            stack.push(start);
            while let Some(x) = stack.pop() {
                for &(v, _) in &t.adj[x as usize] {
                    if !hub[v as usize] && tw.unit_of[v as usize] == HUB {
                        tw.unit_of[v as usize] = u;
                        members.push(v);
                        stack.push(v);
                    }
                }
            }
            members.sort_unstable();
            for (r, &v) in members.iter().enumerate() {
                tw.rank[v as usize] = r as u32;
            }
            tw.nodes.push(members);
        }
        tw.ports = vec![Vec::new(); tw.nodes.len()];
        for (li, l) in t.links.iter().enumerate() {
            let (a, b) = (l.src, l.dst);
            match (hub[a as usize], hub[b as usize]) {
                (true, true) => {
                    tw.hub_adj[a as usize].push((b, li as u32));
                    tw.hub_adj[b as usize].push((a, li as u32));
                }
                (true, false) => tw.ports[tw.unit_of[b as usize] as usize].push((a, b, li as u32)),
                (false, true) => tw.ports[tw.unit_of[a as usize] as usize].push((b, a, li as u32)),
                (false, false) => {}
            }
        }
        for p in &mut tw.ports {
            p.sort_unstable();
        }
        tw.class_of = vec![u32::MAX; tw.nodes.len()];
        for u in 0..tw.nodes.len() as u32 {
            tw.join(t, u);
        }
        tw
    }

    /// Bring the index up to date after `links` changed (state or latency), one unit at a
    /// time: a unit whose key changed leaves its class for one that fits it.
    pub fn relink(&mut self, t: &Topology, links: &[u32]) {
        let mut units = Vec::new();
        for &l in links {
            self.cost[l as usize] = link_cost(t, l);
            let link = &t.links[l as usize];
            units.extend([self.unit_of[link.src as usize], self.unit_of[link.dst as usize]].into_iter().filter(|&u| u != HUB));
        }
        units.sort_unstable();
        units.dedup();
        for u in units {
            if self.key(t, u) != self.keys[self.class_of[u as usize] as usize] {
                self.leave(u);
                self.join(t, u);
            }
        }
        self.version = t.version;
    }

    /// A unit's key: its size, its links inside `(position, position, cost)` and its ports
    /// `(position, hub, cost)`, positions by node index, sorted. Twins have equal keys.
    fn key(&self, t: &Topology, u: u32) -> Vec<u64> {
        let mut inside = Vec::new();
        for &x in &self.nodes[u as usize] {
            for &(v, li) in &t.adj[x as usize] {
                if self.unit_of[v as usize] == u && x < v {
                    inside.push((u64::from(self.rank[x as usize]) << 32 | u64::from(self.rank[v as usize]), self.cost[li as usize]));
                }
            }
        }
        inside.sort_unstable();
        let mut ports: Vec<(u64, u64)> = self.ports[u as usize]
            .iter()
            .map(|&(h, x, li)| (u64::from(self.rank[x as usize]) << 32 | u64::from(h), self.cost[li as usize]))
            .collect();
        ports.sort_unstable();
        let mut key = vec![self.nodes[u as usize].len() as u64, inside.len() as u64];
        key.extend(inside.into_iter().chain(ports).flat_map(|(a, b)| [a, b]));
        key
    }

    /// Whether every node of unit `a` has a smaller index than its partner in unit `b`.
    fn before(&self, a: u32, b: u32) -> bool {
        self.nodes[a as usize].iter().zip(&self.nodes[b as usize]).all(|(x, y)| x < y)
    }

    /// Put unit `u` into the first class of its key where it keeps the members' order,
    /// else into a class of its own.
    fn join(&mut self, t: &Topology, u: u32) {
        let key = self.key(t, u);
        let first = self.nodes[u as usize][0];
        let fits = |tw: &Twins, c: u32| {
            let m = &tw.members[c as usize];
            let at = m.partition_point(|&w| tw.nodes[w as usize][0] < first);
            let ok = (at == 0 || tw.before(m[at - 1], u)) && (at == m.len() || tw.before(u, m[at]));
            ok.then_some(at)
        };
        let found = self.by_key.get(&key).and_then(|cs| cs.iter().find_map(|&c| fits(self, c).map(|at| (c, at))));
        let c = match found {
            Some((c, at)) => {
                self.members[c as usize].insert(at, u);
                c
            }
            None => {
                let c = self.free.pop().unwrap_or_else(|| {
                    self.members.push(Vec::new());
                    self.keys.push(Vec::new());
                    self.members.len() as u32 - 1
                });
                self.members[c as usize] = vec![u];
                self.by_key.entry(key.clone()).or_default().push(c);
                self.keys[c as usize] = key;
                for h in self.port_hubs(u) {
                    let hc = &mut self.hub_classes[h as usize];
                    if let Err(i) = hc.binary_search(&c) {
                        hc.insert(i, c);
                    }
                }
                c
            }
        };
        self.class_of[u as usize] = c;
    }

    /// Take unit `u` out of its class (freed when it was the last member).
    fn leave(&mut self, u: u32) {
        let c = self.class_of[u as usize];
        let m = &mut self.members[c as usize];
        if let Some(i) = m.iter().position(|&w| w == u) {
            m.remove(i);
        }
        if !m.is_empty() {
            return;
        }
        let key = std::mem::take(&mut self.keys[c as usize]);
        if let Some(cs) = self.by_key.get_mut(&key) {
            cs.retain(|&x| x != c);
            if cs.is_empty() {
                self.by_key.remove(&key);
            }
        }
        for h in self.port_hubs(u) {
            self.hub_classes[h as usize].retain(|&x| x != c);
        }
        self.free.push(c);
    }

    /// The hubs unit `u` has ports on, sorted, unique.
    fn port_hubs(&self, u: u32) -> Vec<u32> {
        let mut h: Vec<u32> = self.ports[u as usize].iter().map(|p| p.0).collect();
        h.dedup();
        h
    }

    /// Whether `x` is a hub.
    #[inline]
    pub fn is_hub(&self, x: u32) -> bool {
        self.unit_of[x as usize] == HUB
    }

    /// The lowest member of `v`'s class other than unit `not` (`None` when there is none),
    /// and `v`'s partner there.
    pub fn partner_in_lowest(&self, v: u32, not: u32) -> Option<u32> {
        let u = self.unit_of[v as usize];
        let m = &self.members[self.class_of[u as usize] as usize];
        let rep = *m.iter().find(|&&w| w != not)?;
        Some(self.nodes[rep as usize][self.rank[v as usize] as usize])
    }
}

/// Which units a search sees: every *touched* unit and the lowest `keep` untouched members of
/// each class (module docs), found per class when the search first reaches it.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// Touched units, sorted, unique.
    touched: Vec<u32>,
    keep: usize,
    /// Generation of the current search.
    generation: u32,
    /// Per class: (generation it was listed in, the members this search sees).
    seen: Vec<(u32, Vec<u32>)>,
}

impl View {
    /// Start a search that sees `keep` untouched members per class and touches the units of
    /// `nodes` (hubs among them touch nothing).
    pub fn start(&mut self, tw: &Twins, keep: usize, nodes: impl IntoIterator<Item = u32>) {
        self.touched.clear();
        self.touched.extend(nodes.into_iter().map(|x| tw.unit_of[x as usize]).filter(|&u| u != HUB));
        self.touched.sort_unstable();
        self.touched.dedup();
        self.keep = keep;
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Wrapped: forget every list (generation 0 is never current).
            self.seen.iter_mut().for_each(|s| s.0 = 0);
            self.generation = 1;
        }
        if self.seen.len() < tw.members.len() {
            self.seen.resize(tw.members.len(), (0, Vec::new()));
        }
    }

    /// The members of class `c` this search sees.
    fn members<'a>(&'a mut self, tw: &'a Twins, c: u32) -> &'a [u32] {
        let m = &tw.members[c as usize];
        if m.len() == 1 {
            return m;
        }
        let (g, list) = &mut self.seen[c as usize];
        if *g != self.generation {
            *g = self.generation;
            list.clear();
            let mut kept = 0;
            for &w in m {
                if self.touched.binary_search(&w).is_ok() {
                    list.push(w);
                } else if kept < self.keep {
                    list.push(w);
                    kept += 1;
                }
            }
        }
        list
    }

    /// Call `f(neighbour, link)` for each neighbour of `x` this search sees: all of them for
    /// a node of a unit, for a hub its hubs and the ports of the units seen.
    #[inline]
    pub fn neighbors(&mut self, t: &Topology, tw: &Twins, x: u32, mut f: impl FnMut(u32, u32)) {
        if !tw.is_hub(x) {
            for &(v, li) in &t.adj[x as usize] {
                f(v, li);
            }
            return;
        }
        for &(v, li) in &tw.hub_adj[x as usize] {
            f(v, li);
        }
        for &c in &tw.hub_classes[x as usize] {
            for &u in self.members(tw, c) {
                let p = &tw.ports[u as usize];
                let from = p.partition_point(|q| q.0 < x);
                for &(h, v, li) in &p[from..] {
                    if h != x {
                        break;
                    }
                    f(v, li);
                }
            }
        }
    }
}
