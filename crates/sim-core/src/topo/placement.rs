//! Placing replicas (PP stages of TP groups) onto GPUs.
//!
//! Automatic: GPUs are grouped into machines by the id prefix before the last `.`
//! (`n1.gpu3` → `n1`; ids without a dot form one machine), in node order. Each TP group takes
//! `tp` free GPUs of one machine (TP inside a node); the stages of a replica go to successive
//! machines when there are several (PP across nodes); a group that fits no single machine
//! takes free GPUs in order. Explicit: `deployment.placement`, one list of `tp·pp` GPU ids
//! per replica, stage-major (stage 0's TP ranks first).
//! Errors: more GPUs asked than the topology has, unknown or non-GPU ids, a GPU used twice,
//! and a replica whose GPUs have no path between them.

use petgraph::unionfind::UnionFind;

use super::{NodeKind, Topology};
use crate::error::{Result, SimError};

/// GPU node indices: `replicas[r][s]` = stage s of replica r, in TP rank order.
pub type Placement = Vec<Vec<Vec<u32>>>;

fn machine(id: &str) -> &str {
    id.rsplit_once('.').map_or("", |(m, _)| m)
}

/// Automatic placement of `replicas` replicas of `tp × pp` GPUs.
pub fn auto(t: &Topology, tp: u32, pp: u32, replicas: u32) -> Result<Placement> {
    let gpus = t.gpus();
    let need = (tp * pp) as usize * replicas as usize;
    if need > gpus.len() {
        return Err(SimError::config(
            "deployment",
            format!("needs {need} GPUs (tp {tp} × pp {pp} × {replicas} replicas) but the topology has {}", gpus.len()),
        ));
    }
    // machines in first-appearance order, each a queue of free GPUs
    let mut machines: Vec<(String, Vec<u32>)> = Vec::new();
    for &g in &gpus {
        let m = machine(&t.nodes[g as usize].id);
        match machines.iter_mut().find(|(name, _)| name == m) {
            Some((_, v)) => v.push(g),
            None => machines.push((m.to_string(), vec![g])),
        }
    }
    let tp = tp as usize;
    let mut out = Vec::new();
    for _ in 0..replicas {
        let mut stages = Vec::new();
        let mut prev: Option<usize> = None;
        for _ in 0..pp {
            let n = machines.len();
            let start = prev.map_or(0, |p| (p + 1) % n);
            let pick = (0..n).map(|k| (start + k) % n).find(|&m| machines[m].1.len() >= tp);
            let group: Vec<u32> = match pick {
                Some(m) => {
                    prev = Some(m);
                    machines[m].1.drain(..tp).collect()
                }
                None => {
                    let mut g = Vec::new();
                    for (_, free) in machines.iter_mut() {
                        while g.len() < tp && !free.is_empty() {
                            g.push(free.remove(0));
                        }
                    }
                    g
                }
            };
            stages.push(group);
        }
        out.push(stages);
    }
    Ok(out)
}

/// Explicit placement from `deployment.placement`.
pub fn explicit(t: &Topology, lists: &[Vec<String>], tp: u32, pp: u32, replicas: u32) -> Result<Placement> {
    if lists.len() != replicas as usize {
        return Err(SimError::config(
            "deployment.placement",
            format!("must list {replicas} replicas (got {})", lists.len()),
        ));
    }
    let mut used = vec![None::<(usize, usize)>; t.nodes.len()];
    let mut out = Vec::new();
    for (r, ids) in lists.iter().enumerate() {
        let path = format!("deployment.placement[{r}]");
        if ids.len() != (tp * pp) as usize {
            return Err(SimError::config(path, format!("must name tp × pp = {} GPUs (got {})", tp * pp, ids.len())));
        }
        let mut stages = vec![Vec::new(); pp as usize];
        for (i, id) in ids.iter().enumerate() {
            let p = format!("{path}[{i}]");
            let g = t.node(&p, id)?;
            if t.nodes[g as usize].kind != NodeKind::Gpu {
                return Err(SimError::config(p, format!("'{id}' is not a GPU")));
            }
            if let Some((r0, i0)) = used[g as usize] {
                return Err(SimError::config(
                    p,
                    format!("GPU '{id}' is oversubscribed (also deployment.placement[{r0}][{i0}])"),
                ));
            }
            used[g as usize] = Some((r, i));
            stages[i / tp as usize].push(g);
        }
        out.push(stages);
    }
    Ok(out)
}

/// Check that each replica's GPUs are connected over links that are up; the error names the
/// replica and two GPUs with no path between them. `path` is where the error points.
pub fn check_connected(t: &Topology, placement: &Placement, path: &str) -> Result<()> {
    let comp = components(t);
    for (r, stages) in placement.iter().enumerate() {
        if let Some(bad) = disconnected(&comp, stages) {
            return Err(SimError::config(
                path,
                format!(
                    "replica {r}: GPUs '{}' and '{}' have no path between them (a TP group or pipeline over disconnected GPUs)",
                    t.nodes[bad.0 as usize].id, t.nodes[bad.1 as usize].id
                ),
            ));
        }
    }
    Ok(())
}

/// Connected-component labels of every node over links that are up.
pub fn components(t: &Topology) -> Vec<u32> {
    let mut uf = UnionFind::<u32>::new(t.nodes.len());
    for l in t.links.iter().filter(|l| l.up) {
        uf.union(l.src, l.dst);
    }
    uf.into_labeling()
}

/// Two GPUs of the replica in different components, if any.
pub fn disconnected(comp: &[u32], stages: &[Vec<u32>]) -> Option<(u32, u32)> {
    let mut all = stages.iter().flatten();
    let &first = all.next()?;
    all.find(|&&g| comp[g as usize] != comp[first as usize]).map(|&g| (first, g))
}
