//! Topology as data: the GPU fabric a deployment runs on.
//!
//! A topology is a graph of nodes (GPUs, NVSwitches, hosts, NICs, network switches) and
//! full-duplex links `{src, dst, kind, bandwidth_gbps, latency_us}`. `bandwidth_gbps` is GB/s
//! *per direction* (an H200's 900 GB/s NVLink is 450 each way); `latency_us` is one traversal
//! of the link. It comes from a scenario's `topology` entry — a preset name
//! (`"hgx-h200"`) or a table `{preset?, nodes, links, routing?}` whose nodes and links extend
//! the preset (a link between the same two nodes as a preset link replaces that link) — or
//! from the Python builder `o1sim.Topology`, which produces the same table.
//!
//! Submodules: the table form as written (`spec.rs`: [`TopologyTable`], [`TopologyInput`]),
//! [`presets`] (the shipped fabrics), [`route`] (RTMPv2 routing over k shortest paths, Pareto
//! frontier), [`paths`] (the k shortest paths), [`twins`] (the interchangeable units of a
//! fabric, which the path searches see one of), [`collective`] (α–β costs of AllReduce and send/recv), [`placement`] (TP groups,
//! PP stages and replicas onto GPUs), [`events`] (link changes and failures during a run).
//! This file resolves the table into a validated [`Topology`].

pub mod collective;
pub mod events;
pub mod paths;
pub mod placement;
pub mod presets;
pub mod route;
mod spec;
pub mod twins;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{check, Result, SimError};

pub use spec::{LinkKind, LinkSpec, NodeKind, NodeSpec, RoutingSpec, TopologyInput, TopologyTable, MAX_LATENCY_US};

/// A resolved node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    pub id: String,
    pub kind: NodeKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
}

/// A resolved link with its live state (events change it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    /// Node indices.
    pub src: u32,
    pub dst: u32,
    pub kind: LinkKind,
    /// Current GB/s per direction.
    pub bandwidth_gbps: f64,
    /// Current latency, µs.
    pub latency_us: f64,
    /// As loaded (before any event).
    pub nominal_gbps: f64,
    pub up: bool,
}

/// A validated topology: nodes, links, and the graph the routing runs on.
#[derive(Debug, Clone)]
pub struct Topology {
    pub nodes: Vec<Node>,
    pub links: Vec<Link>,
    pub routing: RoutingSpec,
    /// id → node index.
    pub index: BTreeMap<String, u32>,
    /// Unordered node pair → link index.
    pub pair: BTreeMap<(u32, u32), u32>,
    /// B_min of RTMPv2: the smallest nominal link bandwidth, GB/s.
    pub b_min: f64,
    /// Per node: (neighbour, link), in link order (for the routing's Dijkstra).
    pub adj: Vec<Vec<(u32, u32)>>,
    /// Per node: a GPU removed by a `remove_gpu` event. Its links stay down for good (a
    /// `link_up` on one of them changes nothing).
    pub removed: Vec<bool>,
    /// Link changes applied so far ([`events::apply`] counts them): route searches built
    /// for an earlier state notice they must start again.
    pub version: u64,
}

fn key(a: u32, b: u32) -> (u32, u32) {
    (a.min(b), a.max(b))
}

impl Topology {
    /// Resolve and validate an input. Error paths are relative (`links[3].bandwidth_gbps`);
    /// callers prefix `topology`.
    pub fn from_input(input: &TopologyInput) -> Result<Topology> {
        let table = match input {
            TopologyInput::Preset(name) => {
                let mut t = presets::preset(name).ok_or_else(|| presets::unknown("", name))?;
                t.preset = None;
                return Topology::from_parts(t.nodes, t.links, Vec::new(), t.routing);
            }
            TopologyInput::Table(t) => t,
        };
        let (mut nodes, mut links) = (Vec::new(), Vec::new());
        if let Some(name) = &table.preset {
            let p = presets::preset(name).ok_or_else(|| presets::unknown("preset", name))?;
            nodes = p.nodes;
            links = p.links;
        }
        let base_nodes = nodes.len();
        nodes.extend(table.nodes.iter().cloned());
        Topology::from_parts_offset(nodes, base_nodes, links, table.links.clone(), table.routing)
    }

    fn from_parts(nodes: Vec<NodeSpec>, links: Vec<LinkSpec>, extra: Vec<LinkSpec>, routing: RoutingSpec) -> Result<Topology> {
        let n = nodes.len();
        Topology::from_parts_offset(nodes, n, links, extra, routing)
    }

    /// `nodes[..base_nodes]` and `base_links` come from a preset (trusted); the rest are the
    /// user's, validated with paths `nodes[i]` / `links[i]` (i within the user's lists).
    fn from_parts_offset(
        nodes: Vec<NodeSpec>,
        base_nodes: usize,
        base_links: Vec<LinkSpec>,
        user_links: Vec<LinkSpec>,
        routing: RoutingSpec,
    ) -> Result<Topology> {
        check::finite("routing.alpha", routing.alpha)?;
        if !(0.0..=1.0).contains(&routing.alpha) {
            return Err(SimError::config("routing.alpha", format!("must be in [0, 1] (got {})", routing.alpha)));
        }
        check::in_range("routing.k_paths", routing.k_paths, 1, 16)?;
        check::non_negative("routing.hysteresis", routing.hysteresis)?;
        let gpu_names: Vec<String> = crate::catalog::gpu_presets().into_iter().map(|g| g.name).collect();
        let gpu_refs: Vec<&str> = gpu_names.iter().map(String::as_str).collect();
        let mut index = BTreeMap::new();
        let mut out_nodes = Vec::with_capacity(nodes.len());
        for (i, nd) in nodes.into_iter().enumerate() {
            let path = format!("nodes[{}]", i.saturating_sub(base_nodes));
            if nd.id.is_empty() {
                return Err(SimError::config(format!("{path}.id"), "must not be empty"));
            }
            if index.insert(nd.id.clone(), i as u32).is_some() {
                return Err(SimError::config(format!("{path}.id"), format!("duplicate node id '{}'", nd.id)));
            }
            if let Some(g) = &nd.gpu {
                if nd.kind != NodeKind::Gpu {
                    return Err(SimError::config(format!("{path}.gpu"), "only GPU nodes name a GPU model"));
                }
                if !gpu_refs.contains(&g.as_str()) {
                    return Err(check::unknown_name(&format!("{path}.gpu"), "GPU", g, &gpu_refs));
                }
            }
            out_nodes.push(Node { id: nd.id, kind: nd.kind, gpu: nd.gpu });
        }
        let mut t = Topology {
            nodes: out_nodes,
            links: Vec::new(),
            routing,
            index,
            pair: BTreeMap::new(),
            b_min: f64::INFINITY,
            adj: Vec::new(),
            removed: Vec::new(),
            version: 0,
        };
        for l in base_links {
            let (a, b) = (t.index[&l.src], t.index[&l.dst]);
            t.pair.insert(key(a, b), t.links.len() as u32);
            t.links.push(Link { src: a, dst: b, kind: l.kind, bandwidth_gbps: l.bandwidth_gbps, latency_us: l.latency_us, nominal_gbps: l.bandwidth_gbps, up: true });
        }
        let preset_links = t.links.len();
        for (i, l) in user_links.iter().enumerate() {
            let path = format!("links[{i}]");
            let node = |id: &str, f: &str| {
                t.index.get(id).copied().ok_or_else(|| {
                    let ids: Vec<&str> = t.index.keys().map(String::as_str).collect();
                    check::unknown_name(&format!("{path}.{f}"), "node id", id, &ids)
                })
            };
            let (a, b) = (node(&l.src, "src")?, node(&l.dst, "dst")?);
            if a == b {
                return Err(SimError::config(path, format!("self loop on '{}'", l.src)));
            }
            check::positive(&format!("{path}.bandwidth_gbps"), l.bandwidth_gbps)?;
            check::positive(&format!("{path}.latency_us"), l.latency_us)?;
            check::in_range(&format!("{path}.latency_us"), l.latency_us, 0.0, MAX_LATENCY_US)?;
            let link = Link { src: a, dst: b, kind: l.kind, bandwidth_gbps: l.bandwidth_gbps, latency_us: l.latency_us, nominal_gbps: l.bandwidth_gbps, up: true };
            match t.pair.get(&key(a, b)) {
                Some(&j) if (j as usize) < preset_links => t.links[j as usize] = link,
                Some(&j) => {
                    let first = j as usize - preset_links;
                    return Err(SimError::config(path, format!("duplicate link {} – {} (also links[{first}])", l.src, l.dst)));
                }
                None => {
                    t.pair.insert(key(a, b), t.links.len() as u32);
                    t.links.push(link);
                }
            }
        }
        t.adj = vec![Vec::new(); t.nodes.len()];
        for (i, l) in t.links.iter().enumerate() {
            t.adj[l.src as usize].push((l.dst, i as u32));
            t.adj[l.dst as usize].push((l.src, i as u32));
        }
        t.b_min = t.links.iter().map(|l| l.nominal_gbps).fold(f64::INFINITY, f64::min);
        t.removed = vec![false; t.nodes.len()];
        Ok(t)
    }

    /// Parse a topology entry from JSON text (a preset name string or a table).
    pub fn from_json(text: &str) -> Result<Topology> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let input: TopologyInput = serde_path_to_error::deserialize(de).map_err(|e| {
            let p = e.path().to_string();
            SimError::config(if p == "." { String::new() } else { p }, e.into_inner())
        })?;
        Topology::from_input(&input)
    }

    /// Node index of `id`, or a config error at `path` listing close ids.
    pub fn node(&self, path: &str, id: &str) -> Result<u32> {
        self.index.get(id).copied().ok_or_else(|| {
            let ids: Vec<&str> = self.index.keys().map(String::as_str).collect();
            check::unknown_name(path, "node id", id, &ids)
        })
    }

    /// Link index between two node ids (either order).
    pub fn link_between(&self, a: u32, b: u32) -> Option<u32> {
        self.pair.get(&key(a, b)).copied()
    }

    /// GPU node indices in node order.
    pub fn gpus(&self) -> Vec<u32> {
        (0..self.nodes.len() as u32).filter(|&i| self.nodes[i as usize].kind == NodeKind::Gpu).collect()
    }

    /// The table form (every node and link, current state), for the front ends.
    pub fn to_table(&self) -> TopologyTable {
        TopologyTable {
            preset: None,
            nodes: self
                .nodes
                .iter()
                .map(|n| NodeSpec { id: n.id.clone(), kind: n.kind, gpu: n.gpu.clone() })
                .collect(),
            links: self
                .links
                .iter()
                .map(|l| LinkSpec {
                    src: self.nodes[l.src as usize].id.clone(),
                    dst: self.nodes[l.dst as usize].id.clone(),
                    kind: l.kind,
                    bandwidth_gbps: l.bandwidth_gbps,
                    latency_us: l.latency_us,
                })
                .collect(),
            routing: self.routing,
        }
    }
}

#[cfg(test)]
mod tests;
