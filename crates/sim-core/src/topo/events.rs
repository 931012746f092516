//! Topology events of a scenario (`events`): link bandwidth/latency changes, links going
//! down and up, GPUs removed. Each is applied at its time; routes are re-evaluated with
//! hysteresis, in-flight transfers re-costed, replicas that lost a peer stopped.

use serde::{Deserialize, Serialize};

use super::Topology;
use crate::error::{check, Result, SimError};

/// One event as written in the scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum EventSpec {
    /// Change a link's bandwidth and/or latency (GB/s per direction, µs).
    SetLink {
        at_s: f64,
        src: String,
        dst: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bandwidth_gbps: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        latency_us: Option<f64>,
    },
    /// The link stops carrying traffic.
    LinkDown { at_s: f64, src: String, dst: String },
    /// The link carries traffic again; a replica stopped because its TP/PP group lost
    /// connectivity starts again (empty) once the group is connected. A link of a removed GPU
    /// stays down.
    LinkUp { at_s: f64, src: String, dst: String },
    /// The GPU fails for good: its links go down and its replica stops, never to restart.
    RemoveGpu { at_s: f64, node: String },
}

/// What an event does, on resolved indices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    SetLink { link: u32, bandwidth_gbps: Option<f64>, latency_us: Option<f64> },
    LinkDown(u32),
    LinkUp(u32),
    RemoveGpu(u32),
}

/// A resolved event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TopoEvent {
    pub at_ns: u64,
    pub action: Action,
}

/// One event kind as the front ends offer it: `name` (the scenario's `kind`), a `label`
/// for people, and its `target`: `"link"` (`src`, `dst`) or `"gpu"` (`node`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EventKind {
    pub name: &'static str,
    pub label: &'static str,
    pub target: &'static str,
}

/// Every event kind `events[i].kind` accepts, in display order. [`EventSpec::kind`] names
/// each variant (an exhaustive `match`); the tests hold this list equal to the variants
/// serde accepts.
pub const EVENT_KINDS: &[EventKind] = &[
    EventKind { name: "set_link", label: "degrade a link", target: "link" },
    EventKind { name: "link_down", label: "link down", target: "link" },
    EventKind { name: "link_up", label: "link up", target: "link" },
    EventKind { name: "remove_gpu", label: "remove GPU", target: "gpu" },
];

impl EventSpec {
    /// The kind's name, as written in the scenario (one of [`EVENT_KINDS`]).
    pub fn kind(&self) -> &'static str {
        match self {
            EventSpec::SetLink { .. } => "set_link",
            EventSpec::LinkDown { .. } => "link_down",
            EventSpec::LinkUp { .. } => "link_up",
            EventSpec::RemoveGpu { .. } => "remove_gpu",
        }
    }

    fn at_s(&self) -> f64 {
        match self {
            EventSpec::SetLink { at_s, .. }
            | EventSpec::LinkDown { at_s, .. }
            | EventSpec::LinkUp { at_s, .. }
            | EventSpec::RemoveGpu { at_s, .. } => *at_s,
        }
    }
}

fn link(t: &Topology, path: &str, src: &str, dst: &str) -> Result<u32> {
    let a = t.node(&format!("{path}.src"), src)?;
    let b = t.node(&format!("{path}.dst"), dst)?;
    t.link_between(a, b).ok_or_else(|| SimError::config(path, format!("no link between '{src}' and '{dst}'")))
}

/// Resolve and validate a list of events against a topology; sorted by time (stable).
/// Error paths are `events[i]…`.
pub fn resolve(t: &Topology, specs: &[EventSpec]) -> Result<Vec<TopoEvent>> {
    let mut out = Vec::with_capacity(specs.len());
    for (i, e) in specs.iter().enumerate() {
        let path = format!("events[{i}]");
        check::non_negative(&format!("{path}.at_s"), e.at_s())?;
        let action = match e {
            EventSpec::SetLink { src, dst, bandwidth_gbps, latency_us, .. } => {
                if bandwidth_gbps.is_none() && latency_us.is_none() {
                    return Err(SimError::config(path, "set_link needs bandwidth_gbps and/or latency_us"));
                }
                if let Some(b) = bandwidth_gbps {
                    check::positive(&format!("{path}.bandwidth_gbps"), *b)?;
                }
                if let Some(l) = latency_us {
                    check::positive(&format!("{path}.latency_us"), *l)?;
                    check::in_range(&format!("{path}.latency_us"), *l, 0.0, super::MAX_LATENCY_US)?;
                }
                Action::SetLink { link: link(t, &path, src, dst)?, bandwidth_gbps: *bandwidth_gbps, latency_us: *latency_us }
            }
            EventSpec::LinkDown { src, dst, .. } => Action::LinkDown(link(t, &path, src, dst)?),
            EventSpec::LinkUp { src, dst, .. } => Action::LinkUp(link(t, &path, src, dst)?),
            EventSpec::RemoveGpu { node, .. } => {
                let n = t.node(&format!("{path}.node"), node)?;
                if t.nodes[n as usize].kind != super::NodeKind::Gpu {
                    return Err(SimError::config(format!("{path}.node"), format!("'{node}' is not a GPU")));
                }
                Action::RemoveGpu(n)
            }
        };
        out.push(TopoEvent { at_ns: (e.at_s() * 1e9).round() as u64, action });
    }
    out.sort_by_key(|e| e.at_ns);
    Ok(out)
}

/// Apply an action to the topology's link state. Returns the links touched and whether the
/// change is structural (path sets may change) and may add paths. A `link_up` on a link of a
/// removed GPU touches nothing.
pub fn apply(t: &mut Topology, a: &Action) -> (Vec<u32>, bool, bool) {
    t.version += 1;
    match *a {
        Action::SetLink { link, bandwidth_gbps, latency_us } => {
            let l = &mut t.links[link as usize];
            let mut faster = false;
            if let Some(b) = bandwidth_gbps {
                l.bandwidth_gbps = b;
            }
            if let Some(x) = latency_us {
                faster = x < l.latency_us;
                l.latency_us = x;
            }
            (vec![link], latency_us.is_some(), faster)
        }
        Action::LinkDown(link) => {
            t.links[link as usize].up = false;
            (vec![link], true, false)
        }
        Action::LinkUp(link) => {
            let l = &t.links[link as usize];
            if t.removed[l.src as usize] || t.removed[l.dst as usize] {
                return (Vec::new(), false, false);
            }
            t.links[link as usize].up = true;
            (vec![link], true, true)
        }
        Action::RemoveGpu(node) => {
            t.removed[node as usize] = true;
            let mut touched = Vec::new();
            for (i, l) in t.links.iter_mut().enumerate() {
                if l.src == node || l.dst == node {
                    l.up = false;
                    touched.push(i as u32);
                }
            }
            (touched, true, false)
        }
    }
}
