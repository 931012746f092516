//! Topology events and swaps, applied at their time: links change, routes are re-evaluated
//! (with hysteresis), the replicas they reach re-priced or stopped, KV flows re-routed.

use super::{Changed, Fabric};
use crate::error::Result;
use crate::topo::events::{self, Action, TopoEvent};
use crate::topo::route::RouteTable;
use crate::topo::Topology;

impl Fabric {
    /// Is a topology event due at `now`?
    pub fn event_due(&self, now: u64) -> bool {
        self.events.get(self.next_event).is_some_and(|e| e.at_ns <= now)
    }

    /// Add events (runtime injection); those in the past apply at the next instant.
    pub fn inject(&mut self, mut evs: Vec<TopoEvent>, now: u64) {
        for e in &mut evs {
            e.at_ns = e.at_ns.max(now);
        }
        let mut rest = self.events.split_off(self.next_event);
        rest.extend(evs);
        rest.sort_by_key(|e| e.at_ns);
        self.events.extend(rest);
    }

    /// Apply every event due at `now`. Returns the replicas that must stop or may restart.
    pub fn apply_due(&mut self, now: u64) -> Changed {
        let mut actions = Vec::new();
        while let Some(e) = self.events.get(self.next_event).filter(|e| e.at_ns <= now) {
            actions.push(e.action);
            self.next_event += 1;
        }
        self.apply_actions(now, &actions)
    }

    /// Apply actions now: update links, re-route (with hysteresis), re-price replicas,
    /// re-route and re-share KV flows. Returns the replicas that lost a peer or got their
    /// group back.
    pub fn apply_actions(&mut self, now: u64, actions: &[Action]) -> Changed {
        self.advance(now);
        self.settle_capacity(now);
        // Single-link changes re-price only the replicas they reach (see `refresh_only`).
        let mut links: Vec<u32> = Vec::new();
        let mut whole = false;
        self.routes.changed.clear();
        for a in actions {
            let (touched, changed) = self.routes.apply(&mut self.topo, a);
            self.stats.events_applied += 1;
            self.stats.route_changes += u64::from(changed);
            match touched[..] {
                [] => {}
                [l] => links.push(l),
                _ => whole = true,
            }
        }
        if whole {
            return self.refresh(now);
        }
        let hit = self.replicas_reached(&links);
        self.refresh_only(now, Some(&hit))
    }

    /// Replace the whole topology (runtime swap). The placement's GPU ids must exist. GPUs
    /// removed earlier stay removed (their links in the new topology go down).
    pub fn swap(&mut self, now: u64, mut topo: Topology) -> Result<Changed> {
        self.advance(now);
        self.settle_capacity(now);
        let mut placement = self.placement.clone();
        for g in placement.iter_mut().flatten().flatten() {
            let id = &self.topo.nodes[*g as usize].id;
            *g = topo.node("topology", id)?;
        }
        self.carry_links_to(&topo);
        for (n, _) in self.topo.nodes.iter().zip(&self.topo.removed).filter(|x| *x.1) {
            if let Some(&j) = topo.index.get(&n.id) {
                events::apply(&mut topo, &Action::RemoveGpu(j));
            }
        }
        self.renumber_flows(&topo);
        self.topo = topo;
        self.placement = placement;
        self.routes = RouteTable::default();
        self.stats.events_applied += 1;
        Ok(self.refresh(now))
    }

    /// After a change: stop replicas that lost a peer, restart those whose group is whole
    /// again, re-price the others, re-route flows.
    fn refresh(&mut self, now: u64) -> Changed {
        self.refresh_only(now, None)
    }

    /// [`Fabric::refresh`] limited to the replicas marked in `only` (the others' routes and
    /// the links on them are unchanged, so re-pricing them would give the same costs; their
    /// carried bytes are still settled now, so the per-link sums are added in the same order).
    /// Stopped replicas are always looked at: one restarts when none of its GPUs was removed,
    /// they are connected again and every pair has a route.
    fn refresh_only(&mut self, now: u64, only: Option<&[bool]>) -> Changed {
        let changed = self.update_replicas(only);
        self.recount();
        self.reroute_flows(now);
        changed
    }
}
