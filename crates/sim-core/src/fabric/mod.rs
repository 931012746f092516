//! The engine's side of a topology: placement, per-replica communication costs cached
//! between topology changes, topology events, KV transfers that share links, per-link
//! accounting. Only built when the scenario has a `topology`; without one the engine never
//! touches this module (and its results are unchanged).
//!
//! KV transfers are a fluid model: each transfer is one flow per GPU pair (prefill rank →
//! decode rank of the same stage), each flow crossing its chosen route; flows on the same
//! link and direction share its bandwidth equally, so a flow's rate is
//! `min over its links of bw / flows there`. Rates are recomputed whenever a flow starts or
//! ends or the topology changes (in-flight transfers are re-costed, and re-routed when
//! their route changed). A flow ends when its bytes are through, plus its route latency.
//!
//! Collectives of different replicas share links too, priced per step: when a replica starts
//! a step, each (link, direction) its TP AllReduces (ring or tree) and PP sends cross is
//! divided among `1 + r + k` parties, r the other replicas whose step in flight uses that
//! link in that direction and k the KV flows in their data phase on it; the step's
//! collectives are priced with those shares (the slowest flow paces each collective, as
//! alone) and the price holds for the whole step. With no one else on its links a step is
//! priced from the cached costs, bit for bit as before. The approximation: a step in
//! flight counts as using its links for its whole duration (its collectives are assumed to
//! coincide with the newcomer's, a pessimistic bound: in reality they take a fraction of a
//! step), a step already running is not re-priced when another starts, and KV flows do not
//! slow down for collectives (their fluid model shares links among KV flows only).
//!
//! Expert parallelism (`ep > 1`): each stage's `dp · tp` GPUs are one EP group, whose
//! all-to-alls (dispatch and combine, three ways: `topo::collective::A2aMode`) are priced on
//! their flows' links and cached with the TP AllReduces, re-priced under sharing like them
//! ([`Fabric::ep_a2a`]); a step in flight counts as using its all-to-alls' links too.
//!
//! The module by concern: [`placement`] (which replicas are whole, stopped or restarted,
//! and which a link change reaches), [`comm`] (each replica's communication priced on its
//! routes, alone or sharing links), [`transfers`] (KV flows), [`links`] (per-link bytes
//! and capacity), [`events`] (topology events and swaps, applied through the others). The
//! state they share is defined here: [`Fabric`] and the record of each KV flow in flight.

mod comm;
mod events;
mod links;
mod placement;
mod transfers;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{Result, SimError};
use crate::memory::Parallel;
use crate::topo::collective::{A2aLanes, Comm, CommLanes, EpA2a, Flow};
use crate::topo::events::TopoEvent;
use crate::topo::placement::{self as place, Placement};
use crate::topo::route::RouteTable;
use crate::topo::Topology;

pub use links::LinkTable;

/// Counters reported in `summary.topology`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FabricStats {
    /// Requests moved off a replica that stopped (re-queued, none lost).
    pub moved_requests: u64,
    /// Replicas stopped because they lost a TP/PP peer.
    pub stopped_replicas: u64,
    pub events_applied: u64,
    /// Chosen routes that changed over the run.
    pub route_changes: u64,
    /// Replicas started again after their TP/PP group was connected again (`link_up`).
    pub restarted_replicas: u64,
    /// Steps whose collectives were priced sharing a link with another replica's step in
    /// flight or with a KV transfer.
    pub shared_steps: u64,
    pub kv_transfers: u64,
    pub kv_bytes: f64,
    /// Durations of completed KV transfers, ms (for percentiles).
    #[serde(skip)]
    pub kv_transfer_ms: Vec<f64>,
}

/// Replicas whose state a topology change flipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changed {
    /// Lost a TP/PP peer (GPU removed, no route left): they stop, their requests move.
    pub stopped: Vec<usize>,
    /// Stopped earlier, now connected again with none of their GPUs removed: they start
    /// again, empty.
    pub restarted: Vec<usize>,
}

/// Topology state of a running engine.
#[derive(Debug, Clone)]
pub struct Fabric {
    pub topo: Topology,
    pub routes: RouteTable,
    pub placement: Placement,
    comm: Vec<Comm>,
    pub alive: Vec<bool>,
    events: Vec<TopoEvent>,
    next_event: usize,
    hidden: f64,
    layers: f64,
    /// Replicas `0..prefill_replicas` prefill, the rest decode; 0 when co-located.
    pub prefill_replicas: usize,
    /// KV bytes per token on one GPU (its layers and KV heads).
    kv_bytes_per_token_gpu: f64,
    flows: Vec<KvFlow>,
    flows_t: u64,
    /// Request → (flows left, destination replica, start time).
    pending: BTreeMap<u32, (u32, u32, u64)>,
    pub stats: FabricStats,
    link_bytes: Vec<f64>,
    /// ∫ bandwidth dt per link (bytes one direction could carry), settled at link changes.
    link_capacity: Vec<f64>,
    /// Time up to which `link_capacity` is settled, ns.
    capacity_t: u64,
    /// Tokens each replica processed since its communication was last rebuilt.
    rep_tokens: Vec<f64>,
    /// Per replica: (link, bytes per token) of its collectives and PP transfers.
    rep_bpt: Vec<Vec<(u32, f64)>>,
    /// Per replica: the links of its collectives, to re-price them when shared.
    lanes: Vec<CommLanes>,
    /// GPUs of one DP rank's TP group (`tp`): a stage of `dp · tp` GPUs is `dp` such groups.
    tp: usize,
    /// Expert parallelism over every stage (`ep = dp · tp > 1`): each stage's GPUs are an EP
    /// group whose all-to-alls are priced here ([`Fabric::ep_a2a`]).
    ep: bool,
    /// Per replica, per stage: its EP group's all-to-all lanes (empty without `ep`).
    a2a: Vec<Vec<A2aLanes>>,
    /// Per replica: its all-to-alls alone on their links, averaged over its stages.
    a2a_alone: Vec<Option<EpA2a>>,
    /// Per replica: every hop its step may cross (its collectives' and, with `ep`, its
    /// all-to-alls'), sorted, unique: what other replicas' steps see of it in flight.
    step_hops: Vec<Vec<usize>>,
    /// Per replica: some link of its collectives is also used by another live replica's.
    overlap: Vec<bool>,
    /// Per replica: a step is in flight (between [`Fabric::step_comm_s`] and
    /// [`Fabric::end_step`]).
    in_flight: Vec<bool>,
    /// Per hop ([`hop_key`]): replicas with `overlap` whose step in flight uses it.
    hop_steps: Vec<u32>,
    /// Per hop: KV flows in their data phase on it (as of the last re-share).
    hop_kv: Vec<u32>,
    /// KV flows in their data phase (as of the last re-share).
    kv_busy: usize,
    /// A replica's communication re-priced under sharing (reused buffer).
    scratch: Comm,
}

/// One KV flow in flight.
#[derive(Debug, Clone)]
struct KvFlow {
    req: u32,
    src: u32,
    dst: u32,
    flow: Flow,
    /// Bytes still to send (data phase).
    remaining: f64,
    /// Bytes per ns under the current sharing.
    rate: f64,
    /// Set once the data is through: the time the last byte lands.
    done_at: Option<u64>,
    /// One part of a transfer split over its pair's frontier (`routing.multipath_kv`): it
    /// keeps its own path while that path is up, instead of following the chosen route.
    pinned: bool,
}

impl Fabric {
    /// Place the deployment on the topology and price each replica's communication. `par`
    /// gives the shape of each replica's stages ([`Placement`]): `dp` ranks of `tp` GPUs,
    /// each rank's TP group all-reducing on its own; with `ep > 1` every stage is also an
    /// expert-parallel group whose all-to-alls are priced ([`Fabric::ep_a2a`]).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        topo: Topology,
        events: Vec<TopoEvent>,
        placement: Placement,
        par: Parallel,
        hidden: u32,
        layers: u32,
        kv_bytes_per_token_gpu: f64,
        prefill_replicas: usize,
    ) -> Result<Fabric> {
        place::check_connected(&topo, &placement, "deployment.placement")?;
        let n = placement.len();
        let links = topo.links.len();
        let mut f = Fabric {
            topo,
            routes: RouteTable::default(),
            placement,
            comm: vec![Comm::default(); n],
            alive: vec![true; n],
            events,
            next_event: 0,
            hidden: f64::from(hidden),
            layers: f64::from(layers),
            prefill_replicas,
            kv_bytes_per_token_gpu,
            flows: Vec::new(),
            flows_t: 0,
            pending: BTreeMap::new(),
            stats: FabricStats::default(),
            link_bytes: vec![0.0; links],
            link_capacity: vec![0.0; links],
            capacity_t: 0,
            rep_tokens: vec![0.0; n],
            rep_bpt: vec![Vec::new(); n],
            lanes: vec![CommLanes::default(); n],
            tp: par.tp.max(1) as usize,
            ep: par.ep > 1,
            a2a: vec![Vec::new(); n],
            a2a_alone: vec![None; n],
            step_hops: vec![Vec::new(); n],
            overlap: vec![false; n],
            in_flight: vec![false; n],
            hop_steps: vec![0; 2 * links],
            hop_kv: vec![0; 2 * links],
            kv_busy: 0,
            scratch: Comm::default(),
        };
        for rep in 0..n {
            if !f.rebuild(rep) {
                return Err(SimError::config("topology", format!("replica {rep}: its GPUs have no route between them")));
            }
        }
        f.recount();
        Ok(f)
    }

    /// Next instant something happens here: a topology event or a KV flow milestone.
    pub fn next_time(&self) -> Option<u64> {
        let ev = self.events.get(self.next_event).map(|e| e.at_ns);
        let fl = self.next_flow_time();
        match (ev, fl) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Topology events not applied: due after the run's work was done (a run ends when every
    /// request is finished or rejected; later events are reported, never applied).
    pub fn events_not_reached(&self) -> usize {
        self.events.len() - self.next_event
    }
}

#[cfg(test)]
mod tests;

impl Fabric {
    /// The host path of replica `rep`'s GPUs (the offload tiers' copies,
    /// [`crate::kv::offload`]): GB/s each way and latency in s of the slowest of its GPUs'
    /// best routes to a host node, each GPU moving its own share. `None` when a GPU reaches
    /// no host (the topology has none, or a link down cut it off).
    pub fn host_path(&mut self, rep: usize) -> Option<(f64, f64)> {
        let hosts: Vec<u32> =
            (0..self.topo.nodes.len() as u32).filter(|&i| self.topo.nodes[i as usize].kind == crate::topo::NodeKind::Host).collect();
        let gpus: Vec<u32> = self.placement.get(rep)?.iter().flatten().copied().collect();
        if hosts.is_empty() || gpus.is_empty() {
            return None;
        }
        let mut worst = (f64::INFINITY, 0.0f64);
        for g in gpus {
            let mut best: Option<(f64, f64)> = None;
            for &h in &hosts {
                let Some(fl) = crate::topo::collective::flow(&self.topo, &mut self.routes, g, h) else { continue };
                let bw = fl.hops.iter().map(|&(l, _)| self.topo.links[l as usize].bandwidth_gbps).fold(f64::INFINITY, f64::min);
                if best.is_none_or(|(b, lat)| bw > b || (bw == b && fl.latency_s < lat)) {
                    best = Some((bw, fl.latency_s));
                }
            }
            let (bw, lat) = best?;
            worst = (worst.0.min(bw), worst.1.max(lat));
        }
        worst.0.is_finite().then_some(worst)
    }
}
