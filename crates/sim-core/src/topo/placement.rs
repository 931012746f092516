//! Placing replicas (PP stages of DP ranks of TP groups) onto GPUs.
//!
//! A replica is `pp` stages of `dp · tp` GPUs: `dp` data-parallel attention ranks of `tp`
//! GPUs each (`dp = 1`: one TP group per stage). Automatic: GPUs are grouped into machines
//! by the id prefix before the last `.` (`n1.gpu3` → `n1`; ids without a dot form one
//! machine), in node order. Each DP rank's TP group takes `tp` free GPUs of one machine (TP
//! inside a node), a stage's ranks filling a machine before the next (a stage of `dp · tp`
//! GPUs may span machines: dp 16 × tp 1 over two HGX boxes); the stages of a replica go to
//! successive machines when there are several (PP across nodes); a group that fits no single
//! machine takes free GPUs in order ([`auto`]). Explicit: `deployment.placement`, one list of
//! `dp·tp·pp` GPU ids per replica, stage-major (stage 0's ranks first, each rank's `tp` ids
//! in TP rank order).
//! Errors: more GPUs asked than the topology has, unknown or non-GPU ids, a GPU used twice,
//! and a replica whose GPUs have no path between them.

use petgraph::unionfind::UnionFind;

use super::{NodeKind, Topology};
use crate::memory::Parallel;
use crate::error::{Result, SimError};

/// GPU node indices: `replicas[r][s]` = stage s of replica r: its `dp` ranks in turn, each
/// `tp` GPUs in TP rank order (`dp · tp` GPUs; with `dp = 1`, the stage's TP group).
pub type Placement = Vec<Vec<Vec<u32>>>;

fn machine(id: &str) -> &str {
    id.rsplit_once('.').map_or("", |(m, _)| m)
}

/// The shape of a replica a placement gives: `tp`, `pp` and `dp` of `par`, as
/// "dp 2 × tp 8 × pp 1" (without the dp part when it is 1, as before data parallelism).
fn shape(par: &Parallel) -> String {
    let dp = if par.dp > 1 { format!("dp {} × ", par.dp) } else { String::new() };
    format!("{dp}tp {} × pp {}", par.tp, par.pp)
}

/// Automatic placement of `replicas` replicas of `dp × tp × pp` GPUs (`par`).
///
/// The rule: GPUs are grouped by machine (the part of their id before the last `.`), in the
/// order they first appear. A replica's stages are placed in turn, and a stage's `dp` ranks
/// of `tp` GPUs in turn; each rank takes `tp` GPUs of one machine, the first machine with
/// that many free from where the previous rank went (so a stage fills a machine before the
/// next and may span several), and a stage's first rank starts looking at the machine after
/// the previous stage's last one (so pipeline stages go to other machines when they can).
/// When no machine has `tp` free GPUs the rank takes free GPUs of every machine in order.
/// With `dp = 1` this is the placement of TP groups and PP stages it has always been.
pub fn auto(t: &Topology, par: &Parallel, replicas: u32) -> Result<Placement> {
    let gpus = t.gpus();
    let need = u64::from(par.gpus()) * u64::from(replicas);
    if need > gpus.len() as u64 {
        return Err(SimError::config(
            "deployment",
            format!("needs {need} GPUs ({} × {replicas} replicas) but the topology has {}", shape(par), gpus.len()),
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
    let tp = par.tp as usize;
    let mut out = Vec::new();
    for _ in 0..replicas {
        let mut stages = Vec::new();
        let mut prev: Option<usize> = None;
        for _ in 0..par.pp {
            let mut stage = Vec::with_capacity(tp * par.dp as usize);
            // the machine of the stage's previous rank
            let mut here: Option<usize> = None;
            for _ in 0..par.dp {
                let n = machines.len();
                let start = here.unwrap_or_else(|| prev.map_or(0, |p| (p + 1) % n));
                let pick = (0..n).map(|k| (start + k) % n).find(|&m| machines[m].1.len() >= tp);
                match pick {
                    Some(m) => {
                        here = Some(m);
                        stage.extend(machines[m].1.drain(..tp));
                    }
                    None => {
                        let mut g = 0;
                        for (_, free) in machines.iter_mut() {
                            while g < tp && !free.is_empty() {
                                stage.push(free.remove(0));
                                g += 1;
                            }
                        }
                    }
                }
            }
            if here.is_some() {
                prev = here;
            }
            stages.push(stage);
        }
        out.push(stages);
    }
    Ok(out)
}

/// Explicit placement from `deployment.placement`: per replica `dp × tp × pp` GPU ids, stage
/// by stage, each stage's DP ranks in turn (`tp` ids each, in TP rank order).
pub fn explicit(t: &Topology, lists: &[Vec<String>], par: &Parallel, replicas: u32) -> Result<Placement> {
    if lists.len() != replicas as usize {
        return Err(SimError::config(
            "deployment.placement",
            format!("must list {replicas} replicas (got {})", lists.len()),
        ));
    }
    let stage_len = (par.dp as usize) * (par.tp as usize);
    let per_replica = stage_len * par.pp as usize;
    let mut used = vec![None::<(usize, usize)>; t.nodes.len()];
    let mut out = Vec::new();
    for (r, ids) in lists.iter().enumerate() {
        let path = format!("deployment.placement[{r}]");
        if ids.len() != per_replica {
            let what = if par.dp > 1 { "dp × tp × pp" } else { "tp × pp" };
            return Err(SimError::config(path, format!("must name {what} = {per_replica} GPUs (got {})", ids.len())));
        }
        let mut stages = vec![Vec::new(); par.pp as usize];
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
            stages[i / stage_len].push(g);
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
