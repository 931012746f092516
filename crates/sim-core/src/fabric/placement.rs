//! Which replicas the fabric runs: one stops when it loses a TP/PP peer (a GPU removed, no
//! route left), restarts when its group is whole again; and which replicas a change of
//! single links reaches (the others keep their prices).

use super::{Changed, Fabric};
use crate::topo::placement;

impl Fabric {
    /// Stop the live replicas marked in `only` (all when `None`) that lost a peer, re-price
    /// the others marked, and restart stopped replicas whose group is whole again (none of
    /// its GPUs removed, connected, every pair routed). Unmarked live replicas keep their
    /// prices; their carried bytes are settled now, so the per-link sums are added in the
    /// same order.
    pub(super) fn update_replicas(&mut self, only: Option<&[bool]>) -> Changed {
        let comp = placement::components(&self.topo);
        let mut stopped = Vec::new();
        let mut restarted = Vec::new();
        for rep in 0..self.placement.len() {
            if !self.alive[rep] {
                let gpus = &self.placement[rep];
                let whole = !gpus.iter().flatten().any(|&g| self.topo.removed[g as usize])
                    && placement::disconnected(&comp, gpus).is_none();
                if whole && self.rebuild(rep) {
                    self.alive[rep] = true;
                    self.stats.restarted_replicas += 1;
                    restarted.push(rep);
                }
                continue;
            }
            if only.is_some_and(|o| !o[rep]) {
                self.settle_link_bytes(rep);
                continue;
            }
            let lost = placement::disconnected(&comp, &self.placement[rep]).is_some() || !self.rebuild(rep);
            if lost {
                self.alive[rep] = false;
                self.stats.stopped_replicas += 1;
                stopped.push(rep);
            }
        }
        Changed { stopped, restarted }
    }

    /// Replicas with a GPU pair whose chosen route crosses one of `links`, is missing, or
    /// changed itself (`routes.changed`): [`crate::topo::route::RouteTable::reached`]. With expert parallelism every replica: its all-to-alls' RDMA
    /// flows follow each GPU's way into the network, not a pair's route, and a change of any
    /// link may open or close one.
    pub(super) fn replicas_reached(&self, links: &[u32]) -> Vec<bool> {
        if self.ep {
            return vec![true; self.placement.len()];
        }
        let mut rep_of = vec![u32::MAX; self.topo.nodes.len()];
        for (r, st) in self.placement.iter().enumerate() {
            for &g in st.iter().flatten() {
                rep_of[g as usize] = r as u32;
            }
        }
        let mut hit = vec![false; self.placement.len()];
        for key in self.routes.reached(links) {
            let r = rep_of[key.0 as usize];
            if r != u32::MAX && r == rep_of[key.1 as usize] {
                hit[r as usize] = true;
            }
        }
        hit
    }

    /// Is `to` reachable from `from` for a KV move (both alive)?
    pub fn route_score(&mut self, from: usize, to: usize) -> f64 {
        let (a, b) = (self.placement[from][0][0], self.placement[to][0][0]);
        if a == b {
            return f64::INFINITY;
        }
        self.routes.get(&self.topo, a, b).route().map_or(f64::NEG_INFINITY, |c| c.score)
    }
}
